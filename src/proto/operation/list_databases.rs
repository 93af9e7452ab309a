//! `listDatabases`: the databases of the deployment.

use bson::{doc, Bson, Document};

use super::{
    append_option, bson_to_u64, malformed, Command, Operation, RetryRules, Retryability, ServerInfo,
};
use crate::error::Result;
use crate::proto::coll_options::ListDatabasesOptions;
use crate::proto::results::DatabaseSpecification;

/// `list_databases` (and `list_database_names`, with `name_only`). Runs on `admin`.
#[derive(Clone, Debug)]
pub struct ListDatabases {
    options: ListDatabasesOptions,
}

impl ListDatabases {
    /// Lists the databases.
    pub fn new(options: ListDatabasesOptions) -> Self {
        ListDatabases { options }
    }
}

impl Operation for ListDatabases {
    type Output = Vec<DatabaseSpecification>;
    const NAME: &'static str = "listDatabases";
    const RETRY_RULES: RetryRules = RetryRules::ReadOnly;

    fn build(&mut self, _server: &ServerInfo) -> Result<Command> {
        let o = &self.options;
        let mut body = doc! { "listDatabases": 1 };
        append_option(&mut body, "filter", o.filter.clone());
        append_option(&mut body, "nameOnly", o.name_only);
        append_option(&mut body, "authorizedDatabases", o.authorized_databases);
        append_option(&mut body, "comment", o.comment.clone());
        Ok(Command::new(Self::NAME, "admin", body))
    }

    fn handle_reply(
        &self,
        mut reply: Document,
        _server: &ServerInfo,
    ) -> Result<Vec<DatabaseSpecification>> {
        let databases = match reply.remove("databases") {
            Some(Bson::Array(databases)) => databases,
            Some(other) => return Err(malformed(format!("`databases` is {other}, not an array"))),
            None => return Err(malformed("the listDatabases reply has no `databases`")),
        };
        databases
            .into_iter()
            .map(|entry| {
                let Bson::Document(entry) = entry else {
                    return Err(malformed("a `databases` entry is not a document"));
                };
                let name = entry
                    .get_str("name")
                    .map_err(|_| malformed("a `databases` entry has no string `name`"))?
                    .to_string();
                Ok(DatabaseSpecification {
                    name,
                    size_on_disk: entry
                        .get("sizeOnDisk")
                        .and_then(bson_to_u64)
                        .unwrap_or_default(),
                    empty: entry.get_bool("empty").unwrap_or_default(),
                    shards: entry.get_document("shards").ok().cloned(),
                })
            })
            .collect()
    }

    fn retryability(&self) -> Retryability {
        Retryability::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::test_support::server;

    #[test]
    fn command_and_reply() {
        let mut list = ListDatabases::new(
            ListDatabasesOptions::default()
                .name_only(true)
                .filter(doc! { "name": "a" }),
        );
        let command = list.build(&server()).unwrap();
        assert_eq!(&*command.target_db, "admin");
        assert_eq!(
            command.body,
            doc! { "listDatabases": 1, "filter": { "name": "a" }, "nameOnly": true }
        );
        let reply = doc! { "databases": [ { "name": "a", "sizeOnDisk": 8192.0, "empty": false }, { "name": "b" } ], "totalSize": 1, "ok": 1 };
        let databases = list.handle_reply(reply, &server()).unwrap();
        assert_eq!(
            databases,
            vec![
                DatabaseSpecification {
                    name: "a".into(),
                    size_on_disk: 8192,
                    empty: false,
                    shards: None
                },
                DatabaseSpecification {
                    name: "b".into(),
                    size_on_disk: 0,
                    empty: false,
                    shards: None
                },
            ]
        );
        assert!(list
            .handle_reply(doc! { "databases": [ { "name": 1 } ] }, &server())
            .is_err());
        assert!(list
            .handle_reply(doc! { "databases": 1 }, &server())
            .is_err());
        assert!(list.handle_reply(doc! { "ok": 1 }, &server()).is_err());
    }
}
