//! Hostile peers against the time bounds: a server that drips a valid reply
//! one byte at a time, and one that accepts and never answers. A socket
//! timeout applies per read, so only a deadline for the whole exchange
//! (timeoutMS, else socketTimeoutMS; connectTimeoutMS for connect plus
//! handshake) bounds them. Bounds are checked with generous slack: these
//! assert behaviour on a loaded machine, they do not measure it.

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

use bson::{doc, Document};
use mongo_inline::{Client, Error, ErrorKind};

/// What the fixture does with each request on a connection.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Drip every reply, the handshake's included.
    DripAll,
    /// Answer the first request (the handshake) at once, drip the rest.
    DripAfterHandshake,
    /// Accept, read, never answer.
    Silent,
    /// Answer the first request (the handshake) at once, never the rest.
    SilentAfterHandshake,
}

/// The pause between two dripped bytes.
const DRIP: Duration = Duration::from_millis(100);
/// What a bound may be overrun by on a loaded machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Starts the fixture; returns the port it listens on. Its threads end when
/// the client closes its sockets.
fn hostile_server(behaviour: Behaviour) -> u16 {
    peers::fake_server(move |stream| serve(stream, behaviour))
}

fn serve(mut stream: TcpStream, behaviour: Behaviour) {
    let mut first = true;
    while let Ok(Some(request)) = raw::read_frame(&mut stream) {
        let reply_doc = if first {
            peers::standalone_hello()
        } else {
            // Long enough that dripping it takes far longer than any bound.
            // A cursor too, so it also answers a find.
            doc! {
                "cursor": { "id": 0_i64, "ns": "db.coll", "firstBatch": [] },
                "ok": 1.0,
                "padding": "x".repeat(200),
            }
        };
        let reply = peers::reply_to(&request, &reply_doc);
        let drip = match behaviour {
            Behaviour::DripAll => true,
            Behaviour::DripAfterHandshake => !first,
            Behaviour::SilentAfterHandshake if first => false,
            Behaviour::Silent | Behaviour::SilentAfterHandshake => {
                return peers::hold_until_closed(stream);
            }
        };
        first = false;
        if drip {
            for byte in reply {
                if stream.write_all(&[byte]).is_err() {
                    return;
                }
                std::thread::sleep(DRIP);
            }
        } else if stream.write_all(&reply).is_err() {
            return;
        }
    }
}

fn ping(port: u16, options: &str) -> (mongo_inline::Result<Document>, Duration) {
    let uri = format!("mongodb://127.0.0.1:{port}/?directConnection=true&{options}");
    let client = Client::with_uri_str(&uri).expect("test URI");
    let started = Instant::now();
    let outcome = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run();
    (outcome, started.elapsed())
}

fn is_timeout(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::Timeout { .. }) || error.is_network_timeout()
}

fn names_the_server(error: &Error, port: u16) -> bool {
    error.to_string().contains(&format!("127.0.0.1:{port}"))
}

#[test]
fn a_dripping_handshake_is_bounded_by_connect_timeout() {
    let port = hostile_server(Behaviour::DripAll);
    let (outcome, elapsed) = ping(port, "connectTimeoutMS=1000&serverSelectionTimeoutMS=1000");
    let error = outcome.expect_err("a handshake that drips for 30 s cannot succeed in 1 s");
    println!("dripping handshake: failed after {elapsed:?}: {error}");
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("timed out") && names_the_server(&error, port),
        "the error should say the check of the server timed out: {error}"
    );
    assert!(
        elapsed < Duration::from_millis(1000) + SLACK,
        "took {elapsed:?}"
    );
}

#[test]
fn a_dripping_reply_is_bounded_by_timeout_ms() {
    let port = hostile_server(Behaviour::DripAfterHandshake);
    let uri = format!("mongodb://127.0.0.1:{port}/?directConnection=true&timeoutMS=2000");
    let client = Client::with_uri_str(&uri).expect("test URI");
    let started = Instant::now();
    let outcome = client
        .database("db")
        .collection::<Document>("coll")
        .find_one(doc! {})
        .run();
    let elapsed = started.elapsed();
    let error = outcome.expect_err("a reply that drips for 20 s cannot arrive within 2 s");
    println!("dripping reply, timeoutMS=2000: failed after {elapsed:?}: {error}");
    assert!(is_timeout(&error), "{error}");
    assert!(names_the_server(&error, port), "{error}");
    assert!(
        elapsed < Duration::from_millis(2000) + SLACK,
        "took {elapsed:?}"
    );
}

#[test]
fn a_dripping_reply_is_bounded_by_socket_timeout_per_exchange() {
    let port = hostile_server(Behaviour::DripAfterHandshake);
    let (outcome, elapsed) = ping(port, "socketTimeoutMS=1000");
    let error = outcome.expect_err("a reply that drips for 20 s cannot arrive within 1 s");
    println!("dripping reply, socketTimeoutMS=1000: failed after {elapsed:?}: {error}");
    assert!(is_timeout(&error), "{error}");
    assert!(names_the_server(&error, port), "{error}");
    assert!(
        elapsed < Duration::from_millis(1000) + SLACK,
        "took {elapsed:?}"
    );
}

#[test]
fn a_server_that_never_answers_is_bounded_by_connect_timeout() {
    let port = hostile_server(Behaviour::Silent);
    let (outcome, elapsed) = ping(port, "connectTimeoutMS=500&serverSelectionTimeoutMS=500");
    let error = outcome.expect_err("a silent server cannot complete a handshake");
    println!("silent server: failed after {elapsed:?}: {error}");
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("timed out"), "{error}");
    assert!(
        elapsed < Duration::from_millis(500) + SLACK,
        "took {elapsed:?}"
    );
}

/// How late a limit's error may arrive: a readiness wait bounded by the
/// time left ends within a millisecond of it, so this is the scheduler's
/// share. (A socket timeout is rounded up by the kernel's timer wheel:
/// issue 34 saw 15 s limits end at 15.2 s and 60 s ones at 61.4 s.)
const PUNCTUAL: Duration = Duration::from_millis(50);

fn assert_ends_on_time(elapsed: Duration, limit: Duration) {
    assert!(
        elapsed >= limit && elapsed <= limit + PUNCTUAL,
        "a {limit:?} limit ended after {elapsed:?}"
    );
}

#[test]
fn a_silent_reply_fails_within_50_ms_of_timeout_ms() {
    let port = hostile_server(Behaviour::SilentAfterHandshake);
    let (outcome, elapsed) = ping(port, "timeoutMS=2000");
    let error = outcome.expect_err("no reply comes");
    println!("silent reply, timeoutMS=2000: failed after {elapsed:?}: {error}");
    assert!(is_timeout(&error), "{error}");
    assert_ends_on_time(elapsed, Duration::from_millis(2000));
}

#[test]
fn a_silent_handshake_fails_within_50_ms_of_connect_timeout_ms() {
    let port = hostile_server(Behaviour::Silent);
    let (outcome, elapsed) = ping(port, "connectTimeoutMS=2000&serverSelectionTimeoutMS=2000");
    let error = outcome.expect_err("no handshake reply comes");
    println!("silent handshake, connectTimeoutMS=2000: failed after {elapsed:?}: {error}");
    assert!(error.to_string().contains("timed out"), "{error}");
    assert_ends_on_time(elapsed, Duration::from_millis(2000));
}
