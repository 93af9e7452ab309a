//! The monitor: the scan order and the single-threaded selection loop as
//! one pure state machine, in quinn-proto's shape. It never reads a clock
//! and never touches a socket: time comes in as `now`, the operation's
//! deadline as an argument of [`Monitor::poll`], check results through
//! [`Monitor::on_check`], and what the shell must do next comes out of
//! `poll` as a [`Next`].
//!
//! ```text
//!  start_selection ─> poll(now, deadline) ─┬─ Check(addrs) ─> shell checks them, on_check(each) ─┐
//!                          ▲               ├─ Wait         ─> shell reports one more on_check ───┤
//!                          │               ├─ SleepUntil(t)─> shell sleeps until t ──────────────┤
//!                          └───────────────┴─────────────────────────────────────────────────────┘
//!                                          ├─ Selected(address)   (selection over)
//!                                          └─ Failed(error)       (selection over)
//! ```
//!
//! The rules it owns (server-selection and server-monitoring specs,
//! single-threaded mode): scan before selecting when the topology is stale,
//! never scanned, or heartbeatFrequencyMS old; after a selection that finds
//! nothing, rescan no sooner than minHeartbeatFrequencyMS (500 ms) after
//! the last scan ended; with serverSelectionTryOnce fail after one scan,
//! otherwise wait until serverSelectionTimeoutMS, cut to the operation's
//! deadline (then the error is the operation's timeout); a server whose
//! check failed with a network error cools down for cooldownMS (5 s); a
//! known server (not a PossiblePrimary) whose check fails with a network
//! error is checked once more at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bson::Document;

use crate::error::{Error, ErrorKind};
use crate::proto::address::{AddressMap, AddressSet, ServerAddress};
use crate::proto::deadline::Deadline;
use crate::proto::scan::{self, ScanCandidate};
use crate::proto::sdam::error_handling::{ApplicationError, ErrorDecision, HandshakePhase};
use crate::proto::sdam::{ServerType, TopologyDescription, TopologyType, TopologyUpdate};
use crate::proto::select::{self, Criteria, SelectionSettings};
use remembered::{SelectionMemory, Tracked};

/// What the shell must do next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Check these servers (all may run at once), reporting each result
    /// with [`Monitor::on_check`], then poll again.
    Check(Vec<ServerAddress>),
    /// Checks handed out earlier are still running: report one with
    /// [`Monitor::on_check`], then poll again; poll again at the latest
    /// at this instant (the scan's end), result or not.
    Wait(Option<Instant>),
    /// Nothing to do before this instant: sleep, then poll again.
    SleepUntil(Instant),
    /// The selection found this server.
    Selected(ServerAddress),
    /// The selection failed with this error.
    Failed(Error),
    /// No selection is under way and no scan is left to do.
    Idle,
}

/// How a check of one server ended.
#[derive(Debug)]
pub(crate) enum CheckOutcome {
    /// The server answered the hello with this reply (`ok: 1`).
    Reply(Document),
    /// The check failed: the server becomes Unknown, and a network error
    /// starts its cooldown.
    Failed(Error),
    /// A new socket's hello was answered (the check succeeded, and its
    /// reply updates the description), then the authentication step on
    /// that socket failed with `error`: SDAM's error in the authentication
    /// step, which marks the server Unknown and clears its socket, with no
    /// cooldown (the server answered). In this single-threaded driver the
    /// scan's new socket is the one the operation would use, so this is
    /// also the operation's failure to get its connection.
    Unauthenticated { reply: Document, error: Error },
    /// The operation's deadline ended the check: the server becomes
    /// Unknown, but the failure says nothing about it, so no cooldown.
    CutShort(Error),
}

/// The settings the monitor's rules read.
#[derive(Clone)]
pub(crate) struct MonitorSettings {
    /// heartbeatFrequencyMS: how old a scan may get before selection scans again.
    pub heartbeat_frequency: Duration,
    /// serverSelectionTimeoutMS.
    pub server_selection_timeout: Duration,
    /// serverSelectionTryOnce.
    pub try_once: bool,
    /// minHeartbeatFrequencyMS: 500 ms, lowered only by a test runner
    /// (unified-test-format.md allows it for tests with fail points).
    pub min_heartbeat_frequency: Duration,
    /// The latency window and the application's selector.
    pub selection: SelectionSettings,
}

/// What the monitor remembers of a server between checks.
#[derive(Clone, Copy, Debug, Default)]
struct CheckRecord {
    last_check_end: Option<Instant>,
    /// The last check failed with a network error: the server cools down.
    network_failed: bool,
}

/// A scan under way.
#[derive(Debug)]
struct Scan {
    start: Instant,
    /// Every server handed out for a check in this scan.
    handed_out: AddressSet,
    /// Handed out and not yet reported.
    in_flight: AddressSet,
    /// Known servers whose first check failed with a network error, to be
    /// checked again at once (each only once per scan).
    retry: Vec<ServerAddress>,
    retried: HashMap<ServerAddress, Error>,
    /// The value of [`Monitor::membership_changes`] when the due servers were
    /// last computed: until it moves, no new server can be due.
    order_key: Option<u64>,
}

/// A selection under way.
struct Selection {
    criteria: Criteria,
    deprioritized: Vec<ServerAddress>,
    operation: OperationName,
    start: Instant,
    /// Whether the selection has decided if it must scan first.
    began: bool,
    /// Whether a scan ended since the selection started (tryOnce's one scan).
    scanned: bool,
    /// Slept until a rescan may start: the next poll starts it.
    rescan_pending: bool,
    /// An authentication or TLS failure of a check: no retry can cure it.
    setup_failure: Option<Error>,
    /// The failed authentication step of a server the selection could
    /// have chosen: the operation's connection failed in its handshake,
    /// which ends the selection with that error (retryable, as the
    /// retryable reads and writes specs ask of a handshake error).
    handshake_failure: Option<Error>,
    /// The "waiting for a suitable server" notice, once per selection:
    /// `Some(remaining)` when due and not yet taken.
    waiting: Option<Option<Duration>>,
    waiting_noted: bool,
}

/// The command a selection is for, named in its errors: kept inline, as
/// every command name the driver sends fits (a selection per operation
/// would otherwise allocate for a name only an error reads).
enum OperationName {
    Inline { bytes: [u8; 30], len: u8 },
    Long(String),
}

impl OperationName {
    fn new(name: &str) -> Self {
        let mut bytes = [0; 30];
        match bytes.get_mut(..name.len()) {
            Some(prefix) => {
                prefix.copy_from_slice(name.as_bytes());
                OperationName::Inline {
                    bytes,
                    len: name.len() as u8,
                }
            }
            None => OperationName::Long(name.to_string()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Whole UTF-8 text copied from a `&str`: always converts.
            OperationName::Inline { bytes, len } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or("?")
            }
            OperationName::Long(name) => name,
        }
    }
}

/// The pure monitor: the topology description, what is known of each
/// server's checks, and the scan and selection under way.
pub(crate) struct Monitor {
    description: Tracked,
    settings: MonitorSettings,
    records: AddressMap<CheckRecord>,
    last_scan_end: Option<Instant>,
    scan: Option<Scan>,
    selection: Option<Selection>,
    rng: fastrand::Rng,
    /// The last selection with one server to choose from.
    selections: SelectionMemory,
    /// Counts the updates that added servers: until it moves, a scan has
    /// handed out every server that can be due.
    membership_changes: u64,
    /// Changes made inside [`Monitor::poll`], for the shell to publish.
    updates: Vec<TopologyUpdate>,
    /// How often a scan computed its order (the cost that grew as n² when
    /// it was computed per check).
    order_computations: u64,
    /// The order a state file's remembered topology gives the first scan
    /// (its ties only); emptied when that scan ends.
    remembered_order: Vec<ServerAddress>,
}

/// Whether `error` is a failure that opening another socket would repeat:
/// the credential was refused, or a TLS certificate or host name check failed.
pub(crate) fn is_setup_failure(error: &Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::Authentication { .. } | ErrorKind::Tls { .. }
    )
}

impl Monitor {
    /// A monitor over `description`, with `rng` for the scan order's and
    /// selection's random choices.
    pub(crate) fn new(
        description: TopologyDescription,
        settings: MonitorSettings,
        rng: fastrand::Rng,
    ) -> Monitor {
        Monitor {
            description: Tracked::new(description),
            settings,
            records: AddressMap::default(),
            last_scan_end: None,
            scan: None,
            selection: None,
            rng,
            selections: SelectionMemory::default(),
            membership_changes: 0,
            updates: Vec::new(),
            order_computations: 0,
            remembered_order: Vec::new(),
        }
    }

    /// A monitor whose last scan ended at `now` and found `description`,
    /// each server checked at its `last_update_time` (or `now`): the spec
    /// runners start from the description a test gives.
    #[cfg(test)]
    pub(crate) fn scanned(
        description: TopologyDescription,
        settings: MonitorSettings,
        rng: fastrand::Rng,
        now: Instant,
    ) -> Monitor {
        let mut monitor = Monitor::new(description, settings, rng);
        for server in monitor.description.servers.values() {
            let checked_at = server.last_update_time.unwrap_or(now);
            monitor
                .records
                .insert(server.address.clone(), checked(checked_at, false));
        }
        monitor.description.get_mut().stale = false;
        monitor.last_scan_end = Some(now);
        monitor
    }

    /// When the last scan ended (or was cut short), if one did.
    pub(crate) fn last_scan_end(&self) -> Option<Instant> {
        self.last_scan_end
    }

    /// The current description of the deployment.
    pub(crate) fn description(&self) -> &TopologyDescription {
        &self.description
    }

    /// The random source, shared with the shell (SRV host choice).
    pub(crate) fn rng(&mut self) -> &mut fastrand::Rng {
        &mut self.rng
    }

    /// Whether updates carry the description change events (see
    /// [`crate::sdam::TopologySettings::without_change_events`]).
    pub(crate) fn set_change_events(&mut self, wanted: bool) {
        if self.description.settings.without_change_events == wanted {
            self.description.get_mut().settings.without_change_events = !wanted;
        }
    }

    /// Breaks the first scan's ties in `order` (a state file's remembered
    /// topology, [`crate::proto::state_file::RememberedTopology::first_scan_order`]):
    /// servers of the same class never checked start in that order. It
    /// adds no server, selects nothing and outlives no scan: only a
    /// server's own check in this process says what it is.
    pub(crate) fn prefer_in_first_scan(&mut self, order: Vec<ServerAddress>) {
        if self.last_scan_end.is_none() {
            self.remembered_order = order;
        }
    }

    /// Replaces the description (the SRV seed list was looked up): what
    /// was known of the old servers goes.
    pub(crate) fn replace_description(&mut self, description: TopologyDescription) {
        *self.description.get_mut() = description;
        self.records.clear();
        self.scan = None;
        self.membership_changes += 1;
    }

    /// The next selection must scan first (a fork dropped every socket).
    pub(crate) fn mark_stale(&mut self) {
        self.description.get_mut().stale = true;
    }

    /// Starts selecting a server for `criteria` (the command `operation`)
    /// at `now`; drive it with [`Monitor::poll`]. A scan left unfinished by
    /// an earlier selection is dropped: its checks are no longer running.
    pub(crate) fn start_selection(
        &mut self,
        criteria: Criteria,
        deprioritized: &[ServerAddress],
        operation: &str,
        now: Instant,
    ) {
        self.drop_unfinished_scan(now);
        self.selection = Some(Selection {
            criteria,
            deprioritized: deprioritized.to_vec(),
            operation: OperationName::new(operation),
            start: now,
            began: false,
            scanned: false,
            rescan_pending: false,
            setup_failure: None,
            handshake_failure: None,
            waiting: None,
            waiting_noted: false,
        });
    }

    /// The "Waiting for suitable server to become available" notice, once
    /// per selection: the time left (`None` with tryOnce) when it is due.
    pub(crate) fn take_waiting_notice(&mut self) -> Option<Option<Duration>> {
        self.selection.as_mut().and_then(|s| s.waiting.take())
    }

    /// What the shell must do next at `now`, for an operation that must
    /// end by `deadline`.
    pub(crate) fn poll(&mut self, now: Instant, deadline: Deadline) -> Next {
        loop {
            if let Some(next) = self.poll_scan(now, deadline) {
                return next;
            }
            if self.selection.is_none() {
                return Next::Idle;
            }
            match self.poll_selection(now, deadline) {
                Some(next) => return next,
                // A scan just started: hand out its checks.
                None => continue,
            }
        }
    }

    /// What changed inside [`Monitor::poll`] (a failure held for its
    /// immediate retry, applied when the scan ran out of time): the shell
    /// publishes it as it does [`Monitor::on_check`]'s.
    pub(crate) fn take_updates(&mut self) -> Vec<TopologyUpdate> {
        std::mem::take(&mut self.updates)
    }

    /// The result of a check of `address` that took `rtt`, at `now`. Also
    /// for the handshake of an operation's new socket, which counts as a
    /// check. Returns what changed, for the shell to publish and act on
    /// (sockets of removed servers close).
    pub(crate) fn on_check(
        &mut self,
        address: &ServerAddress,
        outcome: CheckOutcome,
        rtt: Duration,
        now: Instant,
    ) -> TopologyUpdate {
        if let Some(scan) = &mut self.scan {
            scan.in_flight.remove(address);
        }
        let (error, cut_short) = match outcome {
            CheckOutcome::Reply(reply) => {
                self.records.insert(address.clone(), checked(now, false));
                let update = self
                    .description
                    .get_mut()
                    .check_succeeded(address, &reply, rtt, now);
                self.note_order_changes(&update);
                return update;
            }
            CheckOutcome::Failed(error) => (error, false),
            CheckOutcome::CutShort(error) => (error, true),
            CheckOutcome::Unauthenticated { reply, error } => {
                return self.authentication_step_failed(address, reply, &error, rtt, now);
            }
        };
        if !cut_short && error.is_network_error() && self.retry_at_once(address, &error) {
            return TopologyUpdate::default();
        }
        self.check_failed(address, &error, error.is_network_error() && !cut_short, now)
    }

    /// An idle socket to `address` failed its ping at `now`: the server
    /// becomes Unknown. Not a scan check (no cooldown), nor does it make the
    /// topology stale: the spec selects again from what is known, and
    /// rescans only if nothing suitable is left.
    pub(crate) fn on_idle_check_failed(
        &mut self,
        address: &ServerAddress,
        error: &Error,
        now: Instant,
    ) -> TopologyUpdate {
        let update = self
            .description
            .get_mut()
            .check_failed(address, error.clone(), now);
        self.note_order_changes(&update);
        update
    }

    /// An operation's error on a server: SDAM error handling decides.
    pub(crate) fn on_application_error(
        &mut self,
        error: &ApplicationError,
        now: Instant,
    ) -> (ErrorDecision, TopologyUpdate) {
        let (decision, update) = self
            .description
            .get_mut()
            .handle_application_error(error, now);
        self.note_order_changes(&update);
        (decision, update)
    }

    /// The SRV polling spec's new mongos list; the next selection scans.
    pub(crate) fn set_srv_hosts(&mut self, hosts: &[ServerAddress]) -> TopologyUpdate {
        let update = self.description.get_mut().set_srv_hosts(hosts);
        self.description.get_mut().stale = true;
        self.note_order_changes(&update);
        update
    }

    /// The client is closing: the description's closing events.
    pub(crate) fn close(&mut self) -> TopologyUpdate {
        self.description.get_mut().close()
    }

    /// [`CheckOutcome::Unauthenticated`]: the hello's reply is applied as
    /// a check's, then the authentication step's error goes through SDAM
    /// error handling (server Unknown, socket generation bumped). A
    /// selection under way that could have chosen the server (in its
    /// latency window once the reply was applied) remembers the error, as
    /// a multi-threaded driver's operation would meet it checking out a
    /// connection; a refused credential ends any selection, as before.
    #[cold]
    fn authentication_step_failed(
        &mut self,
        address: &ServerAddress,
        reply: Document,
        error: &Error,
        rtt: Duration,
        now: Instant,
    ) -> TopologyUpdate {
        let mut update = self.on_check(address, CheckOutcome::Reply(reply), rtt, now);
        let could_select = self.selection.as_ref().is_some_and(|s| {
            select::window_addresses(
                &self.description,
                &s.criteria,
                &self.settings.selection,
                &s.deprioritized,
            )
            .is_ok_and(|window| window.contains(address))
        });
        let generation = self.description.pool_generation(address).unwrap_or(0);
        let max_wire_version = self
            .description
            .servers
            .get(address)
            .map_or(0, |s| s.max_wire_version);
        let handled = ApplicationError::from_error(
            address.clone(),
            error,
            HandshakePhase::Authenticating,
            generation,
            max_wire_version,
        );
        if let Some(application_error) = handled {
            let (_, more) = self.on_application_error(&application_error, now);
            update.events.extend(more.events);
            update.added.extend(more.added);
            update.removed.extend(more.removed);
        }
        if let Some(selection) = &mut self.selection {
            if is_setup_failure(error) {
                selection.setup_failure = Some(error.clone());
            } else if could_select {
                selection.handshake_failure = Some(error.clone());
            }
        }
        update
    }

    fn retry_at_once(&mut self, address: &ServerAddress, error: &Error) -> bool {
        // A PossiblePrimary is not known (only another member named it): a
        // blackholed old primary that secondaries still name would
        // otherwise cost two connectTimeoutMS per scan.
        let known = self.description.servers.get(address).is_some_and(|s| {
            !matches!(
                s.server_type,
                ServerType::Unknown | ServerType::PossiblePrimary
            )
        });
        let Some(scan) = &mut self.scan else {
            return false;
        };
        if !known || !scan.handed_out.contains(address) || scan.retried.contains_key(address) {
            return false;
        }
        scan.retried.insert(address.clone(), error.clone());
        scan.retry.push(address.clone());
        true
    }

    fn check_failed(
        &mut self,
        address: &ServerAddress,
        error: &Error,
        cools_down: bool,
        now: Instant,
    ) -> TopologyUpdate {
        if is_setup_failure(error) {
            if let Some(selection) = &mut self.selection {
                selection.setup_failure = Some(error.clone());
            }
        }
        self.records
            .insert(address.clone(), checked(now, cools_down));
        let update = self
            .description
            .get_mut()
            .check_failed(address, error.clone(), now);
        self.note_order_changes(&update);
        update
    }

    fn note_order_changes(&mut self, update: &TopologyUpdate) {
        for address in &update.removed {
            self.records.remove(address);
        }
        // Every server due is handed out at once, so only a new server can
        // make another one due during the scan.
        if !update.added.is_empty() {
            self.membership_changes += 1;
        }
    }

    fn begin_scan(&mut self, now: Instant) {
        self.scan = Some(Scan {
            start: now,
            handed_out: AddressSet::default(),
            in_flight: AddressSet::default(),
            retry: Vec::new(),
            retried: HashMap::new(),
            order_key: None,
        });
    }

    /// A scan cut short: the servers not checked are as stale as before,
    /// so the next selection scans again.
    fn drop_unfinished_scan(&mut self, now: Instant) {
        // Looked at before taking: every selection passes here, and taking
        // a `None` still copies the whole 232-byte `Option<Scan>`.
        if self.scan.is_some() {
            self.scan = None;
            self.remembered_order = Vec::new();
            self.last_scan_end = Some(now);
            self.description.get_mut().stale = true;
            // tryOnce's one scan is over, even cut short.
            if let Some(selection) = &mut self.selection {
                selection.scanned = true;
            }
        }
    }

    /// When the scan of the selection under way must stop: its
    /// serverSelectionTimeoutMS and the operation's deadline.
    fn scan_limit(&self, deadline: Deadline) -> Option<Instant> {
        let selection_end = self
            .selection
            .as_ref()
            .map(|s| s.start + self.settings.server_selection_timeout);
        match (selection_end, deadline.instant()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The scan's part of [`Monitor::poll`]: checks to hand out, or `None`
    /// once no scan is under way (it just ended, or there was none).
    fn poll_scan(&mut self, now: Instant, deadline: Deadline) -> Option<Next> {
        self.scan.as_ref()?;
        let limit = self.scan_limit(deadline);
        if limit.is_some_and(|limit| now >= limit) {
            // Checks held for their immediate retry failed all the same.
            let held: Vec<(ServerAddress, Error)> = self
                .scan
                .as_mut()
                .map(|s| s.retried.drain().collect())
                .unwrap_or_default();
            for (address, error) in held {
                let pending = self
                    .scan
                    .as_ref()
                    .is_some_and(|s| s.retry.contains(&address) || s.in_flight.contains(&address));
                if pending {
                    let update = self.check_failed(&address, &error, true, now);
                    self.updates.push(update);
                }
            }
            self.drop_unfinished_scan(now);
            return None;
        }
        let due = self.newly_due(now);
        let scan = self.scan.as_mut()?;
        let mut checks: Vec<ServerAddress> = std::mem::take(&mut scan.retry);
        checks.extend(due);
        if !checks.is_empty() {
            scan.in_flight.extend(checks.iter().cloned());
            return Some(Next::Check(checks));
        }
        if !scan.in_flight.is_empty() {
            return Some(Next::Wait(limit));
        }
        self.scan = None;
        self.remembered_order = Vec::new();
        self.last_scan_end = Some(now);
        self.description.get_mut().stale = false;
        if let Some(selection) = &mut self.selection {
            selection.scanned = true;
        }
        None
    }

    /// The servers due in the scan under way that were not handed out yet,
    /// in the spec's order. Recomputed only when a check changed what the
    /// order depends on: doing it after every check made a scan of n
    /// members cost n² log n.
    fn newly_due(&mut self, now: Instant) -> Vec<ServerAddress> {
        let Some(scan) = &self.scan else {
            return Vec::new();
        };
        if scan.order_key == Some(self.membership_changes) {
            return Vec::new();
        }
        let mut candidates = candidates(&self.description, &self.records);
        if !self.remembered_order.is_empty() {
            for candidate in &mut candidates {
                candidate.remembered_rank = self
                    .remembered_order
                    .iter()
                    .position(|a| a == &candidate.description.address);
            }
        }
        let order = scan::check_order_within(
            &candidates,
            (scan.start, now),
            self.settings.min_heartbeat_frequency,
            &mut self.rng,
        );
        let scan = self.scan.as_mut().expect("checked above");
        scan.order_key = Some(self.membership_changes);
        self.order_computations += 1;
        let due: Vec<ServerAddress> = order
            .into_iter()
            .filter(|a| !scan.handed_out.contains(a))
            .collect();
        scan.handed_out.extend(due.iter().cloned());
        due
    }

    /// The selection loop's part of [`Monitor::poll`]; `None` when it just
    /// started a scan.
    fn poll_selection(&mut self, now: Instant, deadline: Deadline) -> Option<Next> {
        let load_balanced = self.description.topology_type == TopologyType::LoadBalanced;
        let selection = self.selection.as_mut()?;
        if selection.rescan_pending {
            return self.rescan(now, deadline);
        }
        if !selection.began {
            selection.began = true;
            let needed = scan::scan_needed(
                self.last_scan_end,
                self.description.stale,
                self.settings.heartbeat_frequency,
                now,
            );
            if needed && !load_balanced {
                return self.rescan(now, deadline);
            }
        }
        let selected = self.selections.select(
            &self.description,
            &selection.criteria,
            &self.settings.selection,
            &selection.deprioritized,
            &mut self.rng,
        );
        match selected {
            Ok(Some(address)) => {
                self.selection = None;
                Some(Next::Selected(address))
            }
            Err(error) => {
                // An incompatible server may be upgraded or replaced: the
                // next selection must look again.
                self.description.get_mut().stale = true;
                self.selection = None;
                Some(Next::Failed(error))
            }
            Ok(None) if load_balanced => Some(self.fail(now, deadline, None)),
            Ok(None) => self.nothing_suitable(now, deadline),
        }
    }

    /// Nothing suitable is known: fail, sleep until a rescan may start, or
    /// start one.
    fn nothing_suitable(&mut self, now: Instant, deadline: Deadline) -> Option<Next> {
        self.description.get_mut().stale = true;
        let try_once = self.settings.try_once;
        let max_time = self.scan_limit(deadline).expect("a selection is under way");
        let selection = self.selection.as_mut().expect("a selection is under way");
        let failure = selection.setup_failure.take();
        if let Some(failure) = failure.or_else(|| selection.handshake_failure.take()) {
            self.selection = None;
            return Some(Next::Failed(failure));
        }
        if (try_once && selection.scanned) || (!try_once && now >= max_time) {
            return Some(self.fail(now, deadline, None));
        }
        if !selection.waiting_noted {
            selection.waiting_noted = true;
            selection.waiting = Some((!try_once).then(|| max_time.saturating_duration_since(now)));
        }
        self.rescan(now, deadline)
    }

    /// Starts a scan, or sleeps until one may start (minHeartbeatFrequencyMS
    /// after the last, or the first cooldown's end when every server cools
    /// down), or fails when that is past the selection's end, or with
    /// tryOnce when every server cools down (a scan would check nothing).
    fn rescan(&mut self, now: Instant, deadline: Deadline) -> Option<Next> {
        let try_once = self.settings.try_once;
        let max_time = self.scan_limit(deadline).expect("a selection is under way");
        let (cooling, cooldown_end) = {
            let candidates = candidates(&self.description, &self.records);
            (
                scan::all_cooling_down(&candidates, now),
                scan::cooldown_ends(&candidates, now),
            )
        };
        let mut target = self
            .last_scan_end
            .map(|end| scan::earliest_rescan(end, self.settings.min_heartbeat_frequency))
            .unwrap_or(now);
        let cooling_reason = cooling.then(|| cooling_reason(cooldown_end, now));
        if cooling {
            if try_once {
                return Some(self.fail(now, deadline, cooling_reason));
            }
            if let Some(end) = cooldown_end {
                target = target.max(end);
            }
        }
        if !try_once && target > max_time {
            // Without the reason, failing long before
            // serverSelectionTimeoutMS would look like a bug to the user.
            return Some(self.fail(now, deadline, cooling_reason));
        }
        let selection = self.selection.as_mut().expect("a selection is under way");
        selection.rescan_pending = target > now;
        if target > now {
            return Some(Next::SleepUntil(target));
        }
        self.begin_scan(now);
        None
    }

    /// Ends the selection with "no suitable server" (plus `reason`), as the
    /// operation's timeout when its deadline is what ended the wait.
    fn fail(&mut self, now: Instant, deadline: Deadline, reason: Option<String>) -> Next {
        let Some(selection) = self.selection.take() else {
            return Next::Idle;
        };
        // The servers' last failures lead: "timed out" or "no suitable
        // server" is what happened, a refused or reset connection is why.
        let cause = select::unreachable_servers(&self.description);
        let mut detail = select::describe_selection_failure(
            &self.description,
            &selection.criteria,
            cause.is_none(),
        );
        if let Some(reason) = reason {
            detail = format!("{detail}; {reason}");
        }
        let waited = now.saturating_duration_since(selection.start).as_millis();
        let selection_end = selection.start + self.settings.server_selection_timeout;
        let deadline_binds = deadline.instant().is_some_and(|d| d <= selection_end);
        let max_time = deadline
            .instant()
            .map_or(selection_end, |d| d.min(selection_end));
        let expired = now >= max_time;
        let operation = selection.operation.as_str();
        let (timeout, ended) = if !deadline_binds || (self.settings.try_once && !expired) {
            // serverSelectionTimeoutMS ended it, or tryOnce gave up after
            // its one scan: not timeoutMS.
            (
                false,
                format!("server selection for {operation} gave up after {waited} ms"),
            )
        } else if !expired {
            // The next scan may not start before the deadline
            // (minHeartbeatFrequencyMS), so waiting on could not help.
            let ended = format!(
                "timeoutMS would expire before the next scan could start while selecting a \
                 server for {operation}"
            );
            (true, ended)
        } else {
            let ended = format!("timeoutMS expired while selecting a server for {operation}");
            (true, ended)
        };
        let message = match (cause, timeout) {
            (Some(cause), _) => format!("{cause} ({ended}; {detail})"),
            (None, false) => detail,
            (None, true) => format!("{ended}: server selection failed: {detail}"),
        };
        Next::Failed(Error::new(if timeout {
            ErrorKind::Timeout { message }
        } else {
            ErrorKind::ServerSelection { message }
        }))
    }

    /// Whether a scan would now check nothing because every server cools
    /// down (for tests and diagnostics).
    #[cfg(test)]
    fn scanning(&self) -> bool {
        self.scan.is_some()
    }
}

fn checked(now: Instant, network_failed: bool) -> CheckRecord {
    CheckRecord {
        last_check_end: Some(now),
        network_failed,
    }
}

fn cooling_reason(cooldown_end: Option<Instant>, now: Instant) -> String {
    let wait = cooldown_end
        .map(|end| end.saturating_duration_since(now))
        .unwrap_or_default();
    format!(
        "every server failed its last check with a network error and is in its \
         {} ms cooldown (the next check is possible in {} ms)",
        crate::proto::options::COOLDOWN.as_millis(),
        wait.as_millis()
    )
}

fn candidates<'a>(
    description: &'a TopologyDescription,
    records: &AddressMap<CheckRecord>,
) -> Vec<ScanCandidate<'a>> {
    description
        .servers
        .values()
        .map(|server| {
            let record = records.get(&server.address).copied().unwrap_or_default();
            ScanCandidate {
                description: server,
                last_check_failed_with_network_error: record.network_failed,
                last_check_end: record.last_check_end,
                remembered_rank: None,
            }
        })
        .collect()
}

/// The monitor's result as the selection's: `Ok` for a server, the error
/// otherwise (for callers that only select).
#[cfg(test)]
fn as_result(next: Next) -> crate::error::Result<ServerAddress> {
    match next {
        Next::Selected(address) => Ok(address),
        Next::Failed(error) => Err(error),
        other => Err(Error::client(format!("unexpected {other:?}"))),
    }
}

mod remembered;
#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod tests;
