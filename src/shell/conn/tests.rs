use std::io::Read;
use std::time::Duration;

use bson::doc;

use super::*;
use crate::error::ErrorKind;
use crate::proto::address::ServerAddress;
use crate::proto::wire::{self, MsgFlags, OpMsg};

#[test]
fn ok_zero_becomes_a_command_error_with_labels() {
    let address = ServerAddress::tcp("h", 1);
    let reply = doc! {
        "ok": 0.0, "code": 11600, "codeName": "InterruptedAtShutdown",
        "errmsg": "going away", "errorLabels": ["RetryableWriteError"],
        "topologyVersion": { "processId": bson::oid::ObjectId::new(), "counter": 1_i64 },
    };
    let e = check_reply(reply, &address).unwrap_err();
    assert_eq!(e.code(), Some(11600));
    assert!(e.contains_label("RetryableWriteError"));
    match e.kind() {
        ErrorKind::Command(c) => {
            assert_eq!(c.message, "going away");
            assert!(c.topology_version.is_some());
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(check_reply(doc! { "ok": 1 }, &address).is_ok());
    assert!(check_reply(doc! {}, &address).is_err());
}

#[test]
fn refused_connection_is_a_network_error_naming_the_server() {
    // Bind then drop to find a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = ServerAddress::tcp("127.0.0.1", port);
    let e = Connection::open(&address, 0, Some(Duration::from_secs(1)), None).unwrap_err();
    assert!(e.is_network_error());
    assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
}

#[test]
fn a_reply_truncated_by_the_peer_is_a_network_error() {
    use std::io::Write as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut header = [0u8; 16];
        s.read_exact(&mut header).unwrap();
        let request_id = i32::from_le_bytes(header[4..8].try_into().unwrap());
        // A header that promises 1000 bytes, then only 10 and a close.
        let mut reply = Vec::new();
        reply.extend_from_slice(&1016_i32.to_le_bytes());
        reply.extend_from_slice(&7_i32.to_le_bytes());
        reply.extend_from_slice(&request_id.to_le_bytes());
        reply.extend_from_slice(&wire::op_code::MSG.to_le_bytes());
        reply.extend_from_slice(&[0u8; 10]);
        s.write_all(&reply).unwrap();
    });
    let address = ServerAddress::tcp("127.0.0.1", port);
    let mut conn = Connection::open(&address, 0, Some(Duration::from_secs(1)), None).unwrap();
    let e = conn
        .command("admin", doc! { "ping": 1 }, Some(Duration::from_secs(5)))
        .unwrap_err();
    assert!(e.is_network_error(), "{e}");
    assert!(conn.is_broken());
    server.join().unwrap();
}

/// A peer that answers with the reply and then bytes nobody asked for.
fn serve_one_reply_then(extra: &'static [u8]) -> (u16, std::thread::JoinHandle<()>) {
    use std::io::Write as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut header = [0u8; 16];
        s.read_exact(&mut header).unwrap();
        let length = i32::from_le_bytes(header[0..4].try_into().unwrap()) as usize;
        let mut rest = vec![0u8; length - 16];
        s.read_exact(&mut rest).unwrap();
        let request_id = i32::from_le_bytes(header[4..8].try_into().unwrap());
        let reply = OpMsg {
            flags: MsgFlags::default(),
            body: doc! { "ok": 1 },
            sequences: Vec::new(),
        };
        let mut bytes = Vec::new();
        wire::encode_msg(7, request_id, &reply, 1 << 20, &mut bytes).unwrap();
        bytes.extend_from_slice(extra);
        s.write_all(&bytes).unwrap();
        // Stay open until the client is done, so only the extra bytes
        // can make the socket unusable.
        let _ = s.read(&mut [0u8; 1]);
    });
    (port, server)
}

#[test]
fn bytes_after_a_reply_leave_the_socket_out_of_step() {
    let (port, server) = serve_one_reply_then(b"unasked");
    let address = ServerAddress::tcp("127.0.0.1", port);
    let mut conn = Connection::open(&address, 0, Some(Duration::from_secs(1)), None).unwrap();
    let reply = conn
        .command("admin", doc! { "ping": 1 }, Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(reply.get_i32("ok").ok(), Some(1));
    assert!(conn.is_broken(), "extra bytes must retire the socket");
    assert!(conn.peer_closed(), "even right after its last use");
    let e = conn
        .command("admin", doc! { "ping": 1 }, Some(Duration::from_secs(5)))
        .unwrap_err();
    assert!(e.is_network_error(), "{e}");
    drop(conn);
    server.join().unwrap();
}

#[test]
fn a_whole_reply_in_one_read_leaves_the_socket_usable() {
    let (port, server) = serve_one_reply_then(b"");
    let address = ServerAddress::tcp("127.0.0.1", port);
    let mut conn = Connection::open(&address, 0, Some(Duration::from_secs(1)), None).unwrap();
    conn.command("admin", doc! { "ping": 1 }, Some(Duration::from_secs(5)))
        .unwrap();
    assert!(!conn.is_broken());
    assert!(!conn.peer_closed());
    drop(conn);
    server.join().unwrap();
}

/// A virtual clock on which an hour passes at every reading.
#[derive(Debug)]
struct HourPerReading(crate::shell::clock::VirtualClock);

impl crate::shell::clock::Clock for HourPerReading {
    fn now(&self) -> std::time::Instant {
        self.0.advance(Duration::from_secs(3600));
        self.0.now()
    }

    fn wall_time(&self) -> std::time::SystemTime {
        self.0.wall_time()
    }

    fn sleep(&self, duration: Duration) {
        self.0.sleep(duration);
    }
}

#[test]
fn a_sockets_time_limit_runs_on_the_clock_it_was_opened_with() {
    // A peer that accepts (the kernel does, from the backlog) and never
    // answers; a socket timeout of 20 s that, on the connection's own
    // clock, has passed by the first wait: the exchange gives up at once
    // rather than after 20 s of real time.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = ServerAddress::tcp("127.0.0.1", silent.local_addr().unwrap().port());
    let clock: Arc<dyn crate::shell::clock::Clock> =
        Arc::new(HourPerReading(crate::shell::clock::VirtualClock::new()));
    let resolver = crate::shell::dns::ResolverConfig::system();
    let limits = (None, Some(Duration::from_secs(20)));
    let mut conn = Connection::open_with_resolver(&address, 0, limits, &resolver, clock).unwrap();
    let started = std::time::Instant::now();
    let e = conn.command("admin", doc! { "ping": 1 }, None).unwrap_err();
    assert!(e.is_network_timeout(), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "waited {:?}: the limit was read on the real clock",
        started.elapsed()
    );
    drop(silent);
}
