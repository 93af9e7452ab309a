//! `listCollections`' description of a collection, published in
//! [`crate::results`]. Apart from `proto::results` because it holds the
//! collection options (`coll_options`), which reach `error`, and `error`
//! names the write failures of `proto::results`.

use bson::Document;

/// What kind of collection a [`CollectionSpecification`] describes.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CollectionType {
    /// An ordinary collection (the default, as in the official driver).
    #[default]
    Collection,
    /// A view over another collection.
    View,
    /// A time-series collection.
    Timeseries,
    /// A kind this driver does not know.
    #[serde(other)]
    Other,
}

/// One collection or view as `listCollections` describes it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CollectionSpecification {
    /// The collection's name.
    pub name: String,
    /// Collection, view or time series (`type`).
    #[serde(rename = "type")]
    pub collection_type: CollectionType,
    /// The options it was created with, as the server reports them.
    #[serde(default, deserialize_with = "listed_options")]
    pub options: crate::proto::coll_options::CreateCollectionOptions,
    /// Read-only flag and UUID.
    #[serde(default)]
    pub info: CollectionSpecificationInfo,
    /// The `_id` index as the server lists it, when the collection has one
    /// (a document, as in the official driver).
    #[serde(default)]
    pub id_index: Option<Document>,
}

fn listed_options<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<crate::proto::coll_options::CreateCollectionOptions, D::Error> {
    let listed = <Document as serde::Deserialize>::deserialize(deserializer)?;
    Ok(crate::proto::coll_options::CreateCollectionOptions::from_listed(&listed))
}

/// The `info` part of a [`CollectionSpecification`].
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CollectionSpecificationInfo {
    /// Whether the collection can be written (false for views).
    #[serde(default)]
    pub read_only: bool,
    /// The collection's UUID (absent for views).
    pub uuid: Option<bson::Binary>,
}
