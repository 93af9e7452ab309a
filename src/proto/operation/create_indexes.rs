//! `createIndexes`.

use bson::{doc, Bson, Document};

use super::{
    append_option, check_write_concern, duration_ms, Command, Namespace, Operation, ServerInfo,
};
use crate::error::{Error, Result};
use crate::proto::coll_options::{CreateIndexOptions, IndexModel};
use crate::proto::concern::WriteConcern;

/// The wire version of MongoDB 4.4, the first to accept `commitQuorum`.
const WIRE_VERSION_4_4: i32 = 9;

/// `create_index` / `create_indexes`: returns the names of the indexes.
#[derive(Clone, Debug)]
pub struct CreateIndexes {
    ns: Namespace,
    indexes: Vec<IndexModel>,
    options: CreateIndexOptions,
}

impl CreateIndexes {
    /// Creates `indexes` on `ns`; at least one is needed.
    pub fn new(
        ns: Namespace,
        indexes: Vec<IndexModel>,
        options: CreateIndexOptions,
    ) -> Result<Self> {
        if indexes.is_empty() {
            return Err(Error::invalid_argument(
                "create_indexes needs at least one index",
            ));
        }
        if let Some(index) = indexes.iter().position(|i| i.keys.is_empty()) {
            return Err(Error::invalid_argument(format!(
                "index {index} has an empty key pattern"
            )));
        }
        Ok(CreateIndexes {
            ns,
            indexes,
            options,
        })
    }

    /// The names the indexes are created with.
    pub fn names(&self) -> Vec<String> {
        self.indexes.iter().map(IndexModel::name).collect()
    }
}

impl Operation for CreateIndexes {
    type Output = Vec<String>;
    const NAME: &'static str = "createIndexes";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        if self.options.commit_quorum.is_some() && server.max_wire_version < WIRE_VERSION_4_4 {
            return Err(Error::invalid_argument(
                "commitQuorum needs MongoDB 4.4 or later",
            ));
        }
        let indexes: Vec<Bson> = self
            .indexes
            .iter()
            .map(|index| {
                let mut spec = doc! { "key": index.keys.clone(), "name": index.name() };
                if let Some(options) = &index.options {
                    for (key, value) in &options.to_document() {
                        if key != "name" && key != "key" {
                            spec.insert(key.clone(), value.clone());
                        }
                    }
                }
                Bson::Document(spec)
            })
            .collect();
        let mut body = doc! { "createIndexes": self.ns.coll.to_string(), "indexes": indexes };
        append_option(
            &mut body,
            "commitQuorum",
            self.options.commit_quorum.clone(),
        );
        append_option(
            &mut body,
            "maxTimeMS",
            self.options.max_time.map(duration_ms),
        );
        append_option(&mut body, "comment", self.options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.options.raw_data, server)?,
        );
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<Vec<String>> {
        check_write_concern(&reply)?;
        Ok(self.names())
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.options.write_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::coll_options::CommitQuorum;
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn names_are_generated_and_options_merged() {
        let indexes = vec![
            IndexModel::new(doc! { "x": 1, "y": -1 }),
            IndexModel::new(doc! { "t": "text" })
                .options(doc! { "unique": true, "name": "my_text" }),
        ];
        let options = CreateIndexOptions::default().commit_quorum(CommitQuorum::Majority);
        let mut create = CreateIndexes::new(ns(), indexes, options).unwrap();
        assert_eq!(
            create.build(&server()).unwrap().body,
            doc! {
                "createIndexes": "coll",
                "indexes": [
                    { "key": { "x": 1, "y": -1 }, "name": "x_1_y_-1" },
                    { "key": { "t": "text" }, "name": "my_text", "unique": true },
                ],
                "commitQuorum": "majority",
            }
        );
        assert_eq!(
            create.handle_reply(doc! { "ok": 1 }, &server()).unwrap(),
            vec!["x_1_y_-1", "my_text"]
        );
        let old = ServerInfo {
            max_wire_version: 8,
            ..server()
        };
        assert!(create.build(&old).is_err());
    }

    #[test]
    fn empty_requests_are_refused() {
        assert!(CreateIndexes::new(ns(), vec![], CreateIndexOptions::default()).is_err());
        assert!(CreateIndexes::new(
            ns(),
            vec![IndexModel::new(doc! {})],
            CreateIndexOptions::default()
        )
        .is_err());
    }
}
