//! Runs every case of the connection-string spec tests
//! (`connection-string/tests/*.json`) through `ClientOptions::parse_with_warnings`.

mod support;

#[path = "support/uri_spec.rs"]
mod uri_spec;

use support::spec::{self, Report};

/// Cases that need a feature the project does not have yet: (file, description, reason).
const SKIPS: &[(&str, &str, &str)] = &[];

#[test]
fn connection_string_spec() {
    let Some(dir) = spec::dir("connection-string/tests") else {
        return;
    };
    let mut report = Report::new("connection-string");
    uri_spec::run_dir(&mut report, &dir, SKIPS);
    report.finish();
}
