//! Opening a connection: resolving the host within the connect timeout,
//! connecting (TCP or Unix) without blocking, each wait bounded by the time
//! left, and starting TLS on a fresh TCP socket the same way.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::frame::{FrameReader, FrameWriter, Request};
use super::pump::Transfer;
use super::stream::{Socket, Stream};
use super::{Connection, NEXT_CONNECTION_ID};
use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES;
use crate::shell::clock::Clock;
use crate::shell::dns::ResolverConfig;

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
        let clock: Arc<dyn Clock> = Arc::new(crate::shell::clock::SystemClock);
        let timeouts = (connect_timeout, socket_timeout);
        Self::open_with_resolver(address, generation, timeouts, &resolver, clock)
    }

    /// [`Connection::open`] with host names resolved through `resolver`,
    /// the look-up bounded by the connect timeout too (`timeouts` is the
    /// connect timeout, then the socket timeout); the connection reads the
    /// time from `clock`.
    pub fn open_with_resolver(
        address: &ServerAddress,
        generation: u32,
        timeouts: (Option<Duration>, Option<Duration>),
        resolver: &ResolverConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Connection> {
        let (connect_timeout, socket_timeout) = timeouts;
        let deadline = connect_timeout.map(|t| clock.now() + t);
        let stream = match address {
            ServerAddress::Tcp { host, .. } => {
                let port = address
                    .port()
                    .unwrap_or(crate::proto::address::DEFAULT_PORT);
                let resolved = resolve(address, host, port, deadline, resolver)?;
                connect_tcp(address, resolved, deadline, clock.as_ref())?
            }
            #[cfg(unix)]
            ServerAddress::Unix { path } => std::os::unix::net::UnixStream::connect(path)
                .and_then(|s| {
                    s.set_nonblocking(true)?;
                    Stream::new(Socket::Unix(mio::net::UnixStream::from_std(s)), None)
                })
                .map_err(|e| Error::network(Some(address.clone()), "connecting", e))?,
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
            clock,
        ))
    }

    /// A connection over a non-blocking TCP socket a scan's shared wait
    /// connected (and ran the TLS handshake on, when `session` is given),
    /// already out of that wait's poller. The session carries on as if
    /// [`Connection::start_tls`] had made it.
    pub(crate) fn from_socket(
        socket: mio::net::TcpStream,
        session: Option<Box<rustls::ClientConnection>>,
        address: &ServerAddress,
        generation: u32,
        socket_timeout: Option<Duration>,
        clock: Arc<dyn Clock>,
    ) -> Result<Connection> {
        let stream = socket
            .set_nodelay(true)
            .and_then(|()| Stream::new(Socket::Tcp(socket), session))
            .map_err(|e| Error::network(Some(address.clone()), "setting up the socket", e))?;
        Ok(Connection::from_stream(
            stream,
            address,
            generation,
            socket_timeout,
            clock,
        ))
    }

    fn from_stream(
        stream: Stream,
        address: &ServerAddress,
        generation: u32,
        socket_timeout: Option<Duration>,
        clock: Arc<dyn Clock>,
    ) -> Connection {
        Connection {
            stream,
            address: address.clone(),
            id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
            server_id: None,
            service_id: None,
            generation,
            serial: 0,
            pid: std::process::id(),
            last_used: clock.now(),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE_BYTES as usize,
            socket_timeout,
            broken: false,
            out_of_step: false,
            write_buffer: Vec::new(),
            compressor: None,
            compress_buffer: Vec::new(),
            reader: FrameReader::default(),
            clock,
        }
    }

    /// Turns the freshly opened TCP socket into a TLS session and completes
    /// the TLS handshake within `timeout`. `config` is the client's one
    /// configuration ([`crate::tls::client_config`]), so sessions resume
    /// across its sockets. A certificate or host name failure is a
    /// [`ErrorKind::Tls`](crate::error::ErrorKind::Tls) error saying which
    /// and why.
    pub fn start_tls(
        &mut self,
        config: &std::sync::Arc<rustls::ClientConfig>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let server_name = crate::shell::tls::server_name(&self.address)?;
        if self.stream.tls.is_some() || self.stream.tcp_socket().is_none() {
            return Err(Error::internal("TLS can only start on a new TCP socket"));
        }
        let session = rustls::ClientConnection::new(config.clone(), server_name)
            .map_err(|e| crate::shell::tls::handshake_error(&self.address, &e))?;
        self.stream.tls = Some(Box::new(session));
        let deadline = timeout.map(|t| self.clock.now() + t);
        let mut writer = FrameWriter::default();
        let mut handshake = Transfer {
            request: Request::default(),
            writer: &mut writer,
            reader: None,
        };
        let outcome = self
            .stream
            .run(&mut handshake, deadline, self.clock.as_ref());
        outcome.map_err(|stall| self.stall_error(stall, "during the TLS handshake"))
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
    crate::shell::dns::resolve_host(resolver, host, port, deadline).map_err(|e| {
        let context = format!("resolving the host name ({e})");
        if e.is_network_timeout() {
            let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time");
            Error::network(Some(address.clone()), &context, io)
        } else {
            Error::network_message(Some(address.clone()), context)
        }
    })
}

/// Connects to each of `resolved` in turn until one answers, all within
/// `deadline`: a non-blocking connect, then readiness waits.
fn connect_tcp(
    address: &ServerAddress,
    resolved: Vec<SocketAddr>,
    deadline: Option<Instant>,
    clock: &dyn Clock,
) -> Result<Stream> {
    let mut last_error = None;
    for socket_address in resolved {
        match connect_one(socket_address, deadline, clock) {
            Ok(stream) => return Ok(stream),
            Err(e) => {
                let timed_out = e.kind() == std::io::ErrorKind::TimedOut;
                last_error = Some(e);
                if timed_out {
                    break;
                }
            }
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

fn connect_one(
    socket_address: SocketAddr,
    deadline: Option<Instant>,
    clock: &dyn Clock,
) -> std::io::Result<Stream> {
    let socket = mio::net::TcpStream::connect(socket_address)?;
    let mut stream = Stream::new(Socket::Tcp(socket), None)?;
    loop {
        if let Some(socket) = stream.tcp_socket() {
            if connect_progress(socket)? {
                return Ok(stream);
            }
        }
        stream.wait(deadline, clock)?;
    }
}

/// Whether a non-blocking connect has completed (`Ok(false)`: not yet);
/// TCP_NODELAY is set once it has.
pub(crate) fn connect_progress(socket: &mio::net::TcpStream) -> std::io::Result<bool> {
    if let Some(e) = socket.take_error()? {
        return Err(e);
    }
    match socket.peer_addr() {
        Ok(_) => {
            socket.set_nodelay(true)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(e),
    }
}
