//! The single-threaded scan, as pure rules: which server to check next,
//! whether a scan is due, and when a rescan may start.
//!
//! ```text
//! scan_start ──> next_to_check? ──Some(a)──> check a (shell: hello, apply) ──┐
//!                    ▲   │                                                    │
//!                    │   └─None──> scan complete                              │
//!                    └────────────────────────────────────────────────────────┘
//! ```
//!
//! The shell builds a [`ScanCandidate`] per server from the current
//! description and its own record of the last check, and asks again after
//! every check, so servers discovered during the scan are checked before it
//! completes. A scanner that overlaps several checks' network waits can take
//! [`check_order`] instead: the same priority order for every server known
//! now, to start in that order.
//!
//! Order (server-monitoring spec, "Scanning order"): only servers not yet
//! checked in this scan; minus Unknowns whose network-failed check ended
//! less than cooldownMS (5 s) before the scan started; minus servers checked
//! less than minHeartbeatFrequencyMS (500 ms) ago. Then the RSPrimary first,
//! then a PossiblePrimary, then the other known servers from the
//! least recently checked, then the Unknown and RSGhost servers the same
//! way. Servers never checked count as checked infinitely long ago; ties
//! are broken by a remembered topology's order when the state file gave
//! one (the first scan of a new process: the last primary first), else at
//! random.

use std::time::{Duration, Instant};

use crate::proto::address::ServerAddress;
use crate::proto::options::COOLDOWN;
#[cfg(test)]
use crate::proto::options::MIN_HEARTBEAT_FREQUENCY;
use crate::proto::sdam::{ServerDescription, ServerType};

/// What the scanner knows of one server between checks (besides its
/// description).
#[derive(Clone, Copy, Debug)]
pub struct ScanCandidate<'a> {
    /// The server's current description.
    pub description: &'a ServerDescription,
    /// Whether the last check of this server failed with a network error
    /// (what starts its cooldown).
    pub last_check_failed_with_network_error: bool,
    /// When the last check of this server ended, if it was ever checked.
    pub last_check_end: Option<Instant>,
    /// Its place in the order a state file's remembered topology gives the
    /// first scan (lower first), if it has one: it breaks ties only.
    pub remembered_rank: Option<usize>,
}

impl<'a> ScanCandidate<'a> {
    /// A candidate for a server never checked by this scanner.
    #[cfg(test)]
    pub fn new(description: &'a ServerDescription) -> Self {
        ScanCandidate {
            description,
            last_check_failed_with_network_error: false,
            last_check_end: None,
            remembered_rank: None,
        }
    }

    /// When the server was last checked: the end of the scanner's last
    /// check when it keeps a record, else the description's
    /// `lastUpdateTime`; `None` for "never".
    ///
    /// The record wins because `lastUpdateTime` also moves when an
    /// operation's error marks the server Unknown, and that is not a check:
    /// counting it would make the rescan the error asks for skip the very
    /// server that failed (it looks "checked less than
    /// minHeartbeatFrequencyMS ago") and extend a cooldown. A scanner that
    /// keeps records must therefore record handshakes on new sockets too.
    pub fn last_checked(&self) -> Option<Instant> {
        self.last_check_end.or(self.description.last_update_time)
    }

    /// Whether the server is Unknown because a check failed with a network
    /// error that ended less than cooldownMS before `at`.
    pub fn cooling_down(&self, at: Instant) -> bool {
        self.cooldown_end().is_some_and(|end| at < end)
    }

    /// When this server's cooldown ends, if it is in one (at any time).
    fn cooldown_end(&self) -> Option<Instant> {
        if self.description.server_type != ServerType::Unknown
            || !self.last_check_failed_with_network_error
        {
            return None;
        }
        self.last_checked().map(|checked| checked + COOLDOWN)
    }

    /// Whether this server is still to be checked in the scan that started
    /// at `scan_start`, at time `now`, no sooner than `min_heartbeat` after
    /// its last check.
    fn due(&self, scan_start: Instant, now: Instant, min_heartbeat: Duration) -> bool {
        let Some(checked) = self.last_checked() else {
            return true;
        };
        // The 500 ms minimum is between checks: an application error that
        // made the server Unknown (and so updated it) is not a check.
        let rechecked_too_soon = self
            .last_check_end
            .is_some_and(|end| now.saturating_duration_since(end) < min_heartbeat);
        checked < scan_start && !self.cooling_down(scan_start) && !rechecked_too_soon
    }

    /// The priority class of the spec's order: lower is checked first.
    fn priority(&self) -> u8 {
        priority_class(self.description.server_type)
    }
}

/// The priority class of a server of type `server_type` in the scan order:
/// lower is checked first (the RSPrimary, a PossiblePrimary, other known
/// servers, then Unknown and RSGhost). A scanner that follows an order it
/// computed earlier recomputes it when a server changes class.
pub fn priority_class(server_type: ServerType) -> u8 {
    match server_type {
        ServerType::RsPrimary => 0,
        ServerType::PossiblePrimary => 1,
        ServerType::Unknown | ServerType::RsGhost => 3,
        _ => 2,
    }
}

/// Every server still to be checked in the scan that started at
/// `scan_start`, in the order the spec checks them given what is known at
/// `now`. Ties (same class, same last check time, e.g. several seeds never
/// checked) are shuffled with `rng`.
///
/// A scanner that starts several checks before their results arrive starts
/// them in this order; after results arrive it asks again, since new
/// servers or a new primary change the order.
#[cfg(test)]
pub fn check_order(
    candidates: &[ScanCandidate<'_>],
    scan_start: Instant,
    now: Instant,
    rng: &mut fastrand::Rng,
) -> Vec<ServerAddress> {
    check_order_within(candidates, (scan_start, now), MIN_HEARTBEAT_FREQUENCY, rng)
}

/// [`check_order`] with a server rechecked no sooner than `min_heartbeat`
/// (minHeartbeatFrequencyMS, which only a test runner lowers).
pub fn check_order_within(
    candidates: &[ScanCandidate<'_>],
    (scan_start, now): (Instant, Instant),
    min_heartbeat: Duration,
    rng: &mut fastrand::Rng,
) -> Vec<ServerAddress> {
    let mut due: Vec<&ScanCandidate<'_>> = candidates
        .iter()
        .filter(|c| c.due(scan_start, now, min_heartbeat))
        .collect();
    // Shuffle first, then sort stably: equal keys keep a random order.
    rng.shuffle(&mut due);
    // `None` (never checked) sorts before any instant: infinitely old.
    due.sort_by_key(|c| {
        (
            c.priority(),
            c.last_checked(),
            c.remembered_rank.unwrap_or(usize::MAX),
        )
    });
    due.into_iter()
        .map(|c| c.description.address.clone())
        .collect()
}

/// The next server to check in the scan that started at `scan_start`, or
/// `None` when the scan is complete. See the [module docs](self) for the
/// order.
#[cfg(test)]
pub fn next_to_check(
    candidates: &[ScanCandidate<'_>],
    scan_start: Instant,
    now: Instant,
    rng: &mut fastrand::Rng,
) -> Option<ServerAddress> {
    check_order(candidates, scan_start, now, rng)
        .into_iter()
        .next()
}

/// Whether selection must scan before it selects: the topology is stale
/// (an error marked a server Unknown, or the last selection failed), it was
/// never scanned, or `heartbeat_frequency` has passed since the last scan
/// ended.
pub fn scan_needed(
    last_scan_end: Option<Instant>,
    stale: bool,
    heartbeat_frequency: Duration,
    now: Instant,
) -> bool {
    match last_scan_end {
        None => true,
        Some(end) => stale || now.saturating_duration_since(end) >= heartbeat_frequency,
    }
}

/// When a rescan after a failed selection may start: minHeartbeatFrequencyMS
/// (`min_heartbeat`, 500 ms but in a test runner) after the last scan ended.
pub fn earliest_rescan(last_scan_end: Instant, min_heartbeat: Duration) -> Instant {
    last_scan_end + min_heartbeat
}

/// Whether every server is cooling down at `now`: all are Unknown after a
/// network-failed check that ended less than cooldownMS ago. A scan would
/// check nothing, so the shell fails at once with an error that says so
/// (naming [`cooldown_ends`]) instead of sleeping. False when there are no
/// servers.
pub fn all_cooling_down(candidates: &[ScanCandidate<'_>], now: Instant) -> bool {
    !candidates.is_empty() && candidates.iter().all(|c| c.cooling_down(now))
}

/// The earliest time at which a server now cooling down may be checked
/// again, or `None` if none is cooling down.
pub fn cooldown_ends(candidates: &[ScanCandidate<'_>], now: Instant) -> Option<Instant> {
    candidates
        .iter()
        .filter_map(ScanCandidate::cooldown_end)
        .filter(|end| now < *end)
        .min()
}

#[cfg(test)]
mod tests;
