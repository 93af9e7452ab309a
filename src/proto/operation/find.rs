//! `find`: a query opening a cursor.

use bson::{Bson, Document, RawDocumentBuf};

use super::cursor::CursorOptions;
use super::{
    count_bson, duration_ms, Command, CursorSpec, Namespace, Operation, Retryability, ServerInfo,
};
use crate::error::{Error, Result};
use crate::proto::bson_write::{DocumentWriter, WriteError};
use crate::proto::coll_options::{CursorType, FindOptions};
use crate::proto::concern::ReadConcern;
use crate::proto::reply::Reply;
use crate::proto::select::Criteria;

/// `find` (and `find_one`): returns the cursor with its first batch.
#[derive(Clone, Debug)]
pub struct Find {
    ns: Namespace,
    filter: Document,
    /// Boxed: the options are near a kilobyte, and a `find_one` builder
    /// that holds them boxed hands them over without copying them.
    options: Box<FindOptions>,
}

impl Find {
    /// The documents of `ns` matching `filter`.
    pub fn new(ns: Namespace, filter: Document, options: impl Into<Box<FindOptions>>) -> Self {
        Find {
            ns,
            filter,
            options: options.into(),
        }
    }

    /// At most one document of `ns` matching `filter`: `limit: 1, singleBatch: true`.
    pub fn find_one(ns: Namespace, filter: Document, options: impl Into<Box<FindOptions>>) -> Self {
        let mut options = options.into();
        options.limit = Some(-1);
        Find::new(ns, filter, options)
    }

    /// The find spec's mapping of `limit` and `batchSize` to the command:
    /// `(limit, batchSize, singleBatch)`, zeros meaning "omit".
    fn limit_and_batch(&self) -> (u64, u64, bool) {
        let limit = self.options.limit.unwrap_or(0);
        let batch_size = u64::from(self.options.batch_size.unwrap_or(0));
        let single_batch = limit < 0;
        let limit = limit.unsigned_abs();
        let batch_size = if single_batch {
            // `limit` and `singleBatch` already say it all; a `batchSize`
            // only matters when it is smaller (the unified findOne tests
            // assert that findOne sends none).
            if batch_size < limit {
                batch_size
            } else {
                0
            }
        } else if limit > 0 && batch_size == limit {
            // The CRUD spec: a batchSize equal to the limit would leave the
            // cursor open after the first batch and cost a getMore; one more
            // lets the server close it.
            limit + 1
        } else {
            batch_size
        };
        (limit, batch_size, single_batch)
    }
}

impl Find {
    /// The `find` command, written straight into its bytes: building a
    /// `Document` of it, only to write it once and drop it, was the largest
    /// cost of a warm `find_one` (a map insert and a key allocation per
    /// field, the filter cloned). The filter and every option are checked
    /// for depth and validity as they are written.
    fn write_body(&self, raw_data: Option<bool>) -> std::result::Result<Vec<u8>, WriteError> {
        let mut body = DocumentWriter::with_capacity(128);
        body.string("find", &self.ns.coll)?;
        body.document("filter", &self.filter)?;
        self.write_query_shape(&mut body)?;
        self.write_cursor_flags(&mut body)?;
        self.write_trailing_options(&mut body)?;
        if let Some(raw_data) = raw_data {
            body.value("rawData", &Bson::Boolean(raw_data))?;
        }
        body.finish()
    }

    /// What selects and orders the documents: sort, projection, hint, skip,
    /// limit and batch size, comment, time limit, index bounds.
    fn write_query_shape(&self, body: &mut DocumentWriter) -> std::result::Result<(), WriteError> {
        let options = &self.options;
        let documents = [("sort", &options.sort), ("projection", &options.projection)];
        for (key, value) in documents {
            if let Some(value) = value {
                body.document(key, value)?;
            }
        }
        if let Some(hint) = &options.hint {
            body.value("hint", &hint.to_bson())?;
        }
        if let Some(skip) = options.skip.filter(|s| *s > 0) {
            body.value("skip", &count_bson(skip))?;
        }
        let (limit, batch_size, single_batch) = self.limit_and_batch();
        if limit > 0 {
            body.value("limit", &count_bson(limit))?;
        }
        if batch_size > 0 {
            body.value("batchSize", &count_bson(batch_size))?;
        }
        if single_batch {
            body.value("singleBatch", &Bson::Boolean(true))?;
        }
        if let Some(comment) = &options.comment {
            body.value("comment", comment)?;
        }
        if let Some(max_time) = options.max_time {
            body.value("maxTimeMS", &duration_ms(max_time))?;
        }
        #[allow(deprecated)] // sent as given, as the official driver does
        if let Some(max_scan) = options.max_scan {
            body.value("maxScan", &count_bson(max_scan))?;
        }
        for (key, value) in [("max", &options.max), ("min", &options.min)] {
            if let Some(value) = value {
                body.document(key, value)?;
            }
        }
        Ok(())
    }

    /// The boolean flags, the cursor type's among them.
    fn write_cursor_flags(&self, body: &mut DocumentWriter) -> std::result::Result<(), WriteError> {
        let options = &self.options;
        let (tailable, await_data) = match options.cursor_type.unwrap_or_default() {
            CursorType::NonTailable => (None, None),
            CursorType::Tailable => (Some(true), None),
            CursorType::TailableAwait => (Some(true), Some(true)),
        };
        let flags = [
            ("returnKey", options.return_key),
            ("showRecordId", options.show_record_id),
            ("tailable", tailable),
            ("awaitData", await_data),
            ("noCursorTimeout", options.no_cursor_timeout),
            ("allowPartialResults", options.allow_partial_results),
        ];
        for (key, value) in flags {
            if let Some(value) = value {
                body.value(key, &Bson::Boolean(value))?;
            }
        }
        Ok(())
    }

    /// Collation, disk use and `let`, written last as before.
    fn write_trailing_options(
        &self,
        body: &mut DocumentWriter,
    ) -> std::result::Result<(), WriteError> {
        let options = &self.options;
        if let Some(collation) = &options.collation {
            body.document("collation", &collation.to_document())?;
        }
        if let Some(allow) = options.allow_disk_use {
            body.value("allowDiskUse", &Bson::Boolean(allow))?;
        }
        if let Some(let_vars) = &options.let_vars {
            body.document("let", let_vars)?;
        }
        Ok(())
    }
}

impl Operation for Find {
    type Output = Box<CursorSpec>;
    const NAME: &'static str = "find";

    fn cursor_request(&self) -> crate::proto::cursor_timeout::CursorRequest {
        crate::proto::cursor_timeout::CursorRequest {
            cursor_type: self.options.cursor_type.unwrap_or_default(),
            max_await: self.options.max_await_time,
            ..Default::default()
        }
    }

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let raw_data = super::raw_data(self.options.raw_data, server)?;
        let bytes = self
            .write_body(raw_data)
            .map_err(|error| crate::proto::wire::write_error(error, "command body"))?;
        let body = RawDocumentBuf::from_bytes(bytes)
            .map_err(|e| Error::invalid_argument(format!("the find command is not BSON: {e}")))?;
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, server: &ServerInfo) -> Result<Box<CursorSpec>> {
        self.handle_reply_raw(Reply::from_document(reply), server)
    }

    fn handle_reply_raw(&self, reply: Reply, _server: &ServerInfo) -> Result<Box<CursorSpec>> {
        let (limit, batch_size, _) = self.limit_and_batch();
        let cursor_type = self.options.cursor_type.unwrap_or_default();
        let options = CursorOptions {
            batch_size: self.options.batch_size.filter(|_| batch_size > 0),
            limit: (limit > 0).then_some(limit),
            comment: self.options.comment.clone(),
            max_await_time: self
                .options
                .max_await_time
                .filter(|_| cursor_type == CursorType::TailableAwait),
            tailable: cursor_type != CursorType::NonTailable,
        };
        CursorSpec::from_raw_reply_on(reply, options, &self.ns)
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

/// A cursor-reply helper for tests of operations that open cursors.
#[cfg(test)]
pub(crate) fn cursor_reply(id: i64, ns: &str, batch: Vec<Document>) -> Document {
    use bson::doc;
    doc! { "cursor": { "id": id, "ns": ns, "firstBatch": batch }, "ok": 1 }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bson::doc;

    use super::*;
    use crate::proto::coll_options::Hint;
    use crate::proto::operation::test_support::{ns, server};

    fn body(find: &mut Find) -> Document {
        find.build(&server()).unwrap().body.to_document().unwrap()
    }

    #[test]
    fn plain_find_sends_an_empty_filter() {
        let mut find = Find::new(ns(), doc! {}, FindOptions::default());
        assert_eq!(body(&mut find), doc! { "find": "coll", "filter": {} });
        assert_eq!(find.retryability(), Retryability::Read);
    }

    #[test]
    fn every_option_is_sent() {
        let options = FindOptions::default()
            .sort(doc! { "x": 1 })
            .projection(doc! { "_id": 0 })
            .hint(Hint::Name("x_1".into()))
            .skip(5)
            .limit(10)
            .batch_size(3)
            .comment(Bson::from("why"))
            .max_time(Duration::from_millis(1500))
            .max(doc! { "x": 9 })
            .min(doc! { "x": 0 })
            .return_key(false)
            .show_record_id(true)
            .cursor_type(CursorType::TailableAwait)
            .max_await_time(Duration::from_millis(100))
            .no_cursor_timeout(true)
            .allow_partial_results(true)
            .collation(crate::options::Collation::builder().locale("fr").build())
            .allow_disk_use(true)
            .let_vars(doc! { "v": 1 });
        let mut find = Find::new(ns(), doc! { "x": { "$gt": 1 } }, options);
        assert_eq!(
            body(&mut find),
            doc! {
                "find": "coll", "filter": { "x": { "$gt": 1 } }, "sort": { "x": 1 },
                "projection": { "_id": 0 }, "hint": "x_1", "skip": 5_i64, "limit": 10_i64,
                "batchSize": 3_i64, "comment": "why", "maxTimeMS": 1500, "max": { "x": 9 },
                "min": { "x": 0 }, "returnKey": false, "showRecordId": true, "tailable": true,
                "awaitData": true, "noCursorTimeout": true, "allowPartialResults": true,
                "collation": { "locale": "fr" }, "allowDiskUse": true, "let": { "v": 1 },
            }
        );
        let spec = find
            .handle_reply(cursor_reply(7, "db.coll", vec![]), &server())
            .unwrap();
        assert_eq!(
            spec.options.max_await_time,
            Some(Duration::from_millis(100))
        );
        assert_eq!(spec.options.limit, Some(10));
        assert!(spec.options.tailable);
    }

    #[test]
    fn the_deprecated_max_scan_is_sent_as_given() {
        #[allow(deprecated)]
        let options = FindOptions::default().max_scan(10);
        let mut find = Find::new(ns(), doc! {}, options);
        assert_eq!(
            body(&mut find),
            doc! { "find": "coll", "filter": {}, "maxScan": 10_i64 }
        );
    }

    #[test]
    fn negative_limit_means_one_batch() {
        let mut find = Find::new(
            ns(),
            doc! {},
            FindOptions::default().limit(-5).batch_size(2),
        );
        assert_eq!(
            body(&mut find),
            doc! { "find": "coll", "filter": {}, "limit": 5_i64, "batchSize": 2_i64, "singleBatch": true }
        );
        let mut one = Find::find_one(ns(), doc! { "a": 1 }, FindOptions::default());
        assert_eq!(
            body(&mut one),
            doc! { "find": "coll", "filter": { "a": 1 }, "limit": 1_i64, "singleBatch": true }
        );
    }

    #[test]
    fn batch_size_equal_to_limit_asks_for_one_more() {
        let mut find = Find::new(ns(), doc! {}, FindOptions::default().limit(4).batch_size(4));
        assert_eq!(
            body(&mut find),
            doc! { "find": "coll", "filter": {}, "limit": 4_i64, "batchSize": 5_i64 }
        );
    }

    #[test]
    fn zero_limit_batch_size_and_skip_are_omitted() {
        let mut find = Find::new(
            ns(),
            doc! {},
            FindOptions::default().limit(0).batch_size(0).skip(0),
        );
        assert_eq!(body(&mut find), doc! { "find": "coll", "filter": {} });
    }

    #[test]
    fn await_time_only_reaches_get_more_for_tailable_await() {
        let options = FindOptions::default()
            .cursor_type(CursorType::Tailable)
            .max_await_time(Duration::from_millis(100));
        let find = Find::new(ns(), doc! {}, options);
        let spec = find
            .handle_reply(cursor_reply(7, "db.coll", vec![]), &server())
            .unwrap();
        assert_eq!(spec.options.max_await_time, None);
    }
}
