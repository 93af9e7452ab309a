//! Wire compression (OP_COMPRESSED, `source/compression/OP_COMPRESSED.md`):
//! which compressor a handshake negotiated, which requests may be
//! compressed, and wrapping and unwrapping messages. Bytes in, bytes out.
//!
//! ```text
//! OP_MSG request --compress_request--> OP_COMPRESSED (unless hello, SASL, ...)
//! OP_COMPRESSED reply --decompress--> the wrapped OP_MSG / OP_REPLY
//! ```
//!
//! A reply's `uncompressedSize` is untrusted: it must fit the message size
//! limit before anything is decompressed, output grows with what the
//! decompressor actually yields (never to what the field claims), and the
//! result must be exactly that long.

use std::io::Read;

use bson::Bson;

use crate::error::{Error, Result};
use crate::proto::wire::{op_code, Header, HEADER_LEN};

/// The bytes between the header and the compressed message:
/// `originalOpcode`, `uncompressedSize`, `compressorId`.
const PREFIX_LEN: usize = 9;

/// Commands whose messages the spec forbids compressing (authentication
/// and the handshake: compression side channels would leak secrets).
const NEVER_COMPRESSED: [&str; 12] = [
    "hello",
    "isMaster",
    "ismaster",
    "saslStart",
    "saslContinue",
    "getnonce",
    "authenticate",
    "createUser",
    "updateUser",
    "copydbSaslStart",
    "copydbgetnonce",
    "copydb",
];

/// The most snappy can expand its input: a 2-byte copy element yields at
/// most 64 bytes. A claimed length beyond this ratio is a lie.
const SNAPPY_MAX_RATIO: usize = 32;

/// A compressor both sides agreed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compressor {
    /// Snappy's raw block format.
    Snappy,
    /// zlib at `zlibCompressionLevel` (-1: the library's default, 6).
    Zlib {
        /// -1 to 9.
        level: i32,
    },
    /// Zstandard at its default level.
    Zstd,
}

impl Compressor {
    /// The `compressorId` on the wire.
    pub(crate) fn id(self) -> u8 {
        match self {
            Compressor::Snappy => 1,
            Compressor::Zlib { .. } => 2,
            Compressor::Zstd => 3,
        }
    }

    /// The name the handshake uses.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Compressor::Snappy => "snappy",
            Compressor::Zlib { .. } => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    fn from_name(name: &str, zlib_level: i32) -> Option<Compressor> {
        match name {
            "snappy" => Some(Compressor::Snappy),
            "zlib" => Some(Compressor::Zlib { level: zlib_level }),
            "zstd" => Some(Compressor::Zstd),
            _ => None,
        }
    }

    fn compress(self, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
        let failed =
            |e: std::io::Error| Error::client(format!("{} compression failed: {e}", self.name()));
        match self {
            Compressor::Snappy => {
                let start = out.len();
                out.resize(start + snap::raw::max_compress_len(data.len()), 0);
                let n = snap::raw::Encoder::new()
                    .compress(data, &mut out[start..])
                    .map_err(|e| failed(e.into()))?;
                out.truncate(start + n);
            }
            Compressor::Zlib { level } => {
                let level = match u32::try_from(level) {
                    Ok(level) => flate2::Compression::new(level),
                    Err(_) => flate2::Compression::default(),
                };
                let mut encoder = flate2::write::ZlibEncoder::new(out, level);
                std::io::Write::write_all(&mut encoder, data).map_err(failed)?;
                encoder.finish().map_err(failed)?;
            }
            Compressor::Zstd => {
                let compressed =
                    zstd::bulk::compress(data, zstd::DEFAULT_COMPRESSION_LEVEL).map_err(failed)?;
                out.extend_from_slice(&compressed);
            }
        }
        Ok(())
    }
}

/// The compressor to send with: the first of the client's `configured`
/// list that the server's handshake reply lists under `compression` (none
/// when it lists none: the spec says not to fail).
pub(crate) fn negotiate(
    configured: &[String],
    zlib_level: i32,
    reply: &bson::Document,
) -> Option<Compressor> {
    let Ok(offered) = reply.get_array("compression") else {
        return None;
    };
    configured
        .iter()
        .find(|name| {
            offered
                .iter()
                .any(|o| matches!(o, Bson::String(s) if s == *name))
        })
        .and_then(|name| Compressor::from_name(name, zlib_level))
}

/// The command an encoded OP_MSG runs: the first key of its body section
/// (kind 0, right after the flags).
fn command_name(message: &[u8]) -> Option<&[u8]> {
    const FIRST_KEY: usize = HEADER_LEN + 4 + 1 + 4 + 1;
    if message.get(HEADER_LEN + 4) != Some(&0) {
        return None;
    }
    let rest = message.get(FIRST_KEY..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}

/// Wraps the OP_MSG `message` (header included) into an OP_COMPRESSED,
/// written to `out`; `false` (and `out` untouched) when the command is one
/// the spec forbids compressing, or is not recognisable.
pub(crate) fn compress_request(
    compressor: Compressor,
    message: &[u8],
    out: &mut Vec<u8>,
) -> Result<bool> {
    let Some(name) = command_name(message) else {
        return Ok(false);
    };
    if NEVER_COMPRESSED.iter().any(|n| n.as_bytes() == name) {
        return Ok(false);
    }
    let original_op_code = i32::from_le_bytes(message[12..16].try_into().expect("a header"));
    let body = &message[HEADER_LEN..];
    let uncompressed_size =
        i32::try_from(body.len()).map_err(|_| Error::client("a message too long to compress"))?;
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.extend_from_slice(&original_op_code.to_le_bytes());
    out.extend_from_slice(&uncompressed_size.to_le_bytes());
    out.push(compressor.id());
    compressor.compress(body, out)?;
    let header = Header {
        length: i32::try_from(out.len() - start)
            .map_err(|_| Error::client("a compressed message too long"))?,
        request_id: i32::from_le_bytes(message[4..8].try_into().expect("a header")),
        response_to: i32::from_le_bytes(message[8..12].try_into().expect("a header")),
        op_code: op_code::COMPRESSED,
    };
    out[start..start + HEADER_LEN].copy_from_slice(&header.to_bytes());
    Ok(true)
}

fn refused(message: String) -> Error {
    Error::protocol(None, message)
}

/// Unwraps an OP_COMPRESSED reply (`header` and `body` as framed): the
/// wrapped message's header and body. `max_message_size` bounds the
/// declared size before any byte is decompressed.
pub(crate) fn decompress(
    header: &Header,
    body: &[u8],
    max_message_size: usize,
) -> Result<(Header, Vec<u8>)> {
    let Some((prefix, compressed)) = body.split_first_chunk::<PREFIX_LEN>() else {
        return Err(refused(format!(
            "an OP_COMPRESSED reply of {} bytes is shorter than its {PREFIX_LEN}-byte prefix",
            body.len()
        )));
    };
    let original_op_code = i32::from_le_bytes(prefix[0..4].try_into().expect("4 bytes"));
    let declared = i32::from_le_bytes(prefix[4..8].try_into().expect("4 bytes"));
    let compressor_id = prefix[8];
    if !matches!(original_op_code, op_code::MSG | op_code::REPLY) {
        return Err(refused(format!(
            "an OP_COMPRESSED reply wraps op code {original_op_code} (expected OP_MSG or OP_REPLY)"
        )));
    }
    let size = usize::try_from(declared)
        .ok()
        .filter(|size| size + HEADER_LEN <= max_message_size)
        .ok_or_else(|| {
            refused(format!(
                "an OP_COMPRESSED reply declares uncompressedSize {declared}, outside 0 to \
                 maxMessageSizeBytes {max_message_size}"
            ))
        })?;
    let decompressed = match compressor_id {
        0 => compressed.to_vec(),
        1 => unsnappy(compressed, size)?,
        2 => read_bounded(flate2::read::ZlibDecoder::new(compressed), size, "zlib")?,
        3 => {
            let corrupt = |e| refused(format!("the zstd data of an OP_COMPRESSED reply: {e}"));
            let mut decoder =
                zstd::stream::read::Decoder::with_buffer(compressed).map_err(corrupt)?;
            // The frame names its window; no larger than the message keeps
            // a hostile frame from reserving memory the message never needs.
            decoder
                .window_log_max(window_log_for(size))
                .map_err(corrupt)?;
            read_bounded(decoder, size, "zstd")?
        }
        other => {
            return Err(refused(format!(
                "an OP_COMPRESSED reply names compressorId {other}, which no handshake negotiated"
            )))
        }
    };
    if decompressed.len() != size {
        let actual = if decompressed.len() > size {
            "more".to_owned()
        } else {
            format!("only {}", decompressed.len())
        };
        return Err(refused(format!(
            "an OP_COMPRESSED reply declares uncompressedSize {size} but decompresses to \
             {actual} bytes"
        )));
    }
    let header = Header {
        length: (size + HEADER_LEN) as i32,
        request_id: header.request_id,
        response_to: header.response_to,
        op_code: original_op_code,
    };
    Ok((header, decompressed))
}

/// Reads at most `size + 1` bytes out of `decoder` (one more tells a
/// message longer than declared), the buffer growing with the output.
fn read_bounded(decoder: impl Read, size: usize, name: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decoder
        .take(size as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            refused(format!(
                "the {name} data of an OP_COMPRESSED reply is corrupt: {e}"
            ))
        })?;
    Ok(out)
}

/// The smallest zstd window log (at least zstd's minimum, 10) whose window
/// holds `size` bytes.
fn window_log_for(size: usize) -> u32 {
    size.max(1 << 10).next_power_of_two().trailing_zeros()
}

/// Raw snappy states its length first; it must match the declared size and
/// be one snappy can reach from this much input.
fn unsnappy(compressed: &[u8], size: usize) -> Result<Vec<u8>> {
    let corrupt = |e: snap::Error| {
        refused(format!(
            "the snappy data of an OP_COMPRESSED reply is corrupt: {e}"
        ))
    };
    let stated = snap::raw::decompress_len(compressed).map_err(corrupt)?;
    if stated != size || stated > compressed.len().saturating_mul(SNAPPY_MAX_RATIO) {
        return Err(refused(format!(
            "an OP_COMPRESSED reply declares uncompressedSize {size} but its {} bytes of snappy \
             data state {stated}",
            compressed.len()
        )));
    }
    snap::raw::Decoder::new()
        .decompress_vec(compressed)
        .map_err(corrupt)
}

#[cfg(test)]
mod tests;
