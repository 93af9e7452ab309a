//! Carrying the application's own error out of a transaction callback with
//! `Error::custom` and `get_custom`; the transaction is aborted.

use mongodb::bson::{doc, Document};
use mongodb::error::{Error, ErrorKind, Result};
use mongodb::sync::Client;

#[derive(Debug, PartialEq)]
struct OutOfStock {
    item: String,
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_custom_error").collection::<Document>("log");
    coll.drop().run()?;
    coll.insert_one(doc! { "seed": true }).run()?;

    let mut session = client.start_session().run()?;
    let result: Result<()> = session.start_transaction().and_run(|session| {
        coll.insert_one(doc! { "attempt": 1 }).session(&mut *session).run()?;
        Err(Error::custom(OutOfStock { item: "widget".into() }))
    });
    let error = result.unwrap_err();
    assert!(matches!(*error.kind, ErrorKind::Custom(_)));
    assert_eq!(error.get_custom::<OutOfStock>(), Some(&OutOfStock { item: "widget".into() }));
    assert_eq!(error.get_custom::<String>(), None);
    assert_eq!(coll.count_documents(doc! {}).run()?, 1);
    Ok(())
}
