//! Wire compression's cost and gain: a 10,000-document cursor read through
//! the topology simulator (which compresses its replies as mongod does) in
//! front of SecantusDB, with no compressor and with each of snappy, zlib
//! and zstd. Prints the bytes the client received and the client thread's
//! CPU time (from /proc/thread-self/stat, 10 ms ticks, so several runs are
//! summed); the simulator's own compression runs on its threads and is not
//! counted.
//!
//! Run with `cargo bench --bench compression` (set `SECANTUSD`).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::Client;
use support::server::TestServer;
use support::sim::Simulator;

const DOCUMENTS: i32 = 10_000;
const RUNS: u32 = 5;

/// This thread's user + system CPU time.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("Linux /proc");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // After the command name: state is field 3, utime 14, stime 15.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

fn main() {
    let server = TestServer::shared();
    let sim = Simulator::standalone(server);
    let seed = sim.seed_uri(&[0]);
    let separator = if seed.contains('?') { '&' } else { '?' };
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
    println!("{DOCUMENTS}-document cursor, {RUNS} runs each (bytes and CPU per run)");
    println!(
        "{:<10} {:>12} {:>8} {:>12} {:>10}",
        "compressor", "wire bytes", "ratio", "client CPU", "wall"
    );
    let mut plain_bytes = 0;
    for compressor in ["none", "snappy", "zlib", "zstd"] {
        let uri = match compressor {
            "none" => seed.clone(),
            name => format!("{seed}{separator}compressors={name}"),
        };
        let client = Client::with_uri_str(&uri).unwrap();
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
        println!(
            "{compressor:<10} {bytes:>12} {:>8.2} {:>10.1}ms {:>8.1}ms",
            plain_bytes as f64 / bytes as f64,
            cpu.as_secs_f64() * 1000.0,
            wall.as_secs_f64() * 1000.0
        );
    }
}
