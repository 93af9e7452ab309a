//! Indexes: `IndexModel` and `IndexOptions` builders, `create_index`,
//! `create_indexes`, `list_indexes` (models), `list_index_names`,
//! `drop_index`, `drop_indexes`.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::options::{CreateIndexOptions, DropIndexOptions, IndexOptions, ListIndexesOptions};
use mongodb::sync::Client;
use mongodb::IndexModel;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_indexes").collection::<Document>("people");
    coll.drop().run()?;

    let unique = IndexModel::builder()
        .keys(doc! { "email": 1 })
        .options(IndexOptions::builder().unique(true).name("by_email".to_string()).build())
        .build();
    let created = coll.create_index(unique).run()?;
    assert_eq!(created.index_name, "by_email");

    let models = vec![
        IndexModel::builder().keys(doc! { "born": -1 }).build(),
        IndexModel::builder()
            .keys(doc! { "name": 1, "born": 1 })
            .options(IndexOptions::builder().sparse(true).build())
            .build(),
    ];
    let options = CreateIndexOptions::builder().build();
    let many = coll.create_indexes(models).with_options(options).run()?;
    assert_eq!(many.index_names, ["born_-1", "name_1_born_1"]);

    let mut names = coll.list_index_names().run()?;
    names.sort();
    assert_eq!(names, ["_id_", "born_-1", "by_email", "name_1_born_1"]);

    let listed: Vec<IndexModel> = coll
        .list_indexes()
        .with_options(ListIndexesOptions::builder().batch_size(1).build())
        .run()?
        .collect::<Result<_>>()?;
    let email = listed
        .iter()
        .find(|m| m.keys == doc! { "email": 1 })
        .expect("the unique index is listed");
    let email_options = email.options.as_ref().unwrap();
    assert_eq!(email_options.unique, Some(true));
    assert_eq!(email_options.name.as_deref(), Some("by_email"));

    coll.drop_index("born_-1").with_options(DropIndexOptions::builder().build()).run()?;
    assert_eq!(coll.list_index_names().run()?.len(), 3);
    coll.drop_indexes().run()?;
    assert_eq!(coll.list_index_names().run()?, ["_id_"]);
    Ok(())
}
