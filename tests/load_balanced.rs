//! Load-balanced mode end to end, on the simulator's load balancer: it
//! hands each new TCP connection to the next backend in turn and answers
//! the handshake with that backend's `serviceId`, so which service a socket
//! reached is visible in the command events.
//!
//! What the load-balancer spec asks of a single-threaded driver: no
//! monitoring (one hello, the handshake, and no heartbeat events), the
//! exact SDAM event sequence, the handshake's `serviceId` requirement, one
//! socket for everything, cursors and transactions pinned to that socket
//! and never resumed on a replacement, per-service error handling that
//! never marks the load balancer Unknown, sessions always supported, and
//! `serviceId` in command events.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{doc, Bson, Document};
use mongo_inline::event::command::CommandEvent;
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::event::TopologyDescription;
use mongo_inline::options::FindOptions;
use mongo_inline::options::ReadPreference;
use mongo_inline::Collection;
use mongo_inline::{Client, ErrorKind};
use support::events::{recorded_client, Recorder};
use support::server::TestServer;
use support::sim::Simulator;

const DB: &str = "load_balanced";
const NO_SERVICE_ID: &str =
    "Driver attempted to initialize in load balancing mode, but the server does not support this mode.";

/// A load balancer in front of two "services" (both forward to the shared
/// replica set, so data is the same; the `serviceId`s differ).
fn load_balancer() -> Simulator {
    let server = TestServer::shared();
    Simulator::load_balancer(&[server, server])
}

fn lb_uri(sim: &Simulator, options: &str) -> String {
    let uri = sim.seed_uri(&[0]);
    assert!(uri.ends_with("?loadBalanced=true"), "{uri}");
    if options.is_empty() {
        uri
    } else {
        format!("{uri}&{options}")
    }
}

/// A collection name no other test (or earlier run) uses.
fn fresh(prefix: &str) -> String {
    format!("{prefix}_{}", ObjectId::new())
}

/// `(kind, command name, serviceId)` of every command event, in order.
fn command_log(recorder: &Recorder) -> Vec<(&'static str, String, Option<ObjectId>)> {
    recorder
        .commands()
        .into_iter()
        .map(|e| match e {
            CommandEvent::Started(e) => ("started", e.command_name, e.service_id),
            CommandEvent::Succeeded(e) => ("succeeded", e.command_name, e.service_id),
            CommandEvent::Failed(e) => ("failed", e.command_name, e.service_id),
            other => panic!("unexpected command event {other:?}"),
        })
        .collect()
}

fn collection(client: &Client, name: &str) -> Collection<Document> {
    client.database(DB).collection(name)
}

/// A topology as `Type[address:ServerType, ...]`.
fn topology(description: &TopologyDescription) -> String {
    let servers: Vec<String> = description
        .servers
        .values()
        .map(|s| format!("{}:{:?}", s.address, s.server_type))
        .collect();
    format!("{:?}[{}]", description.topology_type, servers.join(","))
}

/// Every SDAM event in a comparable form (all events of one client share
/// its topology id, checked here).
fn sdam_log(events: &[SdamEvent]) -> Vec<String> {
    let mut ids = Vec::new();
    let log = events
        .iter()
        .map(|event| match event {
            SdamEvent::TopologyOpening(e) => {
                ids.push(e.topology_id);
                "TopologyOpening".to_owned()
            }
            SdamEvent::TopologyDescriptionChanged(e) => {
                ids.push(e.topology_id);
                format!(
                    "TopologyDescriptionChanged {} -> {}",
                    topology(&e.previous_description),
                    topology(&e.new_description)
                )
            }
            SdamEvent::ServerOpening(e) => {
                ids.push(e.topology_id);
                format!("ServerOpening {}", e.address)
            }
            SdamEvent::ServerDescriptionChanged(e) => {
                ids.push(e.topology_id);
                format!(
                    "ServerDescriptionChanged {} {:?} -> {:?}",
                    e.address, e.previous_description.server_type, e.new_description.server_type
                )
            }
            SdamEvent::ServerClosed(e) => {
                ids.push(e.topology_id);
                format!("ServerClosed {}", e.address)
            }
            SdamEvent::TopologyClosed(e) => {
                ids.push(e.topology_id);
                "TopologyClosed".to_owned()
            }
            other => format!("unexpected {other:?}"),
        })
        .collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "topology ids {ids:?}");
    log
}

/// The SDAM events of a load-balanced topology's creation, and nothing else.
fn opening_log(lb: &str) -> Vec<String> {
    vec![
        "TopologyOpening".to_owned(),
        "TopologyDescriptionChanged Unknown[] -> LoadBalanced[LB:Unknown]".replace("LB", lb),
        format!("ServerOpening {lb}"),
        format!("ServerDescriptionChanged {lb} Unknown -> LoadBalancer"),
        "TopologyDescriptionChanged LoadBalanced[LB:Unknown] -> LoadBalanced[LB:LoadBalancer]"
            .replace("LB", lb),
    ]
}

fn insert_numbers(coll: &Collection<Document>, n: i32) {
    coll.insert_many((0..n).map(|i| doc! { "_id": i }))
        .run()
        .expect("insert_many");
}

fn ids(documents: &[Document]) -> Vec<i32> {
    documents
        .iter()
        .map(|d| d.get_i32("_id").expect("_id"))
        .collect()
}

/// Arms a fail point on `server` (a dedicated one: fail points are
/// server-wide, and the simulator's backend sockets carry no appName).
fn fail_point(server: &TestServer, times: i32, data: Document) {
    let admin = Client::with_uri_str(server.uri()).expect("admin client");
    admin
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": times },
            "data": data,
        })
        .run()
        .expect("configureFailPoint");
}

#[test]
fn the_sdam_events_are_the_spec_sequence_with_no_monitoring_and_close_closes() {
    let sim = load_balancer();
    let lb = sim.address(0);
    // A heartbeat due every 500 ms must still never cause a check.
    let (client, recorder) = recorded_client(&lb_uri(&sim, "heartbeatFrequencyMS=500"));
    assert_eq!(sdam_log(&recorder.sdam()), opening_log(&lb));
    assert_eq!(sim.connections(0), 0, "no I/O at construction");

    let coll = collection(&client, &fresh("events"));
    coll.insert_one(doc! { "_id": 1 }).run().expect("insert");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 1);
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping");

    // One socket, one hello (the handshake: OP_MSG `hello` with
    // loadBalanced: true), no monitoring.
    assert_eq!(sim.connections(0), 1);
    assert_eq!(sim.hellos(0), 1);
    let handshakes = sim.handshakes(0);
    assert_eq!(handshakes.len(), 1);
    assert_eq!(
        handshakes[0].keys().next().map(String::as_str),
        Some("hello")
    );
    assert_eq!(handshakes[0].get_bool("loadBalanced"), Ok(true));
    assert_eq!(sdam_log(&recorder.sdam()), opening_log(&lb));

    drop(coll);
    drop(client);
    let mut expected = opening_log(&lb);
    expected.extend([
        format!("ServerClosed {lb}"),
        format!("TopologyDescriptionChanged LoadBalanced[{lb}:LoadBalancer] -> Unknown[]"),
        "TopologyClosed".to_owned(),
    ]);
    assert_eq!(sdam_log(&recorder.sdam()), expected);
}

#[test]
fn the_load_balancer_description_keeps_every_field_unset() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping");
    let events = recorder.sdam();
    let Some(SdamEvent::TopologyDescriptionChanged(changed)) = events.last() else {
        panic!("opening events {events:?}");
    };
    let new = &changed.new_description;
    assert!(new.is_compatible());
    let server = new.servers.values().next().expect("the load balancer");
    assert_eq!(server.address.to_string(), sim.address(0));
    assert_eq!(server.max_wire_version, 0);
    assert_eq!(server.service_id, None);
    assert!(server.round_trip_time.is_none());
    assert!(server.error.is_none());
}

#[test]
fn a_handshake_without_service_id_fails_with_the_spec_message() {
    let server = TestServer::shared();
    let mongos = Simulator::mongos(server, 1);
    let standalone = Simulator::standalone(server);
    let no_service = load_balancer();
    no_service.set_hello_extra(0, doc! { "serviceId": Bson::Null });
    for sim in [&mongos, &standalone, &no_service] {
        let uri = format!("mongodb://{}/?loadBalanced=true", sim.address(0));
        let (client, recorder) = recorded_client(&uri);
        for attempt in 1..=2 {
            let error = client
                .database("admin")
                .run_command(doc! { "ping": 1 })
                .run()
                .expect_err("a non-load-balanced server must be refused");
            match error.kind() {
                ErrorKind::Client { message } => assert_eq!(message, NO_SERVICE_ID, "{uri}"),
                other => panic!("{uri}: wrong error kind {other:?}"),
            }
            // Each attempt opens a socket and fails its handshake: no
            // cooldown, and the socket is not kept.
            assert_eq!(sim.connections(0), attempt, "{uri}");
        }
        assert_eq!(sim.commands(0), vec!["hello", "hello"], "{uri}");
        // Handshake errors do not go through SDAM error handling.
        assert_eq!(
            sdam_log(&recorder.sdam()),
            opening_log(&sim.address(0)),
            "{uri}"
        );
    }
}

#[test]
fn errors_before_the_handshake_leave_no_cooldown_and_no_sdam_trace() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    sim.refuse_connections(0, true);
    let error = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("connection refused");
    assert!(error.is_network_error(), "{error}");
    sim.refuse_connections(0, false);
    // A monitored server would now cool down for 5 s; the load balancer is
    // never checked, so the next operation simply connects.
    let started = Instant::now();
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping after the refusal");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(sdam_log(&recorder.sdam()), opening_log(&sim.address(0)));
}

/// Getting a connection is part of the attempt (retryable reads and writes,
/// the backpressure pseudocode): a handshake the load balancer drops is
/// retried once for a retryable read or write, never more.
#[test]
fn a_failed_handshake_on_the_first_attempt_is_retried_once() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("connect_retry"));
    insert_numbers(&coll, 2);

    // A read. The socket is gone: selection replaces it, that handshake
    // is dropped, selection tries once more and that one is dropped too, so
    // the first attempt fails to get a connection. The retry connects.
    sim.drop_connections(0);
    std::thread::sleep(support::sim::UNTIL_IDLE);
    sim.fail_hellos(0, 2, support::sim::HelloFault::CloseConnection);
    recorder.clear_commands();
    let connections = sim.connections(0);
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 2);
    assert_eq!(sim.connections(0), connections + 3, "two failed, one used");
    assert_eq!(recorder.named("aggregate").len(), 1, "sent once");

    // A retryable write likewise.
    sim.drop_connections(0);
    std::thread::sleep(support::sim::UNTIL_IDLE);
    sim.fail_hellos(0, 2, support::sim::HelloFault::CloseConnection);
    coll.insert_one(doc! { "_id": 100 })
        .run()
        .expect("insert after a failed handshake");
    assert_eq!(coll.count_documents(doc! { "_id": 100 }).run().unwrap(), 1);

    // The retry's handshake dropped as well: the read fails with the
    // network error.
    sim.drop_connections(0);
    std::thread::sleep(support::sim::UNTIL_IDLE);
    sim.fail_hellos(0, 3, support::sim::HelloFault::CloseConnection);
    let error = coll
        .count_documents(doc! {})
        .run()
        .expect_err("one retry only");
    assert!(error.is_network_error(), "{error}");
    // All three faults were used: the next read connects at once.
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 3);
}

#[test]
fn one_socket_carries_everything_and_a_cursor_survives_interleaved_operations() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("interleaved"));
    insert_numbers(&coll, 10);
    let other = collection(&client, &fresh("other"));

    let cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2).sort(doc! { "_id": 1 }))
        .run()
        .expect("find");
    let mut seen = Vec::new();
    for document in cursor {
        seen.push(document.expect("next"));
        // Other operations between the batches use the same socket.
        other
            .insert_one(doc! { "n": seen.len() as i32 })
            .run()
            .expect("interleaved insert");
    }
    assert_eq!(ids(&seen), (0..10).collect::<Vec<_>>());
    assert_eq!(other.count_documents(doc! {}).run().expect("count"), 10);

    assert_eq!(sim.connections(0), 1);
    let service = sim.service_id(0, 0);
    let log = command_log(&recorder);
    assert!(log.iter().all(|(_, _, s)| *s == Some(service)), "{log:?}");
    let get_mores = recorder.named("getMore").len();
    assert!(get_mores >= 4, "{get_mores} getMores");
    // The server drained the cursor: nothing to kill.
    assert!(!sim.commands(0).contains(&"killCursors".to_owned()));
}

#[test]
fn service_id_is_in_started_succeeded_and_failed_events() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let db = client.database(DB);
    db.run_command(doc! { "ping": 1 }).run().expect("ping");
    db.run_command(doc! { "find": "c", "filter": 1 })
        .run()
        .expect_err("a filter must be a document");
    let service = Some(sim.service_id(0, 0));
    assert_eq!(
        command_log(&recorder),
        vec![
            ("started", "ping".to_owned(), service),
            ("succeeded", "ping".to_owned(), service),
            ("started", "find".to_owned(), service),
            ("failed", "find".to_owned(), service),
        ]
    );
}

#[test]
fn a_cursor_whose_socket_died_is_not_resumed_on_the_other_service() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("dead_cursor"));
    insert_numbers(&coll, 6);
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2).sort(doc! { "_id": 1 }))
        .run()
        .expect("find");
    assert_eq!(cursor.next().map(|d| d.is_ok()), Some(true));

    sim.drop_connections(0);
    std::thread::sleep(support::sim::UNTIL_IDLE);
    // Another operation replaces the socket; round robin sends the new one
    // to the other service.
    recorder.clear_commands();
    coll.insert_one(doc! { "_id": 100 })
        .run()
        .expect("insert on a new socket");
    assert_eq!(sim.connections(0), 2);
    let other_service = Some(sim.service_id(0, 1));
    assert_eq!(
        command_log(&recorder),
        vec![
            ("started", "insert".to_owned(), other_service),
            ("succeeded", "insert".to_owned(), other_service),
        ]
    );

    // The rest of the first batch is still there; the next batch is not.
    assert_eq!(cursor.next().map(|d| d.is_ok()), Some(true));
    let error = cursor
        .next()
        .expect("an error, not the end")
        .expect_err("the cursor's socket is gone");
    assert!(error.is_network_error(), "{error}");
    assert!(error.to_string().contains("pinned"), "{error}");
    assert!(cursor.next().is_none(), "a failed cursor stops");
    drop(cursor);
    // Neither a getMore nor a killCursors went anywhere.
    assert!(recorder.named("getMore").is_empty());
    assert!(recorder.named("killCursors").is_empty());
    assert_eq!(sim.connections(0), 2);
}

#[test]
fn a_get_more_network_error_leaves_the_cursor_pinned_and_its_drop_sends_nothing() {
    let server = TestServer::start();
    let sim = Simulator::load_balancer(&[&server, &server]);
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("getmore_error"));
    insert_numbers(&coll, 6);
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2).sort(doc! { "_id": 1 }))
        .run()
        .expect("find");
    fail_point(
        &server,
        1,
        doc! { "failCommands": ["getMore"], "closeConnection": true },
    );
    let batch: Vec<_> = cursor.by_ref().take(2).collect();
    assert!(batch.iter().all(|d| d.is_ok()));
    let error = cursor
        .next()
        .expect("an error, not the end")
        .expect_err("the getMore's socket closed");
    assert!(error.is_network_error(), "{error}");
    assert_ne!(cursor.id(), 0, "the server's cursor was never closed");
    drop(cursor);
    assert_eq!(recorder.named("getMore").len(), 1);
    assert!(recorder.named("killCursors").is_empty());
    assert!(!sim.commands(0).contains(&"killCursors".to_owned()));
    // The client goes on, on a new socket (the other service).
    recorder.clear_commands();
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 6);
    assert_eq!(sim.connections(0), 2);
    assert!(command_log(&recorder)
        .iter()
        .all(|(_, _, s)| *s == Some(sim.service_id(0, 1))));
}

#[test]
fn closing_a_live_cursor_kills_it_on_its_own_socket() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("kill"));
    insert_numbers(&coll, 6);
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2))
        .run()
        .expect("find");
    assert!(cursor.next().is_some());
    let id = cursor.id();
    assert_ne!(id, 0);
    drop(cursor);
    let kills = recorder.named("killCursors");
    assert_eq!(kills.len(), 1);
    assert_eq!(kills[0].get_array("cursors"), Ok(&vec![Bson::Int64(id)]));
    assert_eq!(sim.connections(0), 1);
}

#[test]
fn a_transaction_whose_socket_died_fails_and_does_not_continue_on_the_other_service() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let name = fresh("txn");
    let coll = collection(&client, &name);
    // Create the collection outside the transaction.
    coll.insert_one(doc! { "_id": 0 }).run().expect("insert");

    let mut session = client.start_session().run().expect("session");
    session.start_transaction().run().expect("start");
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .expect("first insert in the transaction");
    sim.drop_connections(0);
    // An operation outside the transaction replaces the socket: round
    // robin sends the new one to the other service.
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 1);
    assert_eq!(sim.connections(0), 2);
    recorder.clear_commands();
    let error = coll
        .insert_one(doc! { "_id": 2 })
        .session(&mut session)
        .run()
        .expect_err("the transaction's socket is gone");
    assert!(error.to_string().contains("pinned"), "{error}");
    // Nothing of the transaction reached the other service.
    assert!(
        recorder.named("insert").is_empty(),
        "{:?}",
        command_log(&recorder)
    );
    let _ = session.abort_transaction().run();
    drop(session);

    // The transaction never committed: only the document written outside it.
    let found: Vec<Document> = coll
        .find(doc! {})
        .run()
        .expect("find")
        .collect::<mongo_inline::Result<_>>()
        .expect("documents");
    assert_eq!(ids(&found), vec![0]);
}

#[test]
fn a_transaction_stays_on_its_socket_and_commits() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("txn_ok"));
    coll.insert_one(doc! { "_id": 0 }).run().expect("insert");
    let mut session = client.start_session().run().expect("session");
    session.start_transaction().run().expect("start");
    for id in 1..=3 {
        coll.insert_one(doc! { "_id": id })
            .session(&mut session)
            .run()
            .expect("insert in the transaction");
        // Operations outside the transaction share the one socket.
        assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 1);
    }
    session.commit_transaction().run().expect("commit");
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 4);
    assert_eq!(sim.connections(0), 1);
    let service = Some(sim.service_id(0, 0));
    assert!(command_log(&recorder).iter().all(|(_, _, s)| *s == service));
}

#[test]
fn a_state_change_error_closes_only_that_services_socket_and_never_marks_unknown() {
    let server = TestServer::start();
    let sim = Simulator::load_balancer(&[&server, &server]);
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("state_change"));
    coll.insert_one(doc! { "_id": 1 }).run().expect("insert");
    let (a, b) = (Some(sim.service_id(0, 0)), Some(sim.service_id(0, 1)));

    // ShutdownInProgress: the service's sockets must go; the retry opens
    // a new socket, which reaches the other service.
    fail_point(
        &server,
        1,
        doc! { "failCommands": ["aggregate"], "errorCode": 91 },
    );
    recorder.clear_commands();
    assert_eq!(
        coll.count_documents(doc! {}).run().expect("retried read"),
        1
    );
    assert_eq!(
        command_log(&recorder),
        vec![
            ("started", "aggregate".to_owned(), a),
            ("failed", "aggregate".to_owned(), a),
            ("started", "aggregate".to_owned(), b),
            ("succeeded", "aggregate".to_owned(), b),
        ],
        "count_documents runs an aggregate"
    );
    assert_eq!(sim.connections(0), 2);

    // NotWritablePrimary from a 4.2+ service (the handshake said so) keeps
    // the socket; the load balancer is still not Unknown.
    fail_point(
        &server,
        1,
        doc! { "failCommands": ["insert"], "errorCode": 10107, "errorLabels": ["RetryableWriteError"] },
    );
    coll.insert_one(doc! { "_id": 2 })
        .run()
        .expect("retried write");
    assert_eq!(sim.connections(0), 2);

    // The new service's socket is not "stale" because service A's
    // generation moved on: its own shutdown error closes it in turn.
    fail_point(
        &server,
        1,
        doc! { "failCommands": ["aggregate"], "errorCode": 91 },
    );
    recorder.clear_commands();
    assert_eq!(
        coll.count_documents(doc! {}).run().expect("retried read"),
        2
    );
    assert_eq!(sim.connections(0), 3);
    let log = command_log(&recorder);
    assert_eq!(log[1], ("failed", "aggregate".to_owned(), b));
    assert_eq!(log[3], ("succeeded", "aggregate".to_owned(), a));

    assert_eq!(sdam_log(&recorder.sdam()), opening_log(&sim.address(0)));
}

#[test]
fn sessions_are_supported_without_logical_session_timeout_and_commands_are_decorated() {
    let sim = load_balancer();
    // A load balancer's reply decides nothing about sessions.
    sim.set_hello_extra(0, doc! { "logicalSessionTimeoutMinutes": Bson::Null });
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("sessions"));
    coll.insert_one(doc! { "_id": 1 }).run().expect("insert");
    coll.insert_one(doc! { "_id": 2 }).run().expect("insert");
    let inserts = recorder.named("insert");
    assert_eq!(inserts.len(), 2);
    for insert in &inserts {
        assert!(insert.contains_key("lsid"), "implicit session: {insert}");
        assert!(
            insert.contains_key("txnNumber"),
            "retryable write: {insert}"
        );
    }
    // The implicit session went back to the pool and was reused.
    assert_eq!(inserts[0].get("lsid"), inserts[1].get("lsid"));
    // The wire version comes from the handshake, not from the (empty)
    // load balancer description: the cluster time is gossiped.
    assert!(
        inserts[1].contains_key("$clusterTime"),
        "cluster time: {}",
        inserts[1]
    );

    let mut session = client.start_session().run().expect("explicit session");
    coll.insert_one(doc! { "_id": 3 })
        .session(&mut session)
        .run()
        .expect("insert in an explicit session");
    let last = recorder.named("insert").pop().expect("insert");
    assert_eq!(last.get_document("lsid").ok(), Some(session.id()));
}

#[test]
fn read_preference_is_sent_as_to_a_mongos() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("read_pref"));
    coll.insert_one(doc! { "_id": 1 }).run().expect("insert");
    let options = mongo_inline::options::CollectionOptions::builder()
        .selection_criteria(mongo_inline::options::SelectionCriteria::from(
            ReadPreference::secondary_preferred(None),
        ))
        .build();
    let secondary = client
        .database(DB)
        .collection_with_options::<Document>(coll.name(), options);
    let found: Vec<Document> = secondary
        .find(doc! {})
        .run()
        .expect("find")
        .collect::<mongo_inline::Result<_>>()
        .expect("documents");
    assert_eq!(ids(&found), vec![1]);
    let finds = recorder.named("find");
    assert_eq!(
        finds[0].get_document("$readPreference"),
        Ok(&doc! { "mode": "secondaryPreferred" })
    );
}

#[test]
fn uri_validation_errors_reach_the_caller() {
    for (uri, needle) in [
        ("mongodb://a:1,b:2/?loadBalanced=true", "multiple hosts"),
        (
            "mongodb://a:1/?loadBalanced=true&replicaSet=rs",
            "replicaSet",
        ),
        (
            "mongodb://a:1/?loadBalanced=true&directConnection=true",
            "directConnection",
        ),
    ] {
        let error = Client::with_uri_str(uri).expect_err(uri);
        assert!(
            matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
            "{uri}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("loadBalanced") && message.contains(needle),
            "{uri}: {message}"
        );
    }
    assert!(
        Client::with_uri_str("mongodb://a:1/?loadBalanced=true&directConnection=false").is_ok()
    );
}

#[test]
fn with_transaction_retries_a_transaction_whose_pinned_socket_died() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("txn_retry"));
    coll.insert_one(doc! { "_id": 0 }).run().expect("insert");
    let mut session = client.start_session().run().expect("session");
    let mut attempts = 0;
    let mut first_error = None;
    session
        .start_transaction()
        .and_run(|s| {
            attempts += 1;
            coll.insert_one(doc! { "_id": attempts }).session(s).run()?;
            if attempts == 1 {
                // The socket dies and an operation outside the transaction
                // replaces it: the transaction's socket is gone for good.
                sim.drop_connections(0);
                coll.count_documents(doc! {}).run()?;
            }
            let second = coll
                .insert_one(doc! { "_id": 10 + attempts })
                .session(s)
                .run();
            if let Err(error) = &second {
                first_error = Some(error.clone());
            }
            second.map(|_| ())
        })
        .expect("with_transaction retries on TransientTransactionError");
    let error = first_error.expect("the first attempt failed");
    assert!(
        error.contains_label("TransientTransactionError"),
        "labels of {error}: {:?}",
        error.labels()
    );
    assert_eq!(attempts, 2);
    let found: Vec<Document> = coll
        .find(doc! {})
        .run()
        .expect("find")
        .collect::<mongo_inline::Result<_>>()
        .expect("documents");
    assert_eq!(ids(&found), vec![0, 2, 12]);
    assert_eq!(recorder.named("commitTransaction").len(), 1);
}

#[test]
fn a_commit_whose_socket_closed_is_retried_on_a_new_socket() {
    let server = TestServer::start();
    let sim = Simulator::load_balancer(&[&server, &server]);
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("commit_retry"));
    coll.insert_one(doc! { "_id": 0 }).run().expect("insert");
    let mut session = client.start_session().run().expect("session");
    session.start_transaction().run().expect("start");
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .expect("insert in the transaction");
    fail_point(
        &server,
        1,
        doc! { "failCommands": ["commitTransaction"], "closeConnection": true },
    );
    session
        .commit_transaction()
        .run()
        .expect("the commit's automatic retry succeeds");
    let commits = recorder.named("commitTransaction");
    assert_eq!(commits.len(), 2, "{:?}", command_log(&recorder));
    // The retry upgrades the write concern, as the transactions spec asks.
    assert_eq!(
        commits[1]
            .get_document("writeConcern")
            .and_then(|wc| wc.get_str("w")),
        Ok("majority")
    );
    assert_eq!(sim.connections(0), 2, "the retry went over a new socket");
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 2);
}

#[test]
fn a_second_concurrent_transaction_on_the_one_socket_is_refused() {
    let sim = load_balancer();
    let (client, recorder) = recorded_client(&lb_uri(&sim, ""));
    let coll = collection(&client, &fresh("txn_concurrent"));
    coll.insert_one(doc! { "_id": 0 }).run().expect("insert");
    let mut first = client.start_session().run().expect("session");
    let mut second = client.start_session().run().expect("session");
    first.start_transaction().run().expect("start");
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut first)
        .run()
        .expect("the first transaction");
    second.start_transaction().run().expect("start");
    recorder.clear_commands();
    let error = coll
        .insert_one(doc! { "_id": 2 })
        .session(&mut second)
        .run()
        .expect_err("one transaction per load-balanced socket");
    assert!(
        error.to_string().contains("one transaction at a time"),
        "{error}"
    );
    assert!(recorder.named("insert").is_empty(), "nothing was sent");
    first.commit_transaction().run().expect("the first commits");
    // The socket is free again.
    coll.insert_one(doc! { "_id": 2 })
        .session(&mut second)
        .run()
        .expect("the second transaction, after the first");
    second
        .commit_transaction()
        .run()
        .expect("the second commits");
    assert_eq!(coll.count_documents(doc! {}).run().expect("count"), 3);
}
