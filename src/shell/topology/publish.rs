//! Handing SDAM changes to whoever listens (the application's event
//! handler, the topology log), and knowing whether anyone does.

use std::sync::Arc;

use super::Topology;
use crate::proto::event::sdam::sdam_log;
use crate::proto::event::{EventSink, SdamEvent};
use crate::proto::logging::Component;
use crate::proto::public_event::sdam::CheckSocket;
use crate::proto::sdam::TopologyUpdate;
use crate::shell::logging;

/// Writes the SDAM logging spec's message for `event` at debug level (the
/// pure core builds the message; only the shell logs).
fn log_sdam_event(event: &SdamEvent) {
    if logging::enabled(Component::Topology, log::Level::Debug) {
        if let Some(message) = sdam_log(event, logging::max_document_length()) {
            logging::emit(&message);
        }
    }
}

/// Whether description change events would reach anyone: an event handler,
/// or the topology log at debug. Without either they are not built (each
/// carries copies of descriptions, the topology's on every check).
pub(super) fn change_events_wanted(handler: Option<&Arc<dyn EventSink>>) -> bool {
    handler.is_some() || logging::enabled(Component::Topology, log::Level::Debug)
}

impl Topology {
    pub(super) fn publish(&mut self, update: TopologyUpdate) {
        for address in &update.removed {
            self.connections.remove(address);
        }
        for event in &update.events {
            self.publish_event(event);
        }
    }

    pub(super) fn publish_event(&self, event: &SdamEvent) {
        log_sdam_event(event);
        if let Some(handler) = &self.handler {
            handler.handle_sdam_event_on(event, self.check_socket(event));
        }
    }

    /// The ids of the socket a heartbeat event's check runs on, once it is
    /// open (the server's one socket).
    fn check_socket(&self, event: &SdamEvent) -> CheckSocket {
        let address = match event {
            SdamEvent::ServerHeartbeatStarted { address, .. }
            | SdamEvent::ServerHeartbeatSucceeded { address, .. }
            | SdamEvent::ServerHeartbeatFailed { address, .. } => address,
            _ => return CheckSocket::default(),
        };
        match self.connections.get(address) {
            Some(connection) => CheckSocket {
                driver_connection_id: u32::try_from(connection.id()).unwrap_or(u32::MAX),
                server_connection_id: connection.server_id(),
            },
            None => CheckSocket::default(),
        }
    }

    /// Tells the monitor whether to build change events, as the log's level
    /// may have changed since the last operation.
    pub(super) fn refresh_change_events(&mut self) {
        let wanted = change_events_wanted(self.handler.as_ref());
        self.monitor.set_change_events(wanted);
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use bson::doc;

    use super::*;
    use crate::proto::address::ServerAddress;
    use crate::proto::monitor::CheckOutcome;
    use crate::proto::options::ClientOptions;

    struct Ignoring;

    impl EventSink for Ignoring {}

    /// The events of a client's first check of a primary that names one
    /// more member, with or without an event handler.
    fn first_check_events(handler: Option<Arc<dyn EventSink>>) -> Vec<SdamEvent> {
        let options = ClientOptions::parse("mongodb://a:27017/?replicaSet=rs")
            .run()
            .unwrap();
        let mut topology = Topology::new(options, handler, None).unwrap();
        topology.refresh_change_events();
        let hello = doc! {
            "ok": 1, "isWritablePrimary": true, "setName": "rs",
            "hosts": ["a:27017", "b:27017"], "minWireVersion": 0, "maxWireVersion": 21,
        };
        let address = ServerAddress::tcp("a", 27017);
        let outcome = CheckOutcome::Reply(hello);
        let update =
            topology
                .monitor
                .on_check(&address, outcome, Duration::from_millis(1), Instant::now());
        update.events
    }

    fn is_change(event: &SdamEvent) -> bool {
        matches!(
            event,
            SdamEvent::ServerDescriptionChanged { .. }
                | SdamEvent::TopologyDescriptionChanged { .. }
        )
    }

    #[test]
    fn description_changes_are_built_only_when_someone_listens() {
        let heard = first_check_events(Some(Arc::new(Ignoring)));
        assert!(heard.iter().any(is_change), "{heard:?}");
        let quiet = first_check_events(None);
        let opened = |e: &SdamEvent| matches!(e, SdamEvent::ServerOpening { .. });
        assert!(quiet.iter().any(opened), "openings are still reported");
        // Another test of this binary may have turned the topology log on.
        let logged = logging::enabled(Component::Topology, log::Level::Debug);
        assert_eq!(quiet.iter().any(is_change), logged, "{quiet:?}");
    }
}
