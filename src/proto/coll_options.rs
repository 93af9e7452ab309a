//! Options of each collection, database and index operation, one struct per
//! verb (the CRUD, index-management and enumeration specs' option sets).
//!
//! Every struct follows the official driver's pattern: `#[non_exhaustive]`,
//! `Default` (nothing set: the server's defaults apply), public `Option`
//! fields, and a `builder()` with one method per field (typed-builder, as
//! the official crate uses); besides, a chainable setter per field on the
//! struct itself:
//!
//! ```
//! use bson::doc;
//! use mongo_inline::options::FindOptions;
//!
//! let options = FindOptions::builder().sort(doc! { "x": -1 }).limit(10).build();
//! assert_eq!(options.limit, Some(10));
//! let same = FindOptions::default().sort(doc! { "x": -1 }).limit(10);
//! assert_eq!(same.sort, options.sort);
//! ```

use std::time::Duration;

use bson::{Bson, Document};

use serde::{Deserialize, Serialize};

use crate::proto::collation::Collation;
use crate::proto::concern::{ReadConcern, WriteConcern};
use crate::proto::read_preference::SelectionCriteria;

mod server_values;
pub use server_values::{
    ChangeStreamPreAndPostImages, ChangeStreamPreAndPostImagesBuilder, ClusteredIndex,
    CommitQuorum, IndexOptionDefaults, IndexOptionDefaultsBuilder, IndexVersion,
    Sphere2DIndexVersion, TextIndexVersion, TimeseriesGranularity, TimeseriesOptions,
    TimeseriesOptionsBuilder,
};

/// Declares an options struct with public `Option` fields and a setter per field.
///
/// Fields after `; read_only` are the official driver's read-only ones
/// (`IndexOptions::clustered`): private, without setters, set only by
/// reading a document (a listing, serde, the C ABI); each has a getter of
/// its name, written beside the struct.
macro_rules! options_struct {
    // The official `#[serde_with::skip_serializing_none]`: every unset
    // field is left out of what the struct serializes to.
    (
        #[skip_serializing_none]
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* $field:ident : $ty:ty ),* $(,)?
            $( ; read_only $( $(#[$ro_meta:meta])* $ro_field:ident : $ro_ty:ty ),* $(,)? )?
        }
    ) => {
        $crate::proto::coll_options::options_struct! {
            $(#[$meta])*
            pub struct $name {
                $(
                    #[serde(skip_serializing_if = "Option::is_none")]
                    $(#[$field_meta])* $field: $ty
                ),*
                $( ; read_only $(
                    #[serde(skip_serializing_if = "Option::is_none")]
                    $(#[$ro_meta])* $ro_field: $ro_ty
                ),* )?
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* $field:ident : $ty:ty ),* $(,)?
            $( ; read_only $( $(#[$ro_meta:meta])* $ro_field:ident : $ro_ty:ty ),* $(,)? )?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, typed_builder::TypedBuilder)]
        #[builder(field_defaults(default, setter(into)))]
        #[non_exhaustive]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: Option<$ty>, )*
            $($( $(#[$ro_meta])* #[builder(default, setter(skip))] $ro_field: Option<$ro_ty>, )*)?
        }

        // The official deprecated options (`max_scan`, `background`) keep
        // their setters and their names in options documents.
        #[allow(deprecated)]
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

        // Read by the C ABI (feature `capi`), which takes options as BSON;
        // not every struct is (write models' options come inside models).
        #[allow(dead_code, deprecated)]
        impl $name {
            /// Sets the field whose official option name (see
            /// `proto::options_doc`) is `key` to `value`; an unknown name or
            /// a value of the wrong type is an error naming the option.
            pub(crate) fn set_named(&mut self, key: &str, value: bson::Bson) -> $crate::error::Result<()> {
                use $crate::proto::options_doc::{official_name, OptionValue};
                $(
                    if key == official_name(stringify!($field), <$ty as OptionValue>::NAME_SUFFIX) {
                        self.$field = Some(<$ty as OptionValue>::from_option(key, value)?);
                        return Ok(());
                    }
                )*
                $($(
                    if key == official_name(stringify!($ro_field), <$ro_ty as OptionValue>::NAME_SUFFIX) {
                        self.$ro_field = Some(<$ro_ty as OptionValue>::from_option(key, value)?);
                        return Ok(());
                    }
                )*)?
                Err($crate::proto::options_doc::unknown_field(stringify!($name), key))
            }

            /// Options from `(name, value)` pairs in the official names.
            pub(crate) fn from_named(
                pairs: impl IntoIterator<Item = (String, bson::Bson)>,
            ) -> $crate::error::Result<Self> {
                let mut options = Self::default();
                for (key, value) in pairs {
                    options.set_named(&key, value)?;
                }
                Ok(options)
            }
        }
    };
}
pub(crate) use options_struct;

/// An index to use (`hint`): its key pattern or its name (serialized as
/// either, untagged).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
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
    #[skip_serializing_none]
    /// Options of `find` (and `find_one`, which forces a single batch of one).
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FindOptions {
        /// Lets the server write temporary data to disk for large sorts (`allowDiskUse`).
        allow_disk_use: bool,
        /// Returns partial results when some shards are down (`allowPartialResults`).
        allow_partial_results: bool,
        /// Documents per batch (`batchSize`), for `find` and the cursor's `getMore`s.
        #[serde(serialize_with = "crate::proto::serde_util::u32_as_i32")]
        batch_size: u32,
        /// Language rules for string comparison (`collation`).
        collation: Collation,
        /// A value to find the operation by in logs and profiler output (`comment`).
        comment: Bson,
        /// Tailable or not.
        #[serde(skip)]
        cursor_type: CursorType,
        /// The index to use (`hint`).
        hint: Hint,
        /// Maximum number of documents; negative means "one batch of at most
        /// that many, then close the cursor" (`limit`/`singleBatch`).
        #[serde(serialize_with = "crate::proto::serde_util::absolute_value")]
        limit: i64,
        /// Exclusive upper bound of the index keys (`max`).
        max: Document,
        /// For tailable-await cursors: how long a `getMore` waits for data (its `maxTimeMS`).
        #[serde(skip)]
        max_await_time: Duration,
        /// Most documents or index keys to scan (`maxScan`): sent as given,
        /// as the official driver does, though no server since 4.0 takes it.
        #[deprecated = "no MongoDB server since 4.0 supports maxScan; use `max_time`"]
        #[serde(serialize_with = "crate::proto::serde_util::u64_as_i64")]
        max_scan: u64,
        /// Server-side time limit of the `find` (`maxTimeMS`).
        #[serde(rename = "maxTimeMS", default, with = "crate::proto::serde_util::millis")]
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
        #[serde(serialize_with = "crate::proto::serde_util::u64_as_i64")]
        skip: u64,
        /// The order of the results (`sort`).
        sort: Document,
        /// Variables usable as `$$name` in the filter (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// Where to read; the collection's read preference when unset.
        #[serde(skip)]
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation (overrides the collection's).
        #[serde(skip_serializing)]
        read_concern: ReadConcern,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `find_one`: [`FindOptions`] without the cursor's
    /// (a single batch of one document).
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FindOneOptions {
        /// Returns partial results when some shards are down (`allowPartialResults`).
        allow_partial_results: bool,
        /// Language rules for string comparison (`collation`).
        collation: Collation,
        /// Attached to the command for logs and profiling (`comment`).
        comment: Bson,
        /// The index to use (`hint`).
        hint: Hint,
        /// Exclusive upper bound of the index keys (`max`).
        max: Document,
        /// Most documents or index keys to scan (`maxScan`; see [`FindOptions::max_scan`]).
        #[deprecated = "no MongoDB server since 4.0 supports maxScan; use `max_time`"]
        max_scan: u64,
        /// The server's time limit (`maxTimeMS`).
        #[serde(default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
        max_time: Duration,
        /// Inclusive lower bound of the index keys (`min`).
        min: Document,
        /// The fields to return (`projection`).
        projection: Document,
        /// The read concern.
        read_concern: ReadConcern,
        /// Returns only the index keys (`returnKey`).
        return_key: bool,
        /// Where the read goes.
        selection_criteria: SelectionCriteria,
        /// Adds `$recordId` (`showRecordId`).
        show_record_id: bool,
        /// Documents to skip (`skip`).
        skip: u64,
        /// Which document comes first (`sort`).
        sort: Document,
        /// Variables for the filter's `$$` expressions (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

#[allow(deprecated)] // max_scan carries over
impl From<FindOneOptions> for FindOptions {
    fn from(one: FindOneOptions) -> Self {
        FindOptions {
            allow_partial_results: one.allow_partial_results,
            collation: one.collation,
            comment: one.comment,
            hint: one.hint,
            max: one.max,
            max_scan: one.max_scan,
            max_time: one.max_time,
            min: one.min,
            projection: one.projection,
            read_concern: one.read_concern,
            return_key: one.return_key,
            selection_criteria: one.selection_criteria,
            show_record_id: one.show_record_id,
            skip: one.skip,
            sort: one.sort,
            let_vars: one.let_vars,
            raw_data: one.raw_data,
            ..FindOptions::default()
        }
    }
}

impl From<FindOneOptions> for Box<FindOptions> {
    fn from(one: FindOneOptions) -> Self {
        Box::new(one.into())
    }
}

/// How strictly a collection's validator applies (`validationLevel`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ValidationLevel {
    /// No validation.
    Off,
    /// Every insert and update is validated (the default).
    Strict,
    /// Only documents that were valid before an update are validated.
    Moderate,
}

/// What happens to a document that fails validation (`validationAction`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ValidationAction {
    /// The write is rejected (the default).
    Error,
    /// The write goes through and the server logs a warning.
    Warn,
}

impl ValidationLevel {
    /// The server's name for the level.
    pub fn as_str(&self) -> &'static str {
        match self {
            ValidationLevel::Off => "off",
            ValidationLevel::Strict => "strict",
            ValidationLevel::Moderate => "moderate",
        }
    }
}

impl ValidationAction {
    /// The server's name for the action.
    pub fn as_str(&self) -> &'static str {
        match self {
            ValidationAction::Error => "error",
            ValidationAction::Warn => "warn",
        }
    }
}

options_struct! {
    /// Options of `insert_one`.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct InsertOneOptions {
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `insert_many`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct InsertManyOptions {
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// Stop at the first failed document (`true`, the default) or try all.
        ordered: bool,
        /// The write concern of this operation.
        #[serde(skip)]
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `update_one` and `update_many`.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct UpdateOptions {
        /// Which array elements filtered positional operators apply to (`arrayFilters`).
        array_filters: Vec<Document>,
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// Inserts a document when none matches (`upsert`).
        upsert: bool,
        /// `collation`.
        collation: Collation,
        /// `hint`.
        hint: Hint,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// Variables usable as `$$name` (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// Which matching document `update_one` changes (`sort`, MongoDB 8.0+;
        /// not allowed for `update_many`).
        sort: Document,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `replace_one`.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ReplaceOptions {
        /// Skips document validation (`bypassDocumentValidation`).
        bypass_document_validation: bool,
        /// Inserts the replacement when no document matches (`upsert`).
        upsert: bool,
        /// `collation`.
        collation: Collation,
        /// `hint`.
        hint: Hint,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// Variables usable as `$$name` (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// Which matching document is replaced (`sort`, MongoDB 8.0+).
        sort: Document,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `delete_one` and `delete_many`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DeleteOptions {
        /// `collation`.
        collation: Collation,
        /// `hint`.
        hint: Hint,
        /// The write concern of this operation.
        #[serde(skip_serializing)]
        write_concern: WriteConcern,
        /// Variables usable as `$$name` (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `find_one_and_delete`.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FindOneAndDeleteOptions {
        /// Server-side time limit (`maxTimeMS`).
        #[serde(default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
        max_time: Duration,
        /// Which fields of the returned document to include (`fields`).
        projection: Document,
        /// Which matching document is deleted (`sort`).
        sort: Document,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// `collation`.
        collation: Collation,
        /// `hint`.
        hint: Hint,
        /// Variables usable as `$$name` (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `find_one_and_update`.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FindOneAndUpdateOptions {
        /// `arrayFilters`.
        array_filters: Vec<Document>,
        /// `bypassDocumentValidation`.
        bypass_document_validation: bool,
        /// Server-side time limit (`maxTimeMS`).
        #[serde(default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
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
        collation: Collation,
        /// `hint`.
        hint: Hint,
        /// Variables usable as `$$name` (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `find_one_and_replace`.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct FindOneAndReplaceOptions {
        /// `bypassDocumentValidation`.
        bypass_document_validation: bool,
        /// Server-side time limit (`maxTimeMS`).
        #[serde(default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
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
        collation: Collation,
        /// `hint`.
        hint: Hint,
        /// Variables usable as `$$name` (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `count_documents`.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CountOptions {
        /// `hint` (of the `aggregate`).
        hint: Hint,
        /// Count at most this many documents (a `$limit` stage).
        limit: u64,
        /// Server-side time limit (`maxTimeMS`).
        #[serde(default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
        max_time: Duration,
        /// Documents to skip before counting (a `$skip` stage).
        skip: u64,
        /// `collation`.
        collation: Collation,
        /// `comment`.
        comment: Bson,
        /// Where to read.
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation.
        read_concern: ReadConcern,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `estimated_document_count`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct EstimatedDocumentCountOptions {
        /// Server-side time limit (`maxTimeMS`).
        #[serde(rename = "maxTimeMS", default, with = "crate::proto::serde_util::millis")]
        max_time: Duration,
        /// `comment`.
        comment: Bson,
        /// Where to read.
        #[serde(skip_serializing)]
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation.
        #[serde(skip_serializing)]
        read_concern: ReadConcern,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `distinct`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DistinctOptions {
        /// Server-side time limit (`maxTimeMS`).
        #[serde(rename = "maxTimeMS", default, with = "crate::proto::serde_util::millis")]
        max_time: Duration,
        /// `collation`.
        collation: Collation,
        /// `comment`.
        comment: Bson,
        /// `hint` (MongoDB 7.1+).
        hint: Hint,
        /// Where to read.
        #[serde(skip_serializing)]
        selection_criteria: SelectionCriteria,
        /// The read concern of this operation.
        #[serde(skip_serializing)]
        read_concern: ReadConcern,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `aggregate`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct AggregateOptions {
        /// `allowDiskUse`.
        allow_disk_use: bool,
        /// Documents per batch (`cursor.batchSize`, and the `getMore`s');
        /// ignored for pipelines ending in `$out`/`$merge`, which return nothing.
        #[serde(serialize_with = "crate::proto::serde_util::batch_size_as_cursor", rename(serialize = "cursor"))]
        batch_size: u32,
        /// `bypassDocumentValidation` (for `$out`/`$merge`).
        bypass_document_validation: bool,
        /// `collation`.
        collation: Collation,
        /// `comment`.
        comment: Bson,
        /// `hint`.
        hint: Hint,
        /// Server-side time limit of the `aggregate` (`maxTimeMS`).
        #[serde(rename = "maxTimeMS", default, with = "crate::proto::serde_util::millis")]
        max_time: Duration,
        /// For tailable-await cursors (change streams): the `getMore`s' `maxTimeMS`.
        #[serde(skip_serializing, default, deserialize_with = "crate::proto::serde_util::millis::deserialize")]
        max_await_time: Duration,
        /// Variables usable as `$$name` (`let`).
        #[serde(rename = "let")]
        let_vars: Document,
        /// The write concern (for `$out`/`$merge`).
        #[serde(skip_serializing)]
        write_concern: WriteConcern,
        /// The read concern of this operation.
        #[serde(skip_serializing)]
        read_concern: ReadConcern,
        /// Where to read.
        #[serde(skip_serializing, rename = "readPreference")]
        selection_criteria: SelectionCriteria,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `create_collection` (the `create` command).
    #[derive(PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct CreateCollectionOptions {
        /// A capped collection (`capped`); needs `size`.
        capped: bool,
        /// Maximum size in bytes of a capped collection (`size`).
        #[serde(
            deserialize_with = "crate::proto::serde_util::option_u64_from_number",
            default
        )]
        size: u64,
        /// Maximum number of documents of a capped collection (`max`).
        max: u64,
        /// `storageEngine`.
        storage_engine: Document,
        /// `validator`.
        validator: Document,
        /// `validationLevel` (`off`, `strict`, `moderate`).
        validation_level: ValidationLevel,
        /// `validationAction` (`error`, `warn`).
        validation_action: ValidationAction,
        /// Makes a view on this collection (`viewOn`).
        view_on: String,
        /// The view's pipeline (`pipeline`).
        pipeline: Vec<Document>,
        /// `collation`.
        collation: Collation,
        /// The write concern of this operation.
        write_concern: WriteConcern,
        /// The defaults of its indexes (`indexOptionDefaults`).
        index_option_defaults: IndexOptionDefaults,
        /// Makes a time-series collection (`timeseries`, MongoDB 5.0+).
        timeseries: TimeseriesOptions,
        /// How long after its time a document expires (`expireAfterSeconds`,
        /// sent as whole seconds; time series and clustered collections).
        #[serde(default, with = "crate::proto::serde_util::seconds")]
        expire_after_seconds: Duration,
        /// Whether change streams can see documents before and after each
        /// change (`changeStreamPreAndPostImages`, MongoDB 6.0+).
        change_stream_pre_and_post_images: ChangeStreamPreAndPostImages,
        /// Makes a clustered collection (`clusteredIndex`, MongoDB 5.3+);
        /// read from the index document or from `true` (the default
        /// index), as servers list it.
        #[serde(default, deserialize_with = "ClusteredIndex::deserialize_self_or_true")]
        clustered_index: ClusteredIndex,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `drop` (a collection).
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DropCollectionOptions {
        /// The write concern of this operation.
        #[serde(skip_serializing)]
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
    }
}

options_struct! {
    /// Options of a database's `drop` (`dropDatabase`).
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct DropDatabaseOptions {
        /// The write concern of the drop.
        #[serde(skip)]
        write_concern: WriteConcern,
    }
}

options_struct! {
    /// Options of `run_command` / `run_raw_command`.
    pub struct RunCommandOptions {
        /// Where to run the command: the primary unless set (the client's
        /// default read preference does not apply to `runCommand`).
        selection_criteria: SelectionCriteria,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `list_collections` / `list_collection_names`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ListCollectionsOptions {
        /// Documents per batch (`cursor.batchSize`).
        #[serde(serialize_with = "crate::proto::serde_util::batch_size_as_cursor", rename(serialize = "cursor"))]
        batch_size: u32,
        /// Which collections to list (`filter`).
        filter: Document,
        /// Only names and types, which avoids locks (`nameOnly`).
        name_only: bool,
        /// Only collections the user may act on (`authorizedCollections`).
        authorized_collections: bool,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `run_cursor_command`: they shape the `getMore`s and the
    /// server selection; the command itself is sent as given.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[serde(default)]
    pub struct RunCursorCommandOptions {
        /// Where to run the command (the primary unless set).
        selection_criteria: SelectionCriteria,
        /// Whether the cursor stays open after an empty batch: set it as
        /// the command asked (`tailable: true` in a `find`).
        cursor_type: CursorType,
        /// The `batchSize` of each `getMore`.
        batch_size: u32,
        /// The `maxTimeMS` of each `getMore`.
        #[serde(rename = "maxtime", alias = "maxTimeMS", deserialize_with = "crate::proto::serde_util::millis::deserialize")]
        max_time: Duration,
        /// The `comment` of each `getMore`.
        comment: Bson,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `list_databases` / `list_database_names`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
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
    #[skip_serializing_none]
    /// Options of `create_index` / `create_indexes`.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct CreateIndexOptions {
        /// How many data-bearing members must be ready (`commitQuorum`, 4.4+).
        commit_quorum: CommitQuorum,
        /// Server-side time limit (`maxTimeMS`).
        #[serde(rename = "maxTimeMS", default, with = "crate::proto::serde_util::millis")]
        max_time: Duration,
        /// The write concern of this operation.
        #[serde(skip_serializing)]
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `list_indexes`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct ListIndexesOptions {
        /// Server-side time limit of the `listIndexes` (`maxTimeMS`).
        #[serde(rename = "maxTimeMS", default, with = "crate::proto::serde_util::millis")]
        max_time: Duration,
        /// Documents per batch (`cursor.batchSize`).
        #[serde(default, skip_serializing)]
        batch_size: u32,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `drop_index` / `drop_indexes`.
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct DropIndexOptions {
        /// Server-side time limit (`maxTimeMS`).
        #[serde(rename = "maxTimeMS", default, with = "crate::proto::serde_util::millis")]
        max_time: Duration,
        /// The write concern of this operation.
        #[serde(skip_serializing)]
        write_concern: WriteConcern,
        /// `comment`.
        comment: Bson,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        raw_data: bool,
    }
}

options_struct! {
    /// Options of `bulk_write` (the classic per-collection bulk API).
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct BulkWriteOptions {
        /// Stop at the first failed statement (`true`, the default) or try all.
        #[serde(serialize_with = "crate::proto::serde_util::bool_or_true")]
        ordered: bool,
        /// `bypassDocumentValidation`.
        #[serde(skip_serializing_if = "Option::is_none")]
        bypass_document_validation: bool,
        /// Variables usable as `$$name` in updates and deletes (`let`).
        #[serde(rename = "let")]
        #[serde(skip_serializing_if = "Option::is_none")]
        let_vars: Document,
        /// `comment`.
        #[serde(skip_serializing_if = "Option::is_none")]
        comment: Bson,
        /// The write concern of this operation.
        #[serde(skip_serializing)]
        write_concern: WriteConcern,
        /// On a time-series collection, act on its buckets as stored
        /// (`rawData`; MongoDB 8.2+, an error on older servers).
        #[serde(skip_serializing_if = "Option::is_none")]
        raw_data: bool,
    }
}

/// An index to create: its key pattern and its options.
///
/// ```
/// use mongo_inline::bson::doc;
/// use mongo_inline::options::{IndexModel, IndexOptions};
/// use std::time::Duration;
///
/// let by_email = IndexModel::new(doc! { "email": 1 })
///     .options(IndexOptions::default().unique(true).name("by_email".to_string()));
/// assert_eq!(by_email.name(), "by_email");
/// let sessions = IndexModel::new(doc! { "at": 1 })
///     .options(IndexOptions::default().expire_after(Duration::from_secs(3600)));
/// assert_eq!(sessions.name(), "at_1");
/// ```
#[derive(Clone, Debug, Default, PartialEq, typed_builder::TypedBuilder)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct IndexModel {
    /// The key pattern, e.g. `{ email: 1 }` or `{ loc: "2dsphere" }`.
    pub keys: Document,
    /// The index's options; its name is generated from the keys when they
    /// give none.
    pub options: Option<IndexOptions>,
}

impl IndexModel {
    /// An index as `listIndexes` describes it: `key`, and the rest as its
    /// options (the server's `v` and `ns` included).
    pub(crate) fn from_listed(mut spec: Document) -> Self {
        let keys = match spec.remove("key") {
            Some(Bson::Document(keys)) => keys,
            _ => Document::new(),
        };
        IndexModel {
            keys,
            options: Some(IndexOptions::from(spec)),
        }
    }

    /// An index on `keys` with no options.
    pub fn new(keys: Document) -> Self {
        IndexModel {
            keys,
            options: None,
        }
    }

    /// This index with `options`: typed [`IndexOptions`], or a document of
    /// index specification fields (those [`IndexOptions`] names are read
    /// into their fields, the rest are sent as given).
    #[must_use]
    pub fn options(mut self, options: impl Into<IndexOptions>) -> Self {
        self.options = Some(options.into());
        self
    }

    /// The index's name: the one its options give, else the server's
    /// convention (`<key>_<direction>` joined by `_`).
    pub fn name(&self) -> String {
        if let Some(name) = self.options.as_ref().and_then(|o| o.name.as_ref()) {
            return name.clone();
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

impl<'de> Deserialize<'de> for IndexModel {
    /// An index as `listIndexes` reports it.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Document::deserialize(deserializer).map(IndexModel::from_listed)
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of one index: the fields of its `createIndexes`
    /// specification besides `key` (the index-management spec's options).
    #[derive(PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct IndexOptions {
        /// Build in the background (`background`): sent as given, as the
        /// official driver does; servers since 4.2 ignore it.
        #[deprecated = "servers since 4.2 ignore `background`"]
        background: bool,
        /// The index's name (`name`); generated from the keys when unset.
        name: String,
        /// Rejects documents with a key already present (`unique`).
        unique: bool,
        /// Indexes only documents that have the field (`sparse`).
        sparse: bool,
        /// A TTL index: documents expire this long after the indexed date
        /// (`expireAfterSeconds`, whole seconds).
        #[serde(
            rename = "expireAfterSeconds",
            default,
            with = "crate::proto::serde_util::seconds"
        )]
        expire_after: Duration,
        /// Indexes only documents matching this filter (`partialFilterExpression`).
        partial_filter_expression: Document,
        /// Hidden from the query planner (`hidden`).
        hidden: bool,
        /// Language rules for string keys (`collation`).
        collation: Collation,
        /// Text index: the weight of each field (`weights`).
        weights: Document,
        /// Text index: the default language (`default_language`).
        #[serde(rename = "default_language")]
        default_language: String,
        /// Text index: the field naming each document's language (`language_override`).
        #[serde(rename = "language_override")]
        language_override: String,
        /// Text index version (`textIndexVersion`).
        text_index_version: TextIndexVersion,
        /// Wildcard index: the fields it covers (`wildcardProjection`).
        wildcard_projection: Document,
        /// 2dsphere index version (`2dsphereIndexVersion`).
        #[serde(rename = "2dsphereIndexVersion")]
        sphere_2d_index_version: Sphere2DIndexVersion,
        /// 2d index: geohash precision (`bits`, 1 to 32).
        #[serde(serialize_with = "crate::proto::serde_util::u32_as_i32")]
        bits: u32,
        /// 2d index: lower bound of the coordinates (`min`).
        min: f64,
        /// 2d index: upper bound of the coordinates (`max`).
        max: f64,
        /// geoHaystack index: the units grouped per bucket (`bucketSize`;
        /// servers since 5.0 have no geoHaystack indexes).
        #[serde(serialize_with = "crate::proto::serde_util::u32_as_i32")]
        bucket_size: u32,
        /// Storage-engine settings (`storageEngine`).
        storage_engine: Document,
        /// Index version (`v`).
        #[serde(rename = "v")]
        version: IndexVersion,
        /// Specification fields this type does not name, sent as given.
        #[serde(flatten)]
        other: Document,
        ; read_only
        /// `clustered`, as read from a listing: see [`IndexOptions::clustered()`].
        clustered: bool,
    }
}

impl IndexOptions {
    /// Whether this is a clustered collection's clustered index
    /// (`clustered`, MongoDB 6.0+), as `listIndexes` reports it; an index
    /// read from a listing sends it back in `createIndexes` as read. There
    /// is no setter, as in the official driver: a clustered index is made
    /// by `create_collection`'s `clustered_index`.
    pub fn clustered(&self) -> Option<bool> {
        self.clustered
    }
}

impl IndexOptions {
    /// The deprecated `background`, sent as given, as the official driver
    /// does (servers since 4.2 ignore it).
    #[allow(deprecated)]
    fn background_as_given(&self) -> Option<bool> {
        self.background
    }

    /// The specification fields these options set (besides `key`).
    pub fn to_document(&self) -> Document {
        let mut spec = self.named_fields();
        for (key, value) in self.other.iter().flatten() {
            if !spec.contains_key(key) {
                spec.insert(key.clone(), value.clone());
            }
        }
        spec
    }

    /// The specification fields of the options this type names.
    fn named_fields(&self) -> Document {
        let mut spec = Document::new();
        let mut put = |key: &str, value: Option<Bson>| {
            if let Some(value) = value {
                spec.insert(key, value);
            }
        };
        put("background", self.background_as_given().map(Bson::Boolean));
        put("name", self.name.clone().map(Bson::String));
        put("unique", self.unique.map(Bson::Boolean));
        put("sparse", self.sparse.map(Bson::Boolean));
        put(
            "expireAfterSeconds",
            self.expire_after
                .map(|d| Bson::Int64(i64::try_from(d.as_secs()).unwrap_or(i64::MAX))),
        );
        put(
            "partialFilterExpression",
            self.partial_filter_expression.clone().map(Bson::Document),
        );
        put("hidden", self.hidden.map(Bson::Boolean));
        put("collation", self.collation.clone().map(Bson::from));
        put("weights", self.weights.clone().map(Bson::Document));
        put(
            "default_language",
            self.default_language.clone().map(Bson::String),
        );
        put(
            "language_override",
            self.language_override.clone().map(Bson::String),
        );
        put(
            "textIndexVersion",
            self.text_index_version.clone().map(Bson::from),
        );
        put(
            "wildcardProjection",
            self.wildcard_projection.clone().map(Bson::Document),
        );
        put(
            "2dsphereIndexVersion",
            self.sphere_2d_index_version.clone().map(Bson::from),
        );
        // The server's `int` (larger values are outside its range anyway).
        let int32 = |n: u32| Bson::Int32(i32::try_from(n).unwrap_or(i32::MAX));
        put("bits", self.bits.map(int32));
        put("min", self.min.map(Bson::Double));
        put("max", self.max.map(Bson::Double));
        put("bucketSize", self.bucket_size.map(int32));
        put(
            "storageEngine",
            self.storage_engine.clone().map(Bson::Document),
        );
        put("v", self.version.clone().map(Bson::from));
        put("clustered", self.clustered.map(Bson::Boolean));
        spec
    }
}

impl From<Document> for IndexOptions {
    /// Reads the fields this type names (when their values have the
    /// expected type) and keeps the rest in [`IndexOptions::other`].
    fn from(spec: Document) -> Self {
        let mut options = IndexOptions::default();
        let mut other = Document::new();
        for (key, value) in spec {
            if !options.read_field(&key, &value) {
                other.insert(key, value);
            }
        }
        if !other.is_empty() {
            options.other = Some(other);
        }
        options
    }
}

impl IndexOptions {
    /// Sets the field an index specification's `key` names, if `value`
    /// has its type and it is not set yet; false when it is left.
    fn read_field(&mut self, key: &str, value: &Bson) -> bool {
        let text = || value.as_str().map(str::to_string);
        let document = || value.as_document().cloned();
        match key {
            "name" => take(&mut self.name, text()),
            "unique" => take(&mut self.unique, value.as_bool()),
            "sparse" => take(&mut self.sparse, value.as_bool()),
            "hidden" => take(&mut self.hidden, value.as_bool()),
            "expireAfterSeconds" => take(&mut self.expire_after, whole_seconds(value)),
            "partialFilterExpression" => take(&mut self.partial_filter_expression, document()),
            "collation" => take(
                &mut self.collation,
                document().and_then(|d| bson::from_document(d).ok()),
            ),
            "weights" => take(&mut self.weights, document()),
            "default_language" => take(&mut self.default_language, text()),
            "language_override" => take(&mut self.language_override, text()),
            "textIndexVersion" => take(
                &mut self.text_index_version,
                version_number(value).and_then(TextIndexVersion::from_number),
            ),
            "wildcardProjection" => take(&mut self.wildcard_projection, document()),
            "2dsphereIndexVersion" => take(
                &mut self.sphere_2d_index_version,
                version_number(value).and_then(Sphere2DIndexVersion::from_number),
            ),
            "bits" => take(
                &mut self.bits,
                version_number(value).and_then(|n| u32::try_from(n).ok()),
            ),
            "clustered" => take(&mut self.clustered, value.as_bool()),
            "min" => take(&mut self.min, value.as_f64()),
            "max" => take(&mut self.max, value.as_f64()),
            "bucketSize" => take(
                &mut self.bucket_size,
                version_number(value).and_then(|n| u32::try_from(n).ok()),
            ),
            #[allow(deprecated)] // read back as listed, as the official driver does
            "background" => take(&mut self.background, value.as_bool()),
            "storageEngine" => take(&mut self.storage_engine, document()),
            "v" => take(
                &mut self.version,
                version_number(value).and_then(IndexVersion::from_number),
            ),
            _ => false,
        }
    }
}

/// Fills `slot` with `value` when it is empty and `value` is some.
fn take<T>(slot: &mut Option<T>, value: Option<T>) -> bool {
    match value {
        Some(value) if slot.is_none() => {
            *slot = Some(value);
            true
        }
        _ => false,
    }
}

/// A whole number (an index version, `bits`, `bucketSize`) as a listing
/// gives it (an `int`, a `long` or a whole `double`), when it is one.
fn version_number(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(v) => Some(i64::from(*v)),
        Bson::Int64(v) => Some(*v),
        Bson::Double(v) if v.fract() == 0.0 && v.abs() <= f64::from(u32::MAX) => Some(*v as i64),
        _ => None,
    }
}

/// `expireAfterSeconds` as a duration, when it is a non-negative whole number.
fn whole_seconds(value: &Bson) -> Option<Duration> {
    let seconds = match value {
        Bson::Int32(v) => i64::from(*v),
        Bson::Int64(v) => *v,
        Bson::Double(v) if v.fract() == 0.0 && *v >= 0.0 && *v <= f64::from(u32::MAX) => *v as i64,
        _ => return None,
    };
    u64::try_from(seconds).ok().map(Duration::from_secs)
}

options_struct! {
    /// The per-statement options of an `UpdateOne`/`UpdateMany` bulk write model.
    #[derive(PartialEq)]
    pub struct UpdateModelOptions {
        /// `arrayFilters`.
        array_filters: Vec<Document>,
        /// `collation`.
        collation: Collation,
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
        collation: Collation,
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
        collation: Collation,
        /// `hint`.
        hint: Hint,
    }
}

/// Read from `"after"`/`"before"`, in any case.
impl<'de> Deserialize<'de> for ReturnDocument {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        match name.to_lowercase().as_str() {
            "after" => Ok(ReturnDocument::After),
            "before" => Ok(ReturnDocument::Before),
            other => Err(serde::de::Error::custom(format!(
                "Unknown return document value: {other}"
            ))),
        }
    }
}

impl From<ValidationLevel> for Bson {
    fn from(level: ValidationLevel) -> Self {
        Bson::String(level.as_str().to_string())
    }
}

impl From<ValidationAction> for Bson {
    fn from(action: ValidationAction) -> Self {
        Bson::String(action.as_str().to_string())
    }
}

impl CreateCollectionOptions {
    /// The options `listCollections` reports a collection was created with
    /// (its `options` document); fields of an unexpected type are left unset.
    pub(crate) fn from_listed(listed: &Document) -> Self {
        use crate::proto::operation::bson_to_u64;
        let doc = |key: &str| listed.get_document(key).ok().cloned();
        let text = |key: &str| listed.get_str(key).ok();
        CreateCollectionOptions {
            capped: listed.get_bool("capped").ok(),
            size: listed.get("size").and_then(bson_to_u64),
            max: listed.get("max").and_then(bson_to_u64),
            storage_engine: doc("storageEngine"),
            validator: doc("validator"),
            validation_level: text("validationLevel").and_then(|l| match l {
                "off" => Some(ValidationLevel::Off),
                "strict" => Some(ValidationLevel::Strict),
                "moderate" => Some(ValidationLevel::Moderate),
                _ => None,
            }),
            validation_action: text("validationAction").and_then(|a| match a {
                "error" => Some(ValidationAction::Error),
                "warn" => Some(ValidationAction::Warn),
                _ => None,
            }),
            view_on: text("viewOn").map(str::to_string),
            pipeline: listed.get_array("pipeline").ok().map(|stages| {
                stages
                    .iter()
                    .filter_map(|s| s.as_document().cloned())
                    .collect()
            }),
            collation: doc("collation").and_then(|c| bson::from_document(c).ok()),
            write_concern: None,
            index_option_defaults: doc("indexOptionDefaults")
                .and_then(|d| bson::from_document(d).ok()),
            timeseries: doc("timeseries").and_then(|d| bson::from_document(d).ok()),
            expire_after_seconds: listed
                .get("expireAfterSeconds")
                .and_then(bson_to_u64)
                .map(Duration::from_secs),
            change_stream_pre_and_post_images: doc("changeStreamPreAndPostImages")
                .and_then(|d| bson::from_document(d).ok()),
            clustered_index: listed
                .get("clusteredIndex")
                .and_then(ClusteredIndex::from_listed),
            comment: None,
        }
    }
}

impl CreateCollectionOptions {
    /// Appends the creation fields these options set to `body` (the
    /// `create` command, or the serialized options).
    pub(crate) fn append_to(&self, body: &mut Document) {
        use crate::proto::operation::{append_option, count_bson};
        append_option(body, "capped", self.capped);
        append_option(body, "size", self.size.map(count_bson));
        append_option(body, "max", self.max.map(count_bson));
        append_option(body, "storageEngine", self.storage_engine.clone());
        append_option(body, "validator", self.validator.clone());
        append_option(body, "validationLevel", self.validation_level.clone());
        append_option(body, "validationAction", self.validation_action.clone());
        append_option(body, "viewOn", self.view_on.clone());
        append_option(body, "pipeline", self.pipeline.clone());
        append_option(body, "collation", self.collation.clone());
        append_option(
            body,
            "indexOptionDefaults",
            self.index_option_defaults.clone(),
        );
        append_option(body, "timeseries", self.timeseries.clone());
        append_option(
            body,
            "expireAfterSeconds",
            self.expire_after_seconds.map(|d| seconds_bson(d.as_secs())),
        );
        append_option(
            body,
            "changeStreamPreAndPostImages",
            self.change_stream_pre_and_post_images.clone(),
        );
        append_option(body, "clusteredIndex", self.clustered_index.clone());
    }
}

/// Whole seconds as the official driver writes them: an `int` when they
/// fit, else a `long`.
fn seconds_bson(seconds: u64) -> Bson {
    i32::try_from(seconds).map_or_else(
        |_| crate::proto::operation::count_bson(seconds),
        Bson::Int32,
    )
}

impl Serialize for CreateCollectionOptions {
    /// The options as the `create` command's fields, camelCase.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut fields = Document::new();
        self.append_to(&mut fields);
        crate::proto::operation::append_option(&mut fields, "comment", self.comment.clone());
        fields.serialize(serializer)
    }
}

impl Serialize for IndexModel {
    /// The index's specification: `key` and its options' fields.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut spec = bson::doc! { "key": self.keys.clone() };
        if let Some(options) = &self.options {
            spec.extend(options.to_document());
        }
        spec.serialize(serializer)
    }
}

/// The defaults a [`Database`](crate::Database) handle gives its
/// collections and operations, for
/// [`Client::database_with_options`](crate::Client::database_with_options):
/// each one unset is the client's.
#[derive(Clone, Debug, Default, PartialEq, typed_builder::TypedBuilder)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
#[derive(Deserialize)]
pub struct DatabaseOptions {
    /// The read preference (or predicate) of its reads.
    pub selection_criteria: Option<SelectionCriteria>,
    /// The read concern of its reads.
    pub read_concern: Option<ReadConcern>,
    /// The write concern of its writes.
    pub write_concern: Option<WriteConcern>,
}

/// The defaults a [`Collection`](crate::Collection) handle gives its
/// operations, for
/// [`Database::collection_with_options`](crate::Database::collection_with_options):
/// each one unset is the database's. An operation's own option wins over
/// the handle's.
#[derive(Clone, Debug, Default, PartialEq, typed_builder::TypedBuilder)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectionOptions {
    /// The read preference (or predicate) of its reads.
    pub selection_criteria: Option<SelectionCriteria>,
    /// The read concern of its reads.
    pub read_concern: Option<ReadConcern>,
    /// The write concern of its writes.
    pub write_concern: Option<WriteConcern>,
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
    fn index_options_round_trip_through_documents() {
        let spec = doc! {
            "name": "ttl", "unique": true, "expireAfterSeconds": 60,
            "partialFilterExpression": { "a": { "$gt": 1 } }, "v": 2,
            "futureOption": "kept", "sparse": "not a bool",
            "textIndexVersion": 3, "2dsphereIndexVersion": 9_i64,
            "background": true, "bucketSize": 5, "bits": 26_i64, "clustered": true,
        };
        let options = IndexOptions::from(spec.clone());
        assert_eq!(options.bits, Some(26));
        assert_eq!(options.clustered(), Some(true));
        // The official deprecated options are read back and sent as given.
        #[allow(deprecated)]
        let background = options.background;
        assert_eq!(background, Some(true));
        assert_eq!(options.bucket_size, Some(5));
        assert_eq!(options.name.as_deref(), Some("ttl"));
        assert_eq!(options.unique, Some(true));
        assert_eq!(options.expire_after, Some(Duration::from_secs(60)));
        assert_eq!(options.version, Some(IndexVersion::V2));
        assert_eq!(options.text_index_version, Some(TextIndexVersion::V3));
        assert_eq!(
            options.sphere_2d_index_version,
            Some(Sphere2DIndexVersion::Custom(9))
        );
        // A field of an unexpected type is not dropped: it is sent as given.
        assert_eq!(options.sparse, None);
        assert_eq!(
            options.other,
            Some(doc! { "futureOption": "kept", "sparse": "not a bool" })
        );
        let sent = options.to_document();
        assert_eq!(sent.get_i64("expireAfterSeconds"), Ok(60));
        // Versions go as the server's `int`, as the official driver sends them.
        assert_eq!(sent.get_i32("textIndexVersion"), Ok(3));
        assert_eq!(sent.get_i32("2dsphereIndexVersion"), Ok(9));
        assert_eq!(sent.get_i32("v"), Ok(2));
        assert_eq!(sent.get_bool("background"), Ok(true));
        assert_eq!(sent.get_i32("bucketSize"), Ok(5));
        assert_eq!(sent.get_i32("bits"), Ok(26));
        assert_eq!(sent.get_bool("clustered"), Ok(true));
        for key in spec.keys() {
            assert!(sent.contains_key(key), "{key} is not sent");
        }
        assert_eq!(
            IndexOptions::from(doc! { "expireAfterSeconds": -1 }).expire_after,
            None
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
        let typed = IndexModel::new(doc! { "a": 1 })
            .options(IndexOptions::default().name("typed".to_string()));
        assert_eq!(typed.name(), "typed");
    }
}
