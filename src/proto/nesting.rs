//! The nesting limit of BSON documents, both ways: refusing outgoing
//! documents nested too deep before serialising them, and replies nested too
//! deep before converting them. The limit lives here, below the wire codec
//! and the BSON walkers that all enforce it.
//!
//! BSON serialisation (`bson::to_document`, `Document::to_writer`) recurses
//! once per nesting level, so a document nested ten thousand levels deep
//! overflows the stack and aborts the process. Replies are already limited
//! to [`MAX_BSON_DEPTH`] levels when they are decoded; outgoing documents get
//! the same limit here, checked by a serialiser that produces nothing and
//! gives up as soon as the limit is passed, so the check itself never
//! recurses deeper than the limit.

use bson::{Bson, Document, RawBsonRef, RawDocument};
use serde::ser::{self, Serialize};

use crate::error::{Error, Result};

/// Deepest nesting of documents and arrays accepted in a reply. The server
/// itself refuses documents nested deeper than 200 levels; the limit exists
/// so that a hostile peer cannot exhaust the stack of the recursive BSON
/// conversion.
pub(crate) const MAX_BSON_DEPTH: usize = 400;

/// Refuses `value` when its serialised form nests documents and arrays
/// deeper than [`MAX_BSON_DEPTH`] levels (the outermost document is level
/// 1). `what` names the value in the error.
pub(crate) fn check_depth<T: Serialize + ?Sized>(value: &T, what: &str) -> Result<()> {
    match value.serialize(DepthProbe { depth: 0 }) {
        Ok(()) => Ok(()),
        Err(TooDeep::Limit) => Err(Error::invalid_argument(format!(
            "{what} is nested deeper than {MAX_BSON_DEPTH} levels of documents and arrays"
        ))),
        // The real serialisation will report whatever else is wrong.
        Err(TooDeep::Other) => Ok(()),
    }
}

/// Drops `document` level by level instead of through the recursive drop
/// glue, which would overflow the stack on a document nested as deep as
/// those [`check_depth`] refuses.
pub(crate) fn drop_without_recursion(document: Document) {
    let mut pending = vec![Bson::Document(document)];
    while let Some(value) = pending.pop() {
        match value {
            Bson::Document(document) => pending.extend(document.into_iter().map(|(_, v)| v)),
            Bson::Array(array) => pending.extend(array),
            Bson::JavaScriptCodeWithScope(code) => pending.push(Bson::Document(code.scope)),
            _ => {}
        }
    }
}

/// Why the probe stopped.
#[derive(Debug)]
enum TooDeep {
    /// The nesting limit was passed.
    Limit,
    /// The value's own `Serialize` impl failed; not ours to report.
    Other,
}

impl std::fmt::Display for TooDeep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooDeep::Limit => write!(f, "nested too deep"),
            TooDeep::Other => write!(f, "serialisation failed"),
        }
    }
}

impl std::error::Error for TooDeep {}

impl ser::Error for TooDeep {
    fn custom<M: std::fmt::Display>(_message: M) -> Self {
        TooDeep::Other
    }
}

/// A serialiser that only measures nesting; `depth` is the level of the
/// value it is handed (0: not inside any document yet).
#[derive(Clone, Copy)]
struct DepthProbe {
    depth: usize,
}

impl DepthProbe {
    /// The probe for the elements of a document or array opened here.
    fn open(self) -> std::result::Result<DepthProbe, TooDeep> {
        let depth = self.depth + 1;
        if depth > MAX_BSON_DEPTH {
            return Err(TooDeep::Limit);
        }
        Ok(DepthProbe { depth })
    }
}

type Probed = std::result::Result<(), TooDeep>;

impl ser::Serializer for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    type SerializeSeq = DepthProbe;
    type SerializeTuple = DepthProbe;
    type SerializeTupleStruct = DepthProbe;
    type SerializeTupleVariant = DepthProbe;
    type SerializeMap = DepthProbe;
    type SerializeStruct = DepthProbe;
    type SerializeStructVariant = DepthProbe;

    fn serialize_bool(self, _: bool) -> Probed {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Probed {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Probed {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Probed {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Probed {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Probed {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Probed {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Probed {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Probed {
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Probed {
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Probed {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Probed {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Probed {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Probed {
        Ok(())
    }
    fn serialize_none(self) -> Probed {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Probed {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Probed {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Probed {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Probed {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Probed {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        value: &T,
    ) -> Probed {
        // `{ variant: value }`.
        value.serialize(self.open()?)
    }
    fn serialize_seq(self, _: Option<usize>) -> std::result::Result<DepthProbe, TooDeep> {
        self.open()
    }
    fn serialize_tuple(self, _: usize) -> std::result::Result<DepthProbe, TooDeep> {
        self.open()
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<DepthProbe, TooDeep> {
        self.open()
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<DepthProbe, TooDeep> {
        // `{ variant: [elements] }`.
        self.open()?.open()
    }
    fn serialize_map(self, _: Option<usize>) -> std::result::Result<DepthProbe, TooDeep> {
        self.open()
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<DepthProbe, TooDeep> {
        self.open()
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> std::result::Result<DepthProbe, TooDeep> {
        // `{ variant: { fields } }`.
        self.open()?.open()
    }
}

impl ser::SerializeSeq for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Probed {
        value.serialize(*self)
    }
    fn end(self) -> Probed {
        Ok(())
    }
}

impl ser::SerializeTuple for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Probed {
        value.serialize(*self)
    }
    fn end(self) -> Probed {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Probed {
        value.serialize(*self)
    }
    fn end(self) -> Probed {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Probed {
        value.serialize(*self)
    }
    fn end(self) -> Probed {
        Ok(())
    }
}

impl ser::SerializeMap for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Probed {
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Probed {
        value.serialize(*self)
    }
    fn end(self) -> Probed {
        Ok(())
    }
}

impl ser::SerializeStruct for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Probed {
        value.serialize(*self)
    }
    fn end(self) -> Probed {
        Ok(())
    }
}

impl ser::SerializeStructVariant for DepthProbe {
    type Ok = ();
    type Error = TooDeep;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, _: &'static str, value: &T) -> Probed {
        value.serialize(*self)
    }
    fn end(self) -> Probed {
        Ok(())
    }
}

/// Refuses a document nested deeper than [`MAX_BSON_DEPTH`].
pub(crate) fn check_reply_depth(raw: &RawDocument) -> std::result::Result<(), String> {
    // Each nesting level costs at least 7 bytes, so only a large document can
    // be nested deeper than the limit; small ones skip the extra walk.
    if raw.as_bytes().len() > 7 * MAX_BSON_DEPTH {
        check_raw_depth(raw, 1)?;
    }
    Ok(())
}

fn check_raw_depth(document: &RawDocument, depth: usize) -> std::result::Result<(), String> {
    if depth > MAX_BSON_DEPTH {
        return Err(format!(
            "documents nested deeper than {MAX_BSON_DEPTH} levels"
        ));
    }
    for element in document {
        let (_, value) = element.map_err(|e| e.to_string())?;
        let nested = match value {
            RawBsonRef::Document(nested) => nested,
            RawBsonRef::Array(array) => {
                RawDocument::from_bytes(array.as_bytes()).map_err(|e| e.to_string())?
            }
            RawBsonRef::JavaScriptCodeWithScope(code) => code.scope,
            _ => continue,
        };
        check_raw_depth(nested, depth + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    /// `{ a: { a: ... { a: 1 } } }`, `levels` documents deep.
    pub(crate) fn nested(levels: usize) -> Document {
        let mut document = doc! { "a": 1 };
        for _ in 1..levels {
            document = doc! { "a": document };
        }
        document
    }

    #[test]
    fn the_limit_counts_the_outermost_document_as_level_one() {
        check_depth(&nested(MAX_BSON_DEPTH), "doc").unwrap();
        let error = check_depth(&nested(MAX_BSON_DEPTH + 1), "the doc").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("the doc is nested deeper than 400"),
            "{error}"
        );
    }

    #[test]
    fn arrays_count_as_levels() {
        let mut value = Bson::Int32(1);
        for _ in 0..MAX_BSON_DEPTH {
            value = Bson::Array(vec![value]);
        }
        // The arrays plus the enclosing document pass the limit by one.
        check_depth(&doc! { "a": value.clone() }, "doc").unwrap_err();
        check_depth(&value, "array").unwrap();
    }

    #[test]
    fn typed_values_are_measured_through_serde() {
        #[derive(serde::Serialize)]
        struct Node {
            next: Option<Box<Node>>,
        }
        let mut node = Node { next: None };
        for _ in 1..=MAX_BSON_DEPTH {
            node = Node {
                next: Some(Box::new(node)),
            };
        }
        check_depth(&node, "node").unwrap_err();
        // Drop it iteratively: the derived drop glue recurses too.
        let mut next = node.next.take();
        while let Some(mut n) = next {
            next = n.next.take();
        }
    }
}
