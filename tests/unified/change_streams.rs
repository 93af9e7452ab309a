//! The `changeStream` entity and its operations in the unified format
//! (`source/change-streams/tests/unified`, and change streams in other
//! suites): `createChangeStream` on a client, database or collection, then
//! `iterateUntilDocumentOrError`, `iterateOnce` and `close`. A child of
//! `runner`, sharing its entities, arguments and outcomes.
//!
//! The stream reads events as plain documents, so that a test's expected
//! event matches the fields the server sent, known to the typed event or not.

use bson::{Bson, Document};
use mongo_inline::change_stream::event::ResumeToken;
use mongo_inline::change_stream::options::{
    ChangeStreamOptions, FullDocumentBeforeChangeType, FullDocumentType,
};
use mongo_inline::change_stream::ChangeStream;

use super::{fail, skip, Args, DriverResult, Entity, Outcome, TestRun};

/// A stream the test iterates.
pub(super) type Stream = Box<ChangeStream<Document>>;

impl TestRun<'_> {
    /// `createChangeStream` on entity `object`: the stream is kept for
    /// `saveResultAsEntity`.
    pub(super) fn create_change_stream(
        &mut self,
        object: &str,
        session: Option<String>,
        mut args: Args,
    ) -> Outcome<DriverResult> {
        if session.is_some() {
            // The driver's `watch().session(..)` is shown by
            // tests/change_streams.rs; no spec file at the pinned commit
            // opens a stream in a session, so the runner keeps none.
            return fail(
                "createChangeStream in a session: the runner keeps only session-less streams",
            );
        }
        let pipeline = args.docs("pipeline")?.unwrap_or_default();
        let timeout = args.millis("timeoutMS")?;
        let options = stream_options(&mut args)?;
        args.done()?;
        fn timed(
            watch: mongo_inline::action::Watch<'_>,
            timeout: Option<std::time::Duration>,
        ) -> mongo_inline::action::Watch<'_> {
            match timeout {
                Some(t) => watch.timeout(t),
                None => watch,
            }
        }
        let opened = match self.entities.0.get(object) {
            Some(Entity::Collection(c)) => {
                timed(c.watch().pipeline(pipeline).with_options(options), timeout).run()
            }
            Some(Entity::Database(d)) => {
                timed(d.watch().pipeline(pipeline).with_options(options), timeout).run()
            }
            Some(Entity::Client(c)) => timed(
                c.live()?.watch().pipeline(pipeline).with_options(options),
                timeout,
            )
            .run(),
            _ => {
                return fail(format!(
                    "createChangeStream: no client, database or collection {object:?}"
                ))
            }
        };
        // A client entity owns itself.
        let client = self
            .owners
            .get(object)
            .cloned()
            .unwrap_or_else(|| object.to_string());
        Ok(match opened {
            Ok(stream) => {
                self.opened_stream = Some((Box::new(stream.with_type::<Document>()), client));
                Ok(Bson::Null)
            }
            Err(error) => Err(error),
        })
    }
}

impl TestRun<'_> {
    /// `rename` of collection entity `object` (the change-stream tests'
    /// `rename` and `invalidate` events): the driver has no rename helper,
    /// as the official one has none, so `renameCollection` through the
    /// collection's client, as the official driver's runner sends it.
    pub(super) fn rename_collection(
        &mut self,
        object: &str,
        session: Option<String>,
        mut args: Args,
    ) -> Outcome<DriverResult> {
        if session.is_some() {
            return skip("rename in a session not supported by the runner");
        }
        let Some(Entity::Collection(coll)) = self.entities.0.get(object) else {
            return fail(format!("rename: no collection {object:?}"));
        };
        let from = coll.namespace();
        let to = match args.take("to") {
            Some(Bson::String(to)) => to,
            other => return fail(format!("rename: `to` is {other:?}")),
        };
        let mut command = bson::doc! {
            "renameCollection": from.to_string(),
            "to": format!("{}.{to}", from.db),
        };
        if let Some(drop_target) = args.bool("dropTarget")? {
            command.insert("dropTarget", drop_target);
        }
        args.done()?;
        let owner = self.owners.get(object).cloned().unwrap_or_default();
        let client = self.client(&owner)?.live()?.clone();
        Ok(client
            .database("admin")
            .run_command(command)
            .run()
            .map(Bson::Document))
    }
}

/// The `watch` options among `args`.
fn stream_options(args: &mut Args) -> Outcome<ChangeStreamOptions> {
    let mut options = ChangeStreamOptions::default();
    options.batch_size = args.int("batchSize")?.map(|n| n as u32);
    options.comment = args.take("comment");
    options.collation = args.collation()?;
    options.max_await_time = args.millis("maxAwaitTimeMS")?;
    options.show_expanded_events = args.bool("showExpandedEvents")?;
    let mut name = |key: &str| -> Outcome<Option<String>> {
        match args.take(key) {
            None => Ok(None),
            Some(Bson::String(s)) => Ok(Some(s)),
            Some(other) => fail(format!("{key}: {other}")),
        }
    };
    options.full_document = name("fullDocument")?.map(|s| FullDocumentType::from(s.as_str()));
    options.full_document_before_change =
        name("fullDocumentBeforeChange")?.map(|s| FullDocumentBeforeChangeType::from(s.as_str()));
    for key in ["resumeAfter", "startAfter"] {
        if let Some(token) = args.take(key) {
            let token: ResumeToken = bson::from_bson(token).map_err(|e| format!("{key}: {e}"))?;
            match key {
                "resumeAfter" => options.resume_after = Some(token),
                _ => options.start_after = Some(token),
            }
        }
    }
    match args.take("startAtOperationTime") {
        None => {}
        Some(Bson::Timestamp(time)) => options.start_at_operation_time = Some(time),
        Some(other) => return fail(format!("startAtOperationTime: {other}")),
    }
    Ok(options)
}

/// Runs operation `name` on change stream entity `stream`; `None` when the
/// operation closed it (the caller removes the entity).
pub(super) fn stream_operation(
    stream: &mut Stream,
    object: &str,
    name: &str,
    args: Args,
) -> Outcome<Option<DriverResult>> {
    args.done()?;
    Ok(Some(match name {
        // Blocks until an event (each getMore bounded by maxAwaitTimeMS)
        // or an error, as the format asks.
        "iterateUntilDocumentOrError" => match stream.next() {
            Some(Ok(event)) => Ok(Bson::Document(event)),
            Some(Err(error)) => Err(error),
            None => return fail(format!("{name}: the change stream {object} has ended")),
        },
        // One getMore at most.
        "iterateOnce" => stream
            .next_if_any()
            .map(|event| event.map_or(Bson::Null, Bson::Document)),
        "close" => return Ok(None),
        other => {
            return skip(format!(
                "change stream operation {other} not implemented in the runner"
            ))
        }
    }))
}
