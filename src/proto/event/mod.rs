//! Events the driver publishes, as plain values, and the trait that
//! receives them.
//!
//! Two families: [`SdamEvent`]s from discovery and monitoring, and
//! [`CommandEvent`]s for every command an operation sends (one started and
//! one succeeded or failed event per attempt). Both are also written to the
//! `log` facade in the form the logging specs give.

pub(crate) mod command;
pub(crate) mod sdam;

pub(crate) use command::command_log_message;
pub use command::{CommandEvent, ConnectionInfo, COMMAND_LOG_TARGET};
pub(crate) use sdam::sdam_log_message;
pub use sdam::{SdamEvent, TOPOLOGY_LOG_TARGET};

// What the events carry.
pub use crate::proto::sdam::{
    ServerDescription, ServerType, TopologyDescription, TopologyId, TopologyType, TopologyVersion,
};

pub use crate::proto::retry::LOG_TARGET as RETRY_LOG_TARGET;
pub use crate::proto::select::LOG_TARGET as SERVER_SELECTION_LOG_TARGET;

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
