//! Sending a finished command on a server's socket: the command events,
//! the reply's cluster time, `ok: 0` as an error, SDAM error handling and
//! the session's bookkeeping of a failure.
//!
//! The command event's copies are made only when someone listens: the
//! command's in [`finish`](crate::proto::finish::finish), the reply's here.

use std::time::Duration;

use bson::Document;

use super::{ClientState, SessionSlot};
use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::proto::event::command::ConnectionInfo;
use crate::proto::event::command::{command_log, CommandLogFacts, CommandLogKind};
use crate::proto::event::CommandEvent;
use crate::proto::finish::Finished;
use crate::proto::logging::Component;
use crate::proto::reply::Reply;
use crate::proto::retry::classify::as_timeout;
use crate::proto::session::transaction::FailedCommand;
use crate::shell::conn::{check_reply, Connection};
use crate::shell::logging;

/// A failed attempt: the error, and whether the command reached the socket
/// (an error before that tells nothing about writes).
pub(crate) type SendError = (Error, bool);

/// What the event of a command's end needs, kept from its start.
struct InFlight {
    event_name: std::borrow::Cow<'static, str>,
    sensitive: bool,
    request_id: i32,
    /// Made only when someone listens for command events or logs.
    connection: Option<ConnectionInfo>,
    /// The database, for the log (empty when no one listens).
    database: String,
    generation: u32,
    /// Measured only when there is a listener (zero otherwise).
    duration: Duration,
}

impl ClientState {
    /// Sends `finished` on `address`'s socket and reads the reply; an error
    /// comes back with whether the command was sent.
    pub(super) fn send(
        &mut self,
        mut finished: Finished,
        address: &ServerAddress,
        session: &mut SessionSlot<'_>,
        deadline: Deadline,
    ) -> std::result::Result<Reply, SendError> {
        let socket_timeout = self.socket_timeout(deadline);
        let request_id = crate::shell::conn::next_request_id();
        let events_wanted = self.topology.command_events_wanted();
        let buffer = &mut self.read_buffer;
        let Some(connection) = with_read_buffer(self.topology.connection_mut(address), buffer)
        else {
            return Err((socket_gone(address), false));
        };
        // Only events read the connection's description (an address
        // clone per command otherwise).
        let connection_info = events_wanted.then(|| ConnectionInfo {
            address: address.clone(),
            driver_connection_id: connection.id(),
            server_connection_id: connection.server_id(),
            service_id: connection.service_id(),
        });
        let generation = connection.generation();
        // Only the command events report a duration: no clock reads
        // without a listener.
        let timed = connection_info.is_some();
        let sent_at;
        let result = match (finished.event_command.take(), connection_info.clone()) {
            (Some(command), Some(connection)) => {
                self.log_started(&finished, request_id, &connection, &command);
                self.topology.publish_command_event(&CommandEvent::Started {
                    command,
                    database_name: finished.target_db().to_string(),
                    command_name: finished.event_name.to_string(),
                    request_id,
                    connection,
                });
                sent_at = Some(self.time.now());
                // The listener had the topology: the socket is looked up again.
                match self.topology.connection_mut(address) {
                    Some(connection) => exchange(connection, &finished, request_id, socket_timeout),
                    None => Err(socket_gone(address)),
                }
            }
            _ => {
                sent_at = timed.then(|| self.time.now());
                exchange(connection, &finished, request_id, socket_timeout)
            }
        };
        let database = match &connection_info {
            Some(_) => finished.target_db().to_string(),
            None => String::new(),
        };
        let in_flight = InFlight {
            event_name: finished.event_name,
            sensitive: finished.sensitive,
            request_id,
            database,
            connection: connection_info,
            generation,
            duration: sent_at.map_or(Duration::ZERO, |at| {
                self.time.now().saturating_duration_since(at)
            }),
        };
        match result.and_then(|reply| self.observe_reply(reply, address, session)) {
            Ok(reply) => Ok(self.on_success(reply, in_flight)),
            Err(error) => Err((
                self.on_failure(error, finished.name, address, session, deadline, in_flight),
                true,
            )),
        }
    }

    /// Writes the command logging spec's message, when the command log is
    /// on; from the executor's own facts, apart from the published event.
    fn log_command(
        &self,
        command_name: &str,
        database_name: &str,
        request_id: i32,
        sensitive: bool,
        connection: &ConnectionInfo,
        kind: CommandLogKind<'_>,
    ) {
        if !logging::enabled(Component::Command, log::Level::Debug) {
            return;
        }
        let facts = CommandLogFacts {
            command_name,
            database_name,
            request_id,
            operation_id: self.topology.operation_id(),
            connection,
            topology_id: self.topology.description().id,
            sensitive,
        };
        logging::emit(&command_log(&facts, kind, logging::max_document_length()));
    }

    fn log_started(
        &self,
        finished: &Finished,
        request_id: i32,
        connection: &ConnectionInfo,
        command: &Document,
    ) {
        self.log_command(
            &finished.event_name,
            finished.target_db(),
            request_id,
            finished.sensitive,
            connection,
            CommandLogKind::Started { command },
        );
    }

    fn log_ended(
        &self,
        in_flight: &InFlight,
        connection: &ConnectionInfo,
        kind: CommandLogKind<'_>,
    ) {
        self.log_command(
            &in_flight.event_name,
            &in_flight.database,
            in_flight.request_id,
            in_flight.sensitive,
            connection,
            kind,
        );
    }

    /// How long the exchange may wait (`None`: for ever): timeoutMS replaces
    /// socketTimeoutMS, and `timeoutMS: 0` sets it aside with no limit of
    /// its own (CSOT: they do not combine).
    fn socket_timeout(&self, deadline: Deadline) -> Option<Duration> {
        if deadline.is_set() {
            deadline.remaining(self.time.now())
        } else {
            self.topology.options().socket_timeout()
        }
    }

    /// Learns the cluster and operation times of any reply (`ok: 0` too),
    /// then turns `ok: 0` into an error (passing `ok: 1` through by value).
    fn observe_reply(
        &mut self,
        reply: Reply,
        address: &ServerAddress,
        session: &mut SessionSlot<'_>,
    ) -> crate::error::Result<Reply> {
        match session.get() {
            Some(s) => {
                s.on_raw_cursor(reply.raw_cursor());
                s.on_reply_fields(&reply, &mut self.clock);
            }
            None => {
                self.clock.observe_fields(&reply);
            }
        }
        if reply.is_ok() {
            return Ok(reply);
        }
        // The error keeps the whole reply, a cursor kept as bytes too.
        let whole = reply
            .to_document()
            .unwrap_or_else(|_| reply.document().clone());
        check_reply(whole, address).map(Reply::from_document)
    }

    fn on_success(&mut self, reply: Reply, in_flight: InFlight) -> Reply {
        if let (true, Some(connection)) =
            (self.topology.command_events_wanted(), &in_flight.connection)
        {
            // A batch kept as bytes is converted only for the listener.
            let copy = if in_flight.sensitive {
                Document::new()
            } else {
                reply
                    .to_document()
                    .unwrap_or_else(|_| reply.document().clone())
            };
            let end = CommandLogKind::Succeeded {
                reply: &copy,
                duration: in_flight.duration,
            };
            self.log_ended(&in_flight, connection, end);
            self.topology
                .publish_command_event(&CommandEvent::Succeeded {
                    reply: copy,
                    command_name: in_flight.event_name.into_owned(),
                    request_id: in_flight.request_id,
                    duration: in_flight.duration,
                    connection: connection.clone(),
                });
        }
        reply
    }

    /// The failure's event, SDAM error handling, the session's labels and
    /// unpinning, and CSOT's timeout mapping.
    fn on_failure(
        &mut self,
        mut error: Error,
        command_name: &str,
        address: &ServerAddress,
        session: &mut SessionSlot<'_>,
        deadline: Deadline,
        in_flight: InFlight,
    ) -> Error {
        if let (true, Some(connection)) =
            (self.topology.command_events_wanted(), &in_flight.connection)
        {
            let end = CommandLogKind::Failed {
                failure: &error,
                duration: in_flight.duration,
            };
            self.log_ended(&in_flight, connection, end);
            self.topology.publish_command_event(&CommandEvent::Failed {
                failure: error.clone(),
                command_name: in_flight.event_name.into_owned(),
                request_id: in_flight.request_id,
                duration: in_flight.duration,
                connection: connection.clone(),
            });
        }
        self.topology
            .handle_operation_error(address, in_flight.generation, &error);
        if let Some(s) = session.get() {
            let failed = FailedCommand {
                name: command_name,
                write_concern_error: false,
            };
            s.on_error(&mut error, failed);
        }
        if deadline.is_set() {
            error = as_timeout(error, command_name);
        }
        error
    }
}

/// Writes the message and reads the reply (a `w: 0` write gets none; the
/// spec's events report `{ok: 1}` for it).
fn exchange(
    connection: &mut Connection,
    finished: &Finished,
    request_id: i32,
    socket_timeout: Option<Duration>,
) -> crate::error::Result<Reply> {
    let reply = connection.send_msg_reply(request_id, &finished.parts(), socket_timeout)?;
    Ok(if finished.unacknowledged() {
        Reply::unacknowledged()
    } else {
        reply
    })
}

/// The socket a command is sent on, given the buffer kept for the next
/// long reply (see [`ClientState::offer_read_buffer`]).
fn with_read_buffer<'a>(
    connection: Option<&'a mut Connection>,
    buffer: &mut Vec<u8>,
) -> Option<&'a mut Connection> {
    let connection = connection?;
    if buffer.capacity() > 0 {
        connection.offer_read_buffer(std::mem::take(buffer));
    }
    Some(connection)
}

/// The error for a server whose socket was closed between selection and
/// sending (a listener or an SDAM error in between).
#[cold]
fn socket_gone(address: &ServerAddress) -> Error {
    Error::network_message(Some(address.clone()), "the server's socket is gone")
}
