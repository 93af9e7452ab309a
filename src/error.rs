//! The one error type of the crate.
//!
//! Every failure is an [`Error`]: a [`ErrorKind`] that callers match on, plus
//! the error labels the server (or the driver) attached. Retry and SDAM
//! decisions are made from the kind and labels, never from message text,
//! except where a spec says to look at the message.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use bson::Document;

use crate::proto::address::ServerAddress;

pub use crate::proto::client_bulk::{BulkWriteError, PartialBulkWriteResult};
pub use crate::proto::results::{WriteConcernError, WriteError, WriteFailure};

/// A failed statement of a batched write, with its index in the caller's
/// list: the official driver's name for [`WriteError`], which here always
/// carries the index.
pub type IndexedWriteError = WriteError;

/// The label of errors after which a write may be retried.
pub const RETRYABLE_WRITE_ERROR: &str = "RetryableWriteError";
/// The label of errors after which a whole transaction may be retried.
pub const TRANSIENT_TRANSACTION_ERROR: &str = "TransientTransactionError";
/// The label of a commit whose outcome is unknown (retry the commit).
pub const UNKNOWN_TRANSACTION_COMMIT_RESULT: &str = "UnknownTransactionCommitResult";
/// The label of errors a server returns when it sheds load.
pub const SYSTEM_OVERLOADED_ERROR: &str = "SystemOverloadedError";
/// The label of overload errors that may be retried.
pub const RETRYABLE_ERROR: &str = "RetryableError";
/// The label of errors after which no write was performed.
pub const NO_WRITES_PERFORMED: &str = "NoWritesPerformed";
/// The label of server errors after which a change stream resumes.
pub const RESUMABLE_CHANGE_STREAM_ERROR: &str = "ResumableChangeStreamError";

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// A failure of the driver or of the server.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Error {
    /// What went wrong; match on `*error.kind`.
    pub kind: Box<ErrorKind>,
    labels: HashSet<String>,
    /// The error that stopped an operation which had already done part of
    /// its work: a client bulk write's command error or network error after
    /// some writes were reported (the [`ErrorKind::BulkWrite`] has those).
    pub source: Option<Box<Error>>,
}

/// What went wrong.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller passed something invalid: a bad URI, a conflicting option,
    /// a document that cannot be sent. The message names the problem.
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong.
        message: String,
    },

    /// A socket could not be opened, or failed while in use.
    #[error("network error{}: {message}", fmt_address(address))]
    Network {
        /// The server the socket led to, when known.
        address: Option<ServerAddress>,
        /// What failed.
        message: String,
        /// Whether the failure was a timeout (connect or socket timeout).
        timeout: bool,
        /// The underlying I/O error, when there was one.
        #[source]
        io: Option<Arc<std::io::Error>>,
    },

    /// The server answered a command with `ok: 0`.
    #[error("{0}")]
    Command(CommandError),

    /// The server's reply could not be understood: a malformed frame, invalid
    /// BSON, a reply that violates the protocol. The socket is not reusable.
    #[error("protocol error{}: {message}", fmt_address(address))]
    Protocol {
        /// The server that sent the reply, when known.
        address: Option<ServerAddress>,
        /// What was wrong with the reply.
        message: String,
    },

    /// No suitable server was found.
    #[error("server selection failed: {message}")]
    ServerSelection {
        /// Why, naming the servers and their errors as the spec asks.
        message: String,
    },

    /// The deployment's wire versions do not overlap the driver's.
    #[error("incompatible server: {message}")]
    IncompatibleServer {
        /// The SDAM spec's compatibility message.
        message: String,
    },

    /// Authentication failed.
    #[error("authentication failed: {message}")]
    Authentication {
        /// The reason, without secrets.
        message: String,
    },

    /// A TLS handshake failed: a certificate or host name check, or the
    /// server refused the client's certificate. Not a network error: the
    /// server is reachable, and trying again changes nothing.
    #[error("TLS error{}: {message}", fmt_address(address))]
    Tls {
        /// The server the socket led to.
        address: Option<ServerAddress>,
        /// Which check failed and why.
        message: String,
    },

    /// The operation's deadline (`timeoutMS`) passed.
    #[error("operation timed out: {message}")]
    Timeout {
        /// What was under way when the deadline passed.
        message: String,
    },

    /// A single-statement write succeeded as a command but its statement
    /// failed (`writeErrors`) or its write concern was not satisfied
    /// (`writeConcernError`).
    #[error("{0}")]
    Write(crate::proto::results::WriteFailure),

    /// A batched write (`bulk_write`) had failed statements or an
    /// unsatisfied write concern; carries what did succeed.
    #[error("{0}")]
    CollectionBulkWrite(crate::proto::results::BulkWriteFailure),

    /// A client-level bulk write (`Client::bulk_write`) had failed writes
    /// or unsatisfied write concerns, or stopped part way: carries what did
    /// succeed, and the stopping error as [`Error::source`].
    #[error("{0}")]
    BulkWrite(BulkWriteError),

    /// `insert_many` had failed statements or an unsatisfied write concern.
    #[error("{0}")]
    InsertMany(InsertManyError),

    /// The application's own error, carried through the driver (out of a
    /// transaction callback): see [`Error::custom`] and [`Error::get_custom`].
    #[error("custom user error{}", display_custom(.0))]
    Custom(Arc<dyn Any + Send + Sync>),

    /// The client was closed, or used in a way its state does not allow.
    #[error("client error: {message}")]
    Client {
        /// What was wrong.
        message: String,
    },

    /// A change event came without its `_id` (a pipeline stage removed
    /// it): the stream could not resume after it, so it ends here.
    #[error("Cannot provide resume functionality when the resume token is missing: a change stream event has no `_id` (does the pipeline remove or replace it?); the change stream is closed")]
    MissingResumeToken,

    /// A GridFS file is missing, or its stored chunks disagree with its
    /// files collection document, or an upload stream was misused.
    #[error("GridFS: {0}")]
    GridFs(GridFsErrorKind),
}

/// What went wrong with a GridFS file or stream (the GridFS spec's errors).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GridFsErrorKind {
    /// No files collection document has this id or filename.
    #[error("no file {identifier}")]
    FileNotFound {
        /// The id or filename asked for.
        identifier: GridFsFileIdentifier,
    },

    /// Files with the name exist, but not this revision.
    #[error("the file has no revision {revision}")]
    RevisionNotFound {
        /// The revision asked for.
        revision: i32,
    },

    /// The chunk the file's length calls for next is not stored.
    #[error("chunk {n} is missing")]
    MissingChunk {
        /// Its index.
        n: u32,
    },

    /// A chunk's data is not as long as the file's length and chunk size say.
    #[error("chunk {n} holds {actual_size} bytes where {expected_size} were expected")]
    WrongSizeChunk {
        /// What the chunk holds.
        actual_size: usize,
        /// What the file document implies.
        expected_size: u32,
        /// The chunk's index.
        n: u32,
    },

    /// More chunks are stored than the file's length calls for.
    #[error("{actual_number} chunks are stored where {expected_number} were expected")]
    WrongNumberOfChunks {
        /// At least this many are stored.
        actual_number: u32,
        /// What the file document implies.
        expected_number: u32,
    },

    /// The files collection document itself is unusable (a length or
    /// chunk size that is missing, negative or not a number).
    #[error("the files collection document is malformed: {message}")]
    MalformedFile {
        /// What is wrong with it.
        message: String,
    },

    /// The upload stream was already closed or aborted.
    #[error("the upload stream is already closed or aborted")]
    UploadStreamClosed,

    /// Deleting an aborted upload's chunks failed.
    #[error("aborting the upload failed: {delete_error}{}", original_error.as_ref().map(|e| format!(" (aborted because: {e})")).unwrap_or_default())]
    AbortError {
        /// The error that made the upload abort, if one did.
        original_error: Option<Box<Error>>,
        /// The error deleting the chunks already written.
        delete_error: Box<Error>,
    },
}

/// How a GridFS file was asked for.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum GridFsFileIdentifier {
    /// By its files collection `_id`.
    Id(bson::Bson),
    /// By its filename.
    Filename(String),
}

impl fmt::Display for GridFsFileIdentifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GridFsFileIdentifier::Id(id) => write!(f, "with id {id}"),
            GridFsFileIdentifier::Filename(name) => write!(f, "named {name:?}"),
        }
    }
}

fn display_custom(custom: &Arc<dyn Any + Send + Sync>) -> String {
    match custom.downcast_ref::<String>() {
        Some(text) => format!(": {text}"),
        None => String::new(),
    }
}

/// `insert_many`'s failure: the failed statements (with their indexes in
/// the caller's list) and the write concern error, as the official driver
/// reports them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InsertManyError {
    /// The failed statements, `None` when only the write concern failed.
    pub write_errors: Option<Vec<IndexedWriteError>>,
    /// The write concern error, when a batch reported one.
    pub write_concern_error: Option<WriteConcernError>,
    /// The ids of the documents that were inserted, by index (a
    /// `HashMap`, as in the official driver).
    #[serde(skip)]
    pub inserted_ids: HashMap<usize, bson::Bson>,
}

impl fmt::Display for InsertManyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "insert_many failed")?;
        if let Some(errors) = self.write_errors.as_ref().filter(|e| !e.is_empty()) {
            write!(
                f,
                ": {} write error(s), the first {}",
                errors.len(),
                errors[0]
            )?;
        }
        if let Some(wce) = &self.write_concern_error {
            write!(f, "; {wce}")?;
        }
        Ok(())
    }
}

impl From<crate::proto::results::BulkWriteFailure> for InsertManyError {
    fn from(failure: crate::proto::results::BulkWriteFailure) -> Self {
        InsertManyError {
            write_errors: Some(failure.write_errors).filter(|e| !e.is_empty()),
            write_concern_error: failure.write_concern_error,
            inserted_ids: failure.partial_result.inserted_ids.into_iter().collect(),
        }
    }
}

fn fmt_address(address: &Option<ServerAddress>) -> String {
    match address {
        Some(a) => format!(" ({a})"),
        None => String::new(),
    }
}

/// A command the server answered with `ok: 0`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct CommandError {
    /// The server's error code.
    pub code: i32,
    /// The server's name for the code (`codeName`), empty when absent.
    #[serde(rename = "codeName", default)]
    pub code_name: String,
    /// The server's message (`errmsg`).
    #[serde(rename = "errmsg", default)]
    pub message: String,
    /// The `topologyVersion` field of the reply, used by SDAM to ignore
    /// stale state-change errors.
    #[serde(rename = "topologyVersion", default)]
    pub topology_version: Option<Document>,
    /// The server that answered.
    #[serde(skip)]
    pub address: Option<ServerAddress>,
    /// The server's whole reply (`errInfo`, `keyPattern`, ... beside the
    /// fields above); `None` for an error the driver made itself.
    #[serde(skip)]
    pub raw_response: Option<Document>,
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "command failed with code {}", self.code)?;
        if !self.code_name.is_empty() {
            write!(f, " ({})", self.code_name)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(a) = &self.address {
            write!(f, " (on {a})")?;
        }
        Ok(())
    }
}

impl Error {
    /// An error of the given kind without labels.
    #[cold]
    pub fn new(kind: ErrorKind) -> Self {
        Error {
            kind: Box::new(kind),
            labels: HashSet::new(),
            source: None,
        }
    }

    /// The application's own error `e`, carried through the driver (return
    /// it from a transaction callback; read it back with
    /// [`get_custom`](Error::get_custom)).
    pub fn custom(e: impl Any + Send + Sync) -> Self {
        Error::new(ErrorKind::Custom(Arc::new(e)))
    }

    /// The value given to [`Error::custom`], if this error is one and the
    /// value is an `E`.
    pub fn get_custom<E: Any>(&self) -> Option<&E> {
        match &*self.kind {
            ErrorKind::Custom(custom) => custom.downcast_ref::<E>(),
            _ => None,
        }
    }

    /// An [`ErrorKind::InvalidArgument`] with this message.
    #[cold]
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument {
            message: message.into(),
        })
    }

    /// An [`ErrorKind::Protocol`] with this message.
    #[cold]
    pub fn protocol(address: Option<ServerAddress>, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Protocol {
            address,
            message: message.into(),
        })
    }

    /// An [`ErrorKind::Network`] from an I/O error; timeouts are recognised.
    #[cold]
    pub fn network(address: Option<ServerAddress>, context: &str, io: std::io::Error) -> Self {
        let timeout = matches!(
            io.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        );
        let message = if timeout {
            format!("{context}: timed out")
        } else {
            format!("{context}: {io}")
        };
        Error::new(ErrorKind::Network {
            address,
            message,
            timeout,
            io: Some(Arc::new(io)),
        })
    }

    /// An [`ErrorKind::Network`] without an I/O error behind it.
    #[cold]
    pub fn network_message(address: Option<ServerAddress>, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Network {
            address,
            message: message.into(),
            timeout: false,
            io: None,
        })
    }

    /// An [`ErrorKind::ServerSelection`] with this message.
    #[cold]
    pub fn server_selection(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::ServerSelection {
            message: message.into(),
        })
    }

    /// An [`ErrorKind::Client`] with this message.
    #[cold]
    pub fn client(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Client {
            message: message.into(),
        })
    }

    /// An [`ErrorKind::GridFs`] of this kind.
    #[cold]
    pub fn gridfs(kind: GridFsErrorKind) -> Self {
        Error::new(ErrorKind::GridFs(kind))
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The error labels (`RetryableWriteError`, `TransientTransactionError`,
    /// `SystemOverloadedError`, ...).
    pub fn labels(&self) -> &HashSet<String> {
        &self.labels
    }

    /// The labels in order, for messages that must not vary between runs.
    pub(crate) fn sorted_labels(&self) -> Vec<&str> {
        let mut labels: Vec<&str> = self.labels.iter().map(String::as_str).collect();
        labels.sort_unstable();
        labels
    }

    /// Whether the error carries `label`.
    pub fn contains_label<T: AsRef<str>>(&self, label: T) -> bool {
        self.labels.contains(label.as_ref())
    }

    /// Adds a label (drivers add some, e.g. `RetryableWriteError` on network errors).
    pub fn add_label(&mut self, label: impl Into<String>) {
        self.labels.insert(label.into());
    }

    /// This error with the labels added.
    pub fn with_labels<I, S>(mut self, labels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.labels.extend(labels.into_iter().map(Into::into));
        self
    }

    /// The server's error code: of a command error, of a failed write
    /// statement (a duplicate key gives `Some(11000)`), or of an unsatisfied
    /// write concern. For a batched write (`insert_many`, `bulk_write`) it is
    /// the first failed statement's code, else the write concern error's.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("error_code");
    /// coll.insert_one(doc! { "_id": "only-once" }).run().ok();
    /// let error = coll.insert_one(doc! { "_id": "only-once" }).run().unwrap_err();
    /// assert_eq!(error.code(), Some(11000));
    /// # Ok(())
    /// # }
    /// ```
    pub fn code(&self) -> Option<i32> {
        use crate::proto::results::{BulkWriteFailure, WriteFailure};
        match &*self.kind {
            ErrorKind::Write(WriteFailure::WriteError(we)) => Some(we.code),
            ErrorKind::CollectionBulkWrite(BulkWriteFailure {
                write_errors,
                write_concern_error,
                ..
            }) => write_errors
                .first()
                .map(|we| we.code)
                .or(write_concern_error.as_ref().map(|wce| wce.code)),
            ErrorKind::BulkWrite(e) => e
                .write_errors
                .iter()
                .min_by_key(|(index, _)| **index)
                .map(|(_, we)| we.code)
                .or(e.write_concern_errors.first().map(|wce| wce.code))
                .or_else(|| self.source.as_ref().and_then(|s| s.code())),
            ErrorKind::InsertMany(InsertManyError {
                write_errors,
                write_concern_error,
                ..
            }) => write_errors
                .iter()
                .flatten()
                .next()
                .map(|we| we.code)
                .or(write_concern_error.as_ref().map(|wce| wce.code)),
            _ => self.server_code(),
        }
    }

    /// The code the SDAM and retry rules look at: a command error's or a
    /// write concern error's, never a failed write statement's (the specs
    /// judge `writeErrors` by labels only).
    pub(crate) fn server_code(&self) -> Option<i32> {
        use crate::proto::results::{BulkWriteFailure, WriteFailure};
        match &*self.kind {
            ErrorKind::Command(c) => Some(c.code),
            ErrorKind::Write(WriteFailure::WriteConcernError(wce)) => Some(wce.code),
            ErrorKind::CollectionBulkWrite(BulkWriteFailure {
                write_concern_error: Some(wce),
                ..
            })
            | ErrorKind::InsertMany(InsertManyError {
                write_concern_error: Some(wce),
                ..
            }) => Some(wce.code),
            ErrorKind::BulkWrite(e) => e.write_concern_errors.last().map(|wce| wce.code),
            _ => None,
        }
    }

    /// Whether the socket failed (including timeouts).
    pub fn is_network_error(&self) -> bool {
        matches!(&*self.kind, ErrorKind::Network { .. })
    }

    /// Whether the socket failed by timing out.
    pub fn is_network_timeout(&self) -> bool {
        matches!(&*self.kind, ErrorKind::Network { timeout: true, .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.kind, f)?;
        if !self.labels.is_empty() {
            let labels = self.sorted_labels();
            write!(f, " (labels: {})", labels.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        if let Some(source) = &self.source {
            return Some(&**source);
        }
        std::error::Error::source(&*self.kind)
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error::new(kind)
    }
}

/// What cannot fail converts into any error: lets
/// `ClientOptions::parse` take a `ConnectionString` (whose conversion to
/// itself is infallible) as well as text.
impl From<std::convert::Infallible> for Error {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl From<CommandError> for Error {
    fn from(c: CommandError) -> Self {
        Error::new(ErrorKind::Command(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_code() {
        let e = Error::from(CommandError {
            raw_response: None,
            code: 91,
            code_name: "ShutdownInProgress".into(),
            message: "shutting down".into(),
            topology_version: None,
            address: None,
        })
        .with_labels(["RetryableWriteError"]);
        assert_eq!(e.code(), Some(91));
        assert!(e.contains_label("RetryableWriteError"));
        assert!(!e.is_network_error());
        assert!(e.to_string().contains("ShutdownInProgress"));
        assert!(e.to_string().contains("RetryableWriteError"));
    }

    #[test]
    fn network_timeout_is_recognised() {
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "t");
        let e = Error::network(None, "reading reply", io);
        assert!(e.is_network_error() && e.is_network_timeout());
    }
}
