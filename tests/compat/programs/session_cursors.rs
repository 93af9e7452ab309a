//! Cursors in a session: `SessionCursor` iterated with `iter`, `next`,
//! `advance` and `deserialize_current`, in a transaction.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::sync::{Client, SessionCursorIter};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Item {
    n: i32,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_session_cursors");
    let coll = db.collection::<Document>("items");
    coll.drop().run()?;
    coll.insert_many((0..7).map(|n| doc! { "n": n })).run()?;

    let mut session = client.start_session().run()?;
    let mut cursor = coll.find(doc! {}).sort(doc! { "n": 1 }).batch_size(2).session(&mut session).run()?;
    let iter: SessionCursorIter<'_, '_, Document> = cursor.iter(&mut session);
    let all: Vec<Document> = iter.collect::<Result<_>>()?;
    assert_eq!(all.len(), 7);

    let items = db.collection::<Item>("items");
    let mut cursor = items.find(doc! { "n": { "$gte": 3 } }).sort(doc! { "n": 1 }).batch_size(2).session(&mut session).run()?;
    let first = cursor.next(&mut session).transpose()?;
    assert_eq!(first.map(|i| i.n), Some(3));
    let mut rest = Vec::new();
    while cursor.advance(&mut session)? {
        assert!(cursor.current().get_i32("n").is_ok());
        rest.push(cursor.deserialize_current()?.n);
    }
    assert_eq!(rest, [4, 5, 6]);

    session.start_transaction().run()?;
    let mut in_txn = coll
        .aggregate([doc! { "$match": { "n": { "$lt": 4 } } }])
        .session(&mut session)
        .run()?;
    let mut seen = 0;
    while let Some(doc) = in_txn.next(&mut session) {
        doc?;
        seen += 1;
    }
    session.commit_transaction().run()?;
    assert_eq!(seen, 4);
    Ok(())
}
