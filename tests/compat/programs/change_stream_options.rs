//! Change-stream options and what they send: `ChangeStreamOptions` built
//! with its builder and passed with `with_options`, then the setters one by
//! one (`full_document_before_change` and `FullDocumentType::Required` on
//! a collection with pre- and post-images,
//! `start_at_operation_time`, `show_expanded_events`,
//! `batch_size`, `max_await_time`, `read_concern`, `selection_criteria`),
//! each seen in the `aggregate` and `getMore` a command event handler
//! records, and in the events. (`comment` is left out: the official crate
//! also writes it into the `$changeStream` stage, which SecantusDB refuses
//! as an unknown field; this crate sends it on the `aggregate` only.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType};
use mongodb::error::Result;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{
    ChangeStreamOptions, ChangeStreamPreAndPostImages, ClientOptions,
    FullDocumentBeforeChangeType, FullDocumentType, ReadConcern, ReadPreference,
    SelectionCriteria,
};
use mongodb::sync::{ChangeStream, Client};
use serde::de::DeserializeOwned;

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

/// The commands named `name` the handler saw start, oldest first.
fn started(events: &Mutex<Vec<CommandEvent>>, name: &str) -> Vec<Document> {
    events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|event| match event {
            CommandEvent::Started(e) if e.command_name == name => Some(e.command.clone()),
            _ => None,
        })
        .collect()
}

/// A number of a command, whichever integer type the driver sent it as.
fn number(command: &Document, key: &str) -> Option<i64> {
    match command.get(key)? {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        _ => None,
    }
}

/// The `$changeStream` stage of an `aggregate`.
fn change_stream_stage(aggregate: &Document) -> Document {
    let pipeline = aggregate.get_array("pipeline").expect("a pipeline");
    let first = pipeline.first().and_then(Bson::as_document).expect("a first stage");
    first.get_document("$changeStream").expect("a $changeStream stage").clone()
}

pub fn run(uri: &str) -> Result<()> {
    let events: Arc<Mutex<Vec<CommandEvent>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let mut options = ClientOptions::parse(uri).run()?;
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        seen.lock().unwrap().push(event);
    }));
    let client = Client::with_options(options)?;
    let db = client.database("compat_change_stream_options");
    db.drop().run()?;
    db.create_collection("prices")
        .change_stream_pre_and_post_images(ChangeStreamPreAndPostImages::builder().enabled(true).build())
        .run()?;
    let prices = db.collection::<Document>("prices");
    prices.insert_one(doc! { "_id": 1, "price": 10 }).run()?;

    // All at once: the options struct from its builder.
    let options = ChangeStreamOptions::builder()
        .full_document(FullDocumentType::UpdateLookup)
        .full_document_before_change(FullDocumentBeforeChangeType::Required)
        .batch_size(2)
        .max_await_time(AWAIT)
        .build();
    events.lock().unwrap().clear();
    let mut stream = prices.watch().with_options(options).run()?;
    let aggregate = started(&events, "aggregate").pop().expect("the aggregate");
    let stage = change_stream_stage(&aggregate);
    assert_eq!(stage.get_str("fullDocument").ok(), Some("updateLookup"));
    assert_eq!(stage.get_str("fullDocumentBeforeChange").ok(), Some("required"));
    let cursor = aggregate.get_document("cursor").expect("a cursor document");
    assert_eq!(number(cursor, "batchSize"), Some(2));

    for price in [11, 12, 13] {
        prices.update_one(doc! { "_id": 1 }, doc! { "$set": { "price": price } }).run()?;
    }
    let first: ChangeStreamEvent<Document> = next_event(&mut stream)?;
    assert_eq!(first.operation_type, OperationType::Update);
    // The pre-image (the document before the change) and the post-image.
    assert_eq!(first.full_document_before_change, Some(doc! { "_id": 1, "price": 10 }));
    assert!(first.full_document.is_some());
    let second = next_event(&mut stream)?;
    assert_eq!(second.full_document_before_change, Some(doc! { "_id": 1, "price": 11 }));
    let third = next_event(&mut stream)?;
    assert_eq!(third.full_document_before_change, Some(doc! { "_id": 1, "price": 12 }));
    let get_more = started(&events, "getMore").pop().expect("a getMore");
    assert_eq!(get_more.get_str("collection").ok(), Some("prices"));
    assert_eq!(number(&get_more, "batchSize"), Some(2));
    assert_eq!(number(&get_more, "maxTimeMS"), Some(100));
    drop(stream);

    // From a past time: the events since then come again.
    let since = first.cluster_time.expect("a cluster time");
    let mut replay = prices
        .watch()
        .start_at_operation_time(since)
        .read_concern(ReadConcern::majority())
        .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        .max_await_time(AWAIT)
        .run()?;
    let again = next_event(&mut replay)?;
    assert_eq!(again.id, first.id);
    assert_eq!(again.cluster_time, Some(since));
    // Without `UpdateLookup`, an update brings its changes, not the document.
    let description = again.update_description.expect("an update description");
    assert_eq!(description.updated_fields, doc! { "price": 11 });
    assert_eq!(again.full_document, None);
    drop(replay);

    // The post-image kept by the collection, without a lookup.
    let mut post_images = prices
        .watch()
        .full_document(FullDocumentType::Required)
        .max_await_time(AWAIT)
        .run()?;
    prices.update_one(doc! { "_id": 1 }, doc! { "$set": { "price": 14 } }).run()?;
    let updated = next_event(&mut post_images)?;
    assert_eq!(updated.full_document, Some(doc! { "_id": 1, "price": 14 }));
    assert_eq!(updated.full_document_before_change, None);
    drop(post_images);

    // Expanded events: a database's stream sees collections created.
    events.lock().unwrap().clear();
    let mut expanded = db
        .watch()
        .show_expanded_events(true)
        .pipeline([doc! { "$match": { "operationType": "create" } }])
        .max_await_time(AWAIT)
        .run()?;
    let stage = change_stream_stage(&started(&events, "aggregate").pop().expect("the aggregate"));
    assert_eq!(stage.get_bool("showExpandedEvents").ok(), Some(true));
    db.create_collection("discounts").run()?;
    let created = next_event(&mut expanded)?;
    assert_eq!(created.operation_type, OperationType::Other("create".to_string()));
    assert_eq!(created.ns.and_then(|ns| ns.coll).as_deref(), Some("discounts"));
    db.drop().run()?;
    Ok(())
}
