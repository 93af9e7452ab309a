//! A command reply whose cursor batch stays in the bytes it arrived in.
//!
//! ```text
//! OP_MSG body bytes ──Reply::parse──> Reply { document, batch }
//!    document: every field as a Document, but `cursor.firstBatch` /
//!              `cursor.nextBatch` left as an empty array
//!    batch:    that array's documents, as spans of the message's bytes
//! ```
//!
//! A cursor deserializes each batch document straight from its bytes into
//! the caller's type, so the documents are decoded once, and the reply is
//! never held twice (once as bytes, once as a `Document` tree). Anyone who
//! needs the whole reply as a `Document` (command events, `runCommand`)
//! gets it from [`Reply::to_document`] or [`Reply::into_document`].
//!
//! The bytes are untrusted. The whole reply is checked for nesting depth
//! and each batch element for being a well-framed document before the
//! reply is accepted; the inside of a batch document is checked when it is
//! read, and malformed bytes are then a protocol error.

use std::collections::VecDeque;
use std::ops::Range;

use bson::{Bson, Document, RawArray, RawBsonRef, RawDocument};

use crate::error::{Error, Result};

/// The keys of `cursor` that hold a batch of documents.
const BATCH_KEYS: [&str; 2] = ["firstBatch", "nextBatch"];

/// A decoded command reply; see the module documentation.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    document: Document,
    batch: Option<RawBatch>,
}

/// The documents of a cursor batch, still as BSON bytes: the message body
/// they arrived in and the span of each document.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RawBatch {
    bytes: Vec<u8>,
    spans: VecDeque<Range<usize>>,
    /// The `cursor` field the batch came from (empty when built otherwise).
    key: &'static str,
}

impl Reply {
    /// A reply that was decoded as a whole (an OP_REPLY, a test's reply).
    pub fn from_document(document: Document) -> Self {
        Reply {
            document,
            batch: None,
        }
    }

    /// Parses the reply document at `range` of `bytes` (a message body),
    /// keeping a cursor batch of documents as bytes. `bytes` is kept only
    /// when it holds such a batch.
    pub(crate) fn parse(bytes: Vec<u8>, range: Range<usize>) -> std::result::Result<Self, String> {
        let whole = bytes.get(range).ok_or("reply document out of bounds")?;
        let raw = RawDocument::from_bytes(whole).map_err(|e| e.to_string())?;
        crate::wire::check_reply_depth(raw)?;
        let mut document = Document::new();
        let mut batch = None;
        for element in raw {
            let (key, value) = element.map_err(|e| e.to_string())?;
            let value = match value {
                RawBsonRef::Document(cursor) if key == "cursor" => {
                    Bson::Document(parse_cursor(cursor, &bytes, &mut batch)?)
                }
                other => crate::wire::owned_value(other).map_err(|e| e.to_string())?,
            };
            document.insert(key, value);
        }
        let batch = batch.map(|(key, spans)| RawBatch { bytes, spans, key });
        Ok(Reply { document, batch })
    }

    /// The reply's fields; a batch kept as bytes shows as an empty array.
    pub fn document(&self) -> &Document {
        &self.document
    }

    /// Takes the batch kept as bytes, if there is one.
    pub fn take_batch(&mut self) -> Option<RawBatch> {
        self.batch.take()
    }

    /// Takes the batch kept as bytes if it came from `cursor.<key>`.
    pub(crate) fn take_batch_of(&mut self, key: &str) -> Option<RawBatch> {
        if self.batch.as_ref().is_some_and(|batch| batch.key == key) {
            return self.batch.take();
        }
        None
    }

    /// The whole reply as a `Document`, the batch converted too.
    pub fn into_document(mut self) -> Result<Document> {
        if let Some(batch) = self.batch.take() {
            restore_batch(&mut self.document, &batch)?;
        }
        Ok(self.document)
    }

    /// A copy of the whole reply as a `Document` (for command events).
    pub fn to_document(&self) -> Result<Document> {
        let mut document = self.document.clone();
        if let Some(batch) = &self.batch {
            restore_batch(&mut document, batch)?;
        }
        Ok(document)
    }

    /// Splits off the fields (for `ok: 0` checks that consume a document).
    pub(crate) fn into_parts(self) -> (Document, Option<RawBatch>) {
        (self.document, self.batch)
    }

    /// Joins what [`Self::into_parts`] split.
    pub(crate) fn from_parts(document: Document, batch: Option<RawBatch>) -> Self {
        Reply { document, batch }
    }
}

/// Converts `cursor`, recording its batch's document spans (offsets into
/// `message`) in `batch` and leaving an empty array in its place. A batch
/// with an element that is not a document is converted as it is, so that
/// the cursor's own checks name the element.
fn parse_cursor(
    cursor: &RawDocument,
    message: &[u8],
    batch: &mut Option<(&'static str, VecDeque<Range<usize>>)>,
) -> std::result::Result<Document, String> {
    let mut document = Document::new();
    for element in cursor {
        let (key, value) = element.map_err(|e| e.to_string())?;
        let batch_key = BATCH_KEYS.iter().find(|batch_key| **batch_key == key);
        let value = match (value, batch_key) {
            (RawBsonRef::Array(array), Some(batch_key)) if batch.is_none() => {
                match document_spans(array, message)? {
                    Some(spans) => {
                        *batch = Some((batch_key, spans));
                        Bson::Array(Vec::new())
                    }
                    None => crate::wire::owned_value(value).map_err(|e| e.to_string())?,
                }
            }
            (other, _) => crate::wire::owned_value(other).map_err(|e| e.to_string())?,
        };
        document.insert(key, value);
    }
    Ok(document)
}

/// The span in `message` of each document of `array`, or `None` when an
/// element is not a document.
fn document_spans(
    array: &RawArray,
    message: &[u8],
) -> std::result::Result<Option<VecDeque<Range<usize>>>, String> {
    let base = message.as_ptr() as usize;
    let mut spans = VecDeque::new();
    for item in array {
        match item.map_err(|e| e.to_string())? {
            RawBsonRef::Document(document) => {
                let bytes = document.as_bytes();
                let start = bytes.as_ptr() as usize - base;
                spans.push_back(start..start + bytes.len());
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(spans))
}

fn restore_batch(document: &mut Document, batch: &RawBatch) -> Result<()> {
    let mut items = Vec::with_capacity(batch.len());
    for bytes in batch.iter() {
        items.push(Bson::Document(to_document(bytes)?));
    }
    let cursor = document
        .get_document_mut("cursor")
        .map_err(|_| Error::protocol(None, "a reply's batch lost its cursor"))?;
    if !matches!(cursor.get(batch.key), Some(Bson::Array(a)) if a.is_empty()) {
        return Err(Error::protocol(None, "a reply's batch lost its place"));
    }
    cursor.insert(batch.key, items);
    Ok(())
}

/// Converts one batch document to a `Document`.
fn to_document(bytes: &[u8]) -> Result<Document> {
    let raw = RawDocument::from_bytes(bytes).map_err(|e| malformed_document(&e))?;
    crate::wire::owned_document(raw).map_err(|e| malformed_document(&e))
}

fn malformed_document(reason: &dyn std::fmt::Display) -> Error {
    Error::protocol(
        None,
        format!("malformed reply: invalid BSON in a cursor batch document: {reason}"),
    )
}

impl RawBatch {
    /// A batch of the given encoded documents (for tests and tools).
    pub fn from_documents<'a>(documents: impl IntoIterator<Item = &'a Document>) -> Result<Self> {
        let mut batch = RawBatch::default();
        for document in documents {
            let start = batch.bytes.len();
            document.to_writer(&mut batch.bytes).map_err(|e| {
                Error::invalid_argument(format!("document cannot be encoded as BSON: {e}"))
            })?;
            batch.spans.push_back(start..batch.bytes.len());
        }
        Ok(batch)
    }

    /// The number of documents not yet taken.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether every document has been taken.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The bytes of each document not yet taken, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans.iter().map(|span| &self.bytes[span.clone()])
    }

    /// Moves the documents of `other` behind those of `self`.
    pub fn append(&mut self, other: RawBatch) {
        if self.is_empty() {
            *self = other;
            return;
        }
        for span in other.spans {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(&other.bytes[span]);
            self.spans.push_back(start..self.bytes.len());
        }
    }

    /// Deserializes the next document as `T`, straight from its bytes.
    pub fn pop_front<T: serde::de::DeserializeOwned>(&mut self) -> Option<Result<T>> {
        let span = self.spans.pop_front()?;
        let bytes = &self.bytes[span];
        let result = bson::from_slice(bytes).map_err(|e| deserialize_error(bytes, &e));
        if self.spans.is_empty() {
            // The batch is used up: give its memory back before the next one.
            self.bytes = Vec::new();
        }
        Some(result)
    }
}

/// A document that does not deserialize: a protocol error when its bytes
/// are not valid BSON, otherwise a mismatch with the caller's type.
fn deserialize_error(bytes: &[u8], error: &bson::de::Error) -> Error {
    if let Err(invalid) = to_document(bytes) {
        return invalid;
    }
    Error::invalid_argument(format!(
        "a document from the server does not match the cursor's type: {error}"
    ))
}

#[cfg(test)]
mod tests {
    use bson::{doc, oid::ObjectId};
    use serde::Deserialize;

    use super::*;
    use crate::error::ErrorKind;
    use crate::operation::cursor::{CursorOptions, CursorSpec};

    fn parsed(reply: &Document) -> Reply {
        let bytes = bson::to_vec(reply).unwrap();
        let len = bytes.len();
        Reply::parse(bytes, 0..len).unwrap()
    }

    fn first_batch(batch: Vec<Document>) -> Document {
        doc! {
            "cursor": { "firstBatch": batch, "id": 0_i64, "ns": "db.coll" },
            "ok": 1.0,
            "$clusterTime": { "clusterTime": bson::Timestamp { time: 1, increment: 2 } },
        }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Address {
        city: String,
        zip: Option<i32>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Person {
        // Declared in another order than the server sends the fields.
        name: String,
        #[serde(rename = "_id")]
        id: ObjectId,
        address: Address,
        tags: Vec<String>,
    }

    #[test]
    fn a_cursor_batch_stays_bytes_and_the_rest_is_a_document() {
        let original = first_batch(vec![doc! { "a": 1 }, doc! { "b": { "c": [1, 2] } }]);
        let mut reply = parsed(&original);
        assert_eq!(
            reply.document(),
            &first_batch(vec![]),
            "the batch is left out of the document, every other field is in it"
        );
        assert_eq!(
            reply.to_document().unwrap(),
            original,
            "order and nesting kept"
        );
        let batch = reply.take_batch().expect("the batch is kept as bytes");
        assert_eq!(batch.len(), 2);
    }

    #[test]
    fn a_batch_is_taken_only_for_its_own_key() {
        let original = doc! {
            "cursor": { "firstBatch": [ { "a": 1 } ], "nextBatch": [], "id": 4_i64, "ns": "db.c" },
            "ok": 1,
        };
        assert_eq!(parsed(&original).to_document().unwrap(), original);
        let mut spec = CursorSpec::from_raw_reply(
            Reply::from_document(
                doc! { "cursor": { "id": 4_i64, "ns": "db.c", "firstBatch": [] } },
            ),
            CursorOptions::default(),
        )
        .unwrap();
        spec.next_batch(parsed(&original)).unwrap();
        assert!(spec.batch.is_empty(), "the getMore's nextBatch is empty");
    }

    #[test]
    fn a_reply_without_a_batch_keeps_no_bytes() {
        let original = doc! { "ok": 1, "n": 3, "cursor": { "id": 0_i64 } };
        let mut reply = parsed(&original);
        assert!(reply.take_batch().is_none());
        assert_eq!(reply.into_document().unwrap(), original);
    }

    #[test]
    fn typed_documents_come_straight_from_the_batch_bytes() {
        let id = ObjectId::new();
        let stored = doc! {
            "_id": id,
            "address": { "zip": 75001, "city": "Paris" },
            "tags": ["a", "b"],
            "name": "Ada",
        };
        let wrong = doc! { "_id": id, "name": 7, "address": { "city": "x" }, "tags": [] };
        let reply = parsed(&first_batch(vec![stored, wrong]));
        let mut spec = CursorSpec::from_raw_reply(reply, CursorOptions::default()).unwrap();
        let person: Person = spec.pop_front().unwrap().unwrap();
        assert_eq!(
            person,
            Person {
                name: "Ada".into(),
                id,
                address: Address {
                    city: "Paris".into(),
                    zip: Some(75001)
                },
                tags: vec!["a".into(), "b".into()],
            }
        );
        let error = spec.pop_front::<Person>().unwrap().unwrap_err();
        assert!(
            matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("does not match the cursor's type"),
            "{error}"
        );
        assert!(spec.pop_front::<Person>().is_none());
    }

    #[test]
    fn raw_documents_are_handed_out_as_the_bytes_that_came() {
        let stored = doc! { "b": 2, "a": { "c": [1, "x"] } };
        let reply = parsed(&first_batch(vec![stored.clone()]));
        let mut spec = CursorSpec::from_raw_reply(reply, CursorOptions::default()).unwrap();
        let raw: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
        assert_eq!(raw.as_bytes(), bson::to_vec(&stored).unwrap().as_slice());
    }

    #[test]
    fn an_element_that_is_not_a_document_is_named() {
        let reply =
            doc! { "cursor": { "id": 0_i64, "ns": "db.c", "firstBatch": [ {}, 7 ] }, "ok": 1 };
        let error =
            CursorSpec::from_raw_reply(parsed(&reply), CursorOptions::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "protocol error: malformed reply: `cursor.firstBatch[1]` is an int32, not a document",
        );
    }

    /// The bytes of `reply` with the first occurrence of `from` replaced.
    fn patched(reply: &Document, from: &[u8], to: &[u8]) -> Vec<u8> {
        let mut bytes = bson::to_vec(reply).unwrap();
        let at = bytes
            .windows(from.len())
            .position(|window| window == from)
            .unwrap();
        bytes[at..at + from.len()].copy_from_slice(to);
        bytes
    }

    #[test]
    fn a_document_with_invalid_bytes_inside_is_a_protocol_error_when_read() {
        let reply = first_batch(vec![doc! { "s": "abc" }, doc! { "n": 1 }]);
        // The string's length (4: "abc" and its NUL) now claims 200 bytes.
        let bytes = patched(&reply, b"s\0\x04\0\0\0abc", b"s\0\xc8\0\0\0abc");
        let len = bytes.len();
        let reply = Reply::parse(bytes, 0..len).unwrap();
        let mut spec = CursorSpec::from_raw_reply(reply, CursorOptions::default()).unwrap();
        let error = spec.pop_front::<Document>().unwrap().unwrap_err();
        assert!(
            matches!(error.kind(), ErrorKind::Protocol { .. }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("invalid BSON in a cursor batch document"),
            "{error}"
        );
        let next: Document = spec.pop_front().unwrap().unwrap();
        assert_eq!(next, doc! { "n": 1 }, "the next document is still readable");
    }

    #[test]
    fn a_batch_document_whose_length_lies_is_refused_with_the_reply() {
        let reply = first_batch(vec![doc! { "a": 1 }]);
        // {a: 1} is 12 bytes long; it now claims 13, eating into its array.
        let bytes = patched(&reply, b"\x0c\0\0\0\x10a\0", b"\x0d\0\0\0\x10a\0");
        let len = bytes.len();
        let error = Reply::parse(bytes.clone(), 0..len).unwrap_err();
        assert!(!error.is_empty());
        // And cut short, the reply is refused as a whole.
        assert!(Reply::parse(bytes[..len - 3].to_vec(), 0..len - 3).is_err());
    }
}
