//! What a change stream returns: [`ChangeStreamEvent`], the server's change
//! document, in the official driver's shape (`mongodb::change_stream::event`).
//! Unknown operation types and namespace types are kept as strings, since
//! the server adds new ones (the spec forbids failing on them).

use bson::{Bson, DateTime, Document, Timestamp};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The token a change stream resumes from: an event's `_id` or a batch's
/// `postBatchResumeToken`. Opaque; store it (it serializes as the server
/// sent it) and pass it to [`resume_after`](crate::action::Watch::resume_after)
/// or [`start_after`](crate::action::Watch::start_after).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResumeToken(pub(crate) Bson);

impl ResumeToken {
    /// The token as the server sent it (usually `{ _data: "<hex>" }`).
    pub fn as_bson(&self) -> &Bson {
        &self.0
    }
}

impl From<ResumeToken> for Bson {
    fn from(token: ResumeToken) -> Self {
        token.0
    }
}

/// One change: what happened (`operation_type`), where (`ns`), to which
/// document (`document_key`), and the document itself when asked for.
/// `T` is the type of `full_document` and `full_document_before_change`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ChangeStreamEvent<T> {
    /// The event's resume token.
    #[serde(rename = "_id")]
    pub id: ResumeToken,
    /// The kind of change.
    pub operation_type: OperationType,
    /// The database and collection it happened in (absent for some
    /// cluster-wide events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns: Option<ChangeNamespace>,
    /// What kind of collection `create` created (8.1+, with
    /// `show_expanded_events`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_type: Option<ChangeNamespaceType>,
    /// The new name after a `rename`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<ChangeNamespace>,
    /// The session of the transaction the change was part of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lsid: Option<Document>,
    /// The transaction number of that transaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub txn_number: Option<i64>,
    /// The `_id` (and shard key) of the changed document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document_key: Option<Document>,
    /// The fields an `update` changed or removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_description: Option<UpdateDescription>,
    /// When the change happened, in the oplog's time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_time: Option<Timestamp>,
    /// When the change happened, by the server's clock (6.0+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_time: Option<DateTime>,
    /// The document after the change: always for `insert` and `replace`;
    /// for `update` with the `full_document` option.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_document: Option<T>,
    /// The document before the change, with the
    /// `full_document_before_change` option (pre-images enabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_document_before_change: Option<T>,
}

/// What an `update` changed.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct UpdateDescription {
    /// The changed fields and their new values (dotted paths).
    pub updated_fields: Document,
    /// The removed fields.
    pub removed_fields: Vec<String>,
    /// Arrays that were shortened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated_arrays: Option<Vec<TruncatedArray>>,
    /// For paths that are ambiguous (dots or numbers in field names), the
    /// path's components (6.1+, with `show_expanded_events`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disambiguated_paths: Option<Document>,
}

/// An array an `update` shortened.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TruncatedArray {
    /// The array's path.
    pub field: String,
    /// Its new length.
    pub new_size: i32,
}

/// The kind of change.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperationType {
    /// A document was inserted.
    Insert,
    /// A document was updated.
    Update,
    /// A document was replaced.
    Replace,
    /// A document was deleted.
    Delete,
    /// The collection was dropped.
    Drop,
    /// The collection was renamed.
    Rename,
    /// The database was dropped.
    DropDatabase,
    /// The stream can no longer continue (its collection or database went
    /// away); resume with `start_after` to follow a recreated one.
    Invalidate,
    /// Any other kind, as the server named it (`create`, `createIndexes`, ...).
    Other(String),
}

const OPERATION_TYPES: [(&str, OperationType); 8] = [
    ("insert", OperationType::Insert),
    ("update", OperationType::Update),
    ("replace", OperationType::Replace),
    ("delete", OperationType::Delete),
    ("drop", OperationType::Drop),
    ("rename", OperationType::Rename),
    ("dropDatabase", OperationType::DropDatabase),
    ("invalidate", OperationType::Invalidate),
];

impl OperationType {
    /// The server's name for it.
    pub fn as_str(&self) -> &str {
        match self {
            OperationType::Other(name) => name,
            known => OPERATION_TYPES
                .iter()
                .find(|(_, t)| t == known)
                .map_or("", |(name, _)| name),
        }
    }
}

impl Serialize for OperationType {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for OperationType {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        Ok(OPERATION_TYPES
            .iter()
            .find(|(known, _)| *known == name)
            .map_or(OperationType::Other(name), |(_, t)| t.clone()))
    }
}

/// A database and collection of an event.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChangeNamespace {
    /// The database.
    pub db: String,
    /// The collection (absent for database-wide events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coll: Option<String>,
}

/// The kind of collection a `create` event created.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ChangeNamespaceType {
    /// A collection.
    Collection,
    /// A time series collection.
    Timeseries,
    /// A view.
    View,
    /// Another kind, as the server named it.
    #[serde(untagged)]
    Other(String),
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn an_event_reads_known_and_unknown_operation_types() {
        let event: ChangeStreamEvent<Document> = bson::from_document(doc! {
            "_id": { "_data": "01" },
            "operationType": "insert",
            "ns": { "db": "d", "coll": "c" },
            "documentKey": { "_id": 1 },
            "fullDocument": { "_id": 1, "x": 1 },
            "clusterTime": Timestamp { time: 1, increment: 2 },
        })
        .unwrap();
        assert_eq!(event.operation_type, OperationType::Insert);
        assert_eq!(event.full_document, Some(doc! { "_id": 1, "x": 1 }));
        assert_eq!(event.id.as_bson(), &Bson::Document(doc! { "_data": "01" }));
        let other: ChangeStreamEvent<Document> = bson::from_document(doc! {
            "_id": { "_data": "02" }, "operationType": "createIndexes", "nsType": "view",
        })
        .unwrap();
        assert_eq!(
            other.operation_type,
            OperationType::Other("createIndexes".into())
        );
        assert_eq!(other.ns_type, Some(ChangeNamespaceType::View));
        let back = bson::to_document(&other).unwrap();
        assert_eq!(back.get_str("operationType").unwrap(), "createIndexes");
        assert_eq!(
            bson::to_bson(&OperationType::DropDatabase).unwrap(),
            Bson::from("dropDatabase")
        );
    }
}
