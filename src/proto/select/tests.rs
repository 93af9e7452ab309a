use std::collections::BTreeSet;

use super::*;

fn server(address: &str, server_type: ServerType, rtt_ms: u64) -> ServerDescription {
    let mut s = ServerDescription::unknown(ServerAddress::parse(address).unwrap());
    s.server_type = server_type;
    if server_type != ServerType::Unknown {
        s.round_trip_time = Some(Duration::from_millis(rtt_ms));
        s.max_wire_version = 21;
    }
    s
}

fn topology(topology_type: TopologyType, servers: Vec<ServerDescription>) -> TopologyDescription {
    let mut t = TopologyDescription {
        topology_type,
        ..Default::default()
    };
    for s in servers {
        t.servers.insert(s.address.clone(), s);
    }
    t
}

fn replica_set() -> TopologyDescription {
    topology(
        TopologyType::ReplicaSetWithPrimary,
        vec![
            server("a:27017", ServerType::RsPrimary, 5),
            server("b:27017", ServerType::RsSecondary, 5),
            server("c:27017", ServerType::RsSecondary, 100),
            server("d:27017", ServerType::RsArbiter, 1),
        ],
    )
}

fn settings() -> SelectionSettings {
    SelectionSettings::new(Duration::from_millis(15), Duration::from_secs(10))
}

fn read(mode: ReadPreferenceMode) -> Criteria {
    Criteria::ReadPreference(ReadPreference::with_mode(mode))
}

fn names(servers: &[&ServerDescription]) -> BTreeSet<String> {
    servers.iter().map(|s| s.address.to_string()).collect()
}

fn set(addresses: &[&str]) -> BTreeSet<String> {
    addresses.iter().map(|a| a.to_string()).collect()
}

fn addr(a: &str) -> ServerAddress {
    ServerAddress::parse(a).unwrap()
}

#[test]
fn replica_set_modes() {
    let t = replica_set();
    let suitable = |c: Criteria| names(&suitable_servers(&t, &c, &settings(), &[]).unwrap());
    assert_eq!(
        suitable(read(ReadPreferenceMode::Primary)),
        set(&["a:27017"])
    );
    assert_eq!(
        suitable(read(ReadPreferenceMode::Secondary)),
        set(&["b:27017", "c:27017"])
    );
    assert_eq!(
        suitable(read(ReadPreferenceMode::Nearest)),
        set(&["a:27017", "b:27017", "c:27017"])
    );
    assert_eq!(
        suitable(read(ReadPreferenceMode::PrimaryPreferred)),
        set(&["a:27017"])
    );
    assert_eq!(
        suitable(read(ReadPreferenceMode::SecondaryPreferred)),
        set(&["b:27017", "c:27017"])
    );
    assert_eq!(suitable(Criteria::Write), set(&["a:27017"]));
}

#[test]
fn tag_sets_are_tried_in_order() {
    let mut t = replica_set();
    t.servers.get_mut(&addr("b:27017")).unwrap().tags =
        TagSet::from([("dc".to_string(), "ny".to_string())]);
    t.servers.get_mut(&addr("c:27017")).unwrap().tags = TagSet::from([
        ("dc".to_string(), "sf".to_string()),
        ("rack".to_string(), "1".to_string()),
    ]);
    let tags = |pairs: &[(&str, &str)]| -> TagSet {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let with_tags = |mode, sets: Vec<TagSet>| {
        Criteria::ReadPreference(ReadPreference::with_mode(mode).with_tag_sets(sets))
    };
    let suitable = |c: Criteria| names(&suitable_servers(&t, &c, &settings(), &[]).unwrap());
    // The first matching set wins, later ones are ignored.
    assert_eq!(
        suitable(with_tags(
            ReadPreferenceMode::Secondary,
            vec![tags(&[("dc", "sf")]), tags(&[("dc", "ny")])]
        )),
        set(&["c:27017"])
    );
    // A non-matching set falls through to the next; {} matches anyone.
    assert_eq!(
        suitable(with_tags(
            ReadPreferenceMode::Secondary,
            vec![tags(&[("dc", "tokyo")]), TagSet::new()]
        )),
        set(&["b:27017", "c:27017"])
    );
    // Nothing matches: no secondary; secondaryPreferred falls back to the primary.
    assert!(suitable(with_tags(
        ReadPreferenceMode::Secondary,
        vec![tags(&[("dc", "sf"), ("rack", "2")])]
    ))
    .is_empty());
    assert_eq!(
        suitable(with_tags(
            ReadPreferenceMode::SecondaryPreferred,
            vec![tags(&[("dc", "tokyo")])]
        )),
        set(&["a:27017"])
    );
}

#[test]
fn latency_window_anchors_on_the_fastest() {
    let t = replica_set();
    let suitable =
        suitable_servers(&t, &read(ReadPreferenceMode::Nearest), &settings(), &[]).unwrap();
    assert_eq!(
        names(&latency_window(&suitable, Duration::from_millis(15))),
        set(&["a:27017", "b:27017"])
    );
    assert_eq!(
        names(&latency_window(&suitable, Duration::from_millis(95))),
        set(&["a:27017", "b:27017", "c:27017"])
    );
    // A server without RTT (a load balancer) is neither anchor nor excluded.
    let mut lb = server("lb:27017", ServerType::LoadBalancer, 0);
    lb.round_trip_time = None;
    let with_lb = [suitable[0], &lb];
    assert_eq!(
        names(&latency_window(&with_lb, Duration::ZERO)),
        set(&["a:27017", "lb:27017"])
    );
}

#[test]
fn max_staleness_limits_are_checked_in_replica_sets_only() {
    let t = replica_set();
    let stale = |seconds| {
        Criteria::ReadPreference(
            ReadPreference::with_mode(ReadPreferenceMode::Nearest)
                .with_max_staleness(Duration::from_secs(seconds)),
        )
    };
    let too_small = suitable_servers(&t, &stale(89), &settings(), &[]).unwrap_err();
    assert!(too_small.to_string().contains("at least 90"), "{too_small}");
    let slow_heartbeat =
        SelectionSettings::new(Duration::from_millis(15), Duration::from_secs(100));
    let below_heartbeat = suitable_servers(&t, &stale(100), &slow_heartbeat, &[]).unwrap_err();
    assert!(
        below_heartbeat.to_string().contains("heartbeatFrequencyMS"),
        "{below_heartbeat}"
    );
    assert!(suitable_servers(&t, &stale(110), &slow_heartbeat, &[]).is_ok());
    let sharded = topology(
        TopologyType::Sharded,
        vec![server("m:27017", ServerType::Mongos, 5)],
    );
    assert_eq!(
        suitable_servers(&sharded, &stale(1), &settings(), &[])
            .unwrap()
            .len(),
        1
    );
    // Mode primary with max staleness cannot even be written.
    let primary_stale = ReadPreference::from_parts(
        ReadPreferenceMode::Primary,
        Vec::new(),
        Some(Duration::from_secs(120)),
        None,
    );
    assert!(primary_stale.is_err());
}

#[test]
fn staleness_estimate_with_and_without_primary() {
    let base = Instant::now();
    let mut t = replica_set();
    for (a, updated, written) in [("a:27017", 0, 10_000), ("b:27017", 1_000, 5_000)] {
        let s = t.servers.get_mut(&addr(a)).unwrap();
        s.last_update_time = Some(base + Duration::from_millis(updated));
        s.last_write_date = Some(written);
    }
    let heartbeat = Duration::from_secs(10);
    let b = &t.servers[&addr("b:27017")];
    // (1000 - 5000) - (0 - 10000) + 10000
    assert_eq!(staleness_ms(&t, b, heartbeat), Some(16_000));
    // Without lastWriteDate there is no estimate.
    assert_eq!(
        staleness_ms(&t, &t.servers[&addr("c:27017")], heartbeat),
        None
    );
    t.topology_type = TopologyType::ReplicaSetNoPrimary;
    t.servers.get_mut(&addr("a:27017")).unwrap().server_type = ServerType::Unknown;
    t.servers.get_mut(&addr("c:27017")).unwrap().last_write_date = Some(8_000);
    let b = &t.servers[&addr("b:27017")];
    // SMax (c, 8000) - 5000 + 10000
    assert_eq!(staleness_ms(&t, b, heartbeat), Some(13_000));
}

#[test]
fn single_load_balanced_and_unknown() {
    let single = topology(
        TopologyType::Single,
        vec![server("s:27017", ServerType::RsSecondary, 5)],
    );
    // Read preference is ignored for a direct connection.
    for c in [read(ReadPreferenceMode::Primary), Criteria::Write] {
        assert_eq!(
            names(&suitable_servers(&single, &c, &settings(), &[]).unwrap()),
            set(&["s:27017"])
        );
    }
    let down = topology(
        TopologyType::Single,
        vec![server("s:27017", ServerType::Unknown, 0)],
    );
    assert!(suitable_servers(&down, &Criteria::Write, &settings(), &[])
        .unwrap()
        .is_empty());
    let lb = topology(
        TopologyType::LoadBalanced,
        vec![server("lb:27017", ServerType::LoadBalancer, 0)],
    );
    assert_eq!(
        names(
            &suitable_servers(&lb, &read(ReadPreferenceMode::Secondary), &settings(), &[]).unwrap()
        ),
        set(&["lb:27017"])
    );
    let unknown = topology(
        TopologyType::Unknown,
        vec![server("x:27017", ServerType::RsGhost, 5)],
    );
    assert!(suitable_servers(
        &unknown,
        &read(ReadPreferenceMode::Nearest),
        &settings(),
        &[]
    )
    .unwrap()
    .is_empty());
}

#[test]
fn deprioritized_servers_are_used_only_as_a_last_resort() {
    let sharded = topology(
        TopologyType::Sharded,
        vec![
            server("m1:27017", ServerType::Mongos, 5),
            server("m2:27017", ServerType::Mongos, 5),
            server("u:27017", ServerType::Unknown, 0),
        ],
    );
    let c = Criteria::Write;
    assert_eq!(
        names(&suitable_servers(&sharded, &c, &settings(), &[addr("m1:27017")]).unwrap()),
        set(&["m2:27017"])
    );
    assert_eq!(
        names(
            &suitable_servers(
                &sharded,
                &c,
                &settings(),
                &[addr("m1:27017"), addr("m2:27017")]
            )
            .unwrap()
        ),
        set(&["m1:27017", "m2:27017"])
    );
    // In a replica set, a deprioritized primary sends primaryPreferred to a secondary.
    assert_eq!(
        names(
            &suitable_servers(
                &replica_set(),
                &read(ReadPreferenceMode::PrimaryPreferred),
                &settings(),
                &[addr("a:27017")]
            )
            .unwrap()
        ),
        set(&["b:27017", "c:27017"])
    );
}

#[test]
fn predicate_and_application_selector() {
    let t = replica_set();
    let only_c: Predicate = Arc::new(|s: &ServerInfo| s.address().host() == "c");
    let c = Criteria::Predicate(only_c);
    assert_eq!(
        names(&suitable_servers(&t, &c, &settings(), &[]).unwrap()),
        set(&["c:27017"])
    );
    // Arbiters are never candidates, even for a predicate that accepts all.
    let all = Criteria::Predicate(Arc::new(|_: &ServerInfo| true));
    assert_eq!(
        names(&suitable_servers(&t, &all, &settings(), &[]).unwrap()),
        set(&["a:27017", "b:27017", "c:27017"])
    );
    // The application selector runs on the suitable servers, before the window:
    // keeping only the slow secondary selects it although it is 95 ms slower.
    let slowest: ServerSelector = Arc::new(|servers: Vec<&ServerDescription>| {
        let max = servers.iter().filter_map(|s| s.round_trip_time).max();
        servers
            .into_iter()
            .filter(|s| s.round_trip_time == max)
            .collect()
    });
    let settings = settings().with_server_selector(slowest);
    let mut rng = fastrand::Rng::with_seed(1);
    for _ in 0..10 {
        assert_eq!(
            select(
                &t,
                &read(ReadPreferenceMode::Nearest),
                &settings,
                &[],
                &mut rng
            )
            .unwrap(),
            Some(addr("c:27017"))
        );
    }
}

#[test]
fn select_picks_at_random_in_the_window() {
    let t = replica_set();
    let mut seen = BTreeSet::new();
    for seed in 0..50 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let picked = select(
            &t,
            &read(ReadPreferenceMode::Nearest),
            &settings(),
            &[],
            &mut rng,
        )
        .unwrap()
        .unwrap();
        seen.insert(picked.to_string());
    }
    // c is outside the 15 ms window; a and b both occur.
    assert_eq!(seen, set(&["a:27017", "b:27017"]));
    let no_primary = topology(
        TopologyType::ReplicaSetNoPrimary,
        vec![server("b:27017", ServerType::RsSecondary, 5)],
    );
    let mut rng = fastrand::Rng::with_seed(1);
    assert_eq!(
        select(&no_primary, &Criteria::Write, &settings(), &[], &mut rng).unwrap(),
        None
    );
}

#[test]
fn incompatible_deployment_fails_selection() {
    let mut t = replica_set();
    t.compatibility_error = Some("server a:27017 requires wire version 99".into());
    let err = select(
        &t,
        &Criteria::Write,
        &settings(),
        &[],
        &mut fastrand::Rng::with_seed(1),
    )
    .unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::IncompatibleServer { .. }));
    assert!(err.to_string().contains("wire version 99"));
}

#[test]
fn aggregate_write_follows_read_preference_only_on_5_0_and_later() {
    let secondary = ReadPreference::with_mode(ReadPreferenceMode::Secondary);
    let agg = Criteria::AggregateWrite(secondary.clone());
    let mut t = replica_set();
    assert_eq!(
        names(&suitable_servers(&t, &agg, &settings(), &[]).unwrap()),
        set(&["b:27017", "c:27017"])
    );
    assert_eq!(
        read_preference_for_command(&t, ServerType::RsSecondary, &agg),
        Some(doc! { "mode": "secondary" })
    );
    // One available pre-5.0 member: the read preference is ignored.
    t.servers
        .get_mut(&addr("c:27017"))
        .unwrap()
        .max_wire_version = 12;
    assert_eq!(
        names(&suitable_servers(&t, &agg, &settings(), &[]).unwrap()),
        set(&["a:27017"])
    );
    assert_eq!(
        read_preference_for_command(&t, ServerType::RsPrimary, &agg),
        None
    );
    // Unknown members do not count; load-balanced deployments are assumed 5.0+.
    t.servers.get_mut(&addr("c:27017")).unwrap().server_type = ServerType::Unknown;
    assert!(matches!(agg.resolve(&t), Criteria::ReadPreference(_)));
    let mut lb = topology(
        TopologyType::LoadBalanced,
        vec![server("lb:27017", ServerType::LoadBalancer, 0)],
    );
    lb.servers
        .get_mut(&addr("lb:27017"))
        .unwrap()
        .max_wire_version = 0;
    assert!(matches!(agg.resolve(&lb), Criteria::ReadPreference(_)));
}

#[test]
fn read_preference_on_the_wire() {
    let tagged = ReadPreference::with_mode(ReadPreferenceMode::SecondaryPreferred)
        .with_tag_sets(vec![TagSet::from([("dc".to_string(), "ny".to_string())])]);
    let rp = |mode| read(mode);
    let of = |topology_type: TopologyType| topology(topology_type, Vec::new());
    let check = |topology_type, server_type, criteria: &Criteria| {
        read_preference_for_command(&of(topology_type), server_type, criteria)
    };
    use ReadPreferenceMode::*;
    use ServerType as S;
    use TopologyType as T;

    // Single: standalone never; mongos as sharded; others primaryPreferred for primary.
    for mode in [Primary, Secondary, Nearest] {
        assert_eq!(check(T::Single, S::Standalone, &rp(mode)), None);
    }
    assert_eq!(check(T::Single, S::Mongos, &rp(Primary)), None);
    assert_eq!(
        check(T::Single, S::Mongos, &rp(Secondary)),
        Some(doc! { "mode": "secondary" })
    );
    for server_type in [S::RsPrimary, S::RsSecondary, S::RsArbiter, S::RsOther] {
        assert_eq!(
            check(T::Single, server_type, &rp(Primary)),
            Some(doc! { "mode": "primaryPreferred" })
        );
        assert_eq!(
            check(T::Single, server_type, &rp(Nearest)),
            Some(doc! { "mode": "nearest" })
        );
    }
    // Replica sets: nothing for primary, the read preference otherwise.
    for t in [T::ReplicaSetWithPrimary, T::ReplicaSetNoPrimary] {
        assert_eq!(check(t, S::RsPrimary, &rp(Primary)), None);
        assert_eq!(
            check(t, S::RsSecondary, &rp(PrimaryPreferred)),
            Some(doc! { "mode": "primaryPreferred" })
        );
        assert_eq!(
            check(t, S::RsSecondary, &Criteria::ReadPreference(tagged.clone())),
            Some(doc! { "mode": "secondaryPreferred", "tags": [{ "dc": "ny" }] })
        );
    }
    // Mongos and load balancer over OP_MSG: nothing for primary, everything
    // else sent, secondaryPreferred without tags included.
    for (t, s) in [(T::Sharded, S::Mongos), (T::LoadBalanced, S::LoadBalancer)] {
        assert_eq!(check(t, s, &rp(Primary)), None);
        assert_eq!(
            check(t, s, &rp(SecondaryPreferred)),
            Some(doc! { "mode": "secondaryPreferred" })
        );
        let stale = ReadPreference::with_mode(Nearest).with_max_staleness(Duration::from_secs(120));
        assert_eq!(
            check(t, s, &Criteria::ReadPreference(stale)),
            Some(doc! { "mode": "nearest", "maxStalenessSeconds": 120_i64 })
        );
    }
    // Writes never carry a read preference; a predicate counts as primaryPreferred.
    for (t, s) in [
        (T::Single, S::RsSecondary),
        (T::ReplicaSetWithPrimary, S::RsPrimary),
        (T::Sharded, S::Mongos),
        (T::LoadBalanced, S::LoadBalancer),
    ] {
        assert_eq!(check(t, s, &Criteria::Write), None);
    }
    let predicate = Criteria::Predicate(Arc::new(|_: &ServerInfo| true));
    assert_eq!(
        check(T::ReplicaSetWithPrimary, S::RsSecondary, &predicate),
        Some(doc! { "mode": "primaryPreferred" })
    );
    assert_eq!(check(T::Unknown, S::Unknown, &rp(Nearest)), None);
}

#[test]
fn selection_error_names_every_server() {
    let mut t = topology(
        TopologyType::ReplicaSetNoPrimary,
        vec![
            server("a:27017", ServerType::Unknown, 0),
            server("b:27017", ServerType::RsSecondary, 5),
        ],
    );
    t.servers.get_mut(&addr("a:27017")).unwrap().error = Some(
        crate::error::Error::network_message(None, "connection refused"),
    );
    let err = selection_error(&t, &Criteria::Write);
    assert!(matches!(err.kind(), ErrorKind::ServerSelection { .. }));
    let text = err.to_string();
    for part in [
        "write",
        "ReplicaSetNoPrimary",
        "a:27017 (Unknown, last error: I/O error: connection refused)",
        "b:27017 (RSSecondary)",
    ] {
        assert!(text.contains(part), "{part:?} missing from {text}");
    }
    let empty = topology(TopologyType::Unknown, Vec::new());
    assert!(
        describe_selection_failure(&empty, &read(ReadPreferenceMode::Nearest), true)
            .contains("no servers are known")
    );
}

#[test]
fn log_messages() {
    let t = replica_set();
    let criteria = Criteria::ReadPreference(
        ReadPreference::with_mode(ReadPreferenceMode::Secondary)
            .with_tag_sets(vec![TagSet::from([("dc".to_string(), "ny".to_string())])])
            .with_max_staleness(Duration::from_secs(120)),
    );
    let context = SelectionLogContext {
        operation: "find",
        operation_id: Some(42),
        criteria: &criteria,
        topology: &t,
    };
    let started = SelectionLog::started(&context);
    assert_eq!(started.level, SelectionLogLevel::Debug);
    assert_eq!(started.message(), "Server selection started");
    assert_eq!(started.fields.get_str("operation").unwrap(), "find");
    assert_eq!(started.fields.get_i64("operationId").unwrap(), 42);
    let selector = started.fields.get_str("selector").unwrap();
    for component in ["secondary", "dc", "ny", "maxStalenessSeconds"] {
        assert!(selector.contains(component), "{selector}");
    }
    assert!(started
        .fields
        .get_str("topologyDescription")
        .unwrap()
        .contains("ReplicaSetWithPrimary"));
    assert!(started
        .unstructured()
        .starts_with("Server selection started for operation find with ID 42. Selector: "));

    let succeeded = SelectionLog::succeeded(&context, &addr("b:27017"));
    assert_eq!(succeeded.message(), "Server selection succeeded");
    assert_eq!(succeeded.fields.get_str("serverHost").unwrap(), "b");
    assert_eq!(succeeded.fields.get_i32("serverPort").unwrap(), 27017);
    let unix = SelectionLog::succeeded(
        &context,
        &ServerAddress::parse("/tmp/mongodb-27017.sock").unwrap(),
    );
    assert!(!unix.fields.contains_key("serverPort"));

    let failure = selection_error(&t, &criteria);
    let failed = SelectionLog::failed(&context, &failure);
    assert_eq!(failed.message(), "Server selection failed");
    assert_eq!(
        failed.fields.get_str("failure").unwrap(),
        failure.to_string()
    );

    let waiting = SelectionLog::waiting(&context, Some(Duration::from_millis(1500)));
    assert_eq!(waiting.level, SelectionLogLevel::Info);
    assert_eq!(
        waiting.message(),
        "Waiting for suitable server to become available"
    );
    assert_eq!(waiting.fields.get_i64("remainingTimeMS").unwrap(), 1500);
    assert!(waiting.unstructured().contains("Remaining time: 1500 ms."));
    let no_deadline = SelectionLog::waiting(&context, None);
    assert!(!no_deadline.fields.contains_key("remainingTimeMS"));

    let custom = Criteria::Predicate(Arc::new(|_: &ServerInfo| true));
    let context = SelectionLogContext {
        operation: "insert",
        operation_id: None,
        criteria: &custom,
        topology: &t,
    };
    let started = SelectionLog::started(&context);
    assert!(started
        .fields
        .get_str("selector")
        .unwrap()
        .contains("custom"));
    assert!(!started.fields.contains_key("operationId"));
    assert!(started
        .unstructured()
        .starts_with("Server selection started for operation insert. Selector"));
}
