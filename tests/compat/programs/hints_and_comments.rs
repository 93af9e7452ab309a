//! `Hint::Keys`/`Hint::Name`, comments, `max_time` and `allow_partial_results`
//! on finds, counts and updates.

use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::Result;
use mongodb::options::{CountOptions, FindOptions, Hint, UpdateOptions};
use mongodb::sync::Client;
use mongodb::IndexModel;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_hints_and_comments").collection::<Document>("c");
    coll.drop().run()?;
    coll.insert_many((0..4).map(|n| doc! { "n": n })).run()?;
    coll.create_index(IndexModel::builder().keys(doc! { "n": 1 }).build()).run()?;

    let options = FindOptions::builder()
        .hint(Hint::Keys(doc! { "n": 1 }))
        .comment(Bson::from("compat"))
        .max_time(Duration::from_secs(5))
        .allow_partial_results(false)
        .build();
    assert_eq!(coll.find(doc! { "n": { "$gte": 2 } }).with_options(options).run()?.count(), 2);

    let options = CountOptions::builder().hint(Hint::Name("n_1".to_string())).build();
    assert_eq!(coll.count_documents(doc! {}).with_options(options).run()?, 4);

    let options = UpdateOptions::builder().hint(Hint::Name("n_1".to_string())).build();
    let updated = coll
        .update_many(doc! { "n": { "$lt": 2 } }, doc! { "$set": { "low": true } })
        .with_options(options)
        .run()?;
    assert_eq!(updated.modified_count, 2);
    assert_eq!(coll.find(doc! {}).comment("by setter").hint(Hint::Name("n_1".into())).run()?.count(), 4);
    Ok(())
}
