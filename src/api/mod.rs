//! The public surface: `Client`, `Database`, `Collection<T>`, cursors,
//! sessions and the action builders. Settings (deadline, concerns, read
//! preference) are resolved here once and handed to the executor.

pub mod action;
pub mod change_stream;
pub(crate) mod client;
pub(crate) mod client_session;
pub(crate) mod coll;
pub(crate) mod cursor;
pub mod gridfs;
