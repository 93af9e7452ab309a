//! A command reply whose cursor batch stays in the bytes it arrived in.
//!
//! ```text
//! OP_MSG body bytes ──Reply::parse──> Reply { document, batch, cursor }
//!    document: every top-level field as a Document but `cursor`, when
//!              `cursor.firstBatch` / `cursor.nextBatch` holds documents
//!    batch:    that array's documents, as spans of the message's bytes
//!    cursor:   the `cursor` document's span in those bytes and its place
//!              among the fields ([`Reply::raw_cursor`] reads it)
//! ```
//!
//! A warm `find_one` reads `cursor.id` and `cursor.ns` straight from the
//! bytes: building a `Document` of the cursor only to read two fields back
//! cost about as much as the rest of the reply.
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

mod check;

pub use check::check_reply;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::VecDeque;
use std::ops::Range;

use bson::spec::ElementType;
use bson::{Bson, Document, RawDocument, Timestamp};

use crate::proto::raw_walk::{self, Element};

use crate::error::{Error, Result};

/// The keys of `cursor` that hold a batch of documents.
const BATCH_KEYS: [&str; 2] = ["firstBatch", "nextBatch"];

/// A decoded command reply; see the module documentation.
#[derive(Clone)]
pub struct Reply {
    /// Boxed: a reply is handed on by value from the socket to the
    /// operation through half a dozen calls, and each move of the parts
    /// themselves (~400 bytes) was a copy through the stack, the largest
    /// share of the cache lines a warm `find_one` touched.
    parts: Box<ReplyParts>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.parts.fmt(f)
    }
}

/// What a [`Reply`] holds.
#[derive(Clone, Debug)]
struct ReplyParts {
    /// The fields but a cursor kept as bytes, converted when first asked
    /// for ([`Self::document`]).
    document: OnceCell<Document>,
    /// Until then: where the reply document lies in the message's bytes.
    fields_span: Option<Range<usize>>,
    /// The message's bytes, when no batch holds them.
    bytes: Vec<u8>,
    /// Where the fields every reply is asked for lie, noted while parsing.
    known: KnownFields,
    batch: Option<RawBatch>,
    /// Set only while `batch` holds the bytes it points into.
    cursor: Option<CursorPlace>,
    /// No reply came: the command was sent with `w: 0` (moreToCome).
    unacknowledged: bool,
}

/// The fields the executor reads of every reply (`ok`, `$clusterTime`,
/// `operationTime`): their type and value span in the message's bytes, the
/// last of a repeated field, as a `Document` would keep.
#[derive(Clone, Debug, Default)]
struct KnownFields {
    values: [Option<(u8, Range<usize>)>; 3],
    /// The `clusterTime` Timestamp of the last `$clusterTime` that was a
    /// document, found while it was checked (read only when the last
    /// `$clusterTime` is that document).
    cluster_time: Option<Timestamp>,
}

const KNOWN_KEYS: [&str; 3] = ["ok", "$clusterTime", "operationTime"];

/// The index of `$clusterTime` in [`KNOWN_KEYS`].
const CLUSTER_TIME: usize = 1;

impl PartialEq for Reply {
    fn eq(&self, other: &Self) -> bool {
        self.document() == other.document()
            && self.parts.batch == other.parts.batch
            && self.parts.cursor == other.parts.cursor
    }
}

/// The fields of a reply the session and cluster-time rules read: of a
/// `Document`, or of a [`Reply`] whose fields are still bytes (a warm
/// `find_one` then reads `ok`, `$clusterTime` and `operationTime` in place
/// and never builds a `Document` of its reply).
pub(crate) trait ReplyFields {
    /// The value of the top-level field `key` (the last, when repeated).
    fn field(&self, key: &str) -> Option<Cow<'_, Bson>>;

    /// The top-level field `key` as the bytes of a BSON document, when it
    /// is a document: borrowed where the reply still has its bytes.
    fn document_bytes(&self, key: &str) -> Option<Cow<'_, [u8]>> {
        encoded_document(self.field(key)?.as_ref(), key)
    }

    /// The `$clusterTime` document's bytes and its Timestamp `clusterTime`,
    /// when it is a document that has one.
    fn cluster_time(&self) -> Option<(Cow<'_, [u8]>, Timestamp)> {
        find_cluster_time(self)
    }
}

/// [`ReplyFields::cluster_time`] looked up in the field's bytes.
fn find_cluster_time<R: ReplyFields + ?Sized>(reply: &R) -> Option<(Cow<'_, [u8]>, Timestamp)> {
    let encoded = reply.document_bytes("$clusterTime")?;
    let timestamp = raw_walk::find(&encoded, "clusterTime")?.as_timestamp()?;
    Some((encoded, timestamp))
}

/// `value` encoded, when it is a document.
fn encoded_document(value: &Bson, key: &str) -> Option<Cow<'static, [u8]>> {
    match value {
        Bson::Document(document) => crate::proto::encode::document_to_raw(document, key)
            .ok()
            .map(|raw| Cow::Owned(raw.into_bytes())),
        _ => None,
    }
}

impl ReplyFields for Document {
    fn field(&self, key: &str) -> Option<Cow<'_, Bson>> {
        self.get(key).map(Cow::Borrowed)
    }
}

impl ReplyFields for Reply {
    fn field(&self, key: &str) -> Option<Cow<'_, Bson>> {
        Reply::field(self, key)
    }

    fn document_bytes(&self, key: &str) -> Option<Cow<'_, [u8]>> {
        let still_bytes = self.fields_still_bytes();
        match KNOWN_KEYS.iter().position(|known| *known == key) {
            // Checked when the reply was parsed: the bytes are a valid document.
            Some(i) if still_bytes => match self.parts.known.values[i].clone()? {
                (DOCUMENT_KIND, span) => self.message_bytes().get(span).map(Cow::Borrowed),
                _ => None,
            },
            _ => encoded_document(Reply::field(self, key)?.as_ref(), key),
        }
    }

    fn cluster_time(&self) -> Option<(Cow<'_, [u8]>, Timestamp)> {
        if !self.fields_still_bytes() {
            return find_cluster_time(self);
        }
        let timestamp = self.parts.known.cluster_time?;
        Some((self.document_bytes("$clusterTime")?, timestamp))
    }
}

/// The type byte of an embedded document.
const DOCUMENT_KIND: u8 = 0x03;

/// Where a `cursor` left as bytes is: its span in the batch's bytes and its
/// index among the reply's fields (to put it back in order).
#[derive(Clone, Debug, PartialEq)]
struct CursorPlace {
    span: Range<usize>,
    index: usize,
    head: CursorHead,
}

/// `cursor.id`, `cursor.ns` and `cursor.postBatchResumeToken` as noted
/// while the cursor's fields were checked, so that they are not looked for
/// again; the last of a repeated field counts, as in a `Document`. A field
/// of another type than expected keeps its type, for the error.
#[derive(Clone, Debug, PartialEq, Default)]
struct CursorHead {
    id: Option<std::result::Result<i64, ElementType>>,
    /// The span of the text of `cursor.ns` (checked UTF-8), like the
    /// token's: kept in the message rather than copied out.
    ns: Option<std::result::Result<Range<usize>, ElementType>>,
    token: Option<Range<usize>>,
}

/// What a cursor kept as bytes says besides its batch (see
/// [`Reply::cursor_head`]).
#[derive(Debug)]
pub(crate) struct CursorHeadView<'a> {
    /// `cursor.id`: an integer, or the type it had instead.
    pub(crate) id: Option<std::result::Result<i64, ElementType>>,
    /// `cursor.ns`: a string, or the type it had instead.
    pub(crate) ns: Option<std::result::Result<&'a str, ElementType>>,
    /// `cursor.postBatchResumeToken`, when it is a document.
    pub(crate) post_batch_resume_token: Option<&'a RawDocument>,
    /// The key the batch was under (`firstBatch` or `nextBatch`).
    pub(crate) batch_key: &'static str,
}

/// What [`Reply::into_parts`] splits off beside the fields.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ReplyBytes {
    batch: Option<RawBatch>,
    cursor: Option<CursorPlace>,
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
        Reply::from_parts(ReplyParts {
            document: OnceCell::from(document),
            fields_span: None,
            bytes: Vec::new(),
            known: KnownFields::default(),
            batch: None,
            cursor: None,
            unacknowledged: false,
        })
    }

    /// What stands for the reply a `w: 0` write never gets: `{ok: 1}` (as
    /// the monitoring spec's events show it), marked so that a write
    /// operation reports that nothing is known rather than zero counts.
    pub fn unacknowledged() -> Self {
        let mut reply = Reply::from_document(bson::doc! { "ok": 1 });
        reply.parts.unacknowledged = true;
        reply
    }

    /// Whether this stands for the reply a `w: 0` write never got.
    pub fn is_unacknowledged(&self) -> bool {
        self.parts.unacknowledged
    }

    fn from_parts(parts: ReplyParts) -> Self {
        Reply {
            parts: Box::new(parts),
        }
    }

    /// Parses the reply document at `range` of `bytes` (a message body),
    /// keeping a cursor batch of documents as bytes. Every field is checked
    /// now, so a malformed reply is refused here; the fields become a
    /// `Document` only when someone asks ([`Self::document`]).
    pub(crate) fn parse(bytes: Vec<u8>, range: Range<usize>) -> std::result::Result<Self, String> {
        let whole = bytes
            .get(range.clone())
            .ok_or("reply document out of bounds")?;
        let raw = RawDocument::from_bytes(whole).map_err(|e| e.to_string())?;
        crate::proto::nesting::check_reply_depth(raw)?;
        let mut batch = None;
        let mut cursor_place = None;
        let mut known = KnownFields::default();
        for (index, element) in raw_walk::elements(whole)?.enumerate() {
            let element = element?;
            if let (Some(cursor), true, None) =
                (element.as_document(), element.is("cursor"), &batch)
            {
                if let Some((found, head)) = raw_cursor_batch(cursor, &bytes)? {
                    let start = cursor.as_ptr() as usize - bytes.as_ptr() as usize;
                    cursor_place = Some(CursorPlace {
                        span: start..start + cursor.len(),
                        index,
                        head,
                    });
                    batch = Some(found);
                    continue;
                }
            }
            element.check_key()?;
            let known_at = KNOWN_KEYS.iter().position(|key| element.is(key));
            match element.as_document() {
                Some(fields) if known_at == Some(CLUSTER_TIME) => {
                    known.cluster_time = raw_walk::check_finding(fields, Some("clusterTime"))?
                        .and_then(|found| found.as_timestamp());
                }
                _ => element.check()?,
            }
            if let Some(i) = known_at {
                let start = element.value.as_ptr() as usize - bytes.as_ptr() as usize;
                known.values[i] = Some((element.kind, start..start + element.value.len()));
            }
        }
        let (bytes, batch) = match batch {
            Some((key, spans)) => (Vec::new(), Some(RawBatch { bytes, spans, key })),
            None => (bytes, None),
        };
        Ok(Reply::from_parts(ReplyParts {
            document: OnceCell::new(),
            fields_span: Some(range),
            bytes,
            known,
            batch,
            cursor: cursor_place,
            unacknowledged: false,
        }))
    }

    /// The reply's fields but a `cursor` whose batch is kept as bytes (see
    /// [`Self::raw_cursor`]).
    pub fn document(&self) -> &Document {
        self.parts.document.get_or_init(|| self.convert_fields())
    }

    /// The top-level field `key` as [`Self::document`] has it, read in
    /// place while the fields are still bytes.
    pub(crate) fn field(&self, key: &str) -> Option<Cow<'_, Bson>> {
        let unconverted = match (self.parts.document.get(), &self.parts.fields_span) {
            (None, Some(span)) if !(key == "cursor" && self.parts.cursor.is_some()) => span,
            _ => return self.document().get(key).map(Cow::Borrowed),
        };
        if let Some(i) = KNOWN_KEYS.iter().position(|known| *known == key) {
            let (kind, span) = self.parts.known.values[i].clone()?;
            let value = self.message_bytes().get(span)?;
            return Element::of(kind, key, value).to_bson().ok().map(Cow::Owned);
        }
        let whole = self.message_bytes().get(unconverted.clone())?;
        let element = raw_walk::find(whole, key)?;
        element.to_bson().ok().map(Cow::Owned)
    }

    /// Whether the fields are still only bytes (no `Document` made yet).
    fn fields_still_bytes(&self) -> bool {
        self.parts.document.get().is_none() && self.parts.fields_span.is_some()
    }

    /// The bytes the fields, the cursor and the batch point into.
    fn message_bytes(&self) -> &[u8] {
        match &self.parts.batch {
            Some(batch) => &batch.bytes,
            None => &self.parts.bytes,
        }
    }

    /// The fields as a `Document` (checked when parsed, so they convert).
    fn convert_fields(&self) -> Document {
        let mut document = Document::new();
        let Some(whole) = self
            .parts
            .fields_span
            .as_ref()
            .and_then(|span| self.message_bytes().get(span.clone()))
        else {
            return document;
        };
        let Ok(elements) = raw_walk::elements(whole) else {
            return document;
        };
        let cursor_index = self.parts.cursor.as_ref().map(|place| place.index);
        for (index, element) in elements.enumerate() {
            let Ok(element) = element else { break };
            if Some(index) == cursor_index {
                continue;
            }
            if let (Ok(key), Ok(value)) = (element.key(), element.to_bson()) {
                document.insert(key, value);
            }
        }
        document
    }

    /// The fields, converted if they were not yet, taken out.
    fn take_fields(&mut self) -> Document {
        self.document();
        self.parts.fields_span = None;
        self.parts.bytes = Vec::new();
        self.parts.document.take().unwrap_or_default()
    }

    /// The `cursor` document as it arrived, when its batch is kept as bytes
    /// (it is then not in [`Self::document`]).
    pub fn raw_cursor(&self) -> Option<&RawDocument> {
        let place = self.parts.cursor.as_ref()?;
        let bytes = self.parts.batch.as_ref()?.bytes.get(place.span.clone())?;
        RawDocument::from_bytes(bytes).ok()
    }

    /// `id`, `ns` and `postBatchResumeToken` of a cursor kept as bytes, as
    /// noted when the reply was parsed.
    pub(crate) fn cursor_head(&self) -> Option<CursorHeadView<'_>> {
        let place = self.parts.cursor.as_ref()?;
        let batch = self.parts.batch.as_ref()?;
        let token = match &place.head.token {
            Some(span) => Some(
                batch
                    .bytes
                    .get(span.clone())
                    .and_then(|bytes| RawDocument::from_bytes(bytes).ok())?,
            ),
            None => None,
        };
        Some(CursorHeadView {
            id: place.head.id,
            ns: match &place.head.ns {
                Some(Ok(span)) => {
                    Some(Ok(std::str::from_utf8(batch.bytes.get(span.clone())?).ok()?))
                }
                Some(Err(wrong_type)) => Some(Err(*wrong_type)),
                None => None,
            },
            post_batch_resume_token: token,
            batch_key: batch.key,
        })
    }

    /// Takes the batch kept as bytes, if there is one; a `cursor` kept as
    /// bytes is first put back into [`Self::document`] (batch included).
    #[cfg(test)]
    pub fn take_batch(&mut self) -> Result<Option<RawBatch>> {
        self.restore_cursor()?;
        self.document();
        self.parts.fields_span = None;
        Ok(self.parts.batch.take())
    }

    /// Takes the batch kept as bytes if it came from `cursor.<key>`; the
    /// rest of a `cursor` kept as bytes is dropped with it (read it with
    /// [`Self::cursor_head`] first).
    pub(crate) fn take_batch_of(&mut self, key: &str) -> Option<RawBatch> {
        if self
            .parts
            .batch
            .as_ref()
            .is_some_and(|batch| batch.key == key)
        {
            // The fields are converted while their bytes are here.
            self.document();
            self.parts.fields_span = None;
            self.parts.cursor = None;
            return self.parts.batch.take();
        }
        None
    }

    /// [`Self::take_batch_of`], consuming the reply: the rest of a `cursor` kept as bytes is dropped
    /// with it (read it with [`Self::cursor_head`] first), and the other
    /// fields are never converted.
    pub(crate) fn into_batch_of(self, key: &str) -> Option<RawBatch> {
        self.parts.batch.filter(|batch| batch.key == key)
    }

    /// The whole reply as a `Document`, the batch converted too.
    pub fn into_document(mut self) -> Result<Document> {
        if self.parts.cursor.is_some() {
            self.restore_cursor()?;
            return Ok(self.take_fields());
        }
        let mut document = self.take_fields();
        if let Some(batch) = self.parts.batch.take() {
            restore_batch(&mut document, &batch)?;
        }
        Ok(document)
    }

    /// A copy of the whole reply as a `Document` (for command events).
    pub fn to_document(&self) -> Result<Document> {
        let mut document = self.document().clone();
        match (&self.parts.cursor, &self.parts.batch) {
            (Some(place), Some(batch)) => document = with_cursor(document, place, batch)?,
            (None, Some(batch)) => restore_batch(&mut document, batch)?,
            _ => {}
        }
        Ok(document)
    }

    /// Converts a `cursor` kept as bytes (its batch too) and puts it back
    /// in its place among the fields. The batch bytes stay for the taking.
    fn restore_cursor(&mut self) -> Result<()> {
        if self.parts.cursor.is_none() {
            return Ok(());
        }
        let fields = self.take_fields();
        let Some(place) = self.parts.cursor.take() else {
            return Ok(());
        };
        let batch = self
            .parts
            .batch
            .as_ref()
            .ok_or_else(|| Error::protocol(None, "a reply's cursor lost its bytes"))?;
        self.parts.document = OnceCell::from(with_cursor(fields, &place, batch)?);
        Ok(())
    }

    /// Splits off the fields (for `ok: 0` checks that consume a document).
    pub(crate) fn into_parts(mut self) -> (Document, ReplyBytes) {
        let document = self.take_fields();
        let bytes = ReplyBytes {
            batch: self.parts.batch,
            cursor: self.parts.cursor,
        };
        (document, bytes)
    }

    /// Whether the top-level `ok` says success (1, 1.0 or true); the
    /// cursor kept as bytes does not change it.
    pub(crate) fn is_ok(&self) -> bool {
        ok_value(self.field("ok").as_deref())
    }
}

/// `fields` with the cursor at `place` of `batch`'s bytes converted (its
/// batch included) and put back at its index.
fn with_cursor(fields: Document, place: &CursorPlace, batch: &RawBatch) -> Result<Document> {
    let bytes = batch
        .bytes
        .get(place.span.clone())
        .ok_or_else(|| Error::protocol(None, "a reply's cursor lost its bytes"))?;
    let mut cursor = Some(to_document(bytes)?);
    let mut document = Document::new();
    for (index, (key, value)) in fields.into_iter().enumerate() {
        if index == place.index {
            document.insert("cursor", cursor.take().unwrap_or_default());
        }
        document.insert(key, value);
    }
    if let Some(cursor) = cursor {
        document.insert("cursor", cursor);
    }
    Ok(document)
}

/// Whether a reply's `ok` says success (1, 1.0 or true).
pub fn is_ok(reply: &Document) -> bool {
    ok_value(reply.get("ok"))
}

fn ok_value(ok: Option<&Bson>) -> bool {
    match ok {
        Some(Bson::Double(v)) => *v == 1.0,
        Some(Bson::Int32(v)) => *v == 1,
        Some(Bson::Int64(v)) => *v == 1,
        Some(Bson::Boolean(v)) => *v,
        _ => false,
    }
}

/// When `cursor`'s batch (the first `firstBatch`/`nextBatch`) holds only
/// documents: its key and their spans in `message`. Every other field of
/// the cursor is checked to convert, so a malformed cursor is refused with
/// the reply, as when it was converted whole.
#[allow(clippy::type_complexity)]
fn raw_cursor_batch(
    cursor: &[u8],
    message: &[u8],
) -> std::result::Result<Option<((&'static str, VecDeque<Range<usize>>), CursorHead)>, String> {
    let mut batch = None;
    let mut head = CursorHead::default();
    for element in raw_walk::elements(cursor)? {
        let element = element?;
        note_head_field(&mut head, &element, message)?;
        let batch_key = BATCH_KEYS.iter().find(|batch_key| element.is(batch_key));
        match (element.as_array(), batch_key) {
            // A second batch (repeated or both keys): converted whole.
            (_, Some(_)) if batch.is_some() => return Ok(None),
            (Some(array), Some(batch_key)) => match document_spans(array, message)? {
                Some(spans) => batch = Some((*batch_key, spans)),
                None => return Ok(None),
            },
            // Read (and so checked) already.
            _ if element.is("id") || element.is("ns") => {}
            _ => {
                element.check_key()?;
                element.to_bson()?;
            }
        }
    }
    Ok(batch.map(|batch| (batch, head)))
}

fn note_head_field(
    head: &mut CursorHead,
    element: &Element<'_>,
    message: &[u8],
) -> std::result::Result<(), String> {
    let wrong_type = || element.element_type().unwrap_or(ElementType::Undefined);
    match element.key_bytes {
        b"id" => head.id = Some(element.as_i64().ok_or_else(wrong_type)),
        b"ns" => {
            head.ns = Some(match element.as_str() {
                Some(ns) => {
                    let ns = ns?;
                    let start = ns.as_ptr() as usize - message.as_ptr() as usize;
                    Ok(start..start + ns.len())
                }
                None => Err(wrong_type()),
            })
        }
        b"postBatchResumeToken" => {
            head.token = element.as_document().map(|token| {
                let start = token.as_ptr() as usize - message.as_ptr() as usize;
                start..start + token.len()
            });
        }
        _ => {}
    }
    Ok(())
}

/// The span in `message` of each document of `array`, or `None` when an
/// element is not a document.
fn document_spans(
    array: &[u8],
    message: &[u8],
) -> std::result::Result<Option<VecDeque<Range<usize>>>, String> {
    let base = message.as_ptr() as usize;
    let mut spans = VecDeque::new();
    for item in raw_walk::elements(array)? {
        match item?.as_document() {
            Some(document) => {
                let start = document.as_ptr() as usize - base;
                spans.push_back(start..start + document.len());
            }
            None => return Ok(None),
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
    crate::proto::raw_walk::to_document(bytes).map_err(|e| malformed_document(&e))
}

#[cold]
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
    pub fn pop_front<T: serde::de::DeserializeOwned + 'static>(&mut self) -> Option<Result<T>> {
        let span = self.spans.pop_front()?;
        if self.spans.is_empty() {
            // The batch is used up: its memory goes back before the next
            // one, or becomes the last document's.
            let bytes = std::mem::take(&mut self.bytes);
            return Some(decode_last_document(bytes, span));
        }
        Some(decode_document(&self.bytes[span]))
    }
}

/// The last document of a batch, whose bytes are no longer needed: kept as
/// bytes ([`bson::RawDocumentBuf`]) and most of the reply (a GridFS chunk,
/// a large document), it is moved to the front of the reply's buffer,
/// which becomes its own, rather than copied into a new one; held once,
/// not twice. A small document is copied, so that it does not keep a large
/// reply's memory.
fn decode_last_document<T: serde::de::DeserializeOwned + 'static>(
    mut bytes: Vec<u8>,
    span: Range<usize>,
) -> Result<T> {
    let mut decoded: Option<T> = None;
    let slot = &mut decoded as &mut dyn std::any::Any;
    match slot.downcast_mut::<Option<bson::RawDocumentBuf>>() {
        Some(raw) if span.len() * 2 >= bytes.capacity() && span.end <= bytes.len() => {
            bytes.truncate(span.end);
            bytes.drain(..span.start);
            let buf =
                bson::RawDocumentBuf::from_bytes(bytes).map_err(|e| malformed_document(&e))?;
            *raw = Some(buf);
        }
        _ => return decode_document(&bytes[span]),
    }
    decoded.ok_or_else(|| Error::client("a batch document was decoded into nothing"))
}

/// One batch document as `T`. The two untyped cases skip serde: a
/// [`Document`] is built by the driver's own walker (the document serde
/// makes, for about half the work: no visitor call per value), and a
/// [`RawDocumentBuf`](bson::RawDocumentBuf) is the bytes as the reply's
/// parse framed them (serde's path checks no more: the values inside are
/// checked as they are read). Any other type goes through serde.
fn decode_document<T: serde::de::DeserializeOwned + 'static>(bytes: &[u8]) -> Result<T> {
    let mut decoded: Option<T> = None;
    let slot = &mut decoded as &mut dyn std::any::Any;
    if let Some(document) = slot.downcast_mut::<Option<Document>>() {
        *document = Some(to_document(bytes)?);
    } else if let Some(raw) = slot.downcast_mut::<Option<bson::RawDocumentBuf>>() {
        let buf =
            bson::RawDocumentBuf::from_bytes(bytes.to_vec()).map_err(|e| malformed_document(&e))?;
        *raw = Some(buf);
    } else {
        return bson::from_slice(bytes).map_err(|e| deserialize_error(bytes, &e));
    }
    // Not a fall-through to serde: with serde reachable after the untyped
    // branches, every binary that reads `Document`s would link bson's serde
    // deserializer for them too (850 KB of `bench_find`'s 5 MB), where this
    // error, which the branches above cannot reach, costs nothing.
    decoded.ok_or_else(|| Error::internal("a batch document was decoded into nothing"))
}

/// A document that does not deserialize: a protocol error when its bytes
/// are not valid BSON, otherwise a mismatch with the caller's type.
#[cold]
fn deserialize_error(bytes: &[u8], error: &bson::de::Error) -> Error {
    if let Err(invalid) = to_document(bytes) {
        return invalid;
    }
    Error::deserialization(
        "a document from the server does not match the cursor's type",
        error.clone(),
    )
}

#[cfg(test)]
mod tests {
    use bson::{doc, oid::ObjectId};
    use serde::Deserialize;

    use super::*;
    use crate::error::ErrorKind;
    use crate::proto::operation::cursor::{CursorOptions, CursorSpec};

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
        let mut rest = original.clone();
        rest.remove("cursor");
        assert_eq!(
            reply.document(),
            &rest,
            "the cursor (with its batch) is left out of the document, every other field is in it"
        );
        let cursor = reply.raw_cursor().expect("the cursor is kept as bytes");
        assert_eq!(cursor.get_i64("id").unwrap(), 0);
        assert_eq!(cursor.get_str("ns").unwrap(), "db.coll");
        assert_eq!(
            reply.to_document().unwrap(),
            original,
            "order and nesting kept"
        );
        let batch = reply
            .take_batch()
            .unwrap()
            .expect("the batch is kept as bytes");
        assert_eq!(batch.len(), 2);
        assert_eq!(
            reply.document(),
            &original,
            "taking the batch puts the cursor back in its place"
        );
    }

    #[test]
    fn the_fields_stay_bytes_until_a_document_is_asked_for() {
        let time = bson::Timestamp {
            time: 7,
            increment: 1,
        };
        let original = doc! {
            "ok": 0,
            "cursor": { "firstBatch": [ { "a": 1 } ], "id": 0_i64, "ns": "d.c" },
            "operationTime": time,
            "$clusterTime": { "clusterTime": time },
            "ok": 1.0,
        };
        let reply = parsed(&original);
        assert!(reply.is_ok(), "the last `ok` counts, as in a Document");
        assert_eq!(
            reply.field("operationTime").as_deref(),
            Some(&Bson::Timestamp(time))
        );
        assert_eq!(
            reply.field("$clusterTime").as_deref(),
            Some(&Bson::Document(doc! { "clusterTime": time }))
        );
        assert_eq!(reply.field("missing"), None);
        assert!(
            reply.parts.document.get().is_none(),
            "reading the usual fields converts nothing"
        );
        assert!(
            reply.field("cursor").is_none(),
            "the cursor is kept as bytes"
        );
        let mut rest = original.clone();
        rest.remove("cursor");
        assert_eq!(reply.document(), &rest);
        assert_eq!(reply.to_document().unwrap(), original);
    }

    #[test]
    fn the_cluster_time_noted_while_parsing_is_the_one_a_document_has() {
        use bson::{rawdoc, RawDocumentBuf};
        let (a, b) = (
            Timestamp {
                time: 5,
                increment: 1,
            },
            Timestamp {
                time: 6,
                increment: 0,
            },
        );
        let reply_of = |parts: Vec<(&str, bson::RawBson)>| {
            // Appended, not a `Document`: a repeated key stays repeated.
            let mut raw = RawDocumentBuf::new();
            raw.append("ok", 1.0);
            for (key, value) in parts {
                raw.append(key, value);
            }
            raw
        };
        let time = |fields: RawDocumentBuf| bson::RawBson::Document(fields);
        let cases = [
            (
                reply_of(vec![(
                    "$clusterTime",
                    time(rawdoc! { "clusterTime": a, "signature": { "keyId": 1_i64 } }),
                )]),
                Some(a),
            ),
            (
                reply_of(vec![
                    ("$clusterTime", time(rawdoc! { "clusterTime": a })),
                    ("$clusterTime", time(rawdoc! { "clusterTime": b })),
                ]),
                Some(b),
            ),
            (
                reply_of(vec![
                    ("$clusterTime", time(rawdoc! { "clusterTime": a })),
                    ("$clusterTime", bson::RawBson::Int32(1)),
                ]),
                None,
            ),
            (
                reply_of(vec![(
                    "$clusterTime",
                    time(rawdoc! { "clusterTime": a, "clusterTime": "later" }),
                )]),
                None,
            ),
            (
                reply_of(vec![("$clusterTime", time(rawdoc! { "signature": {} }))]),
                None,
            ),
            (
                reply_of(vec![(
                    "$clusterTime",
                    time(rawdoc! { "clusterTime": 1_i64 }),
                )]),
                None,
            ),
            (reply_of(vec![]), None),
        ];
        for (raw, expected) in cases {
            let bytes = raw.as_bytes().to_vec();
            let len = bytes.len();
            let reply = Reply::parse(bytes, 0..len).unwrap();
            let from_bytes = reply
                .cluster_time()
                .map(|(encoded, at)| (encoded.into_owned(), at));
            assert_eq!(from_bytes.as_ref().map(|(_, at)| *at), expected, "{raw:?}");
            assert!(
                reply.parts.document.get().is_none(),
                "read without a Document"
            );
            // The same bytes and time as the Document of the same reply gives.
            let document = reply.document().clone();
            let from_document = document
                .cluster_time()
                .map(|(encoded, at)| (encoded.into_owned(), at));
            assert_eq!(from_bytes, from_document, "{raw:?}");
            let converted = reply
                .cluster_time()
                .map(|(encoded, at)| (encoded.into_owned(), at));
            assert_eq!(converted, from_document, "{raw:?}");
        }
        // A key inside `$clusterTime` that is not UTF-8 refuses the reply.
        let bytes = patched(
            &doc! { "ok": 1.0, "$clusterTime": { "clusterTime": a, "kx": 1 } },
            b"kx\0",
            b"\xffx\0",
        );
        let len = bytes.len();
        assert!(Reply::parse(bytes, 0..len).is_err());
    }

    #[test]
    fn a_malformed_field_is_refused_when_parsed_not_when_read() {
        let reply = doc! { "ok": 1, "note": "abc" };
        let mut bytes = bson::to_vec(&reply).unwrap();
        let at = bytes.windows(3).position(|w| w == b"abc").unwrap();
        bytes[at] = 0xff;
        let len = bytes.len();
        assert!(Reply::parse(bytes, 0..len).is_err());
    }

    #[test]
    fn a_cursor_kept_as_bytes_goes_back_between_the_fields_around_it() {
        let original = doc! {
            "before": 1,
            "cursor": { "id": 9_i64, "firstBatch": [ { "a": 1 } ], "ns": "d.c", "atClusterTime": bson::Timestamp { time: 5, increment: 1 } },
            "ok": 1.0,
            "after": "x",
        };
        let reply = parsed(&original);
        assert_eq!(
            reply.document(),
            &doc! { "before": 1, "ok": 1.0, "after": "x" }
        );
        assert!(reply.is_ok());
        let whole = reply.clone().into_document().unwrap();
        assert_eq!(whole, original);
        assert_eq!(
            whole.keys().collect::<Vec<_>>(),
            original.keys().collect::<Vec<_>>(),
            "the fields keep their order"
        );
        assert_eq!(reply.to_document().unwrap(), original);
    }

    #[test]
    fn a_cursor_with_two_batches_is_converted_whole() {
        let original = doc! {
            "cursor": { "firstBatch": [ { "a": 1 } ], "nextBatch": [ { "b": 2 } ], "id": 0_i64, "ns": "d.c" },
            "ok": 1,
        };
        let mut reply = parsed(&original);
        assert!(reply.raw_cursor().is_none());
        assert!(reply.take_batch().unwrap().is_none());
        assert_eq!(reply.into_document().unwrap(), original);
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
        assert!(reply.take_batch().unwrap().is_none());
        assert!(reply.raw_cursor().is_none());
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
            matches!(error.kind(), ErrorKind::BsonDeserialization(_)),
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
    fn untyped_documents_come_back_as_they_were_stored() {
        // Field names may start with `$` (MongoDB 5.0+). bson's serde path
        // reads a sub-document shaped like Extended JSON as the value it
        // names; the driver's walker, which builds `Document` results,
        // keeps what the server holds.
        let id = ObjectId::new();
        let stored = doc! {
            "_id": id,
            "looks_like_an_id": { "$oid": id.to_hex() },
            "looks_like_a_date": { "$date": 5_i64 },
            "nested": [{ "a": 1.5, "b": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2] } }],
            "ts": bson::Timestamp { time: 3, increment: 4 },
        };
        let bytes = bson::to_vec(&stored).unwrap();
        let through_serde: Document = bson::from_slice(&bytes).unwrap();
        assert_eq!(
            through_serde.get("looks_like_an_id"),
            Some(&Bson::ObjectId(id))
        );

        let reply = parsed(&first_batch(vec![stored.clone()]));
        let mut spec = CursorSpec::from_raw_reply(reply, CursorOptions::default()).unwrap();
        let document: Document = spec.pop_front().unwrap().unwrap();
        assert_eq!(document, stored);
        assert_eq!(bson::to_vec(&document).unwrap(), bytes);
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
    fn a_large_last_raw_document_takes_over_the_reply_s_buffer() {
        let chunk = doc! { "n": 0, "data": bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![7; 3000],
        } };
        let small = doc! { "n": 1 };
        // As a socket's reply comes: a buffer of the body's length.
        let mut bytes = bson::to_vec(&first_batch(vec![small.clone(), chunk.clone()])).unwrap();
        bytes.shrink_to_fit();
        let len = bytes.len();
        let reply = Reply::parse(bytes, 0..len).unwrap();
        let mut spec = CursorSpec::from_raw_reply(reply, CursorOptions::default()).unwrap();
        let first: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
        assert_eq!(first.to_document().unwrap(), small);
        let buffer = spec.batch.bytes.as_ptr();
        let last: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
        assert_eq!(last.to_document().unwrap(), chunk);
        assert_eq!(last.as_bytes().as_ptr(), buffer, "moved, not copied");

        // A small last document of a large reply is copied out.
        let reply = parsed(&first_batch(vec![chunk.clone(), small.clone()]));
        let mut spec = CursorSpec::from_raw_reply(reply, CursorOptions::default()).unwrap();
        let _: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
        let last: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
        assert_eq!(last.to_document().unwrap(), small);
        assert!(last.as_bytes().len() < 100);
    }

    #[test]
    fn an_element_that_is_not_a_document_is_named() {
        let reply =
            doc! { "cursor": { "id": 0_i64, "ns": "db.c", "firstBatch": [ {}, 7 ] }, "ok": 1 };
        let error =
            CursorSpec::from_raw_reply(parsed(&reply), CursorOptions::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the server returned an invalid reply: malformed reply: `cursor.firstBatch[1]` is an \
             int32, not a document",
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
            matches!(error.kind(), ErrorKind::InvalidResponse { .. }),
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
