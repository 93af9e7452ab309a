//! `getMore`: the next batch of an open cursor.

use std::time::Duration;

use bson::{doc, Bson, Document};

use super::{duration_ms, Command, Namespace, Operation, RetryRules, ServerInfo};
use crate::error::Result;
use crate::proto::reply::Reply;

/// Asks the server for the next batch of cursor `id`. Usually made by
/// [`super::CursorSpec::get_more`]; its output is the reply, which
/// [`super::CursorSpec::next_batch`] checks and records.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GetMore {
    /// The cursor's namespace.
    pub ns: Namespace,
    /// The cursor id (nonzero).
    pub id: i64,
    /// `batchSize` (omitted when `None`).
    pub batch_size: Option<u32>,
    /// `maxTimeMS`: for tailable-await cursors and `run_cursor_command`.
    pub max_time: Option<Duration>,
    /// `comment` (sent to 4.4+ servers only; older ones reject it).
    pub comment: Option<Bson>,
}

impl GetMore {
    /// A `getMore` with no options.
    pub fn new(ns: Namespace, id: i64) -> Self {
        GetMore {
            ns,
            id,
            batch_size: None,
            max_time: None,
            comment: None,
        }
    }
}

/// The wire version of MongoDB 4.4, the first to accept `comment` on `getMore`.
const WIRE_VERSION_4_4: i32 = 9;

impl Operation for GetMore {
    type Output = Reply;
    const NAME: &'static str = "getMore";
    const RETRY_RULES: RetryRules = RetryRules::ReadOnly;

    fn build(&mut self, server: &ServerInfo) -> Result<Command> {
        let mut body = doc! { "getMore": self.id, "collection": self.ns.coll.to_string() };
        if let Some(size) = self.batch_size.filter(|size| *size > 0) {
            body.insert("batchSize", i64::from(size).min(i64::from(i32::MAX)) as i32);
        }
        if let Some(max_time) = self.max_time {
            body.insert("maxTimeMS", duration_ms(max_time));
        }
        if server.max_wire_version >= WIRE_VERSION_4_4 {
            if let Some(comment) = &self.comment {
                body.insert("comment", comment.clone());
            }
        }
        Ok(Command::new(Self::NAME, self.ns.db.clone(), body))
    }

    fn handle_reply(&self, reply: Document, _server: &ServerInfo) -> Result<Reply> {
        Ok(Reply::from_document(reply))
    }

    /// The reply as it came, its batch still bytes, for
    /// [`super::CursorSpec::next_batch`].
    fn handle_reply_raw(&self, reply: Reply, _server: &ServerInfo) -> Result<Reply> {
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::operation::test_support::{ns, server};

    #[test]
    fn comment_is_left_out_before_4_4() {
        let mut get_more = GetMore::new(ns(), 3);
        get_more.comment = Some(Bson::from("c"));
        let old = ServerInfo {
            max_wire_version: 8,
            ..server()
        };
        let command = get_more.build(&old).unwrap();
        assert_eq!(
            command.body,
            doc! { "getMore": 3_i64, "collection": "coll" }
        );
        assert_eq!(&*command.target_db, "db");
        let command = get_more.build(&server()).unwrap();
        assert_eq!(
            command.body,
            doc! { "getMore": 3_i64, "collection": "coll", "comment": "c" }
        );
    }
}
