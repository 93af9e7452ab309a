//! Sessions as pure state: server session pool, cluster time gossip, causal
//! consistency, snapshot reads and transactions.
//!
//! Nothing here touches a socket or reads the clock. The executor drives one
//! operation on a session like this:
//!
//! ```text
//!   SessionState::begin_operation(&OperationInfo)   validate; end a finished
//!        │                                          transaction; -> pin, read preference
//!        v
//!   select a server (the pin if any), get its socket; Transaction::pin if sharded/LB
//!        │
//!        v
//!   SessionState::decorate(&mut cmd, &CommandContext, now)   lsid, txnNumber,
//!        │                        startTransaction, autocommit, readConcern, $clusterTime
//!        v
//!   send ── reply ──> SessionState::on_reply(&reply, &mut client_clock)   (ok: 0 too)
//!        └─ error ──> SessionState::on_error(&mut error, FailedCommand)   dirty, labels, unpin
//! ```
//!
//! Commit and abort are built by [`SessionState::commit_transaction`] and
//! [`SessionState::abort_transaction`] and then go through `decorate` like
//! any other command (to `admin`). The convenient API's retry loop is in
//! [`with_transaction`].
//!
//! Pieces:
//! - [`pool`]: [`ServerSession`], [`SessionPool`] (LIFO reuse, expiry,
//!   dirty sessions), UUID v4 session ids.
//! - [`cluster_time`]: [`ClusterTime`], [`ClusterClock`] (greatest
//!   `$clusterTime` seen).
//! - [`transaction`]: [`Transaction`], its states, options, pinning, commit
//!   and abort bodies and error labels.
//! - [`with_transaction`]: the decisions of `withTransaction`.

pub mod cluster_time;
pub mod pool;
pub mod transaction;
pub mod with_transaction;

use std::time::Instant;

use bson::{Bson, Document, Timestamp};

pub use cluster_time::{ClusterClock, ClusterTime};
pub use pool::ServerSession;
pub use transaction::{
    AbortCommand, FailedCommand, Pin, Transaction, TransactionOptions, TransactionState,
};

use crate::error::{Error, ErrorKind, Result};
use crate::proto::command_draft::CommandDraft;
use crate::proto::concern::read_concern_document;
use crate::proto::concern::{ReadConcern, WriteConcern};
use crate::proto::read_preference::ReadPreference;
use crate::proto::reply::ReplyFields;
use cluster_time::{attach_cluster_time, timestamp_after, SeenClusterTime};
use transaction::is_unacknowledged;

/// The lowest wire version that supports snapshot reads (MongoDB 5.0).
pub const MIN_SNAPSHOT_WIRE_VERSION: i32 = 13;

/// What one command is to its session: which of the session's fields it
/// takes ([`SessionState::decorate_draft`]).
struct CommandRole {
    /// `commitTransaction` or `abortTransaction`.
    finishing: bool,
    /// Part of a transaction (its commit and abort included).
    in_transaction: bool,
    /// Takes the snapshot read concern.
    snapshot_read: bool,
    /// An unacknowledged write outside a transaction.
    unacknowledged: bool,
    /// Takes `lsid`.
    send_lsid: bool,
}

/// Whether an application started the session or the driver did for one
/// operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// Started by the application with `start_session`.
    Explicit,
    /// Started by the driver for an operation without a session.
    Implicit,
}

/// Options of an explicit session; immutable once the session is started.
#[derive(Clone, Debug, Default, PartialEq, typed_builder::TypedBuilder, serde::Deserialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionOptions {
    /// Causally consistent reads and writes; defaults to true unless
    /// `snapshot` is set.
    pub causal_consistency: Option<bool>,
    /// Snapshot reads: all reads see the data as of the first read's time.
    pub snapshot: Option<bool>,
    /// Options for transactions started without their own.
    pub default_transaction_options: Option<TransactionOptions>,
    /// The snapshot to read from (a snapshot session's `snapshot_time` from
    /// earlier), instead of the first read's; needs `snapshot`.
    pub snapshot_time: Option<Timestamp>,
    /// The `timeoutMS` of the session's commit, abort and
    /// `with_transaction` when they set none (CSOT's `defaultTimeoutMS`);
    /// unset, the client's applies.
    #[serde(
        default,
        deserialize_with = "crate::proto::serde_util::millis::deserialize"
    )]
    pub default_timeout: Option<std::time::Duration>,
}

impl SessionOptions {
    /// Rejects causal consistency together with snapshot reads, and a
    /// snapshot time without snapshot reads.
    pub fn validate(&self) -> Result<()> {
        if self.causal_consistency == Some(true) && self.snapshot == Some(true) {
            return Err(Error::invalid_argument(
                "causalConsistency and snapshot cannot both be true for a session",
            ));
        }
        if self.snapshot_time.is_some() && self.snapshot != Some(true) {
            return Err(Error::invalid_argument(
                "snapshotTime can only be set for a snapshot session",
            ));
        }
        Ok(())
    }
}

/// Whether an operation may (`Ok(true)`) or must not (`Ok(false)`) use its
/// session, given the `logicalSessionTimeoutMinutes` of the connection's
/// handshake (`None`: the deployment does not support sessions). An explicit
/// session on such a deployment is an error; an implicit one is dropped.
pub fn session_supported(kind: SessionKind, logical_session_timeout: Option<u32>) -> Result<bool> {
    match (logical_session_timeout, kind) {
        (Some(_), _) => Ok(true),
        (None, SessionKind::Implicit) => Ok(false),
        (None, SessionKind::Explicit) => Err(Error::new(ErrorKind::SessionsNotSupported)),
    }
}

/// What the executor knows about an operation before selecting a server,
/// for [`SessionState::begin_operation`].
#[derive(Clone, Copy, Debug, Default)]
pub struct OperationInfo<'a> {
    /// The operation reads with a read preference (reads, listings,
    /// runCommand).
    pub is_read: bool,
    /// The application passed a read concern to this operation.
    pub read_concern_set: bool,
    /// The application passed a write concern to this operation.
    pub write_concern_set: bool,
    /// The read preference the application passed to this operation.
    pub read_preference: Option<&'a ReadPreference>,
    /// The operation's effective write concern is unacknowledged (`w: 0`).
    pub unacknowledged: bool,
}

/// What [`SessionState::begin_operation`] tells the executor.
#[derive(Clone, Debug, PartialEq)]
pub struct OperationPlan {
    /// The operation runs in the session's open transaction.
    pub in_transaction: bool,
    /// Send the operation here instead of selecting a server.
    pub pinned: Option<Pin>,
    /// In a transaction without an operation read preference: the
    /// transaction's read preference, to select with.
    pub read_preference: Option<ReadPreference>,
}

/// What [`SessionState::decorate`] needs to know about the command and the
/// server it goes to.
#[derive(Clone, Copy, Debug, Default)]
pub struct CommandContext<'a> {
    /// The selected server's `maxWireVersion`.
    pub max_wire_version: i32,
    /// The command takes a `readConcern` (reads, and `insert`, `update`,
    /// `delete`, `findAndModify` for causal consistency). False for the
    /// generic runCommand, `getMore`, `killCursors`. (A snapshot session
    /// sends its read concern regardless, except on `getMore` and
    /// `killCursors`.)
    pub accepts_read_concern: bool,
    /// The command takes a `writeConcern` outside a transaction (writes,
    /// DDL, `aggregate` with `$out`/`$merge`); reads never get one, even
    /// when the client, database or collection has a write concern.
    pub accepts_write_concern: bool,
    /// A write that carries a causally consistent session's
    /// `afterClusterTime` (`insert`, `update`, `delete`, `findAndModify`),
    /// without an inherited read concern level.
    pub accepts_after_cluster_time: bool,
    /// The operation's read concern (operation, collection, database or
    /// client); `None` for the server default. Do not put it in the command
    /// yourself: inside a transaction it must not be sent.
    pub read_concern: Option<&'a ReadConcern>,
    /// The operation's write concern, likewise left to `decorate`.
    pub write_concern: Option<&'a WriteConcern>,
    /// A retryable write: carries the session's current `txnNumber` (see
    /// [`SessionState::next_retryable_write_txn_number`]).
    pub retryable_write: bool,
    /// The client's cluster clock value.
    pub client_cluster_time: Option<&'a ClusterTime>,
}

/// One client session: its server session, causal consistency and snapshot
/// times, cluster time, and transaction.
#[derive(Clone, Debug)]
pub struct SessionState {
    kind: SessionKind,
    options: SessionOptions,
    server_session: Option<ServerSession>,
    cluster_time: Option<ClusterTime>,
    operation_time: Option<Timestamp>,
    snapshot_time: Option<Timestamp>,
    transaction: Transaction,
    /// The process the server session was checked out in: a forked child
    /// must not send its parent's `lsid` (its writes could be taken for
    /// retries of the parent's and skipped).
    process: u32,
    /// While `with_transaction` runs under a timeout: the deadline its
    /// callback's operations and the commit share.
    transaction_deadline: Option<crate::proto::deadline::Deadline>,
}

const ENDED: &str = "Cannot use a session that has ended";

impl SessionState {
    /// An application's session, started in the process `pid`. Fails on
    /// conflicting options.
    pub fn explicit(
        options: SessionOptions,
        server_session: ServerSession,
        pid: u32,
    ) -> Result<Self> {
        options.validate()?;
        Ok(SessionState::with_process(
            SessionKind::Explicit,
            options,
            server_session,
            pid,
        ))
    }

    /// The driver's session for one operation (not causally consistent), in
    /// the process `pid`, which the operation creating it has just read (its
    /// selection does), so the kernel is not asked again.
    pub fn implicit(server_session: ServerSession, pid: u32) -> Self {
        SessionState::with_process(
            SessionKind::Implicit,
            SessionOptions::default(),
            server_session,
            pid,
        )
    }

    fn with_process(
        kind: SessionKind,
        options: SessionOptions,
        server_session: ServerSession,
        pid: u32,
    ) -> Self {
        let snapshot_time = options.snapshot_time;
        SessionState {
            kind,
            options,
            server_session: Some(server_session),
            cluster_time: None,
            operation_time: None,
            snapshot_time,
            transaction: Transaction::new(),
            process: pid,
            transaction_deadline: None,
        }
    }

    /// The deadline of the `with_transaction` call under way, if any.
    pub fn transaction_deadline(&self) -> Option<crate::proto::deadline::Deadline> {
        self.transaction_deadline
    }

    /// Sets (or clears) the deadline operations in this session share.
    pub fn set_transaction_deadline(&mut self, deadline: Option<crate::proto::deadline::Deadline>) {
        self.transaction_deadline = deadline;
    }

    /// Whether the server session was checked out in another process than
    /// `pid` (the session was created before a fork).
    pub fn inherited_by(&self, pid: u32) -> bool {
        self.process != pid && self.server_session.is_some()
    }

    /// In a forked child (process `pid`): replaces the parent's server
    /// session with `server_session` from the child's pool. A transaction
    /// the parent had open is the parent's: it is forgotten here, and the
    /// error says so.
    pub fn adopt_after_fork(&mut self, server_session: ServerSession, pid: u32) -> Result<()> {
        self.server_session = Some(server_session);
        self.process = pid;
        let had_transaction = self.transaction.state().is_active();
        self.transaction = Transaction::new();
        if had_transaction {
            return Err(Error::transaction(
                "this session's transaction was started in the parent process before fork(); \
                 a forked child cannot continue it: start a new transaction",
            ));
        }
        Ok(())
    }

    /// The session id (`lsid`), until the session ends.
    pub fn id(&self) -> Option<&Document> {
        self.server_session.as_ref().map(ServerSession::id)
    }

    /// The server session, until the session ends.
    pub fn server_session(&self) -> Option<&ServerSession> {
        self.server_session.as_ref()
    }

    /// Whether [`end`](Self::end) was called.
    pub fn is_ended(&self) -> bool {
        self.server_session.is_none()
    }

    /// Whether reads and writes carry `afterClusterTime`: explicit sessions
    /// unless disabled or snapshot; never implicit ones.
    pub fn is_causally_consistent(&self) -> bool {
        match self.kind {
            SessionKind::Implicit => false,
            SessionKind::Explicit => self
                .options
                .causal_consistency
                .unwrap_or(!self.is_snapshot()),
        }
    }

    /// Whether this is a snapshot session.
    pub fn is_snapshot(&self) -> bool {
        self.options.snapshot == Some(true)
    }

    /// The session's cluster time.
    pub fn cluster_time(&self) -> Option<&ClusterTime> {
        self.cluster_time.as_ref()
    }

    /// `advanceClusterTime`: takes `cluster_time` if it is later; returns
    /// whether it was. Does not touch the client's clock, which trusts only
    /// servers.
    pub fn advance_cluster_time(&mut self, cluster_time: &ClusterTime) -> bool {
        let later = self
            .cluster_time
            .as_ref()
            .is_none_or(|current| cluster_time.is_after(current));
        if later {
            self.cluster_time = Some(cluster_time.clone());
        }
        later
    }

    /// The `operationTime` of the latest operation.
    #[cfg(test)]
    pub fn operation_time(&self) -> Option<Timestamp> {
        self.operation_time
    }

    /// `advanceOperationTime`: takes `time` if it is later.
    pub fn advance_operation_time(&mut self, time: Timestamp) -> bool {
        let later = self
            .operation_time
            .is_none_or(|current| timestamp_after(time, current));
        if later {
            self.operation_time = Some(time);
        }
        later
    }

    /// The snapshot time of a snapshot session, once its first read answered.
    pub fn snapshot_time(&self) -> Option<Timestamp> {
        self.snapshot_time
    }

    /// The transaction state machine.
    pub fn transaction(&self) -> &Transaction {
        &self.transaction
    }

    /// The transaction state machine, to pin it or undo a first command.
    pub fn transaction_mut(&mut self) -> &mut Transaction {
        &mut self.transaction
    }

    fn server_session_mut(&mut self) -> Result<&mut ServerSession> {
        self.server_session
            .as_mut()
            .ok_or_else(|| Error::client(ENDED))
    }

    /// `startTransaction`: resolves `options` against the session's defaults
    /// and the client's, starts the transaction and advances the transaction
    /// number. Errors leave the session unchanged.
    pub fn start_transaction(
        &mut self,
        options: Option<&TransactionOptions>,
        client: &TransactionOptions,
    ) -> Result<()> {
        if self.is_ended() {
            return Err(Error::client(ENDED));
        }
        if self.is_snapshot() {
            return Err(Error::transaction(
                "Transactions are not supported in snapshot sessions",
            ));
        }
        let resolved = options
            .cloned()
            .unwrap_or_default()
            .resolve(self.options.default_transaction_options.as_ref(), client);
        self.transaction.start(resolved)?;
        self.server_session_mut()?.next_txn_number();
        Ok(())
    }

    /// `commitTransaction`: the body to send to `admin` (through
    /// [`decorate`](Self::decorate)), or `None` when there is nothing to send.
    /// For the driver's own retry after a retryable error, send
    /// `self.transaction().commit_retry()` instead.
    pub fn commit_transaction(&mut self) -> Result<Option<Document>> {
        if self.is_ended() {
            return Err(Error::client(ENDED));
        }
        self.transaction.commit()
    }

    /// `abortTransaction`: the command to send to `admin` (through
    /// [`decorate`](Self::decorate)), or `None`. Its errors are ignored.
    pub fn abort_transaction(&mut self) -> Result<Option<AbortCommand>> {
        if self.is_ended() {
            return Err(Error::client(ENDED));
        }
        self.transaction.abort()
    }

    /// Before selecting a server for an operation (not commit/abort):
    /// validates it against the session and transaction (errors change
    /// nothing), then ends a finished transaction and says where to go.
    pub fn begin_operation(&mut self, op: &OperationInfo<'_>) -> Result<OperationPlan> {
        if self.is_ended() {
            return Err(Error::client(ENDED));
        }
        let in_transaction = self.transaction.state().is_active();
        if in_transaction {
            if op.read_concern_set {
                return Err(Error::invalid_argument(
                    "Cannot set read concern after starting a transaction.",
                ));
            }
            if op.write_concern_set {
                return Err(Error::invalid_argument(
                    "Cannot set write concern after starting a transaction.",
                ));
            }
            if op.is_read {
                self.transaction.check_read_preference(op.read_preference)?;
            }
        } else if op.unacknowledged && self.kind == SessionKind::Explicit {
            return Err(Error::invalid_argument(
                "Unacknowledged writes cannot be used with an explicit session",
            ));
        }
        self.transaction.reset_for_operation();
        Ok(OperationPlan {
            in_transaction,
            pinned: self.transaction.pinned().cloned(),
            read_preference: if in_transaction && op.read_preference.is_none() {
                self.transaction.options().read_preference().cloned()
            } else {
                None
            },
        })
    }

    /// The transaction number for a new retryable write outside a
    /// transaction (advanced once per operation; its retries reuse it).
    /// Inside a transaction the transaction's number, unchanged.
    pub fn next_retryable_write_txn_number(&mut self) -> Result<i64> {
        let active = self.transaction.state().is_active();
        let session = self.server_session_mut()?;
        Ok(if active {
            session.txn_number
        } else {
            session.next_txn_number()
        })
    }

    /// Adds the session's fields to an outgoing command, built by the
    /// executor without `readConcern`/`writeConcern` (passed in `ctx`):
    ///
    /// - `lsid` (not for an implicit session's unacknowledged write), and
    ///   the server session's last use becomes `now`;
    /// - in a transaction: `txnNumber`, `autocommit: false`, and on the first
    ///   command `startTransaction: true` and the transaction's read concern
    ///   with `afterClusterTime` in a causally consistent session; never the
    ///   operation's read or write concern;
    /// - `commitTransaction`/`abortTransaction`: `txnNumber`, `autocommit`;
    /// - otherwise: `txnNumber` for a retryable write, the operation's write
    ///   concern, and a read concern: the operation's level merged with
    ///   `afterClusterTime` (causal consistency), or in a snapshot session
    ///   `{level: "snapshot", atClusterTime?}` on every command but
    ///   `getMore`/`killCursors`;
    /// - `$clusterTime`: the greater of the session's and the client's.
    ///
    /// Errors (ended session, snapshot session on a server before 5.0)
    /// change nothing.
    #[cfg(test)]
    pub fn decorate(
        &mut self,
        command: &mut Document,
        ctx: &CommandContext<'_>,
        now: Instant,
    ) -> Result<()> {
        let mut draft = CommandDraft::new(std::mem::take(command));
        let decorated = self.decorate_draft(&mut draft, ctx, now);
        *command = draft.into_document();
        decorated
    }

    /// [`Self::decorate`] on a command on its way to the wire (the one
    /// path the executor takes), in the order the sessions and transactions
    /// specifications describe the fields.
    pub(crate) fn decorate_draft(
        &mut self,
        command: &mut CommandDraft,
        ctx: &CommandContext<'_>,
        now: Instant,
    ) -> Result<()> {
        if self.is_ended() {
            return Err(Error::client(ENDED));
        }
        let role = self.command_role(command, ctx)?;
        let txn_number = self.attach_lsid(command, &role, now)?;
        if role.in_transaction {
            self.attach_transaction_fields(command, txn_number, role.finishing);
        } else {
            if ctx.retryable_write && role.send_lsid {
                command.insert("txnNumber", txn_number);
            }
            self.attach_operation_concerns(command, ctx, &role);
        }
        let cluster_time =
            ClusterTime::greater(self.cluster_time.as_ref(), ctx.client_cluster_time);
        attach_cluster_time(command, cluster_time, ctx.max_wire_version);
        Ok(())
    }

    /// What `command` is to this session, decided before anything is added
    /// (so that its one error, a snapshot read on a server before 5.0,
    /// changes nothing).
    fn command_role(
        &self,
        command: &CommandDraft,
        ctx: &CommandContext<'_>,
    ) -> Result<CommandRole> {
        let name = command.first_key_bytes().unwrap_or_default();
        let finishing = name == b"commitTransaction" || name == b"abortTransaction";
        let follow_up = matches!(name, b"getMore" | b"killCursors");
        let in_transaction = finishing || self.transaction.state().is_active();
        // The snapshot read concern goes on every command of a snapshot
        // session, writes included, so that the server rejects what a
        // snapshot cannot serve; cursor follow-ups inherit the cursor's.
        let snapshot_read = !in_transaction && self.is_snapshot() && !follow_up;
        if snapshot_read && ctx.max_wire_version < MIN_SNAPSHOT_WIRE_VERSION {
            return Err(Error::client("Snapshot reads require MongoDB 5.0 or later"));
        }
        let unacknowledged = !in_transaction && ctx.write_concern.is_some_and(is_unacknowledged);
        Ok(CommandRole {
            finishing,
            in_transaction,
            snapshot_read,
            unacknowledged,
            // An implicit session is never sent with an unacknowledged
            // write: the driver could not know when the server is done
            // with it.
            send_lsid: !(unacknowledged && self.kind == SessionKind::Implicit),
        })
    }

    /// `lsid`, marking the server session used at `now`; returns its
    /// transaction number for the steps after.
    fn attach_lsid(
        &mut self,
        command: &mut CommandDraft,
        role: &CommandRole,
        now: Instant,
    ) -> Result<i64> {
        let session = self.server_session_mut()?;
        if role.send_lsid {
            session.add_lsid(command);
            session.mark_used(now);
        }
        Ok(session.txn_number)
    }

    /// In a transaction: `txnNumber`, `autocommit: false`, and on its first
    /// command `startTransaction: true` with the transaction's read concern
    /// (and `afterClusterTime` in a causally consistent session).
    fn attach_transaction_fields(
        &mut self,
        command: &mut CommandDraft,
        txn_number: i64,
        finishing: bool,
    ) {
        command.insert("txnNumber", txn_number);
        let first = !finishing && self.transaction.note_command_sent();
        if first {
            command.insert("startTransaction", true);
        }
        command.insert("autocommit", false);
        if first {
            let level = self
                .transaction
                .options()
                .read_concern
                .as_ref()
                .map(|rc| rc.level.as_str());
            if let Some(rc) = read_concern_document(level, self.after_cluster_time(false)) {
                command.insert("readConcern", rc);
            }
        }
    }

    /// Outside a transaction: the operation's write concern and its read
    /// concern, merged with `afterClusterTime`, or in a snapshot session
    /// `{level: "snapshot", atClusterTime?}`.
    fn attach_operation_concerns(
        &self,
        command: &mut CommandDraft,
        ctx: &CommandContext<'_>,
        role: &CommandRole,
    ) {
        let (read_level, read_extra) = if role.snapshot_read {
            let at = self
                .snapshot_time
                .map(|t| ("atClusterTime", Bson::Timestamp(t)));
            (Some("snapshot"), at)
        } else {
            (
                ctx.read_concern.map(|rc| rc.level.as_str()),
                self.after_cluster_time(role.unacknowledged),
            )
        };
        let takes = crate::proto::concern::Takes {
            read_concern: ctx.accepts_read_concern || role.snapshot_read,
            write_concern: ctx.accepts_write_concern,
            after_cluster_time: ctx.accepts_read_concern || ctx.accepts_after_cluster_time,
        };
        crate::proto::concern::attach_concerns(
            command,
            takes,
            read_level,
            ctx.write_concern,
            read_extra,
        );
    }

    /// `afterClusterTime` for a causally consistent session that has seen
    /// an operation time (never with an unacknowledged write, whose
    /// operation time the session will not learn).
    fn after_cluster_time(&self, unacknowledged: bool) -> Option<(&'static str, Bson)> {
        self.operation_time
            .filter(|_| self.is_causally_consistent() && !unacknowledged)
            .map(|t| ("afterClusterTime", Bson::Timestamp(t)))
    }

    /// Learns from a reply (any reply to a decorated command, `ok: 0` too):
    /// `$clusterTime` advances the session and `client_clock`,
    /// `operationTime` the session, `recoveryToken` the transaction, and the
    /// first read of a snapshot session fixes the snapshot time
    /// (`cursor.atClusterTime` or `atClusterTime`).
    #[cfg(test)]
    pub fn on_reply(&mut self, reply: &Document, client_clock: &mut ClusterClock) {
        self.on_reply_fields(reply, client_clock);
    }

    /// [`Self::on_reply`] of a reply's fields, read where they lie (the
    /// executor's replies are not converted to a `Document` for this).
    pub(crate) fn on_reply_fields(
        &mut self,
        reply: &impl ReplyFields,
        client_clock: &mut ClusterClock,
    ) {
        if let Some(seen) = SeenClusterTime::read(reply) {
            // The client's clock first; the session then shares its copy
            // when the times are the same bytes (an implicit session starts
            // with none, and most replies repeat the client's time).
            client_clock.observe(&seen);
            if seen.is_after(self.cluster_time.as_ref()) {
                self.cluster_time = Some(seen.to_shared(client_clock.current()));
            }
        }
        if let Some(Bson::Timestamp(t)) = reply.field("operationTime").as_deref() {
            self.advance_operation_time(*t);
        }
        self.transaction.observe_fields(reply);
        if self.is_snapshot() && self.snapshot_time.is_none() {
            let in_cursor = match reply.field("cursor").as_deref() {
                Some(Bson::Document(cursor)) => cursor.get_timestamp("atClusterTime").ok(),
                _ => None,
            };
            let at = in_cursor.or_else(|| match reply.field("atClusterTime").as_deref() {
                Some(Bson::Timestamp(t)) => Some(*t),
                _ => None,
            });
            if let Some(t) = at {
                self.snapshot_time = Some(t);
            }
        }
    }

    /// The first read of a snapshot session fixes the snapshot time from
    /// `cursor.atClusterTime` of a cursor kept as bytes (see
    /// [`crate::reply::Reply::raw_cursor`]); call before [`Self::on_reply`],
    /// which prefers the cursor's time to the reply's own the same way.
    pub fn on_raw_cursor(&mut self, cursor: Option<&bson::RawDocument>) {
        if !self.is_snapshot() || self.snapshot_time.is_some() {
            return;
        }
        if let Some(Ok(Some(bson::RawBsonRef::Timestamp(t)))) =
            cursor.map(|c| c.get("atClusterTime"))
        {
            self.snapshot_time = Some(t);
        }
    }

    /// Learns from a failed command: a network error makes the server
    /// session dirty; inside a transaction the spec's labels are added and
    /// the session unpinned when they say so
    /// ([`Transaction::label_error`]).
    pub fn on_error(&mut self, error: &mut Error, failed: FailedCommand<'_>) {
        if error.is_network_error() {
            if let Some(session) = self.server_session.as_mut() {
                session.mark_dirty();
            }
        }
        self.transaction.label_error(error, failed);
    }

    /// `endSession`: hands the server session back (for the pool) the first
    /// time, `None` afterwards. An open transaction must be aborted first
    /// (its errors ignored): check [`transaction`](Self::transaction).
    /// It runs in the process `pid`, as the caller's operation read it. A
    /// stale `pid` (a forked child dropping a cursor before any
    /// operation of its own) can only let the parent's server session reach
    /// the pool under the parent's pid, where the next checkout, whose pid
    /// is read afresh, clears it.
    pub fn end(&mut self, pid: u32) -> Option<ServerSession> {
        self.transaction.unpin();
        let inherited = self.inherited_by(pid);
        // The parent's server session never joins a forked child's pool.
        self.server_session.take().filter(|_| !inherited)
    }
}

#[cfg(test)]
mod tests;
