//! Loading the specifications' JSON tests: for the integration tests'
//! runners (unified format, DNS seedlist) and, as `spec_tests::files`, for
//! the crate's own runners of the pure rules.
//!
//! The files live outside the project, in `../shared/spec-tests/<spec>/tests/...`
//! (or under `$MONGO_SPEC_TESTS`, laid out the same way). A runner asks for a
//! directory, gets every `.json` file in it in sorted order, parsed through
//! `bson`'s Extended JSON so `$numberLong` and friends become BSON values, and
//! reports failures by file and test name through [`Report`].
//!
//! When the directory is missing (a clone used outside this workspace) the
//! runner prints a loud notice and skips: nothing to run is not a pass.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use bson::{Bson, Document};

/// The root of the spec test tree: `$MONGO_SPEC_TESTS`, else
/// `<crate>/../shared/spec-tests`.
pub fn root() -> PathBuf {
    match std::env::var_os("MONGO_SPEC_TESTS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/spec-tests"),
    }
}

/// The directory `relative` under [`root`], or `None` (after a loud notice on
/// stderr) when it does not exist.
pub fn dir(relative: &str) -> Option<PathBuf> {
    let path = root().join(relative);
    if path.is_dir() {
        Some(path)
    } else {
        eprintln!(
            "\n!!!!!!!!!! SPEC TESTS NOT FOUND: {} does not exist; set MONGO_SPEC_TESTS to the \
             spec-tests root. SKIPPING {relative}. !!!!!!!!!!\n",
            path.display()
        );
        None
    }
}

/// Every `.json` file directly in `dir`, sorted by name.
pub fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// A JSON file read as a BSON document (Extended JSON understood).
pub fn load(path: &Path) -> Document {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    match Bson::try_from(json) {
        Ok(Bson::Document(d)) => d,
        Ok(other) => panic!("{} is not a JSON object: {other:?}", path.display()),
        Err(e) => panic!("{} is not Extended JSON: {e}", path.display()),
    }
}

/// A JSON file deserialised into a fixture type (Extended JSON understood).
pub fn load_as<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    let doc = load(path);
    bson::from_document(doc)
        .unwrap_or_else(|e| panic!("{} does not match the fixture type: {e}", path.display()))
}

/// The file name, for messages.
pub fn name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `MONGO_SPEC_FILTER`: when set, only tests whose file name or description
/// contains it run.
pub fn selected(file: &str, test: &str) -> bool {
    match std::env::var("MONGO_SPEC_FILTER") {
        Ok(f) if !f.is_empty() => file.contains(&f) || test.contains(&f),
        _ => true,
    }
}

/// Collects the outcome of every case of a runner and fails once at the end,
/// listing every failure by file and test name.
pub struct Report {
    suite: String,
    passed: usize,
    skipped: Vec<String>,
    failed: Vec<String>,
}

impl Report {
    /// A report for the named suite.
    pub fn new(suite: impl Into<String>) -> Self {
        Report {
            suite: suite.into(),
            passed: 0,
            skipped: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// Records one case's result.
    pub fn record<E: Display>(&mut self, file: &str, test: &str, result: Result<(), E>) {
        match result {
            Ok(()) => self.passed += 1,
            Err(e) => self.failed.push(format!("{file}: {test}: {e}")),
        }
    }

    /// Runs one case, turning a panic into a failure of that case only.
    pub fn run<F>(&mut self, file: &str, test: &str, case: F)
    where
        F: FnOnce() -> Result<(), String>,
    {
        if !selected(file, test) {
            return;
        }
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(case)).unwrap_or_else(|panic| {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".to_string());
                Err(format!("panicked: {text}"))
            });
        self.record(file, test, outcome);
    }

    /// Records a case skipped on purpose, with the reason printed at the end.
    pub fn skip(&mut self, file: &str, test: &str, reason: &str) {
        self.skipped.push(format!("{file}: {test}: {reason}"));
    }

    /// Prints the summary and panics if any case failed or none ran.
    pub fn finish(self) {
        if let Err(problem) = self.summarise() {
            panic!("{problem}");
        }
    }

    /// Prints the summary; the problem when a case failed or none ran.
    fn summarise(self) -> Result<(), String> {
        eprintln!(
            "[{}] {} passed, {} failed, {} skipped",
            self.suite,
            self.passed,
            self.failed.len(),
            self.skipped.len()
        );
        for s in &self.skipped {
            eprintln!("  skipped: {s}");
        }
        for f in &self.failed {
            eprintln!("  FAILED: {f}");
        }
        if !self.failed.is_empty() {
            return Err(format!(
                "[{}] {} spec case(s) failed:\n{}",
                self.suite,
                self.failed.len(),
                self.failed.join("\n")
            ));
        }
        let filtered = std::env::var("MONGO_SPEC_FILTER").is_ok_and(|f| !f.is_empty());
        if self.passed == 0 && !filtered {
            return Err(format!("[{}] no spec case ran", self.suite));
        }
        Ok(())
    }
}

/// Finishes one report per directory: prints every summary, then panics
/// if a case of any of them failed or one of them ran nothing.
pub fn finish_all(reports: Vec<Report>) {
    let problems: Vec<String> = reports
        .into_iter()
        .filter_map(|report| report.summarise().err())
        .collect();
    if !problems.is_empty() {
        panic!("{}", problems.join("\n"));
    }
}
