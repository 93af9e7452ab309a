//! A bounded change stream, as a script or a FaaS handler would use one:
//! take the changes since the last run (from a stored resume token), wait a
//! bounded time for more, store the token for the next run, and exit.
//! Nothing runs in the background: each wait is one `getMore` the caller
//! asked for. Needs a replica set (change streams read the oplog).
//!
//! ```text
//! MONGODB_URI='mongodb://127.0.0.1:27017/?directConnection=true' cargo run --example change_stream
//! ```

use std::time::Duration;

use mongo_inline::bson::doc;
use mongo_inline::change_stream::event::{OperationType, ResumeToken};
use mongo_inline::Client;
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    #[serde(rename = "_id")]
    id: i32,
    status: String,
}

/// One run: the events after `token` (or from now), each `getMore` waiting
/// at most 200 ms, until a wait brings nothing; returns the token to store.
fn run_once(
    orders: &mongo_inline::Collection<Order>,
    token: Option<ResumeToken>,
) -> mongo_inline::Result<(Vec<String>, Option<ResumeToken>)> {
    let mut stream = orders
        .watch()
        .pipeline([doc! { "$match": { "operationType": { "$in": ["insert", "update"] } } }])
        .max_await_time(Duration::from_millis(200))
        .resume_after(token)
        .run()?;
    let mut seen = Vec::new();
    // next_if_any: one bounded getMore at most; None when it brought nothing.
    while let Some(event) = stream.next_if_any()? {
        let what = match event.operation_type {
            OperationType::Insert => "inserted",
            OperationType::Update => "updated",
            _ => "changed",
        };
        let key = event.document_key.and_then(|k| k.get_i32("_id").ok());
        seen.push(format!("order {} {what}", key.unwrap_or(-1)));
    }
    // Up to date even when no event came (the batch's postBatchResumeToken).
    Ok((seen, stream.resume_token()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("MONGODB_URI")
        .unwrap_or_else(|_| "mongodb://127.0.0.1:27017/?directConnection=true".into());
    let client = Client::with_uri_str(&uri)?;
    let orders = client.database("examples").collection::<Order>("orders");
    orders.drop().run()?;
    client
        .database("examples")
        .create_collection("orders")
        .run()?;

    // First run: nothing has happened yet; it still leaves a token.
    let (seen, token) = run_once(&orders, None)?;
    assert!(seen.is_empty());
    assert!(token.is_some());
    println!("first run: no changes, token stored");

    // Between runs, the application changes things.
    orders
        .insert_one(Order {
            id: 1,
            status: "new".into(),
        })
        .run()?;
    orders
        .update_one(doc! { "_id": 1 }, doc! { "$set": { "status": "paid" } })
        .run()?;
    orders
        .insert_one(Order {
            id: 2,
            status: "new".into(),
        })
        .run()?;

    // Second run: exactly the changes since the stored token.
    let (seen, token) = run_once(&orders, token)?;
    for line in &seen {
        println!("second run: {line}");
    }
    assert_eq!(
        seen,
        ["order 1 inserted", "order 1 updated", "order 2 inserted"]
    );

    // Third run: nothing new since.
    let (seen, _) = run_once(&orders, token)?;
    assert!(seen.is_empty());
    println!("third run: no changes");
    Ok(())
}
