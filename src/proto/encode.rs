//! Outgoing documents as BSON bytes, encoded once: the statements of a
//! write (`insert`'s documents, `update`'s and `delete`'s statements) are
//! serialized straight from the caller's type, given an `_id` at the byte
//! level when they lack one, and copied into the message as they are.

use bson::{oid::ObjectId, Bson, Document, RawDocument, RawDocumentBuf};
use serde::Serialize;

use crate::error::{Error, Result};

/// `value` as BSON bytes, refused when it nests deeper than the wire's
/// limit (checked before serializing, which recurses once per level).
/// `what` names the value in errors.
pub(crate) fn to_raw<T: Serialize>(value: &T, what: &str) -> Result<RawDocumentBuf> {
    crate::proto::nesting::check_depth(value, what)?;
    let bytes = bson::to_vec(value)
        .map_err(|e| Error::serialization(&format!("cannot serialise {what} as BSON"), e))?;
    RawDocumentBuf::from_bytes(bytes).map_err(|e| {
        Error::serialization(
            &format!("{what} is not a BSON document"),
            serde::ser::Error::custom(e),
        )
    })
}

/// A `Document` as BSON bytes (see [`to_raw`]).
pub(crate) fn document_to_raw(document: &Document, what: &str) -> Result<RawDocumentBuf> {
    to_raw(document, what)
}

/// Bytes we encoded ourselves, back as a `Document` (tests, command events).
pub(crate) fn raw_to_document(bytes: &[u8]) -> Document {
    // Our own encoding of a Document or a serde value always decodes.
    crate::proto::raw_walk::to_document(bytes).unwrap_or_default()
}

/// The document's `_id`, putting a new ObjectId first when it has none, as
/// the server would otherwise add one the caller never learns.
pub(crate) fn ensure_raw_id(
    document: &mut RawDocumentBuf,
    new_id: &mut dyn FnMut() -> ObjectId,
) -> Result<Bson> {
    if let Some(id) = document
        .get("_id")
        .map_err(|e| Error::invalid_argument(format!("document is not valid BSON: {e}")))?
    {
        return Bson::try_from(id.to_raw_bson())
            .map_err(|e| Error::invalid_argument(format!("document's _id is not valid: {e}")));
    }
    let id = new_id();
    *document = with_id_first(document, id)?;
    Ok(Bson::ObjectId(id))
}

/// `document` with `_id: id` as its first element: the length, the new
/// element, then the old elements and terminator unchanged.
fn with_id_first(document: &RawDocument, id: ObjectId) -> Result<RawDocumentBuf> {
    let old = document.as_bytes();
    const ID_ELEMENT: usize = 1 + 4 + 12; // type, "_id\0", 12 bytes
    let length = i32::try_from(old.len() + ID_ELEMENT)
        .map_err(|_| Error::invalid_argument("document exceeds 2 GiB"))?;
    let mut bytes = Vec::with_capacity(old.len() + ID_ELEMENT);
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes.push(0x07);
    bytes.extend_from_slice(b"_id\0");
    bytes.extend_from_slice(&id.bytes());
    bytes.extend_from_slice(&old[4..]);
    RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| Error::invalid_argument(format!("document is not valid BSON: {e}")))
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;
    use crate::proto::object_id::tests::sequential_ids;

    #[test]
    fn a_missing_id_is_put_first_and_an_existing_one_kept() {
        let mut raw = document_to_raw(&doc! { "a": 1, "b": { "c": "d" } }, "document").unwrap();
        let id = ensure_raw_id(&mut raw, &mut sequential_ids()).unwrap();
        let Bson::ObjectId(oid) = id else {
            panic!("{id:?}")
        };
        assert_eq!(
            raw_to_document(raw.as_bytes()),
            doc! { "_id": oid, "a": 1, "b": { "c": "d" } }
        );
        assert_eq!(
            ensure_raw_id(&mut raw, &mut sequential_ids()).unwrap(),
            Bson::ObjectId(oid)
        );
        let mut kept = document_to_raw(&doc! { "x": 1, "_id": "k" }, "document").unwrap();
        assert_eq!(
            ensure_raw_id(&mut kept, &mut sequential_ids()).unwrap(),
            Bson::from("k")
        );
        assert_eq!(
            raw_to_document(kept.as_bytes()),
            doc! { "x": 1, "_id": "k" }
        );
    }

    #[test]
    fn an_empty_document_gets_an_id() {
        let mut raw = document_to_raw(&doc! {}, "document").unwrap();
        let id = ensure_raw_id(&mut raw, &mut sequential_ids()).unwrap();
        assert_eq!(raw_to_document(raw.as_bytes()), doc! { "_id": id });
    }

    #[test]
    fn too_deep_is_refused_before_serializing() {
        let mut deep = doc! {};
        for _ in 0..crate::proto::nesting::MAX_BSON_DEPTH + 5 {
            deep = doc! { "a": deep };
        }
        let error = document_to_raw(&deep, "document").unwrap_err();
        assert!(error.to_string().contains("nested deeper"), "{error}");
        crate::proto::nesting::drop_without_recursion(deep);
    }

    #[test]
    fn a_non_document_value_is_refused() {
        assert!(to_raw(&5_i32, "document").is_err());
    }
}
