//! Bytes between a non-blocking socket and the framer ([`super::frame`]),
//! straight or through a TLS session: one step moves them as far as the
//! socket allows without waiting. The blocking exchange repeats the step
//! after each wait of its own poller; the scan's shared wait repeats it on
//! each wake-up. Both wait only once the socket would block, so no
//! readiness edge is ever missed.

use std::io::{Read, Write};

use rustls::ClientConnection;

use super::frame::{FrameReader, FrameWriter, Request};
use crate::error::Error;

/// Why a step could not go on: the socket failed, the reply was refused
/// (its error names no server yet), or TLS failed.
#[derive(Debug)]
pub(crate) enum Stall {
    Io(std::io::Error),
    Refused(Error),
    Tls(rustls::Error),
}

/// What one exchange moves: a request (empty for none) and, when a reply
/// is awaited, the reader it lands in.
pub(crate) struct Transfer<'a> {
    pub(crate) request: Request<'a>,
    pub(crate) writer: &'a mut FrameWriter,
    pub(crate) reader: Option<&'a mut FrameReader>,
}

impl Transfer<'_> {
    /// Whether the request is sent and the reply (if one is awaited) whole.
    fn is_done(&self) -> bool {
        self.writer.is_done(self.request) && self.reader.as_ref().is_none_or(|r| r.is_complete())
    }
}

/// Moves `transfer` on over `socket` (through `tls` when given) as far as
/// it goes without waiting: `Ok(true)` once it is done, `Ok(false)` when
/// the socket would block. With TLS and nothing to send or read, it
/// completes the handshake.
pub(crate) fn step(
    socket: &mut (impl Read + Write),
    tls: Option<&mut ClientConnection>,
    transfer: &mut Transfer<'_>,
) -> Result<bool, Stall> {
    match tls {
        None => step_plain(socket, transfer),
        Some(session) => step_tls(session, socket, transfer),
    }
}

fn step_plain(socket: &mut (impl Read + Write), t: &mut Transfer<'_>) -> Result<bool, Stall> {
    while !t.writer.is_done(t.request) {
        match socket.write(t.writer.unsent(t.request)) {
            Ok(0) => return Err(Stall::Io(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => t.writer.sent(n),
            Err(e) if would_block(&e) => return Ok(false),
            Err(e) if interrupted(&e) => {}
            Err(e) => return Err(Stall::Io(e)),
        }
    }
    let Some(reader) = t.reader.as_deref_mut() else {
        return Ok(true);
    };
    while !reader.is_complete() {
        match socket.read(reader.room()) {
            Ok(0) => return Err(Stall::Io(closed(reader))),
            Ok(n) => reader.filled(n).map_err(Stall::Refused)?,
            Err(e) if would_block(&e) => return Ok(false),
            Err(e) if interrupted(&e) => {}
            Err(e) => return Err(Stall::Io(e)),
        }
    }
    Ok(true)
}

/// Each round hands plaintext to the session, writes its records, takes
/// the plaintext it has for the reader, and reads records; the step ends
/// when the transfer is done or a round moved nothing (every direction
/// would block).
fn step_tls(
    session: &mut ClientConnection,
    socket: &mut (impl Read + Write),
    t: &mut Transfer<'_>,
) -> Result<bool, Stall> {
    loop {
        let mut moved = hand_plaintext(session, t)?;
        moved |= write_records(session, socket)?;
        if let Some(reader) = t.reader.as_deref_mut() {
            moved |= take_plaintext(session, reader)?;
        }
        let handshaken = !session.is_handshaking() && !session.wants_write();
        if t.is_done() && (t.reader.is_some() || handshaken) {
            return Ok(true);
        }
        moved |= read_records(session, socket)?;
        if !moved {
            return Ok(false);
        }
    }
}

/// The session takes what its buffer limit allows (all of a hello,
/// before the handshake is done too: it sends it after).
fn hand_plaintext(session: &mut ClientConnection, t: &mut Transfer<'_>) -> Result<bool, Stall> {
    let unsent = t.writer.unsent(t.request);
    if unsent.is_empty() {
        return Ok(false);
    }
    let n = session.writer().write(unsent).map_err(Stall::Io)?;
    t.writer.sent(n);
    Ok(n > 0)
}

fn write_records(
    session: &mut ClientConnection,
    socket: &mut (impl Read + Write),
) -> Result<bool, Stall> {
    let mut moved = false;
    while session.wants_write() {
        match session.write_tls(socket) {
            Ok(n) => moved |= n > 0,
            Err(e) if would_block(&e) => break,
            Err(e) if interrupted(&e) => {}
            Err(e) => return Err(Stall::Io(e)),
        }
    }
    Ok(moved)
}

fn take_plaintext(session: &mut ClientConnection, reader: &mut FrameReader) -> Result<bool, Stall> {
    let mut moved = false;
    while !reader.is_complete() {
        match session.reader().read(reader.room()) {
            // close_notify before the reply was whole.
            Ok(0) => return Err(Stall::Io(closed(reader))),
            Ok(n) => {
                reader.filled(n).map_err(Stall::Refused)?;
                moved = true;
            }
            Err(e) if would_block(&e) => break,
            Err(e) => return Err(Stall::Io(e)),
        }
    }
    Ok(moved)
}

fn read_records(
    session: &mut ClientConnection,
    socket: &mut (impl Read + Write),
) -> Result<bool, Stall> {
    loop {
        match session.read_tls(socket) {
            Ok(0) => return Err(Stall::Io(closed_during_tls(session.is_handshaking()))),
            Ok(_) => break,
            Err(e) if would_block(&e) => return Ok(false),
            Err(e) if interrupted(&e) => {}
            Err(e) => return Err(Stall::Io(e)),
        }
    }
    if let Err(failure) = session.process_new_packets() {
        // Tell the server why (rustls queued an alert); the socket is
        // dropped either way.
        let _ = session.write_tls(socket);
        return Err(Stall::Tls(failure));
    }
    Ok(true)
}

pub(crate) fn would_block(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
}

fn interrupted(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Interrupted
}

fn closed(reader: &FrameReader) -> std::io::Error {
    let message = if reader.has_started() {
        "the server closed the connection in the middle of a reply"
    } else {
        "the server closed the connection before a reply"
    };
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, message)
}

fn closed_during_tls(handshaking: bool) -> std::io::Error {
    // A server without TLS that recognises a TLS hello closes the socket.
    let message = if handshaking {
        "the server closed the connection without a TLS answer: it may not speak TLS"
    } else {
        "the server closed the connection"
    };
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, message)
}
