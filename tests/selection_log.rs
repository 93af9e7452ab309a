//! The server selection log messages (server selection logging spec) as an
//! application with a `log` logger sees them, and what an incompatible
//! server leaves behind for the next selection.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::Mutex;
use std::time::Duration;

use bson::{doc, Document};
use mongo_inline::options::ReadPreference;
use mongo_inline::{Client, ErrorKind};
use support::server::TestServer;
use support::sim::{Role, Simulator};

/// Log records with their level and the thread that logged them (tests
/// run in parallel).
struct Lines(Mutex<Vec<(std::thread::ThreadId, log::Level, String)>>);

impl log::Log for Lines {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.target() != mongo_inline::event::SERVER_SELECTION_LOG_TARGET {
            return;
        }
        self.0.lock().unwrap().push((
            std::thread::current().id(),
            record.level(),
            record.args().to_string(),
        ));
    }

    fn flush(&self) {}
}

static LINES: Lines = Lines(Mutex::new(Vec::new()));

/// This thread's selection log lines so far, emptied.
fn take_lines() -> Vec<(log::Level, String)> {
    let me = std::thread::current().id();
    let mut all = LINES.0.lock().unwrap();
    let (mine, others) = all.drain(..).partition(|(thread, _, _)| *thread == me);
    *all = others;
    mine.into_iter()
        .map(|(_, level, line)| (level, line))
        .collect()
}

#[test]
fn selection_logs_name_the_command_and_wait_once_at_info() {
    // One test, as the log level is global to the process.
    let _ = log::set_logger(&LINES);

    // Info only (debug off): a selection that waits logs so once.
    log::set_max_level(log::LevelFilter::Info);
    let sim = Simulator::replica_set("rs", TestServer::shared(), &[Role::Secondary]);
    let client = Client::with_uri_str(format!(
        "{}&serverSelectionTryOnce=false&serverSelectionTimeoutMS=1500",
        sim.seed_uri(&[0])
    ))
    .unwrap();
    take_lines();
    let error = client
        .database("selection_log")
        .run_command(doc! { "ping": 1 })
        .selection_criteria(ReadPreference::Primary)
        .run()
        .expect_err("no primary");
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    let lines = take_lines();
    let waiting: Vec<_> = lines
        .iter()
        .filter(|(_, line)| line.starts_with("Waiting for server to become available"))
        .collect();
    assert_eq!(waiting.len(), 1, "once per selection: {lines:?}");
    assert_eq!(waiting[0].0, log::Level::Info);
    assert!(
        lines.iter().all(|(level, _)| *level <= log::Level::Info),
        "debug messages with debug off: {lines:?}"
    );

    // Debug: `operation` is the command's name.
    log::set_max_level(log::LevelFilter::Debug);
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let coll = client
        .database("selection_log")
        .collection::<Document>("named");
    take_lines();
    coll.insert_one(doc! { "a": 1 }).run().unwrap();
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    let lines = take_lines();
    let started: Vec<&str> = lines
        .iter()
        .filter_map(|(_, line)| line.strip_prefix("Server selection started for operation "))
        .collect();
    assert_eq!(started.len(), 2, "{lines:?}");
    assert!(started[0].starts_with("insert"), "{started:?}");
    assert!(started[1].starts_with("ping"), "{started:?}");
}

#[test]
fn an_incompatible_server_error_makes_the_next_selection_rescan() {
    let sim = Simulator::standalone(TestServer::shared());
    // Too old for this driver.
    sim.set_hello_extra(0, doc! { "maxWireVersion": 2 });
    let client = Client::with_uri_str(format!(
        "mongodb://{}/?directConnection=true&heartbeatFrequencyMS=60000",
        sim.address(0)
    ))
    .unwrap();
    let ping = || {
        client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .run()
    };
    let error = ping().expect_err("incompatible");
    assert!(error.to_string().contains("wire"), "{error}");
    // The server is upgraded: the next selection must see it, not wait a
    // heartbeat (60 s) on the old description.
    sim.set_hello_extra(0, doc! {});
    std::thread::sleep(Duration::from_millis(550));
    ping().expect("the upgraded server is selected");
}
