//! `aggregate` on a collection: documents, `with_type`, `AggregateOptions`.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::AggregateOptions;
use mongodb::sync::Client;
use serde::Deserialize;

#[derive(Debug, Deserialize, PartialEq)]
struct Total {
    #[serde(rename = "_id")]
    kind: String,
    total: i32,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_aggregation").collection::<Document>("sales");
    coll.drop().run()?;
    coll.insert_many([
        doc! { "kind": "a", "n": 1 },
        doc! { "kind": "b", "n": 2 },
        doc! { "kind": "a", "n": 3 },
    ])
    .run()?;
    let pipeline = [
        doc! { "$group": { "_id": "$kind", "total": { "$sum": "$n" } } },
        doc! { "$sort": { "_id": 1 } },
    ];

    let docs: Vec<Document> = coll.aggregate(pipeline.clone()).run()?.collect::<Result<_>>()?;
    assert_eq!(docs, vec![doc! { "_id": "a", "total": 4 }, doc! { "_id": "b", "total": 2 }]);

    let options = AggregateOptions::builder().allow_disk_use(true).batch_size(1).build();
    let totals: Vec<Total> = coll
        .aggregate(pipeline)
        .with_options(options)
        .with_type::<Total>()
        .run()?
        .collect::<Result<_>>()?;
    assert_eq!(totals[0], Total { kind: "a".into(), total: 4 });

    let out = coll
        .aggregate([doc! { "$match": { "kind": "a" } }, doc! { "$out": "only_a" }])
        .run()?;
    assert_eq!(out.count(), 0);
    let only_a = client.database("compat_aggregation").collection::<Document>("only_a");
    assert_eq!(only_a.count_documents(doc! {}).run()?, 2);
    Ok(())
}
