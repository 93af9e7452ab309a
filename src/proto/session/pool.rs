//! Server sessions and the pool that reuses them.
//!
//! ```text
//!   checkout ──> front ┌───┬───┬───┬───┐ back ──> pruned when about to expire
//!   checkin  ──> front └───┴───┴───┴───┘
//! ```
//!
//! The pool is a double-ended queue: sessions come back to the front and
//! leave from the front (LIFO, so the freshest session is reused first), and
//! the oldest ones drift to the back, where they are discarded once they have
//! less than a minute left before the server would forget them.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Document};

use crate::proto::command_draft::CommandDraft;
use crate::proto::process::{CurrentProcess, ProcessWatch};

/// How long before the server's expiry a session counts as "about to
/// expire" and is no longer handed out (the sessions spec's one minute).
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(60);

/// How many session ids one `endSessions` command carries at most.
pub const END_SESSIONS_BATCH: usize = 10_000;

/// A version 4 (random) UUID as RFC 4122 section 4.4 builds it: 122 random
/// bits, the version nibble set to 4 and the variant bits to `10`.
pub fn uuid_v4(rng: &mut fastrand::Rng) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    rng.fill(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

/// A new session id, `{ id: <UUID v4 as BSON binary subtype 4> }`, generated
/// locally so that no `startSession` round trip is needed.
pub fn new_session_id(rng: &mut fastrand::Rng) -> Document {
    doc! {
        "id": Binary { subtype: BinarySubtype::Uuid, bytes: uuid_v4(rng).to_vec() },
    }
}

/// The driver's record of one server-side session: its id (`lsid`), when it
/// was last sent to a server, its transaction number and whether a network
/// error may have left an operation running under it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSession {
    /// The session id document sent as `lsid` ([`Self::id`]).
    id: Document,
    /// `id` encoded once, for every command of the session's life.
    encoded_id: Option<Arc<[u8]>>,
    /// The last time the id was sent to a server; the server's expiry clock
    /// restarts then.
    pub last_use: Instant,
    /// The last transaction number used with this id. Kept across reuse from
    /// the pool, because the server rejects numbers it has already seen.
    pub txn_number: i64,
    /// Set after a network error: the session may still have an operation
    /// running on the server, so it is not returned to the pool.
    pub dirty: bool,
    /// The pool generation the session was created in; sessions from before
    /// a [`SessionPool::clear`] are not taken back.
    generation: u64,
}

impl ServerSession {
    /// A session with this id, last used `now`, transaction number 0.
    pub fn new(id: Document, now: Instant) -> Self {
        let mut encoded = Vec::new();
        let encoded_id = crate::proto::bson_write::write_document(&id, &mut encoded)
            .ok()
            .map(|()| Arc::from(encoded));
        ServerSession {
            id,
            encoded_id,
            last_use: now,
            txn_number: 0,
            dirty: false,
            generation: 0,
        }
    }

    /// The session id document sent as `lsid`.
    pub fn id(&self) -> &Document {
        &self.id
    }

    /// Adds this session's id to `command` as `lsid`.
    pub(crate) fn add_lsid(&self, command: &mut CommandDraft) {
        match &self.encoded_id {
            Some(bytes) => command.insert_encoded("lsid", Arc::clone(bytes)),
            None => command.insert("lsid", self.id.clone()),
        }
    }

    /// A session with a freshly generated id.
    pub fn generate(rng: &mut fastrand::Rng, now: Instant) -> Self {
        ServerSession::new(new_session_id(rng), now)
    }

    /// Whether the server will forget this session in less than
    /// [`EXPIRY_MARGIN`], given its `logicalSessionTimeoutMinutes`.
    pub fn is_about_to_expire(&self, now: Instant, timeout_minutes: u32) -> bool {
        let timeout = Duration::from_secs(u64::from(timeout_minutes) * 60);
        let idle = now.saturating_duration_since(self.last_use);
        match timeout.checked_sub(idle) {
            Some(remaining) => remaining < EXPIRY_MARGIN,
            None => true,
        }
    }

    /// Records that the id was sent to a server at `now`.
    pub fn mark_used(&mut self, now: Instant) {
        self.last_use = now;
    }

    /// Marks the session as involved in a network error; it stays dirty for
    /// the rest of its life.
    pub fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    /// Advances the transaction number and returns the new one.
    pub fn next_txn_number(&mut self) -> i64 {
        self.txn_number += 1;
        self.txn_number
    }
}

/// The client's pool of idle [`ServerSession`]s.
///
/// `timeout_minutes` arguments are the topology's
/// `logicalSessionTimeoutMinutes`; `None` means expiry is not checked, which
/// is what load-balanced mode requires (the load balancer spec forbids
/// pruning there) and what the caller passes when the value is unknown.
#[derive(Debug)]
pub struct SessionPool {
    idle: VecDeque<ServerSession>,
    generation: u64,
    rng: fastrand::Rng,
    /// The process the sessions belong to; a forked child must not reuse
    /// them (nor the random state that generated their ids).
    process: ProcessWatch,
}

impl SessionPool {
    /// An empty pool generating ids from `rng`, in the process `pid`.
    pub fn new(rng: fastrand::Rng, pid: u32) -> Self {
        SessionPool {
            idle: VecDeque::new(),
            generation: 0,
            rng,
            process: ProcessWatch::for_pid(pid),
        }
    }

    /// Forgets the pool's sessions (without ending them: they are the
    /// parent's) and draws a new id generator when `process` is no longer
    /// the one the pool was used in, i.e. after a fork. Sessions checked out
    /// before the fork are not taken back either.
    fn forget_inherited_sessions(&mut self, process: CurrentProcess) {
        if self.process.changed_to(process.id) {
            self.clear();
            self.rng = fastrand::Rng::with_seed((process.fresh_seed)());
        }
    }

    /// How many idle sessions the pool holds.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.idle.len()
    }

    /// Whether the pool holds no idle session.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.idle.is_empty()
    }

    /// The most recently returned session that still has at least a minute
    /// left, or a new one, in `process` (an operation reads it once, when
    /// it selects a server, rather than once per step). Sessions found
    /// about to expire on the way are discarded.
    pub fn checkout(
        &mut self,
        process: CurrentProcess,
        now: Instant,
        timeout_minutes: Option<u32>,
    ) -> ServerSession {
        self.forget_inherited_sessions(process);
        while let Some(session) = self.idle.pop_front() {
            match timeout_minutes {
                Some(minutes) if session.is_about_to_expire(now, minutes) => continue,
                _ => return session,
            }
        }
        let mut session = ServerSession::generate(&mut self.rng, now);
        session.generation = self.generation;
        session
    }

    /// Returns a session for reuse, in `process` as the caller's operation
    /// read it. Expiring sessions at the back are pruned first; the returned
    /// session is discarded if it is dirty, about to expire, or from before
    /// the last [`clear`](Self::clear). A stale `process` here (a forked
    /// child dropping its parent's cursor) can only put a parent's session
    /// in the pool under the parent's pid: the next checkout, whose process
    /// is read afresh, sees the change and clears the pool, so no session
    /// leaves it in the wrong process.
    pub fn checkin(
        &mut self,
        process: CurrentProcess,
        session: ServerSession,
        now: Instant,
        timeout_minutes: Option<u32>,
    ) {
        self.forget_inherited_sessions(process);
        if let Some(minutes) = timeout_minutes {
            self.prune(now, minutes);
        }
        if session.dirty || session.generation != self.generation {
            return;
        }
        if let Some(minutes) = timeout_minutes {
            if session.is_about_to_expire(now, minutes) {
                return;
            }
        }
        self.idle.push_front(session);
    }

    /// Discards sessions from the back while they are about to expire,
    /// stopping at the first that is not.
    pub fn prune(&mut self, now: Instant, timeout_minutes: u32) {
        while self
            .idle
            .back()
            .is_some_and(|s| s.is_about_to_expire(now, timeout_minutes))
        {
            self.idle.pop_back();
        }
    }

    /// Forgets every idle session without ending them on the server (after a
    /// fork); sessions checked out before this call are not taken back.
    pub fn clear(&mut self) {
        self.idle.clear();
        self.generation += 1;
    }

    /// Empties the pool into `endSessions` command bodies of at most
    /// [`END_SESSIONS_BATCH`] ids each, to send to the `admin` database when
    /// the client closes (their errors are to be ignored), in `process`.
    pub fn drain_end_sessions_commands(&mut self, process: CurrentProcess) -> Vec<Document> {
        // A forked child must not end its parent's sessions.
        self.forget_inherited_sessions(process);
        let ids: Vec<Document> = self.idle.drain(..).map(|s| s.id).collect();
        ids.chunks(END_SESSIONS_BATCH)
            .map(|chunk| doc! { "endSessions": chunk.to_vec() })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::proto::process::test_processes::{CHILD, PARENT as HERE, SIBLING};

    fn in_process(pid: u32) -> CurrentProcess {
        CurrentProcess {
            id: pid,
            fresh_seed: || u64::from(u32::MAX) + 7,
        }
    }

    fn pool() -> SessionPool {
        SessionPool::new(fastrand::Rng::with_seed(7), HERE.id)
    }

    fn uuid_bytes(id: &Document) -> Vec<u8> {
        match id.get("id") {
            Some(bson::Bson::Binary(b)) => {
                assert_eq!(b.subtype, BinarySubtype::Uuid);
                b.bytes.clone()
            }
            other => panic!("lsid id is not binary: {other:?}"),
        }
    }

    #[test]
    fn uuid_has_version_4_and_rfc4122_variant() {
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..200 {
            let u = uuid_v4(&mut rng);
            assert_eq!(u[6] >> 4, 4, "version nibble");
            assert_eq!(u[8] >> 6, 0b10, "variant bits");
        }
    }

    #[test]
    fn session_id_is_a_subtype_4_binary_of_16_bytes_and_ids_differ() {
        let mut rng = fastrand::Rng::with_seed(2);
        let a = new_session_id(&mut rng);
        let b = new_session_id(&mut rng);
        assert_eq!(a.len(), 1);
        assert_eq!(uuid_bytes(&a).len(), 16);
        assert_ne!(uuid_bytes(&a), uuid_bytes(&b));
    }

    #[test]
    fn about_to_expire_means_less_than_a_minute_left() {
        let t0 = Instant::now();
        let s = ServerSession::new(doc! {"id": 1}, t0);
        assert!(!s.is_about_to_expire(t0, 30));
        assert!(!s.is_about_to_expire(t0 + Duration::from_secs(29 * 60), 30));
        assert!(s.is_about_to_expire(t0 + Duration::from_secs(29 * 60 + 1), 30));
        assert!(s.is_about_to_expire(t0 + Duration::from_secs(31 * 60), 30));
        // With a one-minute timeout a session is usable only while unused.
        assert!(!s.is_about_to_expire(t0, 1));
        assert!(s.is_about_to_expire(t0 + Duration::from_secs(1), 1));
    }

    #[test]
    fn empty_pool_creates_a_session_last_used_now() {
        let t0 = Instant::now();
        let s = pool().checkout(HERE, t0, Some(30));
        assert_eq!(s.last_use, t0);
        assert_eq!(s.txn_number, 0);
        assert!(!s.dirty);
    }

    #[test]
    fn checkout_is_lifo() {
        let t0 = Instant::now();
        let mut p = pool();
        let a = p.checkout(HERE, t0, Some(30));
        let b = p.checkout(HERE, t0, Some(30));
        p.checkin(HERE, a.clone(), t0, Some(30));
        p.checkin(HERE, b.clone(), t0, Some(30));
        assert_eq!(p.checkout(HERE, t0, Some(30)).id, b.id);
        assert_eq!(p.checkout(HERE, t0, Some(30)).id, a.id);
        assert!(p.is_empty());
    }

    #[test]
    fn reuse_keeps_the_transaction_number() {
        let t0 = Instant::now();
        let mut p = pool();
        let mut s = p.checkout(HERE, t0, Some(30));
        s.next_txn_number();
        s.next_txn_number();
        p.checkin(HERE, s, t0, Some(30));
        assert_eq!(p.checkout(HERE, t0, Some(30)).txn_number, 2);
    }

    #[test]
    fn checkout_discards_sessions_about_to_expire() {
        let t0 = Instant::now();
        let mut p = pool();
        let old = p.checkout(HERE, t0, Some(30));
        p.checkin(HERE, old.clone(), t0, Some(30));
        let later = t0 + Duration::from_secs(29 * 60 + 30);
        let fresh = p.checkout(HERE, later, Some(30));
        assert_ne!(fresh.id, old.id);
        assert!(p.is_empty());
    }

    #[test]
    fn load_balanced_checkout_does_not_check_expiry() {
        let t0 = Instant::now();
        let mut p = pool();
        let old = p.checkout(HERE, t0, None);
        p.checkin(HERE, old.clone(), t0, None);
        let much_later = t0 + Duration::from_secs(3600);
        assert_eq!(p.checkout(HERE, much_later, None).id, old.id);
    }

    #[test]
    fn checkin_discards_dirty_and_expiring_sessions() {
        let t0 = Instant::now();
        let mut p = pool();
        let mut dirty = p.checkout(HERE, t0, Some(30));
        dirty.mark_dirty();
        p.checkin(HERE, dirty, t0, Some(30));
        assert!(p.is_empty());

        let stale = p.checkout(HERE, t0, Some(30));
        p.checkin(HERE, stale, t0 + Duration::from_secs(29 * 60 + 1), Some(30));
        assert!(p.is_empty());

        let mut dirty_lb = p.checkout(HERE, t0, None);
        dirty_lb.mark_dirty();
        p.checkin(HERE, dirty_lb, t0, None);
        assert!(p.is_empty());
    }

    #[test]
    fn checkin_prunes_expiring_sessions_from_the_back_only() {
        let t0 = Instant::now();
        let mut p = pool();
        let oldest = p.checkout(HERE, t0, Some(30));
        let middle = p.checkout(HERE, t0, Some(30));
        let newer = p.checkout(HERE, t0, Some(30));
        p.checkin(HERE, oldest, t0, Some(30));
        let mut m = middle;
        m.mark_used(t0 + Duration::from_secs(10 * 60));
        p.checkin(HERE, m.clone(), t0 + Duration::from_secs(10 * 60), Some(30));
        // Front: middle (used at 10 min), back: oldest (used at 0).
        let at = t0 + Duration::from_secs(29 * 60 + 30);
        let mut n = newer;
        n.mark_used(at);
        p.checkin(HERE, n.clone(), at, Some(30));
        assert_eq!(p.len(), 2, "only the expiring back session is pruned");
        assert_eq!(p.checkout(HERE, at, Some(30)).id, n.id);
        assert_eq!(p.checkout(HERE, at, Some(30)).id, m.id);
    }

    #[test]
    fn prune_stops_at_the_first_live_session() {
        let t0 = Instant::now();
        let mut p = pool();
        let live_at_back = p.checkout(HERE, t0 + Duration::from_secs(20 * 60), Some(30));
        let expiring_in_front = p.checkout(HERE, t0, Some(30));
        p.checkin(
            HERE,
            live_at_back,
            t0 + Duration::from_secs(20 * 60),
            Some(30),
        );
        p.idle.push_front(expiring_in_front);
        p.prune(t0 + Duration::from_secs(29 * 60 + 30), 30);
        assert_eq!(p.len(), 2, "pruning looks only at the back");
    }

    #[test]
    fn clear_refuses_sessions_checked_out_before() {
        let t0 = Instant::now();
        let mut p = pool();
        let before = p.checkout(HERE, t0, Some(30));
        let idle = p.checkout(HERE, t0, Some(30));
        p.checkin(HERE, idle, t0, Some(30));
        p.clear();
        assert!(p.is_empty());
        p.checkin(HERE, before, t0, Some(30));
        assert!(p.is_empty());
        let after = p.checkout(HERE, t0, Some(30));
        p.checkin(HERE, after, t0, Some(30));
        assert_eq!(p.len(), 1);
    }

    /// What a forked child's copy of the pool looks like: the same state,
    /// still watching its parent's process.
    fn as_seen_by_a_forked_child(p: &SessionPool) -> SessionPool {
        SessionPool {
            idle: p.idle.clone(),
            generation: p.generation,
            rng: p.rng.clone(),
            process: p.process,
        }
    }

    #[test]
    fn a_forked_child_neither_reuses_nor_regenerates_its_parents_sessions() {
        let t0 = Instant::now();
        let mut parent = pool();
        let checked_out = parent.checkout(HERE, t0, Some(30));
        let pooled = parent.checkout(HERE, t0, Some(30));
        parent.checkin(HERE, pooled.clone(), t0, Some(30));

        let mut child = as_seen_by_a_forked_child(&parent);
        let mut sibling = as_seen_by_a_forked_child(&parent);
        let child_session = child.checkout(CHILD, t0, Some(30));
        assert_ne!(child_session.id, pooled.id, "the parent's pooled lsid");
        // The parent's next new id is what a copied generator would draw.
        parent.checkout(HERE, t0, Some(30));
        let parent_next = parent.checkout(HERE, t0, Some(30));
        assert_ne!(child_session.id, parent_next.id, "a copied id generator");
        sibling.checkout(SIBLING, t0, Some(30));
        assert_ne!(sibling.checkout(SIBLING, t0, Some(30)).id, parent_next.id);

        // A session the parent had checked out is not taken back either.
        child.checkin(CHILD, checked_out, t0, Some(30));
        assert!(child.is_empty());
        assert!(child.drain_end_sessions_commands(CHILD).is_empty());
        child.checkin(CHILD, child_session, t0, Some(30));
        assert_eq!(child.len(), 1, "the child's own sessions are pooled");
    }

    #[test]
    fn a_stale_pid_at_checkin_cannot_hand_a_parents_session_to_the_child() {
        // An operation passes the pid its selection read; a forked child's
        // cursor dropped before any new operation passes the parent's.
        let (parent_pid, child_pid) = (100, 200);
        let t0 = Instant::now();
        let mut child = SessionPool::new(fastrand::Rng::with_seed(7), parent_pid);
        let parents = child.checkout(in_process(parent_pid), t0, Some(30));
        // The child's first operation reads its own pid.
        let own = child.checkout(in_process(child_pid), t0, Some(30));
        child.checkin(in_process(child_pid), own, t0, Some(30));
        // The parent's session comes back under the stale pid...
        child.checkin(in_process(parent_pid), parents.clone(), t0, Some(30));
        // ...and the next checkout, with the pid read afresh, never hands it out.
        for _ in 0..3 {
            let next = child.checkout(in_process(child_pid), t0, Some(30));
            assert_ne!(
                next.id, parents.id,
                "the parent's session reached the child"
            );
        }

        // The same when the stale checkin comes before the child's first
        // operation: the pool still believes it is in the parent.
        let mut child = SessionPool::new(fastrand::Rng::with_seed(7), parent_pid);
        let parents = child.checkout(in_process(parent_pid), t0, Some(30));
        child.checkin(in_process(parent_pid), parents.clone(), t0, Some(30));
        assert_eq!(child.len(), 1);
        let next = child.checkout(in_process(child_pid), t0, Some(30));
        assert_ne!(
            next.id, parents.id,
            "the parent's session reached the child"
        );
    }

    #[test]
    fn a_forked_child_does_not_end_its_parents_sessions() {
        let t0 = Instant::now();
        let mut parent = pool();
        let session = parent.checkout(HERE, t0, None);
        parent.checkin(HERE, session, t0, None);
        let mut child = as_seen_by_a_forked_child(&parent);
        assert!(child.drain_end_sessions_commands(CHILD).is_empty());
        assert_eq!(parent.drain_end_sessions_commands(HERE).len(), 1);
    }

    #[test]
    fn end_sessions_commands_are_batched() {
        let t0 = Instant::now();
        let mut p = pool();
        let sessions: Vec<_> = (0..END_SESSIONS_BATCH + 3)
            .map(|_| p.checkout(HERE, t0, None))
            .collect();
        for s in sessions {
            p.checkin(HERE, s, t0, None);
        }
        let commands = p.drain_end_sessions_commands(HERE);
        assert_eq!(commands.len(), 2);
        assert_eq!(
            commands[0].get_array("endSessions").unwrap().len(),
            END_SESSIONS_BATCH
        );
        assert_eq!(commands[1].get_array("endSessions").unwrap().len(), 3);
        assert!(p.is_empty());
        assert!(p.drain_end_sessions_commands(HERE).is_empty());
    }
}
