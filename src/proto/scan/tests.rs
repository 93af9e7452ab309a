use std::collections::BTreeSet;

use super::*;

/// A fake clock: instants as milliseconds after a base.
struct Clock(Instant);

impl Clock {
    fn new() -> Self {
        Clock(Instant::now())
    }
    fn at(&self, ms: u64) -> Instant {
        self.0 + Duration::from_millis(ms)
    }
}

fn addr(a: &str) -> ServerAddress {
    ServerAddress::parse(a).unwrap()
}

fn server(address: &str, server_type: ServerType, updated: Option<Instant>) -> ServerDescription {
    let mut s = ServerDescription::unknown(addr(address));
    s.server_type = server_type;
    s.last_update_time = updated;
    s
}

fn candidates(servers: &[ServerDescription]) -> Vec<ScanCandidate<'_>> {
    servers.iter().map(ScanCandidate::new).collect()
}

/// Scan start 10 s after the base, `now` a little later.
const SCAN_START: u64 = 10_000;

#[test]
fn primary_first_then_possible_primary_then_oldest_known_then_unknown() {
    let clock = Clock::new();
    let servers = [
        server("ghost:1", ServerType::RsGhost, Some(clock.at(100))),
        server("unknown:1", ServerType::Unknown, None),
        server("old:1", ServerType::RsSecondary, Some(clock.at(1_000))),
        server("older:1", ServerType::RsArbiter, Some(clock.at(500))),
        server("possible:1", ServerType::PossiblePrimary, None),
        server("primary:1", ServerType::RsPrimary, Some(clock.at(2_000))),
    ];
    let mut rng = fastrand::Rng::with_seed(3);
    let order = check_order(
        &candidates(&servers),
        clock.at(SCAN_START),
        clock.at(SCAN_START),
        &mut rng,
    );
    let expected: Vec<ServerAddress> = [
        "primary:1",
        "possible:1",
        "older:1",
        "old:1",
        // Never checked counts as infinitely old, before the ghost checked at 100 ms.
        "unknown:1",
        "ghost:1",
    ]
    .iter()
    .map(|a| addr(a))
    .collect();
    assert_eq!(order, expected);
    assert_eq!(
        next_to_check(
            &candidates(&servers),
            clock.at(SCAN_START),
            clock.at(SCAN_START),
            &mut rng
        ),
        Some(addr("primary:1"))
    );
}

#[test]
fn ties_are_broken_at_random() {
    let servers = [
        server("a:1", ServerType::Unknown, None),
        server("b:1", ServerType::Unknown, None),
        server("c:1", ServerType::Unknown, None),
    ];
    let clock = Clock::new();
    let mut firsts = BTreeSet::new();
    for seed in 0..64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let first = next_to_check(
            &candidates(&servers),
            clock.at(SCAN_START),
            clock.at(SCAN_START),
            &mut rng,
        )
        .unwrap();
        firsts.insert(first.to_string());
    }
    assert_eq!(firsts.len(), 3, "every seed picked from {firsts:?}");
}

#[test]
fn a_scan_checks_each_server_once_including_servers_found_during_it() {
    let clock = Clock::new();
    let mut servers = vec![server("seed:1", ServerType::Unknown, None)];
    let scan_start = clock.at(SCAN_START);
    let mut rng = fastrand::Rng::with_seed(9);
    let mut checked = Vec::new();
    let mut now = SCAN_START;
    while let Some(next) = next_to_check(&candidates(&servers), scan_start, clock.at(now), &mut rng)
    {
        now += 10;
        let s = servers.iter_mut().find(|s| s.address == next).unwrap();
        // The check's outcome: the seed is a secondary naming a primary and a
        // second secondary; the primary names a third member.
        match next.host() {
            "seed" => s.server_type = ServerType::RsSecondary,
            "p" => s.server_type = ServerType::RsPrimary,
            _ => s.server_type = ServerType::RsSecondary,
        }
        s.last_update_time = Some(clock.at(now));
        checked.push(next.host().to_string());
        match checked.len() {
            1 => {
                servers.push(server("p:1", ServerType::PossiblePrimary, None));
                servers.push(server("s2:1", ServerType::Unknown, None));
            }
            2 => servers.push(server("s3:1", ServerType::Unknown, None)),
            _ => {}
        }
    }
    assert_eq!(checked[..2], ["seed", "p"]);
    let mut rest = checked[2..].to_vec();
    rest.sort();
    assert_eq!(rest, ["s2", "s3"]);
}

#[test]
fn unknowns_cool_down_after_network_errors() {
    let clock = Clock::new();
    let servers = [
        server(
            "down:1",
            ServerType::Unknown,
            Some(clock.at(SCAN_START - 4_000)),
        ),
        server(
            "long-down:1",
            ServerType::Unknown,
            Some(clock.at(SCAN_START - 6_000)),
        ),
        server(
            "refused:1",
            ServerType::Unknown,
            Some(clock.at(SCAN_START - 1_000)),
        ),
    ];
    let mut list = candidates(&servers);
    for c in &mut list[..2] {
        c.last_check_failed_with_network_error = true;
        c.last_check_end = c.description.last_update_time;
    }
    // refused:1 is Unknown without a network error (e.g. a command error):
    // no cooldown.
    let mut rng = fastrand::Rng::with_seed(1);
    let order = check_order(&list, clock.at(SCAN_START), clock.at(SCAN_START), &mut rng);
    assert_eq!(order, vec![addr("long-down:1"), addr("refused:1")]);

    assert!(!all_cooling_down(&list, clock.at(SCAN_START)));
    assert!(all_cooling_down(&list[..1], clock.at(SCAN_START)));
    assert!(!all_cooling_down(&list[..1], clock.at(SCAN_START + 1_000)));
    assert!(!all_cooling_down(&[], clock.at(SCAN_START)));
    assert_eq!(
        cooldown_ends(&list, clock.at(SCAN_START)),
        Some(clock.at(SCAN_START + 1_000))
    );
    assert_eq!(cooldown_ends(&list, clock.at(SCAN_START + 1_000)), None);
}

#[test]
fn servers_checked_less_than_500_ms_ago_are_skipped() {
    let clock = Clock::new();
    let servers = [
        server(
            "fresh:1",
            ServerType::Mongos,
            Some(clock.at(SCAN_START - 200)),
        ),
        server(
            "ripe:1",
            ServerType::Mongos,
            Some(clock.at(SCAN_START - 600)),
        ),
    ];
    // Both were checked by the scanner when their descriptions were made.
    let list: Vec<ScanCandidate<'_>> = servers
        .iter()
        .map(|s| ScanCandidate {
            last_check_end: s.last_update_time,
            ..ScanCandidate::new(s)
        })
        .collect();
    let mut rng = fastrand::Rng::with_seed(1);
    assert_eq!(
        check_order(&list, clock.at(SCAN_START), clock.at(SCAN_START), &mut rng),
        vec![addr("ripe:1")]
    );
    // 300 ms into the scan, fresh:1 was checked 500 ms ago and is due.
    assert_eq!(
        check_order(
            &list,
            clock.at(SCAN_START),
            clock.at(SCAN_START + 300),
            &mut rng
        ),
        vec![addr("ripe:1"), addr("fresh:1")]
    );
}

#[test]
fn an_update_that_was_not_a_check_does_not_delay_the_next_check() {
    let clock = Clock::new();
    // An application error made the server Unknown 100 ms before the scan;
    // its last check was long ago, so the scan checks it at once.
    let servers = [server(
        "errored:1",
        ServerType::Unknown,
        Some(clock.at(SCAN_START - 100)),
    )];
    let list = [ScanCandidate {
        last_check_end: Some(clock.at(1_000)),
        ..ScanCandidate::new(&servers[0])
    }];
    let mut rng = fastrand::Rng::with_seed(1);
    assert_eq!(
        check_order(&list, clock.at(SCAN_START), clock.at(SCAN_START), &mut rng),
        vec![addr("errored:1")]
    );
}

#[test]
fn last_check_end_counts_as_a_check() {
    let clock = Clock::new();
    // The description was never updated, but the scanner checked it during
    // this scan (a failed check whose result kept lastUpdateTime unset).
    let servers = [server("a:1", ServerType::Unknown, None)];
    let mut list = candidates(&servers);
    list[0].last_check_end = Some(clock.at(SCAN_START + 5));
    let mut rng = fastrand::Rng::with_seed(1);
    assert_eq!(
        next_to_check(
            &list,
            clock.at(SCAN_START),
            clock.at(SCAN_START + 10),
            &mut rng
        ),
        None
    );
}

#[test]
fn when_to_scan() {
    let clock = Clock::new();
    let heartbeat = Duration::from_secs(60);
    assert!(scan_needed(None, false, heartbeat, clock.at(0)));
    assert!(!scan_needed(
        Some(clock.at(0)),
        false,
        heartbeat,
        clock.at(59_999)
    ));
    assert!(scan_needed(
        Some(clock.at(0)),
        false,
        heartbeat,
        clock.at(60_000)
    ));
    assert!(scan_needed(Some(clock.at(0)), true, heartbeat, clock.at(1)));
    assert_eq!(
        earliest_rescan(clock.at(1_000), MIN_HEARTBEAT_FREQUENCY),
        clock.at(1_500)
    );
}

#[test]
fn an_operation_error_after_the_last_check_does_not_count_as_a_check() {
    let clock = Clock::new();
    // Checked long ago; an operation's error marked it Unknown just now,
    // which moved lastUpdateTime. The rescan must still check it.
    let servers = [server(
        "failed:1",
        ServerType::Unknown,
        Some(clock.at(SCAN_START - 10)),
    )];
    let mut list = candidates(&servers);
    list[0].last_check_end = Some(clock.at(SCAN_START - 1000));
    let mut rng = fastrand::Rng::with_seed(1);
    assert_eq!(
        next_to_check(&list, clock.at(SCAN_START), clock.at(SCAN_START), &mut rng),
        Some(addr("failed:1"))
    );
}

#[test]
fn a_remembered_rank_breaks_ties_but_never_crosses_a_class() {
    let clock = Clock::new();
    let servers = [
        server("unknown-a:1", ServerType::Unknown, None),
        server("unknown-b:1", ServerType::Unknown, None),
        server("secondary:1", ServerType::RsSecondary, None),
    ];
    let ranks = [Some(1), Some(0), None];
    let list: Vec<ScanCandidate<'_>> = servers
        .iter()
        .zip(ranks)
        .map(|(s, remembered_rank)| ScanCandidate {
            remembered_rank,
            ..ScanCandidate::new(s)
        })
        .collect();
    for seed in 0..8 {
        let mut rng = fastrand::Rng::with_seed(seed);
        assert_eq!(
            check_order(&list, clock.at(SCAN_START), clock.at(SCAN_START), &mut rng),
            vec![
                addr("secondary:1"),
                addr("unknown-b:1"),
                addr("unknown-a:1")
            ]
        );
    }
}
