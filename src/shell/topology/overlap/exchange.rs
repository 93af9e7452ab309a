//! One handshake hello on a new non-blocking socket: the request's bytes
//! and the reply's frame, moved by the connection's shared step
//! ([`crate::shell::conn::pump`]) at each wake-up of the poller
//! ([`super::overlap`]), straight on the TCP socket or through the TLS
//! session whose handshake comes first.

use bson::Document;

use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES;
use crate::proto::wire::{self, MsgFlags, OpMsg};
use crate::shell::conn::frame::{Frame, FrameReader, FrameWriter};
use crate::shell::conn::pump::Transfer;

/// The hello of one handshake: the request, how much of it is sent, and
/// the reply's frame so far.
pub(super) struct HelloExchange {
    request: Vec<u8>,
    writer: FrameWriter,
    reader: FrameReader,
}

impl HelloExchange {
    /// The hello `command` as bytes: OP_MSG, or the legacy OP_QUERY.
    pub(super) fn new(command: Document, use_op_msg: bool) -> Result<HelloExchange> {
        let request_id = crate::shell::conn::next_request_id();
        let mut request = Vec::new();
        let max = DEFAULT_MAX_MESSAGE_SIZE_BYTES as usize;
        if use_op_msg {
            let mut body = command;
            body.insert("$db", "admin");
            let msg = OpMsg {
                flags: MsgFlags::default(),
                body,
                sequences: Vec::new(),
            };
            wire::encode_msg(request_id, 0, &msg, max, &mut request)?;
        } else {
            wire::encode_query(request_id, "admin", &command, false, &mut request)?;
        }
        let mut reader = FrameReader::default();
        reader.expect(request_id, max);
        Ok(HelloExchange {
            request,
            writer: FrameWriter::default(),
            reader,
        })
    }

    /// The request and the reply, for the shared step to move.
    pub(super) fn transfer(&mut self) -> Transfer<'_> {
        Transfer {
            request: (&self.request).into(),
            writer: &mut self.writer,
            reader: Some(&mut self.reader),
        }
    }

    /// The hello reply, once the step found it whole.
    pub(super) fn reply(&mut self, address: &ServerAddress) -> Result<Document> {
        let protocol = |message: String| Error::protocol(Some(address.clone()), message);
        let Some(Frame {
            header,
            body,
            trailing,
        }) = self
            .reader
            .take_message()
            .map_err(|e| protocol(e.to_string()))?
        else {
            return Err(protocol("the hello reply is not whole".into()));
        };
        if trailing {
            return Err(protocol(
                "the server sent bytes after the hello reply".into(),
            ));
        }
        let message = wire::decode(&header, &body).map_err(|e| protocol(e.to_string()))?;
        message.into_reply_document()
    }
}
