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
//! bulk.finish() -> BulkWriteResult, or ErrorKind::BulkWrite with every write
//!                  error (indexes into the caller's list) and the partial result
//! ```
//!
//! A batch's `handle_reply` reports write errors and write concern errors as
//! an [`ErrorKind::BulkWrite`] error so that the executor can retry a
//! retryable write concern error; [`BulkWrite::record`] then folds it in.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bson::{doc, Bson, Document};

use super::delete::delete_statement;
use super::insert::{ensure_id, too_large};
use super::update::{
    parse_update_reply, update_statement, validate_replacement, UpdateCounts, UpdateModification,
    UpdateStatementOptions,
};
use super::{
    append_option, document_size, malformed, parse_write_concern_error, parse_write_errors,
    reply_count, reply_labels, sequence_budget, Command, Namespace, Operation, Retryability,
    ServerInfo, COMMAND_OVERHEAD_BYTES,
};
use crate::coll_options::{
    BulkWriteOptions, DeleteModelOptions, InsertManyOptions, ReplaceModelOptions,
    UpdateModelOptions,
};
use crate::error::{Error, ErrorKind, Result};
use crate::options::WriteConcern;
use crate::results::{
    BulkWriteFailure, BulkWriteResult, InsertManyResult, WriteConcernError, WriteError,
};
use crate::wire::DocumentSequence;

/// One write of a bulk write.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum WriteModel {
    /// Inserts `document` (an `_id` is generated when it has none).
    InsertOne {
        /// The document.
        document: Document,
    },
    /// Updates the first document matching `filter`.
    UpdateOne {
        /// Which documents.
        filter: Document,
        /// Update operators or a pipeline.
        update: UpdateModification,
        /// Statement options.
        options: UpdateModelOptions,
    },
    /// Updates every document matching `filter`.
    UpdateMany {
        /// Which documents.
        filter: Document,
        /// Update operators or a pipeline.
        update: UpdateModification,
        /// Statement options (`sort` is not allowed).
        options: UpdateModelOptions,
    },
    /// Replaces the first document matching `filter`.
    ReplaceOne {
        /// Which document.
        filter: Document,
        /// The new document (no update operators).
        replacement: Document,
        /// Statement options.
        options: ReplaceModelOptions,
    },
    /// Deletes the first document matching `filter`.
    DeleteOne {
        /// Which document.
        filter: Document,
        /// Statement options.
        options: DeleteModelOptions,
    },
    /// Deletes every document matching `filter`.
    DeleteMany {
        /// Which documents.
        filter: Document,
        /// Statement options.
        options: DeleteModelOptions,
    },
}

impl WriteModel {
    /// An `InsertOne`.
    pub fn insert_one(document: Document) -> Self {
        WriteModel::InsertOne { document }
    }

    /// An `UpdateOne` without options.
    pub fn update_one(filter: Document, update: impl Into<UpdateModification>) -> Self {
        WriteModel::UpdateOne {
            filter,
            update: update.into(),
            options: UpdateModelOptions::default(),
        }
    }

    /// An `UpdateMany` without options.
    pub fn update_many(filter: Document, update: impl Into<UpdateModification>) -> Self {
        WriteModel::UpdateMany {
            filter,
            update: update.into(),
            options: UpdateModelOptions::default(),
        }
    }

    /// A `ReplaceOne` without options.
    pub fn replace_one(filter: Document, replacement: Document) -> Self {
        WriteModel::ReplaceOne {
            filter,
            replacement,
            options: ReplaceModelOptions::default(),
        }
    }

    /// A `DeleteOne` without options.
    pub fn delete_one(filter: Document) -> Self {
        WriteModel::DeleteOne {
            filter,
            options: DeleteModelOptions::default(),
        }
    }

    /// A `DeleteMany` without options.
    pub fn delete_many(filter: Document) -> Self {
        WriteModel::DeleteMany {
            filter,
            options: DeleteModelOptions::default(),
        }
    }
}

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
    document: Document,
    size: usize,
    multi: bool,
}

/// The command-level options every batch of a bulk write shares.
#[derive(Clone, Debug, Default)]
struct SharedOptions {
    ordered: bool,
    bypass_document_validation: Option<bool>,
    let_vars: Option<Document>,
    comment: Option<Bson>,
    write_concern: Option<WriteConcern>,
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
    /// The command kind.
    pub fn kind(&self) -> WriteKind {
        self.kind
    }

    /// The caller's indexes of the statements the last `build` included.
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
                    let id = statement.document.get("_id").cloned().unwrap_or(Bson::Null);
                    result.inserted_ids.insert(statement.index, id);
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

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let name = self.kind.command_name();
        let mut body = doc! { name: self.ns.coll.clone(), "ordered": self.options.ordered };
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
            .map(|s| s.document.clone())
            .collect();
        let mut command = Command::new(name, self.ns.db.clone(), body);
        command.sequences.push(DocumentSequence {
            identifier: self.kind.sequence_name().into(),
            documents,
        });
        Ok(command)
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
        Err(Error::new(ErrorKind::BulkWrite(BulkWriteFailure {
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
    /// operators, a replacement with some, a sort on `UpdateMany`).
    pub fn new(ns: Namespace, models: Vec<WriteModel>, options: BulkWriteOptions) -> Result<Self> {
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
        };
        let mut statements = Vec::with_capacity(models.len());
        for (index, model) in models.into_iter().enumerate() {
            let (kind, document, multi) = statement_of(index, model)?;
            let size = document_size(&document)?;
            statements.push((
                kind,
                Statement {
                    index,
                    document,
                    size,
                    multi,
                },
            ));
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
    /// [`Self::next_batch`]: its result, a [`ErrorKind::BulkWrite`] error
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
                let ErrorKind::BulkWrite(failure) = error.kind() else {
                    self.stopped = true;
                    return Err(error);
                };
                let failure = failure.clone();
                self.labels.extend(error.labels().map(str::to_string));
                let stop = self.ordered && !failure.write_errors.is_empty();
                self.write_errors.extend(failure.write_errors);
                if failure.write_concern_error.is_some() {
                    self.write_concern_error = failure.write_concern_error;
                }
                (failure.partial_result, stop)
            }
        };
        merge(&mut self.result, result);
        batch.start = batch.end.max(batch.start + 1).min(batch.statements.len());
        if batch.is_done() {
            self.groups.pop_front();
        }
        if stop {
            self.stopped = true;
        }
        Ok(())
    }

    /// What the bulk write did so far.
    pub fn partial_result(&self) -> &BulkWriteResult {
        &self.result
    }

    /// The merged result, or an [`ErrorKind::BulkWrite`] error when a
    /// statement failed or a write concern was not satisfied.
    pub fn finish(self) -> Result<BulkWriteResult> {
        if self.write_errors.is_empty() && self.write_concern_error.is_none() {
            return Ok(self.result);
        }
        Err(Error::new(ErrorKind::BulkWrite(BulkWriteFailure {
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
}

/// The statement a model sends, after validating it.
fn statement_of(index: usize, model: WriteModel) -> Result<(WriteKind, Document, bool)> {
    let at = |error: Error| match error.kind() {
        ErrorKind::InvalidArgument { message } => {
            Error::invalid_argument(format!("write model {index}: {message}"))
        }
        _ => error,
    };
    Ok(match model {
        WriteModel::InsertOne { mut document } => {
            ensure_id(&mut document);
            (WriteKind::Insert, document, false)
        }
        WriteModel::UpdateOne {
            filter,
            update,
            options,
        } => {
            update.validate().map_err(at)?;
            (
                WriteKind::Update,
                update_model(filter, &update, options, false),
                false,
            )
        }
        WriteModel::UpdateMany {
            filter,
            update,
            options,
        } => {
            update.validate().map_err(at)?;
            if options.sort.is_some() {
                return Err(at(Error::invalid_argument(
                    "UpdateMany does not take a sort",
                )));
            }
            (
                WriteKind::Update,
                update_model(filter, &update, options, true),
                true,
            )
        }
        WriteModel::ReplaceOne {
            filter,
            replacement,
            options,
        } => {
            validate_replacement(&replacement).map_err(at)?;
            let statement = update_statement(
                filter,
                Bson::Document(replacement),
                UpdateStatementOptions {
                    multi: false,
                    upsert: options.upsert,
                    array_filters: None,
                    collation: options.collation,
                    hint: options.hint,
                    sort: options.sort,
                },
            );
            (WriteKind::Update, statement, false)
        }
        WriteModel::DeleteOne { filter, options } => (
            WriteKind::Delete,
            delete_statement(filter, false, options.collation, options.hint),
            false,
        ),
        WriteModel::DeleteMany { filter, options } => (
            WriteKind::Delete,
            delete_statement(filter, true, options.collation, options.hint),
            true,
        ),
    })
}

fn update_model(
    filter: Document,
    update: &UpdateModification,
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
    /// Plans inserting `documents` into `ns`, generating missing `_id`s.
    pub fn new(
        ns: Namespace,
        documents: Vec<Document>,
        options: InsertManyOptions,
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
        };
        let mut statements = Vec::with_capacity(documents.len());
        for (index, mut document) in documents.into_iter().enumerate() {
            ensure_id(&mut document);
            let size = document_size(&document)?;
            statements.push((
                WriteKind::Insert,
                Statement {
                    index,
                    document,
                    size,
                    multi: false,
                },
            ));
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

    /// The inserted ids, or an [`ErrorKind::BulkWrite`] error whose partial
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
    pub fn ids(&self) -> BTreeMap<usize, Bson> {
        self.0
            .groups
            .iter()
            .flat_map(|g| g.statements.iter())
            .map(|s| {
                (
                    s.index,
                    s.document.get("_id").cloned().unwrap_or(Bson::Null),
                )
            })
            .collect()
    }
}
