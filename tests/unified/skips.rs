//! The skip map: unified tests known to fail here, each with the reason
//! (a driver bug routed elsewhere, or a limitation of the test server with
//! the command that shows it). A failure not listed fails the run; a listed
//! test that passes is reported so the entry can go.

/// (file relative to the spec-test root, test description, reason).
pub const KNOWN_FAILURES: &[(&str, &str, &str)] = &[];

/// The reason `file`/`test` is expected to fail, if it is listed.
pub fn known_failure(file: &str, test: &str) -> Option<&'static str> {
    KNOWN_FAILURES
        .iter()
        .find(|(f, t, _)| *f == file && *t == test)
        .map(|(_, _, reason)| *reason)
}
