//! Documents as relaxed Extended JSON for log messages, keys in the
//! document's own order (a command's name first, as the command logging
//! spec shows it).
//!
//! `bson` renders Extended JSON through `serde_json`, whose objects sort
//! their keys unless its `preserve_order` feature is on. Rather than depend
//! on `serde_json` for that feature, documents and arrays are written here
//! and only leaf values are left to `bson` (whose `$`-wrapper keys are fixed).

use std::fmt::Write as _;

use bson::{Bson, Document};

/// `document` as relaxed Extended JSON, keys in order.
pub(crate) fn relaxed(document: &Document) -> String {
    let mut out = String::new();
    write_document(document, &mut out);
    out
}

fn write_document(document: &Document, out: &mut String) {
    out.push('{');
    for (i, (key, value)) in document.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(key, out);
        out.push(':');
        write_value(value, out);
    }
    out.push('}');
}

fn write_value(value: &Bson, out: &mut String) {
    match value {
        Bson::Document(document) => write_document(document, out),
        Bson::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Bson::String(text) => write_string(text, out),
        leaf => {
            let _ = write!(out, "{}", leaf.clone().into_relaxed_extjson());
        }
    }
}

/// A JSON string literal (RFC 8259 escaping).
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn keys_keep_their_order_at_every_depth() {
        let document = doc! { "z": 1, "a": { "y": [ { "q": 1, "b": 2 } ], "b": true } };
        assert_eq!(
            relaxed(&document),
            r#"{"z":1,"a":{"y":[{"q":1,"b":2}],"b":true}}"#
        );
    }

    #[test]
    fn strings_are_escaped_and_leaves_are_extended_json() {
        let id = bson::oid::ObjectId::parse_str("650000000000000000000001").unwrap();
        let document = doc! { "s\"k": "a\\b\n\u{1}", "id": id, "n": 1.5, "x": Bson::Null };
        assert_eq!(
            relaxed(&document),
            r#"{"s\"k":"a\\b\n\u0001","id":{"$oid":"650000000000000000000001"},"n":1.5,"x":null}"#
        );
    }
}
