//! A fixed workload for measuring the driver beside other drivers.
//!
//! ```text
//! bench_find cold URI DB COLL ID     one find_one by _id, then exit
//!                                    prints: DOC <relaxed extended JSON>
//! bench_find warm URI DB COLL N      N find_one by _id in a loop on one client
//!                                    prints: WARM ops_per_s=<x> cpu_us_per_op=<y>
//!                                    user_us_per_op=<u> sys_us_per_op=<s>
//!                                    preempted_per_op=<p> (involuntary
//!                                    context switches)
//! bench_find warm-raw URI DB COLL N  as warm, each result kept as the reply's
//!                                    bytes (`RawDocumentBuf`, like libmongoc's
//!                                    `bson_copy`) instead of a `Document`
//! bench_find cursor URI DB COLL N    iterates find({}) over COLL (N: the count
//!                                    expected, checked)
//!                                    prints: CURSOR docs=<n> docs_per_s=<x> mb_per_s=<y> cpu_us_per_doc=<z> peak_rss_mb=<r>
//! bench_find insert URI DB COLL N    insert_many of N small documents
//!                                    ({_id, x, s}) into COLL, which should be empty
//!                                    prints: INSERT docs=<n> docs_per_s=<x> mb_per_s=<y> cpu_us_per_doc=<z>
//! bench_find bigbatch URI DB COLL N  fills COLL (dropped first) with N documents
//!                                    of 1 MB, then reads them back (batchSize N)
//!                                    prints: BIGBATCH docs=<n> read_mb=<m> base_rss_mb=<b> peak_rss_mb=<r>
//! ```
//!
//! `peak_rss_mb` is the process's peak resident set (`VmHWM`), reset just
//! before the measured reads (`/proc/self/clear_refs`), so the filling does
//! not count; `base_rss_mb` is the resident set at that moment. Servers cap
//! a reply's batch at 16 MiB, so `bigbatch` with N up to 16 reads one
//! reply of N MB; larger N reads several.
//!
//! Against a slow test server the wall-clock rates measure the server; the
//! CPU per document is the client's own share.
//!
//! `cold` is meant to be timed from outside (spawn → exit), so it does
//! nothing but the one query; with `MONGO_INLINE_STATE_FILE` set it starts
//! from that state file. `ID` is the `_id` to look up, as Extended JSON
//! (`1`, `"a"`, `{"$oid": "..."}`); `warm` looks up `_id: 1`, which the
//! harness inserts. CPU time is the process's own (user + system, from
//! `/proc/self/schedstat`, nanosecond resolution on Linux), so a slow test
//! server does not count against the driver.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

use std::process::ExitCode;
use std::time::Instant;

use bson::{doc, Bson, Document, RawDocumentBuf};
use mongo_inline::{Client, ClientOptions};
use serde::de::DeserializeOwned;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, uri, db, coll, arg] = args.as_slice() else {
        eprintln!("usage: bench_find cold|warm|warm-raw|cursor|insert|bigbatch URI DB COLL ID|N");
        return ExitCode::from(2);
    };
    let outcome = match mode.as_str() {
        "cold" => cold(uri, db, coll, arg),
        "warm" | "warm-raw" | "cursor" | "insert" | "bigbatch" => match arg.parse::<u32>() {
            Ok(n) if n > 0 && mode == "warm" => warm::<Document>(uri, db, coll, n),
            Ok(n) if n > 0 && mode == "warm-raw" => warm::<RawDocumentBuf>(uri, db, coll, n),
            Ok(n) if n > 0 && mode == "cursor" => cursor(uri, db, coll, n),
            Ok(n) if n > 0 && mode == "bigbatch" => big_batch(uri, db, coll, n),
            Ok(n) if n > 0 => insert(uri, db, coll, n),
            _ => Err(format!("N must be a positive whole number, not {arg:?}")),
        },
        other => Err(format!(
            "unknown mode {other:?}: expected cold, warm, warm-raw, cursor, insert or bigbatch"
        )),
    };
    match outcome {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("bench_find: {message}");
            ExitCode::FAILURE
        }
    }
}

fn cold(uri: &str, db: &str, coll: &str, id: &str) -> Result<String, String> {
    let id = parse_id(id)?;
    let client = cold_client(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<Document>(coll);
    let found = collection
        .find_one(doc! { "_id": id })
        .run()
        .map_err(|e| e.to_string())?;
    let value = found.map(Bson::Document).unwrap_or(Bson::Null);
    Ok(format!("DOC {}", value.into_relaxed_extjson()))
}

/// A client that starts from the state file `MONGO_INLINE_STATE_FILE`
/// names, when set (as the CLI and the bindings do), so that
/// `benches/warm_start.rs` measures a second process.
fn cold_client(uri: &str) -> mongo_inline::Result<Client> {
    match std::env::var_os("MONGO_INLINE_STATE_FILE").filter(|v| !v.is_empty()) {
        Some(path) => {
            let in_code = ClientOptions::builder()
                .state_file(std::path::PathBuf::from(path))
                .build();
            Client::with_options(ClientOptions::parse_with(uri, in_code)?)
        }
        None => Client::with_uri_str(uri),
    }
}

/// `T` is what each result becomes: a `Document` (parsed), or the bytes.
fn warm<T: DeserializeOwned + 'static>(
    uri: &str,
    db: &str,
    coll: &str,
    n: u32,
) -> Result<String, String> {
    let client = Client::with_uri_str(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<T>(coll);
    // The first operation scans and connects: not part of the warm figure.
    collection
        .find_one(doc! { "_id": 1 })
        .run()
        .map_err(|e| e.to_string())?;
    let cpu_start = cpu_time_ns()?;
    let ticks_start = user_and_system_ticks()?;
    let preempted_start = involuntary_switches()?;
    let wall_start = Instant::now();
    for _ in 0..n {
        let found = collection
            .find_one(doc! { "_id": 1 })
            .run()
            .map_err(|e| e.to_string())?;
        std::hint::black_box(found);
    }
    let wall = wall_start.elapsed().as_secs_f64();
    let cpu_ns = cpu_time_ns()? - cpu_start;
    let ticks_end = user_and_system_ticks()?;
    let preempted = involuntary_switches()? - preempted_start;
    let cpu_us_per_op = cpu_ns as f64 / 1000.0 / f64::from(n);
    // The kernel samples the user/system split per tick; scale the sampled
    // shares to the exact total.
    let (user_ticks, system_ticks) = (ticks_end.0 - ticks_start.0, ticks_end.1 - ticks_start.1);
    let user_share = if user_ticks + system_ticks == 0 {
        f64::NAN
    } else {
        user_ticks as f64 / (user_ticks + system_ticks) as f64
    };
    Ok(format!(
        "WARM ops_per_s={:.0} cpu_us_per_op={cpu_us_per_op:.2} user_us_per_op={:.2} \
         sys_us_per_op={:.2} preempted_per_op={:.2}",
        f64::from(n) / wall,
        cpu_us_per_op * user_share,
        cpu_us_per_op * (1.0 - user_share),
        preempted as f64 / f64::from(n)
    ))
}

fn cursor(uri: &str, db: &str, coll: &str, expected: u32) -> Result<String, String> {
    let client = Client::with_uri_str(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<Document>(coll);
    let cpu_start = cpu_time_ns()?;
    let start = Instant::now();
    let (mut docs, mut bytes) = (0u64, 0u64);
    for document in collection.find(doc! {}).run().map_err(|e| e.to_string())? {
        let document = document.map_err(|e| e.to_string())?;
        bytes += bson_len(&document)?;
        docs += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_ns = cpu_time_ns()? - cpu_start;
    if docs != u64::from(expected) {
        return Err(format!("expected {expected} documents, found {docs}"));
    }
    Ok(format!(
        "{} peak_rss_mb={:.1}",
        throughput("CURSOR", docs, bytes, seconds, cpu_ns),
        memory_mb("VmHWM")?
    ))
}

/// Bytes of each document `big_batch` stores: 1 MB, so that 16 of them
/// make one reply just under the servers' 16 MiB cap on a batch.
const BIG_DOCUMENT_BYTES: usize = 1_000_000;

fn big_batch(uri: &str, db: &str, coll: &str, n: u32) -> Result<String, String> {
    let client = Client::with_uri_str(uri).map_err(|e| e.to_string())?;
    let collection = client.database(db).collection::<Document>(coll);
    collection.drop().run().map_err(|e| e.to_string())?;
    let filler = "x".repeat(BIG_DOCUMENT_BYTES);
    for i in 0..i64::from(n) {
        collection
            .insert_one(doc! { "_id": i, "s": filler.as_str() })
            .run()
            .map_err(|e| e.to_string())?;
    }
    drop(filler);
    std::fs::write("/proc/self/clear_refs", "5")
        .map_err(|e| format!("cannot reset the peak RSS (Linux only): {e}"))?;
    let base = memory_mb("VmRSS")?;
    let (mut docs, mut bytes) = (0u64, 0u64);
    let found = collection
        .find(doc! {})
        .batch_size(n)
        .run()
        .map_err(|e| e.to_string())?;
    for document in found {
        let document = document.map_err(|e| e.to_string())?;
        bytes += bson_len(&document)?;
        docs += 1;
    }
    if docs != u64::from(n) {
        return Err(format!("expected {n} documents, found {docs}"));
    }
    Ok(format!(
        "BIGBATCH docs={docs} read_mb={:.1} base_rss_mb={base:.1} peak_rss_mb={:.1}",
        bytes as f64 / 1e6,
        memory_mb("VmHWM")?
    ))
}

/// A `/proc/self/status` memory figure (`VmHWM`, `VmRSS`) in MB.
fn memory_mb(name: &str) -> Result<f64, String> {
    status_field(name, |value| {
        let kib = value.strip_suffix("kB")?.trim().parse::<f64>().ok()?;
        Some(kib * 1024.0 / 1e6)
    })
}

/// The field `name` of `/proc/self/status`, its text trimmed and read by
/// `parse`.
fn status_field<T>(name: &str, parse: impl FnOnce(&str) -> Option<T>) -> Result<T, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status (Linux only): {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| parse(value.trim()))
        .ok_or_else(|| format!("no {name} in /proc/self/status"))
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
    let cpu_start = cpu_time_ns()?;
    let start = Instant::now();
    collection
        .insert_many(&documents)
        .run()
        .map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_ns = cpu_time_ns()? - cpu_start;
    Ok(throughput("INSERT", u64::from(n), bytes, seconds, cpu_ns))
}

fn bson_len(document: &Document) -> Result<u64, String> {
    bson::to_vec(document)
        .map(|bytes| bytes.len() as u64)
        .map_err(|e| e.to_string())
}

fn throughput(label: &str, docs: u64, bytes: u64, seconds: f64, cpu_ns: u64) -> String {
    format!(
        "{label} docs={docs} docs_per_s={:.0} mb_per_s={:.1} cpu_us_per_doc={:.2}",
        docs as f64 / seconds,
        bytes as f64 / seconds / 1e6,
        cpu_ns as f64 / 1000.0 / docs as f64
    )
}

fn parse_id(text: &str) -> Result<Bson, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("ID is not JSON: {e}"))?;
    Bson::try_from(json).map_err(|e| format!("ID is not Extended JSON: {e}"))
}

/// Nanoseconds this process has run on a CPU (the first field of
/// `/proc/self/schedstat`). The process is single-threaded, so this is the
/// driver's cost plus the loop's.
fn cpu_time_ns() -> Result<u64, String> {
    let text = std::fs::read_to_string("/proc/self/schedstat")
        .map_err(|e| format!("cannot read /proc/self/schedstat (Linux only): {e}"))?;
    text.split_whitespace()
        .next()
        .and_then(|field| field.parse().ok())
        .ok_or_else(|| format!("unexpected /proc/self/schedstat: {text:?}"))
}

/// How many times the scheduler has taken the CPU from this process while
/// it could run (`nonvoluntary_ctxt_switches` of `/proc/self/status`).
fn involuntary_switches() -> Result<u64, String> {
    status_field("nonvoluntary_ctxt_switches", |count| count.parse().ok())
}

/// (user, system) clock ticks this process has run, fields 14 and 15 of
/// `/proc/self/stat` (what `getrusage` reports, at tick resolution).
fn user_and_system_ticks() -> Result<(u64, u64), String> {
    let text = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| format!("cannot read /proc/self/stat (Linux only): {e}"))?;
    // The command name (field 2) may hold spaces; fields after it are plain.
    let after_name = text.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (tick(11), tick(12)) {
        (Some(user), Some(system)) => Ok((user, system)),
        _ => Err(format!("unexpected /proc/self/stat: {text:?}")),
    }
}
