//! `create`: a collection or a view.

use bson::{doc, Document};

use super::{append_option, check_write_concern, Command, Operation, ServerInfo};
use crate::error::Result;
use crate::proto::coll_options::CreateCollectionOptions;
use crate::proto::concern::WriteConcern;

/// `create_collection`.
#[derive(Clone, Debug)]
pub struct CreateCollection {
    db: String,
    name: String,
    options: CreateCollectionOptions,
}

impl CreateCollection {
    /// Creates collection `name` in database `db`.
    pub fn new(
        db: impl Into<String>,
        name: impl Into<String>,
        options: CreateCollectionOptions,
    ) -> Self {
        CreateCollection {
            db: db.into(),
            name: name.into(),
            options,
        }
    }
}

impl Operation for CreateCollection {
    type Output = ();
    const NAME: &'static str = "create";

    fn build(&mut self, _server: &ServerInfo) -> Result<Command> {
        let o = &self.options;
        let mut body = doc! { "create": self.name.clone() };
        o.append_to(&mut body);
        append_option(&mut body, "comment", o.comment.clone());
        Ok(Command::new(Self::NAME, self.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<()> {
        check_write_concern(&reply)
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.options.write_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::test_support::server;

    #[test]
    fn capped_collection_and_view() {
        let options = CreateCollectionOptions::default()
            .capped(true)
            .size(4096)
            .max(10);
        let mut create = CreateCollection::new("db", "c", options);
        let command = create.build(&server()).unwrap();
        assert_eq!(&*command.target_db, "db");
        assert_eq!(
            command.body,
            doc! { "create": "c", "capped": true, "size": 4096_i64, "max": 10_i64 }
        );
        let options = CreateCollectionOptions::default()
            .view_on("coll0".to_string())
            .pipeline(vec![doc! { "$match": { "_id": { "$gt": 1 } } }]);
        let mut view = CreateCollection::new("db", "v", options);
        assert_eq!(
            view.build(&server()).unwrap().body,
            doc! { "create": "v", "viewOn": "coll0", "pipeline": [ { "$match": { "_id": { "$gt": 1 } } } ] }
        );
    }
}
