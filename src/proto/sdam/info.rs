//! [`ServerInfo`]: the official driver's read-only view of one server, as a
//! [`Predicate`](crate::options::Predicate) sees it.

use std::fmt;
use std::time::Duration;

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::read_preference::TagSet;
use crate::proto::sdam::{ServerDescription, ServerType};

/// What the driver knows about one server, borrowed from the topology
/// (`mongodb::ServerInfo`).
#[derive(Clone)]
pub struct ServerInfo<'a> {
    pub(super) description: &'a ServerDescription,
}

impl<'a> ServerInfo<'a> {
    pub(crate) fn new(description: &'a ServerDescription) -> Self {
        ServerInfo { description }
    }

    /// The server's address.
    pub fn address(&self) -> &ServerAddress {
        &self.description.address
    }

    /// The smoothed round-trip time of its checks, the one the latency
    /// window uses.
    pub fn average_round_trip_time(&self) -> Option<Duration> {
        self.description.round_trip_time
    }

    /// `maxWireVersion`, once a check has answered.
    pub fn max_wire_version(&self) -> Option<i32> {
        self.answered().then_some(self.description.max_wire_version)
    }

    /// `minWireVersion`, once a check has answered.
    pub fn min_wire_version(&self) -> Option<i32> {
        self.answered().then_some(self.description.min_wire_version)
    }

    /// The name of its replica set.
    pub fn replica_set_name(&self) -> Option<&str> {
        self.description.set_name.as_deref()
    }

    /// Its replica set's config version.
    pub fn replica_set_version(&self) -> Option<i32> {
        self.description
            .set_version
            .and_then(|v| i32::try_from(v).ok())
    }

    /// Its type.
    pub fn server_type(&self) -> ServerType {
        self.description.server_type
    }

    /// Its tags, when it has any.
    pub fn tags(&self) -> Option<&TagSet> {
        (!self.description.tags.is_empty()).then_some(&self.description.tags)
    }

    /// The error that made it Unknown, if one did: a failed check's or an
    /// operation's, of the kind and with the labels it was raised with.
    pub fn error(&self) -> Option<&Error> {
        self.description.error.as_ref()
    }

    /// When the description was made, on the client's monotonic clock.
    pub(crate) fn last_update_instant(&self) -> Option<std::time::Instant> {
        self.description.last_update_time
    }

    fn answered(&self) -> bool {
        self.description.server_type != ServerType::Unknown
    }
}

impl fmt::Debug for ServerInfo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerInfo")
            .field("address", self.address())
            .field("server_type", &self.server_type())
            .field("average_round_trip_time", &self.average_round_trip_time())
            .field("replica_set_name", &self.replica_set_name())
            .field("tags", &self.tags())
            .field("error", &self.error().map(ToString::to_string))
            .finish()
    }
}

impl fmt::Display for ServerInfo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{ Address: {}, Type: {:?}",
            self.address(),
            self.server_type()
        )?;
        if let Some(error) = self.error() {
            write!(f, ", Error: {error}")?;
        }
        write!(f, " }}")
    }
}
