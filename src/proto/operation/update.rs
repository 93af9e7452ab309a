//! `update` of one statement: `update_one`, `update_many`, `replace_one`.

use bson::{doc, Bson, Document};

use super::{
    append_option, check_single_write, first_key_is_operator, malformed, reply_count, Command,
    Namespace, Operation, Retryability, ServerInfo,
};
use crate::error::{Error, Result};
use crate::proto::coll_options::{Hint, ReplaceOptions, UpdateOptions};
use crate::proto::concern::WriteConcern;
use crate::proto::reply::Reply;
use crate::proto::results::UpdateResult;
use crate::proto::wire::DocumentSequence;
pub use crate::proto::write_model::UpdateModifications;

/// Refuses a replacement whose first key is an operator (it would be an update).
pub(crate) fn validate_replacement(replacement: &Document) -> Result<()> {
    if first_key_is_operator(replacement) {
        return Err(Error::invalid_argument(format!(
            "replacement document must not contain update operators (keys starting with '$'), got {replacement}; use an update operation instead"
        )));
    }
    Ok(())
}

/// The parts of one `updates` statement beyond `q` and `u`.
#[derive(Clone, Debug, Default)]
pub(crate) struct UpdateStatementOptions {
    pub multi: bool,
    pub upsert: Option<bool>,
    pub array_filters: Option<Vec<Document>>,
    pub collation: Option<crate::proto::collation::Collation>,
    pub hint: Option<Hint>,
    pub sort: Option<Document>,
}

/// The `updates` element of a replacement (replace_one, or a bulk
/// ReplaceOne), after checking the replacement has no update operators.
pub(crate) fn replacement_statement(
    filter: Document,
    replacement: Document,
    upsert: Option<bool>,
    collation: Option<crate::proto::collation::Collation>,
    hint: Option<Hint>,
    sort: Option<Document>,
) -> Result<Document> {
    validate_replacement(&replacement)?;
    Ok(update_statement(
        filter,
        Bson::Document(replacement),
        UpdateStatementOptions {
            multi: false,
            upsert,
            array_filters: None,
            collation,
            hint,
            sort,
        },
    ))
}

/// One element of an update command's `updates`.
pub(crate) fn update_statement(
    filter: Document,
    update: Bson,
    options: UpdateStatementOptions,
) -> Document {
    let mut statement = doc! { "q": filter, "u": update };
    append_option(&mut statement, "upsert", options.upsert);
    if options.multi {
        statement.insert("multi", true);
    }
    append_option(&mut statement, "arrayFilters", options.array_filters);
    append_option(&mut statement, "collation", options.collation);
    append_option(&mut statement, "hint", options.hint.map(|h| h.to_bson()));
    append_option(&mut statement, "sort", options.sort);
    statement
}

/// The counts of an update reply.
pub(crate) struct UpdateCounts {
    /// `n`: matched plus upserted.
    pub n: u64,
    /// `nModified`.
    pub modified: u64,
    /// `upserted`: batch index and `_id` of each upserted document.
    pub upserted: Vec<(usize, Bson)>,
}

/// Reads `n`, `nModified` and `upserted` of an update reply.
pub(crate) fn parse_update_reply(reply: &Document) -> Result<UpdateCounts> {
    let n = reply_count(reply, "n")?.unwrap_or(0);
    let modified = reply_count(reply, "nModified")?.unwrap_or(0);
    let upserted = match reply.get("upserted") {
        None => Vec::new(),
        Some(Bson::Array(entries)) => entries
            .iter()
            .map(|entry| {
                let entry = entry
                    .as_document()
                    .ok_or_else(|| malformed("an `upserted` entry is not a document"))?;
                let index = entry
                    .get("index")
                    .and_then(super::bson_to_u64)
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| malformed("an `upserted` entry has no valid `index`"))?;
                let id = entry
                    .get("_id")
                    .cloned()
                    .ok_or_else(|| malformed("an `upserted` entry has no `_id`"))?;
                Ok((index, id))
            })
            .collect::<Result<Vec<_>>>()?,
        Some(other) => return Err(malformed(format!("`upserted` is {other}"))),
    };
    Ok(UpdateCounts {
        n,
        modified,
        upserted,
    })
}

/// The top-level command fields shared by single and batched updates.
#[derive(Clone, Debug, Default)]
struct UpdateCommandOptions {
    bypass_document_validation: Option<bool>,
    let_vars: Option<Document>,
    comment: Option<Bson>,
    write_concern: Option<WriteConcern>,
    raw_data: Option<bool>,
}

/// `update_one`, `update_many` or `replace_one`.
#[derive(Clone, Debug)]
pub struct Update {
    ns: Namespace,
    statement: Document,
    multi: bool,
    options: UpdateCommandOptions,
}

impl Update {
    /// Updates the first document of `ns` matching `filter` (or the first in
    /// `sort` order). Fails when `update` is a document that is not made of
    /// update operators.
    pub fn update_one(
        ns: Namespace,
        filter: Document,
        update: impl Into<UpdateModifications>,
        options: UpdateOptions,
    ) -> Result<Self> {
        Update::new(ns, filter, update.into(), false, options)
    }

    /// Updates every document of `ns` matching `filter`.
    pub fn update_many(
        ns: Namespace,
        filter: Document,
        update: impl Into<UpdateModifications>,
        options: UpdateOptions,
    ) -> Result<Self> {
        if options.sort.is_some() {
            return Err(Error::invalid_argument("update_many does not take a sort"));
        }
        Update::new(ns, filter, update.into(), true, options)
    }

    fn new(
        ns: Namespace,
        filter: Document,
        update: UpdateModifications,
        multi: bool,
        options: UpdateOptions,
    ) -> Result<Self> {
        update.validate()?;
        let statement = update_statement(
            filter,
            update.to_bson(),
            UpdateStatementOptions {
                multi,
                upsert: options.upsert,
                array_filters: options.array_filters,
                collation: options.collation,
                hint: options.hint,
                sort: options.sort,
            },
        );
        Ok(Update {
            ns,
            statement,
            multi,
            options: UpdateCommandOptions {
                bypass_document_validation: options.bypass_document_validation,
                let_vars: options.let_vars,
                comment: options.comment,
                write_concern: options.write_concern,
                raw_data: options.raw_data,
            },
        })
    }

    /// Replaces the first document of `ns` matching `filter` by
    /// `replacement`. Fails when `replacement` starts with an update operator.
    pub fn replace_one(
        ns: Namespace,
        filter: Document,
        replacement: Document,
        options: ReplaceOptions,
    ) -> Result<Self> {
        let statement = replacement_statement(
            filter,
            replacement,
            options.upsert,
            options.collation,
            options.hint,
            options.sort,
        )?;
        Ok(Update {
            ns,
            statement,
            multi: false,
            options: UpdateCommandOptions {
                bypass_document_validation: options.bypass_document_validation,
                let_vars: options.let_vars,
                comment: options.comment,
                write_concern: options.write_concern,
                raw_data: options.raw_data,
            },
        })
    }
}

impl Operation for Update {
    type Output = UpdateResult;
    const NAME: &'static str = "update";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let mut body = doc! { "update": self.ns.coll.to_string(), "ordered": true };
        append_option(
            &mut body,
            "bypassDocumentValidation",
            self.options.bypass_document_validation,
        );
        append_option(&mut body, "let", self.options.let_vars.clone());
        append_option(&mut body, "comment", self.options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.options.raw_data, server)?,
        );
        let mut command = Command::new(Self::NAME, self.ns.db.clone(), body);
        command.sequences.push(DocumentSequence {
            identifier: "updates".into(),
            documents: vec![std::sync::Arc::new(crate::proto::encode::document_to_raw(
                &self.statement,
                "updates",
            )?)],
        });
        Ok(command)
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<UpdateResult> {
        check_single_write(&reply)?;
        let UpdateCounts {
            n,
            modified,
            upserted,
        } = parse_update_reply(&reply)?;
        let upserted_id = upserted.into_iter().next().map(|(_, id)| id);
        let matched = if upserted_id.is_some() {
            n.saturating_sub(1)
        } else {
            n
        };
        Ok(UpdateResult {
            matched_count: matched,
            modified_count: modified,
            upserted_id,
            acknowledged: true,
        })
    }

    fn handle_reply_raw(&self, reply: Reply, server: &ServerInfo) -> Result<UpdateResult> {
        if reply.is_unacknowledged() {
            return Ok(UpdateResult::unacknowledged());
        }
        self.handle_reply(reply.into_document()?, server)
    }

    fn retryability(&self) -> Retryability {
        if self.multi {
            Retryability::None
        } else {
            Retryability::Write
        }
    }

    fn write_concern(&self) -> Option<&WriteConcern> {
        self.options.write_concern.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::proto::operation::test_support::{ns, server};

    fn statement(update: &mut Update) -> (Document, Document) {
        let command = update.build(&server()).unwrap();
        assert_eq!(command.sequences.len(), 1);
        assert_eq!(command.sequences[0].identifier, "updates");
        let statement = crate::proto::operation::test_support::sent(&command).remove(0);
        (command.body.to_document().unwrap(), statement)
    }

    #[test]
    fn update_one_with_every_option() {
        let options = UpdateOptions::default()
            .upsert(true)
            .array_filters(vec![doc! { "i.x": 1 }])
            .collation(crate::options::Collation::builder().locale("en").build())
            .hint(Hint::Name("x_1".into()))
            .sort(doc! { "x": -1 })
            .bypass_document_validation(false)
            .let_vars(doc! { "v": 1 })
            .comment(Bson::from("c"));
        let mut update = Update::update_one(
            ns(),
            doc! { "_id": 1 },
            doc! { "$set": { "x": 1 } },
            options,
        )
        .unwrap();
        let (body, statement) = statement(&mut update);
        assert_eq!(
            body,
            doc! { "update": "coll", "ordered": true, "bypassDocumentValidation": false, "let": { "v": 1 }, "comment": "c" }
        );
        assert_eq!(
            statement,
            doc! {
                "q": { "_id": 1 }, "u": { "$set": { "x": 1 } }, "upsert": true,
                "arrayFilters": [ { "i.x": 1 } ], "collation": { "locale": "en" }, "hint": "x_1", "sort": { "x": -1 },
            }
        );
        assert_eq!(update.retryability(), Retryability::Write);
    }

    #[test]
    fn update_many_is_multi_and_not_retryable() {
        let pipeline = vec![doc! { "$set": { "y": "$x" } }];
        let mut update =
            Update::update_many(ns(), doc! {}, pipeline, UpdateOptions::default()).unwrap();
        let (_, statement) = statement(&mut update);
        assert_eq!(
            statement,
            doc! { "q": {}, "u": [ { "$set": { "y": "$x" } } ], "multi": true }
        );
        assert_eq!(update.retryability(), Retryability::None);
        let sorted = Update::update_many(
            ns(),
            doc! {},
            doc! { "$set": { "a": 1 } },
            UpdateOptions::default().sort(doc! { "a": 1 }),
        );
        assert!(sorted.is_err());
    }

    #[test]
    fn update_documents_need_operators() {
        for bad in [
            doc! { "x": 22 },
            doc! {},
            doc! { "x": 1, "$set": { "y": 1 } },
        ] {
            let error = Update::update_one(ns(), doc! {}, bad.clone(), UpdateOptions::default())
                .unwrap_err();
            assert!(
                matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
                "{bad}"
            );
            assert!(error.to_string().contains("update"), "{error}");
        }
    }

    #[test]
    fn replacements_must_not_have_operators() {
        let error = Update::replace_one(
            ns(),
            doc! {},
            doc! { "$set": { "x": 1 } },
            ReplaceOptions::default(),
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("replacement document must not contain update operators"),
            "{error}"
        );
        let mut replace = Update::replace_one(
            ns(),
            doc! { "_id": 1 },
            doc! { "x": 1 },
            ReplaceOptions::default().upsert(false),
        )
        .unwrap();
        let (_, statement) = statement(&mut replace);
        assert_eq!(
            statement,
            doc! { "q": { "_id": 1 }, "u": { "x": 1 }, "upsert": false }
        );
        // A field name starting with '$' further down is the server's business (dots and dollars).
        assert!(Update::replace_one(
            ns(),
            doc! {},
            doc! { "a": 1, "$b": 2 },
            ReplaceOptions::default()
        )
        .is_ok());
    }

    #[test]
    fn reply_counts_and_upsert() {
        let update = Update::update_one(
            ns(),
            doc! {},
            doc! { "$set": { "x": 1 } },
            UpdateOptions::default(),
        )
        .unwrap();
        let result = update
            .handle_reply(doc! { "n": 1, "nModified": 1, "ok": 1 }, &server())
            .unwrap();
        assert_eq!(
            result,
            UpdateResult {
                matched_count: 1,
                modified_count: 1,
                upserted_id: None,
                acknowledged: true,
            }
        );
        let result = update
            .handle_reply(
                doc! { "n": 1, "nModified": 0, "upserted": [ { "index": 0, "_id": 7 } ], "ok": 1 },
                &server(),
            )
            .unwrap();
        assert_eq!(
            result,
            UpdateResult {
                matched_count: 0,
                modified_count: 0,
                upserted_id: Some(Bson::Int32(7)),
                acknowledged: true,
            }
        );
        assert!(update
            .handle_reply(doc! { "n": 1, "upserted": [ { "index": 0 } ] }, &server())
            .is_err());
        assert!(update.handle_reply(doc! { "n": "1" }, &server()).is_err());
    }
}
