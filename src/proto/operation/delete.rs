//! `delete` of one statement: `delete_one`, `delete_many`.

use bson::{doc, Bson, Document};

use super::{
    append_option, check_single_write, reply_count, Command, Namespace, Operation, Retryability,
    ServerInfo,
};
use crate::error::Result;
use crate::proto::coll_options::{DeleteOptions, Hint};
use crate::proto::concern::WriteConcern;
use crate::proto::reply::Reply;
use crate::proto::results::DeleteResult;
use crate::proto::wire::DocumentSequence;

/// One element of a delete command's `deletes`: `limit` 1 deletes one
/// document, 0 all matching ones.
pub(crate) fn delete_statement(
    filter: Document,
    many: bool,
    collation: Option<crate::proto::collation::Collation>,
    hint: Option<Hint>,
) -> Document {
    let mut statement = doc! { "q": filter, "limit": if many { 0 } else { 1 } };
    append_option(&mut statement, "collation", collation);
    append_option(&mut statement, "hint", hint.map(|h| h.to_bson()));
    statement
}

/// `delete_one` or `delete_many`.
#[derive(Clone, Debug)]
pub struct Delete {
    ns: Namespace,
    statement: Document,
    many: bool,
    let_vars: Option<Document>,
    comment: Option<Bson>,
    write_concern: Option<WriteConcern>,
    raw_data: Option<bool>,
}

impl Delete {
    /// Deletes the first document of `ns` matching `filter`.
    pub fn delete_one(ns: Namespace, filter: Document, options: DeleteOptions) -> Self {
        Delete::new(ns, filter, false, options)
    }

    /// Deletes every document of `ns` matching `filter`.
    pub fn delete_many(ns: Namespace, filter: Document, options: DeleteOptions) -> Self {
        Delete::new(ns, filter, true, options)
    }

    fn new(ns: Namespace, filter: Document, many: bool, options: DeleteOptions) -> Self {
        Delete {
            ns,
            statement: delete_statement(filter, many, options.collation, options.hint),
            many,
            let_vars: options.let_vars,
            comment: options.comment,
            write_concern: options.write_concern,
            raw_data: options.raw_data,
        }
    }
}

impl Operation for Delete {
    type Output = DeleteResult;
    const NAME: &'static str = "delete";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let mut body = doc! { "delete": self.ns.coll.to_string(), "ordered": true };
        append_option(&mut body, "let", self.let_vars.clone());
        append_option(&mut body, "comment", self.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.raw_data, server)?,
        );
        let mut command = Command::new(Self::NAME, self.ns.db.clone(), body);
        command.sequences.push(DocumentSequence {
            identifier: "deletes".into(),
            documents: vec![std::sync::Arc::new(crate::proto::encode::document_to_raw(
                &self.statement,
                "deletes",
            )?)],
        });
        Ok(command)
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<DeleteResult> {
        check_single_write(&reply)?;
        Ok(DeleteResult {
            deleted_count: reply_count(&reply, "n")?.unwrap_or(0),
            acknowledged: true,
        })
    }

    fn handle_reply_raw(&self, reply: Reply, server: &ServerInfo) -> Result<DeleteResult> {
        if reply.is_unacknowledged() {
            return Ok(DeleteResult::unacknowledged());
        }
        self.handle_reply(reply.into_document()?, server)
    }

    fn retryability(&self) -> Retryability {
        if self.many {
            Retryability::None
        } else {
            Retryability::Write
        }
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.write_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn delete_one_and_many() {
        let options = DeleteOptions::default()
            .collation(crate::options::Collation::builder().locale("en").build())
            .hint(Hint::Keys(doc! { "x": 1 }))
            .let_vars(doc! { "v": 1 })
            .comment(Bson::from("c"));
        let mut one = Delete::delete_one(ns(), doc! { "x": 1 }, options);
        let command = one.build(&server()).unwrap();
        assert_eq!(
            command.body,
            doc! { "delete": "coll", "ordered": true, "let": { "v": 1 }, "comment": "c" }
        );
        assert_eq!(command.sequences[0].identifier, "deletes");
        assert_eq!(
            crate::proto::operation::test_support::sent(&command),
            vec![
                doc! { "q": { "x": 1 }, "limit": 1, "collation": { "locale": "en" }, "hint": { "x": 1 } }
            ]
        );
        assert_eq!(one.retryability(), Retryability::Write);
        let mut many = Delete::delete_many(ns(), doc! {}, DeleteOptions::default());
        let command = many.build(&server()).unwrap();
        assert_eq!(
            crate::proto::operation::test_support::sent(&command),
            vec![doc! { "q": {}, "limit": 0 }]
        );
        assert_eq!(many.retryability(), Retryability::None);
        let result = many
            .handle_reply(doc! { "n": 3, "ok": 1 }, &server())
            .unwrap();
        assert_eq!(result.deleted_count, 3);
    }
}
