//! Finishing a command: from an operation's command and the context of one
//! attempt to the OP_MSG that goes on the wire and the command event's copy.
//!
//! ```text
//!  Command (op.build) ──┬─ session: lsid, txnNumber, startTransaction,
//!                       │   autocommit, afterClusterTime   (SessionState::decorate)
//!                       ├─ read/write concern             (concern::attach_concerns, one rule)
//!                       ├─ $clusterTime, $readPreference, API version
//!                       ├─ maxTimeMS from the deadline, $db
//!                       └─> Finished { OpMsg, event name, event's copy (only when wanted) }
//! ```
//!
//! Pure: no socket and no clock read (the time is in the context), so the
//! same command comes out with and without a session, save the session's
//! own fields, and the unit tests check it byte for byte. The executor
//! (`shell::exec`) calls [`finish`] once per attempt and sends the result.

use std::time::{Duration, Instant};

use bson::Document;

use crate::error::Result;
use crate::proto::command_draft::CommandDraft;
use crate::proto::concern::{attach_concerns, Takes};
use crate::proto::deadline::Deadline;
use crate::proto::event::command::is_sensitive_body;
use crate::proto::operation::{Command, CommandBody};
use crate::proto::options::{ReadConcern, ServerApi, WriteConcern};
use crate::proto::session::cluster_time::{attach_cluster_time, ClusterTime};
use crate::proto::session::{CommandContext, SessionState};
use crate::proto::wire::{DocumentSequence, MsgBody, MsgFlags, MsgParts};

/// Everything one attempt's command is finished with, resolved by the
/// executor before the call.
#[derive(Clone, Debug)]
pub(crate) struct AttemptContext<'a> {
    /// The selected server's `maxWireVersion`.
    pub(crate) max_wire_version: i32,
    /// The server's minimum round trip, subtracted from `maxTimeMS`.
    pub(crate) min_round_trip_time: Duration,
    /// The operation's (or inherited) read concern.
    pub(crate) read_concern: Option<&'a ReadConcern>,
    /// The operation's (or inherited) write concern.
    pub(crate) write_concern: Option<&'a WriteConcern>,
    /// A retryable write: the session's `txnNumber` goes on the command.
    pub(crate) retryable_write: bool,
    /// `$readPreference` for this server, when one is sent.
    pub(crate) read_preference: Option<Document>,
    /// The Stable API version, when the client declares one.
    pub(crate) server_api: Option<&'a ServerApi>,
    /// The client's cluster clock.
    pub(crate) cluster_time: Option<&'a ClusterTime>,
    /// The operation's deadline.
    pub(crate) deadline: Deadline,
    /// The opening command of a cursor whose `timeoutMS` is per iteration
    /// or tailable (CSOT): bounded by the deadline, sent without `maxTimeMS`.
    pub(crate) omit_max_time: bool,
    /// The time of the attempt.
    pub(crate) now: Instant,
    /// Whether anyone listens for command events (a handler, or the
    /// command log): the event's copy is made only then.
    pub(crate) events_wanted: bool,
}

/// A command ready for the socket.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The message's flag bits.
    pub(crate) flags: MsgFlags,
    /// The command, written straight into the message when it is sent.
    pub(crate) command: CommandDraft,
    /// The message's document sequences.
    pub(crate) sequences: Vec<DocumentSequence>,
    /// The operation's name for the command (session and retry rules).
    pub(crate) name: &'static str,
    /// The body's first key: what events call the command.
    pub(crate) event_name: std::borrow::Cow<'static, str>,
    /// Whether the command's and its reply's documents are redacted.
    pub(crate) sensitive: bool,
    /// The command as events show it (sequences folded in, redacted); made
    /// only when someone listens.
    pub(crate) event_command: Option<Document>,
}

impl Finished {
    /// A `w: 0` write: sent with `moreToCome`, and no reply comes back.
    pub(crate) fn unacknowledged(&self) -> bool {
        self.flags.has(MsgFlags::MORE_TO_COME)
    }

    /// The message to send.
    pub(crate) fn parts(&self) -> MsgParts<'_> {
        MsgParts {
            flags: self.flags,
            body: MsgBody::Draft(&self.command),
            sequences: &self.sequences,
        }
    }

    /// The database the command runs on (its `$db`).
    pub(crate) fn target_db(&self) -> &str {
        self.command.get_str("$db").unwrap_or_default()
    }
}

/// Finishes `command` for one attempt. Errors (an ended session, a
/// snapshot on an old server, a deadline already passed) mean nothing was
/// sent.
pub(crate) fn finish(
    command: Command,
    ctx: &AttemptContext<'_>,
    session: Option<&mut SessionState>,
) -> Result<Finished> {
    let Command {
        name,
        target_db,
        body,
        sequences,
    } = command;
    let takes = Takes::of(name, &body);
    let mut draft = CommandDraft::new(body);
    let (csot_write_concern, csot_ctx);
    let ctx = if ctx.deadline.is_set() {
        csot_write_concern = ignore_what_timeout_ms_replaces(&mut draft, name, ctx.write_concern)?;
        csot_ctx = AttemptContext {
            write_concern: csot_write_concern.as_ref(),
            ..ctx.clone()
        };
        &csot_ctx
    } else {
        ctx
    };
    match session {
        Some(session) => {
            let context = CommandContext {
                max_wire_version: ctx.max_wire_version,
                accepts_read_concern: takes.read_concern,
                accepts_write_concern: takes.write_concern,
                accepts_after_cluster_time: takes.after_cluster_time,
                read_concern: ctx.read_concern,
                write_concern: ctx.write_concern,
                retryable_write: ctx.retryable_write,
                client_cluster_time: ctx.cluster_time,
            };
            session.decorate_draft(&mut draft, &context, ctx.now)?;
        }
        None => {
            let level = ctx.read_concern.map(|rc| rc.level.as_str());
            attach_concerns(&mut draft, takes, level, ctx.write_concern, None);
            attach_cluster_time(&mut draft, ctx.cluster_time, ctx.max_wire_version);
        }
    }
    attach_routing(&mut draft, ctx);
    attach_max_time(&mut draft, name, ctx)?;
    draft.insert_text("$db", target_db);

    Ok(seal(name, draft, sequences, takes, ctx.events_wanted))
}

/// The message, the name events use, redaction, and the event's copy.
fn seal(
    name: &'static str,
    command: CommandDraft,
    sequences: Vec<DocumentSequence>,
    takes: Takes,
    events_wanted: bool,
) -> Finished {
    // Events name the command by the body's first key, as the spec says:
    // `Command::name` is "runCommand" for a caller's command, and
    // sensitivity must be judged on the real name.
    // Borrowed when it is the operation's own name (the usual case): no
    // allocation per operation for a name only events read.
    let event_name = if command.first_key_bytes() == Some(name.as_bytes()) {
        std::borrow::Cow::Borrowed(name)
    } else {
        match command.first_key() {
            Some(first) => std::borrow::Cow::Owned(first.to_string()),
            None => std::borrow::Cow::Borrowed(name),
        }
    };
    let sensitive = is_sensitive_body(&event_name, command.body());
    let flags = if write_concern_unacknowledged(&command, takes) {
        MsgFlags::MORE_TO_COME
    } else {
        MsgFlags::default()
    };
    let event_command = events_wanted.then(|| event_copy(&command, &sequences, sensitive));
    Finished {
        flags,
        command,
        sequences,
        name,
        event_name,
        sensitive,
        event_command,
    }
}

/// `$readPreference` (unless the command has one) and the Stable API.
fn attach_routing(body: &mut CommandDraft, ctx: &AttemptContext<'_>) {
    if let Some(rp) = &ctx.read_preference {
        if !body.contains_key("$readPreference") {
            body.insert("$readPreference", rp.clone());
        }
    }
    if let Some(api) = ctx.server_api {
        body.insert("apiVersion", api.version.to_string());
        if let Some(strict) = api.strict {
            body.insert("apiStrict", strict);
        }
        if let Some(errors) = api.deprecation_errors {
            body.insert("apiDeprecationErrors", errors);
        }
    }
}

/// CSOT: under `timeoutMS` the deprecated per-operation limits are
/// ignored: an operation's `maxTimeMS` gives way to the deadline's, and
/// the write concern loses its `wtimeout` (client-side-operations-timeout:
/// "drivers MUST ignore"). A caller's own `runCommand` body is sent as
/// written, and a `getMore`'s `maxTimeMS` is its cursor's `maxAwaitTimeMS`.
fn ignore_what_timeout_ms_replaces(
    draft: &mut CommandDraft,
    name: &str,
    write_concern: Option<&WriteConcern>,
) -> Result<Option<WriteConcern>> {
    if !matches!(name, "runCommand" | "getMore") {
        draft.remove_from_body("maxTimeMS")?;
    }
    // A transaction's commit and abort carry the transaction's own write
    // concern in their body.
    if matches!(name, "commitTransaction" | "abortTransaction") {
        let emptied = draft.get_document_mut("writeConcern").is_some_and(|wc| {
            wc.remove("wtimeout");
            wc.is_empty()
        });
        if emptied {
            draft.remove_from_body("writeConcern")?;
        }
    }
    Ok(write_concern.map(|wc| WriteConcern {
        w_timeout: None,
        ..wc.clone()
    }))
}

/// CSOT: `maxTimeMS` is the time left less the server's minimum round trip
/// (not on a cursor's follow-ups, which carry their own), and nothing is
/// sent once the deadline has passed. A tailable-await `getMore` waits at
/// most `min(maxAwaitTimeMS, time left − minRTT)`.
fn attach_max_time(body: &mut CommandDraft, name: &str, ctx: &AttemptContext<'_>) -> Result<()> {
    if !ctx.deadline.is_set() {
        return Ok(());
    }
    if name == "getMore" {
        let max_await = match body.get("maxTimeMS").as_deref() {
            Some(bson::Bson::Int64(ms)) => u64::try_from(*ms).ok(),
            Some(bson::Bson::Int32(ms)) => u64::try_from(*ms).ok(),
            _ => None,
        };
        if let Some(max_await) = max_await {
            let wait = crate::proto::cursor_timeout::await_max_time(
                Duration::from_millis(max_await),
                ctx.deadline.remaining(ctx.now),
                ctx.min_round_trip_time,
            );
            body.remove_from_body("maxTimeMS")?;
            body.insert(
                "maxTimeMS",
                i64::try_from(wait.as_millis()).unwrap_or(i64::MAX),
            );
        }
    } else if !ctx.omit_max_time && !body.contains_key("maxTimeMS") && sends_max_time(name) {
        let max_time =
            ctx.deadline
                .max_time_ms(ctx.now, ctx.min_round_trip_time, "sending the command")?;
        if let Some(ms) = max_time {
            body.insert("maxTimeMS", ms);
        }
    }
    ctx.deadline.check(ctx.now, "sending the command")
}

/// Commands that get a `maxTimeMS` from `timeoutMS` (CSOT: not getMore,
/// whose time is the cursor's, nor endSessions; a `close`'s killCursors
/// gets the timeout afresh, so it does).
fn sends_max_time(name: &str) -> bool {
    !matches!(name, "getMore" | "endSessions")
}

/// Whether the command carries `writeConcern: {w: 0}` (sent with
/// moreToCome, no reply awaited). A body an operation wrote as bytes
/// (`find`) for a command that takes no write concern has none to look
/// for: the executor adds one only where it is taken, and such bodies hold
/// only the operation's own fields. A caller's `Document` (`run_command`)
/// is looked at whatever its name.
fn write_concern_unacknowledged(command: &CommandDraft, takes: Takes) -> bool {
    if !takes.write_concern && matches!(command.body(), CommandBody::Raw(_)) {
        return false;
    }
    match command.get("writeConcern").as_deref() {
        Some(bson::Bson::Document(wc)) => matches!(
            wc.get("w"),
            Some(bson::Bson::Int32(0)) | Some(bson::Bson::Int64(0))
        ),
        _ => false,
    }
}

/// The command as the monitoring spec shows it: OP_MSG document sequences
/// appear as arrays in the body, as if the command had been sent without
/// them; a sensitive command shows as an empty document (and is not copied).
pub(crate) fn event_copy(
    command: &CommandDraft,
    sequences: &[DocumentSequence],
    sensitive: bool,
) -> Document {
    if sensitive {
        return Document::new();
    }
    let mut copy = command.to_document();
    for sequence in sequences {
        copy.insert(
            sequence.identifier.clone(),
            sequence
                .documents
                .iter()
                .map(|raw| {
                    bson::Bson::Document(crate::proto::encode::raw_to_document(raw.as_bytes()))
                })
                .collect::<Vec<_>>(),
        );
    }
    copy
}

#[cfg(test)]
mod tests;
