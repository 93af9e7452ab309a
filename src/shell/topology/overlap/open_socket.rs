//! Checks on sockets that are already open, in the shared wait: the hello
//! is sent at once (a blocking write of a few hundred bytes into an idle
//! socket's buffer), the socket joins the poller for readiness, and its
//! reply is read by the connection's own blocking exchange once readable,
//! bounded by the check's limit. A new socket's authentication commands
//! take the same way, one command of its conversation at a time.

use std::time::Instant;

use bson::Document;
use mio::Interest;

use super::{time_left, Authenticating, Checked, Finished, Job, Overlap, Pending};
use crate::error::Error;
use crate::shell::clock::Clock;
use crate::shell::conn::Connection;

impl Overlap {
    /// Starts a check on a socket that is already open: the hello is sent
    /// now, and its reply awaited in the wait.
    pub(in crate::shell::topology) fn start_hello(
        &mut self,
        connection: Connection,
        command: Document,
        started: Instant,
        limit: Option<Instant>,
    ) -> std::result::Result<(), Box<Finished>> {
        self.send_and_wait(connection, ("admin", command), None, (started, limit))
    }

    /// Sends the next command of a new socket's authentication (`db`,
    /// `command`) and awaits its reply in the wait, beside the other
    /// sockets'. The check keeps its start and limit.
    pub(in crate::shell::topology) fn continue_auth(
        &mut self,
        connection: Connection,
        (db, command): (&str, Document),
        auth: Box<Authenticating>,
        (started, limit): (Instant, Option<Instant>),
    ) -> std::result::Result<(), Box<Finished>> {
        self.send_and_wait(connection, (db, command), Some(auth), (started, limit))
    }

    fn send_and_wait(
        &mut self,
        mut connection: Connection,
        (db, command): (&str, Document),
        auth: Option<Box<Authenticating>>,
        (started, limit): (Instant, Option<Instant>),
    ) -> std::result::Result<(), Box<Finished>> {
        let address = connection.address().clone();
        let slot = self.free_slot();
        let sent = connection
            .send_command(db, command, time_left(limit, self.clock.now()))
            .and_then(|request_id| {
                let stream = match connection.readiness_handle() {
                    Some(handle) => {
                        handle.and_then(|stream| self.register(stream, slot, Interest::READABLE))
                    }
                    None => Err(std::io::Error::other("not a TCP socket")),
                };
                stream
                    .map(|stream| (request_id, stream))
                    .map_err(|e| Error::network(Some(address.clone()), "checking the server", e))
            });
        match sent {
            Ok((request_id, stream)) => {
                self.pending[slot] = Some(Pending {
                    address,
                    stream,
                    started,
                    limit,
                    job: Job::Hello {
                        connection: Box::new(connection),
                        request_id,
                        auth,
                    },
                });
                Ok(())
            }
            Err(error) => {
                let result = match auth {
                    Some(auth) => Ok(Checked::AuthFailed(auth, error)),
                    None => Err(error),
                };
                Err(Box::new(Finished {
                    address,
                    result,
                    started,
                    limit,
                }))
            }
        }
    }
}

/// A reply is ready to read on a socket that sent a command (an open
/// socket's hello, or a new socket's authentication step): it is read by
/// the socket's blocking exchange, bounded by the check's limit.
pub(super) fn hello_replied(pending: Pending, clock: &dyn Clock) -> Finished {
    let Pending {
        address,
        stream,
        started,
        limit,
        job,
    } = pending;
    // The poller's handle goes first; the connection keeps the socket.
    drop(stream);
    let result = match job {
        Job::Hello {
            mut connection,
            request_id,
            auth,
        } => {
            let reply = connection.read_command_reply(request_id, time_left(limit, clock.now()));
            match (reply, auth) {
                (Ok(reply), None) => Ok(Checked::Hello(*connection, reply)),
                (Ok(reply), Some(auth)) => Ok(Checked::AuthReply(*connection, auth, reply)),
                (Err(error), None) => Err(error),
                (Err(error), Some(auth)) => Ok(Checked::AuthFailed(auth, error)),
            }
        }
        Job::Handshake(_) => Err(Error::internal("a new socket's check has no hello to read")),
    };
    Finished {
        address,
        result,
        started,
        limit,
    }
}
