//! [`ClientSession`]: explicit sessions and transactions.
//!
//! The rules (what each command carries, which transitions are allowed,
//! what `with_transaction` retries) are the pure [`crate::session`] layer;
//! this type holds a session's state between operations and sends the
//! commit and abort commands through the executor.

use bson::Document;

use crate::client::Client;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::exec::{Clock, Target};
use crate::operation::EndTransaction;
use crate::session::transaction::TransactionOptions;
use crate::session::with_transaction::{Decision, WithTransaction};
use crate::session::{SessionOptions, SessionState};

/// An explicit session: causally consistent reads by default, and the
/// context of a transaction. Pass it to the `*_with_session` methods.
///
/// Dropping a session aborts a transaction still in progress and returns
/// the server session to the client's pool.
pub struct ClientSession {
    client: Client,
    state: SessionState,
}

impl std::fmt::Debug for ClientSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("id", &self.state.id())
            .finish_non_exhaustive()
    }
}

impl ClientSession {
    pub(crate) fn start(client: &Client, options: SessionOptions) -> Result<ClientSession> {
        options.validate()?;
        let server_session = {
            let mut state = client.state();
            let timeout = state.logical_session_timeout();
            let now = state.time.now();
            state.sessions.checkout(now, timeout)
        };
        Ok(ClientSession {
            client: client.clone(),
            state: SessionState::explicit(options, server_session)?,
        })
    }

    pub(crate) fn state_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }

    /// The session id (`lsid`) the server knows it by.
    pub fn id(&self) -> Option<&Document> {
        self.state.id()
    }

    /// The client this session belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Starts a transaction; the next operation in this session begins it
    /// on the server.
    pub fn start_transaction(
        &mut self,
        options: impl Into<Option<TransactionOptions>>,
    ) -> Result<()> {
        let options = options.into();
        self.state
            .start_transaction(options.as_ref(), &TransactionOptions::default())
    }

    /// Commits the transaction. A commit that fails with a retryable error
    /// is retried once with a majority write concern; an error with the
    /// `UnknownTransactionCommitResult` label may be retried by calling
    /// this again.
    pub fn commit_transaction(&mut self) -> Result<()> {
        let Some(body) = self.state.commit_transaction()? else {
            return Ok(());
        };
        let retry_body = self.state.transaction().commit_retry();
        let mut op = EndTransaction::commit(body, retry_body);
        // A sharded transaction lives on the router its first command
        // chose: the commit goes there too (a retry may go elsewhere, see
        // the executor).
        let target = self.state.transaction().pinned().map(|pin| Target::Pinned {
            address: pin.address.clone(),
            generation: pin.connection.map(|g| g as u32).unwrap_or(0),
        });
        self.run_end(&mut op, target).map(|_| ())
    }

    /// Aborts the transaction. Errors from the server are ignored, as the
    /// transactions spec asks: the transaction is over either way.
    pub fn abort_transaction(&mut self) -> Result<()> {
        let Some(abort) = self.state.abort_transaction()? else {
            return Ok(());
        };
        let mut op = EndTransaction::abort(abort.body);
        let target = abort.pinned.map(|pin| Target::Pinned {
            address: pin.address,
            generation: pin.connection.map(|g| g as u32).unwrap_or(0),
        });
        // An abort gets a timeout of its own (CSOT): the transaction's
        // deadline may be what just passed.
        let shared = self.state.transaction_deadline();
        self.state.set_transaction_deadline(None);
        let _ = self.run_end(&mut op, target);
        self.state.set_transaction_deadline(shared);
        Ok(())
    }

    fn run_end(&mut self, op: &mut EndTransaction, target: Option<Target>) -> Result<Document> {
        // Before taking the state: `defaults` takes it too.
        let inherited = self.client.defaults().timeout_only();
        let mut state = self.client.state();
        let target = match target {
            Some(Target::Pinned {
                address,
                generation: 0,
            }) => Target::Pinned {
                generation: state.topology.socket_generation(&address),
                address,
            },
            Some(t) => t,
            None => Target::Select,
        };
        state
            .execute(op, Some(&mut self.state), inherited, target)
            .map(|e| e.output)
    }

    /// Runs `callback` in a transaction and commits it, retrying the whole
    /// transaction on `TransientTransactionError` and the commit on
    /// `UnknownTransactionCommitResult`, for up to the client's `timeoutMS`
    /// or else 120 seconds (the convenient transactions API).
    pub fn with_transaction<R, F>(
        &mut self,
        options: impl Into<Option<TransactionOptions>>,
        callback: F,
    ) -> Result<R>
    where
        F: FnMut(&mut ClientSession) -> Result<R>,
    {
        // The clock is taken out of the client's state so that no lock is
        // held while the callback runs or a backoff sleeps.
        let clock = self.client.state().time.clone();
        // The client's timeoutMS, when set, bounds the retries instead of
        // the default 120 seconds, and the callback's operations and the
        // commit share its deadline.
        let timeout = self.client.defaults().timeout;
        let started = clock.now();
        let deadline = Deadline::from_timeout(started, timeout);
        self.state
            .set_transaction_deadline(deadline.is_set().then_some(deadline));
        let loop_state = WithTransaction::new(started, timeout);
        let result = self.transaction_attempts(options.into(), callback, &*clock, loop_state);
        self.state.set_transaction_deadline(None);
        result
    }

    fn transaction_attempts<R, F>(
        &mut self,
        options: Option<TransactionOptions>,
        mut callback: F,
        clock: &dyn Clock,
        mut loop_state: WithTransaction,
    ) -> Result<R>
    where
        F: FnMut(&mut ClientSession) -> Result<R>,
    {
        let mut jitter = fastrand::Rng::new();
        'transaction: loop {
            let backoff = loop_state.before_attempt(clock.now(), jitter.f64())?;
            if !backoff.is_zero() {
                clock.sleep(backoff);
            }
            self.start_transaction(options.clone())?;
            let result = match callback(self) {
                Ok(result) => result,
                Err(error) => {
                    let state = self.state.transaction().state();
                    let failure = loop_state.after_callback_error(error, state, clock.now());
                    if failure.abort {
                        self.abort_transaction()?;
                    }
                    match failure.then {
                        Decision::RetryTransaction => continue 'transaction,
                        Decision::Fail(error) => return Err(error),
                        _ => unreachable!("a callback failure retries or fails"),
                    }
                }
            };
            if let Decision::Return = loop_state.after_callback_ok(self.state.transaction().state())
            {
                return Ok(result);
            }
            loop {
                match self.commit_transaction() {
                    Ok(()) => return Ok(result),
                    Err(error) => match loop_state.after_commit_error(error, clock.now()) {
                        Decision::RetryCommit => continue,
                        Decision::RetryTransaction => continue 'transaction,
                        Decision::Fail(error) => return Err(error),
                        _ => unreachable!("a commit failure retries or fails"),
                    },
                }
            }
        }
    }
}

impl Drop for ClientSession {
    fn drop(&mut self) {
        // A transaction inherited across fork() is the parent's to end.
        let inherited = self.state.inherited_by(std::process::id());
        if self.state.transaction().state().is_active() && !inherited {
            let _ = self.abort_transaction();
        }
        let server_session = self.state.end();
        if let Some(server_session) = server_session {
            let mut state = self.client.state();
            let timeout = state.logical_session_timeout();
            let now = state.time.now();
            state.sessions.checkin(server_session, now, timeout);
        }
    }
}
