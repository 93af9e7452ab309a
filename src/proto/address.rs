//! Server addresses: `host:port` pairs and Unix domain socket paths.
//!
//! Addresses are the keys of the topology. The SDAM spec compares them
//! case-insensitively, so a parsed address stores its host in lower case.

use std::fmt;

use crate::error::{Error, Result};

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

    /// Parses `host`, `host:port`, `[v6]`, `[v6]:port` or a path ending in
    /// `.sock`, as servers report members in hello replies and as seed lists
    /// name them once percent-decoding is done.
    pub fn parse(text: &str) -> Result<Self> {
        if text.is_empty() {
            return Err(Error::invalid_argument("empty server address"));
        }
        if text.starts_with('/') || text.ends_with(".sock") {
            return Ok(ServerAddress::Unix {
                path: text.to_string(),
            });
        }
        let (host, port_text) = if let Some(rest) = text.strip_prefix('[') {
            let close = rest.find(']').ok_or_else(|| {
                Error::invalid_argument(format!("unterminated IPv6 literal in address {text:?}"))
            })?;
            let host = &rest[..close];
            let after = &rest[close + 1..];
            let port_text = match after {
                "" => None,
                _ => Some(after.strip_prefix(':').ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "unexpected characters after IPv6 literal in address {text:?}"
                    ))
                })?),
            };
            (host, port_text)
        } else {
            match text.rfind(':') {
                Some(i) if text[..i].contains(':') => {
                    return Err(Error::invalid_argument(format!(
                        "IPv6 address {text:?} must be enclosed in brackets"
                    )))
                }
                Some(i) => (&text[..i], Some(&text[i + 1..])),
                None => (text, None),
            }
        };
        if host.is_empty() {
            return Err(Error::invalid_argument(format!(
                "empty host in address {text:?}"
            )));
        }
        let port = match port_text {
            None => DEFAULT_PORT,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => {
                    return Err(Error::invalid_argument(format!(
                        "invalid port {p:?} in address {text:?}: expected 1-65535"
                    )))
                }
                Ok(port) => port,
            },
        };
        Ok(ServerAddress::tcp(host, port))
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

impl std::str::FromStr for ServerAddress {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        ServerAddress::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_normalises() {
        assert_eq!(
            ServerAddress::parse("A.Example.COM:27018").unwrap(),
            ServerAddress::tcp("a.example.com", 27018)
        );
        assert_eq!(
            ServerAddress::parse("localhost").unwrap().port(),
            Some(DEFAULT_PORT)
        );
        let v6 = ServerAddress::parse("[::1]:5").unwrap();
        assert_eq!(v6.host(), "::1");
        assert_eq!(v6.to_string(), "[::1]:5");
        assert!(matches!(
            ServerAddress::parse("/tmp/mongodb-27017.sock").unwrap(),
            ServerAddress::Unix { .. }
        ));
    }

    #[test]
    fn rejects_bad_ports_and_bare_ipv6() {
        assert!(ServerAddress::parse("h:0").is_err());
        assert!(ServerAddress::parse("h:65536").is_err());
        assert!(ServerAddress::parse("h:x").is_err());
        assert!(ServerAddress::parse("::1").is_err());
        assert!(ServerAddress::parse("[::1").is_err());
        assert!(ServerAddress::parse("").is_err());
    }
}
