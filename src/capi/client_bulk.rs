//! `mi_client_bulk_write`: `Client::bulk_write` (MongoDB 8.0's
//! `bulkWrite` command) from C, its models in the CRUD spec's form with a
//! `namespace` each, its results and its error's details as BSON.

use std::collections::HashMap;

use bson::{doc, Bson, Document};

use super::collection::model_failure;
use super::error::Failure;
use super::ops::{configure, count_bson, run_in, OptionList};
use super::{lock_opt, write_buffer, MiBuffer};
use crate::error::{BulkWriteError, PartialBulkWriteResult};
use crate::options::WriteModel;
use crate::proto::coll_options::BulkWriteOptions;
use crate::proto::results::{WriteConcernError, WriteError};
use crate::results::{SummaryBulkWriteResult, VerboseBulkWriteResult};

c_function! {
    /// Runs `count` write models on any collections of the deployment, each
    /// `{insertOne: {namespace: "db.coll", document}}`, `{updateOne |
    /// updateMany: {namespace, filter, update, upsert?, arrayFilters?,
    /// collation?, hint?, sort?}}`, `{replaceOne: {namespace, filter,
    /// replacement, ...}}` or `{deleteOne | deleteMany: {namespace, filter,
    /// collation?, hint?}}`; options are `BulkWriteOptions` (`ordered`,
    /// `bypassDocumentValidation`, `let`, `comment`, `writeConcern`) and
    /// `verboseResults`. `result` gets `{insertedCount, matchedCount,
    /// modifiedCount, deletedCount, upsertedCount}`, and with `verboseResults:
    /// true` also `insertResults: {"i": {insertedId}}`, `updateResults: {"i":
    /// {matchedCount, modifiedCount, upsertedId?}}` and `deleteResults: {"i":
    /// {deletedCount}}`. A failed write or write concern gives an error of
    /// domain `Write` whose `details` hold `{writeErrors: {"i": {code,
    /// message, details?}}, writeConcernErrors: [{code, message, details?}],
    /// partialResult?}` (the result of what did succeed, in the same form).
    ///
    /// # Safety
    /// Pointers NULL or valid; `models` and `lengths` hold `count` elements.
    fn mi_client_bulk_write(
        t: client_target,
        models: documents lengths count,
        options: options options_len,
        result: mut MiBuffer,
    ) {
        let models = models
            .into_iter()
            .enumerate()
            .map(|(i, model)| WriteModel::from_document(model).map_err(|e| model_failure(i, &e)))
            .collect::<Result<Vec<_>, _>>()?;
        let (verbose, options) = split_verbose(options.unwrap_or_default())?;
        let action = configure!(t.client.client.bulk_write(models), BulkWriteOptions, Some(options));
        let reply = if verbose {
            let action = action.verbose_results();
            verbose_document(&run_in!(action, lock_opt(&t.session).as_deref_mut())?)
        } else {
            summary_document(&run_in!(action, lock_opt(&t.session).as_deref_mut())?)
        };
        write_buffer(result, &reply)
    }
}

/// `verboseResults` out of the options: it picks the result's type, it is
/// not an option of the command.
fn split_verbose(options: OptionList) -> Result<(bool, OptionList), Failure> {
    let mut verbose = false;
    let mut rest = Vec::with_capacity(options.len());
    for (key, value) in options {
        match (key.as_str(), value) {
            ("verboseResults", Bson::Boolean(b)) => verbose = b,
            ("verboseResults", other) => {
                return Err(Failure::argument(
                    "options",
                    &format!("has \"verboseResults\" {other}, not a boolean"),
                ))
            }
            (_, value) => rest.push((key, value)),
        }
    }
    Ok((verbose, rest))
}

fn summary_document(r: &SummaryBulkWriteResult) -> Document {
    doc! {
        "insertedCount": r.inserted_count,
        "matchedCount": r.matched_count,
        "modifiedCount": r.modified_count,
        "deletedCount": r.deleted_count,
        "upsertedCount": r.upserted_count,
    }
}

/// Each write's result keyed by its index, in index order.
fn by_index<T>(results: &HashMap<usize, T>, one: impl Fn(&T) -> Document) -> Document {
    let mut indexes: Vec<_> = results.keys().copied().collect();
    indexes.sort_unstable();
    indexes
        .into_iter()
        .map(|i| (i.to_string(), Bson::Document(one(&results[&i]))))
        .collect()
}

fn verbose_document(r: &VerboseBulkWriteResult) -> Document {
    let mut out = summary_document(&r.summary);
    out.insert(
        "insertResults",
        by_index(
            &r.insert_results,
            |v| doc! { "insertedId": v.inserted_id.clone() },
        ),
    );
    out.insert(
        "updateResults",
        by_index(&r.update_results, |v| {
            let mut d = doc! {
                "matchedCount": count_bson(v.matched_count),
                "modifiedCount": count_bson(v.modified_count),
            };
            if let Some(id) = &v.upserted_id {
                d.insert("upsertedId", id.clone());
            }
            d
        }),
    );
    out.insert(
        "deleteResults",
        by_index(
            &r.delete_results,
            |v| doc! { "deletedCount": count_bson(v.deleted_count) },
        ),
    );
    out
}

fn error_document(code: i32, message: &str, details: Option<&Document>) -> Document {
    let mut d = doc! { "code": code, "message": message };
    if let Some(details) = details {
        d.insert("details", details.clone());
    }
    d
}

/// The `details` of a client bulk write's error: its write errors by
/// index, its write concern errors, and the result of what succeeded.
pub(crate) fn error_details(error: &BulkWriteError) -> Document {
    let write_errors = by_index(&error.write_errors, |e: &WriteError| {
        error_document(e.code, &e.message, e.details.as_ref())
    });
    let write_concern_errors: Vec<Bson> = error
        .write_concern_errors
        .iter()
        .map(|e: &WriteConcernError| {
            Bson::Document(error_document(e.code, &e.message, e.details.as_ref()))
        })
        .collect();
    let mut details = doc! {
        "writeErrors": write_errors,
        "writeConcernErrors": write_concern_errors,
    };
    match &error.partial_result {
        Some(PartialBulkWriteResult::Summary(s)) => {
            details.insert("partialResult", summary_document(s));
        }
        Some(PartialBulkWriteResult::Verbose(v)) => {
            details.insert("partialResult", verbose_document(v));
        }
        _ => {}
    }
    details
}
