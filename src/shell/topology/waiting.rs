//! The shell's side of overlapped checks ([`super::overlap`]): which
//! checks can overlap, starting them, and applying what one wait finished
//! in the spec's priority order.

use std::time::Instant;

use super::authenticating::Progress;
use super::checks::CheckEnd;
use super::overlap::{Checked, Finished, Overlap, Start, MAX_IN_FLIGHT};
use super::Topology;
use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::shell::conn::{check_reply, Connection};

/// How long results may still be applied once the scan's time is up.
const APPLY_BUDGET: std::time::Duration = std::time::Duration::from_millis(100);

impl Topology {
    /// Whether a check of `address` can run in the shared wait: any check
    /// over TCP, TLS or not, on a new socket or an open one. Unix sockets
    /// are checked blocking, and nothing is checked behind a load balancer.
    pub(super) fn overlappable(&self, address: &ServerAddress) -> bool {
        matches!(address, ServerAddress::Tcp { .. }) && !self.is_load_balanced()
    }

    /// Starts queued checks while slots are free.
    pub(super) fn start_queued(&mut self, deadline: Deadline) {
        if self.overlap.is_none() {
            match Overlap::new(self.clock()) {
                Ok(overlap) => self.overlap = Some(overlap),
                Err(error) => {
                    log::warn!(target: "mongo_inline::topology", "no poller ({error}); checking one by one");
                    while let Some(address) = self.queued.pop_front() {
                        self.check_blocking(&address, deadline);
                    }
                    return;
                }
            }
        }
        while self
            .overlap
            .as_ref()
            .is_some_and(|o| o.in_flight() < MAX_IN_FLIGHT)
        {
            let Some(address) = self.queued.pop_front() else {
                return;
            };
            self.start_one(address, deadline);
        }
    }

    fn start_one(&mut self, address: ServerAddress, deadline: Deadline) {
        self.publish_heartbeat_started(&address);
        let started = self.clock.now();
        let limit = self
            .check_timeout(deadline, started)
            .and_then(|t| started.checked_add(t));
        let failure = match self.take_reusable(&address) {
            Some(connection) => {
                let command = self.check_hello(&address);
                self.overlap
                    .as_mut()
                    .and_then(|o| o.start_hello(connection, command, started, limit).err())
            }
            None => self.start_handshake(address, started, limit),
        };
        if let Some(finished) = failure {
            self.apply_finished(*finished, deadline);
        }
    }

    /// The open socket of `address`, taken out of its slot for a check,
    /// unless it is broken or the peer closed it while idle (then it is
    /// dropped, and the check opens a new one: not a failed check, the
    /// server may have restarted).
    fn take_reusable(&mut self, address: &ServerAddress) -> Option<Connection> {
        let connection = self.connections.remove(address)?;
        (!connection.is_broken() && !connection.peer_closed()).then_some(connection)
    }

    fn start_handshake(
        &mut self,
        address: ServerAddress,
        started: Instant,
        limit: Option<Instant>,
    ) -> Option<Box<Finished>> {
        match self.prepare_start(&address, started, limit) {
            Ok(start) => self.overlap.as_mut()?.start(start).err(),
            Err(error) => Some(Box::new(Finished {
                address,
                result: Err(error),
                started,
                limit,
            })),
        }
    }

    fn prepare_start(
        &mut self,
        address: &ServerAddress,
        started: Instant,
        limit: Option<Instant>,
    ) -> Result<Start> {
        if let Some(error) = self.known_dns_failure(address) {
            return Err(error);
        }
        let (ServerAddress::Tcp { host, .. }, Some(port)) = (address, address.port()) else {
            return Err(Error::internal("only TCP checks overlap"));
        };
        let mut resolver = self.resolver().clone();
        resolver.known_hosts = self.scan_known_hosts.clone();
        let addresses = crate::shell::conn::resolve(address, host, port, limit, &resolver)?;
        let (command, use_op_msg, speculation) = self.handshake_command()?;
        let generation = self
            .monitor
            .description()
            .pool_generation(address)
            .unwrap_or(0);
        Ok(Start {
            tls: self.tls.clone(),
            generation,
            socket_timeout: self.options.socket_timeout(),
            address: address.clone(),
            addresses,
            command,
            use_op_msg,
            speculation,
            started,
            limit,
        })
    }

    /// Waits for the checks under way, at most until `until`, and applies
    /// those that finished: in the spec's priority order (a primary's reply
    /// first), since one may remove servers another named.
    #[cold]
    pub(super) fn wait_for_checks(
        &mut self,
        now: Instant,
        until: Option<Instant>,
        deadline: Deadline,
    ) {
        let Some(overlap) = self.overlap.as_mut() else {
            return;
        };
        let mut finished = overlap.wait(now, until);
        let description = self.monitor.description();
        finished.sort_by_key(|f| {
            description.servers.get(&f.address).map_or(u8::MAX, |s| {
                crate::proto::scan::priority_class(s.server_type)
            })
        });
        let past_end = |now: Instant| until.is_some_and(|until| now >= until);
        let woke = self.clock.now();
        for done in finished {
            // Past the scan's end the monitor drops the scan: applying
            // results for long (each costs an update of the whole
            // description) would hold the selection past
            // serverSelectionTimeoutMS. Those that ended the wait are
            // applied within a small budget, so their errors are reported.
            let now = self.clock.now();
            if past_end(now) && now.saturating_duration_since(woke) > APPLY_BUDGET {
                break;
            }
            self.apply_finished(done, deadline);
        }
        if past_end(self.clock.now()) {
            self.cut_short_checks();
            return;
        }
        self.start_queued(deadline);
    }

    /// A check finished in the wait, or took a step: a new socket's hello
    /// reply begins its authentication, whose commands go back into the
    /// wait ([`super::authenticating`]) until it is done and the socket
    /// takes its slot; an open one goes back to its slot. The monitor
    /// hears the result once the check is over.
    fn apply_finished(&mut self, done: Finished, deadline: Deadline) {
        let address = done.address;
        let times = (done.started, done.limit);
        let progress = match done.result {
            Ok(Checked::Handshake(connection, reply, speculation)) => {
                self.handshake_replied(connection, reply, speculation, times)
            }
            Ok(Checked::AuthReply(connection, auth, answer)) => {
                self.auth_replied(connection, auth, answer, times)
            }
            Ok(Checked::AuthFailed(auth, error)) => self.auth_failed(auth, error),
            Ok(Checked::Hello(connection, reply)) => Progress::Done(CheckEnd::from_result(
                check_reply(reply, &address).inspect(|_| {
                    self.connections.insert(address.clone(), connection);
                }),
            )),
            Err(error) => Progress::Done(CheckEnd::Failed(error)),
        };
        let Progress::Done(end) = progress else {
            return;
        };
        let duration = self.since(done.started);
        self.publish_heartbeat(&address, duration, &end);
        self.apply_check(&address, end, duration, deadline);
        if !self.monitor.description().servers.contains_key(&address) {
            // An earlier result of the scan removed the server.
            self.connections.remove(&address);
        }
    }

    /// The scan's time (serverSelectionTimeoutMS, or the operation's
    /// deadline) ran out with handshakes under way: each server is Unknown
    /// with a timeout that says so, and no cooldown (the time was the
    /// selection's, not the server's). Checks not started are dropped.
    fn cut_short_checks(&mut self) {
        self.queued.clear();
        let Some(overlap) = self.overlap.as_mut() else {
            return;
        };
        for (address, started) in overlap.drain() {
            let io = std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out: no answer before the selection's time ran out",
            );
            let error = Error::network(Some(address.clone()), "checking the server", io);
            let duration = self.since(started);
            self.publish_heartbeat(&address, duration, &CheckEnd::Failed(error.clone()));
            let outcome = crate::proto::monitor::CheckOutcome::CutShort(error);
            let update = self
                .monitor
                .on_check(&address, outcome, duration, self.clock.now());
            self.publish(update);
        }
    }

    /// The selection is over: checks still under way are dropped unheard
    /// (their servers stay as they were; the next selection rescans).
    pub(super) fn abandon_checks(&mut self) {
        self.queued.clear();
        if let Some(overlap) = self.overlap.as_mut() {
            overlap.abandon();
        }
    }
}
