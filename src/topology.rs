//! The blocking shell around the pure SDAM and selection rules.
//!
//! A [`Topology`] owns the [`TopologyDescription`], one socket slot per
//! server and the scan bookkeeping. Everything it decides comes from
//! [`crate::sdam`], [`crate::scan`] and [`crate::select`]; what it does
//! itself is the I/O those rules ask for: open sockets, send hellos, sleep,
//! and publish the events the rules return.
//!
//! ```text
//!  run_command ──> select_server ──(stale or heartbeat due)──> scan ──> check ──> sdam apply
//!                      │  nothing suitable: mark stale, rescan once (tryOnce) or until the timeout
//!                      └─> connection_for (ping if idle > socketCheckIntervalMS) ──> send ──> classify
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::Document;

use crate::address::ServerAddress;
use crate::conn::{check_reply, Connection};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::event::{log_command_event, log_sdam_event, CommandEvent, EventHandler, SdamEvent};
use crate::handshake::{self, HandshakeSettings};
use crate::options::ClientOptions;
use crate::scan::{self, ScanCandidate};
use crate::sdam::error_handling::{ApplicationError, HandshakePhase};
use crate::sdam::{
    RoundTripTime, ServerDescription, ServerType, TopologyDescription, TopologySettings,
    TopologyType, TopologyUpdate,
};
use crate::select::{
    self, SelectionCriteria, SelectionLog, SelectionLogContext, SelectionSettings, ServerSelector,
};
use crate::wire::{MsgFlags, OpMsg};

/// How long a fire-and-forget write at close may block on a full send
/// buffer before it is abandoned.
const FORGET_WRITE_TIMEOUT: Duration = Duration::from_millis(100);

/// Whether `error` is a failure that opening another socket would repeat:
/// the credential was refused, or a TLS certificate or host name check failed.
fn is_setup_failure(error: &Error) -> bool {
    matches!(
        error.kind(),
        crate::ErrorKind::Authentication { .. } | crate::ErrorKind::Tls { .. }
    )
}

/// The load-balancer spec's error when a handshake reply has no `serviceId`.
const NO_SERVICE_ID: &str = "Driver attempted to initialize in load balancing mode, \
                             but the server does not support this mode.";

/// What the scanner remembers of a server between checks.
#[derive(Clone, Copy, Debug, Default)]
struct CheckRecord {
    last_check_end: Option<Instant>,
    /// The last check failed with a network error: the server cools down.
    network_failed: bool,
}

/// The deployment as this client sees it, and its sockets.
pub struct Topology {
    options: ClientOptions,
    description: TopologyDescription,
    connections: HashMap<ServerAddress, Connection>,
    checks: HashMap<ServerAddress, CheckRecord>,
    last_scan_end: Option<Instant>,
    selection_settings: SelectionSettings,
    rng: fastrand::Rng,
    handler: Option<Arc<dyn EventHandler>>,
    metadata: Document,
    /// The process the sockets belong to; a fork changes it.
    pid: u32,
    /// The pin value of each server's current socket (see
    /// [`Topology::socket_generation`]): unique per socket, never 0.
    socket_serials: HashMap<ServerAddress, u32>,
    last_socket_serial: u32,
    /// Load balanced: the generation of each service behind the load
    /// balancer (the spec's per-`serviceId` pool generation).
    service_generations: HashMap<ObjectId, u32>,
    /// Load balanced: what the current socket's handshake said about the
    /// service behind it (wire version, limits), which the load balancer's
    /// own description never holds.
    load_balanced_service: Option<ServerDescription>,
    /// The deadline of the operation selecting a server, while it does:
    /// its scans and new sockets must not outlast it (CSOT).
    operation_deadline: Deadline,
    /// `mongodb+srv`: whether the seed list has been looked up yet (it
    /// is, on the first operation), and when the SRV record may next be
    /// polled for new mongos.
    srv_resolved: bool,
    next_srv_rescan: Option<Instant>,
    /// How host names are resolved, read from the system on first use.
    resolver: Option<crate::dns::ResolverConfig>,
    /// During a scan: the member addresses looked up together at its
    /// start, and the names that look-up failed for (with why).
    scan_known_hosts: Vec<(String, Vec<std::net::IpAddr>)>,
    scan_dns_failure: Option<(Vec<String>, Error)>,
    /// Counts the updates that changed what the scan order depends on (a
    /// server added or removed, or moved to another priority class), so a
    /// scan recomputes its order only then.
    scan_order_changes: u64,
    /// Whether the current selection logged "Waiting for suitable server"
    /// (the spec: once per selection).
    waiting_logged: bool,
    /// The client's one TLS configuration (`tls=true`), shared by its
    /// sockets so that TLS sessions resume.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The client's credential and cached SCRAM keys.
    authenticator: Option<crate::auth::Authenticator>,
    /// An authentication or TLS failure of a check during the current
    /// selection: retrying cannot cure it, so selection reports it at once
    /// instead of waiting out serverSelectionTimeoutMS.
    setup_failure: Option<Error>,
}

impl Topology {
    /// A topology for `options`. Publishes the opening events; does no I/O.
    pub(crate) fn new(
        options: ClientOptions,
        handler: Option<Arc<dyn EventHandler>>,
        server_selector: Option<ServerSelector>,
    ) -> Result<Topology> {
        let srv_pending = options.hosts().is_empty() && options.srv_host().is_some();
        if options.hosts().is_empty() && !srv_pending {
            return Err(Error::invalid_argument(
                "no hosts to connect to (a mongodb+srv URI must be resolved first)",
            ));
        }
        let description = TopologyDescription::new(TopologySettings::from_options(&options));
        let mut selection_settings =
            SelectionSettings::new(options.local_threshold(), options.heartbeat_frequency());
        if let Some(selector) = server_selector {
            selection_settings = selection_settings.with_server_selector(selector);
        }
        let metadata =
            handshake::client_metadata(options.app_name(), &|name| std::env::var(name).ok());
        let tls = if options.tls() {
            Some(crate::tls::client_config(options.tls_options())?)
        } else {
            None
        };
        let authenticator = options
            .credential()
            .map(|c| crate::auth::Authenticator::new(c, options.default_database()))
            .transpose()?;
        if let Some(authenticator) = &authenticator {
            let client_certificate = options
                .tls_options()
                .is_some_and(|t| t.certificate_key_file.is_some());
            authenticator.check_transport(tls.is_some(), client_certificate)?;
        }
        let topology = Topology {
            tls,
            authenticator,
            setup_failure: None,
            description,
            connections: HashMap::new(),
            checks: HashMap::new(),
            last_scan_end: None,
            selection_settings,
            rng: fastrand::Rng::new(),
            handler,
            metadata,
            pid: std::process::id(),
            socket_serials: HashMap::new(),
            last_socket_serial: 0,
            service_generations: HashMap::new(),
            load_balanced_service: None,
            operation_deadline: Deadline::NONE,
            srv_resolved: !srv_pending,
            next_srv_rescan: None,
            resolver: None,
            scan_known_hosts: Vec::new(),
            scan_dns_failure: None,
            scan_order_changes: 0,
            waiting_logged: false,
            options,
        };
        // A mongodb+srv topology opens once its seeds are known.
        if !srv_pending {
            for event in topology.description.opening_events() {
                topology.publish_event(&event);
            }
        }
        Ok(topology)
    }

    /// The options the client was built with.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The current description of the deployment.
    pub fn description(&self) -> &TopologyDescription {
        &self.description
    }

    /// Closes every socket at once. The description stays; the next
    /// operation reconnects.
    pub fn close(&mut self) {
        self.connections.clear();
    }

    /// Sends each command to `db` as a fire-and-forget OP_MSG (`moreToCome`)
    /// on a socket that is already open, the primary's if it has one, and
    /// ignores every error: used for `endSessions` when the client closes,
    /// which must neither connect nor wait for the network. A forked child
    /// sends nothing: the sessions belong to its parent.
    pub(crate) fn send_and_forget(&mut self, db: &str, commands: Vec<Document>) {
        if commands.is_empty() || std::process::id() != self.pid {
            return;
        }
        let primary_first = |address: &&ServerAddress| {
            let server_type = self
                .description
                .servers
                .get(*address)
                .map(|s| s.server_type);
            server_type != Some(ServerType::RsPrimary)
        };
        let mut candidates: Vec<&ServerAddress> = self
            .connections
            .keys()
            .filter(|address| {
                self.description
                    .servers
                    .get(*address)
                    .is_some_and(|s| s.server_type.is_data_bearing())
            })
            .collect();
        candidates.sort_by_key(primary_first);
        let Some(address) = candidates.first().map(|a| (*a).clone()) else {
            return;
        };
        let Some(connection) = self.connections.get_mut(&address) else {
            return;
        };
        if connection.is_broken() || connection.peer_closed() {
            return;
        }
        for mut body in commands {
            body.insert("$db", db);
            if let Some(api) = self.options.server_api() {
                handshake::append_server_api(&mut body, Some(api));
            }
            let msg = OpMsg {
                flags: MsgFlags::MORE_TO_COME,
                body,
                sequences: Vec::new(),
            };
            // A small message fits the socket's send buffer, so this write
            // does not wait on the peer; the timeout only bounds a full one.
            let sent = connection.send_msg(
                crate::conn::next_request_id(),
                &msg,
                Some(FORGET_WRITE_TIMEOUT),
            );
            if sent.is_err() {
                return;
            }
        }
    }

    /// Selects a server for `criteria` and makes sure it has a usable
    /// socket, per the spec's "checking an idle socket": a socket idle for
    /// socketCheckIntervalMS is pinged first; if that fails the server is
    /// marked Unknown and selection runs once more.
    pub(crate) fn select_for(
        &mut self,
        criteria: &SelectionCriteria,
        operation: &str,
        deprioritized: &[ServerAddress],
        deadline: Deadline,
    ) -> Result<ServerAddress> {
        self.operation_deadline = deadline;
        self.waiting_logged = false;
        let selected = self
            .prepare_srv_seeds()
            .and_then(|()| self.select_and_connect(criteria, operation, deprioritized, deadline));
        self.operation_deadline = Deadline::NONE;
        selected
    }

    /// `mongodb+srv`: looks the seed list up before the first operation,
    /// and polls the SRV record for mongos changes when the rescan
    /// interval has passed (the polling spec's single-threaded rule: before
    /// a scan, never in the background).
    fn prepare_srv_seeds(&mut self) -> Result<()> {
        let Some(host) = self.options.srv_host().map(str::to_string) else {
            return Ok(());
        };
        let now = Instant::now();
        if !self.srv_resolved {
            return self.resolve_srv_seeds(&host);
        }
        let due = self.next_srv_rescan.is_some_and(|at| now >= at);
        if due && self.description.polls_srv() {
            self.poll_srv(&host);
        }
        Ok(())
    }

    /// The resolver configuration, read from the system once.
    fn resolver(&mut self) -> &crate::dns::ResolverConfig {
        let options = &self.options;
        self.resolver
            .get_or_insert_with(|| options.resolver_config())
    }

    /// When a DNS look-up must end: connectTimeoutMS, cut to the
    /// operation's deadline.
    fn dns_deadline(&self) -> Option<Instant> {
        self.check_timeout().map(|t| Instant::now() + t)
    }

    fn srv_lookup(&mut self, host: &str) -> Result<crate::dns::SrvLookup> {
        let name = crate::srv::srv_query_name(self.options.srv_service_name(), host);
        let deadline = self.dns_deadline();
        let resolver = self.resolver().clone();
        crate::dns::lookup_srv_and_txt(&resolver, &name, host, deadline)
    }

    /// The initial seed-list discovery: SRV and TXT together, the targets
    /// checked, the TXT options laid under the URI's, srvMaxHosts applied,
    /// and the options validated again (TXT may add replicaSet or
    /// loadBalanced). Only then does the topology open.
    fn resolve_srv_seeds(&mut self, host: &str) -> Result<()> {
        let lookup = self.srv_lookup(host)?;
        let seeds = crate::srv::seeds_from_targets(host, &lookup.targets)?;
        let txt = crate::srv::parse_txt_options(host, &lookup.txt_records)?;
        let mut options = self.options.clone();
        crate::srv::apply_txt_options(&mut options, txt);
        options.hosts = crate::srv::choose_seeds(seeds, options.srv_max_hosts(), &mut self.rng);
        options.validate()?;
        self.description = TopologyDescription::new(TopologySettings::from_options(&options));
        self.options = options;
        self.srv_resolved = true;
        self.next_srv_rescan = Some(
            Instant::now()
                + crate::srv::rescan_interval(
                    Some(&lookup.targets),
                    self.options.heartbeat_frequency(),
                ),
        );
        for event in self.description.opening_events() {
            self.publish_event(&event);
        }
        Ok(())
    }

    /// One SRV rescan. Failures change nothing and are only logged; the
    /// next try then comes after heartbeatFrequencyMS.
    fn poll_srv(&mut self, host: &str) {
        let heartbeat = self.options.heartbeat_frequency();
        let lookup = match self.srv_lookup(host) {
            Ok(lookup) => lookup,
            Err(error) => {
                log::warn!(target: "mongo_inline::srv", "SRV polling of {host}: {error}");
                self.next_srv_rescan = Some(Instant::now() + heartbeat);
                return;
            }
        };
        let current: Vec<ServerAddress> = self.description.servers.keys().cloned().collect();
        let max_hosts = self.options.srv_max_hosts();
        let next =
            crate::srv::poll_update(host, &current, &lookup.targets, max_hosts, &mut self.rng);
        let verified = lookup
            .targets
            .iter()
            .any(|t| crate::srv::check_target(host, &t.host).is_ok());
        let interval =
            crate::srv::rescan_interval(verified.then_some(&lookup.targets[..]), heartbeat);
        self.next_srv_rescan = Some(Instant::now() + interval);
        if let Some(hosts) = next {
            let update = self.description.set_srv_hosts(&hosts);
            self.description.stale = true;
            self.publish(update);
        }
    }

    fn select_and_connect(
        &mut self,
        criteria: &SelectionCriteria,
        operation: &str,
        deprioritized: &[ServerAddress],
        deadline: Deadline,
    ) -> Result<ServerAddress> {
        self.forget_inherited_sockets();
        self.setup_failure = None;
        let address = self.select_server(criteria, operation, deprioritized, deadline)?;
        let had_socket = self.connections.contains_key(&address);
        match self.ensure_connection(&address) {
            Ok(()) => Ok(address),
            // A new socket that failed authentication or its TLS checks
            // would fail the same way again.
            Err(error) if is_setup_failure(&error) => Err(error),
            // Load balanced, a new socket that failed to connect or to
            // complete its handshake is the operation's error: selection
            // would return the same load balancer, and nothing marked it
            // unusable. Only a failed idle-socket check earns a second try.
            Err(error) if self.is_load_balanced() && !had_socket => Err(error),
            Err(error) => {
                log::debug!(
                    target: "mongo_inline::topology",
                    "socket to {address} failed its check ({error}); selecting again"
                );
                let address = self.select_server(criteria, operation, deprioritized, deadline)?;
                self.ensure_connection(&address)?;
                Ok(address)
            }
        }
    }

    /// Leaves a checked, open socket to `address` in place, or fails after
    /// marking the server Unknown.
    fn ensure_connection(&mut self, address: &ServerAddress) -> Result<()> {
        let interval = self.options.socket_check_interval();
        let reusable = match self.connections.get(address) {
            Some(c) if c.is_broken() || c.peer_closed() => false,
            Some(_) => true,
            None => false,
        };
        if !reusable {
            // A socket the peer closed while idle (a restarted server, a
            // load balancer's idle timeout) is replaced without fuss: the
            // handshake on the new one is as good as a check.
            self.connections.remove(address);
            if self.is_load_balanced() {
                // No monitoring behind a load balancer: the handshake is no
                // check, and its errors skip SDAM error handling (the
                // load-balancer spec's "Initial Handshake Errors").
                return self.open_with_handshake(address).map(|_| ());
            }
            return self.connect_and_apply(address);
        }
        let timeout = self.check_timeout();
        let connection = self.connections.get_mut(address).expect("checked above");
        if connection.last_used().elapsed() < interval {
            return Ok(());
        }
        let (generation, service_id) = (connection.generation(), connection.service_id());
        let ping = connection
            .command("admin", bson::doc! { "ping": 1 }, timeout)
            .and_then(|reply| check_reply(reply, address));
        match ping {
            Ok(_) => Ok(()),
            Err(error) if self.is_load_balanced() => {
                // The load balancer is never marked Unknown; the failed
                // socket's service loses its sockets.
                self.connections.remove(address);
                self.handle_load_balanced_error(address, service_id, generation, &error);
                Err(error)
            }
            Err(error) => {
                self.connections.remove(address);
                // The ping is not a scan check: no cooldown. Nor is the
                // topology stale: the server selection spec says to mark
                // the server Unknown and select again, so another suitable
                // server is taken from what is known; only when none is
                // does the selection loop rescan (and retry this server).
                let now = Instant::now();
                let update = self.description.check_failed(
                    address,
                    format!("idle socket check failed: {error}"),
                    now,
                );
                self.publish(update);
                Err(error)
            }
        }
    }

    /// The single-threaded selection loop of the server-selection spec.
    ///
    /// `deadline` (timeoutMS) caps serverSelectionTimeoutMS, as the
    /// client-side operations timeout spec says.
    fn select_server(
        &mut self,
        criteria: &SelectionCriteria,
        operation: &str,
        deprioritized: &[ServerAddress],
        deadline: Deadline,
    ) -> Result<ServerAddress> {
        let start = Instant::now();
        let try_once = self.options.server_selection_try_once();
        let mut max_time = start + self.options.server_selection_timeout();
        // When timeoutMS ends the wait before serverSelectionTimeoutMS
        // would, running out of time is the operation's timeout (CSOT), and
        // the error says so rather than blaming serverSelectionTimeoutMS.
        let mut deadline_binds = false;
        if let Some(limit) = deadline.instant() {
            deadline_binds = limit <= max_time;
            max_time = max_time.min(limit);
        }
        let timed_out = |error: Error| {
            if !deadline_binds {
                return error;
            }
            let expired = Instant::now() >= max_time;
            if try_once && !expired {
                // tryOnce gave up after its one scan, not for lack of time.
                return error;
            }
            if !expired {
                // The next scan may not start before the deadline
                // (minHeartbeatFrequencyMS), so waiting on could not help.
                Error::new(crate::ErrorKind::Timeout {
                    message: format!(
                        "timeoutMS would expire before the next scan could start while \
                         selecting a server for {operation}: {error}"
                    ),
                })
            } else {
                Deadline::timeout_error(&format!("selecting a server for {operation}: {error}"))
            }
        };
        self.log_selection(SelectionLog::started, criteria, operation);
        // Load balanced, the one server is always selected and never
        // checked: there is nothing a scan could learn.
        let load_balanced = self.is_load_balanced();
        if !load_balanced
            && scan::scan_needed(
                self.last_scan_end,
                self.description.stale,
                self.options.heartbeat_frequency(),
                start,
            )
        {
            self.rescan(try_once, max_time, criteria, operation)
                .map_err(timed_out)?;
        }
        loop {
            let selected = select::select(
                &self.description,
                criteria,
                &self.selection_settings,
                deprioritized,
                &mut self.rng,
            );
            match selected {
                Err(error) => {
                    // An incompatible server may be upgraded or replaced:
                    // the next selection must look again, not trust this
                    // description.
                    self.description.stale = true;
                    self.log_selection(|c| SelectionLog::failed(c, &error), criteria, operation);
                    return Err(error);
                }
                Ok(Some(address)) => {
                    self.log_selection(
                        |c| SelectionLog::succeeded(c, &address),
                        criteria,
                        operation,
                    );
                    return Ok(address);
                }
                Ok(None) if load_balanced => {
                    return Err(self.selection_failed(criteria, operation, None));
                }
                Ok(None) => {
                    if let Some(failure) = self.setup_failure.take() {
                        self.log_selection(
                            |c| SelectionLog::failed(c, &failure),
                            criteria,
                            operation,
                        );
                        return Err(failure);
                    }
                    self.description.stale = true
                }
            }
            let scanned_since_start = self.last_scan_end.is_some_and(|end| end > start);
            if try_once && scanned_since_start {
                return Err(timed_out(self.selection_failed(criteria, operation, None)));
            }
            if !try_once && Instant::now() >= max_time {
                return Err(timed_out(self.selection_failed(criteria, operation, None)));
            }
            // Once per selection, even when a failed socket check makes
            // the operation select twice.
            if !self.waiting_logged {
                self.waiting_logged = true;
                let remaining =
                    (!try_once).then(|| max_time.saturating_duration_since(Instant::now()));
                self.log_selection(|c| SelectionLog::waiting(c, remaining), criteria, operation);
            }
            self.rescan(try_once, max_time, criteria, operation)
                .map_err(timed_out)?;
        }
    }

    /// Scans again, first sleeping until minHeartbeatFrequencyMS has passed
    /// since the last scan. When every server is cooling down after network
    /// errors the scan would check nothing: with tryOnce that fails at once;
    /// without, it sleeps until the first cooldown ends (or the timeout).
    fn rescan(
        &mut self,
        try_once: bool,
        max_time: Instant,
        criteria: &SelectionCriteria,
        operation: &str,
    ) -> Result<()> {
        let now = Instant::now();
        let (cooling, cooldown_end) = {
            let candidates = self.scan_candidates();
            (
                scan::all_cooling_down(&candidates, now),
                scan::cooldown_ends(&candidates, now),
            )
        };
        let mut target = self.last_scan_end.map(scan::earliest_rescan).unwrap_or(now);
        let cooling_reason = cooling.then(|| {
            let wait = cooldown_end
                .map(|end| end.saturating_duration_since(now))
                .unwrap_or_default();
            format!(
                "every server failed its last check with a network error and is in its \
                 {} ms cooldown (the next check is possible in {} ms)",
                crate::options::COOLDOWN.as_millis(),
                wait.as_millis()
            )
        });
        if cooling {
            if try_once {
                return Err(self.selection_failed(criteria, operation, cooling_reason));
            }
            if let Some(end) = cooldown_end {
                target = target.max(end);
            }
        }
        if !try_once && target > max_time {
            // Without the reason, failing long before serverSelectionTimeoutMS
            // would look like a bug to the user.
            return Err(self.selection_failed(criteria, operation, cooling_reason));
        }
        let now = Instant::now();
        if target > now {
            std::thread::sleep(target - now);
        }
        // serverSelectionTimeoutMS bounds the scan too: a member listing
        // thousands of unreachable hosts must not hold the selection past it.
        self.scan_until(Some(max_time));
        Ok(())
    }

    fn selection_failed(
        &self,
        criteria: &SelectionCriteria,
        operation: &str,
        reason: Option<String>,
    ) -> Error {
        let mut message = select::no_suitable_server_message(&self.description, criteria);
        if let Some(reason) = reason {
            message = format!("{message}; {reason}");
        }
        let error = Error::server_selection(message);
        self.log_selection(|c| SelectionLog::failed(c, &error), criteria, operation);
        error
    }

    fn log_selection(
        &self,
        build: impl FnOnce(&SelectionLogContext<'_>) -> SelectionLog,
        criteria: &SelectionCriteria,
        operation: &str,
    ) {
        // "Waiting for suitable server" is at info; the others at debug
        // (emit filters by each message's own level).
        if !log::log_enabled!(target: select::LOG_TARGET, log::Level::Info) {
            return;
        }
        let context = SelectionLogContext {
            operation,
            operation_id: None,
            criteria,
            topology: &self.description,
        };
        build(&context).emit();
    }

    /// The socket of `address`, if it has one.
    pub(crate) fn connection_mut(&mut self, address: &ServerAddress) -> Option<&mut Connection> {
        self.connections.get_mut(address)
    }

    /// What a cursor or transaction pins to ([`Topology::pinned_socket`]):
    /// a value that names `address`'s current socket and no other socket
    /// this client ever had; 0 when it has none.
    ///
    /// Not the SDAM generation: a socket that replaces one the peer closed
    /// while idle keeps the generation, and behind a load balancer the
    /// generation is per service, so a socket to another service may share
    /// it. Either replacement would silently take over a cursor.
    pub(crate) fn socket_generation(&self, address: &ServerAddress) -> u32 {
        if !self.connections.contains_key(address) {
            return 0;
        }
        self.socket_serials.get(address).copied().unwrap_or(0)
    }

    /// Checks that `address` still has the very socket
    /// ([`Topology::socket_generation`]) a cursor or transaction is pinned
    /// to. A replacement socket may reach another process or service, so it
    /// never stands in for the old one.
    pub(crate) fn pinned_socket(&mut self, address: &ServerAddress, generation: u32) -> Result<()> {
        self.forget_inherited_sockets();
        let usable = generation != 0
            && self.socket_generation(address) == generation
            && self
                .connections
                .get(address)
                .is_some_and(|c| !c.is_broken() && !c.peer_closed_peeking());
        if usable {
            Ok(())
        } else {
            Err(Error::network_message(
                Some(address.clone()),
                "the socket this cursor or transaction is pinned to has been closed; \
                 its server-side state cannot be reached from a new socket",
            ))
        }
    }

    /// Whether a command event would reach anyone (a handler, or the
    /// command log at debug): building one copies the reply, which for a
    /// large batch doubles the memory an operation needs.
    pub(crate) fn command_events_wanted(&self) -> bool {
        self.handler.is_some()
            || log::log_enabled!(target: crate::event::command::COMMAND_LOG_TARGET, log::Level::Debug)
    }

    /// Hands a command event to the log and the application's handler.
    pub(crate) fn publish_command_event(&self, event: &CommandEvent) {
        log_command_event(event);
        if let Some(handler) = &self.handler {
            handler.handle_command_event(event);
        }
    }

    /// connectTimeoutMS, or less when the deadline of the operation that
    /// is selecting comes sooner (CSOT: min(connectTimeoutMS, time left)).
    fn check_timeout(&self) -> Option<Duration> {
        let connect = self.options.connect_timeout();
        match self.operation_deadline.remaining(Instant::now()) {
            // A zero timeout would mean "none" to some socket calls.
            Some(left) => Some(
                connect
                    .map_or(left, |c| c.min(left))
                    .max(Duration::from_millis(1)),
            ),
            None => connect,
        }
    }

    fn scan_candidates(&self) -> Vec<ScanCandidate<'_>> {
        scan_candidates(&self.description, &self.checks)
    }

    /// A blocking scan in the spec's single-threaded order. Servers found
    /// during the scan are checked before it ends.
    ///
    /// Load balanced, it does nothing: the load-balancer spec forbids
    /// monitoring, and the topology never changes.
    pub fn scan(&mut self) {
        if self.is_load_balanced() {
            return;
        }
        self.scan_until(None);
    }

    /// [`Topology::scan`], starting no check after `limit` (the selection's
    /// serverSelectionTimeoutMS) or the operation's deadline.
    ///
    /// The order is computed once and followed, and computed again only
    /// when a check changed what it depends on (a server added or removed,
    /// a new primary or PossiblePrimary) or it runs out: recomputing it
    /// before every check made a scan of n members cost n² log n, 25 s of
    /// CPU for a hello listing 2,000 hosts.
    fn scan_until(&mut self, limit: Option<Instant>) {
        let scan_start = Instant::now();
        self.resolve_scan_hosts();
        let mut order = std::collections::VecDeque::new();
        let mut order_key = None;
        loop {
            let now = Instant::now();
            if self.operation_deadline.expired(now) || limit.is_some_and(|l| now >= l) {
                // Unchecked servers are as stale as before; the next
                // selection scans again.
                self.last_scan_end = Some(Instant::now());
                self.description.stale = true;
                return;
            }
            let key = self.scan_order_changes;
            if order.is_empty() || order_key != Some(key) {
                let candidates = scan_candidates(&self.description, &self.checks);
                order = scan::check_order(&candidates, scan_start, now, &mut self.rng).into();
                order_key = Some(key);
            }
            let Some(address) = order.pop_front() else {
                break;
            };
            if self.description.servers.contains_key(&address) {
                self.check(&address);
            }
        }
        self.last_scan_end = Some(Instant::now());
        self.description.stale = false;
        self.scan_known_hosts.clear();
        self.scan_dns_failure = None;
    }

    /// Looks up, in one exchange, the host names of every server this scan
    /// will have to open a socket to, so that N new members cost one DNS
    /// round trip rather than N.
    fn resolve_scan_hosts(&mut self) {
        self.scan_known_hosts.clear();
        self.scan_dns_failure = None;
        let mut hosts: Vec<String> = Vec::new();
        for address in self.description.servers.keys() {
            if let ServerAddress::Tcp { host, .. } = address {
                let needs_socket = !self.connections.contains_key(address);
                if needs_socket
                    && host.parse::<std::net::IpAddr>().is_err()
                    && !hosts.contains(host)
                {
                    hosts.push(host.clone());
                }
            }
        }
        if hosts.len() < 2 {
            return;
        }
        let deadline = self.dns_deadline();
        let resolver = self.resolver().clone();
        match crate::dns::resolve_hosts(&resolver, &hosts, deadline) {
            Ok(found) => self.scan_known_hosts = found,
            Err(error) => self.scan_dns_failure = Some((hosts, error)),
        }
    }

    /// One check of one server: a hello on its socket (opened, with the
    /// handshake, if there is none). A network error on a server that was
    /// known is retried once at once, per the monitoring spec. A
    /// PossiblePrimary is not known (only another member named it): a
    /// blackholed old primary that secondaries still name would otherwise
    /// cost two connectTimeoutMS per scan.
    fn check(&mut self, address: &ServerAddress) {
        let was_known = self.description.servers.get(address).is_some_and(|s| {
            !matches!(
                s.server_type,
                ServerType::Unknown | ServerType::PossiblePrimary
            )
        });
        let mut outcome = self.hello(address);
        if let Err(error) = &outcome {
            if was_known
                && error.is_network_error()
                && !self.operation_deadline.expired(Instant::now())
            {
                outcome = self.hello(address);
            }
        }
        match outcome {
            Ok(()) => {
                self.checks.insert(
                    address.clone(),
                    CheckRecord {
                        last_check_end: Some(Instant::now()),
                        network_failed: false,
                    },
                );
            }
            Err(error) => self.record_check_failure(address, &error),
        }
    }

    /// A check (or the handshake of an operation's new socket) failed: the
    /// socket goes, the server becomes Unknown, and a network error starts
    /// its cooldown.
    fn record_check_failure(&mut self, address: &ServerAddress, error: &Error) {
        // A check the operation's deadline cut short says nothing about the
        // server: no cooldown, so the next operation checks it again.
        let cut_short = self.operation_deadline.expired(Instant::now())
            && matches!(
                error.kind(),
                crate::ErrorKind::Network { timeout: true, .. }
            );
        self.connections.remove(address);
        if is_setup_failure(error) {
            self.setup_failure = Some(error.clone());
        }
        let update = self
            .description
            .check_failed(address, error.to_string(), Instant::now());
        self.publish(update);
        self.checks.insert(
            address.clone(),
            CheckRecord {
                last_check_end: Some(Instant::now()),
                network_failed: error.is_network_error() && !cut_short,
            },
        );
    }

    /// Sends a hello and applies the reply; the heartbeat events bracket it.
    fn hello(&mut self, address: &ServerAddress) -> Result<()> {
        let topology_id = self.description.id;
        self.publish_event(&SdamEvent::ServerHeartbeatStarted {
            topology_id,
            address: address.clone(),
            awaited: false,
        });
        let started = Instant::now();
        // A socket the peer closed while idle is not a failed check: the
        // server may be fine (restarted). Failing on it would put a server
        // that was Unknown (after a state-change error kept its socket) in
        // its cooldown without trying it, so open a new one instead.
        let reusable = self
            .connections
            .get(address)
            .is_some_and(|c| !c.is_broken() && !c.peer_closed());
        let timeout = self.check_timeout();
        let reply = match self.connections.get_mut(address) {
            Some(connection) if reusable => {
                let hello_ok = self
                    .description
                    .servers
                    .get(address)
                    .is_some_and(|s| s.hello_ok);
                let settings = HandshakeSettings {
                    metadata: &self.metadata,
                    load_balanced: self.options.load_balanced(),
                    server_api: self.options.server_api(),
                    compressors: &[],
                };
                let (command, _) = handshake::check_command(hello_ok, &settings);
                connection
                    .command("admin", command, timeout)
                    .and_then(|reply| check_reply(reply, address))
            }
            _ => self.open_with_handshake(address),
        };
        let duration = started.elapsed();
        match reply {
            Ok(reply) => {
                // The server's SCRAM challenge is no business of event
                // handlers or logs (the command-monitoring spec redacts it).
                let mut published = reply.clone();
                published.remove("speculativeAuthenticate");
                self.publish_event(&SdamEvent::ServerHeartbeatSucceeded {
                    topology_id,
                    address: address.clone(),
                    awaited: false,
                    duration,
                    reply: published,
                });
                self.apply_hello(address, &reply, duration);
                Ok(())
            }
            Err(failure) => {
                self.publish_event(&SdamEvent::ServerHeartbeatFailed {
                    topology_id,
                    address: address.clone(),
                    awaited: false,
                    duration,
                    failure: failure.clone(),
                });
                Err(failure)
            }
        }
    }

    fn apply_hello(&mut self, address: &ServerAddress, reply: &Document, rtt: Duration) {
        if let Some(connection) = self.connections.get_mut(address) {
            connection.apply_handshake_reply(reply);
        }
        let update = self
            .description
            .check_succeeded(address, reply, rtt, Instant::now());
        self.publish(update);
    }

    /// Opens a socket for an operation when there is none: the handshake's
    /// hello updates the description like a check (monitoring spec,
    /// "clients update the topology from each handshake").
    fn connect_and_apply(&mut self, address: &ServerAddress) -> Result<()> {
        let started = Instant::now();
        match self.open_with_handshake(address) {
            Ok(reply) => {
                self.apply_hello(address, &reply, started.elapsed());
                // The handshake counts as a check for the scan order (the
                // scanner goes by these records, not by the description).
                self.checks.insert(
                    address.clone(),
                    CheckRecord {
                        last_check_end: Some(Instant::now()),
                        network_failed: false,
                    },
                );
                Ok(())
            }
            Err(error) => {
                // The one socket is the monitoring socket too, so a failed
                // handshake is a failed check (monitoring spec: "clients
                // update the topology from each handshake"), cooldown included.
                self.record_check_failure(address, &error);
                Err(error)
            }
        }
    }

    /// Opens a new socket and runs the handshake on it; the socket takes
    /// the server's slot only if the handshake succeeds.
    fn open_with_handshake(&mut self, address: &ServerAddress) -> Result<Document> {
        self.connections.remove(address);
        let generation = self.description.pool_generation(address).unwrap_or(0);
        if let (ServerAddress::Tcp { host, .. }, Some((hosts, error))) =
            (address, &self.scan_dns_failure)
        {
            if hosts.contains(host) {
                // This scan's look-up of the name already failed; asking
                // again would only spend the scan's time twice.
                return Err(Error::network_message(
                    Some(address.clone()),
                    format!("resolving the host name ({error})"),
                ));
            }
        }
        // connectTimeoutMS (or the operation's time left) bounds the
        // connect and the handshake together, not each of them.
        let limit = self.check_timeout();
        let started = Instant::now();
        let mut resolver = self.resolver().clone();
        resolver.known_hosts = self.scan_known_hosts.clone();
        let mut connection = Connection::open_with_resolver(
            address,
            generation,
            limit,
            self.options.socket_timeout(),
            &resolver,
        )?;
        // One limit for connect, TLS, handshake and authentication together.
        let time_left = || {
            limit.map(|limit| {
                limit
                    .saturating_sub(started.elapsed())
                    .max(Duration::from_millis(1))
            })
        };
        if let Some(tls) = &self.tls {
            connection.start_tls(tls, time_left())?;
        }
        let settings = HandshakeSettings {
            metadata: &self.metadata,
            load_balanced: self.options.load_balanced(),
            server_api: self.options.server_api(),
            compressors: &[],
        };
        let (mut command, use_op_msg) = handshake::handshake_command(&settings);
        let speculation = match &self.authenticator {
            Some(authenticator) => authenticator.prepare_handshake(&mut command)?,
            None => crate::auth::Speculation::None,
        };
        let timeout = time_left();
        let reply = if use_op_msg {
            connection.command("admin", command, timeout)
        } else {
            connection.legacy_command("admin", &command, timeout)
        };
        let reply = check_reply(reply?, address)?;
        connection.apply_handshake_reply(&reply);
        // The auth spec: authenticate right after the handshake, before the
        // socket carries anything else.
        if let Some(authenticator) = &mut self.authenticator {
            authenticator.authenticate(&reply, speculation, &mut |db, command| {
                connection.command(db, command, time_left())
            })?;
        }
        if self.is_load_balanced() {
            let Some(service_id) = connection.service_id() else {
                return Err(Error::client(NO_SERVICE_ID));
            };
            // The socket's generation is its service's (the load-balancer
            // spec, "Initial Handshake Errors").
            let generation = self
                .service_generations
                .get(&service_id)
                .copied()
                .unwrap_or(0);
            connection.set_generation(generation);
            let mut service = ServerDescription::from_hello(
                address.clone(),
                &reply,
                &RoundTripTime::new(),
                Instant::now(),
            );
            service.server_type = ServerType::LoadBalancer;
            self.load_balanced_service = Some(service);
        }
        self.connections.insert(address.clone(), connection);
        self.last_socket_serial = self.last_socket_serial.checked_add(1).unwrap_or(1);
        self.socket_serials
            .insert(address.clone(), self.last_socket_serial);
        Ok(reply)
    }

    /// The description an operation on `address` builds its command for.
    /// Load balanced, that is what the socket's handshake said about the
    /// service behind it (wire version, size limits), as a LoadBalancer:
    /// the load balancer's own description keeps every field unset.
    pub(crate) fn server_for_operation(
        &self,
        address: &ServerAddress,
    ) -> Option<ServerDescription> {
        let server = self.description.servers.get(address)?;
        match &self.load_balanced_service {
            Some(service) if self.is_load_balanced() && self.connections.contains_key(address) => {
                Some(service.clone())
            }
            _ => Some(server.clone()),
        }
    }

    fn is_load_balanced(&self) -> bool {
        self.description.topology_type == TopologyType::LoadBalanced
    }

    /// An operation failed on `address`: let SDAM decide what it means and
    /// carry that out. A network or protocol error always costs the socket,
    /// whatever SDAM decides about the server.
    pub(crate) fn handle_operation_error(
        &mut self,
        address: &ServerAddress,
        generation: u32,
        error: &Error,
    ) {
        let service_id = self.connections.get(address).and_then(|c| c.service_id());
        if error.is_network_error() || matches!(error.kind(), crate::ErrorKind::Protocol { .. }) {
            self.connections.remove(address);
        }
        if self.is_load_balanced() {
            self.handle_load_balanced_error(address, service_id, generation, error);
            return;
        }
        self.handle_error(
            address,
            generation,
            HandshakePhase::AfterHandshakeCompletes,
            error,
        );
    }

    fn handle_error(
        &mut self,
        address: &ServerAddress,
        generation: u32,
        phase: HandshakePhase,
        error: &Error,
    ) {
        let max_wire_version = self
            .description
            .servers
            .get(address)
            .map(|s| s.max_wire_version)
            .unwrap_or(0);
        let Some(application_error) = ApplicationError::from_error(
            address.clone(),
            error,
            phase,
            generation,
            max_wire_version,
        ) else {
            return;
        };
        let (decision, update) = self
            .description
            .handle_application_error(&application_error, Instant::now());
        if decision.clear_socket {
            self.connections.remove(address);
        }
        self.publish(update);
    }

    /// SDAM error handling behind a load balancer: the description never
    /// changes (the load balancer is never Unknown), and an error that
    /// clears the pool clears only the erring socket's service, whose
    /// generation grows. An error from a socket older than its service's
    /// generation is stale.
    fn handle_load_balanced_error(
        &mut self,
        address: &ServerAddress,
        service_id: Option<ObjectId>,
        generation: u32,
        error: &Error,
    ) {
        let Some(service_id) = service_id else {
            return;
        };
        let current = self
            .service_generations
            .get(&service_id)
            .copied()
            .unwrap_or(0);
        if generation < current {
            return;
        }
        let max_wire_version = self
            .load_balanced_service
            .as_ref()
            .map(|s| s.max_wire_version)
            .unwrap_or(0);
        // The per-address generation of the pure layer is the load
        // balancer's, which never changes; the per-service one was checked
        // above.
        let Some(application_error) = ApplicationError::from_error(
            address.clone(),
            error,
            HandshakePhase::AfterHandshakeCompletes,
            self.description.pool_generation(address).unwrap_or(0),
            max_wire_version,
        ) else {
            return;
        };
        let decision = crate::sdam::error_handling::decide(&self.description, &application_error);
        if decision.clear_socket {
            self.service_generations.insert(service_id, current + 1);
            let same_service = self
                .connections
                .get(address)
                .is_some_and(|c| c.service_id() == Some(service_id));
            if same_service {
                self.connections.remove(address);
            }
        }
    }

    /// The process id read by the latest selection (or pinned-socket check).
    /// Within one operation it is current: a fork on another thread does not
    /// carry this thread's operation into the child, and this thread cannot
    /// fork in the middle of its own operation. Later steps of the operation
    /// (the session pool) use it instead of asking the kernel again.
    pub(crate) fn process_id(&self) -> u32 {
        self.pid
    }

    /// A forked child must not talk on its parent's sockets: drop them
    /// (closing only the child's descriptors) and start afresh.
    fn forget_inherited_sockets(&mut self) {
        let pid = std::process::id();
        if pid != self.pid {
            self.pid = pid;
            self.connections.clear();
            self.description.stale = true;
        }
    }

    fn publish(&mut self, update: TopologyUpdate) {
        for address in &update.removed {
            self.connections.remove(address);
            self.checks.remove(address);
        }
        for event in &update.events {
            let reorders = match event {
                SdamEvent::ServerOpening { .. } | SdamEvent::ServerClosed { .. } => true,
                SdamEvent::ServerDescriptionChanged { previous, new, .. } => {
                    scan::priority_class(previous.server_type)
                        != scan::priority_class(new.server_type)
                }
                _ => false,
            };
            if reorders {
                self.scan_order_changes += 1;
            }
            self.publish_event(event);
        }
    }

    fn publish_event(&self, event: &SdamEvent) {
        log_sdam_event(event);
        if let Some(handler) = &self.handler {
            handler.handle_sdam_event(event);
        }
    }
}

fn scan_candidates<'a>(
    description: &'a TopologyDescription,
    checks: &HashMap<ServerAddress, CheckRecord>,
) -> Vec<ScanCandidate<'a>> {
    description
        .servers
        .values()
        .map(|server| {
            let record = checks.get(&server.address).copied().unwrap_or_default();
            ScanCandidate {
                description: server,
                last_check_failed_with_network_error: record.network_failed,
                last_check_end: record.last_check_end,
            }
        })
        .collect()
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Closing sockets needs no network round trip; the events tell
        // observers the topology is gone.
        self.connections.clear();
        let update = self.description.close();
        for event in &update.events {
            self.publish_event(event);
        }
    }
}
