//! The client side of a multi-document transaction, as the transactions spec
//! draws it:
//!
//! ```text
//!             start                first command             commit
//!   None ───────────> Starting ─────────────────> InProgress ───────> Committed ─┐ commit
//!    ^                 │  │ commit                    │                  ^  <─────┘ (retry, w:majority)
//!    │                 │  └──────> CommittedEmpty     │ abort            │
//!    │                 │ abort      (no command sent) v                  │
//!    │                 └────────────────────────> Aborted                │
//!    └──── any other operation, or start, from Committed / CommittedEmpty / Aborted
//! ```
//!
//! A [`Transaction`] only tracks state, options, the pinned server and the
//! recovery token, and builds the bodies of `commitTransaction` and
//! `abortTransaction`. The transaction number lives in the
//! [`ServerSession`](super::ServerSession); `lsid`, `txnNumber` and
//! `autocommit` are added by [`SessionState::decorate`](super::SessionState::decorate)
//! like on any other command.

use std::time::Duration;

use bson::{doc, Bson, Document};

use crate::error::{Error, ErrorKind, Result};
use crate::proto::address::ServerAddress;
pub use crate::proto::concern::write_concern_document;
use crate::proto::concern::{Acknowledgment, ReadConcern, WriteConcern};
use crate::proto::read_preference::{ReadPreference, ReadPreferenceMode, SelectionCriteria};

/// Error label: the whole transaction may be retried.
pub const TRANSIENT_TRANSACTION_ERROR: &str = "TransientTransactionError";
/// Error label: a commit's outcome is unknown; committing again is safe.
pub const UNKNOWN_TRANSACTION_COMMIT_RESULT: &str = "UnknownTransactionCommitResult";
/// Error label the server (or the retry logic) puts on retryable write errors.
pub const RETRYABLE_WRITE_ERROR: &str = "RetryableWriteError";

/// `MaxTimeMSExpired`: a commit that ran out of `maxTimeMS`.
pub const MAX_TIME_MS_EXPIRED: i32 = 50;
/// `WriteConcernFailed` (a `wtimeout`).
pub const WRITE_CONCERN_FAILED: i32 = 64;
/// `UnknownReplWriteConcern`: the write concern names an unknown tag.
pub const UNKNOWN_REPL_WRITE_CONCERN: i32 = 79;
/// `UnsatisfiableWriteConcern` (formerly `CannotSatisfyWriteConcern`).
pub const UNSATISFIABLE_WRITE_CONCERN: i32 = 100;

/// Codes the retryable writes spec calls retryable, for servers older than
/// 4.4 that do not label their errors themselves.
pub const RETRYABLE_WRITE_CODES: [i32; 12] = [
    11600, 11602, 10107, 13435, 13436, 189, 91, 7, 6, 89, 9001, 262,
];

/// The `wtimeout` added to a retried commit whose write concern has none, so
/// that an unsatisfiable majority does not wait forever.
pub const COMMIT_RETRY_WTIMEOUT: Duration = Duration::from_millis(10_000);

/// Where a transaction is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionState {
    /// No transaction.
    None,
    /// Started, no command sent yet.
    Starting,
    /// At least one command sent.
    InProgress,
    /// Committed (or a commit was attempted, even if it failed).
    Committed,
    /// Committed before any command was sent: nothing to send to the server.
    CommittedEmpty,
    /// Aborted (whether or not the server was told).
    Aborted,
}

impl TransactionState {
    /// Whether commands belong to an open transaction (`Starting` or
    /// `InProgress`).
    pub fn is_active(self) -> bool {
        matches!(
            self,
            TransactionState::Starting | TransactionState::InProgress
        )
    }
}

/// Options of one transaction. Unset fields fall back to the session's
/// default transaction options, then to the client ([`resolve`](Self::resolve)).
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    typed_builder::TypedBuilder,
    serde::Serialize,
    serde::Deserialize,
)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TransactionOptions {
    /// Read concern of the first command only.
    #[serde(skip_serializing)]
    pub read_concern: Option<ReadConcern>,
    /// Write concern of `commitTransaction` and `abortTransaction`.
    #[serde(skip_serializing)]
    pub write_concern: Option<WriteConcern>,
    /// Where the transaction's reads go: a read preference, which must be
    /// primary (a predicate is refused when the transaction starts).
    #[serde(skip_serializing, rename = "readPreference")]
    pub selection_criteria: Option<SelectionCriteria>,
    /// `maxTimeMS` of `commitTransaction` (deprecated in favour of `timeoutMS`).
    #[serde(
        rename(serialize = "maxTimeMS", deserialize = "maxCommitTimeMS"),
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::proto::serde_util::millis"
    )]
    pub max_commit_time: Option<Duration>,
}

impl TransactionOptions {
    /// These options with the read concern of the transaction's first command.
    pub fn with_read_concern(mut self, read_concern: ReadConcern) -> Self {
        self.read_concern = Some(read_concern);
        self
    }

    /// These options with the write concern of commit and abort.
    pub fn with_write_concern(mut self, write_concern: WriteConcern) -> Self {
        self.write_concern = Some(write_concern);
        self
    }

    /// The read preference of the transaction's reads, when its selection
    /// criteria are one.
    pub(crate) fn read_preference(&self) -> Option<&ReadPreference> {
        self.selection_criteria
            .as_ref()
            .and_then(SelectionCriteria::as_read_pref)
    }

    /// These options with `maxTimeMS` for `commitTransaction`.
    pub fn with_max_commit_time(mut self, max_commit_time: Duration) -> Self {
        self.max_commit_time = Some(max_commit_time);
        self
    }

    /// Each option from `self`, else from `session_default`, else from
    /// `client`.
    pub fn resolve(
        &self,
        session_default: Option<&TransactionOptions>,
        client: &TransactionOptions,
    ) -> TransactionOptions {
        fn pick<T: Clone>(
            own: &Option<T>,
            session: Option<&Option<T>>,
            client: &Option<T>,
        ) -> Option<T> {
            own.clone()
                .or_else(|| session.and_then(Clone::clone))
                .or_else(|| client.clone())
        }
        TransactionOptions {
            read_concern: pick(
                &self.read_concern,
                session_default.map(|d| &d.read_concern),
                &client.read_concern,
            ),
            write_concern: pick(
                &self.write_concern,
                session_default.map(|d| &d.write_concern),
                &client.write_concern,
            ),
            selection_criteria: pick(
                &self.selection_criteria,
                session_default.map(|d| &d.selection_criteria),
                &client.selection_criteria,
            ),
            max_commit_time: pick(
                &self.max_commit_time,
                session_default.map(|d| &d.max_commit_time),
                &client.max_commit_time,
            ),
        }
    }
}

/// The server (and, in load-balanced mode, the connection) a transaction is
/// pinned to. Sharded transactions must stay on one mongos; load-balanced
/// ones on one connection behind the balancer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The mongos or load balancer.
    pub address: ServerAddress,
    /// In load-balanced mode, the shell's identifier of the connection the
    /// transaction runs on (the driver keeps one socket per server, so this
    /// is the generation of that socket: a new socket cannot carry the
    /// transaction on). `None` for a sharded cluster.
    pub connection: Option<u64>,
}

/// Which command failed, for [`Transaction::label_error`] and
/// [`SessionState::on_error`](super::SessionState::on_error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailedCommand<'a> {
    /// The command name (the first key of the command document).
    pub name: &'a str,
    /// Whether the failure is a `writeConcernError` of an `ok: 1` reply
    /// (then the error's code is the write concern error's code).
    pub write_concern_error: bool,
}

impl<'a> FailedCommand<'a> {
    /// A failure of command `name` that is not a write concern error.
    pub fn named(name: &'a str) -> Self {
        FailedCommand {
            name,
            write_concern_error: false,
        }
    }
}

/// Whether `w` makes a write concern unacknowledged.
pub fn is_unacknowledged(write_concern: &WriteConcern) -> bool {
    matches!(write_concern.w, Some(Acknowledgment::Nodes(0)))
}

fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The write concern of a retried commit: the transaction's own with `w`
/// replaced by `"majority"` and `wtimeout: 10000` added if it had none.
pub fn commit_retry_write_concern(write_concern: Option<&WriteConcern>) -> Document {
    let mut d = write_concern
        .and_then(write_concern_document)
        .unwrap_or_default();
    d.insert("w", "majority");
    if !d.contains_key("wtimeout") {
        d.insert("wtimeout", duration_millis(COMMIT_RETRY_WTIMEOUT));
    }
    d
}

/// The body of an `abortTransaction` command and where to send it.
#[derive(Clone, Debug, PartialEq)]
pub struct AbortCommand {
    /// `{abortTransaction: 1, writeConcern?, recoveryToken?}`; the session
    /// adds `lsid`, `txnNumber` and `autocommit`. Send it to `admin`.
    pub body: Document,
    /// The pin the transaction had: the first attempt goes there. The
    /// session is already unpinned, so a retry selects a server afresh.
    pub pinned: Option<Pin>,
}

/// One session's transaction state machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Transaction {
    state: TransactionState,
    options: TransactionOptions,
    pinned: Option<Pin>,
    recovery_token: Option<Document>,
    /// Whether the last decorated command was the one that moved the
    /// transaction from `Starting` to `InProgress` (undone by
    /// [`undo_first_command`](Self::undo_first_command)).
    last_command_started: bool,
    /// Whether a commit command has already been built for this transaction:
    /// the next one is a retry and uses the majority write concern.
    commit_attempted: bool,
}

impl Default for Transaction {
    fn default() -> Self {
        Transaction::new()
    }
}

impl Transaction {
    /// No transaction.
    pub fn new() -> Self {
        Transaction {
            state: TransactionState::None,
            options: TransactionOptions::default(),
            pinned: None,
            recovery_token: None,
            last_command_started: false,
            commit_attempted: false,
        }
    }

    /// The current state.
    pub fn state(&self) -> TransactionState {
        self.state
    }

    /// The resolved options of the current (or last) transaction.
    pub fn options(&self) -> &TransactionOptions {
        &self.options
    }

    /// Where the transaction is pinned, if anywhere.
    pub fn pinned(&self) -> Option<&Pin> {
        self.pinned.as_ref()
    }

    /// The most recent `recoveryToken` a server sent in this transaction.
    #[cfg(test)]
    pub fn recovery_token(&self) -> Option<&Document> {
        self.recovery_token.as_ref()
    }

    /// Starts a transaction with already resolved options. Errors (state
    /// unchanged): a transaction is already open, or the write concern is
    /// unacknowledged. The caller advances the transaction number.
    pub fn start(&mut self, options: TransactionOptions) -> Result<()> {
        if self.state.is_active() {
            return Err(Error::transaction("Transaction already in progress"));
        }
        if options
            .write_concern
            .as_ref()
            .is_some_and(is_unacknowledged)
        {
            return Err(Error::transaction(
                "transactions do not support unacknowledged write concerns",
            ));
        }
        if let Some(SelectionCriteria::Predicate(_)) = options.selection_criteria {
            return Err(Error::invalid_argument(
                "a transaction's selection criteria must be a read preference (primary): its \
                 reads go where the transaction runs, so a predicate cannot choose them",
            ));
        }
        self.state = TransactionState::Starting;
        self.options = options;
        self.pinned = None;
        self.recovery_token = None;
        self.last_command_started = false;
        self.commit_attempted = false;
        Ok(())
    }

    /// Pins the transaction after the first command's server was selected
    /// (sharded clusters and load balancers only; the caller knows the
    /// topology).
    pub fn pin(&mut self, pin: Pin) {
        self.pinned = Some(pin);
    }

    /// Forgets the pin.
    pub fn unpin(&mut self) {
        self.pinned = None;
    }

    /// Before an operation other than commit/abort: a finished transaction
    /// becomes "no transaction" (forgetting its pin and recovery token), and
    /// an operation outside any transaction runs unpinned.
    pub fn reset_for_operation(&mut self) {
        match self.state {
            TransactionState::Committed
            | TransactionState::CommittedEmpty
            | TransactionState::Aborted => {
                self.state = TransactionState::None;
                self.pinned = None;
                self.recovery_token = None;
            }
            TransactionState::None => self.pinned = None,
            TransactionState::Starting | TransactionState::InProgress => {}
        }
    }

    /// Checks the read preference of a read inside an open transaction:
    /// `operation` if the operation set one, else the transaction's.
    pub fn check_read_preference(&self, operation: Option<&ReadPreference>) -> Result<()> {
        if !self.state.is_active() {
            return Ok(());
        }
        let effective = operation.or(self.options.read_preference());
        match effective {
            Some(rp) if rp.mode() != ReadPreferenceMode::Primary => Err(Error::transaction(
                "read preference in a transaction must be primary",
            )),
            _ => Ok(()),
        }
    }

    /// Records that a command of the transaction is being sent: the first
    /// one moves `Starting` to `InProgress`. Returns whether it is the first
    /// (it then carries `startTransaction: true` and the read concern).
    pub(crate) fn note_command_sent(&mut self) -> bool {
        let first = self.state == TransactionState::Starting;
        if first {
            self.state = TransactionState::InProgress;
        }
        self.last_command_started = first;
        first
    }

    /// The command just decorated as the transaction's first was not sent,
    /// or is being sent again after a retryable overload error: the next
    /// command must start the transaction again. No effect otherwise.
    pub fn undo_first_command(&mut self) {
        if self.last_command_started && self.state == TransactionState::InProgress {
            self.state = TransactionState::Starting;
            self.last_command_started = false;
        }
    }

    /// `commitTransaction`: moves to `Committed` (or `CommittedEmpty` when no
    /// command was sent) and returns the body to send, or `None` when there
    /// is nothing to send. Calling it again after a commit re-runs the commit
    /// with the majority write concern.
    pub fn commit(&mut self) -> Result<Option<Document>> {
        match self.state {
            TransactionState::None => Err(Error::transaction("No transaction started")),
            TransactionState::Aborted => Err(Error::transaction(
                "Cannot call commitTransaction after calling abortTransaction",
            )),
            TransactionState::Starting | TransactionState::CommittedEmpty => {
                self.state = TransactionState::CommittedEmpty;
                Ok(None)
            }
            TransactionState::InProgress | TransactionState::Committed => {
                self.state = TransactionState::Committed;
                self.last_command_started = false;
                let retry = self.commit_attempted;
                self.commit_attempted = true;
                Ok(Some(self.commit_body(retry)))
            }
        }
    }

    /// The body of the driver's own retry of a failed commit (always with
    /// the majority write concern). Meaningful in `Committed` only.
    pub fn commit_retry(&self) -> Document {
        self.commit_body(true)
    }

    fn commit_body(&self, retry: bool) -> Document {
        let mut body = doc! { "commitTransaction": 1 };
        let write_concern = if retry {
            Some(commit_retry_write_concern(
                self.options.write_concern.as_ref(),
            ))
        } else {
            self.options
                .write_concern
                .as_ref()
                .and_then(write_concern_document)
        };
        if let Some(wc) = write_concern {
            body.insert("writeConcern", wc);
        }
        if let Some(t) = self.options.max_commit_time {
            body.insert("maxTimeMS", duration_millis(t));
        }
        if let Some(token) = &self.recovery_token {
            body.insert("recoveryToken", token.clone());
        }
        body
    }

    /// `abortTransaction`: moves to `Aborted`, unpins, and returns the
    /// command to send (`None` when no command was sent in the transaction).
    /// Errors from the command itself are to be ignored by the caller.
    pub fn abort(&mut self) -> Result<Option<AbortCommand>> {
        match self.state {
            TransactionState::None => Err(Error::transaction("No transaction started")),
            TransactionState::Committed | TransactionState::CommittedEmpty => Err(
                Error::transaction("Cannot call abortTransaction after calling commitTransaction"),
            ),
            TransactionState::Aborted => {
                Err(Error::transaction("Cannot call abortTransaction twice"))
            }
            TransactionState::Starting => {
                self.state = TransactionState::Aborted;
                self.pinned = None;
                Ok(None)
            }
            TransactionState::InProgress => {
                self.state = TransactionState::Aborted;
                self.last_command_started = false;
                let mut body = doc! { "abortTransaction": 1 };
                if let Some(wc) = self
                    .options
                    .write_concern
                    .as_ref()
                    .and_then(write_concern_document)
                {
                    body.insert("writeConcern", wc);
                }
                if let Some(token) = &self.recovery_token {
                    body.insert("recoveryToken", token.clone());
                }
                Ok(Some(AbortCommand {
                    body,
                    pinned: self.pinned.take(),
                }))
            }
        }
    }

    /// Keeps the `recoveryToken` of a reply received in the transaction.
    #[cfg(test)]
    pub fn observe_reply(&mut self, reply: &Document) {
        self.observe_fields(reply);
    }

    /// [`Self::observe_reply`] of a reply's fields, read where they lie.
    pub(crate) fn observe_fields(&mut self, reply: &impl crate::proto::reply::ReplyFields) {
        let in_transaction = !matches!(self.state, TransactionState::None);
        if in_transaction {
            if let Some(Bson::Document(token)) = reply.field("recoveryToken").as_deref() {
                self.recovery_token = Some(token.clone());
            }
        }
    }

    /// Adds the labels the transactions spec asks for to an error of a
    /// command of this transaction and unpins when the spec says so:
    ///
    /// - a failed `commitTransaction` gets `UnknownTransactionCommitResult`
    ///   when the outcome is unknown ([`commit_outcome_unknown`]);
    /// - any other command failing with a network or server selection error
    ///   gets `TransientTransactionError`;
    /// - a transient error, or a commit with an unknown outcome, unpins.
    ///
    /// Errors outside a transaction are left alone.
    pub fn label_error(&mut self, error: &mut Error, failed: FailedCommand<'_>) {
        let is_commit = failed.name == "commitTransaction";
        let is_abort = failed.name == "abortTransaction";
        let in_transaction = self.state.is_active()
            || (is_commit && self.state == TransactionState::Committed)
            || (is_abort && self.state == TransactionState::Aborted);
        if !in_transaction {
            return;
        }
        if is_commit {
            if commit_outcome_unknown(error, failed.write_concern_error) {
                error.add_label(UNKNOWN_TRANSACTION_COMMIT_RESULT);
            }
        } else if error.is_network_error()
            || matches!(error.kind(), ErrorKind::ServerSelection { .. })
        {
            error.add_label(TRANSIENT_TRANSACTION_ERROR);
        }
        if error.contains_label(TRANSIENT_TRANSACTION_ERROR)
            || (is_commit && error.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT))
        {
            self.pinned = None;
        }
    }
}

/// Whether a failed commit leaves its outcome unknown: a server selection or
/// network error, a retryable write error, `MaxTimeMSExpired`, or a write
/// concern failure other than `UnsatisfiableWriteConcern` and
/// `UnknownReplWriteConcern` (which would fail again the same way).
pub fn commit_outcome_unknown(error: &Error, write_concern_error: bool) -> bool {
    if error.is_network_error()
        || matches!(error.kind(), ErrorKind::ServerSelection { .. })
        || error.contains_label(RETRYABLE_WRITE_ERROR)
    {
        return true;
    }
    let Some(code) = error.server_code() else {
        return false;
    };
    if code == UNSATISFIABLE_WRITE_CONCERN || code == UNKNOWN_REPL_WRITE_CONCERN {
        return false;
    }
    write_concern_error
        || code == MAX_TIME_MS_EXPIRED
        || code == WRITE_CONCERN_FAILED
        || RETRYABLE_WRITE_CODES.contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CommandError;

    fn majority() -> WriteConcern {
        WriteConcern {
            w: Some(Acknowledgment::Majority),
            ..Default::default()
        }
    }

    fn command_error(code: i32) -> Error {
        Error::from(CommandError {
            base_backoff: None,
            raw_response: None,
            code,
            code_name: String::new(),
            message: "failed".into(),
            topology_version: None,
            address: None,
        })
    }

    fn pin() -> Pin {
        Pin {
            address: ServerAddress::tcp("mongos1", 27017),
            connection: None,
        }
    }

    fn in_progress() -> Transaction {
        let mut t = Transaction::new();
        t.start(TransactionOptions::default()).unwrap();
        assert!(t.note_command_sent());
        t
    }

    fn message(e: Error) -> String {
        e.to_string()
    }

    #[test]
    fn start_moves_to_starting_and_twice_is_an_error() {
        let mut t = Transaction::new();
        t.start(TransactionOptions::default()).unwrap();
        assert_eq!(t.state(), TransactionState::Starting);
        let e = t.start(TransactionOptions::default()).unwrap_err();
        assert!(message(e).contains("Transaction already in progress"));
        assert_eq!(t.state(), TransactionState::Starting);
        t.note_command_sent();
        let e = t.start(TransactionOptions::default()).unwrap_err();
        assert!(message(e).contains("Transaction already in progress"));
        assert_eq!(t.state(), TransactionState::InProgress);
    }

    #[test]
    fn start_refuses_unacknowledged_write_concern() {
        let mut t = Transaction::new();
        let options = TransactionOptions {
            write_concern: Some(WriteConcern {
                w: Some(Acknowledgment::Nodes(0)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let e = t.start(options).unwrap_err();
        assert!(message(e).contains("transactions do not support unacknowledged write concerns"));
        assert_eq!(t.state(), TransactionState::None);
    }

    #[test]
    fn start_after_a_finished_transaction_is_allowed_and_unpins() {
        let mut t = in_progress();
        t.pin(pin());
        t.observe_reply(&doc! {"ok": 1, "recoveryToken": {"a": 1}});
        t.commit().unwrap();
        assert!(t.pinned().is_some(), "commit does not unpin");
        t.start(TransactionOptions::default()).unwrap();
        assert_eq!(t.state(), TransactionState::Starting);
        assert!(t.pinned().is_none());
        assert!(t.recovery_token().is_none());

        let mut t = in_progress();
        t.abort().unwrap();
        t.start(TransactionOptions::default()).unwrap();
        assert_eq!(t.state(), TransactionState::Starting);
    }

    #[test]
    fn first_command_moves_to_in_progress_once() {
        let mut t = Transaction::new();
        t.start(TransactionOptions::default()).unwrap();
        assert!(t.note_command_sent());
        assert_eq!(t.state(), TransactionState::InProgress);
        assert!(!t.note_command_sent());
        assert_eq!(t.state(), TransactionState::InProgress);
    }

    #[test]
    fn undo_first_command_restarts_only_after_the_first() {
        let mut t = Transaction::new();
        t.start(TransactionOptions::default()).unwrap();
        t.note_command_sent();
        t.undo_first_command();
        assert_eq!(t.state(), TransactionState::Starting);
        t.note_command_sent();
        t.note_command_sent();
        t.undo_first_command();
        assert_eq!(t.state(), TransactionState::InProgress, "second command");
    }

    #[test]
    fn commit_without_transaction_or_after_abort_fails() {
        let mut t = Transaction::new();
        assert!(message(t.commit().unwrap_err()).contains("No transaction started"));
        let mut t = in_progress();
        t.abort().unwrap();
        let e = t.commit().unwrap_err();
        assert!(message(e).contains("Cannot call commitTransaction after calling abortTransaction"));
        assert_eq!(t.state(), TransactionState::Aborted);
    }

    #[test]
    fn commit_of_an_empty_transaction_sends_nothing_even_twice() {
        let mut t = Transaction::new();
        t.start(TransactionOptions::default()).unwrap();
        assert_eq!(t.commit().unwrap(), None);
        assert_eq!(t.state(), TransactionState::CommittedEmpty);
        assert_eq!(t.commit().unwrap(), None);
        assert_eq!(t.state(), TransactionState::CommittedEmpty);
        let e = t.abort().unwrap_err();
        assert!(message(e).contains("Cannot call abortTransaction after calling commitTransaction"));
    }

    #[test]
    fn commit_body_then_majority_on_recommit() {
        let mut t = in_progress();
        assert_eq!(t.commit().unwrap(), Some(doc! {"commitTransaction": 1}));
        assert_eq!(t.state(), TransactionState::Committed);
        let again = t.commit().unwrap().unwrap();
        assert_eq!(
            again,
            doc! {"commitTransaction": 1, "writeConcern": {"w": "majority", "wtimeout": 10_000_i64}}
        );
        assert_eq!(t.commit().unwrap(), Some(again));
        assert_eq!(t.commit_retry(), t.commit_body(true));
    }

    #[test]
    fn commit_carries_write_concern_max_time_and_recovery_token() {
        let mut t = Transaction::new();
        t.start(TransactionOptions {
            write_concern: Some(WriteConcern {
                w: Some(Acknowledgment::Nodes(2)),
                journal: Some(true),
                w_timeout: Some(Duration::from_millis(5000)),
            }),
            max_commit_time: Some(Duration::from_millis(60_000)),
            ..Default::default()
        })
        .unwrap();
        t.note_command_sent();
        t.observe_reply(&doc! {"ok": 1, "recoveryToken": {"shard": "a"}});
        t.observe_reply(&doc! {"ok": 1, "recoveryToken": {"shard": "b"}});
        let body = t.commit().unwrap().unwrap();
        assert_eq!(
            body,
            doc! {
                "commitTransaction": 1,
                "writeConcern": {"w": 2_i64, "j": true, "wtimeout": 5000_i64},
                "maxTimeMS": 60_000_i64,
                "recoveryToken": {"shard": "b"},
            }
        );
        // The retry keeps j and wtimeout, and the order of the fields.
        assert_eq!(
            t.commit_retry().get_document("writeConcern").unwrap(),
            &doc! {"w": "majority", "j": true, "wtimeout": 5000_i64}
        );
    }

    #[test]
    fn abort_transitions_and_errors() {
        let mut t = Transaction::new();
        assert!(message(t.abort().unwrap_err()).contains("No transaction started"));

        t.start(TransactionOptions::default()).unwrap();
        t.pin(pin());
        assert_eq!(t.abort().unwrap(), None, "nothing sent: nothing to abort");
        assert_eq!(t.state(), TransactionState::Aborted);
        assert!(t.pinned().is_none());
        let e = t.abort().unwrap_err();
        assert!(message(e).contains("Cannot call abortTransaction twice"));

        let mut t = in_progress();
        t.commit().unwrap();
        let e = t.abort().unwrap_err();
        assert!(message(e).contains("Cannot call abortTransaction after calling commitTransaction"));
        assert_eq!(t.state(), TransactionState::Committed);
    }

    #[test]
    fn abort_body_goes_to_the_pin_and_unpins() {
        let mut t = Transaction::new();
        t.start(TransactionOptions {
            write_concern: Some(majority()),
            ..Default::default()
        })
        .unwrap();
        t.note_command_sent();
        t.pin(pin());
        t.observe_reply(&doc! {"ok": 1, "recoveryToken": {"x": 1}});
        let abort = t.abort().unwrap().unwrap();
        assert_eq!(
            abort.body,
            doc! {"abortTransaction": 1, "writeConcern": {"w": "majority"}, "recoveryToken": {"x": 1}}
        );
        assert_eq!(abort.pinned, Some(pin()));
        assert!(t.pinned().is_none());
    }

    #[test]
    fn reset_for_operation_ends_finished_transactions_only() {
        for finish in [0, 1, 2] {
            let mut t = Transaction::new();
            t.start(TransactionOptions::default()).unwrap();
            if finish != 1 {
                t.note_command_sent();
            }
            t.pin(pin());
            match finish {
                0 | 1 => {
                    t.commit().unwrap();
                }
                _ => {
                    t.abort().unwrap();
                }
            }
            t.reset_for_operation();
            assert_eq!(t.state(), TransactionState::None);
            assert!(t.pinned().is_none());
            assert!(message(t.abort().unwrap_err()).contains("No transaction started"));
        }
        let mut t = in_progress();
        t.pin(pin());
        t.reset_for_operation();
        assert_eq!(t.state(), TransactionState::InProgress);
        assert!(t.pinned().is_some());
    }

    #[test]
    fn read_preference_must_be_primary_inside_a_transaction() {
        let secondary = ReadPreference::secondary(None);
        let mut t = Transaction::new();
        assert!(t.check_read_preference(Some(&secondary)).is_ok());
        t.start(TransactionOptions {
            selection_criteria: Some(secondary.clone().into()),
            ..Default::default()
        })
        .unwrap();
        let e = t.check_read_preference(None).unwrap_err();
        assert!(message(e).contains("read preference in a transaction must be primary"));
        assert!(t
            .check_read_preference(Some(&ReadPreference::primary()))
            .is_ok());
        t.note_command_sent();
        assert!(t.check_read_preference(Some(&secondary)).is_err());
    }

    #[test]
    fn options_resolve_from_operation_then_session_then_client() {
        let session = TransactionOptions {
            write_concern: Some(majority()),
            max_commit_time: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        let client = TransactionOptions {
            read_concern: Some(ReadConcern::local()),
            write_concern: Some(WriteConcern {
                w: Some(Acknowledgment::Nodes(1)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let own = TransactionOptions {
            max_commit_time: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        let r = own.resolve(Some(&session), &client);
        assert_eq!(r.max_commit_time, Some(Duration::from_secs(2)));
        assert_eq!(r.write_concern, Some(majority()));
        assert_eq!(r.read_concern.unwrap().level.as_str(), "local");
        assert_eq!(r.selection_criteria, None);
        let r = own.resolve(None, &client);
        assert_eq!(r.write_concern.unwrap().w, Some(Acknowledgment::Nodes(1)));
    }

    #[test]
    fn network_errors_inside_a_transaction_are_transient_and_unpin() {
        let mut t = in_progress();
        t.pin(pin());
        let mut e = Error::network_message(None, "reset");
        t.label_error(&mut e, FailedCommand::named("insert"));
        assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR));
        assert!(t.pinned().is_none());

        let mut e = Error::server_selection("no mongos");
        t.label_error(&mut e, FailedCommand::named("find"));
        assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR));
    }

    #[test]
    fn first_command_errors_are_labelled_too() {
        let mut t = Transaction::new();
        t.start(TransactionOptions::default()).unwrap();
        let mut e = Error::network_message(None, "reset");
        t.label_error(&mut e, FailedCommand::named("insert"));
        assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR));
    }

    #[test]
    fn command_errors_keep_their_own_labels_and_server_labels_unpin() {
        let mut t = in_progress();
        t.pin(pin());
        let mut e = command_error(11000);
        t.label_error(&mut e, FailedCommand::named("insert"));
        assert_eq!(e.labels().len(), 0);
        assert!(t.pinned().is_some());

        let mut e = command_error(251).with_labels([TRANSIENT_TRANSACTION_ERROR]);
        t.label_error(&mut e, FailedCommand::named("insert"));
        assert!(t.pinned().is_none());
    }

    #[test]
    fn errors_outside_transactions_are_not_labelled() {
        let mut t = Transaction::new();
        let mut e = Error::network_message(None, "reset");
        t.label_error(&mut e, FailedCommand::named("insert"));
        assert_eq!(e.labels().len(), 0);
        t.start(TransactionOptions::default()).unwrap();
        t.commit().unwrap();
        t.label_error(&mut e, FailedCommand::named("insert"));
        assert_eq!(e.labels().len(), 0);
    }

    #[test]
    fn network_errors_on_commit_are_unknown_not_transient() {
        let mut t = in_progress();
        t.pin(pin());
        t.commit().unwrap();
        let mut e = Error::network_message(None, "reset");
        t.label_error(&mut e, FailedCommand::named("commitTransaction"));
        assert!(e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT));
        assert!(!e.contains_label(TRANSIENT_TRANSACTION_ERROR));
        assert!(t.pinned().is_none(), "unknown commit result unpins");
    }

    #[test]
    fn abort_network_errors_are_transient() {
        let mut t = in_progress();
        t.abort().unwrap();
        let mut e = Error::network_message(None, "reset");
        t.label_error(&mut e, FailedCommand::named("abortTransaction"));
        assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR));
    }

    #[test]
    fn commit_outcome_unknown_follows_the_spec_list() {
        assert!(commit_outcome_unknown(
            &Error::network_message(None, "x"),
            false
        ));
        assert!(commit_outcome_unknown(&Error::server_selection("x"), false));
        assert!(commit_outcome_unknown(
            &command_error(11601).with_labels([RETRYABLE_WRITE_ERROR]),
            false
        ));
        assert!(
            commit_outcome_unknown(&command_error(10107), false),
            "legacy code"
        );
        assert!(commit_outcome_unknown(
            &command_error(MAX_TIME_MS_EXPIRED),
            false
        ));
        assert!(commit_outcome_unknown(
            &command_error(MAX_TIME_MS_EXPIRED),
            true
        ));
        assert!(commit_outcome_unknown(
            &command_error(WRITE_CONCERN_FAILED),
            true
        ));
        assert!(commit_outcome_unknown(
            &command_error(WRITE_CONCERN_FAILED),
            false
        ));
        assert!(
            commit_outcome_unknown(&command_error(12345), true),
            "any other wce"
        );
        assert!(!commit_outcome_unknown(
            &command_error(UNSATISFIABLE_WRITE_CONCERN),
            true
        ));
        assert!(!commit_outcome_unknown(
            &command_error(UNKNOWN_REPL_WRITE_CONCERN),
            true
        ));
        assert!(
            !commit_outcome_unknown(&command_error(11601), false),
            "Interrupted"
        );
        assert!(
            !commit_outcome_unknown(&command_error(251), false),
            "NoSuchTransaction"
        );
        assert!(!commit_outcome_unknown(
            &Error::invalid_argument("x"),
            false
        ));
    }

    #[test]
    fn write_concern_documents() {
        assert_eq!(write_concern_document(&WriteConcern::default()), None);
        assert_eq!(
            write_concern_document(&WriteConcern {
                w: Some(Acknowledgment::Custom("dc".into())),
                ..Default::default()
            }),
            Some(doc! {"w": "dc"})
        );
        assert_eq!(
            commit_retry_write_concern(Some(&WriteConcern {
                w: Some(Acknowledgment::Nodes(1)),
                journal: Some(false),
                ..Default::default()
            })),
            doc! {"w": "majority", "j": false, "wtimeout": 10_000_i64}
        );
        assert_eq!(
            commit_retry_write_concern(None),
            doc! {"w": "majority", "wtimeout": 10_000_i64}
        );
    }
}
