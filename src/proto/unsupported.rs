//! Options the URI parser understands but the driver does not implement yet.
//!
//! Parsing accepts them (the URI-options spec tests parse such URIs, and a
//! parsed URI can be inspected), but a client built from them would quietly
//! do something weaker than asked: talk in plain text where TLS was asked
//! for, never authenticate, connect around a proxy. So client
//! construction refuses them, here and only here. (TLS, SCRAM, X.509 and
//! PLAIN were listed until they were built.)
//!
//! [`UNSUPPORTED`] has one entry per feature; implementing a feature means
//! deleting its entry (and its test).
//!
//! [`IGNORED`] lists options whose request this driver cannot honour but
//! whose absence weakens nothing (it has no connection pool to pre-fill or
//! prune, and always polls): they give a visible warning instead.

use crate::error::{Error, Result};
use crate::proto::options::ClientOptions;

/// One feature that is parsed but not implemented: the option as the user
/// would write it, and whether `options` ask for it.
struct Unsupported {
    option: &'static str,
    requested: fn(&ClientOptions) -> bool,
}

/// Whether the credential names `mechanism` (`None`: no `authMechanism`,
/// the default SCRAM negotiation).
fn mechanism_is(options: &ClientOptions, mechanism: Option<&str>) -> bool {
    options
        .credential()
        .is_some_and(|c| c.mechanism_name() == mechanism)
}

/// Every feature a client cannot honour yet.
const UNSUPPORTED: &[Unsupported] = &[
    Unsupported {
        option: "authMechanism=GSSAPI",
        requested: |o| mechanism_is(o, Some("GSSAPI")),
    },
    Unsupported {
        option: "proxyHost (SOCKS5 proxy)",
        requested: |o| o.proxy().is_some_and(|p| p.host.is_some()),
    },
];

/// Options that request something this driver does not do, harmlessly.
const IGNORED: &[Unsupported] = &[
    Unsupported {
        option: "minPoolSize (this driver keeps one socket per server, opened on demand)",
        requested: |o| o.min_pool_size().is_some_and(|n| n > 0),
    },
    Unsupported {
        option: "maxIdleTimeMS (idle sockets are checked with socketCheckIntervalMS instead)",
        requested: |o| o.max_idle_time().is_some_and(|t| !t.is_zero()),
    },
    Unsupported {
        option: "serverMonitoringMode=stream (this driver always polls, on demand)",
        requested: |o| {
            o.server_monitoring_mode() == crate::proto::options::ServerMonitoringMode::Stream
        },
    },
];

/// Refuses options that ask for a feature the driver does not implement
/// yet, naming the first such option; returns the warnings for options
/// that ask for something the driver does without. Never quotes option
/// values, so no secret can reach a message.
pub(crate) fn check(options: &ClientOptions) -> Result<Vec<String>> {
    if let Some(feature) = UNSUPPORTED.iter().find(|f| (f.requested)(options)) {
        return Err(Error::invalid_argument(format!(
            "{} is not supported yet by this driver; refusing to connect without it",
            feature.option
        )));
    }
    // A credential with a mechanism not listed above is refused by
    // `ClientOptions::validate` already; keep that true if the list shrinks.
    Ok(IGNORED
        .iter()
        .filter(|f| (f.requested)(options))
        .map(|f| format!("{} has no effect", f.option))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(uri: &str) -> String {
        let options = ClientOptions::parse(uri).run().expect("the URI parses");
        let error = check(&options).expect_err(uri).to_string();
        assert!(error.contains("not supported yet"), "{uri}: {error}");
        error
    }

    #[test]
    fn tls_and_the_implemented_mechanisms_are_accepted() {
        for uri in [
            "mongodb://h/?tls=true",
            "mongodb://h/?ssl=true&tlsCAFile=/ca.pem&tlsAllowInvalidHostnames=true",
            "mongodb://h/?tlsInsecure=true",
            "mongodb://h/?tls=true&tlsDisableOCSPEndpointCheck=true",
            "mongodb://alice:pw@h/",
            "mongodb://alice:pw@h/?authMechanism=SCRAM-SHA-1",
            "mongodb://alice:pw@h/?authMechanism=SCRAM-SHA-256",
            "mongodb://alice:pw@h/?authMechanism=PLAIN&tls=true",
            "mongodb://h/?authMechanism=MONGODB-X509&tls=true",
        ] {
            check(&ClientOptions::parse(uri).run().unwrap()).expect(uri);
        }
        let mut options = ClientOptions::parse("mongodb://h/").run().unwrap();
        options.srv_host = Some("cluster.example.com".into());
        check(&options).expect("mongodb+srv implies TLS, which is built");
    }

    #[test]
    fn gssapi_is_refused_without_quoting_secrets() {
        let uri =
            "mongodb://alice@h/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:s3cr/t";
        let error = refused(uri);
        assert!(error.contains("GSSAPI"), "{error}");
        assert!(!error.contains("s3cr"), "{error}");
        assert!(!error.contains("alice"), "{error}");
    }

    #[test]
    fn proxies_are_refused() {
        assert!(refused("mongodb://h/?proxyHost=p.example").contains("proxyHost"));
    }

    #[test]
    fn plain_options_and_explicit_tls_off_are_accepted_without_warnings() {
        for uri in [
            "mongodb://h/",
            "mongodb://h/?tls=false",
            "mongodb://h/?ssl=false&appname=x&w=majority&maxPoolSize=5&minPoolSize=0",
            "mongodb://h/?serverMonitoringMode=poll&maxConnecting=2&waitQueueTimeoutMS=5",
        ] {
            let warnings = check(&ClientOptions::parse(uri).run().unwrap()).expect(uri);
            assert!(warnings.is_empty(), "{uri}: {warnings:?}");
        }
    }

    #[test]
    fn options_asking_for_what_the_driver_does_without_warn() {
        for (query, name) in [
            ("minPoolSize=3", "minPoolSize"),
            ("maxIdleTimeMS=1000", "maxIdleTimeMS"),
            ("serverMonitoringMode=stream", "serverMonitoringMode"),
        ] {
            let uri = format!("mongodb://h/?{query}");
            let warnings = check(&ClientOptions::parse(&uri).run().unwrap()).unwrap();
            assert_eq!(warnings.len(), 1, "{uri}: {warnings:?}");
            assert!(warnings[0].contains(name), "{warnings:?}");
        }
    }
}
