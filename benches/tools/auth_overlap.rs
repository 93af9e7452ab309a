//! What authentication adds to a cold start against three members: a new
//! client and its first `ping` through three simulated mongoses
//! (`tests/support/sim.rs`) in front of one SecantusDB with `--auth`,
//! SCRAM-SHA-256, every reply of every member delayed by D (a simulated
//! network round trip). The hellos of a scan overlap; so, since issue 37
//! item 7, do the members' SCRAM conversations (saslStart, saslContinue):
//! the cold start costs about 4 D (hello, two SCRAM steps, ping) where one
//! member after another cost 8 D (hello, 3 × 2 steps, ping).
//!
//! `SECANTUSD=... cargo run --example auth_overlap [RUNS]` prints the
//! median wall time per delay and the order the members saw the commands
//! in (the simulator does not speak TLS: TLS adds its own handshake round
//! trips, which overlap in the scan already).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::Client;
use support::sim::Simulator;
use support::tls::{encoded, plain_auth_server, PASSWORD};

fn cold_ping(uri: &str) -> Duration {
    let start = Instant::now();
    let client = Client::with_uri_str(uri).expect("client");
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping");
    start.elapsed()
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(9, |n| n.parse().expect("a run count"));
    let sim = Simulator::mongos(plain_auth_server(), 3);
    let hosts: Vec<String> = (0..3).map(|i| sim.address(i)).collect();
    let uri = format!(
        "mongodb://alice:{}@{}/?authMechanism=SCRAM-SHA-256&serverSelectionTimeoutMS=10000",
        encoded(PASSWORD),
        hosts.join(",")
    );
    println!("{:>8} {:>14} {:>10}", "delay D", "cold ping", "in D");
    for delay_ms in [0u64, 20, 50] {
        for i in 0..3 {
            sim.delay_replies(i, Duration::from_millis(delay_ms));
        }
        cold_ping(&uri);
        let mut samples: Vec<Duration> = (0..runs).map(|_| cold_ping(&uri)).collect();
        samples.sort();
        let median = samples[samples.len() / 2];
        let in_d = if delay_ms == 0 {
            String::from("-")
        } else {
            format!("{:.1}", median.as_secs_f64() * 1e3 / delay_ms as f64)
        };
        println!(
            "{:>6}ms {:>12.2}ms {:>10}",
            delay_ms,
            median.as_secs_f64() * 1e3,
            in_d
        );
    }
    sim.reset_observations();
    cold_ping(&uri);
    let order: Vec<String> = (0..3)
        .flat_map(|i| sim.commands(i).into_iter().map(move |c| format!("{i}:{c}")))
        .collect();
    println!("(medians of {runs} cold starts; commands of the last, per member: {order:?})");
}
