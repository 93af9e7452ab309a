//! `Database::run_command`, `run_raw_command` and `run_raw_cursor_command`
//! as the official actions:
//! `.selection_criteria(..)`, `.with_options(RunCommandOptions)`,
//! `.session(..)` (a command inside a transaction sees its writes), a
//! failed command as `ErrorKind::Command`.

use mongodb::bson::{doc, rawdoc, Document, RawDocumentBuf};
use mongodb::error::{ErrorKind, Result};
use mongodb::options::{ReadPreference, RunCommandOptions, SelectionCriteria};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_run_commands");
    let coll = db.collection::<Document>("c");
    coll.drop().run()?;
    coll.insert_many([doc! { "x": 1 }, doc! { "x": 2 }]).run()?;

    let ping = db.run_command(doc! { "ping": 1 }).run()?;
    assert_eq!(ping.get_f64("ok").ok().or(ping.get_i32("ok").ok().map(f64::from)), Some(1.0));

    let primary = SelectionCriteria::ReadPreference(ReadPreference::Primary);
    let count = db
        .run_command(doc! { "count": "c", "query": { "x": 2 } })
        .selection_criteria(primary.clone())
        .run()?;
    assert_eq!(count.get_i32("n").ok().map(i64::from).or(count.get_i64("n").ok()), Some(1));

    let options = RunCommandOptions::builder().selection_criteria(primary).build();
    let raw: RawDocumentBuf = rawdoc! { "count": "c" };
    let count = db.run_raw_command(raw).with_options(options).run()?;
    assert_eq!(count.get_i32("n").ok().map(i64::from).or(count.get_i64("n").ok()), Some(2));

    // A cursor command as raw BSON: a cursor over every document.
    let cursor = db.run_raw_cursor_command(rawdoc! { "find": "c", "batchSize": 1 }).run()?;
    assert_eq!(cursor.collect::<Result<Vec<Document>>>()?.len(), 2);

    // Bytes that frame a document but hold an unknown element type (0x7e):
    // an error, never a panic.
    let bytes = vec![12, 0, 0, 0, 0x7e, b'a', 0, 1, 0, 0, 0, 0];
    if let Ok(bad) = RawDocumentBuf::from_bytes(bytes) {
        assert!(db.run_raw_command(bad).run().is_err());
    }

    // In a transaction: the command sees the transaction's own insert.
    let mut session = client.start_session().run()?;
    session.start_transaction().run()?;
    coll.insert_one(doc! { "x": 3 }).session(&mut session).run()?;
    let inside = db
        .run_command(doc! { "find": "c", "filter": { "x": 3 } })
        .session(&mut session)
        .run()?;
    let batch = inside.get_document("cursor").and_then(|c| c.get_array("firstBatch"));
    assert_eq!(batch.map(Vec::len).ok(), Some(1));
    session.abort_transaction().run()?;
    assert_eq!(coll.count_documents(doc! { "x": 3 }).run()?, 0);

    // A command the server refuses: a command error with its code.
    let error = db.run_command(doc! { "noSuchCommand": 1 }).run().unwrap_err();
    match *error.kind {
        ErrorKind::Command(ref command) => assert!(command.code != 0, "{command:?}"),
        ref other => panic!("expected a command error, got {other:?}"),
    }
    Ok(())
}
