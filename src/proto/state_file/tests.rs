//! The codec against well-formed, torn, garbled and hostile files, and the
//! sealing's promises (no password, no verifier).

use super::*;

fn keys(mechanism: ScramMechanism, password: &str) -> (ScramKeys, SaltParams) {
    let params = SaltParams {
        salt: b"sixteen byte slt".to_vec(),
        iterations: 4096,
    };
    let prepared = mechanism.prepare_password("user", password).unwrap();
    let keys = ScramKeys::derive(mechanism, &prepared, &params.salt, params.iterations);
    (keys, params)
}

fn sealed(mechanism: ScramMechanism, password: &str, nonce: u8) -> SealedScramKeys {
    let (keys, params) = keys(mechanism, password);
    let prepared = mechanism.prepare_password("user", password).unwrap();
    SealedScramKeys::seal(
        &keys,
        mechanism,
        params,
        &prepared,
        Binding([1; 32]),
        [nonce; 16],
    )
}

fn sample() -> StateContents {
    let mut contents = StateContents::default();
    contents.replace(
        Binding([1; 32]),
        &[sealed(ScramMechanism::Sha256, "pencil", 1)],
        100,
    );
    contents.replace(
        Binding([2; 32]),
        &[sealed(ScramMechanism::Sha1, "pencil", 2)],
        200,
    );
    contents.remember(Binding([1; 32]), &[Item::Chain(chain("localhost", 3))], 300);
    contents.remember(
        Binding([1; 32]),
        &[srv_answer(400), host("db.example", 400)],
        300,
    );
    contents.remember(
        Binding([1; 32]),
        &[Item::Topology(seen_topology(1_000))],
        300,
    );
    contents
}

fn srv_answer(expires: u64) -> Item {
    Item::Srv(SrvAnswer {
        targets: vec![crate::proto::srv::SrvTarget {
            host: "db.example".into(),
            port: 27017,
            ttl: 60,
        }],
        txt_records: vec![vec![
            b"replicaSet=rs0".to_vec(),
            b"&authSource=admin".to_vec(),
        ]],
        expires,
    })
}

fn host(name: &str, expires: u64) -> Item {
    Item::Host(HostAddresses {
        host: name.into(),
        ips: vec![
            std::net::IpAddr::from([127, 0, 0, 1]),
            std::net::IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]),
        ],
        expires,
    })
}

#[test]
fn dns_answers_are_kept_one_per_name_and_trusted_until_they_expire() {
    let mut contents = sample();
    let binding = Binding([1; 32]);
    contents.remember(binding, &[srv_answer(900), host("DB.example", 900)], 800);
    let Some(answer) = contents.srv_answer(binding) else {
        panic!("no SRV answer");
    };
    assert_eq!(answer.expires, 900);
    assert_eq!(
        contents.host_addresses(binding).len(),
        1,
        "replaced by name"
    );
    assert!(contents.srv_answer(Binding([2; 32])).is_none());
    // Fresh until it expires, its TTLs cut to what is left.
    assert_eq!(answer.fresh_at(870).unwrap().targets[0].ttl, 30);
    assert!(answer.fresh_at(900).is_none());
    assert!(contents.host_addresses(binding)[0].fresh_at(899));
    assert!(!contents.host_addresses(binding)[0].fresh_at(900));
    assert_eq!(StateContents::decode(&contents.encode()), Ok(contents));
    assert_eq!(dns_expiry(100, 0), None, "a TTL of zero is not kept");
    assert_eq!(
        dns_expiry(100, 86_400),
        Some(100 + 3_600),
        "at most an hour"
    );
}

fn chain(server_name: &str, seed: u8) -> VerifiedChain {
    VerifiedChain {
        server_name: server_name.into(),
        trust: [seed; 32],
        chain: [seed.wrapping_add(1); 32],
        valid_until: 1_000 + u64::from(seed),
    }
}

#[test]
fn keys_and_chains_are_replaced_each_on_their_own() {
    let mut contents = sample();
    let binding = Binding([1; 32]);
    contents.replace(binding, &[], 400);
    assert!(contents.scram_keys(binding).is_empty());
    assert_eq!(
        contents.verified_chains(binding),
        vec![chain("localhost", 3)]
    );
    // A newer chain for the same name and trust takes the old one's place;
    // another name's stays.
    let mut renewed = chain("localhost", 3);
    renewed.chain = [9; 32];
    let items = [
        Item::Chain(renewed.clone()),
        Item::Chain(chain("db.example", 4)),
    ];
    contents.remember(binding, &items, 500);
    assert_eq!(
        contents.verified_chains(binding),
        vec![renewed, chain("db.example", 4)]
    );
    assert_eq!(contents.scram_keys(Binding([2; 32])).len(), 1);
    assert!(contents.verified_chains(Binding([2; 32])).is_empty());
    assert_eq!(StateContents::decode(&contents.encode()), Ok(contents));
}

#[test]
fn a_certificate_s_not_after_is_read_from_its_der() {
    for (year, month, day, unix) in [(2027, 1, 1, 1_798_761_600), (2051, 3, 1, 2_561_241_600)] {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, month, day);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(certificate_not_after(cert.der()), Some(unix), "{year}");
    }
    assert_eq!(certificate_not_after(b"not a certificate"), None);
    assert_eq!(
        certificate_not_after(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]),
        None
    );
}

#[test]
fn contents_survive_encoding() {
    let contents = sample();
    assert_eq!(StateContents::decode(&contents.encode()), Ok(contents));
    let empty = StateContents::default();
    assert_eq!(StateContents::decode(&empty.encode()), Ok(empty));
}

#[test]
fn unsealing_with_the_password_gives_the_keys_and_with_another_garbage() {
    for mechanism in [ScramMechanism::Sha1, ScramMechanism::Sha256] {
        let entry = sealed(mechanism, "pencil", 3);
        let right = mechanism.prepare_password("user", "pencil").unwrap();
        let wrong = mechanism.prepare_password("user", "crayon").unwrap();
        assert_eq!(
            entry.unseal(&right, Binding([1; 32])),
            keys(mechanism, "pencil").0
        );
        assert_ne!(
            entry.unseal(&wrong, Binding([1; 32])),
            keys(mechanism, "pencil").0
        );
        // Bound to the binding: the same bytes under another client's
        // binding unseal to garbage.
        assert_ne!(
            entry.unseal(&right, Binding([2; 32])),
            keys(mechanism, "pencil").0
        );
    }
}

#[test]
fn the_file_holds_neither_the_password_nor_the_keys_in_clear() {
    let password = "pencil-secret";
    for mechanism in [ScramMechanism::Sha1, ScramMechanism::Sha256] {
        let (plain, _) = keys(mechanism, password);
        let prepared = mechanism.prepare_password("user", password).unwrap();
        let mut contents = StateContents::default();
        contents.replace(Binding([1; 32]), &[sealed(mechanism, password, 4)], 1);
        let bytes = contents.encode();
        let (client, server) = plain.parts();
        for needle in [password.as_bytes(), &prepared, client, server] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{mechanism:?}: a secret is in the file"
            );
        }
    }
}

#[test]
fn the_same_keys_seal_differently_under_each_nonce() {
    let a = sealed(ScramMechanism::Sha256, "pencil", 1);
    let b = sealed(ScramMechanism::Sha256, "pencil", 2);
    assert_ne!(a.sealed, b.sealed);
}

#[test]
fn every_truncation_and_every_flipped_bit_is_refused() {
    let bytes = sample().encode();
    for len in 0..bytes.len() {
        assert!(
            StateContents::decode(&bytes[..len]).is_err(),
            "torn at {len}"
        );
    }
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut garbled = bytes.clone();
            garbled[at] ^= 1 << bit;
            assert!(
                StateContents::decode(&garbled).is_err(),
                "bit {bit} of byte {at}"
            );
        }
    }
}

/// A body with a correct digest: what a hostile writer could produce.
fn with_digest(mut body: Vec<u8>) -> Vec<u8> {
    let digest = digest::digest(&digest::SHA256, &body);
    body.extend_from_slice(digest.as_ref());
    body
}

fn header(version: u16, count: u16) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out
}

fn entry(kind: u8, body: &[u8], declared_len: u16) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&[1; 32]);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&declared_len.to_le_bytes());
    out.extend_from_slice(body);
    out
}

#[test]
fn hostile_files_with_valid_digests_are_refused_by_name() {
    let good = encode_scram(&sealed(ScramMechanism::Sha256, "pencil", 1));
    let mut huge_salt = good.clone();
    huge_salt[5] = 200;
    let mut zero_salt = good.clone();
    zero_salt[5] = 0;
    let mut few_iterations = good.clone();
    few_iterations[1..5].copy_from_slice(&1u32.to_le_bytes());
    let mut bad_mechanism = good.clone();
    bad_mechanism[0] = 9;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (header(2, 0), "another format version"),
        (
            [b"NOTSTATE".to_vec(), vec![1, 0, 0, 0]].concat(),
            "not a mongo-inline",
        ),
        (header(1, u16::MAX), "too many entries"),
        (header(1, 1), "ends inside an entry"),
        (
            [header(1, 1), entry(1, &good, u16::MAX)].concat(),
            "ends inside an entry",
        ),
        (
            [header(1, 1), entry(7, &good, good.len() as u16)].concat(),
            "unknown kind",
        ),
        (
            [header(1, 1), entry(1, &huge_salt, good.len() as u16)].concat(),
            "salt",
        ),
        (
            [header(1, 1), entry(1, &zero_salt, good.len() as u16)].concat(),
            "salt",
        ),
        (
            [header(1, 1), entry(1, &few_iterations, good.len() as u16)].concat(),
            "iteration",
        ),
        (
            [header(1, 1), entry(1, &bad_mechanism, good.len() as u16)].concat(),
            "mechanism",
        ),
        ([header(1, 0), vec![0]].concat(), "after its last entry"),
    ];
    for (body, expected) in cases {
        let error = StateContents::decode(&with_digest(body)).unwrap_err();
        assert!(
            error.0.contains(expected),
            "{error} (expected {expected:?})"
        );
    }
    let oversized = vec![0u8; MAX_FILE_BYTES + 1];
    assert!(StateContents::decode(&oversized)
        .unwrap_err()
        .0
        .contains("larger"));
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = fastrand::Rng::with_seed(41);
    let good = sample().encode();
    for round in 0..2000 {
        let mut bytes = if round % 2 == 0 {
            (0..rng.usize(0..600))
                .map(|_| rng.u8(..))
                .collect::<Vec<_>>()
        } else {
            good.clone()
        };
        // Mutate, then fix the digest half of the time so that the parser
        // itself sees the damage.
        for _ in 0..rng.usize(1..8) {
            if !bytes.is_empty() {
                let at = rng.usize(..bytes.len());
                bytes[at] = rng.u8(..);
            }
        }
        if round % 4 < 2 && bytes.len() > DIGEST_BYTES {
            bytes.truncate(bytes.len() - DIGEST_BYTES);
            bytes = with_digest(bytes);
        }
        let _ = StateContents::decode(&bytes);
    }
}

#[test]
fn the_fixture_files_are_refused() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/state_file");
    let mut seen = 0;
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(StateContents::decode(&bytes).is_err(), "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 3, "fixtures missing in {}", dir.display());
}

#[test]
fn beyond_the_limit_the_oldest_entries_go() {
    let mut contents = StateContents::default();
    let entry = sealed(ScramMechanism::Sha256, "pencil", 1);
    for i in 0..(MAX_ENTRIES as u64 + 10) {
        let mut binding = [0u8; 32];
        binding[..8].copy_from_slice(&i.to_le_bytes());
        contents.replace(Binding(binding), std::slice::from_ref(&entry), i);
    }
    assert_eq!(contents.entries.len(), MAX_ENTRIES);
    assert!(contents.entries.iter().all(|e| e.written >= 10));
    assert!(StateContents::decode(&contents.encode()).is_ok());
}

#[test]
fn the_binding_changes_with_hosts_user_and_tls_but_not_the_password() {
    let binding = |uri: &str| Binding::of(&crate::ClientOptions::parse(uri).run().unwrap());
    let base = binding("mongodb://u:p@a:27017/?tls=true");
    assert_eq!(base, binding("mongodb://u:other@a:27017/?tls=true"));
    assert_ne!(base, binding("mongodb://u:p@b:27017/?tls=true"));
    assert_ne!(base, binding("mongodb://v:p@a:27017/?tls=true"));
    assert_ne!(base, binding("mongodb://u:p@a:27017/?tls=false"));
    assert_ne!(
        base,
        binding("mongodb://u:p@a:27017/?tls=true&tlsAllowInvalidCertificates=true")
    );
    assert_ne!(
        base,
        binding("mongodb://u:p@a:27017/?tls=true&authSource=db")
    );
}

/// A replica set of three after a scan: a:1 primary, b:1 secondary,
/// c:1 arbiter, d:1 a PossiblePrimary nobody checked.
fn replica_set_description() -> crate::proto::sdam::TopologyDescription {
    use crate::proto::address::ServerAddress;
    use crate::proto::sdam::{TopologyDescription, TopologySettings};
    let addr = |a: &str| ServerAddress::parse(a).unwrap();
    let mut description = TopologyDescription::new(TopologySettings {
        seeds: vec![addr("c:1"), addr("b:1"), addr("a:1")],
        direct_connection: None,
        replica_set: Some("rs".into()),
        load_balanced: false,
        seeds_from_srv: false,
        without_change_events: false,
    });
    let now = std::time::Instant::now();
    let rtt = std::time::Duration::from_millis(1);
    let hosts = ["a:1", "b:1", "d:1"];
    let election_id = bson::oid::ObjectId::from_bytes([7; 12]);
    let _ = description.check_succeeded(
        &addr("b:1"),
        &bson::doc! {"ok": 1, "secondary": true, "setName": "rs", "hosts": hosts.to_vec(),
        "arbiters": ["c:1"], "primary": "d:1", "minWireVersion": 0, "maxWireVersion": 21},
        rtt,
        now,
    );
    let _ = description.check_succeeded(
        &addr("a:1"),
        &bson::doc! {"ok": 1, "isWritablePrimary": true, "setName": "rs", "hosts": hosts.to_vec(),
        "arbiters": ["c:1"], "setVersion": 3, "electionId": election_id,
        "minWireVersion": 6, "maxWireVersion": 25},
        rtt,
        now,
    );
    let _ = description.check_succeeded(
        &addr("c:1"),
        &bson::doc! {"ok": 1, "arbiterOnly": true, "setName": "rs", "hosts": hosts.to_vec(),
        "arbiters": ["c:1"], "minWireVersion": 0, "maxWireVersion": 21},
        rtt,
        now,
    );
    description
}

fn seen_topology(seen_ms: u64) -> RememberedTopology {
    RememberedTopology::of(&replica_set_description(), seen_ms).expect("members were checked")
}

const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(10);

#[test]
fn a_topology_is_remembered_with_the_primary_first_and_only_checked_members() {
    let topology = seen_topology(1_000);
    let members: Vec<(&str, crate::proto::sdam::ServerType, i32, i32)> = topology
        .members
        .iter()
        .map(|m| {
            (
                m.address.as_str(),
                m.server_type,
                m.min_wire_version,
                m.max_wire_version,
            )
        })
        .collect();
    use crate::proto::sdam::ServerType::{RsArbiter, RsPrimary, RsSecondary};
    assert_eq!(
        members,
        [
            ("a:1", RsPrimary, 6, 25),
            ("b:1", RsSecondary, 0, 21),
            ("c:1", RsArbiter, 0, 21)
        ],
        "d:1 (never checked) is left out"
    );
    assert_eq!(topology.set_name.as_deref(), Some("rs"));
    assert_eq!(topology.set_version, Some(3));
    assert_eq!(
        topology.election_id,
        Some(bson::oid::ObjectId::from_bytes([7; 12]))
    );
    let order: Vec<String> = topology
        .first_scan_order(1_000 + 10_000, HEARTBEAT)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(order, ["a:1", "b:1", "c:1"]);

    let nothing_checked =
        crate::proto::sdam::TopologyDescription::new(crate::proto::sdam::TopologySettings::new(
            vec![crate::proto::address::ServerAddress::parse("a:1").unwrap()],
        ));
    assert_eq!(RememberedTopology::of(&nothing_checked, 1_000), None);
}

#[test]
fn a_topology_older_than_a_heartbeat_or_from_the_future_gives_no_order() {
    let topology = seen_topology(50_000);
    assert!(!topology.first_scan_order(60_000, HEARTBEAT).is_empty());
    assert!(topology.first_scan_order(60_001, HEARTBEAT).is_empty());
    assert!(topology.first_scan_order(49_999, HEARTBEAT).is_empty());
    // The client's own heartbeatFrequencyMS decides.
    let short = std::time::Duration::from_millis(500);
    assert!(topology.first_scan_order(50_600, short).is_empty());
}

#[test]
fn a_forged_entry_is_sorted_again_and_its_unparsable_addresses_dropped() {
    let mut topology = seen_topology(1_000);
    topology.members.reverse();
    topology.members[1].address = "not an address:x".into();
    let order: Vec<String> = topology
        .first_scan_order(1_000, HEARTBEAT)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(order, ["a:1", "c:1"]);
}

#[test]
fn a_topology_is_written_when_it_changed_or_is_half_a_heartbeat_old() {
    let old = seen_topology(1_000);
    assert!(seen_topology(1_100).worth_writing_over(None, HEARTBEAT));
    assert!(!seen_topology(1_100).worth_writing_over(Some(&old), HEARTBEAT));
    assert!(!seen_topology(6_000).worth_writing_over(Some(&old), HEARTBEAT));
    assert!(seen_topology(6_001).worth_writing_over(Some(&old), HEARTBEAT));
    let mut new_primary = seen_topology(1_100);
    new_primary.members[0].server_type = crate::proto::sdam::ServerType::RsSecondary;
    new_primary.members[1].server_type = crate::proto::sdam::ServerType::RsPrimary;
    assert!(new_primary.worth_writing_over(Some(&old), HEARTBEAT));
    let mut upgraded = seen_topology(1_100);
    upgraded.members[2].max_wire_version = 26;
    assert!(upgraded.worth_writing_over(Some(&old), HEARTBEAT));
    let mut new_election = seen_topology(1_100);
    new_election.election_id = Some(bson::oid::ObjectId::from_bytes([8; 12]));
    assert!(new_election.worth_writing_over(Some(&old), HEARTBEAT));
}

#[test]
fn one_topology_per_client_and_another_client_never_reads_it() {
    let mut contents = StateContents::default();
    contents.remember(Binding([1; 32]), &[Item::Topology(seen_topology(1))], 1);
    contents.remember(Binding([1; 32]), &[Item::Topology(seen_topology(2))], 2);
    assert_eq!(contents.entries.len(), 1);
    assert_eq!(contents.topology(Binding([1; 32])), Some(seen_topology(2)));
    assert_eq!(contents.topology(Binding([2; 32])), None);
    // The keys stay last when a topology comes after them.
    contents.replace(
        Binding([1; 32]),
        &[sealed(ScramMechanism::Sha256, "pencil", 1)],
        3,
    );
    contents.remember(Binding([1; 32]), &[Item::Topology(seen_topology(4))], 4);
    assert!(matches!(
        contents.entries.last().map(|e| &e.item),
        Some(Item::Scram(_))
    ));
}

#[test]
fn hostile_topology_entries_with_valid_digests_are_refused_by_name() {
    let good = seen_topology(1_000).encode().unwrap();
    let file =
        |body: &[u8]| with_digest([header(1, 1), entry(5, body, body.len() as u16)].concat());
    assert!(StateContents::decode(&file(&good)).is_ok());
    // seen u64, flags, set name "rs", election id, set version, count, then
    // the first member: its address "a:1" (length byte first) and its type.
    let flags_at = 8;
    let count_at = flags_at + 1 + 3 + 12 + 8;
    let type_at = count_at + 1 + 4;
    let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
    let mut bad = good.clone();
    bad[flags_at] |= 0x80;
    cases.push((bad, "unknown flags"));
    let mut bad = good.clone();
    bad[count_at] = 0;
    cases.push((bad, "member count"));
    let mut bad = good.clone();
    bad[count_at] = 200;
    cases.push((bad, "member count"));
    let mut bad = good.clone();
    bad[type_at] = 0;
    cases.push((bad, "unknown server type"));
    let mut bad = good.clone();
    bad[count_at + 2] = 0xff;
    cases.push((bad, "not UTF-8"));
    cases.push(([good.clone(), vec![0]].concat(), "after its end"));
    cases.push((good[..good.len() - 1].to_vec(), "ends inside"));
    for (body, expected) in cases {
        let error = StateContents::decode(&file(&body)).unwrap_err();
        assert!(
            error.0.contains(expected),
            "{error} (expected {expected:?})"
        );
    }
}
