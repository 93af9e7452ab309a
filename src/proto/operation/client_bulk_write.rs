//! The client-level bulk write: MongoDB 8.0's `bulkWrite` command on
//! `admin`, writes to any number of namespaces in one command (the
//! bulk-write spec).
//!
//! ```text
//! models ──ClientBulkWrite::new──> statements (op bodies, inserted _ids)
//! loop while statements remain (and an ordered write saw no write error):
//!     build(server)  takes what fits maxWriteBatchSize and
//!                    maxMessageSizeBytes - 1000 (ops + nsInfo sequences)
//!     handle_reply   sums, the first batch of the results cursor, the
//!                    write concern error (as an error, so that a
//!                    retryable one is retried)
//!     the caller     reads the rest of the cursor with getMore and hands
//!                    each document to `record`
//!     advance()      moves past the batch
//! Gathered::finish -> the result, or ErrorKind::BulkWrite
//! ```

use std::collections::HashMap;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::insert::ensure_id;
use super::{
    append_option, bson_to_i32, malformed, parse_write_concern_error, reply_labels, Command,
    Operation, Retryability, ServerInfo,
};
use crate::error::{Error, ErrorKind, Result};
use crate::proto::client_bulk::{
    BulkResultKind, Gathered, StatementKind, UpdateManyModel, UpdateOneModel, WriteModel,
};
use crate::proto::coll_options::BulkWriteOptions;
use crate::proto::concern::{Acknowledgment, WriteConcern};
use crate::proto::reply::Reply;
use crate::proto::results::{DeleteResult, InsertOneResult, UpdateResult, WriteError};
use crate::proto::wire::DocumentSequence;

/// The first wire version of MongoDB 8.0, the first with `bulkWrite`.
pub const BULK_WRITE_MIN_WIRE_VERSION: i32 = 25;

/// The bulk-write spec's allowance for the OP_MSG header and the fields
/// the executor adds (`lsid`, `txnNumber`, `$clusterTime`, ...).
const MESSAGE_OVERHEAD_BYTES: usize = 1000;

/// One model, encoded once: its `ops` entry without the leading
/// `insert`/`update`/`delete: <nsInfo index>` field.
#[derive(Clone, Debug)]
struct Statement {
    kind: StatementKind,
    ns: String,
    fields: Document,
    /// The `_id` an insert sends (generated when the document had none).
    inserted_id: Option<Bson>,
    multi: bool,
}

/// The statements of one `Client::bulk_write`, handed out a batch at a
/// time; an [`Operation`] for the batch at `start`.
#[derive(Clone, Debug)]
pub struct ClientBulkWrite {
    statements: Vec<Statement>,
    options: BulkWriteOptions,
    verbose: bool,
    /// The first statement of the current batch.
    start: usize,
    /// One past the last statement of the last `build`.
    end: usize,
}

/// What one batch's reply said, besides the results cursor.
#[derive(Debug)]
pub struct BatchOutcome {
    /// The results cursor's id; 0 when its first batch held every result.
    pub cursor_id: i64,
    /// The cursor's namespace, for `getMore`.
    pub cursor_ns: String,
}

impl ClientBulkWrite {
    /// Checks and encodes `models`. `verbose` asks for each write's result.
    pub fn new(
        models: Vec<WriteModel>,
        options: BulkWriteOptions,
        verbose: bool,
        new_id: &mut dyn FnMut() -> ObjectId,
    ) -> Result<Self> {
        if models.is_empty() {
            return Err(Error::invalid_argument(
                "bulk_write needs at least one write model",
            ));
        }
        let unacknowledged = options
            .write_concern
            .as_ref()
            .is_some_and(is_unacknowledged);
        if unacknowledged && verbose {
            return Err(Error::invalid_argument(
                "Cannot request unacknowledged write concern and verbose results",
            ));
        }
        if unacknowledged && options.ordered != Some(false) {
            return Err(Error::invalid_argument(
                "Cannot request unacknowledged write concern and ordered writes",
            ));
        }
        let statements = models
            .into_iter()
            .enumerate()
            .map(|(index, model)| statement(index, model, new_id))
            .collect::<Result<Vec<_>>>()?;
        Ok(ClientBulkWrite {
            statements,
            options,
            verbose,
            start: 0,
            end: 0,
        })
    }

    /// Whether every statement has been sent.
    pub fn is_done(&self) -> bool {
        self.start >= self.statements.len()
    }

    /// Whether the writes stop at the first failed one.
    pub fn is_ordered(&self) -> bool {
        self.options.ordered != Some(false)
    }

    /// Moves past the batch last built.
    pub fn advance(&mut self) {
        self.start = self.end.max(self.start + 1);
    }

    /// The caller's indexes of the batch last built.
    #[cfg(test)]
    pub fn batch_range(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }

    /// Folds one document of the results cursor into `gathered`.
    pub(crate) fn record(&self, result: &Document, gathered: &mut Gathered) -> Result<()> {
        let batch_index = result
            .get("idx")
            .and_then(bson_to_i32)
            .and_then(|i| usize::try_from(i).ok())
            .ok_or_else(|| malformed("a bulkWrite result has no valid `idx`"))?;
        let index = self.start + batch_index;
        let statement = self
            .statements
            .get(index)
            .filter(|_| index < self.end)
            .ok_or_else(|| {
                malformed(format!(
                    "bulkWrite result `idx` {batch_index} is not in the batch"
                ))
            })?;
        if !crate::proto::reply::is_ok(result) {
            gathered
                .write_errors
                .insert(index, write_error(index, result)?);
            return Ok(());
        }
        if !self.verbose {
            return Ok(());
        }
        let n = count(result, "n")?;
        let verbose = &mut gathered.result;
        match statement.kind {
            StatementKind::Insert => {
                let inserted_id = statement.inserted_id.clone().unwrap_or(Bson::Null);
                verbose.insert_results.insert(index, inserted(inserted_id));
            }
            StatementKind::Update => {
                let upserted_id = match result.get("upserted") {
                    Some(Bson::Document(upserted)) => upserted.get("_id").cloned(),
                    _ => None,
                };
                let update = updated(n, count(result, "nModified")?, upserted_id);
                verbose.update_results.insert(index, update);
            }
            StatementKind::Delete => {
                verbose.delete_results.insert(index, deleted(n));
            }
        }
        Ok(())
    }

    /// Folds the reply's sums into `gathered` and notes whether the batch
    /// did any write, by the spec's rules: ordered, when no error or the
    /// first error is not the batch's first write; unordered, when fewer
    /// writes failed than were sent.
    fn record_sums(&self, reply: &Document, gathered: &mut Gathered) -> Result<()> {
        let summary = &mut gathered.result.summary;
        summary.inserted_count += sum(reply, "nInserted")?;
        summary.matched_count += sum(reply, "nMatched")?;
        summary.modified_count += sum(reply, "nModified")?;
        summary.upserted_count += sum(reply, "nUpserted")?;
        summary.deleted_count += sum(reply, "nDeleted")?;
        let n_errors = sum(reply, "nErrors")?;
        let sent = i64::try_from(self.end - self.start).unwrap_or(i64::MAX);
        let did_write = if self.is_ordered() {
            n_errors == 0 || !gathered.write_errors.contains_key(&self.start)
        } else {
            n_errors < sent
        };
        gathered.any_succeeded |= did_write;
        Ok(())
    }

    /// Reads a batch's reply: the sums, the results cursor's first batch
    /// into `gathered`, and the cursor to continue. A write concern error
    /// comes back as the error (carrying what the batch did), so that the
    /// executor retries a retryable one.
    pub(crate) fn read_reply<R: BulkResultKind>(
        &self,
        reply: &Document,
        gathered: &mut Gathered,
    ) -> Result<BatchOutcome> {
        let cursor = reply
            .get_document("cursor")
            .map_err(|_| malformed("the bulkWrite reply has no `cursor`"))?;
        let first_batch = cursor
            .get_array("firstBatch")
            .map_err(|_| malformed("the bulkWrite reply's cursor has no `firstBatch`"))?;
        for result in first_batch {
            let Bson::Document(result) = result else {
                return Err(malformed("a bulkWrite result is not a document"));
            };
            self.record(result, gathered)?;
        }
        self.record_sums(reply, gathered)?;
        let cursor_id = match cursor.get("id") {
            Some(Bson::Int64(id)) => *id,
            Some(Bson::Int32(id)) => i64::from(*id),
            _ => return Err(malformed("the bulkWrite reply's cursor has no valid `id`")),
        };
        if let Some(wce) = parse_write_concern_error(reply)? {
            gathered.write_concern_errors.push(wce);
        }
        Ok(BatchOutcome {
            cursor_id,
            cursor_ns: cursor
                .get_str("ns")
                .unwrap_or("admin.$cmd.bulkWrite")
                .to_string(),
        })
    }

    fn build_ops(
        &self,
        budget: usize,
        max_count: usize,
    ) -> Result<(Vec<RawDocumentBuf>, Vec<RawDocumentBuf>, usize)> {
        let mut ops = Vec::new();
        let mut ns_info = Vec::new();
        let mut ns_index: HashMap<&str, i32> = HashMap::new();
        let mut total = 0usize;
        for statement in &self.statements[self.start..] {
            if ops.len() >= max_count {
                break;
            }
            let known = ns_index.get(statement.ns.as_str()).copied();
            let index = known.unwrap_or_else(|| i32::try_from(ns_index.len()).unwrap_or(i32::MAX));
            let op = statement.op_document(index)?;
            let ns_doc = match known {
                Some(_) => None,
                None => Some(raw(&doc! { "ns": &statement.ns })?),
            };
            let added = op.as_bytes().len() + ns_doc.as_ref().map_or(0, |d| d.as_bytes().len());
            if total + added > budget {
                if ops.is_empty() {
                    return Err(Error::invalid_argument(format!(
                        "write model {} is {added} bytes, more than fits in one bulkWrite command ({budget} bytes)",
                        self.start
                    )));
                }
                break;
            }
            total += added;
            ops.push(op);
            if let Some(ns_doc) = ns_doc {
                ns_index.insert(&statement.ns, index);
                ns_info.push(ns_doc);
            }
        }
        let taken = ops.len();
        Ok((ops, ns_info, taken))
    }

    fn command_body(&self) -> Document {
        let mut body = doc! {
            "bulkWrite": 1,
            "errorsOnly": !self.verbose,
            "ordered": self.is_ordered(),
        };
        append_option(
            &mut body,
            "bypassDocumentValidation",
            self.options.bypass_document_validation,
        );
        append_option(&mut body, "comment", self.options.comment.clone());
        append_option(&mut body, "let", self.options.let_vars.clone());
        body
    }
}

impl Statement {
    fn op_document(&self, ns_index: i32) -> Result<RawDocumentBuf> {
        let name = match self.kind {
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
        };
        let mut op = doc! { name: ns_index };
        op.extend(self.fields.clone());
        raw(&op)
    }
}

fn raw(document: &Document) -> Result<RawDocumentBuf> {
    RawDocumentBuf::from_document(document)
        .map_err(|e| Error::invalid_argument(format!("a write model cannot be encoded: {e}")))
}

fn is_unacknowledged(write_concern: &WriteConcern) -> bool {
    matches!(write_concern.w, Some(Acknowledgment::Nodes(0))) && write_concern.journal != Some(true)
}

/// Encodes model `index` as its `ops` entry's fields.
fn statement(
    index: usize,
    model: WriteModel,
    new_id: &mut dyn FnMut() -> ObjectId,
) -> Result<Statement> {
    model.validate(index)?;
    let kind = model.kind();
    let multi = model.is_multi();
    let ns = model.namespace();
    if ns.db.is_empty() || ns.coll.is_empty() || ns.db.contains('.') {
        return Err(Error::invalid_argument(format!(
            "write model {index}: invalid namespace {ns:?}"
        )));
    }
    let ns = ns.to_string();
    let (fields, inserted_id) = model_fields(model, new_id);
    Ok(Statement {
        kind,
        ns,
        fields,
        inserted_id,
        multi,
    })
}

/// A model's `ops` entry fields, and the `_id` an insert sends.
fn model_fields(
    model: WriteModel,
    new_id: &mut dyn FnMut() -> ObjectId,
) -> (Document, Option<Bson>) {
    let mut inserted_id = None;
    let mut fields = Document::new();
    match model {
        WriteModel::InsertOne(mut m) => {
            inserted_id = Some(ensure_id(&mut m.document, new_id));
            fields.insert("document", m.document);
        }
        WriteModel::UpdateOne(m) => {
            let UpdateOneModel {
                array_filters,
                sort,
                ..
            } = &m;
            let (array_filters, sort) = (array_filters.clone(), sort.clone());
            update_fields(&mut fields, m.filter, &m.update, false, array_filters);
            append_option(&mut fields, "collation", m.collation);
            append_option(&mut fields, "hint", m.hint);
            append_option(&mut fields, "upsert", m.upsert);
            append_option(&mut fields, "sort", sort);
        }
        WriteModel::UpdateMany(m) => {
            let UpdateManyModel { array_filters, .. } = &m;
            let array_filters = array_filters.clone();
            update_fields(&mut fields, m.filter, &m.update, true, array_filters);
            append_option(&mut fields, "collation", m.collation);
            append_option(&mut fields, "hint", m.hint);
            append_option(&mut fields, "upsert", m.upsert);
        }
        WriteModel::ReplaceOne(m) => {
            fields.insert("filter", m.filter);
            fields.insert("updateMods", m.replacement);
            fields.insert("multi", false);
            append_option(&mut fields, "collation", m.collation);
            append_option(&mut fields, "hint", m.hint);
            append_option(&mut fields, "upsert", m.upsert);
            append_option(&mut fields, "sort", m.sort);
        }
        WriteModel::DeleteOne(m) => {
            fields.insert("filter", m.filter);
            fields.insert("multi", false);
            append_option(&mut fields, "collation", m.collation);
            append_option(&mut fields, "hint", m.hint);
        }
        WriteModel::DeleteMany(m) => {
            fields.insert("filter", m.filter);
            fields.insert("multi", true);
            append_option(&mut fields, "collation", m.collation);
            append_option(&mut fields, "hint", m.hint);
        }
    }
    (fields, inserted_id)
}

/// The fields an update statement starts with.
fn update_fields(
    fields: &mut Document,
    filter: Document,
    update: &crate::proto::write_model::UpdateModifications,
    multi: bool,
    array_filters: Option<bson::Array>,
) {
    fields.insert("filter", filter);
    fields.insert("updateMods", update.to_bson());
    fields.insert("multi", multi);
    append_option(fields, "arrayFilters", array_filters);
}

fn write_error(index: usize, result: &Document) -> Result<WriteError> {
    let code = result
        .get("code")
        .and_then(bson_to_i32)
        .ok_or_else(|| malformed("a failed bulkWrite result has no valid `code`"))?;
    Ok(WriteError {
        index,
        code,
        code_name: result.get_str("codeName").ok().map(str::to_string),
        message: result.get_str("errmsg").unwrap_or_default().to_string(),
        details: result.get_document("errInfo").ok().cloned(),
    })
}

/// A result count (`n`, `nModified`): absent is 0.
fn count(result: &Document, key: &str) -> Result<u64> {
    match result.get(key) {
        None => Ok(0),
        Some(value) => super::bson_to_u64(value)
            .ok_or_else(|| malformed(format!("bulkWrite result `{key}` is {value}"))),
    }
}

/// A reply's sum (`nInserted`, ...): absent is 0.
fn sum(reply: &Document, key: &str) -> Result<i64> {
    count(reply, key).map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

fn inserted(inserted_id: Bson) -> InsertOneResult {
    InsertOneResult {
        inserted_id,
        acknowledged: true,
    }
}

fn updated(matched_count: u64, modified_count: u64, upserted_id: Option<Bson>) -> UpdateResult {
    UpdateResult {
        matched_count,
        modified_count,
        upserted_id,
        acknowledged: true,
    }
}

fn deleted(deleted_count: u64) -> DeleteResult {
    DeleteResult {
        deleted_count,
        acknowledged: true,
    }
}

/// One batch as the executor runs it: the statements from `start`, and
/// what its reply said.
#[derive(Debug)]
pub struct ClientBulkBatch<'a, R> {
    bulk: &'a mut ClientBulkWrite,
    _result: std::marker::PhantomData<R>,
}

/// A batch's reply as read: what it added, and the cursor to finish.
#[derive(Debug)]
pub struct BatchReply {
    pub(crate) gathered: Gathered,
    /// `None` for an unacknowledged write.
    pub(crate) outcome: Option<BatchOutcome>,
}

impl<'a, R> ClientBulkBatch<'a, R> {
    /// The batch at the bulk write's current position.
    pub fn new(bulk: &'a mut ClientBulkWrite) -> Self {
        ClientBulkBatch {
            bulk,
            _result: std::marker::PhantomData,
        }
    }
}

impl<R: BulkResultKind> Operation for ClientBulkBatch<'_, R> {
    type Output = BatchReply;
    const NAME: &'static str = "bulkWrite";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        if server.max_wire_version < BULK_WRITE_MIN_WIRE_VERSION {
            return Err(Error::new(ErrorKind::IncompatibleServer {
                message: format!(
                    "the client-level bulk write needs MongoDB 8.0 or later (wire version {BULK_WRITE_MIN_WIRE_VERSION}); the server's maximum wire version is {}",
                    server.max_wire_version
                ),
            }));
        }
        let mut body = self.bulk.command_body();
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.bulk.options.raw_data, server)?,
        );
        let body_size = raw(&body)?.as_bytes().len();
        let budget = server
            .max_message_bytes()
            .saturating_sub(MESSAGE_OVERHEAD_BYTES + body_size);
        let (ops, ns_info, taken) = self.bulk.build_ops(budget, server.max_batch_count())?;
        self.bulk.end = self.bulk.start + taken;
        let mut command = Command::new("bulkWrite", "admin", body);
        command.sequences.push(DocumentSequence {
            identifier: "ops".into(),
            documents: ops.into_iter().map(std::sync::Arc::new).collect(),
        });
        command.sequences.push(DocumentSequence {
            identifier: "nsInfo".into(),
            documents: ns_info.into_iter().map(std::sync::Arc::new).collect(),
        });
        Ok(command)
    }

    fn handle_reply_raw(&self, reply: Reply, server: &ServerInfo) -> Result<BatchReply> {
        if reply.is_unacknowledged() {
            return Ok(BatchReply {
                gathered: Gathered::default(),
                outcome: None,
            });
        }
        self.handle_reply(reply.into_document()?, server)
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<BatchReply> {
        let mut gathered = Gathered::default();
        let outcome = self.bulk.read_reply::<R>(&reply, &mut gathered)?;
        if gathered.write_concern_errors.is_empty() {
            return Ok(BatchReply {
                gathered,
                outcome: Some(outcome),
            });
        }
        // The executor sees the write concern error, and retries the batch
        // when it is retryable; a final one reaches the caller with what the
        // batch did. A cursor left open then is closed by the server when
        // it times out: its results cannot be read outside the batch's
        // session, which the executor has already released.
        Err(gathered.into_error::<R>(reply_labels(&reply), None))
    }

    fn retryability(&self) -> Retryability {
        if self.bulk.statements[self.bulk.start..]
            .iter()
            .any(|s| s.multi)
        {
            Retryability::None
        } else {
            Retryability::Write
        }
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.bulk.options.write_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::super::test_support::{sent, small_server};
    use super::*;
    use crate::proto::client_bulk::{
        InsertOneModel, SummaryBulkWriteResult, VerboseBulkWriteResult,
    };
    use crate::Namespace;

    fn insert(coll: &str, document: Document) -> WriteModel {
        InsertOneModel::builder()
            .namespace(Namespace::new("db", coll))
            .document(document)
            .build()
            .into()
    }

    fn bulk(models: Vec<WriteModel>, ordered: bool, verbose: bool) -> ClientBulkWrite {
        let options = BulkWriteOptions::default().ordered(ordered);
        ClientBulkWrite::new(models, options, verbose, &mut ObjectId::new).unwrap()
    }

    fn server(max_batch: i64, max_message: i64) -> ServerInfo {
        ServerInfo {
            max_wire_version: 25,
            ..small_server(max_batch, max_message, 16 * 1024 * 1024)
        }
    }

    /// The sizes of the batches `bulk` is sent in on `server`.
    fn batches(bulk: &mut ClientBulkWrite, server: &ServerInfo) -> Vec<usize> {
        let mut sizes = Vec::new();
        while !bulk.is_done() {
            let command = ClientBulkBatch::<SummaryBulkWriteResult>::new(bulk)
                .build(server)
                .unwrap();
            assert_eq!(command.sequences[1].identifier, "nsInfo");
            sizes.push(sent(&command).len());
            bulk.advance();
        }
        sizes
    }

    #[test]
    fn batches_split_by_count_and_by_message_size() {
        let models: Vec<_> = (0..5).map(|i| insert("c", doc! { "_id": i })).collect();
        assert_eq!(
            batches(
                &mut bulk(models.clone(), true, false),
                &server(2, 48_000_000)
            ),
            [2, 2, 1]
        );
        // Room for two ops (and the namespace) beside the body and the
        // 1,000 bytes the spec sets aside.
        let size = |d: Document| raw(&d).unwrap().as_bytes().len();
        let body = size(ClientBulkWrite::command_body(&bulk(
            models.clone(),
            true,
            false,
        )));
        let op = size(doc! { "insert": 0, "document": { "_id": 0 } });
        let ns = size(doc! { "ns": "db.c" });
        let small = server(100, (1000 + body + ns + 2 * op) as i64);
        assert_eq!(batches(&mut bulk(models, true, false), &small), [2, 2, 1]);
    }

    #[test]
    fn ns_info_lists_each_namespace_of_the_batch_once() {
        let models = vec![
            insert("a", doc! { "_id": 1 }),
            insert("b", doc! { "_id": 2 }),
            insert("a", doc! { "_id": 3 }),
        ];
        let mut write = bulk(models, true, false);
        let command = ClientBulkBatch::<SummaryBulkWriteResult>::new(&mut write)
            .build(&server(100, 48_000_000))
            .unwrap();
        let ops = sent(&command);
        let indexes: Vec<i32> = ops.iter().map(|op| op.get_i32("insert").unwrap()).collect();
        assert_eq!(indexes, [0, 1, 0]);
        assert_eq!(command.sequences[1].documents.len(), 2);
        assert_eq!(write.batch_range(), 0..3);
    }

    #[test]
    fn a_model_too_large_for_any_batch_is_refused() {
        let big = insert("c", doc! { "s": "x".repeat(2000) });
        let mut write = bulk(vec![big], true, false);
        let error = ClientBulkBatch::<SummaryBulkWriteResult>::new(&mut write)
            .build(&server(100, 2000))
            .unwrap_err();
        assert!(error.to_string().contains("write model 0"), "{error}");
    }

    #[test]
    fn results_map_to_the_callers_indexes_across_batches() {
        let models: Vec<_> = (0..3).map(|i| insert("c", doc! { "_id": i })).collect();
        let mut write = bulk(models, false, true);
        let mut gathered = Gathered::default();
        let small = server(2, 48_000_000);
        ClientBulkBatch::<VerboseBulkWriteResult>::new(&mut write)
            .build(&small)
            .unwrap();
        write.advance();
        ClientBulkBatch::<VerboseBulkWriteResult>::new(&mut write)
            .build(&small)
            .unwrap();
        let reply = doc! {
            "ok": 1, "nErrors": 1, "nInserted": 0,
            "cursor": { "id": 0_i64, "ns": "admin.$cmd.bulkWrite", "firstBatch": [
                { "ok": 0, "idx": 0, "code": 11000, "errmsg": "dup" },
            ] },
        };
        let outcome = write
            .read_reply::<VerboseBulkWriteResult>(&reply, &mut gathered)
            .unwrap();
        assert_eq!(outcome.cursor_id, 0);
        assert_eq!(gathered.write_errors[&2].index, 2);
        // One write of one failed: nothing succeeded in this batch.
        assert!(!gathered.any_succeeded);
        let error = gathered.finish::<VerboseBulkWriteResult>().unwrap_err();
        let crate::error::ErrorKind::BulkWrite(failure) = &*error.kind else {
            panic!("{error}");
        };
        assert!(failure.partial_result.is_none());
    }

    #[test]
    fn unacknowledged_needs_unordered_summary_writes() {
        let options = || {
            BulkWriteOptions::default()
                .write_concern(WriteConcern::builder().w(Acknowledgment::Nodes(0)).build())
        };
        let models = || vec![insert("c", doc! {})];
        let ordered = ClientBulkWrite::new(models(), options(), false, &mut ObjectId::new);
        assert!(ordered.unwrap_err().to_string().contains("ordered"));
        let verbose =
            ClientBulkWrite::new(models(), options().ordered(false), true, &mut ObjectId::new);
        assert!(verbose.unwrap_err().to_string().contains("verbose"));
        assert!(ClientBulkWrite::new(
            models(),
            options().ordered(false),
            false,
            &mut ObjectId::new
        )
        .is_ok());
    }
}
