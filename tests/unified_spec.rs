//! The unified-format spec tests (CRUD, retryable reads and writes,
//! transactions, sessions, ...) against SecantusDB; see `unified/mod.rs`.
//!
//! `MONGO_SPEC_FILTER=text` runs only the files or tests whose name contains
//! `text`.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;
mod unified;

#[test]
fn unified_format_spec_tests() {
    unified::run_all();
}
