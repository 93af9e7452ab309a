//! What authentication adds to a cold start against three members: a new
//! client and its first `ping` through three simulated mongoses
//! (`tests/support/sim.rs`) in front of one SecantusDB with `--auth`,
//! SCRAM-SHA-256, every reply delayed by D (a simulated network round
//! trip). The hellos of a scan overlap; so, since issue 37 item 7, do the
//! members' SCRAM conversations (saslStart, saslContinue).
//!
//! Two ways in: plain TCP, the simulator delaying each reply; and TLS 1.3,
//! a TLS terminator of this file's in front of each member and a byte-level
//! [`DelayProxy`] in front of that holding each server → client chunk
//! (the simulator parses OP_MSG, so it cannot sit behind TLS itself). The
//! TCP connect is not delayed. Round trips are (cold ping − cold ping at
//! D = 0) / D.
//!
//! `SECANTUSD=... cargo run --example auth_overlap [RUNS]` prints the
//! median wall time per mode and delay, and the order the members saw the
//! commands of the last plain run in.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::Client;
use support::delay_proxy::DelayProxy;
use support::sim::Simulator;
use support::tls::{certs, encoded, plain_auth_server, PASSWORD};
use support::tls_terminator::{server_config, terminate_tls};

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

fn median_cold_ping(uri: &str, runs: usize) -> Duration {
    cold_ping(uri);
    let mut samples: Vec<Duration> = (0..runs).map(|_| cold_ping(uri)).collect();
    samples.sort();
    samples[samples.len() / 2]
}

const DELAYS_MS: [u64; 3] = [0, 20, 50];

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(9, |n| n.parse().expect("a run count"));
    let sim = Simulator::mongos(plain_auth_server(), 3);
    let query = "authMechanism=SCRAM-SHA-256&serverSelectionTimeoutMS=10000";
    let plain_hosts: Vec<String> = (0..3).map(|i| sim.address(i)).collect();
    let plain = format!(
        "mongodb://alice:{}@{}/?{query}",
        encoded(PASSWORD),
        plain_hosts.join(",")
    );
    // The test server certificate (`localhost`, signed by the tests' CA).
    let config = server_config(&certs().path("server.pem"), &certs().path("server-key.pem"));
    let proxies: Vec<DelayProxy> = (0..3)
        .map(|i| DelayProxy::start(terminate_tls(config.clone(), sim.port(i))))
        .collect();
    let tls_hosts: Vec<String> = proxies
        .iter()
        .map(|p| format!("localhost:{}", p.port()))
        .collect();
    let tls = format!(
        "mongodb://alice:{}@{}/?tls=true&tlsCAFile={}&{query}",
        encoded(PASSWORD),
        tls_hosts.join(","),
        certs().path("ca.pem")
    );
    println!(
        "{:>6} {:>8} {:>14} {:>12}",
        "mode", "delay D", "cold ping", "round trips"
    );
    for (mode, uri) in [("plain", &plain), ("TLS", &tls)] {
        let mut at_zero = Duration::ZERO;
        for delay_ms in DELAYS_MS {
            let delay = Duration::from_millis(delay_ms);
            for (i, proxy) in proxies.iter().enumerate() {
                if mode == "plain" {
                    sim.delay_replies(i, delay);
                } else {
                    proxy.set_delay(delay);
                }
            }
            let median = median_cold_ping(uri, runs);
            let trips = if delay_ms == 0 {
                at_zero = median;
                String::from("-")
            } else {
                let extra = median.saturating_sub(at_zero).as_secs_f64();
                format!("{:.1}", extra * 1e3 / delay_ms as f64)
            };
            println!(
                "{mode:>6} {:>6}ms {:>12.2}ms {trips:>12}",
                delay_ms,
                median.as_secs_f64() * 1e3
            );
        }
        for (i, proxy) in proxies.iter().enumerate() {
            sim.delay_replies(i, Duration::ZERO);
            proxy.set_delay(Duration::ZERO);
        }
    }
    sim.reset_observations();
    for i in 0..3 {
        sim.delay_replies(i, Duration::from_millis(20));
    }
    cold_ping(&plain);
    let order: Vec<String> = sim
        .arrival_order()
        .into_iter()
        .map(|(i, command)| format!("{i}:{command}"))
        .collect();
    println!("(medians of {runs} cold starts; the last plain one's commands, in arrival order: {order:?})");
}
