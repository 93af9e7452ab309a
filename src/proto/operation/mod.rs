//! Operations as pure values: each one builds the command it needs and
//! understands the reply, and knows nothing of sockets, sessions or retries.
//!
//! ```text
//!            ServerInfo (limits of the selected server)
//!                 │
//!  Operation ──build──> Command { body, sequences, target_db }
//!                 │         │  executor adds $db, lsid, txnNumber, $clusterTime,
//!                 │         │  $readPreference, inherited read/write concern; sends
//!                 │         ▼
//!                 └──handle_reply(reply with ok: 1) ──> Output
//!                    handle_error(command/network error) ──> Output or the error
//! ```
//!
//! `build` may be called again for a retry and must then produce the same
//! statements; operations that need several commands (a bulk write split into
//! batches, a cursor's `getMore`s) are driven by a small pure state machine
//! ([`bulk_write::BulkWrite`], [`cursor::CursorSpec`]) that hands out one
//! operation per command.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bson::{Bson, Document};

use crate::error::{Error, ErrorKind, Result};
use crate::proto::concern::{ReadConcern, WriteConcern};
use crate::proto::reply::Reply;
use crate::proto::results::{WriteConcernError, WriteError, WriteFailure};
use crate::proto::sdam::description::ServerDescription;
use crate::proto::select::Criteria;
use crate::proto::wire::DocumentSequence;

pub mod aggregate;
pub mod bulk_write;
pub mod client_bulk_write;
pub mod count;
pub mod create_collection;
pub mod create_indexes;
pub mod cursor;
pub mod delete;
pub mod distinct;
pub mod drop_collection;
pub mod drop_indexes;
pub mod end_transaction;
pub mod find;
pub mod find_and_modify;
pub mod get_more;
pub mod insert;
pub mod kill_cursors;
pub mod list_collections;
pub mod list_databases;
pub mod list_indexes;
mod names;
pub mod run_command;
pub mod run_cursor_command;
pub mod update;

pub use crate::proto::command_draft::CommandBody;
pub(crate) use crate::proto::write_model::first_key_is_operator;
pub use aggregate::Aggregate;
pub use bulk_write::{BulkWrite, CollectionWriteModel, InsertMany, WriteBatch};
pub use count::{CountDocuments, EstimatedDocumentCount};
pub use create_collection::CreateCollection;
pub use create_indexes::CreateIndexes;
pub use cursor::CursorSpec;
pub use delete::Delete;
pub use distinct::Distinct;
pub use drop_collection::DropCollection;
pub use drop_indexes::DropIndexes;
pub use end_transaction::EndTransaction;
pub use find::Find;
pub use find_and_modify::FindAndModify;
pub use get_more::GetMore;
pub use insert::Insert;
pub use kill_cursors::KillCursors;
pub use list_collections::ListCollections;
pub use list_databases::ListDatabases;
pub use list_indexes::ListIndexes;
pub(crate) use names::check_database_name;
pub use run_command::RunCommand;
pub use run_cursor_command::RunCursorCommand;
pub use update::{Update, UpdateModifications};

/// Space kept free in every message for what the executor adds to a command
/// after `build` (`$db`, `lsid`, `txnNumber`, `$clusterTime`,
/// `$readPreference`, write concern, API version), so that a batch sized to
/// the server's limit still fits once those are in.
pub const COMMAND_OVERHEAD_BYTES: usize = 16 * 1024;

/// Bytes of an OP_MSG that are neither the body nor the documents of a
/// sequence: the header, the flags, the section kinds, the sequence's size
/// and its identifier (at most `updates\0`).
const MESSAGE_FRAME_BYTES: usize = 16 + 4 + 1 + 1 + 4 + 8;

/// The server error code of `NamespaceNotFound`.
pub(crate) const NAMESPACE_NOT_FOUND: i32 = 26;

/// A command ready to send.
///
/// The body's first key is the command name. The executor adds `$db`
/// (`target_db`), the session, `txnNumber`, `$clusterTime`,
/// `$readPreference` and any inherited read or write concern.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Command {
    /// The command name (the body's first key).
    pub name: &'static str,
    /// The database the command runs against (`$db`); shared with the
    /// operation's namespace rather than copied for every command.
    pub target_db: Arc<str>,
    /// The command document.
    pub body: CommandBody,
    /// OP_MSG document sequences (`documents`, `updates`, `deletes`).
    pub sequences: Vec<DocumentSequence>,
}

impl Command {
    /// A command without document sequences.
    pub fn new(
        name: &'static str,
        target_db: impl Into<Arc<str>>,
        body: impl Into<CommandBody>,
    ) -> Self {
        Command {
            name,
            target_db: target_db.into(),
            body: body.into(),
            sequences: Vec::new(),
        }
    }
}

/// Whether, and by which rules, an operation may be retried once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retryability {
    /// Never retried.
    None,
    /// A retryable read (retryable reads spec).
    Read,
    /// A retryable write: the executor adds a `txnNumber`.
    Write,
}

/// The retry rules an operation type follows besides its
/// [`Operation::retryability`] (retryable reads, retryable writes,
/// transactions and client backpressure specs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryRules {
    /// By its retryability alone; an operation that is not a retryable read
    /// counts as a write.
    ByRetryability,
    /// By its retryability, and a read even when not a retryable read
    /// (`getMore`, `killCursors`, the list commands).
    ReadOnly,
    /// A generic `runCommand`: overload retries only.
    RunCommand,
    /// `commitTransaction`/`abortTransaction`: retried once as a retryable
    /// write, whatever `retryWrites` and the server say.
    EndTransaction,
}

/// What an operation needs to know about the server the executor selected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// `maxWireVersion`.
    pub max_wire_version: i32,
    /// `maxBsonObjectSize`.
    pub max_bson_object_size: i64,
    /// `maxMessageSizeBytes`.
    pub max_message_size_bytes: i64,
    /// `maxWriteBatchSize`.
    pub max_write_batch_size: i64,
}

impl Default for ServerInfo {
    /// The spec's defaults and a 4.2 wire version (the oldest this driver supports).
    fn default() -> Self {
        ServerInfo {
            max_wire_version: 8,
            max_bson_object_size: crate::proto::sdam::description::DEFAULT_MAX_BSON_OBJECT_SIZE,
            max_message_size_bytes: crate::proto::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES,
            max_write_batch_size: crate::proto::sdam::description::DEFAULT_MAX_WRITE_BATCH_SIZE,
        }
    }
}

impl ServerInfo {
    /// The limits a server described in its hello reply.
    pub fn from_description(description: &ServerDescription) -> Self {
        ServerInfo {
            max_wire_version: description.max_wire_version,
            max_bson_object_size: description.max_bson_object_size,
            max_message_size_bytes: description.max_message_size_bytes,
            max_write_batch_size: description.max_write_batch_size,
        }
    }

    /// `maxBsonObjectSize` as a size; a nonsensical (non-positive) value
    /// counts as the default.
    pub(crate) fn max_document_bytes(&self) -> usize {
        positive_or(
            self.max_bson_object_size,
            crate::proto::sdam::description::DEFAULT_MAX_BSON_OBJECT_SIZE,
        )
    }

    /// `maxMessageSizeBytes` as a size; non-positive counts as the default.
    pub(crate) fn max_message_bytes(&self) -> usize {
        positive_or(
            self.max_message_size_bytes,
            crate::proto::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES,
        )
    }

    /// `maxWriteBatchSize` as a count; non-positive counts as the default.
    pub(crate) fn max_batch_count(&self) -> usize {
        positive_or(
            self.max_write_batch_size,
            crate::proto::sdam::description::DEFAULT_MAX_WRITE_BATCH_SIZE,
        )
    }
}

fn positive_or(value: i64, default: i64) -> usize {
    let chosen = if value > 0 { value } else { default };
    usize::try_from(chosen).unwrap_or(usize::MAX)
}

/// One operation: a command to build and a reply to interpret.
pub trait Operation {
    /// What the operation returns.
    type Output;

    /// The command name, for logs and events.
    const NAME: &'static str;

    /// Which retry rules the operation type follows.
    const RETRY_RULES: RetryRules = RetryRules::ByRetryability;

    /// The name of the command this operation sends, for the server
    /// selection logs' `operation` (the spec: the command name, e.g.
    /// `insert`, `commitTransaction`). [`Operation::NAME`] unless one
    /// operation type sends several commands.
    fn command_name(&self) -> &str {
        Self::NAME
    }

    /// Builds the command for `server`. Called again before a retry (maybe for
    /// another server); must describe the same work each time.
    fn build(&mut self, server: &ServerInfo) -> Result<Command>;

    /// Interprets a reply that has already passed `ok: 1` checking. Write
    /// errors and write concern errors are reported here, as errors.
    fn handle_reply(&self, reply: Document, server: &ServerInfo) -> Result<Self::Output>;

    /// [`Operation::handle_reply`] for a reply that may keep a cursor batch
    /// as bytes. Operations that open or continue a cursor take the batch
    /// as it is; the others get the whole reply as a `Document`.
    fn handle_reply_raw(&self, reply: Reply, server: &ServerInfo) -> Result<Self::Output> {
        self.handle_reply(reply.into_document()?, server)
    }

    /// Interprets a failure of the command (after retries). Some operations
    /// treat some errors as success (`drop` of a missing collection).
    fn handle_error(&self, error: Error) -> Result<Self::Output> {
        Err(error)
    }

    /// Where the operation may run, as the application set it on the
    /// operation; `None` means the handle's read preference for a read,
    /// the transaction's inside one, else the primary.
    fn selection_criteria(&self) -> Option<Criteria> {
        None
    }

    /// Whether the operation is a read, subject to a transaction's read
    /// preference (which must be primary).
    fn reads(&self) -> bool {
        matches!(self.retryability(), Retryability::Read)
    }

    /// Which retry rules apply.
    fn retryability(&self) -> Retryability {
        Retryability::None
    }

    /// The operation's own write concern; the executor merges the inherited one.
    fn write_concern(&self) -> Option<&WriteConcern> {
        None
    }

    /// The operation's own read concern; the executor merges the inherited one.
    fn read_concern(&self) -> Option<&ReadConcern> {
        None
    }

    /// Whether a reply is expected (false for `w: 0` writes).
    fn is_acknowledged(&self) -> bool {
        self.write_concern()
            .and_then(|wc| wc.w.as_ref())
            .is_none_or(|w| !matches!(w, crate::proto::concern::Acknowledgment::Nodes(0)))
    }

    /// What a cursor-opening operation's timing depends on (CSOT's
    /// `timeoutMode` rules): its cursor type, `maxAwaitTimeMS`, and whether
    /// it writes; the caller adds the timeout and the mode.
    fn cursor_request(&self) -> crate::proto::cursor_timeout::CursorRequest {
        crate::proto::cursor_timeout::CursorRequest::default()
    }

    /// Called before the executor retries a failed attempt; `overload`
    /// when the failure was the server turning the command away for
    /// overload (a commit's write concern is upgraded only after other
    /// errors).
    fn before_retry(&mut self, overload: bool) {
        let _ = overload;
    }
}

/// A collection's full name: database and collection. Its clones share
/// the names: every operation and cursor on a collection carries one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Namespace {
    /// The database.
    pub db: Arc<str>,
    /// The collection (may itself contain dots).
    pub coll: Arc<str>,
}

impl Namespace {
    /// The namespace `db.coll`.
    pub fn new(db: impl Into<Arc<str>>, coll: impl Into<Arc<str>>) -> Self {
        Namespace {
            db: db.into(),
            coll: coll.into(),
        }
    }

    /// Whether `full_name` is this namespace's `db.coll`.
    pub fn is(&self, full_name: &str) -> bool {
        full_name.len() == self.db.len() + 1 + self.coll.len()
            && full_name.starts_with(&*self.db)
            && full_name[self.db.len()..].starts_with('.')
            && full_name.ends_with(&*self.coll)
    }

    /// Parses `db.coll` as a server sends it (`cursor.ns`): the database is
    /// everything before the first dot and must not be empty.
    pub fn parse(full_name: &str) -> Option<Self> {
        let (db, coll) = full_name.split_once('.')?;
        if db.is_empty() {
            return None;
        }
        Some(Namespace::new(db, coll))
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.db, self.coll)
    }
}

/// Inserts `key` when `value` is set.
pub(crate) fn append_option<T: Into<Bson>>(body: &mut Document, key: &str, value: Option<T>) {
    if let Some(value) = value {
        body.insert(key, value.into());
    }
}

/// The wire version of MongoDB 8.2, the first server to take `rawData`.
pub(crate) const RAW_DATA_WIRE_VERSION: i32 = 27;

/// `rawData: true` when the caller asked for it: an error on a server
/// older than 8.2, which would act on the time-series view instead of its
/// buckets (`false`, the default, is left out).
pub(crate) fn raw_data(raw_data: Option<bool>, server: &ServerInfo) -> Result<Option<bool>> {
    match raw_data {
        Some(true) if server.max_wire_version < RAW_DATA_WIRE_VERSION => {
            Err(Error::invalid_argument(format!(
                "rawData needs MongoDB 8.2 or later (wire version {RAW_DATA_WIRE_VERSION}); \
                 the selected server has wire version {}",
                server.max_wire_version
            )))
        }
        Some(true) => Ok(Some(true)),
        _ => Ok(None),
    }
}

/// A duration as the server's `maxTimeMS`: whole milliseconds, an `Int32`
/// when it fits (as the official driver sends it, so a command monitor
/// reading `get_i32("maxTimeMS")` works with either), else a saturating
/// `Int64`.
pub(crate) fn duration_ms(duration: Duration) -> Bson {
    let ms = duration.as_millis();
    match i32::try_from(ms) {
        Ok(ms) => Bson::Int32(ms),
        Err(_) => Bson::Int64(i64::try_from(ms).unwrap_or(i64::MAX)),
    }
}

/// A `u64` count option as BSON (counts beyond `i64::MAX` cannot be meant).
pub(crate) fn count_bson(count: u64) -> Bson {
    Bson::Int64(i64::try_from(count).unwrap_or(i64::MAX))
}

/// The encoded size of a document; documents we build always encode.
pub(crate) fn document_size(document: &Document) -> Result<usize> {
    let mut bytes = Vec::new();
    document
        .to_writer(&mut bytes)
        .map_err(|e| Error::invalid_argument(format!("document cannot be encoded as BSON: {e}")))?;
    Ok(bytes.len())
}

/// The room left for a document sequence next to `body` in one message.
pub(crate) fn sequence_budget(server: &ServerInfo, body: &Document) -> Result<usize> {
    let fixed = document_size(body)? + MESSAGE_FRAME_BYTES + COMMAND_OVERHEAD_BYTES;
    Ok(server.max_message_bytes().saturating_sub(fixed))
}

/// Why a reply could not be understood.
#[cold]
pub(crate) fn malformed(what: impl fmt::Display) -> Error {
    Error::protocol(None, format!("malformed reply: {what}"))
}

/// A non-negative integer field of a reply (`n`, `nModified`): any BSON
/// number with an integral value. `None` when absent.
pub(crate) fn reply_count(reply: &Document, key: &str) -> Result<Option<u64>> {
    match reply.get(key) {
        None => Ok(None),
        Some(value) => bson_to_u64(value)
            .map(Some)
            .ok_or_else(|| malformed(format!("`{key}` is {value}, not a count"))),
    }
}

pub(crate) fn bson_to_u64(value: &Bson) -> Option<u64> {
    match value {
        Bson::Int32(i) => u64::try_from(*i).ok(),
        Bson::Int64(i) => u64::try_from(*i).ok(),
        Bson::Double(d) if d.fract() == 0.0 && *d >= 0.0 && *d <= u64::MAX as f64 => {
            Some(*d as u64)
        }
        _ => None,
    }
}

pub(crate) fn bson_to_i32(value: &Bson) -> Option<i32> {
    match value {
        Bson::Int32(i) => Some(*i),
        Bson::Int64(i) => i32::try_from(*i).ok(),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() <= i32::MAX as f64 => Some(*d as i32),
        _ => None,
    }
}

/// The reply's `errorLabels` (where 4.4+ servers put the labels of a write
/// concern error).
pub(crate) fn reply_labels(reply: &Document) -> Vec<String> {
    match reply.get_array("errorLabels") {
        Ok(labels) => labels
            .iter()
            .filter_map(|l| l.as_str().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The reply's `writeErrors`, with their batch-relative indexes.
pub(crate) fn parse_write_errors(reply: &Document) -> Result<Vec<WriteError>> {
    let errors = match reply.get("writeErrors") {
        None => return Ok(Vec::new()),
        Some(Bson::Array(errors)) => errors,
        Some(other) => return Err(malformed(format!("`writeErrors` is {other}"))),
    };
    errors
        .iter()
        .map(|entry| {
            let entry = entry
                .as_document()
                .ok_or_else(|| malformed("a `writeErrors` entry is not a document"))?;
            let index = entry
                .get("index")
                .and_then(bson_to_u64)
                .and_then(|i| usize::try_from(i).ok())
                .ok_or_else(|| malformed("a write error has no valid `index`"))?;
            let code = entry
                .get("code")
                .and_then(bson_to_i32)
                .ok_or_else(|| malformed("a write error has no valid `code`"))?;
            Ok(WriteError {
                index,
                code,
                code_name: entry.get_str("codeName").ok().map(str::to_string),
                message: entry.get_str("errmsg").unwrap_or_default().to_string(),
                details: entry.get_document("errInfo").ok().cloned(),
            })
        })
        .collect()
}

/// The reply's `writeConcernError`, if any.
pub(crate) fn parse_write_concern_error(reply: &Document) -> Result<Option<WriteConcernError>> {
    let wce = match reply.get("writeConcernError") {
        None => return Ok(None),
        Some(Bson::Document(wce)) => wce,
        Some(other) => return Err(malformed(format!("`writeConcernError` is {other}"))),
    };
    let code = wce
        .get("code")
        .and_then(bson_to_i32)
        .ok_or_else(|| malformed("`writeConcernError` has no valid `code`"))?;
    Ok(Some(WriteConcernError {
        code,
        code_name: wce.get_str("codeName").unwrap_or_default().to_string(),
        message: wce.get_str("errmsg").unwrap_or_default().to_string(),
        details: wce.get_document("errInfo").ok().cloned(),
        labels: reply_labels(wce),
    }))
}

/// An error carrying `failure` and the labels of the reply it came from.
#[cold]
pub(crate) fn write_failure_error(failure: WriteFailure, reply: &Document) -> Error {
    let mut labels = reply_labels(reply);
    if let WriteFailure::WriteConcernError(wce) = &failure {
        labels.extend(wce.labels.iter().cloned());
    }
    Error::new(ErrorKind::Write(failure)).with_labels(labels)
}

/// For single-statement writes and write-concern-bearing commands: the first
/// write error, else the write concern error, as an error.
pub(crate) fn check_single_write(reply: &Document) -> Result<()> {
    if let Some(first) = parse_write_errors(reply)?.into_iter().next() {
        return Err(write_failure_error(WriteFailure::WriteError(first), reply));
    }
    check_write_concern(reply)
}

/// A write concern error in the reply, as an error.
pub(crate) fn check_write_concern(reply: &Document) -> Result<()> {
    match parse_write_concern_error(reply)? {
        Some(wce) => Err(write_failure_error(
            WriteFailure::WriteConcernError(wce),
            reply,
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// The documents of a command's first sequence, decoded.
    pub fn sent(command: &Command) -> Vec<Document> {
        command.sequences[0]
            .documents
            .iter()
            .map(|raw| crate::proto::encode::raw_to_document(raw.as_bytes()))
            .collect()
    }

    /// `document` as BSON bytes.
    pub fn raw(document: &Document) -> bson::RawDocumentBuf {
        bson::RawDocumentBuf::from_document(document).expect("encodes")
    }

    /// A server with small limits, to make batching visible.
    pub fn small_server(max_batch: i64, max_message: i64, max_document: i64) -> ServerInfo {
        ServerInfo {
            max_wire_version: 21,
            max_bson_object_size: max_document,
            max_message_size_bytes: max_message,
            max_write_batch_size: max_batch,
        }
    }

    pub fn server() -> ServerInfo {
        ServerInfo {
            max_wire_version: 21,
            ..ServerInfo::default()
        }
    }

    pub fn ns() -> Namespace {
        Namespace::new("db", "coll")
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn max_time_is_an_int32_until_it_does_not_fit() {
        assert_eq!(duration_ms(Duration::from_millis(250)), Bson::Int32(250));
        let beyond = u64::try_from(i32::MAX).unwrap() + 1;
        assert_eq!(
            duration_ms(Duration::from_millis(beyond)),
            Bson::Int64(i64::try_from(beyond).unwrap())
        );
        assert_eq!(duration_ms(Duration::MAX), Bson::Int64(i64::MAX));
    }

    #[test]
    fn namespace_parses_first_dot() {
        assert_eq!(
            Namespace::parse("db.a.b"),
            Some(Namespace::new("db", "a.b"))
        );
        assert_eq!(Namespace::parse("nodot"), None);
        let ns = Namespace::new("db", "a.b");
        assert!(ns.is("db.a.b"));
        for other in [
            "db.a.c", "dbx.a.b", "db.a.bc", "db.a", "db_a.b", "da.a.b", "",
        ] {
            assert!(!ns.is(other), "{other}");
        }
        assert_eq!(Namespace::parse(".coll"), None);
    }

    #[test]
    fn write_errors_parse_and_reject_bad_shapes() {
        let reply = doc! { "writeErrors": [ { "index": 2, "code": 11000, "errmsg": "dup", "errInfo": { "a": 1 } } ] };
        let errors = parse_write_errors(&reply).unwrap();
        assert_eq!(
            errors,
            vec![WriteError {
                index: 2,
                code: 11000,
                code_name: None,
                message: "dup".into(),
                details: Some(doc! { "a": 1 }),
            }]
        );
        for bad in [
            doc! { "writeErrors": 1 },
            doc! { "writeErrors": [1] },
            doc! { "writeErrors": [ { "code": 1 } ] },
            doc! { "writeErrors": [ { "index": -1, "code": 1 } ] },
            doc! { "writeErrors": [ { "index": 0, "code": "x" } ] },
        ] {
            let error = parse_write_errors(&bad).unwrap_err();
            assert!(
                matches!(error.kind(), ErrorKind::InvalidResponse { .. }),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn write_concern_error_carries_reply_labels_and_code() {
        let reply = doc! {
            "ok": 1, "n": 1,
            "writeConcernError": { "code": 91, "codeName": "ShutdownInProgress", "errmsg": "down", "errInfo": { "w": 2 } },
            "errorLabels": ["RetryableWriteError"],
        };
        let error = check_single_write(&reply).unwrap_err();
        assert_eq!(error.code(), Some(91));
        assert!(error.contains_label("RetryableWriteError"));
        match error.kind() {
            ErrorKind::Write(WriteFailure::WriteConcernError(wce)) => {
                assert_eq!(wce.code_name, "ShutdownInProgress");
                assert_eq!(wce.details, Some(doc! { "w": 2 }));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn write_error_wins_over_write_concern_error() {
        let reply = doc! {
            "writeErrors": [ { "index": 0, "code": 11000, "errmsg": "dup" } ],
            "writeConcernError": { "code": 64, "errmsg": "timeout" },
        };
        let error = check_single_write(&reply).unwrap_err();
        assert!(matches!(
            error.kind(),
            ErrorKind::Write(WriteFailure::WriteError(WriteError { code: 11000, .. }))
        ));
        // A write error is not a command error: it has no code for retry
        // decisions, but the user sees the statement's code.
        assert_eq!(error.server_code(), None);
        assert_eq!(error.code(), Some(11000));
    }

    #[test]
    fn counts_accept_any_integral_number() {
        let reply = doc! { "a": 1, "b": 2_i64, "c": 3.0, "d": -1, "e": 1.5, "f": "1" };
        assert_eq!(reply_count(&reply, "a").unwrap(), Some(1));
        assert_eq!(reply_count(&reply, "b").unwrap(), Some(2));
        assert_eq!(reply_count(&reply, "c").unwrap(), Some(3));
        assert_eq!(reply_count(&reply, "missing").unwrap(), None);
        for bad in ["d", "e", "f"] {
            assert!(reply_count(&reply, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_fall_back_to_defaults_when_nonsensical() {
        let server = test_support::small_server(0, -1, 0);
        assert_eq!(server.max_batch_count(), 100_000);
        assert_eq!(server.max_message_bytes(), 48_000_000);
        assert_eq!(server.max_document_bytes(), 16 * 1024 * 1024);
    }
}
