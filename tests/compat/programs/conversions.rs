//! The conversions a program leans on without naming them: `?` turning an
//! I/O, BSON or raw-document error into the driver's `Error` (the official
//! `impl<E> From<E> for Error where ErrorKind: From<E>`), the older handler
//! traits made into an `EventHandler` through `From<Arc<_>>`, and a search
//! facet made into `Bson`. The generated surface check cannot name these
//! generic impls with one instance; this program names the instances.

#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use mongodb::atlas_search::facet;
use mongodb::bson::{doc, rawdoc, Bson, Document};
use mongodb::error::{Error, ErrorKind, Result};
use mongodb::event::cmap::{CmapEvent, CmapEventHandler};
use mongodb::event::sdam::{SdamEventHandler, ServerHeartbeatSucceededEvent};
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::sync::Client;

fn io_step() -> Result<()> {
    Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))?;
    Ok(())
}

fn serialization_step() -> Result<Document> {
    // A bare number is not a document.
    Ok(mongodb::bson::to_document(&5_i32)?)
}

#[derive(Debug, serde::Deserialize)]
struct Named {
    #[allow(dead_code)]
    name: String,
}

fn deserialization_step() -> Result<Named> {
    Ok(mongodb::bson::from_document(doc! { "other": 1 })?)
}

fn raw_access_step() -> Result<String> {
    let raw = rawdoc! { "present": 1 };
    Ok(raw.get_str("absent")?.to_owned())
}

#[derive(Default)]
struct Checks {
    succeeded: Mutex<Vec<ServerHeartbeatSucceededEvent>>,
}

impl SdamEventHandler for Checks {
    fn handle_server_heartbeat_succeeded_event(&self, event: ServerHeartbeatSucceededEvent) {
        self.succeeded.lock().unwrap().push(event);
    }
}

struct Pool;

impl CmapEventHandler for Pool {}

pub fn run(uri: &str) -> Result<()> {
    let io = io_step().unwrap_err();
    assert!(matches!(*io.kind, ErrorKind::Io(_)), "{io}");
    let timed_out = Error::from(std::io::ErrorKind::TimedOut);
    assert!(matches!(*timed_out.kind, ErrorKind::Io(ref e) if e.kind() == std::io::ErrorKind::TimedOut));

    let ser = serialization_step().unwrap_err();
    assert!(matches!(*ser.kind, ErrorKind::BsonSerialization(_)), "{ser}");
    let de = deserialization_step().unwrap_err();
    assert!(matches!(*de.kind, ErrorKind::BsonDeserialization(_)), "{de}");
    assert!(de.to_string().contains("name"), "{de}");
    let raw = raw_access_step().unwrap_err();
    assert!(matches!(*raw.kind, ErrorKind::InvalidResponse { .. }), "{raw}");

    let checks = Arc::new(Checks::default());
    let mut options = ClientOptions::parse(uri).run()?;
    options.sdam_event_handler = Some(EventHandler::from(checks.clone()));
    let client = Client::with_options(options)?;
    client.database("admin").run_command(doc! { "ping": 1 }).run()?;
    let succeeded = checks.succeeded.lock().unwrap().clone();
    assert!(!succeeded.is_empty(), "the handler saw the server's check");
    assert!(!succeeded[0].reply.is_empty());

    // Made the same way; pool events are not this suite's (see the README).
    let _pool_handler: EventHandler<CmapEvent> = EventHandler::from(Arc::new(Pool));

    let string_facet: Bson = facet::string("genres").num_buckets(3).into();
    assert_eq!(
        string_facet,
        Bson::Document(doc! { "type": "string", "path": "genres", "numBuckets": 3 })
    );
    Ok(())
}
