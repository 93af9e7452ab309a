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

/// What an update applies: update operators or an aggregation pipeline.
#[derive(Clone, Debug, PartialEq)]
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
