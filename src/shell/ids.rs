//! The process-wide ObjectId source: the pure generator
//! ([`crate::proto::object_id`]) fed with the wall clock and this process.

use std::sync::Mutex;

use bson::oid::ObjectId;

use crate::proto::object_id::ObjectIdGenerator;

static GENERATOR: Mutex<Option<ObjectIdGenerator>> = Mutex::new(None);

/// A new ObjectId, unique to this process even after a fork.
pub fn new_object_id() -> ObjectId {
    let seconds = std::time::SystemTime::now()
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
}
