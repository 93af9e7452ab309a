//! Events the driver publishes, as plain values, and the trait that
//! receives them.
//!
//! Two families: [`SdamEvent`]s from discovery and monitoring, and
//! [`CommandEvent`]s for every command an operation sends (one started and
//! one succeeded or failed event per attempt). Both are also written to the
//! `log` facade in the form the logging specs give.

pub mod command;
pub mod sdam;

pub use command::{log_command_event, CommandEvent};
pub use sdam::{log_sdam_event, sdam_log_message, SdamEvent, TOPOLOGY_LOG_TARGET};

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
