//! [`ClientSession`]: explicit sessions and transactions.
//!
//! The rules (what each command carries, which transitions are allowed,
//! what `with_transaction` retries) are the pure [`crate::session`] layer;
//! this type holds a session's state between operations and sends the
//! commit and abort commands through the executor.

use bson::Document;

use crate::api::client::Client;
use crate::error::Result;
use crate::proto::deadline::Deadline;
use crate::proto::operation::EndTransaction;
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::session::cluster_time::ClusterTime;
use crate::proto::session::transaction::{TransactionOptions, TransactionState};
use crate::proto::session::with_transaction::{Decision, WithTransaction};
use crate::proto::session::{SessionOptions, SessionState};
use crate::shell::exec::{Clock, Inherited, Target};
use std::time::Duration;

/// An explicit session: causally consistent reads by default, and the
/// context of a transaction. Pass it to an operation with
/// `.session(&mut session)`.
///
/// Dropping a session aborts a transaction still in progress and returns
/// the server session to the client's pool.
pub struct ClientSession {
    client: Client,
    state: SessionState,
    /// The session's `defaultTimeoutMS`.
    default_timeout: Option<Duration>,
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
        let process = crate::shell::fork::current_process();
        let server_session = client.state()?.check_out_session(process);
        Ok(ClientSession {
            client: client.clone(),
            default_timeout: options.default_timeout,
            state: SessionState::explicit(options, server_session, process.id)?,
        })
    }

    pub(crate) fn state_mut(&mut self) -> &mut SessionState {
        &mut self.state
    }

    /// The session id (`lsid`) the server knows it by.
    pub fn id(&self) -> &Document {
        // An explicit session holds its server session until it is dropped.
        self.state
            .id()
            .expect("an explicit session has a server session until dropped")
    }

    /// The latest cluster time this session has seen, once it has run an
    /// operation on a deployment that reports one (or was advanced to one).
    pub fn cluster_time(&self) -> Option<&ClusterTime> {
        self.state.cluster_time()
    }

    /// Moves this session's cluster time to `to` when `to` is later (the
    /// sessions spec's `advanceClusterTime`): its next command then carries
    /// at least `to`, so a session can read causally after what another
    /// session or process saw. The client's own clock, which trusts only
    /// servers, is left as it is.
    pub fn advance_cluster_time(&mut self, to: &ClusterTime) {
        self.state.advance_cluster_time(to);
    }

    /// The snapshot a snapshot session reads from: the `snapshotTime` it
    /// was started with, else the `atClusterTime` the server chose on its
    /// first read; `None` for other sessions and before that first read.
    pub fn snapshot_time(&self) -> Option<bson::Timestamp> {
        self.state.snapshot_time()
    }

    /// The client this session belongs to (a handle to the same client, as
    /// the official driver returns).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Where this session's transaction stands (none, starting, in progress,
    /// committed, aborted).
    pub fn transaction_state(&self) -> TransactionState {
        self.state.transaction().state()
    }

    /// Whether the transaction is pinned to one mongos (sharded) or one
    /// connection (load-balanced), so its commands must all go there.
    pub fn is_pinned(&self) -> bool {
        self.state.transaction().pinned().is_some()
    }

    /// Whether a network error marked the server session dirty, so the
    /// client discards it instead of reusing it when this session ends.
    pub fn is_dirty(&self) -> bool {
        self.state.server_session().is_some_and(|s| s.dirty)
    }

    /// Starts a transaction (with `.run()`, or `.and_run(callback)` for
    /// the retried callback form); the next operation in this session begins
    /// it on the server.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("transactions");
    /// coll.insert_one(doc! {}).run()?; // creates the collection outside the transaction
    /// let mut session = client.start_session().run()?;
    /// session.start_transaction().run()?;
    /// coll.insert_one(doc! { "in": "transaction" }).session(&mut session).run()?;
    /// session.commit_transaction().run()?;
    /// assert_eq!(coll.count_documents(doc! { "in": "transaction" }).run()?, 1);
    /// # coll.drop().run()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn start_transaction(&mut self) -> StartTransaction<&mut ClientSession> {
        StartTransaction {
            session: self,
            options: TransactionOptions::default(),
            timeout: None,
        }
    }

    /// Commits the transaction (with `.run()`). A commit that fails with a
    /// retryable error is retried once with a majority write concern; an
    /// error with the `UnknownTransactionCommitResult` label may be retried
    /// by committing again.
    pub fn commit_transaction(&mut self) -> CommitTransaction<'_> {
        CommitTransaction {
            session: self,
            timeout: None,
        }
    }

    /// Aborts the transaction (with `.run()`). Errors from the server are
    /// ignored, as the transactions spec asks: the transaction is over
    /// either way.
    pub fn abort_transaction(&mut self) -> AbortTransaction<'_> {
        AbortTransaction {
            session: self,
            timeout: None,
        }
    }

    /// The `timeoutMS` of one of the session's own operations: its own,
    /// else the session's default, else the client's (CSOT).
    fn timeout_of(&self, own: Option<Duration>) -> Option<Duration> {
        own.or(self.default_timeout)
            .or_else(|| self.client.defaults().timeout)
    }

    fn begin_transaction(&mut self, options: Option<TransactionOptions>) -> Result<()> {
        // What the transaction inherits when neither its options nor the
        // session's defaults say: the client's concerns and read preference.
        let defaults = self.client.defaults();
        let client = TransactionOptions {
            read_concern: defaults.read_concern,
            write_concern: defaults.write_concern,
            // A client's predicate is for reads outside transactions.
            selection_criteria: defaults
                .selection_criteria
                .filter(|c| matches!(c, SelectionCriteria::ReadPreference(_))),
            ..TransactionOptions::default()
        };
        self.state.start_transaction(options.as_ref(), &client)
    }

    fn commit_now(&mut self, timeout: Option<Duration>) -> Result<()> {
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
        self.run_end(&mut op, target, timeout).map(|_| ())
    }

    pub(crate) fn abort_now(&mut self, timeout: Option<Duration>) -> Result<()> {
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
        let _ = self.run_end(&mut op, target, timeout);
        self.state.set_transaction_deadline(shared);
        Ok(())
    }

    fn run_end(
        &mut self,
        op: &mut EndTransaction,
        target: Option<Target>,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        // Before taking the state: `defaults` takes it too.
        let inherited = Inherited {
            timeout: self.timeout_of(timeout),
            ..Inherited::default()
        };
        let mut state = self.client.state()?;
        let target = match target {
            Some(Target::Pinned {
                address,
                generation: 0,
            }) => Target::Pinned {
                generation: state.socket_generation(&address),
                address,
            },
            Some(t) => t,
            None => Target::Select,
        };
        state
            .execute(op, Some(&mut self.state), inherited, target)
            .map(|e| e.output)
    }

    fn with_transaction<R, F>(
        &mut self,
        options: Option<TransactionOptions>,
        timeout: Option<Duration>,
        callback: F,
    ) -> Result<R>
    where
        F: FnMut(&mut ClientSession) -> Result<R>,
    {
        // The clock is taken out of the client's state so that no lock is
        // held while the callback runs or a backoff sleeps.
        let (clock, jitter) = {
            let mut state = self.client.state()?;
            (state.time(), state.fork_rng())
        };
        // The call's timeoutMS (its own, the session's or the client's),
        // when set, bounds the retries instead of the default 120 seconds,
        // and the callback's operations and the commit share its deadline.
        let timeout = self.timeout_of(timeout);
        let started = clock.now();
        let deadline = Deadline::from_timeout(started, timeout);
        self.state
            .set_transaction_deadline(deadline.is_set().then_some(deadline));
        let loop_state = WithTransaction::new(started, timeout);
        let timing = (&*clock, jitter, timeout);
        let result = self.transaction_attempts(options, callback, timing, loop_state);
        self.state.set_transaction_deadline(None);
        result
    }

    fn transaction_attempts<R, F>(
        &mut self,
        options: Option<TransactionOptions>,
        mut callback: F,
        (clock, mut jitter, timeout): (&dyn Clock, fastrand::Rng, Option<Duration>),
        mut loop_state: WithTransaction,
    ) -> Result<R>
    where
        F: FnMut(&mut ClientSession) -> Result<R>,
    {
        'transaction: loop {
            let backoff = loop_state.before_attempt(clock.now(), jitter.f64())?;
            if !backoff.is_zero() {
                clock.sleep(backoff);
            }
            self.begin_transaction(options.clone())?;
            let result = match callback(self) {
                Ok(result) => result,
                Err(error) => {
                    let state = self.state.transaction().state();
                    let failure = loop_state.after_callback_error(error, state, clock.now());
                    if failure.abort {
                        // The call's timeout afresh: its deadline may be
                        // what ran out.
                        self.abort_now(timeout)?;
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
                match self.commit_now(None) {
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
        let process = crate::shell::fork::current_process();
        let inherited = self.state.inherited_by(process.id);
        if self.state.transaction().state().is_active() && !inherited {
            let _ = self.abort_now(None);
        }
        let server_session = self.state.end(process.id);
        // Dropped inside one of the client's callbacks, the server session
        // cannot go back to the pool; the server ends it when it times out.
        if let (Some(server_session), Ok(mut state)) = (server_session, self.client.state()) {
            state.check_in_session(process, server_session);
        }
    }
}

/// `session.start_transaction()`: the transaction's options, set by name or
/// with `with_options`, then `run` (or `and_run` for the retried callback
/// form).
#[must_use = "nothing happens until `run` or `and_run`"]
///
/// `S` is the session it starts the transaction in, as in the official
/// driver's `StartTransaction<&mut ClientSession>`.
pub struct StartTransaction<S> {
    session: S,
    options: TransactionOptions,
    timeout: Option<Duration>,
}

impl<S> StartTransaction<S> {
    /// Sets every option at once, replacing any set on this builder before.
    pub fn with_options(mut self, options: impl Into<Option<TransactionOptions>>) -> Self {
        self.options = options.into().unwrap_or_default();
        self
    }

    /// The read concern of the transaction's first command.
    pub fn read_concern(mut self, value: crate::options::ReadConcern) -> Self {
        self.options.read_concern = Some(value);
        self
    }

    /// The write concern of the commit and the abort.
    pub fn write_concern(mut self, value: crate::options::WriteConcern) -> Self {
        self.options.write_concern = Some(value);
        self
    }

    /// Where the transaction's reads go: a read preference, which must be
    /// primary.
    pub fn selection_criteria(mut self, value: SelectionCriteria) -> Self {
        self.options.selection_criteria = Some(value);
        self
    }

    /// The commit's `maxTimeMS`.
    pub fn max_commit_time(mut self, value: std::time::Duration) -> Self {
        self.options.max_commit_time = Some(value);
        self
    }

    fn options(&self) -> Option<TransactionOptions> {
        (self.options != TransactionOptions::default()).then(|| self.options.clone())
    }

    /// The `timeoutMS` of [`and_run`](Self::and_run)'s whole call (every
    /// attempt, the callback's operations in the session, the commits),
    /// overriding the session's and the client's; the callback's
    /// operations may then not set their own. `run` sends nothing, so it
    /// refuses one.
    pub fn timeout(mut self, value: Duration) -> Self {
        self.timeout = Some(value);
        self
    }
}

impl StartTransaction<&mut ClientSession> {
    /// Starts the transaction.
    pub fn run(self) -> Result<()> {
        if self.timeout.is_some() {
            return Err(crate::error::Error::invalid_argument(
                "a timeout on start_transaction applies to and_run; run sends nothing to time",
            ));
        }
        let options = self.options();
        self.session.begin_transaction(options)
    }

    /// Starts the transaction, runs `callback` in it and commits it,
    /// retrying the whole transaction on `TransientTransactionError` and the
    /// commit on `UnknownTransactionCommitResult`, for up to the client's
    /// `timeoutMS` or else 120 seconds (the convenient transactions API).
    /// A callback's own error can be carried out with
    /// [`Error::custom`](crate::Error::custom).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let orders = client.database("docs").collection::<Document>("orders");
    /// let stock = client.database("docs").collection::<Document>("stock");
    /// stock.update_one(doc! { "_id": "pen" }, doc! { "$set": { "n": 10 } }).upsert(true).run()?;
    /// orders.insert_one(doc! {}).run()?; // creates the collection outside the transaction
    ///
    /// let mut session = client.start_session().run()?;
    /// session.start_transaction().and_run(|session| {
    ///     orders.insert_one(doc! { "item": "pen" }).session(&mut *session).run()?;
    ///     stock
    ///         .update_one(doc! { "_id": "pen" }, doc! { "$inc": { "n": -1 } })
    ///         .session(&mut *session)
    ///         .run()?;
    ///     Ok(())
    /// })?;
    /// let pens = stock.find_one(doc! { "_id": "pen" }).run()?.unwrap();
    /// assert_eq!(pens.get_i32("n").unwrap(), 9);
    /// # Ok(())
    /// # }
    /// ```
    pub fn and_run<R, F>(self, callback: F) -> Result<R>
    where
        F: FnMut(&mut ClientSession) -> Result<R>,
    {
        let options = self.options();
        self.session
            .with_transaction(options, self.timeout, callback)
    }
}

/// `session.commit_transaction()`; sent by `run`.
#[must_use = "nothing is sent until `run`"]
pub struct CommitTransaction<'a> {
    session: &'a mut ClientSession,
    timeout: Option<Duration>,
}

impl CommitTransaction<'_> {
    /// Sets the commit's `timeoutMS`, overriding the session's default and
    /// the client's; zero keeps CSOT's rules without a limit.
    pub fn timeout(mut self, value: Duration) -> Self {
        self.timeout = Some(value);
        self
    }

    /// Commits the transaction.
    pub fn run(self) -> Result<()> {
        self.session.commit_now(self.timeout)
    }
}

/// `session.abort_transaction()`; sent by `run`.
#[must_use = "nothing is sent until `run`"]
pub struct AbortTransaction<'a> {
    session: &'a mut ClientSession,
    timeout: Option<Duration>,
}

impl AbortTransaction<'_> {
    /// Sets the abort's `timeoutMS`, overriding the session's default and
    /// the client's; zero keeps CSOT's rules without a limit.
    pub fn timeout(mut self, value: Duration) -> Self {
        self.timeout = Some(value);
        self
    }

    /// Aborts the transaction.
    pub fn run(self) -> Result<()> {
        self.session.abort_now(self.timeout)
    }
}
