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
//! The body itself may be BSON bytes already ([`CommandBody::Raw`], what
//! `find` writes): its elements are then copied as they are, and looked up
//! by key in place.

use std::borrow::Cow;
use std::sync::Arc;

use bson::{Bson, Document, RawDocumentBuf};

use crate::error::Error;
use crate::proto::bson_write::{self, WriteError};

/// A command's body as the operation built it: a `Document`, or the BSON
/// bytes of one, which a hot operation (`find`) writes straight away rather
/// than build a `Document` tree only to write and drop it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CommandBody {
    /// A document.
    Document(Document),
    /// A document's BSON bytes (checked for depth and validity as written).
    /// Only the operation's own fields: the executor's (concerns, `lsid`,
    /// `$db`, ...) are added beside it, never written into it.
    Raw(RawDocumentBuf),
}

impl CommandBody {
    /// The body as a `Document` (bytes converted).
    pub fn to_document(&self) -> crate::error::Result<Document> {
        match self {
            CommandBody::Document(document) => Ok(document.clone()),
            CommandBody::Raw(raw) => {
                crate::proto::raw_walk::to_document(raw.as_bytes()).map_err(|e| {
                    Error::invalid_argument(format!("a command body is not valid BSON: {e}"))
                })
            }
        }
    }

    /// Whether the body has a field `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        match self {
            CommandBody::Document(document) => document.contains_key(key),
            CommandBody::Raw(raw) => crate::proto::raw_walk::find(raw.as_bytes(), key).is_some(),
        }
    }

    /// The body's first key (the command's name).
    pub fn first_key(&self) -> Option<&str> {
        match self {
            CommandBody::Document(document) => document.keys().next().map(String::as_str),
            CommandBody::Raw(raw) => crate::proto::raw_walk::first_key(raw.as_bytes()),
        }
    }

    /// The bytes of [`Self::first_key`], for comparing with a known name.
    pub(crate) fn first_key_bytes(&self) -> Option<&[u8]> {
        match self {
            CommandBody::Document(document) => document.keys().next().map(String::as_bytes),
            CommandBody::Raw(raw) => crate::proto::raw_walk::first_key_bytes(raw.as_bytes()),
        }
    }
}

impl From<Document> for CommandBody {
    fn from(document: Document) -> Self {
        CommandBody::Document(document)
    }
}

impl From<RawDocumentBuf> for CommandBody {
    fn from(raw: RawDocumentBuf) -> Self {
        CommandBody::Raw(raw)
    }
}

impl PartialEq<Document> for CommandBody {
    fn eq(&self, other: &Document) -> bool {
        match self {
            CommandBody::Document(document) => document == other,
            CommandBody::Raw(_) => self.to_document().is_ok_and(|d| &d == other),
        }
    }
}

/// The body an operation built and the fields added to it since.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CommandDraft {
    body: CommandBody,
    /// Distinct keys, in the order first added.
    added: Vec<(&'static str, Added)>,
}

/// An added field's value: a `Bson`, a document encoded beforehand (a
/// session's `lsid`, encoded once for the session's life rather than
/// cloned as a `Document` for every command), or a shared string (`$db`,
/// the operation's database name, not copied for each command).
#[derive(Clone, Debug, PartialEq)]
enum Added {
    Value(Bson),
    Encoded(Arc<[u8]>),
    Text(Arc<str>),
}

impl Added {
    fn to_bson(&self) -> Bson {
        match self {
            Added::Value(value) => value.clone(),
            Added::Encoded(bytes) => Bson::Document(crate::proto::encode::raw_to_document(bytes)),
            Added::Text(text) => Bson::String(text.to_string()),
        }
    }

    #[cfg(test)]
    fn into_bson(self) -> Bson {
        match self {
            Added::Value(value) => value,
            encoded => encoded.to_bson(),
        }
    }

    fn write(&self, key: &str, out: &mut Vec<u8>) -> Result<(), WriteError> {
        match self {
            Added::Value(value) => bson_write::write_element(key, value, out, 1),
            Added::Encoded(bytes) => bson_write::write_encoded_document(key, bytes, out),
            Added::Text(text) => bson_write::write_string_element(key, text, out),
        }
    }
}

impl CommandDraft {
    /// A draft of `body` with nothing added yet.
    pub(crate) fn new(body: impl Into<CommandBody>) -> Self {
        CommandDraft {
            body: body.into(),
            // The usual decoration (lsid, concerns, $clusterTime, $db) fits.
            added: Vec::with_capacity(4),
        }
    }

    /// The body as the operation built it (added fields not included).
    pub(crate) fn body(&self) -> &CommandBody {
        &self.body
    }

    /// The command's first key: its name.
    pub(crate) fn first_key(&self) -> Option<&str> {
        match self.body.first_key() {
            Some(key) => Some(key),
            None => self.added.first().map(|(key, _)| *key),
        }
    }

    /// The bytes of [`Self::first_key`]: a command's name is compared with
    /// known names on every operation, and bytes compare without the UTF-8
    /// check that text needs.
    pub(crate) fn first_key_bytes(&self) -> Option<&[u8]> {
        match self.body.first_key_bytes() {
            Some(key) => Some(key),
            None => self.added.first().map(|(key, _)| key.as_bytes()),
        }
    }

    /// The value of `key` in the command as it stands (a value of a body
    /// kept as bytes is converted).
    pub(crate) fn get(&self, key: &str) -> Option<Cow<'_, Bson>> {
        match self.added.iter().find(|(added, _)| *added == key) {
            Some((_, Added::Value(value))) => return Some(Cow::Borrowed(value)),
            Some((_, encoded)) => return Some(Cow::Owned(encoded.to_bson())),
            None => {}
        }
        match &self.body {
            CommandBody::Document(document) => document.get(key).map(Cow::Borrowed),
            CommandBody::Raw(raw) => crate::proto::raw_walk::find(raw.as_bytes(), key)
                .and_then(|element| element.to_bson().ok())
                .map(Cow::Owned),
        }
    }

    /// The string at `key` in the command as it stands, without a copy;
    /// `None` when absent or not a string.
    pub(crate) fn get_str(&self, key: &str) -> Option<&str> {
        match self.added.iter().find(|(added, _)| *added == key) {
            Some((_, Added::Text(text))) => return Some(text),
            Some((_, Added::Value(Bson::String(text)))) => return Some(text),
            Some(_) => return None,
            None => {}
        }
        match &self.body {
            CommandBody::Document(document) => document.get_str(key).ok(),
            CommandBody::Raw(raw) => crate::proto::raw_walk::find(raw.as_bytes(), key)?
                .as_str()?
                .ok(),
        }
    }

    /// Whether the command as it stands has `key`.
    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.added.iter().any(|(added, _)| *added == key) || self.body.contains_key(key)
    }

    /// The document at `key`, to change in place; `None` when absent or
    /// not a document. A body kept as bytes that has `key` becomes a
    /// `Document` first (a caller's own `readConcern`, which a session
    /// extends: rare).
    pub(crate) fn get_document_mut(&mut self, key: &str) -> Option<&mut Document> {
        if let Some(i) = self.added.iter().position(|(added, _)| *added == key) {
            let slot = &mut self.added[i].1;
            if let Added::Encoded(_) = slot {
                *slot = Added::Value(slot.to_bson());
            }
            return match slot {
                Added::Value(Bson::Document(document)) => Some(document),
                _ => None,
            };
        }
        if matches!(self.body, CommandBody::Raw(_)) && self.body.contains_key(key) {
            self.body = CommandBody::Document(self.body.to_document().ok()?);
        }
        match &mut self.body {
            CommandBody::Document(document) => document.get_document_mut(key).ok(),
            CommandBody::Raw(_) => None,
        }
    }

    /// Removes `key` from the operation's own body. A body kept as bytes
    /// is decoded first: only an option that `timeoutMS` overrides (an
    /// operation's `maxTimeMS`) takes this path, so the hot path keeps its
    /// bytes.
    pub(crate) fn remove_from_body(&mut self, key: &str) -> crate::error::Result<()> {
        if !self.body.contains_key(key) {
            return Ok(());
        }
        let mut document = self.body.to_document()?;
        document.remove(key);
        self.body = CommandBody::Document(document);
        Ok(())
    }

    /// Sets `key` to `value`, as `Document::insert` would.
    pub(crate) fn insert(&mut self, key: &'static str, value: impl Into<Bson>) {
        self.set(key, Added::Value(value.into()));
    }

    /// Sets `key` to the document encoded as `bytes` (which the driver
    /// wrote itself, or checked as it read them from a reply), as
    /// `Document::insert` would.
    pub(crate) fn insert_encoded(&mut self, key: &'static str, bytes: Arc<[u8]>) {
        self.set(key, Added::Encoded(bytes));
    }

    /// Sets `key` to the string `text`, as `Document::insert` would.
    pub(crate) fn insert_text(&mut self, key: &'static str, text: Arc<str>) {
        self.set(key, Added::Text(text));
    }

    fn set(&mut self, key: &'static str, value: Added) {
        match self.added.iter_mut().find(|(added, _)| *added == key) {
            Some(slot) => slot.1 = value,
            None => self.added.push((key, value)),
        }
    }

    /// Appends the whole command to `out` as one BSON document; the body's
    /// documents are checked for depth and validity as they are written
    /// (a body kept as bytes was checked when it was written).
    pub(crate) fn write(&self, out: &mut Vec<u8>) -> Result<(), WriteError> {
        let start = bson_write::begin(out);
        // Which added fields took the place of a body field (bit i: the
        // i-th added); past 64 the body is asked instead.
        let mut replaced = 0u64;
        let mut replacement = |key: &[u8]| {
            let i = self
                .added
                .iter()
                .position(|(added, _)| added.as_bytes() == key)?;
            replaced |= 1u64.checked_shl(i as u32).unwrap_or(0);
            Some(&self.added[i].1)
        };
        match &self.body {
            CommandBody::Document(document) => {
                for (key, value) in document {
                    match replacement(key.as_bytes()) {
                        Some(added) => added.write(key, out)?,
                        None => bson_write::write_element(key, value, out, 1)?,
                    }
                }
            }
            CommandBody::Raw(raw) => {
                let elements = crate::proto::raw_walk::elements(raw.as_bytes())
                    .map_err(WriteError::Invalid)?;
                for element in elements {
                    let element = element.map_err(WriteError::Invalid)?;
                    match replacement(element.key_bytes) {
                        Some(added) => {
                            added.write(element.key().map_err(WriteError::Invalid)?, out)?
                        }
                        None => out.extend_from_slice(element.bytes),
                    }
                }
            }
        }
        for (i, (key, value)) in self.added.iter().enumerate() {
            let in_body = match 1u64.checked_shl(i as u32) {
                Some(bit) => replaced & bit != 0,
                None => self.body.contains_key(key),
            };
            if !in_body {
                value.write(key, out)?;
            }
        }
        bson_write::end(out, start)
    }

    /// The whole command as a `Document` (a body kept as bytes that does
    /// not convert, which the driver's own writer never makes, shows as
    /// its added fields alone).
    pub(crate) fn to_document(&self) -> Document {
        let mut document = self.body.to_document().unwrap_or_default();
        for (key, value) in &self.added {
            document.insert(*key, value.to_bson());
        }
        document
    }

    /// The whole command as a `Document`, consuming the draft.
    #[cfg(test)]
    pub(crate) fn into_document(self) -> Document {
        let mut document = match self.body {
            CommandBody::Document(document) => document,
            raw => raw.to_document().unwrap_or_default(),
        };
        for (key, value) in self.added {
            document.insert(key, value.into_bson());
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
    fn a_shared_string_is_written_and_read_as_a_string() {
        let raw =
            bson::RawDocumentBuf::from_document(&doc! { "find": "c", "comment": "x" }).unwrap();
        let mut draft = CommandDraft::new(CommandBody::Raw(raw));
        draft.insert_text("$db", Arc::from("db"));
        assert_eq!(draft.get_str("$db"), Some("db"));
        assert_eq!(draft.get("$db").as_deref(), Some(&Bson::from("db")));
        assert_eq!(draft.get_str("comment"), Some("x"));
        assert_eq!(draft.get_str("find"), Some("c"));
        assert_eq!(draft.get_str("absent"), None);
        let expected = doc! { "find": "c", "comment": "x", "$db": "db" };
        assert_eq!(written(&draft), bytes(&expected));
        draft.insert("lsid", doc! { "id": 1 });
        assert_eq!(draft.get_str("lsid"), None);
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
        assert_eq!(draft.get("$db").as_deref(), Some(&Bson::from("db")));
        assert_eq!(draft.first_key(), Some("find"));
        assert_eq!(draft.first_key_bytes(), Some(&b"find"[..]));
    }

    #[test]
    fn the_name_of_an_empty_body_is_the_first_added_field() {
        let mut draft = CommandDraft::new(Document::new());
        assert_eq!((draft.first_key(), draft.first_key_bytes()), (None, None));
        draft.insert("ping", 1);
        assert_eq!(draft.first_key(), Some("ping"));
        assert_eq!(draft.first_key_bytes(), Some(&b"ping"[..]));
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
    fn an_encoded_document_is_written_and_shown_as_the_document() {
        let lsid = doc! { "id": 7 };
        let mut draft = CommandDraft::new(doc! { "find": "c", "lsid": "user's" });
        draft.insert_encoded("lsid", Arc::from(bytes(&lsid)));
        draft.insert("$db", "db");
        let expected = doc! { "find": "c", "lsid": { "id": 7 }, "$db": "db" };
        assert_eq!(written(&draft), bytes(&expected));
        assert_eq!(draft.get("lsid").as_deref(), Some(&Bson::Document(lsid)));
        assert_eq!(draft.to_document(), expected);
        draft
            .get_document_mut("lsid")
            .expect("a document")
            .insert("n", 1);
        let changed = doc! { "find": "c", "lsid": { "id": 7, "n": 1 }, "$db": "db" };
        assert_eq!(written(&draft), bytes(&changed));
        assert_eq!(draft.into_document(), changed);
    }

    #[test]
    fn a_body_of_bytes_follows_the_same_rules() {
        let body = doc! { "find": "c", "$db": "user", "readConcern": { "level": "x" } };
        let raw = bson::RawDocumentBuf::from_document(&body).expect("encodes");
        let mut draft = CommandDraft::new(raw);
        assert_eq!(draft.first_key(), Some("find"));
        assert_eq!(draft.first_key_bytes(), Some(&b"find"[..]));
        assert!(draft.contains_key("$db") && !draft.contains_key("lsid"));
        draft.insert("lsid", doc! { "id": 1 });
        draft.insert("$db", "db");
        assert_eq!(draft.get("$db").as_deref(), Some(&Bson::from("db")));
        assert_eq!(
            draft.get("readConcern").as_deref(),
            Some(&Bson::Document(doc! { "level": "x" }))
        );
        let expected = doc! {
            "find": "c", "$db": "db", "readConcern": { "level": "x" }, "lsid": { "id": 1 },
        };
        assert_eq!(written(&draft), bytes(&expected));
        assert_eq!(draft.to_document(), expected);
        // Changing a document of the bytes in place turns them into a Document.
        draft
            .get_document_mut("readConcern")
            .expect("the body's")
            .insert("afterClusterTime", 1);
        let expected = doc! {
            "find": "c", "$db": "db", "readConcern": { "level": "x", "afterClusterTime": 1 },
            "lsid": { "id": 1 },
        };
        assert_eq!(written(&draft), bytes(&expected));
        assert_eq!(draft.into_document(), expected);
    }

    #[test]
    fn the_bodys_documents_are_still_checked() {
        let mut deep = doc! { "leaf": 1 };
        for _ in 0..crate::proto::nesting::MAX_BSON_DEPTH {
            deep = doc! { "d": deep };
        }
        let draft = CommandDraft::new(doc! { "find": "c", "filter": deep });
        assert_eq!(
            draft.write(&mut Vec::new()),
            Err(WriteError::TooDeep),
            "a filter past the depth limit"
        );
        crate::proto::nesting::drop_without_recursion(draft.into_document());
        let nul = CommandDraft::new(doc! { "find": "c", "filter": { "a\0": 1 } });
        assert!(matches!(
            nul.write(&mut Vec::new()),
            Err(WriteError::Invalid(_))
        ));
    }
}
