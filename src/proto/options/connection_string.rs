//! [`ConnectionString`]: a connection string's options as the official
//! driver's `ConnectionString` holds them, before they become
//! [`ClientOptions`].
//!
//! There is one parser, `proto::uri`: [`ConnectionString::parse`] runs it
//! and moves the options the official type names into its public fields;
//! the others (`compressors`, `timeoutMS`, the proxy, ...) ride along
//! privately. [`ClientOptions::parse`](crate::options::ClientOptions::parse)
//! puts the fields back, so a field changed in between takes effect.

use std::fmt;
use std::time::Duration;

use bson::uuid::UuidRepresentation;

use super::{
    Acknowledgment, ClientOptions, Credential, ReadConcern, ReadPreference, SelectionCriteria,
    ServerAddress, ServerMonitoringMode, Tls, WriteConcern,
};
use crate::error::{Error, Result};
use crate::proto::serde_util::millis::serialize as millis;

/// Where a connection string says the servers are.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub enum HostInfo {
    /// The seed list of a `mongodb://` string.
    HostIdentifiers(Vec<ServerAddress>),
    /// The host of a `mongodb+srv://` string, whose SRV record lists the
    /// servers (looked up by the client before its first operation).
    DnsRecord(String),
}

impl Default for HostInfo {
    /// An empty seed list.
    fn default() -> Self {
        HostInfo::HostIdentifiers(Vec::new())
    }
}

/// A parsed connection string (`mongodb://` or `mongodb+srv://`), its
/// options in public fields, as the official driver's `ConnectionString`.
///
/// ```
/// use mongo_inline::options::{ClientOptions, ConnectionString, HostInfo};
/// # fn main() -> mongo_inline::Result<()> {
/// let mut parsed = ConnectionString::parse("mongodb://db1,db2:27018/app?replicaSet=rs0")?;
/// assert!(matches!(&parsed.host_info, HostInfo::HostIdentifiers(hosts) if hosts.len() == 2));
/// assert_eq!(parsed.replica_set.as_deref(), Some("rs0"));
/// parsed.app_name = Some("reports".into());
/// let options = ClientOptions::parse(parsed).run()?;
/// assert_eq!(options.app_name.as_deref(), Some("reports"));
/// # Ok(())
/// # }
/// ```
///
/// It prints as a connection string with the same options, except the
/// secrets (the password, `authMechanismProperties`,
/// `tlsCertificateKeyFilePassword`, the proxy's password), which are left
/// out. It serializes (as the official type) to its fields, camelCase,
/// durations in milliseconds, TLS and the credential as their URI options,
/// without those secrets either.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionString {
    /// The seed list, or the SRV host.
    pub host_info: HostInfo,
    /// `appname`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    /// `tls` and the `tls*` options.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "write_tls")]
    pub tls: Option<Tls>,
    /// `heartbeatFrequencyMS`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "millis")]
    pub heartbeat_frequency: Option<Duration>,
    /// `localThresholdMS`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "millis")]
    pub local_threshold: Option<Duration>,
    /// `readConcernLevel`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_concern: Option<ReadConcern>,
    /// `replicaSet`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_set: Option<String>,
    /// `w`, `wTimeoutMS` and `journal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_concern: Option<WriteConcern>,
    /// `serverSelectionTimeoutMS`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "millis")]
    pub server_selection_timeout: Option<Duration>,
    /// `maxPoolSize` (accepted; each server has one socket here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pool_size: Option<u32>,
    /// `minPoolSize` (accepted; each server has one socket here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_pool_size: Option<u32>,
    /// `maxConnecting` (accepted; each server has one socket here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connecting: Option<u32>,
    /// `maxIdleTimeMS` (accepted; each server has one socket here).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "millis")]
    pub max_idle_time: Option<Duration>,
    /// `connectTimeoutMS`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "millis")]
    pub connect_timeout: Option<Duration>,
    /// `retryReads`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_reads: Option<bool>,
    /// `retryWrites`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_writes: Option<bool>,
    /// `serverMonitoringMode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_monitoring_mode: Option<ServerMonitoringMode>,
    /// `directConnection`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_connection: Option<bool>,
    /// The user, password and `authSource`, `authMechanism`,
    /// `authMechanismProperties`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "write_credential"
    )]
    pub credential: Option<Credential>,
    /// The database in the path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_database: Option<String>,
    /// `loadBalanced`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balanced: Option<bool>,
    /// `socketTimeoutMS` (honoured here: see
    /// [`ClientOptions::socket_timeout`]).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "millis")]
    pub socket_timeout: Option<Duration>,
    /// `readPreference`, `readPreferenceTags` and `maxStalenessSeconds`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_preference: Option<ReadPreference>,
    /// How to encode UUIDs. No connection string sets it here
    /// (`uuidRepresentation` is warned about as unknown, as this driver
    /// encodes `bson::Uuid` values only as the standard subtype 4); one set
    /// in code is refused by [`ClientOptions::parse`].
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "write_uuid_representation"
    )]
    pub uuid_representation: Option<UuidRepresentation>,
    /// `srvMaxHosts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srv_max_hosts: Option<u32>,
    /// `srvServiceName`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub srv_service_name: Option<String>,
    /// `maxAdaptiveRetries`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_adaptive_retries: Option<u32>,
    /// `enableOverloadRetargeting`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_overload_retargeting: Option<bool>,
    /// `waitQueueTimeoutMS` (accepted; nothing waits for a socket here).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "millis")]
    wait_queue_timeout: Option<Duration>,
    /// The options the official type has no field for (`compressors`,
    /// `timeoutMS`, the proxy, ...), as the parser left them.
    #[serde(skip)]
    rest: Box<ClientOptions>,
    /// What the parser warned about (an ignored unknown option or invalid
    /// value), logged when the options are made.
    #[serde(skip)]
    warnings: Vec<String>,
}

/// TLS as the URI options that set it (the official `Tls::serialize`), the
/// key file's password left out.
fn write_tls<S: serde::Serializer>(
    tls: &Option<Tls>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct TlsFields<'a> {
        tls: bool,
        tlscafile: Option<std::borrow::Cow<'a, str>>,
        tlscertificatekeyfile: Option<std::borrow::Cow<'a, str>>,
        tlsallowinvalidcertificates: Option<bool>,
    }
    match tls {
        Some(Tls::Enabled(options)) => serde::Serialize::serialize(
            &TlsFields {
                tls: true,
                tlscafile: options.ca_file_path.as_ref().map(|p| p.to_string_lossy()),
                tlscertificatekeyfile: options
                    .cert_key_file_path
                    .as_ref()
                    .map(|p| p.to_string_lossy()),
                tlsallowinvalidcertificates: options.allow_invalid_certificates,
            },
            serializer,
        ),
        _ => serializer.serialize_none(),
    }
}

/// A credential as its non-secret URI options (the official
/// `Credential::serialize` without `authmechanismproperties`, which may
/// hold a session token); never the user's password.
fn write_credential<S: serde::Serializer>(
    credential: &Option<Credential>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct CredentialFields<'a> {
        authsource: Option<&'a String>,
        authmechanism: Option<&'static str>,
    }
    serde::Serialize::serialize(
        &credential.as_ref().map(|c| CredentialFields {
            authsource: c.source.as_ref(),
            authmechanism: c.mechanism_name(),
        }),
        serializer,
    )
}

/// A UUID representation as its variant's name (`Standard`, `JavaLegacy`,
/// ...), as the official crate writes it.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn write_uuid_representation<S: serde::Serializer>(
    representation: &Option<UuidRepresentation>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    match representation {
        Some(representation) => serializer.collect_str(&format_args!("{representation:?}")),
        None => serializer.serialize_none(),
    }
}

impl<'de> serde::Deserialize<'de> for ConnectionString {
    /// From the connection string's text, as [`ConnectionString::parse`]
    /// reads it (its errors never quote a password).
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        ConnectionString::parse(text).map_err(serde::de::Error::custom)
    }
}

impl ConnectionString {
    /// Parses a connection string; an invalid one is an error that names
    /// the problem (never quoting a password). No DNS look-up happens: a
    /// `mongodb+srv` host stays a [`HostInfo::DnsRecord`].
    pub fn parse(s: impl AsRef<str>) -> Result<Self> {
        let (options, warnings) = crate::proto::uri::parse_unvalidated(s.as_ref())?;
        options.validate()?;
        Ok(ConnectionString::from_options(options, warnings))
    }

    /// `waitQueueTimeoutMS`.
    pub fn wait_queue_timeout(&self) -> Option<Duration> {
        self.wait_queue_timeout
    }

    /// `tlsInsecure`.
    pub fn tls_insecure(&self) -> Option<bool> {
        match &self.tls {
            Some(Tls::Enabled(tls)) => tls.insecure,
            _ => None,
        }
    }

    /// The parser's warnings, to be logged.
    pub(crate) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Moves the fields the official type names out of `options`.
    fn from_options(mut o: ClientOptions, warnings: Vec<String>) -> Self {
        let host_info = match o.srv_host.take() {
            Some(host) => HostInfo::DnsRecord(host),
            None => HostInfo::HostIdentifiers(std::mem::take(&mut o.hosts)),
        };
        let read_preference = match o.selection_criteria.take() {
            Some(SelectionCriteria::ReadPreference(read_preference)) => Some(read_preference),
            // A URI names only read preferences; a predicate stays put.
            other => {
                o.selection_criteria = other;
                None
            }
        };
        ConnectionString {
            host_info,
            app_name: o.app_name.take(),
            tls: o.tls.take(),
            heartbeat_frequency: o.heartbeat_freq.take(),
            local_threshold: o.local_threshold.take(),
            read_concern: o.read_concern.take(),
            replica_set: o.repl_set_name.take(),
            write_concern: o.write_concern.take(),
            server_selection_timeout: o.server_selection_timeout.take(),
            max_pool_size: o.max_pool_size.take(),
            min_pool_size: o.min_pool_size.take(),
            max_connecting: o.max_connecting.take(),
            max_idle_time: o.max_idle_time.take(),
            connect_timeout: o.connect_timeout.take(),
            retry_reads: o.retry_reads.take(),
            retry_writes: o.retry_writes.take(),
            server_monitoring_mode: o.server_monitoring_mode.take(),
            direct_connection: o.direct_connection.take(),
            credential: o.credential.take(),
            default_database: o.default_database.take(),
            load_balanced: o.load_balanced.take(),
            socket_timeout: o.socket_timeout.take(),
            read_preference,
            uuid_representation: None,
            srv_max_hosts: o.srv_max_hosts.take(),
            srv_service_name: o.srv_service_name.take(),
            max_adaptive_retries: o.max_adaptive_retries.take(),
            enable_overload_retargeting: o.enable_overload_retargeting.take(),
            wait_queue_timeout: o.wait_queue_timeout.take(),
            rest: Box::new(o),
            warnings,
        }
    }

    /// The client options these fields and the rest make, not yet
    /// validated; a UUID representation is refused (see the field).
    pub(crate) fn into_options(self) -> Result<ClientOptions> {
        if let Some(representation) = self.uuid_representation {
            return Err(Error::invalid_argument(format!(
                "uuid_representation ({representation:?}) is not supported: this driver \
                 encodes UUIDs only as the standard binary subtype 4"
            )));
        }
        let mut o = *self.rest;
        match self.host_info {
            HostInfo::HostIdentifiers(hosts) => o.hosts = hosts,
            HostInfo::DnsRecord(host) => o.srv_host = Some(host),
        }
        if let Some(read_preference) = self.read_preference {
            o.selection_criteria = Some(SelectionCriteria::ReadPreference(read_preference));
        }
        o.app_name = self.app_name;
        o.tls = self.tls;
        o.heartbeat_freq = self.heartbeat_frequency;
        o.local_threshold = self.local_threshold;
        o.read_concern = self.read_concern;
        o.repl_set_name = self.replica_set;
        o.write_concern = self.write_concern;
        o.server_selection_timeout = self.server_selection_timeout;
        o.max_pool_size = self.max_pool_size;
        o.min_pool_size = self.min_pool_size;
        o.max_connecting = self.max_connecting;
        o.max_idle_time = self.max_idle_time;
        o.connect_timeout = self.connect_timeout;
        o.retry_reads = self.retry_reads;
        o.retry_writes = self.retry_writes;
        o.server_monitoring_mode = self.server_monitoring_mode;
        o.direct_connection = self.direct_connection;
        o.credential = self.credential;
        o.default_database = self.default_database;
        o.load_balanced = self.load_balanced;
        o.socket_timeout = self.socket_timeout;
        o.srv_max_hosts = self.srv_max_hosts;
        o.srv_service_name = self.srv_service_name;
        o.max_adaptive_retries = self.max_adaptive_retries;
        o.enable_overload_retargeting = self.enable_overload_retargeting;
        o.wait_queue_timeout = self.wait_queue_timeout;
        Ok(o)
    }
}

impl std::str::FromStr for ConnectionString {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        ConnectionString::parse(s)
    }
}

impl TryFrom<&str> for ConnectionString {
    type Error = Error;

    fn try_from(s: &str) -> Result<Self> {
        ConnectionString::parse(s)
    }
}

impl TryFrom<&String> for ConnectionString {
    type Error = Error;

    fn try_from(s: &String) -> Result<Self> {
        ConnectionString::parse(s)
    }
}

impl TryFrom<String> for ConnectionString {
    type Error = Error;

    fn try_from(s: String) -> Result<Self> {
        ConnectionString::parse(s)
    }
}

/// Characters a connection string's user name, database or socket path
/// carries as they are; every other byte is percent-encoded.
fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if is_unreserved(byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The `name=value` pairs of a connection string, in the order they are
/// added.
#[derive(Default)]
struct Query(Vec<(&'static str, String)>);

impl Query {
    fn add(&mut self, name: &'static str, value: Option<impl ToString>) {
        if let Some(value) = value {
            self.0.push((name, value.to_string()));
        }
    }

    fn millis(&mut self, name: &'static str, value: Option<Duration>) {
        self.add(name, value.map(|d| d.as_millis()));
    }
}

impl ConnectionString {
    fn host_part(&self) -> String {
        match &self.host_info {
            HostInfo::DnsRecord(host) => host.clone(),
            HostInfo::HostIdentifiers(hosts) => hosts
                .iter()
                .map(|host| match host {
                    ServerAddress::Unix { path } => percent_encode(&path.to_string_lossy()),
                    tcp => tcp.to_string(),
                })
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    fn add_tls(&self, q: &mut Query) {
        match &self.tls {
            Some(Tls::Disabled) => q.add("tls", Some(false)),
            Some(Tls::Enabled(tls)) => {
                q.add("tls", Some(true));
                let path = |p: &Option<std::path::PathBuf>| {
                    p.as_ref().map(|p| percent_encode(&p.to_string_lossy()))
                };
                q.add("tlsCAFile", path(&tls.ca_file_path));
                q.add("tlsCertificateKeyFile", path(&tls.cert_key_file_path));
                q.add(
                    "tlsAllowInvalidCertificates",
                    tls.allow_invalid_certificates,
                );
                q.add("tlsAllowInvalidHostnames", tls.allow_invalid_hostnames);
                q.add("tlsInsecure", tls.insecure);
                q.add(
                    "tlsDisableOCSPEndpointCheck",
                    tls.disable_ocsp_endpoint_check,
                );
                q.add(
                    "tlsDisableCertificateRevocationCheck",
                    tls.disable_certificate_revocation_check,
                );
            }
            None => {}
        }
    }

    fn add_concerns(&self, q: &mut Query) {
        if let Some(write_concern) = &self.write_concern {
            q.add(
                "w",
                write_concern.w.as_ref().map(|w| match w {
                    Acknowledgment::Nodes(n) => n.to_string(),
                    Acknowledgment::Majority => "majority".to_string(),
                    Acknowledgment::Custom(tag) => percent_encode(tag),
                }),
            );
            q.millis("wTimeoutMS", write_concern.w_timeout);
            q.add("journal", write_concern.journal);
        }
        q.add(
            "readConcernLevel",
            self.read_concern
                .as_ref()
                .map(|r| r.level.as_str().to_string()),
        );
        if let Some(read_preference) = &self.read_preference {
            q.add("readPreference", Some(read_preference.mode().as_str()));
            for tags in read_preference.tag_sets() {
                let pairs: Vec<String> = tags
                    .iter()
                    .map(|(k, v)| format!("{}:{}", percent_encode(k), percent_encode(v)))
                    .collect();
                q.add("readPreferenceTags", Some(pairs.join(",")));
            }
            q.add(
                "maxStalenessSeconds",
                read_preference.max_staleness().map(|d| d.as_secs()),
            );
        }
    }

    fn query(&self) -> Query {
        let mut q = Query::default();
        q.add("appname", self.app_name.as_deref().map(percent_encode));
        q.add(
            "replicaSet",
            self.replica_set.as_deref().map(percent_encode),
        );
        q.add("directConnection", self.direct_connection);
        q.add("loadBalanced", self.load_balanced);
        self.add_tls(&mut q);
        q.millis("connectTimeoutMS", self.connect_timeout);
        q.millis("socketTimeoutMS", self.socket_timeout);
        q.millis("serverSelectionTimeoutMS", self.server_selection_timeout);
        q.millis("heartbeatFrequencyMS", self.heartbeat_frequency);
        q.millis("localThresholdMS", self.local_threshold);
        q.add("maxPoolSize", self.max_pool_size);
        q.add("minPoolSize", self.min_pool_size);
        q.add("maxConnecting", self.max_connecting);
        q.millis("maxIdleTimeMS", self.max_idle_time);
        q.millis("waitQueueTimeoutMS", self.wait_queue_timeout);
        self.add_concerns(&mut q);
        q.add("retryReads", self.retry_reads);
        q.add("retryWrites", self.retry_writes);
        q.add(
            "serverMonitoringMode",
            self.server_monitoring_mode.map(|m| m.as_str()),
        );
        if let Some(credential) = &self.credential {
            q.add(
                "authSource",
                credential.source.as_deref().map(percent_encode),
            );
            q.add(
                "authMechanism",
                credential.mechanism.as_ref().map(|m| m.as_str()),
            );
        }
        q.add("srvMaxHosts", self.srv_max_hosts);
        q.add("srvServiceName", self.srv_service_name.as_deref());
        q.add("maxAdaptiveRetries", self.max_adaptive_retries);
        q.add(
            "enableOverloadRetargeting",
            self.enable_overload_retargeting,
        );
        self.add_rest(&mut q);
        q
    }

    /// The options only the private part holds.
    fn add_rest(&self, q: &mut Query) {
        let rest = &self.rest;
        q.add(
            "compressors",
            rest.compressors.as_ref().map(|c| c.join(",")),
        );
        q.add("zlibCompressionLevel", rest.zlib_compression_level);
        q.millis("timeoutMS", rest.timeout);
        q.add("serverSelectionTryOnce", rest.server_selection_try_once);
        q.millis("socketCheckIntervalMS", rest.socket_check_interval);
        if let Some(proxy) = &rest.proxy {
            q.add("proxyHost", proxy.host.as_deref().map(percent_encode));
            q.add("proxyPort", proxy.port);
            q.add(
                "proxyUsername",
                proxy.username.as_deref().map(percent_encode),
            );
        }
    }
}

impl fmt::Display for ConnectionString {
    /// The connection string these options make, secrets left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let srv = matches!(self.host_info, HostInfo::DnsRecord(_));
        f.write_str(if srv { "mongodb+srv://" } else { "mongodb://" })?;
        if let Some(user) = self.credential.as_ref().and_then(|c| c.username.as_ref()) {
            write!(f, "{}@", percent_encode(user))?;
        }
        f.write_str(&self.host_part())?;
        f.write_str("/")?;
        if let Some(database) = &self.default_database {
            f.write_str(&percent_encode(database))?;
        }
        let pairs: Vec<String> = self
            .query()
            .0
            .into_iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        if !pairs.is_empty() {
            write!(f, "?{}", pairs.join("&"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parsed_fields_are_the_strings_options() {
        let parsed = ConnectionString::parse(
            "mongodb://ada:secret@a.example.com,b.example.com:27018/shop?replicaSet=rs0\
             &appname=app&w=majority&readPreference=secondary&maxStalenessSeconds=120\
             &authSource=admin&authMechanism=SCRAM-SHA-256&heartbeatFrequencyMS=5000\
             &timeoutMS=250&compressors=zlib",
        )
        .unwrap();
        assert_eq!(
            parsed.host_info,
            HostInfo::HostIdentifiers(vec![
                ServerAddress::parse("a.example.com").unwrap(),
                ServerAddress::tcp("b.example.com", 27018),
            ])
        );
        assert_eq!(parsed.replica_set.as_deref(), Some("rs0"));
        assert_eq!(parsed.app_name.as_deref(), Some("app"));
        assert_eq!(parsed.default_database.as_deref(), Some("shop"));
        assert_eq!(parsed.heartbeat_frequency, Some(Duration::from_secs(5)));
        let credential = parsed.credential.as_ref().unwrap();
        assert_eq!(credential.username.as_deref(), Some("ada"));
        assert_eq!(
            credential.mechanism,
            Some(crate::options::AuthMechanism::ScramSha256)
        );
        assert_eq!(
            parsed.read_preference.as_ref().unwrap().max_staleness(),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parsed.write_concern.as_ref().unwrap().w,
            Some(Acknowledgment::Majority)
        );

        // Back into options: the private part (timeoutMS, compressors) too.
        let options = ClientOptions::parse(parsed.clone()).run().unwrap();
        assert_eq!(options.repl_set_name.as_deref(), Some("rs0"));
        assert_eq!(options.timeout, Some(Duration::from_millis(250)));
        assert_eq!(options.compressors, Some(vec!["zlib".to_string()]));
        assert_eq!(options.hosts.len(), 2);
        // Printed and parsed again (without the user, whose password the
        // printed string leaves out), the same options come back.
        let mut without_user = parsed.clone();
        without_user.credential = None;
        let direct = ClientOptions::parse(without_user.to_string())
            .run()
            .unwrap();
        assert_eq!(direct.repl_set_name, options.repl_set_name);
        assert_eq!(direct.timeout, options.timeout);
    }

    #[test]
    fn a_changed_field_reaches_the_options() {
        let mut parsed = ConnectionString::parse("mongodb+srv://cluster.example.com/").unwrap();
        assert_eq!(
            parsed.host_info,
            HostInfo::DnsRecord("cluster.example.com".into())
        );
        parsed.app_name = Some("changed".into());
        parsed.retry_writes = Some(false);
        let options = ClientOptions::parse(parsed).run().unwrap();
        assert_eq!(options.app_name.as_deref(), Some("changed"));
        assert_eq!(options.retry_writes, Some(false));
        assert_eq!(options.srv_host.as_deref(), Some("cluster.example.com"));
    }

    #[test]
    fn it_prints_as_a_connection_string_without_secrets() {
        let parsed = ConnectionString::parse(
            "mongodb://ada:s3cret@h:27018/db?tls=true&tlsCertificateKeyFile=%2Ftmp%2Fc.pem\
             &tlsCertificateKeyFilePassword=k3y&authMechanism=MONGODB-AWS\
             &authMechanismProperties=AWS_SESSION_TOKEN:t0ken",
        )
        .unwrap();
        let printed = parsed.to_string();
        assert_eq!(
            printed,
            "mongodb://ada@h:27018/db?tls=true&tlsCertificateKeyFile=%2Ftmp%2Fc.pem\
             &authMechanism=MONGODB-AWS"
        );
        for secret in ["s3cret", "k3y", "t0ken"] {
            assert!(!printed.contains(secret), "{printed}");
        }
    }

    #[test]
    fn invalid_strings_and_a_uuid_representation_are_refused() {
        assert!(ConnectionString::parse("http://h").is_err());
        assert!("mongodb://h/?loadBalanced=true&replicaSet=rs"
            .parse::<ConnectionString>()
            .is_err());
        let mut parsed = ConnectionString::try_from("mongodb://h").unwrap();
        parsed.uuid_representation = Some(UuidRepresentation::JavaLegacy);
        let error = ClientOptions::parse(parsed).run().unwrap_err();
        assert!(error.to_string().contains("uuid_representation"), "{error}");
    }
}
