//! Which process some state belongs to, as values the shell reads and
//! passes in.
//!
//! A fork copies the whole address space: sockets, the session pool, every
//! random generator's state. Without care a child talks on its parent's
//! sockets, reuses its parent's session ids (and transaction numbers), and
//! draws the same "random" numbers as every sibling. Each owner of such state
//! keeps a `ProcessWatch` and starts afresh when it fires; the pure core
//! never asks the kernel itself, so the process is an argument
//! ([`CurrentProcess`]).

/// The process an operation runs in, as the shell read it.
#[derive(Clone, Copy, Debug)]
pub struct CurrentProcess {
    /// Its process id.
    pub id: u32,
    /// Where state that a forked child must not share with its parent or
    /// its siblings (an id generator) draws its new seed. Called only when
    /// the process changed, so the warm path does not pay for it.
    pub fresh_seed: fn() -> u64,
}

/// Remembers the process id some state belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcessWatch {
    pid: u32,
}

impl ProcessWatch {
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

/// Processes for the tests of fork-aware state: a parent, and two forked
/// children each drawing its own seed.
#[cfg(test)]
pub(crate) mod test_processes {
    use super::CurrentProcess;

    /// The process the tests' state starts in.
    pub(crate) const PARENT: CurrentProcess = CurrentProcess {
        id: 1,
        fresh_seed: || 11,
    };
    /// A forked child of [`PARENT`].
    pub(crate) const CHILD: CurrentProcess = CurrentProcess {
        id: 2,
        fresh_seed: || 22,
    };
    /// Another forked child of [`PARENT`].
    pub(crate) const SIBLING: CurrentProcess = CurrentProcess {
        id: 3,
        fresh_seed: || 33,
    };
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
}
