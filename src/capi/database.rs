//! Database and client operations: create and drop, the listings, and the
//! database-level aggregate. Same shape as the collection operations:
//! `(client, session, db, arguments, options, output)`, minus what the
//! operation has no use for (`db` for the client's listings).

use std::ffi::c_char;

use bson::{Document, RawDocumentBuf};

use super::error::Failure;
use super::ops::{self, open_in, options, run_in};
use super::{
    document_list, handle, lock_opt, new_cursor, options_arg, session_for, str_arg, write_buffer,
    MiBuffer, MiClient, MiCursor, MiError, MiSession, SharedSession,
};
use crate::proto::coll_options::{
    AggregateOptions, CreateCollectionOptions, DropDatabaseOptions, ListCollectionsOptions,
    ListDatabasesOptions,
};

/// The checked common arguments of a database operation.
struct DbTarget<'a> {
    client: &'a mut MiClient,
    session: Option<SharedSession>,
    db: &'a str,
}

/// # Safety
/// Each pointer NULL or valid for the call.
unsafe fn db_target<'a>(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
) -> Result<DbTarget<'a>, Failure> {
    // SAFETY: by the caller's contract.
    let client = unsafe { handle(client, "client")? };
    // SAFETY: by the caller's contract.
    let session = unsafe { session_for(session, client)? };
    // SAFETY: by the caller's contract.
    let db = unsafe { str_arg(db, "db")? };
    client.used = true;
    Ok(DbTarget {
        client,
        session,
        db,
    })
}

impl DbTarget<'_> {
    fn database(&self) -> crate::Database {
        self.client.client.database(self.db)
    }
}

/// Creates collection `name` in `db`; options are `CreateCollectionOptions`
/// (`capped`, `size`, `validator`, `timeseries`, `viewOn`, `pipeline`, ...).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_create_collection(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
    name: *const c_char,
    options: *const u8,
    options_len: usize,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (t, name, options) = unsafe {
            (
                db_target(client, session, db)?,
                str_arg(name, "name")?,
                options_arg(options, options_len, "options")?,
            )
        };
        let db = t.database();
        let action = db
            .create_collection(name)
            .with_options(options!(CreateCollectionOptions, options));
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    })
}

/// Drops database `db`; options are `DropDatabaseOptions` (`writeConcern`).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_drop_database(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
    options: *const u8,
    options_len: usize,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (t, options) = unsafe {
            (
                db_target(client, session, db)?,
                options_arg(options, options_len, "options")?,
            )
        };
        let db = t.database();
        let action = db
            .drop()
            .with_options(options!(DropDatabaseOptions, options));
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    })
}

/// The collections of `db` (their `listCollections` specifications) as a
/// cursor; options are `ListCollectionsOptions` (`filter`, `batchSize`,
/// `authorizedCollections`, `comment`).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_list_collections(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiCursor,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (t, options, out) = unsafe {
            (
                db_target(client, session, db)?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        let db = t.database();
        let action = db
            .list_collections()
            .with_options(options!(ListCollectionsOptions, options));
        let stream = open_in!(action, lock_opt(&t.session).as_deref_mut())?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    })
}

/// The names of the collections of `db`: `result` gets `{names: [...]}`;
/// options as for `mi_list_collections`.
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_list_collection_names(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
    options: *const u8,
    options_len: usize,
    result: *mut MiBuffer,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (t, options, result) = unsafe {
            (
                db_target(client, session, db)?,
                options_arg(options, options_len, "options")?,
                handle(result, "result")?,
            )
        };
        let db = t.database();
        let action = db
            .list_collection_names()
            .with_options(options!(ListCollectionsOptions, options));
        let names = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "names": names })
    })
}

/// Runs a database-level pipeline of `count` stages (`$currentOp`,
/// `$listLocalSessions`, `$documents`...) as a cursor; options are
/// `AggregateOptions`.
///
/// # Safety
/// Pointers NULL or valid; `stages` and `lengths` hold `count` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_database_aggregate(
    client: *mut MiClient,
    session: *mut MiSession,
    db: *const c_char,
    stages: *const *const u8,
    lengths: *const usize,
    count: usize,
    options: *const u8,
    options_len: usize,
    out: *mut *mut MiCursor,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract.
        let (t, pipeline, options, out) = unsafe {
            (
                db_target(client, session, db)?,
                document_list(stages, lengths, count, "stages")?,
                options_arg(options, options_len, "options")?,
                handle(out, "out")?,
            )
        };
        let db = t.database();
        let action = db
            .aggregate(pipeline)
            .with_options(options!(AggregateOptions, options))
            .with_type::<RawDocumentBuf>();
        let stream = open_in!(action, lock_opt(&t.session).as_deref_mut())?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    })
}

/// The deployment's databases: `result` gets `{databases: [{name,
/// sizeOnDisk, empty, shards?}]}`; options are `ListDatabasesOptions`
/// (`filter`, `authorizedDatabases`, `comment`).
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_list_databases(
    client: *mut MiClient,
    session: *mut MiSession,
    options: *const u8,
    options_len: usize,
    result: *mut MiBuffer,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract (the database name is a static string).
        let (t, options, result) = unsafe {
            (
                db_target(client, session, c"admin".as_ptr())?,
                options_arg(options, options_len, "options")?,
                handle(result, "result")?,
            )
        };
        let action = t
            .client
            .client
            .list_databases()
            .with_options(options!(ListDatabasesOptions, options));
        let specs = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        let databases = specs
            .into_iter()
            .map(|spec| {
                let mut d = bson::doc! {
                    "name": spec.name,
                    "sizeOnDisk": ops::count_bson(spec.size_on_disk),
                    "empty": spec.empty,
                };
                if let Some(shards) = spec.shards {
                    d.insert("shards", shards);
                }
                d
            })
            .collect::<Vec<Document>>();
        write_buffer(result, &bson::doc! { "databases": databases })
    })
}

/// The names of the deployment's databases: `result` gets `{names:
/// [...]}`; options as for `mi_list_databases`.
///
/// # Safety
/// Pointers NULL or valid; `options` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mi_list_database_names(
    client: *mut MiClient,
    session: *mut MiSession,
    options: *const u8,
    options_len: usize,
    result: *mut MiBuffer,
) -> *mut MiError {
    super::boundary(|| {
        // SAFETY: by contract (the database name is a static string).
        let (t, options, result) = unsafe {
            (
                db_target(client, session, c"admin".as_ptr())?,
                options_arg(options, options_len, "options")?,
                handle(result, "result")?,
            )
        };
        let action = t
            .client
            .client
            .list_database_names()
            .with_options(options!(ListDatabasesOptions, options));
        let names = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "names": names })
    })
}
