//! [`Collection<T>`]: the CRUD API over typed documents.
//!
//! Every operation returns a [`crate::action`] builder; its `run`
//! turns the arguments into an [`crate::operation`] value and hands it to
//! the executor through the helpers here; nothing here talks to a socket.
//! Documents are converted with serde through `bson`: methods that write
//! documents need `T: Serialize`, those that read them through a cursor
//! need `T: DeserializeOwned + 'static`, and [`bson::Document`] is the
//! untyped case. The `'static` lets a cursor tell the untyped results
//! apart: a `Document` is built by the driver's own BSON walker and a
//! `RawDocumentBuf` is the bytes, neither through serde.

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::time::Duration;

use bson::Document;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::action;
use crate::api::client::Client;
use crate::api::client_session::ClientSession;
use crate::api::cursor::{Cursor, SessionCursor};
use crate::error::{Error, Result};
use crate::proto::coll_options::IndexModel;
use crate::proto::operation::{
    CollectionWriteModel, CursorSpec, Namespace, Operation, UpdateModifications,
};
use crate::proto::options::{ReadConcern, WriteConcern};
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::results::BulkWriteResult;
use crate::shell::exec::{Inherited, Target};

/// Read and write settings a handle passes to its operations; each level
/// (client, database, collection, operation) may override the one above.
#[derive(Clone, Debug, Default)]
pub(crate) struct Defaults {
    pub(crate) selection_criteria: Option<SelectionCriteria>,
    pub(crate) read_concern: Option<ReadConcern>,
    pub(crate) write_concern: Option<WriteConcern>,
    pub(crate) timeout: Option<Duration>,
    /// Whether `timeout` is the operation's own (a builder's `timeout`), not
    /// a handle's.
    pub(crate) operation_timeout: bool,
    /// A cursor-opening operation's `timeoutMode`.
    pub(crate) timeout_mode: Option<crate::proto::cursor_timeout::TimeoutMode>,
    /// A deadline already running that every operation through the handle
    /// shares instead of starting its own (a GridFS upload or download:
    /// `timeoutMS` bounds the whole stream).
    pub(crate) deadline: Option<crate::proto::deadline::Deadline>,
}

impl Defaults {
    /// The handle settings of database or collection options, nothing else.
    pub(crate) fn of_handle(
        selection_criteria: Option<SelectionCriteria>,
        read_concern: Option<ReadConcern>,
        write_concern: Option<WriteConcern>,
    ) -> Defaults {
        Defaults {
            selection_criteria,
            read_concern,
            write_concern,
            ..Defaults::default()
        }
    }

    /// `self` with anything `more_specific` sets taking precedence.
    pub(crate) fn overridden_by(&self, more_specific: &Defaults) -> Defaults {
        Defaults {
            selection_criteria: more_specific
                .selection_criteria
                .clone()
                .or_else(|| self.selection_criteria.clone()),
            read_concern: more_specific
                .read_concern
                .clone()
                .or_else(|| self.read_concern.clone()),
            write_concern: more_specific
                .write_concern
                .clone()
                .or_else(|| self.write_concern.clone()),
            timeout: more_specific.timeout.or(self.timeout),
            operation_timeout: more_specific.operation_timeout || self.operation_timeout,
            timeout_mode: more_specific.timeout_mode.or(self.timeout_mode),
            deadline: more_specific.deadline.or(self.deadline),
        }
    }

    /// These defaults with an operation's own `timeoutMS`, when it sets one.
    pub(crate) fn with_operation_timeout(mut self, timeout: Option<Duration>) -> Self {
        if let Some(timeout) = timeout {
            self.timeout = Some(timeout);
            self.operation_timeout = true;
        }
        self
    }

    pub(crate) fn inherited(&self) -> Inherited<'_> {
        Inherited {
            selection_criteria: self.selection_criteria.as_ref(),
            read_concern: self.read_concern.as_ref(),
            write_concern: self.write_concern.as_ref(),
            timeout: self.timeout,
            operation_timeout: self.operation_timeout,
            deadline: self.deadline,
            omit_max_time: false,
        }
    }

    /// Only the timeout, for entry points that inherit `timeoutMS` but no
    /// read or write concern (runCommand sends the user's command as given;
    /// listings and cursor follow-ups take none).
    pub(crate) fn timeout_only(&self) -> Inherited<'static> {
        Inherited {
            timeout: self.timeout,
            operation_timeout: self.operation_timeout,
            deadline: self.deadline,
            ..Inherited::default()
        }
    }
}

/// A handle to one collection, whose documents are read and written as `T`.
/// Cheap to clone; does no I/O until an operation runs.
pub struct Collection<T> {
    client: Client,
    ns: Namespace,
    defaults: Defaults,
    _documents: PhantomData<fn() -> T>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Collection {
            client: self.client.clone(),
            ns: self.ns.clone(),
            defaults: self.defaults.clone(),
            _documents: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Collection<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("namespace", &self.ns.to_string())
            .finish_non_exhaustive()
    }
}

impl<T> Collection<T> {
    pub(crate) fn new(client: Client, db: &str, name: &str, defaults: Defaults) -> Self {
        Collection {
            client,
            ns: Namespace::new(db, name),
            defaults,
            _documents: PhantomData,
        }
    }

    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.ns.coll
    }

    /// The name of the collection's database.
    pub fn database_name(&self) -> &str {
        &self.ns.db
    }

    /// The same collection read and written as another type.
    pub fn clone_with_type<U>(&self) -> Collection<U> {
        Collection {
            client: self.client.clone(),
            ns: self.ns.clone(),
            defaults: self.defaults.clone(),
            _documents: PhantomData,
        }
    }

    /// Where its reads go when an operation does not say: the
    /// [`CollectionOptions`](crate::options::CollectionOptions)' selection
    /// criteria, else the database's.
    pub fn selection_criteria(&self) -> Option<&SelectionCriteria> {
        self.defaults.selection_criteria.as_ref()
    }

    /// The read concern of its reads when an operation does not set one
    /// (from the collection's options, else the database's).
    pub fn read_concern(&self) -> Option<&ReadConcern> {
        self.defaults.read_concern.as_ref()
    }

    /// The write concern of its writes when an operation does not set one
    /// (from the collection's options, else the database's).
    pub fn write_concern(&self) -> Option<&WriteConcern> {
        self.defaults.write_concern.as_ref()
    }

    /// This handle with `timeoutMS` for each of its operations.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.defaults.timeout = Some(timeout);
        self
    }

    /// This handle for one operation that sets its own `timeoutMS` and
    /// `timeoutMode` (a builder's `timeout`/`timeout_mode`): borrowed as
    /// it is when it sets neither.
    pub(crate) fn for_operation(
        &self,
        timeout: Option<Duration>,
        mode: Option<crate::proto::cursor_timeout::TimeoutMode>,
    ) -> std::borrow::Cow<'_, Self> {
        if timeout.is_none() && mode.is_none() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut coll = self.clone();
        coll.defaults = coll.defaults.with_operation_timeout(timeout);
        coll.defaults.timeout_mode = mode.or(coll.defaults.timeout_mode);
        std::borrow::Cow::Owned(coll)
    }

    /// This handle with every operation sharing `deadline` (a GridFS
    /// stream's, fixed when the stream opened).
    pub(crate) fn with_deadline(mut self, deadline: crate::proto::deadline::Deadline) -> Self {
        self.defaults.deadline = Some(deadline);
        self
    }

    /// Runs `op` in `session`, or in an implicit session that goes back to
    /// the pool afterwards.
    pub(crate) fn execute<Op: Operation>(
        &self,
        mut op: Op,
        session: Option<&mut ClientSession>,
    ) -> Result<Op::Output> {
        self.ns.check()?;
        let mut state = self.client.state()?;
        let explicit = session.map(|s| s.state_mut());
        let executed =
            state.execute(&mut op, explicit, self.defaults.inherited(), Target::Select)?;
        state.check_in(executed.implicit_session);
        Ok(executed.output)
    }

    /// Runs one batch of an `insert_many` or `bulk_write`.
    /// The deadline every batch of one insert_many/bulk_write shares:
    /// timeoutMS bounds the whole call, not each batch.
    pub(crate) fn batches_deadline(&self) -> Result<crate::proto::deadline::Deadline> {
        Ok(self
            .client
            .state()?
            .deadline_from_now(self.defaults.timeout))
    }

    pub(crate) fn execute_batch(
        &self,
        batch: &mut crate::proto::operation::WriteBatch,
        session: Option<&mut ClientSession>,
        deadline: crate::proto::deadline::Deadline,
    ) -> Result<BulkWriteResult> {
        self.ns.check()?;
        let mut state = self.client.state()?;
        let explicit = session.map(|s| s.state_mut());
        let inherited = Inherited {
            deadline: Some(deadline),
            ..self.defaults.inherited()
        };
        let executed = state.execute(batch, explicit, inherited, Target::Select)?;
        state.check_in(executed.implicit_session);
        Ok(executed.output)
    }

    /// Runs a cursor-opening `op` in an implicit session, which the cursor
    /// keeps for its `getMore`s.
    pub(crate) fn open_cursor<U, Op: Operation<Output = Box<CursorSpec>>>(
        &self,
        mut op: Op,
    ) -> Result<Cursor<U>> {
        self.ns.check()?;
        let mode = self.defaults.timeout_mode;
        open_cursor(&self.client, &mut op, self.defaults.inherited(), mode)
    }

    /// Runs a cursor-opening `op` in `session`.
    pub(crate) fn open_session_cursor<U, Op: Operation<Output = Box<CursorSpec>>>(
        &self,
        mut op: Op,
        session: &mut ClientSession,
    ) -> Result<SessionCursor<U>> {
        self.ns.check()?;
        let mode = self.defaults.timeout_mode;
        open_session_cursor(
            &self.client,
            &mut op,
            self.defaults.inherited(),
            mode,
            session,
        )
    }

    pub(crate) fn ns(&self) -> &Namespace {
        &self.ns
    }

    /// The collection's full name: its database and its own name.
    pub fn namespace(&self) -> crate::Namespace {
        crate::Namespace {
            db: self.ns.db.to_string(),
            coll: self.ns.coll.to_string(),
        }
    }

    pub(crate) fn defaults(&self) -> &Defaults {
        &self.defaults
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn from_document(document: Document) -> Result<T>
    where
        T: DeserializeOwned,
    {
        bson::from_document(document).map_err(|e| {
            Error::deserialization(
                "a document from the server does not match the collection's type",
                e,
            )
        })
    }
}

/// `document` as BSON, refused with an error naming the problem when it
/// nests too deeply or does not convert.
pub(crate) fn to_document<T: Serialize>(document: &T) -> Result<Document> {
    crate::proto::nesting::check_depth(document, "the document")?;
    bson::to_document(document)
        .map_err(|e| Error::serialization("the document cannot be converted to BSON", e))
}

/// `document` as BSON bytes, serialized straight from the caller's type
/// (no intermediate `Document`), refused like [`to_document`] refuses.
pub(crate) fn to_raw_document<T: Serialize>(document: &T) -> Result<bson::RawDocumentBuf> {
    crate::proto::nesting::check_depth(document, "the document")?;
    let bytes = bson::to_vec(document)
        .map_err(|e| Error::serialization("the document cannot be converted to BSON", e))?;
    bson::RawDocumentBuf::from_bytes(bytes).map_err(|e| {
        Error::serialization(
            "the document cannot be converted to BSON",
            serde::ser::Error::custom(e),
        )
    })
}

/// Runs a cursor-opening `op` in an implicit session, which the cursor keeps.
pub(crate) fn open_cursor<U, Op: Operation<Output = Box<CursorSpec>>>(
    client: &Client,
    op: &mut Op,
    inherited: Inherited<'_>,
    mode: Option<crate::proto::cursor_timeout::TimeoutMode>,
) -> Result<Cursor<U>> {
    let (inherited, timing) = cursor_timing(client, op, inherited, mode)?;
    let executed = client
        .state()?
        .execute(op, None, inherited, Target::Select)?;
    Ok(Cursor::from_executed(client.clone(), executed).with_timing(timing))
}

/// Runs a cursor-opening `op` in `session`; the cursor is iterated with it.
pub(crate) fn open_session_cursor<U, Op: Operation<Output = Box<CursorSpec>>>(
    client: &Client,
    op: &mut Op,
    inherited: Inherited<'_>,
    mode: Option<crate::proto::cursor_timeout::TimeoutMode>,
    session: &mut ClientSession,
) -> Result<SessionCursor<U>> {
    let (inherited, timing) = cursor_timing(client, op, inherited, mode)?;
    let executed =
        client
            .state()?
            .execute(op, Some(session.state_mut()), inherited, Target::Select)?;
    Ok(SessionCursor::from_executed(
        client.clone(),
        executed,
        timing,
    ))
}

/// CSOT's cursor rules for `op`: the combination refused or the timing its
/// cursor follows, with the opening command's settings adjusted to it (a
/// cursor-lifetime deadline starts now and is shared with the getMores).
fn cursor_timing<'i, Op: Operation>(
    client: &Client,
    op: &Op,
    mut inherited: Inherited<'i>,
    mode: Option<crate::proto::cursor_timeout::TimeoutMode>,
) -> Result<(Inherited<'i>, crate::api::cursor::Timing)> {
    let request = crate::proto::cursor_timeout::CursorRequest {
        timeout: inherited.timeout,
        mode,
        ..op.cursor_request()
    };
    let timing = request.timing()?;
    inherited.omit_max_time = inherited.timeout.is_some() && !timing.opening_max_time;
    let lifetime = timing.mode == Some(crate::proto::cursor_timeout::TimeoutMode::CursorLifetime);
    if lifetime && inherited.deadline.is_none() {
        inherited.deadline = Some(client.state()?.deadline_from_now(inherited.timeout));
    }
    Ok((
        inherited,
        crate::api::cursor::Timing {
            timeout: inherited.timeout,
            deadline: inherited.deadline,
        },
    ))
}

/// The operations. Each returns a builder (see [`crate::action`]); nothing
/// is sent before its `run`.
impl<T> Collection<T> {
    /// Inserts one document; an `_id` is generated when it has none.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("insert_one");
    /// let result = coll.insert_one(doc! { "name": "Ada" }).run()?;
    /// assert!(result.inserted_id.as_object_id().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn insert_one(&self, document: impl Borrow<T>) -> action::InsertOne<'_>
    where
        T: Serialize,
    {
        action::InsertOne::new(self, to_raw_document(document.borrow()))
    }

    /// Inserts many documents, in batches the server accepts.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("insert_many");
    /// let result = coll.insert_many([doc! { "n": 1 }, doc! { "n": 2 }]).ordered(true).run()?;
    /// assert_eq!(result.inserted_ids.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn insert_many<I>(&self, documents: I) -> action::InsertMany<'_>
    where
        T: Serialize,
        I: IntoIterator,
        I::Item: Borrow<T>,
    {
        let documents = documents
            .into_iter()
            .map(|d| to_raw_document(d.borrow()))
            .collect::<Result<Vec<_>>>();
        action::InsertMany::new(self, documents)
    }

    /// Runs mixed inserts, updates and deletes, ordered or not.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::options::CollectionWriteModel;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("bulk_write");
    /// let result = coll
    ///     .bulk_write(vec![
    ///         CollectionWriteModel::InsertOne { document: doc! { "_id": 1 } },
    ///         CollectionWriteModel::DeleteOne { filter: doc! { "_id": 1 }, options: Default::default() },
    ///     ])
    ///     .run()?;
    /// assert_eq!(result.inserted_count, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn bulk_write(
        &self,
        models: impl IntoIterator<Item = CollectionWriteModel>,
    ) -> action::CollectionBulkWrite<'_, T> {
        action::CollectionBulkWrite::new(self, models.into_iter().collect())
    }

    /// The documents matching `filter` (`doc! {}` for all), as a cursor
    /// that fetches further batches from the same server and socket as it
    /// is iterated.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("find");
    /// coll.insert_many((0..10).map(|n| doc! { "n": n })).run()?;
    /// let cursor = coll
    ///     .find(doc! { "n": { "$gte": 5 } })
    ///     .sort(doc! { "n": 1 })
    ///     .batch_size(2)
    ///     .run()?;
    /// for document in cursor {
    ///     assert!(document?.get_i32("n").unwrap() >= 5);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn find(&self, filter: Document) -> action::Find<'_, T> {
        action::Find::new(self, filter)
    }

    /// The first document matching `filter`, if any.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("find_one");
    /// coll.insert_one(doc! { "name": "Grace" }).run()?;
    /// let found = coll.find_one(doc! { "name": "Grace" }).run()?;
    /// assert!(found.is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn find_one(&self, filter: Document) -> action::FindOne<'_, T> {
        action::FindOne::new(self, filter)
    }

    /// Updates the first document matching `filter`.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("update_one");
    /// let result = coll
    ///     .update_one(doc! { "_id": "counter" }, doc! { "$inc": { "n": 1 } })
    ///     .upsert(true)
    ///     .run()?;
    /// assert!(result.upserted_id.is_some() || result.modified_count == 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn update_one(
        &self,
        filter: Document,
        update: impl Into<UpdateModifications>,
    ) -> action::Update<'_> {
        action::Update::new(self, filter, update.into(), false)
    }

    /// Updates every document matching `filter`.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("update_many");
    /// coll.drop().run()?;
    /// coll.insert_many([doc! { "x": 1 }, doc! { "x": 1 }]).run()?;
    /// let result = coll.update_many(doc! { "x": 1 }, doc! { "$set": { "x": 2 } }).run()?;
    /// assert_eq!(result.modified_count, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn update_many(
        &self,
        filter: Document,
        update: impl Into<UpdateModifications>,
    ) -> action::Update<'_> {
        action::Update::new(self, filter, update.into(), true)
    }

    /// Replaces the first document matching `filter`.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("replace_one");
    /// coll.drop().run()?;
    /// coll.insert_one(doc! { "_id": 1, "v": 1 }).run()?;
    /// let result = coll.replace_one(doc! { "_id": 1 }, doc! { "v": 2 }).run()?;
    /// assert_eq!(result.matched_count, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn replace_one(
        &self,
        filter: Document,
        replacement: impl Borrow<T>,
    ) -> action::ReplaceOne<'_>
    where
        T: Serialize,
    {
        action::ReplaceOne::new(self, filter, to_document(replacement.borrow()))
    }

    /// Deletes the first document matching `filter`.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("delete_one");
    /// coll.insert_one(doc! { "_id": 7 }).run()?;
    /// assert_eq!(coll.delete_one(doc! { "_id": 7 }).run()?.deleted_count, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_one(&self, filter: Document) -> action::Delete<'_> {
        action::Delete::new(self, filter, false)
    }

    /// Deletes every document matching `filter`.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("delete_many");
    /// coll.insert_many([doc! { "gone": true }, doc! { "gone": true }]).run()?;
    /// coll.delete_many(doc! { "gone": true }).run()?;
    /// assert_eq!(coll.count_documents(doc! { "gone": true }).run()?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete_many(&self, filter: Document) -> action::Delete<'_> {
        action::Delete::new(self, filter, true)
    }

    /// Updates the first document matching `filter` and returns it (before
    /// or after the change, per `return_document`).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::options::ReturnDocument;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("find_one_and_update");
    /// let after = coll
    ///     .find_one_and_update(doc! { "_id": "seq" }, doc! { "$inc": { "n": 1 } })
    ///     .upsert(true)
    ///     .return_document(ReturnDocument::After)
    ///     .run()?
    ///     .expect("upserted");
    /// assert!(after.get_i32("n").unwrap() >= 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn find_one_and_update(
        &self,
        filter: Document,
        update: impl Into<UpdateModifications>,
    ) -> action::FindOneAndUpdate<'_, T> {
        action::FindOneAndUpdate::new(self, filter, update.into())
    }

    /// Replaces the first document matching `filter` and returns it.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("find_one_and_replace");
    /// coll.drop().run()?;
    /// coll.insert_one(doc! { "_id": 1, "v": "old" }).run()?;
    /// let before = coll.find_one_and_replace(doc! { "_id": 1 }, doc! { "v": "new" }).run()?;
    /// assert_eq!(before.unwrap().get_str("v").unwrap(), "old");
    /// # Ok(())
    /// # }
    /// ```
    pub fn find_one_and_replace(
        &self,
        filter: Document,
        replacement: impl Borrow<T>,
    ) -> action::FindOneAndReplace<'_, T>
    where
        T: Serialize,
    {
        action::FindOneAndReplace::new(self, filter, to_document(replacement.borrow()))
    }

    /// Deletes the first document matching `filter` and returns it.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("find_one_and_delete");
    /// coll.drop().run()?;
    /// coll.insert_many([doc! { "n": 1 }, doc! { "n": 2 }]).run()?;
    /// let deleted = coll.find_one_and_delete(doc! {}).sort(doc! { "n": -1 }).run()?;
    /// assert_eq!(deleted.unwrap().get_i32("n").unwrap(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn find_one_and_delete(&self, filter: Document) -> action::FindOneAndDelete<'_, T> {
        action::FindOneAndDelete::new(self, filter)
    }

    /// How many documents match `filter` (an aggregation, exact).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("count_documents");
    /// coll.drop().run()?;
    /// coll.insert_many([doc! { "a": 1 }, doc! { "a": 2 }, doc! { "a": 2 }]).run()?;
    /// assert_eq!(coll.count_documents(doc! { "a": 2 }).run()?, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn count_documents(&self, filter: Document) -> action::CountDocuments<'_> {
        action::CountDocuments::new(self, filter)
    }

    /// The collection's document count from its metadata (fast, may be
    /// approximate).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("estimated_count");
    /// coll.insert_one(doc! {}).run()?;
    /// assert!(coll.estimated_document_count().run()? >= 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn estimated_document_count(&self) -> action::EstimatedDocumentCount<'_> {
        action::EstimatedDocumentCount::new(self)
    }

    /// The distinct values of `field` among the documents matching `filter`.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("distinct");
    /// coll.drop().run()?;
    /// coll.insert_many([doc! { "c": "red" }, doc! { "c": "red" }, doc! { "c": "blue" }]).run()?;
    /// assert_eq!(coll.distinct("c", doc! {}).run()?.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn distinct(&self, field: impl AsRef<str>, filter: Document) -> action::Distinct<'_> {
        action::Distinct::new(self, field.as_ref(), filter)
    }

    /// Runs an aggregation pipeline; the results are documents (or, with
    /// [`with_type`](action::Aggregate::with_type), any deserializable type),
    /// whatever `T` is.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("aggregate");
    /// coll.drop().run()?;
    /// coll.insert_many([doc! { "k": "a", "v": 1 }, doc! { "k": "a", "v": 2 }]).run()?;
    /// let totals: Vec<Document> = coll
    ///     .aggregate([doc! { "$group": { "_id": "$k", "total": { "$sum": "$v" } } }])
    ///     .run()?
    ///     .collect::<mongo_inline::Result<_>>()?;
    /// assert_eq!(totals[0].get_i32("total").unwrap(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn aggregate(&self, pipeline: impl IntoIterator<Item = Document>) -> action::Aggregate<'_> {
        action::Aggregate::on_collection(self, pipeline.into_iter().collect())
    }

    /// A change stream of this collection's changes (see
    /// [`crate::change_stream`]): events of type
    /// [`ChangeStreamEvent<T>`](crate::change_stream::event::ChangeStreamEvent).
    pub fn watch(&self) -> action::Watch<'_, T> {
        action::Watch::new(
            &self.client,
            crate::proto::change_stream::WatchTarget::Collection(self.ns.clone()),
            self.defaults.clone(),
        )
    }

    /// Drops the collection (a missing collection is not an error).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("drop");
    /// coll.insert_one(doc! {}).run()?;
    /// coll.drop().run()?;
    /// assert_eq!(coll.count_documents(doc! {}).run()?, 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn drop(&self) -> action::DropCollection<'_> {
        action::DropCollection::new(self)
    }

    /// Creates one index and returns its name.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::options::IndexModel;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("create_index");
    /// let created = coll.create_index(IndexModel::new(doc! { "email": 1 })).run()?;
    /// assert_eq!(created.index_name, "email_1");
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_index(&self, index: IndexModel) -> action::CreateIndex<'_> {
        action::CreateIndex::new(self, vec![index])
    }

    /// Creates indexes and returns their names.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::options::IndexModel;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("create_indexes");
    /// let created = coll
    ///     .create_indexes([IndexModel::new(doc! { "a": 1 }), IndexModel::new(doc! { "b": -1 })])
    ///     .run()?;
    /// assert_eq!(created.index_names, ["a_1", "b_-1"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_indexes(
        &self,
        indexes: impl IntoIterator<Item = IndexModel>,
    ) -> action::CreateIndex<'_, action::Multiple> {
        action::CreateIndex::new(self, indexes.into_iter().collect())
    }

    /// The collection's indexes, as [`IndexModel`]s (keys and options).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::IndexModel;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("list_indexes");
    /// coll.insert_one(doc! {}).run()?;
    /// let indexes: Vec<IndexModel> = coll.list_indexes().run()?.collect::<mongo_inline::Result<_>>()?;
    /// assert!(indexes.iter().any(|index| index.keys == doc! { "_id": 1 }));
    /// assert!(indexes.iter().any(|index| index.name() == "_id_"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_indexes(&self) -> action::ListIndexes<'_> {
        action::ListIndexes::new(self)
    }

    /// The names of the collection's indexes.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::options::IndexModel;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("list_index_names");
    /// coll.create_index(IndexModel::new(doc! { "sku": 1 })).run()?;
    /// let names = coll.list_index_names().run()?;
    /// assert!(names.contains(&"_id_".to_string()) && names.contains(&"sku_1".to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_index_names(&self) -> action::ListIndexes<'_, action::ListNames> {
        action::ListIndexes::new(self)
    }

    /// Drops the index named `name`.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::options::IndexModel;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("drop_index");
    /// coll.create_index(IndexModel::new(doc! { "x": 1 })).run()?;
    /// coll.drop_index("x_1").run()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn drop_index(&self, name: impl AsRef<str>) -> action::DropIndex<'_> {
        action::DropIndex::new(self, Some(name.as_ref()))
    }

    /// Drops every index but `_id`'s.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let coll = client.database("docs").collection::<Document>("drop_indexes");
    /// coll.insert_one(doc! {}).run()?;
    /// coll.drop_indexes().run()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn drop_indexes(&self) -> action::DropIndex<'_> {
        action::DropIndex::new(self, None)
    }
}
