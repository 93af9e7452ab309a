//! `findAndModify`: `find_one_and_delete`, `find_one_and_update`,
//! `find_one_and_replace`.

use bson::{doc, Bson, Document};

use super::update::{validate_replacement, UpdateModifications};
use super::{
    append_option, check_write_concern, duration_ms, malformed, Command, Namespace, Operation,
    Retryability, ServerInfo,
};
use crate::error::Result;
use crate::proto::coll_options::{
    FindOneAndDeleteOptions, FindOneAndReplaceOptions, FindOneAndUpdateOptions, Hint,
    ReturnDocument,
};
use crate::proto::concern::WriteConcern;

/// What the command does to the document it finds.
#[derive(Clone, Debug)]
enum Modification {
    Delete,
    Update(Bson),
}

/// The options of the three verbs, merged.
#[derive(Clone, Debug, Default)]
struct Options {
    array_filters: Option<Vec<Document>>,
    bypass_document_validation: Option<bool>,
    max_time: Option<std::time::Duration>,
    projection: Option<Document>,
    return_document: Option<ReturnDocument>,
    sort: Option<Document>,
    upsert: Option<bool>,
    write_concern: Option<WriteConcern>,
    collation: Option<crate::proto::collation::Collation>,
    hint: Option<Hint>,
    let_vars: Option<Document>,
    comment: Option<Bson>,
    raw_data: Option<bool>,
}

/// `findAndModify`: finds one document, deletes, updates or replaces it, and
/// returns it (before or after the change), or `None` when nothing matched.
#[derive(Clone, Debug)]
pub struct FindAndModify {
    ns: Namespace,
    filter: Document,
    modification: Modification,
    options: Options,
}

impl FindAndModify {
    /// `find_one_and_delete`: deletes the first match and returns it.
    pub fn delete(ns: Namespace, filter: Document, options: FindOneAndDeleteOptions) -> Self {
        FindAndModify {
            ns,
            filter,
            modification: Modification::Delete,
            options: Options {
                max_time: options.max_time,
                projection: options.projection,
                sort: options.sort,
                write_concern: options.write_concern,
                collation: options.collation,
                hint: options.hint,
                let_vars: options.let_vars,
                comment: options.comment,
                raw_data: options.raw_data,
                ..Options::default()
            },
        }
    }

    /// `find_one_and_update`. Fails when `update` is a document that is not
    /// made of update operators.
    pub fn update(
        ns: Namespace,
        filter: Document,
        update: impl Into<UpdateModifications>,
        options: FindOneAndUpdateOptions,
    ) -> Result<Self> {
        let update = update.into();
        update.validate()?;
        Ok(FindAndModify {
            ns,
            filter,
            modification: Modification::Update(update.to_bson()),
            options: Options {
                array_filters: options.array_filters,
                bypass_document_validation: options.bypass_document_validation,
                max_time: options.max_time,
                projection: options.projection,
                return_document: options.return_document,
                sort: options.sort,
                upsert: options.upsert,
                write_concern: options.write_concern,
                collation: options.collation,
                hint: options.hint,
                let_vars: options.let_vars,
                comment: options.comment,
                raw_data: options.raw_data,
            },
        })
    }

    /// `find_one_and_replace`. Fails when `replacement` starts with an update operator.
    pub fn replace(
        ns: Namespace,
        filter: Document,
        replacement: Document,
        options: FindOneAndReplaceOptions,
    ) -> Result<Self> {
        validate_replacement(&replacement)?;
        Ok(FindAndModify {
            ns,
            filter,
            modification: Modification::Update(Bson::Document(replacement)),
            options: Options {
                bypass_document_validation: options.bypass_document_validation,
                max_time: options.max_time,
                projection: options.projection,
                return_document: options.return_document,
                sort: options.sort,
                upsert: options.upsert,
                write_concern: options.write_concern,
                collation: options.collation,
                hint: options.hint,
                let_vars: options.let_vars,
                comment: options.comment,
                raw_data: options.raw_data,
                ..Options::default()
            },
        })
    }
}

impl Operation for FindAndModify {
    type Output = Option<Document>;
    const NAME: &'static str = "findAndModify";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let options = &self.options;
        let mut body =
            doc! { "findAndModify": self.ns.coll.to_string(), "query": self.filter.clone() };
        match &self.modification {
            Modification::Delete => {
                body.insert("remove", true);
            }
            Modification::Update(update) => {
                body.insert("update", update.clone());
                if options.return_document == Some(ReturnDocument::After) {
                    body.insert("new", true);
                }
                append_option(&mut body, "upsert", options.upsert);
            }
        }
        append_option(&mut body, "sort", options.sort.clone());
        append_option(&mut body, "fields", options.projection.clone());
        append_option(&mut body, "arrayFilters", options.array_filters.clone());
        append_option(
            &mut body,
            "bypassDocumentValidation",
            options.bypass_document_validation,
        );
        append_option(&mut body, "collation", options.collation.clone());
        append_option(
            &mut body,
            "hint",
            options.hint.as_ref().map(|h| h.to_bson()),
        );
        append_option(&mut body, "maxTimeMS", options.max_time.map(duration_ms));
        append_option(&mut body, "let", options.let_vars.clone());
        append_option(&mut body, "comment", options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(options.raw_data, server)?,
        );
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, mut reply: Document, _server: &ServerInfo) -> Result<Option<Document>> {
        check_write_concern(&reply)?;
        match reply.remove("value") {
            Some(Bson::Document(document)) => Ok(Some(document)),
            Some(Bson::Null) | None => Ok(None),
            Some(other) => Err(malformed(format!("`value` is {other}, not a document"))),
        }
    }

    fn retryability(&self) -> Retryability {
        Retryability::Write
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.options.write_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::ErrorKind;
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn delete_command() {
        let options = FindOneAndDeleteOptions::default()
            .sort(doc! { "x": 1 })
            .projection(doc! { "x": 1, "_id": 0 })
            .max_time(Duration::from_millis(5))
            .comment(Bson::from("c"));
        let mut op = FindAndModify::delete(ns(), doc! { "_id": { "$gt": 1 } }, options);
        assert_eq!(
            op.build(&server()).unwrap().body,
            doc! {
                "findAndModify": "coll", "query": { "_id": { "$gt": 1 } }, "remove": true,
                "sort": { "x": 1 }, "fields": { "x": 1, "_id": 0 }, "maxTimeMS": 5, "comment": "c",
            }
        );
        assert_eq!(op.retryability(), Retryability::Write);
    }

    #[test]
    fn update_returning_the_new_document() {
        let options = FindOneAndUpdateOptions::default()
            .return_document(ReturnDocument::After)
            .upsert(true)
            .array_filters(vec![doc! { "e.a": 1 }])
            .hint(Hint::Name("x_1".into()))
            .let_vars(doc! { "v": 2 });
        let mut op =
            FindAndModify::update(ns(), doc! {}, doc! { "$inc": { "x": 1 } }, options).unwrap();
        assert_eq!(
            op.build(&server()).unwrap().body,
            doc! {
                "findAndModify": "coll", "query": {}, "update": { "$inc": { "x": 1 } }, "new": true,
                "upsert": true, "arrayFilters": [ { "e.a": 1 } ], "hint": "x_1", "let": { "v": 2 },
            }
        );
        let pipeline = vec![doc! { "$set": { "y": 1 } }];
        let mut op =
            FindAndModify::update(ns(), doc! {}, pipeline, FindOneAndUpdateOptions::default())
                .unwrap();
        assert_eq!(
            op.build(&server()).unwrap().body,
            doc! { "findAndModify": "coll", "query": {}, "update": [ { "$set": { "y": 1 } } ] }
        );
    }

    #[test]
    fn replace_and_validation() {
        let options = FindOneAndReplaceOptions::default().return_document(ReturnDocument::Before);
        let mut op =
            FindAndModify::replace(ns(), doc! { "_id": 1 }, doc! { "x": 1 }, options).unwrap();
        assert_eq!(
            op.build(&server()).unwrap().body,
            doc! { "findAndModify": "coll", "query": { "_id": 1 }, "update": { "x": 1 } }
        );
        let error = FindAndModify::replace(
            ns(),
            doc! {},
            doc! { "$set": { "x": 1 } },
            FindOneAndReplaceOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::InvalidArgument { .. }));
        let error = FindAndModify::update(
            ns(),
            doc! {},
            doc! { "x": 1 },
            FindOneAndUpdateOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::InvalidArgument { .. }));
    }

    #[test]
    fn reply_value() {
        let op = FindAndModify::delete(ns(), doc! {}, FindOneAndDeleteOptions::default());
        assert_eq!(
            op.handle_reply(doc! { "value": { "_id": 1 }, "ok": 1 }, &server())
                .unwrap(),
            Some(doc! { "_id": 1 })
        );
        assert_eq!(
            op.handle_reply(doc! { "value": null, "ok": 1 }, &server())
                .unwrap(),
            None
        );
        assert!(op.handle_reply(doc! { "value": 3 }, &server()).is_err());
        let error = op
            .handle_reply(
                doc! { "value": null, "writeConcernError": { "code": 64, "errmsg": "t" } },
                &server(),
            )
            .unwrap_err();
        assert_eq!(error.code(), Some(64));
    }
}
