//! Command monitoring events (the command logging and monitoring spec), in
//! the official driver's shapes.
//!
//! Every attempt of an operation publishes a [`CommandEvent::Started`] and
//! then a [`CommandEvent::Succeeded`] or [`CommandEvent::Failed`], so a
//! retried operation shows every attempt. Sensitive commands (and hellos
//! that carry speculative authentication) are published with empty command
//! and reply documents, as the spec requires.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::Document;
use serde::Serialize;

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::event::command as internal;

/// Which socket a command went over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The driver's id of the socket, unique within the process.
    pub id: u32,
    /// The server's `connectionId` from the handshake, when it sent one;
    /// it correlates the socket with the server's logs.
    pub server_id: Option<i64>,
    /// The server.
    pub address: ServerAddress,
}

/// A command is about to be sent.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CommandStartedEvent {
    /// The command as sent (empty when redacted).
    pub command: Document,
    /// The database it runs on.
    pub db: String,
    /// The command's name.
    pub command_name: String,
    /// The wire request id, which the command's reply event repeats.
    pub request_id: i32,
    /// The socket.
    pub connection: ConnectionInfo,
    /// The service behind a load balancer, in load-balanced mode.
    pub service_id: Option<ObjectId>,
}

/// A command succeeded.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CommandSucceededEvent {
    /// From sending to the end of reading the reply.
    pub duration: Duration,
    /// The reply (empty when redacted).
    pub reply: Document,
    /// The command's name.
    pub command_name: String,
    /// The wire request id of the command.
    pub request_id: i32,
    /// The socket.
    pub connection: ConnectionInfo,
    /// The service behind a load balancer, in load-balanced mode.
    pub service_id: Option<ObjectId>,
}

/// A command failed: a network error, or a reply with `ok: 0`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct CommandFailedEvent {
    /// From sending to the failure.
    pub duration: Duration,
    /// The command's name.
    pub command_name: String,
    /// What went wrong.
    #[serde(serialize_with = "crate::proto::serde_util::error_as_string")]
    pub failure: Error,
    /// The wire request id of the command.
    pub request_id: i32,
    /// The socket.
    pub connection: ConnectionInfo,
    /// The service behind a load balancer, in load-balanced mode.
    pub service_id: Option<ObjectId>,
}

/// A command monitoring event.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
#[allow(missing_docs)]
#[non_exhaustive]
pub enum CommandEvent {
    Started(CommandStartedEvent),
    Succeeded(CommandSucceededEvent),
    Failed(CommandFailedEvent),
}

/// The official driver's older handler form, one method per event: prefer
/// [`EventHandler::callback`](super::EventHandler::callback). An
/// `Arc<impl CommandEventHandler>` converts into an `EventHandler`.
#[deprecated = "use the EventHandler API"]
pub trait CommandEventHandler: Send + Sync {
    /// Called for every started event.
    fn handle_command_started_event(&self, _event: CommandStartedEvent) {}

    /// Called for every succeeded event.
    fn handle_command_succeeded_event(&self, _event: CommandSucceededEvent) {}

    /// Called for every failed event.
    fn handle_command_failed_event(&self, _event: CommandFailedEvent) {}
}

impl ConnectionInfo {
    fn from_internal(connection: &internal::ConnectionInfo) -> Self {
        ConnectionInfo {
            // Ids count sockets opened by this process: past u32::MAX
            // they saturate rather than wrap onto an earlier socket's id.
            id: u32::try_from(connection.driver_connection_id).unwrap_or(u32::MAX),
            server_id: connection.server_connection_id,
            address: connection.address.clone(),
        }
    }
}

impl CommandEvent {
    /// The public form of an event as the executor built it.
    pub(crate) fn from_internal(event: &internal::CommandEvent) -> Self {
        match event {
            internal::CommandEvent::Started {
                command,
                database_name,
                command_name,
                request_id,
                connection,
            } => CommandEvent::Started(CommandStartedEvent {
                command: command.clone(),
                db: database_name.clone(),
                command_name: command_name.clone(),
                request_id: *request_id,
                connection: ConnectionInfo::from_internal(connection),
                service_id: connection.service_id,
            }),
            internal::CommandEvent::Succeeded {
                reply,
                command_name,
                request_id,
                duration,
                connection,
            } => CommandEvent::Succeeded(CommandSucceededEvent {
                duration: *duration,
                reply: reply.clone(),
                command_name: command_name.clone(),
                request_id: *request_id,
                connection: ConnectionInfo::from_internal(connection),
                service_id: connection.service_id,
            }),
            internal::CommandEvent::Failed {
                failure,
                command_name,
                request_id,
                duration,
                connection,
            } => CommandEvent::Failed(CommandFailedEvent {
                duration: *duration,
                command_name: command_name.clone(),
                failure: failure.clone(),
                request_id: *request_id,
                connection: ConnectionInfo::from_internal(connection),
                service_id: connection.service_id,
            }),
        }
    }
}
