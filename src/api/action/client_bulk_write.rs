//! `Client::bulk_write`: writes to any number of collections in as few
//! `bulkWrite` commands as the server's limits allow (MongoDB 8.0+).

use std::marker::PhantomData;

use bson::{Bson, Document};

use super::{option_setters, session_setter};
use crate::api::client::Client;
use crate::api::client_session::ClientSession;
use crate::api::cursor::{Cursor, SessionCursor};
use crate::error::{Error, ErrorKind, Result};
use crate::proto::client_bulk::{
    BulkResultKind, Gathered, PartialBulkWriteResult, SummaryBulkWriteResult,
    VerboseBulkWriteResult, WriteModel,
};
use crate::proto::coll_options::BulkWriteOptions;
use crate::proto::concern::WriteConcern;
use crate::proto::deadline::Deadline;
use crate::proto::operation::client_bulk_write::{BatchReply, ClientBulkBatch, ClientBulkWrite};
use crate::proto::operation::cursor::{CursorOptions, CursorSpec};
use crate::shell::exec::{Executed, Inherited, Target};

/// `Client::bulk_write`: returns a [`SummaryBulkWriteResult`], or with
/// [`verbose_results`](BulkWrite::verbose_results) a [`VerboseBulkWriteResult`].
#[must_use = "nothing is sent until `run`"]
pub struct BulkWrite<'a, R> {
    client: &'a Client,
    models: Vec<WriteModel>,
    options: BulkWriteOptions,
    session: Option<&'a mut ClientSession>,
    timeout: Option<std::time::Duration>,
    _result: PhantomData<R>,
}

impl<'a> BulkWrite<'a, SummaryBulkWriteResult> {
    pub(crate) fn new(client: &'a Client, models: Vec<WriteModel>) -> Self {
        BulkWrite {
            client,
            models,
            options: BulkWriteOptions::default(),
            session: None,
            timeout: None,
            _result: PhantomData,
        }
    }

    /// Returns each successful write's own result too
    /// ([`VerboseBulkWriteResult`]).
    pub fn verbose_results(self) -> BulkWrite<'a, VerboseBulkWriteResult> {
        BulkWrite {
            client: self.client,
            models: self.models,
            options: self.options,
            session: self.session,
            timeout: self.timeout,
            _result: PhantomData,
        }
    }

    /// Runs the writes, in as many `bulkWrite` commands as the server's
    /// limits need.
    pub fn run(self) -> Result<SummaryBulkWriteResult> {
        execute(self)
    }
}

impl BulkWrite<'_, VerboseBulkWriteResult> {
    /// Runs the writes, in as many `bulkWrite` commands as the server's
    /// limits need.
    pub fn run(self) -> Result<VerboseBulkWriteResult> {
        execute(self)
    }
}

impl<'a, R> BulkWrite<'a, R> {
    option_setters!(BulkWriteOptions {
        ordered: bool,
        bypass_document_validation: bool,
        comment: Bson,
        let_vars: Document,
        write_concern: WriteConcern,
        raw_data: bool,
    });
    session_setter!();

    /// Sets this operation's `timeoutMS` (client-side operations timeout)
    /// for all its batches together, overriding the client's;
    /// `Duration::ZERO` keeps CSOT's rules without a limit.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

fn execute<R: BulkResultKind>(mut action: BulkWrite<'_, R>) -> Result<R> {
    let mut bulk = ClientBulkWrite::new(
        std::mem::take(&mut action.models),
        std::mem::take(&mut action.options),
        R::VERBOSE,
        &mut crate::new_object_id,
    )?;
    let defaults = action
        .client
        .defaults()
        .with_operation_timeout(action.timeout);
    let deadline = action.client.state()?.deadline_from_now(defaults.timeout);
    let inherited = Inherited {
        deadline: Some(deadline),
        ..defaults.inherited()
    };
    let mut gathered = Gathered::default();
    let mut labels = Vec::new();
    while !bulk.is_done() {
        let session = action.session.as_deref_mut();
        match run_batch::<R>(
            action.client,
            session,
            &mut bulk,
            &inherited,
            deadline,
            &mut gathered,
        ) {
            Ok(()) => {}
            // A batch's write concern error, after any retry: the bulk
            // write goes on, and fails at the end.
            Err(error) if error.source.is_none() && is_bulk_error(&error) => {
                labels.extend(error.labels().iter().cloned());
                merge(&mut gathered, *error.kind);
            }
            Err(error) => return Err(top_level::<R>(gathered, labels, error)),
        }
        if bulk.is_ordered() && !gathered.write_errors.is_empty() {
            break;
        }
        bulk.advance();
    }
    if gathered.write_errors.is_empty() && gathered.write_concern_errors.is_empty() {
        return gathered.finish();
    }
    Err(gathered.into_error::<R>(labels, None))
}

/// Sends the batch at the bulk write's position and reads all of its
/// results (with `getMore`s in the same session when the first reply
/// did not hold them all).
fn run_batch<R: BulkResultKind>(
    client: &Client,
    mut session: Option<&mut ClientSession>,
    bulk: &mut ClientBulkWrite,
    inherited: &Inherited<'_>,
    deadline: Deadline,
    gathered: &mut Gathered,
) -> Result<()> {
    let executed = {
        let mut state = client.state()?;
        let explicit = session.as_deref_mut().map(|s| s.state_mut());
        let mut op = ClientBulkBatch::<R>::new(bulk);
        state.execute(&mut op, explicit, *inherited, Target::Select)?
    };
    let Executed {
        output: BatchReply {
            gathered: batch,
            outcome,
        },
        address,
        generation,
        implicit_session,
    } = executed;
    merge_gathered(gathered, batch);
    let Some(outcome) = outcome.filter(|o| o.cursor_id != 0) else {
        client.state()?.check_in(implicit_session);
        return Ok(());
    };
    let reply = bson::doc! {
        "cursor": { "id": outcome.cursor_id, "ns": outcome.cursor_ns, "firstBatch": [] },
    };
    let spec = CursorSpec::from_reply(reply, CursorOptions::default())?;
    let executed = Executed {
        output: spec,
        address,
        generation,
        implicit_session,
    };
    match session {
        Some(session) => {
            let timing = crate::api::cursor::Timing {
                timeout: inherited.timeout,
                deadline: Some(deadline),
            };
            let mut cursor =
                SessionCursor::<Document>::from_executed(client.clone(), executed, timing);
            while let Some(result) = cursor.next(session) {
                bulk.record(&result?, gathered)?;
            }
        }
        None => {
            let cursor = Cursor::<Document>::from_executed(client.clone(), executed).with_timing(
                crate::api::cursor::Timing {
                    timeout: inherited.timeout,
                    deadline: Some(deadline),
                },
            );
            for result in cursor {
                bulk.record(&result?, gathered)?;
            }
        }
    }
    Ok(())
}

fn is_bulk_error(error: &Error) -> bool {
    matches!(&*error.kind, ErrorKind::BulkWrite(_))
}

/// A top-level error (network, command error, a failed `getMore`) ends
/// the bulk write; when writes were already reported it comes as the
/// source of the bulk write error that carries them.
fn top_level<R: BulkResultKind>(gathered: Gathered, labels: Vec<String>, error: Error) -> Error {
    let seen_anything = gathered.any_succeeded
        || !gathered.write_errors.is_empty()
        || !gathered.write_concern_errors.is_empty();
    if !seen_anything {
        return error;
    }
    let labels = labels
        .into_iter()
        .chain(error.labels().iter().cloned())
        .collect();
    gathered.into_error::<R>(labels, Some(error))
}

/// Adds a batch's reading to the whole bulk write's.
fn merge_gathered(into: &mut Gathered, batch: Gathered) {
    into.write_errors.extend(batch.write_errors);
    into.write_concern_errors.extend(batch.write_concern_errors);
    into.any_succeeded |= batch.any_succeeded;
    add_verbose(into, batch.result);
}

fn add_verbose(into: &mut Gathered, result: VerboseBulkWriteResult) {
    let summary = &mut into.result.summary;
    summary.inserted_count += result.summary.inserted_count;
    summary.matched_count += result.summary.matched_count;
    summary.modified_count += result.summary.modified_count;
    summary.upserted_count += result.summary.upserted_count;
    summary.deleted_count += result.summary.deleted_count;
    into.result.insert_results.extend(result.insert_results);
    into.result.update_results.extend(result.update_results);
    into.result.delete_results.extend(result.delete_results);
}

/// Adds what a batch that ended in a write concern error reported.
fn merge(into: &mut Gathered, kind: ErrorKind) {
    let ErrorKind::BulkWrite(error) = kind else {
        return;
    };
    into.write_errors.extend(error.write_errors);
    into.write_concern_errors.extend(error.write_concern_errors);
    match error.partial_result {
        Some(PartialBulkWriteResult::Summary(summary)) => {
            into.any_succeeded = true;
            add_verbose(
                into,
                VerboseBulkWriteResult {
                    summary,
                    ..Default::default()
                },
            );
        }
        Some(PartialBulkWriteResult::Verbose(verbose)) => {
            into.any_succeeded = true;
            add_verbose(into, verbose);
        }
        None => {}
    }
}
