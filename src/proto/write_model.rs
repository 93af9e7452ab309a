//! What a write asks for, as the user states it: the models of a bulk write
//! and an update's modification. The operations that turn them into
//! commands (`operation::bulk_write`, `operation::update`) and the public
//! `options` module both name them, so they live below both.

use bson::{Bson, Document};

use crate::error::{Error, Result};
use crate::proto::coll_options::{DeleteModelOptions, ReplaceModelOptions, UpdateModelOptions};

/// One write of a bulk write.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CollectionWriteModel {
    /// Inserts `document` (an `_id` is generated when it has none).
    InsertOne {
        /// The document.
        document: Document,
    },
    /// Updates the first document matching `filter`.
    UpdateOne {
        /// Which documents.
        filter: Document,
        /// Update operators or a pipeline.
        update: UpdateModifications,
        /// Statement options.
        options: UpdateModelOptions,
    },
    /// Updates every document matching `filter`.
    UpdateMany {
        /// Which documents.
        filter: Document,
        /// Update operators or a pipeline.
        update: UpdateModifications,
        /// Statement options (`sort` is not allowed).
        options: UpdateModelOptions,
    },
    /// Replaces the first document matching `filter`.
    ReplaceOne {
        /// Which document.
        filter: Document,
        /// The new document (no update operators).
        replacement: Document,
        /// Statement options.
        options: ReplaceModelOptions,
    },
    /// Deletes the first document matching `filter`.
    DeleteOne {
        /// Which document.
        filter: Document,
        /// Statement options.
        options: DeleteModelOptions,
    },
    /// Deletes every document matching `filter`.
    DeleteMany {
        /// Which documents.
        filter: Document,
        /// Statement options.
        options: DeleteModelOptions,
    },
}

impl CollectionWriteModel {
    /// An `InsertOne`.
    pub fn insert_one(document: Document) -> Self {
        CollectionWriteModel::InsertOne { document }
    }

    /// An `UpdateOne` without options.
    pub fn update_one(filter: Document, update: impl Into<UpdateModifications>) -> Self {
        CollectionWriteModel::UpdateOne {
            filter,
            update: update.into(),
            options: UpdateModelOptions::default(),
        }
    }

    /// An `UpdateMany` without options.
    pub fn update_many(filter: Document, update: impl Into<UpdateModifications>) -> Self {
        CollectionWriteModel::UpdateMany {
            filter,
            update: update.into(),
            options: UpdateModelOptions::default(),
        }
    }

    /// A `ReplaceOne` without options.
    pub fn replace_one(filter: Document, replacement: Document) -> Self {
        CollectionWriteModel::ReplaceOne {
            filter,
            replacement,
            options: ReplaceModelOptions::default(),
        }
    }

    /// A `DeleteOne` without options.
    pub fn delete_one(filter: Document) -> Self {
        CollectionWriteModel::DeleteOne {
            filter,
            options: DeleteModelOptions::default(),
        }
    }

    /// A `DeleteMany` without options.
    pub fn delete_many(filter: Document) -> Self {
        CollectionWriteModel::DeleteMany {
            filter,
            options: DeleteModelOptions::default(),
        }
    }
}

/// What an update applies: update operators or an aggregation pipeline
/// (serialized as either, untagged).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum UpdateModifications {
    /// An update document: every key is an operator (`$set`, `$inc`, ...).
    Document(Document),
    /// An aggregation pipeline (4.2+).
    Pipeline(Vec<Document>),
}

impl From<Document> for UpdateModifications {
    fn from(document: Document) -> Self {
        UpdateModifications::Document(document)
    }
}

impl From<Vec<Document>> for UpdateModifications {
    fn from(pipeline: Vec<Document>) -> Self {
        UpdateModifications::Pipeline(pipeline)
    }
}

impl UpdateModifications {
    /// Refuses an update document that is empty or whose first key is not an
    /// operator (it would replace the document, which is `replace_one`'s job).
    pub(crate) fn validate(&self) -> Result<()> {
        match self {
            UpdateModifications::Document(update) if !first_key_is_operator(update) => {
                Err(Error::invalid_argument(if update.is_empty() {
                    "update document must not be empty: it needs update operators such as $set"
                        .to_string()
                } else {
                    format!(
                        "update document must contain only update operators (keys starting with '$'), got {update}; use a replace operation to replace a document"
                    )
                }))
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn to_bson(&self) -> Bson {
        match self {
            UpdateModifications::Document(update) => Bson::Document(update.clone()),
            UpdateModifications::Pipeline(pipeline) => {
                Bson::Array(pipeline.iter().cloned().map(Bson::Document).collect())
            }
        }
    }
}

/// Whether an update document is a pipeline or starts with an operator.
pub(crate) fn first_key_is_operator(document: &Document) -> bool {
    document.keys().next().is_some_and(|k| k.starts_with('$'))
}

impl CollectionWriteModel {
    /// A model from its CRUD-spec document, the form the unified test
    /// format and the C ABI use: `{insertOne: {document}}`, `{updateOne:
    /// {filter, update, upsert?, arrayFilters?, collation?, hint?,
    /// sort?}}`, `updateMany` (no `sort`), `{replaceOne: {filter,
    /// replacement, upsert?, collation?, hint?, sort?}}`, `{deleteOne:
    /// {filter, collation?, hint?}}`, `deleteMany`. An unknown kind or
    /// field, or a field of the wrong type, is an error naming it.
    pub fn from_document(model: Document) -> Result<Self> {
        let (kind, mut arguments) = kind_and_arguments(model)?;
        let mut take = |name: &str| -> Result<Document> {
            match arguments.remove(name) {
                Some(Bson::Document(d)) => Ok(d),
                _ => Err(Error::invalid_argument(format!(
                    "the {kind} write model needs a document \"{name}\""
                ))),
            }
        };
        let model = match kind.as_str() {
            "insertOne" => {
                let document = take("document")?;
                if let Some(extra) = arguments.keys().next() {
                    return Err(Error::invalid_argument(format!(
                        "unknown insertOne write model field \"{extra}\""
                    )));
                }
                CollectionWriteModel::InsertOne { document }
            }
            "updateOne" | "updateMany" => {
                let filter = take("filter")?;
                let update = update_modifications(&kind, arguments.remove("update"))?;
                let options = UpdateModelOptions::from_named(arguments)?;
                if kind == "updateOne" {
                    CollectionWriteModel::UpdateOne {
                        filter,
                        update,
                        options,
                    }
                } else {
                    CollectionWriteModel::UpdateMany {
                        filter,
                        update,
                        options,
                    }
                }
            }
            "replaceOne" => CollectionWriteModel::ReplaceOne {
                filter: take("filter")?,
                replacement: take("replacement")?,
                options: ReplaceModelOptions::from_named(arguments)?,
            },
            "deleteOne" => CollectionWriteModel::DeleteOne {
                filter: take("filter")?,
                options: DeleteModelOptions::from_named(arguments)?,
            },
            "deleteMany" => CollectionWriteModel::DeleteMany {
                filter: take("filter")?,
                options: DeleteModelOptions::from_named(arguments)?,
            },
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown write model kind \"{other}\" (insertOne, updateOne, updateMany, \
                     replaceOne, deleteOne or deleteMany)"
                )))
            }
        };
        Ok(model)
    }
}

/// A model document's one key and its arguments document.
pub(crate) fn kind_and_arguments(model: Document) -> Result<(String, Document)> {
    let mut entries = model.into_iter();
    match (entries.next(), entries.next()) {
        (Some((kind, Bson::Document(arguments))), None) => Ok((kind, arguments)),
        _ => Err(Error::invalid_argument(
            "a write model is not {<kind>: {arguments}}",
        )),
    }
}

/// An update model's `update`: operators or a pipeline.
fn update_modifications(kind: &str, update: Option<Bson>) -> Result<UpdateModifications> {
    match update {
        Some(Bson::Document(d)) => Ok(UpdateModifications::Document(d)),
        Some(Bson::Array(stages)) => stages
            .into_iter()
            .map(|stage| match stage {
                Bson::Document(d) => Ok(d),
                other => Err(Error::invalid_argument(format!(
                    "the {kind} write model's pipeline stage {other} is not a document"
                ))),
            })
            .collect::<Result<_>>()
            .map(UpdateModifications::Pipeline),
        _ => Err(Error::invalid_argument(format!(
            "the {kind} write model needs an \"update\" document or pipeline"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn reads_each_kind_with_its_options() {
        let model = CollectionWriteModel::from_document(doc! {
            "updateOne": { "filter": { "x": 1 }, "update": [{ "$set": { "y": 2 } }],
                           "upsert": true, "hint": "x_1", "sort": { "x": -1 } }
        })
        .unwrap();
        let CollectionWriteModel::UpdateOne {
            filter,
            update,
            options,
        } = model
        else {
            panic!("an updateOne: {model:?}")
        };
        assert_eq!(filter, doc! { "x": 1 });
        assert_eq!(
            update,
            UpdateModifications::Pipeline(vec![doc! { "$set": { "y": 2 } }])
        );
        assert_eq!(
            (options.upsert, options.sort),
            (Some(true), Some(doc! { "x": -1 }))
        );
        for model in [
            doc! { "insertOne": { "document": { "_id": 1 } } },
            doc! { "updateMany": { "filter": {}, "update": { "$inc": { "n": 1 } } } },
            doc! { "replaceOne": { "filter": {}, "replacement": { "a": 1 } } },
            doc! { "deleteOne": { "filter": {}, "collation": { "locale": "fr" } } },
            doc! { "deleteMany": { "filter": {} } },
        ] {
            CollectionWriteModel::from_document(model.clone())
                .unwrap_or_else(|e| panic!("{model}: {e}"));
        }
    }

    #[test]
    fn names_what_is_wrong() {
        let error = |model: Document| {
            CollectionWriteModel::from_document(model)
                .unwrap_err()
                .to_string()
        };
        assert!(error(doc! { "insertTwo": {} }).contains("unknown write model kind \"insertTwo\""));
        assert!(
            error(doc! { "insertOne": { "document": {}, "upsert": true } }).contains("\"upsert\"")
        );
        assert!(error(doc! { "deleteOne": {} }).contains("needs a document \"filter\""));
        assert!(error(doc! { "updateOne": { "filter": {}, "update": 1 } })
            .contains("needs an \"update\""));
        assert!(error(doc! { "deleteMany": { "filter": {}, "hnt": 1 } }).contains("\"hnt\""));
        assert!(error(doc! { "a": {}, "b": {} }).contains("{<kind>: {arguments}}"));
    }
}
