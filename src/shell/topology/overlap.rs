//! Many checks in one wait: new sockets are opened non-blocking to every
//! server the monitor asks for, and their connects, TLS handshakes and
//! handshake hellos all progress under one poller (mio), in this one
//! thread; servers that already have a socket get their hello sent at once
//! and their replies awaited in the same wait. A server that does not
//! answer costs one connectTimeoutMS per scan however many there are.
//! Authentication after the hello stays blocking, per socket.
//!
//! ```text
//!  new socket:  resolve ─> connect (non-blocking) ─> [TLS handshake] ─> hello ─> reply ─> Connection
//!                              └─ refused: next address of the name, or failed
//!  open socket: hello sent (blocking write) ─> poller: readable ─> reply read (bounded by the check)
//!  new socket, authenticating: command sent (blocking write) ─> poller: readable ─> reply read
//!                              ─> the shell steps the conversation ─> next command, or done
//! ```
//!
//! On an open socket the reply is read by the socket's own exchange once
//! the poller says it is readable, bounded by the check's limit: a hello
//! reply is a few hundred bytes that arrive together, so the read does not
//! wait in practice, and a peer that sends part of one and stalls holds the
//! wait no longer than its own connectTimeoutMS (the same bound as before).
//!
//! A new socket's bytes move through the same framer and step as a
//! connection's own exchanges ([`crate::shell::conn::pump`]); only the
//! waiting differs (one poller for many sockets here).
//!
//! Unix sockets stay blocking, checked one by one by the caller: they
//! reach a server on this machine, which answers or refuses without a
//! network round trip to overlap, and mio's TCP socket cannot stand in for
//! one.
//!
//! Split by job: `new_socket` (connect, TLS, hello), `tls_step` (the TLS
//! handshake driven by the poller), `exchange` (the hello's bytes),
//! `open_socket` (a hello on a socket already open).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::Document;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use exchange::HelloExchange;

mod exchange;
mod new_socket;
mod open_socket;
#[cfg(test)]
mod tests;
mod tls_step;
#[cfg(test)]
mod tls_tests;

use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::auth::Speculation;
use crate::shell::clock::Clock;
use crate::shell::conn::Connection;
use open_socket::hello_replied;

/// At most this many checks are under way at once; more wait for a slot.
pub(super) const MAX_IN_FLIGHT: usize = 256;

/// A check under way: the socket the poller watches, and its job.
struct Pending {
    address: ServerAddress,
    stream: TcpStream,
    started: Instant,
    limit: Option<Instant>,
    job: Job,
}

enum Job {
    /// A new socket: connect, TLS, the handshake's hello.
    Handshake(Box<Handshake>),
    /// A hello sent on an open socket, or a command of a new socket's
    /// authentication (`auth`); `stream` is a second handle to the same
    /// socket, registered for readiness only (no I/O goes through it).
    Hello {
        connection: Box<Connection>,
        request_id: i32,
        auth: Option<Box<Authenticating>>,
    },
}

/// A new socket's authentication under way in the shared wait: its
/// conversation, and the handshake reply the check reports once done.
pub(super) struct Authenticating {
    pub conversation: crate::proto::auth::Conversation,
    pub hello: Document,
}

struct Handshake {
    /// Other addresses the host name resolved to, tried in turn.
    next_addresses: Vec<SocketAddr>,
    connected: bool,
    exchange: HelloExchange,
    tls: Option<Box<rustls::ClientConnection>>,
    speculation: Speculation,
    generation: u32,
    socket_timeout: Option<Duration>,
}

/// A check's socket and hello reply.
pub(super) enum Checked {
    /// A new socket's handshake (authentication follows).
    Handshake(Connection, Document, Speculation),
    /// A hello on a socket that was already open.
    Hello(Connection, Document),
    /// The reply to a command of a new socket's authentication.
    AuthReply(Connection, Box<Authenticating>, Document),
    /// A new socket's authentication failed on the way (the conversation
    /// is handed back so the shell can clear what its failure invalidates).
    AuthFailed(Box<Authenticating>, Error),
}

/// A finished check: its result, and when it started.
pub(super) struct Finished {
    pub address: ServerAddress,
    pub result: Result<Checked>,
    pub started: Instant,
    pub limit: Option<Instant>,
}

/// The poller and the checks under way.
pub(super) struct Overlap {
    poll: Poll,
    events: Events,
    pending: Vec<Option<Pending>>,
    /// Where limits are compared with the time, and the connections made
    /// read it.
    clock: Arc<dyn Clock>,
}

/// What a new socket's handshake needs to start.
pub(super) struct Start {
    pub address: ServerAddress,
    pub addresses: Vec<SocketAddr>,
    pub command: Document,
    pub use_op_msg: bool,
    pub speculation: Speculation,
    /// The client's one TLS configuration, when `tls=true`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub generation: u32,
    pub socket_timeout: Option<Duration>,
    pub started: Instant,
    pub limit: Option<Instant>,
}

impl Overlap {
    pub(super) fn new(clock: Arc<dyn Clock>) -> std::io::Result<Overlap> {
        Ok(Overlap {
            poll: Poll::new()?,
            events: Events::with_capacity(256),
            pending: Vec::new(),
            clock,
        })
    }

    /// How many checks are under way.
    pub(super) fn in_flight(&self) -> usize {
        self.pending.iter().flatten().count()
    }

    /// Ends every check under way, returning which server each was for
    /// and when it started.
    pub(super) fn drain(&mut self) -> Vec<(ServerAddress, Instant)> {
        let mut drained = Vec::new();
        for slot in 0..self.pending.len() {
            if let Some(pending) = self.take(slot) {
                drained.push((pending.address, pending.started));
            }
        }
        drained
    }

    /// Drops every check under way (the selection ended without them).
    pub(super) fn abandon(&mut self) {
        self.drain();
    }

    /// Takes a check out of its slot and out of the poller. The poller
    /// must forget the socket before its handle closes: epoll watches the
    /// socket, not the handle, and an open socket's other handle lives on.
    fn take(&mut self, slot: usize) -> Option<Pending> {
        let mut pending = self.pending.get_mut(slot)?.take()?;
        let _ = self.poll.registry().deregister(&mut pending.stream);
        Some(pending)
    }

    fn free_slot(&mut self) -> usize {
        match self.pending.iter().position(Option::is_none) {
            Some(slot) => slot,
            None => {
                self.pending.push(None);
                self.pending.len() - 1
            }
        }
    }

    fn register(
        &mut self,
        mut stream: TcpStream,
        slot: usize,
        interest: Interest,
    ) -> std::io::Result<TcpStream> {
        self.poll
            .registry()
            .register(&mut stream, Token(slot), interest)?;
        Ok(stream)
    }

    /// Waits, at most until `until` (and no longer than the first check's
    /// limit), and returns the checks that finished, including those whose
    /// limit passed.
    pub(super) fn wait(&mut self, now: Instant, until: Option<Instant>) -> Vec<Finished> {
        let first_limit = self.pending.iter().flatten().filter_map(|p| p.limit).min();
        let wake = match (first_limit, until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // The poller counts whole milliseconds: rounding up wakes it at or
        // after the instant, never just before (which would look like time
        // left to a caller comparing with it). A long wait is cut to slices
        // (see `LONGEST_WAIT`): the caller waits again with the time left.
        let timeout = wake.map(|w| {
            let left = w.saturating_duration_since(now) + Duration::from_millis(1);
            left.min(crate::shell::conn::LONGEST_WAIT)
        });
        let mut finished = Vec::new();
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                // The poller itself failed: every check fails with it.
                for slot in 0..self.pending.len() {
                    let error = std::io::Error::new(e.kind(), e.to_string());
                    finished.extend(self.fail(slot, "waiting for the socket", error));
                }
                return finished;
            }
        }
        let ready: Vec<usize> = self.events.iter().map(|e| e.token().0).collect();
        for slot in ready {
            finished.extend(self.drive(slot));
        }
        let now = self.clock.now();
        for slot in 0..self.pending.len() {
            let expired = self.pending[slot]
                .as_ref()
                .is_some_and(|p| p.limit.is_some_and(|l| now >= l));
            if expired {
                let io = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no answer within connectTimeoutMS",
                );
                let context = self.phase(slot);
                finished.extend(self.fail(slot, context, io));
            }
        }
        finished
    }

    fn phase(&self, slot: usize) -> &'static str {
        let Some(Pending { job, .. }) = &self.pending[slot] else {
            return "checking the server";
        };
        match job {
            Job::Hello { auth: Some(_), .. } => "during authentication",
            Job::Hello { .. } => "waiting for the hello reply",
            Job::Handshake(h) if !h.connected => "connecting",
            Job::Handshake(h) if h.tls.as_ref().is_some_and(|t| t.is_handshaking()) => {
                "during the TLS handshake"
            }
            Job::Handshake(_) => "during the handshake",
        }
    }

    fn fail(&mut self, slot: usize, context: &str, io: std::io::Error) -> Option<Finished> {
        let pending = self.take(slot)?;
        let mut error = Error::network(Some(pending.address.clone()), context, io);
        if matches!(&pending.job, Job::Handshake(h) if h.connected && h.tls.is_none()) {
            error = crate::shell::tls::hint_tls_required(error);
        }
        Some(finished(pending, Err(error)))
    }

    /// Moves one check on as far as its socket allows.
    fn drive(&mut self, slot: usize) -> Option<Finished> {
        let pending = self.pending.get_mut(slot)?.as_ref()?;
        if matches!(pending.job, Job::Hello { .. }) {
            let pending = self.take(slot)?;
            return Some(hello_replied(pending, self.clock.as_ref()));
        }
        self.drive_handshake(slot)
    }
}

fn finished(pending: Pending, result: Result<Checked>) -> Finished {
    let result = match (result, pending.job) {
        (
            Err(error),
            Job::Hello {
                auth: Some(auth), ..
            },
        ) => Ok(Checked::AuthFailed(auth, error)),
        (result, _) => result,
    };
    Finished {
        address: pending.address,
        result,
        started: pending.started,
        limit: pending.limit,
    }
}

/// Time left at `now` of a check with `limit`, at least 1 ms (a zero
/// timeout means "no limit" to an exchange).
pub(super) fn time_left(limit: Option<Instant>, now: Instant) -> Option<Duration> {
    limit.map(|l| {
        l.saturating_duration_since(now)
            .max(Duration::from_millis(1))
    })
}
