//! One connection to one server: a blocking TCP (plain or TLS, see
//! [`Connection::start_tls`]) or Unix socket and the request/reply exchange over it.
//!
//! A [`Connection`] knows nothing of SDAM or selection. It opens, sends one
//! command and reads its reply, and reports failures as [`Error`]s that name
//! the server. The topology decides what a failure means.
//!
//! ```text
//!   open ──> (handshake by the caller) ──> command ⇄ reply ... ──> drop (close, no network wait)
//! ```

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::Document;

use crate::address::ServerAddress;
use crate::dns::ResolverConfig;
use crate::error::{CommandError, Error, ErrorKind, Result};
use crate::reply::Reply;
use crate::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES;
use crate::wire::{self, Header, Message, MsgFlags, OpMsg, HEADER_LEN};

/// Request ids are unique per process, so a reply can be matched to its request.
static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

/// Socket ids are unique per process too, for events and logs.
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// A request id no other request of this process has used.
pub fn next_request_id() -> i32 {
    NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed)
}

enum Stream {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

impl Stream {
    fn set_timeouts(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => {
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)
            }
            Stream::Tls(s) => {
                s.sock.set_read_timeout(timeout)?;
                s.sock.set_write_timeout(timeout)
            }
            #[cfg(unix)]
            Stream::Unix(s) => {
                s.set_read_timeout(timeout)?;
                s.set_write_timeout(timeout)
            }
        }
    }

    /// Whether the peer has closed the socket or sent unexpected bytes,
    /// checked without blocking: used before reusing an idle socket.
    /// Unix sockets cannot be peeked on stable Rust; for them the ping
    /// after socketCheckIntervalMS is the only check.
    fn peer_closed_or_dirty(&self) -> bool {
        let s = match self {
            Stream::Tcp(s) => s,
            // Unread TLS records (a close_notify, an alert) mean the same.
            Stream::Tls(s) => &s.sock,
            #[cfg(unix)]
            Stream::Unix(_) => return false,
        };
        let mut byte = [0u8; 1];
        if s.set_nonblocking(true).is_err() {
            return true;
        }
        let outcome = s.peek(&mut byte);
        let restored = s.set_nonblocking(false);
        match outcome {
            // Readable with zero bytes: the peer closed. Readable with data:
            // bytes nobody asked for, so the stream is out of step.
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => restored.is_err(),
            Err(_) => true,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// The stream of one exchange, bounded by its deadline: before each read
/// or write the socket timeout becomes the time left (set only when it
/// must change), and once the deadline has passed every call fails with
/// `TimedOut`. Works on the socket under any wrapping stream, so a TLS
/// stream over the same socket gets the same bound.
struct DeadlineIo<'a> {
    stream: &'a mut Stream,
    applied: &'a mut Option<Option<Duration>>,
    deadline: Option<Instant>,
}

/// How much longer than the time left a socket timeout may stay set: a
/// read may overrun the deadline by at most this much, and a fast exchange
/// costs no setsockopt call per read.
const TIMEOUT_SLACK: Duration = Duration::from_millis(20);

impl DeadlineIo<'_> {
    fn arm(&mut self) -> std::io::Result<()> {
        let wanted = match self.deadline {
            None => None,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the exchange's time limit ran out",
                    ));
                }
                // A zero timeout means "none" to the socket: at least 1 ms.
                let left = left.max(Duration::from_millis(1));
                match *self.applied {
                    Some(Some(set)) if set >= left && set <= left + TIMEOUT_SLACK => return Ok(()),
                    _ => Some(left),
                }
            }
        };
        if *self.applied != Some(wanted) {
            self.stream.set_timeouts(wanted)?;
            *self.applied = Some(wanted);
        }
        Ok(())
    }
}

impl Read for DeadlineIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.stream.read(buf)
    }
}

impl Write for DeadlineIo<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.arm()?;
        self.stream.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.arm()?;
        self.stream.flush()
    }
}

/// How long a socket may sit idle before reuse checks it with a
/// non-blocking peek. The peek costs three system calls (`ioctl`,
/// `recvfrom`, `ioctl`), a third of a warm `find_one`'s; a socket that
/// finished an exchange moments ago is almost never closed by then. A peer
/// that closed it within this window shows up as a network error on the
/// next exchange instead (handled like any other: retryable operations
/// retry on a new socket). libmongoc draws the line at one second
/// (`CHECK_CLOSED_DURATION_MSEC`); a tenth of that keeps the window narrow
/// while any loop of operations still skips the peek.
const PEEK_AFTER_IDLE: Duration = Duration::from_millis(100);

/// How many bytes one read of a reply asks for: a small reply (the usual
/// `find_one`) arrives header and body in one `recvfrom`.
const READ_AHEAD: usize = 16 * 1024;

/// An open socket to one server.
pub struct Connection {
    stream: Stream,
    address: ServerAddress,
    id: u64,
    /// The server's `connectionId` from the handshake reply.
    server_id: Option<i64>,
    /// The `serviceId` from the handshake reply (load-balanced mode).
    service_id: Option<bson::oid::ObjectId>,
    generation: u32,
    /// The process that opened the socket: a forked child must not use it.
    pid: u32,
    last_used: Instant,
    max_message_size: usize,
    socket_timeout: Option<Duration>,
    /// The read/write timeout last set on the socket (`None` before the
    /// first), so it is set again only when it must change.
    applied_timeout: Option<Option<Duration>>,
    /// Set when an exchange failed half-way: the stream may hold a partial
    /// reply, so it must never be used again.
    broken: bool,
    /// Set when a read brought bytes past the end of a reply: nothing was
    /// asked for them, so the stream is out of step (as a peek finding
    /// data would say).
    out_of_step: bool,
    write_buffer: Vec<u8>,
    /// Reused across replies (allocated on first read): the first read of
    /// each reply lands here.
    read_ahead: Vec<u8>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .field("generation", &self.generation)
            .field("broken", &self.broken)
            .finish()
    }
}

impl Connection {
    /// Opens a socket to `address` within `connect_timeout` (none: the OS
    /// default). Every resolved address is tried in turn. TCP_NODELAY is on.
    /// Host names are resolved with the system's DNS configuration.
    #[cfg(test)]
    pub fn open(
        address: &ServerAddress,
        generation: u32,
        connect_timeout: Option<Duration>,
        socket_timeout: Option<Duration>,
    ) -> Result<Connection> {
        let resolver = ResolverConfig::system();
        Self::open_with_resolver(
            address,
            generation,
            connect_timeout,
            socket_timeout,
            &resolver,
        )
    }

    /// [`Connection::open`] with host names resolved through `resolver`,
    /// the look-up bounded by `connect_timeout` too.
    pub fn open_with_resolver(
        address: &ServerAddress,
        generation: u32,
        connect_timeout: Option<Duration>,
        socket_timeout: Option<Duration>,
        resolver: &ResolverConfig,
    ) -> Result<Connection> {
        let stream = match address {
            ServerAddress::Tcp { host, port } => Stream::Tcp(connect_tcp(
                address,
                host,
                *port,
                connect_timeout,
                resolver,
            )?),
            #[cfg(unix)]
            ServerAddress::Unix { path } => {
                let s = std::os::unix::net::UnixStream::connect(path)
                    .map_err(|e| Error::network(Some(address.clone()), "connecting", e))?;
                Stream::Unix(s)
            }
            #[cfg(not(unix))]
            ServerAddress::Unix { .. } => {
                return Err(Error::invalid_argument(
                    "Unix domain sockets are not supported on this platform",
                ))
            }
        };
        Ok(Connection::from_stream(
            stream,
            address,
            generation,
            socket_timeout,
        ))
    }

    /// A connection over a TCP socket already connected to `address` (by
    /// a scan that connects to many servers in one wait). The socket is made
    /// blocking again, with TCP_NODELAY on.
    pub fn from_tcp(
        stream: TcpStream,
        address: &ServerAddress,
        generation: u32,
        socket_timeout: Option<Duration>,
    ) -> Result<Connection> {
        stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| Error::network(Some(address.clone()), "setting up the socket", e))?;
        Ok(Connection::from_stream(
            Stream::Tcp(stream),
            address,
            generation,
            socket_timeout,
        ))
    }

    fn from_stream(
        stream: Stream,
        address: &ServerAddress,
        generation: u32,
        socket_timeout: Option<Duration>,
    ) -> Connection {
        Connection {
            stream,
            address: address.clone(),
            id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
            server_id: None,
            service_id: None,
            generation,
            pid: std::process::id(),
            last_used: Instant::now(),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE_BYTES as usize,
            socket_timeout,
            applied_timeout: None,
            broken: false,
            out_of_step: false,
            write_buffer: Vec::new(),
            read_ahead: Vec::new(),
        }
    }

    /// Turns the freshly opened TCP socket into a TLS session and completes
    /// the TLS handshake within `timeout`. `config` is the client's one
    /// configuration ([`crate::tls::client_config`]), so sessions resume
    /// across its sockets. A certificate or host name failure is a
    /// [`ErrorKind::Tls`] error saying which and why.
    pub fn start_tls(
        &mut self,
        config: &std::sync::Arc<rustls::ClientConfig>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let server_name = crate::tls::server_name(&self.address)?;
        let placeholder = Stream::Tcp(match &self.stream {
            Stream::Tcp(s) => s
                .try_clone()
                .map_err(|e| self.network_error("starting TLS", e))?,
            _ => return Err(Error::client("TLS can only start on a new TCP socket")),
        });
        let Stream::Tcp(mut tcp) = std::mem::replace(&mut self.stream, placeholder) else {
            unreachable!("checked above");
        };
        tcp.set_read_timeout(timeout)
            .and_then(|_| tcp.set_write_timeout(timeout))
            .map_err(|e| self.network_error("setting the socket timeout", e))?;
        let mut session = rustls::ClientConnection::new(config.clone(), server_name)
            .map_err(|e| crate::tls::handshake_error(&self.address, &e))?;
        while session.is_handshaking() {
            if let Err(e) = session.complete_io(&mut tcp) {
                let tls_failure = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>());
                return Err(match tls_failure {
                    Some(failure) => crate::tls::handshake_error(&self.address, failure),
                    None => self.network_error("during the TLS handshake", e),
                });
            }
        }
        self.stream = Stream::Tls(Box::new(rustls::StreamOwned::new(session, tcp)));
        // The timeouts were set on the socket directly: the next exchange
        // must not trust what it last applied.
        self.applied_timeout = None;
        Ok(())
    }

    /// The server this socket leads to.
    pub fn address(&self) -> &ServerAddress {
        &self.address
    }

    /// The driver's id of this socket, unique within the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The server's id of this connection (`connectionId` in its handshake reply).
    pub fn server_id(&self) -> Option<i64> {
        self.server_id
    }

    /// The service this socket reaches behind a load balancer.
    pub fn service_id(&self) -> Option<bson::oid::ObjectId> {
        self.service_id
    }

    /// Records what the handshake reply says about this socket: the
    /// server's connection id, the service id, the message size limit.
    pub fn apply_handshake_reply(&mut self, reply: &Document) {
        self.server_id = match reply.get("connectionId") {
            Some(bson::Bson::Int32(v)) => Some(i64::from(*v)),
            Some(bson::Bson::Int64(v)) => Some(*v),
            Some(bson::Bson::Double(v)) => Some(*v as i64),
            _ => None,
        };
        self.service_id = reply.get_object_id("serviceId").ok();
        match reply.get("maxMessageSizeBytes") {
            Some(bson::Bson::Int32(v)) => self.set_max_message_size(i64::from(*v)),
            Some(bson::Bson::Int64(v)) => self.set_max_message_size(*v),
            _ => {}
        }
    }

    /// The generation of the server's socket slot when this socket opened.
    /// SDAM ignores errors from a socket older than the current generation.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Sets the generation once the handshake tells which service (behind a
    /// load balancer) the socket reached: the generation is per service.
    pub fn set_generation(&mut self, generation: u32) {
        self.generation = generation;
    }

    /// When the socket last completed an exchange.
    pub fn last_used(&self) -> Instant {
        self.last_used
    }

    /// Whether this socket was opened by another process (we were forked).
    pub fn is_inherited(&self) -> bool {
        self.pid != std::process::id()
    }

    /// Whether an exchange failed half-way and the socket must be closed.
    pub fn is_broken(&self) -> bool {
        self.broken || self.out_of_step
    }

    /// Whether the peer closed the socket (or sent something unasked) while
    /// it was idle. A socket used within 100 ms (`PEEK_AFTER_IDLE`) is trusted
    /// without a look; an idler one costs a non-blocking `peek`, no round
    /// trip.
    pub fn peer_closed(&self) -> bool {
        if self.out_of_step {
            return true;
        }
        self.last_used.elapsed() >= PEEK_AFTER_IDLE && self.stream.peer_closed_or_dirty()
    }

    /// [`peer_closed`](Self::peer_closed), peeking however recently the
    /// socket was used: for a socket nothing else can replace (a cursor's
    /// or transaction's), where a close found now gives a clearer error
    /// than a failed exchange, and three system calls per batch are noise.
    pub fn peer_closed_peeking(&self) -> bool {
        self.out_of_step || self.stream.peer_closed_or_dirty()
    }

    /// Applies the server's `maxMessageSizeBytes` from its handshake reply.
    pub fn set_max_message_size(&mut self, size: i64) {
        if size > 0 {
            self.max_message_size = size as usize;
        }
    }

    /// Sends `msg` as OP_MSG and reads the reply document. `timeout`
    /// overrides the socket timeout for this exchange (monitoring checks use
    /// connectTimeoutMS; an operation deadline shortens it).
    pub fn send_msg(
        &mut self,
        request_id: i32,
        msg: &OpMsg,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        self.send_msg_reply(request_id, msg, timeout)?
            .into_document()
    }

    /// [`send_msg`](Self::send_msg), keeping a cursor batch of the reply
    /// as bytes (see [`Reply`]).
    pub fn send_msg_reply(
        &mut self,
        request_id: i32,
        msg: &OpMsg,
        timeout: Option<Duration>,
    ) -> Result<Reply> {
        let mut buffer = std::mem::take(&mut self.write_buffer);
        buffer.clear();
        let encoded = wire::encode_msg(request_id, 0, msg, self.max_message_size, &mut buffer);
        if msg.flags.has(MsgFlags::MORE_TO_COME) {
            // The server sends nothing back for moreToCome (a w:0 write):
            // waiting for a reply would block until the socket timeout, or
            // for ever without one.
            let sent = encoded.and_then(|_| self.send_without_reply(&buffer, timeout));
            self.write_buffer = buffer;
            return sent.map(|()| Reply::from_document(Document::new()));
        }
        let outcome = encoded.and_then(|_| self.exchange_reply(request_id, &buffer, timeout));
        self.write_buffer = buffer;
        outcome
    }

    /// Runs `command` against database `db` as OP_MSG and returns the raw
    /// reply (ok: 0 is not turned into an error here; see [`check_reply`]).
    pub fn command(
        &mut self,
        db: &str,
        mut command: Document,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        command.insert("$db", db);
        let msg = OpMsg {
            flags: MsgFlags::default(),
            body: command,
            sequences: Vec::new(),
        };
        self.send_msg(next_request_id(), &msg, timeout)
    }

    /// Runs `command` as a legacy OP_QUERY on `<db>.$cmd` (the first hello
    /// of a connection, before the server said it speaks OP_MSG).
    pub fn legacy_command(
        &mut self,
        db: &str,
        command: &Document,
        timeout: Option<Duration>,
    ) -> Result<Document> {
        let request_id = next_request_id();
        let mut buffer = Vec::new();
        wire::encode_query(request_id, db, command, false, &mut buffer)?;
        self.exchange(request_id, &buffer, timeout)?
            .into_reply_document()
    }

    fn send_without_reply(&mut self, bytes: &[u8], timeout: Option<Duration>) -> Result<()> {
        let deadline = self.begin_exchange(timeout)?;
        self.write_request(bytes, deadline)?;
        self.broken = false;
        self.last_used = Instant::now();
        Ok(())
    }

    fn exchange(
        &mut self,
        request_id: i32,
        bytes: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Message> {
        let deadline = self.begin_exchange(timeout)?;
        self.write_request(bytes, deadline)?;
        let (header, body) = self.read_frame(request_id, deadline)?;
        let message = wire::decode(&header, &body).map_err(|e| self.with_address(e))?;
        self.refuse_more_to_come(message.more_to_come())?;
        self.broken = false;
        self.last_used = Instant::now();
        Ok(message)
    }

    /// [`exchange`](Self::exchange) for a command's reply: the body's bytes
    /// move into the [`Reply`], which keeps a cursor batch in them.
    fn exchange_reply(
        &mut self,
        request_id: i32,
        bytes: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Reply> {
        let deadline = self.begin_exchange(timeout)?;
        self.write_request(bytes, deadline)?;
        let (header, body) = self.read_frame(request_id, deadline)?;
        let (reply, more_to_come) =
            wire::decode_command_reply(&header, body).map_err(|e| self.with_address(e))?;
        self.refuse_more_to_come(more_to_come)?;
        self.broken = false;
        self.last_used = Instant::now();
        Ok(reply)
    }

    fn refuse_more_to_come(&self, more_to_come: bool) -> Result<()> {
        if more_to_come {
            return Err(Error::protocol(
                Some(self.address.clone()),
                "server set moreToCome, which this driver never requests",
            ));
        }
        Ok(())
    }

    /// Refuses a socket an earlier failure left out of step, marks it so
    /// until the exchange completes, and returns the exchange's deadline:
    /// one for the whole exchange, not a timeout per read, since a peer
    /// dripping a byte at a time would otherwise outlast any bound.
    fn begin_exchange(&mut self, timeout: Option<Duration>) -> Result<Option<Instant>> {
        if self.is_broken() {
            return Err(Error::network_message(
                Some(self.address.clone()),
                "socket is closed after an earlier failure",
            ));
        }
        self.broken = true;
        Ok(timeout.or(self.socket_timeout).map(|t| Instant::now() + t))
    }

    fn write_request(&mut self, bytes: &[u8], deadline: Option<Instant>) -> Result<()> {
        DeadlineIo {
            stream: &mut self.stream,
            applied: &mut self.applied_timeout,
            deadline,
        }
        .write_all(bytes)
        .map_err(|e| Error::network(Some(self.address.clone()), "sending a command", e))
    }

    /// Reads one reply message: its header and its body's bytes.
    fn read_frame(
        &mut self,
        request_id: i32,
        deadline: Option<Instant>,
    ) -> Result<(Header, Vec<u8>)> {
        let address = self.address.clone();
        let network_error = |context: &str, e| Error::network(Some(address.clone()), context, e);
        // One read for the header and, when it is small, the whole body.
        let mut read_ahead = std::mem::take(&mut self.read_ahead);
        read_ahead.resize(READ_AHEAD, 0);
        let mut filled = 0;
        let mut io = DeadlineIo {
            stream: &mut self.stream,
            applied: &mut self.applied_timeout,
            deadline,
        };
        let header_read = loop {
            if filled >= HEADER_LEN {
                break Ok(());
            }
            match io.read(&mut read_ahead[filled..]) {
                Ok(0) => {
                    break Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "connection closed before a reply header",
                    ))
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        let mut header_bytes = [0u8; HEADER_LEN];
        header_bytes.copy_from_slice(&read_ahead[..HEADER_LEN]);
        header_read.map_err(|e| network_error("reading a reply header", e))?;
        let header = Header::parse(&header_bytes, self.max_message_size)
            .map_err(|e| self.with_address(e))?;
        if header.response_to != request_id {
            return Err(Error::protocol(
                Some(self.address.clone()),
                format!(
                    "reply answers request {} but request {request_id} was sent",
                    header.response_to
                ),
            ));
        }
        let body_len = header.body_len();
        let early = &read_ahead[HEADER_LEN..filled];
        if early.len() > body_len {
            // Bytes after the reply that no request asked for: this reply is
            // whole, but the socket must not carry another exchange.
            self.out_of_step = true;
        }
        // Read the rest through `take` so memory grows with bytes actually
        // received, not with what the length field claims.
        let mut body = Vec::with_capacity(body_len.min(64 * 1024).max(early.len().min(body_len)));
        body.extend_from_slice(&early[..early.len().min(body_len)]);
        self.read_ahead = read_ahead;
        if body.len() < body_len {
            let mut io = DeadlineIo {
                stream: &mut self.stream,
                applied: &mut self.applied_timeout,
                deadline,
            };
            (&mut io)
                .take((body_len - body.len()) as u64)
                .read_to_end(&mut body)
                .map_err(|e| network_error("reading a reply", e))?;
        }
        if body.len() != body_len {
            return Err(network_error(
                "reading a reply",
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("connection closed after {} of {body_len} bytes", body.len()),
                ),
            ));
        }
        Ok((header, body))
    }

    fn network_error(&self, context: &str, e: std::io::Error) -> Error {
        Error::network(Some(self.address.clone()), context, e)
    }

    fn with_address(&self, e: Error) -> Error {
        match e.kind() {
            ErrorKind::Protocol {
                address: None,
                message,
            } => Error::protocol(Some(self.address.clone()), message.clone()),
            _ => e,
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // A forked child closes only its copy of the descriptor; shutting the
        // socket down would cut the parent's connection too.
        if !self.is_inherited() {
            match &self.stream {
                Stream::Tcp(s) => {
                    let _ = s.shutdown(Shutdown::Both);
                }
                Stream::Tls(s) => {
                    let _ = s.sock.shutdown(Shutdown::Both);
                }
                #[cfg(unix)]
                Stream::Unix(_) => {}
            }
        }
    }
}

/// The socket addresses of `host`, the look-up bounded by `deadline`
/// (std's to_socket_addrs cannot be bounded).
pub(crate) fn resolve(
    address: &ServerAddress,
    host: &str,
    port: u16,
    deadline: Option<Instant>,
    resolver: &ResolverConfig,
) -> Result<Vec<SocketAddr>> {
    crate::dns::resolve_host(resolver, host, port, deadline).map_err(|e| {
        let context = format!("resolving the host name ({e})");
        if e.is_network_timeout() {
            let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time");
            Error::network(Some(address.clone()), &context, io)
        } else {
            Error::network_message(Some(address.clone()), context)
        }
    })
}

fn connect_tcp(
    address: &ServerAddress,
    host: &str,
    port: u16,
    connect_timeout: Option<Duration>,
    resolver: &ResolverConfig,
) -> Result<TcpStream> {
    // The look-up ends with the connect timeout (which the caller has
    // already cut to the operation's deadline).
    let deadline = connect_timeout.map(|t| Instant::now() + t);
    let resolved = resolve(address, host, port, deadline, resolver)?;
    let mut last_error = None;
    for socket_address in resolved {
        let attempt = match connect_timeout {
            Some(t) => TcpStream::connect_timeout(&socket_address, t),
            None => TcpStream::connect(socket_address),
        };
        match attempt {
            Ok(stream) => {
                stream
                    .set_nodelay(true)
                    .map_err(|e| Error::network(Some(address.clone()), "setting TCP_NODELAY", e))?;
                return Ok(stream);
            }
            Err(e) => last_error = Some(e),
        }
    }
    let e = last_error.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the host name resolved to no address",
        )
    });
    Err(Error::network(Some(address.clone()), "connecting", e))
}

/// Turns a reply with `ok: 0` into an [`Error`] carrying the server's code,
/// message, labels and topologyVersion; passes `ok: 1` replies through.
pub fn check_reply(reply: Document, address: &ServerAddress) -> Result<Document> {
    let ok = match reply.get("ok") {
        Some(bson::Bson::Double(v)) => *v == 1.0,
        Some(bson::Bson::Int32(v)) => *v == 1,
        Some(bson::Bson::Int64(v)) => *v == 1,
        Some(bson::Bson::Boolean(v)) => *v,
        _ => false,
    };
    if ok {
        return Ok(reply);
    }
    let code = match reply.get("code") {
        Some(bson::Bson::Int32(c)) => *c,
        Some(bson::Bson::Int64(c)) => *c as i32,
        Some(bson::Bson::Double(c)) => *c as i32,
        _ => 0,
    };
    let labels: Vec<String> = reply
        .get_array("errorLabels")
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let error = CommandError {
        code,
        code_name: reply.get_str("codeName").unwrap_or_default().to_string(),
        message: reply
            .get_str("errmsg")
            .unwrap_or("the server gave no message")
            .to_string(),
        topology_version: reply.get_document("topologyVersion").ok().cloned(),
        address: Some(address.clone()),
    };
    Err(Error::from(error).with_labels(labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

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
}
