//! Servers that stop cooperating after the handshake: one that goes silent
//! (bounded by socketTimeoutMS, which has a default, so nothing waits
//! forever), and one that accepts and at once closes every connection
//! (the selection's error names that cause first, not the timeout).
//! Bounds are checked with generous slack: these assert behaviour on a
//! loaded machine, they do not measure it.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bson::doc;
use bson::Document;
use mongo_inline::{Client, ErrorKind};
use support::raw::{encode_op_reply, read_frame, OP_QUERY};

/// What a bound may be overrun by on a loaded machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Starts a fake server that runs `serve` on every connection; returns its
/// port. Its threads end when the client closes its sockets.
fn fake_server(serve: fn(TcpStream)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("local address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

/// Answers the handshake as a standalone, then reads and never answers.
fn silent_after_handshake(mut stream: TcpStream) {
    use std::io::Write;
    let Ok(Some(hello)) = read_frame(&mut stream) else {
        return;
    };
    assert_eq!(hello.op_code, OP_QUERY, "the handshake is a legacy hello");
    let reply = doc! {
        "ismaster": true, "isWritablePrimary": true, "helloOk": true,
        "maxWireVersion": 21, "minWireVersion": 0, "maxBsonObjectSize": 16_777_216,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000, "ok": 1.0,
    };
    if stream
        .write_all(&encode_op_reply(1, hello.request_id, &reply))
        .is_err()
    {
        return;
    }
    while let Ok(Some(_)) = read_frame(&mut stream) {}
}

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
