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
//! entry there that now passes is reported.

pub mod events;
pub mod logs;
pub mod matching;
pub mod runner;
pub mod skips;

use std::collections::BTreeMap;
use std::path::Path;

use bson::{doc, Bson, Document};
use mongo_inline::Client;

use crate::support::server::TestServer;
use crate::support::sim::Simulator;
use crate::support::spec;
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

/// Why `requirement` does not hold for `deployment`, or `None` when it does.
fn unmet(requirement: &Document, deployment: &Deployment, version: &[i64]) -> Option<String> {
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
                let satisfied = wanted.contains(&deployment.topology)
                    || (deployment.topology == "sharded" && wanted.contains(&"sharded-replicaset"));
                (!satisfied).then(|| format!("topologies {wanted:?}"))
            }
            "serverless" => {
                (value.as_str() == Some("require")).then(|| "serverless: require".to_string())
            }
            "auth" => (value.as_bool() == Some(true))
                .then(|| "auth: the test servers run without authentication".to_string()),
            "authMechanism" => Some(format!("authMechanism {value}: no authentication")),
            "csfle" => (value.as_bool() == Some(true)).then(|| "csfle: not built".to_string()),
            "serverParameters" => {
                let wanted = value.as_document().cloned().unwrap_or_default();
                let mut command = doc! { "getParameter": 1 };
                for k in wanted.keys() {
                    command.insert(k, 1);
                }
                match deployment
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
                    .map(|e| format!("serverParameters {wanted}: {e}")),
                    Err(e) => Some(format!(
                        "serverParameters {wanted}: getParameter failed: {e}"
                    )),
                }
            }
            other => Some(format!("unknown runOnRequirements field {other}")),
        };
        if reason.is_some() {
            return reason;
        }
    }
    None
}

/// `None` when one of `requirements` holds (or there are none), else the
/// reasons none does.
fn requirements_unmet(
    requirements: Option<&Vec<Bson>>,
    deployment: &Deployment,
    version: &[i64],
) -> Option<String> {
    let requirements = requirements?;
    let mut reasons = Vec::new();
    for r in requirements {
        match unmet(r.as_document()?, deployment, version) {
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
    let lane_results: Vec<Lane> = std::thread::scope(|scope| {
        let handles: Vec<_> = shards
            .iter()
            .map(|shard| scope.spawn(|| run_lane(&root, shard)))
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
        "| total ({} files, {lanes} lanes) | {} | {} (of which {} server limitation, checked) | {} |",
        files.len(),
        total.passed,
        total.failed,
        report.limited.len(),
        total.skipped
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

/// Runs `files` against deployments of the lane's own.
fn run_lane(root: &Path, files: &[std::path::PathBuf]) -> Lane {
    let replica_set = TestServer::start();
    let standalone = TestServer::start_standalone();
    // Sharded and load-balanced deployments are simulated: two mongoses, and
    // a load balancer over two backends (so two serviceIds), all answering
    // hello themselves and forwarding every other command to the replica
    // set, which gives them transactions and retryable writes.
    let mongoses = Simulator::mongos(&replica_set, 2);
    let balancer = Simulator::load_balancer(&[&replica_set, &replica_set]);
    let internal = || Client::with_uri_str(replica_set.uri()).expect("internal client");
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
            internal: Client::with_uri_str(standalone.uri()).expect("internal client"),
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
    let mut table: BTreeMap<String, Counts> = BTreeMap::new();
    let mut report = Report::default();

    for path in files {
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
            let outcome = match skips::single_threaded_rule(&relative, &description) {
                Some(rule) => Err(Failure::Skip(format!("single-threaded: {rule}"))),
                None => run_one(&file, test, &relative, deployments, &version),
            };
            let name = format!("{relative}: {description}");
            report.record(counts, &name, outcome, expect_failure, &limits);
        }
        if std::env::var_os("UNIFIED_PROGRESS").is_some() {
            eprintln!("[unified] {relative}: {:?}", started.elapsed());
        }
    }
    Lane {
        table,
        report,
        limits,
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
    /// Failures the skip map excuses with a limitation the probe confirmed.
    limited: Vec<String>,
    /// Failures that fail the run.
    failures: Vec<String>,
    now_passing: Vec<String>,
}

impl Report {
    /// Lanes finish in any order; sorted, the listing reads the same on
    /// every run.
    fn sort(&mut self) {
        self.skipped.sort();
        self.limited.sort();
        self.failures.sort();
        self.now_passing.sort();
    }

    fn merge(&mut self, other: Report) {
        self.skipped.extend(other.skipped);
        self.limited.extend(other.limited);
        self.failures.extend(other.failures);
        self.now_passing.extend(other.now_passing);
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
            (Err(Failure::Skip(reason)), _) => {
                counts.skipped += 1;
                self.skipped.push(format!("{name}: {reason}"));
                return;
            }
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
        eprintln!("\n[unified] server limitations, probed at start:");
        for (limit, result) in limits {
            eprintln!("  {limit:?}: {result:?}: {}", limit.describe());
        }
        for k in &self.limited {
            eprintln!("  failed: server limitation, checked: {k}");
        }
        for p in &self.now_passing {
            eprintln!("  WARNING: skip-map entry now passes: {p}");
        }
        for f in &self.failures {
            eprintln!("  FAILED: {f}");
        }
    }
}

fn run_one(
    file: &Document,
    test: &Document,
    relative: &str,
    deployments: &'static [Deployment],
    version: &[i64],
) -> Result<(), Failure> {
    if relative.contains("unified-test-format/tests/invalid/") {
        return Err(Failure::Skip(
            "schema-invalid file: the runner does not validate files against the JSON schema"
                .into(),
        ));
    }
    let schema = file.get_str("schemaVersion").unwrap_or("0");
    if !schema.starts_with("1.") {
        return Err(Failure::Skip(format!(
            "schemaVersion {schema} not supported"
        )));
    }
    if let Ok(reason) = test.get_str("skipReason") {
        return Err(Failure::Skip(format!("skipReason: {reason}")));
    }
    let mut reasons = Vec::new();
    for deployment in deployments {
        let unmet = requirements_unmet(
            file.get_array("runOnRequirements").ok(),
            deployment,
            version,
        )
        .or_else(|| {
            requirements_unmet(
                test.get_array("runOnRequirements").ok(),
                deployment,
                version,
            )
        });
        match unmet {
            Some(reason) => reasons.push(format!("{}: {reason}", deployment.topology)),
            None => return run_with_time_limit(file, test, deployment, relative),
        }
    }
    Err(Failure::Skip(format!(
        "no deployment here satisfies it — {}",
        reasons.join("; ")
    )))
}

/// How long one test may take before the runner calls it hung.
const TEST_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// Runs the test on its own thread so that a hang (a driver waiting for a
/// reply that never comes) fails that test instead of the whole run; the
/// hung thread is left behind, blocked on its socket, until the process ends.
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
    std::thread::spawn(move || {
        let mut run = TestRun::new(deployment);
        if published_backpressure {
            run = run.with_default_uri_option("maxAdaptiveRetries", "2");
        }
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
        Err(Failure::Broken(format!(
            "hung: no outcome after {TEST_TIME_LIMIT:?}"
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
