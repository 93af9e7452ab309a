//! Making a [`ServerDescription`] out of a check's outcome: a hello (or
//! legacy hello) reply, or an error.
//!
//! The reply comes from the network, so nothing here panics on it: a field
//! of the wrong type counts as absent, and a reply whose member lists
//! cannot be read makes the server Unknown with an error that says why.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document};

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::read_preference::TagSet;
use crate::proto::reply::{check_reply, is_ok};

use super::description::{same_error, ServerDescription, ServerType, TopologyVersion};
use super::rtt::RoundTripTime;

impl ServerDescription {
    /// The description a successful check produces.
    ///
    /// `rtt` is the server's round-trip-time tracker with this check's
    /// duration already added; `now` becomes `last_update_time`. A reply
    /// without `ok: 1` gives an Unknown server (with the reply's `errmsg`).
    pub(crate) fn from_hello(
        address: ServerAddress,
        reply: &Document,
        rtt: &RoundTripTime,
        now: Instant,
    ) -> ServerDescription {
        // The same command error the shell makes of any `ok: 0` reply, so
        // the server's error is one kind however the hello reached here
        // (copied only then: a large set's hello is big).
        let refused = (!is_ok(reply))
            .then(|| check_reply(reply.clone(), &address).err())
            .flatten();
        if let Some(error) = refused {
            let mut unknown = ServerDescription::from_error(address, error, None);
            unknown.last_update_time = Some(now);
            return unknown;
        }
        match parse_reply(address.clone(), reply, rtt, now) {
            Ok(description) => description,
            Err(message) => {
                let error = Error::protocol(Some(address.clone()), message);
                let mut unknown = ServerDescription::from_error(address, error, None);
                unknown.last_update_time = Some(now);
                unknown
            }
        }
    }

    /// The Unknown description a failed check or an application error
    /// produces: `error` says what failed; `topology_version` is the one a
    /// state-change error carried, if any.
    pub(crate) fn from_error(
        address: ServerAddress,
        error: Error,
        topology_version: Option<TopologyVersion>,
    ) -> ServerDescription {
        let mut unknown = ServerDescription::unknown(address);
        unknown.error = Some(error);
        unknown.topology_version = topology_version;
        unknown
    }

    /// The SDAM spec's equality ("Server Description Equality"): the fields
    /// it marks `(=)` are equal. Round-trip time and `last_update_time` are
    /// not compared, so a routine check of an unchanged server publishes no
    /// event. Member lists compare as sets. Errors compare by their
    /// messages: the spec's `error` "MUST contain or be able to produce a
    /// string describing the error", and two checks failing the same way
    /// give the same message (so a server that stays down publishes no
    /// event per check), while a different failure is a change to report.
    pub(crate) fn semantically_equal(&self, other: &ServerDescription) -> bool {
        self.address == other.address
            && same_error(self.error.as_ref(), other.error.as_ref())
            && self.server_type == other.server_type
            && self.min_wire_version == other.min_wire_version
            && self.max_wire_version == other.max_wire_version
            && self.me == other.me
            && same_set(&self.hosts, &other.hosts)
            && same_set(&self.passives, &other.passives)
            && same_set(&self.arbiters, &other.arbiters)
            && self.tags == other.tags
            && self.set_name == other.set_name
            && self.election_id == other.election_id
            && self.set_version == other.set_version
            && self.primary == other.primary
            && self.logical_session_timeout_minutes == other.logical_session_timeout_minutes
            && self.topology_version == other.topology_version
            && self.iscryptd == other.iscryptd
    }

    /// Every member this server names: `hosts`, `passives` and `arbiters`.
    pub fn members(&self) -> impl Iterator<Item = &ServerAddress> {
        self.hosts
            .iter()
            .chain(self.passives.iter())
            .chain(self.arbiters.iter())
    }
}

impl TopologyVersion {
    /// Reads a `topologyVersion` document; `None` when it is malformed.
    pub(crate) fn from_document(doc: &Document) -> Option<TopologyVersion> {
        let process_id = doc.get_object_id("processId").ok()?;
        let counter = doc.get("counter").and_then(as_i64)?;
        Some(TopologyVersion {
            process_id,
            counter,
        })
    }

    /// The spec's `compareTopologyVersion(current, new)`: `Less` when `new`
    /// must be treated as more recent — either is missing, or the process
    /// changed, or the counter grew — `Equal` or `Greater` by the counter
    /// otherwise.
    pub(crate) fn compare(
        current: Option<&TopologyVersion>,
        new: Option<&TopologyVersion>,
    ) -> Ordering {
        match (current, new) {
            (Some(current), Some(new)) if current.process_id == new.process_id => {
                current.counter.cmp(&new.counter)
            }
            _ => Ordering::Less,
        }
    }
}

/// Whether `a` and `b` hold the same addresses in any order. In n log n at
/// worst and n when the order is the same (every diff of an unchanged
/// description): the quadratic `contains` made each check of a member in a
/// set of 2,000 cost millions of comparisons (this runs on every update).
fn same_set(a: &Arc<[ServerAddress]>, b: &Arc<[ServerAddress]>) -> bool {
    // Copies of one description share their lists: no need to look inside.
    if Arc::ptr_eq(a, b) {
        return true;
    }
    if a.len() != b.len() {
        return false;
    }
    if a[..] == b[..] {
        return true;
    }
    let mut a: Vec<&ServerAddress> = a.iter().collect();
    let mut b: Vec<&ServerAddress> = b.iter().collect();
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

fn parse_reply(
    address: ServerAddress,
    reply: &Document,
    rtt: &RoundTripTime,
    now: Instant,
) -> Result<ServerDescription, String> {
    let mut description = ServerDescription::unknown(address);
    let set_name = reply.get_str("setName").ok().map(str::to_string);
    description.server_type = server_type(reply, set_name.is_some());
    description.set_name = set_name;
    description.error = None;
    description.round_trip_time = rtt.average();
    description.min_round_trip_time = Some(rtt.min());
    description.last_update_time = Some(now);

    if let Ok(last_write) = reply.get_document("lastWrite") {
        description.last_write_date = last_write
            .get_datetime("lastWriteDate")
            .ok()
            .map(|d| d.timestamp_millis());
        description.op_time = last_write.get_document("opTime").ok().cloned();
    }
    description.min_wire_version = int_field(reply, "minWireVersion").unwrap_or(0);
    description.max_wire_version = int_field(reply, "maxWireVersion").unwrap_or(0);
    description.me = optional_address(reply, "me")?;
    description.hosts = address_list(reply, "hosts")?;
    description.passives = address_list(reply, "passives")?;
    description.arbiters = address_list(reply, "arbiters")?;
    description.tags = tags(reply);
    description.set_version = reply.get("setVersion").and_then(as_i64);
    description.election_id = reply.get_object_id("electionId").ok();
    description.primary = optional_address(reply, "primary")?;
    description.logical_session_timeout_minutes =
        reply.get("logicalSessionTimeoutMinutes").and_then(as_i64);
    description.topology_version = reply
        .get_document("topologyVersion")
        .ok()
        .and_then(TopologyVersion::from_document);
    description.service_id = reply.get_object_id("serviceId").ok();
    description.hello_ok = flag(reply, "helloOk");
    if let Some(size) = reply.get("maxBsonObjectSize").and_then(as_i64) {
        description.max_bson_object_size = size;
    }
    if let Some(size) = reply.get("maxMessageSizeBytes").and_then(as_i64) {
        description.max_message_size_bytes = size;
    }
    if let Some(size) = reply.get("maxWriteBatchSize").and_then(as_i64) {
        description.max_write_batch_size = size;
    }
    description.iscryptd = flag(reply, "iscryptd");
    Ok(description)
}

/// The type table of "Parsing a hello or legacy hello response", for a
/// reply that has `ok: 1`.
fn server_type(reply: &Document, has_set_name: bool) -> ServerType {
    if reply.get_str("msg") == Ok("isdbgrid") {
        return ServerType::Mongos;
    }
    // Any server reporting `isreplicaset: true` is a ghost, whatever else
    // it says (the spec's "for simplicity, this is the rule").
    if flag(reply, "isreplicaset") {
        return ServerType::RsGhost;
    }
    if !has_set_name {
        return ServerType::Standalone;
    }
    // `isWritablePrimary` first; `ismaster` only when it is absent.
    let writable_primary = match reply.get("isWritablePrimary") {
        Some(value) => truthy(value),
        None => flag(reply, "ismaster"),
    };
    if flag(reply, "hidden") {
        ServerType::RsOther
    } else if writable_primary {
        ServerType::RsPrimary
    } else if flag(reply, "secondary") {
        ServerType::RsSecondary
    } else if flag(reply, "arbiterOnly") {
        ServerType::RsArbiter
    } else {
        ServerType::RsOther
    }
}

fn flag(reply: &Document, key: &str) -> bool {
    reply.get(key).is_some_and(truthy)
}

fn truthy(value: &Bson) -> bool {
    match value {
        Bson::Boolean(b) => *b,
        Bson::Int32(n) => *n != 0,
        Bson::Int64(n) => *n != 0,
        Bson::Double(n) => *n != 0.0,
        _ => false,
    }
}

/// An integer field, whichever numeric BSON type the server used.
pub(crate) fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(f) if f.fract() == 0.0 && f.is_finite() => Some(*f as i64),
        _ => None,
    }
}

fn int_field(reply: &Document, key: &str) -> Option<i32> {
    reply
        .get(key)
        .and_then(as_i64)
        .and_then(|n| i32::try_from(n).ok())
}

fn parse_address(key: &str, text: &str) -> Result<ServerAddress, String> {
    ServerAddress::parse(text)
        .map_err(|e| format!("hello reply has an invalid address in {key:?}: {e}"))
}

fn optional_address(reply: &Document, key: &str) -> Result<Option<ServerAddress>, String> {
    match reply.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(text)) => parse_address(key, text).map(Some),
        Some(other) => Err(format!(
            "hello reply field {key:?} should be a string, found {other}"
        )),
    }
}

fn address_list(reply: &Document, key: &str) -> Result<Arc<[ServerAddress]>, String> {
    match reply.get(key) {
        None | Some(Bson::Null) => Ok(Arc::from([])),
        Some(Bson::Array(items)) => items
            .iter()
            .map(|item| match item {
                Bson::String(text) => parse_address(key, text),
                other => Err(format!(
                    "hello reply field {key:?} should hold strings, found {other}"
                )),
            })
            .collect(),
        Some(other) => Err(format!(
            "hello reply field {key:?} should be an array, found {other}"
        )),
    }
}

fn tags(reply: &Document) -> TagSet {
    let mut tags = TagSet::new();
    if let Ok(doc) = reply.get_document("tags") {
        for (key, value) in doc {
            if let Bson::String(value) = value {
                tags.insert(key.clone(), value.clone());
            }
        }
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use bson::doc;
    use bson::oid::ObjectId;
    use std::time::Duration;

    fn addr(s: &str) -> ServerAddress {
        ServerAddress::parse(s).unwrap()
    }

    fn describe(reply: Document) -> ServerDescription {
        let mut rtt = RoundTripTime::new();
        rtt.add_sample(Duration::from_millis(5));
        ServerDescription::from_hello(addr("a:27017"), &reply, &rtt, Instant::now())
    }

    #[test]
    fn server_types_follow_the_table() {
        let cases = [
            (doc! {"ok": 1}, ServerType::Standalone),
            (doc! {"ok": 0}, ServerType::Unknown),
            (doc! {"ok": 1, "msg": "isdbgrid"}, ServerType::Mongos),
            (doc! {"ok": 1, "isreplicaset": true}, ServerType::RsGhost),
            (
                doc! {"ok": 1.0, "setName": "rs", "isWritablePrimary": true},
                ServerType::RsPrimary,
            ),
            (
                doc! {"ok": 1, "setName": "rs", "ismaster": true},
                ServerType::RsPrimary,
            ),
            // isWritablePrimary wins over the legacy field when both exist.
            (
                doc! {"ok": 1, "setName": "rs", "isWritablePrimary": false, "ismaster": true},
                ServerType::RsOther,
            ),
            (
                doc! {"ok": 1, "setName": "rs", "secondary": true},
                ServerType::RsSecondary,
            ),
            (
                doc! {"ok": 1, "setName": "rs", "secondary": true, "hidden": true},
                ServerType::RsOther,
            ),
            (
                doc! {"ok": 1, "setName": "rs", "arbiterOnly": true},
                ServerType::RsArbiter,
            ),
            (doc! {"ok": 1, "setName": "rs"}, ServerType::RsOther),
        ];
        for (reply, expected) in cases {
            assert_eq!(describe(reply.clone()).server_type, expected, "{reply}");
        }
    }

    #[test]
    fn member_names_are_lower_cased_and_fields_parsed() {
        let election_id = ObjectId::from_bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
        let d = describe(doc! {
            "ok": 1, "setName": "rs", "isWritablePrimary": true, "helloOk": true,
            "hosts": ["A:27017", "b:27018"], "passives": ["C"], "arbiters": ["D:1"],
            "me": "A:27017", "primary": "A:27017", "setVersion": 3_i64,
            "electionId": election_id, "tags": {"dc": "ny"},
            "minWireVersion": 0, "maxWireVersion": 21,
            "logicalSessionTimeoutMinutes": 30,
            "maxBsonObjectSize": 1024, "maxMessageSizeBytes": 2048, "maxWriteBatchSize": 10,
        });
        assert_eq!(d.hosts[..], [addr("a:27017"), addr("b:27018")]);
        assert_eq!(d.passives[..], [addr("c:27017")]);
        assert_eq!(d.arbiters[..], [addr("d:1")]);
        assert_eq!(d.me, Some(addr("a:27017")));
        assert_eq!(d.primary, Some(addr("a:27017")));
        assert_eq!(d.set_version, Some(3));
        assert_eq!(d.election_id, Some(election_id));
        assert_eq!(d.tags.get("dc").map(String::as_str), Some("ny"));
        assert_eq!(d.max_wire_version, 21);
        assert_eq!(d.logical_session_timeout_minutes, Some(30));
        assert!(d.hello_ok);
        assert_eq!(
            (
                d.max_bson_object_size,
                d.max_message_size_bytes,
                d.max_write_batch_size
            ),
            (1024, 2048, 10)
        );
        assert_eq!(d.round_trip_time, Some(Duration::from_millis(5)));
    }

    #[test]
    fn unreadable_member_list_makes_the_server_unknown() {
        let d = describe(doc! {"ok": 1, "setName": "rs", "hosts": ["a:notaport"]});
        assert_eq!(d.server_type, ServerType::Unknown);
        let error = d.error.unwrap();
        assert!(matches!(*error.kind, ErrorKind::InvalidResponse { .. }));
        assert!(error.to_string().contains("hosts"));
        let d = describe(doc! {"ok": 1, "setName": "rs", "hosts": "a:1"});
        assert_eq!(d.server_type, ServerType::Unknown);
    }

    #[test]
    fn a_refused_hello_is_a_command_error() {
        let d = describe(
            doc! {"ok": 0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": "no"},
        );
        assert_eq!(d.server_type, ServerType::Unknown);
        let error = d.error.unwrap();
        assert_eq!(error.code(), Some(18));
        assert!(matches!(*error.kind, ErrorKind::Command(_)));
    }

    #[test]
    fn a_copy_shares_the_member_lists() {
        let d =
            describe(doc! {"ok": 1, "setName": "rs", "hosts": ["a:1", "b:1"], "passives": ["c:1"]});
        let copy = d.clone();
        assert!(Arc::ptr_eq(&d.hosts, &copy.hosts));
        assert!(Arc::ptr_eq(&d.passives, &copy.passives));
        assert!(d.semantically_equal(&copy));
    }

    #[test]
    fn equality_ignores_rtt_and_update_time_and_member_order() {
        let a = describe(doc! {"ok": 1, "setName": "rs", "hosts": ["a:1", "b:1"]});
        let mut b = describe(doc! {"ok": 1, "setName": "rs", "hosts": ["b:1", "a:1"]});
        b.round_trip_time = Some(Duration::from_secs(9));
        b.last_update_time = None;
        assert!(a.semantically_equal(&b));
        b.error = Some(Error::internal("x"));
        assert!(!a.semantically_equal(&b));
    }

    #[test]
    fn topology_version_comparison() {
        let pid = ObjectId::from_bytes([1; 12]);
        let other = ObjectId::from_bytes([2; 12]);
        let tv = |p, c| TopologyVersion {
            process_id: p,
            counter: c,
        };
        assert_eq!(
            TopologyVersion::compare(None, Some(&tv(pid, 1))),
            Ordering::Less
        );
        assert_eq!(
            TopologyVersion::compare(Some(&tv(pid, 1)), None),
            Ordering::Less
        );
        assert_eq!(
            TopologyVersion::compare(Some(&tv(pid, 2)), Some(&tv(other, 1))),
            Ordering::Less
        );
        assert_eq!(
            TopologyVersion::compare(Some(&tv(pid, 2)), Some(&tv(pid, 1))),
            Ordering::Greater
        );
        assert_eq!(
            TopologyVersion::compare(Some(&tv(pid, 2)), Some(&tv(pid, 2))),
            Ordering::Equal
        );
    }
}
