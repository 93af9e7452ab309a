//! `timeoutMS` end to end: one deadline bounds server selection, the socket
//! read, the backoff before an overload retry, and what the server is told
//! (`maxTimeMS`). Time bounds are loose: these check behaviour on a shared,
//! loaded machine, they do not measure it.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::options::RetrySettings;
use mongo_inline::{Client, ClientOptions, Error, ErrorKind};
use support::events::{recorded_builder, Recorder};
use support::server::TestServer;
use support::sim::{Role, Simulator};

const DB: &str = "timeout";

fn client_with(uri: &str, settings: Option<RetrySettings>) -> (Client, Arc<Recorder>) {
    let (mut builder, sent) = recorded_builder(ClientOptions::parse(uri).run().expect("test URI"));
    if let Some(settings) = settings {
        builder = builder.retry_settings(settings);
    }
    (builder.build().expect("client"), sent)
}

fn is_timeout(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::Timeout { .. }) || error.is_network_timeout()
}

#[test]
fn the_uri_sets_the_client_timeout() {
    let options = ClientOptions::parse("mongodb://localhost/?timeoutMS=1500")
        .run()
        .unwrap();
    assert_eq!(options.timeout(), Some(Duration::from_millis(1500)));
    let options = ClientOptions::parse("mongodb://localhost/?timeoutMS=0")
        .run()
        .unwrap();
    assert_eq!(
        options.timeout(),
        Some(Duration::ZERO),
        "0 keeps CSOT on, without a limit"
    );
}

#[test]
fn max_time_ms_is_derived_from_the_time_left() {
    let server = TestServer::shared();
    let (client, sent) = client_with(&format!("{}&timeoutMS=5000", server.uri()), None);
    let coll = client.database(DB).collection::<Document>("max_time");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    sent.clear_commands();
    coll.find_one(doc! {}).run().unwrap();
    let find = &sent.named("find")[0];
    let max_time = find.get_i64("maxTimeMS").expect("maxTimeMS sent");
    assert!(
        (1..=5000).contains(&max_time) && max_time > 4000,
        "{max_time}"
    );

    // The collection's own timeout wins over the client's.
    sent.clear_commands();
    coll.clone()
        .with_timeout(Duration::from_millis(800))
        .find_one(doc! {})
        .run()
        .unwrap();
    let max_time = sent.named("find")[0].get_i64("maxTimeMS").unwrap();
    assert!((1..=800).contains(&max_time), "{max_time}");

    // Without timeoutMS no maxTimeMS is added.
    let (plain, sent) = client_with(&server.uri(), None);
    plain
        .database(DB)
        .collection::<Document>("max_time")
        .find_one(doc! {})
        .run()
        .unwrap();
    assert!(!sent.named("find")[0].contains_key("maxTimeMS"));
}

#[test]
fn selection_without_a_suitable_server_fails_at_the_deadline_with_a_timeout() {
    let sim = Simulator::replica_set("to1", TestServer::shared(), &[Role::Secondary]);
    // No primary: a write can never select. timeoutMS is the binding limit.
    let uri = format!(
        "{}&serverSelectionTryOnce=false&serverSelectionTimeoutMS=20000&timeoutMS=400",
        sim.seed_uri(&[0])
    );
    let (client, _) = client_with(&uri, None);
    let started = Instant::now();
    let error = client
        .database(DB)
        .collection::<Document>("no_primary")
        .insert_one(doc! { "a": 1 })
        .run()
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "expected a timeout error, got {error:?}"
    );
    assert!(error.to_string().contains("timeoutMS"), "{error}");
    assert!(
        error.to_string().contains("selecting a server"),
        "says what was under way: {error}"
    );
    // It may fail early, once the next scan could only start after the
    // deadline; never late.
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[test]
fn a_shorter_server_selection_timeout_still_gives_a_selection_error() {
    let sim = Simulator::replica_set("to2", TestServer::shared(), &[Role::Secondary]);
    let uri = format!(
        "{}&serverSelectionTryOnce=false&serverSelectionTimeoutMS=300&timeoutMS=20000",
        sim.seed_uri(&[0])
    );
    let (client, _) = client_with(&uri, None);
    let started = Instant::now();
    let error = client
        .database(DB)
        .collection::<Document>("no_primary")
        .insert_one(doc! { "a": 1 })
        .run()
        .unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_blocked_reply_times_out_at_the_deadline() {
    let server = TestServer::start();
    let (client, _) = client_with(&format!("{}&timeoutMS=400", server.uri()), None);
    let db = client.database(DB);
    let coll = db.collection::<Document>("blocked");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": { "failCommands": ["find"], "blockConnection": true, "blockTimeMS": 3000 },
        })
        .run()
        .unwrap();

    let started = Instant::now();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    let elapsed = started.elapsed();
    assert!(is_timeout(&error), "{error:?}");
    assert!(elapsed >= Duration::from_millis(350), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(1500),
        "the read stopped at the deadline, not after the block: {elapsed:?}"
    );

    // The client recovers: the next operation gets a fresh deadline.
    assert!(coll.find_one(doc! {}).run().unwrap().is_some());
}

#[test]
fn a_backoff_that_would_pass_the_deadline_fails_at_once() {
    let server = TestServer::start();
    // A huge base makes every backoff far longer than the 2 s timeout.
    let settings = RetrySettings::seed()
        .with_backoff(Duration::from_secs(10_000), Duration::from_secs(10_000));
    let (client, sent) = client_with(&format!("{}&timeoutMS=2000", server.uri()), Some(settings));
    let coll = client.database(DB).collection::<Document>("backoff");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": {
                "failCommands": ["find"],
                "errorCode": 462,
                "errorLabels": ["SystemOverloadedError", "RetryableError"],
            },
        })
        .run()
        .unwrap();
    sent.clear_commands();
    let tokens = client.retry_tokens().unwrap();

    let started = Instant::now();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("timeoutMS"), "{message}");
    assert!(message.contains("before retrying"), "{message}");
    assert!(
        message.contains("462"),
        "names the overload error: {message}"
    );
    assert!(
        elapsed < Duration::from_millis(1500),
        "no sleeping first: {elapsed:?}"
    );
    assert_eq!(sent.named("find").len(), 1, "no retry was sent");
    assert_eq!(
        client.retry_tokens().unwrap(),
        tokens,
        "no token was taken for a retry that never happened"
    );
}

#[test]
fn overload_retries_share_the_operation_deadline() {
    let server = TestServer::start();
    // Backoffs of up to 300 ms each, ten overloads, 500 ms in all: the
    // operation ends near its deadline with a timeout, not after ten tries.
    let settings =
        RetrySettings::seed().with_backoff(Duration::from_millis(300), Duration::from_millis(300));
    let (client, sent) = client_with(&format!("{}&timeoutMS=500", server.uri()), Some(settings));
    let coll = client
        .database(DB)
        .collection::<Document>("shared_deadline");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 10 },
            "data": {
                "failCommands": ["find"],
                "errorCode": 462,
                "errorLabels": ["SystemOverloadedError", "RetryableError"],
            },
        })
        .run()
        .unwrap();
    sent.clear_commands();

    let started = Instant::now();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    let elapsed = started.elapsed();
    let finds = sent.named("find");
    // Either the retries ran out (6 attempts) or the deadline stopped them.
    if finds.len() < 6 {
        assert!(
            matches!(error.kind(), ErrorKind::Timeout { .. }),
            "{error:?}"
        );
    } else {
        assert_eq!(error.code(), Some(462), "{error:?}");
    }
    assert!(elapsed < Duration::from_millis(1200), "{elapsed:?}");
    // Every attempt was told how long it had left, less each time.
    let budgets: Vec<i64> = finds
        .iter()
        .map(|f| f.get_i64("maxTimeMS").expect("maxTimeMS"))
        .collect();
    assert!(budgets.windows(2).all(|w| w[1] <= w[0]), "{budgets:?}");
    assert!(budgets.iter().all(|b| (1..=500).contains(b)), "{budgets:?}");
}

fn arm(client: &Client, data: Document) {
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": data,
        })
        .run()
        .unwrap();
}

#[test]
fn a_socket_timeout_under_timeout_ms_is_a_timeout_error() {
    let server = TestServer::start();
    let (client, _) = client_with(&format!("{}&timeoutMS=400", server.uri()), None);
    let coll = client.database(DB).collection::<Document>("blocked_write");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    // updateMany is not a retryable write, so the socket's timeout is what
    // comes back, and CSOT turns it into the timeout error.
    arm(
        &client,
        doc! { "failCommands": ["update"], "blockConnection": true, "blockTimeMS": 3000 },
    );
    let started = Instant::now();
    let error = coll
        .update_many(doc! {}, doc! { "$set": { "b": 1 } })
        .run()
        .unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("timed out"),
        "keeps the cause: {error}"
    );
    assert!(started.elapsed() < Duration::from_millis(1500));
}

#[test]
fn max_time_ms_expired_under_timeout_ms_is_a_timeout_error() {
    let server = TestServer::start();
    let (client, _) = client_with(&format!("{}&timeoutMS=5000", server.uri()), None);
    let coll = client
        .database(DB)
        .collection::<Document>("max_time_expired");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    arm(&client, doc! { "failCommands": ["find"], "errorCode": 50 });
    let error = coll.find_one(doc! {}).run().unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("50"), "keeps the cause: {error}");

    // Without timeoutMS the server's error comes back as it is.
    let (plain, _) = client_with(&server.uri(), None);
    arm(&plain, doc! { "failCommands": ["find"], "errorCode": 50 });
    let error = plain
        .database(DB)
        .collection::<Document>("max_time_expired")
        .find_one(doc! {})
        .run()
        .unwrap_err();
    assert_eq!(error.code(), Some(50), "{error:?}");
}

#[test]
fn a_max_time_ms_expired_write_concern_error_under_timeout_ms_is_a_timeout_error() {
    let server = TestServer::shared();
    let (client, sent) = client_with(&format!("{}&timeoutMS=5000", server.uri()), None);
    let coll = client.database(DB).collection::<Document>("wce_expired");
    let wce = doc! {
        "failCommands": ["insert"],
        "writeConcernError": { "code": 50, "errmsg": "maxTimeMS expired" },
    };
    arm(&client, wce.clone());
    let error = coll.insert_one(doc! { "a": 1 }).run().unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("50"), "keeps the cause: {error}");
    assert_eq!(sent.named("insert").len(), 1, "not retried");
    // In an insert_many's reply too.
    arm(&client, wce.clone());
    let error = coll
        .insert_many(vec![doc! { "a": 2 }, doc! { "a": 3 }])
        .run()
        .unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );

    // Without timeoutMS it stays the write concern error it is.
    let (plain, _) = client_with(&server.uri(), None);
    arm(&plain, wce);
    let error = plain
        .database(DB)
        .collection::<Document>("wce_expired")
        .insert_one(doc! { "a": 4 })
        .run()
        .unwrap_err();
    assert!(
        matches!(
            error.kind(),
            ErrorKind::Write(mongo_inline::results::WriteFailure::WriteConcernError(_))
        ),
        "{error:?}"
    );
}

#[test]
fn timeout_ms_overrides_socket_timeout_ms() {
    let server = TestServer::start();
    // A 150 ms socketTimeoutMS alone would cut this 400 ms reply off; any
    // timeoutMS, 0 (no limit) included, sets it aside.
    for timeout_ms in ["5000", "0"] {
        let (client, _) = client_with(
            &format!(
                "{}&socketTimeoutMS=150&timeoutMS={timeout_ms}",
                server.uri()
            ),
            None,
        );
        let coll = client
            .database(DB)
            .collection::<Document>(&format!("override_{timeout_ms}"));
        coll.insert_one(doc! { "a": 1 }).run().unwrap();
        arm(
            &client,
            doc! { "failCommands": ["update"], "blockConnection": true, "blockTimeMS": 400 },
        );
        let updated = coll
            .update_many(doc! {}, doc! { "$set": { "b": 1 } })
            .run()
            .unwrap_or_else(|e| {
                panic!("timeoutMS={timeout_ms}, not socketTimeoutMS, bounds the read: {e:?}")
            });
        assert_eq!(updated.modified_count, 1);
    }
}

#[test]
fn a_slow_scan_stops_at_the_deadline_and_leaves_no_cooldown() {
    let sim = Simulator::replica_set("to3", TestServer::shared(), &[Role::Primary]);
    // Every reply, the handshake's hello included, takes 2 s: far past the
    // 400 ms deadline, well within connectTimeoutMS.
    sim.delay_replies(0, Duration::from_secs(2));
    let (client, _) = client_with(
        &format!(
            "{}&timeoutMS=400&connectTimeoutMS=10000",
            sim.seed_uri(&[0])
        ),
        None,
    );
    let coll = client.database(DB).collection::<Document>("slow_scan");
    let started = Instant::now();
    let error = coll.find_one(doc! {}).run().unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    assert!(
        elapsed < Duration::from_millis(1500),
        "the scan's hello was bounded by the deadline: {elapsed:?}"
    );

    // Running out of time says nothing about the server: it is not put in
    // the cooldown of a failed check, so the next operation checks it again.
    sim.delay_replies(0, Duration::ZERO);
    // Rescans are at least minHeartbeatFrequencyMS (500 ms) apart, longer
    // than this deadline; the 5 s cooldown would be longer still.
    std::thread::sleep(Duration::from_millis(600));
    let found = coll.find_one(doc! {}).run();
    assert!(found.is_ok(), "{found:?}");
}
