//! Server selection, as pure rules over a [`TopologyDescription`].
//!
//! ```text
//! criteria ──> suitable_servers ──> application selector ──> latency_window ──> random pick
//!              (topology type,       (settings.server_        (fastest RTT +
//!               mode, staleness,      selector, optional)      localThreshold)
//!               tags, deprioritized)
//! ```
//!
//! Nothing here scans, sleeps or reads a clock: the single-threaded loop of
//! the spec (stale check, blocking scan, tryOnce, timeouts) lives in the
//! topology shell, which calls [`select`] after each scan and, when it gives
//! up, [`selection_error`]. The log messages of the spec's "Logging" section
//! are built here by [`SelectionLog`] and emitted by the shell, which is also
//! responsible for logging "Waiting for suitable server to become available"
//! at most once per operation.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};

use crate::error::{Error, ErrorKind, Result};
use crate::proto::address::ServerAddress;
use crate::proto::read_preference::{
    Predicate, ReadPreference, ReadPreferenceMode, SelectionCriteria, TagSet,
};
use crate::proto::sdam::{
    ServerDescription, ServerInfo, ServerType, TopologyDescription, TopologyType,
};

/// `idleWritePeriodMS` of the max-staleness spec: how often an idle primary
/// writes a no-op, fixed at 10 seconds.
pub const IDLE_WRITE_PERIOD: Duration = Duration::from_secs(10);

/// `smallestMaxStalenessSeconds`: the smallest max staleness a replica set
/// read may ask for.
pub const SMALLEST_MAX_STALENESS: Duration = Duration::from_secs(90);

/// The wire version of MongoDB 5.0, from which secondaries can run an
/// aggregate with a write stage (`$out`, `$merge`).
pub const WIRE_VERSION_5_0: i32 = 13;

/// The `log` target of the server-selection messages.
pub const LOG_TARGET: &str = "mongo_inline::server_selection";

/// The spec's application-provided `serverSelector`: given the suitable
/// servers, returns those that should still be considered suitable.
pub type ServerSelector =
    Arc<dyn for<'a> Fn(Vec<&'a ServerDescription>) -> Vec<&'a ServerDescription> + Send + Sync>;

/// What an operation needs from the server it runs on: the public
/// [`Criteria`] (a read preference or a predicate), or what only
/// the driver asks for (a write, an aggregate that writes).
#[derive(Clone)]
#[non_exhaustive]
pub enum Criteria {
    /// A read, with the read preference that applies to it.
    ReadPreference(ReadPreference),
    /// A write: only a primary (or a mongos, a load balancer, the single
    /// server) will do.
    Write,
    /// An aggregate with a write stage (`$out`, `$merge`). It may run where
    /// the read preference says when every available server is 5.0+ (or
    /// there is none yet, or the deployment is load balanced); otherwise the
    /// read preference is ignored and it selects like a write (CRUD spec,
    /// "Read preferences and server selection").
    AggregateWrite(ReadPreference),
    /// An application- or driver-supplied predicate (a custom server
    /// selector). It filters the servers an operation could go to in this
    /// topology type (the single server, the load balancer, the mongoses, or
    /// a replica set's primary and secondaries) before the latency window.
    /// On the wire it counts as `primaryPreferred` (any member may answer).
    Predicate(Predicate),
}

impl Criteria {
    /// A read with mode `primary`.
    pub fn primary_read() -> Self {
        Criteria::ReadPreference(ReadPreference::Primary)
    }

    /// The criteria this operation really selects with in `topology`: an
    /// [`Criteria::AggregateWrite`] becomes a read with its read
    /// preference or a write, other criteria stay as they are.
    pub fn resolve(&self, topology: &TopologyDescription) -> Criteria {
        match self {
            Criteria::AggregateWrite(read_preference) => {
                if aggregate_write_may_use_read_preference(topology) {
                    Criteria::ReadPreference(read_preference.clone())
                } else {
                    Criteria::Write
                }
            }
            other => other.clone(),
        }
    }
}

/// Read preferences compare by value; a predicate equals only itself (a
/// closure cannot be compared), as in the official driver.
impl PartialEq for Criteria {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Criteria::ReadPreference(a), Criteria::ReadPreference(b))
            | (Criteria::AggregateWrite(a), Criteria::AggregateWrite(b)) => a == b,
            (Criteria::Write, Criteria::Write) => true,
            (Criteria::Predicate(a), Criteria::Predicate(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl From<ReadPreference> for Criteria {
    fn from(read_preference: ReadPreference) -> Self {
        Criteria::ReadPreference(read_preference)
    }
}

impl From<SelectionCriteria> for Criteria {
    fn from(criteria: SelectionCriteria) -> Self {
        match criteria {
            SelectionCriteria::ReadPreference(rp) => Criteria::ReadPreference(rp),
            SelectionCriteria::Predicate(predicate) => Criteria::Predicate(predicate),
        }
    }
}

impl From<&SelectionCriteria> for Criteria {
    fn from(criteria: &SelectionCriteria) -> Self {
        criteria.clone().into()
    }
}

impl fmt::Debug for Criteria {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Criteria::ReadPreference(rp) => f.debug_tuple("ReadPreference").field(rp).finish(),
            Criteria::Write => f.write_str("Write"),
            Criteria::AggregateWrite(rp) => f.debug_tuple("AggregateWrite").field(rp).finish(),
            Criteria::Predicate(_) => f.write_str("Predicate(..)"),
        }
    }
}

impl fmt::Display for Criteria {
    /// The selector string of the log messages and errors: a read
    /// preference shows all its components.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Criteria::ReadPreference(rp) => {
                write!(f, "read preference {}", rp.to_document())
            }
            Criteria::Write => f.write_str("write (primary)"),
            Criteria::AggregateWrite(rp) => write!(
                f,
                "aggregate with a write stage, read preference {}",
                rp.to_document()
            ),
            Criteria::Predicate(_) => f.write_str("custom server selector"),
        }
    }
}

/// Whether an aggregate with a write stage may follow its read preference:
/// yes when load balanced, when no server is available, or when every
/// available server is 5.0+.
fn aggregate_write_may_use_read_preference(topology: &TopologyDescription) -> bool {
    topology.topology_type == TopologyType::LoadBalanced
        || topology
            .servers
            .values()
            .filter(|s| is_available(s))
            .all(|s| s.max_wire_version >= WIRE_VERSION_5_0)
}

/// The client-level settings selection depends on.
#[derive(Clone)]
#[non_exhaustive]
pub struct SelectionSettings {
    /// `localThresholdMS`: the width of the latency window.
    pub local_threshold: Duration,
    /// `heartbeatFrequencyMS`: enters the staleness estimate and the
    /// smallest allowed max staleness.
    pub heartbeat_frequency: Duration,
    /// The application's `serverSelector`, applied to the suitable servers
    /// before the latency window.
    pub server_selector: Option<ServerSelector>,
}

impl SelectionSettings {
    /// Settings without an application server selector.
    pub fn new(local_threshold: Duration, heartbeat_frequency: Duration) -> Self {
        SelectionSettings {
            local_threshold,
            heartbeat_frequency,
            server_selector: None,
        }
    }

    /// These settings with an application server selector.
    pub fn with_server_selector(mut self, selector: ServerSelector) -> Self {
        self.server_selector = Some(selector);
        self
    }
}

impl fmt::Debug for SelectionSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectionSettings")
            .field("local_threshold", &self.local_threshold)
            .field("heartbeat_frequency", &self.heartbeat_frequency)
            .field("server_selector", &self.server_selector.is_some())
            .finish()
    }
}

/// A server "believed to be reachable": any type but Unknown and
/// PossiblePrimary.
fn is_available(server: &ServerDescription) -> bool {
    !matches!(
        server.server_type,
        ServerType::Unknown | ServerType::PossiblePrimary
    )
}

/// The servers suitable for `criteria`, before the latency window and the
/// application selector, in address order.
///
/// `deprioritized` lists servers a retry should avoid (any topology type):
/// suitability is first decided among the other servers, and only if none
/// is suitable among all of them (server selection spec, "Find suitable
/// servers"). Staleness estimates always use the whole topology.
///
/// Errors are, in a replica set, a max staleness below 90 seconds or
/// below `heartbeatFrequencyMS` + 10 s. The caller checks
/// [`TopologyDescription::compatibility_error`] first ([`select`] does).
pub fn suitable_servers<'a>(
    topology: &'a TopologyDescription,
    criteria: &Criteria,
    settings: &SelectionSettings,
    deprioritized: &[ServerAddress],
) -> Result<Vec<&'a ServerDescription>> {
    let criteria = criteria.resolve(topology);
    if let Criteria::ReadPreference(rp) = &criteria {
        if matches!(
            topology.topology_type,
            TopologyType::ReplicaSetWithPrimary | TopologyType::ReplicaSetNoPrimary
        ) {
            validate_max_staleness(rp, settings.heartbeat_frequency)?;
        }
    }
    if !deprioritized.is_empty() {
        let preferred = suitable_among(topology, &criteria, settings, &|s| {
            !deprioritized.contains(&s.address)
        });
        if !preferred.is_empty() {
            return Ok(preferred);
        }
    }
    Ok(suitable_among(topology, &criteria, settings, &|_| true))
}

/// Suitability by topology type and operation, among the servers `considered`
/// keeps. `criteria` is already resolved.
fn suitable_among<'a>(
    topology: &'a TopologyDescription,
    criteria: &Criteria,
    settings: &SelectionSettings,
    considered: &dyn Fn(&ServerDescription) -> bool,
) -> Vec<&'a ServerDescription> {
    let servers = || topology.servers.values().filter(|s| considered(s));
    let of_type = |t: ServerType| servers().filter(move |s| s.server_type == t);
    let candidates: Vec<&ServerDescription> = match topology.topology_type {
        TopologyType::Unknown => Vec::new(),
        // Direct connection: read preference is ignored, the one server is
        // suitable for anything once it is available.
        TopologyType::Single => servers().filter(|s| is_available(s)).collect(),
        TopologyType::LoadBalanced => of_type(ServerType::LoadBalancer).collect(),
        TopologyType::Sharded => of_type(ServerType::Mongos).collect(),
        TopologyType::ReplicaSetWithPrimary | TopologyType::ReplicaSetNoPrimary => match criteria {
            Criteria::Write => of_type(ServerType::RsPrimary).collect(),
            Criteria::ReadPreference(rp) => replica_set_read(
                topology,
                servers().collect(),
                rp,
                settings.heartbeat_frequency,
            ),
            Criteria::Predicate(_) | Criteria::AggregateWrite(_) => servers()
                .filter(|s| {
                    matches!(
                        s.server_type,
                        ServerType::RsPrimary | ServerType::RsSecondary
                    )
                })
                .collect(),
        },
    };
    match criteria {
        Criteria::Predicate(keep) => candidates
            .into_iter()
            .filter(|s| keep(&ServerInfo::new(s)))
            .collect(),
        _ => candidates,
    }
}

/// The spec's limits on `maxStalenessSeconds` in a replica set.
fn validate_max_staleness(rp: &ReadPreference, heartbeat_frequency: Duration) -> Result<()> {
    let Some(max_staleness) = rp.max_staleness() else {
        return Ok(());
    };
    if max_staleness < SMALLEST_MAX_STALENESS {
        return Err(Error::invalid_argument(format!(
            "maxStalenessSeconds must be at least {} seconds, got {}",
            SMALLEST_MAX_STALENESS.as_secs(),
            max_staleness.as_secs()
        )));
    }
    let floor = heartbeat_frequency + IDLE_WRITE_PERIOD;
    if max_staleness < floor {
        return Err(Error::invalid_argument(format!(
            "maxStalenessSeconds ({} s) must be at least heartbeatFrequencyMS ({} ms) plus the \
             idle write period ({} ms)",
            max_staleness.as_secs(),
            heartbeat_frequency.as_millis(),
            IDLE_WRITE_PERIOD.as_millis()
        )));
    }
    Ok(())
}

/// Read selection among `members` of a replica set (the same rules for
/// both replica set topology types). Staleness is estimated against the
/// whole `topology`.
fn replica_set_read<'a>(
    topology: &TopologyDescription,
    members: Vec<&'a ServerDescription>,
    rp: &ReadPreference,
    heartbeat_frequency: Duration,
) -> Vec<&'a ServerDescription> {
    let primaries = || {
        members
            .iter()
            .copied()
            .filter(|s| s.server_type == ServerType::RsPrimary)
    };
    let eligible = |include_primary: bool| {
        let candidates: Vec<&ServerDescription> = members
            .iter()
            .copied()
            .filter(|s| {
                s.server_type == ServerType::RsSecondary
                    || (include_primary && s.server_type == ServerType::RsPrimary)
            })
            .collect();
        let fresh = filter_by_staleness(
            topology,
            candidates,
            rp.max_staleness(),
            heartbeat_frequency,
        );
        filter_by_tag_sets(fresh, rp.tag_sets())
    };
    match rp.mode() {
        ReadPreferenceMode::Primary => primaries().collect(),
        ReadPreferenceMode::Secondary => eligible(false),
        ReadPreferenceMode::Nearest => eligible(true),
        ReadPreferenceMode::PrimaryPreferred => {
            let primary: Vec<_> = primaries().collect();
            if primary.is_empty() {
                eligible(false)
            } else {
                primary
            }
        }
        ReadPreferenceMode::SecondaryPreferred => {
            let secondaries = eligible(false);
            if secondaries.is_empty() {
                primaries().collect()
            } else {
                secondaries
            }
        }
    }
}

/// Drops secondaries whose estimated staleness exceeds `max_staleness`.
/// Non-secondaries have zero staleness. A secondary whose staleness cannot
/// be estimated (no `lastWriteDate` or no check time) is not eligible.
fn filter_by_staleness<'a>(
    topology: &TopologyDescription,
    candidates: Vec<&'a ServerDescription>,
    max_staleness: Option<Duration>,
    heartbeat_frequency: Duration,
) -> Vec<&'a ServerDescription> {
    let Some(max_staleness) = max_staleness.filter(|d| !d.is_zero()) else {
        return candidates;
    };
    let limit_ms = max_staleness.as_millis() as i128;
    candidates
        .into_iter()
        .filter(|s| {
            s.server_type != ServerType::RsSecondary
                || staleness_ms(topology, s, heartbeat_frequency).is_some_and(|st| st <= limit_ms)
        })
        .collect()
}

/// The max-staleness spec's estimate of how far `secondary` lags, in
/// milliseconds.
pub fn staleness_ms(
    topology: &TopologyDescription,
    secondary: &ServerDescription,
    heartbeat_frequency: Duration,
) -> Option<i128> {
    let heartbeat_ms = heartbeat_frequency.as_millis() as i128;
    let last_write = i128::from(secondary.last_write_date?);
    let primary = topology
        .servers
        .values()
        .find(|s| s.server_type == ServerType::RsPrimary);
    match (topology.topology_type, primary) {
        (TopologyType::ReplicaSetWithPrimary, Some(primary)) => {
            // (S.lastUpdateTime - S.lastWriteDate) - (P.lastUpdateTime - P.lastWriteDate) + heartbeat
            let update_gap =
                signed_millis_between(primary.last_update_time?, secondary.last_update_time?);
            let primary_write = i128::from(primary.last_write_date?);
            Some(update_gap - (last_write - primary_write) + heartbeat_ms)
        }
        _ => {
            // SMax.lastWriteDate - S.lastWriteDate + heartbeat
            let newest = topology
                .servers
                .values()
                .filter(|s| s.server_type == ServerType::RsSecondary)
                .filter_map(|s| s.last_write_date)
                .max()?;
            Some(i128::from(newest) - last_write + heartbeat_ms)
        }
    }
}

/// `later - earlier` in milliseconds, negative when `later` is earlier.
fn signed_millis_between(earlier: Instant, later: Instant) -> i128 {
    if later >= earlier {
        later.duration_since(earlier).as_millis() as i128
    } else {
        -(earlier.duration_since(later).as_millis() as i128)
    }
}

/// The spec's tag-set rule: the first tag set that matches any candidate
/// decides; an empty list matches everything; no match leaves nothing.
fn filter_by_tag_sets<'a>(
    candidates: Vec<&'a ServerDescription>,
    tag_sets: &[TagSet],
) -> Vec<&'a ServerDescription> {
    if tag_sets.is_empty() {
        return candidates;
    }
    for tag_set in tag_sets {
        let matching: Vec<&ServerDescription> = candidates
            .iter()
            .copied()
            .filter(|s| tags_match(tag_set, &s.tags))
            .collect();
        if !matching.is_empty() {
            return matching;
        }
    }
    Vec::new()
}

/// Whether the read preference tag set is a subset of the server's tags.
fn tags_match(wanted: &TagSet, server_tags: &TagSet) -> bool {
    wanted
        .iter()
        .all(|(key, value)| server_tags.get(key) == Some(value))
}

/// The candidates whose round-trip time is within `local_threshold` of the
/// fastest. A server without a round-trip time (a load balancer, which is
/// never monitored) neither anchors the window nor is excluded from it.
pub fn latency_window<'a>(
    candidates: &[&'a ServerDescription],
    local_threshold: Duration,
) -> Vec<&'a ServerDescription> {
    let Some(fastest) = candidates.iter().filter_map(|s| s.round_trip_time).min() else {
        return candidates.to_vec();
    };
    let limit = fastest.saturating_add(local_threshold);
    candidates
        .iter()
        .copied()
        .filter(|s| s.round_trip_time.is_none_or(|rtt| rtt <= limit))
        .collect()
}

/// The servers a selection may pick from: suitable, kept by the
/// application selector, inside the latency window.
pub fn selectable_servers<'a>(
    topology: &'a TopologyDescription,
    criteria: &Criteria,
    settings: &SelectionSettings,
    deprioritized: &[ServerAddress],
) -> Result<Vec<&'a ServerDescription>> {
    if let Some(message) = &topology.compatibility_error {
        return Err(Error::new(ErrorKind::IncompatibleServer {
            message: message.clone(),
        }));
    }
    let mut suitable = suitable_servers(topology, criteria, settings, deprioritized)?;
    if let Some(selector) = &settings.server_selector {
        if !suitable.is_empty() {
            suitable = selector(suitable);
        }
    }
    Ok(latency_window(&suitable, settings.local_threshold))
}

/// One attempt of the single-threaded selection algorithm, without the
/// scanning: `Err` for an incompatible deployment or an invalid read
/// preference (the shell fails at once), `Ok(None)` when nothing is
/// suitable now (the shell marks the topology stale and may scan again),
/// else a server picked at random inside the latency window.
#[cfg(test)]
pub fn select(
    topology: &TopologyDescription,
    criteria: &Criteria,
    settings: &SelectionSettings,
    deprioritized: &[ServerAddress],
    rng: &mut fastrand::Rng,
) -> Result<Option<ServerAddress>> {
    let window = window_addresses(topology, criteria, settings, deprioritized)?;
    Ok(pick(&window, rng))
}

/// The addresses of [`selectable_servers`], in its order: what a selection
/// picks from (and what the monitor remembers of one).
pub(crate) fn window_addresses(
    topology: &TopologyDescription,
    criteria: &Criteria,
    settings: &SelectionSettings,
    deprioritized: &[ServerAddress],
) -> Result<Vec<ServerAddress>> {
    Ok(
        selectable_servers(topology, criteria, settings, deprioritized)?
            .into_iter()
            .map(|server| server.address.clone())
            .collect(),
    )
}

/// A server picked at random from a latency window.
pub(crate) fn pick(window: &[ServerAddress], rng: &mut fastrand::Rng) -> Option<ServerAddress> {
    rng.choice(window).cloned()
}

/// The error the shell returns when selection gives up: it names the
/// criteria, the topology type and every server with its type and the
/// error of its last check.
#[cold]
#[cfg(test)]
pub fn selection_error(topology: &TopologyDescription, criteria: &Criteria) -> Error {
    Error::server_selection(describe_selection_failure(topology, criteria, true))
}

/// The servers whose last check failed, with the failure, as the cause to
/// name first in a selection's error: `could not reach a:27017: <error>`
/// (several joined by `; `). `None` when every server answered its check
/// and none was suitable.
pub fn unreachable_servers(topology: &TopologyDescription) -> Option<String> {
    let failures: Vec<String> = topology
        .servers
        .values()
        .filter_map(|server| {
            let error = server.error.as_ref()?.to_string();
            // The address leads already: "I/O error: a:1: ..." would name
            // it twice.
            let prefix = format!("I/O error: {}: ", server.address);
            let error = error.strip_prefix(&prefix).unwrap_or(&error);
            Some(format!("{}: {error}", server.address))
        })
        .collect();
    (!failures.is_empty()).then(|| format!("could not reach {}", failures.join("; ")))
}

/// The text of [`selection_error`] (`with_errors`), or without each
/// server's last error (when [`unreachable_servers`] names them first).
pub(crate) fn describe_selection_failure(
    topology: &TopologyDescription,
    criteria: &Criteria,
    with_errors: bool,
) -> String {
    let mut message = format!(
        "no server is suitable for {criteria} in a {} topology",
        topology.topology_type.as_str()
    );
    if topology.servers.is_empty() {
        message.push_str("; no servers are known");
    } else {
        message.push_str("; servers: ");
        let servers: Vec<String> = topology
            .servers
            .values()
            .map(|server| describe_server(server, with_errors))
            .collect();
        message.push_str(&servers.join(", "));
    }
    // A server the update rules removed is gone from `servers`, but why it
    // went (another replica set's name, a standalone) is the answer the
    // user needs.
    let removed: Vec<String> = topology
        .removed
        .iter()
        .filter(|(address, _)| !topology.servers.contains_key(*address))
        .map(|(address, reason)| format!("{address} {reason}"))
        .collect();
    if !removed.is_empty() {
        message.push_str("; removed: ");
        message.push_str(&removed.join("; "));
    }
    message
}

fn describe_server(server: &ServerDescription, with_error: bool) -> String {
    match server.error.as_ref().filter(|_| with_error) {
        Some(error) => format!(
            "{} ({}, last error: {error})",
            server.address,
            server.server_type.as_str()
        ),
        None => format!("{} ({})", server.address, server.server_type.as_str()),
    }
}

/// A one-line description of the topology for log messages: its type, set
/// name and each server's address, type and round-trip time.
pub fn describe_topology(topology: &TopologyDescription) -> String {
    let servers: Vec<String> = topology
        .servers
        .values()
        .map(|s| {
            let mut text = format!("{{address: {}, type: {}", s.address, s.server_type.as_str());
            if let Some(rtt) = s.round_trip_time {
                text.push_str(&format!(", roundTripTime: {} ms", rtt.as_millis()));
            }
            if let Some(error) = &s.error {
                text.push_str(&format!(", error: {:?}", error.to_string()));
            }
            text.push('}');
            text
        })
        .collect();
    let set_name = topology
        .set_name
        .as_deref()
        .map(|n| format!(", setName: {n}"))
        .unwrap_or_default();
    format!(
        "{{type: {}{set_name}, servers: [{}]}}",
        topology.topology_type.as_str(),
        servers.join(", ")
    )
}

/// The `$readPreference` to attach to a command sent to a server of type
/// `server_type`, selected in `topology` for `criteria` (server selection
/// spec, OP_MSG rules), or `None` when none must be sent.
///
/// | topology | server | sent |
/// |---|---|---|
/// | Single | Standalone | never |
/// | Single | Mongos | as for Sharded |
/// | Single | any other | `primaryPreferred` for `primary` reads, else the read preference |
/// | ReplicaSet* | — | nothing for `primary`, else the read preference |
/// | Sharded, LoadBalanced | — | nothing for `primary`, else the read preference (OP_MSG sends `secondaryPreferred` too; only OP_QUERY may omit it) |
/// | Unknown | — | never |
///
/// Writes send none. A [`Criteria::Predicate`] counts as
/// `primaryPreferred`, since it may have picked any member. An
/// [`Criteria::AggregateWrite`] is resolved against `topology`
/// first.
pub fn read_preference_for_command(
    topology: &TopologyDescription,
    server_type: ServerType,
    criteria: &Criteria,
) -> Option<Document> {
    let read_preference = match criteria.resolve(topology) {
        Criteria::ReadPreference(rp) => rp,
        Criteria::Write | Criteria::AggregateWrite(_) => return None,
        Criteria::Predicate(_) => ReadPreference::primary_preferred(None),
    };
    let unless_primary =
        |rp: &ReadPreference| (rp.mode() != ReadPreferenceMode::Primary).then(|| rp.to_document());
    match topology.topology_type {
        TopologyType::Unknown => None,
        TopologyType::Single => match server_type {
            ServerType::Standalone => None,
            ServerType::Mongos => unless_primary(&read_preference),
            _ if read_preference.mode() == ReadPreferenceMode::Primary => {
                Some(doc! { "mode": ReadPreferenceMode::PrimaryPreferred.as_str() })
            }
            _ => Some(read_preference.to_document()),
        },
        TopologyType::ReplicaSetWithPrimary
        | TopologyType::ReplicaSetNoPrimary
        | TopologyType::Sharded
        | TopologyType::LoadBalanced => unless_primary(&read_preference),
    }
}

/// The level of a server-selection log message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectionLogLevel {
    /// Started, succeeded, failed.
    Debug,
    /// Waiting for a suitable server.
    Info,
}

/// What the shell knows about the selection it logs.
#[derive(Clone, Copy, Debug)]
pub struct SelectionLogContext<'a> {
    /// The command name of the operation.
    pub operation: &'a str,
    /// The driver's operation id, when it has one.
    pub operation_id: Option<i64>,
    /// The criteria being selected for.
    pub criteria: &'a Criteria,
    /// The topology as of the message.
    pub topology: &'a TopologyDescription,
}

/// One server-selection log message: its level and structured fields
/// (component `serverSelection`), with the spec's unstructured form.
#[derive(Clone, Debug, PartialEq)]
pub struct SelectionLog {
    /// Debug for started/succeeded/failed, info for waiting.
    pub level: SelectionLogLevel,
    /// The structured message: `message`, `selector`, `operation`,
    /// `operationId` (when known), `topologyDescription`, plus the
    /// fields of the message kind.
    pub fields: Document,
    unstructured: String,
}

impl SelectionLog {
    /// "Server selection started".
    pub fn started(context: &SelectionLogContext<'_>) -> Self {
        let fields = common_fields("Server selection started", context);
        let unstructured = format!(
            "Server selection started for operation {}{}. Selector: {}, topology description: {}",
            context.operation,
            id_text(context),
            context.criteria,
            describe_topology(context.topology)
        );
        SelectionLog {
            level: SelectionLogLevel::Debug,
            fields,
            unstructured,
        }
    }

    /// "Server selection succeeded", naming the selected server.
    pub fn succeeded(context: &SelectionLogContext<'_>, selected: &ServerAddress) -> Self {
        let mut fields = common_fields("Server selection succeeded", context);
        fields.insert("serverHost", selected.host());
        if let Some(port) = selected.port() {
            fields.insert("serverPort", i32::from(port));
        }
        let unstructured = format!(
            "Server selection succeeded for operation {}{}. Selected server: {selected}. \
             Selector: {}, topology description: {}",
            context.operation,
            id_text(context),
            context.criteria,
            describe_topology(context.topology)
        );
        SelectionLog {
            level: SelectionLogLevel::Debug,
            fields,
            unstructured,
        }
    }

    /// "Server selection failed", with the error the operation will fail with.
    pub fn failed(context: &SelectionLogContext<'_>, failure: &Error) -> Self {
        let mut fields = common_fields("Server selection failed", context);
        fields.insert("failure", failure.to_string());
        let unstructured = format!(
            "Server selection failed for operation {}{}. Failure: {failure}. Selector: {}, \
             topology description: {}",
            context.operation,
            id_text(context),
            context.criteria,
            describe_topology(context.topology)
        );
        SelectionLog {
            level: SelectionLogLevel::Debug,
            fields,
            unstructured,
        }
    }

    /// "Waiting for suitable server to become available". The shell logs it
    /// at most once per operation. `remaining` is `None` when selection has
    /// no deadline (serverSelectionTryOnce).
    pub fn waiting(context: &SelectionLogContext<'_>, remaining: Option<Duration>) -> Self {
        let mut fields = common_fields("Waiting for suitable server to become available", context);
        let remaining_text = match remaining {
            Some(r) => {
                let ms = i64::try_from(r.as_millis()).unwrap_or(i64::MAX);
                fields.insert("remainingTimeMS", ms);
                format!(" Remaining time: {ms} ms.")
            }
            None => String::new(),
        };
        let unstructured = format!(
            "Waiting for server to become available for operation {}{}.{remaining_text} \
             Selector: {}, topology description: {}.",
            context.operation,
            id_text(context),
            context.criteria,
            describe_topology(context.topology)
        );
        SelectionLog {
            level: SelectionLogLevel::Info,
            fields,
            unstructured,
        }
    }

    /// The message in the spec's unstructured form, which the shell logs
    /// at [`Self::level`] under [`LOG_TARGET`].
    #[cfg(test)]
    pub fn unstructured(&self) -> &str {
        &self.unstructured
    }

    /// The message as the shell logs it (component `serverSelection`).
    pub fn into_message(self) -> crate::proto::logging::LogMessage {
        let level = match self.level {
            SelectionLogLevel::Debug => log::Level::Debug,
            SelectionLogLevel::Info => log::Level::Info,
        };
        crate::proto::logging::LogMessage {
            component: crate::proto::logging::Component::ServerSelection,
            level,
            fields: self.fields,
            text: self.unstructured,
        }
    }

    /// The value of the `message` field.
    #[cfg(test)]
    pub fn message(&self) -> &str {
        self.fields.get_str("message").unwrap_or_default()
    }
}

fn common_fields(message: &str, context: &SelectionLogContext<'_>) -> Document {
    let mut fields = doc! {
        "message": message,
        "selector": context.criteria.to_string(),
        "operation": context.operation,
    };
    if let Some(id) = context.operation_id {
        fields.insert("operationId", Bson::Int64(id));
    }
    fields.insert("topologyDescription", describe_topology(context.topology));
    // Beyond the spec's fields: tells several clients' messages apart.
    fields.insert("topologyId", context.topology.id.to_string());
    fields
}

fn id_text(context: &SelectionLogContext<'_>) -> String {
    match context.operation_id {
        Some(id) => format!(" with ID {id}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests;
