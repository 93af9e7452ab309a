//! What a full scan of a large replica set costs in CPU, without the
//! network: one seed whose hello lists N members, then one successful check
//! per member, applied to the topology description as a scan applies them.
//!
//! `cargo run --example scan_cost -- 250 500 1000` prints, for each size,
//! the time per check and in total, with the description change events
//! built (a client someone listens to) and without (nobody listens). Applying a check costs about the size of
//! its hello, so the time per check grows linearly with the member count
//! and a full scan's with its square (issue 10: before member lists were
//! shared, 1,001 members took 184 ms per check and 184 s per scan in a debug
//! build; now about 5 ms and 5 s).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use bson::{doc, Bson};
use mongo_inline::unversioned::TopologyRules;
use mongo_inline::{ClientOptions, ServerAddress};

fn main() {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|n| n.parse().expect("a member count"))
        .collect();
    if sizes.is_empty() {
        sizes.push(2000);
    }
    for members in sizes {
        scan(members, true);
        scan(members, false);
    }
}

/// One seed and `members` more, each check's hello listing all of them;
/// with the description change events built (someone listens) or not.
fn scan(members: usize, change_events: bool) {
    let hosts: Vec<String> = (0..=members).map(|i| format!("m{i}:27017")).collect();
    let host_list: Vec<Bson> = hosts.iter().map(|h| Bson::String(h.clone())).collect();
    let uri = format!("mongodb://{}/?replicaSet=rs", hosts[0]);
    let options = ClientOptions::parse(&uri).run().expect("a valid URI");
    let mut topology = TopologyRules::new(&options, change_events);
    let started = Instant::now();
    let mut events = 0;
    for (i, host) in hosts.iter().enumerate() {
        let reply = doc! {
            "ok": 1, "isWritablePrimary": i == 0, "secondary": i != 0, "setName": "rs",
            "hosts": host_list.clone(), "setVersion": 1, "minWireVersion": 0, "maxWireVersion": 21,
        };
        let address = ServerAddress::parse(host).expect("address");
        events +=
            topology.check_succeeded(&address, &reply, Duration::from_millis(1), Instant::now());
    }
    let total = started.elapsed();
    let per_check = total / hosts.len() as u32;
    println!(
        "scan of {} members, change events {}: {total:?} in all, {per_check:?} per check, \
         {:.2} µs per check per member ({events} events)",
        hosts.len(),
        if change_events { "on" } else { "off" },
        per_check.as_secs_f64() * 1e6 / hosts.len() as f64
    );
}
