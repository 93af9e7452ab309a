//! The topology state machine: how a new [`ServerDescription`] changes the
//! [`TopologyDescription`], per the SDAM spec's TopologyType table.
//!
//! ```text
//!   Unknown ──Standalone (one seed)─────────> Single   (or from the start: directConnection=true)
//!      ├──────Mongos──────────────────────> Sharded
//!      ├──────RSPrimary───────────────────> ReplicaSetWithPrimary ─┐ primary lost,
//!      └──────RSSecondary/Arbiter/Other───> ReplicaSetNoPrimary <──┘ stale or removed
//!                                             │  (or from the start: replicaSet=...)
//!                                             └──RSPrimary──> ReplicaSetWithPrimary
//!   LoadBalanced: set from the start (loadBalanced=true), never changes.
//! ```
//!
//! Every entry point returns a [`TopologyUpdate`]: the events the change
//! implies, in the spec's order, and the servers added and removed so the
//! shell can open and close sockets. Nothing here does I/O or reads a
//! clock.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::Document;

use crate::error::Error;
use crate::proto::address::ServerAddress;
use crate::proto::event::SdamEvent;
use crate::proto::options::{DEFAULT_HEARTBEAT_FREQUENCY, DEFAULT_LOCAL_THRESHOLD};
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::sdam::ServerInfo;
use crate::proto::select::{selectable_servers, Criteria, SelectionSettings};

use super::description::{
    ServerDescription, ServerState, ServerType, TopologyDescription, TopologyType,
};
use super::settings::{TopologyId, TopologySettings};
use super::TopologyVersion;

/// The oldest wire version this driver speaks (MongoDB 4.2).
pub const MIN_SUPPORTED_WIRE_VERSION: i32 = 8;
/// The MongoDB release of [`MIN_SUPPORTED_WIRE_VERSION`], for the
/// compatibility error.
pub const MIN_SUPPORTED_SERVER_VERSION: &str = "4.2";
/// The newest wire version this driver speaks (MongoDB 8.0).
pub const MAX_SUPPORTED_WIRE_VERSION: i32 = 25;

/// The driver's name in the compatibility error.
const DRIVER_NAME: &str = "mongo-inline";

/// The error of a primary whose (electionId, setVersion) is older than one
/// already seen (the spec's required substring).
pub const STALE_PRIMARY_ERROR: &str = "primary marked stale due to electionId/setVersion mismatch";
/// The error of an old primary replaced by a newer one.
pub const NEWER_PRIMARY_ERROR: &str = "primary marked stale due to discovery of newer primary";

/// The wire version of MongoDB 6.0, from which a primary's (electionId,
/// setVersion) pair is ordered by electionId first.
const ELECTION_ID_FIRST_WIRE_VERSION: i32 = 17;

/// What one change to the topology implies.
#[derive(Clone, Debug, Default)]
#[must_use = "the events must be published and removed servers' sockets closed"]
#[non_exhaustive]
pub struct TopologyUpdate {
    /// The SDAM events, in the order they are to be published.
    pub events: Vec<SdamEvent>,
    /// Servers added to the topology (to be checked).
    pub added: Vec<ServerAddress>,
    /// Servers removed from the topology (their sockets to be closed).
    pub removed: Vec<ServerAddress>,
    /// Whether the new information was used; `false` when it was ignored
    /// (its server is no longer in the topology, its topologyVersion is
    /// older than the current one, or the topology is load balanced).
    // The shell acts on the events and the added and removed servers; the
    // rules' tests check that ignored information changed nothing.
    #[cfg_attr(not(test), allow(dead_code))]
    pub applied: bool,
}

/// The official driver's getters, beside the fields.
impl TopologyDescription {
    /// The topology's type.
    pub fn topology_type(&self) -> TopologyType {
        self.topology_type
    }

    /// The replica set's name, when known or required.
    pub fn set_name(&self) -> Option<&String> {
        self.set_name.as_ref()
    }

    /// The largest `setVersion` seen from a primary.
    pub fn max_set_version(&self) -> Option<i32> {
        self.max_set_version.and_then(|v| i32::try_from(v).ok())
    }

    /// The largest `electionId` seen from a primary.
    pub fn max_election_id(&self) -> Option<ObjectId> {
        self.max_election_id
    }

    /// Why the deployment is incompatible with this driver, if it is.
    pub fn compatibility_error(&self) -> Option<&String> {
        self.compatibility_error.as_ref()
    }

    /// Every server, by address, as the official driver's view of each.
    pub fn servers(&self) -> std::collections::HashMap<&ServerAddress, ServerInfo<'_>> {
        self.servers
            .iter()
            .map(|(address, description)| (address, ServerInfo::new(description)))
            .collect()
    }

    /// Whether a read with `selection_criteria` (primary when `None`) could
    /// be sent now: server selection's rules (suitability, then the default
    /// 15 ms latency window) leave a server to send it to.
    pub fn has_readable_server(&self, selection_criteria: Option<SelectionCriteria>) -> bool {
        let criteria = selection_criteria.map_or_else(Criteria::primary_read, Criteria::from);
        self.has_selectable_server(&criteria)
    }

    /// Whether a write could be sent now (a primary, a mongos, the single
    /// server or a load balancer is known).
    pub fn has_writable_server(&self) -> bool {
        self.has_selectable_server(&Criteria::Write)
    }

    fn has_selectable_server(&self, criteria: &Criteria) -> bool {
        let settings = SelectionSettings::new(DEFAULT_LOCAL_THRESHOLD, DEFAULT_HEARTBEAT_FREQUENCY);
        selectable_servers(self, criteria, &settings, &[]).is_ok_and(|servers| !servers.is_empty())
    }
}

impl std::fmt::Display for TopologyDescription {
    /// `{ Type: .., Set Name: .., Servers: [ {..}, .. ] }`, as the official
    /// driver prints it: the type, what is known of the replica set, and
    /// each server as its [`ServerInfo`] prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{ Type: {}", self.topology_type)?;
        if let Some(set_name) = &self.set_name {
            write!(f, ", Set Name: {set_name}")?;
        }
        if let Some(max_set_version) = self.max_set_version {
            write!(f, ", Max Set Version: {max_set_version}")?;
        }
        if let Some(max_election_id) = self.max_election_id {
            write!(f, ", Max Election ID: {max_election_id}")?;
        }
        if let Some(compatibility_error) = &self.compatibility_error {
            write!(f, ", Compatibility Error: {compatibility_error}")?;
        }
        if !self.servers.is_empty() {
            let servers: Vec<String> = self
                .servers
                .values()
                .map(|s| ServerInfo::new(s).to_string())
                .collect();
            write!(f, ", Servers: [ {} ]", servers.join(", "))?;
        }
        write!(f, " }}")
    }
}

impl TopologyDescription {
    /// The initial description for `settings`, per "Initial TopologyType":
    /// load balanced, else `directConnection=true` gives Single, else a
    /// replica set name gives ReplicaSetNoPrimary, else Unknown. Every seed
    /// starts Unknown, except in load-balanced mode, where the one server
    /// is a LoadBalancer from the start and stays one. The description
    /// starts `stale`: nothing has been checked yet. Its id is the default
    /// until [`TopologyDescription::with_id`] gives one.
    pub(crate) fn new(settings: TopologySettings) -> Self {
        let topology_type = if settings.load_balanced {
            TopologyType::LoadBalanced
        } else if settings.direct_connection == Some(true) {
            TopologyType::Single
        } else if settings.replica_set.is_some() {
            TopologyType::ReplicaSetNoPrimary
        } else {
            TopologyType::Unknown
        };
        let mut description = TopologyDescription {
            topology_type,
            set_name: settings.replica_set.clone(),
            max_set_version: None,
            max_election_id: None,
            servers: Default::default(),
            compatibility_error: None,
            logical_session_timeout_minutes: None,
            stale: true,
            id: TopologyId::default(),
            settings,
            server_states: Default::default(),
            removed: Default::default(),
        };
        for seed in description.settings.seeds.clone() {
            let mut server = ServerDescription::unknown(seed.clone());
            if topology_type == TopologyType::LoadBalanced {
                server.server_type = ServerType::LoadBalancer;
            }
            description.servers.insert(seed.clone(), server);
            description
                .server_states
                .insert(seed, ServerState::default());
        }
        description
    }

    /// This description under the id `id` (handed out by the shell, one
    /// per topology; [`TopologyDescription::new`] leaves the default, 0).
    pub(crate) fn with_id(mut self, id: TopologyId) -> Self {
        self.id = id;
        self
    }

    /// The events of the topology's creation, in the order the spec's
    /// monitoring tests expect: TopologyOpening, the change from an empty
    /// Unknown topology, a ServerOpening per seed (and, load balanced, the
    /// server becoming a LoadBalancer and the topology changing again).
    /// Without change events ([`TopologySettings::without_change_events`]):
    /// TopologyOpening and the ServerOpenings only.
    pub(crate) fn opening_events(&self) -> Vec<SdamEvent> {
        let topology_id = self.id;
        let mut events = vec![SdamEvent::TopologyOpening { topology_id }];
        if self.settings.without_change_events {
            events.extend(self.servers.keys().map(|address| SdamEvent::ServerOpening {
                topology_id,
                address: address.clone(),
            }));
            return events;
        }
        let empty = self.empty_copy();
        if self.topology_type == TopologyType::LoadBalanced {
            let mut with_unknown = self.clone();
            for server in with_unknown.servers.values_mut() {
                server.server_type = ServerType::Unknown;
            }
            events.push(SdamEvent::TopologyDescriptionChanged {
                topology_id,
                previous: Box::new(empty),
                new: Box::new(with_unknown.clone()),
            });
            for (address, server) in &self.servers {
                events.push(SdamEvent::ServerOpening {
                    topology_id,
                    address: address.clone(),
                });
                events.push(SdamEvent::ServerDescriptionChanged {
                    topology_id,
                    address: address.clone(),
                    previous: Box::new(ServerDescription::unknown(address.clone())),
                    new: Box::new(server.clone()),
                });
            }
            events.push(SdamEvent::TopologyDescriptionChanged {
                topology_id,
                previous: Box::new(with_unknown),
                new: Box::new(self.clone()),
            });
        } else {
            events.push(SdamEvent::TopologyDescriptionChanged {
                topology_id,
                previous: Box::new(empty),
                new: Box::new(self.clone()),
            });
            events.extend(self.servers.keys().map(|address| SdamEvent::ServerOpening {
                topology_id,
                address: address.clone(),
            }));
        }
        events
    }

    /// Whether every server's wire versions overlap the driver's (the
    /// spec's `compatible`).
    pub fn is_compatible(&self) -> bool {
        self.compatibility_error.is_none()
    }

    /// The socket generation of `address`, `None` if it is not in the
    /// topology.
    pub(crate) fn pool_generation(&self, address: &ServerAddress) -> Option<u32> {
        self.server_states.get(address).map(|s| s.pool_generation)
    }

    /// Whether the shell should keep polling the SRV record for new hosts
    /// (the SRV polling spec: only for `mongodb+srv` seeds while the
    /// topology is Unknown or Sharded, never load balanced).
    pub(crate) fn polls_srv(&self) -> bool {
        self.settings.seeds_from_srv
            && matches!(
                self.topology_type,
                TopologyType::Unknown | TopologyType::Sharded
            )
    }

    /// Whether `address` is in the topology.
    pub fn contains(&self, address: &ServerAddress) -> bool {
        self.servers.contains_key(address)
    }

    /// The spec's equality of topology descriptions, which decides whether
    /// a TopologyDescriptionChanged event is due: type, set name,
    /// (electionId, setVersion), compatibility, session timeout and each
    /// server by [`ServerDescription::semantically_equal`].
    pub(crate) fn semantically_equal(&self, other: &TopologyDescription) -> bool {
        self.topology_type == other.topology_type
            && self.set_name == other.set_name
            && self.max_set_version == other.max_set_version
            && self.max_election_id == other.max_election_id
            && self.compatibility_error == other.compatibility_error
            && self.logical_session_timeout_minutes == other.logical_session_timeout_minutes
            && self.servers.len() == other.servers.len()
            // Both maps are in address order: walk them side by side rather
            // than look each address up.
            && self
                .servers
                .iter()
                .zip(&other.servers)
                .all(|((address, server), (other_address, other_server))| {
                    address == other_address && server.semantically_equal(other_server)
                })
    }

    /// A successful check of `address`: adds `rtt` to the server's
    /// round-trip-time samples, describes the server from `reply` and
    /// applies the description.
    pub(crate) fn check_succeeded(
        &mut self,
        address: &ServerAddress,
        reply: &Document,
        rtt: Duration,
        now: Instant,
    ) -> TopologyUpdate {
        let Some(state) = self.server_states.get_mut(address) else {
            return TopologyUpdate::default();
        };
        state.round_trip_time.add_sample(rtt);
        let description =
            ServerDescription::from_hello(address.clone(), reply, &state.round_trip_time, now);
        self.apply(description)
    }

    /// A failed check of `address`: the socket is gone (its generation
    /// grows), the round-trip time starts over, and the server becomes
    /// Unknown with `error`.
    pub(crate) fn check_failed(
        &mut self,
        address: &ServerAddress,
        error: Error,
        now: Instant,
    ) -> TopologyUpdate {
        let Some(state) = self.server_states.get_mut(address) else {
            return TopologyUpdate::default();
        };
        state.pool_generation += 1;
        let mut description = ServerDescription::from_error(address.clone(), error, None);
        description.last_update_time = Some(now);
        self.apply(description)
    }

    /// Applies a new description of one server: the SDAM update rules.
    ///
    /// Ignored (nothing changes, `applied` is false) when the server is not
    /// in the topology any more, when its topologyVersion is older than the
    /// current description's, or in load-balanced mode. Otherwise the
    /// description replaces the old one — even if equal, to keep the RTT and
    /// update time fresh — and the topology type's rules run.
    pub(crate) fn apply(&mut self, new: ServerDescription) -> TopologyUpdate {
        let address = new.address.clone();
        let Some(current) = self.servers.get(&address) else {
            return TopologyUpdate::default();
        };
        if self.topology_type == TopologyType::LoadBalanced {
            return TopologyUpdate::default();
        }
        if TopologyVersion::compare(
            current.topology_version.as_ref(),
            new.topology_version.as_ref(),
        )
        .is_gt()
        {
            return TopologyUpdate::default();
        }
        let mut new = new;
        self.share_member_lists(&mut new);
        let before = self.before_change();
        self.update_with(new);
        self.update_compatibility();
        self.update_logical_session_timeout();
        self.diff_from(before, Some(&address))
    }

    /// The SRV polling spec's new mongos list: servers missing from
    /// `hosts` leave, new ones join as Unknown, and the others stay as
    /// they are (never removed and re-added).
    pub(crate) fn set_srv_hosts(&mut self, hosts: &[ServerAddress]) -> TopologyUpdate {
        let before = self.before_change();
        let gone: Vec<ServerAddress> = self
            .servers
            .keys()
            .filter(|address| !hosts.contains(address))
            .cloned()
            .collect();
        for address in &gone {
            self.remove(address);
        }
        for address in hosts {
            if !self.servers.contains_key(address) {
                self.servers
                    .insert(address.clone(), ServerDescription::unknown(address.clone()));
                self.server_states
                    .insert(address.clone(), ServerState::default());
            }
        }
        self.update_compatibility();
        self.update_logical_session_timeout();
        self.diff_from(before, None)
    }

    /// Removes every server and makes the topology Unknown (the spec's
    /// client closing), returning ServerClosed for each server, the
    /// topology change, and TopologyClosed last.
    pub(crate) fn close(&mut self) -> TopologyUpdate {
        let before = self.before_change();
        self.servers.clear();
        self.server_states.clear();
        self.topology_type = TopologyType::Unknown;
        self.update_compatibility();
        self.update_logical_session_timeout();
        let mut update = self.diff_from(before, None);
        update.events.push(SdamEvent::TopologyClosed {
            topology_id: self.id,
        });
        update
    }

    /// Members of a replica set list the same hosts: keeping one copy of
    /// an equal list (the server's own previous one, or the primary's)
    /// keeps the description's size linear in the member count rather than
    /// quadratic, and makes later comparisons of the lists a pointer check.
    fn share_member_lists(&self, new: &mut ServerDescription) {
        let own = self.servers.get(&new.address);
        let primary = self
            .servers
            .values()
            .find(|s| s.server_type == ServerType::RsPrimary);
        let known: Vec<&ServerDescription> = own.into_iter().chain(primary).collect();
        share_list(&mut new.hosts, known.iter().map(|s| &s.hosts));
        share_list(&mut new.passives, known.iter().map(|s| &s.passives));
        share_list(&mut new.arbiters, known.iter().map(|s| &s.arbiters));
    }

    fn empty_copy(&self) -> TopologyDescription {
        TopologyDescription {
            topology_type: TopologyType::Unknown,
            set_name: None,
            max_set_version: None,
            max_election_id: None,
            servers: Default::default(),
            compatibility_error: None,
            logical_session_timeout_minutes: None,
            stale: true,
            id: self.id,
            settings: self.settings.clone(),
            server_states: Default::default(),
            removed: Default::default(),
        }
    }

    /// The TopologyType table.
    fn update_with(&mut self, new: ServerDescription) {
        let address = new.address.clone();
        let server_type = new.server_type;
        if self.topology_type == TopologyType::Single {
            self.update_single(new);
            return;
        }
        if matches!(
            server_type,
            ServerType::Unknown | ServerType::PossiblePrimary
        ) {
            if let Some(state) = self.server_states.get_mut(&address) {
                // The spec: a server that becomes Unknown loses its RTT, and
                // the next successful check starts it from scratch.
                state.round_trip_time.reset();
            }
        }
        match self.topology_type {
            TopologyType::Unknown => self.update_unknown_topology(new),
            TopologyType::Sharded => match server_type {
                ServerType::Unknown | ServerType::PossiblePrimary | ServerType::Mongos => {
                    self.servers.insert(address, new);
                }
                _ => self.remove(&address),
            },
            TopologyType::ReplicaSetNoPrimary => match server_type {
                ServerType::Standalone | ServerType::Mongos => {
                    self.remove_because(&address, not_a_member(server_type, &self.set_name))
                }
                ServerType::RsPrimary => {
                    self.servers.insert(address, new.clone());
                    self.topology_type = TopologyType::ReplicaSetWithPrimary;
                    self.update_rs_from_primary(&new);
                }
                ServerType::RsSecondary | ServerType::RsArbiter | ServerType::RsOther => {
                    self.servers.insert(address, new.clone());
                    self.update_rs_without_primary(&new);
                }
                _ => {
                    self.servers.insert(address, new);
                }
            },
            TopologyType::ReplicaSetWithPrimary => self.update_rs_with_primary(new),
            // Single is handled above; LoadBalanced never reaches here.
            TopologyType::Single | TopologyType::LoadBalanced => {}
        }
    }

    /// The spec's row for an Unknown topology: the first server to answer
    /// decides what kind of topology this is.
    fn update_unknown_topology(&mut self, new: ServerDescription) {
        let address = new.address.clone();
        let server_type = new.server_type;
        match server_type {
            ServerType::Standalone => {
                self.servers.insert(address.clone(), new);
                self.update_unknown_with_standalone(&address);
            }
            ServerType::Mongos => {
                self.servers.insert(address, new);
                self.topology_type = TopologyType::Sharded;
            }
            ServerType::RsPrimary => {
                self.servers.insert(address, new.clone());
                self.topology_type = TopologyType::ReplicaSetWithPrimary;
                self.update_rs_from_primary(&new);
            }
            ServerType::RsSecondary | ServerType::RsArbiter | ServerType::RsOther => {
                self.servers.insert(address, new.clone());
                self.topology_type = TopologyType::ReplicaSetNoPrimary;
                self.update_rs_without_primary(&new);
            }
            _ => {
                self.servers.insert(address, new);
            }
        }
    }

    /// The spec's row for a replica set with a primary: a non-member is
    /// removed, and any change may cost the set its primary.
    fn update_rs_with_primary(&mut self, new: ServerDescription) {
        let address = new.address.clone();
        let server_type = new.server_type;
        match server_type {
            ServerType::Standalone | ServerType::Mongos => {
                self.remove_because(&address, not_a_member(server_type, &self.set_name));
                self.check_if_has_primary();
            }
            ServerType::RsPrimary => {
                self.servers.insert(address, new.clone());
                self.update_rs_from_primary(&new);
            }
            ServerType::RsSecondary | ServerType::RsArbiter | ServerType::RsOther => {
                self.servers.insert(address, new.clone());
                self.update_rs_with_primary_from_member(&new);
            }
            _ => {
                self.servers.insert(address, new);
                self.check_if_has_primary();
            }
        }
    }

    /// TopologyType Single: the one server is replaced whatever it is,
    /// unless a replica set name was required and the server does not
    /// report it ("Verifying setName with TopologyType Single").
    fn update_single(&mut self, new: ServerDescription) {
        let address = new.address.clone();
        let mut new = new;
        if let Some(expected) = &self.set_name {
            if new.server_type != ServerType::Unknown && new.set_name.as_ref() != Some(expected) {
                let reported = match &new.set_name {
                    Some(name) => format!("replica set name {name:?}"),
                    None => "no replica set name".to_string(),
                };
                // The user's option is what does not match (the official
                // driver's kind too).
                new = ServerDescription::from_error(
                    address.clone(),
                    Error::invalid_argument(format!(
                        "server {address} reports {reported}, but the replicaSet option requires \
                         {expected:?}"
                    )),
                    None,
                );
            }
        }
        if new.server_type == ServerType::Unknown {
            if let Some(state) = self.server_states.get_mut(&address) {
                state.round_trip_time.reset();
            }
        }
        self.servers.insert(address, new);
    }

    fn update_unknown_with_standalone(&mut self, address: &ServerAddress) {
        if self.settings.seeds.len() == 1 {
            self.topology_type = TopologyType::Single;
        } else {
            self.remove(address);
        }
    }

    fn update_rs_without_primary(&mut self, new: &ServerDescription) {
        let address = &new.address;
        if self.set_name.is_none() {
            self.set_name = new.set_name.clone();
        } else if self.set_name != new.set_name {
            self.remove_because(address, self.set_name_mismatch(new));
            return;
        }
        self.add_members(new);
        self.mark_possible_primary(new);
        if new.me.as_ref().is_some_and(|me| me != address) {
            self.remove(address);
        }
    }

    fn update_rs_with_primary_from_member(&mut self, new: &ServerDescription) {
        let address = &new.address;
        if self.set_name != new.set_name {
            self.remove_because(address, self.set_name_mismatch(new));
            self.check_if_has_primary();
            return;
        }
        if new.me.as_ref().is_some_and(|me| me != address) {
            self.remove(address);
            self.check_if_has_primary();
            return;
        }
        if !self.has_primary() {
            // This member had been the primary.
            self.topology_type = TopologyType::ReplicaSetNoPrimary;
            self.mark_possible_primary(new);
        }
    }

    fn update_rs_from_primary(&mut self, new: &ServerDescription) {
        let address = &new.address;
        if self.set_name.is_none() {
            self.set_name = new.set_name.clone();
        } else if self.set_name != new.set_name {
            // A primary of another set than the one required or found.
            self.remove_because(address, self.set_name_mismatch(new));
            self.check_if_has_primary();
            return;
        }

        if self.is_stale_primary(new) {
            self.mark_unknown(address, STALE_PRIMARY_ERROR);
            self.check_if_has_primary();
            return;
        }

        let others: Vec<ServerAddress> = self
            .servers
            .iter()
            .filter(|(a, s)| *a != address && s.server_type == ServerType::RsPrimary)
            .map(|(a, _)| a.clone())
            .collect();
        for old_primary in others {
            self.mark_unknown(&old_primary, NEWER_PRIMARY_ERROR);
        }

        self.add_members(new);
        // A set, not a list: a large replica set's primary names thousands.
        let members: BTreeSet<&ServerAddress> = new.members().collect();
        let not_members: Vec<ServerAddress> = self
            .servers
            .keys()
            .filter(|a| !members.contains(a))
            .cloned()
            .collect();
        for gone in not_members {
            self.remove(&gone);
        }
        self.check_if_has_primary();
    }

    /// Compares the primary's (electionId, setVersion) with the largest seen
    /// and records it when it is not older: electionId first from wire
    /// version 17 (MongoDB 6.0), setVersion first before that.
    fn is_stale_primary(&mut self, new: &ServerDescription) -> bool {
        let election_id = new.election_id;
        let set_version = new.set_version;
        if new.max_wire_version >= ELECTION_ID_FIRST_WIRE_VERSION {
            // `None` orders before any value, as the spec's "null values are
            // always considered less than".
            let election_order = oid_key(election_id).cmp(&oid_key(self.max_election_id));
            if election_order.is_lt() {
                return true;
            }
            if election_order.is_eq() && set_version < self.max_set_version {
                return true;
            }
            self.max_election_id = election_id;
            self.max_set_version = set_version;
            false
        } else {
            if let (Some(sv), Some(eid)) = (set_version, election_id) {
                if let (Some(max_sv), Some(max_eid)) = (self.max_set_version, self.max_election_id)
                {
                    if max_sv > sv || (max_sv == sv && max_eid.bytes() > eid.bytes()) {
                        return true;
                    }
                }
                self.max_election_id = Some(eid);
            }
            if let Some(sv) = set_version {
                if self.max_set_version.is_none_or(|max| sv > max) {
                    self.max_set_version = Some(sv);
                }
            }
            false
        }
    }

    fn add_members(&mut self, new: &ServerDescription) {
        for member in new.members() {
            if !self.servers.contains_key(member) {
                self.servers
                    .insert(member.clone(), ServerDescription::unknown(member.clone()));
                self.server_states
                    .insert(member.clone(), ServerState::default());
            }
        }
    }

    /// The member's `primary` hint, so a single-threaded scan checks the
    /// possible primary first.
    fn mark_possible_primary(&mut self, new: &ServerDescription) {
        if let Some(primary) = &new.primary {
            if let Some(server) = self.servers.get_mut(primary) {
                if server.server_type == ServerType::Unknown {
                    server.server_type = ServerType::PossiblePrimary;
                }
            }
        }
    }

    /// `address` becomes Unknown because another member's reply outdates
    /// it: an invalid response, as the official driver raises it.
    fn mark_unknown(&mut self, address: &ServerAddress, error: &str) {
        self.servers.insert(
            address.clone(),
            ServerDescription::from_error(address.clone(), Error::protocol(None, error), None),
        );
        if let Some(state) = self.server_states.get_mut(address) {
            state.round_trip_time.reset();
        }
    }

    fn has_primary(&self) -> bool {
        self.servers
            .values()
            .any(|s| s.server_type == ServerType::RsPrimary)
    }

    fn check_if_has_primary(&mut self) {
        self.topology_type = if self.has_primary() {
            TopologyType::ReplicaSetWithPrimary
        } else {
            TopologyType::ReplicaSetNoPrimary
        };
    }

    fn remove(&mut self, address: &ServerAddress) {
        self.servers.remove(address);
        self.server_states.remove(address);
    }

    /// Removes a server that answered but does not belong, keeping why.
    fn remove_because(&mut self, address: &ServerAddress, reason: String) {
        self.remove(address);
        self.removed.insert(address.clone(), reason);
    }

    /// Why a member of another replica set (or of none) was removed: it
    /// names both set names.
    fn set_name_mismatch(&self, new: &ServerDescription) -> String {
        let reported = match &new.set_name {
            Some(name) => format!("reports replica set name {name:?}"),
            None => "reports no replica set name".to_string(),
        };
        let expected = self.set_name.as_deref().unwrap_or_default();
        if self.settings.replica_set.is_some() {
            format!("{reported}, but the replicaSet option requires {expected:?}")
        } else {
            format!("{reported}, but the replica set discovered is {expected:?}")
        }
    }

    /// "Checking wire protocol compatibility": the first server (in address
    /// order) whose range does not overlap the driver's names the problem.
    fn update_compatibility(&mut self) {
        self.compatibility_error = self.servers.values().find_map(|server| {
            if matches!(
                server.server_type,
                ServerType::Unknown | ServerType::PossiblePrimary | ServerType::LoadBalancer
            ) {
                return None;
            }
            if server.min_wire_version > MAX_SUPPORTED_WIRE_VERSION {
                Some(format!(
                    "Server at {} requires wire version {}, but this version of {DRIVER_NAME} \
                     only supports up to {MAX_SUPPORTED_WIRE_VERSION}.",
                    server.address, server.min_wire_version
                ))
            } else if server.max_wire_version < MIN_SUPPORTED_WIRE_VERSION {
                Some(format!(
                    "Server at {} reports wire version {}, but this version of {DRIVER_NAME} \
                     requires at least {MIN_SUPPORTED_WIRE_VERSION} (MongoDB \
                     {MIN_SUPPORTED_SERVER_VERSION}).",
                    server.address, server.max_wire_version
                ))
            } else {
                None
            }
        });
    }

    /// The smallest `logicalSessionTimeoutMinutes` of the data-bearing
    /// servers; `None` if one of them lacks it, or there are none.
    fn update_logical_session_timeout(&mut self) {
        let mut minimum: Option<i64> = None;
        for server in self.servers.values() {
            if !server.server_type.is_data_bearing() {
                continue;
            }
            match server.logical_session_timeout_minutes {
                None => {
                    minimum = None;
                    break;
                }
                Some(t) => minimum = Some(minimum.map_or(t, |m| m.min(t))),
            }
        }
        self.logical_session_timeout_minutes = minimum;
    }

    /// What an update will be compared with: the whole description, or
    /// only its members when the change events are left out.
    fn before_change(&self) -> Before {
        if self.settings.without_change_events {
            Before::Members(self.servers.keys().cloned().collect())
        } else {
            Before::Whole(Box::new(self.clone()))
        }
    }

    /// The events from `before` to `self`, in the spec's order: the
    /// checked server's change, changes the rules made to other servers,
    /// servers opened, servers closed, then the topology's change, which
    /// takes the description before rather than a copy of it.
    fn diff_from(&self, before: Before, checked: Option<&ServerAddress>) -> TopologyUpdate {
        let mut update = TopologyUpdate {
            applied: true,
            ..TopologyUpdate::default()
        };
        match before {
            Before::Members(members) => {
                let was_member = |a: &ServerAddress| members.binary_search(a).is_ok();
                self.membership_changes(&mut update, members.iter(), was_member);
            }
            Before::Whole(previous) => {
                self.server_changes(&previous, checked, &mut update.events);
                let was_member = |a: &ServerAddress| previous.servers.contains_key(a);
                self.membership_changes(&mut update, previous.servers.keys(), was_member);
                if !previous.semantically_equal(self) {
                    update.events.push(SdamEvent::TopologyDescriptionChanged {
                        topology_id: self.id,
                        previous,
                        new: Box::new(self.clone()),
                    });
                }
            }
        }
        update
    }

    /// ServerDescriptionChanged for each server that changed since
    /// `previous`, the checked one first.
    fn server_changes(
        &self,
        previous: &TopologyDescription,
        checked: Option<&ServerAddress>,
        events: &mut Vec<SdamEvent>,
    ) {
        let topology_id = self.id;
        let changed = |address: &ServerAddress| -> Option<SdamEvent> {
            let old = previous.servers.get(address)?;
            let new = self.servers.get(address)?;
            if old.semantically_equal(new) {
                return None;
            }
            // A PossiblePrimary hint is not news about the server itself;
            // multi-threaded drivers do not even have the type.
            if Some(address) != checked
                && old.server_type == ServerType::Unknown
                && new.server_type == ServerType::PossiblePrimary
            {
                let mut as_unknown = new.clone();
                as_unknown.server_type = ServerType::Unknown;
                if old.semantically_equal(&as_unknown) {
                    return None;
                }
            }
            Some(SdamEvent::ServerDescriptionChanged {
                topology_id,
                address: address.clone(),
                previous: Box::new(old.clone()),
                new: Box::new(new.clone()),
            })
        };
        if let Some(checked) = checked {
            events.extend(changed(checked));
        }
        for address in self.servers.keys().filter(|a| Some(*a) != checked) {
            events.extend(changed(address));
        }
    }

    /// The servers added (ServerOpening) and removed (ServerClosed) since
    /// the members `previous` were.
    fn membership_changes<'a>(
        &self,
        update: &mut TopologyUpdate,
        previous: impl Iterator<Item = &'a ServerAddress>,
        was_member: impl Fn(&ServerAddress) -> bool,
    ) {
        let topology_id = self.id;
        for address in self.servers.keys() {
            if !was_member(address) {
                update.added.push(address.clone());
                update.events.push(SdamEvent::ServerOpening {
                    topology_id,
                    address: address.clone(),
                });
            }
        }
        for address in previous {
            if !self.servers.contains_key(address) {
                update.removed.push(address.clone());
                update.events.push(SdamEvent::ServerClosed {
                    topology_id,
                    address: address.clone(),
                });
            }
        }
    }
}

/// The topology before an update, as much of it as the update's events need.
enum Before {
    /// All of it: the change events compare with it and carry it.
    Whole(Box<TopologyDescription>),
    /// Its members (in address order): enough for opening and closing.
    Members(Vec<ServerAddress>),
}

/// Replaces `list` by the first of `known` with the same addresses in the
/// same order.
fn share_list<'a>(
    list: &mut Arc<[ServerAddress]>,
    mut known: impl Iterator<Item = &'a Arc<[ServerAddress]>>,
) {
    if list.is_empty() {
        return;
    }
    if let Some(same) = known.find(|k| Arc::ptr_eq(k, list) || k[..] == list[..]) {
        *list = Arc::clone(same);
    }
}

/// An electionId as comparable bytes, `None` first.
fn oid_key(id: Option<ObjectId>) -> Option<[u8; 12]> {
    id.map(|i| i.bytes())
}

/// Why a standalone or mongos was removed from a replica set topology.
fn not_a_member(server_type: ServerType, set_name: &Option<String>) -> String {
    let kind = if server_type == ServerType::Mongos {
        "a mongos"
    } else {
        "a standalone server"
    };
    match set_name {
        Some(name) => format!("is {kind}, not a member of replica set {name:?}"),
        None => format!("is {kind}, not a replica set member"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn addr(s: &str) -> ServerAddress {
        ServerAddress::parse(s).unwrap()
    }

    /// A check's failure as the shell raises it: an I/O error.
    fn refused(message: &str) -> Error {
        Error::network_message(None, message)
    }

    fn seeds(list: &[&str]) -> TopologySettings {
        TopologySettings::new(list.iter().map(|s| addr(s)).collect())
    }

    fn event_names(events: &[SdamEvent]) -> Vec<&'static str> {
        events
            .iter()
            .map(|e| match e {
                SdamEvent::TopologyOpening { .. } => "TopologyOpening",
                SdamEvent::TopologyDescriptionChanged { .. } => "TopologyDescriptionChanged",
                SdamEvent::ServerOpening { .. } => "ServerOpening",
                SdamEvent::ServerDescriptionChanged { .. } => "ServerDescriptionChanged",
                SdamEvent::ServerClosed { .. } => "ServerClosed",
                SdamEvent::TopologyClosed { .. } => "TopologyClosed",
                _ => "other",
            })
            .collect()
    }

    fn primary(hosts: &[&str]) -> Document {
        doc! {"ok": 1, "isWritablePrimary": true, "setName": "rs", "hosts": hosts,
        "minWireVersion": 0, "maxWireVersion": 21}
    }

    fn secondary(hosts: &[&str]) -> Document {
        doc! {"ok": 1, "secondary": true, "setName": "rs", "hosts": hosts,
        "minWireVersion": 0, "maxWireVersion": 21}
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn without_change_events_only_the_description_changes_are_left_out() {
        // The same checks, with and without change events: the same servers
        // added and removed, the same openings and closings, the same end
        // state; only the description changes (and their copies) are gone.
        let now = Instant::now();
        let run = |wanted: bool| {
            let settings = seeds(&["a:1", "x:1"]).with_change_events(wanted);
            let mut t = TopologyDescription::new(settings);
            let mut updates = vec![(Vec::new(), Vec::new(), event_names(&t.opening_events()))];
            let mut record = |update: TopologyUpdate| {
                assert!(update.applied);
                updates.push((update.added, update.removed, event_names(&update.events)));
            };
            record(t.check_succeeded(&addr("a:1"), &primary(&["a:1", "b:1"]), ms(1), now));
            record(t.check_succeeded(&addr("b:1"), &secondary(&["a:1", "b:1"]), ms(1), now));
            record(t.check_failed(&addr("a:1"), refused("gone"), now));
            record(t.close());
            (updates, t)
        };
        let (heard, heard_topology) = run(true);
        let (quiet, quiet_topology) = run(false);
        let is_change = |name: &&str| name.ends_with("DescriptionChanged");
        assert!(heard
            .iter()
            .any(|(_, _, names)| names.iter().any(is_change)));
        assert_eq!(heard.len(), quiet.len());
        for ((added, removed, names), (quiet_added, quiet_removed, quiet_names)) in
            heard.iter().zip(&quiet)
        {
            assert_eq!(added, quiet_added);
            assert_eq!(removed, quiet_removed);
            let without: Vec<&str> = names.iter().copied().filter(|n| !is_change(n)).collect();
            assert_eq!(
                quiet_names, &without,
                "a listener-less update built {quiet_names:?}"
            );
        }
        assert!(heard[1].0.contains(&addr("b:1")) && heard[1].1.contains(&addr("x:1")));
        assert_eq!(heard_topology.topology_type, quiet_topology.topology_type);
        assert!(quiet_topology.servers.is_empty());
    }

    #[test]
    fn the_official_views_follow_the_servers_known() {
        use crate::proto::read_preference::ReadPreference;
        let mut t = TopologyDescription::new(seeds(&["a:1", "b:1"]));
        let secondary_read = || {
            Some(SelectionCriteria::ReadPreference(
                ReadPreference::Secondary { options: None },
            ))
        };
        assert!(!t.has_writable_server() && !t.has_readable_server(None));
        let now = Instant::now();
        let _ = t.check_succeeded(&addr("b:1"), &secondary(&["a:1", "b:1"]), ms(1), now);
        assert!(!t.has_writable_server() && !t.has_readable_server(None));
        assert!(t.has_readable_server(secondary_read()));
        let _ = t.check_succeeded(&addr("a:1"), &primary(&["a:1", "b:1"]), ms(1), now);
        assert!(t.has_writable_server() && t.has_readable_server(None));

        let servers = t.servers();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[&addr("a:1")].server_type(), ServerType::RsPrimary);
        let printed = t.to_string();
        assert!(
            printed.starts_with("{ Type: ReplicaSetWithPrimary, Set Name: rs")
                && printed.contains("Servers: [ { Address: a:1, Type: RsPrimary }"),
            "{printed}"
        );
    }

    #[test]
    fn members_naming_the_same_hosts_share_one_list() {
        let mut t = TopologyDescription::new(seeds(&["a:1"]));
        let now = Instant::now();
        let _ = t.check_succeeded(&addr("a:1"), &primary(&["a:1", "b:1", "c:1"]), ms(1), now);
        let _ = t.check_succeeded(&addr("b:1"), &secondary(&["a:1", "b:1", "c:1"]), ms(1), now);
        // Another order is another list (kept as reported), still equal as a set.
        let _ = t.check_succeeded(&addr("c:1"), &secondary(&["c:1", "b:1", "a:1"]), ms(1), now);
        let hosts = |t: &TopologyDescription, a: &str| t.servers[&addr(a)].hosts.clone();
        assert!(Arc::ptr_eq(&hosts(&t, "a:1"), &hosts(&t, "b:1")));
        assert!(!Arc::ptr_eq(&hosts(&t, "a:1"), &hosts(&t, "c:1")));
        assert_eq!(
            hosts(&t, "c:1")[..],
            [addr("c:1"), addr("b:1"), addr("a:1")]
        );
        // A later check with the same list keeps the one already held.
        let before = hosts(&t, "c:1");
        let _ = t.check_succeeded(&addr("c:1"), &secondary(&["c:1", "b:1", "a:1"]), ms(1), now);
        assert!(Arc::ptr_eq(&before, &hosts(&t, "c:1")));
    }

    #[test]
    fn initial_topology_type_follows_the_options() {
        let one = seeds(&["a"]);
        let cases = [
            (one.clone(), TopologyType::Unknown),
            (
                one.clone().with_direct_connection(true),
                TopologyType::Single,
            ),
            (
                one.clone()
                    .with_direct_connection(true)
                    .with_replica_set("rs"),
                TopologyType::Single,
            ),
            (
                one.clone().with_direct_connection(false),
                TopologyType::Unknown,
            ),
            (
                one.clone().with_replica_set("rs"),
                TopologyType::ReplicaSetNoPrimary,
            ),
            // One host from SRV still starts Unknown.
            (one.clone().with_seeds_from_srv(true), TopologyType::Unknown),
            (one.with_load_balanced(true), TopologyType::LoadBalanced),
        ];
        for (settings, expected) in cases {
            let topology = TopologyDescription::new(settings.clone());
            assert_eq!(topology.topology_type, expected, "{settings:?}");
            assert_eq!(topology.set_name, settings.replica_set);
            assert!(topology.stale, "a new topology must be scanned first");
        }
    }

    #[test]
    fn load_balanced_topology_opens_with_the_spec_events_and_never_changes() {
        let mut topology = TopologyDescription::new(seeds(&["lb"]).with_load_balanced(true));
        let events = topology.opening_events();
        assert_eq!(
            event_names(&events),
            [
                "TopologyOpening",
                "TopologyDescriptionChanged",
                "ServerOpening",
                "ServerDescriptionChanged",
                "TopologyDescriptionChanged"
            ]
        );
        match &events[1] {
            SdamEvent::TopologyDescriptionChanged { previous, new, .. } => {
                assert!(previous.servers.is_empty());
                assert_eq!(new.topology_type, TopologyType::LoadBalanced);
                assert_eq!(new.servers[&addr("lb")].server_type, ServerType::Unknown);
            }
            other => panic!("unexpected {other:?}"),
        }
        match &events[3] {
            SdamEvent::ServerDescriptionChanged { previous, new, .. } => {
                assert_eq!(previous.server_type, ServerType::Unknown);
                assert_eq!(new.server_type, ServerType::LoadBalancer);
            }
            other => panic!("unexpected {other:?}"),
        }
        let update = topology.check_succeeded(&addr("lb"), &doc! {"ok": 1}, ms(1), Instant::now());
        assert!(!update.applied && update.events.is_empty());
        assert_eq!(
            topology.servers[&addr("lb")].server_type,
            ServerType::LoadBalancer
        );
        assert!(topology.is_compatible());
    }

    #[test]
    fn rtt_is_smoothed_across_known_types_and_reset_by_unknown() {
        let a = addr("a");
        let now = Instant::now();
        let mut topology = TopologyDescription::new(seeds(&["a", "b"]).with_replica_set("rs"));
        let _ = topology.check_succeeded(&a, &primary(&["a", "b"]), ms(10), now);
        let _ = topology.check_succeeded(&a, &secondary(&["a", "b"]), ms(20), now);
        let server = &topology.servers[&a];
        assert_eq!(server.server_type, ServerType::RsSecondary);
        assert_eq!(server.round_trip_time, Some(ms(12)));
        assert_eq!(server.min_round_trip_time, Some(ms(10)));

        let update = topology.check_failed(&a, refused("connection refused"), now);
        assert!(update.applied);
        let server = &topology.servers[&a];
        assert_eq!(server.server_type, ServerType::Unknown);
        assert_eq!(server.round_trip_time, None);
        let error = server.error.as_ref().unwrap();
        assert!(error.is_network_error());
        assert!(error.to_string().ends_with("connection refused"));
        assert_eq!(topology.pool_generation(&a), Some(1));

        let _ = topology.check_succeeded(&a, &secondary(&["a", "b"]), ms(50), now);
        assert_eq!(topology.servers[&a].round_trip_time, Some(ms(50)));
    }

    #[test]
    fn older_topology_version_is_ignored() {
        let a = addr("a");
        let now = Instant::now();
        let pid = ObjectId::from_bytes([1; 12]);
        let mut topology = TopologyDescription::new(seeds(&["a"]).with_replica_set("rs"));
        let mut reply = primary(&["a"]);
        reply.insert("topologyVersion", doc! {"processId": pid, "counter": 5_i64});
        let _ = topology.check_succeeded(&a, &reply, ms(1), now);
        let mut older = secondary(&["a"]);
        older.insert("topologyVersion", doc! {"processId": pid, "counter": 4_i64});
        let update = topology.check_succeeded(&a, &older, ms(1), now);
        assert!(!update.applied);
        assert_eq!(topology.servers[&a].server_type, ServerType::RsPrimary);
        assert_eq!(topology.topology_type, TopologyType::ReplicaSetWithPrimary);
    }

    #[test]
    fn update_lists_added_and_removed_servers_with_their_events() {
        let now = Instant::now();
        let mut topology = TopologyDescription::new(seeds(&["a", "b"]).with_replica_set("rs"));
        let update = topology.check_succeeded(&addr("a"), &primary(&["a", "c"]), ms(1), now);
        assert_eq!(update.added, vec![addr("c")]);
        assert_eq!(update.removed, vec![addr("b")]);
        assert_eq!(
            event_names(&update.events),
            [
                "ServerDescriptionChanged",
                "ServerOpening",
                "ServerClosed",
                "TopologyDescriptionChanged"
            ]
        );
        assert_eq!(topology.pool_generation(&addr("c")), Some(0));
        assert_eq!(topology.pool_generation(&addr("b")), None);
    }

    #[test]
    fn invalidated_primary_gets_its_own_change_event() {
        let now = Instant::now();
        let mut topology = TopologyDescription::new(seeds(&["a", "b"]).with_replica_set("rs"));
        let _ = topology.check_succeeded(&addr("a"), &primary(&["a", "b"]), ms(1), now);
        let update = topology.check_succeeded(&addr("b"), &primary(&["a", "b"]), ms(1), now);
        let changed: Vec<&ServerAddress> = update
            .events
            .iter()
            .filter_map(|e| match e {
                SdamEvent::ServerDescriptionChanged { address, .. } => Some(address),
                _ => None,
            })
            .collect();
        assert_eq!(changed, [&addr("b"), &addr("a")]);
        assert_eq!(
            topology.servers[&addr("a")]
                .error
                .as_ref()
                .map(|e| matches!(&*e.kind, crate::error::ErrorKind::InvalidResponse { message } if message == NEWER_PRIMARY_ERROR)),
            Some(true)
        );
    }

    #[test]
    fn close_removes_every_server_and_ends_with_topology_closed() {
        let mut topology = TopologyDescription::new(seeds(&["a", "b"]));
        let update = topology.close();
        assert_eq!(
            event_names(&update.events),
            [
                "ServerClosed",
                "ServerClosed",
                "TopologyDescriptionChanged",
                "TopologyClosed"
            ]
        );
        assert_eq!(update.removed, vec![addr("a"), addr("b")]);
        assert!(topology.servers.is_empty());
        assert_eq!(topology.topology_type, TopologyType::Unknown);
    }

    #[test]
    fn compatibility_errors_use_the_spec_wording() {
        let now = Instant::now();
        let mut topology = TopologyDescription::new(seeds(&["a"]));
        let _ = topology.check_succeeded(
            &addr("a"),
            &doc! {"ok": 1, "minWireVersion": 0, "maxWireVersion": 6},
            ms(1),
            now,
        );
        assert_eq!(
            topology.compatibility_error.as_deref(),
            Some(
                "Server at a:27017 reports wire version 6, but this version of mongo-inline \
                 requires at least 8 (MongoDB 4.2)."
            )
        );
        let _ = topology.check_succeeded(
            &addr("a"),
            &doc! {"ok": 1, "minWireVersion": 99, "maxWireVersion": 100},
            ms(1),
            now,
        );
        assert_eq!(
            topology.compatibility_error.as_deref(),
            Some(
                "Server at a:27017 requires wire version 99, but this version of mongo-inline \
                 only supports up to 25."
            )
        );
        let _ = topology.check_failed(&addr("a"), refused("down"), now);
        assert!(topology.is_compatible(), "Unknown servers are not judged");
    }

    #[test]
    fn srv_polling_only_while_unknown_or_sharded() {
        let now = Instant::now();
        let mut topology = TopologyDescription::new(seeds(&["a", "b"]).with_seeds_from_srv(true));
        assert!(topology.polls_srv());
        let _ = topology.check_succeeded(&addr("a"), &primary(&["a", "b"]), ms(1), now);
        assert!(!topology.polls_srv());
        assert!(!TopologyDescription::new(seeds(&["a"])).polls_srv());
    }
}
