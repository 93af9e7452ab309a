//! Many checks in one wait: new sockets are opened non-blocking to every
//! server the monitor asks for, and their connects and handshake hellos
//! all progress under one poller (mio), in this one thread. A server that
//! does not answer costs one connectTimeoutMS per scan however many there
//! are. Authentication after the hello stays blocking, per socket.
//!
//! ```text
//!  start: resolve ─> connect (non-blocking) ─┐
//!  wait:  poller ─> Connecting ─> Writing hello ─> Reading reply ─> done
//!                         └─ refused: next address of the name, or failed
//! ```
//!
//! TLS sockets, Unix sockets and servers that already have a socket are
//! checked blocking by the caller.

mod hello_bytes;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bson::Document;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::address::ServerAddress;
use crate::auth::Speculation;
use crate::error::{Error, Result};
use hello_bytes::{connect_progress, encode_hello, progress, ProgressError};

/// At most this many sockets connect at once; more wait for a free slot.
pub(super) const MAX_IN_FLIGHT: usize = 256;

/// A check's handshake under way.
struct Pending {
    address: ServerAddress,
    stream: TcpStream,
    /// Other addresses the host name resolved to, tried in turn.
    next_addresses: Vec<SocketAddr>,
    connected: bool,
    request: Vec<u8>,
    written: usize,
    request_id: i32,
    reply: Vec<u8>,
    started: Instant,
    limit: Option<Instant>,
    speculation: Speculation,
}

/// A finished handshake: the socket, its hello reply (or why it failed),
/// and how long it took.
pub(super) struct Finished {
    pub address: ServerAddress,
    pub result: Result<(std::net::TcpStream, Document, Speculation)>,
    pub started: Instant,
    pub limit: Option<Instant>,
}

/// The poller and the handshakes under way.
pub(super) struct Overlap {
    poll: Poll,
    events: Events,
    pending: Vec<Option<Pending>>,
}

/// What a handshake needs to start.
pub(super) struct Start {
    pub address: ServerAddress,
    pub addresses: Vec<SocketAddr>,
    pub command: Document,
    pub use_op_msg: bool,
    pub speculation: Speculation,
    pub started: Instant,
    pub limit: Option<Instant>,
}

impl Overlap {
    pub(super) fn new() -> std::io::Result<Overlap> {
        Ok(Overlap {
            poll: Poll::new()?,
            events: Events::with_capacity(256),
            pending: Vec::new(),
        })
    }

    /// How many handshakes are under way.
    pub(super) fn in_flight(&self) -> usize {
        self.pending.iter().flatten().count()
    }

    /// Ends every handshake under way, returning which server each was for
    /// and when it started.
    pub(super) fn drain(&mut self) -> Vec<(ServerAddress, Instant)> {
        let mut drained = Vec::new();
        for pending in self.pending.iter_mut().filter_map(Option::take) {
            let mut stream = pending.stream;
            let _ = self.poll.registry().deregister(&mut stream);
            drained.push((pending.address, pending.started));
        }
        drained
    }

    /// Drops every handshake under way (the selection ended without them).
    pub(super) fn abandon(&mut self) {
        for pending in self.pending.iter_mut().filter_map(Option::take) {
            let mut stream = pending.stream;
            let _ = self.poll.registry().deregister(&mut stream);
        }
    }

    /// Starts a handshake: the hello is encoded and the first address
    /// connected to. A failure to start is returned at once.
    pub(super) fn start(&mut self, start: Start) -> std::result::Result<(), Box<Finished>> {
        let request_id = crate::conn::next_request_id();
        let encoded = encode_hello(request_id, start.command, start.use_op_msg);
        let failed = |error: Error| {
            Box::new(Finished {
                address: start.address.clone(),
                result: Err(error),
                started: start.started,
                limit: start.limit,
            })
        };
        let request = match encoded {
            Ok(request) => request,
            Err(error) => return Err(failed(error)),
        };
        let mut addresses = start.addresses;
        addresses.reverse();
        let Some(first) = addresses.pop() else {
            let io = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the host name resolved to no address",
            );
            return Err(failed(Error::network(
                Some(start.address.clone()),
                "connecting",
                io,
            )));
        };
        let slot = self.free_slot();
        let stream = match self.connect(first, slot) {
            Ok(stream) => stream,
            Err(e) => {
                return Err(failed(Error::network(
                    Some(start.address.clone()),
                    "connecting",
                    e,
                )))
            }
        };
        self.pending[slot] = Some(Pending {
            address: start.address,
            stream,
            next_addresses: addresses,
            connected: false,
            request,
            written: 0,
            request_id,
            reply: Vec::new(),
            started: start.started,
            limit: start.limit,
            speculation: start.speculation,
        });
        Ok(())
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

    fn connect(&mut self, to: SocketAddr, slot: usize) -> std::io::Result<TcpStream> {
        let mut stream = TcpStream::connect(to)?;
        self.poll.registry().register(
            &mut stream,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        Ok(stream)
    }

    /// Waits, at most until `until` (and no longer than the first
    /// handshake's limit), and returns the handshakes that finished,
    /// including those whose limit passed.
    pub(super) fn wait(&mut self, now: Instant, until: Option<Instant>) -> Vec<Finished> {
        let first_limit = self.pending.iter().flatten().filter_map(|p| p.limit).min();
        let wake = match (first_limit, until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // The poller counts whole milliseconds: rounding up wakes it at or
        // after the instant, never just before (which would look like time
        // left to a caller comparing with it).
        let timeout = wake.map(|w| w.saturating_duration_since(now) + Duration::from_millis(1));
        let mut finished = Vec::new();
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != std::io::ErrorKind::Interrupted {
                // The poller itself failed: every handshake fails with it.
                for slot in 0..self.pending.len() {
                    let error = std::io::Error::new(e.kind(), e.to_string());
                    if let Some(done) = self.fail(slot, "waiting for the socket", error) {
                        finished.push(done);
                    }
                }
                return finished;
            }
        }
        let ready: Vec<usize> = self.events.iter().map(|e| e.token().0).collect();
        for slot in ready {
            if let Some(done) = self.drive(slot) {
                finished.push(done);
            }
        }
        let now = Instant::now();
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
                if let Some(done) = self.fail(slot, context, io) {
                    finished.push(done);
                }
            }
        }
        finished
    }

    fn phase(&self, slot: usize) -> &'static str {
        match &self.pending[slot] {
            Some(p) if p.connected => "during the handshake",
            _ => "connecting",
        }
    }

    fn fail(&mut self, slot: usize, context: &str, io: std::io::Error) -> Option<Finished> {
        let mut pending = self.pending.get_mut(slot)?.take()?;
        let _ = self.poll.registry().deregister(&mut pending.stream);
        Some(Finished {
            result: Err(Error::network(Some(pending.address.clone()), context, io)),
            address: pending.address,
            started: pending.started,
            limit: pending.limit,
        })
    }

    /// Moves one handshake on as far as its socket allows.
    fn drive(&mut self, slot: usize) -> Option<Finished> {
        let pending = self.pending.get_mut(slot)?.as_mut()?;
        if !pending.connected {
            match connect_progress(&pending.stream) {
                Ok(false) => return None,
                Ok(true) => pending.connected = true,
                Err(e) => return self.next_address(slot, e),
            }
        }
        match progress(pending) {
            Ok(None) => None,
            Ok(Some(reply)) => {
                let mut pending = self.pending[slot].take()?;
                let _ = self.poll.registry().deregister(&mut pending.stream);
                Some(Finished {
                    address: pending.address,
                    result: Ok((pending.stream.into(), reply, pending.speculation)),
                    started: pending.started,
                    limit: pending.limit,
                })
            }
            Err(ProgressError::Io(e)) => self.fail(slot, "during the handshake", e),
            Err(ProgressError::Reply(error)) => {
                let mut pending = self.pending[slot].take()?;
                let _ = self.poll.registry().deregister(&mut pending.stream);
                Some(Finished {
                    address: pending.address,
                    result: Err(error),
                    started: pending.started,
                    limit: pending.limit,
                })
            }
        }
    }

    /// The connect failed: try the name's next address, or give up.
    fn next_address(&mut self, slot: usize, error: std::io::Error) -> Option<Finished> {
        let next = self.pending[slot].as_mut()?.next_addresses.pop();
        let Some(next) = next else {
            return self.fail(slot, "connecting", error);
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut self.pending[slot].as_mut()?.stream);
        match self.connect(next, slot) {
            Ok(stream) => {
                self.pending[slot].as_mut()?.stream = stream;
                None
            }
            Err(e) => self.fail(slot, "connecting", e),
        }
    }
}

/// Time left of a handshake that started at `started` with `limit`.
pub(super) fn remaining(limit: Option<Instant>) -> impl Fn() -> Option<Duration> {
    move || {
        limit.map(|l| {
            l.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        })
    }
}
