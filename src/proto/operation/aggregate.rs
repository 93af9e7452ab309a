//! `aggregate`: a pipeline on a collection or a database, opening a cursor.

use bson::{doc, Bson, Document};

use super::cursor::CursorOptions;
use super::{
    append_option, duration_ms, Command, CursorSpec, Namespace, Operation, Retryability, ServerInfo,
};
use crate::error::Result;
use crate::proto::coll_options::AggregateOptions;
use crate::proto::concern::{ReadConcern, WriteConcern};
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::reply::Reply;
use crate::proto::select::Criteria;

/// What an aggregation runs on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AggregateTarget {
    /// A collection's documents (`aggregate: "<coll>"`).
    Collection(Namespace),
    /// A database-level pipeline such as `$currentOp` (`aggregate: 1`).
    Database(String),
}

/// `aggregate`: returns the cursor with its first batch. A pipeline ending in
/// `$out` or `$merge` is a write: not retried as a read, sent with the write
/// concern, and it selects like a write unless all servers are 5.0+.
#[derive(Clone, Debug)]
pub struct Aggregate {
    target: AggregateTarget,
    pipeline: Vec<Document>,
    options: AggregateOptions,
    selection_criteria: Option<Criteria>,
}

impl Aggregate {
    /// Runs `pipeline` on `target`.
    pub fn new(
        target: AggregateTarget,
        pipeline: Vec<Document>,
        options: AggregateOptions,
    ) -> Self {
        let mut aggregate = Aggregate {
            target,
            pipeline,
            options,
            selection_criteria: None,
        };
        aggregate.selection_criteria = match aggregate.options.selection_criteria.clone() {
            Some(SelectionCriteria::ReadPreference(read_preference))
                if aggregate.has_write_stage() =>
            {
                Some(Criteria::AggregateWrite(read_preference))
            }
            other => other.map(Criteria::from),
        };
        aggregate
    }

    /// Whether the last stage is `$out` or `$merge`.
    pub fn has_write_stage(&self) -> bool {
        Self::pipeline_writes(&self.pipeline)
    }

    /// Whether `pipeline`'s last stage is `$out` or `$merge`.
    pub fn pipeline_writes(pipeline: &[Document]) -> bool {
        pipeline.last().is_some_and(|stage| {
            stage
                .keys()
                .next()
                .is_some_and(|k| k == "$out" || k == "$merge")
        })
    }

    fn db(&self) -> &str {
        match &self.target {
            AggregateTarget::Collection(ns) => &ns.db,
            AggregateTarget::Database(db) => db,
        }
    }
}

impl Operation for Aggregate {
    type Output = Box<CursorSpec>;
    const NAME: &'static str = "aggregate";

    fn cursor_request(&self) -> crate::proto::cursor_timeout::CursorRequest {
        crate::proto::cursor_timeout::CursorRequest {
            max_await: self.options.max_await_time,
            writes: self.has_write_stage(),
            ..Default::default()
        }
    }

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let target = match &self.target {
            AggregateTarget::Collection(ns) => Bson::String(ns.coll.to_string()),
            AggregateTarget::Database(_) => Bson::Int32(1),
        };
        let options = &self.options;
        let mut body = doc! { "aggregate": target, "pipeline": self.pipeline.clone() };
        let mut cursor = Document::new();
        // A write pipeline returns nothing, and a batchSize of 0 could stop
        // the server before the write: send an empty cursor document.
        if !self.has_write_stage() {
            append_option(&mut cursor, "batchSize", options.batch_size.map(i64::from));
        }
        body.insert("cursor", cursor);
        append_option(&mut body, "allowDiskUse", options.allow_disk_use);
        append_option(
            &mut body,
            "bypassDocumentValidation",
            options.bypass_document_validation,
        );
        append_option(&mut body, "collation", options.collation.clone());
        append_option(&mut body, "comment", options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(options.raw_data, server)?,
        );
        append_option(
            &mut body,
            "hint",
            options.hint.as_ref().map(|h| h.to_bson()),
        );
        append_option(&mut body, "maxTimeMS", options.max_time.map(duration_ms));
        append_option(&mut body, "let", options.let_vars.clone());
        Ok(Command::new(Self::NAME, self.db().to_string(), body))
    }

    fn handle_reply(&self, reply: Document, server: &ServerInfo) -> Result<Box<CursorSpec>> {
        self.handle_reply_raw(Reply::from_document(reply), server)
    }

    fn handle_reply_raw(&self, reply: Reply, _server: &ServerInfo) -> Result<Box<CursorSpec>> {
        if self.has_write_stage() {
            super::check_write_concern(reply.document())?;
        }
        let options = CursorOptions {
            batch_size: self.options.batch_size.filter(|size| *size > 0),
            comment: self.options.comment.clone(),
            max_await_time: self.options.max_await_time,
            ..CursorOptions::default()
        };
        match &self.target {
            AggregateTarget::Collection(ns) => CursorSpec::from_raw_reply_on(reply, options, ns),
            AggregateTarget::Database(_) => CursorSpec::from_raw_reply(reply, options),
        }
    }

    fn selection_criteria(&self) -> Option<Criteria> {
        self.selection_criteria.clone()
    }

    fn retryability(&self) -> Retryability {
        if self.has_write_stage() {
            Retryability::None
        } else {
            Retryability::Read
        }
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.options
            .write_concern
            .as_ref()
            .filter(|_| self.has_write_stage())
    }

    fn read_concern(&self) -> Option<&ReadConcern> {
        self.options.read_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::proto::operation::find::cursor_reply;
    use crate::proto::operation::test_support::{ns, server};
    use crate::proto::read_preference::{ReadPreference, ReadPreferenceMode};

    #[test]
    fn collection_pipeline_with_options() {
        let options = AggregateOptions::default()
            .batch_size(2)
            .allow_disk_use(true)
            .comment(Bson::from("c"))
            .max_time(Duration::from_secs(1))
            .let_vars(doc! { "x": 1 });
        let mut aggregate = Aggregate::new(
            AggregateTarget::Collection(ns()),
            vec![doc! { "$match": { "_id": { "$gt": 1 } } }],
            options,
        );
        let command = aggregate.build(&server()).unwrap();
        assert_eq!(&*command.target_db, "db");
        assert_eq!(
            command.body,
            doc! {
                "aggregate": "coll", "pipeline": [ { "$match": { "_id": { "$gt": 1 } } } ],
                "cursor": { "batchSize": 2_i64 }, "allowDiskUse": true, "comment": "c",
                "maxTimeMS": 1000, "let": { "x": 1 },
            }
        );
        assert_eq!(aggregate.retryability(), Retryability::Read);
        let spec = aggregate
            .handle_reply(cursor_reply(3, "db.coll", vec![doc! { "a": 1 }]), &server())
            .unwrap();
        assert_eq!(spec.options.batch_size, Some(2));
        assert_eq!(spec.options.comment, Some(Bson::from("c")));
    }

    #[test]
    fn database_pipeline_targets_one() {
        let mut aggregate = Aggregate::new(
            AggregateTarget::Database("admin".into()),
            vec![doc! { "$currentOp": {} }],
            AggregateOptions::default(),
        );
        let command = aggregate.build(&server()).unwrap();
        assert_eq!(&*command.target_db, "admin");
        assert_eq!(
            command.body,
            doc! { "aggregate": 1, "pipeline": [ { "$currentOp": {} } ], "cursor": {} }
        );
    }

    #[test]
    fn out_and_merge_make_a_write() {
        let secondary = ReadPreference::with_mode(ReadPreferenceMode::Secondary);
        let options = AggregateOptions::default()
            .batch_size(0)
            .write_concern(WriteConcern::default())
            .selection_criteria(SelectionCriteria::ReadPreference(secondary));
        for stage in [
            doc! { "$out": "other" },
            doc! { "$merge": { "into": "other" } },
        ] {
            let mut aggregate = Aggregate::new(
                AggregateTarget::Collection(ns()),
                vec![doc! { "$match": {} }, stage.clone()],
                options.clone(),
            );
            assert!(aggregate.has_write_stage());
            let body = aggregate
                .build(&server())
                .unwrap()
                .body
                .to_document()
                .unwrap();
            assert_eq!(body.get_document("cursor").unwrap(), &doc! {}, "{stage}");
            assert_eq!(aggregate.retryability(), Retryability::None);
            assert!(aggregate.write_concern().is_some());
            assert!(matches!(
                aggregate.selection_criteria(),
                Some(Criteria::AggregateWrite(_))
            ));
        }
        // Only the last stage counts.
        let read = Aggregate::new(
            AggregateTarget::Collection(ns()),
            vec![doc! { "$out": "x" }, doc! { "$match": {} }],
            options,
        );
        assert!(!read.has_write_stage());
        assert!(read.write_concern().is_none());
    }

    #[test]
    fn write_concern_error_of_a_write_pipeline_is_reported() {
        let aggregate = Aggregate::new(
            AggregateTarget::Collection(ns()),
            vec![doc! { "$out": "x" }],
            AggregateOptions::default(),
        );
        let mut reply = cursor_reply(0, "db.coll", vec![]);
        reply.insert(
            "writeConcernError",
            doc! { "code": 64, "errmsg": "timeout" },
        );
        let error = aggregate.handle_reply(reply, &server()).unwrap_err();
        assert_eq!(error.code(), Some(64));
    }
}
