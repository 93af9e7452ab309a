//! Handles: `name`, `namespace`, `clone_with_type`, `default_database`,
//! `Database::name`.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::sync::Client;
use mongodb::Namespace;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Point {
    x: i32,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_collection_handles");
    assert_eq!(db.name(), "compat_collection_handles");
    let points = db.collection::<Point>("points");
    assert_eq!(points.name(), "points");
    let namespace: Namespace = points.namespace();
    assert_eq!((namespace.db.as_str(), namespace.coll.as_str()), ("compat_collection_handles", "points"));
    assert_eq!(namespace.to_string(), "compat_collection_handles.points");

    points.drop().run()?;
    points.insert_one(Point { x: 3 }).run()?;
    let untyped = points.clone_with_type::<Document>();
    let doc = untyped.find_one(doc! {}).projection(doc! { "_id": 0 }).run()?;
    assert_eq!(doc, Some(doc! { "x": 3 }));

    let separator = if uri.contains("/?") { "/?" } else { "?" };
    let with_db = match uri.split_once(separator) {
        Some((hosts, query)) => format!("{}/compat_collection_handles?{query}", hosts.trim_end_matches('/')),
        None => format!("{}/compat_collection_handles", uri.trim_end_matches('/')),
    };
    let client = Client::with_uri_str(&with_db)?;
    let default = client.default_database().expect("the URI names a database");
    assert_eq!(default.name(), "compat_collection_handles");
    Ok(())
}
