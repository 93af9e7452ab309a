//! `commitTransaction` and `abortTransaction` as operations.

use bson::Document;

use super::{check_write_concern, Command, Operation, RetryRules, Retryability, ServerInfo};
use crate::error::Result;

/// Ends a transaction: the session layer wrote the body; a retry (they are
/// retryable writes) sends `retry_body` instead, which for a commit carries
/// the majority write concern the transactions spec asks for.
#[derive(Clone, Debug)]
pub struct EndTransaction {
    name: &'static str,
    body: Document,
    retry_body: Document,
    /// A retry after an error other than overload: send `retry_body`.
    upgraded: bool,
}

impl EndTransaction {
    /// A `commitTransaction` with its first and retry bodies.
    pub fn commit(body: Document, retry_body: Document) -> Self {
        EndTransaction {
            name: "commitTransaction",
            body,
            retry_body,
            upgraded: false,
        }
    }

    /// An `abortTransaction`.
    pub fn abort(body: Document) -> Self {
        EndTransaction {
            name: "abortTransaction",
            retry_body: body.clone(),
            body,
            upgraded: false,
        }
    }
}

impl Operation for EndTransaction {
    type Output = Document;
    const NAME: &'static str = "endTransaction";
    const RETRY_RULES: RetryRules = RetryRules::EndTransaction;

    fn command_name(&self) -> &str {
        self.name
    }

    fn build(&mut self, _server: &ServerInfo) -> Result<Command> {
        let body = if self.upgraded {
            self.retry_body.clone()
        } else {
            self.body.clone()
        };
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

    /// The transactions spec's majority write concern is for retries after
    /// a commit error; an overload retry resends the command as it was
    /// (client backpressure spec).
    fn before_retry(&mut self, overload: bool) {
        if !overload {
            self.upgraded = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::proto::results::WriteFailure;
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

    #[test]
    fn a_commit_is_upgraded_to_majority_only_after_an_error_other_than_overload() {
        let server = ServerInfo::default();
        let mut commit =
            EndTransaction::commit(doc! { "commitTransaction": 1 }, doc! { "retry": 1 });
        assert_eq!(
            commit.build(&server).unwrap().body,
            doc! { "commitTransaction": 1 }
        );
        commit.before_retry(true);
        assert_eq!(
            commit.build(&server).unwrap().body,
            doc! { "commitTransaction": 1 }
        );
        commit.before_retry(false);
        assert_eq!(commit.build(&server).unwrap().body, doc! { "retry": 1 });
    }
}
