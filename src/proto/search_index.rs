//! Atlas Search index management (`index-management/index-management.md`):
//! the model, the commands and what their replies mean. The commands go to
//! the collection's database as written, without a read or write concern
//! (the spec: "Drivers MUST NOT apply a read concern or write concern").

use bson::{doc, Bson, Document};
use serde::{Deserialize, Serialize};
use typed_builder::TypedBuilder;

use crate::error::{Error, Result};

/// Declares the options type of one search index operation. The
/// index-management spec gives these operations no options yet, and the
/// official crate's types are empty too: they exist so that a program
/// passes `.with_options(..)` as it does to every other operation, and a
/// field added to them will reach the command.
macro_rules! search_index_options {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, TypedBuilder, Deserialize)]
        #[builder(field_defaults(default, setter(into)))]
        #[non_exhaustive]
        pub struct $name {}
    )*};
}

search_index_options! {
    /// Options of `create_search_index` / `create_search_indexes` (none yet).
    CreateSearchIndexOptions;
    /// Options of `update_search_index` (none yet).
    UpdateSearchIndexOptions;
    /// Options of `drop_search_index` (none yet).
    DropSearchIndexOptions;
    /// Options of `list_search_indexes` beside its aggregation's (none yet).
    ListSearchIndexOptions;
}

/// What kind of search index a [`SearchIndexModel`] describes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum SearchIndexType {
    /// A full-text search index (`search`).
    Search,
    /// A vector search index (`vectorSearch`).
    VectorSearch,
    /// Another type, sent as this string (one the server added after this
    /// driver was written).
    #[serde(untagged)]
    Other(String),
}

/// One search index to create: its definition, and optionally its name
/// (the server names it `default` otherwise) and type.
#[derive(Clone, Debug, Default, PartialEq, TypedBuilder, Serialize, Deserialize)]
#[builder(field_defaults(default, setter(into, strip_option)))]
#[non_exhaustive]
pub struct SearchIndexModel {
    /// The index definition (`mappings`, `fields`, ...).
    #[builder(!default, setter(!strip_option))]
    pub definition: Document,
    /// The index's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The index's type.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub index_type: Option<SearchIndexType>,
}

impl SearchIndexModel {
    fn to_document(&self) -> Document {
        let mut out = doc! { "definition": self.definition.clone() };
        if let Some(name) = &self.name {
            out.insert("name", name);
        }
        if let Some(kind) = &self.index_type {
            let kind = match kind {
                SearchIndexType::Search => "search",
                SearchIndexType::VectorSearch => "vectorSearch",
                SearchIndexType::Other(other) => other.as_str(),
            };
            out.insert("type", kind);
        }
        out
    }
}

/// `createSearchIndexes` for `models` on collection `coll`.
pub(crate) fn create_command(coll: &str, models: &[SearchIndexModel]) -> Document {
    let indexes: Vec<Bson> = models
        .iter()
        .map(|m| Bson::Document(m.to_document()))
        .collect();
    doc! { "createSearchIndexes": coll, "indexes": indexes }
}

/// The names in a `createSearchIndexes` reply, in the order of the models.
pub(crate) fn created_names(reply: &Document) -> Result<Vec<String>> {
    let malformed = || {
        Error::protocol(
            None,
            "createSearchIndexes reply without indexesCreated names",
        )
    };
    reply
        .get_array("indexesCreated")
        .map_err(|_| malformed())?
        .iter()
        .map(|entry| {
            entry
                .as_document()
                .and_then(|d| d.get_str("name").ok())
                .map(str::to_string)
                .ok_or_else(malformed)
        })
        .collect()
}

/// `updateSearchIndex`: index `name` of `coll` gets `definition`.
pub(crate) fn update_command(coll: &str, name: &str, definition: Document) -> Document {
    doc! { "updateSearchIndex": coll, "name": name, "definition": definition }
}

/// `dropSearchIndex`: index `name` of `coll`.
pub(crate) fn drop_command(coll: &str, name: &str) -> Document {
    doc! { "dropSearchIndex": coll, "name": name }
}

/// The `$listSearchIndexes` pipeline, for one index or all.
pub(crate) fn list_pipeline(name: Option<&str>) -> Vec<Document> {
    let stage = match name {
        Some(name) => doc! { "name": name },
        None => doc! {},
    };
    vec![doc! { "$listSearchIndexes": stage }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_carry_the_models_as_the_spec_writes_them() {
        let named = SearchIndexModel::builder()
            .definition(doc! { "mappings": { "dynamic": true } })
            .name("test index")
            .index_type(SearchIndexType::VectorSearch)
            .build();
        let unnamed = SearchIndexModel::builder()
            .definition(doc! { "mappings": { "dynamic": false } })
            .build();
        assert_eq!(
            create_command("c", &[named, unnamed]),
            doc! { "createSearchIndexes": "c", "indexes": [
                { "definition": { "mappings": { "dynamic": true } }, "name": "test index", "type": "vectorSearch" },
                { "definition": { "mappings": { "dynamic": false } } },
            ] }
        );
        assert_eq!(list_pipeline(None), vec![doc! { "$listSearchIndexes": {} }]);
        assert_eq!(
            list_pipeline(Some("x")),
            vec![doc! { "$listSearchIndexes": { "name": "x" } }]
        );
    }

    #[test]
    fn another_index_type_is_sent_as_named() {
        let model = SearchIndexModel::builder()
            .definition(doc! {})
            .index_type(SearchIndexType::Other("lexical".into()))
            .build();
        assert_eq!(
            create_command("c", &[model]),
            doc! { "createSearchIndexes": "c", "indexes": [{ "definition": {}, "type": "lexical" }] }
        );
    }

    #[test]
    fn a_reply_without_names_is_an_error() {
        let reply = doc! { "ok": 1, "indexesCreated": [{ "id": "1", "name": "a" }, { "id": "2", "name": "b" }] };
        assert_eq!(created_names(&reply).unwrap(), ["a", "b"]);
        assert!(created_names(&doc! { "ok": 1 }).is_err());
        assert!(created_names(&doc! { "ok": 1, "indexesCreated": [{ "id": "1" }] }).is_err());
    }
}
