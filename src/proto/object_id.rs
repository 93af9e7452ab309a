//! ObjectIds for documents inserted without an `_id`.
//!
//! An ObjectId is a 4-byte timestamp, a 5-byte value random per process and
//! a 3-byte counter that starts at a random value. `bson`'s
//! `ObjectId::new()` draws its random value and counter once per address
//! space, so forked children copy them and generate the same ids as their
//! parent and each other within a second. This generator draws both again
//! whenever the process id changes.

use std::sync::Mutex;

use bson::oid::ObjectId;

use crate::fork::ProcessWatch;

/// The counter is three bytes wide and wraps.
const COUNTER_MODULUS: u32 = 1 << 24;

/// The per-process state of ObjectId generation.
#[derive(Debug)]
struct Generator {
    process: ProcessWatch,
    random: [u8; 5],
    counter: u32,
}

impl Generator {
    fn new(pid: u32, rng: &mut fastrand::Rng) -> Self {
        let mut generator = Generator {
            process: ProcessWatch::for_pid(pid),
            random: [0; 5],
            counter: 0,
        };
        generator.reseed(rng);
        generator
    }

    fn reseed(&mut self, rng: &mut fastrand::Rng) {
        rng.fill(&mut self.random);
        self.counter = rng.u32(..COUNTER_MODULUS);
    }

    /// The next id for process `pid` at `seconds` since the epoch; a new
    /// random value and counter start (drawn from `rng()`) when `pid` is
    /// not the process the previous id was made for.
    fn next(&mut self, pid: u32, seconds: u32, rng: impl FnOnce() -> fastrand::Rng) -> ObjectId {
        if self.process.changed_to(pid) {
            self.reseed(&mut rng());
        }
        let counter = self.counter;
        self.counter = (self.counter + 1) % COUNTER_MODULUS;
        let mut bytes = [0u8; 12];
        bytes[..4].copy_from_slice(&seconds.to_be_bytes());
        bytes[4..9].copy_from_slice(&self.random);
        bytes[9..].copy_from_slice(&counter.to_be_bytes()[1..]);
        ObjectId::from_bytes(bytes)
    }
}

static GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

/// A new ObjectId, unique to this process even after a fork.
pub fn new_object_id() -> ObjectId {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32);
    let pid = std::process::id();
    let mut guard = GENERATOR
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // Seeds are drawn only on first use and after a fork.
    let fresh_rng = || fastrand::Rng::with_seed(crate::fork::fresh_seed());
    guard
        .get_or_insert_with(|| Generator::new(pid, &mut fresh_rng()))
        .next(pid, seconds, fresh_rng)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_timestamp_random_counter() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mut generator = Generator::new(100, &mut rng);
        let random = generator.random;
        let first = generator.next(100, 0x0102_0304, || unreachable!()).bytes();
        let second = generator.next(100, 0x0102_0304, || unreachable!()).bytes();
        assert_eq!(first[..4], [1, 2, 3, 4]);
        assert_eq!(first[4..9], random);
        assert_eq!(second[4..9], random);
        let counter = |b: [u8; 12]| u32::from_be_bytes([0, b[9], b[10], b[11]]);
        assert_eq!(counter(second), (counter(first) + 1) % COUNTER_MODULUS);
    }

    #[test]
    fn the_counter_wraps_at_three_bytes() {
        let mut rng = fastrand::Rng::with_seed(4);
        let mut generator = Generator::new(1, &mut rng);
        generator.counter = COUNTER_MODULUS - 1;
        assert_eq!(
            generator.next(1, 0, || unreachable!()).bytes()[9..],
            [0xff; 3]
        );
        assert_eq!(generator.next(1, 0, || unreachable!()).bytes()[9..], [0; 3]);
    }

    #[test]
    fn a_new_pid_draws_a_new_random_value_and_counter() {
        let mut rng = fastrand::Rng::with_seed(5);
        let mut generator = Generator::new(1, &mut rng);
        let parent = generator.next(1, 7, || unreachable!()).bytes();
        // A forked child: the same generator state, another pid.
        let child = generator.next(2, 7, || fastrand::Rng::with_seed(6)).bytes();
        assert_ne!(parent[4..9], child[4..9]);
        assert_ne!(parent[9..], child[9..]);
    }

    #[test]
    fn ids_in_one_process_are_distinct() {
        let ids: std::collections::HashSet<_> = (0..1000).map(|_| new_object_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
