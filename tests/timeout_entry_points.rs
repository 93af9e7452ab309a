//! `timeoutMS` on the entry points outside a collection: the database's
//! `run_command`, `list_collection_names` and `create_collection`, and the
//! client's `list_database_names` each inherit the client's timeout, or the
//! database's own, and fail with a timeout near it when the server blocks;
//! `run_cursor_command` takes its own.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::options::{FindOptions, TimeoutMode};
use mongo_inline::{Client, ErrorKind, Result};
use support::server::TestServer;
use support::sim::{Role, Simulator};

const DB: &str = "timeout_entry_points";
const BLOCK_MS: i64 = 3000;

/// Makes the next `command` block for [`BLOCK_MS`] before replying.
fn block_next(client: &Client, command: &str) {
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": 1 },
            "data": { "failCommands": [command], "blockConnection": true, "blockTimeMS": BLOCK_MS },
        })
        .run()
        .unwrap();
}

/// Runs `operation` with `command` blocked; it must time out near 400 ms,
/// well before the block ends. Returns what went wrong, so that a test
/// reports every entry point that fails, not only the first.
fn times_out<T: std::fmt::Debug>(
    client: &Client,
    command: &str,
    operation: impl FnOnce() -> Result<T>,
) -> Option<String> {
    block_next(client, command);
    let started = Instant::now();
    let outcome = operation();
    let elapsed = started.elapsed();
    let problem = match outcome {
        Ok(value) => format!("{command} did not time out: {value:?}"),
        Err(error) if !matches!(error.kind(), ErrorKind::Timeout { .. }) => {
            format!("{command}: not a timeout: {error:?}")
        }
        Err(_) if elapsed < Duration::from_millis(350) => format!("{command}: early, {elapsed:?}"),
        Err(_) if elapsed >= Duration::from_millis(2000) => {
            format!("{command} waited for the block, not the deadline: {elapsed:?}")
        }
        Err(_) => return None,
    };
    // Let the blocked command finish before the next fail point.
    std::thread::sleep(Duration::from_millis(BLOCK_MS as u64));
    Some(problem)
}

#[test]
fn database_and_client_entry_points_inherit_the_client_timeout() {
    let server = TestServer::start();
    let client = Client::with_uri_str(format!("{}&timeoutMS=400", server.uri())).unwrap();
    let db = client.database(DB);
    db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .run()
        .unwrap();
    let mut problems = Vec::new();
    problems.extend(times_out(&client, "count", || {
        db.run_command(doc! { "count": "c" }).run()
    }));
    problems.extend(times_out(&client, "listCollections", || {
        db.list_collection_names().run()
    }));
    problems.extend(times_out(&client, "listDatabases", || {
        client.list_database_names().run()
    }));
    problems.extend(times_out(&client, "create", || {
        db.create_collection("d").run()
    }));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn database_entry_points_inherit_the_database_timeout() {
    let server = TestServer::start();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let db = client.database(DB).with_timeout(Duration::from_millis(400));
    db.collection::<Document>("c")
        .insert_one(doc! { "a": 1 })
        .run()
        .unwrap();
    let mut problems = Vec::new();
    problems.extend(times_out(&client, "count", || {
        db.run_command(doc! { "count": "c" }).run()
    }));
    problems.extend(times_out(&client, "listCollections", || {
        db.list_collection_names().run()
    }));
    problems.extend(times_out(&client, "create", || {
        db.create_collection("d").run()
    }));
    // An operation's own timeout, on a database without one: the blocked
    // command of run_cursor_command ends at it.
    problems.extend(times_out(&client, "find", || {
        client
            .database(DB)
            .run_cursor_command(doc! { "find": "c" })
            .timeout(Duration::from_millis(400))
            .run()
    }));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_cursors_get_more_and_a_commit_inherit_the_timeout() {
    let server = TestServer::start();
    let client = Client::with_uri_str(format!("{}&timeoutMS=400", server.uri())).unwrap();
    let coll = client.database(DB).collection::<Document>("c");
    coll.insert_many([doc! { "a": 1 }, doc! { "a": 2 }])
        .run()
        .unwrap();
    let mut problems = Vec::new();
    // Per iteration, each getMore gets the whole timeout afresh (a cursor's
    // default, its lifetime, would leave it what the find left).
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(1))
        .timeout_mode(TimeoutMode::Iteration)
        .run()
        .unwrap();
    assert!(cursor.next().unwrap().is_ok(), "the first batch");
    problems.extend(times_out(&client, "getMore", || {
        cursor.next().expect("a getMore result")
    }));
    drop(cursor);

    let mut session = client.start_session().run().unwrap();
    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "a": 3 })
        .session(&mut session)
        .run()
        .unwrap();
    problems.extend(times_out(&client, "commitTransaction", || {
        session.commit_transaction().run()
    }));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn with_transaction_stops_retrying_at_the_timeout() {
    let server = TestServer::start();
    let client = Client::with_uri_str(format!("{}&timeoutMS=400", server.uri())).unwrap();
    let coll = client.database(DB).collection::<Document>("c");
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    // Every insert fails with a transient error: withTransaction retries
    // until its time limit, which timeoutMS sets (120 s otherwise).
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": "alwaysOn",
            "data": { "failCommands": ["insert"], "errorCode": 112, "errorLabels": ["TransientTransactionError"] },
        }).run()
        .unwrap();
    let mut session = client.start_session().run().unwrap();
    let started = Instant::now();
    let outcome = session
        .start_transaction()
        .and_run(|session| coll.insert_one(doc! { "a": 2 }).session(session).run());
    let elapsed = started.elapsed();
    client
        .database("admin")
        .run_command(doc! { "configureFailPoint": "failCommand", "mode": "off" })
        .run()
        .unwrap();
    let error = outcome.expect_err("every attempt failed");
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "retried past timeoutMS: {elapsed:?}"
    );
}

#[test]
fn insert_many_batches_share_one_deadline() {
    let server = TestServer::shared();
    let sim = Simulator::standalone(server);
    // Two documents per batch, so ten documents take five round trips.
    sim.set_hello_extra(0, doc! { "maxWriteBatchSize": 2 });
    let client = Client::with_uri_str(format!("{}?timeoutMS=500", sim.seed_uri(&[0]))).unwrap();
    let coll = client
        .database(DB)
        .collection::<Document>(&format!("batches_{}", bson::oid::ObjectId::new()));
    client
        .database(DB)
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    sim.delay_replies(0, Duration::from_millis(150));
    let documents: Vec<Document> = (0..10).map(|i| doc! { "_id": i }).collect();
    let started = Instant::now();
    let outcome = coll.insert_many(documents.iter()).run();
    let elapsed = started.elapsed();
    sim.delay_replies(0, Duration::ZERO);
    let error = outcome.expect_err("five 150 ms batches do not fit in 500 ms");
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    assert!(elapsed < Duration::from_millis(700), "{elapsed:?}");
    // The same batches fit when nothing is slow: the limit is the whole call's.
    coll.delete_many(doc! {}).run().unwrap();
    coll.insert_many(documents.iter())
        .run()
        .expect("fast batches fit");
}

#[test]
fn with_transactions_operations_and_commit_share_its_deadline() {
    let sim = Simulator::replica_set("wt_deadline", TestServer::shared(), &[Role::Primary]);
    let client = Client::with_uri_str(format!("{}&timeoutMS=500", sim.seed_uri(&[0]))).unwrap();
    let coll = client
        .database(DB)
        .collection::<Document>(&format!("txn_deadline_{}", bson::oid::ObjectId::new()));
    coll.insert_one(doc! { "_id": 0 }).run().unwrap();
    sim.delay_replies(0, Duration::from_millis(150));
    let mut session = client.start_session().run().unwrap();
    let started = Instant::now();
    let outcome = session.start_transaction().and_run(|s| {
        for id in 1..=4 {
            coll.insert_one(doc! { "_id": id }).session(s).run()?;
        }
        Ok(())
    });
    let elapsed = started.elapsed();
    sim.delay_replies(0, Duration::ZERO);
    let error = outcome.expect_err("four 150 ms inserts and a commit do not fit in 500 ms");
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }),
        "{error:?}"
    );
    // The timeout error shows the deadline is shared (with one deadline per
    // operation, all four inserts and the commit fit). The bound only
    // catches a wait far past it: the deadline, the abort's own round
    // trip, and room for a loaded two-core machine.
    assert!(elapsed < Duration::from_millis(2000), "{elapsed:?}");
    assert_eq!(
        coll.count_documents(doc! {}).run().unwrap(),
        1,
        "nothing committed"
    );
}

#[test]
fn a_cursors_kill_cursors_is_bounded_by_the_timeout() {
    let server = TestServer::start();
    let client = Client::with_uri_str(format!("{}&timeoutMS=400", server.uri())).unwrap();
    let coll = client.database(DB).collection::<Document>("kill");
    coll.insert_many((0..4).map(|i| doc! { "_id": i }))
        .run()
        .unwrap();
    // Per iteration, each getMore gets the whole timeout afresh (a cursor's
    // default, its lifetime, would leave it what the find left).
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(1))
        .timeout_mode(TimeoutMode::Iteration)
        .run()
        .unwrap();
    assert!(cursor.next().unwrap().is_ok(), "the first batch");
    block_next(&client, "killCursors");
    let started = Instant::now();
    drop(cursor);
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(1500),
        "dropping the cursor waited for the blocked killCursors: {elapsed:?}"
    );
    // Let the blocked command finish before the server stops.
    std::thread::sleep(Duration::from_millis(BLOCK_MS as u64));
}
