//! The decisions of the convenient transactions API (`withTransaction`), as
//! a value the shell consults at each step:
//!
//! ```text
//!   new(now, timeout) ─> before_attempt(now, jitter) ──Err──> give up (timeout error)
//!                            │ Ok(backoff): sleep, start_transaction, run callback
//!          ┌─────────────────┴──────────────────┐
//!     callback Ok                         callback Err
//!   after_callback_ok(state)          after_callback_error(err, state, now)
//!    Return │ Commit                      abort? then RetryTransaction | Fail
//!           v
//!     commit ── Err ──> after_commit_error(err, now): RetryCommit | RetryTransaction | Fail
//! ```
//!
//! The loop keeps the start time, the attempt count and the last retried
//! error; the shell keeps the session, the callback and the clock.

use std::time::{Duration, Instant};

use super::transaction::{
    TransactionState, MAX_TIME_MS_EXPIRED, TRANSIENT_TRANSACTION_ERROR,
    UNKNOWN_TRANSACTION_COMMIT_RESULT,
};
use crate::error::{Error, ErrorKind};

/// How long `withTransaction` keeps retrying when no `timeoutMS` applies.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The backoff's base: the one before the second attempt is
/// `BACKOFF_INITIAL * 1.5` (before jitter).
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(5);
/// Largest backoff (before jitter).
pub const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// Growth of the backoff per attempt.
pub const BACKOFF_GROWTH: f64 = 1.5;

/// What `withTransaction` does next.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Decision {
    /// Commit the transaction.
    Commit,
    /// Return success to the caller.
    Return,
    /// Start over: [`WithTransaction::before_attempt`], then a new transaction.
    RetryTransaction,
    /// Run `commitTransaction` again (the session applies `w: majority`).
    RetryCommit,
    /// Return this error to the caller.
    Fail(Error),
}

/// What to do after the callback failed.
#[derive(Clone, Debug)]
pub struct CallbackFailure {
    /// Abort the transaction first (it is still open); ignore the abort's errors.
    pub abort: bool,
    /// Then this: [`Decision::RetryTransaction`] or [`Decision::Fail`].
    pub then: Decision,
}

/// The state of one `withTransaction` call.
#[derive(Clone, Debug)]
pub struct WithTransaction {
    started: Instant,
    timeout: Duration,
    attempts: u32,
    last_error: Option<Error>,
}

impl WithTransaction {
    /// A call starting at `now`; `timeout` is the operation's `timeoutMS`
    /// when set (zero: no limit), else [`DEFAULT_TIMEOUT`] applies.
    pub fn new(now: Instant, timeout: Option<Duration>) -> Self {
        let timeout = match timeout {
            None => DEFAULT_TIMEOUT,
            Some(t) if t.is_zero() => Duration::MAX,
            Some(t) => t,
        };
        WithTransaction {
            started: now,
            timeout,
            attempts: 0,
            last_error: None,
        }
    }

    /// How many transaction attempts have started.
    #[cfg(test)]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// The backoff before attempt `attempt + 1` for a `jitter` in `[0, 1)`:
    /// `jitter * min(5 ms * 1.5^attempt, 500 ms)`; zero for the first. The
    /// exponent is the number of attempts made, as the spec has it since
    /// 2026-07-08 (it was one less before).
    pub fn backoff(attempt: u32, jitter: f64) -> Duration {
        if attempt == 0 {
            return Duration::ZERO;
        }
        let exponent = i32::try_from(attempt).unwrap_or(i32::MAX);
        let ceiling = (BACKOFF_INITIAL.as_secs_f64() * BACKOFF_GROWTH.powi(exponent))
            .min(BACKOFF_MAX.as_secs_f64());
        Duration::from_secs_f64(ceiling * jitter.clamp(0.0, 1.0))
    }

    /// Before starting a transaction: the backoff to sleep first (zero for
    /// the first attempt), or the timeout error when sleeping would reach
    /// the time limit. Counts the attempt.
    pub fn before_attempt(&mut self, now: Instant, jitter: f64) -> Result<Duration, Error> {
        let backoff = WithTransaction::backoff(self.attempts, jitter);
        if self.attempts > 0 && self.elapsed(now) + backoff >= self.timeout {
            return Err(self.timeout_error(None));
        }
        self.attempts += 1;
        Ok(backoff)
    }

    /// After the callback returned normally: commit, unless the callback
    /// already ended the transaction itself.
    pub fn after_callback_ok(&self, state: TransactionState) -> Decision {
        if state.is_active() {
            Decision::Commit
        } else {
            Decision::Return
        }
    }

    /// After the callback failed: abort if the transaction is still open,
    /// then retry on a `TransientTransactionError` within the time limit.
    pub fn after_callback_error(
        &mut self,
        error: Error,
        state: TransactionState,
        now: Instant,
    ) -> CallbackFailure {
        let abort = state.is_active();
        let then = if error.contains_label(TRANSIENT_TRANSACTION_ERROR) {
            if self.elapsed(now) < self.timeout {
                self.last_error = Some(error);
                Decision::RetryTransaction
            } else {
                Decision::Fail(self.timeout_error(Some(error)))
            }
        } else {
            Decision::Fail(error)
        };
        CallbackFailure { abort, then }
    }

    /// After `commitTransaction` failed: past the time limit give up; retry
    /// the commit on `UnknownTransactionCommitResult` (except
    /// `MaxTimeMSExpired`), the transaction on `TransientTransactionError`;
    /// otherwise fail.
    pub fn after_commit_error(&mut self, error: Error, now: Instant) -> Decision {
        if self.elapsed(now) >= self.timeout {
            return Decision::Fail(self.timeout_error(Some(error)));
        }
        let max_time_expired = error.server_code() == Some(MAX_TIME_MS_EXPIRED);
        if !max_time_expired && error.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) {
            self.last_error = Some(error);
            return Decision::RetryCommit;
        }
        if error.contains_label(TRANSIENT_TRANSACTION_ERROR) {
            self.last_error = Some(error);
            return Decision::RetryTransaction;
        }
        Decision::Fail(error)
    }

    /// The timeout error wrapping the last error that caused a retry,
    /// carrying its labels.
    fn timeout_error(&self, error: Option<Error>) -> Error {
        let cause = error.or_else(|| self.last_error.clone());
        let message = match &cause {
            Some(e) => format!(
                "withTransaction gave up retrying after {:?}; last error: {e}",
                self.timeout
            ),
            None => format!("withTransaction gave up retrying after {:?}", self.timeout),
        };
        let labels: Vec<String> = cause
            .iter()
            .flat_map(|e| e.labels().iter().cloned())
            .collect();
        Error::new(ErrorKind::Timeout { message }).with_labels(labels)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CommandError;

    fn command_error(code: i32, labels: &[&str]) -> Error {
        Error::from(CommandError {
            base_backoff: None,
            raw_response: None,
            code,
            code_name: String::new(),
            message: format!("code {code}"),
            topology_version: None,
            address: None,
        })
        .with_labels(labels.iter().copied())
    }

    fn transient() -> Error {
        command_error(112, &[TRANSIENT_TRANSACTION_ERROR])
    }

    fn unknown_commit() -> Error {
        command_error(
            91,
            &[UNKNOWN_TRANSACTION_COMMIT_RESULT, "RetryableWriteError"],
        )
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn is_timeout(e: &Error) -> bool {
        matches!(e.kind(), ErrorKind::Timeout { .. })
    }

    #[test]
    fn first_attempt_has_no_backoff() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        assert_eq!(w.before_attempt(t0, 0.99).unwrap(), Duration::ZERO);
        assert_eq!(w.attempts(), 1);
    }

    #[test]
    fn backoff_grows_by_half_and_is_capped() {
        // transactions-convenient-api.md: jitter * min(5 ms * 1.5^attempt, 500 ms).
        assert_eq!(
            WithTransaction::backoff(1, 1.0),
            Duration::from_secs_f64(0.0075)
        );
        assert_eq!(
            WithTransaction::backoff(2, 1.0),
            Duration::from_secs_f64(0.01125)
        );
        assert_eq!(
            WithTransaction::backoff(3, 0.5),
            Duration::from_secs_f64(0.0084375)
        );
        assert_eq!(WithTransaction::backoff(30, 1.0), BACKOFF_MAX);
        assert_eq!(WithTransaction::backoff(u32::MAX, 1.0), BACKOFF_MAX);
        assert_eq!(WithTransaction::backoff(5, 0.0), Duration::ZERO);
    }

    #[test]
    fn callback_success_commits_unless_the_callback_ended_the_transaction() {
        let w = WithTransaction::new(Instant::now(), None);
        assert!(matches!(
            w.after_callback_ok(TransactionState::InProgress),
            Decision::Commit
        ));
        assert!(matches!(
            w.after_callback_ok(TransactionState::Starting),
            Decision::Commit
        ));
        for ended in [
            TransactionState::None,
            TransactionState::Committed,
            TransactionState::CommittedEmpty,
            TransactionState::Aborted,
        ] {
            assert!(matches!(w.after_callback_ok(ended), Decision::Return));
        }
    }

    #[test]
    fn transient_callback_errors_abort_and_retry() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        w.before_attempt(t0, 0.5).unwrap();
        let f = w.after_callback_error(transient(), TransactionState::InProgress, t0 + secs(1));
        assert!(f.abort);
        assert!(matches!(f.then, Decision::RetryTransaction));
        let backoff = w.before_attempt(t0 + secs(1), 1.0).unwrap();
        assert_eq!(backoff, Duration::from_secs_f64(0.0075));
        assert_eq!(w.attempts(), 2);
    }

    #[test]
    fn a_zero_timeout_never_runs_out() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, Some(Duration::ZERO));
        w.before_attempt(t0, 0.5).unwrap();
        let late = t0 + secs(3600);
        let f = w.after_callback_error(transient(), TransactionState::InProgress, late);
        assert!(
            matches!(f.then, Decision::RetryTransaction),
            "timeoutMS 0 is no limit"
        );
        assert!(w.before_attempt(late, 1.0).is_ok());
        // With a limit, the same hour is far past it.
        let mut w = WithTransaction::new(t0, Some(secs(1)));
        w.before_attempt(t0, 0.5).unwrap();
        let f = w.after_callback_error(transient(), TransactionState::InProgress, late);
        assert!(matches!(f.then, Decision::Fail(ref e) if is_timeout(e)));
    }

    #[test]
    fn other_callback_errors_propagate_unchanged() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        let f = w.after_callback_error(command_error(11000, &[]), TransactionState::Aborted, t0);
        assert!(!f.abort, "callback already aborted");
        match f.then {
            Decision::Fail(e) => assert_eq!(e.code(), Some(11000)),
            other => panic!("{other:?}"),
        }
        let f = w.after_callback_error(unknown_commit(), TransactionState::Committed, t0);
        match f.then {
            Decision::Fail(e) => assert!(e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn transient_callback_error_after_the_limit_is_a_timeout_with_labels() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        w.before_attempt(t0, 0.0).unwrap();
        let f = w.after_callback_error(transient(), TransactionState::InProgress, t0 + secs(120));
        assert!(f.abort);
        match f.then {
            Decision::Fail(e) => {
                assert!(is_timeout(&e));
                assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR));
                assert!(e.to_string().contains("code 112"));
            }
            other => panic!("{other:?}"),
        }
        // Just before the limit it still retries.
        let mut w = WithTransaction::new(t0, None);
        let f = w.after_callback_error(transient(), TransactionState::InProgress, t0 + secs(119));
        assert!(matches!(f.then, Decision::RetryTransaction));
    }

    #[test]
    fn backoff_that_would_cross_the_limit_gives_up_with_the_last_error() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        w.before_attempt(t0, 0.0).unwrap();
        w.after_callback_error(transient(), TransactionState::InProgress, t0 + secs(119));
        let almost = t0 + Duration::from_millis(119_996);
        let e = w.before_attempt(almost, 1.0).unwrap_err();
        assert!(is_timeout(&e));
        assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR));
        assert_eq!(w.attempts(), 1, "no new attempt counted");
        // With no jitter the same moment is still inside the limit.
        assert!(w.before_attempt(almost, 0.0).is_ok());
    }

    #[test]
    fn unknown_commit_results_are_retried_until_the_limit() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        w.before_attempt(t0, 0.0).unwrap();
        assert!(matches!(
            w.after_commit_error(unknown_commit(), t0 + secs(60)),
            Decision::RetryCommit
        ));
        match w.after_commit_error(unknown_commit(), t0 + secs(120)) {
            Decision::Fail(e) => {
                assert!(is_timeout(&e));
                assert!(e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn max_time_expired_commits_are_not_retried() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        let e = command_error(MAX_TIME_MS_EXPIRED, &[UNKNOWN_TRANSACTION_COMMIT_RESULT]);
        match w.after_commit_error(e, t0) {
            Decision::Fail(e) => assert_eq!(e.code(), Some(MAX_TIME_MS_EXPIRED)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn transient_commit_errors_retry_the_transaction() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, None);
        assert!(matches!(
            w.after_commit_error(transient(), t0 + secs(5)),
            Decision::RetryTransaction
        ));
        // Both labels: the commit is retried first.
        let both = command_error(
            251,
            &[
                TRANSIENT_TRANSACTION_ERROR,
                UNKNOWN_TRANSACTION_COMMIT_RESULT,
            ],
        );
        assert!(matches!(
            w.after_commit_error(both, t0),
            Decision::RetryCommit
        ));
        // Neither label: give up with the error itself.
        match w.after_commit_error(command_error(8, &[]), t0) {
            Decision::Fail(e) => {
                assert_eq!(e.code(), Some(8));
                assert!(!is_timeout(&e));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_timeout_ms_replaces_the_default_limit() {
        let t0 = Instant::now();
        let mut w = WithTransaction::new(t0, Some(secs(2)));
        match w.after_commit_error(unknown_commit(), t0 + secs(2)) {
            Decision::Fail(e) => assert!(is_timeout(&e)),
            other => panic!("{other:?}"),
        }
        let mut w = WithTransaction::new(t0, Some(secs(2)));
        assert!(matches!(
            w.after_commit_error(unknown_commit(), t0 + secs(1)),
            Decision::RetryCommit
        ));
    }

    /// A whole run against a fake clock: every attempt fails transiently,
    /// each taking 10 s; the loop must stop at the 120 s limit.
    #[test]
    fn a_run_of_transient_failures_stops_at_120_seconds() {
        let t0 = Instant::now();
        let mut now = t0;
        let mut w = WithTransaction::new(t0, None);
        let mut callbacks = 0;
        let outcome = loop {
            match w.before_attempt(now, 0.5) {
                Err(e) => break e,
                Ok(backoff) => now += backoff,
            }
            callbacks += 1;
            now += secs(10);
            let f = w.after_callback_error(transient(), TransactionState::InProgress, now);
            assert!(f.abort);
            match f.then {
                Decision::RetryTransaction => continue,
                Decision::Fail(e) => break e,
                other => panic!("{other:?}"),
            }
        };
        assert!(is_timeout(&outcome));
        assert!(outcome.contains_label(TRANSIENT_TRANSACTION_ERROR));
        assert_eq!(callbacks, 12);
        assert!(now - t0 >= secs(120) && now - t0 < secs(121));
    }
}
