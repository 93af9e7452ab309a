//! Hands the driver's internal events to the handlers a program set in
//! its options, converted to the official shapes.

use super::command::CommandEvent;
use super::sdam::{CheckSocket, SdamEvent};
use super::EventHandler;
use crate::proto::event::{self as internal, EventSink};

/// The handlers of a client's options, as the one sink its topology
/// publishes to.
pub(crate) struct OfficialHandlers {
    pub(crate) command: Option<EventHandler<CommandEvent>>,
    pub(crate) sdam: Option<EventHandler<SdamEvent>>,
}

impl EventSink for OfficialHandlers {
    fn handle_sdam_event(&self, event: &internal::SdamEvent) {
        self.handle_sdam_event_on(event, CheckSocket::default());
    }

    fn handle_sdam_event_on(&self, event: &internal::SdamEvent, socket: CheckSocket) {
        if let Some(handler) = &self.sdam {
            handler.handle(SdamEvent::from_internal(event, socket));
        }
    }

    fn handle_command_event(&self, event: &internal::CommandEvent) {
        if let Some(handler) = &self.command {
            handler.handle(CommandEvent::from_internal(event));
        }
    }
}
