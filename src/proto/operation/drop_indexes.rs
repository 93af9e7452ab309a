//! `dropIndexes`.

use bson::{doc, Bson, Document};

use super::{
    append_option, check_write_concern, duration_ms, Command, Namespace, Operation, ServerInfo,
};
use crate::error::{Error, Result};
use crate::proto::coll_options::DropIndexOptions;
use crate::proto::concern::WriteConcern;

/// `drop_index` (one, by name or key pattern) or `drop_indexes` (all but `_id`).
#[derive(Clone, Debug)]
pub struct DropIndexes {
    ns: Namespace,
    index: Bson,
    options: DropIndexOptions,
}

impl DropIndexes {
    /// Drops the index named `name`. `"*"` is refused: it would drop every
    /// index, which is [`DropIndexes::all`]'s job.
    pub fn by_name(
        ns: Namespace,
        name: impl Into<String>,
        options: DropIndexOptions,
    ) -> Result<Self> {
        let name = name.into();
        if name == "*" {
            return Err(Error::invalid_argument(
                "drop_index(\"*\") would drop every index; use drop_indexes",
            ));
        }
        Ok(DropIndexes {
            ns,
            index: Bson::String(name),
            options,
        })
    }

    /// Drops the index with key pattern `keys`.
    #[cfg(test)]
    pub fn by_keys(ns: Namespace, keys: Document, options: DropIndexOptions) -> Self {
        DropIndexes {
            ns,
            index: Bson::Document(keys),
            options,
        }
    }

    /// Drops every index except `_id`'s.
    pub fn all(ns: Namespace, options: DropIndexOptions) -> Self {
        DropIndexes {
            ns,
            index: Bson::String("*".into()),
            options,
        }
    }
}

impl Operation for DropIndexes {
    type Output = ();
    const NAME: &'static str = "dropIndexes";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let mut body =
            doc! { "dropIndexes": self.ns.coll.to_string(), "index": self.index.clone() };
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
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn one_or_all() {
        let mut one = DropIndexes::by_name(ns(), "x_1", DropIndexOptions::default()).unwrap();
        assert_eq!(
            one.build(&server()).unwrap().body,
            doc! { "dropIndexes": "coll", "index": "x_1" }
        );
        let mut all = DropIndexes::all(ns(), DropIndexOptions::default());
        assert_eq!(
            all.build(&server()).unwrap().body,
            doc! { "dropIndexes": "coll", "index": "*" }
        );
        let mut keys = DropIndexes::by_keys(ns(), doc! { "x": 1 }, DropIndexOptions::default());
        assert_eq!(
            keys.build(&server()).unwrap().body,
            doc! { "dropIndexes": "coll", "index": { "x": 1 } }
        );
        assert!(DropIndexes::by_name(ns(), "*", DropIndexOptions::default()).is_err());
    }
}
