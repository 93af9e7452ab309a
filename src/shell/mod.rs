//! The thin blocking shell: sockets, the poller, DNS, the clock and sleeps.
//! It feeds network events to the pure state machines in `proto` and carries
//! out what they decide; no protocol rule lives here.

pub(crate) mod clock;
pub(crate) mod cloud;
pub(crate) mod conn;
pub(crate) mod connection_string;
pub(crate) mod dns;
pub(crate) mod exec;
pub(crate) mod fork;
pub(crate) mod http;
pub(crate) mod ids;
pub(crate) mod logging;
pub(crate) mod rng;
#[cfg(unix)]
pub(crate) mod state_file;
#[cfg(not(unix))]
#[path = "state_file_unsupported.rs"]
pub(crate) mod state_file;
pub(crate) mod tls;
pub(crate) mod topology;
