//! `count_documents` with `CountOptions`, `estimated_document_count` and
//! `distinct` with `DistinctOptions`.

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::Result;
use mongodb::options::{CountOptions, DistinctOptions, EstimatedDocumentCountOptions};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_counting").collection::<Document>("things");
    coll.drop().run()?;
    coll.insert_many((0..6).map(|n| doc! { "n": n, "kind": if n % 2 == 0 { "even" } else { "odd" } }))
        .run()?;

    assert_eq!(coll.count_documents(doc! { "kind": "even" }).run()?, 3);
    let options = CountOptions::builder().limit(2).skip(1).build();
    assert_eq!(coll.count_documents(doc! {}).with_options(options).run()?, 2);
    assert_eq!(coll.count_documents(doc! {}).limit(4).run()?, 4);

    let estimate = EstimatedDocumentCountOptions::builder().build();
    assert_eq!(coll.estimated_document_count().with_options(estimate).run()?, 6);

    let mut kinds = coll.distinct("kind", doc! {}).run()?;
    kinds.sort_by_key(|k| k.to_string());
    assert_eq!(kinds, vec![Bson::from("even"), Bson::from("odd")]);
    let options = DistinctOptions::builder().build();
    let odd_ns = coll.distinct("n", doc! { "kind": "odd" }).with_options(options).run()?;
    assert_eq!(odd_ns.len(), 3);
    Ok(())
}
