//! What an application error means for the topology ("Error handling" in
//! the SDAM spec), as a decision the shell carries out.
//!
//! ```text
//!   error ──> server gone? / older socket generation? / older topologyVersion? ──> ignore
//!        ├──> state change ("not writable primary", "node is recovering")
//!        │       mark Unknown (not load balanced), close the socket if shutting
//!        │       down or the server is older than 4.2, mark the topology stale
//!        │       unless the node is merely recovering
//!        ├──> network error or timeout while connecting (TCP, TLS, hello),
//!        │    or any error labelled SystemOverloadedError ──> ignore (backpressure)
//!        ├──> network error, timeout or failure while authenticating, network
//!        │    error on an established socket
//!        │       mark Unknown (not load balanced), close the socket
//!        └──> anything else (a timeout on an established socket, other
//!             command errors) ──> ignore
//! ```
//!
//! The connecting/authenticating split follows the current spec text
//! (client backpressure): a server that refuses or queues new connections
//! is overloaded, not gone, so those failures do not make it Unknown.

use std::time::Instant;

use crate::error::{CommandError, Error, ErrorKind};
use crate::proto::address::ServerAddress;
use crate::proto::results::{BulkWriteFailure, WriteFailure};

use super::description::{ServerDescription, TopologyDescription, TopologyType};
use super::update::TopologyUpdate;
use super::TopologyVersion;

/// The error label of the client backpressure spec.
pub const SYSTEM_OVERLOADED_LABEL: &str = "SystemOverloadedError";

/// Codes of "node is recovering" errors.
pub const RECOVERING_CODES: [i32; 5] = [11600, 11602, 13436, 189, 91];
/// Codes of "not writable primary" errors.
pub const NOT_WRITABLE_PRIMARY_CODES: [i32; 3] = [10107, 13435, 10058];
/// Codes of "node is shutting down" errors (a subset of the recovering ones).
pub const SHUTDOWN_CODES: [i32; 2] = [11600, 91];

/// The wire version of MongoDB 4.2, from which a "not writable primary"
/// error leaves the socket usable.
const KEEPS_SOCKETS_ON_STEPDOWN_WIRE_VERSION: i32 = 8;

/// A code of 0 means the reply had none (legacy replies); the spec then
/// falls back to the message.
fn present(code: Option<i32>) -> Option<i32> {
    code.filter(|c| *c != 0)
}

/// Whether the error is a "node is recovering" error: by code when the
/// reply has one, else by the substrings "node is recovering" or "not
/// master or secondary" in the message.
pub fn is_recovering(code: Option<i32>, message: &str) -> bool {
    match present(code) {
        Some(code) => RECOVERING_CODES.contains(&code),
        None => {
            message.contains("node is recovering") || message.contains("not master or secondary")
        }
    }
}

/// Whether the error is a "not writable primary" error: by code when the
/// reply has one, else by "not master" in a message that is not a
/// recovering one.
pub fn is_not_writable_primary(code: Option<i32>, message: &str) -> bool {
    match present(code) {
        Some(code) => NOT_WRITABLE_PRIMARY_CODES.contains(&code),
        None => !is_recovering(None, message) && message.contains("not master"),
    }
}

/// Whether the code is a "node is shutting down" one.
pub fn is_shutdown(code: Option<i32>) -> bool {
    present(code).is_some_and(|c| SHUTDOWN_CODES.contains(&c))
}

/// Whether the error says the server's type is not what the driver thinks
/// (a "State Change Error").
pub fn is_state_change_error(code: Option<i32>, message: &str) -> bool {
    is_recovering(code, message) || is_not_writable_primary(code, message)
}

/// When the error happened relative to the connection handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandshakePhase {
    /// While opening the socket: TCP connect, TLS, the hello exchange.
    BeforeHandshakeCompletes,
    /// While authenticating a freshly opened socket, after its hello was
    /// answered.
    Authenticating,
    /// On an established socket, running an operation.
    AfterHandshakeCompletes,
}

/// The kinds of application error SDAM distinguishes.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ApplicationErrorKind {
    /// A network error other than a timeout.
    Network {
        /// What failed.
        message: String,
    },
    /// A network timeout.
    NetworkTimeout {
        /// What timed out.
        message: String,
    },
    /// A command error, or a write concern error (whose code and message are
    /// checked the same way).
    Command {
        /// The server's code, when the reply had one.
        code: Option<i32>,
        /// The server's message.
        message: String,
        /// The reply's `topologyVersion`.
        topology_version: Option<TopologyVersion>,
    },
    /// Authentication failed.
    Authentication {
        /// Why.
        message: String,
    },
}

/// An error an application operation met on a server.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ApplicationError {
    /// The server.
    pub address: ServerAddress,
    /// What happened.
    pub kind: ApplicationErrorKind,
    /// When it happened.
    pub phase: HandshakePhase,
    /// The generation of the socket it happened on (for an error while
    /// opening a socket: the server's generation when the attempt began).
    pub generation: u32,
    /// The `maxWireVersion` of that socket's handshake (0 if unknown).
    pub max_wire_version: i32,
    /// Whether the error carries the `SystemOverloadedError` label: the
    /// server is shedding load, which says nothing about its type.
    pub system_overloaded: bool,
    /// The driver error this was read from ([`ApplicationError::from_error`]),
    /// which an Unknown server then carries as it was raised.
    raised: Option<Error>,
}

impl ApplicationError {
    /// An application error.
    pub fn new(
        address: ServerAddress,
        kind: ApplicationErrorKind,
        phase: HandshakePhase,
        generation: u32,
        max_wire_version: i32,
    ) -> Self {
        ApplicationError {
            address,
            kind,
            phase,
            generation,
            max_wire_version,
            system_overloaded: false,
            raised: None,
        }
    }

    /// This error marked as carrying the `SystemOverloadedError` label.
    pub fn with_system_overloaded(mut self, overloaded: bool) -> Self {
        self.system_overloaded = overloaded;
        self
    }

    /// The SDAM view of a driver [`Error`], or `None` for errors SDAM does
    /// not look at (invalid arguments, selection failures, ...).
    pub fn from_error(
        address: ServerAddress,
        error: &Error,
        phase: HandshakePhase,
        generation: u32,
        max_wire_version: i32,
    ) -> Option<Self> {
        let kind = match error.kind() {
            ErrorKind::Io(_) => {
                let message = error.io_message().unwrap_or_default();
                if error.is_network_timeout() {
                    ApplicationErrorKind::NetworkTimeout { message }
                } else {
                    ApplicationErrorKind::Network { message }
                }
            }
            // An unreadable reply leaves the socket in an unknown state:
            // treated like a network error.
            ErrorKind::InvalidResponse { message } => ApplicationErrorKind::Network {
                message: message.clone(),
            },
            ErrorKind::Command(command) => ApplicationErrorKind::Command {
                code: Some(command.code),
                message: command.message.clone(),
                topology_version: command
                    .topology_version
                    .as_ref()
                    .and_then(TopologyVersion::from_document),
            },
            // SDAM "Application errors": an `ok: 1` reply's writeConcernError
            // (a step-down under `w: majority`) is handled like a command
            // error with its code.
            ErrorKind::Write(WriteFailure::WriteConcernError(wce))
            | ErrorKind::CollectionBulkWrite(BulkWriteFailure {
                write_concern_error: Some(wce),
                ..
            }) => ApplicationErrorKind::Command {
                code: Some(wce.code),
                message: wce.message.clone(),
                topology_version: None,
            },
            ErrorKind::BulkWrite(bulk) if !bulk.write_concern_errors.is_empty() => {
                let wce = &bulk.write_concern_errors[bulk.write_concern_errors.len() - 1];
                ApplicationErrorKind::Command {
                    code: Some(wce.code),
                    message: wce.message.clone(),
                    topology_version: None,
                }
            }
            ErrorKind::Authentication { message } => ApplicationErrorKind::Authentication {
                message: message.clone(),
            },
            _ => return None,
        };
        let mut handled = ApplicationError::new(address, kind, phase, generation, max_wire_version)
            .with_system_overloaded(error.contains_label(SYSTEM_OVERLOADED_LABEL));
        handled.raised = Some(error.clone());
        Some(handled)
    }

    /// The error the server's Unknown description carries: the one raised,
    /// or, for an error made from its parts ([`ApplicationError::new`]),
    /// one of the kind the shell would have raised.
    fn description_error(&self) -> Error {
        if let Some(raised) = &self.raised {
            return raised.clone();
        }
        let address = Some(self.address.clone());
        match &self.kind {
            ApplicationErrorKind::Network { message } => {
                Error::network_message(address, message.clone())
            }
            ApplicationErrorKind::NetworkTimeout { message } => {
                Error::io_failure(std::io::ErrorKind::TimedOut, address, message.clone())
            }
            ApplicationErrorKind::Command { code, message, .. } => {
                Error::new(ErrorKind::Command(CommandError {
                    code: code.unwrap_or_default(),
                    code_name: String::new(),
                    message: message.clone(),
                    topology_version: None,
                    address,
                    base_backoff: None,
                    raw_response: None,
                }))
            }
            ApplicationErrorKind::Authentication { message } => {
                Error::new(ErrorKind::Authentication {
                    message: message.clone(),
                })
            }
        }
    }
}

/// Why an error changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IgnoreReason {
    /// The server is no longer in the topology.
    UnknownServer,
    /// The error came from a socket older than the server's current one.
    StaleGeneration,
    /// The error's topologyVersion is not newer than the server's.
    StaleTopologyVersion,
    /// A timeout on an established socket may be a slow operation, not an
    /// unavailable server.
    TimeoutAfterHandshake,
    /// A command error that says nothing about the server's state.
    NotStateChange,
    /// A network error or timeout while connecting: the server may be
    /// shedding connections under load, which does not make it Unknown.
    ConnectionEstablishment,
    /// The error carries the `SystemOverloadedError` label.
    SystemOverloaded,
}

/// What to do about an application error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ErrorDecision {
    /// Set when the error changes nothing, with the reason.
    pub ignored: Option<IgnoreReason>,
    /// Replace the server's description with an Unknown one carrying the
    /// error.
    pub mark_unknown: bool,
    /// Close the server's socket (its generation grows).
    pub clear_socket: bool,
    /// Single-threaded: the next selection must scan first ("request an
    /// immediate check").
    pub mark_stale: bool,
}

impl ErrorDecision {
    fn ignore(reason: IgnoreReason) -> Self {
        ErrorDecision {
            ignored: Some(reason),
            ..Self::default()
        }
    }
}

/// The spec's `handleError`, without its effects: what `error` means for
/// `topology`.
pub fn decide(topology: &TopologyDescription, error: &ApplicationError) -> ErrorDecision {
    let (Some(server), Some(generation)) = (
        topology.servers.get(&error.address),
        topology.pool_generation(&error.address),
    ) else {
        return ErrorDecision::ignore(IgnoreReason::UnknownServer);
    };
    if error.generation < generation {
        return ErrorDecision::ignore(IgnoreReason::StaleGeneration);
    }
    let load_balanced = topology.topology_type == TopologyType::LoadBalanced;
    match &error.kind {
        ApplicationErrorKind::Command {
            code,
            message,
            topology_version,
        } => {
            if TopologyVersion::compare(server.topology_version.as_ref(), topology_version.as_ref())
                .is_ge()
            {
                return ErrorDecision::ignore(IgnoreReason::StaleTopologyVersion);
            }
            if !is_state_change_error(*code, message) {
                // Any other command error on an established socket is the
                // operation's business; during the handshake (a failed
                // authentication, a hello refused) it makes the server
                // unusable until it is checked again.
                if error.phase == HandshakePhase::AfterHandshakeCompletes {
                    return ErrorDecision::ignore(IgnoreReason::NotStateChange);
                }
                if error.system_overloaded {
                    return ErrorDecision::ignore(IgnoreReason::SystemOverloaded);
                }
                return ErrorDecision {
                    ignored: None,
                    mark_unknown: !load_balanced,
                    clear_socket: !load_balanced,
                    mark_stale: false,
                };
            }
            let shutdown = is_shutdown(*code);
            ErrorDecision {
                ignored: None,
                mark_unknown: !load_balanced,
                clear_socket: shutdown
                    || error.max_wire_version < KEEPS_SOCKETS_ON_STEPDOWN_WIRE_VERSION,
                // "Node is recovering" for a while gains nothing from an
                // immediate scan; a stepdown or shutdown does.
                mark_stale: !load_balanced && (shutdown || is_not_writable_primary(*code, message)),
            }
        }
        ApplicationErrorKind::Network { .. }
        | ApplicationErrorKind::NetworkTimeout { .. }
        | ApplicationErrorKind::Authentication { .. } => {
            decide_connection_error(error, load_balanced)
        }
    }
}

/// The spec's rules for a network error, a network timeout or a failed
/// authentication: which of them, in which handshake phase, leave the
/// server's description alone.
fn decide_connection_error(error: &ApplicationError, load_balanced: bool) -> ErrorDecision {
    let timeout = matches!(error.kind, ApplicationErrorKind::NetworkTimeout { .. });
    let network = matches!(
        error.kind,
        ApplicationErrorKind::Network { .. } | ApplicationErrorKind::NetworkTimeout { .. }
    );
    if error.phase == HandshakePhase::AfterHandshakeCompletes && timeout {
        return ErrorDecision::ignore(IgnoreReason::TimeoutAfterHandshake);
    }
    if error.system_overloaded {
        return ErrorDecision::ignore(IgnoreReason::SystemOverloaded);
    }
    if error.phase == HandshakePhase::BeforeHandshakeCompletes && network {
        return ErrorDecision::ignore(IgnoreReason::ConnectionEstablishment);
    }
    ErrorDecision {
        ignored: None,
        mark_unknown: !load_balanced,
        // Load balanced, only an established socket knows its
        // service; a failed handshake has nothing to clear.
        clear_socket: !load_balanced || error.phase == HandshakePhase::AfterHandshakeCompletes,
        mark_stale: false,
    }
}

impl TopologyDescription {
    /// Decides what `error` means ([`decide`]) and applies it: the server
    /// becomes Unknown, its socket generation grows, the topology is marked
    /// stale, as decided. The shell closes the socket when
    /// `decision.clear_socket` and publishes the update's events.
    pub(crate) fn handle_application_error(
        &mut self,
        error: &ApplicationError,
        now: Instant,
    ) -> (ErrorDecision, TopologyUpdate) {
        let decision = decide(self, error);
        if decision.ignored.is_some() {
            return (decision, TopologyUpdate::default());
        }
        if decision.clear_socket {
            if let Some(state) = self.server_states.get_mut(&error.address) {
                state.pool_generation += 1;
            }
        }
        if decision.mark_stale {
            self.stale = true;
        }
        let update = if decision.mark_unknown {
            let topology_version = match &error.kind {
                ApplicationErrorKind::Command {
                    topology_version, ..
                } => *topology_version,
                _ => None,
            };
            let mut unknown = ServerDescription::from_error(
                error.address.clone(),
                error.description_error(),
                topology_version,
            );
            unknown.last_update_time = Some(now);
            self.apply(unknown)
        } else {
            TopologyUpdate::default()
        };
        (decision, update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_uses_the_code_when_present() {
        assert!(is_recovering(Some(91), ""));
        assert!(is_shutdown(Some(91)) && is_shutdown(Some(11600)));
        assert!(!is_shutdown(Some(189)) && !is_shutdown(None));
        assert!(is_not_writable_primary(Some(10107), "node is recovering"));
        // A code that is neither wins over a message that looks like one.
        assert!(!is_state_change_error(Some(1), "not master"));
        assert!(!is_recovering(Some(10107), "node is recovering"));
    }

    #[test]
    fn classification_falls_back_to_the_message_without_a_code() {
        assert!(is_recovering(None, "the node is recovering now"));
        assert!(is_recovering(
            Some(0),
            "not master or secondary; cannot read"
        ));
        assert!(!is_not_writable_primary(None, "not master or secondary"));
        assert!(is_not_writable_primary(None, "not master"));
        assert!(is_state_change_error(None, "not master"));
        assert!(!is_state_change_error(None, "duplicate key"));
    }

    #[test]
    fn from_error_maps_driver_errors() {
        let a = ServerAddress::tcp("a", 1);
        let timeout = Error::network(
            None,
            "reading",
            std::io::Error::new(std::io::ErrorKind::TimedOut, "t"),
        );
        let e = ApplicationError::from_error(
            a.clone(),
            &timeout,
            HandshakePhase::AfterHandshakeCompletes,
            0,
            21,
        )
        .unwrap();
        assert!(matches!(
            e.kind,
            ApplicationErrorKind::NetworkTimeout { .. }
        ));
        assert!(ApplicationError::from_error(
            a,
            &Error::invalid_argument("x"),
            HandshakePhase::AfterHandshakeCompletes,
            0,
            21
        )
        .is_none());
    }
}

#[cfg(test)]
mod decision_tests {
    use super::*;
    use crate::proto::sdam::TopologySettings;
    use bson::doc;
    use bson::oid::ObjectId;
    use std::time::Duration;

    fn addr() -> ServerAddress {
        ServerAddress::tcp("a", 27017)
    }

    /// A replica set whose primary `a` reports topologyVersion (pid, 5).
    fn replica_set(load_balanced: bool) -> TopologyDescription {
        let settings = TopologySettings::new(vec![addr()]);
        let settings = if load_balanced {
            settings.with_load_balanced(true)
        } else {
            settings.with_replica_set("rs")
        };
        let mut topology = TopologyDescription::new(settings);
        let reply = doc! {"ok": 1, "isWritablePrimary": true, "setName": "rs",
        "hosts": ["a:27017"], "maxWireVersion": 21,
        "topologyVersion": {"processId": pid(), "counter": 5_i64}};
        let _ = topology.check_succeeded(&addr(), &reply, Duration::ZERO, Instant::now());
        topology.stale = false;
        topology
    }

    fn pid() -> ObjectId {
        ObjectId::from_bytes([1; 12])
    }

    fn command(code: i32, counter: Option<i64>) -> ApplicationErrorKind {
        ApplicationErrorKind::Command {
            code: Some(code),
            message: String::new(),
            topology_version: counter.map(|counter| TopologyVersion {
                process_id: pid(),
                counter,
            }),
        }
    }

    fn error(kind: ApplicationErrorKind, phase: HandshakePhase) -> ApplicationError {
        ApplicationError::new(addr(), kind, phase, 0, 21)
    }

    const AFTER: HandshakePhase = HandshakePhase::AfterHandshakeCompletes;
    const BEFORE: HandshakePhase = HandshakePhase::BeforeHandshakeCompletes;

    fn handled(mark_unknown: bool, clear_socket: bool, mark_stale: bool) -> ErrorDecision {
        ErrorDecision {
            ignored: None,
            mark_unknown,
            clear_socket,
            mark_stale,
        }
    }

    #[test]
    fn state_change_errors() {
        let topology = replica_set(false);
        // Not writable primary on 4.2+: Unknown and rescan, socket kept.
        assert_eq!(
            decide(&topology, &error(command(10107, Some(6)), AFTER)),
            handled(true, false, true)
        );
        // Recovering: Unknown, no rescan.
        assert_eq!(
            decide(&topology, &error(command(189, Some(6)), AFTER)),
            handled(true, false, false)
        );
        // Shutting down: the socket goes too.
        assert_eq!(
            decide(&topology, &error(command(91, Some(6)), AFTER)),
            handled(true, true, true)
        );
        // From a server older than 4.2 the socket goes as well.
        let mut old = error(command(10107, None), AFTER);
        old.max_wire_version = 7;
        assert_eq!(decide(&topology, &old), handled(true, true, true));
        // Same topologyVersion: stale.
        assert_eq!(
            decide(&topology, &error(command(10107, Some(5)), AFTER)).ignored,
            Some(IgnoreReason::StaleTopologyVersion)
        );
        assert_eq!(
            decide(&topology, &error(command(11000, None), AFTER)).ignored,
            Some(IgnoreReason::NotStateChange)
        );
    }

    #[test]
    fn network_errors() {
        let topology = replica_set(false);
        let network = || ApplicationErrorKind::Network {
            message: "reset".into(),
        };
        let timeout = || ApplicationErrorKind::NetworkTimeout {
            message: "slow".into(),
        };
        assert_eq!(
            decide(&topology, &error(network(), AFTER)),
            handled(true, true, false)
        );
        assert_eq!(
            decide(&topology, &error(timeout(), AFTER)).ignored,
            Some(IgnoreReason::TimeoutAfterHandshake)
        );
        assert_eq!(
            decide(&topology, &error(timeout(), BEFORE)).ignored,
            Some(IgnoreReason::ConnectionEstablishment)
        );
        assert_eq!(
            decide(&topology, &error(timeout(), HandshakePhase::Authenticating)),
            handled(true, true, false)
        );
        assert_eq!(
            decide(
                &topology,
                &error(network(), AFTER).with_system_overloaded(true)
            )
            .ignored,
            Some(IgnoreReason::SystemOverloaded)
        );
        let auth = ApplicationErrorKind::Authentication {
            message: "bad password".into(),
        };
        assert_eq!(
            decide(&topology, &error(auth, HandshakePhase::Authenticating)),
            handled(true, true, false)
        );
        let mut stale = error(network(), AFTER);
        stale.address = ServerAddress::tcp("gone", 1);
        assert_eq!(
            decide(&topology, &stale).ignored,
            Some(IgnoreReason::UnknownServer)
        );
    }

    #[test]
    fn load_balanced_mode_never_marks_unknown() {
        let topology = replica_set(true);
        assert_eq!(
            decide(&topology, &error(command(91, None), AFTER)),
            handled(false, true, false)
        );
        assert_eq!(
            decide(&topology, &error(command(10107, None), AFTER)),
            handled(false, false, false)
        );
        let network = ApplicationErrorKind::Network {
            message: "reset".into(),
        };
        assert_eq!(
            decide(&topology, &error(network, AFTER)),
            handled(false, true, false)
        );
    }

    #[test]
    fn handling_applies_the_decision() {
        let mut topology = replica_set(false);
        let (decision, update) =
            topology.handle_application_error(&error(command(91, Some(6)), AFTER), Instant::now());
        assert_eq!(decision, handled(true, true, true));
        assert!(topology.stale);
        assert_eq!(topology.pool_generation(&addr()), Some(1));
        let server = &topology.servers[&addr()];
        assert_eq!(server.server_type, crate::proto::sdam::ServerType::Unknown);
        assert_eq!(server.topology_version.map(|tv| tv.counter), Some(6));
        assert_eq!(topology.topology_type, TopologyType::ReplicaSetNoPrimary);
        assert!(!update.events.is_empty());
        // The error from the socket before the clear is now stale.
        let (decision, _) =
            topology.handle_application_error(&error(command(91, Some(7)), AFTER), Instant::now());
        assert_eq!(decision.ignored, Some(IgnoreReason::StaleGeneration));
    }

    #[test]
    fn the_unknown_server_carries_the_error_as_raised() {
        let mut topology = replica_set(false);
        let raised = Error::network_message(Some(addr()), "connection reset")
            .with_labels(["RetryableWriteError"]);
        let handled = ApplicationError::from_error(addr(), &raised, AFTER, 0, 21).unwrap();
        let _ = topology.handle_application_error(&handled, Instant::now());
        let error = topology.servers[&addr()].error.clone().unwrap();
        assert!(matches!(*error.kind, ErrorKind::Io(_)));
        assert!(error.contains_label("RetryableWriteError"));
        assert_eq!(error.to_string(), raised.to_string());
    }
}
