//! The thin blocking shell: sockets, the poller, DNS, the clock and sleeps.
//! It feeds network events to the pure state machines in `proto` and carries
//! out what they decide; no protocol rule lives here.

pub(crate) mod clock;
// The sockets still read the system's time (s-conn moves them onto the
// Clock); remove this allow once they take it.
#[allow(clippy::disallowed_methods)]
pub(crate) mod conn;
pub(crate) mod dns;
pub(crate) mod exec;
pub(crate) mod fork;
pub(crate) mod ids;
pub(crate) mod rng;
pub(crate) mod tls;
pub(crate) mod topology;
