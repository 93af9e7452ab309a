//! [`Cursor<T>`]: an iterator over a query's results that fetches further
//! batches from the server and socket that opened it.
//!
//! A cursor is pinned to its socket: the server keeps the cursor's state per
//! process (and, behind a load balancer, per service), so a replacement
//! socket cannot continue it. If the socket is gone, the next batch fails
//! with an error that says so; the query is never silently run again
//! elsewhere. Dropping a cursor the server still holds sends `killCursors`
//! on that socket, if it is still open.

use std::marker::PhantomData;
use std::time::Duration;

use bson::Document;
use serde::de::DeserializeOwned;

use crate::address::ServerAddress;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::exec::{Inherited, Target};
use crate::operation::CursorSpec;
use crate::session::SessionState;

/// The results of a `find`, `aggregate` or listing command.
pub struct Cursor<T> {
    client: Client,
    spec: CursorSpec,
    address: ServerAddress,
    generation: u32,
    /// The implicit session the first batch used; later batches must use it
    /// too, and it goes back to the pool when the cursor is done.
    session: Option<SessionState>,
    /// The `timeoutMS` its handle resolved (client, database, collection):
    /// each `getMore` and the closing `killCursors` get it afresh.
    timeout: Option<Duration>,
    failed: bool,
    _documents: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Cursor<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("namespace", &self.spec.ns.to_string())
            .field("id", &self.spec.id)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl<T> Cursor<T> {
    pub(crate) fn new(
        client: Client,
        spec: CursorSpec,
        address: ServerAddress,
        generation: u32,
        session: Option<SessionState>,
    ) -> Self {
        let mut cursor = Cursor {
            client,
            spec,
            address,
            generation,
            session,
            timeout: None,
            failed: false,
            _documents: PhantomData,
        };
        cursor.release_session_if_done();
        cursor
    }

    /// This cursor with the `timeoutMS` of the handle that opened it.
    pub(crate) fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// The server-side cursor id; 0 once the server has closed it.
    pub fn id(&self) -> i64 {
        self.spec.id
    }

    /// The server the cursor lives on.
    pub fn address(&self) -> &ServerAddress {
        &self.address
    }

    fn fetch_next_batch(&mut self) -> Result<()> {
        let Some(mut get_more) = self.spec.get_more() else {
            return Ok(());
        };
        let mut state = self.client.state();
        let executed = state.execute(
            &mut get_more,
            self.session.as_mut(),
            Inherited {
                timeout: self.timeout,
                ..Inherited::default()
            },
            Target::Pinned {
                address: self.address.clone(),
                generation: self.generation,
            },
        )?;
        drop(state);
        self.spec.next_batch(executed.output)?;
        self.release_session_if_done();
        Ok(())
    }

    /// Once the server has closed the cursor, its session can serve others.
    fn release_session_if_done(&mut self) {
        if !self.spec.has_more() {
            let session = self.session.take();
            if session.is_some() {
                self.client.state().check_in(session);
            }
        }
    }
}

impl<T: DeserializeOwned> Iterator for Cursor<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Result<T>> {
        if self.failed {
            return None;
        }
        loop {
            if let Some(document) = self.spec.pop_front() {
                return Some(deserialize(document));
            }
            if !self.spec.has_more() {
                return None;
            }
            if let Err(e) = self.fetch_next_batch() {
                // The server's cursor may be unreachable (its socket is
                // gone): stop, and do not pretend more results may follow.
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

fn deserialize<T: DeserializeOwned>(document: Document) -> Result<T> {
    bson::from_document(document).map_err(|e| {
        Error::invalid_argument(format!(
            "a document from the server does not match the cursor's type: {e}"
        ))
    })
}

impl<T> Drop for Cursor<T> {
    fn drop(&mut self) {
        if self.spec.id != 0 {
            if let Some(mut kill) = self.spec.kill_cursors() {
                let mut state = self.client.state();
                // Only on the cursor's own socket, and only if it is still
                // open: a killCursors on another socket would be refused,
                // and one on a dead socket cannot be sent. Errors are
                // ignored; the server times the cursor out anyway.
                let _ = state.execute(
                    &mut kill,
                    self.session.as_mut(),
                    Inherited {
                        timeout: self.timeout,
                        ..Inherited::default()
                    },
                    Target::Pinned {
                        address: self.address.clone(),
                        generation: self.generation,
                    },
                );
            }
        }
        if let Some(session) = self.session.take() {
            self.client.state().check_in(Some(session));
        }
    }
}
