//! Instructions and hot code per warm `find_one`, from callgrind.
//!
//! CPU time per operation is not proportional to instructions: a process
//! that sleeps in `recvfrom` between operations finds much of its code
//! evicted from the caches when it wakes, so every distinct cache line of
//! code it runs costs a miss. On the 2026-11-24 machine the warm CPU of
//! ours and libmongoc fit `time ≈ 8 ns × cache lines touched + 0.2 ns ×
//! instructions` (README, Performance), which makes the hot code's size as
//! much a figure to watch as the instruction count.
//!
//! Each driver's warm mode runs under `valgrind --tool=callgrind
//! --dump-instr=yes` twice, with 1 and with `1 + OPS` operations.
//! Instructions per operation are the difference of the totals over `OPS`;
//! the hot code is every instruction address the longer run executed at
//! least `OPS` times, counted as distinct 64-byte lines (and 4 KiB pages)
//! per loaded object.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Driver, COLL, DB};

const OPS: u64 = 2000;

/// What one driver's warm `find_one` runs.
pub struct Footprint {
    pub instructions_per_op: u64,
    pub code_lines: usize,
    pub code_pages: usize,
}

/// The footprint of `driver`'s warm `find_one` against `uri`; `None` when
/// valgrind is not installed or a run fails.
pub fn measure(driver: &Driver, uri: &str) -> Option<Footprint> {
    let dir = std::env::temp_dir();
    let out = |ops: u64| {
        dir.join(format!(
            "shapes-cg-{}-{}-{ops}",
            std::process::id(),
            driver.name
        ))
    };
    let mut totals = [0u64; 2];
    let mut profile = None;
    for (slot, ops) in [1, 1 + OPS].into_iter().enumerate() {
        let path = out(ops);
        let ran = run_callgrind(&driver.bench_find, uri, ops, &path);
        let text = std::fs::read_to_string(&path).ok();
        let _ = std::fs::remove_file(&path);
        if !ran {
            return None;
        }
        let parsed = parse(&text?);
        totals[slot] = parsed.total;
        profile = Some(parsed);
    }
    let profile = profile?;
    let hot: Vec<&(usize, u64)> = profile
        .executions
        .iter()
        .filter(|(_, count)| **count >= OPS)
        .map(|(key, _)| key)
        .collect();
    let lines: HashSet<(usize, u64)> = hot.iter().map(|(object, at)| (*object, at >> 6)).collect();
    let pages: HashSet<(usize, u64)> = hot.iter().map(|(object, at)| (*object, at >> 12)).collect();
    Some(Footprint {
        instructions_per_op: totals[1].saturating_sub(totals[0]) / OPS,
        code_lines: lines.len(),
        code_pages: pages.len(),
    })
}

fn run_callgrind(bench_find: &Path, uri: &str, ops: u64, out: &Path) -> bool {
    Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--dump-instr=yes")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(bench_find)
        .args(["warm", uri, DB, COLL, &ops.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

struct Profile {
    /// Instructions executed by the whole run.
    total: u64,
    /// How often each instruction ran, by (object, address in the object).
    executions: HashMap<(usize, u64), u64>,
}

/// Reads callgrind's output format with `positions: instr line`: cost lines
/// are `<address> <line> <Ir>`, each position absolute (`0x...`), relative
/// (`+n`, `-n`) or repeated (`*`); the line after a `calls=` line is a
/// call's inclusive cost, not the caller's own, and only moves the position.
fn parse(text: &str) -> Profile {
    let mut executions: HashMap<(usize, u64), u64> = HashMap::new();
    let mut objects: HashMap<String, usize> = HashMap::new();
    let mut object = 0;
    let mut address: u64 = 0;
    let mut total = 0;
    let mut after_calls = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("ob=") {
            // "(id) name" the first time an object is named, "(id)" after.
            let id = rest.split(')').next().unwrap_or(rest).to_owned();
            let next = objects.len();
            object = *objects.entry(id).or_insert(next);
            continue;
        }
        if let Some(rest) = line
            .strip_prefix("summary:")
            .or_else(|| line.strip_prefix("totals:"))
        {
            total = total.max(rest.trim().parse().unwrap_or(0));
            continue;
        }
        if line.starts_with("calls=") {
            after_calls = true;
            continue;
        }
        let mut fields = line.split_whitespace();
        let Some(position) = fields.next() else {
            continue;
        };
        let moved = match position.as_bytes()[0] {
            b'0' if position.starts_with("0x") => u64::from_str_radix(&position[2..], 16).ok(),
            b'+' => position[1..]
                .parse::<u64>()
                .ok()
                .map(|n| address.wrapping_add(n)),
            b'-' => position[1..]
                .parse::<u64>()
                .ok()
                .map(|n| address.wrapping_sub(n)),
            b'*' => Some(address),
            _ => None,
        };
        let Some(moved) = moved else {
            continue;
        };
        address = moved;
        if std::mem::take(&mut after_calls) {
            continue;
        }
        // The source line, then the instruction count.
        if let Some(count) = fields.nth(1).and_then(|n| n.parse::<u64>().ok()) {
            *executions.entry((object, address)).or_default() += count;
        }
    }
    Profile { total, executions }
}
