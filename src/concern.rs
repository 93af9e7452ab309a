//! Which commands take a `readConcern` and which take a `writeConcern`: one
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

use bson::{Bson, Document};

/// Whether a command with this name and body takes a `readConcern`: the
/// read commands, and any command the user already gave one (the generic
/// runCommand passes it through untouched).
pub(crate) fn takes_read_concern(name: &str, body: &Document) -> bool {
    match name {
        "find" | "count" | "distinct" | "listIndexes" | "listCollections" | "aggregate" => true,
        _ => body.contains_key("readConcern"),
    }
}

/// Whether a command with this name and body takes a `writeConcern`: the
/// write and DDL commands, `aggregate` only when its last stage writes
/// (`$out` or `$merge`), and the transaction finishers.
pub(crate) fn takes_write_concern(name: &str, body: &Document) -> bool {
    match name {
        "insert" | "update" | "delete" | "findAndModify" | "create" | "drop" | "dropDatabase"
        | "createIndexes" | "dropIndexes" | "collMod" | "renameCollection"
        | "commitTransaction" | "abortTransaction" => true,
        "aggregate" => pipeline_writes(body),
        _ => false,
    }
}

/// The pipeline's last stage is `$out` or `$merge` (they must be last).
fn pipeline_writes(body: &Document) -> bool {
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
    use bson::doc;

    #[test]
    fn reads_take_a_read_concern_but_no_write_concern() {
        for name in [
            "find",
            "count",
            "distinct",
            "listIndexes",
            "listCollections",
        ] {
            let body = doc! { name: "c" };
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
            let body = doc! { name: "c" };
            assert!(takes_write_concern(name, &body), "{name}");
            assert!(!takes_read_concern(name, &body), "{name}");
        }
        assert!(takes_write_concern("commitTransaction", &doc! {}));
        assert!(takes_write_concern("abortTransaction", &doc! {}));
    }

    #[test]
    fn aggregate_takes_a_write_concern_only_when_its_last_stage_writes() {
        let read = doc! { "aggregate": "c", "pipeline": [{"$match": {}}] };
        assert!(takes_read_concern("aggregate", &read));
        assert!(!takes_write_concern("aggregate", &read));
        let out = doc! { "aggregate": "c", "pipeline": [{"$match": {}}, {"$out": "o"}] };
        assert!(takes_write_concern("aggregate", &out));
        assert!(takes_read_concern("aggregate", &out));
        let merge = doc! { "aggregate": "c", "pipeline": [{"$merge": {"into": "o"}}] };
        assert!(takes_write_concern("aggregate", &merge));
        let empty = doc! { "aggregate": "c", "pipeline": [] };
        assert!(!takes_write_concern("aggregate", &empty));
        assert!(!takes_write_concern(
            "aggregate",
            &doc! { "aggregate": "c" }
        ));
    }

    #[test]
    fn other_commands_take_neither_unless_the_user_gave_one() {
        for name in ["getMore", "killCursors", "ping", "listDatabases", "hello"] {
            let body = doc! { name: 1 };
            assert!(!takes_read_concern(name, &body), "{name}");
            assert!(!takes_write_concern(name, &body), "{name}");
        }
        let given = doc! { "dbStats": 1, "readConcern": {"level": "local"} };
        assert!(takes_read_concern("dbStats", &given));
    }
}
