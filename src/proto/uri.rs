//! Connection strings: the grammar of the connection-string spec and every
//! option of the URI-options spec.
//!
//! ```text
//! mongodb://user:pass@host1:27017,[::1]:27018,%2Ftmp%2Fm.sock/db?key=value&key=value
//! \_____/   \_______/ \__________________________________/ \/ \_______________/
//! scheme    userinfo            hosts                       db      options
//! ```
//!
//! Parsing is pure: no DNS. A `mongodb+srv` host is checked (one host, no
//! port) and kept in `ClientOptions::srv_host` for the SRV resolver.
//!
//! Invalid option values are ignored with a warning, as the connection-string
//! spec asks; conflicts between options and malformed grammar are errors.
//! Cross-option rules shared with options set in code live in
//! `ClientOptions::validate`; this module checks what only a URI can get
//! wrong (grammar, `tls` against `ssl`, `mongodb+srv` rules).

use std::collections::{HashMap, HashSet};
use std::net::Ipv6Addr;
use std::time::Duration;

use bson::Document;

use crate::error::{Error, Result};
use crate::proto::address::{ServerAddress, DEFAULT_PORT};
use crate::proto::options::{
    Acknowledgment, ClientOptions, Credential, ProxyOptions, ReadConcern, SelectionCriteria,
    ServerMonitoringMode, Tls, TlsOptions, WriteConcern, AUTH_MECHANISMS, KNOWN_COMPRESSORS,
    MAX_APP_NAME_BYTES, MIN_HEARTBEAT_FREQUENCY,
};
use crate::proto::read_preference::{ReadPreference, ReadPreferenceMode, TagSet};

const SCHEME: &str = "mongodb://";
const SRV_SCHEME: &str = "mongodb+srv://";

/// Every option this parser knows, by its spec name. Keys are matched
/// ignoring ASCII case; messages use these spellings.
const OPTION_NAMES: &[&str] = &[
    "appname",
    "authMechanism",
    "authMechanismProperties",
    "authSource",
    "compressors",
    "connectTimeoutMS",
    "directConnection",
    "enableOverloadRetargeting",
    "heartbeatFrequencyMS",
    "journal",
    "loadBalanced",
    "localThresholdMS",
    "maxAdaptiveRetries",
    "maxConnecting",
    "maxIdleTimeMS",
    "maxPoolSize",
    "maxStalenessSeconds",
    "minPoolSize",
    "proxyHost",
    "proxyPassword",
    "proxyPort",
    "proxyUsername",
    "readConcernLevel",
    "readPreference",
    "readPreferenceTags",
    "replicaSet",
    "retryReads",
    "retryWrites",
    "serverMonitoringMode",
    "serverSelectionTimeoutMS",
    "serverSelectionTryOnce",
    "socketCheckIntervalMS",
    "socketTimeoutMS",
    "srvMaxHosts",
    "srvServiceName",
    "ssl",
    "timeoutMS",
    "tls",
    "tlsAllowInvalidCertificates",
    "tlsAllowInvalidHostnames",
    "tlsCAFile",
    "tlsCertificateKeyFile",
    "tlsCertificateKeyFilePassword",
    "tlsDisableCertificateRevocationCheck",
    "tlsDisableOCSPEndpointCheck",
    "tlsInsecure",
    "w",
    "waitQueueTimeoutMS",
    "wTimeoutMS",
    "zlibCompressionLevel",
];

mod secrets;

/// The entry points from a connection string. They live here, not in
/// `options`, so that the options know nothing of the URI grammar; those
/// that log the warnings ([`ClientOptions::parse`], [`ClientOptions::parse_with`])
/// are the shell's, since nothing here logs.
impl ClientOptions {
    /// Like [`Self::parse`], but hands the warnings back instead of logging them.
    pub fn parse_with_warnings(uri: &str) -> Result<(Self, Vec<String>)> {
        let (options, warnings) = parse_unvalidated(uri)?;
        options.validate()?;
        Ok((options, warnings))
    }
}

/// Parses `uri` into options and warnings without the cross-option checks of
/// `ClientOptions::validate`, so that options set in code can be merged first.
/// No error or warning quotes a password or a token.
pub(crate) fn parse_unvalidated(uri: &str) -> Result<(ClientOptions, Vec<String>)> {
    let secrets = secrets::Secrets::of(uri);
    match parse_unscrubbed(uri) {
        Ok((options, warnings)) => {
            let warnings = warnings.iter().map(|w| secrets.scrub(w)).collect();
            Ok((options, warnings))
        }
        Err(error) => Err(secrets.scrub_error(error)),
    }
}

fn parse_unscrubbed(uri: &str) -> Result<(ClientOptions, Vec<String>)> {
    let (is_srv, rest) = if let Some(rest) = uri.strip_prefix(SCHEME) {
        (false, rest)
    } else if let Some(rest) = uri.strip_prefix(SRV_SCHEME) {
        (true, rest)
    } else {
        // Never echo the whole string: it may hold a password.
        let found = match uri.find("://") {
            Some(i) => format!("scheme {:?}", &uri[..i]),
            None if uri.is_empty() => "an empty string".to_string(),
            None => "no scheme".to_string(),
        };
        return Err(Error::invalid_argument(format!(
            "a connection string must start with \"{SCHEME}\" or \"{SRV_SCHEME}\", but it has {found}"
        )));
    };

    // '?' cannot appear unescaped in userinfo, hosts or the database, so the
    // first one starts the options, even when no '/' precedes it.
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let (host_info, database) = match before_query.split_once('/') {
        Some((hosts, database)) => (hosts, Some(database)),
        None => (before_query, None),
    };
    let (userinfo, hosts_text) = match host_info.rfind('@') {
        Some(i) => (Some(&host_info[..i]), &host_info[i + 1..]),
        None => (None, host_info),
    };

    let mut options = ClientOptions::default();
    let mut parser = OptionParser::default();

    if let Some(userinfo) = userinfo {
        let (username, password) = parse_userinfo(userinfo)?;
        parser.username = Some(username);
        parser.password = password;
    }

    if is_srv {
        options.srv_host = Some(parse_srv_host(hosts_text)?);
    } else {
        options.hosts = parse_hosts(hosts_text)?;
    }

    if let Some(database) = database {
        options.default_database = parse_database(database)?;
    }

    if let Some(query) = query {
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (raw_key, raw_value) = pair.split_once('=').ok_or_else(|| {
                Error::invalid_argument(format!(
                    "connection string option {:?} has no value; expected key=value",
                    percent_decode(pair).unwrap_or_else(|_| pair.to_string())
                ))
            })?;
            let key = percent_decode(raw_key).map_err(|e| e.context("an option name"))?;
            parser.apply(&mut options, &key, raw_value)?;
        }
    }

    let warnings = parser.finish(&mut options, is_srv)?;
    Ok((options, warnings))
}

/// Collects what several keys contribute to one value (read preference,
/// credential, `tls`/`ssl`) and the warnings.
#[derive(Default)]
struct OptionParser {
    warnings: Vec<String>,
    seen: HashMap<String, usize>,
    /// Options given with a non-empty value, valid or not: the uri-options
    /// spec's TLS conflicts are about options that *appear*.
    given: HashSet<&'static str>,
    /// Boolean options given as `true` at least once, even if a repeated
    /// key later says `false`: the spec's rules say "specified".
    ever_true: HashSet<&'static str>,
    tls_values: Vec<(&'static str, bool)>,
    /// The `tls*` settings, which [`Tls::Enabled`] carries once `tls` is known.
    tls_options: Option<TlsOptions>,
    read_preference_mode: Option<ReadPreferenceMode>,
    tag_sets: Option<Vec<TagSet>>,
    /// `Some(None)` is an explicit `maxStalenessSeconds=-1` ("no maximum").
    max_staleness: Option<Option<Duration>>,
    username: Option<String>,
    password: Option<String>,
    auth_source: Option<String>,
    auth_mechanism: Option<crate::proto::options::AuthMechanism>,
    auth_mechanism_properties: Option<Document>,
}

/// A bad percent-escape; [`DecodeError::context`] names where it was.
pub(crate) struct DecodeError(pub(crate) String);

impl DecodeError {
    fn context(self, place: &str) -> Error {
        Error::invalid_argument(format!("{place} {}", self.0))
    }
}

/// Percent-decodes `text`; a `%` must start a two-digit hex escape and the
/// result must be UTF-8.
pub(crate) fn percent_decode(text: &str) -> std::result::Result<String, DecodeError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| {
                let h = std::str::from_utf8(h).ok()?;
                u8::from_str_radix(h, 16)
                    .ok()
                    .filter(|_| h.bytes().all(|b| b.is_ascii_hexdigit()))
            });
            match hex {
                Some(byte) => {
                    out.push(byte);
                    i += 3;
                }
                None => {
                    return Err(DecodeError(
                        "contains a '%' that does not start a percent-escape (%XX); write a \
                         literal '%' as %25"
                            .to_string(),
                    ))
                }
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| DecodeError("is not valid UTF-8 once percent-decoded".to_string()))
}

fn parse_userinfo(userinfo: &str) -> Result<(String, Option<String>)> {
    if userinfo.contains('@') {
        return Err(Error::invalid_argument(
            "the user name or password contains an unescaped '@'; percent-encode it as %40",
        ));
    }
    let (raw_username, raw_password) = match userinfo.split_once(':') {
        Some((username, password)) => (username, Some(password)),
        None => (userinfo, None),
    };
    if raw_password.is_some_and(|p| p.contains(':')) {
        return Err(Error::invalid_argument(
            "the password contains an unescaped ':'; percent-encode it as %3A",
        ));
    }
    let username = percent_decode(raw_username).map_err(|e| e.context("the user name"))?;
    let password = raw_password
        .map(percent_decode)
        .transpose()
        .map_err(|e| e.context("the password"))?;
    Ok((username, password))
}

fn parse_srv_host(hosts_text: &str) -> Result<String> {
    if hosts_text.is_empty() {
        return Err(Error::invalid_argument(
            "the connection string names no host",
        ));
    }
    if hosts_text.contains(',') {
        return Err(Error::invalid_argument(format!(
            "a mongodb+srv connection string must name exactly one host, but it names {}",
            hosts_text.split(',').count()
        )));
    }
    let host = percent_decode(hosts_text).map_err(|e| e.context("the host"))?;
    if host.starts_with('[') || host.contains('/') {
        return Err(Error::invalid_argument(format!(
            "a mongodb+srv connection string must name a host name, not {host:?}"
        )));
    }
    if host.contains(':') {
        return Err(Error::invalid_argument(format!(
            "a mongodb+srv connection string cannot name a port, but host {host:?} has one"
        )));
    }
    Ok(host.to_ascii_lowercase())
}

fn parse_hosts(hosts_text: &str) -> Result<Vec<ServerAddress>> {
    if hosts_text.is_empty() {
        return Err(Error::invalid_argument(
            "the connection string names no host",
        ));
    }
    hosts_text.split(',').map(parse_host).collect()
}

/// One host identifier: `host`, `host:port`, `[v6]`, `[v6]:port`, or a
/// percent-encoded Unix domain socket path ending in `.sock`.
fn parse_host(raw: &str) -> Result<ServerAddress> {
    if raw.is_empty() {
        return Err(Error::invalid_argument(
            "the connection string has an empty host in its host list",
        ));
    }
    let text = percent_decode(raw).map_err(|e| e.context(&format!("host {raw:?}")))?;
    // Only a socket path can hold a '/', and it reaches us encoded (an
    // unescaped one would have ended the host list).
    if text.contains('/') {
        if !text.ends_with(".sock") {
            return Err(Error::invalid_argument(format!(
                "host {text:?} looks like a Unix domain socket path but does not end in \".sock\""
            )));
        }
        return Ok(ServerAddress::Unix { path: text.into() });
    }
    let (host, port_text) = match text.strip_prefix('[') {
        Some(inside) => split_ipv6_host(&text, inside)?,
        None => split_named_host(&text)?,
    };
    if host.is_empty() {
        return Err(Error::invalid_argument(format!(
            "host {text:?} has an empty host name"
        )));
    }
    Ok(ServerAddress::tcp(host, parse_port(&text, port_text)?))
}

/// `[v6]` or `[v6]:port`, given what follows the `[`: the literal checked
/// as an IPv6 address, and the port's text if any.
fn split_ipv6_host<'a>(text: &str, inside: &'a str) -> Result<(&'a str, Option<&'a str>)> {
    let (literal, after) = inside.split_once(']').ok_or_else(|| {
        Error::invalid_argument(format!("host {text:?} has an unterminated IPv6 literal"))
    })?;
    // A zone index ("fe80::1%eth0") is not part of the address proper.
    let address = literal.split('%').next().unwrap_or(literal);
    if address.parse::<Ipv6Addr>().is_err() {
        return Err(Error::invalid_argument(format!(
            "host {text:?}: {literal:?} is not an IPv6 address"
        )));
    }
    let port_text = match after {
        "" => None,
        _ => Some(after.strip_prefix(':').ok_or_else(|| {
            Error::invalid_argument(format!(
                "host {text:?} has unexpected characters after its IPv6 literal"
            ))
        })?),
    };
    Ok((literal, port_text))
}

/// `host` or `host:port`: a second ':' means an unbracketed IPv6 address.
fn split_named_host(text: &str) -> Result<(&str, Option<&str>)> {
    match text.split_once(':') {
        Some((_, port)) if port.contains(':') => Err(Error::invalid_argument(format!(
            "host {text:?} has more than one ':'; enclose an IPv6 address in brackets"
        ))),
        Some((host, port)) => Ok((host, Some(port))),
        None => Ok((text, None)),
    }
}

/// The port, 1 to 65535, or the default when the host names none.
fn parse_port(text: &str, port_text: Option<&str>) -> Result<u16> {
    match port_text {
        None => Ok(DEFAULT_PORT),
        Some(p) => match p.parse::<u16>() {
            Ok(port) if port > 0 => Ok(port),
            _ => Err(Error::invalid_argument(format!(
                "host {text:?} has port {p:?}; expected an integer from 1 to 65535"
            ))),
        },
    }
}

fn parse_database(raw: &str) -> Result<Option<String>> {
    if raw.is_empty() {
        return Ok(None);
    }
    let name = percent_decode(raw).map_err(|e| e.context("the database name"))?;
    if let Some(bad) = name
        .chars()
        .find(|c| matches!(c, '/' | '\\' | ' ' | '"' | '$'))
    {
        let hint = if raw.contains('@') {
            "; if it is part of a user name or password, percent-encode it"
        } else {
            ""
        };
        return Err(Error::invalid_argument(format!(
            "the database name {name:?} contains {bad:?}, which database names cannot hold{hint}"
        )));
    }
    Ok(Some(name))
}

/// The outcome of reading one value: used, or ignored with a warning.
type Parsed<T> = Option<T>;

impl OptionParser {
    fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    fn invalid<T>(&mut self, name: &str, value: &str, expected: &str) -> Parsed<T> {
        self.warn(format!("ignoring {name}={value:?}: expected {expected}"));
        None
    }

    fn boolean(&mut self, name: &str, value: &str) -> Parsed<bool> {
        if value.eq_ignore_ascii_case("true") {
            Some(true)
        } else if value.eq_ignore_ascii_case("false") {
            Some(false)
        } else {
            self.invalid(name, value, "\"true\" or \"false\"")
        }
    }

    /// An integer in `min..=max`.
    fn integer(&mut self, name: &str, value: &str, min: i64, max: i64) -> Parsed<i64> {
        // A bound that is only the integer type's limit is not worth quoting.
        let type_limit = max >= i64::from(i32::MAX);
        let expected = match value.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => return Some(n),
            Ok(n) if n < min => format!("an integer of at least {min}"),
            Ok(_) if type_limit => format!("an integer of at most {max}"),
            _ if type_limit => format!("an integer of at least {min}"),
            _ => format!("an integer from {min} to {max}"),
        };
        self.invalid(name, value, &expected)
    }

    fn unsigned(&mut self, name: &str, value: &str, min: u32) -> Parsed<u32> {
        self.integer(name, value, min.into(), i32::MAX.into())
            .and_then(|n| u32::try_from(n).ok())
    }

    fn millis(&mut self, name: &str, value: &str, min: u64) -> Parsed<Duration> {
        self.millis_up_to(name, value, min, i32::MAX as i64)
    }

    fn millis_up_to(&mut self, name: &str, value: &str, min: u64, max: i64) -> Parsed<Duration> {
        self.integer(name, value, min as i64, max)
            .map(|n| Duration::from_millis(n as u64))
    }

    /// `k:v,k:v` (the value already percent-decoded). The value of a pair is
    /// everything after its first ':', as the spec allows ':' in values; a
    /// ',' always separates pairs, even an encoded one (the spec forbids
    /// commas in values and its tests expect a warning).
    fn key_value_pairs(&mut self, name: &str, value: &str) -> Parsed<Vec<(String, String)>> {
        let mut pairs = Vec::new();
        if value.is_empty() {
            return Some(pairs);
        }
        // authMechanismProperties may carry tokens; never echo them.
        let shown = if name == "authMechanismProperties" {
            "<redacted>"
        } else {
            value
        };
        for item in value.split(',') {
            match item.split_once(':') {
                Some((key, value)) if !key.is_empty() => {
                    pairs.push((key.to_string(), value.to_string()))
                }
                _ => {
                    return self.invalid(
                        name,
                        shown,
                        "comma-separated key:value pairs with non-empty keys",
                    )
                }
            }
        }
        Some(pairs)
    }

    /// Applies one `key=value` pair; `key` is decoded, `raw_value` not yet.
    fn apply(&mut self, options: &mut ClientOptions, key: &str, raw_value: &str) -> Result<()> {
        let Some(name) = OPTION_NAMES
            .iter()
            .copied()
            .find(|n| n.eq_ignore_ascii_case(key))
        else {
            self.warn(format!("Unsupported option '{key}'; ignored"));
            return Ok(());
        };
        let lower = name.to_ascii_lowercase();
        let count = self.seen.entry(lower.clone()).or_insert(0);
        *count += 1;
        if *count == 2 && name != "readPreferenceTags" {
            self.warn(format!(
                "option {name} is given more than once; the last value is used"
            ));
        }
        let value = percent_decode(raw_value).map_err(|e| e.context(&format!("option {name}")))?;
        // An empty list is meaningful (readPreferenceTags= is the "any
        // member" tag set) and an empty authSource is an error the auth
        // rules report; any other empty value is ignored.
        let empty_is_meaningful = matches!(
            name,
            "readPreferenceTags" | "authMechanismProperties" | "authSource"
        );
        if value.is_empty() && !empty_is_meaningful {
            self.warn(format!("ignoring option {name}: its value is empty"));
            return Ok(());
        }
        self.given.insert(name);
        if value.eq_ignore_ascii_case("true") {
            self.ever_true.insert(name);
        }
        self.apply_value(options, name, value)
    }

    /// Sets the option `name` (as `OPTION_NAMES` spells it) from its
    /// decoded, non-empty `value`: each group of options in turn takes the
    /// names it knows.
    fn apply_value(
        &mut self,
        options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<()> {
        type Group = fn(
            &mut OptionParser,
            &mut ClientOptions,
            &'static str,
            String,
        ) -> Result<Option<String>>;
        const GROUPS: [Group; 8] = [
            OptionParser::apply_deployment,
            OptionParser::apply_auth,
            OptionParser::apply_timing,
            OptionParser::apply_pool_and_retry,
            OptionParser::apply_read,
            OptionParser::apply_write_concern,
            OptionParser::apply_tls,
            OptionParser::apply_proxy,
        ];
        let mut value = value;
        for group in GROUPS {
            match group(self, options, name, value)? {
                Some(unclaimed) => value = unclaimed,
                None => return Ok(()),
            }
        }
        unreachable!("option {name} is listed in OPTION_NAMES but not handled")
    }

    /// The deployment and the handshake: how servers are found and greeted.
    ///
    /// Hands `value` back when `name` is not one of them.
    fn apply_deployment(
        &mut self,
        options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "appname" => {
                if value.len() > MAX_APP_NAME_BYTES {
                    self.invalid::<()>(name, &value, "at most 128 bytes");
                } else {
                    options.app_name = Some(value);
                }
            }
            "compressors" => {
                let mut kept = Vec::new();
                for compressor in value.split(',') {
                    if KNOWN_COMPRESSORS.contains(&compressor) {
                        if !kept.iter().any(|k| k == compressor) {
                            kept.push(compressor.to_string());
                        }
                    } else {
                        self.warn(format!(
                            "ignoring unknown compressor {compressor:?} in compressors; \
                             expected {}",
                            KNOWN_COMPRESSORS.join(", ")
                        ));
                    }
                }
                if !kept.is_empty() {
                    options.compressors = Some(kept);
                }
            }
            "zlibCompressionLevel" => {
                if let Some(level) = self.integer(name, &value, -1, 9) {
                    options.zlib_compression_level = Some(level as i32);
                }
            }
            "directConnection" => set(&mut options.direct_connection, self.boolean(name, &value)),
            "loadBalanced" => set(&mut options.load_balanced, self.boolean(name, &value)),
            "replicaSet" => options.repl_set_name = Some(value),
            "srvMaxHosts" => set(&mut options.srv_max_hosts, self.unsigned(name, &value, 0)),
            "srvServiceName" => {
                if is_srv_service_name(&value) {
                    options.srv_service_name = Some(value);
                } else {
                    self.invalid::<()>(
                        name,
                        &value,
                        "an SRV service name (1-62 letters, digits or inner hyphens)",
                    );
                }
            }
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// Authentication (the auth spec checks them together later).
    /// Hands `value` back when `name` is not one of them.
    fn apply_auth(
        &mut self,
        _options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "authMechanism" => {
                let Some(mechanism) = AUTH_MECHANISMS
                    .iter()
                    .find(|m| m.eq_ignore_ascii_case(&value))
                else {
                    return Err(Error::invalid_argument(format!(
                        "authMechanism {value:?} is not supported; expected one of {}",
                        AUTH_MECHANISMS.join(", ")
                    )));
                };
                self.auth_mechanism = Some(mechanism.parse()?);
            }
            "authMechanismProperties" => {
                if let Some(pairs) = self.key_value_pairs(name, &value) {
                    let document: Document = pairs
                        .into_iter()
                        .map(|(k, v)| (k, bson::Bson::String(v)))
                        .collect();
                    self.auth_mechanism_properties = Some(document);
                }
            }
            "authSource" => self.auth_source = Some(value),
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// Timeouts, server selection and monitoring.
    /// Hands `value` back when `name` is not one of them.
    fn apply_timing(
        &mut self,
        options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "connectTimeoutMS" => set(&mut options.connect_timeout, self.millis(name, &value, 0)),
            "heartbeatFrequencyMS" => {
                let min = MIN_HEARTBEAT_FREQUENCY.as_millis() as u64;
                set(&mut options.heartbeat_freq, self.millis(name, &value, min))
            }
            "localThresholdMS" => set(&mut options.local_threshold, self.millis(name, &value, 0)),
            "serverMonitoringMode" => match ServerMonitoringMode::parse(&value) {
                Some(mode) => options.server_monitoring_mode = Some(mode),
                None => {
                    self.invalid::<()>(name, &value, "\"stream\", \"poll\" or \"auto\"");
                }
            },
            "serverSelectionTimeoutMS" => set(
                &mut options.server_selection_timeout,
                self.millis(name, &value, 1),
            ),
            "serverSelectionTryOnce" => set(
                &mut options.server_selection_try_once,
                self.boolean(name, &value),
            ),
            "socketCheckIntervalMS" => set(
                &mut options.socket_check_interval,
                self.millis(name, &value, 0),
            ),
            "socketTimeoutMS" => set(&mut options.socket_timeout, self.millis(name, &value, 0)),
            "timeoutMS" => set(&mut options.timeout, self.millis(name, &value, 0)),
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// The connection pool's settings and the retry rules.
    /// Hands `value` back when `name` is not one of them.
    fn apply_pool_and_retry(
        &mut self,
        options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "maxConnecting" => set(&mut options.max_connecting, self.unsigned(name, &value, 1)),
            "maxIdleTimeMS" => set(&mut options.max_idle_time, self.millis(name, &value, 0)),
            "maxPoolSize" => set(&mut options.max_pool_size, self.unsigned(name, &value, 0)),
            "minPoolSize" => set(&mut options.min_pool_size, self.unsigned(name, &value, 0)),
            "waitQueueTimeoutMS" => set(
                &mut options.wait_queue_timeout,
                self.millis(name, &value, 0),
            ),
            "retryReads" => set(&mut options.retry_reads, self.boolean(name, &value)),
            "retryWrites" => set(&mut options.retry_writes, self.boolean(name, &value)),
            "maxAdaptiveRetries" => set(
                &mut options.max_adaptive_retries,
                self.unsigned(name, &value, 0),
            ),
            "enableOverloadRetargeting" => set(
                &mut options.enable_overload_retargeting,
                self.boolean(name, &value),
            ),
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// Read preference and read concern.
    /// Hands `value` back when `name` is not one of them.
    fn apply_read(
        &mut self,
        options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "readConcernLevel" => options.read_concern = Some(ReadConcern::custom(&value)),
            "readPreference" => match ReadPreferenceMode::parse(&value) {
                Ok(mode) => self.read_preference_mode = Some(mode),
                Err(_) => {
                    self.invalid::<()>(
                        name,
                        &value,
                        "primary, primaryPreferred, secondary, secondaryPreferred or nearest",
                    );
                }
            },
            "readPreferenceTags" => {
                if let Some(pairs) = self.key_value_pairs(name, &value) {
                    let tag_set: TagSet = pairs.into_iter().collect();
                    self.tag_sets.get_or_insert_with(Vec::new).push(tag_set);
                }
            }
            "maxStalenessSeconds" => {
                // -1 says "no maximum" explicitly; the 90-second floor and
                // the heartbeat rule are checked at selection time, where
                // the max-staleness spec puts them.
                if let Some(seconds) = self.integer(name, &value, -1, i32::MAX.into()) {
                    self.max_staleness =
                        Some((seconds >= 0).then(|| Duration::from_secs(seconds as u64)));
                }
            }
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// The write concern.
    /// Hands `value` back when `name` is not one of them.
    fn apply_write_concern(
        &mut self,
        options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "journal" => {
                if let Some(journal) = self.boolean(name, &value) {
                    write_concern(options).journal = Some(journal);
                }
            }
            "w" => {
                let w = match value.parse::<i64>() {
                    Ok(n) => match u32::try_from(n) {
                        Ok(n) if n <= i32::MAX as u32 => Some(Acknowledgment::Nodes(n)),
                        _ => self.invalid(name, &value, "a non-negative integer or a tag name"),
                    },
                    Err(_) if value == "majority" => Some(Acknowledgment::Majority),
                    Err(_) => Some(Acknowledgment::Custom(value)),
                };
                if let Some(w) = w {
                    write_concern(options).w = Some(w);
                }
            }
            "wTimeoutMS" => {
                if let Some(timeout) = self.millis_up_to(name, &value, 0, i64::MAX) {
                    write_concern(options).w_timeout = Some(timeout);
                }
            }
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// TLS.
    /// Hands `value` back when `name` is not one of them.
    fn apply_tls(
        &mut self,
        // Unused: the `tls*` settings wait in the parser until `finish`
        // knows whether `tls` turned TLS off.
        _: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "ssl" | "tls" => {
                if let Some(on) = self.boolean(name, &value) {
                    self.tls_values.push((name, on));
                }
            }
            "tlsAllowInvalidCertificates" => {
                if let Some(v) = self.boolean(name, &value) {
                    tls(&mut self.tls_options).allow_invalid_certificates = Some(v);
                }
            }
            "tlsAllowInvalidHostnames" => {
                if let Some(v) = self.boolean(name, &value) {
                    tls(&mut self.tls_options).allow_invalid_hostnames = Some(v);
                }
            }
            "tlsCAFile" => tls(&mut self.tls_options).ca_file_path = Some(value.into()),
            "tlsCertificateKeyFile" => {
                tls(&mut self.tls_options).cert_key_file_path = Some(value.into())
            }
            "tlsCertificateKeyFilePassword" => {
                tls(&mut self.tls_options).tls_certificate_key_file_password =
                    Some(value.into_bytes())
            }
            "tlsDisableCertificateRevocationCheck" => {
                if let Some(v) = self.boolean(name, &value) {
                    tls(&mut self.tls_options).disable_certificate_revocation_check = Some(v);
                }
            }
            "tlsDisableOCSPEndpointCheck" => {
                if let Some(v) = self.boolean(name, &value) {
                    tls(&mut self.tls_options).disable_ocsp_endpoint_check = Some(v);
                }
            }
            "tlsInsecure" => {
                if let Some(v) = self.boolean(name, &value) {
                    tls(&mut self.tls_options).insecure = Some(v);
                }
            }
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// The SOCKS5 proxy.
    /// Hands `value` back when `name` is not one of them.
    fn apply_proxy(
        &mut self,
        options: &mut ClientOptions,
        name: &'static str,
        value: String,
    ) -> Result<Option<String>> {
        match name {
            "proxyHost" => proxy(options).host = Some(value),
            "proxyPassword" => proxy(options).password = Some(value),
            "proxyPort" => {
                if let Some(port) = self.integer(name, &value, 0, u16::MAX.into()) {
                    proxy(options).port = Some(port as u16);
                }
            }
            "proxyUsername" => proxy(options).username = Some(value),
            _ => return Ok(Some(value)),
        }
        Ok(None)
    }

    /// Assembles multi-key values and checks the rules only a URI can break.
    fn finish(self, options: &mut ClientOptions, is_srv: bool) -> Result<Vec<String>> {
        self.check_repeated_keys(options, is_srv)?;
        options.tls = tls_setting(&self.tls_values, self.tls_options)?;

        if self.read_preference_mode.is_some()
            || self.tag_sets.is_some()
            || self.max_staleness.is_some()
        {
            let tag_sets = self.tag_sets.unwrap_or_default();
            let max_staleness = self.max_staleness.flatten();
            // The max-staleness spec: maxStalenessSeconds with mode primary,
            // named or by default, is invalid; so are tags. A named primary
            // gets ReadPreference::from_parts's message.
            if self.read_preference_mode.is_none() {
                let needs_mode = if max_staleness.is_some() {
                    Some("maxStalenessSeconds")
                } else if tag_sets.iter().any(|t| !t.is_empty()) {
                    Some("readPreferenceTags")
                } else {
                    None
                };
                if let Some(option) = needs_mode {
                    return Err(Error::invalid_argument(format!(
                        "{option} requires a readPreference other than primary, and none was \
                         given (the default is primary)"
                    )));
                }
            }
            let read_preference = ReadPreference::from_parts(
                self.read_preference_mode.unwrap_or_default(),
                tag_sets,
                max_staleness,
                None,
            )?;
            options.selection_criteria = Some(SelectionCriteria::ReadPreference(read_preference));
        }

        // The auth spec: authSource alone does not ask for authentication
        // (but an empty one is still an error).
        if self.auth_source.as_deref() == Some("") {
            return Err(Error::invalid_argument("authSource is empty"));
        }
        if self.username.is_some()
            || self.auth_mechanism.is_some()
            || self.auth_mechanism_properties.is_some()
        {
            options.credential = Some(Credential {
                username: self.username,
                password: self.password,
                source: self.auth_source,
                mechanism: self.auth_mechanism,
                mechanism_properties: self.auth_mechanism_properties,
                oidc_callback: Default::default(),
            });
        }

        if is_srv && options.direct_connection == Some(true) {
            return Err(Error::invalid_argument(
                "directConnection=true cannot be used with a mongodb+srv connection string, \
                 which may resolve to several hosts",
            ));
        }
        Ok(self.warnings)
    }
}

/// The uri-options spec's pairs of TLS options that must not both appear
/// in a connection string, whatever their values.
const CONFLICTING_TLS_OPTIONS: [(&str, &str); 7] = [
    ("tlsInsecure", "tlsAllowInvalidCertificates"),
    ("tlsInsecure", "tlsAllowInvalidHostnames"),
    ("tlsInsecure", "tlsDisableOCSPEndpointCheck"),
    ("tlsInsecure", "tlsDisableCertificateRevocationCheck"),
    ("tlsAllowInvalidCertificates", "tlsDisableOCSPEndpointCheck"),
    (
        "tlsAllowInvalidCertificates",
        "tlsDisableCertificateRevocationCheck",
    ),
    (
        "tlsDisableOCSPEndpointCheck",
        "tlsDisableCertificateRevocationCheck",
    ),
];

impl OptionParser {
    /// The rules a repeated key could otherwise slip past under "the last
    /// value is used" (the connection-string spec leaves the precedence of
    /// repeated keys open, except where the uri-options spec defines it):
    ///
    /// - the TLS conflicts hold when both options *appear*, whatever their
    ///   values, valid or not, repeated or not;
    /// - `directConnection=true` and `loadBalanced=true` are refused with
    ///   what they cannot be combined with when *specified*, even if a
    ///   repeated key later says `false`: the user asked for both.
    ///
    /// `tls`/`ssl` disagreeing is checked in [`OptionParser::finish`];
    /// `readPreferenceTags` is a list; every other repeated key warns and
    /// the last valid value is used.
    fn check_repeated_keys(&self, options: &ClientOptions, is_srv: bool) -> Result<()> {
        for (a, b) in CONFLICTING_TLS_OPTIONS {
            if self.given.contains(a) && self.given.contains(b) {
                return Err(Error::invalid_argument(format!(
                    "{a} and {b} cannot both be given"
                )));
            }
        }
        let hosts = options.hosts.len();
        if self.ever_true.contains("directConnection") {
            if is_srv {
                return Err(Error::invalid_argument(
                    "directConnection=true cannot be used with a mongodb+srv connection string, \
                     which may resolve to several hosts (even if another directConnection \
                     follows it)",
                ));
            }
            if hosts > 1 {
                return Err(Error::invalid_argument(format!(
                    "directConnection=true requires exactly one host, but {hosts} were given \
                     (even if another directConnection follows it)"
                )));
            }
        }
        if self.ever_true.contains("loadBalanced") {
            let conflict = if hosts > 1 {
                Some(format!("multiple hosts ({hosts} given)"))
            } else if self.given.contains("replicaSet") {
                Some("replicaSet".to_string())
            } else if self.ever_true.contains("directConnection") {
                Some("directConnection=true".to_string())
            } else {
                None
            };
            if let Some(conflict) = conflict {
                return Err(Error::invalid_argument(format!(
                    "loadBalanced=true cannot be used with {conflict} (even if another \
                     loadBalanced follows it)"
                )));
            }
        }
        Ok(())
    }
}

/// Sets `field` when the value was valid; an invalid one (already warned
/// about) leaves an earlier value of a repeated key in place.
fn set<T>(field: &mut Option<T>, value: Parsed<T>) {
    if value.is_some() {
        *field = value;
    }
}

fn write_concern(options: &mut ClientOptions) -> &mut WriteConcern {
    options
        .write_concern
        .get_or_insert_with(WriteConcern::default)
}

/// TLS as the `tls`/`ssl` values and the `tls*` settings of a URI ask for
/// it: every `tls` and `ssl` must agree, and `tls=false` with a setting
/// that configures TLS is a contradiction.
fn tls_setting(
    tls_values: &[(&'static str, bool)],
    tls_options: Option<TlsOptions>,
) -> Result<Option<Tls>> {
    if let Some(&(first_name, first)) = tls_values.first() {
        if let Some(&(name, other)) = tls_values.iter().find(|(_, v)| *v != first) {
            return Err(Error::invalid_argument(format!(
                "{first_name}={first} conflicts with {name}={other}: every tls and ssl option \
                 in a connection string must have the same value"
            )));
        }
    }
    let tls_on = tls_values.first().map(|&(_, on)| on);
    Ok(match (tls_on, tls_options) {
        (Some(false), Some(given)) => {
            let name = given.first_given().unwrap_or("a tls option");
            return Err(Error::invalid_argument(format!(
                "tls=false (or ssl=false) but {name} is given: {name} configures TLS; remove \
                 tls=false to connect with TLS, or remove {name} to connect without it"
            )));
        }
        (Some(false), None) => Some(Tls::Disabled),
        // A `tls*` setting turns TLS on, as libmongoc does: asking how to
        // verify TLS and then talking in plain text would ignore it.
        (Some(true), given) => Some(Tls::Enabled(given.unwrap_or_default())),
        (None, Some(given)) => Some(Tls::Enabled(given)),
        (None, None) => None,
    })
}

fn tls(options: &mut Option<TlsOptions>) -> &mut TlsOptions {
    options.get_or_insert_with(TlsOptions::default)
}

/// The longest `srvServiceName`: a DNS label is at most 63 bytes, one of
/// them the leading underscore.
const MAX_SRV_SERVICE_NAME: usize = 62;

fn proxy(options: &mut ClientOptions) -> &mut ProxyOptions {
    options.proxy.get_or_insert_with(ProxyOptions::default)
}

/// RFC 6335 section 5.1 (letters, digits and hyphens, at least one letter,
/// no hyphen at either end or next to another), but up to 62 characters
/// rather than 15: the seed-list spec allows any name that fits a DNS label
/// once the underscore is prepended.
fn is_srv_service_name(name: &str) -> bool {
    (1..=MAX_SRV_SERVICE_NAME).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_alphabetic())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod repeated_key_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::options::Tls;

    fn parse(uri: &str) -> Result<(ClientOptions, Vec<String>)> {
        ClientOptions::parse_with_warnings(uri)
    }

    fn error(uri: &str) -> String {
        match parse(uri) {
            Ok(_) => panic!("{uri} parsed, expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn percent_decoding_of_userinfo_and_database() {
        let (o, w) = parse("mongodb://%40l%3Ace%2F%3D:p%25ss@example.com/my%3Ddb").unwrap();
        assert!(w.is_empty());
        let c = o.credential().unwrap();
        assert_eq!(c.username.as_deref(), Some("@l:ce/="));
        assert_eq!(c.password.as_deref(), Some("p%ss"));
        assert_eq!(o.default_database(), Some("my=db"));
        assert!(error("mongodb://user%w:pw@h").contains("percent-escape"));
        assert!(error("mongodb://user%2:pw@h").contains("percent-escape"));
        assert!(error("mongodb://a:b:c@h").contains("':'"));
        assert!(error("mongodb://a@b@h").contains("'@'"));
        // The password never appears in a message.
        assert!(!error("mongodb://alice:s3cret:x@h").contains("s3cret"));
    }

    #[test]
    fn ipv6_literals_and_ports() {
        let (o, _) = parse("mongodb://[::1]:27018,[FE80::1],h:1").unwrap();
        assert_eq!(
            o.hosts(),
            &[
                ServerAddress::tcp("::1", 27018),
                ServerAddress::tcp("fe80::1", DEFAULT_PORT),
                ServerAddress::tcp("h", 1),
            ]
        );
        assert!(error("mongodb://::1").contains("brackets"));
        assert!(error("mongodb://[::1").contains("unterminated"));
        assert!(error("mongodb://[nothex]").contains("not an IPv6 address"));
        assert!(error("mongodb://[::1]x").contains("after its IPv6 literal"));
        assert!(error("mongodb://h:0").contains("1 to 65535"));
        assert!(error("mongodb://h,").contains("empty host"));
    }

    #[test]
    fn unix_sockets_are_percent_encoded_paths() {
        let (o, _) = parse("mongodb://%2Ftmp%2Fm.sock,rel%2Fa%20b.sock,plain.sock/admin").unwrap();
        assert_eq!(
            o.hosts(),
            &[
                ServerAddress::Unix {
                    path: "/tmp/m.sock".into()
                },
                ServerAddress::Unix {
                    path: "rel/a b.sock".into()
                },
                // No '/', so a host name that happens to end in .sock.
                ServerAddress::tcp("plain.sock", DEFAULT_PORT),
            ]
        );
        assert_eq!(o.default_database(), Some("admin"));
        assert!(error("mongodb://%2Ftmp%2Fmongodb").contains(".sock"));
        assert!(error("mongodb:///tmp/m.sock").contains("no host"));
    }

    #[test]
    fn repeated_keys_last_wins_with_a_warning() {
        let (o, w) = parse("mongodb://h/?replicaSet=a&REPLICASET=b").unwrap();
        assert_eq!(o.replica_set(), Some("b"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("replicaSet") && w[0].contains("more than once"));
        // An invalid repeat is ignored and leaves the earlier valid value.
        let (o, w) =
            parse("mongodb://h/?heartbeatFrequencyMS=1000&heartbeatFrequencyMS=x").unwrap();
        assert_eq!(o.heartbeat_frequency(), Duration::from_millis(1000));
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn tag_lists_accumulate_including_the_empty_set() {
        let (o, w) =
            parse("mongodb://h/?readPreference=secondary&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=dc:a%3Ab&readPreferenceTags=")
                .unwrap();
        assert!(w.is_empty(), "{w:?}");
        let sets = &o.read_preference().unwrap().tag_sets();
        assert_eq!(sets.len(), 3);
        assert_eq!(sets[0].get("rack").map(String::as_str), Some("1"));
        assert_eq!(sets[1].get("dc").map(String::as_str), Some("a:b"));
        assert!(sets[2].is_empty());
        // A comma inside a value cannot be expressed, even encoded.
        let (_, w) =
            parse("mongodb://h/?readPreference=secondary&readPreferenceTags=dc:%2C").unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        // Tags need a mode that can use them.
        assert!(error("mongodb://h/?readPreferenceTags=dc:ny").contains("primary"));
        let (_, w) = parse("mongodb://h/?readPreferenceTags=invalid").unwrap();
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn key_value_values_may_hold_colons() {
        let (o, _) = parse(
            "mongodb://u@h/?authMechanism=MONGODB-OIDC&authMechanismProperties=TOKEN_RESOURCE:mongodb://foo,ENVIRONMENT:azure",
        )
        .unwrap();
        let props = o
            .credential()
            .unwrap()
            .mechanism_properties
            .clone()
            .unwrap();
        assert_eq!(props.get_str("TOKEN_RESOURCE").unwrap(), "mongodb://foo");
        assert_eq!(o.auth_source(), Some("$external"));
    }

    #[test]
    fn socket_timeout_defaults_to_300_s_and_zero_means_no_limit() {
        let (unset, _) = parse("mongodb://h/").unwrap();
        assert_eq!(unset.socket_timeout(), Some(Duration::from_secs(300)));
        let (zero, _) = parse("mongodb://h/?socketTimeoutMS=0").unwrap();
        assert_eq!(zero.socket_timeout(), None);
        let (set, _) = parse("mongodb://h/?socketTimeoutMS=1500").unwrap();
        assert_eq!(set.socket_timeout(), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn invalid_values_warn_and_unknown_keys_warn() {
        let (o, w) =
            parse("mongodb://h/?connectTimeoutMS=-2&fooBar=1&w=&zlibCompressionLevel=10").unwrap();
        assert_eq!(o.connect_timeout(), Some(Duration::from_secs(10)));
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("connectTimeoutMS") && w[0].contains("-2"));
        assert!(w[1].contains("fooBar"));
    }

    #[test]
    fn option_values_are_typed_and_range_checked() {
        let (o, w) = parse(
            "mongodb://h/?w=majority&wTimeoutMS=5000000000&journal=TRUE&heartbeatFrequencyMS=500\
             &compressors=zstd,lz4,zlib&zlibCompressionLevel=-1&serverMonitoringMode=Poll\
             &maxAdaptiveRetries=0&enableOverloadRetargeting=true",
        )
        .unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("lz4"));
        let wc = o.write_concern().unwrap();
        assert_eq!(wc.w, Some(Acknowledgment::Majority));
        // wTimeoutMS is the one 64-bit integer option.
        assert_eq!(wc.w_timeout, Some(Duration::from_millis(5_000_000_000)));
        assert_eq!(wc.journal, Some(true));
        assert_eq!(o.heartbeat_frequency(), Duration::from_millis(500));
        assert_eq!(o.compressors().unwrap(), ["zstd", "zlib"]);
        assert_eq!(o.server_monitoring_mode(), ServerMonitoringMode::Poll);
        assert_eq!(o.max_adaptive_retries(), 0);
        assert!(o.enable_overload_retargeting());

        let (o, w) =
            parse("mongodb://h/?heartbeatFrequencyMS=499&connectTimeoutMS=5000000000&w=2").unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("heartbeatFrequencyMS") && w[0].contains("at least 500"));
        assert_eq!(
            o.heartbeat_frequency(),
            crate::proto::options::DEFAULT_HEARTBEAT_FREQUENCY
        );
        assert_eq!(o.write_concern().unwrap().w, Some(Acknowledgment::Nodes(2)));
        // Tokens in authMechanismProperties stay out of warnings.
        let (_, w) =
            parse("mongodb://u@h/?authMechanism=MONGODB-OIDC&authMechanismProperties=TOKEN-secret")
                .unwrap();
        assert!(w.iter().all(|w| !w.contains("secret")), "{w:?}");
    }

    #[test]
    fn srv_rules() {
        let (o, _) = parse("mongodb+srv://Cluster0.Example.com/?srvMaxHosts=2").unwrap();
        assert_eq!(o.srv_host(), Some("cluster0.example.com"));
        assert!(o.tls());
        assert!(o.hosts().is_empty());
        assert!(error("mongodb+srv://a.example.com:27017").contains("port"));
        assert!(error("mongodb+srv://a.example.com,b.example.com").contains("exactly one"));
        assert!(error("mongodb+srv://a.example.com/?directConnection=true")
            .contains("directConnection"));
        assert!(error("mongodb://a/?srvServiceName=x").contains("mongodb+srv"));
    }

    #[test]
    fn srv_service_names_may_be_62_characters_long() {
        let long = format!("a{}", "-b".repeat(30));
        assert_eq!(long.len(), 61);
        let (o, w) = parse(&format!("mongodb+srv://a.b.c/?srvServiceName={long}x")).unwrap();
        assert_eq!(o.srv_service_name(), format!("{long}x"), "{w:?}");
        let (o, w) = parse(&format!("mongodb+srv://a.b.c/?srvServiceName={long}xy")).unwrap();
        assert_eq!(o.srv_service_name(), "mongodb");
        assert!(w[0].contains("1-62"), "{w:?}");
    }

    #[test]
    fn any_tls_option_turns_tls_on_and_tls_false_with_one_is_an_error() {
        for option in [
            "tlsCAFile=ca.pem",
            "tlsInsecure=false",
            "tlsCertificateKeyFile=c.pem",
        ] {
            let (o, _) = parse(&format!("mongodb://h/?{option}")).unwrap();
            assert!(o.tls(), "{option}");
            let e = error(&format!("mongodb://h/?tls=false&{option}"));
            let name = option.split('=').next().unwrap();
            assert!(e.contains(&format!("but {name} is given")), "{e}");
        }
        assert!(!parse("mongodb://h/").unwrap().0.tls());
        assert!(parse("mongodb://h/?tls=true&tlsCAFile=ca.pem")
            .unwrap()
            .0
            .tls());
    }

    #[test]
    fn conflicts_are_errors_naming_both_options() {
        assert!(
            error("mongodb://h/?tls=true&ssl=false").contains("tls=true conflicts with ssl=false")
        );
        assert!(
            error("mongodb://h/?tlsInsecure=false&tlsAllowInvalidHostnames=false")
                .contains("tlsInsecure and tlsAllowInvalidHostnames")
        );
        assert!(error("mongodb://a,b/?loadBalanced=true").contains("multiple hosts"));
        assert!(error("mongodb://a/?loadBalanced=true&replicaSet=rs").contains("replicaSet"));
        assert!(error("mongodb://a/?w=0&journal=true").contains("journal"));
        assert!(error("mongodb://a/?maxStalenessSeconds=120").contains("primary"));
        assert!(
            error("mongodb://a/?readPreference=primary&maxStalenessSeconds=120")
                .contains("maxStalenessSeconds")
        );
        let (o, _) = parse("mongodb://a/?readPreference=primary&maxStalenessSeconds=-1").unwrap();
        assert_eq!(o.read_preference().unwrap().max_staleness(), None);
    }

    #[test]
    fn auth_rules() {
        assert!(parse("mongodb://alice@h").is_ok());
        // The auth spec: authSource alone does not ask for authentication.
        assert!(parse("mongodb://h/?authSource=db")
            .unwrap()
            .0
            .credential()
            .is_none());
        assert!(error("mongodb://h/?authSource=").contains("authSource is empty"));
        assert!(error("mongodb://u:p@h/?authSource=").contains("authSource is empty"));
        assert!(error("mongodb://alice@h/?authMechanism=SCRAM-SHA-256").contains("password"));
        assert!(error("mongodb://a:b@h/?authMechanism=MONGODB-X509").contains("password"));
        assert!(error("mongodb://a:b@h/?authMechanism=NOPE").contains("NOPE"));
        let (o, _) = parse("mongodb://a:b@h/db?authMechanism=scram-sha-1").unwrap();
        assert_eq!(
            o.credential().unwrap().mechanism_name(),
            Some("SCRAM-SHA-1")
        );
        assert_eq!(o.auth_source(), Some("db"));
    }

    #[test]
    fn uri_and_code_conflict_names_option_and_values() {
        let code = ClientOptions::builder()
            .heartbeat_freq(Duration::from_secs(30))
            .build();
        let err = ClientOptions::parse_with("mongodb://h/?heartbeatFrequencyMS=20000", code)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("heartbeatFrequencyMS is 20000 in the URI but 30000 in code"),
            "{err}"
        );
    }

    #[test]
    fn code_merges_over_uri_and_is_validated_after() {
        let code = ClientOptions::builder()
            .app_name("app".to_string())
            .heartbeat_freq(Duration::from_millis(20000))
            .build();
        let merged = ClientOptions::parse_with(
            "mongodb://h/?heartbeatFrequencyMS=20000&retryWrites=false",
            code,
        )
        .unwrap();
        assert_eq!(merged.app_name(), Some("app"));
        assert!(!merged.retry_writes());
        // Valid alone on each side, invalid together.
        let code = ClientOptions::builder()
            .repl_set_name("rs".to_string())
            .build();
        let err = ClientOptions::parse_with("mongodb://h/?loadBalanced=true", code).unwrap_err();
        assert!(err.to_string().contains("replicaSet"), "{err}");
        // Secrets are not printed.
        let credential = Credential::builder()
            .username("u".to_string())
            .password("code-secret".to_string())
            .build();
        let code = ClientOptions::builder().credential(credential).build();
        let err = ClientOptions::parse_with("mongodb://u:uri-secret@h", code)
            .unwrap_err()
            .to_string();
        assert!(err.contains("password") && !err.contains("secret"), "{err}");
    }

    #[test]
    fn options_set_in_code_are_validated_like_a_uri_by_the_client() {
        let refused = |options: ClientOptions| crate::Client::with_options(options).unwrap_err();
        let low = refused(
            ClientOptions::builder()
                .heartbeat_freq(Duration::from_millis(499))
                .build(),
        );
        assert!(low.to_string().contains("at least 500"), "{low}");
        let tls = TlsOptions::builder()
            .insecure(true)
            .allow_invalid_certificates(true)
            .build();
        let error = refused(ClientOptions::builder().tls(tls).build());
        assert!(error.to_string().contains("tlsInsecure"), "{error}");
        let options = ClientOptions {
            hosts: vec![ServerAddress::tcp("a", 1), ServerAddress::tcp("b", 1)],
            direct_connection: Some(true),
            ..Default::default()
        };
        assert!(refused(options).to_string().contains("directConnection"));
        let error = refused(ClientOptions::builder().zlib_compression_level(10).build());
        assert!(
            error.to_string().contains("zlibCompressionLevel"),
            "{error}"
        );
        let error = refused(
            ClientOptions::builder()
                .compressors(vec!["lz4".to_string()])
                .build(),
        );
        assert!(error.to_string().contains("lz4"), "{error}");
        let built = ClientOptions::builder()
            .hosts(vec![ServerAddress::tcp("a", 1)])
            .max_adaptive_retries(0)
            .build();
        assert!(crate::Client::with_options(built.clone()).is_ok());
        assert_eq!(built.max_adaptive_retries(), 0);
        assert!(!built.enable_overload_retargeting());
    }

    #[test]
    fn parsed_options_are_public_fields_with_the_official_names() {
        let mut options = ClientOptions::parse(
            "mongodb://a:1,b:2/?replicaSet=rs&appname=x&heartbeatFrequencyMS=1000\
             &readPreference=secondary&tls=true&tlsCAFile=ca.pem",
        )
        .run()
        .unwrap();
        assert_eq!(options.repl_set_name.as_deref(), Some("rs"));
        assert_eq!(options.app_name.as_deref(), Some("x"));
        assert_eq!(options.heartbeat_freq, Some(Duration::from_secs(1)));
        assert_eq!(options.hosts.len(), 2);
        assert!(matches!(
            &options.selection_criteria,
            Some(SelectionCriteria::ReadPreference(rp)) if rp.mode() == ReadPreferenceMode::Secondary
        ));
        let Some(Tls::Enabled(tls)) = &options.tls else {
            panic!("tls is on: {:?}", options.tls);
        };
        assert_eq!(
            tls.ca_file_path.as_deref(),
            Some(std::path::Path::new("ca.pem"))
        );
        options.app_name = Some("changed".to_string());
        options.tls = Some(Tls::Disabled);
        assert_eq!(options.app_name(), Some("changed"));
        assert!(!options.tls());
        let off = ClientOptions::parse("mongodb://h/?tls=false")
            .run()
            .unwrap();
        assert_eq!(off.tls, Some(Tls::Disabled));
        let error = ClientOptions::parse("mongodb://h/?tls=false&tlsCAFile=x")
            .run()
            .unwrap_err();
        assert!(error.to_string().contains("tlsCAFile"), "{error}");
    }

    #[test]
    fn from_str_and_scheme_errors() {
        let o: ClientOptions = "mongodb://localhost".parse().unwrap();
        assert_eq!(o.hosts(), &[ServerAddress::tcp("localhost", DEFAULT_PORT)]);
        assert!(error("").contains("empty string"));
        assert!(error("mongo://h").contains("\"mongo\""));
        assert!(error("mongodb://h/?w").contains("no value"));
        // Options may follow the hosts without a '/'.
        let (o, _) = parse("mongodb://h?replicaSet=rs").unwrap();
        assert_eq!(o.replica_set(), Some("rs"));
    }
}
