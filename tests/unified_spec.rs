//! The unified-format spec tests (CRUD, retryable reads and writes,
//! transactions, sessions, ...) against SecantusDB; see `unified/mod.rs`.
//!
//! `MONGO_SPEC_FILTER=text` runs only the files or tests whose name contains
//! `text`.

mod support;
mod unified;

#[test]
fn unified_format_spec_tests() {
    unified::run_all();
}
