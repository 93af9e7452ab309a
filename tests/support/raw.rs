//! Minimal wire framing for test support code: OP_MSG, legacy OP_QUERY and
//! OP_REPLY, plus a blocking [`RawConnection`] that talks to a server without
//! the driver.
//!
//! This is deliberately independent of the crate's own `wire` module so that
//! the harness can check the server (and the simulator) before the driver
//! exists, and so that a bug in the driver's framing cannot hide behind the
//! same bug in the test harness.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use bson::{doc, Bson, Document};

/// Opcode of OP_REPLY (legacy reply to OP_QUERY).
pub const OP_REPLY: i32 = 1;
/// Opcode of OP_QUERY (legacy; only used for the first hello nowadays).
pub const OP_QUERY: i32 = 2004;
/// Opcode of OP_COMPRESSED.
pub const OP_COMPRESSED: i32 = 2012;
/// Opcode of OP_MSG.
pub const OP_MSG: i32 = 2013;

/// OP_MSG flag: a CRC-32C checksum follows the sections.
pub const FLAG_CHECKSUM_PRESENT: u32 = 1;
/// OP_MSG flag: another message follows without a request (exhaust / w:0).
pub const FLAG_MORE_TO_COME: u32 = 1 << 1;
/// OP_QUERY flag: reads may go to a secondary.
pub const QUERY_FLAG_SECONDARY_OK: i32 = 1 << 2;

/// Largest message the harness reads; a real server's `maxMessageSizeBytes`
/// is 48 000 000, so anything beyond that (plus slack) is garbage.
pub const MAX_MESSAGE_SIZE: usize = 48_000_000 + 16 * 1024;

/// One framed message: the header fields and the bytes after the header.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The header's requestID.
    pub request_id: i32,
    /// The header's responseTo.
    pub response_to: i32,
    /// The header's opCode.
    pub op_code: i32,
    /// Everything after the 16-byte header.
    pub body: Vec<u8>,
}

impl Frame {
    /// The whole message as it travels on the wire (header included).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.body.len());
        let length = (16 + self.body.len()) as i32;
        out.extend_from_slice(&length.to_le_bytes());
        out.extend_from_slice(&self.request_id.to_le_bytes());
        out.extend_from_slice(&self.response_to.to_le_bytes());
        out.extend_from_slice(&self.op_code.to_le_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Reads one message; `Ok(None)` when the peer closed the stream cleanly
/// before a new message started.
pub fn read_frame(stream: &mut impl Read) -> io::Result<Option<Frame>> {
    let mut header = [0u8; 16];
    let mut filled = 0;
    while filled < header.len() {
        match stream.read(&mut header[filled..]) {
            Ok(0) if filled == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let field = |i: usize| i32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes"));
    let length = field(0);
    if length < 16 || length as usize > MAX_MESSAGE_SIZE {
        return Err(invalid(format!("message length {length} out of range")));
    }
    let mut body = vec![0u8; length as usize - 16];
    stream.read_exact(&mut body)?;
    Ok(Some(Frame {
        request_id: field(4),
        response_to: field(8),
        op_code: field(12),
        body,
    }))
}

/// A parsed OP_MSG.
#[derive(Debug, Clone, PartialEq)]
pub struct OpMsg {
    /// The flag bits.
    pub flags: u32,
    /// The kind-0 section.
    pub body: Document,
    /// Kind-1 sections: identifier and documents.
    pub sequences: Vec<(String, Vec<Document>)>,
}

impl OpMsg {
    /// The body with every document sequence folded in as an array field,
    /// which is how the server sees the command.
    pub fn merged(&self) -> Document {
        let mut merged = self.body.clone();
        for (name, docs) in &self.sequences {
            merged.insert(
                name.clone(),
                Bson::Array(docs.iter().cloned().map(Bson::Document).collect()),
            );
        }
        merged
    }

    /// Encodes this message (without checksum) after a header.
    pub fn encode(&self, request_id: i32, response_to: i32) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(self.flags & !FLAG_CHECKSUM_PRESENT).to_le_bytes());
        body.push(0);
        self.body
            .to_writer(&mut body)
            .expect("writing BSON to a Vec cannot fail");
        for (name, docs) in &self.sequences {
            let mut section = Vec::new();
            section.extend_from_slice(name.as_bytes());
            section.push(0);
            for doc in docs {
                doc.to_writer(&mut section)
                    .expect("writing BSON to a Vec cannot fail");
            }
            body.push(1);
            body.extend_from_slice(&((section.len() + 4) as i32).to_le_bytes());
            body.extend_from_slice(&section);
        }
        Frame {
            request_id,
            response_to,
            op_code: OP_MSG,
            body,
        }
        .to_bytes()
    }
}

fn read_cstring(bytes: &[u8]) -> io::Result<(String, &[u8])> {
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| invalid("unterminated C string"))?;
    let text = std::str::from_utf8(&bytes[..end]).map_err(|_| invalid("C string not UTF-8"))?;
    Ok((text.to_owned(), &bytes[end + 1..]))
}

fn read_i32(bytes: &[u8]) -> io::Result<(i32, &[u8])> {
    if bytes.len() < 4 {
        return Err(invalid("truncated int32"));
    }
    let (head, rest) = bytes.split_at(4);
    Ok((i32::from_le_bytes(head.try_into().expect("4 bytes")), rest))
}

/// Reads one BSON document from the front of `bytes`, checking its declared
/// length against what is there.
fn read_document(bytes: &[u8]) -> io::Result<(Document, &[u8])> {
    let (length, _) = read_i32(bytes)?;
    if length < 5 || length as usize > bytes.len() {
        return Err(invalid(format!("document length {length} out of range")));
    }
    let (doc_bytes, rest) = bytes.split_at(length as usize);
    let doc = Document::from_reader(doc_bytes).map_err(|e| invalid(format!("bad BSON: {e}")))?;
    Ok((doc, rest))
}

/// Parses an OP_MSG body (the bytes after the header).
pub fn parse_op_msg(body: &[u8]) -> io::Result<OpMsg> {
    let (flags, mut rest) = read_i32(body)?;
    let flags = flags as u32;
    if flags & FLAG_CHECKSUM_PRESENT != 0 {
        if rest.len() < 4 {
            return Err(invalid("checksum flag set but no checksum"));
        }
        rest = &rest[..rest.len() - 4];
    }
    let mut main = None;
    let mut sequences = Vec::new();
    while let Some((&kind, after_kind)) = rest.split_first() {
        match kind {
            0 => {
                let (doc, after) = read_document(after_kind)?;
                if main.replace(doc).is_some() {
                    return Err(invalid("two kind-0 sections"));
                }
                rest = after;
            }
            1 => {
                let (size, _) = read_i32(after_kind)?;
                if size < 5 || size as usize > after_kind.len() {
                    return Err(invalid(format!("sequence size {size} out of range")));
                }
                let (section, after) = after_kind.split_at(size as usize);
                let (name, mut docs_bytes) = read_cstring(&section[4..])?;
                let mut docs = Vec::new();
                while !docs_bytes.is_empty() {
                    let (doc, after_doc) = read_document(docs_bytes)?;
                    docs.push(doc);
                    docs_bytes = after_doc;
                }
                sequences.push((name, docs));
                rest = after;
            }
            other => return Err(invalid(format!("unknown section kind {other}"))),
        }
    }
    let body = main.ok_or_else(|| invalid("OP_MSG without a kind-0 section"))?;
    Ok(OpMsg {
        flags,
        body,
        sequences,
    })
}

/// A parsed OP_QUERY.
#[derive(Debug, Clone, PartialEq)]
pub struct OpQuery {
    /// The flag bits.
    pub flags: i32,
    /// `db.collection`, e.g. `admin.$cmd`.
    pub full_collection_name: String,
    /// The query document (for commands, the command; possibly wrapped in `$query`).
    pub query: Document,
}

impl OpQuery {
    /// The command document, unwrapped from `$query` if the client wrapped it.
    pub fn command(&self) -> Document {
        match self.query.get_document("$query") {
            Ok(inner) => inner.clone(),
            Err(_) => self.query.clone(),
        }
    }

    /// Encodes this query after a header (numberToReturn -1, as drivers do for commands).
    pub fn encode(&self, request_id: i32) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&self.flags.to_le_bytes());
        body.extend_from_slice(self.full_collection_name.as_bytes());
        body.push(0);
        body.extend_from_slice(&0i32.to_le_bytes());
        body.extend_from_slice(&(-1i32).to_le_bytes());
        self.query
            .to_writer(&mut body)
            .expect("writing BSON to a Vec cannot fail");
        Frame {
            request_id,
            response_to: 0,
            op_code: OP_QUERY,
            body,
        }
        .to_bytes()
    }
}

/// Parses an OP_QUERY body (the bytes after the header).
pub fn parse_op_query(body: &[u8]) -> io::Result<OpQuery> {
    let (flags, rest) = read_i32(body)?;
    let (full_collection_name, rest) = read_cstring(rest)?;
    let (_skip, rest) = read_i32(rest)?;
    let (_return, rest) = read_i32(rest)?;
    let (query, _selector) = read_document(rest)?;
    Ok(OpQuery {
        flags,
        full_collection_name,
        query,
    })
}

/// Encodes an OP_REPLY carrying one document.
pub fn encode_op_reply(request_id: i32, response_to: i32, reply: &Document) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_le_bytes()); // responseFlags
    body.extend_from_slice(&0i64.to_le_bytes()); // cursorID
    body.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
    body.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
    reply
        .to_writer(&mut body)
        .expect("writing BSON to a Vec cannot fail");
    Frame {
        request_id,
        response_to,
        op_code: OP_REPLY,
        body,
    }
    .to_bytes()
}

/// Parses an OP_REPLY body and returns its first document.
pub fn parse_op_reply(body: &[u8]) -> io::Result<Document> {
    if body.len() < 20 {
        return Err(invalid("truncated OP_REPLY"));
    }
    let (count, _) = read_i32(&body[16..])?;
    if count < 1 {
        return Err(invalid("OP_REPLY without documents"));
    }
    Ok(read_document(&body[20..])?.0)
}

/// A blocking connection that sends commands without the driver.
#[derive(Debug)]
pub struct RawConnection {
    stream: TcpStream,
    next_request_id: i32,
}

impl RawConnection {
    /// Connects with a 5 s connect, read and write timeout.
    pub fn connect(address: &str) -> io::Result<RawConnection> {
        Self::connect_timeout(address, Duration::from_secs(5))
    }

    /// Connects with the given connect, read and write timeout.
    pub fn connect_timeout(address: &str, timeout: Duration) -> io::Result<RawConnection> {
        let socket: SocketAddr = address
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| invalid(format!("{address} resolves to nothing")))?;
        let stream = TcpStream::connect_timeout(&socket, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(RawConnection {
            stream,
            next_request_id: 1,
        })
    }

    fn request_id(&mut self) -> i32 {
        let id = self.next_request_id;
        self.next_request_id += 1;
        id
    }

    /// Sends `command` to database `db` as an OP_MSG and returns the reply body,
    /// whatever its `ok` (the caller checks).
    pub fn command(&mut self, db: &str, command: Document) -> io::Result<Document> {
        self.command_with_sequences(db, command, Vec::new())
    }

    /// Like [`RawConnection::command`] with kind-1 document sequences
    /// (e.g. `("documents", docs)` for an insert).
    pub fn command_with_sequences(
        &mut self,
        db: &str,
        mut command: Document,
        sequences: Vec<(String, Vec<Document>)>,
    ) -> io::Result<Document> {
        command.insert("$db", db);
        let request_id = self.request_id();
        let message = OpMsg {
            flags: 0,
            body: command,
            sequences,
        };
        self.stream.write_all(&message.encode(request_id, 0))?;
        let frame = read_frame(&mut self.stream)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
        })?;
        if frame.response_to != request_id {
            return Err(invalid(format!(
                "reply to {} while waiting for {request_id}",
                frame.response_to
            )));
        }
        match frame.op_code {
            OP_MSG => Ok(parse_op_msg(&frame.body)?.body),
            other => Err(invalid(format!("unexpected reply opcode {other}"))),
        }
    }

    /// Sends the legacy `isMaster` handshake over OP_QUERY and returns the reply.
    pub fn legacy_hello(&mut self) -> io::Result<Document> {
        self.legacy_command(doc! { "isMaster": 1, "helloOk": true }, 0)
    }

    /// Sends `command` to `admin.$cmd` over OP_QUERY with the given flags.
    pub fn legacy_command(&mut self, command: Document, flags: i32) -> io::Result<Document> {
        let request_id = self.request_id();
        let query = OpQuery {
            flags,
            full_collection_name: "admin.$cmd".to_owned(),
            query: command,
        };
        self.stream.write_all(&query.encode(request_id))?;
        let frame = read_frame(&mut self.stream)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
        })?;
        match frame.op_code {
            OP_REPLY => parse_op_reply(&frame.body),
            other => Err(invalid(format!("unexpected reply opcode {other}"))),
        }
    }

    /// The underlying stream, for tests that need to poke at it.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Closes both directions.
    pub fn close(self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// Whether a reply says `ok: 1` (in any numeric type).
pub fn is_ok(reply: &Document) -> bool {
    match reply.get("ok") {
        Some(Bson::Double(v)) => *v == 1.0,
        Some(Bson::Int32(v)) => *v == 1,
        Some(Bson::Int64(v)) => *v == 1,
        Some(Bson::Boolean(v)) => *v,
        _ => false,
    }
}

/// The compressors the harness speaks, by OP_COMPRESSED id.
pub const COMPRESSOR_NAMES: [(u8, &str); 3] = [(1, "snappy"), (2, "zlib"), (3, "zstd")];

/// `frame` wrapped in OP_COMPRESSED with compressor `id` (1 snappy, 2 zlib,
/// 3 zstd), as a server compresses its replies.
pub fn compress_frame(frame: &Frame, id: u8) -> Frame {
    let compressed = match id {
        1 => snap::raw::Encoder::new()
            .compress_vec(&frame.body)
            .expect("snappy"),
        2 => {
            let mut encoder =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(&frame.body).expect("zlib");
            encoder.finish().expect("zlib")
        }
        3 => zstd::bulk::compress(&frame.body, 0).expect("zstd"),
        other => panic!("no compressor {other}"),
    };
    let mut body = Vec::with_capacity(9 + compressed.len());
    body.extend_from_slice(&frame.op_code.to_le_bytes());
    body.extend_from_slice(&(frame.body.len() as i32).to_le_bytes());
    body.push(id);
    body.extend_from_slice(&compressed);
    Frame {
        request_id: frame.request_id,
        response_to: frame.response_to,
        op_code: OP_COMPRESSED,
        body,
    }
}

/// The message an OP_COMPRESSED `frame` wraps, and the compressor id.
pub fn decompress_frame(frame: &Frame) -> io::Result<(Frame, u8)> {
    if frame.body.len() < 9 {
        return Err(invalid("OP_COMPRESSED shorter than its prefix"));
    }
    let op_code = i32::from_le_bytes(frame.body[0..4].try_into().expect("4 bytes"));
    let size = i32::from_le_bytes(frame.body[4..8].try_into().expect("4 bytes")) as usize;
    let id = frame.body[8];
    let data = &frame.body[9..];
    let body = match id {
        1 => snap::raw::Decoder::new()
            .decompress_vec(data)
            .map_err(|e| invalid(e.to_string()))?,
        2 => {
            let mut out = Vec::new();
            flate2::read::ZlibDecoder::new(data).read_to_end(&mut out)?;
            out
        }
        3 => zstd::bulk::decompress(data, size)?,
        other => return Err(invalid(format!("unknown compressor {other}"))),
    };
    if body.len() != size {
        return Err(invalid(format!(
            "declared {size} bytes, got {}",
            body.len()
        )));
    }
    Ok((
        Frame {
            request_id: frame.request_id,
            response_to: frame.response_to,
            op_code,
            body,
        },
        id,
    ))
}
