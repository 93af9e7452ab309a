//! The connection-string spec tests (`connection-string/tests/*.json`) and
//! the URI-options spec tests (`uri-options/tests/*.json`): one case format,
//! each case checked against `ClientOptions::parse_with_warnings`.

use std::net::Ipv4Addr;
use std::path::Path;

use bson::{Bson, Document};
use serde::Deserialize;

use super::files::{self as spec, Report};
use crate::proto::address::{ServerAddress, DEFAULT_PORT};
use crate::proto::options::{Acknowledgment, ClientOptions};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecFile {
    pub tests: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub description: String,
    pub uri: String,
    pub valid: bool,
    pub warning: Option<bool>,
    pub hosts: Option<Vec<ExpectedHost>>,
    pub auth: Option<ExpectedAuth>,
    pub options: Option<Document>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedHost {
    #[serde(rename = "type")]
    pub kind: String,
    pub host: String,
    pub port: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedAuth {
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: Option<String>,
}

/// Runs every case of every file in `dir`, skipping the `(file, description)`
/// pairs in `skips` with their reason.
pub fn run_dir(report: &mut Report, dir: &Path, skips: &[(&str, &str, &str)]) {
    for path in spec::json_files(dir) {
        let file = spec::name(&path);
        let cases: SpecFile = spec::load_as(&path);
        for case in cases.tests {
            if let Some((_, _, reason)) = skips
                .iter()
                .find(|(f, d, _)| *f == file && *d == case.description)
            {
                if spec::selected(&file, &case.description) {
                    report.skip(&file, &case.description, reason);
                }
                continue;
            }
            report.run(&file, &case.description, || check(&case));
        }
    }
}

/// Checks one case: validity, warnings, hosts, auth and every listed option.
pub fn check(case: &Case) -> Result<(), String> {
    let parsed = ClientOptions::parse_with_warnings(&case.uri);
    let (options, warnings) = match (parsed, case.valid) {
        (Err(_), false) => return Ok(()),
        (Ok((o, w)), false) => {
            return Err(format!(
                "{:?} should be invalid but parsed to {o:?} with warnings {w:?}",
                case.uri
            ))
        }
        (Err(e), true) => return Err(format!("{:?} should be valid but: {e}", case.uri)),
        (Ok(parsed), true) => parsed,
    };
    match case.warning {
        Some(true) if warnings.is_empty() => {
            return Err(format!("{:?} should warn but did not", case.uri))
        }
        Some(false) if !warnings.is_empty() => {
            return Err(format!(
                "{:?} should not warn but did: {warnings:?}",
                case.uri
            ))
        }
        _ => {}
    }
    if let Some(hosts) = &case.hosts {
        check_hosts(options.hosts(), hosts)?;
    }
    if let Some(auth) = &case.auth {
        let credential = options.credential();
        let username = credential.and_then(|c| c.username.as_deref());
        let password = credential.and_then(|c| c.password.as_deref());
        let expected = (
            auth.username.as_deref(),
            auth.password.as_deref(),
            auth.db.as_deref(),
        );
        let actual = (username, password, options.default_database());
        if expected != actual {
            return Err(format!(
                "auth (username, password, db): expected {expected:?}, got {actual:?}"
            ));
        }
    }
    for (name, expected) in case.options.iter().flatten() {
        let actual = option_value(&options, name)?;
        match actual {
            Some(actual) if same(&actual, expected) => {}
            actual => {
                return Err(format!(
                    "option {name}: expected {expected}, got {}",
                    actual.map_or("nothing".to_string(), |a| a.to_string())
                ))
            }
        }
    }
    Ok(())
}

fn check_hosts(actual: &[ServerAddress], expected: &[ExpectedHost]) -> Result<(), String> {
    let describe = |a: &ServerAddress| -> (String, String, Option<i64>) {
        let kind = match a {
            ServerAddress::Unix { .. } => "unix",
            _ if a.host().contains(':') => "ip_literal",
            _ if a.host().parse::<Ipv4Addr>().is_ok() => "ipv4",
            _ => "hostname",
        };
        (
            kind.to_string(),
            a.host().to_string(),
            a.port().map(i64::from),
        )
    };
    let actual: Vec<_> = actual.iter().map(describe).collect();
    // The spec writes a port the URI did not name as null; a parsed TCP
    // address carries the default port instead.
    let expected: Vec<_> = expected
        .iter()
        .map(|h| {
            let port = match (h.kind.as_str(), h.port) {
                ("unix", port) => port,
                (_, None) => Some(i64::from(DEFAULT_PORT)),
                (_, port) => port,
            };
            (h.kind.clone(), h.host.clone(), port)
        })
        .collect();
    if actual == expected {
        Ok(())
    } else {
        Err(format!(
            "hosts (type, host, port): expected {expected:?}, got {actual:?}"
        ))
    }
}

/// Compares values the way the spec means them: numbers by value whatever
/// their BSON width, documents as unordered maps, arrays in order.
fn same(actual: &Bson, expected: &Bson) -> bool {
    fn number(b: &Bson) -> Option<f64> {
        match b {
            Bson::Int32(n) => Some(f64::from(*n)),
            Bson::Int64(n) => Some(*n as f64),
            Bson::Double(n) => Some(*n),
            _ => None,
        }
    }
    match (actual, expected) {
        (Bson::Document(a), Bson::Document(e)) => {
            a.len() == e.len()
                && e.iter()
                    .all(|(k, ev)| a.get(k).is_some_and(|av| same(av, ev)))
        }
        (Bson::Array(a), Bson::Array(e)) => {
            a.len() == e.len() && a.iter().zip(e).all(|(av, ev)| same(av, ev))
        }
        _ => match (number(actual), number(expected)) {
            (Some(a), Some(e)) => a == e,
            _ => actual == expected,
        },
    }
}

fn millis(d: std::time::Duration) -> Bson {
    Bson::Int64(d.as_millis() as i64)
}

/// The parsed value of the option the spec calls `name` (any case), read
/// back through the public getters; `Ok(None)` when it is not set.
pub fn option_value(o: &ClientOptions, name: &str) -> Result<Option<Bson>, String> {
    let credential = o.credential();
    let tls = o.tls_options();
    let write_concern = o.write_concern();
    let read_preference = o.read_preference();
    let proxy = o.proxy();
    let string = |s: Option<&str>| s.map(|s| Bson::String(s.to_string()));
    let boolean = |b: Option<bool>| b.map(Bson::Boolean);
    let value = match name.to_ascii_lowercase().as_str() {
        "appname" => string(o.app_name()),
        "authmechanism" => string(credential.and_then(|c| c.mechanism_name())),
        "authmechanismproperties" => credential
            .and_then(|c| c.mechanism_properties.clone())
            .map(Bson::Document),
        "authsource" => string(credential.and_then(|c| c.source.as_deref())),
        "compressors" => o
            .compressors()
            .map(|c| Bson::Array(c.iter().map(|s| Bson::String(s.clone())).collect())),
        // Zero means "no timeout", which is what the getter's None says.
        "connecttimeoutms" => Some(o.connect_timeout().map_or(Bson::Int64(0), millis)),
        "directconnection" => boolean(o.direct_connection()),
        "enableoverloadretargeting" => Some(Bson::Boolean(o.enable_overload_retargeting())),
        "heartbeatfrequencyms" => Some(millis(o.heartbeat_frequency())),
        "journal" => boolean(write_concern.and_then(|w| w.journal)),
        "loadbalanced" => Some(Bson::Boolean(o.load_balanced())),
        "localthresholdms" => Some(millis(o.local_threshold())),
        "maxadaptiveretries" => Some(Bson::Int64(o.max_adaptive_retries().into())),
        "maxconnecting" => o.max_connecting().map(|n| Bson::Int64(n.into())),
        "maxidletimems" => o.max_idle_time().map(millis),
        "maxpoolsize" => o.max_pool_size().map(|n| Bson::Int64(n.into())),
        "minpoolsize" => o.min_pool_size().map(|n| Bson::Int64(n.into())),
        // -1 is the spec's "no maximum".
        "maxstalenessseconds" => read_preference
            .map(|r| Bson::Int64(r.max_staleness().map_or(-1, |d| d.as_secs() as i64))),
        "proxyhost" => string(proxy.and_then(|p| p.host.as_deref())),
        "proxyport" => proxy.and_then(|p| p.port).map(|p| Bson::Int64(p.into())),
        "proxyusername" => string(proxy.and_then(|p| p.username.as_deref())),
        "proxypassword" => string(proxy.and_then(|p| p.password.as_deref())),
        "readconcernlevel" => string(o.read_concern().map(|r| r.level.as_str())),
        "readpreference" => string(read_preference.map(|r| r.mode().as_str())),
        "readpreferencetags" => read_preference.map(|r| {
            Bson::Array(
                r.tag_sets()
                    .iter()
                    .map(|set| {
                        Bson::Document(
                            set.iter()
                                .map(|(k, v)| (k.clone(), Bson::String(v.clone())))
                                .collect(),
                        )
                    })
                    .collect(),
            )
        }),
        "replicaset" => string(o.replica_set()),
        "retryreads" => Some(Bson::Boolean(o.retry_reads())),
        "retrywrites" => Some(Bson::Boolean(o.retry_writes())),
        "servermonitoringmode" => Some(Bson::String(o.server_monitoring_mode().as_str().into())),
        "serverselectiontimeoutms" => Some(millis(o.server_selection_timeout())),
        "serverselectiontryonce" => Some(Bson::Boolean(o.server_selection_try_once())),
        "socketcheckintervalms" => Some(millis(o.socket_check_interval())),
        "sockettimeoutms" => Some(o.socket_timeout().map_or(Bson::Int64(0), millis)),
        "srvmaxhosts" => Some(Bson::Int64(o.srv_max_hosts().into())),
        "srvservicename" => Some(Bson::String(o.srv_service_name().into())),
        "ssl" | "tls" => Some(Bson::Boolean(o.tls())),
        "timeoutms" => o.timeout().map(millis),
        "tlsallowinvalidcertificates" => boolean(tls.and_then(|t| t.allow_invalid_certificates)),
        "tlsallowinvalidhostnames" => boolean(tls.and_then(|t| t.allow_invalid_hostnames)),
        "tlscafile" => string(tls.and_then(|t| t.ca_file_path.as_deref()?.to_str())),
        "tlscertificatekeyfile" => {
            string(tls.and_then(|t| t.cert_key_file_path.as_deref()?.to_str()))
        }
        "tlscertificatekeyfilepassword" => string(tls.and_then(|t| {
            std::str::from_utf8(t.tls_certificate_key_file_password.as_deref()?).ok()
        })),
        "tlsdisablecertificaterevocationcheck" => {
            boolean(tls.and_then(|t| t.disable_certificate_revocation_check))
        }
        "tlsdisableocspendpointcheck" => boolean(tls.and_then(|t| t.disable_ocsp_endpoint_check)),
        "tlsinsecure" => boolean(tls.and_then(|t| t.insecure)),
        "w" => write_concern.and_then(|w| w.w.as_ref()).map(|w| match w {
            Acknowledgment::Nodes(n) => Bson::Int64((*n).into()),
            Acknowledgment::Majority => Bson::String("majority".into()),
            Acknowledgment::Custom(tag) => Bson::String(tag.clone()),
        }),
        "waitqueuetimeoutms" => o.wait_queue_timeout().map(millis),
        "wtimeoutms" => write_concern.and_then(|w| w.w_timeout).map(millis),
        "zlibcompressionlevel" => Some(Bson::Int64(o.zlib_compression_level().into())),
        other => return Err(format!("the runner does not know option {other:?}")),
    };
    Ok(value)
}

/// Cases that need a feature the project does not have yet: (file, description, reason).
const CONNECTION_STRING_SKIPS: &[(&str, &str, &str)] = &[];

/// Cases that need a feature the project does not have yet: (file, description, reason).
const URI_OPTIONS_SKIPS: &[(&str, &str, &str)] = &[];

#[test]
fn connection_string_spec() {
    let Some(dir) = spec::dir("connection-string/tests") else {
        return;
    };
    let mut report = Report::new("connection-string");
    run_dir(&mut report, &dir, CONNECTION_STRING_SKIPS);
    report.finish();
}

#[test]
fn uri_options_spec() {
    let Some(dir) = spec::dir("uri-options/tests") else {
        return;
    };
    let mut report = Report::new("uri-options");
    run_dir(&mut report, &dir, URI_OPTIONS_SKIPS);
    report.finish();
}
