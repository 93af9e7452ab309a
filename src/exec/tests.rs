//! The executor's retry step on virtual time: the backoff is slept on the
//! clock it is given (never the real one), within the policy's jitter
//! bounds, and a backoff that would pass the deadline is a timeout that
//! keeps the overload labels.

use std::time::Duration;

use super::attempt::{decide, wait};
use super::clock::{Clock, VirtualClock};
use crate::address::ServerAddress;
use crate::deadline::Deadline;
use crate::error::{CommandError, Error, ErrorKind};
use crate::retry::{
    FailedAttempt, OperationKind, OperationRetry, RetryPolicy, RetrySettings, BASE_BACKOFF,
};
use crate::sdam::TopologyType;

const OVERLOADED: &str = "SystemOverloadedError";
const RETRYABLE: &str = "RetryableError";

fn overload() -> Error {
    Error::from(CommandError {
        code: 462,
        code_name: "IngressRequestRateLimitExceeded".into(),
        message: "overloaded".into(),
        topology_version: None,
        address: None,
    })
    .with_labels([OVERLOADED, RETRYABLE])
}

struct Loop {
    clock: VirtualClock,
    policy: RetryPolicy,
    retry: OperationRetry,
    rng: fastrand::Rng,
    server: ServerAddress,
}

impl Loop {
    fn new(timeout: Option<Duration>, seed: u64) -> Self {
        let clock = VirtualClock::new();
        let settings = RetrySettings::seed();
        let deadline = Deadline::from_timeout(clock.now(), timeout);
        let retry = OperationRetry::new(&settings, OperationKind::RetryableRead, deadline);
        Loop {
            clock,
            policy: RetryPolicy::new(settings),
            retry,
            rng: fastrand::Rng::with_seed(seed),
            server: ServerAddress::tcp("a", 1),
        }
    }

    /// One failed attempt through the executor's decide-and-wait step.
    fn fail(&mut self, error: Error) -> Result<Duration, Error> {
        let attempt = FailedAttempt::sent_to(&self.server, TopologyType::ReplicaSetWithPrimary, 25);
        let before = self.clock.now();
        let plan = decide(
            &mut self.retry,
            &mut self.policy,
            error,
            &attempt,
            &self.clock,
            &mut self.rng,
        )?;
        wait(&plan, &self.clock, "find");
        Ok(self.clock.now() - before)
    }
}

#[test]
fn overload_backoffs_are_slept_on_the_given_clock_within_their_jitter_bounds() {
    for seed in 0..50 {
        let mut run = Loop::new(None, seed);
        let started = std::time::Instant::now();
        for i in 0..5u32 {
            let slept = run.fail(overload()).expect("retried");
            let cap = BASE_BACKOFF * 2u32.pow(i);
            assert!(
                slept <= cap,
                "retry {i} slept {slept:?} > {cap:?} (seed {seed})"
            );
        }
        // The sixth overload error exhausts the seed policy's five retries.
        let error = run.fail(overload()).expect_err("gave up");
        assert!(error.contains_label(OVERLOADED));
        assert_eq!(run.clock.sleeps().len(), 5);
        // Up to 3.1 s of virtual backoff took no real time.
        assert!(started.elapsed() < Duration::from_millis(500));
    }
}

#[test]
fn a_backoff_that_would_pass_the_deadline_is_a_timeout_that_keeps_the_labels() {
    let mut timeouts = 0;
    for seed in 0..50 {
        let mut run = Loop::new(Some(Duration::from_millis(20)), seed);
        match run.fail(overload()) {
            // A jitter small enough to fit in 20 ms: slept, within the time.
            Ok(slept) => assert!(slept < Duration::from_millis(20), "{slept:?}"),
            Err(error) => {
                timeouts += 1;
                assert!(matches!(error.kind(), ErrorKind::Timeout { .. }), "{error}");
                assert!(error.contains_label(OVERLOADED), "{error}");
                assert!(error.contains_label(RETRYABLE), "{error}");
                assert!(run.clock.sleeps().is_empty(), "no sleep before giving up");
            }
        }
    }
    // Backoffs are uniform up to 100 ms, so most exceed 20 ms.
    assert!(timeouts > 25, "{timeouts} of 50 timed out");
}

#[test]
fn a_retry_is_not_started_once_the_deadline_has_passed() {
    let mut run = Loop::new(Some(Duration::from_millis(50)), 1);
    run.clock.advance(Duration::from_millis(60));
    let network = Error::network_message(None, "connection reset by peer");
    let error = run.fail(network).expect_err("no retry after the deadline");
    assert!(run.clock.sleeps().is_empty());
    assert!(
        matches!(error.kind(), ErrorKind::Timeout { .. }) || error.is_network_error(),
        "{error}"
    );
}

#[test]
fn a_network_error_on_a_retryable_read_is_retried_once_without_sleeping() {
    let mut run = Loop::new(None, 1);
    let network = || Error::network_message(None, "connection reset by peer");
    assert_eq!(run.fail(network()).expect("retried"), Duration::ZERO);
    assert!(run.fail(network()).is_err(), "only one retry");
    assert!(run.clock.sleeps().is_empty());
}
