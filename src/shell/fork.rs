//! Noticing that the process forked (the seeds a forked child draws come
//! from [`crate::shell::rng::fresh_seed`]).
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
        fresh_seed: crate::shell::rng::fresh_seed,
    }
}
