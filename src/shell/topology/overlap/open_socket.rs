//! Checks on sockets that are already open, in the shared wait: the hello
//! is sent at once (a blocking write of a few hundred bytes into an idle
//! socket's buffer), the socket joins the poller for readiness, and its
//! reply is read by the connection's own blocking exchange once readable,
//! bounded by the check's limit.

use std::time::Instant;

use bson::Document;
use mio::Interest;

use super::{time_left, Checked, Finished, Job, Overlap, Pending};
use crate::error::Error;
use crate::shell::clock::Clock;
use crate::shell::conn::Connection;

impl Overlap {
    /// Starts a check on a socket that is already open: the hello is sent
    /// now, and its reply awaited in the wait.
    pub(in crate::shell::topology) fn start_hello(
        &mut self,
        mut connection: Connection,
        command: Document,
        started: Instant,
        limit: Option<Instant>,
    ) -> std::result::Result<(), Box<Finished>> {
        let address = connection.address().clone();
        let failed = |error: Error| {
            Box::new(Finished {
                address: address.clone(),
                result: Err(error),
                started,
                limit,
            })
        };
        let request_id = connection
            .send_command("admin", command, time_left(limit, self.clock.now()))
            .map_err(&failed)?;
        let slot = self.free_slot();
        let stream = match connection.readiness_handle() {
            Some(handle) => {
                handle.and_then(|stream| self.register(stream, slot, Interest::READABLE))
            }
            None => Err(std::io::Error::other("not a TCP socket")),
        }
        .map_err(|e| {
            failed(Error::network(
                Some(address.clone()),
                "checking the server",
                e,
            ))
        })?;
        self.pending[slot] = Some(Pending {
            address: address.clone(),
            stream,
            started,
            limit,
            job: Job::Hello {
                connection: Box::new(connection),
                request_id,
            },
        });
        Ok(())
    }
}

/// An open socket's hello reply is ready to read: it is read by the
/// socket's blocking exchange, bounded by the check's limit.
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
        } => connection
            .read_command_reply(request_id, time_left(limit, clock.now()))
            .map(|reply| Checked::Hello(*connection, reply)),
        Job::Handshake(_) => Err(Error::client("a new socket's check has no hello to read")),
    };
    Finished {
        address,
        result,
        started,
        limit,
    }
}
