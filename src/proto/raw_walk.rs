//! Walking a BSON document's elements where they lie, for the replies on
//! the hot path.
//!
//! The bson crate's raw iterator cost about 350 instructions per element (a
//! value parsed for every element, wanted or not, and errors built with the
//! key), and a warm `find_one`'s reply has seven. This walker only frames
//! each element (its type, key and value bytes), checking what framing
//! needs: every length within its document, a document's terminator, the
//! key's UTF-8. A value is read when someone asks, and its own checks run
//! then ([`Element::to_bson`] hands anything but the common types to the
//! bson crate).

use bson::oid::ObjectId;
use bson::spec::ElementType;
use bson::{Bson, DateTime, Document, RawDocument, Timestamp};

use crate::proto::nesting::MAX_BSON_DEPTH;

/// One element of a document: its type byte, key and value bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Element<'a> {
    pub(crate) kind: u8,
    /// The key's bytes: read as text only when wanted ([`Element::key`]),
    /// since comparing bytes is enough to find a field.
    pub(crate) key_bytes: &'a [u8],
    pub(crate) value: &'a [u8],
    /// The whole element: type, key and value.
    pub(crate) bytes: &'a [u8],
}

/// The elements of one document, in order.
pub(crate) struct Elements<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Where the terminating NUL is.
    end: usize,
    failed: bool,
}

const DOCUMENT: u8 = 0x03;
const ARRAY: u8 = 0x04;

/// The elements of `document` (its whole bytes: length, elements, NUL);
/// an error when the length or the terminator is wrong.
pub(crate) fn elements(document: &[u8]) -> Result<Elements<'_>, String> {
    let length = read_i32(document)?;
    if length < 5 || length as usize != document.len() || document[document.len() - 1] != 0 {
        return Err(format!(
            "a document of {} bytes says it has {length} or lacks its terminator",
            document.len()
        ));
    }
    Ok(Elements {
        bytes: document,
        at: 4,
        end: document.len() - 1,
        failed: false,
    })
}

/// The last element of `document` named `key` (the one a `Document` would
/// keep), found without reading the other keys as text; `None` when there
/// is none or the bytes do not frame.
pub(crate) fn find<'a>(document: &'a [u8], key: &str) -> Option<Element<'a>> {
    let mut found = None;
    for element in elements(document).ok()? {
        let element = element.ok()?;
        if element.is(key) {
            found = Some(element);
        }
    }
    found
}

/// Checks every element of `document` as [`Element::check`] does and
/// returns the last one named `key` (as [`find`] would): one walk where a
/// check and a look-up took two (a reply's `$clusterTime` is checked, and
/// its `clusterTime` read, on every reply of a replica set or cluster).
pub(crate) fn check_finding<'a>(
    document: &'a [u8],
    key: Option<&str>,
) -> Result<Option<Element<'a>>, String> {
    let mut found = None;
    for element in elements(document)? {
        let element = element?;
        element.check_key()?;
        element.check()?;
        if key.is_some_and(|key| element.is(key)) {
            found = Some(element);
        }
    }
    Ok(found)
}

/// The first key of `document`, read without walking further.
pub(crate) fn first_key(document: &[u8]) -> Option<&str> {
    std::str::from_utf8(first_key_bytes(document)?).ok()
}

/// The bytes of [`first_key`], for comparing with a known name without
/// checking them as text.
pub(crate) fn first_key_bytes(document: &[u8]) -> Option<&[u8]> {
    let inside = &document[..document.len().checked_sub(1)?];
    if inside.len() <= 5 {
        return None;
    }
    let key_length = inside[5..].iter().position(|byte| *byte == 0)?;
    Some(&inside[5..5 + key_length])
}

impl<'a> Iterator for Elements<'a> {
    type Item = Result<Element<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.at >= self.end {
            return None;
        }
        let element = self.frame();
        self.failed = element.is_err();
        Some(element)
    }
}

impl<'a> Elements<'a> {
    #[inline]
    fn frame(&mut self) -> Result<Element<'a>, String> {
        let inside = &self.bytes[..self.end];
        let start = self.at;
        let kind = inside[start];
        let key_start = self.at + 1;
        let key_length = inside[key_start..]
            .iter()
            .position(|byte| *byte == 0)
            .ok_or("an element's key runs past its document")?;
        let key_bytes = &inside[key_start..key_start + key_length];
        let value_start = key_start + key_length + 1;
        let value_length = value_length(kind, &inside[value_start..]).map_err(|reason| {
            format!("element {:?}: {reason}", String::from_utf8_lossy(key_bytes))
        })?;
        self.at = value_start + value_length;
        Ok(Element {
            kind,
            key_bytes,
            value: &inside[value_start..self.at],
            bytes: &inside[start..self.at],
        })
    }
}

/// Why an element does not frame (a static text: this runs for every
/// element, and the error path must cost nothing until taken).
type Framing = &'static str;

/// How many bytes a value of type `kind` takes at the start of `rest`.
#[inline(always)]
fn value_length(kind: u8, rest: &[u8]) -> Result<usize, Framing> {
    let length = match kind {
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x08 => 1,
        0x10 => 4,
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x07 => 12,
        0x13 => 16,
        0x02 | 0x0D | 0x0E => string_length(rest)?,
        DOCUMENT | ARRAY => {
            let length = positive_length(rest, 5)?;
            if rest[length - 1] != 0 {
                return Err("an embedded document lacks its terminator");
            }
            length
        }
        0x05 => 5 + usize::try_from(read_i32(rest)?).map_err(|_| "a negative binary length")?,
        0x0B => {
            let pattern = cstring_length(rest)?;
            pattern + cstring_length(&rest[pattern..])?
        }
        0x0C => string_length(rest)? + 12,
        0x0F => positive_length(rest, 14)?,
        _ => return Err("an unknown element type"),
    };
    if length > rest.len() {
        return Err("a value runs past its document");
    }
    Ok(length)
}

/// A BSON string: its length, the bytes and a NUL.
#[inline]
fn string_length(rest: &[u8]) -> Result<usize, Framing> {
    let declared = read_i32(rest)?;
    let length = usize::try_from(declared)
        .ok()
        .filter(|n| *n >= 1 && *n <= rest.len() - 4)
        .ok_or("a string length does not fit its document")?
        + 4;
    if rest[length - 1] != 0 {
        return Err("a string lacks its terminator");
    }
    Ok(length)
}

fn cstring_length(rest: &[u8]) -> Result<usize, Framing> {
    rest.iter()
        .position(|byte| *byte == 0)
        .map(|at| at + 1)
        .ok_or("a regular expression runs past its document")
}

/// A length prefix of at least `minimum` that fits in `rest`.
#[inline]
fn positive_length(rest: &[u8], minimum: usize) -> Result<usize, Framing> {
    match usize::try_from(read_i32(rest)?) {
        Ok(length) if length >= minimum && length <= rest.len() => Ok(length),
        _ => Err("a length does not fit its document"),
    }
}

#[inline]
fn read_i32(bytes: &[u8]) -> Result<i32, Framing> {
    match bytes {
        [a, b, c, d, ..] => Ok(i32::from_le_bytes([*a, *b, *c, *d])),
        _ => Err("a length runs past its document"),
    }
}

fn read_8(value: &[u8]) -> [u8; 8] {
    let mut out = [0; 8];
    out.copy_from_slice(&value[..8]);
    out
}

/// A timestamp value (framing gave it its 8 bytes): increment, then time.
fn read_timestamp(value: &[u8]) -> Timestamp {
    Timestamp {
        increment: u32::from_le_bytes([value[0], value[1], value[2], value[3]]),
        time: u32::from_le_bytes([value[4], value[5], value[6], value[7]]),
    }
}

fn read_12(value: &[u8]) -> [u8; 12] {
    let mut out = [0; 12];
    out.copy_from_slice(&value[..12]);
    out
}

/// The document `bytes` (length, elements, NUL) as a [`Document`], every
/// byte checked: what `bson::from_slice::<Document>` gives for the same
/// bytes, without serde's per-value visitor calls (about half the work for
/// a small result document). Nested deeper than [`MAX_BSON_DEPTH`] levels
/// is an error, so hostile bytes cannot exhaust the stack.
pub(crate) fn to_document(bytes: &[u8]) -> Result<Document, String> {
    document_at(bytes, 1)
}

/// The elements of the document `bytes`, in order, checked as
/// [`to_document`] checks them, without building its map: for a document
/// that is read once, key by key (the options a C caller passes).
#[cfg(any(feature = "capi", test))]
pub(crate) fn to_pairs(bytes: &[u8]) -> Result<Vec<(String, Bson)>, String> {
    elements(bytes)?
        .map(|element| {
            let element = element?;
            Ok((element.key()?.to_owned(), element.bson_at(1)?))
        })
        .collect()
}

fn document_at(bytes: &[u8], depth: usize) -> Result<Document, String> {
    check_nesting(depth)?;
    let mut document = Document::new();
    for element in elements(bytes)? {
        let element = element?;
        document.insert(element.key()?, element.bson_at(depth)?);
    }
    Ok(document)
}

fn check_nesting(depth: usize) -> Result<(), String> {
    if depth > MAX_BSON_DEPTH {
        return Err(format!(
            "documents nested deeper than {MAX_BSON_DEPTH} levels"
        ));
    }
    Ok(())
}

impl<'a> Element<'a> {
    /// The element `key: value` of type `kind` (a value found earlier).
    pub(crate) fn of(kind: u8, key: &'a str, value: &'a [u8]) -> Self {
        Element {
            kind,
            key_bytes: key.as_bytes(),
            value,
            bytes: value,
        }
    }

    /// The key as text; an error when it is not UTF-8.
    pub(crate) fn key(&self) -> Result<&'a str, String> {
        std::str::from_utf8(self.key_bytes).map_err(|_| "an element's key is not UTF-8".into())
    }

    /// Checks that the key is UTF-8 where its text is not needed. Keys are
    /// almost always ASCII, and a loop over the bytes checks that in a
    /// fraction of the ~80 instructions `from_utf8` spends on a short key
    /// (a warm `find_one` checks a dozen; `<[u8]>::is_ascii`, a word at a
    /// time, ran fewer instructions but added more hot code than it saved).
    pub(crate) fn check_key(&self) -> Result<(), String> {
        if self.key_bytes.iter().all(u8::is_ascii) {
            return Ok(());
        }
        self.key().map(|_| ())
    }

    /// Whether the key is `key`.
    pub(crate) fn is(&self, key: &str) -> bool {
        self.key_bytes == key.as_bytes()
    }

    /// The value's type (`None` for a type byte BSON does not define, which
    /// the walker has already refused).
    pub(crate) fn element_type(&self) -> Option<ElementType> {
        ElementType::from(self.kind)
    }

    /// An `int32` or `int64` value.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self.kind {
            0x10 => Some(i64::from(i32::from_le_bytes([
                self.value[0],
                self.value[1],
                self.value[2],
                self.value[3],
            ]))),
            0x12 => Some(i64::from_le_bytes(read_8(self.value))),
            _ => None,
        }
    }

    /// A timestamp value.
    pub(crate) fn as_timestamp(&self) -> Option<Timestamp> {
        (self.kind == 0x11).then(|| read_timestamp(self.value))
    }

    /// A string value; `Err` when it is not UTF-8.
    pub(crate) fn as_str(&self) -> Option<Result<&'a str, String>> {
        (self.kind == 0x02).then(|| {
            std::str::from_utf8(&self.value[4..self.value.len() - 1])
                .map_err(|_| "a string is not UTF-8".to_string())
        })
    }

    /// An embedded document's bytes.
    pub(crate) fn as_document(&self) -> Option<&'a [u8]> {
        (self.kind == DOCUMENT).then_some(self.value)
    }

    /// An array's bytes (a document keyed "0", "1", ...).
    pub(crate) fn as_array(&self) -> Option<&'a [u8]> {
        (self.kind == ARRAY).then_some(self.value)
    }

    /// Checks that the value converts ([`Self::to_bson`]) without
    /// converting it: the common types are checked in place, documents and
    /// arrays element by element.
    pub(crate) fn check(self) -> Result<(), String> {
        match self.kind {
            // Any bytes of these sizes are values.
            0x01 | 0x06 | 0x07 | 0x09 | 0x0A | 0x10 | 0x11 | 0x12 | 0x13 | 0x7F | 0xFF => Ok(()),
            0x02 => self.as_str().unwrap_or(Ok("")).map(|_| ()),
            0x08 if self.value[0] <= 1 => Ok(()),
            // Framing checked the length; only the old binary subtype (2)
            // repeats it inside, which the bson crate checks (below).
            // `$clusterTime.signature.hash` is one of these on every reply
            // of a replica set or a sharded cluster.
            0x05 if self.value[4] != 0x02 => Ok(()),
            DOCUMENT | ARRAY => check_finding(self.value, None).map(|_| ()),
            _ => self.to_bson().map(|_| ()),
        }
    }

    /// The value as a `Bson`, every byte checked.
    pub(crate) fn to_bson(self) -> Result<Bson, String> {
        self.bson_at(1)
    }

    /// The value of an element of a document at nesting level `depth`
    /// (the outermost document is level 1), its own documents and arrays
    /// one level deeper.
    fn bson_at(self, depth: usize) -> Result<Bson, String> {
        let value = self.value;
        Ok(match self.kind {
            0x01 => Bson::Double(f64::from_le_bytes(read_8(value))),
            0x02 => Bson::String(self.as_str().unwrap_or(Ok(""))?.to_string()),
            0x07 => Bson::ObjectId(ObjectId::from_bytes(read_12(value))),
            0x08 if value[0] <= 1 => Bson::Boolean(value[0] == 1),
            0x09 => Bson::DateTime(DateTime::from_millis(i64::from_le_bytes(read_8(value)))),
            0x0A => Bson::Null,
            0x10 => Bson::Int32(i32::from_le_bytes([value[0], value[1], value[2], value[3]])),
            0x12 => Bson::Int64(i64::from_le_bytes(read_8(value))),
            0x11 => Bson::Timestamp(read_timestamp(value)),
            DOCUMENT => Bson::Document(document_at(value, depth + 1)?),
            ARRAY => {
                check_nesting(depth + 1)?;
                let mut items = Vec::new();
                for item in elements(value)? {
                    let item = item?;
                    // An array's keys are not kept, but bytes that are not
                    // UTF-8 there are as malformed as anywhere else.
                    item.check_key()?;
                    items.push(item.bson_at(depth + 1)?);
                }
                Bson::Array(items)
            }
            _ => self.by_the_bson_crate()?,
        })
    }

    /// A value of a less common type, read by the bson crate from a
    /// one-element document.
    fn by_the_bson_crate(&self) -> Result<Bson, String> {
        let mut single = Vec::with_capacity(self.value.len() + 8);
        single.extend_from_slice(&[0; 4]);
        single.push(self.kind);
        single.extend_from_slice(b"v\0");
        single.extend_from_slice(self.value);
        single.push(0);
        let length = single.len() as i32;
        single[..4].copy_from_slice(&length.to_le_bytes());
        let raw = document(&single)?;
        match raw.iter().next() {
            // Never a document or an array: those are converted above.
            Some(Ok((_, value))) => Bson::try_from(value.to_raw_bson()).map_err(|e| e.to_string()),
            Some(Err(error)) => Err(error.to_string()),
            None => Err("an element vanished".into()),
        }
    }
}

fn document(bytes: &[u8]) -> Result<&RawDocument, String> {
    RawDocument::from_bytes(bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::spec::BinarySubtype;
    use bson::{doc, Binary, DateTime, Decimal128, Document, Regex};

    fn walked(document: &Document) -> Document {
        let bytes = bson::to_vec(document).unwrap();
        let mut out = Document::new();
        for element in elements(&bytes).unwrap() {
            let element = element.unwrap();
            out.insert(element.key().unwrap(), element.to_bson().unwrap());
        }
        out
    }

    #[test]
    fn every_type_reads_as_the_bson_crate_reads_it() {
        assert_eq!(walked(&every_type()), every_type());
    }

    fn every_type() -> Document {
        doc! {
            "double": 1.5, "string": "héllo", "empty": "",
            "doc": { "a": 1, "b": { "c": [1, "two", { "three": 3 }] } },
            "array": [[], {}, [1, [2]]],
            "binary": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![4, 5] },
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: vec![6; 16] },
            "undefined": Bson::Undefined, "oid": ObjectId::from_bytes([1; 12]),
            "true": true, "false": false, "date": DateTime::from_millis(-1_234_567),
            "null": Bson::Null,
            "regex": Regex { pattern: "^a.*b$".into(), options: "im".into() },
            "code": Bson::JavaScriptCode("return 1".into()), "symbol": Bson::Symbol("s".into()),
            "scoped": bson::JavaScriptCodeWithScope { code: "x".into(), scope: doc! { "x": 1 } },
            "int32": -7i32, "ts": Timestamp { time: 5, increment: 9 }, "int64": i64::MIN,
            "decimal": Decimal128::from_bytes([3; 16]),
            "max": Bson::MaxKey, "min": Bson::MinKey,
            "twice": 1, "twice": "the second value, in the first place",
        }
    }

    #[test]
    fn to_document_gives_what_serde_gives() {
        let bytes = bson::to_vec(&every_type()).unwrap();
        let serde: Document = bson::from_slice(&bytes).unwrap();
        assert_eq!(to_document(&bytes).unwrap(), serde);
        assert_eq!(serde, every_type());
    }

    /// Damaged documents: whatever serde makes of them, `to_document` makes
    /// the same (the same document, or an error), and never panics.
    #[test]
    fn to_document_agrees_with_serde_on_damaged_bytes() {
        let good = bson::to_vec(&every_type()).unwrap();
        let mut rng = fastrand::Rng::with_seed(0xD0C5_A11E);
        let (mut refused, mut accepted) = (0, 0);
        for _ in 0..20_000 {
            let mut bytes = good.clone();
            for _ in 0..rng.usize(1..4) {
                let at = rng.usize(4..bytes.len());
                bytes[at] = match rng.u8(..4) {
                    0 => 0,
                    1 => 0xFF,
                    2 => bytes[at].wrapping_add(1),
                    _ => rng.u8(..),
                };
            }
            let ours = to_document(&bytes);
            let serde = bson::from_slice::<Document>(&bytes);
            match (&ours, &serde) {
                (Ok(ours), Ok(serde)) => {
                    // Compared as bytes: a damaged double may be a NaN.
                    let written = |d: &Document| bson::to_vec(d).unwrap();
                    assert_eq!(written(ours), written(serde), "{bytes:?}");
                    accepted += 1;
                }
                (Err(_), Err(_)) => refused += 1,
                _ => panic!("ours {ours:?}, serde {serde:?}, for {bytes:?}"),
            }
        }
        assert!(
            refused > 1_000 && accepted > 1_000,
            "{refused} refused, {accepted} accepted"
        );
    }

    #[test]
    fn to_pairs_lists_what_to_document_maps() {
        let given = doc! { "limit": -1, "sort": { "n": 1 }, "s": "é", "a": [1, { "b": null }] };
        let mut bytes = Vec::new();
        given.to_writer(&mut bytes).unwrap();
        let pairs = to_pairs(&bytes).unwrap();
        assert_eq!(pairs.into_iter().collect::<Document>(), given);
        let mut damaged = bytes.clone();
        damaged[4] = 0x7f; // an element type that does not exist
        assert!(to_pairs(&damaged).is_err());
        assert!(to_pairs(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn to_document_refuses_nesting_past_the_limit() {
        let nested = |levels: usize| {
            let mut document = doc! {};
            for _ in 1..levels {
                document = doc! { "a": [document] };
            }
            bson::to_vec(&document).unwrap()
        };
        // Each level here is a document and an array: 2 levels per loop.
        assert!(to_document(&nested(MAX_BSON_DEPTH / 2)).is_ok());
        let error = to_document(&nested(MAX_BSON_DEPTH)).unwrap_err();
        assert!(error.contains("nested deeper"), "{error}");
    }

    #[test]
    fn check_agrees_with_conversion() {
        // Keys beyond ASCII in a nested document and in an array's document
        // (an array's own keys are digits, but its bytes are as untrusted).
        let good = bson::to_vec(&doc! {
            "d": { "s": "x", "a": [true, 1.5, { "n": null }], "clé": 1, "b": [ { "ключ": "v" } ] }
        })
        .unwrap();
        let element = elements(&good).unwrap().next().unwrap().unwrap();
        assert!(element.check().is_ok() && element.to_bson().is_ok());
        assert!(check_finding(&good, None).is_ok());
        for (from, to) in [
            // The inner string "x" made invalid UTF-8, the inner boolean made 2.
            (&b"x\0"[..], &b"\xff\0"[..]),
            (&b"\x08\x30\0\x01"[..], &b"\x08\x30\0\x02"[..]),
            // "é" (C3 A9) made a lone continuation byte; the key "0" of the
            // array of documents made 0xFF.
            (&b"cl\xc3\xa9\0"[..], &b"cl\xa9\xa9\0"[..]),
            (&b"\x030\0"[..], &b"\x03\xff\0"[..]),
        ] {
            let bad = patched(&good, from, to);
            let element = elements(&bad).unwrap().next().unwrap().unwrap();
            assert!(element.check().is_err(), "{to:?}");
            assert!(element.to_bson().is_err(), "{to:?}");
            assert!(check_finding(&bad, None).is_err(), "{to:?}");
        }
    }

    /// `bytes` with the first run of `from` replaced by `to`, as long.
    fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
        let mut patched = bytes.to_vec();
        let at = patched.windows(from.len()).position(|w| w == from).unwrap();
        patched[at..at + from.len()].copy_from_slice(to);
        patched
    }

    #[test]
    fn check_agrees_with_conversion_on_binaries() {
        let document = doc! {
            "generic": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![4, 5] },
            "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: vec![6; 16] },
            "user": Binary { subtype: BinarySubtype::UserDefined(0x80), bytes: vec![] },
        };
        let good = bson::to_vec(&document).unwrap();
        for element in elements(&good).unwrap() {
            let element = element.unwrap();
            assert!(element.check().is_ok(), "{:?}", element.key());
            assert!(element.to_bson().is_ok(), "{:?}", element.key());
        }
        // The old subtype's inner length (2) made 3: both refuse it.
        let mut bad = good.clone();
        let inner = bad.windows(5).position(|w| w == [2, 2, 0, 0, 0]).unwrap() + 1;
        bad[inner] = 3;
        let old = elements(&bad).unwrap().nth(1).unwrap().unwrap();
        assert!(old.is("old"));
        assert!(old.check().is_err() && old.to_bson().is_err());
    }

    #[test]
    fn lengths_that_lie_are_refused() {
        let bytes = bson::to_vec(&doc! { "s": "abc", "n": 1 }).unwrap();
        let mut long = bytes.clone();
        long[7] = 200; // the string's length
        assert!(elements(&long).unwrap().any(|e| e.is_err()));
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() - 1);
        assert!(elements(&cut).is_err());
        let mut unknown = bytes.clone();
        unknown[4] = 0x42;
        assert!(elements(&unknown).unwrap().any(|e| e.is_err()));
        let mut bad_bool = bson::to_vec(&doc! { "b": true }).unwrap();
        bad_bool[7] = 2;
        let element = elements(&bad_bool).unwrap().next().unwrap().unwrap();
        assert!(element.to_bson().is_err(), "a boolean of 2");
        assert!(elements(&[5, 0, 0, 0, 1]).is_err(), "no terminator");
        assert!(elements(&[4, 0, 0, 0]).is_err(), "too short");
    }
}
