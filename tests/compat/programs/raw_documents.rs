//! A `Collection<RawDocumentBuf>`: raw inserts and finds without a
//! conversion to `Document`.

use mongodb::bson::{doc, rawdoc, RawDocumentBuf};
use mongodb::error::Result;
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let raw = client.database("compat_raw_documents").collection::<RawDocumentBuf>("raw");
    raw.drop().run()?;
    raw.insert_one(rawdoc! { "_id": 1, "name": "ada", "tags": ["x", "y"] }).run()?;
    raw.insert_many([rawdoc! { "_id": 2, "name": "grace" }, rawdoc! { "_id": 3, "name": "alan" }])
        .run()?;

    let one = raw.find_one(doc! { "_id": 1 }).run()?.unwrap();
    assert_eq!(one.get_str("name"), Ok("ada"));
    assert_eq!(one.get_array("tags").unwrap().into_iter().count(), 2);

    let mut names = Vec::new();
    for doc in raw.find(doc! {}).sort(doc! { "_id": -1 }).run()? {
        names.push(doc?.get_str("name").unwrap().to_string());
    }
    assert_eq!(names, ["alan", "grace", "ada"]);
    Ok(())
}
