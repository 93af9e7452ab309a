//! Client options: everything a connection string or code can configure.
//!
//! [`ClientOptions`] is built from a URI by [`ClientOptions::parse`] (the
//! connection-string and URI-options specs' rules) or in code through
//! [`ClientOptions::builder`]. Fields are
//! private; getters expose the effective value (the spec default when unset).

use std::time::Duration;

use bson::Document;

use crate::error::{Error, Result};

mod connection_string;
pub mod oidc;
pub use crate::proto::address::ServerAddress;
pub use crate::proto::change_stream::{
    ChangeStreamOptions, ChangeStreamOptionsBuilder, FullDocumentBeforeChangeType, FullDocumentType,
};
pub use crate::proto::client_bulk::{
    DeleteManyModel, DeleteManyModelBuilder, DeleteOneModel, DeleteOneModelBuilder, InsertOneModel,
    InsertOneModelBuilder, ReplaceOneModel, ReplaceOneModelBuilder, UpdateManyModel,
    UpdateManyModelBuilder, UpdateOneModel, UpdateOneModelBuilder, WriteModel,
};
pub use crate::proto::coll_options::*;
pub use crate::proto::collation::{
    Collation, CollationAlternate, CollationCaseFirst, CollationMaxVariable, CollationStrength,
};
pub use crate::proto::concern::{Acknowledgment, ReadConcern, ReadConcernLevel, WriteConcern};
pub use crate::proto::cursor_timeout::TimeoutMode;
pub use crate::proto::gridfs::{
    GridFsBucketOptions, GridFsBucketOptionsBuilder, GridFsDownloadByNameOptions,
    GridFsDownloadByNameOptionsBuilder, GridFsFindOneOptions, GridFsFindOneOptionsBuilder,
    GridFsFindOptions, GridFsFindOptionsBuilder, GridFsUploadOptions, GridFsUploadOptionsBuilder,
};
pub use crate::proto::handshake::{DriverInfo, DriverInfoBuilder};
pub use crate::proto::read_preference::{
    HedgedReadOptions, HedgedReadOptionsBuilder, Predicate, ReadPreference, ReadPreferenceOptions,
    ReadPreferenceOptionsBuilder, SelectionCriteria, TagSet,
};
pub use crate::proto::retry::{RetryMode, RetrySettings, Tokens, TOKEN_BUCKET_CAPACITY};
use crate::proto::sdam::settings::TopologySettings;
pub use crate::proto::search_index::{
    CreateSearchIndexOptions, CreateSearchIndexOptionsBuilder, DropSearchIndexOptions,
    DropSearchIndexOptionsBuilder, ListSearchIndexOptions, ListSearchIndexOptionsBuilder,
    SearchIndexModel, SearchIndexModelBuilder, SearchIndexType, UpdateSearchIndexOptions,
    UpdateSearchIndexOptionsBuilder,
};
pub use crate::proto::session::transaction::TransactionOptions;
pub use crate::proto::session::SessionOptions;
pub use crate::proto::write_model::{CollectionWriteModel, UpdateModifications};
pub use connection_string::{ConnectionString, HostInfo};

/// The single-threaded default of `heartbeatFrequencyMS` (server-monitoring spec).
pub const DEFAULT_HEARTBEAT_FREQUENCY: Duration = Duration::from_secs(60);
/// `minHeartbeatFrequencyMS`: fixed by the spec, not configurable.
pub const MIN_HEARTBEAT_FREQUENCY: Duration = Duration::from_millis(500);
/// `cooldownMS`: fixed by the spec, not configurable.
pub const COOLDOWN: Duration = Duration::from_millis(5000);
/// The default of `socketCheckIntervalMS`.
pub const DEFAULT_SOCKET_CHECK_INTERVAL: Duration = Duration::from_millis(5000);
/// The default of `serverSelectionTimeoutMS`.
pub const DEFAULT_SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// The default of `localThresholdMS`.
pub const DEFAULT_LOCAL_THRESHOLD: Duration = Duration::from_millis(15);
/// The default of `connectTimeoutMS`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default of `socketTimeoutMS`, as libmongoc's: without `timeoutMS`,
/// a server that stops answering fails the operation after this long
/// instead of holding a short-lived process forever. `socketTimeoutMS=0`
/// asks for no limit.
pub const DEFAULT_SOCKET_TIMEOUT: Duration = Duration::from_secs(300);
/// The default of `maxAdaptiveRetries`: how many times an operation is retried
/// after overload errors (client-backpressure spec, `MAX_RETRIES`).
pub const DEFAULT_MAX_ADAPTIVE_RETRIES: u32 = 2;
/// The default of `srvServiceName`.
pub const DEFAULT_SRV_SERVICE_NAME: &str = "mongodb";
/// The longest `appname` the handshake spec allows, in bytes.
pub const MAX_APP_NAME_BYTES: usize = 128;

/// Credentials for authentication.
///
/// Read with serde (as the official crate's, its fields' snake-case names),
/// never written: a written credential would carry its password.
#[derive(Clone, Default, PartialEq, typed_builder::TypedBuilder, serde::Deserialize)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct Credential {
    /// The user name.
    pub username: Option<String>,
    /// The password.
    pub password: Option<String>,
    /// `authSource`: the database that holds the user.
    pub source: Option<String>,
    /// `authMechanism`; `None` negotiates SCRAM with the server.
    pub mechanism: Option<AuthMechanism>,
    /// `authMechanismProperties`.
    pub mechanism_properties: Option<Document>,
    /// MONGODB-OIDC: the callback that returns an access token, for
    /// identity providers the `ENVIRONMENT` property does not cover.
    #[serde(skip)]
    pub oidc_callback: oidc::Callback,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password, even in debug output.
        f.debug_struct("Credential")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("source", &self.source)
            .field("mechanism", &self.mechanism)
            .field(
                "mechanism_properties",
                &self.mechanism_properties.as_ref().map(property_names),
            )
            .field("oidc_callback", &self.oidc_callback)
            .finish()
    }
}

impl Credential {
    /// The mechanism's name as the URI spells it (`SCRAM-SHA-256`, ...).
    pub(crate) fn mechanism_name(&self) -> Option<&'static str> {
        self.mechanism.as_ref().map(AuthMechanism::as_str)
    }
}

/// An authentication mechanism (`authMechanism`), as the official driver's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum AuthMechanism {
    /// MONGODB-CR: removed from MongoDB; a client given it refuses to start.
    MongoDbCr,
    /// SCRAM-SHA-1 (RFC 5802).
    ScramSha1,
    /// SCRAM-SHA-256 (RFC 7677).
    ScramSha256,
    /// MONGODB-X509: the TLS client certificate's subject is the user.
    MongoDbX509,
    /// GSSAPI (Kerberos): parsed and checked; a client given it refuses to
    /// start, as this driver has no Kerberos support.
    Gssapi,
    /// SASL PLAIN (LDAP).
    Plain,
    /// MONGODB-AWS: AWS IAM credentials.
    MongoDbAws,
    /// MONGODB-OIDC: an OpenID Connect access token.
    #[serde(alias = "MONGODB-OIDC")]
    MongoDbOidc,
}

impl AuthMechanism {
    /// The name as the URI and the server spell it (`SCRAM-SHA-256`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            AuthMechanism::MongoDbCr => "MONGODB-CR",
            AuthMechanism::ScramSha1 => "SCRAM-SHA-1",
            AuthMechanism::ScramSha256 => "SCRAM-SHA-256",
            AuthMechanism::MongoDbX509 => "MONGODB-X509",
            AuthMechanism::Gssapi => "GSSAPI",
            AuthMechanism::Plain => "PLAIN",
            AuthMechanism::MongoDbAws => "MONGODB-AWS",
            AuthMechanism::MongoDbOidc => "MONGODB-OIDC",
        }
    }

    /// Checks `credential` against this mechanism's rules (what it needs
    /// and refuses: user name, password, source, properties), as a client
    /// given the credential with this mechanism would.
    pub fn validate_credential(&self, credential: &Credential) -> Result<()> {
        let mut with_mechanism = credential.clone();
        with_mechanism.mechanism = Some(self.clone());
        validate_credential(&with_mechanism)
    }
}

impl std::str::FromStr for AuthMechanism {
    type Err = Error;

    /// The URI's names, ASCII case ignored (as the connection-string spec
    /// reads them); any other is an error that lists them.
    fn from_str(name: &str) -> Result<Self> {
        const ALL: [AuthMechanism; 8] = [
            AuthMechanism::MongoDbCr,
            AuthMechanism::ScramSha1,
            AuthMechanism::ScramSha256,
            AuthMechanism::MongoDbX509,
            AuthMechanism::Gssapi,
            AuthMechanism::Plain,
            AuthMechanism::MongoDbAws,
            AuthMechanism::MongoDbOidc,
        ];
        ALL.into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "authMechanism {name:?} is not supported; expected one of {}",
                    AUTH_MECHANISMS.join(", ")
                ))
            })
    }
}

/// The names of `authMechanismProperties` with their values hidden: a value
/// may be a secret (`AWS_SESSION_TOKEN`, an OIDC token).
fn property_names(properties: &Document) -> String {
    let names: Vec<String> = properties
        .keys()
        .map(|k| format!("{k:?}: <redacted>"))
        .collect();
    format!("{{{}}}", names.join(", "))
}

/// The Stable API version a [`ServerApi`] declares (`apiVersion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum ServerApiVersion {
    /// Version 1, the only one MongoDB has.
    #[serde(rename = "1")]
    V1,
}

impl std::str::FromStr for ServerApiVersion {
    type Err = Error;

    /// `"1"`; any other version is an error that names it.
    fn from_str(version: &str) -> Result<Self> {
        match version {
            "1" => Ok(ServerApiVersion::V1),
            _ => Err(Error::invalid_argument(format!(
                "serverApi version {version:?} is unknown: the only Stable API version is \"1\""
            ))),
        }
    }
}

impl std::fmt::Display for ServerApiVersion {
    /// As the server reads it in `apiVersion`: `1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerApiVersion::V1 => f.write_str("1"),
        }
    }
}

impl<'de> serde::Deserialize<'de> for ServerApiVersion {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let version = String::deserialize(deserializer)?;
        version.parse().map_err(serde::de::Error::custom)
    }
}

/// The Stable API (`serverApi`) settings, sent on every command as
/// `apiVersion`, `apiStrict` and `apiDeprecationErrors`.
///
/// ```
/// use mongo_inline::options::{ServerApi, ServerApiVersion};
/// let api = ServerApi::builder().version(ServerApiVersion::V1).strict(true).build();
/// assert_eq!(api.strict, Some(true));
/// ```
#[derive(
    Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, typed_builder::TypedBuilder,
)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct ServerApi {
    /// The API version (`apiVersion`).
    #[serde(rename = "apiVersion")]
    #[builder(!default)]
    pub version: ServerApiVersion,
    /// `apiStrict`: the server rejects commands outside the Stable API.
    #[serde(rename = "apiStrict", skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// `apiDeprecationErrors`: the server rejects deprecated commands.
    #[serde(
        rename = "apiDeprecationErrors",
        skip_serializing_if = "Option::is_none"
    )]
    pub deprecation_errors: Option<bool>,
}

/// The DNS name servers a client asks instead of the system's
/// (`/etc/resolv.conf`), given to
/// [`ParseConnectionString::resolver_config`](crate::action::ParseConnectionString::resolver_config).
/// Each is asked over UDP, and over TCP when an answer is truncated; no
/// search list and no `/etc/hosts` apply.
///
/// ```
/// use mongo_inline::options::{ClientOptions, ResolverConfig};
/// # fn main() -> mongo_inline::Result<()> {
/// let options = ClientOptions::parse("mongodb+srv://cluster0.example.com/")
///     .resolver_config(ResolverConfig::cloudflare())
///     .run()?;
/// assert_eq!(options.name_servers.unwrap()[0].to_string(), "1.1.1.1:53");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolverConfig {
    name_servers: Vec<std::net::SocketAddr>,
}

impl ResolverConfig {
    /// Cloudflare's public resolvers: 1.1.1.1, 1.0.0.1, 2606:4700:4700::1111
    /// and 2606:4700:4700::1001.
    pub fn cloudflare() -> Self {
        Self::on_port_53(&[
            "1.1.1.1",
            "1.0.0.1",
            "2606:4700:4700::1111",
            "2606:4700:4700::1001",
        ])
    }

    /// Google's public resolvers: 8.8.8.8, 8.8.4.4, 2001:4860:4860::8888 and
    /// 2001:4860:4860::8844.
    pub fn google() -> Self {
        Self::on_port_53(&[
            "8.8.8.8",
            "8.8.4.4",
            "2001:4860:4860::8888",
            "2001:4860:4860::8844",
        ])
    }

    /// Quad9's public resolvers: 9.9.9.9, 149.112.112.112, 2620:fe::fe and
    /// 2620:fe::9.
    pub fn quad9() -> Self {
        Self::on_port_53(&["9.9.9.9", "149.112.112.112", "2620:fe::fe", "2620:fe::9"])
    }

    /// These name servers, each on its own port.
    pub fn with_name_servers(name_servers: impl IntoIterator<Item = std::net::SocketAddr>) -> Self {
        ResolverConfig {
            name_servers: name_servers.into_iter().collect(),
        }
    }

    /// The name servers, in the order they are asked.
    pub fn name_servers(&self) -> &[std::net::SocketAddr] {
        &self.name_servers
    }

    fn on_port_53(addresses: &[&str]) -> Self {
        let name_servers = addresses
            .iter()
            .filter_map(|ip| ip.parse::<std::net::IpAddr>().ok())
            .map(|ip| std::net::SocketAddr::new(ip, 53))
            .collect();
        ResolverConfig { name_servers }
    }
}

/// TLS settings (the official driver's `TlsOptions`, and the URI's other
/// `tls*` options), carried by [`Tls::Enabled`].
#[derive(Clone, Default, PartialEq, typed_builder::TypedBuilder, serde::Deserialize)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct TlsOptions {
    /// `tlsAllowInvalidCertificates`.
    pub allow_invalid_certificates: Option<bool>,
    /// `tlsAllowInvalidHostnames`.
    pub allow_invalid_hostnames: Option<bool>,
    /// `tlsCAFile`: the certificate authorities to trust.
    pub ca_file_path: Option<std::path::PathBuf>,
    /// `tlsCertificateKeyFile`: the client's certificate and key.
    pub cert_key_file_path: Option<std::path::PathBuf>,
    /// `tlsCertificateKeyFilePassword`: the password of an encrypted key.
    pub tls_certificate_key_file_password: Option<Vec<u8>>,
    /// `tlsInsecure`.
    pub insecure: Option<bool>,
    /// `tlsDisableOCSPEndpointCheck`.
    pub disable_ocsp_endpoint_check: Option<bool>,
    /// `tlsDisableCertificateRevocationCheck`.
    pub disable_certificate_revocation_check: Option<bool>,
    /// Trust the system's certificate authorities (no URI option; off by
    /// default, when the webpki roots are trusted): the platform's store,
    /// or the files `SSL_CERT_FILE` and `SSL_CERT_DIR` name when set.
    /// Together with `tlsCAFile`, both are trusted.
    pub system_roots: Option<bool>,
}

/// SOCKS5 proxy settings (`proxyHost`, `proxyPort`, `proxyUsername`, `proxyPassword`).
///
/// Parsed and validated so that URIs written for other drivers are understood;
/// connecting through a proxy is not implemented yet.
#[derive(Clone, Default, PartialEq, serde::Deserialize)]
#[non_exhaustive]
pub struct ProxyOptions {
    /// `proxyHost`: the proxy's IPv4/IPv6 address or host name.
    pub host: Option<String>,
    /// `proxyPort` (default 1080 when a host is set).
    pub port: Option<u16>,
    /// `proxyUsername`.
    pub username: Option<String>,
    /// `proxyPassword`.
    pub password: Option<String>,
}

impl std::fmt::Debug for ProxyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// `serverMonitoringMode`: which monitoring protocol a multi-threaded driver
/// uses. A scan-on-demand driver always polls; the option is kept so URIs
/// that name it parse and so the handshake can report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum ServerMonitoringMode {
    /// Let the driver decide (the spec default).
    #[default]
    Auto,
    /// The streaming protocol.
    Stream,
    /// The polling protocol.
    Poll,
}

impl ServerMonitoringMode {
    /// The name as the URI spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerMonitoringMode::Auto => "auto",
            ServerMonitoringMode::Stream => "stream",
            ServerMonitoringMode::Poll => "poll",
        }
    }

    /// Parses `auto`, `stream` or `poll` (ASCII case ignored).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "auto" => Some(ServerMonitoringMode::Auto),
            "stream" => Some(ServerMonitoringMode::Stream),
            "poll" => Some(ServerMonitoringMode::Poll),
            _ => None,
        }
    }
}

impl TlsOptions {
    /// The URI name of the first option set, if any.
    pub(crate) fn first_given(&self) -> Option<&'static str> {
        [
            (
                "tlsAllowInvalidCertificates",
                self.allow_invalid_certificates.is_some(),
            ),
            (
                "tlsAllowInvalidHostnames",
                self.allow_invalid_hostnames.is_some(),
            ),
            ("tlsCAFile", self.ca_file_path.is_some()),
            ("tlsCertificateKeyFile", self.cert_key_file_path.is_some()),
            (
                "tlsCertificateKeyFilePassword",
                self.tls_certificate_key_file_password.is_some(),
            ),
            ("tlsInsecure", self.insecure.is_some()),
            (
                "tlsDisableOCSPEndpointCheck",
                self.disable_ocsp_endpoint_check.is_some(),
            ),
            (
                "tlsDisableCertificateRevocationCheck",
                self.disable_certificate_revocation_check.is_some(),
            ),
            ("system_roots", self.system_roots.is_some()),
        ]
        .into_iter()
        .find_map(|(name, given)| given.then_some(name))
    }
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key file's password, even in debug output.
        let password = self
            .tls_certificate_key_file_password
            .as_ref()
            .map(|_| "<redacted>");
        f.debug_struct("TlsOptions")
            .field(
                "allow_invalid_certificates",
                &self.allow_invalid_certificates,
            )
            .field("allow_invalid_hostnames", &self.allow_invalid_hostnames)
            .field("ca_file_path", &self.ca_file_path)
            .field("cert_key_file_path", &self.cert_key_file_path)
            .field("tls_certificate_key_file_password", &password)
            .field("insecure", &self.insecure)
            .field(
                "disable_ocsp_endpoint_check",
                &self.disable_ocsp_endpoint_check,
            )
            .field(
                "disable_certificate_revocation_check",
                &self.disable_certificate_revocation_check,
            )
            .field("system_roots", &self.system_roots)
            .finish()
    }
}

/// Everything that configures a [`crate::Client`], as the official driver's
/// `ClientOptions`: public fields with its names, filled by
/// [`ClientOptions::parse`] from a connection string or set in code (a field
/// at a time, or through [`ClientOptions::builder`]). `None` takes the
/// spec's default, which the getters of the same names report.
///
/// Options the official driver does not have are additional fields
/// (`socket_timeout`, `timeout`, `server_selection_try_once`,
/// `socket_check_interval`, ...). The connection-pool options
/// (`max_pool_size`, `min_pool_size`, `max_idle_time`, `max_connecting`,
/// `wait_queue_timeout`) are accepted and range-checked, so that settings
/// written for a pooled driver keep working, but mean nothing here: each
/// server has one socket, which never waits for another operation because
/// a client runs one operation at a time.
#[derive(Clone, Debug, Default, PartialEq, typed_builder::TypedBuilder, serde::Deserialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClientOptions {
    /// The seed list. Empty in options built in code when no host was
    /// given; [`crate::Client::with_options`] then connects to
    /// `localhost:27017`, the official builder's default.
    #[serde(default)]
    pub hosts: Vec<ServerAddress>,
    /// Tests only: where cloud authentication looks for its secrets
    /// ([`crate::unversioned::set_cloud_environment`]).
    #[builder(setter(skip))]
    #[serde(skip)]
    pub(crate) cloud: Option<std::sync::Arc<crate::unversioned::CloudEnvironment>>,
    /// Tests only: how far the client's clock runs ahead of the system's
    /// ([`crate::unversioned::set_clock_skew`]).
    #[builder(setter(skip))]
    #[serde(skip)]
    pub(crate) clock_skew: Option<crate::unversioned::ClockSkew>,
    /// Tests only: a lowered minHeartbeatFrequencyMS
    /// ([`crate::unversioned::set_min_heartbeat_frequency`]).
    #[builder(setter(skip))]
    #[serde(skip)]
    pub(crate) min_heartbeat_frequency: Option<Duration>,
    /// The host of a `mongodb+srv` URI, before the SRV look-up.
    #[builder(setter(skip))]
    #[serde(skip)]
    pub(crate) srv_host: Option<String>,
    /// The database named in the URI path.
    pub default_database: Option<String>,
    /// Credentials for authentication.
    pub credential: Option<Credential>,
    /// `appname` (at most 128 bytes), sent in the handshake.
    pub app_name: Option<String>,
    /// `compressors`: the compressors to offer, in order of preference
    /// (`snappy`, `zlib`, `zstd`). The official driver's field is a list of
    /// its `Compressor` enum, present only with its compression features.
    pub compressors: Option<Vec<String>>,
    /// `zlibCompressionLevel` (-1 to 9).
    pub zlib_compression_level: Option<i32>,
    /// `connectTimeoutMS` (default 10 s; zero: no timeout).
    pub connect_timeout: Option<Duration>,
    /// `socketTimeoutMS` (default 300 s; zero: no timeout).
    pub socket_timeout: Option<Duration>,
    /// `serverSelectionTimeoutMS` (default 30 s; positive).
    pub server_selection_timeout: Option<Duration>,
    /// `serverSelectionTryOnce` (default true).
    pub server_selection_try_once: Option<bool>,
    /// `socketCheckIntervalMS` (default 5 s).
    pub socket_check_interval: Option<Duration>,
    /// `heartbeatFrequencyMS`: how long a server description stays fresh
    /// before an operation rescans (default 60 s; at least 500 ms).
    pub heartbeat_freq: Option<Duration>,
    /// `localThresholdMS` (default 15 ms).
    pub local_threshold: Option<Duration>,
    /// `timeoutMS` (zero: no limit).
    pub timeout: Option<Duration>,
    /// `directConnection`.
    pub direct_connection: Option<bool>,
    /// `replicaSet`: the name of the replica set to connect to.
    pub repl_set_name: Option<String>,
    /// `loadBalanced`.
    #[serde(rename = "loadbalanced")]
    pub load_balanced: Option<bool>,
    /// The default selection criteria of reads: a read preference (from
    /// `readPreference`, `readPreferenceTags`, `maxStalenessSeconds`) or a
    /// predicate.
    pub selection_criteria: Option<SelectionCriteria>,
    /// The default read concern.
    pub read_concern: Option<ReadConcern>,
    /// The default write concern.
    pub write_concern: Option<WriteConcern>,
    /// `retryReads` (default true).
    pub retry_reads: Option<bool>,
    /// `retryWrites` (default true).
    pub retry_writes: Option<bool>,
    /// TLS: on with its settings, or off. `None` is off, except for a
    /// `mongodb+srv` connection string (on).
    pub tls: Option<Tls>,
    /// The Stable API settings.
    pub server_api: Option<ServerApi>,
    /// `srvMaxHosts` (only with a `mongodb+srv` URI).
    pub srv_max_hosts: Option<u32>,
    /// `srvServiceName` (only with a `mongodb+srv` URI).
    pub srv_service_name: Option<String>,
    /// `maxPoolSize`: accepted for compatibility (one socket per server).
    pub max_pool_size: Option<u32>,
    /// `minPoolSize`: accepted for compatibility (one socket per server).
    pub min_pool_size: Option<u32>,
    /// `maxIdleTimeMS`: accepted for compatibility (one socket per server).
    pub max_idle_time: Option<Duration>,
    /// `maxConnecting` (positive): accepted for compatibility.
    pub max_connecting: Option<u32>,
    /// `waitQueueTimeoutMS`: accepted for compatibility (nothing waits for
    /// a socket).
    pub wait_queue_timeout: Option<Duration>,
    /// `serverMonitoringMode` (this driver always polls, inline).
    pub server_monitoring_mode: Option<ServerMonitoringMode>,
    /// `maxAdaptiveRetries`: retries allowed after overload errors.
    pub max_adaptive_retries: Option<u32>,
    /// `enableOverloadRetargeting`: retry overload errors on another server.
    pub enable_overload_retargeting: Option<bool>,
    /// SOCKS5 proxy settings (parsed and validated; connecting through a
    /// proxy is refused when set).
    pub proxy: Option<ProxyOptions>,
    /// The DNS name servers to ask instead of the system's (see
    /// [`ClientOptions::with_name_servers`], or a [`ResolverConfig`] given
    /// to [`ClientOptions::parse`]).
    pub name_servers: Option<Vec<std::net::SocketAddr>>,
    /// A library wrapping the driver, named in the handshake after the
    /// driver (as [`crate::Client::append_metadata`] appends one later).
    pub driver_info: Option<DriverInfo>,
    /// A file in which a process leaves what the next one may reuse: the
    /// SCRAM keys, sealed under the password (no PBKDF2), the certificate
    /// chains that passed verification (no chain check; the handshake
    /// signature is always checked) and DNS answers until their TTL.
    /// Created with mode 0600; a file or directory that others can write,
    /// or that another user owns, is refused. As sensitive as the
    /// connection string and the CA file. Unix only; opt-in.
    pub state_file: Option<std::path::PathBuf>,
    /// Receives every command event ([`crate::event::command`]), inline.
    #[builder(setter(strip_option))]
    #[serde(skip)]
    pub command_event_handler:
        Option<crate::event::EventHandler<crate::event::command::CommandEvent>>,
    /// Receives every SDAM event ([`crate::event::sdam`]), inline.
    #[builder(setter(strip_option))]
    #[serde(skip)]
    pub sdam_event_handler: Option<crate::event::EventHandler<crate::event::sdam::SdamEvent>>,
    /// Refused by [`crate::Client::with_options`]: this driver has no
    /// connection pool, so no CMAP event would ever reach it (see
    /// [`crate::event::cmap`]).
    #[builder(setter(strip_option))]
    #[serde(skip)]
    pub cmap_event_handler: Option<crate::event::EventHandler<crate::event::cmap::CmapEvent>>,
}

/// Whether and how a client uses TLS (the official driver's `Tls`).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[non_exhaustive]
pub enum Tls {
    /// TLS with these settings.
    Enabled(TlsOptions),
    /// No TLS.
    Disabled,
}

impl From<TlsOptions> for Tls {
    fn from(options: TlsOptions) -> Self {
        Tls::Enabled(options)
    }
}

impl From<TlsOptions> for Option<Tls> {
    fn from(options: TlsOptions) -> Self {
        Some(Tls::Enabled(options))
    }
}

impl ClientOptions {
    /// The seed list.
    pub fn hosts(&self) -> &[ServerAddress] {
        &self.hosts
    }

    /// `appname`.
    pub fn app_name(&self) -> Option<&str> {
        self.app_name.as_deref()
    }

    /// The database named in the URI path.
    pub fn default_database(&self) -> Option<&str> {
        self.default_database.as_deref()
    }

    /// Credentials, when the URI or code gave any.
    pub fn credential(&self) -> Option<&Credential> {
        self.credential.as_ref()
    }

    /// `connectTimeoutMS` (default 10 s; zero means no timeout).
    pub fn connect_timeout(&self) -> Option<Duration> {
        match self.connect_timeout {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(DEFAULT_CONNECT_TIMEOUT),
        }
    }

    /// `socketTimeoutMS`: how long one request/reply exchange may take when
    /// no `timeoutMS` applies; [`DEFAULT_SOCKET_TIMEOUT`] (300 s) when not
    /// set, `None` (no limit) when set to 0.
    pub fn socket_timeout(&self) -> Option<Duration> {
        match self.socket_timeout {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(DEFAULT_SOCKET_TIMEOUT),
        }
    }

    /// `serverSelectionTimeoutMS` (default 30 s).
    pub fn server_selection_timeout(&self) -> Duration {
        self.server_selection_timeout
            .unwrap_or(DEFAULT_SERVER_SELECTION_TIMEOUT)
    }

    /// minHeartbeatFrequencyMS: 500 ms, which the specs do not let users
    /// configure; only a test runner lowers it.
    pub(crate) fn min_heartbeat_frequency(&self) -> Duration {
        self.min_heartbeat_frequency
            .unwrap_or(MIN_HEARTBEAT_FREQUENCY)
    }

    /// `serverSelectionTryOnce` (default true).
    pub fn server_selection_try_once(&self) -> bool {
        self.server_selection_try_once.unwrap_or(true)
    }

    /// `socketCheckIntervalMS` (default 5 s).
    pub fn socket_check_interval(&self) -> Duration {
        self.socket_check_interval
            .unwrap_or(DEFAULT_SOCKET_CHECK_INTERVAL)
    }

    /// The state file a new process starts warm from (opt-in, see the
    /// field `state_file`).
    pub fn state_file(&self) -> Option<&std::path::Path> {
        self.state_file.as_deref()
    }

    /// `heartbeatFrequencyMS` (default 60 s for single-threaded drivers).
    pub fn heartbeat_frequency(&self) -> Duration {
        self.heartbeat_freq.unwrap_or(DEFAULT_HEARTBEAT_FREQUENCY)
    }

    /// `localThresholdMS` (default 15 ms).
    pub fn local_threshold(&self) -> Duration {
        self.local_threshold.unwrap_or(DEFAULT_LOCAL_THRESHOLD)
    }

    /// `timeoutMS`, when set. `Some(0)` turns CSOT on without a limit (the
    /// legacy timeouts are then ignored, as under any `timeoutMS`); `None`
    /// leaves it off.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// `directConnection`.
    pub fn direct_connection(&self) -> Option<bool> {
        self.direct_connection
    }

    /// `replicaSet`.
    pub fn replica_set(&self) -> Option<&str> {
        self.repl_set_name.as_deref()
    }

    /// `loadBalanced` (default false).
    pub fn load_balanced(&self) -> bool {
        self.load_balanced.unwrap_or(false)
    }

    /// The default read preference (primary when unset), when the default
    /// selection criteria are a read preference.
    pub fn read_preference(&self) -> Option<&ReadPreference> {
        match &self.selection_criteria {
            Some(SelectionCriteria::ReadPreference(read_preference)) => Some(read_preference),
            _ => None,
        }
    }

    /// The default read concern.
    pub fn read_concern(&self) -> Option<&ReadConcern> {
        self.read_concern.as_ref()
    }

    /// The default write concern.
    pub fn write_concern(&self) -> Option<&WriteConcern> {
        self.write_concern.as_ref()
    }

    /// `retryReads` (default true).
    pub fn retry_reads(&self) -> bool {
        self.retry_reads.unwrap_or(true)
    }

    /// `retryWrites` (default true).
    pub fn retry_writes(&self) -> bool {
        self.retry_writes.unwrap_or(true)
    }

    /// Whether TLS is on: `tls`/`ssl` when given; otherwise on for
    /// `mongodb+srv` and whenever another `tls*` option is given (a CA file,
    /// a client certificate, `tlsInsecure`, ...), as libmongoc does: asking
    /// how to verify TLS and then talking in plain text would ignore the
    /// request. `tls=false` with another `tls*` option is an error.
    pub fn tls(&self) -> bool {
        match &self.tls {
            Some(Tls::Enabled(_)) => true,
            Some(Tls::Disabled) => false,
            None => self.srv_host.is_some(),
        }
    }

    /// The Stable API settings.
    pub fn server_api(&self) -> Option<&ServerApi> {
        self.server_api.as_ref()
    }

    /// The host of a `mongodb+srv` URI (before its SRV look-up), if the URI used that scheme.
    pub fn srv_host(&self) -> Option<&str> {
        self.srv_host.as_deref()
    }

    /// The effective authentication database: `authSource` when given, else
    /// `$external` for mechanisms whose users live there, else the URI's
    /// database, else `admin` (auth spec).
    pub fn auth_source(&self) -> Option<&str> {
        let credential = self.credential.as_ref()?;
        if let Some(source) = &credential.source {
            return Some(source);
        }
        match credential.mechanism_name() {
            Some("MONGODB-X509" | "GSSAPI" | "MONGODB-AWS" | "MONGODB-OIDC") => Some("$external"),
            Some("PLAIN") => Some(self.default_database().unwrap_or("$external")),
            _ => Some(self.default_database().unwrap_or("admin")),
        }
    }

    /// `compressors`: the compressors to offer, in order of preference.
    pub fn compressors(&self) -> Option<&[String]> {
        self.compressors.as_deref()
    }

    /// `zlibCompressionLevel` (-1, the zlib default, when unset).
    pub fn zlib_compression_level(&self) -> i32 {
        self.zlib_compression_level.unwrap_or(-1)
    }

    /// The TLS settings, when TLS was turned on with any.
    pub fn tls_options(&self) -> Option<&TlsOptions> {
        match &self.tls {
            Some(Tls::Enabled(options)) => Some(options),
            _ => None,
        }
    }

    /// `srvMaxHosts` (0, no limit, when unset).
    pub fn srv_max_hosts(&self) -> u32 {
        self.srv_max_hosts.unwrap_or(0)
    }

    /// `srvServiceName` (default `mongodb`).
    pub fn srv_service_name(&self) -> &str {
        self.srv_service_name
            .as_deref()
            .unwrap_or(DEFAULT_SRV_SERVICE_NAME)
    }

    /// `maxPoolSize`, when given. Parsed for compatibility; one socket per
    /// server means there is no pool to size.
    pub fn max_pool_size(&self) -> Option<u32> {
        self.max_pool_size
    }

    /// `minPoolSize`, when given (parsed for compatibility, not used).
    pub fn min_pool_size(&self) -> Option<u32> {
        self.min_pool_size
    }

    /// `maxIdleTimeMS`, when given (parsed for compatibility, not used).
    pub fn max_idle_time(&self) -> Option<Duration> {
        self.max_idle_time
    }

    /// `maxConnecting`, when given (parsed for compatibility, not used).
    pub fn max_connecting(&self) -> Option<u32> {
        self.max_connecting
    }

    /// `waitQueueTimeoutMS`, when given (parsed for compatibility, not used).
    pub fn wait_queue_timeout(&self) -> Option<Duration> {
        self.wait_queue_timeout
    }

    /// `serverMonitoringMode` (default `auto`; this driver always polls).
    pub fn server_monitoring_mode(&self) -> ServerMonitoringMode {
        self.server_monitoring_mode.unwrap_or_default()
    }

    /// `maxAdaptiveRetries`: how many times an operation that failed with an
    /// overload error (`SystemOverloadedError`) may be retried (default 2;
    /// 0 turns overload retries off). Client-backpressure spec.
    pub fn max_adaptive_retries(&self) -> u32 {
        self.max_adaptive_retries
            .unwrap_or(DEFAULT_MAX_ADAPTIVE_RETRIES)
    }

    /// `enableOverloadRetargeting`: whether a retry after an overload error
    /// avoids the overloaded server when another one is suitable (default
    /// false). Client-backpressure spec.
    pub fn enable_overload_retargeting(&self) -> bool {
        self.enable_overload_retargeting.unwrap_or(false)
    }

    /// The SOCKS5 proxy settings, when any were given.
    pub fn proxy(&self) -> Option<&ProxyOptions> {
        self.proxy.as_ref()
    }

    /// The DNS name servers set in code, if any (see [`Self::with_name_servers`]).
    pub fn name_servers(&self) -> Option<&[std::net::SocketAddr]> {
        self.name_servers.as_deref()
    }

    /// Sends the driver's DNS questions (the `mongodb+srv` SRV and TXT
    /// look-ups, and the members' A/AAAA look-ups) to these name servers
    /// only, instead of those of `/etc/resolv.conf` (which also brings its
    /// search list and `/etc/hosts`). For containers and sandboxes whose
    /// resolver configuration is not the one to use.
    pub fn with_name_servers(
        mut self,
        name_servers: impl IntoIterator<Item = std::net::SocketAddr>,
    ) -> Self {
        self.name_servers = Some(name_servers.into_iter().collect());
        self
    }
}

// These two are here rather than in `retry` and `sdam`, so that the rules
// need not know the options: the options know which settings they ask for.
impl RetrySettings {
    /// The settings `options` ask for. The published behaviour is opted into
    /// by setting `maxAdaptiveRetries`; otherwise the seed defaults apply,
    /// with `enableOverloadRetargeting` honoured in both.
    pub fn from_options(options: &ClientOptions) -> Self {
        let base = if options.max_adaptive_retries.is_some() {
            RetrySettings::published(
                options.max_adaptive_retries(),
                options.enable_overload_retargeting(),
            )
        } else {
            RetrySettings::seed().with_overload_retargeting(options.enable_overload_retargeting())
        };
        base.with_retry_reads(options.retry_reads())
            .with_retry_writes(options.retry_writes())
    }
}

impl TopologySettings {
    /// The settings of a client built from `options` (whose hosts are the
    /// resolved seeds when the URI was `mongodb+srv`).
    pub fn from_options(options: &ClientOptions) -> Self {
        TopologySettings {
            seeds: options.hosts().to_vec(),
            direct_connection: options.direct_connection(),
            replica_set: options.replica_set().map(str::to_string),
            load_balanced: options.load_balanced(),
            seeds_from_srv: options.srv_host.is_some(),
            without_change_events: false,
        }
    }
}

/// The compressors the `compressors` option may name.
pub const KNOWN_COMPRESSORS: [&str; 3] = ["snappy", "zlib", "zstd"];

/// The authentication mechanisms of the auth spec, as the URI spells them.
pub const AUTH_MECHANISMS: [&str; 7] = [
    "SCRAM-SHA-1",
    "SCRAM-SHA-256",
    "MONGODB-X509",
    "GSSAPI",
    "PLAIN",
    "MONGODB-AWS",
    "MONGODB-OIDC",
];

impl ClientOptions {
    /// Checks value ranges and the rules that tie options together. The URI
    /// parser has already dropped out-of-range values with a warning, so the
    /// range checks matter for values set in code.
    pub(crate) fn validate(&self) -> Result<()> {
        self.validate_ranges()?;
        self.validate_topology_options()?;
        self.validate_tls()?;
        if let Some(write_concern) = &self.write_concern {
            if write_concern.w == Some(Acknowledgment::Nodes(0))
                && write_concern.journal == Some(true)
            {
                return Err(Error::invalid_argument(
                    "write concern w=0 cannot be combined with journal=true: an unacknowledged \
                     write cannot wait for the journal",
                ));
            }
        }
        if let Some(credential) = &self.credential {
            validate_credential(credential)?;
        }
        if let Some(proxy) = &self.proxy {
            validate_proxy(proxy)?;
        }
        if let Some(info) = &self.driver_info {
            // The handshake's own rules (no `|`, the size limit), checked
            // before any socket is opened.
            crate::proto::handshake::client_metadata_with_driver_info(
                self.app_name(),
                std::slice::from_ref(info),
                &|_| None,
            )?;
        }
        Ok(())
    }

    fn validate_ranges(&self) -> Result<()> {
        if let Some(frequency) = self.heartbeat_freq {
            if frequency < MIN_HEARTBEAT_FREQUENCY {
                return Err(Error::invalid_argument(format!(
                    "heartbeatFrequencyMS is {} but must be at least {}",
                    frequency.as_millis(),
                    MIN_HEARTBEAT_FREQUENCY.as_millis()
                )));
            }
        }
        if let Some(level) = self.zlib_compression_level {
            if !(-1..=9).contains(&level) {
                return Err(Error::invalid_argument(format!(
                    "zlibCompressionLevel is {level} but must be between -1 and 9"
                )));
            }
        }
        if let Some(name) = &self.app_name {
            if name.len() > MAX_APP_NAME_BYTES {
                return Err(Error::invalid_argument(format!(
                    "appname is {} bytes long but may be at most {MAX_APP_NAME_BYTES}",
                    name.len()
                )));
            }
        }
        for compressor in self.compressors.iter().flatten() {
            if !KNOWN_COMPRESSORS.contains(&compressor.as_str()) {
                return Err(Error::invalid_argument(format!(
                    "unknown compressor {compressor:?}; expected one of {}",
                    KNOWN_COMPRESSORS.join(", ")
                )));
            }
        }
        if self.max_connecting == Some(0) {
            return Err(Error::invalid_argument(
                "maxConnecting is 0 but must be positive",
            ));
        }
        if self.server_selection_timeout == Some(Duration::ZERO) {
            return Err(Error::invalid_argument(
                "serverSelectionTimeoutMS is 0 but must be positive",
            ));
        }
        Ok(())
    }

    fn validate_topology_options(&self) -> Result<()> {
        if self.srv_host.is_none() {
            if let Some(max) = self.srv_max_hosts {
                return Err(Error::invalid_argument(format!(
                    "srvMaxHosts={max} is only allowed with a mongodb+srv connection string"
                )));
            }
            if let Some(name) = &self.srv_service_name {
                return Err(Error::invalid_argument(format!(
                    "srvServiceName={name:?} is only allowed with a mongodb+srv connection string"
                )));
            }
        }
        if self.direct_connection == Some(true) {
            if self.srv_host.is_some() {
                return Err(Error::invalid_argument(
                    "directConnection=true cannot be used with a mongodb+srv connection string, \
                     which may resolve to several hosts",
                ));
            }
            if self.hosts.len() > 1 {
                return Err(Error::invalid_argument(format!(
                    "directConnection=true requires exactly one host, but {} were given",
                    self.hosts.len()
                )));
            }
        }
        let srv_max_hosts = self.srv_max_hosts.unwrap_or(0);
        if self.load_balanced == Some(true) {
            if self.hosts.len() > 1 {
                return Err(Error::invalid_argument(format!(
                    "loadBalanced=true cannot be used with multiple hosts ({} given)",
                    self.hosts.len()
                )));
            }
            if let Some(name) = &self.repl_set_name {
                return Err(Error::invalid_argument(format!(
                    "loadBalanced=true cannot be used with replicaSet ({name:?})"
                )));
            }
            if self.direct_connection == Some(true) {
                return Err(Error::invalid_argument(
                    "loadBalanced=true cannot be used with directConnection=true",
                ));
            }
            if srv_max_hosts > 0 {
                return Err(Error::invalid_argument(format!(
                    "loadBalanced=true cannot be used with srvMaxHosts={srv_max_hosts}"
                )));
            }
        }
        if srv_max_hosts > 0 {
            if let Some(name) = &self.repl_set_name {
                return Err(Error::invalid_argument(format!(
                    "srvMaxHosts={srv_max_hosts} cannot be used with replicaSet ({name:?})"
                )));
            }
        }
        Ok(())
    }

    fn validate_tls(&self) -> Result<()> {
        let Some(Tls::Enabled(tls)) = &self.tls else {
            return Ok(());
        };
        // The uri-options spec forbids these pairs whatever their values:
        // one relaxes what the other configures, so no order of application
        // is safe to guess.
        let given = [
            ("tlsInsecure", tls.insecure.is_some()),
            (
                "tlsAllowInvalidCertificates",
                tls.allow_invalid_certificates.is_some(),
            ),
            (
                "tlsAllowInvalidHostnames",
                tls.allow_invalid_hostnames.is_some(),
            ),
            (
                "tlsDisableOCSPEndpointCheck",
                tls.disable_ocsp_endpoint_check.is_some(),
            ),
            (
                "tlsDisableCertificateRevocationCheck",
                tls.disable_certificate_revocation_check.is_some(),
            ),
        ];
        const CONFLICTS: [(usize, usize); 7] =
            [(0, 1), (0, 2), (0, 3), (0, 4), (1, 3), (1, 4), (3, 4)];
        for (a, b) in CONFLICTS {
            if given[a].1 && given[b].1 {
                return Err(Error::invalid_argument(format!(
                    "{} and {} cannot both be given",
                    given[a].0, given[b].0
                )));
            }
        }
        Ok(())
    }
}

fn validate_credential(credential: &Credential) -> Result<()> {
    let mechanism = credential.mechanism_name();
    let name = mechanism.unwrap_or("the default mechanism (SCRAM)");
    if let Some(m) = mechanism {
        if !AUTH_MECHANISMS.contains(&m) {
            return Err(Error::invalid_argument(format!(
                "authMechanism {m:?} is not supported; expected one of {}",
                AUTH_MECHANISMS.join(", ")
            )));
        }
    }
    if credential.source.as_deref() == Some("") {
        return Err(Error::invalid_argument("authSource is empty"));
    }
    let external_only = matches!(
        mechanism,
        Some("MONGODB-X509" | "GSSAPI" | "MONGODB-AWS" | "MONGODB-OIDC")
    );
    if external_only {
        if let Some(source) = credential.source.as_deref() {
            if source != "$external" {
                return Err(Error::invalid_argument(format!(
                    "authSource is {source:?} but {name} requires \"$external\""
                )));
            }
        }
    }
    validate_user_and_password(credential, name)?;
    if credential.mechanism_properties.is_some()
        && matches!(
            mechanism,
            None | Some("SCRAM-SHA-1" | "SCRAM-SHA-256" | "PLAIN" | "MONGODB-X509")
        )
    {
        return Err(Error::invalid_argument(format!(
            "authMechanismProperties cannot be used with {name}"
        )));
    }
    Ok(())
}

/// Which of a user name and a password each mechanism needs or refuses;
/// `name` is the mechanism as errors call it.
fn validate_user_and_password(credential: &Credential, name: &str) -> Result<()> {
    let mechanism = credential.mechanism_name();
    let username = credential.username.as_deref();
    let has_password = credential.password.is_some();
    match mechanism {
        None | Some("SCRAM-SHA-1" | "SCRAM-SHA-256" | "PLAIN" | "GSSAPI") => {
            match username {
                None => {
                    return Err(Error::invalid_argument(format!(
                        "{name} requires a user name, but none was given"
                    )))
                }
                Some("") => {
                    return Err(Error::invalid_argument(format!(
                        "{name} requires a user name, but it is empty"
                    )))
                }
                Some(_) => {}
            }
            // A URI with a user name and no password stays valid when no
            // mechanism is named (the connection-string spec accepts it); a
            // mechanism named explicitly needs its password.
            if matches!(mechanism, Some("SCRAM-SHA-1" | "SCRAM-SHA-256" | "PLAIN")) && !has_password
            {
                return Err(Error::invalid_argument(format!(
                    "{name} requires a password, but none was given"
                )));
            }
        }
        Some("MONGODB-X509") | Some("MONGODB-OIDC") => {
            if has_password {
                return Err(Error::invalid_argument(format!(
                    "{name} does not take a password"
                )));
            }
        }
        Some("MONGODB-AWS") => {
            if username.is_some() != has_password {
                return Err(Error::invalid_argument(
                    "MONGODB-AWS needs both a user name (access key id) and a password (secret \
                     access key), or neither",
                ));
            }
        }
        Some(_) => {}
    }
    Ok(())
}

fn validate_proxy(proxy: &ProxyOptions) -> Result<()> {
    if proxy.host.is_none() {
        let named = [
            ("proxyPort", proxy.port.is_some()),
            ("proxyUsername", proxy.username.is_some()),
            ("proxyPassword", proxy.password.is_some()),
        ];
        if let Some((option, _)) = named.iter().find(|(_, set)| *set) {
            return Err(Error::invalid_argument(format!(
                "{option} requires proxyHost"
            )));
        }
    }
    if proxy.username.is_some() != proxy.password.is_some() {
        return Err(Error::invalid_argument(
            "proxyUsername and proxyPassword must be given together",
        ));
    }
    for (option, value) in [
        ("proxyUsername", &proxy.username),
        ("proxyPassword", &proxy.password),
    ] {
        if let Some(value) = value {
            if value.is_empty() || value.len() > 255 {
                return Err(Error::invalid_argument(format!(
                    "{option} must be 1 to 255 bytes long, not {}",
                    value.len()
                )));
            }
        }
    }
    Ok(())
}

impl std::str::FromStr for ClientOptions {
    type Err = Error;
    fn from_str(uri: &str) -> Result<Self> {
        ClientOptions::parse(uri).run()
    }
}

/// One option given in both places: equal values merge, different ones fail.
fn pick<T: PartialEq>(
    name: &str,
    from_uri: Option<T>,
    from_code: Option<T>,
    show: impl Fn(&T) -> String,
) -> Result<Option<T>> {
    match (from_uri, from_code) {
        (Some(u), Some(c)) if u != c => Err(Error::invalid_argument(format!(
            "{name} is {} in the URI but {} in code",
            show(&u),
            show(&c)
        ))),
        (u, c) => Ok(c.or(u)),
    }
}

/// Like [`pick`] for secrets: the message must not print them.
fn pick_secret<T: PartialEq>(
    name: &str,
    from_uri: Option<T>,
    from_code: Option<T>,
) -> Result<Option<T>> {
    match (from_uri, from_code) {
        (Some(u), Some(c)) if u != c => Err(Error::invalid_argument(format!(
            "{name} has one value in the URI and a different one in code"
        ))),
        (u, c) => Ok(c.or(u)),
    }
}

fn millis(d: &Duration) -> String {
    d.as_millis().to_string()
}

fn quoted(s: &String) -> String {
    format!("{s:?}")
}

fn plain<T: std::fmt::Display>(v: &T) -> String {
    v.to_string()
}

fn debug<T: std::fmt::Debug>(v: &T) -> String {
    format!("{v:?}")
}

/// Builds a `ClientOptions` from `uri` and `code`, each listed field
/// [`pick`]ed under its option's name; the rest are given after the list.
/// The struct literal names every field, so a new one cannot be forgotten.
macro_rules! picked_options {
    ($uri:ident, $code:ident { $($field:ident: $name:literal, $show:expr;)* } $($rest:tt)*) => {
        ClientOptions {
            $($field: pick($name, $uri.$field, $code.$field, $show)?,)*
            $($rest)*
        }
    };
}

/// Lays the options set in `code` over those parsed from a URI: an option
/// set in both must have the same value in both.
pub(crate) fn merge(uri: ClientOptions, code: ClientOptions) -> Result<ClientOptions> {
    let hosts = merge_hosts(uri.hosts, uri.srv_host.as_deref(), code.hosts)?;
    Ok(picked_options!(uri, code {
        srv_host: "srv host", quoted;
        default_database: "database", quoted;
        app_name: "appname", quoted;
        compressors: "compressors", |c| c.join(",");
        zlib_compression_level: "zlibCompressionLevel", plain;
        connect_timeout: "connectTimeoutMS", millis;
        socket_timeout: "socketTimeoutMS", millis;
        server_selection_timeout: "serverSelectionTimeoutMS", millis;
        server_selection_try_once: "serverSelectionTryOnce", plain;
        socket_check_interval: "socketCheckIntervalMS", millis;
        heartbeat_freq: "heartbeatFrequencyMS", millis;
        local_threshold: "localThresholdMS", millis;
        timeout: "timeoutMS", millis;
        direct_connection: "directConnection", plain;
        repl_set_name: "replicaSet", quoted;
        load_balanced: "loadBalanced", plain;
        selection_criteria: "readPreference", plain;
        read_concern: "readConcernLevel", |r| format!("{:?}", r.level.as_str());
        retry_reads: "retryReads", plain;
        retry_writes: "retryWrites", plain;
        server_api: "serverApi", debug;
        srv_max_hosts: "srvMaxHosts", plain;
        srv_service_name: "srvServiceName", quoted;
        max_pool_size: "maxPoolSize", plain;
        min_pool_size: "minPoolSize", plain;
        max_idle_time: "maxIdleTimeMS", millis;
        max_connecting: "maxConnecting", plain;
        wait_queue_timeout: "waitQueueTimeoutMS", millis;
        server_monitoring_mode: "serverMonitoringMode", |m| m.as_str().to_string();
        max_adaptive_retries: "maxAdaptiveRetries", plain;
        enable_overload_retargeting: "enableOverloadRetargeting", plain;
        name_servers: "name servers", debug;
        driver_info: "driver info", debug;
        state_file: "state file", debug;
    }
        hosts,
        credential: merge_credential(uri.credential, code.credential)?,
        write_concern: merge_write_concern(uri.write_concern, code.write_concern)?,
        tls: merge_tls(uri.tls, code.tls)?,
        proxy: merge_proxy(uri.proxy, code.proxy)?,
        cloud: code.cloud.or(uri.cloud),
        clock_skew: code.clock_skew.or(uri.clock_skew),
        min_heartbeat_frequency: code.min_heartbeat_frequency.or(uri.min_heartbeat_frequency),
        // A URI cannot carry handlers.
        command_event_handler: code.command_event_handler,
        sdam_event_handler: code.sdam_event_handler,
        cmap_event_handler: code.cmap_event_handler,
    ))
}

/// The seed list: code's hosts when the URI names none (and no SRV host),
/// the URI's when code names none or the same ones; otherwise an error.
fn merge_hosts(
    uri: Vec<ServerAddress>,
    srv_host: Option<&str>,
    code: Vec<ServerAddress>,
) -> Result<Vec<ServerAddress>> {
    if code.is_empty() || code == uri {
        Ok(uri)
    } else if uri.is_empty() && srv_host.is_none() {
        Ok(code)
    } else {
        let list = |h: &[ServerAddress]| {
            h.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        Err(Error::invalid_argument(format!(
            "hosts are {} in the URI but {} in code",
            srv_host.map_or_else(|| list(&uri), str::to_string),
            list(&code)
        )))
    }
}

fn merge_credential(
    uri: Option<Credential>,
    code: Option<Credential>,
) -> Result<Option<Credential>> {
    let (uri, code) = match (uri, code) {
        (Some(u), Some(c)) => (u, c),
        (u, c) => return Ok(c.or(u)),
    };
    Ok(Some(Credential {
        username: pick("username", uri.username, code.username, quoted)?,
        password: pick_secret("password", uri.password, code.password)?,
        source: pick("authSource", uri.source, code.source, quoted)?,
        mechanism: pick("authMechanism", uri.mechanism, code.mechanism, |m| {
            format!("{:?}", m.as_str())
        })?,
        mechanism_properties: pick(
            "authMechanismProperties",
            uri.mechanism_properties,
            code.mechanism_properties,
            property_names,
        )?,
        // A callback exists only in code.
        oidc_callback: code.oidc_callback,
    }))
}

fn merge_write_concern(
    uri: Option<WriteConcern>,
    code: Option<WriteConcern>,
) -> Result<Option<WriteConcern>> {
    let (uri, code) = match (uri, code) {
        (Some(u), Some(c)) => (u, c),
        (u, c) => return Ok(c.or(u)),
    };
    Ok(Some(WriteConcern {
        w: pick("w", uri.w, code.w, |w| match w {
            Acknowledgment::Nodes(n) => n.to_string(),
            Acknowledgment::Majority => "\"majority\"".to_string(),
            Acknowledgment::Custom(tag) => format!("{tag:?}"),
        })?,
        w_timeout: pick("wTimeoutMS", uri.w_timeout, code.w_timeout, millis)?,
        journal: pick("journal", uri.journal, code.journal, plain)?,
    }))
}

fn merge_tls(uri: Option<Tls>, code: Option<Tls>) -> Result<Option<Tls>> {
    let (uri, code) = match (uri, code) {
        (Some(Tls::Enabled(u)), Some(Tls::Enabled(c))) => (u, c),
        (Some(Tls::Disabled), Some(Tls::Enabled(_)))
        | (Some(Tls::Enabled(_)), Some(Tls::Disabled)) => {
            return Err(Error::invalid_argument(
                "tls is on in one of the URI and the code but off in the other",
            ));
        }
        (u, c) => return Ok(c.or(u)),
    };
    Ok(Some(Tls::Enabled(TlsOptions {
        allow_invalid_certificates: pick(
            "tlsAllowInvalidCertificates",
            uri.allow_invalid_certificates,
            code.allow_invalid_certificates,
            plain,
        )?,
        allow_invalid_hostnames: pick(
            "tlsAllowInvalidHostnames",
            uri.allow_invalid_hostnames,
            code.allow_invalid_hostnames,
            plain,
        )?,
        ca_file_path: pick("tlsCAFile", uri.ca_file_path, code.ca_file_path, debug)?,
        cert_key_file_path: pick(
            "tlsCertificateKeyFile",
            uri.cert_key_file_path,
            code.cert_key_file_path,
            debug,
        )?,
        tls_certificate_key_file_password: pick_secret(
            "tlsCertificateKeyFilePassword",
            uri.tls_certificate_key_file_password,
            code.tls_certificate_key_file_password,
        )?,
        insecure: pick("tlsInsecure", uri.insecure, code.insecure, plain)?,
        disable_ocsp_endpoint_check: pick(
            "tlsDisableOCSPEndpointCheck",
            uri.disable_ocsp_endpoint_check,
            code.disable_ocsp_endpoint_check,
            plain,
        )?,
        disable_certificate_revocation_check: pick(
            "tlsDisableCertificateRevocationCheck",
            uri.disable_certificate_revocation_check,
            code.disable_certificate_revocation_check,
            plain,
        )?,
        system_roots: code.system_roots.or(uri.system_roots),
    })))
}

fn merge_proxy(
    uri: Option<ProxyOptions>,
    code: Option<ProxyOptions>,
) -> Result<Option<ProxyOptions>> {
    let (uri, code) = match (uri, code) {
        (Some(u), Some(c)) => (u, c),
        (u, c) => return Ok(c.or(u)),
    };
    Ok(Some(ProxyOptions {
        host: pick("proxyHost", uri.host, code.host, quoted)?,
        port: pick("proxyPort", uri.port, code.port, plain)?,
        username: pick("proxyUsername", uri.username, code.username, quoted)?,
        password: pick_secret("proxyPassword", uri.password, code.password)?,
    }))
}

#[cfg(test)]
mod server_api_tests {
    use super::*;

    #[test]
    fn server_api_is_built_in_code_and_reaches_the_options() {
        let api = ServerApi::builder()
            .version(ServerApiVersion::V1)
            .strict(true)
            .deprecation_errors(false)
            .build();
        assert_eq!(api.strict, Some(true));
        assert_eq!(api.deprecation_errors, Some(false));
        let code = ClientOptions::builder().server_api(api.clone()).build();
        let options = ClientOptions::parse_with("mongodb://localhost/", code).unwrap();
        assert_eq!(options.server_api(), Some(&api));
    }

    #[test]
    fn server_api_versions_parse_print_and_serialize_as_the_server_reads_them() {
        let version: ServerApiVersion = "1".parse().unwrap();
        assert_eq!(version, ServerApiVersion::V1);
        assert_eq!(version.to_string(), "1");
        let error = "2".parse::<ServerApiVersion>().unwrap_err();
        assert!(error.to_string().contains("\"2\""), "{error}");
        let api = ServerApi::builder().version(ServerApiVersion::V1).build();
        let document = bson::to_document(&api).unwrap();
        assert_eq!(document, bson::doc! { "apiVersion": "1" });
        assert_eq!(bson::from_document::<ServerApi>(document).unwrap(), api);
    }
}

#[cfg(test)]
mod settings_tests {
    use super::*;

    #[test]
    fn settings_from_client_options() {
        let o = ClientOptions::parse("mongodb://a/").run().unwrap();
        let s = RetrySettings::from_options(&o);
        assert_eq!(s.mode(), RetryMode::Seed);
        assert_eq!(s.max_overload_retries(), 5);
        assert!(
            s.token_bucket() && !s.overload_retargeting() && s.retry_reads() && s.retry_writes()
        );

        let o = ClientOptions::parse(
            "mongodb://a/?maxAdaptiveRetries=3&enableOverloadRetargeting=true&retryReads=false",
        )
        .run()
        .unwrap();
        let s = RetrySettings::from_options(&o);
        assert_eq!(s.mode(), RetryMode::Published);
        assert_eq!(s.max_overload_retries(), 3);
        assert!(
            !s.token_bucket() && s.overload_retargeting() && !s.retry_reads() && s.retry_writes()
        );

        let o = ClientOptions::parse("mongodb://a/?enableOverloadRetargeting=true")
            .run()
            .unwrap();
        let s = RetrySettings::from_options(&o);
        assert_eq!(s.mode(), RetryMode::Seed);
        assert!(s.overload_retargeting());
    }
}
