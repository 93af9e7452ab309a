//! What a full scan of a large replica set costs in CPU, without the
//! network: one seed whose hello lists N members, then one successful check
//! per member, applied to the topology description as a scan applies them.
//!
//! `cargo run --example scan_cost -- 2000` prints the time per check and
//! in total (issue 10: 2,001 members took 33 s in a debug build).

use std::time::{Duration, Instant};

use bson::{doc, Bson};
use mongo_inline::sdam::{TopologyDescription, TopologySettings};
use mongo_inline::{ClientOptions, ServerAddress};

fn main() {
    let members: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("a member count"))
        .unwrap_or(2000);
    let hosts: Vec<String> = (0..=members).map(|i| format!("m{i}:27017")).collect();
    let host_list: Vec<Bson> = hosts.iter().map(|h| Bson::String(h.clone())).collect();
    let uri = format!("mongodb://{}/?replicaSet=rs", hosts[0]);
    let options = ClientOptions::parse(&uri).expect("a valid URI");
    let settings = TopologySettings::from_options(&options);
    let mut topology = TopologyDescription::new(settings);
    let started = Instant::now();
    let mut events = 0;
    for (i, host) in hosts.iter().enumerate() {
        let reply = doc! {
            "ok": 1, "isWritablePrimary": i == 0, "secondary": i != 0, "setName": "rs",
            "hosts": host_list.clone(), "setVersion": 1, "minWireVersion": 0, "maxWireVersion": 21,
        };
        let address = ServerAddress::parse(host).expect("address");
        let update =
            topology.check_succeeded(&address, &reply, Duration::from_millis(1), Instant::now());
        events += update.events.len();
    }
    let total = started.elapsed();
    println!(
        "scan of {} members: {total:?} in all, {:?} per check ({events} events)",
        hosts.len(),
        total / hosts.len() as u32
    );
}
