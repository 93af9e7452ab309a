//! The connection handshake: the client metadata document and the hello
//! commands, as values. Nothing here touches a socket or reads the process
//! environment directly; the environment is passed in as a look-up function.
//!
//! ```text
//! new socket ──handshake_command──> {isMaster|hello, helloOk, client, backpressure, ...}
//!                                     sent as OP_QUERY (legacy) or OP_MSG (hello)
//! later checks ──check_command────> {hello | isMaster, helloOk}   (no client metadata)
//! ```

use bson::{doc, Bson, Document};

use crate::error::{Error, Result};
use crate::proto::options::ServerApi;

/// `client.driver.name`.
pub const DRIVER_NAME: &str = "mongo-inline";

/// `client.driver.version`.
pub const DRIVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// `client.platform`. The compiler version is not known without a build
/// script, so only the language and the I/O model are named.
pub const PLATFORM: &str = "Rust, blocking";

/// The server refuses a `client` document larger than this (BSON bytes).
pub const MAX_METADATA_SIZE: usize = 512;

/// Separator between the driver's values and those of wrapping libraries.
const DRIVER_INFO_SEPARATOR: char = '|';

/// Metadata of a library wrapping the driver, appended to the driver's own
/// in the handshake of new sockets (`DriverInfoOptions` of the handshake
/// spec; see `Client::append_metadata`). Two are equal when they would
/// make the same metadata: an empty version or platform counts as unset.
///
/// Set it when the client is made (`ClientOptions::driver_info`, as the
/// official driver) or later (`Client::append_metadata`):
///
/// ```
/// use mongo_inline::options::{ClientOptions, DriverInfo};
/// let info = DriverInfo::builder().name("my-odm").version("2.1".to_string()).build();
/// let options = ClientOptions::builder().driver_info(info).build();
/// assert_eq!(options.driver_info.unwrap().name, "my-odm");
/// ```
#[derive(Clone, Debug, Default, typed_builder::TypedBuilder)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct DriverInfo {
    /// The wrapping library's name.
    #[builder(!default)]
    pub name: String,
    /// Its version.
    pub version: Option<String>,
    /// Its platform details.
    pub platform: Option<String>,
}

impl DriverInfo {
    /// Metadata naming the library `name`, without version or platform.
    pub fn new(name: impl Into<String>) -> Self {
        DriverInfo {
            name: name.into(),
            ..DriverInfo::default()
        }
    }

    /// This with the library's version.
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// This with the library's platform details.
    #[must_use]
    pub fn platform(mut self, platform: impl Into<String>) -> Self {
        self.platform = Some(platform.into());
        self
    }

    /// The fields as the metadata holds them: an empty value is unset.
    fn effective(&self) -> (&str, &str, &str) {
        (
            &self.name,
            self.version.as_deref().unwrap_or_default(),
            self.platform.as_deref().unwrap_or_default(),
        )
    }
}

/// The handshake spec: "Two `DriverInfoOptions` objects are considered
/// equal if they would result in the same metadata in the client
/// handshake. In practice, this means if a field is the empty string
/// (`""`), treat it as unset."
impl PartialEq for DriverInfo {
    fn eq(&self, other: &Self) -> bool {
        self.effective() == other.effective()
    }
}

impl Eq for DriverInfo {}

impl std::hash::Hash for DriverInfo {
    /// As equality: an empty version or platform hashes as unset.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.effective().hash(state);
    }
}

impl<'de> serde::Deserialize<'de> for DriverInfo {
    /// From `{name, version?, platform?}`, as the official driver reads it.
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Written {
            name: String,
            version: Option<String>,
            platform: Option<String>,
        }
        let Written {
            name,
            version,
            platform,
        } = Written::deserialize(deserializer)?;
        Ok(DriverInfo {
            name,
            version,
            platform,
        })
    }
}

/// The `client` document of the handshake: application name, driver
/// name/version, OS, platform and FaaS environment (detected through
/// `env_lookup`, which production code points at `std::env::var`).
///
/// Kept within [`MAX_METADATA_SIZE`] by the spec's truncation order: drop
/// `env` fields other than `name`, then `os` fields other than `type`, then
/// `env` entirely, then truncate `platform`. The application name is never
/// touched; the URI parser refuses names longer than 128 bytes, which keeps
/// the document within the limit. (The client itself builds it with
/// [`client_metadata_with_driver_info`].)
#[cfg(test)]
pub fn client_metadata(
    app_name: Option<&str>,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Document {
    build_metadata(
        app_name,
        DRIVER_NAME.to_owned(),
        DRIVER_VERSION.to_owned(),
        PLATFORM.to_owned(),
        env_lookup,
    )
}

/// The `client` document of the handshake (application name, driver
/// name/version, OS, platform and FaaS environment, truncated as the spec
/// says) with the metadata of wrapping libraries appended, in
/// order, to the driver's name, version and platform, separated by `|`.
/// Empty values count as absent. Fails if a value contains `|`, or if the
/// document cannot be brought within [`MAX_METADATA_SIZE`] by the spec's
/// truncation (names and versions are never truncated).
pub fn client_metadata_with_driver_info(
    app_name: Option<&str>,
    driver_info: &[DriverInfo],
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Document> {
    let mut name = DRIVER_NAME.to_owned();
    let mut version = DRIVER_VERSION.to_owned();
    let mut platform = PLATFORM.to_owned();
    for info in driver_info {
        let fields = [
            ("name", Some(info.name.as_str()), &mut name),
            ("version", info.version.as_deref(), &mut version),
            ("platform", info.platform.as_deref(), &mut platform),
        ];
        for (field, value, target) in fields {
            let Some(value) = value.filter(|v| !v.is_empty()) else {
                continue;
            };
            if value.contains(DRIVER_INFO_SEPARATOR) {
                return Err(Error::invalid_argument(format!(
                    "driver info {field} {value:?} must not contain '{DRIVER_INFO_SEPARATOR}'"
                )));
            }
            target.push(DRIVER_INFO_SEPARATOR);
            target.push_str(value);
        }
    }
    let metadata = build_metadata(app_name, name, version, platform, env_lookup);
    let size = bson_size(&metadata);
    if size > MAX_METADATA_SIZE {
        return Err(Error::invalid_argument(format!(
            "client metadata is {size} bytes after truncation, over the server's limit of \
             {MAX_METADATA_SIZE}; shorten the application name or the driver info"
        )));
    }
    Ok(metadata)
}

fn build_metadata(
    app_name: Option<&str>,
    driver_name: String,
    driver_version: String,
    platform: String,
    env_lookup: &dyn Fn(&str) -> Option<String>,
) -> Document {
    let mut metadata = Document::new();
    if let Some(app_name) = app_name {
        metadata.insert("application", doc! { "name": app_name });
    }
    metadata.insert(
        "driver",
        doc! { "name": driver_name, "version": driver_version },
    );
    metadata.insert(
        "os",
        doc! { "type": os_type(std::env::consts::OS), "architecture": std::env::consts::ARCH },
    );
    metadata.insert("platform", platform);
    if let Some(env) = detect_env(env_lookup) {
        metadata.insert("env", env);
    }
    fit_to_limit(&mut metadata);
    metadata
}

/// `uname -s` style names, as the spec's examples spell them.
fn os_type(os: &str) -> String {
    let known = match os {
        "linux" | "android" => "Linux",
        "macos" | "ios" => "Darwin",
        "windows" => "Windows",
        "freebsd" => "FreeBSD",
        "openbsd" => "OpenBSD",
        "netbsd" => "NetBSD",
        "dragonfly" => "DragonFly",
        "solaris" | "illumos" => "SunOS",
        "" => "unknown",
        other => {
            let mut chars = other.chars();
            return chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default();
        }
    };
    known.to_owned()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum FaasProvider {
    AwsLambda,
    AzureFunctions,
    GcpFunctions,
    Vercel,
}

/// `client.env`: the FaaS provider and its details, plus the container
/// orchestrator. `None` when nothing would be populated.
fn detect_env(env_lookup: &dyn Fn(&str) -> Option<String>) -> Option<Document> {
    let populated = |name: &str| env_lookup(name).filter(|value| !value.is_empty());
    let int32 = |name: &str| populated(name).and_then(|value| value.parse::<i32>().ok());

    let mut env = Document::new();
    if let Some(provider) = detect_faas(&populated) {
        match provider {
            FaasProvider::AwsLambda => {
                env.insert("name", "aws.lambda");
                if let Some(region) = populated("AWS_REGION") {
                    env.insert("region", region);
                }
                if let Some(memory) = int32("AWS_LAMBDA_FUNCTION_MEMORY_SIZE") {
                    env.insert("memory_mb", memory);
                }
            }
            FaasProvider::AzureFunctions => {
                env.insert("name", "azure.func");
            }
            FaasProvider::GcpFunctions => {
                env.insert("name", "gcp.func");
                if let Some(memory) = int32("FUNCTION_MEMORY_MB") {
                    env.insert("memory_mb", memory);
                }
                if let Some(timeout) = int32("FUNCTION_TIMEOUT_SEC") {
                    env.insert("timeout_sec", timeout);
                }
                if let Some(region) = populated("FUNCTION_REGION") {
                    env.insert("region", region);
                }
            }
            FaasProvider::Vercel => {
                env.insert("name", "vercel");
                if let Some(region) = populated("VERCEL_REGION") {
                    env.insert("region", region);
                }
            }
        }
    }
    // The Docker half of container detection (a `/.dockerenv` file) needs a
    // filesystem probe and is not done; the orchestrator is an env variable.
    if populated("KUBERNETES_SERVICE_HOST").is_some() {
        env.insert("container", doc! { "orchestrator": "kubernetes" });
    }
    (!env.is_empty()).then_some(env)
}

/// The one FaaS provider the environment names; Vercel runs on AWS Lambda
/// and wins over it, any other combination is ambiguous and names none.
fn detect_faas(populated: &dyn Fn(&str) -> Option<String>) -> Option<FaasProvider> {
    let aws = populated("AWS_EXECUTION_ENV").is_some_and(|v| v.starts_with("AWS_Lambda_"))
        || populated("AWS_LAMBDA_RUNTIME_API").is_some();
    let azure = populated("FUNCTIONS_WORKER_RUNTIME").is_some();
    let gcp = populated("K_SERVICE").is_some() || populated("FUNCTION_NAME").is_some();
    let vercel = populated("VERCEL").is_some();
    match (aws, azure, gcp, vercel) {
        (_, false, false, true) => Some(FaasProvider::Vercel),
        (true, false, false, false) => Some(FaasProvider::AwsLambda),
        (false, true, false, false) => Some(FaasProvider::AzureFunctions),
        (false, false, true, false) => Some(FaasProvider::GcpFunctions),
        _ => None,
    }
}

fn bson_size(document: &Document) -> usize {
    let mut bytes = Vec::new();
    // Serialising a document of strings, integers and subdocuments cannot fail.
    match document.to_writer(&mut bytes) {
        Ok(()) => bytes.len(),
        Err(_) => usize::MAX,
    }
}

fn keep_only(document: &mut Document, key: &str) {
    let kept = document.remove(key);
    document.clear();
    if let Some(value) = kept {
        document.insert(key, value);
    }
}

/// Applies the spec's truncation steps, in order, until the document fits.
fn fit_to_limit(metadata: &mut Document) {
    if bson_size(metadata) <= MAX_METADATA_SIZE {
        return;
    }
    // 1. Keep only env.name.
    if let Ok(env) = metadata.get_document_mut("env") {
        keep_only(env, "name");
        if env.is_empty() {
            metadata.remove("env");
        }
    }
    if bson_size(metadata) <= MAX_METADATA_SIZE {
        return;
    }
    // 2. Keep only os.type.
    if let Ok(os) = metadata.get_document_mut("os") {
        keep_only(os, "type");
    }
    if bson_size(metadata) <= MAX_METADATA_SIZE {
        return;
    }
    // 3. Drop env.
    metadata.remove("env");
    let size = bson_size(metadata);
    if size <= MAX_METADATA_SIZE {
        return;
    }
    // 4. Truncate platform by the excess, on a character boundary.
    if let Ok(platform) = metadata.get_str("platform") {
        let excess = size - MAX_METADATA_SIZE;
        let mut keep = platform.len().saturating_sub(excess);
        while !platform.is_char_boundary(keep) {
            keep -= 1;
        }
        let truncated = platform[..keep].to_owned();
        if truncated.is_empty() {
            metadata.remove("platform");
        } else {
            metadata.insert("platform", truncated);
        }
    }
}

/// What the handshake needs from the client's options.
#[derive(Clone, Copy, Debug)]
pub struct HandshakeSettings<'a> {
    /// The `client` document ([`client_metadata_with_driver_info`]).
    pub metadata: &'a Document,
    /// `loadBalanced=true`.
    pub load_balanced: bool,
    /// The declared Stable API, if any.
    pub server_api: Option<&'a ServerApi>,
    /// Compressors to offer. This driver implements none, so callers pass an
    /// empty list; a server that picked one would send OP_COMPRESSED, which
    /// [`crate::wire::Header::parse`] refuses.
    pub compressors: &'a [String],
}

impl HandshakeSettings<'_> {
    /// The spec requires `hello` over OP_MSG from the first message when a
    /// Stable API version is declared or a load balancer is in the way.
    fn requires_hello(&self) -> bool {
        self.server_api.is_some() || self.load_balanced
    }
}

/// The first command on a new socket, and whether it must go as OP_MSG
/// (`true`: `hello`) or as OP_QUERY on `admin.$cmd` (`false`: legacy hello).
///
/// Legacy hello (`isMaster: 1, helloOk: true`) unless a Stable API version is
/// declared or the client is load-balanced, then `hello: 1`. Carries the
/// client metadata, `backpressure: true` (client backpressure spec),
/// `loadBalanced: true` when load-balanced, the Stable API fields, and
/// `compression` when compressors are given. Authentication fields
/// (`saslSupportedMechs`, `speculativeAuthenticate`) are the caller's to add.
pub fn handshake_command(settings: &HandshakeSettings) -> (Document, bool) {
    let use_op_msg = settings.requires_hello();
    let mut command = hello_base(use_op_msg);
    command.insert("client", settings.metadata.clone());
    command.insert("backpressure", true);
    if settings.load_balanced {
        command.insert("loadBalanced", true);
    }
    if !settings.compressors.is_empty() {
        let compressors: Vec<Bson> = settings
            .compressors
            .iter()
            .map(|c| Bson::String(c.clone()))
            .collect();
        command.insert("compression", compressors);
    }
    append_server_api(&mut command, settings.server_api);
    (command, use_op_msg)
}

/// A monitoring check on an established socket, and whether it must go as
/// OP_MSG. `hello: 1` (OP_MSG) when the handshake reply said `helloOk`, or
/// a Stable API version or load balancer requires it; otherwise legacy
/// hello with `helloOk: true`, which OP_QUERY can carry to any server (the
/// caller may still send it as OP_MSG once the server's `maxWireVersion` is
/// at least 6). Never carries client metadata: the server refuses a change.
pub fn check_command(hello_ok: bool, settings: &HandshakeSettings) -> (Document, bool) {
    let use_hello = hello_ok || settings.requires_hello();
    let mut command = hello_base(use_hello);
    append_server_api(&mut command, settings.server_api);
    (command, use_hello)
}

fn hello_base(use_hello: bool) -> Document {
    if use_hello {
        doc! { "hello": 1, "helloOk": true }
    } else {
        doc! { "isMaster": 1, "helloOk": true }
    }
}

pub(crate) fn append_server_api(command: &mut Document, server_api: Option<&ServerApi>) {
    let Some(api) = server_api else { return };
    command.insert("apiVersion", api.version.to_string());
    if let Some(strict) = api.strict {
        command.insert("apiStrict", strict);
    }
    if let Some(deprecation_errors) = api.deprecation_errors {
        command.insert("apiDeprecationErrors", deprecation_errors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup_from(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn env_of(vars: &[(&str, &str)]) -> Option<Document> {
        let metadata = client_metadata(None, &lookup_from(vars));
        metadata.get_document("env").ok().cloned()
    }

    #[test]
    fn base_metadata_shape() {
        let metadata = client_metadata(Some("myapp"), &lookup_from(&[]));
        assert_eq!(
            metadata.get_document("application").unwrap(),
            &doc! { "name": "myapp" }
        );
        assert_eq!(
            metadata.get_document("driver").unwrap(),
            &doc! { "name": "mongo-inline", "version": env!("CARGO_PKG_VERSION") }
        );
        let os = metadata.get_document("os").unwrap();
        assert_eq!(os.get_str("type").unwrap(), os_type(std::env::consts::OS));
        assert_eq!(os.get_str("architecture").unwrap(), std::env::consts::ARCH);
        assert_eq!(metadata.get_str("platform").unwrap(), "Rust, blocking");
        assert!(!metadata.contains_key("env"));
        assert!(!client_metadata(None, &lookup_from(&[])).contains_key("application"));
    }

    #[test]
    fn os_type_follows_uname_spelling() {
        assert_eq!(os_type("linux"), "Linux");
        assert_eq!(os_type("macos"), "Darwin");
        assert_eq!(os_type("windows"), "Windows");
        assert_eq!(os_type("freebsd"), "FreeBSD");
        assert_eq!(os_type("haiku"), "Haiku");
        assert_eq!(os_type(""), "unknown");
    }

    #[test]
    fn valid_aws_lambda() {
        let env = env_of(&[
            ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
            ("AWS_REGION", "us-east-2"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024"),
        ]);
        assert_eq!(
            env,
            Some(doc! { "name": "aws.lambda", "region": "us-east-2", "memory_mb": 1024i32 })
        );
        let env = env_of(&[("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")]);
        assert_eq!(env, Some(doc! { "name": "aws.lambda" }));
    }

    #[test]
    fn valid_azure() {
        let env = env_of(&[("FUNCTIONS_WORKER_RUNTIME", "node")]);
        assert_eq!(env, Some(doc! { "name": "azure.func" }));
    }

    #[test]
    fn valid_gcp() {
        let env = env_of(&[
            ("K_SERVICE", "servicename"),
            ("FUNCTION_MEMORY_MB", "1024"),
            ("FUNCTION_TIMEOUT_SEC", "60"),
            ("FUNCTION_REGION", "us-central1"),
        ]);
        assert_eq!(
            env,
            Some(doc! {
                "name": "gcp.func",
                "memory_mb": 1024i32,
                "timeout_sec": 60i32,
                "region": "us-central1",
            })
        );
        assert_eq!(
            env_of(&[("FUNCTION_NAME", "f")]),
            Some(doc! { "name": "gcp.func" })
        );
    }

    #[test]
    fn valid_vercel_wins_over_aws() {
        let vercel = doc! { "name": "vercel", "region": "cdg1" };
        let env = env_of(&[("VERCEL", "1"), ("VERCEL_REGION", "cdg1")]);
        assert_eq!(env, Some(vercel.clone()));
        let env = env_of(&[
            ("VERCEL", "1"),
            ("VERCEL_REGION", "cdg1"),
            ("AWS_EXECUTION_ENV", "AWS_Lambda_nodejs18.x"),
            ("AWS_REGION", "us-east-1"),
        ]);
        assert_eq!(env, Some(vercel));
    }

    #[test]
    fn several_providers_name_none() {
        let cases: [&[(&str, &str)]; 4] = [
            &[
                ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
                ("FUNCTIONS_WORKER_RUNTIME", "node"),
            ],
            &[("K_SERVICE", "s"), ("FUNCTIONS_WORKER_RUNTIME", "node")],
            &[("VERCEL", "1"), ("K_SERVICE", "s")],
            &[
                ("VERCEL", "1"),
                ("AWS_LAMBDA_RUNTIME_API", "x"),
                ("FUNCTION_NAME", "f"),
            ],
        ];
        for vars in cases {
            assert_eq!(env_of(vars), None, "{vars:?}");
        }
    }

    #[test]
    fn aws_execution_env_must_name_lambda() {
        assert_eq!(env_of(&[("AWS_EXECUTION_ENV", "EC2")]), None);
        assert_eq!(env_of(&[("AWS_EXECUTION_ENV", "aws_lambda_java8")]), None);
    }

    #[test]
    fn empty_variables_count_as_unset() {
        assert_eq!(
            env_of(&[("VERCEL", ""), ("FUNCTIONS_WORKER_RUNTIME", "")]),
            None
        );
        assert_eq!(
            env_of(&[("VERCEL", ""), ("FUNCTIONS_WORKER_RUNTIME", "python")]),
            Some(doc! { "name": "azure.func" })
        );
    }

    #[test]
    fn invalid_integers_are_omitted() {
        for bad in ["big", "", "1.5", "2147483648", " 1024"] {
            let env = env_of(&[
                ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
                ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", bad),
            ]);
            assert_eq!(env, Some(doc! { "name": "aws.lambda" }), "{bad:?}");
        }
        let env = env_of(&[
            ("K_SERVICE", "s"),
            ("FUNCTION_MEMORY_MB", "-1"),
            ("FUNCTION_TIMEOUT_SEC", "sixty"),
        ]);
        assert_eq!(env, Some(doc! { "name": "gcp.func", "memory_mb": -1i32 }));
    }

    #[test]
    fn container_orchestrator_with_faas() {
        let env = env_of(&[
            ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
            ("AWS_REGION", "us-east-2"),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024"),
            ("KUBERNETES_SERVICE_HOST", "1"),
        ]);
        assert_eq!(
            env,
            Some(doc! {
                "name": "aws.lambda",
                "region": "us-east-2",
                "memory_mb": 1024i32,
                "container": { "orchestrator": "kubernetes" },
            })
        );
        assert_eq!(
            env_of(&[("KUBERNETES_SERVICE_HOST", "10.0.0.1")]),
            Some(doc! { "container": { "orchestrator": "kubernetes" } })
        );
    }

    #[test]
    fn long_region_drops_env_fields_but_keeps_name() {
        let long = "a".repeat(512);
        let metadata = client_metadata(
            Some("app"),
            &lookup_from(&[
                ("AWS_EXECUTION_ENV", "AWS_Lambda_java8"),
                ("AWS_REGION", &long),
            ]),
        );
        assert!(bson_size(&metadata) <= MAX_METADATA_SIZE);
        assert_eq!(
            metadata.get_document("env").unwrap(),
            &doc! { "name": "aws.lambda" }
        );
        // Later steps were not needed.
        assert!(metadata
            .get_document("os")
            .unwrap()
            .contains_key("architecture"));
        assert_eq!(metadata.get_str("platform").unwrap(), PLATFORM);
    }

    fn stage_reached(metadata: &Document) -> u8 {
        let env = metadata.get_document("env").ok();
        let os = metadata.get_document("os").unwrap();
        let platform = metadata.get_str("platform").unwrap_or("");
        if platform != PLATFORM {
            4
        } else if env.is_none() {
            3
        } else if !os.contains_key("architecture") {
            2
        } else if env.is_some_and(|e| e.len() > 1) {
            0
        } else {
            1
        }
    }

    /// Grows the application name byte by byte (beyond the URI limit, to
    /// force every step) and checks that the steps are taken in the spec's
    /// order, each one only when the previous ones were not enough.
    #[test]
    fn truncation_follows_the_spec_order() {
        let vars = lookup_from(&[
            ("K_SERVICE", "servicename"),
            ("FUNCTION_MEMORY_MB", "1024"),
            ("FUNCTION_TIMEOUT_SEC", "60"),
            ("FUNCTION_REGION", "us-central1"),
        ]);
        let mut previous_stage = 0;
        let mut stages_seen = [false; 5];
        for length in 0.. {
            let app_name = "x".repeat(length);
            let metadata = client_metadata(Some(&app_name), &vars);
            if !metadata.contains_key("platform") {
                break;
            }
            let stage = stage_reached(&metadata);
            stages_seen[stage as usize] = true;
            assert!(stage >= previous_stage, "length {length}: stage went back");
            previous_stage = stage;
            let size = bson_size(&metadata);
            assert!(size <= MAX_METADATA_SIZE, "length {length}: {size} bytes");
            if stage == 1 {
                assert_eq!(
                    metadata.get_document("env").unwrap(),
                    &doc! { "name": "gcp.func" }
                );
            }
            if stage == 4 {
                let platform = metadata.get_str("platform").unwrap();
                // Truncated by exactly the excess: the document is full.
                assert_eq!(size, MAX_METADATA_SIZE, "length {length}");
                assert!(PLATFORM.starts_with(platform));
            }
            // Each step is needed: undoing it would not fit.
            if stage >= 1 {
                let untruncated = client_metadata(Some(&app_name), &|_| None);
                let mut with_env = untruncated.clone();
                with_env.insert("env", detect_env(&vars).unwrap());
                assert!(bson_size(&with_env) > MAX_METADATA_SIZE, "length {length}");
            }
        }
        assert_eq!(stages_seen, [true; 5]);
        // Past the point where the platform cannot shrink further it is
        // gone, but required fields stay.
        let metadata = client_metadata(Some(&"x".repeat(600)), &vars);
        assert!(!metadata.contains_key("platform"));
        assert!(metadata.contains_key("driver"));
        assert_eq!(metadata.get_document("os").unwrap().len(), 1);
    }

    #[test]
    fn platform_truncation_respects_character_boundaries() {
        let mut metadata = doc! {
            "application": { "name": "y".repeat(360) },
            "driver": { "name": "d", "version": "1" },
            "os": { "type": "Linux" },
            "platform": "é".repeat(20),
        };
        fit_to_limit(&mut metadata);
        let platform = metadata.get_str("platform").unwrap();
        assert!(bson_size(&metadata) <= MAX_METADATA_SIZE);
        assert!(bson_size(&metadata) >= MAX_METADATA_SIZE - 1);
        assert!(!platform.is_empty() && platform.chars().all(|c| c == 'é'));
    }

    #[test]
    fn driver_info_is_appended() {
        let infos = [
            DriverInfo {
                name: "library".into(),
                version: Some("1.2".into()),
                platform: Some("Library Platform".into()),
            },
            DriverInfo {
                name: "framework".into(),
                version: Some("2.0".into()),
                platform: Some("Framework Platform".into()),
            },
        ];
        let metadata = client_metadata_with_driver_info(Some("app"), &infos, &|_| None).unwrap();
        let driver = metadata.get_document("driver").unwrap();
        assert_eq!(
            driver.get_str("name").unwrap(),
            "mongo-inline|library|framework"
        );
        assert_eq!(
            driver.get_str("version").unwrap(),
            format!("{DRIVER_VERSION}|1.2|2.0")
        );
        assert_eq!(
            metadata.get_str("platform").unwrap(),
            "Rust, blocking|Library Platform|Framework Platform"
        );
        let base = client_metadata(Some("app"), &|_| None);
        assert_eq!(metadata.get("application"), base.get("application"));
        assert_eq!(metadata.get("os"), base.get("os"));

        let partial = [DriverInfo {
            name: "lib".into(),
            version: Some(String::new()),
            platform: None,
        }];
        let metadata = client_metadata_with_driver_info(None, &partial, &|_| None).unwrap();
        let driver = metadata.get_document("driver").unwrap();
        assert_eq!(driver.get_str("name").unwrap(), "mongo-inline|lib");
        assert_eq!(driver.get_str("version").unwrap(), DRIVER_VERSION);
        assert_eq!(metadata.get_str("platform").unwrap(), PLATFORM);
        assert_eq!(
            client_metadata_with_driver_info(None, &[], &|_| None).unwrap(),
            client_metadata(None, &|_| None)
        );
    }

    #[test]
    fn driver_infos_are_equal_when_they_make_the_same_metadata() {
        let full = DriverInfo::new("lib").version("1.2").platform("P");
        assert_eq!(full, full.clone());
        assert_eq!(DriverInfo::new("lib").version(""), DriverInfo::new("lib"));
        assert_eq!(DriverInfo::new("lib").platform(""), DriverInfo::new("lib"));
        assert_ne!(full, DriverInfo::new("lib").version("1.2"));
        assert_ne!(DriverInfo::new("lib"), DriverInfo::new("Lib"));
        assert_ne!(
            DriverInfo::new("lib").version("1"),
            DriverInfo::new("lib").platform("1")
        );
    }

    #[test]
    fn driver_info_errors() {
        let bad = [DriverInfo {
            name: "a|b".into(),
            ..DriverInfo::default()
        }];
        let error = client_metadata_with_driver_info(None, &bad, &|_| None).unwrap_err();
        assert!(
            error.to_string().contains("must not contain '|'"),
            "{error}"
        );
        let huge = [DriverInfo {
            name: "n".repeat(600),
            ..DriverInfo::default()
        }];
        let error = client_metadata_with_driver_info(None, &huge, &|_| None).unwrap_err();
        assert!(
            error.to_string().contains("over the server's limit"),
            "{error}"
        );
    }

    fn settings<'a>(
        metadata: &'a Document,
        load_balanced: bool,
        server_api: Option<&'a ServerApi>,
        compressors: &'a [String],
    ) -> HandshakeSettings<'a> {
        HandshakeSettings {
            metadata,
            load_balanced,
            server_api,
            compressors,
        }
    }

    fn keys(command: &Document) -> Vec<&str> {
        command.keys().map(String::as_str).collect()
    }

    #[test]
    fn legacy_handshake_by_default() {
        let metadata = client_metadata(Some("app"), &|_| None);
        let (command, op_msg) = handshake_command(&settings(&metadata, false, None, &[]));
        assert!(!op_msg);
        assert_eq!(
            command,
            doc! { "isMaster": 1, "helloOk": true, "client": metadata.clone(), "backpressure": true }
        );
    }

    #[test]
    fn load_balanced_handshake_uses_hello() {
        let metadata = client_metadata(None, &|_| None);
        let (command, op_msg) = handshake_command(&settings(&metadata, true, None, &[]));
        assert!(op_msg);
        assert_eq!(
            keys(&command),
            ["hello", "helloOk", "client", "backpressure", "loadBalanced"]
        );
        assert_eq!(command.get_bool("loadBalanced"), Ok(true));
    }

    #[test]
    fn stable_api_handshake_uses_hello_with_api_fields() {
        let metadata = client_metadata(None, &|_| None);
        let api = ServerApi {
            version: crate::proto::options::ServerApiVersion::V1,
            strict: Some(true),
            deprecation_errors: Some(false),
        };
        let (command, op_msg) = handshake_command(&settings(&metadata, false, Some(&api), &[]));
        assert!(op_msg);
        assert_eq!(command.get_i32("hello"), Ok(1));
        assert!(!command.contains_key("loadBalanced"));
        assert_eq!(command.get_str("apiVersion"), Ok("1"));
        assert_eq!(command.get_bool("apiStrict"), Ok(true));
        assert_eq!(command.get_bool("apiDeprecationErrors"), Ok(false));

        let version_only = ServerApi {
            version: crate::proto::options::ServerApiVersion::V1,
            strict: None,
            deprecation_errors: None,
        };
        let (command, _) = handshake_command(&settings(&metadata, false, Some(&version_only), &[]));
        assert!(!command.contains_key("apiStrict"));
        assert!(!command.contains_key("apiDeprecationErrors"));
    }

    #[test]
    fn compressors_are_offered_when_given() {
        let metadata = client_metadata(None, &|_| None);
        let compressors = vec!["zstd".to_owned(), "zlib".to_owned()];
        let (command, _) = handshake_command(&settings(&metadata, false, None, &compressors));
        assert_eq!(
            command.get_array("compression").unwrap(),
            &vec![Bson::from("zstd"), Bson::from("zlib")]
        );
    }

    #[test]
    fn checks_carry_no_metadata() {
        let metadata = client_metadata(Some("app"), &|_| None);
        let plain = settings(&metadata, false, None, &[]);
        assert_eq!(
            check_command(true, &plain),
            (doc! { "hello": 1, "helloOk": true }, true)
        );
        assert_eq!(
            check_command(false, &plain),
            (doc! { "isMaster": 1, "helloOk": true }, false)
        );
        let api = ServerApi {
            version: crate::proto::options::ServerApiVersion::V1,
            strict: None,
            deprecation_errors: None,
        };
        let (command, op_msg) = check_command(false, &settings(&metadata, false, Some(&api), &[]));
        assert!(op_msg);
        assert_eq!(
            command,
            doc! { "hello": 1, "helloOk": true, "apiVersion": "1" }
        );
        let (command, op_msg) = check_command(false, &settings(&metadata, true, None, &[]));
        assert!(op_msg);
        assert_eq!(command, doc! { "hello": 1, "helloOk": true });
    }
}
