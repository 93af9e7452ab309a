//! The values SDAM reasons about: what one server is, and what the whole
//! deployment is, as of the last check.
//!
//! These are plain data. [`ServerDescription::from_hello`] and the update
//! rules in [`super::update`] are the only code that gives them meaning.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::Document;

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::read_preference::TagSet;

use super::rtt::RoundTripTime;
use super::settings::{TopologyId, TopologySettings};

/// The server types of the SDAM spec.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[non_exhaustive]
pub enum ServerType {
    /// Not checked yet, or the last check failed.
    #[default]
    Unknown,
    /// A server that is not part of a replica set.
    Standalone,
    /// A `mongos` router.
    Mongos,
    /// A member another member names as primary, not yet checked by us.
    PossiblePrimary,
    /// The replica set primary.
    #[serde(rename = "RSPrimary")]
    RsPrimary,
    /// A replica set secondary.
    #[serde(rename = "RSSecondary")]
    RsSecondary,
    /// A replica set arbiter.
    #[serde(rename = "RSArbiter")]
    RsArbiter,
    /// A hidden, starting-up or recovering member.
    #[serde(rename = "RSOther")]
    RsOther,
    /// A member not yet initialised, or removed from its set.
    #[serde(rename = "RSGhost")]
    RsGhost,
    /// The load balancer in front of a load-balanced deployment.
    LoadBalancer,
}

impl std::fmt::Display for ServerType {
    /// The spec's name ([`as_str`](Self::as_str)), as the official driver
    /// prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ServerType {
    /// The spec's name for the type (`RSPrimary`, `Mongos`, ...), as the
    /// spec tests and log messages write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerType::Unknown => "Unknown",
            ServerType::Standalone => "Standalone",
            ServerType::Mongos => "Mongos",
            ServerType::PossiblePrimary => "PossiblePrimary",
            ServerType::RsPrimary => "RSPrimary",
            ServerType::RsSecondary => "RSSecondary",
            ServerType::RsArbiter => "RSArbiter",
            ServerType::RsOther => "RSOther",
            ServerType::RsGhost => "RSGhost",
            ServerType::LoadBalancer => "LoadBalancer",
        }
    }

    /// Whether a server of this type holds data (standalone, mongos,
    /// primary, secondary, load balancer).
    pub fn is_data_bearing(self) -> bool {
        matches!(
            self,
            ServerType::Standalone
                | ServerType::Mongos
                | ServerType::RsPrimary
                | ServerType::RsSecondary
                | ServerType::LoadBalancer
        )
    }
}

/// The topology types of the SDAM spec.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[non_exhaustive]
pub enum TopologyType {
    /// Nothing is known yet.
    #[default]
    Unknown,
    /// One server, used whatever its type (direct connection).
    Single,
    /// A replica set whose primary is not known.
    ReplicaSetNoPrimary,
    /// A replica set with a known primary.
    ReplicaSetWithPrimary,
    /// One or more mongos routers.
    Sharded,
    /// A load balancer in front of the deployment.
    LoadBalanced,
}

impl std::fmt::Display for TopologyType {
    /// The variant's name, as the official driver prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TopologyType {
    /// The spec's name for the type, as the spec tests write it.
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyType::Unknown => "Unknown",
            TopologyType::Single => "Single",
            TopologyType::ReplicaSetNoPrimary => "ReplicaSetNoPrimary",
            TopologyType::ReplicaSetWithPrimary => "ReplicaSetWithPrimary",
            TopologyType::Sharded => "Sharded",
            TopologyType::LoadBalanced => "LoadBalanced",
        }
    }
}

/// A server's `topologyVersion`: which process answered, and how many
/// topology changes it has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TopologyVersion {
    /// Changes every time the server process starts.
    pub process_id: ObjectId,
    /// Grows with every topology change inside one process.
    pub counter: i64,
}

/// What the driver knows about one server.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerDescription {
    /// The address as the topology knows it (lower case).
    pub address: ServerAddress,
    /// The type the last check found.
    pub server_type: ServerType,
    /// The error that made the server Unknown, if one did: a failed check's
    /// or an operation's, as the shell raised it (its kind and labels kept),
    /// or the rules' own (a stale primary, a wrong replica set name).
    pub error: Option<Error>,
    /// Smoothed round-trip time of checks (EWMA, alpha 0.2).
    pub round_trip_time: Option<Duration>,
    /// Minimum round-trip time over recent checks.
    pub min_round_trip_time: Option<Duration>,
    /// `lastWrite.lastWriteDate`, in milliseconds since the Unix epoch.
    pub last_write_date: Option<i64>,
    /// `lastWrite.opTime`.
    pub op_time: Option<Document>,
    /// `minWireVersion`, 0 when absent.
    pub min_wire_version: i32,
    /// `maxWireVersion`, 0 when absent.
    pub max_wire_version: i32,
    /// `me`, lower case.
    pub me: Option<ServerAddress>,
    /// `hosts`, lower case. Shared, not copied, when a description is
    /// cloned: a large replica set's every member lists every host, and the
    /// topology is copied for each check it applies.
    pub hosts: Arc<[ServerAddress]>,
    /// `passives`, lower case (shared like [`ServerDescription::hosts`]).
    pub passives: Arc<[ServerAddress]>,
    /// `arbiters`, lower case (shared like [`ServerDescription::hosts`]).
    pub arbiters: Arc<[ServerAddress]>,
    /// `tags`.
    pub tags: TagSet,
    /// `setName`.
    pub set_name: Option<String>,
    /// `setVersion`.
    pub set_version: Option<i64>,
    /// `electionId`.
    pub election_id: Option<ObjectId>,
    /// `primary`, lower case.
    pub primary: Option<ServerAddress>,
    /// When the description was made (monotonic); `None` means "infinity
    /// ago", the value of a server never checked.
    pub last_update_time: Option<Instant>,
    /// `logicalSessionTimeoutMinutes`.
    pub logical_session_timeout_minutes: Option<i64>,
    /// `topologyVersion`.
    pub topology_version: Option<TopologyVersion>,
    /// `serviceId` (load-balanced mode).
    pub service_id: Option<ObjectId>,
    /// Whether the server said `helloOk: true`, so later checks may use `hello`.
    pub hello_ok: bool,
    /// `maxBsonObjectSize`.
    pub max_bson_object_size: i64,
    /// `maxMessageSizeBytes`.
    pub max_message_size_bytes: i64,
    /// `maxWriteBatchSize`.
    pub max_write_batch_size: i64,
    /// `iscryptd`: whether the server is a `mongocryptd` process.
    pub iscryptd: bool,
}

/// Server limits assumed before a server says otherwise (the spec's defaults).
pub const DEFAULT_MAX_BSON_OBJECT_SIZE: i64 = 16 * 1024 * 1024;
/// See [`DEFAULT_MAX_BSON_OBJECT_SIZE`].
pub const DEFAULT_MAX_MESSAGE_SIZE_BYTES: i64 = 48_000_000;
/// See [`DEFAULT_MAX_BSON_OBJECT_SIZE`].
pub const DEFAULT_MAX_WRITE_BATCH_SIZE: i64 = 100_000;

impl ServerDescription {
    /// The description of a server nobody has checked: type Unknown,
    /// lastUpdateTime "infinity ago".
    pub(crate) fn unknown(address: ServerAddress) -> Self {
        ServerDescription {
            address,
            server_type: ServerType::Unknown,
            error: None,
            round_trip_time: None,
            min_round_trip_time: None,
            last_write_date: None,
            op_time: None,
            min_wire_version: 0,
            max_wire_version: 0,
            me: None,
            hosts: Arc::from([]),
            passives: Arc::from([]),
            arbiters: Arc::from([]),
            tags: TagSet::new(),
            set_name: None,
            set_version: None,
            election_id: None,
            primary: None,
            last_update_time: None,
            logical_session_timeout_minutes: None,
            topology_version: None,
            service_id: None,
            hello_ok: false,
            max_bson_object_size: DEFAULT_MAX_BSON_OBJECT_SIZE,
            max_message_size_bytes: DEFAULT_MAX_MESSAGE_SIZE_BYTES,
            max_write_batch_size: DEFAULT_MAX_WRITE_BATCH_SIZE,
            iscryptd: false,
        }
    }
}

/// The official driver's getters (its `ServerInfo`), beside the fields.
impl ServerDescription {
    /// The server's address.
    pub fn address(&self) -> &ServerAddress {
        &self.address
    }

    /// The server's type.
    pub fn server_type(&self) -> ServerType {
        self.server_type
    }

    /// The smoothed round-trip time of its checks, once one succeeded.
    pub fn average_round_trip_time(&self) -> Option<Duration> {
        self.round_trip_time
    }

    /// Its replica set's name, when it is a member.
    pub fn replica_set_name(&self) -> Option<&str> {
        self.set_name.as_deref()
    }

    /// Its replica set's `setVersion`, when it is a member.
    pub fn replica_set_version(&self) -> Option<i32> {
        self.set_version.and_then(|v| i32::try_from(v).ok())
    }

    /// Its `maxWireVersion`, once a check succeeded.
    pub fn max_wire_version(&self) -> Option<i32> {
        (self.server_type != ServerType::Unknown).then_some(self.max_wire_version)
    }

    /// Its `minWireVersion`, once a check succeeded.
    pub fn min_wire_version(&self) -> Option<i32> {
        (self.server_type != ServerType::Unknown).then_some(self.min_wire_version)
    }

    /// The error that made it Unknown, if one did.
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }
}

/// Every field equal, the errors by the message they give: an [`Error`]
/// has no equality of its own (it may carry an I/O error or a user's
/// value), and its message is what the SDAM spec's `error` field must be
/// able to produce.
impl PartialEq for ServerDescription {
    fn eq(&self, other: &Self) -> bool {
        // Destructured, so that a new field cannot be left out.
        let ServerDescription {
            address,
            server_type,
            error,
            round_trip_time,
            min_round_trip_time,
            last_write_date,
            op_time,
            min_wire_version,
            max_wire_version,
            me,
            hosts,
            passives,
            arbiters,
            tags,
            set_name,
            set_version,
            election_id,
            primary,
            last_update_time,
            logical_session_timeout_minutes,
            topology_version,
            service_id,
            hello_ok,
            max_bson_object_size,
            max_message_size_bytes,
            max_write_batch_size,
            iscryptd,
        } = self;
        *address == other.address
            && *server_type == other.server_type
            && same_error(error.as_ref(), other.error.as_ref())
            && *round_trip_time == other.round_trip_time
            && *min_round_trip_time == other.min_round_trip_time
            && *last_write_date == other.last_write_date
            && *op_time == other.op_time
            && *min_wire_version == other.min_wire_version
            && *max_wire_version == other.max_wire_version
            && *me == other.me
            && *hosts == other.hosts
            && *passives == other.passives
            && *arbiters == other.arbiters
            && *tags == other.tags
            && *set_name == other.set_name
            && *set_version == other.set_version
            && *election_id == other.election_id
            && *primary == other.primary
            && *last_update_time == other.last_update_time
            && *logical_session_timeout_minutes == other.logical_session_timeout_minutes
            && *topology_version == other.topology_version
            && *service_id == other.service_id
            && *hello_ok == other.hello_ok
            && *max_bson_object_size == other.max_bson_object_size
            && *max_message_size_bytes == other.max_message_size_bytes
            && *max_write_batch_size == other.max_write_batch_size
            && *iscryptd == other.iscryptd
    }
}

/// Whether two descriptions' errors are the same: both absent, or both
/// giving the same message (see `PartialEq for ServerDescription`).
pub(crate) fn same_error(a: Option<&Error>, b: Option<&Error>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.to_string() == b.to_string(),
        _ => false,
    }
}

/// What the driver knows about the whole deployment.
#[derive(Clone, Debug, PartialEq, Default)]
#[non_exhaustive]
pub struct TopologyDescription {
    /// The topology type.
    pub topology_type: TopologyType,
    /// The replica set name, when known or required.
    pub set_name: Option<String>,
    /// The largest `setVersion` seen from a primary.
    pub max_set_version: Option<i64>,
    /// The largest `electionId` seen from a primary.
    pub max_election_id: Option<ObjectId>,
    /// Every server, by address.
    pub servers: BTreeMap<ServerAddress, ServerDescription>,
    /// Why the deployment is incompatible with this driver, if it is.
    pub compatibility_error: Option<String>,
    /// The smallest `logicalSessionTimeoutMinutes` of the data-bearing
    /// servers, `None` if any of them lacks it (sessions unsupported).
    pub logical_session_timeout_minutes: Option<i64>,
    /// Single-threaded mode: a scan must run before the next selection
    /// (set after an error marked a server Unknown).
    pub stale: bool,
    /// Identifies this topology in events and log messages.
    pub id: TopologyId,
    /// The configuration the topology started from (seeds, replica set
    /// name, mode); the update rules consult it.
    pub(crate) settings: TopologySettings,
    /// What the driver keeps about each server besides its description:
    /// the socket generation and the round-trip-time samples. Same keys as
    /// [`TopologyDescription::servers`].
    pub(crate) server_states: BTreeMap<ServerAddress, ServerState>,
    /// Why the update rules removed a server that answered (another
    /// replica set's member, a standalone in a replica set): kept for
    /// the selection error, which otherwise could only say that no
    /// servers are known.
    pub(crate) removed: BTreeMap<ServerAddress, String>,
}

/// What the driver keeps about a server besides its description.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ServerState {
    /// The socket generation (the spec's pool generation): it grows each
    /// time the server's socket is discarded, so errors from an older
    /// socket can be recognised as stale.
    pub pool_generation: u32,
    /// The round-trip-time samples of the server's checks.
    pub round_trip_time: RoundTripTime,
}
