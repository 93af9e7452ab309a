//! `commitTransaction` and `abortTransaction` as operations.

use bson::Document;

use super::{check_write_concern, Command, Operation, Retryability, ServerInfo};
use crate::error::Result;

/// Ends a transaction: the session layer wrote the body; a retry (they are
/// retryable writes) sends `retry_body` instead, which for a commit carries
/// the majority write concern the transactions spec asks for.
#[derive(Clone, Debug)]
pub struct EndTransaction {
    name: &'static str,
    body: Document,
    retry_body: Document,
    attempts: u32,
}

impl EndTransaction {
    /// A `commitTransaction` with its first and retry bodies.
    pub fn commit(body: Document, retry_body: Document) -> Self {
        EndTransaction {
            name: "commitTransaction",
            body,
            retry_body,
            attempts: 0,
        }
    }

    /// An `abortTransaction`.
    pub fn abort(body: Document) -> Self {
        EndTransaction {
            name: "abortTransaction",
            retry_body: body.clone(),
            body,
            attempts: 0,
        }
    }

    /// Whether this ends the transaction by committing.
    pub fn is_commit(&self) -> bool {
        self.name == "commitTransaction"
    }
}

impl Operation for EndTransaction {
    type Output = Document;
    const NAME: &'static str = "endTransaction";

    fn command_name(&self) -> &str {
        self.name
    }

    fn build(&mut self, _server: &ServerInfo) -> Result<Command> {
        let body = if self.attempts == 0 {
            self.body.clone()
        } else {
            self.retry_body.clone()
        };
        self.attempts += 1;
        Ok(Command::new(self.name, "admin", body))
    }

    /// A `writeConcernError` in an `ok: 1` reply is an error: the commit
    /// may not be durable (the executor labels it and may retry it).
    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<Document> {
        check_write_concern(&reply)?;
        Ok(reply)
    }

    fn retryability(&self) -> Retryability {
        Retryability::Write
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::results::WriteFailure;
    use bson::doc;

    #[test]
    fn a_write_concern_error_in_an_ok_reply_is_an_error_with_its_labels() {
        let commit = EndTransaction::commit(doc! {}, doc! {});
        let server = ServerInfo::default();
        let reply = doc! {
            "ok": 1,
            "writeConcernError": { "code": 91, "codeName": "ShutdownInProgress", "errmsg": "down" },
            "errorLabels": ["RetryableWriteError"],
        };
        let error = commit
            .handle_reply(reply, &server)
            .expect_err("not durable");
        assert!(matches!(
            error.kind(),
            ErrorKind::Write(WriteFailure::WriteConcernError(wce)) if wce.code == 91
        ));
        assert!(error.contains_label("RetryableWriteError"));
        assert!(commit.handle_reply(doc! { "ok": 1 }, &server).is_ok());
    }
}
