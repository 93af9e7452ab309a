//! The SDAM spec's legacy JSON tests
//! (`server-discovery-and-monitoring/tests/{rs,sharded,single,load-balanced,errors,monitoring}`),
//! driven through the pure rules: [`TopologyDescription::new`] from
//! the file's URI, `check_succeeded`/`check_failed` for each response,
//! `handle_application_error` for each application error, and the outcome
//! compared with the resulting description (or, for `monitoring/`, with
//! the events the calls returned). The files and comparisons are in
//! [`super::sdam_fixture`], shared with the monitor's runner
//! (`proto::monitor::spec_tests`), which drives the same files through
//! the monitor.
//!
//! `tests/unified/` is not run here: it is written in the unified test
//! format, which needs a runner of its own (a later issue) and a server.

use std::path::Path;
use std::time::{Duration, Instant};

use bson::Document;

use super::files::{self as spec, Report};
use super::sdam_fixture::{self, FixtureError, SdamDriver, TestFile};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::{TopologyDescription, TopologyUpdate};

/// The pure rules, called directly.
struct PureSdam(TopologyDescription);

impl SdamDriver for PureSdam {
    fn description(&self) -> &TopologyDescription {
        &self.0
    }

    fn response(
        &mut self,
        address: &ServerAddress,
        reply: &Document,
        now: Instant,
    ) -> TopologyUpdate {
        if reply.is_empty() {
            let error = crate::error::Error::network_message(
                Some(address.clone()),
                "network error during hello (simulated)",
            );
            self.0.check_failed(address, error, now)
        } else {
            self.0
                .check_succeeded(address, reply, Duration::from_millis(1), now)
        }
    }

    fn application_error(
        &mut self,
        fixture: &FixtureError,
        now: Instant,
    ) -> Result<TopologyUpdate, String> {
        let error = sdam_fixture::application_error(&self.0, fixture)?;
        Ok(self.0.handle_application_error(&error, now).1)
    }
}

fn run_file(test: &TestFile) -> Result<(), String> {
    let now = Instant::now();
    sdam_fixture::run_file(test, PureSdam, || now).map(drop)
}

fn run_directory(relative: &str) {
    let Some(dir) = spec::dir(&format!("server-discovery-and-monitoring/tests/{relative}")) else {
        return;
    };
    let mut report = Report::new(format!("sdam/{relative}"));
    for path in spec::json_files(&dir) {
        run_path(&mut report, &path);
    }
    report.finish();
}

fn run_path(report: &mut Report, path: &Path) {
    let file = spec::name(path);
    let test: TestFile = spec::load_as(path);
    let description = test.description.clone();
    report.run(&file, &description, || run_file(&test));
}

#[test]
fn replica_sets() {
    run_directory("rs");
}

#[test]
fn sharded() {
    run_directory("sharded");
}

#[test]
fn single() {
    run_directory("single");
}

#[test]
fn load_balanced() {
    run_directory("load-balanced");
}

#[test]
fn errors() {
    run_directory("errors");
}

#[test]
fn monitoring() {
    run_directory("monitoring");
}
