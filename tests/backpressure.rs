//! Client backpressure end to end: SecantusDB's `failCommand` answers with
//! the ingress rate limiter's overload error (code 462, labels
//! `SystemOverloadedError` + `RetryableError`) and every kind of command —
//! a retryable read, a multi-document write, a cursor's getMore, a generic
//! runCommand — is retried with backoff until it succeeds or the overload
//! retry budget (5 retries) runs out. With the published policy, backoffs
//! follow the `baseBackoffMS` the topology simulator adds to the errors.
//!
//! Attempts are counted from the command events a recording handler sees;
//! backoffs are the gaps between a failed event and the next started one.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::event::command::CommandEvent;
use mongo_inline::options::FindOptions;
use mongo_inline::options::RetrySettings;
use mongo_inline::{ClientOptions, Collection, Database, ServerAddress};
use support::events::{recorded_builder, recorded_client, Recorder};
use support::server::TestServer;
use support::sim::{Role, Simulator};

const DB: &str = "backpressure";
const OVERLOADED: i32 = 462;
/// Backoffs measured on a loaded machine run late, never early: this much
/// is allowed on top of each upper bound.
const SLACK: Duration = Duration::from_millis(150);

#[derive(Clone, Debug)]
enum Seen {
    Started,
    Succeeded,
    Failed(Option<i32>),
}

/// One event of a command, with when it happened.
#[derive(Clone, Debug)]
struct Event {
    at: Instant,
    address: ServerAddress,
    seen: Seen,
}

/// The events of the `name` commands, in order.
fn of(recorder: &Recorder, name: &str) -> Vec<Event> {
    recorder
        .timed_commands()
        .into_iter()
        .filter_map(|(at, event)| {
            let (command_name, connection, seen) = match event {
                CommandEvent::Started(e) => (e.command_name, e.connection, Seen::Started),
                CommandEvent::Succeeded(e) => (e.command_name, e.connection, Seen::Succeeded),
                CommandEvent::Failed(e) => {
                    (e.command_name, e.connection, Seen::Failed(e.failure.code()))
                }
                _ => return None,
            };
            (command_name == name).then_some(Event {
                at,
                address: connection.address,
                seen,
            })
        })
        .collect()
}

/// The waits between each failed `name` and the next started `name`.
fn backoffs(recorder: &Recorder, name: &str) -> Vec<Duration> {
    of(recorder, name)
        .windows(2)
        .filter(|w| matches!(w[0].seen, Seen::Failed(_)) && matches!(w[1].seen, Seen::Started))
        .map(|w| w[1].at - w[0].at)
        .collect()
}

/// Arms `failCommand` so the next `times` `commands` fail with the
/// overload error carrying `labels`.
fn overload(db: &Database, commands: &[&str], times: u32, labels: &[&str]) {
    db.client()
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": times },
            "data": {
                "failCommands": commands,
                "errorCode": OVERLOADED,
                "errorLabels": labels,
            },
        })
        .run()
        .expect("configureFailPoint");
}

const LABELS: [&str; 2] = ["SystemOverloadedError", "RetryableError"];

fn numbers(db: &Database, name: &str, n: i32) -> Collection<Document> {
    let coll = db.collection::<Document>(name);
    coll.drop().run().expect("drop");
    coll.insert_many((0..n).map(|i| doc! { "_id": i, "n": i }))
        .run()
        .expect("insert");
    coll
}

/// Each backoff is within `[0, 100 ms · 2^i]` (plus scheduling slack).
fn assert_backoffs_bounded(backoffs: &[Duration]) {
    for (i, wait) in backoffs.iter().enumerate() {
        let cap = Duration::from_millis(100 << i) + SLACK;
        assert!(*wait <= cap, "backoff {i} took {wait:?}, over {cap:?}");
    }
}

#[test]
fn find_succeeds_after_overloads_with_bounded_backoff() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let db = client.database(DB);
    let coll = numbers(&db, "find", 3);
    overload(&db, &["find"], 3, &LABELS);
    recorder.clear_commands();

    let started = Instant::now();
    let found = coll
        .find_one(doc! { "_id": 2 })
        .run()
        .expect("find after 3 overloads");
    let elapsed = started.elapsed();
    assert_eq!(found, Some(doc! { "_id": 2, "n": 2 }));

    assert_eq!(
        recorder.named("find").len(),
        4,
        "3 failures and the success"
    );
    let events = of(&recorder, "find");
    let kinds: Vec<String> = events.iter().map(|e| format!("{:?}", e.seen)).collect();
    assert_eq!(
        kinds,
        [
            "Started",
            "Failed(Some(462))",
            "Started",
            "Failed(Some(462))",
            "Started",
            "Failed(Some(462))",
            "Started",
            "Succeeded"
        ],
        "each retried error has its failed event, each retry its started event"
    );
    let backoffs = backoffs(&recorder, "find");
    assert_eq!(backoffs.len(), 3);
    assert_backoffs_bounded(&backoffs);
    // 100 + 200 + 400 ms at most, plus the round trips.
    assert!(
        elapsed <= Duration::from_millis(700) + SLACK * 3,
        "{elapsed:?}"
    );
}

#[test]
fn update_many_is_retried_on_overload_and_applied_once() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let db = client.database(DB);
    let coll = numbers(&db, "update_many", 4);
    overload(&db, &["update"], 2, &LABELS);
    recorder.clear_commands();

    let result = coll
        .update_many(doc! {}, doc! { "$inc": { "n": 10 } })
        .run()
        .expect("updateMany after 2 overloads");
    assert_eq!(result.modified_count, 4);
    assert_eq!(recorder.named("update").len(), 3);
    assert_backoffs_bounded(&backoffs(&recorder, "update"));
    let total: i32 = coll
        .find(doc! {})
        .run()
        .unwrap()
        .map(|d| d.unwrap().get_i32("n").unwrap())
        .sum();
    assert_eq!(total, (1 + 2 + 3) + 4 * 10, "the update ran exactly once");
}

#[test]
fn get_more_is_retried_on_overload_and_the_cursor_loses_nothing() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let db = client.database(DB);
    let coll = numbers(&db, "get_more", 5);
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2).sort(doc! { "_id": 1 }))
        .run()
        .expect("find");
    let first = cursor.next().expect("first").expect("document");
    assert_eq!(first.get_i32("_id"), Ok(0));
    overload(&db, &["getMore"], 2, &LABELS);
    recorder.clear_commands();

    let rest: Vec<i32> = cursor
        .map(|d| d.expect("document").get_i32("_id").unwrap())
        .collect();
    assert_eq!(rest, [1, 2, 3, 4]);
    // Two getMores succeed (documents 2-3, then 4 and the end), the first
    // of them after two overloads.
    assert_eq!(recorder.named("getMore").len(), 4);
    let failed = of(&recorder, "getMore")
        .iter()
        .filter(|e| matches!(e.seen, Seen::Failed(Some(OVERLOADED))))
        .count();
    assert_eq!(failed, 2);
    assert_backoffs_bounded(&backoffs(&recorder, "getMore"));
}

#[test]
fn run_command_is_retried_on_overload() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let db = client.database(DB);
    db.collection::<Document>("run_command")
        .drop()
        .run()
        .expect("drop");
    overload(&db, &["insert"], 3, &LABELS);
    recorder.clear_commands();

    let reply = db
        .run_command(doc! { "insert": "run_command", "documents": [{ "_id": "x" }] })
        .run()
        .expect("insert through runCommand after 3 overloads");
    assert_eq!(reply.get_i32("n"), Ok(1), "{reply}");
    assert_eq!(recorder.named("insert").len(), 4);
    assert_backoffs_bounded(&backoffs(&recorder, "insert"));
    let coll = db.collection::<Document>("run_command");
    assert_eq!(coll.count_documents(doc! {}).run().unwrap(), 1);
}

#[test]
fn six_overloads_in_a_row_give_up_after_five_retries() {
    let server = TestServer::start();
    // A 10 ms base keeps the test short; the budget does not depend on it.
    let (client, recorder) = {
        let (builder, recorder) =
            recorded_builder(ClientOptions::parse(server.uri()).run().unwrap());
        let client = builder
            .retry_settings(
                RetrySettings::seed()
                    .with_backoff(Duration::from_millis(10), Duration::from_secs(10)),
            )
            .build()
            .unwrap();
        (client, recorder)
    };
    let db = client.database(DB);
    let coll = numbers(&db, "give_up", 1);
    overload(&db, &["find"], 6, &LABELS);
    recorder.clear_commands();
    let tokens_before = client.retry_tokens().expect("the seed policy has a bucket");

    let error = coll
        .find_one(doc! {})
        .run()
        .expect_err("six overloads exhaust five retries");
    assert_eq!(error.code(), Some(OVERLOADED), "{error}");
    assert!(error.contains_label("SystemOverloadedError"), "{error}");
    assert_eq!(
        recorder.named("find").len(),
        6,
        "one attempt and five retries"
    );
    assert_eq!(
        client.retry_tokens().unwrap().tenths(),
        tokens_before.tenths() - 50,
        "each of the five retries took a token"
    );

    // The fail point is spent: the next find works at once.
    recorder.clear_commands();
    assert!(coll.find_one(doc! {}).run().unwrap().is_some());
    assert_eq!(recorder.named("find").len(), 1);
}

#[test]
fn six_overloads_give_up_within_the_default_backoff_bounds() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let db = client.database(DB);
    let coll = numbers(&db, "give_up_default", 1);
    overload(&db, &["find"], 6, &LABELS);
    recorder.clear_commands();

    let started = Instant::now();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(error.code(), Some(OVERLOADED), "{error}");
    assert_eq!(recorder.named("find").len(), 6);
    let backoffs = backoffs(&recorder, "find");
    assert_eq!(backoffs.len(), 5);
    assert_backoffs_bounded(&backoffs);
    // 100 + 200 + 400 + 800 + 1600 ms at most.
    assert!(
        elapsed <= Duration::from_millis(3100) + SLACK * 5,
        "{elapsed:?}"
    );
}

#[test]
fn an_overload_error_without_retryable_error_is_not_retried() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let db = client.database(DB);
    let coll = numbers(&db, "not_retryable", 2);

    // Not by a retryable read...
    overload(&db, &["find"], 1, &["SystemOverloadedError"]);
    recorder.clear_commands();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    assert_eq!(error.code(), Some(OVERLOADED), "{error}");
    assert_eq!(recorder.named("find").len(), 1);

    // ...nor by a write that touches many documents.
    overload(&db, &["update"], 1, &["SystemOverloadedError"]);
    recorder.clear_commands();
    let error = coll
        .update_many(doc! {}, doc! { "$set": { "x": 1 } })
        .run()
        .unwrap_err();
    assert_eq!(error.code(), Some(OVERLOADED), "{error}");
    assert_eq!(recorder.named("update").len(), 1);
    assert_eq!(
        coll.count_documents(doc! { "x": 1 }).run().unwrap(),
        0,
        "the failed update changed nothing"
    );
}

#[test]
fn the_retry_after_an_overload_goes_to_the_other_router() {
    let server = TestServer::start();
    let sim = Simulator::mongos(&server, 2);
    // Both routers in the latency window, so only deprioritization decides.
    let (client, recorder) =
        recorded_client(&format!("{}?localThresholdMS=1000", sim.seed_uri(&[0, 1])));
    let db = client.database(DB);
    let coll = numbers(&db, "mongos", 1);

    for round in 0..4 {
        overload(&db, &["find"], 1, &LABELS);
        sim.reset_observations();
        recorder.clear_commands();
        assert!(coll.find_one(doc! {}).run().unwrap().is_some());
        let events = of(&recorder, "find");
        assert_eq!(events.len(), 4, "round {round}: {events:?}");
        assert!(matches!(events[1].seen, Seen::Failed(Some(OVERLOADED))));
        assert_ne!(
            events[1].address, events[2].address,
            "round {round}: the retry avoids the overloaded router"
        );
        let finds: Vec<usize> = (0..2)
            .map(|i| sim.commands(i).iter().filter(|c| *c == "find").count())
            .collect();
        assert_eq!(finds, [1, 1], "round {round}: each router saw one find");
    }
}

#[test]
fn max_adaptive_retries_opts_into_the_published_budget() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&format!("{}&maxAdaptiveRetries=2", server.uri()));
    assert_eq!(
        client.retry_tokens(),
        None,
        "the published behaviour has no bucket"
    );
    let db = client.database(DB);
    let coll = numbers(&db, "published", 1);

    overload(&db, &["find"], 2, &LABELS);
    recorder.clear_commands();
    assert!(coll.find_one(doc! {}).run().unwrap().is_some());
    assert_eq!(recorder.named("find").len(), 3, "two retries are allowed");

    overload(&db, &["find"], 3, &LABELS);
    recorder.clear_commands();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    assert_eq!(error.code(), Some(OVERLOADED), "{error}");
    assert_eq!(recorder.named("find").len(), 3, "no third retry");
}

#[test]
fn overload_retargeting_avoids_the_overloaded_replica_set_member() {
    let server = TestServer::start();
    let sim = Simulator::replica_set("bp_rs", &server, &[Role::Primary, Role::Secondary]);
    // Reads may go to either member; only retargeting decides the retry.
    let (client, recorder) = recorded_client(&format!(
        "{}&readPreference=nearest&localThresholdMS=1000&enableOverloadRetargeting=true",
        sim.seed_uri(&[0, 1])
    ));
    let db = client.database(DB);
    let coll = numbers(&db, "retarget", 1);
    for round in 0..4 {
        overload(&db, &["find"], 1, &LABELS);
        recorder.clear_commands();
        assert!(coll.find_one(doc! {}).run().unwrap().is_some());
        let events = of(&recorder, "find");
        assert_eq!(events.len(), 4, "round {round}: {events:?}");
        assert_ne!(
            events[1].address, events[2].address,
            "round {round}: the retry avoids the overloaded member"
        );
    }
}

/// Log records, with the thread that logged them (tests run in parallel).
struct Lines(Mutex<Vec<(std::thread::ThreadId, String, String)>>);

impl log::Log for Lines {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        self.0.lock().unwrap().push((
            std::thread::current().id(),
            record.target().to_string(),
            record.args().to_string(),
        ));
    }

    fn flush(&self) {}
}

static LINES: Lines = Lines(Mutex::new(Vec::new()));

#[test]
fn each_retry_is_logged_at_debug_level() {
    let _ = log::set_logger(&LINES);
    log::set_max_level(log::LevelFilter::Debug);
    let server = TestServer::start();
    let (client, _) = recorded_client(&server.uri());
    let db = client.database(DB);
    let coll = numbers(&db, "logged", 1);
    overload(&db, &["find"], 2, &LABELS);
    assert!(coll.find_one(doc! {}).run().unwrap().is_some());

    let me = std::thread::current().id();
    let lines: Vec<String> = LINES
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(thread, target, _)| {
            *thread == me && target == mongo_inline::event::RETRY_LOG_TARGET
        })
        .map(|(_, _, line)| line.clone())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with("retrying find (retry 1)"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("retrying find (retry 2)"),
        "{}",
        lines[1]
    );
    for line in &lines {
        assert!(line.contains("overload backoff"), "{line}");
        assert!(line.contains("retry tokens left"), "{line}");
        assert!(line.contains("462"), "names the error: {line}");
    }
}

#[test]
fn a_backoff_past_the_deadline_is_a_timeout_that_keeps_the_overload_labels() {
    let server = TestServer::start();
    // A backoff cap of a million seconds: whatever the jitter, the first
    // backoff cannot fit in the 2 s timeoutMS.
    let huge = Duration::from_secs(1_000_000);
    let (client, recorder) = {
        let uri = format!("{}&timeoutMS=2000", server.uri());
        let (builder, recorder) = recorded_builder(ClientOptions::parse(&uri).run().unwrap());
        let client = builder
            .retry_settings(RetrySettings::seed().with_backoff(huge, huge))
            .build()
            .unwrap();
        (client, recorder)
    };
    let db = client.database(DB);
    let coll = numbers(&db, "deadline", 1);
    overload(&db, &["find"], 1, &LABELS);
    recorder.clear_commands();

    let started = Instant::now();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    assert!(
        matches!(error.kind(), mongo_inline::ErrorKind::Timeout { .. }),
        "{error}"
    );
    // The README tells users to check these labels on any error.
    assert!(error.contains_label("SystemOverloadedError"), "{error:?}");
    assert!(error.contains_label("RetryableError"), "{error:?}");
    assert_eq!(recorder.named("find").len(), 1, "no retry was sent");
    assert!(started.elapsed() < Duration::from_secs(2), "no sleeping");
}

#[test]
fn published_retries_back_off_from_the_servers_base_backoff() {
    let server = TestServer::start();
    // SecantusDB's fail point sends no `baseBackoffMS`; the simulator adds
    // it to the overload errors it forwards, as MongoDB 9.0 does.
    let sim = Simulator::standalone(&server);
    // The client's own base is 1000 s: a backoff from it cannot fit in the
    // 2 s timeoutMS (unless the jitter is below 0.002), so retries that
    // finish in time waited by the server's 1 ms.
    let huge = Duration::from_secs(1000);
    let (client, recorder) = {
        let uri = format!("{}?timeoutMS=2000", sim.seed_uri(&[0]));
        let (builder, recorder) = recorded_builder(ClientOptions::parse(&uri).run().unwrap());
        let client = builder
            .retry_settings(RetrySettings::published(2, false).with_backoff(huge, huge))
            .build()
            .unwrap();
        (client, recorder)
    };
    let db = client.database(DB);
    let coll = numbers(&db, "server_base", 1);
    sim.set_error_extra(0, doc! { "baseBackoffMS": 1 });
    overload(&db, &["find"], 3, &LABELS);
    recorder.clear_commands();

    let error = coll.find_one(doc! {}).run().unwrap_err();
    assert_eq!(
        error.code(),
        Some(OVERLOADED),
        "gave up after maxAdaptiveRetries, not at the deadline: {error}"
    );
    assert_eq!(error.base_backoff(), Some(Duration::from_millis(1)));
    assert_eq!(recorder.named("find").len(), 3, "one attempt, two retries");
    let backoffs = backoffs(&recorder, "find");
    assert_eq!(backoffs.len(), 2);
    for (n, wait) in backoffs.iter().enumerate() {
        // Retry n + 1 waits up to 1 ms · 2^(n + 1).
        let cap = Duration::from_millis(2 << n) + SLACK;
        assert!(*wait <= cap, "backoff {n} took {wait:?}, over {cap:?}");
    }

    // Without the server's value, the same client backs off from its own
    // base, past the deadline: a timeout at once, no retry sent.
    sim.set_error_extra(0, Document::new());
    overload(&db, &["find"], 1, &LABELS);
    recorder.clear_commands();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    assert!(
        matches!(error.kind(), mongo_inline::ErrorKind::Timeout { .. }),
        "{error}"
    );
    assert_eq!(error.base_backoff(), None);
    assert_eq!(recorder.named("find").len(), 1, "no retry was sent");
}
