//! `Database::run_cursor_command`: a caller's cursor-opening command, sent
//! as given, whose reply becomes a cursor (the run-command spec's
//! `RunCursorCommand`).

use bson::Document;

use super::cursor::CursorOptions;
use super::{Command, CursorSpec, Operation, RetryRules, RunCommand, ServerInfo};
use crate::error::{Error, Result};
use crate::proto::coll_options::{CursorType, RunCursorCommandOptions};
use crate::proto::reply::Reply;
use crate::proto::select::Criteria;

/// A command the caller wrote that opens a cursor (`find`, `aggregate`,
/// `listCollections`, `checkMetadataConsistency`...). Like
/// [`RunCommand`] it is sent unchanged and never retried; its options
/// only shape the `getMore`s.
#[derive(Clone, Debug)]
pub struct RunCursorCommand {
    command: RunCommand,
    cursor: CursorOptions,
    /// Kept for CSOT's cursor rules (tailable cursors default to the
    /// iteration mode; `cursorLifetime` is refused for them).
    cursor_type: CursorType,
}

impl RunCursorCommand {
    /// `command` on database `db`; refuses an empty or too deeply nested
    /// command as [`RunCommand::new`] does.
    pub fn new(
        db: impl Into<String>,
        command: Document,
        options: RunCursorCommandOptions,
    ) -> Result<Self> {
        let cursor_type = options.cursor_type.unwrap_or_default();
        let cursor = CursorOptions {
            batch_size: options.batch_size.filter(|size| *size > 0),
            comment: options.comment,
            // The spec: `maxTimeMS` configures the getMores, whatever the
            // cursor type (the command carries its own).
            max_await_time: options.max_time,
            tailable: cursor_type != CursorType::NonTailable,
            ..CursorOptions::default()
        };
        Ok(RunCursorCommand {
            command: RunCommand::new(db, command, options.selection_criteria.map(Criteria::from))?,
            cursor,
            cursor_type,
        })
    }
}

impl Operation for RunCursorCommand {
    type Output = Box<CursorSpec>;
    const NAME: &'static str = "runCommand";
    const RETRY_RULES: RetryRules = RetryRules::RunCommand;

    fn command_name(&self) -> &str {
        self.command.command_name()
    }

    fn cursor_request(&self) -> crate::proto::cursor_timeout::CursorRequest {
        crate::proto::cursor_timeout::CursorRequest {
            cursor_type: self.cursor_type,
            max_await: self.cursor.max_await_time,
            ..Default::default()
        }
    }

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        self.command.build(server)
    }

    fn handle_reply(&self, reply: Document, server: &ServerInfo) -> Result<Box<CursorSpec>> {
        self.handle_reply_raw(Reply::from_document(reply), server)
    }

    fn handle_reply_raw(&self, reply: Reply, _server: &ServerInfo) -> Result<Box<CursorSpec>> {
        if reply.raw_cursor().is_none() && reply.field("cursor").is_none() {
            // The command ran, but it is not one that opens a cursor: the
            // caller's mistake, named as such rather than as a bad reply.
            return Err(Error::invalid_argument(format!(
                "run_cursor_command: the reply to `{}` has no `cursor`; the command must open \
                 one (find, aggregate, listCollections...), else use run_command",
                self.command.command_name()
            )));
        }
        CursorSpec::from_raw_reply(reply, self.cursor.clone())
    }

    fn selection_criteria(&self) -> Option<Criteria> {
        self.command.selection_criteria()
    }

    fn reads(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::find::cursor_reply;
    use crate::proto::operation::test_support::server;
    use std::time::Duration;

    #[test]
    fn the_command_goes_as_given_and_the_options_shape_the_get_mores() {
        let options = RunCursorCommandOptions::default()
            .batch_size(5)
            .max_time(Duration::from_millis(300))
            .comment(bson::Bson::String("more".into()));
        let command = bson::doc! { "find": "c", "batchSize": 1, "comment": "first" };
        let mut op = RunCursorCommand::new("db", command.clone(), options).unwrap();
        let built = op.build(&server()).unwrap();
        assert_eq!(built.body, command);
        assert_eq!(op.command_name(), "find");
        let reply = cursor_reply(42, "db.c", vec![bson::doc! { "_id": 1 }]);
        let spec = op.handle_reply(reply, &server()).unwrap();
        let get_more = spec.get_more().unwrap();
        assert_eq!(get_more.batch_size, Some(5));
        assert_eq!(get_more.max_time, Some(Duration::from_millis(300)));
        assert_eq!(get_more.comment, Some(bson::Bson::String("more".into())));
    }

    #[test]
    fn a_reply_without_a_cursor_is_the_callers_error() {
        let mut op = RunCursorCommand::new(
            "db",
            bson::doc! { "ping": 1 },
            RunCursorCommandOptions::default(),
        )
        .unwrap();
        op.build(&server()).unwrap();
        let error = op
            .handle_reply(bson::doc! { "ok": 1.0 }, &server())
            .unwrap_err();
        assert!(
            error.to_string().contains("`ping` has no `cursor`"),
            "{error}"
        );
    }
}
