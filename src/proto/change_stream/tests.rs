use bson::{doc, rawdoc};

use super::*;
use crate::proto::operation::cursor::CursorOptions;
use crate::proto::operation::test_support::server;

fn token(data: &str) -> ResumeToken {
    ResumeToken(Bson::Document(doc! { "_data": data }))
}

fn stage_of(state: &ChangeStreamState) -> Document {
    let mut aggregate = state.aggregate();
    let body = aggregate
        .build(&server())
        .unwrap()
        .body
        .to_document()
        .unwrap();
    let pipeline = body.get_array("pipeline").unwrap();
    pipeline[0]
        .as_document()
        .unwrap()
        .get_document("$changeStream")
        .unwrap()
        .clone()
}

fn cursor(batch: Vec<Document>, post_batch_resume_token: Option<&str>) -> Box<CursorSpec> {
    let mut cursor = doc! { "id": 7_i64, "ns": "db.coll", "firstBatch": batch };
    if let Some(data) = post_batch_resume_token {
        cursor.insert("postBatchResumeToken", doc! { "_data": data });
    }
    CursorSpec::from_reply(doc! { "cursor": cursor, "ok": 1 }, CursorOptions::default()).unwrap()
}

fn opened(spec: Box<CursorSpec>, operation_time: Option<Timestamp>) -> Opened {
    Opened {
        spec,
        operation_time,
        wire_version: 21,
    }
}

fn collection() -> WatchTarget {
    WatchTarget::Collection(Namespace::new("db", "coll"))
}

#[test]
fn the_first_aggregate_sends_the_options_given_and_nothing_else() {
    let state = ChangeStreamState::new(collection(), vec![], ChangeStreamOptions::default());
    let mut aggregate = state.aggregate();
    let body = aggregate
        .build(&server())
        .unwrap()
        .body
        .to_document()
        .unwrap();
    assert_eq!(
        body,
        doc! { "aggregate": "coll", "pipeline": [{ "$changeStream": {} }], "cursor": {} }
    );
    let options = ChangeStreamOptions::default()
        .full_document(FullDocumentType::UpdateLookup)
        .full_document_before_change(FullDocumentBeforeChangeType::Other("x".into()))
        .show_expanded_events(true)
        .batch_size(3);
    let state = ChangeStreamState::new(
        WatchTarget::Cluster,
        vec![doc! { "$match": { "x": 1 } }],
        options,
    );
    let mut aggregate = state.aggregate();
    let command = aggregate.build(&server()).unwrap();
    assert_eq!(&*command.target_db, "admin");
    assert_eq!(
        command.body.to_document().unwrap(),
        doc! {
            "aggregate": 1,
            "pipeline": [
                { "$changeStream": {
                    "fullDocument": "updateLookup", "fullDocumentBeforeChange": "x",
                    "allChangesForCluster": true, "showExpandedEvents": true,
                } },
                { "$match": { "x": 1 } },
            ],
            "cursor": { "batchSize": 3_i64 },
        }
    );
}

#[test]
fn tokens_follow_events_and_empty_batches() {
    let mut state = ChangeStreamState::new(collection(), vec![], ChangeStreamOptions::default());
    assert!(state.resume_token().is_none());
    // An empty first batch with a postBatchResumeToken: that token.
    state.opened(&opened(cursor(vec![], Some("p0")), None));
    assert_eq!(state.resume_token(), Some(&token("p0")));
    let mut spec = cursor(
        vec![
            doc! { "_id": { "_data": "e1" } },
            doc! { "_id": { "_data": "e2" } },
        ],
        Some("p2"),
    );
    state.batch_received(&spec);
    // A non-empty batch leaves the token alone until an event goes out.
    assert_eq!(state.resume_token(), Some(&token("p0")));
    let first: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
    state.document_returned(&first, &spec).unwrap();
    assert_eq!(state.resume_token(), Some(&token("e1")));
    // The batch's last event: the batch's postBatchResumeToken.
    let last: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
    state.document_returned(&last, &spec).unwrap();
    assert_eq!(state.resume_token(), Some(&token("p2")));
}

#[test]
fn an_event_without_id_is_the_specs_error() {
    let mut state = ChangeStreamState::new(collection(), vec![], ChangeStreamOptions::default());
    let spec = cursor(vec![], None);
    let error = state
        .document_returned(&rawdoc! { "operationType": "insert" }, &spec)
        .unwrap_err();
    assert!(matches!(*error.kind, ErrorKind::MissingResumeToken));
    assert!(error
        .to_string()
        .contains("Cannot provide resume functionality when the resume token is missing"));
}

#[test]
fn a_resume_uses_the_token_then_the_operation_time_then_the_original_command() {
    // A token cached: resumeAfter, and startAtOperationTime dropped.
    let time = Timestamp {
        time: 5,
        increment: 1,
    };
    let options = ChangeStreamOptions::default().start_at_operation_time(time);
    let mut state = ChangeStreamState::new(collection(), vec![], options);
    assert_eq!(stage_of(&state), doc! { "startAtOperationTime": time });
    state.opened(&opened(cursor(vec![], None), None));
    state.begin_resume();
    // No token: the time given.
    assert_eq!(stage_of(&state), doc! { "startAtOperationTime": time });
    state.opened(&opened(cursor(vec![], Some("p1")), None));
    state.begin_resume();
    assert_eq!(stage_of(&state), doc! { "resumeAfter": { "_data": "p1" } });

    // Nothing given, an empty first batch without a token: the reply's
    // operationTime is saved for a resume.
    let saved = Timestamp {
        time: 9,
        increment: 2,
    };
    let mut state = ChangeStreamState::new(collection(), vec![], ChangeStreamOptions::default());
    state.opened(&opened(cursor(vec![], None), Some(saved)));
    state.begin_resume();
    assert_eq!(stage_of(&state), doc! { "startAtOperationTime": saved });
    // With a postBatchResumeToken the time is not saved, and not needed.
    let mut state = ChangeStreamState::new(collection(), vec![], ChangeStreamOptions::default());
    state.opened(&opened(cursor(vec![], Some("p")), Some(saved)));
    state.begin_resume();
    assert_eq!(stage_of(&state), doc! { "resumeAfter": { "_data": "p" } });
    // Nothing at all: the original command.
    let mut state = ChangeStreamState::new(collection(), vec![], ChangeStreamOptions::default());
    state.opened(&opened(cursor(vec![doc! { "_id": 1 }], None), Some(saved)));
    state.begin_resume();
    assert_eq!(stage_of(&state), doc! {});
}

#[test]
fn start_after_holds_until_an_event_is_returned() {
    let options = ChangeStreamOptions::default().start_after(token("s"));
    let mut state = ChangeStreamState::new(collection(), vec![], options);
    assert_eq!(stage_of(&state), doc! { "startAfter": { "_data": "s" } });
    state.opened(&opened(cursor(vec![], Some("p1")), None));
    state.begin_resume();
    assert_eq!(stage_of(&state), doc! { "startAfter": { "_data": "p1" } });
    let mut spec = cursor(vec![doc! { "_id": { "_data": "e1" } }], None);
    state.opened(&opened(cursor(vec![], None), None));
    let event: bson::RawDocumentBuf = spec.pop_front().unwrap().unwrap();
    state.document_returned(&event, &spec).unwrap();
    state.begin_resume();
    assert_eq!(stage_of(&state), doc! { "resumeAfter": { "_data": "e1" } });
}

#[test]
fn resumable_errors_by_wire_version() {
    use crate::error::CommandError;
    let command = |code: i32, labels: &[&str]| {
        Error::new(ErrorKind::Command(CommandError {
            code,
            code_name: String::new(),
            message: "m".into(),
            topology_version: None,
            address: None,
            base_backoff: None,
            raw_response: None,
        }))
        .with_labels(labels.iter().copied())
    };
    let network = Error::network_message(None, "reset");
    assert!(is_resumable(&network, 21));
    assert!(is_resumable(&command(43, &[]), 21));
    // 4.4+: the label decides.
    assert!(is_resumable(
        &command(6, &["ResumableChangeStreamError"]),
        9
    ));
    assert!(!is_resumable(&command(6, &[]), 9));
    assert!(!is_resumable(
        &command(280, &["NonResumableChangeStreamError"]),
        21
    ));
    // Before 4.4: the list, unless labelled non-resumable.
    assert!(is_resumable(&command(6, &[]), 8));
    assert!(!is_resumable(
        &command(6, &["NonResumableChangeStreamError"]),
        8
    ));
    assert!(!is_resumable(&command(11601, &[]), 8));
    assert!(!is_resumable(&Error::invalid_argument("x"), 21));
    assert!(!is_resumable(
        &Error::new(ErrorKind::Timeout {
            message: "t".into()
        }),
        21
    ));
}

#[test]
fn full_document_values_round_trip_as_strings() {
    for name in ["updateLookup", "whenAvailable", "required", "default"] {
        let value = FullDocumentType::from(name);
        assert_eq!(bson::to_bson(&value).unwrap(), Bson::from(name));
        assert_eq!(
            bson::from_bson::<FullDocumentType>(Bson::from(name)).unwrap(),
            value
        );
    }
    assert_eq!(
        FullDocumentBeforeChangeType::from("off"),
        FullDocumentBeforeChangeType::Off
    );
}

#[test]
fn options_by_their_official_names() {
    let time = Timestamp {
        time: 3,
        increment: 4,
    };
    let options = ChangeStreamOptions::from_named(doc! {
        "fullDocument": "updateLookup",
        "fullDocumentBeforeChange": "required",
        "startAfter": { "_data": "s" },
        "startAtOperationTime": time,
        "maxAwaitTimeMS": 250,
        "batchSize": 2,
        "showExpandedEvents": true,
    })
    .unwrap();
    assert_eq!(options.full_document, Some(FullDocumentType::UpdateLookup));
    assert_eq!(
        options.full_document_before_change,
        Some(FullDocumentBeforeChangeType::Required)
    );
    assert_eq!(options.start_after, Some(token("s")));
    assert_eq!(options.start_at_operation_time, Some(time));
    assert_eq!(
        options.max_await_time,
        Some(std::time::Duration::from_millis(250))
    );
    assert_eq!(options.batch_size, Some(2));
    let error = ChangeStreamOptions::from_named(doc! { "resumeAfter": "x" }).unwrap_err();
    assert!(error.to_string().contains("resumeAfter"), "{error}");
}
