//! `killCursors`: closes server cursors a caller stopped reading.

use bson::{doc, Document};

use super::{Command, Namespace, Operation, RetryRules, ServerInfo};
use crate::error::Result;

/// Closes the cursors `ids` of namespace `ns`. The reply (which cursors were
/// killed, not found or still alive) is ignored, as the spec allows.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct KillCursors {
    /// The cursors' namespace.
    pub ns: Namespace,
    /// The cursor ids.
    pub ids: Vec<i64>,
}

impl KillCursors {
    /// Kills `ids` in `ns`.
    pub fn new(ns: Namespace, ids: Vec<i64>) -> Self {
        KillCursors { ns, ids }
    }
}

impl Operation for KillCursors {
    type Output = ();
    const NAME: &'static str = "killCursors";
    const RETRY_RULES: RetryRules = RetryRules::ReadOnly;

    fn build(&mut self, _server: &ServerInfo) -> Result<Command> {
        let body = doc! { "killCursors": self.ns.coll.to_string(), "cursors": self.ids.clone() };
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, _reply: Document, _server: &ServerInfo) -> Result<()> {
        Ok(())
    }
}
