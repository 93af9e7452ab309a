//! Server discovery and monitoring, as pure rules over descriptions.
//!
//! No sockets and no clock: a check's outcome (a hello reply or an error),
//! the time and the options go in; a new [`TopologyDescription`] and the
//! events and decisions it implies come out. The `topology` module is the
//! shell that carries those decisions out.
//!
//! - [`hello`]: a [`ServerDescription`] from a hello reply or an error.
//! - [`update`]: the topology state machine ([`TopologyDescription::apply`]).
//! - [`error_handling`]: what an application error means for the topology.
//! - [`rtt`]: round-trip-time statistics of checks.

pub mod description;
pub mod error_handling;
pub mod hello;
mod info;
pub mod rtt;
mod serde_shape;
pub mod settings;
pub mod update;

pub use description::{
    ServerDescription, ServerType, TopologyDescription, TopologyType, TopologyVersion,
};
#[cfg(test)]
pub(crate) use error_handling::{ApplicationError, ApplicationErrorKind, HandshakePhase};
pub use info::ServerInfo;
pub use rtt::RoundTripTime;
pub use settings::{TopologyId, TopologySettings};
pub use update::TopologyUpdate;
