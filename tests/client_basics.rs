//! The foundation end to end: a client against a real SecantusDB, standalone
//! and as its one-member replica set, through `run_command`; what the
//! handshake sends; what a killed server does; the command-line tool.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::process::Command;
use std::time::Duration;

use bson::{doc, Document};
use mongo_inline::{Client, ErrorKind};

use support::server::TestServer;
use support::sim::Simulator;

fn first_batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .expect("a find reply has cursor.firstBatch")
        .iter()
        .map(|d| d.as_document().expect("documents").clone())
        .collect()
}

fn round_trip(uri: &str, collection: &str) {
    let client = Client::with_uri_str(uri).unwrap();
    let db = client.database("basics");
    let hello = db.run_command(doc! { "hello": 1 }).run().unwrap();
    assert_eq!(hello.get_bool("isWritablePrimary"), Ok(true), "{hello}");
    let ping = db.run_command(doc! { "ping": 1 }).run().unwrap();
    assert_eq!(ping.get_f64("ok"), Ok(1.0));

    db.run_command(doc! { "drop": collection }).run().ok();
    let inserted = db
        .run_command(doc! {
            "insert": collection,
            "documents": [{ "_id": 1, "name": "Ada" }, { "_id": 2, "name": "Grace" }],
        })
        .run()
        .unwrap();
    assert_eq!(inserted.get_i32("n"), Ok(2), "{inserted}");
    let found = db
        .run_command(doc! { "find": collection, "filter": { "name": "Grace" } })
        .run()
        .unwrap();
    assert_eq!(
        first_batch(&found),
        vec![doc! { "_id": 2, "name": "Grace" }]
    );
}

#[test]
fn standalone_round_trips_real_data() {
    let server = TestServer::shared_standalone();
    round_trip(&server.uri(), "standalone_round_trip");
}

#[test]
fn replica_set_member_with_direct_connection_round_trips_real_data() {
    let server = TestServer::shared();
    assert!(server.uri().contains("directConnection=true"));
    round_trip(&server.uri(), "direct_round_trip");
}

#[test]
fn replica_set_member_is_discovered_by_set_name() {
    let server = TestServer::shared();
    let uri = format!("mongodb://{}/?replicaSet=secantus", server.address());
    round_trip(&uri, "discovered_round_trip");
}

#[test]
fn a_command_error_carries_the_servers_code_and_message() {
    let server = TestServer::shared_standalone();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let error = client
        .database("basics")
        .run_command(doc! { "noSuchCommand": 1 })
        .run()
        .unwrap_err();
    match error.kind() {
        ErrorKind::Command(c) => {
            assert_eq!(c.code, 59, "{error}");
            assert!(!c.message.is_empty());
        }
        other => panic!("expected a command error, got {other:?}"),
    }
    // The server's whole reply, as the official `Error::server_response`.
    let reply = error.server_response().expect("the server's reply");
    assert_eq!(reply.get_i32("code").unwrap(), 59);
    assert_eq!(reply.get_str("codeName").unwrap(), "CommandNotFound");
}

#[test]
fn after_shutdown_every_clone_fails_with_shutdown_without_io() {
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    let clone = client.clone();
    let coll = client.database("basics").collection::<Document>("shutdown");
    coll.find_one(doc! {}).run().unwrap();
    let opened = sim.connections(0);
    client.shutdown().run();
    let errors = [
        clone
            .database("basics")
            .run_command(doc! { "ping": 1 })
            .run()
            .map(drop),
        coll.find_one(doc! {}).run().map(drop),
        clone.start_session().run().map(drop),
    ];
    for error in errors {
        let error = error.expect_err("the client is shut down");
        assert!(matches!(error.kind(), ErrorKind::Shutdown), "{error:?}");
    }
    assert_eq!(
        sim.connections(0),
        opened,
        "a socket was opened after shutdown"
    );
    // `close` is not a shutdown: the client reconnects.
    let other = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    other.close();
    other
        .database("basics")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
}

#[test]
fn creating_a_client_does_no_io() {
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    let _db = client.database("basics");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        sim.connections(0),
        0,
        "the client connected before any operation"
    );
    client
        .database("basics")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    assert_eq!(sim.connections(0), 1);
}

#[test]
fn one_socket_carries_the_scan_and_the_operations() {
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let uri = format!(
        "{}&heartbeatFrequencyMS=500",
        with_query(&sim.seed_uri(&[0]))
    );
    let client = Client::with_uri_str(&uri).unwrap();
    let db = client.database("basics");
    db.run_command(doc! { "ping": 1 }).run().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    // heartbeatFrequencyMS has passed: this operation rescans first.
    db.run_command(doc! { "ping": 1 }).run().unwrap();
    assert_eq!(
        sim.connections(0),
        1,
        "scan and operations share one socket"
    );
    assert!(
        sim.hellos(0) >= 2,
        "a rescan sent a hello on the same socket"
    );
    let hellos: Vec<Document> = sim
        .received(0)
        .into_iter()
        .filter(|c| c.contains_key("hello") || c.contains_key("isMaster"))
        .collect();
    assert!(hellos[0].contains_key("client"));
    assert!(
        hellos[1..].iter().all(|h| !h.contains_key("client")),
        "client metadata may only be sent in the handshake: {hellos:?}"
    );
}

fn with_query(uri: &str) -> String {
    if uri.contains('?') {
        uri.to_string()
    } else if uri.ends_with('/') {
        format!("{uri}?")
    } else {
        format!("{uri}/?")
    }
}

#[test]
fn the_handshake_sends_metadata_backpressure_and_hello_ok() {
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let uri = format!("{}&appname=basics-test", with_query(&sim.seed_uri(&[0])));
    let client = Client::with_uri_str(&uri).unwrap();
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    let handshakes = sim.handshakes(0);
    assert_eq!(handshakes.len(), 1);
    let hello = &handshakes[0];
    assert_eq!(
        hello.get_i32("isMaster"),
        Ok(1),
        "legacy hello first: {hello}"
    );
    assert_eq!(hello.get_bool("helloOk"), Ok(true));
    assert_eq!(hello.get_bool("backpressure"), Ok(true));
    let metadata = hello.get_document("client").unwrap();
    let driver = metadata.get_document("driver").unwrap();
    assert_eq!(driver.get_str("name"), Ok("mongo-inline"));
    assert_eq!(driver.get_str("version"), Ok(env!("CARGO_PKG_VERSION")));
    assert_eq!(
        metadata
            .get_document("application")
            .unwrap()
            .get_str("name"),
        Ok("basics-test")
    );
    assert!(metadata.get_document("os").unwrap().contains_key("type"));
    assert!(metadata.contains_key("platform"));
    assert!(
        !metadata.contains_key("env"),
        "no FaaS variables are set here"
    );
}

/// The FaaS detection reads the process environment, so it is checked
/// through the CLI in a child process whose environment the test controls.
fn handshake_of_cli_with_env(vars: &[(&str, &str)]) -> Document {
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let mut command = Command::new(env!("CARGO_BIN_EXE_mongo-inline"));
    command
        .arg(sim.seed_uri(&[0]))
        .args(["run", r#"{"ping": 1}"#]);
    for name in FAAS_VARIABLES {
        command.env_remove(name);
    }
    command.envs(vars.iter().copied());
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    sim.handshakes(0).remove(0)
}

const FAAS_VARIABLES: &[&str] = &[
    "AWS_EXECUTION_ENV",
    "AWS_LAMBDA_RUNTIME_API",
    "AWS_REGION",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "FUNCTIONS_WORKER_RUNTIME",
    "K_SERVICE",
    "FUNCTION_NAME",
    "FUNCTION_MEMORY_MB",
    "FUNCTION_TIMEOUT_SEC",
    "FUNCTION_REGION",
    "VERCEL",
    "VERCEL_REGION",
    "KUBERNETES_SERVICE_HOST",
];

#[test]
fn the_handshake_names_the_faas_environment() {
    let hello = handshake_of_cli_with_env(&[
        ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
        ("AWS_REGION", "us-east-2"),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024"),
    ]);
    let env = hello
        .get_document("client")
        .and_then(|c| c.get_document("env"))
        .unwrap();
    assert_eq!(env.get_str("name"), Ok("aws.lambda"));
    assert_eq!(env.get_str("region"), Ok("us-east-2"));
    assert_eq!(env.get_i32("memory_mb"), Ok(1024));
}

#[test]
fn oversized_metadata_is_truncated_in_the_specs_order() {
    let long_region = "x".repeat(600);
    let hello = handshake_of_cli_with_env(&[
        ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
        ("AWS_REGION", &long_region),
    ]);
    let metadata = hello.get_document("client").unwrap();
    let size = bson::to_vec(metadata).unwrap().len();
    assert!(size <= 512, "metadata is {size} bytes");
    // The env fields other than its name go first.
    let env = metadata.get_document("env").unwrap();
    assert_eq!(env.get_str("name"), Ok("aws.lambda"));
    assert!(!env.contains_key("region"));
}

#[test]
fn a_server_killed_mid_operation_gives_a_network_error_and_a_restart_reconnects() {
    let mut server = TestServer::start();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let db = client.database("basics");
    db.run_command(doc! { "insert": "killed", "documents": [{ "a": 1 }] })
        .run()
        .unwrap();
    db.run_command(doc! {
        "configureFailPoint": "failCommand",
        "mode": { "times": 1 },
        "data": { "failCommands": ["find"], "blockConnection": true, "blockTimeMS": 3000 },
    })
    .run()
    .unwrap();
    let pid_killer = {
        let port = server.port();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            port
        })
    };
    // The find blocks in the server; the server dies under it.
    let find = std::thread::scope(|scope| {
        let handle = scope.spawn(|| db.run_command(doc! { "find": "killed" }).run());
        pid_killer.join().unwrap();
        server.kill();
        handle.join().unwrap()
    });
    let error = find.unwrap_err();
    assert!(error.is_network_error(), "{error}");

    server.restart();
    let reply = db.run_command(doc! { "ping": 1 }).run().unwrap();
    assert_eq!(reply.get_f64("ok"), Ok(1.0));
}

#[test]
fn close_releases_the_socket_and_the_next_operation_reconnects() {
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    let db = client.database("basics");
    db.run_command(doc! { "ping": 1 }).run().unwrap();
    client.close();
    assert!(
        support::sim::wait_until(Duration::from_secs(2), || sim.open_connections(0) == 0),
        "close() left the socket open"
    );
    db.run_command(doc! { "ping": 1 }).run().unwrap();
    assert_eq!(sim.connections(0), 2);
}

/// The handshake spec's "Client Metadata Update" prose tests 1, 3 and 5:
/// appended metadata reaches the next socket's handshake, not the open
/// socket's (no hello, no new or closed socket for it), and a duplicate
/// (empty values unset) or a refused value appends nothing.
#[test]
fn appended_metadata_reaches_only_the_next_sockets_handshake() {
    use mongo_inline::options::DriverInfo;
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    let db = client.database("admin");
    let ping = || db.run_command(doc! { "ping": 1 }).run().unwrap();
    client
        .append_metadata(
            DriverInfo::new("library")
                .version("1.2")
                .platform("Library Platform"),
        )
        .unwrap();
    ping();
    client
        .append_metadata(
            DriverInfo::new("framework")
                .version("2.0")
                .platform("Framework Platform"),
        )
        .unwrap();
    // Neither a duplicate, nor a value with the separator, appends anything.
    client
        .append_metadata(
            DriverInfo::new("library")
                .version("1.2")
                .platform("Library Platform"),
        )
        .unwrap();
    client
        .append_metadata(
            DriverInfo::new("framework")
                .version("2.0")
                .platform("Framework Platform"),
        )
        .unwrap();
    let refused = client.append_metadata(DriverInfo::new("a|b")).unwrap_err();
    assert!(
        refused.to_string().contains("must not contain '|'"),
        "{refused}"
    );
    ping();
    assert_eq!(
        sim.hellos(0),
        1,
        "appending sent a hello on the open socket"
    );
    assert_eq!(sim.connections(0), 1, "appending opened or closed a socket");

    client.close();
    ping();
    let handshakes = sim.handshakes(0);
    assert_eq!(handshakes.len(), 2);
    let fields = |hello: &Document| {
        let metadata = hello.get_document("client").unwrap().clone();
        let driver = metadata.get_document("driver").unwrap();
        (
            driver.get_str("name").unwrap().to_string(),
            driver.get_str("version").unwrap().to_string(),
            metadata.get_str("platform").unwrap().to_string(),
        )
    };
    let (name, version, platform) = fields(&handshakes[0]);
    assert_eq!(name, "mongo-inline|library");
    assert_eq!(version, format!("{}|1.2", env!("CARGO_PKG_VERSION")));
    assert!(platform.ends_with("|Library Platform"), "{platform}");
    let (name, version, platform) = fields(&handshakes[1]);
    assert_eq!(name, "mongo-inline|library|framework");
    assert_eq!(version, format!("{}|1.2|2.0", env!("CARGO_PKG_VERSION")));
    assert!(
        platform.ends_with("|Library Platform|Framework Platform"),
        "{platform}"
    );
}

/// `ClientOptions::driver_info`, as the official driver sets it: the
/// wrapping library is named in the first socket's handshake; a name the
/// handshake spec refuses fails the client, naming the problem.
#[test]
fn driver_info_in_the_options_reaches_the_handshake() {
    use mongo_inline::options::{ClientOptions, DriverInfo};
    let server = TestServer::shared_standalone();
    let sim = Simulator::standalone(server);
    let mut options = ClientOptions::parse(sim.seed_uri(&[0])).run().unwrap();
    options.driver_info = Some(
        DriverInfo::builder()
            .name("odm")
            .version("3.1".to_string())
            .build(),
    );
    let client = Client::with_options(options.clone()).unwrap();
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    let handshakes = sim.handshakes(0);
    let driver = handshakes[0]
        .get_document("client")
        .and_then(|c| c.get_document("driver"))
        .unwrap();
    assert_eq!(driver.get_str("name").unwrap(), "mongo-inline|odm");
    assert_eq!(
        driver.get_str("version").unwrap(),
        format!("{}|3.1", env!("CARGO_PKG_VERSION"))
    );

    options.driver_info = Some(DriverInfo::builder().name("a|b").build());
    let refused = Client::with_options(options).unwrap_err();
    assert!(refused.to_string().contains("'|'"), "{refused}");
}

#[test]
fn the_cli_prints_relaxed_extended_json_and_fails_with_status() {
    let server = TestServer::shared_standalone();
    let cli = env!("CARGO_BIN_EXE_mongo-inline");
    let output = Command::new(cli)
        .args([
            &server.uri(),
            "run",
            "--db",
            "basics",
            r#"{"insert": "cli", "documents": [{"n": {"$numberLong": "7"}}]}"#,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let reply: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(reply["n"], 1);

    let output = Command::new(cli)
        .args([&server.uri(), "run", "{not json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not valid JSON"));

    let port = support::server::free_port();
    let output = Command::new(cli)
        .args([
            &format!("mongodb://127.0.0.1:{port}/?connectTimeoutMS=500"),
            "run",
            r#"{"ping": 1}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");

    let output = Command::new(cli)
        .args([&server.uri(), "run", r#"{"noSuchCommand": 1}"#])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
}
