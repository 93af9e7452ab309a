//! The pure core: every rule the specifications decide, as functions of
//! values. Nothing here opens a socket or a file, reads the clock or the
//! process id, or draws a random number; the shell passes the time, the
//! randomness, the process ([`process::CurrentProcess`]) and ObjectIds in,
//! and the spec runners drive these modules directly.

pub(crate) mod address;
pub mod atlas_search;
pub(crate) mod auth;
pub(crate) mod bson_write;
pub(crate) mod change_stream;
pub(crate) mod client_bulk;
pub(crate) mod coll_options;
pub(crate) mod collation;
pub mod collection_spec;
pub(crate) mod command_draft;
pub(crate) mod compression;
pub(crate) mod concern;
pub(crate) mod cursor_timeout;
pub(crate) mod deadline;
pub(crate) mod encode;
pub(crate) mod event;
pub(crate) mod finish;
pub(crate) mod gridfs;
pub(crate) mod handshake;
pub(crate) mod log_json;
pub(crate) mod logging;
pub(crate) mod monitor;
pub(crate) mod nesting;
pub(crate) mod object_id;
pub(crate) mod operation;
pub mod options;
#[cfg_attr(not(feature = "capi"), allow(dead_code))]
pub(crate) mod options_doc;
pub(crate) mod process;
pub mod public_event;
pub(crate) mod raw_walk;
pub(crate) mod read_preference;
pub(crate) mod reply;
pub mod results;
pub(crate) mod retry;
pub(crate) mod scan;
pub(crate) mod sdam;
pub(crate) mod search_index;
pub(crate) mod select;
pub(crate) mod serde_util;
pub(crate) mod session;
pub(crate) mod srv;
pub(crate) mod state_file;
pub(crate) mod unsupported;
pub(crate) mod uri;
pub(crate) mod wire;
pub(crate) mod write_model;
