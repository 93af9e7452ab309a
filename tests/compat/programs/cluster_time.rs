//! `ClientSession::cluster_time()` as a `ClusterTime`, compared and
//! ordered, and `advance_cluster_time`: a session of a client that has not
//! seen another client's latest write sends that write's cluster time once
//! it is advanced to it.

use std::sync::{Arc, Mutex};

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::sync::Client;
use mongodb::ClusterTime;

pub fn run(uri: &str) -> Result<()> {
    let sent: Arc<Mutex<Vec<Document>>> = Arc::new(Mutex::new(Vec::new()));
    let record = sent.clone();
    let mut options = ClientOptions::parse(uri).run()?;
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        if let CommandEvent::Started(e) = event {
            if e.command_name == "find" {
                record.lock().unwrap().push(e.command);
            }
        }
    }));
    let reader = Client::with_options(options)?;
    let writer = Client::with_uri_str(uri)?;
    let coll = writer.database("compat_cluster_time").collection::<Document>("c");

    // The reader's clock stops at `before`; the writer's session then sees a later time.
    let mut first = reader.start_session().run()?;
    reader
        .database("compat_cluster_time")
        .collection::<Document>("c")
        .find_one(doc! {})
        .session(&mut first)
        .run()?;
    let before: ClusterTime = first.cluster_time().cloned().expect("a cluster time");
    let mut ahead = writer.start_session().run()?;
    coll.insert_one(doc! { "x": 1 }).session(&mut ahead).run()?;
    let later: ClusterTime = ahead.cluster_time().cloned().expect("a cluster time");
    assert!(later > before, "{later:?} is not after {before:?}");

    let mut behind = reader.start_session().run()?;
    assert!(behind.cluster_time().is_none());
    behind.advance_cluster_time(&later);
    assert_eq!(behind.cluster_time(), Some(&later));
    // An earlier time does not move it back.
    behind.advance_cluster_time(&before);
    assert_eq!(behind.cluster_time(), Some(&later));

    let found = reader
        .database("compat_cluster_time")
        .collection::<Document>("c")
        .find_one(doc! { "x": 1 })
        .session(&mut behind)
        .run()?;
    assert!(found.is_some());
    let expected = mongodb::bson::to_document(&later).expect("a cluster time serializes");
    let sent = sent.lock().unwrap();
    let last = sent.last().expect("a find was sent");
    assert_eq!(
        last.get_document("$clusterTime").ok().and_then(|t| t.get("clusterTime")),
        expected.get("clusterTime"),
        "{last}"
    );
    Ok(())
}
