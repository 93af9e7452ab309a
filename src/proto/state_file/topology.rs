//! The last topology a client saw, remembered so that a new process's
//! first scan starts with the server that was the primary (issue 41).
//!
//! What is kept: the members whose own hello was seen (address, type,
//! wire versions), the replica set's name, the largest election id and
//! set version, and when it was seen (unix milliseconds). What it may do
//! in a new process is only an order: the first scan checks the
//! remembered primary first, then the other data-bearing members, then
//! the rest ([`RememberedTopology::first_scan_order`]); the scan still
//! checks every server, and only a server's own handshake in this process
//! makes it selectable. So a primary that has since stepped down costs
//! nothing but its place in the order: its hello says what it is now.
//!
//! A topology older than heartbeatFrequencyMS (the client's own setting)
//! is stale and gives no order at all, nor does one seen "in the future"
//! (a clock set back, or a forged entry): nothing older than a heartbeat
//! is taken for the current state. A process rewrites the entry when what
//! it saw differs, and otherwise when the entry is half a heartbeat old,
//! so a steady deployment under steady traffic keeps a fresh entry at one
//! write per half heartbeat, whatever the number of processes.
//!
//! A hostile entry that decodes can at worst reorder a scan of the
//! servers this client would check anyway: addresses that are not among
//! them are never added ([`crate::proto::monitor::Monitor::prefer_in_first_scan`]).

use std::time::Duration;

use bson::oid::ObjectId;

use super::{DecodeError, Reader};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::{ServerType, TopologyDescription, TopologyType};

/// At most this many members are kept (the primary and the data-bearing
/// members first); a larger deployment's others are checked in the
/// spec's order.
const MAX_MEMBERS: usize = 64;
/// The largest entry body kept (the format's lengths are 16 bits).
const MAX_BODY_BYTES: usize = 16 * 1024;

const HAS_SET_NAME: u8 = 1;
const HAS_ELECTION_ID: u8 = 2;
const HAS_SET_VERSION: u8 = 4;

/// The topology a client last saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RememberedTopology {
    /// When it was seen (unix milliseconds).
    pub seen_ms: u64,
    /// The replica set's name.
    pub set_name: Option<String>,
    /// The largest election id seen from a primary.
    pub election_id: Option<ObjectId>,
    /// The largest set version seen from a primary.
    pub set_version: Option<i64>,
    /// The members whose hello was seen, in the order a first scan takes.
    pub members: Vec<RememberedMember>,
}

/// One member of a remembered topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RememberedMember {
    /// Its address as the topology wrote it (`host:port`).
    pub address: String,
    /// What its hello said it was.
    pub server_type: ServerType,
    /// Its `minWireVersion`.
    pub min_wire_version: i32,
    /// Its `maxWireVersion`.
    pub max_wire_version: i32,
}

/// Lower goes first: the primary, then members that hold data, then the rest.
fn rank(server_type: ServerType) -> u8 {
    match server_type {
        ServerType::RsPrimary => 0,
        t if t.is_data_bearing() => 1,
        _ => 2,
    }
}

fn type_code(server_type: ServerType) -> Option<u8> {
    Some(match server_type {
        ServerType::Standalone => 1,
        ServerType::Mongos => 2,
        ServerType::RsPrimary => 3,
        ServerType::RsSecondary => 4,
        ServerType::RsArbiter => 5,
        ServerType::RsOther => 6,
        ServerType::RsGhost => 7,
        // Unknown and PossiblePrimary: no hello of its own was seen; a
        // load balancer is never scanned.
        _ => return None,
    })
}

fn type_of(code: u8) -> Result<ServerType, DecodeError> {
    Ok(match code {
        1 => ServerType::Standalone,
        2 => ServerType::Mongos,
        3 => ServerType::RsPrimary,
        4 => ServerType::RsSecondary,
        5 => ServerType::RsArbiter,
        6 => ServerType::RsOther,
        7 => ServerType::RsGhost,
        _ => return Err(DecodeError("a topology entry names an unknown server type")),
    })
}

impl RememberedTopology {
    /// What to remember of `description`, seen at `seen_ms`: none when no
    /// server's own hello is in it, or behind a load balancer (where
    /// nothing is scanned).
    pub fn of(description: &TopologyDescription, seen_ms: u64) -> Option<RememberedTopology> {
        if description.topology_type == TopologyType::LoadBalanced {
            return None;
        }
        let mut members: Vec<RememberedMember> = description
            .servers
            .values()
            .filter(|s| type_code(s.server_type).is_some())
            .map(|s| RememberedMember {
                address: s.address.to_string(),
                server_type: s.server_type,
                min_wire_version: s.min_wire_version,
                max_wire_version: s.max_wire_version,
            })
            .filter(|m| m.address.len() <= usize::from(u8::MAX))
            .collect();
        if members.is_empty() {
            return None;
        }
        // The servers come sorted by address: the same deployment always
        // gives the same entry.
        members.sort_by_key(|m| rank(m.server_type));
        members.truncate(MAX_MEMBERS);
        Some(RememberedTopology {
            seen_ms,
            set_name: description.set_name.clone(),
            election_id: description.max_election_id,
            set_version: description.max_set_version,
            members,
        })
    }

    /// Whether it was seen at most `heartbeat_frequency` before `now_ms`
    /// (and not after it).
    pub fn fresh_at(&self, now_ms: u64, heartbeat_frequency: Duration) -> bool {
        now_ms
            .checked_sub(self.seen_ms)
            .is_some_and(|age| u128::from(age) <= heartbeat_frequency.as_millis())
    }

    /// The order a new process's first scan takes at `now_ms`: the
    /// remembered primary, the other data-bearing members, the rest;
    /// nothing when the topology is stale (see [`Self::fresh_at`]).
    /// Addresses that do not parse (a forged entry) are left out.
    pub fn first_scan_order(
        &self,
        now_ms: u64,
        heartbeat_frequency: Duration,
    ) -> Vec<ServerAddress> {
        if !self.fresh_at(now_ms, heartbeat_frequency) {
            return Vec::new();
        }
        let mut members: Vec<&RememberedMember> = self.members.iter().collect();
        // The file's order is this module's, unless forged: sort again.
        members.sort_by_key(|m| rank(m.server_type));
        members
            .into_iter()
            .filter_map(|m| ServerAddress::parse(&m.address).ok())
            .collect()
    }

    /// Whether `self`, just seen, is worth writing over `remembered` (what
    /// the file held, or this process last wrote): it is new, differs in
    /// anything but the time, or `remembered` is half a heartbeat old.
    pub fn worth_writing_over(
        &self,
        remembered: Option<&RememberedTopology>,
        heartbeat_frequency: Duration,
    ) -> bool {
        let Some(old) = remembered else {
            return true;
        };
        let half = heartbeat_frequency / 2;
        let same = RememberedTopology {
            seen_ms: self.seen_ms,
            ..old.clone()
        } == *self;
        !same || !old.fresh_at(self.seen_ms, half)
    }

    pub(super) fn encode(&self) -> Option<Vec<u8>> {
        if self.members.len() > MAX_MEMBERS {
            return None;
        }
        let mut out = Vec::with_capacity(32 + self.members.len() * 32);
        out.extend_from_slice(&self.seen_ms.to_le_bytes());
        let flags = [
            (self.set_name.is_some(), HAS_SET_NAME),
            (self.election_id.is_some(), HAS_ELECTION_ID),
            (self.set_version.is_some(), HAS_SET_VERSION),
        ]
        .iter()
        .filter(|(present, _)| *present)
        .fold(0, |flags, (_, bit)| flags | bit);
        out.push(flags);
        if let Some(name) = &self.set_name {
            short_bytes(&mut out, name.as_bytes())?;
        }
        if let Some(id) = &self.election_id {
            out.extend_from_slice(&id.bytes());
        }
        if let Some(version) = self.set_version {
            out.extend_from_slice(&version.to_le_bytes());
        }
        out.push(self.members.len() as u8);
        for member in &self.members {
            short_bytes(&mut out, member.address.as_bytes())?;
            out.push(type_code(member.server_type)?);
            out.extend_from_slice(&member.min_wire_version.to_le_bytes());
            out.extend_from_slice(&member.max_wire_version.to_le_bytes());
        }
        (out.len() <= MAX_BODY_BYTES).then_some(out)
    }

    pub(super) fn decode(body: &[u8]) -> Result<RememberedTopology, DecodeError> {
        let mut reader = Reader(body);
        let seen_ms = reader.u64()?;
        let flags = reader.u8()?;
        if flags & !(HAS_SET_NAME | HAS_ELECTION_ID | HAS_SET_VERSION) != 0 {
            return Err(DecodeError("a topology entry has unknown flags"));
        }
        let set_name = if flags & HAS_SET_NAME != 0 {
            Some(text(reader.short_bytes()?)?)
        } else {
            None
        };
        let election_id = if flags & HAS_ELECTION_ID != 0 {
            let mut id = [0u8; 12];
            id.copy_from_slice(reader.take(12)?);
            Some(ObjectId::from_bytes(id))
        } else {
            None
        };
        let set_version = if flags & HAS_SET_VERSION != 0 {
            Some(reader.u64()? as i64)
        } else {
            None
        };
        let count = usize::from(reader.u8()?);
        if count == 0 || count > MAX_MEMBERS {
            return Err(DecodeError(
                "a topology entry has an impossible member count",
            ));
        }
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let address = text(reader.short_bytes()?)?;
            if address.is_empty() {
                return Err(DecodeError(
                    "a topology entry has a member without an address",
                ));
            }
            let server_type = type_of(reader.u8()?)?;
            let min_wire_version = reader.u32()? as i32;
            let max_wire_version = reader.u32()? as i32;
            members.push(RememberedMember {
                address,
                server_type,
                min_wire_version,
                max_wire_version,
            });
        }
        if !reader.0.is_empty() {
            return Err(DecodeError("a topology entry has bytes after its end"));
        }
        Ok(RememberedTopology {
            seen_ms,
            set_name,
            election_id,
            set_version,
            members,
        })
    }
}

/// A length byte and `bytes`; none when they do not fit one.
fn short_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> Option<()> {
    out.push(u8::try_from(bytes.len()).ok()?);
    out.extend_from_slice(bytes);
    Some(())
}

fn text(bytes: &[u8]) -> Result<String, DecodeError> {
    std::str::from_utf8(bytes)
        .map(str::to_owned)
        .map_err(|_| DecodeError("a topology entry's text is not UTF-8"))
}
