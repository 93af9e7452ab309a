//! Command monitoring end to end: one started and one succeeded or failed
//! event per command, with matching request ids and the socket's ids;
//! failures for `ok: 0` and for a lost socket; sensitive commands redacted;
//! the command log messages.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Mutex;

use bson::oid::ObjectId;
use bson::{doc, Document};
use mongo_inline::event::command::{CommandEvent, ConnectionInfo};
use mongo_inline::event::COMMAND_LOG_TARGET;
use mongo_inline::options::FindOptions;
use support::events::recorded_client;
use support::server::TestServer;

fn name_of(event: &CommandEvent) -> &str {
    match event {
        CommandEvent::Started(e) => &e.command_name,
        CommandEvent::Succeeded(e) => &e.command_name,
        CommandEvent::Failed(e) => &e.command_name,
        other => panic!("unknown event {other:?}"),
    }
}

fn request_id_of(event: &CommandEvent) -> i32 {
    match event {
        CommandEvent::Started(e) => e.request_id,
        CommandEvent::Succeeded(e) => e.request_id,
        CommandEvent::Failed(e) => e.request_id,
        other => panic!("unknown event {other:?}"),
    }
}

fn connection_of(event: &CommandEvent) -> &ConnectionInfo {
    match event {
        CommandEvent::Started(e) => &e.connection,
        CommandEvent::Succeeded(e) => &e.connection,
        CommandEvent::Failed(e) => &e.connection,
        other => panic!("unknown event {other:?}"),
    }
}

/// Events as `started name` / `succeeded name` / `failed name`.
fn summary(events: &[CommandEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let kind = match e {
                CommandEvent::Started(_) => "started",
                CommandEvent::Succeeded(_) => "succeeded",
                CommandEvent::Failed(_) => "failed",
                _ => "other",
            };
            format!("{kind} {}", name_of(e))
        })
        .collect()
}

#[test]
fn each_command_has_a_started_and_a_succeeded_event_that_match() {
    let server = TestServer::shared();
    let (client, recorder) = recorded_client(&server.uri());
    let coll = client
        .database("command_events")
        .collection::<Document>(&format!("c_{}", ObjectId::new()));
    coll.insert_many((0..5).map(|i| doc! { "_id": i }))
        .run()
        .unwrap();
    let found = coll
        .find(doc! {})
        .with_options(FindOptions::default().batch_size(2))
        .run()
        .unwrap()
        .count();
    assert_eq!(found, 5);
    let events = recorder.take_commands();
    assert_eq!(
        summary(&events),
        [
            "started insert",
            "succeeded insert",
            "started find",
            "succeeded find",
            "started getMore",
            "succeeded getMore",
            "started getMore",
            "succeeded getMore",
        ],
        "hellos are not command events"
    );
    for pair in events.chunks(2) {
        if let CommandEvent::Started(started) = &pair[0] {
            assert_eq!(started.db, "command_events", "{}", name_of(&pair[0]));
        }
        assert_eq!(request_id_of(&pair[0]), request_id_of(&pair[1]));
        assert_eq!(connection_of(&pair[0]), connection_of(&pair[1]));
    }
    let request_ids: std::collections::BTreeSet<i32> = events.iter().map(request_id_of).collect();
    assert_eq!(request_ids.len(), 4, "each command has its own request id");
    let connection = connection_of(&events[0]);
    assert_eq!(connection.address.to_string(), server.address());
    assert!(
        connection.server_id.is_some(),
        "the handshake's connectionId: {connection:?}"
    );
    assert!(events.iter().all(|e| connection_of(e).id == connection.id));
    match &events[0] {
        CommandEvent::Started(started) => {
            assert_eq!(started.db, "command_events");
            assert_eq!(started.command.get_str("insert"), Ok(coll.name()));
            assert_eq!(started.command.get_array("documents").map(Vec::len), Ok(5));
        }
        other => panic!("{other:?}"),
    }
    match &events[3] {
        CommandEvent::Succeeded(succeeded) => {
            let first = succeeded.reply.get_document("cursor").unwrap();
            assert_eq!(first.get_array("firstBatch").map(Vec::len), Ok(2));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_ok_0_reply_is_a_failed_event() {
    let (client, recorder) = recorded_client(&TestServer::shared().uri());
    let error = client
        .database("command_events")
        .run_command(doc! { "noSuchCommand": 1 })
        .run()
        .expect_err("unknown command");
    let events = recorder.take_commands();
    assert_eq!(
        summary(&events),
        ["started noSuchCommand", "failed noSuchCommand"]
    );
    match &events[1] {
        CommandEvent::Failed(failed) => {
            assert_eq!(failed.failure.code(), error.code());
            assert!(failed.failure.code().is_some(), "{:?}", failed.failure);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(request_id_of(&events[0]), request_id_of(&events[1]));
}

#[test]
fn a_network_error_is_a_failed_event() {
    // The fail point filters on the application name, which the shared
    // server sees directly (not through the simulator, which answers hellos).
    let (client, recorder) = recorded_client(&format!(
        "{}&appName=events_network&retryReads=false",
        TestServer::shared().uri()
    ));
    let db = client.database("command_events");
    db.run_command(doc! { "ping": 1 }).run().unwrap();
    // Closes the socket the next find arrives on.
    db.run_command(doc! {
        "configureFailPoint": "failCommand",
        "mode": { "times": 1 },
        "data": { "failCommands": ["find"], "closeConnection": true, "appName": "events_network" },
    })
    .run()
    .unwrap();
    recorder.take_commands();
    let error = db
        .run_command(doc! { "find": "nothing" })
        .run()
        .expect_err("the socket closed");
    assert!(error.is_network_error(), "{error}");
    let events = recorder.take_commands();
    assert_eq!(summary(&events)[..2], ["started find", "failed find"]);
    match &events[1] {
        CommandEvent::Failed(failed) => {
            assert!(failed.failure.is_network_error(), "{:?}", failed.failure)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn sensitive_commands_are_redacted() {
    let (client, recorder) = recorded_client(&TestServer::shared().uri());
    let db = client.database("command_events");
    let _ = db
        .run_command(doc! {
            "createUser": format!("u_{}", ObjectId::new()),
            "pwd": "secret-password",
            "roles": [],
        })
        .run();
    // A sensitive command whose name the driver has no constant for.
    let _ = db
        .run_command(doc! { "updateUser": "nobody", "pwd": "secret-password" })
        .run();
    let _ = client.database("admin").run_command(doc! {
        "hello": 1,
        "speculativeAuthenticate": { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": "secret-payload" },
    }).run();
    // A plain hello is not sensitive.
    client
        .database("admin")
        .run_command(doc! { "hello": 1 })
        .run()
        .unwrap();
    let events = recorder.take_commands();
    assert_eq!(
        summary(&events)
            .iter()
            .map(|s| s.split(' ').nth(1).unwrap())
            .collect::<Vec<_>>(),
        [
            "createUser",
            "createUser",
            "updateUser",
            "updateUser",
            "hello",
            "hello",
            "hello",
            "hello"
        ]
    );
    for event in &events[..6] {
        match event {
            CommandEvent::Started(e) => assert!(e.command.is_empty(), "{}", e.command),
            CommandEvent::Succeeded(e) => assert!(e.reply.is_empty(), "{}", e.reply),
            CommandEvent::Failed(e) => {
                let failure = &e.failure;
                assert!(!format!("{failure:?}").contains("secret"), "{failure:?}")
            }
            other => panic!("{other:?}"),
        }
    }
    match (&events[6], &events[7]) {
        (CommandEvent::Started(started), CommandEvent::Succeeded(succeeded)) => {
            assert_eq!(started.command.get_i32("hello"), Ok(1));
            assert!(!succeeded.reply.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// Collects the driver's command log lines.
struct CommandLog {
    lines: Mutex<Vec<String>>,
}

impl log::Log for CommandLog {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target() == COMMAND_LOG_TARGET
    }
    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            self.lines.lock().unwrap().push(record.args().to_string());
        }
    }
    fn flush(&self) {}
}

static COMMAND_LOG: CommandLog = CommandLog {
    lines: Mutex::new(Vec::new()),
};

#[test]
fn commands_are_logged_with_their_request_ids() {
    // The logger is process-wide; other tests' lines are told apart by the
    // collection name.
    let _ = log::set_logger(&COMMAND_LOG);
    log::set_max_level(log::LevelFilter::Debug);
    let (client, recorder) = recorded_client(&TestServer::shared().uri());
    let name = format!("logged_{}", ObjectId::new());
    client
        .database("command_events")
        .run_command(doc! { "find": name.as_str() })
        .run()
        .unwrap();
    let events = recorder.take_commands();
    let request_id = request_id_of(&events[0]);
    let lines = COMMAND_LOG.lines.lock().unwrap().clone();
    let ours: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.contains(&format!(
                "The requestID is {request_id} and the operation ID is "
            ))
        })
        .filter(|l| l.contains("\"find\""))
        .collect();
    assert_eq!(ours.len(), 2, "{lines:#?}");
    assert!(
        ours[0].starts_with("Command \"find\" started on database \"command_events\""),
        "{}",
        ours[0]
    );
    assert!(ours[0].contains(&name), "{}", ours[0]);
    assert!(
        ours[1].starts_with("Command \"find\" succeeded on database \"command_events\" in "),
        "{}",
        ours[1]
    );
}

/// The CMAP spec does not apply to a single-threaded driver with one socket
/// per server: a pool event handler could never be called, so the client
/// refuses it by name instead of accepting it and staying silent.
#[test]
fn a_cmap_event_handler_is_refused_by_name() {
    use mongo_inline::event::EventHandler;
    let mut options = mongo_inline::ClientOptions::parse(TestServer::shared().uri())
        .run()
        .unwrap();
    options.cmap_event_handler = Some(EventHandler::callback(|_| {}));
    let error = mongo_inline::Client::with_options(options).expect_err("refused");
    let message = error.to_string();
    assert!(message.contains("cmap_event_handler"), "{message}");
    assert!(message.contains("no connection pool"), "{message}");
}

/// Heartbeat events carry the ids of the server's one socket, which the
/// command events name too, and every event of a client the same
/// topology id, which its log messages repeat.
#[test]
fn heartbeats_name_the_socket_commands_use() {
    use mongo_inline::event::sdam::SdamEvent;
    let (client, recorder) = recorded_client(&TestServer::shared().uri());
    client
        .database("command_events")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    let commands = recorder.take_commands();
    let CommandEvent::Started(ping) = &commands[0] else {
        panic!("{commands:?}");
    };
    let sdam = recorder.sdam();
    let succeeded: Vec<_> = sdam
        .iter()
        .filter_map(|e| match e {
            SdamEvent::ServerHeartbeatSucceeded(e) => Some(e),
            _ => None,
        })
        .collect();
    assert!(!succeeded.is_empty(), "{sdam:?}");
    for check in succeeded {
        assert_eq!(check.driver_connection_id, ping.connection.id, "{check:?}");
        assert_eq!(check.server_connection_id, ping.connection.server_id);
        assert!(!check.awaited);
    }
    let SdamEvent::TopologyOpening(opening) = &sdam[0] else {
        panic!("{sdam:?}");
    };
    assert_eq!(opening.topology_id.to_hex().len(), 24);
}
