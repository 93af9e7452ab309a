//! An SDAM event handler set in the options (`sdam_event_handler`): the
//! topology's opening, its servers and their checks, as tuple variants
//! carrying the official fields and descriptions.

use std::sync::{Arc, Mutex};

use mongodb::bson::doc;
use mongodb::error::Result;
use mongodb::event::sdam::SdamEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::sync::Client;
use mongodb::ServerType;

pub fn run(uri: &str) -> Result<()> {
    let events: Arc<Mutex<Vec<SdamEvent>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let options = ClientOptions::builder()
        .hosts(ClientOptions::parse(uri).run()?.hosts)
        .direct_connection(true)
        .sdam_event_handler(EventHandler::callback(move |event: SdamEvent| {
            seen.lock().unwrap().push(event);
        }))
        .build();
    let client = Client::with_options(options)?;
    client.database("admin").run_command(doc! { "ping": 1 }).run()?;

    let events = events.lock().unwrap().clone();
    let Some(SdamEvent::TopologyOpening(opening)) = events.first() else {
        panic!("the first event opens the topology: {events:?}");
    };
    let opened = events
        .iter()
        .find_map(|event| match event {
            SdamEvent::ServerOpening(e) => Some(e.clone()),
            _ => None,
        })
        .expect("a server opening");
    assert_eq!(opened.topology_id, opening.topology_id);
    let checked = events
        .iter()
        .find_map(|event| match event {
            SdamEvent::ServerHeartbeatSucceeded(e) => Some(e.clone()),
            _ => None,
        })
        .expect("a successful check");
    assert_eq!(checked.server_address, opened.address);
    assert!(!checked.reply.is_empty());
    let changed = events
        .iter()
        .find_map(|event| match event {
            SdamEvent::ServerDescriptionChanged(e) => Some(e.clone()),
            _ => None,
        })
        .expect("the server's description changed");
    assert_eq!(changed.address, opened.address);
    assert_eq!(changed.previous_description.server_type(), ServerType::Unknown);
    assert_ne!(changed.new_description.server_type(), ServerType::Unknown);
    assert!(events.iter().any(|event| matches!(
        event,
        SdamEvent::TopologyDescriptionChanged(e) if e.topology_id == opening.topology_id
    )));
    Ok(())
}
