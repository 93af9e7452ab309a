//! The blocking shell around the pure monitor (`monitor`): it
//! owns one socket slot per server and does the I/O the monitor asks for
//! (checks, sleeps), publishing the events the rules return.
//!
//! ```text
//!  select_for ──> srv seeds ──> loop { now; monitor.poll(now, deadline) }
//!                                  │ Check(addrs) ──> checks (overlapped) ──> monitor.on_check
//!                                  │ SleepUntil(t) ─> sleep
//!                                  └ Selected(a) ───> ensure_connection (ping if idle) ──> exec
//! ```
//!
//! Split by job: `checks` (hellos and new sockets, blocking), `overlap`
//! (many checks in one wait, TLS and open sockets included), `waiting`
//! (which checks overlap, and applying them), `errors` (an operation's
//! error), `srv` (the SRV seed list), `forget` (fire-and-forget at close).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::Document;

use crate::error::{Error, Result};
use crate::proto::address::{AddressMap, ServerAddress};
use crate::proto::deadline::Deadline;
use crate::proto::event::EventSink;
use crate::proto::handshake;
use crate::proto::logging::Component;
use crate::proto::monitor::{is_setup_failure, Monitor, MonitorSettings, Next};
use crate::proto::options::ClientOptions;
use crate::proto::sdam::{ServerDescription, TopologyDescription, TopologySettings, TopologyType};
use crate::proto::select::ServerSelector;
use crate::proto::select::{Criteria, SelectionLog, SelectionLogContext, SelectionSettings};
use crate::shell::clock::{Clock, SkewedClock, SystemClock};
use crate::shell::conn::Connection;

mod authenticating;
mod checks;
mod errors;
mod forget;
mod overlap;
mod publish;
mod remembered;
mod sockets;
mod srv;
#[cfg(test)]
mod tests;
mod waiting;

/// The deployment as this client sees it, and its sockets.
pub struct Topology {
    options: ClientOptions,
    /// The description and every rule of scanning and selecting.
    monitor: Monitor,
    connections: AddressMap<Connection>,
    handler: Option<Arc<dyn EventSink>>,
    /// The `client` document of the handshake of every new socket.
    metadata: Document,
    /// What wrapping libraries appended to it, in order.
    driver_info: Vec<handshake::DriverInfo>,
    /// The process the sockets belong to; a fork changes it.
    pid: u32,
    /// The pin value given to the last socket adopted (see
    /// [`Topology::socket_generation`]): unique per socket, never 0.
    last_socket_serial: u32,
    /// Load balanced: the generation of each service behind the load
    /// balancer (the spec's per-`serviceId` pool generation).
    service_generations: HashMap<ObjectId, u32>,
    /// Load balanced: what the current socket's handshake said about the
    /// service behind it (wire version, limits), which the load balancer's
    /// own description never holds.
    load_balanced_service: Option<ServerDescription>,
    /// `mongodb+srv`: whether the seed list has been looked up yet (it
    /// is, on the first operation), and when the SRV record may next be
    /// polled for new mongos.
    srv_resolved: bool,
    next_srv_rescan: Option<Instant>,
    /// How host names are resolved, read from the system on first use.
    resolver: Option<crate::shell::dns::ResolverConfig>,
    /// During a selection: the member addresses looked up together, and
    /// the names that look-up failed for (with why).
    scan_known_hosts: Vec<(String, Vec<std::net::IpAddr>)>,
    scan_dns_failure: Option<(Vec<String>, Error)>,
    /// Whether the current operation logged "Waiting for suitable server"
    /// (the spec: once per selection, even when it selects twice).
    waiting_logged: bool,
    /// The operation under way, for the log messages' `operationId`.
    operation_id: Option<i64>,
    /// The client's one TLS configuration (`tls=true`), shared by its
    /// sockets so that TLS sessions resume.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// The client's credential and cached SCRAM keys.
    authenticator: Option<crate::proto::auth::Authenticator>,
    /// Where the SCRAM keys outlive the process (`state_file`, opt-in).
    state_file: Option<crate::shell::state_file::StateFile>,
    /// The checks whose handshakes run in one wait (made on first use),
    /// and those waiting for a free slot.
    overlap: Option<overlap::Overlap>,
    queued: std::collections::VecDeque<ServerAddress>,
    /// Where the scan reads the time and sleeps: nowhere else, so a whole
    /// scan runs on virtual time in tests.
    clock: Arc<dyn Clock>,
}

/// The handshake's `client` document for `options`, naming the wrapping
/// library of `options.driver_info` (the list `append_metadata` extends).
fn initial_metadata(
    options: &ClientOptions,
) -> Result<(bson::Document, Vec<handshake::DriverInfo>)> {
    let driver_info: Vec<handshake::DriverInfo> = options.driver_info.iter().cloned().collect();
    let metadata =
        handshake::client_metadata_with_driver_info(options.app_name(), &driver_info, &|name| {
            std::env::var(name).ok()
        })?;
    Ok((metadata, driver_info))
}

impl Topology {
    /// A topology for `options` on the system's clock, its random choices
    /// seeded from the operating system. Publishes the opening events; no
    /// network I/O (only the state file is read, when there is one).
    pub(crate) fn new(
        options: ClientOptions,
        handler: Option<Arc<dyn EventSink>>,
        server_selector: Option<ServerSelector>,
    ) -> Result<Topology> {
        // The spec's environment configuration needs no code change: with
        // MONGODB_LOG_* set and no logger of the application's, one is
        // installed here.
        crate::shell::logging::install_env_logger();
        let clock: Arc<dyn Clock> = match &options.clock_skew {
            Some(skew) => Arc::new(SkewedClock(skew.clone())),
            None => Arc::new(SystemClock),
        };
        let time = Time {
            clock,
            rng: crate::shell::rng::from_os(),
        };
        Self::with_time(options, handler, server_selector, time)
    }

    /// A topology for `options` reading `time.clock` and drawing from
    /// `time.rng`, and nothing else.
    pub(crate) fn with_time(
        options: ClientOptions,
        handler: Option<Arc<dyn EventSink>>,
        server_selector: Option<ServerSelector>,
        time: Time,
    ) -> Result<Topology> {
        let srv_pending = options.hosts().is_empty() && options.srv_host().is_some();
        if options.hosts().is_empty() && !srv_pending {
            return Err(Error::invalid_argument(
                "no hosts to connect to (a mongodb+srv URI must be resolved first)",
            ));
        }
        let (metadata, driver_info) = initial_metadata(&options)?;
        let Security {
            tls,
            chain_memory,
            mut authenticator,
        } = security(&options)?;
        let state_file = open_state_file(&options, authenticator.as_mut(), chain_memory)?;
        let monitor = Monitor::new(
            TopologyDescription::new(
                TopologySettings::from_options(&options)
                    .with_change_events(publish::change_events_wanted(handler.as_ref())),
            )
            .with_id(crate::shell::ids::next_topology_id()),
            MonitorSettings {
                heartbeat_frequency: options.heartbeat_frequency(),
                server_selection_timeout: options.server_selection_timeout(),
                try_once: options.server_selection_try_once(),
                min_heartbeat_frequency: options.min_heartbeat_frequency(),
                selection: selection_settings(&options, server_selector),
            },
            time.rng,
        );
        let topology = Topology {
            tls,
            authenticator,
            state_file,
            monitor,
            connections: AddressMap::default(),
            handler,
            metadata,
            driver_info,
            pid: std::process::id(),
            last_socket_serial: 0,
            service_generations: HashMap::new(),
            load_balanced_service: None,
            srv_resolved: !srv_pending,
            next_srv_rescan: None,
            resolver: None,
            scan_known_hosts: Vec::new(),
            scan_dns_failure: None,
            waiting_logged: false,
            operation_id: None,
            overlap: None,
            queued: std::collections::VecDeque::new(),
            clock: time.clock,
            options,
        };
        // A mongodb+srv topology opens once its seeds are known.
        if !srv_pending {
            for event in topology.monitor.description().opening_events() {
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
        self.monitor.description()
    }

    /// The clock the topology reads, for the operations run on it.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// A generator forked from the topology's, for the client's other
    /// random draws (session ids, retry jitter).
    pub(crate) fn fork_rng(&mut self) -> fastrand::Rng {
        self.monitor.rng().fork()
    }

    /// Starts an operation: a new id for its log messages.
    pub(crate) fn begin_operation(&mut self) {
        self.operation_id = Some(crate::shell::ids::next_operation_id());
    }

    /// The id of the operation under way, if any.
    pub(crate) fn operation_id(&self) -> Option<i64> {
        self.operation_id
    }

    /// Appends a wrapping library's metadata to the handshake of the
    /// sockets opened from now on (the handshake spec's `appendMetadata`):
    /// open sockets keep theirs, and none is opened or closed for it. One
    /// equal to metadata already appended changes nothing; one the spec
    /// refuses (a value with `|`, too large a document) is an error and
    /// changes nothing either.
    pub(crate) fn append_metadata(&mut self, info: handshake::DriverInfo) -> Result<()> {
        if self.driver_info.contains(&info) {
            return Ok(());
        }
        let mut appended = self.driver_info.clone();
        appended.push(info);
        self.metadata = handshake::client_metadata_with_driver_info(
            self.options.app_name(),
            &appended,
            &|name| std::env::var(name).ok(),
        )?;
        self.driver_info = appended;
        Ok(())
    }

    /// Closes every socket at once. The description stays; the next
    /// operation reconnects.
    pub fn close(&mut self) {
        self.connections.clear();
    }

    /// Selects a server for `criteria` and makes sure it has a usable
    /// socket, per the spec's "checking an idle socket": a socket idle for
    /// socketCheckIntervalMS is pinged first; if that fails the server is
    /// marked Unknown and selection runs once more. `deadline` (timeoutMS)
    /// caps serverSelectionTimeoutMS and every check's connectTimeoutMS.
    pub(crate) fn select_for(
        &mut self,
        criteria: &Criteria,
        operation: &str,
        deprioritized: &[ServerAddress],
        deadline: Deadline,
    ) -> Result<ServerAddress> {
        self.waiting_logged = false;
        self.refresh_change_events();
        self.forget_inherited_sockets();
        self.prepare_srv_seeds(deadline)?;
        let address = self.select_server(criteria, operation, deprioritized, deadline)?;
        let had_socket = self.connections.contains_key(&address);
        match self.ensure_connection(&address, deadline) {
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
                self.ensure_connection(&address, deadline)?;
                Ok(address)
            }
        }
    }

    /// The selection loop: does what the monitor asks until it selects a
    /// server or gives up. The clock is read once per turn.
    fn select_server(
        &mut self,
        criteria: &Criteria,
        operation: &str,
        deprioritized: &[ServerAddress],
        deadline: Deadline,
    ) -> Result<ServerAddress> {
        self.log_selection(SelectionLog::started, criteria, operation);
        let last_scan_end = self.order_first_scan();
        let mut now = self.clock.now();
        self.monitor
            .start_selection(criteria.clone(), deprioritized, operation, now);
        let result = loop {
            let next = self.monitor.poll(now, deadline);
            for update in self.monitor.take_updates() {
                self.publish(update);
            }
            if let Some(remaining) = self.monitor.take_waiting_notice() {
                if !self.waiting_logged {
                    self.waiting_logged = true;
                    self.log_selection(
                        |c| SelectionLog::waiting(c, remaining),
                        criteria,
                        operation,
                    );
                }
            }
            match next {
                Next::Check(addresses) => self.run_checks(addresses, deadline),
                Next::Wait(until) => self.wait_for_checks(now, until, deadline),
                Next::SleepUntil(at) => {
                    self.abandon_checks();
                    let wait = at.saturating_duration_since(now);
                    if !wait.is_zero() {
                        self.clock.sleep(wait);
                    }
                }
                Next::Selected(address) => break Ok(address),
                Next::Failed(error) => break Err(error),
                Next::Idle => break Err(Error::internal("the selection ended without a result")),
            }
            // The checks or the wait took time: the next turn reads the clock
            // afresh (the first used the one read to start the selection).
            now = self.clock.now();
        };
        self.abandon_checks();
        self.end_scan_lookups();
        self.remember_topology(last_scan_end);
        match &result {
            Ok(address) => {
                self.log_selection(|c| SelectionLog::succeeded(c, address), criteria, operation)
            }
            Err(error) => {
                self.log_selection(|c| SelectionLog::failed(c, error), criteria, operation)
            }
        }
        result
    }

    /// Starts the checks the monitor asked for, the host names looked up
    /// together first (N new members cost one DNS round trip). Every TCP
    /// check (a new socket, TLS or not, or a hello on an open one) runs in
    /// one wait; Unix sockets are checked blocking.
    #[cold]
    fn run_checks(&mut self, addresses: Vec<ServerAddress>, deadline: Deadline) {
        self.resolve_scan_hosts(&addresses, deadline);
        for address in addresses {
            if !self.monitor.description().servers.contains_key(&address) {
                // Removed by an earlier result of this scan: nothing to check.
                let update = self.monitor.on_check(
                    &address,
                    crate::proto::monitor::CheckOutcome::Failed(Error::client("removed")),
                    Duration::ZERO,
                    self.clock.now(),
                );
                self.publish(update);
            } else if self.overlappable(&address) {
                self.queued.push_back(address);
            } else {
                self.check_blocking(&address, deadline);
            }
        }
        self.start_queued(deadline);
    }

    fn end_scan_lookups(&mut self) {
        self.scan_known_hosts.clear();
        self.scan_dns_failure = None;
    }

    fn log_selection(
        &self,
        build: impl FnOnce(&SelectionLogContext<'_>) -> SelectionLog,
        criteria: &Criteria,
        operation: &str,
    ) {
        // "Waiting for suitable server" is at info; the others at debug
        // (each message is logged at its own level).
        if !crate::shell::logging::enabled(Component::ServerSelection, log::Level::Info) {
            return;
        }
        let context = SelectionLogContext {
            operation,
            operation_id: self.operation_id,
            criteria,
            topology: self.monitor.description(),
        };
        crate::shell::logging::emit(&build(&context).into_message());
    }

    fn is_load_balanced(&self) -> bool {
        self.monitor.description().topology_type == TopologyType::LoadBalanced
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
            // The poller is the parent's too (one epoll instance across the
            // fork): the child's checks would wake the parent, and the
            // parent's the child. The child makes its own.
            self.overlap = None;
            self.queued.clear();
            self.monitor.mark_stale();
        }
    }
}

/// Where a topology reads the time and draws its random choices.
pub(crate) struct Time {
    /// The clock of the scan, its checks and their look-ups.
    pub(crate) clock: Arc<dyn Clock>,
    /// The generator the monitor draws from, and the client's others fork.
    pub(crate) rng: fastrand::Rng,
}

/// The latency window and the application's selector.
fn selection_settings(
    options: &ClientOptions,
    server_selector: Option<ServerSelector>,
) -> SelectionSettings {
    let settings = SelectionSettings::new(options.local_threshold(), options.heartbeat_frequency());
    match server_selector {
        Some(selector) => settings.with_server_selector(selector),
        None => settings,
    }
}

/// Reads the state file, when the options name one, and hands the
/// authenticator the keys it holds for this client, the TLS verifier the
/// chains (the file keeps the DNS answers).
fn open_state_file(
    options: &ClientOptions,
    authenticator: Option<&mut crate::proto::auth::Authenticator>,
    chain_memory: Option<Arc<crate::shell::tls::ChainMemory>>,
) -> Result<Option<crate::shell::state_file::StateFile>> {
    let Some(path) = options.state_file() else {
        return Ok(None);
    };
    let (mut file, contents) = crate::shell::state_file::StateFile::open(path)?;
    let binding = crate::proto::state_file::Binding::of(options);
    if let Some(authenticator) = authenticator {
        authenticator.use_state_file(binding, contents.scram_keys(binding));
    }
    file.bind(&contents, binding, chain_memory);
    Ok(Some(file))
}

/// A client's TLS configuration and authenticator.
struct Security {
    tls: Option<Arc<rustls::ClientConfig>>,
    /// With a state file: the chains the TLS configuration verified.
    chain_memory: Option<Arc<crate::shell::tls::ChainMemory>>,
    authenticator: Option<crate::proto::auth::Authenticator>,
}

/// The client's TLS configuration (with a state file, and the memory of
/// the chains it verifies) and authenticator, checked against each other
/// (a mechanism that needs TLS or a client certificate).
fn security(options: &ClientOptions) -> Result<Security> {
    let (tls, chain_memory) = if options.tls() {
        let remember = options.state_file().is_some();
        let (config, memory) =
            crate::shell::tls::client_config_remembering(options.tls_options(), remember)?;
        (Some(config), memory)
    } else {
        (None, None)
    };
    let authenticator = options
        .credential()
        .map(|c| crate::proto::auth::Authenticator::new(c, options.default_database()))
        .transpose()?;
    if let Some(authenticator) = &authenticator {
        let client_certificate = options
            .tls_options()
            .is_some_and(|t| t.cert_key_file_path.is_some());
        if let Some(warning) = authenticator.check_transport(tls.is_some(), client_certificate)? {
            log::warn!("{warning}");
        }
    }
    Ok(Security {
        tls,
        chain_memory,
        authenticator,
    })
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Closing sockets needs no network round trip; the events tell
        // observers the topology is gone.
        self.connections.clear();
        let update = self.monitor.close();
        for event in &update.events {
            self.publish_event(event);
        }
    }
}
