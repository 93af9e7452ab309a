//! The socket under a connection (TCP, TLS over TCP, or Unix) and the
//! deadline-bounded reader/writer one exchange goes through.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub(super) enum Stream {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
}

impl Stream {
    pub(super) fn set_timeouts(&self, timeout: Option<Duration>) -> std::io::Result<()> {
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

    /// The TCP socket under the stream (a Unix socket has none).
    pub(super) fn tcp_socket(&self) -> Option<&TcpStream> {
        match self {
            Stream::Tcp(s) => Some(s),
            Stream::Tls(s) => Some(&s.sock),
            #[cfg(unix)]
            Stream::Unix(_) => None,
        }
    }

    /// Whether the peer has closed the socket or sent unexpected bytes,
    /// checked without blocking: used before reusing an idle socket.
    /// Unix sockets cannot be peeked on stable Rust; for them the ping
    /// after socketCheckIntervalMS is the only check.
    pub(super) fn peer_closed_or_dirty(&self) -> bool {
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
pub(super) struct DeadlineIo<'a> {
    pub(super) stream: &'a mut Stream,
    pub(super) applied: &'a mut Option<Option<Duration>>,
    pub(super) deadline: Option<Instant>,
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
