//! The pure state of a server cursor: where it lives, the documents received
//! and not yet handed out, and what the next `getMore` must ask for.
//!
//! ```text
//! find/aggregate/list* reply ──CursorSpec::from_raw_reply──> CursorSpec { id, ns, batch }
//!      pop_front::<T>() until the batch is empty; then, while !is_exhausted():
//!      get_more() ──executor──> reply ──next_batch(reply)──> batch refilled
//!      dropped early with id != 0: kill_cursors() ──executor──>
//! ```
//!
//! The batch stays in the reply's bytes ([`RawBatch`]): each document is
//! deserialized into the caller's type once, when it is handed out.
//!
//! Replies are untrusted: every field is type-checked and a malformed reply
//! is a protocol error, never a panic.

use std::time::Duration;

use bson::{Bson, Document};
use serde::de::DeserializeOwned;

use super::{malformed, GetMore, KillCursors, Namespace};
use crate::error::Result;
use crate::proto::address::ServerAddress;
use crate::proto::reply::{CursorHeadView, RawBatch, Reply};

/// What the operation that opened a cursor decided about its `getMore`s.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct CursorOptions {
    /// The `batchSize` of each `getMore` (none: the server's default).
    pub batch_size: Option<u32>,
    /// The total number of documents the cursor may return (a positive
    /// `limit`); `getMore`s never ask for more than what remains.
    pub limit: Option<u64>,
    /// The `comment`, repeated on `getMore`s (4.4+ servers).
    pub comment: Option<Bson>,
    /// The `maxTimeMS` of `getMore`s: for tailable-await cursors, and as
    /// `run_cursor_command`'s options set it.
    pub max_await_time: Option<Duration>,
    /// Whether the cursor is tailable: an empty batch does not end it.
    pub tailable: bool,
}

/// A server cursor's state.
///
/// It is made boxed, and the cursor-opening operations return the box: it is some 400 bytes,
/// and it passes by value from the reply through the executor to the
/// cursor, each move otherwise a copy through the stack.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CursorSpec {
    /// The namespace the cursor iterates (as the server last reported it).
    pub ns: Namespace,
    /// The cursor id; 0 once the server has closed it.
    pub id: i64,
    /// Documents received and not yet handed out, as BSON bytes.
    pub batch: RawBatch,
    /// The `getMore` settings.
    pub options: CursorOptions,
    /// The server the cursor lives on; set by the executor, which must send
    /// every `getMore` and `killCursors` there.
    pub address: Option<ServerAddress>,
    /// `postBatchResumeToken` of the last batch (change streams).
    pub post_batch_resume_token: Option<Document>,
    /// Documents received so far, counted against the limit.
    pub received: u64,
}

impl CursorSpec {
    /// The cursor described by the reply to a cursor-opening command
    /// (`cursor: { id, ns, firstBatch }`).
    pub fn from_reply(reply: Document, options: CursorOptions) -> Result<Box<Self>> {
        Self::from_raw_reply(Reply::from_document(reply), options)
    }

    /// [`Self::from_reply`] for a reply whose batch may still be bytes.
    pub fn from_raw_reply(reply: Reply, options: CursorOptions) -> Result<Box<Self>> {
        Self::opened(reply, options, None)
    }

    /// [`Self::from_raw_reply`] for a command on `requested`: when the
    /// reply names that namespace, as it does unless a view or a rename
    /// intervened, the cursor shares it instead of parsing its own copy.
    pub fn from_raw_reply_on(
        reply: Reply,
        options: CursorOptions,
        requested: &Namespace,
    ) -> Result<Box<Self>> {
        Self::opened(reply, options, Some(requested))
    }

    fn opened(
        reply: Reply,
        options: CursorOptions,
        requested: Option<&Namespace>,
    ) -> Result<Box<Self>> {
        let parsed = parse_cursor(reply, "firstBatch", requested)?;
        let mut spec = Box::new(CursorSpec {
            ns: parsed.ns,
            id: parsed.id,
            batch: RawBatch::default(),
            options,
            address: None,
            post_batch_resume_token: parsed.post_batch_resume_token,
            received: 0,
        });
        spec.take_documents(parsed.documents);
        Ok(spec)
    }

    /// Records the reply to a `getMore` (`cursor: { id, ns, nextBatch }`):
    /// the new id and namespace, and the documents appended to the batch.
    pub fn next_batch(&mut self, reply: Reply) -> Result<()> {
        let parsed = parse_cursor(reply, "nextBatch", Some(&self.ns))?;
        if self.id != 0 && parsed.id != 0 && parsed.id != self.id {
            return Err(malformed(format!(
                "getMore on cursor {} answered for cursor {}",
                self.id, parsed.id
            )));
        }
        self.id = parsed.id;
        self.ns = parsed.ns;
        if parsed.post_batch_resume_token.is_some() {
            self.post_batch_resume_token = parsed.post_batch_resume_token;
        }
        self.take_documents(parsed.documents);
        Ok(())
    }

    fn take_documents(&mut self, documents: RawBatch) {
        self.received = self.received.saturating_add(documents.len() as u64);
        self.batch.append(documents);
    }

    /// The next document of the current batch, deserialized as `T` from its
    /// bytes: a protocol error when they are not valid BSON, an
    /// invalid-argument error when they do not fit `T`.
    pub fn pop_front<T: DeserializeOwned + 'static>(&mut self) -> Option<Result<T>> {
        self.batch.pop_front()
    }

    /// Whether the server has closed the cursor (id 0).
    pub fn is_exhausted(&self) -> bool {
        self.id == 0
    }

    /// Whether the cursor has returned as many documents as its limit allows.
    pub fn limit_reached(&self) -> bool {
        self.options
            .limit
            .is_some_and(|limit| self.received >= limit)
    }

    /// Whether a `getMore` could produce more documents: the server cursor is
    /// open and the limit (if any) is not reached.
    pub fn has_more(&self) -> bool {
        !self.is_exhausted() && !self.limit_reached()
    }

    /// The `getMore` to send when the batch is empty, or `None` when the
    /// cursor is done (then [`Self::kill_cursors`] closes a cursor still open
    /// because the limit was reached).
    pub fn get_more(&self) -> Option<GetMore> {
        if !self.has_more() {
            return None;
        }
        let remaining = self
            .options
            .limit
            .map(|limit| limit.saturating_sub(self.received));
        let batch_size = match (self.options.batch_size, remaining) {
            (Some(size), Some(remaining)) => Some(u64::from(size).min(remaining)),
            (Some(size), None) => Some(u64::from(size)),
            (None, remaining) => remaining,
        }
        .map(|size| u32::try_from(size).unwrap_or(u32::MAX));
        let mut get_more = GetMore::new(self.ns.clone(), self.id);
        get_more.batch_size = batch_size.filter(|size| *size > 0);
        get_more.max_time = self.options.max_await_time;
        get_more.comment = self.options.comment.clone();
        Some(get_more)
    }

    /// The `killCursors` that closes the server cursor, when it is still open.
    pub fn kill_cursors(&self) -> Option<KillCursors> {
        (self.id != 0).then(|| KillCursors::new(self.ns.clone(), vec![self.id]))
    }
}

struct ParsedCursor {
    id: i64,
    ns: Namespace,
    documents: RawBatch,
    post_batch_resume_token: Option<Document>,
}

/// `known`: a namespace the reply's `cursor.ns` is likely to name, shared
/// when it does.
fn parse_cursor(
    mut reply: Reply,
    batch_key: &str,
    known: Option<&Namespace>,
) -> Result<ParsedCursor> {
    let raw = reply
        .cursor_head()
        .map(|head| read_raw_cursor(head, batch_key, known));
    match raw {
        Some(Some(fields)) => {
            let (id, ns, post_batch_resume_token) = fields?;
            return Ok(ParsedCursor {
                id,
                ns,
                documents: reply.into_batch_of(batch_key).unwrap_or_default(),
                post_batch_resume_token,
            });
        }
        // The bytes hold another batch than asked for: read it as a whole.
        Some(None) => reply = Reply::from_document(reply.into_document()?),
        None => {}
    }
    let raw_batch = reply.take_batch_of(batch_key);
    let (mut reply, _) = reply.into_parts();
    let mut cursor = match reply.remove("cursor") {
        Some(Bson::Document(cursor)) => cursor,
        Some(other) => return Err(malformed(format!("`cursor` is {}", type_name(&other)))),
        None => return Err(malformed("no `cursor` field")),
    };
    let id = match cursor.get("id") {
        Some(Bson::Int64(id)) => *id,
        Some(Bson::Int32(id)) => i64::from(*id),
        Some(other) => {
            return Err(malformed(format!(
                "`cursor.id` is {}, not an integer",
                type_name(other)
            )))
        }
        None => return Err(malformed("no `cursor.id`")),
    };
    let ns = match cursor.get("ns") {
        Some(Bson::String(ns)) => read_namespace(ns, known)?,
        Some(other) => {
            return Err(malformed(format!(
                "`cursor.ns` is {}, not a string",
                type_name(other)
            )))
        }
        None => return Err(malformed("no `cursor.ns`")),
    };
    let documents = cursor_batch(&mut cursor, batch_key, raw_batch)?;
    let post_batch_resume_token = cursor.get_document("postBatchResumeToken").ok().cloned();
    Ok(ParsedCursor {
        id,
        ns,
        documents,
        post_batch_resume_token,
    })
}

/// The batch under `cursor.<batch_key>`, every item a document; the bytes
/// the reply kept aside when it left an empty array in its place.
fn cursor_batch(
    cursor: &mut Document,
    batch_key: &str,
    raw_batch: Option<RawBatch>,
) -> Result<RawBatch> {
    Ok(match cursor.remove(batch_key) {
        // The reply kept this batch as bytes (it left an empty array here).
        Some(Bson::Array(items)) if items.is_empty() && raw_batch.is_some() => {
            raw_batch.unwrap_or_default()
        }
        Some(Bson::Array(items)) => {
            let documents = items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Bson::Document(document) => Ok(document),
                    other => Err(malformed(format!(
                        "`cursor.{batch_key}[{i}]` is {}, not a document",
                        type_name(other)
                    ))),
                })
                .collect::<Result<Vec<_>>>()?;
            RawBatch::from_documents(documents)?
        }
        Some(other) => {
            return Err(malformed(format!(
                "`cursor.{batch_key}` is {}, not an array",
                type_name(&other)
            )))
        }
        None => return Err(malformed(format!("no `cursor.{batch_key}`"))),
    })
}

/// `cursor.id`, `cursor.ns` and `cursor.postBatchResumeToken` of a cursor
/// kept as bytes, checked as [`parse_cursor`] checks them; `None` when its
/// batch was not kept under `batch_key`.
#[allow(clippy::type_complexity)]
fn read_raw_cursor(
    head: CursorHeadView<'_>,
    batch_key: &str,
    known: Option<&Namespace>,
) -> Option<Result<(i64, Namespace, Option<Document>)>> {
    if head.batch_key != batch_key {
        return None;
    }
    Some(raw_cursor_fields(head, known))
}

fn raw_cursor_fields(
    head: CursorHeadView<'_>,
    known: Option<&Namespace>,
) -> Result<(i64, Namespace, Option<Document>)> {
    let id = required(head.id, "cursor.id", "an integer")?;
    let ns = read_namespace(required(head.ns, "cursor.ns", "a string")?, known)?;
    let token = match head.post_batch_resume_token {
        Some(token) => Some(
            crate::proto::raw_walk::to_document(token.as_bytes())
                .map_err(|e| malformed(format!("invalid `cursor.postBatchResumeToken`: {e}")))?,
        ),
        None => None,
    };
    Ok((id, ns, token))
}

/// `cursor.ns`: `known` again when it names that, else parsed.
fn read_namespace(full_name: &str, known: Option<&Namespace>) -> Result<Namespace> {
    match known {
        Some(known) if known.is(full_name) => Ok(known.clone()),
        _ => Namespace::parse(full_name)
            .ok_or_else(|| malformed(format!("`cursor.ns` {full_name:?} is not `db.collection`"))),
    }
}

/// A field the cursor must have, of the type `expected` names.
fn required<T>(
    field: Option<std::result::Result<T, bson::spec::ElementType>>,
    name: &str,
    expected: &str,
) -> Result<T> {
    match field {
        Some(Ok(value)) => Ok(value),
        Some(Err(other)) => Err(malformed(format!(
            "`{name}` is {}, not {expected}",
            raw_type_name(other)
        ))),
        None => Err(malformed(format!("no `{name}`"))),
    }
}

fn raw_type_name(element_type: bson::spec::ElementType) -> &'static str {
    match element_type {
        bson::spec::ElementType::Double => "a double",
        bson::spec::ElementType::String => "a string",
        bson::spec::ElementType::EmbeddedDocument => "a document",
        bson::spec::ElementType::Array => "an array",
        bson::spec::ElementType::Boolean => "a boolean",
        bson::spec::ElementType::Null => "null",
        bson::spec::ElementType::Int32 => "an int32",
        bson::spec::ElementType::Int64 => "an int64",
        _ => "a value of another type",
    }
}

fn type_name(value: &Bson) -> &'static str {
    raw_type_name(value.element_type())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bson::doc;

    use super::*;
    use crate::error::ErrorKind;
    use crate::proto::operation::test_support::server;
    use crate::proto::operation::Operation;

    fn reply(id: i64, batch: Vec<Document>) -> Document {
        doc! { "cursor": { "id": id, "ns": "db.coll", "firstBatch": batch }, "ok": 1 }
    }

    #[test]
    fn the_requested_namespace_is_shared_when_the_reply_names_it() {
        let open = |reply: Document, requested: &Namespace| {
            CursorSpec::from_raw_reply_on(
                Reply::from_document(reply),
                CursorOptions::default(),
                requested,
            )
        };
        let requested = Namespace::new("db", "coll");
        let spec = open(reply(0, vec![]), &requested).unwrap();
        assert!(Arc::ptr_eq(&spec.ns.coll, &requested.coll));
        // A view answers for the collection it reads: the reply's wins.
        let view = Namespace::new("db", "view");
        let spec = open(reply(0, vec![]), &view).unwrap();
        assert_eq!(spec.ns, requested);
        let bad = doc! { "cursor": { "id": 0_i64, "ns": "nodot", "firstBatch": [] }, "ok": 1 };
        let message = protocol_message(open(bad, &view));
        assert!(message.contains("is not `db.collection`"), "{message}");
    }

    fn protocol_message(result: Result<Box<CursorSpec>>) -> String {
        let error = result.unwrap_err();
        match error.kind() {
            ErrorKind::InvalidResponse { message } => message.clone(),
            other => panic!("expected a protocol error, got {other:?}"),
        }
    }

    #[test]
    fn first_batch_is_parsed() {
        let mut spec = CursorSpec::from_reply(
            reply(42, vec![doc! { "_id": 1 }, doc! { "_id": 2 }]),
            CursorOptions::default(),
        )
        .unwrap();
        assert_eq!(spec.id, 42);
        assert_eq!(spec.ns, Namespace::new("db", "coll"));
        assert_eq!(spec.batch.len(), 2);
        assert_eq!(
            spec.pop_front::<Document>().unwrap().unwrap(),
            doc! { "_id": 1 }
        );
        assert_eq!(
            spec.pop_front::<Document>().unwrap().unwrap(),
            doc! { "_id": 2 }
        );
        assert!(!spec.is_exhausted());
    }

    #[test]
    fn int32_id_and_resume_token_are_accepted() {
        let spec = CursorSpec::from_reply(
            doc! { "cursor": { "id": 0, "ns": "db.c", "firstBatch": [], "postBatchResumeToken": { "t": 1 } } },
            CursorOptions::default(),
        )
        .unwrap();
        assert!(spec.is_exhausted());
        assert_eq!(spec.post_batch_resume_token, Some(doc! { "t": 1 }));
        assert!(spec.get_more().is_none());
        assert!(spec.kill_cursors().is_none());
    }

    #[test]
    fn hostile_shapes_are_protocol_errors() {
        let cases = [
            (doc! { "ok": 1 }, "no `cursor` field"),
            (doc! { "cursor": 5 }, "`cursor` is an int32"),
            (
                doc! { "cursor": { "ns": "db.c", "firstBatch": [] } },
                "no `cursor.id`",
            ),
            (
                doc! { "cursor": { "id": "1", "ns": "db.c", "firstBatch": [] } },
                "`cursor.id` is a string, not an integer",
            ),
            (
                doc! { "cursor": { "id": 1.0, "ns": "db.c", "firstBatch": [] } },
                "`cursor.id` is a double, not an integer",
            ),
            (
                doc! { "cursor": { "id": 1_i64, "firstBatch": [] } },
                "no `cursor.ns`",
            ),
            (
                doc! { "cursor": { "id": 1_i64, "ns": 3, "firstBatch": [] } },
                "`cursor.ns` is an int32, not a string",
            ),
            (
                doc! { "cursor": { "id": 1_i64, "ns": "nodot", "firstBatch": [] } },
                "`cursor.ns` \"nodot\" is not `db.collection`",
            ),
            (
                doc! { "cursor": { "id": 1_i64, "ns": "db.c" } },
                "no `cursor.firstBatch`",
            ),
            (
                doc! { "cursor": { "id": 1_i64, "ns": "db.c", "firstBatch": {} } },
                "`cursor.firstBatch` is a document, not an array",
            ),
            (
                doc! { "cursor": { "id": 1_i64, "ns": "db.c", "firstBatch": [ {}, 7 ] } },
                "`cursor.firstBatch[1]` is an int32, not a document",
            ),
            (
                doc! { "cursor": { "id": 1_i64, "ns": "db.c", "nextBatch": [] } },
                "no `cursor.firstBatch`",
            ),
        ];
        for (reply, expected) in cases {
            let message = protocol_message(CursorSpec::from_reply(
                reply.clone(),
                CursorOptions::default(),
            ));
            assert_eq!(message, format!("malformed reply: {expected}"), "{reply}");
            // The same through the bytes, as replies arrive.
            let bytes = bson::to_vec(&reply).unwrap();
            let len = bytes.len();
            let raw = Reply::parse(bytes, 0..len).unwrap();
            let message =
                protocol_message(CursorSpec::from_raw_reply(raw, CursorOptions::default()));
            assert_eq!(message, format!("malformed reply: {expected}"), "{reply}");
        }
    }

    #[test]
    fn next_batch_updates_id_ns_and_documents() {
        let mut spec =
            CursorSpec::from_reply(reply(42, vec![doc! { "a": 1 }]), CursorOptions::default())
                .unwrap();
        spec.pop_front::<Document>();
        spec.next_batch(Reply::from_document(
            doc! { "cursor": { "id": 0_i64, "ns": "db.other", "nextBatch": [ { "a": 2 } ] } },
        ))
        .unwrap();
        assert!(spec.is_exhausted());
        assert_eq!(spec.ns, Namespace::new("db", "other"));
        assert_eq!(
            spec.pop_front::<Document>().unwrap().unwrap(),
            doc! { "a": 2 }
        );
        assert_eq!(spec.received, 2);
    }

    #[test]
    fn next_batch_rejects_first_batch_and_foreign_ids() {
        let mut spec = CursorSpec::from_reply(reply(42, vec![]), CursorOptions::default()).unwrap();
        let error = spec
            .next_batch(Reply::from_document(reply(42, vec![])))
            .unwrap_err();
        assert!(
            error.to_string().contains("no `cursor.nextBatch`"),
            "{error}"
        );
        let error = spec
            .next_batch(Reply::from_document(
                doc! { "cursor": { "id": 7_i64, "ns": "db.coll", "nextBatch": [] } },
            ))
            .unwrap_err();
        assert!(
            error.to_string().contains("answered for cursor 7"),
            "{error}"
        );
        assert_eq!(spec.id, 42, "a rejected reply changes nothing");
    }

    #[test]
    fn get_more_batch_size_respects_the_limit() {
        // The find spec's example: limit 4, batchSize 3 -> getMore batchSize 1.
        let options = CursorOptions {
            batch_size: Some(3),
            limit: Some(4),
            ..CursorOptions::default()
        };
        let mut spec =
            CursorSpec::from_reply(reply(9, vec![doc! {}, doc! {}, doc! {}]), options.clone())
                .unwrap();
        let mut get_more = spec.get_more().unwrap();
        let command = get_more.build(&server()).unwrap();
        assert_eq!(
            command.body,
            doc! { "getMore": 9_i64, "collection": "coll", "batchSize": 1 }
        );
        spec.next_batch(Reply::from_document(
            doc! { "cursor": { "id": 9_i64, "ns": "db.coll", "nextBatch": [ {} ] } },
        ))
        .unwrap();
        assert!(spec.limit_reached());
        assert!(spec.get_more().is_none());
        // The server may leave the cursor open at the limit (5.0+): kill it.
        let mut kill = spec.kill_cursors().unwrap();
        assert_eq!(
            kill.build(&server()).unwrap().body,
            doc! { "killCursors": "coll", "cursors": [9_i64] }
        );
    }

    #[test]
    fn get_more_carries_comment_and_await_time() {
        let options = CursorOptions {
            batch_size: Some(2),
            comment: Some(Bson::from("c")),
            max_await_time: Some(Duration::from_millis(250)),
            tailable: true,
            ..CursorOptions::default()
        };
        let spec = CursorSpec::from_reply(reply(5, vec![]), options).unwrap();
        let command = spec.get_more().unwrap().build(&server()).unwrap();
        assert_eq!(
            command.body,
            doc! { "getMore": 5_i64, "collection": "coll", "batchSize": 2, "maxTimeMS": 250, "comment": "c" }
        );
    }

    fn from_bytes(reply: &Document) -> Result<Box<CursorSpec>> {
        let bytes = bson::to_vec(reply).unwrap();
        let len = bytes.len();
        let reply = Reply::parse(bytes, 0..len).unwrap();
        assert!(
            reply.cursor_head().is_some(),
            "the cursor is read from the bytes"
        );
        CursorSpec::from_raw_reply(reply, CursorOptions::default())
    }

    #[test]
    fn a_cursor_kept_as_bytes_is_checked_like_a_document() {
        let batch = vec![doc! { "_id": 1 }];
        let spec = from_bytes(&doc! {
            "cursor": { "firstBatch": batch.clone(), "id": 7_i32, "ns": "db.coll",
                        "postBatchResumeToken": { "t": 1 } },
            "ok": 1,
        })
        .unwrap();
        assert_eq!(spec.id, 7);
        assert_eq!(spec.ns, Namespace::new("db", "coll"));
        assert_eq!(spec.post_batch_resume_token, Some(doc! { "t": 1 }));
        assert_eq!(spec.batch.len(), 1);
        let cases = [
            (
                doc! { "firstBatch": batch.clone(), "id": "x", "ns": "db.coll" },
                "`cursor.id` is a string, not an integer",
            ),
            (
                doc! { "firstBatch": batch.clone(), "ns": "db.coll" },
                "no `cursor.id`",
            ),
            (
                doc! { "firstBatch": batch.clone(), "id": 0_i64, "ns": 3 },
                "`cursor.ns` is an int32, not a string",
            ),
            (
                doc! { "firstBatch": batch.clone(), "id": 0_i64 },
                "no `cursor.ns`",
            ),
            (
                doc! { "firstBatch": batch.clone(), "id": 0_i64, "ns": "nodot" },
                "`cursor.ns` \"nodot\" is not `db.collection`",
            ),
        ];
        for (cursor, expected) in cases {
            let message = protocol_message(from_bytes(&doc! { "cursor": cursor, "ok": 1 }));
            assert!(
                message.contains(expected),
                "{message:?} should say {expected:?}"
            );
        }
    }

    #[test]
    fn a_repeated_cursor_field_counts_its_last_value() {
        let first =
            doc! { "cursor": { "firstBatch": [ { "a": 1 } ], "id": 1_i64, "ns": "a.b" }, "ok": 1 };
        let mut bytes = bson::to_vec(&first).unwrap();
        // Rename "ns" to "id" so that the cursor holds `id` twice: 1, then a
        // string. A Document keeps the last, so the reply is malformed.
        let at = bytes.windows(3).position(|w| w == b"ns\0").unwrap();
        bytes[at..at + 2].copy_from_slice(b"id");
        let len = bytes.len();
        let reply = Reply::parse(bytes, 0..len).unwrap();
        let message = protocol_message(CursorSpec::from_raw_reply(reply, CursorOptions::default()));
        assert!(message.contains("`cursor.id` is a string"), "{message}");
    }
}
