//! `FindOptions` and `FindOneOptions` built with their builders and passed
//! with `with_options`, next to the same options set one by one.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{FindOneOptions, FindOptions};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_find_options").collection::<Document>("numbers");
    coll.drop().run()?;
    coll.insert_many((0..10).map(|n| doc! { "_id": n, "n": n, "square": n * n })).run()?;

    let options = FindOptions::builder()
        .sort(doc! { "n": -1 })
        .skip(1)
        .limit(3)
        .projection(doc! { "_id": 0, "n": 1 })
        .batch_size(2)
        .build();
    let docs: Vec<Document> = coll.find(doc! {}).with_options(options).run()?.collect::<Result<_>>()?;
    assert_eq!(docs, vec![doc! { "n": 8 }, doc! { "n": 7 }, doc! { "n": 6 }]);

    let same: Vec<Document> = coll
        .find(doc! {})
        .sort(doc! { "n": -1 })
        .skip(1)
        .limit(3)
        .projection(doc! { "_id": 0, "n": 1 })
        .batch_size(2)
        .run()?
        .collect::<Result<_>>()?;
    assert_eq!(same, docs);

    let one = FindOneOptions::builder()
        .projection(doc! { "_id": 0, "square": 1 })
        .sort(doc! { "n": -1 })
        .build();
    let top = coll.find_one(doc! { "n": { "$lt": 5 } }).with_options(one).run()?;
    assert_eq!(top, Some(doc! { "square": 16 }));

    let skipped = coll.find_one(doc! {}).sort(doc! { "n": 1 }).skip(2).run()?;
    assert_eq!(skipped.and_then(|d| d.get_i32("n").ok()), Some(2));
    Ok(())
}
