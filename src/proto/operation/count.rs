//! `count_documents` (an aggregation) and `estimated_document_count` (`count`).

use bson::{doc, Document};

use super::{
    append_option, count_bson, duration_ms, malformed, reply_count, Command, CursorSpec, Namespace,
    Operation, Retryability, ServerInfo,
};
use crate::error::Result;
use crate::proto::coll_options::{CountOptions, EstimatedDocumentCountOptions};
use crate::proto::concern::ReadConcern;
use crate::proto::select::Criteria;

/// `count_documents`: an exact count, as the aggregation
/// `$match` → `$skip` → `$limit` → `$group: { _id: 1, n: { $sum: 1 } }`.
#[derive(Clone, Debug)]
pub struct CountDocuments {
    ns: Namespace,
    filter: Document,
    options: CountOptions,
}

impl CountDocuments {
    /// Counts the documents of `ns` matching `filter`.
    pub fn new(ns: Namespace, filter: Document, options: CountOptions) -> Self {
        CountDocuments {
            ns,
            filter,
            options,
        }
    }
}

impl Operation for CountDocuments {
    type Output = u64;
    const NAME: &'static str = "aggregate";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let options = &self.options;
        let mut pipeline = vec![doc! { "$match": self.filter.clone() }];
        if let Some(skip) = options.skip.filter(|s| *s > 0) {
            pipeline.push(doc! { "$skip": count_bson(skip) });
        }
        if let Some(limit) = options.limit.filter(|l| *l > 0) {
            pipeline.push(doc! { "$limit": count_bson(limit) });
        }
        pipeline.push(doc! { "$group": { "_id": 1, "n": { "$sum": 1 } } });
        let mut body =
            doc! { "aggregate": self.ns.coll.to_string(), "pipeline": pipeline, "cursor": {} };
        append_option(&mut body, "collation", options.collation.clone());
        append_option(&mut body, "comment", options.comment.clone());
        append_option(
            &mut body,
            "hint",
            options.hint.as_ref().map(|h| h.to_bson()),
        );
        append_option(&mut body, "maxTimeMS", options.max_time.map(duration_ms));
        append_option(
            &mut body,
            "rawData",
            super::raw_data(options.raw_data, server)?,
        );
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<u64> {
        let mut cursor = CursorSpec::from_reply(reply, Default::default())?;
        // No matching document means no group and an empty batch.
        match cursor.pop_front::<Document>() {
            None => Ok(0),
            Some(group) => {
                let group = group?;
                reply_count(&group, "n")?.ok_or_else(|| malformed("the count group has no `n`"))
            }
        }
    }

    fn selection_criteria(&self) -> Option<Criteria> {
        self.options.selection_criteria.as_ref().map(Criteria::from)
    }

    fn retryability(&self) -> Retryability {
        Retryability::Read
    }

    fn read_concern(&self) -> Option<&ReadConcern> {
        self.options.read_concern.as_ref()
    }
}

/// `estimated_document_count`: the collection's metadata count (`count`).
#[derive(Clone, Debug)]
pub struct EstimatedDocumentCount {
    ns: Namespace,
    options: EstimatedDocumentCountOptions,
}

impl EstimatedDocumentCount {
    /// Estimates the number of documents in `ns`.
    pub fn new(ns: Namespace, options: EstimatedDocumentCountOptions) -> Self {
        EstimatedDocumentCount { ns, options }
    }
}

impl Operation for EstimatedDocumentCount {
    type Output = u64;
    const NAME: &'static str = "count";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let mut body = doc! { "count": self.ns.coll.to_string() };
        append_option(
            &mut body,
            "maxTimeMS",
            self.options.max_time.map(duration_ms),
        );
        append_option(&mut body, "comment", self.options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.options.raw_data, server)?,
        );
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<u64> {
        reply_count(&reply, "n")?.ok_or_else(|| malformed("the count reply has no `n`"))
    }

    fn selection_criteria(&self) -> Option<Criteria> {
        self.options.selection_criteria.as_ref().map(Criteria::from)
    }

    fn retryability(&self) -> Retryability {
        Retryability::Read
    }

    fn read_concern(&self) -> Option<&ReadConcern> {
        self.options.read_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bson::Bson;

    use super::*;
    use crate::proto::coll_options::Hint;
    use crate::proto::operation::find::cursor_reply;
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn count_documents_pipeline() {
        let mut count = CountDocuments::new(ns(), doc! {}, CountOptions::default());
        assert_eq!(
            count.build(&server()).unwrap().body,
            doc! { "aggregate": "coll", "pipeline": [ { "$match": {} }, { "$group": { "_id": 1, "n": { "$sum": 1 } } } ], "cursor": {} }
        );
        let options = CountOptions::default()
            .skip(2)
            .limit(5)
            .hint(Hint::Keys(doc! { "x": 1 }))
            .comment(Bson::from("c"))
            .max_time(Duration::from_millis(10));
        let mut count = CountDocuments::new(ns(), doc! { "x": 1 }, options);
        assert_eq!(
            count.build(&server()).unwrap().body,
            doc! {
                "aggregate": "coll",
                "pipeline": [
                    { "$match": { "x": 1 } }, { "$skip": 2_i64 }, { "$limit": 5_i64 },
                    { "$group": { "_id": 1, "n": { "$sum": 1 } } },
                ],
                "cursor": {}, "comment": "c", "hint": { "x": 1 }, "maxTimeMS": 10,
            }
        );
    }

    #[test]
    fn count_documents_reads_n_or_zero() {
        let count = CountDocuments::new(ns(), doc! {}, CountOptions::default());
        let reply = cursor_reply(0, "db.coll", vec![doc! { "_id": 1, "n": 3 }]);
        assert_eq!(count.handle_reply(reply, &server()).unwrap(), 3);
        let empty = cursor_reply(0, "db.coll", vec![]);
        assert_eq!(count.handle_reply(empty, &server()).unwrap(), 0);
        let bad = cursor_reply(0, "db.coll", vec![doc! { "_id": 1, "n": "3" }]);
        assert!(count.handle_reply(bad, &server()).is_err());
    }

    #[test]
    fn estimated_count_uses_count() {
        let options = EstimatedDocumentCountOptions::default().max_time(Duration::from_secs(6));
        let mut count = EstimatedDocumentCount::new(ns(), options);
        assert_eq!(
            count.build(&server()).unwrap().body,
            doc! { "count": "coll", "maxTimeMS": 6000 }
        );
        assert_eq!(
            count
                .handle_reply(doc! { "n": 4, "ok": 1 }, &server())
                .unwrap(),
            4
        );
        assert!(count.handle_reply(doc! { "ok": 1 }, &server()).is_err());
        assert_eq!(count.retryability(), Retryability::Read);
    }
}
