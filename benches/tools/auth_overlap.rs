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

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::Client;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};
use support::delay_proxy::DelayProxy;
use support::sim::Simulator;
use support::tls::{certs, encoded, plain_auth_server, PASSWORD};

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
    let config = server_config();
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

/// The test server certificate (`localhost`, signed by the tests' CA).
fn server_config() -> Arc<ServerConfig> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_file_iter(certs().path("server.pem"))
            .expect("server.pem")
            .collect::<Result<_, _>>()
            .expect("a certificate chain");
    let key = PrivateKeyDer::from_pem_file(certs().path("server-key.pem")).expect("the key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("the server certificate");
    Arc::new(config)
}

/// Listens on an ephemeral port; each socket's TLS is ended here and its
/// bytes go on in plain to 127.0.0.1:`upstream`. Returns the port.
fn terminate_tls(config: Arc<ServerConfig>, upstream: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("an address").port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue;
            };
            let config = config.clone();
            std::thread::spawn(move || relay(client, server, config));
        }
    });
    port
}

/// Moves bytes both ways between a TLS client and a plain server, both
/// sockets non-blocking, napping 100 µs when neither side had anything
/// (well below the delays measured).
fn relay(mut client: TcpStream, mut server: TcpStream, config: Arc<ServerConfig>) {
    let (Ok(mut tls), Ok(()), Ok(())) = (
        ServerConnection::new(config),
        client.set_nonblocking(true),
        server.set_nonblocking(true),
    ) else {
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let mut busy = false;
        match tls.read_tls(&mut client) {
            Ok(0) => return,
            Ok(_) => {
                busy = true;
                if tls.process_new_packets().is_err() {
                    let _ = tls.write_tls(&mut client);
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
        loop {
            match tls.reader().read(&mut buffer) {
                Ok(0) => return,
                Ok(n) => {
                    busy = true;
                    if write_all(&mut server, &buffer[..n]).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return,
            }
        }
        match server.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => {
                busy = true;
                if tls.writer().write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
        while tls.wants_write() {
            match tls.write_tls(&mut client) {
                Ok(_) => busy = true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return,
            }
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// `write_all` on a non-blocking socket: retries while its buffer is full.
fn write_all(socket: &mut TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match socket.write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(100));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
