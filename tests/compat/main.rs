//! The compatibility suite (issue 35): small programs written against the
//! official `mongodb` crate's sync API (3.x), in its own paths
//! (`mongodb::sync::Client`, `mongodb::options::..`), compiled here
//! unchanged against this crate and run against SecantusDB, each asserting
//! its results. `.ci/compat-official` compiles and runs the same files
//! against the official crate, so the suite cannot drift from the real API.
//!
//! The only change is the crate's name: `extern crate mongo_inline as
//! mongodb` is what `mongodb = { package = "mongo-inline" }` in a user's
//! Cargo.toml does (and replacing `mongodb::sync::` and `mongodb::` by
//! `mongo_inline::` in the source is the same thing, since
//! `mongo_inline::sync` re-exports the root's types).
//!
//! All programs are modules of this one test binary, so the suite costs
//! CI one build; each runs as its own test against one shared server.

// The programs run against a real server; the one-clock rule (clippy.toml)
// is the library's.
#![allow(clippy::disallowed_methods)]

extern crate mongo_inline as mongodb;

#[path = "../support/mod.rs"]
mod support;

use support::server::TestServer;

/// Declares the programs (files of `tests/compat/programs/`) and one test
/// per program.
macro_rules! programs {
    ($($name:ident),* $(,)?) => {
        mod programs {
            $(pub mod $name;)*
        }

        const NAMES: &[&str] = &[$(stringify!($name)),*];

        $(
            #[test]
            fn $name() {
                let uri = TestServer::shared().uri();
                if let Err(error) = programs::$name::run(&uri) {
                    panic!("{}: {error}", stringify!($name));
                }
            }
        )*
    };
}

programs! {
    typed_crud,
    conversions,
    find_options,
    updates,
    replace,
    deletes,
    find_and_modify,
    counting,
    aggregation,
    database_aggregate,
    indexes,
    index_collection_options,
    collections,
    admin_listings,
    transactions,
    and_run,
    custom_error,
    session_cursors,
    cursor_advance,
    write_errors,
    command_errors,
    raw_documents,
    shutdown,
    write_concerns,
    read_concerns,
    read_preferences,
    collection_handles,
    hints_and_comments,
    handle_options,
    session_options,
    cluster_time,
    connection_string,
    warm_pool,
    command_events,
    sdam_events,
    run_commands,
    atlas_search,
    builder_modes,
    builder_types,
    search_index_options,
    gridfs_actions,
    client_bulk_write,
    cursor_commands,
    stable_api,
    change_streams,
    change_stream_options,
    surface_handles,
    surface_actions,
    surface_options,
    surface_types,
}

/// Every file in `programs/` is in the suite: a program added there (and so
/// checked against the official crate) cannot be left out here.
#[test]
fn every_program_is_in_the_suite() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/programs");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
    names.sort();
    assert_eq!(files, names);
}
