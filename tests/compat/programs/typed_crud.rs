//! Typed CRUD: insert one and many, find one, find with a sort, results.

use mongodb::bson::{doc, Bson};
use mongodb::error::Result;
use mongodb::sync::Client;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Person {
    name: String,
    born: i32,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let people = client.database("compat_typed_crud").collection::<Person>("people");
    people.drop().run()?;

    let ada = Person { name: "Ada".into(), born: 1815 };
    let inserted = people.insert_one(&ada).run()?;
    assert!(matches!(inserted.inserted_id, Bson::ObjectId(_)));

    let many = people
        .insert_many(vec![
            Person { name: "Grace".into(), born: 1906 },
            Person { name: "Alan".into(), born: 1912 },
        ])
        .run()?;
    assert_eq!(many.inserted_ids.len(), 2);
    assert!(many.inserted_ids.contains_key(&0) && many.inserted_ids.contains_key(&1));

    let found = people.find_one(doc! { "name": "Ada" }).run()?;
    assert_eq!(found, Some(ada));

    let names: Vec<String> = people
        .find(doc! { "born": { "$gt": 1900 } })
        .sort(doc! { "born": -1 })
        .run()?
        .map(|p| p.map(|p| p.name))
        .collect::<Result<_>>()?;
    assert_eq!(names, ["Alan", "Grace"]);
    assert_eq!(people.find_one(doc! { "name": "Nobody" }).run()?, None);
    Ok(())
}
