//! The non-command events of the unified format: which ones a client entity
//! may observe, and how an SDAM event the driver published is matched
//! against an expected one (`expectEvents` of type `sdam`, `waitForEvent`,
//! `assertEventCount`).

use bson::{Bson, Document};
use mongo_inline::event::sdam::SdamEvent;

/// The SDAM events the driver publishes, by the format's names.
pub const SDAM_EVENTS: &[&str] = &[
    "topologyOpeningEvent",
    "topologyDescriptionChangedEvent",
    "topologyClosedEvent",
    "serverOpeningEvent",
    "serverDescriptionChangedEvent",
    "serverClosedEvent",
    "serverHeartbeatStartedEvent",
    "serverHeartbeatSucceededEvent",
    "serverHeartbeatFailedEvent",
];

/// The SDAM events a monitor publishes between operations in a driver
/// with background monitoring; a single-threaded driver publishes them
/// only inline with an operation.
pub const MONITOR_EVENTS: &[&str] = &[
    "topologyDescriptionChangedEvent",
    "serverDescriptionChangedEvent",
    "serverHeartbeatStartedEvent",
    "serverHeartbeatSucceededEvent",
    "serverHeartbeatFailedEvent",
];

/// Why a test that expects CMAP (connection pool) events cannot run.
pub fn cmap_reason(event: &str) -> String {
    format!(
        "single-threaded: connection-monitoring-and-pooling.md: \"This specification does not apply to drivers that do not support multitasking.\": CMAP event {event} is a connection pool's, and this single-threaded driver has one socket per server and no pool"
    )
}

/// Whether `name` is a CMAP event (`poolClearedEvent`, `connectionReadyEvent`, ...).
pub fn is_cmap_event(name: &str) -> bool {
    name.starts_with("pool") || name.starts_with("connection")
}

/// The format's name for `event`.
pub fn sdam_name(event: &SdamEvent) -> &'static str {
    match event {
        SdamEvent::TopologyOpening(_) => "topologyOpeningEvent",
        SdamEvent::TopologyDescriptionChanged(_) => "topologyDescriptionChangedEvent",
        SdamEvent::TopologyClosed(_) => "topologyClosedEvent",
        SdamEvent::ServerOpening(_) => "serverOpeningEvent",
        SdamEvent::ServerDescriptionChanged(_) => "serverDescriptionChangedEvent",
        SdamEvent::ServerClosed(_) => "serverClosedEvent",
        SdamEvent::ServerHeartbeatStarted(_) => "serverHeartbeatStartedEvent",
        SdamEvent::ServerHeartbeatSucceeded(_) => "serverHeartbeatSucceededEvent",
        SdamEvent::ServerHeartbeatFailed(_) => "serverHeartbeatFailedEvent",
        _ => "unknownSdamEvent",
    }
}

/// Whether `event` is `{name: fields}`. `Err` names an expected field the
/// runner cannot check (the test is then skipped, not passed).
pub fn sdam_matches(name: &str, fields: &Document, event: &SdamEvent) -> Result<bool, String> {
    if sdam_name(event) != name {
        return Ok(false);
    }
    for (key, want) in fields {
        let holds = match (key.as_str(), event) {
            ("previousDescription" | "newDescription", SdamEvent::ServerDescriptionChanged(e)) => {
                let description = if key == "newDescription" {
                    &e.new_description
                } else {
                    &e.previous_description
                };
                type_matches(want, description.server_type.as_str())?
            }
            (
                "previousDescription" | "newDescription",
                SdamEvent::TopologyDescriptionChanged(e),
            ) => {
                let description = if key == "newDescription" {
                    &e.new_description
                } else {
                    &e.previous_description
                };
                type_matches(want, description.topology_type.as_str())?
            }
            ("awaited", SdamEvent::ServerHeartbeatStarted(e)) => want.as_bool() == Some(e.awaited),
            ("awaited", SdamEvent::ServerHeartbeatSucceeded(e)) => {
                want.as_bool() == Some(e.awaited)
            }
            ("awaited", SdamEvent::ServerHeartbeatFailed(e)) => want.as_bool() == Some(e.awaited),
            (other, _) => return Err(format!("{name}.{other} not supported by the runner")),
        };
        if !holds {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `{type: T}` against a description's type name.
fn type_matches(want: &Bson, actual: &str) -> Result<bool, String> {
    let want = want
        .as_document()
        .ok_or_else(|| format!("expected description {want} is not a document"))?;
    for (key, value) in want {
        if key != "type" {
            return Err(format!(
                "description field {key} not supported by the runner"
            ));
        }
        if value.as_str() != Some(actual) {
            return Ok(false);
        }
    }
    Ok(true)
}
