//! Runs every case of the URI-options spec tests (`uri-options/tests/*.json`)
//! through `ClientOptions::parse_with_warnings`.

mod support;

#[path = "support/uri_spec.rs"]
mod uri_spec;

use support::spec::{self, Report};

/// Cases that need a feature the project does not have yet: (file, description, reason).
const SKIPS: &[(&str, &str, &str)] = &[];

#[test]
fn uri_options_spec() {
    let Some(dir) = spec::dir("uri-options/tests") else {
        return;
    };
    let mut report = Report::new("uri-options");
    uri_spec::run_dir(&mut report, &dir, SKIPS);
    report.finish();
}
