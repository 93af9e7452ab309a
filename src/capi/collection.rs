//! The collection operations beyond insert, update, delete, count, find
//! and aggregate (those are in the parent module): replace, the
//! `find_one*` family, distinct, estimated count, bulk write, indexes and
//! drop. Each `mi_*` function is written by `c_function!` (see `entry.rs`),
//! which checks its pointers and catches panics; its body calls the Rust API.
//!
//! Every function has the same shape: `(client, session, db, coll, the
//! operation's own arguments as BSON (pointer, length) or strings, options
//! (pointer, length; NULL for none), the output)`, returning an `mi_error*`.

use bson::{Bson, Document, RawDocumentBuf};

use super::error::Failure;
use super::ops::{self, configure, open_in, run_in, DocumentStream, OptionList};
use super::{lock_opt, new_cursor, write_buffer, MiBuffer, MiCursor, Target};
use crate::proto::coll_options::{
    BulkWriteOptions, CreateIndexOptions, DistinctOptions, DropCollectionOptions, DropIndexOptions,
    EstimatedDocumentCountOptions, FindOneAndDeleteOptions, FindOneAndReplaceOptions,
    FindOneAndUpdateOptions, FindOneOptions, IndexModel, IndexOptions, ListIndexesOptions,
    ReplaceOptions,
};
use crate::proto::write_model::CollectionWriteModel;
use crate::Collection;

fn collection_of<T>(t: &Target<'_>) -> Collection<T> {
    t.client.client.database(t.db).collection::<T>(t.coll)
}

/// Writes `document` to `out`, or leaves `out` empty (`{NULL, 0}`) for `None`.
fn write_optional(out: &mut MiBuffer, document: Option<&Document>) -> Result<(), Failure> {
    out.data = std::ptr::null_mut();
    out.len = 0;
    document.map_or(Ok(()), |d| write_buffer(out, d))
}

fn write_raw(out: &mut MiBuffer, document: Option<RawDocumentBuf>) -> Result<(), Failure> {
    out.data = std::ptr::null_mut();
    out.len = 0;
    if let Some(document) = document {
        let boxed = document.into_bytes().into_boxed_slice();
        out.len = boxed.len();
        out.data = Box::into_raw(boxed).cast::<u8>();
    }
    Ok(())
}

c_function! {
    /// Replaces the first document matching `filter`; options are
    /// `ReplaceOptions` (`upsert`, `collation`, `hint`, ...); `result` gets
    /// `{matchedCount, modifiedCount, upsertedId?}`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_replace_one(
        t: target,
        filter: document filter_len,
        replacement: document replacement_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        write_buffer(result, &replace_one(&t, filter, replacement, options)?)
    }
}

fn replace_one(
    t: &Target<'_>,
    filter: Document,
    replacement: Document,
    options: Option<OptionList>,
) -> Result<Document, Failure> {
    let coll = collection_of::<Document>(t);
    let action = configure!(
        coll.replace_one(filter, replacement),
        ReplaceOptions,
        options
    );
    let result = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
    Ok(ops::update_result(result))
}

c_function! {
    /// The first document matching `filter` in `*result`, left `{NULL, 0}` when
    /// none does; options are `FindOneOptions` (`sort`, `projection`, `skip`, ...).
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_find_one(
        t: target,
        filter: document filter_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        write_raw(result, find_one(&t, filter, options)?)
    }
}

fn find_one(
    t: &Target<'_>,
    filter: Document,
    options: Option<OptionList>,
) -> Result<Option<RawDocumentBuf>, Failure> {
    let coll = collection_of::<RawDocumentBuf>(t);
    let action = configure!(coll.find_one(filter), FindOneOptions, options);
    run_in!(action, lock_opt(&t.session).as_deref_mut())
}

c_function! {
    /// Updates the first document matching `filter` and returns it in
    /// `*result` (before the update unless options say `returnDocument:
    /// "after"`), `{NULL, 0}` when none matched; options are
    /// `FindOneAndUpdateOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_find_one_and_update(
        t: target,
        filter: document filter_len,
        update: document update_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.find_one_and_update(filter, update), FindOneAndUpdateOptions, options);
        let found = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_optional(result, found.as_ref())
    }
}

c_function! {
    /// Replaces the first document matching `filter` and returns it as
    /// `mi_find_one_and_update` does; options are `FindOneAndReplaceOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_find_one_and_replace(
        t: target,
        filter: document filter_len,
        replacement: document replacement_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.find_one_and_replace(filter, replacement), FindOneAndReplaceOptions, options);
        let found = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_optional(result, found.as_ref())
    }
}

c_function! {
    /// Deletes the first document matching `filter` and returns it in
    /// `*result` (`{NULL, 0}` when none matched); options are
    /// `FindOneAndDeleteOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_find_one_and_delete(
        t: target,
        filter: document filter_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.find_one_and_delete(filter), FindOneAndDeleteOptions, options);
        let found = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_optional(result, found.as_ref())
    }
}

c_function! {
    /// The distinct values of `field` among the documents matching `filter`:
    /// `result` gets `{values: [...]}`; options are `DistinctOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid for their lengths; `options` may be NULL.
    fn mi_distinct(
        t: target,
        field: str,
        filter: document filter_len,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.distinct(field, filter), DistinctOptions, options);
        let values = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "values": values })
    }
}

c_function! {
    /// The collection's document count from its metadata (`count` without a
    /// filter); options are `EstimatedDocumentCountOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_estimated_document_count(
        t: target,
        options: options options_len,
        count: mut u64,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.estimated_document_count(), EstimatedDocumentCountOptions, options);
        *count = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        Ok(())
    }
}

c_function! {
    /// Runs `count` write models (the CRUD spec's form: `{insertOne:
    /// {document}}`, `{updateOne: {filter, update, upsert?, arrayFilters?,
    /// collation?, hint?, sort?}}`, `updateMany`, `{replaceOne: {filter,
    /// replacement, ...}}`, `{deleteOne: {filter, collation?, hint?}}`,
    /// `deleteMany`) on the collection; options are `BulkWriteOptions`
    /// (`ordered`, ...). `result` gets `{insertedCount, matchedCount,
    /// modifiedCount, deletedCount, upsertedCount, insertedIds: {"i": id},
    /// upsertedIds: {"i": id}}`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `models` and `lengths` hold `count` elements.
    fn mi_bulk_write(
        t: target,
        models: documents lengths count,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let models = models
            .into_iter()
            .enumerate()
            .map(|(i, model)| {
                CollectionWriteModel::from_document(model).map_err(|e| model_failure(i, &e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.bulk_write(models), BulkWriteOptions, options);
        let outcome = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        let ids = |ids: std::collections::BTreeMap<usize, Bson>| {
            ids.into_iter()
                .map(|(i, id)| (i.to_string(), id))
                .collect::<Document>()
        };
        let count = ops::count_bson;
        write_buffer(
            result,
            &bson::doc! {
                "acknowledged": outcome.acknowledged,
                "insertedCount": count(outcome.inserted_count),
                "matchedCount": count(outcome.matched_count),
                "modifiedCount": count(outcome.modified_count),
                "deletedCount": count(outcome.deleted_count),
                "upsertedCount": count(outcome.upserted_count),
                "insertedIds": ids(outcome.inserted_ids),
                "upsertedIds": ids(outcome.upserted_ids),
            },
        )
    }
}

/// The failure for the `index`th write model, which the library's parser
/// refused (for `mi_bulk_write` and `mi_client_bulk_write`).
pub(crate) fn model_failure(index: usize, error: &crate::Error) -> Failure {
    let problem = match error.kind() {
        crate::ErrorKind::InvalidArgument { message } => message.clone(),
        _ => error.to_string(),
    };
    Failure::argument(
        &format!("models[{index}]"),
        &format!("is invalid: {problem}"),
    )
}

c_function! {
    /// Creates `count` indexes, each given as its `createIndexes` specification
    /// (`{key: {...}, name?, unique?, ...}`); options are `CreateIndexOptions`
    /// (`commitQuorum`, `maxTimeMS`, ...). `result` gets `{indexNames: [...]}`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `indexes` and `lengths` hold `count` elements.
    fn mi_create_indexes(
        t: target,
        indexes: documents lengths count,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let models = indexes
            .into_iter()
            .enumerate()
            .map(|(i, mut spec)| match spec.remove("key") {
                Some(Bson::Document(keys)) => {
                    Ok(IndexModel::new(keys).options(IndexOptions::from(spec)))
                }
                _ => Err(Failure::argument(
                    &format!("indexes[{i}]"),
                    "needs a document \"key\"",
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.create_indexes(models), CreateIndexOptions, options);
        let created = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "indexNames": created.index_names })
    }
}

c_function! {
    /// The collection's indexes (their specifications) as a cursor; options
    /// are `ListIndexesOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_list_indexes(
        t: target,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(cursor: coll.list_indexes(), ListIndexesOptions, options);
        let stream: DocumentStream = open_in!(action, lock_opt(&t.session).as_deref_mut())?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    }
}

c_function! {
    /// The names of the collection's indexes: `result` gets `{names: [...]}`.
    /// It has no options: `options` is NULL or an empty document.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_list_index_names(
        t: target,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let coll = collection_of::<Document>(&t);
        ops::no_options("list_index_names", options)?;
        let action = coll.list_index_names();
        let names = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "names": names })
    }
}

c_function! {
    /// Drops the index named `name` (`"*"` is refused: use `mi_drop_indexes`);
    /// options are `DropIndexOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_drop_index(
        t: target,
        name: str,
        options: options options_len,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.drop_index(name), DropIndexOptions, options);
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    }
}

c_function! {
    /// Drops every index but `_id`'s; options are `DropIndexOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_drop_indexes(
        t: target,
        options: options options_len,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.drop_indexes(), DropIndexOptions, options);
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    }
}

c_function! {
    /// Drops the collection (no error when it does not exist); options are
    /// `DropCollectionOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_drop_collection(
        t: target,
        options: options options_len,
    ) {
        let coll = collection_of::<Document>(&t);
        let action = configure!(coll.drop(), DropCollectionOptions, options);
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    }
}
