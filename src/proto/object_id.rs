//! ObjectIds for documents inserted without an `_id`.
//!
//! An ObjectId is a 4-byte timestamp, a 5-byte value random per process and
//! a 3-byte counter that starts at a random value. `bson`'s
//! `ObjectId::new()` draws its random value and counter once per address
//! space, so forked children copy them and generate the same ids as their
//! parent and each other within a second. This generator draws both again
//! whenever the process it is given changes. It reads neither the clock nor
//! the process id: the shell's [`crate::shell::ids`] does, for the
//! process-wide generator.

use bson::oid::ObjectId;

use crate::proto::process::{CurrentProcess, ProcessWatch};

/// The counter is three bytes wide and wraps.
const COUNTER_MODULUS: u32 = 1 << 24;

/// The per-process state of ObjectId generation.
#[derive(Debug)]
pub struct ObjectIdGenerator {
    process: ProcessWatch,
    random: [u8; 5],
    counter: u32,
}

impl ObjectIdGenerator {
    /// A generator for `process`, its random value and counter drawn from
    /// the process's fresh seed.
    pub fn new(process: CurrentProcess) -> Self {
        let mut generator = ObjectIdGenerator {
            process: ProcessWatch::for_pid(process.id),
            random: [0; 5],
            counter: 0,
        };
        generator.reseed((process.fresh_seed)());
        generator
    }

    fn reseed(&mut self, seed: u64) {
        let mut rng = fastrand::Rng::with_seed(seed);
        rng.fill(&mut self.random);
        self.counter = rng.u32(..COUNTER_MODULUS);
    }

    /// The next id in `process` at `seconds` since the epoch; a new random
    /// value and counter start when `process` is not the one the previous
    /// id was made in (a forked child).
    pub fn next(&mut self, process: CurrentProcess, seconds: u32) -> ObjectId {
        if self.process.changed_to(process.id) {
            self.reseed((process.fresh_seed)());
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use crate::proto::process::test_processes::{CHILD, PARENT};

    /// A deterministic id source for the operations' tests: ObjectIds
    /// 0, 1, 2, ... in their counter bytes.
    pub(crate) fn sequential_ids() -> impl FnMut() -> ObjectId {
        let mut next = 0u32;
        move || {
            next += 1;
            let mut bytes = [0u8; 12];
            bytes[8..].copy_from_slice(&next.to_be_bytes());
            ObjectId::from_bytes(bytes)
        }
    }

    #[test]
    fn layout_is_timestamp_random_counter() {
        let mut generator = ObjectIdGenerator::new(PARENT);
        let random = generator.random;
        let first = generator.next(PARENT, 0x0102_0304).bytes();
        let second = generator.next(PARENT, 0x0102_0304).bytes();
        assert_eq!(first[..4], [1, 2, 3, 4]);
        assert_eq!(first[4..9], random);
        assert_eq!(second[4..9], random);
        let counter = |b: [u8; 12]| u32::from_be_bytes([0, b[9], b[10], b[11]]);
        assert_eq!(counter(second), (counter(first) + 1) % COUNTER_MODULUS);
    }

    #[test]
    fn the_counter_wraps_at_three_bytes() {
        let mut generator = ObjectIdGenerator::new(PARENT);
        generator.counter = COUNTER_MODULUS - 1;
        assert_eq!(generator.next(PARENT, 0).bytes()[9..], [0xff; 3]);
        assert_eq!(generator.next(PARENT, 0).bytes()[9..], [0; 3]);
    }

    #[test]
    fn a_new_process_draws_a_new_random_value_and_counter() {
        let mut generator = ObjectIdGenerator::new(PARENT);
        let parent = generator.next(PARENT, 7).bytes();
        // A forked child: the same generator state, another process.
        let child = generator.next(CHILD, 7).bytes();
        assert_ne!(parent[4..9], child[4..9]);
        assert_ne!(parent[9..], child[9..]);
        // Once per fork: the child's next id continues its own counter.
        let again = generator.next(CHILD, 7).bytes();
        assert_eq!(again[4..9], child[4..9]);
    }
}
