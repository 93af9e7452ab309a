//! The shell's scan loop on virtual time: real sockets to local peers that
//! answer every hello at once, and a [`VirtualClock`] that the loop's waits
//! (minHeartbeatFrequencyMS, a refused server's cooldown) move forward
//! without sleeping. Each check is stamped with the virtual time it started.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bson::{doc, Document};

use super::{Time, Topology};
use crate::error::ErrorKind;
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::proto::event::{EventSink, SdamEvent};
use crate::proto::options::ClientOptions;
use crate::proto::read_preference::ReadPreference;
use crate::proto::select::Criteria;
use crate::proto::wire::{self, MsgFlags, OpMsg};
use crate::shell::clock::{Clock, VirtualClock};

/// Remembers when (virtual milliseconds after `start`) each check began.
#[derive(Debug)]
struct CheckTimes {
    clock: Arc<VirtualClock>,
    start: Instant,
    started: Mutex<Vec<(u64, u16)>>,
}

impl EventSink for CheckTimes {
    fn handle_sdam_event(&self, event: &SdamEvent) {
        if let SdamEvent::ServerHeartbeatStarted { address, .. } = event {
            let at = self.clock.now().duration_since(self.start).as_millis() as u64;
            let port = address.port().unwrap_or(0);
            self.started.lock().unwrap().push((at, port));
        }
    }
}

impl CheckTimes {
    /// The virtual times at which `port` was checked.
    fn of(&self, port: u16) -> Vec<u64> {
        let started = self.started.lock().unwrap();
        started
            .iter()
            .filter(|(_, p)| *p == port)
            .map(|(at, _)| *at)
            .collect()
    }
}

/// A listener on a free port, and the port.
fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Answers every request (OP_QUERY or OP_MSG) on every socket `listener`
/// accepts with `reply`, at once.
fn serve(listener: TcpListener, reply: Document) {
    thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            let reply = reply.clone();
            thread::spawn(move || answer_all(socket, &reply));
        }
    });
}

fn answer_all(mut socket: TcpStream, reply: &Document) {
    let mut header = [0u8; 16];
    while socket.read_exact(&mut header).is_ok() {
        let length = i32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
        let mut rest = vec![0u8; length - 16];
        socket.read_exact(&mut rest).unwrap();
        let request_id = i32::from_le_bytes(header[4..8].try_into().unwrap());
        let op_code = i32::from_le_bytes(header[12..16].try_into().unwrap());
        let bytes = match op_code {
            2004 => op_reply(request_id, reply),
            _ => {
                let msg = OpMsg {
                    flags: MsgFlags::default(),
                    body: reply.clone(),
                    sequences: Vec::new(),
                };
                let mut bytes = Vec::new();
                wire::encode_msg(1, request_id, &msg, 1 << 20, &mut bytes).unwrap();
                bytes
            }
        };
        if socket.write_all(&bytes).is_err() {
            return;
        }
    }
}

/// The legacy handshake's answer: an OP_REPLY holding `reply`.
fn op_reply(response_to: i32, reply: &Document) -> Vec<u8> {
    let body = bson::to_vec(reply).unwrap();
    let length = 16 + 20 + body.len();
    let mut bytes = Vec::with_capacity(length);
    for field in [length as i32, 1, response_to, 1, 0] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes.extend_from_slice(&0i64.to_le_bytes());
    bytes.extend_from_slice(&0i32.to_le_bytes());
    bytes.extend_from_slice(&1i32.to_le_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

/// A port nothing listens on: connecting is refused at once.
fn closed_port() -> u16 {
    listener().1
}

fn member(set: &[u16], role: &str) -> Document {
    let hosts: Vec<String> = set.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    doc! {
        "ok": 1, "isWritablePrimary": role == "primary", "secondary": role == "secondary",
        "setName": "rs", "hosts": hosts, "minWireVersion": 0, "maxWireVersion": 21,
    }
}

/// A topology of `ports` (replica set "rs") on a virtual clock, with the
/// URI's `extra` options, and what its checks' times are.
fn topology(ports: &[u16], extra: &str) -> (Topology, Arc<CheckTimes>, Arc<VirtualClock>) {
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let uri = format!("mongodb://{}/?replicaSet=rs&{extra}", hosts.join(","));
    let options = ClientOptions::parse(&uri).run().unwrap();
    let clock = Arc::new(VirtualClock::new());
    let times = Arc::new(CheckTimes {
        clock: clock.clone(),
        start: clock.now(),
        started: Mutex::new(Vec::new()),
    });
    let time = Time {
        clock: clock.clone(),
        rng: fastrand::Rng::with_seed(3),
    };
    let handler: Arc<dyn EventSink> = times.clone();
    let topology = Topology::with_time(options, Some(handler), None, time).unwrap();
    (topology, times, clock)
}

fn select_primary(topology: &mut Topology) -> crate::error::Result<ServerAddress> {
    let primary = Criteria::ReadPreference(ReadPreference::primary());
    topology.select_for(&primary, "find", &[], Deadline::NONE)
}

#[test]
fn a_scan_without_a_primary_rechecks_on_virtual_time_until_server_selection_times_out() {
    let refused = closed_port();
    let (listening, secondary) = listener();
    serve(listening, member(&[secondary, refused], "secondary"));
    let extra = "serverSelectionTimeoutMS=12000&serverSelectionTryOnce=false";
    let (mut topology, times, clock) = topology(&[secondary, refused], extra);

    let error = select_primary(&mut topology).unwrap_err();

    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    // No primary: a rescan every minHeartbeatFrequencyMS (500 ms) of the
    // answering secondary, from the first at 0 ms to the last that fits in
    // serverSelectionTimeoutMS.
    let every_half_second: Vec<u64> = (0..24).map(|i| i * 500).collect();
    assert_eq!(times.of(secondary), every_half_second);
    // The refused member cools down for 5 s after each failure.
    assert_eq!(times.of(refused), [0, 5_000, 10_000]);
    // Every wait was the clock's: 500 ms between scans, then to the end
    // of serverSelectionTimeoutMS, and not a moment past it.
    let sleeps = clock.sleeps();
    assert_eq!(sleeps, vec![Duration::from_millis(500); 24]);
    assert_eq!(clock.now() - times.start, Duration::from_secs(12));
}

#[test]
fn a_selection_rescans_only_once_heartbeat_frequency_has_passed_on_the_clock() {
    let (listening, primary) = listener();
    serve(listening, member(&[primary], "primary"));
    let (mut topology, times, clock) = topology(&[primary], "heartbeatFrequencyMS=10000");
    let selected = ServerAddress::tcp("127.0.0.1", primary);

    assert_eq!(select_primary(&mut topology).unwrap(), selected);
    clock.advance(Duration::from_millis(9_999));
    assert_eq!(select_primary(&mut topology).unwrap(), selected);
    assert_eq!(times.of(primary), [0], "the first scan is still fresh");
    clock.advance(Duration::from_millis(1));
    assert_eq!(select_primary(&mut topology).unwrap(), selected);

    assert_eq!(times.of(primary), [0, 10_000]);
    assert!(clock.sleeps().is_empty(), "a primary at hand: no wait");
}
