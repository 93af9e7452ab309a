//! `timeoutMS` on the entry points outside a collection: the database's
//! `run_command`, `list_collection_names` and `create_collection`, and the
//! client's `list_database_names` each inherit the client's timeout, or the
//! database's own, and fail with a timeout near it when the server blocks.

mod support;

use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::coll_options::FindOptions;
use mongo_inline::{Client, ErrorKind, Result};
use support::server::TestServer;

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
    let client = Client::with_uri_str(&format!("{}&timeoutMS=400", server.uri())).unwrap();
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
    let client = Client::with_uri_str(&server.uri()).unwrap();
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
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_cursors_get_more_and_a_commit_inherit_the_timeout() {
    let server = TestServer::start();
    let client = Client::with_uri_str(&format!("{}&timeoutMS=400", server.uri())).unwrap();
    let coll = client.database(DB).collection::<Document>("c");
    coll.insert_many([doc! { "a": 1 }, doc! { "a": 2 }])
        .run()
        .unwrap();
    let mut problems = Vec::new();
    let mut cursor = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(1))
        .run()
        .unwrap();
    assert!(cursor.next().unwrap().is_ok(), "the first batch");
    problems.extend(times_out(&client, "getMore", || {
        cursor.next().expect("a getMore result")
    }));
    drop(cursor);

    let mut session = client.start_session().run().unwrap();
    session.start_transaction(None).unwrap();
    coll.insert_one(doc! { "a": 3 })
        .session(&mut session)
        .run()
        .unwrap();
    problems.extend(times_out(&client, "commitTransaction", || {
        session.commit_transaction()
    }));
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn with_transaction_stops_retrying_at_the_timeout() {
    let server = TestServer::start();
    let client = Client::with_uri_str(&format!("{}&timeoutMS=400", server.uri())).unwrap();
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
    let outcome = session.with_transaction(None, |session| {
        coll.insert_one(doc! { "a": 2 }).session(session).run()
    });
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
