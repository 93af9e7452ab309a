//! `update_one`, `update_many` (a document and a pipeline), upserts and
//! `UpdateResult`.

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::Result;
use mongodb::options::{UpdateModifications, UpdateOptions};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_updates").collection::<Document>("items");
    coll.drop().run()?;
    coll.insert_many([doc! { "_id": 1, "n": 1 }, doc! { "_id": 2, "n": 2 }, doc! { "_id": 3, "n": 3 }])
        .run()?;

    let one = coll.update_one(doc! { "_id": 1 }, doc! { "$inc": { "n": 10 } }).run()?;
    assert_eq!((one.matched_count, one.modified_count, one.upserted_id), (1, 1, None));

    let many = coll.update_many(doc! { "n": { "$lt": 5 } }, doc! { "$set": { "small": true } }).run()?;
    assert_eq!((many.matched_count, many.modified_count), (2, 2));

    let pipeline = vec![doc! { "$set": { "double": { "$multiply": ["$n", 2] } } }];
    let piped = coll
        .update_many(doc! {}, UpdateModifications::Pipeline(pipeline))
        .run()?;
    assert_eq!(piped.modified_count, 3);
    let three = coll.find_one(doc! { "_id": 3 }).run()?.unwrap();
    assert_eq!(three.get_i32("double"), Ok(6));

    let options = UpdateOptions::builder().upsert(true).build();
    let upserted = coll
        .update_one(doc! { "_id": 9 }, doc! { "$set": { "n": 9 } })
        .with_options(options)
        .run()?;
    assert_eq!(upserted.upserted_id, Some(Bson::Int32(9)));
    assert_eq!(upserted.matched_count, 0);

    let again = coll.update_one(doc! { "_id": 10 }, doc! { "$set": { "n": 10 } }).upsert(true).run()?;
    assert_eq!(again.upserted_id, Some(Bson::Int32(10)));

    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "tags": ["a", "b", "a"] } }).run()?;
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "tags.$[t]": "z" } })
        .array_filters(vec![doc! { "t": "a" }])
        .run()?;
    let tagged = coll.find_one(doc! { "_id": 1 }).run()?.unwrap();
    assert_eq!(tagged.get_array("tags").unwrap(), &vec![Bson::from("z"), Bson::from("b"), Bson::from("z")]);
    Ok(())
}
