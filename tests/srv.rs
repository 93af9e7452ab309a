//! `mongodb+srv` and DNS end to end, against a loopback DNS server and
//! the topology simulator: the look-up is lazy and asks SRV and TXT at
//! once, DNS failures are bounded by connectTimeoutMS and timeoutMS and
//! name the record, member host names go through the same resolver, and
//! SRV polling adds and removes mongoses. A failing name server is
//! passed over, CNAME chains are followed, and no thread outlives a look-up.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::unversioned::{set_clock_skew, ClockSkew};
use mongo_inline::{Client, ClientOptions};

use support::dns::{a, cname, srv, DnsServer, ZoneRecord};
use support::events::Recorder;
use support::server::TestServer;
use support::sim::Simulator;

const HOST: &str = "cluster0.test.build.10gen.cc";
const MEMBER: &str = "localhost.test.build.10gen.cc";

fn srv_name() -> String {
    format!("_mongodb._tcp.{HOST}")
}

fn records_for(ports: &[u16], ttl: u32) -> Vec<ZoneRecord> {
    let mut records: Vec<ZoneRecord> = ports
        .iter()
        .map(|&port| srv(&srv_name(), port, MEMBER, ttl))
        .collect();
    records.push(a(MEMBER, Ipv4Addr::LOCALHOST));
    records
}

fn client_for(uri: &str, dns: &DnsServer) -> (Client, Arc<Recorder>) {
    client_on_clock(uri, dns, &ClockSkew::new())
}

/// [`client_for`] on a clock the test moves forward with `skew`.
fn client_on_clock(uri: &str, dns: &DnsServer, skew: &ClockSkew) -> (Client, Arc<Recorder>) {
    let mut in_code = ClientOptions::builder()
        .name_servers(vec![dns.address()])
        .build();
    set_clock_skew(&mut in_code, skew);
    let options = ClientOptions::parse_with(uri, in_code).unwrap();
    let recorder = Arc::new(Recorder::default());
    let client = recorder.client_for(options).unwrap();
    (client, recorder)
}

fn ping(client: &Client) -> mongo_inline::Result<bson::Document> {
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
}

/// An operation that takes the client's timeoutMS (`runCommand` on a
/// database does not, today).
fn count(client: &Client) -> mongo_inline::Result<u64> {
    client
        .database("srv_test")
        .collection::<bson::Document>("c")
        .estimated_document_count()
        .run()
}

#[test]
fn the_look_up_waits_for_the_first_operation_and_asks_srv_and_txt_together() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    let dns = DnsServer::start(records_for(&[sim.port(0), sim.port(1)], 300));
    let (client, recorder) = client_for(&format!("mongodb+srv://{HOST}/?tls=false"), &dns);
    assert_eq!(
        dns.questions(),
        0,
        "the constructor must not look anything up"
    );
    assert!(recorder.sdam().is_empty(), "no topology before the look-up");

    // Every reply takes 300 ms: asked one after the other, SRV and TXT
    // would take 600 ms before the first member is even looked up.
    dns.set_delay(Duration::from_millis(300));
    let start = Instant::now();
    ping(&client).unwrap();
    let asked = dns.asked();
    assert!(asked.len() >= 4, "{asked:?}");
    assert!(
        asked[..2].contains(&format!("SRV {}", srv_name())),
        "{asked:?}"
    );
    assert!(asked[..2].contains(&format!("TXT {HOST}")), "{asked:?}");
    // The member's A and AAAA questions go out together too: one more
    // round trip. Two delayed round trips in all; one question at a time
    // would take four (1200 ms).
    assert!(asked[2..].contains(&format!("A {MEMBER}")), "{asked:?}");
    assert!(asked[2..].contains(&format!("AAAA {MEMBER}")), "{asked:?}");
    let elapsed = start.elapsed();
    assert!(
        elapsed < Duration::from_millis(1100),
        "SRV+TXT and A+AAAA should cost two delayed round trips (about 600 ms), took {elapsed:?}"
    );

    // Later operations ask nothing more (the next SRV poll is a TTL away).
    let before = dns.questions();
    ping(&client).unwrap();
    assert_eq!(dns.questions(), before);
    let mut hosts: Vec<String> = client
        .options()
        .hosts()
        .iter()
        .map(|a| a.to_string())
        .collect();
    hosts.sort();
    let mut expected = vec![
        format!("{MEMBER}:{}", sim.port(0)),
        format!("{MEMBER}:{}", sim.port(1)),
    ];
    expected.sort();
    assert_eq!(hosts, expected);
}

/// The official driver's way to name the resolver:
/// `ClientOptions::parse(uri).resolver_config(..)`. Without it the
/// system's resolver would be asked, which knows nothing of the test zone.
#[test]
fn a_resolver_config_given_to_parse_answers_the_look_ups() {
    use mongo_inline::options::ResolverConfig;
    let sim = Simulator::mongos(TestServer::shared(), 1);
    let dns = DnsServer::start(records_for(&[sim.port(0)], 300));
    let options = ClientOptions::parse(format!("mongodb+srv://{HOST}/?tls=false"))
        .resolver_config(ResolverConfig::with_name_servers([dns.address()]))
        .run()
        .unwrap();
    let client = Client::with_options(options).unwrap();
    ping(&client).unwrap();
    assert!(
        dns.asked().contains(&format!("SRV {}", srv_name())),
        "{:?}",
        dns.asked()
    );
}

#[test]
fn an_unanswered_srv_look_up_fails_within_connect_timeout_and_names_the_records() {
    let dns = DnsServer::silent();
    let (client, _) = client_for(
        &format!("mongodb+srv://{HOST}/?tls=false&connectTimeoutMS=300"),
        &dns,
    );
    let start = Instant::now();
    let error = ping(&client).unwrap_err();
    let elapsed = start.elapsed();
    // Running out of time is an I/O timeout, as on a socket; only a look-up
    // that gets an answer it cannot use is `DnsResolve`.
    assert!(error.is_network_timeout(), "{error:?}");
    let error = error.to_string();
    assert!(elapsed < Duration::from_millis(1000), "took {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(250), "took {elapsed:?}");
    assert!(
        error.contains(&format!("SRV record {}", srv_name())),
        "{error}"
    );
    assert!(error.contains(&format!("TXT record {HOST}")), "{error}");
    assert!(error.contains("timed out"), "{error}");
    assert!(dns.questions() >= 2);
}

#[test]
fn an_unanswered_srv_look_up_ends_with_timeout_ms() {
    let dns = DnsServer::silent();
    let (client, _) = client_for(
        &format!("mongodb+srv://{HOST}/?tls=false&timeoutMS=200&connectTimeoutMS=20000"),
        &dns,
    );
    let start = Instant::now();
    let error = count(&client).unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        elapsed < Duration::from_millis(900),
        "took {elapsed:?}: {error}"
    );
}

#[test]
fn a_srv_name_with_no_records_is_an_error_naming_it() {
    let dns = DnsServer::start(vec![a(MEMBER, Ipv4Addr::LOCALHOST)]);
    let (client, recorder) = client_for(&format!("mongodb+srv://{HOST}/?tls=false"), &dns);
    let error = ping(&client).unwrap_err();
    assert!(
        matches!(error.kind(), mongo_inline::ErrorKind::DnsResolve { .. }),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(
        error.contains(HOST) && error.contains("no records"),
        "{error}"
    );
    assert!(recorder.sdam().is_empty(), "no host may be contacted");
}

#[test]
fn a_member_name_whose_name_server_never_answers_fails_within_connect_timeout() {
    let dns = DnsServer::silent();
    let uri = "mongodb://member.example.com:27017/?connectTimeoutMS=300\
               &serverSelectionTimeoutMS=600&serverSelectionTryOnce=true";
    let (client, _) = client_for(uri, &dns);
    let start = Instant::now();
    let error = ping(&client).unwrap_err().to_string();
    let elapsed = start.elapsed();
    assert!(
        elapsed < Duration::from_millis(1200),
        "took {elapsed:?}: {error}"
    );
    // The silent server was asked: the option was honoured, and the
    // failure says which name could not be resolved.
    let asked = dns.asked();
    assert!(
        asked.contains(&"A member.example.com".to_string()),
        "{asked:?}"
    );
    assert!(
        asked.contains(&"AAAA member.example.com".to_string()),
        "{asked:?}"
    );
    assert!(error.contains("resolving the host name"), "{error}");
    assert!(error.contains("member.example.com"), "{error}");
}

#[test]
fn a_member_name_look_up_ends_with_timeout_ms() {
    let dns = DnsServer::silent();
    let uri = "mongodb://member.example.com:27017/?timeoutMS=250&connectTimeoutMS=20000";
    let (client, _) = client_for(uri, &dns);
    let start = Instant::now();
    let error = count(&client).unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        elapsed < Duration::from_millis(900),
        "took {elapsed:?}: {error}"
    );
    assert!(!dns.asked().is_empty());
}

/// The polling spec's floor on the rescan interval is 60 s, whatever the
/// TTL: the client's clock is moved past it rather than waited out.
#[test]
fn srv_polling_adds_and_removes_mongoses_before_an_operation() {
    let sim = Simulator::mongos(TestServer::shared(), 3);
    let dns = DnsServer::start(records_for(&[sim.port(0), sim.port(1)], 1));
    let skew = ClockSkew::new();
    let uri = format!("mongodb+srv://{HOST}/?tls=false");
    let (client, recorder) = client_on_clock(&uri, &dns, &skew);
    ping(&client).unwrap();
    let address = |i: usize| format!("{MEMBER}:{}", sim.port(i));
    let servers = |recorder: &Recorder| -> Vec<String> {
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
            .next_back()
            .unwrap_or_default()
    };
    let mut first = servers(&recorder);
    first.sort();
    let mut expected = vec![address(0), address(1)];
    expected.sort();
    assert_eq!(first, expected);

    // Member 0 leaves the record and member 2 joins it.
    dns.set_records(records_for(&[sim.port(1), sim.port(2)], 1));
    let questions_before = dns.questions();
    ping(&client).unwrap();
    assert_eq!(
        dns.questions(),
        questions_before,
        "no rescan before the interval has passed"
    );
    let events_before = recorder.sdam().len();
    skew.advance(Duration::from_secs(61));
    // Long enough for a background poller, had there been one, to ask.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        dns.questions(),
        questions_before,
        "nothing polls in the background"
    );
    ping(&client).unwrap();
    assert!(dns
        .asked()
        .iter()
        .skip(questions_before)
        .any(|q| q == &format!("SRV {}", srv_name())));
    let mut now = servers(&recorder);
    now.sort();
    let mut expected = vec![address(1), address(2)];
    expected.sort();
    assert_eq!(now, expected);
    let later: Vec<SdamEvent> = recorder.sdam().split_off(events_before);
    let closed: Vec<String> = later
        .iter()
        .filter_map(|e| match e {
            SdamEvent::ServerClosed(e) => Some(e.address.to_string()),
            _ => None,
        })
        .collect();
    let opened: Vec<String> = later
        .iter()
        .filter_map(|e| match e {
            SdamEvent::ServerOpening(e) => Some(e.address.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(closed, vec![address(0)], "only the departed mongos closes");
    assert_eq!(opened, vec![address(2)], "only the new mongos opens");
}

#[test]
fn a_scan_looks_up_its_members_names_together() {
    let sim = Simulator::mongos(TestServer::shared(), 3);
    let names = [
        "m0.test.build.10gen.cc",
        "m1.test.build.10gen.cc",
        "m2.test.build.10gen.cc",
    ];
    let dns = DnsServer::start(names.iter().map(|n| a(n, Ipv4Addr::LOCALHOST)).collect());
    let seeds: Vec<String> = (0..3)
        .map(|i| format!("{}:{}", names[i], sim.port(i)))
        .collect();
    let (client, _) = client_for(&format!("mongodb://{}/", seeds.join(",")), &dns);
    dns.set_delay(Duration::from_millis(300));
    let start = Instant::now();
    ping(&client).unwrap();
    let elapsed = start.elapsed();
    let asked = dns.asked();
    for name in names {
        assert!(asked.contains(&format!("A {name}")), "{asked:?}");
        assert!(asked.contains(&format!("AAAA {name}")), "{asked:?}");
    }
    assert_eq!(asked.len(), 6, "each name asked once: {asked:?}");
    // One by one, three members would wait three round trips (900 ms).
    assert!(
        elapsed < Duration::from_millis(750),
        "three members' names should cost one 300 ms round trip, took {elapsed:?}"
    );
}

/// hickory-resolver takes a datagram that does not parse from the name
/// server's address as that server's failure (a reply with the wrong id
/// it ignores): the look-up ends with an error naming the record, never
/// later than the deadline.
#[test]
fn junk_from_the_name_server_fails_the_look_up_naming_the_record() {
    let dns = DnsServer::garbage();
    let (client, _) = client_for(
        &format!("mongodb+srv://{HOST}/?tls=false&connectTimeoutMS=300"),
        &dns,
    );
    let start = Instant::now();
    let error = ping(&client).unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        matches!(error.kind(), mongo_inline::ErrorKind::DnsResolve { .. }),
        "{error:?}"
    );
    let error = error.to_string();
    assert!(elapsed < Duration::from_millis(1000), "took {elapsed:?}");
    assert!(
        error.contains(&format!("SRV record {}", srv_name())),
        "{error}"
    );
}

#[test]
fn a_truncated_answer_is_asked_again_over_tcp() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    let dns = DnsServer::truncating(records_for(&[sim.port(0), sim.port(1)], 300));
    let (client, _) = client_for(&format!("mongodb+srv://{HOST}/?tls=false"), &dns);
    ping(&client).unwrap();
    let mut hosts: Vec<String> = client
        .options()
        .hosts()
        .iter()
        .map(|a| a.to_string())
        .collect();
    hosts.sort();
    let mut expected = vec![
        format!("{MEMBER}:{}", sim.port(0)),
        format!("{MEMBER}:{}", sim.port(1)),
    ];
    expected.sort();
    assert_eq!(hosts, expected);
}

#[test]
fn a_failed_look_up_is_tried_again_by_the_next_operation() {
    let sim = Simulator::mongos(TestServer::shared(), 1);
    let dns = DnsServer::start(vec![a(MEMBER, Ipv4Addr::LOCALHOST)]);
    let (client, _) = client_for(&format!("mongodb+srv://{HOST}/?tls=false"), &dns);
    assert!(ping(&client).is_err(), "no SRV record yet");
    dns.set_records(records_for(&[sim.port(0)], 300));
    ping(&client).unwrap();
    assert_eq!(client.options().hosts().len(), 1);
}

#[test]
fn a_servfail_from_the_first_name_server_is_answered_by_the_second() {
    let sim = Simulator::mongos(TestServer::shared(), 1);
    let failing = DnsServer::failing();
    let answering = DnsServer::start(records_for(&[sim.port(0)], 300));
    let in_code = ClientOptions::builder()
        .name_servers(vec![failing.address(), answering.address()])
        .build();
    let uri = format!("mongodb+srv://{HOST}/?tls=false");
    let client = Client::with_options(ClientOptions::parse_with(&uri, in_code).unwrap()).unwrap();
    ping(&client).unwrap();
    let srv_question = format!("SRV {}", srv_name());
    assert!(
        failing.asked().contains(&srv_question),
        "the first server was asked: {:?}",
        failing.asked()
    );
    assert!(
        answering.asked().contains(&srv_question),
        "its SERVFAIL sent the question on: {:?}",
        answering.asked()
    );
    assert!(answering.asked().contains(&format!("A {MEMBER}")));
}

#[test]
fn a_member_name_behind_a_cname_chain_is_followed_to_its_address() {
    let sim = Simulator::mongos(TestServer::shared(), 1);
    let alias = "alias.test.build.10gen.cc";
    let middle = "middle.test.build.10gen.cc";
    let dns = DnsServer::start(vec![
        srv(&srv_name(), sim.port(0), alias, 300),
        cname(alias, middle),
        cname(middle, MEMBER),
        a(MEMBER, Ipv4Addr::LOCALHOST),
    ]);
    let (client, _) = client_for(&format!("mongodb+srv://{HOST}/?tls=false"), &dns);
    ping(&client).unwrap();
    let hosts: Vec<String> = client
        .options()
        .hosts()
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(hosts, vec![format!("{alias}:{}", sim.port(0))]);
    assert!(
        dns.asked().contains(&format!("A {alias}")),
        "{:?}",
        dns.asked()
    );
}

/// The look-ups run hickory-resolver on a runtime built for each: once
/// they are over, none of its threads may be left (a forked child must
/// not inherit half a resolver, and a CGI process starts no threads).
#[cfg(target_os = "linux")]
#[test]
fn a_look_up_leaves_no_thread_behind() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    let names = ["m0.test.build.10gen.cc", "m1.test.build.10gen.cc"];
    let mut records = vec![
        srv(&srv_name(), sim.port(0), names[0], 300),
        srv(&srv_name(), sim.port(1), names[1], 300),
    ];
    records.extend(names.iter().map(|n| a(n, Ipv4Addr::LOCALHOST)));
    let dns = DnsServer::start(records);
    let (client, _) = client_for(&format!("mongodb+srv://{HOST}/?tls=false"), &dns);
    ping(&client).unwrap();
    assert!(dns.asked().contains(&format!("A {}", names[1])));
    let threads: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_string())
        .collect();
    assert!(
        !threads.iter().any(|name| name.starts_with("tokio")),
        "a runtime thread survived the look-ups: {threads:?}"
    );
}

/// A directory of a test's own (mode 0700), removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/test-servers")
            .join(format!("srv-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn with_the_state_file_a_new_client_asks_the_name_server_nothing_until_the_ttl() {
    let sim = Simulator::mongos(TestServer::shared(), 2);
    let dns = DnsServer::start(records_for(&[sim.port(0), sim.port(1)], 300));
    let scratch = Scratch::new("dns");
    let state_file = scratch.0.join("state");
    let uri = format!("mongodb+srv://{HOST}/?tls=false");
    let skew = ClockSkew::new();
    let client = || {
        let mut in_code = ClientOptions::builder()
            .name_servers(vec![dns.address()])
            .state_file(state_file.clone())
            .build();
        set_clock_skew(&mut in_code, &skew);
        Client::with_options(ClientOptions::parse_with(&uri, in_code).unwrap()).unwrap()
    };
    let hosts = |client: &Client| {
        let mut hosts: Vec<String> = client
            .options()
            .hosts()
            .iter()
            .map(|a| a.to_string())
            .collect();
        hosts.sort();
        hosts
    };
    let seen = |sim: &Simulator| -> Vec<(usize, usize)> {
        (0..2)
            .map(|i| (sim.connections(i), sim.hellos(i)))
            .collect()
    };
    sim.reset_observations();
    let first = client();
    ping(&first).unwrap();
    let first_round_trips = seen(&sim);
    assert!(first_round_trips.iter().all(|&(sockets, _)| sockets > 0));
    let asked = dns.asked();
    assert!(asked.contains(&format!("SRV {}", srv_name())), "{asked:?}");
    assert!(asked.contains(&format!("A {MEMBER}")), "{asked:?}");
    drop(first);

    // A new client (as a new process would) with the same file: the SRV,
    // TXT and member answers come from it.
    sim.reset_observations();
    let second = client();
    ping(&second).unwrap();
    assert_eq!(
        dns.asked(),
        asked,
        "the second client asked the name server"
    );
    // And it needs no more sockets or hellos than the first did.
    assert_eq!(seen(&sim), first_round_trips);
    assert_eq!(hosts(&second).len(), 2, "{:?}", hosts(&second));
    drop(second);

    // Past the TTL the answers are stale: asked again.
    skew.advance(Duration::from_secs(301));
    let third = client();
    ping(&third).unwrap();
    assert!(dns.questions() > asked.len(), "a stale answer was used");
}
