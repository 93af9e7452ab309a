//! The bytes of one overlapped handshake: the hello encoded, written and
//! its reply read as far as a non-blocking socket allows.

use std::io::{Read, Write};

use bson::Document;
use mio::net::TcpStream;

use super::Pending;
use crate::error::{Error, Result};
use crate::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES;
use crate::wire::{self, Header, MsgFlags, OpMsg, HEADER_LEN};

/// The handshake's hello as bytes: OP_MSG, or the legacy OP_QUERY.
pub(super) fn encode_hello(
    request_id: i32,
    command: Document,
    use_op_msg: bool,
) -> Result<Vec<u8>> {
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
    Ok(request)
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

pub(super) enum ProgressError {
    Io(std::io::Error),
    Reply(Error),
}

/// Writes the hello and reads its reply as far as the socket allows;
/// `Some` with the reply once it is whole.
pub(super) fn progress(
    pending: &mut Pending,
) -> std::result::Result<Option<Document>, ProgressError> {
    let would_block = |e: &std::io::Error| e.kind() == std::io::ErrorKind::WouldBlock;
    while pending.written < pending.request.len() {
        match pending.stream.write(&pending.request[pending.written..]) {
            Ok(n) => pending.written += n,
            Err(e) if would_block(&e) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ProgressError::Io(e)),
        }
    }
    let mut buffer = [0u8; 16 * 1024];
    loop {
        if let Some(reply) = complete_reply(pending).map_err(ProgressError::Reply)? {
            return Ok(Some(reply));
        }
        match pending.stream.read(&mut buffer) {
            Ok(0) => {
                return Err(ProgressError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )))
            }
            Ok(n) => pending.reply.extend_from_slice(&buffer[..n]),
            Err(e) if would_block(&e) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ProgressError::Io(e)),
        }
    }
}

/// The hello reply, once every byte of it has arrived. The header's
/// length is checked before the body is awaited, so a hostile length
/// costs nothing.
fn complete_reply(pending: &Pending) -> Result<Option<Document>> {
    let Some(header_bytes) = pending.reply.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let header_bytes: &[u8; HEADER_LEN] = header_bytes.try_into().expect("sliced to length");
    let max = DEFAULT_MAX_MESSAGE_SIZE_BYTES as usize;
    let address = Some(pending.address.clone());
    let header = Header::parse(header_bytes, max)
        .map_err(|e| Error::protocol(address.clone(), e.to_string()))?;
    if header.response_to != pending.request_id {
        return Err(Error::protocol(
            address,
            format!(
                "reply answers request {} but request {} was sent",
                header.response_to, pending.request_id
            ),
        ));
    }
    let end = HEADER_LEN + header.body_len();
    match pending.reply.len() {
        len if len < end => Ok(None),
        len if len > end => Err(Error::protocol(
            address,
            "the server sent bytes after the hello reply",
        )),
        _ => {
            let message = wire::decode(&header, &pending.reply[HEADER_LEN..end])
                .map_err(|e| Error::protocol(address.clone(), e.to_string()))?;
            message.into_reply_document().map(Some)
        }
    }
}
