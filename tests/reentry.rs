//! An event handler that calls back into its own client: the client is
//! busy with the operation that raised the event (on the same thread), so
//! the inner operation fails at once with an error that says so, instead of
//! waiting for itself forever; the outer operation carries on. Other
//! threads still simply wait their turn.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use bson::{doc, Document};
use mongo_inline::event::command::CommandEvent;
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::event::EventHandler;
use mongo_inline::{Client, ClientOptions, ErrorKind};
use support::server::TestServer;

/// Calls into `client` from inside the events `trigger` picks, and keeps
/// what each call returned.
struct CallsBack {
    client: Mutex<Option<Client>>,
    trigger: fn(&Event<'_>) -> bool,
    outcomes: Mutex<Vec<Result<(), String>>>,
}

enum Event<'a> {
    Command(&'a CommandEvent),
    Sdam(&'a SdamEvent),
}

impl CallsBack {
    fn new(trigger: fn(&Event<'_>) -> bool) -> Arc<CallsBack> {
        Arc::new(CallsBack {
            client: Mutex::new(None),
            trigger,
            outcomes: Mutex::new(Vec::new()),
        })
    }

    fn on(&self, event: Event<'_>) {
        if !(self.trigger)(&event) {
            return;
        }
        let Some(client) = self.client.lock().unwrap().clone() else {
            return;
        };
        let ping = client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .run();
        let find = client
            .database("reentry")
            .collection::<Document>("c")
            .find_one(doc! {})
            .run();
        for outcome in [ping.map(drop), find.map(drop)] {
            let outcome = outcome.map_err(|e| {
                assert!(matches!(e.kind(), ErrorKind::Client { .. }), "{e:?}");
                e.to_string()
            });
            self.outcomes.lock().unwrap().push(outcome);
        }
    }

    /// Builds the client this handler calls into (a cycle the test breaks
    /// with `forget_client`).
    fn client_for(self: &Arc<Self>, uri: &str) -> Client {
        let mut options = ClientOptions::parse(uri).run().unwrap();
        let on_command = self.clone();
        options.command_event_handler = Some(EventHandler::callback(move |event| {
            on_command.on(Event::Command(&event));
        }));
        let on_sdam = self.clone();
        options.sdam_event_handler = Some(EventHandler::callback(move |event| {
            on_sdam.on(Event::Sdam(&event));
        }));
        let client = Client::with_options(options).unwrap();
        *self.client.lock().unwrap() = Some(client.clone());
        client
    }

    fn forget_client(&self) {
        self.client.lock().unwrap().take();
    }

    fn outcomes(&self) -> Vec<Result<(), String>> {
        self.outcomes.lock().unwrap().clone()
    }
}

fn assert_refused_as_reentry(outcomes: &[Result<(), String>]) {
    assert!(!outcomes.is_empty(), "the handler never called back");
    for outcome in outcomes {
        let message = outcome.as_ref().expect_err("a call from inside a callback");
        assert!(
            message.contains("from inside an event or log callback of the same client"),
            "{message}"
        );
    }
}

#[test]
fn an_operation_started_from_a_command_event_is_an_error_not_a_hang() {
    let handler = CallsBack::new(|event| {
        matches!(event, Event::Command(CommandEvent::Started(started))
            if started.command_name == "insert")
    });
    let client = handler.client_for(&TestServer::shared().uri());
    let coll = client.database("reentry").collection::<Document>("c");
    let inserted = coll.insert_one(doc! { "x": 1 }).run();
    handler.forget_client();
    inserted.expect("the outer operation completes");
    assert_refused_as_reentry(&handler.outcomes());
    // Once the outer operation is done, the client serves again.
    assert!(coll.find_one(doc! { "x": 1 }).run().unwrap().is_some());
}

#[test]
fn an_operation_started_from_an_sdam_event_is_an_error_not_a_hang() {
    let handler = CallsBack::new(|event| {
        matches!(event, Event::Sdam(SdamEvent::ServerDescriptionChanged(_)))
    });
    let client = handler.client_for(&TestServer::shared().uri());
    let reply = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run();
    handler.forget_client();
    reply.expect("the outer operation completes");
    assert_refused_as_reentry(&handler.outcomes());
}

/// Closing from inside a callback cannot close what the operation under
/// way is using: it happens when that operation returns, so the next one
/// runs on a new socket.
#[test]
fn close_from_a_callback_waits_for_the_operation_under_way() {
    #[derive(Default)]
    struct ClosesOnFirstStart {
        client: Mutex<Option<Client>>,
        sockets: Mutex<Vec<u32>>,
    }
    impl ClosesOnFirstStart {
        fn handle_command_event(&self, event: &CommandEvent) {
            if let CommandEvent::Started(started) = event {
                self.sockets.lock().unwrap().push(started.connection.id);
                if let Some(client) = self.client.lock().unwrap().take() {
                    client.close();
                }
            }
        }
    }
    let handler = Arc::new(ClosesOnFirstStart::default());
    let mut options = ClientOptions::parse(TestServer::shared().uri())
        .run()
        .unwrap();
    let on_command = handler.clone();
    options.command_event_handler = Some(EventHandler::callback(move |event| {
        on_command.handle_command_event(&event);
    }));
    let client = Client::with_options(options).unwrap();
    *handler.client.lock().unwrap() = Some(client.clone());
    let ping = || {
        client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .run()
    };
    ping().expect("the operation under way completes");
    ping().expect("closed, not broken: the next operation reconnects");
    let sockets = handler.sockets.lock().unwrap().clone();
    assert_eq!(sockets.len(), 2, "{sockets:?}");
    assert_ne!(
        sockets[0], sockets[1],
        "the close took effect after the first ping"
    );
}

/// The re-entry check is per thread: another thread's operation, started
/// while a handler holds the client, waits for it and succeeds.
#[test]
fn another_thread_waits_for_the_client_as_before() {
    struct Pauses {
        inside: Barrier,
        once: Mutex<bool>,
    }
    impl Pauses {
        fn handle_command_event(&self, event: &CommandEvent) {
            let CommandEvent::Started(started) = event else {
                return;
            };
            let mut once = self.once.lock().unwrap();
            if started.command_name == "ping" && !*once {
                *once = true;
                drop(once);
                self.inside.wait();
                // Long enough for the other thread to reach the lock.
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    let handler = Arc::new(Pauses {
        inside: Barrier::new(2),
        once: Mutex::new(false),
    });
    let mut options = ClientOptions::parse(TestServer::shared().uri())
        .run()
        .unwrap();
    let on_command = handler.clone();
    options.command_event_handler = Some(EventHandler::callback(move |event| {
        on_command.handle_command_event(&event);
    }));
    let client = Client::with_options(options).unwrap();
    let first = {
        let client = client.clone();
        std::thread::spawn(move || {
            client
                .database("admin")
                .run_command(doc! { "ping": 1 })
                .run()
        })
    };
    handler.inside.wait();
    let second = client
        .database("admin")
        .run_command(doc! { "buildInfo": 1 })
        .run();
    second.expect("the other thread's operation waits, then runs");
    first
        .join()
        .unwrap()
        .expect("the first operation completes");
}
