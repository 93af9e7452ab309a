//! The I/O of a check: a hello on the server's socket, or a new socket
//! with its handshake, and the heartbeat events around it. What a result
//! means is the monitor's business ([`crate::monitor`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::Document;

use super::Topology;
use crate::error::{Error, ErrorKind, Result};
use crate::proto::address::ServerAddress;
use crate::proto::auth::{Authenticator, Conversation, Need, Next, Secret, Speculation};
use crate::proto::deadline::Deadline;
use crate::proto::event::SdamEvent;
use crate::proto::handshake::{self, HandshakeSettings};
use crate::proto::monitor::CheckOutcome;
use crate::proto::sdam::{RoundTripTime, ServerDescription, ServerType};
use crate::shell::clock::Clock;
use crate::shell::conn::{check_reply, Connection};

/// How a check ended, as the shell saw it (the monitor hears it as a
/// [`CheckOutcome`]).
pub(super) enum CheckEnd {
    /// The hello's reply (`ok: 1`); a new socket took its server's slot.
    Replied(Document),
    /// No hello reply: the socket, TLS or the hello failed.
    Failed(Error),
    /// A new socket's hello was answered, then its authentication failed:
    /// the server is up, the socket is not usable.
    Unauthenticated { hello: Document, error: Error },
}

impl CheckEnd {
    pub(super) fn from_result(result: Result<Document>) -> Self {
        match result {
            Ok(reply) => CheckEnd::Replied(reply),
            Err(error) => CheckEnd::Failed(error),
        }
    }

    /// The socket as an operation sees it: the hello's reply once the
    /// socket is usable, else why it is not.
    pub(super) fn into_result(self) -> Result<Document> {
        match self {
            CheckEnd::Replied(reply) => Ok(reply),
            CheckEnd::Failed(error) | CheckEnd::Unauthenticated { error, .. } => Err(error),
        }
    }

    fn error(&self) -> Option<&Error> {
        match self {
            CheckEnd::Replied(_) => None,
            CheckEnd::Failed(error) | CheckEnd::Unauthenticated { error, .. } => Some(error),
        }
    }
}

/// The load-balancer spec's error when a handshake reply has no `serviceId`.
const NO_SERVICE_ID: &str = "Driver attempted to initialize in load balancing mode, \
                             but the server does not support this mode.";

impl Topology {
    /// connectTimeoutMS, or less when the operation's `deadline` comes
    /// sooner (CSOT: min(connectTimeoutMS, time left)).
    pub(super) fn check_timeout(&self, deadline: Deadline, now: Instant) -> Option<Duration> {
        let connect = self.options.connect_timeout();
        match deadline.remaining(now) {
            // A zero timeout would mean "none" to some socket calls.
            Some(left) => Some(
                connect
                    .map_or(left, |c| c.min(left))
                    .max(Duration::from_millis(1)),
            ),
            None => connect,
        }
    }

    /// The time since `started`, by the topology's clock.
    pub(super) fn since(&self, started: Instant) -> Duration {
        self.clock.now().saturating_duration_since(started)
    }

    /// The wall time in unix seconds, by the topology's clock (what the
    /// state file's entries are dated with).
    pub(super) fn wall_seconds(&self) -> u64 {
        self.clock
            .wall_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// The wall time in unix milliseconds (the remembered topology's).
    pub(super) fn wall_millis(&self) -> u64 {
        self.clock
            .wall_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    /// The heartbeat event of a check that took `duration`. A hello
    /// answered on a socket whose authentication then failed is a
    /// successful heartbeat: monitoring is the hello (server-monitoring.md:
    /// monitors do not authenticate).
    pub(super) fn publish_heartbeat(
        &self,
        address: &ServerAddress,
        duration: Duration,
        end: &CheckEnd,
    ) {
        let topology_id = self.monitor.description().id;
        let event = match end {
            CheckEnd::Replied(reply) | CheckEnd::Unauthenticated { hello: reply, .. } => {
                // The server's SCRAM challenge is no business of event
                // handlers or logs (the command-monitoring spec redacts it).
                let mut published = reply.clone();
                published.remove("speculativeAuthenticate");
                SdamEvent::ServerHeartbeatSucceeded {
                    topology_id,
                    address: address.clone(),
                    awaited: false,
                    duration,
                    reply: published,
                }
            }
            CheckEnd::Failed(failure) => SdamEvent::ServerHeartbeatFailed {
                topology_id,
                address: address.clone(),
                awaited: false,
                duration,
                failure: failure.clone(),
            },
        };
        self.publish_event(&event);
    }

    pub(super) fn publish_heartbeat_started(&self, address: &ServerAddress) {
        self.publish_event(&SdamEvent::ServerHeartbeatStarted {
            topology_id: self.monitor.description().id,
            address: address.clone(),
            awaited: false,
        });
    }

    /// Hands a check's result to the monitor and acts on what changed.
    pub(super) fn apply_check(
        &mut self,
        address: &ServerAddress,
        end: CheckEnd,
        rtt: Duration,
        deadline: Deadline,
    ) {
        let now = self.clock.now();
        let cut_short = end
            .error()
            .is_some_and(|error| error.is_network_timeout() && deadline.expired(now));
        let outcome = match end {
            CheckEnd::Replied(reply) => {
                if let Some(connection) = self.connections.get_mut(address) {
                    connection.apply_handshake_reply(&reply);
                }
                CheckOutcome::Reply(reply)
            }
            // A check the operation's deadline cut short says nothing
            // about the server.
            CheckEnd::Failed(error) | CheckEnd::Unauthenticated { error, .. } if cut_short => {
                self.connections.remove(address);
                CheckOutcome::CutShort(error)
            }
            CheckEnd::Failed(error) => {
                self.connections.remove(address);
                CheckOutcome::Failed(error)
            }
            CheckEnd::Unauthenticated { hello, error } => {
                self.connections.remove(address);
                CheckOutcome::Unauthenticated {
                    reply: hello,
                    error,
                }
            }
        };
        let update = self.monitor.on_check(address, outcome, rtt, now);
        self.publish(update);
    }

    /// One check of one server, blocking: a hello on its socket, or a new
    /// socket and its handshake when it has none (or one the peer closed
    /// while idle: that is not a failed check, the server may have
    /// restarted).
    pub(super) fn check_blocking(&mut self, address: &ServerAddress, deadline: Deadline) {
        self.publish_heartbeat_started(address);
        let started = self.clock.now();
        let reusable = self
            .connections
            .get(address)
            .is_some_and(|c| !c.is_broken() && !c.peer_closed());
        let timeout = self.check_timeout(deadline, started);
        let command = self.check_hello(address);
        let end = match self.connections.get_mut(address) {
            Some(connection) if reusable => CheckEnd::from_result(
                connection
                    .command("admin", command, timeout)
                    .and_then(|reply| check_reply(reply, address)),
            ),
            _ => self.open_checked(address, deadline),
        };
        let duration = self.since(started);
        self.publish_heartbeat(address, duration, &end);
        self.apply_check(address, end, duration, deadline);
    }

    /// The hello of a check on an open socket (`hello`, or the legacy
    /// name for a server that never said it knows `hello`).
    pub(super) fn check_hello(&self, address: &ServerAddress) -> Document {
        let hello_ok = self
            .monitor
            .description()
            .servers
            .get(address)
            .is_some_and(|s| s.hello_ok);
        handshake::check_command(hello_ok, &self.handshake_settings()).0
    }

    pub(super) fn handshake_settings(&self) -> HandshakeSettings<'_> {
        HandshakeSettings {
            metadata: &self.metadata,
            load_balanced: self.options.load_balanced(),
            server_api: self.options.server_api(),
            compressors: self.options.compressors().unwrap_or_default(),
        }
    }

    /// Leaves a checked, open socket to `address` in place, or fails after
    /// marking the server Unknown.
    pub(super) fn ensure_connection(
        &mut self,
        address: &ServerAddress,
        deadline: Deadline,
    ) -> Result<()> {
        let now = self.clock.now();
        let interval = self.options.socket_check_interval();
        // One look-up on the warm path: whether the socket is usable, and
        // whether it has been idle long enough to need a ping.
        let idle_too_long = match self.connections.get(address) {
            Some(c) if !c.is_broken() && !c.peer_closed_at(now) => {
                Some(now.saturating_duration_since(c.last_used()) >= interval)
            }
            _ => None,
        };
        let Some(idle_too_long) = idle_too_long else {
            // A socket the peer closed while idle (a restarted server, a
            // load balancer's idle timeout) is replaced without fuss: the
            // handshake on the new one is as good as a check.
            self.connections.remove(address);
            if self.is_load_balanced() {
                // No monitoring behind a load balancer: the handshake is no
                // check, and its errors skip SDAM error handling (the
                // load-balancer spec's "Initial Handshake Errors").
                return self.open_with_handshake(address, deadline).map(|_| ());
            }
            return self.connect_and_apply(address, deadline);
        };
        if !idle_too_long {
            return Ok(());
        }
        let timeout = self.check_timeout(deadline, now);
        let connection = self.connections.get_mut(address).expect("checked above");
        let (generation, service_id) = (connection.generation(), connection.service_id());
        let ping = connection
            .command("admin", bson::doc! { "ping": 1 }, timeout)
            .and_then(|reply| check_reply(reply, address));
        let Err(error) = ping else {
            return Ok(());
        };
        self.connections.remove(address);
        if self.is_load_balanced() {
            // The load balancer is never marked Unknown; the failed
            // socket's service loses its sockets.
            self.handle_load_balanced_error(address, service_id, generation, &error);
        } else {
            let update = self
                .monitor
                .on_idle_check_failed(address, &error, self.clock.now());
            self.publish(update);
        }
        Err(error)
    }

    /// Opens a socket for an operation when there is none: the handshake's
    /// hello updates the description like a check (monitoring spec,
    /// "clients update the topology from each handshake"), and a failed
    /// one is a failed check, cooldown included; a failed authentication
    /// after it is SDAM's authentication-step error.
    fn connect_and_apply(&mut self, address: &ServerAddress, deadline: Deadline) -> Result<()> {
        let started = self.clock.now();
        let end = self.open_checked(address, deadline);
        let failure = end.error().cloned();
        self.apply_check(address, end, self.since(started), deadline);
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The error for `address` when this scan's look-up of its host name
    /// already failed: asking again would only spend the scan's time twice.
    pub(super) fn known_dns_failure(&self, address: &ServerAddress) -> Option<Error> {
        let (ServerAddress::Tcp { host, .. }, Some((hosts, error))) =
            (address, &self.scan_dns_failure)
        else {
            return None;
        };
        hosts.contains(host).then(|| {
            Error::network_message(
                Some(address.clone()),
                format!("resolving the host name ({error})"),
            )
        })
    }

    /// Opens a new socket and runs the handshake on it; the socket takes
    /// the server's slot only if the handshake succeeds. connectTimeoutMS
    /// (or the operation's time left) bounds connect, TLS, handshake and
    /// authentication together.
    pub(super) fn open_with_handshake(
        &mut self,
        address: &ServerAddress,
        deadline: Deadline,
    ) -> Result<Document> {
        self.open_checked(address, deadline).into_result()
    }

    /// [`Self::open_with_handshake`], telling a failed authentication
    /// after an answered hello from a failed hello.
    pub(super) fn open_checked(&mut self, address: &ServerAddress, deadline: Deadline) -> CheckEnd {
        let started = self.clock.now();
        let limit = self.check_timeout(deadline, started);
        let time_left = time_left(self.clock(), started, limit);
        match self.open_and_hello(address, limit, &time_left) {
            Ok((connection, reply, speculation)) => {
                self.finish_handshake(connection, reply, speculation, &time_left)
            }
            Err(error) => CheckEnd::Failed(error),
        }
    }

    /// A new socket to `address`, with TLS, and the handshake's hello
    /// reply, within `limit`.
    fn open_and_hello(
        &mut self,
        address: &ServerAddress,
        limit: Option<Duration>,
        time_left: &dyn Fn() -> Option<Duration>,
    ) -> Result<(Connection, Document, Speculation)> {
        self.connections.remove(address);
        if let Some(error) = self.known_dns_failure(address) {
            return Err(error);
        }
        let generation = self
            .monitor
            .description()
            .pool_generation(address)
            .unwrap_or(0);
        let mut resolver = self.resolver().clone();
        resolver.known_hosts = self.scan_known_hosts.clone();
        let mut connection = Connection::open_with_resolver(
            address,
            generation,
            (limit, self.options.socket_timeout()),
            &resolver,
            self.clock(),
        )?;
        if let Some(tls) = &self.tls {
            connection.start_tls(tls, time_left())?;
        }
        let (command, use_op_msg, speculation) = self.handshake_command()?;
        let reply = if use_op_msg {
            connection.command("admin", command, time_left())
        } else {
            connection.legacy_command("admin", &command, time_left())
        };
        let reply = match reply {
            Err(e) if self.tls.is_none() => Err(crate::shell::tls::hint_tls_required(e)),
            reply => reply,
        };
        Ok((connection, reply?, speculation))
    }

    /// The handshake's hello, with the authenticator's speculative part.
    pub(super) fn handshake_command(&self) -> Result<(Document, bool, Speculation)> {
        let (mut command, use_op_msg) = handshake::handshake_command(&self.handshake_settings());
        let speculation = match &self.authenticator {
            Some(authenticator) => authenticator
                .prepare_handshake(&mut command, &crate::shell::rng::client_nonce()?)?,
            None => Speculation::None,
        };
        Ok((command, use_op_msg, speculation))
    }

    /// After the handshake's reply: authentication (blocking, on this
    /// socket), the load balancer's service, and the socket takes its
    /// server's slot with a new serial.
    fn finish_handshake(
        &mut self,
        mut connection: Connection,
        reply: Document,
        speculation: Speculation,
        time_left: &dyn Fn() -> Option<Duration>,
    ) -> CheckEnd {
        let reply = match self.accept_handshake_reply(&mut connection, reply) {
            Ok(reply) => reply,
            Err(error) => return CheckEnd::Failed(error),
        };
        // The auth spec: authenticate right after the handshake, before the
        // socket carries anything else.
        if let Err(error) = self.authenticate(&mut connection, &reply, speculation, time_left) {
            return CheckEnd::Unauthenticated {
                hello: reply,
                error,
            };
        }
        CheckEnd::from_result(self.seat_connection(connection, reply))
    }

    /// The handshake's reply checked and applied to the socket: what the
    /// server is, its limits, the compressor both sides named.
    pub(super) fn accept_handshake_reply(
        &self,
        connection: &mut Connection,
        reply: Document,
    ) -> Result<Document> {
        let reply = check_reply(reply, connection.address())?;
        connection.apply_handshake_reply(&reply);
        connection.set_compressor(crate::proto::compression::negotiate(
            self.options.compressors().unwrap_or_default(),
            self.options.zlib_compression_level(),
            &reply,
        ));
        Ok(reply)
    }

    /// An authenticated socket (or one that needs none) takes its server's
    /// slot with a new serial, behind a load balancer with its service.
    pub(super) fn seat_connection(
        &mut self,
        mut connection: Connection,
        reply: Document,
    ) -> Result<Document> {
        // Chains verified and names looked up on the way here (with keys
        // that changed, already written by `update_state_file`).
        if let Some(file) = &self.state_file {
            file.save_new_items(self.wall_seconds());
        }
        if self.is_load_balanced() {
            self.adopt_service(&mut connection, &reply)?;
        }
        self.last_socket_serial = self.last_socket_serial.checked_add(1).unwrap_or(1);
        connection.set_serial(self.last_socket_serial);
        self.connections
            .insert(connection.address().clone(), connection);
        Ok(reply)
    }

    /// Runs the client's authentication conversation on a new socket.
    fn authenticate(
        &mut self,
        connection: &mut Connection,
        reply: &Document,
        speculation: Speculation,
        time_left: &dyn Fn() -> Option<Duration>,
    ) -> Result<()> {
        let Some(mut authenticator) = self.authenticator.take() else {
            return Ok(());
        };
        let (mut outcome, mut conversation) = self.converse(
            &mut authenticator,
            connection,
            reply,
            speculation,
            time_left,
        );
        if let (Err(error), Some(refused)) = (&outcome, &conversation) {
            if stored_keys_refused(&mut authenticator, error, refused) {
                (outcome, conversation) = self.converse(
                    &mut authenticator,
                    connection,
                    reply,
                    Speculation::None,
                    time_left,
                );
            }
        }
        let accepted = conversation.as_ref().filter(|_| outcome.is_ok());
        self.update_state_file(&mut authenticator, accepted);
        self.authenticator = Some(authenticator);
        outcome
    }

    /// After a conversation on a new socket: the keys a server accepted
    /// (`accepted`'s) are known good and, when PBKDF2 derived them, sealed;
    /// the state file is written when this client's entries changed (keys
    /// sealed, or refused ones dropped).
    pub(super) fn update_state_file(
        &self,
        authenticator: &mut Authenticator,
        accepted: Option<&Conversation>,
    ) {
        let Some(file) = &self.state_file else {
            return;
        };
        if let Some(conversation) = accepted {
            let sealed = crate::shell::rng::client_nonce().and_then(|nonce| {
                let mut seal_nonce = [0u8; crate::proto::state_file::NONCE_BYTES];
                seal_nonce.copy_from_slice(&nonce.bytes()[..crate::proto::state_file::NONCE_BYTES]);
                authenticator.keys_accepted(conversation, seal_nonce)
            });
            if let Err(error) = sealed {
                log::warn!(target: "mongo_inline::state_file", "keys not sealed: {error}");
            }
        }
        if let Some((binding, sealed)) = authenticator.take_state_change() {
            let now = self
                .clock
                .wall_time()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            file.save(binding, &sealed, now);
        }
    }

    /// The conversation's loop: send what it asks, fetch the secrets it
    /// waits for, until it is done (or fails, which clears what the auth
    /// spec says a failure invalidates). The conversation comes back
    /// (when it began) for what its outcome says about its keys.
    fn converse(
        &mut self,
        authenticator: &mut Authenticator,
        connection: &mut Connection,
        reply: &Document,
        speculation: Speculation,
        time_left: &dyn Fn() -> Option<Duration>,
    ) -> (Result<()>, Option<Conversation>) {
        let begun = crate::shell::rng::client_nonce()
            .and_then(|nonce| authenticator.begin(reply, speculation, &nonce));
        match begun {
            Ok((mut conversation, next)) => {
                let outcome = self.drive(
                    authenticator,
                    connection,
                    &mut conversation,
                    next,
                    time_left,
                );
                (outcome, Some(conversation))
            }
            Err(error) => (Err(error), None),
        }
    }

    /// Whether a `ReauthenticationRequired` (391) error can be answered
    /// (MONGODB-OIDC).
    pub(crate) fn reauthenticates(&self) -> bool {
        self.authenticator
            .as_ref()
            .is_some_and(Authenticator::reauthenticates)
    }

    /// Reauthenticates the socket to `address` after the server answered
    /// `ReauthenticationRequired` (391): SASL directly, no hello, within
    /// `deadline`.
    pub(crate) fn reauthenticate(
        &mut self,
        address: &ServerAddress,
        deadline: Deadline,
    ) -> Result<()> {
        let (Some(mut authenticator), Some(mut connection)) =
            (self.authenticator.take(), self.connections.remove(address))
        else {
            return Err(Error::client(
                "reauthentication needs the socket and a credential",
            ));
        };
        let clock = self.clock.clone();
        let socket_timeout = self.options.socket_timeout();
        let time_left = move || deadline.remaining(clock.now()).or(socket_timeout);
        let outcome = authenticator
            .reauthenticate()
            .and_then(|(mut conversation, next)| {
                self.drive(
                    &mut authenticator,
                    &mut connection,
                    &mut conversation,
                    next,
                    &time_left,
                )
            });
        self.authenticator = Some(authenticator);
        if outcome.is_ok() {
            self.connections.insert(address.clone(), connection);
        }
        outcome
    }

    fn drive(
        &mut self,
        authenticator: &mut Authenticator,
        connection: &mut Connection,
        conversation: &mut Conversation,
        mut next: Next,
        time_left: &dyn Fn() -> Option<Duration>,
    ) -> Result<()> {
        loop {
            let outcome = match next {
                Next::Send { db, command } => connection
                    .command(&db, command, time_left())
                    .and_then(|answer| authenticator.step(conversation, &answer)),
                Next::Fetch(need) => self
                    .fetch_secret(authenticator, need, time_left())
                    .and_then(|secret| authenticator.provide(conversation, secret)),
                Next::Done => return Ok(()),
            };
            next = outcome.inspect_err(|_| authenticator.conversation_failed(conversation))?;
        }
    }

    /// Fetches a secret a conversation waits for, inline, within the time
    /// the operation has left (the auth spec's 10 s without a deadline).
    pub(super) fn fetch_secret(
        &mut self,
        authenticator: &mut Authenticator,
        need: Need,
        time_left: Option<Duration>,
    ) -> Result<Secret> {
        let deadline = self.clock.now() + time_left.unwrap_or(Duration::from_secs(10));
        let unix_time = self
            .clock
            .wall_time()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let resolver = self.resolver().clone();
        let https = crate::shell::tls::client_config(None)?;
        let fetch = crate::shell::cloud::Fetch {
            cloud: self.options.cloud.as_ref(),
            http: crate::shell::http::Context {
                clock: self.clock.as_ref(),
                resolver: &resolver,
                tls: Some(&https),
            },
            deadline,
            unix_time,
        };
        match need {
            Need::AwsCredentials => Ok(Secret::Aws {
                credentials: crate::shell::cloud::aws_credentials(authenticator, &fetch)?,
                unix_time,
            }),
            Need::OidcToken => {
                let wait = authenticator.oidc_call_wait(self.clock.now());
                if !wait.is_zero() {
                    self.clock.sleep(wait);
                }
                let credential = self.options.credential().cloned().unwrap_or_default();
                crate::shell::cloud::oidc_token(&credential, &fetch).map(Secret::OidcToken)
            }
        }
    }

    /// Load balanced: the socket's generation is its service's (the
    /// load-balancer spec, "Initial Handshake Errors"), and what the
    /// handshake said about the service is what operations build on.
    fn adopt_service(&mut self, connection: &mut Connection, reply: &Document) -> Result<()> {
        let Some(service_id) = connection.service_id() else {
            return Err(Error::client(NO_SERVICE_ID));
        };
        let generation = self
            .service_generations
            .get(&service_id)
            .copied()
            .unwrap_or(0);
        connection.set_generation(generation);
        let mut service = ServerDescription::from_hello(
            connection.address().clone(),
            reply,
            &RoundTripTime::new(),
            self.clock.now(),
        );
        service.server_type = ServerType::LoadBalancer;
        self.load_balanced_service = Some(service);
        Ok(())
    }

    /// Looks up, in one exchange, the host names of every server this scan
    /// will have to open a socket to, so that N new members cost one DNS
    /// round trip rather than N.
    pub(super) fn resolve_scan_hosts(&mut self, addresses: &[ServerAddress], deadline: Deadline) {
        self.recall_scan_hosts(addresses);
        let mut hosts: Vec<String> = Vec::new();
        for address in addresses {
            if let ServerAddress::Tcp { host, .. } = address {
                let known = self.scan_known_hosts.iter().any(|(h, _)| h == host);
                let needs_socket = !self.connections.contains_key(address);
                if needs_socket
                    && !known
                    && host.parse::<std::net::IpAddr>().is_err()
                    && !hosts.contains(host)
                {
                    hosts.push(host.clone());
                }
            }
        }
        // One name is looked up by the socket that needs it, unless the
        // answer's TTL is wanted for the state file.
        if hosts.is_empty() || (hosts.len() < 2 && self.state_file.is_none()) {
            return;
        }
        let dns_deadline = self.dns_deadline(deadline);
        let resolver = self.resolver().clone();
        match crate::shell::dns::resolve_hosts(&resolver, &hosts, dns_deadline) {
            Ok(found) => {
                self.remember_scan_hosts(&found);
                self.scan_known_hosts
                    .extend(found.into_iter().map(|f| (f.host, f.ips)));
            }
            Err(error) => self.scan_dns_failure = Some((hosts, error)),
        }
    }

    /// The state file's fresh addresses of the hosts this scan opens
    /// sockets to, as if looked up.
    fn recall_scan_hosts(&mut self, addresses: &[ServerAddress]) {
        let Some(file) = &self.state_file else {
            return;
        };
        let now = self.wall_seconds();
        for address in addresses {
            if let ServerAddress::Tcp { host, .. } = address {
                let known = self.scan_known_hosts.iter().any(|(h, _)| h == host);
                if !known {
                    if let Some(ips) = file.fresh_host(host, now) {
                        self.scan_known_hosts.push((host.clone(), ips));
                    }
                }
            }
        }
    }

    /// Keeps looked-up addresses in the state file until their TTL.
    fn remember_scan_hosts(&self, found: &[crate::shell::dns::ResolvedHost]) {
        let Some(file) = &self.state_file else {
            return;
        };
        let now = self.wall_seconds();
        for resolved in found {
            if let Some(expires) = crate::proto::state_file::dns_expiry(now, resolved.ttl) {
                file.remember(crate::proto::state_file::Item::Host(
                    crate::proto::state_file::HostAddresses {
                        host: resolved.host.clone(),
                        ips: resolved.ips.clone(),
                        expires,
                    },
                ));
            }
        }
    }
}

/// The time left of `limit` since `started` by `clock`, at least 1 ms (a
/// zero timeout means "none" to the socket).
pub(super) fn time_left(
    clock: Arc<dyn Clock>,
    started: Instant,
    limit: Option<Duration>,
) -> impl Fn() -> Option<Duration> {
    move || {
        limit.map(|limit| {
            let elapsed = clock.now().saturating_duration_since(started);
            limit.saturating_sub(elapsed).max(Duration::from_millis(1))
        })
    }
}

/// Whether `conversation` failed on keys from the state file that the
/// server refused (a changed password, a tampered or copied file): they
/// are dropped, and the socket authenticates once more, with PBKDF2.
pub(super) fn stored_keys_refused(
    authenticator: &mut Authenticator,
    error: &Error,
    conversation: &Conversation,
) -> bool {
    matches!(error.kind(), ErrorKind::Authentication { .. })
        && authenticator.stored_keys_refused(conversation)
}
