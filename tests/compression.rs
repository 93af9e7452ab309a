//! Wire compression end to end: the topology simulator negotiates and
//! speaks snappy, zlib and zstd in front of SecantusDB (which compresses
//! nothing), and fake servers send the hostile compressed replies of
//! `fixtures/compression/`.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::{Client, ErrorKind};
use support::heap::peak_during;
use support::raw::{encode_op_reply, read_frame, Frame, OpMsg, OP_COMPRESSED};
use support::server::TestServer;
use support::sim::Simulator;

fn client(sim: &Simulator, compressors: &str) -> Client {
    let seed = sim.seed_uri(&[0]);
    let separator = if seed.contains('?') { '&' } else { '?' };
    Client::with_uri_str(format!(
        "{seed}{separator}compressors={compressors}&serverSelectionTimeoutMS=5000"
    ))
    .unwrap()
}

#[test]
fn each_compressor_carries_commands_and_replies_end_to_end() {
    let sim = Simulator::standalone(TestServer::shared());
    for (name, id) in [("snappy", 1), ("zlib", 2), ("zstd", 3)] {
        sim.reset_observations();
        let client = client(&sim, name);
        let coll = client.database("compression").collection::<Document>(name);
        coll.drop().run().unwrap();
        let docs = (0..200).map(|i| doc! { "i": i, "text": "compressible ".repeat(20) });
        coll.insert_many(docs).run().unwrap();
        let found: Vec<Document> = coll
            .find(doc! {})
            .batch_size(50)
            .run()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(found.len(), 200, "{name}");
        assert_eq!(found[199].get_i32("i").unwrap(), 199);
        // The handshake's hello precedes the negotiation, so only a hello
        // run on a connection that compresses shows the spec's list of
        // commands never compressed at work.
        client
            .database("admin")
            .run_command(doc! { "hello": 1 })
            .run()
            .unwrap();

        let handshake = &sim.handshakes(0)[0];
        assert_eq!(
            handshake.get_array("compression").unwrap(),
            &vec![bson::Bson::String(name.into())]
        );
        let compressed = sim.compressed(0);
        for command in ["drop", "insert", "find", "getMore"] {
            assert!(
                compressed.contains(&(command.to_string(), id)),
                "{name}: {command} not compressed: {compressed:?}"
            );
        }
        assert!(
            compressed
                .iter()
                .all(|(c, _)| c != "hello" && c != "isMaster"),
            "{compressed:?}"
        );
    }
}

#[test]
fn the_first_configured_compressor_the_server_speaks_is_used() {
    let sim = Simulator::standalone(TestServer::shared());
    let client = client(&sim, "lz4,zlib,zstd");
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    assert_eq!(sim.compressed(0), [("ping".to_string(), 2)]);
    // The simulator offers every compressor the client names, in the
    // client's order, so the client's first known one wins whether or not
    // the client reads the offer. A server offering fewer, in its own order,
    // tells the client's first choice the server offers from the client's
    // first choice (zstd) and from the server's (snappy).
    assert_eq!(
        compressor_of_first_request("zstd,zlib,snappy", &["snappy", "zlib"]),
        2
    );
}

/// The handshake reply of a fake standalone offering `offered`.
fn hello_reply(offered: &[&str]) -> Document {
    doc! {
        "ismaster": true, "isWritablePrimary": true, "helloOk": true,
        "maxWireVersion": 21, "minWireVersion": 0, "maxBsonObjectSize": 16_777_216,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
        "compression": offered, "ok": 1.0,
    }
}

/// The compressorId of the first request a client configured with
/// `compressors` sends after a handshake whose reply offers `offered`
/// (0 when it is not compressed). The fake server answers it with an
/// uncompressed `{ok: 1}`, which the spec allows.
fn compressor_of_first_request(compressors: &str, offered: &'static [&'static str]) -> u8 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (sender, first_request) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let Ok(Some(hello)) = read_frame(&mut stream) else {
                continue;
            };
            let reply = encode_op_reply(1, hello.request_id, &hello_reply(offered));
            if stream.write_all(&reply).is_err() {
                continue;
            }
            let Ok(Some(request)) = read_frame(&mut stream) else {
                continue;
            };
            let ok = OpMsg {
                flags: 0,
                body: doc! { "ok": 1.0 },
                sequences: Vec::new(),
            };
            let _ = stream.write_all(&ok.encode(2, request.request_id));
            let _ = sender.send(request);
        }
    });
    let client = Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{port}/?directConnection=true&compressors={compressors}\
         &serverSelectionTimeoutMS=2000"
    ))
    .unwrap();
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    let request = first_request.recv_timeout(Duration::from_secs(5)).unwrap();
    if request.op_code == OP_COMPRESSED {
        request.body[8]
    } else {
        0
    }
}

// Counts the heap, so the hostile replies' test can tell a decompression
// bounded by the declared size from one that inflates whatever the server
// sent (the error message is the same).
#[global_allocator]
static ALLOCATOR: support::heap::Counting = support::heap::Counting;

/// The most a hostile reply may raise the heap by while it is refused.
const HOSTILE_PEAK_BOUND: usize = 4 << 20;

/// A server that answers the handshake offering zlib, then answers the
/// next request with a header and `body` as an OP_COMPRESSED reply.
fn hostile_server(body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let body = body.clone();
            std::thread::spawn(move || serve_hostile(stream, body));
        }
    });
    port
}

fn serve_hostile(mut stream: TcpStream, body: Vec<u8>) {
    let Ok(Some(hello)) = read_frame(&mut stream) else {
        return;
    };
    if stream
        .write_all(&encode_op_reply(
            1,
            hello.request_id,
            &hello_reply(&["zlib"]),
        ))
        .is_err()
    {
        return;
    }
    while let Ok(Some(request)) = read_frame(&mut stream) {
        let reply = Frame {
            request_id: 2,
            response_to: request.request_id,
            op_code: OP_COMPRESSED,
            body: body.clone(),
        };
        if stream.write_all(&reply.to_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn hostile_compressed_replies_fail_with_errors_naming_the_lie() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/compression");
    for (file, expected) in [
        (
            "zlib-bomb.bin",
            "declares uncompressedSize 100 but decompresses to more",
        ),
        (
            "size-beyond-limit.bin",
            "uncompressedSize 2000000000, outside",
        ),
        ("negative-size.bin", "uncompressedSize -16, outside"),
        ("short-of-declared-size.bin", "decompresses to only 5 bytes"),
        ("unknown-compressor.bin", "compressorId 7"),
        ("corrupt-zstd.bin", "zstd"),
        ("snappy-lying-length.bin", "snappy data state 2097152"),
        ("wraps-op-query.bin", "wraps op code 2004"),
    ] {
        let body = std::fs::read(fixtures.join(file)).unwrap();
        let port = hostile_server(body);
        let client = Client::with_uri_str(format!(
            "mongodb://127.0.0.1:{port}/?directConnection=true&compressors=zlib\
             &serverSelectionTimeoutMS=2000"
        ))
        .unwrap();
        let started = Instant::now();
        let (result, peak) = peak_during(|| {
            client
                .database("admin")
                .run_command(doc! { "ping": 1 })
                .run()
        });
        let e = result.unwrap_err();
        // The zlib bomb inflates to 40 MB, the other lies claim up to 2 GB:
        // none may be allocated. A refusal peaks near 0.4 MB (the client's
        // buffers); the other tests of this binary, running alongside,
        // allocate far less than the bound's 4 MB.
        assert!(peak < HOSTILE_PEAK_BOUND, "{file}: a peak of {peak} bytes");
        assert!(
            matches!(e.kind(), ErrorKind::InvalidResponse { .. }),
            "{file}: {e:?}"
        );
        assert!(e.to_string().contains(expected), "{file}: {e}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{file}: {:?}",
            started.elapsed()
        );
    }
}
