//! Action builders: what the operations of [`Collection`](crate::Collection),
//! [`Database`](crate::Database) and [`Client`](crate::Client) return.
//!
//! The shape is the official `mongodb` crate's (3.x) sync API: an operation
//! takes its required arguments, returns a builder on which each option can
//! be set by name (or all at once with `with_options`), optionally an
//! explicit session with `.session(&mut session)`, and runs with `.run()`.
//! Nothing is sent before `run`.
//!
//! ```
//! use mongo_inline::bson::{doc, Document};
//! use mongo_inline::Client;
//!
//! # fn main() -> mongo_inline::Result<()> {
//! # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
//! let client = Client::with_uri_str(&uri)?;
//! let coll = client.database("docs").collection::<Document>("actions");
//! coll.drop().run()?;
//! coll.insert_many([doc! { "n": 1 }, doc! { "n": 2 }, doc! { "n": 3 }]).run()?;
//! let top: Vec<Document> = coll
//!     .find(doc! {})
//!     .sort(doc! { "n": -1 })
//!     .limit(2)
//!     .run()?
//!     .collect::<mongo_inline::Result<_>>()?;
//! assert_eq!(top[0].get_i32("n").unwrap(), 3);
//! assert_eq!(top.len(), 2);
//! # Ok(())
//! # }
//! ```

mod client_bulk_write;
mod collection;
mod database;
mod search_index;
mod watch;

pub use crate::api::client_session::{AbortTransaction, CommitTransaction, StartTransaction};
pub use crate::shell::connection_string::ParseConnectionString;
pub use client_bulk_write::BulkWrite;
pub use collection::{
    Aggregate, CollectionBulkWrite, CountDocuments, CreateIndex, Delete, Distinct, DropCollection,
    DropIndex, EstimatedDocumentCount, Find, FindOne, FindOneAndDelete, FindOneAndReplace,
    FindOneAndUpdate, InsertMany, InsertOne, ListIndexes, ReplaceOne, Update,
};
pub use database::{
    CreateCollection, DropDatabase, ListCollections, ListDatabases, RunCommand, RunCursorCommand,
    Shutdown, StartSession, WarmConnectionPool,
};
pub use search_index::{CreateSearchIndex, DropSearchIndex, ListSearchIndexes, UpdateSearchIndex};
pub use watch::Watch;

pub mod gridfs {
    //! The builders a [`GridFsBucket`](crate::gridfs::GridFsBucket)'s
    //! operations return, at the official crate's path
    //! (`mongodb::action::gridfs`).
    pub use crate::api::gridfs::actions::{
        Delete, DeleteByName, Drop, Find, FindOne, OpenDownloadStream, OpenDownloadStreamByName,
        OpenUploadStream, Rename, RenameByName,
    };
}

use crate::api::client_session::ClientSession;
use crate::api::coll::Collection;

/// The collection handle of a builder whose type does not name the
/// collection's document type (as the official driver's): the operation
/// reads and writes documents the builder has already encoded, so the type
/// is not needed past the call that made the builder.
pub(crate) fn untyped<T>(coll: &Collection<T>) -> std::borrow::Cow<'_, Collection<bson::Document>> {
    std::borrow::Cow::Owned(coll.clone_with_type())
}

/// The mode of a builder that lists specifications (`list_indexes`,
/// `list_collections`, `list_databases`; the default): its `run` returns
/// them, or a cursor over them.
#[derive(Debug)]
pub struct ListSpecifications;

/// The mode of a builder that lists names (`list_index_names`,
/// `list_collection_names`, `list_database_names`): its `run` returns a
/// `Vec<String>`.
#[derive(Debug)]
pub struct ListNames;

/// The mode of a builder that creates one index (`create_index`; the
/// default): its `run` returns a
/// [`CreateIndexResult`](crate::results::CreateIndexResult).
#[derive(Debug)]
pub struct Single;

/// The mode of a builder that creates several indexes (`create_indexes`):
/// its `run` returns a
/// [`CreateIndexesResult`](crate::results::CreateIndexesResult).
#[derive(Debug)]
pub struct Multiple;

/// The session state of a cursor-returning builder before
/// `.session(..)`: the operation uses an implicit session and returns a
/// [`Cursor`](crate::Cursor).
#[derive(Debug, Default)]
pub struct ImplicitSession;

/// The session state of a cursor-returning builder after `.session(..)`:
/// the operation runs in that session and returns a
/// [`SessionCursor`](crate::SessionCursor), iterated with it.
#[derive(Debug)]
pub struct ExplicitSession<'a>(pub(crate) &'a mut ClientSession);

/// Declares `with_options` and one setter per option field of a builder
/// whose options live in `self.options`. As the official driver's setters:
/// a `Bson` or `String` option takes anything `Into` it, a `Vec<T>` one any
/// `IntoIterator<Item = T>`, the rest their own type.
macro_rules! option_setters {
    ($options:ty { $( $field:ident : $head:ident $(< $inner:ident >)? ),* $(,)? }) => {
        /// Sets every option at once, replacing any set on this builder before.
        pub fn with_options(mut self, options: impl Into<Option<$options>>) -> Self {
            self.options = options.into().unwrap_or_default().into();
            self
        }

        $( $crate::api::action::option_setter!($options, $field, $head $(< $inner >)?); )*
    };
}
pub(crate) use option_setters;

/// One setter of [`option_setters`].
macro_rules! option_setter {
    (@doc $options:ty, $field:ident) => {
        concat!(
            "Sets the `",
            stringify!($field),
            "` option (see [`",
            stringify!($options),
            "::",
            stringify!($field),
            "`])."
        )
    };
    ($options:ty, $field:ident, Bson) => {
        #[doc = $crate::api::action::option_setter!(@doc $options, $field)]
        // The official deprecated options (`max_scan`) keep their setters.
        #[allow(deprecated)]
        pub fn $field(mut self, value: impl Into<Bson>) -> Self {
            self.options.$field = Some(value.into());
            self
        }
    };
    ($options:ty, $field:ident, String) => {
        #[doc = $crate::api::action::option_setter!(@doc $options, $field)]
        // The official deprecated options (`max_scan`) keep their setters.
        #[allow(deprecated)]
        pub fn $field(mut self, value: impl Into<String>) -> Self {
            self.options.$field = Some(value.into());
            self
        }
    };
    ($options:ty, $field:ident, Vec<$inner:ident>) => {
        #[doc = $crate::api::action::option_setter!(@doc $options, $field)]
        // The official deprecated options (`max_scan`) keep their setters.
        #[allow(deprecated)]
        pub fn $field(mut self, value: impl IntoIterator<Item = $inner>) -> Self {
            self.options.$field = Some(value.into_iter().collect());
            self
        }
    };
    ($options:ty, $field:ident, $head:ident) => {
        #[doc = $crate::api::action::option_setter!(@doc $options, $field)]
        // The official deprecated options (`max_scan`) keep their setters.
        #[allow(deprecated)]
        pub fn $field(mut self, value: $head) -> Self {
            self.options.$field = Some(value);
            self
        }
    };
}
pub(crate) use option_setter;

/// Declares `.session(..)` for a builder with a
/// `session: Option<&'a mut ClientSession>` field.
macro_rules! session_setter {
    () => {
        /// Runs the operation in `session` (for causal consistency or a
        /// transaction) instead of an implicit session.
        pub fn session(
            mut self,
            session: &'a mut crate::api::client_session::ClientSession,
        ) -> Self {
            self.session = Some(session);
            self
        }
    };
}
pub(crate) use session_setter;

/// Declares `.timeout(..)` for a builder whose handle (a collection or a
/// database) is held as `Cow` in `self.$handle`.
macro_rules! timeout_setter {
    ($handle:ident) => {
        /// Sets this operation's `timeoutMS` (client-side operations
        /// timeout), overriding its handle's: it bounds everything the
        /// operation does (server selection, every attempt and backoff, the
        /// server's own time through `maxTimeMS`), and its expiry is a
        /// timeout error. `Duration::ZERO` keeps CSOT's rules without a
        /// limit. Inside a `with_transaction` callback whose session has a
        /// timeout, setting it is an error.
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            let handle = self.$handle.for_operation(Some(timeout), None).into_owned();
            self.$handle = std::borrow::Cow::Owned(handle);
            self
        }
    };
}
pub(crate) use timeout_setter;

/// Declares `.timeout_mode(..)` for a cursor-opening builder whose handle
/// is held as `Cow` in `self.$handle`.
macro_rules! timeout_mode_setter {
    ($handle:ident) => {
        /// Sets whether `timeoutMS` bounds the cursor's whole life or each
        /// iteration (see [`crate::options::TimeoutMode`]); it needs a
        /// `timeoutMS`, the operation's or its handle's.
        pub fn timeout_mode(mut self, mode: crate::options::TimeoutMode) -> Self {
            let handle = self.$handle.for_operation(None, Some(mode)).into_owned();
            self.$handle = std::borrow::Cow::Owned(handle);
            self
        }
    };
}
pub(crate) use timeout_mode_setter;
