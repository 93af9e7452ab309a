//! Change streams against SecantusDB (whose replica-set mode has them):
//! typed insert, update and delete events; the bounded wait of
//! `next_if_any`; resume tokens to continue a stream later; the one resume
//! after a lost cursor, with the token, and the error when that resume
//! fails too; a stream in an explicit session; database- and cluster-wide
//! streams; and, from a fake server,
//! an event without `_id` ending the stream with the spec's error.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use bson::{doc, Bson, Document};
use mongo_inline::change_stream::event::{ChangeStreamEvent, OperationType};
use mongo_inline::options::FullDocumentType;
use mongo_inline::{Client, ErrorKind};
use serde::{Deserialize, Serialize};
use support::events::{recorded_client, Recorder};
use support::server::TestServer;

/// Short waits: every `getMore` of these tests returns within this.
const AWAIT: Duration = Duration::from_millis(100);

fn uri() -> String {
    format!("{}/?directConnection=true", TestServer::shared().uri())
}

/// A client whose commands alone a fail point set with `appName: name`
/// fails: the tests of this file share one server and run in parallel.
fn named_client(name: &str) -> (Client, std::sync::Arc<Recorder>) {
    recorded_client(&format!("{}&appName={name}", uri()))
}

fn client() -> Client {
    Client::with_uri_str(uri()).unwrap()
}

/// A collection of its own, dropped and created (a stream on a missing
/// collection is fine, but its first events would include the create).
fn fresh(client: &Client, name: &str) -> mongo_inline::Collection<Document> {
    let db = client.database(&format!("cs_{name}"));
    db.drop().run().unwrap();
    db.create_collection(name).run().unwrap();
    db.collection(name)
}

/// The server has one `failCommand` at a time: a test that sets it holds
/// this until it is done, or another test's would replace it unfired.
static FAIL_POINT: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fail_point(
    client: &Client,
    app_name: &str,
    mut data: Document,
    times: i32,
) -> std::sync::MutexGuard<'static, ()> {
    let guard = FAIL_POINT.lock().unwrap_or_else(|e| e.into_inner());
    data.insert("appName", app_name);
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand",
            "mode": { "times": times },
            "data": data,
        })
        .run()
        .unwrap();
    guard
}

/// The next event, from at most `tries` bounded waits: a test that
/// expects one never blocks for good.
fn next_within<T: serde::de::DeserializeOwned>(
    stream: &mut mongo_inline::change_stream::ChangeStream<T>,
    tries: usize,
) -> mongo_inline::Result<T> {
    for _ in 0..tries {
        if let Some(event) = stream.next_if_any()? {
            return Ok(event);
        }
    }
    panic!("no event after {tries} getMores");
}

fn aggregates(recorder: &Recorder) -> Vec<Document> {
    recorder
        .named("aggregate")
        .iter()
        .map(|c| {
            c.get_array("pipeline").unwrap()[0]
                .as_document()
                .unwrap()
                .get_document("$changeStream")
                .unwrap()
                .clone()
        })
        .collect()
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Item {
    #[serde(rename = "_id")]
    id: i32,
    n: i32,
}

#[test]
fn insert_update_and_delete_arrive_as_typed_events() {
    let client = client();
    let coll = fresh(&client, "typed").clone_with_type::<Item>();
    let mut stream = coll
        .watch()
        .full_document(FullDocumentType::UpdateLookup)
        .max_await_time(AWAIT)
        .run()
        .unwrap();
    coll.insert_one(Item { id: 1, n: 1 }).run().unwrap();
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "n": 2 } })
        .run()
        .unwrap();
    coll.delete_one(doc! { "_id": 1 }).run().unwrap();

    let insert: ChangeStreamEvent<Item> = stream.next().unwrap().unwrap();
    assert_eq!(insert.operation_type, OperationType::Insert);
    assert_eq!(insert.full_document, Some(Item { id: 1, n: 1 }));
    assert_eq!(insert.document_key, Some(doc! { "_id": 1 }));
    assert_eq!(insert.ns.as_ref().unwrap().coll.as_deref(), Some("typed"));

    let update = stream.next().unwrap().unwrap();
    assert_eq!(update.operation_type, OperationType::Update);
    let description = update.update_description.unwrap();
    assert_eq!(description.updated_fields, doc! { "n": 2 });
    // updateLookup: the document as it is after the update (here already
    // deleted, or the updated one).
    assert!(matches!(
        update.full_document,
        None | Some(Item { id: 1, n: 2 })
    ));

    let delete = stream.next().unwrap().unwrap();
    assert_eq!(delete.operation_type, OperationType::Delete);
    assert_eq!(delete.full_document, None);
    assert_eq!(stream.resume_token(), Some(delete.id));
    assert!(stream.is_alive());
}

#[test]
fn next_if_any_waits_one_get_more_and_still_moves_the_token() {
    let (client, recorder) = recorded_client(&uri());
    let coll = fresh(&client, "bounded");
    let mut stream = coll.watch().max_await_time(AWAIT).run().unwrap();
    let opened = stream.resume_token();
    recorder.clear_commands();
    assert!(stream.next_if_any().unwrap().is_none());
    let get_mores = recorder.named("getMore");
    assert_eq!(get_mores.len(), 1, "one getMore, then back to the caller");
    assert_eq!(get_mores[0].get_i32("maxTimeMS").unwrap(), 100);
    // The empty batch's postBatchResumeToken is the token now.
    assert!(stream.resume_token().is_some());
    assert!(opened.is_some());
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    let event = stream.try_next().unwrap().expect("the insert");
    assert_eq!(event.document_key, Some(doc! { "_id": 1 }));
}

#[test]
fn a_stored_token_continues_the_stream_where_it_stopped() {
    let client = client();
    let coll = fresh(&client, "resume_after");
    let mut stream = coll.watch().max_await_time(AWAIT).run().unwrap();
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    stream.next().unwrap().unwrap();
    let token = stream.resume_token().unwrap();
    drop(stream);
    coll.insert_one(doc! { "_id": 2 }).run().unwrap();
    let mut later = coll
        .watch()
        .resume_after(token)
        .max_await_time(AWAIT)
        .run()
        .unwrap();
    let event = later.next().unwrap().unwrap();
    assert_eq!(event.document_key, Some(doc! { "_id": 2 }));
}

#[test]
fn a_lost_cursor_is_resumed_once_from_the_last_token() {
    let (client, recorder) = named_client("lost_cursor");
    let coll = fresh(&client, "lost_cursor");
    let mut stream = coll.watch().max_await_time(AWAIT).run().unwrap();
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    stream.next().unwrap().unwrap();
    let token = stream.resume_token().unwrap();
    let _one_fail_point = fail_point(
        &client,
        "lost_cursor",
        doc! { "failCommands": ["getMore"], "errorCode": 43 },
        1,
    );
    coll.insert_one(doc! { "_id": 2 }).run().unwrap();
    let second = next_within(&mut stream, 20).unwrap();
    assert_eq!(second.document_key, Some(doc! { "_id": 2 }));
    let stages = aggregates(&recorder);
    assert_eq!(stages.len(), 2, "the first aggregate and one resume");
    assert_eq!(stages[0], doc! {});
    // The resume starts after the last event handed out, and says only that.
    assert_eq!(stages[1], doc! { "resumeAfter": Bson::from(token) });
}

#[test]
fn a_stream_opened_in_a_session_sends_every_command_and_its_resume_in_it() {
    let (client, recorder) = named_client("in_session");
    let coll = fresh(&client, "in_session");
    let mut session = client.start_session().run().unwrap();
    let mut stream = coll
        .watch()
        .max_await_time(AWAIT)
        .session(&mut session)
        .run()
        .unwrap();
    coll.insert_one(doc! { "_id": 1 }).run().unwrap();
    let first = stream.next(&mut session).unwrap().expect("the insert");
    assert_eq!(first.document_key, Some(doc! { "_id": 1 }));
    let _one_fail_point = fail_point(
        &client,
        "in_session",
        doc! { "failCommands": ["getMore"], "errorCode": 43 },
        1,
    );
    coll.insert_one(doc! { "_id": 2 }).run().unwrap();
    let second = (0..20)
        .find_map(|_| stream.next_if_any(&mut session).unwrap())
        .expect("the second insert within 20 getMores");
    assert_eq!(second.document_key, Some(doc! { "_id": 2 }));
    assert!(stream.is_alive() && stream.resume_token().is_some());
    assert_eq!(
        aggregates(&recorder).len(),
        2,
        "the first aggregate and one resume"
    );
    let lsid = session.id().clone();
    for name in ["aggregate", "getMore"] {
        let commands = recorder.named(name);
        assert!(!commands.is_empty(), "no {name}");
        for command in commands {
            assert_eq!(command.get_document("lsid").unwrap(), &lsid, "{name}");
        }
    }
}

#[test]
fn a_failed_resume_ends_the_stream_with_its_error() {
    let (client, recorder) = named_client("failed_resume");
    let coll = fresh(&client, "failed_resume");
    let mut stream = coll.watch().max_await_time(AWAIT).run().unwrap();
    recorder.clear_commands();
    let _one_fail_point = fail_point(
        &client,
        "failed_resume",
        doc! { "failCommands": ["getMore", "aggregate"], "errorCode": 43 },
        2,
    );
    let error = stream.next_if_any().unwrap_err();
    assert_eq!(error.code(), Some(43));
    assert_eq!(recorder.named("aggregate").len(), 1, "one resume, not more");
    assert!(!stream.is_alive());
    assert!(stream.next().is_none());
}

#[test]
fn a_non_resumable_error_is_returned_without_a_resume() {
    let (client, recorder) = named_client("not_resumable");
    let coll = fresh(&client, "not_resumable");
    let mut stream = coll.watch().max_await_time(AWAIT).run().unwrap();
    recorder.clear_commands();
    let _one_fail_point = fail_point(
        &client,
        "not_resumable",
        doc! { "failCommands": ["getMore"], "errorCode": 280, "errorLabels": ["NonResumableChangeStreamError"] },
        1,
    );
    let error = stream.next_if_any().unwrap_err();
    assert_eq!(error.code(), Some(280));
    assert!(recorder.named("aggregate").is_empty());
    assert!(!stream.is_alive());
}

#[test]
fn database_and_cluster_streams_see_every_collection() {
    let (client, recorder) = recorded_client(&uri());
    let a = fresh(&client, "wide_a");
    let db = a.database_name().to_string();
    let b = client.database(&db).collection::<Document>("wide_b");
    let mut database = client
        .database(&db)
        .watch()
        .max_await_time(AWAIT)
        .run()
        .unwrap();
    let mut cluster = client.watch().max_await_time(AWAIT).run().unwrap();
    a.insert_one(doc! { "_id": "a" }).run().unwrap();
    b.insert_one(doc! { "_id": "b" }).run().unwrap();
    for stream in [&mut database, &mut cluster] {
        // Other tests write to the same server at the same time.
        let keys: Vec<Document> = stream
            .by_ref()
            .map(Result::unwrap)
            .filter(|event| event.ns.as_ref().is_some_and(|ns| ns.db == db))
            .take(2)
            .map(|event| event.document_key.unwrap())
            .collect();
        assert_eq!(keys, vec![doc! { "_id": "a" }, doc! { "_id": "b" }]);
    }
    let commands = recorder.named("aggregate");
    assert_eq!(commands[0].get_i32("aggregate").unwrap(), 1);
    assert_eq!(
        aggregates(&recorder)[1],
        doc! { "allChangesForCluster": true }
    );
}

/// A server that opens a change stream whose first event has no `_id`.
fn serve_event_without_id(mut stream: TcpStream) {
    use support::peers::{reply_to, standalone_hello};
    use support::raw::{parse_op_msg, read_frame, OP_QUERY};
    while let Ok(Some(frame)) = read_frame(&mut stream) {
        let command = if frame.op_code == OP_QUERY {
            doc! { "hello": 1 }
        } else {
            parse_op_msg(&frame.body).unwrap().body
        };
        let name = command.keys().next().cloned().unwrap_or_default();
        let cursor = |batch: &str, events: Vec<Document>| {
            doc! { "cursor": { "id": 9_i64, "ns": "db.coll", batch: events }, "ok": 1 }
        };
        let reply = match name.as_str() {
            "hello" | "isMaster" | "ismaster" => standalone_hello(),
            "aggregate" => cursor("firstBatch", vec![]),
            "getMore" => cursor(
                "nextBatch",
                vec![doc! { "operationType": "insert", "documentKey": { "_id": 1 } }],
            ),
            _ => doc! { "ok": 1 },
        };
        if stream.write_all(&reply_to(&frame, &reply)).is_err() {
            return;
        }
    }
}

#[test]
fn an_event_without_id_ends_the_stream_with_the_specs_error() {
    let port = support::peers::fake_server(serve_event_without_id);
    let (client, recorder) = recorded_client(&format!(
        "mongodb://127.0.0.1:{port}/?directConnection=true"
    ));
    let coll = client.database("db").collection::<Document>("coll");
    let mut stream = coll.watch().run().unwrap();
    let error = stream.next().unwrap().unwrap_err();
    assert!(
        matches!(*error.kind, ErrorKind::MissingResumeToken),
        "{error}"
    );
    assert!(error
        .to_string()
        .contains("Cannot provide resume functionality when the resume token is missing"));
    assert!(!stream.is_alive());
    assert!(stream.next().is_none());
    // Closed: its cursor killed, and no resume tried.
    assert_eq!(recorder.named("killCursors").len(), 1);
    assert_eq!(recorder.named("aggregate").len(), 1);
}
