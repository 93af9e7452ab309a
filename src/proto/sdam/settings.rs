//! What a topology starts from: the seeds and the few options that decide
//! its initial type.

use std::fmt;

use bson::oid::ObjectId;

use crate::proto::address::ServerAddress;

/// The options SDAM needs, taken from the client's options
/// (`TopologySettings::from_options`, kept in `options`) or built directly
/// in tests.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct TopologySettings {
    /// The seed list (after the SRV look-up for `mongodb+srv`).
    pub seeds: Vec<ServerAddress>,
    /// `directConnection`; unset behaves as `false`.
    pub direct_connection: Option<bool>,
    /// `replicaSet`.
    pub replica_set: Option<String>,
    /// `loadBalanced`.
    pub load_balanced: bool,
    /// Whether the seeds came from an SRV look-up (`mongodb+srv`).
    pub seeds_from_srv: bool,
    /// Leaves ServerDescriptionChanged and TopologyDescriptionChanged out
    /// of updates, for a client nobody listens to (no event handler, the
    /// topology log off): each carries copies of descriptions, and the
    /// topology change a copy of the whole topology on every check.
    /// Opening and closing events are still built (they copy nothing), and
    /// the servers added and removed are reported as always.
    pub without_change_events: bool,
}

impl TopologySettings {
    /// Settings with these seeds and every option unset.
    #[cfg(test)]
    pub fn new(seeds: Vec<ServerAddress>) -> Self {
        TopologySettings {
            seeds,
            ..Self::default()
        }
    }

    /// This value with `directConnection` set.
    #[cfg(test)]
    pub fn with_direct_connection(mut self, direct: bool) -> Self {
        self.direct_connection = Some(direct);
        self
    }

    /// This value with `replicaSet` set.
    #[cfg(test)]
    pub fn with_replica_set(mut self, name: impl Into<String>) -> Self {
        self.replica_set = Some(name.into());
        self
    }

    /// This value with `loadBalanced` set.
    #[cfg(test)]
    pub fn with_load_balanced(mut self, load_balanced: bool) -> Self {
        self.load_balanced = load_balanced;
        self
    }

    /// This value with the description change events left out (or not).
    pub fn with_change_events(mut self, wanted: bool) -> Self {
        self.without_change_events = !wanted;
        self
    }

    /// This value marked as coming from an SRV look-up.
    #[cfg(test)]
    pub fn with_seeds_from_srv(mut self, from_srv: bool) -> Self {
        self.seeds_from_srv = from_srv;
        self
    }
}

/// Identifies one topology in events and log messages; unique within the
/// process (the shell hands them out, see `TopologyDescription::with_id`).
/// The default, 0, is never handed out and marks descriptions built by hand
/// in tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopologyId(pub u64);

impl TopologyId {
    /// The id as the events' `topology_id` gives it (the official driver's
    /// type): the process-wide counter in an ObjectId's last eight bytes.
    pub fn object_id(self) -> ObjectId {
        let mut bytes = [0u8; 12];
        bytes[4..].copy_from_slice(&self.0.to_be_bytes());
        ObjectId::from_bytes(bytes)
    }
}

/// The same hex string as [`TopologyId::object_id`], so that a log
/// message's `topologyId` matches its events'.
impl fmt::Display for TopologyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.object_id().to_hex())
    }
}
