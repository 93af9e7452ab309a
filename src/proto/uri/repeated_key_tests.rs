//! What a repeated key does, option by option, for every option the parser
//! knows (the connection-string spec's "Repeated Keys", the uri-options
//! spec's conflicting TLS options and its `directConnection` and
//! load-balancer rules).

use super::OPTION_NAMES;
use crate::proto::options::ClientOptions;

/// What repeating a key with two different valid values does.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Repeated {
    /// A warning; the options are those of the last value alone.
    LastWins,
    /// Each value is kept, in order, without a warning (a list).
    Accumulates,
    /// The connection string is invalid.
    Invalid,
}
use Repeated::*;

/// Per option: two different valid values, what the URI needs besides the
/// option to be valid, and what repeating the key does.
const CASES: &[(&str, &str, &str, &str, Repeated)] = &[
    ("appname", "a", "b", "", LastWins),
    (
        "authMechanism",
        "SCRAM-SHA-1",
        "SCRAM-SHA-256",
        "u:p@",
        LastWins,
    ),
    (
        "authMechanismProperties",
        "SERVICE_NAME:a",
        "SERVICE_NAME:b",
        "u:p@&authMechanism=GSSAPI",
        LastWins,
    ),
    ("authSource", "a", "b", "u:p@", LastWins),
    ("compressors", "zlib", "snappy", "", LastWins),
    ("connectTimeoutMS", "1", "2", "", LastWins),
    ("directConnection", "false", "true", "", LastWins),
    ("enableOverloadRetargeting", "true", "false", "", LastWins),
    ("heartbeatFrequencyMS", "500", "501", "", LastWins),
    ("journal", "true", "false", "", LastWins),
    ("loadBalanced", "false", "true", "", LastWins),
    ("localThresholdMS", "1", "2", "", LastWins),
    ("maxAdaptiveRetries", "1", "2", "", LastWins),
    ("maxConnecting", "1", "2", "", LastWins),
    ("maxIdleTimeMS", "1", "2", "", LastWins),
    ("maxPoolSize", "1", "2", "", LastWins),
    (
        "maxStalenessSeconds",
        "90",
        "91",
        "&readPreference=secondary",
        LastWins,
    ),
    ("minPoolSize", "1", "2", "", LastWins),
    ("proxyHost", "a", "b", "", LastWins),
    (
        "proxyPassword",
        "a",
        "b",
        "&proxyHost=h&proxyUsername=u",
        LastWins,
    ),
    ("proxyPort", "1", "2", "&proxyHost=h", LastWins),
    (
        "proxyUsername",
        "a",
        "b",
        "&proxyHost=h&proxyPassword=p",
        LastWins,
    ),
    ("readConcernLevel", "local", "majority", "", LastWins),
    ("readPreference", "secondary", "nearest", "", LastWins),
    (
        "readPreferenceTags",
        "dc:ny",
        "dc:sf",
        "&readPreference=secondary",
        Accumulates,
    ),
    ("replicaSet", "a", "b", "", LastWins),
    ("retryReads", "true", "false", "", LastWins),
    ("retryWrites", "true", "false", "", LastWins),
    ("serverMonitoringMode", "poll", "stream", "", LastWins),
    ("serverSelectionTimeoutMS", "1", "2", "", LastWins),
    ("serverSelectionTryOnce", "true", "false", "", LastWins),
    ("socketCheckIntervalMS", "1", "2", "", LastWins),
    ("socketTimeoutMS", "1", "2", "", LastWins),
    // srvMaxHosts and srvServiceName need a mongodb+srv URI: see below.
    ("ssl", "true", "false", "", Invalid),
    ("timeoutMS", "1", "2", "", LastWins),
    ("tls", "true", "false", "", Invalid),
    ("tlsAllowInvalidCertificates", "true", "false", "", LastWins),
    ("tlsAllowInvalidHostnames", "true", "false", "", LastWins),
    ("tlsCAFile", "a", "b", "", LastWins),
    ("tlsCertificateKeyFile", "a", "b", "", LastWins),
    ("tlsCertificateKeyFilePassword", "a", "b", "", LastWins),
    (
        "tlsDisableCertificateRevocationCheck",
        "true",
        "false",
        "",
        LastWins,
    ),
    ("tlsDisableOCSPEndpointCheck", "true", "false", "", LastWins),
    ("tlsInsecure", "true", "false", "", LastWins),
    ("w", "1", "majority", "", LastWins),
    ("waitQueueTimeoutMS", "1", "2", "", LastWins),
    ("wTimeoutMS", "1", "2", "", LastWins),
    (
        "zlibCompressionLevel",
        "1",
        "2",
        "&compressors=zlib",
        LastWins,
    ),
];

/// `mongodb://[userinfo]h/?...`: `context` starts with the user information
/// (ending in `@`) or with `&` and more options.
fn uri(base: &str, context: &str, query: &str) -> String {
    let (scheme, host) = base.split_once("//").expect("a scheme");
    let (userinfo, more) = match context.split_once('@') {
        Some((userinfo, more)) => (format!("{userinfo}@"), more),
        None => (String::new(), context),
    };
    format!("{scheme}//{userinfo}{host}/?{query}{more}")
}

fn parse(uri: &str) -> crate::error::Result<(ClientOptions, Vec<String>)> {
    ClientOptions::parse_with_warnings(uri)
}

fn check(base: &str, name: &str, v1: &str, v2: &str, context: &str, expected: Repeated) {
    let twice = uri(base, context, &format!("{name}={v1}&{name}={v2}"));
    let last = uri(base, context, &format!("{name}={v2}"));
    match expected {
        LastWins => {
            let (options, warnings) = parse(&twice).unwrap_or_else(|e| panic!("{twice}: {e}"));
            let (alone, _) = parse(&last).unwrap_or_else(|e| panic!("{last}: {e}"));
            assert_eq!(options, alone, "{twice}: the last value is used");
            assert!(
                warnings.iter().any(|w| w.contains("more than once")),
                "{twice}: {warnings:?}"
            );
        }
        Accumulates => {
            let (options, warnings) = parse(&twice).unwrap_or_else(|e| panic!("{twice}: {e}"));
            let (alone, _) = parse(&last).unwrap();
            assert_ne!(options, alone, "{twice}: both values are kept");
            assert!(warnings.is_empty(), "{twice}: {warnings:?}");
        }
        Invalid => {
            parse(&twice).expect_err(&twice);
        }
    }
}

#[test]
fn every_option_has_a_repeated_key_case() {
    for name in OPTION_NAMES {
        let covered =
            CASES.iter().any(|c| c.0 == *name) || ["srvMaxHosts", "srvServiceName"].contains(name);
        assert!(covered, "no repeated-key case for {name}");
    }
}

#[test]
fn each_option_repeated_with_different_values() {
    for &(name, v1, v2, context, expected) in CASES {
        check("mongodb://h", name, v1, v2, context, expected);
    }
    for (name, v1, v2) in [("srvMaxHosts", "1", "2"), ("srvServiceName", "a", "b")] {
        check("mongodb+srv://h.example.com", name, v1, v2, "", LastWins);
    }
}

#[test]
fn tls_and_ssl_repeated_with_the_same_value_are_valid() {
    for query in ["tls=true&tls=true", "ssl=false&tls=false&ssl=false"] {
        parse(&format!("mongodb://h/?{query}")).expect(query);
    }
}

#[test]
fn conflicting_tls_options_are_refused_whatever_their_values() {
    for (a, b) in super::CONFLICTING_TLS_OPTIONS {
        for (va, vb) in [
            ("true", "true"),
            ("false", "true"),
            ("true", "invalid"),
            ("no", "x"),
        ] {
            let query = format!("{a}={va}&{b}={vb}");
            let error = parse(&format!("mongodb://h/?{query}")).expect_err(&query);
            assert!(error.to_string().contains(a), "{query}: {error}");
        }
    }
    // An empty value is ignored, so the option does not appear.
    parse("mongodb://h/?tlsInsecure=&tlsAllowInvalidCertificates=true").unwrap();
}

#[test]
fn direct_connection_true_is_refused_with_several_hosts_even_if_overridden() {
    for query in [
        "directConnection=true&directConnection=false",
        "directConnection=false&directConnection=true",
    ] {
        let uri = format!("mongodb://h1,h2/?{query}");
        let error = parse(&uri).expect_err(&uri);
        assert!(error.to_string().contains("directConnection"), "{error}");
        let srv = format!("mongodb+srv://h.example.com/?{query}");
        parse(&srv).expect_err(&srv);
    }
    // One host: a warning, and the last value.
    let (options, _) = parse("mongodb://h/?directConnection=true&directConnection=false").unwrap();
    assert_eq!(options.direct_connection(), Some(false));
}

#[test]
fn load_balanced_true_is_refused_with_what_it_excludes_even_if_overridden() {
    for uri in [
        "mongodb://h1,h2/?loadBalanced=true&loadBalanced=false",
        "mongodb://h/?loadBalanced=true&loadBalanced=false&replicaSet=rs",
        "mongodb://h/?loadBalanced=true&loadBalanced=false&directConnection=true",
    ] {
        let error = parse(uri).expect_err(uri);
        assert!(error.to_string().contains("loadBalanced"), "{uri}: {error}");
    }
    let (options, _) = parse("mongodb://h/?loadBalanced=true&loadBalanced=false").unwrap();
    assert!(!options.load_balanced());
}
