//! Options the URI parser understands but the driver does not implement yet.
//!
//! Parsing accepts them (the URI-options spec tests parse such URIs, and a
//! parsed URI can be inspected), but a client built from them would quietly
//! do something weaker than asked: talk in plain text where TLS was asked
//! for, never authenticate, offer compression it cannot decode. So client
//! construction refuses them, here and only here.
//!
//! [`UNSUPPORTED`] has one entry per feature; implementing a feature means
//! deleting its entry (and its test).
//!
//! [`IGNORED`] lists options whose request this driver cannot honour but
//! whose absence weakens nothing (it has no connection pool to pre-fill or
//! prune, and always polls): they give a visible warning instead.

use crate::error::{Error, Result};
use crate::options::ClientOptions;

/// One feature that is parsed but not implemented: the option as the user
/// would write it, and whether `options` ask for it.
struct Unsupported {
    option: &'static str,
    requested: fn(&ClientOptions) -> bool,
}

/// Whether the credential names `mechanism` (`None`: no `authMechanism`,
/// the default SCRAM negotiation).
fn mechanism_is(options: &ClientOptions, mechanism: Option<&str>) -> bool {
    options.credential().is_some_and(|c| {
        c.mechanism
            .as_deref()
            .map(str::to_ascii_uppercase)
            .as_deref()
            == mechanism
    })
}

fn tls_option(options: &ClientOptions, set: fn(&crate::options::TlsOptions) -> bool) -> bool {
    options.tls_options().is_some_and(set)
}

/// Every feature a client cannot honour yet.
const UNSUPPORTED: &[Unsupported] = &[
    Unsupported {
        // Also the `mongodb+srv` default, which turns TLS on.
        option: "tls=true (or ssl=true, or a mongodb+srv URI, which implies it)",
        requested: ClientOptions::tls,
    },
    Unsupported {
        option: "tlsCAFile",
        requested: |o| tls_option(o, |t| t.ca_file.is_some()),
    },
    Unsupported {
        option: "tlsCertificateKeyFile",
        requested: |o| tls_option(o, |t| t.certificate_key_file.is_some()),
    },
    Unsupported {
        option: "tlsCertificateKeyFilePassword",
        requested: |o| tls_option(o, |t| t.certificate_key_file_password.is_some()),
    },
    Unsupported {
        option: "tlsAllowInvalidCertificates",
        requested: |o| tls_option(o, |t| t.allow_invalid_certificates.is_some()),
    },
    Unsupported {
        option: "tlsAllowInvalidHostnames",
        requested: |o| tls_option(o, |t| t.allow_invalid_hostnames.is_some()),
    },
    Unsupported {
        option: "tlsInsecure",
        requested: |o| tls_option(o, |t| t.insecure.is_some()),
    },
    Unsupported {
        option: "tlsDisableOCSPEndpointCheck",
        requested: |o| tls_option(o, |t| t.disable_ocsp_endpoint_check.is_some()),
    },
    Unsupported {
        option: "tlsDisableCertificateRevocationCheck",
        requested: |o| tls_option(o, |t| t.disable_certificate_revocation_check.is_some()),
    },
    Unsupported {
        option: "credentials (user:password@ without authMechanism: SCRAM negotiation)",
        requested: |o| mechanism_is(o, None),
    },
    Unsupported {
        option: "authMechanism=SCRAM-SHA-1",
        requested: |o| mechanism_is(o, Some("SCRAM-SHA-1")),
    },
    Unsupported {
        option: "authMechanism=SCRAM-SHA-256",
        requested: |o| mechanism_is(o, Some("SCRAM-SHA-256")),
    },
    Unsupported {
        option: "authMechanism=PLAIN",
        requested: |o| mechanism_is(o, Some("PLAIN")),
    },
    Unsupported {
        option: "authMechanism=GSSAPI",
        requested: |o| mechanism_is(o, Some("GSSAPI")),
    },
    Unsupported {
        option: "authMechanism=MONGODB-X509",
        requested: |o| mechanism_is(o, Some("MONGODB-X509")),
    },
    Unsupported {
        option: "authMechanism=MONGODB-AWS",
        requested: |o| mechanism_is(o, Some("MONGODB-AWS")),
    },
    Unsupported {
        option: "authMechanism=MONGODB-OIDC",
        requested: |o| mechanism_is(o, Some("MONGODB-OIDC")),
    },
    Unsupported {
        option: "compressors",
        requested: |o| o.compressors().is_some_and(|c| !c.is_empty()),
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
        requested: |o| o.server_monitoring_mode() == crate::options::ServerMonitoringMode::Stream,
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
        let options = ClientOptions::parse(uri).expect("the URI parses");
        let error = check(&options).expect_err(uri).to_string();
        assert!(error.contains("not supported yet"), "{uri}: {error}");
        error
    }

    #[test]
    fn each_tls_option_is_refused_by_name() {
        for (query, name) in [
            ("tls=true", "tls=true"),
            ("ssl=true", "tls=true"),
            ("tlsCAFile=/ca.pem", "tlsCAFile"),
            ("tlsCertificateKeyFile=/k.pem", "tlsCertificateKeyFile"),
            (
                "tlsCertificateKeyFile=/k.pem&tlsCertificateKeyFilePassword=hunter2",
                "tlsCertificateKeyFile",
            ),
            (
                "tlsAllowInvalidCertificates=true",
                "tlsAllowInvalidCertificates",
            ),
            ("tlsAllowInvalidHostnames=true", "tlsAllowInvalidHostnames"),
            ("tlsInsecure=true", "tlsInsecure"),
            (
                "tlsDisableOCSPEndpointCheck=true",
                "tlsDisableOCSPEndpointCheck",
            ),
            (
                "tlsDisableCertificateRevocationCheck=true",
                "tlsDisableCertificateRevocationCheck",
            ),
        ] {
            let error = refused(&format!("mongodb://h/?{query}"));
            assert!(error.contains(name), "{query}: {error}");
            assert!(!error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn the_key_file_password_alone_is_refused() {
        let mut options = ClientOptions::parse("mongodb://h/").unwrap();
        options.tls_options = Some(crate::options::TlsOptions {
            certificate_key_file_password: Some("hunter2".into()),
            ..Default::default()
        });
        let error = check(&options).unwrap_err().to_string();
        assert!(error.contains("tlsCertificateKeyFilePassword"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn srv_implies_tls_and_is_refused_unless_tls_is_off() {
        let mut options = ClientOptions::parse("mongodb://h/").unwrap();
        options.srv_host = Some("cluster.example.com".into());
        assert!(check(&options).unwrap_err().to_string().contains("tls"));
        options.tls = Some(false);
        check(&options).expect("mongodb+srv with tls=false asks for no TLS");
    }

    #[test]
    fn each_credential_mechanism_is_refused_without_quoting_secrets() {
        for (uri, name) in [
            ("mongodb://alice:s3cr%2Ft@h/", "credentials"),
            (
                "mongodb://alice:s3cr%2Ft@h/?authMechanism=SCRAM-SHA-1",
                "SCRAM-SHA-1",
            ),
            (
                "mongodb://alice:s3cr%2Ft@h/?authMechanism=SCRAM-SHA-256",
                "SCRAM-SHA-256",
            ),
            ("mongodb://alice:s3cr%2Ft@h/?authMechanism=PLAIN", "PLAIN"),
            (
                "mongodb://alice@h/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:s3cr/t",
                "GSSAPI",
            ),
            (
                "mongodb://h/?authMechanism=MONGODB-X509&tls=false",
                "MONGODB-X509",
            ),
            (
                "mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:s3cr/t",
                "MONGODB-AWS",
            ),
            (
                "mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test",
                "MONGODB-OIDC",
            ),
        ] {
            let error = refused(uri);
            assert!(error.contains(name), "{uri}: {error}");
            assert!(!error.contains("s3cr"), "{uri}: {error}");
            assert!(!error.contains("alice"), "{uri}: {error}");
        }
    }

    #[test]
    fn compressors_and_proxies_are_refused() {
        assert!(refused("mongodb://h/?compressors=zlib").contains("compressors"));
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
            let warnings = check(&ClientOptions::parse(uri).unwrap()).expect(uri);
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
            let warnings = check(&ClientOptions::parse(&uri).unwrap()).unwrap();
            assert_eq!(warnings.len(), 1, "{uri}: {warnings:?}");
            assert!(warnings[0].contains(name), "{warnings:?}");
        }
    }
}
