//! What an operation's error on a server means (SDAM error handling, and
//! its per-service form behind a load balancer), carried out on the sockets.

use bson::oid::ObjectId;

use super::Topology;
use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::sdam::error_handling::{ApplicationError, HandshakePhase};

impl Topology {
    /// An operation failed on `address`: let SDAM decide what it means and
    /// carry that out. A network or protocol error always costs the socket,
    /// whatever SDAM decides about the server.
    pub(crate) fn handle_operation_error(
        &mut self,
        address: &ServerAddress,
        generation: u32,
        error: &Error,
    ) {
        let service_id = self.connections.get(address).and_then(|c| c.service_id());
        if error.is_network_error()
            || matches!(error.kind(), crate::ErrorKind::InvalidResponse { .. })
        {
            self.connections.remove(address);
        }
        if self.is_load_balanced() {
            self.handle_load_balanced_error(address, service_id, generation, error);
            return;
        }
        self.handle_error(
            address,
            generation,
            HandshakePhase::AfterHandshakeCompletes,
            error,
        );
    }

    fn handle_error(
        &mut self,
        address: &ServerAddress,
        generation: u32,
        phase: HandshakePhase,
        error: &Error,
    ) {
        let max_wire_version = self
            .monitor
            .description()
            .servers
            .get(address)
            .map(|s| s.max_wire_version)
            .unwrap_or(0);
        let Some(application_error) = ApplicationError::from_error(
            address.clone(),
            error,
            phase,
            generation,
            max_wire_version,
        ) else {
            return;
        };
        let (decision, update) = self
            .monitor
            .on_application_error(&application_error, self.clock.now());
        if decision.clear_socket {
            self.connections.remove(address);
        }
        self.publish(update);
    }

    /// SDAM error handling behind a load balancer: the description never
    /// changes (the load balancer is never Unknown), and an error that
    /// clears the pool clears only the erring socket's service, whose
    /// generation grows. An error from a socket older than its service's
    /// generation is stale.
    pub(super) fn handle_load_balanced_error(
        &mut self,
        address: &ServerAddress,
        service_id: Option<ObjectId>,
        generation: u32,
        error: &Error,
    ) {
        let Some(service_id) = service_id else {
            return;
        };
        let current = self
            .service_generations
            .get(&service_id)
            .copied()
            .unwrap_or(0);
        if generation < current {
            return;
        }
        let max_wire_version = self
            .load_balanced_service
            .as_ref()
            .map(|s| s.max_wire_version)
            .unwrap_or(0);
        // The per-address generation of the pure layer is the load
        // balancer's, which never changes; the per-service one was checked
        // above.
        let Some(application_error) = ApplicationError::from_error(
            address.clone(),
            error,
            HandshakePhase::AfterHandshakeCompletes,
            self.monitor
                .description()
                .pool_generation(address)
                .unwrap_or(0),
            max_wire_version,
        ) else {
            return;
        };
        let decision = crate::proto::sdam::error_handling::decide(
            self.monitor.description(),
            &application_error,
        );
        if decision.clear_socket {
            self.service_generations.insert(service_id, current + 1);
            let same_service = self
                .connections
                .get(address)
                .is_some_and(|c| c.service_id() == Some(service_id));
            if same_service {
                self.connections.remove(address);
            }
        }
    }
}
