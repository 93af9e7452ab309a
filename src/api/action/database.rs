//! The builders [`Database`]'s and [`Client`]'s operations return.

use std::marker::PhantomData;
use std::time::Duration;

use bson::{Bson, Document};

use super::{
    option_setters, session_setter, timeout_mode_setter, timeout_setter, ExplicitSession,
    ImplicitSession, ListNames, ListSpecifications,
};
use crate::api::client::{Client, Database};
use crate::api::client_session::ClientSession;
use crate::api::cursor::{Cursor, SessionCursor};
use crate::error::{Error, Result};
use crate::proto::coll_options::{
    ChangeStreamPreAndPostImages, ClusteredIndex, IndexOptionDefaults, TimeseriesOptions,
    ValidationAction, ValidationLevel,
};
use crate::proto::coll_options::{
    CreateCollectionOptions, CursorType, DropDatabaseOptions, ListCollectionsOptions,
    ListDatabasesOptions, RunCommandOptions, RunCursorCommandOptions,
};
use crate::proto::collation::Collation;
use crate::proto::collection_spec::CollectionSpecification;
use crate::proto::operation::{self, check_database_name, Operation};
use crate::proto::options::WriteConcern;
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::results::DatabaseSpecification;
use crate::proto::session::transaction::TransactionOptions;
use crate::proto::session::SessionOptions;
use crate::shell::exec::{Inherited, Target};
use std::borrow::Cow;

/// Declares `.timeout(..)` for a client's builder with a `timeout` field.
macro_rules! client_timeout_setter {
    () => {
        /// Sets this operation's `timeoutMS` (client-side operations
        /// timeout), overriding the client's; `Duration::ZERO` keeps CSOT's
        /// rules without a limit.
        pub fn timeout(mut self, timeout: Duration) -> Self {
            self.timeout = Some(timeout);
            self
        }
    };
}

/// Runs `op` in `session`, or in an implicit session that goes back to the
/// pool afterwards.
fn execute<Op: Operation>(
    client: &Client,
    op: &mut Op,
    inherited: Inherited<'_>,
    session: Option<&mut ClientSession>,
) -> Result<Op::Output> {
    let mut state = client.state()?;
    let executed = state.execute(
        op,
        session.map(|s| s.state_mut()),
        inherited,
        Target::Select,
    )?;
    state.check_in(executed.implicit_session);
    Ok(executed.output)
}

/// `run_command`: a command sent as given (plus the session, cluster time
/// and read preference), its reply returned. A reply with `ok: 0` is an
/// error.
#[must_use = "nothing is sent until `run`"]
pub struct RunCommand<'a> {
    db: Cow<'a, Database>,
    /// A raw command that is not valid BSON fails at `run`, as the official
    /// driver's does.
    command: Result<Document>,
    options: RunCommandOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> RunCommand<'a> {
    pub(crate) fn new(db: &'a Database, command: Document) -> Self {
        Self::of(db, Ok(command))
    }

    /// `run_raw_command`: the bytes are read with the reply reader's checks
    /// (every length, the nesting limit), so a malformed or hostile buffer
    /// is an error naming the command, never a panic.
    pub(crate) fn raw(db: &'a Database, command: &bson::RawDocumentBuf) -> Self {
        let command = crate::proto::raw_walk::to_document(command.as_bytes())
            .map_err(|problem| Error::invalid_argument(format!("the raw command: {problem}")));
        Self::of(db, command)
    }

    fn of(db: &'a Database, command: Result<Document>) -> Self {
        RunCommand {
            db: Cow::Borrowed(db),
            command,
            options: RunCommandOptions::default(),
            session: None,
        }
    }

    /// Sets every option at once, replacing any set on this builder before.
    pub fn with_options(mut self, options: impl Into<Option<RunCommandOptions>>) -> Self {
        self.options = options.into().unwrap_or_default();
        self
    }

    /// Where to run it: the primary unless set (the client's default read
    /// preference does not apply to `runCommand`, as the server-selection
    /// spec says). The read preference is passed to the server as the spec
    /// says for the topology type.
    pub fn selection_criteria(mut self, criteria: impl Into<SelectionCriteria>) -> Self {
        self.options.selection_criteria = Some(criteria.into());
        self
    }

    session_setter!();
    timeout_setter!(db);

    /// Sends the command and returns the reply.
    pub fn run(self) -> Result<Document> {
        check_database_name(self.db.name())?;
        let mut op = operation::RunCommand::new(
            self.db.name(),
            self.command?,
            self.options.selection_criteria.map(Into::into),
        )?;
        let inherited = self.db.defaults().timeout_only();
        execute(self.db.client(), &mut op, inherited, self.session)
    }
}

/// `run_cursor_command`: a cursor-opening command sent as given, its reply
/// a [`Cursor`] (or with `.session(..)` a [`SessionCursor`]) whose
/// `getMore`s the options shape. A reply without a cursor is an error.
#[must_use = "nothing is sent until `run`"]
pub struct RunCursorCommand<'a, S = ImplicitSession> {
    db: Cow<'a, Database>,
    /// A raw command that is not valid BSON fails at `run`.
    command: Result<Document>,
    options: RunCursorCommandOptions,
    session: S,
}

impl<'a> RunCursorCommand<'a> {
    pub(crate) fn new(db: &'a Database, command: Document) -> Self {
        RunCursorCommand {
            db: Cow::Borrowed(db),
            command: Ok(command),
            options: RunCursorCommandOptions::default(),
            session: ImplicitSession,
        }
    }

    /// `run_raw_cursor_command`: the bytes read with the reply reader's
    /// checks, as [`RunCommand`]'s raw form.
    pub(crate) fn raw(db: &'a Database, command: &bson::RawDocumentBuf) -> Self {
        let mut action = Self::new(db, Document::new());
        action.command = crate::proto::raw_walk::to_document(command.as_bytes())
            .map_err(|problem| Error::invalid_argument(format!("the raw command: {problem}")));
        action
    }

    /// Runs the command in `session`; every `getMore` uses it too.
    pub fn session<'s>(
        self,
        session: &'s mut ClientSession,
    ) -> RunCursorCommand<'a, ExplicitSession<'s>> {
        RunCursorCommand {
            db: self.db,
            command: self.command,
            options: self.options,
            session: ExplicitSession(session),
        }
    }

    /// Sends the command and returns its cursor.
    pub fn run(self) -> Result<Cursor<Document>> {
        self.db.open_cursor(self.operation()?)
    }
}

impl<S> RunCursorCommand<'_, S> {
    timeout_setter!(db);
    timeout_mode_setter!(db);

    option_setters!(RunCursorCommandOptions {
        selection_criteria: SelectionCriteria,
        cursor_type: CursorType,
        batch_size: u32,
        max_time: Duration,
        comment: Bson,
    });

    fn operation(&self) -> Result<operation::RunCursorCommand> {
        check_database_name(self.db.name())?;
        operation::RunCursorCommand::new(
            self.db.name(),
            self.command.clone()?,
            self.options.clone(),
        )
    }
}

impl RunCursorCommand<'_, ExplicitSession<'_>> {
    /// Sends the command in the session and returns its cursor.
    pub fn run(self) -> Result<SessionCursor<Document>> {
        let op = self.operation()?;
        let ExplicitSession(session) = self.session;
        self.db.open_session_cursor(op, session)
    }
}

/// `create_collection`.
#[must_use = "nothing is sent until `run`"]
pub struct CreateCollection<'a> {
    db: Cow<'a, Database>,
    name: String,
    options: CreateCollectionOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> CreateCollection<'a> {
    pub(crate) fn new(db: &'a Database, name: &str) -> Self {
        CreateCollection {
            db: Cow::Borrowed(db),
            name: name.to_string(),
            options: CreateCollectionOptions::default(),
            session: None,
        }
    }

    option_setters!(CreateCollectionOptions {
        capped: bool,
        size: u64,
        max: u64,
        storage_engine: Document,
        validator: Document,
        validation_level: ValidationLevel,
        validation_action: ValidationAction,
        view_on: String,
        pipeline: Vec<Document>,
        collation: Collation,
        write_concern: WriteConcern,
        index_option_defaults: IndexOptionDefaults,
        timeseries: TimeseriesOptions,
        expire_after_seconds: Duration,
        change_stream_pre_and_post_images: ChangeStreamPreAndPostImages,
        clustered_index: ClusteredIndex,
        comment: Bson,
    });
    session_setter!();
    timeout_setter!(db);

    /// Creates the collection; an existing one is an error from the server
    /// (`NamespaceExists`, 48).
    pub fn run(self) -> Result<()> {
        operation::Namespace::new(self.db.name(), self.name.as_str()).check()?;
        let mut op = operation::CreateCollection::new(self.db.name(), &self.name, self.options);
        let defaults = self.db.defaults();
        execute(
            self.db.client(),
            &mut op,
            defaults.inherited(),
            self.session,
        )
    }
}

/// `drop` of a database.
#[must_use = "nothing is sent until `run`"]
pub struct DropDatabase<'a> {
    db: Cow<'a, Database>,
    options: DropDatabaseOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> DropDatabase<'a> {
    pub(crate) fn new(db: &'a Database) -> Self {
        DropDatabase {
            db: Cow::Borrowed(db),
            options: DropDatabaseOptions::default(),
            session: None,
        }
    }

    option_setters!(DropDatabaseOptions {
        write_concern: WriteConcern,
    });
    session_setter!();
    timeout_setter!(db);

    /// Drops the database and all its collections (`dropDatabase`).
    pub fn run(self) -> Result<()> {
        check_database_name(self.db.name())?;
        let mut command = bson::doc! { "dropDatabase": 1 };
        if let Some(write_concern) = self
            .options
            .write_concern
            .as_ref()
            .and_then(crate::proto::session::transaction::write_concern_document)
        {
            command.insert("writeConcern", write_concern);
        }
        let mut op = operation::RunCommand::new(
            self.db.name(),
            command,
            Some(crate::proto::select::Criteria::primary_read()),
        )?;
        let inherited = self.db.defaults().timeout_only();
        execute(self.db.client(), &mut op, inherited, self.session).map(|_| ())
    }
}

/// `list_collections` (mode [`ListSpecifications`], the default: a
/// [`Cursor`] over the collections' specifications, or with `.session(..)`
/// a [`SessionCursor`]) and `list_collection_names` (mode [`ListNames`]:
/// the names).
#[must_use = "nothing is sent until `run`"]
pub struct ListCollections<'a, M = ListSpecifications, S = ImplicitSession> {
    db: Cow<'a, Database>,
    options: ListCollectionsOptions,
    session: S,
    mode: PhantomData<M>,
}

impl<'a, M> ListCollections<'a, M> {
    pub(crate) fn new(db: &'a Database) -> Self {
        ListCollections {
            db: Cow::Borrowed(db),
            options: ListCollectionsOptions::default(),
            session: ImplicitSession,
            mode: PhantomData,
        }
    }

    /// Lists in `session`: a [`SessionCursor`] (iterated with the session),
    /// or the names.
    pub fn session<'s>(
        self,
        session: &'s mut ClientSession,
    ) -> ListCollections<'a, M, ExplicitSession<'s>> {
        ListCollections {
            db: self.db,
            options: self.options,
            session: ExplicitSession(session),
            mode: PhantomData,
        }
    }
}

impl<M, S> ListCollections<'_, M, S> {
    timeout_setter!(db);

    option_setters!(ListCollectionsOptions {
        batch_size: u32,
        filter: Document,
        authorized_collections: bool,
        comment: Bson,
        raw_data: bool,
    });
}

impl<S> ListCollections<'_, ListSpecifications, S> {
    timeout_mode_setter!(db);
}

impl ListCollections<'_> {
    /// Lists the collections.
    pub fn run(self) -> Result<Cursor<CollectionSpecification>> {
        check_database_name(self.db.name())?;
        self.db.open_cursor(operation::ListCollections::new(
            self.db.name(),
            self.options,
        ))
    }
}

impl ListCollections<'_, ListSpecifications, ExplicitSession<'_>> {
    /// Lists the collections in the session.
    pub fn run(self) -> Result<SessionCursor<CollectionSpecification>> {
        let ExplicitSession(session) = self.session;
        check_database_name(self.db.name())?;
        let op = operation::ListCollections::new(self.db.name(), self.options);
        self.db.open_session_cursor(op, session)
    }
}

impl ListCollections<'_, ListNames> {
    /// The names of the database's collections and views
    /// (`listCollections` with `nameOnly`, read on the primary).
    pub fn run(self) -> Result<Vec<String>> {
        collection_names(&self.db, self.options, None)
    }
}

impl ListCollections<'_, ListNames, ExplicitSession<'_>> {
    /// The names of the database's collections and views, listed in the
    /// session.
    pub fn run(self) -> Result<Vec<String>> {
        collection_names(&self.db, self.options, Some(self.session.0))
    }
}

/// `listCollections` with `nameOnly`, on the primary (the names are the
/// deployment's, not a secondary's possibly older view).
fn collection_names(
    db: &Database,
    options: ListCollectionsOptions,
    session: Option<&mut ClientSession>,
) -> Result<Vec<String>> {
    check_database_name(db.name())?;
    let mut op = operation::ListCollections::new(db.name(), options.name_only(true));
    let client = db.client();
    let inherited = db.defaults().timeout_only();
    let specs: Vec<Document> = match session {
        None => crate::api::coll::open_cursor(client, &mut op, inherited, None)?
            .collect::<Result<_>>()?,
        Some(session) => {
            let mut cursor: SessionCursor<Document> =
                crate::api::coll::open_session_cursor(client, &mut op, inherited, None, session)?;
            cursor.iter(session).collect::<Result<_>>()?
        }
    };
    specs
        .iter()
        .map(|spec| {
            spec.get_str("name").map(str::to_string).map_err(|_| {
                Error::protocol(
                    None,
                    format!("a listCollections entry has no string `name`: {spec}"),
                )
            })
        })
        .collect()
}

/// `list_databases` (mode [`ListSpecifications`], the default: the
/// deployment's databases with their sizes) and `list_database_names` (mode
/// [`ListNames`]: the names); both on the primary.
#[must_use = "nothing is sent until `run`"]
pub struct ListDatabases<'a, M = ListSpecifications> {
    client: &'a Client,
    options: ListDatabasesOptions,
    session: Option<&'a mut ClientSession>,
    timeout: Option<Duration>,
    mode: PhantomData<M>,
}

impl<'a, M> ListDatabases<'a, M> {
    pub(crate) fn new(client: &'a Client) -> Self {
        ListDatabases {
            client,
            options: ListDatabasesOptions::default(),
            session: None,
            timeout: None,
            mode: PhantomData,
        }
    }

    option_setters!(ListDatabasesOptions {
        filter: Document,
        authorized_databases: bool,
        comment: Bson,
    });
    session_setter!();
    client_timeout_setter!();

    /// `listDatabases`; with `name_only`, `nameOnly: true` (else the
    /// user's options as set).
    fn list(self, name_only: bool) -> Result<Vec<DatabaseSpecification>> {
        let options = match name_only {
            true => self.options.name_only(true),
            false => self.options,
        };
        let mut op = operation::ListDatabases::new(options);
        let defaults = self.client.defaults().with_operation_timeout(self.timeout);
        let inherited = defaults.timeout_only();
        execute(self.client, &mut op, inherited, self.session)
    }
}

impl ListDatabases<'_> {
    /// Lists the databases with their sizes.
    pub fn run(self) -> Result<Vec<DatabaseSpecification>> {
        self.list(false)
    }
}

impl ListDatabases<'_, ListNames> {
    /// The names of the deployment's databases (`listDatabases` with
    /// `nameOnly`).
    pub fn run(self) -> Result<Vec<String>> {
        Ok(self.list(true)?.into_iter().map(|d| d.name).collect())
    }
}

/// `start_session`.
#[must_use = "nothing happens until `run`"]
pub struct StartSession<'a> {
    client: &'a Client,
    options: SessionOptions,
}

impl<'a> StartSession<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        StartSession {
            client,
            options: SessionOptions::default(),
        }
    }

    /// Sets every option at once, replacing any set on this builder before.
    pub fn with_options(mut self, options: impl Into<Option<SessionOptions>>) -> Self {
        self.options = options.into().unwrap_or_default();
        self
    }

    /// Causally consistent reads and writes (the default unless `snapshot`).
    pub fn causal_consistency(mut self, value: bool) -> Self {
        self.options.causal_consistency = Some(value);
        self
    }

    /// Snapshot reads: every read sees the data as of the first read's time.
    pub fn snapshot(mut self, value: bool) -> Self {
        self.options.snapshot = Some(value);
        self
    }

    /// The snapshot a snapshot session reads from (`atClusterTime`);
    /// without `snapshot(true)` it is an error when the session starts.
    pub fn snapshot_time(mut self, value: bson::Timestamp) -> Self {
        self.options.snapshot_time = Some(value);
        self
    }

    /// Options for transactions started without their own.
    pub fn default_transaction_options(mut self, value: TransactionOptions) -> Self {
        self.options.default_transaction_options = Some(value);
        self
    }

    /// The `timeoutMS` of the session's own operations (commit, abort,
    /// `and_run`) when they set none: CSOT's `defaultTimeoutMS`, else the
    /// client's.
    pub fn default_timeout(mut self, value: Duration) -> Self {
        self.options.default_timeout = Some(value);
        self
    }

    /// Starts the session (no I/O: the server learns of it with its first
    /// command). Refuses causal consistency together with snapshot reads.
    pub fn run(self) -> Result<ClientSession> {
        ClientSession::start(self.client, self.options)
    }
}

/// `client.shutdown()`; done by `run`.
#[must_use = "nothing happens until `run`"]
pub struct Shutdown {
    client: Client,
}

impl Shutdown {
    pub(crate) fn new(client: Client) -> Self {
        Shutdown { client }
    }

    /// Whether to skip waiting for resources still in use. Here the
    /// shutdown never waits, so both settings behave alike.
    pub fn immediate(self, value: bool) -> Self {
        let _ = value;
        self
    }

    /// Shuts the client down: its sockets close, and every clone of it
    /// fails from now on with [`ErrorKind::Shutdown`](crate::error::ErrorKind::Shutdown).
    pub fn run(self) {
        self.client.shut_down();
    }
}

/// `client.warm_connection_pool()`; done by `run`.
#[must_use = "nothing happens until `run`"]
pub struct WarmConnectionPool<'a> {
    client: &'a Client,
}

impl<'a> WarmConnectionPool<'a> {
    pub(crate) fn new(client: &'a Client) -> Self {
        WarmConnectionPool { client }
    }

    /// Opens the sockets; an error is left for the first operation to meet.
    pub fn run(self) {
        let _ = self
            .client
            .database("admin")
            .run_command(bson::doc! { "ping": 1 })
            .run();
    }
}
