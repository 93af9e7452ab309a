//! Command monitoring events, their redaction and their log messages
//! (command logging and monitoring spec).
//!
//! The executor publishes a [`CommandEvent::Started`] before each attempt
//! and a [`CommandEvent::Succeeded`] or [`CommandEvent::Failed`] after it, so
//! a retried operation shows every attempt. Sensitive commands (and hellos
//! that carry speculative authentication) are published with empty command
//! and reply documents, as the spec requires.

use std::fmt::Write as _;
use std::time::Duration;

use bson::oid::ObjectId;
use bson::{doc, Document};

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::logging::{document_text, insert_server, truncate, Component, LogMessage};
use crate::proto::sdam::TopologyId;

/// The `log` target of command messages (the logging spec's `command`
/// component).
pub const COMMAND_LOG_TARGET: &str = "mongo_inline::command";

/// Commands whose documents never appear in events or logs.
const SENSITIVE_COMMANDS: &[&str] = &[
    "authenticate",
    "saslstart",
    "saslcontinue",
    "getnonce",
    "createuser",
    "updateuser",
    "copydbgetnonce",
    "copydbsaslstart",
    "copydb",
];

/// Which socket a command went over.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionInfo {
    /// The server.
    pub address: ServerAddress,
    /// The driver's id of the socket, unique within the process.
    pub driver_connection_id: u64,
    /// The server's `connectionId` from the handshake, when it sent one.
    pub server_connection_id: Option<i64>,
    /// The service behind a load balancer, in load-balanced mode.
    pub service_id: Option<ObjectId>,
}

/// A command monitoring event.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CommandEvent {
    /// A command is about to be sent.
    Started {
        /// The command as sent (empty when redacted).
        command: Document,
        /// The database it runs on.
        database_name: String,
        /// The command name.
        command_name: String,
        /// The wire request id.
        request_id: i32,
        /// The socket.
        connection: ConnectionInfo,
    },
    /// A command succeeded.
    Succeeded {
        /// The reply (empty when redacted).
        reply: Document,
        /// The command name.
        command_name: String,
        /// The wire request id.
        request_id: i32,
        /// From sending to the end of reading the reply.
        duration: Duration,
        /// The socket.
        connection: ConnectionInfo,
    },
    /// A command failed: a network error, or a reply with `ok: 0`.
    Failed {
        /// What went wrong.
        failure: Error,
        /// The command name.
        command_name: String,
        /// The wire request id.
        request_id: i32,
        /// From sending to the failure.
        duration: Duration,
        /// The socket.
        connection: ConnectionInfo,
    },
}

/// Whether the documents of `command_name` (with this body) must be
/// redacted: the spec's sensitive commands, and hellos that carry
/// `speculativeAuthenticate`.
#[cfg(test)]
pub fn is_sensitive(command_name: &str, command: &Document) -> bool {
    sensitive(command_name, || {
        command.contains_key("speculativeAuthenticate")
    })
}

/// [`is_sensitive`] of a command body as an operation built it.
pub(crate) fn is_sensitive_body(
    command_name: &str,
    body: &crate::proto::operation::CommandBody,
) -> bool {
    sensitive(command_name, || {
        body.contains_key("speculativeAuthenticate")
    })
}

fn sensitive(command_name: &str, speculative: impl FnOnce() -> bool) -> bool {
    // Compared in place: this runs for every command, and a lowercased copy
    // was an allocation each time.
    let named = |name: &str| command_name.eq_ignore_ascii_case(name);
    if SENSITIVE_COMMANDS.iter().any(|name| named(name)) {
        return true;
    }
    (named("hello") || named("ismaster")) && speculative()
}

/// `document`, or an empty document when the command is sensitive.
#[cfg(test)]
pub fn redact(sensitive: bool, document: &Document) -> Document {
    if sensitive {
        Document::new()
    } else {
        document.clone()
    }
}

/// What a command log message tells beyond its kind, taken from the
/// executor's own state (not from the published [`CommandEvent`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CommandLogFacts<'a> {
    pub(crate) command_name: &'a str,
    pub(crate) database_name: &'a str,
    pub(crate) request_id: i32,
    pub(crate) operation_id: Option<i64>,
    pub(crate) connection: &'a ConnectionInfo,
    /// The client's topology: a field beyond the spec's, so that messages of
    /// several clients in one process can be told apart.
    pub(crate) topology_id: TopologyId,
    /// Whether the command is sensitive: its documents are already empty,
    /// and a server error's details are redacted here.
    pub(crate) sensitive: bool,
}

/// What happened to the command.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CommandLogKind<'a> {
    Started {
        command: &'a Document,
    },
    Succeeded {
        reply: &'a Document,
        duration: Duration,
    },
    Failed {
        failure: &'a Error,
        duration: Duration,
    },
}

/// The command logging spec's message (debug, component `command`);
/// documents are cut to `max_document_length` characters.
pub(crate) fn command_log(
    facts: &CommandLogFacts<'_>,
    kind: CommandLogKind<'_>,
    max_document_length: usize,
) -> LogMessage {
    let (message, verb) = match kind {
        CommandLogKind::Started { .. } => ("Command started", "started"),
        CommandLogKind::Succeeded { .. } => ("Command succeeded", "succeeded"),
        CommandLogKind::Failed { .. } => ("Command failed", "failed"),
    };
    let mut fields = common_fields(facts, message);
    let connection = facts.connection;
    let mut text = format!(
        "Command \"{}\" {verb} on database \"{}\"",
        facts.command_name, facts.database_name
    );
    let tail = match kind {
        CommandLogKind::Started { command } => {
            let command = document_text(command, max_document_length);
            fields.insert("command", command.as_str());
            format!("Command: {command}")
        }
        CommandLogKind::Succeeded { reply, duration } => {
            let ms = duration.as_secs_f64() * 1000.0;
            fields.insert("durationMS", ms);
            let _ = write!(text, " in {ms:.3} ms");
            let reply = document_text(reply, max_document_length);
            fields.insert("reply", reply.as_str());
            format!("Command reply: {reply}")
        }
        CommandLogKind::Failed { failure, duration } => {
            let ms = duration.as_secs_f64() * 1000.0;
            fields.insert("durationMS", ms);
            let _ = write!(text, " in {ms:.3} ms");
            let failure = failure_text(failure, facts.sensitive, max_document_length);
            fields.insert("failure", failure.as_str());
            format!("Error: {failure}")
        }
    };
    let _ = write!(
        text,
        " using a connection {}. The requestID is {}",
        where_sent(connection),
        facts.request_id
    );
    if let Some(id) = facts.operation_id {
        let _ = write!(text, " and the operation ID is {id}");
    }
    let _ = write!(text, ". {tail}");
    LogMessage {
        component: Component::Command,
        level: log::Level::Debug,
        fields,
        text,
    }
}

/// The fields every command message has (absent values left out).
fn common_fields(facts: &CommandLogFacts<'_>, message: &str) -> Document {
    let mut fields = doc! {
        "message": message,
        "commandName": facts.command_name,
        "databaseName": facts.database_name,
        "requestId": facts.request_id,
    };
    if let Some(id) = facts.operation_id {
        fields.insert("operationId", id);
    }
    let connection = facts.connection;
    fields.insert(
        "driverConnectionId",
        i64::try_from(connection.driver_connection_id).unwrap_or(i64::MAX),
    );
    insert_server(&mut fields, &connection.address);
    if let Some(id) = connection.server_connection_id {
        fields.insert("serverConnectionId", id);
    }
    if let Some(service) = connection.service_id {
        fields.insert("serviceId", service.to_hex());
    }
    fields.insert("topologyId", facts.topology_id.to_string());
    fields
}

/// The failure as a log shows it. A sensitive command's server error keeps
/// only its code, code name and labels (the spec's redaction); network and
/// client errors are the driver's own and are not redacted.
fn failure_text(failure: &Error, sensitive: bool, max_document_length: usize) -> String {
    if sensitive && !failure.is_network_error() {
        let mut text = String::from("server error");
        if let Some(code) = failure.code() {
            let _ = write!(text, " {code}");
        }
        if let crate::error::ErrorKind::Command(command) = failure.kind() {
            if !command.code_name.is_empty() {
                let _ = write!(text, " ({})", command.code_name);
            }
        }
        let mut labels: Vec<&String> = failure.labels().iter().collect();
        labels.sort_unstable();
        if !labels.is_empty() {
            let _ = write!(text, ", labels {labels:?}");
        }
        text.push_str(", details REDACTED for a sensitive command");
        return text;
    }
    truncate(failure.to_string(), max_document_length)
}

fn where_sent(connection: &ConnectionInfo) -> String {
    let mut text = format!(
        "with driver-generated ID {}",
        connection.driver_connection_id
    );
    if let Some(id) = connection.server_connection_id {
        let _ = write!(text, " and server-generated ID {id}");
    }
    let _ = write!(text, " to {}", connection.address);
    if let Some(service) = connection.service_id {
        let _ = write!(text, " with service ID {service}");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn sensitive_commands_and_speculative_hellos_are_redacted() {
        assert!(is_sensitive("saslStart", &doc! { "saslStart": 1 }));
        assert!(is_sensitive("createUser", &doc! {}));
        assert!(is_sensitive(
            "hello",
            &doc! { "hello": 1, "speculativeAuthenticate": {} }
        ));
        assert!(!is_sensitive("hello", &doc! { "hello": 1 }));
        assert!(!is_sensitive("find", &doc! { "find": "c" }));
        assert_eq!(redact(true, &doc! { "a": 1 }), Document::new());
        assert_eq!(redact(false, &doc! { "a": 1 }), doc! { "a": 1 });
    }

    fn facts<'a>(connection: &'a ConnectionInfo, sensitive: bool) -> CommandLogFacts<'a> {
        CommandLogFacts {
            command_name: "insert",
            database_name: "db",
            request_id: 7,
            operation_id: Some(4),
            connection,
            topology_id: TopologyId(2),
            sensitive,
        }
    }

    fn connection() -> ConnectionInfo {
        ConnectionInfo {
            address: ServerAddress::tcp("h", 1),
            driver_connection_id: 3,
            server_connection_id: Some(9),
            service_id: None,
        }
    }

    #[test]
    fn log_messages_carry_the_specs_fields_and_cut_long_documents() {
        let connection = connection();
        let long = "x".repeat(5000);
        let command = doc! { "insert": "c", "documents": [{ "s": long }] };
        let message = command_log(
            &facts(&connection, false),
            CommandLogKind::Started { command: &command },
            1000,
        );
        assert_eq!(message.level, log::Level::Debug);
        assert_eq!(message.component, Component::Command);
        let fields = &message.fields;
        assert_eq!(fields.get_str("message"), Ok("Command started"));
        assert_eq!(fields.get_str("commandName"), Ok("insert"));
        assert_eq!(fields.get_str("databaseName"), Ok("db"));
        assert_eq!(fields.get_i32("requestId"), Ok(7));
        assert_eq!(fields.get_i64("operationId"), Ok(4));
        assert_eq!(fields.get_i64("driverConnectionId"), Ok(3));
        assert_eq!(fields.get_i64("serverConnectionId"), Ok(9));
        assert_eq!(fields.get_str("serverHost"), Ok("h"));
        assert_eq!(fields.get_i32("serverPort"), Ok(1));
        assert!(!fields.contains_key("serviceId"), "absent, not null");
        let logged = fields.get_str("command").unwrap();
        assert_eq!(logged.chars().count(), 1003);
        assert!(logged.starts_with("{\"insert\":\"c\""), "{logged}");
        assert!(logged.ends_with("..."));
        assert!(
            message.text.starts_with(
                "Command \"insert\" started on database \"db\" using a connection with \
             driver-generated ID 3 and server-generated ID 9 to h:1. The requestID is 7 and the \
             operation ID is 4. Command: {"
            ),
            "{}",
            message.text
        );
    }

    #[test]
    fn a_sensitive_commands_server_error_keeps_only_code_name_and_labels() {
        let connection = connection();
        let server_error = crate::error::Error::from(crate::error::CommandError {
            base_backoff: None,
            raw_response: None,
            code: 18,
            code_name: "AuthenticationFailed".into(),
            message: "secret-bearing message".into(),
            topology_version: None,
            address: None,
        })
        .with_labels(["L"]);
        let failed = |sensitive| {
            command_log(
                &facts(&connection, sensitive),
                CommandLogKind::Failed {
                    failure: &server_error,
                    duration: Duration::from_millis(2),
                },
                1000,
            )
        };
        let redacted = failed(true);
        let failure = redacted.fields.get_str("failure").unwrap();
        assert!(!failure.contains("secret-bearing"), "{failure}");
        assert!(
            !redacted.text.contains("secret-bearing"),
            "{}",
            redacted.text
        );
        assert!(
            failure.contains("18") && failure.contains("AuthenticationFailed"),
            "{failure}"
        );
        assert!(failure.contains("\"L\""), "{failure}");
        assert_eq!(redacted.fields.get_f64("durationMS"), Ok(2.0));
        let plain = failed(false);
        assert!(plain
            .fields
            .get_str("failure")
            .unwrap()
            .contains("secret-bearing"));
        // A network error is the driver's own: never redacted.
        let network =
            crate::error::Error::network_message(Some(ServerAddress::tcp("h", 1)), "closed");
        let message = command_log(
            &facts(&connection, true),
            CommandLogKind::Failed {
                failure: &network,
                duration: Duration::ZERO,
            },
            1000,
        );
        assert!(message
            .fields
            .get_str("failure")
            .unwrap()
            .contains("closed"));
    }
}
