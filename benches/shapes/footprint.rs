//! Instructions, hot code and the data touched per warm `find_one`, from
//! callgrind and lackey.
//!
//! CPU time per operation is not proportional to instructions: a process
//! that sleeps in `recvfrom` between operations finds much of its code and
//! data evicted from the caches when it wakes, so every distinct cache line
//! it touches costs a miss, and lines touched weigh on the CPU beside the
//! instructions run (the measured cost per line and per instruction is in
//! benches/README.md's log). That makes the footprint as much a figure to
//! watch as the instruction count.
//!
//! Each driver's warm mode runs under `valgrind --tool=callgrind
//! --dump-instr=yes` twice, with 1 and with `1 + OPS` operations.
//! Instructions per operation are the difference of the totals over `OPS`;
//! the hot code is every instruction address the longer run executed at
//! least `OPS` times, counted as distinct 64-byte lines (and 4 KiB pages)
//! per loaded object.
//!
//! The data an operation touches comes from `valgrind --tool=lackey
//! --trace-mem=yes`, which lists every load and store: two runs, with
//! `1 + DATA_OPS` and `1 + 2 × DATA_OPS` operations, and a 64-byte line
//! counts when the longer run accessed it at least `DATA_OPS` times more
//! than the shorter one, so what only the connect and the first scan touch
//! cancels out. The stack's share is the lines within `STACK_SPAN` of the
//! highest address touched (the main thread's stack sits above every other
//! mapping the process writes).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::{Driver, COLL, DB};

const OPS: u64 = 2000;
/// Fewer than `OPS`: lackey writes a line of text per memory access.
const DATA_OPS: u64 = 300;
const STACK_SPAN: u64 = 1 << 20;

/// What one driver's warm `find_one` runs.
pub struct Footprint {
    pub instructions_per_op: u64,
    pub code_lines: usize,
    pub code_pages: usize,
}

/// The data one warm `find_one` touches.
pub struct DataFootprint {
    pub lines: usize,
    pub pages: usize,
    /// Of `lines`, those on the stack.
    pub stack_lines: usize,
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

/// The data lines `driver`'s warm `find_one` touches against `uri`; `None`
/// when valgrind is not installed or a run fails.
pub fn measure_data(driver: &Driver, uri: &str) -> Option<DataFootprint> {
    let shorter = data_accesses(&driver.bench_find, uri, 1 + DATA_OPS)?;
    let longer = data_accesses(&driver.bench_find, uri, 1 + 2 * DATA_OPS)?;
    let touched: Vec<u64> = longer
        .iter()
        .filter(|(line, count)| {
            count.saturating_sub(shorter.get(line).copied().unwrap_or(0)) >= DATA_OPS
        })
        .map(|(line, _)| *line)
        .collect();
    let highest = touched.iter().copied().max()?;
    let stack_floor = highest.saturating_sub(STACK_SPAN >> 6);
    Some(DataFootprint {
        lines: touched.len(),
        pages: touched
            .iter()
            .map(|line| line >> 6)
            .collect::<HashSet<_>>()
            .len(),
        stack_lines: touched.iter().filter(|line| **line >= stack_floor).count(),
    })
}

/// How often `ops` warm operations (and the run around them) accessed each
/// 64-byte line of data, from lackey's trace. The trace goes to a pipe
/// through descriptor 3, so the program's own output cannot split its
/// lines; it is read as it comes (hundreds of megabytes of text).
fn data_accesses(bench_find: &Path, uri: &str, ops: u64) -> Option<HashMap<u64, u64>> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"exec valgrind --tool=lackey --trace-mem=yes --log-fd=3 "$@" 3>&1 1>/dev/null 2>/dev/null"#)
        .arg("sh")
        .arg(bench_find)
        .args(["warm", uri, DB, COLL, &ops.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut counts: HashMap<u64, u64> = HashMap::new();
    let trace = std::io::BufReader::new(child.stdout.take()?);
    for line in std::io::BufRead::split(trace, b'\n') {
        let Ok(line) = line else { break };
        if let Some((first, last)) = data_access(&line) {
            for at in first..=last {
                *counts.entry(at).or_default() += 1;
            }
        }
    }
    child.wait().ok()?.success().then_some(counts)
}

/// The first and last 64-byte line of a lackey load, store or modify
/// (` L 1ffefff8a0,8`); `None` for an instruction (`I  ...`) or any other
/// line.
fn data_access(line: &[u8]) -> Option<(u64, u64)> {
    let rest = match line {
        [b' ', b'L' | b'S' | b'M', b' ', rest @ ..] => rest,
        _ => return None,
    };
    let text = std::str::from_utf8(rest).ok()?;
    let (address, size) = text.trim().split_once(',')?;
    let address = u64::from_str_radix(address, 16).ok()?;
    let size: u64 = size.parse().ok()?;
    Some((address >> 6, (address + size.max(1) - 1) >> 6))
}
