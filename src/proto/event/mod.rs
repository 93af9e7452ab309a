//! Events the driver publishes, as plain values, and the trait that
//! receives them.
//!
//! Two families: [`SdamEvent`]s from discovery and monitoring, and
//! [`CommandEvent`]s for every command an operation sends (one started and
//! one succeeded or failed event per attempt). Both are also written to the
//! `log` facade as the logging specs give them: one record per message,
//! under the component's target ([`COMMAND_LOG_TARGET`],
//! [`TOPOLOGY_LOG_TARGET`], [`SERVER_SELECTION_LOG_TARGET`]), its text the
//! spec's unstructured form and its key-value pairs the spec's structured
//! fields (`message`, `commandName`, `durationMS`, ...; plus `topologyId`,
//! which tells clients apart). The logger's own filter decides what is
//! written; the spec's variables narrow it (`MONGODB_LOG_ALL`,
//! `MONGODB_LOG_COMMAND`, `MONGODB_LOG_TOPOLOGY`,
//! `MONGODB_LOG_SERVER_SELECTION`, `MONGODB_LOG_CONNECTION`: a level from
//! `off` to `trace`), and with one set and no logger installed the first
//! client installs one writing to `MONGODB_LOG_PATH` (`stderr`, `stdout`
//! or a file; stderr by default). Documents are cut to
//! `MONGODB_LOG_MAX_DOCUMENT_LENGTH` characters (1000 by default; see
//! [`set_log_max_document_length`]).

pub(crate) mod command;
pub(crate) mod sdam;

pub use command::{CommandEvent, ConnectionInfo, COMMAND_LOG_TARGET};
pub use sdam::{SdamEvent, TOPOLOGY_LOG_TARGET};

// What the events carry.
pub use crate::proto::sdam::{
    ServerDescription, ServerType, TopologyDescription, TopologyId, TopologyType, TopologyVersion,
};

pub use crate::proto::logging::CONNECTION_LOG_TARGET;
pub use crate::proto::retry::LOG_TARGET as RETRY_LOG_TARGET;
pub use crate::proto::select::LOG_TARGET as SERVER_SELECTION_LOG_TARGET;
pub use crate::shell::logging::set_max_document_length as set_log_max_document_length;

/// Receives the driver's events. Every method has a default that ignores
/// the event, so a handler implements only what it wants, and later kinds
/// of events (commands, connections) add methods without breaking it.
pub trait EventHandler: Send + Sync {
    /// Called for every SDAM event, in order.
    fn handle_sdam_event(&self, event: &SdamEvent) {
        let _ = event;
    }

    /// Called for every command event, in order.
    fn handle_command_event(&self, event: &CommandEvent) {
        let _ = event;
    }
}
