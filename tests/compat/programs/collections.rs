//! `create_collection` with `CreateCollectionOptions`, `list_collections`
//! (specifications whose options are `CreateCollectionOptions`),
//! `list_collection_names` with a filter, dropping.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{CreateCollectionOptions, DropCollectionOptions, ValidationLevel};
use mongodb::results::{CollectionSpecification, CollectionType};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_collections");
    db.drop().run()?;

    let options = CreateCollectionOptions::builder()
        .validator(doc! { "n": { "$type": "int" } })
        .validation_level(ValidationLevel::Strict)
        .build();
    db.create_collection("validated").with_options(options).run()?;
    db.create_collection("capped").capped(true).size(4096).run()?;
    db.create_collection("plain").run()?;

    let mut names = db.list_collection_names().run()?;
    names.sort();
    assert_eq!(names, ["capped", "plain", "validated"]);

    let filtered = db.list_collection_names().filter(doc! { "name": "plain" }).run()?;
    assert_eq!(filtered, ["plain"]);

    let specs: Vec<CollectionSpecification> = db.list_collections().run()?.collect::<Result<_>>()?;
    let validated = specs.iter().find(|s| s.name == "validated").unwrap();
    assert_eq!(validated.collection_type, CollectionType::Collection);
    assert_eq!(validated.options.validator, Some(doc! { "n": { "$type": "int" } }));
    let capped = specs.iter().find(|s| s.name == "capped").unwrap();
    assert_eq!(capped.options.capped, Some(true));

    let rejected = db.collection::<Document>("validated").insert_one(doc! { "n": "text" }).run();
    assert!(rejected.is_err());

    db.collection::<Document>("plain")
        .drop()
        .with_options(DropCollectionOptions::builder().build())
        .run()?;
    assert_eq!(db.list_collection_names().run()?.len(), 2);
    Ok(())
}
