//! The driver's costs in every deployment shape, printed as tables, with
//! other drivers beside it where given.
//!
//! Starts SecantusDB and the topology simulator (tests/support) itself. Per
//! shape (standalone, replica set seeded with a secondary, replica set with
//! three seeds, two mongos, load balancer) it prints:
//! - reply round trips on the critical path to the first result: every
//!   simulated member waits `DELAY` before each reply, so a cold `find_one`
//!   takes (its time without delay) + round trips × `DELAY`; the TCP connect
//!   is not delayed (add one for it);
//! - TCP connections and hellos each member saw during that cold run;
//! - warm `find_one` by `_id`: operations/s and the client process's CPU µs
//!   per operation, median and best of `WARM_RUNS` runs of `WARM_OPS`, the
//!   drivers' runs interleaved round by round; ours twice, results parsed
//!   into a `Document` and kept as bytes (`warm-raw`, the like for like of
//!   libmongoc's `bson_copy`); and ours / each other driver per round,
//!   and (with a compared driver named `floor`) the same of the CPU each
//!   spends above the floor's;
//!   with the involuntary context switches per operation (`preempted/op`,
//!   from each program that reports them): on one machine the server's
//!   threads, woken by a request, often take the driver's CPU on the return
//!   from `send`, and each such switch costs a switch back in;
//! - spawn → exit of the release CLI doing one `find` (median of `CLI_RUNS`).
//!
//! Then a cold `find_one` on a standalone with TLS 1.3 and SCRAM-SHA-256,
//! through a byte-level proxy that holds each server → client chunk for
//! `DELAY` (the simulator parses OP_MSG, so it cannot sit in front of TLS):
//! round trips counted the same way, TCP connect excluded (it is not
//! delayed).
//!
//! Then, against SecantusDB directly: cursor iteration over `SHAPES_DOCS`
//! (default 100,000) small documents and `insert_many` of as many
//! (documents/s, MB/s of BSON, client CPU µs per document), the peak RSS of
//! a one-query run, the binary sizes, (when `strace` is installed) the
//! system calls per warm `find_one` and (when `valgrind` is) its
//! instructions and hot code (`shapes/footprint.rs`).
//!
//! Every driver is measured as a separate process speaking the
//! `benches/tools/bench_find.rs` protocol (`cold|warm|cursor|insert URI DB COLL
//! ID|N`). Ours is built here twice: `cargo build --release`
//! (`mongo-inline`), and profile-guided by `.ci/pgo-build`
//! (`mongo-inline-pgo`: trained by `benches/tools/pgo_training.rs`, a mixed
//! workload; `SHAPES_PGO=0` skips it). Its C ABI is measured too, as a
//! binding embeds it (`mongo-inline-capi`: `benches/capi/bench_find.c`, cold
//! and warm modes, linked with the release static library, and
//! `mongo-inline-capi-pgo`, linked with the profile-guided one that
//! `.ci/pgo-build` trains with `benches/capi/pgo_training.c`; `SHAPES_CAPI=0`
//! skips both). Others are named in
//! `SHAPES_COMPARE`, e.g.
//! `SHAPES_COMPARE=libmongoc=/path/bench_find,rust-official=/path/bench_find_official`.
//! `benches/compare/libmongoc/bench_find.c` is libmongoc's (its build line
//! is in its header); `benches/compare/floor/bench_find.c` (warm mode only)
//! does nothing but one `sendto` and one `recvfrom` per operation, the CPU
//! floor under any driver (through two mongoses it draws one at random per
//! operation, as a driver must; it has no figure where no listed host serves
//! the read, as with the secondary seed).
//!
//! Run with `cargo bench --bench shapes` (set `SECANTUSD` as for the tests).
//! `SHAPES_PARTS` picks parts (comma-separated, default all): `shapes`,
//! `tls`, `throughput`, `size`, `syscalls`, `footprint`.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "shapes/footprint.rs"]
mod footprint;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::Client;
use support::delay_proxy::DelayProxy;
use support::server::TestServer;
use support::sim::{Shape, Simulator};

/// Every simulated reply waits this long: long enough to stand out of
/// process start-up noise, short enough to keep the run quick.
const DELAY: Duration = Duration::from_millis(50);
const WARM_OPS: u32 = 3000;
const WARM_RUNS: usize = 9;
const CLI_RUNS: usize = 10;
const COLD_RUNS: usize = 3;
const DB: &str = "bench";
const COLL: &str = "c";

struct Driver {
    name: String,
    bench_find: PathBuf,
    /// This crate (a build of it, or its C ABI), compared with each other
    /// driver.
    ours: bool,
    /// Speaks `warm-raw` as well: ours through the Rust API, measured in
    /// both result types.
    both_result_types: bool,
}

fn main() {
    let release = build_release();
    let mut drivers = vec![Driver {
        name: "mongo-inline".to_owned(),
        bench_find: release.join("examples/bench_find"),
        ours: true,
        both_result_types: true,
    }];
    let with_c_abi = std::env::var("SHAPES_CAPI").map_or(true, |v| v != "0");
    let mut c_abi = Vec::new();
    if with_c_abi {
        c_abi.extend(build_c_abi_bench(
            &build_plain_c_library(),
            "mongo-inline-capi",
        ));
    }
    if std::env::var("SHAPES_PGO").map_or(true, |v| v != "0") {
        let profile_guided = build_profile_guided();
        drivers.push(Driver {
            name: "mongo-inline-pgo".to_owned(),
            bench_find: profile_guided.bench_find,
            ours: true,
            both_result_types: true,
        });
        if with_c_abi {
            c_abi.extend(build_c_abi_bench(
                &profile_guided.c_library,
                "mongo-inline-capi-pgo",
            ));
        }
    }
    drivers.extend(c_abi);
    drivers.extend(compared_drivers());
    let cli = release.join("mongo-inline");

    let backend = TestServer::start();
    seed_document(&backend.uri());
    let standalone = TestServer::start_standalone();
    seed_document(&standalone.uri());

    if part("shapes") {
        print_shapes(&backend, &drivers, &cli);
    }
    if part("tls") {
        print_tls_scram(&drivers);
    }
    if part("throughput") {
        print_throughput(&standalone, &drivers);
    }
    if part("size") {
        print_size(&standalone, &drivers, &cli);
    }
    if part("syscalls") {
        print_syscalls(&standalone, &drivers);
    }
    if part("footprint") {
        print_footprint(&standalone, &drivers);
    }
}

/// Whether `SHAPES_PARTS` (default: all) names `name`.
fn part(name: &str) -> bool {
    std::env::var("SHAPES_PARTS").map_or(true, |parts| parts.split(',').any(|p| p.trim() == name))
}

fn print_shapes(backend: &TestServer, drivers: &[Driver], cli: &Path) {
    println!("reply delay {DELAY:?} per simulated reply; round trips exclude the TCP connect");
    println!(
        "warm: CPU us per find_one, median (best) of {WARM_RUNS} runs of {WARM_OPS}, \
         the drivers' runs interleaved round by round"
    );
    println!(
        "{:<28} {:<18} {:>10} {:>13} {:>13} {:>10} {:>22} {:>14}",
        "shape",
        "driver",
        "RT",
        "conns/member",
        "hellos/member",
        "warm op/s",
        "warm cpu us/op",
        "preempted/op"
    );
    for shape in Shape::all(backend) {
        let uri = shape.seed_uri();
        let colds: Vec<Option<Cold>> = drivers
            .iter()
            .map(|driver| cold_round_trips(&shape.sim, driver, &uri))
            .collect();
        let entries = warm_entries(drivers);
        let rounds = warm_rounds(&entries, &uri);
        for (i, entry) in entries.iter().enumerate() {
            let cold = entry.driver.and_then(|d| colds[d].as_ref());
            let runs: Vec<Warm> = rounds.iter().filter_map(|round| round[i]).collect();
            println!(
                "{:<28} {:<18} {:>10} {:>13} {:>13} {:>10} {:>22} {:>14}",
                shape.name,
                entry.name,
                cold.map_or("-".to_owned(), |c| format!(
                    "{} ({:.2})",
                    c.round_trips, c.exact
                )),
                cold.map_or("-".to_owned(), |c| join(&c.connections)),
                cold.map_or("-".to_owned(), |c| join(&c.hellos)),
                median(runs.iter().map(|w| w.ops).collect())
                    .map_or("-".to_owned(), |ops| format!("{ops:.0}")),
                match (
                    median(runs.iter().map(|w| w.cpu).collect()),
                    runs.iter().map(|w| w.cpu).reduce(f64::min),
                ) {
                    (Some(middle), Some(best)) => format!("{middle:.1} ({best:.1})"),
                    _ => "-".to_owned(),
                },
                median(runs.iter().filter_map(|w| w.preempted).collect())
                    .map_or("-".to_owned(), |p| format!("{p:.2}")),
            );
        }
        print_warm_ratios(shape.name, &entries, &rounds);
        let spawn_to_exit = cli_spawn_to_exit(cli, &uri);
        println!(
            "{:<28} {:<18} spawn -> exit of `mongo-inline find` (median of {CLI_RUNS}): {:.2} ms",
            shape.name,
            "CLI",
            spawn_to_exit.as_secs_f64() * 1e3
        );
    }
}

/// Ours (both result types) beside each other driver: the CPU ratio of
/// each round (runs taken moments apart), and the median of those. When a
/// compared driver is named `floor`, also the ratio of what each driver
/// spends above the floor's CPU in that round: the share of the kernel's
/// and the machine's cost that no driver code can remove taken out of both.
fn print_warm_ratios(shape: &str, entries: &[WarmEntry<'_>], rounds: &[Vec<Option<Warm>>]) {
    let ours: Vec<usize> = (0..entries.len()).filter(|&i| entries[i].ours).collect();
    let others: Vec<usize> = (0..entries.len()).filter(|&i| !entries[i].ours).collect();
    let floor = others.iter().copied().find(|&i| entries[i].name == "floor");
    for &mine in &ours {
        for &other in &others {
            print_ratio(shape, "warm CPU", entries, (mine, other), rounds, |round| {
                Some(round[mine]?.cpu / round[other]?.cpu * 100.0)
            });
            let Some(floor) = floor.filter(|&floor| floor != other) else {
                continue;
            };
            print_ratio(
                shape,
                "above floor",
                entries,
                (mine, other),
                rounds,
                |round| {
                    let floor = round[floor]?.cpu;
                    Some((round[mine]?.cpu - floor) / (round[other]?.cpu - floor) * 100.0)
                },
            );
        }
    }
}

/// One line of [`print_warm_ratios`]: `ratio` of each round and their median.
fn print_ratio(
    shape: &str,
    what: &str,
    entries: &[WarmEntry<'_>],
    (mine, other): (usize, usize),
    rounds: &[Vec<Option<Warm>>],
    ratio: impl Fn(&Vec<Option<Warm>>) -> Option<f64>,
) {
    let ratios: Vec<f64> = rounds.iter().filter_map(ratio).collect();
    let Some(middle) = median(ratios.clone()) else {
        return;
    };
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.0}")).collect();
    println!(
        "{shape:<28} {what} {} / {}: median {middle:.0} % (rounds: {} %)",
        entries[mine].name,
        entries[other].name,
        each.join(", ")
    );
}

fn print_throughput(standalone: &TestServer, drivers: &[Driver]) {
    let docs: u32 = std::env::var("SHAPES_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!();
    println!("against SecantusDB directly ({docs} documents of {{_id, x, s}}, ~45 bytes):");
    println!(
        "{:<14} {:>42} {:>42}",
        "driver", "insert_many docs/s  MB/s  cpu us/doc", "cursor docs/s  MB/s  cpu us/doc"
    );
    for driver in drivers {
        let collection = format!("many_{}", driver.name.replace('-', "_"));
        drop_collection(&standalone.uri(), &collection);
        let insert = run_line(
            &driver.bench_find,
            &[
                "insert",
                &standalone.uri(),
                DB,
                &collection,
                &docs.to_string(),
            ],
        );
        let cursor = run_line(
            &driver.bench_find,
            &[
                "cursor",
                &standalone.uri(),
                DB,
                &collection,
                &docs.to_string(),
            ],
        );
        println!(
            "{:<14} {:>42} {:>42}",
            driver.name,
            throughput_cells(insert.as_deref()),
            throughput_cells(cursor.as_deref())
        );
        drop_collection(&standalone.uri(), &collection);
    }
}

fn print_size(standalone: &TestServer, drivers: &[Driver], cli: &Path) {
    println!();
    println!(
        "{:<14} {:>26} {:>16}",
        "driver", "peak RSS, one find_one", "binary size"
    );
    let rss = peak_rss_kib(cli, &[&standalone.uri(), "find", "bench.c", "{\"_id\": 1}"]);
    println!(
        "{:<14} {:>23} KiB {:>12} KiB",
        "CLI (ours)",
        rss.map_or("-".to_owned(), |k| k.to_string()),
        file_kib(cli)
    );
    for driver in drivers {
        let rss = peak_rss_kib(
            &driver.bench_find,
            &["cold", &standalone.uri(), DB, COLL, "1"],
        );
        println!(
            "{:<14} {:>23} KiB {:>12} KiB",
            driver.name,
            rss.map_or("-".to_owned(), |k| k.to_string()),
            file_kib(&driver.bench_find)
        );
    }
}

fn print_syscalls(standalone: &TestServer, drivers: &[Driver]) {
    println!();
    println!("system calls per warm find_one (strace -c -f, {SYSCALL_OPS} operations):");
    for driver in drivers {
        match syscalls_per_op(driver, &standalone.uri()) {
            Some(calls) => println!("{:<14} {calls}", driver.name),
            None => println!(
                "{:<14} - (strace not available or the run failed)",
                driver.name
            ),
        }
    }
}

fn print_footprint(standalone: &TestServer, drivers: &[Driver]) {
    println!();
    println!(
        "per warm find_one (callgrind, lackey): instructions, hot code in 64-byte lines and \
         4 KiB pages, data touched by every operation"
    );
    for driver in drivers {
        match footprint::measure(driver, &standalone.uri()) {
            Some(f) => {
                let data = footprint::measure_data(driver, &standalone.uri()).map_or(
                    "data: -".to_owned(),
                    |d| {
                        format!(
                            "data: {:>4} lines ({} stack) {:>3} pages",
                            d.lines, d.stack_lines, d.pages
                        )
                    },
                );
                println!(
                    "{:<14} {:>8} instructions {:>6} lines {:>5} pages   {data}",
                    driver.name, f.instructions_per_op, f.code_lines, f.code_pages
                )
            }
            None => println!(
                "{:<14} - (valgrind not available or the run failed)",
                driver.name
            ),
        }
    }
}

/// Round trips of a cold `find_one` on a standalone with TLS 1.3 and
/// SCRAM-SHA-256 (the URI names the mechanism, so speculative
/// authentication can start in the hello), through a `DelayProxy`.
fn print_tls_scram(drivers: &[Driver]) {
    let server = support::tls::tls_auth_server();
    seed_document(&support::tls::scram_sha_256_uri(server.port()));
    let proxy = DelayProxy::start(server.port());
    let uri = support::tls::scram_sha_256_uri(proxy.port());
    println!();
    println!(
        "TLS 1.3 + SCRAM-SHA-256 on a standalone: each server -> client chunk delayed {DELAY:?} \
         by a byte-level proxy; round trips exclude the TCP connect (add one)"
    );
    for driver in drivers {
        let args = ["cold", uri.as_str(), DB, COLL, "1"];
        let time_runs = || -> Option<Duration> {
            let mut samples = Vec::new();
            for _ in 0..COLD_RUNS {
                let start = Instant::now();
                let line = run_line(&driver.bench_find, &args)?;
                samples.push(start.elapsed());
                if !line.starts_with("DOC {") {
                    eprintln!("{}: unexpected output {line:?}", driver.name);
                    return None;
                }
            }
            median(samples)
        };
        proxy.set_delay(Duration::ZERO);
        let quick = time_runs();
        proxy.set_delay(DELAY);
        let delayed = time_runs();
        proxy.set_delay(Duration::ZERO);
        let figure = match (quick, delayed) {
            (Some(quick), Some(delayed)) => {
                let extra = delayed.saturating_sub(quick).as_secs_f64() / DELAY.as_secs_f64();
                format!("{:.0} ({extra:.2})", extra.round())
            }
            _ => "-".to_owned(),
        };
        println!("{:<14} round trips {figure}", driver.name);
    }
}

const SYSCALL_OPS: u32 = 2000;

/// System calls per warm operation, by name, from `strace -c -f` around a
/// warm run (start-up and the first, connecting operation included, so
/// counts are rounded to a tenth).
fn syscalls_per_op(driver: &Driver, uri: &str) -> Option<String> {
    let summary = std::env::temp_dir().join(format!(
        "shapes-strace-{}-{}.txt",
        std::process::id(),
        driver.name
    ));
    let status = Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&summary)
        .arg(&driver.bench_find)
        .args(["warm", uri, DB, COLL, &SYSCALL_OPS.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    let text = std::fs::read_to_string(&summary).ok();
    let _ = std::fs::remove_file(&summary);
    if !status.success() {
        return None;
    }
    let ops = f64::from(SYSCALL_OPS);
    let mut total = 0.0;
    let mut frequent = Vec::new();
    for line in text?.lines() {
        // "% time seconds usecs/call calls [errors] syscall"
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 5 || fields[0].starts_with('%') || fields[0].starts_with('-') {
            continue;
        }
        let (Some(name), Ok(calls)) = (fields.last(), fields[3].parse::<f64>()) else {
            continue;
        };
        if *name == "total" {
            total = calls / ops;
        } else if calls / ops >= 0.05 {
            frequent.push(format!("{name} {:.1}", calls / ops));
        }
    }
    Some(format!("{total:.1} ({})", frequent.join(", ")))
}

/// Builds the release CLI and bench_find; returns the release directory.
fn build_release() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(manifest_dir)
        .args([
            "build",
            "--release",
            "--bin",
            "mongo-inline",
            "--example",
            "bench_find",
        ])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the release build failed");
    target_dir().join("release")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

/// The plain release build of the C ABI's static library.
fn build_plain_c_library() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["rustc", "--release", "--lib", "--features", "capi"])
        .args(["--crate-type", "cdylib", "--crate-type", "staticlib"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the C ABI's release build failed");
    target_dir().join("release/libmongo_inline.a")
}

/// The C ABI's `benches/capi/bench_find.c` (cold and warm modes), linked
/// with the static `library` as a binding embeds it and built beside it;
/// `None`, said, when there is no C compiler.
fn build_c_abi_bench(library: &Path, name: &str) -> Option<Driver> {
    let program = library.with_file_name("bench_find_capi");
    let compiled = Command::new("gcc")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-O2", "-Wall", "-Werror", "-Iinclude", "-o"])
        .arg(&program)
        .arg("benches/capi/bench_find.c")
        .arg(library)
        .args(["-lpthread", "-ldl", "-lm"])
        .status();
    match compiled {
        Ok(status) => {
            assert!(
                status.success(),
                "benches/capi/bench_find.c does not compile"
            );
            Some(Driver {
                name: name.to_owned(),
                bench_find: program,
                ours: true,
                both_result_types: false,
            })
        }
        Err(error) => {
            println!("(no C ABI figures: gcc did not run: {error}; SHAPES_CAPI=0 skips them)");
            None
        }
    }
}

/// What `.ci/pgo-build` built.
struct ProfileGuided {
    bench_find: PathBuf,
    /// The C ABI's static library.
    c_library: PathBuf,
}

/// Runs `.ci/pgo-build` (the instrumented builds, their training runs, the
/// optimised builds); it names what it built on stdout, one per line,
/// `bench_find` last.
fn build_profile_guided() -> ProfileGuided {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("bash")
        .current_dir(manifest_dir)
        .arg(".ci/pgo-build")
        .stderr(Stdio::inherit())
        .output()
        .expect("bash runs .ci/pgo-build");
    assert!(
        output.status.success(),
        "the profile-guided build failed (SHAPES_PGO=0 skips it)"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let built: Vec<PathBuf> = stdout.lines().map(PathBuf::from).collect();
    let bench_find = built.last().expect("pgo-build names its binaries").clone();
    let c_library = built
        .iter()
        .find(|path| {
            path.file_name()
                .is_some_and(|name| name == "libmongo_inline.a")
        })
        .expect("pgo-build names the C ABI's static library")
        .clone();
    for path in [&bench_find, &c_library] {
        assert!(path.exists(), "{} does not exist", path.display());
    }
    ProfileGuided {
        bench_find,
        c_library,
    }
}

fn compared_drivers() -> Vec<Driver> {
    let Ok(list) = std::env::var("SHAPES_COMPARE") else {
        return Vec::new();
    };
    list.split(',')
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| {
            let (name, path) = entry
                .split_once('=')
                .expect("SHAPES_COMPARE entries are name=path");
            let bench_find = PathBuf::from(path.trim());
            assert!(
                bench_find.exists(),
                "{} does not exist",
                bench_find.display()
            );
            Driver {
                name: name.trim().to_owned(),
                bench_find,
                ours: false,
                both_result_types: false,
            }
        })
        .collect()
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
        .expect("the document find_one looks up");
}

fn drop_collection(uri: &str, name: &str) {
    let client = Client::with_uri_str(uri).expect("client");
    let _ = client.database(DB).run_command(doc! { "drop": name }).run();
}

#[derive(Clone)]
struct Cold {
    round_trips: i64,
    /// The unrounded figure, to show the noise.
    exact: f64,
    connections: Vec<usize>,
    hellos: Vec<usize>,
}

/// Round trips as (time with delay − time without) / delay, medians of
/// `COLD_RUNS` cold runs each; connections and hellos from the last run.
fn cold_round_trips(sim: &Simulator, driver: &Driver, uri: &str) -> Option<Cold> {
    let args = ["cold", uri, DB, COLL, "1"];
    let time_runs = |sim: &Simulator| -> Option<Duration> {
        let mut samples = Vec::new();
        for _ in 0..COLD_RUNS {
            sim.reset_observations();
            let start = Instant::now();
            let line = run_line(&driver.bench_find, &args)?;
            samples.push(start.elapsed());
            if !line.starts_with("DOC {") {
                eprintln!("{}: unexpected output {line:?}", driver.name);
                return None;
            }
        }
        median(samples)
    };
    set_delay(sim, Duration::ZERO);
    let quick = time_runs(sim)?;
    set_delay(sim, DELAY);
    let delayed = time_runs(sim);
    let counts = (0..sim.len())
        .map(|i| (sim.connections(i), sim.hellos(i)))
        .collect::<Vec<_>>();
    set_delay(sim, Duration::ZERO);
    let delayed = delayed?;
    let extra = delayed.saturating_sub(quick).as_secs_f64() / DELAY.as_secs_f64();
    Some(Cold {
        round_trips: extra.round() as i64,
        exact: extra,
        connections: counts.iter().map(|c| c.0).collect(),
        hellos: counts.iter().map(|c| c.1).collect(),
    })
}

fn set_delay(sim: &Simulator, delay: Duration) {
    for i in 0..sim.len() {
        sim.delay_replies(i, delay);
    }
}

/// One warm run's figures: ops/s, CPU µs per operation, and how often per
/// operation the scheduler took the CPU from the driver (involuntary
/// context switches; each costs a switch back in), when it says.
#[derive(Clone, Copy)]
struct Warm {
    ops: f64,
    cpu: f64,
    preempted: Option<f64>,
}

/// One warm figure to take: a driver's `warm` mode, or ours in another.
struct WarmEntry<'a> {
    name: String,
    program: &'a Path,
    mode: &'static str,
    /// Which of the drivers it is (for the cold figures), if it is one.
    driver: Option<usize>,
    ours: bool,
}

/// Every driver's `warm`, and ours again with results kept as bytes
/// (`warm-raw`): libmongoc's `find_one` hands back a copy of the bytes
/// (`bson_copy`), ours a parsed `Document`; the raw row is the like for
/// like, the `Document` row what most callers use.
fn warm_entries(drivers: &[Driver]) -> Vec<WarmEntry<'_>> {
    let mut entries = Vec::new();
    for (i, driver) in drivers.iter().enumerate() {
        let ours = driver.ours;
        entries.push(WarmEntry {
            name: driver.name.clone(),
            program: &driver.bench_find,
            mode: "warm",
            driver: Some(i),
            ours,
        });
        if driver.both_result_types {
            entries.push(WarmEntry {
                name: format!("{} raw", driver.name),
                program: &driver.bench_find,
                mode: "warm-raw",
                driver: None,
                ours,
            });
        }
    }
    entries
}

/// `WARM_RUNS` rounds, each a warm run of every entry in turn: a slow
/// spell of the machine (it is shared, and the server runs on it) falls on
/// the drivers alike instead of on whichever ran then.
fn warm_rounds(entries: &[WarmEntry<'_>], uri: &str) -> Vec<Vec<Option<Warm>>> {
    (0..WARM_RUNS)
        .map(|_| {
            entries
                .iter()
                .map(|entry| warm_run(entry.program, entry.mode, uri))
                .collect()
        })
        .collect()
}

fn warm_run(program: &Path, mode: &str, uri: &str) -> Option<Warm> {
    let line = run_line(program, &[mode, uri, DB, COLL, &WARM_OPS.to_string()])?;
    Some(Warm {
        ops: field(&line, "ops_per_s")?,
        cpu: field(&line, "cpu_us_per_op")?,
        preempted: field(&line, "preempted_per_op"),
    })
}

fn cli_spawn_to_exit(cli: &Path, uri: &str) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..CLI_RUNS {
        let start = Instant::now();
        let output = Command::new(cli)
            .args([uri, "find", "bench.c", "{\"_id\": 1}"])
            .stderr(Stdio::inherit())
            .output()
            .expect("the CLI runs");
        samples.push(start.elapsed());
        assert!(output.status.success(), "the CLI failed");
    }
    median(samples).expect("CLI_RUNS is not 0")
}

/// The program's last line of output, or `None` (with its stderr shown) if
/// it failed.
fn run_line(program: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .expect("the program runs");
    if !output.status.success() {
        let shown: Vec<String> = args.iter().map(|arg| without_credentials(arg)).collect();
        eprintln!(
            "{} {shown:?} failed: {}",
            program.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        return None;
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .map(str::to_owned)
}

/// `arg` with a connection string's `user:password@` replaced by `***@`.
fn without_credentials(arg: &str) -> String {
    match (arg.find("://"), arg.find('@')) {
        (Some(scheme), Some(at)) if scheme < at => {
            format!("{}***{}", &arg[..scheme + 3], &arg[at..])
        }
        _ => arg.to_owned(),
    }
}

fn field(line: &str, name: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

fn throughput_cells(line: Option<&str>) -> String {
    let Some(line) = line else {
        return "-".to_owned();
    };
    match (
        field(line, "docs_per_s"),
        field(line, "mb_per_s"),
        field(line, "cpu_us_per_doc"),
    ) {
        (Some(d), Some(m), Some(c)) => format!("{d:>10.0} {m:>6.2} {c:>10.2}"),
        _ => format!("unreadable: {line}"),
    }
}

/// Peak resident set of one run, from GNU time's `%M` (KiB).
fn peak_rss_kib(program: &Path, args: &[&str]) -> Option<u64> {
    let output = Command::new("/usr/bin/time")
        .args(["-f", "PEAK_RSS_KIB=%M"])
        .arg(program)
        .args(args)
        .output()
        .ok()?;
    // A program that does not speak the mode (the floor's has no `cold`)
    // exits at once with a usage error: its RSS is no query's.
    if !output.status.success() {
        return None;
    }
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("PEAK_RSS_KIB="))
        .and_then(|v| v.trim().parse().ok())
}

fn file_kib(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len() / 1024)
}

/// The median of `values` (the upper one of an even count); `None` when
/// there are none.
fn median<T: PartialOrd + Copy>(mut values: Vec<T>) -> Option<T> {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values.get(values.len() / 2).copied()
}

fn join(values: &[usize]) -> String {
    values
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("/")
}
