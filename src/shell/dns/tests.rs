use std::time::Duration;

use super::*;

#[test]
fn resolv_conf_is_read_like_the_c_library() {
    let config = ResolverConfig::from_resolv_conf(
        "# comment\nnameserver 10.0.0.2\nnameserver fe80::1%eth0\nnameserver ::1\n\
         search svc.cluster.local cluster.local.\noptions ndots:5 timeout:2 attempts:3 rotate\n",
    );
    assert_eq!(
        config.name_servers,
        vec!["10.0.0.2:53".parse().unwrap(), "[::1]:53".parse().unwrap()]
    );
    assert_eq!(config.search, vec!["svc.cluster.local", "cluster.local"]);
    assert_eq!(config.ndots, 5);
    assert_eq!(config.attempt_timeout, Duration::from_secs(2));
    assert_eq!(config.attempts, 3);
    assert!(config.use_hosts_file);
    let empty = ResolverConfig::from_resolv_conf("");
    assert_eq!(empty.name_servers, vec!["127.0.0.1:53".parse().unwrap()]);
}

#[test]
fn search_list_follows_ndots() {
    let mut config = ResolverConfig::from_resolv_conf("search a.example b.example\n");
    assert_eq!(
        candidate_names(&config, "db"),
        vec!["db.a.example", "db.b.example", "db"]
    );
    assert_eq!(
        candidate_names(&config, "db.x"),
        vec!["db.x", "db.x.a.example", "db.x.b.example"]
    );
    config.ndots = 5;
    assert_eq!(candidate_names(&config, "db.x")[0], "db.x.a.example");
    assert_eq!(candidate_names(&config, "db.x."), vec!["db.x"]);
}

#[test]
fn hosts_file_lines_match_any_alias() {
    let text = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n10.1.1.1 Mongo-0 m0 # c\n";
    assert_eq!(
        hosts_file_lookup(text, "m0"),
        vec!["10.1.1.1".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(hosts_file_lookup(text, "mongo-0").len(), 1);
    assert_eq!(hosts_file_lookup(text, "localhost").len(), 2);
    assert!(hosts_file_lookup(text, "nothere").is_empty());
}

#[test]
fn ip_literals_need_no_look_up() {
    let config = ResolverConfig::with_name_servers(Vec::new());
    assert_eq!(
        resolve_host(&config, "::1", 5, None).unwrap(),
        vec!["[::1]:5".parse().unwrap()]
    );
}
