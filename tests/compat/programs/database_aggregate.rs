//! `Database::aggregate` with `$documents`, and `with_type` on it.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::sync::Client;
use serde::Deserialize;

#[derive(Debug, Deserialize, PartialEq)]
struct Row {
    x: i32,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_database_aggregate");
    let pipeline = [
        doc! { "$documents": [{ "x": 1 }, { "x": 2 }, { "x": 3 }] },
        doc! { "$match": { "x": { "$gte": 2 } } },
    ];
    let docs: Vec<Document> = db.aggregate(pipeline.clone()).run()?.collect::<Result<_>>()?;
    assert_eq!(docs, vec![doc! { "x": 2 }, doc! { "x": 3 }]);
    let rows: Vec<Row> = db.aggregate(pipeline).with_type::<Row>().run()?.collect::<Result<_>>()?;
    assert_eq!(rows, [Row { x: 2 }, Row { x: 3 }]);
    Ok(())
}
