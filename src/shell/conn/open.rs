//! Opening a connection: resolving the host within the connect timeout,
//! connecting (TCP or Unix), and starting TLS on a fresh TCP socket.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::stream::Stream;
use super::{Connection, NEXT_CONNECTION_ID};
use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::description::DEFAULT_MAX_MESSAGE_SIZE_BYTES;
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
        blocking_again(&stream, address)?;
        Ok(Connection::from_stream(
            Stream::Tcp(stream),
            address,
            generation,
            socket_timeout,
        ))
    }

    /// A connection over a TLS session whose handshake (and first hello)
    /// ran on a non-blocking socket, in a scan's shared wait. The socket is
    /// made blocking again, with TCP_NODELAY on; the session carries on as
    /// if [`Connection::start_tls`] had made it.
    pub fn from_tls(
        stream: TcpStream,
        session: Box<rustls::ClientConnection>,
        address: &ServerAddress,
        generation: u32,
        socket_timeout: Option<Duration>,
    ) -> Result<Connection> {
        blocking_again(&stream, address)?;
        let tls = rustls::StreamOwned::new(*session, stream);
        Ok(Connection::from_stream(
            Stream::Tls(Box::new(tls)),
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
            serial: 0,
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
        let server_name = crate::shell::tls::server_name(&self.address)?;
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
            .map_err(|e| crate::shell::tls::handshake_error(&self.address, &e))?;
        while session.is_handshaking() {
            if let Err(e) = session.complete_io(&mut tcp) {
                let tls_failure = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>());
                return Err(match tls_failure {
                    Some(failure) => crate::shell::tls::handshake_error(&self.address, failure),
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

/// A socket a scan's shared wait connected, made blocking again (with
/// TCP_NODELAY on) for the connection's own exchanges.
fn blocking_again(stream: &TcpStream, address: &ServerAddress) -> Result<()> {
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_nodelay(true))
        .map_err(|e| Error::network(Some(address.clone()), "setting up the socket", e))
}
