use super::*;

#[test]
fn ip_literals_need_no_look_up() {
    let config = ResolverConfig::with_name_servers(Vec::new());
    assert_eq!(
        resolve_host(&config, "::1", 5, None).unwrap(),
        vec!["[::1]:5".parse().unwrap()]
    );
    assert!(resolve_hosts(&config, &["10.0.0.1".into()], None)
        .unwrap()
        .is_empty());
}

#[test]
fn name_servers_given_in_code_keep_their_ports() {
    let config = ResolverConfig::with_name_servers(vec!["127.0.0.1:5353".parse().unwrap()]);
    let servers = config.servers.name_servers();
    assert_eq!(servers.len(), 1);
    assert!(!servers[0].connections.is_empty());
    assert!(servers[0].connections.iter().all(|c| c.port == 5353));
    assert!(!config.use_hosts_file);
}

#[test]
fn an_expired_deadline_fails_before_asking() {
    let config = ResolverConfig::with_name_servers(vec!["127.0.0.1:9".parse().unwrap()]);
    let past = config.clock.now();
    let error = lookup_srv_and_txt(&config, "_mongodb._tcp.a.example", "a.example", Some(past))
        .unwrap_err();
    assert!(error.is_network_timeout(), "{error}");
}
