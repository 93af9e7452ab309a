//! `mi_session_with_transaction`: the convenient transactions API with a C
//! callback, and `mi_error_new` for the callback's own failures.
//!
//! The Rust retry loop (`start_transaction().and_run`) holds the session
//! while the callback runs, and the callback uses the session through its
//! `mi_session` handle; so for the callback's duration the session is
//! *lent*: [`lock`](super::lock) on this thread hands out the loop's
//! `&mut ClientSession` for that handle instead of taking its mutex (which
//! the loop holds, and which would deadlock).

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use super::error::{Domain, Failure, MiError};
use super::ops::{self, failure};
use super::{handle, lock, options_arg, MiSession};
use crate::ClientSession;

/// `mi_transaction_callback`: runs the transaction's operations with
/// `session`; returns NULL to commit, or an `mi_error` (which the library
/// takes over and frees) to abort.
pub type MiTransactionCallback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, session: *mut MiSession) -> *mut MiError>;

/// The session lent to a running callback: the mutex of its handle (to
/// recognise it) and the loop's session.
type Lent = Option<(*const Mutex<ClientSession>, *mut ClientSession)>;

thread_local! {
    static LENT: Cell<Lent> = const { Cell::new(None) };
}

/// The lent session if `key` is the mutex of the session a callback on this
/// thread is running in.
pub(crate) fn lent(key: *const Mutex<ClientSession>) -> Option<*mut ClientSession> {
    LENT.with(|lent| match lent.get() {
        Some((lent_key, session)) if lent_key == key => Some(session),
        _ => None,
    })
}

/// The callback's error, carried through the Rust retry loop (which reads
/// its labels: `TransientTransactionError` retries) and back to C as it was.
#[derive(Debug)]
pub(crate) struct CallbackFailure(pub(crate) Failure);

/// Takes over an `mi_error` a callback returned.
///
/// # Safety
/// `error` is non-NULL and a live error of this library.
unsafe fn take_error(error: *mut MiError) -> Failure {
    // SAFETY: a live error by contract.
    let e = unsafe { &*error };
    let text = |p: *const c_char| {
        // SAFETY: NUL-terminated strings the library made.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    let labels = if e.labels.is_null() {
        Vec::new()
    } else {
        // SAFETY: `label_count` label pointers.
        unsafe { std::slice::from_raw_parts(e.labels, e.label_count) }
            .iter()
            .map(|&l| text(l))
            .collect()
    };
    let details = (!e.details.is_null())
        .then(|| {
            // SAFETY: `details_len` bytes the library wrote.
            let bytes = unsafe { std::slice::from_raw_parts(e.details, e.details_len) };
            bson::Document::from_reader(bytes).ok().map(Box::new)
        })
        .flatten();
    let failure = Failure {
        domain: Domain::from_raw(e.domain),
        code: e.code,
        message: text(e.message),
        labels,
        details,
    };
    // SAFETY: the callback handed the error over; freed once, here.
    unsafe { super::mi_error_free(error) };
    failure
}

/// Runs `callback` in a transaction of `session` and commits it, retrying
/// the whole transaction on `TransientTransactionError` and the commit on
/// `UnknownTransactionCommitResult` for up to 120 seconds, or `timeoutMS`
/// (the options', else the session's `defaultTimeoutMS`, else the
/// client's). Options as for `mi_session_start_transaction`, and
/// `timeoutMS`.
///
/// # Safety
/// `session` NULL or live; `options` NULL or `options_len` bytes;
/// `callback` must not unwind and must not free `session`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_session_with_transaction(
    session: *mut MiSession,
    callback: MiTransactionCallback,
    user_data: *mut c_void,
    options: *const u8,
    options_len: usize,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (handle_ref, options) = unsafe {
            (
                handle(session, "session")?,
                options_arg(options, options_len, "options")?,
            )
        };
        let callback = callback.ok_or_else(|| Failure::argument("callback", "is NULL"))?;
        let (options, timing) = ops::split_timeout(options, false)?;
        let options = ops::transaction_options(options.unwrap_or_default())?;
        let shared = handle_ref.session.clone();
        let key = std::sync::Arc::as_ptr(&shared);
        let mut guard = lock(&shared);
        let run = |s: &mut ClientSession| -> crate::Result<()> {
            let previous = LENT.with(|lent| lent.replace(Some((key, std::ptr::from_mut(s)))));
            // SAFETY: the caller's callback, with its user data and the
            // handle it passed in; a panic cannot come out of C, but one
            // from a Rust callback (the tests) must not skip the restore.
            let returned =
                catch_unwind(AssertUnwindSafe(|| unsafe { callback(user_data, session) }));
            LENT.with(|lent| lent.set(previous));
            match returned {
                Ok(error) if error.is_null() => Ok(()),
                // SAFETY: a non-NULL error the callback hands over.
                Ok(error) => Err(callback_error(unsafe { take_error(error) })),
                Err(panic) => Err(callback_error(Failure::from_panic(panic.as_ref()))),
            }
        };
        let action = guard.start_transaction().with_options(options);
        match timing.timeout {
            Some(timeout) => action.timeout(timeout),
            None => action,
        }
        .and_run(run)
        .map_err(|e| failure(&e))
    })
}

fn callback_error(failure: Failure) -> crate::Error {
    let labels = failure.labels.clone();
    crate::Error::custom(CallbackFailure(failure)).with_labels(labels)
}

/// A new error for a transaction callback to return (domain, code and
/// message as given; an unknown domain becomes `MI_ERROR_CLIENT`).
///
/// # Safety
/// `message` NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_error_new(
    domain: i32,
    code: i32,
    message: *const c_char,
) -> *mut MiError {
    let made = catch_unwind(AssertUnwindSafe(|| {
        let text = if message.is_null() {
            "(no message)".to_string()
        } else {
            // SAFETY: NUL-terminated by contract.
            unsafe { CStr::from_ptr(message) }
                .to_string_lossy()
                .into_owned()
        };
        let mut failure = Failure::new(Domain::from_raw(domain), text);
        failure.code = code;
        failure.into_raw()
    }));
    made.unwrap_or_else(|panic| Failure::from_panic(panic.as_ref()).into_raw())
}
