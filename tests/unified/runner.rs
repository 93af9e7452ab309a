//! Runs one unified-format test: requirements, initial data, entities,
//! operations with their expected results and errors, fail points, the
//! expected events and the outcome.
//!
//! Anything the runner or the driver does not support ends the test as a
//! skip with a reason ([`Failure::Skip`]), never as a silent pass.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Bson, Document};
use mongo_inline::action;
use mongo_inline::event::command::CommandEvent;
use mongo_inline::event::sdam::{SdamEvent, TopologyDescription};
use mongo_inline::options::{
    AggregateOptions, CountOptions, CreateCollectionOptions, DeleteOptions, DistinctOptions,
    EstimatedDocumentCountOptions, FindOneAndDeleteOptions, FindOneAndReplaceOptions,
    FindOneAndUpdateOptions, FindOptions, Hint, IndexModel, InsertManyOptions, InsertOneOptions,
    ReplaceOptions, ReturnDocument, RunCursorCommandOptions, UpdateOptions,
};
use mongo_inline::options::{ReadConcern, TimeoutMode};
use mongo_inline::results::WriteFailure;
use mongo_inline::{Client, ClientOptions, ClientSession, Collection, Database, ErrorKind};

use super::events;
use super::logs;
// GridFS lives apart (another helper edits this file); a child module so
// it shares `Args` and `Outcome`.
#[path = "gridfs.rs"]
mod gridfs;
// Change streams too, for the same reason.
#[path = "change_streams.rs"]
mod change_streams;
// The client bulk write likewise.
#[path = "bulk_write.rs"]
mod bulk_write;
use super::matching::{exactly, expect_result, matches, Entities};
use crate::support::events::Recorder;

/// Why a test did not pass.
#[derive(Debug)]
pub enum Failure {
    /// The test needs something the runner or driver does not do.
    Skip(String),
    /// The test ran and an assertion failed (or the runner refused the
    /// file: an undefined entity, a malformed argument).
    Fail(String),
    /// The test panicked or hung: never the failure a valid-fail test
    /// expects.
    Broken(String),
}

impl From<&str> for Failure {
    fn from(s: &str) -> Self {
        Failure::Fail(s.to_string())
    }
}

impl From<String> for Failure {
    fn from(s: String) -> Self {
        Failure::Fail(s)
    }
}

type Outcome<T = ()> = Result<T, Failure>;

fn skip<T>(reason: impl Into<String>) -> Outcome<T> {
    Err(Failure::Skip(reason.into()))
}

fn fail<T>(reason: impl Into<String>) -> Outcome<T> {
    Err(Failure::Fail(reason.into()))
}

/// A typed option (`timeseries`, `clusteredIndex`, ...) read from the
/// test's document by its serde form, as the official driver's runner does.
fn from_spec_document<T: serde::de::DeserializeOwned>(value: Document, what: &str) -> Outcome<T> {
    bson::from_document(value).map_err(|e| Failure::Fail(format!("{what}: {e}")))
}

/// Why the tests with thread entities do not run. The format spec has no
/// rule for drivers without concurrent operations; every such test here is
/// about a connection pool under concurrent checkouts (interruptInUse pool
/// clears, PoolClearedError, a stale error from an older pool generation,
/// a wait queue timeout), which the CMAP spec's scope leaves out.
const THREADS_RULE: &str = "single-threaded: unified-test-format.md: \"Thread entities MUST be able to run concurrently with the main test runner thread and other thread entities\", and this driver runs one operation at a time per client, so a thread's operations cannot overlap (run in turn, the concurrent pool checkouts these tests are about never happen); connection-monitoring-and-pooling.md: \"This specification does not apply to drivers that do not support multitasking.\"";

/// The deployment a test runs against.
pub struct Deployment {
    /// "single", "replicaset", "sharded" or "load-balanced".
    pub topology: &'static str,
    /// The connection string of the deployment (one mongos when sharded).
    pub uri: String,
    /// For a sharded deployment, the connection string naming every mongos
    /// (a client with `useMultipleMongoses: true`).
    pub multi_uri: Option<String>,
    /// A client for the runner's own commands (initial data, fail points).
    pub internal: Client,
}

struct ClientEntity {
    /// `None` once the test closed it: the driver publishes the topology's
    /// closing events when the last clone of a client drops.
    client: Option<Client>,
    recorder: Arc<Recorder>,
    observe: Vec<String>,
    ignore: Vec<String>,
    observe_sensitive: bool,
    /// Indices (in the recorder's command events) of the runner's own
    /// configureFailPoint commands, which the test does not observe.
    runner_events: Vec<std::ops::Range<usize>>,
    /// `observeLogMessages`: the components and their least severe level.
    observe_logs: Vec<(String, log::LevelFilter)>,
}

impl ClientEntity {
    fn live(&self) -> Outcome<&Client> {
        self.client
            .as_ref()
            .ok_or_else(|| Failure::Fail("the client entity was closed".into()))
    }
}

enum Entity {
    Client(Box<ClientEntity>),
    Database(Database),
    Collection(Collection<Document>),
    Bucket(mongo_inline::gridfs::GridFsBucket),
    /// A cursor (`createFindCursor`, `createCommandCursor`), iterated by
    /// the test, and its client entity's name.
    Cursor(Box<CursorEntity>, String),
    /// A change stream (`createChangeStream`) and its client entity's name.
    ChangeStream(change_streams::Stream, String),
    /// The session (taken out while an operation uses it), its lsid and
    /// its client entity's name.
    Session(Option<Box<ClientSession>>, Document, String),
    /// A client's topology description, as `recordTopologyDescription`
    /// found it.
    Topology(Box<TopologyDescription>),
    Value(Bson),
}

/// A `createFindCursor` or `createCommandCursor` cursor: without a
/// session, or opened in a session entity (named here) and iterated with
/// it.
enum CursorEntity {
    Plain(mongo_inline::Cursor<Document>),
    InSession(mongo_inline::SessionCursor<Document>, String),
}

impl CursorEntity {
    /// The server's cursor id, 0 once the server has closed it.
    fn id(&self) -> i64 {
        match self {
            CursorEntity::Plain(c) => c.id(),
            CursorEntity::InSession(c, _) => c.id(),
        }
    }

    /// The session entity the cursor belongs to, if any.
    fn session_name(&self) -> Option<&str> {
        match self {
            CursorEntity::Plain(_) => None,
            CursorEntity::InSession(_, name) => Some(name),
        }
    }

    /// `iterateOnce`: at most one getMore.
    fn try_next(&mut self, session: Option<&mut ClientSession>) -> Outcome<DriverResult> {
        let next = match (self, session) {
            (CursorEntity::Plain(c), _) => c.next_if_any(),
            (CursorEntity::InSession(c, _), Some(s)) => c.next_if_any(s),
            (CursorEntity::InSession(_, name), None) => {
                return fail(format!("the cursor's session {name:?} is not at hand"))
            }
        };
        // An empty batch from a live cursor is no document and no failure.
        Ok(next.map(|d| d.map_or(Bson::Null, Bson::Document)))
    }

    /// `iterateUntilDocumentOrError`: `None` once the cursor is exhausted.
    fn next(&mut self, session: Option<&mut ClientSession>) -> Outcome<Option<DriverResult>> {
        let next = match (self, session) {
            (CursorEntity::Plain(c), _) => c.next(),
            (CursorEntity::InSession(c, _), Some(s)) => c.next(s),
            (CursorEntity::InSession(_, name), None) => {
                return fail(format!("the cursor's session {name:?} is not at hand"))
            }
        };
        Ok(next.map(|d| d.map(Bson::Document)))
    }

    /// `close`, within the operation's own `timeoutMS` when it sets one
    /// (CSOT), else the cursor's, afresh.
    fn close(self, timeout: Option<Duration>) {
        match (self, timeout) {
            (CursorEntity::Plain(c), Some(t)) => c.close_with_timeout(t),
            (CursorEntity::InSession(c, _), Some(t)) => c.close_with_timeout(t),
            (cursor, None) => drop(cursor),
        }
    }
}

struct EntityMap(HashMap<String, Entity>);

impl Entities for EntityMap {
    fn value(&self, name: &str) -> Option<Bson> {
        match self.0.get(name)? {
            Entity::Value(v) => Some(v.clone()),
            Entity::Session(_, lsid, _) => Some(Bson::Document(lsid.clone())),
            _ => None,
        }
    }

    fn session_lsid(&self, name: &str) -> Option<Document> {
        match self.0.get(name)? {
            Entity::Session(_, lsid, _) => Some(lsid.clone()),
            _ => None,
        }
    }
}

/// The arguments of an operation, consumed as they are understood; what is
/// left over at the end is an argument the runner does not support.
struct Args {
    operation: String,
    rest: Document,
}

impl Args {
    fn take(&mut self, key: &str) -> Option<Bson> {
        self.rest.remove(key)
    }

    fn doc(&mut self, key: &str) -> Outcome<Option<Document>> {
        match self.take(key) {
            None => Ok(None),
            Some(Bson::Document(d)) => Ok(Some(d)),
            Some(other) => fail(format!(
                "{}: {key} is not a document: {other}",
                self.operation
            )),
        }
    }

    fn collation(&mut self) -> Outcome<Option<mongo_inline::options::Collation>> {
        match self.doc("collation")? {
            None => Ok(None),
            Some(d) => match bson::from_document(d) {
                Ok(collation) => Ok(Some(collation)),
                Err(e) => fail(format!("{}: collation: {e}", self.operation)),
            },
        }
    }

    fn required_doc(&mut self, key: &str) -> Outcome<Document> {
        self.doc(key)?
            .ok_or_else(|| Failure::Fail(format!("{}: missing {key}", self.operation)))
    }

    fn docs(&mut self, key: &str) -> Outcome<Option<Vec<Document>>> {
        match self.take(key) {
            None => Ok(None),
            Some(Bson::Array(a)) => a
                .into_iter()
                .map(|b| match b {
                    Bson::Document(d) => Ok(d),
                    other => fail(format!("{}: {key} holds {other}", self.operation)),
                })
                .collect::<Outcome<Vec<_>>>()
                .map(Some),
            Some(other) => fail(format!(
                "{}: {key} is not an array: {other}",
                self.operation
            )),
        }
    }

    fn bool(&mut self, key: &str) -> Outcome<Option<bool>> {
        match self.take(key) {
            None => Ok(None),
            Some(Bson::Boolean(b)) => Ok(Some(b)),
            Some(other) => self.mistyped(key, "a boolean", &other),
        }
    }

    fn int(&mut self, key: &str) -> Outcome<Option<i64>> {
        match self.take(key) {
            None => Ok(None),
            Some(Bson::Int32(i)) => Ok(Some(i64::from(i))),
            Some(Bson::Int64(i)) => Ok(Some(i)),
            Some(Bson::Double(d)) if d.fract() == 0.0 && d.abs() < 2f64.powi(53) => {
                Ok(Some(d as i64))
            }
            Some(other) => self.mistyped(key, "an integer", &other),
        }
    }

    fn hint(&mut self) -> Outcome<Option<Hint>> {
        match self.take("hint") {
            None => Ok(None),
            Some(Bson::String(s)) => Ok(Some(Hint::Name(s))),
            Some(Bson::Document(d)) => Ok(Some(Hint::Keys(d))),
            Some(other) => self.mistyped("hint", "a string or a document", &other),
        }
    }

    fn millis(&mut self, key: &str) -> Outcome<Option<Duration>> {
        match self.int(key)? {
            Some(ms) if ms < 0 => fail(format!("{}: {key} {ms} is negative", self.operation)),
            Some(ms) => Ok(Some(Duration::from_millis(ms as u64))),
            None => Ok(None),
        }
    }

    /// An argument of the wrong type is the test's error, never dropped.
    fn mistyped<T>(&self, key: &str, wanted: &str, found: &Bson) -> Outcome<T> {
        fail(format!(
            "{}: argument {key} must be {wanted}, found {found}",
            self.operation
        ))
    }

    fn done(&self) -> Outcome {
        match self.rest.keys().next() {
            None => Ok(()),
            Some(key) => skip(format!(
                "argument {key:?} of {} not supported by the runner",
                self.operation
            )),
        }
    }
}

/// Runs unified tests against one deployment, holding the file's entities.
pub struct TestRun<'a> {
    deployment: &'a Deployment,
    entities: EntityMap,
    /// The cursor the last `createFindCursor` or `createCommandCursor`
    /// opened (and its client entity's name), until `saveResultAsEntity`
    /// names it.
    opened_cursor: Option<(Box<CursorEntity>, String)>,
    /// The change stream the last `createChangeStream` opened, until
    /// `saveResultAsEntity` names it.
    opened_stream: Option<(change_streams::Stream, String)>,
    /// The client entity of each database and collection entity.
    owners: HashMap<String, String>,
    /// Fail points to turn off at the end: (command, client used).
    fail_points: Vec<(String, Client)>,
    /// The longest `blockTimeMS` of this test's fail points, and when an
    /// operation last gave up waiting (a timeout): the command it left the
    /// server holding must finish before the next test's initial data, or
    /// its write lands there.
    blocked_for: Duration,
    gave_up_at: Option<std::time::Instant>,
    /// URI options every client entity gets unless its `uriOptions` set
    /// them (the published client-backpressure policy for that suite).
    default_uri_options: Vec<(String, String)>,
    /// A lowered minHeartbeatFrequencyMS for client entities whose
    /// `uriOptions` do not set heartbeatFrequencyMS.
    min_heartbeat_frequency: Option<Duration>,
    /// Set when the runner gave up waiting for this test: its thread then
    /// stops at the next operation instead of running on beside the tests
    /// after it.
    abandoned: Arc<AtomicBool>,
}

impl<'a> TestRun<'a> {
    /// A run with no entities yet.
    pub fn new(deployment: &'a Deployment) -> Self {
        TestRun {
            deployment,
            entities: EntityMap(HashMap::new()),
            opened_cursor: None,
            opened_stream: None,
            owners: HashMap::new(),
            fail_points: Vec::new(),
            blocked_for: Duration::ZERO,
            gave_up_at: None,
            default_uri_options: Vec::new(),
            min_heartbeat_frequency: None,
            abandoned: Arc::default(),
        }
    }

    /// Gives client entities a minHeartbeatFrequencyMS of `interval`,
    /// which unified-test-format.md allows for a test that sets fail
    /// points, but not for a client whose `uriOptions` set
    /// heartbeatFrequencyMS.
    pub fn with_min_heartbeat_frequency(mut self, interval: Duration) -> Self {
        self.min_heartbeat_frequency = Some(interval);
        self
    }

    /// The flag that tells this run to stop at its next operation.
    pub fn abandon_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.abandoned)
    }

    /// Gives every client entity `name=value` unless its `uriOptions` set
    /// `name`.
    pub fn with_default_uri_option(mut self, name: &str, value: &str) -> Self {
        self.default_uri_options
            .push((name.to_string(), value.to_string()));
        self
    }

    /// Runs one test of `file`: initial data, entities, operations, events,
    /// outcome; fail points are turned off whatever happens.
    pub fn run_test(&mut self, file: &Document, test: &Document) -> Outcome {
        let result = self.run_test_inner(file, test);
        for (name, client) in self.fail_points.drain(..) {
            let _ = client
                .database("admin")
                .run_command(doc! { "configureFailPoint": name, "mode": "off" })
                .run();
        }
        logs::stop_observing();
        let blocked_for = std::mem::take(&mut self.blocked_for);
        if let Some(at) = self.gave_up_at.take() {
            std::thread::sleep(blocked_for.saturating_sub(at.elapsed()));
        }
        // Sessions end before their clients close.
        self.entities
            .0
            .retain(|_, e| !matches!(e, Entity::Session(..)));
        self.entities.0.clear();
        self.owners.clear();
        self.opened_cursor = None;
        result
    }

    fn run_test_inner(&mut self, file: &Document, test: &Document) -> Outcome {
        let _ = self
            .deployment
            .internal
            .database("admin")
            .run_command(doc! { "killAllSessions": [] })
            .run();
        if let Ok(initial) = file.get_array("initialData") {
            self.load_initial_data(initial)?;
        }
        if let Ok(entities) = file.get_array("createEntities") {
            self.create_entities(entities)?;
        }
        let operations = test.get_array("operations").map_err(|e| e.to_string())?;
        for (i, operation) in operations.iter().enumerate() {
            if self.abandoned.load(Ordering::Relaxed) {
                return Err(Failure::Broken(format!(
                    "abandoned by the runner before operation {i}"
                )));
            }
            let operation = operation
                .as_document()
                .ok_or("operation is not a document")?;
            self.run_operation(operation).map_err(|f| match f {
                Failure::Fail(m) => Failure::Fail(format!(
                    "operation {i} ({}): {m}",
                    operation.get_str("name").unwrap_or("?")
                )),
                skip => skip,
            })?;
        }
        // A CMAP block cannot be checked (this driver has no pool), but
        // everything else is: a failure there fails the test, which is a
        // skip only when all that could be checked held.
        let mut unchecked_cmap = None;
        if let Ok(expected) = test.get_array("expectEvents") {
            unchecked_cmap = self.check_events(expected)?;
        }
        if let Ok(expected) = test.get_array("expectLogMessages") {
            self.check_logs(expected)?;
        }
        if let Ok(outcome) = test.get_array("outcome") {
            self.check_outcome(outcome)?;
        }
        match unchecked_cmap {
            Some(reason) => skip(reason),
            None => Ok(()),
        }
    }

    fn load_initial_data(&self, initial: &[Bson]) -> Outcome {
        for data in initial {
            let data = data.as_document().ok_or("initialData entry")?;
            let db_name = data.get_str("databaseName").map_err(|e| e.to_string())?;
            let coll_name = data.get_str("collectionName").map_err(|e| e.to_string())?;
            let db = self.deployment.internal.database(db_name);
            let _ = db
                .run_command(doc! { "drop": coll_name, "writeConcern": { "w": "majority" } })
                .run();
            let mut create = doc! { "create": coll_name, "writeConcern": { "w": "majority" } };
            if let Ok(options) = data.get_document("createOptions") {
                create.extend(options.clone());
            }
            db.run_command(create)
                .run()
                .map_err(|e| format!("initialData: create {db_name}.{coll_name}: {e}"))?;
            let documents = data.get_array("documents").map_err(|e| e.to_string())?;
            if !documents.is_empty() {
                db.run_command(doc! {
                    "insert": coll_name,
                    "documents": documents.clone(),
                    "writeConcern": { "w": "majority" },
                })
                .run()
                .map_err(|e| format!("initialData: insert into {db_name}.{coll_name}: {e}"))?;
            }
        }
        Ok(())
    }

    fn create_entities(&mut self, entities: &[Bson]) -> Outcome {
        for entity in entities {
            let entity = entity.as_document().ok_or("entity is not a document")?;
            let (kind, spec) = entity.iter().next().ok_or("empty entity")?;
            let spec = spec.as_document().ok_or("entity spec is not a document")?;
            let id = spec.get_str("id").map_err(|e| e.to_string())?.to_string();
            let created = match kind.as_str() {
                "client" => Entity::Client(Box::new(self.create_client(spec)?)),
                "database" => {
                    let owner = spec.get_str("client").unwrap_or_default().to_string();
                    self.owners.insert(id.clone(), owner);
                    let client = self.client(spec.get_str("client").unwrap_or_default())?;
                    let name = spec.get_str("databaseName").unwrap_or("");
                    let mut db = client.live()?.database(name);
                    if let Ok(options) = spec.get_document("databaseOptions") {
                        let handle = concerns(options, "databaseOptions")?;
                        let options = mongo_inline::options::DatabaseOptions::builder()
                            .selection_criteria(handle.read_preference.map(Into::into))
                            .read_concern(handle.read_concern)
                            .write_concern(handle.write_concern)
                            .build();
                        db = client.live()?.database_with_options(name, options);
                        if let Some(timeout) = handle.timeout {
                            db = db.with_timeout(timeout);
                        }
                    }
                    Entity::Database(db)
                }
                "collection" => {
                    let database = spec.get_str("database").unwrap_or_default();
                    let owner = self.owners.get(database).cloned().unwrap_or_default();
                    self.owners.insert(id.clone(), owner);
                    let db = self.database(database)?;
                    let name = spec.get_str("collectionName").unwrap_or("");
                    let mut coll = db.collection::<Document>(name);
                    if let Ok(options) = spec.get_document("collectionOptions") {
                        let handle = concerns(options, "collectionOptions")?;
                        let options = mongo_inline::options::CollectionOptions::builder()
                            .selection_criteria(handle.read_preference.map(Into::into))
                            .read_concern(handle.read_concern)
                            .write_concern(handle.write_concern)
                            .build();
                        coll = db.collection_with_options::<Document>(name, options);
                        if let Some(timeout) = handle.timeout {
                            coll = coll.with_timeout(timeout);
                        }
                    }
                    Entity::Collection(coll)
                }
                "session" => {
                    let client_name = spec.get_str("client").unwrap_or_default().to_string();
                    let client = self.client(&client_name)?;
                    let mut options = mongo_inline::options::SessionOptions::default();
                    if let Ok(session_options) = spec.get_document("sessionOptions") {
                        for (key, value) in session_options {
                            match key.as_str() {
                                "causalConsistency" => options.causal_consistency = value.as_bool(),
                                "snapshot" => options.snapshot = value.as_bool(),
                                "defaultTimeoutMS" => {
                                    let ms =
                                        value.as_i64().or_else(|| value.as_i32().map(i64::from));
                                    let ms = ms.ok_or("sessionOptions.defaultTimeoutMS")?;
                                    options.default_timeout =
                                        Some(Duration::from_millis(ms.max(0) as u64));
                                }
                                // The name of an entity a getSnapshotTime saved.
                                "snapshotTime" => {
                                    let saved =
                                        value.as_str().ok_or("snapshotTime: an entity name")?;
                                    match self.entities.value(saved) {
                                        Some(Bson::Timestamp(t)) => options.snapshot_time = Some(t),
                                        other => return fail(format!("snapshotTime: entity {saved:?} is {other:?}, not a timestamp")),
                                    }
                                }
                                "defaultTransactionOptions" => {
                                    let mut args = Args {
                                        operation: "defaultTransactionOptions".into(),
                                        rest: value
                                            .as_document()
                                            .cloned()
                                            .ok_or("defaultTransactionOptions")?,
                                    };
                                    let defaults = transaction_options(&mut args)?;
                                    args.done()?;
                                    options.default_transaction_options = Some(defaults);
                                }
                                other => {
                                    return skip(format!(
                                        "session option {other:?} not supported by the runner"
                                    ))
                                }
                            }
                        }
                    }
                    let session = client
                        .live()?
                        .start_session()
                        .with_options(options)
                        .run()
                        .map_err(|e| format!("startSession: {e}"))?;
                    let lsid = session.id().clone();
                    Entity::Session(Some(Box::new(session)), lsid, client_name)
                }
                "bucket" => {
                    let db = self.database(spec.get_str("database").unwrap_or_default())?;
                    Entity::Bucket(gridfs::create_bucket(&db, spec)?)
                }
                "thread" => return skip(THREADS_RULE),
                other => return skip(format!("entity type {other:?} not supported by the runner")),
            };
            self.entities.0.insert(id, created);
        }
        Ok(())
    }

    fn create_client(&self, spec: &Document) -> Outcome<ClientEntity> {
        let mut query = Vec::new();
        for (key, value) in spec {
            match key.as_str() {
                "id"
                | "observeEvents"
                | "ignoreCommandMonitoringEvents"
                | "observeSensitiveCommands"
                | "useMultipleMongoses" => {}
                // Waits until the pool holds minPoolSize connections; a
                // one-socket driver has no pool to fill, so there is nothing
                // to wait for.
                "awaitMinPoolSizeMS" => {}
                "uriOptions" => {
                    let options = value.as_document().ok_or("uriOptions")?;
                    for (name, v) in options {
                        let text = match v {
                            Bson::String(s) => s.clone(),
                            Bson::Boolean(b) => b.to_string(),
                            Bson::Int32(i) => i.to_string(),
                            Bson::Int64(i) => i.to_string(),
                            Bson::Double(d) => d.to_string(),
                            other => {
                                return skip(format!(
                                    "uriOptions.{name} = {other}: not expressible by the runner"
                                ))
                            }
                        };
                        query.push(format!("{name}={text}"));
                    }
                }
                "observeLogMessages" => {
                    logs::parse_observe(value)?;
                    logs::observe_on_this_thread();
                }
                "storeEventsAsEntities" => {
                    return skip("storeEventsAsEntities not supported by the runner")
                }
                "serverApi" => {}
                other => return skip(format!("client option {other:?} not supported")),
            }
        }
        let given = spec.get_document("uriOptions").ok();
        for (name, value) in &self.default_uri_options {
            if !given.is_some_and(|g| g.contains_key(name)) {
                query.push(format!("{name}={value}"));
            }
        }
        let observe: Vec<String> = spec
            .get_array("observeEvents")
            .map(|a| {
                a.iter()
                    .filter_map(|b| b.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        // CMAP events may be observed (the driver publishes none); a test
        // that expects one is skipped where it does.
        for event in &observe {
            if !event.starts_with("command")
                && !events::SDAM_EVENTS.contains(&event.as_str())
                && !events::is_cmap_event(event)
            {
                return skip(format!("observing {event} not supported by the runner"));
            }
        }
        let ignore: Vec<String> = spec
            .get_array("ignoreCommandMonitoringEvents")
            .map(|a| {
                a.iter()
                    .filter_map(|b| b.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let base = match (
            spec.get_bool("useMultipleMongoses"),
            &self.deployment.multi_uri,
        ) {
            (Ok(true), Some(multi)) => multi,
            _ => &self.deployment.uri,
        };
        let separator = if base.contains('?') { '&' } else { '?' };
        let uri = if query.is_empty() {
            base.clone()
        } else {
            format!("{base}{separator}{}", query.join("&"))
        };
        let options = match spec.get_document("serverApi") {
            Ok(api) => {
                let code = ClientOptions::builder()
                    .server_api(server_api(api)?)
                    .build();
                ClientOptions::parse_with(&uri, code)
            }
            Err(_) => ClientOptions::parse(&uri).run(),
        }
        .map_err(|e| format!("client URI {uri}: {e}"))?;
        let mut options = options;
        let sets_heartbeat = given.is_some_and(|g| g.contains_key("heartbeatFrequencyMS"));
        if let (Some(interval), false) = (self.min_heartbeat_frequency, sets_heartbeat) {
            mongo_inline::unversioned::set_min_heartbeat_frequency(&mut options, interval);
        }
        let recorder = Arc::new(Recorder::default());
        let client = recorder
            .client_for(options)
            .map_err(|e| format!("client: {e}"))?;
        Ok(ClientEntity {
            client: Some(client),
            recorder,
            observe,
            ignore,
            observe_sensitive: spec.get_bool("observeSensitiveCommands").unwrap_or(false),
            runner_events: Vec::new(),
            observe_logs: match spec.get("observeLogMessages") {
                Some(wanted) => logs::parse_observe(wanted)?,
                None => Vec::new(),
            },
        })
    }

    fn client(&self, name: &str) -> Outcome<&ClientEntity> {
        match self.entities.0.get(name) {
            Some(Entity::Client(c)) => Ok(c),
            _ => fail(format!("no client entity {name:?}")),
        }
    }

    fn database(&self, name: &str) -> Outcome<Database> {
        match self.entities.0.get(name) {
            Some(Entity::Database(d)) => Ok(d.clone()),
            _ => fail(format!("no database entity {name:?}")),
        }
    }

    fn take_session(&mut self, name: &str) -> Outcome<Box<ClientSession>> {
        match self.entities.0.get_mut(name) {
            Some(Entity::Session(s, _, _)) => s
                .take()
                .ok_or_else(|| Failure::Fail(format!("session {name:?} has ended"))),
            _ => fail(format!("no session entity {name:?}")),
        }
    }

    fn put_session(&mut self, name: &str, session: Box<ClientSession>) {
        if let Some(Entity::Session(slot, _, _)) = self.entities.0.get_mut(name) {
            *slot = Some(session);
        }
    }

    fn run_operation(&mut self, operation: &Document) -> Outcome {
        match self.run_operation_lent(operation, None)? {
            None => Ok(()),
            Some(e) => fail(format!("unexpected error: {e}")),
        }
    }

    /// Runs `operation`; `lent` is the session a `withTransaction` callback
    /// was handed (taken out of the entity map while the driver holds it).
    /// A driver error the operation does not expect comes back as
    /// `Ok(Some(error))`; inside a callback every driver error does, once
    /// checked, since the driver must see it to abort the transaction.
    fn run_operation_lent(
        &mut self,
        operation: &Document,
        lent: Option<(&str, &mut ClientSession)>,
    ) -> Outcome<Option<mongo_inline::Error>> {
        let name = operation.get_str("name").map_err(|e| e.to_string())?;
        let object = operation.get_str("object").map_err(|e| e.to_string())?;
        let arguments = operation
            .get_document("arguments")
            .cloned()
            .unwrap_or_default();
        if object == "testRunner" {
            return self
                .run_test_runner_operation(name, arguments)
                .map(|()| None);
        }
        // createCollection's result is the new collection.
        let created_collection = (name == "createCollection")
            .then(|| arguments.get_str("collection").ok().map(str::to_string))
            .flatten();
        let args = Args {
            operation: name.to_string(),
            rest: arguments,
        };
        let in_callback = lent.is_some();
        let result = if name == "withTransaction" {
            if in_callback {
                return skip("withTransaction inside a withTransaction callback");
            }
            self.with_transaction(object, args)?
        } else {
            self.execute(object, name, args, lent)?
        };
        if let Err(e) = &result {
            if matches!(e.kind(), ErrorKind::Timeout { .. }) || e.is_network_timeout() {
                self.gave_up_at = Some(std::time::Instant::now());
            }
        }
        if operation.get_bool("ignoreResultAndError").unwrap_or(false) {
            return Ok(result.err().filter(|_| in_callback));
        }
        if let Ok(expected) = operation.get_document("expectError") {
            return match result {
                Ok(value) => fail(format!("expected an error, got {value}")),
                Err(error) => {
                    check_error(expected, &error)?;
                    Ok(in_callback.then_some(error))
                }
            };
        }
        let value = match result {
            Ok(value) => value,
            Err(error) => return Ok(Some(error)),
        };
        if let Some(expected) = operation.get("expectResult") {
            expect_result(name, expected, &value, &self.entities)
                .map_err(|e| Failure::Fail(format!("result {value}: {e}")))?;
        }
        if let Ok(save) = operation.get_str("saveResultAsEntity") {
            if self.entities.0.contains_key(save) {
                return fail(format!(
                    "saveResultAsEntity: the entity {save:?} already exists"
                ));
            }
            let entity = match (self.opened_cursor.take(), self.opened_stream.take()) {
                (Some((cursor, client)), _) => Entity::Cursor(cursor, client),
                (None, Some((stream, client))) => Entity::ChangeStream(stream, client),
                (None, None) => match (self.entities.0.get(object), &created_collection) {
                    (Some(Entity::Database(db)), Some(c)) => {
                        if let Some(owner) = self.owners.get(object).cloned() {
                            self.owners.insert(save.to_string(), owner);
                        }
                        Entity::Collection(db.collection(c))
                    }
                    _ => Entity::Value(value),
                },
            };
            self.entities.0.insert(save.to_string(), entity);
        }
        // A cursor nobody saved is closed now.
        self.opened_cursor = None;
        self.opened_stream = None;
        Ok(None)
    }

    /// `withTransaction` on session `object`: the callback's operations run
    /// in the driver's callback, and an error one of them does not expect
    /// goes back to the driver, which decides whether to retry.
    fn with_transaction(
        &mut self,
        object: &str,
        mut args: Args,
    ) -> Outcome<Result<Bson, mongo_inline::Error>> {
        let callback = args.docs("callback")?.unwrap_or_default();
        let timeout = args.millis("timeoutMS")?;
        let options = transaction_options(&mut args)?;
        args.done()?;
        let mut session = self.take_session(object)?;
        // An assertion that fails inside the callback ends the test; the
        // driver only sees an error that makes it abort without retrying.
        let mut failure: Option<Failure> = None;
        let start = session.start_transaction().with_options(options);
        let start = match timeout {
            Some(t) => start.timeout(t),
            None => start,
        };
        let result = start.and_run(|s| {
            for operation in &callback {
                match self.run_operation_lent(operation, Some((object, s))) {
                    Ok(None) => {}
                    Ok(Some(driver_error)) => return Err(driver_error),
                    Err(f) => {
                        failure = Some(f);
                        return Err(mongo_inline::Error::from(ErrorKind::Client {
                            message: "the test runner stopped the callback".into(),
                        }));
                    }
                }
            }
            Ok(())
        });
        self.put_session(object, session);
        if let Some(f) = failure {
            return Err(match f {
                Failure::Fail(m) => Failure::Fail(format!("in the withTransaction callback: {m}")),
                skip => skip,
            });
        }
        Ok(result.map(|()| Bson::Null))
    }

    fn run_test_runner_operation(&mut self, name: &str, arguments: Document) -> Outcome {
        match name {
            "failPoint" => {
                let client_name = arguments.get_str("client").map_err(|e| e.to_string())?;
                let fail_point = arguments
                    .get_document("failPoint")
                    .map_err(|e| e.to_string())?
                    .clone();
                self.set_fail_point(client_name, fail_point)
            }
            "targetedFailPoint" => {
                // The simulated mongoses share one backend, so a fail point
                // set through the session's client reaches the server behind
                // the pinned one; the spec requires the session be pinned.
                let fail_point = arguments
                    .get_document("failPoint")
                    .map_err(|e| e.to_string())?
                    .clone();
                let session_name = arguments.get_str("session").map_err(|e| e.to_string())?;
                let session = self.take_session(session_name)?;
                let pinned = session.is_pinned();
                self.put_session(session_name, session);
                if !pinned {
                    return fail(format!(
                        "targetedFailPoint: session {session_name} is not pinned to a mongos"
                    ));
                }
                let client_name = match self.entities.0.get(session_name) {
                    Some(Entity::Session(_, _, c)) => c.clone(),
                    _ => return fail(format!("no session entity {session_name:?}")),
                };
                self.set_fail_point(&client_name, fail_point)
            }
            "assertSameLsidOnLastTwoCommands" | "assertDifferentLsidOnLastTwoCommands" => {
                let client_name = arguments.get_str("client").map_err(|e| e.to_string())?;
                let started = self.client(client_name)?.recorder.started();
                let lsids: Vec<&Bson> = started
                    .iter()
                    .rev()
                    .take(2)
                    .filter_map(|c| c.get("lsid"))
                    .collect();
                if lsids.len() != 2 {
                    return fail(format!(
                        "{name}: the last two commands do not both have an lsid"
                    ));
                }
                let same = lsids[0] == lsids[1];
                if same == (name == "assertSameLsidOnLastTwoCommands") {
                    Ok(())
                } else {
                    fail(format!("{name}: lsids {} and {}", lsids[1], lsids[0]))
                }
            }
            "assertCollectionExists" | "assertCollectionNotExists" => {
                let db = arguments
                    .get_str("databaseName")
                    .map_err(|e| e.to_string())?;
                let coll = arguments
                    .get_str("collectionName")
                    .map_err(|e| e.to_string())?;
                let names = self
                    .deployment
                    .internal
                    .database(db)
                    .list_collection_names()
                    .run()
                    .map_err(|e| format!("listCollections: {e}"))?;
                let exists = names.iter().any(|n| n == coll);
                if exists == (name == "assertCollectionExists") {
                    Ok(())
                } else {
                    fail(format!("{name}: {db}.{coll} exists = {exists}"))
                }
            }
            "assertIndexExists" | "assertIndexNotExists" => {
                let db = arguments
                    .get_str("databaseName")
                    .map_err(|e| e.to_string())?;
                let coll = arguments
                    .get_str("collectionName")
                    .map_err(|e| e.to_string())?;
                let index = arguments.get_str("indexName").map_err(|e| e.to_string())?;
                let reply = self
                    .deployment
                    .internal
                    .database(db)
                    .run_command(doc! { "listIndexes": coll })
                    .run();
                let exists = match reply {
                    Ok(reply) => reply
                        .get_document("cursor")
                        .and_then(|c| c.get_array("firstBatch"))
                        .map(|batch| {
                            batch.iter().any(|i| {
                                i.as_document().and_then(|d| d.get_str("name").ok()) == Some(index)
                            })
                        })
                        .unwrap_or(false),
                    Err(_) => false,
                };
                if exists == (name == "assertIndexExists") {
                    Ok(())
                } else {
                    fail(format!(
                        "{name}: index {index} on {db}.{coll} exists = {exists}"
                    ))
                }
            }
            "assertSessionPinned"
            | "assertSessionUnpinned"
            | "assertSessionDirty"
            | "assertSessionNotDirty"
            | "assertSessionTransactionState" => {
                let session_name = arguments.get_str("session").map_err(|e| e.to_string())?;
                let session = self.take_session(session_name)?;
                let (pinned, dirty, state) = (
                    session.is_pinned(),
                    session.is_dirty(),
                    session.transaction_state(),
                );
                self.put_session(session_name, session);
                let holds = match name {
                    "assertSessionPinned" => pinned,
                    "assertSessionUnpinned" => !pinned,
                    "assertSessionDirty" => dirty,
                    "assertSessionNotDirty" => !dirty,
                    _ => {
                        use mongo_inline::TransactionState as S;
                        let actual = match state {
                            S::None => "none",
                            S::Starting => "starting",
                            S::InProgress => "in_progress",
                            S::Committed | S::CommittedEmpty => "committed",
                            S::Aborted => "aborted",
                            _ => "unknown",
                        };
                        let wanted = arguments.get_str("state").map_err(|e| e.to_string())?;
                        if actual != wanted {
                            return fail(format!("{name}: {wanted}, but the state is {actual}"));
                        }
                        true
                    }
                };
                if holds {
                    Ok(())
                } else {
                    fail(format!(
                        "{name}: session {session_name} pinned = {pinned}, dirty = {dirty}"
                    ))
                }
            }
            "assertNumberConnectionsCheckedOut" => {
                let client_name = arguments.get_str("client").map_err(|e| e.to_string())?;
                self.client(client_name)?;
                let wanted = match arguments.get("connections") {
                    Some(Bson::Int32(n)) => i64::from(*n),
                    Some(Bson::Int64(n)) => *n,
                    other => return fail(format!("connections {other:?} is not an integer")),
                };
                let actual = self.connections_checked_out(client_name);
                if wanted == actual {
                    Ok(())
                } else {
                    fail(format!(
                        "{name}: {wanted} connections checked out, but {client_name} has {actual}"
                    ))
                }
            }
            "waitForEvent" | "assertEventCount" => {
                let client_name = arguments.get_str("client").map_err(|e| e.to_string())?;
                let event = arguments.get_document("event").map_err(|e| e.to_string())?;
                let count = arguments
                    .get("count")
                    .and_then(|c| c.as_i32().map(i64::from).or_else(|| c.as_i64()))
                    .ok_or("count")? as usize;
                let (event_name, fields) = event.iter().next().ok_or("empty event")?;
                let fields = fields.as_document().cloned().unwrap_or_default();
                if events::is_cmap_event(event_name) {
                    return skip(events::cmap_reason(event_name));
                }
                let is_command = event_name.starts_with("command");
                if !is_command && !events::SDAM_EVENTS.contains(&event_name.as_str()) {
                    return skip(format!(
                        "{name} for {event_name} not supported by the runner"
                    ));
                }
                if let Some(other) = fields.keys().find(|k| is_command && *k != "commandName") {
                    return skip(format!(
                        "{name} on {event_name}.{other} not supported by the runner"
                    ));
                }
                let client = self.client(client_name)?;
                let matching = || -> Outcome<usize> {
                    if is_command {
                        let wanted = fields.get_str("commandName").ok();
                        return Ok(observed_commands(client)
                            .iter()
                            .filter(|(kind, command, _)| {
                                kind == event_name && wanted.is_none_or(|w| w == command)
                            })
                            .count());
                    }
                    let mut n = 0;
                    for e in client.recorder.sdam() {
                        if events::sdam_matches(event_name, &fields, &e).map_err(Failure::Skip)? {
                            n += 1;
                        }
                    }
                    Ok(n)
                };
                if name == "assertEventCount" {
                    let n = matching()?;
                    return if n == count {
                        Ok(())
                    } else {
                        fail(format!(
                            "{event_name} {fields}: {n} events, expected {count}"
                        ))
                    };
                }
                // The driver is single-threaded and scans on demand: events
                // arrive only during an operation, and none runs while the
                // runner waits, so what has not arrived yet never will.
                let n = matching()?;
                if n >= count {
                    Ok(())
                } else if events::MONITOR_EVENTS.contains(&event_name.as_str()) {
                    // What only a background monitor would publish.
                    skip(format!(
                        "single-threaded: waitForEvent {event_name} {fields} (count {count}, {n} seen) waits for a background monitor; server-monitoring.md: \"Single-threaded clients MUST scan all servers synchronously, inline with regular application operations\", and no operation runs while the runner waits"
                    ))
                } else {
                    fail(format!(
                        "waitForEvent {event_name} {fields}: {n} of {count} events, and no more can come while no operation runs"
                    ))
                }
            }
            "recordTopologyDescription" | "assertTopologyType" | "waitForPrimaryChange" => {
                self.topology_operation(name, &arguments)
            }
            "wait" => {
                let ms = arguments
                    .get("ms")
                    .and_then(|m| m.as_i64().or_else(|| m.as_i32().map(i64::from)))
                    .ok_or("wait: ms is required")?;
                std::thread::sleep(Duration::from_millis(ms.max(0) as u64));
                Ok(())
            }
            "createEntities" => {
                let entities = arguments
                    .get_array("entities")
                    .map_err(|e| e.to_string())?
                    .clone();
                self.create_entities(&entities)
            }
            other => skip(format!(
                "test runner operation {other} not supported by the runner"
            )),
        }
    }

    /// The test runner's TopologyDescription operations.
    fn topology_operation(&mut self, name: &str, arguments: &Document) -> Outcome {
        let text = |key: &str| {
            arguments
                .get_str(key)
                .map_err(|_| Failure::Fail(format!("{name}: {key} must be a string")))
        };
        let recorded = |entities: &EntityMap, key: &str| -> Outcome<TopologyDescription> {
            let id = text(key)?;
            match entities.0.get(id) {
                Some(Entity::Topology(d)) => Ok((**d).clone()),
                _ => fail(format!("{name}: no topology description entity {id:?}")),
            }
        };
        match name {
            "recordTopologyDescription" => {
                let id = text("id")?;
                if self.entities.0.contains_key(id) {
                    return fail(format!("{name}: the entity {id:?} already exists"));
                }
                let description = current_topology(self.client(text("client")?)?)?;
                self.entities
                    .0
                    .insert(id.to_string(), Entity::Topology(Box::new(description)));
                Ok(())
            }
            "assertTopologyType" => {
                let found = recorded(&self.entities, "topologyDescription")?.topology_type;
                let wanted = text("topologyType")?;
                if found.as_str() == wanted {
                    Ok(())
                } else {
                    fail(format!(
                        "{name}: the topology is {}, not {wanted}",
                        found.as_str()
                    ))
                }
            }
            _ => {
                let prior = primary_of(&recorded(&self.entities, "priorTopologyDescription")?);
                match arguments.get("timeoutMS") {
                    None | Some(Bson::Int32(_) | Bson::Int64(_)) => {}
                    Some(other) => return fail(format!("{name}: timeoutMS {other}")),
                }
                let now = primary_of(&current_topology(self.client(text("client")?)?)?);
                // The driver is single-threaded and scans on demand: the
                // client learns of a new primary only during an operation,
                // and none runs while the runner waits.
                match now {
                    Some(primary) if Some(&primary) != prior.as_ref() => Ok(()),
                    _ => skip(format!(
                        "single-threaded: {name} waits for the client to discover a new primary (it knows {now:?}; before, {prior:?}) while no operation runs; server-monitoring.md: \"Single-threaded clients MUST scan all servers synchronously, inline with regular application operations\""
                    )),
                }
            }
        }
    }

    /// An operation on cursor entity `object`, iterated in its session
    /// (taken out of the session entity meanwhile) if it has one.
    fn cursor_operation(
        &mut self,
        object: &str,
        name: &str,
        mut args: Args,
    ) -> Outcome<DriverResult> {
        let close_timeout = match name {
            "close" => args.millis("timeoutMS")?,
            _ => None,
        };
        args.done()?;
        let Some(Entity::Cursor(mut cursor, client)) = self.entities.0.remove(object) else {
            return fail(format!("no cursor entity {object:?}"));
        };
        let session_name = cursor.session_name().map(str::to_string);
        let mut session = match &session_name {
            Some(s) => Some(self.take_session(s)?),
            None => None,
        };
        let result = match name {
            "iterateOnce" => cursor.try_next(session.as_deref_mut()),
            "iterateUntilDocumentOrError" => match cursor.next(session.as_deref_mut()) {
                Ok(Some(result)) => Ok(result),
                Ok(None) => fail(format!("{name}: the cursor {object} is exhausted")),
                Err(failure) => Err(failure),
            },
            "close" => {
                cursor.close(close_timeout);
                if let (Some(name), Some(session)) = (&session_name, session) {
                    self.put_session(name, session);
                }
                return Ok(Ok(Bson::Null));
            }
            other => Err(missing_operation("cursor", other)),
        };
        if let (Some(name), Some(session)) = (&session_name, session) {
            self.put_session(name, session);
        }
        self.entities
            .0
            .insert(object.to_string(), Entity::Cursor(cursor, client));
        result
    }

    /// `createFindCursor`: opens the cursor, kept for `saveResultAsEntity`;
    /// in `session`, a session cursor iterated with that session entity.
    fn create_find_cursor(
        &mut self,
        object: &str,
        session: Option<String>,
        mut args: Args,
    ) -> Outcome<Result<Bson, mongo_inline::Error>> {
        let coll = match self.entities.0.get(object) {
            Some(Entity::Collection(c)) => c.clone(),
            _ => return fail(format!("createFindCursor: no collection entity {object:?}")),
        };
        let client = self.owners.get(object).cloned().unwrap_or_default();
        let timeout = args.millis("timeoutMS")?;
        let mode = timeout_mode(&mut args)?;
        let filter = args.required_doc("filter")?;
        let comment = args.take("comment");
        let options = find_options(&mut args, comment)?;
        args.done()?;
        let action = coll
            .find(filter)
            .with_options(options)
            .op_timeout(timeout)
            .op_mode(mode);
        let found = match session {
            Some(name) => {
                let mut own = self.take_session(&name)?;
                let found = action.session(&mut own).run();
                self.put_session(&name, own);
                found.map(|c| CursorEntity::InSession(c, name))
            }
            None => action.run().map(CursorEntity::Plain),
        };
        Ok(found.map(|cursor| {
            self.opened_cursor = Some((Box::new(cursor), client));
            Bson::Null
        }))
    }

    /// `createCommandCursor`: `runCursorCommand`'s cursor, kept for
    /// `saveResultAsEntity` instead of read to the end.
    fn create_command_cursor(
        &mut self,
        object: &str,
        session: Option<String>,
        mut args: Args,
    ) -> Outcome<Result<Bson, mongo_inline::Error>> {
        let db = match self.entities.0.get(object) {
            Some(Entity::Database(d)) => d.clone(),
            _ => {
                return fail(format!(
                    "createCommandCursor: no database entity {object:?}"
                ))
            }
        };
        let client = self.owners.get(object).cloned().unwrap_or_default();
        let timeout = args.millis("timeoutMS")?;
        let mode = timeout_mode(&mut args)?;
        let command = args.required_doc("command")?;
        let _ = args.take("commandName");
        let options = cursor_command_options(&mut args)?;
        args.done()?;
        let action = db
            .run_cursor_command(command)
            .with_options(options)
            .op_timeout(timeout)
            .op_mode(mode);
        let opened = match session {
            Some(name) => {
                let mut own = self.take_session(&name)?;
                let opened = action.session(&mut own).run();
                self.put_session(&name, own);
                opened.map(|c| CursorEntity::InSession(c, name))
            }
            None => action.run().map(CursorEntity::Plain),
        };
        Ok(opened.map(|cursor| {
            self.opened_cursor = Some((Box::new(cursor), client));
            Bson::Null
        }))
    }

    /// The connections `client_name` holds outside an operation. Each
    /// server has one socket, used only during an operation, except that
    /// behind a load balancer a transaction pins it (a pool would have it
    /// checked out); the sessions pinned there share that one socket.
    fn connections_checked_out(&self, client_name: &str) -> i64 {
        if self.deployment.topology != "load-balanced" {
            return 0;
        }
        // A session's transaction, or an open cursor, pins the socket.
        let pinned = self.entities.0.values().any(|e| match e {
            Entity::Session(Some(s), _, c) => c == client_name && s.is_pinned(),
            Entity::Cursor(cursor, c) => c == client_name && cursor.id() != 0,
            Entity::ChangeStream(stream, c) => c == client_name && stream.is_alive(),
            _ => false,
        });
        i64::from(pinned)
    }

    /// Sets a fail point through client entity `client_name`; its
    /// configureFailPoint events are the runner's, not the test's, so they
    /// are left out of the client's observed events (and only those).
    fn set_fail_point(&mut self, client_name: &str, fail_point: Document) -> Outcome {
        let fp_name = fail_point
            .get_str("configureFailPoint")
            .map_err(|e| e.to_string())?
            .to_string();
        if let Ok(data) = fail_point.get_document("data") {
            if data.get_bool("blockConnection").unwrap_or(false) {
                let ms = data.get_i32("blockTimeMS").map(i64::from);
                let ms = ms.or_else(|_| data.get_i64("blockTimeMS")).unwrap_or(0);
                self.blocked_for = self
                    .blocked_for
                    .max(Duration::from_millis(ms.max(0) as u64));
            }
        }
        let entity = self.client(client_name)?;
        let client = entity.live()?.clone();
        let recorder = entity.recorder.clone();
        let before = recorder.commands().len();
        let result = client.database("admin").run_command(fail_point).run();
        let after = recorder.commands().len();
        if let Some(Entity::Client(entity)) = self.entities.0.get_mut(client_name) {
            entity.runner_events.push(before..after);
        }
        result.map_err(|e| format!("configureFailPoint: {e}"))?;
        self.fail_points.push((fp_name, client));
        Ok(())
    }

    /// Runs an operation on an entity; `Ok(Err(_))` is the driver's error.
    fn execute(
        &mut self,
        object: &str,
        name: &str,
        mut args: Args,
        lent: Option<(&str, &mut ClientSession)>,
    ) -> Outcome<Result<Bson, mongo_inline::Error>> {
        let session_name = match args.take("session") {
            Some(Bson::String(s)) => Some(s),
            Some(other) => return fail(format!("session argument {other}")),
            None => None,
        };
        if let (Some(Entity::Client(c)), "close") = (self.entities.0.get_mut(object), name) {
            args.done()?;
            if let Some(client) = c.client.take() {
                client.close();
            }
            return Ok(Ok(Bson::Null));
        }
        if let Some(Entity::Cursor(..)) = self.entities.0.get(object) {
            return self.cursor_operation(object, name, args);
        }
        if name == "createFindCursor" {
            return self.create_find_cursor(object, session_name, args);
        }
        if name == "createCommandCursor" {
            return self.create_command_cursor(object, session_name, args);
        }
        if let Some(Entity::ChangeStream(stream, _)) = self.entities.0.get_mut(object) {
            let outcome = change_streams::stream_operation(stream, object, name, args)?;
            return Ok(outcome.unwrap_or_else(|| {
                // `close`: dropping the stream kills its cursor.
                self.entities.0.remove(object);
                Ok(Bson::Null)
            }));
        }
        if name == "createChangeStream" {
            return self.create_change_stream(object, session_name, args);
        }
        if let ("rename", Some(Entity::Collection(_))) = (name, self.entities.0.get(object)) {
            return self.rename_collection(object, session_name, args);
        }
        // An operation's own timeoutMS goes to its builder (the driver's
        // per-operation `timeout`).
        let entity = entity_target(self.entities.0.get(object), object, name)?;
        let (lent_name, lent_session) = match lent {
            Some((n, s)) => (Some(n), Some(s)),
            None => (None, None),
        };
        let uses_lent = session_name.is_some() && session_name.as_deref() == lent_name;
        let mut session = match &session_name {
            Some(s) if !uses_lent => Some(self.take_session(s)?),
            _ => None,
        };
        let (session_ref, lent_session): (Option<&mut ClientSession>, _) = if uses_lent {
            (lent_session, None)
        } else {
            (session.as_deref_mut(), lent_session)
        };
        let result = match entity {
            Target::Collection(c) => collection_operation(&c, name, args, session_ref),
            Target::Bucket(b) => match session_ref {
                None => gridfs::bucket_operation(&b, name, args),
                Some(_) => {
                    return skip("a GridFS operation in a session: the GridFS API takes none")
                }
            },
            Target::Database(d) => database_operation(&d, name, args, session_ref),
            Target::Client(c) => client_operation(&c, name, args, session_ref),
            // The callback's own session (commitTransaction or
            // abortTransaction inside it, which the driver must notice).
            Target::Session(s) if lent_name == Some(s.as_str()) => match lent_session {
                Some(lent) => session_operation(lent, name, args),
                None => return fail(format!("{name}: the callback's session is not at hand")),
            },
            Target::Session(s) => {
                let mut own = self.take_session(&s)?;
                let result = session_operation(&mut own, name, args);
                match name {
                    "endSession" => drop(own),
                    _ => self.put_session(&s, own),
                }
                result
            }
        };
        if let (Some(name), Some(session)) = (session_name, session) {
            self.put_session(&name, session);
        }
        result
    }

    /// `expectLogMessages`: each client's records, those of the components
    /// and levels it observes, against the expected messages.
    fn check_logs(&self, expected: &[Bson]) -> Outcome {
        for block in expected {
            let block = block
                .as_document()
                .ok_or("expectLogMessages: not a document")?;
            let name = block
                .get_str("client")
                .map_err(|_| "expectLogMessages: client is required")?;
            let client = self.client(name)?;
            let topology_id = client
                .recorder
                .sdam()
                .iter()
                .find_map(|e| match e {
                    mongo_inline::event::sdam::SdamEvent::TopologyOpening(e) => {
                        Some(e.topology_id.to_string())
                    }
                    _ => None,
                })
                .ok_or_else(|| format!("client {name}: no TopologyOpening event"))?;
            let observed = logs::captured_for(&topology_id)
                .into_iter()
                .filter(|c| {
                    client
                        .observe_logs
                        .iter()
                        .any(|(component, level)| component == c.component && c.level <= *level)
                })
                .collect();
            logs::check_client(block, observed, &self.entities)
                .map_err(|e| Failure::Fail(format!("client {name}: {e}")))?;
        }
        Ok(())
    }

    /// Checks the command and SDAM blocks; returns why a CMAP block could
    /// not be checked, if there is one.
    fn check_events(&self, expected: &[Bson]) -> Outcome<Option<String>> {
        let mut unchecked_cmap = None;
        for block in expected {
            let block = block.as_document().ok_or("expectEvents entry")?;
            let event_type = block.get_str("eventType").unwrap_or("command");
            let client = self.client(block.get_str("client").map_err(|e| e.to_string())?)?;
            match event_type {
                "command" => {}
                "sdam" => {
                    check_sdam_events(client, block)?;
                    continue;
                }
                "cmap" => {
                    let first = block
                        .get_array("events")
                        .ok()
                        .and_then(|a| a.first())
                        .and_then(Bson::as_document)
                        .and_then(|d| d.keys().next().cloned())
                        .unwrap_or_else(|| "events".to_string());
                    unchecked_cmap = Some(events::cmap_reason(&first));
                    continue;
                }
                other => {
                    return skip(format!(
                        "expectEvents of type {other} not supported by the runner"
                    ))
                }
            }
            let actual = observed_commands(client);
            let wanted = block.get_array("events").map_err(|e| e.to_string())?;
            let ignore_extra = block.get_bool("ignoreExtraEvents").unwrap_or(false);
            if actual.len() < wanted.len() || (!ignore_extra && actual.len() != wanted.len()) {
                return fail(format!(
                    "expected {} command events, got {}: {}",
                    wanted.len(),
                    actual.len(),
                    actual
                        .iter()
                        .map(|(kind, name, _)| format!("{kind} {name}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            for (i, (want, (kind, name, body))) in wanted.iter().zip(&actual).enumerate() {
                let want = want.as_document().ok_or("expected event")?;
                let (want_kind, fields) = want.iter().next().ok_or("empty expected event")?;
                if want_kind != kind {
                    return fail(format!(
                        "event {i}: expected {want_kind}, got {kind} {name}"
                    ));
                }
                let fields = fields.as_document().ok_or("event fields")?;
                for (key, value) in fields {
                    match key.as_str() {
                        "commandName" => {
                            if value.as_str() != Some(name.as_str()) {
                                return fail(format!("event {i}: expected {value}, got {name}"));
                            }
                        }
                        "command" | "reply" => matches(
                            value,
                            Some(&Bson::Document(body.document.clone())),
                            true,
                            &self.entities,
                        )
                        .map_err(|e| {
                            Failure::Fail(format!(
                                "event {i} ({kind} {name}) {key}: {e}; actual {}",
                                body.document
                            ))
                        })?,
                        "databaseName" => {
                            if value.as_str() != body.database.as_deref() {
                                return fail(format!(
                                    "event {i}: database {value}, got {:?}",
                                    body.database
                                ));
                            }
                        }
                        "hasServiceId" | "hasServerConnectionId" => {
                            let has = if key == "hasServiceId" {
                                body.has_service_id
                            } else {
                                body.has_server_connection_id
                            };
                            if value.as_bool() != Some(has) {
                                return fail(format!("event {i}: {key} should be {value}"));
                            }
                        }
                        other => {
                            return skip(format!("event field {other} not supported by the runner"))
                        }
                    }
                }
            }
        }
        Ok(unchecked_cmap)
    }

    fn check_outcome(&self, outcome: &[Bson]) -> Outcome {
        for data in outcome {
            let data = data.as_document().ok_or("outcome entry")?;
            let db = data.get_str("databaseName").map_err(|e| e.to_string())?;
            let coll = data.get_str("collectionName").map_err(|e| e.to_string())?;
            let expected = data.get_array("documents").map_err(|e| e.to_string())?;
            let actual: Vec<Bson> = self
                .deployment
                .internal
                .database(db)
                .collection::<Document>(coll)
                .find(doc! {})
                .with_options(
                    FindOptions::default()
                        .sort(doc! { "_id": 1 })
                        .read_concern(ReadConcern::new("local")),
                )
                .run()
                .and_then(|c| c.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("outcome: find in {db}.{coll}: {e}"))?
                .into_iter()
                .map(Bson::Document)
                .collect();
            // "the rules in Evaluating Matches do not apply and the
            // documents MUST match exactly"
            exactly(
                "",
                &Bson::Array(expected.clone()),
                &Bson::Array(actual.clone()),
            )
            .map_err(|e| Failure::Fail(format!("outcome {db}.{coll}: {e}; actual {actual:?}")))?;
        }
        Ok(())
    }
}

/// Checks an `expectEvents` block of type `sdam` against the SDAM events the
/// client observed.
fn check_sdam_events(client: &ClientEntity, block: &Document) -> Outcome {
    let actual: Vec<_> = client
        .recorder
        .sdam()
        .into_iter()
        .filter(|e| client.observe.iter().any(|o| o == events::sdam_name(e)))
        .collect();
    let wanted = block.get_array("events").map_err(|e| e.to_string())?;
    let ignore_extra = block.get_bool("ignoreExtraEvents").unwrap_or(false);
    let names = || {
        actual
            .iter()
            .map(events::sdam_name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    if actual.len() < wanted.len() || (!ignore_extra && actual.len() != wanted.len()) {
        return fail(format!(
            "expected {} SDAM events, got {}: {}",
            wanted.len(),
            actual.len(),
            names()
        ));
    }
    for (i, (want, event)) in wanted.iter().zip(&actual).enumerate() {
        let want = want.as_document().ok_or("expected event")?;
        let (name, fields) = want.iter().next().ok_or("empty expected event")?;
        let fields = fields.as_document().cloned().unwrap_or_default();
        if !events::sdam_matches(name, &fields, event).map_err(Failure::Skip)? {
            return fail(format!(
                "SDAM event {i}: expected {want}, got {event:?} (all: {})",
                names()
            ));
        }
    }
    Ok(())
}

/// What an operation named `name` on entity `object` runs against.
fn entity_target(entity: Option<&Entity>, object: &str, name: &str) -> Outcome<Target> {
    Ok(match entity {
        Some(Entity::Collection(c)) => Target::Collection(c.clone()),
        Some(Entity::Bucket(b)) => Target::Bucket(b.clone()),
        Some(Entity::Database(d)) => Target::Database(d.clone()),
        Some(Entity::Client(c)) => Target::Client(c.live()?.clone()),
        Some(Entity::Session(..)) => Target::Session(object.to_string()),
        Some(
            Entity::Value(_) | Entity::Cursor(..) | Entity::ChangeStream(..) | Entity::Topology(_),
        ) => return fail(format!("operation {name} is not one of entity {object:?}")),
        None => return fail(format!("no entity {object:?}")),
    })
}

enum Target {
    Collection(Collection<Document>),
    Bucket(mongo_inline::gridfs::GridFsBucket),
    Database(Database),
    Client(Client),
    Session(String),
}

struct EventBody {
    document: Document,
    database: Option<String>,
    has_service_id: bool,
    has_server_connection_id: bool,
}

/// The command events a client entity observes, as (kind, name, body).
fn observed_commands(client: &ClientEntity) -> Vec<(String, String, EventBody)> {
    // hello and isMaster are sensitive only with speculativeAuthenticate,
    // which these servers (no authentication) never see.
    let sensitive = [
        "authenticate",
        "saslStart",
        "saslContinue",
        "getnonce",
        "createUser",
        "updateUser",
        "copydbgetnonce",
        "copydbsaslstart",
        "copydb",
    ];
    let mut out = Vec::new();
    // Succeeded and failed events name no database; their started event does.
    let mut databases: HashMap<i32, String> = HashMap::new();
    let mut redacted_hellos = std::collections::HashSet::new();
    for (index, event) in client.recorder.commands().into_iter().enumerate() {
        if client.runner_events.iter().any(|r| r.contains(&index)) {
            continue;
        }
        let (kind, name, document, database, (service_id, server_id), request_id) = match event {
            CommandEvent::Started(e) => {
                databases.insert(e.request_id, e.db.clone());
                (
                    "commandStartedEvent",
                    e.command_name,
                    e.command,
                    Some(e.db),
                    (e.service_id, e.connection.server_id),
                    e.request_id,
                )
            }
            CommandEvent::Succeeded(e) => (
                "commandSucceededEvent",
                e.command_name,
                e.reply,
                databases.get(&e.request_id).cloned(),
                (e.service_id, e.connection.server_id),
                e.request_id,
            ),
            CommandEvent::Failed(e) => (
                "commandFailedEvent",
                e.command_name,
                Document::new(),
                databases.get(&e.request_id).cloned(),
                (e.service_id, e.connection.server_id),
                e.request_id,
            ),
            _ => continue,
        };
        if !client.observe.iter().any(|o| o == kind) || client.ignore.contains(&name) {
            continue;
        }
        // A hello the driver redacted (it carried speculativeAuthenticate)
        // is sensitive, and so are its reply events.
        if kind == "commandStartedEvent"
            && (name == "hello" || name.eq_ignore_ascii_case("ismaster"))
            && document.is_empty()
        {
            redacted_hellos.insert(request_id);
        }
        if !client.observe_sensitive
            && (sensitive.contains(&name.as_str()) || redacted_hellos.contains(&request_id))
        {
            continue;
        }
        out.push((
            kind.to_string(),
            name,
            EventBody {
                document,
                database,
                has_service_id: has_service_id(service_id),
                has_server_connection_id: has_server_connection_id(server_id),
            },
        ));
    }
    out
}

/// `hasServiceId`'s test: set and not the empty (all-zero) ObjectId.
pub fn has_service_id(service_id: Option<bson::oid::ObjectId>) -> bool {
    service_id.is_some_and(|id| id.bytes() != [0; 12])
}

/// `hasServerConnectionId`'s test: set and a positive int32.
pub fn has_server_connection_id(id: Option<i64>) -> bool {
    id.is_some_and(|id| id > 0 && id <= i64::from(i32::MAX))
}

/// A database's or collection's `databaseOptions`/`collectionOptions`.
#[derive(Default)]
struct HandleOptions {
    read_concern: Option<ReadConcern>,
    write_concern: Option<mongo_inline::options::WriteConcern>,
    timeout: Option<Duration>,
    read_preference: Option<mongo_inline::ReadPreference>,
}

fn concerns(options: &Document, what: &str) -> Outcome<HandleOptions> {
    let mut handle = HandleOptions::default();
    for (key, value) in options {
        match key.as_str() {
            "readConcern" => {
                let level = value
                    .as_document()
                    .and_then(|d| d.get_str("level").ok())
                    .ok_or("readConcern without level")?;
                handle.read_concern = Some(ReadConcern::new(level));
            }
            "writeConcern" => handle.write_concern = Some(write_concern(value)?),
            "timeoutMS" => {
                let ms = match value {
                    Bson::Int32(i) => i64::from(*i),
                    Bson::Int64(i) => *i,
                    other => return fail(format!("{what}.timeoutMS {other}")),
                };
                // Zero is "no limit": a handle's zero overrides the
                // client's timeoutMS, and a zero timeout sets no deadline.
                handle.timeout = Some(Duration::from_millis(ms.max(0) as u64));
            }
            "readPreference" => {
                let rp = value
                    .as_document()
                    .ok_or_else(|| format!("{what}.readPreference {value} is not a document"))?;
                handle.read_preference = Some(read_preference(rp, what)?);
            }
            other => return skip(format!("{what}.{other} not supported by the runner")),
        }
    }
    Ok(handle)
}

/// A `readPreference` document: its mode, tag sets and max staleness.
fn read_preference(rp: &Document, what: &str) -> Outcome<mongo_inline::ReadPreference> {
    use mongo_inline::options::{ReadPreference, ReadPreferenceOptions};
    let mode = rp
        .get_str("mode")
        .map_err(|e| format!("{what}: readPreference: {e}"))?;
    let mut options = ReadPreferenceOptions::default();
    for (key, value) in rp {
        match (key.as_str(), value) {
            ("mode", _) => {}
            ("tagSets", Bson::Array(sets)) => {
                let mut tag_sets = Vec::new();
                for set in sets {
                    let set = set
                        .as_document()
                        .ok_or_else(|| format!("{what}: readPreference.tagSets: {set}"))?;
                    let mut tags = mongo_inline::options::TagSet::new();
                    for (tag, value) in set {
                        let value = value
                            .as_str()
                            .ok_or_else(|| format!("{what}: tag {tag}: {value}"))?;
                        tags.insert(tag.clone(), value.to_string());
                    }
                    tag_sets.push(tags);
                }
                options.tag_sets = Some(tag_sets);
            }
            ("maxStalenessSeconds", v) => {
                let seconds = v
                    .as_i32()
                    .map(i64::from)
                    .or_else(|| v.as_i64())
                    .and_then(|s| u64::try_from(s).ok())
                    .ok_or_else(|| format!("{what}: maxStalenessSeconds {v}"))?;
                options.max_staleness = Some(Duration::from_secs(seconds));
            }
            _ => {
                return skip(format!(
                    "{what}: readPreference {rp}: {key} is not supported by the runner"
                ))
            }
        }
    }
    let options = (options != ReadPreferenceOptions::default()).then_some(options);
    let preference = match mode.to_ascii_lowercase().as_str() {
        "primary" if options.is_none() => ReadPreference::Primary,
        "primary" => return fail(format!("{what}: readPreference {rp}: options with primary")),
        "secondary" => ReadPreference::Secondary { options },
        "primarypreferred" => ReadPreference::PrimaryPreferred { options },
        "secondarypreferred" => ReadPreference::SecondaryPreferred { options },
        "nearest" => ReadPreference::Nearest { options },
        other => return fail(format!("{what}: readPreference mode {other}")),
    };
    Ok(preference)
}

fn write_concern(value: &Bson) -> Outcome<mongo_inline::options::WriteConcern> {
    use mongo_inline::options::{Acknowledgment, WriteConcern};
    let d = value
        .as_document()
        .ok_or("writeConcern is not a document")?;
    let mut wc = WriteConcern::default();
    for (key, v) in d {
        match (key.as_str(), v) {
            ("w", Bson::String(s)) if s == "majority" => wc.w = Some(Acknowledgment::Majority),
            ("w", Bson::String(s)) => wc.w = Some(Acknowledgment::Custom(s.clone())),
            ("w", Bson::Int32(n)) => wc.w = Some(Acknowledgment::Nodes(*n as u32)),
            ("w", Bson::Int64(n)) => wc.w = Some(Acknowledgment::Nodes(*n as u32)),
            ("j", Bson::Boolean(b)) | ("journal", Bson::Boolean(b)) => wc.journal = Some(*b),
            ("wtimeoutMS" | "wtimeout", Bson::Int32(n)) => {
                wc.w_timeout = Some(Duration::from_millis(*n as u64))
            }
            (other, _) => return skip(format!("writeConcern.{other} not supported by the runner")),
        }
    }
    Ok(wc)
}

type DriverResult = Result<Bson, mongo_inline::Error>;

fn documents_result<I, T>(cursor: mongo_inline::Result<I>) -> DriverResult
where
    I: Iterator<Item = mongo_inline::Result<T>>,
    T: serde::Serialize,
{
    let docs = cursor?.collect::<Result<Vec<_>, _>>()?;
    Ok(Bson::Array(docs.iter().map(as_document).collect()))
}

/// A result value (a document, an `IndexModel`) as the document the spec
/// tests compare.
fn as_document<T: serde::Serialize>(value: &T) -> Bson {
    Bson::Document(bson::to_document(value).expect("results serialize as documents"))
}

/// The documents of a cursor run in `session`, drained with it.
fn session_documents_result<T: serde::de::DeserializeOwned + serde::Serialize + 'static>(
    cursor: mongo_inline::Result<mongo_inline::SessionCursor<T>>,
    session: &mut ClientSession,
) -> DriverResult {
    let docs = cursor?.iter(session).collect::<Result<Vec<_>, _>>()?;
    Ok(Bson::Array(docs.iter().map(as_document).collect()))
}

fn update_result(r: mongo_inline::results::UpdateResult) -> Bson {
    let mut d = doc! {
        "matchedCount": r.matched_count as i64,
        "modifiedCount": r.modified_count as i64,
        "upsertedCount": i64::from(r.upserted_id.is_some()),
    };
    if let Some(id) = r.upserted_id {
        d.insert("upsertedId", id);
    }
    Bson::Document(d)
}

/// Runs an action builder in `session` when there is one.
macro_rules! in_session {
    ($builder:expr, $session:expr) => {
        match $session {
            Some(s) => $builder.session(s).run(),
            None => $builder.run(),
        }
    };
}

/// An operation's own `timeoutMS` and `timeoutMode`, set on its builder
/// when the test gives them.
pub(super) trait OpTimeout: Sized {
    fn set_timeout(self, timeout: Duration) -> Self;
    fn op_timeout(self, timeout: Option<Duration>) -> Self {
        match timeout {
            Some(t) => self.set_timeout(t),
            None => self,
        }
    }
}

trait OpMode: Sized {
    fn set_mode(self, mode: TimeoutMode) -> Self;
    fn op_mode(self, mode: Option<TimeoutMode>) -> Self {
        match mode {
            Some(m) => self.set_mode(m),
            None => self,
        }
    }
}

macro_rules! op_timeout {
    ($($builder:ident < $($p:tt),* >),* $(,)?) => {
        $(impl<$($p),*> OpTimeout for action::$builder<$($p),*> {
            fn set_timeout(self, timeout: Duration) -> Self {
                self.timeout(timeout)
            }
        })*
    };
}

op_timeout!(
    InsertOne<'a>,
    InsertMany<'a>,
    Update<'a>,
    ReplaceOne<'a>,
    Delete<'a>,
    FindOne<'a, T>,
    Find<'a, T, S>,
    Aggregate<'a, S, T>,
    CountDocuments<'a>,
    EstimatedDocumentCount<'a>,
    Distinct<'a>,
    FindOneAndDelete<'a, T>,
    FindOneAndUpdate<'a, T>,
    FindOneAndReplace<'a, T>,
    CreateIndex<'a, M>,
    ListIndexes<'a, M, S>,
    DropIndex<'a>,
    DropCollection<'a>,
    CollectionBulkWrite<'a, T>,
    RunCommand<'a>,
    CreateCollection<'a>,
    DropDatabase<'a>,
    ListCollections<'a, M, S>,
    ListDatabases<'a, M>,
    RunCursorCommand<'a, S>,
);

impl<T, S> OpMode for action::Find<'_, T, S> {
    fn set_mode(self, mode: TimeoutMode) -> Self {
        self.timeout_mode(mode)
    }
}

impl<S, T> OpMode for action::Aggregate<'_, S, T> {
    fn set_mode(self, mode: TimeoutMode) -> Self {
        self.timeout_mode(mode)
    }
}

impl<S> OpMode for action::ListIndexes<'_, action::ListSpecifications, S> {
    fn set_mode(self, mode: TimeoutMode) -> Self {
        self.timeout_mode(mode)
    }
}

impl<S> OpMode for action::ListCollections<'_, action::ListSpecifications, S> {
    fn set_mode(self, mode: TimeoutMode) -> Self {
        self.timeout_mode(mode)
    }
}

impl<S> OpMode for action::RunCursorCommand<'_, S> {
    fn set_mode(self, mode: TimeoutMode) -> Self {
        self.timeout_mode(mode)
    }
}

/// A cursor-opening operation's `timeoutMode` argument.
fn timeout_mode(args: &mut Args) -> Outcome<Option<TimeoutMode>> {
    match args.take("timeoutMode") {
        None => Ok(None),
        Some(Bson::String(m)) if m == "cursorLifetime" => Ok(Some(TimeoutMode::CursorLifetime)),
        Some(Bson::String(m)) if m == "iteration" => Ok(Some(TimeoutMode::Iteration)),
        Some(other) => args.mistyped("timeoutMode", "cursorLifetime or iteration", &other),
    }
}

fn collection_operation(
    coll: &Collection<Document>,
    name: &str,
    mut args: Args,
    session: Option<&mut ClientSession>,
) -> Outcome<DriverResult> {
    let comment = args.take("comment");
    let timeout = args.millis("timeoutMS")?;
    // Only a cursor-opening operation takes a timeoutMode; elsewhere it
    // stays among the arguments, which `done` reports.
    let mode = match name {
        "find" | "aggregate" | "listIndexes" => timeout_mode(&mut args)?,
        _ => None,
    };
    let result = match name {
        "insertOne" => {
            let document = args.required_doc("document")?;
            let mut o = InsertOneOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(b) = args.bool("bypassDocumentValidation")? {
                o = o.bypass_document_validation(b);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            match session {
                Some(s) => coll
                    .insert_one(&document)
                    .with_options(o)
                    .op_timeout(timeout)
                    .session(s)
                    .run(),
                None => coll
                    .insert_one(&document)
                    .with_options(o)
                    .op_timeout(timeout)
                    .run(),
            }
            .map(|r| Bson::Document(doc! { "insertedId": r.inserted_id }))
        }
        "insertMany" => {
            let documents = args.docs("documents")?.unwrap_or_default();
            let mut o = InsertManyOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(b) = args.bool("ordered")? {
                o = o.ordered(b);
            }
            if let Some(b) = args.bool("bypassDocumentValidation")? {
                o = o.bypass_document_validation(b);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            in_session!(
                coll.insert_many(&documents)
                    .with_options(o)
                    .op_timeout(timeout),
                session
            )
            .map(|r| {
                let ids: Document = r
                    .inserted_ids
                    .into_iter()
                    .map(|(i, id)| (i.to_string(), id))
                    .collect();
                Bson::Document(doc! { "insertedIds": ids })
            })
        }
        "deleteOne" | "deleteMany" => {
            let filter = args.required_doc("filter")?;
            let mut o = DeleteOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(h) = args.hint()? {
                o = o.hint(h);
            }
            if let Some(c) = args.collation()? {
                o = o.collation(c);
            }
            if let Some(l) = args.doc("let")? {
                o = o.let_vars(l);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            let r = match (name, session) {
                ("deleteOne", Some(s)) => coll
                    .delete_one(filter)
                    .with_options(o)
                    .op_timeout(timeout)
                    .session(s)
                    .run(),
                ("deleteOne", None) => coll
                    .delete_one(filter)
                    .with_options(o)
                    .op_timeout(timeout)
                    .run(),
                (_, Some(s)) => coll
                    .delete_many(filter)
                    .with_options(o)
                    .op_timeout(timeout)
                    .session(s)
                    .run(),
                (_, None) => coll
                    .delete_many(filter)
                    .with_options(o)
                    .op_timeout(timeout)
                    .run(),
            };
            r.map(|r| Bson::Document(doc! { "deletedCount": r.deleted_count as i64 }))
        }
        "updateOne" | "updateMany" => {
            let filter = args.required_doc("filter")?;
            let update = match args.take("update") {
                Some(Bson::Document(d)) => mongo_inline::options::UpdateModifications::from(d),
                Some(Bson::Array(a)) => {
                    let pipeline: Vec<Document> = a
                        .into_iter()
                        .filter_map(|b| b.as_document().cloned())
                        .collect();
                    mongo_inline::options::UpdateModifications::from(pipeline)
                }
                other => return fail(format!("{name}: update {other:?}")),
            };
            let mut o = UpdateOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(b) = args.bool("upsert")? {
                o = o.upsert(b);
            }
            if let Some(a) = args.docs("arrayFilters")? {
                o = o.array_filters(a);
            }
            if let Some(b) = args.bool("bypassDocumentValidation")? {
                o = o.bypass_document_validation(b);
            }
            if let Some(h) = args.hint()? {
                o = o.hint(h);
            }
            if let Some(c) = args.collation()? {
                o = o.collation(c);
            }
            if let Some(l) = args.doc("let")? {
                o = o.let_vars(l);
            }
            if let Some(s) = args.doc("sort")? {
                o = o.sort(s);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            let r = match (name, session) {
                ("updateOne", Some(s)) => coll
                    .update_one(filter, update)
                    .with_options(o)
                    .op_timeout(timeout)
                    .session(s)
                    .run(),
                ("updateOne", None) => coll
                    .update_one(filter, update)
                    .with_options(o)
                    .op_timeout(timeout)
                    .run(),
                (_, Some(s)) => coll
                    .update_many(filter, update)
                    .with_options(o)
                    .op_timeout(timeout)
                    .session(s)
                    .run(),
                (_, None) => coll
                    .update_many(filter, update)
                    .with_options(o)
                    .op_timeout(timeout)
                    .run(),
            };
            r.map(update_result)
        }
        "replaceOne" => {
            let filter = args.required_doc("filter")?;
            let replacement = args.required_doc("replacement")?;
            let mut o = ReplaceOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(b) = args.bool("upsert")? {
                o = o.upsert(b);
            }
            if let Some(b) = args.bool("bypassDocumentValidation")? {
                o = o.bypass_document_validation(b);
            }
            if let Some(h) = args.hint()? {
                o = o.hint(h);
            }
            if let Some(c) = args.collation()? {
                o = o.collation(c);
            }
            if let Some(l) = args.doc("let")? {
                o = o.let_vars(l);
            }
            if let Some(s) = args.doc("sort")? {
                o = o.sort(s);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            match session {
                Some(s) => coll
                    .replace_one(filter, &replacement)
                    .with_options(o)
                    .op_timeout(timeout)
                    .session(s)
                    .run(),
                None => coll
                    .replace_one(filter, &replacement)
                    .with_options(o)
                    .op_timeout(timeout)
                    .run(),
            }
            .map(update_result)
        }
        "find" | "findOne" => {
            let filter = args.doc("filter")?.unwrap_or_default();
            let o = find_options(&mut args, comment)?;
            args.done()?;
            if name == "findOne" {
                in_session!(
                    coll.find_one(filter)
                        .with_options(find_one_options(o))
                        .op_timeout(timeout),
                    session
                )
                .map(|d| d.map(Bson::Document).unwrap_or(Bson::Null))
            } else {
                match session {
                    Some(s) => session_documents_result(
                        coll.find(filter)
                            .with_options(o)
                            .op_timeout(timeout)
                            .op_mode(mode)
                            .session(&mut *s)
                            .run(),
                        s,
                    ),
                    None => documents_result(
                        coll.find(filter)
                            .with_options(o)
                            .op_timeout(timeout)
                            .op_mode(mode)
                            .run(),
                    ),
                }
            }
        }
        "aggregate" => {
            let pipeline = args.docs("pipeline")?.unwrap_or_default();
            let o = aggregate_options(&mut args, comment)?;
            args.done()?;
            let action = coll
                .aggregate(pipeline)
                .with_options(o)
                .op_timeout(timeout)
                .op_mode(mode);
            match session {
                Some(s) => session_documents_result(action.session(&mut *s).run(), s),
                None => documents_result(action.run()),
            }
        }
        "countDocuments" => {
            let filter = args.doc("filter")?.unwrap_or_default();
            let mut o = CountOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(l) = args.int("limit")? {
                o = o.limit(l as u64);
            }
            if let Some(s) = args.int("skip")? {
                o = o.skip(s as u64);
            }
            if let Some(h) = args.hint()? {
                o = o.hint(h);
            }
            if let Some(c) = args.collation()? {
                o = o.collation(c);
            }
            if let Some(m) = args.millis("maxTimeMS")? {
                o = o.max_time(m);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            match session {
                Some(s) => coll
                    .count_documents(filter)
                    .with_options(o)
                    .op_timeout(timeout)
                    .session(s)
                    .run(),
                None => coll
                    .count_documents(filter)
                    .with_options(o)
                    .op_timeout(timeout)
                    .run(),
            }
            .map(|n| Bson::Int64(n as i64))
        }
        "estimatedDocumentCount" => {
            let mut o = EstimatedDocumentCountOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(m) = args.millis("maxTimeMS")? {
                o = o.max_time(m);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            in_session!(
                coll.estimated_document_count()
                    .with_options(o)
                    .op_timeout(timeout),
                session
            )
            .map(|n| Bson::Int64(n as i64))
        }
        "distinct" => {
            let field = match args.take("fieldName") {
                Some(Bson::String(s)) => s,
                other => return fail(format!("distinct: fieldName {other:?}")),
            };
            let filter = args.doc("filter")?.unwrap_or_default();
            let mut o = DistinctOptions::default();
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(c) = args.collation()? {
                o = o.collation(c);
            }
            if let Some(h) = args.hint()? {
                o = o.hint(h);
            }
            if let Some(m) = args.millis("maxTimeMS")? {
                o = o.max_time(m);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            in_session!(
                coll.distinct(&field, filter)
                    .with_options(o)
                    .op_timeout(timeout),
                session
            )
            .map(Bson::Array)
        }
        "findOneAndDelete" => {
            let filter = args.required_doc("filter")?;
            let mut o = FindOneAndDeleteOptions::default();
            if let Some(m) = args.millis("maxTimeMS")? {
                o = o.max_time(m);
            }
            if let Some(b) = args.bool("rawData")? {
                o = o.raw_data(b);
            }
            if let Some(s) = args.doc("sort")? {
                o = o.sort(s);
            }
            if let Some(p) = args.doc("projection")? {
                o = o.projection(p);
            }
            if let Some(h) = args.hint()? {
                o = o.hint(h);
            }
            if let Some(c) = args.collation()? {
                o = o.collation(c);
            }
            if let Some(l) = args.doc("let")? {
                o = o.let_vars(l);
            }
            if let Some(c) = comment {
                o = o.comment(c);
            }
            args.done()?;
            in_session!(
                coll.find_one_and_delete(filter)
                    .with_options(o)
                    .op_timeout(timeout),
                session
            )
            .map(|d| d.map(Bson::Document).unwrap_or(Bson::Null))
        }
        "findOneAndUpdate" | "findOneAndReplace" => {
            let filter = args.required_doc("filter")?;
            let return_document = match args.take("returnDocument") {
                Some(Bson::String(s)) if s == "After" => Some(ReturnDocument::After),
                Some(Bson::String(s)) if s == "Before" => Some(ReturnDocument::Before),
                None => None,
                Some(other) => return fail(format!("returnDocument {other}")),
            };
            let sort = args.doc("sort")?;
            let projection = args.doc("projection")?;
            let upsert = args.bool("upsert")?;
            let bypass = args.bool("bypassDocumentValidation")?;
            let hint = args.hint()?;
            let collation = args.collation()?;
            let let_vars = args.doc("let")?;
            let max_time = args.millis("maxTimeMS")?;
            let r = if name == "findOneAndUpdate" {
                let update = match args.take("update") {
                    Some(Bson::Document(d)) => mongo_inline::options::UpdateModifications::from(d),
                    Some(Bson::Array(a)) => mongo_inline::options::UpdateModifications::from(
                        a.into_iter()
                            .filter_map(|b| b.as_document().cloned())
                            .collect::<Vec<_>>(),
                    ),
                    other => return fail(format!("{name}: update {other:?}")),
                };
                let mut o = FindOneAndUpdateOptions::default();
                if let Some(b) = args.bool("rawData")? {
                    o = o.raw_data(b);
                }
                if let Some(a) = args.docs("arrayFilters")? {
                    o = o.array_filters(a);
                }
                if let Some(v) = return_document {
                    o = o.return_document(v);
                }
                if let Some(v) = sort {
                    o = o.sort(v);
                }
                if let Some(v) = projection {
                    o = o.projection(v);
                }
                if let Some(v) = upsert {
                    o = o.upsert(v);
                }
                if let Some(v) = bypass {
                    o = o.bypass_document_validation(v);
                }
                if let Some(v) = hint {
                    o = o.hint(v);
                }
                if let Some(v) = collation {
                    o = o.collation(v);
                }
                if let Some(v) = let_vars {
                    o = o.let_vars(v);
                }
                if let Some(m) = max_time {
                    o = o.max_time(m);
                }
                if let Some(v) = comment {
                    o = o.comment(v);
                }
                args.done()?;
                in_session!(
                    coll.find_one_and_update(filter, update)
                        .with_options(o)
                        .op_timeout(timeout),
                    session
                )
            } else {
                let replacement = args.required_doc("replacement")?;
                let mut o = FindOneAndReplaceOptions::default();
                if let Some(b) = args.bool("rawData")? {
                    o = o.raw_data(b);
                }
                if let Some(v) = return_document {
                    o = o.return_document(v);
                }
                if let Some(v) = sort {
                    o = o.sort(v);
                }
                if let Some(v) = projection {
                    o = o.projection(v);
                }
                if let Some(v) = upsert {
                    o = o.upsert(v);
                }
                if let Some(v) = bypass {
                    o = o.bypass_document_validation(v);
                }
                if let Some(v) = hint {
                    o = o.hint(v);
                }
                if let Some(v) = collation {
                    o = o.collation(v);
                }
                if let Some(v) = let_vars {
                    o = o.let_vars(v);
                }
                if let Some(m) = max_time {
                    o = o.max_time(m);
                }
                if let Some(v) = comment {
                    o = o.comment(v);
                }
                args.done()?;
                in_session!(
                    coll.find_one_and_replace(filter, &replacement)
                        .with_options(o)
                        .op_timeout(timeout),
                    session
                )
            };
            r.map(|d| d.map(Bson::Document).unwrap_or(Bson::Null))
        }
        "createIndex" => {
            let keys = args.required_doc("keys")?;
            let max_time = args.millis("maxTimeMS")?;
            let mut options = Document::new();
            for key in ["name", "unique", "sparse", "expireAfterSeconds"] {
                if let Some(v) = args.take(key) {
                    options.insert(key, v);
                }
            }
            if let Some(c) = comment {
                args.rest.insert("comment", c);
            }
            let raw_data = args.bool("rawData")?;
            args.done()?;
            let model = if options.is_empty() {
                IndexModel::new(keys)
            } else {
                IndexModel::new(keys).options(options)
            };
            let mut action = coll.create_index(model).op_timeout(timeout);
            if let Some(m) = max_time {
                action = action.max_time(m);
            }
            if let Some(b) = raw_data {
                action = action.raw_data(b);
            }
            in_session!(action, session).map(|created| Bson::String(created.index_name))
        }
        "listIndexes" => {
            let mut action = coll.list_indexes().op_timeout(timeout).op_mode(mode);
            if let Some(b) = args.int("batchSize")? {
                let size = u32::try_from(b)
                    .map_err(|_| format!("listIndexes: batchSize {b} is out of range"))?;
                action = action.batch_size(size);
            }
            if let Some(c) = comment {
                action = action.comment(c);
            }
            if let Some(b) = args.bool("rawData")? {
                action = action.raw_data(b);
            }
            args.done()?;
            match session {
                Some(s) => session_documents_result(action.session(&mut *s).run(), s),
                None => documents_result(action.run()),
            }
        }
        "bulkWrite" => {
            let requests = args.docs("requests")?.unwrap_or_default();
            let models = requests
                .into_iter()
                .map(write_model)
                .collect::<Outcome<Vec<_>>>()?;
            let mut action = coll.bulk_write(models);
            if let Some(b) = args.bool("ordered")? {
                action = action.ordered(b);
            }
            if let Some(b) = args.bool("bypassDocumentValidation")? {
                action = action.bypass_document_validation(b);
            }
            if let Some(l) = args.doc("let")? {
                action = action.let_vars(l);
            }
            if let Some(b) = args.bool("rawData")? {
                action = action.raw_data(b);
            }
            if let Some(c) = comment {
                action = action.comment(c);
            }
            args.done()?;
            in_session!(action.op_timeout(timeout), session).map(bulk_write_result)
        }
        "listIndexNames" => {
            let mut action = coll.list_index_names().op_timeout(timeout);
            if let Some(c) = comment {
                action = action.comment(c);
            }
            args.done()?;
            in_session!(action, session)
                .map(|names| Bson::Array(names.into_iter().map(Bson::String).collect()))
        }
        "dropIndex" => {
            let index = match args.take("name") {
                Some(Bson::String(s)) => s,
                other => return fail(format!("dropIndex: name {other:?}")),
            };
            let max_time = args.millis("maxTimeMS")?;
            if let Some(c) = comment {
                args.rest.insert("comment", c);
            }
            let mut action = coll.drop_index(&index);
            if let Some(b) = args.bool("rawData")? {
                action = action.raw_data(b);
            }
            args.done()?;
            let mut action = action.op_timeout(timeout);
            if let Some(m) = max_time {
                action = action.max_time(m);
            }
            in_session!(action, session).map(|()| Bson::Null)
        }
        "dropIndexes" => {
            let max_time = args.millis("maxTimeMS")?;
            if let Some(c) = comment {
                args.rest.insert("comment", c);
            }
            args.done()?;
            let mut action = coll.drop_indexes().op_timeout(timeout);
            if let Some(m) = max_time {
                action = action.max_time(m);
            }
            in_session!(action, session).map(|()| Bson::Null)
        }
        "createSearchIndex"
        | "createSearchIndexes"
        | "updateSearchIndex"
        | "dropSearchIndex"
        | "listSearchIndexes" => return search_index_operation(coll, name, args, session),
        other => return Err(missing_operation("collection", other)),
    };
    Ok(result)
}

/// An aggregate's options among `args` (on a collection or a database).
fn aggregate_options(args: &mut Args, comment: Option<Bson>) -> Outcome<AggregateOptions> {
    let mut o = AggregateOptions::default();
    if let Some(b) = args.bool("rawData")? {
        o = o.raw_data(b);
    }
    if let Some(b) = args.int("batchSize")? {
        o = o.batch_size(b as u32);
    }
    if let Some(b) = args.bool("allowDiskUse")? {
        o = o.allow_disk_use(b);
    }
    if let Some(b) = args.bool("bypassDocumentValidation")? {
        o = o.bypass_document_validation(b);
    }
    if let Some(h) = args.hint()? {
        o = o.hint(h);
    }
    if let Some(c) = args.collation()? {
        o = o.collation(c);
    }
    if let Some(l) = args.doc("let")? {
        o = o.let_vars(l);
    }
    if let Some(m) = args.millis("maxTimeMS")? {
        o = o.max_time(m);
    }
    if let Some(c) = comment {
        o = o.comment(c);
    }
    if let Some(m) = args.millis("maxAwaitTimeMS")? {
        o = o.max_await_time(m);
    }
    Ok(o)
}

/// A find's options among `args` (find, findOne, createFindCursor).
fn find_options(args: &mut Args, comment: Option<Bson>) -> Outcome<FindOptions> {
    let mut o = FindOptions::default();
    if let Some(b) = args.bool("rawData")? {
        o = o.raw_data(b);
    }
    if let Some(s) = args.doc("sort")? {
        o = o.sort(s);
    }
    if let Some(p) = args.doc("projection")? {
        o = o.projection(p);
    }
    if let Some(l) = args.int("limit")? {
        o = o.limit(l);
    }
    if let Some(s) = args.int("skip")? {
        o = o.skip(s as u64);
    }
    if let Some(b) = args.int("batchSize")? {
        o = o.batch_size(b as u32);
    }
    if let Some(h) = args.hint()? {
        o = o.hint(h);
    }
    if let Some(c) = args.collation()? {
        o = o.collation(c);
    }
    if let Some(l) = args.doc("let")? {
        o = o.let_vars(l);
    }
    if let Some(m) = args.doc("min")? {
        o = o.min(m);
    }
    if let Some(m) = args.doc("max")? {
        o = o.max(m);
    }
    if let Some(b) = args.bool("allowDiskUse")? {
        o = o.allow_disk_use(b);
    }
    if let Some(b) = args.bool("returnKey")? {
        o = o.return_key(b);
    }
    if let Some(b) = args.bool("showRecordId")? {
        o = o.show_record_id(b);
    }
    if let Some(b) = args.bool("noCursorTimeout")? {
        o = o.no_cursor_timeout(b);
    }
    if let Some(b) = args.bool("allowPartialResults")? {
        o = o.allow_partial_results(b);
    }
    if let Some(m) = args.millis("maxTimeMS")? {
        o = o.max_time(m);
    }
    if let Some(c) = comment {
        o = o.comment(c);
    }
    match args.take("cursorType") {
        None => {}
        Some(Bson::String(kind)) if kind == "nonTailable" => {
            o = o.cursor_type(mongo_inline::options::CursorType::NonTailable);
        }
        Some(Bson::String(kind)) if kind == "tailable" => {
            o = o.cursor_type(mongo_inline::options::CursorType::Tailable);
        }
        Some(Bson::String(kind)) if kind == "tailableAwait" => {
            o = o.cursor_type(mongo_inline::options::CursorType::TailableAwait);
        }
        Some(other) => return fail(format!("cursorType {other}")),
    }
    if let Some(m) = args.millis("maxAwaitTimeMS")? {
        o = o.max_await_time(m);
    }
    Ok(o)
}

/// The options of `runCursorCommand` and `createCommandCursor`.
fn cursor_command_options(args: &mut Args) -> Outcome<RunCursorCommandOptions> {
    let mut o = RunCursorCommandOptions::default();
    if let Some(b) = args.int("batchSize")? {
        o = o.batch_size(b as u32);
    }
    if let Some(m) = args.millis("maxTimeMS")? {
        o = o.max_time(m);
    }
    if let Some(c) = args.take("comment") {
        o = o.comment(c);
    }
    match args.take("cursorType") {
        None => {}
        Some(Bson::String(t)) if t == "tailable" => {
            o = o.cursor_type(mongo_inline::options::CursorType::Tailable)
        }
        Some(Bson::String(t)) if t == "tailableAwait" => {
            o = o.cursor_type(mongo_inline::options::CursorType::TailableAwait);
        }
        Some(other) => return fail(format!("cursorType {other}")),
    }
    Ok(o)
}

fn database_operation(
    db: &Database,
    name: &str,
    mut args: Args,
    session: Option<&mut ClientSession>,
) -> Outcome<DriverResult> {
    let timeout = args.millis("timeoutMS")?;
    let mode = match name {
        "aggregate" | "listCollections" | "listCollectionObjects" | "runCursorCommand" => {
            timeout_mode(&mut args)?
        }
        _ => None,
    };
    let result = match name {
        "runCursorCommand" => {
            let command = args.required_doc("command")?;
            let _ = args.take("commandName");
            let options = cursor_command_options(&mut args)?;
            args.done()?;
            let action = db
                .run_cursor_command(command)
                .with_options(options)
                .op_timeout(timeout)
                .op_mode(mode);
            match session {
                Some(s) => session_documents_result(action.session(&mut *s).run(), s),
                None => documents_result(action.run()),
            }
        }
        "runCommand" => {
            let command = args.required_doc("command")?;
            let _ = args.take("commandName");
            let mut action = db.run_command(command).op_timeout(timeout);
            if let Some(rp) = args.doc("readPreference")? {
                action = action.selection_criteria(
                    mongo_inline::options::SelectionCriteria::ReadPreference(read_preference(
                        &rp,
                        "runCommand",
                    )?),
                );
            }
            args.done()?;
            in_session!(action, session).map(Bson::Document)
        }
        "createCollection" => {
            let collection = match args.take("collection") {
                Some(Bson::String(s)) => s,
                other => return fail(format!("createCollection: collection {other:?}")),
            };
            let mut o = CreateCollectionOptions::default();
            if let Some(v) = args.doc("validator")? {
                o = o.validator(v);
            }
            if let Some(v) = args.bool("capped")? {
                o = o.capped(v);
            }
            if let Some(v) = args.int("size")? {
                o = o.size(v as u64);
            }
            if let Some(v) = args.int("max")? {
                o = o.max(v as u64);
            }
            if let Some(v) = args.doc("timeseries")? {
                o = o.timeseries(from_spec_document(v, "timeseries")?);
            }
            if let Some(v) = args.int("expireAfterSeconds")? {
                let Ok(seconds) = u64::try_from(v) else {
                    return fail(format!("createCollection: expireAfterSeconds {v}"));
                };
                o = o.expire_after_seconds(Duration::from_secs(seconds));
            }
            if let Some(v) = args.doc("clusteredIndex")? {
                o = o.clustered_index(from_spec_document(v, "clusteredIndex")?);
            }
            if let Some(v) = args.doc("changeStreamPreAndPostImages")? {
                o = o.change_stream_pre_and_post_images(from_spec_document(
                    v,
                    "changeStreamPreAndPostImages",
                )?);
            }
            if let Some(Bson::String(v)) = args.take("viewOn") {
                o = o.view_on(v);
            }
            if let Some(v) = args.docs("pipeline")? {
                o = o.pipeline(v);
            }
            args.done()?;
            in_session!(
                db.create_collection(&collection)
                    .with_options(o)
                    .op_timeout(timeout),
                session
            )
            .map(|_| Bson::Null)
        }
        // The driver has no collMod helper (nor has the official one): the
        // operation is the command, with the arguments as its fields.
        "modifyCollection" => {
            let collection = match args.take("collection") {
                Some(Bson::String(s)) => s,
                other => return fail(format!("modifyCollection: collection {other:?}")),
            };
            let mut command = doc! { "collMod": collection };
            command.extend(std::mem::take(&mut args.rest));
            in_session!(db.run_command(command), session).map(Bson::Document)
        }
        "dropCollection" => {
            let collection = match args.take("collection") {
                Some(Bson::String(s)) => s,
                other => return fail(format!("dropCollection: collection {other:?}")),
            };
            args.done()?;
            let coll = db.collection::<Document>(&collection);
            in_session!(coll.drop().op_timeout(timeout), session).map(|()| Bson::Null)
        }
        "aggregate" => {
            let pipeline = args.docs("pipeline")?.unwrap_or_default();
            let comment = args.take("comment");
            let o = aggregate_options(&mut args, comment)?;
            args.done()?;
            let action = db
                .aggregate(pipeline)
                .with_options(o)
                .op_timeout(timeout)
                .op_mode(mode);
            match session {
                Some(s) => session_documents_result(action.session(&mut *s).run(), s),
                None => documents_result(action.run()),
            }
        }
        "listCollectionNames" => {
            let mut action = db.list_collection_names().op_timeout(timeout);
            if let Some(f) = args.doc("filter")? {
                action = action.filter(f);
            }
            if let Some(c) = args.take("comment") {
                action = action.comment(c);
            }
            args.done()?;
            in_session!(action, session)
                .map(|n| Bson::Array(n.into_iter().map(Bson::String).collect()))
        }
        "listCollections" | "listCollectionObjects" => {
            let mut action = db.list_collections().op_timeout(timeout).op_mode(mode);
            if let Some(f) = args.doc("filter")? {
                action = action.filter(f);
            }
            if let Some(b) = args.bool("rawData")? {
                action = action.raw_data(b);
            }
            if let Some(b) = args.int("batchSize")? {
                action = action.batch_size(b as u32);
            }
            if let Some(c) = args.take("comment") {
                action = action.comment(c);
            }
            args.done()?;
            let specs = match session {
                Some(s) => action.session(s).run().and_then(|mut cursor| {
                    cursor.iter(s).collect::<mongo_inline::Result<Vec<_>>>()
                }),
                None => action
                    .run()
                    .and_then(|cursor| cursor.collect::<mongo_inline::Result<Vec<_>>>()),
            };
            specs.map(|specs| Bson::Array(specs.iter().map(collection_document).collect()))
        }
        other => return Err(missing_operation("database", other)),
    };
    Ok(result)
}

fn client_operation(
    client: &Client,
    name: &str,
    mut args: Args,
    session: Option<&mut ClientSession>,
) -> Outcome<DriverResult> {
    // clientBulkWrite reads its own arguments.
    let timeout = match name {
        "clientBulkWrite" => None,
        _ => args.millis("timeoutMS")?,
    };
    match name {
        "listDatabaseNames" => {
            let mut action = client.list_database_names().op_timeout(timeout);
            if let Some(f) = args.doc("filter")? {
                action = action.filter(f);
            }
            if let Some(b) = args.bool("authorizedDatabases")? {
                action = action.authorized_databases(b);
            }
            if let Some(c) = args.take("comment") {
                action = action.comment(c);
            }
            args.done()?;
            Ok(in_session!(action, session)
                .map(|n| Bson::Array(n.into_iter().map(Bson::String).collect())))
        }
        "listDatabases" | "listDatabaseObjects" => {
            let mut action = client.list_databases().op_timeout(timeout);
            if let Some(f) = args.doc("filter")? {
                action = action.filter(f);
            }
            if let Some(b) = args.bool("authorizedDatabases")? {
                action = action.authorized_databases(b);
            }
            if let Some(c) = args.take("comment") {
                action = action.comment(c);
            }
            args.done()?;
            Ok(in_session!(action, session).map(|specs| {
                Bson::Array(
                    specs
                        .into_iter()
                        .map(|d| {
                            let mut out = doc! { "name": d.name };
                            out.insert("sizeOnDisk", d.size_on_disk as i64);
                            out.insert("empty", d.empty);
                            Bson::Document(out)
                        })
                        .collect(),
                )
            }))
        }
        "clientBulkWrite" => bulk_write::client_bulk_write(client, args, session),
        "appendMetadata" => {
            let mut options = args.required_doc("driverInfoOptions")?;
            let mut text = |key: &str| match options.remove(key) {
                None => Ok(None),
                Some(Bson::String(s)) => Ok(Some(s)),
                Some(other) => fail(format!("appendMetadata: {key} {other} is not a string")),
            };
            let info = mongo_inline::options::DriverInfo::builder()
                .name(text("name")?.ok_or("appendMetadata: driverInfoOptions.name is required")?)
                .version(text("version")?)
                .platform(text("platform")?)
                .build();
            if let Some(other) = options.keys().next() {
                return skip(format!(
                    "driverInfoOptions.{other} of appendMetadata not supported by the runner"
                ));
            }
            args.done()?;
            Ok(client.append_metadata(info).map(|()| Bson::Null))
        }
        "dropDatabase" => {
            let database = match args.take("database") {
                Some(Bson::String(s)) => s,
                other => return fail(format!("dropDatabase: database {other:?}")),
            };
            args.done()?;
            Ok(in_session!(client.database(&database).drop(), session).map(|()| Bson::Null))
        }
        other => Err(missing_operation("client", other)),
    }
}

fn session_operation(
    session: &mut ClientSession,
    name: &str,
    mut args: Args,
) -> Outcome<DriverResult> {
    match name {
        "startTransaction" => {
            let o = transaction_options(&mut args)?;
            args.done()?;
            Ok(session
                .start_transaction()
                .with_options(o)
                .run()
                .map(|()| Bson::Null))
        }
        "commitTransaction" => {
            let timeout = args.millis("timeoutMS")?;
            args.done()?;
            let commit = session.commit_transaction();
            let commit = match timeout {
                Some(t) => commit.timeout(t),
                None => commit,
            };
            Ok(commit.run().map(|()| Bson::Null))
        }
        "abortTransaction" => {
            let timeout = args.millis("timeoutMS")?;
            args.done()?;
            let abort = session.abort_transaction();
            let abort = match timeout {
                Some(t) => abort.timeout(t),
                None => abort,
            };
            Ok(abort.run().map(|()| Bson::Null))
        }
        "endSession" => {
            args.done()?;
            Ok(Ok(Bson::Null))
        }
        "getSnapshotTime" => {
            args.done()?;
            match session.snapshot_time() {
                Some(t) => Ok(Ok(Bson::Timestamp(t))),
                None => fail("getSnapshotTime: the session has no snapshot time"),
            }
        }
        other => Err(missing_operation("session", other)),
    }
}

/// A client entity's `serverApi: {version, strict?, deprecationErrors?}`.
fn server_api(spec: &Document) -> Outcome<mongo_inline::options::ServerApi> {
    let mut version = None;
    let (mut strict, mut deprecation_errors) = (None, None);
    for (key, value) in spec {
        match (key.as_str(), value) {
            ("version", Bson::String(v)) => {
                version = Some(
                    v.parse::<mongo_inline::options::ServerApiVersion>()
                        .map_err(|e| format!("serverApi: {e}"))?,
                )
            }
            ("strict", Bson::Boolean(b)) => strict = Some(*b),
            ("deprecationErrors", Bson::Boolean(b)) => deprecation_errors = Some(*b),
            (other, _) => return skip(format!("serverApi.{other} not supported by the runner")),
        }
    }
    let mut api = mongo_inline::options::ServerApi::builder()
        .version(version.ok_or("serverApi without a version")?)
        .build();
    api.strict = strict;
    api.deprecation_errors = deprecation_errors;
    Ok(api)
}

/// One `bulkWrite` request (`{insertOne: {document}}`, `{updateOne: {...}}`,
/// ...), read by the library's parser (the C ABI's too).
fn write_model(request: Document) -> Outcome<mongo_inline::options::CollectionWriteModel> {
    mongo_inline::options::CollectionWriteModel::from_document(request)
        .or_else(|e| fail(format!("bulkWrite request: {e}")))
}

/// A search index model (`{definition, name?, type?}`).
fn search_index_model(model: Document) -> Outcome<mongo_inline::options::SearchIndexModel> {
    use mongo_inline::options::{SearchIndexModel, SearchIndexType};
    let mut args = Args {
        operation: "search index model".into(),
        rest: model,
    };
    let definition = args.required_doc("definition")?;
    let name = match args.take("name") {
        None => None,
        Some(Bson::String(n)) => Some(n),
        Some(other) => return fail(format!("search index name {other}")),
    };
    let index_type = match args.take("type") {
        None => None,
        Some(Bson::String(t)) if t == "search" => Some(SearchIndexType::Search),
        Some(Bson::String(t)) if t == "vectorSearch" => Some(SearchIndexType::VectorSearch),
        Some(other) => return fail(format!("search index type {other}")),
    };
    args.done()?;
    let mut built = SearchIndexModel::builder().definition(definition).build();
    built.name = name;
    built.index_type = index_type;
    Ok(built)
}

/// The Atlas search index helpers.
fn search_index_operation(
    coll: &Collection<Document>,
    name: &str,
    mut args: Args,
    session: Option<&mut ClientSession>,
) -> Outcome<DriverResult> {
    let mut index_name = || match args.take("name") {
        Some(Bson::String(n)) => Ok(n),
        other => fail(format!("{name}: name {other:?}")),
    };
    let result = match name {
        "createSearchIndex" => {
            let model = search_index_model(args.required_doc("model")?)?;
            args.done()?;
            in_session!(coll.create_search_index(model), session).map(Bson::String)
        }
        "createSearchIndexes" => {
            let models = args
                .docs("models")?
                .unwrap_or_default()
                .into_iter()
                .map(search_index_model)
                .collect::<Outcome<Vec<_>>>()?;
            args.done()?;
            in_session!(coll.create_search_indexes(models), session)
                .map(|names| Bson::Array(names.into_iter().map(Bson::String).collect()))
        }
        "updateSearchIndex" => {
            let index = index_name()?;
            let definition = args.required_doc("definition")?;
            args.done()?;
            in_session!(coll.update_search_index(index, definition), session).map(|()| Bson::Null)
        }
        "dropSearchIndex" => {
            let index = index_name()?;
            args.done()?;
            in_session!(coll.drop_search_index(index), session).map(|()| Bson::Null)
        }
        _ => {
            let mut action = coll.list_search_indexes();
            if let Some(Bson::String(n)) = args.take("name") {
                action = action.name(n);
            }
            if let Some(options) = args.doc("aggregationOptions")? {
                let mut o = AggregateOptions::default();
                let mut options = Args {
                    operation: "aggregationOptions".into(),
                    rest: options,
                };
                if let Some(b) = options.int("batchSize")? {
                    o = o.batch_size(b as u32);
                }
                options.done()?;
                action = action.aggregate_options(o);
            }
            args.done()?;
            let documents = |cursor: mongo_inline::Cursor<Document>| {
                cursor
                    .map(|d| d.map(Bson::Document))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Bson::Array)
            };
            match session {
                Some(s) => action.session(s).run().and_then(|mut c| {
                    let mut out = Vec::new();
                    while let Some(d) = c.next(s) {
                        out.push(Bson::Document(d?));
                    }
                    Ok(Bson::Array(out))
                }),
                None => action.run().and_then(documents),
            }
        }
    };
    Ok(result)
}

/// A client's current topology description: the last one it published
/// (its first comes as the topology opens).
fn current_topology(client: &ClientEntity) -> Outcome<TopologyDescription> {
    client
        .recorder
        .sdam()
        .into_iter()
        .rev()
        .find_map(|e| match e {
            SdamEvent::TopologyDescriptionChanged(e) => Some(e.new_description.clone()),
            _ => None,
        })
        .ok_or_else(|| Failure::Fail("the client has published no topology description".into()))
}

/// The primary a topology description knows, if any.
fn primary_of(description: &TopologyDescription) -> Option<mongo_inline::ServerAddress> {
    description
        .servers
        .values()
        .find(|s| s.server_type == mongo_inline::ServerType::RsPrimary)
        .map(|s| s.address.clone())
}

/// An operation the runner has no mapping for: a skip when the driver
/// leaves it out on purpose under a quoted rule, else an error, as
/// unified-test-format.md asks ("the test runner MUST raise an error for an
/// unsupported operation").
fn missing_operation(object: &str, name: &str) -> Failure {
    match super::skips::intentionally_unimplemented(name) {
        Some(rule) => Failure::Skip(rule.to_string()),
        None => Failure::Fail(format!(
            "{object} operation {name} not implemented in the runner"
        )),
    }
}

/// A `listCollections` entry as the server sends it.
fn collection_document(spec: &mongo_inline::results::CollectionSpecification) -> Bson {
    use mongo_inline::results::CollectionType;
    let kind = match spec.collection_type {
        CollectionType::Collection => "collection",
        CollectionType::View => "view",
        CollectionType::Timeseries => "timeseries",
        _ => "other",
    };
    let mut info = doc! { "readOnly": spec.info.read_only };
    if let Some(uuid) = &spec.info.uuid {
        info.insert("uuid", uuid.clone());
    }
    let mut out = doc! {
        "name": spec.name.clone(),
        "type": kind,
        "options": as_document(&spec.options),
        "info": info,
    };
    if let Some(id_index) = &spec.id_index {
        out.insert("idIndex", as_document(id_index));
    }
    Bson::Document(out)
}

/// The transaction options among `args` (startTransaction, withTransaction).
fn transaction_options(args: &mut Args) -> Outcome<mongo_inline::options::TransactionOptions> {
    let mut o = mongo_inline::options::TransactionOptions::default();
    if let Some(rc) = args.doc("readConcern")? {
        let level = rc.get_str("level").map_err(|e| e.to_string())?;
        o = o.with_read_concern(ReadConcern::new(level));
    }
    if let Some(wc) = args.take("writeConcern") {
        o = o.with_write_concern(write_concern(&wc)?);
    }
    if let Some(m) = args.millis("maxCommitTimeMS")? {
        o.max_commit_time = Some(m);
    }
    if let Some(rp) = args.doc("readPreference")? {
        o.selection_criteria = Some(read_preference(&rp, "transaction")?.into());
    }
    Ok(o)
}

/// The error's (code, code name, is it from the server).
fn error_facts(error: &mongo_inline::Error) -> (Option<i32>, Option<String>, bool) {
    match error.kind() {
        ErrorKind::Command(c) => (Some(c.code), Some(c.code_name.clone()), true),
        ErrorKind::Write(WriteFailure::WriteError(w)) => (Some(w.code), w.code_name.clone(), true),
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            (Some(w.code), Some(w.code_name.clone()), true)
        }
        ErrorKind::InsertMany(i) => {
            let first = i.write_errors.iter().flatten().next();
            match (first, &i.write_concern_error) {
                (Some(w), _) => (Some(w.code), w.code_name.clone(), true),
                (None, Some(w)) => (Some(w.code), Some(w.code_name.clone()), true),
                (None, None) => (None, None, true),
            }
        }
        ErrorKind::CollectionBulkWrite(b) => {
            let first = b.write_errors.first();
            match (first, &b.write_concern_error) {
                (Some(w), _) => (Some(w.code), w.code_name.clone(), true),
                (None, Some(w)) => (Some(w.code), Some(w.code_name.clone()), true),
                (None, None) => (None, None, true),
            }
        }
        ErrorKind::BulkWrite(b) => match &error.source {
            Some(source) => error_facts(source),
            None => {
                let first = b
                    .write_errors
                    .iter()
                    .min_by_key(|(i, _)| **i)
                    .map(|(_, w)| w);
                match (first, b.write_concern_errors.first()) {
                    (Some(w), _) => (Some(w.code), w.code_name.clone(), true),
                    (None, Some(w)) => (Some(w.code), Some(w.code_name.clone()), true),
                    (None, None) => (None, None, true),
                }
            }
        },
        _ => (None, None, false),
    }
}

fn ids_by_index(m: impl IntoIterator<Item = (usize, Bson)>) -> Document {
    let sorted: std::collections::BTreeMap<usize, Bson> = m.into_iter().collect();
    sorted
        .into_iter()
        .map(|(i, id)| (i.to_string(), id))
        .collect()
}

/// A bulk write's result as the format's `expectResult` shows it.
fn bulk_write_result(r: mongo_inline::results::BulkWriteResult) -> Bson {
    Bson::Document(doc! {
        "insertedCount": r.inserted_count as i64,
        "matchedCount": r.matched_count as i64,
        "modifiedCount": r.modified_count as i64,
        "deletedCount": r.deleted_count as i64,
        "upsertedCount": r.upserted_count as i64,
        "insertedIds": ids_by_index(r.inserted_ids),
        "upsertedIds": ids_by_index(r.upserted_ids),
    })
}

/// What a failed bulk write or insert_many did before it failed (the
/// format's `expectError.expectResult`), as a bulk write result.
fn partial_result(error: &mongo_inline::Error) -> Option<Bson> {
    match error.kind() {
        ErrorKind::CollectionBulkWrite(failure) => {
            Some(bulk_write_result(failure.partial_result.clone()))
        }
        ErrorKind::InsertMany(failure) => Some(Bson::Document(doc! {
            "insertedCount": failure.inserted_ids.len() as i64,
            "matchedCount": 0_i64,
            "modifiedCount": 0_i64,
            "deletedCount": 0_i64,
            "upsertedCount": 0_i64,
            "insertedIds": ids_by_index(failure.inserted_ids.clone()),
            "upsertedIds": {},
        })),
        _ => None,
    }
}

fn check_error(expected: &Document, error: &mongo_inline::Error) -> Outcome {
    let (code, code_name, from_server) = error_facts(error);
    for (key, value) in expected {
        match key.as_str() {
            "isError" => {}
            "isClientError" => {
                let client = !from_server;
                if value.as_bool() != Some(client) {
                    return fail(format!("isClientError {value}, but the error is {error:?}"));
                }
            }
            "isTimeoutError" => {
                // Only the driver's timeoutMS error: a socket timeout
                // outside CSOT is a network error, not this.
                let timeout = matches!(error.kind(), ErrorKind::Timeout { .. });
                if value.as_bool() != Some(timeout) {
                    return fail(format!("isTimeoutError {value}, but the error is {error}"));
                }
            }
            "errorContains" => {
                let needle = value.as_str().unwrap_or_default().to_lowercase();
                if !error.to_string().to_lowercase().contains(&needle) {
                    return fail(format!("error {error} does not contain {needle:?}"));
                }
            }
            "errorCode" => {
                let want = match value {
                    Bson::Int32(i) => i64::from(*i),
                    Bson::Int64(i) => *i,
                    other => return fail(format!("errorCode {other} is not an integer")),
                };
                // A server-generated response's code; client errors have none.
                if !from_server || code.map(i64::from) != Some(want) {
                    return fail(format!(
                        "errorCode {value}, got {code:?} from the server = {from_server} ({error})"
                    ));
                }
            }
            "errorCodeName" => {
                let want = value
                    .as_str()
                    .ok_or_else(|| format!("errorCodeName {value} is not a string"))?;
                let same = code_name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(want));
                if !from_server || !same {
                    return fail(format!(
                        "errorCodeName {value}, got {code_name:?} from the server = {from_server} ({error})"
                    ));
                }
            }
            "errorLabelsContain" => {
                for label in value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Bson::as_str)
                {
                    if !error.contains_label(label) {
                        return fail(format!("error lacks label {label}: {error:?}"));
                    }
                }
            }
            "errorLabelsOmit" => {
                for label in value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Bson::as_str)
                {
                    if error.contains_label(label) {
                        return fail(format!("error has label {label}: {error:?}"));
                    }
                }
            }
            "errorResponse" => {
                // The server's whole reply, matched as a root document.
                // A client bulk write that stopped on a command error
                // carries it as its source.
                let failed = match (error.kind(), &error.source) {
                    (ErrorKind::BulkWrite(_), Some(source)) => source.kind(),
                    (kind, _) => kind,
                };
                let response = match failed {
                    ErrorKind::Command(command) => command.raw_response.clone(),
                    _ => None,
                };
                let Some(response) = response else {
                    return fail(format!(
                        "errorResponse {value}, but no server reply in {error}"
                    ));
                };
                matches(
                    value,
                    Some(&Bson::Document(response)),
                    true,
                    &EntityMap(HashMap::new()),
                )
                .map_err(|e| Failure::Fail(format!("errorResponse: {e}")))?;
            }
            "expectResult" if matches!(error.kind(), ErrorKind::BulkWrite(_)) => {
                bulk_write::check_error_field("expectResult", value, error).unwrap_or(Ok(()))?;
            }
            "expectResult" => {
                let Some(partial) = partial_result(error) else {
                    return fail(format!(
                        "expectResult {value}, but {error} has no partial result"
                    ));
                };
                expect_result("bulkWrite", value, &partial, &EntityMap(HashMap::new()))
                    .map_err(|e| Failure::Fail(format!("expectResult {partial}: {e}")))?;
            }
            other => match bulk_write::check_error_field(other, value, error) {
                Some(outcome) => outcome?,
                None => return skip(format!("expectError.{other} not supported by the runner")),
            },
        }
    }
    Ok(())
}

/// `findOne`'s options out of the `find` options the runner parsed (the
/// cursor's own, such as `batchSize`, do not apply to one document).
fn find_one_options(
    o: mongo_inline::options::FindOptions,
) -> mongo_inline::options::FindOneOptions {
    let mut one = mongo_inline::options::FindOneOptions::default();
    one.allow_partial_results = o.allow_partial_results;
    one.collation = o.collation;
    one.comment = o.comment;
    one.hint = o.hint;
    one.max = o.max;
    one.max_time = o.max_time;
    one.min = o.min;
    one.projection = o.projection;
    one.read_concern = o.read_concern;
    one.return_key = o.return_key;
    one.selection_criteria = o.selection_criteria;
    one.show_record_id = o.show_record_id;
    one.skip = o.skip;
    one.sort = o.sort;
    one.raw_data = o.raw_data;
    one.let_vars = o.let_vars;
    one
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::server::TestServer;

    fn deployment() -> &'static Deployment {
        let server = TestServer::shared();
        Box::leak(Box::new(Deployment {
            topology: "replicaset",
            uri: server.uri(),
            multi_uri: None,
            internal: Client::with_uri_str(server.uri()).expect("internal client"),
        }))
    }

    /// Runs one test of `operations` with a client `client0` (observing
    /// command started events), a collection `coll0` and a session.
    fn run(operations: Vec<Bson>, expect_events: Option<Vec<Bson>>) -> Outcome {
        // One at a time: each run kills all sessions and recreates the
        // collection on the shared server, as a test run does.
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let file = doc! {
            "createEntities": [
                { "client": { "id": "client0", "observeEvents": ["commandStartedEvent"] } },
                { "database": { "id": "db0", "client": "client0", "databaseName": "runner_rules" } },
                { "collection": { "id": "coll0", "database": "db0", "collectionName": "c" } },
                { "session": { "id": "session0", "client": "client0" } },
            ],
            "initialData": [{ "databaseName": "runner_rules", "collectionName": "c", "documents": [{ "_id": 1, "x": 1 }] }],
        };
        let mut test = doc! { "description": "t", "operations": operations };
        if let Some(events) = expect_events {
            test.insert(
                "expectEvents",
                vec![Bson::Document(
                    doc! { "client": "client0", "events": events },
                )],
            );
        }
        TestRun::new(deployment()).run_test(&file, &test)
    }

    fn failed(outcome: Outcome) -> bool {
        matches!(outcome, Err(Failure::Fail(_)))
    }

    #[test]
    fn saving_a_result_over_an_existing_entity_is_an_error() {
        let find = |save: &str| {
            Bson::Document(doc! {
                "name": "find", "object": "coll0", "arguments": { "filter": {} },
                "saveResultAsEntity": save,
            })
        };
        assert!(run(vec![find("r")], None).is_ok());
        assert!(failed(run(vec![find("r"), find("r")], None)));
        assert!(failed(run(vec![find("coll0")], None)));
    }

    #[test]
    fn an_argument_of_the_wrong_type_is_an_error() {
        let find = |limit: Bson| {
            Bson::Document(doc! {
                "name": "find", "object": "coll0",
                "arguments": { "filter": {}, "limit": limit },
            })
        };
        assert!(run(vec![find(Bson::Int32(1))], None).is_ok());
        assert!(failed(run(vec![find(Bson::String("1".into()))], None)));
        let mut args = Args {
            operation: "insertMany".into(),
            rest: doc! { "ordered": "yes" },
        };
        assert!(matches!(args.bool("ordered"), Err(Failure::Fail(_))));
    }

    #[test]
    fn connections_checked_out_are_counted_not_assumed() {
        let assert_checked_out = |n: i32| {
            Bson::Document(doc! {
                "name": "assertNumberConnectionsCheckedOut", "object": "testRunner",
                "arguments": { "client": "client0", "connections": n },
            })
        };
        assert!(run(vec![assert_checked_out(0)], None).is_ok());
        // Not skipped: between operations this client holds no socket.
        assert!(failed(run(vec![assert_checked_out(1)], None)));
    }

    #[test]
    fn a_wait_for_a_command_event_that_never_comes_fails() {
        let wait = |count: i32| {
            Bson::Document(doc! {
                "name": "waitForEvent", "object": "testRunner",
                "arguments": { "client": "client0", "event": { "commandStartedEvent": {} }, "count": count },
            })
        };
        let find = Bson::Document(
            doc! { "name": "find", "object": "coll0", "arguments": { "filter": {} } },
        );
        assert!(run(vec![find.clone(), wait(1)], None).is_ok());
        assert!(failed(run(vec![find, wait(2)], None)));
    }

    #[test]
    fn topology_descriptions_are_recorded_asserted_and_compared() {
        let op = |name: &str, arguments: Document| {
            Bson::Document(doc! { "name": name, "object": "testRunner", "arguments": arguments })
        };
        let record = |id: &str| {
            op(
                "recordTopologyDescription",
                doc! { "client": "client0", "id": id },
            )
        };
        let assert_type = |id: &str, kind: &str| {
            op(
                "assertTopologyType",
                doc! { "topologyDescription": id, "topologyType": kind },
            )
        };
        let wait_for_change = |prior: &str| {
            op(
                "waitForPrimaryChange",
                doc! { "client": "client0", "priorTopologyDescription": prior, "timeoutMS": 100 },
            )
        };
        let find = Bson::Document(
            doc! { "name": "find", "object": "coll0", "arguments": { "filter": {} } },
        );
        let mut known = vec![record("before"), find, record("after")];
        // The runner's tests connect directly to a replica set member.
        known.push(assert_type("after", "Single"));
        // No primary before the first operation: discovering one is a change.
        known.push(wait_for_change("before"));
        let outcome = run(known.clone(), None);
        assert!(outcome.is_ok(), "{outcome:?}");
        assert!(failed(run(
            vec![record("t"), assert_type("t", "Sharded")],
            None
        )));
        let mut wrong = known.clone();
        wrong.push(assert_type("after", "ReplicaSetWithPrimary"));
        assert!(failed(run(wrong, None)));
        assert!(failed(run(vec![record("t"), record("t")], None)));
        // Nothing changes the primary while no operation runs.
        match run([known, vec![wait_for_change("after")]].concat(), None) {
            Err(Failure::Skip(reason)) => assert_eq!(
                crate::unified::skips::skip_kind(&reason),
                Some(crate::unified::skips::SkipKind::SingleThreaded),
                "{reason}"
            ),
            other => panic!("expected a single-threaded skip, got {other:?}"),
        }
    }

    #[test]
    fn only_the_runners_own_configure_fail_point_events_are_ignored() {
        let fail_point = doc! {
            "configureFailPoint": "failCommand", "mode": "off",
        };
        let by_runner = Bson::Document(doc! {
            "name": "failPoint", "object": "testRunner",
            "arguments": { "client": "client0", "failPoint": fail_point.clone() },
        });
        let by_test = Bson::Document(doc! {
            "name": "runCommand", "object": "db0",
            "arguments": { "commandName": "configureFailPoint", "command": fail_point },
        });
        let started =
            |name: &str| Bson::Document(doc! { "commandStartedEvent": { "commandName": name } });
        assert!(run(vec![by_runner.clone()], Some(vec![])).is_ok());
        assert!(run(
            vec![by_runner, by_test],
            Some(vec![started("configureFailPoint")])
        )
        .is_ok());
    }

    #[test]
    fn a_targeted_fail_point_needs_a_pinned_session() {
        let targeted = Bson::Document(doc! {
            "name": "targetedFailPoint", "object": "testRunner",
            "arguments": { "session": "session0", "failPoint": { "configureFailPoint": "failCommand", "mode": "off" } },
        });
        assert!(failed(run(vec![targeted], None)));
    }

    #[test]
    fn error_assertions_follow_the_spec() {
        let client_error = mongo_inline::Error::client("refused by the driver");
        assert!(check_error(&doc! { "isClientError": true }, &client_error).is_ok());
        // A client error has no server code, whatever its kind reports.
        assert!(check_error(&doc! { "errorCode": 1 }, &client_error).is_err());
        let timeout = mongo_inline::Error::new(ErrorKind::Timeout {
            message: "deadline".into(),
        });
        assert!(check_error(&doc! { "isTimeoutError": true }, &timeout).is_ok());
        let socket_timeout = mongo_inline::Error::network(
            None,
            "reading",
            std::io::Error::new(std::io::ErrorKind::TimedOut, "socket timeout"),
        );
        assert!(check_error(&doc! { "isTimeoutError": true }, &socket_timeout).is_err());
        assert!(check_error(&doc! { "isTimeoutError": false }, &socket_timeout).is_ok());

        let server_error = deployment()
            .internal
            .database("admin")
            .run_command(doc! { "noSuchCommandHere": 1 })
            .run()
            .unwrap_err();
        let code = server_error.code().expect("a server code");
        assert!(check_error(&doc! { "errorCode": code }, &server_error).is_ok());
        assert!(check_error(&doc! { "errorCode": code + 1 }, &server_error).is_err());
        // A mistyped expected code is the test's error, not a match.
        assert!(check_error(&doc! { "errorCode": code.to_string() }, &server_error).is_err());
        assert!(check_error(&doc! { "errorCode": f64::from(code) }, &server_error).is_err());
        assert!(check_error(&doc! { "errorCodeName": "commandnotfound" }, &server_error).is_ok());
        assert!(check_error(&doc! { "errorCodeName": 59 }, &server_error).is_err());
        // errorResponse: the server's whole reply, as a root document.
        let response = |d: Document| check_error(&doc! { "errorResponse": d }, &server_error);
        assert!(response(doc! { "code": code, "errmsg": { "$$type": "string" } }).is_ok());
        assert!(response(doc! { "code": code + 1 }).is_err());
        assert!(response(doc! { "noSuchField": { "$$exists": true } }).is_err());
        assert!(check_error(&doc! { "errorResponse": { "code": 1 } }, &client_error).is_err());

        // expectResult: what a failed insert_many did before it failed.
        let coll = deployment()
            .internal
            .database("unified_runner_tests")
            .collection::<Document>("partial_results");
        let _ = coll.drop().run();
        let duplicate = coll
            .insert_many([doc! { "_id": 1 }, doc! { "_id": 1 }])
            .run()
            .unwrap_err();
        let partial = |d: Document| check_error(&doc! { "expectResult": d }, &duplicate);
        assert!(partial(doc! { "insertedCount": 1, "insertedIds": { "0": 1 } }).is_ok());
        assert!(partial(doc! { "insertedCount": 2 }).is_err());
        assert!(check_error(&doc! { "expectResult": {} }, &server_error).is_err());
    }

    #[test]
    fn service_and_server_connection_ids_are_compared() {
        use bson::oid::ObjectId;
        assert!(has_service_id(Some(ObjectId::new())));
        assert!(!has_service_id(Some(ObjectId::from_bytes([0; 12]))));
        assert!(!has_service_id(None));
        assert!(has_server_connection_id(Some(7)));
        assert!(!has_server_connection_id(Some(0)));
        assert!(!has_server_connection_id(Some(-1)));
        assert!(!has_server_connection_id(None));
    }
}
