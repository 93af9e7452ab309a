//! `list_databases` (specifications), `list_database_names` with a filter,
//! dropping a database.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::ListDatabasesOptions;
use mongodb::results::DatabaseSpecification;
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_admin_listings");
    db.collection::<Document>("c").insert_one(doc! { "x": 1 }).run()?;

    let names = client.list_database_names().run()?;
    assert!(names.iter().any(|n| n == "compat_admin_listings"));

    let filtered = client
        .list_database_names()
        .filter(doc! { "name": "compat_admin_listings" })
        .run()?;
    assert_eq!(filtered, ["compat_admin_listings"]);

    let specs: Vec<DatabaseSpecification> = client
        .list_databases()
        .with_options(ListDatabasesOptions::builder().filter(doc! { "name": { "$regex": "^compat_admin" } }).build())
        .run()?;
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].name, "compat_admin_listings");
    assert!(!specs[0].empty);

    db.drop().run()?;
    let after = client.list_database_names().run()?;
    assert!(!after.iter().any(|n| n == "compat_admin_listings"));
    Ok(())
}
