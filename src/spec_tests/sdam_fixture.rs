//! The SDAM spec's legacy JSON test files read into our types, and one
//! file run phase by phase against an [`SdamDriver`]: the pure description
//! ([`super::sdam`]) or the monitor (`proto::monitor::spec_tests`).

use std::time::Instant;

use bson::oid::ObjectId;
use bson::{Bson, Document};
use serde::Deserialize;

use crate::proto::address::ServerAddress;
use crate::proto::event::SdamEvent;
use crate::proto::options::ClientOptions;
use crate::proto::sdam::{
    ApplicationError, ApplicationErrorKind, HandshakePhase, ServerDescription, TopologyDescription,
    TopologySettings, TopologyUpdate, TopologyVersion,
};

/// What a spec file's phases act on: each response as a check's result,
/// each applicationError as an operation's error, then the description is
/// compared with the phase's outcome.
pub trait SdamDriver {
    /// The description to compare with the outcome.
    fn description(&self) -> &TopologyDescription;
    /// A check of `address` ended with `reply` at `now`; an empty reply
    /// means the check failed with a network error.
    fn response(
        &mut self,
        address: &ServerAddress,
        reply: &Document,
        now: Instant,
    ) -> TopologyUpdate;
    /// A phase starts at `now` (the monitor may start a scan).
    fn begin_phase(&mut self, _now: Instant) {}
    /// An operation on a server failed as `error` says, at `now`.
    fn application_error(
        &mut self,
        error: &FixtureError,
        now: Instant,
    ) -> Result<TopologyUpdate, String>;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    pub description: String,
    pub uri: String,
    pub phases: Vec<Phase>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub responses: Vec<(String, Document)>,
    #[serde(default, rename = "applicationErrors")]
    pub application_errors: Vec<FixtureError>,
    // Kept as a document: the format tells "absent" (do not check) from
    // "null" (must be unset), which typed fields would blur.
    pub outcome: Document,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FixtureError {
    pub address: String,
    #[serde(default)]
    pub generation: Option<u32>,
    pub max_wire_version: i32,
    pub when: String,
    #[serde(rename = "type")]
    pub error_type: String,
    #[serde(default)]
    pub response: Option<Document>,
}

/// The topology settings a client built from `uri` would have: the real
/// URI parser, then the same conversion the client uses.
pub fn settings_from_uri(uri: &str) -> Result<TopologySettings, String> {
    let options = ClientOptions::parse(uri).run().map_err(|e| e.to_string())?;
    Ok(TopologySettings::from_options(&options))
}

pub fn address(text: &str) -> Result<ServerAddress, String> {
    ServerAddress::parse(text).map_err(|e| format!("bad address {text:?} in fixture: {e}"))
}

/// Runs every phase of `test` on the driver `start` builds from the
/// file's initial description; `clock` gives the instant of each step
/// (virtual time for the monitor). Returns the driver, for what it counted.
pub fn run_file<D: SdamDriver>(
    test: &TestFile,
    start: impl FnOnce(TopologyDescription) -> D,
    mut clock: impl FnMut() -> Instant,
) -> Result<D, String> {
    let topology = TopologyDescription::new(settings_from_uri(&test.uri)?);
    let mut events = topology.opening_events();
    let mut driver = start(topology);
    for (index, phase) in test.phases.iter().enumerate() {
        run_phase(&mut driver, &mut events, phase, &mut clock).map_err(|e| {
            format!(
                "phase {} ({}): {e}",
                index + 1,
                phase.description.as_deref().unwrap_or("no description")
            )
        })?;
    }
    Ok(driver)
}

fn run_phase<D: SdamDriver>(
    driver: &mut D,
    events: &mut Vec<SdamEvent>,
    phase: &Phase,
    clock: &mut impl FnMut() -> Instant,
) -> Result<(), String> {
    driver.begin_phase(clock());
    for (source, reply) in &phase.responses {
        let update = driver.response(&address(source)?, reply, clock());
        events.extend(update.events);
    }
    for fixture in &phase.application_errors {
        let update = driver.application_error(fixture, clock())?;
        events.extend(update.events);
    }
    if let Some(expected) = phase.outcome.get("events") {
        let Bson::Array(expected) = expected else {
            return Err("outcome.events is not an array".into());
        };
        check_events(expected, events)?;
        events.clear();
        Ok(())
    } else {
        check_topology(&phase.outcome, driver.description())
    }
}

/// The SDAM view of `fixture`, built directly (the shell builds it from
/// an operation's error with `ApplicationError::from_error`).
pub fn application_error(
    topology: &TopologyDescription,
    fixture: &FixtureError,
) -> Result<ApplicationError, String> {
    let address = address(&fixture.address)?;
    let kind = match (fixture.error_type.as_str(), &fixture.response) {
        ("network", None) => ApplicationErrorKind::Network {
            message: "connection reset (simulated)".into(),
        },
        ("timeout", None) => ApplicationErrorKind::NetworkTimeout {
            message: "timed out (simulated)".into(),
        },
        ("command", Some(response)) => ApplicationErrorKind::Command {
            code: response.get("code").and_then(as_i64).map(|c| c as i32),
            message: response.get_str("errmsg").unwrap_or_default().to_string(),
            topology_version: response
                .get_document("topologyVersion")
                .ok()
                .and_then(TopologyVersion::from_document),
        },
        (other, response) => {
            return Err(format!(
                "unsupported applicationError type {other:?} (response present: {})",
                response.is_some()
            ))
        }
    };
    Ok(ApplicationError::new(
        address.clone(),
        kind,
        handshake_phase(fixture)?,
        generation(topology, fixture, &address),
        fixture.max_wire_version,
    ))
}

/// The fixture's `when`.
pub fn handshake_phase(fixture: &FixtureError) -> Result<HandshakePhase, String> {
    match fixture.when.as_str() {
        "beforeHandshakeCompletes" => Ok(HandshakePhase::BeforeHandshakeCompletes),
        "afterHandshakeCompletes" => Ok(HandshakePhase::AfterHandshakeCompletes),
        other => Err(format!("unknown applicationError.when {other:?}")),
    }
}

/// The socket generation the operation used; absent means the pool's
/// current one.
pub fn generation(
    topology: &TopologyDescription,
    fixture: &FixtureError,
    address: &ServerAddress,
) -> u32 {
    fixture
        .generation
        .unwrap_or_else(|| topology.pool_generation(address).unwrap_or(0))
}

pub fn as_i64(value: &Bson) -> Option<i64> {
    match value {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(f) => Some(*f as i64),
        _ => None,
    }
}

pub fn expect_keys(doc: &Document, allowed: &[&str], what: &str) -> Result<(), String> {
    match doc.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(format!(
            "{what} has a field the runner does not check: {key:?}"
        )),
        None => Ok(()),
    }
}

pub fn optional_string(value: &Bson, what: &str) -> Result<Option<String>, String> {
    match value {
        Bson::Null => Ok(None),
        Bson::String(s) => Ok(Some(s.clone())),
        other => Err(format!("{what}: expected a string or null, found {other}")),
    }
}

pub fn optional_int(value: &Bson, what: &str) -> Result<Option<i64>, String> {
    match value {
        Bson::Null => Ok(None),
        other => as_i64(other)
            .map(Some)
            .ok_or_else(|| format!("{what}: expected an integer or null, found {other}")),
    }
}

pub fn optional_oid(value: &Bson, what: &str) -> Result<Option<ObjectId>, String> {
    match value {
        Bson::Null => Ok(None),
        Bson::ObjectId(id) => Ok(Some(*id)),
        other => Err(format!(
            "{what}: expected an ObjectId or null, found {other}"
        )),
    }
}

pub fn compare<T: PartialEq + std::fmt::Debug>(
    what: &str,
    expected: T,
    actual: T,
) -> Result<(), String> {
    if expected == actual {
        Ok(())
    } else {
        Err(format!("{what}: expected {expected:?}, got {actual:?}"))
    }
}

pub fn check_topology(outcome: &Document, topology: &TopologyDescription) -> Result<(), String> {
    expect_keys(
        outcome,
        &[
            "topologyType",
            "setName",
            "servers",
            "logicalSessionTimeoutMinutes",
            "maxSetVersion",
            "maxElectionId",
            "compatible",
        ],
        "outcome",
    )?;
    let expected_type = outcome
        .get_str("topologyType")
        .map_err(|_| "outcome.topologyType missing".to_string())?;
    compare(
        "topologyType",
        expected_type,
        topology.topology_type.as_str(),
    )?;
    if let Some(value) = outcome.get("setName") {
        compare(
            "setName",
            optional_string(value, "setName")?,
            topology.set_name.clone(),
        )?;
    }
    if let Some(value) = outcome.get("logicalSessionTimeoutMinutes") {
        compare(
            "logicalSessionTimeoutMinutes",
            optional_int(value, "logicalSessionTimeoutMinutes")?,
            topology.logical_session_timeout_minutes,
        )?;
    }
    if let Some(value) = outcome.get("maxSetVersion") {
        compare(
            "maxSetVersion",
            optional_int(value, "maxSetVersion")?,
            topology.max_set_version,
        )?;
    }
    if let Some(value) = outcome.get("maxElectionId") {
        compare(
            "maxElectionId",
            optional_oid(value, "maxElectionId")?,
            topology.max_election_id,
        )?;
    }
    if let Some(value) = outcome.get("compatible") {
        let expected = value
            .as_bool()
            .ok_or_else(|| "outcome.compatible is not a bool".to_string())?;
        if expected != topology.is_compatible() {
            return Err(format!(
                "compatible: expected {expected}, got {} ({:?})",
                topology.is_compatible(),
                topology.compatibility_error
            ));
        }
    }
    let servers = outcome
        .get_document("servers")
        .map_err(|_| "outcome.servers missing".to_string())?;
    let mut expected_addresses = servers
        .keys()
        .map(|k| address(k))
        .collect::<Result<Vec<_>, _>>()?;
    expected_addresses.sort();
    let actual_addresses: Vec<ServerAddress> = topology.servers.keys().cloned().collect();
    compare("servers", &expected_addresses, &actual_addresses)?;
    for (key, expected) in servers {
        let Bson::Document(expected) = expected else {
            return Err(format!("outcome.servers.{key} is not a document"));
        };
        let address = address(key)?;
        let server = &topology.servers[&address];
        let generation = topology.pool_generation(&address).unwrap_or(0);
        check_server(expected, server, generation).map_err(|e| format!("server {key}: {e}"))?;
    }
    Ok(())
}

pub fn check_server(
    expected: &Document,
    server: &ServerDescription,
    generation: u32,
) -> Result<(), String> {
    expect_keys(
        expected,
        &[
            "type",
            "setName",
            "setVersion",
            "electionId",
            "logicalSessionTimeoutMinutes",
            "minWireVersion",
            "maxWireVersion",
            "topologyVersion",
            "pool",
            "error",
        ],
        "server",
    )?;
    let expected_type = expected
        .get_str("type")
        .map_err(|_| "type missing".to_string())?;
    compare("type", expected_type, server.server_type.as_str())?;
    if let Some(value) = expected.get("setName") {
        compare(
            "setName",
            optional_string(value, "setName")?,
            server.set_name.clone(),
        )?;
    }
    if let Some(value) = expected.get("setVersion") {
        compare(
            "setVersion",
            optional_int(value, "setVersion")?,
            server.set_version,
        )?;
    }
    if let Some(value) = expected.get("electionId") {
        compare(
            "electionId",
            optional_oid(value, "electionId")?,
            server.election_id,
        )?;
    }
    if let Some(value) = expected.get("logicalSessionTimeoutMinutes") {
        compare(
            "logicalSessionTimeoutMinutes",
            optional_int(value, "logicalSessionTimeoutMinutes")?,
            server.logical_session_timeout_minutes,
        )?;
    }
    // The wire versions have no "unset" in our description: null means the
    // spec's default of 0.
    if let Some(value) = expected.get("minWireVersion") {
        compare(
            "minWireVersion",
            optional_int(value, "minWireVersion")?.unwrap_or(0),
            i64::from(server.min_wire_version),
        )?;
    }
    if let Some(value) = expected.get("maxWireVersion") {
        compare(
            "maxWireVersion",
            optional_int(value, "maxWireVersion")?.unwrap_or(0),
            i64::from(server.max_wire_version),
        )?;
    }
    if let Some(value) = expected.get("topologyVersion") {
        let expected_version = match value {
            Bson::Null => None,
            Bson::Document(doc) => Some(
                TopologyVersion::from_document(doc)
                    .ok_or_else(|| format!("malformed expected topologyVersion {doc}"))?,
            ),
            other => return Err(format!("topologyVersion: unexpected {other}")),
        };
        compare("topologyVersion", expected_version, server.topology_version)?;
    }
    if let Some(value) = expected.get("pool") {
        let expected_generation = value
            .as_document()
            .and_then(|p| p.get("generation"))
            .and_then(as_i64)
            .ok_or_else(|| format!("pool: expected {{generation: n}}, found {value}"))?;
        compare(
            "pool.generation",
            expected_generation,
            i64::from(generation),
        )?;
    }
    if let Some(value) = expected.get("error") {
        let expected_error = value
            .as_str()
            .ok_or_else(|| format!("error: expected a string, found {value}"))?;
        let actual = server
            .error
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        if !actual.contains(expected_error) {
            return Err(format!(
                "error: expected one containing {expected_error:?}, got {actual:?}"
            ));
        }
    }
    Ok(())
}

pub fn event_name(event: &SdamEvent) -> &'static str {
    match event {
        SdamEvent::TopologyOpening { .. } => "topology_opening_event",
        SdamEvent::TopologyDescriptionChanged { .. } => "topology_description_changed_event",
        SdamEvent::ServerOpening { .. } => "server_opening_event",
        SdamEvent::ServerDescriptionChanged { .. } => "server_description_changed_event",
        SdamEvent::ServerClosed { .. } => "server_closed_event",
        SdamEvent::TopologyClosed { .. } => "topology_closed_event",
        _ => "other_event",
    }
}

pub fn check_events(expected: &[Bson], actual: &[SdamEvent]) -> Result<(), String> {
    let names: Vec<&str> = actual.iter().map(event_name).collect();
    let expected_names: Vec<&str> = expected
        .iter()
        .filter_map(|e| {
            e.as_document()
                .and_then(|d| d.keys().next())
                .map(String::as_str)
        })
        .collect();
    compare("event sequence", &expected_names, &names)?;
    for (index, (expected, actual)) in expected.iter().zip(actual).enumerate() {
        let (name, body) = expected
            .as_document()
            .and_then(|d| d.iter().next())
            .ok_or_else(|| format!("event {index} is not a one-key document"))?;
        let Bson::Document(body) = body else {
            return Err(format!("event {index} ({name}) has no body"));
        };
        check_event(body, actual).map_err(|e| format!("event {index} ({name}): {e}"))?;
    }
    Ok(())
}

pub fn check_event(expected: &Document, actual: &SdamEvent) -> Result<(), String> {
    // topologyId is "42" in every file: ids are ours to choose, not compared.
    match actual {
        SdamEvent::TopologyOpening { .. } | SdamEvent::TopologyClosed { .. } => {
            expect_keys(expected, &["topologyId"], "event")
        }
        SdamEvent::ServerOpening { address: a, .. }
        | SdamEvent::ServerClosed { address: a, .. } => {
            expect_keys(expected, &["topologyId", "address"], "event")?;
            compare(
                "address",
                Some(address(expected.get_str("address").unwrap_or_default())?),
                Some(a.clone()),
            )
        }
        SdamEvent::ServerDescriptionChanged {
            address: a,
            previous,
            new,
            ..
        } => {
            expect_keys(
                expected,
                &[
                    "topologyId",
                    "address",
                    "previousDescription",
                    "newDescription",
                ],
                "event",
            )?;
            compare(
                "address",
                address(expected.get_str("address").unwrap_or_default())?,
                a.clone(),
            )?;
            check_event_server(doc(expected, "previousDescription")?, previous)
                .map_err(|e| format!("previousDescription: {e}"))?;
            check_event_server(doc(expected, "newDescription")?, new)
                .map_err(|e| format!("newDescription: {e}"))
        }
        SdamEvent::TopologyDescriptionChanged { previous, new, .. } => {
            expect_keys(
                expected,
                &["topologyId", "previousDescription", "newDescription"],
                "event",
            )?;
            check_event_topology(doc(expected, "previousDescription")?, previous)
                .map_err(|e| format!("previousDescription: {e}"))?;
            check_event_topology(doc(expected, "newDescription")?, new)
                .map_err(|e| format!("newDescription: {e}"))
        }
        other => Err(format!("unexpected event {other:?}")),
    }
}

pub fn doc<'a>(parent: &'a Document, key: &str) -> Result<&'a Document, String> {
    parent
        .get_document(key)
        .map_err(|_| format!("{key} missing or not a document"))
}

pub fn address_set(value: Option<&Bson>, what: &str) -> Result<Vec<ServerAddress>, String> {
    let mut list = match value {
        None => Vec::new(),
        Some(Bson::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .ok_or_else(|| format!("{what}: not a string"))
                    .and_then(address)
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => return Err(format!("{what}: expected an array, found {other}")),
    };
    list.sort();
    Ok(list)
}

pub fn sorted(list: &[ServerAddress]) -> Vec<ServerAddress> {
    let mut list = list.to_vec();
    list.sort();
    list
}

/// A server description inside an event: the fields the files list, an
/// absent `primary` or `setName` meaning unset.
pub fn check_event_server(expected: &Document, actual: &ServerDescription) -> Result<(), String> {
    expect_keys(
        expected,
        &[
            "address", "arbiters", "hosts", "passives", "type", "primary", "setName",
        ],
        "event server description",
    )?;
    compare(
        "address",
        address(expected.get_str("address").unwrap_or_default())?,
        actual.address.clone(),
    )?;
    compare(
        "type",
        expected.get_str("type").unwrap_or_default(),
        actual.server_type.as_str(),
    )?;
    compare(
        "hosts",
        address_set(expected.get("hosts"), "hosts")?,
        sorted(&actual.hosts),
    )?;
    compare(
        "passives",
        address_set(expected.get("passives"), "passives")?,
        sorted(&actual.passives),
    )?;
    compare(
        "arbiters",
        address_set(expected.get("arbiters"), "arbiters")?,
        sorted(&actual.arbiters),
    )?;
    let primary = match expected.get_str("primary") {
        Ok(p) => Some(address(p)?),
        Err(_) => None,
    };
    compare("primary", primary, actual.primary.clone())?;
    compare(
        "setName",
        expected.get_str("setName").ok().map(str::to_string),
        actual.set_name.clone(),
    )
}

pub fn check_event_topology(
    expected: &Document,
    actual: &TopologyDescription,
) -> Result<(), String> {
    expect_keys(
        expected,
        &["topologyType", "setName", "servers"],
        "event topology description",
    )?;
    compare(
        "topologyType",
        expected.get_str("topologyType").unwrap_or_default(),
        actual.topology_type.as_str(),
    )?;
    compare(
        "setName",
        expected.get_str("setName").ok().map(str::to_string),
        actual.set_name.clone(),
    )?;
    let servers = expected
        .get_array("servers")
        .map_err(|_| "servers missing".to_string())?;
    let mut expected_servers = Vec::new();
    for server in servers {
        let server = server
            .as_document()
            .ok_or_else(|| "server is not a document".to_string())?;
        expected_servers.push((
            address(server.get_str("address").unwrap_or_default())?,
            server,
        ));
    }
    expected_servers.sort_by(|a, b| a.0.cmp(&b.0));
    let expected_addresses: Vec<&ServerAddress> = expected_servers.iter().map(|(a, _)| a).collect();
    let actual_addresses: Vec<&ServerAddress> = actual.servers.keys().collect();
    compare("servers", expected_addresses, actual_addresses)?;
    for (address, expected) in expected_servers {
        check_event_server(expected, &actual.servers[&address])
            .map_err(|e| format!("server {address}: {e}"))?;
    }
    Ok(())
}
