//! mongo-inline: a MongoDB driver for short-lived processes.
//!
//! Single-threaded and scan-on-demand: no background threads, no async
//! runtime. Discovery and monitoring happen inline with operations, one
//! socket per server.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod address;
pub mod coll_options;
pub mod error;
pub mod handshake;
pub mod operation;
pub mod options;
pub mod read_preference;
pub mod results;
pub mod scan;
pub mod sdam;
pub mod select;
pub mod uri;
pub mod wire;

pub use address::ServerAddress;
pub use error::{Error, ErrorKind, Result};
pub use options::ClientOptions;
pub use read_preference::{ReadPreference, ReadPreferenceMode};
