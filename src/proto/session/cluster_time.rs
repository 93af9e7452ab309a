//! Cluster time gossip: remember the greatest `$clusterTime` any server sent
//! and send it back on every (non-monitoring) command.
//!
//! The client keeps one [`ClusterClock`] advanced only by server replies;
//! each session keeps its own, which `advanceClusterTime` may also move. A
//! command carries the greater of the two ([`ClusterTime::greater`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use bson::{Document, Timestamp};

use crate::proto::command_draft::CommandDraft;
use crate::proto::reply::ReplyFields;

/// The lowest wire version that understands `$clusterTime` (MongoDB 3.6).
pub const MIN_CLUSTER_TIME_WIRE_VERSION: i32 = 6;

/// Whether a server with this `maxWireVersion` accepts `$clusterTime`.
pub fn supports_cluster_time(max_wire_version: i32) -> bool {
    max_wire_version >= MIN_CLUSTER_TIME_WIRE_VERSION
}

/// A cluster time as a server reported it (its `$clusterTime` document:
/// `clusterTime` plus the `signature` the driver passes back untouched), as
/// [`ClientSession::cluster_time`](crate::ClientSession::cluster_time)
/// returns it and
/// [`ClientSession::advance_cluster_time`](crate::ClientSession::advance_cluster_time)
/// takes it.
///
/// Two cluster times compare by their `clusterTime` timestamps alone, as in
/// the official driver. It (de)serializes as the `$clusterTime` document,
/// so one can be kept between processes:
///
/// ```
/// use mongo_inline::bson::{doc, Timestamp};
/// use mongo_inline::ClusterTime;
/// let sent = doc! {
///     "clusterTime": Timestamp { time: 10, increment: 1 },
///     "signature": { "keyId": 0_i64 },
/// };
/// let time: ClusterTime = mongo_inline::bson::from_document(sent.clone()).unwrap();
/// assert_eq!(mongo_inline::bson::to_document(&time).unwrap(), sent);
/// ```
///
/// Kept as the bytes the server sent, shared (an `Arc`) by the client's
/// clock, the sessions and every command that carries it: gossip on a
/// replica set or sharded cluster then costs a comparison per reply and a
/// copy of the bytes into each command, where a `Document` cost a
/// conversion, two clones and a re-encoding (some 15,000 instructions per
/// operation).
#[derive(Clone)]
pub struct ClusterTime {
    encoded: Arc<[u8]>,
    timestamp: Timestamp,
    /// The bytes as a `Document`, made when first asked for.
    document: OnceLock<Document>,
}

impl ClusterTime {
    /// Reads a `$clusterTime` document; `None` when it has no Timestamp
    /// `clusterTime` field (such a value cannot be compared, so it is not
    /// gossiped).
    pub(crate) fn from_document(document: &Document) -> Option<Self> {
        let Ok(timestamp) = document.get_timestamp("clusterTime") else {
            return None;
        };
        let encoded = crate::proto::encode::document_to_raw(document, "$clusterTime").ok()?;
        Some(ClusterTime {
            encoded: Arc::from(encoded.into_bytes()),
            timestamp,
            document: OnceLock::from(document.clone()),
        })
    }

    /// The `clusterTime` timestamp, the only part that is compared.
    #[cfg(test)]
    pub(crate) fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The `$clusterTime` document, as the server sent it.
    pub fn as_document(&self) -> &Document {
        self.document
            .get_or_init(|| crate::proto::encode::raw_to_document(&self.encoded))
    }

    /// Whether this time is later than `other` (seconds, then increment).
    pub(crate) fn is_after(&self, other: &ClusterTime) -> bool {
        timestamp_after(self.timestamp, other.timestamp)
    }

    /// The greater of two optional cluster times (the first on a tie).
    pub(crate) fn greater<'a>(
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

impl PartialEq for ClusterTime {
    /// Equal `clusterTime`s, whatever the signatures (the official driver's
    /// equality: one time signed by two keys is one time).
    fn eq(&self, other: &Self) -> bool {
        self.timestamp == other.timestamp
    }
}

impl Eq for ClusterTime {}

impl Ord for ClusterTime {
    /// By `clusterTime`: seconds, then increment.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.timestamp.time, self.timestamp.increment)
            .cmp(&(other.timestamp.time, other.timestamp.increment))
    }
}

impl PartialOrd for ClusterTime {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ClusterTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ClusterTime")
            .field(self.as_document())
            .finish()
    }
}

impl serde::Serialize for ClusterTime {
    /// As the `$clusterTime` document (`clusterTime`, `signature`).
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        self.as_document().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for ClusterTime {
    /// From a `$clusterTime` document; one without a Timestamp
    /// `clusterTime` is an error.
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        let document = Document::deserialize(deserializer)?;
        ClusterTime::from_document(&document).ok_or_else(|| {
            serde::de::Error::custom("a cluster time needs a Timestamp `clusterTime` field")
        })
    }
}

/// A reply's `$clusterTime`, still in the reply's bytes: compared with the
/// times already known before anything is copied (most replies repeat the
/// time the client has).
pub(crate) struct SeenClusterTime<'a> {
    encoded: Cow<'a, [u8]>,
    timestamp: Timestamp,
}

impl<'a> SeenClusterTime<'a> {
    /// The reply's `$clusterTime`, when it is a document with a Timestamp
    /// `clusterTime`.
    pub(crate) fn read(reply: &'a impl ReplyFields) -> Option<Self> {
        let (encoded, timestamp) = reply.cluster_time()?;
        Some(SeenClusterTime { encoded, timestamp })
    }

    /// Whether it is later than `current` (or there is none).
    pub(crate) fn is_after(&self, current: Option<&ClusterTime>) -> bool {
        current.is_none_or(|current| timestamp_after(self.timestamp, current.timestamp))
    }

    /// A cluster time of its own: `known`'s bytes when they are the same
    /// (shared, not copied), else a copy of the reply's.
    pub(crate) fn to_shared(&self, known: Option<&ClusterTime>) -> ClusterTime {
        match known {
            Some(known) if *known.encoded == *self.encoded => known.clone(),
            _ => self.to_cluster_time(),
        }
    }

    fn to_cluster_time(&self) -> ClusterTime {
        ClusterTime {
            encoded: Arc::from(&*self.encoded),
            timestamp: self.timestamp,
            document: OnceLock::new(),
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
    #[cfg(test)]
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
    #[cfg(test)]
    pub fn advance(&mut self, cluster_time: &Document) -> bool {
        match ClusterTime::from_document(cluster_time) {
            Some(time) => self.advance_to(time),
            None => false,
        }
    }

    /// Takes `time` if it is later than the current one; returns whether it was.
    #[cfg(test)]
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
    #[cfg(test)]
    pub fn observe_reply(&mut self, reply: &Document) -> bool {
        self.observe_fields(reply)
    }

    /// [`Self::observe_reply`] of a reply's fields, read where they lie.
    pub(crate) fn observe_fields(&mut self, reply: &impl ReplyFields) -> bool {
        match SeenClusterTime::read(reply) {
            Some(seen) => self.observe(&seen),
            None => false,
        }
    }

    /// Takes `seen` if it is later than the current time; returns whether
    /// it was (only then are its bytes copied).
    pub(crate) fn observe(&mut self, seen: &SeenClusterTime<'_>) -> bool {
        let later = seen.is_after(self.current());
        if later {
            self.highest = Some(seen.to_cluster_time());
        }
        later
    }

    /// Adds `$clusterTime` to an outgoing command when there is one to send
    /// and the server (`max_wire_version`) understands it.
    #[cfg(test)]
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
            command.insert_encoded("$clusterTime", Arc::clone(&time.encoded));
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

    /// A reply as the executor has it: parsed from bytes, fields unconverted.
    fn parsed_reply(document: &Document) -> crate::proto::reply::Reply {
        let bytes = bson::to_vec(document).unwrap();
        let len = bytes.len();
        crate::proto::reply::Reply::parse(bytes, 0..len).unwrap()
    }

    /// The `$clusterTime` element's value bytes in an encoded command.
    fn sent_cluster_time(draft: &CommandDraft) -> Vec<u8> {
        let mut out = Vec::new();
        draft.write(&mut out).unwrap();
        crate::proto::raw_walk::find(&out, "$clusterTime")
            .and_then(|element| element.as_document())
            .unwrap()
            .to_vec()
    }

    #[test]
    fn a_reply_cluster_time_goes_back_byte_for_byte() {
        let mut time = cluster_time_doc(8, 2);
        // Whatever the server puts beside clusterTime goes back as it came.
        time.insert("extra", doc! {"old": bson::Binary { subtype: bson::spec::BinarySubtype::BinaryOld, bytes: vec![1, 2] }});
        let reply = parsed_reply(&doc! {"ok": 1, "$clusterTime": time.clone()});
        let mut clock = ClusterClock::new();
        assert!(clock.observe_fields(&reply));
        assert_eq!(clock.current().unwrap().as_document(), &time);
        let mut draft = CommandDraft::new(doc! {"find": "c"});
        attach_cluster_time(&mut draft, clock.current(), 17);
        assert_eq!(sent_cluster_time(&draft), bson::to_vec(&time).unwrap());
        // An earlier or equal time from a later reply changes nothing.
        for older in [cluster_time_doc(8, 1), cluster_time_doc(8, 2)] {
            assert!(!clock.observe_fields(&parsed_reply(&doc! {"ok": 1, "$clusterTime": older})));
            assert_eq!(clock.current().unwrap().as_document(), &time);
        }
        assert!(clock.observe_fields(&parsed_reply(
            &doc! {"ok": 0, "$clusterTime": cluster_time_doc(9, 0)}
        )));
        assert_eq!(clock.current().unwrap().timestamp().time, 9);
    }

    #[test]
    fn a_reply_cluster_time_without_a_timestamp_is_ignored() {
        let mut clock = ClusterClock::new();
        for reply in [
            doc! {"ok": 1, "$clusterTime": {"clusterTime": 5}},
            doc! {"ok": 1, "$clusterTime": "x"},
            doc! {"ok": 1, "$clusterTime": {"signature": {}}},
        ] {
            assert!(!clock.observe_fields(&parsed_reply(&reply)), "{reply}");
        }
        assert!(clock.current().is_none());
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
