//! `ClientOptions::server_api` with `ServerApi::builder()`: the declared
//! version (and `apiStrict`) goes with every command, `getMore` included,
//! and a strict client's command outside API version 1 (`distinct`) fails
//! with the server's `APIStrictError` (323), while a non-strict one runs it.

use std::sync::{Arc, Mutex};

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{ErrorKind, Result};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{ClientOptions, ServerApi, ServerApiVersion};
use mongodb::sync::Client;

fn client_with(uri: &str, api: ServerApi, started: &Arc<Mutex<Vec<Document>>>) -> Result<Client> {
    let seen = started.clone();
    let mut options = ClientOptions::parse(uri).run()?;
    options.server_api = Some(api);
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        if let CommandEvent::Started(event) = event {
            seen.lock().unwrap().push(event.command);
        }
    }));
    Client::with_options(options)
}

fn sent(started: &Arc<Mutex<Vec<Document>>>, name: &str) -> Document {
    started
        .lock()
        .unwrap()
        .iter()
        .find(|command| command.contains_key(name))
        .cloned()
        .unwrap_or_else(|| panic!("no {name} was sent"))
}

pub fn run(uri: &str) -> Result<()> {
    let started = Arc::new(Mutex::new(Vec::new()));
    let api = ServerApi::builder()
        .version(ServerApiVersion::V1)
        .strict(true)
        .build();
    assert_eq!(api.strict, Some(true));
    assert_eq!(api.deprecation_errors, None);
    let strict = client_with(uri, api, &started)?;
    let coll = strict
        .database("compat_stable_api")
        .collection::<Document>("c");
    coll.drop().run()?;
    coll.insert_many((0..5).map(|n| doc! { "n": n })).run()?;
    let all = coll
        .find(doc! {})
        .batch_size(2)
        .run()?
        .collect::<Result<Vec<Document>>>()?;
    assert_eq!(all.len(), 5);

    let insert = sent(&started, "insert");
    assert_eq!(insert.get("apiVersion"), Some(&Bson::from("1")));
    assert_eq!(insert.get("apiStrict"), Some(&Bson::Boolean(true)));
    assert!(!insert.contains_key("apiDeprecationErrors"));
    let get_more = sent(&started, "getMore");
    assert_eq!(get_more.get("apiVersion"), Some(&Bson::from("1")));

    let error = coll
        .distinct("n", doc! {})
        .run()
        .expect_err("distinct is outside API version 1");
    match *error.kind {
        ErrorKind::Command(ref failure) => {
            assert_eq!(failure.code, 323);
            assert_eq!(failure.code_name, "APIStrictError");
        }
        ref other => panic!("expected a command error, got {other:?}"),
    }

    let started = Arc::new(Mutex::new(Vec::new()));
    let api = ServerApi::builder()
        .version(ServerApiVersion::V1)
        .strict(false)
        .deprecation_errors(true)
        .build();
    let lenient = client_with(uri, api, &started)?;
    let values = lenient
        .database("compat_stable_api")
        .collection::<Document>("c")
        .distinct("n", doc! {})
        .run()?;
    assert_eq!(values.len(), 5);
    let distinct = sent(&started, "distinct");
    assert_eq!(distinct.get("apiVersion"), Some(&Bson::from("1")));
    assert_eq!(distinct.get("apiStrict"), Some(&Bson::Boolean(false)));
    assert_eq!(
        distinct.get("apiDeprecationErrors"),
        Some(&Bson::Boolean(true))
    );
    Ok(())
}
