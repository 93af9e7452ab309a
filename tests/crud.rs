//! Every `Collection<T>` operation end to end against SecantusDB, on typed
//! and untyped collections, and what each option put on the wire (checked
//! on the topology simulator's record of the commands it received).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use mongo_inline::error::PartialBulkWriteResult;
use mongo_inline::options::Collation;
use mongo_inline::options::CollectionWriteModel;
use mongo_inline::options::SelectionCriteria;
use mongo_inline::options::{Acknowledgment, ReadConcern, WriteConcern};
use mongo_inline::options::{
    AggregateOptions, BulkWriteOptions, CountOptions, DeleteModelOptions, DeleteOptions,
    FindOneAndDeleteOptions, FindOneAndReplaceOptions, FindOneAndUpdateOptions, FindOneOptions,
    FindOptions, Hint, IndexModel, InsertManyOptions, ReplaceOptions, ReturnDocument,
    UpdateModelOptions, UpdateOptions,
};
use mongo_inline::options::{
    DeleteOneModel, InsertOneModel, UpdateManyModel, UpdateOneModel, WriteModel,
};
use mongo_inline::results::WriteFailure;
use mongo_inline::{Client, Collection, ErrorKind, ReadPreference};
use serde::{Deserialize, Serialize};
use support::server::TestServer;
use support::sim::{Role, Simulator};

const DB: &str = "crud";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Person {
    #[serde(rename = "_id", skip_serializing_if = "Option::is_none")]
    id: Option<ObjectId>,
    name: String,
    born: i32,
}

fn person(name: &str, born: i32) -> Person {
    Person {
        id: None,
        name: name.into(),
        born,
    }
}

fn client() -> Client {
    Client::with_uri_str(TestServer::shared().uri()).unwrap()
}

/// A collection of its own for each test, so tests run in parallel.
fn fresh<T>(client: &Client, prefix: &str) -> Collection<T>
where
    T: Serialize + serde::de::DeserializeOwned,
{
    client
        .database(DB)
        .collection(&format!("{prefix}_{}", ObjectId::new()))
}

fn numbers(client: &Client, prefix: &str, n: i32) -> Collection<Document> {
    let coll = fresh(client, prefix);
    coll.insert_many((0..n).map(|i| doc! { "_id": i, "i": i, "even": i % 2 == 0 }))
        .run()
        .unwrap();
    coll
}

fn collect<T: serde::de::DeserializeOwned + 'static>(cursor: mongo_inline::Cursor<T>) -> Vec<T> {
    cursor.collect::<Result<_, _>>().unwrap()
}

fn ids(documents: &[Document]) -> Vec<i32> {
    documents
        .iter()
        .map(|d| d.get_i32("_id").unwrap())
        .collect()
}

/// A one-primary simulated replica set in front of the shared server, whose
/// record shows the commands as the driver sent them.
fn simulated() -> (Simulator, Client) {
    let sim = Simulator::replica_set("rs", TestServer::shared(), &[Role::Primary]);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    (sim, client)
}

/// The last command named `name` that member `i` received.
fn last_received(sim: &Simulator, i: usize, name: &str) -> Document {
    sim.received(i)
        .into_iter()
        .rev()
        .find(|d| d.keys().next().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("member {i} received no {name}: {:?}", sim.commands(i)))
}

/// A numeric field, whichever integer type the driver chose for it.
fn number(command: &Document, key: &str) -> Option<i64> {
    match command.get(key)? {
        Bson::Int32(v) => Some(i64::from(*v)),
        Bson::Int64(v) => Some(*v),
        Bson::Double(v) if v.fract() == 0.0 => Some(*v as i64),
        _ => None,
    }
}

#[test]
fn insert_one_and_many_return_the_generated_ids() {
    let client = client();
    let people = fresh::<Person>(&client, "ids");
    let one = people.insert_one(person("Ada", 1815)).run().unwrap();
    let Bson::ObjectId(ada_id) = one.inserted_id else {
        panic!("generated _id is not an ObjectId: {:?}", one.inserted_id);
    };
    let many = people
        .insert_many([person("Grace", 1906), person("Alan", 1912)])
        .run()
        .unwrap();
    assert_eq!(many.inserted_ids.len(), 2);
    let ada = people
        .find_one(doc! { "_id": ada_id })
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(ada.name, "Ada");
    for (index, id) in &many.inserted_ids {
        let found = people.find_one(doc! { "_id": id.clone() }).run().unwrap();
        let expected = ["Grace", "Alan"][*index];
        assert_eq!(found.map(|p| p.name).as_deref(), Some(expected));
    }
    // An _id the caller gave is kept, for untyped documents too.
    let raw = people.clone_with_type::<Document>();
    let given = raw
        .insert_one(doc! { "_id": "mine", "name": "Edsger", "born": 1930 })
        .run()
        .unwrap();
    assert_eq!(given.inserted_id, Bson::from("mine"));
    assert_eq!(people.count_documents(doc! {}).run().unwrap(), 4);
}

#[test]
fn find_with_filter_projection_sort_skip_and_limit() {
    let client = client();
    let coll = numbers(&client, "find", 20);
    let found = collect(
        coll.find(doc! { "even": true })
            .with_options(
                FindOptions::default()
                    .sort(doc! { "i": -1 })
                    .skip(2)
                    .limit(3)
                    .projection(doc! { "i": 1 }),
            )
            .run()
            .unwrap(),
    );
    assert_eq!(ids(&found), [14, 12, 10]);
    assert!(
        found.iter().all(|d| !d.contains_key("even")),
        "projection ignored: {found:?}"
    );
    let first = coll
        .find_one(doc! { "i": { "$gte": 5 } })
        .with_options(FindOneOptions::default().sort(doc! { "i": 1 }))
        .run()
        .unwrap();
    assert_eq!(first.and_then(|d| d.get_i32("i").ok()), Some(5));
    assert_eq!(coll.find_one(doc! { "i": 100 }).run().unwrap(), None);
}

#[test]
fn find_options_reach_the_server() {
    let (sim, client) = simulated();
    let coll = numbers(&client, "find_options", 10);
    coll.create_indexes([IndexModel::new(doc! { "i": 1 })])
        .run()
        .unwrap();
    let found = collect(
        coll.find(doc! {})
            .with_options(
                FindOptions::default()
                    .batch_size(4)
                    .hint(Hint::from("i_1"))
                    .collation(Collation::builder().locale("simple").build())
                    .comment(Bson::from("find-options"))
                    .max_time(Duration::from_millis(5000))
                    .sort(doc! { "i": 1 }),
            )
            .run()
            .unwrap(),
    );
    assert_eq!(ids(&found), (0..10).collect::<Vec<_>>());
    let find = last_received(&sim, 0, "find");
    assert_eq!(number(&find, "batchSize"), Some(4), "{find}");
    assert_eq!(find.get_str("hint"), Ok("i_1"), "{find}");
    assert_eq!(
        find.get_document("collation"),
        Ok(&doc! { "locale": "simple" })
    );
    assert_eq!(find.get_str("comment"), Ok("find-options"), "{find}");
    assert_eq!(number(&find, "maxTimeMS"), Some(5000), "{find}");
    // The getMores carry the batch size (and the comment, 4.4+).
    let get_more = last_received(&sim, 0, "getMore");
    assert_eq!(number(&get_more, "batchSize"), Some(4), "{get_more}");
    assert_eq!(get_more.get_str("collection"), Ok(coll.name()));
}

#[test]
fn a_negative_limit_is_one_batch_and_no_get_more() {
    let (sim, client) = simulated();
    let coll = numbers(&client, "negative_limit", 10);
    sim.reset_observations();
    let found = collect(
        coll.find(doc! {})
            .with_options(
                FindOptions::default()
                    .limit(-3)
                    .batch_size(2)
                    .sort(doc! { "i": 1 }),
            )
            .run()
            .unwrap(),
    );
    assert_eq!(ids(&found), [0, 1, 2]);
    let find = last_received(&sim, 0, "find");
    assert_eq!(find.get_bool("singleBatch"), Ok(true), "{find}");
    assert_eq!(number(&find, "limit"), Some(3), "{find}");
    let commands = sim.commands(0);
    assert!(
        !commands
            .iter()
            .any(|c| c == "getMore" || c == "killCursors"),
        "{commands:?}"
    );
}

#[test]
fn updates_with_upsert_and_array_filters() {
    let client = client();
    let coll = fresh::<Document>(&client, "update");
    coll.insert_many([
        doc! { "_id": 1, "tag": "a", "scores": [1, 5, 9] },
        doc! { "_id": 2, "tag": "a", "scores": [7] },
        doc! { "_id": 3, "tag": "b", "scores": [] },
    ])
    .run()
    .unwrap();

    let one = coll
        .update_one(doc! { "tag": "a" }, doc! { "$set": { "seen": true } })
        .run()
        .unwrap();
    assert_eq!((one.matched_count, one.modified_count), (1, 1));
    assert_eq!(one.upserted_id, None);

    let many = coll
        .update_many(doc! { "tag": "a" }, doc! { "$inc": { "n": 1 } })
        .run()
        .unwrap();
    assert_eq!((many.matched_count, many.modified_count), (2, 2));

    let filtered = coll
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "scores.$[big]": 0 } })
        .with_options(UpdateOptions::default().array_filters(vec![doc! { "big": { "$gt": 4 } }]))
        .run()
        .unwrap();
    assert_eq!(filtered.modified_count, 1);
    let doc1 = coll.find_one(doc! { "_id": 1 }).run().unwrap().unwrap();
    assert_eq!(
        doc1.get_array("scores").unwrap(),
        &vec![Bson::Int32(1), Bson::Int32(0), Bson::Int32(0)]
    );

    let upserted = coll
        .update_one(doc! { "_id": 10 }, doc! { "$set": { "tag": "new" } })
        .with_options(UpdateOptions::default().upsert(true))
        .run()
        .unwrap();
    assert_eq!(upserted.matched_count, 0);
    assert_eq!(upserted.upserted_id, Some(Bson::Int32(10)));

    let replaced = coll
        .replace_one(doc! { "_id": 3 }, doc! { "tag": "replaced" })
        .run()
        .unwrap();
    assert_eq!((replaced.matched_count, replaced.modified_count), (1, 1));
    let doc3 = coll.find_one(doc! { "_id": 3 }).run().unwrap().unwrap();
    assert_eq!(doc3, doc! { "_id": 3, "tag": "replaced" });

    let replace_upserted = coll
        .replace_one(doc! { "_id": 11 }, doc! { "tag": "fresh" })
        .with_options(ReplaceOptions::default().upsert(true))
        .run()
        .unwrap();
    assert_eq!(replace_upserted.upserted_id, Some(Bson::Int32(11)));

    // A typed replacement.
    let people = fresh::<Person>(&client, "replace_typed");
    people.insert_one(person("Ada", 1815)).run().unwrap();
    let r = people
        .replace_one(doc! { "name": "Ada" }, person("Ada Lovelace", 1815))
        .run()
        .unwrap();
    assert_eq!(r.modified_count, 1);
    assert_eq!(
        people
            .find_one(doc! {})
            .run()
            .unwrap()
            .map(|p| p.name)
            .as_deref(),
        Some("Ada Lovelace")
    );
}

#[test]
fn an_update_document_without_operators_is_refused() {
    let client = client();
    let coll = fresh::<Document>(&client, "update_refused");
    let e = coll
        .update_one(doc! {}, doc! { "x": 1 })
        .run()
        .expect_err("a replacement passed to update_one");
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }), "{e}");
}

#[test]
fn a_value_that_does_not_serialize_is_a_bson_serialization_error() {
    #[derive(Serialize, Deserialize)]
    struct Counter {
        hits: u64,
    }
    let client = client();
    let coll = fresh::<Counter>(&client, "unserializable");
    let e = coll
        .insert_one(Counter { hits: u64::MAX })
        .run()
        .expect_err("BSON has no unsigned 64-bit integer");
    assert!(
        matches!(
            e.kind(),
            ErrorKind::BsonSerialization(bson::ser::Error::UnsignedIntegerExceededRange(_))
        ),
        "{e:?}"
    );
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 0);
}

#[test]
fn deletes() {
    let client = client();
    let coll = numbers(&client, "delete", 10);
    let one = coll.delete_one(doc! { "even": true }).run().unwrap();
    assert_eq!(one.deleted_count, 1);
    let many = coll
        .delete_many(doc! { "even": true })
        .with_options(DeleteOptions::default())
        .run()
        .unwrap();
    assert_eq!(many.deleted_count, 4);
    assert_eq!(
        coll.delete_many(doc! { "even": true })
            .run()
            .unwrap()
            .deleted_count,
        0
    );
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 5);
}

#[test]
fn find_one_and_modify_returns_before_or_after() {
    let client = client();
    let people = fresh::<Person>(&client, "fam");
    people
        .insert_many([person("Ada", 1815), person("Grace", 1906)])
        .run()
        .unwrap();

    let before = people
        .find_one_and_update(doc! { "name": "Ada" }, doc! { "$inc": { "born": 1 } })
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(before.born, 1815);
    let after = people
        .find_one_and_update(doc! { "name": "Ada" }, doc! { "$inc": { "born": 1 } })
        .with_options(FindOneAndUpdateOptions::default().return_document(ReturnDocument::After))
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(after.born, 1817);

    let upserted = people
        .find_one_and_update(doc! { "name": "Alan" }, doc! { "$set": { "born": 1912 } })
        .with_options(
            FindOneAndUpdateOptions::default()
                .upsert(true)
                .return_document(ReturnDocument::After),
        )
        .run()
        .unwrap();
    assert_eq!(upserted.map(|p| p.born), Some(1912));

    let replaced_before = people
        .find_one_and_replace(doc! { "name": "Grace" }, person("Grace Hopper", 1906))
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(replaced_before.name, "Grace");
    let replaced_after = people
        .find_one_and_replace(doc! { "name": "Grace Hopper" }, person("G. Hopper", 1906))
        .with_options(FindOneAndReplaceOptions::default().return_document(ReturnDocument::After))
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(replaced_after.name, "G. Hopper");

    let deleted = people
        .find_one_and_delete(doc! {})
        .with_options(FindOneAndDeleteOptions::default().sort(doc! { "born": -1 }))
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(deleted.name, "Alan");
    assert_eq!(
        people
            .find_one_and_delete(doc! { "name": "nobody" })
            .run()
            .unwrap(),
        None
    );
    assert_eq!(people.count_documents(doc! {}).run().unwrap(), 2);
}

#[test]
fn counts_distinct_and_aggregate() {
    let client = client();
    let coll = numbers(&client, "counts", 30);
    assert_eq!(
        coll.count_documents(doc! { "even": true }).run().unwrap(),
        15
    );
    assert_eq!(
        coll.count_documents(doc! { "even": true })
            .with_options(CountOptions::default().skip(10).limit(3))
            .run()
            .unwrap(),
        3
    );
    assert_eq!(coll.estimated_document_count().run().unwrap(), 30);
    let mut distinct = coll
        .distinct("even", doc! { "i": { "$lt": 5 } })
        .run()
        .unwrap();
    distinct.sort_by_key(|b| b.as_bool());
    assert_eq!(distinct, [Bson::Boolean(false), Bson::Boolean(true)]);

    let grouped = collect(
        coll.aggregate([
            doc! { "$match": { "i": { "$lt": 10 } } },
            doc! { "$group": { "_id": "$even", "total": { "$sum": "$i" } } },
            doc! { "$sort": { "_id": 1 } },
        ])
        .with_options(AggregateOptions::default().batch_size(1))
        .run()
        .unwrap(),
    );
    assert_eq!(
        grouped,
        [
            doc! { "_id": false, "total": 25 },
            doc! { "_id": true, "total": 20 }
        ]
    );
    // An empty collection counts 0 (the aggregate returns no document).
    let empty = fresh::<Document>(&client, "empty");
    assert_eq!(empty.count_documents(doc! {}).run().unwrap(), 0);
}

#[test]
fn an_ordered_bulk_write_stops_at_a_duplicate_key_and_an_unordered_one_continues() {
    let client = client();
    for ordered in [true, false] {
        let coll = fresh::<Document>(&client, "bulk");
        coll.insert_one(doc! { "_id": 2 }).run().unwrap();
        let models = vec![
            CollectionWriteModel::InsertOne {
                document: doc! { "_id": 1 },
            },
            CollectionWriteModel::UpdateOne {
                filter: doc! { "_id": 1 },
                update: doc! { "$set": { "x": 1 } }.into(),
                options: UpdateModelOptions::default(),
            },
            CollectionWriteModel::InsertOne {
                document: doc! { "_id": 2 },
            },
            CollectionWriteModel::InsertOne {
                document: doc! { "_id": 3 },
            },
            CollectionWriteModel::DeleteOne {
                filter: doc! { "_id": 3 },
                options: DeleteModelOptions::default(),
            },
        ];
        let e = coll
            .bulk_write(models)
            .with_options(BulkWriteOptions::default().ordered(ordered))
            .run()
            .expect_err("a duplicate key");
        let ErrorKind::CollectionBulkWrite(failure) = e.kind() else {
            panic!("not a bulk write failure: {e:?}");
        };
        assert_eq!(failure.write_errors.len(), 1, "{failure:?}");
        assert_eq!(failure.write_errors[0].index, 2, "{failure:?}");
        assert_eq!(failure.write_errors[0].code, 11000);
        let partial = &failure.partial_result;
        assert_eq!(partial.modified_count, 1);
        let remaining = ids(&collect(
            coll.find(doc! {})
                .with_options(FindOptions::default().sort(doc! { "_id": 1 }))
                .run()
                .unwrap(),
        ));
        if ordered {
            assert_eq!(partial.inserted_count, 1);
            assert_eq!(partial.deleted_count, 0);
            assert_eq!(remaining, [1, 2]);
        } else {
            assert_eq!(partial.inserted_count, 2);
            assert_eq!(partial.deleted_count, 1);
            assert_eq!(remaining, [1, 2]);
            assert!(partial.inserted_ids.contains_key(&3), "{partial:?}");
        }
    }
}

#[test]
fn an_unordered_insert_many_reports_indexes_into_the_callers_list() {
    let client = client();
    let coll = fresh::<Document>(&client, "insert_many_dup");
    let docs = vec![
        doc! { "_id": 1 },
        doc! { "_id": 1 },
        doc! { "_id": 2 },
        doc! { "_id": 2 },
    ];
    let e = coll
        .insert_many(docs)
        .with_options(InsertManyOptions::default().ordered(false))
        .run()
        .expect_err("duplicates");
    let ErrorKind::InsertMany(failure) = e.kind() else {
        panic!("{e:?}");
    };
    let write_errors = failure.write_errors.as_deref().unwrap_or_default();
    let indexes: Vec<usize> = write_errors.iter().map(|w| w.index).collect();
    assert_eq!(indexes, [1, 3]);
    assert!(write_errors.iter().all(|w| w.code == 11000));
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 2);
}

#[test]
fn a_duplicate_key_is_a_write_error_with_its_code() {
    let client = client();
    let coll = fresh::<Document>(&client, "dup");
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    let e = coll
        .insert_one(doc! { "_id": 1 })
        .run()
        .expect_err("duplicate");
    match e.kind() {
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            assert_eq!(w.code, 11000, "{w:?}");
            assert!(w.message.contains("duplicate"), "{w:?}");
        }
        other => panic!("not a write error: {other:?}"),
    }
    // The statement's code, for users matching on it (issue 14); the SDAM
    // and retry rules read only command and write concern codes.
    assert_eq!(e.code(), Some(11000));
    // Unique index violations through updates too.
    coll.create_indexes([IndexModel::new(doc! { "u": 1 }).options(doc! { "unique": true })])
        .run()
        .unwrap();
    coll.insert_many([doc! { "_id": 2, "u": 1 }, doc! { "_id": 3, "u": 2 }])
        .run()
        .unwrap();
    let e = coll
        .update_one(doc! { "_id": 3 }, doc! { "$set": { "u": 1 } })
        .run()
        .expect_err("unique index");
    assert!(
        matches!(e.kind(), ErrorKind::Write(WriteFailure::WriteError(w)) if w.code == 11000),
        "{e:?}"
    );
}

#[test]
fn a_write_concern_error_is_reported_with_the_applied_write() {
    // A server of its own: a fail point is one per server, and another test
    // arms one too.
    let server = TestServer::start();
    let client = Client::with_uri_str(format!("{}&appName=crud_wce", server.uri())).unwrap();
    let coll = fresh::<Document>(&client, "wce");
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": {
                "failCommands": ["insert"],
                "appName": "crud_wce",
                "writeConcernError": { "code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting for replication timed out", "errInfo": { "wtimeout": true } },
            },
        }).run()
        .unwrap();
    let e = coll
        .insert_one(doc! { "_id": 1 })
        .run()
        .expect_err("a write concern error");
    match e.kind() {
        ErrorKind::Write(WriteFailure::WriteConcernError(wce)) => {
            assert_eq!(wce.code, 64);
            assert_eq!(wce.code_name, "WriteConcernFailed");
            assert_eq!(wce.details, Some(doc! { "wtimeout": true }));
        }
        other => panic!("not a write concern error: {other:?}"),
    }
    assert_eq!(
        coll.count_documents(doc! {}).run().unwrap(),
        1,
        "the write applied"
    );
}

#[test]
fn collections_databases_and_indexes() {
    let client = client();
    let db = client.database(&format!("crud_admin_{}", ObjectId::new()));
    db.create_collection("a").run().unwrap();
    db.create_collection("b").run().unwrap();
    let mut names = db.list_collection_names().run().unwrap();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    assert!(client
        .list_database_names()
        .run()
        .unwrap()
        .contains(&db.name().to_string()));

    let a = db.collection::<Document>("a");
    let created = a
        .create_indexes([
            IndexModel::new(doc! { "x": 1, "y": -1 }),
            IndexModel::new(doc! { "z": 1 }).options(doc! { "name": "zed", "unique": true }),
        ])
        .run()
        .unwrap();
    assert_eq!(created.index_names, ["x_1_y_-1", "zed"]);
    let index_names = |c: &Collection<Document>| {
        let mut names: Vec<String> = collect(c.list_indexes().run().unwrap())
            .iter()
            .map(|i| i.name())
            .collect();
        names.sort();
        names
    };
    assert_eq!(index_names(&a), ["_id_", "x_1_y_-1", "zed"]);
    a.drop_index("zed").run().unwrap();
    assert_eq!(index_names(&a), ["_id_", "x_1_y_-1"]);
    a.drop_indexes().run().unwrap();
    assert_eq!(index_names(&a), ["_id_"]);

    a.drop().run().unwrap();
    a.drop()
        .run()
        .expect("dropping a missing collection is no error");
    assert_eq!(db.list_collection_names().run().unwrap(), ["b"]);
    db.drop().run().unwrap();
    assert!(!client
        .list_database_names()
        .run()
        .unwrap()
        .contains(&db.name().to_string()));
}

fn level(command: &Document) -> Option<&str> {
    command
        .get_document("readConcern")
        .ok()
        .and_then(|rc| rc.get_str("level").ok())
}

/// `writeConcern.w`, a number as i64 or a string.
fn w_of(command: &Document) -> Option<Bson> {
    let wc = command.get_document("writeConcern").ok()?;
    match wc.get("w")? {
        Bson::String(s) => Some(Bson::from(s.as_str())),
        _ => number(wc, "w").map(Bson::Int64),
    }
}

fn write_concern(w: Acknowledgment) -> WriteConcern {
    let mut wc = WriteConcern::default();
    wc.w = Some(w);
    wc
}

#[test]
fn read_and_write_concerns_most_specific_wins() {
    let sim = Simulator::replica_set("rs", TestServer::shared(), &[Role::Primary]);
    let uri = format!("{}&readConcernLevel=local&w=1", sim.seed_uri(&[0]));
    let client = Client::with_uri_str(&uri).unwrap();
    let from_client = fresh::<Document>(&client, "concerns");

    from_client.insert_one(doc! { "_id": 1 }).run().unwrap();
    assert_eq!(
        w_of(&last_received(&sim, 0, "insert")),
        Some(Bson::Int64(1))
    );
    from_client.find_one(doc! {}).run().unwrap();
    assert_eq!(level(&last_received(&sim, 0, "find")), Some("local"));

    // The database level overrides the client's and hands down to its
    // collections.
    let database_options = mongo_inline::options::DatabaseOptions::builder()
        .read_concern(ReadConcern::new("available"))
        .write_concern(write_concern(Acknowledgment::Nodes(2)))
        .build();
    let database = client.database_with_options(from_client.database_name(), database_options);
    assert_eq!(
        database.read_concern(),
        Some(&ReadConcern::new("available"))
    );
    assert_eq!(client.read_concern(), Some(&ReadConcern::new("local")));
    let from_database = database.collection::<Document>(from_client.name());
    assert_eq!(
        from_database.write_concern(),
        Some(&write_concern(Acknowledgment::Nodes(2)))
    );
    from_database.find_one(doc! {}).run().unwrap();
    assert_eq!(level(&last_received(&sim, 0, "find")), Some("available"));
    from_database.delete_many(doc! { "_id": -1 }).run().ok();
    assert_eq!(
        w_of(&last_received(&sim, 0, "delete")),
        Some(Bson::Int64(2))
    );

    let collection_options = mongo_inline::options::CollectionOptions::builder()
        .read_concern(ReadConcern::new("majority"))
        .write_concern(write_concern(Acknowledgment::Majority))
        .build();
    let from_collection =
        database.collection_with_options::<Document>(from_client.name(), collection_options);
    from_collection.insert_one(doc! { "_id": 2 }).run().unwrap();
    assert_eq!(
        w_of(&last_received(&sim, 0, "insert")),
        Some(Bson::from("majority"))
    );
    from_collection.find_one(doc! {}).run().unwrap();
    assert_eq!(level(&last_received(&sim, 0, "find")), Some("majority"));
    from_collection.count_documents(doc! {}).run().unwrap();
    assert_eq!(
        level(&last_received(&sim, 0, "aggregate")),
        Some("majority")
    );

    from_collection
        .insert_one(doc! { "_id": 3 })
        .with_options(
            mongo_inline::options::InsertOneOptions::default()
                .write_concern(write_concern(Acknowledgment::Nodes(1))),
        )
        .run()
        .unwrap();
    assert_eq!(
        w_of(&last_received(&sim, 0, "insert")),
        Some(Bson::Int64(1))
    );
    from_collection
        .find_one(doc! {})
        .with_options(FindOneOptions::default().read_concern(ReadConcern::new("local")))
        .run()
        .unwrap();
    assert_eq!(level(&last_received(&sim, 0, "find")), Some("local"));
    from_collection
        .delete_many(doc! {})
        .with_options(
            DeleteOptions::default().write_concern(write_concern(Acknowledgment::Nodes(1))),
        )
        .run()
        .unwrap();
    assert_eq!(
        w_of(&last_received(&sim, 0, "delete")),
        Some(Bson::Int64(1))
    );
}

#[test]
fn read_preference_most_specific_wins() {
    let sim = Simulator::replica_set(
        "rs",
        TestServer::shared(),
        &[Role::Primary, Role::Secondary],
    );
    let uri = format!("{}&readPreference=secondary", sim.seed_uri(&[0, 1]));
    let client = Client::with_uri_str(&uri).unwrap();
    // Written through the primary (writes ignore the read preference).
    let coll = fresh::<Document>(&client, "read_pref");
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    assert!(sim.commands(0).iter().any(|c| c == "insert"));
    assert!(!sim.commands(1).iter().any(|c| c == "insert"));

    let count_finds = |i: usize| sim.commands(i).iter().filter(|c| *c == "find").count();

    // The client's secondary.
    coll.find_one(doc! {}).run().unwrap();
    assert_eq!((count_finds(0), count_finds(1)), (0, 1));
    let mode = |find: &Document| {
        find.get_document("$readPreference")
            .ok()
            .and_then(|rp| rp.get_str("mode").ok())
            .map(str::to_string)
    };
    assert_eq!(
        mode(&last_received(&sim, 1, "find")).as_deref(),
        Some("secondary")
    );

    // The collection's primary.
    let options = mongo_inline::options::CollectionOptions::builder()
        .selection_criteria(mongo_inline::options::SelectionCriteria::from(
            ReadPreference::primary(),
        ))
        .build();
    let on_primary = client
        .database(coll.database_name())
        .collection_with_options::<Document>(coll.name(), options);
    assert_eq!(
        on_primary.selection_criteria(),
        Some(&ReadPreference::Primary.into())
    );
    on_primary.find_one(doc! {}).run().unwrap();
    assert_eq!((count_finds(0), count_finds(1)), (1, 1));

    // The operation's secondaryPreferred beats the collection's primary.
    on_primary
        .find_one(doc! {})
        .with_options(FindOneOptions::default().selection_criteria(
            SelectionCriteria::ReadPreference(ReadPreference::secondary_preferred(None)),
        ))
        .run()
        .unwrap();
    assert_eq!((count_finds(0), count_finds(1)), (1, 2));
    assert_eq!(
        mode(&last_received(&sim, 1, "find")).as_deref(),
        Some("secondaryPreferred")
    );
}

#[test]
fn a_write_concern_error_in_a_batched_write_keeps_the_partial_result() {
    // A server of its own: a fail point is one per server, and another test
    // arms one too.
    let server = TestServer::start();
    let client = Client::with_uri_str(format!("{}&appName=crud_bulk_wce", server.uri())).unwrap();
    let coll = fresh::<Document>(&client, "bulk_wce");
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": {
                "failCommands": ["insert"],
                "appName": "crud_bulk_wce",
                // Not a retryable code: retries are another test's subject.
                "writeConcernError": { "code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting for replication timed out" },
            },
        }).run()
        .unwrap();
    let e = coll
        .insert_many([doc! { "_id": 1 }, doc! { "_id": 2 }])
        .run()
        .expect_err("a write concern error");
    let ErrorKind::InsertMany(failure) = e.kind() else {
        panic!("not an insert_many failure: {e:?}");
    };
    assert!(failure.write_errors.is_none(), "{failure:?}");
    assert_eq!(
        failure.write_concern_error.as_ref().map(|w| w.code),
        Some(64)
    );
    assert_eq!(failure.inserted_ids.len(), 2);
    assert_eq!(e.code(), Some(64));
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 2);
}

fn insert_model(ns: &mongo_inline::Namespace, document: Document) -> WriteModel {
    InsertOneModel::builder()
        .namespace(ns.clone())
        .document(document)
        .build()
        .into()
}

#[test]
fn client_bulk_write_spans_collections_with_verbose_results() {
    let client = client();
    let people = fresh::<Document>(&client, "cbw_people");
    let log = fresh::<Document>(&client, "cbw_log");
    people.insert_one(doc! { "_id": 1, "n": 0 }).run().unwrap();
    let models: Vec<WriteModel> = vec![
        insert_model(&log.namespace(), doc! { "_id": "a" }),
        UpdateOneModel::builder()
            .namespace(people.namespace())
            .filter(doc! { "_id": 1 })
            .update(doc! { "$inc": { "n": 1 } })
            .build()
            .into(),
        UpdateManyModel::builder()
            .namespace(people.namespace())
            .filter(doc! { "_id": 2 })
            .update(doc! { "$set": { "n": 5 } })
            .upsert(true)
            .build()
            .into(),
        insert_model(&log.namespace(), doc! { "note": "generated id" }),
        DeleteOneModel::builder()
            .namespace(log.namespace())
            .filter(doc! { "_id": "a" })
            .build()
            .into(),
    ];
    let result = client.bulk_write(models).verbose_results().run().unwrap();
    let summary = &result.summary;
    assert_eq!(
        (
            summary.inserted_count,
            summary.matched_count,
            summary.modified_count
        ),
        (2, 1, 1)
    );
    assert_eq!((summary.upserted_count, summary.deleted_count), (1, 1));
    assert_eq!(result.insert_results[&0].inserted_id, Bson::from("a"));
    assert!(result.insert_results[&3]
        .inserted_id
        .as_object_id()
        .is_some());
    assert_eq!(result.update_results[&1].modified_count, 1);
    assert_eq!(result.update_results[&2].upserted_id, Some(Bson::Int32(2)));
    assert_eq!(result.delete_results[&4].deleted_count, 1);
    assert_eq!(log.count_documents(doc! {}).run().unwrap(), 1);
    assert_eq!(people.count_documents(doc! { "n": 5 }).run().unwrap(), 1);
}

#[test]
fn client_bulk_write_errors_carry_what_succeeded() {
    let client = client();
    let coll = fresh::<Document>(&client, "cbw_errors");
    let ns = coll.namespace();
    let models = || {
        vec![
            insert_model(&ns, doc! { "_id": 1 }),
            insert_model(&ns, doc! { "_id": 1 }),
            insert_model(&ns, doc! { "_id": 2 }),
        ]
    };
    // Ordered: stops at the duplicate; the first insert is the partial result.
    let error = client.bulk_write(models()).run().unwrap_err();
    let ErrorKind::BulkWrite(failure) = &*error.kind else {
        panic!("not a bulk write error: {error}");
    };
    assert_eq!(failure.write_errors.keys().collect::<Vec<_>>(), [&1]);
    assert_eq!(failure.write_errors[&1].code, 11000);
    assert_eq!(error.code(), Some(11000));
    let Some(PartialBulkWriteResult::Summary(partial)) = &failure.partial_result else {
        panic!("no summary partial result: {failure:?}");
    };
    assert_eq!(partial.inserted_count, 1);
    coll.delete_many(doc! {}).run().unwrap();
    // Unordered: every write is tried.
    let error = client
        .bulk_write(models())
        .ordered(false)
        .verbose_results()
        .run()
        .unwrap_err();
    let ErrorKind::BulkWrite(failure) = &*error.kind else {
        panic!("not a bulk write error: {error}");
    };
    let Some(PartialBulkWriteResult::Verbose(partial)) = &failure.partial_result else {
        panic!("no verbose partial result: {failure:?}");
    };
    assert_eq!(partial.summary.inserted_count, 2);
    assert_eq!(
        partial
            .insert_results
            .keys()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [0, 2].into()
    );
    // Client-side refusals.
    let empty: Vec<WriteModel> = Vec::new();
    assert!(client.bulk_write(empty).run().is_err());
    let unacknowledged = client
        .bulk_write(models())
        .write_concern(WriteConcern::builder().w(Acknowledgment::Nodes(0)).build())
        .run()
        .unwrap_err();
    assert!(
        unacknowledged.to_string().contains("ordered"),
        "{unacknowledged}"
    );
}

#[test]
fn client_bulk_write_splits_batches_and_refuses_old_servers() {
    let (sim, client) = simulated();
    sim.set_hello_extra(0, doc! { "maxWriteBatchSize": 2 });
    let coll = fresh::<Document>(&client, "cbw_batches");
    let ns = coll.namespace();
    let other = mongo_inline::Namespace::new(DB, format!("{}_other", ns.coll));
    let models: Vec<WriteModel> = vec![
        insert_model(&ns, doc! { "_id": 1 }),
        insert_model(&other, doc! { "_id": 2 }),
        insert_model(&ns, doc! { "_id": 3 }),
    ];
    let result = client.bulk_write(models.clone()).run().unwrap();
    assert_eq!(result.inserted_count, 3);
    let sent: Vec<Document> = sim
        .received(0)
        .into_iter()
        .filter(|d| d.contains_key("bulkWrite"))
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0].get_array("ops").unwrap().len(), 2);
    assert_eq!(sent[0].get_array("nsInfo").unwrap().len(), 2);
    assert_eq!(sent[1].get_array("ops").unwrap().len(), 1);
    // Only the namespaces a batch uses, each once, indexed from 0.
    assert_eq!(sent[1].get_array("nsInfo").unwrap().len(), 1);
    assert_eq!(
        sent[1].get_array("ops").unwrap()[0]
            .as_document()
            .unwrap()
            .get_i32("insert"),
        Ok(0)
    );
    assert_eq!(sent[0].get_bool("errorsOnly"), Ok(true));
    assert_eq!(sent[0].get_bool("ordered"), Ok(true));
    assert!(
        sent[0].contains_key("txnNumber"),
        "retryable: {:?}",
        sent[0]
    );

    sim.set_hello_extra(0, doc! { "maxWireVersion": 21 });
    let old = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    let error = old.bulk_write(models).run().unwrap_err();
    assert!(
        matches!(*error.kind, ErrorKind::IncompatibleServer { .. }),
        "{error}"
    );
}
