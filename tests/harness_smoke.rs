//! Proves the test harness works end to end without the driver: a real
//! SecantusDB answers raw wire messages, and the topology simulator presents
//! scripted roles while moving real data through to it.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use support::raw::{is_ok, RawConnection, QUERY_FLAG_SECONDARY_OK};
use support::server::{ServerOptions, TestServer};
use support::sim::{wait_until, HelloFault, Role, Simulator};

fn first_batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap_or_else(|e| panic!("no cursor.firstBatch in {reply}: {e}"))
        .iter()
        .filter_map(|b| b.as_document().cloned())
        .collect()
}

fn insert(conn: &mut RawConnection, collection: &str, docs: Vec<Document>) -> Document {
    conn.command_with_sequences(
        "harness",
        doc! { "insert": collection },
        vec![("documents".to_owned(), docs)],
    )
    .expect("insert round trip")
}

fn code(reply: &Document) -> Option<i32> {
    reply.get_i32("code").ok()
}

#[test]
fn server_answers_raw_hello_insert_and_find() {
    let server = TestServer::start();
    let mut conn = server.raw_connection();

    let legacy = conn.legacy_hello().expect("legacy hello");
    assert!(is_ok(&legacy), "{legacy}");
    assert_eq!(legacy.get_bool("ismaster"), Ok(true));
    assert_eq!(legacy.get_str("setName"), Ok("secantus"));
    assert_eq!(
        legacy.get_str("me").ok(),
        Some(server.address().as_str()),
        "{legacy}"
    );

    let hello = conn.command("admin", doc! { "hello": 1 }).expect("hello");
    assert_eq!(hello.get_bool("isWritablePrimary"), Ok(true), "{hello}");

    let reply = insert(&mut conn, "smoke", vec![doc! { "_id": 1, "x": "one" }]);
    assert!(is_ok(&reply), "{reply}");
    assert_eq!(reply.get_i32("n"), Ok(1));

    let found = conn
        .command("harness", doc! { "find": "smoke", "filter": { "_id": 1 } })
        .expect("find");
    assert_eq!(first_batch(&found), vec![doc! { "_id": 1, "x": "one" }]);
    assert!(server.uri().ends_with("/?directConnection=true"));
}

#[test]
fn standalone_server_has_no_replica_set_fields() {
    let server = TestServer::start_standalone();
    let mut conn = server.raw_connection();
    let hello = conn.command("admin", doc! { "hello": 1 }).expect("hello");
    assert!(is_ok(&hello), "{hello}");
    assert!(!hello.contains_key("setName"), "{hello}");
    assert_eq!(server.uri(), format!("mongodb://{}/", server.address()));
}

#[test]
fn killed_server_restarts_on_the_same_port() {
    let mut server = TestServer::start_standalone();
    let port = server.port();
    server.kill();
    assert!(!server.is_running());
    assert!(
        TcpStream::connect(server.address()).is_err(),
        "killed server still accepts connections"
    );
    server.restart();
    assert_eq!(server.port(), port);
    let hello = server
        .raw_connection()
        .command("admin", doc! { "ping": 1 })
        .expect("ping after restart");
    assert!(is_ok(&hello), "{hello}");
}

#[test]
fn a_server_that_cannot_take_its_port_is_not_mistaken_for_the_one_there() {
    // Two tests handed the same port once shared one server and spent each
    // other's fail points: the second launcher took the first server's hello
    // for its own while its own server was still failing to bind.
    let holder = TestServer::start_standalone();
    let plain = ServerOptions {
        standalone: true,
        ..ServerOptions::default()
    };
    let tls = ServerOptions {
        standalone: true,
        extra_args: support::tls::tls_args(false),
    };
    for (kind, options) in [("plain", plain), ("TLS", tls)] {
        let started = TestServer::start_on(holder.port(), options);
        let error = started
            .map(|s| s.port())
            .expect_err(&format!("a {kind} server cannot listen on a taken port"));
        assert!(error.contains(&holder.port().to_string()), "{error}");
    }
    let reply = holder
        .raw_connection()
        .command("admin", doc! { "ping": 1 })
        .expect("the holder still answers");
    assert!(is_ok(&reply), "{reply}");
}

#[test]
fn shared_server_is_started_once() {
    let first = TestServer::shared();
    let second = TestServer::shared();
    assert_eq!(first.port(), second.port());
    let reply = first
        .raw_connection()
        .command("admin", doc! { "ping": 1 })
        .expect("ping");
    assert!(is_ok(&reply), "{reply}");
}

#[test]
fn simulated_replica_set_presents_roles_and_moves_real_data() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set(
        "rs0",
        server,
        &[Role::Primary, Role::Secondary, Role::Arbiter],
    );

    let mut primary = RawConnection::connect(&sim.address(0)).expect("connect primary");
    let hello = primary
        .command("admin", doc! { "hello": 1 })
        .expect("hello");
    assert_eq!(hello.get_str("setName"), Ok("rs0"));
    assert_eq!(hello.get_bool("isWritablePrimary"), Ok(true));
    assert_eq!(hello.get_str("me").ok(), Some(sim.address(0).as_str()));
    assert_eq!(hello.get_str("primary").ok(), Some(sim.address(0).as_str()));
    let hosts: Vec<Bson> = vec![sim.address(0).into(), sim.address(1).into()];
    assert_eq!(hello.get_array("hosts"), Ok(&hosts));
    assert_eq!(
        hello.get_array("arbiters"),
        Ok(&vec![Bson::from(sim.address(2))])
    );
    assert_eq!(hello.get_object_id("electionId"), Ok(sim.election_id()));
    assert_eq!(hello.get_i32("maxWireVersion"), Ok(27));

    let mut secondary = RawConnection::connect(&sim.address(1)).expect("connect secondary");
    let legacy = secondary.legacy_hello().expect("legacy hello");
    assert_eq!(legacy.get_bool("ismaster"), Ok(false), "{legacy}");
    assert_eq!(legacy.get_bool("secondary"), Ok(true), "{legacy}");
    assert_eq!(legacy.get_bool("helloOk"), Ok(true), "{legacy}");
    assert!(!legacy.contains_key("electionId"), "{legacy}");

    assert_eq!(sim.handshakes(0), vec![doc! { "hello": 1, "$db": "admin" }]);
    assert_eq!(
        sim.handshakes(1),
        vec![doc! { "isMaster": 1, "helloOk": true }]
    );

    let reply = insert(&mut primary, "sim_rs", vec![doc! { "_id": "via-primary" }]);
    assert!(is_ok(&reply), "{reply}");

    let read = doc! {
        "find": "sim_rs",
        "filter": { "_id": "via-primary" },
        "$readPreference": { "mode": "secondaryPreferred" },
    };
    let found = secondary
        .command("harness", read.clone())
        .expect("find on secondary");
    assert_eq!(first_batch(&found), vec![doc! { "_id": "via-primary" }]);

    let without_secondary_ok = secondary
        .command("harness", doc! { "find": "sim_rs" })
        .expect("find without secondaryOk");
    assert_eq!(code(&without_secondary_ok), Some(13435));

    let refused = insert(&mut secondary, "sim_rs", vec![doc! { "_id": "no" }]);
    assert_eq!(code(&refused), Some(10107), "{refused}");
    assert!(refused.contains_key("topologyVersion"));

    let legacy_read = secondary
        .legacy_command(doc! { "ping": 1 }, QUERY_FLAG_SECONDARY_OK)
        .expect("legacy ping is forwarded");
    assert!(is_ok(&legacy_read), "{legacy_read}");

    assert_eq!(sim.connections(0), 1);
    assert_eq!(sim.connections(1), 1);
    assert_eq!(sim.hellos(0), 1);
    assert_eq!(sim.hellos(1), 1);
    assert_eq!(sim.commands(0), vec!["hello", "insert"]);
    assert_eq!(
        sim.commands(1),
        vec!["isMaster", "find", "find", "insert", "ping"]
    );
    let received_insert = &sim.received(0)[1];
    assert_eq!(
        received_insert.get_array("documents"),
        Ok(&vec![Bson::Document(doc! { "_id": "via-primary" })])
    );
}

fn hello(sim: &Simulator, i: usize) -> Document {
    RawConnection::connect(&sim.address(i))
        .and_then(|mut c| c.command("admin", doc! { "hello": 1 }))
        .expect("hello")
}

#[test]
fn elections_and_reconfigs_change_hello() {
    let server = TestServer::shared();
    let mut sim = Simulator::replica_set("rs1", server, &[Role::Primary, Role::Secondary]);
    let before = hello(&sim, 1);
    let first_election = sim.election_id();

    sim.elect(1);
    let after = hello(&sim, 1);
    assert_eq!(after.get_bool("isWritablePrimary"), Ok(true));
    assert_ne!(after.get_object_id("electionId"), Ok(first_election));
    assert_eq!(after.get_str("primary").ok(), Some(sim.address(1).as_str()));
    assert_eq!(hello(&sim, 0).get_bool("secondary"), Ok(true));
    let counter = |d: &Document| {
        d.get_document("topologyVersion")
            .unwrap()
            .get_i64("counter")
    };
    assert!(counter(&after).unwrap() > counter(&before).unwrap());

    sim.step_down(1);
    assert!(!hello(&sim, 0).contains_key("primary"));

    sim.set_tags(0, doc! { "dc": "east" });
    let tagged = hello(&sim, 0);
    assert_eq!(tagged.get_document("tags"), Ok(&doc! { "dc": "east" }));
    assert_eq!(tagged.get_i64("setVersion"), Ok(2));

    let hidden = sim.add_member(Role::Hidden);
    let with_hidden = hello(&sim, hidden);
    assert_eq!(with_hidden.get_bool("hidden"), Ok(true));
    assert_eq!(with_hidden.get_array("hosts").map(Vec::len), Ok(2));

    sim.remove_member(1);
    let ghost = hello(&sim, 1);
    assert!(!ghost.contains_key("setName"), "{ghost}");
    assert_eq!(ghost.get_bool("isreplicaset"), Ok(true));
    assert_eq!(hello(&sim, 0).get_array("hosts").map(Vec::len), Ok(1));
}

#[test]
fn faults_refuse_drop_and_delay() {
    let server = TestServer::shared();
    let sim = Simulator::mongos(server, 2);

    let mut conn = RawConnection::connect(&sim.address(0)).expect("connect");
    let hello = conn.command("admin", doc! { "hello": 1 }).expect("hello");
    assert_eq!(hello.get_str("msg"), Ok("isdbgrid"));
    assert!(!hello.contains_key("setName"));

    sim.refuse_connections(1, true);
    assert!(TcpStream::connect(sim.address(1)).is_err());
    sim.refuse_connections(1, false);
    let mut reopened = RawConnection::connect(&sim.address(1)).expect("connect");
    // Served, so accepted and counted; refusing woke the blocked accept with
    // a connection of its own, which was closed unserved and not counted.
    reopened.command("admin", doc! { "ping": 1 }).expect("ping");
    assert_eq!(sim.connections(1), 1);

    assert_eq!(sim.open_connections(0), 1);
    sim.drop_connections(0);
    assert!(conn.command("admin", doc! { "ping": 1 }).is_err());

    sim.delay_replies(0, Duration::from_millis(200));
    let mut slow = RawConnection::connect(&sim.address(0)).expect("connect");
    let started = Instant::now();
    slow.command("admin", doc! { "ping": 1 }).expect("ping");
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(sim.connections(0), 2);
}

#[test]
fn awaitable_hello_returns_when_the_topology_changes() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set("rs2", server, &[Role::Primary, Role::Secondary]);
    let (process_id, counter) = sim.topology_version(1);
    let address = sim.address(1);
    let waiter = std::thread::spawn(move || {
        let mut conn = RawConnection::connect(&address).expect("connect");
        let started = Instant::now();
        let reply = conn
            .command(
                "admin",
                doc! {
                    "hello": 1,
                    "topologyVersion": { "processId": process_id, "counter": counter },
                    "maxAwaitTimeMS": 5_000,
                },
            )
            .expect("awaitable hello");
        (reply, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    sim.elect(1);
    let (reply, waited) = waiter.join().expect("waiter");
    assert_eq!(reply.get_bool("isWritablePrimary"), Ok(true));
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
}

#[test]
fn load_balancer_alternates_backends_and_reports_service_ids() {
    let first = TestServer::start_standalone();
    let second = TestServer::start_standalone();
    let sim = Simulator::load_balancer(&[&first, &second]);
    assert!(sim.seed_uri(&[0]).ends_with("?loadBalanced=true"));

    let mut service_ids = Vec::new();
    for n in 0..2 {
        let mut conn = RawConnection::connect(&sim.address(0)).expect("connect");
        let hello = conn
            .command("admin", doc! { "hello": 1, "loadBalanced": true })
            .expect("hello");
        assert_eq!(hello.get_str("msg"), Ok("isdbgrid"));
        service_ids.push(hello.get_object_id("serviceId").expect("serviceId"));
        let reply = insert(&mut conn, "lb", vec![doc! { "n": n }]);
        assert!(is_ok(&reply), "{reply}");
    }
    assert_eq!(
        service_ids,
        vec![sim.service_id(0, 0), sim.service_id(0, 1)]
    );

    // Each backend got exactly one of the two inserts.
    for server in [&first, &second] {
        let found = server
            .raw_connection()
            .command("harness", doc! { "find": "lb" })
            .expect("find");
        assert_eq!(first_batch(&found).len(), 1);
    }
}

#[test]
fn backend_fail_points_reach_the_client_through_the_simulator() {
    // A dedicated server: fail points are server-wide.
    let server = TestServer::start();
    let sim = Simulator::replica_set("rs3", &server, &[Role::Primary]);
    let mut conn = RawConnection::connect(&sim.address(0)).expect("connect");
    let armed = conn
        .command(
            "admin",
            doc! {
                "configureFailPoint": "failCommand",
                "mode": { "times": 2 },
                "data": { "failCommands": ["find"], "errorCode": 91, "errorLabels": ["RetryableWriteError"] },
            },
        )
        .expect("configureFailPoint");
    assert!(is_ok(&armed), "{armed}");
    let failed = conn
        .command("harness", doc! { "find": "fp" })
        .expect("find");
    assert_eq!(code(&failed), Some(91), "{failed}");
    assert_eq!(
        failed.get_array("errorLabels"),
        Ok(&vec![Bson::from("RetryableWriteError")])
    );

    conn.command(
        "admin",
        doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": { "failCommands": ["ping"], "closeConnection": true },
        },
    )
    .expect("configureFailPoint");
    assert!(conn.command("admin", doc! { "ping": 1 }).is_err());
    assert!(wait_until(Duration::from_secs(2), || sim
        .open_connections(0)
        == 0));
}

#[test]
fn injected_hello_faults_apply_in_order_then_stop() {
    let server = TestServer::shared();
    let sim = Simulator::replica_set("rs4", server, &[Role::Primary]);
    sim.fail_hellos(
        0,
        1,
        HelloFault::Error {
            code: 91,
            labels: vec!["SystemOverloadedError".to_owned()],
        },
    );
    sim.fail_hellos(0, 1, HelloFault::CloseConnection);

    let mut conn = RawConnection::connect(&sim.address(0)).expect("connect");
    let failed = conn.command("admin", doc! { "hello": 1 }).expect("hello");
    assert_eq!(code(&failed), Some(91), "{failed}");
    assert!(conn.command("admin", doc! { "hello": 1 }).is_err());

    let mut again = RawConnection::connect(&sim.address(0)).expect("connect");
    let hello = again.command("admin", doc! { "hello": 1 }).expect("hello");
    assert!(is_ok(&hello), "{hello}");
    assert_eq!(sim.hellos(0), 3);
}
