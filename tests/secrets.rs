//! No channel of the library shows a password: for connection strings that
//! go wrong in every way we know (`support::secrets`), and for good ones
//! whose authentication fails, neither errors (Display and Debug), nor
//! warnings, nor `ClientOptions`' or `Client`'s Debug, nor log records, nor
//! command and SDAM events (as Debug prints them) contain the secret. The
//! CLI's sweep is in tests/cli.rs, the C ABI's in tests/capi_ops.rs, the
//! cloud mechanisms' failures (expired credentials, bad JSON, a forged
//! nonce, a refused OIDC token) in tests/cloud_auth.rs.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::{Arc, Mutex};

use bson::{doc, Document};
use mongo_inline::event::EventHandler;
use mongo_inline::{Client, ClientOptions};
use support::secrets::{failing_uris, SECRET};
use support::server::{free_port, TestServer};

/// Every log record, as the application's logger formats it.
struct Logged(Mutex<Vec<String>>);

impl log::Log for Logged {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        self.0.lock().unwrap().push(format!(
            "{} {}: {}",
            record.level(),
            record.target(),
            record.args()
        ));
    }

    fn flush(&self) {}
}

static LOGGED: Logged = Logged(Mutex::new(Vec::new()));

/// Every event, as Debug prints it.
#[derive(Default)]
struct Events(Mutex<Vec<String>>);

impl Events {
    /// Sets `options`' command and SDAM handlers to keep their events'
    /// Debug in `self`.
    fn install(self: &Arc<Self>, options: &mut ClientOptions) {
        let sdam = self.clone();
        options.sdam_event_handler = Some(EventHandler::callback(move |event| {
            sdam.0.lock().unwrap().push(format!("{event:?}"));
        }));
        let commands = self.clone();
        options.command_event_handler = Some(EventHandler::callback(move |event| {
            commands.0.lock().unwrap().push(format!("{event:?}"));
        }));
    }
}

#[track_caller]
fn assert_hidden(channel: &str, uri: &str, text: &str) {
    assert!(
        !text.contains(SECRET),
        "{channel} for {uri:?} shows the secret: {text}"
    );
}

/// Parses `uri` and, when that works, runs a command and a write with it,
/// checking every channel on the way; the number of events seen.
fn sweep_one(uri: &str) -> usize {
    match ClientOptions::parse_with_warnings(uri) {
        Err(e) => {
            assert_hidden("the parse error", uri, &e.to_string());
            assert_hidden("the parse error's Debug", uri, &format!("{e:?}"));
        }
        Ok((options, warnings)) => {
            assert_hidden("the warnings", uri, &warnings.join("\n"));
            assert_hidden("ClientOptions' Debug", uri, &format!("{options:?}"));
        }
    }
    let client = match Client::with_uri_str(uri) {
        Err(e) => {
            assert_hidden("Client::with_uri_str's error", uri, &e.to_string());
            assert_hidden("its Debug", uri, &format!("{e:?}"));
            return 0;
        }
        Ok(client) => client,
    };
    assert_hidden("Client's Debug", uri, &format!("{client:?}"));
    assert_hidden("options()' Debug", uri, &format!("{:?}", client.options()));
    let events = Arc::new(Events::default());
    let mut options = client.options();
    events.install(&mut options);
    let client = Client::with_options(options).unwrap();
    let ping = client
        .database("secrets")
        .run_command(doc! { "ping": 1 })
        .run();
    assert_hidden("run_command's outcome", uri, &format!("{ping:?}"));
    if let Err(e) = &ping {
        assert_hidden("run_command's error", uri, &e.to_string());
    }
    let coll = client.database("secrets").collection::<Document>("c");
    let insert = coll.insert_one(doc! { "x": 1 }).run();
    assert_hidden("insert_one's outcome", uri, &format!("{insert:?}"));
    if let Err(e) = &insert {
        assert_hidden("insert_one's error", uri, &e.to_string());
    }
    client.close();
    let events = events.0.lock().unwrap();
    assert_hidden("the events", uri, &events.join("\n"));
    events.len()
}

#[test]
fn no_library_channel_shows_a_password() {
    // The only test of this file: the logger is global to the process.
    let _ = log::set_logger(&LOGGED);
    log::set_max_level(log::LevelFilter::Trace);

    let refused = format!("127.0.0.1:{}", free_port());
    let mut uris = failing_uris(&refused);
    // A live server without users: authentication is tried and fails.
    let live = TestServer::shared().address();
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-1", "PLAIN"] {
        uris.push(format!(
            "mongodb://u:{SECRET}@{live}/?directConnection=true&authMechanism={mechanism}&serverSelectionTimeoutMS=2000"
        ));
    }
    // MONGODB-AWS's secrets: the secret key and the session token.
    uris.push(format!(
        "mongodb://AKID:{SECRET}@{live}/?directConnection=true&authMechanism=MONGODB-AWS&\
         authMechanismProperties=AWS_SESSION_TOKEN:{SECRET}&serverSelectionTimeoutMS=2000"
    ));
    let mut events = 0;
    for uri in &uris {
        events += sweep_one(uri);
    }
    assert!(
        events > 0,
        "no event was published: the sweep checked nothing"
    );
    let logged = LOGGED.0.lock().unwrap();
    assert!(
        !logged.is_empty(),
        "nothing was logged: the sweep checked nothing"
    );
    assert_hidden("the log", "any", &logged.join("\n"));
}
