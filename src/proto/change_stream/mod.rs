//! Change streams' rules (`source/change-streams/change-streams.md`): the
//! options, the `aggregate` that opens a stream with its `$changeStream`
//! stage, the resume token the stream caches, which errors it resumes
//! after, and what the resuming `aggregate` says. The stream that applies
//! them (and sends the commands) is `api::change_stream`.
//!
//! ```text
//! ChangeStreamState::new ── aggregate() ──executor──> Opened ── opened()
//!   each batch: batch_received(spec); each document: document_returned(doc, spec)
//!   getMore failed: is_resumable(error, wire)? ── begin_resume(); aggregate() again
//! ```

pub mod event;

use std::time::Duration;

use bson::{Bson, Document, RawDocument, Timestamp};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, ErrorKind, Result};
use crate::proto::coll_options::{options_struct, AggregateOptions};
use crate::proto::collation::Collation;
use crate::proto::concern::ReadConcern;
use crate::proto::operation::aggregate::{Aggregate, AggregateTarget};
use crate::proto::operation::{
    Command, CursorSpec, Namespace, Operation, Retryability, ServerInfo,
};
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::reply::Reply;
use event::ResumeToken;

/// Whether `updateLookup`/post-images fill an event's `full_document`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FullDocumentType {
    /// An `update` event carries the document as it is some time after the change.
    UpdateLookup,
    /// The post-image when there is one (6.0+, pre- and post-images enabled).
    WhenAvailable,
    /// The post-image, or an error when there is none.
    Required,
    /// Another value, sent as given (the server validates it).
    Other(String),
}

/// Whether pre-images fill an event's `full_document_before_change`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FullDocumentBeforeChangeType {
    /// The pre-image when there is one.
    WhenAvailable,
    /// The pre-image, or an error when there is none.
    Required,
    /// No pre-image (the server's default).
    Off,
    /// Another value, sent as given (the server validates it).
    Other(String),
}

/// The string forms of the two option types: both are strings on the wire,
/// and an unknown one passes through (the spec: the server validates them).
macro_rules! string_option {
    ($ty:ident { $($variant:ident = $name:literal),* }) => {
        impl $ty {
            /// The value as the server names it.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $ty::$variant => $name, )*
                    $ty::Other(other) => other,
                }
            }
        }

        impl From<&str> for $ty {
            fn from(name: &str) -> Self {
                match name {
                    $( $name => $ty::$variant, )*
                    other => $ty::Other(other.to_string()),
                }
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
                Ok($ty::from(String::deserialize(deserializer)?.as_str()))
            }
        }
    };
}

string_option!(FullDocumentType {
    UpdateLookup = "updateLookup",
    WhenAvailable = "whenAvailable",
    Required = "required"
});
string_option!(FullDocumentBeforeChangeType {
    WhenAvailable = "whenAvailable",
    Required = "required",
    Off = "off"
});

/// The option documents of the C ABI: the two types by name, a token as
/// the server sent it, a time as a BSON timestamp.
mod option_values {
    use bson::{Bson, Timestamp};

    use super::{FullDocumentBeforeChangeType, FullDocumentType, ResumeToken};
    use crate::error::Result;
    use crate::proto::options_doc::{mistyped, OptionValue};

    impl OptionValue for FullDocumentType {
        fn from_option(key: &str, value: Bson) -> Result<Self> {
            match value {
                Bson::String(name) => Ok(FullDocumentType::from(name.as_str())),
                other => Err(mistyped(key, "a string", &other)),
            }
        }
    }

    impl OptionValue for FullDocumentBeforeChangeType {
        fn from_option(key: &str, value: Bson) -> Result<Self> {
            match value {
                Bson::String(name) => Ok(FullDocumentBeforeChangeType::from(name.as_str())),
                other => Err(mistyped(key, "a string", &other)),
            }
        }
    }

    impl OptionValue for ResumeToken {
        fn from_option(key: &str, value: Bson) -> Result<Self> {
            match value {
                Bson::Document(_) => Ok(ResumeToken(value)),
                other => Err(mistyped(key, "a resume token document", &other)),
            }
        }
    }

    impl OptionValue for Timestamp {
        fn from_option(key: &str, value: Bson) -> Result<Self> {
            match value {
                Bson::Timestamp(time) => Ok(time),
                other => Err(mistyped(key, "a timestamp", &other)),
            }
        }
    }
}

options_struct! {
    #[skip_serializing_none]
    /// Options of `watch` (a change stream). Those of the `$changeStream`
    /// stage go into it; the rest are the `aggregate`'s and its `getMore`s'.
    /// A change stream reads with read concern `majority` or none.
    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct ChangeStreamOptions {
        /// What `full_document` holds for updates (`$changeStream.fullDocument`).
        full_document: FullDocumentType,
        /// Whether events carry the pre-image (`$changeStream.fullDocumentBeforeChange`).
        full_document_before_change: FullDocumentBeforeChangeType,
        /// Start after this event (`$changeStream.resumeAfter`).
        resume_after: ResumeToken,
        /// Start with the changes at or after this time (`$changeStream.startAtOperationTime`).
        start_at_operation_time: Timestamp,
        /// Start after this event, even an `invalidate` (`$changeStream.startAfter`).
        start_after: ResumeToken,
        /// How long each `getMore` waits for a change on the server
        /// (its `maxTimeMS`); the server's default (1 s) when unset.
        #[serde(skip_serializing)]
        max_await_time: Duration,
        /// Events per batch (`cursor.batchSize` and the `getMore`s').
        #[serde(skip_serializing)]
        batch_size: u32,
        /// `collation` of the `aggregate`.
        #[serde(skip_serializing)]
        collation: Collation,
        /// The read concern (`majority` or none).
        #[serde(skip_serializing)]
        read_concern: ReadConcern,
        /// Where to open the stream (and where a resume selects).
        #[serde(skip_serializing)]
        selection_criteria: SelectionCriteria,
        /// Also the DDL events: `create`, `createIndexes`, `modify`, ...
        /// (`$changeStream.showExpandedEvents`, 6.0+).
        show_expanded_events: bool,
        /// `comment` of the `aggregate`, repeated on its `getMore`s.
        comment: Bson,
    }
}

/// What a stream watches.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum WatchTarget {
    /// One collection (`aggregate: "<coll>"`).
    Collection(Namespace),
    /// Every collection of a database (`aggregate: 1`).
    Database(String),
    /// The whole deployment (`aggregate: 1` on `admin`, `allChangesForCluster`).
    Cluster,
}

/// What the `aggregate` that opened (or resumed) a stream returned.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) spec: Box<CursorSpec>,
    /// The reply's `operationTime`.
    pub(crate) operation_time: Option<Timestamp>,
    /// The wire version of the server the cursor lives on: its `getMore`s'
    /// errors are judged by it.
    pub(crate) wire_version: i32,
}

/// A stream's resume state: the options it was opened with, the token it
/// would resume from, the operation time it may resume at.
#[derive(Clone, Debug)]
pub(crate) struct ChangeStreamState {
    target: WatchTarget,
    pipeline: Vec<Document>,
    options: ChangeStreamOptions,
    resume_token: Option<ResumeToken>,
    /// `startAtOperationTime` as given, or the initial reply's `operationTime`.
    operation_time: Option<Timestamp>,
    /// Whether an event has gone to the caller: until then a stream opened
    /// with `startAfter` resumes with `startAfter`.
    returned_event: bool,
    /// Whether the next `aggregate` resumes an opened stream.
    resuming: bool,
}

impl ChangeStreamState {
    pub(crate) fn new(
        target: WatchTarget,
        pipeline: Vec<Document>,
        options: ChangeStreamOptions,
    ) -> Self {
        let resume_token = options
            .start_after
            .clone()
            .or_else(|| options.resume_after.clone());
        ChangeStreamState {
            target,
            pipeline,
            operation_time: options.start_at_operation_time,
            options,
            resume_token,
            returned_event: false,
            resuming: false,
        }
    }

    /// The token a resume would use now.
    pub(crate) fn resume_token(&self) -> Option<&ResumeToken> {
        self.resume_token.as_ref()
    }

    /// The `$changeStream` stage: the options as given on the first
    /// `aggregate`, the resume point the spec's resume process picks on a
    /// resume.
    fn stage(&self) -> Document {
        let options = &self.options;
        let mut stage = Document::new();
        if let Some(full) = &options.full_document {
            stage.insert("fullDocument", full.as_str());
        }
        if let Some(before) = &options.full_document_before_change {
            stage.insert("fullDocumentBeforeChange", before.as_str());
        }
        let (resume_after, start_after, start_at) = if !self.resuming {
            (
                options.resume_after.clone(),
                options.start_after.clone(),
                options.start_at_operation_time,
            )
        } else {
            match &self.resume_token {
                Some(token) if options.start_after.is_some() && !self.returned_event => {
                    (None, Some(token.clone()), None)
                }
                Some(token) => (Some(token.clone()), None, None),
                None => (None, None, self.operation_time),
            }
        };
        if let Some(token) = resume_after {
            stage.insert("resumeAfter", token.0);
        }
        if let Some(token) = start_after {
            stage.insert("startAfter", token.0);
        }
        if let Some(time) = start_at {
            stage.insert("startAtOperationTime", time);
        }
        if self.target == WatchTarget::Cluster {
            stage.insert("allChangesForCluster", true);
        }
        if let Some(show) = options.show_expanded_events {
            stage.insert("showExpandedEvents", show);
        }
        stage
    }

    /// The `aggregate` that opens the stream, or resumes it after
    /// [`Self::begin_resume`].
    pub(crate) fn aggregate(&self) -> ChangeStreamAggregate {
        let mut pipeline = Vec::with_capacity(self.pipeline.len() + 1);
        pipeline.push(bson::doc! { "$changeStream": self.stage() });
        pipeline.extend(self.pipeline.iter().cloned());
        let options = &self.options;
        let aggregate_options = AggregateOptions {
            batch_size: options.batch_size,
            collation: options.collation.clone(),
            comment: options.comment.clone(),
            max_await_time: options.max_await_time,
            read_concern: options.read_concern.clone(),
            selection_criteria: options.selection_criteria.clone(),
            ..AggregateOptions::default()
        };
        let target = match &self.target {
            WatchTarget::Collection(ns) => AggregateTarget::Collection(ns.clone()),
            WatchTarget::Database(db) => AggregateTarget::Database(db.clone()),
            WatchTarget::Cluster => AggregateTarget::Database("admin".into()),
        };
        ChangeStreamAggregate(Aggregate::new(target, pipeline, aggregate_options))
    }

    /// Records an `aggregate`'s reply: the first batch's token, and on the
    /// first `aggregate` the operation time a resume may start at.
    pub(crate) fn opened(&mut self, opened: &Opened) {
        let options = &self.options;
        let started_anywhere = options.start_at_operation_time.is_some()
            || options.resume_after.is_some()
            || options.start_after.is_some();
        if !self.resuming
            && !started_anywhere
            && opened.spec.batch.is_empty()
            && opened.spec.post_batch_resume_token.is_none()
        {
            self.operation_time = opened.operation_time;
        }
        self.resuming = false;
        self.batch_received(&opened.spec);
    }

    /// An empty batch with a `postBatchResumeToken` moves the token on.
    pub(crate) fn batch_received(&mut self, spec: &CursorSpec) {
        if spec.batch.is_empty() {
            if let Some(token) = &spec.post_batch_resume_token {
                self.resume_token = Some(ResumeToken(Bson::Document(token.clone())));
            }
        }
    }

    /// `event`, just taken from `spec`'s batch, goes to the caller: its
    /// `_id` (or, for a batch's last, the batch's `postBatchResumeToken`)
    /// is the token from now on. An event without `_id` is an error.
    pub(crate) fn document_returned(
        &mut self,
        event: &RawDocument,
        spec: &CursorSpec,
    ) -> Result<()> {
        let id = match event.get("_id") {
            Ok(Some(id)) => id.to_raw_bson(),
            _ => return Err(Error::new(ErrorKind::MissingResumeToken)),
        };
        self.returned_event = true;
        self.resume_token = match (&spec.post_batch_resume_token, spec.batch.is_empty()) {
            (Some(token), true) => Some(ResumeToken(Bson::Document(token.clone()))),
            _ => Some(ResumeToken(Bson::try_from(id).map_err(|e| {
                crate::proto::operation::malformed(format!("an event's `_id`: {e}"))
            })?)),
        };
        Ok(())
    }

    /// The next [`Self::aggregate`] resumes the stream.
    pub(crate) fn begin_resume(&mut self) {
        self.resuming = true;
    }
}

/// The error codes a server before 4.4 (wire version 9) marks no error
/// label on, which a change stream resumes after.
const RESUMABLE_CODES_BEFORE_4_4: [i32; 17] = [
    6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 63, 150, 13388, 234, 133,
];
const CURSOR_NOT_FOUND: i32 = 43;
const WIRE_VERSION_4_4: i32 = 9;

/// Whether a change stream resumes after `error` of a `getMore` sent on a
/// socket of `wire_version`: any error not from the server (a network
/// error), a lost cursor, and server errors the server (4.4+)
/// labels `ResumableChangeStreamError` or (before 4.4) the spec lists.
pub(crate) fn is_resumable(error: &Error, wire_version: i32) -> bool {
    match &*error.kind {
        ErrorKind::Command(command) => {
            command.code == CURSOR_NOT_FOUND
                || if wire_version >= WIRE_VERSION_4_4 {
                    error.contains_label("ResumableChangeStreamError")
                } else {
                    RESUMABLE_CODES_BEFORE_4_4.contains(&command.code)
                        && !error.contains_label("NonResumableChangeStreamError")
                }
        }
        ErrorKind::Io(_) | ErrorKind::InvalidResponse { .. } => true,
        // `timeoutMS` ran out: the caller's bound, not the stream's fault.
        // The stream stays open; the socket the timeout closed makes the
        // next `getMore` a network error, which resumes (the CSOT spec's
        // "the next call resumes").
        ErrorKind::Timeout { .. } => false,
        // The server refused or failed in other ways; or the caller's own
        // mistakes and the client's state, which a resume cannot mend.
        _ => false,
    }
}

/// `aggregate` with a `$changeStream` stage: its cursor, and what the
/// resume rules need of the reply.
#[derive(Clone, Debug)]
pub(crate) struct ChangeStreamAggregate(Aggregate);

impl Operation for ChangeStreamAggregate {
    type Output = Opened;
    const NAME: &'static str = "aggregate";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        self.0.build(server)
    }

    fn handle_reply(&self, reply: Document, server: &ServerInfo) -> Result<Opened> {
        self.handle_reply_raw(Reply::from_document(reply), server)
    }

    fn handle_reply_raw(&self, reply: Reply, server: &ServerInfo) -> Result<Opened> {
        let operation_time = match reply.field("operationTime").as_deref() {
            Some(Bson::Timestamp(time)) => Some(*time),
            _ => None,
        };
        let mut spec = self.0.handle_reply_raw(reply, server)?;
        // The stream's cursor is tailable: an empty batch does not end it.
        spec.options.tailable = true;
        Ok(Opened {
            spec,
            operation_time,
            wire_version: server.max_wire_version,
        })
    }

    fn selection_criteria(&self) -> Option<crate::proto::select::Criteria> {
        self.0.selection_criteria()
    }

    fn retryability(&self) -> Retryability {
        self.0.retryability()
    }

    fn read_concern(&self) -> Option<&ReadConcern> {
        self.0.read_concern()
    }
}

#[cfg(test)]
mod tests;
