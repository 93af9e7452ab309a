//! Which commands carry the read and write concern a client inherits from
//! its connection string: reads never get a `writeConcern` (a real mongod
//! rejects `find`, `count`, `distinct`… with one), writes always do, with no
//! session, an implicit session and an explicit session alike.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Bson, Document};
use mongo_inline::Client;
use support::events::command_name;
use support::server::TestServer;
use support::sim::{Role, Simulator};

/// The inherited concerns, as hosted clusters' strings carry them.
const CONCERNS: &str = "w=majority&readConcernLevel=local";

/// What the simulated primary received, without the monitoring hellos.
fn operations(sim: &Simulator) -> Vec<Document> {
    sim.received(0)
        .into_iter()
        .filter(|c| !matches!(command_name(c), "hello" | "isMaster" | "ismaster"))
        .collect()
}

/// Reads and writes without an explicit session, then checks each command.
fn run_without_explicit_session(client: &Client, collection: &str) {
    let coll = client
        .database("concerns")
        .collection::<Document>(collection);
    coll.insert_one(doc! { "i": 1 }).run().unwrap();
    coll.update_one(doc! { "i": 1 }, doc! { "$set": { "j": 2 } })
        .run()
        .unwrap();
    let found: Vec<Document> = coll
        .find(doc! {})
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 1);
    assert_eq!(coll.estimated_document_count().run().unwrap(), 1);
    assert_eq!(
        coll.distinct("i", doc! {}).run().unwrap(),
        vec![Bson::Int32(1)]
    );
    let _: Vec<Document> = coll
        .aggregate([doc! { "$match": {} }])
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let _: Vec<Document> = coll
        .aggregate([
            doc! { "$match": {} },
            doc! { "$out": format!("{collection}_out") },
        ])
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let _: Vec<mongo_inline::IndexModel> = coll
        .list_indexes()
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    coll.delete_one(doc! { "i": 1 }).run().unwrap();
}

/// Every command sent: reads carry the read concern and no write concern,
/// writes carry `{w: "majority"}`.
fn assert_concerns(sent: &[Document], expect_lsid: bool) {
    let mut seen = Vec::new();
    for command in sent {
        let name = command_name(command);
        let writes = match name {
            "insert" | "update" | "delete" => true,
            "aggregate" => command.get_array("pipeline").is_ok_and(|p| {
                p.iter()
                    .any(|s| matches!(s, Bson::Document(d) if d.contains_key("$out")))
            }),
            "find" | "count" | "distinct" | "listIndexes" | "getMore" | "killCursors" => false,
            _ => continue,
        };
        seen.push(name.to_owned());
        assert_eq!(
            command.get_document("lsid").is_ok(),
            expect_lsid,
            "lsid on {command}"
        );
        if writes {
            assert_eq!(
                command.get_document("writeConcern").ok(),
                Some(&doc! { "w": "majority" }),
                "{command}"
            );
        } else {
            assert!(
                !command.contains_key("writeConcern"),
                "writeConcern on {command}"
            );
        }
        if matches!(name, "find" | "count" | "distinct" | "aggregate") {
            assert_eq!(
                command
                    .get_document("readConcern")
                    .ok()
                    .and_then(|rc| rc.get_str("level").ok()),
                Some("local"),
                "{command}"
            );
        }
    }
    assert!(!seen.is_empty(), "nothing checked in {sent:?}");
}

#[test]
fn without_sessions_reads_carry_no_inherited_write_concern() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set("rs", server, &[Role::Primary]);
    sim.set_hello_extra(0, doc! { "logicalSessionTimeoutMinutes": Bson::Null });
    let client = Client::with_uri_str(format!("{}&{CONCERNS}", sim.seed_uri(&[0]))).unwrap();
    run_without_explicit_session(&client, "no_session");
    let sent = operations(&sim);
    for name in [
        "insert",
        "update",
        "find",
        "count",
        "aggregate",
        "distinct",
        "listIndexes",
        "delete",
    ] {
        assert!(
            sent.iter().any(|c| command_name(c) == name),
            "{name} not sent: {sent:?}"
        );
    }
    assert_concerns(&sent, false);
}

#[test]
fn with_implicit_sessions_reads_carry_no_inherited_write_concern() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set("rs", server, &[Role::Primary]);
    let client = Client::with_uri_str(format!("{}&{CONCERNS}", sim.seed_uri(&[0]))).unwrap();
    run_without_explicit_session(&client, "implicit_session");
    let sent = operations(&sim);
    for name in [
        "insert",
        "update",
        "find",
        "count",
        "aggregate",
        "distinct",
        "listIndexes",
        "delete",
    ] {
        assert!(
            sent.iter().any(|c| command_name(c) == name),
            "{name} not sent: {sent:?}"
        );
    }
    assert_concerns(&sent, true);
}

#[test]
fn with_an_explicit_session_reads_carry_no_inherited_write_concern() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set("rs", server, &[Role::Primary]);
    let client = Client::with_uri_str(format!("{}&{CONCERNS}", sim.seed_uri(&[0]))).unwrap();
    let coll = client
        .database("concerns")
        .collection::<Document>("explicit_session");
    let mut session = client.start_session().run().unwrap();
    coll.insert_one(doc! { "i": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    coll.update_one(doc! { "i": 1 }, doc! { "$set": { "j": 2 } })
        .session(&mut session)
        .run()
        .unwrap();
    assert_eq!(
        coll.find(doc! {})
            .session(&mut session)
            .run()
            .unwrap()
            .iter(&mut session)
            .count(),
        1
    );
    assert_eq!(
        coll.count_documents(doc! {})
            .session(&mut session)
            .run()
            .unwrap(),
        1
    );
    coll.delete_one(doc! { "i": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    let sent = operations(&sim);
    for name in ["insert", "update", "find", "aggregate", "delete"] {
        assert!(
            sent.iter().any(|c| command_name(c) == name),
            "{name} not sent: {sent:?}"
        );
    }
    assert_concerns(&sent, true);
}
