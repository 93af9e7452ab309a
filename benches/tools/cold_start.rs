//! Cold start: how long a short-lived process takes from spawn to exit when
//! it connects (TLS and authentication included, if the URI asks for them),
//! runs one `ping` and exits, which is the whole life of a CGI or FaaS handler.
//!
//! ```text
//! cargo run --release --example cold_start -- '<uri>' [runs]
//! ```
//!
//! The example spawns itself `runs` times (default 20) with the URI and
//! prints the minimum, median and maximum wall time from spawn to exit.
//! Example URI for a TLS + SCRAM-SHA-256 standalone:
//! `mongodb://alice:secret@localhost:27017/?tls=true&tlsCAFile=ca.pem&authMechanism=SCRAM-SHA-256`.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

use std::process::Command;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::Client;

const CHILD: &str = "--child";

fn child(uri: &str) -> mongo_inline::Result<()> {
    let client = Client::with_uri_str(uri)?;
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()?;
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CHILD) {
        if let Err(e) = child(&args[2]) {
            eprintln!("cold_start: {e}");
            std::process::exit(1);
        }
        return;
    }
    let Some(uri) = args.get(1) else {
        eprintln!("usage: cold_start <uri> [runs]");
        std::process::exit(2);
    };
    let runs: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(20);
    let exe = std::env::current_exe().expect("the example's own path");
    let mut times: Vec<Duration> = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let status = Command::new(&exe)
            .arg(CHILD)
            .arg(uri)
            .status()
            .expect("spawning the child");
        let elapsed = started.elapsed();
        if !status.success() {
            eprintln!("cold_start: a child failed ({status})");
            std::process::exit(1);
        }
        times.push(elapsed);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "spawn -> exit over {} runs: min {:.1} ms, median {:.1} ms, max {:.1} ms",
        times.len(),
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    );
}
