//! Hellos on open sockets in the shared wait, against local peers.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use bson::doc;

use super::{Checked, Finished, Overlap};
use crate::proto::address::ServerAddress;
use crate::proto::wire::{self, MsgFlags, OpMsg};
use crate::shell::conn::Connection;

/// A peer that reads one request and answers with `answer(reply bytes)`.
fn peer(answer: impl FnOnce(&mut std::net::TcpStream, Vec<u8>) + Send + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let reply = primary_reply_to_one_request(&mut socket);
        answer(&mut socket, reply);
    });
    port
}

/// Reads one request from `peer` and returns a primary's hello reply to
/// it, as bytes.
pub(super) fn primary_reply_to_one_request(peer: &mut impl Read) -> Vec<u8> {
    let mut header = [0u8; 16];
    peer.read_exact(&mut header).unwrap();
    let length = i32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
    let mut rest = vec![0u8; length - 16];
    peer.read_exact(&mut rest).unwrap();
    let request_id = i32::from_le_bytes(header[4..8].try_into().unwrap());
    let msg = OpMsg {
        flags: MsgFlags::default(),
        body: doc! { "ok": 1, "isWritablePrimary": true },
        sequences: Vec::new(),
    };
    let mut reply = Vec::new();
    wire::encode_msg(1, request_id, &msg, 1 << 20, &mut reply).unwrap();
    reply
}

/// Starts a hello on an open socket to `port` and waits until it ends.
fn check_open_socket(port: u16, limit: Duration) -> (Finished, Duration) {
    let address = ServerAddress::tcp("127.0.0.1", port);
    let connection = Connection::open(&address, 0, Some(Duration::from_secs(1)), None).unwrap();
    let mut overlap = Overlap::new(std::sync::Arc::new(crate::shell::clock::SystemClock)).unwrap();
    let started = Instant::now();
    let command = doc! { "hello": 1 };
    if let Err(failed) = overlap.start_hello(connection, command, started, Some(started + limit)) {
        return (*failed, started.elapsed());
    }
    loop {
        let mut done = overlap.wait(Instant::now(), Some(started + Duration::from_secs(5)));
        if let Some(finished) = done.pop() {
            return (finished, started.elapsed());
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the wait never ended"
        );
    }
}

#[test]
fn a_reply_in_two_pieces_on_an_open_socket_is_read_whole() {
    let port = peer(|socket, reply| {
        socket.write_all(&reply[..10]).unwrap();
        thread::sleep(Duration::from_millis(50));
        socket.write_all(&reply[10..]).unwrap();
        thread::sleep(Duration::from_millis(500));
    });
    let (finished, _) = check_open_socket(port, Duration::from_secs(2));
    match finished.result {
        Ok(Checked::Hello(connection, reply)) => {
            assert_eq!(reply.get_bool("isWritablePrimary"), Ok(true));
            assert!(!connection.is_broken(), "the socket goes back in service");
        }
        Ok(_) => panic!("a hello on an open socket is neither handshake nor authentication"),
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn a_peer_that_stalls_mid_reply_fails_at_the_checks_limit() {
    let port = peer(|socket, reply| {
        socket.write_all(&reply[..10]).unwrap();
        thread::sleep(Duration::from_secs(3));
    });
    let limit = Duration::from_millis(300);
    let (finished, elapsed) = check_open_socket(port, limit);
    let error = finished.result.err().expect("a stalled reply fails");
    assert!(error.is_network_error(), "{error}");
    assert!(elapsed < limit + Duration::from_millis(500), "{elapsed:?}");
}

#[test]
fn garbage_instead_of_a_tls_handshake_is_a_tls_error() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        let mut client_hello = [0u8; 64];
        let _ = socket.read(&mut client_hello);
        let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        thread::sleep(Duration::from_millis(500));
    });
    let address = ServerAddress::tcp("localhost", port);
    let mut overlap = Overlap::new(std::sync::Arc::new(crate::shell::clock::SystemClock)).unwrap();
    let started = Instant::now();
    let limit = Some(started + Duration::from_secs(2));
    let start = super::Start {
        address: address.clone(),
        addresses: vec![([127, 0, 0, 1], port).into()],
        command: doc! { "hello": 1 },
        use_op_msg: true,
        speculation: crate::proto::auth::Speculation::None,
        tls: Some(crate::shell::tls::client_config(None).unwrap()),
        generation: 0,
        socket_timeout: None,
        started,
        limit,
    };
    assert!(overlap.start(start).is_ok());
    let finished = loop {
        if let Some(done) = overlap.wait(Instant::now(), limit).pop() {
            break done;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the wait never ended"
        );
    };
    let error = finished.result.err().expect("not a TLS server");
    assert!(
        matches!(error.kind(), crate::error::ErrorKind::Tls { .. }),
        "{error:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}
