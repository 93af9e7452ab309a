//! Runs the server-selection spec tests: every file of
//! `server-selection/tests/server_selection/<TopologyType>/{read,write}` and
//! of `server-selection/tests/in_window`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use super::files as spec;
use super::selection_fixture::{self, LOCAL_THRESHOLD};
use crate::proto::options::DEFAULT_HEARTBEAT_FREQUENCY;
use crate::proto::read_preference::{ReadPreference, ReadPreferenceMode};
use crate::proto::select::{self, Criteria, SelectionSettings};

const TOPOLOGY_TYPES: [&str; 6] = [
    "LoadBalanced",
    "ReplicaSetNoPrimary",
    "ReplicaSetWithPrimary",
    "Sharded",
    "Single",
    "Unknown",
];

#[test]
fn server_selection() {
    let Some(root) = spec::dir("server-selection/tests/server_selection") else {
        return;
    };
    let mut report = spec::Report::new("server-selection");
    let mut seen_dirs = BTreeSet::new();
    for entry in std::fs::read_dir(&root).expect("list server_selection") {
        seen_dirs.insert(
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    let expected_dirs: BTreeSet<String> = TOPOLOGY_TYPES.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        seen_dirs, expected_dirs,
        "the spec's topology directories changed; update TOPOLOGY_TYPES"
    );
    for topology_type in TOPOLOGY_TYPES {
        for operation in ["read", "write"] {
            let dir = root.join(topology_type).join(operation);
            if !dir.is_dir() {
                continue;
            }
            for path in spec::json_files(&dir) {
                let file = format!("{topology_type}/{operation}/{}", spec::name(&path));
                let test = spec::load(&path);
                report.run(&file, "selection", || selection_fixture::run_case(&test));
            }
        }
    }
    report.finish();
}

/// The in_window files: every server listed is in the latency window, and
/// the pick is uniformly random inside it (each server's share within the
/// file's tolerance of 1/n).
#[test]
fn in_window() {
    selection_fixture::run_in_window(
        "server-selection in_window",
        "window and uniform random pick",
        check_in_window,
    );
}

fn check_in_window(test: &bson::Document) -> Result<(), String> {
    let topology = selection_fixture::topology(test, Instant::now())?;
    let settings = SelectionSettings::new(LOCAL_THRESHOLD, DEFAULT_HEARTBEAT_FREQUENCY);
    let criteria = Criteria::ReadPreference(ReadPreference::with_mode(ReadPreferenceMode::Nearest));
    let window = select::selectable_servers(&topology, &criteria, &settings, &[])
        .map_err(|e| e.to_string())?;
    let in_window: BTreeSet<String> = window.iter().map(|s| s.address.to_string()).collect();
    let all: BTreeSet<String> = topology.servers.keys().map(|a| a.to_string()).collect();
    if in_window != all {
        return Err(format!(
            "window {in_window:?}, expected every server {all:?}"
        ));
    }
    let (iterations, tolerance) = selection_fixture::in_window_draws(test)?;
    let mut rng = fastrand::Rng::with_seed(2024);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..iterations {
        let picked = select::select(&topology, &criteria, &settings, &[], &mut rng)
            .map_err(|e| e.to_string())?
            .ok_or("nothing selected")?;
        *counts.entry(picked.to_string()).or_default() += 1;
    }
    selection_fixture::check_uniform(&counts, &all, tolerance)
}
