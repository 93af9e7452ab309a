//! Read and write concerns: their types, their command fields, and which
//! commands take a `readConcern` and which take a `writeConcern`: one
//! rule, used when a command is decorated with and without a session, so a
//! concern inherited from the client, database or collection (e.g.
//! `w=majority` in a hosted cluster's connection string) never lands on a
//! command the server rejects it on.
//!
//! Pure: the command's name and body in, a decision out (read-write-concern
//! spec, "Read Concern" and "Write Concern" sections). Inside a transaction
//! the session decides instead: only the first command carries a
//! `readConcern` and only `commitTransaction`/`abortTransaction` carry a
//! `writeConcern`.

use std::time::Duration;

use bson::{Bson, Document};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::proto::command_draft::{CommandBody, CommandDraft};

/// Write concern: `w`, `wtimeoutMS`, `journal`
/// (`WriteConcern::builder().w(Acknowledgment::Majority).build()`).
#[derive(Clone, Debug, Default, PartialEq, typed_builder::TypedBuilder, Serialize, Deserialize)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct WriteConcern {
    /// `w`: a number of members or a tag/"majority".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub w: Option<Acknowledgment>,
    /// `wtimeoutMS` (serialized as the command's `wtimeout`, in milliseconds).
    #[serde(
        rename = "wtimeout",
        alias = "wtimeoutMS",
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::proto::serde_util::millis"
    )]
    pub w_timeout: Option<Duration>,
    /// `journal` (`j`).
    #[serde(
        rename = "j",
        alias = "journal",
        skip_serializing_if = "Option::is_none"
    )]
    pub journal: Option<bool>,
}

impl From<Acknowledgment> for WriteConcern {
    fn from(w: Acknowledgment) -> Self {
        WriteConcern {
            w: Some(w),
            ..Default::default()
        }
    }
}

impl WriteConcern {
    /// A write concern with a custom acknowledgment (`w: <tag set name>`,
    /// or `"majority"`, or a number of nodes written as text).
    pub fn custom(w: impl AsRef<str>) -> Self {
        Acknowledgment::from(w.as_ref()).into()
    }

    /// `w: "majority"`.
    pub fn majority() -> Self {
        WriteConcern {
            w: Some(Acknowledgment::Majority),
            ..Default::default()
        }
    }

    /// `w: n` (`0` for unacknowledged writes).
    pub fn nodes(n: u32) -> Self {
        WriteConcern {
            w: Some(Acknowledgment::Nodes(n)),
            ..Default::default()
        }
    }

    /// This write concern with `wtimeoutMS`.
    pub fn with_w_timeout(mut self, timeout: Duration) -> Self {
        self.w_timeout = Some(timeout);
        self
    }

    /// This write concern with `j`.
    pub fn with_journal(mut self, journal: bool) -> Self {
        self.journal = Some(journal);
        self
    }
}

/// The `w` of a write concern.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Acknowledgment {
    /// A number of members.
    Nodes(u32),
    /// `"majority"`.
    Majority,
    /// A custom tag name.
    Custom(String),
}

impl From<u32> for Acknowledgment {
    fn from(nodes: u32) -> Self {
        Acknowledgment::Nodes(nodes)
    }
}

impl From<&str> for Acknowledgment {
    /// `"majority"`, else a custom tag.
    fn from(name: &str) -> Self {
        if name == "majority" {
            Acknowledgment::Majority
        } else {
            Acknowledgment::Custom(name.to_string())
        }
    }
}

impl From<String> for Acknowledgment {
    fn from(name: String) -> Self {
        Acknowledgment::from(name.as_str())
    }
}

/// A read concern: its level (serialized as `{ level }`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReadConcern {
    /// The level.
    pub level: ReadConcernLevel,
}

/// A read concern's level.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadConcernLevel {
    /// `local`.
    Local,
    /// `majority`.
    Majority,
    /// `linearizable`.
    Linearizable,
    /// `available`.
    Available,
    /// `snapshot`.
    Snapshot,
    /// A level this type does not name, sent as spelled.
    Custom(String),
}

impl ReadConcernLevel {
    /// The level named `level`: one of the known ones, else `Custom`.
    pub(crate) fn named(level: &str) -> Self {
        match level {
            "local" => ReadConcernLevel::Local,
            "majority" => ReadConcernLevel::Majority,
            "linearizable" => ReadConcernLevel::Linearizable,
            "available" => ReadConcernLevel::Available,
            "snapshot" => ReadConcernLevel::Snapshot,
            other => ReadConcernLevel::Custom(other.to_string()),
        }
    }

    /// The level as the server spells it.
    pub fn as_str(&self) -> &str {
        match self {
            ReadConcernLevel::Local => "local",
            ReadConcernLevel::Majority => "majority",
            ReadConcernLevel::Linearizable => "linearizable",
            ReadConcernLevel::Available => "available",
            ReadConcernLevel::Snapshot => "snapshot",
            ReadConcernLevel::Custom(level) => level,
        }
    }
}

/// As its name (`"majority"`); an unknown name reads as `Custom`.
impl Serialize for ReadConcernLevel {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ReadConcernLevel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(|name| ReadConcernLevel::named(&name))
    }
}

/// A number of members as an `i32`, a tag or `"majority"` as its name.
impl Serialize for Acknowledgment {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Acknowledgment::Nodes(n) => i32::try_from(*n)
                .map_err(|_| serde::ser::Error::custom(format!("w: {n} does not fit in an i32")))?
                .serialize(serializer),
            Acknowledgment::Majority => serializer.serialize_str("majority"),
            Acknowledgment::Custom(name) => serializer.serialize_str(name),
        }
    }
}

impl<'de> Deserialize<'de> for Acknowledgment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum NodesOrName {
            Nodes(u32),
            Name(String),
        }
        Ok(match NodesOrName::deserialize(deserializer)? {
            NodesOrName::Nodes(n) => Acknowledgment::Nodes(n),
            NodesOrName::Name(name) => Acknowledgment::from(name),
        })
    }
}

impl From<ReadConcernLevel> for ReadConcern {
    fn from(level: ReadConcernLevel) -> Self {
        ReadConcern { level }
    }
}

impl ReadConcern {
    /// A read concern of this level (`"local"`, `"majority"`, `"snapshot"`, ...).
    pub fn new(level: impl AsRef<str>) -> Self {
        ReadConcern::custom(level)
    }

    /// `{level: "majority"}`.
    pub fn majority() -> Self {
        ReadConcernLevel::Majority.into()
    }

    /// `{level: "local"}`.
    pub fn local() -> Self {
        ReadConcernLevel::Local.into()
    }

    /// `{level: "linearizable"}`.
    pub fn linearizable() -> Self {
        ReadConcernLevel::Linearizable.into()
    }

    /// `{level: "available"}`.
    pub fn available() -> Self {
        ReadConcernLevel::Available.into()
    }

    /// `{level: "snapshot"}`.
    pub fn snapshot() -> Self {
        ReadConcernLevel::Snapshot.into()
    }

    /// A read concern of the level named `level` (a known name gives its
    /// variant).
    pub fn custom(level: impl AsRef<str>) -> Self {
        ReadConcernLevel::named(level.as_ref()).into()
    }
}

/// A write concern as the `writeConcern` field of a command; `None` when
/// every field is unset (the server's default is sent by omission).
pub fn write_concern_document(write_concern: &WriteConcern) -> Option<Document> {
    let mut d = Document::new();
    match &write_concern.w {
        Some(Acknowledgment::Nodes(n)) => {
            d.insert("w", Bson::Int64(i64::from(*n)));
        }
        Some(Acknowledgment::Majority) => {
            d.insert("w", "majority");
        }
        Some(Acknowledgment::Custom(tag)) => {
            d.insert("w", tag.as_str());
        }
        None => {}
    }
    if let Some(j) = write_concern.journal {
        d.insert("j", j);
    }
    if let Some(t) = write_concern.w_timeout {
        d.insert("wtimeout", i64::try_from(t.as_millis()).unwrap_or(i64::MAX));
    }
    (!d.is_empty()).then_some(d)
}

/// The read concern of a command: the level (if any) plus the extra fields
/// (`afterClusterTime`, `atClusterTime`); `None` when there is nothing to send.
pub(crate) fn read_concern_document(
    level: Option<&str>,
    extra: impl IntoIterator<Item = (&'static str, Bson)>,
) -> Option<Document> {
    let mut d = Document::new();
    if let Some(level) = level {
        d.insert("level", level);
    }
    for (k, v) in extra {
        d.insert(k, v);
    }
    (!d.is_empty()).then_some(d)
}

/// Which concerns a command outside a transaction takes, by the one rule
/// ([`takes_read_concern`], [`takes_write_concern`]); a snapshot session
/// adds its read concern to every command but a cursor's follow-ups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Takes {
    pub(crate) read_concern: bool,
    pub(crate) write_concern: bool,
    /// A write in a causally consistent session carries the session's
    /// `afterClusterTime` (a `readConcern` without a level), though it
    /// takes no inherited read concern (causal consistency spec).
    pub(crate) after_cluster_time: bool,
}

impl Takes {
    pub(crate) fn of(name: &str, body: &CommandBody) -> Takes {
        let read_concern = takes_read_concern(name, body);
        let write_concern = takes_write_concern(name, body);
        Takes {
            read_concern,
            write_concern,
            // Every write and DDL command (causal-consistency-write-commands
            // covers create, drop and the index commands too); the
            // transaction finishers carry the transaction's own fields.
            after_cluster_time: read_concern
                || write_concern && !matches!(name, "commitTransaction" | "abortTransaction"),
        }
    }
}

/// Adds the inherited concerns to a command outside a transaction: a
/// `writeConcern` when it takes one, a `readConcern` (the level plus a
/// session's `afterClusterTime`/`atClusterTime`, given in `read_extra`)
/// when it takes one. A concern the command already carries (a user's
/// runCommand) is kept; a session's extra field joins it. The same rule
/// runs with and without a session.
pub(crate) fn attach_concerns(
    body: &mut CommandDraft,
    takes: Takes,
    read_level: Option<&str>,
    write_concern: Option<&WriteConcern>,
    read_extra: Option<(&'static str, Bson)>,
) {
    if takes.write_concern && !body.contains_key("writeConcern") {
        if let Some(document) = write_concern.and_then(write_concern_document) {
            body.insert("writeConcern", document);
        }
    }
    if !takes.read_concern {
        // A write's readConcern is the session's afterClusterTime alone.
        if let Some((key @ "afterClusterTime", value)) =
            read_extra.filter(|_| takes.after_cluster_time)
        {
            if !body.contains_key("readConcern") {
                body.insert("readConcern", bson::doc! { key: value });
            }
        }
        return;
    }
    if read_level.is_none() && read_extra.is_none() {
        // Nothing to send, nothing to merge into a given one.
        return;
    }
    if let Some(given) = body.get_document_mut("readConcern") {
        if let Some((key, value)) = read_extra {
            if !given.contains_key(key) {
                given.insert(key, value);
            }
        }
        return;
    }
    if let Some(document) = read_concern_document(read_level, read_extra) {
        body.insert("readConcern", document);
    }
}

/// Whether a command with this name and body takes a `readConcern`: the
/// read commands, and any command the user already gave one (the generic
/// runCommand passes it through untouched).
pub(crate) fn takes_read_concern(name: &str, body: &CommandBody) -> bool {
    match name {
        "find" | "count" | "distinct" | "listIndexes" | "listCollections" | "aggregate" => true,
        _ => body.contains_key("readConcern"),
    }
}

/// Whether a command with this name and body takes a `writeConcern`: the
/// write and DDL commands, `aggregate` only when its last stage writes
/// (`$out` or `$merge`), and the transaction finishers.
pub(crate) fn takes_write_concern(name: &str, body: &CommandBody) -> bool {
    match name {
        "insert" | "update" | "delete" | "bulkWrite" | "findAndModify" | "create" | "drop"
        | "dropDatabase" | "createIndexes" | "dropIndexes" | "collMod" | "renameCollection"
        | "commitTransaction" | "abortTransaction" => true,
        "aggregate" => pipeline_writes(body),
        _ => false,
    }
}

/// The pipeline's last stage is `$out` or `$merge` (they must be last).
fn pipeline_writes(body: &CommandBody) -> bool {
    let converted;
    let body = match body {
        CommandBody::Document(document) => document,
        raw => {
            converted = raw.to_document().unwrap_or_default();
            &converted
        }
    };
    let Ok(pipeline) = body.get_array("pipeline") else {
        return false;
    };
    match pipeline.last() {
        Some(Bson::Document(stage)) => stage
            .keys()
            .next()
            .is_some_and(|key| key == "$out" || key == "$merge"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Document};

    #[test]
    fn reads_take_a_read_concern_but_no_write_concern() {
        for name in [
            "find",
            "count",
            "distinct",
            "listIndexes",
            "listCollections",
        ] {
            let body = CommandBody::from(doc! { name: "c" });
            assert!(takes_read_concern(name, &body), "{name}");
            assert!(!takes_write_concern(name, &body), "{name}");
        }
    }

    #[test]
    fn writes_take_a_write_concern() {
        for name in [
            "insert",
            "update",
            "delete",
            "findAndModify",
            "create",
            "drop",
        ] {
            let body = CommandBody::from(doc! { name: "c" });
            assert!(takes_write_concern(name, &body), "{name}");
            assert!(!takes_read_concern(name, &body), "{name}");
        }
        assert!(takes_write_concern(
            "commitTransaction",
            &CommandBody::from(doc! {})
        ));
        assert!(takes_write_concern(
            "abortTransaction",
            &CommandBody::from(doc! {})
        ));
    }

    #[test]
    fn writes_and_ddl_carry_after_cluster_time_but_transaction_finishers_do_not() {
        for name in [
            "insert",
            "update",
            "create",
            "drop",
            "createIndexes",
            "dropIndexes",
        ] {
            let body = CommandBody::from(doc! { name: "c" });
            assert!(Takes::of(name, &body).after_cluster_time, "{name}");
        }
        for name in ["commitTransaction", "abortTransaction", "ping"] {
            let body = CommandBody::from(doc! { name: 1 });
            assert!(!Takes::of(name, &body).after_cluster_time, "{name}");
        }
    }

    #[test]
    fn aggregate_takes_a_write_concern_only_when_its_last_stage_writes() {
        let read = doc! { "aggregate": "c", "pipeline": [{"$match": {}}] };
        assert!(takes_read_concern(
            "aggregate",
            &CommandBody::from(read.clone())
        ));
        assert!(!takes_write_concern(
            "aggregate",
            &CommandBody::from(read.clone())
        ));
        let out = doc! { "aggregate": "c", "pipeline": [{"$match": {}}, {"$out": "o"}] };
        assert!(takes_write_concern(
            "aggregate",
            &CommandBody::from(out.clone())
        ));
        assert!(takes_read_concern(
            "aggregate",
            &CommandBody::from(out.clone())
        ));
        let merge = doc! { "aggregate": "c", "pipeline": [{"$merge": {"into": "o"}}] };
        assert!(takes_write_concern(
            "aggregate",
            &CommandBody::from(merge.clone())
        ));
        let empty = doc! { "aggregate": "c", "pipeline": [] };
        assert!(!takes_write_concern(
            "aggregate",
            &CommandBody::from(empty.clone())
        ));
        assert!(!takes_write_concern(
            "aggregate",
            &doc! { "aggregate": "c" }.into()
        ));
    }

    #[test]
    fn attach_keeps_a_given_concern_and_adds_nothing_a_command_does_not_take() {
        let wc = WriteConcern::majority();
        let attach = |body: Document, name: &str, extra| {
            let takes = Takes::of(name, &CommandBody::from(body.clone()));
            let mut draft = CommandDraft::new(body);
            attach_concerns(&mut draft, takes, Some("majority"), Some(&wc), extra);
            draft.into_document()
        };
        assert_eq!(
            attach(doc! { "find": "c" }, "find", None),
            doc! { "find": "c", "readConcern": {"level": "majority"} }
        );
        assert_eq!(
            attach(doc! { "insert": "c" }, "insert", None),
            doc! { "insert": "c", "writeConcern": {"w": "majority"} }
        );
        let t = bson::Timestamp {
            time: 1,
            increment: 2,
        };
        let after = Some(("afterClusterTime", Bson::Timestamp(t)));
        assert_eq!(
            attach(
                doc! { "dbStats": 1, "readConcern": {"level": "local"} },
                "runCommand",
                after
            ),
            doc! { "dbStats": 1, "readConcern": {"level": "local", "afterClusterTime": t} }
        );
        assert_eq!(
            attach(doc! { "ping": 1 }, "runCommand", None),
            doc! { "ping": 1 }
        );
        assert_eq!(
            attach(
                doc! { "insert": "c", "writeConcern": {"w": 1} },
                "insert",
                None
            ),
            doc! { "insert": "c", "writeConcern": {"w": 1} }
        );
    }

    #[test]
    fn other_commands_take_neither_unless_the_user_gave_one() {
        for name in ["getMore", "killCursors", "ping", "listDatabases", "hello"] {
            let body = CommandBody::from(doc! { name: 1 });
            assert!(!takes_read_concern(name, &body), "{name}");
            assert!(!takes_write_concern(name, &body), "{name}");
        }
        let given = doc! { "dbStats": 1, "readConcern": {"level": "local"} };
        assert!(takes_read_concern(
            "dbStats",
            &CommandBody::from(given.clone())
        ));
    }
}
