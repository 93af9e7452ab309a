//! SDAM events as plain values, and their log messages.
//!
//! The pure topology code ([`crate::sdam::TopologyDescription::apply`] and
//! friends) returns them in the spec's order; the shell hands each one to
//! the application's [`super::EventSink`] and to the log ([`sdam_log_message`], written by the shell),
//! which writes the SDAM logging spec's messages at debug level under the
//! target [`TOPOLOGY_LOG_TARGET`].

use std::fmt::Write as _;
use std::time::Duration;

use bson::Document;

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::logging::{document_text, insert_server, truncate, Component, LogMessage};
use crate::proto::sdam::{ServerDescription, TopologyDescription, TopologyId};

/// The `log` target of SDAM messages (the logging spec's `topology`
/// component).
pub const TOPOLOGY_LOG_TARGET: &str = "mongo_inline::topology";

/// A server discovery and monitoring event (SDAM logging and monitoring
/// spec).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SdamEvent {
    /// A topology was created; always the first event of a topology.
    TopologyOpening {
        /// The topology.
        topology_id: TopologyId,
    },
    /// The topology description changed (ignoring round-trip times).
    TopologyDescriptionChanged {
        /// The topology.
        topology_id: TopologyId,
        /// The description before the change.
        previous: Box<TopologyDescription>,
        /// The description after the change.
        new: Box<TopologyDescription>,
    },
    /// A server was added to the topology.
    ServerOpening {
        /// The topology.
        topology_id: TopologyId,
        /// The server.
        address: ServerAddress,
    },
    /// A server's description changed (by the spec's equality, so not for
    /// a round-trip-time change alone).
    ServerDescriptionChanged {
        /// The topology.
        topology_id: TopologyId,
        /// The server.
        address: ServerAddress,
        /// The description before the change.
        previous: Box<ServerDescription>,
        /// The description after the change.
        new: Box<ServerDescription>,
    },
    /// A server was removed from the topology (its socket is to be closed).
    ServerClosed {
        /// The topology.
        topology_id: TopologyId,
        /// The server.
        address: ServerAddress,
    },
    /// The topology was closed; always the last event of a topology.
    TopologyClosed {
        /// The topology.
        topology_id: TopologyId,
    },
    /// A check (hello) is about to be sent, or its socket opened.
    ServerHeartbeatStarted {
        /// The topology.
        topology_id: TopologyId,
        /// The server being checked.
        address: ServerAddress,
        /// Whether this is an awaitable (streaming) hello; always `false`
        /// for this driver, which only polls.
        awaited: bool,
    },
    /// A check succeeded.
    ServerHeartbeatSucceeded {
        /// The topology.
        topology_id: TopologyId,
        /// The server checked.
        address: ServerAddress,
        /// Whether this was an awaitable hello (always `false` here).
        awaited: bool,
        /// How long the check took; the same measurement as the RTT sample.
        duration: Duration,
        /// The server's reply.
        reply: Document,
    },
    /// A check failed.
    ServerHeartbeatFailed {
        /// The topology.
        topology_id: TopologyId,
        /// The server checked.
        address: ServerAddress,
        /// Whether this was an awaitable hello (always `false` here).
        awaited: bool,
        /// How long the check took until it failed.
        duration: Duration,
        /// What went wrong.
        failure: Error,
    },
}

/// The unstructured form of the SDAM logging spec's message for `event`;
/// `None` for a server description change, which the spec deliberately
/// leaves to the topology change that always follows it.
pub fn sdam_log_message(event: &SdamEvent) -> Option<String> {
    let message = match event {
        SdamEvent::TopologyOpening { topology_id } => {
            format!("Starting monitoring for topology with ID {topology_id}")
        }
        SdamEvent::TopologyClosed { topology_id } => {
            format!("Stopped monitoring for topology with ID {topology_id}")
        }
        SdamEvent::ServerOpening {
            topology_id,
            address,
        } => format!(
            "Starting monitoring for server {} in topology with ID {topology_id}",
            host_port(address)
        ),
        SdamEvent::ServerClosed {
            topology_id,
            address,
        } => format!(
            "Stopped monitoring for server {} in topology with ID {topology_id}",
            host_port(address)
        ),
        SdamEvent::TopologyDescriptionChanged {
            topology_id,
            previous,
            new,
        } => format!(
            "Description changed for topology with ID {topology_id}. Previous description: {}. \
             New description: {}",
            topology_summary(previous),
            topology_summary(new)
        ),
        SdamEvent::ServerDescriptionChanged { .. } => return None,
        SdamEvent::ServerHeartbeatStarted { .. }
        | SdamEvent::ServerHeartbeatSucceeded { .. }
        | SdamEvent::ServerHeartbeatFailed { .. } => return heartbeat_log_message(event),
    };
    Some(message)
}

/// The SDAM logging spec's message for `event` (debug, component
/// `topology`), its structured fields beside the unstructured form; `None`
/// for a server description change (see [`sdam_log_message`]). Replies are
/// cut to `max_document_length` characters.
pub(crate) fn sdam_log(event: &SdamEvent, max_document_length: usize) -> Option<LogMessage> {
    let text = sdam_log_message(event)?;
    let (message, topology_id) = sdam_message(event)?;
    let mut fields = bson::doc! { "message": message, "topologyId": topology_id.to_string() };
    match event {
        SdamEvent::ServerOpening { address, .. } | SdamEvent::ServerClosed { address, .. } => {
            insert_server(&mut fields, address);
        }
        SdamEvent::TopologyDescriptionChanged { previous, new, .. } => {
            fields.insert("previousDescription", topology_summary(previous));
            fields.insert("newDescription", topology_summary(new));
        }
        SdamEvent::ServerHeartbeatStarted {
            address, awaited, ..
        } => {
            insert_server(&mut fields, address);
            fields.insert("awaited", *awaited);
        }
        SdamEvent::ServerHeartbeatSucceeded {
            address,
            awaited,
            duration,
            reply,
            ..
        } => {
            insert_server(&mut fields, address);
            fields.insert("awaited", *awaited);
            fields.insert("durationMS", duration.as_secs_f64() * 1000.0);
            fields.insert("reply", document_text(reply, max_document_length));
        }
        SdamEvent::ServerHeartbeatFailed {
            address,
            awaited,
            duration,
            failure,
            ..
        } => {
            insert_server(&mut fields, address);
            fields.insert("awaited", *awaited);
            fields.insert("durationMS", duration.as_secs_f64() * 1000.0);
            fields.insert(
                "failure",
                truncate(failure.to_string(), max_document_length),
            );
        }
        _ => {}
    }
    Some(LogMessage {
        component: Component::Topology,
        level: log::Level::Debug,
        fields,
        text,
    })
}

/// The spec's `message` of `event` and its topology.
fn sdam_message(event: &SdamEvent) -> Option<(&'static str, &TopologyId)> {
    let named = match event {
        SdamEvent::TopologyOpening { topology_id } => ("Starting topology monitoring", topology_id),
        SdamEvent::TopologyClosed { topology_id } => ("Stopped topology monitoring", topology_id),
        SdamEvent::ServerOpening { topology_id, .. } => ("Starting server monitoring", topology_id),
        SdamEvent::ServerClosed { topology_id, .. } => ("Stopped server monitoring", topology_id),
        SdamEvent::TopologyDescriptionChanged { topology_id, .. } => {
            ("Topology description changed", topology_id)
        }
        SdamEvent::ServerHeartbeatStarted { topology_id, .. } => {
            ("Server heartbeat started", topology_id)
        }
        SdamEvent::ServerHeartbeatSucceeded { topology_id, .. } => {
            ("Server heartbeat succeeded", topology_id)
        }
        SdamEvent::ServerHeartbeatFailed { topology_id, .. } => {
            ("Server heartbeat failed", topology_id)
        }
        SdamEvent::ServerDescriptionChanged { .. } => return None,
    };
    Some(named)
}

/// The heartbeat events' messages, the spec's monitor log lines; `None` for
/// any other event.
fn heartbeat_log_message(event: &SdamEvent) -> Option<String> {
    let message = match event {
        SdamEvent::ServerHeartbeatStarted {
            topology_id,
            address,
            awaited,
        } => format!(
            "Heartbeat started for {} in topology with ID {topology_id}. Awaited: {awaited}",
            host_port(address)
        ),
        SdamEvent::ServerHeartbeatSucceeded {
            topology_id,
            address,
            awaited,
            duration,
            reply,
        } => format!(
            "Heartbeat succeeded in {} ms for {} in topology with ID {topology_id}. Awaited: \
             {awaited}. Reply: {}",
            duration.as_millis(),
            host_port(address),
            relaxed_json(reply)
        ),
        SdamEvent::ServerHeartbeatFailed {
            topology_id,
            address,
            awaited,
            duration,
            failure,
        } => format!(
            "Heartbeat failed in {} ms for {} in topology with ID {topology_id}. Awaited: \
             {awaited}. Failure: {failure}",
            duration.as_millis(),
            host_port(address)
        ),
        _ => return None,
    };
    Some(message)
}

fn host_port(address: &ServerAddress) -> String {
    match address.port() {
        Some(port) if address.host().contains(':') => format!("[{}]:{port}", address.host()),
        Some(port) => format!("{}:{port}", address.host()),
        None => address.host().to_string(),
    }
}

fn relaxed_json(doc: &Document) -> String {
    crate::proto::log_json::relaxed(doc)
}

fn server_summary(server: &ServerDescription) -> String {
    let mut out = format!(
        "{{address: {}, type: {}",
        server.address,
        server.server_type.as_str()
    );
    if let Some(set_name) = &server.set_name {
        let _ = write!(out, ", setName: {set_name}");
    }
    if let Some(error) = &server.error {
        let _ = write!(out, ", error: {error}");
    }
    out.push('}');
    out
}

fn topology_summary(topology: &TopologyDescription) -> String {
    let servers: Vec<String> = topology.servers.values().map(server_summary).collect();
    let mut out = format!("{{type: {}", topology.topology_type.as_str());
    if let Some(set_name) = &topology.set_name {
        let _ = write!(out, ", setName: {set_name}");
    }
    let _ = write!(out, ", servers: [{}]}}", servers.join(", "));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_messages_follow_the_logging_spec() {
        let id = TopologyId(7);
        let address = ServerAddress::tcp("a", 27017);
        assert_eq!(
            sdam_log_message(&SdamEvent::TopologyOpening { topology_id: id }).unwrap(),
            "Starting monitoring for topology with ID 000000000000000000000007"
        );
        assert_eq!(
            sdam_log_message(&SdamEvent::ServerClosed {
                topology_id: id,
                address: address.clone()
            })
            .unwrap(),
            "Stopped monitoring for server a:27017 in topology with ID 000000000000000000000007"
        );
        let message = sdam_log_message(&SdamEvent::ServerHeartbeatSucceeded {
            topology_id: id,
            address,
            awaited: false,
            duration: Duration::from_millis(3),
            reply: bson::doc! {"ok": 1},
        })
        .unwrap();
        assert!(message.starts_with("Heartbeat succeeded in 3 ms for a:27017"));
        assert!(message.ends_with("Awaited: false. Reply: {\"ok\":1}"));
    }

    #[test]
    fn server_description_changes_are_left_to_the_topology_message() {
        let address = ServerAddress::tcp("a", 27017);
        let unknown = Box::new(ServerDescription::unknown(address.clone()));
        let event = SdamEvent::ServerDescriptionChanged {
            topology_id: TopologyId(1),
            address,
            previous: unknown.clone(),
            new: unknown,
        };
        assert_eq!(sdam_log_message(&event), None);
    }
}
