//! Atlas Search index management in the C ABI: create, update, drop and
//! list, each written by `c_function!` (see `entry.rs`) around the Rust
//! API's `Collection::*_search_index*` actions. Models arrive as BSON
//! `{definition, name, type}`, the spec's `SearchIndexModel` names.

use bson::{Bson, Document};

use super::error::Failure;
use super::ops::{self, open_in, options, run_in, DocumentStream};
use super::{lock_opt, new_cursor, write_buffer, MiBuffer, MiCursor, Target};
use crate::proto::coll_options::AggregateOptions;
use crate::proto::search_index::{SearchIndexModel, SearchIndexType};
use crate::Collection;

fn collection_of(t: &Target<'_>) -> Collection<Document> {
    t.client
        .client
        .database(t.db)
        .collection::<Document>(t.coll)
}

/// A model from `{definition, name, type}`; any other field is an error
/// naming it, so a misspelt field is not silently dropped.
fn model(i: usize, mut spec: Document) -> Result<SearchIndexModel, Failure> {
    let at = format!("models[{i}]");
    let Some(Bson::Document(definition)) = spec.remove("definition") else {
        return Err(Failure::argument(&at, "needs a document \"definition\""));
    };
    let mut model = SearchIndexModel::builder().definition(definition).build();
    for (key, value) in spec {
        match (key.as_str(), value) {
            ("name", Bson::String(name)) => model.name = Some(name),
            ("type", Bson::String(kind)) => model.index_type = Some(index_type(kind)),
            ("name" | "type", _) => {
                return Err(Failure::argument(
                    &format!("{at}.{key}"),
                    "must be a string",
                ))
            }
            _ => return Err(Failure::argument(&at, &format!("has no field \"{key}\""))),
        }
    }
    Ok(model)
}

/// The type a model names: a type this driver does not know is sent as
/// given, for the server to accept or refuse (as the Rust API's
/// [`SearchIndexType::Other`] is).
fn index_type(kind: String) -> SearchIndexType {
    match kind.as_str() {
        "search" => SearchIndexType::Search,
        "vectorSearch" => SearchIndexType::VectorSearch,
        _ => SearchIndexType::Other(kind),
    }
}

c_function! {
    /// Creates search indexes from `models` (`{definition, name, type}`
    /// each): `result` gets `{indexNames: [...]}`, in order. No options.
    ///
    /// # Safety
    /// Pointers NULL or valid; `models` and `lengths` hold `count` elements.
    fn mi_create_search_indexes(
        t: target,
        models: documents lengths count,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        ops::no_options("create_search_indexes", options)?;
        let models = models
            .into_iter()
            .enumerate()
            .map(|(i, spec)| model(i, spec))
            .collect::<Result<Vec<_>, _>>()?;
        let coll = collection_of(&t);
        let action = coll.create_search_indexes(models);
        let names = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "indexNames": names })
    }
}

c_function! {
    /// Replaces the definition of the search index `name`. No options.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_update_search_index(
        t: target,
        name: str,
        definition: document definition_len,
        options: options options_len,
    ) {
        ops::no_options("update_search_index", options)?;
        let coll = collection_of(&t);
        let action = coll.update_search_index(name, definition);
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    }
}

c_function! {
    /// Drops the search index `name` (no error when the collection does not
    /// exist). No options.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_drop_search_index(
        t: target,
        name: str,
        options: options options_len,
    ) {
        ops::no_options("drop_search_index", options)?;
        let coll = collection_of(&t);
        let action = coll.drop_search_index(name);
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    }
}

c_function! {
    /// The collection's search indexes as a cursor; options are `name` (only
    /// that index) and the aggregation's options (`batchSize`, `comment`...).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_list_search_indexes(
        t: target,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let mut options = options.unwrap_or_default();
        let name = match options.iter().position(|(key, _)| key == "name") {
            Some(at) => match options.remove(at).1 {
                Bson::String(name) => Some(name),
                _ => return Err(Failure::argument("options.name", "must be a string")),
            },
            None => None,
        };
        let coll = collection_of(&t);
        let mut action = coll
            .list_search_indexes()
            .aggregate_options(options!(AggregateOptions, Some(options)));
        if let Some(name) = name {
            action = action.name(name);
        }
        let stream: DocumentStream = open_in!(action, lock_opt(&t.session).as_deref_mut())?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_index_type_this_driver_does_not_know_is_passed_through() {
        let spec = |kind: &str| bson::doc! { "definition": {}, "type": kind };
        let types: Vec<_> = ["search", "vectorSearch", "lexical"]
            .into_iter()
            .map(|kind| model(0, spec(kind)).unwrap().index_type)
            .collect();
        assert_eq!(
            types,
            [
                Some(SearchIndexType::Search),
                Some(SearchIndexType::VectorSearch),
                Some(SearchIndexType::Other("lexical".into()))
            ]
        );
        let error = model(0, bson::doc! { "definition": {}, "type": 1 }).unwrap_err();
        assert!(format!("{error:?}").contains("models[0].type"), "{error:?}");
    }
}
