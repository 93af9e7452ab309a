//! `Database::run_command`: a caller's command, sent as given.

use bson::Document;

use super::{Command, Operation, RetryRules, ServerInfo};
use crate::error::{Error, Result};
use crate::proto::select::Criteria;

/// A command the caller wrote. The executor still adds the session,
/// `$clusterTime`, `$readPreference` and `$db`; nothing else is changed,
/// and it is never retried except on server overload.
#[derive(Clone, Debug)]
pub struct RunCommand {
    db: String,
    command: Document,
    /// `None`: the primary, or inside a transaction the transaction's
    /// read preference (runCommand is a read there, as the transactions
    /// spec says).
    criteria: Option<Criteria>,
}

impl RunCommand {
    /// `command` on database `db`, on a server chosen by `criteria` (the
    /// primary, or the transaction's read preference, when `None`).
    pub fn new(
        db: impl Into<String>,
        command: Document,
        criteria: Option<Criteria>,
    ) -> Result<Self> {
        if command.is_empty() {
            return Err(Error::invalid_argument("the command document is empty"));
        }
        // Refused before anything clones or serialises it (both recurse
        // once per level), and taken apart without recursing either.
        if let Err(error) = crate::proto::nesting::check_depth(&command, "the command") {
            crate::proto::nesting::drop_without_recursion(command);
            return Err(error);
        }
        Ok(RunCommand {
            db: db.into(),
            command,
            criteria,
        })
    }
}

impl Operation for RunCommand {
    type Output = Document;
    const NAME: &'static str = "runCommand";
    const RETRY_RULES: RetryRules = RetryRules::RunCommand;

    fn command_name(&self) -> &str {
        self.command
            .keys()
            .next()
            .map_or(Self::NAME, String::as_str)
    }

    fn build(&mut self, _server: &ServerInfo) -> Result<Command> {
        let name = self.command.keys().next().cloned().unwrap_or_default();
        let mut command = Command::new("runCommand", self.db.clone(), self.command.clone());
        command.name = command_name(&name);
        Ok(command)
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<Document> {
        Ok(reply)
    }

    fn selection_criteria(&self) -> Option<Criteria> {
        self.criteria.clone()
    }

    fn reads(&self) -> bool {
        true
    }
}

/// Events and logs name the command the caller sent; `Command::name` is a
/// `&'static str`, so the common names map to themselves and the rest to
/// "runCommand".
fn command_name(name: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "ping",
        "hello",
        "isMaster",
        "ismaster",
        "buildInfo",
        "serverStatus",
        "find",
        "insert",
        "update",
        "delete",
        "aggregate",
        "count",
        "distinct",
        "findAndModify",
        "getMore",
        "killCursors",
        "create",
        "drop",
        "dropDatabase",
        "listCollections",
        "listDatabases",
        "listIndexes",
        "createIndexes",
        "dropIndexes",
        "configureFailPoint",
        "commitTransaction",
        "abortTransaction",
        "endSessions",
        "createUser",
        "dropUser",
        "saslStart",
        "saslContinue",
        "currentOp",
        "killOp",
        "collMod",
        "renameCollection",
        "explain",
        "getLastError",
    ];
    KNOWN
        .iter()
        .find(|k| **k == name)
        .copied()
        .unwrap_or("runCommand")
}
