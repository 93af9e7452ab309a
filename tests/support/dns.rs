//! A loopback DNS server for the `mongodb+srv` tests, built on
//! hickory-proto's message types (already a dependency of the driver;
//! hickory-server would compile a Tokio stack for a few dozen lines of
//! work). It answers SRV, TXT, A, AAAA and CNAME questions over UDP from a
//! record list the test can change while it runs (following CNAME chains
//! as a recursive resolver does), and counts the questions.
//!
//! Zone fixtures (`fixtures/dns/*.zone`) hold one record a line:
//! `name TYPE data` — `SRV port target`, `TXT "string" "string"...`, `A ip`,
//! `CNAME target`.
//! A `{port:N}` in an SRV port maps through the test's port table, so the
//! spec's 27017-27019 can point at simulator members on free ports.
//!
//! Threads are fine here: this is test support. The server thread stops
//! when the [`DnsServer`] is dropped.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// One record the server serves.
#[derive(Clone, Debug)]
pub struct ZoneRecord {
    /// Owner name, lower case, no trailing dot.
    pub name: String,
    /// What it says.
    pub data: RData,
    /// Time to live.
    pub ttl: u32,
}

/// Parses a zone fixture; SRV ports found in `ports` are replaced.
pub fn parse_zone(text: &str, ports: &HashMap<u16, u16>) -> Vec<ZoneRecord> {
    let mut records = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        let mut parts = line.splitn(3, char::is_whitespace);
        let name = parts
            .next()
            .unwrap()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let kind = parts
            .next()
            .unwrap_or_else(|| panic!("no type in {line:?}"));
        let rest = parts.next().unwrap_or("").trim();
        let data = match kind {
            "SRV" => {
                let (port, target) = rest.split_once(' ').expect("SRV port target");
                let port: u16 = port.parse().expect("SRV port");
                let port = ports.get(&port).copied().unwrap_or(port);
                RData::SRV(SRV::new(
                    0,
                    5,
                    port,
                    Name::from_ascii(target.trim()).unwrap(),
                ))
            }
            "TXT" => {
                let strings: Vec<String> = rest
                    .split('"')
                    .enumerate()
                    .filter(|(i, _)| i % 2 == 1)
                    .map(|(_, s)| s.to_string())
                    .collect();
                RData::TXT(TXT::new(strings))
            }
            "A" => RData::A(A(rest.parse().expect("A address"))),
            "AAAA" => RData::AAAA(AAAA(rest.parse().expect("AAAA address"))),
            "CNAME" => RData::CNAME(CNAME(Name::from_ascii(rest).expect("CNAME target"))),
            other => panic!("unknown record type {other} in {line:?}"),
        };
        records.push(ZoneRecord {
            name,
            data,
            ttl: 300,
        });
    }
    records
}

/// An SRV record.
pub fn srv(name: &str, port: u16, target: &str, ttl: u32) -> ZoneRecord {
    ZoneRecord {
        name: name.to_ascii_lowercase(),
        data: RData::SRV(SRV::new(0, 5, port, Name::from_ascii(target).unwrap())),
        ttl,
    }
}

/// An A record.
pub fn a(name: &str, ip: std::net::Ipv4Addr) -> ZoneRecord {
    ZoneRecord {
        name: name.to_ascii_lowercase(),
        data: RData::A(A(ip)),
        ttl: 300,
    }
}

/// A CNAME record: `name` is an alias of `target`.
pub fn cname(name: &str, target: &str) -> ZoneRecord {
    ZoneRecord {
        name: name.to_ascii_lowercase(),
        data: RData::CNAME(CNAME(Name::from_ascii(target).unwrap())),
        ttl: 300,
    }
}

/// A TXT record of one string.
pub fn txt(name: &str, text: &str) -> ZoneRecord {
    ZoneRecord {
        name: name.to_ascii_lowercase(),
        data: RData::TXT(TXT::new(vec![text.to_owned()])),
        ttl: 300,
    }
}

/// Reads `fixtures/dns/<name>` from the crate root.
pub fn zone_fixture(name: &str, ports: &HashMap<u16, u16>) -> Vec<ZoneRecord> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/dns")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_zone(&text, ports)
}

/// A running loopback DNS server.
pub struct DnsServer {
    address: SocketAddr,
    records: Arc<Mutex<Vec<ZoneRecord>>>,
    questions: Arc<AtomicUsize>,
    asked: Arc<Mutex<Vec<String>>>,
    delay_ms: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The TCP server's thread, blocked in `accept` until `Drop` wakes it.
    tcp_thread: Option<JoinHandle<()>>,
}

impl DnsServer {
    /// Serves `records` on a free UDP port of 127.0.0.1.
    pub fn start(records: Vec<ZoneRecord>) -> DnsServer {
        DnsServer::start_with(records, Mode::Answer)
    }

    /// A name server that reads every question and never answers.
    pub fn silent() -> DnsServer {
        DnsServer::start_with(Vec::new(), Mode::Silent)
    }

    /// A name server that answers every question with junk: bytes that
    /// are no DNS message, and a well-formed reply with the wrong id.
    pub fn garbage() -> DnsServer {
        DnsServer::start_with(Vec::new(), Mode::Garbage)
    }

    /// A name server that answers every question SERVFAIL.
    pub fn failing() -> DnsServer {
        DnsServer::start_with(Vec::new(), Mode::Failing)
    }

    /// Serves `records` with every UDP reply truncated (TC set, no
    /// answers) and the full replies over TCP on the same port.
    pub fn truncating(records: Vec<ZoneRecord>) -> DnsServer {
        DnsServer::start_with(records, Mode::Truncating)
    }

    /// Serves `records` over UDP at `address` (a fixed one, such as port 53
    /// of a loopback address that a private `resolv.conf` names, for
    /// programs that only read the system's configuration).
    pub fn start_at(address: SocketAddr, records: Vec<ZoneRecord>) -> DnsServer {
        let socket = UdpSocket::bind(address)
            .unwrap_or_else(|e| panic!("binding the name server to {address}: {e}"));
        DnsServer::serve(socket, None, records, Mode::Answer)
    }

    fn start_with(records: Vec<ZoneRecord>, mode: Mode) -> DnsServer {
        let (socket, tcp) = bind(matches!(mode, Mode::Truncating));
        DnsServer::serve(socket, tcp, records, mode)
    }

    fn serve(
        socket: UdpSocket,
        tcp: Option<std::net::TcpListener>,
        records: Vec<ZoneRecord>,
        mode: Mode,
    ) -> DnsServer {
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let address = socket.local_addr().unwrap();
        let records = Arc::new(Mutex::new(records));
        let questions = Arc::new(AtomicUsize::new(0));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let delay_ms = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (records, questions, stop) = (records.clone(), questions.clone(), stop.clone());
            let (asked, delay_ms) = (asked.clone(), delay_ms.clone());
            thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((length, from)) = socket.recv_from(&mut buffer) else {
                        continue;
                    };
                    let Ok(query) = Message::from_vec(&buffer[..length]) else {
                        continue;
                    };
                    questions.fetch_add(query.queries().len(), Ordering::Relaxed);
                    asked
                        .lock()
                        .unwrap()
                        .extend(query.queries().iter().map(|q| {
                            let name = q.name().to_ascii().trim_end_matches('.').to_string();
                            format!("{} {name}", q.query_type())
                        }));
                    match mode {
                        Mode::Silent => continue,
                        Mode::Garbage => {
                            let _ = socket.send_to(&buffer[..length.min(7)], from);
                            let mut wrong = respond(&query, &[]);
                            wrong.set_id(query.id().wrapping_add(1));
                            let _ = socket.send_to(&wrong.to_vec().unwrap(), from);
                            continue;
                        }
                        Mode::Truncating => {
                            let mut cut = respond(&query, &[]);
                            cut.set_truncated(true)
                                .set_response_code(ResponseCode::NoError);
                            let _ = socket.send_to(&cut.to_vec().unwrap(), from);
                            continue;
                        }
                        Mode::Failing => {
                            let mut failed = respond(&query, &[]);
                            failed.set_response_code(ResponseCode::ServFail);
                            let _ = socket.send_to(&failed.to_vec().unwrap(), from);
                            continue;
                        }
                        Mode::Answer => {}
                    }
                    let reply = respond(&query, &records.lock().unwrap());
                    let bytes = reply.to_vec().unwrap();
                    let delay = delay_ms.load(Ordering::Relaxed);
                    if delay == 0 {
                        let _ = socket.send_to(&bytes, from);
                    } else {
                        // Each reply waits on its own, as a distant server's
                        // would: questions asked together arrive together.
                        let socket = socket.try_clone().unwrap();
                        thread::spawn(move || {
                            thread::sleep(Duration::from_millis(delay as u64));
                            let _ = socket.send_to(&bytes, from);
                        });
                    }
                }
            })
        };
        let tcp_thread = tcp.map(|listener| serve_tcp(listener, records.clone(), stop.clone()));
        DnsServer {
            address,
            records,
            questions,
            asked,
            delay_ms,
            stop,
            thread: Some(thread),
            tcp_thread,
        }
    }

    /// Where it listens.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Replaces the records it serves.
    pub fn set_records(&self, records: Vec<ZoneRecord>) {
        *self.records.lock().unwrap() = records;
    }

    /// Every question received, as `TYPE name`, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }

    /// Delays every reply by `delay` (a simulated network round trip).
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as usize, Ordering::Relaxed);
    }

    /// How many questions it has received.
    pub fn questions(&self) -> usize {
        self.questions.load(Ordering::Relaxed)
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if let Some(thread) = self.tcp_thread.take() {
            // A connection of our own wakes the thread from `accept`; it
            // then sees `stop` and ends.
            let _ = std::net::TcpStream::connect(self.address);
            let _ = thread.join();
        }
    }
}

#[derive(Clone, Copy)]
enum Mode {
    Answer,
    Silent,
    Garbage,
    Truncating,
    Failing,
}

/// A UDP socket on a free port and, when `with_tcp`, a TCP listener on the
/// same port number. The UDP port is free for UDP only: another process may
/// hold the TCP port of that number, so a taken one means another try with
/// a new UDP port (taking it on faith failed CI once with `AddrInUse`).
fn bind(with_tcp: bool) -> (UdpSocket, Option<std::net::TcpListener>) {
    const TRIES: usize = 50;
    for _ in 0..TRIES {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        if !with_tcp {
            return (socket, None);
        }
        match std::net::TcpListener::bind(socket.local_addr().unwrap()) {
            Ok(listener) => return (socket, Some(listener)),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => panic!("binding the name server's TCP port: {e}"),
        }
    }
    panic!("no port free for both UDP and TCP in {TRIES} tries");
}

/// Answers DNS over TCP (RFC 7766 framing) on `listener`, blocking in
/// `accept` (a poll would delay every connection) until `stop` is set and a
/// connection wakes it.
fn serve_tcp(
    listener: std::net::TcpListener,
    records: Arc<Mutex<Vec<ZoneRecord>>>,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    use std::io::{Read, Write};
    thread::spawn(move || loop {
        let accepted = listener.accept();
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok((mut stream, _)) = accepted else {
            continue;
        };
        // A client that connects and stays silent must not hold up `Drop`,
        // which joins this thread.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut length = [0u8; 2];
        if stream.read_exact(&mut length).is_err() {
            continue;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(length))];
        if stream.read_exact(&mut query).is_err() {
            continue;
        }
        let Ok(query) = Message::from_vec(&query) else {
            continue;
        };
        let reply = respond(&query, &records.lock().unwrap()).to_vec().unwrap();
        let mut framed = (reply.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&reply);
        let _ = stream.write_all(&framed);
    })
}

fn respond(query: &Message, records: &[ZoneRecord]) -> Message {
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true);
    let Some(question) = query.queries().first() else {
        reply.set_response_code(ResponseCode::FormErr);
        return reply;
    };
    reply.add_query(question.clone());
    let mut asked = question
        .name()
        .to_ascii()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let mut owner = question.name().clone();
    // Follows CNAME chains (at most 8 links, against loops) as a recursive
    // resolver does: each alias, then the records of the name it ends at.
    for _ in 0..8 {
        let here: Vec<&ZoneRecord> = records.iter().filter(|r| r.name == asked).collect();
        if here.is_empty() {
            if owner == *question.name() {
                reply.set_response_code(ResponseCode::NXDomain);
            }
            break;
        }
        let alias = here.iter().find_map(|r| match &r.data {
            RData::CNAME(target) if question.query_type() != RecordType::CNAME => {
                Some((r, target.0.clone()))
            }
            _ => None,
        });
        if let Some((record, target)) = alias {
            reply.add_answer(Record::from_rdata(
                owner.clone(),
                record.ttl,
                record.data.clone(),
            ));
            asked = target.to_ascii().trim_end_matches('.').to_ascii_lowercase();
            owner = target;
            continue;
        }
        for record in here {
            if record.data.record_type() == question.query_type() {
                reply.add_answer(Record::from_rdata(
                    owner.clone(),
                    record.ttl,
                    record.data.clone(),
                ));
            }
        }
        break;
    }
    reply
}
