//! Matching write errors: a duplicate key as `ErrorKind::Write(WriteFailure::WriteError(..))`,
//! an `insert_many` failure as `ErrorKind::InsertMany(InsertManyError)`.

use mongodb::bson::{doc, Document};
use mongodb::error::{ErrorKind, InsertManyError, Result, WriteError, WriteFailure};
use mongodb::options::InsertManyOptions;
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_write_errors").collection::<Document>("users");
    coll.drop().run()?;
    coll.insert_one(doc! { "_id": "ada" }).run()?;

    let error = coll.insert_one(doc! { "_id": "ada" }).run().unwrap_err();
    match *error.kind {
        ErrorKind::Write(WriteFailure::WriteError(WriteError { code, ref message, .. })) => {
            assert_eq!(code, 11000);
            assert!(!message.is_empty());
        }
        ref other => panic!("expected a write error, got {other:?}"),
    }

    let options = InsertManyOptions::builder().ordered(false).build();
    let error = coll
        .insert_many([doc! { "_id": "grace" }, doc! { "_id": "ada" }, doc! { "_id": "alan" }])
        .with_options(options)
        .run()
        .unwrap_err();
    match *error.kind {
        ErrorKind::InsertMany(InsertManyError { write_errors: Some(ref errors), .. }) => {
            assert_eq!(errors.len(), 1);
            assert_eq!(errors[0].index, 1);
            assert_eq!(errors[0].code, 11000);
        }
        ref other => panic!("expected an insert_many error, got {other:?}"),
    }
    assert_eq!(coll.count_documents(doc! {}).run()?, 3);

    let ordered = coll
        .insert_many([doc! { "_id": "edsger" }, doc! { "_id": "ada" }, doc! { "_id": "barbara" }])
        .ordered(true)
        .run();
    assert!(matches!(*ordered.unwrap_err().kind, ErrorKind::InsertMany(_)));
    assert_eq!(coll.count_documents(doc! {}).run()?, 4);
    Ok(())
}
