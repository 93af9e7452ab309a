//! How the client behaves in a burst of operations against an overloaded
//! server, with and without the retry token bucket.
//!
//! A real SecantusDB (started as the tests start theirs; set `SECANTUSD`)
//! answers `find` with the ingress rate limiter's overload error (code 462,
//! `SystemOverloadedError` + `RetryableError`) through `failCommand`:
//!
//! - transient: the first 150 finds of a 200-find burst are rejected;
//! - prolonged: every find of a 400-find burst is rejected;
//! - recovery: 200 finds right after the prolonged overload, healthy.
//!
//! Backoffs are scaled down 100× (base 1 ms instead of 100 ms, via
//! `ClientBuilder::retry_settings`) so the run takes seconds; retry counts
//! and token arithmetic do not depend on the base. Printed per scenario and
//! configuration: operations that succeeded, attempts the server saw,
//! retries per operation, tokens left in the bucket, and goodput
//! (successful operations per second and per attempt).
//!
//! Run with `cargo bench --bench backpressure`.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::event::command::CommandEvent;
use mongo_inline::event::EventHandler;
use mongo_inline::options::RetrySettings;
use mongo_inline::{Client, ClientOptions, Collection};
use support::server::TestServer;

/// Counts the finds sent.
#[derive(Default)]
struct Attempts(AtomicUsize);

impl Attempts {
    /// A command handler that counts into `self`.
    fn handler(self: &Arc<Self>) -> EventHandler<CommandEvent> {
        let attempts = self.clone();
        EventHandler::callback(move |event| {
            if let CommandEvent::Started(started) = event {
                if started.command_name == "find" {
                    attempts.0.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    }
}

struct Run {
    ops: usize,
    succeeded: usize,
    attempts: usize,
    elapsed: Duration,
    tokens: Option<f64>,
}

fn fail_finds(client: &Client, times: Option<u32>) {
    let mode = match times {
        Some(n) => bson::Bson::Document(doc! { "times": n }),
        None => bson::Bson::String("off".into()),
    };
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": mode,
            "data": {
                "failCommands": ["find"],
                "errorCode": 462,
                "errorLabels": ["SystemOverloadedError", "RetryableError"],
            },
        })
        .run()
        .expect("configureFailPoint");
}

fn burst(client: &Client, coll: &Collection<Document>, attempts: &Attempts, ops: usize) -> Run {
    let before = attempts.0.load(Ordering::Relaxed);
    let started = Instant::now();
    let succeeded = (0..ops)
        .filter(|i| {
            coll.find_one(doc! { "_id": (*i % 10) as i32 })
                .run()
                .is_ok()
        })
        .count();
    Run {
        ops,
        succeeded,
        attempts: attempts.0.load(Ordering::Relaxed) - before,
        elapsed: started.elapsed(),
        tokens: client.retry_tokens().map(|t| t.as_f64()),
    }
}

fn print(scenario: &str, config: &str, run: &Run) {
    let seconds = run.elapsed.as_secs_f64().max(1e-9);
    println!(
        "{scenario:<10} {config:<10} {:>5}/{:<5} {:>8} {:>11.2} {:>8} {:>10.0} {:>10.3} {:>8.2}",
        run.succeeded,
        run.ops,
        run.attempts,
        (run.attempts - run.ops) as f64 / run.ops as f64,
        run.tokens
            .map_or_else(|| "-".to_string(), |t| format!("{t:.1}")),
        run.succeeded as f64 / seconds,
        run.succeeded as f64 / run.attempts.max(1) as f64,
        seconds,
    );
}

fn main() {
    let server = TestServer::start();
    let setup = Client::with_uri_str(server.uri()).expect("client");
    let coll = setup
        .database("bench")
        .collection::<Document>("backpressure");
    coll.drop().run().expect("drop");
    coll.insert_many((0..10).map(|i| doc! { "_id": i }))
        .run()
        .expect("insert");

    println!(
        "{:<10} {:<10} {:>11} {:>8} {:>11} {:>8} {:>10} {:>10} {:>8}",
        "scenario",
        "bucket",
        "ok/ops",
        "attempts",
        "retries/op",
        "tokens",
        "ok/s",
        "ok/attempt",
        "seconds"
    );
    for (config, bucket) in [("on", true), ("off", false)] {
        let attempts = Arc::new(Attempts::default());
        let mut options = ClientOptions::parse(server.uri()).run().expect("URI");
        options.command_event_handler = Some(attempts.handler());
        let client = Client::builder(options)
            .retry_settings(
                RetrySettings::seed()
                    .with_token_bucket(bucket)
                    .with_backoff(Duration::from_millis(1), Duration::from_millis(100)),
            )
            .build()
            .expect("client");
        let coll = client
            .database("bench")
            .collection::<Document>("backpressure");
        // Connect and select before measuring.
        coll.find_one(doc! {}).run().expect("warm-up find");

        fail_finds(&setup, Some(150));
        let run = burst(&client, &coll, &attempts, 200);
        print("transient", config, &run);

        fail_finds(&setup, Some(1_000_000));
        let run = burst(&client, &coll, &attempts, 400);
        print("prolonged", config, &run);
        fail_finds(&setup, None);

        let run = burst(&client, &coll, &attempts, 200);
        print("recovery", config, &run);
    }
}
