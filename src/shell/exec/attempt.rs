//! The steps of the executor's loop around the pure pieces: the
//! operation's plan, reaching a server, preparing an attempt, and the retry
//! decision with its sleep.

use std::time::Duration;

use crate::error::{Error, ErrorKind, Result};
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::proto::operation::{Command, Operation, Retryability, ServerInfo};
use crate::proto::options::{ReadConcern, WriteConcern};
use crate::proto::retry::classify::ServerFacts;
use crate::proto::retry::{
    FailedAttempt, OperationKind, OperationRetry, RetryDecision, RetryPlan, RetryPolicy,
};
use crate::proto::sdam::TopologyType;
use crate::proto::select::{self, Criteria};
use crate::proto::session::{
    session_supported, OperationInfo, OperationPlan, SessionKind, SessionState,
};

use super::{ClientState, Inherited, SessionSlot, Target};
use crate::proto::finish::{finish, AttemptContext, Finished};
use crate::proto::retry::classify::OperationShape;
use crate::shell::clock::Clock;
use crate::shell::fork::this_process;

/// One operation's state across its attempts.
pub(super) struct Run<'s> {
    pub(super) session: SessionSlot<'s>,
    pub(super) deadline: Deadline,
    /// The opening command of a cursor timed per iteration (CSOT).
    omit_max_time: bool,
    pub(super) retry: Option<OperationRetry>,
    criteria: Criteria,
    pub(super) target: Target,
    pub(super) shape: OperationShape,
    read_concern: Option<ReadConcern>,
    write_concern: Option<WriteConcern>,
    txn_number: Option<i64>,
}

impl Run<'_> {
    /// A reply came back: the retry policy's token bookkeeping.
    pub(super) fn on_reply(&mut self, policy: &mut RetryPolicy) {
        if let Some(r) = self.retry.as_mut() {
            r.on_success(policy);
        }
    }
}

/// The session's plan for `op`: whether it runs in the transaction, where
/// it is pinned, the transaction's read preference.
fn plan_in_session<Op: Operation>(op: &Op, session: &mut SessionState) -> Result<OperationPlan> {
    let own = op.selection_criteria();
    session.begin_operation(&OperationInfo {
        is_read: reads_with_preference(op),
        read_concern_set: op.read_concern().is_some(),
        write_concern_set: op.write_concern().is_some(),
        // Only the operation's own: a handle's read preference gives way
        // to the transaction's.
        read_preference: match &own {
            Some(Criteria::ReadPreference(rp)) => Some(rp),
            _ => None,
        },
        unacknowledged: !op.is_acknowledged(),
    })
}

/// Whether `op` reads with a read preference (reads, runCommand, and
/// whatever the application gave one that is not a write): in a
/// transaction, those take the transaction's.
fn reads_with_preference<Op: Operation>(op: &Op) -> bool {
    op.reads()
        || matches!(op.selection_criteria(), Some(Criteria::ReadPreference(_)))
            && !matches!(op.retryability(), Retryability::Write)
}

/// The server an attempt runs on, as the operation and the command see it.
pub(super) struct Prepared {
    pub(super) server: ServerFacts,
    pub(super) info: ServerInfo,
    pub(super) topology_type: TopologyType,
}

impl ClientState {
    /// The operation's plan: the deadline, its session's transaction
    /// (which may pin it and choose the read preference), the criteria.
    pub(super) fn begin<'s, Op: Operation>(
        &mut self,
        op: &Op,
        explicit_session: Option<&'s mut SessionState>,
        inherited: Inherited<'_>,
        target: Target,
    ) -> Result<Run<'s>> {
        let own = op.selection_criteria();
        let criteria = own
            .clone()
            .unwrap_or_else(|| match inherited.selection_criteria {
                Some(criteria) if op.reads() => Criteria::from(criteria),
                _ => Criteria::primary_read(),
            });
        let mut session = match explicit_session {
            Some(s) => SessionSlot::Explicit(s),
            None => SessionSlot::None,
        };
        if let Some(s) = session.get() {
            self.adopt_if_forked(s)?;
        }
        // CSOT: inside withTransaction under a timeout, the callback's
        // operations take the call's deadline and may not set their own.
        let in_timed_callback = session
            .get()
            .is_some_and(|s| s.transaction_deadline().is_some());
        if in_timed_callback && inherited.operation_timeout {
            return Err(crate::error::Error::invalid_argument(
                "timeoutMS cannot be set on an operation inside a withTransaction callback whose session has a timeout",
            ));
        }
        // A running deadline (the operations of with_transaction, the
        // batches of one write) wins over the operation's own timeout.
        let deadline = session
            .get()
            .and_then(|s| s.transaction_deadline())
            .or(inherited.deadline)
            .unwrap_or_else(|| match inherited.timeout {
                // No timeout: no deadline, and no clock read to make one.
                None => Deadline::NONE,
                timeout => Deadline::from_timeout(self.time.now(), timeout),
            });
        let plan = match session.get() {
            Some(s) if Op::NAME != "endTransaction" => Some(plan_in_session(op, s)?),
            _ => None,
        };
        let in_transaction = plan.as_ref().is_some_and(|p| p.in_transaction);
        // In a transaction the operation's own read preference, else the
        // transaction's, else the primary: never the handle's.
        let criteria = match plan.as_ref().and_then(|p| p.read_preference.clone()) {
            Some(rp) if in_transaction && reads_with_preference(op) => Criteria::ReadPreference(rp),
            _ if in_transaction => own.unwrap_or_else(Criteria::primary_read),
            _ => criteria,
        };
        let target = match (target, plan.and_then(|p| p.pinned)) {
            (Target::Select, Some(pin)) => self.pinned_target(pin),
            (target, _) => target,
        };
        Ok(Run {
            session,
            deadline,
            omit_max_time: inherited.omit_max_time,
            retry: None,
            criteria,
            target,
            shape: OperationShape::of(op, in_transaction),
            read_concern: op.read_concern().or(inherited.read_concern).cloned(),
            write_concern: op.write_concern().or(inherited.write_concern).cloned(),
            txn_number: None,
        })
    }

    /// Selects a server (avoiding the deprioritized ones) with a usable
    /// socket, or checks the pinned socket is still the one.
    pub(super) fn reach(&mut self, run: &mut Run<'_>, command_name: &str) -> Result<ServerAddress> {
        match &run.target {
            Target::Select => {
                let deprioritized = run
                    .retry
                    .as_ref()
                    .map(|r| r.deprioritized().to_vec())
                    .unwrap_or_default();
                self.topology
                    .select_for(&run.criteria, command_name, &deprioritized, run.deadline)
            }
            Target::Pinned {
                address,
                generation,
            } => self
                .topology
                .pinned_socket(address, *generation)
                .map(|()| address.clone()),
            Target::Closing {
                address,
                generation,
            } => self
                .topology
                .socket_for_closing(address, *generation, run.deadline)
                .map(|()| address.clone()),
        }
    }

    /// Getting a connection is part of the attempt (the backpressure
    /// pseudocode, the retryable reads spec): a refused or reset connect or
    /// handshake goes to the retry policy like a failed command. A
    /// selection that found no server attempted nothing. A pinned socket
    /// that is gone fails a transaction's command as a network error would.
    #[cold]
    pub(super) fn after_unreached(
        &mut self,
        run: &mut Run<'_>,
        mut error: Error,
        command_name: &str,
    ) -> Result<()> {
        let topology_type = self.topology.description().topology_type;
        if let Target::Pinned { .. } = run.target {
            self.pinned_socket_lost(run, &mut error, command_name);
        }
        if run.retry.is_none() && !matches!(error.kind(), ErrorKind::ServerSelection { .. }) {
            let kind = run.shape.classify_unreached();
            run.retry = Some(self.new_retry(run, kind));
        }
        let Some(retry) = run.retry.as_mut() else {
            return Err(error);
        };
        let attempt = FailedAttempt::no_server(topology_type);
        let plan = decide(
            retry,
            &mut self.retry,
            error,
            &attempt,
            &*self.time,
            &mut self.jitter,
        )?;
        wait(&plan, &*self.time, run.shape.name);
        Ok(())
    }

    /// The session (now that the deployment's support is known), the
    /// transaction's pin, the retry rules and the retryable write's number.
    pub(super) fn prepare<Op: Operation>(
        &mut self,
        op: &Op,
        run: &mut Run<'_>,
        address: &ServerAddress,
    ) -> Result<Prepared> {
        let (server, info) = self
            .topology
            .server_for_operation(address)
            .map(|server| {
                (
                    ServerFacts::of(server),
                    ServerInfo::from_description(server),
                )
            })
            .ok_or_else(|| {
                Error::client(format!(
                    "server {address} left the topology while an operation was using it"
                ))
            })?;
        let topology_type = self.topology.description().topology_type;
        self.ensure_session(run, topology_type, op.is_acknowledged())?;
        self.pin_transaction(run, address, topology_type)?;
        let has_session = !matches!(run.session, SessionSlot::None);
        let kind = run
            .shape
            .classify_facts(&server, topology_type, has_session);
        let retry = match run.retry.as_mut() {
            Some(r) => {
                r.confirm_kind(self.retry.settings(), kind);
                r
            }
            None => {
                let retry = self.new_retry(run, kind);
                run.retry.insert(retry)
            }
        };
        // retryWrites=false: no txnNumber, as the retryable writes spec
        // asks (overload retries still apply to the write).
        if retry.kind() == OperationKind::RetryableWrite
            && self.retry.settings().retry_writes()
            && run.txn_number.is_none()
            && !run.shape.ends_transaction()
        {
            if let Some(s) = run.session.get() {
                run.txn_number = Some(s.next_retryable_write_txn_number()?);
            }
        }
        Ok(Prepared {
            info,
            server,
            topology_type,
        })
    }

    /// The retry state of the operation, of `kind`.
    fn new_retry(&self, run: &Run<'_>, kind: OperationKind) -> OperationRetry {
        if run.shape.ends_transaction() {
            OperationRetry::end_transaction(self.retry.settings(), run.deadline)
        } else {
            OperationRetry::new(self.retry.settings(), kind, run.deadline)
        }
    }

    /// An explicit session needs a deployment that supports sessions; an
    /// acknowledged operation without one gets an implicit session where
    /// they are supported.
    fn ensure_session(
        &mut self,
        run: &mut Run<'_>,
        topology_type: TopologyType,
        acknowledged: bool,
    ) -> Result<()> {
        let load_balanced = topology_type == TopologyType::LoadBalanced;
        let timeout = self.logical_session_timeout();
        match run.session {
            SessionSlot::Explicit(_) if !load_balanced => {
                session_supported(SessionKind::Explicit, timeout).map(|_| ())
            }
            SessionSlot::None if acknowledged => {
                let supported = load_balanced
                    || session_supported(SessionKind::Implicit, timeout).unwrap_or(false);
                if supported {
                    // The operation's selection read the process id; a
                    // fork cannot come between it and here on this thread.
                    let pid = self.topology.process_id();
                    let server_session =
                        self.sessions
                            .checkout(this_process(pid), self.time.now(), timeout);
                    run.session = SessionSlot::Implicit(Box::new(SessionState::implicit(
                        server_session,
                        pid,
                    )));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The pure finish, with this attempt's context.
    pub(super) fn finish(
        &self,
        command: Command,
        run: &mut Run<'_>,
        prepared: &Prepared,
    ) -> Result<Finished> {
        let ctx = AttemptContext {
            max_wire_version: prepared.server.max_wire_version,
            min_round_trip_time: prepared.server.min_round_trip_time.unwrap_or_default(),
            read_concern: run.read_concern.as_ref(),
            write_concern: run.write_concern.as_ref(),
            retryable_write: run.txn_number.is_some(),
            read_preference: select::read_preference_for_command(
                self.topology.description(),
                prepared.server.server_type,
                &run.criteria,
            ),
            server_api: self.topology.options().server_api(),
            cluster_time: self.clock.current(),
            deadline: run.deadline,
            omit_max_time: run.omit_max_time,
            now: self.time.now(),
            events_wanted: self.topology.command_events_wanted(),
        };
        finish(command, &ctx, run.session.get())
    }

    /// The retry decision after a failed attempt, and its sleep; whether
    /// the retry is an overload retry.
    #[cold]
    pub(super) fn after_failure(
        &mut self,
        run: &mut Run<'_>,
        error: Error,
        sent: bool,
        prepared: &Prepared,
        address: &ServerAddress,
        operation_name: &str,
    ) -> Result<bool> {
        let attempt = FailedAttempt {
            command_sent: sent,
            ..FailedAttempt::sent_to(
                address,
                prepared.topology_type,
                prepared.server.max_wire_version,
            )
        };
        let retry = run.retry.as_mut().expect("set by prepare");
        let plan = decide(
            retry,
            &mut self.retry,
            error,
            &attempt,
            &*self.time,
            &mut self.jitter,
        )?;
        if let Some(s) = run.session.get() {
            s.transaction_mut().undo_first_command();
            // The error unpinned the transaction from its router or its
            // load-balanced socket (an unknown commit result): the retry
            // selects afresh.
            let routed = matches!(
                prepared.topology_type,
                TopologyType::Sharded | TopologyType::LoadBalanced
            );
            if (run.shape.in_transaction || run.shape.ends_transaction())
                && routed
                && s.transaction().pinned().is_none()
            {
                run.target = Target::Select;
            }
        }
        wait(&plan, &*self.time, operation_name);
        Ok(plan.overload)
    }
}

/// The retry policy's decision on `error`, at the clock's time.
pub(super) fn decide(
    retry: &mut OperationRetry,
    policy: &mut RetryPolicy,
    error: Error,
    attempt: &FailedAttempt<'_>,
    clock: &dyn Clock,
    rng: &mut fastrand::Rng,
) -> Result<RetryPlan> {
    match retry.on_error(policy, error, attempt, clock.now(), rng) {
        RetryDecision::Retry(plan) => Ok(plan),
        RetryDecision::GiveUp(error) => Err(error),
    }
}

/// Sleeps a retry's backoff on the clock.
pub(super) fn wait(plan: &RetryPlan, clock: &dyn Clock, operation_name: &str) {
    log::debug!(target: crate::proto::retry::LOG_TARGET, "{}", plan.log_message(operation_name));
    if plan.backoff > Duration::ZERO {
        clock.sleep(plan.backoff);
    }
}
