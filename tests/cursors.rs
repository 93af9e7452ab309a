//! Cursors on the topology simulator: getMores on the cursor's own server
//! and socket, killCursors on early drop, a socket lost mid-cursor, limit
//! and batch size together, and a cursor on a secondary.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use mongo_inline::options::FindOptions;
use mongo_inline::options::SelectionCriteria;
use mongo_inline::{Client, Collection, ReadPreference};
use support::server::TestServer;
use support::sim::{Role, Simulator};

fn count(sim: &Simulator, i: usize, name: &str) -> usize {
    sim.commands(i).iter().filter(|c| *c == name).count()
}

/// `n` documents `{_id: i}` in a fresh collection, written through `client`.
fn numbers(client: &Client, n: i32) -> Collection<Document> {
    let coll = client
        .database("cursors")
        .collection::<Document>(&format!("c_{}", ObjectId::new()));
    coll.insert_many((0..n).map(|i| doc! { "_id": i }))
        .run()
        .unwrap();
    coll
}

fn primary_only() -> (Simulator, Client) {
    let sim = Simulator::replica_set("rs", TestServer::shared(), &[Role::Primary]);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    (sim, client)
}

fn sorted(batch_size: u32) -> FindOptions {
    FindOptions::default()
        .batch_size(batch_size)
        .sort(doc! { "_id": 1 })
}

#[test]
fn a_cursor_fetches_every_batch_with_get_more_on_one_socket() {
    let (sim, client) = primary_only();
    let coll = numbers(&client, 95);
    sim.reset_observations();
    let cursor = coll.find(doc! {}).with_options(sorted(10)).run().unwrap();
    assert_ne!(
        cursor.id(),
        0,
        "95 documents in batches of 10 need a cursor"
    );
    let all: Vec<Document> = cursor.collect::<Result<_, _>>().unwrap();
    assert_eq!(all.len(), 95);
    assert_eq!(all.last().and_then(|d| d.get_i32("_id").ok()), Some(94));
    // 10 in the first batch, then 9 getMores (the last one returns 5 and id 0).
    assert_eq!(count(&sim, 0, "find"), 1);
    assert_eq!(count(&sim, 0, "getMore"), 9);
    assert_eq!(count(&sim, 0, "killCursors"), 0, "the server closed it");
    assert_eq!(sim.connections(0), 0, "a new socket opened for the cursor");
}

#[test]
fn dropping_a_cursor_early_kills_it_on_the_same_socket() {
    let (sim, client) = primary_only();
    let coll = numbers(&client, 30);
    sim.reset_observations();
    let mut cursor = coll.find(doc! {}).with_options(sorted(5)).run().unwrap();
    let cursor_id = cursor.id();
    for _ in 0..7 {
        cursor.next().unwrap().unwrap();
    }
    assert_eq!(count(&sim, 0, "getMore"), 1);
    drop(cursor);
    let kills: Vec<Document> = sim
        .received(0)
        .into_iter()
        .filter(|d| d.contains_key("killCursors"))
        .collect();
    assert_eq!(kills.len(), 1, "{:?}", sim.commands(0));
    assert_eq!(
        kills[0].get_array("cursors").unwrap(),
        &vec![Bson::Int64(cursor_id)]
    );
    assert_eq!(kills[0].get_str("killCursors"), Ok(coll.name()));
    assert_eq!(sim.connections(0), 0, "no new connection for the kill");
    // The server no longer knows the cursor.
    let reply = client
        .database("cursors")
        .run_command(doc! { "getMore": cursor_id, "collection": coll.name() })
        .run();
    assert!(reply.is_err(), "{reply:?}");
}

#[test]
fn a_socket_lost_mid_cursor_fails_the_next_batch_without_rerunning_the_query() {
    let (sim, client) = primary_only();
    let coll = numbers(&client, 20);
    sim.reset_observations();
    let mut cursor = coll.find(doc! {}).with_options(sorted(5)).run().unwrap();
    for _ in 0..5 {
        cursor.next().unwrap().unwrap();
    }
    sim.drop_connections(0);
    let error = cursor
        .next()
        .expect("an error, not the end of the results")
        .expect_err("the cursor's socket is gone");
    let message = error.to_string();
    assert!(
        message.contains("cursor") && error.is_network_error(),
        "unclear error: {message}"
    );
    assert_eq!(cursor.next().map(|r| r.is_ok()), None, "the cursor is done");
    drop(cursor);
    assert_eq!(
        count(&sim, 0, "find"),
        1,
        "the query ran again: {:?}",
        sim.commands(0)
    );
    assert_eq!(count(&sim, 0, "killCursors"), 0, "{:?}", sim.commands(0));
    // The client itself carries on.
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 20);
}

#[test]
fn a_secondary_cursor_whose_socket_is_lost_is_not_resumed_on_another_member() {
    let sim = Simulator::replica_set(
        "rs",
        TestServer::shared(),
        &[Role::Primary, Role::Secondary],
    );
    let client = Client::with_uri_str(sim.seed_uri(&[0, 1])).unwrap();
    let seeded = numbers(&client, 20);
    let options = mongo_inline::options::CollectionOptions::builder()
        .selection_criteria(mongo_inline::options::SelectionCriteria::from(
            ReadPreference::secondary_preferred(None),
        ))
        .build();
    let coll = client
        .database("cursors")
        .collection_with_options::<Document>(seeded.name(), options);
    sim.reset_observations();
    let mut cursor = coll.find(doc! {}).with_options(sorted(5)).run().unwrap();
    assert_eq!(cursor.address().to_string(), sim.address(1));
    for _ in 0..5 {
        cursor.next().unwrap().unwrap();
    }
    sim.drop_connections(1);
    assert!(matches!(cursor.next(), Some(Err(_))));
    drop(cursor);
    for member in 0..2 {
        let commands = sim.commands(member);
        assert_eq!(
            commands
                .iter()
                .filter(|c| ["find", "getMore", "killCursors"].contains(&c.as_str()))
                .count(),
            usize::from(member == 1),
            "member {member}: {commands:?}"
        );
    }
}

#[test]
fn limit_and_batch_size_together() {
    let (sim, client) = primary_only();
    let coll = numbers(&client, 50);
    sim.reset_observations();
    let found: Vec<Document> = coll
        .find(doc! {})
        .with_options(sorted(4).limit(10))
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(found.len(), 10);
    let get_mores: Vec<Document> = sim
        .received(0)
        .into_iter()
        .filter(|d| d.contains_key("getMore"))
        .collect();
    // 4 + 4 + 2: the last getMore asks only for what the limit leaves.
    assert_eq!(get_mores.len(), 2, "{:?}", sim.commands(0));
    let asked: Vec<i64> = get_mores
        .iter()
        .map(|g| match g.get("batchSize") {
            Some(Bson::Int32(v)) => i64::from(*v),
            Some(Bson::Int64(v)) => *v,
            other => panic!("getMore without batchSize: {other:?}"),
        })
        .collect();
    assert_eq!(asked, [4, 2]);
    assert_eq!(count(&sim, 0, "killCursors"), 0, "{:?}", sim.commands(0));

    // A limit smaller than the batch size: one batch, no getMore.
    sim.reset_observations();
    let few: Vec<Document> = coll
        .find(doc! {})
        .with_options(sorted(20).limit(3))
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(few.len(), 3);
    assert_eq!(count(&sim, 0, "getMore"), 0);
}

#[test]
fn a_cursor_on_a_secondary_keeps_its_get_mores_there() {
    let sim = Simulator::replica_set(
        "rs",
        TestServer::shared(),
        &[Role::Primary, Role::Secondary, Role::Secondary],
    );
    let client = Client::with_uri_str(sim.seed_uri(&[0, 1, 2])).unwrap();
    let coll = numbers(&client, 40);
    sim.reset_observations();
    let options = mongo_inline::options::CollectionOptions::builder()
        .selection_criteria(mongo_inline::options::SelectionCriteria::from(
            ReadPreference::secondary(None),
        ))
        .build();
    let secondary = client
        .database("cursors")
        .collection_with_options::<Document>(coll.name(), options);
    let cursor = secondary
        .find(doc! {})
        .with_options(sorted(7))
        .run()
        .unwrap();
    let member = (0..3)
        .find(|&i| sim.address(i) == cursor.address().to_string())
        .expect("the cursor's address is a member");
    assert_ne!(member, 0, "a secondary read went to the primary");
    let all: Vec<Document> = cursor.collect::<Result<_, _>>().unwrap();
    assert_eq!(all.len(), 40);
    assert_eq!(count(&sim, member, "getMore"), 5);
    for other in (0..3).filter(|&i| i != member) {
        assert_eq!(
            count(&sim, other, "getMore") + count(&sim, other, "find"),
            0,
            "member {other}: {:?}",
            sim.commands(other)
        );
    }
    // The same through an operation-level read preference.
    sim.reset_observations();
    let cursor = coll
        .find(doc! {})
        .with_options(
            sorted(15).selection_criteria(SelectionCriteria::ReadPreference(
                ReadPreference::secondary(None),
            )),
        )
        .run()
        .unwrap();
    let member = (0..3)
        .find(|&i| sim.address(i) == cursor.address().to_string())
        .unwrap();
    assert_ne!(member, 0);
    assert_eq!(cursor.count(), 40);
    assert_eq!(count(&sim, member, "getMore"), 2);
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Reading {
    // No `_id` field: the driver adds one to the bytes it sends.
    sensor: String,
    place: Place,
    values: Vec<f64>,
}

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Place {
    room: String,
    floor: i32,
}

#[test]
fn typed_documents_round_trip_through_raw_inserts_and_raw_batches() {
    let client = Client::with_uri_str(TestServer::shared().uri()).unwrap();
    let coll = client
        .database("cursors")
        .collection::<Reading>(&format!("typed_{}", ObjectId::new()));
    let readings: Vec<Reading> = (0..25)
        .map(|i| Reading {
            sensor: format!("s{i:02}"),
            place: Place {
                room: "lab".into(),
                floor: i,
            },
            values: vec![f64::from(i), 0.5],
        })
        .collect();
    let inserted = coll.insert_many(&readings).run().unwrap();
    assert_eq!(inserted.inserted_ids.len(), 25);

    // Read back in batches of 4 (a firstBatch and getMores), as the type and
    // as documents: every generated `_id` is first and is the one reported.
    let options = FindOptions::default()
        .batch_size(4)
        .sort(doc! { "sensor": 1 });
    let typed: Vec<Reading> = coll
        .find(doc! {})
        .with_options(options.clone())
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(typed, readings);
    let raw = coll.clone_with_type::<Document>();
    let stored: Vec<Document> = raw
        .find(doc! {})
        .with_options(options.clone())
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (index, document) in stored.iter().enumerate() {
        assert_eq!(document.keys().next().map(String::as_str), Some("_id"));
        assert_eq!(document.get("_id"), inserted.inserted_ids.get(&index));
    }

    // A stored document that does not fit the type is an error for that
    // document only; the cursor goes on.
    raw.insert_one(doc! { "sensor": "s12b", "place": { "room": 5 }, "values": [] })
        .run()
        .unwrap();
    let results: Vec<_> = coll
        .find(doc! {})
        .with_options(options)
        .run()
        .unwrap()
        .collect();
    assert_eq!(results.len(), 26);
    let failed: Vec<usize> = (0..26).filter(|i| results[*i].is_err()).collect();
    assert_eq!(failed, vec![13]);
    let error = results[13].as_ref().unwrap_err();
    assert!(
        matches!(
            error.kind(),
            mongo_inline::ErrorKind::BsonDeserialization(
                bson::de::Error::DeserializationError { .. }
            )
        ),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(
        error.contains("does not match the cursor's type"),
        "{error}"
    );
}
