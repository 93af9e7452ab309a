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
//! time it used (`/proc/self/schedstat`, nanoseconds) and its minor page
//! faults (`/proc/self/stat`), and the parent prints their medians and the
//! CPU's minimum.
//!
//! Load skews CPU time; instruction counts it cannot. Run one child under
//! callgrind (`valgrind --tool=callgrind cold_start --child URI`) for its
//! user-space instructions, and convert them with this machine's rate,
//! which `cold_start --calibrate N` measures on the crypto a second
//! process's TLS + SCRAM start adds to a plain one: the state file's
//! sealing key (PBKDF2-HMAC-SHA256, `SEAL_ROUNDS`), one ECDSA P-256
//! signature check (the server's CertificateVerify) and one X25519 key
//! exchange (two scalar multiplications), N rounds, printing the least time
//! of one round in nanoseconds (a round does no I/O: the least is one no
//! other process preempted or slowed); the same under callgrind with two
//! values of N gives the instructions of one round. benches/README.md has
//! the method and the figures.

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
        println!("{nanos} {}", minor_faults().unwrap_or(0));
    }
    Ok(())
}

/// The CPU time this process used so far (Linux), in nanoseconds.
fn cpu_nanos() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The minor page faults of this process so far (Linux): `/proc/self/stat`'s
/// tenth field, counted after the command name's closing parenthesis.
fn minor_faults() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &text[text.rfind(')')? + 1..];
    after_name.split_whitespace().nth(7)?.parse().ok()
}

/// `--calibrate N`: see the module docs.
fn calibrate(rounds: usize) {
    use ring::agreement::{self, EphemeralPrivateKey, X25519};
    use ring::signature::{self, EcdsaKeyPair, KeyPair as _, UnparsedPublicKey};
    let rng = ring::rand::SystemRandom::new();
    let signing = &signature::ECDSA_P256_SHA256_ASN1_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(signing, &rng).expect("a key");
    let pair = EcdsaKeyPair::from_pkcs8(signing, pkcs8.as_ref(), &rng).expect("the key");
    let message = [7u8; 256];
    let signed = pair.sign(&rng, &message).expect("a signature");
    let server_key = UnparsedPublicKey::new(
        &signature::ECDSA_P256_SHA256_ASN1,
        pair.public_key().as_ref().to_vec(),
    );
    let peer = EphemeralPrivateKey::generate(&X25519, &rng)
        .and_then(|k| k.compute_public_key())
        .expect("a peer key");
    // `proto::state_file::SEAL_ROUNDS` (not exported: a rule's constant).
    let rounds_of_seal = std::num::NonZeroU32::new(256).expect("a positive constant");
    let mut least = Duration::MAX;
    for _ in 0..rounds.max(1) {
        let before = Instant::now();
        let mut key = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            rounds_of_seal,
            b"mongo-inline state v1 binding and nonce",
            b"a prepared password",
            &mut key,
        );
        server_key
            .verify(&message, signed.as_ref())
            .expect("the signature checks");
        let mine = EphemeralPrivateKey::generate(&X25519, &rng).expect("a key");
        let _public = mine.compute_public_key().expect("its public key");
        agreement::agree_ephemeral(
            mine,
            &agreement::UnparsedPublicKey::new(&X25519, peer.as_ref()),
            |secret| secret[0],
        )
        .expect("an agreement");
        least = least.min(before.elapsed());
    }
    println!(
        "least time of one crypto round over {rounds} rounds: {} ns",
        least.as_nanos()
    );
}

fn median_ms(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--calibrate") {
        calibrate(args.get(2).and_then(|n| n.parse().ok()).unwrap_or(200));
        return;
    }
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
    let mut faults: Vec<f64> = Vec::with_capacity(runs);
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
        let mut fields = reported.split_whitespace().map(str::parse::<u64>);
        if let Some(Ok(nanos)) = fields.next() {
            cpu.push(nanos as f64 / 1e6);
        }
        if let Some(Ok(count)) = fields.next() {
            faults.push(count as f64);
        }
    }
    if !cpu.is_empty() {
        let least = cpu.iter().copied().fold(f64::MAX, f64::min);
        println!(
            "CPU per child over {} runs: median {:.2} ms, least {least:.2} ms",
            cpu.len(),
            median_ms(cpu)
        );
    }
    if !faults.is_empty() {
        println!("minor page faults per child: median {}", median_ms(faults));
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
