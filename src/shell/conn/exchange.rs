//! One request/reply exchange: encoding the request, writing it and
//! reading the reply message, all within one deadline.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use bson::Document;

use super::next_request_id;
use super::stream::DeadlineIo;
use super::Connection;
use crate::error::{Error, Result};
use crate::proto::reply::Reply;
use crate::proto::wire::{self, Header, Message, MsgBody, MsgFlags, MsgParts, OpMsg, HEADER_LEN};

/// How many bytes one read of a reply asks for: a small reply (the usual
/// `find_one`) arrives header and body in one `recvfrom`.
const READ_AHEAD: usize = 16 * 1024;

impl Connection {
    /// Sends `msg` as OP_MSG and reads the reply document. `timeout`
    /// overrides the socket timeout for this exchange (monitoring checks use
    /// connectTimeoutMS; an operation deadline shortens it).
    pub fn send_msg(
        &mut self,
        request_id: i32,
        msg: &OpMsg,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        let parts = MsgParts {
            flags: msg.flags,
            body: MsgBody::Document(&msg.body),
            sequences: &msg.sequences,
        };
        self.send_msg_reply(request_id, &parts, timeout)?
            .into_document()
    }

    /// [`send_msg`](Self::send_msg) of a message given in parts (the
    /// executor's command is written without a document of it), keeping a
    /// cursor batch of the reply as bytes (see [`Reply`]).
    pub(crate) fn send_msg_reply(
        &mut self,
        request_id: i32,
        msg: &MsgParts<'_>,
        timeout: Option<Duration>,
    ) -> Result<Reply> {
        let mut buffer = std::mem::take(&mut self.write_buffer);
        buffer.clear();
        let encoded = wire::encode_parts(request_id, 0, msg, self.max_message_size, &mut buffer);
        if msg.flags.has(MsgFlags::MORE_TO_COME) {
            // The server sends nothing back for moreToCome (a w:0 write):
            // waiting for a reply would block until the socket timeout, or
            // for ever without one.
            let sent = encoded.and_then(|_| self.send_without_reply(&buffer, timeout));
            self.write_buffer = buffer;
            return sent.map(|()| Reply::from_document(Document::new()));
        }
        let outcome = encoded.and_then(|_| self.exchange_reply(request_id, &buffer, timeout));
        self.write_buffer = buffer;
        outcome
    }

    /// Runs `command` against database `db` as OP_MSG and returns the raw
    /// reply (ok: 0 is not turned into an error here; see [`check_reply`]).
    pub fn command(
        &mut self,
        db: &str,
        mut command: Document,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        command.insert("$db", db);
        let msg = OpMsg {
            flags: MsgFlags::default(),
            body: command,
            sequences: Vec::new(),
        };
        self.send_msg(next_request_id(), &msg, timeout)
    }

    /// Runs `command` as a legacy OP_QUERY on `<db>.$cmd` (the first hello
    /// of a connection, before the server said it speaks OP_MSG).
    pub fn legacy_command(
        &mut self,
        db: &str,
        command: &Document,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        let request_id = next_request_id();
        let mut buffer = Vec::new();
        wire::encode_query(request_id, db, command, false, &mut buffer)?;
        self.exchange(request_id, &buffer, timeout)?
            .into_reply_document()
    }

    /// Sends `command` to `db` as OP_MSG without waiting for the reply,
    /// which [`Connection::read_command_reply`] reads later: a scan sends
    /// the hellos of many open sockets, then awaits their replies in one
    /// wait. Returns the request id. Until the reply is read the socket is
    /// mid-exchange (unusable should the read never happen).
    pub fn send_command(
        &mut self,
        db: &str,
        mut command: Document,
        timeout: Option<Duration>,
    ) -> Result<i32> {
        command.insert("$db", db);
        let msg = OpMsg {
            flags: MsgFlags::default(),
            body: command,
            sequences: Vec::new(),
        };
        let request_id = next_request_id();
        let mut buffer = std::mem::take(&mut self.write_buffer);
        buffer.clear();
        let sent = wire::encode_msg(request_id, 0, &msg, self.max_message_size, &mut buffer)
            .and_then(|_| {
                let deadline = self.begin_exchange(timeout)?;
                self.write_request(&buffer, deadline)
            });
        self.write_buffer = buffer;
        sent.map(|()| request_id)
    }

    /// Reads the reply to a request [`Connection::send_command`] sent,
    /// within `timeout` (none: the socket timeout).
    pub fn read_command_reply(
        &mut self,
        request_id: i32,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        let deadline = timeout.or(self.socket_timeout).map(|t| Instant::now() + t);
        let message = self.read_message(request_id, deadline)?;
        self.broken = false;
        self.last_used = Instant::now();
        message.into_reply_document()
    }

    fn send_without_reply(&mut self, bytes: &[u8], timeout: Option<Duration>) -> Result<()> {
        let deadline = self.begin_exchange(timeout)?;
        self.write_request(bytes, deadline)?;
        self.broken = false;
        self.last_used = Instant::now();
        Ok(())
    }

    fn exchange(
        &mut self,
        request_id: i32,
        bytes: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Message> {
        let deadline = self.begin_exchange(timeout)?;
        self.write_request(bytes, deadline)?;
        let message = self.read_message(request_id, deadline)?;
        self.broken = false;
        self.last_used = Instant::now();
        Ok(message)
    }

    /// [`exchange`](Self::exchange) for a command's reply: the body's bytes
    /// move into the [`Reply`], which keeps a cursor batch in them.
    fn exchange_reply(
        &mut self,
        request_id: i32,
        bytes: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Reply> {
        let deadline = self.begin_exchange(timeout)?;
        self.write_request(bytes, deadline)?;
        let (header, body) = self.read_frame(request_id, deadline)?;
        let (reply, more_to_come) =
            wire::decode_command_reply(&header, body).map_err(|e| self.with_address(e))?;
        self.refuse_more_to_come(more_to_come)?;
        self.broken = false;
        self.last_used = Instant::now();
        Ok(reply)
    }

    /// Refuses a socket an earlier failure left out of step, marks it so
    /// until the exchange completes, and returns the exchange's deadline:
    /// one for the whole exchange, not a timeout per read, since a peer
    /// dripping a byte at a time would otherwise outlast any bound.
    fn begin_exchange(&mut self, timeout: Option<Duration>) -> Result<Option<Instant>> {
        if self.is_broken() {
            return Err(Error::network_message(
                Some(self.address.clone()),
                "socket is closed after an earlier failure",
            ));
        }
        self.broken = true;
        Ok(timeout.or(self.socket_timeout).map(|t| Instant::now() + t))
    }

    fn write_request(&mut self, bytes: &[u8], deadline: Option<Instant>) -> Result<()> {
        DeadlineIo {
            stream: &mut self.stream,
            applied: &mut self.applied_timeout,
            deadline,
        }
        .write_all(bytes)
        .map_err(|e| Error::network(Some(self.address.clone()), "sending a command", e))
    }

    fn read_message(&mut self, request_id: i32, deadline: Option<Instant>) -> Result<Message> {
        let (header, body) = self.read_frame(request_id, deadline)?;
        let message = wire::decode(&header, &body).map_err(|e| self.with_address(e))?;
        self.refuse_more_to_come(message.more_to_come())?;
        Ok(message)
    }

    /// Reads one reply message: its header and its body's bytes.
    fn read_frame(
        &mut self,
        request_id: i32,
        deadline: Option<Instant>,
    ) -> Result<(Header, Vec<u8>)> {
        // One read for the header and, when it is small, the whole body.
        let mut read_ahead = std::mem::take(&mut self.read_ahead);
        read_ahead.resize(READ_AHEAD, 0);
        let filled = self.read_header(&mut read_ahead, deadline)?;
        let header = self.parse_header(&read_ahead, request_id)?;
        let body_len = header.body_len();
        let body = self.body_read_ahead(&read_ahead[HEADER_LEN..filled], body_len);
        self.read_ahead = read_ahead;
        let body = self.read_rest_of_body(body, body_len, deadline)?;
        Ok((header, body))
    }

    /// Reads until `read_ahead` holds at least a header; returns how many
    /// bytes it holds (a small reply's body may have come with it).
    fn read_header(&mut self, read_ahead: &mut [u8], deadline: Option<Instant>) -> Result<usize> {
        let mut filled = 0;
        let mut io = DeadlineIo {
            stream: &mut self.stream,
            applied: &mut self.applied_timeout,
            deadline,
        };
        let header_read = loop {
            if filled >= HEADER_LEN {
                break Ok(());
            }
            match io.read(&mut read_ahead[filled..]) {
                Ok(0) => {
                    break Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "connection closed before a reply header",
                    ))
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        header_read
            .map(|()| filled)
            .map_err(|e| self.network_error("reading a reply header", e))
    }

    /// The header at the start of `read_ahead`, checked against the size
    /// limit and against the request it must answer.
    fn parse_header(&self, read_ahead: &[u8], request_id: i32) -> Result<Header> {
        let mut header_bytes = [0u8; HEADER_LEN];
        header_bytes.copy_from_slice(&read_ahead[..HEADER_LEN]);
        let header = Header::parse(&header_bytes, self.max_message_size)
            .map_err(|e| self.with_address(e))?;
        if header.response_to != request_id {
            return Err(Error::protocol(
                Some(self.address.clone()),
                format!(
                    "reply answers request {} but request {request_id} was sent",
                    header.response_to
                ),
            ));
        }
        Ok(header)
    }

    /// The start of the body from the bytes read with the header.
    fn body_read_ahead(&mut self, early: &[u8], body_len: usize) -> Vec<u8> {
        if early.len() > body_len {
            // Bytes after the reply that no request asked for: this reply is
            // whole, but the socket must not carry another exchange.
            self.out_of_step = true;
        }
        let mut body = Vec::with_capacity(body_len.min(64 * 1024).max(early.len().min(body_len)));
        body.extend_from_slice(&early[..early.len().min(body_len)]);
        body
    }

    /// Reads the rest of the body through `take`, so memory grows with
    /// bytes actually received, not with what the length field claims.
    fn read_rest_of_body(
        &mut self,
        mut body: Vec<u8>,
        body_len: usize,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>> {
        if body.len() < body_len {
            let mut io = DeadlineIo {
                stream: &mut self.stream,
                applied: &mut self.applied_timeout,
                deadline,
            };
            let rest = (&mut io)
                .take((body_len - body.len()) as u64)
                .read_to_end(&mut body);
            rest.map_err(|e| self.network_error("reading a reply", e))?;
        }
        if body.len() != body_len {
            return Err(self.network_error(
                "reading a reply",
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("connection closed after {} of {body_len} bytes", body.len()),
                ),
            ));
        }
        Ok(body)
    }

    fn refuse_more_to_come(&self, more_to_come: bool) -> Result<()> {
        if more_to_come {
            return Err(Error::protocol(
                Some(self.address.clone()),
                "server set moreToCome, which this driver never requests",
            ));
        }
        Ok(())
    }
}
