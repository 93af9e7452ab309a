//! The one path that finishes a command, checked without sockets.

use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};

use super::*;
use crate::proto::options::{ReadConcern, ServerApi, WriteConcern};
use crate::proto::session::cluster_time::{cluster_time_doc, ClusterTime};
use crate::proto::session::pool::ServerSession;
use crate::proto::session::transaction::TransactionOptions;
use crate::proto::session::{OperationInfo, SessionOptions, SessionState};
use crate::proto::wire::DocumentSequence;

const WIRE: i32 = 21;

struct Fixture {
    now: Instant,
    read_concern: ReadConcern,
    write_concern: WriteConcern,
    api: ServerApi,
    cluster_time: ClusterTime,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            now: Instant::now(),
            read_concern: ReadConcern::majority(),
            write_concern: WriteConcern::majority(),
            api: ServerApi {
                version: crate::proto::options::ServerApiVersion::V1,
                strict: Some(true),
                deprecation_errors: None,
            },
            cluster_time: ClusterTime::from_document(&cluster_time_doc(5, 1))
                .expect("a cluster time"),
        }
    }

    fn ctx(&self) -> AttemptContext<'_> {
        AttemptContext {
            max_wire_version: WIRE,
            min_round_trip_time: Duration::from_millis(10),
            read_concern: Some(&self.read_concern),
            write_concern: Some(&self.write_concern),
            retryable_write: false,
            read_preference: Some(doc! { "mode": "secondaryPreferred" }),
            server_api: Some(&self.api),
            cluster_time: Some(&self.cluster_time),
            deadline: Deadline::NONE,
            omit_max_time: false,
            now: self.now,
            events_wanted: true,
        }
    }
}

fn session(now: Instant) -> SessionState {
    SessionState::explicit(
        SessionOptions::default(),
        ServerSession::new(doc! { "id": "lsid-1" }, now),
        std::process::id(),
    )
    .expect("a session")
}

fn find() -> Command {
    Command::new("find", "db", doc! { "find": "c", "filter": {} })
}

fn without(mut body: Document, keys: &[&str]) -> Document {
    for key in keys {
        body.remove(*key);
    }
    body
}

#[test]
fn a_read_gets_every_field_in_order_and_no_write_concern() {
    let f = Fixture::new();
    let finished = finish(find(), &f.ctx(), None).expect("finished");
    assert_eq!(
        finished.command.to_document(),
        doc! {
            "find": "c", "filter": {},
            "readConcern": { "level": "majority" },
            "$clusterTime": cluster_time_doc(5, 1),
            "$readPreference": { "mode": "secondaryPreferred" },
            "apiVersion": "1", "apiStrict": true,
            "$db": "db",
        }
    );
    assert_eq!(finished.event_name, "find");
    assert!(!finished.unacknowledged());
}

#[test]
fn with_and_without_a_session_differ_only_by_the_session_fields() {
    let f = Fixture::new();
    for command in [
        find,
        || Command::new("insert", "db", doc! { "insert": "c" }),
        || Command::new("count", "db", doc! { "count": "c" }),
        || Command::new("distinct", "db", doc! { "distinct": "c", "key": "a" }),
        || Command::new("runCommand", "db", doc! { "ping": 1 }),
        || {
            Command::new(
                "aggregate",
                "db",
                doc! { "aggregate": "c", "pipeline": [{ "$out": "o" }] },
            )
        },
    ] {
        let plain = finish(command(), &f.ctx(), None)
            .expect("finished")
            .command
            .to_document();
        let mut s = session(f.now);
        let with = finish(command(), &f.ctx(), Some(&mut s))
            .expect("finished")
            .command
            .to_document();
        assert_eq!(
            with.get("lsid"),
            Some(&Bson::Document(doc! { "id": "lsid-1" }))
        );
        assert_eq!(without(with, &["lsid"]), plain);
    }
}

#[test]
fn a_retryable_write_carries_the_sessions_txn_number() {
    let f = Fixture::new();
    let mut s = session(f.now);
    let txn_number = s.next_retryable_write_txn_number().expect("a number");
    let ctx = AttemptContext {
        retryable_write: true,
        ..f.ctx()
    };
    let insert = Command::new("insert", "db", doc! { "insert": "c" });
    let body = finish(insert, &ctx, Some(&mut s))
        .expect("finished")
        .command
        .to_document();
    assert_eq!(body.get_i64("txnNumber"), Ok(txn_number));
    assert_eq!(
        body.get_document("writeConcern"),
        Ok(&doc! { "w": "majority" })
    );
}

#[test]
fn in_a_transaction_the_first_command_starts_it_and_concerns_are_the_sessions() {
    let f = Fixture::new();
    let mut s = session(f.now);
    s.start_transaction(None, &TransactionOptions::default())
        .expect("started");
    s.begin_operation(&OperationInfo::default()).expect("begun");
    let insert = Command::new("insert", "db", doc! { "insert": "c" });
    let body = finish(insert, &f.ctx(), Some(&mut s))
        .expect("finished")
        .command
        .to_document();
    assert_eq!(body.get_bool("startTransaction"), Ok(true));
    assert_eq!(body.get_bool("autocommit"), Ok(false));
    assert!(body.contains_key("txnNumber"));
    // No inherited write concern inside a transaction; only commit has one.
    assert!(!body.contains_key("writeConcern"));
    let second = finish(find(), &f.ctx(), Some(&mut s))
        .expect("finished")
        .command
        .to_document();
    assert!(!second.contains_key("startTransaction"));
    assert!(!second.contains_key("readConcern"));
}

#[test]
fn max_time_ms_comes_from_the_deadline_less_the_round_trip() {
    let f = Fixture::new();
    let ctx = AttemptContext {
        deadline: Deadline::at(f.now + Duration::from_millis(500)),
        ..f.ctx()
    };
    let body = finish(find(), &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert_eq!(body.get_i64("maxTimeMS"), Ok(490));
    let get_more = Command::new(
        "getMore",
        "db",
        doc! { "getMore": 1_i64, "collection": "c" },
    );
    let body = finish(get_more, &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert!(!body.contains_key("maxTimeMS"));
}

#[test]
fn a_tailable_await_get_more_waits_the_smaller_of_its_await_and_the_time_left() {
    let f = Fixture::new();
    let get_more = |max_await: i64| {
        Command::new(
            "getMore",
            "db",
            doc! { "getMore": 1_i64, "collection": "c", "maxTimeMS": max_await },
        )
    };
    let ctx = AttemptContext {
        deadline: Deadline::at(f.now + Duration::from_millis(80)),
        ..f.ctx()
    };
    let waits = |max_await| {
        finish(get_more(max_await), &ctx, None)
            .expect("finished")
            .command
            .to_document()
            .get_i64("maxTimeMS")
    };
    // 80 ms left less the 10 ms round trip: 70.
    assert_eq!(waits(100), Ok(70));
    assert_eq!(waits(5), Ok(5));
    // Without CSOT the cursor's maxAwaitTimeMS goes as it is.
    let legacy = AttemptContext {
        deadline: Deadline::NONE,
        ..f.ctx()
    };
    let sent = finish(get_more(100), &legacy, None)
        .expect("finished")
        .command
        .to_document();
    assert_eq!(sent.get_i64("maxTimeMS"), Ok(100));
}

#[test]
fn an_iteration_cursors_opening_command_has_no_max_time_ms() {
    let f = Fixture::new();
    let ctx = AttemptContext {
        deadline: Deadline::at(f.now + Duration::from_millis(500)),
        omit_max_time: true,
        ..f.ctx()
    };
    let body = finish(find(), &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert!(!body.contains_key("maxTimeMS"), "{body}");
    // The deadline still holds: past it, nothing is sent.
    let late = AttemptContext {
        now: f.now + Duration::from_millis(501),
        ..ctx
    };
    assert!(finish(find(), &late, None).is_err());
}

#[test]
fn under_csot_a_commit_and_an_abort_lose_their_wtimeout() {
    let f = Fixture::new();
    let ctx = AttemptContext {
        deadline: Deadline::UNBOUNDED,
        write_concern: None,
        ..f.ctx()
    };
    for name in ["commitTransaction", "abortTransaction"] {
        let only_wtimeout = doc! { name: 1, "writeConcern": { "wtimeout": 1_i64 } };
        let sent = finish(Command::new(name, "admin", only_wtimeout), &ctx, None)
            .expect("finished")
            .command
            .to_document();
        assert!(!sent.contains_key("writeConcern"), "{sent}");
        let majority = doc! { name: 1, "writeConcern": { "w": "majority", "wtimeout": 1_i64 } };
        let sent = finish(Command::new(name, "admin", majority), &ctx, None)
            .expect("finished")
            .command
            .to_document();
        assert_eq!(
            sent.get_document("writeConcern").unwrap(),
            &doc! { "w": "majority" }
        );
        assert!(
            !sent.contains_key("maxTimeMS"),
            "timeoutMS 0 sets no limit: {sent}"
        );
    }
}

#[test]
fn a_passed_deadline_sends_nothing() {
    let f = Fixture::new();
    let ctx = AttemptContext {
        deadline: Deadline::at(f.now),
        now: f.now + Duration::from_millis(1),
        ..f.ctx()
    };
    let error = finish(find(), &ctx, None).expect_err("expired");
    assert!(
        matches!(error.kind(), crate::error::ErrorKind::Timeout { .. }),
        "{error}"
    );
}

#[test]
fn a_w0_write_goes_with_more_to_come() {
    let f = Fixture::new();
    let insert = Command::new(
        "insert",
        "db",
        doc! { "insert": "c", "writeConcern": { "w": 0 } },
    );
    assert!(finish(insert, &f.ctx(), None)
        .expect("finished")
        .unacknowledged());
}

#[test]
fn the_events_copy_folds_sequences_in_and_is_made_only_when_wanted() {
    let f = Fixture::new();
    let insert = || Command {
        sequences: vec![DocumentSequence {
            identifier: "documents".into(),
            documents: vec![std::sync::Arc::new(
                crate::proto::operation::test_support::raw(&doc! { "_id": 1 }),
            )],
        }],
        ..Command::new("insert", "db", doc! { "insert": "c" })
    };
    let finished = finish(insert(), &f.ctx(), None).expect("finished");
    let copy = finished.event_command.expect("a copy");
    assert_eq!(copy.get_array("documents").map(Vec::len), Ok(1));
    assert!(!finished.command.to_document().contains_key("documents"));

    let unwatched = AttemptContext {
        events_wanted: false,
        ..f.ctx()
    };
    assert!(finish(insert(), &unwatched, None)
        .expect("finished")
        .event_command
        .is_none());
}

#[test]
fn sensitive_commands_are_redacted_in_the_events_copy() {
    let f = Fixture::new();
    let sasl = Command::new(
        "runCommand",
        "admin",
        doc! { "saslStart": 1, "payload": "secret" },
    );
    let finished = finish(sasl, &f.ctx(), None).expect("finished");
    assert!(finished.sensitive);
    assert_eq!(finished.event_name, "saslStart");
    assert_eq!(finished.event_command, Some(Document::new()));
    assert_eq!(
        finished.command.to_document().get_str("payload"),
        Ok("secret")
    );
}

#[test]
fn a_causally_consistent_write_carries_after_cluster_time_but_no_level() {
    let f = Fixture::new();
    let mut s = session(f.now);
    s.on_reply(
        &doc! { "ok": 1, "operationTime": bson::Timestamp { time: 9, increment: 1 } },
        &mut crate::proto::session::cluster_time::ClusterClock::default(),
    );
    let insert = Command::new("insert", "db", doc! { "insert": "c" });
    let body = finish(insert, &f.ctx(), Some(&mut s))
        .expect("finished")
        .command
        .to_document();
    assert_eq!(
        body.get_document("readConcern"),
        Ok(&doc! { "afterClusterTime": bson::Timestamp { time: 9, increment: 1 } })
    );
    // Without a session a write has no readConcern at all.
    let insert = Command::new("insert", "db", doc! { "insert": "c" });
    let plain = finish(insert, &f.ctx(), None)
        .expect("finished")
        .command
        .to_document();
    assert!(!plain.contains_key("readConcern"));
}

#[test]
fn a_commands_own_read_preference_and_the_whole_stable_api_are_kept() {
    let f = Fixture::new();
    let api = ServerApi {
        deprecation_errors: Some(false),
        ..f.api.clone()
    };
    let ctx = AttemptContext {
        server_api: Some(&api),
        ..f.ctx()
    };
    let own = Command::new(
        "runCommand",
        "db",
        doc! { "ping": 1, "$readPreference": { "mode": "nearest" } },
    );
    let body = finish(own, &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert_eq!(
        body.get_document("$readPreference"),
        Ok(&doc! { "mode": "nearest" })
    );
    assert_eq!(body.get_str("apiVersion"), Ok("1"));
    assert_eq!(body.get_bool("apiStrict"), Ok(true));
    assert_eq!(body.get_bool("apiDeprecationErrors"), Ok(false));
}

#[test]
fn no_get_more_or_end_sessions_gets_max_time_ms() {
    let f = Fixture::new();
    let ctx = AttemptContext {
        deadline: Deadline::at(f.now + Duration::from_millis(500)),
        ..f.ctx()
    };
    for (name, body) in [
        ("getMore", doc! { "getMore": 1_i64, "collection": "c" }),
        ("endSessions", doc! { "endSessions": [] }),
    ] {
        let sent = finish(Command::new(name, "db", body), &ctx, None)
            .expect("finished")
            .command
            .to_document();
        assert!(!sent.contains_key("maxTimeMS"), "{name}: {sent}");
    }
    // A cursor's close refreshes the timeout for its killCursors (CSOT):
    // the time left less the minimum round trip.
    let kill = doc! { "killCursors": "c", "cursors": [1_i64] };
    let sent = finish(Command::new("killCursors", "db", kill), &ctx, None)
        .expect("finished")
        .command
        .to_document();
    let rtt = i64::try_from(ctx.min_round_trip_time.as_millis()).unwrap();
    assert_eq!(sent.get_i64("maxTimeMS"), Ok(500 - rtt), "{sent}");
    // A caller's own runCommand keeps the maxTimeMS it wrote.
    let own = Command::new("runCommand", "db", doc! { "find": "c", "maxTimeMS": 7 });
    let sent = finish(own, &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert_eq!(sent.get_i32("maxTimeMS"), Ok(7));
}

#[test]
fn only_a_w0_write_concern_goes_with_more_to_come() {
    let f = Fixture::new();
    let unacknowledged = |command: Command| {
        finish(command, &f.ctx(), None)
            .expect("finished")
            .unacknowledged()
    };
    let w0_long = doc! { "insert": "c", "writeConcern": { "w": 0_i64 } };
    assert!(unacknowledged(Command::new("insert", "db", w0_long)));
    let w1 = doc! { "insert": "c", "writeConcern": { "w": 1 } };
    assert!(!unacknowledged(Command::new("insert", "db", w1)));
    // A caller's command is looked at whatever its name.
    let caller = doc! { "anything": 1, "writeConcern": { "w": 0 } };
    assert!(unacknowledged(Command::new("runCommand", "db", caller)));
    // An operation's own bytes for a command that takes no write concern
    // hold none, whatever a field of that name says.
    let raw = crate::proto::operation::test_support::raw(
        &doc! { "find": "c", "writeConcern": { "w": 0 } },
    );
    assert!(!unacknowledged(Command::new("find", "db", raw)));
}

#[test]
fn under_timeout_ms_an_operations_max_time_and_wtimeout_give_way() {
    let f = Fixture::new();
    let write_concern = WriteConcern {
        w_timeout: Some(Duration::from_millis(1)),
        ..WriteConcern::majority()
    };
    let mut ctx = f.ctx();
    ctx.write_concern = Some(&write_concern);
    ctx.deadline = Deadline::from_timeout(f.now, Some(Duration::from_secs(1)));
    let count = Command::new("count", "db", doc! { "count": "c", "maxTimeMS": 5000_i64 });
    let finished = finish(count, &ctx, None).expect("finished");
    let sent = finished.command.to_document();
    let max_time = sent.get_i64("maxTimeMS").expect("the deadline's maxTimeMS");
    assert!(max_time <= 1000, "{sent}");
    let delete = Command::new("delete", "db", doc! { "delete": "c", "deletes": [] });
    let sent = finish(delete, &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert_eq!(
        sent.get_document("writeConcern"),
        Ok(&doc! { "w": "majority" }),
        "{sent}"
    );

    // Without timeoutMS both are sent as the user set them.
    ctx.deadline = Deadline::NONE;
    let count = Command::new("count", "db", doc! { "count": "c", "maxTimeMS": 5000_i64 });
    let sent = finish(count, &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert_eq!(sent.get_i64("maxTimeMS"), Ok(5000));
    let delete = Command::new("delete", "db", doc! { "delete": "c", "deletes": [] });
    let sent = finish(delete, &ctx, None)
        .expect("finished")
        .command
        .to_document();
    assert_eq!(
        sent.get_document("writeConcern"),
        Ok(&doc! { "w": "majority", "wtimeout": 1_i64 }),
        "{sent}"
    );
}
