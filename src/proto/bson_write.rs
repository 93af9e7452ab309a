//! Writing a [`Document`] as BSON bytes, directly.
//!
//! `Document::to_writer` goes through serde: every value is turned into its
//! Extended JSON shape first (a binary's bytes are base64-encoded and decoded
//! again) and an outgoing command was walked once more beforehand to refuse
//! deep nesting. Each warm command paid about 8,000 instructions for that.
//! This writer walks the document once, refuses nesting deeper than
//! [`MAX_BSON_DEPTH`] as it goes (so it never recurses deeper than the
//! limit), and produces the same bytes as `to_writer`.

use bson::spec::BinarySubtype;
use bson::{Bson, Document};

use crate::proto::nesting::MAX_BSON_DEPTH;

/// Why a document could not be written.
#[derive(Debug, PartialEq)]
pub(crate) enum WriteError {
    /// Documents, arrays and code-with-scope scopes nest deeper than
    /// [`MAX_BSON_DEPTH`] levels (the outermost document is level 1).
    TooDeep,
    /// Anything else (a NUL in a key or a regular expression, a value over
    /// the BSON size limits), in words.
    Invalid(String),
}

/// Appends `document` to `out` as BSON. On error `out` may hold a partial
/// document; callers truncate.
pub(crate) fn write_document(document: &Document, out: &mut Vec<u8>) -> Result<(), WriteError> {
    write_nested(document, out, 1)
}

fn write_nested(document: &Document, out: &mut Vec<u8>, depth: usize) -> Result<(), WriteError> {
    if depth > MAX_BSON_DEPTH {
        return Err(WriteError::TooDeep);
    }
    let start = begin(out);
    for (key, value) in document {
        write_element(key, value, out, depth)?;
    }
    end(out, start)
}

fn write_array(items: &[Bson], out: &mut Vec<u8>, depth: usize) -> Result<(), WriteError> {
    if depth > MAX_BSON_DEPTH {
        return Err(WriteError::TooDeep);
    }
    let start = begin(out);
    let mut index = IndexKey::new();
    for (i, value) in items.iter().enumerate() {
        write_element(index.format(i), value, out, depth)?;
    }
    end(out, start)
}

/// A document written field by field, straight into its bytes (an
/// operation's command body), each value checked as [`write_document`]
/// checks it.
pub(crate) struct DocumentWriter {
    out: Vec<u8>,
}

impl DocumentWriter {
    /// An empty document, with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        begin(&mut out);
        DocumentWriter { out }
    }

    /// Appends `key: value`.
    pub(crate) fn value(&mut self, key: &str, value: &Bson) -> Result<(), WriteError> {
        write_element(key, value, &mut self.out, 1)
    }

    /// Appends `key: value` for a string, without a `Bson` of it.
    pub(crate) fn string(&mut self, key: &str, value: &str) -> Result<(), WriteError> {
        write_string_element(key, value, &mut self.out)
    }

    /// Appends `key: value` for a document, without a `Bson` of it.
    pub(crate) fn document(&mut self, key: &str, value: &Document) -> Result<(), WriteError> {
        self.out
            .push(bson::spec::ElementType::EmbeddedDocument as u8);
        cstring(key, &mut self.out, "key")?;
        write_nested(value, &mut self.out, 2)
    }

    /// The finished document's bytes.
    pub(crate) fn finish(mut self) -> Result<Vec<u8>, WriteError> {
        end(&mut self.out, 0)?;
        Ok(self.out)
    }
}

/// Appends `key: value` for a string, without a `Bson` of it.
pub(crate) fn write_string_element(
    key: &str,
    value: &str,
    out: &mut Vec<u8>,
) -> Result<(), WriteError> {
    out.push(bson::spec::ElementType::String as u8);
    cstring(key, out, "key")?;
    string(value, out)
}

/// Appends `key: <the document encoded as bytes>` (bytes the driver wrote
/// itself, so already checked).
pub(crate) fn write_encoded_document(
    key: &str,
    bytes: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), WriteError> {
    out.push(bson::spec::ElementType::EmbeddedDocument as u8);
    cstring(key, out, "key")?;
    out.extend_from_slice(bytes);
    Ok(())
}

/// Reserves the length of a document; returns where it starts.
pub(crate) fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    start
}

/// Terminates the document begun at `start` and fills in its length.
pub(crate) fn end(out: &mut Vec<u8>, start: usize) -> Result<(), WriteError> {
    out.push(0);
    let length = i32::try_from(out.len() - start)
        .map_err(|_| WriteError::Invalid("document exceeds 2 GiB".into()))?;
    out[start..start + 4].copy_from_slice(&length.to_le_bytes());
    Ok(())
}

/// Appends one element of a document at nesting level `depth` (the
/// outermost document is level 1).
pub(crate) fn write_element(
    key: &str,
    value: &Bson,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), WriteError> {
    if let Bson::DbPointer(_) = value {
        // Its fields are private to the bson crate: let it write this one
        // (deprecated, rare) value.
        return foreign_element(key, value, out);
    }
    out.push(value.element_type() as u8);
    cstring(key, out, "key")?;
    match value {
        Bson::Double(v) => out.extend_from_slice(&v.to_le_bytes()),
        Bson::String(v) | Bson::Symbol(v) | Bson::JavaScriptCode(v) => string(v, out)?,
        Bson::Document(v) => write_nested(v, out, depth + 1)?,
        Bson::Array(v) => write_array(v, out, depth + 1)?,
        Bson::Binary(v) => binary(&v.bytes, v.subtype, out)?,
        Bson::ObjectId(v) => out.extend_from_slice(&v.bytes()),
        Bson::Boolean(v) => out.push(u8::from(*v)),
        Bson::DateTime(v) => out.extend_from_slice(&v.timestamp_millis().to_le_bytes()),
        Bson::RegularExpression(v) => {
            cstring(&v.pattern, out, "regular expression pattern")?;
            cstring(&v.options, out, "regular expression options")?;
        }
        Bson::JavaScriptCodeWithScope(v) => {
            let start = begin(out);
            string(&v.code, out)?;
            write_nested(&v.scope, out, depth + 1)?;
            let length = i32::try_from(out.len() - start)
                .map_err(|_| WriteError::Invalid("code with scope exceeds 2 GiB".into()))?;
            out[start..start + 4].copy_from_slice(&length.to_le_bytes());
        }
        Bson::Int32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Bson::Timestamp(v) => {
            out.extend_from_slice(&v.increment.to_le_bytes());
            out.extend_from_slice(&v.time.to_le_bytes());
        }
        Bson::Int64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Bson::Decimal128(v) => out.extend_from_slice(&v.bytes()),
        Bson::Null | Bson::Undefined | Bson::MaxKey | Bson::MinKey | Bson::DbPointer(_) => {}
    }
    Ok(())
}

/// One element written by the bson crate (a one-field document, its
/// length and terminator cut off).
fn foreign_element(key: &str, value: &Bson, out: &mut Vec<u8>) -> Result<(), WriteError> {
    let mut single = Document::new();
    single.insert(key, value.clone());
    let mut bytes = Vec::new();
    single
        .to_writer(&mut bytes)
        .map_err(|e| WriteError::Invalid(e.to_string()))?;
    out.extend_from_slice(&bytes[4..bytes.len() - 1]);
    Ok(())
}

fn cstring(text: &str, out: &mut Vec<u8>, what: &str) -> Result<(), WriteError> {
    // A plain loop: keys are short, and the slice search's setup cost more
    // than the search (every key of every command goes through here).
    if text.bytes().any(|byte| byte == 0) {
        return Err(WriteError::Invalid(format!(
            "{what} {text:?} contains a NUL byte"
        )));
    }
    out.extend_from_slice(text.as_bytes());
    out.push(0);
    Ok(())
}

fn string(text: &str, out: &mut Vec<u8>) -> Result<(), WriteError> {
    let length = i32::try_from(text.len() + 1)
        .map_err(|_| WriteError::Invalid("string exceeds 2 GiB".into()))?;
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.push(0);
    Ok(())
}

fn binary(bytes: &[u8], subtype: BinarySubtype, out: &mut Vec<u8>) -> Result<(), WriteError> {
    // The old binary subtype repeats the length inside the payload.
    let old = subtype == BinarySubtype::BinaryOld;
    let length = i32::try_from(bytes.len() + if old { 4 } else { 0 })
        .map_err(|_| WriteError::Invalid("binary exceeds 2 GiB".into()))?;
    out.extend_from_slice(&length.to_le_bytes());
    out.push(u8::from(subtype));
    if old {
        out.extend_from_slice(&(length - 4).to_le_bytes());
    }
    out.extend_from_slice(bytes);
    Ok(())
}

/// Array keys ("0", "1", ...) without an allocation per element.
struct IndexKey {
    buffer: [u8; 20],
}

impl IndexKey {
    fn new() -> IndexKey {
        IndexKey { buffer: [0; 20] }
    }

    fn format(&mut self, mut n: usize) -> &str {
        let mut at = self.buffer.len();
        loop {
            at -= 1;
            self.buffer[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        // Only ASCII digits were written.
        std::str::from_utf8(&self.buffer[at..]).unwrap_or("0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::{doc, Binary, DateTime, Decimal128, JavaScriptCodeWithScope, Regex, Timestamp};

    fn ours(document: &Document) -> Vec<u8> {
        let mut out = Vec::new();
        write_document(document, &mut out).unwrap();
        out
    }

    fn theirs(document: &Document) -> Vec<u8> {
        let mut out = Vec::new();
        document.to_writer(&mut out).unwrap();
        out
    }

    #[test]
    fn every_type_is_written_as_the_bson_crate_writes_it() {
        let pointer = bson::from_slice::<Document>(&theirs(&doc! { "p": 1 }))
            .ok()
            .and_then(|_| {
                // A DbPointer can only be made by parsing one.
                let mut raw = vec![0u8; 4];
                raw.push(0x0C);
                raw.extend_from_slice(b"p\0");
                raw.extend_from_slice(&4i32.to_le_bytes());
                raw.extend_from_slice(b"a.b\0");
                raw.extend_from_slice(&ObjectId::from_bytes([7; 12]).bytes());
                raw.push(0);
                let length = raw.len() as i32;
                raw[..4].copy_from_slice(&length.to_le_bytes());
                bson::from_slice::<Document>(&raw).ok()
            })
            .and_then(|d| d.get("p").cloned())
            .expect("a DbPointer");
        let document = doc! {
            "double": 1.5, "string": "héllo\0inside", "empty": "",
            "doc": { "a": 1, "b": { "c": [1, "two", { "three": 3 }] } },
            "array": [[], {}, [1, [2, [3]]]],
            "generic": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9; 5] },
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: vec![4; 16] },
            "user": Binary { subtype: BinarySubtype::UserDefined(0x85), bytes: vec![] },
            "undefined": Bson::Undefined, "oid": ObjectId::from_bytes([1; 12]),
            "true": true, "false": false, "date": DateTime::from_millis(-1_234_567),
            "null": Bson::Null,
            "regex": Regex { pattern: "^a.*b$".into(), options: "im".into() },
            "pointer": pointer,
            "code": Bson::JavaScriptCode("return 1".into()), "symbol": Bson::Symbol("s".into()),
            "scoped": JavaScriptCodeWithScope { code: "x".into(), scope: doc! { "x": [1] } },
            "int32": -7i32, "ts": Timestamp { time: 5, increment: 9 }, "int64": i64::MIN,
            "decimal": Decimal128::from_bytes([3; 16]),
            "max": Bson::MaxKey, "min": Bson::MinKey,
        };
        assert_eq!(ours(&document), theirs(&document));
        let long_array = doc! { "a": (0..1234).map(Bson::from).collect::<Vec<_>>() };
        assert_eq!(ours(&long_array), theirs(&long_array));
        assert_eq!(ours(&doc! {}), theirs(&doc! {}));
    }

    #[test]
    fn nul_bytes_in_keys_and_patterns_are_refused() {
        let mut out = Vec::new();
        let key = write_document(&doc! { "a\0b": 1 }, &mut out);
        assert!(matches!(key, Err(WriteError::Invalid(m)) if m.contains("NUL")));
        let regex = doc! { "r": Regex { pattern: "a\0".into(), options: String::new() } };
        assert!(matches!(
            write_document(&regex, &mut Vec::new()),
            Err(WriteError::Invalid(_))
        ));
    }

    fn nested(levels: usize, in_array: bool) -> Document {
        let mut document = doc! { "leaf": 1 };
        for _ in 1..levels {
            document = if in_array {
                doc! { "a": [Bson::Document(document)] }
            } else {
                doc! { "d": document }
            };
        }
        document
    }

    #[test]
    fn nesting_up_to_the_limit_is_written_and_beyond_it_refused() {
        let at_limit = nested(MAX_BSON_DEPTH, false);
        assert_eq!(ours(&at_limit), theirs(&at_limit));
        let over = nested(MAX_BSON_DEPTH + 1, false);
        assert_eq!(
            write_document(&over, &mut Vec::new()),
            Err(WriteError::TooDeep)
        );
        // Arrays count as levels too: each wrapper adds two.
        let arrays = nested(MAX_BSON_DEPTH / 2 + 1, true);
        assert_eq!(
            write_document(&arrays, &mut Vec::new()),
            Err(WriteError::TooDeep)
        );
        crate::proto::nesting::drop_without_recursion(over);
        crate::proto::nesting::drop_without_recursion(arrays);
    }
}
