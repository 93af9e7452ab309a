//! The executor: runs one [`Operation`] to completion.
//!
//! One readable loop ties the pure pieces together, in the manner of
//! ureq's `run.rs`:
//!
//! ```text
//!  begin: the session's plan (transaction, pin), criteria, deadline
//!  loop {
//!     reach:   select a server (avoiding deprioritized ones) or the pinned socket
//!     prepare: the session, the pin, the retry rules, the txnNumber
//!     finish:  op.build + session fields, concerns, $clusterTime,
//!              $readPreference, API version, maxTimeMS, $db       (pure: proto::finish)
//!     send:    events, the socket, the reply's times, ok: 0, SDAM  (send.rs)
//!     check:   op.handle_reply_raw (a cursor batch still bytes, see crate::reply);
//!              a writeConcernError goes to SDAM and the retry rules
//!     done, or retry.on_error(now, rng) → clock.sleep(backoff) → round again
//!  }
//! ```
//!
//! Everything decided here is decided by [`crate::proto::retry`],
//! [`crate::proto::session`], [`crate::proto::select`], [`crate::proto::sdam`]
//! and [`crate::proto::finish`]; this module only carries it out. The time comes from a
//! [`Clock`] so the loop's timing rules are tested on virtual time.

mod attempt;
mod pin;
mod send;

use std::sync::Arc;
use std::time::Duration;

use bson::Document;

use crate::error::Result;
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::proto::operation::{Operation, ServerInfo};
use crate::proto::options::{ClientOptions, ReadConcern, WriteConcern};
use crate::proto::process::CurrentProcess;
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::retry::classify::{as_timeout, carries_write_concern_error, has_write_errors};
use crate::proto::retry::{RetryPolicy, RetrySettings, TokenBucket, Tokens};
use crate::proto::sdam::TopologyType;
use crate::proto::session::cluster_time::ClusterClock;
use crate::proto::session::pool::{ServerSession, SessionPool};
use crate::proto::session::transaction::FailedCommand;
use crate::proto::session::SessionState;
use crate::shell::fork::this_process;
use crate::shell::topology::Topology;

pub(crate) use crate::shell::clock::Clock;
use attempt::Run;

/// Everything a client shares between its operations: the topology with its
/// sockets, the server-session pool, the cluster clock, the retry token
/// bucket and the time. One mutex guards it all, since operations run one
/// at a time.
pub(crate) struct ClientState {
    pub(crate) topology: Topology,
    pub(crate) sessions: SessionPool,
    pub(crate) clock: ClusterClock,
    pub(crate) retry: RetryPolicy,
    /// Where the executor and the sessions read the time and sleep.
    pub(crate) time: Arc<dyn Clock>,
    jitter: fastrand::Rng,
    /// Behind a load balancer: the session whose transaction holds the
    /// one socket.
    socket_transaction: Option<SocketOwner>,
    /// A buffer for the next long reply, whichever socket brings it (see
    /// [`ClientState::offer_read_buffer`]).
    read_buffer: Vec<u8>,
}

/// A session's transaction pinned to a load-balanced socket.
struct SocketOwner {
    serial: u32,
    lsid: Document,
}

/// Settings an operation inherits from its collection, database or client
/// (the most specific one set wins; the caller resolves that).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Inherited<'a> {
    /// A read's read preference when the operation sets none; never
    /// inside a transaction, whose own read preference wins (the
    /// transactions spec).
    pub(crate) selection_criteria: Option<&'a SelectionCriteria>,
    pub(crate) read_concern: Option<&'a ReadConcern>,
    pub(crate) write_concern: Option<&'a WriteConcern>,
    pub(crate) timeout: Option<Duration>,
    /// Whether `timeout` was set on the operation itself (refused inside a
    /// withTransaction callback under a timeout).
    pub(crate) operation_timeout: bool,
    /// A deadline already running, which `timeout` does not restart: the
    /// batches of one `insert_many` or `bulk_write` share it.
    pub(crate) deadline: Option<Deadline>,
    /// The opening command of a cursor timed per iteration: no `maxTimeMS`.
    pub(crate) omit_max_time: bool,
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
    /// The closing `killCursors` of a cursor whose `getMore` timed out:
    /// on its socket if still open, else on a new socket to the same
    /// server (see `Topology::socket_for_closing`).
    Closing {
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
    /// Boxed from start to end: a `SessionState` is large, and the
    /// executor, the cursor and the pool hand it on several times per
    /// operation.
    pub(crate) implicit_session: Option<Box<SessionState>>,
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

    fn into_implicit(self) -> Option<Box<SessionState>> {
        match self {
            SessionSlot::Implicit(s) => Some(s),
            _ => None,
        }
    }
}

impl ClientState {
    /// The state of a client on `topology`: its clock is the operations'
    /// clock, and its generator seeds theirs.
    pub(crate) fn new(mut topology: Topology) -> Self {
        let retry = RetryPolicy::new(RetrySettings::from_options(topology.options()));
        let sessions = SessionPool::new(topology.fork_rng(), topology.process_id());
        ClientState {
            time: topology.clock(),
            jitter: topology.fork_rng(),
            topology,
            sessions,
            clock: ClusterClock::default(),
            retry,
            socket_transaction: None,
            read_buffer: Vec::new(),
        }
    }

    /// A server session for an explicit session of `process`, from the pool.
    pub(crate) fn check_out_session(&mut self, process: CurrentProcess) -> ServerSession {
        let timeout = self.logical_session_timeout();
        let now = self.time.now();
        self.sessions.checkout(process, now, timeout)
    }

    /// Returns an explicit session's server session to the pool.
    pub(crate) fn check_in_session(&mut self, process: CurrentProcess, session: ServerSession) {
        let timeout = self.logical_session_timeout();
        let now = self.time.now();
        self.sessions.checkin(process, session, now, timeout);
    }

    /// The generation of `address`'s socket (0 when it has none).
    pub(crate) fn socket_generation(&self, address: &ServerAddress) -> u32 {
        self.topology.socket_generation(address)
    }

    /// Where operations read the time and sleep, for a loop that runs
    /// without the client's lock (a transaction's retries).
    pub(crate) fn time(&self) -> Arc<dyn Clock> {
        self.time.clone()
    }

    /// Replaces the retry settings (the bucket starts full).
    pub(crate) fn set_retry_settings(&mut self, settings: RetrySettings) {
        self.retry = RetryPolicy::new(settings);
    }

    /// The retry tokens left, when the retry settings use a bucket.
    pub(crate) fn retry_tokens(&self) -> Option<Tokens> {
        self.retry.bucket().map(TokenBucket::balance)
    }

    /// The options in force (with an SRV URI, once looked up).
    pub(crate) fn options(&self) -> &ClientOptions {
        self.topology.options()
    }

    /// Ends the pooled sessions on the server and closes every socket.
    pub(crate) fn close(&mut self) {
        self.end_sessions();
        self.topology.close();
    }

    /// A generator forked from the client's, for a loop of its own (a
    /// transaction's retries).
    pub(crate) fn fork_rng(&mut self) -> fastrand::Rng {
        self.jitter.fork()
    }

    /// Ends the pooled server sessions on the server (`endSessions`, sent
    /// without waiting for a reply), so a process that exits leaves none
    /// behind for the server to expire 30 minutes later.
    pub(crate) fn end_sessions(&mut self) {
        let commands = self
            .sessions
            .drain_end_sessions_commands(crate::shell::fork::current_process());
        self.topology.send_and_forget("admin", commands);
    }

    /// Keeps `buffer` for the next command to read a long reply into: a
    /// GridFS download's chunk buffer, sized before its first chunk and
    /// given back after each, so that one buffer carries the whole file.
    /// It goes to the socket of the next command sent.
    pub(crate) fn offer_read_buffer(&mut self, buffer: Vec<u8>) {
        self.read_buffer = buffer;
    }

    /// Returns an implicit session to the pool (or drops it if it is dirty
    /// or about to expire).
    pub(crate) fn check_in(&mut self, session: Option<Box<SessionState>>) {
        if let Some(mut session) = session {
            // The pid the operation's selection read (see
            // SessionState::end for a stale one).
            let pid = self.topology.process_id();
            if let Some(server_session) = session.end(pid) {
                let timeout = self.logical_session_timeout();
                let now = self.time.now();
                self.sessions
                    .checkin(this_process(pid), server_session, now, timeout);
            }
        }
    }

    /// The deadline of an operation of `timeout` that starts now, for
    /// callers that run one operation as several commands (batches).
    pub(crate) fn deadline_from_now(&self, timeout: Option<Duration>) -> Deadline {
        Deadline::from_timeout(self.time.now(), timeout)
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

    /// Runs `op` to completion: selection, retries, sessions, events, and
    /// one reauthentication when the server asks for it.
    pub(crate) fn execute<Op: Operation>(
        &mut self,
        op: &mut Op,
        explicit_session: Option<&mut SessionState>,
        inherited: Inherited<'_>,
        target: Target,
    ) -> Result<Executed<Op::Output>> {
        self.topology.begin_operation();
        let mut run = self.begin(op, explicit_session, inherited, target)?;
        let mut reauthenticated = false;
        loop {
            let address = match self.reach(&mut run, op.command_name()) {
                Ok(address) => address,
                Err(error) => match self.after_unreached(&mut run, error, op.command_name()) {
                    Ok(()) => continue,
                    Err(error) => return self.finish_error(op, error, run.session),
                },
            };
            let prepared = match self.prepare(op, &mut run, &address) {
                Ok(prepared) => prepared,
                Err(error) => return self.finish_error(op, error, run.session),
            };
            let finished = op
                .build(&prepared.info)
                .and_then(|command| self.finish(command, &mut run, &prepared));
            let outcome = match finished {
                Ok(finished) => self.send(finished, &address, &mut run.session, run.deadline),
                Err(error) => Err((error, false)),
            };
            let generation = self.topology.socket_generation(&address);
            match self.check(
                op,
                outcome,
                &address,
                generation,
                &prepared.info,
                &mut run.session,
            ) {
                Ok(Ok(output)) => return Ok(self.succeed(&mut run, output, address, generation)),
                Ok(Err(error)) => {
                    run.on_reply(&mut self.retry);
                    let error = timed_out(error, run.deadline, op.command_name());
                    return self.finish_error(op, error, run.session);
                }
                // The auth spec: reauthenticate the socket and run the
                // operation again, once, retryable or not.
                Err((error, _))
                    if error.code() == Some(REAUTHENTICATION_REQUIRED)
                        && !reauthenticated
                        && self.topology.reauthenticates() =>
                {
                    reauthenticated = true;
                    if let Err(error) = self.topology.reauthenticate(&address, run.deadline) {
                        return self.finish_error(op, error, run.session);
                    }
                }
                Err((error, sent)) => {
                    match self.after_failure(&mut run, error, sent, &prepared, &address, Op::NAME) {
                        Ok(overload) => op.before_retry(overload),
                        Err(error) => {
                            let error = timed_out(error, run.deadline, op.command_name());
                            return self.finish_error(op, error, run.session);
                        }
                    }
                }
            }
        }
    }

    /// Hands the reply to the operation. An `ok: 1` reply's
    /// writeConcernError is an application error for SDAM (a step-down
    /// under `w: majority`) and a retryable write error when labelled so;
    /// with write errors beside it the batch's result is final. On a
    /// commit the session labels it (`UnknownTransactionCommitResult`
    /// unless the write concern can never be satisfied).
    #[allow(clippy::type_complexity)]
    fn check<Op: Operation>(
        &mut self,
        op: &Op,
        outcome: std::result::Result<crate::proto::reply::Reply, send::SendError>,
        address: &ServerAddress,
        generation: u32,
        info: &ServerInfo,
        session: &mut SessionSlot<'_>,
    ) -> std::result::Result<Result<Op::Output>, send::SendError> {
        let reply = outcome?;
        match op
            .handle_reply_raw(reply, info)
            .map_err(|e| e.naming_sender(address))
        {
            Err(mut error) if carries_write_concern_error(&error) => {
                self.topology
                    .handle_operation_error(address, generation, &error);
                if let Some(s) = session.get() {
                    let failed = FailedCommand {
                        name: op.command_name(),
                        write_concern_error: true,
                    };
                    s.on_error(&mut error, failed);
                }
                if has_write_errors(&error) {
                    Ok(Err(error))
                } else {
                    Err((error, true))
                }
            }
            output => Ok(output),
        }
    }

    fn succeed<T>(
        &mut self,
        run: &mut Run<'_>,
        output: T,
        address: ServerAddress,
        generation: u32,
    ) -> Executed<T> {
        run.on_reply(&mut self.retry);
        self.note_socket_transaction(&mut run.session);
        let session = std::mem::replace(&mut run.session, SessionSlot::None);
        Executed {
            output,
            address,
            generation,
            implicit_session: session.into_implicit(),
        }
    }

    /// Gives the operation a chance to turn the error into a result (a
    /// `drop` of a missing collection succeeds), and returns the implicit
    /// session to the pool, which refuses it if the error left it dirty.
    #[cold]
    fn finish_error<Op: Operation>(
        &mut self,
        op: &Op,
        error: crate::error::Error,
        mut session: SessionSlot<'_>,
    ) -> Result<Executed<Op::Output>> {
        self.note_socket_transaction(&mut session);
        let implicit_session = session.into_implicit();
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
}

/// The server's `ReauthenticationRequired` error code.
const REAUTHENTICATION_REQUIRED: i32 = 391;

/// A reply's final error under a deadline, as CSOT reports it: a
/// `MaxTimeMSExpired` in the writeConcernError or a write error is the
/// operation's timeout too (`send` already maps the command's own).
fn timed_out(
    error: crate::error::Error,
    deadline: Deadline,
    command_name: &str,
) -> crate::error::Error {
    if deadline.is_set() {
        as_timeout(error, command_name)
    } else {
        error
    }
}

#[cfg(test)]
mod tests;
