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

/// Where a server listens, as the official driver's `ServerAddress`.
///
/// A TCP address without a port means the default one (27017): it equals,
/// hashes and orders as the same address with `Some(27017)`, and prints
/// with the port filled in.
#[derive(Clone, Debug, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum ServerAddress {
    /// A TCP endpoint. The host is a name, an IPv4 literal or an IPv6 literal
    /// without its brackets; parsed addresses have it in lower case.
    Tcp {
        /// Host name or IP literal, IPv6 without brackets.
        host: String,
        /// TCP port; `None` is the default, 27017.
        port: Option<u16>,
    },
    /// A Unix domain socket (connection strings percent-encode its path).
    Unix {
        /// Filesystem path of the socket.
        path: std::path::PathBuf,
    },
}

impl ServerAddress {
    /// A TCP address; the host is lower-cased.
    pub fn tcp(host: impl AsRef<str>, port: u16) -> Self {
        ServerAddress::Tcp {
            host: host.as_ref().to_ascii_lowercase(),
            port: Some(port),
        }
    }

    /// The host for TCP, or the path for a Unix socket (a path that is not
    /// UTF-8 reads as `"<non-UTF-8 path>"`: the socket is opened by its
    /// path, never by this text).
    pub fn host(&self) -> &str {
        match self {
            ServerAddress::Tcp { host, .. } => host,
            ServerAddress::Unix { path } => path.to_str().unwrap_or("<non-UTF-8 path>"),
        }
    }

    /// The TCP port, the default (27017) filled in; `None` for a Unix
    /// socket.
    pub fn port(&self) -> Option<u16> {
        match self {
            ServerAddress::Tcp { port, .. } => Some(port.unwrap_or(DEFAULT_PORT)),
            ServerAddress::Unix { .. } => None,
        }
    }

    /// What equality, hashing and ordering compare: the default port filled in.
    fn key(&self) -> (bool, &str, Option<u16>, Option<&std::path::Path>) {
        match self {
            ServerAddress::Tcp { host, .. } => (false, host, self.port(), None),
            ServerAddress::Unix { path } => (true, "", None, Some(path)),
        }
    }
}

impl PartialEq for ServerAddress {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl std::hash::Hash for ServerAddress {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl Ord for ServerAddress {
    /// TCP addresses before Unix sockets; then by host and port, or path.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for ServerAddress {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerAddress::Tcp { host, .. } if host.contains(':') => {
                write!(f, "[{host}]:{}", self.port().unwrap_or(DEFAULT_PORT))
            }
            ServerAddress::Tcp { host, .. } => {
                write!(f, "{host}:{}", self.port().unwrap_or(DEFAULT_PORT))
            }
            ServerAddress::Unix { path } => write!(f, "{}", path.display()),
        }
    }
}
