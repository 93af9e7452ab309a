//! `delete_one`, `delete_many`, `DeleteOptions` with a collation.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{Collation, CollationStrength, DeleteOptions};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_deletes").collection::<Document>("words");
    coll.drop().run()?;
    coll.insert_many(["apple", "Apple", "pear", "plum", "peach"].map(|w| doc! { "w": w }))
        .run()?;

    let one = coll.delete_one(doc! { "w": "pear" }).run()?;
    assert_eq!(one.deleted_count, 1);

    let collation = Collation::builder()
        .locale("en")
        .strength(CollationStrength::Secondary)
        .build();
    let options = DeleteOptions::builder().collation(collation).build();
    let apples = coll.delete_many(doc! { "w": "apple" }).with_options(options).run()?;
    assert_eq!(apples.deleted_count, 2);

    let rest = coll.delete_many(doc! { "w": { "$regex": "^p" } }).run()?;
    assert_eq!(rest.deleted_count, 2);
    assert_eq!(coll.count_documents(doc! {}).run()?, 0);
    Ok(())
}
