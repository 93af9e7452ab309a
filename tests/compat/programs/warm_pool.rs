//! `warm_connection_pool` before the first operation, and
//! `estimated_document_count` on a fresh collection.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    client.warm_connection_pool().run();
    let coll = client.database("compat_warm_pool").collection::<Document>("c");
    coll.drop().run()?;
    assert_eq!(coll.estimated_document_count().run()?, 0);
    coll.insert_one(doc! {}).run()?;
    assert_eq!(coll.estimated_document_count().run()?, 1);
    Ok(())
}
