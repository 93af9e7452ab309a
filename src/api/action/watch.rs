//! `watch`: the builder of a change stream, on a collection, a database or
//! the client.

use std::marker::PhantomData;
use std::time::Duration;

use bson::{Bson, Document, Timestamp};

use super::option_setters;
use super::{ExplicitSession, ImplicitSession};
use crate::api::change_stream::{ChangeStream, SessionChangeStream};
use crate::api::client::Client;
use crate::api::client_session::ClientSession;
use crate::api::coll::Defaults;
use crate::error::Result;
use crate::proto::change_stream::event::{ChangeStreamEvent, ResumeToken};
use crate::proto::change_stream::{
    ChangeStreamOptions, ChangeStreamState, FullDocumentBeforeChangeType, FullDocumentType,
    WatchTarget,
};
use crate::proto::collation::Collation;
use crate::proto::options::ReadConcern;
use crate::proto::read_preference::SelectionCriteria;

/// `watch`: opens a [`ChangeStream`] of
/// [`ChangeStreamEvent<T>`](crate::change_stream::event::ChangeStreamEvent)
/// (`T` the collection's type; documents on a database or the client).
/// Helpers over an `aggregate` with a `$changeStream` stage, which they
/// prefer for it resumes. The read concern must be `majority` or none.
/// With `.session(..)` the stream is a [`SessionChangeStream`], every
/// command of it in that session.
#[must_use = "nothing is sent until `run`"]
pub struct Watch<'a, T = Document, S = ImplicitSession> {
    client: &'a Client,
    target: WatchTarget,
    defaults: Defaults,
    pipeline: Vec<Document>,
    options: ChangeStreamOptions,
    session: S,
    _events: PhantomData<fn() -> T>,
}

impl<'a, T> Watch<'a, T> {
    pub(crate) fn new(client: &'a Client, target: WatchTarget, defaults: Defaults) -> Self {
        Watch {
            client,
            target,
            defaults,
            pipeline: Vec::new(),
            options: ChangeStreamOptions::default(),
            session: ImplicitSession,
            _events: PhantomData,
        }
    }

    /// Opens the stream in `session`: its `aggregate`, `getMore`s and
    /// resumes all go in it, and the stream is iterated with it.
    pub fn session<'s>(self, session: &'s mut ClientSession) -> Watch<'a, T, ExplicitSession<'s>> {
        Watch {
            client: self.client,
            target: self.target,
            defaults: self.defaults,
            pipeline: self.pipeline,
            options: self.options,
            session: ExplicitSession(session),
            _events: PhantomData,
        }
    }

    /// Opens the stream: runs the `aggregate`; events come with each
    /// `getMore` as the stream is iterated.
    pub fn run(self) -> Result<ChangeStream<ChangeStreamEvent<T>>> {
        let (client, state, defaults, ImplicitSession) = self.checked()?;
        ChangeStream::open(client, state, defaults, None)
    }
}

impl<T> Watch<'_, T, ExplicitSession<'_>> {
    /// Opens the stream in the session: runs the `aggregate`; events come
    /// with each `getMore` as the stream is iterated with the session.
    pub fn run(self) -> Result<SessionChangeStream<ChangeStreamEvent<T>>> {
        let (client, state, defaults, ExplicitSession(session)) = self.checked()?;
        SessionChangeStream::open(client, state, defaults, session)
    }
}

impl<'a, T, S> Watch<'a, T, S> {
    option_setters!(ChangeStreamOptions {
        full_document: FullDocumentType,
        full_document_before_change: FullDocumentBeforeChangeType,
        start_at_operation_time: Timestamp,
        start_after: ResumeToken,
        max_await_time: Duration,
        batch_size: u32,
        collation: Collation,
        read_concern: ReadConcern,
        selection_criteria: SelectionCriteria,
        show_expanded_events: bool,
        comment: Bson,
    });

    /// Sets this stream's `timeoutMS` (client-side operations timeout),
    /// overriding the handle's: it bounds the opening `aggregate`, then
    /// each `next` call afresh, a resume included; a `getMore` waits at
    /// most `min(max_await_time, time left)`. `max_await_time` must be
    /// less than a non-zero timeout. After a `next` that timed out, the
    /// stream stays open and the next call resumes it; when the timeout
    /// comes before any event, close the stream and open one with a higher
    /// timeout, as the server could not catch up with its oplog in time.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.defaults = self.defaults.with_operation_timeout(Some(timeout));
        self
    }

    /// Stages after the `$changeStream` stage (`$match`, `$project`,
    /// `$addFields`, `$replaceRoot`, `$redact`); they must keep `_id`.
    pub fn pipeline(mut self, value: impl IntoIterator<Item = Document>) -> Self {
        self.pipeline = value.into_iter().collect();
        self
    }

    /// Starts after the event of this token (`None`: from now).
    pub fn resume_after(mut self, value: impl Into<Option<ResumeToken>>) -> Self {
        self.options.resume_after = value.into();
        self
    }

    /// What opening the stream needs, its target and timing checked.
    fn checked(self) -> Result<(&'a Client, ChangeStreamState, Defaults, S)> {
        if let WatchTarget::Collection(ns) = &self.target {
            ns.check()?;
        }
        if let WatchTarget::Database(db) = &self.target {
            crate::proto::operation::check_database_name(db)?;
        }
        crate::proto::cursor_timeout::CursorRequest {
            timeout: self.defaults.timeout,
            max_await: self.options.max_await_time,
            cursor_type: crate::proto::coll_options::CursorType::TailableAwait,
            ..Default::default()
        }
        .timing()?;
        let state = ChangeStreamState::new(self.target, self.pipeline, self.options);
        Ok((self.client, state, self.defaults, self.session))
    }
}
