//! The official MongoDB Rust driver beside mongo-inline: the
//! `benches/tools/bench_find.rs` protocol with `mongodb::sync`, so
//! `benches/shapes.rs` measures both drivers the same way.
//!
//! ```text
//! bench_find_official cold URI DB COLL ID    prints: DOC <relaxed extended JSON>
//! bench_find_official warm URI DB COLL N     prints: WARM ops_per_s=.. cpu_us_per_op=..
//!                                            user_us_per_op=.. sys_us_per_op=..
//! bench_find_official cursor URI DB COLL N   prints: CURSOR docs=.. docs_per_s=.. mb_per_s=..
//!                                            cpu_us_per_doc=.. peak_rss_mb=..
//! bench_find_official insert URI DB COLL N   prints: INSERT docs=.. docs_per_s=.. mb_per_s=..
//!                                            cpu_us_per_doc=..
//! ```
//!
//! CPU time differs from bench_find.rs on purpose: the sync API runs the
//! async driver on a tokio runtime whose worker and monitor threads do most
//! of the work, so the main thread's `/proc/self/schedstat` would miss it.
//! `getrusage(RUSAGE_SELF)` counts every thread of the process, live or
//! exited, at microsecond resolution (the user/system split is sampled per
//! tick, the total is exact), which is what the single-threaded drivers'
//! schedstat figure measures for them.

use std::process::ExitCode;
use std::time::Instant;

use mongodb::bson::{doc, Bson, Document};
use mongodb::sync::Client;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, uri, db, coll, arg] = args.as_slice() else {
        eprintln!("usage: bench_find_official cold|warm|cursor|insert URI DB COLL ID|N");
        return ExitCode::from(2);
    };
    let outcome = match mode.as_str() {
        "cold" => cold(uri, db, coll, arg),
        "warm" | "cursor" | "insert" => match arg.parse::<u32>() {
            Ok(n) if n > 0 && mode == "warm" => warm(uri, db, coll, n),
            Ok(n) if n > 0 && mode == "cursor" => cursor(uri, db, coll, n),
            Ok(n) if n > 0 => insert(uri, db, coll, n),
            _ => Err(format!("N must be a positive whole number, not {arg:?}")),
        },
        other => Err(format!(
            "unknown mode {other:?}: expected cold, warm, cursor or insert"
        )),
    };
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("bench_find_official: {message}");
            ExitCode::FAILURE
        }
    }
}

fn cold(uri: &str, db: &str, coll: &str, id: &str) -> Result<String, String> {
    let id = parse_id(id)?;
    let client = Client::with_uri_str(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<Document>(coll);
    let found = collection
        .find_one(doc! { "_id": id })
        .run()
        .map_err(|e| e.to_string())?;
    let value = found.map(Bson::Document).unwrap_or(Bson::Null);
    Ok(format!("DOC {}", value.into_relaxed_extjson()))
}

fn warm(uri: &str, db: &str, coll: &str, n: u32) -> Result<String, String> {
    let client = Client::with_uri_str(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<Document>(coll);
    // The first operation discovers the server and connects: not part of
    // the warm figure.
    collection
        .find_one(doc! { "_id": 1 })
        .run()
        .map_err(|e| e.to_string())?;
    let start = cpu_usage();
    let wall_start = Instant::now();
    for _ in 0..n {
        let found = collection
            .find_one(doc! { "_id": 1 })
            .run()
            .map_err(|e| e.to_string())?;
        std::hint::black_box(found);
    }
    let wall = wall_start.elapsed().as_secs_f64();
    let used = cpu_usage().since(start);
    let per_op = |us: f64| us / f64::from(n);
    Ok(format!(
        "WARM ops_per_s={:.0} cpu_us_per_op={:.2} user_us_per_op={:.2} sys_us_per_op={:.2}",
        f64::from(n) / wall,
        per_op(used.user_us + used.system_us),
        per_op(used.user_us),
        per_op(used.system_us)
    ))
}

fn cursor(uri: &str, db: &str, coll: &str, expected: u32) -> Result<String, String> {
    let client = Client::with_uri_str(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<Document>(coll);
    let start_cpu = cpu_usage();
    let start = Instant::now();
    let (mut docs, mut bytes) = (0u64, 0u64);
    for document in collection.find(doc! {}).run().map_err(|e| e.to_string())? {
        let document = document.map_err(|e| e.to_string())?;
        bytes += bson_len(&document)?;
        docs += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let used = cpu_usage().since(start_cpu);
    if docs != u64::from(expected) {
        return Err(format!("expected {expected} documents, found {docs}"));
    }
    Ok(format!(
        "{} peak_rss_mb={:.1}",
        throughput("CURSOR", docs, bytes, seconds, used),
        memory_mb("VmHWM")?
    ))
}

fn insert(uri: &str, db: &str, coll: &str, n: u32) -> Result<String, String> {
    let client = Client::with_uri_str(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<Document>(coll);
    let documents: Vec<Document> = (0..i64::from(n))
        .map(|i| doc! { "_id": i, "x": i, "s": "abcdefghij" })
        .collect();
    let bytes = documents
        .iter()
        .map(bson_len)
        .sum::<Result<u64, String>>()?;
    let start_cpu = cpu_usage();
    let start = Instant::now();
    collection
        .insert_many(&documents)
        .run()
        .map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let used = cpu_usage().since(start_cpu);
    Ok(throughput("INSERT", u64::from(n), bytes, seconds, used))
}

fn bson_len(document: &Document) -> Result<u64, String> {
    mongodb::bson::to_vec(document)
        .map(|bytes| bytes.len() as u64)
        .map_err(|e| e.to_string())
}

fn throughput(label: &str, docs: u64, bytes: u64, seconds: f64, used: CpuUsage) -> String {
    format!(
        "{label} docs={docs} docs_per_s={:.0} mb_per_s={:.1} cpu_us_per_doc={:.2}",
        docs as f64 / seconds,
        bytes as f64 / seconds / 1e6,
        (used.user_us + used.system_us) / docs as f64
    )
}

fn parse_id(text: &str) -> Result<Bson, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("ID is not JSON: {e}"))?;
    Bson::try_from(json).map_err(|e| format!("ID is not Extended JSON: {e}"))
}

/// A `/proc/self/status` memory figure (`VmHWM`, `VmRSS`) in MB.
fn memory_mb(name: &str) -> Result<f64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status (Linux only): {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
        .map(|kib| kib * 1024.0 / 1e6)
        .ok_or_else(|| format!("no {name} in /proc/self/status"))
}

/// CPU time of the whole process (all threads), in microseconds.
#[derive(Clone, Copy)]
struct CpuUsage {
    user_us: f64,
    system_us: f64,
}

/// A reading of the process's CPU clocks, every thread counted: the official
/// driver's sync API works on tokio threads, so the calling thread's clock
/// alone would miss most of its work.
#[derive(Clone, Copy)]
struct CpuClocks {
    /// Run time of every live thread, in nanoseconds
    /// (`/proc/self/task/*/schedstat`).
    total_ns: u64,
    /// User and system clock ticks of the process (`/proc/self/stat`),
    /// which only split the exact total: at 100 ticks a second they are too
    /// coarse to be the figure themselves.
    user_ticks: u64,
    system_ticks: u64,
}

impl CpuClocks {
    fn since(self, earlier: CpuClocks) -> CpuUsage {
        let total_us = (self.total_ns - earlier.total_ns) as f64 / 1e3;
        let user = (self.user_ticks - earlier.user_ticks) as f64;
        let system = (self.system_ticks - earlier.system_ticks) as f64;
        let user_share = if user + system > 0.0 {
            user / (user + system)
        } else {
            1.0
        };
        CpuUsage {
            user_us: total_us * user_share,
            system_us: total_us * (1.0 - user_share),
        }
    }
}

/// Reads the clocks without an `unsafe` call (getrusage would need one).
fn cpu_usage() -> CpuClocks {
    let mut total_ns = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task (Linux only)") {
        let path = task.expect("a task entry").path().join("schedstat");
        // A thread may end between the listing and the read.
        if let Ok(text) = std::fs::read_to_string(path) {
            total_ns += text
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    let text = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat (Linux only)");
    // The command name (field 2) may hold spaces; the fields after it are
    // plain numbers. Field 3 (state) is fields[0], so utime (14) and stime
    // (15) are [11] and [12].
    let after_name = &text[text.rfind(')').expect("a command name in /proc/self/stat") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| -> u64 { fields[i].parse().expect("a tick count") };
    CpuClocks {
        total_ns,
        user_ticks: ticks(11),
        system_ticks: ticks(12),
    }
}
