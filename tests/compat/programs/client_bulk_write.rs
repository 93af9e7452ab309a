//! `client.bulk_write(models)` (the server's `bulkWrite`): each model kind,
//! through its builder and as a `WriteModel` variant, across two
//! namespaces; the summary result and `.verbose_results()`;
//! `.ordered(false)`, `.let_vars(..)`; and a failing model seen through
//! `ErrorKind::BulkWrite`, its write errors and its partial result.

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{ErrorKind, PartialBulkWriteResult, Result};
use mongodb::options::{
    DeleteManyModel, DeleteOneModel, InsertOneModel, ReplaceOneModel, UpdateManyModel,
    UpdateOneModel, WriteModel,
};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_client_bulk_write");
    let people = db.collection::<Document>("people");
    let log = db.collection::<Document>("log");
    people.drop().run()?;
    log.drop().run()?;
    people
        .insert_many([
            doc! { "_id": 1, "team": "a", "n": 0 },
            doc! { "_id": 2, "team": "a", "n": 0 },
            doc! { "_id": 3, "team": "b", "n": 0 },
        ])
        .run()?;

    // Summary results: counts only.
    let models: Vec<WriteModel> = vec![
        InsertOneModel::builder()
            .namespace(log.namespace())
            .document(doc! { "_id": "start" })
            .build()
            .into(),
        UpdateOneModel::builder()
            .namespace(people.namespace())
            .filter(doc! { "_id": 1 })
            .update(doc! { "$inc": { "n": 1 } })
            .build()
            .into(),
        UpdateManyModel::builder()
            .namespace(people.namespace())
            .filter(doc! { "team": "a" })
            .update(doc! { "$set": { "seen": true } })
            .build()
            .into(),
        ReplaceOneModel::builder()
            .namespace(people.namespace())
            .filter(doc! { "_id": 4 })
            .replacement(doc! { "team": "c", "n": 9 })
            .upsert(true)
            .build()
            .into(),
        DeleteOneModel::builder()
            .namespace(people.namespace())
            .filter(doc! { "team": "b" })
            .build()
            .into(),
        WriteModel::DeleteMany(
            DeleteManyModel::builder()
                .namespace(log.namespace())
                .filter(doc! { "_id": "nothing" })
                .build(),
        ),
    ];
    let summary = client.bulk_write(models).run()?;
    assert_eq!(summary.inserted_count, 1);
    assert_eq!(summary.matched_count, 3);
    assert_eq!(summary.modified_count, 3);
    assert_eq!(summary.upserted_count, 1);
    assert_eq!(summary.deleted_count, 1);
    let replaced = people.find_one(doc! { "_id": 4 }).run()?.expect("the upsert");
    assert_eq!(replaced.get_str("team").ok(), Some("c"));
    assert_eq!(people.count_documents(doc! { "seen": true }).run()?, 2);

    // Verbose results: one result per model, by its index.
    let verbose = client
        .bulk_write(vec![
            WriteModel::InsertOne(
                InsertOneModel::builder()
                    .namespace(log.namespace())
                    .document(doc! { "note": "an id is generated" })
                    .build(),
            ),
            WriteModel::UpdateMany(
                UpdateManyModel::builder()
                    .namespace(people.namespace())
                    .filter(doc! {})
                    .update(doc! { "$inc": { "n": 10 } })
                    .build(),
            ),
            WriteModel::UpdateOne(
                UpdateOneModel::builder()
                    .namespace(people.namespace())
                    .filter(doc! { "_id": 5 })
                    .update(doc! { "$set": { "n": 5 } })
                    .upsert(true)
                    .build(),
            ),
            WriteModel::DeleteOne(
                DeleteOneModel::builder()
                    .namespace(log.namespace())
                    .filter(doc! { "_id": "start" })
                    .build(),
            ),
        ])
        .verbose_results()
        .run()?;
    assert_eq!(verbose.summary.inserted_count, 1);
    assert_eq!(verbose.summary.matched_count, 3);
    assert_eq!(verbose.summary.upserted_count, 1);
    assert!(verbose.insert_results[&0].inserted_id.as_object_id().is_some());
    assert_eq!(verbose.update_results[&1].matched_count, 3);
    assert_eq!(verbose.update_results[&1].modified_count, 3);
    assert_eq!(verbose.update_results[&1].upserted_id, None);
    assert_eq!(verbose.update_results[&2].upserted_id, Some(Bson::Int32(5)));
    assert_eq!(verbose.delete_results[&3].deleted_count, 1);
    assert_eq!(verbose.insert_results.len(), 1);
    assert_eq!(verbose.update_results.len(), 2);
    assert_eq!(verbose.delete_results.len(), 1);

    // Options for the whole command: `let` constants every model's filter
    // can read as `$$name`, and a comment.
    let with_let = client
        .bulk_write([UpdateManyModel::builder()
            .namespace(people.namespace())
            .filter(doc! { "$expr": { "$gte": ["$n", "$$floor"] } })
            .update(doc! { "$set": { "high": true } })
            .build()])
        .let_vars(doc! { "floor": 10 })
        .comment("compat bulk")
        .run()?;
    assert_eq!(with_let.matched_count, 3, "n: 11, 10 and 19, not 5");
    assert_eq!(people.count_documents(doc! { "high": true }).run()?, 3);

    // A failing model, ordered (the default): the writes before it are the
    // partial result, the ones after it are not attempted.
    let duplicate_then_more = || {
        vec![
            WriteModel::from(
                InsertOneModel::builder()
                    .namespace(log.namespace())
                    .document(doc! { "_id": "first" })
                    .build(),
            ),
            WriteModel::from(
                InsertOneModel::builder()
                    .namespace(people.namespace())
                    .document(doc! { "_id": 1 })
                    .build(),
            ),
            WriteModel::from(
                InsertOneModel::builder()
                    .namespace(log.namespace())
                    .document(doc! { "_id": "after" })
                    .build(),
            ),
        ]
    };
    let error = client
        .bulk_write(duplicate_then_more())
        .run()
        .expect_err("a duplicate _id");
    let ErrorKind::BulkWrite(failure) = &*error.kind else {
        panic!("not a bulk write error: {error}");
    };
    assert_eq!(failure.write_errors.len(), 1);
    assert_eq!(failure.write_errors[&1].code, 11000);
    assert!(failure.write_concern_errors.is_empty());
    match &failure.partial_result {
        Some(PartialBulkWriteResult::Summary(partial)) => assert_eq!(partial.inserted_count, 1),
        other => panic!("expected a summary partial result, got {other:?}"),
    }
    assert_eq!(log.count_documents(doc! { "_id": "after" }).run()?, 0);

    // Unordered and verbose: every model is tried; the partial result says
    // which ones succeeded.
    log.delete_many(doc! { "_id": { "$in": ["first", "after"] } }).run()?;
    let error = client
        .bulk_write(duplicate_then_more())
        .ordered(false)
        .verbose_results()
        .run()
        .expect_err("a duplicate _id");
    let ErrorKind::BulkWrite(failure) = &*error.kind else {
        panic!("not a bulk write error: {error}");
    };
    assert_eq!(failure.write_errors.keys().copied().collect::<Vec<_>>(), [1]);
    let Some(PartialBulkWriteResult::Verbose(partial)) = &failure.partial_result else {
        panic!("expected a verbose partial result: {failure:?}");
    };
    assert_eq!(partial.summary.inserted_count, 2);
    let mut succeeded: Vec<usize> = partial.insert_results.keys().copied().collect();
    succeeded.sort_unstable();
    assert_eq!(succeeded, [0, 2]);
    assert_eq!(partial.insert_results[&2].inserted_id, Bson::from("after"));

    // Nothing succeeded: no partial result at all.
    let error = client
        .bulk_write([InsertOneModel::builder()
            .namespace(people.namespace())
            .document(doc! { "_id": 2 })
            .build()])
        .run()
        .expect_err("a duplicate _id");
    let ErrorKind::BulkWrite(failure) = &*error.kind else {
        panic!("not a bulk write error: {error}");
    };
    assert!(failure.partial_result.is_none(), "{failure:?}");
    assert_eq!(failure.write_errors[&0].code, 11000);
    Ok(())
}
