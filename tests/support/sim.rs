//! A topology simulator: loopback listeners that answer hello as scripted
//! replica-set members, mongoses or a load balancer, and forward every other
//! command to a real SecantusDB so reads and writes move real data.
//!
//! ```text
//!  client ──> member 0 (Primary)   ─┐ hello answered here, from the script
//!  client ──> member 1 (Secondary) ─┼─> one backend connection per client
//!  client ──> member 2 (Arbiter)   ─┘   connection ──> SecantusDB
//! ```
//!
//! Since every member shares one real server, the simulator enforces roles
//! itself: a write to a non-primary member gets `NotWritablePrimary` (10107),
//! a read without secondaryOk gets `NotPrimaryNoSecondaryOk` (13435), as a
//! real secondary would answer. Each member can be scripted while it runs
//! (roles, elections, tags, last write dates, extra hello fields) and faults
//! injected (refused connections, dropped sockets, delayed replies), and
//! everything it receives is recorded for assertions.
//!
//! Mongoses also track the transactions started through them, as real
//! routers do: a later command of a transaction that arrives at another
//! mongos gets `NoSuchTransaction` (251, `TransientTransactionError`),
//! except a `commitTransaction` retry of a transaction whose commit the
//! backend already acknowledged (a real router recovers it from the
//! `recoveryToken`). So a driver that loses its pin cannot pass unnoticed.
//!
//! Threads are fine here: this is test support, not the driver. Each member
//! has a polling accept thread and each client connection a thread; all stop
//! when the [`Simulator`] is dropped.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long a test waits after [`Simulator::drop_connections`] for the
/// client's sockets to count as idle: the driver peeks for a peer's close
/// only on a socket unused for 100 ms (`PEEK_AFTER_IDLE` in src/shell/conn/mod.rs); a
/// more recent close surfaces as a network error on the next exchange.
pub const UNTIL_IDLE: Duration = Duration::from_millis(150);

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document, Timestamp};

use super::raw::{
    compress_frame, decompress_frame, encode_op_reply, is_ok, parse_op_msg, parse_op_query,
    read_frame, Frame, OpMsg, COMPRESSOR_NAMES, FLAG_MORE_TO_COME, OP_COMPRESSED, OP_MSG, OP_QUERY,
    QUERY_FLAG_SECONDARY_OK,
};
use super::server::TestServer;

/// What a simulated member says it is in its hello reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Replica-set primary: writable, listed in `hosts`, carries `electionId`.
    Primary,
    /// Replica-set secondary, listed in `hosts`.
    Secondary,
    /// Priority-0 secondary, listed in `passives` (`passive: true`).
    Passive,
    /// Hidden secondary: `hidden: true`, not listed in anyone's `hosts`.
    Hidden,
    /// Arbiter: `arbiterOnly: true`, listed in `arbiters`, holds no data.
    Arbiter,
    /// A member without a valid config (`isreplicaset: true`, no `setName`).
    Ghost,
    /// A mongos: `msg: "isdbgrid"`.
    Mongos,
    /// A standalone mongod: no replica-set fields.
    Standalone,
    /// A mongos behind a load balancer: `msg: "isdbgrid"` plus a `serviceId`
    /// (one per backend) when the client says `loadBalanced: true`.
    LoadBalancer,
}

impl Role {
    fn is_replica_set_member(self) -> bool {
        matches!(
            self,
            Role::Primary | Role::Secondary | Role::Passive | Role::Hidden | Role::Arbiter
        )
    }

    fn accepts_writes(self) -> bool {
        matches!(
            self,
            Role::Primary | Role::Mongos | Role::Standalone | Role::LoadBalancer
        )
    }
}

/// Something the simulator can forward to: a [`TestServer`] or an address.
pub trait Backend {
    /// `host:port` to connect to.
    fn backend_address(&self) -> String;
}

impl Backend for TestServer {
    fn backend_address(&self) -> String {
        self.address()
    }
}

impl Backend for str {
    fn backend_address(&self) -> String {
        self.to_owned()
    }
}

impl Backend for String {
    fn backend_address(&self) -> String {
        self.clone()
    }
}

/// A fault injected into a member's next hello replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloFault {
    /// Close the connection instead of replying (a network error for the client).
    CloseConnection,
    /// Reply `ok: 0` with this code and these error labels.
    Error {
        /// The error code, e.g. 91 (ShutdownInProgress).
        code: i32,
        /// Error labels, e.g. `["SystemOverloadedError", "RetryableError"]`.
        labels: Vec<String>,
    },
}

/// Commands a non-primary rejects with NotWritablePrimary.
const WRITE_COMMANDS: &[&str] = &[
    "insert",
    "update",
    "delete",
    "findAndModify",
    "findandmodify",
    "bulkWrite",
    "create",
    "drop",
    "dropDatabase",
    "createIndexes",
    "dropIndexes",
    "renameCollection",
    "commitTransaction",
    "abortTransaction",
];

/// Reads a secondary serves only with secondaryOk (a non-primary read preference).
const READ_COMMANDS: &[&str] = &[
    "find",
    "aggregate",
    "count",
    "distinct",
    "listCollections",
    "listIndexes",
];

const HELLO_COMMANDS: &[&str] = &["hello", "isMaster", "ismaster"];

/// Wire version the simulated members report: what SecantusDB 0.7 reports,
/// so forwarded commands behave as the advertised version promises.
pub const MAX_WIRE_VERSION: i32 = 27;

/// The longest an awaitable hello (`maxAwaitTimeMS`) is held.
const MAX_AWAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct MemberScript {
    port: u16,
    role: Role,
    tags: Document,
    last_write: Option<DateTime>,
    hello_extra: Document,
    /// Fields added to every forwarded command error (`ok: 0`).
    error_extra: Document,
    process_id: ObjectId,
    counter: i64,
    delay: Duration,
    hello_faults: VecDeque<HelloFault>,
}

#[derive(Debug)]
struct Script {
    set_name: Option<String>,
    set_version: i64,
    term: i64,
    members: Vec<MemberScript>,
}

impl Script {
    fn bump_all(&mut self) {
        for member in &mut self.members {
            member.counter += 1;
        }
    }
}

#[derive(Debug, Default)]
struct Observed {
    connections: usize,
    accepted_at: Vec<std::time::Instant>,
    hellos: usize,
    handshakes: Vec<Document>,
    commands: Vec<String>,
    /// When each of `commands` arrived.
    arrivals: Vec<std::time::Instant>,
    received: Vec<Document>,
    /// The commands that came compressed, with the compressor's id.
    compressed: Vec<(String, u8)>,
    /// Bytes written to clients (replies, as they went on the wire).
    bytes_to_clients: u64,
}

#[derive(Debug)]
struct OpenConnection {
    client: TcpStream,
    backend: Option<TcpStream>,
}

/// The I/O side of one member: its listener, backends and open sockets.
#[derive(Debug)]
struct MemberIo {
    port: u16,
    listening: Mutex<Listening>,
    /// Signalled when `listening` changes.
    listening_changed: Condvar,
    backends: Vec<String>,
    next_backend: AtomicUsize,
    service_ids: Vec<ObjectId>,
    observed: Mutex<Observed>,
    open: Mutex<HashMap<u64, OpenConnection>>,
    next_connection_id: AtomicU64,
}

/// A member's listening socket, and whether its accept thread holds a copy.
///
/// The accept thread blocks in `accept` on its own copy. (Polling a
/// non-blocking listener every 5 ms delayed each new connection by up to
/// that, which the benchmark's spawn -> exit times showed, and woke every
/// idle member 200 times a second beside the CPU figures being taken.) A
/// socket only stops listening once every copy is closed, so taking the
/// listener away wakes the thread with a connection of its own and waits
/// for it to let go.
#[derive(Debug, Default)]
struct Listening {
    listener: Option<TcpListener>,
    /// Bumped each time the listener is taken away.
    generation: u64,
    /// Whether the accept thread holds a copy of the listener.
    held: bool,
}

impl MemberIo {
    fn new(port: u16, listener: TcpListener, backends: Vec<String>) -> MemberIo {
        MemberIo {
            port,
            listening: Mutex::new(Listening {
                listener: Some(listener),
                ..Listening::default()
            }),
            listening_changed: Condvar::new(),
            service_ids: backends.iter().map(|_| ObjectId::new()).collect(),
            backends,
            next_backend: AtomicUsize::new(0),
            observed: Mutex::new(Observed::default()),
            open: Mutex::new(HashMap::new()),
            next_connection_id: AtomicU64::new(1),
        }
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Closes the listening socket; connecting is refused once this returns.
    fn stop_listening(&self) {
        let mut listening = lock(&self.listening);
        listening.listener = None;
        listening.generation += 1;
        self.listening_changed.notify_all();
        if !listening.held {
            return;
        }
        drop(listening);
        // Wakes the accept thread, blocked on its copy; it sees the new
        // generation and closes the copy instead of serving the connection.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        let mut listening = lock(&self.listening);
        while listening.held {
            listening = self
                .listening_changed
                .wait(listening)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Listens again (on the same port) if it was not listening.
    fn listen(&self) {
        let mut listening = lock(&self.listening);
        if listening.listener.is_none() {
            listening.listener = Some(rebind(self.port));
            self.listening_changed.notify_all();
        }
    }

    /// A copy of the listener to block on, and its generation; waits while
    /// there is none. `None` once the simulator stops.
    fn listener_copy(&self, shared: &Shared) -> Option<(TcpListener, u64)> {
        let mut listening = lock(&self.listening);
        loop {
            if shared.stop.load(Ordering::SeqCst) {
                return None;
            }
            if let Some(copy) = listening.listener.as_ref().and_then(|l| l.try_clone().ok()) {
                listening.held = true;
                return Some((copy, listening.generation));
            }
            listening = self
                .listening_changed
                .wait(listening)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether the copy of `generation` is still the listener; if not, the
    /// copy is closed and the member told so.
    fn keep_copy(&self, shared: &Shared, copy: &mut Option<TcpListener>, generation: u64) -> bool {
        let mut listening = lock(&self.listening);
        if listening.generation == generation && !shared.stop.load(Ordering::SeqCst) {
            return true;
        }
        *copy = None;
        listening.held = false;
        self.listening_changed.notify_all();
        false
    }

    fn shut_down_open(&self) {
        for (_, conn) in lock(&self.open).drain() {
            let _ = conn.client.shutdown(Shutdown::Both);
            if let Some(backend) = conn.backend {
                let _ = backend.shutdown(Shutdown::Both);
            }
        }
    }
}

#[derive(Debug)]
struct Shared {
    script: Mutex<Script>,
    stop: AtomicBool,
    /// The transactions started through a mongos, by `lsid/txnNumber`.
    transactions: Mutex<HashMap<String, RoutedTransaction>>,
}

/// Where a transaction started, and whether its commit was acknowledged.
#[derive(Debug, Clone, Copy)]
struct RoutedTransaction {
    router: usize,
    committed: bool,
}

/// Notes that the backend acknowledged the `commitTransaction` of
/// transaction `key` (an `ok: 1` reply).
fn note_commit_reply(shared: &Shared, key: Option<String>, reply: &Frame) {
    let Some(key) = key else {
        return;
    };
    let acknowledged = reply.op_code == OP_MSG
        && parse_op_msg(&reply.body)
            .ok()
            .and_then(|m| m.body.get("ok").and_then(integer))
            == Some(1);
    if acknowledged {
        if let Some(routed) = lock(&shared.transactions).get_mut(&key) {
            routed.committed = true;
        }
    }
}

/// A transaction's key, when `command` belongs to one (`autocommit: false`
/// with a `txnNumber`).
fn transaction_key(command: &Document) -> Option<String> {
    if command.get_bool("autocommit") != Ok(false) {
        return None;
    }
    let txn_number = command.get("txnNumber").and_then(integer)?;
    Some(format!("{}/{txn_number}", command.get("lsid")?))
}

/// Locks a mutex, ignoring poisoning: a panicking test thread must not make
/// every later assertion fail with a confusing poison error.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running simulated topology; its threads stop when it is dropped.
#[derive(Debug)]
pub struct Simulator {
    shared: Arc<Shared>,
    members: Vec<Arc<MemberIo>>,
    accept_threads: Vec<JoinHandle<()>>,
}

impl Simulator {
    /// A replica set named `set_name` with one member per role, all
    /// forwarding to `backend` (a [`TestServer`] or a `host:port`). The primary, if
    /// any, carries term 1 in its `electionId`; `setVersion` starts at 1.
    pub fn replica_set<B: Backend + ?Sized>(
        set_name: &str,
        backend: &B,
        roles: &[Role],
    ) -> Simulator {
        let mut sim = Simulator::empty(Some(set_name.to_owned()));
        for &role in roles {
            sim.add_member_with_backends(role, vec![backend.backend_address()]);
        }
        sim
    }

    /// `n` mongoses forwarding to `backend`.
    pub fn mongos<B: Backend + ?Sized>(backend: &B, n: usize) -> Simulator {
        let mut sim = Simulator::empty(None);
        for _ in 0..n {
            sim.add_member_with_backends(Role::Mongos, vec![backend.backend_address()]);
        }
        sim
    }

    /// One standalone forwarding to `backend` (useful for fault injection in
    /// front of a standalone).
    pub fn standalone<B: Backend + ?Sized>(backend: &B) -> Simulator {
        let mut sim = Simulator::empty(None);
        sim.add_member_with_backends(Role::Standalone, vec![backend.backend_address()]);
        sim
    }

    /// One load balancer (member 0) in front of `backends`: each new TCP
    /// connection goes to the next backend in turn, and its hello carries
    /// that backend's `serviceId` (see [`Simulator::service_id`]).
    pub fn load_balancer<B: Backend + ?Sized>(backends: &[&B]) -> Simulator {
        assert!(!backends.is_empty(), "a load balancer needs a backend");
        let mut sim = Simulator::empty(None);
        sim.add_member_with_backends(
            Role::LoadBalancer,
            backends.iter().map(|b| b.backend_address()).collect(),
        );
        sim
    }

    fn empty(set_name: Option<String>) -> Simulator {
        Simulator {
            shared: Arc::new(Shared {
                script: Mutex::new(Script {
                    set_name,
                    set_version: 1,
                    term: 1,
                    members: Vec::new(),
                }),
                stop: AtomicBool::new(false),
                transactions: Mutex::new(HashMap::new()),
            }),
            members: Vec::new(),
            accept_threads: Vec::new(),
        }
    }

    fn add_member_with_backends(&mut self, role: Role, backends: Vec<String>) -> usize {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind a loopback port");
        let port = listener.local_addr().expect("listener address").port();
        let io = Arc::new(MemberIo::new(port, listener, backends));
        let index = {
            let mut script = lock(&self.shared.script);
            script.members.push(MemberScript {
                port,
                role,
                tags: Document::new(),
                last_write: None,
                hello_extra: Document::new(),
                error_extra: Document::new(),
                process_id: ObjectId::new(),
                counter: 0,
                delay: Duration::ZERO,
                hello_faults: VecDeque::new(),
            });
            script.members.len() - 1
        };
        let shared = Arc::clone(&self.shared);
        let thread_io = Arc::clone(&io);
        let handle = thread::Builder::new()
            .name(format!("sim-accept-{port}"))
            .spawn(move || accept_loop(shared, index, thread_io))
            .expect("cannot spawn a simulator thread");
        self.members.push(io);
        self.accept_threads.push(handle);
        index
    }

    fn member(&self, i: usize) -> &Arc<MemberIo> {
        self.members.get(i).unwrap_or_else(|| {
            panic!(
                "simulator has no member {i} (it has {})",
                self.members.len()
            )
        })
    }

    fn script<R>(&self, i: usize, change: impl FnOnce(&mut Script) -> R) -> R {
        self.member(i);
        change(&mut lock(&self.shared.script))
    }

    /// Number of members (including removed ones, which stay as ghosts).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the simulator has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// `127.0.0.1:<port>` of member `i`.
    pub fn address(&self, i: usize) -> String {
        self.member(i).address()
    }

    /// The port of member `i`.
    pub fn port(&self, i: usize) -> u16 {
        self.member(i).port
    }

    /// The replica set's name, if this is a replica set.
    pub fn set_name(&self) -> Option<String> {
        lock(&self.shared.script).set_name.clone()
    }

    /// A connection string with the given members as seeds; it names the
    /// replica set (`replicaSet=`) for a replica set and sets
    /// `loadBalanced=true` for a load balancer.
    pub fn seed_uri(&self, indices: &[usize]) -> String {
        let hosts: Vec<String> = indices.iter().map(|&i| self.address(i)).collect();
        let script = lock(&self.shared.script);
        let load_balanced = indices
            .iter()
            .any(|&i| script.members[i].role == Role::LoadBalancer);
        match (&script.set_name, load_balanced) {
            (Some(name), _) => format!("mongodb://{}/?replicaSet={name}", hosts.join(",")),
            (None, true) => format!("mongodb://{}/?loadBalanced=true", hosts.join(",")),
            (None, false) => format!("mongodb://{}/", hosts.join(",")),
        }
    }

    /// The `serviceId` a load balancer reports for connections to backend `b`.
    pub fn service_id(&self, i: usize, b: usize) -> ObjectId {
        self.member(i).service_ids[b]
    }

    /// The role member `i` currently has.
    pub fn role(&self, i: usize) -> Role {
        self.script(i, |s| s.members[i].role)
    }

    /// The current `setVersion`.
    pub fn set_version(&self) -> i64 {
        lock(&self.shared.script).set_version
    }

    /// The current election term (the low bytes of the primary's `electionId`).
    pub fn term(&self) -> i64 {
        lock(&self.shared.script).term
    }

    /// The `electionId` a primary elected in the current term reports.
    pub fn election_id(&self) -> ObjectId {
        election_id(self.term())
    }

    /// `(processId, counter)` of member `i`'s current topologyVersion.
    pub fn topology_version(&self, i: usize) -> (ObjectId, i64) {
        self.script(i, |s| (s.members[i].process_id, s.members[i].counter))
    }

    /// Sets member `i`'s role as is, without an election (so two primaries
    /// with the same electionId are possible, to test driver rules).
    pub fn set_role(&self, i: usize, role: Role) {
        self.script(i, |s| {
            s.members[i].role = role;
            s.bump_all();
        });
    }

    /// The primary steps down: member `i` becomes a secondary and the set
    /// has no primary until [`Simulator::elect`].
    pub fn step_down(&self, i: usize) {
        self.script(i, |s| {
            if s.members[i].role == Role::Primary {
                s.members[i].role = Role::Secondary;
            }
            s.bump_all();
        });
    }

    /// Member `i` wins an election: the term (and so `electionId`) goes up,
    /// any other primary becomes a secondary, `i` becomes primary.
    pub fn elect(&self, i: usize) {
        self.script(i, |s| {
            s.term += 1;
            for member in &mut s.members {
                if member.role == Role::Primary {
                    member.role = Role::Secondary;
                }
            }
            s.members[i].role = Role::Primary;
            s.bump_all();
        });
    }

    /// Reconfigures member `i`'s tags (bumps `setVersion`).
    pub fn set_tags(&self, i: usize, tags: Document) {
        self.script(i, |s| {
            s.members[i].tags = tags;
            s.set_version += 1;
            s.bump_all();
        });
    }

    /// Fixes member `i`'s `lastWrite.lastWriteDate` (by default it is the
    /// time of each reply, i.e. no lag).
    pub fn set_last_write(&self, i: usize, date: DateTime) {
        self.script(i, |s| s.members[i].last_write = Some(date));
    }

    /// Fields merged into member `i`'s hello reply after the scripted ones
    /// (e.g. `maxWireVersion: 2`, or `ok: 0, code: 91`); a `Null` value
    /// removes the field. Replaces earlier extras.
    pub fn set_hello_extra(&self, i: usize, extra: Document) {
        self.script(i, |s| {
            s.members[i].hello_extra = extra;
            s.members[i].counter += 1;
        });
    }

    /// Fields added to every command error (`ok: 0`) member `i` forwards
    /// from its backend, as a newer server adds them: e.g. `baseBackoffMS`
    /// on the overload errors a `failCommand` fail point makes. Replaces
    /// earlier extras; an empty document adds nothing.
    pub fn set_error_extra(&self, i: usize, extra: Document) {
        self.script(i, |s| s.members[i].error_extra = extra);
    }

    /// The next `times` hellos member `i` receives (on any connection) fail
    /// with `fault` instead of being answered; later calls queue behind.
    pub fn fail_hellos(&self, i: usize, times: usize, fault: HelloFault) {
        self.script(i, |s| {
            s.members[i]
                .hello_faults
                .extend(std::iter::repeat_n(fault, times));
        });
    }

    /// Adds a member with `role` (forwarding to member 0's backends) and
    /// bumps `setVersion`; returns its index.
    pub fn add_member(&mut self, role: Role) -> usize {
        let backends = self.member(0).backends.clone();
        let index = self.add_member_with_backends(role, backends);
        let mut script = lock(&self.shared.script);
        script.set_version += 1;
        script.bump_all();
        index
    }

    /// Removes member `i` from the set config (bumps `setVersion`); it keeps
    /// listening and answers as a ghost, as a removed mongod does.
    pub fn remove_member(&self, i: usize) {
        self.script(i, |s| {
            s.members[i].role = Role::Ghost;
            s.set_version += 1;
            s.bump_all();
        });
    }

    /// Simulates a restart of member `i`: its open sockets close and its
    /// topologyVersion gets a new processId with counter 0.
    pub fn restart_member(&self, i: usize) {
        self.drop_connections(i);
        self.script(i, |s| {
            s.members[i].process_id = ObjectId::new();
            s.members[i].counter = 0;
        });
    }

    /// While `refuse` is true, member `i` has no listening socket, so
    /// connecting fails with "connection refused" (as for a down server).
    /// Takes effect before this returns. Open connections are untouched.
    pub fn refuse_connections(&self, i: usize, refuse: bool) {
        let io = self.member(i);
        if refuse {
            io.stop_listening();
        } else {
            io.listen();
        }
    }

    /// Closes every open client socket of member `i` (and their backend
    /// connections); the client sees EOF or a reset on its next read.
    pub fn drop_connections(&self, i: usize) {
        self.member(i).shut_down_open();
    }

    /// Member `i` waits `delay` before every reply, hello included.
    pub fn delay_replies(&self, i: usize, delay: Duration) {
        self.script(i, |s| s.members[i].delay = delay);
    }

    /// TCP connections member `i` accepted so far.
    pub fn connections(&self, i: usize) -> usize {
        lock(&self.member(i).observed).connections
    }

    /// When member `i` accepted each of its connections, in order (within
    /// the accept loop's polling interval).
    pub fn accept_times(&self, i: usize) -> Vec<std::time::Instant> {
        lock(&self.member(i).observed).accepted_at.clone()
    }

    /// Connections to member `i` open right now.
    pub fn open_connections(&self, i: usize) -> usize {
        lock(&self.member(i).open).len()
    }

    /// hello / isMaster commands member `i` answered so far.
    pub fn hellos(&self, i: usize) -> usize {
        lock(&self.member(i).observed).hellos
    }

    /// The hello documents that opened each connection to member `i` (the
    /// handshakes: client metadata, compression, loadBalanced...), in order.
    pub fn handshakes(&self, i: usize) -> Vec<Document> {
        lock(&self.member(i).observed).handshakes.clone()
    }

    /// Names of every command member `i` received, in order, answered here or forwarded.
    pub fn commands(&self, i: usize) -> Vec<String> {
        lock(&self.member(i).observed).commands.clone()
    }

    /// Every command all members received, as `(member, command name)`, in
    /// the order they arrived: what a client sent to whom first.
    pub fn arrival_order(&self) -> Vec<(usize, String)> {
        let mut all: Vec<(std::time::Instant, usize, String)> = Vec::new();
        for (i, io) in self.members.iter().enumerate() {
            let observed = lock(&io.observed);
            for (name, at) in observed.commands.iter().zip(&observed.arrivals) {
                all.push((*at, i, name.clone()));
            }
        }
        all.sort_by_key(|(at, ..)| *at);
        all.into_iter().map(|(_, i, name)| (i, name)).collect()
    }

    /// Every command document member `i` received (OP_MSG document
    /// sequences folded in as arrays; OP_QUERY unwrapped from `$query`).
    pub fn received(&self, i: usize) -> Vec<Document> {
        lock(&self.member(i).observed).received.clone()
    }

    /// The commands member `i` received compressed, with the compressor id.
    pub fn compressed(&self, i: usize) -> Vec<(String, u8)> {
        lock(&self.member(i).observed).compressed.clone()
    }

    /// The bytes member `i` wrote to its clients.
    pub fn bytes_to_clients(&self, i: usize) -> u64 {
        lock(&self.member(i).observed).bytes_to_clients
    }

    /// Forgets what every member observed (counters and recorded commands).
    pub fn reset_observations(&self) {
        for io in &self.members {
            *lock(&io.observed) = Observed::default();
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for io in &self.members {
            io.stop_listening();
            io.shut_down_open();
        }
        for handle in self.accept_threads.drain(..) {
            let _ = handle.join();
        }
        // Handlers registered after the first sweep would otherwise linger.
        for io in &self.members {
            io.shut_down_open();
        }
    }
}

fn rebind(port: u16) -> TcpListener {
    // The old socket was a listener, so nothing lingers in TIME_WAIT on this
    // port, and std sets SO_REUSEADDR anyway; retry briefly regardless.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => return listener,
            Err(e) if Instant::now() > deadline => {
                panic!("simulator cannot listen on port {port} again: {e}")
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn election_id(term: i64) -> ObjectId {
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    bytes[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

fn accept_loop(shared: Arc<Shared>, index: usize, io: Arc<MemberIo>) {
    let mut copy: Option<TcpListener> = None;
    let mut generation = 0;
    loop {
        let listener = match &copy {
            Some(listener) => listener,
            None => {
                let Some((listener, current)) = io.listener_copy(&shared) else {
                    return;
                };
                generation = current;
                copy.insert(listener)
            }
        };
        let accepted = listener.accept();
        if !io.keep_copy(&shared, &mut copy, generation) {
            // The listener was taken away (or the simulator stops): this
            // connection, the wake-up's or one that raced it, is refused.
            continue;
        }
        let Ok((stream, _)) = accepted else {
            // Out of descriptors, say: try again shortly rather than spin.
            thread::sleep(Duration::from_millis(1));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok(registered) = stream.try_clone() else {
            continue;
        };
        let connection_id = io.next_connection_id.fetch_add(1, Ordering::Relaxed);
        let backend_index = if io.backends.is_empty() {
            0
        } else {
            io.next_backend.fetch_add(1, Ordering::Relaxed) % io.backends.len()
        };
        {
            let mut observed = lock(&io.observed);
            observed.connections += 1;
            observed.accepted_at.push(std::time::Instant::now());
        }
        lock(&io.open).insert(
            connection_id,
            OpenConnection {
                client: registered,
                backend: None,
            },
        );
        let handler = Handler {
            shared: Arc::clone(&shared),
            io: Arc::clone(&io),
            index,
            connection_id,
            backend_index,
            backend: None,
            greeted: false,
            client_metadata: None,
            adds_recovery_token: false,
            reply_compressor: None,
            committing: None,
        };
        let spawned = thread::Builder::new()
            .name(format!("sim-conn-{}-{connection_id}", io.port))
            .spawn(move || handler.run(stream));
        if spawned.is_err() {
            lock(&io.open).remove(&connection_id);
        }
    }
}

/// One client connection to one member.
struct Handler {
    shared: Arc<Shared>,
    io: Arc<MemberIo>,
    index: usize,
    connection_id: u64,
    backend_index: usize,
    backend: Option<TcpStream>,
    /// Whether a command arrived yet: the first hello is the handshake.
    greeted: bool,
    /// The `client` document of the client's handshake, introduced to the
    /// backend so that fail points filtered by `appName` match it.
    client_metadata: Option<Document>,
    /// Whether the reply being forwarded gets a `recoveryToken`, as a
    /// mongos adds to every reply within a transaction.
    adds_recovery_token: bool,
    /// The compressor id of the request being answered: its reply goes
    /// back compressed the same way, as mongod does.
    reply_compressor: Option<u8>,
    /// The transaction whose `commitTransaction` is being forwarded: an
    /// `ok: 1` reply marks it committed (`note_commit_reply`).
    committing: Option<String>,
}

enum Answer {
    /// Reply ourselves with this document.
    Reply(Document),
    /// Pass the request to the backend unchanged.
    Forward,
    /// Close the connection without replying.
    Close,
}

impl Handler {
    fn run(mut self, mut client: TcpStream) {
        // Any error (the client left, a dropped socket, a backend failure)
        // ends this connection, which is what a real server does too.
        let _ = self.serve(&mut client);
        let _ = client.shutdown(Shutdown::Both);
        if let Some(backend) = self.backend.take() {
            let _ = backend.shutdown(Shutdown::Both);
        }
        lock(&self.io.open).remove(&self.connection_id);
    }

    fn serve(&mut self, client: &mut TcpStream) -> io::Result<()> {
        while let Some(frame) = read_frame(client)? {
            if self.shared.stop.load(Ordering::SeqCst) {
                return Ok(());
            }
            let frame = self.unwrap_compressed(frame)?;
            match frame.op_code {
                OP_MSG => {
                    let message = parse_op_msg(&frame.body)?;
                    let command = message.merged();
                    match self.answer(&command, secondary_ok_msg(&command)) {
                        Answer::Reply(reply) => {
                            if message.flags & FLAG_MORE_TO_COME == 0 {
                                let bytes = OpMsg {
                                    flags: 0,
                                    body: reply,
                                    sequences: Vec::new(),
                                }
                                .encode(self.next_request_id(), frame.request_id);
                                self.reply(client, &bytes)?;
                            }
                        }
                        Answer::Forward => {
                            let expects_reply = message.flags & FLAG_MORE_TO_COME == 0;
                            self.forward(client, &frame, expects_reply)?;
                        }
                        Answer::Close => return Ok(()),
                    }
                }
                OP_QUERY => {
                    let query = parse_op_query(&frame.body)?;
                    let command = query.command();
                    let secondary_ok = query.flags & QUERY_FLAG_SECONDARY_OK != 0;
                    match self.answer(&command, secondary_ok) {
                        Answer::Reply(reply) => {
                            let bytes =
                                encode_op_reply(self.next_request_id(), frame.request_id, &reply);
                            self.reply(client, &bytes)?;
                        }
                        Answer::Forward => self.forward(client, &frame, true)?,
                        Answer::Close => return Ok(()),
                    }
                }
                // Nothing we advertise makes a client send anything else,
                // so let the backend judge it.
                _ => self.forward(client, &frame, true)?,
            }
        }
        Ok(())
    }

    fn next_request_id(&self) -> i32 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        (NEXT.fetch_add(1, Ordering::Relaxed) % i32::MAX as u64) as i32
    }

    fn delay(&self) -> Duration {
        lock(&self.shared.script).members[self.index].delay
    }

    fn reply(&self, client: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
        let delay = self.delay();
        if !delay.is_zero() {
            thread::sleep(delay);
        }
        self.write_to_client(client, bytes)
    }

    /// Writes a reply, compressed when its request was, and counts its bytes.
    fn write_to_client(&self, client: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
        let compressed;
        let bytes = match self.reply_compressor {
            Some(id) => {
                let frame = read_frame(&mut &bytes[..])?.expect("a whole reply");
                compressed = compress_frame(&frame, id).to_bytes();
                &compressed[..]
            }
            None => bytes,
        };
        lock(&self.io.observed).bytes_to_clients += bytes.len() as u64;
        client.write_all(bytes)
    }

    /// An OP_COMPRESSED request unwrapped (recording its command and
    /// compressor); any other request as it came.
    fn unwrap_compressed(&mut self, frame: Frame) -> io::Result<Frame> {
        if frame.op_code != OP_COMPRESSED {
            self.reply_compressor = None;
            return Ok(frame);
        }
        let (inner, id) = decompress_frame(&frame)?;
        let name = if inner.op_code == OP_MSG {
            parse_op_msg(&inner.body)?
                .body
                .keys()
                .next()
                .cloned()
                .unwrap_or_default()
        } else {
            String::new()
        };
        lock(&self.io.observed).compressed.push((name, id));
        self.reply_compressor = Some(id);
        Ok(inner)
    }

    fn answer(&mut self, command: &Document, secondary_ok: bool) -> Answer {
        let name = command.keys().next().cloned().unwrap_or_default();
        let is_hello = HELLO_COMMANDS.contains(&name.as_str());
        let is_handshake = is_hello && !self.greeted;
        self.greeted = true;
        {
            let mut observed = lock(&self.io.observed);
            observed.commands.push(name.clone());
            observed.arrivals.push(std::time::Instant::now());
            observed.received.push(command.clone());
            if is_hello {
                observed.hellos += 1;
            }
            if is_handshake {
                observed.handshakes.push(command.clone());
                self.client_metadata = command.get_document("client").ok().cloned();
            }
        }
        if is_hello {
            let fault = lock(&self.shared.script).members[self.index]
                .hello_faults
                .pop_front();
            return match fault {
                Some(HelloFault::CloseConnection) => Answer::Close,
                Some(HelloFault::Error { code, labels }) => Answer::Reply(doc! {
                    "ok": 0.0,
                    "errmsg": "injected hello failure",
                    "code": code,
                    "errorLabels": labels,
                }),
                None => {
                    self.await_topology_change(command);
                    Answer::Reply(self.hello(&name, command))
                }
            };
        }
        let script = lock(&self.shared.script);
        let member = &script.members[self.index];
        let topology_version = doc! { "processId": member.process_id, "counter": member.counter };
        let role = member.role;
        drop(script);
        self.adds_recovery_token = matches!(role, Role::Mongos | Role::LoadBalancer)
            && command.contains_key("txnNumber")
            && command.get_bool("autocommit") == Ok(false);
        self.committing = None;
        if role == Role::Mongos {
            if let Some(refusal) = self.route_transaction(command, &name) {
                return Answer::Reply(refusal);
            }
        }
        if !role.accepts_writes() && WRITE_COMMANDS.contains(&name.as_str()) {
            return Answer::Reply(doc! {
                "ok": 0.0,
                "errmsg": "not primary",
                "code": 10107,
                "codeName": "NotWritablePrimary",
                "topologyVersion": topology_version,
            });
        }
        if READ_COMMANDS.contains(&name.as_str()) {
            let refused = match role {
                Role::Secondary | Role::Passive | Role::Hidden => !secondary_ok,
                Role::Arbiter | Role::Ghost => true,
                _ => false,
            };
            if refused {
                let (code, code_name, message) = if secondary_ok {
                    (
                        13436,
                        "NotPrimaryOrSecondary",
                        "node is not in primary or recovering state",
                    )
                } else {
                    (
                        13435,
                        "NotPrimaryNoSecondaryOk",
                        "not primary and secondaryOk=false",
                    )
                };
                return Answer::Reply(doc! {
                    "ok": 0.0,
                    "errmsg": message,
                    "code": code,
                    "codeName": code_name,
                    "topologyVersion": topology_version,
                });
            }
        }
        Answer::Forward
    }

    /// Records a transaction started here; refuses a later command of a
    /// transaction started at another mongos with `NoSuchTransaction`, as
    /// that router has never heard of it.
    fn route_transaction(&mut self, command: &Document, name: &str) -> Option<Document> {
        let key = transaction_key(command)?;
        let mut transactions = lock(&self.shared.transactions);
        if command.get_bool("startTransaction") == Ok(true) {
            let routed = RoutedTransaction {
                router: self.index,
                committed: false,
            };
            transactions.insert(key, routed);
            return None;
        }
        let routed = *transactions.get(&key)?;
        let recovered = name == "commitTransaction" && routed.committed;
        if routed.router == self.index || recovered {
            if name == "commitTransaction" {
                self.committing = Some(key);
            }
            return None;
        }
        Some(doc! {
            "ok": 0.0,
            "errmsg": format!("simulated mongos {}: no such transaction {key} (it started at mongos {})", self.index, routed.router),
            "code": 251,
            "codeName": "NoSuchTransaction",
            "errorLabels": ["TransientTransactionError"],
        })
    }

    /// Holds an awaitable hello (`topologyVersion` + `maxAwaitTimeMS` that
    /// match ours) until our topologyVersion changes or the time is up.
    fn await_topology_change(&self, command: &Document) {
        let Some(max_await) = command
            .get("maxAwaitTimeMS")
            .and_then(integer)
            .filter(|ms| *ms > 0)
        else {
            return;
        };
        let Ok(seen) = command.get_document("topologyVersion") else {
            return;
        };
        let deadline = Instant::now() + Duration::from_millis(max_await as u64).min(MAX_AWAIT);
        let current = || {
            let script = lock(&self.shared.script);
            let member = &script.members[self.index];
            (member.process_id, member.counter)
        };
        let same = |(process_id, counter): (ObjectId, i64)| {
            seen.get_object_id("processId").ok() == Some(process_id)
                && seen.get("counter").and_then(integer) == Some(counter)
        };
        while same(current())
            && Instant::now() < deadline
            && !self.shared.stop.load(Ordering::SeqCst)
        {
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn hello(&self, name: &str, command: &Document) -> Document {
        let script = lock(&self.shared.script);
        let member = &script.members[self.index];
        let now = DateTime::now();
        let writable_field = if name == "hello" {
            "isWritablePrimary"
        } else {
            "ismaster"
        };
        let mut reply = Document::new();
        let writable = matches!(
            member.role,
            Role::Primary | Role::Mongos | Role::Standalone | Role::LoadBalancer
        );
        reply.insert(writable_field, writable);
        // The compressors offered that the simulator speaks (all three), in
        // the client's order, as mongod answers.
        if let Ok(offered) = command.get_array("compression") {
            let common: Vec<Bson> = offered
                .iter()
                .filter(|o| COMPRESSOR_NAMES.iter().any(|(_, n)| o.as_str() == Some(*n)))
                .cloned()
                .collect();
            if !common.is_empty() {
                reply.insert("compression", common);
            }
        }
        if command.get_bool("helloOk").unwrap_or(false) {
            reply.insert("helloOk", true);
        }
        reply.insert(
            "topologyVersion",
            doc! { "processId": member.process_id, "counter": member.counter },
        );

        match member.role {
            Role::Mongos => {
                reply.insert("msg", "isdbgrid");
            }
            Role::LoadBalancer => {
                reply.insert("msg", "isdbgrid");
                if command.get_bool("loadBalanced").unwrap_or(false) {
                    reply.insert("serviceId", self.io.service_ids[self.backend_index]);
                }
            }
            Role::Ghost => {
                reply.insert("secondary", false);
                reply.insert("isreplicaset", true);
                reply.insert("info", "Does not have a valid replica set config");
            }
            Role::Standalone => {}
            role => {
                debug_assert!(role.is_replica_set_member());
                self.replica_set_fields(&script, &mut reply, now);
            }
        }

        reply.insert("maxBsonObjectSize", 16_777_216);
        reply.insert("maxMessageSizeBytes", 48_000_000);
        reply.insert("maxWriteBatchSize", 100_000);
        reply.insert("localTime", now);
        reply.insert("logicalSessionTimeoutMinutes", 30);
        reply.insert("connectionId", self.connection_id as i64);
        reply.insert("minWireVersion", 0);
        reply.insert("maxWireVersion", MAX_WIRE_VERSION);
        reply.insert("readOnly", false);
        reply.insert("ok", 1.0);
        for (key, value) in &member.hello_extra {
            if matches!(value, Bson::Null) {
                reply.remove(key);
            } else {
                reply.insert(key.clone(), value.clone());
            }
        }
        reply
    }

    fn replica_set_fields(&self, script: &Script, reply: &mut Document, now: DateTime) {
        let member = &script.members[self.index];
        let addresses = |wanted: &[Role]| -> Vec<Bson> {
            script
                .members
                .iter()
                .filter(|m| wanted.contains(&m.role))
                .map(|m| Bson::String(format!("127.0.0.1:{}", m.port)))
                .collect()
        };
        let primary = script
            .members
            .iter()
            .find(|m| m.role == Role::Primary)
            .map(|m| format!("127.0.0.1:{}", m.port));
        reply.insert("hosts", addresses(&[Role::Primary, Role::Secondary]));
        let passives = addresses(&[Role::Passive]);
        if !passives.is_empty() {
            reply.insert("passives", passives);
        }
        let arbiters = addresses(&[Role::Arbiter]);
        if !arbiters.is_empty() {
            reply.insert("arbiters", arbiters);
        }
        if let Some(name) = &script.set_name {
            reply.insert("setName", name.clone());
        }
        reply.insert("setVersion", script.set_version);
        reply.insert(
            "secondary",
            matches!(member.role, Role::Secondary | Role::Passive | Role::Hidden),
        );
        match member.role {
            Role::Primary => {
                reply.insert("electionId", election_id(script.term));
            }
            Role::Passive => {
                reply.insert("passive", true);
            }
            Role::Hidden => {
                reply.insert("hidden", true);
            }
            Role::Arbiter => {
                reply.insert("arbiterOnly", true);
            }
            _ => {}
        }
        if let Some(primary) = primary {
            reply.insert("primary", primary);
        }
        reply.insert("me", self.io.address());
        if !member.tags.is_empty() {
            reply.insert("tags", member.tags.clone());
        }
        if member.role != Role::Arbiter {
            let date = member.last_write.unwrap_or(now);
            let seconds = (date.timestamp_millis() / 1000).max(0) as u32;
            let op_time = doc! {
                "ts": Timestamp { time: seconds, increment: 1 },
                "t": script.term,
            };
            reply.insert(
                "lastWrite",
                doc! {
                    "opTime": op_time.clone(),
                    "lastWriteDate": date,
                    "majorityOpTime": op_time,
                    "majorityWriteDate": date,
                },
            );
        }
    }

    fn forward(
        &mut self,
        client: &mut TcpStream,
        frame: &Frame,
        expects_reply: bool,
    ) -> io::Result<()> {
        let delay = self.delay();
        let error_extra = lock(&self.shared.script).members[self.index]
            .error_extra
            .clone();
        let adds_recovery_token = self.adds_recovery_token;
        let mut committing = self.committing.take();
        let shared = self.shared.clone();
        let backend = self.backend()?;
        backend.write_all(&frame.to_bytes())?;
        if !expects_reply {
            return Ok(());
        }
        loop {
            let backend = self.backend()?;
            let reply = read_frame(backend)?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "backend closed the connection",
                )
            })?;
            let more = reply.op_code == OP_MSG
                && reply.body.len() >= 4
                && u32::from_le_bytes(reply.body[..4].try_into().expect("4 bytes"))
                    & FLAG_MORE_TO_COME
                    != 0;
            if !delay.is_zero() {
                thread::sleep(delay);
            }
            note_commit_reply(&shared, committing.take(), &reply);
            let reply = if adds_recovery_token {
                with_recovery_token(reply)?
            } else {
                reply
            };
            let reply = if error_extra.is_empty() {
                reply
            } else {
                with_error_extra(reply, &error_extra)?
            };
            self.write_to_client(client, &reply.to_bytes())?;
            if !more {
                return Ok(());
            }
        }
    }

    fn backend(&mut self) -> io::Result<&mut TcpStream> {
        if self.backend.is_none() {
            let address =
                self.io.backends.get(self.backend_index).ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, "member has no backend")
                })?;
            let mut stream = TcpStream::connect(address)?;
            stream.set_nodelay(true)?;
            self.introduce(&mut stream)?;
            if let Some(open) = lock(&self.io.open).get_mut(&self.connection_id) {
                open.backend = Some(stream.try_clone()?);
            } else {
                // drop_connections ran while we connected: this connection is gone.
                return Err(io::ErrorKind::ConnectionAborted.into());
            }
            self.backend = Some(stream);
        }
        Ok(self.backend.as_mut().expect("backend connected above"))
    }
}

impl Handler {
    /// Sends the backend a hello carrying the client's handshake metadata,
    /// as the client's own handshake would have, so that the backend knows
    /// the connection's `appName` (fail points filter on it). The reply is
    /// the simulator's business, not the client's, unless it is an error.
    fn introduce(&self, backend: &mut TcpStream) -> io::Result<()> {
        let Some(metadata) = &self.client_metadata else {
            return Ok(());
        };
        let hello = OpMsg {
            flags: 0,
            body: doc! { "hello": 1, "client": metadata.clone(), "$db": "admin" },
            sequences: Vec::new(),
        }
        .encode(self.next_request_id(), 0);
        backend.write_all(&hello)?;
        let reply = read_frame(backend)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "backend closed the connection during the introduction",
            )
        })?;
        // A hello the backend fails (a fail point on hello) fails this
        // connection, as it would have failed the client's own handshake.
        let refused = reply.op_code == OP_MSG
            && parse_op_msg(&reply.body)
                .ok()
                .and_then(|m| m.body.get("ok").and_then(integer))
                == Some(0);
        if refused {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "backend failed the introduction hello",
            ));
        }
        Ok(())
    }
}

/// `reply` with a `recoveryToken` added (when it has none), as a mongos
/// returns within a transaction; other replies pass unchanged.
fn with_recovery_token(reply: Frame) -> io::Result<Frame> {
    if reply.op_code != OP_MSG {
        return Ok(reply);
    }
    let mut message = parse_op_msg(&reply.body)?;
    if message.body.contains_key("recoveryToken") {
        return Ok(reply);
    }
    message.body.insert(
        "recoveryToken",
        doc! { "recoveryShardId": "simulated-shard" },
    );
    Ok(reframed(&reply, &message))
}

/// `message` in place of `reply`'s body, under the same ids.
fn reframed(reply: &Frame, message: &OpMsg) -> Frame {
    let bytes = message.encode(reply.request_id, reply.response_to);
    Frame {
        request_id: reply.request_id,
        response_to: reply.response_to,
        op_code: OP_MSG,
        body: bytes[16..].to_vec(),
    }
}

/// An OP_MSG command error (`ok: 0`) with `extra`'s fields added; any
/// other reply as it came.
fn with_error_extra(reply: Frame, extra: &Document) -> io::Result<Frame> {
    if reply.op_code != OP_MSG {
        return Ok(reply);
    }
    let mut message = parse_op_msg(&reply.body)?;
    if !message.body.contains_key("ok") || is_ok(&message.body) {
        return Ok(reply);
    }
    for (key, value) in extra {
        message.body.insert(key.clone(), value.clone());
    }
    Ok(reframed(&reply, &message))
}

/// A deployment shape in front of one backend: the simulator and the
/// members the seed list names.
pub struct Shape {
    pub name: &'static str,
    pub sim: Simulator,
    pub seeds: Vec<usize>,
}

impl Shape {
    /// The connection string a client of this shape starts from.
    pub fn seed_uri(&self) -> String {
        self.sim.seed_uri(&self.seeds)
    }

    /// The five shapes the shapes bench measures and the profile-guided
    /// build trains on: a standalone, a replica set seeded with a
    /// secondary, one with three seeds, two mongos, a load balancer.
    pub fn all<B: Backend + ?Sized>(backend: &B) -> Vec<Shape> {
        vec![
            Shape {
                name: "standalone",
                sim: Simulator::standalone(backend),
                seeds: vec![0],
            },
            Shape {
                name: "replica set, secondary seed",
                sim: Simulator::replica_set("rs", backend, &[Role::Primary, Role::Secondary]),
                seeds: vec![1],
            },
            Shape {
                name: "replica set, three seeds",
                sim: Simulator::replica_set(
                    "rs",
                    backend,
                    &[Role::Primary, Role::Secondary, Role::Secondary],
                ),
                seeds: vec![0, 1, 2],
            },
            Shape {
                name: "two mongos",
                sim: Simulator::mongos(backend, 2),
                seeds: vec![0, 1],
            },
            Shape {
                name: "load balancer",
                sim: Simulator::load_balancer(&[backend]),
                seeds: vec![0],
            },
        ]
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes;
/// returns whether it held. For effects that happen on simulator threads
/// just after the client sees them (e.g. a closed socket being deregistered).
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// An integer field sent as int32, int64 or (integral) double.
fn integer(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(v) => Some(i64::from(*v)),
        Bson::Int64(v) => Some(*v),
        Bson::Double(v) if v.fract() == 0.0 => Some(*v as i64),
        _ => None,
    }
}

/// A read carries secondaryOk when its `$readPreference` is anything but primary.
fn secondary_ok_msg(command: &Document) -> bool {
    command
        .get_document("$readPreference")
        .ok()
        .and_then(|rp| rp.get_str("mode").ok())
        .is_some_and(|mode| mode != "primary")
}
