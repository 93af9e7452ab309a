//! Noticing that the process forked, and random seeds a forked child does
//! not share with its parent or its siblings.
//!
//! A fork copies the whole address space: sockets, the session pool, every
//! random generator's state. Without care a child talks on its parent's
//! sockets, reuses its parent's session ids (and transaction numbers), and
//! draws the same "random" numbers as every sibling. The pure core's owners of
//! such state watch the process id they are given
//! ([`crate::proto::process`]); this module reads what they are given.

use crate::proto::process::CurrentProcess;

/// This process, as the pure core's fork-aware state takes it.
pub(crate) fn current_process() -> CurrentProcess {
    this_process(std::process::id())
}

/// The process `pid`, which the caller read earlier in the same operation.
pub(crate) fn this_process(pid: u32) -> CurrentProcess {
    CurrentProcess {
        id: pid,
        fresh_seed,
    }
}

/// A seed for a random generator that differs between a parent and each of
/// its forked children, even though their generators' states are copies:
/// the process id and the wall clock are mixed into a draw from `fastrand`'s
/// (copied) thread-local generator.
pub(crate) fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let pid = u64::from(std::process::id());
    mix(fastrand::u64(..) ^ mix(pid) ^ mix(nanos.rotate_left(32)))
}

/// SplitMix64's finaliser: spreads every input bit over the whole output.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixing_separates_neighbouring_inputs() {
        assert_ne!(mix(1), mix(2));
        assert_ne!(mix(1) >> 32, mix(2) >> 32);
    }
}
