//! Implicit and explicit sessions end to end: `lsid` on every command, the
//! server-session pool, dirty sessions, `$clusterTime` gossip and causal
//! consistency, against SecantusDB directly and through the simulator.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Bson, Document};
use mongo_inline::options::FindOptions;
use mongo_inline::{Client, ErrorKind};
use support::events::{command_name, recorded_client};
use support::server::TestServer;
use support::sim::{Role, Simulator};

/// What a simulated member received, without the monitoring hellos.
fn operations(sim: &Simulator, i: usize) -> Vec<Document> {
    sim.received(i)
        .into_iter()
        .filter(|c| !matches!(command_name(c), "hello" | "isMaster" | "ismaster"))
        .collect()
}

fn lsid(command: &Document) -> Option<Document> {
    command.get_document("lsid").ok().cloned()
}

/// Runs a spread of CRUD operations on `client`, a cursor with getMores included.
fn crud_workload(client: &Client, collection: &str) {
    let coll = client
        .database("sessions")
        .collection::<Document>(collection);
    coll.insert_many((0..5).map(|i| doc! { "i": i }))
        .run()
        .unwrap();
    coll.insert_one(doc! { "i": 5 }).run().unwrap();
    let all: Vec<Document> = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2))
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(all.len(), 6);
    coll.update_many(doc! {}, doc! { "$set": { "seen": true } })
        .run()
        .unwrap();
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 6);
    assert_eq!(coll.distinct("i", doc! {}).run().unwrap().len(), 6);
    let _: Vec<Document> = coll
        .aggregate([doc! { "$match": {} }])
        .run()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    coll.delete_many(doc! {}).run().unwrap();
}

#[test]
fn every_crud_command_carries_an_lsid_when_sessions_are_supported() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set("rs", server, &[Role::Primary]);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    crud_workload(&client, "implicit_lsid");
    let sent = operations(&sim, 0);
    let names: Vec<&str> = sent.iter().map(command_name).collect();
    for expected in [
        "insert",
        "find",
        "getMore",
        "update",
        "aggregate",
        "distinct",
        "delete",
    ] {
        assert!(names.contains(&expected), "{expected} not sent: {names:?}");
    }
    for command in &sent {
        assert!(lsid(command).is_some(), "no lsid on {command}");
    }
}

#[test]
fn no_lsid_when_the_deployment_does_not_support_sessions() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set("rs", server, &[Role::Primary]);
    sim.set_hello_extra(0, doc! { "logicalSessionTimeoutMinutes": Bson::Null });
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    crud_workload(&client, "no_lsid");
    let sent = operations(&sim, 0);
    assert!(
        sent.iter().any(|c| command_name(c) == "getMore"),
        "{sent:?}"
    );
    for command in &sent {
        assert!(lsid(command).is_none(), "lsid on {command}");
        assert!(!command.contains_key("txnNumber"), "txnNumber on {command}");
    }
    // An explicit session is an error there, not silently ignored.
    let coll = client
        .database("sessions")
        .collection::<Document>("no_lsid");
    let outcome = client
        .start_session()
        .run()
        .and_then(|mut session| coll.insert_one(doc! {}).session(&mut session).run());
    let error = outcome.expect_err("an explicit session was accepted");
    assert!(
        matches!(error.kind(), ErrorKind::SessionsNotSupported),
        "{error:?}"
    );
    assert!(operations(&sim, 0).iter().all(|c| lsid(c).is_none()));
}

#[test]
fn sequential_operations_reuse_one_server_session() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = client.database("sessions").collection::<Document>("reuse");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    coll.find_one(doc! {}).run().unwrap();
    coll.update_one(doc! {}, doc! { "$set": { "a": 2 } })
        .run()
        .unwrap();
    coll.delete_many(doc! {}).run().unwrap();
    let ids: Vec<Document> = recorder
        .started()
        .iter()
        .filter(|c| !matches!(command_name(c), "hello" | "isMaster"))
        .map(|c| lsid(c).expect("an lsid"))
        .collect();
    assert_eq!(ids.len(), 4);
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
}

#[test]
fn a_cursor_keeps_its_session_for_its_get_mores() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = client.database("sessions").collection::<Document>("cursor");
    coll.drop().run().unwrap();
    coll.insert_many((0..6).map(|i| doc! { "i": i }))
        .run()
        .unwrap();
    recorder.clear_commands();
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2))
        .run()
        .unwrap();
    cursor.next().unwrap().unwrap();
    // While the cursor holds its session, other operations need another.
    coll.count_documents(doc! {}).run().unwrap();
    let rest: Vec<Document> = cursor.collect::<Result<_, _>>().unwrap();
    assert_eq!(rest.len(), 5);
    let started = recorder.started();
    let find_lsid = started
        .iter()
        .find(|c| command_name(c) == "find")
        .and_then(lsid)
        .unwrap();
    let get_mores: Vec<&Document> = started
        .iter()
        .filter(|c| command_name(c) == "getMore")
        .collect();
    assert!(get_mores.len() >= 2, "{started:?}");
    for get_more in get_mores {
        assert_eq!(lsid(get_more).as_ref(), Some(&find_lsid));
    }
    let count_lsid = started
        .iter()
        .find(|c| command_name(c) == "aggregate")
        .and_then(lsid)
        .unwrap();
    assert_ne!(
        count_lsid, find_lsid,
        "two open operations shared a session"
    );
}

#[test]
fn a_network_error_makes_the_session_dirty_and_it_is_not_reused() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&format!("{}&retryReads=false", server.uri()));
    let coll = client.database("sessions").collection::<Document>("dirty");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": { "failCommands": ["find"], "closeConnection": true },
        })
        .run()
        .unwrap();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::Io(_)), "{error:?}");
    coll.find_one(doc! {}).run().unwrap();
    let lsids: Vec<(String, Document)> = recorder
        .started()
        .iter()
        .filter(|c| matches!(command_name(c), "find" | "insert"))
        .map(|c| (command_name(c).to_owned(), lsid(c).unwrap()))
        .collect();
    assert_eq!(lsids.len(), 3, "{lsids:?}");
    // The insert's session was clean and came back for the failed find...
    assert_eq!(lsids[0].1, lsids[1].1);
    // ...which dirtied it, so the next find starts a new one.
    assert_ne!(lsids[1].1, lsids[2].1);
}

fn cluster_time(document: &Document) -> Option<bson::Timestamp> {
    document
        .get_document("$clusterTime")
        .ok()
        .and_then(|c| c.get_timestamp("clusterTime").ok())
}

#[test]
fn the_greatest_cluster_time_seen_is_gossiped() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = client.database("sessions").collection::<Document>("gossip");
    for i in 0..4 {
        coll.insert_one(doc! { "i": i }).run().unwrap();
        coll.find_one(doc! { "i": i }).run().unwrap();
    }
    let started = recorder.started();
    let replies = recorder.replies();
    assert_eq!(started.len(), replies.len());
    let mut greatest: Option<bson::Timestamp> = None;
    let mut gossiped = 0;
    for (command, reply) in started.iter().zip(&replies) {
        if let Some(seen) = greatest {
            let sent = cluster_time(command)
                .unwrap_or_else(|| panic!("no $clusterTime on {command} after seeing {seen:?}"));
            assert!(sent >= seen, "sent {sent:?} after seeing {seen:?}");
            gossiped += 1;
        }
        if let Some(t) = cluster_time(reply) {
            greatest = Some(greatest.map_or(t, |g| g.max(t)));
        }
    }
    assert!(greatest.is_some(), "the server never sent $clusterTime");
    assert!(gossiped >= 7, "only {gossiped} commands gossiped");
}

#[test]
fn a_read_after_a_write_in_a_causal_session_waits_for_the_write() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = client.database("sessions").collection::<Document>("causal");
    let mut session = client.start_session().run().unwrap();
    let first = coll.find(doc! {}).session(&mut session).run().unwrap();
    drop(first);
    coll.insert_one(doc! { "x": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    let mut found = coll
        .find(doc! { "x": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    assert!(found.next(&mut session).is_some());
    let started = recorder.started();
    let replies = recorder.replies();
    let finds: Vec<&Document> = started
        .iter()
        .filter(|c| command_name(c) == "find")
        .collect();
    // The session's first operation has nothing to wait for.
    assert!(
        finds[0]
            .get_document("readConcern")
            .map_or(true, |rc| !rc.contains_key("afterClusterTime")),
        "{}",
        finds[0]
    );
    let insert_at = started
        .iter()
        .position(|c| command_name(c) == "insert")
        .unwrap();
    let write_time = replies[insert_at]
        .get_timestamp("operationTime")
        .expect("the write's operationTime");
    let after = finds[1]
        .get_document("readConcern")
        .and_then(|rc| rc.get_timestamp("afterClusterTime"))
        .unwrap_or_else(|_| panic!("no afterClusterTime on {}", finds[1]));
    assert_eq!(after, write_time);
    let ids: Vec<Document> = started.iter().map(|c| lsid(c).unwrap()).collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
}

#[test]
fn a_command_error_leaves_the_session_clean_and_it_is_reused() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = client
        .database("sessions")
        .collection::<Document>("clean_after_error");
    // An unknown query operator: the server answers ok: 0, the socket and
    // the session are fine.
    coll.find_one(doc! { "a": { "$noSuchOperator": 1 } })
        .run()
        .unwrap_err();
    coll.find_one(doc! {}).run().unwrap();
    let ids: Vec<Document> = recorder
        .started()
        .iter()
        .filter(|c| command_name(c) == "find")
        .map(|c| lsid(c).expect("an lsid"))
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1], "the session went back to the pool");
}
