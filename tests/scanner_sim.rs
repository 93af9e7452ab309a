//! The single-threaded scanner end to end, on the topology simulator:
//! discovery from a partial seed list, the scan order, cooldown after
//! network errors, idle-socket checks and the heartbeat rescan, asserted on
//! what the simulated members saw (connections, hellos, commands) and on
//! the SDAM events the client published.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::options::SelectionCriteria;
use mongo_inline::{Client, ErrorKind};
use support::events::recorded_client;
use support::server::TestServer;
use support::sim::{wait_until, Role, Simulator};

const DB: &str = "scanner_sim";

fn replica_set(roles: &[Role]) -> Simulator {
    Simulator::replica_set("rs", TestServer::shared(), roles)
}

fn three_members() -> Simulator {
    replica_set(&[Role::Primary, Role::Secondary, Role::Secondary])
}

fn client(uri: &str) -> Client {
    Client::with_uri_str(uri).unwrap_or_else(|e| panic!("bad test URI {uri}: {e}"))
}

/// `seed_uri` plus extra options (it always ends in `?replicaSet=...`).
fn uri_with(sim: &Simulator, seeds: &[usize], options: &str) -> String {
    format!("{}&{options}", sim.seed_uri(seeds))
}

fn insert(client: &Client, collection: &str, document: Document) -> mongo_inline::Result<Document> {
    client
        .database(DB)
        .run_command(doc! { "insert": collection, "documents": [document] })
        .run()
}

fn find_on_primary(client: &Client, collection: &str, filter: Document) -> Vec<Document> {
    let reply = client
        .database(DB)
        .run_command(doc! { "find": collection, "filter": filter })
        .run()
        .expect("find on the primary");
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap_or_else(|e| panic!("no cursor.firstBatch in {reply}: {e}"))
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect()
}

fn ping(client: &Client) {
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping");
}

/// The commands member `i` received, with the handshake's legacy
/// `isMaster` and later `hello`s both written `hello`.
fn commands(sim: &Simulator, i: usize) -> Vec<String> {
    sim.commands(i)
        .into_iter()
        .map(|c| match c.as_str() {
            "isMaster" | "ismaster" => "hello".to_owned(),
            _ => c,
        })
        .collect()
}

fn count(commands: &[String], name: &str) -> usize {
    commands.iter().filter(|c| *c == name).count()
}

fn hellos(sim: &Simulator) -> Vec<usize> {
    (0..sim.len()).map(|i| sim.hellos(i)).collect()
}

/// A collection name no other test (or earlier run on the shared server) uses.
fn fresh_collection(prefix: &str) -> String {
    format!("{prefix}_{}", bson::oid::ObjectId::new())
}

#[test]
fn a_seed_naming_one_secondary_discovers_the_primary_and_writes_land_there() {
    let sim = three_members();
    let client = client(&sim.seed_uri(&[1]));
    let collection = fresh_collection("discover");

    insert(
        &client,
        &collection,
        doc! { "_id": 1, "via": "secondary seed" },
    )
    .expect("insert");

    assert_eq!(
        count(&sim.commands(0), "insert"),
        1,
        "{:?}",
        sim.commands(0)
    );
    for secondary in [1, 2] {
        assert_eq!(
            count(&sim.commands(secondary), "insert"),
            0,
            "member {secondary} got the write: {:?}",
            sim.commands(secondary)
        );
    }
    assert_eq!(
        find_on_primary(&client, &collection, doc! { "_id": 1 }),
        vec![doc! { "_id": 1, "via": "secondary seed" }]
    );
    assert_eq!(count(&sim.commands(0), "find"), 1);
}

#[test]
fn the_first_scan_checks_both_seeds_at_once_then_the_primary_they_name() {
    let sim = three_members();
    // Two secondary seeds: both are checked in one wait, and the primary
    // they name is checked in the same scan, once.
    for _ in 0..3 {
        let (client, recorder) = recorded_client(&sim.seed_uri(&[1, 2]));
        ping(&client);

        let order = recorder.heartbeats_started();
        assert_eq!(order.len(), 3, "one check per member: {order:?}");
        let mut seeds = order[..2].to_vec();
        seeds.sort();
        let mut expected = vec![sim.address(1), sim.address(2)];
        expected.sort();
        assert_eq!(seeds, expected, "the seeds start first: {order:?}");
        assert_eq!(order[2], sim.address(0), "then the primary: {order:?}");
    }
}

#[test]
fn servers_discovered_during_a_scan_are_checked_before_the_operation_runs() {
    let sim = three_members();
    let client = client(&sim.seed_uri(&[0]));

    ping(&client);

    for i in 0..3 {
        assert_eq!(sim.connections(i), 1, "member {i}: one socket per server");
        assert_eq!(sim.handshakes(i).len(), 1, "member {i} was not checked");
        assert_eq!(sim.hellos(i), 1, "member {i}: the handshake is the check");
    }
    // The handshakes came first: the ping is the primary's second command.
    assert_eq!(commands(&sim, 0), vec!["hello", "ping"]);
    assert_eq!(commands(&sim, 1), vec!["hello"]);
    assert_eq!(commands(&sim, 2), vec!["hello"]);
}

#[test]
fn a_member_that_refused_a_check_cools_down_and_costs_nothing_meanwhile() {
    let sim = three_members();
    sim.refuse_connections(2, true);
    let client = client(&uri_with(&sim, &[0, 1, 2], "heartbeatFrequencyMS=500"));

    ping(&client);
    assert_eq!(sim.connections(2), 0);
    // From now on any attempt would be accepted and counted.
    sim.refuse_connections(2, false);

    let started = Instant::now();
    for _ in 0..5 {
        ping(&client);
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(400),
        "5 operations took {elapsed:?}: an Unknown member must not make them wait"
    );
    assert_eq!(sim.connections(2), 0, "no attempt outside a scan");

    // The next scan (heartbeatFrequencyMS has passed) skips the member
    // still in its 5 s cooldown, and checks the others.
    let before = hellos(&sim);
    std::thread::sleep(Duration::from_millis(550));
    let started = Instant::now();
    ping(&client);
    let elapsed = started.elapsed();
    let after = hellos(&sim);
    assert_eq!(after[0], before[0] + 1, "primary rescanned: {after:?}");
    assert_eq!(after[1], before[1] + 1, "secondary rescanned: {after:?}");
    assert_eq!(sim.connections(2), 0, "checked during its cooldown");
    assert!(elapsed < Duration::from_millis(400), "took {elapsed:?}");
}

#[test]
fn when_every_server_cools_down_an_operation_fails_at_once_saying_so() {
    let sim = replica_set(&[Role::Primary, Role::Secondary]);
    sim.refuse_connections(0, true);
    sim.refuse_connections(1, true);
    let client = client(&sim.seed_uri(&[0, 1]));

    let first = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("nothing is reachable");
    assert!(
        matches!(first.kind(), ErrorKind::ServerSelection { .. }),
        "{first}"
    );

    let started = Instant::now();
    let error = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("everything is cooling down");
    let elapsed = started.elapsed();
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(message.contains("cooldown"), "{message}");
    assert!(message.contains(&sim.address(0)), "{message}");
    assert!(message.contains(&sim.address(1)), "{message}");
    assert!(
        elapsed < Duration::from_millis(100),
        "failing took {elapsed:?}; it must not wait for a rescan"
    );
    assert_eq!(sim.connections(0) + sim.connections(1), 0);
}

#[test]
fn without_try_once_a_cooldown_past_the_timeout_fails_early_saying_why() {
    let sim = replica_set(&[Role::Primary, Role::Secondary]);
    sim.refuse_connections(0, true);
    sim.refuse_connections(1, true);
    let client = client(&uri_with(
        &sim,
        &[0, 1],
        "serverSelectionTryOnce=false&serverSelectionTimeoutMS=2000",
    ));

    let started = Instant::now();
    let error = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("nothing is reachable");
    let elapsed = started.elapsed();
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    // The next check is 5 s away, past the 2 s timeout: waiting is futile.
    assert!(elapsed < Duration::from_millis(500), "took {elapsed:?}");
    assert!(error.to_string().contains("cooldown"), "{error}");
}

#[test]
fn an_idle_socket_the_server_closed_is_replaced_without_error() {
    let sim = replica_set(&[Role::Primary]);
    let client = client(&sim.seed_uri(&[0]));
    let collection = fresh_collection("dropped");
    insert(&client, &collection, doc! { "_id": 1 }).expect("first insert");
    assert_eq!(sim.connections(0), 1);

    sim.drop_connections(0);
    assert!(wait_until(Duration::from_secs(2), || sim
        .open_connections(0)
        == 0));
    std::thread::sleep(support::sim::UNTIL_IDLE);

    insert(&client, &collection, doc! { "_id": 2 }).expect("insert after the drop");
    assert_eq!(
        sim.connections(0),
        2,
        "a new socket replaced the closed one"
    );
    assert_eq!(sim.handshakes(0).len(), 2);
    assert_eq!(
        find_on_primary(&client, &collection, doc! {}),
        vec![doc! { "_id": 1 }, doc! { "_id": 2 }]
    );
}

#[test]
fn a_socket_idle_longer_than_socket_check_interval_is_pinged_first() {
    let sim = replica_set(&[Role::Primary]);
    let client = client(&uri_with(&sim, &[0], "socketCheckIntervalMS=200"));
    let collection = fresh_collection("idle");
    insert(&client, &collection, doc! { "_id": 1 }).expect("first insert");
    // Used again at once: no check needed.
    insert(&client, &collection, doc! { "_id": 2 }).expect("second insert");
    assert_eq!(commands(&sim, 0), vec!["hello", "insert", "insert"]);

    std::thread::sleep(Duration::from_millis(250));
    insert(&client, &collection, doc! { "_id": 3 }).expect("insert after idling");
    assert_eq!(
        commands(&sim, 0),
        vec!["hello", "insert", "insert", "ping", "insert"]
    );
    assert_eq!(sim.connections(0), 1, "the pinged socket was kept");
    assert_eq!(find_on_primary(&client, &collection, doc! {}).len(), 3);
}

#[test]
fn an_idle_socket_that_fails_its_ping_is_replaced_by_a_rescan() {
    let sim = replica_set(&[Role::Primary]);
    let client = client(&uri_with(
        &sim,
        &[0],
        "socketCheckIntervalMS=200&connectTimeoutMS=200",
    ));
    let collection = fresh_collection("failed_ping");
    insert(&client, &collection, doc! { "_id": 1 }).expect("first insert");
    std::thread::sleep(Duration::from_millis(250));

    // The ping (the first thing sent) outlasts connectTimeoutMS; what
    // follows is answered at once.
    sim.delay_replies(0, Duration::from_millis(400));
    let outcome = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            sim.delay_replies(0, Duration::ZERO);
        });
        insert(&client, &collection, doc! { "_id": 2 })
    });

    outcome.expect("the insert after the failed ping");
    assert_eq!(
        commands(&sim, 0),
        vec!["hello", "insert", "ping", "hello", "insert"],
        "ping, then a rescan on a new socket, then the insert"
    );
    assert_eq!(sim.connections(0), 2);
    assert_eq!(find_on_primary(&client, &collection, doc! {}).len(), 2);
}

#[test]
fn after_heartbeat_frequency_the_next_operation_rescans_first() {
    let sim = three_members();
    let client = client(&uri_with(&sim, &[0], "heartbeatFrequencyMS=500"));
    ping(&client);
    assert_eq!(hellos(&sim), vec![1, 1, 1]);
    ping(&client);
    assert_eq!(hellos(&sim), vec![1, 1, 1], "rescanned too early");

    std::thread::sleep(Duration::from_millis(550));
    ping(&client);
    assert_eq!(
        hellos(&sim),
        vec![2, 2, 2],
        "no rescan after heartbeatFrequencyMS"
    );
    // The rescan reused the sockets, and ran before the operation.
    for i in 0..3 {
        assert_eq!(sim.connections(i), 1, "member {i}");
    }
    assert_eq!(
        commands(&sim, 0),
        vec!["hello", "ping", "ping", "hello", "ping"]
    );
}

#[test]
fn the_first_operation_publishes_opening_then_unawaited_heartbeats() {
    let sim = three_members();
    let (client, recorder) = recorded_client(&sim.seed_uri(&[0, 1, 2]));

    ping(&client);

    let events = recorder.sdam();
    let names: Vec<&str> = events.iter().map(event_name).collect();
    assert_eq!(names[0], "TopologyOpening", "{names:?}");
    // Before any check: the opening of each seed (and the description
    // changes that announce them), no heartbeat yet.
    let first_heartbeat = names
        .iter()
        .position(|n| *n == "ServerHeartbeatStarted")
        .unwrap_or_else(|| panic!("no heartbeat: {names:?}"));
    let opened: Vec<String> = events[..first_heartbeat]
        .iter()
        .filter_map(|e| match e {
            SdamEvent::ServerOpening(e) => Some(e.address.to_string()),
            _ => None,
        })
        .collect();
    let mut expected: Vec<String> = (0..3).map(|i| sim.address(i)).collect();
    let mut sorted = opened.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "{names:?}");
    assert!(
        names[1..first_heartbeat]
            .iter()
            .all(|n| matches!(*n, "ServerOpening" | "TopologyDescriptionChanged")),
        "{names:?}"
    );
    // Every heartbeat is a poll. The three seeds' checks run in one wait,
    // so all three start before the first succeeds, and each start is
    // followed by its own server's success.
    let mut open: Vec<String> = Vec::new();
    let mut succeeded = 0;
    for event in &events {
        match event {
            SdamEvent::ServerHeartbeatStarted(e) => {
                assert!(!e.awaited);
                let address = e.server_address.to_string();
                assert!(!open.contains(&address), "{names:?}");
                open.push(address);
            }
            SdamEvent::ServerHeartbeatSucceeded(e) => {
                assert!(!e.awaited);
                let address = &e.server_address;
                assert_eq!(
                    names[first_heartbeat..first_heartbeat + 3],
                    ["ServerHeartbeatStarted"; 3],
                    "the seeds are checked at once"
                );
                let position = open.iter().position(|a| *a == address.to_string());
                open.remove(position.unwrap_or_else(|| panic!("{names:?}")));
                succeeded += 1;
            }
            SdamEvent::ServerHeartbeatFailed(_) => panic!("a check failed: {names:?}"),
            _ => {}
        }
    }
    assert_eq!(succeeded, 3, "{names:?}");
    assert!(open.is_empty(), "{names:?}");
    assert!(names.contains(&"ServerDescriptionChanged"), "{names:?}");
}

fn event_name(event: &SdamEvent) -> &'static str {
    match event {
        SdamEvent::TopologyOpening(_) => "TopologyOpening",
        SdamEvent::TopologyDescriptionChanged(_) => "TopologyDescriptionChanged",
        SdamEvent::ServerOpening(_) => "ServerOpening",
        SdamEvent::ServerDescriptionChanged(_) => "ServerDescriptionChanged",
        SdamEvent::ServerClosed(_) => "ServerClosed",
        SdamEvent::TopologyClosed(_) => "TopologyClosed",
        SdamEvent::ServerHeartbeatStarted(_) => "ServerHeartbeatStarted",
        SdamEvent::ServerHeartbeatSucceeded(_) => "ServerHeartbeatSucceeded",
        SdamEvent::ServerHeartbeatFailed(_) => "ServerHeartbeatFailed",
        _ => "other",
    }
}

#[test]
fn a_possible_primary_that_fails_its_check_is_not_retried_at_once() {
    // Member 1 (a secondary, the only seed) names member 0 as its primary,
    // so member 0 enters the topology as a PossiblePrimary. Its hellos fail
    // with a network error. The monitoring spec retries once only a server
    // that was known before the check (not Unknown, not PossiblePrimary):
    // a blackholed old primary that secondaries still name must cost one
    // connect per scan, not two.
    let sim = replica_set(&[Role::Primary, Role::Secondary]);
    sim.fail_hellos(0, 10, support::sim::HelloFault::CloseConnection);
    let client = client(&sim.seed_uri(&[1]));
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .selection_criteria(SelectionCriteria::ReadPreference(
            mongo_inline::ReadPreference::secondary(None),
        ))
        .run()
        .expect("ping on the secondary");
    assert_eq!(
        sim.connections(0),
        1,
        "the PossiblePrimary was checked more than once in one scan"
    );
}

#[test]
fn a_failed_idle_socket_ping_selects_again_without_rescanning() {
    // Server selection spec, single-threaded: "if the check fails, mark the
    // server Unknown and ... select again". Another suitable server is
    // selected from what is known; nothing is rescanned, and the dead
    // server is not reconnected to.
    let sim = three_members();
    let client = client(&uri_with(
        &sim,
        &[0, 1, 2],
        "socketCheckIntervalMS=200&connectTimeoutMS=200",
    ));
    ping_primary_preferred(&client);
    assert_eq!(hellos(&sim), vec![1, 1, 1], "the first scan");
    assert_eq!(commands(&sim, 0).last().map(String::as_str), Some("ping"));
    std::thread::sleep(Duration::from_millis(250));

    // The primary's ping outlasts connectTimeoutMS.
    sim.delay_replies(0, Duration::from_millis(400));
    ping_primary_preferred(&client);
    sim.delay_replies(0, Duration::ZERO);

    assert_eq!(
        hellos(&sim),
        vec![1, 1, 1],
        "a rescan after the failed ping"
    );
    assert_eq!(sim.connections(0), 1, "reconnected to the failed server");
    let pinged_secondaries = count(&commands(&sim, 1), "ping") + count(&commands(&sim, 2), "ping");
    assert!(
        pinged_secondaries >= 1,
        "the operation did not run on a secondary"
    );
}

fn ping_primary_preferred(client: &Client) {
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .selection_criteria(SelectionCriteria::ReadPreference(
            mongo_inline::ReadPreference::primary_preferred(None),
        ))
        .run()
        .expect("ping with primaryPreferred");
}

#[test]
fn a_member_listing_two_thousand_unreachable_hosts_cannot_outlast_server_selection_timeout() {
    // Ports that were just bound and released, on 127.0.0.2: nothing
    // listens there, so every connect is refused at once and the cost
    // measured is the scanner's own. Not on 127.0.0.1, where the other
    // tests of this binary, running alongside, bind their simulators to
    // ephemeral ports: a released port reused by one of them drew hellos
    // from this test's client and broke those tests' counts. Recomputing the scan order before every check made
    // this scan cost n² log n (144 s in a debug build), and nothing but the
    // operation's timeoutMS bounded the scan loop.
    let closed: Vec<u16> = (0..2000)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("bind an ephemeral port")
                .port()
        })
        .collect();
    let sim = replica_set(&[Role::Primary]);
    let passives: Vec<bson::Bson> = closed
        .iter()
        .map(|port| bson::Bson::String(format!("127.0.0.2:{port}")))
        .collect();
    sim.set_hello_extra(0, doc! { "passives": passives });
    let timeout_ms = std::env::var("SCAN_2000_SST_MS").unwrap_or_else(|_| "3000".into());
    let bound = Duration::from_millis(timeout_ms.parse().expect("SCAN_2000_SST_MS"));
    let client = client(&uri_with(
        &sim,
        &[0],
        &format!("serverSelectionTimeoutMS={timeout_ms}&connectTimeoutMS=500"),
    ));
    let started = Instant::now();
    ping(&client);
    let elapsed = started.elapsed();
    println!("selection over 2,001 members (2,000 refusing): {elapsed:?}");
    // Slack: one check (connectTimeoutMS) may be under way at the bound.
    let slack = Duration::from_millis(1500);
    assert!(
        elapsed < bound + slack,
        "selection took {elapsed:?}, serverSelectionTimeoutMS is {bound:?}"
    );
}

/// A directory of a test's own (mode 0700) for a state file, removed when
/// dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/test-servers")
            .join(format!("scanner-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        Scratch(dir)
    }

    fn file(&self) -> std::path::PathBuf {
        self.0.join("state")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A client as a new process would make it: `uri` with the state file
/// `file`, its clock `skew` ahead; it pings once (the first scan) and is
/// dropped. Returns the server its first check went to and its SDAM
/// events.
fn new_process_pings(
    uri: &str,
    file: &std::path::Path,
    skew: &mongo_inline::unversioned::ClockSkew,
) -> (String, Vec<SdamEvent>) {
    let mut in_code = mongo_inline::ClientOptions::builder()
        .state_file(file.to_path_buf())
        .build();
    mongo_inline::unversioned::set_clock_skew(&mut in_code, skew);
    let options = mongo_inline::ClientOptions::parse_with(uri, in_code).unwrap();
    let recorder = std::sync::Arc::new(support::events::Recorder::default());
    let client = recorder.client_for(options).unwrap();
    ping(&client);
    drop(client);
    let events = recorder.sdam();
    let first = events
        .iter()
        .find_map(|e| match e {
            SdamEvent::ServerHeartbeatStarted(e) => Some(e.server_address.to_string()),
            _ => None,
        })
        .expect("a check");
    (first, events)
}

/// Per member: sockets accepted and commands received (hellos written
/// `hello`) since the last `reset_observations`, but for the
/// `endSessions` a dropped client sends without waiting (it may arrive
/// after the test looks).
fn wire_work(sim: &Simulator) -> Vec<(usize, Vec<String>)> {
    (0..sim.len())
        .map(|i| {
            let mut commands = commands(sim, i);
            commands.retain(|c| c != "endSessions");
            (sim.connections(i), commands)
        })
        .collect()
}

/// The primary last among the seeds: with no remembered order, a first
/// scan checks the three in a random order.
fn primary_last_uri(sim: &Simulator) -> String {
    sim.seed_uri(&[2, 1, 0])
}

#[test]
fn with_the_state_file_a_new_process_checks_the_last_primary_first_at_no_extra_cost() {
    let sim = three_members();
    let scratch = Scratch::new("primary-first");
    let file = scratch.file();
    let uri = primary_last_uri(&sim);
    let skew = mongo_inline::unversioned::ClockSkew::new();
    sim.reset_observations();
    new_process_pings(&uri, &file, &skew);
    let cold = wire_work(&sim);
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(
        mongo_inline::unversioned::state_file_topologies(&bytes),
        Ok(1)
    );
    // Six new processes: each checks the remembered primary first (by
    // chance, all six would one time in 729), and none does more on the
    // wire than the first did: the same sockets, hellos and commands.
    for _ in 0..6 {
        sim.reset_observations();
        let (first, events) = new_process_pings(&uri, &file, &skew);
        assert_eq!(first, sim.address(0), "{events:?}");
        assert_eq!(wire_work(&sim), cold);
    }
    // A steady topology seen again within half a heartbeat is not written
    // again: processes under steady traffic leave the file alone.
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
}

#[test]
fn a_remembered_primary_that_stepped_down_is_not_used_before_its_hello_says_so() {
    let sim = three_members();
    let scratch = Scratch::new("stepped-down");
    let file = scratch.file();
    let uri = primary_last_uri(&sim);
    let skew = mongo_inline::unversioned::ClockSkew::new();
    new_process_pings(&uri, &file, &skew);
    sim.elect(1);
    // What a cold start costs in the new topology.
    sim.reset_observations();
    ping(&client(&uri));
    let cold = wire_work(&sim);

    sim.reset_observations();
    let (first, events) = new_process_pings(&uri, &file, &skew);
    assert_eq!(first, sim.address(0), "the remembered primary goes first");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SdamEvent::ServerHeartbeatFailed(_))),
        "{events:?}"
    );
    let work = wire_work(&sim);
    assert_eq!(work[0].1, ["hello"], "member 0 only answered its hello");
    assert_eq!(work[1].1, ["hello", "ping"], "the new primary ran it");
    assert_eq!(work, cold, "no more than a cold start");
    // The file now remembers the new primary.
    let (first, _) = new_process_pings(&uri, &file, &skew);
    assert_eq!(first, sim.address(1));
}

/// The server each of ten new processes checked first, each starting from
/// `bytes` as the state file.
fn first_checks(
    uri: &str,
    file: &std::path::Path,
    bytes: &[u8],
    skew: &mongo_inline::unversioned::ClockSkew,
) -> Vec<String> {
    (0..10)
        .map(|_| {
            std::fs::write(file, bytes).unwrap();
            new_process_pings(uri, file, skew).0
        })
        .collect()
}

#[test]
fn a_stale_topology_or_another_uri_s_gives_no_order() {
    let sim = three_members();
    let scratch = Scratch::new("stale");
    let file = scratch.file();
    let uri = primary_last_uri(&sim);
    let skew = mongo_inline::unversioned::ClockSkew::new();
    new_process_pings(&uri, &file, &skew);
    let bytes = std::fs::read(&file).unwrap();
    let primary = sim.address(0);
    // Another connection string (the same seeds in another order): the
    // entry is not its own. Ten processes checking the primary first by
    // chance: one time in 59,049.
    let another = sim.seed_uri(&[0, 1, 2]);
    let firsts = first_checks(&another, &file, &bytes, &skew);
    assert!(firsts.iter().any(|f| *f != primary), "{firsts:?}");
    // The same connection string a heartbeat (heartbeatFrequencyMS, 60 s
    // in single-threaded drivers) and a second later: stale.
    skew.advance(Duration::from_secs(61));
    let firsts = first_checks(&uri, &file, &bytes, &skew);
    assert!(firsts.iter().any(|f| *f != primary), "{firsts:?}");
    // Within the heartbeat it orders.
    let fresh = mongo_inline::unversioned::ClockSkew::new();
    let firsts = first_checks(&uri, &file, &bytes, &fresh);
    assert!(firsts.iter().all(|f| *f == primary), "{firsts:?}");
}

#[test]
fn a_tampered_topology_entry_is_ignored_and_rewritten() {
    let sim = three_members();
    let scratch = Scratch::new("tampered-topology");
    let file = scratch.file();
    let uri = primary_last_uri(&sim);
    let skew = mongo_inline::unversioned::ClockSkew::new();
    new_process_pings(&uri, &file, &skew);
    let good = std::fs::read(&file).unwrap();
    // The file's one entry: header (12 bytes), kind, binding (32),
    // written (8), length (2), then the body: seen (8), flags.
    let flags_at = 12 + 1 + 32 + 8 + 2 + 8;
    let mut forged = good.clone();
    forged[flags_at] = 0xff;
    let body = forged.len() - 32;
    let digest = ring::digest::digest(&ring::digest::SHA256, &forged[..body]);
    forged[body..].copy_from_slice(digest.as_ref());
    let mut torn = good.clone();
    torn[flags_at] = 0xff;
    for tampered in [forged, torn] {
        assert!(mongo_inline::unversioned::state_file_topologies(&tampered).is_err());
        std::fs::write(&file, &tampered).unwrap();
        // A cold start (the ping runs), and the file is rewritten whole.
        new_process_pings(&uri, &file, &skew);
        let rewritten = std::fs::read(&file).unwrap();
        assert_eq!(
            mongo_inline::unversioned::state_file_topologies(&rewritten),
            Ok(1)
        );
    }
}
