//! The executor: runs one [`Operation`] to completion.
//!
//! It is the one readable loop that ties the pure pieces together, in the
//! manner of ureq's `run.rs`:
//!
//! ```text
//!  loop {
//!     select a server (avoiding deprioritized ones) ─ or use the pinned socket
//!     build the command for that server ─ decorate: session, txnNumber, $clusterTime,
//!         read/write concern, $readPreference, Stable API, maxTimeMS from timeoutMS
//!     CommandStarted ─ send on the server's one socket ─ read the reply
//!     ok: CommandSucceeded, gossip cluster time, interpret the reply, deposit a token
//!     error: CommandFailed, SDAM error handling, session bookkeeping,
//!         retry policy → sleep the backoff and go round, or give up
//!  }
//! ```
//!
//! Everything decided here is decided by [`crate::retry`],
//! [`crate::session`], [`crate::select`] and [`crate::sdam`]; this module
//! only carries it out.

use std::time::{Duration, Instant};

use bson::Document;

use crate::address::ServerAddress;
use crate::concern::{takes_read_concern, takes_write_concern};
use crate::conn::check_reply;
use crate::deadline::Deadline;
use crate::error::{Error, ErrorKind, Result};
use crate::event::command::{is_sensitive, redact, ConnectionInfo};
use crate::event::CommandEvent;
use crate::operation::{Command, Operation, Retryability, ServerInfo};
use crate::options::{ReadConcern, WriteConcern};
use crate::retry::{
    FailedAttempt, OperationKind, OperationRetry, RetryDecision, RetryPolicy, RetrySettings,
};
use crate::sdam::{ServerType, TopologyType};
use crate::select::{self, SelectionCriteria};
use crate::session::cluster_time::ClusterClock;
use crate::session::pool::SessionPool;
use crate::session::transaction::FailedCommand;
use crate::session::{session_supported, CommandContext, OperationInfo, SessionKind, SessionState};
use crate::topology::Topology;
use crate::wire::{MsgFlags, OpMsg};

/// Everything a client shares between its operations: the topology with its
/// sockets, the server-session pool, the cluster clock and the retry token
/// bucket. One mutex guards it all, since operations run one at a time.
pub(crate) struct ClientState {
    pub(crate) topology: Topology,
    pub(crate) sessions: SessionPool,
    pub(crate) clock: ClusterClock,
    pub(crate) retry: RetryPolicy,
    jitter: fastrand::Rng,
}

/// Settings an operation inherits from its collection, database or client
/// (the most specific one set wins; the caller resolves that).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Inherited<'a> {
    pub(crate) read_concern: Option<&'a ReadConcern>,
    pub(crate) write_concern: Option<&'a WriteConcern>,
    pub(crate) timeout: Option<Duration>,
}

/// Where an operation runs.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// Wherever server selection says.
    Select,
    /// On this server's socket of this generation, or not at all: a
    /// cursor's `getMore`/`killCursors`, a pinned transaction.
    Pinned {
        address: ServerAddress,
        generation: u32,
    },
}

/// An operation's result and where it ran, so that a cursor can stay on
/// that socket and keep the implicit session its first batch used.
// `address` and `generation` are what a cursor pins its getMores to; the
// cursor type that reads them comes with the public CRUD API.
#[allow(dead_code)]
pub(crate) struct Executed<T> {
    pub(crate) output: T,
    pub(crate) address: ServerAddress,
    pub(crate) generation: u32,
    pub(crate) implicit_session: Option<SessionState>,
}

/// The session an operation runs in.
enum SessionSlot<'a> {
    None,
    Explicit(&'a mut SessionState),
    Implicit(Box<SessionState>),
}

impl SessionSlot<'_> {
    fn get(&mut self) -> Option<&mut SessionState> {
        match self {
            SessionSlot::None => None,
            SessionSlot::Explicit(s) => Some(s),
            SessionSlot::Implicit(s) => Some(s),
        }
    }
}

impl ClientState {
    pub(crate) fn new(topology: Topology) -> Self {
        let retry = RetryPolicy::new(RetrySettings::from_options(topology.options()));
        ClientState {
            topology,
            sessions: SessionPool::new(fastrand::Rng::new()),
            clock: ClusterClock::default(),
            retry,
            jitter: fastrand::Rng::new(),
        }
    }

    /// Ends the pooled server sessions on the server (`endSessions`, sent
    /// without waiting for a reply), so a process that exits leaves none
    /// behind for the server to expire 30 minutes later.
    pub(crate) fn end_sessions(&mut self) {
        let commands = self.sessions.drain_end_sessions_commands();
        self.topology.send_and_forget("admin", commands);
    }

    /// Returns an implicit session to the pool (or drops it if it is dirty
    /// or about to expire).
    pub(crate) fn check_in(&mut self, session: Option<SessionState>) {
        if let Some(mut session) = session {
            if let Some(server_session) = session.end() {
                let timeout = self.logical_session_timeout();
                // The operation's selection read the process id; a fork
                // cannot come between it and here on this thread.
                let pid = self.topology.process_id();
                self.sessions
                    .checkin_in_process(pid, server_session, Instant::now(), timeout);
            }
        }
    }

    pub(crate) fn logical_session_timeout(&self) -> Option<u32> {
        let description = self.topology.description();
        if description.topology_type == TopologyType::LoadBalanced {
            return None;
        }
        description
            .logical_session_timeout_minutes
            .and_then(|m| u32::try_from(m).ok())
    }

    /// Runs `op` to completion: selection, retries, sessions, events.
    pub(crate) fn execute<Op: Operation>(
        &mut self,
        op: &mut Op,
        explicit_session: Option<&mut SessionState>,
        inherited: Inherited<'_>,
        target: Target,
    ) -> Result<Executed<Op::Output>> {
        let started = Instant::now();
        let deadline = Deadline::from_timeout(started, inherited.timeout);
        let mut session = match explicit_session {
            Some(s) => SessionSlot::Explicit(s),
            None => SessionSlot::None,
        };
        let criteria = op
            .selection_criteria()
            .cloned()
            .unwrap_or_else(SelectionCriteria::primary_read);
        let is_read = matches!(op.retryability(), Retryability::Read)
            || matches!(&criteria, SelectionCriteria::ReadPreference(_))
                && !matches!(op.retryability(), Retryability::Write);
        let ends_transaction = Op::NAME == "endTransaction";
        let plan = match session.get() {
            Some(_) if ends_transaction => None,
            Some(s) => Some(s.begin_operation(&OperationInfo {
                is_read,
                read_concern_set: op.read_concern().is_some(),
                write_concern_set: op.write_concern().is_some(),
                read_preference: match &criteria {
                    SelectionCriteria::ReadPreference(rp) => Some(rp),
                    _ => None,
                },
                unacknowledged: !op.is_acknowledged(),
            })?),
            None => None,
        };
        let in_transaction = plan.as_ref().is_some_and(|p| p.in_transaction);
        let criteria = match plan.as_ref().and_then(|p| p.read_preference.clone()) {
            Some(rp) if in_transaction => SelectionCriteria::ReadPreference(rp),
            _ => criteria,
        };
        let mut target = match (target, plan.as_ref().and_then(|p| p.pinned.clone())) {
            (Target::Select, Some(pin)) => Target::Pinned {
                address: pin.address.clone(),
                // Behind a load balancer the transaction is pinned to its
                // socket (the recorded one); on a sharded cluster to the
                // mongos, whichever its socket.
                generation: match pin.connection {
                    Some(socket) => u32::try_from(socket).unwrap_or(0),
                    None => self.topology.socket_generation(&pin.address),
                },
            },
            (target, _) => target,
        };

        let mut retry: Option<OperationRetry> = None;
        let mut txn_number: Option<i64> = None;
        loop {
            // 1. Where to run.
            let selected = match &target {
                Target::Select => {
                    let deprioritized = retry
                        .as_ref()
                        .map(|r| r.deprioritized().to_vec())
                        .unwrap_or_default();
                    self.topology
                        .select_for(&criteria, op.command_name(), &deprioritized, deadline)
                }
                Target::Pinned {
                    address,
                    generation,
                } => self
                    .topology
                    .pinned_socket(address, *generation)
                    .map(|()| address.clone()),
            };
            let address = match selected {
                Ok(address) => address,
                Err(error) => {
                    let topology_type = self.topology.description().topology_type;
                    // Getting a connection is part of the attempt (the
                    // backpressure pseudocode, the retryable reads spec): a
                    // refused or reset connect or handshake goes to the retry
                    // policy like a failed command. A selection that found no
                    // server attempted nothing.
                    if retry.is_none() && !matches!(error.kind(), ErrorKind::ServerSelection { .. })
                    {
                        let kind = classify_unreached(op, in_transaction);
                        retry = Some(OperationRetry::new(self.retry.settings(), kind, deadline));
                    }
                    match retry.as_mut() {
                        // Nothing was attempted yet: nothing to retry.
                        None => return self.finish_error(op, error, session),
                        Some(r) => {
                            match r.on_error(
                                &mut self.retry,
                                error,
                                &FailedAttempt::no_server(topology_type),
                                Instant::now(),
                                &mut self.jitter,
                            ) {
                                RetryDecision::Retry(plan) => {
                                    self.sleep_before_retry(&plan, Op::NAME);
                                    continue;
                                }
                                RetryDecision::GiveUp(error) => {
                                    return self.finish_error(op, error, session)
                                }
                            }
                        }
                    }
                }
            };
            let description = self.topology.server_for_operation(&address);
            let Some(server) = description else {
                return Err(Error::client(format!(
                    "server {address} left the topology while an operation was using it"
                )));
            };
            let info = ServerInfo::from_description(&server);
            let topology_type = self.topology.description().topology_type;

            // 2. The session, now that the deployment's support is known.
            if matches!(session, SessionSlot::Explicit(_))
                && topology_type != TopologyType::LoadBalanced
            {
                let timeout = self.logical_session_timeout();
                if let Err(e) = session_supported(SessionKind::Explicit, timeout) {
                    return self.finish_error(op, e, session);
                }
            }
            if matches!(session, SessionSlot::None) {
                let timeout = self.logical_session_timeout();
                let supported = topology_type == TopologyType::LoadBalanced
                    || session_supported(SessionKind::Implicit, timeout).unwrap_or(false);
                if supported && op.is_acknowledged() {
                    let pid = self.topology.process_id();
                    let server_session =
                        self.sessions
                            .checkout_in_process(pid, Instant::now(), timeout);
                    session =
                        SessionSlot::Implicit(Box::new(SessionState::implicit(server_session)));
                }
            }

            // A transaction on a sharded cluster or behind a load balancer
            // stays on the router (and socket) its first command used.
            if in_transaction
                && matches!(
                    topology_type,
                    TopologyType::Sharded | TopologyType::LoadBalanced
                )
            {
                let generation = self.topology.socket_generation(&address);
                if let Some(s) = session.get() {
                    if s.transaction().pinned().is_none() {
                        s.transaction_mut().pin(crate::session::transaction::Pin {
                            address: address.clone(),
                            connection: (topology_type == TopologyType::LoadBalanced)
                                .then_some(u64::from(generation)),
                        });
                    }
                }
            }

            // 3. How it may be retried, decided once a server is reached
            // (a failed connect decided it provisionally).
            let kind = classify(
                op,
                &criteria,
                in_transaction,
                &server,
                topology_type,
                &session,
            );
            let retry_state = match retry.as_mut() {
                Some(r) => {
                    r.confirm_kind(self.retry.settings(), kind);
                    r
                }
                None => retry.insert(OperationRetry::new(self.retry.settings(), kind, deadline)),
            };
            // retryWrites=false: no txnNumber, as the retryable writes
            // spec asks (overload retries still apply to the write).
            if retry_state.kind() == OperationKind::RetryableWrite
                && self.retry.settings().retry_writes()
                && txn_number.is_none()
                && !ends_transaction
            {
                if let Some(s) = session.get() {
                    txn_number = Some(s.next_retryable_write_txn_number()?);
                }
            }

            // 4. The command.
            let mut command = match op.build(&info) {
                Ok(c) => c,
                Err(e) => return self.finish_error(op, e, session),
            };
            let outcome = self.send(
                &mut command,
                &address,
                &server,
                &criteria,
                &mut session,
                op.write_concern().or(inherited.write_concern),
                op.read_concern().or(inherited.read_concern),
                txn_number,
                deadline,
            );
            let generation = self.topology.socket_generation(&address);
            let outcome = match outcome {
                Ok(reply) => match op.handle_reply(reply, &info) {
                    // An `ok: 1` reply's writeConcernError is an application
                    // error for SDAM (a step-down under `w: majority`) and a
                    // retryable write error when labelled so.
                    Err(error) if carries_write_concern_error(&error) => {
                        self.topology
                            .handle_operation_error(&address, generation, &error);
                        if has_write_errors(&error) {
                            Ok(Err(error))
                        } else {
                            Err((error, true))
                        }
                    }
                    output => Ok(output),
                },
                Err(failed) => Err(failed),
            };
            match outcome {
                Ok(output) => {
                    if let Some(r) = retry.as_mut() {
                        r.on_success(&mut self.retry);
                    }
                    let output = match output {
                        Ok(o) => o,
                        Err(e) => return self.finish_error(op, e, session),
                    };
                    let implicit_session = match session {
                        SessionSlot::Implicit(s) => Some(*s),
                        _ => None,
                    };
                    return Ok(Executed {
                        output,
                        address,
                        generation,
                        implicit_session,
                    });
                }
                Err((error, command_sent)) => {
                    let attempt = if command_sent {
                        FailedAttempt::sent_to(&address, topology_type, server.max_wire_version)
                    } else {
                        FailedAttempt {
                            command_sent: false,
                            ..FailedAttempt::sent_to(
                                &address,
                                topology_type,
                                server.max_wire_version,
                            )
                        }
                    };
                    let decision = retry.as_mut().expect("set above").on_error(
                        &mut self.retry,
                        error,
                        &attempt,
                        Instant::now(),
                        &mut self.jitter,
                    );
                    match decision {
                        RetryDecision::Retry(plan) => {
                            if let Some(s) = session.get() {
                                s.transaction_mut().undo_first_command();
                                // The error unpinned the transaction from
                                // its router (an unknown commit result):
                                // the retry selects a router afresh.
                                if (in_transaction || ends_transaction)
                                    && topology_type == TopologyType::Sharded
                                    && s.transaction().pinned().is_none()
                                {
                                    target = Target::Select;
                                }
                            }
                            self.sleep_before_retry(&plan, Op::NAME);
                        }
                        RetryDecision::GiveUp(error) => {
                            return self.finish_error(op, error, session)
                        }
                    }
                }
            }
        }
    }

    /// Decorates and sends one command, publishing its events; errors come
    /// back with whether the command reached the socket.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        command: &mut Command,
        address: &ServerAddress,
        server: &crate::sdam::ServerDescription,
        criteria: &SelectionCriteria,
        session: &mut SessionSlot<'_>,
        write_concern: Option<&WriteConcern>,
        read_concern: Option<&ReadConcern>,
        txn_number: Option<i64>,
        deadline: Deadline,
    ) -> std::result::Result<Document, (Error, bool)> {
        let now = Instant::now();
        let body = &mut command.body;
        match session.get() {
            Some(s) => {
                let context = CommandContext {
                    max_wire_version: server.max_wire_version,
                    accepts_read_concern: takes_read_concern(command.name, body),
                    accepts_write_concern: takes_write_concern(command.name, body),
                    read_concern,
                    write_concern,
                    retryable_write: txn_number.is_some(),
                    client_cluster_time: self.clock.current(),
                };
                if let Err(e) = s.decorate(body, &context, now) {
                    return Err((e, false));
                }
            }
            None => {
                self.clock.attach(body, server.max_wire_version);
                if let Some(wc) = write_concern {
                    if !body.contains_key("writeConcern") && takes_write_concern(command.name, body)
                    {
                        if let Some(document) =
                            crate::session::transaction::write_concern_document(wc)
                        {
                            body.insert("writeConcern", document);
                        }
                    }
                }
                if let Some(rc) = read_concern {
                    if !body.contains_key("readConcern") && takes_read_concern(command.name, body) {
                        body.insert("readConcern", bson::doc! { "level": rc.level.clone() });
                    }
                }
            }
        }
        if let Some(rp) = select::read_preference_for_command(
            self.topology.description(),
            server.server_type,
            criteria,
        ) {
            if !body.contains_key("$readPreference") {
                body.insert("$readPreference", rp);
            }
        }
        if let Some(api) = self.topology.options().server_api() {
            body.insert("apiVersion", api.version.clone());
            if let Some(strict) = api.strict {
                body.insert("apiStrict", strict);
            }
            if let Some(errors) = api.deprecation_errors {
                body.insert("apiDeprecationErrors", errors);
            }
        }
        if deadline.is_set() && !body.contains_key("maxTimeMS") && sends_max_time(command.name) {
            let min_rtt = server.min_round_trip_time.unwrap_or_default();
            match deadline.max_time_ms(now, min_rtt, "sending the command") {
                Ok(Some(ms)) => {
                    body.insert("maxTimeMS", ms);
                }
                Ok(None) => {}
                Err(e) => return Err((e, false)),
            }
        }
        body.insert("$db", command.target_db.clone());

        // CSOT: timeoutMS replaces socketTimeoutMS (it does not combine with
        // it), and nothing is written once the deadline has passed.
        let socket_timeout = if deadline.is_set() {
            if let Err(e) = deadline.check(Instant::now(), "sending the command") {
                return Err((e, false));
            }
            deadline.remaining(Instant::now())
        } else {
            self.topology.options().socket_timeout()
        };
        let request_id = crate::conn::next_request_id();
        // Events name the command by the body's first key, as the spec says:
        // `Command::name` is "runCommand" for a caller's command it does not
        // know, and sensitivity must be judged on the real name.
        let event_name = body
            .keys()
            .next()
            .cloned()
            .unwrap_or_else(|| command.name.to_string());
        let sensitive = is_sensitive(&event_name, body);
        let Some(connection) = self.topology.connection_mut(address) else {
            return Err((
                Error::network_message(Some(address.clone()), "the server's socket is gone"),
                false,
            ));
        };
        let connection_info = ConnectionInfo {
            address: address.clone(),
            driver_connection_id: connection.id(),
            server_connection_id: connection.server_id(),
            service_id: connection.service_id(),
        };
        let generation = connection.generation();
        let msg = OpMsg {
            flags: if write_concern_unacknowledged(body) {
                MsgFlags::MORE_TO_COME
            } else {
                MsgFlags::default()
            },
            body: std::mem::take(body),
            sequences: std::mem::take(&mut command.sequences),
        };
        self.topology.publish_command_event(&CommandEvent::Started {
            command: redact(sensitive, &with_sequences_folded_in(&msg)),
            database_name: command.target_db.clone(),
            command_name: event_name.clone(),
            request_id,
            connection: connection_info.clone(),
        });
        let sent_at = Instant::now();
        let connection = self
            .topology
            .connection_mut(address)
            .expect("checked above");
        let unacknowledged = msg.flags.has(MsgFlags::MORE_TO_COME);
        let result = connection
            .send_msg(request_id, &msg, socket_timeout)
            // A w:0 write gets no reply; the spec's events report `{ok: 1}`.
            .map(|reply| {
                if unacknowledged {
                    bson::doc! { "ok": 1 }
                } else {
                    reply
                }
            });
        command.body = msg.body;
        command.sequences = msg.sequences;
        let duration = sent_at.elapsed();
        let result = result.inspect(|reply| {
            if let Some(s) = session.get() {
                s.on_reply(reply, &mut self.clock);
            } else {
                self.clock.observe_reply(reply);
            }
        });
        // check_reply passes an `ok: 1` reply through by value: no copy.
        let result = result.and_then(|reply| check_reply(reply, address));
        match result {
            Ok(reply) => {
                // The event's copy of the reply only when someone listens.
                if self.topology.command_events_wanted() {
                    self.topology
                        .publish_command_event(&CommandEvent::Succeeded {
                            reply: redact(sensitive, &reply),
                            command_name: event_name,
                            request_id,
                            duration,
                            connection: connection_info,
                        });
                }
                Ok(reply)
            }
            Err(mut error) => {
                self.topology.publish_command_event(&CommandEvent::Failed {
                    failure: error.clone(),
                    command_name: event_name,
                    request_id,
                    duration,
                    connection: connection_info,
                });
                self.topology
                    .handle_operation_error(address, generation, &error);
                if let Some(s) = session.get() {
                    s.on_error(
                        &mut error,
                        FailedCommand {
                            name: command.name,
                            write_concern_error: false,
                        },
                    );
                }
                if deadline.is_set() {
                    error = as_timeout(error, command.name);
                }
                Err((error, true))
            }
        }
    }

    /// Gives the operation a chance to turn the error into a result (a
    /// `drop` of a missing collection succeeds), and returns the implicit
    /// session to the pool, which refuses it if the error left it dirty.
    fn finish_error<Op: Operation>(
        &mut self,
        op: &Op,
        error: Error,
        session: SessionSlot<'_>,
    ) -> Result<Executed<Op::Output>> {
        let implicit_session = match session {
            SessionSlot::Implicit(s) => Some(*s),
            _ => None,
        };
        match op.handle_error(error) {
            Ok(output) => Ok(Executed {
                output,
                address: ServerAddress::tcp("", 0),
                generation: 0,
                implicit_session,
            }),
            Err(error) => {
                self.check_in(implicit_session);
                Err(error)
            }
        }
    }

    fn sleep_before_retry(&mut self, plan: &crate::retry::RetryPlan, command_name: &str) {
        log::debug!(target: crate::retry::LOG_TARGET, "{}", plan.log_message(command_name));
        if !plan.backoff.is_zero() {
            std::thread::sleep(plan.backoff);
        }
    }
}

/// CSOT's error transformations, for an operation with a deadline: a socket
/// timeout (the read was bounded by the time left) and the server's
/// `MaxTimeMSExpired` (code 50, the `maxTimeMS` derived from the time left)
/// both mean the operation ran out of time. The timeout error keeps the
/// cause in its text and the labels.
fn as_timeout(error: Error, command_name: &str) -> Error {
    const MAX_TIME_MS_EXPIRED: i32 = 50;
    let socket_timeout = matches!(error.kind(), ErrorKind::Network { timeout: true, .. });
    let server_timeout =
        matches!(error.kind(), ErrorKind::Command(c) if c.code == MAX_TIME_MS_EXPIRED);
    if !(socket_timeout || server_timeout) {
        return error;
    }
    Deadline::timeout_error(&format!("waiting for {command_name}: {error}"))
        .with_labels(error.labels())
}

/// Whether `error` comes from an `ok: 1` reply with a writeConcernError.
fn carries_write_concern_error(error: &Error) -> bool {
    use crate::results::{BulkWriteFailure, WriteFailure};
    matches!(
        error.kind(),
        ErrorKind::Write(WriteFailure::WriteConcernError(_))
            | ErrorKind::BulkWrite(BulkWriteFailure {
                write_concern_error: Some(_),
                ..
            })
    )
}

/// Whether a batch failed with write errors: those are final, so the batch
/// is not retried even when its write concern error is retryable.
fn has_write_errors(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::BulkWrite(f) if !f.write_errors.is_empty())
}

/// The retry rules for a failure to connect before any server was reached:
/// as [`classify`] would say for a server that supports retryable writes.
/// Retrying a command that was never sent cannot repeat a write; the kind is
/// confirmed by [`OperationRetry::confirm_kind`] once a server answers.
fn classify_unreached<Op: Operation>(op: &Op, in_transaction: bool) -> OperationKind {
    let is_write = matches!(op.retryability(), Retryability::Write)
        || (!matches!(op.retryability(), Retryability::Read) && !is_read_only(Op::NAME));
    if Op::NAME == "runCommand" {
        OperationKind::RunCommand
    } else if in_transaction && is_write {
        OperationKind::OtherWrite
    } else if in_transaction {
        OperationKind::OtherRead
    } else {
        match op.retryability() {
            Retryability::Read => OperationKind::RetryableRead,
            Retryability::Write if op.is_acknowledged() => OperationKind::RetryableWrite,
            Retryability::Write | Retryability::None if is_write => OperationKind::OtherWrite,
            Retryability::Write | Retryability::None => OperationKind::OtherRead,
        }
    }
}

/// The retry rules that apply to `op` on `server`.
fn classify<Op: Operation>(
    op: &Op,
    criteria: &SelectionCriteria,
    in_transaction: bool,
    server: &crate::sdam::ServerDescription,
    topology_type: TopologyType,
    session: &SessionSlot<'_>,
) -> OperationKind {
    let _ = criteria;
    if Op::NAME == "runCommand" {
        return OperationKind::RunCommand;
    }
    let is_write = matches!(op.retryability(), Retryability::Write)
        || (!matches!(op.retryability(), Retryability::Read) && !is_read_only(Op::NAME));
    if in_transaction {
        return if is_write {
            OperationKind::OtherWrite
        } else {
            OperationKind::OtherRead
        };
    }
    match op.retryability() {
        Retryability::Read => OperationKind::RetryableRead,
        Retryability::Write => {
            let has_session = !matches!(session, SessionSlot::None);
            let supports = server.server_type != ServerType::Standalone
                && (server.logical_session_timeout_minutes.is_some()
                    || topology_type == TopologyType::LoadBalanced);
            if has_session && supports && op.is_acknowledged() {
                OperationKind::RetryableWrite
            } else {
                OperationKind::OtherWrite
            }
        }
        Retryability::None if is_write => OperationKind::OtherWrite,
        Retryability::None => OperationKind::OtherRead,
    }
}

fn is_read_only(name: &str) -> bool {
    matches!(
        name,
        "getMore" | "killCursors" | "listCollections" | "listIndexes" | "listDatabases"
    )
}

/// Commands that get a `maxTimeMS` from `timeoutMS` (CSOT: not getMore,
/// killCursors or commit, which carry their own).
fn sends_max_time(name: &str) -> bool {
    !matches!(name, "getMore" | "killCursors" | "endSessions")
}

fn write_concern_unacknowledged(body: &Document) -> bool {
    body.get_document("writeConcern")
        .ok()
        .and_then(|wc| match wc.get("w") {
            Some(bson::Bson::Int32(0)) => Some(true),
            Some(bson::Bson::Int64(0)) => Some(true),
            _ => None,
        })
        .unwrap_or(false)
}

/// The command as the monitoring spec shows it: OP_MSG document sequences
/// appear as arrays in the body, as if the command had been sent without them.
fn with_sequences_folded_in(msg: &OpMsg) -> Document {
    let mut command = msg.body.clone();
    for sequence in &msg.sequences {
        command.insert(
            sequence.identifier.clone(),
            sequence
                .documents
                .iter()
                .cloned()
                .map(bson::Bson::Document)
                .collect::<Vec<_>>(),
        );
    }
    command
}
