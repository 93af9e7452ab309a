//! `find_one_and_update`, `find_one_and_replace`, `find_one_and_delete`,
//! with `ReturnDocument`, upserts, sorts and projections.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{
    FindOneAndDeleteOptions, FindOneAndReplaceOptions, FindOneAndUpdateOptions, ReturnDocument,
};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let counters = client.database("compat_find_and_modify").collection::<Document>("counters");
    counters.drop().run()?;

    let options = FindOneAndUpdateOptions::builder()
        .upsert(true)
        .return_document(ReturnDocument::After)
        .build();
    let first = counters
        .find_one_and_update(doc! { "_id": "jobs" }, doc! { "$inc": { "seq": 1 } })
        .with_options(options)
        .run()?;
    assert_eq!(first, Some(doc! { "_id": "jobs", "seq": 1 }));

    let before = counters
        .find_one_and_update(doc! { "_id": "jobs" }, doc! { "$inc": { "seq": 1 } })
        .return_document(ReturnDocument::Before)
        .run()?;
    assert_eq!(before, Some(doc! { "_id": "jobs", "seq": 1 }));

    counters.insert_many([doc! { "_id": "x", "n": 1 }, doc! { "_id": "y", "n": 2 }]).run()?;
    let replace = FindOneAndReplaceOptions::builder()
        .return_document(ReturnDocument::After)
        .projection(doc! { "_id": 0 })
        .build();
    let replaced = counters
        .find_one_and_replace(doc! { "_id": "x" }, doc! { "n": 100 })
        .with_options(replace)
        .run()?;
    assert_eq!(replaced, Some(doc! { "n": 100 }));

    let delete = FindOneAndDeleteOptions::builder().sort(doc! { "n": -1 }).build();
    let deleted = counters
        .find_one_and_delete(doc! { "n": { "$exists": true } })
        .with_options(delete)
        .run()?;
    assert_eq!(deleted, Some(doc! { "_id": "x", "n": 100 }));
    let missing = counters.find_one_and_delete(doc! { "_id": "none" }).run()?;
    assert_eq!(missing, None);
    Ok(())
}
