//! The monitor on virtual time: instants are milliseconds after a base,
//! and every check result is made up by the test.

use bson::doc;

use super::*;
use crate::proto::read_preference::ReadPreference;
use crate::proto::sdam::TopologySettings;

const SET: &[&str] = &["a:1", "b:1", "c:1"];

fn addr(a: &str) -> ServerAddress {
    ServerAddress::parse(a).unwrap()
}

struct Harness {
    base: Instant,
    monitor: Monitor,
}

fn settings(try_once: bool, timeout_ms: u64) -> MonitorSettings {
    MonitorSettings {
        heartbeat_frequency: Duration::from_secs(60),
        server_selection_timeout: Duration::from_millis(timeout_ms),
        try_once,
        min_heartbeat_frequency: crate::proto::options::MIN_HEARTBEAT_FREQUENCY,
        selection: SelectionSettings::new(Duration::from_millis(15), Duration::from_secs(60)),
    }
}

impl Harness {
    fn new(seeds: &[&str], settings: MonitorSettings) -> Harness {
        let topology = TopologySettings {
            seeds: seeds.iter().map(|s| addr(s)).collect(),
            direct_connection: None,
            replica_set: Some("rs".into()),
            load_balanced: false,
            seeds_from_srv: false,
            without_change_events: false,
        };
        let description = TopologyDescription::new(topology);
        Harness {
            base: Instant::now(),
            monitor: Monitor::new(description, settings, fastrand::Rng::with_seed(7)),
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.base + Duration::from_millis(ms)
    }

    fn select(&mut self, criteria: Criteria, ms: u64) {
        let now = self.at(ms);
        self.monitor.start_selection(criteria, &[], "find", now);
    }

    fn poll(&mut self, ms: u64) -> Next {
        let now = self.at(ms);
        self.monitor.poll(now, Deadline::NONE)
    }

    fn poll_with(&mut self, ms: u64, deadline_ms: u64) -> Next {
        let now = self.at(ms);
        let deadline = Deadline::at(self.at(deadline_ms));
        self.monitor.poll(now, deadline)
    }

    fn report(&mut self, address: &str, outcome: CheckOutcome, ms: u64) {
        let now = self.at(ms);
        let _ = self
            .monitor
            .on_check(&addr(address), outcome, Duration::from_millis(1), now);
    }
}

fn primary() -> CheckOutcome {
    CheckOutcome::Reply(doc! {
        "ok": 1, "isWritablePrimary": true, "setName": "rs", "hosts": SET.to_vec(),
        "minWireVersion": 0, "maxWireVersion": 21, "setVersion": 1,
    })
}

fn secondary(hosts: &[&str]) -> CheckOutcome {
    CheckOutcome::Reply(doc! {
        "ok": 1, "isWritablePrimary": false, "secondary": true, "setName": "rs",
        "hosts": hosts.to_vec(), "minWireVersion": 0, "maxWireVersion": 21,
    })
}

fn possible_primary_reply() -> CheckOutcome {
    // A secondary naming a primary that was not checked yet.
    CheckOutcome::Reply(doc! {
        "ok": 1, "isWritablePrimary": false, "secondary": true, "setName": "rs",
        "hosts": SET.to_vec(), "primary": "a:1", "minWireVersion": 0, "maxWireVersion": 21,
    })
}

fn refused(address: &str) -> CheckOutcome {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    CheckOutcome::Failed(Error::network(Some(addr(address)), "connecting", io))
}

fn primary_only() -> Criteria {
    Criteria::ReadPreference(ReadPreference::primary())
}

fn checks(next: Next) -> Vec<String> {
    match next {
        Next::Check(addresses) => addresses.iter().map(|a| a.to_string()).collect(),
        other => panic!("expected checks, got {other:?}"),
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Runs a scan at `ms` in which every server answers with
/// `reply(address)`; returns what the monitor says after it.
fn scan_all(h: &mut Harness, ms: u64, reply: impl Fn(&str) -> CheckOutcome) -> Next {
    loop {
        match h.poll(ms) {
            Next::Check(addresses) => {
                for a in addresses {
                    let a = a.to_string();
                    h.report(&a, reply(&a), ms);
                }
            }
            other => return other,
        }
    }
}

fn healthy(address: &str) -> CheckOutcome {
    if address == "a:1" {
        primary()
    } else {
        secondary(SET)
    }
}

#[test]
fn the_first_selection_checks_every_seed_at_once_then_selects() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(sorted(checks(h.poll(0))), ["a:1", "b:1", "c:1"]);
    h.report("b:1", secondary(SET), 3);
    assert!(matches!(h.poll(3), Next::Wait(_)), "two checks still run");
    h.report("a:1", primary(), 4);
    h.report("c:1", secondary(SET), 5);
    assert!(matches!(h.poll(5), Next::Selected(a) if a == addr("a:1")));
}

#[test]
fn members_discovered_by_a_reply_are_checked_in_the_same_scan() {
    let mut h = Harness::new(&["b:1"], settings(true, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(checks(h.poll(0)), ["b:1"]);
    h.report("b:1", possible_primary_reply(), 2);
    // The PossiblePrimary comes first, in the same scan.
    assert_eq!(checks(h.poll(2)), ["a:1", "c:1"]);
    h.report("a:1", primary(), 3);
    h.report("c:1", secondary(SET), 3);
    assert!(matches!(h.poll(3), Next::Selected(a) if a == addr("a:1")));
}

#[test]
fn try_once_fails_after_one_scan_without_waiting() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    for a in checks(h.poll(0)) {
        h.report(&a, secondary(SET), 1);
    }
    match h.poll(1) {
        Next::Failed(e) => assert!(matches!(e.kind(), ErrorKind::ServerSelection { .. }), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_try_once_a_rescan_waits_for_min_heartbeat_frequency() {
    let mut h = Harness::new(SET, settings(false, 30_000));
    h.select(primary_only(), 0);
    scan_all(&mut h, 10, |_| secondary(SET));
    // The scan ended at 10 ms: no rescan before 510 ms.
    assert!(matches!(h.poll(10), Next::SleepUntil(t) if t == h.at(510)));
    assert_eq!(
        h.monitor.take_waiting_notice(),
        Some(Some(Duration::from_millis(29_990)))
    );
    assert!(matches!(h.poll(510), Next::Check(_)));
    assert_eq!(
        h.monitor.take_waiting_notice(),
        None,
        "noticed once per selection"
    );
}

#[test]
fn server_selection_timeout_ends_the_wait() {
    let mut h = Harness::new(SET, settings(false, 2_000));
    h.select(primary_only(), 0);
    let mut now = 0;
    let error = loop {
        match h.poll(now) {
            Next::Check(addresses) => {
                for a in addresses {
                    h.report(&a.to_string(), secondary(SET), now);
                }
            }
            Next::SleepUntil(t) => now = (t - h.base).as_millis() as u64,
            Next::Failed(e) => break e,
            other => panic!("{other:?}"),
        }
    };
    assert!(
        matches!(error.kind(), ErrorKind::ServerSelection { .. }),
        "{error}"
    );
    assert!(now <= 2_000, "no sleep past the timeout: {now}");
    assert!(now >= 1_500, "waited until the last possible rescan: {now}");
}

#[test]
fn a_shorter_operation_deadline_cuts_the_wait_and_says_timeout() {
    let mut h = Harness::new(SET, settings(false, 30_000));
    h.select(primary_only(), 0);
    for a in checks(h.poll_with(0, 300)) {
        h.report(&a, secondary(SET), 100);
    }
    // The next scan could start at 600 ms, past the 300 ms deadline.
    match h.poll_with(100, 300) {
        Next::Failed(e) => {
            assert!(matches!(e.kind(), ErrorKind::Timeout { .. }), "{e}");
            assert!(e.to_string().contains("find"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_deadline_reached_mid_scan_stops_the_scan_and_fails_as_a_timeout() {
    let mut h = Harness::new(SET, settings(false, 30_000));
    h.select(primary_only(), 0);
    let handed = checks(h.poll_with(0, 300));
    h.report(&handed[0], secondary(SET), 300);
    match h.poll_with(300, 300) {
        Next::Failed(e) => assert!(matches!(e.kind(), ErrorKind::Timeout { .. }), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(
        h.monitor.description().stale,
        "the unfinished scan leaves the topology stale"
    );
}

#[test]
fn a_refused_member_cools_down_and_is_skipped_by_the_next_scans() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    let next = scan_all(
        &mut h,
        0,
        |a| if a == "c:1" { refused(a) } else { healthy(a) },
    );
    assert!(matches!(next, Next::Selected(_)));
    // A rescan 1 s later (the topology made stale) skips c, cooling down.
    h.monitor.mark_stale();
    h.select(primary_only(), 1_000);
    let rescan = sorted(checks(h.poll(1_000)));
    assert_eq!(rescan, ["a:1", "b:1"]);
    for a in &rescan {
        h.report(a, healthy(a), 1_000);
    }
    assert!(matches!(h.poll(1_000), Next::Selected(_)));
    // After cooldownMS (5 s) it is checked again.
    h.monitor.mark_stale();
    h.select(primary_only(), 5_001);
    assert!(checks(h.poll(5_001)).contains(&"c:1".to_string()));
}

#[test]
fn when_every_server_cools_down_try_once_fails_at_once_saying_so() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, refused);
    assert!(matches!(next, Next::Failed(_)), "{next:?}");
    // The next operation scans nothing: it fails at once, saying why.
    h.select(primary_only(), 700);
    match h.poll(700) {
        Next::Failed(e) => assert!(
            e.to_string()
                .contains("cooldown (the next check is possible in 4300 ms)"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_try_once_the_loop_sleeps_until_the_first_cooldown_ends() {
    let mut h = Harness::new(SET, settings(false, 30_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, refused);
    assert!(matches!(next, Next::SleepUntil(t) if t == h.at(5_000)));
}

#[test]
fn a_cooldown_past_the_timeout_fails_early_saying_why() {
    let mut h = Harness::new(SET, settings(false, 1_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, refused);
    match next {
        Next::Failed(e) => assert!(e.to_string().contains("cooldown"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_selection_names_the_servers_failures_first() {
    let mut h = Harness::new(&["a:1"], settings(false, 1_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, refused);
    let Next::Failed(e) = next else {
        panic!("{next:?}")
    };
    assert!(
        matches!(e.kind(), ErrorKind::ServerSelection { .. }),
        "{e:?}"
    );
    let ErrorKind::ServerSelection { message } = e.kind() else {
        unreachable!()
    };
    assert!(
        message.starts_with("could not reach a:1: connecting: refused ("),
        "{message}"
    );
    assert!(
        message.contains("(server selection for find gave up after 0 ms; no server is suitable"),
        "{message}"
    );
    assert_eq!(
        message.matches("refused").count(),
        1,
        "said once: {message}"
    );

    // Under timeoutMS the timeout is the kind, the cause still comes first.
    let mut h = Harness::new(&["a:1"], settings(false, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(checks(h.poll_with(0, 2_000)), ["a:1"]);
    h.report("a:1", refused("a:1"), 0);
    let Next::Failed(e) = h.poll_with(2_000, 2_000) else {
        panic!("the deadline passed")
    };
    let ErrorKind::Timeout { message } = e.kind() else {
        panic!("{e:?}")
    };
    assert!(message.starts_with("could not reach a:1: "), "{message}");
    assert!(
        message.contains("(timeoutMS expired while selecting a server for find; "),
        "{message}"
    );
}

#[test]
fn a_known_server_failing_with_a_network_error_is_checked_again_at_once() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, healthy);
    assert!(matches!(next, Next::Selected(_)));
    h.monitor.mark_stale();
    h.select(primary_only(), 1_000);
    let first = checks(h.poll(1_000));
    for a in &first {
        let outcome = if a == "b:1" { refused(a) } else { healthy(a) };
        h.report(a, outcome, 1_000);
    }
    assert_eq!(checks(h.poll(1_000)), ["b:1"], "one immediate retry");
    assert_eq!(
        h.monitor.description().servers[&addr("b:1")].server_type,
        ServerType::RsSecondary,
        "still known until the retry fails"
    );
    h.report("b:1", refused("b:1"), 1_001);
    assert!(
        matches!(h.poll(1_001), Next::Selected(_)),
        "no second retry"
    );
    assert_eq!(
        h.monitor.description().servers[&addr("b:1")].server_type,
        ServerType::Unknown
    );
}

#[test]
fn a_possible_primary_gets_no_immediate_retry() {
    let mut h = Harness::new(&["b:1"], settings(true, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(checks(h.poll(0)), ["b:1"]);
    h.report("b:1", possible_primary_reply(), 1);
    let next = checks(h.poll(1));
    assert_eq!(next[0], "a:1");
    h.report("a:1", refused("a:1"), 2);
    h.report("c:1", secondary(SET), 2);
    assert!(
        matches!(h.poll(2), Next::Failed(_)),
        "the scan ends without checking the PossiblePrimary twice"
    );
}

#[test]
fn an_unknown_seed_gets_no_immediate_retry() {
    let mut h = Harness::new(&["a:1"], settings(true, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(checks(h.poll(0)), ["a:1"]);
    h.report("a:1", refused("a:1"), 1);
    assert!(matches!(h.poll(1), Next::Failed(_)));
}

#[test]
fn a_recent_scan_is_reused_until_heartbeat_frequency_passes() {
    let mut settings = settings(true, 30_000);
    settings.heartbeat_frequency = Duration::from_secs(10);
    let mut h = Harness::new(SET, settings);
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, healthy);
    assert!(matches!(next, Next::Selected(_)));
    h.select(primary_only(), 9_999);
    assert!(matches!(h.poll(9_999), Next::Selected(_)), "no scan yet");
    h.select(primary_only(), 10_000);
    assert!(
        matches!(h.poll(10_000), Next::Check(_)),
        "heartbeatFrequencyMS passed"
    );
}

#[test]
fn a_stale_topology_rescans_before_selecting() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, healthy);
    assert!(matches!(next, Next::Selected(_)));
    h.monitor.mark_stale();
    h.select(primary_only(), 100);
    // minHeartbeatFrequencyMS after the last scan ended.
    assert!(matches!(h.poll(100), Next::SleepUntil(t) if t == h.at(500)));
    assert_eq!(sorted(checks(h.poll(500))), ["a:1", "b:1", "c:1"]);
}

#[test]
fn a_failed_idle_socket_ping_selects_again_without_a_rescan() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 0, healthy);
    assert!(matches!(next, Next::Selected(_)));
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    let error = Error::network(Some(addr("b:1")), "ping", io);
    let _ = h
        .monitor
        .on_idle_check_failed(&addr("b:1"), &error, h.at(2_000));
    assert!(!h.monitor.description().stale);
    h.select(
        Criteria::ReadPreference(ReadPreference::with_mode(
            crate::proto::read_preference::ReadPreferenceMode::Secondary,
        )),
        2_000,
    );
    assert!(
        matches!(h.poll(2_000), Next::Selected(a) if a == addr("c:1")),
        "the other secondary, with no scan"
    );
}

#[test]
fn a_check_cut_short_by_the_deadline_starts_no_cooldown() {
    let mut h = Harness::new(&["a:1"], settings(true, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(checks(h.poll_with(0, 100)), ["a:1"]);
    let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out");
    let error = Error::network(Some(addr("a:1")), "connecting", io);
    h.report("a:1", CheckOutcome::CutShort(error), 100);
    assert!(matches!(h.poll_with(100, 100), Next::Failed(_)));
    h.select(primary_only(), 700);
    assert_eq!(checks(h.poll(700)), ["a:1"], "checked again: no cooldown");
}

#[test]
fn an_authentication_failure_fails_the_selection_at_once() {
    let mut h = Harness::new(&["a:1"], settings(false, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(checks(h.poll(0)), ["a:1"]);
    let error = Error::new(ErrorKind::Authentication {
        message: "bad password".into(),
    });
    h.report("a:1", CheckOutcome::Failed(error), 1);
    let result = as_result(h.poll(1));
    assert!(
        matches!(result, Err(ref e) if matches!(e.kind(), ErrorKind::Authentication { .. })),
        "{result:?}"
    );
}

#[test]
fn a_scan_computes_its_order_once_per_new_members_not_per_check() {
    let hosts: Vec<String> = (0..300).map(|i| format!("m{i}:1")).collect();
    let host_refs: Vec<&str> = hosts.iter().map(String::as_str).collect();
    let mut h = Harness::new(&["m0:1"], settings(true, 30_000));
    h.select(primary_only(), 0);
    assert_eq!(checks(h.poll(0)), ["m0:1"]);
    h.report("m0:1", secondary(&host_refs), 1);
    let rest = checks(h.poll(1));
    assert_eq!(rest.len(), 299);
    let before = h.monitor.order_computations;
    for a in &rest {
        h.report(a, secondary(&host_refs), 2);
        assert!(matches!(h.poll(2), Next::Wait(_) | Next::Failed(_)));
    }
    assert_eq!(
        h.monitor.order_computations, before,
        "no recomputation per check"
    );
    assert!(!h.monitor.scanning());
}

#[test]
fn a_warm_selection_reuses_the_last_until_the_description_changes() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    assert!(matches!(scan_all(&mut h, 0, healthy), Next::Selected(a) if a == addr("a:1")));
    let computed = h.monitor.selections.computed;
    for ms in [10, 20, 30] {
        h.select(primary_only(), ms);
        assert!(matches!(h.poll(ms), Next::Selected(a) if a == addr("a:1")));
    }
    assert_eq!(
        h.monitor.selections.computed, computed,
        "one primary: no new selection"
    );
    // A secondary read is other criteria: selected afresh.
    let secondary = Criteria::ReadPreference(ReadPreference::with_mode(
        crate::proto::read_preference::ReadPreferenceMode::Secondary,
    ));
    h.select(secondary, 40);
    assert!(matches!(h.poll(40), Next::Selected(_)));
    assert_eq!(h.monitor.selections.computed, computed + 1);
    // The primary's socket failed: what was remembered no longer holds.
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    let error = Error::network(Some(addr("a:1")), "ping", io);
    let _ = h
        .monitor
        .on_idle_check_failed(&addr("a:1"), &error, h.at(50));
    h.select(primary_only(), 50);
    let next = h.poll(50);
    assert!(
        !matches!(next, Next::Selected(_)),
        "the Unknown primary is not selected from memory: {next:?}"
    );
    assert!(h.monitor.selections.computed > computed + 1);
}

#[test]
fn a_selection_with_a_choice_picks_afresh_from_the_remembered_window() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.select(primary_only(), 0);
    scan_all(&mut h, 0, healthy);
    let secondary = || {
        Criteria::ReadPreference(ReadPreference::with_mode(
            crate::proto::read_preference::ReadPreferenceMode::Secondary,
        ))
    };
    let computed = h.monitor.selections.computed;
    let mut chosen = std::collections::BTreeSet::new();
    for ms in 1..=40 {
        h.select(secondary(), ms);
        match h.poll(ms) {
            Next::Selected(address) => chosen.insert(address.to_string()),
            other => panic!("expected a secondary, got {other:?}"),
        };
    }
    assert_eq!(
        h.monitor.selections.computed,
        computed + 1,
        "the window is computed once"
    );
    assert_eq!(
        chosen.into_iter().collect::<Vec<_>>(),
        ["b:1", "c:1"],
        "both secondaries in the window are picked at random"
    );
}

#[test]
fn a_remembered_window_draws_as_a_full_selection_does() {
    // Two monitors fed alike, the same seed: one selects from memory after
    // its first selection, the other in full each time (a new selection
    // memory per operation); they must pick the same servers in turn.
    let secondary = || {
        Criteria::ReadPreference(ReadPreference::with_mode(
            crate::proto::read_preference::ReadPreferenceMode::Secondary,
        ))
    };
    let mut remembering = Harness::new(SET, settings(true, 30_000));
    let mut afresh = Harness::new(SET, settings(true, 30_000));
    for h in [&mut remembering, &mut afresh] {
        h.select(primary_only(), 0);
        scan_all(h, 0, healthy);
        h.monitor.rng = fastrand::Rng::with_seed(7);
    }
    for ms in 1..=30 {
        afresh.monitor.selections = Default::default();
        let mut picks = Vec::new();
        for h in [&mut remembering, &mut afresh] {
            h.select(secondary(), ms);
            picks.push(match h.poll(ms) {
                Next::Selected(address) => address,
                other => panic!("expected a secondary, got {other:?}"),
            });
        }
        assert_eq!(picks[0], picks[1], "operation at {ms} ms");
    }
    assert_eq!(afresh.monitor.selections.computed, 1);
}

#[test]
fn operation_names_of_any_length_read_back() {
    let long = "a".repeat(31);
    for name in [
        "find",
        "",
        "x".repeat(30).as_str(),
        long.as_str(),
        "ünïcödé",
    ] {
        assert_eq!(OperationName::new(name).as_str(), name);
    }
}

/// The primary's hello reply, then a reset in the authentication step on
/// the same new socket.
fn unauthenticated_primary() -> CheckOutcome {
    let CheckOutcome::Reply(reply) = primary() else {
        unreachable!("primary() is a reply")
    };
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    CheckOutcome::Unauthenticated {
        reply,
        error: Error::network(Some(addr("a:1")), "authenticating", io),
    }
}

#[test]
fn a_failed_authentication_step_ends_the_selection_that_could_choose_the_server() {
    let mut h = Harness::new(SET, settings(false, 30_000));
    h.select(primary_only(), 0);
    let next = scan_all(&mut h, 5, |a| {
        if a == "a:1" {
            unauthenticated_primary()
        } else {
            secondary(SET)
        }
    });
    // The operation's error, at once: not "no suitable server" after
    // serverSelectionTimeoutMS.
    match next {
        Next::Failed(e) => assert!(e.is_network_error(), "{e}"),
        other => panic!("{other:?}"),
    }
    let description = h.monitor.description();
    let server = &description.servers[&addr("a:1")];
    assert_eq!(server.server_type, ServerType::Unknown);
    let error = server.error.as_ref().unwrap();
    assert!(error.is_network_error());
    assert!(error.to_string().contains("reset"));
    assert_eq!(description.pool_generation(&addr("a:1")), Some(1));
    assert_eq!(
        description.set_name.as_deref(),
        Some("rs"),
        "the hello's reply was applied"
    );
    // No cooldown: the server answered, so the retry's scan checks it
    // again, minHeartbeatFrequencyMS after this one.
    h.select(primary_only(), 5);
    assert!(matches!(h.poll(5), Next::SleepUntil(t) if t == h.at(505)));
    assert!(checks(h.poll(505)).contains(&"a:1".to_string()));
}

#[test]
fn a_failed_authentication_step_of_a_server_the_selection_cannot_use_is_not_its_error() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    let secondary_only = Criteria::ReadPreference(ReadPreference::Secondary {
        options: Default::default(),
    });
    h.select(secondary_only, 0);
    let next = scan_all(&mut h, 5, |a| match a {
        "a:1" => unauthenticated_primary(),
        _ => refused(a),
    });
    match next {
        Next::Failed(e) => assert!(matches!(e.kind(), ErrorKind::ServerSelection { .. }), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_test_runners_lowered_min_heartbeat_frequency_shortens_the_wait_before_a_rescan() {
    let mut lowered = settings(false, 30_000);
    lowered.min_heartbeat_frequency = Duration::from_millis(50);
    let mut h = Harness::new(SET, lowered);
    h.select(primary_only(), 0);
    scan_all(&mut h, 10, |_| secondary(SET));
    assert!(matches!(h.poll(10), Next::SleepUntil(t) if t == h.at(60)));
    assert_eq!(sorted(checks(h.poll(60))), ["a:1", "b:1", "c:1"]);
}

#[test]
fn a_remembered_order_breaks_the_first_scan_s_ties_and_adds_no_server() {
    let mut h = Harness::new(SET, settings(true, 30_000));
    h.monitor
        .prefer_in_first_scan(vec![addr("c:1"), addr("z:9"), addr("b:1")]);
    h.select(primary_only(), 0);
    // z:9 is no seed: it is not checked; a:1, unranked, comes last.
    assert_eq!(checks(h.poll(0)), ["c:1", "b:1", "a:1"]);
    // The remembered "primary" c:1 answers as a secondary: the selection
    // takes the server whose own reply says primary.
    h.report("c:1", secondary(SET), 1);
    h.report("b:1", secondary(SET), 1);
    h.report("a:1", primary(), 2);
    assert!(matches!(h.poll(2), Next::Selected(a) if a == addr("a:1")));
    assert!(
        h.monitor.remembered_order.is_empty(),
        "the order outlives no scan"
    );
    // Once a scan ended, an order is no longer taken.
    h.monitor.prefer_in_first_scan(vec![addr("c:1")]);
    assert!(h.monitor.remembered_order.is_empty());
}
