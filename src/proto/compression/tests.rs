use super::*;
use crate::proto::wire::{self, MsgFlags, OpMsg};

const MAX: usize = 48_000_000;

fn message(command: bson::Document) -> Vec<u8> {
    let msg = OpMsg {
        flags: MsgFlags::default(),
        body: command,
        sequences: Vec::new(),
    };
    let mut bytes = Vec::new();
    wire::encode_msg(7, 0, &msg, MAX, &mut bytes).unwrap();
    bytes
}

fn header_of(bytes: &[u8]) -> Header {
    Header::parse(bytes[..HEADER_LEN].try_into().unwrap(), MAX).unwrap()
}

const ALL: [Compressor; 4] = [
    Compressor::Snappy,
    Compressor::Zlib { level: -1 },
    Compressor::Zlib { level: 9 },
    Compressor::Zstd,
];

#[test]
fn every_compressor_round_trips_a_message() {
    let original = message(bson::doc! { "find": "c", "filter": { "x": "y".repeat(1000) } });
    for compressor in ALL {
        let mut out = Vec::new();
        assert!(compress_request(compressor, &original, &mut out).unwrap());
        assert!(
            out.len() < original.len() / 4,
            "{compressor:?}: {}",
            out.len()
        );
        let header = header_of(&out);
        assert_eq!(header.op_code, op_code::COMPRESSED);
        assert_eq!(header.length as usize, out.len());
        assert_eq!(out[HEADER_LEN + 8], compressor.id());
        let (inner, body) = decompress(&header, &out[HEADER_LEN..], MAX).unwrap();
        assert_eq!(inner.op_code, op_code::MSG);
        assert_eq!(inner.request_id, 7);
        assert_eq!(body, original[HEADER_LEN..]);
    }
}

#[test]
fn the_specs_commands_are_never_compressed() {
    for name in NEVER_COMPRESSED {
        let original = message(bson::doc! { name: 1, "pad": "p".repeat(500) });
        let mut out = Vec::new();
        assert!(
            !compress_request(Compressor::Zstd, &original, &mut out).unwrap(),
            "{name}"
        );
        assert!(out.is_empty());
    }
    let mut out = Vec::new();
    assert!(compress_request(
        Compressor::Zstd,
        &message(bson::doc! { "ping": 1 }),
        &mut out
    )
    .unwrap());
}

#[test]
fn negotiation_takes_the_clients_first_choice_the_server_offers() {
    let configured: Vec<String> = ["zstd", "snappy", "zlib"].map(String::from).to_vec();
    let reply = bson::doc! { "compression": ["zlib", "snappy"] };
    assert_eq!(negotiate(&configured, -1, &reply), Some(Compressor::Snappy));
    let reply = bson::doc! { "compression": ["zlib"] };
    assert_eq!(
        negotiate(&configured, 4, &reply),
        Some(Compressor::Zlib { level: 4 })
    );
    assert_eq!(negotiate(&configured, -1, &bson::doc! {}), None);
    assert_eq!(negotiate(&[], -1, &reply), None);
}

/// An OP_COMPRESSED reply: the prefix fields and the payload as given.
fn reply(original: i32, declared: i32, id: u8, payload: &[u8]) -> (Header, Vec<u8>) {
    let mut body = Vec::new();
    body.extend_from_slice(&original.to_le_bytes());
    body.extend_from_slice(&declared.to_le_bytes());
    body.push(id);
    body.extend_from_slice(payload);
    let header = Header {
        length: (HEADER_LEN + body.len()) as i32,
        request_id: 1,
        response_to: 7,
        op_code: op_code::COMPRESSED,
    };
    (header, body)
}

fn refusal(original: i32, declared: i32, id: u8, payload: &[u8]) -> String {
    let (header, body) = reply(original, declared, id, payload);
    decompress(&header, &body, MAX).unwrap_err().to_string()
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Compressor::Zlib { level: 9 }
        .compress(data, &mut out)
        .unwrap();
    out
}

#[test]
fn hostile_sizes_are_refused_before_anything_is_decompressed() {
    let msg = op_code::MSG;
    let small = zlib(b"hello");
    for declared in [-1, i32::MAX, (MAX - HEADER_LEN + 1) as i32] {
        let e = refusal(msg, declared, 2, &small);
        assert!(e.contains(&format!("uncompressedSize {declared}")), "{e}");
    }
    // A bomb: 40 MB of zeros in a few kilobytes, declared as 100 bytes.
    let bomb = zlib(&vec![0u8; 40_000_000]);
    assert!(bomb.len() < 100_000);
    let e = refusal(msg, 100, 2, &bomb);
    assert!(e.contains("decompresses to more bytes"), "{e}");
    let e = refusal(msg, 6, 2, &small);
    assert!(e.contains("decompresses to only 5 bytes"), "{e}");
    assert!(refusal(msg, 5, 9, &small).contains("compressorId 9"));
    assert!(refusal(2004, 5, 2, &small).contains("op code 2004"));
    let (header, body) = reply(msg, 5, 2, &small);
    assert!(decompress(&header, &body[..4], MAX)
        .unwrap_err()
        .to_string()
        .contains("prefix"));
    for id in [1, 2, 3] {
        let e = refusal(msg, 100, id, &[0xff; 64]);
        assert!(
            e.contains("corrupt") || e.contains("state") || e.contains("zstd"),
            "{id}: {e}"
        );
    }
    // Snappy states a length far beyond what its input could expand to.
    let mut lying = Vec::new();
    Compressor::Snappy.compress(b"hello", &mut lying).unwrap();
    lying[0] = 0xff;
    lying.insert(1, 0x7f);
    let e = refusal(msg, 16383, 1, &lying);
    assert!(e.contains("snappy"), "{e}");
}
