//! Change streams through the C ABI: `mi_watch` opens one on a collection,
//! a database or the whole deployment, and the `mi_change_stream` handle
//! hands out the events as raw BSON, as a cursor does.

use std::ffi::c_char;

use bson::RawDocumentBuf;

use super::error::Failure;
use super::ops::{configure, failure};
use super::{
    client_target, document_list, handle, lock, options_arg, write_buffer, MiBuffer, MiClient,
    MiError, MiSession, SharedSession,
};
use crate::change_stream::event::ResumeToken;
use crate::change_stream::{ChangeStream, SessionChangeStream};
use crate::proto::change_stream::ChangeStreamOptions;

/// `mi_change_stream`: the stream and the event last returned.
pub struct MiChangeStream {
    events: Events,
    current: RawDocumentBuf,
}

/// A stream opened without a session, or in one, which each call locks.
enum Events {
    Implicit(ChangeStream<RawDocumentBuf>),
    InSession(SessionChangeStream<RawDocumentBuf>, SharedSession),
}

impl Events {
    fn next(&mut self) -> crate::Result<Option<RawDocumentBuf>> {
        match self {
            Events::Implicit(stream) => stream.next().transpose(),
            Events::InSession(stream, session) => stream.next(&mut lock(session)),
        }
    }

    fn try_next(&mut self) -> crate::Result<Option<RawDocumentBuf>> {
        match self {
            Events::Implicit(stream) => stream.try_next(),
            Events::InSession(stream, session) => stream.next_if_any(&mut lock(session)),
        }
    }

    fn resume_token(&self) -> Option<ResumeToken> {
        match self {
            Events::Implicit(stream) => stream.resume_token(),
            Events::InSession(stream, _) => stream.resume_token(),
        }
    }

    fn is_alive(&self) -> bool {
        match self {
            Events::Implicit(stream) => stream.is_alive(),
            Events::InSession(stream, _) => stream.is_alive(),
        }
    }
}

/// Opens a change stream on `db`.`coll`, on all of `db` when `coll` is
/// NULL, or on the deployment when `db` is NULL too, in `session` unless it
/// is NULL (then every later call on the stream uses that session); `count`
/// stages follow the `$changeStream` stage; options are
/// `ChangeStreamOptions` (`fullDocument`, `fullDocumentBeforeChange`,
/// `resumeAfter`, `startAfter`, `startAtOperationTime`, `maxAwaitTimeMS`,
/// `batchSize`, `collation`, `comment`, `showExpandedEvents`, ...) and
/// `timeoutMS` (the opening and then each iteration afresh).
///
/// # Safety
/// Pointers NULL or valid; `stages` and `lengths` hold `count` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_watch(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
    coll: *const c_char,
    stages: *const *const u8,
    lengths: *const usize,
    count: usize,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiChangeStream,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract; NULL names are allowed here.
        let (target, db, coll, pipeline, options, out) = unsafe {
            (
                client_target(client, session)?,
                optional_str(db, "db")?,
                optional_str(coll, "coll")?,
                document_list(stages, lengths, count, "stages")?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        let client = &target.client.client;
        // The handles outlive the builder, which borrows their client.
        let database = db.map(|db| client.database(db));
        let collection = match (&database, coll) {
            (Some(db), Some(coll)) => Some(db.collection::<bson::Document>(coll)),
            (None, Some(_)) => return Err(Failure::argument("db", "is NULL but `coll` is not")),
            (_, None) => None,
        };
        let watch = match (&database, &collection) {
            (_, Some(collection)) => collection.watch(),
            (Some(database), None) => database.watch(),
            (None, None) => client.watch(),
        };
        let watch = configure!(watch.pipeline(pipeline), ChangeStreamOptions, options);
        let events = match target.session {
            None => Events::Implicit(watch.run().map_err(|e| failure(&e))?.with_type()),
            Some(shared) => {
                let opened = watch.session(&mut lock(&shared)).run();
                Events::InSession(opened.map_err(|e| failure(&e))?.with_type(), shared)
            }
        };
        *out = Box::into_raw(Box::new(MiChangeStream {
            events,
            current: RawDocumentBuf::new(),
        }));
        Ok(())
    })
}

/// # Safety
/// `ptr` NULL or NUL-terminated.
pub(super) unsafe fn optional_str<'a>(
    ptr: *const c_char,
    name: &str,
) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: by the caller's contract.
    unsafe { super::str_arg(ptr, name) }.map(Some)
}

/// Hands out `event` (borrowed until the next call on the stream), or NULL.
fn hand_out(
    stream: &mut MiChangeStream,
    event: Option<RawDocumentBuf>,
    document: &mut *const u8,
    len: &mut usize,
) {
    *document = std::ptr::null();
    *len = 0;
    if let Some(event) = event {
        stream.current = event;
        *document = stream.current.as_bytes().as_ptr();
        *len = stream.current.as_bytes().len();
    }
}

c_function! {
    /// Waits for the next event (`getMore`s of up to `maxAwaitTimeMS` each,
    /// until one comes); `*document` is NULL once the stream has ended (an
    /// `invalidate`). The event is borrowed until the next call on the stream.
    ///
    /// # Safety
    /// `stream` NULL or live; `document` and `len` NULL or writable.
    fn mi_change_stream_next(
        stream: mut MiChangeStream,
        document: mut *const u8,
        len: mut usize,
    ) {
        let event = stream.events.next().map_err(|e| failure(&e))?;
        hand_out(stream, event, document, len);
        Ok(())
    }
}

c_function! {
    /// The next event if one is in hand or comes with one `getMore` (waiting
    /// at most `maxAwaitTimeMS` on the server), else `*document` NULL at once:
    /// the bounded wait (the spec's `tryNext`).
    ///
    /// # Safety
    /// `stream` NULL or live; `document` and `len` NULL or writable.
    fn mi_change_stream_try_next(
        stream: mut MiChangeStream,
        document: mut *const u8,
        len: mut usize,
    ) {
        let event = stream.events.try_next().map_err(|e| failure(&e))?;
        hand_out(stream, event, document, len);
        Ok(())
    }
}

c_function! {
    /// The token to resume after the last event handed out: `result` gets
    /// `{resumeToken: token}`, or is left `{NULL, 0}` before there is one.
    /// Pass it later as the `resumeAfter` option of `mi_watch`.
    ///
    /// # Safety
    /// `stream` NULL or live; `result` NULL or writable.
    fn mi_change_stream_resume_token(
        stream: mut MiChangeStream,
        result: mut MiBuffer,
    ) {
        result.data = std::ptr::null_mut();
        result.len = 0;
        match stream.events.resume_token() {
            Some(token) => write_buffer(result, &bson::doc! { "resumeToken": token.0 }),
            None => Ok(()),
        }
    }
}

c_function! {
    /// Whether more events may come: false once the server closed the stream
    /// or an error ended it.
    ///
    /// # Safety
    /// `stream` NULL or live; `alive` NULL or writable.
    fn mi_change_stream_is_alive(
        stream: mut MiChangeStream,
        alive: mut bool,
    ) {
        *alive = stream.events.is_alive();
        Ok(())
    }
}

/// Closes the stream (`killCursors` if the server still holds it) and frees
/// the handle; NULL is a no-op.
///
/// # Safety
/// `stream` NULL or live, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_change_stream_free(stream: *mut MiChangeStream) {
    // SAFETY: by the function's contract.
    unsafe { super::free_boxed(stream) }
}
