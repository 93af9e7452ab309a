//! The executor's steps without sockets, on virtual time: the retry step
//! (the backoff is slept on the clock it is given, never the real one,
//! within the policy's jitter bounds, and a backoff that would pass the
//! deadline is a timeout that keeps the overload labels), the deadline an
//! operation runs under, and transaction pinning.

use std::time::Duration;

use super::attempt::{decide, wait};
use crate::error::{CommandError, Error, ErrorKind};
use crate::proto::address::ServerAddress;
use crate::proto::deadline::Deadline;
use crate::proto::retry::{
    FailedAttempt, OperationKind, OperationRetry, RetryPolicy, RetrySettings, BASE_BACKOFF,
};
use crate::proto::sdam::TopologyType;
use crate::shell::clock::{Clock, VirtualClock};

const OVERLOADED: &str = "SystemOverloadedError";
const RETRYABLE: &str = "RetryableError";

fn overload() -> Error {
    Error::from(CommandError {
        base_backoff: None,
        raw_response: None,
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

mod steps {
    use std::sync::Arc;
    use std::time::Duration;

    use bson::doc;

    use super::super::{ClientState, Inherited, SessionSlot, Target};
    use crate::proto::address::ServerAddress;
    use crate::proto::coll_options::InsertOneOptions;
    use crate::proto::deadline::Deadline;
    use crate::proto::operation::{Insert, Namespace};
    use crate::proto::options::ClientOptions;
    use crate::proto::sdam::TopologyType;
    use crate::proto::session::pool::ServerSession;
    use crate::proto::session::transaction::TransactionOptions;
    use crate::proto::session::{SessionOptions, SessionState};
    use crate::shell::clock::{Clock, VirtualClock};
    use crate::shell::topology::{Time, Topology};

    /// A client state on virtual time; building it does no I/O.
    fn state(uri: &str) -> (ClientState, Arc<VirtualClock>) {
        let options = ClientOptions::parse(uri).run().expect("a URI");
        let clock = Arc::new(VirtualClock::new());
        let time = Time {
            clock: clock.clone(),
            rng: fastrand::Rng::with_seed(1),
        };
        let topology = Topology::with_time(options, None, None, time).expect("a topology");
        (ClientState::new(topology), clock)
    }

    fn insert() -> Insert {
        Insert::one(
            Namespace::new("db", "c"),
            crate::proto::operation::test_support::raw(&doc! { "_id": 1 }),
            InsertOneOptions::default(),
            &mut crate::new_object_id,
        )
        .expect("valid BSON")
    }

    fn session(id: &str, clock: &VirtualClock) -> SessionState {
        let server_session = ServerSession::new(doc! { "id": id }, clock.now());
        SessionState::explicit(
            SessionOptions::default(),
            server_session,
            std::process::id(),
        )
        .expect("a session")
    }

    fn in_transaction(id: &str, clock: &VirtualClock) -> SessionState {
        let mut s = session(id, clock);
        s.start_transaction(None, &TransactionOptions::default())
            .expect("started");
        s
    }

    #[test]
    fn the_deadline_is_timeout_ms_from_the_clocks_now_unless_one_is_running() {
        let (mut state, clock) = state("mongodb://a:1/");
        clock.advance(Duration::from_secs(3));
        let op = insert();
        let timeout = Inherited {
            timeout: Some(Duration::from_millis(100)),
            ..Inherited::default()
        };
        let run = state
            .begin(&op, None, timeout, Target::Select)
            .expect("run");
        assert_eq!(
            run.deadline,
            Deadline::at(clock.now() + Duration::from_millis(100))
        );

        // The batches of one insert_many share the deadline they started.
        let running = Deadline::at(clock.now() + Duration::from_millis(7));
        let batch = Inherited {
            deadline: Some(running),
            ..timeout
        };
        let run = state.begin(&op, None, batch, Target::Select).expect("run");
        assert_eq!(run.deadline, running);

        // with_transaction's deadline wins over both.
        let mut s = session("s", &clock);
        let shared = Deadline::at(clock.now() + Duration::from_millis(3));
        s.set_transaction_deadline(Some(shared));
        let run = state
            .begin(&op, Some(&mut s), batch, Target::Select)
            .expect("run");
        assert_eq!(run.deadline, shared);
    }

    #[test]
    fn one_transaction_at_a_time_on_a_load_balanced_socket() {
        let (mut state, clock) = state("mongodb://lb:1/?loadBalanced=true");
        let lb = ServerAddress::tcp("lb", 1);
        let op = insert();
        let lb_type = TopologyType::LoadBalanced;

        let mut first = in_transaction("first", &clock);
        let mut run = state
            .begin(&op, Some(&mut first), Inherited::default(), Target::Select)
            .expect("run");
        state
            .pin_transaction(&mut run, &lb, lb_type)
            .expect("pinned");
        state.note_socket_transaction(&mut run.session);
        drop(run);
        assert!(first.transaction().pinned().is_some());

        let mut second = in_transaction("second", &clock);
        let mut run = state
            .begin(&op, Some(&mut second), Inherited::default(), Target::Select)
            .expect("run");
        let error = state
            .pin_transaction(&mut run, &lb, lb_type)
            .expect_err("the socket is taken");
        assert!(
            error.to_string().contains("one transaction at a time"),
            "{error}"
        );
        drop(run);

        // The first transaction ends: the socket is free.
        first.commit_transaction().expect("a commit body");
        state.note_socket_transaction(&mut SessionSlot::Explicit(&mut first));
        let mut run = state
            .begin(&op, Some(&mut second), Inherited::default(), Target::Select)
            .expect("run");
        state
            .pin_transaction(&mut run, &lb, lb_type)
            .expect("pinned");
    }

    #[test]
    fn a_sharded_transaction_re_pins_until_its_first_command_is_sent() {
        let (mut state, clock) = state("mongodb://r1:1,r2:1/");
        let (r1, r2) = (ServerAddress::tcp("r1", 1), ServerAddress::tcp("r2", 1));
        let op = insert();
        let sharded = TopologyType::Sharded;
        let mut s = in_transaction("s", &clock);
        let mut run = state
            .begin(&op, Some(&mut s), Inherited::default(), Target::Select)
            .expect("run");
        state
            .pin_transaction(&mut run, &r1, sharded)
            .expect("pinned");
        // An overload retry of the first command went to r2.
        state
            .pin_transaction(&mut run, &r2, sharded)
            .expect("re-pinned");
        let pinned = |run: &mut super::super::attempt::Run<'_>| {
            run.session
                .get()
                .and_then(|s| s.transaction().pinned().map(|p| p.address.clone()))
        };
        assert_eq!(pinned(&mut run), Some(r2.clone()));
        // Once the transaction started on r2, it stays there.
        run.session
            .get()
            .expect("a session")
            .transaction_mut()
            .note_command_sent();
        state.pin_transaction(&mut run, &r1, sharded).expect("kept");
        assert_eq!(pinned(&mut run), Some(r2));
    }
}
