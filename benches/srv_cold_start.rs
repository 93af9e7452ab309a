//! What `mongodb+srv` adds to a cold start: a new client and its first
//! operation (`ping`), through a plain `mongodb://` URI naming the member
//! by host name, and through a `mongodb+srv://` URI whose SRV record names
//! the same member. Both resolve the member's name (A and AAAA, asked
//! together) through the same loopback DNS server; the SRV client also asks
//! SRV and TXT, together, first. So the difference should be one DNS round
//! trip.
//!
//! The DNS server delays each reply by 0 ms (loopback) and by 20 ms (a
//! simulated nearby resolver), so the round trip shows in the figures.
//! A real SecantusDB answers the ping (started as the tests start theirs;
//! set `SECANTUSD`).
//!
//! Run with `cargo bench --bench srv_cold_start`.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::{Client, ClientOptions};
use support::dns::{a, srv, DnsServer};
use support::server::TestServer;

const SRV_HOST: &str = "cluster0.bench.example";
const MEMBER: &str = "db0.bench.example";
const RUNS: usize = 30;

fn cold_start(uri: &str, dns: &DnsServer) -> Duration {
    let start = Instant::now();
    let in_code = ClientOptions::builder()
        .name_servers(vec![dns.address()])
        .build();
    let options = ClientOptions::parse_with(uri, in_code).expect("uri");
    let client = Client::with_options(options).expect("client");
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("ping");
    start.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let server = TestServer::start_standalone();
    let port = server.port();
    let dns = DnsServer::start(vec![
        srv(&format!("_mongodb._tcp.{SRV_HOST}"), port, MEMBER, 300),
        a(MEMBER, Ipv4Addr::LOCALHOST),
    ]);
    let plain = format!("mongodb://{MEMBER}:{port}/");
    let via_srv = format!("mongodb+srv://{SRV_HOST}/?tls=false");
    println!(
        "{:>10} {:>14} {:>14} {:>14}",
        "dns delay", "plain (median)", "srv (median)", "srv - plain"
    );
    for delay_ms in [0u64, 20] {
        dns.set_delay(Duration::from_millis(delay_ms));
        // One warm-up each: the server's first connection and the page cache.
        cold_start(&plain, &dns);
        cold_start(&via_srv, &dns);
        let mut plain_samples = Vec::new();
        let mut srv_samples = Vec::new();
        for _ in 0..RUNS {
            plain_samples.push(cold_start(&plain, &dns));
            srv_samples.push(cold_start(&via_srv, &dns));
        }
        let (p, s) = (median(plain_samples), median(srv_samples));
        println!(
            "{:>8}ms {:>12.2}ms {:>12.2}ms {:>12.2}ms",
            delay_ms,
            p.as_secs_f64() * 1e3,
            s.as_secs_f64() * 1e3,
            (s.as_secs_f64() - p.as_secs_f64()) * 1e3
        );
    }
    println!(
        "(medians of {RUNS} cold starts each: new client, then ping; the SRV client's extra \
         cost is its SRV+TXT exchange, one DNS round trip)"
    );
}
