//! Noticing that the process forked, and random seeds a forked child does
//! not share with its parent or its siblings.
//!
//! A fork copies the whole address space: sockets, the session pool, every
//! random generator's state. Without care a child talks on its parent's
//! sockets, reuses its parent's session ids (and transaction numbers), and
//! draws the same "random" numbers as every sibling. Each owner of such state
//! keeps a [`ProcessWatch`] and starts afresh when it fires.

/// Remembers the process id some state belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcessWatch {
    pid: u32,
}

impl ProcessWatch {
    /// Watching the current process.
    pub(crate) fn current() -> Self {
        ProcessWatch::for_pid(std::process::id())
    }

    /// Watching the process `pid`.
    pub(crate) fn for_pid(pid: u32) -> Self {
        ProcessWatch { pid }
    }

    /// Whether `pid` is another process than the watched one; if so, the
    /// watch moves to `pid`, so it fires once per fork.
    pub(crate) fn changed_to(&mut self, pid: u32) -> bool {
        if pid == self.pid {
            return false;
        }
        self.pid = pid;
        true
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
    fn a_watch_fires_once_per_change_of_pid() {
        let mut watch = ProcessWatch::for_pid(10);
        assert!(!watch.changed_to(10));
        assert!(watch.changed_to(11));
        assert!(!watch.changed_to(11));
        assert!(watch.changed_to(10));
    }

    #[test]
    fn mixing_separates_neighbouring_inputs() {
        assert_ne!(mix(1), mix(2));
        assert_ne!(mix(1) >> 32, mix(2) >> 32);
    }
}
