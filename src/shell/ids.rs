//! The process-wide id sources: ObjectIds (the pure generator,
//! [`crate::proto::object_id`], fed with a clock's calendar time and this
//! process) and topology ids.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bson::oid::ObjectId;

use crate::proto::object_id::ObjectIdGenerator;
use crate::proto::sdam::TopologyId;
use crate::shell::clock::{Clock, SystemClock};

static GENERATOR: Mutex<Option<ObjectIdGenerator>> = Mutex::new(None);

/// The next topology id; 0 is never handed out (it marks descriptions
/// built by hand in tests).
static NEXT_TOPOLOGY_ID: AtomicU64 = AtomicU64::new(1);

/// A topology id different from every other this process handed out.
pub(crate) fn next_topology_id() -> TopologyId {
    TopologyId(NEXT_TOPOLOGY_ID.fetch_add(1, Ordering::Relaxed))
}

/// The next operation id (the logging specs' `operationId`); process-wide
/// so that no two operations of any client share one.
static NEXT_OPERATION_ID: AtomicU64 = AtomicU64::new(1);

/// An operation id different from every other this process handed out.
pub(crate) fn next_operation_id() -> i64 {
    i64::try_from(NEXT_OPERATION_ID.fetch_add(1, Ordering::Relaxed)).unwrap_or(i64::MAX)
}

/// A new ObjectId, unique to this process even after a fork.
pub fn new_object_id() -> ObjectId {
    object_id_at(&SystemClock)
}

/// A new ObjectId stamped with `clock`'s calendar time.
pub(crate) fn object_id_at(clock: &dyn Clock) -> ObjectId {
    let seconds = clock
        .wall_time()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32);
    let process = crate::shell::fork::current_process();
    let mut guard = GENERATOR
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    guard
        .get_or_insert_with(|| ObjectIdGenerator::new(process))
        .next(process, seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_one_process_are_distinct() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| new_object_id()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn topology_ids_are_distinct_and_never_zero() {
        let (a, b) = (next_topology_id(), next_topology_id());
        assert_ne!(a, b);
        assert_ne!(a, TopologyId::default());
    }

    #[test]
    fn ids_carry_the_clocks_calendar_seconds() {
        let clock = crate::shell::clock::VirtualClock::new();
        let at = |clock: &dyn Clock| object_id_at(clock).timestamp().timestamp_millis() / 1000;
        assert_eq!(at(&clock), 1_700_000_000);
        clock.sleep(std::time::Duration::from_secs(3));
        assert_eq!(at(&clock), 1_700_000_003);
    }
}
