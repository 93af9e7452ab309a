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
    /// The server's whole reply to a command it failed (`ok: 0`).
    server_response: Option<Box<bson::RawDocumentBuf>>,
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

    /// A socket could not be opened, or failed while in use (the official
    /// driver's name). The `std::io::Error` keeps the failure's kind
    /// (`TimedOut` for a connect or socket timeout) and its message names
    /// the server and what was under way; [`Error::is_network_error`] and
    /// [`Error::is_network_timeout`] classify it.
    #[error("I/O error: {0}")]
    Io(Arc<std::io::Error>),

    /// A DNS look-up failed: the SRV or TXT records of a `mongodb+srv` URI
    /// could not be read, or do not meet the rules for them (a host outside
    /// the URI's domain, more than one TXT record, an option TXT may not
    /// set). The message names the record and why.
    #[error("DNS resolution failed: {message}")]
    #[non_exhaustive]
    DnsResolve {
        /// What was looked up and why it failed.
        message: String,
    },

    /// A TLS option or file is unusable: a certificate, key or CA file
    /// that cannot be read or holds no usable PEM, a wrong key password.
    /// Nothing was sent to any server.
    #[error("invalid TLS configuration: {message}")]
    #[non_exhaustive]
    InvalidTlsConfig {
        /// Which option or file, and what is wrong with it.
        message: String,
    },

    /// A connection pool was cleared under a running operation. Never
    /// raised here: each server has at most one socket, used by one
    /// operation at a time on the caller's thread, so no other operation's
    /// failure can close a socket under this one; a socket that fails
    /// fails the operation using it with [`ErrorKind::Io`]. Kept so that
    /// code matching the official driver's kinds compiles.
    #[error("{message}")]
    #[non_exhaustive]
    ConnectionPoolCleared {
        /// What cleared the pool.
        message: String,
    },

    /// The server answered a command with `ok: 0`.
    #[error("{0}")]
    Command(CommandError),

    /// The server's reply could not be understood: a malformed frame, invalid
    /// BSON, a reply that violates the protocol. The socket is not reusable.
    /// The message names the server when it is known.
    #[error("the server returned an invalid reply: {message}")]
    #[non_exhaustive]
    InvalidResponse {
        /// What was wrong with the reply, and from which server.
        message: String,
    },

    /// A document could not be serialized into BSON: a user's type whose
    /// `Serialize` failed or gave something other than a document.
    #[error("{0}")]
    BsonSerialization(bson::ser::Error),

    /// A document could not be deserialized into the user's type: its
    /// `Deserialize` rejected what the server sent.
    #[error("{0}")]
    BsonDeserialization(bson::de::Error),

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

    /// The client or a session was used in a way its state does not allow
    /// (an ended session, a callback re-entering the client, ...).
    #[error("client error: {message}")]
    Client {
        /// What was wrong.
        message: String,
    },

    /// A transaction was used against its state: started twice, committed
    /// after an abort, aborted twice, an operation inside it with a read
    /// preference other than primary.
    #[error("{message}")]
    #[non_exhaustive]
    Transaction {
        /// What was wrong, in the transactions spec's words.
        message: String,
    },

    /// A session was asked of a deployment that does not support sessions
    /// (its `hello` gave no `logicalSessionTimeoutMinutes`).
    #[error("Attempted to start a session on a deployment that does not support sessions")]
    SessionsNotSupported,

    /// An operation was started on a client (or a clone of it, or one of
    /// its databases, collections or sessions) after
    /// [`Client::shutdown`](crate::Client::shutdown) ran.
    #[error("Client has been shut down")]
    Shutdown,

    /// The driver broke one of its own rules (a bug): the message says
    /// which. Nothing the caller did or the server sent causes it.
    #[error("internal error: {message}")]
    #[non_exhaustive]
    Internal {
        /// Which rule.
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
    #[non_exhaustive]
    AbortError {
        /// The error that made the upload abort, if one did.
        original_error: Option<Error>,
        /// The error deleting the chunks already written.
        delete_error: Error,
    },

    /// The official driver's error for closing an upload stream while one
    /// of its writes is still running. Never raised here: the stream's
    /// writes are blocking calls that take it by `&mut`, so no write can
    /// be running while `close` is called.
    #[error("the upload stream has a write in progress")]
    WriteInProgress,
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
    /// The base the server asks overload retries to back off from
    /// (`baseBackoffMS`, sent with overload errors), in place of the
    /// driver's 100 ms.
    #[serde(
        rename = "baseBackoffMS",
        default,
        deserialize_with = "base_backoff_from_millis"
    )]
    pub base_backoff: Option<std::time::Duration>,
    /// The server's whole reply (`errInfo`, `keyPattern`, ... beside the
    /// fields above); `None` for an error the driver made itself.
    #[serde(skip)]
    pub raw_response: Option<Document>,
}

/// `baseBackoffMS` as the official crate reads it: a number of milliseconds.
fn base_backoff_from_millis<'de, D>(
    deserializer: D,
) -> std::result::Result<Option<std::time::Duration>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let millis: Option<u64> = serde::Deserialize::deserialize(deserializer)?;
    Ok(millis.map(std::time::Duration::from_millis))
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
            server_response: None,
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

    /// An [`ErrorKind::InvalidResponse`] with this message, naming the
    /// server that sent the reply when it is known.
    #[cold]
    pub fn protocol(address: Option<ServerAddress>, message: impl Into<String>) -> Self {
        let message = message.into();
        Error::new(ErrorKind::InvalidResponse {
            message: match address {
                Some(address) => format!("{message} (from {address})"),
                None => message,
            },
        })
    }

    /// This error, naming `address` as the sender if it is an
    /// [`ErrorKind::InvalidResponse`] that does not name it yet (replies are
    /// read by rules that do not know the server).
    pub(crate) fn naming_sender(mut self, address: &ServerAddress) -> Self {
        if let ErrorKind::InvalidResponse { message } = &mut *self.kind {
            let from = format!(" (from {address})");
            if !message.ends_with(&from) {
                message.push_str(&from);
            }
        }
        self
    }

    /// An [`ErrorKind::Io`] from an I/O error on the socket to `address`
    /// while doing `context`; its message names both. A `WouldBlock` (how
    /// a socket timeout shows on some platforms) becomes `TimedOut`.
    #[cold]
    pub fn network(address: Option<ServerAddress>, context: &str, io: std::io::Error) -> Self {
        let kind = match io.kind() {
            std::io::ErrorKind::WouldBlock => std::io::ErrorKind::TimedOut,
            kind => kind,
        };
        let message = if kind == std::io::ErrorKind::TimedOut {
            format!("{context}: timed out")
        } else {
            format!("{context}: {io}")
        };
        Error::socket(
            kind,
            SocketFailure {
                address,
                message,
                cause: Some(io),
            },
        )
    }

    /// An [`ErrorKind::Io`] without an I/O error behind it (a peer that
    /// closed the socket, a reply cut short).
    #[cold]
    pub fn network_message(address: Option<ServerAddress>, message: impl Into<String>) -> Self {
        Error::socket(
            std::io::ErrorKind::Other,
            SocketFailure {
                address,
                message: message.into(),
                cause: None,
            },
        )
    }

    fn socket(kind: std::io::ErrorKind, failure: SocketFailure) -> Self {
        Error::new(ErrorKind::Io(Arc::new(std::io::Error::new(kind, failure))))
    }

    /// An [`ErrorKind::Io`] of `kind` on the socket to `address`, in the
    /// words of `message` (which already says what the cause was).
    #[cold]
    pub(crate) fn io_failure(
        kind: std::io::ErrorKind,
        address: Option<ServerAddress>,
        message: String,
    ) -> Self {
        Error::socket(
            kind,
            SocketFailure {
                address,
                message,
                cause: None,
            },
        )
    }

    /// The server and the words of a socket failure this driver reported
    /// (`None` for any other error, or an `Io` error made elsewhere).
    pub(crate) fn socket_failure(&self) -> Option<(&SocketFailure, std::io::ErrorKind)> {
        let ErrorKind::Io(io) = &*self.kind else {
            return None;
        };
        let failure = io.get_ref()?.downcast_ref::<SocketFailure>()?;
        Some((failure, io.kind()))
    }

    /// The words of a socket failure, without the server: what SDAM
    /// records as the server's error. `None` for other errors.
    pub(crate) fn io_message(&self) -> Option<String> {
        let ErrorKind::Io(io) = &*self.kind else {
            return None;
        };
        Some(match self.socket_failure() {
            Some((failure, _)) => failure.message.clone(),
            None => io.to_string(),
        })
    }

    /// An [`ErrorKind::BsonDeserialization`]: a document did not fit the
    /// caller's type. serde's message gains `context` (which document);
    /// bson's other errors pass as they are.
    #[cold]
    pub(crate) fn deserialization(context: &str, error: bson::de::Error) -> Self {
        let error = match error {
            bson::de::Error::DeserializationError { message, .. } => {
                serde::de::Error::custom(format!("{context}: {message}"))
            }
            other => other,
        };
        Error::new(ErrorKind::BsonDeserialization(error))
    }

    /// An [`ErrorKind::BsonSerialization`]: a caller's value did not
    /// serialize into a document. serde's message gains `context` (which
    /// value); bson's other errors pass as they are.
    #[cold]
    pub(crate) fn serialization(context: &str, error: bson::ser::Error) -> Self {
        let error = match error {
            bson::ser::Error::SerializationError { message, .. } => {
                serde::ser::Error::custom(format!("{context}: {message}"))
            }
            other => other,
        };
        Error::new(ErrorKind::BsonSerialization(error))
    }

    /// An [`ErrorKind::DnsResolve`]: a DNS look-up failed or its answer
    /// breaks the rules for it.
    #[cold]
    pub(crate) fn dns_resolve(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::DnsResolve {
            message: message.into(),
        })
    }

    /// An [`ErrorKind::Internal`]: a rule of the driver's own was broken.
    #[cold]
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal {
            message: message.into(),
        })
    }

    /// An [`ErrorKind::Transaction`]: the transaction's state forbids it.
    #[cold]
    pub(crate) fn transaction(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Transaction {
            message: message.into(),
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

    /// Whether the socket failed (including timeouts): an
    /// [`ErrorKind::Io`].
    pub fn is_network_error(&self) -> bool {
        matches!(&*self.kind, ErrorKind::Io(_))
    }

    /// Whether the socket failed by timing out (an [`ErrorKind::Io`] of
    /// kind `TimedOut`).
    pub fn is_network_timeout(&self) -> bool {
        matches!(&*self.kind, ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::TimedOut)
    }

    /// The server's whole reply to the command it failed (`ok: 0`), to
    /// read fields the error has none for; `None` for errors that did not
    /// come from a server's reply.
    pub fn server_response(&self) -> Option<&bson::RawDocumentBuf> {
        self.server_response.as_deref()
    }

    /// This error with the server's reply attached.
    pub(crate) fn with_server_response(mut self, reply: bson::RawDocumentBuf) -> Self {
        self.server_response = Some(Box::new(reply));
        self
    }

    /// The server's `baseBackoffMS` of a command error: the base of the
    /// exponential backoff before an overload retry, in place of the
    /// driver's 100 ms (the published retry policy follows it when
    /// positive). `None` for other errors.
    pub fn base_backoff(&self) -> Option<std::time::Duration> {
        match &*self.kind {
            ErrorKind::Command(command) => command.base_backoff,
            _ => None,
        }
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

impl<E> From<E> for Error
where
    ErrorKind: From<E>,
{
    fn from(error: E) -> Self {
        Error::new(error.into())
    }
}

impl From<CommandError> for ErrorKind {
    fn from(c: CommandError) -> Self {
        ErrorKind::Command(c)
    }
}

impl From<bson::ser::Error> for ErrorKind {
    fn from(error: bson::ser::Error) -> Self {
        ErrorKind::BsonSerialization(error)
    }
}

impl From<bson::de::Error> for ErrorKind {
    fn from(error: bson::de::Error) -> Self {
        ErrorKind::BsonDeserialization(error)
    }
}

/// Raw BSON that cannot be read came from the server: an invalid reply.
impl From<bson::raw::Error> for ErrorKind {
    fn from(error: bson::raw::Error) -> Self {
        ErrorKind::InvalidResponse {
            message: error.to_string(),
        }
    }
}

/// A field of a reply that is missing or of the wrong type: an invalid reply.
impl From<bson::raw::ValueAccessError> for ErrorKind {
    fn from(error: bson::raw::ValueAccessError) -> Self {
        ErrorKind::InvalidResponse {
            message: error.to_string(),
        }
    }
}

impl From<std::io::Error> for ErrorKind {
    fn from(error: std::io::Error) -> Self {
        ErrorKind::Io(Arc::new(error))
    }
}

impl From<std::io::ErrorKind> for ErrorKind {
    fn from(kind: std::io::ErrorKind) -> Self {
        ErrorKind::Io(Arc::new(kind.into()))
    }
}

/// What cannot fail converts into any error (and so, through the blanket
/// `From` above, into [`Error`]): lets `ClientOptions::parse` take a
/// `ConnectionString` (whose conversion to itself is infallible) as well
/// as text.
impl From<std::convert::Infallible> for ErrorKind {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

/// A socket failure as this driver reports it: the server, what was under
/// way, and the I/O error (if any) underneath. Carried inside the
/// `std::io::Error` of an [`ErrorKind::Io`].
#[derive(Debug)]
pub(crate) struct SocketFailure {
    pub(crate) address: Option<ServerAddress>,
    pub(crate) message: String,
    cause: Option<std::io::Error>,
}

impl fmt::Display for SocketFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.address {
            Some(address) => write!(f, "{address}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for SocketFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_ref().map(|e| e as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_code() {
        let e = Error::from(CommandError {
            base_backoff: None,
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
