//! Internals reached by this project's own examples, tests and benches.
//!
//! Not part of the API: nothing here follows semver, anything may change or
//! go in any release. Programs use the items documented at the crate root.

use std::time::{Duration, Instant};

use bson::Document;

use crate::proto::sdam::{TopologyDescription, TopologySettings};
use crate::{ClientOptions, ServerAddress};

/// The pure topology description, fed checks by hand: what applying a
/// check's hello costs without a network (`benches/tools/scan_cost.rs`).
pub struct TopologyRules(TopologyDescription);

impl TopologyRules {
    /// A topology of `options`' seeds; `change_events` says whether the
    /// description change events are built (someone listens) or not.
    pub fn new(options: &ClientOptions, change_events: bool) -> Self {
        let settings = TopologySettings::from_options(options).with_change_events(change_events);
        TopologyRules(TopologyDescription::new(settings))
    }

    /// Applies a check of `address` that answered `reply` after `rtt`;
    /// returns how many events it produced.
    pub fn check_succeeded(
        &mut self,
        address: &ServerAddress,
        reply: &Document,
        rtt: Duration,
        now: Instant,
    ) -> usize {
        self.0
            .check_succeeded(address, reply, rtt, now)
            .events
            .len()
    }
}

/// Where the cloud authentication mechanisms (MONGODB-AWS, MONGODB-OIDC)
/// look for their secrets, for tests that stand in loopback servers for
/// the AWS and cloud metadata endpoints: each field left `None` keeps the
/// real one. Set only through [`set_cloud_environment`]; a program never
/// needs it.
#[derive(Clone, Default, PartialEq)]
pub struct CloudEnvironment {
    /// The environment variables to read instead of the process's.
    pub variables: Option<std::collections::HashMap<String, String>>,
    /// The ECS container endpoint (`http://169.254.170.2`).
    pub ecs: Option<String>,
    /// The EC2 instance metadata service (`http://169.254.169.254`).
    pub ec2: Option<String>,
    /// The STS endpoint for AssumeRoleWithWebIdentity
    /// (`https://sts.amazonaws.com/`).
    pub sts: Option<String>,
    /// The Azure instance metadata service (`http://169.254.169.254`).
    pub azure: Option<String>,
    /// The GCP metadata server (`http://metadata`).
    pub gcp: Option<String>,
}

impl std::fmt::Debug for CloudEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Variable values are secrets (AWS_SECRET_ACCESS_KEY): names only.
        let names: Option<Vec<&String>> = self.variables.as_ref().map(|v| v.keys().collect());
        f.debug_struct("CloudEnvironment")
            .field("variables", &names)
            .field("ecs", &self.ecs)
            .field("ec2", &self.ec2)
            .field("sts", &self.sts)
            .field("azure", &self.azure)
            .field("gcp", &self.gcp)
            .finish()
    }
}

/// Makes a client built from `options` read `environment` instead of the
/// real environment variables and cloud endpoints.
pub fn set_cloud_environment(options: &mut ClientOptions, environment: CloudEnvironment) {
    options.cloud = Some(std::sync::Arc::new(environment));
}

/// How far a client's clock runs ahead of the system's, for tests that
/// would otherwise wait out a spec's fixed interval (the SRV rescan's
/// minute): the test moves it forward instead of sleeping. Sleeps stay
/// real, so sockets and name servers see ordinary time.
#[derive(Clone, Debug, Default)]
pub struct ClockSkew(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl ClockSkew {
    /// No skew yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock of every client using this skew forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0
            .fetch_add(millis, std::sync::atomic::Ordering::Relaxed);
    }

    /// How far ahead the clock runs now.
    pub fn ahead(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl PartialEq for ClockSkew {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Makes a client built from `options` read its time through `skew`.
pub fn set_clock_skew(options: &mut ClientOptions, skew: &ClockSkew) {
    options.clock_skew = Some(skew.clone());
}

/// Lowers minHeartbeatFrequencyMS (500 ms) for a client built from
/// `options`, as unified-test-format.md lets a test runner do for tests
/// that set fail points ("a reduced value for heartbeatFrequencyMS (and
/// minHeartbeatFrequencyMS if possible) to speed up SDAM recovery time and
/// server selection after a failure"). Users cannot set it: the specs
/// forbid it.
pub fn set_min_heartbeat_frequency(options: &mut ClientOptions, interval: std::time::Duration) {
    options.min_heartbeat_frequency = Some(interval);
}

/// How many SCRAM key entries a state file's bytes hold, or why they are
/// not a state file (the tests of concurrent writers and tampered files).
pub fn state_file_entries(bytes: &[u8]) -> Result<usize, String> {
    state_file_count(bytes, |item| {
        matches!(item, crate::proto::state_file::Item::Scram(_))
    })
}

/// How many verified certificate chains a state file's bytes hold.
pub fn state_file_chains(bytes: &[u8]) -> Result<usize, String> {
    state_file_count(bytes, |item| {
        matches!(item, crate::proto::state_file::Item::Chain(_))
    })
}

/// How many remembered topologies a state file's bytes hold.
pub fn state_file_topologies(bytes: &[u8]) -> Result<usize, String> {
    state_file_count(bytes, |item| {
        matches!(item, crate::proto::state_file::Item::Topology(_))
    })
}

fn state_file_count(
    bytes: &[u8],
    counted: fn(&crate::proto::state_file::Item) -> bool,
) -> Result<usize, String> {
    crate::proto::state_file::StateContents::decode(bytes)
        .map(|contents| contents.entries.iter().filter(|e| counted(&e.item)).count())
        .map_err(|e| e.to_string())
}
