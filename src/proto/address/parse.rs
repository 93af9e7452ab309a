//! Parsing a server address from text (seed lists, hello replies).

use super::ServerAddress;
#[cfg(test)]
use super::{AddressSet, DEFAULT_PORT};
use crate::error::{Error, Result};

impl Default for ServerAddress {
    /// `localhost` on the default port, as the official driver's default.
    fn default() -> Self {
        ServerAddress::Tcp {
            host: "localhost".to_string(),
            port: None,
        }
    }
}

impl From<std::net::SocketAddr> for ServerAddress {
    fn from(address: std::net::SocketAddr) -> Self {
        ServerAddress::tcp(address.ip().to_string(), address.port())
    }
}

impl ServerAddress {
    /// Parses `host`, `host:port`, `[v6]`, `[v6]:port` or a path ending in
    /// `.sock`, as servers report members in hello replies and as seed lists
    /// name them once percent-decoding is done.
    pub fn parse(text: impl AsRef<str>) -> Result<Self> {
        let text = text.as_ref();
        if text.is_empty() {
            return Err(Error::invalid_argument("empty server address"));
        }
        if text.starts_with('/') || text.ends_with(".sock") {
            return Ok(ServerAddress::Unix { path: text.into() });
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
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(0) | Err(_) => {
                    return Err(Error::invalid_argument(format!(
                        "invalid port {p:?} in address {text:?}: expected 1-65535"
                    )))
                }
                Ok(port) => Some(port),
            },
        };
        // As the official parser: no port stays `None` (the default).
        Ok(ServerAddress::Tcp {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl<'de> serde::Deserialize<'de> for ServerAddress {
    /// From `"host:port"` text, or `{host, port}` (a `host` ending in
    /// `sock` is a Unix socket), as the official driver reads it; and from
    /// `{ "Tcp": { host, port } }` / `{ "Unix": { path } }`, the form it
    /// (and this crate) writes, so that a serialized event reads back.
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        enum Tagged {
            Tcp { host: String, port: Option<u16> },
            Unix { path: std::path::PathBuf },
        }
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Written {
            Text(String),
            Fields { host: String, port: Option<u16> },
            Tagged(Tagged),
        }
        match Written::deserialize(deserializer)? {
            Written::Tagged(Tagged::Tcp { host, port }) => Ok(ServerAddress::Tcp { host, port }),
            Written::Tagged(Tagged::Unix { path }) => Ok(ServerAddress::Unix { path }),
            Written::Text(text) => ServerAddress::parse(text).map_err(serde::de::Error::custom),
            Written::Fields { host, .. } if host.ends_with("sock") => {
                Ok(ServerAddress::Unix { path: host.into() })
            }
            Written::Fields { host, port } => Ok(ServerAddress::Tcp { host, port }),
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
    fn a_missing_port_is_the_default_one() {
        let bare = ServerAddress::parse("db.example.com").unwrap();
        assert!(matches!(&bare, ServerAddress::Tcp { port: None, .. }));
        let explicit = ServerAddress::tcp("db.example.com", DEFAULT_PORT);
        assert_eq!(bare, explicit);
        assert_eq!(bare.to_string(), "db.example.com:27017");
        let mut set = AddressSet::default();
        set.insert(bare.clone());
        assert!(set.contains(&explicit));
        assert_eq!(bare.cmp(&explicit), std::cmp::Ordering::Equal);
        assert_ne!(bare, ServerAddress::tcp("db.example.com", 27018));
        assert!(ServerAddress::tcp("z", 1) < ServerAddress::parse("/tmp/a.sock").unwrap());
    }

    #[test]
    fn addresses_deserialize_from_text_or_fields() {
        let from_text: ServerAddress = bson::from_bson(bson::Bson::String("h:5".into())).unwrap();
        assert_eq!(from_text, ServerAddress::tcp("h", 5));
        let from_fields: ServerAddress =
            bson::from_document(bson::doc! { "host": "h", "port": 5 }).unwrap();
        assert_eq!(from_fields, from_text);
        let socket: ServerAddress =
            bson::from_document(bson::doc! { "host": "/tmp/m.sock" }).unwrap();
        assert!(matches!(socket, ServerAddress::Unix { .. }));
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
