//! The SDAM descriptions as the official driver serializes them (for users
//! who log events): a server as `{ address, server_type, last_update_time,
//! average_round_trip_time, reply }`, where `reply` is `{ "Ok": null }`
//! before the first answer, `{ "Err": message }` after a failed check, and
//! otherwise `{ "Ok": { server_address, command_response } }` with the
//! hello fields this driver keeps; a topology as its fields, servers keyed
//! by `host:port`.
//!
//! What differs, and why: `last_update_time` is always null (this driver
//! keeps a monotonic instant, not a wall-clock date); the hello reply is
//! rebuilt from the fields the driver keeps, not the raw document; the
//! servers map is keyed by the address's text, since the official key (an
//! enum) cannot be a JSON or BSON key.

use std::collections::BTreeMap;
use std::time::Duration;

use bson::oid::ObjectId;
use serde::{Serialize, Serializer};

use crate::proto::address::ServerAddress;
use crate::proto::read_preference::TagSet;
use crate::proto::sdam::{ServerDescription, ServerInfo, ServerType, TopologyDescription};

/// The hello fields a description keeps, under the reply's names.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HelloFields<'a> {
    hello_ok: bool,
    hosts: Vec<String>,
    passives: Vec<String>,
    arbiters: Vec<String>,
    me: Option<String>,
    set_name: Option<&'a str>,
    set_version: Option<i64>,
    election_id: Option<ObjectId>,
    primary: Option<String>,
    tags: &'a TagSet,
    min_wire_version: i32,
    max_wire_version: i32,
    logical_session_timeout_minutes: Option<i64>,
    max_bson_object_size: i64,
    max_message_size_bytes: i64,
    max_write_batch_size: i64,
    service_id: Option<ObjectId>,
}

#[derive(Serialize)]
struct HelloReply<'a> {
    server_address: &'a ServerAddress,
    command_response: HelloFields<'a>,
}

#[derive(Serialize)]
struct ServerShape<'a> {
    address: &'a ServerAddress,
    server_type: ServerType,
    last_update_time: Option<bson::DateTime>,
    average_round_trip_time: Option<Duration>,
    reply: Result<Option<HelloReply<'a>>, String>,
}

fn texts(addresses: &[ServerAddress]) -> Vec<String> {
    addresses.iter().map(ToString::to_string).collect()
}

impl<'a> ServerShape<'a> {
    fn of(d: &'a ServerDescription) -> Self {
        let reply = match (&d.error, d.server_type) {
            (Some(error), _) => Err(error.to_string()),
            (None, ServerType::Unknown) => Ok(None),
            (None, _) => Ok(Some(HelloReply {
                server_address: &d.address,
                command_response: HelloFields {
                    hello_ok: d.hello_ok,
                    hosts: texts(&d.hosts),
                    passives: texts(&d.passives),
                    arbiters: texts(&d.arbiters),
                    me: d.me.as_ref().map(ToString::to_string),
                    set_name: d.set_name.as_deref(),
                    set_version: d.set_version,
                    election_id: d.election_id,
                    primary: d.primary.as_ref().map(ToString::to_string),
                    tags: &d.tags,
                    min_wire_version: d.min_wire_version,
                    max_wire_version: d.max_wire_version,
                    logical_session_timeout_minutes: d.logical_session_timeout_minutes,
                    max_bson_object_size: d.max_bson_object_size,
                    max_message_size_bytes: d.max_message_size_bytes,
                    max_write_batch_size: d.max_write_batch_size,
                    service_id: d.service_id,
                },
            })),
        };
        ServerShape {
            address: &d.address,
            server_type: d.server_type,
            last_update_time: None,
            average_round_trip_time: d.round_trip_time,
            reply,
        }
    }
}

impl Serialize for ServerDescription {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ServerShape::of(self).serialize(serializer)
    }
}

impl Serialize for ServerInfo<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ServerShape::of(self.description).serialize(serializer)
    }
}

#[derive(Serialize)]
struct TopologyShape<'a> {
    topology_type: crate::proto::sdam::TopologyType,
    set_name: Option<&'a str>,
    max_set_version: Option<i64>,
    max_election_id: Option<ObjectId>,
    compatibility_error: Option<&'a str>,
    logical_session_timeout: Option<Duration>,
    servers: BTreeMap<String, ServerShape<'a>>,
}

impl Serialize for TopologyDescription {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        TopologyShape {
            topology_type: self.topology_type,
            set_name: self.set_name.as_deref(),
            max_set_version: self.max_set_version,
            max_election_id: self.max_election_id,
            compatibility_error: self.compatibility_error.as_deref(),
            logical_session_timeout: self
                .logical_session_timeout_minutes
                .and_then(|m| u64::try_from(m).ok())
                .map(|m| Duration::from_secs(m.saturating_mul(60))),
            servers: self
                .servers
                .iter()
                .map(|(address, d)| (address.to_string(), ServerShape::of(d)))
                .collect(),
        }
        .serialize(serializer)
    }
}
