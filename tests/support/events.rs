//! One event handler for the tests: [`Recorder`] keeps every SDAM and
//! command event the driver publishes, in order and with when it arrived,
//! and answers the few questions the tests ask of them.
//!
//! Commands are named as the events name them (the first key of the body
//! as sent). Helpers that only one test file needs stay in that file, over
//! [`Recorder::commands`], [`Recorder::timed_commands`] or
//! [`Recorder::sdam`].

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bson::Document;
use mongo_inline::event::command::CommandEvent;
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::event::EventHandler;
use mongo_inline::{Client, ClientBuilder, ClientOptions};

/// One event as received.
#[derive(Clone, Debug)]
enum Event {
    Sdam(SdamEvent),
    Command(CommandEvent),
}

/// Every event the client published, in order.
#[derive(Default)]
pub struct Recorder {
    events: Mutex<Vec<(Instant, Event)>>,
}

impl Recorder {
    /// Sets `options`' command and SDAM handlers to record into `self`.
    pub fn install(self: &Arc<Self>, options: &mut ClientOptions) {
        let sdam = self.clone();
        options.sdam_event_handler = Some(EventHandler::callback(move |event| {
            sdam.push(Event::Sdam(event));
        }));
        let commands = self.clone();
        options.command_event_handler = Some(EventHandler::callback(move |event| {
            commands.push(Event::Command(event));
        }));
    }

    fn push(&self, event: Event) {
        self.events.lock().unwrap().push((Instant::now(), event));
    }

    /// A client for `options` that reports to `self`.
    pub fn client_for(
        self: &Arc<Self>,
        mut options: ClientOptions,
    ) -> mongo_inline::Result<Client> {
        self.install(&mut options);
        Client::with_options(options)
    }

    /// The SDAM events, in order.
    pub fn sdam(&self) -> Vec<SdamEvent> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, e)| match e {
                Event::Sdam(e) => Some(e.clone()),
                Event::Command(_) => None,
            })
            .collect()
    }

    /// The command events, in order, with when each arrived.
    pub fn timed_commands(&self) -> Vec<(Instant, CommandEvent)> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(at, e)| match e {
                Event::Command(e) => Some((*at, e.clone())),
                Event::Sdam(_) => None,
            })
            .collect()
    }

    /// The command events (started, succeeded and failed), in order.
    pub fn commands(&self) -> Vec<CommandEvent> {
        self.timed_commands().into_iter().map(|(_, e)| e).collect()
    }

    /// Every command started, as sent.
    pub fn started(&self) -> Vec<Document> {
        self.started_with_address()
            .into_iter()
            .map(|(_, c)| c)
            .collect()
    }

    /// Every command started, as sent, with the address it went to.
    pub fn started_with_address(&self) -> Vec<(String, Document)> {
        self.started_named(|_| true)
    }

    /// The `name` commands started, as sent, with the address they went to.
    pub fn sent(&self, name: &str) -> Vec<(String, Document)> {
        self.started_named(|n| n == name)
    }

    /// The `name` commands started, as sent.
    pub fn named(&self, name: &str) -> Vec<Document> {
        self.sent(name).into_iter().map(|(_, c)| c).collect()
    }

    /// The replies of the commands that succeeded, in order.
    pub fn replies(&self) -> Vec<Document> {
        self.commands()
            .into_iter()
            .filter_map(|e| match e {
                CommandEvent::Succeeded(e) => Some(e.reply),
                _ => None,
            })
            .collect()
    }

    /// The addresses of the ServerHeartbeatStarted events, in order.
    pub fn heartbeats_started(&self) -> Vec<String> {
        self.sdam()
            .iter()
            .filter_map(|e| match e {
                SdamEvent::ServerHeartbeatStarted(e) => Some(e.server_address.to_string()),
                _ => None,
            })
            .collect()
    }

    /// Forgets the command events seen so far; SDAM events are kept.
    pub fn clear_commands(&self) {
        self.take_commands();
    }

    /// The command events seen so far, forgetting them; SDAM events are
    /// kept.
    pub fn take_commands(&self) -> Vec<CommandEvent> {
        let mut events = self.events.lock().unwrap();
        let mut taken = Vec::new();
        events.retain(|(_, e)| match e {
            Event::Command(e) => {
                taken.push(e.clone());
                false
            }
            Event::Sdam(_) => true,
        });
        taken
    }

    fn started_named(&self, wanted: impl Fn(&str) -> bool) -> Vec<(String, Document)> {
        self.commands()
            .into_iter()
            .filter_map(|e| match e {
                CommandEvent::Started(e) if wanted(&e.command_name) => {
                    Some((e.connection.address.to_string(), e.command))
                }
                _ => None,
            })
            .collect()
    }
}

/// A client builder for `options` that reports to a new [`Recorder`], for
/// tests that set more on the builder.
pub fn recorded_builder(mut options: ClientOptions) -> (ClientBuilder, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    recorder.install(&mut options);
    let builder = Client::builder(options);
    (builder, recorder)
}

/// A client for `uri` whose events a new [`Recorder`] keeps.
pub fn recorded_client(uri: &str) -> (Client, Arc<Recorder>) {
    let (builder, recorder) = recorded_builder(ClientOptions::parse(uri).run().expect("test URI"));
    (builder.build().expect("client"), recorder)
}

/// A command's name: the first key of its document.
pub fn command_name(command: &Document) -> &str {
    command.keys().next().map(String::as_str).unwrap_or("")
}
