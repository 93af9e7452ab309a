//! A command event handler set in the options
//! (`command_event_handler = Some(EventHandler::callback(..))`): started,
//! succeeded and failed events as tuple variants, with their fields.

use std::sync::{Arc, Mutex};

use mongodb::bson::{doc, Document};
use mongodb::error::{ErrorKind, Result};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let events: Arc<Mutex<Vec<CommandEvent>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let mut options = ClientOptions::parse(uri).run()?;
    options.command_event_handler = Some(EventHandler::callback(move |event: CommandEvent| {
        seen.lock().unwrap().push(event);
    }));
    let client = Client::with_options(options)?;
    let db = client.database("compat_command_events");
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! { "x": 1 }).run()?;
    let error = db
        .run_command(doc! { "noSuchCommand": 1 })
        .run()
        .expect_err("an unknown command");

    let events = events.lock().unwrap().clone();
    let started = events
        .iter()
        .find_map(|event| match event {
            CommandEvent::Started(e) if e.command_name == "insert" => Some(e.clone()),
            _ => None,
        })
        .expect("a started insert");
    assert_eq!(started.db, "compat_command_events");
    assert_eq!(started.command.get_str("insert").ok(), Some("c"));
    let succeeded = events
        .iter()
        .find_map(|event| match event {
            CommandEvent::Succeeded(e) if e.request_id == started.request_id => Some(e.clone()),
            _ => None,
        })
        .expect("the insert's reply");
    assert_eq!(succeeded.command_name, "insert");
    assert_eq!(succeeded.reply.get_i32("n").ok(), Some(1));
    assert_eq!(succeeded.connection.address, started.connection.address);
    assert_eq!(succeeded.connection.id, started.connection.id);
    assert!(succeeded.service_id.is_none(), "not load balanced");

    let failed = events
        .iter()
        .find_map(|event| match event {
            CommandEvent::Failed(e) if e.command_name == "noSuchCommand" => Some(e.clone()),
            _ => None,
        })
        .expect("a failed event for the unknown command");
    let code = |error: &mongodb::error::Error| match *error.kind {
        ErrorKind::Command(ref command) => Some(command.code),
        _ => None,
    };
    assert_eq!(code(&failed.failure), Some(59), "CommandNotFound");
    assert_eq!(code(&error), Some(59));
    assert!(failed.duration <= std::time::Duration::from_secs(60));
    Ok(())
}
