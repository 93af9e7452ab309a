//! What the executor asks of the sockets: the socket of a server, the
//! identity a cursor or transaction pins to, the description an operation
//! builds for, and command events.

use super::Topology;
use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::event::CommandEvent;
use crate::proto::logging::Component;
use crate::proto::sdam::ServerDescription;
use crate::shell::conn::Connection;

impl Topology {
    /// The socket of `address`, if it has one.
    pub(crate) fn connection_mut(&mut self, address: &ServerAddress) -> Option<&mut Connection> {
        self.connections.get_mut(address)
    }

    /// What a cursor or transaction pins to ([`Topology::pinned_socket`]):
    /// a value that names `address`'s current socket and no other socket
    /// this client ever had; 0 when it has none.
    ///
    /// Not the SDAM generation: a socket that replaces one the peer closed
    /// while idle keeps the generation, and behind a load balancer the
    /// generation is per service, so a socket to another service may share
    /// it. Either replacement would silently take over a cursor.
    pub(crate) fn socket_generation(&self, address: &ServerAddress) -> u32 {
        self.connections.get(address).map_or(0, Connection::serial)
    }

    /// Checks that `address` still has the very socket
    /// ([`Topology::socket_generation`]) a cursor or transaction is pinned
    /// to. A replacement socket may reach another process or service, so it
    /// never stands in for the old one.
    pub(crate) fn pinned_socket(&mut self, address: &ServerAddress, generation: u32) -> Result<()> {
        self.forget_inherited_sockets();
        let usable = generation != 0
            && self.socket_generation(address) == generation
            && self
                .connections
                .get(address)
                .is_some_and(|c| !c.is_broken() && !c.peer_closed_peeking());
        if usable {
            Ok(())
        } else {
            Err(Error::network_message(
                Some(address.clone()),
                "the socket this cursor or transaction is pinned to has been closed; \
                 its server-side state cannot be reached from a new socket",
            ))
        }
    }

    /// The socket for the closing `killCursors` of a cursor whose
    /// `getMore` timed out, on `address`: the cursor's own
    /// ([`Topology::pinned_socket`]) if still open, else a new one, within
    /// `deadline` (CSOT: a `close` after a timed-out `getMore`, whose
    /// timeout closed the socket, still kills the cursor). The connect is
    /// bounded by `deadline` and connectTimeoutMS, as any.
    /// The server keeps cursors per process, not per socket, so any socket
    /// to it can kill one; at worst a restarted server answers
    /// CursorNotFound, which a close ignores. Behind a load balancer a new
    /// socket may reach another service, and a server no longer in the
    /// topology, or marked Unknown (a network error, not a timeout, closed
    /// the socket), is not one to wait on a connect for: there only the
    /// cursor's own socket will do.
    pub(crate) fn socket_for_closing(
        &mut self,
        address: &ServerAddress,
        generation: u32,
        deadline: crate::proto::deadline::Deadline,
    ) -> Result<()> {
        let pinned = self.pinned_socket(address, generation);
        let known = self
            .monitor
            .description()
            .servers
            .get(address)
            .is_some_and(|server| server.server_type != crate::proto::sdam::ServerType::Unknown);
        if pinned.is_ok() || self.is_load_balanced() || !known {
            return pinned;
        }
        self.ensure_connection(address, deadline)
    }

    /// Whether a command event would reach anyone (a handler, or the
    /// command log at debug): building one copies the reply, which for a
    /// large batch doubles the memory an operation needs.
    pub(crate) fn command_events_wanted(&self) -> bool {
        self.handler.is_some()
            || crate::shell::logging::enabled(Component::Command, log::Level::Debug)
    }

    /// Hands a command event to the application's handler (the executor
    /// writes the log message itself).
    pub(crate) fn publish_command_event(&self, event: &CommandEvent) {
        if let Some(handler) = &self.handler {
            handler.handle_command_event(event);
        }
    }

    /// The description an operation on `address` builds its command for.
    /// Load balanced, that is what the socket's handshake said about the
    /// service behind it (wire version, size limits), as a LoadBalancer:
    /// the load balancer's own description keeps every field unset.
    pub(crate) fn server_for_operation(
        &self,
        address: &ServerAddress,
    ) -> Option<&ServerDescription> {
        let server = self.monitor.description().servers.get(address)?;
        match &self.load_balanced_service {
            Some(service) if self.is_load_balanced() && self.connections.contains_key(address) => {
                Some(service)
            }
            _ => Some(server),
        }
    }
}
