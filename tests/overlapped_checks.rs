//! A scan's checks overlap in one wait (issue 16): members discovered by
//! a reply are connected to together, and members that never answer or
//! refuse cost one connectTimeoutMS per scan, however many there are.
//! Asserted on the simulator's accept times and on elapsed time with
//! generous bounds (what is measured is whole connectTimeoutMS periods).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::Client;
use support::server::TestServer;
use support::sim::{Role, Simulator};

fn client(uri: &str) -> Client {
    Client::with_uri_str(uri).unwrap_or_else(|e| panic!("bad test URI {uri}: {e}"))
}

/// A port where something accepts connections (the kernel completes the
/// TCP handshake into the backlog) and never answers. The listener must
/// outlive the test.
fn silent_member() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    (listener, address)
}

/// A port nothing listens on: connects are refused. On 127.0.0.2, because
/// a port released on 127.0.0.1 may be bound again at once by a simulator of
/// a test running alongside, which would then answer this member's hellos.
fn refusing_member() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    format!("127.0.0.2:{port}")
}

#[test]
fn members_named_by_the_seed_are_connected_to_within_one_round_trip() {
    let sim = Simulator::replica_set(
        "rs",
        TestServer::shared(),
        &[Role::Primary, Role::Secondary, Role::Secondary],
    );
    let round_trip = Duration::from_millis(300);
    for i in 0..3 {
        sim.delay_replies(i, round_trip);
    }
    let client = client(&sim.seed_uri(&[1]));
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping");
    let primary = sim.accept_times(0);
    let other = sim.accept_times(2);
    assert!(
        !primary.is_empty() && !other.is_empty(),
        "both were checked"
    );
    let (a, b) = (primary[0], other[0]);
    let apart = if a > b { a - b } else { b - a };
    println!("the discovered members' connections opened {apart:?} apart");
    // Checked one after the other they would open a whole round trip (the
    // primary's delayed hello) apart.
    assert!(
        apart < round_trip / 2,
        "connections opened {apart:?} apart; one round trip is {round_trip:?}"
    );
}

/// Every seed is connected to and sent its hello in the first wait, so a
/// cold operation costs one hello round trip and then its own (two mongos,
/// or a replica set named by three seeds: 2 reply round trips plus the
/// connect; `cargo bench --bench shapes` counts them).
fn seeds_connected_in_one_wait(sim: &Simulator, seeds: &[usize]) {
    let round_trip = Duration::from_millis(300);
    for i in 0..sim.len() {
        sim.delay_replies(i, round_trip);
    }
    let client = client(&sim.seed_uri(seeds));
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping");
    let opened: Vec<_> = seeds
        .iter()
        .map(|&i| *sim.accept_times(i).first().expect("every seed was checked"))
        .collect();
    let (first, last) = (opened.iter().min().unwrap(), opened.iter().max().unwrap());
    let apart = *last - *first;
    // Checked one after the other, the last would open at least one round
    // trip (a delayed hello) after the first.
    assert!(
        apart < round_trip / 2,
        "seed connections opened {apart:?} apart; one round trip is {round_trip:?}"
    );
}

#[test]
fn two_mongos_seeds_are_checked_in_one_wait() {
    seeds_connected_in_one_wait(&Simulator::mongos(TestServer::shared(), 2), &[0, 1]);
}

#[test]
fn three_replica_set_seeds_are_checked_in_one_wait() {
    let sim = Simulator::replica_set(
        "rs",
        TestServer::shared(),
        &[Role::Primary, Role::Secondary, Role::Secondary],
    );
    seeds_connected_in_one_wait(&sim, &[0, 1, 2]);
}

/// Time for a cold `find_one` with `unreachable` silent and refusing
/// members added to a healthy one-member set.
fn cold_find_with_unreachable_members(silent: usize, refusing: usize) -> Duration {
    cold_find(
        silent,
        refusing,
        "connectTimeoutMS=1000&serverSelectionTimeoutMS=2000",
    )
}

fn cold_find(silent: usize, refusing: usize, options: &str) -> Duration {
    let sim = Simulator::replica_set("rs", TestServer::shared(), &[Role::Primary]);
    let listeners: Vec<(TcpListener, String)> = (0..silent).map(|_| silent_member()).collect();
    let mut seeds: Vec<String> = listeners.iter().map(|(_, a)| a.clone()).collect();
    seeds.extend((0..refusing).map(|_| refusing_member()));
    seeds.push(sim.address(0));
    let uri = format!("mongodb://{}/?replicaSet=rs&{options}", seeds.join(","));
    let client = client(&uri);
    let started = Instant::now();
    let found = client
        .database("overlapped_checks")
        .collection::<bson::Document>("c")
        .find_one(doc! {})
        .run();
    let elapsed = started.elapsed();
    found.expect("find_one on the primary");
    drop(listeners);
    elapsed
}

#[test]
fn a_silent_and_a_refusing_member_cost_one_connect_timeout() {
    let elapsed = cold_find_with_unreachable_members(1, 1);
    println!("cold find_one with 1 silent + 1 refusing member: {elapsed:?}");
    // One connectTimeoutMS (1 s) plus a few round trips; checked one by
    // one the silent member alone would add its immediate retry or the
    // refusing one's sequence.
    assert!(elapsed < Duration::from_millis(1_800), "{elapsed:?}");
}

#[test]
fn five_silent_members_cost_the_same_as_one() {
    let one = cold_find_with_unreachable_members(1, 0);
    let five = cold_find_with_unreachable_members(5, 0);
    println!("cold find_one: 1 silent member {one:?}, 5 silent members {five:?}");
    assert!(five < Duration::from_millis(1_800), "{five:?}");
    assert!(
        five < one + Duration::from_millis(500),
        "five cost {five:?}, one {one:?}"
    );
}

#[test]
fn five_silent_members_with_the_default_connect_timeout_wait_no_longer_than_selection() {
    // The case: five members that never answer, the default
    // connectTimeoutMS (10 s) and serverSelectionTimeoutMS=2000. The scan
    // stops at serverSelectionTimeoutMS and selects the primary it found.
    let elapsed = cold_find(5, 0, "serverSelectionTimeoutMS=2000");
    println!("cold find_one, 5 silent members, default connectTimeoutMS: {elapsed:?}");
    assert!(elapsed < Duration::from_millis(3_000), "{elapsed:?}");
}

#[test]
fn hellos_on_open_sockets_are_awaited_together() {
    let sim = Simulator::replica_set(
        "rs",
        TestServer::shared(),
        &[Role::Primary, Role::Secondary, Role::Secondary],
    );
    let uri = format!("{}&heartbeatFrequencyMS=500", sim.seed_uri(&[0, 1, 2]));
    let client = client(&uri);
    let admin = client.database("admin");
    let ping = || admin.run_command(doc! { "ping": 1 }).run().expect("ping");
    ping();
    let connections: Vec<usize> = (0..3).map(|i| sim.connections(i)).collect();
    let hellos: Vec<usize> = (0..3).map(|i| sim.hellos(i)).collect();
    let delay = Duration::from_millis(400);
    for i in 0..3 {
        sim.delay_replies(i, delay);
    }
    // heartbeatFrequencyMS has passed: the next selection rescans, with a
    // hello on each member's open socket.
    std::thread::sleep(Duration::from_millis(600));
    let started = Instant::now();
    ping();
    let elapsed = started.elapsed();
    println!("rescan of 3 open sockets with {delay:?} per reply, then a ping: {elapsed:?}");
    for i in 0..3 {
        assert_eq!(
            sim.connections(i),
            connections[i],
            "member {i}: no new socket"
        );
        assert!(sim.hellos(i) > hellos[i], "member {i} was checked");
    }
    // One delay for the three hellos together and one for the ping; one
    // after the other the hellos alone would take three.
    assert!(
        elapsed < delay * 3,
        "the rescan and ping took {elapsed:?}; one reply takes {delay:?}"
    );
}
