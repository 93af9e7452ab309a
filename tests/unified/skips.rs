//! The skip map: unified tests known to fail here, each with the reason
//! (a driver bug routed elsewhere, or a limitation of the test server with
//! the command that shows it). A failure not listed fails the run; a listed
//! test that passes is reported so the entry can go.

const SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE: &str =
    "SecantusDB: the onPrimaryTransactionalWrite fail point is accepted but has no effect (configureFailPoint {onPrimaryTransactionalWrite, mode: {times: 1}, data: {failBeforeCommitExceptionCode: 1}} then the write succeeds on its first attempt)";
const SERVER_WCE_FAIL_POINT_ON_RETRY: &str =
    "SecantusDB: a retried write (same lsid and txnNumber) replays the first reply without the failCommand writeConcernError (configureFailPoint {failCommand, mode: {times: 2}, data: {failCommands: [insert], writeConcernError: {code: 91}, errorLabels: [RetryableWriteError]}}: the retry's reply has no writeConcernError, so the insert succeeds)";
const DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME: &str =
    "driver (sessions): write commands in a causally consistent session send no readConcern.afterClusterTime (causal-consistency spec, writes after an operation in the session)";
const SERVER_SNAPSHOT_READS: &str =
    "SecantusDB: snapshot reads at atClusterTime see later writes (find with readConcern {level: snapshot, atClusterTime} returns the newer value)";

const DRIVER_TIMEOUT_MS: &str =
    "driver (issue 10, timeoutMS): the client/session timeoutMS does not reach this operation, or its error is not reported as a timeout";

/// (file relative to the spec-test root, test description, reason).
pub const KNOWN_FAILURES: &[(&str, &str, &str)] = &[
    (
        "client-side-operations-timeout/tests/error-transformations.json",
        "write concern error MaxTimeMSExpired is transformed",
        DRIVER_TIMEOUT_MS,
    ),
    (
        "transactions/tests/unified/transaction-options.json",
        "transaction options inherited from client",
        "driver (issue 10, settings resolution): the client's readConcernLevel is not sent with the first command of a transaction",
    ),
    (
        "transactions/tests/unified/write-concern.json",
        "start with implicit unacknowledged write concern",
        "driver (transactions): startTransaction accepts an unacknowledged (w:0) write concern inherited from the client; the spec requires an error",
    ),
    ("causal-consistency/tests/causal-consistency-write-commands.json", "insertOne includes afterClusterTime in causally consistent session", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("causal-consistency/tests/causal-consistency-write-commands.json", "updateOne includes afterClusterTime in causally consistent session", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("causal-consistency/tests/causal-consistency-write-commands.json", "updateMany includes afterClusterTime in causally consistent session", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("causal-consistency/tests/causal-consistency-write-commands.json", "replaceOne includes afterClusterTime in causally consistent session", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("causal-consistency/tests/causal-consistency-write-commands.json", "deleteOne includes afterClusterTime in causally consistent session", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("causal-consistency/tests/causal-consistency-write-commands.json", "deleteMany includes afterClusterTime in causally consistent session", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("retryable-writes/tests/unified/deleteOne.json", "DeleteOne is committed on first attempt", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/deleteOne.json", "DeleteOne is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/findOneAndDelete.json", "FindOneAndDelete is committed on first attempt", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/findOneAndDelete.json", "FindOneAndDelete is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/findOneAndReplace.json", "FindOneAndReplace is committed on first attempt", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/findOneAndReplace.json", "FindOneAndReplace is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/findOneAndUpdate.json", "FindOneAndUpdate is committed on first attempt", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/findOneAndUpdate.json", "FindOneAndUpdate is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/insertMany.json", "InsertMany succeeds after one network error", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/insertMany.json", "InsertMany with unordered execution", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/insertMany.json", "InsertMany fails after multiple network errors", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/insertOne-errorLabels.json", "InsertOne fails after multiple retryable writeConcernErrors", SERVER_WCE_FAIL_POINT_ON_RETRY),
    ("unified-test-format/tests/valid-pass/poc-retryable-writes.json", "InsertOne fails after multiple retryable writeConcernErrors", SERVER_WCE_FAIL_POINT_ON_RETRY),
    ("retryable-writes/tests/unified/insertOne.json", "InsertOne is committed on first attempt", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/insertOne.json", "InsertOne is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/replaceOne.json", "ReplaceOne is committed on first attempt", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/replaceOne.json", "ReplaceOne is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/updateOne.json", "UpdateOne is committed on first attempt", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/updateOne.json", "UpdateOne is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/updateOne.json", "UpdateOne with upsert is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("sessions/tests/snapshot-sessions.json", "Find operation with snapshot", SERVER_SNAPSHOT_READS),
    ("sessions/tests/snapshot-sessions.json", "Write commands with snapshot session do not affect snapshot reads", SERVER_SNAPSHOT_READS),
    ("transactions/tests/unified/commit.json", "reset session state commit", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("transactions/tests/unified/commit.json", "reset session state abort", DRIVER_CC_WRITES_NO_AFTER_CLUSTER_TIME),
    ("unified-test-format/tests/valid-pass/poc-retryable-writes.json", "FindOneAndUpdate is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
];

/// The reason `file`/`test` is expected to fail, if it is listed.
pub fn known_failure(file: &str, test: &str) -> Option<&'static str> {
    KNOWN_FAILURES
        .iter()
        .find(|(f, t, _)| *f == file && *t == test)
        .map(|(_, _, reason)| *reason)
}
