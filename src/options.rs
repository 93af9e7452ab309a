//! Client options: everything a connection string or code can configure.
//!
//! [`ClientOptions`] is built from a URI by [`ClientOptions::parse`] (see
//! [`crate::uri`]) or in code through [`ClientOptions::builder`]. Fields are
//! private; getters expose the effective value (the spec default when unset).

use std::time::Duration;

use bson::Document;

use crate::address::ServerAddress;
use crate::read_preference::ReadPreference;

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

/// Credentials for authentication.
#[derive(Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Credential {
    /// The user name.
    pub username: Option<String>,
    /// The password.
    pub password: Option<String>,
    /// `authSource`: the database that holds the user.
    pub source: Option<String>,
    /// `authMechanism` (`SCRAM-SHA-256`, ...).
    pub mechanism: Option<String>,
    /// `authMechanismProperties`.
    pub mechanism_properties: Option<Document>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password, even in debug output.
        f.debug_struct("Credential")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("source", &self.source)
            .field("mechanism", &self.mechanism)
            .field("mechanism_properties", &self.mechanism_properties)
            .finish()
    }
}

/// Write concern: `w`, `wtimeoutMS`, `journal`.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct WriteConcern {
    /// `w`: a number of members or a tag/"majority".
    pub w: Option<Acknowledgment>,
    /// `wtimeoutMS`.
    pub w_timeout: Option<Duration>,
    /// `journal` (`j`).
    pub journal: Option<bool>,
}

/// The `w` of a write concern.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Acknowledgment {
    /// A number of members.
    Nodes(u32),
    /// `"majority"`.
    Majority,
    /// A custom tag name.
    Custom(String),
}

/// Read concern level (`local`, `majority`, ... or another string the server knows).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ReadConcern {
    /// The level as the server spells it.
    pub level: String,
}

/// The Stable API (`serverApi`) settings.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ServerApi {
    /// The API version, e.g. `"1"`.
    pub version: String,
    /// `apiStrict`.
    pub strict: Option<bool>,
    /// `apiDeprecationErrors`.
    pub deprecation_errors: Option<bool>,
}

/// TLS settings from the URI (`tls*` options).
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct TlsOptions {
    /// `tlsAllowInvalidCertificates`.
    pub allow_invalid_certificates: Option<bool>,
    /// `tlsAllowInvalidHostnames`.
    pub allow_invalid_hostnames: Option<bool>,
    /// `tlsCAFile`.
    pub ca_file: Option<String>,
    /// `tlsCertificateKeyFile`.
    pub certificate_key_file: Option<String>,
    /// `tlsCertificateKeyFilePassword`.
    pub certificate_key_file_password: Option<String>,
    /// `tlsInsecure`.
    pub insecure: Option<bool>,
    /// `tlsDisableOCSPEndpointCheck`.
    pub disable_ocsp_endpoint_check: Option<bool>,
    /// `tlsDisableCertificateRevocationCheck`.
    pub disable_certificate_revocation_check: Option<bool>,
}

/// Everything that configures a [`crate::Client`].
///
/// Unset options take the spec's defaults through the getters.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ClientOptions {
    pub(crate) hosts: Vec<ServerAddress>,
    /// The host of a `mongodb+srv` URI, before the SRV look-up.
    pub(crate) srv_host: Option<String>,
    pub(crate) default_database: Option<String>,
    pub(crate) credential: Option<Credential>,
    pub(crate) app_name: Option<String>,
    pub(crate) compressors: Option<Vec<String>>,
    pub(crate) zlib_compression_level: Option<i32>,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) socket_timeout: Option<Duration>,
    pub(crate) server_selection_timeout: Option<Duration>,
    pub(crate) server_selection_try_once: Option<bool>,
    pub(crate) socket_check_interval: Option<Duration>,
    pub(crate) heartbeat_frequency: Option<Duration>,
    pub(crate) local_threshold: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) direct_connection: Option<bool>,
    pub(crate) replica_set: Option<String>,
    pub(crate) load_balanced: Option<bool>,
    pub(crate) read_preference: Option<ReadPreference>,
    pub(crate) read_concern: Option<ReadConcern>,
    pub(crate) write_concern: Option<WriteConcern>,
    pub(crate) retry_reads: Option<bool>,
    pub(crate) retry_writes: Option<bool>,
    pub(crate) tls: Option<bool>,
    pub(crate) tls_options: Option<TlsOptions>,
    pub(crate) server_api: Option<ServerApi>,
    pub(crate) srv_max_hosts: Option<u32>,
    pub(crate) srv_service_name: Option<String>,
    // Connection-pool options: parsed and validated for compatibility with
    // other drivers' URIs; a single-socket driver has no pool to size.
    pub(crate) max_pool_size: Option<u32>,
    pub(crate) min_pool_size: Option<u32>,
    pub(crate) max_idle_time: Option<Duration>,
    pub(crate) max_connecting: Option<u32>,
    pub(crate) wait_queue_timeout: Option<Duration>,
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

    /// `socketTimeoutMS` (default none).
    pub fn socket_timeout(&self) -> Option<Duration> {
        self.socket_timeout.filter(|d| !d.is_zero())
    }

    /// `serverSelectionTimeoutMS` (default 30 s).
    pub fn server_selection_timeout(&self) -> Duration {
        self.server_selection_timeout
            .unwrap_or(DEFAULT_SERVER_SELECTION_TIMEOUT)
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

    /// `heartbeatFrequencyMS` (default 60 s for single-threaded drivers).
    pub fn heartbeat_frequency(&self) -> Duration {
        self.heartbeat_frequency
            .unwrap_or(DEFAULT_HEARTBEAT_FREQUENCY)
    }

    /// `localThresholdMS` (default 15 ms).
    pub fn local_threshold(&self) -> Duration {
        self.local_threshold.unwrap_or(DEFAULT_LOCAL_THRESHOLD)
    }

    /// `timeoutMS`, when set (zero means no limit).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout.filter(|d| !d.is_zero())
    }

    /// `directConnection`.
    pub fn direct_connection(&self) -> Option<bool> {
        self.direct_connection
    }

    /// `replicaSet`.
    pub fn replica_set(&self) -> Option<&str> {
        self.replica_set.as_deref()
    }

    /// `loadBalanced` (default false).
    pub fn load_balanced(&self) -> bool {
        self.load_balanced.unwrap_or(false)
    }

    /// The default read preference (primary when unset).
    pub fn read_preference(&self) -> Option<&ReadPreference> {
        self.read_preference.as_ref()
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

    /// Whether TLS is on (`tls`/`ssl`; default false, true for `mongodb+srv`).
    pub fn tls(&self) -> bool {
        self.tls.unwrap_or(self.srv_host.is_some())
    }

    /// The Stable API settings.
    pub fn server_api(&self) -> Option<&ServerApi> {
        self.server_api.as_ref()
    }
}
