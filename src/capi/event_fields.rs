//! Every field of each command and SDAM event as one BSON document, for
//! `mi_event.fields`: the monitoring specs' field names (`commandName`,
//! `databaseName`, `requestId`, `duration`, `reply`, `failure`,
//! `previousDescription`, `newDescription`, `awaited`...), plus `event`,
//! the event's name in the unified test format (`commandStartedEvent`,
//! `serverHeartbeatSucceededEvent`...). Durations are Int64 microseconds.

use std::time::Duration;

use bson::{doc, Bson, Document};

use crate::proto::address::ServerAddress;
use crate::proto::event::command::ConnectionInfo;
use crate::proto::event::{CommandEvent, SdamEvent};
use crate::proto::sdam::description::{ServerDescription, TopologyDescription};

fn micros(duration: &Duration) -> Bson {
    Bson::Int64(i64::try_from(duration.as_micros()).unwrap_or(i64::MAX))
}

fn connection(info: &ConnectionInfo, into: &mut Document) {
    into.insert("connectionId", info.address.to_string());
    into.insert("serverHost", info.address.host().to_string());
    if let Some(port) = info.address.port() {
        into.insert("serverPort", i32::from(port));
    }
    into.insert(
        "driverConnectionId",
        i64::try_from(info.driver_connection_id).unwrap_or(i64::MAX),
    );
    if let Some(id) = info.server_connection_id {
        into.insert("serverConnectionId", id);
    }
    if let Some(id) = info.service_id {
        into.insert("serviceId", id);
    }
}

/// An error as `failure`: its message, code and labels.
fn failure(error: &crate::Error) -> Document {
    let mut d = doc! { "message": error.to_string() };
    if let Some(code) = error.code() {
        d.insert("code", code);
    }
    let mut labels: Vec<&String> = error.labels().iter().collect();
    labels.sort();
    d.insert(
        "errorLabels",
        labels.into_iter().cloned().collect::<Vec<_>>(),
    );
    d
}

/// The fields of a command event.
pub(crate) fn command_event(event: &CommandEvent) -> Document {
    let (mut d, info) = match event {
        CommandEvent::Started {
            command,
            database_name,
            command_name,
            request_id,
            connection,
        } => (
            doc! {
                "event": "commandStartedEvent",
                "commandName": command_name,
                "databaseName": database_name,
                "requestId": request_id,
                "command": command.clone(),
            },
            connection,
        ),
        CommandEvent::Succeeded {
            reply,
            command_name,
            request_id,
            duration,
            connection,
        } => (
            doc! {
                "event": "commandSucceededEvent",
                "commandName": command_name,
                "requestId": request_id,
                "duration": micros(duration),
                "reply": reply.clone(),
            },
            connection,
        ),
        CommandEvent::Failed {
            failure: error,
            command_name,
            request_id,
            duration,
            connection,
        } => (
            doc! {
                "event": "commandFailedEvent",
                "commandName": command_name,
                "requestId": request_id,
                "duration": micros(duration),
                "failure": failure(error),
            },
            connection,
        ),
        #[allow(unreachable_patterns)]
        _ => return doc! { "event": "unknown" },
    };
    connection(info, &mut d);
    d
}

fn addresses(list: &[ServerAddress]) -> Vec<String> {
    list.iter().map(ToString::to_string).collect()
}

/// A server description as the SDAM spec names its fields.
fn server(description: &ServerDescription) -> Document {
    let mut d = doc! {
        "address": description.address.to_string(),
        "type": description.server_type.as_str(),
        "minWireVersion": description.min_wire_version,
        "maxWireVersion": description.max_wire_version,
        "hosts": addresses(&description.hosts),
        "passives": addresses(&description.passives),
        "arbiters": addresses(&description.arbiters),
        "tags": description.tags.iter().map(|(k, v)| (k.clone(), Bson::String(v.clone()))).collect::<Document>(),
    };
    let optional = [
        (
            "error",
            description
                .error
                .as_ref()
                .map(|e| Bson::String(e.to_string())),
        ),
        (
            "roundTripTime",
            description.round_trip_time.as_ref().map(micros),
        ),
        (
            "me",
            description.me.as_ref().map(|a| Bson::String(a.to_string())),
        ),
        ("setName", description.set_name.clone().map(Bson::String)),
        ("setVersion", description.set_version.map(Bson::Int64)),
        ("electionId", description.election_id.map(Bson::ObjectId)),
        (
            "primary",
            description
                .primary
                .as_ref()
                .map(|a| Bson::String(a.to_string())),
        ),
        (
            "lastWriteDate",
            description.last_write_date.map(Bson::Int64),
        ),
        (
            "logicalSessionTimeoutMinutes",
            description.logical_session_timeout_minutes.map(Bson::Int64),
        ),
        (
            "topologyVersion",
            description
                .topology_version
                .as_ref()
                .map(|v| Bson::Document(doc! { "processId": v.process_id, "counter": v.counter })),
        ),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            d.insert(key, value);
        }
    }
    d
}

/// A topology description as the SDAM spec names its fields.
fn topology(description: &TopologyDescription) -> Document {
    let mut d = doc! {
        "type": description.topology_type.as_str(),
        "servers": description.servers.values().map(server).collect::<Vec<_>>(),
    };
    if let Some(name) = &description.set_name {
        d.insert("setName", name.clone());
    }
    if let Some(version) = description.max_set_version {
        d.insert("maxSetVersion", version);
    }
    if let Some(id) = description.max_election_id {
        d.insert("maxElectionId", id);
    }
    if let Some(error) = &description.compatibility_error {
        d.insert("compatibilityError", error.clone());
    }
    if let Some(minutes) = description.logical_session_timeout_minutes {
        d.insert("logicalSessionTimeoutMinutes", minutes);
    }
    d
}

fn topology_id(id: &impl ToString) -> Bson {
    Bson::String(id.to_string())
}

/// The fields of an SDAM event.
pub(crate) fn sdam_event(event: &SdamEvent) -> Document {
    match event {
        SdamEvent::TopologyOpening { topology_id: id } => {
            doc! { "event": "topologyOpeningEvent", "topologyId": topology_id(id) }
        }
        SdamEvent::TopologyDescriptionChanged {
            topology_id: id,
            previous,
            new,
        } => doc! {
            "event": "topologyDescriptionChangedEvent",
            "topologyId": topology_id(id),
            "previousDescription": topology(previous),
            "newDescription": topology(new),
        },
        SdamEvent::ServerOpening {
            topology_id: id,
            address,
        } => doc! {
            "event": "serverOpeningEvent",
            "topologyId": topology_id(id),
            "address": address.to_string(),
        },
        SdamEvent::ServerDescriptionChanged {
            topology_id: id,
            address,
            previous,
            new,
        } => doc! {
            "event": "serverDescriptionChangedEvent",
            "topologyId": topology_id(id),
            "address": address.to_string(),
            "previousDescription": server(previous),
            "newDescription": server(new),
        },
        SdamEvent::ServerClosed {
            topology_id: id,
            address,
        } => doc! {
            "event": "serverClosedEvent",
            "topologyId": topology_id(id),
            "address": address.to_string(),
        },
        SdamEvent::TopologyClosed { topology_id: id } => {
            doc! { "event": "topologyClosedEvent", "topologyId": topology_id(id) }
        }
        SdamEvent::ServerHeartbeatStarted { .. }
        | SdamEvent::ServerHeartbeatSucceeded { .. }
        | SdamEvent::ServerHeartbeatFailed { .. } => heartbeat_event(event),
        #[allow(unreachable_patterns)]
        _ => doc! { "event": "unknown" },
    }
}

/// The fields of a heartbeat event.
fn heartbeat_event(event: &SdamEvent) -> Document {
    match event {
        SdamEvent::ServerHeartbeatStarted {
            topology_id: id,
            address,
            awaited,
        } => doc! {
            "event": "serverHeartbeatStartedEvent",
            "topologyId": topology_id(id),
            "connectionId": address.to_string(),
            "awaited": awaited,
        },
        SdamEvent::ServerHeartbeatSucceeded {
            topology_id: id,
            address,
            awaited,
            duration,
            reply,
        } => doc! {
            "event": "serverHeartbeatSucceededEvent",
            "topologyId": topology_id(id),
            "connectionId": address.to_string(),
            "awaited": awaited,
            "duration": micros(duration),
            "reply": reply.clone(),
        },
        SdamEvent::ServerHeartbeatFailed {
            topology_id: id,
            address,
            awaited,
            duration,
            failure: error,
        } => doc! {
            "event": "serverHeartbeatFailedEvent",
            "topologyId": topology_id(id),
            "connectionId": address.to_string(),
            "awaited": awaited,
            "duration": micros(duration),
            "failure": failure(error),
        },
        _ => doc! { "event": "unknown" },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::sdam::TopologyId;

    /// A binding reads the error that made a server Unknown as its message,
    /// now that the description carries the `Error` itself.
    #[test]
    fn a_description_gives_its_error_as_the_message() {
        let address = ServerAddress::tcp("a", 1);
        let error = crate::Error::network_message(Some(address.clone()), "connection refused");
        let unknown = ServerDescription::from_error(address.clone(), error.clone(), None);
        let event = SdamEvent::ServerDescriptionChanged {
            topology_id: TopologyId(1),
            address: address.clone(),
            previous: Box::new(ServerDescription::unknown(address)),
            new: Box::new(unknown),
        };
        let fields = sdam_event(&event);
        let new = fields.get_document("newDescription").unwrap();
        assert_eq!(new.get_str("error"), Ok(error.to_string().as_str()));
        let previous = fields.get_document("previousDescription").unwrap();
        assert!(previous.get("error").is_none());
    }
}
