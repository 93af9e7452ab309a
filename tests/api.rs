//! The public API's shape (issue 14), against SecantusDB: the session form
//! of every operation, session cursors, `Error::code` for write errors,
//! index and listing operations, typed collections whose type is only
//! serializable or only deserializable, and the replica-set-name error.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Bson, Document};
use mongo_inline::error::ErrorKind;
use mongo_inline::options::{CollectionWriteModel, IndexModel, IndexOptions, ReturnDocument};
use mongo_inline::results::CollectionType;
use mongo_inline::SessionCursor;
use mongo_inline::{Client, ClientSession, Collection};
use serde::{Deserialize, Serialize};
use support::events::{command_name, recorded_client, Recorder};
use support::server::TestServer;

/// The `lsid` of every command recorded since the last clear, by name,
/// leaving out the handshake and monitoring.
fn lsids_by_command(recorder: &Recorder) -> Vec<(String, Option<Document>)> {
    recorder
        .started()
        .iter()
        .map(|c| {
            (
                command_name(c).to_string(),
                c.get_document("lsid").ok().cloned(),
            )
        })
        .collect()
}

/// Asserts that every command recorded since the last clear carried the
/// session's id, and that there was at least one.
fn assert_all_in(recorder: &Recorder, session: &ClientSession, what: &str) {
    let sent = lsids_by_command(recorder);
    assert!(!sent.is_empty(), "{what}: nothing was sent");
    for (name, lsid) in &sent {
        assert_eq!(
            lsid.as_ref(),
            Some(session.id()),
            "{what}: {name} used another session"
        );
    }
    recorder.clear_commands();
}

fn fresh(client: &Client, name: &str) -> Collection<Document> {
    let coll = client.database("api").collection::<Document>(name);
    coll.drop().run().unwrap();
    coll
}

#[test]
fn every_collection_operation_runs_in_the_session_it_is_given() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "session_forms");
    let mut s = client.start_session().run().unwrap();
    recorder.clear_commands();

    coll.insert_one(doc! { "_id": 1, "k": "a" })
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "insert_one");
    coll.insert_many([doc! { "_id": 2, "k": "b" }, doc! { "_id": 3, "k": "b" }])
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "insert_many");
    coll.bulk_write([CollectionWriteModel::InsertOne {
        document: doc! { "_id": 4, "k": "c" },
    }])
    .session(&mut s)
    .run()
    .unwrap();
    assert_all_in(&recorder, &s, "bulk_write");
    assert!(coll
        .find_one(doc! { "_id": 1 })
        .session(&mut s)
        .run()
        .unwrap()
        .is_some());
    assert_all_in(&recorder, &s, "find_one");
    let values = coll.distinct("k", doc! {}).session(&mut s).run().unwrap();
    assert_eq!(values.len(), 3);
    assert_all_in(&recorder, &s, "distinct");
    assert_eq!(
        coll.count_documents(doc! { "k": "b" })
            .session(&mut s)
            .run()
            .unwrap(),
        2
    );
    assert_all_in(&recorder, &s, "count_documents");
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "u": 1 } })
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "update_one");
    coll.update_many(doc! { "k": "b" }, doc! { "$set": { "u": 2 } })
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "update_many");
    coll.replace_one(doc! { "_id": 4 }, doc! { "k": "d" })
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "replace_one");
    let after = coll
        .find_one_and_update(doc! { "_id": 1 }, doc! { "$inc": { "n": 1 } })
        .return_document(ReturnDocument::After)
        .session(&mut s)
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(after.get_i32("n"), Ok(1));
    assert_all_in(&recorder, &s, "find_one_and_update");
    coll.find_one_and_replace(doc! { "_id": 4 }, doc! { "k": "e" })
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "find_one_and_replace");
    let deleted = coll
        .find_one_and_delete(doc! { "_id": 4 })
        .session(&mut s)
        .run()
        .unwrap();
    assert_eq!(deleted.unwrap().get_str("k"), Ok("e"));
    assert_all_in(&recorder, &s, "find_one_and_delete");
    coll.delete_one(doc! { "_id": 3 })
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "delete_one");
    coll.estimated_document_count()
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "estimated_document_count");
    let mut cursor = coll
        .aggregate([doc! { "$match": { "k": "b" } }])
        .session(&mut s)
        .run()
        .unwrap();
    assert_eq!(cursor.iter(&mut s).count(), 1);
    assert_all_in(&recorder, &s, "aggregate");
    coll.create_index(IndexModel::new(doc! { "k": 1 }))
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "create_index");
    let names = coll.list_index_names().session(&mut s).run().unwrap();
    assert!(names.contains(&"k_1".to_string()), "{names:?}");
    assert_all_in(&recorder, &s, "list_index_names");
    coll.drop_index("k_1").session(&mut s).run().unwrap();
    assert_all_in(&recorder, &s, "drop_index");
    coll.delete_many(doc! {}).session(&mut s).run().unwrap();
    assert_all_in(&recorder, &s, "delete_many");
    coll.drop().session(&mut s).run().unwrap();
    assert_all_in(&recorder, &s, "drop");
}

#[test]
fn database_and_client_operations_run_in_the_session_they_are_given() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let db = client.database("api_db_sessions");
    db.drop().run().unwrap();
    let mut s = client.start_session().run().unwrap();
    recorder.clear_commands();

    db.create_collection("made").session(&mut s).run().unwrap();
    assert_all_in(&recorder, &s, "create_collection");
    let names = db.list_collection_names().session(&mut s).run().unwrap();
    assert_eq!(names, ["made"]);
    assert_all_in(&recorder, &s, "list_collection_names");
    let mut specs = db.list_collections().session(&mut s).run().unwrap();
    let spec = specs.next(&mut s).unwrap().unwrap();
    assert_eq!(spec.name, "made");
    assert_all_in(&recorder, &s, "list_collections");
    db.run_command(doc! { "ping": 1 })
        .session(&mut s)
        .run()
        .unwrap();
    assert_all_in(&recorder, &s, "run_command");
    client.list_database_names().session(&mut s).run().unwrap();
    assert_all_in(&recorder, &s, "list_database_names");
    db.drop().session(&mut s).run().unwrap();
    assert_all_in(&recorder, &s, "drop");
}

#[test]
fn a_session_cursor_fetches_its_later_batches_in_its_session() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "session_cursor");
    coll.insert_many((0..7).map(|i| doc! { "i": i }))
        .run()
        .unwrap();
    let mut s = client.start_session().run().unwrap();
    recorder.clear_commands();

    let mut cursor: SessionCursor<Document> = coll
        .find(doc! {})
        .sort(doc! { "i": 1 })
        .batch_size(2)
        .session(&mut s)
        .run()
        .unwrap();
    let mut seen = Vec::new();
    while let Some(document) = cursor.next(&mut s) {
        seen.push(document.unwrap().get_i32("i").unwrap());
    }
    assert_eq!(seen, [0, 1, 2, 3, 4, 5, 6]);
    let sent = lsids_by_command(&recorder);
    let get_mores = sent.iter().filter(|(name, _)| name == "getMore").count();
    assert_eq!(get_mores, 3, "{sent:?}");
    assert_all_in(&recorder, &s, "find with getMores");
}

#[test]
fn a_duplicate_key_has_code_11000_for_single_and_batched_writes() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "duplicate_key");
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();

    let single = coll.insert_one(doc! { "_id": 1 }).run().unwrap_err();
    assert!(matches!(single.kind(), ErrorKind::Write(_)), "{single:?}");
    assert_eq!(single.code(), Some(11000), "{single}");

    let batched = coll
        .insert_many([doc! { "_id": 2 }, doc! { "_id": 1 }])
        .run()
        .unwrap_err();
    assert!(
        matches!(batched.kind(), ErrorKind::InsertMany(_)),
        "{batched:?}"
    );
    assert_eq!(batched.code(), Some(11000), "{batched}");

    // A command error keeps its own code.
    let command = client
        .database("api")
        .run_command(doc! { "noSuchCommand": 1 })
        .run()
        .unwrap_err();
    assert_eq!(command.code(), Some(59), "{command}");
}

#[test]
fn index_operations_create_list_and_drop() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "indexes");
    let one = coll
        .create_index(IndexModel::new(doc! { "email": 1 }))
        .run()
        .unwrap();
    assert_eq!(one.index_name, "email_1");
    let many = coll
        .create_indexes([
            IndexModel::new(doc! { "a": 1, "b": -1 }),
            IndexModel::new(doc! { "c": 1 }).options(doc! { "name": "by_c" }),
        ])
        .run()
        .unwrap();
    assert_eq!(many.index_names, ["a_1_b_-1", "by_c"]);
    let mut names = coll.list_index_names().run().unwrap();
    names.sort();
    assert_eq!(names, ["_id_", "a_1_b_-1", "by_c", "email_1"]);
    coll.drop_index("by_c").run().unwrap();
    assert!(!coll
        .list_index_names()
        .run()
        .unwrap()
        .contains(&"by_c".to_string()));
    coll.drop_indexes().run().unwrap();
    assert_eq!(coll.list_index_names().run().unwrap(), ["_id_"]);
}

#[test]
fn typed_index_options_reach_the_server() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "typed_index_options");
    let created = coll
        .create_index(
            IndexModel::new(doc! { "email": 1 }).options(
                IndexOptions::default()
                    .unique(true)
                    .name("by_email".to_string()),
            ),
        )
        .run()
        .unwrap();
    assert_eq!(created.index_name, "by_email");
    coll.create_index(
        IndexModel::new(doc! { "at": 1 })
            .options(IndexOptions::default().expire_after(std::time::Duration::from_secs(90))),
    )
    .run()
    .unwrap();
    // The listed models' options, as specification documents.
    let indexes: Vec<Document> = coll
        .list_indexes()
        .run()
        .unwrap()
        .map(|model| model.map(|m| m.options.unwrap_or_default().to_document()))
        .collect::<mongo_inline::Result<_>>()
        .unwrap();
    let by_name = |name: &str| {
        indexes
            .iter()
            .find(|i| i.get_str("name") == Ok(name))
            .unwrap_or_else(|| panic!("no index {name}: {indexes:?}"))
    };
    assert_eq!(by_name("by_email").get_bool("unique"), Ok(true));
    let ttl = by_name("at_1").get("expireAfterSeconds").cloned();
    assert!(
        matches!(ttl, Some(Bson::Int32(90) | Bson::Int64(90))) || ttl == Some(Bson::Double(90.0)),
        "{ttl:?}"
    );
    coll.insert_one(doc! { "email": "a@example.com" })
        .run()
        .unwrap();
    let duplicate = coll
        .insert_one(doc! { "email": "a@example.com" })
        .run()
        .unwrap_err();
    assert_eq!(duplicate.code(), Some(11000), "{duplicate}");
}

#[test]
fn list_collections_returns_specifications_filtered_by_the_server() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let db = client.database("api_list_collections");
    db.drop().run().unwrap();
    db.create_collection("plain").run().unwrap();
    db.create_collection("other").run().unwrap();
    let specs: Vec<_> = db
        .list_collections()
        .filter(doc! { "name": "plain" })
        .run()
        .unwrap()
        .collect::<mongo_inline::Result<_>>()
        .unwrap();
    assert_eq!(specs.len(), 1, "{specs:?}");
    assert_eq!(specs[0].name, "plain");
    assert_eq!(specs[0].collection_type, CollectionType::Collection);
    assert!(!specs[0].info.read_only);
}

#[test]
fn list_databases_names_each_database_with_its_size() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    client
        .database("api_listed")
        .collection::<Document>("c")
        .insert_one(doc! { "x": 1 })
        .run()
        .unwrap();
    let databases = client.list_databases().run().unwrap();
    let listed = databases
        .iter()
        .find(|d| d.name == "api_listed")
        .expect("the database is listed");
    assert!(!listed.empty, "{listed:?}");
    let names = client
        .list_database_names()
        .filter(doc! { "name": "api_listed" })
        .run()
        .unwrap();
    assert_eq!(names, ["api_listed"]);
}

#[test]
fn database_aggregate_runs_a_collectionless_pipeline() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let results: Vec<Document> = client
        .database("api")
        .aggregate([
            doc! { "$documents": [{ "x": 1 }, { "x": 2 }, { "x": 3 }] },
            doc! { "$match": { "x": { "$gte": 2 } } },
        ])
        .run()
        .unwrap()
        .collect::<mongo_inline::Result<_>>()
        .unwrap();
    let xs: Vec<i32> = results.iter().map(|d| d.get_i32("x").unwrap()).collect();
    assert_eq!(xs, [2, 3]);
}

/// A built `$search` stage goes to the server as the pipeline's first stage,
/// unchanged, and the server's refusal comes back as its own command error.
/// SecantusDB has no Atlas Search (it needs a search node, `mongot`): it
/// answers every `$search` with code 115, `CommandNotSupported`.
#[test]
fn an_atlas_search_stage_reaches_the_server_and_its_refusal_is_the_servers_error() {
    use mongo_inline::atlas_search::{self, search};
    use mongo_inline::event::command::CommandEvent;

    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "atlas_search");
    coll.insert_one(doc! { "title": "Dune" }).run().unwrap();
    let stage = search(atlas_search::text("title", "dune").fuzzy(doc! { "maxEdits": 1 }))
        .index("movies")
        .into_stage();
    recorder.clear_commands();

    let refused = coll
        .aggregate(vec![stage, doc! { "$limit": 5 }])
        .run()
        .unwrap_err();

    match &*refused.kind {
        ErrorKind::Command(e) => {
            assert_eq!((e.code, e.code_name.as_str()), (115, "CommandNotSupported"))
        }
        other => panic!("expected the server's refusal, got {other:?}"),
    }
    let sent = recorder.named("aggregate");
    assert_eq!(sent.len(), 1, "sent once, not retried");
    assert_eq!(
        sent[0].get_array("pipeline").unwrap(),
        &vec![
            Bson::Document(doc! { "$search": {
                "text": { "path": "title", "query": "dune", "fuzzy": { "maxEdits": 1 } },
                "index": "movies",
            } }),
            Bson::Document(doc! { "$limit": 5 }),
        ]
    );
    let failed: Vec<i32> = recorder
        .commands()
        .iter()
        .filter_map(|e| match e {
            CommandEvent::Failed(f) if f.command_name == "aggregate" => f.failure.code(),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [115]);
}

#[test]
fn aggregate_with_type_reads_results_as_that_type() {
    #[derive(Debug, Deserialize, PartialEq)]
    struct Total {
        #[serde(rename = "_id")]
        key: String,
        total: i32,
    }
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "typed_aggregate");
    coll.insert_many([doc! { "k": "a", "v": 1 }, doc! { "k": "a", "v": 2 }])
        .run()
        .unwrap();
    let totals: Vec<Total> = coll
        .aggregate([doc! { "$group": { "_id": "$k", "total": { "$sum": "$v" } } }])
        .with_type::<Total>()
        .run()
        .unwrap()
        .collect::<mongo_inline::Result<_>>()
        .unwrap();
    assert_eq!(
        totals,
        [Total {
            key: "a".into(),
            total: 3
        }]
    );
}

/// Only written: `Serialize` and no `Deserialize`.
#[derive(Serialize)]
struct Event {
    kind: &'static str,
}

/// Only read: `Deserialize` and no `Serialize`.
#[derive(Deserialize)]
struct EventView {
    kind: String,
}

#[test]
fn a_collection_type_needs_only_the_traits_its_operations_use() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let db = client.database("api");
    fresh(&client, "bounds");
    let writes = db.collection::<Event>("bounds");
    writes.insert_one(Event { kind: "click" }).run().unwrap();
    writes
        .insert_many([Event { kind: "view" }, Event { kind: "view" }])
        .run()
        .unwrap();
    // Operations that neither write nor read a `T` need no trait at all.
    assert_eq!(
        writes
            .count_documents(doc! { "kind": "view" })
            .run()
            .unwrap(),
        2
    );
    let reads = db.collection::<EventView>("bounds");
    let kinds: Vec<String> = reads
        .find(doc! {})
        .sort(doc! { "kind": 1 })
        .run()
        .unwrap()
        .map(|e| e.unwrap().kind)
        .collect();
    assert_eq!(kinds, ["click", "view", "view"]);
}

#[test]
fn options_set_by_name_and_with_options_reach_the_command() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "option_setters");
    coll.insert_many((0..5).map(|i| doc! { "i": i }))
        .run()
        .unwrap();
    recorder.clear_commands();
    let by_name: Vec<Document> = coll
        .find(doc! {})
        .sort(doc! { "i": -1 })
        .skip(1)
        .limit(2)
        .projection(doc! { "_id": 0 })
        .run()
        .unwrap()
        .collect::<mongo_inline::Result<_>>()
        .unwrap();
    assert_eq!(by_name, [doc! { "i": 3 }, doc! { "i": 2 }]);
    let find = recorder.named("find").pop().unwrap();
    assert_eq!(find.get_document("sort"), Ok(&doc! { "i": -1 }));
    assert_eq!(find.get("skip").and_then(Bson::as_i64), Some(1));

    let options = mongo_inline::options::FindOptions::default()
        .sort(doc! { "i": 1 })
        .limit(1);
    let first = coll.find(doc! {}).with_options(options).run().unwrap();
    assert_eq!(first.count(), 1);
}

#[test]
fn a_wrong_replica_set_name_names_both_set_names() {
    let server = TestServer::shared();
    let uri = format!(
        "mongodb://{}/?replicaSet=not-the-set&serverSelectionTimeoutMS=300",
        server.address()
    );
    let client = Client::with_uri_str(&uri).unwrap();
    let error = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error:?}"
    );
    assert!(message.contains("\"not-the-set\""), "{message}");
    assert!(message.contains("\"secantus\""), "{message}");
    assert!(message.contains(&server.address()), "{message}");
}
