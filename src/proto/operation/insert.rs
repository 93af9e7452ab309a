//! `insert` of one document (`insert_one`); many documents go through
//! [`super::InsertMany`], which splits them into batches.

use std::sync::Arc;

use bson::oid::ObjectId;
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{
    append_option, check_single_write, Command, Namespace, Operation, Retryability, ServerInfo,
};
use crate::error::{Error, Result};
use crate::proto::coll_options::InsertOneOptions;
use crate::proto::concern::WriteConcern;
use crate::proto::reply::Reply;
use crate::proto::results::InsertOneResult;
use crate::proto::wire::DocumentSequence;

/// Gives `document` an `_id` (a new ObjectId, first) when it has none, and
/// returns the `_id`. An explicit `_id`, even `null`, is kept. The ObjectId
/// comes from `new_id` (the client's is [`crate::new_object_id`], which
/// forked processes do not share).
pub(crate) fn ensure_id(document: &mut Document, new_id: &mut dyn FnMut() -> ObjectId) -> Bson {
    if let Some(id) = document.get("_id") {
        return id.clone();
    }
    let id = Bson::ObjectId(new_id());
    let mut with_id = Document::new();
    with_id.insert("_id", id.clone());
    with_id.extend(std::mem::take(document));
    *document = with_id;
    id
}

/// The error for a document the server would refuse for its size.
#[cold]
pub(crate) fn too_large(index: usize, size: usize, max: usize) -> Error {
    Error::invalid_argument(format!(
        "document at index {index} is {size} bytes, more than the server's maxBsonObjectSize of {max} bytes"
    ))
}

/// `insert_one`.
#[derive(Clone, Debug)]
pub struct Insert {
    ns: Namespace,
    /// Shared with each attempt's command rather than copied into it.
    document: Arc<RawDocumentBuf>,
    inserted_id: Bson,
    options: InsertOneOptions,
}

impl Insert {
    /// Inserts `document` (BSON bytes) into `ns`, taking an `_id` from
    /// `new_id` when it has none; fails when the bytes are not valid BSON.
    pub fn one(
        ns: Namespace,
        mut document: RawDocumentBuf,
        options: InsertOneOptions,
        new_id: &mut dyn FnMut() -> ObjectId,
    ) -> Result<Self> {
        let inserted_id = crate::proto::encode::ensure_raw_id(&mut document, new_id)?;
        Ok(Insert {
            ns,
            document: Arc::new(document),
            inserted_id,
            options,
        })
    }

    /// Inserts `document`, whose `_id` the caller made and gives as `id`,
    /// without copying it: the caller keeps its share and, once the insert
    /// is done with it, can take the bytes back (GridFS's upload reuses
    /// one chunk buffer for a whole file).
    pub fn shared(ns: Namespace, document: Arc<RawDocumentBuf>, id: Bson) -> Self {
        Insert {
            ns,
            document,
            inserted_id: id,
            options: InsertOneOptions::default(),
        }
    }

    /// The `_id` the document is inserted with.
    #[cfg(test)]
    pub fn inserted_id(&self) -> &Bson {
        &self.inserted_id
    }
}

impl Operation for Insert {
    type Output = InsertOneResult;
    const NAME: &'static str = "insert";

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let size = self.document.as_bytes().len();
        if size > server.max_document_bytes() {
            return Err(too_large(0, size, server.max_document_bytes()));
        }
        let mut body = doc! { "insert": self.ns.coll.to_string(), "ordered": true };
        append_option(
            &mut body,
            "bypassDocumentValidation",
            self.options.bypass_document_validation,
        );
        append_option(&mut body, "comment", self.options.comment.clone());
        append_option(
            &mut body,
            "rawData",
            super::raw_data(self.options.raw_data, server)?,
        );
        let mut command = Command::new(Self::NAME, self.ns.db.clone(), body);
        command.sequences.push(DocumentSequence {
            identifier: "documents".into(),
            documents: vec![Arc::clone(&self.document)],
        });
        Ok(command)
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<InsertOneResult> {
        check_single_write(&reply)?;
        Ok(InsertOneResult {
            inserted_id: self.inserted_id.clone(),
            acknowledged: true,
        })
    }

    fn handle_reply_raw(&self, reply: Reply, server: &ServerInfo) -> Result<InsertOneResult> {
        if reply.is_unacknowledged() {
            return Ok(InsertOneResult {
                inserted_id: self.inserted_id.clone(),
                acknowledged: false,
            });
        }
        self.handle_reply(reply.into_document()?, server)
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
    use super::*;
    use crate::error::ErrorKind;
    use crate::proto::object_id::tests::sequential_ids;
    use crate::proto::operation::test_support::{ns, server, small_server};
    use crate::proto::results::{WriteError, WriteFailure};

    fn raw(document: Document) -> RawDocumentBuf {
        RawDocumentBuf::from_document(&document).unwrap()
    }

    #[test]
    fn raw_data_is_sent_to_8_2_and_refused_before() {
        let options = InsertOneOptions::default().raw_data(true);
        let mut insert =
            Insert::one(ns(), raw(doc! { "_id": 1 }), options, &mut sequential_ids()).unwrap();
        let error = insert.build(&server()).unwrap_err();
        assert!(
            error.to_string().contains("rawData needs MongoDB 8.2"),
            "{error}"
        );
        let eight_two = ServerInfo {
            max_wire_version: 27,
            ..server()
        };
        let command = insert.build(&eight_two).unwrap();
        assert_eq!(
            command.body,
            doc! { "insert": "coll", "ordered": true, "rawData": true }
        );
    }

    #[test]
    fn id_is_generated_first_and_returned() {
        let mut insert = Insert::one(
            ns(),
            raw(doc! { "x": 1 }),
            InsertOneOptions::default(),
            &mut sequential_ids(),
        )
        .unwrap();
        let command = insert.build(&server()).unwrap();
        assert_eq!(command.body, doc! { "insert": "coll", "ordered": true });
        let sent = &command.sequences[0];
        assert_eq!(sent.identifier, "documents");
        let id = insert.inserted_id().clone();
        assert!(matches!(id, Bson::ObjectId(_)));
        assert_eq!(
            sent.documents,
            vec![Arc::new(raw(doc! { "_id": id.clone(), "x": 1 }))]
        );
        let result = insert
            .handle_reply(doc! { "n": 1, "ok": 1 }, &server())
            .unwrap();
        assert_eq!(result.inserted_id, id);
    }

    #[test]
    fn explicit_and_null_ids_are_kept() {
        let insert = Insert::one(
            ns(),
            raw(doc! { "x": 1, "_id": 5 }),
            InsertOneOptions::default(),
            &mut sequential_ids(),
        )
        .unwrap();
        assert_eq!(insert.inserted_id(), &Bson::Int32(5));
        let insert = Insert::one(
            ns(),
            raw(doc! { "_id": null }),
            InsertOneOptions::default(),
            &mut sequential_ids(),
        )
        .unwrap();
        assert_eq!(insert.inserted_id(), &Bson::Null);
    }

    #[test]
    fn options_are_sent() {
        let options = InsertOneOptions::default()
            .bypass_document_validation(true)
            .comment(Bson::from("c"));
        let mut insert =
            Insert::one(ns(), raw(doc! { "_id": 1 }), options, &mut sequential_ids()).unwrap();
        assert_eq!(
            insert.build(&server()).unwrap().body,
            doc! { "insert": "coll", "ordered": true, "bypassDocumentValidation": true, "comment": "c" }
        );
        assert_eq!(insert.retryability(), Retryability::Write);
    }

    #[test]
    fn oversized_document_is_refused_with_its_size() {
        let mut insert = Insert::one(
            ns(),
            raw(doc! { "_id": 1, "s": "x".repeat(100) }),
            InsertOneOptions::default(),
            &mut sequential_ids(),
        )
        .unwrap();
        let error = insert.build(&small_server(10, 1_000_000, 64)).unwrap_err();
        assert!(matches!(error.kind(), ErrorKind::InvalidArgument { .. }));
        assert_eq!(
            error.to_string(),
            "invalid argument: document at index 0 is 122 bytes, more than the server's maxBsonObjectSize of 64 bytes"
        );
    }

    #[test]
    fn duplicate_key_is_a_write_error() {
        let insert = Insert::one(
            ns(),
            raw(doc! { "_id": 1 }),
            InsertOneOptions::default(),
            &mut sequential_ids(),
        )
        .unwrap();
        let reply = doc! { "n": 0, "ok": 1, "writeErrors": [ { "index": 0, "code": 11000, "codeName": "DuplicateKey", "errmsg": "E11000" } ] };
        let error = insert.handle_reply(reply, &server()).unwrap_err();
        match error.kind() {
            ErrorKind::Write(WriteFailure::WriteError(WriteError {
                index: 0,
                code: 11000,
                code_name,
                ..
            })) => {
                assert_eq!(code_name.as_deref(), Some("DuplicateKey"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
