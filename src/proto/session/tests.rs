//! Tests of [`SessionState`]: command decoration in each state, replies and
//! errors, options.

use std::time::{Duration, Instant};

use bson::{doc, Bson, Document, Timestamp};

use super::cluster_time::cluster_time_doc;
use super::transaction::{TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};
use super::*;
use crate::proto::address::ServerAddress;
use crate::proto::concern::Acknowledgment;
use crate::proto::read_preference::ReadPreferenceMode;

const WIRE: i32 = 21;

fn ts(time: u32, increment: u32) -> Timestamp {
    Timestamp { time, increment }
}

/// The process the tests' sessions run in.
const PID: u32 = 1;

fn server_session(t0: Instant) -> ServerSession {
    ServerSession::new(doc! {"id": "lsid-1"}, t0)
}

fn explicit(t0: Instant) -> SessionState {
    SessionState::explicit(SessionOptions::default(), server_session(t0), PID).unwrap()
}

fn ctx() -> CommandContext<'static> {
    CommandContext {
        max_wire_version: WIRE,
        accepts_read_concern: true,
        accepts_write_concern: true,
        ..Default::default()
    }
}

fn decorated(s: &mut SessionState, command: Document, ctx: &CommandContext<'_>) -> Document {
    let mut command = command;
    s.decorate(&mut command, ctx, Instant::now()).unwrap();
    command
}

fn majority() -> WriteConcern {
    WriteConcern {
        w: Some(Acknowledgment::Majority),
        ..Default::default()
    }
}

fn level(l: &str) -> ReadConcern {
    ReadConcern::custom(l)
}

fn start(s: &mut SessionState, options: TransactionOptions) {
    s.begin_operation(&OperationInfo::default()).unwrap();
    s.start_transaction(Some(&options), &TransactionOptions::default())
        .unwrap();
}

#[test]
fn causal_consistency_defaults() {
    let t0 = Instant::now();
    assert!(explicit(t0).is_causally_consistent());
    let snapshot = SessionOptions {
        snapshot: Some(true),
        ..Default::default()
    };
    let s = SessionState::explicit(snapshot, server_session(t0), PID).unwrap();
    assert!(!s.is_causally_consistent());
    let off = SessionOptions {
        causal_consistency: Some(false),
        ..Default::default()
    };
    assert!(!SessionState::explicit(off, server_session(t0), PID)
        .unwrap()
        .is_causally_consistent());
    assert!(!SessionState::implicit(server_session(t0), PID).is_causally_consistent());
    let both = SessionOptions {
        causal_consistency: Some(true),
        snapshot: Some(true),
        ..Default::default()
    };
    let e = SessionState::explicit(both, server_session(t0), PID).unwrap_err();
    assert!(e.to_string().contains("causalConsistency and snapshot"));
}

#[test]
fn session_support_depends_on_logical_session_timeout() {
    assert!(session_supported(SessionKind::Explicit, Some(30)).unwrap());
    assert!(!session_supported(SessionKind::Implicit, None).unwrap());
    assert!(session_supported(SessionKind::Explicit, None).is_err());
}

#[test]
fn plain_command_gets_lsid_and_updates_last_use() {
    let t0 = Instant::now();
    let mut s = explicit(t0);
    let mut cmd = doc! {"find": "c"};
    let later = t0 + Duration::from_secs(5);
    s.decorate(&mut cmd, &ctx(), later).unwrap();
    assert_eq!(cmd, doc! {"find": "c", "lsid": {"id": "lsid-1"}});
    assert_eq!(s.server_session().unwrap().last_use, later);
}

#[test]
fn a_command_that_takes_no_write_concern_gets_none_from_the_defaults() {
    let mut s = explicit(Instant::now());
    let wc = majority();
    let read = CommandContext {
        accepts_write_concern: false,
        write_concern: Some(&wc),
        ..ctx()
    };
    let find = decorated(&mut s, doc! {"find": "c"}, &read);
    assert!(!find.contains_key("writeConcern"), "{find}");
    let write = CommandContext {
        accepts_write_concern: true,
        ..read
    };
    let insert = decorated(&mut s, doc! {"insert": "c"}, &write);
    assert_eq!(
        insert.get_document("writeConcern").unwrap(),
        &doc! {"w": "majority"}
    );
}

#[test]
fn retryable_write_carries_the_txn_number_of_the_operation() {
    let t0 = Instant::now();
    let mut s = explicit(t0);
    assert_eq!(s.next_retryable_write_txn_number().unwrap(), 1);
    let ctx = CommandContext {
        retryable_write: true,
        write_concern: Some(&WriteConcern {
            w: Some(Acknowledgment::Nodes(1)),
            ..Default::default()
        }),
        ..ctx()
    };
    let first = decorated(&mut s, doc! {"insert": "c"}, &ctx);
    let retry = decorated(&mut s, doc! {"insert": "c"}, &ctx);
    assert_eq!(first.get_i64("txnNumber").unwrap(), 1);
    assert_eq!(retry.get_i64("txnNumber").unwrap(), 1, "a retry reuses it");
    assert_eq!(
        first.get_document("writeConcern").unwrap(),
        &doc! {"w": 1_i64}
    );
    assert_eq!(s.next_retryable_write_txn_number().unwrap(), 2);
}

#[test]
fn implicit_unacknowledged_writes_carry_no_lsid() {
    let t0 = Instant::now();
    let mut s = SessionState::implicit(server_session(t0), PID);
    let w0 = WriteConcern {
        w: Some(Acknowledgment::Nodes(0)),
        ..Default::default()
    };
    let ctx = CommandContext {
        write_concern: Some(&w0),
        ..ctx()
    };
    let cmd = decorated(&mut s, doc! {"insert": "c"}, &ctx);
    assert!(!cmd.contains_key("lsid"));
    assert_eq!(
        cmd.get_document("writeConcern").unwrap(),
        &doc! {"w": 0_i64}
    );
}

#[test]
fn explicit_sessions_refuse_unacknowledged_writes() {
    let mut s = explicit(Instant::now());
    let op = OperationInfo {
        unacknowledged: true,
        ..Default::default()
    };
    assert!(s.begin_operation(&op).is_err());
}

#[test]
fn causally_consistent_reads_and_writes_carry_after_cluster_time() {
    let t0 = Instant::now();
    let mut s = explicit(t0);
    let mut clock = ClusterClock::new();
    let first = decorated(&mut s, doc! {"find": "c"}, &ctx());
    assert!(!first.contains_key("readConcern"), "no operation time yet");

    s.on_reply(&doc! {"ok": 1, "operationTime": ts(10, 1)}, &mut clock);
    let read = decorated(&mut s, doc! {"find": "c"}, &ctx());
    assert_eq!(
        read.get_document("readConcern").unwrap(),
        &doc! {"afterClusterTime": ts(10, 1)}
    );
    let majority_rc = level("majority");
    let with_level = CommandContext {
        read_concern: Some(&majority_rc),
        ..ctx()
    };
    let read = decorated(&mut s, doc! {"aggregate": "c"}, &with_level);
    assert_eq!(
        read.get_document("readConcern").unwrap(),
        &doc! {"level": "majority", "afterClusterTime": ts(10, 1)}
    );
    let write = decorated(&mut s, doc! {"insert": "c"}, &ctx());
    assert!(write.get_document("readConcern").is_ok(), "writes too");
    let run_command = CommandContext {
        accepts_read_concern: false,
        ..ctx()
    };
    let generic = decorated(&mut s, doc! {"ping": 1}, &run_command);
    assert!(!generic.contains_key("readConcern"));
}

#[test]
fn sessions_without_causal_consistency_send_only_the_level() {
    let t0 = Instant::now();
    let mut s = SessionState::implicit(server_session(t0), PID);
    let mut clock = ClusterClock::new();
    s.on_reply(&doc! {"ok": 1, "operationTime": ts(10, 1)}, &mut clock);
    assert_eq!(s.operation_time(), Some(ts(10, 1)), "tracked anyway");
    assert!(!decorated(&mut s, doc! {"find": "c"}, &ctx()).contains_key("readConcern"));
    let local = level("local");
    let ctx = CommandContext {
        read_concern: Some(&local),
        ..ctx()
    };
    assert_eq!(
        decorated(&mut s, doc! {"find": "c"}, &ctx)
            .get_document("readConcern")
            .unwrap(),
        &doc! {"level": "local"}
    );
}

#[test]
fn operation_time_only_moves_forward_even_from_error_replies() {
    let mut s = explicit(Instant::now());
    let mut clock = ClusterClock::new();
    s.on_reply(&doc! {"ok": 0, "operationTime": ts(5, 5)}, &mut clock);
    s.on_reply(&doc! {"ok": 1, "operationTime": ts(5, 4)}, &mut clock);
    assert_eq!(s.operation_time(), Some(ts(5, 5)));
    assert!(!s.advance_operation_time(ts(4, 9)));
    assert!(s.advance_operation_time(ts(6, 0)));
    assert_eq!(s.operation_time(), Some(ts(6, 0)));
}

#[test]
fn replies_advance_both_cluster_times_and_commands_send_the_greater() {
    let mut s = explicit(Instant::now());
    let mut clock = ClusterClock::new();
    s.on_reply(
        &doc! {"ok": 1, "$clusterTime": cluster_time_doc(7, 1)},
        &mut clock,
    );
    assert_eq!(s.cluster_time().unwrap().timestamp(), ts(7, 1));
    assert_eq!(clock.current().unwrap().timestamp(), ts(7, 1));

    // advanceClusterTime moves the session only.
    let later = ClusterTime::from_document(&cluster_time_doc(9, 0)).unwrap();
    assert!(s.advance_cluster_time(&later));
    assert!(!s.advance_cluster_time(&ClusterTime::from_document(&cluster_time_doc(8, 5)).unwrap()));
    assert_eq!(clock.current().unwrap().timestamp(), ts(7, 1));
    let c = CommandContext {
        client_cluster_time: clock.current(),
        ..ctx()
    };
    let cmd = decorated(&mut s, doc! {"find": "c"}, &c);
    assert_eq!(
        cmd.get_document("$clusterTime").unwrap(),
        &cluster_time_doc(9, 0)
    );

    // The client's may be the greater one.
    clock.advance(&cluster_time_doc(12, 0));
    let c = CommandContext {
        client_cluster_time: clock.current(),
        ..ctx()
    };
    let cmd = decorated(&mut s, doc! {"find": "c"}, &c);
    assert_eq!(
        cmd.get_document("$clusterTime").unwrap(),
        &cluster_time_doc(12, 0)
    );

    let old_server = CommandContext {
        max_wire_version: 5,
        client_cluster_time: clock.current(),
        ..ctx()
    };
    assert!(!decorated(&mut s, doc! {"find": "c"}, &old_server).contains_key("$clusterTime"));
}

#[test]
fn network_errors_make_the_session_dirty_for_good() {
    let mut s = explicit(Instant::now());
    let mut e = Error::network_message(None, "reset");
    s.on_error(&mut e, FailedCommand::named("find"));
    assert!(s.server_session().unwrap().dirty);
    assert_eq!(e.labels().len(), 0, "no transaction, no label");
    s.on_reply(&doc! {"ok": 1}, &mut ClusterClock::new());
    assert!(s.server_session().unwrap().dirty);

    let mut s = explicit(Instant::now());
    let mut e = Error::client("nope");
    s.on_error(&mut e, FailedCommand::named("find"));
    assert!(!s.server_session().unwrap().dirty);
}

#[test]
fn start_transaction_advances_the_txn_number_each_time() {
    let mut s = explicit(Instant::now());
    start(&mut s, TransactionOptions::default());
    assert_eq!(s.server_session().unwrap().txn_number, 1);
    assert_eq!(s.transaction().state(), TransactionState::Starting);
    // Empty transaction: nothing sent, yet the next uses a new number.
    assert_eq!(s.commit_transaction().unwrap(), None);
    start(&mut s, TransactionOptions::default());
    assert_eq!(s.server_session().unwrap().txn_number, 2);
    let cmd = decorated(&mut s, doc! {"insert": "c"}, &ctx());
    assert_eq!(cmd.get_i64("txnNumber").unwrap(), 2);
}

#[test]
fn start_transaction_errors_leave_the_session_unchanged() {
    let mut s = explicit(Instant::now());
    start(&mut s, TransactionOptions::default());
    let e = s
        .start_transaction(None, &TransactionOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("Transaction already in progress"));
    assert_eq!(s.server_session().unwrap().txn_number, 1);

    let snapshot = SessionOptions {
        snapshot: Some(true),
        ..Default::default()
    };
    let mut s = SessionState::explicit(snapshot, server_session(Instant::now()), PID).unwrap();
    let e = s
        .start_transaction(None, &TransactionOptions::default())
        .unwrap_err();
    assert!(e
        .to_string()
        .contains("Transactions are not supported in snapshot sessions"));
    assert_eq!(s.transaction().state(), TransactionState::None);
}

#[test]
fn transaction_commands_first_then_later_then_commit() {
    let mut s = explicit(Instant::now());
    let mut clock = ClusterClock::new();
    s.on_reply(&doc! {"ok": 1, "operationTime": ts(42, 1)}, &mut clock);
    start(
        &mut s,
        TransactionOptions {
            read_concern: Some(level("snapshot")),
            write_concern: Some(majority()),
            ..Default::default()
        },
    );
    let op_rc = level("local");
    let op_wc = WriteConcern {
        w: Some(Acknowledgment::Nodes(1)),
        ..Default::default()
    };
    let c = CommandContext {
        read_concern: Some(&op_rc),
        write_concern: Some(&op_wc),
        retryable_write: true,
        ..ctx()
    };
    let first = decorated(&mut s, doc! {"insert": "c"}, &c);
    assert_eq!(
        first,
        doc! {
            "insert": "c",
            "lsid": {"id": "lsid-1"},
            "txnNumber": 1_i64,
            "startTransaction": true,
            "autocommit": false,
            "readConcern": {"level": "snapshot", "afterClusterTime": ts(42, 1)},
        }
    );
    assert_eq!(s.transaction().state(), TransactionState::InProgress);
    s.on_reply(&doc! {"ok": 1, "operationTime": ts(43, 1)}, &mut clock);

    let second = decorated(&mut s, doc! {"find": "c"}, &c);
    assert_eq!(
        second,
        doc! {"find": "c", "lsid": {"id": "lsid-1"}, "txnNumber": 1_i64, "autocommit": false}
    );

    let body = s.commit_transaction().unwrap().unwrap();
    let commit = decorated(&mut s, body, &ctx());
    assert_eq!(
        commit,
        doc! {
            "commitTransaction": 1,
            "writeConcern": {"w": "majority"},
            "lsid": {"id": "lsid-1"},
            "txnNumber": 1_i64,
            "autocommit": false,
        }
    );
    // A second commit is a retry with the upgraded write concern.
    let body = s.commit_transaction().unwrap().unwrap();
    let again = decorated(&mut s, body, &ctx());
    assert_eq!(
        again.get_document("writeConcern").unwrap(),
        &doc! {"w": "majority", "wtimeout": 10_000_i64}
    );
    assert_eq!(again.get_i64("txnNumber").unwrap(), 1);
}

#[test]
fn first_command_in_a_causal_session_without_operation_time_has_no_read_concern() {
    let mut s = explicit(Instant::now());
    start(&mut s, TransactionOptions::default());
    let first = decorated(&mut s, doc! {"insert": "c"}, &ctx());
    assert!(!first.contains_key("readConcern"));
    assert!(first.get_bool("startTransaction").unwrap());
}

#[test]
fn runcommand_starting_a_transaction_gets_after_cluster_time() {
    let mut s = explicit(Instant::now());
    s.advance_operation_time(ts(3, 3));
    start(&mut s, TransactionOptions::default());
    let c = CommandContext {
        accepts_read_concern: false,
        ..ctx()
    };
    let first = decorated(&mut s, doc! {"count": "c"}, &c);
    assert_eq!(
        first.get_document("readConcern").unwrap(),
        &doc! {"afterClusterTime": ts(3, 3)}
    );
}

#[test]
fn abort_command_is_decorated_like_commit() {
    let mut s = explicit(Instant::now());
    start(&mut s, TransactionOptions::default());
    decorated(&mut s, doc! {"insert": "c"}, &ctx());
    let abort = s.abort_transaction().unwrap().unwrap();
    let cmd = decorated(&mut s, abort.body, &ctx());
    assert_eq!(
        cmd,
        doc! {"abortTransaction": 1, "lsid": {"id": "lsid-1"}, "txnNumber": 1_i64, "autocommit": false}
    );
    assert_eq!(s.transaction().state(), TransactionState::Aborted);
}

#[test]
fn the_next_operation_after_a_transaction_is_not_in_it() {
    let mut s = explicit(Instant::now());
    start(&mut s, TransactionOptions::default());
    decorated(&mut s, doc! {"insert": "c"}, &ctx());
    s.transaction_mut().pin(Pin {
        address: ServerAddress::tcp("mongos", 27017),
        connection: None,
    });
    s.commit_transaction().unwrap();
    let plan = s.begin_operation(&OperationInfo::default()).unwrap();
    assert!(!plan.in_transaction);
    assert_eq!(plan.pinned, None);
    assert_eq!(s.transaction().state(), TransactionState::None);
    let cmd = decorated(&mut s, doc! {"insert": "c"}, &ctx());
    assert!(!cmd.contains_key("txnNumber"));
    assert!(!cmd.contains_key("autocommit"));
    assert!(!cmd.contains_key("startTransaction"));
    assert!(s.commit_transaction().is_err());
}

#[test]
fn operations_in_a_transaction_are_validated_without_changing_state() {
    let mut s = explicit(Instant::now());
    let secondary = ReadPreference::with_mode(ReadPreferenceMode::Secondary);
    start(
        &mut s,
        TransactionOptions {
            selection_criteria: Some(ReadPreference::primary().into()),
            ..Default::default()
        },
    );
    let pin = Pin {
        address: ServerAddress::tcp("mongos", 27017),
        connection: Some(3),
    };
    s.transaction_mut().pin(pin.clone());
    let cases = [
        (
            OperationInfo {
                read_concern_set: true,
                ..Default::default()
            },
            "Cannot set read concern after starting a transaction.",
        ),
        (
            OperationInfo {
                write_concern_set: true,
                ..Default::default()
            },
            "Cannot set write concern after starting a transaction.",
        ),
        (
            OperationInfo {
                is_read: true,
                read_preference: Some(&secondary),
                ..Default::default()
            },
            "read preference in a transaction must be primary",
        ),
    ];
    for (op, message) in cases {
        let e = s.begin_operation(&op).unwrap_err();
        assert!(e.to_string().contains(message), "{e}");
        assert_eq!(s.transaction().state(), TransactionState::Starting);
    }
    // A write with a secondary read preference is not checked.
    let write = OperationInfo {
        read_preference: Some(&secondary),
        ..Default::default()
    };
    assert!(s.begin_operation(&write).is_ok());
    let plan = s
        .begin_operation(&OperationInfo {
            is_read: true,
            ..Default::default()
        })
        .unwrap();
    assert!(plan.in_transaction);
    assert_eq!(plan.pinned, Some(pin));
    assert_eq!(plan.read_preference, Some(ReadPreference::primary()));
}

#[test]
fn undoing_the_first_command_restarts_the_transaction() {
    let mut s = explicit(Instant::now());
    start(&mut s, TransactionOptions::default());
    decorated(&mut s, doc! {"insert": "c"}, &ctx());
    s.transaction_mut().undo_first_command();
    let again = decorated(&mut s, doc! {"insert": "c"}, &ctx());
    assert!(again.get_bool("startTransaction").unwrap());
}

#[test]
fn errors_in_transactions_get_labels_through_the_session() {
    let mut s = explicit(Instant::now());
    start(&mut s, TransactionOptions::default());
    decorated(&mut s, doc! {"insert": "c"}, &ctx());
    let mut e = Error::network_message(None, "reset");
    s.on_error(&mut e, FailedCommand::named("insert"));
    assert!(e.contains_label(TRANSIENT_TRANSACTION_ERROR));
    assert!(s.server_session().unwrap().dirty);

    s.commit_transaction().unwrap();
    let mut e = Error::network_message(None, "reset");
    s.on_error(&mut e, FailedCommand::named("commitTransaction"));
    assert!(e.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT));
    assert!(!e.contains_label(TRANSIENT_TRANSACTION_ERROR));
}

#[test]
fn recovery_token_from_replies_reaches_commit() {
    let mut s = explicit(Instant::now());
    let mut clock = ClusterClock::new();
    start(&mut s, TransactionOptions::default());
    decorated(&mut s, doc! {"insert": "c"}, &ctx());
    s.on_reply(&doc! {"ok": 1, "recoveryToken": {"t": 1}}, &mut clock);
    let body = s.commit_transaction().unwrap().unwrap();
    assert_eq!(body.get_document("recoveryToken").unwrap(), &doc! {"t": 1});
}

#[test]
fn snapshot_reads_fix_their_time_from_the_first_reply() {
    let snapshot = SessionOptions {
        snapshot: Some(true),
        ..Default::default()
    };
    let mut s = SessionState::explicit(snapshot, server_session(Instant::now()), PID).unwrap();
    let mut clock = ClusterClock::new();
    let first = decorated(&mut s, doc! {"find": "c"}, &ctx());
    assert_eq!(
        first.get_document("readConcern").unwrap(),
        &doc! {"level": "snapshot"}
    );
    s.on_reply(
        &doc! {"ok": 1, "operationTime": ts(1, 1), "cursor": {"id": 0_i64, "atClusterTime": ts(20, 2)}},
        &mut clock,
    );
    s.on_reply(&doc! {"ok": 1, "atClusterTime": ts(30, 0)}, &mut clock);
    assert_eq!(s.snapshot_time(), Some(ts(20, 2)), "the first one sticks");
    let later = decorated(&mut s, doc! {"distinct": "c"}, &ctx());
    assert_eq!(
        later.get_document("readConcern").unwrap(),
        &doc! {"level": "snapshot", "atClusterTime": ts(20, 2)}
    );

    let snapshot = SessionOptions {
        snapshot: Some(true),
        ..Default::default()
    };
    let mut s = SessionState::explicit(snapshot, server_session(Instant::now()), PID).unwrap();
    s.on_reply(
        &doc! {"ok": 1, "values": [], "atClusterTime": ts(30, 0)},
        &mut clock,
    );
    assert_eq!(
        s.snapshot_time(),
        Some(ts(30, 0)),
        "distinct reports it at top level"
    );
}

#[test]
fn snapshot_reads_need_mongodb_5() {
    let snapshot = SessionOptions {
        snapshot: Some(true),
        ..Default::default()
    };
    let mut s = SessionState::explicit(snapshot, server_session(Instant::now()), PID).unwrap();
    let c = CommandContext {
        max_wire_version: 12,
        ..ctx()
    };
    let mut cmd = doc! {"find": "c"};
    let e = s.decorate(&mut cmd, &c, Instant::now()).unwrap_err();
    assert!(e
        .to_string()
        .contains("Snapshot reads require MongoDB 5.0 or later"));
    assert_eq!(cmd, doc! {"find": "c"}, "untouched");
}

#[test]
fn ended_sessions_refuse_everything_and_end_is_idempotent() {
    let t0 = Instant::now();
    let mut s = explicit(t0);
    let returned = s.end(PID).unwrap();
    assert_eq!(returned.id(), &doc! {"id": "lsid-1"});
    assert!(s.end(PID).is_none());
    assert!(s.is_ended());
    let mut cmd = doc! {"find": "c"};
    assert!(s.decorate(&mut cmd, &ctx(), t0).is_err());
    assert!(s.begin_operation(&OperationInfo::default()).is_err());
    assert!(s
        .start_transaction(None, &TransactionOptions::default())
        .is_err());
    assert!(s.commit_transaction().is_err());
    assert!(s.abort_transaction().is_err());
    assert!(s.next_retryable_write_txn_number().is_err());
}

#[test]
fn default_transaction_options_apply() {
    let options = SessionOptions {
        default_transaction_options: Some(TransactionOptions {
            write_concern: Some(majority()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut s = SessionState::explicit(options, server_session(Instant::now()), PID).unwrap();
    s.start_transaction(None, &TransactionOptions::default())
        .unwrap();
    decorated(&mut s, doc! {"insert": "c"}, &ctx());
    let body = s.commit_transaction().unwrap().unwrap();
    assert_eq!(
        body.get("writeConcern"),
        Some(&Bson::Document(doc! {"w": "majority"}))
    );
}

fn snapshot_session(snapshot_time: Option<Timestamp>) -> SessionState {
    let options = SessionOptions {
        snapshot: Some(true),
        snapshot_time,
        ..Default::default()
    };
    SessionState::explicit(options, server_session(Instant::now()), PID).unwrap()
}

#[test]
fn snapshot_sessions_send_their_read_concern_on_all_commands_but_cursor_follow_ups() {
    let mut s = snapshot_session(None);
    let generic = CommandContext {
        accepts_read_concern: false,
        ..ctx()
    };
    for command in [doc! {"insert": "c"}, doc! {"listCollections": 1}] {
        let cmd = decorated(&mut s, command, &generic);
        assert_eq!(
            cmd.get_document("readConcern").unwrap(),
            &doc! {"level": "snapshot"}
        );
    }
    let get_more = decorated(&mut s, doc! {"getMore": 5_i64, "collection": "c"}, &generic);
    assert!(!get_more.contains_key("readConcern"));
    let kill = decorated(
        &mut s,
        doc! {"killCursors": "c", "cursors": [5_i64]},
        &generic,
    );
    assert!(!kill.contains_key("readConcern"));
}

#[test]
fn a_given_snapshot_time_is_used_from_the_first_read() {
    let mut s = snapshot_session(Some(ts(50, 1)));
    let cmd = decorated(&mut s, doc! {"find": "c"}, &ctx());
    assert_eq!(
        cmd.get_document("readConcern").unwrap(),
        &doc! {"level": "snapshot", "atClusterTime": ts(50, 1)}
    );
    s.on_reply(
        &doc! {"ok": 1, "cursor": {"id": 0_i64, "atClusterTime": ts(60, 0)}},
        &mut ClusterClock::new(),
    );
    assert_eq!(s.snapshot_time(), Some(ts(50, 1)));

    let options = SessionOptions {
        snapshot_time: Some(ts(50, 1)),
        ..Default::default()
    };
    let e = SessionState::explicit(options, server_session(Instant::now()), PID).unwrap_err();
    assert!(e.to_string().contains("snapshotTime"));
}

#[test]
fn a_snapshot_read_takes_its_time_from_a_cursor_kept_as_bytes() {
    let snapshot = SessionOptions {
        snapshot: Some(true),
        ..Default::default()
    };
    let mut s = SessionState::explicit(snapshot, server_session(Instant::now()), PID).unwrap();
    let mut clock = ClusterClock::new();
    let reply = doc! {
        "cursor": {"firstBatch": [{"a": 1}], "id": 0_i64, "ns": "d.c", "atClusterTime": ts(20, 2)},
        "ok": 1,
        "atClusterTime": ts(30, 0),
    };
    let bytes = bson::to_vec(&reply).unwrap();
    let len = bytes.len();
    let reply = crate::proto::reply::Reply::parse(bytes, 0..len).unwrap();
    assert!(
        reply.document().get("cursor").is_none(),
        "the cursor is kept as bytes"
    );
    s.on_raw_cursor(reply.raw_cursor());
    s.on_reply(reply.document(), &mut clock);
    assert_eq!(
        s.snapshot_time(),
        Some(ts(20, 2)),
        "the cursor's time comes before the reply's own"
    );
}
