//! `drop`: removes a collection; a missing one is not an error.

use bson::{doc, Document};

use super::{
    append_option, check_write_concern, Command, Namespace, Operation, ServerInfo,
    NAMESPACE_NOT_FOUND,
};
use crate::error::{Error, ErrorKind, Result};
use crate::proto::coll_options::DropCollectionOptions;
use crate::proto::concern::WriteConcern;

/// `drop` of a collection. `NamespaceNotFound` (the collection did not exist)
/// counts as success, as the CRUD spec asks.
#[derive(Clone, Debug)]
pub struct DropCollection {
    ns: Namespace,
    options: DropCollectionOptions,
}

impl DropCollection {
    /// Drops `ns`.
    pub fn new(ns: Namespace, options: DropCollectionOptions) -> Self {
        DropCollection { ns, options }
    }
}

impl Operation for DropCollection {
    type Output = ();
    const NAME: &'static str = "drop";

    fn build(&mut self, _server: &ServerInfo) -> Result<Command> {
        let mut body = doc! { "drop": self.ns.coll.to_string() };
        append_option(&mut body, "comment", self.options.comment.clone());
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<()> {
        check_write_concern(&reply)
    }

    fn handle_error(&self, error: Error) -> Result<()> {
        match error.kind() {
            ErrorKind::Command(command) if command.code == NAMESPACE_NOT_FOUND => Ok(()),
            _ => Err(error),
        }
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.options.write_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CommandError;
    use crate::proto::operation::test_support::{ns, server};

    fn command_error(code: i32) -> Error {
        Error::from(CommandError {
            base_backoff: None,
            raw_response: None,
            code,
            code_name: String::new(),
            message: "m".into(),
            topology_version: None,
            address: None,
        })
    }

    #[test]
    fn missing_collection_is_fine_other_errors_are_not() {
        let mut drop = DropCollection::new(ns(), DropCollectionOptions::default());
        assert_eq!(drop.build(&server()).unwrap().body, doc! { "drop": "coll" });
        assert!(drop.handle_error(command_error(26)).is_ok());
        assert_eq!(
            drop.handle_error(command_error(13)).unwrap_err().code(),
            Some(13)
        );
    }
}
