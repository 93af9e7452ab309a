//! Every call the C ABI makes into the driver's Rust API, in one place, so a
//! change of that API is a change of this file only. Everything here is safe
//! Rust over plain values: the pointer handling lives in the parent module.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf};

use crate::api::cursor::SessionCursor;
use crate::error::{Error, ErrorKind};
use crate::proto::coll_options::{AggregateOptions, CountOptions, FindOptions, UpdateOptions};
use crate::proto::event::EventHandler;
use crate::proto::options::{Acknowledgment, ReadConcern, WriteConcern};
use crate::proto::session::transaction::TransactionOptions;
use crate::{Client, ClientSession, Collection, Cursor};

use super::error::{Domain, Failure};

/// A C caller's options document, element by element in its order; a key
/// given twice is applied twice, so the last one wins, as in a `Document`.
pub(crate) type OptionList = Vec<(String, Bson)>;

/// A client for the deployment `uri` names; parses and validates, no I/O.
pub(crate) fn new_client(uri: &str) -> Result<Client, Failure> {
    Client::with_uri_str(uri).map_err(|e| failure(&e))
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
    let parsed = crate::ClientOptions::parse(uri).map_err(|e| failure(&e))?;
    let mut credential = parsed.credential().cloned().unwrap_or_default();
    let callback = std::sync::Arc::new(callback);
    credential.oidc_callback = crate::options::oidc::Callback::machine(move |context| {
        callback
            .call(&context)
            .map(crate::options::oidc::IdpServerResponse::new)
    });
    let code = crate::ClientOptions::builder()
        .credential(credential)
        .build()
        .map_err(|e| failure(&e))?;
    let options = crate::ClientOptions::parse_with(uri, code).map_err(|e| failure(&e))?;
    Client::with_options(options).map_err(|e| failure(&e))
}

/// The same deployment and options as `client`, reporting events to
/// `handler`. Only for a client that has not done anything yet.
pub(crate) fn with_event_handler(
    client: &Client,
    handler: Arc<dyn EventHandler>,
) -> Result<Client, Failure> {
    let options = client.checked_options().map_err(|e| failure(&e))?;
    Client::builder(options)
        .event_handler(handler)
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

/// An explicit session; options `{causalConsistency, snapshot}`.
pub(crate) fn start_session(
    client: &Client,
    options: Option<OptionList>,
) -> Result<ClientSession, Failure> {
    let mut action = client.start_session();
    for (key, value) in options.unwrap_or_default() {
        match key.as_str() {
            "causalConsistency" => action = action.causal_consistency(bool_option(&key, &value)?),
            "snapshot" => action = action.snapshot(bool_option(&key, &value)?),
            _ => return Err(unknown_option("session", &key)),
        }
    }
    action.run().map_err(|e| failure(&e))
}

/// The session's `lsid`.
pub(crate) fn session_id(session: &ClientSession) -> Option<Document> {
    Some(session.id().clone())
}

/// Starts a transaction; options `{readConcern: {level}, writeConcern: {w,
/// j, wtimeout}, maxCommitTimeMS}` override the session's defaults.
pub(crate) fn start_transaction(
    session: &mut ClientSession,
    options: Option<OptionList>,
) -> Result<(), Failure> {
    let mut opts = TransactionOptions::default();
    for (key, value) in options.unwrap_or_default() {
        match key.as_str() {
            "readConcern" => {
                let concern = document_option(&key, value)?;
                let mut level = None;
                for (field, value) in concern {
                    match (field.as_str(), value) {
                        ("level", Bson::String(l)) => level = Some(l),
                        (field, _) => return Err(unknown_option("readConcern", field)),
                    }
                }
                let level = level.ok_or_else(|| {
                    Failure::new(
                        Domain::Argument,
                        "option \"readConcern\" needs a string \"level\"",
                    )
                })?;
                opts = opts.with_read_concern(ReadConcern::new(level));
            }
            "writeConcern" => {
                opts = opts.with_write_concern(write_concern(document_option(&key, value)?)?)
            }
            "maxCommitTimeMS" => {
                let ms = unsigned_option(&key, &value)?;
                opts = opts.with_max_commit_time(std::time::Duration::from_millis(ms));
            }
            _ => return Err(unknown_option("transaction", &key)),
        }
    }
    session
        .start_transaction()
        .with_options(opts)
        .run()
        .map_err(|e| failure(&e))
}

fn write_concern(document: Document) -> Result<WriteConcern, Failure> {
    let mut concern = WriteConcern::default();
    for (key, value) in document {
        match (key.as_str(), value) {
            ("w", Bson::String(w)) if w == "majority" => concern.w = Some(Acknowledgment::Majority),
            ("w", Bson::String(tag)) => concern.w = Some(Acknowledgment::Custom(tag)),
            ("w", value) => {
                let n = u32::try_from(integer_option("w", &value)?).map_err(|_| {
                    Failure::new(
                        Domain::Argument,
                        format!("option \"w\" must not be negative, not {value}"),
                    )
                })?;
                concern.w = Some(Acknowledgment::Nodes(n));
            }
            ("j", value) => concern.journal = Some(bool_option("j", &value)?),
            ("wtimeout", value) => {
                let ms = unsigned_option("wtimeout", &value)?;
                concern.w_timeout = Some(std::time::Duration::from_millis(ms));
            }
            (key, _) => return Err(unknown_option("writeConcern", key)),
        }
    }
    Ok(concern)
}

/// Commits the session's transaction.
pub(crate) fn commit_transaction(session: &mut ClientSession) -> Result<(), Failure> {
    session.commit_transaction().run().map_err(|e| failure(&e))
}

/// Aborts the session's transaction.
pub(crate) fn abort_transaction(session: &mut ClientSession) -> Result<(), Failure> {
    session.abort_transaction().run().map_err(|e| failure(&e))
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
) -> Result<Document, Failure> {
    let coll = collection::<Document>(client, db, coll);
    let action = coll.insert_one(document);
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
) -> Result<Document, Failure> {
    let coll = collection::<Document>(client, db, coll);
    let action = coll.insert_many(documents);
    let result = match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))?;
    if !result.acknowledged {
        return Ok(unacknowledged());
    }
    let ids = result
        .inserted_ids
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
    let mut opts = UpdateOptions::default();
    for (key, value) in options.unwrap_or_default() {
        match key.as_str() {
            "upsert" => opts = opts.upsert(bool_option(&key, &value)?),
            _ => return Err(unknown_option("update", &key)),
        }
    }
    let action = match many {
        Many::One => coll.update_one(filter, update),
        Many::All => coll.update_many(filter, update),
    }
    .with_options(opts);
    let result = match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))?;
    if !result.acknowledged {
        return Ok(unacknowledged());
    }
    let mut reply = bson::doc! {
        "matchedCount": count_bson(result.matched_count),
        "modifiedCount": count_bson(result.modified_count),
    };
    if let Some(id) = result.upserted_id {
        reply.insert("upsertedId", id);
    }
    Ok(reply)
}

/// Deletes the documents matching `filter`; the result is `{deletedCount}`
/// (`{acknowledged: false}` with `w: 0`).
pub(crate) fn delete(
    client: &Client,
    session: Option<&mut ClientSession>,
    target: (&str, &str),
    many: Many,
    filter: Document,
) -> Result<Document, Failure> {
    let coll = collection::<Document>(client, target.0, target.1);
    let action = match many {
        Many::One => coll.delete_one(filter),
        Many::All => coll.delete_many(filter),
    };
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
    let mut opts = CountOptions::default();
    for (key, value) in options.unwrap_or_default() {
        match key.as_str() {
            "limit" => opts = opts.limit(unsigned_option(&key, &value)?),
            "skip" => opts = opts.skip(unsigned_option(&key, &value)?),
            _ => return Err(unknown_option("count_documents", &key)),
        }
    }
    let action = coll.count_documents(filter).with_options(opts);
    match session {
        Some(s) => action.session(s).run(),
        None => action.run(),
    }
    .map_err(|e| failure(&e))
}

/// The documents a query returns, one at a time, as the BSON bytes of the
/// reply (the C caller gets them as they came: nothing is decoded).
pub(crate) enum DocumentStream {
    /// A server cursor with its own implicit session.
    Cursor(Box<Cursor<RawDocumentBuf>>),
    /// A server cursor of an explicit session, iterated with that session.
    Session(Box<SessionCursor<RawDocumentBuf>>),
}

impl DocumentStream {
    /// The next document, `None` at the end. `session` is the session that
    /// opened a session cursor (unused for the other kind).
    pub(crate) fn next_document(
        &mut self,
        session: Option<&mut ClientSession>,
    ) -> Result<Option<RawDocumentBuf>, Failure> {
        match (self, session) {
            (DocumentStream::Cursor(cursor), _) => cursor.next().transpose(),
            (DocumentStream::Session(cursor), Some(session)) => cursor.next(session).transpose(),
            (DocumentStream::Session(_), None) => {
                return Err(Failure::new(
                    Domain::Internal,
                    "a session cursor is iterated without its session",
                ))
            }
        }
        .map_err(|e| failure(&e))
    }
}

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
    let mut opts = FindOptions::default();
    for (key, value) in options.unwrap_or_default() {
        match key.as_str() {
            "sort" => opts = opts.sort(document_option(&key, value)?),
            "projection" => opts = opts.projection(document_option(&key, value)?),
            "limit" => opts = opts.limit(integer_option(&key, &value)?),
            "skip" => opts = opts.skip(unsigned_option(&key, &value)?),
            "batchSize" => opts = opts.batch_size(u32_option(&key, &value)?),
            _ => return Err(unknown_option("find", &key)),
        }
    }
    let action = coll.find(filter).with_options(opts);
    match session {
        Some(s) => action
            .session(s)
            .run()
            .map(|cursor| DocumentStream::Session(Box::new(cursor))),
        None => action
            .run()
            .map(|cursor| DocumentStream::Cursor(Box::new(cursor))),
    }
    .map_err(|e| failure(&e))
}

/// The results of the aggregation `pipeline`.
pub(crate) fn aggregate(
    client: &Client,
    session: Option<&mut ClientSession>,
    target: (&str, &str),
    pipeline: Vec<Document>,
    options: Option<OptionList>,
) -> Result<DocumentStream, Failure> {
    let mut opts = AggregateOptions::default();
    for (key, value) in options.unwrap_or_default() {
        match key.as_str() {
            "batchSize" => opts = opts.batch_size(u32_option(&key, &value)?),
            "allowDiskUse" => opts = opts.allow_disk_use(bool_option(&key, &value)?),
            _ => return Err(unknown_option("aggregate", &key)),
        }
    }
    let coll = collection::<Document>(client, target.0, target.1);
    let action = coll
        .aggregate(pipeline)
        .with_options(opts)
        .with_type::<RawDocumentBuf>();
    match session {
        Some(s) => action
            .session(s)
            .run()
            .map(|cursor| DocumentStream::Session(Box::new(cursor))),
        None => action
            .run()
            .map(|cursor| DocumentStream::Cursor(Box::new(cursor))),
    }
    .map_err(|e| failure(&e))
}

fn count_bson(count: u64) -> Bson {
    i64::try_from(count).map_or(Bson::Double(count as f64), Bson::Int64)
}

fn unknown_option(operation: &str, key: &str) -> Failure {
    Failure::new(
        Domain::Argument,
        format!("unknown {operation} option \"{key}\""),
    )
}

fn bool_option(key: &str, value: &Bson) -> Result<bool, Failure> {
    value.as_bool().ok_or_else(|| {
        Failure::new(
            Domain::Argument,
            format!("option \"{key}\" must be a boolean, not {value}"),
        )
    })
}

fn integer_option(key: &str, value: &Bson) -> Result<i64, Failure> {
    match value {
        Bson::Int32(n) => Ok(i64::from(*n)),
        Bson::Int64(n) => Ok(*n),
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(*f as i64),
        _ => Err(Failure::new(
            Domain::Argument,
            format!("option \"{key}\" must be an integer, not {value}"),
        )),
    }
}

fn unsigned_option(key: &str, value: &Bson) -> Result<u64, Failure> {
    u64::try_from(integer_option(key, value)?).map_err(|_| {
        Failure::new(
            Domain::Argument,
            format!("option \"{key}\" must not be negative, not {value}"),
        )
    })
}

fn u32_option(key: &str, value: &Bson) -> Result<u32, Failure> {
    u32::try_from(integer_option(key, value)?).map_err(|_| {
        Failure::new(
            Domain::Argument,
            format!("option \"{key}\" must fit in 32 bits unsigned, not {value}"),
        )
    })
}

fn document_option(key: &str, value: Bson) -> Result<Document, Failure> {
    match value {
        Bson::Document(d) => Ok(d),
        other => Err(Failure::new(
            Domain::Argument,
            format!("option \"{key}\" must be a document, not {other}"),
        )),
    }
}

/// The C form of a driver error: its kind as a domain, the server's code
/// (or a write error's), its labels and its message.
pub(crate) fn failure(error: &Error) -> Failure {
    let (domain, code) = match error.kind() {
        ErrorKind::InvalidArgument { .. } => (Domain::Argument, None),
        ErrorKind::Network { .. } => (Domain::Network, None),
        ErrorKind::Command(c) => (Domain::Command, Some(c.code)),
        ErrorKind::Protocol { .. } => (Domain::Protocol, None),
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
        ErrorKind::BulkWrite(f) => (
            Domain::Write,
            f.write_errors
                .first()
                .map(|e| e.code)
                .or(f.write_concern_error.as_ref().map(|e| e.code)),
        ),
        // `error.code()` gives the first failed statement's code.
        ErrorKind::InsertMany(_) => (Domain::Write, None),
        ErrorKind::Client { .. } | ErrorKind::Custom(_) | ErrorKind::GridFs(_) => {
            (Domain::Client, None)
        }
    };
    let mut result = Failure::new(domain, error.to_string());
    result.code = code.or_else(|| error.code()).unwrap_or(0);
    result.labels = error.labels().iter().cloned().collect();
    result
}
