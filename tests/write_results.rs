//! What writes report against SecantusDB: a `w: 0` write's result says
//! `acknowledged: false` (with no counts to believe), an acknowledged one
//! its counts; and names MongoDB does not allow fail before anything is
//! sent.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::Duration;

use bson::{doc, Document};
use mongo_inline::options::CollectionWriteModel;
use mongo_inline::options::WriteConcern;
use mongo_inline::{Client, Collection, ErrorKind};
use support::events::recorded_client;
use support::server::TestServer;

fn fresh(client: &Client) -> Collection<Document> {
    client
        .database("write_results")
        .collection(&format!("c_{}", bson::oid::ObjectId::new()))
}

/// `coll`'s documents, once the server has applied every write sent before
/// (a `w: 0` write is not waited for): polled until `expected` or 5 s.
fn eventually(coll: &Collection<Document>, expected: &[Document]) {
    let started = std::time::Instant::now();
    loop {
        let found: Vec<Document> = coll
            .find(doc! {})
            .sort(doc! { "_id": 1 })
            .run()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        if found == expected || started.elapsed() > Duration::from_secs(5) {
            assert_eq!(found, expected);
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn unacknowledged_writes_say_so() {
    let client = Client::with_uri_str(TestServer::shared().uri()).unwrap();
    let acked = fresh(&client);
    let options = mongo_inline::options::CollectionOptions::builder()
        .write_concern(WriteConcern::nodes(0))
        .build();
    let coll = client
        .database("write_results")
        .collection_with_options::<Document>(acked.name(), options);

    let one = coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    assert!(!one.acknowledged);
    assert_eq!(
        one.inserted_id,
        bson::Bson::Int32(1),
        "the id it was sent with"
    );
    // An ordered insert stops at the duplicate, and nobody hears of it.
    let many = coll
        .insert_many([doc! { "_id": 1 }, doc! { "_id": 2 }])
        .run()
        .unwrap();
    assert!(!many.acknowledged);
    let update = coll
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "y": 1 } })
        .run()
        .unwrap();
    assert!(!update.acknowledged);
    assert_eq!((update.matched_count, update.modified_count), (0, 0));
    assert_eq!(update.upserted_id, None);
    let update = coll
        .update_many(doc! {}, doc! { "$set": { "z": 1 } })
        .run()
        .unwrap();
    assert!(!update.acknowledged);
    let replace = coll
        .replace_one(doc! { "_id": 9 }, doc! { "r": 1 })
        .run()
        .unwrap();
    assert!(!replace.acknowledged);
    let bulk = coll
        .bulk_write([
            CollectionWriteModel::insert_one(doc! { "_id": 3 }),
            CollectionWriteModel::update_one(doc! { "_id": 3 }, doc! { "$set": { "b": 1 } }),
            CollectionWriteModel::delete_one(doc! { "_id": 2 }),
        ])
        .run()
        .unwrap();
    assert!(!bulk.acknowledged);
    assert_eq!(bulk.inserted_ids.len(), 1, "the ids it sent");
    assert_eq!(
        (bulk.inserted_count, bulk.matched_count, bulk.deleted_count),
        (0, 0, 0)
    );
    let delete = coll.delete_many(doc! { "_id": 9 }).run().unwrap();
    assert!(!delete.acknowledged);
    assert_eq!(delete.deleted_count, 0);
    // The writes happened all the same.
    eventually(
        &acked,
        &[doc! { "_id": 1, "y": 1, "z": 1 }, doc! { "_id": 3, "b": 1 }],
    );

    // Acknowledged writes say so, with their counts.
    let one = acked.insert_one(doc! { "_id": 4 }).run().unwrap();
    assert!(one.acknowledged);
    let update = acked
        .update_many(doc! {}, doc! { "$set": { "w": 1 } })
        .run()
        .unwrap();
    assert!(update.acknowledged);
    assert_eq!(update.matched_count, 3);
    let many = acked.insert_many([doc! { "_id": 5 }]).run().unwrap();
    assert!(many.acknowledged);
    let delete = acked.delete_one(doc! { "_id": 5 }).run().unwrap();
    assert!(delete.acknowledged);
    assert_eq!(delete.deleted_count, 1);
    let bulk = acked
        .bulk_write([CollectionWriteModel::insert_one(doc! { "_id": 6 })])
        .run()
        .unwrap();
    assert!(bulk.acknowledged);
    assert_eq!(bulk.inserted_count, 1);
}

#[test]
fn w0_from_the_connection_string_is_reported_too() {
    let uri = format!("{}&w=0", TestServer::shared().uri());
    let client = Client::with_uri_str(&uri).unwrap();
    let coll = fresh(&client);
    assert!(
        !coll
            .insert_one(doc! { "_id": 1 })
            .run()
            .unwrap()
            .acknowledged
    );
    let update = coll
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "y": 1 } })
        .run()
        .unwrap();
    assert!(!update.acknowledged);
    // An operation's own write concern wins over the URI's.
    let acked = coll
        .insert_one(doc! { "_id": 2 })
        .write_concern(WriteConcern::nodes(1))
        .run()
        .unwrap();
    assert!(acked.acknowledged);
}

#[test]
fn names_mongodb_does_not_allow_fail_before_anything_is_sent() {
    let (client, events) = recorded_client(&TestServer::shared().uri());
    let bad = [
        ("", "c", "database name is empty"),
        ("db", "", "collection name is empty"),
        ("a.b", "c", "'.'"),
        ("a/b", "c", "'/'"),
        ("a\\b", "c", "'\\\\'"),
        ("a b", "c", "a space"),
        ("a\"b", "c", "'\"'"),
        ("a$b", "c", "'$'"),
        ("a\0b", "c", "a NUL character"),
        ("db", "a$b", "'$'"),
        ("db", "a\0b", "a NUL character"),
    ];
    for (db, name, problem) in bad {
        let coll = client.database(db).collection::<Document>(name);
        let outcomes = [
            coll.insert_one(doc! {}).run().map(drop),
            coll.insert_many([doc! {}]).run().map(drop),
            coll.update_one(doc! {}, doc! { "$set": { "y": 1 } })
                .run()
                .map(drop),
            coll.delete_many(doc! {}).run().map(drop),
            coll.bulk_write([CollectionWriteModel::insert_one(doc! {})])
                .run()
                .map(drop),
            coll.find(doc! {}).run().map(drop),
            coll.find_one(doc! {}).run().map(drop),
            coll.aggregate(Vec::<Document>::new()).run().map(drop),
            coll.count_documents(doc! {}).run().map(drop),
            coll.find_one_and_delete(doc! {}).run().map(drop),
            coll.drop().run().map(drop),
            client.database(db).create_collection(name).run(),
        ];
        for (i, outcome) in outcomes.into_iter().enumerate() {
            let error = outcome.expect_err(&format!("{db:?}.{name:?}, operation {i}"));
            let message = error.to_string();
            assert!(
                matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
                "{db:?}.{name:?}, operation {i}: {message}"
            );
            assert!(
                message.contains(problem),
                "{db:?}.{name:?}, operation {i}: {message}"
            );
        }
    }
    for db in ["", "a.b"] {
        let database = client.database(db);
        assert!(
            database.run_command(doc! { "ping": 1 }).run().is_err(),
            "{db:?}"
        );
        assert!(database.list_collection_names().run().is_err(), "{db:?}");
        assert!(database.drop().run().is_err(), "{db:?}");
    }
    assert!(events.started().is_empty(), "sent: {:?}", events.started());
    // Names MongoDB allows still work: dots in a collection's name.
    let coll = client
        .database("write_results")
        .collection::<Document>("a.b c");
    coll.insert_one(doc! { "x": 1 }).run().unwrap();
    assert!(!events.started().is_empty());
}
