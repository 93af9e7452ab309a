//! The skip map: unified tests known to fail here, each with the reason
//! (a driver bug routed elsewhere, or a limitation of the test server with
//! the command that shows it). A failure not listed fails the run; a listed
//! test that passes is reported so the entry can go.

const SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE: &str =
    "SecantusDB: the onPrimaryTransactionalWrite fail point is accepted but has no effect (configureFailPoint {onPrimaryTransactionalWrite, mode: {times: 1}, data: {failBeforeCommitExceptionCode: 1}} then the write succeeds on its first attempt)";
const SERVER_WCE_FAIL_POINT_ON_RETRY: &str =
    "SecantusDB: a retried write (same lsid and txnNumber) replays the first reply without the failCommand writeConcernError (configureFailPoint {failCommand, mode: {times: 2}, data: {failCommands: [insert], writeConcernError: {code: 91}, errorLabels: [RetryableWriteError]}}: the retry's reply has no writeConcernError, so the insert succeeds)";
const SERVER_SNAPSHOT_READS: &str =
    "SecantusDB: snapshot reads at atClusterTime see later writes (find with readConcern {level: snapshot, atClusterTime} returns the newer value)";

const SIM_ONE_BACKEND_FOR_ALL_MONGOSES: &str =
    "simulator: both simulated mongoses forward to one replica set, so the transaction is known on every 'mongos' (a commit that reaches the other one succeeds instead of failing with NoSuchTransaction), and a failCommand on hello (failCommands [commitTransaction|insert, isMaster, hello], closeConnection, times: 7) is met by the simulator's backend introduction rather than the client's handshakes, which the simulator answers itself";

const DRIVER_TRANSACTION_READ_PREFERENCE: &str =
    "driver (transactions): a read in a transaction whose read preference is not primary is sent instead of failing with the spec's 'read preference in a transaction must be primary' error";

const DRIVER_LB_END_TRANSACTION_RETRY: &str =
    "driver (load-balanced transactions): after a network error closes the connection a transaction is pinned to, commitTransaction/abortTransaction is not retried once as the transactions spec asks (2 command events instead of 3)";

const DRIVER_TIMEOUT_MS: &str =
    "driver (issue 10, timeoutMS): the client/session timeoutMS does not reach this operation, or its error is not reported as a timeout";

/// (file relative to the spec-test root, test description, reason).
pub const KNOWN_FAILURES: &[(&str, &str, &str)] = &[
    (
        "client-side-operations-timeout/tests/error-transformations.json",
        "write concern error MaxTimeMSExpired is transformed",
        DRIVER_TIMEOUT_MS,
    ),
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
    ("unified-test-format/tests/valid-pass/poc-retryable-writes.json", "FindOneAndUpdate is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("transactions/tests/unified/transaction-options.json", "readPreference inherited from defaultTransactionOptions", DRIVER_TRANSACTION_READ_PREFERENCE),
    ("transactions/tests/unified/transaction-options.json", "startTransaction overrides readPreference", DRIVER_TRANSACTION_READ_PREFERENCE),
    ("sessions/tests/snapshot-sessions.json", "Distinct operation with snapshot", SERVER_SNAPSHOT_READS),
    ("sessions/tests/snapshot-sessions.json", "Aggregate operation with snapshot", SERVER_SNAPSHOT_READS),
    ("sessions/tests/snapshot-sessions.json", "Mixed operation with snapshot", SERVER_SNAPSHOT_READS),
    ("transactions/tests/unified/read-pref.json", "secondary readPreference", DRIVER_TRANSACTION_READ_PREFERENCE),
    ("transactions/tests/unified/read-pref.json", "primaryPreferred readPreference", DRIVER_TRANSACTION_READ_PREFERENCE),
    ("transactions/tests/unified/read-pref.json", "nearest readPreference", DRIVER_TRANSACTION_READ_PREFERENCE),
    ("transactions/tests/unified/run-command.json", "run command fails with secondary read preference from transaction options", DRIVER_TRANSACTION_READ_PREFERENCE),
    ("retryable-writes/tests/unified/bulkWrite.json", "First command is retried", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/bulkWrite.json", "BulkWrite with unordered execution", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/bulkWrite.json", "First insertOne is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/bulkWrite.json", "Second updateOne is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("retryable-writes/tests/unified/bulkWrite.json", "Third updateOne is never committed", SERVER_ON_PRIMARY_TRANSACTIONAL_WRITE),
    ("load-balancers/tests/transactions.json", "pinned connection is released after a transient network commit error", DRIVER_LB_END_TRANSACTION_RETRY),
    ("load-balancers/tests/transactions.json", "pinned connection is released after a transient network abort error", DRIVER_LB_END_TRANSACTION_RETRY),
    ("load-balancers/tests/wait-queue-timeouts.json", "wait queue timeout errors include transaction statistics", "driver: one socket per server and no pool, so there is no wait queue to time out (maxPoolSize=1 with the socket pinned to a transaction: the next insert shares the socket and succeeds)"),
    ("transactions/tests/unified/mongos-recovery-token.json", "commitTransaction retry fails on new mongos", SIM_ONE_BACKEND_FOR_ALL_MONGOSES),
    ("transactions/tests/unified/pin-mongos.json", "unpin after transient error within a transaction and commit", SIM_ONE_BACKEND_FOR_ALL_MONGOSES),
];

/// The reason `file`/`test` is expected to fail, if it is listed.
pub fn known_failure(file: &str, test: &str) -> Option<&'static str> {
    KNOWN_FAILURES
        .iter()
        .find(|(f, t, _)| *f == file && *t == test)
        .map(|(_, _, reason)| *reason)
}
