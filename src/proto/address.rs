//! Server addresses: `host:port` pairs and Unix domain socket paths.
//!
//! Addresses are the keys of the topology. The SDAM spec compares them
//! case-insensitively, so a parsed address stores its host in lower case.

use std::fmt;

// Parsing builds `crate::Error`s, which name addresses: it lives in a child
// module so that this type stays below the error module.
mod parse;

/// The port a MongoDB server listens on when a connection string names none.
pub const DEFAULT_PORT: u16 = 27017;

/// A map keyed by server address. Every operation looks its server up a few
/// times (socket, serial, check record); ahash's keyed hasher costs a
/// fraction of SipHash's and still resists chosen keys (addresses come from
/// server replies).
pub type AddressMap<V> = std::collections::HashMap<ServerAddress, V, ahash::RandomState>;

/// A set of server addresses, hashed like [`AddressMap`].
pub type AddressSet = std::collections::HashSet<ServerAddress, ahash::RandomState>;

/// Where a server listens.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ServerAddress {
    /// A TCP endpoint. The host is a name, an IPv4 literal or an IPv6 literal
    /// without its brackets, always in lower case.
    Tcp {
        /// Host name or IP literal, lower case, IPv6 without brackets.
        host: String,
        /// TCP port.
        port: u16,
    },
    /// A Unix domain socket path (connection strings percent-encode it).
    Unix {
        /// Filesystem path of the socket.
        path: String,
    },
}

impl ServerAddress {
    /// A TCP address; the host is lower-cased.
    pub fn tcp(host: impl AsRef<str>, port: u16) -> Self {
        ServerAddress::Tcp {
            host: host.as_ref().to_ascii_lowercase(),
            port,
        }
    }

    /// The host for TCP, or the path for a Unix socket.
    pub fn host(&self) -> &str {
        match self {
            ServerAddress::Tcp { host, .. } => host,
            ServerAddress::Unix { path } => path,
        }
    }

    /// The TCP port, or `None` for a Unix socket.
    pub fn port(&self) -> Option<u16> {
        match self {
            ServerAddress::Tcp { port, .. } => Some(*port),
            ServerAddress::Unix { .. } => None,
        }
    }
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerAddress::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            ServerAddress::Tcp { host, port } => write!(f, "{host}:{port}"),
            ServerAddress::Unix { path } => f.write_str(path),
        }
    }
}
