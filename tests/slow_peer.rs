//! Hostile peers against the time bounds: a server that drips a valid reply
//! one byte at a time, and one that accepts and never answers. A socket
//! timeout applies per read, so only a deadline for the whole exchange
//! (timeoutMS, else socketTimeoutMS; connectTimeoutMS for connect plus
//! handshake) bounds them. Bounds are checked with generous slack: these
//! assert behaviour on a loaded machine, they do not measure it.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("local address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || serve(stream, behaviour));
        }
    });
    port
}

fn serve(mut stream: TcpStream, behaviour: Behaviour) {
    let mut first = true;
    loop {
        let mut header = [0u8; 16];
        if stream.read_exact(&mut header).is_err() {
            return;
        }
        let length = i32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
        let request_id = i32::from_le_bytes(header[4..8].try_into().unwrap());
        let op_code = i32::from_le_bytes(header[12..16].try_into().unwrap());
        let mut body = vec![0u8; length.saturating_sub(16)];
        if stream.read_exact(&mut body).is_err() {
            return;
        }
        let reply_doc = if first {
            doc! {
                "ismaster": true, "isWritablePrimary": true, "helloOk": true,
                "maxWireVersion": 21, "minWireVersion": 0, "maxBsonObjectSize": 16_777_216,
                "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000, "ok": 1.0,
            }
        } else {
            // Long enough that dripping it takes far longer than any bound.
            // A cursor too, so it also answers a find.
            doc! {
                "cursor": { "id": 0_i64, "ns": "db.coll", "firstBatch": [] },
                "ok": 1.0,
                "padding": "x".repeat(200),
            }
        };
        let reply = encode_reply(request_id, op_code, &reply_doc);
        let drip = match behaviour {
            Behaviour::DripAll => true,
            Behaviour::DripAfterHandshake => !first,
            Behaviour::SilentAfterHandshake if first => false,
            Behaviour::Silent | Behaviour::SilentAfterHandshake => {
                // Hold the socket open until the client closes it.
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                return;
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

/// A valid reply to a request with `op_code`: OP_REPLY to a legacy
/// OP_QUERY (the handshake), OP_MSG otherwise.
fn encode_reply(request_id: i32, op_code: i32, document: &Document) -> Vec<u8> {
    let doc_bytes = bson::to_vec(document).expect("encode");
    let mut body = Vec::new();
    let reply_op_code: i32 = if op_code == 2004 {
        body.extend_from_slice(&0i32.to_le_bytes()); // responseFlags
        body.extend_from_slice(&0i64.to_le_bytes()); // cursorID
        body.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
        body.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
        1
    } else {
        body.extend_from_slice(&0u32.to_le_bytes()); // flagBits
        body.push(0); // section kind 0
        2013
    };
    body.extend_from_slice(&doc_bytes);
    let mut message = Vec::new();
    message.extend_from_slice(&((16 + body.len()) as i32).to_le_bytes());
    message.extend_from_slice(&1i32.to_le_bytes());
    message.extend_from_slice(&request_id.to_le_bytes());
    message.extend_from_slice(&reply_op_code.to_le_bytes());
    message.extend_from_slice(&body);
    message
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
    matches!(error.kind(), ErrorKind::Timeout { .. })
        || matches!(error.kind(), ErrorKind::Network { timeout: true, .. })
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
