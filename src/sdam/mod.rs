//! Server discovery and monitoring, as pure rules over descriptions.
//!
//! No sockets and no clock: a check's outcome (a hello reply or an error),
//! the time and the options go in; a new [`TopologyDescription`] and the
//! events and decisions it implies come out. The `topology` module is the
//! shell that carries those decisions out.

pub mod description;

pub use description::{
    ServerDescription, ServerType, TopologyDescription, TopologyType, TopologyVersion,
};
