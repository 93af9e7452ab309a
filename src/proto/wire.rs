//! The wire protocol: OP_MSG for everything, OP_QUERY/OP_REPLY for the
//! first legacy hello. Bytes in, bytes out; no sockets.
//!
//! ```text
//! reading a reply:   [16-byte header] --Header::parse--> Header { length, .. }
//!                    [length - 16 bytes body] --decode(&header, body)--> Message
//!                    a command's reply: --decode_command_reply(&header, body)--> Reply
//!                                       (a cursor batch kept as the body's bytes)
//! sending a command: encode_msg / encode_query --> bytes appended to a Vec
//! ```
//!
//! Everything read from the network is untrusted: every length field is
//! checked against the bytes actually present (and the maximum message size)
//! before it is used, and nothing is allocated from a length field alone.

use std::collections::HashSet;
use std::sync::Arc;

use bson::{Document, RawDocumentBuf};

use crate::error::{Error, Result};
use crate::proto::bson_write::WriteError;
use crate::proto::command_draft::CommandDraft;
use crate::proto::nesting::MAX_BSON_DEPTH;
use crate::proto::reply::Reply;

/// Length of the standard message header.
pub const HEADER_LEN: usize = 16;

/// `maxMessageSizeBytes` to assume before a hello reply has told us the
/// server's value (the server's default).
#[cfg(test)]
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 48_000_000;

/// Operation codes of the message header.
pub mod op_code {
    /// OP_REPLY: the answer to an OP_QUERY.
    pub const REPLY: i32 = 1;
    /// OP_QUERY: used only for the first (legacy) hello on a socket.
    pub const QUERY: i32 = 2004;
    /// OP_COMPRESSED: a message of another op code, compressed.
    pub const COMPRESSED: i32 = 2012;
    /// OP_MSG: every command.
    pub const MSG: i32 = 2013;
}

/// OP_QUERY flag bit that lets a secondary answer.
const QUERY_FLAG_SECONDARY_OK: i32 = 1 << 2;

/// OP_REPLY flag bit set when the query failed; the one document holds `$err`.
pub const REPLY_FLAG_QUERY_FAILURE: i32 = 1 << 1;

/// The standard message header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Total message length, header included.
    pub length: i32,
    /// The sender's identifier for this message.
    pub request_id: i32,
    /// The `request_id` of the message this one answers.
    pub response_to: i32,
    /// See [`op_code`].
    pub op_code: i32,
}

impl Header {
    /// Parses and validates the header of a reply: `length` must be at least
    /// [`HEADER_LEN`] and at most `max_message_size`, and the op code must be
    /// one a reply can carry (OP_REPLY, OP_MSG, or OP_COMPRESSED wrapping
    /// one of them: [`crate::proto::compression::decompress`] unwraps it).
    pub fn parse(bytes: &[u8; HEADER_LEN], max_message_size: usize) -> Result<Header> {
        let field =
            |i: usize| i32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
        let header = Header {
            length: field(0),
            request_id: field(4),
            response_to: field(8),
            op_code: field(12),
        };
        if header.length < HEADER_LEN as i32 {
            return Err(Error::protocol(
                None,
                format!(
                    "message length {} is shorter than the {HEADER_LEN}-byte header",
                    header.length
                ),
            ));
        }
        if header.length as usize > max_message_size {
            return Err(Error::protocol(
                None,
                format!(
                    "message length {} exceeds maxMessageSizeBytes {max_message_size}",
                    header.length
                ),
            ));
        }
        match header.op_code {
            op_code::REPLY | op_code::MSG | op_code::COMPRESSED => Ok(header),
            other => Err(Error::protocol(
                None,
                format!("unexpected op code {other} in a reply (expected OP_MSG or OP_REPLY)"),
            )),
        }
    }

    /// Length of the body that follows the header.
    pub fn body_len(&self) -> usize {
        usize::try_from(self.length).map_or(0, |len| len.saturating_sub(HEADER_LEN))
    }

    /// The header as it goes on the wire.
    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut bytes = [0; HEADER_LEN];
        bytes[0..4].copy_from_slice(&self.length.to_le_bytes());
        bytes[4..8].copy_from_slice(&self.request_id.to_le_bytes());
        bytes[8..12].copy_from_slice(&self.response_to.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.op_code.to_le_bytes());
        bytes
    }
}

/// OP_MSG `flagBits`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MsgFlags(pub u32);

impl MsgFlags {
    /// A CRC-32C checksum follows the sections.
    pub const CHECKSUM_PRESENT: MsgFlags = MsgFlags(1);
    /// The sender will send another message without waiting for an answer.
    pub const MORE_TO_COME: MsgFlags = MsgFlags(1 << 1);
    /// The client accepts several replies (`moreToCome`) to this request.
    #[cfg(test)]
    pub const EXHAUST_ALLOWED: MsgFlags = MsgFlags(1 << 16);

    /// Bits 0-15 are "required": a receiver must refuse any it does not know.
    const REQUIRED_MASK: u32 = 0xFFFF;
    const KNOWN_REQUIRED: u32 = Self::CHECKSUM_PRESENT.0 | Self::MORE_TO_COME.0;

    /// Whether every bit of `flag` is set.
    pub fn has(self, flag: MsgFlags) -> bool {
        self.0 & flag.0 == flag.0
    }

    /// These flags with the bits of `flag` added.
    pub fn with(self, flag: MsgFlags) -> MsgFlags {
        MsgFlags(self.0 | flag.0)
    }
}

impl std::ops::BitOr for MsgFlags {
    type Output = MsgFlags;

    fn bitor(self, other: MsgFlags) -> MsgFlags {
        self.with(other)
    }
}

/// A kind-1 section: documents sent as a sequence instead of an array field
/// of the body (e.g. `documents` of an insert).
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentSequence {
    /// The name of the command argument the documents belong to.
    pub identifier: String,
    /// The documents, in order, as BSON bytes (encoded once, when the
    /// statement was made, and copied into the message as they are).
    /// Shared with the operation that made them, which builds the command
    /// again for a retry: a large document is held once, not once more per
    /// attempt.
    pub documents: Vec<Arc<RawDocumentBuf>>,
}

/// An OP_MSG: one body document and any number of document sequences.
#[derive(Clone, Debug, PartialEq)]
pub struct OpMsg {
    /// The flag bits.
    pub flags: MsgFlags,
    /// The kind-0 section: the command or the reply.
    pub body: Document,
    /// The kind-1 sections.
    pub sequences: Vec<DocumentSequence>,
}

impl OpMsg {
    /// A message with only a body and no flags.
    #[cfg(test)]
    pub fn new(body: Document) -> Self {
        OpMsg {
            flags: MsgFlags::default(),
            body,
            sequences: Vec::new(),
        }
    }
}

/// An OP_REPLY, the answer to the first (OP_QUERY) hello.
#[derive(Clone, Debug, PartialEq)]
pub struct OpReply {
    /// `responseFlags` (see [`REPLY_FLAG_QUERY_FAILURE`]).
    pub flags: i32,
    /// `cursorID`.
    pub cursor_id: i64,
    /// `startingFrom`.
    pub starting_from: i32,
    /// The returned documents.
    pub documents: Vec<Document>,
}

/// A decoded reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// An OP_MSG.
    Msg(OpMsg),
    /// An OP_REPLY.
    Reply(OpReply),
}

impl Message {
    /// The reply document: the OP_MSG body, or the only document of an
    /// OP_REPLY. Document sequences of an OP_MSG are dropped (servers do not
    /// send them in replies to the commands this driver issues).
    pub fn into_reply_document(self) -> Result<Document> {
        match self {
            Message::Msg(msg) => Ok(msg.body),
            Message::Reply(reply) => {
                let failed = reply.flags & REPLY_FLAG_QUERY_FAILURE != 0;
                let Some(document) = reply.documents.into_iter().next() else {
                    return Err(Error::protocol(None, "OP_REPLY contains no document"));
                };
                if failed {
                    let message = document
                        .get_str("$err")
                        .unwrap_or("no $err field in the reply");
                    return Err(Error::protocol(
                        None,
                        format!("OP_QUERY failed (QueryFailure flag set): {message}"),
                    ));
                }
                Ok(document)
            }
        }
    }

    /// Whether the sender will send another message without a request
    /// (`moreToCome`); the socket must keep reading or be closed.
    pub fn more_to_come(&self) -> bool {
        match self {
            Message::Msg(msg) => msg.flags.has(MsgFlags::MORE_TO_COME),
            Message::Reply(_) => false,
        }
    }
}

/// Encodes an OP_MSG, header included, appending it to `out`. When
/// `msg.flags` has [`MsgFlags::CHECKSUM_PRESENT`] the CRC-32C checksum is
/// computed and appended. Fails, leaving `out` as it was, if a document
/// cannot be serialised, an identifier is invalid or repeated, or the message
/// would exceed `max_message_size`.
pub fn encode_msg(
    request_id: i32,
    response_to: i32,
    msg: &OpMsg,
    max_message_size: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    let parts = MsgParts {
        flags: msg.flags,
        body: MsgBody::Document(&msg.body),
        sequences: &msg.sequences,
    };
    encode_parts(request_id, response_to, &parts, max_message_size, out)
}

/// An OP_MSG to encode, its body written from whatever holds it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MsgParts<'a> {
    /// The flag bits.
    pub(crate) flags: MsgFlags,
    /// The kind-0 section.
    pub(crate) body: MsgBody<'a>,
    /// The kind-1 sections.
    pub(crate) sequences: &'a [DocumentSequence],
}

/// Where an OP_MSG's body comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum MsgBody<'a> {
    /// A document (handshakes, monitoring, tests).
    Document(&'a Document),
    /// A command finished by the executor, written without building a
    /// document of it.
    Draft(&'a CommandDraft),
}

/// [`encode_msg`] of `parts`.
pub(crate) fn encode_parts(
    request_id: i32,
    response_to: i32,
    parts: &MsgParts<'_>,
    max_message_size: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    encode_with_tail(request_id, response_to, parts, max_message_size, &[], out)
}

/// Appends the message to `out` (`tail` counted but not written, as in
/// [`write_msg`]); on an error `out` is left as it was.
fn encode_with_tail(
    request_id: i32,
    response_to: i32,
    parts: &MsgParts<'_>,
    max_message_size: usize,
    tail: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    let start = out.len();
    let result = write_msg(
        request_id,
        response_to,
        parts,
        max_message_size,
        start,
        tail,
        out,
    );
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// A last document at least this long is written from where it lies
/// rather than copied into the encoding: past it, one more write costs
/// less than the copy and the room for it.
pub(crate) const BORROWED_TAIL_MIN: usize = 64 * 1024;

/// [`encode_parts`], except that a large last document of the last
/// sequence (a GridFS chunk; at least [`BORROWED_TAIL_MIN`] bytes) is left
/// out of `out` and returned: the message is `out`'s new bytes followed by
/// it (the header counts it), so the sender writes both and the document
/// is never copied. The bytes on the wire are those of [`encode_parts`].
/// Not with a checksum, which covers the whole message (everything goes in
/// `out` then, and the returned slice is empty).
pub(crate) fn encode_parts_borrowing_last<'a>(
    request_id: i32,
    response_to: i32,
    parts: &MsgParts<'a>,
    max_message_size: usize,
    out: &mut Vec<u8>,
) -> Result<&'a [u8]> {
    let last = parts
        .sequences
        .last()
        .and_then(|sequence| sequence.documents.last())
        .map(|document| document.as_bytes())
        .filter(|bytes| bytes.len() >= BORROWED_TAIL_MIN);
    let tail = match last {
        Some(bytes) if !parts.flags.has(MsgFlags::CHECKSUM_PRESENT) => bytes,
        _ => &[],
    };
    encode_with_tail(request_id, response_to, parts, max_message_size, tail, out).map(|()| tail)
}

/// Writes the message; `tail`, when not empty, is the last sequence's last
/// document, counted but not written (it follows `out` on the wire).
fn write_msg(
    request_id: i32,
    response_to: i32,
    msg: &MsgParts<'_>,
    max_message_size: usize,
    start: usize,
    tail: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    let checksum = msg.flags.has(MsgFlags::CHECKSUM_PRESENT);
    let trailer = if checksum { 4 } else { 0 };
    let check_size = |out: &Vec<u8>, tail: usize| -> Result<()> {
        let size = out.len() - start + trailer + tail;
        if size > max_message_size {
            return Err(Error::invalid_argument(format!(
                "message of at least {size} bytes exceeds maxMessageSizeBytes {max_message_size}"
            )));
        }
        Ok(())
    };

    out.extend_from_slice(&[0; HEADER_LEN]);
    out.extend_from_slice(&msg.flags.0.to_le_bytes());
    out.push(0);
    match msg.body {
        MsgBody::Document(body) => write_document(body, out, "command body")?,
        MsgBody::Draft(draft) => draft
            .write(out)
            .map_err(|error| write_error(error, "command body"))?,
    }
    check_size(out, 0)?;

    write_sequences(msg.sequences, out, tail.len(), &check_size)?;
    check_size(out, tail.len())?;

    let length = i32::try_from(out.len() - start + trailer + tail.len())
        .map_err(|_| Error::invalid_argument("message exceeds 2 GiB"))?;
    let header = Header {
        length,
        request_id,
        response_to,
        op_code: op_code::MSG,
    };
    out[start..start + HEADER_LEN].copy_from_slice(&header.to_bytes());
    if checksum {
        let crc = crc32c(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
    Ok(())
}

/// The kind-1 sections, each length-prefixed; identifiers must be NUL-free
/// and distinct, and `check_size` runs after every document so an
/// oversized message fails before it is fully written. A `tail` of more
/// than 0 bytes is the last sequence's last document, counted in its
/// section's size but left for the sender to write.
fn write_sequences(
    sequences: &[DocumentSequence],
    out: &mut Vec<u8>,
    tail: usize,
    check_size: &impl Fn(&Vec<u8>, usize) -> Result<()>,
) -> Result<()> {
    let mut identifiers = HashSet::new();
    for (index, sequence) in sequences.iter().enumerate() {
        let identifier = &sequence.identifier;
        if identifier.as_bytes().contains(&0) {
            return Err(Error::invalid_argument(format!(
                "document sequence identifier {identifier:?} contains a NUL byte"
            )));
        }
        if !identifiers.insert(identifier.as_str()) {
            return Err(Error::invalid_argument(format!(
                "document sequence identifier {identifier:?} appears twice in one message"
            )));
        }
        out.push(1);
        let size_at = out.len();
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(identifier.as_bytes());
        out.push(0);
        let left_out = if index + 1 == sequences.len() {
            tail
        } else {
            0
        };
        let written = sequence.documents.len() - usize::from(left_out > 0);
        for document in &sequence.documents[..written] {
            out.extend_from_slice(document.as_bytes());
            check_size(out, 0)?;
        }
        let size = i32::try_from(out.len() - size_at + left_out)
            .map_err(|_| Error::invalid_argument("document sequence exceeds 2 GiB"))?;
        out[size_at..size_at + 4].copy_from_slice(&size.to_le_bytes());
    }
    Ok(())
}

/// Encodes an OP_QUERY running `command` on `<db>.$cmd` (numberToSkip 0,
/// numberToReturn -1), appending it to `out`. `secondary_ok` sets the
/// SecondaryOk flag. Used only for the first legacy hello on a socket.
pub fn encode_query(
    request_id: i32,
    db: &str,
    command: &Document,
    secondary_ok: bool,
    out: &mut Vec<u8>,
) -> Result<()> {
    if db.is_empty() || db.as_bytes().contains(&0) {
        return Err(Error::invalid_argument(format!(
            "invalid database name {db:?} for OP_QUERY"
        )));
    }
    let start = out.len();
    let flags = if secondary_ok {
        QUERY_FLAG_SECONDARY_OK
    } else {
        0
    };
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(db.as_bytes());
    out.extend_from_slice(b".$cmd\0");
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&(-1i32).to_le_bytes());
    if let Err(error) = write_document(command, out, "command") {
        out.truncate(start);
        return Err(error);
    }
    let Ok(length) = i32::try_from(out.len() - start) else {
        out.truncate(start);
        return Err(Error::invalid_argument("OP_QUERY exceeds 2 GiB"));
    };
    let header = Header {
        length,
        request_id,
        response_to: 0,
        op_code: op_code::QUERY,
    };
    out[start..start + HEADER_LEN].copy_from_slice(&header.to_bytes());
    Ok(())
}

fn write_document(document: &Document, out: &mut Vec<u8>, what: &str) -> Result<()> {
    crate::proto::bson_write::write_document(document, out)
        .map_err(|error| write_error(error, what))
}

#[cold]
pub(crate) fn write_error(error: WriteError, what: &str) -> Error {
    match error {
        WriteError::TooDeep => Error::invalid_argument(format!(
            "{what} is nested deeper than {MAX_BSON_DEPTH} levels of documents and arrays"
        )),
        WriteError::Invalid(reason) => {
            Error::invalid_argument(format!("cannot serialise {what} as BSON: {reason}"))
        }
    }
}

/// Decodes the body of a reply (the bytes after the header) for `header`.
pub fn decode(header: &Header, body: &[u8]) -> Result<Message> {
    if body.len() != header.body_len() {
        return Err(Error::protocol(
            None,
            format!(
                "message length {} announces a {}-byte body but {} bytes were given",
                header.length,
                header.body_len(),
                body.len()
            ),
        ));
    }
    match header.op_code {
        op_code::MSG => decode_msg(header, body).map(Message::Msg),
        op_code::REPLY => decode_reply(body).map(Message::Reply),
        other => Err(Error::protocol(
            None,
            format!("cannot decode a reply with op code {other}"),
        )),
    }
}

fn decode_msg(header: &Header, body: &[u8]) -> Result<OpMsg> {
    let (flags, range, sequences) = split_msg(header, body)?;
    let body = parse_document(&body[range]).map_err(|reason| {
        Error::protocol(
            None,
            format!("OP_MSG: invalid BSON in body section: {reason}"),
        )
    })?;
    Ok(OpMsg {
        flags,
        body,
        sequences,
    })
}

/// Decodes the reply to a command (the body after the header), keeping a
/// cursor batch as bytes (see [`Reply`]); also says whether the server set
/// `moreToCome`. An OP_REPLY is decoded whole.
pub fn decode_command_reply(header: &Header, body: Vec<u8>) -> Result<(Reply, bool)> {
    if header.op_code != op_code::MSG || body.len() != header.body_len() {
        let message = decode(header, &body)?;
        let more_to_come = message.more_to_come();
        return Ok((
            Reply::from_document(message.into_reply_document()?),
            more_to_come,
        ));
    }
    let (flags, range, _sequences) = split_msg(header, &body)?;
    let reply = Reply::parse(body, range).map_err(|reason| {
        Error::protocol(
            None,
            format!("OP_MSG: invalid BSON in body section: {reason}"),
        )
    })?;
    Ok((reply, flags.has(MsgFlags::MORE_TO_COME)))
}

/// Checks the CRC-32C trailer when `checksumPresent` is set; returns where
/// the sections end (before the trailer).
fn verify_checksum(header: &Header, body: &[u8], flags: MsgFlags) -> Result<usize> {
    let mut sections_end = body.len();
    if flags.has(MsgFlags::CHECKSUM_PRESENT) {
        if body.len() < 8 {
            return Err(Error::protocol(
                None,
                "OP_MSG has checksumPresent set but no room for a checksum",
            ));
        }
        sections_end -= 4;
        let expected = u32::from_le_bytes([
            body[sections_end],
            body[sections_end + 1],
            body[sections_end + 2],
            body[sections_end + 3],
        ]);
        let mut crc = Crc32c::new();
        crc.update(&header.to_bytes());
        crc.update(&body[..sections_end]);
        let actual = crc.finish();
        if actual != expected {
            return Err(Error::protocol(
                None,
                format!("OP_MSG checksum mismatch: message says {expected:#010x}, content gives {actual:#010x}"),
            ));
        }
    }
    Ok(sections_end)
}

/// Checks an OP_MSG's flags, checksum and sections; returns the flags, the
/// span of the body document (unparsed) and the document sequences.
fn split_msg(
    header: &Header,
    body: &[u8],
) -> Result<(MsgFlags, std::ops::Range<usize>, Vec<DocumentSequence>)> {
    let flags = MsgFlags(Reader::new(body, "OP_MSG").u32("flagBits")?);
    let unknown_required = flags.0 & MsgFlags::REQUIRED_MASK & !MsgFlags::KNOWN_REQUIRED;
    if unknown_required != 0 {
        return Err(Error::protocol(
            None,
            format!("OP_MSG has unknown required flag bits set: {unknown_required:#06x}"),
        ));
    }

    let sections_end = verify_checksum(header, body, flags)?;

    let mut reader = Reader::new(&body[..sections_end], "OP_MSG");
    reader.skip(4)?;
    let mut body_document = None;
    let mut sequences: Vec<DocumentSequence> = Vec::new();
    if reader.remaining() == 0 {
        return Err(Error::protocol(None, "OP_MSG has no sections"));
    }
    while reader.remaining() > 0 {
        match reader.u8("section kind")? {
            0 => {
                let start = reader.position;
                reader.document_bytes("body section")?;
                if body_document.replace(start..reader.position).is_some() {
                    return Err(Error::protocol(
                        None,
                        "OP_MSG has more than one body (kind 0) section",
                    ));
                }
            }
            1 => {
                let sequence = read_sequence(&mut reader)?;
                if sequences
                    .iter()
                    .any(|s| s.identifier == sequence.identifier)
                {
                    return Err(Error::protocol(
                        None,
                        format!(
                            "OP_MSG has two document sequences named {:?}",
                            sequence.identifier
                        ),
                    ));
                }
                sequences.push(sequence);
            }
            kind => {
                return Err(Error::protocol(
                    None,
                    format!("OP_MSG has a section of unknown kind {kind}"),
                ))
            }
        }
    }
    let body = body_document
        .ok_or_else(|| Error::protocol(None, "OP_MSG has no body (kind 0) section"))?;
    Ok((flags, body, sequences))
}

fn read_sequence(reader: &mut Reader<'_>) -> Result<DocumentSequence> {
    let size = reader.i32("document sequence size")?;
    // The size counts itself, then at least the identifier's NUL.
    if size < 5 || (size - 4) as usize > reader.remaining() {
        return Err(Error::protocol(
            None,
            format!(
                "OP_MSG document sequence size {size} does not fit the {} bytes left",
                reader.remaining() + 4
            ),
        ));
    }
    let mut payload = Reader::new(reader.take((size - 4) as usize)?, "document sequence");
    let identifier = payload.cstring("document sequence identifier")?;
    let mut documents = Vec::new();
    while payload.remaining() > 0 {
        let bytes = payload.document_bytes("document sequence")?;
        parse_document(bytes).map_err(|reason| {
            Error::protocol(
                None,
                format!("document sequence: invalid BSON in document sequence: {reason}"),
            )
        })?;
        let raw = RawDocumentBuf::from_bytes(bytes.to_vec())
            .map_err(|e| Error::protocol(None, format!("document sequence: {e}")))?;
        documents.push(Arc::new(raw));
    }
    Ok(DocumentSequence {
        identifier,
        documents,
    })
}

fn decode_reply(body: &[u8]) -> Result<OpReply> {
    let mut reader = Reader::new(body, "OP_REPLY");
    let flags = reader.i32("responseFlags")?;
    let cursor_id = reader.i64("cursorID")?;
    let starting_from = reader.i32("startingFrom")?;
    let number_returned = reader.i32("numberReturned")?;
    if number_returned < 0 {
        return Err(Error::protocol(
            None,
            format!("OP_REPLY numberReturned is negative ({number_returned})"),
        ));
    }
    let mut documents = Vec::new();
    while reader.remaining() > 0 {
        if documents.len() == number_returned as usize {
            return Err(Error::protocol(
                None,
                format!(
                    "OP_REPLY has {} bytes after its {number_returned} documents",
                    reader.remaining()
                ),
            ));
        }
        documents.push(reader.document("OP_REPLY document")?);
    }
    if documents.len() != number_returned as usize {
        return Err(Error::protocol(
            None,
            format!(
                "OP_REPLY numberReturned is {number_returned} but the message holds {} documents",
                documents.len()
            ),
        ));
    }
    Ok(OpReply {
        flags,
        cursor_id,
        starting_from,
        documents,
    })
}

/// A cursor over untrusted bytes; every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
    context: &'static str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], context: &'static str) -> Self {
        Reader {
            bytes,
            position: 0,
            context,
        }
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        self.take_named(len, "data")
    }

    fn take_named(&mut self, len: usize, what: &str) -> Result<&'a [u8]> {
        if len > self.remaining() {
            return Err(Error::protocol(
                None,
                format!(
                    "{} truncated: {what} needs {len} bytes, {} left",
                    self.context,
                    self.remaining()
                ),
            ));
        }
        let slice = &self.bytes[self.position..self.position + len];
        self.position += len;
        Ok(slice)
    }

    fn skip(&mut self, len: usize) -> Result<()> {
        self.take(len).map(|_| ())
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut array = [0; N];
        array.copy_from_slice(self.take_named(N, what)?);
        Ok(array)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        self.array(what).map(i32::from_le_bytes)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn i64(&mut self, what: &str) -> Result<i64> {
        self.array(what).map(i64::from_le_bytes)
    }

    fn cstring(&mut self, what: &str) -> Result<String> {
        let rest = &self.bytes[self.position..];
        let Some(nul) = rest.iter().position(|&b| b == 0) else {
            return Err(Error::protocol(
                None,
                format!("{} truncated: {what} has no terminating NUL", self.context),
            ));
        };
        let text = std::str::from_utf8(&rest[..nul]).map_err(|_| {
            Error::protocol(None, format!("{}: {what} is not valid UTF-8", self.context))
        })?;
        self.position += nul + 1;
        Ok(text.to_owned())
    }

    /// Reads one BSON document whose leading length must fit the bytes left.
    fn document(&mut self, what: &str) -> Result<Document> {
        let bytes = self.document_bytes(what)?;
        parse_document(bytes).map_err(|reason| {
            Error::protocol(
                None,
                format!("{}: invalid BSON in {what}: {reason}", self.context),
            )
        })
    }

    /// Takes the bytes of one BSON document whose leading length must fit
    /// the bytes left, without parsing them.
    fn document_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let rest = &self.bytes[self.position..];
        if rest.len() < 4 {
            return Err(Error::protocol(
                None,
                format!(
                    "{} truncated: {what} has no room for a BSON length",
                    self.context
                ),
            ));
        }
        let length = i32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        if length < 5 || length as usize > rest.len() {
            return Err(Error::protocol(
                None,
                format!(
                    "{}: {what} BSON length {length} does not fit the {} bytes left",
                    self.context,
                    rest.len()
                ),
            ));
        }
        self.take(length as usize)
    }
}

/// Converts exactly `bytes` (one whole document) to a [`Document`].
fn parse_document(bytes: &[u8]) -> std::result::Result<Document, String> {
    // Nesting past the limit is refused by the conversion itself.
    crate::proto::raw_walk::to_document(bytes)
}

/// CRC-32C (Castagnoli), the OP_MSG checksum.
pub fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = Crc32c::new();
    crc.update(bytes);
    crc.finish()
}

/// Incremental CRC-32C, so the header and body need not be contiguous.
struct Crc32c(u32);

impl Crc32c {
    fn new() -> Self {
        Crc32c(!0)
    }

    fn update(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = CRC32C_TABLE[((self.0 ^ u32::from(byte)) & 0xFF) as usize] ^ (self.0 >> 8);
        }
    }

    fn finish(&self) -> u32 {
        !self.0
    }
}

/// Reflected Castagnoli polynomial.
const CRC32C_POLYNOMIAL: u32 = 0x82F6_3B78;

const CRC32C_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ CRC32C_POLYNOMIAL
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    const MAX: usize = DEFAULT_MAX_MESSAGE_SIZE;

    fn split(frame: &[u8]) -> (Header, &[u8]) {
        let header_bytes: [u8; HEADER_LEN] = frame[..HEADER_LEN].try_into().unwrap();
        (
            Header::parse(&header_bytes, MAX).unwrap(),
            &frame[HEADER_LEN..],
        )
    }

    fn decode_frame(frame: &[u8]) -> Result<Message> {
        let header_bytes: [u8; HEADER_LEN] = frame
            .get(..HEADER_LEN)
            .ok_or_else(|| Error::protocol(None, "short frame"))?
            .try_into()
            .unwrap();
        let header = Header::parse(&header_bytes, MAX)?;
        let body = frame
            .get(HEADER_LEN..)
            .ok_or_else(|| Error::protocol(None, "short frame"))?;
        decode(&header, body)
    }

    fn error_message(result: Result<impl std::fmt::Debug>) -> String {
        match result {
            Ok(value) => panic!("expected an error, got {value:?}"),
            Err(error) => error.to_string(),
        }
    }

    fn sample_msg() -> OpMsg {
        OpMsg {
            flags: MsgFlags::default(),
            body: doc! { "insert": "coll", "$db": "test", "ordered": true },
            sequences: vec![
                DocumentSequence {
                    identifier: "documents".into(),
                    documents: raw(&[doc! { "_id": 1 }, doc! { "_id": 2, "x": "y" }]),
                },
                DocumentSequence {
                    identifier: "empty".into(),
                    documents: vec![],
                },
                DocumentSequence {
                    identifier: "more".into(),
                    documents: raw(&[doc! { "a": { "b": [1, 2, 3] } }]),
                },
            ],
        }
    }

    fn encoded(msg: &OpMsg) -> Vec<u8> {
        let mut out = Vec::new();
        encode_msg(7, 3, msg, MAX, &mut out).unwrap();
        out
    }

    /// Builds an OP_MSG frame from raw body bytes (flags + sections), fixing
    /// up the header length.
    fn frame_from_body(body: &[u8]) -> Vec<u8> {
        let header = Header {
            length: (HEADER_LEN + body.len()) as i32,
            request_id: 1,
            response_to: 0,
            op_code: op_code::MSG,
        };
        let mut frame = header.to_bytes().to_vec();
        frame.extend_from_slice(body);
        frame
    }

    fn bson_bytes(document: &Document) -> Vec<u8> {
        let mut bytes = Vec::new();
        document.to_writer(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    #[test]
    fn op_msg_round_trips_with_sequences() {
        let msg = sample_msg();
        let frame = encoded(&msg);
        let (header, body) = split(&frame);
        assert_eq!(header.length as usize, frame.len());
        assert_eq!(header.request_id, 7);
        assert_eq!(header.response_to, 3);
        assert_eq!(header.op_code, op_code::MSG);
        assert_eq!(header.body_len(), frame.len() - HEADER_LEN);
        assert_eq!(decode(&header, body).unwrap(), Message::Msg(msg));
    }

    /// A message whose last document is a GridFS chunk's size.
    fn large_last_document() -> OpMsg {
        let mut msg = sample_msg();
        let chunk = doc! { "n": 0, "data": bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![7; BORROWED_TAIL_MIN],
        } };
        msg.sequences[2].documents.extend(raw(&[chunk]));
        msg
    }

    #[test]
    fn a_large_last_document_is_borrowed_and_the_bytes_are_the_same() {
        let msg = large_last_document();
        let whole = encoded(&msg);
        let parts = MsgParts {
            flags: msg.flags,
            body: MsgBody::Document(&msg.body),
            sequences: &msg.sequences,
        };
        let mut head = Vec::new();
        let tail = encode_parts_borrowing_last(7, 3, &parts, MAX, &mut head).unwrap();
        let last = msg.sequences[2].documents.last().unwrap();
        assert_eq!(tail.as_ptr(), last.as_bytes().as_ptr(), "not copied");
        assert!(head.len() < 200, "{} bytes encoded", head.len());
        assert_eq!([head.as_slice(), tail].concat(), whole);

        // The size limit counts the borrowed bytes.
        let mut out = Vec::new();
        let error = encode_parts_borrowing_last(7, 3, &parts, whole.len() - 1, &mut out);
        assert!(error_message(error).contains("maxMessageSizeBytes"));
        assert!(out.is_empty());

        // A checksum covers the whole message: nothing is borrowed.
        let parts = MsgParts {
            flags: MsgFlags::CHECKSUM_PRESENT,
            ..parts
        };
        let mut out = Vec::new();
        let tail = encode_parts_borrowing_last(7, 3, &parts, MAX, &mut out).unwrap();
        assert!(tail.is_empty());
        assert_eq!(
            decode_frame(&out).unwrap(),
            Message::Msg(OpMsg {
                flags: MsgFlags::CHECKSUM_PRESENT,
                ..msg
            })
        );
    }

    #[test]
    fn op_msg_round_trips_with_more_to_come_and_checksum() {
        let mut msg = sample_msg();
        msg.flags = MsgFlags::MORE_TO_COME | MsgFlags::CHECKSUM_PRESENT;
        let frame = encoded(&msg);
        let (header, body) = split(&frame);
        let decoded = decode(&header, body).unwrap();
        assert!(decoded.more_to_come());
        assert_eq!(decoded, Message::Msg(msg));
        let expected = crc32c(&frame[..frame.len() - 4]);
        assert_eq!(frame[frame.len() - 4..], expected.to_le_bytes());
    }

    #[test]
    fn sequence_before_body_is_accepted() {
        let mut body = vec![0, 0, 0, 0, 1];
        let document = bson_bytes(&doc! { "x": 1 });
        body.extend_from_slice(&((4 + 4 + document.len()) as i32).to_le_bytes());
        body.extend_from_slice(b"ids\0");
        body.extend_from_slice(&document);
        body.push(0);
        body.extend_from_slice(&bson_bytes(&doc! { "ok": 1 }));
        let message = decode_frame(&frame_from_body(&body)).unwrap();
        let Message::Msg(msg) = &message else {
            panic!("expected OP_MSG")
        };
        assert_eq!(msg.sequences[0].identifier, "ids");
        assert_eq!(msg.sequences[0].documents, raw(&[doc! { "x": 1 }]));
        assert!(!message.more_to_come());
        assert_eq!(message.into_reply_document().unwrap(), doc! { "ok": 1 });
    }

    #[test]
    fn exhaust_allowed_is_an_optional_bit() {
        let mut msg = OpMsg::new(doc! { "ok": 1 });
        msg.flags = MsgFlags::EXHAUST_ALLOWED;
        let frame = encoded(&msg);
        assert_eq!(frame[16..20], (1u32 << 16).to_le_bytes());
        // Unknown optional bits (16-31) are ignored by a receiver.
        let mut frame = frame;
        frame[19] |= 0x80;
        assert!(decode_frame(&frame).is_ok());
        assert!(MsgFlags(0x0001_0003).has(MsgFlags::EXHAUST_ALLOWED));
        assert!(!MsgFlags(2).has(MsgFlags::CHECKSUM_PRESENT));
    }

    #[test]
    fn encode_refuses_messages_over_the_size_limit_and_leaves_out_untouched() {
        let msg = sample_msg();
        let size = encoded(&msg).len();
        let mut out = vec![9, 9];
        let error = encode_msg(1, 0, &msg, size - 1, &mut out).unwrap_err();
        assert!(error.to_string().contains("maxMessageSizeBytes"), "{error}");
        assert_eq!(out, vec![9, 9]);
        encode_msg(1, 0, &msg, size, &mut out).unwrap();
        assert_eq!(out.len(), size + 2);

        let mut with_checksum = msg.clone();
        with_checksum.flags = MsgFlags::CHECKSUM_PRESENT;
        let mut out = Vec::new();
        assert!(encode_msg(1, 0, &with_checksum, size + 3, &mut out).is_err());
        assert!(out.is_empty());
        encode_msg(1, 0, &with_checksum, size + 4, &mut out).unwrap();
    }

    #[test]
    fn encode_refuses_bad_identifiers() {
        let mut msg = sample_msg();
        msg.sequences[1].identifier = "documents".into();
        let mut out = Vec::new();
        assert!(error_message(encode_msg(1, 0, &msg, MAX, &mut out)).contains("twice"));
        msg.sequences[1].identifier = "a\0b".into();
        assert!(error_message(encode_msg(1, 0, &msg, MAX, &mut out)).contains("NUL"));
        assert!(out.is_empty());
    }

    #[test]
    fn op_query_layout() {
        let command = doc! { "isMaster": 1, "helloOk": true };
        let mut out = Vec::new();
        encode_query(5, "admin", &command, false, &mut out).unwrap();
        let header = Header {
            length: i32::from_le_bytes(out[0..4].try_into().unwrap()),
            request_id: i32::from_le_bytes(out[4..8].try_into().unwrap()),
            response_to: i32::from_le_bytes(out[8..12].try_into().unwrap()),
            op_code: i32::from_le_bytes(out[12..16].try_into().unwrap()),
        };
        assert_eq!(header.length as usize, out.len());
        assert_eq!((header.request_id, header.response_to), (5, 0));
        assert_eq!(header.op_code, op_code::QUERY);
        assert_eq!(out[16..20], 0i32.to_le_bytes());
        assert_eq!(&out[20..31], b"admin.$cmd\0");
        assert_eq!(out[31..35], 0i32.to_le_bytes());
        assert_eq!(out[35..39], (-1i32).to_le_bytes());
        assert_eq!(out[39..], bson_bytes(&command)[..]);

        let mut out = Vec::new();
        encode_query(5, "admin", &command, true, &mut out).unwrap();
        assert_eq!(out[16..20], 4i32.to_le_bytes());
        assert!(encode_query(5, "", &command, false, &mut out).is_err());
        assert!(encode_query(5, "a\0", &command, false, &mut out).is_err());
    }

    fn reply_frame(flags: i32, number_returned: i32, documents: &[Document]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&flags.to_le_bytes());
        body.extend_from_slice(&0i64.to_le_bytes());
        body.extend_from_slice(&0i32.to_le_bytes());
        body.extend_from_slice(&number_returned.to_le_bytes());
        for document in documents {
            body.extend_from_slice(&bson_bytes(document));
        }
        let mut frame = frame_from_body(&body);
        frame[12..16].copy_from_slice(&op_code::REPLY.to_le_bytes());
        frame
    }

    #[test]
    fn op_reply_decodes() {
        let reply = doc! { "ismaster": true, "maxWireVersion": 21, "ok": 1.0 };
        let message = decode_frame(&reply_frame(8, 1, std::slice::from_ref(&reply))).unwrap();
        let Message::Reply(op_reply) = &message else {
            panic!("expected OP_REPLY")
        };
        assert_eq!(op_reply.flags, 8);
        assert!(!message.more_to_come());
        assert_eq!(message.into_reply_document().unwrap(), reply);
    }

    #[test]
    fn op_reply_hostile_or_failed() {
        let document = doc! { "ok": 1 };
        let two = [document.clone(), document.clone()];
        let empty = decode_frame(&reply_frame(0, 0, &[])).unwrap();
        assert!(error_message(empty.into_reply_document()).contains("no document"));
        assert!(error_message(decode_frame(&reply_frame(0, 2, &two[..1])))
            .contains("numberReturned is 2"));
        assert!(error_message(decode_frame(&reply_frame(0, 1, &two))).contains("bytes after"));
        assert!(error_message(decode_frame(&reply_frame(0, -1, &[]))).contains("negative"));
        assert!(decode_frame(&reply_frame(0, i32::MAX, &two)).is_err());
        let failed = decode_frame(&reply_frame(
            REPLY_FLAG_QUERY_FAILURE,
            1,
            &[doc! { "$err": "boom", "code": 1 }],
        ))
        .unwrap();
        assert!(error_message(failed.into_reply_document()).contains("boom"));
        let mut truncated = reply_frame(0, 1, &[document]);
        truncated.truncate(30);
        truncated[0..4].copy_from_slice(&30i32.to_le_bytes());
        assert!(error_message(decode_frame(&truncated)).contains("truncated"));
    }

    #[test]
    fn header_validation() {
        let header_with = |length: i32, op: i32| {
            Header {
                length,
                request_id: 1,
                response_to: 2,
                op_code: op,
            }
            .to_bytes()
        };
        assert!(Header::parse(&header_with(16, op_code::MSG), MAX).is_ok());
        assert!(Header::parse(&header_with(MAX as i32, op_code::REPLY), MAX).is_ok());
        for length in [15, 0, -1, i32::MIN] {
            let message = error_message(Header::parse(&header_with(length, op_code::MSG), MAX));
            assert!(message.contains("shorter"), "{message}");
        }
        let message = error_message(Header::parse(
            &header_with(MAX as i32 + 1, op_code::MSG),
            MAX,
        ));
        assert!(message.contains("maxMessageSizeBytes"), "{message}");
        assert!(Header::parse(&header_with(100, op_code::COMPRESSED), MAX).is_ok());
        for op in [op_code::QUERY, 0, 2010, -5] {
            let message = error_message(Header::parse(&header_with(100, op), MAX));
            assert!(message.contains("unexpected op code"), "{message}");
        }
    }

    #[test]
    fn body_length_must_match_header() {
        let frame = encoded(&sample_msg());
        let (header, body) = split(&frame);
        assert!(error_message(decode(&header, &body[..body.len() - 1])).contains("announces"));
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(error_message(decode(&header, &longer)).contains("announces"));
    }

    #[test]
    fn truncated_frames_are_refused() {
        let msg = sample_msg();
        let frame = encoded(&msg);
        let (header, body) = split(&frame);
        let mut decoded_prefixes = 0;
        for cut in 0..body.len() {
            // The header still announces the full length: the bytes are missing.
            assert!(
                decode(&header, &body[..cut]).is_err(),
                "cut at {cut} decoded"
            );
            // The header was rewritten to match: only a cut between two
            // sections leaves a valid (shorter) message.
            let mut truncated = frame[..HEADER_LEN + cut].to_vec();
            truncated[0..4].copy_from_slice(&((HEADER_LEN + cut) as i32).to_le_bytes());
            if let Ok(Message::Msg(shorter)) = decode_frame(&truncated) {
                assert!(
                    shorter.sequences.len() < msg.sequences.len(),
                    "cut at {cut}"
                );
                decoded_prefixes += 1;
            }
        }
        // After the body and after each of the first two sequences.
        assert_eq!(decoded_prefixes, 3);
    }

    #[test]
    fn unknown_required_flag_bits_are_refused() {
        for bit in 2..16 {
            let mut frame = encoded(&OpMsg::new(doc! { "ok": 1 }));
            frame[16..20].copy_from_slice(&(1u32 << bit).to_le_bytes());
            let message = error_message(decode_frame(&frame));
            assert!(
                message.contains("unknown required flag"),
                "bit {bit}: {message}"
            );
        }
    }

    #[test]
    fn section_errors() {
        let body = bson_bytes(&doc! { "ok": 1 });
        let mut two_bodies = vec![0, 0, 0, 0, 0];
        two_bodies.extend_from_slice(&body);
        two_bodies.push(0);
        two_bodies.extend_from_slice(&body);
        assert!(error_message(decode_frame(&frame_from_body(&two_bodies)))
            .contains("more than one body"));

        let no_sections = [0u8; 4];
        assert!(error_message(decode_frame(&frame_from_body(&no_sections))).contains("no sections"));

        let mut only_sequence = vec![0, 0, 0, 0, 1];
        only_sequence.extend_from_slice(&6i32.to_le_bytes());
        only_sequence.extend_from_slice(b"a\0");
        assert!(error_message(decode_frame(&frame_from_body(&only_sequence))).contains("no body"));

        for kind in [2u8, 3, 255] {
            let mut bad_kind = vec![0, 0, 0, 0, kind];
            bad_kind.extend_from_slice(&body);
            let message = error_message(decode_frame(&frame_from_body(&bad_kind)));
            assert!(message.contains("unknown kind"), "{message}");
        }

        let mut trailing = vec![0, 0, 0, 0, 0];
        trailing.extend_from_slice(&body);
        trailing.push(0);
        assert!(decode_frame(&frame_from_body(&trailing)).is_err());
    }

    #[test]
    fn duplicate_sequence_identifiers_are_refused() {
        let mut body = vec![0, 0, 0, 0, 0];
        body.extend_from_slice(&bson_bytes(&doc! { "ok": 1 }));
        for _ in 0..2 {
            body.push(1);
            body.extend_from_slice(&6i32.to_le_bytes());
            body.extend_from_slice(b"x\0");
        }
        assert!(
            error_message(decode_frame(&frame_from_body(&body))).contains("two document sequences")
        );
    }

    fn raw(documents: &[Document]) -> Vec<Arc<RawDocumentBuf>> {
        documents
            .iter()
            .map(|d| Arc::new(RawDocumentBuf::from_document(d).unwrap()))
            .collect()
    }

    fn sequence_frame(declared_size: i32, sequence_documents: &[Document]) -> Vec<u8> {
        let mut body = vec![0, 0, 0, 0, 0];
        body.extend_from_slice(&bson_bytes(&doc! { "ok": 1 }));
        body.push(1);
        body.extend_from_slice(&declared_size.to_le_bytes());
        body.extend_from_slice(b"docs\0");
        for document in sequence_documents {
            body.extend_from_slice(&bson_bytes(document));
        }
        frame_from_body(&body)
    }

    #[test]
    fn document_sequence_sizes_that_lie_are_refused() {
        let documents = [doc! { "a": 1 }, doc! { "b": 2 }];
        let true_size = 4 + 5 + 2 * bson_bytes(&documents[0]).len() as i32;
        let Message::Msg(msg) = decode_frame(&sequence_frame(true_size, &documents)).unwrap()
        else {
            panic!("expected OP_MSG")
        };
        assert_eq!(msg.sequences[0].documents, raw(&documents));

        for lie in [
            true_size + 1,
            true_size + 1000,
            i32::MAX,
            -1,
            i32::MIN,
            0,
            4,
            7,
        ] {
            let result = decode_frame(&sequence_frame(lie, &documents));
            assert!(result.is_err(), "size {lie} accepted");
        }
        // Smaller by part of a document: the sequence ends mid-document.
        let message = error_message(decode_frame(&sequence_frame(true_size - 3, &documents)));
        assert!(message.contains("document sequence"), "{message}");
        // Identifier without its NUL inside the declared size.
        let message = error_message(decode_frame(&sequence_frame(6, &[])));
        assert!(message.contains("identifier"), "{message}");
    }

    #[test]
    fn bson_length_fields_that_lie_are_refused() {
        let body_bytes = bson_bytes(&doc! { "ok": 1, "s": "text" });
        for lie in [
            0i32,
            4,
            -1,
            i32::MIN,
            i32::MAX,
            body_bytes.len() as i32 + 1,
            body_bytes.len() as i32 - 1,
        ] {
            let mut body = vec![0, 0, 0, 0, 0];
            let mut document = body_bytes.clone();
            document[0..4].copy_from_slice(&lie.to_le_bytes());
            body.extend_from_slice(&document);
            assert!(
                decode_frame(&frame_from_body(&body)).is_err(),
                "BSON length {lie} accepted"
            );
        }
    }

    #[test]
    fn invalid_bson_is_refused() {
        let good = bson_bytes(&doc! { "ok": 1, "s": "text" });
        // Unknown element type.
        let mut bad_type = good.clone();
        bad_type[4] = 0x7F;
        // Invalid UTF-8 in a string value.
        let mut bad_utf8 = good.clone();
        let last = bad_utf8.len() - 3;
        bad_utf8[last] = 0xFF;
        // Missing terminator.
        let mut no_terminator = good.clone();
        *no_terminator.last_mut().unwrap() = 1;
        for bad in [bad_type, bad_utf8, no_terminator] {
            let mut body = vec![0, 0, 0, 0, 0];
            body.extend_from_slice(&bad);
            let message = error_message(decode_frame(&frame_from_body(&body)));
            assert!(message.contains("invalid BSON"), "{message}");
        }
    }

    #[test]
    fn deeply_nested_bson_is_refused_without_overflowing_the_stack() {
        // {a: {a: {a: ... }}} nested far deeper than any server allows.
        // Each level adds a length, type, key "a" and terminator: 8 bytes.
        let depth = 1_000_000;
        let mut document = Vec::with_capacity(8 * depth + 5);
        for level in (1..=depth).rev() {
            document.extend_from_slice(&((5 + 8 * level) as i32).to_le_bytes());
            document.extend_from_slice(&[0x03, b'a', 0]);
        }
        document.extend_from_slice(&[5, 0, 0, 0, 0]);
        document.resize(document.len() + depth, 0);
        let mut body = vec![0, 0, 0, 0, 0];
        body.extend_from_slice(&document);
        let message = error_message(decode_frame(&frame_from_body(&body)));
        assert!(message.contains("nested deeper"), "{message}");

        let mut nested = doc! { "leaf": 1 };
        for _ in 0..150 {
            nested = doc! { "a": [nested], "padding": "x".repeat(20) };
        }
        assert!(decode_frame(&encoded(&OpMsg::new(nested))).is_ok());
    }

    #[test]
    fn checksum_mismatch_is_refused() {
        let mut msg = sample_msg();
        msg.flags = MsgFlags::CHECKSUM_PRESENT;
        let frame = encoded(&msg);
        for position in [HEADER_LEN + 6, frame.len() - 5, frame.len() - 1] {
            let mut corrupted = frame.clone();
            corrupted[position] ^= 0x10;
            let message = error_message(decode_frame(&corrupted));
            assert!(message.contains("checksum mismatch"), "{message}");
        }
        // The header is covered too.
        let mut corrupted = frame.clone();
        corrupted[5] ^= 1;
        assert!(error_message(decode_frame(&corrupted)).contains("checksum mismatch"));
        // Flag set without room for a checksum.
        let short = frame_from_body(&[1, 0, 0, 0, 0]);
        assert!(error_message(decode_frame(&short)).contains("no room for a checksum"));
    }

    /// Mutates valid frames at random (fixed seed) and checks that decoding
    /// returns instead of panicking, and that nothing decodes from a frame
    /// whose header no longer matches its length.
    #[test]
    fn mutated_frames_never_panic() {
        let mut rng = fastrand::Rng::with_seed(0x5EED_0F0B);
        let mut with_checksum = sample_msg();
        with_checksum.flags = MsgFlags::CHECKSUM_PRESENT;
        let seeds = [
            encoded(&sample_msg()),
            encoded(&with_checksum),
            encoded(&OpMsg::new(
                doc! { "ok": 1.0, "nested": { "a": [1, "two", { "three": 3.0 }] } },
            )),
            reply_frame(0, 1, &[doc! { "ismaster": true, "hosts": ["a:1", "b:2"] }]),
        ];
        let mut decoded = 0;
        for _ in 0..20_000 {
            let mut frame = seeds[rng.usize(..seeds.len())].clone();
            for _ in 0..rng.usize(1..4) {
                match rng.u8(..4) {
                    0 => {
                        let i = rng.usize(..frame.len());
                        frame[i] ^= 1 << rng.u8(..8);
                    }
                    1 => {
                        let i = rng.usize(..frame.len());
                        frame[i] = rng.u8(..);
                    }
                    2 => frame.truncate(rng.usize(..=frame.len())),
                    _ => {
                        let i = rng.usize(..=frame.len());
                        frame.insert(i, rng.u8(..));
                    }
                }
                if frame.is_empty() {
                    break;
                }
            }
            // Half the time, repair the length so the body parser is reached.
            if frame.len() >= HEADER_LEN && rng.bool() {
                let length = frame.len() as i32;
                frame[0..4].copy_from_slice(&length.to_le_bytes());
            }
            if let Ok(message) = decode_frame(&frame) {
                decoded += 1;
                let _ = message.into_reply_document();
            }
        }
        // Some mutations (e.g. of request ids or string bytes) stay valid.
        assert!(decoded > 0);
    }

    /// A cursor reply kept as bytes, mutated: decoding and reading every
    /// batch document as a `Document` and as a typed value gives values or
    /// errors, never a panic; some replies still decode with a batch.
    #[test]
    fn mutated_cursor_replies_never_panic() {
        #[derive(serde::Deserialize)]
        #[allow(dead_code)]
        struct Typed {
            a: i32,
            s: String,
        }
        let batch: Vec<Document> = (0..4)
            .map(|i| doc! { "a": i, "s": "text", "n": { "x": [i, "y"] } })
            .collect();
        let reply = doc! {
            "cursor": { "firstBatch": batch, "id": 7_i64, "ns": "db.c" },
            "ok": 1.0,
        };
        let seed = encoded(&OpMsg::new(reply));
        let mut rng = fastrand::Rng::with_seed(0xBA7C_4ED5);
        let (mut with_batch, mut read) = (0, 0);
        for _ in 0..20_000 {
            let mut frame = seed.clone();
            for _ in 0..rng.usize(1..3) {
                let i = rng.usize(HEADER_LEN..frame.len());
                match rng.u8(..3) {
                    0 => frame[i] ^= 1 << rng.u8(..8),
                    1 => frame[i] = rng.u8(..),
                    _ => frame.truncate(i.max(HEADER_LEN + 1)),
                }
            }
            let length = frame.len() as i32;
            frame[0..4].copy_from_slice(&length.to_le_bytes());
            let (header, body) = split(&frame);
            let Ok((mut reply, _)) = decode_command_reply(&header, body.to_vec()) else {
                continue;
            };
            let _ = reply.to_document();
            if let Ok(Some(mut batch)) = reply.take_batch() {
                with_batch += 1;
                let mut copy = batch.clone();
                while let Some(document) = batch.pop_front::<Document>() {
                    read += usize::from(document.is_ok());
                }
                while let Some(typed) = copy.pop_front::<Typed>() {
                    let _ = typed;
                }
            }
        }
        assert!(with_batch > 0 && read > 0, "{with_batch} {read}");
    }
}
