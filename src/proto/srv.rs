//! The pure rules of `mongodb+srv` seed-list discovery and SRV polling.
//!
//! Values in, decisions out: the DNS answers arrive as plain lists and the
//! randomness as an injected [`fastrand::Rng`], so every rule of the
//! initial-dns-seedlist-discovery and polling-srv-records specs is unit
//! tested here. The look-ups themselves live in the private `dns` module.
//!
//! ```text
//!  srv host ──> srv_query_name ──(SRV)──> check_target (each) ──> choose_seeds (srvMaxHosts)
//!           └─────────────────────(TXT)──> parse_txt_options ──> apply_txt_options (URI wins)
//! ```

use std::time::Duration;

use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::options::ClientOptions;

/// The spec's floor for the SRV rescan interval, whatever the records' TTLs.
pub const MIN_RESCAN_SRV_INTERVAL: Duration = Duration::from_secs(60);

/// The options a TXT record may set (initial-dns-seedlist-discovery spec).
pub const TXT_ALLOWED_OPTIONS: [&str; 3] = ["authSource", "replicaSet", "loadBalanced"];

/// One SRV answer: where a member listens, and how long the answer may be kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrvTarget {
    /// The target host name as the DNS server wrote it.
    pub host: String,
    /// The target port.
    pub port: u16,
    /// The record's time to live, in seconds.
    pub ttl: u32,
}

/// The options a TXT record gave, already checked against the allow-list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxtOptions {
    /// `authSource`.
    pub auth_source: Option<String>,
    /// `replicaSet`.
    pub replica_set: Option<String>,
    /// `loadBalanced`.
    pub load_balanced: Option<bool>,
}

/// The name the SRV question asks about: `_{service}._tcp.{host}`.
pub fn srv_query_name(service_name: &str, host: &str) -> String {
    format!("_{service_name}._tcp.{host}")
}

/// A host name in the form the rules compare: lower case, no trailing dot.
fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// The parent-domain rule: a target must lie under the SRV host's
/// `{domainname}` (the host less its first label when it has three or more
/// labels, else the whole host, so that a one- or two-label host's targets
/// have at least one more level than it).
pub fn check_target(srv_host: &str, target: &str) -> Result<()> {
    let srv_host = normalize(srv_host);
    let target_name = normalize(target);
    let labels = srv_host.split('.').count();
    let domain = if labels >= 3 {
        srv_host.split_once('.').map_or("", |(_, rest)| rest)
    } else {
        srv_host.as_str()
    };
    if target_name.ends_with(&format!(".{domain}")) {
        return Ok(());
    }
    Err(Error::dns_resolve(format!(
        "the SRV record of {srv_host} names the host {target_name:?}, which is not under its \
         parent domain {domain:?}; refusing to connect to it"
    )))
}

/// Turns SRV answers into seed addresses, each checked by [`check_target`].
/// No answers is an error: the URI found no hosts.
pub fn seeds_from_targets(srv_host: &str, targets: &[SrvTarget]) -> Result<Vec<ServerAddress>> {
    if targets.is_empty() {
        return Err(Error::dns_resolve(format!(
            "the SRV look-up for {srv_host} returned no records, so the connection string names \
             no hosts"
        )));
    }
    let mut seeds = Vec::with_capacity(targets.len());
    for target in targets {
        check_target(srv_host, &target.host)?;
        let address = ServerAddress::tcp(normalize(&target.host), target.port);
        if !seeds.contains(&address) {
            seeds.push(address);
        }
    }
    Ok(seeds)
}

/// `srvMaxHosts`: all hosts when it is 0 or at least their number, else
/// that many chosen at random (a Fisher-Yates shuffle, then the first ones).
pub fn choose_seeds(
    mut hosts: Vec<ServerAddress>,
    srv_max_hosts: u32,
    rng: &mut fastrand::Rng,
) -> Vec<ServerAddress> {
    let max = srv_max_hosts as usize;
    if max == 0 || max >= hosts.len() {
        return hosts;
    }
    rng.shuffle(&mut hosts);
    hosts.truncate(max);
    hosts
}

/// Parses the TXT answer: at most one record, whose strings join into one
/// `key=value&...` text naming only [`TXT_ALLOWED_OPTIONS`].
pub fn parse_txt_options(srv_host: &str, records: &[Vec<Vec<u8>>]) -> Result<TxtOptions> {
    let place =
        |problem: String| Error::dns_resolve(format!("the TXT record of {srv_host} {problem}"));
    let record = match records {
        [] => return Ok(TxtOptions::default()),
        [one] => one,
        several => {
            return Err(place(format!(
                "must be single, but there are {}",
                several.len()
            )))
        }
    };
    let joined: Vec<u8> = record.iter().flatten().copied().collect();
    let text = String::from_utf8(joined).map_err(|_| place("is not UTF-8".to_string()))?;
    let mut options = TxtOptions::default();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let Some((key, raw_value)) = pair.split_once('=') else {
            return Err(place(format!("has {pair:?}, which is not key=value")));
        };
        let value = crate::proto::uri::percent_decode(raw_value)
            .map_err(|e| place(format!("has a value for {key:?} that {}", e.0)))?;
        if value.is_empty() {
            return Err(place(format!("gives {key:?} an empty value")));
        }
        match key.to_ascii_lowercase().as_str() {
            "authsource" => options.auth_source = Some(value),
            "replicaset" => options.replica_set = Some(value),
            "loadbalanced" => {
                options.load_balanced = Some(match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(place(format!(
                            "gives loadBalanced the value {value:?}; expected true or false"
                        )))
                    }
                })
            }
            _ => {
                return Err(place(format!(
                    "sets {key:?}, but a TXT record may only set {}",
                    TXT_ALLOWED_OPTIONS.join(", ")
                )))
            }
        }
    }
    Ok(options)
}

/// Lays the TXT options under `options`: what the connection string or
/// code set wins, as the spec requires.
///
/// `authSource` is where credentials are checked, so it applies only when
/// credentials were given: hosted clusters publish `authSource=admin` for
/// every client, and the auth spec makes an `authSource` without a user an
/// error, which would lock out clients that do not authenticate. Nor does
/// it apply to mechanisms that authenticate only against `$external`
/// (MONGODB-X509, GSSAPI, MONGODB-AWS, MONGODB-OIDC): Atlas publishes
/// `authSource=admin`, which such a client must ignore, as other drivers do.
///
/// Returns why the TXT record's `authSource` went unused, when it did, for
/// the shell's debug log.
#[must_use]
pub fn apply_txt_options(options: &mut ClientOptions, txt: TxtOptions) -> Option<String> {
    if options.repl_set_name.is_none() {
        options.repl_set_name = txt.replica_set;
    }
    if options.load_balanced.is_none() {
        options.load_balanced = txt.load_balanced;
    }
    let source = txt.auth_source?;
    match &mut options.credential {
        Some(credential) if credential.source.is_none() && !external_only(credential) => {
            credential.source = Some(source);
            None
        }
        Some(_) => Some(format!(
            "the TXT record's authSource={source} is unused: the credential sets its own"
        )),
        None => Some(format!(
            "the TXT record's authSource={source} is unused: no credentials were given"
        )),
    }
}

/// Whether the credential's mechanism authenticates only against
/// `$external`, whatever `authSource` says.
fn external_only(credential: &crate::proto::options::Credential) -> bool {
    credential.mechanism_name().is_some_and(|m| {
        ["MONGODB-X509", "GSSAPI", "MONGODB-AWS", "MONGODB-OIDC"]
            .iter()
            .any(|e| e.eq_ignore_ascii_case(m))
    })
}

/// How long to wait before the next SRV rescan: the lowest TTL of the
/// last answer, but at least [`MIN_RESCAN_SRV_INTERVAL`]; `None` (no
/// verified record) means heartbeatFrequencyMS, as the polling spec says.
pub fn rescan_interval(targets: Option<&[SrvTarget]>, heartbeat_frequency: Duration) -> Duration {
    match targets.and_then(|t| t.iter().map(|t| t.ttl).min()) {
        Some(ttl) => Duration::from_secs(u64::from(ttl)).max(MIN_RESCAN_SRV_INTERVAL),
        None => heartbeat_frequency,
    }
}

/// The polling spec's update of the mongos list: hosts no longer
/// returned leave, hosts kept stay untouched, and new hosts join (chosen at
/// random once `srvMaxHosts` would be exceeded). A target outside the
/// parent domain is dropped, and why is handed back for the shell's log,
/// rather than failing the rescan.
pub fn poll_update(
    srv_host: &str,
    current: &[ServerAddress],
    targets: &[SrvTarget],
    srv_max_hosts: u32,
    rng: &mut fastrand::Rng,
) -> PollUpdate {
    let mut valid: Vec<ServerAddress> = Vec::new();
    let mut rejected = Vec::new();
    for target in targets {
        match check_target(srv_host, &target.host) {
            Ok(()) => {
                let address = ServerAddress::tcp(normalize(&target.host), target.port);
                if !valid.contains(&address) {
                    valid.push(address);
                }
            }
            Err(error) => rejected.push(error),
        }
    }
    if valid.is_empty() {
        return PollUpdate {
            hosts: None,
            rejected,
        };
    }
    let mut next: Vec<ServerAddress> = current
        .iter()
        .filter(|a| valid.contains(a))
        .cloned()
        .collect();
    let mut new_hosts: Vec<ServerAddress> =
        valid.into_iter().filter(|a| !next.contains(a)).collect();
    let max = srv_max_hosts as usize;
    if max > 0 && next.len() + new_hosts.len() > max {
        rng.shuffle(&mut new_hosts);
        new_hosts.truncate(max.saturating_sub(next.len()));
    }
    next.extend(new_hosts);
    let unchanged = next.len() == current.len() && next.iter().all(|a| current.contains(a));
    PollUpdate {
        hosts: (!unchanged).then_some(next),
        rejected,
    }
}

/// What one SRV rescan decides ([`poll_update`]).
#[derive(Debug)]
pub struct PollUpdate {
    /// The new host list, or `None` when nothing changes.
    pub hosts: Option<Vec<ServerAddress>>,
    /// Why each target outside the parent domain was dropped.
    pub rejected: Vec<Error>,
}

impl PollUpdate {
    /// Whether any target passed the checks (a rescan with none waits
    /// heartbeatFrequencyMS, not the records' TTL).
    pub fn verified(&self, targets: &[SrvTarget]) -> bool {
        self.rejected.len() < targets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(host: &str, port: u16) -> SrvTarget {
        SrvTarget {
            host: host.to_string(),
            port,
            ttl: 300,
        }
    }

    fn txt(strings: &[&str]) -> Vec<Vec<u8>> {
        strings.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn parent_domain_of_three_or_more_labels_drops_the_first() {
        let host = "blogs.mongodb.com";
        assert!(check_target(host, "cluster.mongodb.com.").is_ok());
        assert!(check_target(host, "a.b.MONGODB.com").is_ok());
        assert!(check_target(host, "blogs.evil.com").is_err());
        assert!(check_target(host, "cluster.testmongodb.com").is_err());
        // Same name as the SRV host: under its parent, so accepted.
        assert!(check_target("test.build.10gen.cc", "test.build.10gen.cc").is_ok());
        assert!(check_target("test13.test.build.10gen.cc", "test.build.10gen.cc").is_err());
        assert!(check_target("test12.test.build.10gen.cc", "localhost.build.10gen.cc").is_err());
    }

    #[test]
    fn short_hosts_need_one_more_level() {
        assert!(check_target("localhost", "db.localhost").is_ok());
        assert!(check_target("localhost", "localhost").is_err());
        assert!(check_target("localhost", "localhost.mongodb").is_err());
        assert!(check_target("localhost", "test_1.cluster_1localhost").is_err());
        assert!(check_target("mongo.local", "mongo.local").is_err());
        assert!(check_target("mongo.local", "test_1.evil.local").is_err());
        assert!(check_target("mongo.local", "test_1.my_hostmongo.local").is_err());
        assert!(check_target("mongo.local", "a.mongo.local").is_ok());
    }

    #[test]
    fn the_target_error_names_host_and_domain() {
        let message = check_target("blogs.mongodb.com", "blogs.evil.com")
            .unwrap_err()
            .to_string();
        assert!(message.contains("blogs.evil.com"), "{message}");
        assert!(message.contains("mongodb.com"), "{message}");
    }

    #[test]
    fn seeds_are_normalized_and_empty_answers_fail() {
        let seeds = seeds_from_targets(
            "test1.test.build.10gen.cc",
            &[
                target("LOCALHOST.test.build.10gen.cc.", 27017),
                target("localhost.test.build.10gen.cc", 27018),
            ],
        )
        .unwrap();
        assert_eq!(
            seeds,
            vec![
                ServerAddress::tcp("localhost.test.build.10gen.cc", 27017),
                ServerAddress::tcp("localhost.test.build.10gen.cc", 27018),
            ]
        );
        let error = seeds_from_targets("test4.x.y", &[])
            .unwrap_err()
            .to_string();
        assert!(error.contains("no records"), "{error}");
    }

    #[test]
    fn srv_max_hosts_picks_a_random_subset() {
        let hosts: Vec<ServerAddress> = (0..5).map(|i| ServerAddress::tcp("h.a.b", i)).collect();
        let mut rng = fastrand::Rng::with_seed(7);
        assert_eq!(choose_seeds(hosts.clone(), 0, &mut rng), hosts);
        assert_eq!(choose_seeds(hosts.clone(), 5, &mut rng), hosts);
        assert_eq!(choose_seeds(hosts.clone(), 9, &mut rng), hosts);
        let mut seen = std::collections::HashSet::new();
        for seed in 0..50 {
            let chosen = choose_seeds(hosts.clone(), 2, &mut fastrand::Rng::with_seed(seed));
            assert_eq!(chosen.len(), 2);
            assert!(chosen.iter().all(|a| hosts.contains(a)));
            assert_ne!(chosen[0], chosen[1]);
            seen.extend(chosen);
        }
        assert_eq!(seen.len(), 5, "every host should be chosen by some seed");
    }

    #[test]
    fn txt_strings_join_and_only_allowed_options_pass() {
        let parsed = parse_txt_options(
            "h",
            &[txt(&["replicaS", "et=rep", "l0&authSource=th%69sDB"])],
        )
        .unwrap();
        assert_eq!(parsed.replica_set.as_deref(), Some("repl0"));
        assert_eq!(parsed.auth_source.as_deref(), Some("thisDB"));
        let parsed = parse_txt_options("h", &[txt(&["LOADBALANCED=true"])]).unwrap();
        assert_eq!(parsed.load_balanced, Some(true));
        assert_eq!(parse_txt_options("h", &[]).unwrap(), TxtOptions::default());
        for (records, expected) in [
            (
                vec![txt(&["replicaSet=a"]), txt(&["authSource=b"])],
                "single",
            ),
            (vec![txt(&["ssl=false"])], "may only set"),
            (vec![txt(&["socketTimeoutMS=500"])], "may only set"),
            (vec![txt(&["authSource"])], "not key=value"),
            (vec![txt(&["authSource="])], "empty value"),
            (vec![txt(&["loadBalanced=yes"])], "true or false"),
        ] {
            let error = parse_txt_options("h.a.b", &records)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{error}");
            assert!(error.contains("TXT record of h.a.b"), "{error}");
        }
    }

    #[test]
    fn the_connection_string_overrides_the_txt_record() {
        let mut options = ClientOptions::parse(
            "mongodb+srv://u:p@test5.test.build.10gen.cc/?authSource=otherDB&loadBalanced=false",
        )
        .run()
        .unwrap();
        let unused = apply_txt_options(
            &mut options,
            TxtOptions {
                auth_source: Some("thisDB".into()),
                replica_set: Some("repl0".into()),
                load_balanced: Some(true),
            },
        );
        assert!(unused.is_some_and(|why| why.contains("the credential sets its own")));
        assert_eq!(options.auth_source(), Some("otherDB"));
        assert_eq!(options.replica_set(), Some("repl0"));
        assert!(!options.load_balanced());

        let mut options = ClientOptions::parse("mongodb+srv://u:p@a.b.c/")
            .run()
            .unwrap();
        let unused = apply_txt_options(
            &mut options,
            TxtOptions {
                auth_source: Some("thisDB".into()),
                ..TxtOptions::default()
            },
        );
        assert_eq!(unused, None);
        assert_eq!(options.auth_source(), Some("thisDB"));
        assert_eq!(options.credential().unwrap().username.as_deref(), Some("u"));

        // No credentials: the TXT authSource has nothing to apply to.
        let mut options = ClientOptions::parse("mongodb+srv://a.b.c/").run().unwrap();
        let unused = apply_txt_options(
            &mut options,
            TxtOptions {
                auth_source: Some("thisDB".into()),
                ..TxtOptions::default()
            },
        );
        assert!(unused.is_some_and(|why| why.contains("no credentials were given")));
        assert_eq!(options.credential(), None);
    }

    #[test]
    fn x509_keeps_external_whatever_the_txt_record_says() {
        let mut options = ClientOptions::parse("mongodb+srv://a.b.c/?authMechanism=MONGODB-X509")
            .run()
            .unwrap();
        let unused = apply_txt_options(
            &mut options,
            TxtOptions {
                auth_source: Some("admin".into()),
                ..TxtOptions::default()
            },
        );
        assert!(unused.is_some_and(|why| why.contains("the credential sets its own")));
        assert_eq!(options.auth_source(), Some("$external"));
        options.validate().unwrap();
    }

    #[test]
    fn rescan_interval_is_the_lowest_ttl_but_at_least_a_minute() {
        let hb = Duration::from_secs(10);
        let mut targets = vec![target("a.b.c", 1), target("d.b.c", 2)];
        targets[0].ttl = 3600;
        targets[1].ttl = 120;
        assert_eq!(
            rescan_interval(Some(&targets), hb),
            Duration::from_secs(120)
        );
        targets[1].ttl = 5;
        assert_eq!(rescan_interval(Some(&targets), hb), MIN_RESCAN_SRV_INTERVAL);
        assert_eq!(rescan_interval(None, hb), hb);
    }

    #[test]
    fn polling_keeps_survivors_drops_the_gone_and_adds_the_new() {
        let mut rng = fastrand::Rng::with_seed(1);
        let a = ServerAddress::tcp("a.b.c", 1);
        let b = ServerAddress::tcp("b.b.c", 1);
        let current = vec![a.clone(), b.clone()];
        let next = poll_update(
            "x.b.c",
            &current,
            &[
                target("b.b.c", 1),
                target("c.b.c", 1),
                target("evil.com", 1),
            ],
            0,
            &mut rng,
        );
        assert_eq!(next.rejected.len(), 1, "{:?}", next.rejected);
        assert!(
            next.rejected[0].to_string().contains("evil.com"),
            "{:?}",
            next.rejected
        );
        let next = next.hosts.unwrap();
        assert_eq!(next, vec![b.clone(), ServerAddress::tcp("c.b.c", 1)]);
        // Same set: no change. No valid records: no change.
        assert_eq!(
            poll_update(
                "x.b.c",
                &current,
                &[target("b.b.c", 1), target("a.b.c", 1)],
                0,
                &mut rng
            )
            .hosts,
            None
        );
        let none_valid = [target("evil.com", 1)];
        let update = poll_update("x.b.c", &current, &none_valid, 0, &mut rng);
        assert_eq!(update.hosts, None);
        assert!(!update.verified(&none_valid));
        // srvMaxHosts: survivors stay, new ones fill up to the limit.
        let next = poll_update(
            "x.b.c",
            &current,
            &[target("a.b.c", 1), target("c.b.c", 1), target("d.b.c", 1)],
            2,
            &mut rng,
        )
        .hosts
        .unwrap();
        assert_eq!(next.len(), 2);
        assert_eq!(next[0], a);
        assert!(
            next[1] == ServerAddress::tcp("c.b.c", 1) || next[1] == ServerAddress::tcp("d.b.c", 1)
        );
    }
}
