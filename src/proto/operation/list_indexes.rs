//! `listIndexes`.

use bson::{doc, Document};

use super::cursor::CursorOptions;
use super::{
    append_option, Command, CursorSpec, Namespace, Operation, RetryRules, Retryability, ServerInfo,
};
use crate::error::Result;
use crate::proto::coll_options::ListIndexesOptions;
use crate::proto::reply::Reply;

/// `list_indexes`: a cursor over the index specifications of a collection.
#[derive(Clone, Debug)]
pub struct ListIndexes {
    ns: Namespace,
    options: ListIndexesOptions,
}

impl ListIndexes {
    /// Lists the indexes of `ns`.
    pub fn new(ns: Namespace, options: ListIndexesOptions) -> Self {
        ListIndexes { ns, options }
    }
}

impl Operation for ListIndexes {
    type Output = Box<CursorSpec>;
    const NAME: &'static str = "listIndexes";
    const RETRY_RULES: RetryRules = RetryRules::ReadOnly;

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let mut body = doc! { "listIndexes": self.ns.coll.to_string() };
        let mut cursor = Document::new();
        append_option(
            &mut cursor,
            "batchSize",
            self.options.batch_size.map(i64::from),
        );
        body.insert("cursor", cursor);
        append_option(&mut body, "comment", self.options.comment.clone());
        append_option(
            &mut body,
            "maxTimeMS",
            self.options.max_time.map(super::duration_ms),
        );
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.options.raw_data, server)?,
        );
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
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
        CursorSpec::from_raw_reply_on(reply, options, &self.ns)
    }

    fn retryability(&self) -> Retryability {
        Retryability::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn command_shape() {
        let mut list = ListIndexes::new(ns(), ListIndexesOptions::default().batch_size(1));
        assert_eq!(
            list.build(&server()).unwrap().body,
            doc! { "listIndexes": "coll", "cursor": { "batchSize": 1_i64 } }
        );
    }

    #[test]
    fn max_time_is_the_commands_max_time_ms() {
        let options = ListIndexesOptions::default().max_time(std::time::Duration::from_millis(750));
        let mut list = ListIndexes::new(ns(), options);
        assert_eq!(
            list.build(&server()).unwrap().body,
            doc! { "listIndexes": "coll", "cursor": {}, "maxTimeMS": 750 }
        );
    }
}
