//! The socket under a connection (TCP, TLS over TCP, or Unix), always
//! non-blocking, and its own poller: an exchange moves bytes with the
//! shared step ([`super::pump`]) and, when the socket would block, waits
//! for readiness no longer than the time left of its deadline, recomputed
//! before each wait. A readiness wait ends within a millisecond of the
//! time asked; a socket timeout (`SO_RCVTIMEO`) would be rounded up by the
//! kernel's timer wheel, by seconds for long limits.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::Instant;

use mio::event::Source;
use mio::{Events, Interest, Poll, Registry, Token};
use rustls::ClientConnection;

use super::pump::{self, Stall, Transfer};
use crate::shell::clock::Clock;

/// The longest one readiness wait may be asked for: the kernel lets a
/// wait of `t` end up to `t`/1000 late (its timer slack, 60 ms for 60 s),
/// so a long limit is waited out in slices, each ending within a
/// millisecond, the time left recomputed before each.
pub(crate) const LONGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A non-blocking socket.
#[derive(Debug)]
pub(crate) enum Socket {
    Tcp(mio::net::TcpStream),
    #[cfg(unix)]
    Unix(mio::net::UnixStream),
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Socket::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Source for Socket {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.register(r, t, i),
            #[cfg(unix)]
            Socket::Unix(s) => s.register(r, t, i),
        }
    }
    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.reregister(r, t, i),
            #[cfg(unix)]
            Socket::Unix(s) => s.reregister(r, t, i),
        }
    }
    fn deregister(&mut self, r: &Registry) -> std::io::Result<()> {
        match self {
            Socket::Tcp(s) => s.deregister(r),
            #[cfg(unix)]
            Socket::Unix(s) => s.deregister(r),
        }
    }
}

/// A connection's socket, its TLS session once started, and the poller
/// its waits go through.
pub(super) struct Stream {
    pub(super) socket: Socket,
    pub(super) tls: Option<Box<ClientConnection>>,
    poll: Poll,
    events: Events,
}

impl Stream {
    /// Watches `socket` (non-blocking) with a poller of its own.
    pub(super) fn new(
        mut socket: Socket,
        tls: Option<Box<ClientConnection>>,
    ) -> std::io::Result<Stream> {
        let poll = Poll::new()?;
        let interest = Interest::READABLE | Interest::WRITABLE;
        poll.registry().register(&mut socket, Token(0), interest)?;
        Ok(Stream {
            socket,
            tls,
            poll,
            events: Events::with_capacity(2),
        })
    }

    /// Moves `transfer` to its end, waiting for the socket between steps,
    /// and fails with `TimedOut` once `deadline` has passed.
    pub(super) fn run(
        &mut self,
        transfer: &mut Transfer<'_>,
        deadline: Option<Instant>,
        clock: &dyn Clock,
    ) -> Result<(), Stall> {
        loop {
            if pump::step(&mut self.socket, self.tls.as_deref_mut(), transfer)? {
                return Ok(());
            }
            self.wait(deadline, clock).map_err(Stall::Io)?;
        }
    }

    /// Waits until the socket may have changed or `deadline` passes.
    pub(super) fn wait(
        &mut self,
        deadline: Option<Instant>,
        clock: &dyn Clock,
    ) -> std::io::Result<()> {
        let timeout = match deadline {
            None => None,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(clock.now());
                if left.is_zero() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the exchange's time limit ran out",
                    ));
                }
                Some(left.min(LONGEST_WAIT))
            }
        };
        match self.poll.poll(&mut self.events, timeout) {
            Err(e) if e.kind() != std::io::ErrorKind::Interrupted => Err(e),
            _ => Ok(()),
        }
    }

    /// The TCP socket under the stream (a Unix socket has none).
    pub(super) fn tcp_socket(&self) -> Option<&mio::net::TcpStream> {
        match &self.socket {
            Socket::Tcp(s) => Some(s),
            #[cfg(unix)]
            Socket::Unix(_) => None,
        }
    }

    /// Closes the socket at once, without a network wait.
    pub(super) fn shutdown(&self) {
        match &self.socket {
            Socket::Tcp(s) => {
                let _ = s.shutdown(Shutdown::Both);
            }
            #[cfg(unix)]
            Socket::Unix(_) => {}
        }
    }

    /// Whether the peer has closed the socket or sent unexpected bytes,
    /// checked without blocking (one `recvfrom`): used before reusing an
    /// idle socket. Unread TLS records (a close_notify, an alert) count as
    /// unexpected bytes. Unix sockets cannot be peeked on stable Rust; for
    /// them the ping after socketCheckIntervalMS is the only check.
    pub(super) fn peer_closed_or_dirty(&self) -> bool {
        let Some(socket) = self.tcp_socket() else {
            return false;
        };
        let mut byte = [0u8; 1];
        match socket.peek(&mut byte) {
            // Readable with zero bytes: the peer closed. Readable with data:
            // bytes nobody asked for, so the stream is out of step.
            Ok(_) => true,
            Err(e) => !pump::would_block(&e),
        }
    }
}
