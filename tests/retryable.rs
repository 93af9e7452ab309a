//! Retryable writes and reads end to end: fail points on a dedicated
//! SecantusDB inject one failure, and the recorded commands show what was
//! retried, with which `txnNumber`, and where.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Bson, Document};
use mongo_inline::options::FindOptions;
use mongo_inline::{Client, Collection, Error};
use support::events::recorded_client;
use support::server::TestServer;
use support::sim::Simulator;

fn with_option(uri: &str, option: &str) -> String {
    if uri.contains('?') {
        format!("{uri}&{option}")
    } else {
        format!("{uri}?{option}")
    }
}

/// Arms `failCommand` for the next `times` of `commands`.
fn fail(client: &Client, commands: &[&str], times: i32, data: Document) {
    let mut data = data;
    data.insert("failCommands", commands.to_vec());
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": times },
            "data": data,
        })
        .run()
        .unwrap();
}

fn close_connection() -> Document {
    doc! { "closeConnection": true }
}

fn retryable_write_error() -> Document {
    doc! { "errorCode": 91, "errorLabels": ["RetryableWriteError"] }
}

fn collection(client: &Client, name: &str) -> Collection<Document> {
    let coll = client.database("retryable").collection::<Document>(name);
    coll.drop().run().unwrap();
    coll.insert_one(doc! { "_id": "seed" }).run().unwrap();
    coll
}

fn count(client: &Client, name: &str, filter: Document) -> u64 {
    client
        .database("retryable")
        .collection::<Document>(name)
        .count_documents(filter)
        .run()
        .unwrap()
}

/// insert_one through one injected failure: it succeeds, the document
/// exists once, and both attempts carried the same lsid and txnNumber.
fn insert_survives(failure: Document) {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = collection(&client, "insert_once");
    fail(&client, &["insert"], 1, failure);
    recorder.clear_commands();
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    let inserts = recorder.named("insert");
    assert_eq!(inserts.len(), 2, "{inserts:?}");
    let txn_number = inserts[0].get_i64("txnNumber").expect("a txnNumber");
    assert_eq!(inserts[1].get_i64("txnNumber"), Ok(txn_number));
    assert_eq!(
        inserts[0].get_document("lsid"),
        inserts[1].get_document("lsid")
    );
    assert_eq!(count(&client, "insert_once", doc! { "_id": 1 }), 1);
}

#[test]
fn insert_one_is_retried_after_a_closed_connection() {
    insert_survives(close_connection());
}

#[test]
fn insert_one_is_retried_after_a_retryable_write_error() {
    insert_survives(retryable_write_error());
}

/// SDAM "Application errors" and the retryable writes spec: an `ok: 1`
/// reply whose writeConcernError carries a state-change code (a step-down
/// under `w: majority`) marks the server Unknown, and the write is retried
/// when the reply is labelled `RetryableWriteError`.
#[test]
fn a_write_concern_error_marks_the_server_unknown_and_is_retried() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = collection(&client, "write_concern_error");
    fail(
        &client,
        &["insert"],
        1,
        doc! {
            "writeConcernError": { "code": 91, "errmsg": "Replication is being shut down" },
            "errorLabels": ["RetryableWriteError"],
        },
    );
    recorder.clear_commands();
    let sdam_before = recorder.sdam().len();

    coll.insert_one(doc! { "_id": 1 }).run().unwrap();

    let inserts = recorder.named("insert");
    assert_eq!(inserts.len(), 2, "one retry: {inserts:?}");
    let txn_number = inserts[0].get_i64("txnNumber").expect("a txnNumber");
    assert_eq!(inserts[1].get_i64("txnNumber"), Ok(txn_number));
    assert_eq!(count(&client, "write_concern_error", doc! { "_id": 1 }), 1);
    let marked_unknown = recorder.sdam()[sdam_before..].iter().any(|event| {
        matches!(
            event,
            mongo_inline::event::sdam::SdamEvent::ServerDescriptionChanged(e)
                if e.new_description.server_type == mongo_inline::event::ServerType::Unknown
        )
    });
    assert!(marked_unknown, "{:#?}", &recorder.sdam()[sdam_before..]);
}

/// A writeConcernError without `RetryableWriteError` is returned as is.
#[test]
fn a_write_concern_error_without_the_label_is_not_retried() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = collection(&client, "write_concern_error_final");
    fail(
        &client,
        &["insert"],
        1,
        doc! { "writeConcernError": { "code": 64, "errmsg": "waiting for replication timed out" } },
    );
    recorder.clear_commands();
    let error = coll.insert_one(doc! { "_id": 1 }).run().unwrap_err();
    assert_eq!(error.code(), Some(64), "{error:?}");
    assert_eq!(recorder.named("insert").len(), 1);
}

#[test]
fn update_many_is_not_retried_on_a_retryable_write_error() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = collection(&client, "update_many");
    fail(&client, &["update"], 1, retryable_write_error());
    recorder.clear_commands();
    let error = coll
        .update_many(doc! {}, doc! { "$set": { "a": 1 } })
        .run()
        .unwrap_err();
    assert_eq!(error.code(), Some(91), "{error:?}");
    let updates = recorder.named("update");
    assert_eq!(updates.len(), 1);
    assert!(!updates[0].contains_key("txnNumber"), "{}", updates[0]);
}

#[test]
fn update_many_is_retried_on_an_overload_error() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = collection(&client, "update_many_overload");
    fail(
        &client,
        &["update"],
        1,
        doc! {
            "errorCode": 462,
            "errorLabels": ["RetryableError", "SystemOverloadedError"],
        },
    );
    recorder.clear_commands();
    let result = coll
        .update_many(doc! {}, doc! { "$set": { "a": 1 } })
        .run()
        .unwrap();
    assert_eq!(result.modified_count, 1);
    assert_eq!(recorder.named("update").len(), 2);
}

#[test]
fn retry_writes_false_disables_the_retry() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&with_option(&server.uri(), "retryWrites=false"));
    let coll = collection(&client, "no_retry");
    fail(&client, &["insert"], 1, close_connection());
    recorder.clear_commands();
    let error = coll.insert_one(doc! { "_id": 1 }).run().unwrap_err();
    assert!(error.is_network_error(), "{error:?}");
    let inserts = recorder.named("insert");
    assert_eq!(inserts.len(), 1);
    assert!(!inserts[0].contains_key("txnNumber"), "{}", inserts[0]);
}

#[test]
fn a_write_retry_on_mongos_goes_to_the_other_router() {
    let server = TestServer::start();
    let sim = Simulator::mongos(&server, 2);
    let (client, recorder) = recorded_client(&sim.seed_uri(&[0, 1]));
    let coll = collection(&client, "mongos_retry");
    fail(&client, &["insert"], 1, close_connection());
    recorder.clear_commands();
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    let inserts = recorder.sent("insert");
    assert_eq!(inserts.len(), 2, "{inserts:?}");
    // A sharded cluster deprioritizes the router that failed.
    assert_ne!(
        inserts[0].0, inserts[1].0,
        "the retry went to the same router"
    );
    assert_eq!(
        inserts[0].1.get_i64("txnNumber").unwrap(),
        inserts[1].1.get_i64("txnNumber").unwrap()
    );
    assert_eq!(count(&client, "mongos_retry", doc! { "_id": 1 }), 1);
}

/// Runs each read once after arming `failure` for it, and returns the
/// attempts each read took (or its error).
fn reads_through(
    uri: &str,
    failure: Document,
    times: i32,
) -> Vec<(&'static str, usize, Option<Error>)> {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&with_option(&server.uri(), uri));
    let coll = collection(&client, "reads");
    let mut outcomes = Vec::new();
    type Read = fn(&Collection<Document>) -> Result<(), Error>;
    let reads: [(&'static str, &'static str, Read); 4] = [
        ("find", "find", |c| {
            c.find(doc! {})
                .with_options(FindOptions::default())
                .run()?
                .collect::<Result<Vec<_>, _>>()
                .map(|d| assert_eq!(d.len(), 1))
        }),
        ("aggregate", "aggregate", |c| {
            c.aggregate([doc! { "$match": {} }])
                .run()?
                .collect::<Result<Vec<_>, _>>()
                .map(|d| assert_eq!(d.len(), 1))
        }),
        // count_documents is an aggregate on the wire.
        ("count_documents", "aggregate", |c| {
            c.count_documents(doc! {}).run().map(|n| assert_eq!(n, 1))
        }),
        ("distinct", "distinct", |c| {
            c.distinct("_id", doc! {})
                .run()
                .map(|v| assert_eq!(v, vec![Bson::String("seed".into())]))
        }),
    ];
    for (label, command, read) in reads {
        fail(&client, &[command], times, failure.clone());
        recorder.clear_commands();
        let outcome = read(&coll).err();
        outcomes.push((label, recorder.named(command).len(), outcome));
        // Disarm whatever is left, so the next read starts clean.
        client
            .database("admin")
            .run_command(doc! { "configureFailPoint": "failCommand", "mode": "off" })
            .run()
            .unwrap();
    }
    outcomes
}

#[test]
fn reads_are_retried_once_after_a_closed_connection() {
    for (read, attempts, error) in reads_through("", close_connection(), 1) {
        assert!(error.is_none(), "{read}: {error:?}");
        assert_eq!(attempts, 2, "{read}");
    }
}

#[test]
fn reads_are_retried_once_after_a_retryable_code() {
    for (read, attempts, error) in reads_through("", doc! { "errorCode": 11600 }, 1) {
        assert!(error.is_none(), "{read}: {error:?}");
        assert_eq!(attempts, 2, "{read}");
    }
}

#[test]
fn retry_reads_false_disables_the_retry() {
    for (read, attempts, error) in reads_through("retryReads=false", close_connection(), 1) {
        let error = error.unwrap_or_else(|| panic!("{read} succeeded without a retry"));
        assert!(error.is_network_error(), "{read}: {error:?}");
        assert_eq!(attempts, 1, "{read}");
    }
}

#[test]
fn two_consecutive_failures_fail_the_read() {
    for (read, attempts, error) in reads_through("", doc! { "errorCode": 11600 }, 2) {
        let error = error.unwrap_or_else(|| panic!("{read} succeeded after two failures"));
        assert_eq!(error.code(), Some(11600), "{read}: {error:?}");
        assert_eq!(attempts, 2, "{read}");
    }
}
