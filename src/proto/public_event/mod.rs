//! Events the driver publishes, in the official driver's shapes, and the
//! [`EventHandler`] that receives them.
//!
//! Two families are published: [`sdam::SdamEvent`]s from discovery and
//! monitoring, and [`command::CommandEvent`]s for every command an
//! operation sends (one started and one succeeded or failed event per
//! attempt). A program sets a handler for each in
//! [`ClientOptions`](crate::options::ClientOptions):
//!
//! ```
//! use mongo_inline::event::command::CommandEvent;
//! use mongo_inline::event::EventHandler;
//! use mongo_inline::options::ClientOptions;
//!
//! # fn main() -> mongo_inline::error::Result<()> {
//! let mut options = ClientOptions::parse("mongodb://localhost:27017").run()?;
//! options.command_event_handler = Some(EventHandler::callback(|event| {
//!     if let CommandEvent::Started(started) = event {
//!         println!("{} on {}", started.command_name, started.db);
//!     }
//! }));
//! # Ok(())
//! # }
//! ```
//!
//! Handlers run inline, inside the operation that caused the event (there
//! is no runtime to hand them to); an operation a handler starts on the
//! same client fails with an [`ErrorKind::Client`](crate::error::ErrorKind::Client)
//! error. [`cmap`] has the connection-pool event types so programs written
//! for the official driver compile, but this driver has no pool (one socket
//! per server, the CMAP spec's single-threaded exemption), so
//! [`Client::with_options`](crate::Client::with_options) refuses a
//! `cmap_event_handler` rather than never calling it.
//!
//! Both published families are also written to the `log` facade as the
//! logging specs give them: one record per message, under the component's
//! target ([`COMMAND_LOG_TARGET`], [`TOPOLOGY_LOG_TARGET`],
//! [`SERVER_SELECTION_LOG_TARGET`]), its text the spec's unstructured form
//! and its key-value pairs the spec's structured fields (`message`,
//! `commandName`, `durationMS`, ...; plus `topologyId`, the same id as the
//! events' `topology_id`). The logger's own filter decides what is written;
//! the spec's variables narrow it (`MONGODB_LOG_ALL`, `MONGODB_LOG_COMMAND`,
//! `MONGODB_LOG_TOPOLOGY`, `MONGODB_LOG_SERVER_SELECTION`,
//! `MONGODB_LOG_CONNECTION`: a level from `off` to `trace`), and with one
//! set and no logger installed the first client installs one writing to
//! `MONGODB_LOG_PATH` (`stderr`, `stdout` or a file; stderr by default).
//! Documents are cut to `MONGODB_LOG_MAX_DOCUMENT_LENGTH` characters (1000
//! by default; see [`set_log_max_document_length`]).

pub mod cmap;
pub mod command;
mod dispatch;
pub mod sdam;

use std::sync::Arc;

pub(crate) use dispatch::OfficialHandlers;

// What the events carry.
pub use crate::proto::sdam::{
    ServerDescription, ServerType, TopologyDescription, TopologyId, TopologyType, TopologyVersion,
};

pub use crate::proto::event::{COMMAND_LOG_TARGET, TOPOLOGY_LOG_TARGET};
pub use crate::proto::logging::CONNECTION_LOG_TARGET;
pub use crate::proto::retry::LOG_TARGET as RETRY_LOG_TARGET;
pub use crate::proto::select::LOG_TARGET as SERVER_SELECTION_LOG_TARGET;
pub use crate::shell::logging::set_max_document_length as set_log_max_document_length;

/// A destination for events: a callback the driver calls inline with each
/// event, in order.
///
/// The official driver's other forms (an async callback, a `tokio` channel)
/// need a runtime, which this driver does not have; a callback can forward
/// to a channel of the program's choice.
#[derive(Clone)]
#[non_exhaustive]
pub enum EventHandler<T> {
    /// A callback.
    Callback(Arc<dyn Fn(T) + Sync + Send>),
}

impl<T> std::fmt::Debug for EventHandler<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EventHandler").finish()
    }
}

/// Two handlers are equal when they are the same callback (clones of one
/// handler), so that options holding them can be compared.
impl<T> PartialEq for EventHandler<T> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (EventHandler::Callback(a), EventHandler::Callback(b)) => Arc::ptr_eq(a, b),
        }
    }
}

impl<T: Send + Sync + 'static> EventHandler<T> {
    /// A handler that calls `f` with each event.
    pub fn callback(f: impl Fn(T) + Send + Sync + 'static) -> Self {
        Self::Callback(Arc::new(f))
    }

    pub(crate) fn handle(&self, event: T) {
        match self {
            Self::Callback(callback) => callback(event),
        }
    }
}

#[allow(deprecated)]
impl<H: command::CommandEventHandler + 'static> From<Arc<H>>
    for EventHandler<command::CommandEvent>
{
    fn from(value: Arc<H>) -> Self {
        use command::CommandEvent;
        Self::callback(move |event| match event {
            CommandEvent::Started(e) => value.handle_command_started_event(e),
            CommandEvent::Succeeded(e) => value.handle_command_succeeded_event(e),
            CommandEvent::Failed(e) => value.handle_command_failed_event(e),
        })
    }
}

#[allow(deprecated)]
impl<H: sdam::SdamEventHandler + 'static> From<Arc<H>> for EventHandler<sdam::SdamEvent> {
    fn from(value: Arc<H>) -> Self {
        use sdam::SdamEvent::*;
        Self::callback(move |event| match event {
            ServerDescriptionChanged(e) => value.handle_server_description_changed_event(*e),
            ServerOpening(e) => value.handle_server_opening_event(e),
            ServerClosed(e) => value.handle_server_closed_event(e),
            TopologyDescriptionChanged(e) => value.handle_topology_description_changed_event(*e),
            TopologyOpening(e) => value.handle_topology_opening_event(e),
            TopologyClosed(e) => value.handle_topology_closed_event(e),
            ServerHeartbeatStarted(e) => value.handle_server_heartbeat_started_event(e),
            ServerHeartbeatSucceeded(e) => value.handle_server_heartbeat_succeeded_event(e),
            ServerHeartbeatFailed(e) => value.handle_server_heartbeat_failed_event(e),
        })
    }
}
