//! Wire compression's cost and gain: a 10,000-document cursor read through
//! the topology simulator (which compresses its replies as mongod does) in
//! front of SecantusDB, with no compressor and with each of snappy, zlib
//! and zstd. Prints the bytes the client received and the client thread's
//! CPU time (from /proc/thread-self/schedstat, nanoseconds); the
//! simulator's own compression runs on its threads and is not counted.
//!
//! Then the same workload for libmongoc, when `gcc` and pkg-config's
//! `libmongoc-1.0` are there (Debian: `apt-get install libmongoc-dev`):
//! `benches/compare/libmongoc/compression.c`, built into `target/` here,
//! runs as a child per compressor and reports its thread's CPU and wall
//! time (`clock_gettime`); the bytes are the simulator's count, as for ours.
//!
//! Run with `cargo bench --bench compression` (set `SECANTUSD`).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::Client;
use support::server::TestServer;
use support::sim::Simulator;

const DOCUMENTS: i32 = 10_000;
const RUNS: u32 = 5;
const COMPRESSORS: [&str; 4] = ["none", "snappy", "zlib", "zstd"];

/// This thread's time on a CPU.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux /proc");
    let nanos: u64 = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("schedstat's first field");
    Duration::from_nanos(nanos)
}

/// One row: bytes, CPU and wall per run, with the ratio to `plain_bytes`
/// (none's, once measured).
fn print_row(compressor: &str, bytes: u64, cpu: Duration, wall: Duration, plain_bytes: u64) {
    println!(
        "{compressor:<10} {bytes:>12} {:>8.2} {:>10.1}ms {:>8.1}ms",
        plain_bytes as f64 / bytes as f64,
        cpu.as_secs_f64() * 1000.0,
        wall.as_secs_f64() * 1000.0
    );
}

fn print_header(who: &str) {
    println!("{who}: {DOCUMENTS}-document cursor, {RUNS} runs each (bytes and CPU per run)");
    println!(
        "{:<10} {:>12} {:>8} {:>12} {:>10}",
        "compressor", "wire bytes", "ratio", "client CPU", "wall"
    );
}

/// `seed` with `compressors=` for `compressor` (none: unchanged).
fn with_compressor(seed: &str, compressor: &str) -> String {
    let separator = if seed.contains('?') { '&' } else { '?' };
    match compressor {
        "none" => seed.to_owned(),
        name => format!("{seed}{separator}compressors={name}"),
    }
}

fn main() {
    let server = TestServer::shared();
    let sim = Simulator::standalone(server);
    let seed = sim.seed_uri(&[0]);
    let setup = Client::with_uri_str(&seed).unwrap();
    let coll = setup
        .database("bench_compression")
        .collection::<Document>("people");
    coll.drop().run().unwrap();
    let docs = (0..DOCUMENTS).map(|i| {
        doc! {
            "_id": i, "name": format!("person {i}"), "email": format!("person{i}@example.com"),
            "age": i % 90, "city": (["Lisbon", "Osaka", "Quito", "Oslo"][(i % 4) as usize]),
            "tags": ["customer", "newsletter"], "score": f64::from(i) * 1.5,
        }
    });
    coll.insert_many(docs).run().unwrap();
    print_header("mongo-inline");
    let mut plain_bytes = 0;
    for compressor in COMPRESSORS {
        let client = Client::with_uri_str(with_compressor(&seed, compressor)).unwrap();
        let coll = client
            .database("bench_compression")
            .collection::<Document>("people");
        // Warm: the handshake and the first exchange are not the cursor's.
        coll.find_one(doc! {}).run().unwrap();
        sim.reset_observations();
        let cpu = thread_cpu();
        let wall = Instant::now();
        for _ in 0..RUNS {
            let n = coll.find(doc! {}).run().unwrap().count();
            assert_eq!(n, DOCUMENTS as usize);
        }
        let cpu = (thread_cpu() - cpu) / RUNS;
        let wall = wall.elapsed() / RUNS;
        let bytes = sim.bytes_to_clients(0) / u64::from(RUNS);
        if compressor == "none" {
            plain_bytes = bytes;
        }
        print_row(compressor, bytes, cpu, wall, plain_bytes);
    }
    println!();
    match build_libmongoc() {
        Ok(program) => {
            print_header("libmongoc");
            let mut plain_bytes = 0;
            for compressor in COMPRESSORS {
                let uri = with_compressor(&seed, compressor);
                match run_libmongoc(&program, &uri, &sim) {
                    Ok((bytes, cpu, wall)) => {
                        if compressor == "none" {
                            plain_bytes = bytes;
                        }
                        print_row(compressor, bytes, cpu, wall, plain_bytes);
                    }
                    Err(why) => println!("{compressor:<10} failed: {why}"),
                }
            }
        }
        Err(why) => println!("libmongoc: not measured ({why})"),
    }
}

/// Builds `benches/compare/libmongoc/compression.c` against the system's
/// libmongoc into `target/`.
fn build_libmongoc() -> Result<PathBuf, String> {
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "libmongoc-1.0"])
        .output()
        .map_err(|e| format!("pkg-config: {e}"))?;
    if !flags.status.success() {
        return Err("no libmongoc-1.0 for pkg-config (apt-get install libmongoc-dev)".into());
    }
    let flags = String::from_utf8_lossy(&flags.stdout).into_owned();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let program = root.join("target/compression_libmongoc");
    let status = Command::new("gcc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&program)
        .arg(root.join("benches/compare/libmongoc/compression.c"))
        .args(flags.split_whitespace())
        .status()
        .map_err(|e| format!("gcc: {e}"))?;
    if !status.success() {
        return Err(format!("gcc: {status}"));
    }
    Ok(program)
}

/// One libmongoc child: warmed, then the simulator's counters reset, then
/// `RUNS` cursors. Bytes, CPU and wall per run.
fn run_libmongoc(
    program: &Path,
    uri: &str,
    sim: &Simulator,
) -> Result<(u64, Duration, Duration), String> {
    let mut child = Command::new(program)
        .args([uri, "bench_compression", "people", &RUNS.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut next_line = || -> Result<String, String> {
        lines
            .next()
            .ok_or("the child exited early")?
            .map_err(|e| e.to_string())
    };
    if next_line()? != "ready" {
        return Err("the child did not get ready".into());
    }
    sim.reset_observations();
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    writeln!(stdin, "go").map_err(|e| e.to_string())?;
    let result = next_line()?;
    let bytes = sim.bytes_to_clients(0) / u64::from(RUNS);
    let status = child.wait().map_err(|e| e.to_string())?;
    let numbers: Vec<u64> = result
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let [docs, cpu_us, wall_us] = numbers[..] else {
        return Err(format!("unexpected output {result:?} ({status})"));
    };
    if docs != u64::from(RUNS) * DOCUMENTS as u64 {
        return Err(format!("{docs} documents read"));
    }
    let per_run = |us: u64| Duration::from_micros(us / u64::from(RUNS));
    Ok((bytes, per_run(cpu_us), per_run(wall_us)))
}
