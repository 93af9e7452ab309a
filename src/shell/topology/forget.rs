//! Fire-and-forget commands at close (`endSessions`): on a socket already
//! open, never connecting, never waiting for the network.

use std::time::Duration;

use bson::Document;

use super::Topology;
use crate::proto::address::ServerAddress;
use crate::proto::handshake;
use crate::proto::sdam::ServerType;
use crate::proto::wire::{MsgFlags, OpMsg};

/// How long a fire-and-forget write at close may block on a full send
/// buffer before it is abandoned.
const FORGET_WRITE_TIMEOUT: Duration = Duration::from_millis(100);

impl Topology {
    /// Sends each command to `db` as a fire-and-forget OP_MSG (`moreToCome`)
    /// on a socket that is already open, the primary's if it has one, and
    /// ignores every error: used for `endSessions` when the client closes,
    /// which must neither connect nor wait for the network. A forked child
    /// sends nothing: the sessions belong to its parent.
    pub(crate) fn send_and_forget(&mut self, db: &str, commands: Vec<Document>) {
        if commands.is_empty() || std::process::id() != self.pid {
            return;
        }
        let primary_first = |address: &&ServerAddress| {
            let server_type = self
                .monitor
                .description()
                .servers
                .get(*address)
                .map(|s| s.server_type);
            server_type != Some(ServerType::RsPrimary)
        };
        let mut candidates: Vec<&ServerAddress> = self
            .connections
            .keys()
            .filter(|address| {
                self.monitor
                    .description()
                    .servers
                    .get(*address)
                    .is_some_and(|s| s.server_type.is_data_bearing())
            })
            .collect();
        candidates.sort_by_key(primary_first);
        let Some(address) = candidates.first().map(|a| (*a).clone()) else {
            return;
        };
        let Some(connection) = self.connections.get_mut(&address) else {
            return;
        };
        if connection.is_broken() || connection.peer_closed() {
            return;
        }
        for mut body in commands {
            body.insert("$db", db);
            if let Some(api) = self.options.server_api() {
                handshake::append_server_api(&mut body, Some(api));
            }
            let msg = OpMsg {
                flags: MsgFlags::MORE_TO_COME,
                body,
                sequences: Vec::new(),
            };
            // A small message fits the socket's send buffer, so this write
            // does not wait on the peer; the timeout only bounds a full one.
            let sent = connection.send_msg(
                crate::shell::conn::next_request_id(),
                &msg,
                Some(FORGET_WRITE_TIMEOUT),
            );
            if sent.is_err() {
                return;
            }
        }
    }
}
