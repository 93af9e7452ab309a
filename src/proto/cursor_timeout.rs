//! How `timeoutMS` governs a cursor (CSOT's "Cursors" section): the
//! `timeoutMode` a cursor-opening operation resolves to, the combinations
//! the spec refuses, and what each mode means for the opening command and
//! the `next` calls after it.
//!
//! ```text
//!                     opening command         each next (its getMores)
//! CursorLifetime      maxTimeMS, deadline T   the same deadline T, no maxTimeMS
//! Iteration           no maxTimeMS            timeoutMS afresh, no maxTimeMS
//! tailable            no maxTimeMS            timeoutMS afresh
//! tailable awaitData  maxTimeMS               timeoutMS afresh,
//!                                             maxTimeMS = min(maxAwaitTimeMS, left − minRTT)
//! ```

use std::time::Duration;

use crate::error::{Error, Result};
use crate::proto::coll_options::CursorType;

/// Whether `timeoutMS` bounds a cursor's whole life or each iteration
/// (the spec's `timeoutMode`), set with a cursor-opening operation's
/// `timeout_mode`; it needs a `timeoutMS` (the operation's or inherited).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutMode {
    /// The opening command and every later `getMore` share one deadline
    /// (the default for non-tailable cursors).
    CursorLifetime,
    /// The opening command and then each `next` call get `timeoutMS`
    /// afresh (the default, and the only mode, for tailable cursors).
    Iteration,
}

/// What a cursor-opening operation asked for, as far as timing goes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CursorRequest {
    /// The `timeoutMS` in force (the operation's, else its handle's).
    pub timeout: Option<Duration>,
    /// The operation's `timeoutMode`.
    pub mode: Option<TimeoutMode>,
    /// Find's cursor type (an aggregate's is non-tailable).
    pub cursor_type: CursorType,
    /// `maxAwaitTimeMS`.
    pub max_await: Option<Duration>,
    /// Whether the operation is an aggregate writing with `$out`/`$merge`.
    pub writes: bool,
}

/// The timing a cursor-opening operation settled on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CursorTiming {
    /// The mode its `next` calls follow (`None` without `timeoutMS`).
    pub mode: Option<TimeoutMode>,
    /// Whether the opening command carries a `maxTimeMS` from the timeout.
    pub opening_max_time: bool,
}

impl CursorRequest {
    /// The timing of the cursor, or the client error the spec asks for an
    /// invalid combination (nothing is sent then).
    pub fn timing(&self) -> Result<CursorTiming> {
        let tailable = self.cursor_type != CursorType::NonTailable;
        let Some(timeout) = self.timeout else {
            if self.mode.is_some() {
                return Err(Error::invalid_argument(
                    "timeoutMode needs a timeoutMS (on the operation, its collection, database or client)",
                ));
            }
            return Ok(CursorTiming {
                mode: None,
                opening_max_time: false,
            });
        };
        if tailable && self.mode == Some(TimeoutMode::CursorLifetime) {
            return Err(Error::invalid_argument(
                "timeoutMode CursorLifetime is not allowed for a tailable cursor (its time is per iteration)",
            ));
        }
        if let Some(max_await) = self.max_await {
            if !timeout.is_zero() && max_await >= timeout {
                return Err(Error::invalid_argument(format!(
                    "maxAwaitTimeMS ({} ms) must be less than timeoutMS ({} ms)",
                    max_await.as_millis(),
                    timeout.as_millis()
                )));
            }
        }
        let mode = match self.mode {
            Some(mode) => mode,
            None if tailable => TimeoutMode::Iteration,
            None => TimeoutMode::CursorLifetime,
        };
        if mode == TimeoutMode::Iteration && self.writes {
            return Err(Error::invalid_argument(
                "timeoutMode Iteration is not allowed for an aggregate with $out or $merge",
            ));
        }
        let opening_max_time = match self.cursor_type {
            CursorType::TailableAwait => true,
            CursorType::Tailable => false,
            _ => mode == TimeoutMode::CursorLifetime,
        };
        Ok(CursorTiming {
            mode: Some(mode),
            opening_max_time,
        })
    }
}

/// The `maxTimeMS` of a tailable-await cursor's `getMore` under CSOT:
/// `min(maxAwaitTimeMS, time left − minRTT)`, in whole milliseconds;
/// `max_await` alone without a time limit.
pub(crate) fn await_max_time(
    max_await: Duration,
    left: Option<Duration>,
    min_rtt: Duration,
) -> Duration {
    match left {
        Some(left) => max_await.min(left.saturating_sub(min_rtt)),
        None => max_await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn request(timeout: Option<u64>, mode: Option<TimeoutMode>) -> CursorRequest {
        CursorRequest {
            timeout: timeout.map(ms),
            mode,
            ..CursorRequest::default()
        }
    }

    #[test]
    fn a_mode_without_a_timeout_is_refused() {
        for mode in [TimeoutMode::CursorLifetime, TimeoutMode::Iteration] {
            let err = request(None, Some(mode)).timing().unwrap_err();
            assert!(
                err.to_string().contains("timeoutMode needs a timeoutMS"),
                "{err}"
            );
        }
        assert_eq!(
            request(None, None).timing().unwrap(),
            CursorTiming {
                mode: None,
                opening_max_time: false
            }
        );
    }

    #[test]
    fn non_tailable_defaults_to_cursor_lifetime_with_max_time_on_the_opening() {
        let timing = request(Some(200), None).timing().unwrap();
        assert_eq!(timing.mode, Some(TimeoutMode::CursorLifetime));
        assert!(timing.opening_max_time);
        let timing = request(Some(200), Some(TimeoutMode::Iteration))
            .timing()
            .unwrap();
        assert_eq!(timing.mode, Some(TimeoutMode::Iteration));
        assert!(!timing.opening_max_time, "iteration sends no maxTimeMS");
    }

    #[test]
    fn tailable_cursors_iterate_and_refuse_cursor_lifetime() {
        for cursor_type in [CursorType::Tailable, CursorType::TailableAwait] {
            let mut r = request(Some(200), None);
            r.cursor_type = cursor_type;
            assert_eq!(r.timing().unwrap().mode, Some(TimeoutMode::Iteration));
            assert_eq!(
                r.timing().unwrap().opening_max_time,
                cursor_type == CursorType::TailableAwait
            );
            r.mode = Some(TimeoutMode::CursorLifetime);
            assert!(r.timing().is_err(), "{cursor_type:?}");
        }
    }

    #[test]
    fn max_await_must_be_less_than_a_nonzero_timeout() {
        let mut r = request(Some(5), None);
        r.cursor_type = CursorType::TailableAwait;
        for await_ms in [5, 10] {
            r.max_await = Some(ms(await_ms));
            let err = r.timing().unwrap_err();
            assert!(err.to_string().contains("maxAwaitTimeMS"), "{err}");
        }
        r.max_await = Some(ms(4));
        assert!(r.timing().is_ok());
        r.timeout = Some(Duration::ZERO);
        r.max_await = Some(ms(10));
        assert!(r.timing().is_ok(), "timeoutMS 0 sets no bound");
    }

    #[test]
    fn iteration_refuses_an_aggregate_that_writes() {
        let mut r = request(Some(100), Some(TimeoutMode::Iteration));
        r.writes = true;
        assert!(r.timing().is_err());
        r.mode = None;
        assert_eq!(r.timing().unwrap().mode, Some(TimeoutMode::CursorLifetime));
    }

    #[test]
    fn await_max_time_is_the_smaller_of_the_await_and_the_time_left() {
        assert_eq!(await_max_time(ms(100), Some(ms(200)), ms(0)), ms(100));
        assert_eq!(await_max_time(ms(100), Some(ms(70)), ms(0)), ms(70));
        assert_eq!(await_max_time(ms(100), Some(ms(70)), ms(20)), ms(50));
        assert_eq!(await_max_time(ms(100), None, ms(20)), ms(100));
    }
}
