//! `replace_one` with a typed replacement, `ReplaceOptions` and upserts.

use mongodb::bson::doc;
use mongodb::error::Result;
use mongodb::options::ReplaceOptions;
use mongodb::sync::Client;
use serde::{Deserialize, Serialize};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Setting {
    #[serde(rename = "_id")]
    key: String,
    value: i64,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let settings = client.database("compat_replace").collection::<Setting>("settings");
    settings.drop().run()?;
    settings.insert_one(Setting { key: "a".into(), value: 1 }).run()?;

    let result = settings
        .replace_one(doc! { "_id": "a" }, Setting { key: "a".into(), value: 2 })
        .run()?;
    assert_eq!((result.matched_count, result.modified_count), (1, 1));

    let options = ReplaceOptions::builder().upsert(true).build();
    let upserted = settings
        .replace_one(doc! { "_id": "b" }, Setting { key: "b".into(), value: 3 })
        .with_options(options)
        .run()?;
    assert_eq!(upserted.upserted_id, Some("b".into()));

    let none = settings
        .replace_one(doc! { "_id": "c" }, Setting { key: "c".into(), value: 4 })
        .upsert(false)
        .run()?;
    assert_eq!((none.matched_count, none.upserted_id), (0, None));

    let a = settings.find_one(doc! { "_id": "a" }).run()?;
    assert_eq!(a, Some(Setting { key: "a".into(), value: 2 }));
    Ok(())
}
