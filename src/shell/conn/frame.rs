//! The one framer, sans I/O: a reply message is read from bytes as they
//! arrive (a complete frame, or "need more"), and a request is written as
//! far as the socket takes it. Both the blocking exchange and the scan's
//! shared wait move their bytes through these; neither knows a socket.
//!
//! The header's length is checked against the size limit and the request
//! it answers before any room for the body is made, and the room grows
//! with the bytes that arrive, never with what the length claims.

use crate::error::{Error, Result};
use crate::proto::wire::{Header, HEADER_LEN};

/// How much room one read gets before the header is known: a small reply
/// (the usual `find_one`, a hello) arrives header and body in one read.
const READ_AHEAD: usize = 16 * 1024;

/// The most room made for the body ahead of bytes that fill it.
const BODY_CHUNK: usize = 64 * 1024;

/// One reply message, read from the bytes as they arrive.
#[derive(Debug, Default)]
pub(crate) struct FrameReader {
    /// The first bytes of each reply (the header, and all of a small
    /// reply), `filled` of them valid; kept across replies.
    ahead: Vec<u8>,
    filled: usize,
    header: Option<Header>,
    /// A body too long for `ahead`: a fresh buffer per reply, `body_filled`
    /// of its bytes valid, moved out whole when the reply is.
    body: Vec<u8>,
    body_filled: usize,
    /// A long body's buffer handed back by its reader (a GridFS download
    /// done with a chunk), used for the next long body instead of a new
    /// one: its room still grows only as bytes arrive.
    spare: Vec<u8>,
    request_id: i32,
    max_message_size: usize,
}

/// A whole reply: its header, its body's bytes, and whether bytes nobody
/// asked for came with it.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) header: Header,
    pub(crate) body: Vec<u8>,
    pub(crate) trailing: bool,
}

impl FrameReader {
    /// Starts on the reply to `request_id`.
    pub(crate) fn expect(&mut self, request_id: i32, max_message_size: usize) {
        self.filled = 0;
        self.header = None;
        self.body = Vec::new();
        self.body_filled = 0;
        self.request_id = request_id;
        self.max_message_size = max_message_size;
    }

    /// Takes `buffer` (its contents are dropped) for the next long body.
    pub(crate) fn offer_body_buffer(&mut self, mut buffer: Vec<u8>) {
        buffer.clear();
        self.spare = buffer;
    }

    /// Room for the next read: the read-ahead until the header is known
    /// (and for all of a small reply), then a long body's missing bytes, a
    /// chunk at a time.
    pub(crate) fn room(&mut self) -> &mut [u8] {
        if self.is_long() {
            let body_len = self.header.as_ref().map_or(0, Header::body_len);
            let wanted = body_len.min(self.body_filled + BODY_CHUNK);
            if self.body.len() < wanted {
                // Double as bytes arrive, but never past the declared
                // length: `resize` alone may double to twice the reply.
                let capacity = (self.body.capacity() * 2).clamp(wanted, body_len);
                self.body.reserve_exact(capacity - self.body.len());
                self.body.resize(wanted, 0);
            }
            return &mut self.body[self.body_filled..];
        }
        if self.ahead.len() < READ_AHEAD {
            self.ahead.resize(READ_AHEAD, 0);
        }
        &mut self.ahead[self.filled..]
    }

    /// Records `n` bytes read into [`room`](Self::room); checks the header
    /// as soon as it is whole.
    pub(crate) fn filled(&mut self, n: usize) -> Result<()> {
        if self.is_long() {
            self.body_filled += n;
            return Ok(());
        }
        self.filled += n;
        if self.header.is_none() && self.filled >= HEADER_LEN {
            let header = self.parse_header()?;
            let early = HEADER_LEN..self.filled.min(HEADER_LEN + header.body_len());
            self.header = Some(header);
            if self.is_long() {
                self.body = std::mem::take(&mut self.spare);
                self.body.extend_from_slice(&self.ahead[early]);
                self.body_filled = self.body.len();
            }
        }
        Ok(())
    }

    /// Whether the reply is whole.
    pub(crate) fn is_complete(&self) -> bool {
        match &self.header {
            None => false,
            Some(header) if self.is_long() => self.body_filled >= header.body_len(),
            Some(header) => self.filled >= HEADER_LEN + header.body_len(),
        }
    }

    /// Whether any byte of the reply has arrived.
    pub(crate) fn has_started(&self) -> bool {
        self.filled > 0
    }

    /// The whole reply, once [`is_complete`](Self::is_complete).
    pub(crate) fn take_frame(&mut self) -> Option<Frame> {
        if !self.is_complete() {
            return None;
        }
        let long = self.is_long();
        let header = self.header.take()?;
        let end = HEADER_LEN + header.body_len();
        let (body, trailing) = if long {
            (std::mem::take(&mut self.body), false)
        } else {
            (self.ahead[HEADER_LEN..end].to_vec(), self.filled > end)
        };
        self.filled = 0;
        Some(Frame {
            header,
            body,
            trailing,
        })
    }

    /// The whole reply as [`take_frame`](Self::take_frame) gives it, an
    /// OP_COMPRESSED one unwrapped (its declared size checked against the
    /// size limit first): what both paths decode.
    pub(crate) fn take_message(&mut self) -> Result<Option<Frame>> {
        let Some(frame) = self.take_frame() else {
            return Ok(None);
        };
        if frame.header.op_code != crate::proto::wire::op_code::COMPRESSED {
            return Ok(Some(frame));
        }
        let (header, body) = crate::proto::compression::decompress(
            &frame.header,
            &frame.body,
            self.max_message_size,
        )?;
        Ok(Some(Frame {
            header,
            body,
            trailing: frame.trailing,
        }))
    }

    /// Whether the reply is longer than the read-ahead: its body gets its
    /// own buffer, read to its end and no further.
    fn is_long(&self) -> bool {
        self.header
            .as_ref()
            .is_some_and(|h| HEADER_LEN + h.body_len() > READ_AHEAD)
    }

    fn parse_header(&self) -> Result<Header> {
        let mut bytes = [0u8; HEADER_LEN];
        bytes.copy_from_slice(&self.ahead[..HEADER_LEN]);
        let header = Header::parse(&bytes, self.max_message_size)?;
        if header.response_to != self.request_id {
            return Err(Error::protocol(
                None,
                format!(
                    "reply answers request {} but request {} was sent",
                    header.response_to, self.request_id
                ),
            ));
        }
        Ok(header)
    }
}

/// A request's bytes: the encoded message, then bytes that follow it on
/// the wire from where they lie (a large last document the encoder did not
/// copy, see `wire::encode_parts_borrowing_last`; usually empty).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Request<'a> {
    pub(crate) head: &'a [u8],
    pub(crate) tail: &'a [u8],
}

impl<'a> From<&'a [u8]> for Request<'a> {
    fn from(head: &'a [u8]) -> Self {
        Request { head, tail: &[] }
    }
}

impl<'a> From<&'a Vec<u8>> for Request<'a> {
    fn from(head: &'a Vec<u8>) -> Self {
        Request { head, tail: &[] }
    }
}

impl Request<'_> {
    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }
}

/// How many of a request's bytes the socket (or the TLS session) has
/// taken.
#[derive(Debug, Default)]
pub(crate) struct FrameWriter {
    written: usize,
}

impl FrameWriter {
    /// The next bytes of `request` not taken yet: the rest of its head,
    /// then of its tail (one piece at a time; empty when all are taken).
    pub(crate) fn unsent<'a>(&self, request: Request<'a>) -> &'a [u8] {
        match self.written.checked_sub(request.head.len()) {
            None => &request.head[self.written..],
            Some(in_tail) => request.tail.get(in_tail..).unwrap_or_default(),
        }
    }

    /// Records that `n` more bytes were taken.
    pub(crate) fn sent(&mut self, n: usize) {
        self.written += n;
    }

    /// Whether every byte of `request` was taken.
    pub(crate) fn is_done(&self, request: Request<'_>) -> bool {
        self.written >= request.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(request_id: i32, body_len: usize) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&((HEADER_LEN + body_len) as i32).to_le_bytes());
        bytes.extend_from_slice(&9_i32.to_le_bytes());
        bytes.extend_from_slice(&request_id.to_le_bytes());
        bytes.extend_from_slice(&crate::proto::wire::op_code::MSG.to_le_bytes());
        bytes.extend((0..body_len).map(|i| i as u8));
        bytes
    }

    /// Feeds `bytes` in pieces of `piece`, as reads would.
    fn feed(reader: &mut FrameReader, bytes: &[u8], piece: usize) -> Result<()> {
        let mut at = 0;
        while at < bytes.len() && !reader.is_complete() {
            let room = reader.room();
            let n = room.len().min(piece).min(bytes.len() - at);
            room[..n].copy_from_slice(&bytes[at..at + n]);
            reader.filled(n)?;
            at += n;
        }
        Ok(())
    }

    #[test]
    fn a_reply_in_single_bytes_is_framed_whole() {
        let mut reader = FrameReader::default();
        reader.expect(5, 1 << 20);
        let bytes = reply(5, 300);
        feed(&mut reader, &bytes[..200], 1).unwrap();
        assert!(reader.has_started() && !reader.is_complete());
        assert!(reader.take_frame().is_none(), "need more");
        feed(&mut reader, &bytes[200..], 1).unwrap();
        let frame = reader.take_frame().expect("whole");
        assert_eq!(frame.body, bytes[HEADER_LEN..]);
        assert!(!frame.trailing);
    }

    #[test]
    fn a_long_reply_in_pieces_is_framed_whole_and_read_no_further() {
        let mut reader = FrameReader::default();
        reader.expect(5, 1 << 20);
        let mut bytes = reply(5, 200_000);
        bytes.extend_from_slice(b"next");
        feed(&mut reader, &bytes, 7_000).unwrap();
        let frame = reader.take_frame().expect("whole");
        assert_eq!(frame.body, bytes[HEADER_LEN..bytes.len() - 4]);
        assert!(!frame.trailing, "read to the body's end only");
    }

    #[test]
    fn bytes_after_the_reply_are_reported() {
        let mut reader = FrameReader::default();
        reader.expect(5, 1 << 20);
        let mut bytes = reply(5, 10);
        bytes.extend_from_slice(b"unasked");
        feed(&mut reader, &bytes, 1 << 20).unwrap();
        assert!(reader.take_frame().expect("whole").trailing);
    }

    #[test]
    fn a_hostile_length_is_refused_before_room_is_made_for_it() {
        let mut reader = FrameReader::default();
        reader.expect(5, 48_000_000);
        let mut bytes = reply(5, 0);
        bytes[..4].copy_from_slice(&i32::MAX.to_le_bytes());
        let error = feed(&mut reader, &bytes, 1 << 20).unwrap_err();
        assert!(error.to_string().contains("length"), "{error}");
        assert!(reader.ahead.len() <= READ_AHEAD && reader.body.is_empty());
    }

    #[test]
    fn a_long_body_never_holds_more_room_than_its_declared_length() {
        let body_len = 3 * BODY_CHUNK + 17;
        let mut reader = FrameReader::default();
        reader.expect(5, 48_000_000);
        let bytes = reply(5, body_len);
        let mut sent = 0;
        while !reader.is_complete() {
            let room = reader.room();
            let n = room.len().min(bytes.len() - sent);
            room[..n].copy_from_slice(&bytes[sent..sent + n]);
            reader.filled(n).unwrap();
            sent += n;
            assert!(
                reader.body.capacity() <= body_len,
                "{}",
                reader.body.capacity()
            );
        }
        assert_eq!(reader.take_frame().unwrap().body.len(), body_len);
    }

    #[test]
    fn an_offered_buffer_carries_the_next_long_body() {
        let mut reader = FrameReader::default();
        let body_len = 3 * BODY_CHUNK;
        reader.offer_body_buffer(Vec::with_capacity(body_len));
        let at = reader.spare.as_ptr();
        reader.expect(5, 48_000_000);
        feed(&mut reader, &reply(5, body_len), 7_000).unwrap();
        let frame = reader.take_frame().expect("whole");
        assert_eq!(frame.body.as_ptr(), at, "no new buffer");
        assert_eq!(frame.body.len(), body_len);
    }

    #[test]
    fn room_grows_with_the_bytes_that_arrive() {
        let mut reader = FrameReader::default();
        reader.expect(5, 48_000_000);
        let bytes = reply(5, 40_000_000);
        feed(&mut reader, &bytes[..HEADER_LEN], HEADER_LEN).unwrap();
        assert!(reader.room().len() <= BODY_CHUNK, "no room for a claim");
    }

    #[test]
    fn a_request_is_written_head_then_tail() {
        let request = Request {
            head: b"head",
            tail: b"tail",
        };
        let mut writer = FrameWriter::default();
        let mut wire = Vec::new();
        while !writer.is_done(request) {
            // Three bytes a write, as a socket may take them.
            let piece = writer.unsent(request);
            let n = piece.len().min(3);
            wire.extend_from_slice(&piece[..n]);
            writer.sent(n);
        }
        assert_eq!(wire, b"headtail");
        assert!(writer.unsent(request).is_empty());
    }

    #[test]
    fn a_reply_to_another_request_is_refused() {
        let mut reader = FrameReader::default();
        reader.expect(5, 1 << 20);
        let error = feed(&mut reader, &reply(6, 10), 1 << 20).unwrap_err();
        assert!(error.to_string().contains("answers request 6"), "{error}");
    }
}
