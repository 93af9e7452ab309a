//! Batched writes: `insert_many` and the classic per-collection `bulk_write`
//! (insert/update/delete commands, not the 8.0 `bulkWrite` command).
//!
//! ```text
//! models ──BulkWrite::new──> groups of one kind (ordered: consecutive runs;
//!                             unordered: one group per kind)
//! loop {
//!     batch = bulk.next_batch()?        // a WriteBatch: an Operation
//!     outcome = executor.execute(batch) // build takes what fits the server's limits
//!     bulk.record(outcome)?             // merges; ordered stops at a write error
//! }
//! bulk.finish() -> BulkWriteResult, or ErrorKind::CollectionBulkWrite with every write
//!                  error (indexes into the caller's list) and the partial result
//! ```
//!
//! A batch's `handle_reply` reports write errors and write concern errors as
//! an [`ErrorKind::CollectionBulkWrite`] error so that the executor can retry a
//! retryable write concern error; [`BulkWrite::record`] then folds it in.

#[cfg(test)]
use std::collections::BTreeMap;
use std::collections::{BTreeSet, VecDeque};

use bson::oid::ObjectId;
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::delete::delete_statement;
use super::insert::{ensure_id, too_large};
use super::update::{
    parse_update_reply, replacement_statement, update_statement, UpdateCounts, UpdateModifications,
    UpdateStatementOptions,
};
use super::{
    append_option, malformed, parse_write_concern_error, parse_write_errors, reply_count,
    reply_labels, sequence_budget, Command, Namespace, Operation, Retryability, ServerInfo,
    COMMAND_OVERHEAD_BYTES,
};
use crate::error::{Error, ErrorKind, Result};
use crate::proto::coll_options::{BulkWriteOptions, InsertManyOptions, UpdateModelOptions};
use crate::proto::concern::WriteConcern;
use crate::proto::reply::Reply;
use crate::proto::results::{
    BulkWriteFailure, BulkWriteResult, InsertManyResult, WriteConcernError, WriteError,
};
use crate::proto::wire::DocumentSequence;
pub use crate::proto::write_model::CollectionWriteModel;

/// Which write command a batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteKind {
    /// `insert` with `documents`.
    Insert,
    /// `update` with `updates`.
    Update,
    /// `delete` with `deletes`.
    Delete,
}

impl WriteKind {
    fn command_name(self) -> &'static str {
        match self {
            WriteKind::Insert => "insert",
            WriteKind::Update => "update",
            WriteKind::Delete => "delete",
        }
    }

    fn sequence_name(self) -> &'static str {
        match self {
            WriteKind::Insert => "documents",
            WriteKind::Update => "updates",
            WriteKind::Delete => "deletes",
        }
    }
}

/// One statement, its index in the caller's list and its encoded size.
#[derive(Clone, Debug)]
struct Statement {
    index: usize,
    /// Encoded once, when the statement is made; `build` copies the bytes.
    document: RawDocumentBuf,
    size: usize,
    multi: bool,
}

impl Statement {
    fn new(index: usize, document: RawDocumentBuf, multi: bool) -> Self {
        let size = document.as_bytes().len();
        Statement {
            index,
            document,
            size,
            multi,
        }
    }

    /// The `_id` of an insert's document (`null` when it has none).
    fn id(&self) -> Bson {
        self.document
            .get("_id")
            .ok()
            .flatten()
            .and_then(|id| Bson::try_from(id.to_raw_bson()).ok())
            .unwrap_or(Bson::Null)
    }
}

/// The command-level options every batch of a bulk write shares.
#[derive(Clone, Debug, Default)]
struct SharedOptions {
    ordered: bool,
    bypass_document_validation: Option<bool>,
    let_vars: Option<Document>,
    comment: Option<Bson>,
    write_concern: Option<WriteConcern>,
    raw_data: Option<bool>,
}

/// The statements of one kind still to send; each `build` takes as many as
/// fit in one command for the selected server.
#[derive(Clone, Debug)]
pub struct WriteBatch {
    kind: WriteKind,
    ns: Namespace,
    statements: Vec<Statement>,
    /// The first statement not yet sent successfully.
    start: usize,
    /// One past the last statement of the last `build`.
    end: usize,
    options: SharedOptions,
}

impl WriteBatch {
    /// The caller's indexes of the statements the last `build` included.
    #[cfg(test)]
    pub fn built_indexes(&self) -> Vec<usize> {
        self.statements[self.start..self.end]
            .iter()
            .map(|s| s.index)
            .collect()
    }

    fn is_done(&self) -> bool {
        self.start >= self.statements.len()
    }

    /// The caller's index of the statement at `batch_index` of the last built batch.
    fn caller_index(&self, batch_index: usize) -> Result<usize> {
        let len = self.end - self.start;
        if batch_index >= len {
            return Err(malformed(format!(
                "index {batch_index} is outside the batch of {len} statements"
            )));
        }
        Ok(self.statements[self.start + batch_index].index)
    }

    /// What is known of the last built batch when it was sent with `w: 0`:
    /// the ids of the documents it sent, and no counts.
    fn unacknowledged_result(&self) -> BulkWriteResult {
        let mut result = BulkWriteResult {
            acknowledged: false,
            ..BulkWriteResult::default()
        };
        if self.kind == WriteKind::Insert {
            for statement in &self.statements[self.start..self.end] {
                result.inserted_ids.insert(statement.index, statement.id());
            }
        }
        result
    }

    /// What the statements of the last built batch did, according to `reply`.
    fn parse_batch(
        &self,
        reply: &Document,
    ) -> Result<(BulkWriteResult, Vec<WriteError>, Option<WriteConcernError>)> {
        let mut write_errors = parse_write_errors(reply)?;
        for error in &mut write_errors {
            error.index = self.caller_index(error.index)?;
        }
        let wce = parse_write_concern_error(reply)?;
        let mut result = BulkWriteResult::default();
        match self.kind {
            WriteKind::Insert => {
                let failed: BTreeSet<usize> = write_errors.iter().map(|e| e.index).collect();
                // An ordered insert stops at its first failure; an unordered
                // one tries every document.
                let first_failure = failed.iter().next().copied();
                for statement in &self.statements[self.start..self.end] {
                    let stopped = self.options.ordered
                        && first_failure.is_some_and(|first| statement.index >= first);
                    if stopped || failed.contains(&statement.index) {
                        continue;
                    }
                    result.inserted_ids.insert(statement.index, statement.id());
                }
                result.inserted_count = reply_count(reply, "n")?.unwrap_or(0);
            }
            WriteKind::Update => {
                let UpdateCounts {
                    n,
                    modified,
                    upserted,
                } = parse_update_reply(reply)?;
                for (batch_index, id) in upserted {
                    result
                        .upserted_ids
                        .insert(self.caller_index(batch_index)?, id);
                }
                result.upserted_count = result.upserted_ids.len() as u64;
                result.matched_count = n.saturating_sub(result.upserted_count);
                result.modified_count = modified;
            }
            WriteKind::Delete => {
                result.deleted_count = reply_count(reply, "n")?.unwrap_or(0);
            }
        }
        Ok((result, write_errors, wce))
    }
}

impl Operation for WriteBatch {
    type Output = BulkWriteResult;
    const NAME: &'static str = "write batch";

    fn command_name(&self) -> &str {
        self.kind.command_name()
    }

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let name = self.kind.command_name();
        let mut body = doc! { name: self.ns.coll.to_string(), "ordered": self.options.ordered };
        if self.kind != WriteKind::Delete {
            append_option(
                &mut body,
                "bypassDocumentValidation",
                self.options.bypass_document_validation,
            );
        }
        if self.kind != WriteKind::Insert {
            append_option(&mut body, "let", self.options.let_vars.clone());
        }
        append_option(&mut body, "comment", self.options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.options.raw_data, server)?,
        );

        let budget = sequence_budget(server, &body)?;
        let max_count = server.max_batch_count();
        let max_statement = match self.kind {
            WriteKind::Insert => server.max_document_bytes(),
            // Update and delete statements wrap user documents; the server
            // allows them the same slack it gives commands.
            _ => server.max_document_bytes() + COMMAND_OVERHEAD_BYTES,
        };
        let mut total = 0usize;
        let mut end = self.start;
        for statement in &self.statements[self.start..] {
            if statement.size > max_statement {
                return Err(too_large(statement.index, statement.size, max_statement));
            }
            let taken = end - self.start;
            if taken > 0 && (taken >= max_count || total + statement.size > budget) {
                break;
            }
            total += statement.size;
            end += 1;
        }
        self.end = end;
        let documents = self.statements[self.start..end]
            .iter()
            .map(|s| std::sync::Arc::new(s.document.clone()))
            .collect();
        let mut command = Command::new(name, self.ns.db.clone(), body);
        command.sequences.push(DocumentSequence {
            identifier: self.kind.sequence_name().into(),
            documents,
        });
        Ok(command)
    }

    fn handle_reply_raw(&self, reply: Reply, server: &ServerInfo) -> Result<BulkWriteResult> {
        if reply.is_unacknowledged() {
            return Ok(self.unacknowledged_result());
        }
        self.handle_reply(reply.into_document()?, server)
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<BulkWriteResult> {
        let (result, write_errors, write_concern_error) = self.parse_batch(&reply)?;
        if write_errors.is_empty() && write_concern_error.is_none() {
            return Ok(result);
        }
        let mut labels = reply_labels(&reply);
        if let Some(wce) = &write_concern_error {
            labels.extend(wce.labels.iter().cloned());
        }
        Err(Error::new(ErrorKind::CollectionBulkWrite(BulkWriteFailure {
            write_errors,
            write_concern_error,
            partial_result: result,
        }))
        .with_labels(labels))
    }

    fn retryability(&self) -> Retryability {
        if self.statements.iter().any(|s| s.multi) {
            Retryability::None
        } else {
            Retryability::Write
        }
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.options.write_concern.as_ref()
    }
}

/// The pure driver of a bulk write: hands out one [`WriteBatch`] at a time
/// and merges what each did.
#[derive(Clone, Debug)]
pub struct BulkWrite {
    groups: VecDeque<WriteBatch>,
    ordered: bool,
    stopped: bool,
    result: BulkWriteResult,
    write_errors: Vec<WriteError>,
    write_concern_error: Option<WriteConcernError>,
    labels: BTreeSet<String>,
}

impl BulkWrite {
    /// Plans the bulk write of `models` into `ns`. Fails before anything is
    /// sent when there is no model or a model is invalid (an update without
    /// operators, a replacement with some, a sort on `UpdateMany`). Inserts
    /// without an `_id` take one from `new_id`.
    pub fn new(
        ns: Namespace,
        models: Vec<CollectionWriteModel>,
        options: BulkWriteOptions,
        new_id: &mut dyn FnMut() -> ObjectId,
    ) -> Result<Self> {
        if models.is_empty() {
            return Err(Error::invalid_argument(
                "bulk_write needs at least one write model",
            ));
        }
        let shared = SharedOptions {
            ordered: options.ordered.unwrap_or(true),
            bypass_document_validation: options.bypass_document_validation,
            let_vars: options.let_vars,
            comment: options.comment,
            write_concern: options.write_concern,
            raw_data: options.raw_data,
        };
        let mut statements = Vec::with_capacity(models.len());
        for (index, model) in models.into_iter().enumerate() {
            let (kind, document, multi) = statement_of(index, model, new_id)?;
            let document = crate::proto::encode::document_to_raw(&document, kind.sequence_name())?;
            statements.push((kind, Statement::new(index, document, multi)));
        }
        Ok(BulkWrite::from_statements(ns, statements, shared))
    }

    fn from_statements(
        ns: Namespace,
        statements: Vec<(WriteKind, Statement)>,
        shared: SharedOptions,
    ) -> Self {
        let mut groups: VecDeque<WriteBatch> = VecDeque::new();
        let new_group = |kind| WriteBatch {
            kind,
            ns: ns.clone(),
            statements: Vec::new(),
            start: 0,
            end: 0,
            options: shared.clone(),
        };
        for (kind, statement) in statements {
            // Ordered: a new group at every change of kind, so the server
            // sees the statements in the caller's order. Unordered: one group
            // per kind, the fewest commands.
            let group = if shared.ordered {
                match groups.back_mut() {
                    Some(last) if last.kind == kind => last,
                    _ => {
                        groups.push_back(new_group(kind));
                        groups.back_mut().expect("just pushed")
                    }
                }
            } else {
                match groups.iter().position(|g| g.kind == kind) {
                    Some(position) => &mut groups[position],
                    None => {
                        groups.push_back(new_group(kind));
                        groups.back_mut().expect("just pushed")
                    }
                }
            };
            group.statements.push(statement);
        }
        BulkWrite {
            groups,
            ordered: shared.ordered,
            stopped: false,
            result: BulkWriteResult::default(),
            write_errors: Vec::new(),
            write_concern_error: None,
            labels: BTreeSet::new(),
        }
    }

    /// The next command to run, or `None` when every statement was sent or
    /// an ordered write stopped at a write error.
    pub fn next_batch(&mut self) -> Option<&mut WriteBatch> {
        if self.stopped {
            return None;
        }
        self.groups.front_mut()
    }

    /// Records what the executor made of the batch last handed out by
    /// [`Self::next_batch`]: its result, a [`ErrorKind::CollectionBulkWrite`] error
    /// (merged; an ordered write stops at a write error), or any other error,
    /// which ends the bulk write and is returned.
    pub fn record(&mut self, outcome: Result<BulkWriteResult>) -> Result<()> {
        let Some(batch) = self.groups.front_mut() else {
            return Err(Error::client(
                "BulkWrite::record called with no batch outstanding",
            ));
        };
        let (result, stop) = match outcome {
            Ok(result) => (result, false),
            Err(error) => {
                let ErrorKind::CollectionBulkWrite(failure) = error.kind() else {
                    self.stopped = true;
                    return Err(error);
                };
                let failure = failure.clone();
                self.labels.extend(error.labels().iter().cloned());
                let stop = self.ordered && !failure.write_errors.is_empty();
                self.write_errors.extend(failure.write_errors);
                if failure.write_concern_error.is_some() {
                    self.write_concern_error = failure.write_concern_error;
                }
                (failure.partial_result, stop)
            }
        };
        if batch.end <= batch.start {
            // Advancing past a batch that was never built would skip statements.
            self.stopped = true;
            return Err(Error::client(
                "BulkWrite::record called before the batch was built",
            ));
        }
        merge(&mut self.result, result);
        batch.start = batch.end.min(batch.statements.len());
        if batch.is_done() {
            self.groups.pop_front();
        }
        if stop {
            self.stopped = true;
        }
        Ok(())
    }

    /// What the bulk write did so far.
    #[cfg(test)]
    pub fn partial_result(&self) -> &BulkWriteResult {
        &self.result
    }

    /// The merged result, or an [`ErrorKind::CollectionBulkWrite`] error when a
    /// statement failed or a write concern was not satisfied.
    pub fn finish(self) -> Result<BulkWriteResult> {
        if self.write_errors.is_empty() && self.write_concern_error.is_none() {
            return Ok(self.result);
        }
        Err(Error::new(ErrorKind::CollectionBulkWrite(BulkWriteFailure {
            write_errors: self.write_errors,
            write_concern_error: self.write_concern_error,
            partial_result: self.result,
        }))
        .with_labels(self.labels))
    }
}

fn merge(total: &mut BulkWriteResult, batch: BulkWriteResult) {
    total.inserted_count += batch.inserted_count;
    total.matched_count += batch.matched_count;
    total.modified_count += batch.modified_count;
    total.deleted_count += batch.deleted_count;
    total.upserted_count += batch.upserted_count;
    total.inserted_ids.extend(batch.inserted_ids);
    total.upserted_ids.extend(batch.upserted_ids);
    total.acknowledged &= batch.acknowledged;
}

/// The statement a model sends, after validating it.
fn statement_of(
    index: usize,
    model: CollectionWriteModel,
    new_id: &mut dyn FnMut() -> ObjectId,
) -> Result<(WriteKind, Document, bool)> {
    let at = |error: Error| match error.kind() {
        ErrorKind::InvalidArgument { message } => {
            Error::invalid_argument(format!("write model {index}: {message}"))
        }
        _ => error,
    };
    Ok(match model {
        CollectionWriteModel::InsertOne { mut document } => {
            ensure_id(&mut document, new_id);
            (WriteKind::Insert, document, false)
        }
        CollectionWriteModel::UpdateOne {
            filter,
            update,
            options,
        } => {
            let statement = checked_update(filter, &update, options, false).map_err(at)?;
            (WriteKind::Update, statement, false)
        }
        CollectionWriteModel::UpdateMany {
            filter,
            update,
            options,
        } => {
            let statement = checked_update(filter, &update, options, true).map_err(at)?;
            (WriteKind::Update, statement, true)
        }
        CollectionWriteModel::ReplaceOne {
            filter,
            replacement,
            options,
        } => {
            let statement = replacement_statement(
                filter,
                replacement,
                options.upsert,
                options.collation,
                options.hint,
                options.sort,
            )
            .map_err(at)?;
            (WriteKind::Update, statement, false)
        }
        CollectionWriteModel::DeleteOne { filter, options } => (
            WriteKind::Delete,
            delete_statement(filter, false, options.collation, options.hint),
            false,
        ),
        CollectionWriteModel::DeleteMany { filter, options } => (
            WriteKind::Delete,
            delete_statement(filter, true, options.collation, options.hint),
            true,
        ),
    })
}

/// An update model's statement once its update document (or pipeline) is
/// valid; a multi-document update cannot take a sort.
fn checked_update(
    filter: Document,
    update: &UpdateModifications,
    options: UpdateModelOptions,
    multi: bool,
) -> Result<Document> {
    update.validate()?;
    if multi && options.sort.is_some() {
        return Err(Error::invalid_argument("UpdateMany does not take a sort"));
    }
    Ok(update_model(filter, update, options, multi))
}

fn update_model(
    filter: Document,
    update: &UpdateModifications,
    options: UpdateModelOptions,
    multi: bool,
) -> Document {
    update_statement(
        filter,
        update.to_bson(),
        UpdateStatementOptions {
            multi,
            upsert: options.upsert,
            array_filters: options.array_filters,
            collation: options.collation,
            hint: options.hint,
            sort: options.sort,
        },
    )
}

/// `insert_many`: a bulk write of inserts whose result is the inserted ids.
#[derive(Clone, Debug)]
pub struct InsertMany(BulkWrite);

impl InsertMany {
    /// Plans inserting `documents` into `ns`, taking missing `_id`s from
    /// `new_id`.
    #[cfg(test)]
    pub fn new(
        ns: Namespace,
        documents: Vec<Document>,
        options: InsertManyOptions,
        new_id: &mut dyn FnMut() -> ObjectId,
    ) -> Result<Self> {
        let documents = documents
            .iter()
            .map(|document| crate::proto::encode::document_to_raw(document, "documents"))
            .collect::<Result<Vec<_>>>()?;
        Self::from_raw(ns, documents, options, new_id)
    }

    /// [`Self::new`] for documents already encoded as BSON bytes (as
    /// `Collection::insert_many` encodes them, straight from the caller's
    /// type); a missing `_id` is added to the bytes.
    pub fn from_raw(
        ns: Namespace,
        documents: Vec<RawDocumentBuf>,
        options: InsertManyOptions,
        new_id: &mut dyn FnMut() -> ObjectId,
    ) -> Result<Self> {
        if documents.is_empty() {
            return Err(Error::invalid_argument(
                "insert_many needs at least one document",
            ));
        }
        let shared = SharedOptions {
            ordered: options.ordered.unwrap_or(true),
            bypass_document_validation: options.bypass_document_validation,
            let_vars: None,
            comment: options.comment,
            write_concern: options.write_concern,
            raw_data: options.raw_data,
        };
        let mut statements = Vec::with_capacity(documents.len());
        for (index, mut document) in documents.into_iter().enumerate() {
            crate::proto::encode::ensure_raw_id(&mut document, new_id)?;
            statements.push((WriteKind::Insert, Statement::new(index, document, false)));
        }
        Ok(InsertMany(BulkWrite::from_statements(
            ns, statements, shared,
        )))
    }

    /// See [`BulkWrite::next_batch`].
    pub fn next_batch(&mut self) -> Option<&mut WriteBatch> {
        self.0.next_batch()
    }

    /// See [`BulkWrite::record`].
    pub fn record(&mut self, outcome: Result<BulkWriteResult>) -> Result<()> {
        self.0.record(outcome)
    }

    /// The inserted ids, or an [`ErrorKind::CollectionBulkWrite`] error whose partial
    /// result holds the ids of the documents that were inserted.
    pub fn finish(self) -> Result<InsertManyResult> {
        self.0
            .finish()
            .map(BulkWriteResult::into_insert_many_result)
    }
}

/// The ids `InsertMany` will insert, by index (for callers that report them
/// before the writes complete, e.g. unacknowledged writes).
impl InsertMany {
    /// Every document's `_id`, by index in the caller's list.
    #[cfg(test)]
    pub fn ids(&self) -> BTreeMap<usize, Bson> {
        self.0
            .groups
            .iter()
            .flat_map(|g| g.statements.iter())
            .map(|s| (s.index, s.id()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::coll_options::ReplaceModelOptions;
    use crate::proto::object_id::tests::sequential_ids;
    use crate::proto::operation::document_size;
    use crate::proto::operation::test_support::{ns, sent as sent_documents, server, small_server};

    /// Runs `bulk` against a fake server: `answer` gets each command and
    /// returns the reply. Returns the commands sent.
    fn run(
        bulk: &mut BulkWrite,
        server: &ServerInfo,
        mut answer: impl FnMut(&Command) -> Document,
    ) -> Result<Vec<Command>> {
        let mut sent = Vec::new();
        while let Some(batch) = bulk.next_batch() {
            let command = batch.build(server)?;
            let reply = answer(&command);
            let outcome = batch.handle_reply(reply, server);
            sent.push(command);
            bulk.record(outcome)?;
        }
        Ok(sent)
    }

    /// A reply that acknowledges every statement of `command`.
    fn all_ok(command: &Command) -> Document {
        doc! { "n": command.sequences[0].documents.len() as i32, "ok": 1 }
    }

    /// A bulk write of `models` into `ns()` with default options.
    fn try_bulk_of(models: Vec<CollectionWriteModel>) -> Result<BulkWrite> {
        BulkWrite::new(
            ns(),
            models,
            BulkWriteOptions::default(),
            &mut sequential_ids(),
        )
    }

    fn bulk_of(models: Vec<CollectionWriteModel>) -> BulkWrite {
        try_bulk_of(models).unwrap()
    }

    fn inserts(count: usize) -> Vec<CollectionWriteModel> {
        (0..count)
            .map(|i| CollectionWriteModel::insert_one(doc! { "_id": i as i32 }))
            .collect()
    }

    fn batch_lengths(commands: &[Command]) -> Vec<usize> {
        commands
            .iter()
            .map(|c| c.sequences[0].documents.len())
            .collect()
    }

    #[test]
    fn inserts_split_by_max_write_batch_size() {
        let mut bulk = bulk_of(inserts(10));
        let sent = run(&mut bulk, &small_server(3, 48_000_000, 1024), all_ok).unwrap();
        assert_eq!(batch_lengths(&sent), vec![3, 3, 3, 1]);
        assert_eq!(sent[0].body, doc! { "insert": "coll", "ordered": true });
        assert_eq!(sent_documents(&sent[3]), vec![doc! { "_id": 9 }]);
        let result = bulk.finish().unwrap();
        assert_eq!(result.inserted_count, 10);
        assert_eq!(result.inserted_ids.len(), 10);
        assert_eq!(result.inserted_ids[&7], Bson::Int32(7));
    }

    #[test]
    fn inserts_split_by_max_message_size() {
        // Each document is 1 000 bytes; the budget leaves room for 3 of them.
        let documents: Vec<Document> = (0..7)
            .map(|i| {
                let mut d = doc! { "_id": i, "pad": "" };
                let pad = 1000 - document_size(&d).unwrap();
                d.insert("pad", "x".repeat(pad));
                d
            })
            .collect();
        assert_eq!(document_size(&documents[0]).unwrap(), 1000);
        let body_size = document_size(&doc! { "insert": "coll", "ordered": true }).unwrap();
        let max_message = (body_size + MESSAGE_FRAME + COMMAND_OVERHEAD_BYTES + 3_500) as i64;
        let mut many = InsertMany::new(
            ns(),
            documents,
            InsertManyOptions::default(),
            &mut sequential_ids(),
        )
        .unwrap();
        let server = small_server(100, max_message, 2000);
        let mut lengths = Vec::new();
        while let Some(batch) = many.next_batch() {
            let command = batch.build(&server).unwrap();
            lengths.push(command.sequences[0].documents.len());
            let outcome = batch.handle_reply(all_ok(&command), &server);
            many.record(outcome).unwrap();
        }
        assert_eq!(lengths, vec![3, 3, 1]);
        let result = many.finish().unwrap();
        let mut indexes = result.inserted_ids.keys().copied().collect::<Vec<_>>();
        indexes.sort_unstable();
        assert_eq!(indexes, (0..7).collect::<Vec<_>>());
    }

    const MESSAGE_FRAME: usize = super::super::MESSAGE_FRAME_BYTES;

    #[test]
    fn oversized_document_names_its_index_and_size() {
        let mut models = inserts(3);
        let big = doc! { "_id": 3, "big": "x".repeat(200) };
        let size = document_size(&big).unwrap();
        models.push(CollectionWriteModel::insert_one(big));
        let mut bulk = bulk_of(models);
        let error = run(&mut bulk, &small_server(2, 48_000_000, 100), all_ok).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("invalid argument: document at index 3 is {size} bytes, more than the server's maxBsonObjectSize of 100 bytes")
        );
        // The batch before it was sent; the error stops the bulk write there.
        assert_eq!(bulk.partial_result().inserted_count, 2);
    }

    #[test]
    fn generated_ids_are_reported() {
        let many = InsertMany::new(
            ns(),
            vec![doc! { "a": 1 }, doc! { "_id": null }],
            InsertManyOptions::default(),
            &mut sequential_ids(),
        )
        .unwrap();
        let ids = many.ids();
        assert!(matches!(ids[&0], Bson::ObjectId(_)));
        assert_eq!(ids[&1], Bson::Null);
        assert!(InsertMany::new(
            ns(),
            vec![],
            InsertManyOptions::default(),
            &mut sequential_ids()
        )
        .is_err());
    }

    fn mixed() -> Vec<CollectionWriteModel> {
        vec![
            CollectionWriteModel::insert_one(doc! { "_id": 1 }),
            CollectionWriteModel::update_one(doc! { "_id": 1 }, doc! { "$inc": { "x": 1 } }),
            CollectionWriteModel::insert_one(doc! { "_id": 2 }),
            CollectionWriteModel::delete_many(doc! { "x": 0 }),
            CollectionWriteModel::ReplaceOne {
                filter: doc! { "_id": 5 },
                replacement: doc! { "x": 5 },
                options: ReplaceModelOptions::default().upsert(true),
            },
        ]
    }

    #[test]
    fn ordered_groups_keep_the_callers_order() {
        let mut bulk = bulk_of(mixed());
        let sent = run(&mut bulk, &server(), |command| match command.name {
            "update"
                if sent_documents(command)[0].get_document("q").unwrap() == &doc! { "_id": 5 } =>
            {
                doc! { "n": 1, "nModified": 0, "upserted": [ { "index": 0, "_id": 5 } ], "ok": 1 }
            }
            "update" => doc! { "n": 1, "nModified": 1, "ok": 1 },
            "delete" => doc! { "n": 2, "ok": 1 },
            _ => all_ok(command),
        })
        .unwrap();
        let names: Vec<&str> = sent.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            vec!["insert", "update", "insert", "delete", "update"]
        );
        assert_eq!(
            sent_documents(&sent[3]),
            vec![doc! { "q": { "x": 0 }, "limit": 0 }]
        );
        assert_eq!(
            sent_documents(&sent[4]),
            vec![doc! { "q": { "_id": 5 }, "u": { "x": 5 }, "upsert": true }]
        );
        let result = bulk.finish().unwrap();
        let mut expected = BulkWriteResult {
            inserted_count: 2,
            matched_count: 1,
            modified_count: 1,
            deleted_count: 2,
            upserted_count: 1,
            ..BulkWriteResult::default()
        };
        expected.inserted_ids.insert(0, Bson::Int32(1));
        expected.inserted_ids.insert(2, Bson::Int32(2));
        expected.upserted_ids.insert(4, Bson::Int32(5));
        assert_eq!(result, expected);
    }

    #[test]
    fn unordered_groups_by_kind_and_remaps_upsert_indexes() {
        let options = BulkWriteOptions::default().ordered(false);
        let mut bulk = BulkWrite::new(ns(), mixed(), options, &mut sequential_ids()).unwrap();
        let sent = run(&mut bulk, &server(), |command| match command.name {
            // The update group is models 1 and 4; the second was upserted.
            "update" => {
                doc! { "n": 2, "nModified": 1, "upserted": [ { "index": 1, "_id": 5 } ], "ok": 1 }
            }
            "delete" => doc! { "n": 0, "ok": 1 },
            _ => all_ok(command),
        })
        .unwrap();
        assert_eq!(batch_lengths(&sent), vec![2, 2, 1]);
        assert_eq!(sent[0].body, doc! { "insert": "coll", "ordered": false });
        let result = bulk.finish().unwrap();
        assert_eq!(result.upserted_ids, BTreeMap::from([(4, Bson::Int32(5))]));
        assert_eq!((result.matched_count, result.modified_count), (1, 1));
    }

    fn duplicate_key(index: i32) -> Document {
        doc! { "index": index, "code": 11000, "codeName": "DuplicateKey", "errmsg": "dup" }
    }

    fn failure(error: &Error) -> &BulkWriteFailure {
        match error.kind() {
            ErrorKind::CollectionBulkWrite(failure) => failure,
            other => panic!("expected a bulk write failure, got {other:?}"),
        }
    }

    #[test]
    fn ordered_stops_at_the_first_write_error() {
        let mut bulk = bulk_of(inserts(5));
        let sent = run(&mut bulk, &small_server(2, 48_000_000, 1024), |command| {
            if sent_documents(command)[0] == doc! { "_id": 2 } {
                // Second batch (models 2, 3): model 3 fails, the server stops there.
                doc! { "n": 1, "writeErrors": [duplicate_key(1)], "ok": 1 }
            } else {
                all_ok(command)
            }
        })
        .unwrap();
        assert_eq!(sent.len(), 2, "the third batch is never sent");
        let error = bulk.finish().unwrap_err();
        let failure = failure(&error);
        assert_eq!(failure.write_errors.len(), 1);
        assert_eq!(failure.write_errors[0].index, 3);
        assert_eq!(failure.write_errors[0].code, 11000);
        assert_eq!(failure.partial_result.inserted_count, 3);
        assert_eq!(
            failure
                .partial_result
                .inserted_ids
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn unordered_collects_every_write_error() {
        let options = BulkWriteOptions::default().ordered(false);
        let mut models = inserts(5);
        models.insert(1, CollectionWriteModel::delete_one(doc! { "_id": 0 }));
        // Inserts are models 0, 2, 3, 4, 5 (`_id` 0 to 4); batches of 2:
        // models [0, 2], [3, 4], [5].
        let mut bulk = BulkWrite::new(ns(), models, options, &mut sequential_ids()).unwrap();
        let sent = run(&mut bulk, &small_server(2, 48_000_000, 1024), |command| {
            let first = sent_documents(command)[0].clone();
            if first == doc! { "_id": 0 } {
                doc! { "n": 1, "writeErrors": [duplicate_key(1)], "ok": 1 }
            } else if first == doc! { "_id": 2 } {
                doc! { "n": 1, "writeErrors": [duplicate_key(0)], "ok": 1 }
            } else {
                all_ok(command)
            }
        })
        .unwrap();
        assert_eq!(batch_lengths(&sent), vec![2, 2, 1, 1]);
        let error = bulk.finish().unwrap_err();
        let failure = failure(&error);
        let indexes: Vec<usize> = failure.write_errors.iter().map(|e| e.index).collect();
        assert_eq!(indexes, vec![2, 3]);
        assert_eq!(
            failure
                .partial_result
                .inserted_ids
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![0, 4, 5]
        );
        assert_eq!(failure.partial_result.inserted_count, 3);
        assert_eq!(failure.partial_result.deleted_count, 1);
    }

    #[test]
    fn write_concern_error_does_not_stop_an_ordered_write() {
        let mut bulk = bulk_of(inserts(4));
        let sent = run(&mut bulk, &small_server(2, 48_000_000, 1024), |command| {
            let mut reply = all_ok(command);
            if sent_documents(command)[0] == doc! { "_id": 0 } {
                reply.insert(
                    "writeConcernError",
                    doc! { "code": 64, "codeName": "WriteConcernFailed", "errmsg": "waiting" },
                );
                reply.insert("errorLabels", vec!["SomeLabel"]);
            }
            reply
        })
        .unwrap();
        assert_eq!(sent.len(), 2);
        let error = bulk.finish().unwrap_err();
        assert_eq!(error.code(), Some(64));
        assert!(error.contains_label("SomeLabel"));
        let failure = failure(&error);
        assert!(failure.write_errors.is_empty());
        assert_eq!(
            failure.write_concern_error.as_ref().unwrap().code_name,
            "WriteConcernFailed"
        );
        assert_eq!(failure.partial_result.inserted_count, 4);
    }

    #[test]
    fn other_errors_end_the_bulk_write() {
        let mut bulk = bulk_of(inserts(4));
        let batch = bulk.next_batch().unwrap();
        batch.build(&small_server(2, 48_000_000, 1024)).unwrap();
        let error = bulk
            .record(Err(Error::network_message(None, "reset")))
            .unwrap_err();
        assert!(error.is_network_error());
        assert!(bulk.next_batch().is_none());
        assert_eq!(bulk.finish().unwrap(), BulkWriteResult::default());
    }

    #[test]
    fn recording_an_unbuilt_batch_is_refused() {
        let mut bulk = bulk_of(inserts(2));
        assert!(bulk.record(Ok(BulkWriteResult::default())).is_err());
        assert!(bulk.next_batch().is_none());
    }

    #[test]
    fn retry_rebuilds_the_same_batch() {
        let mut bulk = bulk_of(inserts(4));
        let server = small_server(2, 48_000_000, 1024);
        let batch = bulk.next_batch().unwrap();
        let first = batch.build(&server).unwrap();
        let again = batch.build(&server).unwrap();
        assert_eq!(first, again);
        assert_eq!(batch.built_indexes(), vec![0, 1]);
    }

    #[test]
    fn write_error_index_outside_the_batch_is_a_protocol_error() {
        let mut bulk = bulk_of(inserts(2));
        let batch = bulk.next_batch().unwrap();
        batch.build(&server()).unwrap();
        let error = batch
            .handle_reply(
                doc! { "n": 0, "writeErrors": [duplicate_key(2)], "ok": 1 },
                &server(),
            )
            .unwrap_err();
        assert!(
            matches!(error.kind(), ErrorKind::InvalidResponse { .. }),
            "{error}"
        );
    }

    #[test]
    fn models_are_validated_before_anything_is_sent() {
        assert!(try_bulk_of(vec![]).is_err());
        let models = vec![
            CollectionWriteModel::insert_one(doc! {}),
            CollectionWriteModel::update_one(doc! {}, doc! { "x": 1 }),
        ];
        let error = try_bulk_of(models).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("invalid argument: write model 1: update document"),
            "{error}"
        );
        let models = vec![CollectionWriteModel::replace_one(
            doc! {},
            doc! { "$set": { "x": 1 } },
        )];
        assert!(try_bulk_of(models).is_err());
        let models = vec![CollectionWriteModel::UpdateMany {
            filter: doc! {},
            update: doc! { "$set": { "x": 1 } }.into(),
            options: UpdateModelOptions::default().sort(doc! { "x": 1 }),
        }];
        assert!(try_bulk_of(models).is_err());
    }

    #[test]
    fn multi_statements_make_a_batch_non_retryable_and_options_reach_the_commands() {
        let options = BulkWriteOptions::default()
            .bypass_document_validation(true)
            .let_vars(doc! { "v": 1 })
            .comment(Bson::from("c"));
        let models = vec![
            CollectionWriteModel::insert_one(doc! { "_id": 1 }),
            CollectionWriteModel::update_many(doc! {}, doc! { "$set": { "x": 1 } }),
            CollectionWriteModel::delete_one(doc! {}),
        ];
        let mut bulk = BulkWrite::new(ns(), models, options, &mut sequential_ids()).unwrap();
        let mut bodies = Vec::new();
        let mut retryability = Vec::new();
        while let Some(batch) = bulk.next_batch() {
            retryability.push(batch.retryability());
            let command = batch.build(&server()).unwrap();
            bodies.push(command.body.clone());
            let outcome = batch.handle_reply(all_ok(&command), &server());
            bulk.record(outcome).unwrap();
        }
        assert_eq!(
            retryability,
            vec![Retryability::Write, Retryability::None, Retryability::Write]
        );
        assert_eq!(
            bodies,
            vec![
                doc! { "insert": "coll", "ordered": true, "bypassDocumentValidation": true, "comment": "c" },
                doc! { "update": "coll", "ordered": true, "bypassDocumentValidation": true, "let": { "v": 1 }, "comment": "c" },
                doc! { "delete": "coll", "ordered": true, "let": { "v": 1 }, "comment": "c" },
            ]
        );
    }
}
