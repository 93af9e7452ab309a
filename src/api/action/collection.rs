//! The builders [`Collection`]'s operations return.

use std::marker::PhantomData;

use bson::{Bson, Document, RawDocumentBuf};
use serde::de::DeserializeOwned;

use super::{
    option_setters, session_setter, timeout_mode_setter, timeout_setter, untyped, ExplicitSession,
    ImplicitSession, ListNames, ListSpecifications, Multiple, Single,
};
use crate::api::client_session::ClientSession;
use crate::api::coll::Collection;
use crate::api::cursor::{Cursor, SessionCursor};
use crate::error::Result;
use crate::proto::coll_options::{
    AggregateOptions, BulkWriteOptions, CommitQuorum, CountOptions, CreateIndexOptions, CursorType,
    DeleteOptions, DistinctOptions, DropCollectionOptions, DropIndexOptions,
    EstimatedDocumentCountOptions, FindOneAndDeleteOptions, FindOneAndReplaceOptions,
    FindOneAndUpdateOptions, FindOptions, Hint, IndexModel, InsertManyOptions, InsertOneOptions,
    ListIndexesOptions, ReplaceOptions, ReturnDocument, UpdateOptions,
};
use crate::proto::collation::Collation;
use crate::proto::operation::aggregate::AggregateTarget;
use crate::proto::operation::{self, CollectionWriteModel, Insert, UpdateModifications};
use crate::proto::options::{ReadConcern, WriteConcern};
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::results::{
    BulkWriteResult, CreateIndexResult, CreateIndexesResult, DeleteResult, InsertManyResult,
    InsertOneResult, UpdateResult,
};
use std::borrow::Cow;
use std::time::Duration;

/// `find`: returns a [`Cursor`], or with `.session(..)` a [`SessionCursor`].
#[must_use = "nothing is sent until `run`"]
pub struct Find<'a, T, S = ImplicitSession> {
    coll: Cow<'a, Collection<T>>,
    filter: Document,
    options: FindOptions,
    session: S,
}

impl<'a, T, S> Find<'a, T, S> {
    timeout_setter!(coll);
    timeout_mode_setter!(coll);

    option_setters!(FindOptions {
        allow_disk_use: bool,
        allow_partial_results: bool,
        batch_size: u32,
        collation: Collation,
        comment: Bson,
        cursor_type: CursorType,
        hint: Hint,
        limit: i64,
        max: Document,
        max_await_time: Duration,
        max_scan: u64,
        max_time: Duration,
        min: Document,
        no_cursor_timeout: bool,
        projection: Document,
        return_key: bool,
        show_record_id: bool,
        skip: u64,
        sort: Document,
        let_vars: Document,
        selection_criteria: SelectionCriteria,
        read_concern: ReadConcern,
        raw_data: bool,
    });

    fn operation(self) -> (operation::Find, S, Cow<'a, Collection<T>>) {
        let op = operation::Find::new(self.coll.ns().clone(), self.filter, self.options);
        (op, self.session, self.coll)
    }
}

impl<'a, T> Find<'a, T> {
    pub(crate) fn new(coll: &'a Collection<T>, filter: Document) -> Self {
        Find {
            coll: Cow::Borrowed(coll),
            filter,
            options: FindOptions::default(),
            session: ImplicitSession,
        }
    }

    /// Runs the query in `session`; the result is a [`SessionCursor`],
    /// iterated with the session.
    pub fn session<'s>(self, session: &'s mut ClientSession) -> Find<'a, T, ExplicitSession<'s>> {
        Find {
            coll: self.coll,
            filter: self.filter,
            options: self.options,
            session: ExplicitSession(session),
        }
    }

    /// Runs the query.
    pub fn run(self) -> Result<Cursor<T>> {
        let (op, _, coll) = self.operation();
        coll.open_cursor(op)
    }
}

impl<T> Find<'_, T, ExplicitSession<'_>> {
    /// Runs the query in the session.
    pub fn run(self) -> Result<SessionCursor<T>> {
        let (op, ExplicitSession(session), coll) = self.operation();
        coll.open_session_cursor(op, session)
    }
}

/// `find_one`: the first match, if any.
#[must_use = "nothing is sent until `run`"]
pub struct FindOne<'a, T> {
    coll: Cow<'a, Collection<T>>,
    filter: Document,
    /// Boxed from the start, so that the operation takes them over
    /// without a copy (see `operation::Find`).
    options: Box<FindOptions>,
    session: Option<&'a mut ClientSession>,
}

impl<'a, T> FindOne<'a, T> {
    pub(crate) fn new(coll: &'a Collection<T>, filter: Document) -> Self {
        FindOne {
            coll: Cow::Borrowed(coll),
            filter,
            options: Box::default(),
            session: None,
        }
    }

    option_setters!(crate::proto::coll_options::FindOneOptions {
        allow_partial_results: bool,
        collation: Collation,
        comment: Bson,
        hint: Hint,
        max: Document,
        max_scan: u64,
        max_time: Duration,
        min: Document,
        projection: Document,
        return_key: bool,
        show_record_id: bool,
        skip: u64,
        sort: Document,
        let_vars: Document,
        selection_criteria: SelectionCriteria,
        read_concern: ReadConcern,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the query.
    pub fn run(self) -> Result<Option<T>>
    where
        T: DeserializeOwned + 'static,
    {
        let op = operation::Find::find_one(self.coll.ns().clone(), self.filter, self.options);
        match self.session {
            None => self.coll.open_cursor::<T, _>(op)?.next().transpose(),
            Some(session) => self
                .coll
                .open_session_cursor::<T, _>(op, session)?
                .next(session)
                .transpose(),
        }
    }
}

/// `insert_one`.
#[must_use = "nothing is sent until `run`"]
pub struct InsertOne<'a> {
    coll: Cow<'a, Collection<Document>>,
    document: Result<RawDocumentBuf>,
    options: InsertOneOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> InsertOne<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>, document: Result<RawDocumentBuf>) -> Self {
        InsertOne {
            coll: untyped(coll),
            document,
            options: InsertOneOptions::default(),
            session: None,
        }
    }

    option_setters!(InsertOneOptions {
        bypass_document_validation: bool,
        write_concern: WriteConcern,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Inserts the document.
    pub fn run(self) -> Result<InsertOneResult> {
        let op = Insert::one(
            self.coll.ns().clone(),
            self.document?,
            self.options,
            &mut crate::new_object_id,
        )?;
        self.coll.execute(op, self.session)
    }
}

/// `insert_many`.
#[must_use = "nothing is sent until `run`"]
pub struct InsertMany<'a> {
    coll: Cow<'a, Collection<Document>>,
    documents: Result<Vec<RawDocumentBuf>>,
    options: InsertManyOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> InsertMany<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>, documents: Result<Vec<RawDocumentBuf>>) -> Self {
        InsertMany {
            coll: untyped(coll),
            documents,
            options: InsertManyOptions::default(),
            session: None,
        }
    }

    option_setters!(InsertManyOptions {
        bypass_document_validation: bool,
        ordered: bool,
        write_concern: WriteConcern,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Inserts the documents, in as many batches as the server's limits need.
    pub fn run(mut self) -> Result<InsertManyResult> {
        let mut insert = operation::InsertMany::from_raw(
            self.coll.ns().clone(),
            self.documents?,
            self.options,
            &mut crate::new_object_id,
        )?;
        let deadline = self.coll.batches_deadline()?;
        while let Some(batch) = insert.next_batch() {
            let outcome = self
                .coll
                .execute_batch(batch, self.session.as_deref_mut(), deadline);
            insert.record(outcome).map_err(insert_many_error)?;
        }
        insert.finish().map_err(insert_many_error)
    }
}

/// `insert_many` reports a failed batch as the official driver does, as an
/// [`ErrorKind::InsertMany`](crate::ErrorKind::InsertMany); the batches
/// themselves (retries, SDAM) see the `BulkWrite` failure they share with
/// `bulk_write`.
fn insert_many_error(mut error: crate::Error) -> crate::Error {
    use crate::error::ErrorKind;
    if let ErrorKind::CollectionBulkWrite(failure) = &mut *error.kind {
        let failure = std::mem::take(failure);
        *error.kind = ErrorKind::InsertMany(failure.into());
    }
    error
}

/// `bulk_write`: mixed inserts, updates and deletes on one collection.
#[must_use = "nothing is sent until `run`"]
pub struct CollectionBulkWrite<'a, T> {
    coll: Cow<'a, Collection<T>>,
    models: Vec<CollectionWriteModel>,
    options: BulkWriteOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a, T> CollectionBulkWrite<'a, T> {
    pub(crate) fn new(coll: &'a Collection<T>, models: Vec<CollectionWriteModel>) -> Self {
        CollectionBulkWrite {
            coll: Cow::Borrowed(coll),
            models,
            options: BulkWriteOptions::default(),
            session: None,
        }
    }

    option_setters!(BulkWriteOptions {
        ordered: bool,
        bypass_document_validation: bool,
        let_vars: Document,
        comment: Bson,
        write_concern: WriteConcern,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the writes, in as many batches as the server's limits need.
    pub fn run(mut self) -> Result<BulkWriteResult> {
        let mut bulk = operation::BulkWrite::new(
            self.coll.ns().clone(),
            self.models,
            self.options,
            &mut crate::new_object_id,
        )?;
        let deadline = self.coll.batches_deadline()?;
        while let Some(batch) = bulk.next_batch() {
            let outcome = self
                .coll
                .execute_batch(batch, self.session.as_deref_mut(), deadline);
            bulk.record(outcome)?;
        }
        bulk.finish()
    }
}

/// `update_one` and `update_many`.
#[must_use = "nothing is sent until `run`"]
pub struct Update<'a> {
    coll: Cow<'a, Collection<Document>>,
    filter: Document,
    update: UpdateModifications,
    many: bool,
    options: UpdateOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> Update<'a> {
    pub(crate) fn new<T>(
        coll: &'a Collection<T>,
        filter: Document,
        update: UpdateModifications,
        many: bool,
    ) -> Self {
        Update {
            coll: untyped(coll),
            filter,
            update,
            many,
            options: UpdateOptions::default(),
            session: None,
        }
    }

    option_setters!(UpdateOptions {
        array_filters: Vec<Document>,
        bypass_document_validation: bool,
        upsert: bool,
        collation: Collation,
        hint: Hint,
        write_concern: WriteConcern,
        let_vars: Document,
        comment: Bson,
        sort: Document,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the update.
    pub fn run(self) -> Result<UpdateResult> {
        let ns = self.coll.ns().clone();
        let op = if self.many {
            operation::Update::update_many(ns, self.filter, self.update, self.options)?
        } else {
            operation::Update::update_one(ns, self.filter, self.update, self.options)?
        };
        self.coll.execute(op, self.session)
    }
}

/// `replace_one`.
#[must_use = "nothing is sent until `run`"]
pub struct ReplaceOne<'a> {
    coll: Cow<'a, Collection<Document>>,
    filter: Document,
    replacement: Result<Document>,
    options: ReplaceOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> ReplaceOne<'a> {
    pub(crate) fn new<T>(
        coll: &'a Collection<T>,
        filter: Document,
        replacement: Result<Document>,
    ) -> Self {
        ReplaceOne {
            coll: untyped(coll),
            filter,
            replacement,
            options: ReplaceOptions::default(),
            session: None,
        }
    }

    option_setters!(ReplaceOptions {
        bypass_document_validation: bool,
        upsert: bool,
        collation: Collation,
        hint: Hint,
        write_concern: WriteConcern,
        let_vars: Document,
        comment: Bson,
        sort: Document,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the replacement.
    pub fn run(self) -> Result<UpdateResult> {
        let op = operation::Update::replace_one(
            self.coll.ns().clone(),
            self.filter,
            self.replacement?,
            self.options,
        )?;
        self.coll.execute(op, self.session)
    }
}

/// `delete_one` and `delete_many`.
#[must_use = "nothing is sent until `run`"]
pub struct Delete<'a> {
    coll: Cow<'a, Collection<Document>>,
    filter: Document,
    many: bool,
    options: DeleteOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> Delete<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>, filter: Document, many: bool) -> Self {
        Delete {
            coll: untyped(coll),
            filter,
            many,
            options: DeleteOptions::default(),
            session: None,
        }
    }

    option_setters!(DeleteOptions {
        collation: Collation,
        hint: Hint,
        write_concern: WriteConcern,
        let_vars: Document,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the delete.
    pub fn run(self) -> Result<DeleteResult> {
        let ns = self.coll.ns().clone();
        let op = if self.many {
            operation::Delete::delete_many(ns, self.filter, self.options)
        } else {
            operation::Delete::delete_one(ns, self.filter, self.options)
        };
        self.coll.execute(op, self.session)
    }
}

/// `find_one_and_update`.
#[must_use = "nothing is sent until `run`"]
pub struct FindOneAndUpdate<'a, T> {
    coll: Cow<'a, Collection<T>>,
    filter: Document,
    update: UpdateModifications,
    options: FindOneAndUpdateOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a, T> FindOneAndUpdate<'a, T> {
    pub(crate) fn new(
        coll: &'a Collection<T>,
        filter: Document,
        update: UpdateModifications,
    ) -> Self {
        FindOneAndUpdate {
            coll: Cow::Borrowed(coll),
            filter,
            update,
            options: FindOneAndUpdateOptions::default(),
            session: None,
        }
    }

    option_setters!(FindOneAndUpdateOptions {
        array_filters: Vec<Document>,
        bypass_document_validation: bool,
        max_time: Duration,
        projection: Document,
        return_document: ReturnDocument,
        sort: Document,
        upsert: bool,
        write_concern: WriteConcern,
        collation: Collation,
        hint: Hint,
        let_vars: Document,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the update; the document before or after it, if one matched.
    pub fn run(self) -> Result<Option<T>>
    where
        T: DeserializeOwned,
    {
        let op = operation::FindAndModify::update(
            self.coll.ns().clone(),
            self.filter,
            self.update,
            self.options,
        )?;
        self.coll
            .execute(op, self.session)?
            .map(Collection::<T>::from_document)
            .transpose()
    }
}

/// `find_one_and_replace`.
#[must_use = "nothing is sent until `run`"]
pub struct FindOneAndReplace<'a, T> {
    coll: Cow<'a, Collection<T>>,
    filter: Document,
    replacement: Result<Document>,
    options: FindOneAndReplaceOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a, T> FindOneAndReplace<'a, T> {
    pub(crate) fn new(
        coll: &'a Collection<T>,
        filter: Document,
        replacement: Result<Document>,
    ) -> Self {
        FindOneAndReplace {
            coll: Cow::Borrowed(coll),
            filter,
            replacement,
            options: FindOneAndReplaceOptions::default(),
            session: None,
        }
    }

    option_setters!(FindOneAndReplaceOptions {
        bypass_document_validation: bool,
        max_time: Duration,
        projection: Document,
        return_document: ReturnDocument,
        sort: Document,
        upsert: bool,
        write_concern: WriteConcern,
        collation: Collation,
        hint: Hint,
        let_vars: Document,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the replacement; the document before or after it, if one matched.
    pub fn run(self) -> Result<Option<T>>
    where
        T: DeserializeOwned,
    {
        let op = operation::FindAndModify::replace(
            self.coll.ns().clone(),
            self.filter,
            self.replacement?,
            self.options,
        )?;
        self.coll
            .execute(op, self.session)?
            .map(Collection::<T>::from_document)
            .transpose()
    }
}

/// `find_one_and_delete`.
#[must_use = "nothing is sent until `run`"]
pub struct FindOneAndDelete<'a, T> {
    coll: Cow<'a, Collection<T>>,
    filter: Document,
    options: FindOneAndDeleteOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a, T> FindOneAndDelete<'a, T> {
    pub(crate) fn new(coll: &'a Collection<T>, filter: Document) -> Self {
        FindOneAndDelete {
            coll: Cow::Borrowed(coll),
            filter,
            options: FindOneAndDeleteOptions::default(),
            session: None,
        }
    }

    option_setters!(FindOneAndDeleteOptions {
        max_time: Duration,
        projection: Document,
        sort: Document,
        write_concern: WriteConcern,
        collation: Collation,
        hint: Hint,
        let_vars: Document,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Runs the delete; the deleted document, if one matched.
    pub fn run(self) -> Result<Option<T>>
    where
        T: DeserializeOwned,
    {
        let op =
            operation::FindAndModify::delete(self.coll.ns().clone(), self.filter, self.options);
        self.coll
            .execute(op, self.session)?
            .map(Collection::<T>::from_document)
            .transpose()
    }
}

/// `count_documents`.
#[must_use = "nothing is sent until `run`"]
pub struct CountDocuments<'a> {
    coll: Cow<'a, Collection<Document>>,
    filter: Document,
    options: CountOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> CountDocuments<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>, filter: Document) -> Self {
        CountDocuments {
            coll: untyped(coll),
            filter,
            options: CountOptions::default(),
            session: None,
        }
    }

    option_setters!(CountOptions {
        hint: Hint,
        limit: u64,
        max_time: Duration,
        skip: u64,
        collation: Collation,
        comment: Bson,
        selection_criteria: SelectionCriteria,
        read_concern: ReadConcern,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Counts.
    pub fn run(self) -> Result<u64> {
        let op = operation::CountDocuments::new(self.coll.ns().clone(), self.filter, self.options);
        self.coll.execute(op, self.session)
    }
}

/// `estimated_document_count`.
#[must_use = "nothing is sent until `run`"]
pub struct EstimatedDocumentCount<'a> {
    coll: Cow<'a, Collection<Document>>,
    options: EstimatedDocumentCountOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> EstimatedDocumentCount<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>) -> Self {
        EstimatedDocumentCount {
            coll: untyped(coll),
            options: EstimatedDocumentCountOptions::default(),
            session: None,
        }
    }

    option_setters!(EstimatedDocumentCountOptions {
        max_time: Duration,
        comment: Bson,
        selection_criteria: SelectionCriteria,
        read_concern: ReadConcern,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Reads the count.
    pub fn run(self) -> Result<u64> {
        let op = operation::EstimatedDocumentCount::new(self.coll.ns().clone(), self.options);
        self.coll.execute(op, self.session)
    }
}

/// `distinct`.
#[must_use = "nothing is sent until `run`"]
pub struct Distinct<'a> {
    coll: Cow<'a, Collection<Document>>,
    field: String,
    filter: Document,
    options: DistinctOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> Distinct<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>, field: &str, filter: Document) -> Self {
        Distinct {
            coll: untyped(coll),
            field: field.to_string(),
            filter,
            options: DistinctOptions::default(),
            session: None,
        }
    }

    option_setters!(DistinctOptions {
        max_time: Duration,
        collation: Collation,
        comment: Bson,
        hint: Hint,
        selection_criteria: SelectionCriteria,
        read_concern: ReadConcern,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Reads the distinct values.
    pub fn run(self) -> Result<Vec<Bson>> {
        let op = operation::Distinct::new(
            self.coll.ns().clone(),
            &self.field,
            self.filter,
            self.options,
        );
        self.coll.execute(op, self.session)
    }
}

/// `aggregate`, on a collection or a database: returns a [`Cursor`] of
/// `T` (documents unless [`with_type`](Self::with_type) says otherwise),
/// or with `.session(..)` a [`SessionCursor`].
#[must_use = "nothing is sent until `run`"]
pub struct Aggregate<'a, S = ImplicitSession, T = Document> {
    client: &'a crate::Client,
    target: AggregateTarget,
    defaults: crate::api::coll::Defaults,
    pipeline: Vec<Document>,
    options: AggregateOptions,
    session: S,
    _results: PhantomData<fn() -> T>,
}

impl<'a> Aggregate<'a> {
    pub(crate) fn on_collection<C>(coll: &'a Collection<C>, pipeline: Vec<Document>) -> Self {
        Aggregate {
            client: coll.client(),
            target: AggregateTarget::Collection(coll.ns().clone()),
            defaults: coll.defaults().clone(),
            pipeline,
            options: AggregateOptions::default(),
            session: ImplicitSession,
            _results: PhantomData,
        }
    }

    /// The same aggregation of `pipeline` instead.
    pub(crate) fn with_pipeline(mut self, pipeline: Vec<Document>) -> Self {
        self.pipeline = pipeline;
        self
    }

    pub(crate) fn on_database(
        client: &'a crate::Client,
        db: &str,
        defaults: crate::api::coll::Defaults,
        pipeline: Vec<Document>,
    ) -> Self {
        Aggregate {
            client,
            target: AggregateTarget::Database(db.to_string()),
            defaults,
            pipeline,
            options: AggregateOptions::default(),
            session: ImplicitSession,
            _results: PhantomData,
        }
    }
}

impl<'a, S, T> Aggregate<'a, S, T> {
    /// Sets this operation's `timeoutMS` (see [`crate::options::TimeoutMode`]
    /// for how it bounds the cursor), overriding the handle's; zero means no
    /// limit.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.defaults = self.defaults.with_operation_timeout(Some(timeout));
        self
    }

    /// Sets whether `timeoutMS` bounds the cursor's whole life or each
    /// iteration; it needs a `timeoutMS`.
    pub fn timeout_mode(mut self, mode: crate::options::TimeoutMode) -> Self {
        self.defaults.timeout_mode = Some(mode);
        self
    }

    /// Without the handle's read and write concerns: the search index
    /// aggregation takes neither (index-management.md).
    pub(crate) fn without_concerns(mut self) -> Self {
        self.defaults.read_concern = None;
        self.defaults.write_concern = None;
        self
    }

    option_setters!(AggregateOptions {
        allow_disk_use: bool,
        batch_size: u32,
        bypass_document_validation: bool,
        collation: Collation,
        comment: Bson,
        hint: Hint,
        max_time: Duration,
        max_await_time: Duration,
        let_vars: Document,
        write_concern: WriteConcern,
        read_concern: ReadConcern,
        selection_criteria: SelectionCriteria,
        raw_data: bool,
    });

    /// Reads the results as `U` instead.
    pub fn with_type<U>(self) -> Aggregate<'a, S, U> {
        Aggregate {
            client: self.client,
            target: self.target,
            defaults: self.defaults,
            pipeline: self.pipeline,
            options: self.options,
            session: self.session,
            _results: PhantomData,
        }
    }

    /// The names the pipeline runs on, checked before anything is sent.
    fn check_target(&self) -> Result<()> {
        match &self.target {
            AggregateTarget::Collection(ns) => ns.check(),
            AggregateTarget::Database(db) => operation::check_database_name(db),
        }
    }

    fn operation(
        mut self,
    ) -> (
        operation::Aggregate,
        S,
        &'a crate::Client,
        crate::api::coll::Defaults,
    ) {
        // The handle's read preference reaches a read through `Inherited`;
        // a `$out`/`$merge` pipeline needs it here, to select with it only
        // where the servers allow such a write on a secondary.
        if self.options.selection_criteria.is_none()
            && operation::Aggregate::pipeline_writes(&self.pipeline)
        {
            self.options.selection_criteria = self.defaults.selection_criteria.clone();
        }
        let op = operation::Aggregate::new(self.target, self.pipeline, self.options);
        (op, self.session, self.client, self.defaults)
    }
}

impl<'a, T> Aggregate<'a, ImplicitSession, T> {
    /// Runs the pipeline in `session`; the result is a [`SessionCursor`],
    /// iterated with the session.
    pub fn session<'s>(
        self,
        session: &'s mut ClientSession,
    ) -> Aggregate<'a, ExplicitSession<'s>, T> {
        Aggregate {
            client: self.client,
            target: self.target,
            defaults: self.defaults,
            pipeline: self.pipeline,
            options: self.options,
            session: ExplicitSession(session),
            _results: PhantomData,
        }
    }

    /// Runs the pipeline.
    pub fn run(self) -> Result<Cursor<T>> {
        self.check_target()?;
        let (mut op, _, client, defaults) = self.operation();
        let mode = defaults.timeout_mode;
        crate::api::coll::open_cursor(client, &mut op, defaults.inherited(), mode)
    }
}

impl<T> Aggregate<'_, ExplicitSession<'_>, T> {
    /// Runs the pipeline in the session.
    pub fn run(self) -> Result<SessionCursor<T>> {
        self.check_target()?;
        let (mut op, ExplicitSession(session), client, defaults) = self.operation();
        let mode = defaults.timeout_mode;
        crate::api::coll::open_session_cursor(client, &mut op, defaults.inherited(), mode, session)
    }
}

/// `drop` of a collection.
#[must_use = "nothing is sent until `run`"]
pub struct DropCollection<'a> {
    coll: Cow<'a, Collection<Document>>,
    options: DropCollectionOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> DropCollection<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>) -> Self {
        DropCollection {
            coll: untyped(coll),
            options: DropCollectionOptions::default(),
            session: None,
        }
    }

    option_setters!(DropCollectionOptions {
        write_concern: WriteConcern,
        comment: Bson,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Drops the collection.
    pub fn run(self) -> Result<()> {
        let op = operation::DropCollection::new(self.coll.ns().clone(), self.options);
        self.coll.execute(op, self.session)
    }
}

/// `create_index` (mode [`Single`], the default) and `create_indexes`
/// (mode [`Multiple`]): the same options, one result per mode.
#[must_use = "nothing is sent until `run`"]
pub struct CreateIndex<'a, M = Single> {
    coll: Cow<'a, Collection<Document>>,
    indexes: Vec<IndexModel>,
    options: CreateIndexOptions,
    session: Option<&'a mut ClientSession>,
    mode: PhantomData<M>,
}

impl<'a, M> CreateIndex<'a, M> {
    pub(crate) fn new<T>(coll: &'a Collection<T>, indexes: Vec<IndexModel>) -> Self {
        CreateIndex {
            coll: untyped(coll),
            indexes,
            options: CreateIndexOptions::default(),
            session: None,
            mode: PhantomData,
        }
    }

    option_setters!(CreateIndexOptions {
        commit_quorum: CommitQuorum,
        max_time: Duration,
        write_concern: WriteConcern,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    fn create(self) -> Result<Vec<String>> {
        let op = operation::CreateIndexes::new(self.coll.ns().clone(), self.indexes, self.options)?;
        self.coll.execute(op, self.session)
    }
}

impl CreateIndex<'_, Single> {
    /// Creates the index.
    pub fn run(self) -> Result<CreateIndexResult> {
        let mut names = self.create()?;
        Ok(CreateIndexResult {
            index_name: names.pop().unwrap_or_default(),
        })
    }
}

impl CreateIndex<'_, Multiple> {
    /// Creates the indexes.
    pub fn run(self) -> Result<CreateIndexesResult> {
        Ok(CreateIndexesResult {
            index_names: self.create()?,
        })
    }
}

/// `list_indexes` (mode [`ListSpecifications`], the default: a [`Cursor`]
/// of [`IndexModel`]s, or with `.session(..)` a [`SessionCursor`]) and
/// `list_index_names` (mode [`ListNames`]: the names).
#[must_use = "nothing is sent until `run`"]
pub struct ListIndexes<'a, M = ListSpecifications, S = ImplicitSession> {
    coll: Cow<'a, Collection<Document>>,
    options: ListIndexesOptions,
    session: S,
    mode: PhantomData<M>,
}

impl<'a, M> ListIndexes<'a, M> {
    pub(crate) fn new<T>(coll: &'a Collection<T>) -> Self {
        ListIndexes {
            coll: untyped(coll),
            options: ListIndexesOptions::default(),
            session: ImplicitSession,
            mode: PhantomData,
        }
    }

    /// Lists in `session`: a [`SessionCursor`] (iterated with the session),
    /// or the names.
    pub fn session<'s>(
        self,
        session: &'s mut ClientSession,
    ) -> ListIndexes<'a, M, ExplicitSession<'s>> {
        ListIndexes {
            coll: self.coll,
            options: self.options,
            session: ExplicitSession(session),
            mode: PhantomData,
        }
    }
}

impl<M, S> ListIndexes<'_, M, S> {
    timeout_setter!(coll);

    option_setters!(ListIndexesOptions {
        max_time: Duration,
        batch_size: u32,
        comment: Bson,
        raw_data: bool,
    });

    fn operation(&mut self) -> operation::ListIndexes {
        let options = std::mem::take(&mut self.options);
        operation::ListIndexes::new(self.coll.ns().clone(), options)
    }
}

impl<S> ListIndexes<'_, ListSpecifications, S> {
    timeout_mode_setter!(coll);
}

impl ListIndexes<'_> {
    /// Lists the indexes.
    pub fn run(mut self) -> Result<Cursor<IndexModel>> {
        let op = self.operation();
        self.coll.open_cursor(op)
    }
}

impl ListIndexes<'_, ListSpecifications, ExplicitSession<'_>> {
    /// Lists the indexes in the session.
    pub fn run(mut self) -> Result<SessionCursor<IndexModel>> {
        let op = self.operation();
        self.coll.open_session_cursor(op, self.session.0)
    }
}

impl ListIndexes<'_, ListNames> {
    /// The names of the collection's indexes.
    pub fn run(mut self) -> Result<Vec<String>> {
        let op = self.operation();
        let indexes = self.coll.open_cursor(op)?;
        index_names(indexes.collect::<Result<_>>()?)
    }
}

impl ListIndexes<'_, ListNames, ExplicitSession<'_>> {
    /// The names of the collection's indexes, listed in the session.
    pub fn run(mut self) -> Result<Vec<String>> {
        let op = self.operation();
        let session = self.session.0;
        let mut cursor: SessionCursor<IndexModel> = self.coll.open_session_cursor(op, session)?;
        index_names(cursor.iter(session).collect::<Result<_>>()?)
    }
}

fn index_names(indexes: Vec<IndexModel>) -> Result<Vec<String>> {
    indexes
        .iter()
        .map(|index| {
            index
                .options
                .as_ref()
                .and_then(|o| o.name.clone())
                .ok_or_else(|| {
                    crate::error::Error::protocol(
                        None,
                        format!("a listIndexes entry has no string `name`: {index:?}"),
                    )
                })
        })
        .collect()
}

/// `drop_index` (one index, by name) and `drop_indexes` (every index but
/// `_id`'s): one builder for both, as the official driver's.
#[must_use = "nothing is sent until `run`"]
pub struct DropIndex<'a> {
    coll: Cow<'a, Collection<Document>>,
    /// `None` for `drop_indexes`.
    name: Option<String>,
    options: DropIndexOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> DropIndex<'a> {
    pub(crate) fn new<T>(coll: &'a Collection<T>, name: Option<&str>) -> Self {
        DropIndex {
            coll: untyped(coll),
            name: name.map(str::to_string),
            options: DropIndexOptions::default(),
            session: None,
        }
    }

    option_setters!(DropIndexOptions {
        max_time: Duration,
        write_concern: WriteConcern,
        comment: Bson,
        raw_data: bool,
    });
    session_setter!();
    timeout_setter!(coll);

    /// Drops the index, or with `drop_indexes` every index but `_id`'s.
    pub fn run(self) -> Result<()> {
        let ns = self.coll.ns().clone();
        let op = match &self.name {
            Some(name) => operation::DropIndexes::by_name(ns, name, self.options)?,
            None => operation::DropIndexes::all(ns, self.options),
        };
        self.coll.execute(op, self.session)
    }
}
