//! `mongodb+srv`: the seed list's look-up before the first operation and
//! the SRV polling of a sharded cluster's mongos list, done before a scan
//! (the polling spec's single-threaded rule), never in the background.

use std::time::Instant;

use super::Topology;
use crate::error::Result;
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::proto::sdam::{TopologyDescription, TopologySettings};

/// The `log` target of what the SRV look-ups and rescans leave aside.
const SRV_LOG_TARGET: &str = "mongo_inline::srv";

impl Topology {
    /// `mongodb+srv`: looks the seed list up before the first operation,
    /// and polls the SRV record for mongos changes when the rescan
    /// interval has passed (the polling spec's single-threaded rule: before
    /// a scan, never in the background).
    pub(super) fn prepare_srv_seeds(&mut self, deadline: Deadline) -> Result<()> {
        let Some(host) = self.options.srv_host().map(str::to_string) else {
            return Ok(());
        };
        let now = self.clock.now();
        if !self.srv_resolved {
            return self.resolve_srv_seeds(&host, deadline);
        }
        let due = self.next_srv_rescan.is_some_and(|at| now >= at);
        if due && self.monitor.description().polls_srv() {
            self.poll_srv(&host, deadline);
        }
        Ok(())
    }

    /// The resolver configuration, read from the system once.
    pub(super) fn resolver(&mut self) -> &crate::shell::dns::ResolverConfig {
        let (options, clock) = (&self.options, &self.clock);
        self.resolver.get_or_insert_with(|| {
            crate::shell::dns::ResolverConfig::for_client(options, clock.clone())
        })
    }

    /// When a DNS look-up must end: connectTimeoutMS, cut to the
    /// operation's deadline.
    pub(super) fn dns_deadline(&self, deadline: Deadline) -> Option<Instant> {
        let now = self.clock.now();
        self.check_timeout(deadline, now).map(|t| now + t)
    }

    fn srv_lookup(
        &mut self,
        host: &str,
        deadline: Deadline,
    ) -> Result<crate::shell::dns::SrvLookup> {
        let name = crate::proto::srv::srv_query_name(self.options.srv_service_name(), host);
        let deadline = self.dns_deadline(deadline);
        let resolver = self.resolver().clone();
        crate::shell::dns::lookup_srv_and_txt(&resolver, &name, host, deadline)
    }

    /// The initial seed-list discovery: SRV and TXT together, the targets
    /// checked, the TXT options laid under the URI's, srvMaxHosts applied,
    /// and the options validated again (TXT may add replicaSet or
    /// loadBalanced). Only then does the topology open.
    fn resolve_srv_seeds(&mut self, host: &str, deadline: Deadline) -> Result<()> {
        let remembered = self
            .state_file
            .as_ref()
            .and_then(|file| file.fresh_srv(self.wall_seconds()));
        let remembered_is_none = remembered.is_none();
        let lookup = match remembered {
            Some(answer) => crate::shell::dns::SrvLookup {
                targets: answer.targets,
                txt_records: answer.txt_records,
                txt_ttl: None,
            },
            None => self.srv_lookup(host, deadline)?,
        };
        let seeds = crate::proto::srv::seeds_from_targets(host, &lookup.targets)?;
        let txt = crate::proto::srv::parse_txt_options(host, &lookup.txt_records)?;
        if remembered_is_none {
            self.remember_srv_answer(&lookup);
        }
        let mut options = self.options.clone();
        if let Some(unused) = crate::proto::srv::apply_txt_options(&mut options, txt) {
            log::debug!(target: SRV_LOG_TARGET, "{unused}");
        }
        options.hosts =
            crate::proto::srv::choose_seeds(seeds, options.srv_max_hosts(), self.monitor.rng());
        options.validate()?;
        let wanted = super::publish::change_events_wanted(self.handler.as_ref());
        let settings = TopologySettings::from_options(&options).with_change_events(wanted);
        // The same topology, now with its seeds: it keeps its id.
        let id = self.monitor.description().id;
        self.monitor
            .replace_description(TopologyDescription::new(settings).with_id(id));
        self.options = options;
        self.srv_resolved = true;
        self.next_srv_rescan = Some(
            self.clock.now()
                + crate::proto::srv::rescan_interval(
                    Some(&lookup.targets),
                    self.options.heartbeat_frequency(),
                ),
        );
        for event in self.monitor.description().opening_events() {
            self.publish_event(&event);
        }
        Ok(())
    }

    /// Keeps a looked-up answer in the state file until its smallest TTL.
    fn remember_srv_answer(&self, lookup: &crate::shell::dns::SrvLookup) {
        let Some(file) = &self.state_file else {
            return;
        };
        let ttl = lookup
            .targets
            .iter()
            .map(|t| t.ttl)
            .chain(lookup.txt_ttl)
            .min();
        let now = self.wall_seconds();
        if let Some(expires) = ttl.and_then(|ttl| crate::proto::state_file::dns_expiry(now, ttl)) {
            file.remember(crate::proto::state_file::Item::Srv(
                crate::proto::state_file::SrvAnswer {
                    targets: lookup.targets.clone(),
                    txt_records: lookup.txt_records.clone(),
                    expires,
                },
            ));
        }
    }

    /// One SRV rescan. Failures change nothing and are only logged; the
    /// next try then comes after heartbeatFrequencyMS.
    fn poll_srv(&mut self, host: &str, deadline: Deadline) {
        let heartbeat = self.options.heartbeat_frequency();
        let lookup = match self.srv_lookup(host, deadline) {
            Ok(lookup) => lookup,
            Err(error) => {
                log::warn!(target: SRV_LOG_TARGET, "SRV polling of {host}: {error}");
                self.next_srv_rescan = Some(self.clock.now() + heartbeat);
                return;
            }
        };
        let current: Vec<ServerAddress> =
            self.monitor.description().servers.keys().cloned().collect();
        let max_hosts = self.options.srv_max_hosts();
        let update = crate::proto::srv::poll_update(
            host,
            &current,
            &lookup.targets,
            max_hosts,
            self.monitor.rng(),
        );
        for rejected in &update.rejected {
            log::warn!(target: SRV_LOG_TARGET, "SRV polling: {rejected}");
        }
        let verified = update.verified(&lookup.targets);
        let interval =
            crate::proto::srv::rescan_interval(verified.then_some(&lookup.targets[..]), heartbeat);
        self.next_srv_rescan = Some(self.clock.now() + interval);
        if let Some(hosts) = update.hosts {
            let update = self.monitor.set_srv_hosts(&hosts);
            self.publish(update);
        }
    }
}
