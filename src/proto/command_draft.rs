//! A command on its way to the wire: the operation's body, with the fields
//! the executor adds (session, concerns, `$clusterTime`, routing, `$db`)
//! kept beside it instead of inserted into it.
//!
//! ```text
//!  op.build ──> body: Document ─┐
//!  decoration ──> added: [(static key, value)] ─┴─ write ──> OP_MSG body bytes
//!                                                └ to_document ──> events, tests
//! ```
//!
//! Inserting a field into a `bson::Document` costs an `IndexMap` insert (a
//! hash, a key allocation, at times a regrowth of the map), and the whole
//! tree is dropped once it is sent: a warm `find_one` paid a few thousand
//! instructions for fields that are written once and never read again. The
//! rules stay those of `Document::insert`, so the command on the wire is
//! the one a `Document` would hold: a field the body already has is
//! replaced in its place, a new one goes after the body's fields, in the
//! order added. A `Document` of the whole command is made only for whoever
//! asks ([`CommandDraft::to_document`]: the command event's copy, tests).

use bson::{Bson, Document};

use crate::bson_write::{self, WriteError};

/// The body an operation built and the fields added to it since.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CommandDraft {
    body: Document,
    /// Distinct keys, in the order first added.
    added: Vec<(&'static str, Bson)>,
}

impl CommandDraft {
    /// A draft of `body` with nothing added yet.
    pub(crate) fn new(body: Document) -> Self {
        CommandDraft {
            body,
            // The usual decoration (lsid, concerns, $clusterTime, $db) fits.
            added: Vec::with_capacity(4),
        }
    }

    /// The body as the operation built it (added fields not included).
    pub(crate) fn body(&self) -> &Document {
        &self.body
    }

    /// The command's first key: its name.
    pub(crate) fn first_key(&self) -> Option<&str> {
        match self.body.keys().next() {
            Some(key) => Some(key),
            None => self.added.first().map(|(key, _)| *key),
        }
    }

    /// The value of `key` in the command as it stands.
    pub(crate) fn get(&self, key: &str) -> Option<&Bson> {
        match self.added.iter().find(|(added, _)| *added == key) {
            Some((_, value)) => Some(value),
            None => self.body.get(key),
        }
    }

    /// Whether the command as it stands has `key`.
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The document at `key`, to change in place; `None` when absent or
    /// not a document.
    pub(crate) fn get_document_mut(&mut self, key: &str) -> Option<&mut Document> {
        match self.added.iter_mut().find(|(added, _)| *added == key) {
            Some((_, Bson::Document(document))) => Some(document),
            Some(_) => None,
            None => self.body.get_document_mut(key).ok(),
        }
    }

    /// Sets `key` to `value`, as `Document::insert` would.
    pub(crate) fn insert(&mut self, key: &'static str, value: impl Into<Bson>) {
        let value = value.into();
        match self.added.iter_mut().find(|(added, _)| *added == key) {
            Some(slot) => slot.1 = value,
            None => self.added.push((key, value)),
        }
    }

    /// Appends the whole command to `out` as one BSON document; the body's
    /// documents are checked for depth and validity as they are written.
    pub(crate) fn write(&self, out: &mut Vec<u8>) -> Result<(), WriteError> {
        let start = bson_write::begin(out);
        // Which added fields took the place of a body field (bit i: the
        // i-th added); past 64 the body is asked instead.
        let mut replaced = 0u64;
        for (key, value) in &self.body {
            let value = match self.added.iter().position(|(added, _)| *added == key) {
                Some(i) => {
                    replaced |= 1u64.checked_shl(i as u32).unwrap_or(0);
                    &self.added[i].1
                }
                None => value,
            };
            bson_write::write_element(key, value, out, 1)?;
        }
        for (i, (key, value)) in self.added.iter().enumerate() {
            let in_body = match 1u64.checked_shl(i as u32) {
                Some(bit) => replaced & bit != 0,
                None => self.body.contains_key(*key),
            };
            if !in_body {
                bson_write::write_element(key, value, out, 1)?;
            }
        }
        bson_write::end(out, start)
    }

    /// The whole command as a `Document`.
    pub(crate) fn to_document(&self) -> Document {
        self.clone().into_document()
    }

    /// The whole command as a `Document`, consuming the draft.
    pub(crate) fn into_document(self) -> Document {
        let mut document = self.body;
        for (key, value) in self.added {
            document.insert(key, value);
        }
        document
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn bytes(document: &Document) -> Vec<u8> {
        let mut out = Vec::new();
        document.to_writer(&mut out).expect("encodes");
        out
    }

    fn written(draft: &CommandDraft) -> Vec<u8> {
        let mut out = Vec::new();
        draft.write(&mut out).expect("writes");
        out
    }

    #[test]
    fn added_fields_follow_the_body_and_replace_its_own_in_place() {
        let mut draft = CommandDraft::new(doc! { "find": "c", "$db": "user", "filter": {} });
        draft.insert("lsid", doc! { "id": 1 });
        draft.insert("$db", "db");
        draft.insert("readConcern", doc! { "level": "local" });
        draft.insert("lsid", doc! { "id": 2 });
        let expected = doc! {
            "find": "c", "$db": "db", "filter": {},
            "lsid": { "id": 2 }, "readConcern": { "level": "local" },
        };
        assert_eq!(draft.to_document(), expected);
        assert_eq!(written(&draft), bytes(&expected));
        assert_eq!(draft.get("$db"), Some(&Bson::from("db")));
        assert_eq!(draft.first_key(), Some("find"));
    }

    #[test]
    fn a_document_changed_in_place_is_the_one_written() {
        let mut draft = CommandDraft::new(doc! { "count": "c", "readConcern": { "level": "x" } });
        draft
            .get_document_mut("readConcern")
            .expect("the body's")
            .insert("afterClusterTime", 1);
        draft.insert("writeConcern", doc! { "w": 1 });
        draft
            .get_document_mut("writeConcern")
            .expect("an added one")
            .insert("j", true);
        assert!(draft.get_document_mut("count").is_none());
        let expected = doc! {
            "count": "c", "readConcern": { "level": "x", "afterClusterTime": 1 },
            "writeConcern": { "w": 1, "j": true },
        };
        assert_eq!(written(&draft), bytes(&expected));
        assert_eq!(draft.into_document(), expected);
    }

    #[test]
    fn the_bodys_documents_are_still_checked() {
        let mut deep = doc! { "leaf": 1 };
        for _ in 0..crate::wire::MAX_BSON_DEPTH {
            deep = doc! { "d": deep };
        }
        let draft = CommandDraft::new(doc! { "find": "c", "filter": deep });
        assert_eq!(
            draft.write(&mut Vec::new()),
            Err(WriteError::TooDeep),
            "a filter past the depth limit"
        );
        crate::nesting::drop_without_recursion(draft.into_document());
        let nul = CommandDraft::new(doc! { "find": "c", "filter": { "a\0": 1 } });
        assert!(matches!(
            nul.write(&mut Vec::new()),
            Err(WriteError::Invalid(_))
        ));
    }
}
