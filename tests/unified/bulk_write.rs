//! The client-level `clientBulkWrite` operation of the unified format
//! (`crud/tests/unified/client-bulkWrite-*`, the retryable-writes
//! `client-bulkWrite-*` files) and the bulk write error's expectations
//! (`writeErrors`, `writeConcernErrors`, `expectResult` of the partial
//! result). A child of `runner`, sharing its argument and outcome types.

use bson::{doc, Bson, Document};
use mongo_inline::error::{BulkWriteError, PartialBulkWriteResult};
use mongo_inline::options::{BulkWriteOptions, WriteModel};
use mongo_inline::results::{SummaryBulkWriteResult, VerboseBulkWriteResult};
use mongo_inline::{Client, ClientSession, ErrorKind};

use super::{fail, matches, write_concern, Args, DriverResult, Entities, Outcome};

/// Runs `clientBulkWrite` on `client`.
pub(super) fn client_bulk_write(
    client: &Client,
    mut args: Args,
    session: Option<&mut ClientSession>,
) -> Outcome<DriverResult> {
    let models = match args.take("models") {
        Some(Bson::Array(models)) => models,
        other => return fail(format!("clientBulkWrite: models {other:?}")),
    };
    let models = models
        .into_iter()
        .map(write_model)
        .collect::<Outcome<Vec<_>>>()?;
    let verbose = args.bool("verboseResults")?.unwrap_or(false);
    let mut options = BulkWriteOptions::default();
    options.ordered = args.bool("ordered")?;
    options.bypass_document_validation = args.bool("bypassDocumentValidation")?;
    options.comment = args.take("comment");
    options.let_vars = args.doc("let")?;
    options.raw_data = args.bool("rawData")?;
    if let Some(wc) = args.take("writeConcern") {
        options.write_concern = Some(write_concern(&wc)?);
    }
    args.done()?;
    let action = client.bulk_write(models).with_options(options);
    Ok(match (verbose, session) {
        (false, None) => action.run().map(|r| summary_document(&r)),
        (false, Some(s)) => action.session(s).run().map(|r| summary_document(&r)),
        (true, None) => action.verbose_results().run().map(|r| verbose_document(&r)),
        (true, Some(s)) => action
            .verbose_results()
            .session(s)
            .run()
            .map(|r| verbose_document(&r)),
    })
}

/// One model of `models`: `{ insertOne: { namespace, document } }`, ...,
/// read by the library's parser (the C ABI's too).
fn write_model(model: Bson) -> Outcome<WriteModel> {
    match model {
        Bson::Document(model) => WriteModel::from_document(model)
            .or_else(|e| fail(format!("clientBulkWrite model: {e}"))),
        other => fail(format!("a write model is not a document: {other}")),
    }
}

fn summary_document(r: &SummaryBulkWriteResult) -> Bson {
    Bson::Document(doc! {
        "insertedCount": r.inserted_count,
        "upsertedCount": r.upserted_count,
        "matchedCount": r.matched_count,
        "modifiedCount": r.modified_count,
        "deletedCount": r.deleted_count,
    })
}

fn verbose_document(r: &VerboseBulkWriteResult) -> Bson {
    let Bson::Document(mut out) = summary_document(&r.summary) else {
        unreachable!("a summary is a document")
    };
    let by_index = |entries: Vec<(usize, Bson)>| {
        let mut entries = entries;
        entries.sort_by_key(|(i, _)| *i);
        entries
            .into_iter()
            .map(|(i, v)| (i.to_string(), v))
            .collect::<Document>()
    };
    let inserts = r.insert_results.iter().map(|(i, v)| {
        (
            *i,
            Bson::Document(doc! { "insertedId": v.inserted_id.clone() }),
        )
    });
    let updates = r.update_results.iter().map(|(i, v)| {
        let mut d = doc! {
            "matchedCount": v.matched_count as i64,
            "modifiedCount": v.modified_count as i64,
        };
        if let Some(id) = &v.upserted_id {
            d.insert("upsertedId", id.clone());
        }
        (*i, Bson::Document(d))
    });
    let deletes = r.delete_results.iter().map(|(i, v)| {
        (
            *i,
            Bson::Document(doc! { "deletedCount": v.deleted_count as i64 }),
        )
    });
    out.insert("insertResults", by_index(inserts.collect()));
    out.insert("updateResults", by_index(updates.collect()));
    out.insert("deleteResults", by_index(deletes.collect()));
    Bson::Document(out)
}

struct NoEntities;

impl Entities for NoEntities {
    fn value(&self, _: &str) -> Option<Bson> {
        None
    }
    fn session_lsid(&self, _: &str) -> Option<Document> {
        None
    }
}

/// The bulk write error's part of `expectError`: `writeErrors`,
/// `writeConcernErrors` and `expectResult` (the partial result). `None`
/// when `key` is not one of them.
pub(super) fn check_error_field(
    key: &str,
    expected: &Bson,
    error: &mongo_inline::Error,
) -> Option<Outcome> {
    if !matches!(key, "writeErrors" | "writeConcernErrors" | "expectResult") {
        return None;
    }
    let ErrorKind::BulkWrite(bulk) = error.kind() else {
        return Some(fail(format!("expected a bulk write error, got {error}")));
    };
    Some(check_bulk(key, expected, bulk))
}

/// A map's or an array's entries, keyed by name or index.
type Entries<'a> = Vec<(String, &'a Bson)>;

fn check_bulk(key: &str, expected: &Bson, bulk: &BulkWriteError) -> Outcome {
    let actual = match key {
        "writeErrors" => Bson::Document(
            bulk.write_errors
                .iter()
                .map(|(i, e)| {
                    let mut d = doc! { "code": e.code, "message": e.message.clone() };
                    if let Some(details) = &e.details {
                        d.insert("details", details.clone());
                    }
                    (i.to_string(), Bson::Document(d))
                })
                .collect(),
        ),
        "writeConcernErrors" => Bson::Array(
            bulk.write_concern_errors
                .iter()
                .map(|e| {
                    let mut d = doc! { "code": e.code, "message": e.message.clone() };
                    if let Some(details) = &e.details {
                        d.insert("details", details.clone());
                    }
                    Bson::Document(d)
                })
                .collect(),
        ),
        _ => {
            let partial = bulk.partial_result.as_ref().map(|p| match p {
                PartialBulkWriteResult::Summary(s) => summary_document(s),
                PartialBulkWriteResult::Verbose(v) => verbose_document(v),
                _ => Bson::Null,
            });
            return matches(expected, partial.as_ref(), true, &NoEntities)
                .or_else(|e| fail(format!("partial result {partial:?}: {e}")));
        }
    };
    // Each error is a root-level document (the spec lists only some fields);
    // the collections themselves have exactly the expected entries.
    let (expected_entries, actual_entries): (Entries<'_>, Entries<'_>) = match (expected, &actual) {
        (Bson::Document(e), Bson::Document(a)) => (
            e.iter().map(|(k, v)| (k.clone(), v)).collect(),
            a.iter().map(|(k, v)| (k.clone(), v)).collect(),
        ),
        (Bson::Array(e), Bson::Array(a)) => (
            e.iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect(),
            a.iter()
                .enumerate()
                .map(|(i, v)| (i.to_string(), v))
                .collect(),
        ),
        _ => return fail(format!("{key}: expected {expected}")),
    };
    if expected_entries.len() != actual_entries.len() {
        return fail(format!("{key}: expected {expected}, got {actual}"));
    }
    for (k, want) in expected_entries {
        let got = actual_entries
            .iter()
            .find(|(a, _)| *a == k)
            .map(|(_, v)| *v);
        matches(want, got, true, &NoEntities)
            .or_else(|e| fail(format!("{key}.{k}: {e} (got {actual})")))?;
    }
    Ok(())
}
