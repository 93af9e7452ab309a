//! Asking name servers: the questions of one look-up sent at once over
//! UDP, replies matched by id and question, a truncated reply asked again
//! over TCP, all within the caller's deadline.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::time::Instant;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

use super::ResolverConfig;
use crate::error::Error;
use crate::shell::clock::Clock;

/// The largest DNS message (the TCP length prefix is 16 bits).
const MAX_MESSAGE: usize = 65_535;

/// A failed question, before it is told which record it was about.
#[derive(Debug)]
pub(super) struct DnsError {
    timed_out: bool,
    message: String,
}

impl DnsError {
    pub(super) fn context(self, what: &str) -> Error {
        let message = format!("DNS look-up of the {what} failed: {}", self.message);
        if self.timed_out {
            Error::network(
                None,
                &message,
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"),
            )
        } else {
            Error::network_message(None, message)
        }
    }
}

impl From<(bool, String)> for DnsError {
    fn from((timed_out, message): (bool, String)) -> Self {
        DnsError { timed_out, message }
    }
}

/// One question's outcome: the reply, or why there is none.
pub(super) type Reply = std::result::Result<Message, DnsError>;

/// A question sent and not yet answered: its index among the questions,
/// its id, and its bytes (to ask again over TCP if the reply is truncated).
type Pending = (usize, u16, Vec<u8>);

/// Sends every question to the name servers in turn (all questions at
/// once, over one UDP socket) until each has an answer or `deadline`
/// passes. One result per question, in order: the reply, or why there is
/// none. Replies from elsewhere, with an unknown id or the wrong question
/// are dropped: a stray or spoofed datagram cannot answer for the server.
pub(super) fn exchange(
    config: &ResolverConfig,
    questions: &[(Name, RecordType)],
    deadline: Option<Instant>,
) -> std::result::Result<Vec<Reply>, DnsError> {
    let mut results: Vec<Option<Reply>> = questions.iter().map(|_| None).collect();
    let mut last_problem = String::from("no name server is configured");
    for _attempt in 0..config.attempts.max(1) {
        for server in &config.name_servers {
            if let Some(problem) = ask_server(config, server, questions, &mut results, deadline)? {
                last_problem = problem;
            }
            if results.iter().all(Option::is_some) {
                return Ok(results.into_iter().map(Option::unwrap).collect());
            }
        }
    }
    Err(DnsError::from((false, last_problem)))
}

fn io_error(e: std::io::Error) -> DnsError {
    DnsError::from((false, e.to_string()))
}

/// Asks `server` the questions not answered yet, over one UDP socket, and
/// files its replies in `results` until all came or the attempt's time is
/// up. Returns why `server` left some unanswered, if it did; fails once
/// `deadline` has passed.
fn ask_server(
    config: &ResolverConfig,
    server: &SocketAddr,
    questions: &[(Name, RecordType)],
    results: &mut [Option<Reply>],
    deadline: Option<Instant>,
) -> std::result::Result<Option<String>, DnsError> {
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind).map_err(io_error)?;
    let mut pending = send_questions(config, &socket, server, questions, results)?;
    let attempt_end = config.clock.now() + config.attempt_timeout;
    let mut buffer = vec![0u8; MAX_MESSAGE];
    while !pending.is_empty() {
        let now = config.clock.now();
        let end = deadline.map_or(attempt_end, |d| d.min(attempt_end));
        if now >= end {
            if deadline.is_some_and(|d| now >= d) {
                return Err(DnsError::from((
                    true,
                    format!("no answer from {server} before the deadline"),
                )));
            }
            let waited = config.attempt_timeout;
            return Ok(Some(format!("no answer from {server} within {waited:?}")));
        }
        socket.set_read_timeout(Some(end - now)).map_err(io_error)?;
        let (length, from) = match socket.recv_from(&mut buffer) {
            Ok(received) => received,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            // An ICMP "port unreachable" shows up here: this server is not
            // listening, ask the next one.
            Err(e) => return Ok(Some(format!("{server}: {e}"))),
        };
        let datagram = &buffer[..length];
        let Some((position, message)) = match_reply(datagram, from, server, &pending, questions)
        else {
            continue;
        };
        let (index, _, bytes) = pending.swap_remove(position);
        let reply = if message.truncated() {
            let tcp_deadline = deadline.unwrap_or(attempt_end);
            tcp_exchange(&*config.clock, server, &bytes, message.id(), tcp_deadline)
        } else {
            Ok(message)
        };
        results[index] = Some(reply.and_then(check_response_code));
    }
    Ok(None)
}

/// Sends `server` each question that has no result yet.
fn send_questions(
    config: &ResolverConfig,
    socket: &UdpSocket,
    server: &SocketAddr,
    questions: &[(Name, RecordType)],
    results: &[Option<Reply>],
) -> std::result::Result<Vec<Pending>, DnsError> {
    let mut pending = Vec::new();
    for (index, (name, record_type)) in questions.iter().enumerate() {
        if results[index].is_some() {
            continue;
        }
        let id = config.query_ids.u16();
        let bytes = query_bytes(id, name, *record_type)?;
        socket.send_to(&bytes, server).map_err(io_error)?;
        pending.push((index, id, bytes));
    }
    Ok(pending)
}

/// Which pending question `datagram` answers, with the parsed reply: none
/// if it came from elsewhere, does not parse, or matches no id and question.
fn match_reply(
    datagram: &[u8],
    from: SocketAddr,
    server: &SocketAddr,
    pending: &[Pending],
    questions: &[(Name, RecordType)],
) -> Option<(usize, Message)> {
    if from != *server {
        return None;
    }
    let message = Message::from_vec(datagram).ok()?;
    let position = pending.iter().position(|(index, id, _)| {
        *id == message.id() && answers_question(&message, &questions[*index])
    })?;
    Some((position, message))
}

/// Whether `message` is a reply to `question` (names compare without case).
fn answers_question(message: &Message, question: &(Name, RecordType)) -> bool {
    message.message_type() == MessageType::Response
        && message
            .queries()
            .first()
            .is_some_and(|q| q.query_type() == question.1 && *q.name() == question.0)
}

/// A "no such name" reply is an empty answer; a server failure is an error.
fn check_response_code(message: Message) -> Reply {
    match message.response_code() {
        ResponseCode::NoError | ResponseCode::NXDomain => Ok(message),
        code => Err(DnsError::from((
            false,
            format!("the name server answered {code}"),
        ))),
    }
}

fn query_bytes(
    id: u16,
    name: &Name,
    record_type: RecordType,
) -> std::result::Result<Vec<u8>, DnsError> {
    let mut message = Message::new();
    message
        .set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name.clone(), record_type));
    message
        .to_vec()
        .map_err(|e| DnsError::from((false, format!("cannot encode the question: {e}"))))
}

/// Asks again over TCP, as RFC 7766 says to when a UDP reply is truncated.
fn tcp_exchange(
    clock: &dyn Clock,
    server: &SocketAddr,
    query: &[u8],
    id: u16,
    deadline: Instant,
) -> std::result::Result<Message, DnsError> {
    use std::io::{Read, Write};
    let left = |what: &str| {
        deadline
            .checked_duration_since(clock.now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| DnsError::from((true, format!("no time left to {what} over TCP"))))
    };
    let io = |e: std::io::Error| {
        let timed_out = matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        );
        DnsError::from((timed_out, format!("{server} over TCP: {e}")))
    };
    let mut stream = TcpStream::connect_timeout(server, left("connect")?).map_err(io)?;
    let mut framed = Vec::with_capacity(query.len() + 2);
    framed.extend_from_slice(&(query.len() as u16).to_be_bytes());
    framed.extend_from_slice(query);
    stream.set_write_timeout(Some(left("send")?)).map_err(io)?;
    stream.write_all(&framed).map_err(io)?;
    let mut length = [0u8; 2];
    stream.set_read_timeout(Some(left("read")?)).map_err(io)?;
    stream.read_exact(&mut length).map_err(io)?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(length))];
    stream.set_read_timeout(Some(left("read")?)).map_err(io)?;
    stream.read_exact(&mut reply).map_err(io)?;
    let message = Message::from_vec(&reply)
        .map_err(|e| DnsError::from((false, format!("{server} sent a malformed reply: {e}"))))?;
    if message.id() != id {
        return Err(DnsError::from((
            false,
            format!("{server} answered over TCP with the wrong id"),
        )));
    }
    Ok(message)
}
