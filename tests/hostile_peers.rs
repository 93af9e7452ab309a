//! Servers that stop cooperating after the handshake: one that goes silent
//! (bounded by socketTimeoutMS, which has a default, so nothing waits
//! forever), and one that accepts and at once closes every connection
//! (the selection's error names that cause first, not the timeout).
//! Bounds are checked with generous slack: these assert behaviour on a
//! loaded machine, they do not measure it.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

// Only the fake-server files of the support code (the rest would be
// compiled for nothing).
#[path = "support/peers.rs"]
#[allow(dead_code)]
mod peers;
#[path = "support/raw.rs"]
#[allow(dead_code)]
mod raw;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use bson::doc;
use bson::Document;
use mongo_inline::{Client, ErrorKind};
use peers::{fake_server, silent_after_handshake};

/// What a bound may be overrun by on a loaded machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Accepts and closes at once, before any handshake.
fn drops_every_connection(stream: TcpStream) {
    drop(stream);
}

#[test]
fn a_server_silent_after_the_handshake_is_bounded_by_socket_timeout() {
    let port = fake_server(silent_after_handshake);
    let uri = format!("mongodb://127.0.0.1:{port}/?directConnection=true&socketTimeoutMS=1000");
    let client = Client::with_uri_str(&uri).expect("test URI");
    let started = Instant::now();
    let outcome = client
        .database("db")
        .collection::<Document>("coll")
        .find_one(doc! {})
        .run();
    let elapsed = started.elapsed();
    let error = outcome.expect_err("a server that never answers");
    println!("silent after the handshake: failed after {elapsed:?}: {error}");
    assert!(error.is_network_timeout(), "{error:?}");
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
    assert!(
        elapsed < Duration::from_millis(1000) + SLACK,
        "took {elapsed:?}"
    );
}

#[test]
fn selection_against_a_server_that_drops_connections_names_that_first() {
    let port = fake_server(drops_every_connection);
    let address = format!("127.0.0.1:{port}");
    let uri = format!("mongodb://{address}/?serverSelectionTimeoutMS=1000");
    let client = Client::with_uri_str(&uri).expect("test URI");
    let error = client
        .database("db")
        .collection::<Document>("coll")
        .find_one(doc! {})
        .run()
        .expect_err("no server can be reached");
    println!("dropping server: {error}");
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error:?}"
    );
    let ErrorKind::ServerSelection { message } = error.kind() else {
        unreachable!()
    };
    let lead = format!("could not reach {address}: ");
    assert!(
        message.starts_with(&lead),
        "the cause comes first: {message}"
    );
}
