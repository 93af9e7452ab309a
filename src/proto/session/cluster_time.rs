//! Cluster time gossip: remember the greatest `$clusterTime` any server sent
//! and send it back on every (non-monitoring) command.
//!
//! The client keeps one [`ClusterClock`] advanced only by server replies;
//! each session keeps its own, which `advanceClusterTime` may also move. A
//! command carries the greater of the two ([`ClusterTime::greater`]).

use bson::{Bson, Document, Timestamp};

use crate::command_draft::CommandDraft;
use crate::reply::ReplyFields;

/// The lowest wire version that understands `$clusterTime` (MongoDB 3.6).
pub const MIN_CLUSTER_TIME_WIRE_VERSION: i32 = 6;

/// Whether a server with this `maxWireVersion` accepts `$clusterTime`.
pub fn supports_cluster_time(max_wire_version: i32) -> bool {
    max_wire_version >= MIN_CLUSTER_TIME_WIRE_VERSION
}

/// One `$clusterTime` document as a server sent it (`clusterTime` plus the
/// `signature` the driver passes back untouched).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterTime {
    document: Document,
    timestamp: Timestamp,
}

impl ClusterTime {
    /// Reads a `$clusterTime` document; `None` when it has no Timestamp
    /// `clusterTime` field (such a value cannot be compared, so it is not
    /// gossiped).
    pub fn from_document(document: &Document) -> Option<Self> {
        match document.get("clusterTime") {
            Some(Bson::Timestamp(timestamp)) => Some(ClusterTime {
                document: document.clone(),
                timestamp: *timestamp,
            }),
            _ => None,
        }
    }

    /// The `$clusterTime` of a reply, if it has a usable one.
    pub fn from_reply(reply: &Document) -> Option<Self> {
        ClusterTime::from_fields(reply)
    }

    /// [`Self::from_reply`] of a reply's fields, read where they lie.
    pub(crate) fn from_fields(reply: &impl ReplyFields) -> Option<Self> {
        match reply.field("$clusterTime").as_deref() {
            Some(Bson::Document(d)) => ClusterTime::from_document(d),
            _ => None,
        }
    }

    /// The `clusterTime` timestamp, the only part that is compared.
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The document to send as `$clusterTime`.
    pub fn as_document(&self) -> &Document {
        &self.document
    }

    /// Whether this time is later than `other` (seconds, then increment).
    pub fn is_after(&self, other: &ClusterTime) -> bool {
        timestamp_after(self.timestamp, other.timestamp)
    }

    /// The greater of two optional cluster times (the first on a tie).
    pub fn greater<'a>(
        a: Option<&'a ClusterTime>,
        b: Option<&'a ClusterTime>,
    ) -> Option<&'a ClusterTime> {
        match (a, b) {
            (Some(a), Some(b)) if b.is_after(a) => Some(b),
            (Some(a), _) => Some(a),
            (None, b) => b,
        }
    }
}

/// Whether timestamp `a` is later than `b`, comparing seconds and then the
/// increment as the sessions spec requires.
pub fn timestamp_after(a: Timestamp, b: Timestamp) -> bool {
    (a.time, a.increment) > (b.time, b.increment)
}

/// The greatest cluster time seen so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterClock {
    highest: Option<ClusterTime>,
}

impl ClusterClock {
    /// A clock that has seen nothing.
    pub fn new() -> Self {
        ClusterClock::default()
    }

    /// The greatest cluster time seen, if any.
    pub fn current(&self) -> Option<&ClusterTime> {
        self.highest.as_ref()
    }

    /// Takes `cluster_time` (a `$clusterTime` document) if it is later than
    /// the current one; returns whether it was. Documents without a
    /// Timestamp `clusterTime` are ignored.
    pub fn advance(&mut self, cluster_time: &Document) -> bool {
        match ClusterTime::from_document(cluster_time) {
            Some(time) => self.advance_to(time),
            None => false,
        }
    }

    /// Takes `time` if it is later than the current one; returns whether it was.
    pub fn advance_to(&mut self, time: ClusterTime) -> bool {
        let later = match &self.highest {
            Some(current) => time.is_after(current),
            None => true,
        };
        if later {
            self.highest = Some(time);
        }
        later
    }

    /// Advances from the `$clusterTime` of a reply (any reply, `ok: 0` too,
    /// but never a monitoring reply).
    pub fn observe_reply(&mut self, reply: &Document) -> bool {
        self.observe_fields(reply)
    }

    /// [`Self::observe_reply`] of a reply's fields, read where they lie.
    pub(crate) fn observe_fields(&mut self, reply: &impl ReplyFields) -> bool {
        match ClusterTime::from_fields(reply) {
            Some(time) => self.advance_to(time),
            None => false,
        }
    }

    /// Adds `$clusterTime` to an outgoing command when there is one to send
    /// and the server (`max_wire_version`) understands it.
    pub fn attach(&self, command: &mut Document, max_wire_version: i32) {
        let mut draft = CommandDraft::new(std::mem::take(command));
        attach_cluster_time(&mut draft, self.current(), max_wire_version);
        *command = draft.into_document();
    }
}

/// Adds `$clusterTime: time` to `command` when there is a time and the server
/// supports it.
pub(crate) fn attach_cluster_time(
    command: &mut CommandDraft,
    time: Option<&ClusterTime>,
    max_wire_version: i32,
) {
    if let Some(time) = time {
        if supports_cluster_time(max_wire_version) {
            command.insert("$clusterTime", time.as_document().clone());
        }
    }
}

#[cfg(test)]
pub(crate) fn cluster_time_doc(time: u32, increment: u32) -> Document {
    bson::doc! {
        "clusterTime": Timestamp { time, increment },
        "signature": { "hash": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; 20] }, "keyId": 7_i64 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn keeps_the_greatest_cluster_time() {
        let mut clock = ClusterClock::new();
        assert!(clock.current().is_none());
        assert!(clock.advance(&cluster_time_doc(10, 5)));
        assert!(!clock.advance(&cluster_time_doc(10, 4)), "lower increment");
        assert!(!clock.advance(&cluster_time_doc(9, 99)), "earlier second");
        assert!(!clock.advance(&cluster_time_doc(10, 5)), "equal");
        assert_eq!(clock.current().unwrap().timestamp().increment, 5);
        assert!(clock.advance(&cluster_time_doc(10, 6)));
        assert!(clock.advance(&cluster_time_doc(11, 0)));
        assert_eq!(
            clock.current().unwrap().timestamp(),
            Timestamp {
                time: 11,
                increment: 0
            }
        );
    }

    #[test]
    fn signature_is_kept_but_not_compared() {
        let mut clock = ClusterClock::new();
        let mut d = cluster_time_doc(3, 1);
        d.insert("signature", doc! {"hash": "other", "keyId": 1_i64});
        clock.advance(&d);
        assert!(!clock.advance(&cluster_time_doc(3, 1)));
        assert_eq!(clock.current().unwrap().as_document(), &d);
    }

    #[test]
    fn malformed_cluster_times_are_ignored() {
        let mut clock = ClusterClock::new();
        assert!(!clock.advance(&doc! {"clusterTime": 5}));
        assert!(!clock.advance(&doc! {}));
        assert!(!clock.observe_reply(&doc! {"ok": 1, "$clusterTime": "x"}));
        assert!(!clock.observe_reply(&doc! {"ok": 1}));
        assert!(clock.current().is_none());
    }

    #[test]
    fn observes_replies() {
        let mut clock = ClusterClock::new();
        assert!(clock.observe_reply(&doc! {"ok": 0, "$clusterTime": cluster_time_doc(4, 2)}));
        assert_eq!(clock.current().unwrap().timestamp().time, 4);
    }

    #[test]
    fn attaches_only_to_servers_that_support_it() {
        let mut clock = ClusterClock::new();
        let mut cmd = doc! {"find": "c"};
        clock.attach(&mut cmd, 17);
        assert!(!cmd.contains_key("$clusterTime"), "nothing seen yet");
        clock.advance(&cluster_time_doc(1, 1));
        clock.attach(&mut cmd, 5);
        assert!(!cmd.contains_key("$clusterTime"), "3.4 server");
        clock.attach(&mut cmd, 6);
        assert_eq!(
            cmd.get_document("$clusterTime").unwrap(),
            &cluster_time_doc(1, 1)
        );
    }

    #[test]
    fn greater_picks_the_later_of_two() {
        let a = ClusterTime::from_document(&cluster_time_doc(1, 2)).unwrap();
        let b = ClusterTime::from_document(&cluster_time_doc(1, 3)).unwrap();
        assert_eq!(ClusterTime::greater(Some(&a), Some(&b)), Some(&b));
        assert_eq!(ClusterTime::greater(Some(&b), Some(&a)), Some(&b));
        assert_eq!(ClusterTime::greater(None, Some(&a)), Some(&a));
        assert_eq!(ClusterTime::greater(Some(&a), None), Some(&a));
        assert_eq!(ClusterTime::greater(None, None), None);
    }
}
