//! Reading the server-selection and max-staleness spec files into our
//! types, and checking one case against `proto::select`. The monitor's
//! runner (`proto::monitor::spec_tests`) uses the readers too.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::files::{self as spec, Report};
use crate::proto::address::ServerAddress;
use crate::proto::options::DEFAULT_HEARTBEAT_FREQUENCY;
use crate::proto::read_preference::{ReadPreference, ReadPreferenceMode, TagSet};
use crate::proto::sdam::{ServerDescription, ServerType, TopologyDescription, TopologyType};
use crate::proto::select::{self, Criteria, SelectionSettings};
use bson::{Bson, Document};

/// The localThresholdMS every spec file assumes.
pub const LOCAL_THRESHOLD: Duration = Duration::from_millis(15);

fn number(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

fn int(doc: &Document, key: &str) -> Result<Option<i64>, String> {
    match doc.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(v) => number(v)
            .map(|n| Some(n as i64))
            .ok_or_else(|| format!("{key} is not a number: {v}")),
    }
}

pub fn server_type(name: &str) -> Result<ServerType, String> {
    let all = [
        ServerType::Unknown,
        ServerType::Standalone,
        ServerType::Mongos,
        ServerType::PossiblePrimary,
        ServerType::RsPrimary,
        ServerType::RsSecondary,
        ServerType::RsArbiter,
        ServerType::RsOther,
        ServerType::RsGhost,
        ServerType::LoadBalancer,
    ];
    all.into_iter()
        .find(|t| t.as_str() == name)
        .ok_or_else(|| format!("unknown server type {name:?}"))
}

pub fn topology_type(name: &str) -> Result<TopologyType, String> {
    let all = [
        TopologyType::Unknown,
        TopologyType::Single,
        TopologyType::ReplicaSetNoPrimary,
        TopologyType::ReplicaSetWithPrimary,
        TopologyType::Sharded,
        TopologyType::LoadBalanced,
    ];
    all.into_iter()
        .find(|t| t.as_str() == name)
        .ok_or_else(|| format!("unknown topology type {name:?}"))
}

fn address(server: &Document) -> Result<ServerAddress, String> {
    let text = server
        .get_str("address")
        .map_err(|e| format!("server address: {e}"))?;
    ServerAddress::parse(text).map_err(|e| e.to_string())
}

/// One server of a `topology_description`; `lastUpdateTime` (ms) is an
/// offset from `base`.
pub fn server(server: &Document, base: Instant) -> Result<ServerDescription, String> {
    let mut description = ServerDescription::unknown(address(server)?);
    description.server_type =
        server_type(server.get_str("type").map_err(|e| format!("type: {e}"))?)?;
    if let Some(rtt) = server.get("avg_rtt_ms").and_then(number) {
        description.round_trip_time = Some(Duration::from_secs_f64(rtt / 1000.0));
    }
    if let Ok(tags) = server.get_document("tags") {
        let mut set = TagSet::new();
        for (key, value) in tags {
            let value = value
                .as_str()
                .ok_or_else(|| format!("tag {key} is not a string"))?;
            set.insert(key.clone(), value.to_string());
        }
        description.tags = set;
    }
    if let Some(ms) = int(server, "lastUpdateTime")? {
        let offset = u64::try_from(ms).map_err(|_| "negative lastUpdateTime".to_string())?;
        description.last_update_time = Some(base + Duration::from_millis(offset));
    }
    if let Ok(last_write) = server.get_document("lastWrite") {
        description.last_write_date = int(last_write, "lastWriteDate")?;
    }
    if let Some(v) = int(server, "maxWireVersion")? {
        description.max_wire_version = v as i32;
    }
    Ok(description)
}

// `TopologyDescription` is non_exhaustive outside the crate: no struct
// expression here, though clippy asks for one when the crate includes this.
#[allow(clippy::field_reassign_with_default)]
pub fn topology(test: &Document, base: Instant) -> Result<TopologyDescription, String> {
    let td = test
        .get_document("topology_description")
        .map_err(|e| format!("topology_description: {e}"))?;
    let mut topology = TopologyDescription::default();
    topology.topology_type = topology_type(td.get_str("type").map_err(|e| e.to_string())?)?;
    for s in td.get_array("servers").map_err(|e| e.to_string())? {
        let s = s.as_document().ok_or("server is not a document")?;
        let description = server(s, base)?;
        topology
            .servers
            .insert(description.address.clone(), description);
    }
    Ok(topology)
}

/// The start of the error [`read_preference`] gives for a read preference
/// the rules refuse before any selection (mode primary with max staleness):
/// what a case that expects an error may fail with.
pub const INVALID_READ_PREFERENCE: &str = "invalid read preference";

/// Whether a case that expects an error got it while its criteria were
/// built (so it never reached selection).
pub fn refused_early(test: &Document) -> bool {
    test.get_bool("error").unwrap_or(false)
        && criteria(test).is_err_and(|e| e.starts_with(INVALID_READ_PREFERENCE))
}

pub fn read_preference(doc: &Document) -> Result<ReadPreference, String> {
    let mode = ReadPreferenceMode::parse(doc.get_str("mode").unwrap_or("primary"))
        .map_err(|e| e.to_string())?;
    let mut tag_sets = Vec::new();
    if let Ok(sets) = doc.get_array("tag_sets") {
        for set in sets {
            let set = set.as_document().ok_or("tag set is not a document")?;
            let mut tags = TagSet::new();
            for (k, v) in set {
                tags.insert(k.clone(), v.as_str().ok_or("tag is not a string")?.into());
            }
            tag_sets.push(tags);
        }
    }
    // -1 (or absent) means "no maximum".
    let max_staleness = int(doc, "maxStalenessSeconds")?
        .and_then(|seconds| u64::try_from(seconds).ok())
        .map(Duration::from_secs);
    ReadPreference::from_parts(mode, tag_sets, max_staleness, None)
        .map_err(|e| format!("{INVALID_READ_PREFERENCE}: {e}"))
}

pub fn criteria(test: &Document) -> Result<Criteria, String> {
    let rp = match test.get_document("read_preference") {
        Ok(d) => read_preference(d)?,
        Err(_) => ReadPreference::primary(),
    };
    match test.get_str("operation").unwrap_or("read") {
        "read" => Ok(Criteria::ReadPreference(rp)),
        "write" => Ok(Criteria::Write),
        other => Err(format!("unknown operation {other:?}")),
    }
}

pub fn addresses(test: &Document, key: &str) -> Result<BTreeSet<String>, String> {
    let list = match test.get_array(key) {
        Ok(list) => list,
        Err(_) => return Ok(BTreeSet::new()),
    };
    list.iter()
        .map(|s| {
            let s = s.as_document().ok_or("server is not a document")?;
            Ok(address(s)?.to_string())
        })
        .collect()
}

/// The file's heartbeatFrequencyMS, else the default.
pub fn heartbeat(test: &Document) -> Result<Duration, String> {
    Ok(match int(test, "heartbeatFrequencyMS")? {
        Some(ms) => Duration::from_millis(ms as u64),
        None => DEFAULT_HEARTBEAT_FREQUENCY,
    })
}

/// The file's `deprioritized_servers` (absent: none).
pub fn deprioritized(test: &Document) -> Result<Vec<ServerAddress>, String> {
    addresses(test, "deprioritized_servers")?
        .iter()
        .map(|a| ServerAddress::parse(a).map_err(|e| e.to_string()))
        .collect()
}

/// How many picks an in_window file needs and how far each server's share
/// may stray from 1/n. The file's tolerance (0 for its deterministic
/// outcomes) gets room for a uniform random pick, at least 0.05, and the
/// file's count enough draws for it to hold.
pub fn in_window_draws(test: &Document) -> Result<(usize, f64), String> {
    let outcome = test.get_document("outcome").map_err(|e| e.to_string())?;
    let tolerance = outcome
        .get("tolerance")
        .and_then(number)
        .ok_or_else(|| format!("tolerance is not a number: {:?}", outcome.get("tolerance")))?;
    let iterations = int(test, "iterations")?.ok_or("iterations missing")?;
    Ok(((iterations as usize).max(2000), tolerance.max(0.05)))
}

/// Runs `check` (named `check_name` in the report) on every in_window file
/// and skips the file's `expected_frequencies`: they describe the
/// multi-threaded drivers' "power of two choices" by operationCount, where
/// single-threaded selection picks uniformly inside the window.
pub fn run_in_window(
    report_name: &str,
    check_name: &str,
    check: impl Fn(&Document) -> Result<(), String>,
) {
    let Some(dir) = spec::dir("server-selection/tests/in_window") else {
        return;
    };
    let mut report = Report::new(report_name);
    for path in spec::json_files(&dir) {
        let file = spec::name(&path);
        let test = spec::load(&path);
        report.run(&file, check_name, || check(&test));
        report.skip(
            &file,
            "expected_frequencies",
            "frequencies assume operationCount-based selection (multi-threaded drivers); \
             single-threaded selection picks uniformly at random inside the window, checked instead",
        );
    }
    report.finish();
}

/// Each server of `all` was picked (`counts`) with a share within
/// `tolerance` of 1/n.
pub fn check_uniform(
    counts: &BTreeMap<String, usize>,
    all: &BTreeSet<String>,
    tolerance: f64,
) -> Result<(), String> {
    let draws: usize = counts.values().sum();
    let share = 1.0 / all.len() as f64;
    for address in all {
        let frequency = counts.get(address).copied().unwrap_or(0) as f64 / draws as f64;
        if (frequency - share).abs() > tolerance {
            return Err(format!(
                "{address} picked with frequency {frequency:.3}, expected {share:.3} ± {tolerance}"
            ));
        }
    }
    match counts.keys().find(|a| !all.contains(*a)) {
        Some(stray) => Err(format!("{stray} picked, not one of {all:?}")),
        None => Ok(()),
    }
}

fn names(servers: &[&ServerDescription]) -> BTreeSet<String> {
    servers.iter().map(|s| s.address.to_string()).collect()
}

/// Runs one server-selection or max-staleness case: `error: true` must fail,
/// otherwise the suitable servers and the latency window must equal the
/// file's sets, and `select` must pick inside the window.
pub fn run_case(test: &Document) -> Result<(), String> {
    if refused_early(test) {
        return Ok(());
    }
    let base = Instant::now();
    let topology = topology(test, base)?;
    let criteria = criteria(test)?;
    let settings = SelectionSettings::new(LOCAL_THRESHOLD, heartbeat(test)?);
    let deprioritized = deprioritized(test)?;
    let mut rng = fastrand::Rng::with_seed(7);

    if test.get_bool("error").unwrap_or(false) {
        return match select::select(&topology, &criteria, &settings, &deprioritized, &mut rng) {
            Err(_) => Ok(()),
            Ok(picked) => Err(format!("expected an error, selected {picked:?}")),
        };
    }

    let suitable = select::suitable_servers(&topology, &criteria, &settings, &deprioritized)
        .map_err(|e| format!("suitable_servers failed: {e}"))?;
    let expected_suitable = addresses(test, "suitable_servers")?;
    if names(&suitable) != expected_suitable {
        return Err(format!(
            "suitable servers: expected {expected_suitable:?}, got {:?}",
            names(&suitable)
        ));
    }
    let window = select::latency_window(&suitable, settings.local_threshold);
    let expected_window = addresses(test, "in_latency_window")?;
    if names(&window) != expected_window {
        return Err(format!(
            "latency window: expected {expected_window:?}, got {:?}",
            names(&window)
        ));
    }
    for _ in 0..20 {
        let picked = select::select(&topology, &criteria, &settings, &deprioritized, &mut rng)
            .map_err(|e| format!("select failed: {e}"))?;
        match picked {
            None if expected_window.is_empty() => {}
            Some(a) if expected_window.contains(&a.to_string()) => {}
            other => {
                return Err(format!(
                    "select picked {other:?}, outside the window {expected_window:?}"
                ))
            }
        }
    }
    Ok(())
}
