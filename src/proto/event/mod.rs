//! The driver's events as its rules and shell build them, and the sink
//! its topology publishes them to. The public forms, in the official
//! driver's shapes, are `crate::event` (`proto::public_event`), converted
//! from these at the handler; the C ABI and the logs read these directly.

pub(crate) mod command;
pub(crate) mod sdam;

pub use command::{CommandEvent, COMMAND_LOG_TARGET};
pub use sdam::{SdamEvent, TOPOLOGY_LOG_TARGET};

use crate::proto::public_event::sdam::CheckSocket;

/// Receives the driver's events, by reference (a sink that keeps one
/// copies it). Every method has a default that ignores the event.
pub trait EventSink: Send + Sync {
    /// Called for every SDAM event, in order.
    fn handle_sdam_event(&self, event: &SdamEvent) {
        let _ = event;
    }

    /// [`EventSink::handle_sdam_event`], told which socket a heartbeat
    /// event's check used.
    fn handle_sdam_event_on(&self, event: &SdamEvent, socket: CheckSocket) {
        let _ = socket;
        self.handle_sdam_event(event);
    }

    /// Called for every command event, in order.
    fn handle_command_event(&self, event: &CommandEvent) {
        let _ = event;
    }
}
