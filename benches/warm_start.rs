//! A first and a second process side by side with the peers: each driver's
//! `bench_find cold` (one `find_one` by `_id`, then exit; the protocol of
//! `benches/tools/bench_find.rs`) through a `mongodb+srv` URI to a TLS +
//! SCRAM-SHA-256 replica set of three, issue 41's deployment:
//!
//! - a loopback DNS server (`tests/support/dns.rs`) answering the SRV and
//!   TXT look-ups (`replicaSet`, `authSource`) and the members' A/AAAA;
//! - three simulated members (`tests/support/sim.rs`, a primary and two
//!   secondaries in front of one SecantusDB with `--auth`), each behind a
//!   TLS terminator (`tests/support/tls_terminator.rs`, a certificate for
//!   `db<i>.bench.example` signed by a CA made here) and a byte-level
//!   [`DelayProxy`]; their hellos name those host names and ports.
//!
//! Drivers only read the system's resolver configuration (libmongoc,
//! the official Rust driver), so the bench re-runs itself in a private mount
//! namespace (`unshare --mount`, which needs root) whose `/etc/resolv.conf`
//! names the loopback DNS server at 127.41.0.1:53; ours reads the same file.
//!
//! Per driver, a *first* process and a *second* one, alternated. Ours runs
//! with `MONGO_INLINE_STATE_FILE`: the file is removed before each first
//! process, which writes it; the second starts from it. The peers keep no
//! state between processes, so their second process is a cold start again
//! (measured anyway). Every run goes through `tools/timed_run.py` (spawn →
//! first line of output, spawn → exit, CPU of every thread from `wait4`).
//! Round trips to the first result are (median time to the result with
//! every DNS reply and every server → client chunk delayed by D − median
//! without) / D; the TCP connect is not delayed. The DNS questions and the
//! members' connections are counted per process.
//!
//! ```text
//! cargo build --release --example bench_find
//! WARM_START_COMPARE=libmongoc=target/bench_find_libmongoc,official=target/official/release/bench_find_official \
//!     SECANTUSD=.venv/bin/secantusd-py cargo bench --bench warm_start
//! ```
//!
//! `WARM_START_RUNS` (default 15) sets the runs per driver, process and
//! delay; `WARM_START_DELAY_MS` (default 100) sets D. benches/README.md has the
//! method and the figures.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use bson::doc;
use mongo_inline::Client;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use support::delay_proxy::DelayProxy;
use support::dns::{a, srv, txt, DnsServer};
use support::sim::{Role, Simulator};
use support::tls::{encoded, plain_auth_server, PASSWORD};
use support::tls_terminator::{server_config, terminate_tls};

/// Set in the re-run inside the private mount namespace.
const IN_NAMESPACE: &str = "WARM_START_IN_NAMESPACE";
/// The loopback address the private `resolv.conf` names (port 53, the only
/// port a `resolv.conf` can name).
const NAME_SERVER: Ipv4Addr = Ipv4Addr::new(127, 41, 0, 1);
const SRV_HOST: &str = "cluster0.bench.example";
const SET_NAME: &str = "rs0";
/// A user of the bench's own with an ASCII password, so that no driver's
/// SASLprep is in question.
const USER: &str = "warmstart";
const USER_PASSWORD: &str = "warm-start-password";
const DB: &str = "warmstart";
const COLL: &str = "docs";
const STATE_FILE: &str = "MONGO_INLINE_STATE_FILE";

fn main() -> ExitCode {
    if std::env::var_os(IN_NAMESPACE).is_none() {
        return rerun_in_private_namespace();
    }
    let scratch = Scratch::new();
    point_resolver_at(NAME_SERVER, &scratch.0);
    let drivers = drivers();
    let deployment = Deployment::start(&scratch.0);
    let runs = env_number("WARM_START_RUNS", 15);
    let delay = Duration::from_millis(env_number("WARM_START_DELAY_MS", 100) as u64);
    let state_file = scratch.0.join("state");
    let mut samples: HashMap<(usize, Process, bool), Vec<Sample>> = HashMap::new();
    for delayed in [false, true] {
        deployment.set_delay(if delayed { delay } else { Duration::ZERO });
        for round in 0..=runs {
            for (d, driver) in drivers.iter().enumerate() {
                for process in [Process::First, Process::Second] {
                    let sample = deployment.run(driver, process, &state_file);
                    // Round 0 warms the page cache and the servers up.
                    if round > 0 {
                        samples
                            .entry((d, process, delayed))
                            .or_default()
                            .push(sample);
                    }
                }
            }
        }
    }
    print_table(&drivers, &samples, delay, runs);
    ExitCode::SUCCESS
}

/// Runs this bench again under `unshare --mount`, so that its bind mount
/// over `/etc/resolv.conf` stays private to it and its children.
fn rerun_in_private_namespace() -> ExitCode {
    let exe = std::env::current_exe().expect("the bench's own path");
    let status = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(IN_NAMESPACE, "1")
        .status();
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!(
                "warm_start: the run in a private mount namespace failed ({status}); it needs \
                 root (unshare --mount, mount --bind) to give the drivers their own resolv.conf"
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("warm_start: cannot run unshare (util-linux): {e}");
            ExitCode::FAILURE
        }
    }
}

/// Bind-mounts a `resolv.conf` naming only `server` over `/etc/resolv.conf`
/// (in this process's private mount namespace).
fn point_resolver_at(server: Ipv4Addr, dir: &Path) {
    let file = dir.join("resolv.conf");
    std::fs::write(&file, format!("nameserver {server}\n")).expect("writing resolv.conf");
    let status = Command::new("mount")
        .arg("--bind")
        .arg(&file)
        .arg("/etc/resolv.conf")
        .status()
        .expect("mount runs");
    assert!(
        status.success(),
        "mount --bind over /etc/resolv.conf failed"
    );
}

/// A directory of this run's own (mode 0700, as the state file requires),
/// removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = target_dir().join(format!("tmp/warm-start-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .expect("the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().map_or(default, |v| {
        v.parse().unwrap_or_else(|_| panic!("{name}: a number"))
    })
}

/// A `bench_find` program and whether it reads the state file.
struct Driver {
    name: String,
    program: PathBuf,
    state_file: bool,
}

/// Ours (the release build of `bench_find`, built first, or the program
/// `WARM_START_OURS` names) and the programs `WARM_START_COMPARE` names
/// (`name=path,...`).
fn drivers() -> Vec<Driver> {
    let ours = std::env::var_os("WARM_START_OURS").map_or_else(
        || target_dir().join("release/examples/bench_find"),
        PathBuf::from,
    );
    assert!(
        ours.exists(),
        "{} is missing: cargo build --release --example bench_find",
        ours.display()
    );
    let mut drivers = vec![Driver {
        name: "mongo-inline".into(),
        program: ours,
        state_file: true,
    }];
    let compare = std::env::var("WARM_START_COMPARE").unwrap_or_default();
    for entry in compare.split(',').filter(|e| !e.is_empty()) {
        let (name, path) = entry
            .split_once('=')
            .expect("WARM_START_COMPARE: name=path,...");
        let program = PathBuf::from(path);
        assert!(program.exists(), "{}: no such program", program.display());
        drivers.push(Driver {
            name: name.into(),
            program,
            state_file: false,
        });
    }
    drivers
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Process {
    First,
    Second,
}

/// One process's figures.
#[derive(Clone, Copy)]
struct Sample {
    result_ms: f64,
    exit_ms: f64,
    cpu_ms: f64,
    dns_questions: usize,
    connections: usize,
}

/// The DNS server, the simulated members and what sits in front of them.
struct Deployment {
    sim: Simulator,
    proxies: Vec<DelayProxy>,
    dns: DnsServer,
    uri: String,
}

impl Deployment {
    fn start(dir: &Path) -> Deployment {
        let backend = plain_auth_server();
        provision(&backend.address());
        let members = 3;
        let names: Vec<String> = (0..members)
            .map(|i| format!("db{i}.bench.example"))
            .collect();
        let ca = write_certificates(dir, &names);
        let config = server_config(
            &dir.join("server.pem").to_string_lossy(),
            &dir.join("server-key.pem").to_string_lossy(),
        );
        let sim = Simulator::replica_set(
            SET_NAME,
            backend,
            &[Role::Primary, Role::Secondary, Role::Secondary],
        );
        let proxies: Vec<DelayProxy> = (0..members)
            .map(|i| DelayProxy::start(terminate_tls(config.clone(), sim.port(i))))
            .collect();
        let hosts: Vec<String> = (0..members)
            .map(|i| format!("{}:{}", names[i], proxies[i].port()))
            .collect();
        let mut records = vec![txt(
            SRV_HOST,
            &format!("replicaSet={SET_NAME}&authSource=admin"),
        )];
        for i in 0..members {
            // The members name themselves and each other as the SRV does.
            sim.set_hello_extra(
                i,
                doc! { "hosts": hosts.clone(), "me": hosts[i].clone(), "primary": hosts[0].clone() },
            );
            let srv_name = format!("_mongodb._tcp.{SRV_HOST}");
            records.push(srv(&srv_name, proxies[i].port(), &names[i], 300));
            records.push(a(&names[i], Ipv4Addr::LOCALHOST));
        }
        let dns = DnsServer::start_at(SocketAddr::from((NAME_SERVER, 53)), records);
        let uri = format!(
            "mongodb+srv://{USER}:{USER_PASSWORD}@{SRV_HOST}/?authMechanism=SCRAM-SHA-256\
             &tlsCAFile={}&serverSelectionTimeoutMS=10000",
            ca.display()
        );
        Deployment {
            sim,
            proxies,
            dns,
            uri,
        }
    }

    fn set_delay(&self, delay: Duration) {
        self.dns.set_delay(delay);
        for proxy in &self.proxies {
            proxy.set_delay(delay);
        }
    }

    /// One process of `driver`, checked: it must print the document.
    fn run(&self, driver: &Driver, process: Process, state_file: &Path) -> Sample {
        let mut command = Command::new("python3");
        command
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/tools/timed_run.py"))
            .arg(&driver.program)
            .args(["cold", &self.uri, DB, COLL, "1"]);
        if driver.state_file {
            if process == Process::First {
                let _ = std::fs::remove_file(state_file);
            }
            command.env(STATE_FILE, state_file);
        }
        let questions = self.dns.questions();
        self.sim.reset_observations();
        let output = command.output().expect("python3 runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stdout.starts_with("DOC ") && stdout.contains("warm start"),
            "{}: {}\n{stdout}{stderr}",
            driver.name,
            output.status
        );
        let timed = stderr
            .lines()
            .find_map(|line| line.strip_prefix("TIMED "))
            .expect("timed_run.py's line");
        let field = |name: &str| -> f64 {
            timed
                .split_whitespace()
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {timed:?}"))
        };
        Sample {
            result_ms: field("result_ms"),
            exit_ms: field("wall_ms"),
            cpu_ms: field("cpu_ms"),
            dns_questions: self.dns.questions() - questions,
            connections: (0..self.sim.len()).map(|i| self.sim.connections(i)).sum(),
        }
    }
}

/// The bench's user and document, through alice (the tests' root user).
fn provision(backend: &str) {
    let uri = format!(
        "mongodb://alice:{}@{backend}/?authMechanism=SCRAM-SHA-256",
        encoded(PASSWORD)
    );
    let client = Client::with_uri_str(&uri).expect("alice's client");
    let _ = client
        .database("admin")
        .run_command(doc! { "dropUser": USER })
        .run();
    client
        .database("admin")
        .run_command(doc! {
            "createUser": USER, "pwd": USER_PASSWORD, "mechanisms": ["SCRAM-SHA-256"],
            "roles": [{ "role": "readWrite", "db": DB }],
        })
        .run()
        .expect("createUser");
    let docs = client.database(DB).collection::<bson::Document>(COLL);
    docs.delete_many(doc! {})
        .run()
        .expect("emptying the collection");
    docs.insert_one(doc! { "_id": 1, "greeting": "warm start" })
        .run()
        .expect("the document");
}

/// A CA and one server certificate for `names`, as PEM files in `dir`;
/// returns the CA file's path.
fn write_certificates(dir: &Path, names: &[String]) -> PathBuf {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "warm_start bench CA");
    let ca_key = KeyPair::generate().expect("a CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("the CA certificate");
    let mut server = CertificateParams::new(names.to_vec()).expect("server parameters");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().expect("a server key");
    let server_cert = server
        .signed_by(&server_key, &ca_cert, &ca_key)
        .expect("the server certificate");
    let write =
        |name: &str, text: String| std::fs::write(dir.join(name), text).expect("a PEM file");
    write("ca.pem", ca_cert.pem());
    write("server.pem", server_cert.pem());
    write("server-key.pem", server_key.serialize_pem());
    dir.join("ca.pem")
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn print_table(
    drivers: &[Driver],
    samples: &HashMap<(usize, Process, bool), Vec<Sample>>,
    delay: Duration,
    runs: usize,
) {
    let delay_ms = delay.as_secs_f64() * 1e3;
    println!(
        "| driver | process | round trips to the first result | result ms | spawn → exit ms | CPU ms | DNS questions | connections |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (d, driver) in drivers.iter().enumerate() {
        for process in [Process::First, Process::Second] {
            let at = |delayed: bool| &samples[&(d, process, delayed)];
            let of = |delayed: bool, pick: fn(&Sample) -> f64| {
                median(at(delayed).iter().map(pick).collect())
            };
            let result_0 = of(false, |s| s.result_ms);
            let trips = (of(true, |s| s.result_ms) - result_0) / delay_ms;
            let label = match (process, driver.state_file) {
                (Process::First, _) => "first",
                (Process::Second, true) => "second (state file)",
                (Process::Second, false) => "second (cold again)",
            };
            println!(
                "| {} | {label} | {trips:.1} | {result_0:.1} | {:.1} | {:.1} | {} | {} |",
                driver.name,
                of(false, |s| s.exit_ms),
                of(false, |s| s.cpu_ms),
                of(false, |s| s.dns_questions as f64),
                of(false, |s| s.connections as f64),
            );
        }
    }
    println!(
        "(medians of {runs} processes each; times and CPU without delay, round trips from a \
         {delay_ms:.0} ms delay on every DNS reply and server → client chunk)"
    );
}
