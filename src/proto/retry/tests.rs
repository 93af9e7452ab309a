//! Scripted error sequences through the retry policy, with a fake clock and
//! seeded random numbers.

use std::time::{Duration, Instant};

use bson::doc;

use super::*;
use crate::proto::options::DEFAULT_MAX_ADAPTIVE_RETRIES;

const READ: OperationKind = OperationKind::RetryableRead;
const WRITE: OperationKind = OperationKind::RetryableWrite;
const RS: TopologyType = TopologyType::ReplicaSetWithPrimary;
/// MongoDB 8.0.
const WIRE_NEW: i32 = 25;
/// MongoDB 4.2.
const WIRE_4_2: i32 = 8;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn command_error(code: i32, name: &str) -> Error {
    Error::from(CommandError {
        base_backoff: None,
        raw_response: None,
        code,
        code_name: name.into(),
        message: format!("{name} happened"),
        topology_version: None,
        address: None,
    })
}

/// The server's overload error from the spec's example.
fn overload() -> Error {
    command_error(462, "IngressRequestRateLimitExceeded")
        .with_labels([SYSTEM_OVERLOADED_ERROR, RETRYABLE_ERROR])
}

fn network() -> Error {
    Error::network_message(None, "connection reset by peer")
}

fn tokens(whole: u32, tenths: u32) -> Tokens {
    Tokens::from_tenths(whole * 10 + tenths)
}

/// One scripted attempt: its result and where it failed.
enum Step {
    Success,
    /// Failed after the command was sent.
    Fail(Error),
    /// Failed while connecting, before the command was sent.
    FailUnsent(Error),
    /// No server could be selected.
    NoServer(Error),
}

use Step::*;

struct Run {
    result: Result<(), Error>,
    attempts: u32,
    plans: Vec<RetryPlan>,
    /// The bucket's balance after each attempt's outcome was handled.
    balances: Vec<Tokens>,
    /// The deprioritized list each attempt was selected with.
    avoided: Vec<Vec<ServerAddress>>,
    op: OperationRetry,
    elapsed: Duration,
}

struct Harness {
    policy: RetryPolicy,
    kind: OperationKind,
    topology: TopologyType,
    wire: i32,
    timeout: Option<Duration>,
    /// How long each attempt takes on the fake clock.
    attempt_time: Duration,
    seed: u64,
}

impl Harness {
    fn new(settings: RetrySettings, kind: OperationKind) -> Self {
        Harness {
            policy: RetryPolicy::new(settings),
            kind,
            topology: RS,
            wire: WIRE_NEW,
            timeout: None,
            attempt_time: ms(1),
            seed: 7,
        }
    }

    fn seed_mode(kind: OperationKind) -> Self {
        Harness::new(RetrySettings::seed(), kind)
    }

    fn bucket(mut self, balance: Tokens) -> Self {
        let settings = self.policy.settings().clone();
        self.policy = RetryPolicy::with_bucket(settings, TokenBucket::with_balance(balance));
        self
    }

    fn topology(mut self, t: TopologyType) -> Self {
        self.topology = t;
        self
    }

    fn wire(mut self, w: i32) -> Self {
        self.wire = w;
        self
    }

    fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }

    /// Runs the executor's loop over `steps`; each attempt goes to
    /// `hostN:27017`, N counting from 1.
    fn run(&mut self, steps: Vec<Step>) -> Run {
        let start = Instant::now();
        let mut now = start;
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let deadline = Deadline::from_timeout(start, self.timeout);
        let mut op = OperationRetry::new(self.policy.settings(), self.kind, deadline);
        let mut plans = Vec::new();
        let mut balances = Vec::new();
        let mut avoided = Vec::new();
        let mut steps = steps.into_iter();
        let mut attempts = 0;
        let result = loop {
            attempts += 1;
            avoided.push(op.deprioritized().to_vec());
            let server = ServerAddress::tcp(format!("host{attempts}"), 27017);
            now += self.attempt_time;
            let step = steps.next().expect("the script ran out of steps");
            let (error, attempt) = match step {
                Success => {
                    op.on_success(&mut self.policy);
                    balances.push(self.balance());
                    break Result::Ok(());
                }
                Fail(e) => (e, FailedAttempt::sent_to(&server, self.topology, self.wire)),
                FailUnsent(e) => (
                    e,
                    FailedAttempt {
                        command_sent: false,
                        ..FailedAttempt::sent_to(&server, self.topology, self.wire)
                    },
                ),
                NoServer(e) => (e, FailedAttempt::no_server(self.topology)),
            };
            let decision = op.on_error(&mut self.policy, error, &attempt, now, &mut rng);
            balances.push(self.balance());
            match decision {
                RetryDecision::Retry(plan) => {
                    now += plan.backoff;
                    plans.push(plan);
                }
                RetryDecision::GiveUp(e) => break Err(e),
            }
        };
        assert!(
            steps.next().is_none(),
            "the operation ended before the script did"
        );
        Run {
            result,
            attempts,
            plans,
            balances,
            avoided,
            op,
            elapsed: now - start,
        }
    }

    fn balance(&self) -> Tokens {
        self.policy
            .bucket()
            .map(TokenBucket::balance)
            .unwrap_or_default()
    }
}

fn code_of(result: &Result<(), Error>) -> Option<i32> {
    result.as_ref().err().and_then(Error::code)
}

// ---------------------------------------------------------------- token bucket

#[test]
fn bucket_starts_full_and_caps_deposits() {
    let mut b = TokenBucket::new();
    assert_eq!(b.balance(), tokens(1000, 0));
    assert_eq!(b.capacity(), tokens(1000, 0));
    b.deposit(RETRY_TOKEN_RETURN_RATE);
    assert_eq!(b.balance(), tokens(1000, 0), "never above capacity");
    assert!(b.try_take());
    assert_eq!(b.balance(), tokens(999, 0));
    b.deposit(Tokens::from_tenths(11));
    assert_eq!(b.balance(), tokens(1000, 0), "1.1 capped at 1000");
}

#[test]
fn bucket_counts_tenths_exactly() {
    let mut b = TokenBucket::with_balance(Tokens::whole(0));
    for _ in 0..10 {
        assert!(!b.try_take(), "{} is less than one token", b.balance());
        b.deposit(RETRY_TOKEN_RETURN_RATE);
    }
    assert_eq!(b.balance(), tokens(1, 0));
    assert_eq!(b.balance().as_f64(), 1.0);
    assert!(b.try_take());
    assert!(!b.try_take());
    assert_eq!(tokens(998, 1).to_string(), "998.1");
    assert_eq!(
        TokenBucket::with_balance(Tokens::whole(5000)).balance(),
        tokens(1000, 0)
    );
}

// ---------------------------------------------------------------- seed mode: overload retries

#[test]
fn first_attempt_success_deposits_a_tenth() {
    let mut h = Harness::seed_mode(READ).bucket(tokens(500, 0));
    let run = h.run(vec![Success]);
    assert!(run.result.is_ok());
    assert_eq!(run.attempts, 1);
    assert_eq!(run.balances, vec![tokens(500, 1)]);
}

#[test]
fn overload_retries_take_tokens_and_a_successful_retry_pays_back() {
    let mut h = Harness::seed_mode(READ);
    let run = h.run(vec![
        Fail(overload()),
        Fail(overload()),
        Fail(overload()),
        Success,
    ]);
    assert!(run.result.is_ok());
    assert_eq!(run.attempts, 4);
    assert_eq!(run.op.retries(), 3);
    assert_eq!(
        run.balances,
        vec![
            tokens(999, 0),
            tokens(998, 0),
            tokens(997, 0),
            tokens(998, 1)
        ]
    );
    assert!(run.plans.iter().all(|p| p.overload));
    assert_eq!(
        run.plans.iter().map(|p| p.retry).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert_eq!(run.plans[2].tokens_left, Some(tokens(997, 0)));
}

#[test]
fn overload_retries_stop_after_five() {
    let mut h = Harness::seed_mode(READ);
    let run = h.run((0..6).map(|_| Fail(overload())).collect());
    assert_eq!(run.attempts, 6, "one attempt and five retries");
    assert_eq!(code_of(&run.result), Some(462));
    assert_eq!(
        run.balances.last(),
        Some(&tokens(995, 0)),
        "the sixth failure took no token"
    );
}

#[test]
fn each_backoff_stays_within_its_cap() {
    for seed in 0..200 {
        let mut h = Harness::seed_mode(READ);
        h.seed = seed;
        let run = h.run((0..6).map(|_| Fail(overload())).collect());
        assert_eq!(run.plans.len(), 5);
        for (i, plan) in run.plans.iter().enumerate() {
            let cap = ms(100) * (1 << i);
            assert!(
                plan.backoff <= cap,
                "seed {seed} retry {i}: {:?} > {cap:?}",
                plan.backoff
            );
        }
        let slept: Duration = run.plans.iter().map(|p| p.backoff).sum();
        assert_eq!(run.elapsed, slept + ms(6));
    }
}

#[test]
fn backoff_doubles_from_100_ms_up_to_10_s() {
    let s = RetrySettings::seed();
    let caps: Vec<u128> = (0..9).map(|i| s.backoff_cap(i).as_millis()).collect();
    assert_eq!(
        caps,
        vec![100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
    );
    assert_eq!(s.backoff_cap(40), ms(10_000));
    assert_eq!(s.backoff_cap(u32::MAX), ms(10_000));
    assert_eq!(s.backoff(2, 0.5), ms(200));
    assert_eq!(s.backoff(3, 0.0), Duration::ZERO);
    assert_eq!(s.backoff(0, f64::NAN), Duration::ZERO);
    assert!(s.backoff(20, 0.999_999) <= ms(10_000));
}

#[test]
fn backoff_jitter_is_spread_not_constant() {
    let mut distinct = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let mut h = Harness::seed_mode(READ);
        h.seed = seed;
        let run = h.run(vec![Fail(overload()), Success]);
        distinct.insert(run.plans[0].backoff);
    }
    assert!(distinct.len() > 10, "{distinct:?}");
}

#[test]
fn an_empty_bucket_stops_overload_retries() {
    for balance in [tokens(0, 0), tokens(0, 9)] {
        let mut h = Harness::seed_mode(READ).bucket(balance);
        let run = h.run(vec![Fail(overload())]);
        assert_eq!(run.attempts, 1);
        assert_eq!(code_of(&run.result), Some(462));
        assert_eq!(run.balances, vec![balance]);
    }
    // Two tokens: two retries, then the third overload error is final.
    let mut h = Harness::seed_mode(READ).bucket(tokens(2, 0));
    let run = h.run(vec![Fail(overload()), Fail(overload()), Fail(overload())]);
    assert_eq!(run.attempts, 3);
    assert_eq!(run.balances, vec![tokens(1, 0), tokens(0, 0), tokens(0, 0)]);
}

#[test]
fn a_retry_failing_without_overload_returns_its_token() {
    // Overload, then a network error on the retry (a retryable read error:
    // its own one retry), then success.
    let mut h = Harness::seed_mode(READ).bucket(tokens(500, 0));
    let run = h.run(vec![Fail(overload()), Fail(network()), Success]);
    assert!(run.result.is_ok());
    assert_eq!(run.attempts, 3);
    assert_eq!(
        run.balances,
        vec![tokens(499, 0), tokens(500, 0), tokens(501, 1)]
    );
    assert!(run.plans[0].overload && !run.plans[1].overload);
    assert_eq!(
        run.plans[1].backoff,
        Duration::ZERO,
        "no backoff without overload"
    );
}

#[test]
fn a_first_attempt_failing_without_overload_deposits_nothing() {
    let mut h = Harness::seed_mode(READ).bucket(tokens(500, 0));
    let run = h.run(vec![Fail(network()), Success]);
    assert_eq!(run.balances, vec![tokens(500, 0), tokens(501, 1)]);
}

#[test]
fn overload_and_ordinary_retries_have_separate_budgets_in_seed_mode() {
    let mut steps: Vec<Step> = (0..5).map(|_| Fail(overload())).collect();
    steps.push(Fail(network()));
    steps.push(Success);
    let mut h = Harness::seed_mode(READ);
    let run = h.run(steps);
    assert!(run.result.is_ok());
    assert_eq!(run.attempts, 7);

    // But only one ordinary retry.
    let mut h = Harness::seed_mode(READ);
    let run = h.run(vec![Fail(network()), Fail(overload()), Fail(network())]);
    assert_eq!(run.attempts, 3);
    assert!(run.result.unwrap_err().is_network_error());
}

#[test]
fn overload_without_retryable_label_is_final_in_seed_mode() {
    let err = command_error(462, "IngressRequestRateLimitExceeded")
        .with_labels([SYSTEM_OVERLOADED_ERROR]);
    let mut h = Harness::seed_mode(READ);
    let run = h.run(vec![Fail(err)]);
    assert_eq!(run.attempts, 1);
    // RetryableError alone is not an overload error either.
    let err = command_error(2, "BadValue").with_labels([RETRYABLE_ERROR]);
    let run = Harness::seed_mode(OperationKind::OtherWrite).run(vec![Fail(err)]);
    assert_eq!(run.attempts, 1);
}

// ---------------------------------------------------------------- which operations

#[test]
fn non_retryable_writes_retry_only_overload_errors() {
    // updateMany / deleteMany.
    let mut h = Harness::seed_mode(OperationKind::OtherWrite);
    let run = h.run(vec![Fail(overload()), Fail(overload()), Success]);
    assert!(run.result.is_ok());
    assert_eq!(run.attempts, 3);

    let run = Harness::seed_mode(OperationKind::OtherWrite).run(vec![Fail(network())]);
    assert_eq!(run.attempts, 1);
    assert!(
        !run.result
            .unwrap_err()
            .contains_label(RETRYABLE_WRITE_ERROR),
        "only retryable writes get the label"
    );

    let run = Harness::seed_mode(OperationKind::OtherRead)
        .run(vec![Fail(command_error(91, "ShutdownInProgress"))]);
    assert_eq!(run.attempts, 1, "getMore is not a retryable read");
}

#[test]
fn overload_retries_follow_retry_reads_and_retry_writes() {
    let no_writes = RetrySettings::seed().with_retry_writes(false);
    let no_reads = RetrySettings::seed().with_retry_reads(false);
    let cases = [
        (no_writes.clone(), OperationKind::OtherWrite, 1),
        (no_writes.clone(), WRITE, 1),
        (no_writes.clone(), OperationKind::OtherRead, 2),
        (no_writes, OperationKind::RunCommand, 1),
        (no_reads.clone(), READ, 1),
        (no_reads.clone(), OperationKind::OtherWrite, 2),
        (no_reads, OperationKind::RunCommand, 1),
        (RetrySettings::seed(), OperationKind::RunCommand, 2),
    ];
    for (settings, kind, attempts) in cases {
        let expected: Vec<Step> = if attempts == 1 {
            vec![Fail(overload())]
        } else {
            vec![Fail(overload()), Success]
        };
        let run = Harness::new(settings.clone(), kind).run(expected);
        assert_eq!(run.attempts, attempts, "{kind:?} with {settings:?}");
    }
}

#[test]
fn retryable_read_errors_by_code() {
    for (code, retried) in [
        (134, true),
        (91, true),
        (262, true),
        (11000, false),
        (2, false),
    ] {
        let steps = if retried {
            vec![Fail(command_error(code, "x")), Success]
        } else {
            vec![Fail(command_error(code, "x"))]
        };
        let run = Harness::seed_mode(READ).run(steps);
        assert_eq!(run.attempts, if retried { 2 } else { 1 }, "code {code}");
    }
    assert!(is_retryable_read_error(&network(), Some(WIRE_NEW)));
    assert!(!is_retryable_read_error(
        &Error::server_selection("none"),
        None
    ));
}

#[test]
fn retry_reads_off_means_no_ordinary_read_retry() {
    let settings = RetrySettings::seed().with_retry_reads(false);
    let run = Harness::new(settings, READ).run(vec![Fail(network())]);
    assert_eq!(run.attempts, 1);
}

// ---------------------------------------------------------------- retryable writes

#[test]
fn retryable_write_gets_one_retry_without_token_or_backoff() {
    let mut h = Harness::seed_mode(WRITE).bucket(tokens(500, 0));
    let run = h.run(vec![Fail(network()), Fail(network())]);
    assert_eq!(run.attempts, 2);
    let err = run.result.unwrap_err();
    assert!(
        err.contains_label(RETRYABLE_WRITE_ERROR),
        "network errors are labelled"
    );
    assert_eq!(run.plans[0].backoff, Duration::ZERO);
    assert_eq!(
        run.balances,
        vec![tokens(500, 0), tokens(501, 0)],
        "no token taken; the failed retry deposits one"
    );
    assert!(run.op.might_have_written());
}

#[test]
fn no_writes_performed_surfaces_the_earlier_error() {
    let first = command_error(91, "ShutdownInProgress").with_labels([RETRYABLE_WRITE_ERROR]);
    let second = command_error(10107, "NotWritablePrimary")
        .with_labels([RETRYABLE_WRITE_ERROR, NO_WRITES_PERFORMED]);
    let run = Harness::seed_mode(WRITE).run(vec![Fail(first), Fail(second)]);
    assert_eq!(code_of(&run.result), Some(91));

    // If every error says no writes were performed, the first one is returned.
    let first = overload().with_labels([NO_WRITES_PERFORMED]);
    let second = command_error(10107, "NotWritablePrimary")
        .with_labels([RETRYABLE_WRITE_ERROR, NO_WRITES_PERFORMED]);
    let run = Harness::seed_mode(WRITE).run(vec![Fail(first), Fail(second), Fail(network())]);
    // overload retry, ordinary retry, then the network error on the second
    // ordinary retry is over budget and might have written: it is returned.
    assert_eq!(run.attempts, 3);
    assert!(run.result.unwrap_err().is_network_error());

    let first = overload().with_labels([NO_WRITES_PERFORMED]);
    let second = command_error(10107, "NotWritablePrimary")
        .with_labels([RETRYABLE_WRITE_ERROR, NO_WRITES_PERFORMED]);
    let third = command_error(91, "ShutdownInProgress")
        .with_labels([RETRYABLE_WRITE_ERROR, NO_WRITES_PERFORMED]);
    let run = Harness::seed_mode(WRITE).run(vec![Fail(first), Fail(second), Fail(third)]);
    assert_eq!(code_of(&run.result), Some(462));
    assert!(!run.op.might_have_written());
}

#[test]
fn an_overload_error_with_no_writes_performed_is_still_retried() {
    let run = Harness::seed_mode(WRITE).run(vec![
        Fail(network()),
        Fail(overload().with_labels([NO_WRITES_PERFORMED])),
        Success,
    ]);
    assert!(run.result.is_ok());
    assert_eq!(run.attempts, 3);
}

#[test]
fn a_retry_that_cannot_select_a_server_returns_the_previous_error() {
    let run = Harness::seed_mode(WRITE).run(vec![
        Fail(command_error(189, "PrimarySteppedDown").with_labels([RETRYABLE_WRITE_ERROR])),
        NoServer(Error::server_selection("no writable server")),
    ]);
    assert_eq!(code_of(&run.result), Some(189));

    // On the first attempt the selection error itself propagates.
    let run = Harness::seed_mode(WRITE).run(vec![NoServer(Error::server_selection(
        "no writable server",
    ))]);
    assert!(matches!(
        run.result.unwrap_err().kind(),
        ErrorKind::ServerSelection { .. }
    ));
}

#[test]
fn an_unsent_retry_keeps_the_earlier_error() {
    let run = Harness::seed_mode(WRITE).run(vec![
        Fail(command_error(189, "PrimarySteppedDown").with_labels([RETRYABLE_WRITE_ERROR])),
        FailUnsent(network()),
    ]);
    assert_eq!(code_of(&run.result), Some(189));
}

#[test]
fn pre_4_4_servers_get_their_errors_labelled_by_the_driver() {
    // Wire 8 (4.2): the driver labels ShutdownInProgress and retries.
    let run = Harness::seed_mode(WRITE).wire(WIRE_4_2).run(vec![
        Fail(command_error(91, "ShutdownInProgress")),
        Fail(command_error(91, "ShutdownInProgress")),
    ]);
    assert_eq!(run.attempts, 2);
    assert!(run
        .result
        .unwrap_err()
        .contains_label(RETRYABLE_WRITE_ERROR));

    // Wire 9+ (4.4+): only the server's label counts.
    let run = Harness::seed_mode(WRITE).run(vec![Fail(command_error(91, "ShutdownInProgress"))]);
    assert_eq!(run.attempts, 1);
    assert!(!run
        .result
        .unwrap_err()
        .contains_label(RETRYABLE_WRITE_ERROR));
    let labelled = command_error(91, "ShutdownInProgress").with_labels([RETRYABLE_WRITE_ERROR]);
    let run = Harness::seed_mode(WRITE).run(vec![Fail(labelled), Success]);
    assert_eq!(run.attempts, 2);

    // Not a listed code: no label even on 4.2.
    let mut e = command_error(11000, "DuplicateKey");
    assert!(!add_retryable_write_label(&mut e, Some(WIRE_4_2)));
    assert!(!e.contains_label(RETRYABLE_WRITE_ERROR));
    let mut e = command_error(262, "ExceededTimeLimit");
    assert!(add_retryable_write_label(&mut e, Some(WIRE_4_2)));
    let mut e = network();
    assert!(add_retryable_write_label(&mut e, None));
    assert!(is_retryable_write_error(
        &command_error(6, "HostUnreachable"),
        Some(WIRE_4_2)
    ));
    assert!(!is_retryable_write_error(
        &command_error(6, "HostUnreachable"),
        Some(9)
    ));
    assert!(!is_retryable_write_error(
        &command_error(134, "ReadConcernMajorityNotAvailableYet"),
        Some(WIRE_4_2)
    ));
}

#[test]
fn retry_writes_off_adds_no_label_and_no_retry() {
    let settings = RetrySettings::seed().with_retry_writes(false);
    let run = Harness::new(settings, WRITE).run(vec![Fail(network())]);
    assert_eq!(run.attempts, 1);
    assert!(!run
        .result
        .unwrap_err()
        .contains_label(RETRYABLE_WRITE_ERROR));
}

#[test]
fn mmapv1_error_gets_the_actionable_message() {
    let mut e = command_error(20, "IllegalOperation");
    if let ErrorKind::Command(c) = e.kind() {
        let mut c = c.clone();
        c.message = "Transaction numbers are only allowed on storage engines that support document-level locking".into();
        e = Error::from(c);
    }
    let run = Harness::seed_mode(WRITE).run(vec![Fail(e)]);
    let err = run.result.unwrap_err();
    assert_eq!(err.code(), Some(20));
    assert!(err.to_string().contains("retryWrites=false"), "{err}");
}

// ---------------------------------------------------------------- deprioritized servers

#[test]
fn deprioritized_servers_by_topology() {
    let host = |n: u32| ServerAddress::tcp(format!("host{n}"), 27017);

    // Replica set, no retargeting: overloaded servers may be selected again.
    let run = Harness::seed_mode(READ).run(vec![Fail(overload()), Fail(network()), Success]);
    assert!(run.avoided.iter().all(Vec::is_empty));
    assert!(run.plans.iter().all(|p| p.deprioritized.is_none()));

    // Replica set with retargeting: only overloaded servers are avoided.
    let settings = RetrySettings::seed().with_overload_retargeting(true);
    let run = Harness::new(settings, READ).run(vec![Fail(overload()), Fail(network()), Success]);
    assert_eq!(run.avoided, vec![vec![], vec![host(1)], vec![host(1)]]);
    assert_eq!(run.plans[0].deprioritized, Some(host(1)));

    // Sharded: every failed mongos is avoided, overload or not.
    let run = Harness::seed_mode(READ)
        .topology(TopologyType::Sharded)
        .run(vec![Fail(overload()), Fail(network()), Success]);
    assert_eq!(
        run.avoided,
        vec![vec![], vec![host(1)], vec![host(1), host(2)]]
    );

    // A failure without a server adds nothing.
    let run = Harness::seed_mode(READ)
        .topology(TopologyType::Sharded)
        .run(vec![
            Fail(overload()),
            NoServer(Error::server_selection("none")),
        ]);
    assert_eq!(run.op.deprioritized(), &[host(1)]);
}

// ---------------------------------------------------------------- deadline (CSOT)

#[test]
fn a_backoff_that_would_pass_the_deadline_fails_at_once() {
    // 50 ms budget; the first backoff can be up to 100 ms. Find a seed whose
    // first jitter gives more than 49 ms and one that gives less.
    let mut saw_timeout = false;
    let mut saw_retry = false;
    for seed in 0..50 {
        let mut h = Harness::seed_mode(READ).timeout(ms(50));
        h.seed = seed;
        let jitter = fastrand::Rng::with_seed(seed).f64();
        let backoff = RetrySettings::seed().backoff(0, jitter);
        if backoff > ms(49) {
            let run = h.run(vec![Fail(overload())]);
            let err = run.result.unwrap_err();
            assert!(matches!(err.kind(), ErrorKind::Timeout { .. }), "{err}");
            assert!(err.to_string().contains("overload"), "{err}");
            // The README tells users to check these labels.
            assert!(err.contains_label(SYSTEM_OVERLOADED_ERROR), "{err:?}");
            assert!(err.contains_label(RETRYABLE_ERROR), "{err:?}");
            assert_eq!(run.balances, vec![tokens(1000, 0)], "no token taken");
            assert_eq!(run.elapsed, ms(1), "no sleeping");
            saw_timeout = true;
        } else {
            let run = h.run(vec![Fail(overload()), Success]);
            assert!(run.result.is_ok());
            assert_eq!(run.plans[0].backoff, backoff, "the backoff is jitter × cap");
            saw_retry = true;
        }
    }
    assert!(saw_timeout && saw_retry);
}

#[test]
fn with_a_deadline_ordinary_retries_continue_until_it_passes() {
    let mut h = Harness::seed_mode(READ).timeout(ms(100));
    h.attempt_time = ms(10);
    let run = h.run(vec![
        Fail(network()),
        Fail(network()),
        Fail(network()),
        Success,
    ]);
    assert!(run.result.is_ok());
    assert_eq!(run.attempts, 4);

    let mut h = Harness::seed_mode(READ).timeout(ms(25));
    h.attempt_time = ms(10);
    let run = h.run(vec![Fail(network()), Fail(network()), Fail(network())]);
    assert_eq!(run.attempts, 3);
    let err = run.result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Timeout { .. }), "{err}");
    assert!(
        err.to_string().contains("connection reset"),
        "names the last error: {err}"
    );

    // Past the deadline before an overload retry: the labels stay.
    let mut h = Harness::seed_mode(READ).timeout(ms(5));
    h.attempt_time = ms(10);
    let err = h.run(vec![Fail(overload())]).result.unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Timeout { .. }), "{err}");
    assert!(err.contains_label(SYSTEM_OVERLOADED_ERROR), "{err:?}");
    assert!(err.contains_label(RETRYABLE_ERROR), "{err:?}");
}

#[test]
fn a_timeout_error_from_an_attempt_is_final() {
    let run = Harness::seed_mode(READ).timeout(ms(100)).run(vec![
        Fail(network()),
        Fail(Deadline::timeout_error("reading the reply")),
    ]);
    let err = run.result.unwrap_err();
    assert!(err.to_string().contains("reading the reply"));
}

#[test]
fn overload_retries_stay_capped_with_a_deadline() {
    let run = Harness::seed_mode(READ)
        .timeout(ms(3_600_000))
        .run((0..6).map(|_| Fail(overload())).collect());
    assert_eq!(run.attempts, 6);
}

// ---------------------------------------------------------------- published mode

fn published(max: u32) -> RetrySettings {
    RetrySettings::published(max, false)
}

#[test]
fn published_mode_retries_overload_max_adaptive_retries_times_without_a_bucket() {
    let mut h = Harness::new(published(2), READ);
    assert!(h.policy.bucket().is_none());
    let run = h.run((0..3).map(|_| Fail(overload())).collect());
    assert_eq!(run.attempts, 3);
    assert_eq!(code_of(&run.result), Some(462));
    assert!(run.plans.iter().all(|p| p.tokens_left.is_none()));

    let run = Harness::new(
        published(DEFAULT_MAX_ADAPTIVE_RETRIES),
        OperationKind::OtherWrite,
    )
    .run(vec![Fail(overload()), Fail(overload()), Success]);
    assert!(run.result.is_ok());
}

#[test]
fn published_mode_zero_turns_overload_retries_off_but_not_read_retries() {
    let run = Harness::new(published(0), READ).run(vec![Fail(overload())]);
    assert_eq!(run.attempts, 1);
    let run = Harness::new(published(0), READ).run(vec![Fail(network()), Success]);
    assert_eq!(run.attempts, 2);
}

#[test]
fn published_mode_shares_one_counter_and_keeps_the_raised_limit() {
    // Overload raises the limit to 2 for good; network errors then use it.
    let run = Harness::new(published(2), READ).run(vec![
        Fail(overload()),
        Fail(network()),
        Fail(network()),
    ]);
    assert_eq!(run.attempts, 3);
    assert!(run.result.unwrap_err().is_network_error());

    // A network error first uses the one ordinary retry; an overload error on
    // the retry raises the limit to 2, so one more retry follows.
    let run =
        Harness::new(published(2), READ).run(vec![Fail(network()), Fail(overload()), Success]);
    assert_eq!(run.attempts, 3);
    assert!(run.result.is_ok());
    // Its backoff exponent is the retry's number, 2: cap 400 ms.
    assert!(run.plans[1].backoff <= ms(400));
    assert_eq!(run.plans[1].retry, 2);
}

#[test]
fn published_mode_backoff_exponent_counts_every_retry() {
    for seed in 0..50 {
        let mut h = Harness::new(published(2), READ);
        h.seed = seed;
        let mut rng = fastrand::Rng::with_seed(seed);
        let run = h.run(vec![Fail(network()), Fail(overload()), Success]);
        assert_eq!(run.plans[1].backoff, ms(400).mul_f64(rng.f64()));
    }
}

/// The overload error with the server's `baseBackoffMS`.
fn overload_with_base(base: Duration) -> Error {
    let mut error = command_error(462, "IngressRequestRateLimitExceeded");
    if let ErrorKind::Command(command) = &mut *error.kind {
        command.base_backoff = Some(base);
    }
    error.with_labels([SYSTEM_OVERLOADED_ERROR, RETRYABLE_ERROR])
}

#[test]
fn published_mode_backoff_is_jitter_times_100_ms_times_2_to_the_retry_number() {
    // Spec: `jitter * min(MAX_BACKOFF, BASE_BACKOFF * 2^attempt)`, the first
    // retry being attempt 1; one jitter drawn per overload retry.
    for seed in 0..50 {
        let mut h = Harness::new(published(2), READ);
        h.seed = seed;
        let mut rng = fastrand::Rng::with_seed(seed);
        let run = h.run(vec![Fail(overload()), Fail(overload()), Success]);
        let backoffs: Vec<Duration> = run.plans.iter().map(|p| p.backoff).collect();
        let expected = vec![ms(200).mul_f64(rng.f64()), ms(400).mul_f64(rng.f64())];
        assert_eq!(backoffs, expected, "seed {seed}");
    }
}

#[test]
fn published_mode_backs_off_from_the_servers_base_backoff() {
    for seed in 0..50 {
        let mut h = Harness::new(published(2), READ);
        h.seed = seed;
        let mut rng = fastrand::Rng::with_seed(seed);
        let run = h.run(vec![
            Fail(overload_with_base(ms(50))),
            Fail(overload_with_base(ms(50))),
            Success,
        ]);
        let backoffs: Vec<Duration> = run.plans.iter().map(|p| p.backoff).collect();
        let expected = vec![ms(100).mul_f64(rng.f64()), ms(200).mul_f64(rng.f64())];
        assert_eq!(backoffs, expected, "seed {seed}");
    }
}

#[test]
fn published_mode_follows_each_errors_own_base_backoff() {
    // No value, zero, and a value each decide only the retry after their
    // own error; zero means the driver's 100 ms.
    let mut h = Harness::new(published(3), READ);
    let mut rng = fastrand::Rng::with_seed(h.seed);
    let run = h.run(vec![
        Fail(overload_with_base(ms(10))),
        Fail(overload_with_base(Duration::ZERO)),
        Fail(overload()),
        Success,
    ]);
    let backoffs: Vec<Duration> = run.plans.iter().map(|p| p.backoff).collect();
    let expected = vec![
        ms(20).mul_f64(rng.f64()),
        ms(400).mul_f64(rng.f64()),
        ms(800).mul_f64(rng.f64()),
    ];
    assert_eq!(backoffs, expected);
}

#[test]
fn the_servers_base_backoff_replaces_the_base_setting_but_not_the_cap() {
    let s = published(2).with_backoff(ms(1_000_000), ms(10_000));
    assert_eq!(s.overload_base(Some(ms(1))), ms(1));
    assert_eq!(s.overload_base(Some(Duration::ZERO)), ms(1_000_000));
    assert_eq!(s.overload_base(None), ms(1_000_000));
    // The spec's prose test 5 with jitter pinned near 1: the default
    // backoffs sum to 0.6 s, those from `baseBackoffMS: 50` to 0.3 s.
    let d = published(2);
    let sum = |base: Option<Duration>| -> Duration {
        (1..=2)
            .map(|i| d.backoff_from(d.overload_base(base), i, 1.0))
            .sum()
    };
    assert_eq!(sum(None), ms(600));
    assert_eq!(sum(Some(ms(50))), ms(300));
    // A huge server value is capped at MAX_BACKOFF.
    assert_eq!(
        d.backoff_from(d.overload_base(Some(Duration::MAX)), 1, 1.0),
        ms(10_000)
    );
}

#[test]
fn seed_mode_keeps_its_constant_base_whatever_the_server_says() {
    for seed in 0..20 {
        let mut h = Harness::seed_mode(READ);
        h.seed = seed;
        let mut rng = fastrand::Rng::with_seed(seed);
        let run = h.run(vec![
            Fail(overload_with_base(ms(5000))),
            Fail(overload_with_base(ms(1))),
            Success,
        ]);
        let backoffs: Vec<Duration> = run.plans.iter().map(|p| p.backoff).collect();
        let expected = vec![ms(100).mul_f64(rng.f64()), ms(200).mul_f64(rng.f64())];
        assert_eq!(backoffs, expected, "seed {seed}");
    }
}

#[test]
fn a_server_base_backoff_past_the_deadline_fails_at_once() {
    // 10 s from the server against a 100 ms budget: a seed whose jitter
    // makes the first backoff longer than the budget fails without waiting.
    let seed = (0..)
        .find(|&seed| fastrand::Rng::with_seed(seed).f64() > 0.01)
        .unwrap();
    let mut h = Harness::new(published(2), READ).timeout(ms(100));
    h.seed = seed;
    let run = h.run(vec![Fail(overload_with_base(ms(10_000)))]);
    let error = run.result.unwrap_err();
    assert!(matches!(error.kind(), ErrorKind::Timeout { .. }), "{error}");
    assert!(run.plans.is_empty());
}

#[test]
fn published_mode_retries_a_read_overload_error_without_retryable_label() {
    let err = network().with_labels([SYSTEM_OVERLOADED_ERROR]);
    let run = Harness::new(published(2), READ).run(vec![Fail(err), Success]);
    assert_eq!(run.attempts, 2);
    assert!(run.plans[0].overload);
}

#[test]
fn published_mode_retargets_only_when_enabled() {
    let host1 = ServerAddress::tcp("host1", 27017);
    let run = Harness::new(published(2), READ).run(vec![Fail(overload()), Success]);
    assert!(run.avoided[1].is_empty());
    let run =
        Harness::new(RetrySettings::published(2, true), READ).run(vec![Fail(overload()), Success]);
    assert_eq!(run.avoided[1], vec![host1]);
}

#[test]
fn published_mode_can_use_the_bucket() {
    let settings = published(2).with_token_bucket(true);
    let run = Harness::new(settings, READ).run(vec![Fail(overload()), Success]);
    assert_eq!(run.balances, vec![tokens(999, 0), tokens(1000, 0)]);
}

// ---------------------------------------------------------------- commands, log

#[test]
fn retryable_read_commands() {
    assert!(is_retryable_read_command(&doc! {"find": "c", "filter": {}}));
    assert!(is_retryable_read_command(&doc! {"listCollections": 1}));
    assert!(is_retryable_read_command(
        &doc! {"aggregate": "c", "pipeline": [{"$match": {}}]}
    ));
    assert!(!is_retryable_read_command(
        &doc! {"aggregate": "c", "pipeline": [{"$match": {}}, {"$out": "o"}]}
    ));
    assert!(!is_retryable_read_command(
        &doc! {"aggregate": 1, "pipeline": [{"$merge": {"into": "o"}}]}
    ));
    assert!(!is_retryable_read_command(
        &doc! {"getMore": 5_i64, "collection": "c"}
    ));
    assert!(!is_retryable_read_command(&doc! {"mapReduce": "c"}));
    assert!(!is_retryable_read_command(&doc! {}));
}

#[test]
fn retryable_write_commands() {
    let one = doc! {"q": {}, "u": {"$set": {"a": 1}}};
    let many = doc! {"q": {}, "u": {"$set": {"a": 1}}, "multi": true};
    assert!(is_retryable_write_command("insert", []));
    assert!(is_retryable_write_command("findAndModify", []));
    assert!(is_retryable_write_command("update", [&one]));
    assert!(
        !is_retryable_write_command("update", [&one, &many]),
        "updateMany"
    );
    assert!(is_retryable_write_command(
        "delete",
        [&doc! {"q": {}, "limit": 1}]
    ));
    assert!(
        !is_retryable_write_command("delete", [&doc! {"q": {}, "limit": 0}]),
        "deleteMany"
    );
    assert!(!is_retryable_write_command(
        "delete",
        [&doc! {"q": {}, "limit": 0_i64}]
    ));
    assert!(!is_retryable_write_command(
        "bulkWrite",
        [&doc! {"delete": 0, "filter": {}, "multi": true}]
    ));
    assert!(is_retryable_write_command("commitTransaction", []));
    assert!(!is_retryable_write_command("create", []));
    assert!(!is_retryable_write_command("aggregate", []));
}

#[test]
fn log_line_names_the_command_retry_backoff_and_cause() {
    let settings = RetrySettings::seed().with_overload_retargeting(true);
    let run = Harness::new(settings, READ).run(vec![Fail(overload()), Success]);
    let line = run.plans[0].log_message("find");
    assert!(line.starts_with("retrying find (retry 1) after "), "{line}");
    assert!(line.contains("overload backoff"), "{line}");
    assert!(line.contains("avoiding host1:27017"), "{line}");
    assert!(line.contains("999.0 retry tokens left"), "{line}");
    assert!(line.contains("IngressRequestRateLimitExceeded"), "{line}");
    assert_eq!(LOG_TARGET, "mongo_inline::retry");
}

// ---------------------------------------------------------------- kind decided without a server

#[test]
fn a_failed_connect_is_retried_and_the_kind_is_confirmed_by_the_server() {
    let mut policy = RetryPolicy::new(RetrySettings::seed());
    let mut rng = fastrand::Rng::with_seed(1);
    let now = Instant::now();
    // Provisionally a retryable write; the connect fails before sending.
    let mut op = OperationRetry::new(policy.settings(), WRITE, Deadline::NONE);
    let unsent = FailedAttempt::no_server(RS);
    let decision = op.on_error(&mut policy, network(), &unsent, now, &mut rng);
    assert!(matches!(decision, RetryDecision::Retry(_)), "{decision:?}");
    // The server reached turns out not to support retryable writes: a
    // network error after sending is final.
    op.confirm_kind(policy.settings(), OperationKind::OtherWrite);
    assert_eq!(op.kind(), OperationKind::OtherWrite);
    let server = ServerAddress::tcp("host1", 27017);
    let sent = FailedAttempt::sent_to(&server, RS, WIRE_NEW);
    let decision = op.on_error(&mut policy, network(), &sent, now, &mut rng);
    assert!(matches!(decision, RetryDecision::GiveUp(_)), "{decision:?}");
    // Once a command reached a server, the kind is final.
    op.confirm_kind(policy.settings(), WRITE);
    assert_eq!(op.kind(), OperationKind::OtherWrite);
}

#[test]
fn commit_and_abort_are_retried_once_even_with_retry_writes_off() {
    let settings = RetrySettings::seed().with_retry_writes(false);
    let mut policy = RetryPolicy::new(settings.clone());
    let mut rng = fastrand::Rng::with_seed(7);
    let now = Instant::now();
    let server = ServerAddress::tcp("a", 1);
    let attempt = FailedAttempt::sent_to(&server, RS, WIRE_NEW);
    let mut end = OperationRetry::end_transaction(&settings, Deadline::NONE);
    match end.on_error(&mut policy, network(), &attempt, now, &mut rng) {
        RetryDecision::Retry(plan) => assert_eq!(plan.retry, 1),
        RetryDecision::GiveUp(error) => panic!("not retried: {error}"),
    }
    match end.on_error(&mut policy, network(), &attempt, now, &mut rng) {
        RetryDecision::GiveUp(error) => assert!(error.contains_label(RETRYABLE_WRITE_ERROR)),
        RetryDecision::Retry(_) => panic!("retried twice"),
    }
    // An ordinary write under the same settings is not retried.
    let mut write = OperationRetry::new(&settings, WRITE, Deadline::NONE);
    assert!(matches!(
        write.on_error(&mut policy, network(), &attempt, now, &mut rng),
        RetryDecision::GiveUp(_)
    ));
}
