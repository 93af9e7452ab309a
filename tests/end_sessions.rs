//! Closing a client ends its server sessions (`endSessions`), sent without
//! waiting for a reply, so a process that exits leaves no session behind for
//! the server to expire 30 minutes later, and closing stays free.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use mongo_inline::Client;
use support::server::TestServer;
use support::sim::{wait_until, Role, Simulator};

/// The lsids member 0 received on commands named `name`.
fn lsids_of(sim: &Simulator, name: &str) -> Vec<Bson> {
    sim.received(0)
        .iter()
        .filter(|command| command.contains_key(name))
        .filter_map(|command| command.get("lsid").cloned())
        .collect()
}

/// The session ids carried by the `endSessions` commands member 0 received.
fn ended_sessions(sim: &Simulator) -> Vec<Bson> {
    sim.received(0)
        .iter()
        .filter_map(|command| command.get_array("endSessions").ok())
        .flatten()
        .cloned()
        .collect()
}

fn primary_with_one_session(server: &TestServer) -> (Simulator, Client, Bson) {
    let sim = Simulator::replica_set("rs-end", server, &[Role::Primary]);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    let coll = client.database("end_sessions").collection::<Document>("c");
    coll.find_one(doc! {}).run().unwrap();
    let lsids = lsids_of(&sim, "find");
    assert_eq!(lsids.len(), 1, "the find carried one lsid");
    (sim, client, lsids[0].clone())
}

#[test]
fn dropping_the_client_ends_its_pooled_sessions_without_waiting_for_a_reply() {
    let server = TestServer::shared();
    let (sim, client, lsid) = primary_with_one_session(server);
    // Any reply now takes 3 s: a close that waited for one would show it.
    sim.delay_replies(0, Duration::from_secs(3));

    let started = Instant::now();
    drop(client);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "dropping the client waited {took:?} on a delayed reply"
    );

    assert!(
        wait_until(Duration::from_secs(5), || ended_sessions(&sim)
            .contains(&lsid)),
        "endSessions with the find's lsid never arrived; received: {:?}",
        sim.commands(0)
    );
    let end = sim
        .received(0)
        .into_iter()
        .find(|command| command.contains_key("endSessions"))
        .unwrap();
    assert_eq!(end.get_str("$db").unwrap(), "admin");
}

#[test]
fn close_ends_sessions_and_the_client_goes_on_with_a_new_one() {
    let server = TestServer::shared();
    let (sim, client, lsid) = primary_with_one_session(server);
    client.close();
    assert!(
        wait_until(Duration::from_secs(5), || ended_sessions(&sim)
            .contains(&lsid)),
        "close() sent no endSessions for the pooled session"
    );

    let coll = client.database("end_sessions").collection::<Document>("c");
    coll.find_one(doc! {}).run().unwrap();
    let lsids = lsids_of(&sim, "find");
    assert_eq!(lsids.len(), 2);
    assert_ne!(lsids[1], lsid, "an ended session was used again");
}

#[test]
fn a_client_without_an_open_socket_does_not_connect_to_end_sessions() {
    let server = TestServer::shared();
    let (sim, client, _) = primary_with_one_session(server);
    sim.drop_connections(0);
    assert!(wait_until(Duration::from_secs(5), || sim
        .open_connections(0)
        == 0));
    let before = sim.connections(0);
    drop(client);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        sim.connections(0),
        before,
        "closing the client opened a connection"
    );
    assert!(ended_sessions(&sim).is_empty());
}
