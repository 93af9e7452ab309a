//! [`Collection<T>`]: the CRUD API over typed documents.
//!
//! Every method turns its arguments into an [`crate::operation`] value and
//! hands it to the executor; nothing here talks to a socket. Documents are
//! converted with serde through `bson`, so `T` can be any
//! `Serialize + DeserializeOwned` type, with [`bson::Document`] as the
//! untyped case.

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::time::Duration;

use bson::{Bson, Document};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::client::Client;
use crate::client_session::ClientSession;
use crate::coll_options::{
    AggregateOptions, BulkWriteOptions, CountOptions, CreateIndexOptions, DeleteOptions,
    DistinctOptions, DropCollectionOptions, DropIndexOptions, EstimatedDocumentCountOptions,
    FindOneAndDeleteOptions, FindOneAndReplaceOptions, FindOneAndUpdateOptions, FindOptions,
    IndexModel, InsertManyOptions, InsertOneOptions, ListIndexesOptions, ReplaceOptions,
    UpdateOptions,
};
use crate::cursor::Cursor;
use crate::error::{Error, Result};
use crate::exec::{Executed, Inherited, Target};
use crate::operation::aggregate::AggregateTarget;
use crate::operation::Insert;
use crate::operation::{
    Aggregate, BulkWrite, CountDocuments, CreateIndexes, Delete, Distinct, DropCollection,
    DropIndexes, EstimatedDocumentCount, Find, FindAndModify, InsertMany, ListIndexes, Namespace,
    Operation, Update, UpdateModification, WriteModel,
};
use crate::options::{ReadConcern, WriteConcern};
use crate::read_preference::ReadPreference;
use crate::results::{
    BulkWriteResult, DeleteResult, InsertManyResult, InsertOneResult, UpdateResult,
};
use crate::select::SelectionCriteria;

/// Read and write settings a handle passes to its operations; each level
/// (client, database, collection, operation) may override the one above.
#[derive(Clone, Debug, Default)]
pub(crate) struct Defaults {
    pub(crate) read_preference: Option<ReadPreference>,
    pub(crate) read_concern: Option<ReadConcern>,
    pub(crate) write_concern: Option<WriteConcern>,
    pub(crate) timeout: Option<Duration>,
}

impl Defaults {
    /// `self` with anything `more_specific` sets taking precedence.
    pub(crate) fn overridden_by(&self, more_specific: &Defaults) -> Defaults {
        Defaults {
            read_preference: more_specific
                .read_preference
                .clone()
                .or_else(|| self.read_preference.clone()),
            read_concern: more_specific
                .read_concern
                .clone()
                .or_else(|| self.read_concern.clone()),
            write_concern: more_specific
                .write_concern
                .clone()
                .or_else(|| self.write_concern.clone()),
            timeout: more_specific.timeout.or(self.timeout),
        }
    }

    pub(crate) fn inherited(&self) -> Inherited<'_> {
        Inherited {
            read_concern: self.read_concern.as_ref(),
            write_concern: self.write_concern.as_ref(),
            timeout: self.timeout,
            deadline: None,
        }
    }

    /// Only the timeout, for entry points that inherit `timeoutMS` but no
    /// read or write concern (runCommand sends the user's command as given;
    /// listings and cursor follow-ups take none).
    pub(crate) fn timeout_only(&self) -> Inherited<'static> {
        Inherited {
            timeout: self.timeout,
            ..Inherited::default()
        }
    }

    /// The criteria for a read whose own options gave none.
    fn read_criteria(&self, own: Option<SelectionCriteria>) -> SelectionCriteria {
        own.unwrap_or_else(|| {
            SelectionCriteria::ReadPreference(self.read_preference.clone().unwrap_or_default())
        })
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

impl<T> Collection<T>
where
    T: Serialize + DeserializeOwned,
{
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
    pub fn clone_with_type<U: Serialize + DeserializeOwned>(&self) -> Collection<U> {
        Collection {
            client: self.client.clone(),
            ns: self.ns.clone(),
            defaults: self.defaults.clone(),
            _documents: PhantomData,
        }
    }

    /// This handle with a default read preference for its reads.
    pub fn with_read_preference(mut self, read_preference: ReadPreference) -> Self {
        self.defaults.read_preference = Some(read_preference);
        self
    }

    /// This handle with a default read concern.
    pub fn with_read_concern(mut self, read_concern: ReadConcern) -> Self {
        self.defaults.read_concern = Some(read_concern);
        self
    }

    /// This handle with a default write concern.
    pub fn with_write_concern(mut self, write_concern: WriteConcern) -> Self {
        self.defaults.write_concern = Some(write_concern);
        self
    }

    /// This handle with `timeoutMS` for each of its operations.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.defaults.timeout = Some(timeout);
        self
    }

    fn run<Op: Operation>(
        &self,
        mut op: Op,
        session: Option<&mut ClientSession>,
    ) -> Result<Op::Output> {
        let mut state = self.client.state();
        let explicit = session.map(|s| s.state_mut());
        let executed =
            state.execute(&mut op, explicit, self.defaults.inherited(), Target::Select)?;
        state.check_in(executed.implicit_session);
        Ok(executed.output)
    }

    fn run_cursor<Op: Operation<Output = crate::operation::CursorSpec>>(
        &self,
        mut op: Op,
    ) -> Result<Cursor<T>> {
        let Executed {
            output,
            address,
            generation,
            implicit_session,
        } = {
            let mut state = self.client.state();
            state.execute(&mut op, None, self.defaults.inherited(), Target::Select)?
        };
        Ok(Cursor::new(
            self.client.clone(),
            output,
            address,
            generation,
            implicit_session,
        )
        .with_timeout(self.defaults.timeout))
    }

    fn to_document(document: &T) -> Result<Document> {
        crate::nesting::check_depth(document, "the document")?;
        bson::to_document(document).map_err(|e| {
            Error::invalid_argument(format!("the document cannot be converted to BSON: {e}"))
        })
    }

    fn from_document(document: Document) -> Result<T> {
        bson::from_document(document).map_err(|e| {
            Error::invalid_argument(format!(
                "a document from the server does not match the collection's type: {e}"
            ))
        })
    }

    /// Inserts one document; an `_id` is generated when it has none.
    pub fn insert_one(
        &self,
        document: impl Borrow<T>,
        options: impl Into<Option<InsertOneOptions>>,
    ) -> Result<InsertOneResult> {
        self.insert_one_inner(document.borrow(), options.into(), None)
    }

    /// [`Collection::insert_one`] inside `session`.
    pub fn insert_one_with_session(
        &self,
        document: impl Borrow<T>,
        options: impl Into<Option<InsertOneOptions>>,
        session: &mut ClientSession,
    ) -> Result<InsertOneResult> {
        self.insert_one_inner(document.borrow(), options.into(), Some(session))
    }

    fn insert_one_inner(
        &self,
        document: &T,
        options: Option<InsertOneOptions>,
        session: Option<&mut ClientSession>,
    ) -> Result<InsertOneResult> {
        let document = Self::to_document(document)?;
        self.run(
            Insert::one(self.ns.clone(), document, options.unwrap_or_default()),
            session,
        )
    }

    /// Inserts many documents, in batches the server accepts.
    pub fn insert_many<I>(
        &self,
        documents: I,
        options: impl Into<Option<InsertManyOptions>>,
    ) -> Result<InsertManyResult>
    where
        I: IntoIterator,
        I::Item: Borrow<T>,
    {
        let documents = documents
            .into_iter()
            .map(|d| Self::to_document(d.borrow()))
            .collect::<Result<Vec<_>>>()?;
        let mut insert = InsertMany::new(
            self.ns.clone(),
            documents,
            options.into().unwrap_or_default(),
        )?;
        // One deadline for every batch: timeoutMS bounds the whole call.
        let deadline = self.client.state().deadline_from_now(self.defaults.timeout);
        while let Some(batch) = insert.next_batch() {
            let outcome = self.run_batch(batch, deadline);
            insert.record(outcome)?;
        }
        insert.finish()
    }

    /// Runs mixed inserts, updates and deletes, ordered or not.
    pub fn bulk_write(
        &self,
        models: Vec<WriteModel>,
        options: impl Into<Option<BulkWriteOptions>>,
    ) -> Result<BulkWriteResult> {
        let mut bulk = BulkWrite::new(self.ns.clone(), models, options.into().unwrap_or_default())?;
        let deadline = self.client.state().deadline_from_now(self.defaults.timeout);
        while let Some(batch) = bulk.next_batch() {
            let outcome = self.run_batch(batch, deadline);
            bulk.record(outcome)?;
        }
        bulk.finish()
    }

    fn run_batch(
        &self,
        batch: &mut crate::operation::WriteBatch,
        deadline: crate::deadline::Deadline,
    ) -> Result<BulkWriteResult> {
        let mut state = self.client.state();
        let inherited = Inherited {
            deadline: Some(deadline),
            ..self.defaults.inherited()
        };
        let executed = state.execute(batch, None, inherited, Target::Select)?;
        state.check_in(executed.implicit_session);
        Ok(executed.output)
    }

    /// The documents matching `filter`, as a cursor that fetches further
    /// batches from the same server and socket as it is iterated.
    pub fn find(
        &self,
        filter: impl Into<Option<Document>>,
        options: impl Into<Option<FindOptions>>,
    ) -> Result<Cursor<T>> {
        let mut options = options.into().unwrap_or_default();
        options.selection_criteria = Some(
            self.defaults
                .read_criteria(options.selection_criteria.take()),
        );
        self.run_cursor(Find::new(
            self.ns.clone(),
            filter.into().unwrap_or_default(),
            options,
        ))
    }

    /// The documents matching `filter`, read inside `session` (all of them:
    /// the cursor is drained within the call).
    pub fn find_with_session(
        &self,
        filter: impl Into<Option<Document>>,
        options: impl Into<Option<FindOptions>>,
        session: &mut ClientSession,
    ) -> Result<Vec<T>> {
        let mut options = options.into().unwrap_or_default();
        options.selection_criteria = Some(
            self.defaults
                .read_criteria(options.selection_criteria.take()),
        );
        let mut op = Find::new(self.ns.clone(), filter.into().unwrap_or_default(), options);
        let mut state = self.client.state();
        let executed = state.execute(
            &mut op,
            Some(session.state_mut()),
            self.defaults.inherited(),
            Target::Select,
        )?;
        let mut spec = executed.output;
        let mut documents = Vec::new();
        loop {
            while let Some(d) = spec.pop_front() {
                documents.push(Self::from_document(d)?);
            }
            let Some(mut get_more) = spec.get_more() else {
                break;
            };
            let reply = state.execute(
                &mut get_more,
                Some(session.state_mut()),
                self.defaults.inherited(),
                Target::Pinned {
                    address: executed.address.clone(),
                    generation: executed.generation,
                },
            )?;
            spec.next_batch(reply.output)?;
        }
        Ok(documents)
    }

    /// The first document matching `filter`, if any.
    pub fn find_one(
        &self,
        filter: impl Into<Option<Document>>,
        options: impl Into<Option<FindOptions>>,
    ) -> Result<Option<T>> {
        let mut options = options.into().unwrap_or_default();
        options.selection_criteria = Some(
            self.defaults
                .read_criteria(options.selection_criteria.take()),
        );
        let mut cursor = self.run_cursor(Find::find_one(
            self.ns.clone(),
            filter.into().unwrap_or_default(),
            options,
        ))?;
        cursor.next().transpose()
    }

    /// Updates the first document matching `filter`.
    pub fn update_one(
        &self,
        filter: Document,
        update: impl Into<UpdateModification>,
        options: impl Into<Option<UpdateOptions>>,
    ) -> Result<UpdateResult> {
        self.update(filter, update.into(), options.into(), false, None)
    }

    /// [`Collection::update_one`] inside `session`.
    pub fn update_one_with_session(
        &self,
        filter: Document,
        update: impl Into<UpdateModification>,
        options: impl Into<Option<UpdateOptions>>,
        session: &mut ClientSession,
    ) -> Result<UpdateResult> {
        self.update(filter, update.into(), options.into(), false, Some(session))
    }

    /// Updates every document matching `filter`.
    pub fn update_many(
        &self,
        filter: Document,
        update: impl Into<UpdateModification>,
        options: impl Into<Option<UpdateOptions>>,
    ) -> Result<UpdateResult> {
        self.update(filter, update.into(), options.into(), true, None)
    }

    /// [`Collection::update_many`] inside `session`.
    pub fn update_many_with_session(
        &self,
        filter: Document,
        update: impl Into<UpdateModification>,
        options: impl Into<Option<UpdateOptions>>,
        session: &mut ClientSession,
    ) -> Result<UpdateResult> {
        self.update(filter, update.into(), options.into(), true, Some(session))
    }

    fn update(
        &self,
        filter: Document,
        update: UpdateModification,
        options: Option<UpdateOptions>,
        many: bool,
        session: Option<&mut ClientSession>,
    ) -> Result<UpdateResult> {
        let options = options.unwrap_or_default();
        let op = if many {
            Update::update_many(self.ns.clone(), filter, update, options)?
        } else {
            Update::update_one(self.ns.clone(), filter, update, options)?
        };
        self.run(op, session)
    }

    /// Replaces the first document matching `filter`.
    pub fn replace_one(
        &self,
        filter: Document,
        replacement: impl Borrow<T>,
        options: impl Into<Option<ReplaceOptions>>,
    ) -> Result<UpdateResult> {
        self.replace(filter, replacement.borrow(), options.into(), None)
    }

    /// [`Collection::replace_one`] inside `session`.
    pub fn replace_one_with_session(
        &self,
        filter: Document,
        replacement: impl Borrow<T>,
        options: impl Into<Option<ReplaceOptions>>,
        session: &mut ClientSession,
    ) -> Result<UpdateResult> {
        self.replace(filter, replacement.borrow(), options.into(), Some(session))
    }

    fn replace(
        &self,
        filter: Document,
        replacement: &T,
        options: Option<ReplaceOptions>,
        session: Option<&mut ClientSession>,
    ) -> Result<UpdateResult> {
        let replacement = Self::to_document(replacement)?;
        let op = Update::replace_one(
            self.ns.clone(),
            filter,
            replacement,
            options.unwrap_or_default(),
        )?;
        self.run(op, session)
    }

    /// Deletes the first document matching `filter`.
    pub fn delete_one(
        &self,
        filter: Document,
        options: impl Into<Option<DeleteOptions>>,
    ) -> Result<DeleteResult> {
        self.delete(filter, options.into(), false, None)
    }

    /// [`Collection::delete_one`] inside `session`.
    pub fn delete_one_with_session(
        &self,
        filter: Document,
        options: impl Into<Option<DeleteOptions>>,
        session: &mut ClientSession,
    ) -> Result<DeleteResult> {
        self.delete(filter, options.into(), false, Some(session))
    }

    /// Deletes every document matching `filter`.
    pub fn delete_many(
        &self,
        filter: Document,
        options: impl Into<Option<DeleteOptions>>,
    ) -> Result<DeleteResult> {
        self.delete(filter, options.into(), true, None)
    }

    /// [`Collection::delete_many`] inside `session`.
    pub fn delete_many_with_session(
        &self,
        filter: Document,
        options: impl Into<Option<DeleteOptions>>,
        session: &mut ClientSession,
    ) -> Result<DeleteResult> {
        self.delete(filter, options.into(), true, Some(session))
    }

    fn delete(
        &self,
        filter: Document,
        options: Option<DeleteOptions>,
        many: bool,
        session: Option<&mut ClientSession>,
    ) -> Result<DeleteResult> {
        let options = options.unwrap_or_default();
        let op = if many {
            Delete::delete_many(self.ns.clone(), filter, options)
        } else {
            Delete::delete_one(self.ns.clone(), filter, options)
        };
        self.run(op, session)
    }

    /// Updates the first document matching `filter` and returns it (before
    /// or after, per the options).
    pub fn find_one_and_update(
        &self,
        filter: Document,
        update: impl Into<UpdateModification>,
        options: impl Into<Option<FindOneAndUpdateOptions>>,
    ) -> Result<Option<T>> {
        let op = FindAndModify::update(
            self.ns.clone(),
            filter,
            update,
            options.into().unwrap_or_default(),
        )?;
        self.run(op, None)?.map(Self::from_document).transpose()
    }

    /// Replaces the first document matching `filter` and returns it.
    pub fn find_one_and_replace(
        &self,
        filter: Document,
        replacement: impl Borrow<T>,
        options: impl Into<Option<FindOneAndReplaceOptions>>,
    ) -> Result<Option<T>> {
        let replacement = Self::to_document(replacement.borrow())?;
        let op = FindAndModify::replace(
            self.ns.clone(),
            filter,
            replacement,
            options.into().unwrap_or_default(),
        )?;
        self.run(op, None)?.map(Self::from_document).transpose()
    }

    /// Deletes the first document matching `filter` and returns it.
    pub fn find_one_and_delete(
        &self,
        filter: Document,
        options: impl Into<Option<FindOneAndDeleteOptions>>,
    ) -> Result<Option<T>> {
        let op = FindAndModify::delete(self.ns.clone(), filter, options.into().unwrap_or_default());
        self.run(op, None)?.map(Self::from_document).transpose()
    }

    /// How many documents match `filter` (an aggregation, exact).
    pub fn count_documents(
        &self,
        filter: impl Into<Option<Document>>,
        options: impl Into<Option<CountOptions>>,
    ) -> Result<u64> {
        self.count(filter.into(), options.into(), None)
    }

    /// [`Collection::count_documents`] inside `session`.
    pub fn count_documents_with_session(
        &self,
        filter: impl Into<Option<Document>>,
        options: impl Into<Option<CountOptions>>,
        session: &mut ClientSession,
    ) -> Result<u64> {
        self.count(filter.into(), options.into(), Some(session))
    }

    fn count(
        &self,
        filter: Option<Document>,
        options: Option<CountOptions>,
        session: Option<&mut ClientSession>,
    ) -> Result<u64> {
        let mut options = options.unwrap_or_default();
        options.selection_criteria = Some(
            self.defaults
                .read_criteria(options.selection_criteria.take()),
        );
        self.run(
            CountDocuments::new(self.ns.clone(), filter.unwrap_or_default(), options),
            session,
        )
    }

    /// The collection's document count from its metadata (fast, may be
    /// approximate).
    pub fn estimated_document_count(
        &self,
        options: impl Into<Option<EstimatedDocumentCountOptions>>,
    ) -> Result<u64> {
        let mut options = options.into().unwrap_or_default();
        options.selection_criteria = Some(
            self.defaults
                .read_criteria(options.selection_criteria.take()),
        );
        self.run(EstimatedDocumentCount::new(self.ns.clone(), options), None)
    }

    /// The distinct values of `field` among the documents matching `filter`.
    pub fn distinct(
        &self,
        field: &str,
        filter: impl Into<Option<Document>>,
        options: impl Into<Option<DistinctOptions>>,
    ) -> Result<Vec<Bson>> {
        let mut options = options.into().unwrap_or_default();
        options.selection_criteria = Some(
            self.defaults
                .read_criteria(options.selection_criteria.take()),
        );
        self.run(
            Distinct::new(
                self.ns.clone(),
                field,
                filter.into().unwrap_or_default(),
                options,
            ),
            None,
        )
    }

    /// Runs an aggregation pipeline; the results are documents, whatever `T` is.
    pub fn aggregate(
        &self,
        pipeline: impl IntoIterator<Item = Document>,
        options: impl Into<Option<AggregateOptions>>,
    ) -> Result<Cursor<Document>> {
        let mut options = options.into().unwrap_or_default();
        options.selection_criteria = Some(
            self.defaults
                .read_criteria(options.selection_criteria.take()),
        );
        let op = Aggregate::new(
            AggregateTarget::Collection(self.ns.clone()),
            pipeline.into_iter().collect(),
            options,
        );
        self.clone_with_type::<Document>().run_cursor(op)
    }

    /// Drops the collection (a missing collection is not an error).
    pub fn drop(&self, options: impl Into<Option<DropCollectionOptions>>) -> Result<()> {
        self.run(
            DropCollection::new(self.ns.clone(), options.into().unwrap_or_default()),
            None,
        )
    }

    /// Creates indexes and returns their names.
    pub fn create_indexes(
        &self,
        indexes: impl IntoIterator<Item = IndexModel>,
        options: impl Into<Option<CreateIndexOptions>>,
    ) -> Result<Vec<String>> {
        let op = CreateIndexes::new(
            self.ns.clone(),
            indexes.into_iter().collect(),
            options.into().unwrap_or_default(),
        )?;
        self.run(op, None)
    }

    /// The collection's indexes, as documents.
    pub fn list_indexes(
        &self,
        options: impl Into<Option<ListIndexesOptions>>,
    ) -> Result<Cursor<Document>> {
        self.clone_with_type::<Document>()
            .run_cursor(ListIndexes::new(
                self.ns.clone(),
                options.into().unwrap_or_default(),
            ))
    }

    /// Drops the index named `name`.
    pub fn drop_index(
        &self,
        name: &str,
        options: impl Into<Option<DropIndexOptions>>,
    ) -> Result<()> {
        let op = DropIndexes::by_name(self.ns.clone(), name, options.into().unwrap_or_default())?;
        self.run(op, None)
    }

    /// Drops every index but `_id`'s.
    pub fn drop_indexes(&self, options: impl Into<Option<DropIndexOptions>>) -> Result<()> {
        self.run(
            DropIndexes::all(self.ns.clone(), options.into().unwrap_or_default()),
            None,
        )
    }
}
