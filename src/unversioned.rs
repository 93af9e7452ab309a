//! Internals reached by this project's own examples, tests and benches.
//!
//! Not part of the API: nothing here follows semver, anything may change or
//! go in any release. Programs use the items documented at the crate root.

use std::time::{Duration, Instant};

use bson::Document;

use crate::proto::sdam::{TopologyDescription, TopologySettings};
use crate::{ClientOptions, ServerAddress};

/// The pure topology description, fed checks by hand: what applying a
/// check's hello costs without a network (`benches/tools/scan_cost.rs`).
pub struct TopologyRules(TopologyDescription);

impl TopologyRules {
    /// A topology of `options`' seeds; `change_events` says whether the
    /// description change events are built (someone listens) or not.
    pub fn new(options: &ClientOptions, change_events: bool) -> Self {
        let settings = TopologySettings::from_options(options).with_change_events(change_events);
        TopologyRules(TopologyDescription::new(settings))
    }

    /// Applies a check of `address` that answered `reply` after `rtt`;
    /// returns how many events it produced.
    pub fn check_succeeded(
        &mut self,
        address: &ServerAddress,
        reply: &Document,
        rtt: Duration,
        now: Instant,
    ) -> usize {
        self.0
            .check_succeeded(address, reply, rtt, now)
            .events
            .len()
    }
}
