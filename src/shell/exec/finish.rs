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
//! own fields, and the unit tests below check it byte for byte.

use std::time::{Duration, Instant};

use bson::Document;

use crate::concern::{attach_concerns, Takes};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::event::command::is_sensitive;
use crate::operation::Command;
use crate::options::{ReadConcern, ServerApi, WriteConcern};
use crate::session::cluster_time::{attach_cluster_time, ClusterTime};
use crate::session::{CommandContext, SessionState};
use crate::wire::{MsgFlags, OpMsg};

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
    /// The time of the attempt.
    pub(crate) now: Instant,
    /// Whether anyone listens for command events (a handler, or the
    /// command log): the event's copy is made only then.
    pub(crate) events_wanted: bool,
}

/// A command ready for the socket.
#[derive(Debug)]
pub(crate) struct Finished {
    /// The message to send.
    pub(crate) msg: OpMsg,
    /// The operation's name for the command (session and retry rules).
    pub(crate) name: &'static str,
    /// The database it runs on.
    pub(crate) target_db: String,
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
        self.msg.flags.has(MsgFlags::MORE_TO_COME)
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
        mut body,
        sequences,
    } = command;
    let takes = Takes::of(name, &body);
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
            session.decorate(&mut body, &context, ctx.now)?;
        }
        None => {
            let level = ctx.read_concern.map(|rc| rc.level.as_str());
            attach_concerns(&mut body, takes, level, ctx.write_concern, None);
            attach_cluster_time(&mut body, ctx.cluster_time, ctx.max_wire_version);
        }
    }
    attach_routing(&mut body, ctx);
    attach_max_time(&mut body, name, ctx)?;
    body.insert("$db", target_db.clone());

    Ok(seal(name, target_db, body, sequences, ctx.events_wanted))
}

/// The message, the name events use, redaction, and the event's copy.
fn seal(
    name: &'static str,
    target_db: String,
    body: Document,
    sequences: Vec<crate::wire::DocumentSequence>,
    events_wanted: bool,
) -> Finished {
    // Events name the command by the body's first key, as the spec says:
    // `Command::name` is "runCommand" for a caller's command, and
    // sensitivity must be judged on the real name.
    // Borrowed when it is the operation's own name (the usual case): no
    // allocation per operation for a name only events read.
    let event_name = match body.keys().next() {
        Some(first) if first != name => std::borrow::Cow::Owned(first.clone()),
        _ => std::borrow::Cow::Borrowed(name),
    };
    let sensitive = is_sensitive(&event_name, &body);
    let flags = if write_concern_unacknowledged(&body) {
        MsgFlags::MORE_TO_COME
    } else {
        MsgFlags::default()
    };
    let msg = OpMsg {
        flags,
        body,
        sequences,
    };
    let event_command = events_wanted.then(|| event_copy(&msg, sensitive));
    Finished {
        msg,
        name,
        target_db,
        event_name,
        sensitive,
        event_command,
    }
}

/// `$readPreference` (unless the command has one) and the Stable API.
fn attach_routing(body: &mut Document, ctx: &AttemptContext<'_>) {
    if let Some(rp) = &ctx.read_preference {
        if !body.contains_key("$readPreference") {
            body.insert("$readPreference", rp.clone());
        }
    }
    if let Some(api) = ctx.server_api {
        body.insert("apiVersion", api.version.clone());
        if let Some(strict) = api.strict {
            body.insert("apiStrict", strict);
        }
        if let Some(errors) = api.deprecation_errors {
            body.insert("apiDeprecationErrors", errors);
        }
    }
}

/// CSOT: `maxTimeMS` is the time left less the server's minimum round trip
/// (not on a cursor's follow-ups, which carry their own), and nothing is
/// sent once the deadline has passed.
fn attach_max_time(body: &mut Document, name: &str, ctx: &AttemptContext<'_>) -> Result<()> {
    if !ctx.deadline.is_set() {
        return Ok(());
    }
    if !body.contains_key("maxTimeMS") && sends_max_time(name) {
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
/// killCursors or endSessions).
fn sends_max_time(name: &str) -> bool {
    !matches!(name, "getMore" | "killCursors" | "endSessions")
}

fn write_concern_unacknowledged(body: &Document) -> bool {
    body.get_document("writeConcern")
        .ok()
        .and_then(|wc| match wc.get("w") {
            Some(bson::Bson::Int32(0)) => Some(true),
            Some(bson::Bson::Int64(0)) => Some(true),
            _ => None,
        })
        .unwrap_or(false)
}

/// The command as the monitoring spec shows it: OP_MSG document sequences
/// appear as arrays in the body, as if the command had been sent without
/// them; a sensitive command shows as an empty document (and is not copied).
pub(crate) fn event_copy(msg: &OpMsg, sensitive: bool) -> Document {
    if sensitive {
        return Document::new();
    }
    let mut command = msg.body.clone();
    for sequence in &msg.sequences {
        command.insert(
            sequence.identifier.clone(),
            sequence
                .documents
                .iter()
                .map(|raw| bson::Bson::Document(crate::encode::raw_to_document(raw)))
                .collect::<Vec<_>>(),
        );
    }
    command
}

#[cfg(test)]
#[path = "finish_tests.rs"]
mod tests;
