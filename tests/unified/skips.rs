//! The skip map: unified tests known to fail here because of a limitation
//! of the test server. Every limitation is checked against the server when
//! the run starts ([`probe`]); a listed failure is excused only while its
//! limitation is confirmed, and the summary still counts it as failed
//! ("failed: server limitation, checked"). A failure not listed, or listed
//! under a limitation the probe no longer finds, fails the run; a listed
//! test that passes is reported so the entry can go.

use bson::{doc, Document};
use mongo_inline::Client;

use crate::support::events::recorded_client;
use crate::unified::runner::Failure;

/// A limitation of SecantusDB that some spec tests run into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServerLimit {
    /// The `onPrimaryTransactionalWrite` fail point is accepted but has no
    /// effect.
    OnPrimaryTransactionalWriteIgnored,
    /// A retried write (same lsid and txnNumber) gets the first reply
    /// replayed, without the `writeConcernError` a failCommand adds.
    RetryRepliesWithoutWriteConcernError,
    /// Snapshot reads at `atClusterTime` see later writes.
    SnapshotReadsSeeLaterWrites,
    /// No sharding commands: the simulated mongoses forward
    /// `shardCollection` to the replica set, which does not know it.
    NoShardCollection,
    /// A retried `bulkWrite` (same lsid and txnNumber) runs again instead of
    /// replaying its first reply.
    BulkWriteRetryRunsAgain,
    /// `bulkWrite` refuses a `readConcern` (which a causally consistent
    /// session adds with its `afterClusterTime`).
    BulkWriteRefusesReadConcern,
    /// No `checkMetadataConsistency` (a sharded cluster's command): the
    /// simulated mongoses forward it to the replica set, which does not
    /// know it.
    NoCheckMetadataConsistency,
    /// `bulkWrite` refuses `rawData`.
    BulkWriteRefusesRawData,
    /// `distinct` refuses `rawData`.
    DistinctRefusesRawData,
    /// `findAndModify` refuses `rawData`.
    FindAndModifyRefusesRawData,
}

impl ServerLimit {
    /// Every limitation, in the order the runner probes them.
    pub const ALL: [ServerLimit; 10] = [
        ServerLimit::BulkWriteRetryRunsAgain,
        ServerLimit::BulkWriteRefusesReadConcern,
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
        ServerLimit::RetryRepliesWithoutWriteConcernError,
        ServerLimit::SnapshotReadsSeeLaterWrites,
        ServerLimit::NoShardCollection,
        ServerLimit::NoCheckMetadataConsistency,
        ServerLimit::BulkWriteRefusesRawData,
        ServerLimit::DistinctRefusesRawData,
        ServerLimit::FindAndModifyRefusesRawData,
    ];

    /// The limitation, and the probe that shows it.
    pub fn describe(self) -> &'static str {
        match self {
            ServerLimit::OnPrimaryTransactionalWriteIgnored => "SecantusDB: the onPrimaryTransactionalWrite fail point has no effect (probe: {onPrimaryTransactionalWrite, mode: {times: 1}, data: {closeConnection: true}}, then a retryable insert is sent once and succeeds)",
            ServerLimit::RetryRepliesWithoutWriteConcernError => "SecantusDB: a retried write replays the first reply without the failCommand writeConcernError (probe: failCommand {times: 2, failCommands: [insert], writeConcernError: {code: 91}, errorLabels: [RetryableWriteError]}, then a retryable insert succeeds on its retry)",
            ServerLimit::BulkWriteRetryRunsAgain => "SecantusDB: a retried bulkWrite command (same lsid and txnNumber) runs again instead of replaying its first reply (probe: bulkWrite inserting {_id: 91} twice with txnNumber 9 in one session: the second reply has a duplicate key error; insert with the same lsid and txnNumber replays n: 1)",
            ServerLimit::BulkWriteRefusesReadConcern => "SecantusDB: bulkWrite refuses a readConcern field (probe: {bulkWrite: 1, ops: [{insert: 0, document: {}}], nsInfo: [..], readConcern: {level: \"local\"}} answers IDLUnknownField, 40415)",
            ServerLimit::SnapshotReadsSeeLaterWrites => "SecantusDB: snapshot reads at atClusterTime see later writes (probe: a snapshot session's second find returns a value written after its first)",
            ServerLimit::BulkWriteRefusesRawData => "SecantusDB 8.2 refuses bulkWrite's rawData (probe: {bulkWrite: 1, ops: [{insert: 0, document: {}}], nsInfo: [..], rawData: true} answers IDLUnknownField, 40415)",
            ServerLimit::DistinctRefusesRawData => "SecantusDB 8.2 refuses distinct's rawData (probe: {distinct: <coll>, key: \"_id\", rawData: true} answers IDLUnknownField, 40415)",
            ServerLimit::FindAndModifyRefusesRawData => "SecantusDB 8.2 refuses findAndModify's rawData (probe: {findAndModify: <coll>, query: {}, remove: true, rawData: true} answers IDLUnknownField, 40415)",
            ServerLimit::NoCheckMetadataConsistency => "SecantusDB has no sharding, and the sharded deployment is simulated mongoses in front of it: checkMetadataConsistency fails (probe: {checkMetadataConsistency: 1} on admin answers CommandNotFound, 59)",
            ServerLimit::NoShardCollection => "SecantusDB has no sharding, and the sharded deployment is simulated mongoses in front of it: shardCollection fails (probe: {shardCollection: \"unified_probes.sharded\", key: {_id: 1}} answers CommandNotFound, 59)",
        }
    }
}

/// (file relative to the spec-test root, test description, limitation).
pub const KNOWN_FAILURES: &[(&str, &str, ServerLimit)] = &[
    (
        "causal-consistency/tests/causal-consistency-clientBulkWrite.json",
        "clientBulkWrite includes afterClusterTime in causally consistent session",
        ServerLimit::BulkWriteRefusesReadConcern,
    ),
    (
        "retryable-writes/tests/unified/client-bulkWrite-serverErrors.json",
        "client bulkWrite with no multi: true operations succeeds after retryable writeConcernError",
        ServerLimit::BulkWriteRetryRunsAgain,
    ),
    (
        "retryable-writes/tests/unified/deleteOne.json",
        "DeleteOne is committed on first attempt",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/deleteOne.json",
        "DeleteOne is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/findOneAndDelete.json",
        "FindOneAndDelete is committed on first attempt",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/findOneAndDelete.json",
        "FindOneAndDelete is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/findOneAndReplace.json",
        "FindOneAndReplace is committed on first attempt",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/findOneAndReplace.json",
        "FindOneAndReplace is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/findOneAndUpdate.json",
        "FindOneAndUpdate is committed on first attempt",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/findOneAndUpdate.json",
        "FindOneAndUpdate is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/insertMany.json",
        "InsertMany succeeds after one network error",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/insertMany.json",
        "InsertMany with unordered execution",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/insertMany.json",
        "InsertMany fails after multiple network errors",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/insertOne-errorLabels.json",
        "InsertOne fails after multiple retryable writeConcernErrors",
        ServerLimit::RetryRepliesWithoutWriteConcernError,
    ),
    (
        "unified-test-format/tests/valid-pass/poc-retryable-writes.json",
        "InsertOne fails after multiple retryable writeConcernErrors",
        ServerLimit::RetryRepliesWithoutWriteConcernError,
    ),
    (
        "retryable-writes/tests/unified/insertOne.json",
        "InsertOne is committed on first attempt",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/insertOne.json",
        "InsertOne is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/replaceOne.json",
        "ReplaceOne is committed on first attempt",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/replaceOne.json",
        "ReplaceOne is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/updateOne.json",
        "UpdateOne is committed on first attempt",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/updateOne.json",
        "UpdateOne is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/updateOne.json",
        "UpdateOne with upsert is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Find operation with snapshot",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Write commands with snapshot session do not affect snapshot reads",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "unified-test-format/tests/valid-pass/poc-retryable-writes.json",
        "FindOneAndUpdate is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Distinct operation with snapshot",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Aggregate operation with snapshot",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Mixed operation with snapshot",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Find operation with snapshot and snapshot time",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Distinct operation with snapshot and snapshot time",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Aggregate operation with snapshot and snapshot time",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "Mixed operation with snapshot and snapshotTime",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "sessions/tests/snapshot-sessions.json",
        "countDocuments operation with snapshot and snapshot time",
        ServerLimit::SnapshotReadsSeeLaterWrites,
    ),
    (
        "retryable-writes/tests/unified/bulkWrite.json",
        "First command is retried",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/bulkWrite.json",
        "BulkWrite with unordered execution",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/bulkWrite.json",
        "First insertOne is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/bulkWrite.json",
        "Second updateOne is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
    (
        "retryable-writes/tests/unified/bulkWrite.json",
        "Third updateOne is never committed",
        ServerLimit::OnPrimaryTransactionalWriteIgnored,
    ),
];

/// The change-stream tests that need a real sharded cluster.
const SHARDING_TESTS: &[(&str, &str, ServerLimit)] = &[
    (
        "change-streams/tests/unified/change-streams-showExpandedEvents.json",
        "when showExpandedEvents is true, shardCollection events are reported",
        ServerLimit::NoShardCollection,
    ),
    (
        "run-command/tests/unified/runCursorCommand.json",
        "successfully executes checkMetadataConsistency cursor creating command",
        ServerLimit::NoCheckMetadataConsistency,
    ),
];

/// The unified tests that pass `rawData` to a command SecantusDB 8.2 does
/// not take it on.
const RAW_DATA_TESTS: &[(&str, &str, ServerLimit)] = &[
    (
        "crud/tests/unified/client-bulkWrite-delete-rawdata.json",
        "client bulk write delete with rawData option",
        ServerLimit::BulkWriteRefusesRawData,
    ),
    (
        "crud/tests/unified/client-bulkWrite-replaceOne-rawdata.json",
        "client bulkWrite replaceOne with rawData option",
        ServerLimit::BulkWriteRefusesRawData,
    ),
    (
        "crud/tests/unified/client-bulkWrite-update-rawdata.json",
        "client bulk write update with rawData option",
        ServerLimit::BulkWriteRefusesRawData,
    ),
    (
        "crud/tests/unified/distinct-rawdata.json",
        "distinct with rawData option",
        ServerLimit::DistinctRefusesRawData,
    ),
    (
        "crud/tests/unified/findOneAndDelete-rawdata.json",
        "findOneAndDelete with rawData option",
        ServerLimit::FindAndModifyRefusesRawData,
    ),
    (
        "crud/tests/unified/findOneAndReplace-rawdata.json",
        "findOneAndReplace with rawData option",
        ServerLimit::FindAndModifyRefusesRawData,
    ),
    (
        "crud/tests/unified/findOneAndUpdate-rawdata.json",
        "findOneAndUpdate with rawData option",
        ServerLimit::FindAndModifyRefusesRawData,
    ),
];

/// The limitation that makes `file`/`test` fail, if it is listed.
pub fn known_failure(file: &str, test: &str) -> Option<ServerLimit> {
    KNOWN_FAILURES
        .iter()
        .chain(SHARDING_TESTS)
        .chain(RAW_DATA_TESTS)
        .find(|(f, t, _)| *f == file && *t == test)
        .map(|(_, _, limit)| *limit)
}

/// Whether the server at `uri` (a replica set with test commands) still
/// has `limit`; `Err` when the probe itself could not run.
pub fn probe(limit: ServerLimit, uri: &str) -> Result<bool, String> {
    let (client, recorder) = recorded_client(uri);
    let admin = client.database("admin");
    let coll = client
        .database("unified_probes")
        .collection::<Document>(&format!("{limit:?}"));
    let _ = coll.drop().run();
    let fail_point = |command: Document| {
        admin
            .run_command(command)
            .run()
            .map(|_| ())
            .map_err(|e| format!("{limit:?}: configureFailPoint: {e}"))
    };
    let off = |name: &str| {
        let _ = admin
            .run_command(doc! { "configureFailPoint": name, "mode": "off" })
            .run();
    };
    match limit {
        ServerLimit::OnPrimaryTransactionalWriteIgnored => {
            fail_point(doc! {
                "configureFailPoint": "onPrimaryTransactionalWrite",
                "mode": { "times": 1 },
                "data": { "closeConnection": true },
            })?;
            recorder.clear_commands();
            let inserted = coll.insert_one(doc! { "_id": 1 }).run();
            off("onPrimaryTransactionalWrite");
            inserted.map_err(|e| format!("{limit:?}: insert: {e}"))?;
            // With the fail point working the first attempt's connection
            // closes and the driver retries: two inserts.
            Ok(recorder.named("insert").len() == 1)
        }
        ServerLimit::RetryRepliesWithoutWriteConcernError => {
            fail_point(doc! {
                "configureFailPoint": "failCommand",
                "mode": { "times": 2 },
                "data": {
                    "failCommands": ["insert"],
                    "writeConcernError": { "code": 91, "errmsg": "probe" },
                    "errorLabels": ["RetryableWriteError"],
                },
            })?;
            recorder.clear_commands();
            let inserted = coll.insert_one(doc! { "_id": 1 }).run();
            off("failCommand");
            if recorder.named("insert").len() != 2 {
                return Err(format!(
                    "{limit:?}: expected the insert to be retried once, saw {} inserts",
                    recorder.named("insert").len()
                ));
            }
            Ok(inserted.is_ok())
        }
        ServerLimit::SnapshotReadsSeeLaterWrites => snapshot_probe(&client, &coll),
        ServerLimit::NoShardCollection => {
            let reply = admin
                .run_command(
                    doc! { "shardCollection": "unified_probes.sharded", "key": { "_id": 1 } },
                )
                .run();
            Ok(reply.is_err_and(|e| e.code() == Some(59)))
        }
        ServerLimit::BulkWriteRefusesRawData => {
            let reply = admin
                .run_command(doc! {
                    "bulkWrite": 1,
                    "ops": [{ "insert": 0, "document": { "_id": 1 } }],
                    "nsInfo": [{ "ns": format!("unified_probes.{limit:?}") }],
                    "rawData": true,
                })
                .run();
            Ok(reply.is_err_and(|e| e.code() == Some(40415)))
        }
        ServerLimit::DistinctRefusesRawData => {
            let reply = client
                .database("unified_probes")
                .run_command(
                    doc! { "distinct": format!("{limit:?}"), "key": "_id", "rawData": true },
                )
                .run();
            Ok(reply.is_err_and(|e| e.code() == Some(40415)))
        }
        ServerLimit::FindAndModifyRefusesRawData => {
            let reply = client
                .database("unified_probes")
                .run_command(doc! {
                    "findAndModify": format!("{limit:?}"),
                    "query": {},
                    "remove": true,
                    "rawData": true,
                })
                .run();
            Ok(reply.is_err_and(|e| e.code() == Some(40415)))
        }
        ServerLimit::NoCheckMetadataConsistency => {
            let reply = admin
                .run_command(doc! { "checkMetadataConsistency": 1 })
                .run();
            Ok(reply.is_err_and(|e| e.code() == Some(59)))
        }
        ServerLimit::BulkWriteRefusesReadConcern => {
            let reply = admin
                .run_command(doc! {
                    "bulkWrite": 1,
                    "ops": [{ "insert": 0, "document": { "_id": 1 } }],
                    "nsInfo": [{ "ns": format!("unified_probes.{limit:?}") }],
                    "readConcern": { "level": "local" },
                })
                .run();
            Ok(reply.is_err_and(|e| e.code() == Some(40415)))
        }
        ServerLimit::BulkWriteRetryRunsAgain => {
            fail_point(doc! {
                "configureFailPoint": "failCommand",
                "mode": { "times": 1 },
                "data": {
                    "failCommands": ["bulkWrite"],
                    "writeConcernError": { "code": 91, "errmsg": "probe" },
                    "errorLabels": ["RetryableWriteError"],
                },
            })?;
            let model = mongo_inline::options::InsertOneModel::builder()
                .namespace(coll.namespace())
                .document(doc! { "_id": 1 })
                .build();
            let written = client.bulk_write([model]).run();
            off("failCommand");
            // The retry (after the write concern error) ran the insert again.
            Ok(written.is_err_and(|e| e.code() == Some(11000)))
        }
    }
}

fn snapshot_probe(
    client: &Client,
    coll: &mongo_inline::Collection<Document>,
) -> Result<bool, String> {
    let probe = |e: mongo_inline::Error| format!("SnapshotReadsSeeLaterWrites: {e}");
    coll.insert_one(doc! { "_id": 1, "x": 1 })
        .run()
        .map_err(probe)?;
    let mut options = mongo_inline::options::SessionOptions::default();
    options.snapshot = Some(true);
    let mut session = client
        .start_session()
        .with_options(options)
        .run()
        .map_err(probe)?;
    let read = |session: &mut mongo_inline::ClientSession| -> Result<Option<Document>, String> {
        coll.find_one(doc! { "_id": 1 })
            .session(session)
            .run()
            .map_err(probe)
    };
    read(&mut session)?;
    coll.update_one(doc! { "_id": 1 }, doc! { "$set": { "x": 2 } })
        .run()
        .map_err(probe)?;
    let second = read(&mut session)?.ok_or("SnapshotReadsSeeLaterWrites: the document is gone")?;
    Ok(second.get_i32("x") == Ok(2))
}

/// Tests of a rule the spec states does not apply to single-threaded drivers
/// without a pool: (file, test, the rule quoted).
pub const SINGLE_THREADED: &[(&str, &str, &str)] = &[
    (
        "load-balancers/tests/wait-queue-timeouts.json",
        "wait queue timeout errors include transaction statistics",
        "load-balancers.md: \"For single threaded drivers that do not use a connection pool, the driver MUST have only 1 socket connection to the load balancer\": with no pool there is no wait queue to time out (the client's maxPoolSize=1 and waitQueueTimeoutMS configure a pool this driver does not have)",
    ),
    (
        "load-balancers/tests/wait-queue-timeouts.json",
        "wait queue timeout errors include cursor statistics",
        "load-balancers.md: \"For single threaded drivers that do not use a connection pool, the driver MUST have only 1 socket connection to the load balancer\": with no pool there is no wait queue to time out (the client's maxPoolSize=1 and waitQueueTimeoutMS configure a pool this driver does not have)",
    ),
    (
        "server-discovery-and-monitoring/tests/unified/rediscover-quickly-after-step-down.json",
        "Rediscover quickly after replSetStepDown",
        "server-monitoring.md: \"Single-threaded clients MUST scan all servers synchronously, inline with regular application operations\": the test's waitForPrimaryChange waits, while no operation runs, for its client (heartbeatFrequencyMS 60000) to discover the primary elected after a replSetStepDown, which only a background monitor would (the runner's waitForPrimaryChange skips under this rule when nothing has changed; recordTopologyDescription and assertTopologyType run, see the runner's tests). Run, it would not get that far here: its replSetFreeze reads from a secondary, which the one-member test replica set lacks, and would wait out setupClient's 30 s server selection first",
    ),
    (
        "connection-monitoring-and-pooling/tests/logging/connection-logging.json",
        "Create a client, run a command, and close the client",
        CMAP_APPLIES_TO_POOLS,
    ),
    (
        "connection-monitoring-and-pooling/tests/logging/connection-logging.json",
        "Connection checkout fails due to error establishing connection",
        CMAP_APPLIES_TO_POOLS,
    ),
];

/// Why the connection (pool) log messages are not written: the driver has
/// one socket per server and no pool, so "Connection pool created",
/// "Connection checkout started" and the rest would describe a pool that
/// does not exist.
const CMAP_APPLIES_TO_POOLS: &str = "connection-monitoring-and-pooling.md: \"This specification is solely concerned with drivers that implement a connection pool. A driver SHOULD implement a connection pool, but is not required to\" and \"This specification does not apply to drivers that do not support multitasking\": its connection log messages are the pool's (created, ready, checkout started, checked out, checked in, cleared, closed), and this driver has one socket per server and no pool";

/// The single-threaded rule that exempts `file`/`test`, if any.
pub fn single_threaded_rule(file: &str, test: &str) -> Option<&'static str> {
    SINGLE_THREADED
        .iter()
        .find(|(f, t, _)| *f == file && *t == test)
        .map(|(_, _, rule)| *rule)
}

/// The prefix of a skip whose `runOnRequirements` hold on no deployment.
pub const NO_DEPLOYMENT: &str = "no deployment here satisfies it — ";

/// Why the `invalid` files are not run.
pub const INVALID_FILES: &str = "spec rule: unified-test-format/tests/README.md: \"invalid: These files do not validate against the schema and are used to test the schema itself.\": they are not for a test runner to execute";

/// A test's own `skipReason`.
pub const SKIP_REASON: &str = "spec rule: unified-test-format.md: \"If test.skipReason is specified, the test runner MUST skip this test\"";

/// The `csfle` requirement: this driver has no client-side encryption.
pub const CSFLE_REQUIREMENT: &str = "csfle: unified-test-format.md: \"If not false, tests MUST only run if the driver and server support Client-Side Field Level Encryption\", and this driver has no libmongocrypt";

/// Operations the driver leaves out on purpose, with the rule that lets it.
pub fn intentionally_unimplemented(name: &str) -> Option<&'static str> {
    match name {
        "count" => Some("spec rule: crud.md, on Collection.count: \"This method is DEPRECATED and should not be implemented in new drivers.\"; unified-test-format.md: \"Test runners MAY skip tests that include operations that are intentionally unimplemented\" (the driver has countDocuments and estimatedDocumentCount)"),
        "mapReduce" => Some("spec rule: unified-test-format.md: \"Test runners MAY skip tests that include operations that are intentionally unimplemented\": mapReduce is not in crud.md's Collection API, and the driver leaves it out (aggregate replaces it)"),
        _ => None,
    }
}

/// What a skip's reason may rest on (issue 38). A reason of no kind names
/// a gap in the runner or the driver, which the run counts as a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipKind {
    /// A rule the specs state for single-threaded drivers, quoted.
    SingleThreaded,
    /// Another spec rule that lets a driver or runner leave the test out,
    /// quoted.
    SpecRule,
    /// A limitation of the test server, checked against it during the run.
    ServerLimit,
    /// The test's `runOnRequirements` (server version, topology,
    /// authentication, server parameters read from the server) hold on no
    /// deployment here.
    Requirements,
    /// The test's own text contradicts itself: the reason quotes the
    /// contradicting part of the file, and the run checks that the quote
    /// is still in it ([`spec_defect`]).
    SpecDefect,
}

/// The kind of `reason`, or `None` when it is none of the allowed kinds.
pub fn skip_kind(reason: &str) -> Option<SkipKind> {
    // A quoted rule names its document and quotes it.
    let quotes = |rest: &str| rest.contains(".md: \"") || rest.contains("README.md: \"");
    if let Some(rest) = reason.strip_prefix("single-threaded: ") {
        return quotes(rest).then_some(SkipKind::SingleThreaded);
    }
    if let Some(rest) = reason.strip_prefix("spec rule: ") {
        return quotes(rest).then_some(SkipKind::SpecRule);
    }
    if let Some(rest) = reason.strip_prefix(SPEC_DEFECT) {
        return rest.contains(".json: \"").then_some(SkipKind::SpecDefect);
    }
    if reason.starts_with("server limitation, checked: ") {
        return Some(SkipKind::ServerLimit);
    }
    let lanes = reason.strip_prefix(NO_DEPLOYMENT)?;
    lanes
        .split("; ")
        .all(|lane| {
            let Some((_, requirements)) = lane.split_once(": runOnRequirements: ") else {
                return false;
            };
            requirements.split(" / ").all(requirement_is_allowed)
        })
        .then_some(SkipKind::Requirements)
}

/// Whether one unmet requirement (as `unmet` in mod.rs words it) is a
/// version, topology, authentication mode, a server fact that was read
/// from the server, or the quoted CSFLE rule.
fn requirement_is_allowed(requirement: &str) -> bool {
    const ALLOWED: &[&str] = &[
        "minServerVersion ",
        "maxServerVersion ",
        "topologies ",
        "serverless: require",
        "auth: true, and this deployment runs without authentication",
        "auth: false, and this deployment requires authentication",
        "authMechanism ",
        CSFLE_REQUIREMENT,
    ];
    let checked = |prefix: &str| {
        requirement
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.contains(": checked, "))
    };
    ALLOWED.iter().any(|p| requirement.starts_with(p)) && !requirement.contains("failed: ")
        || checked("serverParameters ")
}

/// Runner and driver gaps other work is closing (issue 38), by a fragment
/// of their reason and who closes them. They are listed, counted and
/// printed apart from the skips; any other gap fails the run. Each entry
/// goes when its work lands.
pub const PENDING_GAPS: &[(&str, &str)] = &[];

/// The pending gap `reason` is, if any: who closes it.
pub fn pending_gap(reason: &str) -> Option<&'static str> {
    PENDING_GAPS
        .iter()
        .find(|(fragment, _)| reason.contains(fragment))
        .map(|(_, owner)| *owner)
}

/// The prefix of a spec-defect skip.
const SPEC_DEFECT: &str = "spec defect: ";

/// A test whose own text is wrong at the pinned spec commit.
struct SpecDefect {
    /// The file, relative to the spec-test root.
    file: &'static str,
    /// The test's description.
    test: &'static str,
    /// The wrong part of the test, as its JSON reads (whitespace aside).
    quote: &'static str,
    /// A top-level key of the file whose absence is the defect, if any.
    file_lacks: Option<&'static str>,
    /// What is wrong with it.
    defect: &'static str,
}

/// The skip for test `test` of `file` (named `relative`) if its own text is
/// wrong: the reason quotes the wrong part. If the quote is no longer in the
/// test, or the file now has what it lacked (the spec fixed it), the entry
/// is stale and the test fails.
pub fn spec_defect(relative: &str, file: &Document, test: &Document) -> Option<Failure> {
    let description = test.get_str("description").unwrap_or_default();
    let entry = SPEC_DEFECTS
        .iter()
        .find(|d| d.file == relative && d.test == description)?;
    let squeeze = |s: &str| s.split_whitespace().collect::<String>();
    let text = bson::Bson::Document(test.clone())
        .into_relaxed_extjson()
        .to_string();
    let quoted = squeeze(&text).contains(&squeeze(entry.quote));
    let still_lacks = entry.file_lacks.is_none_or(|key| !file.contains_key(key));
    let (quote, defect) = (entry.quote, entry.defect);
    Some(if quoted && still_lacks {
        Failure::Skip(format!("{SPEC_DEFECT}{relative}: \"{quote}\": {defect}"))
    } else {
        Failure::Fail(format!(
            "skips::SPEC_DEFECTS: {relative}: {description}: the defect (quote {quote}, file lacks {:?}) is no longer in the test; remove the entry",
            entry.file_lacks
        ))
    })
}

/// Tests whose own text is wrong at the pinned spec commit.
const SPEC_DEFECTS: &[SpecDefect] = &[
    SpecDefect {
        file: "crud/tests/unified/insertMany-rawdata.json",
        test: "insertMany with rawData option",
        quote: r#"{"_id":2,"x":22}"#,
        file_lacks: Some("initialData"),
        defect: INSERTS_WITHOUT_INITIAL_DATA,
    },
    SpecDefect {
        file: "crud/tests/unified/insertOne-rawdata.json",
        test: "insertOne with rawData option",
        quote: r#"{"_id":2,"x":22}"#,
        file_lacks: Some("initialData"),
        defect: INSERTS_WITHOUT_INITIAL_DATA,
    },
    SpecDefect {
        file: "client-side-operations-timeout/tests/runCursorCommand.json",
        test: "Tailable cursor awaitData iteration timeoutMS is refreshed for getMore - failure",
        quote: r#""maxTimeMS":{"$$exists":true}"#,
        file_lacks: None,
        defect: "the test expects find to carry maxTimeMS and the second iteration to time out, yet no client, database or operation of it sets timeoutMS (its sibling tests set timeoutMS: 100 on the operation)",
    },
    SpecDefect {
        file: "client-side-operations-timeout/tests/runCursorCommand.json",
        test: "Non-tailable cursor iteration timeoutMS is refreshed for getMore if timeoutMode is iteration - failure",
        quote: r#""blockTimeMS":60"#,
        file_lacks: None,
        defect: RUN_CURSOR_COMMAND_SHORT_BLOCK,
    },
    SpecDefect {
        file: "client-side-operations-timeout/tests/runCursorCommand.json",
        test: "Tailable cursor iteration timeoutMS is refreshed for getMore - failure",
        quote: r#""blockTimeMS":60"#,
        file_lacks: None,
        defect: RUN_CURSOR_COMMAND_SHORT_BLOCK,
    },
];

/// Why two iteration-mode failure tests of runCursorCommand cannot fail.
const RUN_CURSOR_COMMAND_SHORT_BLOCK: &str = "the test blocks one getMore for 60 ms under timeoutMode iteration with timeoutMS 100 and expects a timeout, yet in that mode client-side-operations-timeout.md: \"the original `timeoutMS` value MUST also be applied to each `next` call on the created cursor\", so a 60 ms getMore fits in its fresh 100 ms (the same failure tests for find, in non-tailable-cursors.json and tailable-non-awaitData.json, block their getMore for 250 ms against 200)";

/// Why the rawData insert tests cannot be run in a shared deployment.
const INSERTS_WITHOUT_INITIAL_DATA: &str = "the test inserts this into crud-tests.coll0 and expects success, yet the file has no initialData to clear the collection, and the CRUD files before it leave it holding _id 2: whether it passes depends on the order files run in (rawData on inserts is shown by the unit test raw_data_is_sent_to_8_2_and_refused_before and the other rawdata files)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_quoted_rules_checked_limits_and_requirements_are_skips() {
        let allowed = [
            "single-threaded: server-monitoring.md: \"Single-threaded clients MUST scan\"",
            INVALID_FILES,
            "server limitation, checked: SecantusDB answers CommandNotSupported",
            r#"spec defect: crud/tests/unified/x.json: ""a":1": it contradicts itself"#,
            "no deployment here satisfies it — replicaset: runOnRequirements: maxServerVersion \"4.2\" < server [8]; single: runOnRequirements: topologies [\"replicaset\"] / minServerVersion \"9.0\" > server [8]",
            "no deployment here satisfies it — replicaset --auth: runOnRequirements: authMechanism MONGODB-OIDC: checked, the server's authenticationMechanisms are [\"SCRAM-SHA-256\"]",
        ];
        for reason in allowed {
            assert!(skip_kind(reason).is_some(), "{reason}");
        }
        let gaps = [
            "collection operation createSearchIndex: the driver has no Atlas search index management",
            "argument \"max\" of createCollection not supported by the runner",
            "single-threaded: waits for a monitor",
            "spec rule: the driver does not want to",
            "spec defect: the test looks wrong",
            "no deployment here satisfies it — replicaset: runOnRequirements: unknown runOnRequirements field foo",
            "no deployment here satisfies it — replicaset: runOnRequirements: serverParameters {}: getParameter failed: refused",
        ];
        for reason in gaps {
            assert_eq!(skip_kind(reason), None, "{reason}");
        }
    }
}
