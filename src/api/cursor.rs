//! [`Cursor<T>`] and [`SessionCursor<T>`]: a query's results, fetching
//! further batches from the server and socket that opened them. A `Cursor`
//! is an iterator with its own implicit session; a `SessionCursor` belongs to
//! an explicit session and is iterated with it.
//!
//! A cursor is pinned to its socket: the server keeps the cursor's state per
//! process (and, behind a load balancer, per service), so a replacement
//! socket cannot continue it. If the socket is gone, the next batch fails
//! with an error that says so; the query is never silently run again
//! elsewhere. Dropping a cursor the server still holds sends `killCursors`
//! on that socket, or, when a `getMore`'s timeout closed it, on a new
//! socket to the same server (killing needs only the server process; not
//! behind a load balancer, where a new socket may reach another service).

use std::marker::PhantomData;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::api::client::Client;
use crate::api::client_session::ClientSession;
use crate::error::Result;
use crate::proto::address::ServerAddress;
use crate::proto::operation::CursorSpec;
use crate::proto::session::SessionState;
use crate::shell::exec::Executed;
use crate::shell::exec::{Inherited, Target};

/// How `timeoutMS` bounds a cursor's `getMore`s.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timing {
    /// The `timeoutMS` of the operation that opened the cursor.
    pub(crate) timeout: Option<Duration>,
    /// The deadline the opening operation shares with every `getMore`
    /// (cursor lifetime, or a GridFS download's); without one each `next`
    /// call gets `timeout` afresh.
    pub(crate) deadline: Option<crate::proto::deadline::Deadline>,
}

/// The server-side cursor and the batch in hand: what both cursor kinds
/// share. Each session-taking method takes the session the cursor belongs
/// to, which every `getMore` and the `killCursors` must use.
pub(crate) struct Batches {
    client: Client,
    pub(crate) spec: Box<CursorSpec>,
    address: ServerAddress,
    generation: u32,
    /// How `timeoutMS` bounds the `getMore`s (CSOT's `timeoutMode`).
    pub(crate) timing: Timing,
    failed: bool,
    /// Whether a `getMore` timed out, which closed the cursor's socket
    /// (see [`Batches::close`]).
    timed_out: bool,
    /// The process that opened the cursor: a forked child holds a copy of
    /// it, whose close must not kill the parent's cursor.
    pid: u32,
    /// The document `advance` moved to, for `current`.
    current: Option<bson::RawDocumentBuf>,
    /// A buffer the reader is done with, for the next `getMore`'s reply.
    spare_buffer: Vec<u8>,
}

impl Batches {
    pub(crate) fn new(
        client: Client,
        spec: Box<CursorSpec>,
        address: ServerAddress,
        generation: u32,
    ) -> Self {
        Batches {
            client,
            spec,
            address,
            generation,
            timing: Timing::default(),
            failed: false,
            timed_out: false,
            pid: std::process::id(),
            current: None,
            spare_buffer: Vec::new(),
        }
    }

    /// Moves to the next document, kept as bytes for [`Self::current`];
    /// false when there are no more.
    fn advance(&mut self, session: Option<&mut SessionState>) -> Result<bool> {
        self.current = None;
        match self.next_document::<bson::RawDocumentBuf>(session) {
            Some(Ok(document)) => {
                self.current = Some(document);
                Ok(true)
            }
            Some(Err(error)) => Err(error),
            None => Ok(false),
        }
    }

    /// The document the last successful `advance` moved to.
    fn current(&self) -> &bson::RawDocument {
        // The official driver's contract: `current` follows an `advance`
        // that returned true; anything else is a bug in the caller.
        self.current
            .as_deref()
            .expect("current() called without a preceding advance() that returned true")
    }

    /// The current document as `T`, borrowing from its bytes where `T` does.
    fn deserialize_current<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T> {
        bson::from_slice(self.current().as_bytes()).map_err(|e| {
            crate::error::Error::deserialization(
                "a document from the server does not match the cursor's type",
                e,
            )
        })
    }

    /// Whether a document may still follow: one in hand, or a server
    /// cursor that can send more.
    fn has_next(&self) -> bool {
        !self.failed && (!self.spec.batch.is_empty() || self.spec.has_more())
    }

    /// The settings of the getMores of one `next` call: the cursor's
    /// deadline (its lifetime's), or `timeoutMS` afresh for the call
    /// (iteration), shared by every getMore the call sends.
    fn next_call(&self) -> Result<Inherited<'static>> {
        let deadline = match self.timing.deadline {
            Some(deadline) => Some(deadline),
            None if self.timing.timeout.is_some() => {
                Some(self.client.state()?.deadline_from_now(self.timing.timeout))
            }
            None => None,
        };
        Ok(Inherited {
            timeout: self.timing.timeout,
            deadline,
            ..Inherited::default()
        })
    }

    /// The settings of the closing killCursors: `timeout` when the close
    /// sets one, else `timeoutMS` afresh, even when the cursor's lifetime
    /// has run out (CSOT).
    fn closing(&self, timeout: Option<Duration>) -> Inherited<'static> {
        Inherited {
            timeout: timeout.or(self.timing.timeout),
            ..Inherited::default()
        }
    }

    fn target(&self) -> Target {
        Target::Pinned {
            address: self.address.clone(),
            generation: self.generation,
        }
    }

    /// The next document as `T`, fetching a batch when the one in hand is
    /// used up.
    fn next_document<T: DeserializeOwned + 'static>(
        &mut self,
        mut session: Option<&mut SessionState>,
    ) -> Option<Result<T>> {
        if self.failed {
            return None;
        }
        let mut call = None;
        loop {
            if let Some(document) = self.spec.pop_front() {
                return Some(document);
            }
            if !self.spec.has_more() {
                return None;
            }
            let inherited = match call {
                Some(inherited) => inherited,
                None => match self.next_call() {
                    Ok(inherited) => *call.insert(inherited),
                    Err(e) => return Some(Err(e)),
                },
            };
            if let Err(e) = self.fetch_batch(session.as_deref_mut(), inherited) {
                // The server's cursor may be unreachable (its socket is
                // gone): stop, and do not pretend more results may follow.
                self.fail(&e);
                return Some(Err(e));
            }
        }
    }

    /// The next document as `T` after at most one `getMore`: `Ok(None)`
    /// when that batch was empty (or the cursor is done).
    fn next_if_any<T: DeserializeOwned + 'static>(
        &mut self,
        session: Option<&mut SessionState>,
    ) -> Result<Option<T>> {
        if self.failed {
            return Ok(None);
        }
        if let Some(document) = self.spec.pop_front() {
            return document.map(Some);
        }
        if !self.spec.has_more() {
            return Ok(None);
        }
        let inherited = self.next_call()?;
        if let Err(e) = self.fetch_batch(session, inherited) {
            self.fail(&e);
            return Err(e);
        }
        self.spec.pop_front().transpose()
    }

    /// Ends the iteration after `error` from a `getMore`.
    fn fail(&mut self, error: &crate::error::Error) {
        self.failed = true;
        self.timed_out = matches!(error.kind(), crate::error::ErrorKind::Timeout { .. })
            || error.is_network_timeout();
    }

    /// Fetches the next batch under `inherited` (one `next` call's).
    pub(crate) fn fetch_batch(
        &mut self,
        session: Option<&mut SessionState>,
        inherited: Inherited<'static>,
    ) -> Result<()> {
        let Some(mut get_more) = self.spec.get_more() else {
            return Ok(());
        };
        let target = self.target();
        let mut state = self.client.state()?;
        if self.spare_buffer.capacity() > 0 {
            state.offer_read_buffer(std::mem::take(&mut self.spare_buffer));
        }
        let executed = state.execute(&mut get_more, session, inherited, target)?;
        state.check_in(executed.implicit_session);
        drop(state);
        self.spec.next_batch(executed.output)
    }

    /// Closes a cursor the server still holds, within `timeout` if given
    /// (else the cursor's `timeoutMS`, afresh): on the cursor's own socket,
    /// or, when a `getMore`'s timeout closed that socket, on a new socket
    /// to the same server (CSOT: "drivers make a good-faith effort to close
    /// the server-side cursor even though the timeout has expired"). Only
    /// then: a socket closed by `Client::close` or a fork, or by a network
    /// error, is not replaced for a killCursors. Errors are ignored; the
    /// server times the cursor out anyway.
    pub(crate) fn close(&mut self, session: Option<&mut SessionState>, timeout: Option<Duration>) {
        let target = if self.timed_out && self.pid == std::process::id() {
            Target::Closing {
                address: self.address.clone(),
                generation: self.generation,
            }
        } else {
            self.target()
        };
        self.kill_on(session, self.closing(timeout), target);
    }

    /// Kills a cursor the server still holds only on its own socket, and
    /// only if that is still open: a change stream's resume, which the
    /// change-streams spec has kill the old cursor where it lives. Errors
    /// are ignored.
    pub(crate) fn kill(&mut self, session: Option<&mut SessionState>) {
        self.kill_on(session, self.closing(None), self.target());
    }

    fn kill_on(
        &mut self,
        session: Option<&mut SessionState>,
        inherited: Inherited<'static>,
        target: Target,
    ) {
        if self.spec.id == 0 {
            return;
        }
        if let Some(mut kill) = self.spec.kill_cursors() {
            // Sent once, whatever comes of it.
            self.spec.id = 0;
            // Inside one of the client's callbacks the state is out of
            // reach: the server times the cursor out.
            if let Ok(mut state) = self.client.state() {
                if let Ok(executed) = state.execute(&mut kill, session, inherited, target) {
                    state.check_in(executed.implicit_session);
                }
            }
        }
    }
}

/// The results of a `find`, `aggregate` or listing command run without an
/// explicit session: an iterator of `Result<T>`.
pub struct Cursor<T> {
    batches: Batches,
    /// The implicit session the first batch used; later batches must use it
    /// too, and it goes back to the pool when the cursor is done.
    session: Option<Box<SessionState>>,
    _documents: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Cursor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("namespace", &self.batches.spec.ns.to_string())
            .field("id", &self.batches.spec.id)
            .field("address", &self.batches.address)
            .finish_non_exhaustive()
    }
}

impl<T> Cursor<T> {
    pub(crate) fn new(
        client: Client,
        spec: Box<CursorSpec>,
        address: ServerAddress,
        generation: u32,
        session: Option<Box<SessionState>>,
    ) -> Self {
        let mut cursor = Cursor {
            batches: Batches::new(client, spec, address, generation),
            session,
            _documents: PhantomData,
        };
        cursor.release_session_if_done();
        cursor
    }

    /// A cursor over what an executed cursor-opening operation returned.
    pub(crate) fn from_executed(client: Client, executed: Executed<Box<CursorSpec>>) -> Self {
        Cursor::new(
            client,
            executed.output,
            executed.address,
            executed.generation,
            executed.implicit_session,
        )
    }

    /// This cursor with the timing its opening operation settled on.
    pub(crate) fn with_timing(mut self, timing: Timing) -> Self {
        self.batches.timing = timing;
        self
    }

    /// The server-side cursor id; 0 once the server has closed it.
    pub fn id(&self) -> i64 {
        self.batches.spec.id
    }

    /// Takes the bytes of a document this cursor returned, once read, to
    /// receive the next batch in (GridFS's download: one chunk-sized
    /// buffer for the whole file, not a new one per chunk).
    pub(crate) fn recycle_buffer(&mut self, bytes: Vec<u8>) {
        self.batches.spare_buffer = bytes;
    }

    /// The server the cursor lives on.
    pub fn address(&self) -> &ServerAddress {
        &self.batches.address
    }

    /// Moves to the next result, fetching a batch when the one in hand is
    /// used up; false when there are no more. Read it with
    /// [`current`](Self::current) or
    /// [`deserialize_current`](Self::deserialize_current).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("advance");
    /// coll.drop().run()?;
    /// coll.insert_many([doc! { "n": 1 }, doc! { "n": 2 }]).run()?;
    /// let mut cursor = coll.find(doc! {}).sort(doc! { "n": 1 }).run()?;
    /// let mut total = 0;
    /// while cursor.advance()? {
    ///     total += cursor.current().get_i32("n").unwrap();
    /// }
    /// assert_eq!(total, 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn advance(&mut self) -> Result<bool> {
        let advanced = self.batches.advance(self.session.as_deref_mut());
        self.release_session_if_done();
        advanced
    }

    /// The result [`advance`](Self::advance) moved to, as raw BSON.
    ///
    /// # Panics
    /// When the last `advance` did not return `Ok(true)`, as the official
    /// driver's.
    pub fn current(&self) -> &bson::RawDocument {
        self.batches.current()
    }

    /// The result [`advance`](Self::advance) moved to, as `T`; `T` may
    /// borrow from the cursor (`&str` fields).
    ///
    /// # Panics
    /// When the last `advance` did not return `Ok(true)`.
    pub fn deserialize_current<'a>(&'a self) -> Result<T>
    where
        T: serde::Deserialize<'a>,
    {
        self.batches.deserialize_current()
    }

    /// Whether more results may follow.
    pub fn has_next(&self) -> bool {
        self.batches.has_next()
    }

    /// The next result after at most one `getMore` (the spec's `tryNext`),
    /// where [`Iterator::next`] sends `getMore`s until a result comes: for
    /// a tailable cursor, `Ok(None)` means nothing new yet and the cursor
    /// is still open ([`has_next`](Self::has_next)); on a cursor the
    /// server has closed it means the results are over.
    pub fn next_if_any(&mut self) -> Result<Option<T>>
    where
        T: DeserializeOwned + 'static,
    {
        let next = self.batches.next_if_any(self.session.as_deref_mut());
        self.release_session_if_done();
        next
    }

    /// [`next_if_any`](Self::next_if_any) as the reply's bytes, whatever
    /// `T` is: the C ABI's `mi_cursor_try_next`.
    #[cfg(feature = "capi")]
    pub(crate) fn next_if_any_raw(&mut self) -> Result<Option<bson::RawDocumentBuf>> {
        let next = self.batches.next_if_any(self.session.as_deref_mut());
        self.release_session_if_done();
        next
    }

    /// Once the server has closed the cursor, its session can serve others.
    fn release_session_if_done(&mut self) {
        if !self.batches.spec.has_more() {
            let session = self.session.take();
            if let (Some(_), Ok(mut state)) = (&session, self.batches.client.state()) {
                state.check_in(session);
            }
        }
    }
}

impl<T> Cursor<T> {
    /// Closes the cursor now, its `killCursors` (if the server still holds
    /// the cursor) bounded by `timeout` instead of the `timeoutMS` of the
    /// operation that opened it, as CSOT lets a `close` override it.
    /// Dropping the cursor closes it with that `timeoutMS`, afresh.
    /// Errors are ignored, as on drop: the server times the cursor out.
    pub fn close_with_timeout(mut self, timeout: Duration) {
        self.batches
            .close(self.session.as_deref_mut(), Some(timeout));
    }
}

impl<T: DeserializeOwned + 'static> Iterator for Cursor<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        let next = self.batches.next_document(self.session.as_deref_mut());
        self.release_session_if_done();
        next
    }
}

impl<T> Drop for Cursor<T> {
    fn drop(&mut self) {
        self.batches.close(self.session.as_deref_mut(), None);
        if let (Some(session), Ok(mut state)) = (self.session.take(), self.batches.client.state()) {
            state.check_in(Some(session));
        }
    }
}

/// The results of a `find`, `aggregate` or listing command run in an
/// explicit session (`.session(&mut session)`): every further batch is
/// fetched in that session, so it is iterated with it, like the official
/// driver's `SessionCursor`:
///
/// ```
/// use mongo_inline::bson::{doc, Document};
/// use mongo_inline::Client;
///
/// # fn main() -> mongo_inline::Result<()> {
/// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
/// let client = Client::with_uri_str(&uri)?;
/// let coll = client.database("docs").collection::<Document>("session_cursor");
/// coll.drop().run()?;
/// coll.insert_many((0..5).map(|n| doc! { "n": n })).run()?;
///
/// let mut session = client.start_session().run()?;
/// let mut cursor = coll.find(doc! {}).batch_size(2).session(&mut session).run()?;
/// let mut seen = 0;
/// while let Some(document) = cursor.next(&mut session) {
///     document?;
///     seen += 1;
/// }
/// assert_eq!(seen, 5);
/// # Ok(())
/// # }
/// ```
pub struct SessionCursor<T> {
    batches: Batches,
    _documents: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for SessionCursor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCursor")
            .field("namespace", &self.batches.spec.ns.to_string())
            .field("id", &self.batches.spec.id)
            .field("address", &self.batches.address)
            .finish_non_exhaustive()
    }
}

impl<T> SessionCursor<T> {
    /// A cursor over what an operation executed in an explicit session returned.
    pub(crate) fn from_executed(
        client: Client,
        executed: Executed<Box<CursorSpec>>,
        timing: Timing,
    ) -> Self {
        let mut batches = Batches::new(
            client,
            executed.output,
            executed.address,
            executed.generation,
        );
        batches.timing = timing;
        SessionCursor {
            batches,
            _documents: PhantomData,
        }
    }

    /// The server-side cursor id; 0 once the server has closed it.
    pub fn id(&self) -> i64 {
        self.batches.spec.id
    }

    /// The server the cursor lives on.
    pub fn address(&self) -> &ServerAddress {
        &self.batches.address
    }

    /// Moves to the next result, fetching a batch in `session` (the session
    /// that opened the cursor) when the one in hand is used up; false when
    /// there are no more.
    pub fn advance(&mut self, session: &mut ClientSession) -> Result<bool> {
        self.batches.advance(Some(session.state_mut()))
    }

    /// The result [`advance`](Self::advance) moved to, as raw BSON.
    ///
    /// # Panics
    /// When the last `advance` did not return `Ok(true)`.
    pub fn current(&self) -> &bson::RawDocument {
        self.batches.current()
    }

    /// The result [`advance`](Self::advance) moved to, as `T`.
    ///
    /// # Panics
    /// When the last `advance` did not return `Ok(true)`.
    pub fn deserialize_current<'a>(&'a self) -> Result<T>
    where
        T: serde::Deserialize<'a>,
    {
        self.batches.deserialize_current()
    }

    /// [`Cursor::close_with_timeout`]: closes the cursor now, its
    /// `killCursors` bounded by `timeout`; like a drop, without the
    /// session.
    pub fn close_with_timeout(mut self, timeout: Duration) {
        self.batches.close(None, Some(timeout));
    }
}

impl<T: DeserializeOwned + 'static> SessionCursor<T> {
    /// The next result, fetching a batch in `session` (the session that
    /// opened the cursor) when the one in hand is used up.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self, session: &mut ClientSession) -> Option<Result<T>> {
        self.batches.next_document(Some(session.state_mut()))
    }

    /// [`Cursor::next_if_any`] in `session`: the next result after at most
    /// one `getMore`, `Ok(None)` when that batch was empty.
    pub fn next_if_any(&mut self, session: &mut ClientSession) -> Result<Option<T>> {
        self.batches.next_if_any(Some(session.state_mut()))
    }

    /// An iterator over the remaining results, borrowing `session` (the
    /// session that opened the cursor) while it runs.
    pub fn iter<'session>(
        &mut self,
        session: &'session mut ClientSession,
    ) -> SessionCursorIter<'_, 'session, T> {
        SessionCursorIter {
            cursor: self,
            session,
        }
    }
}

impl<T> Drop for SessionCursor<T> {
    fn drop(&mut self) {
        // The session is no longer at hand: the killCursors goes without it,
        // as the official driver's does.
        self.batches.close(None, None);
    }
}

/// An iterator over a [`SessionCursor`] with its session; see
/// [`SessionCursor::iter`]. The two borrows have their own lifetimes, as in
/// the official crate, so a function can return an iterator over a cursor
/// it was lent with a session that lives longer.
pub struct SessionCursorIter<'cursor, 'session, T = bson::Document> {
    cursor: &'cursor mut SessionCursor<T>,
    session: &'session mut ClientSession,
}

impl<T: DeserializeOwned + 'static> Iterator for SessionCursorIter<'_, '_, T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        self.cursor.next(self.session)
    }
}

impl<T> SessionCursor<T> {
    /// [`next_if_any`](Self::next_if_any) as the reply's bytes, whatever
    /// `T` is: the C ABI's `mi_cursor_try_next`.
    #[cfg(feature = "capi")]
    pub(crate) fn next_if_any_raw(
        &mut self,
        session: &mut ClientSession,
    ) -> Result<Option<bson::RawDocumentBuf>> {
        self.batches.next_if_any(Some(session.state_mut()))
    }
}
