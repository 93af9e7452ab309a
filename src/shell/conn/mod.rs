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

mod exchange;
pub(crate) mod frame;
mod open;
pub(crate) mod pump;
mod stream;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::Document;

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::compression::Compressor;
use crate::shell::clock::Clock;
use frame::FrameReader;
use pump::Stall;
use stream::Stream;

pub use crate::proto::reply::check_reply;
pub(crate) use open::{connect_progress, resolve};
pub(crate) use stream::LONGEST_WAIT;

/// Request ids are unique per process, so a reply can be matched to its request.
static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

/// Socket ids are unique per process too, for events and logs.
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// A request id no other request of this process has used.
pub fn next_request_id() -> i32 {
    NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed)
}

/// How long a socket may sit idle before reuse checks it with a
/// non-blocking peek. The peek costs a system call (`recvfrom`); a socket that
/// finished an exchange moments ago is almost never closed by then. A peer
/// that closed it within this window shows up as a network error on the
/// next exchange instead (handled like any other: retryable operations
/// retry on a new socket). libmongoc draws the line at one second
/// (`CHECK_CLOSED_DURATION_MSEC`); a tenth of that keeps the window narrow
/// while any loop of operations still skips the peek.
const PEEK_AFTER_IDLE: Duration = Duration::from_millis(100);

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
    /// The topology's pin value for this socket (0 until it is adopted;
    /// see `Topology::socket_generation`).
    serial: u32,
    /// The process that opened the socket: a forked child must not use it.
    pid: u32,
    last_used: Instant,
    max_message_size: usize,
    socket_timeout: Option<Duration>,
    /// Set when an exchange failed half-way: the stream may hold a partial
    /// reply, so it must never be used again.
    broken: bool,
    /// Set when a read brought bytes past the end of a reply: nothing was
    /// asked for them, so the stream is out of step (as a peek finding
    /// data would say).
    out_of_step: bool,
    write_buffer: Vec<u8>,
    /// What the handshake negotiated to compress requests with.
    compressor: Option<Compressor>,
    /// The compressed form of a request, reused across requests.
    compress_buffer: Vec<u8>,
    /// Frames each reply; its read-ahead buffer is reused across replies.
    reader: FrameReader,
    /// Where deadlines and idle times read the time.
    clock: Arc<dyn Clock>,
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
    /// Takes `buffer` to read the next long reply into (see
    /// `FrameReader::offer_body_buffer`).
    pub(crate) fn offer_read_buffer(&mut self, buffer: Vec<u8>) {
        self.reader.offer_body_buffer(buffer);
    }

    /// Compresses this socket's requests from now on with what the
    /// handshake negotiated (`None`: no compression).
    pub(crate) fn set_compressor(&mut self, compressor: Option<Compressor>) {
        self.compressor = compressor;
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

    /// The pin value the topology gave this socket when it adopted it
    /// (0 before).
    pub(crate) fn serial(&self) -> u32 {
        self.serial
    }

    /// Set by the topology as it adopts the socket.
    pub(crate) fn set_serial(&mut self, serial: u32) {
        self.serial = serial;
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
        self.peer_closed_at(self.clock.now())
    }

    /// [`peer_closed`](Self::peer_closed) at `now`, for a caller that has
    /// just read the clock (a clock read is not free in a virtual machine).
    pub fn peer_closed_at(&self, now: Instant) -> bool {
        if self.out_of_step {
            return true;
        }
        now.saturating_duration_since(self.last_used) >= PEEK_AFTER_IDLE
            && self.stream.peer_closed_or_dirty()
    }

    /// [`peer_closed`](Self::peer_closed), peeking however recently the
    /// socket was used: for a socket nothing else can replace (a cursor's
    /// or transaction's), where a close found now gives a clearer error
    /// than a failed exchange, and three system calls per batch are noise.
    pub fn peer_closed_peeking(&self) -> bool {
        self.out_of_step || self.stream.peer_closed_or_dirty()
    }

    /// A second handle to the TCP socket under this connection (TLS or
    /// not), for a poller to watch for readiness while the connection does
    /// the I/O; `None` for a Unix socket.
    #[cfg(unix)]
    pub(crate) fn readiness_handle(&self) -> Option<std::io::Result<mio::net::TcpStream>> {
        use std::os::fd::AsFd;
        let socket = self.stream.tcp_socket()?;
        let handle = socket.as_fd().try_clone_to_owned();
        Some(handle.map(|fd| mio::net::TcpStream::from_std(std::net::TcpStream::from(fd))))
    }

    /// Applies the server's `maxMessageSizeBytes` from its handshake reply.
    pub fn set_max_message_size(&mut self, size: i64) {
        if size > 0 {
            self.max_message_size = size as usize;
        }
    }

    #[cold]
    fn network_error(&self, context: &str, e: std::io::Error) -> Error {
        Error::network(Some(self.address.clone()), context, e)
    }

    /// The error of an exchange that stalled, naming the server.
    #[cold]
    fn stall_error(&self, stall: Stall, context: &str) -> Error {
        match stall {
            Stall::Io(e) => self.network_error(context, e),
            Stall::Refused(e) => self.with_address(e),
            Stall::Tls(failure) => crate::shell::tls::handshake_error(&self.address, &failure),
        }
    }

    #[cold]
    fn with_address(&self, e: Error) -> Error {
        e.naming_sender(&self.address)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // A forked child closes only its copy of the descriptor; shutting the
        // socket down would cut the parent's connection too.
        if !self.is_inherited() {
            self.stream.shutdown();
        }
    }
}
