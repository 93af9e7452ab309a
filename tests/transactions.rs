//! Transactions end to end against SecantusDB: visibility, what each command
//! of a transaction carries, `with_transaction` retries driven by fail
//! points, commit retries, router pinning on a simulated mongos pair, and
//! the abort when a session is dropped mid-transaction.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Bson, Document};
use mongo_inline::options::TransactionOptions;
use mongo_inline::options::{Acknowledgment, ClientOptions, ReadConcern, WriteConcern};
use mongo_inline::{Client, Collection};
use support::events::{command_name, recorded_client, Recorder};
use support::server::TestServer;
use support::sim::Simulator;

/// The commands started other than monitoring hellos, with the address
/// each went to, in order.
fn sent(recorder: &Recorder) -> Vec<(String, Document)> {
    recorder
        .started_with_address()
        .into_iter()
        .filter(|(_, c)| !matches!(command_name(c), "hello" | "isMaster"))
        .collect()
}

/// Commands other than monitoring hellos, in order.
fn commands(recorder: &Recorder) -> Vec<Document> {
    sent(recorder).into_iter().map(|(_, c)| c).collect()
}

/// `ReadConcern` has no public constructor; the URI option makes one.
fn read_concern(level: &str) -> ReadConcern {
    ClientOptions::parse(format!("mongodb://h/?readConcernLevel={level}"))
        .run()
        .unwrap()
        .read_concern()
        .cloned()
        .unwrap()
}

fn majority() -> WriteConcern {
    let mut wc = WriteConcern::default();
    wc.w = Some(Acknowledgment::Majority);
    wc
}

fn fail_point(client: &Client, mode: Bson, data: Document) {
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": mode,
            "data": data,
        })
        .run()
        .unwrap();
}

fn fresh(client: &Client, name: &str) -> Collection<Document> {
    let coll = client.database("txn").collection::<Document>(name);
    coll.drop().run().unwrap();
    // Create it outside any transaction.
    coll.insert_one(doc! { "_id": "seed" }).run().unwrap();
    coll
}

fn others(server_uri: &str, name: &str) -> u64 {
    let other = Client::with_uri_str(server_uri).unwrap();
    other
        .database("txn")
        .collection::<Document>(name)
        .count_documents(doc! { "_id": { "$ne": "seed" } })
        .run()
        .unwrap()
}

#[test]
fn a_commit_is_visible_to_another_client_and_an_abort_is_not() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "visibility");
    let mut session = client.start_session().run().unwrap();

    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    assert_eq!(others(&server.uri(), "visibility"), 0, "seen before commit");
    session.commit_transaction().run().unwrap();
    assert_eq!(others(&server.uri(), "visibility"), 1);

    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "_id": 2 })
        .session(&mut session)
        .run()
        .unwrap();
    session.abort_transaction().run().unwrap();
    assert_eq!(
        others(&server.uri(), "visibility"),
        1,
        "an abort was applied"
    );
}

/// The official driver's `ErrorKind::Transaction`, with the spec's words.
fn assert_transaction_error(result: mongo_inline::Result<()>, words: &str) {
    let error = result.expect_err(words);
    match error.kind() {
        mongo_inline::ErrorKind::Transaction { message, .. } => {
            assert!(message.contains(words), "{message}")
        }
        _ => panic!("{error:?}"),
    }
}

#[test]
fn using_a_transaction_against_its_state_is_a_transaction_error() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "misuse");
    let mut session = client.start_session().run().unwrap();
    assert_transaction_error(session.commit_transaction().run(), "No transaction started");
    session.start_transaction().run().unwrap();
    assert_transaction_error(
        session.start_transaction().run(),
        "Transaction already in progress",
    );
    let secondary = mongo_inline::options::SelectionCriteria::ReadPreference(
        mongo_inline::options::ReadPreference::Secondary { options: None },
    );
    let read = coll
        .find_one(doc! {})
        .selection_criteria(secondary)
        .session(&mut session)
        .run();
    assert_transaction_error(
        read.map(drop),
        "read preference in a transaction must be primary",
    );
    session.abort_transaction().run().unwrap();
    assert_transaction_error(
        session.commit_transaction().run(),
        "Cannot call commitTransaction after calling abortTransaction",
    );
    assert_transaction_error(
        session.abort_transaction().run(),
        "Cannot call abortTransaction twice",
    );
}

#[test]
fn transaction_commands_carry_the_transaction_fields() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "fields");
    let mut session = client.start_session().run().unwrap();
    let mut options = TransactionOptions::default();
    options.read_concern = Some(read_concern("majority"));
    options.write_concern = Some(majority());
    recorder.clear_commands();

    session
        .start_transaction()
        .with_options(options.clone())
        .run()
        .unwrap();
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    coll.find(doc! {}).session(&mut session).run().unwrap();
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "a": 1 } })
        .session(&mut session)
        .run()
        .unwrap();
    session.commit_transaction().run().unwrap();

    let sent = commands(&recorder);
    assert_eq!(
        sent.iter().map(command_name).collect::<Vec<_>>(),
        ["insert", "find", "update", "commitTransaction"]
    );
    let txn_number = sent[0].get_i64("txnNumber").expect("txnNumber");
    let lsid = sent[0].get_document("lsid").unwrap();
    for (i, command) in sent.iter().enumerate() {
        assert_eq!(command.get_i64("txnNumber"), Ok(txn_number), "{command}");
        assert_eq!(command.get_bool("autocommit"), Ok(false), "{command}");
        assert_eq!(command.get_document("lsid").unwrap(), lsid);
        assert_eq!(
            command.contains_key("startTransaction"),
            i == 0,
            "{command}"
        );
        if i > 0 {
            assert!(!command.contains_key("readConcern"), "{command}");
        }
        if command_name(command) != "commitTransaction" {
            // Only commit and abort carry the transaction's write concern.
            assert!(!command.contains_key("writeConcern"), "{command}");
        }
    }
    assert_eq!(sent[0].get_bool("startTransaction"), Ok(true));
    assert_eq!(
        sent[0].get_document("readConcern").unwrap(),
        &doc! { "level": "majority" }
    );
    assert_eq!(sent[3].get_str("$db"), Ok("admin"));
    assert_eq!(
        sent[3].get_document("writeConcern").unwrap(),
        &doc! { "w": "majority" }
    );

    // The next transaction gets the next txnNumber; its abort carries the
    // write concern too.
    recorder.clear_commands();
    session
        .start_transaction()
        .with_options(options)
        .run()
        .unwrap();
    coll.insert_one(doc! { "_id": 2 })
        .session(&mut session)
        .run()
        .unwrap();
    session.abort_transaction().run().unwrap();
    let sent = commands(&recorder);
    assert_eq!(
        sent.iter().map(command_name).collect::<Vec<_>>(),
        ["insert", "abortTransaction"]
    );
    for command in &sent {
        assert_eq!(
            command.get_i64("txnNumber"),
            Ok(txn_number + 1),
            "{command}"
        );
        assert_eq!(command.get_bool("autocommit"), Ok(false));
    }
    assert_eq!(
        sent[1].get_document("writeConcern").unwrap(),
        &doc! { "w": "majority" }
    );
}

#[test]
fn with_transaction_retries_a_transient_transaction_error() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "transient");
    fail_point(
        &client,
        doc! { "times": 1 }.into(),
        doc! {
            "failCommands": ["insert"],
            "errorCode": 112,
            "errorLabels": ["TransientTransactionError"],
        },
    );
    recorder.clear_commands();
    let mut session = client.start_session().run().unwrap();
    let mut runs = 0;
    session
        .start_transaction()
        .and_run(|session| {
            runs += 1;
            coll.insert_one(doc! { "_id": 1 }).session(session).run()?;
            Ok(())
        })
        .unwrap();
    assert_eq!(runs, 2);
    assert_eq!(others(&server.uri(), "transient"), 1);
    let inserts = recorder.named("insert");
    assert_eq!(inserts.len(), 2);
    // The retry is a new transaction.
    assert_eq!(
        inserts[1].get_i64("txnNumber").unwrap(),
        inserts[0].get_i64("txnNumber").unwrap() + 1
    );
    assert_eq!(inserts[1].get_bool("startTransaction"), Ok(true));
    assert_eq!(recorder.named("commitTransaction").len(), 1);
}

#[test]
fn a_commit_with_a_retryable_error_is_retried_once_with_majority() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "commit_retry");
    fail_point(
        &client,
        doc! { "times": 1 }.into(),
        doc! {
            "failCommands": ["commitTransaction"],
            "errorCode": 91,
            "errorLabels": ["RetryableWriteError"],
        },
    );
    recorder.clear_commands();
    let mut session = client.start_session().run().unwrap();
    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    session.commit_transaction().run().unwrap();
    assert_eq!(others(&server.uri(), "commit_retry"), 1);
    let commits = recorder.named("commitTransaction");
    assert_eq!(commits.len(), 2);
    assert_eq!(
        commits[0].get_i64("txnNumber"),
        commits[1].get_i64("txnNumber")
    );
    assert!(!commits[0].contains_key("writeConcern"), "{}", commits[0]);
    assert_eq!(
        commits[1].get_document("writeConcern").unwrap(),
        &doc! { "w": "majority", "wtimeout": 10_000_i64 }
    );
}

#[test]
fn an_unknown_commit_result_is_retried_by_with_transaction() {
    let server = TestServer::start();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "unknown_commit");
    // Two network errors: the commit's own retry fails too, so the error
    // reaches with_transaction labelled UnknownTransactionCommitResult.
    fail_point(
        &client,
        doc! { "times": 2 }.into(),
        doc! { "failCommands": ["commitTransaction"], "closeConnection": true },
    );
    recorder.clear_commands();
    let mut session = client.start_session().run().unwrap();
    let mut runs = 0;
    session
        .start_transaction()
        .and_run(|session| {
            runs += 1;
            coll.insert_one(doc! { "_id": 1 }).session(session).run()?;
            Ok(())
        })
        .unwrap();
    assert_eq!(runs, 1, "the transaction was rerun instead of its commit");
    assert_eq!(recorder.named("commitTransaction").len(), 3);
    assert_eq!(others(&server.uri(), "unknown_commit"), 1);
}

#[test]
fn commit_transaction_reports_an_unknown_result_and_can_be_called_again() {
    let server = TestServer::start();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "unknown_again");
    fail_point(
        &client,
        doc! { "times": 2 }.into(),
        doc! { "failCommands": ["commitTransaction"], "closeConnection": true },
    );
    let mut session = client.start_session().run().unwrap();
    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    let error = session.commit_transaction().run().unwrap_err();
    assert!(
        error.contains_label("UnknownTransactionCommitResult"),
        "{error:?}"
    );
    session.commit_transaction().run().unwrap();
    assert_eq!(others(&server.uri(), "unknown_again"), 1);
}

#[test]
fn a_transaction_on_mongos_stays_on_the_router_of_its_first_command() {
    let server = TestServer::shared();
    let sim = Simulator::mongos(server, 2);
    let (client, recorder) = recorded_client(&sim.seed_uri(&[0, 1]));
    let coll = fresh(&client, "pinned");
    let mut session = client.start_session().run().unwrap();
    recorder.clear_commands();
    for i in 0..8 {
        session.start_transaction().run().unwrap();
        coll.insert_one(doc! { "_id": i })
            .session(&mut session)
            .run()
            .unwrap();
        coll.find(doc! { "_id": i })
            .session(&mut session)
            .run()
            .unwrap();
        coll.insert_one(doc! { "_id": i + 100 })
            .session(&mut session)
            .run()
            .unwrap();
        session.commit_transaction().run().unwrap();
    }
    let sent = sent(&recorder);
    let mut routers_used = std::collections::HashSet::new();
    for txn in sent
        .iter()
        .filter_map(|(_, c)| c.get_i64("txnNumber").ok())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let routers: std::collections::HashSet<&str> = sent
            .iter()
            .filter(|(_, c)| c.get_i64("txnNumber") == Ok(txn))
            .map(|(a, _)| a.as_str())
            .collect();
        let trace: Vec<(&str, &str)> = sent
            .iter()
            .filter(|(_, c)| c.get_i64("txnNumber") == Ok(txn))
            .map(|(a, c)| (a.as_str(), command_name(c)))
            .collect();
        assert_eq!(routers.len(), 1, "transaction {txn} used {trace:?}");
        routers_used.extend(routers);
    }
    assert_eq!(others(&sim.seed_uri(&[0]), "pinned"), 16);
    // Otherwise the test would pass without any choice to pin.
    assert_eq!(routers_used.len(), 2, "every transaction chose one router");
}

/// A read preference that is not primary inside a transaction fails with
/// the transactions spec's error; the transaction's read preference wins
/// over the collection's, database's and client's (only one set on the
/// operation itself is its own).
#[test]
fn reads_in_a_transaction_use_the_transactions_read_preference() {
    use mongo_inline::ReadPreference;
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = fresh(&client, "txn_read_preference");
    let handle = |rp: ReadPreference| {
        let options = mongo_inline::options::CollectionOptions::builder()
            .selection_criteria(mongo_inline::options::SelectionCriteria::from(rp))
            .build();
        client
            .database("txn")
            .collection_with_options::<Document>(coll.name(), options)
    };
    let primary_coll = handle(ReadPreference::Primary);
    let secondary_coll = handle(ReadPreference::secondary(None));
    let refused = "read preference in a transaction must be primary";
    let mut session = client.start_session().run().unwrap();
    for mode in [
        ReadPreference::secondary(None),
        ReadPreference::primary_preferred(None),
        ReadPreference::nearest(None),
    ] {
        let mut options = TransactionOptions::default();
        options.selection_criteria = Some(mode.clone().into());
        session
            .start_transaction()
            .with_options(options)
            .run()
            .unwrap();
        // Writes are not checked, and go to the primary.
        primary_coll
            .insert_one(doc! { "_id": format!("{mode:?}") })
            .session(&mut session)
            .run()
            .unwrap();
        let find = primary_coll
            .find(doc! {})
            .session(&mut session)
            .run()
            .err()
            .map(|e| e.to_string());
        assert!(
            find.as_deref().is_some_and(|e| e.contains(refused)),
            "{find:?}"
        );
        let count = primary_coll
            .count_documents(doc! {})
            .session(&mut session)
            .run()
            .err()
            .map(|e| e.to_string());
        assert!(
            count.as_deref().is_some_and(|e| e.contains(refused)),
            "{count:?}"
        );
        let command = client
            .database("txn")
            .run_command(doc! { "find": "txn_read_preference" })
            .session(&mut session)
            .run()
            .err()
            .map(|e| e.to_string());
        assert!(
            command.as_deref().is_some_and(|e| e.contains(refused)),
            "{command:?}"
        );
        session.abort_transaction().run().unwrap();
    }
    // A primary transaction reads from the primary whatever the
    // collection's read preference says.
    let mut options = TransactionOptions::default();
    options.selection_criteria = Some(ReadPreference::Primary.into());
    session
        .start_transaction()
        .with_options(options)
        .run()
        .unwrap();
    let found = secondary_coll
        .find_one(doc! { "_id": "seed" })
        .session(&mut session)
        .run()
        .unwrap();
    assert!(found.is_some());
    session.commit_transaction().run().unwrap();
}

/// A simulated mongos knows only the transactions started through it, as
/// a real router does: a transaction's later command at the other one gets
/// NoSuchTransaction, so a driver that lost its pin cannot go unnoticed.
#[test]
fn a_simulated_mongos_refuses_another_routers_transaction() {
    use support::raw::RawConnection;
    let server = TestServer::shared();
    let sim = Simulator::mongos(server, 2);
    let client = Client::with_uri_str(sim.seed_uri(&[0])).unwrap();
    fresh(&client, "routed");
    let lsid = doc! { "id": bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: (0..16).collect(),
    } };
    let txn = |command: Document, first: bool| {
        let mut command = command;
        command.insert("lsid", lsid.clone());
        command.insert("txnNumber", 1_i64);
        command.insert("autocommit", false);
        if first {
            command.insert("startTransaction", true);
        }
        command
    };
    let mut first = RawConnection::connect(&sim.address(0)).unwrap();
    let mut second = RawConnection::connect(&sim.address(1)).unwrap();
    let insert = doc! { "insert": "routed", "documents": [{ "_id": 1 }] };
    let reply = first.command("txn", txn(insert.clone(), true)).unwrap();
    assert_eq!(
        reply
            .get_f64("ok")
            .ok()
            .or(reply.get_i32("ok").ok().map(f64::from)),
        Some(1.0),
        "{reply}"
    );
    let refused = second.command("txn", txn(insert, false)).unwrap();
    assert_eq!(refused.get_i32("code"), Ok(251), "{refused}");
    assert_eq!(refused.get_str("codeName"), Ok("NoSuchTransaction"));
    let labels = refused.get_array("errorLabels").unwrap();
    assert!(labels.contains(&Bson::from("TransientTransactionError")));
    let commit = doc! { "commitTransaction": 1 };
    let refused = second.command("admin", txn(commit.clone(), false)).unwrap();
    assert_eq!(refused.get_i32("code"), Ok(251), "{refused}");
    // Its own router commits it; then a commit retry at the other one is
    // recovered (a real router would use the recoveryToken).
    let committed = first.command("admin", txn(commit.clone(), false)).unwrap();
    assert!(committed.get("code").is_none(), "{committed}");
    let retried = second.command("admin", txn(commit, false)).unwrap();
    assert!(retried.get("code").is_none(), "{retried}");
    assert_eq!(others(&sim.seed_uri(&[0]), "routed"), 1);
}

#[test]
fn dropping_a_session_mid_transaction_aborts_it() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = fresh(&client, "dropped");
    let mut session = client.start_session().run().unwrap();
    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    let txn_number = recorder
        .named("insert")
        .last()
        .unwrap()
        .get_i64("txnNumber");
    drop(session);
    let aborts = recorder.named("abortTransaction");
    assert_eq!(aborts.len(), 1);
    assert_eq!(aborts[0].get_i64("txnNumber"), txn_number);
    assert_eq!(others(&server.uri(), "dropped"), 0);
    // The transaction's locks are gone: the same document can be written.
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
}

#[test]
fn a_sharded_commit_retry_after_a_network_error_selects_a_router_again() {
    let server = TestServer::start();
    let sim = Simulator::mongos(&server, 2);
    let (client, recorder) = recorded_client(&sim.seed_uri(&[0, 1]));
    let coll = fresh(&client, "sharded_commit_retry");
    fail_point(
        &client,
        doc! { "times": 1 }.into(),
        doc! { "failCommands": ["commitTransaction"], "closeConnection": true },
    );
    recorder.clear_commands();
    let mut session = client.start_session().run().unwrap();
    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .unwrap();
    // The other router never saw the transaction, and its commit never
    // ran: NoSuchTransaction, as a real mongos answers (the spec's
    // "commitTransaction retry fails on new mongos").
    let error = session.commit_transaction().run().unwrap_err();
    assert!(
        error.contains_label("TransientTransactionError"),
        "{error:?}"
    );
    assert!(error.to_string().contains("NoSuchTransaction"), "{error}");
    let sent = sent(&recorder);
    let insert_router = &sent[0].0;
    let commits: Vec<&String> = sent
        .iter()
        .filter(|(_, c)| command_name(c) == "commitTransaction")
        .map(|(a, _)| a)
        .collect();
    assert_eq!(commits.len(), 2, "{sent:?}");
    assert_eq!(commits[0], insert_router, "the commit left its router");
    // The failed router is deprioritized: the retry goes to the other one.
    assert_ne!(commits[1], insert_router, "the retry stayed pinned");
    assert_eq!(others(&server.uri(), "sharded_commit_retry"), 0);
}

#[test]
fn an_overload_retry_of_a_sharded_transactions_first_command_re_pins_to_the_retrys_router() {
    let server = TestServer::start();
    let sim = Simulator::mongos(&server, 2);
    let (client, recorder) = recorded_client(&sim.seed_uri(&[0, 1]));
    let coll = fresh(&client, "sharded_overload_first");
    fail_point(
        &client,
        doc! { "times": 1 }.into(),
        doc! {
            "failCommands": ["insert"],
            "errorCode": 462,
            "errorLabels": ["RetryableError", "SystemOverloadedError"],
        },
    );
    recorder.clear_commands();
    let mut session = client.start_session().run().unwrap();
    session.start_transaction().run().unwrap();
    coll.insert_one(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .expect("the overload retry succeeds");
    coll.find(doc! { "_id": 1 })
        .session(&mut session)
        .run()
        .expect("a read in the transaction");
    coll.insert_one(doc! { "_id": 2 })
        .session(&mut session)
        .run()
        .expect("a second write in the transaction (no NoSuchTransaction)");
    session.commit_transaction().run().expect("commit");
    let sent: Vec<(String, Document)> = sent(&recorder)
        .into_iter()
        .filter(|(_, c)| c.contains_key("txnNumber"))
        .collect();
    let trace: Vec<(&str, &str)> = sent
        .iter()
        .map(|(a, c)| (a.as_str(), command_name(c)))
        .collect();
    assert_eq!(sent.len(), 5, "{trace:?}");
    let (failed_on, retried_on) = (&sent[0].0, &sent[1].0);
    assert_ne!(
        failed_on, retried_on,
        "the retry avoids the overloaded router: {trace:?}"
    );
    assert_eq!(sent[1].1.get_bool("startTransaction"), Ok(true));
    assert!(
        sent[1..].iter().all(|(a, _)| a == retried_on),
        "the transaction left the router it started on: {trace:?}"
    );
    assert_eq!(others(&server.uri(), "sharded_overload_first"), 2);
}
