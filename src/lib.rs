//! mongo-inline: a MongoDB driver for short-lived processes.
//!
//! ```
//! use mongo_inline::bson::doc;
//! use mongo_inline::Client;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Serialize, Deserialize)]
//! struct Person {
//!     name: String,
//!     born: i32,
//! }
//!
//! # fn main() -> mongo_inline::Result<()> {
//! # // `.ci/test` starts a throwaway server for the doc tests and sets this.
//! # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
//! // Parses and validates; no I/O until the first operation.
//! let client = Client::with_uri_str(&uri)?;
//! let people = client.database("docs").collection::<Person>("people");
//!
//! people.insert_one(Person { name: "Ada".into(), born: 1815 }).run()?;
//! let ada = people.find_one(doc! { "name": "Ada" }).run()?;
//! assert_eq!(ada.map(|p| p.born), Some(1815));
//!
//! for person in people.find(doc! { "born": { "$lt": 1900 } }).sort(doc! { "born": 1 }).run()? {
//!     println!("{:?}", person?);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The API is the official `mongodb` crate's sync API (3.x) without a
//! runtime: [`Client`] → [`Database`] → [`Collection<T>`], each operation a
//! builder from [`action`] with its options set by name (or
//! `.with_options(..)`), a session by `.session(&mut session)`, and sent by
//! `.run()`. Queries return a [`Cursor`] (an iterator), or in a session a
//! [`SessionCursor`] iterated with it. Every option type is in [`options`],
//! every result in [`results`]; errors are one [`Error`], whose
//! [`code`](Error::code) is the server's (a duplicate key is `Some(11000)`)
//! and whose [`kind`](Error::kind) has the details. The [`bson`] crate is
//! re-exported. Runnable programs are in `examples/`: typed CRUD, a
//! transaction with [`StartTransaction::and_run`](action::StartTransaction::and_run), matching a
//! duplicate-key error, and a FaaS handler that reuses one client.
//!
//! Single-threaded and scan-on-demand: no background threads, no async
//! runtime. Before an operation the client scans the deployment inline when
//! it is due (the SDAM spec's single-threaded monitoring), selects a server
//! (the server-selection spec's single-threaded algorithm) and runs the
//! operation on that server's one socket, which also carries the scan's
//! hellos.
//!
//! The public modules are the ones a program needs: [`action`] (the
//! operation builders), [`options`] (every option type, including
//! [`ReadPreference`] and the concerns),
//! [`results`], [`gridfs`] (files larger than a document, streamed), [`atlas_search`] (`$search`
//! stage builders), [`error`], [`event`] (the SDAM and command events, the
//! descriptions they carry, the [`EventHandler`](event::EventHandler) that
//! receives them and the `log` targets) and [`bson`]. The specs' rules
//! (discovery, selection, connection strings, retries, sessions,
//! authentication) and the blocking shell that drives them are private;
//! their spec tests run inside the crate.

#![deny(unsafe_code)]
#![deny(missing_docs)]
// A type the API mentions must be nameable at a public path.
#![warn(unnameable_types)]
// Unit tests time real peers and seed their own generators; the library
// itself reads time and randomness only in `shell::clock` and `shell::rng`
// (clippy.toml).
#![cfg_attr(test, allow(clippy::disallowed_methods))]
// Long functions hide their steps (issue 33); tests may be long.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

// Three folders, three jobs (see the README's architecture section):
// `proto` holds the pure rules (values in, decisions out, no sockets, the
// clock and randomness passed in), `shell` the blocking I/O that feeds them,
// `api` the public surface built on both. The re-exports below give the
// public items their paths (`mongo_inline::options`, `mongo_inline::Client`,
// ...) so the folders are an internal layout.
mod api;
mod proto;
mod shell;

#[cfg(test)]
mod spec_tests;

#[cfg(feature = "capi")]
#[allow(unsafe_code)]
pub mod capi;
pub mod error;

pub use api::action;
pub use proto::atlas_search;

pub use api::change_stream;
pub use api::gridfs;
pub use proto::options;
pub use proto::public_event as event;

pub mod results {
    //! What write operations return, the write failures they can raise, and
    //! what `list_collections` describes ([`CollectionSpecification`]).
    //!
    //! Writes fail in two ways that are not command errors (the command itself
    //! succeeded with `ok: 1`): a statement can fail (`writeErrors`, e.g. a
    //! duplicate key), or the write concern could not be satisfied
    //! (`writeConcernError`). A single-statement write reports either as
    //! [`WriteFailure`]; a batched write (`insert_many`, `bulk_write`) collects
    //! them in a [`BulkWriteFailure`] together with what did succeed.
    //!
    //! A write sent with `w: 0` gets no reply, so nothing is known of what it
    //! did: its result says `acknowledged: false`, and its counts are zero
    //! because the server never reported any, not because nothing matched.
    //! Check `acknowledged` before reading a count.

    pub use crate::proto::client_bulk::{SummaryBulkWriteResult, VerboseBulkWriteResult};
    pub use crate::proto::collection_spec::{
        CollectionSpecification, CollectionSpecificationInfo, CollectionType,
    };
    pub use crate::proto::results::*;
}

/// A new ObjectId, unique to this process even after a fork (`bson`'s
/// `ObjectId::new()` repeats its parent's ids in a forked child).
pub use shell::ids::new_object_id;

pub use api::client::{Client, ClientBuilder, Database};
pub use api::client_session::ClientSession;
pub use api::coll::Collection;
pub use api::cursor::{Cursor, SessionCursor, SessionCursorIter};
pub use bson;
pub use error::{Error, ErrorKind, Result};
pub use options::{
    ClientOptions, IndexModel, ReadPreference, SearchIndexModel, SearchIndexType, ServerAddress,
};
pub use proto::sdam::{ServerInfo, ServerType, TopologyType};

/// A collection's full name, as [`Collection::namespace`] gives it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Namespace {
    /// The database's name.
    pub db: String,
    /// The collection's name (may itself contain dots).
    pub coll: String,
}

impl Namespace {
    /// The namespace `db.coll`.
    pub fn new(db: impl Into<String>, coll: impl Into<String>) -> Self {
        Namespace {
            db: db.into(),
            coll: coll.into(),
        }
    }
}

impl std::str::FromStr for Namespace {
    type Err = Error;

    /// `db.coll`, split at the first dot (a collection's name may contain
    /// more); either part missing is an error.
    fn from_str(text: &str) -> Result<Self> {
        match text.split_once('.') {
            Some((db, coll)) if !db.is_empty() && !coll.is_empty() => Ok(Namespace::new(db, coll)),
            _ => Err(Error::invalid_argument(format!(
                "the namespace {text:?} is not `db.collection`"
            ))),
        }
    }
}

/// As the string `db.coll`.
impl serde::Serialize for Namespace {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// From the string `db.coll` (split at the first dot).
impl<'de> serde::Deserialize<'de> for Namespace {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Namespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.db, self.coll)
    }
}
pub use proto::session::cluster_time::ClusterTime;
pub use proto::session::TransactionState;

/// The official driver's path for the blocking types (`mongodb::sync`):
/// here they are the crate root's, re-exported so that a program written for
/// `mongodb::sync::Client` compiles with only the crate's name changed (for
/// example `mongodb = { package = "mongo-inline", .. }` in Cargo.toml).
pub mod sync {
    pub use crate::change_stream::{ChangeStream, SessionChangeStream};
    pub use crate::{
        Client, ClientSession, Collection, Cursor, Database, SessionCursor, SessionCursorIter,
    };

    /// GridFS under the official path (`mongodb::sync::gridfs`).
    pub mod gridfs {
        pub use crate::gridfs::{
            FilesCollectionDocument, GridFsBucket, GridFsDownloadStream, GridFsUploadStream,
        };
    }
}

#[doc(hidden)]
pub mod unversioned;
