//! Server discovery and monitoring events (the SDAM logging and monitoring
//! spec), in the official driver's shapes.
//!
//! A topology's first event is [`SdamEvent::TopologyOpening`] and its last
//! [`SdamEvent::TopologyClosed`]. Checks are polled inline with operations,
//! never streamed, so `awaited` is always `false`; a check runs on the
//! server's one socket, whose ids the heartbeat events carry once it is
//! open.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::Document;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::event::sdam as internal;

pub use crate::proto::sdam::{ServerDescription, TopologyDescription, TopologyType};

/// A server's description changed (by the spec's equality, so not for a
/// round-trip-time change alone).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerDescriptionChangedEvent {
    /// The server.
    pub address: ServerAddress,
    /// The topology.
    pub topology_id: ObjectId,
    /// The description before the change.
    pub previous_description: ServerDescription,
    /// The description after the change.
    pub new_description: ServerDescription,
}

/// A server was added to the topology.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerOpeningEvent {
    /// The server.
    pub address: ServerAddress,
    /// The topology.
    #[serde(skip, default = "ObjectId::new")]
    pub topology_id: ObjectId,
}

/// A server was removed from the topology (its socket is closed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerClosedEvent {
    /// The server.
    pub address: ServerAddress,
    /// The topology.
    #[serde(skip, default = "ObjectId::new")]
    pub topology_id: ObjectId,
}

/// The topology description changed (ignoring round-trip times).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TopologyDescriptionChangedEvent {
    /// The topology.
    pub topology_id: ObjectId,
    /// The description before the change.
    pub previous_description: TopologyDescription,
    /// The description after the change.
    pub new_description: TopologyDescription,
}

/// A topology was created; always its first event.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TopologyOpeningEvent {
    /// The topology.
    #[serde(skip, default = "ObjectId::new")]
    pub topology_id: ObjectId,
}

/// A topology was closed; always its last event.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TopologyClosedEvent {
    /// The topology.
    #[serde(skip, default = "ObjectId::new")]
    pub topology_id: ObjectId,
}

/// A check (hello) is about to be sent, or its socket opened.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerHeartbeatStartedEvent {
    /// The server being checked.
    pub server_address: ServerAddress,
    /// Whether this is an awaitable (streaming) hello: always `false`, as
    /// this driver polls.
    pub awaited: bool,
    /// The driver's id of the socket the check uses; 0 when the check has
    /// to open it.
    pub driver_connection_id: u32,
    /// The server's id of that socket, once its handshake gave one.
    pub server_connection_id: Option<i64>,
}

/// A check succeeded.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerHeartbeatSucceededEvent {
    /// How long the check took; the same measurement as the RTT sample.
    pub duration: Duration,
    /// The server's reply.
    pub reply: Document,
    /// The server checked.
    pub server_address: ServerAddress,
    /// Always `false` (see [`ServerHeartbeatStartedEvent::awaited`]).
    pub awaited: bool,
    /// The driver's id of the socket the check used.
    pub driver_connection_id: u32,
    /// The server's id of that socket.
    pub server_connection_id: Option<i64>,
}

/// A check failed.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerHeartbeatFailedEvent {
    /// How long the check took until it failed.
    pub duration: Duration,
    /// What went wrong.
    #[serde(serialize_with = "crate::proto::serde_util::error_as_string")]
    pub failure: Error,
    /// The server checked.
    pub server_address: ServerAddress,
    /// Always `false` (see [`ServerHeartbeatStartedEvent::awaited`]).
    pub awaited: bool,
    /// The driver's id of the socket the check used; 0 when it never opened.
    pub driver_connection_id: u32,
    /// The server's id of that socket.
    pub server_connection_id: Option<i64>,
}

/// A server discovery and monitoring event.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
#[allow(missing_docs)]
#[non_exhaustive]
pub enum SdamEvent {
    ServerDescriptionChanged(Box<ServerDescriptionChangedEvent>),
    ServerOpening(ServerOpeningEvent),
    ServerClosed(ServerClosedEvent),
    TopologyDescriptionChanged(Box<TopologyDescriptionChangedEvent>),
    TopologyOpening(TopologyOpeningEvent),
    TopologyClosed(TopologyClosedEvent),
    ServerHeartbeatStarted(ServerHeartbeatStartedEvent),
    ServerHeartbeatSucceeded(ServerHeartbeatSucceededEvent),
    ServerHeartbeatFailed(ServerHeartbeatFailedEvent),
}

/// The official driver's older handler form, one method per event: prefer
/// [`EventHandler::callback`](super::EventHandler::callback). An
/// `Arc<impl SdamEventHandler>` converts into an `EventHandler`.
#[deprecated = "use the EventHandler API"]
#[allow(missing_docs)]
pub trait SdamEventHandler: Send + Sync {
    fn handle_server_description_changed_event(&self, _event: ServerDescriptionChangedEvent) {}
    fn handle_server_opening_event(&self, _event: ServerOpeningEvent) {}
    fn handle_server_closed_event(&self, _event: ServerClosedEvent) {}
    fn handle_topology_description_changed_event(&self, _event: TopologyDescriptionChangedEvent) {}
    fn handle_topology_opening_event(&self, _event: TopologyOpeningEvent) {}
    fn handle_topology_closed_event(&self, _event: TopologyClosedEvent) {}
    fn handle_server_heartbeat_started_event(&self, _event: ServerHeartbeatStartedEvent) {}
    fn handle_server_heartbeat_succeeded_event(&self, _event: ServerHeartbeatSucceededEvent) {}
    fn handle_server_heartbeat_failed_event(&self, _event: ServerHeartbeatFailedEvent) {}
}

/// The socket a check used, as the heartbeat events give it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CheckSocket {
    pub(crate) driver_connection_id: u32,
    pub(crate) server_connection_id: Option<i64>,
}

impl SdamEvent {
    /// The public form of an internal event; `socket` is the checked
    /// server's socket, for heartbeat events.
    pub(crate) fn from_internal(event: &internal::SdamEvent, socket: CheckSocket) -> Self {
        use internal::SdamEvent as E;
        match event {
            E::TopologyOpening { topology_id } => {
                SdamEvent::TopologyOpening(TopologyOpeningEvent {
                    topology_id: topology_id.object_id(),
                })
            }
            E::TopologyClosed { topology_id } => SdamEvent::TopologyClosed(TopologyClosedEvent {
                topology_id: topology_id.object_id(),
            }),
            E::TopologyDescriptionChanged {
                topology_id,
                previous,
                new,
            } => topology_changed(topology_id.object_id(), previous, new),
            E::ServerOpening {
                topology_id,
                address,
            } => SdamEvent::ServerOpening(ServerOpeningEvent {
                address: address.clone(),
                topology_id: topology_id.object_id(),
            }),
            E::ServerClosed {
                topology_id,
                address,
            } => SdamEvent::ServerClosed(ServerClosedEvent {
                address: address.clone(),
                topology_id: topology_id.object_id(),
            }),
            E::ServerDescriptionChanged {
                topology_id,
                address,
                previous,
                new,
            } => server_changed(topology_id.object_id(), address, previous, new),
            E::ServerHeartbeatStarted {
                address, awaited, ..
            } => SdamEvent::ServerHeartbeatStarted(ServerHeartbeatStartedEvent {
                server_address: address.clone(),
                awaited: *awaited,
                driver_connection_id: socket.driver_connection_id,
                server_connection_id: socket.server_connection_id,
            }),
            E::ServerHeartbeatSucceeded {
                address,
                awaited,
                duration,
                reply,
                ..
            } => succeeded(address, *awaited, *duration, reply, socket),
            E::ServerHeartbeatFailed {
                address,
                awaited,
                duration,
                failure,
                ..
            } => failed(address, *awaited, *duration, failure, socket),
        }
    }
}

fn topology_changed(
    topology_id: ObjectId,
    previous: &TopologyDescription,
    new: &TopologyDescription,
) -> SdamEvent {
    SdamEvent::TopologyDescriptionChanged(Box::new(TopologyDescriptionChangedEvent {
        topology_id,
        previous_description: previous.clone(),
        new_description: new.clone(),
    }))
}

fn server_changed(
    topology_id: ObjectId,
    address: &ServerAddress,
    previous: &ServerDescription,
    new: &ServerDescription,
) -> SdamEvent {
    SdamEvent::ServerDescriptionChanged(Box::new(ServerDescriptionChangedEvent {
        address: address.clone(),
        topology_id,
        previous_description: previous.clone(),
        new_description: new.clone(),
    }))
}

fn succeeded(
    address: &ServerAddress,
    awaited: bool,
    duration: Duration,
    reply: &Document,
    socket: CheckSocket,
) -> SdamEvent {
    SdamEvent::ServerHeartbeatSucceeded(ServerHeartbeatSucceededEvent {
        duration,
        reply: reply.clone(),
        server_address: address.clone(),
        awaited,
        driver_connection_id: socket.driver_connection_id,
        server_connection_id: socket.server_connection_id,
    })
}

fn failed(
    address: &ServerAddress,
    awaited: bool,
    duration: Duration,
    failure: &Error,
    socket: CheckSocket,
) -> SdamEvent {
    SdamEvent::ServerHeartbeatFailed(ServerHeartbeatFailedEvent {
        duration,
        failure: failure.clone(),
        server_address: address.clone(),
        awaited,
        driver_connection_id: socket.driver_connection_id,
        server_connection_id: socket.server_connection_id,
    })
}
