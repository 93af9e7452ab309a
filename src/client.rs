//! The public entry point: [`Client`] and [`Database`].
//!
//! A client owns one [`crate::topology::Topology`]: the
//! description of the deployment and one socket slot per server. Creating a
//! client does no I/O; the first operation scans, selects and connects.
//! Operations from several threads are serialised: the driver is
//! single-threaded by design, and `Client` is `Send + Sync` only so that it
//! can live in a `static` or move between threads.

use std::sync::{Arc, Mutex, MutexGuard};

use bson::Document;

use crate::error::Result;
use crate::event::EventHandler;
use crate::exec::{ClientState, Target};
use crate::operation::RunCommand;
use crate::options::ClientOptions;
use crate::read_preference::ReadPreference;
use crate::retry::{RetryPolicy, RetrySettings, Tokens};
use crate::sdam::ServerDescription;
use crate::select::{SelectionCriteria, ServerSelector};
use crate::topology::Topology;

/// A handle to a MongoDB deployment. Cheap to clone; clones share the
/// topology and its sockets.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    state: Mutex<ClientState>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the deployment a connection string names. Parses and
    /// validates the string; does no I/O.
    pub fn with_uri_str(uri: &str) -> Result<Client> {
        Client::with_options(ClientOptions::parse(uri)?)
    }

    /// A client with options built in code. Does no I/O.
    pub fn with_options(options: ClientOptions) -> Result<Client> {
        Client::builder(options).build()
    }

    /// A client that reports SDAM and command events to `handler`.
    /// The handler runs inline, inside the operation that caused the
    /// event; it must not call back into this client.
    pub fn with_options_and_handler(
        options: ClientOptions,
        handler: Arc<dyn EventHandler>,
    ) -> Result<Client> {
        Client::builder(options).event_handler(handler).build()
    }

    /// A builder for what options cannot carry: an event handler and an
    /// application server selector.
    pub fn builder(options: ClientOptions) -> ClientBuilder {
        ClientBuilder {
            options,
            handler: None,
            server_selector: None,
            retry_settings: None,
        }
    }

    fn build(
        options: ClientOptions,
        handler: Option<Arc<dyn EventHandler>>,
        server_selector: Option<ServerSelector>,
        retry_settings: Option<RetrySettings>,
    ) -> Result<Client> {
        for warning in crate::unsupported::check(&options)? {
            log::warn!("{warning}");
        }
        let topology = Topology::new(options, handler, server_selector)?;
        let mut state = ClientState::new(topology);
        if let Some(settings) = retry_settings {
            state.retry = RetryPolicy::new(settings);
        }
        Ok(Client {
            inner: Arc::new(ClientInner {
                state: Mutex::new(state),
            }),
        })
    }

    /// The retry tokens left in the client's bucket (client backpressure),
    /// or `None` when its retry settings use no bucket. A balance well
    /// below [`crate::retry::TOKEN_BUCKET_CAPACITY`] means recent overload
    /// retries outnumbered successes.
    pub fn retry_tokens(&self) -> Option<Tokens> {
        self.state().retry.bucket().map(|bucket| bucket.balance())
    }

    /// A handle to the database `name`. Does no I/O.
    pub fn database(&self, name: &str) -> Database {
        Database {
            client: self.clone(),
            name: name.to_string(),
            overrides: crate::coll::Defaults::default(),
        }
    }

    /// The database named in the connection string's path, if any.
    pub fn default_database(&self) -> Option<Database> {
        let name = self
            .state()
            .topology
            .options()
            .default_database()?
            .to_string();
        Some(self.database(&name))
    }

    /// Starts an explicit session (for causal consistency or transactions).
    pub fn start_session(
        &self,
        options: impl Into<Option<crate::session::SessionOptions>>,
    ) -> Result<crate::client_session::ClientSession> {
        crate::client_session::ClientSession::start(self, options.into().unwrap_or_default())
    }

    /// Ends the client's server sessions (`endSessions`, sent on an open
    /// socket without waiting for a reply) and closes every socket, without
    /// waiting on the network. The client can still be used afterwards: the
    /// next operation reconnects. Dropping the last clone does the same.
    pub fn close(&self) {
        let mut state = self.state();
        state.end_sessions();
        state.topology.close();
    }

    /// The options in force. With a `mongodb+srv` connection string they
    /// include, once the first operation has looked them up, the seed list
    /// of the SRV record and the options of the TXT record.
    pub fn options(&self) -> ClientOptions {
        self.state().topology.options().clone()
    }

    /// The read/write defaults the client's options give its operations.
    pub(crate) fn defaults(&self) -> crate::coll::Defaults {
        let state = self.state();
        let options = state.topology.options();
        crate::coll::Defaults {
            read_preference: options.read_preference().cloned(),
            read_concern: options.read_concern().cloned(),
            write_concern: options.write_concern().cloned(),
            timeout: options.timeout(),
        }
    }

    /// The names of the deployment's databases (`listDatabases` with
    /// `nameOnly`, on the primary).
    pub fn list_database_names(&self) -> Result<Vec<String>> {
        let options = crate::coll_options::ListDatabasesOptions::default().name_only(true);
        let mut operation = crate::operation::ListDatabases::new(options);
        let inherited = self.defaults().timeout_only();
        let mut state = self.state();
        let executed = state.execute(&mut operation, None, inherited, Target::Select)?;
        state.check_in(executed.implicit_session);
        Ok(executed.output.into_iter().map(|d| d.name).collect())
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, ClientState> {
        // A panic in an event handler poisons the lock; the state itself is
        // left consistent between steps, so carry on with it.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

/// Builds a [`Client`] with an event handler or a server selector.
pub struct ClientBuilder {
    options: ClientOptions,
    handler: Option<Arc<dyn EventHandler>>,
    server_selector: Option<ServerSelector>,
    retry_settings: Option<RetrySettings>,
}

impl ClientBuilder {
    /// Reports SDAM and command events to `handler`, inline; the handler
    /// must not call back into the client.
    pub fn event_handler(mut self, handler: Arc<dyn EventHandler>) -> Self {
        self.handler = Some(handler);
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
            self.handler,
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
    /// What this handle overrides of the client's defaults.
    overrides: crate::coll::Defaults,
}

impl Database {
    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A handle to the collection `name`, whose documents are read and
    /// written as `T` (use [`bson::Document`] for untyped access).
    pub fn collection<T>(&self, name: &str) -> crate::coll::Collection<T>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        crate::coll::Collection::new(self.client.clone(), &self.name, name, self.defaults())
    }

    /// The client's defaults with this database's overrides on top: what
    /// every operation through this handle inherits.
    fn defaults(&self) -> crate::coll::Defaults {
        self.client.defaults().overridden_by(&self.overrides)
    }

    /// This handle with a default read preference for its collections.
    pub fn with_read_preference(mut self, read_preference: ReadPreference) -> Self {
        self.overrides.read_preference = Some(read_preference);
        self
    }

    /// This handle with a default read concern for its collections.
    pub fn with_read_concern(mut self, read_concern: crate::options::ReadConcern) -> Self {
        self.overrides.read_concern = Some(read_concern);
        self
    }

    /// This handle with a default write concern for its collections.
    pub fn with_write_concern(mut self, write_concern: crate::options::WriteConcern) -> Self {
        self.overrides.write_concern = Some(write_concern);
        self
    }

    /// This handle with `timeoutMS` for its collections' operations.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.overrides.timeout = Some(timeout);
        self
    }

    /// The client this database belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Creates collection `name` (the `create` command); an existing
    /// collection is an error from the server (`NamespaceExists`, 48).
    pub fn create_collection(
        &self,
        name: &str,
        options: impl Into<Option<crate::coll_options::CreateCollectionOptions>>,
    ) -> Result<()> {
        let mut operation = crate::operation::CreateCollection::new(
            self.name.clone(),
            name,
            options.into().unwrap_or_default(),
        );
        let defaults = self.defaults();
        let mut state = self.client.state();
        let executed = state.execute(&mut operation, None, defaults.inherited(), Target::Select)?;
        state.check_in(executed.implicit_session);
        Ok(())
    }

    /// Drops the database and all its collections (`dropDatabase`).
    pub fn drop(&self) -> Result<()> {
        self.run_command(bson::doc! { "dropDatabase": 1 })
            .map(|_| ())
    }

    /// The names of the database's collections and views
    /// (`listCollections` with `nameOnly`, read on the primary).
    pub fn list_collection_names(&self) -> Result<Vec<String>> {
        let options = crate::coll_options::ListCollectionsOptions::default().name_only(true);
        let mut operation = crate::operation::ListCollections::new(self.name.clone(), options);
        let inherited = self.defaults().timeout_only();
        let timeout = inherited.timeout;
        let executed = {
            let mut state = self.client.state();
            state.execute(&mut operation, None, inherited, Target::Select)?
        };
        let cursor: crate::cursor::Cursor<Document> = crate::cursor::Cursor::new(
            self.client.clone(),
            executed.output,
            executed.address,
            executed.generation,
            executed.implicit_session,
        )
        .with_timeout(timeout);
        cursor
            .map(|spec| {
                let spec = spec?;
                spec.get_str("name").map(str::to_string).map_err(|_| {
                    crate::error::Error::protocol(
                        None,
                        format!("a listCollections entry has no string `name`: {spec}"),
                    )
                })
            })
            .collect()
    }

    /// Runs a command on the primary (the client's default read preference
    /// does not apply to `runCommand`, as the server-selection spec says)
    /// and returns the reply. A reply with `ok: 0` is an error.
    pub fn run_command(&self, command: Document) -> Result<Document> {
        self.run_command_with(
            command,
            SelectionCriteria::ReadPreference(ReadPreference::primary()),
        )
    }

    /// Runs a command on a server chosen by `criteria`; the read preference
    /// is passed to the server as the spec says for the topology type.
    pub fn run_command_with(
        &self,
        command: Document,
        criteria: SelectionCriteria,
    ) -> Result<Document> {
        let mut operation = RunCommand::new(&self.name, command, criteria)?;
        let inherited = self.defaults().timeout_only();
        let mut state = self.client.state();
        let executed = state.execute(&mut operation, None, inherited, Target::Select)?;
        state.check_in(executed.implicit_session);
        Ok(executed.output)
    }
}
