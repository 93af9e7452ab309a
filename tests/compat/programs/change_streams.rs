//! Change streams: `watch` on a collection (typed events, a pipeline,
//! `UpdateLookup`, `batch_size`, `max_await_time`), iterated with `next`
//! and `next_if_any`; its resume token reopening it with `resume_after`
//! and `start_after`; `with_type`; a stream opened in a session; `watch` on
//! a database and on the client; the end of a stream (`is_alive`) after its
//! collection is dropped, and `start_after` its `invalidate`; an event not
//! of the stream's type.

use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType, ResumeToken};
use mongodb::error::{ErrorKind, Result};
use mongodb::options::FullDocumentType;
use mongodb::sync::{ChangeStream, Client, Collection, SessionChangeStream};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    sku: String,
    qty: i32,
}

/// Every `getMore` returns within this when no event comes.
const AWAIT: Duration = Duration::from_millis(100);

/// The next event, from at most a few bounded waits.
fn next_event<T>(stream: &mut ChangeStream<T>) -> Result<T>
where
    T: DeserializeOwned + Unpin + Send + Sync,
{
    for _ in 0..30 {
        if let Some(event) = stream.next_if_any()? {
            return Ok(event);
        }
    }
    panic!("no event came");
}

fn order(sku: &str, qty: i32) -> Order {
    Order { sku: sku.to_string(), qty }
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_change_streams");
    db.drop().run()?;
    db.create_collection("orders").run()?;
    let orders: Collection<Order> = db.collection("orders");

    let token = collection_stream(&orders)?;
    reopened_streams(&orders, token)?;
    session_stream(&client, &orders)?;
    database_and_client_streams(&client)?;
    let invalidate = stream_ends_when_its_collection_is_dropped(&orders)?;
    start_after_an_invalidate(&orders, invalidate)?;
    an_event_not_of_the_streams_type(&orders)?;
    Ok(())
}

/// Typed events through a pipeline, with the looked-up document on an
/// update; returns the token of the first event.
fn collection_stream(orders: &Collection<Order>) -> Result<ResumeToken> {
    let mut stream: ChangeStream<ChangeStreamEvent<Order>> = orders
        .watch()
        .pipeline([doc! { "$match": { "operationType": { "$in": ["insert", "update"] } } }])
        .full_document(FullDocumentType::UpdateLookup)
        .batch_size(10)
        .max_await_time(AWAIT)
        .run()?;
    assert!(stream.is_alive());
    // Nothing yet: one bounded wait, then `None`.
    assert!(stream.next_if_any()?.is_none());
    assert!(stream.is_alive());

    orders.insert_one(order("a", 1)).run()?;
    orders.update_one(doc! { "sku": "a" }, doc! { "$inc": { "qty": 2 } }).run()?;
    orders.insert_one(order("b", 5)).run()?;
    orders.delete_one(doc! { "sku": "b" }).run()?;

    let inserted = stream.next().transpose()?.expect("the insert");
    assert_eq!(inserted.operation_type, OperationType::Insert);
    assert_eq!(inserted.full_document, Some(order("a", 1)));
    let ns = inserted.ns.as_ref().expect("a namespace");
    assert_eq!(ns.db, "compat_change_streams");
    assert_eq!(ns.coll.as_deref(), Some("orders"));
    assert!(inserted.document_key.as_ref().is_some_and(|key| key.contains_key("_id")));
    let first_token = inserted.id.clone();
    // The stream's token is that of the event it last handed out.
    assert_eq!(stream.resume_token(), Some(first_token.clone()));

    let updated = next_event(&mut stream)?;
    assert_eq!(updated.operation_type, OperationType::Update);
    // `UpdateLookup`: the document as it is now.
    assert_eq!(updated.full_document, Some(order("a", 3)));
    let description = updated.update_description.expect("an update description");
    assert_eq!(description.updated_fields, doc! { "qty": 3 });
    assert!(description.removed_fields.is_empty());

    // The second insert; the delete is filtered out by the pipeline.
    let second = next_event(&mut stream)?;
    assert_eq!(second.operation_type, OperationType::Insert);
    assert_eq!(second.full_document, Some(order("b", 5)));
    assert!(stream.next_if_any()?.is_none());
    assert!(stream.resume_token().is_some());
    Ok(first_token)
}

/// A stored token reopens the stream after its event: `resume_after` and
/// `start_after`, the second read as plain documents with `with_type`.
fn reopened_streams(orders: &Collection<Order>, first_token: ResumeToken) -> Result<()> {
    let mut resumed = orders
        .watch()
        .resume_after(first_token.clone())
        .max_await_time(AWAIT)
        .run()?;
    let update = next_event(&mut resumed)?;
    assert_eq!(update.operation_type, OperationType::Update);
    assert_eq!(next_event(&mut resumed)?.operation_type, OperationType::Insert);
    let delete = next_event(&mut resumed)?;
    assert_eq!(delete.operation_type, OperationType::Delete);
    assert_eq!(delete.full_document, None);

    let mut raw: ChangeStream<Document> = orders
        .watch()
        .start_after(first_token)
        .max_await_time(AWAIT)
        .run()?
        .with_type::<Document>();
    let update = next_event(&mut raw)?;
    assert_eq!(update.get_str("operationType").ok(), Some("update"));
    assert!(update.get_document("_id").is_ok());
    let updated_fields = update
        .get_document("updateDescription")
        .and_then(|description| description.get_document("updatedFields"));
    assert_eq!(updated_fields.ok(), Some(&doc! { "qty": 3 }));
    Ok(())
}

/// A stream opened in a session is iterated with it.
fn session_stream(client: &Client, orders: &Collection<Order>) -> Result<()> {
    let mut session = client.start_session().run()?;
    let mut stream: SessionChangeStream<ChangeStreamEvent<Order>> =
        orders.watch().max_await_time(AWAIT).session(&mut session).run()?;
    assert!(stream.is_alive());
    assert!(stream.next_if_any(&mut session)?.is_none());

    orders.insert_one(order("c", 7)).session(&mut session).run()?;
    let event = stream.next(&mut session)?.expect("the insert");
    assert_eq!(event.operation_type, OperationType::Insert);
    assert_eq!(event.full_document, Some(order("c", 7)));
    assert_eq!(stream.resume_token(), Some(event.id.clone()));
    assert!(stream.next_if_any(&mut session)?.is_none());

    let mut raw: SessionChangeStream<Document> = stream.with_type();
    orders.delete_one(doc! { "sku": "c" }).run()?;
    let mut deleted = None;
    for _ in 0..30 {
        deleted = raw.next_if_any(&mut session)?;
        if deleted.is_some() {
            break;
        }
    }
    let deleted = deleted.expect("the delete");
    assert_eq!(deleted.get_str("operationType").ok(), Some("delete"));
    assert!(raw.is_alive());
    Ok(())
}

/// A database's stream sees all its collections; the client's, every
/// database.
fn database_and_client_streams(client: &Client) -> Result<()> {
    let db = client.database("compat_change_streams");
    let mut db_stream = db
        .watch()
        .pipeline([doc! { "$match": { "ns.coll": "audit" } }])
        .max_await_time(AWAIT)
        .run()?;
    let mut client_stream = client
        .watch()
        .pipeline([doc! { "$match": { "ns.db": "compat_change_streams_other" } }])
        .max_await_time(AWAIT)
        .run()?;

    db.collection::<Document>("ignored").insert_one(doc! { "n": 0 }).run()?;
    db.collection::<Document>("audit").insert_one(doc! { "n": 1 }).run()?;
    let other = client.database("compat_change_streams_other");
    other.collection::<Document>("elsewhere").insert_one(doc! { "n": 2 }).run()?;

    let audit: ChangeStreamEvent<Document> = next_event(&mut db_stream)?;
    assert_eq!(audit.operation_type, OperationType::Insert);
    assert_eq!(audit.ns.and_then(|ns| ns.coll).as_deref(), Some("audit"));
    assert_eq!(audit.full_document.map(|d| d.get_i32("n").ok()), Some(Some(1)));

    let elsewhere = next_event(&mut client_stream)?;
    assert_eq!(elsewhere.operation_type, OperationType::Insert);
    let ns = elsewhere.ns.expect("a namespace");
    assert_eq!((ns.db.as_str(), ns.coll.as_deref()), ("compat_change_streams_other", Some("elsewhere")));
    other.drop().run()?;
    Ok(())
}

/// Dropping the watched collection: a `drop` event, then `invalidate`, and
/// the stream is over; returns the `invalidate` event's token.
fn stream_ends_when_its_collection_is_dropped(orders: &Collection<Order>) -> Result<ResumeToken> {
    let mut stream = orders.watch().max_await_time(AWAIT).run()?;
    orders.drop().run()?;
    assert_eq!(next_event(&mut stream)?.operation_type, OperationType::Drop);
    let invalidate = next_event(&mut stream)?;
    assert_eq!(invalidate.operation_type, OperationType::Invalidate);
    assert!(stream.next().is_none());
    assert!(!stream.is_alive());
    // An ended stream stays ended.
    assert!(stream.next_if_any()?.is_none());
    assert!(stream.next().is_none());
    Ok(invalidate.id)
}

/// `start_after` an `invalidate` follows the recreated collection;
/// `resume_after` it is refused.
fn start_after_an_invalidate(orders: &Collection<Order>, invalidate: ResumeToken) -> Result<()> {
    orders.insert_one(order("d", 1)).run()?;
    let mut stream = orders.watch().start_after(invalidate.clone()).max_await_time(AWAIT).run()?;
    let event = next_event(&mut stream)?;
    assert_eq!(event.operation_type, OperationType::Insert);
    assert_eq!(event.full_document, Some(order("d", 1)));
    assert!(orders.watch().resume_after(invalidate).run().is_err());
    Ok(())
}

/// An event that does not deserialize as the stream's type is an error of
/// its own; the stream goes on past it.
fn an_event_not_of_the_streams_type(orders: &Collection<Order>) -> Result<()> {
    let mut stream = orders.watch().max_await_time(AWAIT).run()?;
    assert!(stream.is_alive());
    // The opening `aggregate` already gave a token (its post-batch one).
    let opened_at = stream.resume_token();
    assert!(opened_at.is_some());
    orders.clone_with_type::<Document>().insert_one(doc! { "sku": "no qty" }).run()?;
    orders.insert_one(order("f", 2)).run()?;
    let mut outcome = Ok(None);
    for _ in 0..30 {
        outcome = stream.next_if_any();
        if !matches!(outcome, Ok(None)) {
            break;
        }
    }
    let error = outcome.expect_err("an insert without `qty` is no `Order`");
    assert!(matches!(*error.kind, ErrorKind::BsonDeserialization(_)), "{error}");
    assert!(stream.is_alive());
    assert_ne!(stream.resume_token(), opened_at);
    let next = next_event(&mut stream)?;
    assert_eq!(next.full_document, Some(order("f", 2)));
    Ok(())
}
