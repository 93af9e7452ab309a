//! `distinct`: the distinct values of a field.

use bson::{doc, Bson, Document};

use super::{
    append_option, duration_ms, malformed, Command, Namespace, Operation, Retryability, ServerInfo,
};
use crate::error::Result;
use crate::proto::coll_options::DistinctOptions;
use crate::proto::concern::ReadConcern;
use crate::proto::select::Criteria;

/// `distinct`: the values `field_name` takes in the documents matching `filter`.
#[derive(Clone, Debug)]
pub struct Distinct {
    ns: Namespace,
    field_name: String,
    filter: Document,
    options: DistinctOptions,
}

impl Distinct {
    /// The distinct values of `field_name` in `ns` among the documents matching `filter`.
    pub fn new(
        ns: Namespace,
        field_name: impl Into<String>,
        filter: Document,
        options: DistinctOptions,
    ) -> Self {
        Distinct {
            ns,
            field_name: field_name.into(),
            filter,
            options,
        }
    }
}

impl Operation for Distinct {
    type Output = Vec<Bson>;
    const NAME: &'static str = "distinct";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let options = &self.options;
        let mut body = doc! {
            "distinct": self.ns.coll.to_string(),
            "key": self.field_name.clone(),
            "query": self.filter.clone(),
        };
        append_option(&mut body, "collation", options.collation.clone());
        append_option(&mut body, "comment", options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(options.raw_data, server)?,
        );
        append_option(
            &mut body,
            "hint",
            options.hint.as_ref().map(|h| h.to_bson()),
        );
        append_option(&mut body, "maxTimeMS", options.max_time.map(duration_ms));
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, mut reply: Document, _server: &ServerInfo) -> Result<Vec<Bson>> {
        match reply.remove("values") {
            Some(Bson::Array(values)) => Ok(values),
            Some(other) => Err(malformed(format!("`values` is {other}, not an array"))),
            None => Err(malformed("the distinct reply has no `values`")),
        }
    }

    fn selection_criteria(&self) -> Option<Criteria> {
        self.options.selection_criteria.as_ref().map(Criteria::from)
    }

    fn retryability(&self) -> Retryability {
        Retryability::Read
    }

    fn read_concern(&self) -> Option<&ReadConcern> {
        self.options.read_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn command_and_reply() {
        let options = DistinctOptions::default()
            .collation(crate::options::Collation::builder().locale("en").build())
            .comment(Bson::from("c"));
        let mut distinct = Distinct::new(ns(), "x", doc! { "_id": { "$gt": 1 } }, options);
        assert_eq!(
            distinct.build(&server()).unwrap().body,
            doc! { "distinct": "coll", "key": "x", "query": { "_id": { "$gt": 1 } }, "collation": { "locale": "en" }, "comment": "c" }
        );
        let values = distinct
            .handle_reply(doc! { "values": [1, "a"], "ok": 1 }, &server())
            .unwrap();
        assert_eq!(values, vec![Bson::Int32(1), Bson::from("a")]);
        assert!(distinct
            .handle_reply(doc! { "values": 1 }, &server())
            .is_err());
        assert!(distinct.handle_reply(doc! { "ok": 1 }, &server()).is_err());
    }
}
