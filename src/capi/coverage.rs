//! The check that keeps the C ABI complete: every public method of the Rust
//! API's handles (read from the source of `src/api/`) is either mapped to
//! the `mi_*` function that does the same, or excluded with a reason; and
//! every mapped function is declared in `include/mongo_inline.h`. A new
//! public operation without a C function fails
//! `every_public_operation_has_a_c_function`, naming it.
//!
//! Options need no table: every options struct reads its fields from the
//! official names (`proto::options_doc`), and a field whose type cannot be
//! read from BSON does not compile.

use std::collections::BTreeSet;
use std::path::Path;

/// The handle types whose public methods are the driver's operations.
const HANDLES: &[&str] = &[
    "Client",
    "Database",
    "Collection",
    "ClientSession",
    "StartTransaction",
    "Cursor",
    "SessionCursor",
    "GridFsBucket",
    "GridFsUploadStream",
    "GridFsDownloadStream",
    "ChangeStream",
    "SessionChangeStream",
];

/// The public types of `src/api/` that are not handles, and why their
/// methods need no C function of their own: a type added to the API must
/// be one or the other, so a new handle cannot escape the check.
const NOT_HANDLES: &[(&str, &str)] = &[
    ("ClientBuilder", "Rust builder; C sets the same in the URI"),
    (
        "CommitTransaction",
        "builder: run is mi_session_commit_transaction, timeout its options",
    ),
    (
        "AbortTransaction",
        "builder: run is mi_session_abort_transaction, timeout its options",
    ),
    ("SessionCursorIter", "Rust iteration"),
];

/// (handle, method, the C function that does it).
const MAPPED: &[(&str, &str, &str)] = &[
    ("Client", "with_uri_str", "mi_client_new"),
    ("Client", "with_options", "mi_client_new"),
    ("Client", "close", "mi_client_free"),
    ("Client", "shutdown", "mi_client_free"),
    ("Client", "retry_tokens", "mi_client_retry_tokens"),
    ("Client", "append_metadata", "mi_client_append_metadata"),
    ("Client", "start_session", "mi_session_start"),
    ("Client", "list_databases", "mi_list_databases"),
    ("Client", "list_database_names", "mi_list_database_names"),
    ("Client", "bulk_write", "mi_client_bulk_write"),
    ("Database", "create_collection", "mi_create_collection"),
    ("Database", "drop", "mi_drop_database"),
    ("Database", "list_collections", "mi_list_collections"),
    (
        "Database",
        "list_collection_names",
        "mi_list_collection_names",
    ),
    ("Database", "run_command", "mi_run_command"),
    // C passes every command as BSON bytes already.
    ("Database", "run_raw_command", "mi_run_command"),
    ("Database", "aggregate", "mi_database_aggregate"),
    ("Database", "run_cursor_command", "mi_run_cursor_command"),
    // C passes every command as BSON bytes already.
    (
        "Database",
        "run_raw_cursor_command",
        "mi_run_cursor_command",
    ),
    ("Database", "gridfs_bucket", "mi_gridfs_bucket_new"),
    ("Collection", "insert_one", "mi_insert_one"),
    ("Collection", "insert_many", "mi_insert_many"),
    ("Collection", "bulk_write", "mi_bulk_write"),
    ("Collection", "find", "mi_find"),
    ("Collection", "find_one", "mi_find_one"),
    ("Collection", "update_one", "mi_update_one"),
    ("Collection", "update_many", "mi_update_many"),
    ("Collection", "replace_one", "mi_replace_one"),
    ("Collection", "delete_one", "mi_delete_one"),
    ("Collection", "delete_many", "mi_delete_many"),
    (
        "Collection",
        "find_one_and_update",
        "mi_find_one_and_update",
    ),
    (
        "Collection",
        "find_one_and_replace",
        "mi_find_one_and_replace",
    ),
    (
        "Collection",
        "find_one_and_delete",
        "mi_find_one_and_delete",
    ),
    ("Collection", "count_documents", "mi_count_documents"),
    (
        "Collection",
        "estimated_document_count",
        "mi_estimated_document_count",
    ),
    ("Collection", "distinct", "mi_distinct"),
    ("Collection", "aggregate", "mi_aggregate"),
    ("Collection", "drop", "mi_drop_collection"),
    // One index is a list of one.
    ("Collection", "create_index", "mi_create_indexes"),
    ("Collection", "create_indexes", "mi_create_indexes"),
    ("Collection", "list_indexes", "mi_list_indexes"),
    ("Collection", "list_index_names", "mi_list_index_names"),
    ("Collection", "drop_index", "mi_drop_index"),
    ("Collection", "drop_indexes", "mi_drop_indexes"),
    ("ClientSession", "id", "mi_session_id"),
    ("ClientSession", "snapshot_time", "mi_session_snapshot_time"),
    (
        "Collection",
        "create_search_indexes",
        "mi_create_search_indexes",
    ),
    // One search index is a list of one.
    (
        "Collection",
        "create_search_index",
        "mi_create_search_indexes",
    ),
    (
        "Collection",
        "update_search_index",
        "mi_update_search_index",
    ),
    ("Collection", "drop_search_index", "mi_drop_search_index"),
    (
        "Collection",
        "list_search_indexes",
        "mi_list_search_indexes",
    ),
    (
        "ClientSession",
        "start_transaction",
        "mi_session_start_transaction",
    ),
    (
        "ClientSession",
        "commit_transaction",
        "mi_session_commit_transaction",
    ),
    (
        "ClientSession",
        "abort_transaction",
        "mi_session_abort_transaction",
    ),
    ("StartTransaction", "run", "mi_session_start_transaction"),
    ("StartTransaction", "and_run", "mi_session_with_transaction"),
    ("Cursor", "advance", "mi_cursor_next"),
    ("Cursor", "current", "mi_cursor_next"),
    ("SessionCursor", "advance", "mi_cursor_next"),
    ("SessionCursor", "current", "mi_cursor_next"),
    ("SessionCursor", "next", "mi_cursor_next"),
    ("Cursor", "next_if_any", "mi_cursor_try_next"),
    ("Cursor", "close_with_timeout", "mi_cursor_close"),
    ("SessionCursor", "close_with_timeout", "mi_cursor_close"),
    ("SessionCursor", "next_if_any", "mi_cursor_try_next"),
    (
        "GridFsBucket",
        "open_upload_stream",
        "mi_gridfs_open_upload_stream",
    ),
    (
        "GridFsBucket",
        "open_download_stream",
        "mi_gridfs_open_download_stream",
    ),
    (
        "GridFsBucket",
        "open_download_stream_by_name",
        "mi_gridfs_open_download_stream_by_name",
    ),
    ("GridFsBucket", "delete", "mi_gridfs_delete"),
    ("GridFsBucket", "delete_by_name", "mi_gridfs_delete_by_name"),
    ("GridFsBucket", "find", "mi_gridfs_find"),
    ("GridFsBucket", "find_one", "mi_gridfs_find_one"),
    ("GridFsBucket", "rename", "mi_gridfs_rename"),
    ("GridFsBucket", "rename_by_name", "mi_gridfs_rename_by_name"),
    ("GridFsBucket", "drop", "mi_gridfs_drop"),
    ("GridFsUploadStream", "id", "mi_gridfs_upload_id"),
    ("GridFsUploadStream", "close", "mi_gridfs_upload_close"),
    ("GridFsUploadStream", "abort", "mi_gridfs_upload_abort"),
    (
        "GridFsDownloadStream",
        "files_collection_document",
        "mi_gridfs_download_file",
    ),
    // One function for the three scopes: `db` and `coll` NULL or not.
    ("Client", "watch", "mi_watch"),
    ("Database", "watch", "mi_watch"),
    ("Collection", "watch", "mi_watch"),
    ("ChangeStream", "next_if_any", "mi_change_stream_try_next"),
    ("ChangeStream", "try_next", "mi_change_stream_try_next"),
    (
        "ChangeStream",
        "resume_token",
        "mi_change_stream_resume_token",
    ),
    ("ChangeStream", "is_alive", "mi_change_stream_is_alive"),
    // `mi_watch` with a session opens a session stream; the same functions
    // iterate it, locking that session.
    ("SessionChangeStream", "next", "mi_change_stream_next"),
    (
        "SessionChangeStream",
        "next_if_any",
        "mi_change_stream_try_next",
    ),
    (
        "SessionChangeStream",
        "resume_token",
        "mi_change_stream_resume_token",
    ),
    (
        "SessionChangeStream",
        "is_alive",
        "mi_change_stream_is_alive",
    ),
];

/// (handle, method, why C has no function of its own for it).
const EXCLUDED: &[(&str, &str, &str)] = &[
    (
        "Client",
        "builder",
        "Rust builder; C sets the same in the URI",
    ),
    ("Client", "database", "a local handle; C passes db names"),
    (
        "Client",
        "default_database",
        "C reads the URI's database itself",
    ),
    (
        "Client",
        "warm_connection_pool",
        "a hint: the first operation connects",
    ),
    ("Client", "options", "C passes the URI it parsed"),
    (
        "Client",
        "database_with_options",
        "a local handle; per-operation options",
    ),
    (
        "Client",
        "selection_criteria",
        "accessor; readPreference in the URI",
    ),
    (
        "Client",
        "read_concern",
        "accessor; readConcernLevel in the URI",
    ),
    ("Client", "write_concern", "accessor; w in the URI"),
    ("Database", "name", "accessor; C passes names"),
    ("Database", "collection", "a local handle; C passes names"),
    (
        "Database",
        "collection_with_options",
        "a local handle; per-operation options",
    ),
    (
        "Database",
        "selection_criteria",
        "accessor; per-operation readPreference option",
    ),
    (
        "Database",
        "read_concern",
        "accessor; per-operation readConcern option",
    ),
    (
        "Database",
        "write_concern",
        "accessor; per-operation writeConcern option",
    ),
    (
        "Database",
        "with_timeout",
        "timeoutMS in the URI, or per operation",
    ),
    ("Database", "client", "accessor"),
    ("Collection", "name", "accessor; C passes names"),
    ("Collection", "database_name", "accessor; C passes names"),
    ("Collection", "clone_with_type", "Rust typing; C gets BSON"),
    ("ChangeStream", "with_type", "Rust typing; C gets BSON"),
    (
        "SessionChangeStream",
        "with_type",
        "Rust typing; C gets BSON",
    ),
    (
        "Collection",
        "selection_criteria",
        "accessor; per-operation readPreference option",
    ),
    (
        "Collection",
        "read_concern",
        "accessor; per-operation readConcern option",
    ),
    (
        "Collection",
        "write_concern",
        "accessor; per-operation writeConcern option",
    ),
    (
        "Collection",
        "with_timeout",
        "timeoutMS in the URI, or per operation",
    ),
    ("Collection", "namespace", "accessor; C passes names"),
    (
        "ClientSession",
        "cluster_time",
        "not in the ABI yet: bindings have no use for it",
    ),
    (
        "ClientSession",
        "advance_cluster_time",
        "not in the ABI yet: bindings have no use for it",
    ),
    ("ClientSession", "client", "accessor"),
    (
        "ClientSession",
        "transaction_state",
        "not in the ABI yet: errors report misuse",
    ),
    (
        "ClientSession",
        "is_pinned",
        "sharded-transaction internals",
    ),
    ("ClientSession", "is_dirty", "pool internals"),
    (
        "StartTransaction",
        "with_options",
        "the options document of the C call",
    ),
    ("StartTransaction", "read_concern", "options document"),
    ("StartTransaction", "write_concern", "options document"),
    ("StartTransaction", "max_commit_time", "options document"),
    (
        "StartTransaction",
        "timeout",
        "timeoutMS of mi_session_with_transaction's options document",
    ),
    ("StartTransaction", "selection_criteria", "options document"),
    ("Cursor", "id", "the cursor's server id is internal to it"),
    ("Cursor", "address", "internal"),
    ("Cursor", "deserialize_current", "Rust typing; C gets BSON"),
    ("Cursor", "has_next", "mi_cursor_next's NULL says it"),
    ("SessionCursor", "id", "internal"),
    ("SessionCursor", "address", "internal"),
    ("SessionCursor", "deserialize_current", "Rust typing"),
    ("SessionCursor", "iter", "Rust iteration"),
    (
        "GridFsBucket",
        "read_concern",
        "accessor of the bucket options",
    ),
    (
        "GridFsBucket",
        "write_concern",
        "accessor of the bucket options",
    ),
    (
        "GridFsBucket",
        "selection_criteria",
        "accessor of the bucket options",
    ),
    (
        "GridFsBucket",
        "chunk_size_bytes",
        "accessor of the bucket options",
    ),
];

/// Where a C function reads an options struct with `options!` itself
/// instead of through `configure!` (which sets the document's `timeoutMS`
/// on the operation's builder): (file, options type, why no `timeoutMS`
/// is lost).
const READ_WITHOUT_CONFIGURE: &[(&str, &str, &str)] = &[
    (
        "gridfs.rs",
        "GridFsBucketOptions",
        "its timeoutMS is taken out first, for the bucket's database",
    ),
    (
        "search_index.rs",
        "AggregateOptions",
        "list_search_indexes takes no timeoutMS in the Rust API",
    ),
];

#[test]
fn every_options_document_reaches_its_builders_timeout() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/capi");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/capi") {
        let path = entry.expect("a directory entry").path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        // ops.rs defines `options!` and `configure!`; this file names them.
        if file == "ops.rs" || file == "coverage.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a C ABI source");
        for line in text.lines().filter(|l| !l.contains("configure!")) {
            if let Some(at) = line.find("options!(") {
                let rest = &line[at + "options!(".len()..];
                let type_name: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
                found.push((file.clone(), type_name));
            }
        }
    }
    let unexplained: Vec<_> = found
        .iter()
        .filter(|(f, t)| {
            !READ_WITHOUT_CONFIGURE
                .iter()
                .any(|(rf, rt, _)| rf == f && rt == t)
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "options read without configure! (its timeoutMS would be unknown): use configure!, \
         or list it in READ_WITHOUT_CONFIGURE with the reason: {unexplained:?}"
    );
    assert_eq!(
        found.len(),
        READ_WITHOUT_CONFIGURE.len(),
        "stale entries: {found:?}"
    );
}

/// `(handle, method)` for each `pub fn` in an inherent `impl` of a handle
/// type in the Rust source under `dir`.
fn public_methods(dir: &Path, found: &mut BTreeSet<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/api is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            public_methods(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            methods_in(&text, found);
        }
    }
}

fn methods_in(text: &str, found: &mut BTreeSet<(String, String)>) {
    let mut current: Option<&str> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("impl") {
            current = impl_target(rest);
        } else if line.starts_with('}') {
            current = None;
        } else if let (Some(handle), Some(rest)) = (current, line.strip_prefix("    pub fn ")) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert((handle.to_string(), name));
        }
    }
}

/// The handle an `impl` line (after `impl`) is for: inherent impls only.
fn impl_target(rest: &str) -> Option<&'static str> {
    let rest = rest.trim_start();
    let rest = if rest.starts_with('<') {
        // Skip the impl's generics, `<T>` or `<'a, T>`.
        &rest[rest.find('>')? + 1..]
    } else {
        rest
    };
    if rest.contains(" for ") {
        return None;
    }
    let name: String = rest
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    HANDLES.iter().copied().find(|h| *h == name)
}

#[test]
fn every_public_operation_has_a_c_function() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut methods = BTreeSet::new();
    public_methods(&root.join("src/api"), &mut methods);
    assert!(
        methods.len() > 80,
        "the parser found too few methods: {methods:?}"
    );
    let header = std::fs::read_to_string(root.join("include/mongo_inline.h")).unwrap();
    let known = |handle: &str, method: &str| {
        MAPPED
            .iter()
            .map(|(h, m, _)| (h, m))
            .chain(EXCLUDED.iter().map(|(h, m, _)| (h, m)))
            .any(|(h, m)| *h == handle && *m == method)
    };
    let missing: Vec<String> = methods
        .iter()
        .filter(|(h, m)| !known(h, m))
        .map(|(h, m)| format!("{h}::{m}"))
        .collect();
    assert!(
        missing.is_empty(),
        "public operations without a C function (add one, and map it in src/capi/coverage.rs, \
         or exclude it there with a reason): {missing:?}"
    );
    let unfinished: Vec<String> = EXCLUDED
        .iter()
        .filter(|(_, _, why)| why.contains("TODO"))
        .map(|(h, m, _)| format!("{h}::{m}"))
        .collect();
    assert!(
        unfinished.is_empty(),
        "excluded for want of a C function, not by design: {unfinished:?}"
    );
    let stale: Vec<String> = MAPPED
        .iter()
        .map(|(h, m, _)| (h, m))
        .chain(EXCLUDED.iter().map(|(h, m, _)| (h, m)))
        .filter(|(h, m)| !methods.contains(&(h.to_string(), m.to_string())))
        .map(|(h, m)| format!("{h}::{m}"))
        .collect();
    assert!(stale.is_empty(), "table entries for no method: {stale:?}");
    let undeclared: Vec<&str> = MAPPED
        .iter()
        .map(|(_, _, c)| *c)
        .filter(|c| !header.contains(&format!(" *{c}(")) && !header.contains(&format!(" {c}(")))
        .collect();
    assert!(
        undeclared.is_empty(),
        "mapped to functions include/mongo_inline.h does not declare: {undeclared:?}"
    );
}

/// The `pub struct` names of the Rust files under `dir`, but the action
/// builders' (`action/`, `gridfs/actions.rs`): each builder's `run` is its
/// handle method's C function, its options the options document.
fn public_types(dir: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("src/api is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() && name != "action" {
            public_types(&path, found);
        } else if name.ends_with(".rs") && name != "actions.rs" {
            let text = std::fs::read_to_string(&path).expect("a source file");
            for rest in text.lines().filter_map(|l| l.strip_prefix("pub struct ")) {
                let type_name: String = rest.chars().take_while(|c| c.is_alphanumeric()).collect();
                found.insert(type_name);
            }
        }
    }
}

#[test]
fn every_public_type_is_a_handle_or_named_as_not_one() {
    let mut types = BTreeSet::new();
    public_types(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/api"),
        &mut types,
    );
    let unclassified: Vec<&String> = types
        .iter()
        .filter(|t| !HANDLES.contains(&t.as_str()) && !NOT_HANDLES.iter().any(|(n, _)| n == t))
        .collect();
    assert!(
        unclassified.is_empty(),
        "public types of src/api that are neither in HANDLES (their methods need C functions) \
         nor in NOT_HANDLES with a reason: {unclassified:?}"
    );
    let stale: Vec<&str> = HANDLES
        .iter()
        .copied()
        .chain(NOT_HANDLES.iter().map(|(n, _)| *n))
        .filter(|t| !types.contains(*t))
        .collect();
    assert!(
        stale.is_empty(),
        "listed types that src/api does not declare: {stale:?}"
    );
}

#[test]
fn the_parser_reads_inherent_impls_only() {
    let mut found = BTreeSet::new();
    methods_in(
        "impl<T> Collection<T> {\n    pub fn insert_one(&self) {}\n    fn private() {}\n}\n\
         impl Read for GridFsDownloadStream {\n    pub fn read() {}\n}\n\
         impl<'a> Other<'a> {\n    pub fn skipped() {}\n}\n",
        &mut found,
    );
    let expected: BTreeSet<_> = [("Collection".to_string(), "insert_one".to_string())]
        .into_iter()
        .collect();
    assert_eq!(found, expected);
}
