//! The C ABI (feature `capi`): opaque handles, BSON as byte buffers, and
//! an `mi_error` for every failure. `include/mongo_inline.h` declares it
//! and documents ownership; this module is the only place with `unsafe`.
//!
//! ```text
//!  C caller ──> mi_* (c_function!, entry.rs: pointers checked, panics caught)
//!                 └─> ops.rs (safe calls into the Rust API) ──> Client
//!  mi_error* <── Failure (error.rs)      events.rs ──> C callbacks
//! ```
//!
//! Every exported function that can fail returns `NULL` on success or an
//! `mi_error` the caller frees; no panic unwinds into C. A handle is used
//! from one thread at a time. After `fork()` the child keeps using its
//! client: the driver notices the new process and drops inherited sockets
//! and sessions (sessions and cursors opened before the fork must not be
//! used in the child).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[macro_use]
mod entry;
mod change_stream;
mod client_bulk;
mod collection;
#[cfg(test)]
mod coverage;
mod database;
mod error;
mod event_fields;
mod events;
mod gridfs;
mod ops;
mod search_index;
mod transaction;

use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bson::Document;

pub use error::{Domain, MiError};
pub use events::{MiEvent, MiEventCallback, MiLogCallback};

use error::Failure;
use events::EventSlot;
use ops::{DocumentStream, Many};

/// `mi_client`: a client and what the C side attached to it.
pub struct MiClient {
    id: u64,
    client: crate::Client,
    /// Present once an event callback was registered.
    events: Option<Arc<EventSlot>>,
    /// Whether the client has run an operation or handed out a session:
    /// until then it can be rebuilt to carry an event handler.
    used: bool,
}

/// `mi_session`: an explicit session of one client. Shared with the
/// cursors opened in it, which iterate with it: freeing the handle first
/// leaves them working, and the session ends with the last of them.
pub struct MiSession {
    client_id: u64,
    session: SharedSession,
}

type SharedSession = Arc<Mutex<crate::ClientSession>>;

/// `mi_cursor`: query results, and the document last returned.
pub struct MiCursor {
    stream: DocumentStream,
    /// The session that opened it, for a session cursor.
    session: Option<SharedSession>,
    current: Vec<u8>,
}

/// A session in use by one call: locked, or lent to the transaction
/// callback running on this thread (see `transaction.rs`).
enum SessionRef<'a> {
    Locked(MutexGuard<'a, crate::ClientSession>),
    Lent(&'a mut crate::ClientSession),
}

impl std::ops::Deref for SessionRef<'_> {
    type Target = crate::ClientSession;
    fn deref(&self) -> &crate::ClientSession {
        match self {
            SessionRef::Locked(guard) => guard,
            SessionRef::Lent(session) => session,
        }
    }
}

impl std::ops::DerefMut for SessionRef<'_> {
    fn deref_mut(&mut self) -> &mut crate::ClientSession {
        match self {
            SessionRef::Locked(guard) => guard,
            SessionRef::Lent(session) => session,
        }
    }
}

/// The session, even if a panic poisoned its lock (every `ClientSession`
/// method leaves it consistent between calls); inside a transaction
/// callback of this session, the session the retry loop lent it.
fn lock(session: &SharedSession) -> SessionRef<'_> {
    if let Some(lent) = transaction::lent(Arc::as_ptr(session)) {
        // SAFETY: the retry loop's `&mut ClientSession`, lent for exactly
        // the callback's duration on this thread; the loop does not touch
        // it meanwhile, and the single thread makes one call at a time, so
        // this is the only reference in use.
        return SessionRef::Lent(unsafe { &mut *lent });
    }
    SessionRef::Locked(
        session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

/// `mi_buffer`: bytes the library allocated; `mi_buffer_free` releases them.
#[repr(C)]
#[derive(Debug)]
pub struct MiBuffer {
    /// The bytes (a BSON document), or NULL.
    pub data: *mut u8,
    /// How many.
    pub len: usize,
}

static NEXT_CLIENT_ID: AtomicU64 = AtomicU64::new(1);

/// Runs `body` with panics caught: `NULL` on success, else a new `mi_error`.
fn boundary(body: impl FnOnce() -> Result<(), Failure>) -> *mut MiError {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(failure)) => failure.into_raw(),
        Err(panic) => Failure::from_panic(panic.as_ref()).into_raw(),
    }
}

/// For functions that cannot report an error (the `*_free` family): a panic
/// is swallowed rather than unwound into C.
fn quiet_boundary(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

/// Drops a handle this library boxed, for the `*_free` functions: NULL is
/// a no-op, and a panic while dropping is swallowed.
///
/// # Safety
/// `ptr` is NULL or came from `Box::into_raw` of this library, not freed
/// yet and not used afterwards.
unsafe fn free_boxed<T>(ptr: *mut T) {
    quiet_boundary(|| {
        if !ptr.is_null() {
            // SAFETY: by the caller's contract.
            drop(unsafe { Box::from_raw(ptr) });
        }
    })
}

/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string valid for `'a`.
unsafe fn str_arg<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::argument(name, "is NULL"));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let bytes = unsafe { CStr::from_ptr(ptr) };
    bytes
        .to_str()
        .map_err(|_| Failure::argument(name, "is not valid UTF-8"))
}

/// # Safety
/// `ptr` is NULL or points to `len` readable bytes valid for `'a`.
unsafe fn bytes_arg<'a>(ptr: *const u8, len: usize, name: &str) -> Result<&'a [u8], Failure> {
    if ptr.is_null() {
        return Err(Failure::argument(name, "is NULL"));
    }
    if len > isize::MAX as usize {
        return Err(Failure::argument(name, "has an impossible length"));
    }
    // SAFETY: non-NULL, `len` bytes readable by the caller's contract, and
    // `len` fits a slice.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// One whole BSON document from `len` bytes: the declared length must be
/// `len` and nothing may follow it. Read by our own walker, not bson's serde
/// path: it is about twice as fast on a filter, and it keeps a sub-document
/// such as `{"$oid": "..."}` the document it is, where serde would turn it
/// into the value its Extended JSON form names.
fn parse_document(bytes: &[u8], name: &str) -> Result<Document, Failure> {
    check_length(bytes, name)?;
    crate::proto::raw_walk::to_document(bytes)
        .map_err(|e| Failure::argument(name, &format!("is not BSON: {e}")))
}

/// An options document's elements, in order, read and checked as
/// [`parse_document`] reads a document but not gathered into a map: each
/// option is looked at once.
fn parse_options(bytes: &[u8], name: &str) -> Result<ops::OptionList, Failure> {
    check_length(bytes, name)?;
    crate::proto::raw_walk::to_pairs(bytes)
        .map_err(|e| Failure::argument(name, &format!("is not BSON: {e}")))
}

/// The document's declared length must be exactly the bytes given.
fn check_length(bytes: &[u8], name: &str) -> Result<(), Failure> {
    if bytes.len() < 5 {
        return Err(Failure::argument(name, "is not BSON: shorter than 5 bytes"));
    }
    let declared = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if usize::try_from(declared).ok() != Some(bytes.len()) {
        return Err(Failure::argument(
            name,
            &format!(
                "is not BSON: declares {declared} bytes but {} were given",
                bytes.len()
            ),
        ));
    }
    Ok(())
}

/// # Safety
/// As for [`bytes_arg`].
unsafe fn document_arg(ptr: *const u8, len: usize, name: &str) -> Result<Document, Failure> {
    // SAFETY: forwarded contract.
    parse_document(unsafe { bytes_arg(ptr, len, name) }?, name)
}

/// An options document (see [`parse_options`]); `None` for a NULL pointer.
///
/// # Safety
/// As for [`bytes_arg`].
unsafe fn options_arg(
    ptr: *const u8,
    len: usize,
    name: &str,
) -> Result<Option<ops::OptionList>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    parse_options(unsafe { bytes_arg(ptr, len, name) }?, name).map(Some)
}

/// `count` documents from parallel arrays of pointers and lengths.
///
/// # Safety
/// `docs` and `lens` are NULL or point to `count` elements each, and each
/// `docs[i]` to `lens[i]` readable bytes.
unsafe fn document_list(
    docs: *const *const u8,
    lens: *const usize,
    count: usize,
    name: &str,
) -> Result<Vec<Document>, Failure> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if docs.is_null() || lens.is_null() {
        return Err(Failure::argument(name, "is NULL (or its lengths are)"));
    }
    if count > isize::MAX as usize / std::mem::size_of::<*const u8>() {
        return Err(Failure::argument(name, "has an impossible count"));
    }
    // SAFETY: both arrays hold `count` elements by the caller's contract.
    let (docs, lens) = unsafe {
        (
            std::slice::from_raw_parts(docs, count),
            std::slice::from_raw_parts(lens, count),
        )
    };
    docs.iter()
        .zip(lens)
        .enumerate()
        .map(|(i, (&ptr, &len))| {
            // SAFETY: each element points to `len` bytes by the contract.
            unsafe { document_arg(ptr, len, &format!("{name}[{i}]")) }
        })
        .collect()
}

/// # Safety
/// `ptr` is NULL or a valid, exclusively used `T` for `'a`.
unsafe fn handle<'a, T>(ptr: *mut T, name: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: NULL is checked by `as_mut`; otherwise valid by contract.
    unsafe { ptr.as_mut() }.ok_or_else(|| Failure::argument(name, "is NULL"))
}

/// The session, checked to belong to `client`.
///
/// # Safety
/// As for [`handle`].
unsafe fn session_for(
    session: *mut MiSession,
    client: &MiClient,
) -> Result<Option<SharedSession>, Failure> {
    // SAFETY: NULL is checked by `as_mut`; otherwise valid by contract.
    let Some(session) = (unsafe { session.as_mut() }) else {
        return Ok(None);
    };
    if session.client_id != client.id {
        return Err(Failure::argument(
            "session",
            "belongs to another client than `client`",
        ));
    }
    Ok(Some(session.session.clone()))
}

fn write_buffer(out: &mut MiBuffer, document: &Document) -> Result<(), Failure> {
    let mut bytes = Vec::new();
    document
        .to_writer(&mut bytes)
        .map_err(|e| Failure::new(Domain::Internal, format!("cannot encode a result: {e}")))?;
    let boxed = bytes.into_boxed_slice();
    out.len = boxed.len();
    out.data = Box::into_raw(boxed).cast::<u8>();
    Ok(())
}

/// The library's version, a static NUL-terminated string.
#[unsafe(no_mangle)]
pub extern "C" fn mi_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Frees an error; NULL is a no-op.
///
/// # Safety
/// `error` is NULL or was returned by this library and not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_error_free(error: *mut MiError) {
    quiet_boundary(|| {
        if error.is_null() {
            return;
        }
        // SAFETY: allocated by `Failure::into_raw` with `Box`, not freed yet.
        let error = unsafe { Box::from_raw(error) };
        if !error.message.is_null() {
            // SAFETY: made by `CString::into_raw` in `c_string`.
            drop(unsafe { CString::from_raw(error.message) });
        }
        if !error.details.is_null() {
            // SAFETY: a boxed slice of `details_len` bytes from `into_raw`.
            drop(unsafe {
                Box::from_raw(ptr::slice_from_raw_parts_mut(
                    error.details,
                    error.details_len,
                ))
            });
        }
        if !error.labels.is_null() {
            // SAFETY: a boxed slice of `label_count` pointers from `into_raw`.
            let labels = unsafe {
                Box::from_raw(ptr::slice_from_raw_parts_mut(
                    error.labels,
                    error.label_count,
                ))
            };
            for &label in labels.iter() {
                // SAFETY: each made by `CString::into_raw`.
                drop(unsafe { CString::from_raw(label) });
            }
        }
    })
}

/// Whether `error` carries `label`; false for NULL arguments.
///
/// # Safety
/// `error` is NULL or a live error from this library; `label` is NULL or a
/// NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_error_has_label(error: *const MiError, label: *const c_char) -> bool {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: NULL or a live error by contract.
        let Some(error) = (unsafe { error.as_ref() }) else {
            return false;
        };
        // SAFETY: NULL or NUL-terminated by contract.
        let Ok(label) = (unsafe { str_arg(label, "label") }) else {
            return false;
        };
        if error.labels.is_null() {
            return false;
        }
        // SAFETY: `label_count` pointers to NUL-terminated strings we made.
        let labels = unsafe { std::slice::from_raw_parts(error.labels, error.label_count) };
        labels.iter().any(|&l| {
            // SAFETY: each is a NUL-terminated string we made.
            unsafe { CStr::from_ptr(l) }.to_bytes() == label.as_bytes()
        })
    }))
    .unwrap_or(false)
}

/// Frees a buffer's bytes and resets it to `{NULL, 0}`; NULL or an empty
/// buffer is a no-op.
///
/// # Safety
/// `buffer` is NULL or points to an `mi_buffer` that is empty or was filled
/// by this library and not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_buffer_free(buffer: *mut MiBuffer) {
    quiet_boundary(|| {
        // SAFETY: NULL or a valid buffer by contract.
        let Some(buffer) = (unsafe { buffer.as_mut() }) else {
            return;
        };
        if !buffer.data.is_null() {
            // SAFETY: a boxed slice of `len` bytes from `write_buffer`.
            drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(buffer.data, buffer.len)) });
        }
        buffer.data = ptr::null_mut();
        buffer.len = 0;
    })
}

/// Frees a string from `mi_bson_to_json`; NULL is a no-op.
///
/// # Safety
/// `string` is NULL or came from this library and was not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_string_free(string: *mut c_char) {
    quiet_boundary(|| {
        if !string.is_null() {
            // SAFETY: made by `CString::into_raw`, not freed yet.
            drop(unsafe { CString::from_raw(string) });
        }
    })
}

c_function! {
    /// Parses Extended JSON (canonical or relaxed) into a BSON document.
    ///
    /// # Safety
    /// `json` is NULL or NUL-terminated; `out` is NULL or a writable `mi_buffer`.
    fn mi_bson_from_json(
        json: str,
        out: mut MiBuffer,
    ) {
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| Failure::argument("json", &format!("is not JSON: {e}")))?;
        let document = match bson::Bson::try_from(value) {
            Ok(bson::Bson::Document(d)) => d,
            Ok(_) => return Err(Failure::argument("json", "is not a JSON object")),
            Err(e) => {
                return Err(Failure::argument(
                    "json",
                    &format!("is not Extended JSON: {e}"),
                ))
            }
        };
        write_buffer(out, &document)
    }
}

c_function! {
    /// Renders a BSON document as relaxed Extended JSON; free the string with
    /// `mi_string_free`.
    ///
    /// # Safety
    /// `bson` is NULL or points to `len` bytes; `out` is NULL or writable.
    fn mi_bson_to_json(
        bson: document len,
        out: mut *mut c_char,
    ) {
        let document = bson;
        let json = bson::Bson::Document(document)
            .into_relaxed_extjson()
            .to_string();
        *out = error::c_string(json);
        Ok(())
    }
}

c_function! {
    /// Creates a client from a connection string (parses and validates, no I/O).
    ///
    /// # Safety
    /// `uri` is NULL or NUL-terminated; `out` is NULL or writable.
    fn mi_client_new(
        uri: str,
        out: mut *mut MiClient,
    ) {
        let client = ops::new_client(uri)?;
        *out = Box::into_raw(Box::new(MiClient {
            id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed),
            client,
            events: None,
            used: false,
        }));
        Ok(())
    }
}

/// MONGODB-OIDC's machine callback, as C gives it: writes an access token
/// of at most `capacity` bytes into `token` and returns its length, or a
/// negative number when it has none. `timeout_ms` is the time left (-1:
/// none); `username` is the connection string's user or NULL.
pub type MiOidcCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        timeout_ms: i64,
        username: *const c_char,
        token: *mut c_char,
        capacity: usize,
    ) -> i64,
>;

c_function! {
    /// Creates a client whose MONGODB-OIDC credential gets its access tokens
    /// from `callback` (the connection string names
    /// `authMechanism=MONGODB-OIDC` and no `ENVIRONMENT`). No I/O.
    ///
    /// # Safety
    /// `uri` is NULL or NUL-terminated; `out` is NULL or writable; `callback`
    /// and `user_data` stay usable, from the threads that use the client,
    /// while the client lives.
    fn mi_client_new_with_oidc_callback(
        uri: str,
        callback: raw MiOidcCallback,
        user_data: raw *mut c_void,
        out: mut *mut MiClient,
    ) {
        let callback = callback.ok_or_else(|| Failure::new(Domain::Client, "callback is NULL"))?;
        let client = ops::new_client_with_oidc(
            uri,
            ops::OidcCallback {
                callback,
                user_data,
            },
        )?;
        *out = Box::into_raw(Box::new(MiClient {
            id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed),
            client,
            events: None,
            used: false,
        }));
        Ok(())
    }
}

/// Closes the client (ends its server sessions, closes its sockets) and
/// frees the handle; NULL is a no-op.
///
/// # Safety
/// `client` is NULL or a live client handle, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_client_free(client: *mut MiClient) {
    quiet_boundary(|| {
        if client.is_null() {
            return;
        }
        // SAFETY: made by `mi_client_new` with `Box`, not freed yet.
        let client = unsafe { Box::from_raw(client) };
        ops::close(&client.client);
    })
}

c_function! {
    /// Registers (or with NULL removes) the command and SDAM event callback.
    ///
    /// # Safety
    /// `client` is NULL or a live client handle; `callback` and `user_data`
    /// stay usable while the client lives.
    fn mi_client_set_event_callback(
        client: mut MiClient,
        callback: raw MiEventCallback,
        user_data: raw *mut c_void,
    ) {
        if client.events.is_none() {
            if client.used {
                return Err(Failure::new(
                    Domain::Client,
                    "register the first event callback before the client's first operation or session",
                ));
            }
            let slot = events::new_slot();
            client.client = ops::with_event_handler(&client.client, slot.clone())?;
            client.events = Some(slot);
        }
        if let Some(slot) = &client.events {
            slot.set(callback, user_data);
        }
        Ok(())
    }
}

/// Registers (or with NULL removes) the process-wide log callback, for
/// records up to `max_level` (0 off, 1 error … 5 trace).
///
/// # Safety
/// `callback` and `user_data` stay usable until replaced.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_set_log_callback(
    callback: MiLogCallback,
    user_data: *mut c_void,
    max_level: i32,
) -> *mut MiError {
    boundary(|| events::set_log_callback(callback, user_data, max_level))
}

c_function! {
    /// The retry tokens left in the client's bucket; `*has_bucket` false when
    /// its retry settings use none.
    ///
    /// # Safety
    /// `client` is NULL or live; `tokens` and `has_bucket` NULL or writable.
    fn mi_client_retry_tokens(
        client: mut MiClient,
        tokens: mut f64,
        has_bucket: mut bool,
    ) {
        let balance = ops::retry_tokens(&client.client)?;
        *has_bucket = balance.is_some();
        *tokens = balance.unwrap_or(0.0);
        Ok(())
    }
}

c_function! {
    /// Runs a command on database `db` (on the primary), in `session` if not
    /// NULL; the reply goes to `reply`.
    ///
    /// # Safety
    /// Pointers NULL or valid: `command` for `command_len` bytes, `reply` writable.
    fn mi_client_run_command(
        client: mut MiClient,
        session: raw *mut MiSession,
        db: str,
        command: document command_len,
        reply: mut MiBuffer,
    ) {
        // SAFETY: by contract.
        let session = unsafe { session_for(session, client)? };
        client.used = true;
        let output = ops::run_command(
            &client.client,
            lock_opt(&session).as_deref_mut(),
            db,
            command,
        )?;
        write_buffer(reply, &output)
    }
}

c_function! {
    /// Starts an explicit session; options `{causalConsistency, snapshot}` or NULL.
    ///
    /// # Safety
    /// `client` NULL or live; `options` NULL or `options_len` bytes; `out` NULL or writable.
    fn mi_session_start(
        client: mut MiClient,
        options: options options_len,
        out: mut *mut MiSession,
    ) {
        client.used = true;
        let session = ops::start_session(&client.client, options)?;
        *out = Box::into_raw(Box::new(MiSession {
            client_id: client.id,
            session: Arc::new(Mutex::new(session)),
        }));
        Ok(())
    }
}

/// Frees the handle; the session ends (aborting an open transaction) now,
/// or when the last cursor opened in it is freed. NULL is a no-op.
///
/// # Safety
/// `session` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_session_free(session: *mut MiSession) {
    // SAFETY: by the function's contract.
    unsafe { free_boxed(session) }
}

c_function! {
    /// The session's id (`lsid`) as a BSON document.
    ///
    /// # Safety
    /// `session` NULL or live; `out` NULL or writable.
    fn mi_session_id(
        session: mut MiSession,
        out: mut MiBuffer,
    ) {
        let id = ops::session_id(&lock(&session.session))
            .ok_or_else(|| Failure::new(Domain::Client, "the session has ended"))?;
        write_buffer(out, &id)
    }
}

c_function! {
    /// The snapshot time of a snapshot session as `{snapshotTime: Timestamp}`,
    /// or `{}` before its first read (or for a session without `snapshot`).
    ///
    /// # Safety
    /// `session` NULL or live; `out` NULL or writable.
    fn mi_session_snapshot_time(
        session: mut MiSession,
        out: mut MiBuffer,
    ) {
        let time = lock(&session.session).snapshot_time();
        let document = match time {
            Some(time) => bson::doc! { "snapshotTime": time },
            None => Document::new(),
        };
        write_buffer(out, &document)
    }
}

c_function! {
    /// Starts a transaction; the next operation in the session begins it.
    /// Options `{readConcern, writeConcern, maxCommitTimeMS}` or NULL.
    ///
    /// # Safety
    /// `session` NULL or live; `options` NULL or `options_len` bytes.
    fn mi_session_start_transaction(
        session: mut MiSession,
        options: options options_len,
    ) {
        ops::start_transaction(&mut lock(&session.session), options)
    }
}

c_function! {
    /// Commits the session's transaction; options `{timeoutMS}` or NULL
    /// (without one, the session's `defaultTimeoutMS` or the client's).
    ///
    /// # Safety
    /// `session` NULL or live; `options` NULL or `options_len` bytes.
    fn mi_session_commit_transaction(
        session: mut MiSession,
        options: options options_len,
    ) {
        ops::commit_transaction(&mut lock(&session.session), options)
    }
}

c_function! {
    /// Aborts the session's transaction; options as for
    /// `mi_session_commit_transaction`.
    ///
    /// # Safety
    /// `session` NULL or live; `options` NULL or `options_len` bytes.
    fn mi_session_abort_transaction(
        session: mut MiSession,
        options: options options_len,
    ) {
        ops::abort_transaction(&mut lock(&session.session), options)
    }
}

/// The checked common arguments of a collection operation.
struct Target<'a> {
    client: &'a mut MiClient,
    session: Option<SharedSession>,
    db: &'a str,
    coll: &'a str,
}

/// The locked session, if there is one.
fn lock_opt(session: &Option<SharedSession>) -> Option<SessionRef<'_>> {
    session.as_ref().map(lock)
}

/// # Safety
/// Each pointer NULL or valid for the call.
unsafe fn target<'a>(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
    coll: *const c_char,
) -> Result<Target<'a>, Failure> {
    // SAFETY: by the caller's contract.
    let client = unsafe { handle(client, "client")? };
    // SAFETY: by the caller's contract.
    let session = unsafe { session_for(session, client)? };
    // SAFETY: by the caller's contract.
    let (db, coll) = unsafe { (str_arg(db, "db")?, str_arg(coll, "coll")?) };
    client.used = true;
    Ok(Target {
        client,
        session,
        db,
        coll,
    })
}

/// The checked common arguments of a database operation.
struct DbTarget<'a> {
    client: &'a mut MiClient,
    session: Option<SharedSession>,
    db: &'a str,
}

impl DbTarget<'_> {
    fn database(&self) -> crate::Database {
        self.client.client.database(self.db)
    }
}

/// # Safety
/// Each pointer NULL or valid for the call.
unsafe fn db_target<'a>(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
) -> Result<DbTarget<'a>, Failure> {
    // SAFETY: by the caller's contract.
    let ClientTarget { client, session } = unsafe { client_target(client, session)? };
    // SAFETY: by the caller's contract.
    let db = unsafe { str_arg(db, "db")? };
    Ok(DbTarget {
        client,
        session,
        db,
    })
}

/// The checked common arguments of a client operation.
struct ClientTarget<'a> {
    client: &'a mut MiClient,
    session: Option<SharedSession>,
}

/// # Safety
/// Each pointer NULL or valid for the call.
unsafe fn client_target<'a>(
    client: *mut MiClient,
    session: *mut MiSession,
) -> Result<ClientTarget<'a>, Failure> {
    // SAFETY: by the caller's contract.
    let client = unsafe { handle(client, "client")? };
    // SAFETY: by the caller's contract.
    let session = unsafe { session_for(session, client)? };
    client.used = true;
    Ok(ClientTarget { client, session })
}

c_function! {
    /// Inserts one document; `result` gets `{insertedId}`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `document` for `document_len` bytes.
    fn mi_insert_one(
        t: target,
        document: document document_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let reply = ops::insert_one(
            &t.client.client,
            lock_opt(&t.session).as_deref_mut(),
            t.db,
            t.coll,
            document,
            options,
        )?;
        write_buffer(result, &reply)
    }
}

c_function! {
    /// Inserts `count` documents; `result` gets `{insertedIds}`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `documents` and `lengths` hold `count` elements.
    fn mi_insert_many(
        t: target,
        documents: documents lengths count,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let reply = ops::insert_many(
            &t.client.client,
            lock_opt(&t.session).as_deref_mut(),
            t.db,
            t.coll,
            documents,
            options,
        )?;
        write_buffer(result, &reply)
    }
}

/// `mi_update_one` and `mi_update_many` once their arguments are checked.
fn update(
    many: Many,
    t: &Target<'_>,
    (filter, update): (Document, Document),
    options: Option<ops::OptionList>,
    result: &mut MiBuffer,
) -> Result<(), Failure> {
    let reply = ops::update(
        &t.client.client,
        lock_opt(&t.session).as_deref_mut(),
        (t.db, t.coll),
        many,
        filter,
        update,
        options,
    )?;
    write_buffer(result, &reply)
}

c_function! {
    /// Updates the first document matching `filter`; options `{upsert}`;
    /// `result` gets `{matchedCount, modifiedCount, upsertedId?}`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_update_one(
        t: target,
        filter: document filter_len,
        update: document update_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        self::update(Many::One, &t, (filter, update), options, result)
    }
}

c_function! {
    /// Updates every document matching `filter`; as `mi_update_one` otherwise.
    ///
    /// # Safety
    /// As for `mi_update_one`.
    fn mi_update_many(
        t: target,
        filter: document filter_len,
        update: document update_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        self::update(Many::All, &t, (filter, update), options, result)
    }
}

/// `mi_delete_one` and `mi_delete_many` once their arguments are checked.
fn delete(
    many: Many,
    t: &Target<'_>,
    filter: Document,
    options: Option<ops::OptionList>,
    result: &mut MiBuffer,
) -> Result<(), Failure> {
    let reply = ops::delete(
        &t.client.client,
        lock_opt(&t.session).as_deref_mut(),
        (t.db, t.coll),
        many,
        filter,
        options,
    )?;
    write_buffer(result, &reply)
}

c_function! {
    /// Deletes the first document matching `filter`; `result` gets `{deletedCount}`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths.
    fn mi_delete_one(
        t: target,
        filter: document filter_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        delete(Many::One, &t, filter, options, result)
    }
}

c_function! {
    /// Deletes every document matching `filter`; `result` gets `{deletedCount}`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths.
    fn mi_delete_many(
        t: target,
        filter: document filter_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        delete(Many::All, &t, filter, options, result)
    }
}

c_function! {
    /// How many documents match `filter`; options `{limit, skip}`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_count_documents(
        t: target,
        filter: document filter_len,
        options: options options_len,
        count: mut u64,
    ) {
        *count = ops::count_documents(
            &t.client.client,
            lock_opt(&t.session).as_deref_mut(),
            (t.db, t.coll),
            filter,
            options,
        )?;
        Ok(())
    }
}

fn new_cursor(stream: DocumentStream, session: Option<SharedSession>) -> *mut MiCursor {
    Box::into_raw(Box::new(MiCursor {
        stream,
        session,
        current: Vec::new(),
    }))
}

c_function! {
    /// The documents matching `filter` as a cursor; options `{sort, projection,
    /// limit, skip, batchSize}`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_find(
        t: target,
        filter: document filter_len,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let stream = ops::find(
            &t.client.client,
            lock_opt(&t.session).as_deref_mut(),
            (t.db, t.coll),
            filter,
            options,
        )?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    }
}

c_function! {
    /// The results of an aggregation pipeline of `count` stages, as a cursor;
    /// options `{batchSize, allowDiskUse}`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `stages` and `lengths` hold `count` elements.
    fn mi_aggregate(
        t: target,
        stages: documents lengths count,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let pipeline = stages;
        let stream = ops::aggregate(
            &t.client.client,
            lock_opt(&t.session).as_deref_mut(),
            (t.db, t.coll),
            pipeline,
            options,
        )?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    }
}

c_function! {
    /// The cursor's next document, borrowed until the next call on the cursor
    /// or its free; `*document` NULL at the end.
    ///
    /// # Safety
    /// `cursor` NULL or live; `document` and `len` NULL or writable.
    fn mi_cursor_next(
        cursor: mut MiCursor,
        document: mut *const u8,
        len: mut usize,
    ) {
        *document = ptr::null();
        *len = 0;
        cursor.current.clear();
        let next = cursor
            .stream
            .next_document(lock_opt(&cursor.session).as_deref_mut())?;
        if let Some(next) = next {
            cursor.current = next.into_bytes();
            *document = cursor.current.as_ptr();
            *len = cursor.current.len();
        }
        Ok(())
    }
}

c_function! {
    /// The cursor's next document if one is in hand or comes with one
    /// `getMore` (the spec's `tryNext`), else `*document` NULL; for a
    /// tailable cursor NULL means nothing new yet, not the end.
    ///
    /// # Safety
    /// `cursor` NULL or live; `document` and `len` NULL or writable.
    fn mi_cursor_try_next(
        cursor: mut MiCursor,
        document: mut *const u8,
        len: mut usize,
    ) {
        *document = ptr::null();
        *len = 0;
        cursor.current.clear();
        let next = cursor
            .stream
            .try_next_document(lock_opt(&cursor.session).as_deref_mut())?;
        if let Some(next) = next {
            cursor.current = next.into_bytes();
            *document = cursor.current.as_ptr();
            *len = cursor.current.len();
        }
        Ok(())
    }
}

/// Closes the cursor (a `killCursors` if the server still holds it) and
/// frees the handle; NULL is a no-op.
///
/// # Safety
/// `cursor` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_cursor_free(cursor: *mut MiCursor) {
    // SAFETY: by the function's contract.
    unsafe { free_boxed(cursor) }
}

/// Closes the cursor as `mi_cursor_free` does, its `killCursors` (if the
/// server still holds the cursor) within `timeout_ms` milliseconds instead
/// of the `timeoutMS` of the operation that opened it (CSOT lets a close
/// override it), and frees the handle; NULL is a no-op.
///
/// # Safety
/// `cursor` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_cursor_close(cursor: *mut MiCursor, timeout_ms: u64) {
    quiet_boundary(|| {
        if cursor.is_null() {
            return;
        }
        // SAFETY: made by this library with `Box`, not freed yet.
        let cursor = unsafe { Box::from_raw(cursor) };
        let MiCursor {
            stream, session, ..
        } = *cursor;
        stream.close_within(std::time::Duration::from_millis(timeout_ms));
        drop(session);
    })
}

c_function! {
    /// Appends a wrapping library's name, and its version and platform
    /// unless NULL, to the metadata of the handshake of the client's
    /// sockets opened from now on (`Client::append_metadata`).
    ///
    /// # Safety
    /// `client` NULL or live; `name` NULL or NUL-terminated; `version` and
    /// `platform` NULL or NUL-terminated.
    fn mi_client_append_metadata(
        client: mut MiClient,
        name: str,
        version: raw *const c_char,
        platform: raw *const c_char,
    ) {
        // SAFETY: NULL or NUL-terminated by the function's contract.
        let version = unsafe { change_stream::optional_str(version, "version") }?;
        // SAFETY: likewise.
        let platform = unsafe { change_stream::optional_str(platform, "platform") }?;
        let info = crate::options::DriverInfo {
            name: name.to_owned(),
            version: version.map(str::to_owned),
            platform: platform.map(str::to_owned),
        };
        client.client.append_metadata(info).map_err(|e| ops::failure(&e))
    }
}

#[cfg(test)]
mod tests;
