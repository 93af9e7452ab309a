//! `listCollections`: the collections and views of a database.

use bson::{doc, Document};

use super::cursor::CursorOptions;
use super::{append_option, Command, CursorSpec, Operation, RetryRules, Retryability, ServerInfo};
use crate::error::Result;
use crate::proto::coll_options::ListCollectionsOptions;
use crate::proto::reply::Reply;

/// `list_collections` (and `list_collection_names`, with `name_only`):
/// returns a cursor over the collection specifications.
#[derive(Clone, Debug)]
pub struct ListCollections {
    db: String,
    options: ListCollectionsOptions,
}

impl ListCollections {
    /// Lists the collections of `db`.
    pub fn new(db: impl Into<String>, options: ListCollectionsOptions) -> Self {
        ListCollections {
            db: db.into(),
            options,
        }
    }
}

impl Operation for ListCollections {
    type Output = Box<CursorSpec>;
    const NAME: &'static str = "listCollections";
    const RETRY_RULES: RetryRules = RetryRules::ReadOnly;

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let o = &self.options;
        let mut body = doc! { "listCollections": 1 };
        append_option(&mut body, "filter", o.filter.clone());
        append_option(&mut body, "nameOnly", o.name_only);
        append_option(&mut body, "authorizedCollections", o.authorized_collections);
        let mut cursor = Document::new();
        append_option(&mut cursor, "batchSize", o.batch_size.map(i64::from));
        body.insert("cursor", cursor);
        append_option(&mut body, "comment", o.comment.clone());
        append_option(&mut body, "rawData", super::raw_data(o.raw_data, server)?);
        Ok(Command::new(Self::NAME, self.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, server: &ServerInfo) -> Result<Box<CursorSpec>> {
        self.handle_reply_raw(Reply::from_document(reply), server)
    }

    fn handle_reply_raw(&self, reply: Reply, _server: &ServerInfo) -> Result<Box<CursorSpec>> {
        let options = CursorOptions {
            batch_size: self.options.batch_size.filter(|size| *size > 0),
            comment: self.options.comment.clone(),
            ..CursorOptions::default()
        };
        CursorSpec::from_raw_reply(reply, options)
    }

    fn retryability(&self) -> Retryability {
        Retryability::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::find::cursor_reply;
    use crate::proto::operation::test_support::server;

    #[test]
    fn names_only_with_filter() {
        let options = ListCollectionsOptions::default()
            .filter(doc! { "name": { "$regex": "^a" } })
            .name_only(true)
            .batch_size(10);
        let mut list = ListCollections::new("db", options);
        let command = list.build(&server()).unwrap();
        assert_eq!(&*command.target_db, "db");
        assert_eq!(
            command.body,
            doc! { "listCollections": 1, "filter": { "name": { "$regex": "^a" } }, "nameOnly": true, "cursor": { "batchSize": 10_i64 } }
        );
        let spec = list
            .handle_reply(
                cursor_reply(
                    0,
                    "db.$cmd.listCollections",
                    vec![doc! { "name": "a", "type": "collection" }],
                ),
                &server(),
            )
            .unwrap();
        assert_eq!(spec.batch.len(), 1);
        assert_eq!(list.retryability(), Retryability::Read);
    }
}
