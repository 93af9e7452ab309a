//! The PHP and Python packages (bindings/) per request, beside their
//! ecosystem's own driver, run the way their users run them: a new process
//! that connects, finds one document and exits.
//!
//! Per deployment shape (the topology simulator in front of SecantusDB: a
//! standalone, and a replica set seeded with its secondary) and per driver
//! (our PHP package over FFI and PHP's `mongodb` extension on libmongoc; our
//! Python package over ctypes and PyMongo), it prints for one cold run
//! (medians of `COLD_RUNS`): the time from the script's start (before it
//! loads the driver) to the first result, spawn → exit wall time, the
//! process's CPU (user + system, every thread) and peak RSS (from wait4, by
//! `benches/bindings/rusage.py`), and the reply round trips on the critical
//! path to the first result: every simulated member waits `DELAY` before
//! each reply, so round trips = (time from creating the client to the result
//! with delay − without) / `DELAY` (the TCP connect is not delayed; the
//! interpreter's start-up, whose noise would drown a round trip, is left
//! out). Then, against SecantusDB directly, a warm loop
//! of `WARM_OPS` finds by `_id` in one process: operations/s and CPU µs per
//! operation (the interpreter's own count, every thread included).
//!
//! The scripts speak `benches/tools/bench_find.rs`'s `cold` and `warm`
//! modes: `benches/bindings/bench_find{,_ext}.php` and
//! `bench_find{,_pymongo}.py`. Needs `php` with FFI and `mongodb`
//! (`apt-get install php-cli php-mongodb`) and bindings/python/.venv with
//! PyMongo (`bash .ci/bindings` makes both); builds the release library.
//! Run with `cargo bench --bench bindings` (set `SECANTUSD` as for the tests).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bson::{doc, Document};
use mongo_inline::Client;
use support::server::TestServer;
use support::sim::{Shape, Simulator};

/// Every simulated reply waits this long: long enough to stand out of an
/// interpreter's start-up noise.
const DELAY: Duration = Duration::from_millis(50);
const COLD_RUNS: usize = 7;
const WARM_OPS: u32 = 10_000;
const DB: &str = "bench";
const COLL: &str = "c";

/// One driver: an interpreter running a bench_find script.
struct Driver {
    name: &'static str,
    interpreter: PathBuf,
    script: PathBuf,
}

/// One cold run's figures, in milliseconds and KiB.
#[derive(Clone, Copy)]
struct Cold {
    first_result: f64,
    connected_to_result: f64,
    exit: f64,
    cpu: f64,
    rss_kib: f64,
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let library = build_library(root);
    let drivers = drivers(root);
    let backend = TestServer::start_standalone();
    seed_document(&backend.uri());

    println!(
        "per request: spawn -> exit of a script that connects, finds one document and exits; \
         medians of {COLD_RUNS} runs; reply delay {DELAY:?} for round trips (TCP connect excluded)"
    );
    println!(
        "{:<28} {:<22} {:>11} {:>9} {:>8} {:>8} {:>12}",
        "shape", "driver", "result ms", "exit ms", "CPU ms", "RSS MiB", "round trips"
    );
    for shape in Shape::all(&backend)
        .into_iter()
        .filter(|s| s.name == "standalone" || s.name == "replica set, secondary seed")
    {
        let uri = shape.seed_uri();
        for driver in &drivers {
            print_cold(&shape, driver, &uri, &library);
        }
    }

    println!("warm: {WARM_OPS} find_one by _id in one process, against SecantusDB directly");
    println!("{:<22} {:>10} {:>14}", "driver", "op/s", "CPU us/op");
    for driver in &drivers {
        let line = run(
            driver,
            &library,
            &["warm", &backend.uri(), DB, COLL, &WARM_OPS.to_string()],
        );
        println!(
            "{:<22} {:>10} {:>14}",
            driver.name,
            field(&line, "ops_per_s").map_or("-".to_owned(), |v| format!("{v:.0}")),
            field(&line, "cpu_us_per_op").map_or("-".to_owned(), |v| format!("{v:.1}")),
        );
    }
}

fn print_cold(shape: &Shape, driver: &Driver, uri: &str, library: &Path) {
    set_delay(&shape.sim, Duration::ZERO);
    let quick = cold_runs(driver, uri, library);
    set_delay(&shape.sim, DELAY);
    let delayed = cold_runs(driver, uri, library);
    set_delay(&shape.sim, Duration::ZERO);
    let of = |runs: &[Cold], figure: fn(&Cold) -> f64| median(runs.iter().map(figure).collect());
    let first_result = of(&quick, |c| c.first_result);
    let round_trips = (of(&delayed, |c| c.connected_to_result)
        - of(&quick, |c| c.connected_to_result))
        / (DELAY.as_secs_f64() * 1e3);
    println!(
        "{:<28} {:<22} {:>11.1} {:>9.1} {:>8.1} {:>8.1} {:>4} ({:.2})",
        shape.name,
        driver.name,
        first_result,
        of(&quick, |c| c.exit),
        of(&quick, |c| c.cpu),
        of(&quick, |c| c.rss_kib) / 1024.0,
        round_trips.round(),
        round_trips,
    );
}

fn cold_runs(driver: &Driver, uri: &str, library: &Path) -> Vec<Cold> {
    (0..COLD_RUNS)
        .map(|_| {
            let output = command(driver, library, &["cold", uri, DB, COLL, "1"], true)
                .output()
                .expect("python3 runs");
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                output.status.success() && stdout.contains("DOC {"),
                "{} failed: {stdout}{stderr}",
                driver.name
            );
            let line = |prefix: &str| -> f64 {
                stdout
                    .lines()
                    .find_map(|l| l.strip_prefix(prefix))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or_else(|| panic!("the script's {prefix}line"))
            };
            let usage = stderr
                .lines()
                .find_map(|l| l.strip_prefix("RUSAGE "))
                .expect("rusage.py's line");
            let number = |name| field(usage, name).expect("a figure of rusage.py");
            Cold {
                first_result: line("FIRST_MS "),
                connected_to_result: line("CONNECTED_MS "),
                exit: number("wall_ms"),
                cpu: number("cpu_ms"),
                rss_kib: number("rss_kib"),
            }
        })
        .collect()
}

/// The script's last line of output; panics (with its stderr) if it failed.
fn run(driver: &Driver, library: &Path, args: &[&str]) -> String {
    let output = command(driver, library, args, false)
        .output()
        .expect("the interpreter runs");
    assert!(
        output.status.success(),
        "{} failed: {}",
        driver.name,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned()
}

fn command(driver: &Driver, library: &Path, args: &[&str], timed: bool) -> Command {
    let mut command = if timed {
        let mut rusage = Command::new("python3");
        rusage
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/bindings/rusage.py"))
            .arg(&driver.interpreter);
        rusage
    } else {
        Command::new(&driver.interpreter)
    };
    command
        .arg(&driver.script)
        .args(args)
        .env("MONGO_INLINE_LIB", library);
    command
}

fn drivers(root: &Path) -> Vec<Driver> {
    let php = PathBuf::from("php");
    let python = root.join("bindings/python/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `bash .ci/bindings` once (it creates it with PyMongo)",
        python.display()
    );
    let scripts = root.join("benches/bindings");
    vec![
        Driver {
            name: "php mongo-inline (FFI)",
            interpreter: php.clone(),
            script: scripts.join("bench_find.php"),
        },
        Driver {
            name: "php ext-mongodb",
            interpreter: php,
            script: scripts.join("bench_find_ext.php"),
        },
        Driver {
            name: "python mongo-inline",
            interpreter: python.clone(),
            script: scripts.join("bench_find.py"),
        },
        Driver {
            name: "python pymongo",
            interpreter: python,
            script: scripts.join("bench_find_pymongo.py"),
        },
    ]
}

/// The release shared library, as a binding loads it.
fn build_library(root: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["rustc", "--release", "--lib", "--features", "capi"])
        .args(["--crate-type", "cdylib", "--crate-type", "staticlib"])
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "the release build of the C library failed"
    );
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("release/libmongo_inline.so")
}

fn seed_document(uri: &str) {
    let client = Client::with_uri_str(uri).expect("client");
    let collection = client.database(DB).collection::<Document>(COLL);
    collection
        .delete_many(doc! {})
        .run()
        .expect("emptying the collection");
    collection
        .insert_one(doc! { "_id": 1, "name": "x", "n": 42 })
        .run()
        .expect("the document the scripts look up");
}

fn set_delay(sim: &Simulator, delay: Duration) {
    for i in 0..sim.len() {
        sim.delay_replies(i, delay);
    }
}

fn field(line: &str, name: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// The median of `values` (the upper one of an even count).
fn median<T: PartialOrd + Copy>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values[values.len() / 2]
}
