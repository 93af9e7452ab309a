//! The last selection, kept while nothing it depended on has changed.
//!
//! Selection is a function of the description, the criteria, the
//! deprioritized servers and, with more than one server in the latency
//! window, a random pick. A warm operation selects again from the same
//! description with the same criteria, so the latency window a selection
//! chose from is remembered until the description changes: the
//! suitability filters, the latency window and their allocations run once
//! per change instead of once per operation. The pick inside the window
//! stays a fresh random one each time, from the same servers in the same
//! order, drawn from the same generator: several mongoses or secondaries
//! in the window are spread exactly as a full selection spreads them.

use std::ops::Deref;

use crate::error::Result;
use crate::proto::address::ServerAddress;
use crate::proto::sdam::TopologyDescription;
use crate::proto::select::{self, Criteria, SelectionSettings};

/// The description with a count of its changes. It has no `DerefMut`:
/// every change goes through [`Tracked::get_mut`], which counts it, so a
/// remembered selection cannot outlive a change unnoticed.
#[derive(Debug)]
pub(super) struct Tracked {
    description: TopologyDescription,
    changes: u64,
}

impl Tracked {
    pub(super) fn new(description: TopologyDescription) -> Self {
        Tracked {
            description,
            changes: 0,
        }
    }

    /// The description, to change (counted as a change whether or not it
    /// is one).
    pub(super) fn get_mut(&mut self) -> &mut TopologyDescription {
        self.changes += 1;
        &mut self.description
    }
}

impl Deref for Tracked {
    type Target = TopologyDescription;

    fn deref(&self) -> &TopologyDescription {
        &self.description
    }
}

/// The latency window of a selection.
#[derive(Debug)]
struct Remembered {
    /// The description's change count when it was made.
    changes: u64,
    criteria: Criteria,
    /// The window's servers, in the order the full selection had them.
    window: Vec<ServerAddress>,
}

/// What the monitor remembers of its selections.
#[derive(Debug, Default)]
pub(super) struct SelectionMemory {
    last: Option<Remembered>,
    /// How many selections ran in full rather than from memory.
    pub(super) computed: u64,
}

impl SelectionMemory {
    /// The server for `criteria` from `description`, picked at random from
    /// the remembered latency window while it holds, otherwise from a new
    /// one (remembered in turn). `Ok(None)`: nothing suitable.
    pub(super) fn select(
        &mut self,
        description: &Tracked,
        criteria: &Criteria,
        settings: &SelectionSettings,
        deprioritized: &[ServerAddress],
        rng: &mut fastrand::Rng,
    ) -> Result<Option<ServerAddress>> {
        // An application's selector or predicate may answer differently
        // each time; deprioritized servers are a retry's, not a warm
        // operation's.
        let rememberable = deprioritized.is_empty()
            && settings.server_selector.is_none()
            && !matches!(criteria, Criteria::Predicate(_));
        if rememberable {
            if let Some(last) = &self.last {
                if last.changes == description.changes && same_criteria(&last.criteria, criteria) {
                    return Ok(select::pick(&last.window, rng));
                }
            }
        }
        self.computed += 1;
        let window = select::window_addresses(description, criteria, settings, deprioritized)?;
        let chosen = select::pick(&window, rng);
        if rememberable && !window.is_empty() {
            self.last = Some(Remembered {
                changes: description.changes,
                criteria: criteria.clone(),
                window,
            });
        }
        Ok(chosen)
    }
}

fn same_criteria(a: &Criteria, b: &Criteria) -> bool {
    match (a, b) {
        (Criteria::ReadPreference(a), Criteria::ReadPreference(b))
        | (Criteria::AggregateWrite(a), Criteria::AggregateWrite(b)) => a == b,
        (Criteria::Write, Criteria::Write) => true,
        _ => false,
    }
}
