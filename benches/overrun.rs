//! How far past a time limit its error arrives: a `ping` against a fake
//! server that never answers, with the limit given as timeoutMS (the
//! handshake answered, the ping not: the exchange's read waits) and as
//! connectTimeoutMS (the handshake's hello not answered: the check waits;
//! serverSelectionTimeoutMS is set to the same so the selection ends with
//! the check).
//!
//! Each limit is waited out in full, so the default run is short (2 s);
//! the long limits are opt-in, in seconds:
//!
//! ```text
//! cargo bench --bench overrun                          # 2 s
//! OVERRUN_LIMITS=15,60 cargo bench --bench overrun     # 15 s and 60 s
//! ```
//!
//! The figure printed is the overrun: when the error arrived minus the
//! limit.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/raw.rs"]
#[allow(dead_code)]
mod raw;

use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::Client;

/// Whether the fake server answers the handshake's hello.
#[derive(Clone, Copy)]
enum Silence {
    /// The hello is answered; nothing after it is.
    AfterHandshake,
    /// Nothing is answered.
    Total,
}

fn main() {
    let limits = std::env::var("OVERRUN_LIMITS").unwrap_or_else(|_| "2".to_string());
    for limit in limits.split(',').filter(|s| !s.trim().is_empty()) {
        let secs: u64 = limit.trim().parse().expect("OVERRUN_LIMITS: whole seconds");
        let ms = secs * 1000;
        let cases = [
            (
                "timeoutMS",
                Silence::AfterHandshake,
                format!("timeoutMS={ms}"),
            ),
            (
                "connectTimeoutMS",
                Silence::Total,
                format!("connectTimeoutMS={ms}&serverSelectionTimeoutMS={ms}"),
            ),
        ];
        for (name, silence, options) in cases {
            let elapsed = ping_until_error(silent_server(silence), &options);
            let overrun = elapsed.as_secs_f64() - secs as f64;
            println!(
                "{name}={ms}: error after {:.4} s, overrun {:+.1} ms",
                elapsed.as_secs_f64(),
                overrun * 1000.0
            );
        }
    }
}

fn ping_until_error(port: u16, options: &str) -> Duration {
    let uri = format!("mongodb://127.0.0.1:{port}/?directConnection=true&{options}");
    let client = Client::with_uri_str(&uri).expect("URI");
    let started = Instant::now();
    let outcome = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run();
    let elapsed = started.elapsed();
    outcome.expect_err("the server never answers");
    elapsed
}

/// A server on a free port that answers as `silence` says; its threads
/// hold each socket open until the client closes it.
fn silent_server(silence: Silence) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || serve(stream, silence));
        }
    });
    port
}

fn serve(mut stream: TcpStream, silence: Silence) {
    let mut answered = matches!(silence, Silence::Total);
    while let Ok(Some(frame)) = raw::read_frame(&mut stream) {
        if answered {
            continue;
        }
        answered = true;
        let hello = doc! {
            "isWritablePrimary": true, "helloOk": true, "maxWireVersion": 21,
            "minWireVersion": 0, "maxBsonObjectSize": 16_777_216,
            "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000, "ok": 1.0,
        };
        let reply = if frame.op_code == raw::OP_QUERY {
            raw::encode_op_reply(1, frame.request_id, &hello)
        } else {
            raw::OpMsg {
                flags: 0,
                body: hello,
                sequences: Vec::new(),
            }
            .encode(1, frame.request_id)
        };
        if std::io::Write::write_all(&mut stream, &reply).is_err() {
            return;
        }
    }
}
