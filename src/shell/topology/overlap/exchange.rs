//! One handshake hello on a new non-blocking socket: its bytes, written
//! and read as far as the socket allows at each wake-up of the poller
//! ([`super::overlap`]), straight on the TCP socket or through a TLS
//! session ([`super::tls_step`]).

use std::io::{Read, Write};

use bson::Document;
use mio::net::TcpStream;

use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES;
use crate::proto::wire::{self, Header, MsgFlags, OpMsg, HEADER_LEN};

/// Why a hello could not go on: the socket failed, or the reply (or, over
/// TLS, the handshake) was refused.
pub(super) enum ProgressError {
    Io(std::io::Error),
    Reply(Error),
}

/// The hello of one handshake: the request, how much of it is written,
/// and the reply's bytes so far.
pub(super) struct HelloExchange {
    request: Vec<u8>,
    written: usize,
    request_id: i32,
    reply: Vec<u8>,
}

impl HelloExchange {
    /// The hello `command` as bytes: OP_MSG, or the legacy OP_QUERY.
    pub(super) fn new(command: Document, use_op_msg: bool) -> Result<HelloExchange> {
        let request_id = crate::shell::conn::next_request_id();
        let mut request = Vec::new();
        if use_op_msg {
            let mut body = command;
            body.insert("$db", "admin");
            let msg = OpMsg {
                flags: MsgFlags::default(),
                body,
                sequences: Vec::new(),
            };
            let max = DEFAULT_MAX_MESSAGE_SIZE_BYTES as usize;
            wire::encode_msg(request_id, 0, &msg, max, &mut request)?;
        } else {
            wire::encode_query(request_id, "admin", &command, false, &mut request)?;
        }
        Ok(HelloExchange {
            request,
            written: 0,
            request_id,
            reply: Vec::new(),
        })
    }

    /// The request's bytes not yet handed on (to the socket or the TLS
    /// session), marking them handed on.
    pub(super) fn take_unsent(&mut self) -> &[u8] {
        let unsent = &self.request[self.written..];
        self.written = self.request.len();
        unsent
    }

    /// Adds bytes of the reply as they arrive.
    pub(super) fn received(&mut self, bytes: &[u8]) {
        self.reply.extend_from_slice(bytes);
    }

    /// Writes the hello and reads its reply on a plain socket as far as it
    /// allows; `Some` with the reply once it is whole.
    pub(super) fn advance_plain(
        &mut self,
        stream: &mut TcpStream,
        address: &ServerAddress,
    ) -> std::result::Result<Option<Document>, ProgressError> {
        while self.written < self.request.len() {
            match stream.write(&self.request[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if would_block(&e) => return Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ProgressError::Io(e)),
            }
        }
        let mut buffer = [0u8; 16 * 1024];
        loop {
            if let Some(reply) = self.complete_reply(address)? {
                return Ok(Some(reply));
            }
            match stream.read(&mut buffer) {
                Ok(0) => return Err(ProgressError::Io(closed())),
                Ok(n) => self.received(&buffer[..n]),
                Err(e) if would_block(&e) => return Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ProgressError::Io(e)),
            }
        }
    }

    /// The hello reply, once every byte of it has arrived. The header's
    /// length is checked before the body is awaited, so a hostile length
    /// costs nothing.
    pub(super) fn complete_reply(
        &self,
        address: &ServerAddress,
    ) -> std::result::Result<Option<Document>, ProgressError> {
        self.decode_reply(address).map_err(ProgressError::Reply)
    }

    fn decode_reply(&self, address: &ServerAddress) -> Result<Option<Document>> {
        let Some(header_bytes) = self.reply.get(..HEADER_LEN) else {
            return Ok(None);
        };
        let header_bytes: &[u8; HEADER_LEN] = header_bytes.try_into().expect("sliced to length");
        let max = DEFAULT_MAX_MESSAGE_SIZE_BYTES as usize;
        let address = Some(address.clone());
        let header = Header::parse(header_bytes, max)
            .map_err(|e| Error::protocol(address.clone(), e.to_string()))?;
        if header.response_to != self.request_id {
            return Err(Error::protocol(
                address,
                format!(
                    "reply answers request {} but request {} was sent",
                    header.response_to, self.request_id
                ),
            ));
        }
        let end = HEADER_LEN + header.body_len();
        match self.reply.len() {
            len if len < end => Ok(None),
            len if len > end => Err(Error::protocol(
                address,
                "the server sent bytes after the hello reply",
            )),
            _ => {
                let message = wire::decode(&header, &self.reply[HEADER_LEN..end])
                    .map_err(|e| Error::protocol(address.clone(), e.to_string()))?;
                message.into_reply_document().map(Some)
            }
        }
    }
}

pub(super) fn would_block(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
}

pub(super) fn closed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the server closed the connection",
    )
}

/// Whether a non-blocking connect has completed (`Ok(false)`: not yet).
pub(super) fn connect_progress(stream: &TcpStream) -> std::io::Result<bool> {
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    match stream.peer_addr() {
        Ok(_) => {
            stream.set_nodelay(true)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}
