//! Matching on errors: a duplicate key through `Error::code()` (the
//! server's code 11000, for one document or a batch) and through the
//! error's kind, for the failed statement's details.
//!
//! ```text
//! MONGODB_URI='mongodb://127.0.0.1:27017/' cargo run --example duplicate_key
//! ```

use mongo_inline::bson::{doc, Document};
use mongo_inline::error::{ErrorKind, InsertManyError, WriteFailure};
use mongo_inline::options::{IndexModel, IndexOptions};
use mongo_inline::Client;

const DUPLICATE_KEY: i32 = 11000;

fn main() -> mongo_inline::Result<()> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017/".into());
    let client = Client::with_uri_str(&uri)?;
    let users = client.database("examples").collection::<Document>("users");
    users.drop().run()?;
    users
        .create_index(
            IndexModel::new(doc! { "email": 1 }).options(IndexOptions::default().unique(true)),
        )
        .run()?;

    users
        .insert_one(doc! { "email": "ada@example.com" })
        .run()?;

    // The simple test: the code.
    match users.insert_one(doc! { "email": "ada@example.com" }).run() {
        Err(e) if e.code() == Some(DUPLICATE_KEY) => println!("already registered: {e}"),
        Err(e) => return Err(e),
        Ok(_) => panic!("a second ada@example.com was accepted"),
    }

    // The detailed one: which statement failed, and the server's message.
    let error = users
        .insert_one(doc! { "email": "ada@example.com" })
        .run()
        .unwrap_err();
    match error.kind() {
        ErrorKind::Write(WriteFailure::WriteError(failed)) => {
            println!(
                "statement {} failed with {}: {}",
                failed.index, failed.code, failed.message
            );
            assert_eq!(failed.code, DUPLICATE_KEY);
        }
        other => panic!("expected a write error, got {other:?}"),
    }

    // A batch: the documents before the duplicate are inserted (ordered),
    // and the error keeps what succeeded.
    let batch = users
        .insert_many([
            doc! { "email": "grace@example.com" },
            doc! { "email": "ada@example.com" },
            doc! { "email": "alan@example.com" },
        ])
        .run()
        .unwrap_err();
    assert_eq!(batch.code(), Some(DUPLICATE_KEY));
    if let ErrorKind::InsertMany(InsertManyError {
        write_errors: Some(errors),
        inserted_ids,
        ..
    }) = batch.kind()
    {
        println!(
            "batch: {} inserted before statement {} failed",
            inserted_ids.len(),
            errors[0].index
        );
        assert_eq!(inserted_ids.len(), 1);
    } else {
        panic!("expected an insert_many failure, got {batch:?}");
    }
    Ok(())
}
