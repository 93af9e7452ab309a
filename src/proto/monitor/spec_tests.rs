//! The specs' JSON tests driven through the monitor, on virtual time.
//!
//! - SDAM (`server-discovery-and-monitoring/tests/{single,rs,sharded,
//!   load-balanced,errors,monitoring}`): each response is a check's result
//!   reported with [`Monitor::on_check`] as the shell reports it (an empty
//!   one a network error, `ok: 0` a command error), each applicationError
//!   becomes the error an operation would have met, classified as the shell
//!   does (`ApplicationError::from_error`) and handed to
//!   [`Monitor::on_application_error`]; then the phase's outcome is
//!   compared with [`Monitor::description`] or with the events returned.
//!   Each file runs twice: responses reported as they come, then "in
//!   scans": each phase starts a selection on a stale topology, the
//!   responses answer the scan it hands out, the monitor is polled after
//!   each as the shell does, and a known server's network failure, held
//!   for the immediate retry, fails the retry the same way.
//! - Server selection (`server-selection/tests/server_selection/**`,
//!   `in_window/` as a uniform pick, see [`in_window`]) and
//!   max staleness (`max-staleness/tests/**`): a monitor whose last scan
//!   found the test's topology selects with [`Monitor::poll`]. A server
//!   comes out at once and from the latency window, and every member of
//!   the window comes out for some seed of the monitor's randomness; the
//!   scan is reused until the file's heartbeatFrequencyMS, then redone. An
//!   empty window selects nothing: with serverSelectionTryOnce the monitor
//!   sleeps until minHeartbeatFrequencyMS after the last scan, checks every
//!   server once and fails; without it, it fails with the operation's
//!   timeout by the operation's deadline. A case with `error: true` fails
//!   at once, before any check.
//!
//! The pure rules keep their own runners (`crate::spec_tests`: sdam,
//! server_selection, max_staleness). The file readers and the outcome
//! comparisons are theirs, shared so that both runners read the files the
//! same way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use bson::Document;

use super::{CheckOutcome, Monitor, MonitorSettings, Next};
use crate::error::{Error, ErrorKind};
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::proto::operation::check_single_write;
use crate::proto::options::{DEFAULT_HEARTBEAT_FREQUENCY, DEFAULT_SERVER_SELECTION_TIMEOUT};
use crate::proto::read_preference::{ReadPreference, ReadPreferenceMode};
use crate::proto::reply::check_reply;
use crate::proto::sdam::{ApplicationError, TopologyDescription, TopologyType, TopologyUpdate};
use crate::proto::select::{Criteria, SelectionSettings};
use crate::spec_tests::files::{self as spec, Report};
use crate::spec_tests::sdam_fixture::{self, FixtureError, SdamDriver};
use crate::spec_tests::selection_fixture;

/// The round trip every simulated check takes.
const CHECK_RTT: Duration = Duration::from_millis(1);

/// The spec's minHeartbeatFrequencyMS, written out so the runner does not
/// take the monitor's word for it.
const MIN_HEARTBEAT_FREQUENCY: Duration = Duration::from_millis(500);

/// The operation's timeoutMS when an empty window is selected from without
/// serverSelectionTryOnce.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(2);

/// The time between two phases run in scans: longer than a cooldown.
const PHASE_GAP: Duration = Duration::from_secs(10);

/// How many seeds each selection case runs with.
const SEEDS: u64 = 64;

fn settings(heartbeat: Duration, try_once: bool) -> MonitorSettings {
    MonitorSettings {
        heartbeat_frequency: heartbeat,
        server_selection_timeout: DEFAULT_SERVER_SELECTION_TIMEOUT,
        try_once,
        min_heartbeat_frequency: MIN_HEARTBEAT_FREQUENCY,
        selection: SelectionSettings::new(selection_fixture::LOCAL_THRESHOLD, heartbeat),
    }
}

/// A check that failed with a network error.
fn unreachable(address: &ServerAddress) -> CheckOutcome {
    let io = std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "network error during hello (simulated)",
    );
    CheckOutcome::Failed(Error::network(Some(address.clone()), "hello", io))
}

// ---- SDAM ----

/// The SDAM files' phases, acted out on a monitor.
struct MonitorSdam {
    monitor: Monitor,
    /// Each phase's responses are the results of a scan the monitor
    /// started: a known server's network failure is then held for the
    /// immediate retry, which fails the same way.
    in_scans: bool,
    /// Added to every instant: a phase in scans starts well after the last
    /// one's cooldowns.
    offset: Duration,
    retries: usize,
}

/// A check's result as the shell reports it: an `ok: 0` reply is a command
/// error, an empty one a network error.
fn check_outcome(address: &ServerAddress, reply: &Document) -> CheckOutcome {
    if reply.is_empty() {
        return unreachable(address);
    }
    match check_reply(reply.clone(), address) {
        Ok(reply) => CheckOutcome::Reply(reply),
        Err(error) => CheckOutcome::Failed(error),
    }
}

impl SdamDriver for MonitorSdam {
    fn description(&self) -> &TopologyDescription {
        self.monitor.description()
    }

    fn begin_phase(&mut self, now: Instant) {
        if !self.in_scans {
            return;
        }
        self.offset += PHASE_GAP;
        let mut now = now + self.offset;
        // Stale: the selection scans first, however recent the last scan.
        self.monitor.mark_stale();
        self.monitor
            .start_selection(Criteria::Write, &[], "insert", now);
        // Hands out the checks the phase's responses answer (a load
        // balancer is not scanned: it selects at once).
        // The scan dropped unfinished delays the next one by
        // minHeartbeatFrequencyMS: sleep as the shell would.
        while let Next::SleepUntil(t) = self.monitor.poll(now, Deadline::NONE) {
            self.offset += t - now;
            now = t;
        }
    }

    fn response(
        &mut self,
        address: &ServerAddress,
        reply: &Document,
        now: Instant,
    ) -> TopologyUpdate {
        let now = now + self.offset;
        let mut update =
            self.monitor
                .on_check(address, check_outcome(address, reply), CHECK_RTT, now);
        if !self.in_scans {
            return update;
        }
        // As the shell does after each result: members just discovered
        // are handed out, and a held failure comes back for its retry.
        if let Next::Check(addresses) = self.monitor.poll(now, Deadline::NONE) {
            if reply.is_empty() && addresses.contains(address) {
                self.retries += 1;
                let retried =
                    self.monitor
                        .on_check(address, check_outcome(address, reply), CHECK_RTT, now);
                update.events.extend(retried.events);
            }
        }
        update
    }

    /// As the shell reports an operation's error: the error the socket or
    /// the reply gave, classified by `ApplicationError::from_error`.
    fn application_error(
        &mut self,
        fixture: &FixtureError,
        now: Instant,
    ) -> Result<TopologyUpdate, String> {
        let address = sdam_fixture::address(&fixture.address)?;
        let error = operation_error(&address, fixture)?;
        let generation = sdam_fixture::generation(self.monitor.description(), fixture, &address);
        let now = now + self.offset;
        let application_error = ApplicationError::from_error(
            address,
            &error,
            sdam_fixture::handshake_phase(fixture)?,
            generation,
            fixture.max_wire_version,
        );
        // An error SDAM does not look at (a write error) the shell keeps
        // from the monitor.
        Ok(match application_error {
            Some(application_error) => self.monitor.on_application_error(&application_error, now).1,
            None => TopologyUpdate::default(),
        })
    }
}

/// The error an operation on `address` met, as the shell would have it.
fn operation_error(address: &ServerAddress, fixture: &FixtureError) -> Result<Error, String> {
    let io = |kind, message| std::io::Error::new(kind, message);
    match (fixture.error_type.as_str(), &fixture.response) {
        ("network", None) => Ok(Error::network(
            Some(address.clone()),
            "reading a reply",
            io(
                std::io::ErrorKind::ConnectionReset,
                "connection reset (simulated)",
            ),
        )),
        ("timeout", None) => Ok(Error::network(
            Some(address.clone()),
            "reading a reply",
            io(std::io::ErrorKind::TimedOut, "timed out (simulated)"),
        )),
        // An `ok: 1` reply may still carry a write's failure.
        ("command", Some(response)) => match check_reply(response.clone(), address)
            .and_then(|reply| check_single_write(&reply))
        {
            Err(error) => Ok(error),
            Ok(()) => Err(format!(
                "the command error's response is not an error: {response}"
            )),
        },
        (other, response) => Err(format!(
            "unsupported applicationError type {other:?} (response present: {})",
            response.is_some()
        )),
    }
}

/// Runs every file of the directory twice: responses reported as they
/// come, and responses answering scans the monitor started.
fn run_sdam_directory(relative: &str) {
    let Some(dir) = spec::dir(&format!("server-discovery-and-monitoring/tests/{relative}")) else {
        return;
    };
    let mut reports = Vec::new();
    for in_scans in [false, true] {
        let mode = if in_scans { " (in scans)" } else { "" };
        let mut report = Report::new(format!("monitor{mode}: sdam/{relative}"));
        let mut retries = 0;
        for path in spec::json_files(&dir) {
            let file = spec::name(&path);
            let test: sdam_fixture::TestFile = spec::load_as(&path);
            report.run(&file, &test.description, || {
                run_sdam_file(&test, in_scans, &mut retries)
            });
        }
        if in_scans {
            eprintln!("[monitor (in scans): sdam/{relative}] {retries} network failure(s) of known servers retried at once");
        }
        reports.push(report);
    }
    spec::finish_all(reports);
}

fn run_sdam_file(
    test: &sdam_fixture::TestFile,
    in_scans: bool,
    retries: &mut usize,
) -> Result<(), String> {
    let base = Instant::now();
    let mut elapsed = Duration::ZERO;
    // Each response and error a millisecond after the one before.
    let clock = move || {
        elapsed += Duration::from_millis(1);
        base + elapsed
    };
    let start = |description| MonitorSdam {
        monitor: Monitor::new(
            description,
            settings(DEFAULT_HEARTBEAT_FREQUENCY, true),
            fastrand::Rng::with_seed(1),
        ),
        in_scans,
        offset: Duration::ZERO,
        retries: 0,
    };
    let driver = sdam_fixture::run_file(test, start, clock)?;
    *retries += driver.retries;
    Ok(())
}

#[test]
fn sdam_single() {
    run_sdam_directory("single");
}

#[test]
fn sdam_replica_sets() {
    run_sdam_directory("rs");
}

#[test]
fn sdam_sharded() {
    run_sdam_directory("sharded");
}

#[test]
fn sdam_load_balanced() {
    run_sdam_directory("load-balanced");
}

#[test]
fn sdam_errors() {
    run_sdam_directory("errors");
}

#[test]
fn sdam_monitoring() {
    run_sdam_directory("monitoring");
}

// ---- Server selection and max staleness ----

/// One selection case: the topology its last scan found, and what to
/// select.
struct SelectionCase {
    description: TopologyDescription,
    criteria: Criteria,
    deprioritized: Vec<ServerAddress>,
    heartbeat: Duration,
    /// When the scan that found the topology ended (the latest
    /// lastUpdateTime): the selection starts then.
    scan_end: Instant,
}

impl SelectionCase {
    fn read(test: &Document) -> Result<SelectionCase, String> {
        let base = Instant::now();
        let description = selection_fixture::topology(test, base)?;
        let scan_end = description
            .servers
            .values()
            .filter_map(|s| s.last_update_time)
            .max()
            .unwrap_or(base);
        Ok(SelectionCase {
            description,
            criteria: selection_fixture::criteria(test)?,
            deprioritized: selection_fixture::deprioritized(test)?,
            heartbeat: selection_fixture::heartbeat(test)?,
            scan_end,
        })
    }

    /// A monitor over the case's topology, its selection started when the
    /// scan ended.
    fn start(&self, seed: u64, try_once: bool) -> Monitor {
        self.start_at(seed, try_once, self.scan_end)
    }

    /// A monitor over the case's topology, its selection started at `at`.
    fn start_at(&self, seed: u64, try_once: bool, at: Instant) -> Monitor {
        let mut monitor = Monitor::scanned(
            self.description.clone(),
            settings(self.heartbeat, try_once),
            fastrand::Rng::with_seed(seed),
            self.scan_end,
        );
        let operation = match self.criteria {
            Criteria::Write => "insert",
            _ => "find",
        };
        monitor.start_selection(self.criteria.clone(), &self.deprioritized, operation, at);
        monitor
    }

    /// The scan is reused until heartbeatFrequencyMS has passed: a
    /// millisecond before, the selection comes from the window at once; at
    /// heartbeatFrequencyMS it checks every server first. A load balancer
    /// is never scanned.
    fn rescans_after_heartbeat_frequency(&self, window: &BTreeSet<String>) -> Result<(), String> {
        let just_before = self.scan_end + self.heartbeat - Duration::from_millis(1);
        match self
            .start_at(0, true, just_before)
            .poll(just_before, Deadline::NONE)
        {
            Next::Selected(address) if window.contains(&address.to_string()) => {}
            other => {
                return Err(format!(
                    "just before heartbeatFrequencyMS: expected a selection from {window:?}, \
                     got {other:?}"
                ))
            }
        }
        let due = self.scan_end + self.heartbeat;
        let next = self.start_at(0, true, due).poll(due, Deadline::NONE);
        if self.description.topology_type == TopologyType::LoadBalanced {
            return match next {
                Next::Selected(address) if window.contains(&address.to_string()) => Ok(()),
                other => Err(format!(
                    "load balanced: expected a selection, got {other:?}"
                )),
            };
        }
        let all: BTreeSet<String> = self
            .description
            .servers
            .keys()
            .map(|a| a.to_string())
            .collect();
        match next {
            Next::Check(addresses) => {
                let checked: BTreeSet<String> = addresses.iter().map(|a| a.to_string()).collect();
                if checked == all {
                    Ok(())
                } else {
                    Err(format!(
                        "at heartbeatFrequencyMS: checked {checked:?}, expected {all:?}"
                    ))
                }
            }
            other => Err(format!(
                "at heartbeatFrequencyMS: expected a scan of {all:?}, got {other:?}"
            )),
        }
    }

    /// Every seed selects at once from the window, and each member of the
    /// window comes out for some seed.
    fn selects_from(&self, window: &BTreeSet<String>) -> Result<(), String> {
        let mut picked = BTreeSet::new();
        for seed in 0..SEEDS {
            match self.start(seed, true).poll(self.scan_end, Deadline::NONE) {
                Next::Selected(address) if window.contains(&address.to_string()) => {
                    picked.insert(address.to_string());
                }
                Next::Selected(address) => {
                    return Err(format!(
                        "seed {seed}: selected {address}, outside the window {window:?}"
                    ))
                }
                other => {
                    return Err(format!(
                        "seed {seed}: expected a selection from {window:?} at once, got {other:?}"
                    ))
                }
            }
        }
        if &picked != window {
            return Err(format!(
                "over {SEEDS} seeds only {picked:?} of the window {window:?} came out"
            ));
        }
        Ok(())
    }

    /// `error: true`: the selection fails at once, before any check.
    fn fails_at_once(&self) -> Result<(), String> {
        for seed in 0..4 {
            match self.start(seed, true).poll(self.scan_end, Deadline::NONE) {
                Next::Failed(_) => {}
                other => return Err(format!("seed {seed}: expected an error, got {other:?}")),
            }
        }
        Ok(())
    }

    /// An empty window with serverSelectionTryOnce (the single-threaded
    /// default): sleep until minHeartbeatFrequencyMS after the last scan,
    /// check every server (they no longer answer), fail with a server
    /// selection error. A load balancer is never scanned: fail at once.
    fn finds_nothing_after_one_scan(&self) -> Result<(), String> {
        let mut monitor = self.start(0, true);
        let mut now = self.scan_end;
        let load_balanced = self.description.topology_type == TopologyType::LoadBalanced;
        if !load_balanced {
            let rescan = self.scan_end + MIN_HEARTBEAT_FREQUENCY;
            match monitor.poll(now, Deadline::NONE) {
                Next::SleepUntil(t) if t == rescan => now = t,
                other => {
                    return Err(format!(
                        "tryOnce: expected to sleep until minHeartbeatFrequencyMS after the \
                         last scan, got {other:?}"
                    ))
                }
            }
        }
        let mut checked = BTreeSet::new();
        for _ in 0..10 {
            match monitor.poll(now, Deadline::NONE) {
                Next::Check(addresses) => {
                    now = report_unreachable(&mut monitor, &addresses, now);
                    checked.extend(addresses.iter().map(|a| a.to_string()));
                }
                Next::Failed(error)
                    if matches!(error.kind(), ErrorKind::ServerSelection { .. }) =>
                {
                    let all: BTreeSet<String> = if load_balanced {
                        BTreeSet::new()
                    } else {
                        self.description
                            .servers
                            .keys()
                            .map(|a| a.to_string())
                            .collect()
                    };
                    if checked != all {
                        return Err(format!(
                            "tryOnce: the scan checked {checked:?}, expected {all:?}"
                        ));
                    }
                    return Ok(());
                }
                other => return Err(format!("tryOnce: unexpected {other:?}")),
            }
        }
        Err("tryOnce: no failure after 10 polls".into())
    }

    /// An empty window without serverSelectionTryOnce, under timeoutMS:
    /// nothing is selected, and the selection fails with the operation's
    /// timeout no later than its deadline.
    fn finds_nothing_by_the_deadline(&self) -> Result<(), String> {
        let mut monitor = self.start(1, false);
        let mut now = self.scan_end;
        let end = self.scan_end + OPERATION_TIMEOUT;
        let deadline = Deadline::at(end);
        for _ in 0..100 {
            match monitor.poll(now, deadline) {
                Next::Check(addresses) => {
                    now = report_unreachable(&mut monitor, &addresses, now);
                }
                Next::SleepUntil(t) if t > now && t <= end => now = t,
                Next::Failed(error) if matches!(error.kind(), ErrorKind::Timeout { .. }) => {
                    return if now <= end {
                        Ok(())
                    } else {
                        Err(format!("failed {:?} after the deadline", now - end))
                    };
                }
                other => return Err(format!("timeoutMS: unexpected {other:?}")),
            }
        }
        Err("timeoutMS: no failure after 100 polls".into())
    }
}

/// Every server in `addresses` fails its check, a millisecond apart from
/// `now`; returns the time after the last.
fn report_unreachable(
    monitor: &mut Monitor,
    addresses: &[ServerAddress],
    mut now: Instant,
) -> Instant {
    for address in addresses {
        now += CHECK_RTT;
        let _ = monitor.on_check(address, unreachable(address), CHECK_RTT, now);
    }
    now
}

fn run_selection_case(test: &Document) -> Result<(), String> {
    if selection_fixture::refused_early(test) {
        return Ok(());
    }
    let case = SelectionCase::read(test)?;
    if test.get_bool("error").unwrap_or(false) {
        return case.fails_at_once();
    }
    let window = selection_fixture::addresses(test, "in_latency_window")?;
    if window.is_empty() {
        case.finds_nothing_after_one_scan()?;
        case.finds_nothing_by_the_deadline()
    } else {
        case.selects_from(&window)?;
        case.rescans_after_heartbeat_frequency(&window)
    }
}

/// Runs every file of `dir`, named `prefix/<file>` in the report.
fn run_selection_directory(report: &mut Report, dir: &Path, prefix: &str) {
    for path in spec::json_files(dir) {
        let file = format!("{prefix}/{}", spec::name(&path));
        let test = spec::load(&path);
        report.run(&file, "selection", || run_selection_case(&test));
    }
}

/// The directories directly in `dir`, sorted.
fn subdirectories(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn server_selection() {
    let Some(root) = spec::dir("server-selection/tests/server_selection") else {
        return;
    };
    let mut reports = Vec::new();
    for topology_dir in subdirectories(&root) {
        for operation_dir in subdirectories(&topology_dir) {
            let prefix = format!(
                "{}/{}",
                spec::name(&topology_dir),
                spec::name(&operation_dir)
            );
            let mut report = Report::new(format!("monitor: server_selection/{prefix}"));
            run_selection_directory(&mut report, &operation_dir, &prefix);
            reports.push(report);
        }
    }
    spec::finish_all(reports);
}

#[test]
fn max_staleness() {
    let Some(root) = spec::dir("max-staleness/tests") else {
        return;
    };
    let mut reports = Vec::new();
    for topology_dir in subdirectories(&root) {
        let prefix = spec::name(&topology_dir);
        let mut report = Report::new(format!("monitor: max-staleness/{prefix}"));
        run_selection_directory(&mut report, &topology_dir, &prefix);
        reports.push(report);
    }
    spec::finish_all(reports);
}

/// The in_window files through one monitor selecting again and again with
/// Nearest: every pick is one of the servers (all in the window), and the
/// monitor's randomness spreads the picks uniformly.
#[test]
fn in_window() {
    selection_fixture::run_in_window(
        "monitor: server-selection/in_window",
        "uniform pick from the window",
        picks_uniformly,
    );
}

fn picks_uniformly(test: &Document) -> Result<(), String> {
    let now = Instant::now();
    let description = selection_fixture::topology(test, now)?;
    let all: BTreeSet<String> = description.servers.keys().map(|a| a.to_string()).collect();
    let (draws, tolerance) = selection_fixture::in_window_draws(test)?;
    let mut monitor = Monitor::scanned(
        description,
        settings(DEFAULT_HEARTBEAT_FREQUENCY, true),
        fastrand::Rng::with_seed(2024),
        now,
    );
    let nearest = Criteria::ReadPreference(ReadPreference::with_mode(ReadPreferenceMode::Nearest));
    let mut counts = BTreeMap::new();
    for draw in 0..draws {
        monitor.start_selection(nearest.clone(), &[], "find", now);
        match monitor.poll(now, Deadline::NONE) {
            Next::Selected(address) => *counts.entry(address.to_string()).or_default() += 1,
            other => return Err(format!("draw {draw}: expected a selection, got {other:?}")),
        }
    }
    selection_fixture::check_uniform(&counts, &all, tolerance)
}
