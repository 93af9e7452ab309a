//! A runner for the unified test format
//! (`source/unified-test-format/unified-test-format.md`).
//!
//! [`run_all`] visits every unified file under the spec-test root, runs each
//! test against the first deployment its `runOnRequirements` allow
//! ("replicaset": a one-member SecantusDB replica set; "single": a
//! standalone one; "sharded": two simulated mongoses and "load-balanced": a
//! simulated load balancer, both in front of that replica set), and
//! prints pass / fail / skip counts per directory and every skip with its
//! reason. Every failure counts as failed; it fails the run unless
//! [`skips::KNOWN_FAILURES`] names the test under a server limitation that
//! the probe at start confirmed ("failed: server limitation, checked"). An
//! entry there that now passes is reported. A failed test of the
//! timing-based CSOT suite runs once more (see [`TIMING_BASED`]); a hung
//! test fails and frees its lane's servers, and [`watchdog`] stops a run
//! that stalls between tests.

pub mod events;
pub mod logs;
pub mod matching;
pub mod runner;
pub mod skips;
pub mod watchdog;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use bson::{doc, Bson, Document};
use mongo_inline::Client;

use crate::support::server::TestServer;
use crate::support::sim::Simulator;
use crate::support::spec;
use crate::support::tls;
use matching::Entities;
use runner::{Deployment, Failure, TestRun};

/// The server version SecantusDB reports in `buildInfo`.
fn server_version(client: &Client) -> Vec<i64> {
    let reply = client
        .database("admin")
        .run_command(doc! { "buildInfo": 1 })
        .run()
        .expect("buildInfo");
    reply
        .get_array("versionArray")
        .map(|a| {
            a.iter()
                .filter_map(|b| b.as_i32().map(i64::from).or_else(|| b.as_i64()))
                .collect()
        })
        .unwrap_or_default()
}

fn parse_version(text: &str) -> Vec<i64> {
    text.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

fn version_cmp(a: &[i64], b: &[i64]) -> std::cmp::Ordering {
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    std::cmp::Ordering::Equal
}

struct NoEntities;
impl Entities for NoEntities {
    fn value(&self, _: &str) -> Option<Bson> {
        None
    }
    fn session_lsid(&self, _: &str) -> Option<Document> {
        None
    }
}

/// One deployment a test may run on: `auth` when it requires
/// authentication (the lane's `--auth` servers).
#[derive(Clone, Copy)]
struct Candidate<'a> {
    topology: &'static str,
    auth: bool,
    /// The deployment, started on first use (the `--auth` ones are started
    /// only when a test needs them).
    deployment: &'a dyn Fn() -> &'static Deployment,
}

/// Why `requirement` does not hold for `candidate`, or `None` when it does.
/// Every reason is a server version, a topology, an authentication mode,
/// a server parameter or mechanism read from the server, or a requirement
/// the format spec ties to a driver feature (quoted); [`skips::skip_kind`]
/// refuses any other.
fn unmet(requirement: &Document, candidate: Candidate, version: &[i64]) -> Option<String> {
    for (key, value) in requirement {
        let reason = match key.as_str() {
            "minServerVersion" => {
                let min = parse_version(value.as_str().unwrap_or("0"));
                (version_cmp(version, &min).is_lt())
                    .then(|| format!("minServerVersion {value} > server {version:?}"))
            }
            "maxServerVersion" => {
                let max = parse_version(value.as_str().unwrap_or("0"));
                (version_cmp(version, &max).is_gt())
                    .then(|| format!("maxServerVersion {value} < server {version:?}"))
            }
            "topologies" => {
                let wanted: Vec<&str> = value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Bson::as_str)
                    .collect();
                // The simulated mongoses front a replica set.
                let satisfied = wanted.contains(&candidate.topology)
                    || (candidate.topology == "sharded" && wanted.contains(&"sharded-replicaset"));
                (!satisfied).then(|| format!("topologies {wanted:?}"))
            }
            "serverless" => {
                (value.as_str() == Some("require")).then(|| "serverless: require".to_string())
            }
            "auth" => match (value.as_bool(), candidate.auth) {
                (Some(true), false) => Some("auth: true, and this deployment runs without authentication (its --auth twin is tried too)".to_string()),
                (Some(false), true) => Some("auth: false, and this deployment requires authentication".to_string()),
                _ => None,
            },
            "authMechanism" => auth_mechanism_unmet(value, candidate),
            "csfle" => (value.as_bool() != Some(false)).then(|| skips::CSFLE_REQUIREMENT.to_string()),
            "serverParameters" => server_parameters_unmet(value, candidate),
            other => Some(format!("unknown runOnRequirements field {other}")),
        };
        if reason.is_some() {
            return reason;
        }
    }
    None
}

/// `authMechanism`: the format spec asks for the mechanism among the
/// server's `authenticationMechanisms` parameter, so the server is asked.
fn auth_mechanism_unmet(value: &Bson, candidate: Candidate) -> Option<String> {
    let wanted = value.as_str().unwrap_or_default();
    if !candidate.auth {
        return Some(format!(
            "authMechanism {wanted}: this deployment runs without authentication"
        ));
    }
    let reply = (candidate.deployment)()
        .internal
        .database("admin")
        .run_command(doc! { "getParameter": 1, "authenticationMechanisms": 1 })
        .run();
    let offered: Vec<String> = match &reply {
        Ok(reply) => reply
            .get_array("authenticationMechanisms")
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(str::to_string))
            .collect(),
        Err(e) => return Some(format!("authMechanism {wanted}: getParameter failed: {e}")),
    };
    (!offered.iter().any(|m| m.eq_ignore_ascii_case(wanted))).then(|| {
        format!("authMechanism {wanted}: checked, the server's authenticationMechanisms are {offered:?}")
    })
}

/// `serverParameters`, compared with what `getParameter` answers.
fn server_parameters_unmet(value: &Bson, candidate: Candidate) -> Option<String> {
    let wanted = value.as_document().cloned().unwrap_or_default();
    let mut command = doc! { "getParameter": 1 };
    for k in wanted.keys() {
        command.insert(k, 1);
    }
    match (candidate.deployment)()
        .internal
        .database("admin")
        .run_command(command)
        .run()
    {
        Ok(reply) => matching::matches(
            &Bson::Document(wanted.clone()),
            Some(&Bson::Document(reply)),
            true,
            &NoEntities,
        )
        .err()
        .map(|e| format!("serverParameters {wanted}: checked, {e}")),
        Err(e) => Some(format!(
            "serverParameters {wanted}: getParameter failed: {e}"
        )),
    }
}

/// `None` when one of `requirements` holds (or there are none), else the
/// reasons none does.
fn requirements_unmet(
    requirements: Option<&Vec<Bson>>,
    candidate: Candidate,
    version: &[i64],
) -> Option<String> {
    let requirements = requirements?;
    let mut reasons = Vec::new();
    for r in requirements {
        match unmet(r.as_document()?, candidate, version) {
            None => return None,
            Some(reason) => reasons.push(reason),
        }
    }
    Some(format!("runOnRequirements: {}", reasons.join(" / ")))
}

#[derive(Default)]
struct Counts {
    passed: usize,
    failed: usize,
    skipped: usize,
}

/// How many lanes run files side by side: `UNIFIED_LANES`, else 2. Each
/// lane has deployments of its own (the files reuse database names and set
/// server-wide fail points), and the test servers, not the runner, are most
/// of the work, so two lanes keep both of CI's cores busy.
fn lane_count() -> usize {
    std::env::var("UNIFIED_LANES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(2)
}

/// Runs every unified file and panics on a failure that the skip map does
/// not name.
pub fn run_all() {
    let root = spec::root();
    if !root.is_dir() {
        spec::dir("unified-test-format");
        return;
    }
    let mut files = Vec::new();
    collect_unified_files(&root, &mut files);
    files.sort();
    let lanes = lane_count().min(files.len().max(1));
    // Dealt round-robin: neighbouring files (one spec's suite) spread
    // across the lanes, so no lane gets all of a slow directory.
    let shards: Vec<Vec<std::path::PathBuf>> = (0..lanes)
        .map(|lane| files.iter().skip(lane).step_by(lanes).cloned().collect())
        .collect();
    watchdog::start(&shards.iter().map(Vec::len).collect::<Vec<_>>());
    let root = root.as_path();
    let lane_results: Vec<Lane> = std::thread::scope(|scope| {
        let handles: Vec<_> = shards
            .iter()
            .enumerate()
            .map(|(lane, shard)| scope.spawn(move || run_lane(root, lane, shard)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a unified lane panicked"))
            .collect()
    });

    let mut table: BTreeMap<String, Counts> = BTreeMap::new();
    let mut report = Report::default();
    let limits = lane_results
        .first()
        .map(|l| l.limits.clone())
        .unwrap_or_default();
    for lane in lane_results {
        for (dir, c) in lane.table {
            let total = table.entry(dir).or_default();
            total.passed += c.passed;
            total.failed += c.failed;
            total.skipped += c.skipped;
        }
        report.merge(lane.report);
    }
    report.sort();
    report.print(&limits);
    eprintln!("\n| directory | pass | fail | skip |\n|---|---:|---:|---:|");
    let mut total = Counts::default();
    for (dir, c) in &table {
        eprintln!("| {dir} | {} | {} | {} |", c.passed, c.failed, c.skipped);
        total.passed += c.passed;
        total.failed += c.failed;
        total.skipped += c.skipped;
    }
    eprintln!(
        "| total ({} files, {lanes} lanes) | {} | {} (of which {} server limitation, checked) | {} (of which {} pending gaps) |",
        files.len(),
        total.passed,
        total.failed,
        report.limited.len(),
        total.skipped,
        report.pending.len()
    );
    assert!(
        report.failures.is_empty(),
        "{} unified test(s) failed without a checked server limitation:\n{}",
        report.failures.len(),
        report.failures.join("\n")
    );
    let filtered = std::env::var("MONGO_SPEC_FILTER").is_ok_and(|f| !f.is_empty());
    assert!(filtered || total.passed > 0, "no unified test ran");
}

/// What one lane found.
struct Lane {
    table: BTreeMap<String, Counts>,
    report: Report,
    limits: Vec<(skips::ServerLimit, Result<bool, String>)>,
}

/// How many hung tests a lane survives: past this, whatever hangs them
/// (a server left blocked) would hang the rest too, so the lane stops.
const HUNG_TESTS_PER_LANE: usize = 3;

/// Runs `files` against deployments of the lane's own.
fn run_lane(root: &Path, lane: usize, files: &[std::path::PathBuf]) -> Lane {
    let replica_set = TestServer::start();
    let standalone = TestServer::start_standalone();
    // Sharded and load-balanced deployments are simulated: two mongoses, and
    // a load balancer over two backends (so two serviceIds), all answering
    // hello themselves and forwarding every other command to the replica
    // set, which gives them transactions and retryable writes.
    let mongoses = Simulator::mongos(&replica_set, 2);
    let balancer = Simulator::load_balancer(&[&replica_set, &replica_set]);
    let internal = || Client::with_uri_str(bounded(&replica_set.uri())).expect("internal client");
    // Tests run on the first deployment their requirements allow, so the
    // real servers come first and the simulated ones take only the tests
    // that need them.
    let deployments: &'static [Deployment] = Vec::leak(vec![
        Deployment {
            topology: "replicaset",
            uri: format!("mongodb://{}/", replica_set.address()),
            multi_uri: None,
            internal: internal(),
        },
        Deployment {
            topology: "single",
            uri: standalone.uri(),
            multi_uri: None,
            internal: Client::with_uri_str(bounded(&standalone.uri())).expect("internal client"),
        },
        Deployment {
            topology: "sharded",
            uri: mongoses.seed_uri(&[0]),
            multi_uri: Some(mongoses.seed_uri(&[0, 1])),
            internal: internal(),
        },
        Deployment {
            topology: "load-balanced",
            uri: balancer.seed_uri(&[0]),
            multi_uri: None,
            internal: internal(),
        },
    ]);
    let version = server_version(&deployments[0].internal);
    let limits = probe_limits(&replica_set.uri());
    let auth = AuthDeployments::default();
    let mut table: BTreeMap<String, Counts> = BTreeMap::new();
    let mut report = Report::default();
    let mut hung = 0;

    for (files_done, path) in files.iter().enumerate() {
        let relative = path
            .strip_prefix(root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned();
        let dir = Path::new(&relative)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let counts = table.entry(dir.clone()).or_default();
        let started = std::time::Instant::now();
        let file = spec::load(path);
        let tests = file.get_array("tests").cloned().unwrap_or_default();
        let expect_failure = dir.ends_with("valid-fail");
        for test in &tests {
            let Some(test) = test.as_document() else {
                continue;
            };
            let description = test.get_str("description").unwrap_or("?").to_string();
            if !spec::selected(&relative, &description) {
                continue;
            }
            let name = format!("{relative}: {description}");
            watchdog::running(lane, files_done, &format!("running {name}"));
            let outcome = if hung >= HUNG_TESTS_PER_LANE {
                Err(Failure::Broken(format!(
                    "not run: the lane stopped after {hung} hung tests"
                )))
            } else {
                match skips::single_threaded_rule(&relative, &description) {
                    Some(rule) => Err(Failure::Skip(format!("single-threaded: {rule}"))),
                    None => run_one(&file, test, &relative, (deployments, &auth), &version),
                }
            };
            let outcome = match outcome {
                Err(Failure::Fail(first) | Failure::Broken(first))
                    if relative.starts_with(TIMING_BASED) && !first.starts_with(HUNG) =>
                {
                    let second = run_one(&file, test, &relative, (deployments, &auth), &version);
                    if second.is_ok() {
                        report.reruns.push(format!("{name}: first run: {first}"));
                    }
                    second
                }
                other => other,
            };
            if matches!(&outcome, Err(Failure::Broken(m)) if m.starts_with(HUNG)) {
                hung += 1;
                eprintln!("[unified] HUNG: {name}; freeing the lane's servers");
                free_servers(&[&replica_set, &standalone], test);
            }
            report.record(counts, &name, outcome, expect_failure, &limits);
        }
        if std::env::var_os("UNIFIED_PROGRESS").is_some() {
            eprintln!("[unified] {relative}: {:?}", started.elapsed());
        }
    }
    watchdog::finished(lane);
    Lane {
        table,
        report,
        limits,
    }
}

/// `uri` with a socket timeout: the runner's own clients set up and check
/// every test, so one blocked reply must not block the lane for the
/// driver's default five minutes.
fn bounded(uri: &str) -> String {
    let separator = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{separator}socketTimeoutMS=30000")
}

/// After a hung test, through new connections (the hung thread may hold
/// the runner's clients): turns off the fail points the test names and
/// ends every session, so the test's leftovers do not hang the next ones.
fn free_servers(servers: &[&TestServer], test: &Document) {
    let mut fail_points = vec!["failCommand".to_string()];
    collect_fail_point_names(&Bson::Document(test.clone()), &mut fail_points);
    for server in servers {
        let Ok(client) = Client::with_uri_str(bounded(&server.uri())) else {
            continue;
        };
        let admin = client.database("admin");
        for name in &fail_points {
            let _ = admin
                .run_command(doc! { "configureFailPoint": name.as_str(), "mode": "off" })
                .run();
        }
        let _ = admin.run_command(doc! { "killAllSessions": [] }).run();
    }
}

fn collect_fail_point_names(value: &Bson, out: &mut Vec<String>) {
    match value {
        Bson::Document(d) => {
            if let Ok(name) = d.get_str("configureFailPoint") {
                if !out.iter().any(|n| n == name) {
                    out.push(name.to_string());
                }
            }
            d.values().for_each(|v| collect_fail_point_names(v, out));
        }
        Bson::Array(a) => a.iter().for_each(|v| collect_fail_point_names(v, out)),
        _ => {}
    }
}

/// Which of the skip map's server limitations the server still has: each
/// is probed once, and a probe that cannot run confirms nothing.
fn probe_limits(uri: &str) -> Vec<(skips::ServerLimit, Result<bool, String>)> {
    skips::ServerLimit::ALL
        .iter()
        .map(|&limit| (limit, skips::probe(limit, uri)))
        .collect()
}

fn confirmed(
    limits: &[(skips::ServerLimit, Result<bool, String>)],
    limit: skips::ServerLimit,
) -> bool {
    limits.iter().any(|(l, r)| *l == limit && *r == Ok(true))
}

/// What the run found, beyond the counts.
#[derive(Default)]
struct Report {
    skipped: Vec<String>,
    /// Gaps [`skips::PENDING_GAPS`] names, counted as skips meanwhile.
    pending: Vec<String>,
    /// Failures the skip map excuses with a limitation the probe confirmed.
    limited: Vec<String>,
    /// Failures that fail the run.
    failures: Vec<String>,
    now_passing: Vec<String>,
    /// Timing-based tests that failed once and passed on their second run.
    reruns: Vec<String>,
}

impl Report {
    /// Lanes finish in any order; sorted, the listing reads the same on
    /// every run.
    fn sort(&mut self) {
        self.skipped.sort();
        self.pending.sort();
        self.limited.sort();
        self.failures.sort();
        self.now_passing.sort();
        self.reruns.sort();
    }

    fn merge(&mut self, other: Report) {
        self.skipped.extend(other.skipped);
        self.pending.extend(other.pending);
        self.limited.extend(other.limited);
        self.failures.extend(other.failures);
        self.now_passing.extend(other.now_passing);
        self.reruns.extend(other.reruns);
    }

    fn record(
        &mut self,
        counts: &mut Counts,
        name: &str,
        outcome: Result<(), Failure>,
        expect_failure: bool,
        limits: &[(skips::ServerLimit, Result<bool, String>)],
    ) {
        let (file, test) = name.split_once(": ").unwrap_or((name, ""));
        let listed = skips::known_failure(file, test);
        let message = match (outcome, expect_failure) {
            (Err(Failure::Skip(reason)), _) if skips::skip_kind(&reason).is_some() => {
                counts.skipped += 1;
                self.skipped.push(format!("{name}: {reason}"));
                return;
            }
            (Err(Failure::Skip(reason)), _) if skips::pending_gap(&reason).is_some() => {
                counts.skipped += 1;
                let owner = skips::pending_gap(&reason).unwrap_or_default();
                self.pending.push(format!("{name}: {reason} (pending: {owner})"));
                return;
            }
            // A gap of the runner or the driver is a failure, whatever it
            // calls itself.
            (Err(Failure::Skip(reason)), _) => format!(
                "not a checked server limit, a requirement or a quoted spec rule, so a gap, not a skip: {reason}"
            ),
            (Ok(()), false) | (Err(Failure::Fail(_)), true) => {
                counts.passed += 1;
                if let Some(limit) = listed {
                    self.now_passing.push(format!("{name} (listed: {limit:?})"));
                }
                return;
            }
            (Err(Failure::Fail(message)), false) => message,
            (Err(Failure::Broken(message)), _) => message,
            (Ok(()), true) => "a valid-fail test passed".to_string(),
        };
        counts.failed += 1;
        match listed {
            Some(limit) if confirmed(limits, limit) => self
                .limited
                .push(format!("{name}: {} [{message}]", limit.describe())),
            Some(limit) => self.failures.push(format!(
                "{name}: {message} (listed under {limit:?}, which the probe did not confirm)"
            )),
            None => self.failures.push(format!("{name}: {message}")),
        }
    }

    fn print(&self, limits: &[(skips::ServerLimit, Result<bool, String>)]) {
        eprintln!("\n[unified] skipped by rule:");
        for s in &self.skipped {
            eprintln!("  skipped: {s}");
        }
        eprintln!("\n[unified] runner and driver gaps, pending (counted as skips until their work lands):");
        for p in &self.pending {
            eprintln!("  gap: {p}");
        }
        eprintln!("\n[unified] server limitations, probed at start:");
        for (limit, result) in limits {
            eprintln!("  {limit:?}: {result:?}: {}", limit.describe());
        }
        for k in &self.limited {
            eprintln!("  failed: server limitation, checked: {k}");
        }
        for r in &self.reruns {
            eprintln!("  passed on a second run (timing-based): {r}");
        }
        for p in &self.now_passing {
            eprintln!("  WARNING: skip-map entry now passes: {p}");
        }
        for f in &self.failures {
            eprintln!("  FAILED: {f}");
        }
    }
}

/// The lane's deployments with authentication, for the tests that require
/// it (`auth: true`): a `--auth` replica set and standalone with a root
/// user (alice), and simulated mongoses and a load balancer in front of
/// that replica set. Few files need them, so each starts on first use.
#[derive(Default)]
struct AuthDeployments {
    replica_set: OnceLock<TestServer>,
    standalone: OnceLock<TestServer>,
    simulators: OnceLock<(Simulator, Simulator)>,
    deployments: [OnceLock<&'static Deployment>; 4],
}

/// The topologies of the lane's deployments, in the order tests try them.
const TOPOLOGIES: [&str; 4] = ["replicaset", "single", "sharded", "load-balanced"];

impl AuthDeployments {
    fn get(&self, i: usize) -> &'static Deployment {
        self.deployments[i].get_or_init(|| {
            let replica_set = self
                .replica_set
                .get_or_init(|| tls::auth_server_with(false, false));
            let simulators = || {
                self.simulators.get_or_init(|| {
                    (
                        Simulator::mongos(replica_set, 2),
                        Simulator::load_balancer(&[replica_set, replica_set]),
                    )
                })
            };
            let (uri, multi_uri, internal) = match TOPOLOGIES[i] {
                "replicaset" => (
                    format!("mongodb://{}/", replica_set.address()),
                    None,
                    replica_set.uri(),
                ),
                "single" => {
                    let standalone = self
                        .standalone
                        .get_or_init(|| tls::auth_server_with(false, true));
                    (standalone.uri(), None, standalone.uri())
                }
                "sharded" => {
                    let mongoses = &simulators().0;
                    (
                        mongoses.seed_uri(&[0]),
                        Some(mongoses.seed_uri(&[0, 1])),
                        replica_set.uri(),
                    )
                }
                _ => (simulators().1.seed_uri(&[0]), None, replica_set.uri()),
            };
            Box::leak(Box::new(Deployment {
                topology: TOPOLOGIES[i],
                uri: with_credentials(&uri),
                multi_uri: multi_uri.as_deref().map(with_credentials),
                internal: Client::with_uri_str(with_credentials(&internal))
                    .expect("internal client"),
            }))
        })
    }
}

/// `uri` (`mongodb://hosts/...`) logged in as the `--auth` servers' root user.
fn with_credentials(uri: &str) -> String {
    let rest = uri.strip_prefix("mongodb://").unwrap_or(uri);
    let separator = if rest.contains('?') { "&" } else { "?" };
    format!(
        "mongodb://alice:{}@{rest}{separator}authSource=admin",
        tls::encoded(tls::PASSWORD)
    )
}

/// Whether a test's or file's requirements ask for authentication.
fn wants_auth(requirements: Option<&Vec<Bson>>) -> bool {
    requirements.into_iter().flatten().any(|r| {
        r.as_document()
            .is_some_and(|r| r.get_bool("auth") == Ok(true) || r.contains_key("authMechanism"))
    })
}

fn run_one(
    file: &Document,
    test: &Document,
    relative: &str,
    (plain, auth): (&'static [Deployment], &AuthDeployments),
    version: &[i64],
) -> Result<(), Failure> {
    if relative.contains("unified-test-format/tests/invalid/") {
        return Err(Failure::Skip(skips::INVALID_FILES.into()));
    }
    let schema = file.get_str("schemaVersion").unwrap_or("0");
    if !schema.starts_with("1.") {
        // unified-test-format.md: "Test runners MUST NOT process
        // incompatible files and MUST raise an error if they encounter an
        // incompatible file".
        return Err(Failure::Fail(format!(
            "schemaVersion {schema} not supported (the runner supports 1.x)"
        )));
    }
    if let Ok(reason) = test.get_str("skipReason") {
        return Err(Failure::Skip(format!("{}: {reason}", skips::SKIP_REASON)));
    }
    if let Some(defect) = skips::spec_defect(relative, file, test) {
        return Err(defect);
    }
    let file_requirements = file.get_array("runOnRequirements").ok();
    let test_requirements = test.get_array("runOnRequirements").ok();
    let plain_lookups: Vec<Box<dyn Fn() -> &'static Deployment>> = plain
        .iter()
        .map(|d| Box::new(move || d) as Box<dyn Fn() -> &'static Deployment>)
        .collect();
    let auth_lookups: Vec<Box<dyn Fn() -> &'static Deployment + '_>> = (0..TOPOLOGIES.len())
        .map(|i| Box::new(move || auth.get(i)) as Box<dyn Fn() -> &'static Deployment + '_>)
        .collect();
    let mut candidates: Vec<Candidate> = plain
        .iter()
        .zip(&plain_lookups)
        .map(|(d, lookup)| Candidate {
            topology: d.topology,
            auth: false,
            deployment: lookup.as_ref(),
        })
        .collect();
    if wants_auth(file_requirements) || wants_auth(test_requirements) {
        candidates.extend(
            TOPOLOGIES
                .iter()
                .zip(&auth_lookups)
                .map(|(topology, lookup)| Candidate {
                    topology,
                    auth: true,
                    deployment: lookup.as_ref(),
                }),
        );
    }
    let mut reasons = Vec::new();
    for candidate in candidates {
        let unmet = requirements_unmet(file_requirements, candidate, version)
            .or_else(|| requirements_unmet(test_requirements, candidate, version));
        let name = if candidate.auth {
            format!("{} --auth", candidate.topology)
        } else {
            candidate.topology.to_string()
        };
        match unmet {
            Some(reason) => reasons.push(format!("{name}: {reason}")),
            None => {
                return run_with_time_limit(file, test, (candidate.deployment)(), relative);
            }
        }
    }
    Err(Failure::Skip(format!(
        "{}{}",
        skips::NO_DEPLOYMENT,
        reasons.join("; ")
    )))
}

/// The directory whose tests are timing-based: "there is a risk that
/// some of them may intermittently fail without any bugs being present in
/// the driver" (client-side-operations-timeout/tests/README.md). A failure
/// there runs once more, and the report lists each test that passed only
/// on its second run.
const TIMING_BASED: &str = "client-side-operations-timeout/";

/// minHeartbeatFrequencyMS for the clients of tests that set fail points.
const FAIL_POINT_MIN_HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(50);

/// Whether `test` sets a fail point (unified-test-format.md: "If the test
/// might execute a configureFailPoint command").
fn sets_fail_points(test: &Document) -> bool {
    test.get_array("operations").is_ok_and(|operations| {
        operations.iter().any(|o| {
            o.as_document()
                .and_then(|o| o.get_str("name").ok())
                .is_some_and(|name| name == "failPoint" || name == "targetedFailPoint")
        })
    })
}

/// How a hung test's failure starts.
const HUNG: &str = "hung:";

/// How long one test may take before the runner calls it hung.
const TEST_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs the test on its own thread so that a hang (a driver waiting for a
/// reply that never comes) fails that test instead of the whole run; the
/// hung thread is told to stop at its next operation (it cannot be
/// interrupted while blocked), and the lane frees its servers.
fn run_with_time_limit(
    file: &Document,
    test: &Document,
    deployment: &'static Deployment,
    relative: &str,
) -> Result<(), Failure> {
    let (file, test) = (file.clone(), test.clone());
    // The client-backpressure files (and the transactions suite's
    // backpressure-* files) test the published policy, which is opt-in here
    // (the seed's default policy has its own tests).
    let published_backpressure = relative.starts_with("client-backpressure/")
        || spec::name(Path::new(relative)).starts_with("backpressure-");
    let (tx, rx) = std::sync::mpsc::channel();
    let mut run = TestRun::new(deployment);
    if published_backpressure {
        run = run.with_default_uri_option("maxAdaptiveRetries", "2");
    }
    // A fail point's error marks the server Unknown, and the retry's
    // rescan waits minHeartbeatFrequencyMS (500 ms): most of the suite's
    // time went into those waits (a serverErrors file of ten tests took
    // 5 s). unified-test-format.md: "If the test might execute a
    // configureFailPoint command, for each target client the test runner MAY
    // specify a reduced value for heartbeatFrequencyMS (and
    // minHeartbeatFrequencyMS if possible)"; never for a client whose
    // uriOptions set heartbeatFrequencyMS (TestRun sees to that).
    if sets_fail_points(&test) {
        run = run.with_min_heartbeat_frequency(FAIL_POINT_MIN_HEARTBEAT);
    }
    let abandon = run.abandon_flag();
    std::thread::spawn(move || {
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.run_test(&file, &test)))
                .unwrap_or_else(|panic| {
                    let text = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panicked".to_string());
                    Err(Failure::Broken(format!("panicked: {text}")))
                });
        let _ = tx.send(outcome);
    });
    rx.recv_timeout(TEST_TIME_LIMIT).unwrap_or_else(|_| {
        abandon.store(true, std::sync::atomic::Ordering::Relaxed);
        Err(Failure::Broken(format!(
            "{HUNG} no outcome after {TEST_TIME_LIMIT:?}"
        )))
    })
}

/// Every `.json` file under `dir` that declares a `schemaVersion` (the
/// unified format), except the format's JSON schemas themselves.
fn collect_unified_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_unified_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json")
            && !spec::name(&path).starts_with("schema-")
        {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if text.contains("\"schemaVersion\"") && text.contains("\"tests\"") {
                out.push(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        name: &str,
        outcome: Result<(), Failure>,
        valid_fail: bool,
        confirmed: bool,
    ) -> (Counts, Report) {
        let limits = vec![(
            skips::ServerLimit::SnapshotReadsSeeLaterWrites,
            Ok(confirmed),
        )];
        let mut counts = Counts::default();
        let mut report = Report::default();
        report.record(&mut counts, name, outcome, valid_fail, &limits);
        (counts, report)
    }

    #[test]
    fn a_valid_fail_test_passes_only_with_the_expected_kind_of_failure() {
        let fail = || Err(Failure::Fail("undefined entity".into()));
        let (counts, _) = record("valid-fail/x.json: t", fail(), true, true);
        assert_eq!(counts.passed, 1);
        for broken in ["panicked: boom", "hung: no outcome"] {
            let (counts, report) = record(
                "valid-fail/x.json: t",
                Err(Failure::Broken(broken.into())),
                true,
                true,
            );
            assert_eq!((counts.passed, counts.failed), (0, 1));
            assert_eq!(report.failures.len(), 1);
        }
        let (counts, report) = record("valid-fail/x.json: t", Ok(()), true, true);
        assert_eq!((counts.failed, report.failures.len()), (1, 1));
    }

    #[test]
    fn a_known_failure_is_counted_failed_and_excused_only_while_its_limit_is_confirmed() {
        let name = "sessions/tests/snapshot-sessions.json: Find operation with snapshot";
        let fail = || Err(Failure::Fail("x: expected 11, found 13".into()));
        let (counts, report) = record(name, fail(), false, true);
        assert_eq!((counts.failed, counts.skipped), (1, 0));
        assert_eq!((report.limited.len(), report.failures.len()), (1, 0));
        // The probe no longer finds the limitation: a plain failure.
        let (counts, report) = record(name, fail(), false, false);
        assert_eq!(counts.failed, 1);
        assert_eq!((report.limited.len(), report.failures.len()), (0, 1));
        // An unlisted failure is never excused.
        let (_, report) = record("crud/x.json: t", fail(), false, true);
        assert_eq!(report.failures.len(), 1);
    }
}
