//! `client.database_with_options(.., DatabaseOptions)`,
//! `db.collection_with_options(.., CollectionOptions)` and the
//! `selection_criteria()`/`read_concern()`/`write_concern()` getters of
//! `Client`, `Database` and `Collection`: each level inherits what the one
//! above sets and overrides what it sets itself.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{
    CollectionOptions, DatabaseOptions, ReadConcern, ReadPreference, SelectionCriteria,
    WriteConcern,
};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let separator = if uri.contains('?') { '&' } else { '?' };
    let client = Client::with_uri_str(format!("{uri}{separator}w=1&readConcernLevel=local"))?;
    assert_eq!(client.write_concern(), Some(&WriteConcern::nodes(1)));
    assert_eq!(client.read_concern(), Some(&ReadConcern::local()));
    assert_eq!(client.selection_criteria(), None);

    // The database inherits the client's read concern, sets its own
    // write concern and read preference.
    let primary = SelectionCriteria::ReadPreference(ReadPreference::Primary);
    let db_options = DatabaseOptions::builder()
        .write_concern(WriteConcern::majority())
        .selection_criteria(primary.clone())
        .build();
    let db = client.database_with_options("compat_handle_options", db_options);
    assert_eq!(db.write_concern(), Some(&WriteConcern::majority()));
    assert_eq!(db.read_concern(), Some(&ReadConcern::local()));
    assert_eq!(db.selection_criteria(), Some(&primary));

    // A plain collection inherits all of the database's.
    let plain = db.collection::<Document>("c");
    assert_eq!(plain.write_concern(), Some(&WriteConcern::majority()));
    assert_eq!(plain.read_concern(), Some(&ReadConcern::local()));
    assert_eq!(plain.selection_criteria(), Some(&primary));
    plain.drop().run()?;
    plain.insert_one(doc! { "x": 1 }).run()?;

    // A collection with options overrides some and inherits the rest.
    let nearest = SelectionCriteria::ReadPreference(ReadPreference::Nearest { options: None });
    let coll_options = CollectionOptions::builder()
        .read_concern(ReadConcern::majority())
        .selection_criteria(nearest.clone())
        .build();
    let coll = db.collection_with_options::<Document>("c", coll_options);
    assert_eq!(coll.read_concern(), Some(&ReadConcern::majority()));
    assert_eq!(coll.selection_criteria(), Some(&nearest));
    assert_eq!(coll.write_concern(), Some(&WriteConcern::majority()));
    coll.insert_one(doc! { "x": 2 }).run()?;
    assert_eq!(coll.count_documents(doc! {}).run()?, 2);
    assert_eq!(coll.find(doc! { "x": 2 }).run()?.count(), 1);

    // Options left unset: the database's, which are the client's here.
    let defaults = client.database_with_options("compat_handle_options", DatabaseOptions::default());
    assert_eq!(defaults.write_concern(), Some(&WriteConcern::nodes(1)));
    let same = defaults.collection_with_options::<Document>("c", CollectionOptions::default());
    assert_eq!(same.read_concern(), Some(&ReadConcern::local()));
    assert_eq!(same.estimated_document_count().run()?, 2);
    Ok(())
}
