//! Where a session's commands may go: a transaction pinned to its router
//! or load-balanced socket (one transaction per such socket), what a dead
//! pinned socket means to the transaction, and a session inherited across
//! fork(). The rules are the session layer's; this is the shell's part.

use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::TopologyType;
use crate::proto::session::transaction::{FailedCommand, Pin, TransactionState};
use crate::proto::session::SessionState;

use super::attempt::Run;
use super::{ClientState, SessionSlot, SocketOwner, Target};
use crate::shell::fork::this_process;

impl ClientState {
    /// A session created before fork() and used in the child gets a server
    /// session of the child's own: the parent's `lsid` is never sent.
    pub(super) fn adopt_if_forked(&mut self, session: &mut SessionState) -> Result<()> {
        // Runs before selection, so the topology's cached pid may still be
        // the parent's: ask the kernel.
        let pid = std::process::id();
        if !session.inherited_by(pid) {
            return Ok(());
        }
        let timeout = self.logical_session_timeout();
        let fresh = self
            .sessions
            .checkout(this_process(pid), self.time.now(), timeout);
        session.adopt_after_fork(fresh, pid)
    }

    /// Behind a load balancer a transaction is pinned to its socket (the
    /// recorded one); on a sharded cluster to the mongos, whichever its
    /// socket.
    pub(super) fn pinned_target(&self, pin: Pin) -> Target {
        let generation = match pin.connection {
            Some(socket) => u32::try_from(socket).unwrap_or(0),
            None => self.topology.socket_generation(&pin.address),
        };
        Target::Pinned {
            address: pin.address,
            generation,
        }
    }

    /// The socket a transaction is pinned to is gone: the session labels
    /// the error as for a network error (`TransientTransactionError` on a
    /// command in the transaction, `UnknownTransactionCommitResult` on a
    /// commit) and unpins, so that `with_transaction` can retry and a
    /// commit's retry selects a new socket.
    pub(super) fn pinned_socket_lost(
        &mut self,
        run: &mut Run<'_>,
        error: &mut Error,
        command_name: &str,
    ) {
        let in_transaction = run.shape.in_transaction || run.shape.ends_transaction();
        let Some(s) = run.session.get() else {
            return;
        };
        s.on_error(error, FailedCommand::named(command_name));
        if in_transaction && s.transaction().pinned().is_none() {
            run.target = Target::Select;
        }
    }

    /// A transaction on a sharded cluster or behind a load balancer stays
    /// on the router (and socket) its first command used. A retry of the
    /// first command (an overload error) re-pins to where the retry goes,
    /// which is where the transaction then starts. Behind a load balancer
    /// the one socket carries at most one transaction at a time (the
    /// load-balancer spec): another session's first command is refused.
    pub(super) fn pin_transaction(
        &mut self,
        run: &mut Run<'_>,
        address: &ServerAddress,
        topology_type: TopologyType,
    ) -> Result<()> {
        let load_balanced = topology_type == TopologyType::LoadBalanced;
        if !(run.shape.in_transaction && (load_balanced || topology_type == TopologyType::Sharded))
        {
            return Ok(());
        }
        let serial = self.topology.socket_generation(address);
        let Some(s) = run.session.get() else {
            return Ok(());
        };
        let starting = s.transaction().state() == TransactionState::Starting;
        if s.transaction().pinned().is_some() && !starting {
            return Ok(());
        }
        if load_balanced {
            if let Some(owner) = &self.socket_transaction {
                if owner.serial == serial && Some(&owner.lsid) != s.id() {
                    return Err(Error::client(format!(
                        "another session's transaction is in progress on the socket to the load \
                         balancer {address}; a load-balanced connection carries one transaction \
                         at a time: commit or abort it before starting this one"
                    )));
                }
            }
        }
        s.transaction_mut().pin(Pin {
            address: address.clone(),
            connection: load_balanced.then_some(u64::from(serial)),
        });
        Ok(())
    }

    /// After an operation in an explicit session: records which session's
    /// transaction holds the load balancer's socket, or that it let go
    /// (committed, aborted, unpinned by an error).
    pub(super) fn note_socket_transaction(&mut self, session: &mut SessionSlot<'_>) {
        let SessionSlot::Explicit(s) = session else {
            return;
        };
        let Some(lsid) = s.id().cloned() else {
            return;
        };
        let holds = match s.transaction().pinned() {
            Some(Pin {
                connection: Some(serial),
                ..
            }) if s.transaction().state().is_active() => u32::try_from(*serial).ok(),
            _ => None,
        };
        match holds {
            Some(serial) => self.socket_transaction = Some(SocketOwner { serial, lsid }),
            None if self
                .socket_transaction
                .as_ref()
                .is_some_and(|owner| owner.lsid == lsid) =>
            {
                self.socket_transaction = None;
            }
            None => {}
        }
    }
}
