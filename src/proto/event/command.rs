//! Command monitoring events, their redaction and their log messages
//! (command logging and monitoring spec).
//!
//! The executor publishes a [`CommandEvent::Started`] before each attempt
//! and a [`CommandEvent::Succeeded`] or [`CommandEvent::Failed`] after it, so
//! a retried operation shows every attempt. Sensitive commands (and hellos
//! that carry speculative authentication) are published with empty command
//! and reply documents, as the spec requires.

use std::time::Duration;

use bson::oid::ObjectId;
use bson::Document;

use crate::error::Error;
use crate::proto::address::ServerAddress;

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

/// Log documents are cut to this many characters (the spec's default
/// `maxDocumentLength`), ending in "...".
const MAX_DOCUMENT_LENGTH: usize = 1000;

fn truncated_json(document: &Document) -> String {
    let text = crate::proto::log_json::relaxed(document);
    if text.chars().count() <= MAX_DOCUMENT_LENGTH {
        return text;
    }
    let cut: String = text.chars().take(MAX_DOCUMENT_LENGTH).collect();
    format!("{cut}...")
}

fn where_sent(connection: &ConnectionInfo) -> String {
    let mut text = format!(
        "to {} with driver-generated connection ID {}",
        connection.address, connection.driver_connection_id
    );
    if let Some(id) = connection.server_connection_id {
        text.push_str(&format!(" and server-generated connection ID {id}"));
    }
    if let Some(service) = connection.service_id {
        text.push_str(&format!(" and service ID {service}"));
    }
    text
}

/// The unstructured form of the command logging spec's message for `event`.
pub fn command_log_message(event: &CommandEvent) -> String {
    match event {
        CommandEvent::Started {
            command,
            database_name,
            command_name,
            request_id,
            connection,
        } => format!(
            "Command \"{command_name}\" started on database \"{database_name}\" using a \
             connection {}. The requestID is {request_id}. Command: {}",
            where_sent(connection),
            truncated_json(command)
        ),
        CommandEvent::Succeeded {
            reply,
            command_name,
            request_id,
            duration,
            connection,
        } => format!(
            "Command \"{command_name}\" succeeded in {} ms using a connection {}. The requestID \
             is {request_id}. Command reply: {}",
            duration.as_millis(),
            where_sent(connection),
            truncated_json(reply)
        ),
        CommandEvent::Failed {
            failure,
            command_name,
            request_id,
            duration,
            connection,
        } => format!(
            "Command \"{command_name}\" failed in {} ms using a connection {}. The requestID is \
             {request_id}. Error: {failure}",
            duration.as_millis(),
            where_sent(connection)
        ),
    }
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

    #[test]
    fn log_messages_name_the_command_and_cut_long_documents() {
        let connection = ConnectionInfo {
            address: ServerAddress::tcp("h", 1),
            driver_connection_id: 3,
            server_connection_id: Some(9),
            service_id: None,
        };
        let long = "x".repeat(5000);
        let message = command_log_message(&CommandEvent::Started {
            command: doc! { "insert": "c", "documents": [{ "s": long }] },
            database_name: "db".into(),
            command_name: "insert".into(),
            request_id: 7,
            connection,
        });
        assert!(message.starts_with("Command \"insert\" started on database \"db\""));
        assert!(message.contains("server-generated connection ID 9"));
        assert!(message.ends_with("..."));
        assert!(message.len() < 1400);
    }
}
