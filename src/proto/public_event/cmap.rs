//! The official driver's connection-pool (CMAP) event types, so that a
//! program naming them compiles; this driver never publishes them.
//!
//! The CMAP spec "does not apply to drivers that do not support
//! multitasking": this driver is single-threaded and keeps one socket per
//! server, which scans and operations share, with no pool to create, check
//! out of, clear or close. A handler for these events could never be
//! called, so [`Client::with_options`](crate::Client::with_options) refuses
//! a set `cmap_event_handler` with an error that says so, rather than
//! accept it and stay silent. The socket a command used is in its
//! [`command`](super::command) events' `connection`.

use std::time::Duration;

use bson::oid::ObjectId;
use serde::{Deserialize, Serialize};

use crate::proto::address::ServerAddress;

/// A pool was created (never published here; see the module's doc).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PoolCreatedEvent {
    /// The pool's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// The pool's options.
    pub options: Option<ConnectionPoolOptions>,
}

/// A pool's options, as [`PoolCreatedEvent`] carries them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionPoolOptions {
    /// How long a connection may stay idle.
    #[serde(
        rename = "maxIdleTimeMS",
        default,
        with = "crate::proto::serde_util::millis"
    )]
    pub max_idle_time: Option<Duration>,
    /// The most connections the pool holds.
    pub max_pool_size: Option<u32>,
    /// The fewest connections the pool keeps.
    pub min_pool_size: Option<u32>,
}

/// A pool became ready (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PoolReadyEvent {
    /// The pool's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
}

/// A pool was cleared (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PoolClearedEvent {
    /// The pool's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// The service cleared, in load-balanced mode.
    pub service_id: Option<ObjectId>,
    /// Whether connections in use were interrupted.
    #[serde(default)]
    pub interrupt_in_use_connections: bool,
}

/// A pool was closed (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PoolClosedEvent {
    /// The pool's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
}

/// A connection was created (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionCreatedEvent {
    /// The connection's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// The driver's id of the connection.
    #[serde(default = "default_connection_id")]
    pub connection_id: u32,
}

/// A connection finished its handshake (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionReadyEvent {
    /// The connection's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// The driver's id of the connection.
    #[serde(default = "default_connection_id")]
    pub connection_id: u32,
    /// How long establishing it took.
    #[serde(skip_deserializing)]
    pub duration: Duration,
}

/// A connection was closed (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionClosedEvent {
    /// The connection's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// The driver's id of the connection.
    #[serde(default)]
    pub connection_id: u32,
    /// Why it was closed.
    pub reason: ConnectionClosedReason,
}

/// Why a connection was closed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ConnectionClosedReason {
    /// The pool was cleared since the connection was created.
    Stale,
    /// It was idle too long.
    Idle,
    /// An error occurred on it.
    Error,
    /// It was dropped during an operation.
    Dropped,
    /// Its pool was closed.
    PoolClosed,
}

/// A check-out began (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConnectionCheckoutStartedEvent {
    /// The pool's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
}

/// A check-out failed (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConnectionCheckoutFailedEvent {
    /// The pool's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// Why it failed.
    pub reason: ConnectionCheckoutFailedReason,
    /// How long the attempt took.
    #[serde(skip_deserializing)]
    pub duration: Duration,
}

/// Why a check-out failed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum ConnectionCheckoutFailedReason {
    /// No connection became free in time.
    Timeout,
    /// Establishing a connection failed.
    ConnectionError,
}

/// A connection was checked out (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionCheckedOutEvent {
    /// The connection's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// The driver's id of the connection.
    #[serde(default = "default_connection_id")]
    pub connection_id: u32,
    /// How long the check-out took.
    #[serde(skip_deserializing)]
    pub duration: Duration,
}

/// A connection was checked back in (never published here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConnectionCheckedInEvent {
    /// The connection's server.
    #[serde(default = "empty_address", skip_deserializing)]
    pub address: ServerAddress,
    /// The driver's id of the connection.
    #[serde(default = "default_connection_id")]
    pub connection_id: u32,
}

/// The `CmapEvent` enum, one variant per event, and the `From<XEvent> for
/// CmapEvent` the official driver has for each: written from one list so
/// that a new event cannot be missing from either.
/// What an event read back without its address says (the official
/// driver's: an address is never read, only written).
fn empty_address() -> ServerAddress {
    ServerAddress::Tcp {
        host: String::new(),
        port: Default::default(),
    }
}

/// The official driver's stand-in for a connection id an event read back
/// lacks.
fn default_connection_id() -> u32 {
    42
}

macro_rules! cmap_events {
    ($($variant:ident($event:ident)),* $(,)?) => {
        /// A connection-pool event (never published here; see the module's doc).
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        #[allow(missing_docs)]
        pub enum CmapEvent {
            $($variant($event),)*
        }

        $(
            impl From<$event> for CmapEvent {
                fn from(event: $event) -> Self {
                    CmapEvent::$variant(event)
                }
            }
        )*
    };
}

cmap_events!(
    PoolCreated(PoolCreatedEvent),
    PoolReady(PoolReadyEvent),
    PoolCleared(PoolClearedEvent),
    PoolClosed(PoolClosedEvent),
    ConnectionCreated(ConnectionCreatedEvent),
    ConnectionReady(ConnectionReadyEvent),
    ConnectionClosed(ConnectionClosedEvent),
    ConnectionCheckoutStarted(ConnectionCheckoutStartedEvent),
    ConnectionCheckoutFailed(ConnectionCheckoutFailedEvent),
    ConnectionCheckedOut(ConnectionCheckedOutEvent),
    ConnectionCheckedIn(ConnectionCheckedInEvent),
);

/// The official driver's older handler form (never called here; see the
/// module's doc).
#[deprecated = "use the EventHandler API"]
#[allow(missing_docs)]
pub trait CmapEventHandler: Send + Sync {
    fn handle_pool_created_event(&self, _event: PoolCreatedEvent) {}
    fn handle_pool_ready_event(&self, _event: PoolReadyEvent) {}
    fn handle_pool_cleared_event(&self, _event: PoolClearedEvent) {}
    fn handle_pool_closed_event(&self, _event: PoolClosedEvent) {}
    fn handle_connection_created_event(&self, _event: ConnectionCreatedEvent) {}
    fn handle_connection_ready_event(&self, _event: ConnectionReadyEvent) {}
    fn handle_connection_closed_event(&self, _event: ConnectionClosedEvent) {}
    fn handle_connection_checkout_started_event(&self, _event: ConnectionCheckoutStartedEvent) {}
    fn handle_connection_checkout_failed_event(&self, _event: ConnectionCheckoutFailedEvent) {}
    fn handle_connection_checked_out_event(&self, _event: ConnectionCheckedOutEvent) {}
    fn handle_connection_checked_in_event(&self, _event: ConnectionCheckedInEvent) {}
}

#[allow(deprecated)]
impl<H: CmapEventHandler + 'static> From<std::sync::Arc<H>> for super::EventHandler<CmapEvent> {
    fn from(value: std::sync::Arc<H>) -> Self {
        use CmapEvent::*;
        Self::callback(move |event| match event {
            PoolCreated(e) => value.handle_pool_created_event(e),
            PoolReady(e) => value.handle_pool_ready_event(e),
            PoolCleared(e) => value.handle_pool_cleared_event(e),
            PoolClosed(e) => value.handle_pool_closed_event(e),
            ConnectionCreated(e) => value.handle_connection_created_event(e),
            ConnectionReady(e) => value.handle_connection_ready_event(e),
            ConnectionClosed(e) => value.handle_connection_closed_event(e),
            ConnectionCheckoutStarted(e) => value.handle_connection_checkout_started_event(e),
            ConnectionCheckoutFailed(e) => value.handle_connection_checkout_failed_event(e),
            ConnectionCheckedOut(e) => value.handle_connection_checked_out_event(e),
            ConnectionCheckedIn(e) => value.handle_connection_checked_in_event(e),
        })
    }
}
