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
//!
//! With `MONGO_INLINE_STATE_FILE` set, each child starts from the state file
//! (as the CLI does); the parent runs one child first to write it, so the
//! figures are a second process's. On Linux each child also reports the CPU
//! time it used (`/proc/self/schedstat`, nanoseconds), and the parent prints
//! its median.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

use std::process::Command;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::{Client, ClientOptions};

const CHILD: &str = "--child";

const STATE_FILE: &str = "MONGO_INLINE_STATE_FILE";

fn child(uri: &str) -> mongo_inline::Result<()> {
    let client = match std::env::var_os(STATE_FILE).filter(|v| !v.is_empty()) {
        Some(path) => {
            let code = ClientOptions::builder()
                .state_file(std::path::PathBuf::from(path))
                .build();
            Client::with_options(ClientOptions::parse_with(uri, code)?)?
        }
        None => Client::with_uri_str(uri)?,
    };
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()?;
    if let Some(nanos) = cpu_nanos() {
        println!("{nanos}");
    }
    Ok(())
}

/// The CPU time this process used so far (Linux), in nanoseconds.
fn cpu_nanos() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn median_ms(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
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
    let mut cpu: Vec<f64> = Vec::with_capacity(runs);
    let warm_up = usize::from(std::env::var_os(STATE_FILE).is_some());
    for run in 0..runs.max(1) + warm_up {
        let started = Instant::now();
        let output = Command::new(&exe)
            .arg(CHILD)
            .arg(uri)
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("spawning the child");
        let elapsed = started.elapsed();
        if !output.status.success() {
            eprintln!("cold_start: a child failed ({})", output.status);
            std::process::exit(1);
        }
        if run < warm_up {
            continue;
        }
        times.push(elapsed);
        let reported = String::from_utf8_lossy(&output.stdout);
        if let Ok(nanos) = reported.trim().parse::<u64>() {
            cpu.push(nanos as f64 / 1e6);
        }
    }
    if !cpu.is_empty() {
        println!(
            "CPU per child over {} runs: median {:.2} ms",
            cpu.len(),
            median_ms(cpu)
        );
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
