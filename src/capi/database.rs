//! Database and client operations: create and drop, the listings, and the
//! database-level aggregate. Same shape as the collection operations:
//! `(client, session, db, arguments, options, output)`, minus what the
//! operation has no use for (`db` for the client's listings).

use bson::{Document, RawDocumentBuf};

use super::ops::{self, configure, open_in, run_in};
use super::{lock_opt, new_cursor, write_buffer, MiBuffer, MiCursor};
use crate::proto::coll_options::{
    AggregateOptions, CreateCollectionOptions, DropDatabaseOptions, ListCollectionsOptions,
    ListDatabasesOptions, RunCursorCommandOptions,
};
use crate::proto::options_doc::unknown;
use crate::proto::read_preference::SelectionCriteria;

c_function! {
    /// Creates collection `name` in `db`; options are `CreateCollectionOptions`
    /// (`capped`, `size`, `validator`, `timeseries`, `viewOn`, `pipeline`, ...).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_create_collection(
        t: db_target,
        name: str,
        options: options options_len,
    ) {
        let db = t.database();
        let action = configure!(db.create_collection(name), CreateCollectionOptions, options);
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    }
}

c_function! {
    /// Drops database `db`; options are `DropDatabaseOptions` (`writeConcern`).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_drop_database(
        t: db_target,
        options: options options_len,
    ) {
        let db = t.database();
        let action = configure!(db.drop(), DropDatabaseOptions, options);
        run_in!(action, lock_opt(&t.session).as_deref_mut())
    }
}

c_function! {
    /// The collections of `db` (their `listCollections` specifications) as a
    /// cursor; options are `ListCollectionsOptions` (`filter`, `batchSize`,
    /// `authorizedCollections`, `comment`).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_list_collections(
        t: db_target,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let db = t.database();
        let action = configure!(cursor: db.list_collections(), ListCollectionsOptions, options);
        let stream = open_in!(action, lock_opt(&t.session).as_deref_mut())?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    }
}

c_function! {
    /// The names of the collections of `db`: `result` gets `{names: [...]}`;
    /// options as for `mi_list_collections`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_list_collection_names(
        t: db_target,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let db = t.database();
        let action = configure!(db.list_collection_names(), ListCollectionsOptions, options);
        let names = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "names": names })
    }
}

c_function! {
    /// Runs a database-level pipeline of `count` stages (`$currentOp`,
    /// `$listLocalSessions`, `$documents`...) as a cursor; options are
    /// `AggregateOptions`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `stages` and `lengths` hold `count` elements.
    fn mi_database_aggregate(
        t: db_target,
        stages: documents lengths count,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let pipeline = stages;
        let db = t.database();
        let action = configure!(cursor: db.aggregate(pipeline), AggregateOptions, options)
            .with_type::<RawDocumentBuf>();
        let stream = open_in!(action, lock_opt(&t.session).as_deref_mut())?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    }
}

c_function! {
    /// Runs `command` on database `db` and returns its reply in `reply` (a
    /// reply with `ok: 0` is an error); options `{readPreference, timeoutMS}`
    /// (the primary by default, as the server-selection spec says for
    /// `runCommand`). `mi_client_run_command` is this without options.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_run_command(
        t: db_target,
        command: document command_len,
        options: options options_len,
        reply: mut MiBuffer,
    ) {
        let (options, timing) = ops::split_timeout(options, false)?;
        let db = t.database();
        let mut action = db.run_command(command);
        for (key, value) in options.unwrap_or_default() {
            match key.as_str() {
                "readPreference" => {
                    let criteria: SelectionCriteria = ops::value_of(&key, value)?;
                    action = action.selection_criteria(criteria);
                }
                _ => return Err(ops::failure(&unknown("run_command", &key))),
            }
        }
        if let Some(timeout) = timing.timeout {
            action = action.timeout(timeout);
        }
        let output = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(reply, &output)
    }
}

c_function! {
    /// Runs `command`, one that opens a cursor (`find`, `aggregate`...), on
    /// database `db` as given and returns the cursor; options are
    /// `RunCursorCommandOptions` (`batchSize`, `maxTimeMS`, `comment` for the
    /// getMores, `cursorType`, `readPreference`) and `timeoutMS` /
    /// `timeoutMode`. A reply without a cursor is an error.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_run_cursor_command(
        t: db_target,
        command: document command_len,
        options: options options_len,
        out: mut *mut MiCursor,
    ) {
        let db = t.database();
        let action = configure!(cursor: db.run_cursor_command(command), RunCursorCommandOptions, options);
        let stream = open_in!(action, lock_opt(&t.session).as_deref_mut())?;
        *out = new_cursor(stream, t.session.clone());
        Ok(())
    }
}

c_function! {
    /// The deployment's databases: `result` gets `{databases: [{name,
    /// sizeOnDisk, empty, shards?}]}`; options are `ListDatabasesOptions`
    /// (`filter`, `authorizedDatabases`, `comment`).
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_list_databases(
        t: client_target,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let action = configure!(t.client.client.list_databases(), ListDatabasesOptions, options);
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
    }
}

c_function! {
    /// The names of the deployment's databases: `result` gets `{names:
    /// [...]}`; options as for `mi_list_databases`.
    ///
    /// # Safety
    /// Pointers NULL or valid; `options` may be NULL.
    fn mi_list_database_names(
        t: client_target,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let action = configure!(t.client.client.list_database_names(), ListDatabasesOptions, options);
        let names = run_in!(action, lock_opt(&t.session).as_deref_mut())?;
        write_buffer(result, &bson::doc! { "names": names })
    }
}
