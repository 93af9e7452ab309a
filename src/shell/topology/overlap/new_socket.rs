//! New sockets in the shared wait: a non-blocking connect to each
//! address the host name resolved to in turn, the TLS handshake when the
//! client uses TLS ([`super::tls_step`]), the handshake's hello
//! ([`super::exchange`]); then the socket becomes an ordinary blocking
//! [`Connection`].

use std::sync::Arc;

use bson::Document;
use mio::net::TcpStream;
use mio::Interest;

use super::exchange::HelloExchange;
use super::{finished, tls_step, Checked, Finished, Handshake, Job, Overlap, Pending, Start};
use crate::error::Error;
use crate::shell::clock::Clock;
use crate::shell::conn::pump::{self, Stall};
use crate::shell::conn::{connect_progress, Connection};

impl Overlap {
    /// Starts a new socket's handshake: the hello is encoded and the first
    /// address connected to. A failure to start is returned at once.
    pub(in crate::shell::topology) fn start(
        &mut self,
        start: Start,
    ) -> std::result::Result<(), Box<Finished>> {
        let failed = |error: Error| {
            Box::new(Finished {
                address: start.address.clone(),
                result: Err(error),
                started: start.started,
                limit: start.limit,
            })
        };
        let exchange = HelloExchange::new(start.command, start.use_op_msg).map_err(&failed)?;
        let tls = match &start.tls {
            Some(config) => Some(tls_step::start_session(config, &start.address).map_err(&failed)?),
            None => None,
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
        let stream = TcpStream::connect(first)
            .and_then(|stream| self.register(stream, slot, Interest::READABLE | Interest::WRITABLE))
            .map_err(|e| failed(Error::network(Some(start.address.clone()), "connecting", e)))?;
        self.pending[slot] = Some(Pending {
            address: start.address,
            stream,
            started: start.started,
            limit: start.limit,
            job: Job::Handshake(Box::new(Handshake {
                next_addresses: addresses,
                connected: false,
                exchange,
                tls,
                speculation: start.speculation,
                generation: start.generation,
                socket_timeout: start.socket_timeout,
            })),
        });
        Ok(())
    }

    /// Moves a new socket's connect, TLS handshake and hello on as far as
    /// the socket allows.
    pub(super) fn drive_handshake(&mut self, slot: usize) -> Option<Finished> {
        let pending = self.pending.get_mut(slot)?.as_mut()?;
        let Job::Handshake(handshake) = &mut pending.job else {
            return None;
        };
        if !handshake.connected {
            match connect_progress(&pending.stream) {
                Ok(false) => return None,
                Ok(true) => handshake.connected = true,
                Err(e) => return self.next_address(slot, e),
            }
        }
        let progress = pump::step(
            &mut pending.stream,
            handshake.tls.as_deref_mut(),
            &mut handshake.exchange.transfer(),
        );
        match progress {
            Ok(false) => None,
            Ok(true) => {
                let reply = handshake.exchange.reply(&pending.address);
                let pending = self.take(slot)?;
                Some(match reply {
                    Ok(reply) => handshake_done(pending, reply, self.clock.clone()),
                    Err(error) => finished(pending, Err(error)),
                })
            }
            Err(Stall::Io(e)) => {
                let context = self.phase(slot);
                self.fail(slot, context, e)
            }
            Err(Stall::Refused(error)) => {
                let error = Error::protocol(Some(pending.address.clone()), error.to_string());
                let pending = self.take(slot)?;
                Some(finished(pending, Err(error)))
            }
            Err(Stall::Tls(failure)) => {
                let error = crate::shell::tls::handshake_error(&pending.address, &failure);
                let pending = self.take(slot)?;
                Some(finished(pending, Err(error)))
            }
        }
    }

    /// The connect failed: try the name's next address, or give up.
    fn next_address(&mut self, slot: usize, error: std::io::Error) -> Option<Finished> {
        let next = match &mut self.pending[slot].as_mut()?.job {
            Job::Handshake(handshake) => handshake.next_addresses.pop(),
            Job::Hello { .. } => None,
        };
        let Some(next) = next else {
            return self.fail(slot, "connecting", error);
        };
        let _ = self
            .poll
            .registry()
            .deregister(&mut self.pending[slot].as_mut()?.stream);
        let interest = Interest::READABLE | Interest::WRITABLE;
        match TcpStream::connect(next).and_then(|s| self.register(s, slot, interest)) {
            Ok(stream) => {
                self.pending[slot].as_mut()?.stream = stream;
                None
            }
            Err(e) => self.fail(slot, "connecting", e),
        }
    }
}

/// A new socket's hello reply arrived: the socket (out of the shared
/// poller) becomes an ordinary connection (plain, or TLS over the finished
/// session) that waits in a poller of its own.
fn handshake_done(pending: Pending, reply: Document, clock: Arc<dyn Clock>) -> Finished {
    let Pending {
        address,
        stream,
        started,
        limit,
        job,
    } = pending;
    let result = match job {
        Job::Handshake(handshake) => {
            let Handshake {
                tls,
                speculation,
                generation,
                socket_timeout,
                ..
            } = *handshake;
            Connection::from_socket(stream, tls, &address, generation, socket_timeout, clock)
                .map(|c| Checked::Handshake(c, reply, speculation))
        }
        Job::Hello { connection, .. } => Ok(Checked::Hello(*connection, reply)),
    };
    Finished {
        address,
        result,
        started,
        limit,
    }
}
