//! The client-level bulk write's public types (the bulk-write spec, MongoDB
//! 8.0's `bulkWrite` command): the write models, each naming its own
//! namespace, the summary and verbose results, and the error that carries
//! what did succeed. Shaped as the official driver's (`mongodb` 3.x).
//!
//! The collection-level API ([`CollectionWriteModel`](crate::options::CollectionWriteModel))
//! is a different one: one namespace, the classic `insert`/`update`/`delete`
//! commands, any server version.

use std::collections::HashMap;
use std::fmt;

use bson::{Array, Bson, Document};
use typed_builder::TypedBuilder;

use crate::error::{Error, Result};
use crate::proto::coll_options::DeleteModelOptions;
use crate::proto::results::{DeleteResult, InsertOneResult, UpdateResult};
use crate::proto::results::{WriteConcernError, WriteError};
use crate::proto::write_model::{
    first_key_is_operator, kind_and_arguments, CollectionWriteModel, UpdateModifications,
};
use crate::Namespace;

/// One write of a [`Client::bulk_write`](crate::Client::bulk_write).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum WriteModel {
    InsertOne(InsertOneModel),
    UpdateOne(UpdateOneModel),
    UpdateMany(UpdateManyModel),
    ReplaceOne(ReplaceOneModel),
    DeleteOne(DeleteOneModel),
    DeleteMany(DeleteManyModel),
}

/// Inserts one document (an `_id` is generated when it has none).
#[derive(Clone, Debug, PartialEq, TypedBuilder, serde::Serialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InsertOneModel {
    /// The collection to insert into.
    #[serde(skip_serializing)]
    #[builder(!default)]
    pub namespace: Namespace,
    /// The document.
    #[builder(!default)]
    pub document: Document,
}

/// Updates the first document matching `filter`.
#[derive(Clone, Debug, PartialEq, TypedBuilder, serde::Serialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct UpdateOneModel {
    /// The collection.
    #[serde(skip_serializing)]
    #[builder(!default)]
    pub namespace: Namespace,
    /// Which document.
    #[builder(!default)]
    pub filter: Document,
    /// Update operators or a pipeline.
    #[serde(rename(serialize = "updateMods"))]
    #[builder(!default)]
    pub update: UpdateModifications,
    /// Which array elements the update applies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_filters: Option<Array>,
    /// The collation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collation: Option<Document>,
    /// The index to use: its name or key pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<Bson>,
    /// Insert a document when none matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upsert: Option<bool>,
    /// Which of several matching documents is updated (the first in this order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort: Option<Document>,
}

/// Updates every document matching `filter`.
#[derive(Clone, Debug, PartialEq, TypedBuilder, serde::Serialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct UpdateManyModel {
    /// The collection.
    #[serde(skip_serializing)]
    #[builder(!default)]
    pub namespace: Namespace,
    /// Which documents.
    #[builder(!default)]
    pub filter: Document,
    /// Update operators or a pipeline.
    #[serde(rename(serialize = "updateMods"))]
    #[builder(!default)]
    pub update: UpdateModifications,
    /// Which array elements the update applies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_filters: Option<Array>,
    /// The collation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collation: Option<Document>,
    /// The index to use: its name or key pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<Bson>,
    /// Insert a document when none matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upsert: Option<bool>,
}

/// Replaces the first document matching `filter`.
#[derive(Clone, Debug, PartialEq, TypedBuilder, serde::Serialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReplaceOneModel {
    /// The collection.
    #[serde(skip_serializing)]
    #[builder(!default)]
    pub namespace: Namespace,
    /// Which document.
    #[builder(!default)]
    pub filter: Document,
    /// The new document (no update operators).
    #[serde(rename(serialize = "updateMods"))]
    #[builder(!default)]
    pub replacement: Document,
    /// The collation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collation: Option<Document>,
    /// The index to use: its name or key pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<Bson>,
    /// Insert the replacement when none matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upsert: Option<bool>,
    /// Which of several matching documents is replaced (the first in this order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort: Option<Document>,
}

/// Deletes the first document matching `filter`.
#[derive(Clone, Debug, PartialEq, TypedBuilder, serde::Serialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeleteOneModel {
    /// The collection.
    #[serde(skip_serializing)]
    #[builder(!default)]
    pub namespace: Namespace,
    /// Which document.
    #[builder(!default)]
    pub filter: Document,
    /// The collation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collation: Option<Document>,
    /// The index to use: its name or key pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<Bson>,
}

/// Deletes every document matching `filter`.
#[derive(Clone, Debug, PartialEq, TypedBuilder, serde::Serialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeleteManyModel {
    /// The collection.
    #[serde(skip_serializing)]
    #[builder(!default)]
    pub namespace: Namespace,
    /// Which documents.
    pub filter: Document,
    /// The collation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collation: Option<Document>,
    /// The index to use: its name or key pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<Bson>,
}

macro_rules! into_write_model {
    ($($model:ident => $variant:ident),* $(,)?) => {
        $(impl From<$model> for WriteModel {
            fn from(model: $model) -> Self {
                WriteModel::$variant(model)
            }
        })*
    };
}

into_write_model!(
    InsertOneModel => InsertOne,
    UpdateOneModel => UpdateOne,
    UpdateManyModel => UpdateMany,
    ReplaceOneModel => ReplaceOne,
    DeleteOneModel => DeleteOne,
    DeleteManyModel => DeleteMany,
);

/// Which kind of result a model's statement produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatementKind {
    Insert,
    Update,
    Delete,
}

impl WriteModel {
    /// The collection the write goes to.
    pub fn namespace(&self) -> &Namespace {
        match self {
            WriteModel::InsertOne(m) => &m.namespace,
            WriteModel::UpdateOne(m) => &m.namespace,
            WriteModel::UpdateMany(m) => &m.namespace,
            WriteModel::ReplaceOne(m) => &m.namespace,
            WriteModel::DeleteOne(m) => &m.namespace,
            WriteModel::DeleteMany(m) => &m.namespace,
        }
    }

    pub(crate) fn kind(&self) -> StatementKind {
        match self {
            WriteModel::InsertOne(_) => StatementKind::Insert,
            WriteModel::UpdateOne(_) | WriteModel::UpdateMany(_) | WriteModel::ReplaceOne(_) => {
                StatementKind::Update
            }
            WriteModel::DeleteOne(_) | WriteModel::DeleteMany(_) => StatementKind::Delete,
        }
    }

    /// Whether the write may touch several documents (which makes the
    /// command not retryable).
    pub(crate) fn is_multi(&self) -> bool {
        matches!(self, WriteModel::UpdateMany(_) | WriteModel::DeleteMany(_))
    }

    /// The bulk-write spec's client-side checks: an update needs operators,
    /// a replacement must have none.
    pub(crate) fn validate(&self, index: usize) -> Result<()> {
        let checked = match self {
            WriteModel::UpdateOne(UpdateOneModel { update, .. })
            | WriteModel::UpdateMany(UpdateManyModel { update, .. }) => update.validate(),
            WriteModel::ReplaceOne(ReplaceOneModel { replacement, .. })
                if first_key_is_operator(replacement) =>
            {
                Err(Error::invalid_argument(
                    "a replacement document must not contain update operators (keys starting with '$'); use an update",
                ))
            }
            _ => Ok(()),
        };
        checked.map_err(|e| Error::invalid_argument(format!("write model {index}: {e}")))
    }
}

impl WriteModel {
    /// A model from its CRUD-spec document (the unified test format's and
    /// the C ABI's form): as
    /// [`CollectionWriteModel::from_document`](crate::options::CollectionWriteModel::from_document),
    /// each model's arguments naming its collection as `namespace:
    /// "db.coll"`, e.g. `{insertOne: {namespace: "db.people", document:
    /// {...}}}`.
    pub fn from_document(model: Document) -> Result<Self> {
        let (kind, mut arguments) = kind_and_arguments(model)?;
        let namespace = match arguments.remove("namespace") {
            Some(Bson::String(full)) => match full.split_once('.') {
                Some((db, coll)) if !db.is_empty() && !coll.is_empty() => Namespace::new(db, coll),
                _ => {
                    return Err(Error::invalid_argument(format!(
                        "the {kind} write model's namespace \"{full}\" is not \"db.collection\""
                    )))
                }
            },
            _ => {
                return Err(Error::invalid_argument(format!(
                    "the {kind} write model needs a string \"namespace\" (\"db.collection\")"
                )))
            }
        };
        let model = CollectionWriteModel::from_document(bson::doc! { kind: arguments })?;
        Ok(Self::in_namespace(namespace, model))
    }

    /// The client-level model of a collection-level one.
    fn in_namespace(namespace: Namespace, model: CollectionWriteModel) -> Self {
        match model {
            CollectionWriteModel::InsertOne { document } => InsertOneModel {
                namespace,
                document,
            }
            .into(),
            CollectionWriteModel::DeleteOne { filter, options } => {
                let (collation, hint) = delete_options(options);
                DeleteOneModel {
                    namespace,
                    filter,
                    collation,
                    hint,
                }
                .into()
            }
            CollectionWriteModel::DeleteMany { filter, options } => {
                let (collation, hint) = delete_options(options);
                DeleteManyModel {
                    namespace,
                    filter,
                    collation,
                    hint,
                }
                .into()
            }
            updating => Self::update_in_namespace(namespace, updating),
        }
    }

    /// As [`in_namespace`](Self::in_namespace), for the updates and the
    /// replacement.
    fn update_in_namespace(namespace: Namespace, model: CollectionWriteModel) -> Self {
        match model {
            CollectionWriteModel::UpdateOne {
                filter,
                update,
                options: o,
            } => UpdateOneModel {
                namespace,
                filter,
                update,
                array_filters: as_array(o.array_filters),
                collation: o.collation.map(|c| c.to_document()),
                hint: o.hint.map(|h| h.to_bson()),
                upsert: o.upsert,
                sort: o.sort,
            }
            .into(),
            CollectionWriteModel::UpdateMany {
                filter,
                update,
                options: o,
            } => UpdateManyModel {
                namespace,
                filter,
                update,
                array_filters: as_array(o.array_filters),
                collation: o.collation.map(|c| c.to_document()),
                hint: o.hint.map(|h| h.to_bson()),
                upsert: o.upsert,
            }
            .into(),
            CollectionWriteModel::ReplaceOne {
                filter,
                replacement,
                options: o,
            } => ReplaceOneModel {
                namespace,
                filter,
                replacement,
                collation: o.collation.map(|c| c.to_document()),
                hint: o.hint.map(|h| h.to_bson()),
                upsert: o.upsert,
                sort: o.sort,
            }
            .into(),
            other => Self::in_namespace(namespace, other),
        }
    }
}

fn as_array(documents: Option<Vec<Document>>) -> Option<Array> {
    documents.map(|d| d.into_iter().map(Bson::Document).collect())
}

fn delete_options(options: DeleteModelOptions) -> (Option<Document>, Option<Bson>) {
    (
        options.collation.map(|c| c.to_document()),
        options.hint.map(|h| h.to_bson()),
    )
}

/// What a [`Client::bulk_write`](crate::Client::bulk_write) did, in sums.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct SummaryBulkWriteResult {
    /// Documents inserted.
    pub inserted_count: i64,
    /// Documents matched by updates and replacements.
    pub matched_count: i64,
    /// Documents changed by updates and replacements.
    pub modified_count: i64,
    /// Documents inserted by upserts.
    pub upserted_count: i64,
    /// Documents deleted.
    pub deleted_count: i64,
}

/// The sums and each successful write's own result, keyed by the write's
/// index in the caller's list (`.verbose_results()`).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct VerboseBulkWriteResult {
    /// The sums.
    pub summary: SummaryBulkWriteResult,
    /// Each successful insert.
    pub insert_results: HashMap<usize, InsertOneResult>,
    /// Each successful update or replacement.
    pub update_results: HashMap<usize, UpdateResult>,
    /// Each successful delete.
    pub delete_results: HashMap<usize, DeleteResult>,
}

/// What the writes that succeeded did, in a failed bulk write.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum PartialBulkWriteResult {
    /// The bulk write asked for sums only.
    Summary(SummaryBulkWriteResult),
    /// The bulk write asked for verbose results.
    Verbose(VerboseBulkWriteResult),
}

/// A [`Client::bulk_write`](crate::Client::bulk_write) in which writes
/// failed or a write concern was not satisfied. A failure of the command
/// itself (network, command error) after some writes were reported is the
/// [`Error::source`](crate::Error::source) of the error carrying this.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct BulkWriteError {
    /// The write concern errors, one per batch that had one.
    pub write_concern_errors: Vec<WriteConcernError>,
    /// The failed writes, keyed by index in the caller's list (at most one
    /// when ordered).
    pub write_errors: HashMap<usize, WriteError>,
    /// What succeeded; `None` when nothing is known to have succeeded.
    pub partial_result: Option<PartialBulkWriteResult>,
}

impl fmt::Display for BulkWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client bulk write failed")?;
        if let Some(first) = self.write_errors.keys().min() {
            write!(
                f,
                ": {} write error(s), the first {}",
                self.write_errors.len(),
                self.write_errors[first]
            )?;
        }
        for wce in &self.write_concern_errors {
            write!(f, "; {wce}")?;
        }
        Ok(())
    }
}

/// The results gathered across batches, whichever kind the caller asked
/// for; turned into the public type at the end.
#[derive(Clone, Debug, Default)]
pub(crate) struct Gathered {
    pub(crate) result: VerboseBulkWriteResult,
    pub(crate) write_errors: HashMap<usize, WriteError>,
    pub(crate) write_concern_errors: Vec<WriteConcernError>,
    /// Whether any write is known to have succeeded.
    pub(crate) any_succeeded: bool,
}

/// The result types `bulk_write` can return.
pub(crate) trait BulkResultKind: Sized {
    /// Whether individual results are asked for (`errorsOnly: false`).
    const VERBOSE: bool;
    fn from_gathered(result: VerboseBulkWriteResult) -> Self;
    fn partial(result: VerboseBulkWriteResult) -> PartialBulkWriteResult;
}

impl BulkResultKind for SummaryBulkWriteResult {
    const VERBOSE: bool = false;
    fn from_gathered(result: VerboseBulkWriteResult) -> Self {
        result.summary
    }
    fn partial(result: VerboseBulkWriteResult) -> PartialBulkWriteResult {
        PartialBulkWriteResult::Summary(result.summary)
    }
}

impl BulkResultKind for VerboseBulkWriteResult {
    const VERBOSE: bool = true;
    fn from_gathered(result: VerboseBulkWriteResult) -> Self {
        result
    }
    fn partial(result: VerboseBulkWriteResult) -> PartialBulkWriteResult {
        PartialBulkWriteResult::Verbose(result)
    }
}

impl Gathered {
    /// The bulk write's error: the write errors and write concern errors
    /// seen, what succeeded, and the top-level error that stopped it.
    pub(crate) fn into_error<R: BulkResultKind>(
        self,
        labels: Vec<String>,
        top_level: Option<Error>,
    ) -> Error {
        let partial_result = self.any_succeeded.then(|| R::partial(self.result));
        let error = BulkWriteError {
            write_concern_errors: self.write_concern_errors,
            write_errors: self.write_errors,
            partial_result,
        };
        let mut error = Error::new(crate::error::ErrorKind::BulkWrite(error)).with_labels(labels);
        error.source = top_level.map(Box::new);
        error
    }

    /// The result, or the error when any write or write concern failed.
    pub(crate) fn finish<R: BulkResultKind>(self) -> Result<R> {
        if self.write_errors.is_empty() && self.write_concern_errors.is_empty() {
            Ok(R::from_gathered(self.result))
        } else {
            Err(self.into_error::<R>(Vec::new(), None))
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn a_model_document_names_its_namespace() {
        let model = WriteModel::from_document(doc! {
            "updateOne": { "namespace": "db.a.b", "filter": {}, "update": { "$set": { "x": 1 } },
                           "collation": { "locale": "fr" }, "hint": "x_1", "arrayFilters": [{ "e": 1 }] }
        })
        .unwrap();
        let WriteModel::UpdateOne(m) = model else {
            panic!("an updateOne: {model:?}")
        };
        assert_eq!(m.namespace, Namespace::new("db", "a.b"));
        assert_eq!(m.collation, Some(doc! { "locale": "fr" }));
        assert_eq!(m.hint, Some(Bson::String("x_1".into())));
        assert_eq!(m.array_filters, Some(vec![Bson::Document(doc! { "e": 1 })]));
        for (model, problem) in [
            (
                doc! { "insertOne": { "document": {} } },
                "needs a string \"namespace\"",
            ),
            (
                doc! { "insertOne": { "namespace": "nodot", "document": {} } },
                "is not \"db.collection\"",
            ),
            (
                doc! { "deleteOne": { "namespace": "d.c" } },
                "needs a document \"filter\"",
            ),
        ] {
            let error = WriteModel::from_document(model).unwrap_err().to_string();
            assert!(error.contains(problem), "{error}");
        }
    }
}
