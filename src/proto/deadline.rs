//! The deadline of one operation (`timeoutMS`, client-side operations timeout).
//!
//! A [`Deadline`] is fixed when an operation starts and bounds everything the
//! operation does: server selection, every attempt, every backoff between
//! attempts. It never reads the clock: each question takes `now`.
//!
//! ```text
//! start ──── attempt 1 ──── backoff ──── attempt 2 ────|deadline
//!            maxTimeMS = remaining − minRTT            |
//!                                  a backoff that would cross it fails at once
//! ```
//!
//! `timeoutMS` absent means CSOT is off: no deadline, and the legacy
//! timeouts (`socketTimeoutMS`, `wTimeoutMS`, one retry) apply. `0` turns
//! CSOT on without a limit (the spec's "infinite"): the legacy timeouts are
//! ignored and retryable errors are retried until one is not.

use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};

/// When the current operation must be finished, if ever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deadline {
    at: Option<Instant>,
    /// Whether `timeoutMS` was given at all (zero included): CSOT's rules
    /// apply even without an instant.
    csot: bool,
}

impl Deadline {
    /// No `timeoutMS`: CSOT is off and the operation may take as long as
    /// it needs.
    pub const NONE: Deadline = Deadline {
        at: None,
        csot: false,
    };

    /// `timeoutMS: 0`: CSOT's rules without a limit.
    pub const UNBOUNDED: Deadline = Deadline {
        at: None,
        csot: true,
    };

    /// A deadline at `at`.
    #[cfg(test)]
    pub fn at(at: Instant) -> Self {
        Deadline {
            at: Some(at),
            csot: true,
        }
    }

    /// The deadline of an operation started at `now` with `timeoutMS`
    /// `timeout`: `None` turns CSOT off, zero is CSOT without a limit.
    pub fn from_timeout(now: Instant, timeout: Option<Duration>) -> Self {
        match timeout {
            None => Deadline::NONE,
            Some(t) if t.is_zero() => Deadline::UNBOUNDED,
            Some(t) => Deadline {
                // An absurd timeout that overflows `Instant` is as good as none.
                at: now.checked_add(t),
                csot: true,
            },
        }
    }

    /// The instant itself, when there is one.
    pub fn instant(&self) -> Option<Instant> {
        self.at
    }

    /// Whether CSOT is enabled for this operation (`timeoutMS` given,
    /// zero included).
    pub fn is_set(&self) -> bool {
        self.csot
    }

    /// Time left at `now`: `None` without a deadline, zero once it passed.
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        self.at.map(|at| at.saturating_duration_since(now))
    }

    /// Whether the deadline has passed at `now` (reaching it counts as passed).
    pub fn expired(&self, now: Instant) -> bool {
        matches!(self.at, Some(at) if now >= at)
    }

    /// Whether waiting `wait` from `now` would end after the deadline.
    pub fn would_pass(&self, now: Instant, wait: Duration) -> bool {
        match self.at {
            None => false,
            Some(at) => match now.checked_add(wait) {
                Some(end) => end > at,
                None => true,
            },
        }
    }

    /// The shorter of `timeout` and the time left: the bound for one blocking
    /// step (server selection, a socket read). `None` means unbounded.
    #[cfg(test)]
    pub fn min_with(&self, now: Instant, timeout: Option<Duration>) -> Option<Duration> {
        match (self.remaining(now), timeout) {
            (Some(left), Some(t)) => Some(left.min(t)),
            (Some(left), None) => Some(left),
            (None, t) => t,
        }
    }

    /// `Ok` while time is left, otherwise the timeout error naming `what` was
    /// under way (e.g. `"selecting a server for find"`).
    pub fn check(&self, now: Instant, what: &str) -> Result<()> {
        if self.expired(now) {
            Err(Deadline::timeout_error(what))
        } else {
            Ok(())
        }
    }

    /// The error for an operation whose deadline passed while doing `what`.
    #[cold]
    pub fn timeout_error(what: &str) -> Error {
        Error::new(ErrorKind::Timeout {
            message: format!("timeoutMS expired while {what}"),
        })
    }

    /// The `maxTimeMS` to append to a command sent at `now` to a server whose
    /// minimum round-trip time is `min_rtt`: the time left minus `min_rtt`,
    /// in whole milliseconds. `Ok(None)` without a deadline (send no
    /// `maxTimeMS` on its account).
    ///
    /// CSOT says to fail with a timeout error, without sending, unless
    /// `min_rtt` is less than the time left. A result that rounds down to
    /// 0 ms is treated the same way, because the server reads
    /// `maxTimeMS: 0` as "no limit".
    pub fn max_time_ms(&self, now: Instant, min_rtt: Duration, what: &str) -> Result<Option<i64>> {
        let Some(left) = self.remaining(now) else {
            return Ok(None);
        };
        let budget = left.saturating_sub(min_rtt);
        let millis = i64::try_from(budget.as_millis()).unwrap_or(i64::MAX);
        if min_rtt >= left || millis < 1 {
            return Err(Deadline::timeout_error(&format!(
                "{what}: {} ms left, less than the server's minimum round trip of {} ms",
                left.as_millis(),
                min_rtt.as_millis()
            )));
        }
        Ok(Some(millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn no_timeout_and_zero_mean_no_instant_but_zero_keeps_csot_on() {
        let now = Instant::now();
        assert!(!Deadline::from_timeout(now, None).is_set());
        assert!(Deadline::from_timeout(now, Some(Duration::ZERO)).is_set());
        for d in [
            Deadline::from_timeout(now, None),
            Deadline::from_timeout(now, Some(Duration::ZERO)),
            Deadline::NONE,
            Deadline::UNBOUNDED,
        ] {
            assert_eq!(d.instant(), None);
            assert_eq!(d.remaining(now + ms(1_000_000)), None);
            assert!(!d.expired(now + ms(1_000_000)));
            assert!(!d.would_pass(now, ms(1_000_000)));
            assert_eq!(d.min_with(now, Some(ms(7))), Some(ms(7)));
            assert_eq!(d.min_with(now, None), None);
            assert_eq!(d.max_time_ms(now, ms(5), "find").unwrap(), None);
            assert!(d.check(now, "find").is_ok());
        }
    }

    #[test]
    fn remaining_and_expiry_follow_the_clock() {
        let start = Instant::now();
        let d = Deadline::from_timeout(start, Some(ms(100)));
        assert_eq!(d.instant(), Some(start + ms(100)));
        assert_eq!(d.remaining(start), Some(ms(100)));
        assert_eq!(d.remaining(start + ms(40)), Some(ms(60)));
        assert!(!d.expired(start + ms(99)));
        assert!(d.expired(start + ms(100)), "reaching the deadline counts");
        assert_eq!(d.remaining(start + ms(150)), Some(Duration::ZERO));
    }

    #[test]
    fn min_with_picks_the_shorter_bound() {
        let start = Instant::now();
        let d = Deadline::from_timeout(start, Some(ms(100)));
        assert_eq!(d.min_with(start, Some(ms(30_000))), Some(ms(100)));
        assert_eq!(d.min_with(start + ms(90), Some(ms(5))), Some(ms(5)));
        assert_eq!(d.min_with(start + ms(20), None), Some(ms(80)));
    }

    #[test]
    fn would_pass_is_strict() {
        let start = Instant::now();
        let d = Deadline::from_timeout(start, Some(ms(100)));
        assert!(
            !d.would_pass(start, ms(100)),
            "ending exactly at the deadline is fine"
        );
        assert!(d.would_pass(start, ms(101)));
        assert!(d.would_pass(start + ms(50), ms(51)));
    }

    #[test]
    fn expired_check_names_what_was_under_way() {
        let start = Instant::now();
        let d = Deadline::from_timeout(start, Some(ms(10)));
        let err = d
            .check(start + ms(10), "selecting a server for find")
            .unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Timeout { .. }));
        assert!(
            err.to_string().contains("selecting a server for find"),
            "{err}"
        );
    }

    #[test]
    fn max_time_ms_is_remaining_minus_min_rtt() {
        let start = Instant::now();
        let d = Deadline::from_timeout(start, Some(ms(1_000)));
        assert_eq!(d.max_time_ms(start, ms(0), "find").unwrap(), Some(1_000));
        assert_eq!(
            d.max_time_ms(start + ms(200), ms(30), "find").unwrap(),
            Some(770)
        );
        // Sub-millisecond remainders round down.
        let d = Deadline::from_timeout(start, Some(Duration::from_micros(10_900)));
        assert_eq!(d.max_time_ms(start, ms(0), "find").unwrap(), Some(10));
    }

    #[test]
    fn max_time_ms_fails_when_rtt_eats_the_budget() {
        let start = Instant::now();
        let d = Deadline::from_timeout(start, Some(ms(100)));
        for (elapsed, rtt) in [(0, 100), (0, 150), (100, 0), (60, 40), (99, 0)] {
            let err = d
                .max_time_ms(
                    start + ms(elapsed) + Duration::from_micros(500),
                    ms(rtt),
                    "insert",
                )
                .unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::Timeout { .. }),
                "{elapsed} {rtt}"
            );
            assert!(err.to_string().contains("insert"));
        }
    }
}
