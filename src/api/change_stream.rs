//! [`ChangeStream<T>`]: the changes to a collection, a database or the
//! whole deployment, as they happen (`watch`).
//!
//! Single-threaded like the rest of the driver: nothing polls in the
//! background. Each `getMore` is sent when the caller asks for the next
//! event, and the server holds it for up to `max_await_time` (its default
//! 1 s) before answering with an empty batch:
//!
//! - [`Iterator::next`] sends `getMore`s until an event comes (it blocks
//!   until then, each `getMore` at most `max_await_time`), or an error, or
//!   the stream ends (an `invalidate` event closes it);
//! - [`ChangeStream::next_if_any`] (alias [`ChangeStream::try_next`]) sends
//!   at most one `getMore` and returns `None` when it brought no event: a
//!   bounded wait, after which [`ChangeStream::resume_token`] is the token
//!   to store, even when no event came.
//!
//! The stream resumes by itself, once per error, after an error the spec
//! calls resumable (a network error, a lost cursor, a server error labelled
//! `ResumableChangeStreamError`): it opens a new cursor with the token of
//! the last event (or batch) it handed out, so no event is lost or
//! repeated. Prefer `watch` to an `aggregate` with a `$changeStream` stage,
//! which has no such resume. An event without its `_id` (a pipeline stage
//! removed it) ends the stream with [`ErrorKind::MissingResumeToken`].
//!
//! ```
//! # use mongo_inline::bson::{doc, Document};
//! # use std::time::Duration;
//! # fn main() -> mongo_inline::Result<()> {
//! # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
//! # let client = mongo_inline::Client::with_uri_str(&uri)?;
//! let coll = client.database("docs").collection::<Document>("watched");
//! let mut stream = coll.watch().max_await_time(Duration::from_millis(200)).run()?;
//! coll.insert_one(doc! { "x": 1 }).run()?;
//! let event = stream.next().transpose()?.expect("an event");
//! assert_eq!(event.full_document.unwrap().get_i32("x").unwrap(), 1);
//! // Nothing more: one getMore, at most 200 ms.
//! assert!(stream.next_if_any()?.is_none());
//! let token = stream.resume_token(); // store it to resume later (`resume_after`)
//! # assert!(token.is_some());
//! # Ok(())
//! # }
//! ```

use std::marker::PhantomData;

pub mod event {
    //! The events a change stream returns.
    pub use crate::proto::change_stream::event::*;
}

pub mod options {
    //! The options of `watch` (also in [`crate::options`]).
    pub use crate::proto::change_stream::{
        ChangeStreamOptions, ChangeStreamOptionsBuilder, FullDocumentBeforeChangeType,
        FullDocumentType,
    };
}

use bson::RawDocumentBuf;
use serde::de::DeserializeOwned;

use crate::api::client::Client;
use crate::api::client_session::ClientSession;
use crate::api::coll::Defaults;
use crate::api::cursor::Batches;
use crate::error::{Error, ErrorKind, Result};
use crate::proto::change_stream::event::ResumeToken;
use crate::proto::change_stream::{is_resumable, ChangeStreamState, Opened};
use crate::proto::session::SessionState;
use crate::shell::exec::{Inherited, Target};

/// A change stream: an iterator of `Result<T>`, `T` being
/// [`ChangeStreamEvent`](crate::change_stream::event::ChangeStreamEvent)
/// unless [`with_type`](Self::with_type) said otherwise. See the
/// [module documentation](crate::change_stream) for how it waits and
/// resumes.
pub struct ChangeStream<T> {
    client: Client,
    state: ChangeStreamState,
    /// The handle's read preference, read concern and `timeoutMS`, for
    /// the resuming `aggregate` too.
    defaults: Defaults,
    /// The open cursor; `None` once the stream is closed.
    cursor: Option<Batches>,
    /// The wire version of the cursor's server, by which its `getMore`s'
    /// errors are judged.
    wire_version: i32,
    /// The implicit session of the first `aggregate`, which its `getMore`s
    /// and every resume use.
    session: Option<Box<SessionState>>,
    _events: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for ChangeStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cursor = self.cursor.as_ref();
        f.debug_struct("ChangeStream")
            .field("namespace", &cursor.map(|c| c.spec.ns.to_string()))
            .field("id", &cursor.map(|c| c.spec.id))
            .field("resume_token", &self.state.resume_token())
            .finish_non_exhaustive()
    }
}

impl<T> ChangeStream<T> {
    /// Opens the stream: the first `aggregate`.
    pub(crate) fn open(
        client: &Client,
        state: ChangeStreamState,
        defaults: Defaults,
        lent: Lent<'_>,
    ) -> Result<Self> {
        let mut stream = ChangeStream {
            client: client.clone(),
            state,
            defaults,
            cursor: None,
            wire_version: 0,
            session: None,
            _events: PhantomData,
        };
        let opening = stream.defaults.timeout_only();
        stream.run_aggregate(opening, lent)?;
        Ok(stream)
    }

    /// The settings of one `next` call: `timeoutMS` afresh, one deadline
    /// for its `getMore` and any resume it needs (CSOT).
    fn next_call(&self) -> Result<Inherited<'static>> {
        let deadline = match self.defaults.deadline {
            Some(deadline) => Some(deadline),
            None if self.defaults.timeout.is_some() => Some(
                self.client
                    .state()?
                    .deadline_from_now(self.defaults.timeout),
            ),
            None => None,
        };
        Ok(Inherited {
            timeout: self.defaults.timeout,
            deadline,
            ..Inherited::default()
        })
    }

    /// Sends the `aggregate` (first or resuming) and takes its cursor.
    fn run_aggregate(&mut self, call: Inherited<'_>, lent: Lent<'_>) -> Result<()> {
        let mut aggregate = self.state.aggregate();
        let inherited = Inherited {
            timeout: call.timeout,
            deadline: call.deadline,
            ..self.defaults.inherited()
        };
        let executed = self.client.state()?.execute(
            &mut aggregate,
            session(lent, &mut self.session),
            inherited,
            Target::Select,
        )?;
        if executed.implicit_session.is_some() {
            self.session = executed.implicit_session;
        }
        let opened: Opened = executed.output;
        self.state.opened(&opened);
        self.wire_version = opened.wire_version;
        let mut cursor = Batches::new(
            self.client.clone(),
            opened.spec,
            executed.address,
            executed.generation,
        );
        cursor.timing = crate::api::cursor::Timing {
            timeout: self.defaults.timeout,
            deadline: self.defaults.deadline,
        };
        self.cursor = Some(cursor);
        Ok(())
    }

    /// The token to resume after the last event this stream handed out
    /// (or after the last empty batch): pass it to
    /// [`resume_after`](crate::action::Watch::resume_after) later. To store
    /// every token, iterate with [`next_if_any`](Self::next_if_any) and
    /// read this after each call.
    pub fn resume_token(&self) -> Option<ResumeToken> {
        self.state.resume_token().cloned()
    }

    /// Whether more events may come: false once the server closed the
    /// stream (after an `invalidate` event) or an error ended it.
    pub fn is_alive(&self) -> bool {
        self.cursor
            .as_ref()
            .is_some_and(|c| !c.spec.batch.is_empty() || c.spec.id != 0)
    }

    /// Reads the events as `D` instead.
    pub fn with_type<D>(mut self) -> ChangeStream<D> {
        ChangeStream {
            client: self.client.clone(),
            state: self.state.clone(),
            defaults: self.defaults.clone(),
            cursor: self.cursor.take(),
            wire_version: self.wire_version,
            session: self.session.take(),
            _events: PhantomData,
        }
    }

    /// Closes the cursor on its server; the stream ends.
    fn close(&mut self, lent: Lent<'_>) {
        if let Some(mut cursor) = self.cursor.take() {
            cursor.kill(session(lent, &mut self.session));
        }
        if let (Some(session), Ok(mut state)) = (self.session.take(), self.client.state()) {
            state.check_in(Some(session));
        }
    }

    /// One `getMore`; after a resumable error, one resume instead.
    fn get_more(&mut self, mut lent: Lent<'_>) -> Result<()> {
        if self.cursor.is_none() {
            return Ok(());
        }
        let call = self.next_call()?;
        let Some(cursor) = self.cursor.as_mut() else {
            return Ok(());
        };
        match cursor.fetch_batch(session(lent.as_deref_mut(), &mut self.session), call) {
            Ok(()) => {
                self.state.batch_received(&cursor.spec);
                Ok(())
            }
            Err(error) if is_resumable(&error, self.wire_version) => {
                self.resume(call, lent.as_deref_mut())?;
                self.get_more_after_resume(call, lent)
            }
            // Out of time: the stream stays; the next call resumes if the
            // socket went with the timeout.
            Err(error) if matches!(*error.kind, ErrorKind::Timeout { .. }) => Err(error),
            Err(error) => {
                self.close(lent);
                Err(error)
            }
        }
    }

    /// The `getMore` the resumed stream owes the call that resumed it, when
    /// the new `aggregate` brought no event; under the same deadline.
    fn get_more_after_resume(
        &mut self,
        call: Inherited<'static>,
        mut lent: Lent<'_>,
    ) -> Result<()> {
        let Some(cursor) = self.cursor.as_mut() else {
            return Ok(());
        };
        if !cursor.spec.batch.is_empty() || cursor.spec.id == 0 {
            return Ok(());
        }
        match cursor.fetch_batch(session(lent.as_deref_mut(), &mut self.session), call) {
            Ok(()) => {
                self.state.batch_received(&cursor.spec);
                Ok(())
            }
            Err(error) if matches!(*error.kind, ErrorKind::Timeout { .. }) => Err(error),
            Err(error) if is_resumable(&error, self.wire_version) => Err(error),
            Err(error) => {
                self.close(lent);
                Err(error)
            }
        }
    }

    /// The spec's resume process: the old cursor killed where it lives
    /// (errors ignored), then a new `aggregate` from the cached token,
    /// through server selection, in the same session. An error of that
    /// `aggregate` ends the stream.
    fn resume(&mut self, call: Inherited<'static>, mut lent: Lent<'_>) -> Result<()> {
        if let Some(mut old) = self.cursor.take() {
            old.kill(session(lent.as_deref_mut(), &mut self.session));
        }
        self.state.begin_resume();
        match self.run_aggregate(call, lent.as_deref_mut()) {
            Ok(()) => Ok(()),
            Err(error) => {
                self.close(lent);
                Err(error)
            }
        }
    }
}

impl<T: DeserializeOwned> ChangeStream<T> {
    /// The next event of the batch in hand, if any.
    fn buffered(&mut self, lent: Lent<'_>) -> Result<Option<T>> {
        let Some(cursor) = self.cursor.as_mut() else {
            return Ok(None);
        };
        let Some(event) = cursor.spec.pop_front::<RawDocumentBuf>() else {
            return Ok(None);
        };
        let event = event?;
        if let Err(error) = self.state.document_returned(&event, &cursor.spec) {
            self.close(lent);
            return Err(error);
        }
        bson::from_slice(event.as_bytes()).map(Some).map_err(|e| {
            Error::deserialization("a change event does not match the stream's type", e)
        })
    }

    /// The next event if one is in hand or comes with one `getMore`, else
    /// `None` at once (after at most `max_await_time` on the server): the
    /// bounded wait. [`resume_token`](Self::resume_token) is then up to
    /// date, whether an event came or not.
    pub fn next_if_any(&mut self) -> Result<Option<T>> {
        self.next_if_any_in(None)
    }

    /// [`next_if_any`](Self::next_if_any) in the caller's session, if lent.
    fn next_if_any_in(&mut self, mut lent: Lent<'_>) -> Result<Option<T>> {
        if let Some(event) = self.buffered(lent.as_deref_mut())? {
            return Ok(Some(event));
        }
        if !self.is_alive() {
            return Ok(None);
        }
        self.get_more(lent.as_deref_mut())?;
        self.buffered(lent)
    }

    /// Waits for the next event, in the caller's session if lent.
    fn next_in(&mut self, mut lent: Lent<'_>) -> Option<Result<T>> {
        loop {
            match self.next_if_any_in(lent.as_deref_mut()) {
                Ok(Some(event)) => return Some(Ok(event)),
                Ok(None) if !self.is_alive() => return None,
                Ok(None) => {}
                Err(error) => return Some(Err(error)),
            }
        }
    }

    /// [`next_if_any`](Self::next_if_any) under the spec's name (`tryNext`).
    pub fn try_next(&mut self) -> Result<Option<T>> {
        self.next_if_any()
    }
}

impl<T: DeserializeOwned> Iterator for ChangeStream<T> {
    type Item = Result<T>;

    /// Waits for the next event: `getMore`s until one comes, an error, or
    /// the end of the stream (`None`).
    fn next(&mut self) -> Option<Result<T>> {
        self.next_in(None)
    }
}

impl<T> Drop for ChangeStream<T> {
    fn drop(&mut self) {
        // A session stream's session is no longer at hand: the killCursors
        // goes without it, as a session cursor's does.
        self.close(None);
    }
}

/// The caller's explicit session, lent for one call of a
/// [`SessionChangeStream`]; `None` for a [`ChangeStream`], which uses its
/// own implicit one.
type Lent<'s> = Option<&'s mut SessionState>;

/// The session a command of the stream goes in: the lent one, else the
/// stream's implicit one.
fn session<'s>(
    lent: Lent<'s>,
    own: &'s mut Option<Box<SessionState>>,
) -> Option<&'s mut SessionState> {
    match lent {
        Some(lent) => Some(lent),
        None => own.as_deref_mut(),
    }
}

/// A change stream opened in an explicit session
/// ([`Watch::session`](crate::action::Watch::session)): its `aggregate`, every
/// `getMore` and any resume go in that session, which each call takes, as
/// a [`SessionCursor`](crate::SessionCursor) does. Dropping it closes the
/// cursor without the session.
pub struct SessionChangeStream<T> {
    stream: ChangeStream<T>,
}

impl<T> std::fmt::Debug for SessionChangeStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.stream.fmt(f)
    }
}

impl<T> SessionChangeStream<T> {
    /// Opens the stream: the first `aggregate`, in `session`.
    pub(crate) fn open(
        client: &Client,
        state: ChangeStreamState,
        defaults: Defaults,
        session: &mut ClientSession,
    ) -> Result<Self> {
        let stream = ChangeStream::open(client, state, defaults, Some(session.state_mut()))?;
        Ok(SessionChangeStream { stream })
    }

    /// [`ChangeStream::resume_token`].
    pub fn resume_token(&self) -> Option<ResumeToken> {
        self.stream.resume_token()
    }

    /// [`ChangeStream::is_alive`].
    pub fn is_alive(&self) -> bool {
        self.stream.is_alive()
    }

    /// Reads the events as `D` instead.
    pub fn with_type<D>(self) -> SessionChangeStream<D> {
        SessionChangeStream {
            stream: self.stream.with_type(),
        }
    }
}

impl<T: DeserializeOwned> SessionChangeStream<T> {
    /// Waits for the next event in `session` (the one the stream was
    /// opened in): `getMore`s until one comes, an error, or the end of the
    /// stream (`Ok(None)`).
    pub fn next(&mut self, session: &mut ClientSession) -> Result<Option<T>> {
        self.stream.next_in(Some(session.state_mut())).transpose()
    }

    /// [`ChangeStream::next_if_any`] in `session`: the next event if one is
    /// in hand or comes with one `getMore`, else `None` at once.
    pub fn next_if_any(&mut self, session: &mut ClientSession) -> Result<Option<T>> {
        self.stream.next_if_any_in(Some(session.state_mut()))
    }
}
