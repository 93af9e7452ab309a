//! A first end-to-end pass over the CRUD API against a real SecantusDB.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Document};
use mongo_inline::options::FindOptions;
use mongo_inline::Client;
use serde::{Deserialize, Serialize};
use support::server::TestServer;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Person {
    name: String,
    born: i32,
}

#[test]
fn typed_insert_find_update_delete_round_trip() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let people = client.database("crud_smoke").collection::<Person>("people");
    people.drop().run().unwrap();
    people
        .insert_many([
            Person {
                name: "Ada".into(),
                born: 1815,
            },
            Person {
                name: "Grace".into(),
                born: 1906,
            },
            Person {
                name: "Alan".into(),
                born: 1912,
            },
        ])
        .run()
        .unwrap();
    let found: Vec<Person> = people
        .find(doc! { "born": { "$gt": 1900 } })
        .with_options(FindOptions::default().sort(doc! { "born": 1 }))
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        found.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["Grace", "Alan"]
    );
    let updated = people
        .update_one(doc! { "name": "Ada" }, doc! { "$set": { "born": 1816 } })
        .run()
        .unwrap();
    assert_eq!(updated.modified_count, 1);
    assert_eq!(
        people
            .find_one(doc! { "name": "Ada" })
            .run()
            .unwrap()
            .unwrap()
            .born,
        1816
    );
    assert_eq!(people.delete_many(doc! {}).run().unwrap().deleted_count, 3);
    assert_eq!(people.count_documents(doc! {}).run().unwrap(), 0);
}

#[test]
fn a_cursor_fetches_many_batches_from_its_socket() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let numbers = client
        .database("crud_smoke")
        .collection::<Document>("numbers");
    numbers.drop().run().unwrap();
    numbers
        .insert_many((0..250).map(|i| doc! { "i": i }))
        .run()
        .unwrap();
    let cursor = numbers
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(20).sort(doc! { "i": 1 }))
        .run()
        .unwrap();
    let all: Vec<Document> = cursor.collect::<Result<_, _>>().unwrap();
    assert_eq!(all.len(), 250);
    assert_eq!(all[249].get_i32("i"), Ok(249));
}

#[test]
fn a_transaction_commits_and_another_client_sees_it() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let accounts = client
        .database("crud_smoke")
        .collection::<Document>("accounts");
    accounts.drop().run().unwrap();
    accounts
        .insert_one(doc! { "_id": 1, "balance": 10 })
        .run()
        .unwrap();
    let mut session = client.start_session().run().unwrap();
    session.start_transaction().run().unwrap();
    accounts
        .update_one(doc! { "_id": 1 }, doc! { "$inc": { "balance": 5 } })
        .session(&mut session)
        .run()
        .unwrap();
    accounts
        .insert_one(doc! { "_id": 2, "balance": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    let other = Client::with_uri_str(server.uri()).unwrap();
    let other_accounts = other
        .database("crud_smoke")
        .collection::<Document>("accounts");
    assert_eq!(
        other_accounts.count_documents(doc! {}).run().unwrap(),
        1,
        "uncommitted"
    );
    session.commit_transaction().run().unwrap();
    assert_eq!(other_accounts.count_documents(doc! {}).run().unwrap(), 2);
    let one = other_accounts
        .find_one(doc! { "_id": 1 })
        .run()
        .unwrap()
        .unwrap();
    assert_eq!(one.get_i32("balance"), Ok(15));
}
