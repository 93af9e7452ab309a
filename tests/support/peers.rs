//! Fake servers that stop cooperating: a loopback listener that runs one
//! function per connection, the standalone handshake they answer, and the
//! ways they go quiet. Built on [`super::raw`] alone, so that a test crate
//! can include `raw.rs` and this file without the rest of the support code.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use bson::{doc, Document};

use super::raw::{encode_op_reply, Frame, OpMsg, OP_QUERY};

/// Starts a fake server that runs `serve` on every connection, each in a
/// thread of its own; returns its port. Its threads end when the client
/// closes its sockets.
pub fn fake_server<F>(serve: F) -> u16
where
    F: Fn(TcpStream) + Send + Clone + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("local address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

/// The handshake reply of a standalone server (wire version 21).
pub fn standalone_hello() -> Document {
    doc! {
        "ismaster": true, "isWritablePrimary": true, "helloOk": true,
        "maxWireVersion": 21, "minWireVersion": 0, "maxBsonObjectSize": 16_777_216,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000, "ok": 1.0,
    }
}

/// The reply to `request` carrying `document`: OP_REPLY to a legacy
/// OP_QUERY (the handshake), OP_MSG otherwise.
pub fn reply_to(request: &Frame, document: &Document) -> Vec<u8> {
    if request.op_code == OP_QUERY {
        encode_op_reply(1, request.request_id, document)
    } else {
        OpMsg {
            flags: 0,
            body: document.clone(),
            sequences: Vec::new(),
        }
        .encode(1, request.request_id)
    }
}

/// Holds the socket open, reading and dropping what comes, until the
/// client closes it.
pub fn hold_until_closed(mut stream: TcpStream) {
    let mut sink = [0u8; 1024];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

/// Answers the handshake as a standalone, then reads and never answers.
pub fn silent_after_handshake(mut stream: TcpStream) {
    let Ok(Some(hello)) = super::raw::read_frame(&mut stream) else {
        return;
    };
    if stream
        .write_all(&reply_to(&hello, &standalone_hello()))
        .is_ok()
    {
        hold_until_closed(stream);
    }
}
