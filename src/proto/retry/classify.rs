//! Which retry rules an operation runs under ([`OperationKind`], from the
//! operation's [`RetryRules`] and the server's support), and what an error
//! means before the retry policy sees it: CSOT's mapping to a timeout, and
//! whether a reply's write concern error makes a batch's result final.
//! Pure: the executor asks, then acts.

use crate::error::{Error, ErrorKind};
use crate::proto::deadline::Deadline;
use crate::proto::operation::{Operation, RetryRules, Retryability};
use crate::proto::retry::OperationKind;
use crate::proto::sdam::{ServerDescription, ServerType, TopologyType};

/// What an operation is, for the retry rules, before a server is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OperationShape {
    pub(crate) name: &'static str,
    pub(crate) rules: RetryRules,
    pub(crate) retryability: Retryability,
    pub(crate) writes: bool,
    pub(crate) acknowledged: bool,
    pub(crate) in_transaction: bool,
}

impl OperationShape {
    pub(crate) fn of<Op: Operation>(op: &Op, in_transaction: bool) -> Self {
        let retryability = op.retryability();
        OperationShape {
            name: Op::NAME,
            rules: Op::RETRY_RULES,
            retryability,
            writes: matches!(retryability, Retryability::Write)
                || (!matches!(retryability, Retryability::Read)
                    && Op::RETRY_RULES != RetryRules::ReadOnly),
            acknowledged: op.is_acknowledged(),
            in_transaction,
        }
    }

    /// commitTransaction/abortTransaction: retried once as a retryable
    /// write, whatever `retryWrites` and the server say.
    pub(crate) fn ends_transaction(&self) -> bool {
        self.rules == RetryRules::EndTransaction
    }

    /// The retry rules for a failure to connect before any server was
    /// reached: as [`classify`](Self::classify) would say for a server that
    /// supports retryable writes. Retrying a command that was never sent
    /// cannot repeat a write; the kind is confirmed once a server answers.
    pub(crate) fn classify_unreached(&self) -> OperationKind {
        self.kind(true)
    }

    /// The retry rules that apply on `server`.
    #[cfg(test)]
    pub(crate) fn classify(
        &self,
        server: &ServerDescription,
        topology_type: TopologyType,
        has_session: bool,
    ) -> OperationKind {
        self.classify_facts(&ServerFacts::of(server), topology_type, has_session)
    }

    /// [`Self::classify`] from the facts the rules read.
    pub(crate) fn classify_facts(
        &self,
        server: &ServerFacts,
        topology_type: TopologyType,
        has_session: bool,
    ) -> OperationKind {
        let supports = server.server_type != ServerType::Standalone
            && (server.session_timeout_known || topology_type == TopologyType::LoadBalanced);
        self.kind(has_session && supports)
    }

    fn kind(&self, retryable_writes: bool) -> OperationKind {
        match self.rules {
            RetryRules::EndTransaction => OperationKind::RetryableWrite,
            RetryRules::RunCommand => OperationKind::RunCommand,
            RetryRules::ByRetryability | RetryRules::ReadOnly if self.in_transaction => {
                if self.writes {
                    OperationKind::OtherWrite
                } else {
                    OperationKind::OtherRead
                }
            }
            RetryRules::ByRetryability | RetryRules::ReadOnly => match self.retryability {
                Retryability::Read => OperationKind::RetryableRead,
                Retryability::Write if retryable_writes && self.acknowledged => {
                    OperationKind::RetryableWrite
                }
                _ if self.writes => OperationKind::OtherWrite,
                _ => OperationKind::OtherRead,
            },
        }
    }
}

/// CSOT's error transformations, for an operation with a deadline: a socket
/// timeout (the read was bounded by the time left) and the server's
/// `MaxTimeMSExpired` (code 50, the `maxTimeMS` derived from the time left)
/// both mean the operation ran out of time. The timeout error keeps the
/// cause in its text and the labels.
#[cold]
pub(crate) fn as_timeout(error: Error, command_name: &str) -> Error {
    const MAX_TIME_MS_EXPIRED: i32 = 50;
    let socket_timeout = error.is_network_timeout();
    let server_timeout = reports_code(&error, MAX_TIME_MS_EXPIRED);
    if !(socket_timeout || server_timeout) {
        return error;
    }
    Deadline::timeout_error(&format!("waiting for {command_name}: {error}"))
        .with_labels(error.labels())
}

/// Whether the server reported `code` for the command (`ok: 0`), in its
/// writeConcernError, or in one of its write errors: CSOT transforms all
/// three when the code is `MaxTimeMSExpired`.
fn reports_code(error: &Error, code: i32) -> bool {
    use crate::proto::results::WriteFailure;
    match error.kind() {
        ErrorKind::Command(c) => c.code == code,
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => w.code == code,
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code == code,
        ErrorKind::CollectionBulkWrite(b) => {
            b.write_errors.iter().any(|w| w.code == code)
                || b.write_concern_error
                    .as_ref()
                    .is_some_and(|w| w.code == code)
        }
        ErrorKind::BulkWrite(b) => b.write_concern_errors.iter().any(|w| w.code == code),
        _ => false,
    }
}

/// Whether `error` comes from an `ok: 1` reply with a writeConcernError.
pub(crate) fn carries_write_concern_error(error: &Error) -> bool {
    use crate::proto::results::{BulkWriteFailure, WriteFailure};
    matches!(
        error.kind(),
        ErrorKind::Write(WriteFailure::WriteConcernError(_))
            | ErrorKind::CollectionBulkWrite(BulkWriteFailure {
                write_concern_error: Some(_),
                ..
            })
    ) || matches!(error.kind(), ErrorKind::BulkWrite(b) if !b.write_concern_errors.is_empty())
}

/// Whether a batch failed with write errors: those are final, so the batch
/// is not retried even when its write concern error is retryable.
pub(crate) fn has_write_errors(error: &Error) -> bool {
    match error.kind() {
        ErrorKind::CollectionBulkWrite(f) => !f.write_errors.is_empty(),
        ErrorKind::BulkWrite(f) => !f.write_errors.is_empty(),
        _ => false,
    }
}

/// What an attempt reads of its server's description, copied out so that
/// the description itself is not cloned per operation.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServerFacts {
    pub(crate) server_type: ServerType,
    pub(crate) max_wire_version: i32,
    pub(crate) min_round_trip_time: Option<std::time::Duration>,
    /// Whether the server reported logicalSessionTimeoutMinutes.
    pub(crate) session_timeout_known: bool,
}

impl ServerFacts {
    pub(crate) fn of(server: &ServerDescription) -> Self {
        ServerFacts {
            server_type: server.server_type,
            max_wire_version: server.max_wire_version,
            min_round_trip_time: server.min_round_trip_time,
            session_timeout_known: server.logical_session_timeout_minutes.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::address::ServerAddress;

    fn shape(retryability: Retryability, writes: bool) -> OperationShape {
        OperationShape {
            name: "test",
            rules: RetryRules::ByRetryability,
            retryability,
            writes,
            acknowledged: true,
            in_transaction: false,
        }
    }

    fn server(server_type: ServerType, sessions: bool) -> ServerDescription {
        let mut server = ServerDescription::unknown(ServerAddress::tcp("a", 1));
        server.server_type = server_type;
        server.logical_session_timeout_minutes = sessions.then_some(30);
        server
    }

    #[test]
    fn a_write_is_retryable_only_with_a_session_on_a_server_that_supports_them() {
        let write = shape(Retryability::Write, true);
        let primary = server(ServerType::RsPrimary, true);
        let rs = TopologyType::ReplicaSetWithPrimary;
        assert_eq!(
            write.classify(&primary, rs, true),
            OperationKind::RetryableWrite
        );
        assert_eq!(
            write.classify(&primary, rs, false),
            OperationKind::OtherWrite
        );
        let standalone = server(ServerType::Standalone, true);
        let single = TopologyType::Single;
        assert_eq!(
            write.classify(&standalone, single, true),
            OperationKind::OtherWrite
        );
        let unacknowledged = OperationShape {
            acknowledged: false,
            ..write
        };
        assert_eq!(
            unacknowledged.classify(&primary, rs, true),
            OperationKind::OtherWrite
        );
        // Unreached: assumed to support them, confirmed later.
        assert_eq!(write.classify_unreached(), OperationKind::RetryableWrite);
    }

    #[test]
    fn in_a_transaction_nothing_is_retryable_on_its_own() {
        let primary = server(ServerType::RsPrimary, true);
        let rs = TopologyType::ReplicaSetWithPrimary;
        let in_transaction = |s: OperationShape| OperationShape {
            in_transaction: true,
            ..s
        };
        let write = in_transaction(shape(Retryability::Write, true));
        assert_eq!(
            write.classify(&primary, rs, true),
            OperationKind::OtherWrite
        );
        let read = in_transaction(shape(Retryability::Read, false));
        assert_eq!(read.classify(&primary, rs, true), OperationKind::OtherRead);
    }

    #[test]
    fn run_command_has_its_own_rules_and_reads_are_retryable_reads() {
        let run = OperationShape {
            rules: RetryRules::RunCommand,
            ..shape(Retryability::None, true)
        };
        assert_eq!(run.classify_unreached(), OperationKind::RunCommand);
        let read = shape(Retryability::Read, false);
        assert_eq!(read.classify_unreached(), OperationKind::RetryableRead);
        let list = shape(Retryability::None, false);
        assert_eq!(list.classify_unreached(), OperationKind::OtherRead);
    }

    #[test]
    fn socket_timeouts_and_max_time_expired_become_timeouts_with_their_labels() {
        let address = ServerAddress::tcp("a", 1);
        let io = std::io::Error::from(std::io::ErrorKind::TimedOut);
        let network = Error::network(Some(address), "reading the reply", io)
            .with_labels(vec!["SystemOverloadedError".to_string()]);
        let mapped = as_timeout(network, "find");
        assert!(
            matches!(mapped.kind(), ErrorKind::Timeout { .. }),
            "{mapped}"
        );
        assert!(mapped.contains_label("SystemOverloadedError"));
        let other = Error::client("something else");
        assert!(!matches!(
            as_timeout(other, "find").kind(),
            ErrorKind::Timeout { .. }
        ));
    }
}
