//! Servers that stop cooperating after the handshake: one that goes silent
//! (bounded by socketTimeoutMS, which has a default, so nothing waits
//! forever), and one that accepts and at once closes every connection
//! (the selection's error names that cause first, not the timeout); and
//! peers that answer with what no server should, to show which
//! [`ErrorKind`] each failure is reported as.
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

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bson::doc;
use bson::Document;
use mongo_inline::{Client, ErrorKind};
use peers::{fake_server, reply_to, silent_after_handshake, standalone_hello};

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
        matches!(error.kind(), ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::TimedOut),
        "{error:?}"
    );
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

/// Answers every `hello` as a standalone and every other command with
/// what `answer` gives for it; `None` closes the socket instead.
fn answering(answer: fn(&Document) -> Option<Document>) -> impl Fn(TcpStream) + Clone {
    move |mut stream: TcpStream| {
        while let Ok(Some(request)) = raw::read_frame(&mut stream) {
            let command = if request.op_code == raw::OP_QUERY {
                raw::parse_op_query(&request.body).map(|q| q.command())
            } else {
                raw::parse_op_msg(&request.body).map(|m| m.merged())
            };
            let Ok(command) = command else { return };
            let name = command.keys().next().cloned().unwrap_or_default();
            let reply = if ["hello", "isMaster", "ismaster"].contains(&name.as_str()) {
                Some(standalone_hello())
            } else {
                answer(&command)
            };
            let Some(reply) = reply else { return };
            if stream.write_all(&reply_to(&request, &reply)).is_err() {
                return;
            }
        }
    }
}

fn client_of(port: u16) -> Client {
    let uri =
        format!("mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS=2000");
    Client::with_uri_str(&uri).expect("test URI")
}

#[test]
fn a_socket_closed_under_a_command_is_an_io_error_naming_the_server() {
    let port = fake_server(answering(|_| None));
    let error = client_of(port)
        .database("db")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("the peer closes the socket");
    let ErrorKind::Io(io) = error.kind() else {
        panic!("{error:?}")
    };
    assert_ne!(io.kind(), std::io::ErrorKind::TimedOut, "{error:?}");
    assert!(error.is_network_error() && !error.is_network_timeout());
    assert!(
        error.to_string().contains(&format!("127.0.0.1:{port}")),
        "{error}"
    );
}

#[test]
fn a_malformed_reply_is_an_invalid_response_naming_the_server() {
    // A `find` whose reply has no cursor document.
    let port = fake_server(answering(|_| Some(doc! { "ok": 1, "cursor": "none" })));
    let error = client_of(port)
        .database("db")
        .collection::<Document>("coll")
        .find_one(doc! {})
        .run()
        .expect_err("the reply has no cursor");
    let ErrorKind::InvalidResponse { message, .. } = error.kind() else {
        panic!("{error:?}")
    };
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");
}

#[test]
fn a_command_error_keeps_the_whole_reply_and_the_servers_backoff() {
    let port = fake_server(answering(|_| {
        Some(doc! {
            "ok": 0, "code": 2, "codeName": "BadValue", "errmsg": "refused",
            "baseBackoffMS": 250, "note": "a field the error has no place for",
        })
    }));
    let error = client_of(port)
        .database("db")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect_err("the peer refuses");
    assert!(
        matches!(error.kind(), ErrorKind::Command(c) if c.code == 2),
        "{error:?}"
    );
    assert_eq!(error.base_backoff(), Some(Duration::from_millis(250)));
    let reply = error.server_response().expect("the reply is kept");
    assert_eq!(
        reply.get_str("note").unwrap(),
        "a field the error has no place for"
    );
}
