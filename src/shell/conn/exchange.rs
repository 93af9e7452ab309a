//! One request/reply exchange: encoding the request, writing it and
//! reading the reply message, all within one deadline.

use std::time::{Duration, Instant};

use bson::Document;

use super::frame::{Frame, FrameWriter, Request};
use super::next_request_id;
use super::pump::Transfer;
use super::Connection;
use crate::error::{Error, Result};
use crate::proto::compression;
use crate::proto::reply::Reply;
use crate::proto::wire::{self, Message, MsgBody, MsgFlags, MsgParts, OpMsg};

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
        let limit = timeout.or(self.socket_timeout);
        self.send_msg_reply(request_id, &parts, limit)?
            .into_document()
    }

    /// [`send_msg`](Self::send_msg) of a message given in parts (the
    /// executor's command is written without a document of it), keeping a
    /// cursor batch of the reply as bytes (see [`Reply`]). `limit` bounds
    /// the exchange exactly: `None` is no limit, not the socket timeout
    /// (CSOT's `timeoutMS: 0` sets `socketTimeoutMS` aside too).
    pub(crate) fn send_msg_reply(
        &mut self,
        request_id: i32,
        msg: &MsgParts<'_>,
        limit: Option<Duration>,
    ) -> Result<Reply> {
        let mut buffer = std::mem::take(&mut self.write_buffer);
        buffer.clear();
        let encoded = self.encode(request_id, msg, &mut buffer);
        if msg.flags.has(MsgFlags::MORE_TO_COME) {
            // The server sends nothing back for moreToCome (a w:0 write):
            // waiting for a reply would block until the socket timeout, or
            // for ever without one.
            let sent = encoded.and_then(|tail| {
                let request = Request {
                    head: &buffer,
                    tail,
                };
                self.send_without_reply(request, limit)
            });
            self.write_buffer = buffer;
            return sent.map(|()| Reply::from_document(Document::new()));
        }
        let outcome = encoded.and_then(|tail| {
            let request = Request {
                head: &buffer,
                tail,
            };
            self.exchange_reply(request_id, request, limit)
        });
        self.write_buffer = buffer;
        outcome
    }

    /// Encodes `msg` into `buffer`, compressed when a compressor was
    /// negotiated. Uncompressed, a large last document is not copied: it
    /// is returned, to be written after `buffer` (so the write buffer
    /// never grows to a GridFS chunk's size).
    fn encode<'a>(
        &mut self,
        request_id: i32,
        msg: &MsgParts<'a>,
        buffer: &mut Vec<u8>,
    ) -> Result<&'a [u8]> {
        if self.compressor.is_some() {
            wire::encode_parts(request_id, 0, msg, self.max_message_size, buffer)?;
            self.compress(buffer)?;
            return Ok(&[]);
        }
        wire::encode_parts_borrowing_last(request_id, 0, msg, self.max_message_size, buffer)
    }

    /// Replaces the encoded request in `buffer` with its OP_COMPRESSED form
    /// when a compressor was negotiated and the command may be compressed.
    fn compress(&mut self, buffer: &mut Vec<u8>) -> Result<()> {
        let Some(compressor) = self.compressor else {
            return Ok(());
        };
        self.compress_buffer.clear();
        if compression::compress_request(compressor, buffer, &mut self.compress_buffer)? {
            std::mem::swap(buffer, &mut self.compress_buffer);
        }
        Ok(())
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
        self.exchange(request_id, (&buffer).into(), timeout)?
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
                self.write_request((&buffer).into(), deadline)
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
        let deadline = timeout
            .or(self.socket_timeout)
            .map(|t| self.clock.now() + t);
        let message = self.read_message(request_id, deadline)?;
        self.exchange_done();
        message.into_reply_document()
    }

    fn send_without_reply(&mut self, bytes: Request<'_>, limit: Option<Duration>) -> Result<()> {
        let deadline = self.begin_exchange_within(limit)?;
        self.write_request(bytes, deadline)?;
        self.exchange_done();
        Ok(())
    }

    fn exchange(
        &mut self,
        request_id: i32,
        bytes: Request<'_>,
        timeout: Option<Duration>,
    ) -> Result<Message> {
        let deadline = self.begin_exchange(timeout)?;
        let frame = self.transfer(bytes, Some(request_id), deadline)?;
        let message = self.decode_message(frame)?;
        self.exchange_done();
        Ok(message)
    }

    /// [`exchange`](Self::exchange) for a command's reply: the body's bytes
    /// move into the [`Reply`], which keeps a cursor batch in them.
    fn exchange_reply(
        &mut self,
        request_id: i32,
        bytes: Request<'_>,
        limit: Option<Duration>,
    ) -> Result<Reply> {
        let deadline = self.begin_exchange_within(limit)?;
        let frame = self.transfer(bytes, Some(request_id), deadline)?;
        let frame = frame.ok_or_else(|| Error::internal("a reply was awaited"))?;
        let (reply, more_to_come) = wire::decode_command_reply(&frame.header, frame.body)
            .map_err(|e| self.with_address(e))?;
        self.refuse_more_to_come(more_to_come)?;
        self.exchange_done();
        Ok(reply)
    }

    /// Refuses a socket an earlier failure left out of step, marks it so
    /// until the exchange completes, and returns the exchange's deadline:
    /// one for the whole exchange, not a timeout per read, since a peer
    /// dripping a byte at a time would otherwise outlast any bound.
    fn begin_exchange(&mut self, timeout: Option<Duration>) -> Result<Option<Instant>> {
        self.begin_exchange_within(timeout.or(self.socket_timeout))
    }

    /// [`begin_exchange`](Self::begin_exchange) bounded by exactly `limit`
    /// (`None`: no limit).
    fn begin_exchange_within(&mut self, limit: Option<Duration>) -> Result<Option<Instant>> {
        if self.is_broken() {
            return Err(Error::network_message(
                Some(self.address.clone()),
                "socket is closed after an earlier failure",
            ));
        }
        self.broken = true;
        Ok(limit.map(|t| self.clock.now() + t))
    }

    fn exchange_done(&mut self) {
        self.broken = false;
        self.last_used = self.clock.now();
    }

    fn write_request(&mut self, bytes: Request<'_>, deadline: Option<Instant>) -> Result<()> {
        self.transfer(bytes, None, deadline).map(drop)
    }

    fn read_message(&mut self, request_id: i32, deadline: Option<Instant>) -> Result<Message> {
        let frame = self.transfer(Request::default(), Some(request_id), deadline)?;
        self.decode_message(frame)
    }

    fn decode_message(&self, frame: Option<Frame>) -> Result<Message> {
        let frame = frame.ok_or_else(|| Error::internal("a reply was awaited"))?;
        let message = wire::decode(&frame.header, &frame.body).map_err(|e| self.with_address(e))?;
        self.refuse_more_to_come(message.more_to_come())?;
        Ok(message)
    }

    /// Sends `request` (may be empty) and, given the id it answers, reads
    /// one reply message, all by `deadline`. Bytes that came after the
    /// reply leave the socket out of step: this reply is whole, but the
    /// socket must not carry another exchange.
    fn transfer(
        &mut self,
        request: Request<'_>,
        reply_to: Option<i32>,
        deadline: Option<Instant>,
    ) -> Result<Option<Frame>> {
        let mut writer = FrameWriter::default();
        if let Some(request_id) = reply_to {
            self.reader.expect(request_id, self.max_message_size);
        }
        let mut transfer = Transfer {
            request,
            writer: &mut writer,
            reader: reply_to.map(|_| &mut self.reader),
        };
        if let Err(stall) = self
            .stream
            .run(&mut transfer, deadline, self.clock.as_ref())
        {
            let context = if !writer.is_done(request) {
                "sending a command"
            } else if self.reader.has_started() {
                "reading a reply"
            } else {
                "reading a reply header"
            };
            return Err(self.stall_error(stall, context));
        }
        let frame = match reply_to {
            Some(_) => self
                .reader
                .take_message()
                .map_err(|e| self.with_address(e))?,
            None => None,
        };
        if frame.as_ref().is_some_and(|f| f.trailing) {
            self.out_of_step = true;
        }
        Ok(frame)
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
