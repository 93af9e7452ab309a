//! Options of each collection, database and index operation, one struct per
//! verb (the CRUD, index-management and enumeration specs' option sets).
//!
//! Every struct follows the same pattern: `#[non_exhaustive]`, `Default`
//! (nothing set: the server's defaults apply), public `Option` fields that
//! can be read directly, and one chainable setter per field, named like the
//! field, that sets it:
//!
//! ```
//! use bson::doc;
//! use mongo_inline::coll_options::FindOptions;
//!
//! let options = FindOptions::default().sort(doc! { "x": -1 }).limit(10);
//! assert_eq!(options.limit, Some(10));
//! ```

use std::time::Duration;

use bson::{Bson, Document};

use crate::options::{ReadConcern, WriteConcern};
use crate::select::SelectionCriteria;

/// Declares an options struct with public `Option` fields and a setter per field.
macro_rules! options_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default)]
        #[non_exhaustive]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: Option<$ty>, )*
        }

        impl $name {
            $(
                #[doc = concat!("Sets [`", stringify!($field), "`](Self::", stringify!($field), ").")]
                #[must_use]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.$field = Some(value);
                    self
                }
            )*
        }
    };
}

/// An index to use (`hint`): its key pattern or its name.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Hint {
    /// The index's key pattern, e.g. `{ x: 1 }`.
    Keys(Document),
    /// The index's name, e.g. `"x_1"`.
    Name(String),
}

impl Hint {
    /// The value sent as `hint`.
    pub fn to_bson(&self) -> Bson {
        match self {
            Hint::Keys(keys) => Bson::Document(keys.clone()),
            Hint::Name(name) => Bson::String(name.clone()),
        }
    }
}

impl From<Document> for Hint {
    fn from(keys: Document) -> Self {
        Hint::Keys(keys)
    }
}

impl From<&str> for Hint {
    fn from(name: &str) -> Self {
        Hint::Name(name.to_string())
    }
}

impl From<String> for Hint {
    fn from(name: String) -> Self {
        Hint::Name(name)
    }
}

/// Whether a find cursor follows a capped collection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CursorType {
    /// An ordinary cursor, exhausted when all results are read.
    #[default]
    NonTailable,
    /// Stays open after the last result (`tailable: true`).
    Tailable,
    /// Tailable, and `getMore` waits for new data up to `max_await_time`
    /// (`tailable: true, awaitData: true`).
    TailableAwait,
}

/// Which version of the document `find_one_and_update`/`_replace` returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReturnDocument {
    /// The document as it was before the change (the default).
    #[default]
    Before,
    /// The document as it is after the change (`new: true`).
    After,
}

options_struct! {
    /// Options of `find` (and `find_one`, which forces a single batch of one).
    pub struct FindOptions {
        /// Lets the server write temporary data to disk for large sorts (`allowDiskUse`).
        allow_disk_use: bool,
        /// Returns partial results when some shards are down (`allowPartialResults`).
        allow_partial_results: bool,
        /// Documents per batch (`batchSize`), for `find` and the cursor's `getMore`s.
        batch_size: u32,
        /// Language rules for string comparison (`collation`).
        collation: Document,
        /// A value to find the operation by in logs and profiler output (`comment`).
        comment: Bson,
        /// Tailable or not.
        cursor_type: CursorType,
        /// The index to use (`hint`).
        hint: Hint,
        /// Maximum number of documents; negative means "one batch of at most
        /// that many, then close the cursor" (`limit`/`singleBatch`).
        limit: i64,
        /// Exclusive upper bound of the index keys (`max`).
        max: Document,
        /// For tailable-await cursors: how long a `getMore` waits for data (its `maxTimeMS`).
        max_await_time: Duration,
        /// Server-side time limit of the `find` (`maxTimeMS`).
        max_time: Duration,
        /// Inclusive lower bound of the index keys (`min`).
        min: Document,
        /// Keeps an idle cursor open on the server (`noCursorTimeout`).
        no_cursor_timeout: bool,
        /// Which fields to return (`projection`).
        projection: Document,
        /// Returns only the index keys (`returnKey`).
        return_key: bool,
        /// Adds `$recordId` to each document (`showRecordId`).
        show_record_id: bool,
        /// How many documents to skip (`skip`).
        skip: u64,
        /// The order of the results (`sort`).
        sort: Document,
        /// Variables usable as `$$name` in the filter (`let`).
        let_vars: Document,
        /// Where to read; the collection's read preference when unset.
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation (overrides the collection's).
        read_concern: ReadConcern,
    }
}

options_struct! {
    /// Options of `insert_one`.
    pub struct InsertOneOptions {
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `insert_many`.
    pub struct InsertManyOptions {
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// Stop at the first failed document (`true`, the default) or try all.
        ordered: bool,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `update_one` and `update_many`.
    pub struct UpdateOptions {
        /// Which array elements filtered positional operators apply to (`arrayFilters`).
        array_filters: Vec<Document>,
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// Inserts a document when none matches (`upsert`).
        upsert: bool,
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// Variables usable as `$$name` (`let`).
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// Which matching document `update_one` changes (`sort`, MongoDB 8.0+;
        /// not allowed for `update_many`).
        sort: Document,
    }
}

options_struct! {
    /// Options of `replace_one`.
    pub struct ReplaceOptions {
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// Inserts the replacement when no document matches (`upsert`).
        upsert: bool,
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// Variables usable as `$$name` (`let`).
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// Which matching document is replaced (`sort`, MongoDB 8.0+).
        sort: Document,
    }
}

options_struct! {
    /// Options of `delete_one` and `delete_many`.
    pub struct DeleteOptions {
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// Variables usable as `$$name` (`let`).
        let_vars: Document,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `find_one_and_delete`.
    pub struct FindOneAndDeleteOptions {
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// Which fields of the returned document to include (`fields`).
        projection: Document,
        /// Which matching document is deleted (`sort`).
        sort: Document,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// Variables usable as `$$name` (`let`).
        let_vars: Document,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `find_one_and_update`.
    pub struct FindOneAndUpdateOptions {
        /// `arrayFilters`.
        array_filters: Vec<Document>,
        /// `bypassDocumentValidation`.
        bypass_document_validation: bool,
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// Which fields of the returned document to include (`fields`).
        projection: Document,
        /// Return the document before (default) or after the update (`new`).
        return_document: ReturnDocument,
        /// Which matching document is updated (`sort`).
        sort: Document,
        /// `upsert`.
        upsert: bool,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// Variables usable as `$$name` (`let`).
        let_vars: Document,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `find_one_and_replace`.
    pub struct FindOneAndReplaceOptions {
        /// `bypassDocumentValidation`.
        bypass_document_validation: bool,
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// Which fields of the returned document to include (`fields`).
        projection: Document,
        /// Return the document before (default) or after the replacement (`new`).
        return_document: ReturnDocument,
        /// Which matching document is replaced (`sort`).
        sort: Document,
        /// `upsert`.
        upsert: bool,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// Variables usable as `$$name` (`let`).
        let_vars: Document,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `count_documents`.
    pub struct CountOptions {
        /// `hint` (of the `aggregate`).
        hint: Hint,
        /// Count at most this many documents (a `$limit` stage).
        limit: u64,
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// Documents to skip before counting (a `$skip` stage).
        skip: u64,
        /// `collation`.
        collation: Document,
        /// `comment`.
        comment: Bson,
        /// Where to read.
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation.
        read_concern: ReadConcern,
    }
}

options_struct! {
    /// Options of `estimated_document_count`.
    pub struct EstimatedDocumentCountOptions {
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// `comment`.
        comment: Bson,
        /// Where to read.
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation.
        read_concern: ReadConcern,
    }
}

options_struct! {
    /// Options of `distinct`.
    pub struct DistinctOptions {
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// `collation`.
        collation: Document,
        /// `comment`.
        comment: Bson,
        /// `hint` (MongoDB 7.1+).
        hint: Hint,
        /// Where to read.
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation.
        read_concern: ReadConcern,
    }
}

options_struct! {
    /// Options of `aggregate`.
    pub struct AggregateOptions {
        /// `allowDiskUse`.
        allow_disk_use: bool,
        /// Documents per batch (`cursor.batchSize`, and the `getMore`s');
        /// ignored for pipelines ending in `$out`/`$merge`, which return nothing.
        batch_size: u32,
        /// `bypassDocumentValidation` (for `$out`/`$merge`).
        bypass_document_validation: bool,
        /// `collation`.
        collation: Document,
        /// `comment`.
        comment: Bson,
        /// `hint`.
        hint: Hint,
        /// Server-side time limit of the `aggregate` (`maxTimeMS`).
        max_time: Duration,
        /// For tailable-await cursors (change streams): the `getMore`s' `maxTimeMS`.
        max_await_time: Duration,
        /// Variables usable as `$$name` (`let`).
        let_vars: Document,
        /// The write concern (for `$out`/`$merge`).
        write_concern: WriteConcern,
        /// The read concern of this operation.
        read_concern: ReadConcern,
        /// Where to read.
        selection_criteria: SelectionCriteria,
    }
}

options_struct! {
    /// Options of `create_collection` (the `create` command).
    pub struct CreateCollectionOptions {
        /// A capped collection (`capped`); needs `size`.
        capped: bool,
        /// Maximum size in bytes of a capped collection (`size`).
        size: u64,
        /// Maximum number of documents of a capped collection (`max`).
        max: u64,
        /// `storageEngine`.
        storage_engine: Document,
        /// `validator`.
        validator: Document,
        /// `validationLevel` (`off`, `strict`, `moderate`).
        validation_level: String,
        /// `validationAction` (`error`, `warn`).
        validation_action: String,
        /// Makes a view on this collection (`viewOn`).
        view_on: String,
        /// The view's pipeline (`pipeline`).
        pipeline: Vec<Document>,
        /// `collation`.
        collation: Document,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `indexOptionDefaults`.
        index_option_defaults: Document,
        /// `timeseries`.
        timeseries: Document,
        /// `expireAfterSeconds` (time series and clustered collections).
        expire_after_seconds: i64,
        /// `changeStreamPreAndPostImages`.
        change_stream_pre_and_post_images: Document,
        /// `clusteredIndex`.
        clustered_index: Document,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `drop` (a collection).
    pub struct DropCollectionOptions {
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of a database's `drop` (`dropDatabase`).
    pub struct DropDatabaseOptions {
        /// The write concern of the drop.
        write_concern: WriteConcern,
    }
}

options_struct! {
    /// Options of `list_collections` / `list_collection_names`.
    pub struct ListCollectionsOptions {
        /// Documents per batch (`cursor.batchSize`).
        batch_size: u32,
        /// Which collections to list (`filter`).
        filter: Document,
        /// Only names and types, which avoids locks (`nameOnly`).
        name_only: bool,
        /// Only collections the user may act on (`authorizedCollections`).
        authorized_collections: bool,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `list_databases` / `list_database_names`.
    pub struct ListDatabasesOptions {
        /// Which databases to list (`filter`).
        filter: Document,
        /// Only names (`nameOnly`).
        name_only: bool,
        /// Only databases the user may act on (`authorizedDatabases`).
        authorized_databases: bool,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `create_index` / `create_indexes`.
    pub struct CreateIndexOptions {
        /// How many data-bearing members must be ready (`commitQuorum`, 4.4+).
        commit_quorum: Bson,
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `list_indexes`.
    pub struct ListIndexesOptions {
        /// Documents per batch (`cursor.batchSize`).
        batch_size: u32,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `drop_index` / `drop_indexes`.
    pub struct DropIndexOptions {
        /// Server-side time limit (`maxTimeMS`).
        max_time: Duration,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of `bulk_write` (the classic per-collection bulk API).
    pub struct BulkWriteOptions {
        /// Stop at the first failed statement (`true`, the default) or try all.
        ordered: bool,
        /// `bypassDocumentValidation`.
        bypass_document_validation: bool,
        /// Variables usable as `$$name` in updates and deletes (`let`).
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// The write concern of this operation.
        write_concern: WriteConcern,
    }
}

/// An index to create: its key pattern and its options (`name`, `unique`,
/// `expireAfterSeconds`, `partialFilterExpression`, ... as the server spells them).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct IndexModel {
    /// The key pattern, e.g. `{ x: 1, y: -1 }`.
    pub keys: Document,
    /// The index options; `name` is generated from the keys when absent.
    pub options: Option<Document>,
}

impl IndexModel {
    /// An index on `keys` with no options.
    pub fn new(keys: Document) -> Self {
        IndexModel {
            keys,
            options: None,
        }
    }

    /// Sets the index options.
    #[must_use]
    pub fn options(mut self, options: Document) -> Self {
        self.options = Some(options);
        self
    }

    /// The index's name: the `name` option, or the one the server would
    /// generate (`key_direction` pairs joined by `_`, e.g. `x_1_y_-1`).
    pub fn name(&self) -> String {
        if let Some(Ok(name)) = self.options.as_ref().map(|o| o.get_str("name")) {
            return name.to_string();
        }
        let parts: Vec<String> = self
            .keys
            .iter()
            .map(|(key, direction)| {
                let direction = match direction {
                    Bson::String(s) => s.clone(),
                    Bson::Int32(i) => i.to_string(),
                    Bson::Int64(i) => i.to_string(),
                    Bson::Double(d) if d.fract() == 0.0 => format!("{}", *d as i64),
                    other => other.to_string(),
                };
                format!("{key}_{direction}")
            })
            .collect();
        parts.join("_")
    }
}

options_struct! {
    /// The per-statement options of an `UpdateOne`/`UpdateMany` bulk write model.
    #[derive(PartialEq)]
    pub struct UpdateModelOptions {
        /// `arrayFilters`.
        array_filters: Vec<Document>,
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// `upsert`.
        upsert: bool,
        /// Which matching document is updated (`UpdateOne` only, MongoDB 8.0+).
        sort: Document,
    }
}

options_struct! {
    /// The per-statement options of a `ReplaceOne` bulk write model.
    #[derive(PartialEq)]
    pub struct ReplaceModelOptions {
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
        /// `upsert`.
        upsert: bool,
        /// Which matching document is replaced (MongoDB 8.0+).
        sort: Document,
    }
}

options_struct! {
    /// The per-statement options of a `DeleteOne`/`DeleteMany` bulk write model.
    #[derive(PartialEq)]
    pub struct DeleteModelOptions {
        /// `collation`.
        collation: Document,
        /// `hint`.
        hint: Hint,
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn setters_set_and_defaults_are_unset() {
        let options = UpdateOptions::default()
            .upsert(true)
            .hint(Hint::from("x_1"));
        assert_eq!(options.upsert, Some(true));
        assert_eq!(options.hint, Some(Hint::Name("x_1".into())));
        assert_eq!(options.collation, None);
        assert_eq!(
            Hint::from(doc! { "x": 1 }).to_bson(),
            Bson::Document(doc! { "x": 1 })
        );
    }

    #[test]
    fn index_names_follow_the_server_convention() {
        assert_eq!(IndexModel::new(doc! { "a": 1, "b": -1 }).name(), "a_1_b_-1");
        assert_eq!(
            IndexModel::new(doc! { "loc": "2dsphere", "n": 1.0 }).name(),
            "loc_2dsphere_n_1"
        );
        let named = IndexModel::new(doc! { "a": 1 }).options(doc! { "name": "mine" });
        assert_eq!(named.name(), "mine");
    }
}
