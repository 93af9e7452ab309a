//! Single-threaded server selection end to end, on the topology simulator:
//! step-downs, serverSelectionTryOnce both ways, tag sets, the mongos
//! latency window and direct connections, asserted on which member
//! received each command, what `$readPreference` it carried, and the data
//! read back.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::event::ServerType;
use mongo_inline::options::SelectionCriteria;
use mongo_inline::options::{ReadPreference, ReadPreferenceOptions};
use mongo_inline::{Client, ClientOptions, ErrorKind};
use support::events::{recorded_client, Recorder};
use support::server::TestServer;
use support::sim::{wait_until, Role, Simulator};

const DB: &str = "selection_sim";

fn replica_set(roles: &[Role]) -> Simulator {
    Simulator::replica_set("rs", TestServer::shared(), roles)
}

fn client(uri: &str) -> Client {
    Client::with_uri_str(uri).unwrap_or_else(|e| panic!("bad test URI {uri}: {e}"))
}

fn fresh_collection(prefix: &str) -> String {
    format!("{prefix}_{}", bson::oid::ObjectId::new())
}

fn insert(client: &Client, collection: &str, document: Document) -> mongo_inline::Result<Document> {
    client
        .database(DB)
        .run_command(doc! { "insert": collection, "documents": [document] })
        .run()
}

fn find_with(
    client: &Client,
    collection: &str,
    criteria: SelectionCriteria,
) -> mongo_inline::Result<Vec<Document>> {
    let reply = client
        .database(DB)
        .run_command(doc! { "find": collection, "filter": {} })
        .selection_criteria(criteria)
        .run()?;
    Ok(reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap_or_else(|e| panic!("no cursor.firstBatch in {reply}: {e}"))
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect())
}

fn find_on_primary(client: &Client, collection: &str) -> Vec<Document> {
    find_with(client, collection, ReadPreference::Primary.into()).expect("find on the primary")
}

fn count(sim: &Simulator, i: usize, name: &str) -> usize {
    sim.commands(i).iter().filter(|c| *c == name).count()
}

/// The command documents named `name` that member `i` received.
fn received(sim: &Simulator, i: usize, name: &str) -> Vec<Document> {
    sim.received(i)
        .into_iter()
        .filter(|d| d.keys().next().map(String::as_str) == Some(name))
        .collect()
}

fn tag_set(pairs: &[(&str, &str)]) -> mongo_inline::options::TagSet {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn after_a_step_down_the_write_fails_once_then_lands_on_the_new_primary() {
    let sim = replica_set(&[Role::Primary, Role::Secondary, Role::Secondary]);
    let client = client(&sim.seed_uri(&[0, 1, 2]));
    let collection = fresh_collection("stepdown");
    insert(&client, &collection, doc! { "_id": 1 }).expect("insert on the first primary");
    assert_eq!(count(&sim, 0, "insert"), 1);

    sim.step_down(0);
    sim.elect(1);

    let error = insert(&client, &collection, doc! { "_id": 2 })
        .expect_err("the old primary refuses the write");
    assert_eq!(error.code(), Some(10107), "{error}");
    assert_eq!(count(&sim, 0, "insert"), 2, "sent to the old primary");

    let hellos_before = sim.hellos(1);
    insert(&client, &collection, doc! { "_id": 3 }).expect("insert after the rescan");
    assert!(sim.hellos(1) > hellos_before, "no rescan before the write");
    assert_eq!(count(&sim, 1, "insert"), 1, "{:?}", sim.commands(1));
    assert_eq!(count(&sim, 0, "insert"), 2, "{:?}", sim.commands(0));
    assert_eq!(count(&sim, 2, "insert"), 0, "{:?}", sim.commands(2));
    assert_eq!(
        find_on_primary(&client, &collection),
        vec![doc! { "_id": 1 }, doc! { "_id": 3 }]
    );
    assert_eq!(
        count(&sim, 1, "find"),
        1,
        "the read went to the new primary"
    );
}

#[test]
fn a_primary_that_failed_an_operation_is_checked_by_the_rescan_that_follows() {
    // The NotWritablePrimary reply marks member 0 Unknown; that is not a
    // check, so the rescan it asks for must check member 0 again even if
    // the error came less than minHeartbeatFrequencyMS before the rescan.
    let sim = replica_set(&[Role::Primary, Role::Secondary]);
    let client = client(&sim.seed_uri(&[0, 1]));
    let collection = fresh_collection("reelected");
    insert(&client, &collection, doc! { "_id": 1 }).expect("first insert");

    sim.step_down(0);
    let error = insert(&client, &collection, doc! { "_id": 2 }).expect_err("stepped down");
    assert_eq!(error.code(), Some(10107), "{error}");
    // Re-elected before the driver looks again.
    sim.elect(0);

    let hellos_before = sim.hellos(0);
    insert(&client, &collection, doc! { "_id": 3 }).expect("insert on the re-elected primary");
    assert_eq!(
        sim.hellos(0),
        hellos_before + 1,
        "the rescan skipped member 0"
    );
    assert_eq!(count(&sim, 0, "insert"), 3);
    assert_eq!(
        find_on_primary(&client, &collection),
        vec![doc! { "_id": 1 }, doc! { "_id": 3 }]
    );
}

#[test]
fn a_closed_socket_kept_after_a_state_change_error_does_not_fail_the_check() {
    // NotWritablePrimary from a 4.2+ server keeps the socket while the
    // server becomes Unknown. If the server then closes that socket (a
    // restart), the rescan must open a new one rather than fail the check
    // on the dead one and put a healthy server in its 5 s cooldown.
    let sim = replica_set(&[Role::Primary, Role::Secondary]);
    let client = client(&sim.seed_uri(&[0, 1]));
    let collection = fresh_collection("restarted");
    insert(&client, &collection, doc! { "_id": 1 }).expect("first insert");

    sim.step_down(0);
    let error = insert(&client, &collection, doc! { "_id": 2 }).expect_err("stepped down");
    assert_eq!(error.code(), Some(10107), "{error}");
    sim.restart_member(0);
    sim.elect(1);
    assert!(wait_until(Duration::from_secs(2), || sim
        .open_connections(0)
        == 0));

    insert(&client, &collection, doc! { "_id": 3 }).expect("insert on the new primary");
    assert_eq!(count(&sim, 1, "insert"), 1);
    assert_eq!(
        sim.connections(0),
        2,
        "the rescan opened a new socket to member 0"
    );

    // Member 0 is a healthy secondary now, and known as one.
    let secondary = SelectionCriteria::ReadPreference(ReadPreference::secondary(None));
    let found = find_with(&client, &collection, secondary).expect("read from member 0");
    assert_eq!(found, vec![doc! { "_id": 1 }, doc! { "_id": 3 }]);
    assert_eq!(count(&sim, 0, "find"), 1);
}

#[test]
fn try_once_without_a_primary_fails_after_one_scan_naming_the_servers() {
    let sim = replica_set(&[Role::Secondary, Role::Secondary]);
    let client = client(&sim.seed_uri(&[0, 1]));

    let started = Instant::now();
    let error = insert(&client, &fresh_collection("tryonce"), doc! { "_id": 1 })
        .expect_err("no primary to write to");
    let elapsed = started.elapsed();

    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    let message = error.to_string();
    for i in 0..2 {
        assert!(message.contains(&sim.address(i)), "{message}");
        assert_eq!(sim.hellos(i), 1, "member {i}: exactly one scan");
        assert_eq!(count(&sim, i, "insert"), 0);
    }
    assert!(message.contains("RSSecondary"), "{message}");
    assert!(
        elapsed < Duration::from_millis(400),
        "one scan, no rescan, took {elapsed:?}"
    );
}

#[test]
fn without_try_once_a_write_waits_for_a_primary_to_appear() {
    let sim = replica_set(&[Role::Secondary, Role::Secondary]);
    let uri = format!(
        "{}&serverSelectionTryOnce=false&serverSelectionTimeoutMS=5000",
        sim.seed_uri(&[0, 1])
    );
    let client = client(&uri);
    let collection = fresh_collection("waits");

    let started = Instant::now();
    let outcome = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1000));
            sim.elect(1);
        });
        insert(&client, &collection, doc! { "_id": 1 })
    });
    let elapsed = started.elapsed();

    outcome.expect("the write waits for the election");
    assert!(
        elapsed >= Duration::from_millis(900),
        "succeeded after {elapsed:?}, before there was a primary"
    );
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert_eq!(count(&sim, 1, "insert"), 1);
    assert_eq!(count(&sim, 0, "insert"), 0);
    // Rescans were spaced by minHeartbeatFrequencyMS, not a busy loop.
    assert!(
        sim.hellos(0) <= 5,
        "{} checks in {elapsed:?}",
        sim.hellos(0)
    );
    assert_eq!(
        find_on_primary(&client, &collection),
        vec![doc! { "_id": 1 }]
    );
}

#[test]
fn a_secondary_read_with_a_tag_set_goes_to_the_tagged_member() {
    let sim = replica_set(&[Role::Primary, Role::Secondary, Role::Secondary]);
    sim.set_tags(1, doc! { "dc": "west" });
    sim.set_tags(2, doc! { "dc": "east" });
    let client = client(&sim.seed_uri(&[0]));
    let collection = fresh_collection("tags");
    insert(&client, &collection, doc! { "_id": 1, "x": "tagged" }).expect("insert");

    let read_preference = ReadPreference::secondary(
        ReadPreferenceOptions::builder()
            .tag_sets(vec![tag_set(&[("dc", "east")])])
            .build(),
    );
    for _ in 0..5 {
        let found = find_with(
            &client,
            &collection,
            SelectionCriteria::ReadPreference(read_preference.clone()),
        )
        .expect("tagged secondary read");
        // Every member forwards to the same server, so the data is there.
        assert_eq!(found, vec![doc! { "_id": 1, "x": "tagged" }]);
    }

    assert_eq!(count(&sim, 2, "find"), 5, "{:?}", sim.commands(2));
    assert_eq!(count(&sim, 1, "find"), 0, "{:?}", sim.commands(1));
    assert_eq!(count(&sim, 0, "find"), 0, "{:?}", sim.commands(0));
    for find in received(&sim, 2, "find") {
        assert_eq!(
            find.get_document("$readPreference").ok(),
            Some(&doc! { "mode": "secondary", "tags": [{ "dc": "east" }] }),
            "{find}"
        );
    }
}

#[test]
fn two_mongos_routers_share_reads_inside_the_latency_window() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    // A generous window: on a loaded test machine loopback round trips
    // vary by milliseconds, and the point is that both are in it.
    let client = client(&format!("{}?localThresholdMS=1000", sim.seed_uri(&[0, 1])));
    let collection = fresh_collection("mongos");
    insert(&client, &collection, doc! { "_id": 1 }).expect("insert");

    for _ in 0..40 {
        let found = find_with(&client, &collection, ReadPreference::Primary.into())
            .expect("read through a router");
        assert_eq!(found, vec![doc! { "_id": 1 }]);
    }
    let (first, second) = (count(&sim, 0, "find"), count(&sim, 1, "find"));
    assert_eq!(first + second, 40);
    assert!(first >= 5 && second >= 5, "reads split {first}/{second}");
    // Mode primary is not sent to a mongos.
    for i in 0..2 {
        for find in received(&sim, i, "find") {
            assert!(!find.contains_key("$readPreference"), "{find}");
        }
    }
}

#[test]
fn a_router_that_went_down_is_avoided_without_failing_reads() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    let (client, recorder) =
        recorded_client(&format!("{}?localThresholdMS=1000", sim.seed_uri(&[0, 1])));
    let collection = fresh_collection("router_down");
    insert(&client, &collection, doc! { "_id": 1 }).expect("insert");

    sim.refuse_connections(1, true);
    sim.drop_connections(1);
    assert!(wait_until(Duration::from_secs(2), || sim
        .open_connections(1)
        == 0));
    std::thread::sleep(support::sim::UNTIL_IDLE);
    let down = sim.address(1);
    // Reads pick either router until one tries router 1, fails to connect
    // and selects again: none of them fails.
    let mut reads = 0;
    while !saw_unknown(&recorder, &down) {
        reads += 1;
        assert!(reads <= 30, "no read ever tried router 1");
        let found = find_with(&client, &collection, ReadPreference::Primary.into())
            .expect("a read while router 1 is down");
        assert_eq!(found, vec![doc! { "_id": 1 }]);
    }

    // Router 1 is back, but in its cooldown: no read goes there or tries
    // to connect, and none waits.
    sim.refuse_connections(1, false);
    let finds_before = count(&sim, 0, "find");
    let started = Instant::now();
    for _ in 0..10 {
        find_with(&client, &collection, ReadPreference::Primary.into()).expect("read");
    }
    let elapsed = started.elapsed();
    assert_eq!(count(&sim, 0, "find"), finds_before + 10);
    assert_eq!(
        sim.connections(1),
        1,
        "router 1 was tried during its cooldown"
    );
    assert!(
        elapsed < Duration::from_millis(400),
        "10 reads took {elapsed:?}"
    );
}

/// Whether an SDAM event marked the server at `address` Unknown.
fn saw_unknown(recorder: &Recorder, address: &str) -> bool {
    recorder.sdam().iter().any(|e| {
        matches!(e, SdamEvent::ServerDescriptionChanged(e)
            if e.new_description.server_type == ServerType::Unknown
                && e.address.to_string() == address)
    })
}

#[test]
fn a_router_outside_the_latency_window_gets_no_reads() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    sim.delay_replies(1, Duration::from_millis(80));
    let client = client(&format!("{}?localThresholdMS=15", sim.seed_uri(&[0, 1])));
    let collection = fresh_collection("slow_mongos");

    for _ in 0..10 {
        find_with(&client, &collection, ReadPreference::Primary.into())
            .expect("read through the fast router");
    }
    assert_eq!(count(&sim, 0, "find"), 10);
    assert_eq!(count(&sim, 1, "find"), 0, "the slow router was selected");
    assert_eq!(sim.hellos(1), 1, "the slow router was checked once");
}

#[test]
fn a_direct_connection_to_a_secondary_reads_with_primary_preferred() {
    let sim = replica_set(&[Role::Primary, Role::Secondary]);
    let seeding = client(&sim.seed_uri(&[0]));
    let collection = fresh_collection("direct");
    insert(&seeding, &collection, doc! { "_id": 1 }).expect("insert via the primary");
    sim.reset_observations();

    let direct = client(&format!(
        "mongodb://{}/?directConnection=true",
        sim.address(1)
    ));
    // The default read preference (primary) reaches a secondary in a Single
    // topology: the simulator refuses the read unless secondaryOk is sent.
    let found = find_on_primary(&direct, &collection);
    assert_eq!(found, vec![doc! { "_id": 1 }]);

    let finds = received(&sim, 1, "find");
    assert_eq!(finds.len(), 1, "{:?}", sim.commands(1));
    assert_eq!(
        finds[0].get_document("$readPreference").ok(),
        Some(&doc! { "mode": "primaryPreferred" }),
        "{}",
        finds[0]
    );
    assert_eq!(
        sim.connections(0),
        0,
        "a direct connection discovers nothing"
    );

    let error = insert(&direct, &collection, doc! { "_id": 2 })
        .expect_err("a secondary refuses writes even when connected directly");
    assert_eq!(error.code(), Some(10107), "{error}");
}

#[test]
fn an_application_server_selector_narrows_the_choice() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    let options = ClientOptions::parse(format!("{}&localThresholdMS=1000", sim.seed_uri(&[0, 1])))
        .run()
        .unwrap();
    let chosen = sim.address(1);
    let client = Client::builder(options)
        .server_selector(move |servers| {
            servers
                .into_iter()
                .filter(|s| s.address.to_string() == chosen)
                .collect()
        })
        .build()
        .unwrap();
    let collection = fresh_collection("selector");
    for _ in 0..10 {
        find_with(
            &client,
            &collection,
            SelectionCriteria::ReadPreference(ReadPreference::nearest(None)),
        )
        .unwrap();
    }
    assert_eq!(count(&sim, 0, "find"), 0);
    assert_eq!(count(&sim, 1, "find"), 10);
}

#[test]
fn a_server_too_old_for_the_driver_gives_the_compatibility_error() {
    let sim = Simulator::standalone(TestServer::shared_standalone());
    sim.set_hello_extra(0, doc! { "maxWireVersion": 6 });
    let error = client(&sim.seed_uri(&[0]))
        .database("compat")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap_err();
    match error.kind() {
        ErrorKind::IncompatibleServer { message } => {
            assert!(message.contains("wire version 6"), "{message}");
            assert!(message.contains("4.2"), "{message}");
        }
        other => panic!("expected an incompatibility error, got {other:?}"),
    }
    assert_eq!(
        count(&sim, 0, "ping"),
        0,
        "nothing is sent to an incompatible server"
    );
}

/// The official `SelectionCriteria::Predicate`: an operation's predicate
/// over `ServerInfo` really narrows selection (every read lands on the one
/// member it accepts, sent as `primaryPreferred`), a client's default
/// predicate applies to reads that set none, and a predicate that accepts
/// nothing fails selection.
#[test]
fn a_predicate_chooses_the_server() {
    use mongo_inline::options::SelectionCriteria;
    use mongo_inline::{ServerInfo, ServerType};
    use std::sync::Arc;

    let sim = replica_set(&[Role::Primary, Role::Secondary, Role::Secondary]);
    let uri = format!(
        "{}&localThresholdMS=1000&serverSelectionTimeoutMS=300",
        sim.seed_uri(&[0, 1, 2])
    );
    let collection = fresh_collection("predicate");
    let client = client(&uri);
    insert(&client, &collection, doc! { "_id": 1 }).expect("insert");
    let coll = client.database(DB).collection::<Document>(&collection);

    let member_2 = sim.address(2);
    let only_2 = SelectionCriteria::Predicate(Arc::new(move |server: &ServerInfo| {
        server.address().to_string() == member_2 && server.server_type() == ServerType::RsSecondary
    }));
    for _ in 0..6 {
        let found: Vec<Document> = coll
            .find(doc! {})
            .selection_criteria(only_2.clone())
            .run()
            .unwrap()
            .collect::<mongo_inline::Result<_>>()
            .unwrap();
        assert_eq!(found, vec![doc! { "_id": 1 }]);
    }
    assert_eq!(count(&sim, 0, "find") + count(&sim, 1, "find"), 0);
    let finds = received(&sim, 2, "find");
    assert_eq!(finds.len(), 6);
    assert_eq!(
        finds[0].get_document("$readPreference").ok(),
        Some(&doc! { "mode": "primaryPreferred" })
    );

    let none = SelectionCriteria::Predicate(Arc::new(|_: &ServerInfo| false));
    let error = coll
        .count_documents(doc! {})
        .selection_criteria(none)
        .run()
        .expect_err("no server is acceptable");
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );

    let mut options = ClientOptions::parse(&uri).run().unwrap();
    let member_1 = sim.address(1);
    options.selection_criteria = Some(SelectionCriteria::Predicate(Arc::new(
        move |server: &ServerInfo| server.address().to_string() == member_1,
    )));
    let by_default = Client::with_options(options).unwrap();
    let coll = by_default.database(DB).collection::<Document>(&collection);
    for _ in 0..4 {
        assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 1);
    }
    assert_eq!(count(&sim, 1, "aggregate"), 4);
    assert_eq!(count(&sim, 2, "aggregate"), 0);
}

/// A server that refuses connections is Unknown because of the refusal
/// itself: `ServerInfo::error()` (through `TopologyDescription::servers()`,
/// as a `TopologyDescriptionChanged` event carries it) is the I/O error the
/// check raised, the one the failed heartbeat reported, and the server's
/// changed description carries the same.
#[test]
fn a_refused_server_is_unknown_with_the_checks_io_error() {
    let port = support::server::free_port();
    let address = format!("127.0.0.1:{port}");
    let options = ClientOptions::parse(format!(
        "mongodb://{address}/?serverSelectionTimeoutMS=100&connectTimeoutMS=500"
    ))
    .run()
    .unwrap();
    let recorder = std::sync::Arc::new(Recorder::default());
    let client = recorder.client_for(options).unwrap();
    let failed = client
        .database(DB)
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("nothing listens");
    assert!(
        matches!(failed.kind(), ErrorKind::ServerSelection { .. }),
        "{failed}"
    );

    let events = recorder.sdam();
    let heartbeat_failure = events
        .iter()
        .find_map(|e| match e {
            SdamEvent::ServerHeartbeatFailed(e) => Some(e.failure.to_string()),
            _ => None,
        })
        .expect("a failed heartbeat");
    let topology = events
        .iter()
        .rev()
        .find_map(|e| match e {
            SdamEvent::TopologyDescriptionChanged(e) => Some(e.new_description.clone()),
            _ => None,
        })
        .expect("a topology change");
    let servers = topology.servers();
    let (_, server) = servers
        .iter()
        .find(|(a, _)| a.to_string() == address)
        .expect("the seed");
    assert_eq!(server.server_type(), ServerType::Unknown);
    let error: &mongo_inline::error::Error = server.error().expect("the refusal");
    assert!(matches!(*error.kind, ErrorKind::Io(_)), "{error:?}");
    assert!(error.is_network_error());
    assert_eq!(error.to_string(), heartbeat_failure);

    let changed = events
        .iter()
        .find_map(|e| match e {
            SdamEvent::ServerDescriptionChanged(e) => Some(e.new_description.clone()),
            _ => None,
        })
        .expect("the server's change");
    let error = changed.error().expect("the refusal");
    assert!(matches!(*error.kind, ErrorKind::Io(_)), "{error:?}");
}
