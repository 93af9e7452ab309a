//! The public entry point: [`Client`] and [`Database`].
//!
//! A client owns one topology (`Topology`, private): the
//! description of the deployment and one socket slot per server. Creating a
//! client does no I/O; the first operation scans, selects and connects.
//! Operations from several threads are serialised: the driver is
//! single-threaded by design, and `Client` is `Send + Sync` only so that it
//! can live in a `static` or move between threads.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bson::Document;

use crate::error::Result;
use crate::proto::concern::{ReadConcern, WriteConcern};
use crate::proto::event::EventSink;
use crate::proto::options::{ClientOptions, ServerAddress};
use crate::proto::public_event::OfficialHandlers;
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::retry::{RetrySettings, Tokens};
use crate::proto::sdam::ServerDescription;
use crate::proto::select::ServerSelector;
use crate::shell::exec::ClientState;
use crate::shell::topology::Topology;

/// A handle to a MongoDB deployment. Cheap to clone; clones share the
/// topology and its sockets.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    state: Mutex<ClientState>,
    /// The [`this_thread`] number of the thread holding `state`, 0 when none
    /// does: an event or log callback that calls back into its own client
    /// runs on the thread that holds the lock, and would wait for itself.
    holder: AtomicU64,
    /// A `close` asked for from inside a callback, done when the operation
    /// under way lets go of the state.
    close_pending: AtomicBool,
    /// Set by [`Client::shutdown`]: every later operation of any clone
    /// fails with [`ErrorKind::Shutdown`](crate::error::ErrorKind::Shutdown).
    shut_down: AtomicBool,
    /// What the options give every operation, fixed when the client is
    /// built (SRV's TXT record cannot change them), so that handles can be
    /// made without the state's lock.
    defaults: crate::api::coll::Defaults,
    /// The connection string's database, fixed likewise.
    default_database: Option<String>,
}

/// The message of the error an operation started from inside one of its
/// own client's callbacks gets.
const REENTERED: &str = "an operation was started from inside an event or log callback of the \
same client; the client is busy with the operation that raised the event, and would wait for \
itself forever. Record what the callback needs and act on it after the operation returns, or \
use another client";

/// A number for the calling thread, distinct from every other thread's
/// (ThreadId has no stable integer form); never 0.
fn this_thread() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static THIS: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    THIS.with(|id| *id)
}

/// The client's state, locked by this thread; marks the thread as the
/// holder for as long as it lives.
pub(crate) struct StateGuard<'a> {
    inner: &'a ClientInner,
    guard: MutexGuard<'a, ClientState>,
}

impl Deref for StateGuard<'_> {
    type Target = ClientState;
    fn deref(&self) -> &ClientState {
        &self.guard
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut ClientState {
        &mut self.guard
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        if self.inner.close_pending.swap(false, Ordering::Relaxed) {
            self.guard.close();
        }
        // Before the lock is let go (the fields drop after this body): a
        // thread that takes it next sets its own number.
        self.inner.holder.store(0, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the deployment a connection string names. Parses and
    /// validates the string; does no I/O.
    pub fn with_uri_str(uri: impl AsRef<str>) -> Result<Client> {
        Client::with_options(ClientOptions::parse(uri.as_ref()).run()?)
    }

    /// A client with options parsed or built in code; validates them (an
    /// error names the option). No network I/O; with a `state_file` it
    /// reads that file (and refuses one others could read or write).
    /// Options without hosts (nor a `mongodb+srv` host) connect to
    /// `localhost:27017`, the official builder's default.
    pub fn with_options(options: ClientOptions) -> Result<Client> {
        Client::builder(options).build()
    }

    /// A builder for what options cannot carry: an application server
    /// selector and retry settings.
    pub fn builder(options: ClientOptions) -> ClientBuilder {
        ClientBuilder {
            options,
            sink: None,
            server_selector: None,
            retry_settings: None,
        }
    }

    fn build(
        options: ClientOptions,
        sink: Option<Arc<dyn EventSink>>,
        server_selector: Option<ServerSelector>,
        retry_settings: Option<RetrySettings>,
    ) -> Result<Client> {
        let mut options = options;
        if options.hosts.is_empty() && options.srv_host.is_none() {
            options.hosts = vec![ServerAddress::default()];
        }
        options.validate()?;
        let handler = event_sink(&options, sink)?;
        for warning in crate::proto::unsupported::check(&options)? {
            log::warn!("{warning}");
        }
        let defaults = crate::api::coll::Defaults {
            selection_criteria: options.selection_criteria.clone(),
            read_concern: options.read_concern().cloned(),
            write_concern: options.write_concern().cloned(),
            timeout: options.timeout(),
            deadline: None,
            ..crate::api::coll::Defaults::default()
        };
        let default_database = options.default_database().map(str::to_string);
        let topology = Topology::new(options, handler, server_selector)?;
        let mut state = ClientState::new(topology);
        if let Some(settings) = retry_settings {
            state.set_retry_settings(settings);
        }
        Ok(Client {
            inner: Arc::new(ClientInner {
                state: Mutex::new(state),
                holder: AtomicU64::new(0),
                close_pending: AtomicBool::new(false),
                shut_down: AtomicBool::new(false),
                defaults,
                default_database,
            }),
        })
    }

    /// The retry tokens left in the client's bucket (client backpressure),
    /// or `None` when its retry settings use no bucket. A balance well
    /// below [`crate::options::TOKEN_BUCKET_CAPACITY`] means recent overload
    /// retries outnumbered successes.
    ///
    /// # Panics
    ///
    /// When called from inside an event or log callback of this client
    /// (the client is busy with the operation that raised the event).
    pub fn retry_tokens(&self) -> Option<Tokens> {
        self.checked_retry_tokens()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Client::retry_tokens`], with the re-entry as an error (for the C ABI).
    pub(crate) fn checked_retry_tokens(&self) -> Result<Option<Tokens>> {
        Ok(self.state()?.retry_tokens())
    }

    /// A handle to the database `name`. Does no I/O.
    pub fn database(&self, name: &str) -> Database {
        Database {
            client: self.clone(),
            name: name.to_string(),
            defaults: self.defaults(),
        }
    }

    /// A handle to the database `name` whose reads and writes default to
    /// `options` (each one unset is the client's). Does no I/O.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::options::{DatabaseOptions, ReadPreference, SelectionCriteria, WriteConcern};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let options = DatabaseOptions::builder()
    ///     .write_concern(WriteConcern::majority())
    ///     .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
    ///     .build();
    /// let db = client.database_with_options("docs", options);
    /// assert_eq!(db.write_concern(), Some(&WriteConcern::majority()));
    /// // Its collections inherit it, unless their own options say otherwise.
    /// assert_eq!(db.collection::<Document>("c").write_concern(), Some(&WriteConcern::majority()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn database_with_options(
        &self,
        name: &str,
        options: crate::options::DatabaseOptions,
    ) -> Database {
        let own = crate::api::coll::Defaults::of_handle(
            options.selection_criteria,
            options.read_concern,
            options.write_concern,
        );
        Database {
            client: self.clone(),
            name: name.to_string(),
            defaults: self.defaults().overridden_by(&own),
        }
    }

    /// The client's default selection criteria (the options'
    /// `selection_criteria`, or the connection string's `readPreference`).
    pub fn selection_criteria(&self) -> Option<&SelectionCriteria> {
        self.inner.defaults.selection_criteria.as_ref()
    }

    /// The client's default read concern.
    pub fn read_concern(&self) -> Option<&ReadConcern> {
        self.inner.defaults.read_concern.as_ref()
    }

    /// The client's default write concern.
    pub fn write_concern(&self) -> Option<&WriteConcern> {
        self.inner.defaults.write_concern.as_ref()
    }

    /// The database named in the connection string's path, if any.
    pub fn default_database(&self) -> Option<Database> {
        let name = self.inner.default_database.as_deref()?;
        Some(self.database(name))
    }

    /// Starts an explicit session (for causal consistency or transactions).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let mut session = client.start_session().causal_consistency(true).run()?;
    /// let coll = client.database("docs").collection::<Document>("sessions");
    /// coll.insert_one(doc! { "x": 1 }).session(&mut session).run()?;
    /// // Causally consistent: this read sees the write above.
    /// assert!(coll.find_one(doc! { "x": 1 }).session(&mut session).run()?.is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn start_session(&self) -> crate::api::action::StartSession<'_> {
        crate::api::action::StartSession::new(self)
    }

    /// Ends the client's server sessions (`endSessions`, sent on an open
    /// socket without waiting for a reply) and closes every socket, without
    /// waiting on the network. The client can still be used afterwards: the
    /// next operation reconnects. Dropping the last clone does the same.
    ///
    /// Called from inside one of this client's event or log callbacks, it
    /// closes the client as soon as the operation that raised the event
    /// returns.
    pub fn close(&self) {
        if self.inner.shut_down.load(Ordering::Relaxed) {
            return;
        }
        match self.state() {
            Ok(mut state) => state.close(),
            Err(_) => self.inner.close_pending.store(true, Ordering::Relaxed),
        }
    }

    /// Shuts the client down (with `.run()`): ends its server sessions and
    /// closes its sockets, as [`close`](Self::close) does, and from then on
    /// every operation started through a clone of it (or one of its
    /// databases, collections, sessions or cursors) fails at once with
    /// [`ErrorKind::Shutdown`](crate::error::ErrorKind::Shutdown), without
    /// touching the network. Unlike the official driver's, it does not wait
    /// for cursors and sessions still held elsewhere (nothing here runs in
    /// the background); with or without
    /// [`immediate`](crate::action::Shutdown::immediate) it returns at once.
    pub fn shutdown(self) -> crate::action::Shutdown {
        crate::action::Shutdown::new(self)
    }

    /// Appends a wrapping library's name, version and platform to the
    /// metadata the handshake of every socket opened from now on sends, as
    /// the official driver's `append_metadata` (the handshake spec's
    /// `appendMetadata`): sockets already open keep theirs, and none is
    /// opened or closed for it. Appending metadata equal to metadata
    /// already appended changes nothing (an empty version or platform
    /// counts as unset).
    ///
    /// Fails, changing nothing, if a value contains `|` (the separator),
    /// if the metadata would grow past the server's 512-byte limit, or if
    /// called from inside one of this client's event or log callbacks.
    ///
    /// ```
    /// use mongo_inline::options::DriverInfo;
    ///
    /// # fn main() -> mongo_inline::Result<()> {
    /// let client = mongo_inline::Client::with_uri_str("mongodb://localhost/")?;
    /// client.append_metadata(DriverInfo::new("my-odm").version("2.1"))?;
    /// assert!(client.append_metadata(DriverInfo::new("a|b")).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn append_metadata(&self, driver_info: crate::options::DriverInfo) -> Result<()> {
        self.state()?.topology.append_metadata(driver_info)
    }

    /// Opens the client's sockets ahead of the first operation (discovery,
    /// handshake and authentication, with a `ping`), with `.run()`. Errors
    /// are not reported, as the official driver's: the first operation
    /// meets them again.
    pub fn warm_connection_pool(&self) -> crate::action::WarmConnectionPool<'_> {
        crate::action::WarmConnectionPool::new(self)
    }

    /// The options in force. With a `mongodb+srv` connection string they
    /// include, once the first operation has looked them up, the seed list
    /// of the SRV record and the options of the TXT record.
    ///
    /// # Panics
    ///
    /// When called from inside an event or log callback of this client
    /// (the client is busy with the operation that raised the event).
    pub fn options(&self) -> ClientOptions {
        self.checked_options().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Client::options`], with the re-entry as an error (for the C ABI).
    pub(crate) fn checked_options(&self) -> Result<ClientOptions> {
        Ok(self.state()?.options().clone())
    }

    /// The read/write defaults the client's options give its operations.
    pub(crate) fn defaults(&self) -> crate::api::coll::Defaults {
        self.inner.defaults.clone()
    }

    /// A change stream of the changes to every collection of every
    /// database but `admin`, `local` and `config` (see
    /// [`crate::change_stream`]).
    pub fn watch(&self) -> crate::api::action::Watch<'_> {
        crate::api::action::Watch::new(
            self,
            crate::proto::change_stream::WatchTarget::Cluster,
            self.defaults(),
        )
    }

    /// The deployment's databases, with their sizes (`listDatabases`, on
    /// the primary).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// client.database("docs").collection::<Document>("listed").insert_one(doc! {}).run()?;
    /// let databases = client.list_databases().run()?;
    /// assert!(databases.iter().any(|db| db.name == "docs"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_databases(&self) -> crate::api::action::ListDatabases<'_> {
        crate::api::action::ListDatabases::new(self)
    }

    /// Runs inserts, updates and deletes on any collections of the
    /// deployment in as few `bulkWrite` commands as the server's limits
    /// allow (MongoDB 8.0+; an older server gives
    /// [`ErrorKind::IncompatibleServer`](crate::ErrorKind::IncompatibleServer)).
    /// Ordered unless `.ordered(false)`; a retryable write when no model
    /// is an `UpdateMany` or `DeleteMany`. Failed writes and write concern
    /// errors come as [`ErrorKind::BulkWrite`](crate::ErrorKind::BulkWrite)
    /// with what did succeed.
    ///
    /// ```
    /// # use mongo_inline::bson::doc;
    /// # use mongo_inline::options::{DeleteOneModel, InsertOneModel, WriteModel};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let people = client.database("docs").collection::<mongo_inline::bson::Document>("bulk_people");
    /// let log = client.database("docs").collection::<mongo_inline::bson::Document>("log");
    /// let models: Vec<WriteModel> = vec![
    ///     InsertOneModel::builder().namespace(people.namespace()).document(doc! { "name": "Ada" }).build().into(),
    ///     InsertOneModel::builder().namespace(log.namespace()).document(doc! { "added": "Ada" }).build().into(),
    ///     DeleteOneModel::builder().namespace(people.namespace()).filter(doc! { "name": "Grace" }).build().into(),
    /// ];
    /// let result = client.bulk_write(models).verbose_results().run()?;
    /// assert_eq!(result.summary.inserted_count, 2);
    /// assert!(result.insert_results.contains_key(&1));
    /// # Ok(())
    /// # }
    /// ```
    pub fn bulk_write(
        &self,
        models: impl IntoIterator<Item = impl Into<crate::options::WriteModel>>,
    ) -> crate::api::action::BulkWrite<'_, crate::results::SummaryBulkWriteResult> {
        crate::api::action::BulkWrite::new(self, models.into_iter().map(Into::into).collect())
    }

    /// The names of the deployment's databases (`listDatabases` with
    /// `nameOnly`, on the primary).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// client.database("docs").collection::<Document>("listed").insert_one(doc! {}).run()?;
    /// assert!(client.list_database_names().run()?.contains(&"docs".to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_database_names(
        &self,
    ) -> crate::api::action::ListDatabases<'_, crate::api::action::ListNames> {
        crate::api::action::ListDatabases::new(self)
    }

    /// The client's state, once other threads' operations are done with
    /// it. An error, not a wait, when this thread already holds it: then
    /// the caller is a callback of the operation in progress.
    /// Closes the client for good: see [`Client::shutdown`].
    pub(crate) fn shut_down(&self) {
        self.close();
        self.inner.shut_down.store(true, Ordering::Relaxed);
    }

    pub(crate) fn state(&self) -> Result<StateGuard<'_>> {
        if self.inner.shut_down.load(Ordering::Relaxed) {
            return Err(crate::error::ErrorKind::Shutdown.into());
        }
        let me = this_thread();
        // Only this thread ever stores its own number, so reading it here
        // means this thread holds the lock; any other value means waiting.
        if self.inner.holder.load(Ordering::Relaxed) == me {
            return Err(crate::error::Error::client(REENTERED));
        }
        // A panic in an event handler poisons the lock; the state itself is
        // left consistent between steps, so carry on with it.
        let guard = self
            .inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.inner.holder.store(me, Ordering::Relaxed);
        Ok(StateGuard {
            inner: &self.inner,
            guard,
        })
    }
}

/// Where the topology publishes events: the sink given in code (the C
/// ABI's), or the handlers the options hold. A CMAP handler is refused: no
/// pool events exist here to call it with (see [`crate::event::cmap`]).
fn event_sink(
    options: &ClientOptions,
    sink: Option<Arc<dyn EventSink>>,
) -> Result<Option<Arc<dyn EventSink>>> {
    if options.cmap_event_handler.is_some() {
        return Err(crate::error::Error::invalid_argument(
            "cmap_event_handler is not supported: this driver keeps one socket per server and \
             no connection pool (the CMAP spec does not apply to single-threaded drivers), so \
             no connection pool event would ever reach the handler; command events carry the \
             socket each command used",
        ));
    }
    let handlers = OfficialHandlers {
        command: options.command_event_handler.clone(),
        sdam: options.sdam_event_handler.clone(),
    };
    match (sink, handlers.command.is_some() || handlers.sdam.is_some()) {
        (Some(_), true) => Err(crate::error::Error::invalid_argument(
            "a client takes its event handlers either from its options or from the C ABI, \
             not from both",
        )),
        (Some(sink), false) => Ok(Some(sink)),
        (None, true) => Ok(Some(Arc::new(handlers))),
        (None, false) => Ok(None),
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.end_sessions();
    }
}

/// Builds a [`Client`] with a server selector or retry settings.
pub struct ClientBuilder {
    options: ClientOptions,
    sink: Option<Arc<dyn EventSink>>,
    server_selector: Option<ServerSelector>,
    retry_settings: Option<RetrySettings>,
}

impl ClientBuilder {
    /// Publishes the driver's events, as it builds them, to `sink` (the C
    /// ABI's events); programs set the options' handlers instead.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub(crate) fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The server-selection spec's application-provided selector: called
    /// with the servers suitable for an operation (before the latency
    /// window), it returns those that may still be chosen.
    pub fn server_selector<F>(mut self, selector: F) -> Self
    where
        F: for<'a> Fn(Vec<&'a ServerDescription>) -> Vec<&'a ServerDescription>
            + Send
            + Sync
            + 'static,
    {
        self.server_selector = Some(Arc::new(selector));
        self
    }

    /// Retries by `settings` instead of those the options give
    /// ([`RetrySettings::from_options`]): e.g. the seed policy without its
    /// token bucket, or another backoff base, to measure or test how a
    /// client behaves under server overload.
    pub fn retry_settings(mut self, settings: RetrySettings) -> Self {
        self.retry_settings = Some(settings);
        self
    }

    /// The client. Validates; does no I/O.
    pub fn build(self) -> Result<Client> {
        Client::build(
            self.options,
            self.sink,
            self.server_selector,
            self.retry_settings,
        )
    }
}

/// A handle to one database.
#[derive(Clone, Debug)]
pub struct Database {
    client: Client,
    name: String,
    /// What its collections and operations inherit: the client's defaults
    /// with the database options on top.
    defaults: crate::api::coll::Defaults,
}

impl Database {
    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A handle to the collection `name`, whose documents are read and
    /// written as `T` (use [`bson::Document`] for untyped access).
    pub fn collection<T>(&self, name: &str) -> crate::api::coll::Collection<T> {
        crate::api::coll::Collection::new(self.client.clone(), &self.name, name, self.defaults())
    }

    /// A handle to the collection `name` whose operations default to
    /// `options` (each one unset is this database's). Does no I/O.
    pub fn collection_with_options<T>(
        &self,
        name: &str,
        options: crate::options::CollectionOptions,
    ) -> crate::api::coll::Collection<T> {
        let own = crate::api::coll::Defaults::of_handle(
            options.selection_criteria,
            options.read_concern,
            options.write_concern,
        );
        let defaults = self.defaults.overridden_by(&own);
        crate::api::coll::Collection::new(self.client.clone(), &self.name, name, defaults)
    }

    /// What every operation through this handle inherits.
    pub(crate) fn defaults(&self) -> crate::api::coll::Defaults {
        self.defaults.clone()
    }

    /// Runs a cursor-opening database-level `op` with this handle's timeout,
    /// as [`crate::Collection`] does for its own.
    pub(crate) fn open_cursor<U, Op>(&self, mut op: Op) -> Result<crate::Cursor<U>>
    where
        Op: crate::proto::operation::Operation<
            Output = Box<crate::proto::operation::cursor::CursorSpec>,
        >,
    {
        crate::api::coll::open_cursor(
            &self.client,
            &mut op,
            self.defaults.timeout_only(),
            self.defaults.timeout_mode,
        )
    }

    /// [`Database::open_cursor`] in `session`.
    pub(crate) fn open_session_cursor<U, Op>(
        &self,
        mut op: Op,
        session: &mut crate::ClientSession,
    ) -> Result<crate::SessionCursor<U>>
    where
        Op: crate::proto::operation::Operation<
            Output = Box<crate::proto::operation::cursor::CursorSpec>,
        >,
    {
        crate::api::coll::open_session_cursor(
            &self.client,
            &mut op,
            self.defaults.timeout_only(),
            self.defaults.timeout_mode,
            session,
        )
    }

    /// Where its collections' reads go when neither they nor the operation
    /// say: the database options' selection criteria, else the client's.
    pub fn selection_criteria(&self) -> Option<&SelectionCriteria> {
        self.defaults.selection_criteria.as_ref()
    }

    /// Its default read concern (the database options', else the client's).
    pub fn read_concern(&self) -> Option<&ReadConcern> {
        self.defaults.read_concern.as_ref()
    }

    /// Its default write concern (the database options', else the client's).
    pub fn write_concern(&self) -> Option<&WriteConcern> {
        self.defaults.write_concern.as_ref()
    }

    /// This handle with `timeoutMS` for its collections' operations.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.defaults.timeout = Some(timeout);
        self
    }

    /// This handle for one operation that sets its own `timeoutMS` and
    /// `timeoutMode`: borrowed as it is when it sets neither.
    pub(crate) fn for_operation(
        &self,
        timeout: Option<std::time::Duration>,
        mode: Option<crate::proto::cursor_timeout::TimeoutMode>,
    ) -> std::borrow::Cow<'_, Self> {
        if timeout.is_none() && mode.is_none() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut db = self.clone();
        db.defaults = db.defaults.with_operation_timeout(timeout);
        db.defaults.timeout_mode = mode.or(db.defaults.timeout_mode);
        std::borrow::Cow::Owned(db)
    }

    /// The client this database belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Creates collection `name` (the `create` command); an existing
    /// collection is an error from the server (`NamespaceExists`, 48).
    ///
    /// ```
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let db = client.database("docs_create_collection");
    /// db.drop().run()?;
    /// db.create_collection("capped").capped(true).size(4096).run()?;
    /// assert_eq!(db.list_collection_names().run()?, ["capped"]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_collection(
        &self,
        name: impl AsRef<str>,
    ) -> crate::api::action::CreateCollection<'_> {
        crate::api::action::CreateCollection::new(self, name.as_ref())
    }

    /// Drops the database and all its collections (`dropDatabase`).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let db = client.database("docs_drop");
    /// db.collection::<Document>("c").insert_one(doc! {}).run()?;
    /// db.drop().run()?;
    /// assert!(db.list_collection_names().run()?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn drop(&self) -> crate::api::action::DropDatabase<'_> {
        crate::api::action::DropDatabase::new(self)
    }

    /// The database's collections and views, as specifications
    /// (`listCollections`, read on the primary).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # use mongo_inline::results::CollectionType;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let db = client.database("docs_list_collections");
    /// db.collection::<Document>("things").insert_one(doc! {}).run()?;
    /// let specs = db
    ///     .list_collections()
    ///     .filter(doc! { "name": "things" })
    ///     .run()?
    ///     .collect::<mongo_inline::Result<Vec<_>>>()?;
    /// assert_eq!(specs[0].collection_type, CollectionType::Collection);
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_collections(&self) -> crate::api::action::ListCollections<'_> {
        crate::api::action::ListCollections::new(self)
    }

    /// The names of the database's collections and views
    /// (`listCollections` with `nameOnly`, read on the primary).
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let db = client.database("docs_names");
    /// db.collection::<Document>("a").insert_one(doc! {}).run()?;
    /// assert!(db.list_collection_names().run()?.contains(&"a".to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_collection_names(
        &self,
    ) -> crate::api::action::ListCollections<'_, crate::api::action::ListNames> {
        crate::api::action::ListCollections::new(self)
    }

    /// Runs a command and returns the reply; on the primary unless
    /// `.selection_criteria(..)` says otherwise (the client's default read
    /// preference does not apply to `runCommand`, as the server-selection
    /// spec says). A reply with `ok: 0` is an error.
    ///
    /// ```
    /// # use mongo_inline::bson::doc;
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let reply = client.database("admin").run_command(doc! { "ping": 1 }).run()?;
    /// assert_eq!(reply.get_f64("ok").ok().or(reply.get_i32("ok").ok().map(f64::from)), Some(1.0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_command(&self, command: Document) -> crate::api::action::RunCommand<'_> {
        crate::api::action::RunCommand::new(self, command)
    }

    /// Runs a command that opens a cursor (`find`, `aggregate`,
    /// `listCollections`...) as given, and returns the cursor; its options
    /// set what the `getMore`s carry (`batchSize`, `maxTimeMS`, `comment`)
    /// and dropping it early sends `killCursors`, as the run-command spec
    /// says. A command that opens no cursor is an error.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let db = client.database("docs");
    /// let coll = db.collection::<Document>("cursor_command");
    /// coll.drop().run()?;
    /// coll.insert_many((0..5).map(|n| doc! { "n": n })).run()?;
    /// let cursor = db
    ///     .run_cursor_command(doc! { "find": "cursor_command", "batchSize": 2 })
    ///     .batch_size(2)
    ///     .run()?;
    /// assert_eq!(cursor.count(), 5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_cursor_command(
        &self,
        command: Document,
    ) -> crate::api::action::RunCursorCommand<'_> {
        crate::api::action::RunCursorCommand::new(self, command)
    }

    /// [`run_command`](Self::run_command) with the command as raw BSON
    /// bytes (as the official driver's): checked as a reply is (lengths,
    /// nesting), so invalid bytes make `run` fail naming the problem.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, rawdoc};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let reply = client.database("admin").run_raw_command(rawdoc! { "ping": 1 }).run()?;
    /// assert!(reply.contains_key("ok"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn run_raw_command(
        &self,
        command: bson::RawDocumentBuf,
    ) -> crate::api::action::RunCommand<'_> {
        crate::api::action::RunCommand::raw(self, &command)
    }

    /// [`run_cursor_command`](Self::run_cursor_command) with the command as
    /// raw BSON bytes, checked as [`run_raw_command`](Self::run_raw_command)'s.
    pub fn run_raw_cursor_command(
        &self,
        command: bson::RawDocumentBuf,
    ) -> crate::api::action::RunCursorCommand<'_> {
        crate::api::action::RunCursorCommand::raw(self, &command)
    }

    /// A change stream of the changes to every collection of this database
    /// (see [`crate::change_stream`]).
    pub fn watch(&self) -> crate::api::action::Watch<'_> {
        crate::api::action::Watch::new(
            &self.client,
            crate::proto::change_stream::WatchTarget::Database(self.name.clone()),
            self.defaults(),
        )
    }

    /// Runs an aggregation pipeline on the database (`aggregate: 1`), for
    /// stages such as `$currentOp` or `$documents` that read no collection.
    ///
    /// ```
    /// # use mongo_inline::bson::{doc, Document};
    /// # fn main() -> mongo_inline::Result<()> {
    /// # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
    /// # let client = mongo_inline::Client::with_uri_str(&uri)?;
    /// let results: Vec<Document> = client
    ///     .database("docs")
    ///     .aggregate([doc! { "$documents": [{ "x": 1 }, { "x": 2 }] }])
    ///     .run()?
    ///     .collect::<mongo_inline::Result<_>>()?;
    /// assert_eq!(results.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn aggregate(
        &self,
        pipeline: impl IntoIterator<Item = Document>,
    ) -> crate::api::action::Aggregate<'_> {
        crate::api::action::Aggregate::on_database(
            &self.client,
            &self.name,
            self.defaults(),
            pipeline.into_iter().collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Client;

    #[test]
    fn a_client_timeout_ms_of_zero_keeps_csot_on_without_a_limit() {
        // Building a client opens no socket: its defaults are all this reads.
        let zero = Client::with_uri_str("mongodb://localhost/?timeoutMS=0").unwrap();
        assert_eq!(
            zero.defaults().timeout,
            Some(Duration::ZERO),
            "timeoutMS=0 turns CSOT on for every operation, with no limit"
        );
        let unset = Client::with_uri_str("mongodb://localhost/").unwrap();
        assert_eq!(unset.defaults().timeout, None, "no timeoutMS: CSOT off");
    }
}
