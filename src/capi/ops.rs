//! Every call the C ABI makes into the driver's Rust API, in one place, so a
//! change of that API is a change of this file only. Everything here is safe
//! Rust over plain values: the pointer handling lives in the parent module.

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use bson::{Bson, Document, RawDocumentBuf};

use crate::api::cursor::SessionCursor;
use crate::error::{Error, ErrorKind};
use crate::proto::coll_options::{
    AggregateOptions, CountOptions, DeleteOptions, FindOptions, InsertManyOptions,
    InsertOneOptions, UpdateOptions,
};
use crate::proto::event::EventSink;
use crate::proto::options_doc::{mistyped, unknown, OperationTimeout, OptionValue};
use crate::proto::session::transaction::TransactionOptions;
use crate::{Client, ClientSession, Collection, Cursor};

use super::error::{Domain, Failure};

/// A C caller's options document, element by element in its order; a key
/// given twice is applied twice, so the last one wins, as in a `Document`.
pub(crate) type OptionList = Vec<(String, Bson)>;

/// An options struct from a C caller's options document (NULL: none set),
/// by the official option names.
macro_rules! options {
    ($type:ty, $list:expr) => {
        <$type>::from_named($list.unwrap_or_default())
            .map_err(|e| $crate::capi::ops::failure(&e))?
    };
}
pub(crate) use options;

/// `$action` configured from a C caller's options document: `timeoutMS`
/// through the builder's `.timeout`, the rest through `with_options` as
/// `$type` by the official names. With `cursor:` (an operation that opens
/// a cursor) `timeoutMode` goes to `.timeout_mode`; otherwise it is an
/// unknown option. An action without `.timeout` does not compile here, so
/// an operation whose Rust builder takes `timeoutMS` and this macro cannot
/// drop it.
macro_rules! configure {
    ($action:expr, $type:ty, $list:expr) => {{
        let (list, timing) = $crate::capi::ops::split_timeout($list, false)?;
        let action = $action.with_options($crate::capi::ops::options!($type, list));
        match timing.timeout {
            Some(timeout) => action.timeout(timeout),
            None => action,
        }
    }};
    (cursor: $action:expr, $type:ty, $list:expr) => {{
        let (list, timing) = $crate::capi::ops::split_timeout($list, true)?;
        let mut action = $action.with_options($crate::capi::ops::options!($type, list));
        if let Some(timeout) = timing.timeout {
            action = action.timeout(timeout);
        }
        if let Some(mode) = timing.mode {
            action = action.timeout_mode(mode);
        }
        action
    }};
}
pub(crate) use configure;

/// The options document without its `timeoutMS` (and `timeoutMode`, when
/// `with_mode`), and those two.
pub(crate) fn split_timeout(
    options: Option<OptionList>,
    with_mode: bool,
) -> Result<(Option<OptionList>, OperationTimeout), Failure> {
    let Some(mut list) = options else {
        return Ok((None, OperationTimeout::default()));
    };
    let timing = OperationTimeout::take(&mut list, with_mode).map_err(|e| failure(&e))?;
    Ok((Some(list), timing))
}

/// For an operation without options: the options document, if any, must
/// be empty (the C functions all take one, for a uniform shape).
pub(crate) fn no_options(operation: &str, options: Option<OptionList>) -> Result<(), Failure> {
    match options.unwrap_or_default().first() {
        Some((key, _)) => Err(failure(&unknown(operation, key))),
        None => Ok(()),
    }
}

/// Runs an action in `session` when there is one, else in an implicit one.
macro_rules! run_in {
    ($action:expr, $session:expr) => {
        match $session {
            Some(s) => $action.session(s).run(),
            None => $action.run(),
        }
        .map_err(|e| $crate::capi::ops::failure(&e))
    };
}
pub(crate) use run_in;

/// A client for the deployment `uri` names; parses and validates, no I/O.
pub(crate) fn new_client(uri: &str) -> Result<Client, Failure> {
    let code = crate::ClientOptions {
        state_file: env_state_file(),
        ..Default::default()
    };
    let options = crate::ClientOptions::parse_with(uri, code).map_err(|e| failure(&e))?;
    Client::with_options(options).map_err(|e| failure(&e))
}

/// `MONGO_INLINE_STATE_FILE`, when set and not empty, names the client's
/// state file: the bindings' way to opt in without an options API.
fn env_state_file() -> Option<std::path::PathBuf> {
    std::env::var_os("MONGO_INLINE_STATE_FILE")
        .filter(|v| !v.is_empty())
        .map(Into::into)
}

/// A C OIDC callback and its user data.
pub(crate) struct OidcCallback {
    pub callback: unsafe extern "C" fn(*mut c_void, i64, *const c_char, *mut c_char, usize) -> i64,
    pub user_data: *mut c_void,
}

// SAFETY: `mi_client_new_with_oidc_callback`'s contract: the callback and
// its user data are usable from the threads that use the client.
unsafe impl Send for OidcCallback {}
// SAFETY: as above; the driver calls it from one thread at a time.
unsafe impl Sync for OidcCallback {}

/// The longest token a C callback may write.
const OIDC_TOKEN_CAPACITY: usize = 64 * 1024;

impl OidcCallback {
    fn call(&self, context: &crate::options::oidc::CallbackContext) -> crate::Result<String> {
        use crate::shell::clock::Clock as _;
        let timeout_ms = context.timeout.map_or(-1, |deadline| {
            let left = deadline.saturating_duration_since(crate::shell::clock::SystemClock.now());
            i64::try_from(left.as_millis()).unwrap_or(i64::MAX)
        });
        let username = context
            .username
            .as_deref()
            .and_then(|u| std::ffi::CString::new(u).ok());
        let username_ptr = username.as_ref().map_or(std::ptr::null(), |u| u.as_ptr());
        let mut token = vec![0u8; OIDC_TOKEN_CAPACITY];
        // SAFETY: the caller's contract covers the callback and user data;
        // the buffer is writable for its length and outlives the call.
        let written = unsafe {
            (self.callback)(
                self.user_data,
                timeout_ms,
                username_ptr,
                token.as_mut_ptr().cast(),
                token.len(),
            )
        };
        let length = usize::try_from(written)
            .ok()
            .filter(|&n| n <= token.len())
            .ok_or_else(|| crate::Error::client("the OIDC callback returned no token"))?;
        token.truncate(length);
        String::from_utf8(token)
            .map_err(|_| crate::Error::client("the OIDC callback's token is not UTF-8"))
    }
}

/// A client for `uri` whose MONGODB-OIDC credential calls `callback`.
pub(crate) fn new_client_with_oidc(uri: &str, callback: OidcCallback) -> Result<Client, Failure> {
    let parsed = crate::ClientOptions::parse(uri)
        .run()
        .map_err(|e| failure(&e))?;
    let mut credential = parsed.credential().cloned().unwrap_or_default();
    let callback = std::sync::Arc::new(callback);
    credential.oidc_callback = crate::options::oidc::Callback::machine(move |context| {
        callback
            .call(&context)
            .map(crate::options::oidc::IdpServerResponse::new)
    });
    let code = crate::ClientOptions::builder()
        .credential(credential)
        .state_file(env_state_file())
        .build();
    let options = crate::ClientOptions::parse_with(uri, code).map_err(|e| failure(&e))?;
    Client::with_options(options).map_err(|e| failure(&e))
}

/// The same deployment and options as `client`, reporting events to
/// `handler`. Only for a client that has not done anything yet.
pub(crate) fn with_event_handler(
    client: &Client,
    handler: Arc<dyn EventSink>,
) -> Result<Client, Failure> {
    let options = client.checked_options().map_err(|e| failure(&e))?;
    Client::builder(options)
        .event_sink(handler)
        .build()
        .map_err(|e| failure(&e))
}

/// Ends the client's server sessions and closes its sockets.
pub(crate) fn close(client: &Client) {
    client.close();
}

/// The retry tokens left, or `None` without a bucket.
pub(crate) fn retry_tokens(client: &Client) -> Result<Option<f64>, Failure> {
    let tokens = client.checked_retry_tokens().map_err(|e| failure(&e))?;
    Ok(tokens.map(|tokens| tokens.as_f64()))
}

/// `command` on database `db`, on the primary.
pub(crate) fn run_command(
    client: &Client,
    session: Option<&mut ClientSession>,
    db: &str,
    command: Document,
) -> Result<Document, Failure> {
    let db = client.database(db);
    let action = db.run_command(command);
    match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))
}

/// An explicit session; options `{causalConsistency, snapshot,
/// snapshotTime, defaultTimeoutMS, defaultTransactionOptions}`
/// (`defaultTimeoutMS` bounds its commits and aborts).
pub(crate) fn start_session(
    client: &Client,
    options: Option<OptionList>,
) -> Result<ClientSession, Failure> {
    let mut opts = crate::options::SessionOptions::default();
    for (key, value) in options.unwrap_or_default() {
        match key.as_str() {
            "causalConsistency" => opts.causal_consistency = Some(value_of(&key, value)?),
            "snapshot" => opts.snapshot = Some(value_of(&key, value)?),
            "defaultTimeoutMS" => opts.default_timeout = Some(value_of(&key, value)?),
            "snapshotTime" => match value {
                Bson::Timestamp(t) => opts.snapshot_time = Some(t),
                other => return Err(failure(&mistyped(&key, "a timestamp", &other))),
            },
            "defaultTransactionOptions" => {
                let document: Document = value_of(&key, value)?;
                opts.default_transaction_options =
                    Some(transaction_options(document.into_iter().collect())?);
            }
            _ => return Err(failure(&unknown("session", &key))),
        }
    }
    client
        .start_session()
        .with_options(opts)
        .run()
        .map_err(|e| failure(&e))
}

/// A value of an options document, converted by the official rules.
pub(crate) fn value_of<T: OptionValue>(key: &str, value: Bson) -> Result<T, Failure> {
    T::from_option(key, value).map_err(|e| failure(&e))
}

/// The session's `lsid`.
pub(crate) fn session_id(session: &ClientSession) -> Option<Document> {
    Some(session.id().clone())
}

/// Transaction options `{readConcern, writeConcern, readPreference,
/// maxCommitTimeMS}`.
pub(crate) fn transaction_options(options: OptionList) -> Result<TransactionOptions, Failure> {
    let mut opts = TransactionOptions::default();
    for (key, value) in options {
        match key.as_str() {
            "readConcern" => opts.read_concern = Some(value_of(&key, value)?),
            "writeConcern" => opts.write_concern = Some(value_of(&key, value)?),
            "readPreference" => opts.selection_criteria = Some(value_of(&key, value)?),
            "maxCommitTimeMS" => opts.max_commit_time = Some(value_of(&key, value)?),
            _ => return Err(failure(&unknown("transaction", &key))),
        }
    }
    Ok(opts)
}

/// Starts a transaction; its options override the session's defaults. A
/// `timeoutMS` goes to the Rust API, which refuses it here (only
/// `mi_session_with_transaction` has a call to time).
pub(crate) fn start_transaction(
    session: &mut ClientSession,
    options: Option<OptionList>,
) -> Result<(), Failure> {
    let (options, timing) = split_timeout(options, false)?;
    let opts = transaction_options(options.unwrap_or_default())?;
    let action = session.start_transaction().with_options(opts);
    match timing.timeout {
        Some(timeout) => action.timeout(timeout),
        None => action,
    }
    .run()
    .map_err(|e| failure(&e))
}

/// The `timeoutMS` of an options document that may hold nothing else.
fn timeout_only(operation: &str, options: Option<OptionList>) -> Result<Option<Duration>, Failure> {
    let (options, timing) = split_timeout(options, false)?;
    no_options(operation, options)?;
    Ok(timing.timeout)
}

/// Commits the session's transaction; options `{timeoutMS}`.
pub(crate) fn commit_transaction(
    session: &mut ClientSession,
    options: Option<OptionList>,
) -> Result<(), Failure> {
    let action = session.commit_transaction();
    match timeout_only("commit_transaction", options)? {
        Some(timeout) => action.timeout(timeout),
        None => action,
    }
    .run()
    .map_err(|e| failure(&e))
}

/// Aborts the session's transaction; options `{timeoutMS}`.
pub(crate) fn abort_transaction(
    session: &mut ClientSession,
    options: Option<OptionList>,
) -> Result<(), Failure> {
    let action = session.abort_transaction();
    match timeout_only("abort_transaction", options)? {
        Some(timeout) => action.timeout(timeout),
        None => action,
    }
    .run()
    .map_err(|e| failure(&e))
}

fn collection<T>(client: &Client, db: &str, coll: &str) -> Collection<T> {
    client.database(db).collection::<T>(coll)
}

/// The result document of a `w: 0` write: the server reported nothing, so
/// it holds no ids and no counts.
fn unacknowledged() -> Document {
    bson::doc! { "acknowledged": false }
}

/// Inserts `document`; the result is `{insertedId}` (`{acknowledged:
/// false}` with `w: 0`).
pub(crate) fn insert_one(
    client: &Client,
    session: Option<&mut ClientSession>,
    db: &str,
    coll: &str,
    document: Document,
    options: Option<OptionList>,
) -> Result<Document, Failure> {
    let coll = collection::<Document>(client, db, coll);
    let action = configure!(coll.insert_one(document), InsertOneOptions, options);
    let result = match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))?;
    if !result.acknowledged {
        return Ok(unacknowledged());
    }
    Ok(bson::doc! { "insertedId": result.inserted_id })
}

/// Inserts `documents`; the result is `{insertedIds: {index: id}}`
/// (`{acknowledged: false}` with `w: 0`).
pub(crate) fn insert_many(
    client: &Client,
    session: Option<&mut ClientSession>,
    db: &str,
    coll: &str,
    documents: Vec<Document>,
    options: Option<OptionList>,
) -> Result<Document, Failure> {
    let coll = collection::<Document>(client, db, coll);
    let action = configure!(coll.insert_many(documents), InsertManyOptions, options);
    let result = match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))?;
    if !result.acknowledged {
        return Ok(unacknowledged());
    }
    // In the caller's order: the map has none.
    let ids = result
        .inserted_ids
        .into_iter()
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_iter()
        .map(|(index, id)| (index.to_string(), id))
        .collect::<Document>();
    Ok(bson::doc! { "insertedIds": ids })
}

/// Which documents an update or delete touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Many {
    /// The first match only.
    One,
    /// Every match.
    All,
}

/// Updates the documents matching `filter`; the result is
/// `{matchedCount, modifiedCount, upsertedId?}` (`{acknowledged: false}`
/// with `w: 0`).
pub(crate) fn update(
    client: &Client,
    session: Option<&mut ClientSession>,
    target: (&str, &str),
    many: Many,
    filter: Document,
    update: Document,
    options: Option<OptionList>,
) -> Result<Document, Failure> {
    let coll = collection::<Document>(client, target.0, target.1);
    let action = match many {
        Many::One => coll.update_one(filter, update),
        Many::All => coll.update_many(filter, update),
    };
    let action = configure!(action, UpdateOptions, options);
    let result = match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))?;
    Ok(update_result(result))
}

/// An update's or replacement's result document: `{matchedCount,
/// modifiedCount, upsertedId?}` (`{acknowledged: false}` with `w: 0`).
pub(crate) fn update_result(result: crate::results::UpdateResult) -> Document {
    if !result.acknowledged {
        return unacknowledged();
    }
    let mut reply = bson::doc! {
        "matchedCount": count_bson(result.matched_count),
        "modifiedCount": count_bson(result.modified_count),
    };
    if let Some(id) = result.upserted_id {
        reply.insert("upsertedId", id);
    }
    reply
}

/// Deletes the documents matching `filter`; the result is `{deletedCount}`
/// (`{acknowledged: false}` with `w: 0`).
pub(crate) fn delete(
    client: &Client,
    session: Option<&mut ClientSession>,
    target: (&str, &str),
    many: Many,
    filter: Document,
    options: Option<OptionList>,
) -> Result<Document, Failure> {
    let coll = collection::<Document>(client, target.0, target.1);
    let action = match many {
        Many::One => coll.delete_one(filter),
        Many::All => coll.delete_many(filter),
    };
    let action = configure!(action, DeleteOptions, options);
    let result = match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))?;
    if !result.acknowledged {
        return Ok(unacknowledged());
    }
    Ok(bson::doc! { "deletedCount": count_bson(result.deleted_count) })
}

/// How many documents match `filter`.
pub(crate) fn count_documents(
    client: &Client,
    session: Option<&mut ClientSession>,
    target: (&str, &str),
    filter: Document,
    options: Option<OptionList>,
) -> Result<u64, Failure> {
    let coll = collection::<Document>(client, target.0, target.1);
    let action = configure!(coll.count_documents(filter), CountOptions, options);
    match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))
}

/// The documents a query returns, one at a time, as the BSON bytes of the
/// reply (the C caller gets them as they came: nothing is decoded). Any
/// cursor of the Rust API (find, aggregate, listings, GridFS files) is one.
pub(crate) struct DocumentStream(Box<dyn RawSource>);

/// A cursor read as raw documents.
trait RawSource {
    /// The next document, `None` at the end; `session` is the explicit
    /// session that opened a session cursor.
    fn next_raw(
        &mut self,
        session: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure>;

    /// The next document after at most one `getMore` (the spec's
    /// `tryNext`): `None` when none came, whether or not the cursor is over.
    fn try_next_raw(
        &mut self,
        session: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure>;

    /// Closes the cursor, its `killCursors` within `timeout`.
    fn close_within(self: Box<Self>, timeout: std::time::Duration);
}

impl<T> RawSource for Cursor<T> {
    fn next_raw(
        &mut self,
        _: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure> {
        let more = self.advance().map_err(|e| failure(&e))?;
        Ok(more.then(|| self.current().to_raw_document_buf()))
    }

    fn try_next_raw(
        &mut self,
        _: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure> {
        self.next_if_any_raw().map_err(|e| failure(&e))
    }

    fn close_within(self: Box<Self>, timeout: std::time::Duration) {
        self.close_with_timeout(timeout);
    }
}

impl<T> RawSource for SessionCursor<T> {
    fn next_raw(
        &mut self,
        session: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure> {
        let session = session.ok_or_else(|| {
            Failure::new(
                Domain::Internal,
                "a session cursor is iterated without its session",
            )
        })?;
        let more = self.advance(session).map_err(|e| failure(&e))?;
        Ok(more.then(|| self.current().to_raw_document_buf()))
    }
    fn try_next_raw(
        &mut self,
        session: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure> {
        let session = session.ok_or_else(|| {
            Failure::new(
                Domain::Internal,
                "a session cursor is iterated without its session",
            )
        })?;
        self.next_if_any_raw(session).map_err(|e| failure(&e))
    }

    fn close_within(self: Box<Self>, timeout: std::time::Duration) {
        self.close_with_timeout(timeout);
    }
}

impl DocumentStream {
    /// A cursor with its own implicit session.
    pub(crate) fn implicit<T: 'static>(cursor: Cursor<T>) -> Self {
        DocumentStream(Box::new(cursor))
    }

    /// A cursor of an explicit session, iterated with that session.
    pub(crate) fn explicit<T: 'static>(cursor: SessionCursor<T>) -> Self {
        DocumentStream(Box::new(cursor))
    }

    /// The next document, `None` at the end. `session` is the session that
    /// opened a session cursor (unused for the other kind).
    pub(crate) fn next_document(
        &mut self,
        session: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure> {
        self.0.next_raw(session)
    }

    /// The next document after at most one `getMore`, `None` if none came.
    pub(crate) fn try_next_document(
        &mut self,
        session: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure> {
        self.0.try_next_raw(session)
    }

    /// Closes the cursor, its `killCursors` within `timeout`.
    pub(crate) fn close_within(self, timeout: std::time::Duration) {
        self.0.close_within(timeout);
    }
}

/// Opens a cursor-returning action in `session` when there is one.
macro_rules! open_in {
    ($action:expr, $session:expr) => {
        match $session {
            Some(s) => $action
                .session(s)
                .run()
                .map($crate::capi::ops::DocumentStream::explicit),
            None => $action
                .run()
                .map($crate::capi::ops::DocumentStream::implicit),
        }
        .map_err(|e| $crate::capi::ops::failure(&e))
    };
}
pub(crate) use open_in;

/// The documents matching `filter`.
pub(crate) fn find(
    client: &Client,
    session: Option<&mut ClientSession>,
    target: (&str, &str),
    filter: Document,
    options: Option<OptionList>,
) -> Result<DocumentStream, Failure> {
    // Results cross the boundary as bytes: no `Document` is built for them.
    let coll = collection::<RawDocumentBuf>(client, target.0, target.1);
    let action = configure!(cursor: coll.find(filter), FindOptions, options);
    open_in!(action, session)
}

/// The results of the aggregation `pipeline`.
pub(crate) fn aggregate(
    client: &Client,
    session: Option<&mut ClientSession>,
    target: (&str, &str),
    pipeline: Vec<Document>,
    options: Option<OptionList>,
) -> Result<DocumentStream, Failure> {
    let coll = collection::<Document>(client, target.0, target.1);
    let action = configure!(cursor: coll.aggregate(pipeline), AggregateOptions, options)
        .with_type::<RawDocumentBuf>();
    open_in!(action, session)
}

pub(crate) fn count_bson(count: u64) -> Bson {
    i64::try_from(count).map_or(Bson::Double(count as f64), Bson::Int64)
}

/// The C form of a driver error: its kind as a domain, the server's code
/// (or a write error's), its labels and its message.
pub(crate) fn failure(error: &Error) -> Failure {
    // A transaction callback's own error goes back as the callback gave it.
    if let Some(super::transaction::CallbackFailure(failure)) = error.get_custom() {
        let mut failure = failure.clone();
        failure.labels = error.labels().iter().cloned().collect();
        failure.labels.sort();
        return failure;
    }
    let (domain, code) = match error.kind() {
        // The domains keep the meaning they had before the Rust kinds took
        // the official driver's names: a C caller sees the same domain for
        // the same failure.
        ErrorKind::InvalidArgument { .. }
        | ErrorKind::InvalidTlsConfig { .. }
        | ErrorKind::BsonSerialization(_) => (Domain::Argument, None),
        ErrorKind::Io(_)
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. } => (Domain::Network, None),
        ErrorKind::Command(c) => (Domain::Command, Some(c.code)),
        ErrorKind::InvalidResponse { .. } | ErrorKind::BsonDeserialization(_) => {
            (Domain::Protocol, None)
        }
        ErrorKind::Internal { .. } => (Domain::Internal, None),
        ErrorKind::ServerSelection { .. } => (Domain::ServerSelection, None),
        ErrorKind::IncompatibleServer { .. } => (Domain::IncompatibleServer, None),
        ErrorKind::Authentication { .. } => (Domain::Authentication, None),
        ErrorKind::Tls { .. } => (Domain::Tls, None),
        ErrorKind::Timeout { .. } => (Domain::Timeout, None),
        ErrorKind::Write(crate::proto::results::WriteFailure::WriteError(e)) => {
            (Domain::Write, Some(e.code))
        }
        ErrorKind::Write(crate::proto::results::WriteFailure::WriteConcernError(e)) => {
            (Domain::Write, Some(e.code))
        }
        ErrorKind::CollectionBulkWrite(f) => (
            Domain::Write,
            f.write_errors
                .first()
                .map(|e| e.code)
                .or(f.write_concern_error.as_ref().map(|e| e.code)),
        ),
        // `error.code()` gives the first failed statement's code.
        ErrorKind::InsertMany(_) | ErrorKind::BulkWrite(_) => (Domain::Write, None),
        ErrorKind::Client { .. }
        | ErrorKind::Transaction { .. }
        | ErrorKind::SessionsNotSupported
        | ErrorKind::Shutdown
        | ErrorKind::Custom(_)
        | ErrorKind::GridFs(_)
        | ErrorKind::MissingResumeToken => (Domain::Client, None),
    };
    let mut result = Failure::new(domain, error.to_string());
    result.code = code.or_else(|| error.code()).unwrap_or(0);
    result.labels = error.labels().iter().cloned().collect();
    if let ErrorKind::BulkWrite(bulk) = error.kind() {
        result.details = Some(Box::new(super::client_bulk::error_details(bulk)));
    }
    result
}
