//! `Cursor::advance`, `current` (a `&RawDocument`), `deserialize_current`
//! (into a type that borrows from the reply) and `has_next`.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::sync::Client;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Borrowed<'a> {
    name: &'a str,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_cursor_advance").collection::<Document>("names");
    coll.drop().run()?;
    coll.insert_many(["ada", "grace", "alan", "edsger", "barbara"].map(|n| doc! { "name": n }))
        .run()?;

    let mut cursor = coll.find(doc! {}).sort(doc! { "name": 1 }).batch_size(2).run()?;
    let mut names = Vec::new();
    while cursor.advance()? {
        let raw = cursor.current();
        names.push(raw.get_str("name").unwrap().to_string());
    }
    assert_eq!(names, ["ada", "alan", "barbara", "edsger", "grace"]);
    assert!(!cursor.has_next());

    let borrowed = client
        .database("compat_cursor_advance")
        .collection::<Borrowed>("names");
    let mut cursor = borrowed.find(doc! { "name": { "$gt": "b" } }).sort(doc! { "name": -1 }).run()?;
    let mut lengths = Vec::new();
    while cursor.advance()? {
        let item = cursor.deserialize_current()?;
        lengths.push(item.name.len());
    }
    assert_eq!(lengths, [5, 6, 7]);
    Ok(())
}
