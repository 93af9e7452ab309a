//! The public surface: `Client`, `Database`, `Collection<T>`, cursors,
//! sessions and the action builders. Settings (deadline, concerns, read
//! preference) are resolved here once and handed to the executor.

pub mod action;
pub mod client;
pub mod client_session;
pub mod coll;
pub mod cursor;
