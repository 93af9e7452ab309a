/*
 * mongo_inline.h: the C ABI of mongo-inline, a single-threaded MongoDB driver
 * for short-lived processes. Build target/release/libmongo_inline.so and
 * libmongo_inline.a with
 *   cargo rustc --release --lib --features capi --crate-type cdylib --crate-type staticlib
 *
 * Conventions
 * - Every function that can fail returns NULL on success or an mi_error* that
 *   the caller owns and frees with mi_error_free. Output parameters are
 *   written only on success (mi_cursor_next first sets *document to NULL).
 * - NULL or invalid arguments (bad UTF-8, bad BSON, unknown options) give an
 *   MI_ERROR_ARGUMENT error naming the argument, never a crash. No panic
 *   crosses the boundary: a bug in the library is an MI_ERROR_INTERNAL error.
 * - BSON goes in as (pointer, length): the length must equal the document's
 *   own length prefix. BSON comes out in an mi_buffer the caller frees with
 *   mi_buffer_free (an mi_buffer is overwritten, never freed, by a call that
 *   fills it).
 * - Handles (mi_client, mi_session, mi_cursor) are freed with their *_free
 *   function; *_free(NULL) is a no-op; using a freed handle is undefined.
 *   Handles may be freed in any order: a session or cursor keeps its client's
 *   state alive, and a cursor opened in a session keeps iterating with that
 *   session after mi_session_free (the session ends with its last cursor).
 * - Threads: a client, and the sessions and cursors made from it, are used
 *   from one thread at a time (no background threads run in the library).
 * - fork(): the child keeps using the client it inherited; its next call
 *   notices the new process, drops the inherited sockets and session pool
 *   (without ending the parent's sessions) and draws its own session ids.
 *   Sessions and cursors opened before the fork must not be used in the
 *   child (free them only in the parent).
 * - One shape for every operation: (handle or client, session, db, coll,
 *   the operation's own arguments, options, output), returning an mi_error*.
 *   BSON arguments are (pointer, length); options are a BSON document in the
 *   official option names of the operation (the CRUD, index and GridFS
 *   specs': "sort", "maxTimeMS", "let", "hint", "collation", "writeConcern",
 *   "readPreference", "arrayFilters", "returnDocument": "after", ...) or
 *   NULL; an unknown option or a value of the wrong type is an
 *   MI_ERROR_ARGUMENT error naming it. Operations that find at most one
 *   document leave the output mi_buffer {NULL, 0} when there is none.
 * - timeoutMS (client-side operations timeout) per operation: "timeoutMS"
 *   in the options of every function whose Rust operation takes one (all
 *   the CRUD, index, listing, drop, bulk-write, change-stream and GridFS
 *   functions, mi_session_with_transaction; the search-index functions
 *   have none) bounds the whole call, its expiry an MI_ERROR_TIMEOUT; 0
 *   keeps CSOT's rules without a limit. Functions that open a cursor also
 *   take "timeoutMode" ("cursorLifetime" or "iteration"). A session's
 *   "defaultTimeoutMS" bounds its commits and aborts; the connection
 *   string's timeoutMS applies to everything else.
 * - Double free: freeing a handle twice, or using a freed one, is undefined
 *   (as free(3)); every *_free accepts NULL, so a binding sets its pointer
 *   to NULL when it frees it and can never free twice.
 * - Compression and cloud authentication are set in the connection string
 *   (compressors=zstd,zlib; authMechanism=MONGODB-AWS, MONGODB-OIDC with
 *   authMechanismProperties=ENVIRONMENT:azure|gcp|k8s, ...).
 * - Callbacks run inline, on the calling thread, while the client is busy:
 *   a call into the same client from inside a callback fails at once with
 *   MI_ERROR_CLIENT (it would otherwise wait for itself); record what the
 *   callback needs and act after the call that raised it returns.
 */
#ifndef MONGO_INLINE_H
#define MONGO_INLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A client: a deployment's topology and one socket per server. */
typedef struct mi_client mi_client;
/* An explicit session (causal consistency, transactions). */
typedef struct mi_session mi_session;
/* Query results, fetched a batch at a time. */
typedef struct mi_cursor mi_cursor;
/* A GridFS bucket of one database, and its upload and download streams. */
typedef struct mi_gridfs_bucket mi_gridfs_bucket;
typedef struct mi_gridfs_upload mi_gridfs_upload;
typedef struct mi_gridfs_download mi_gridfs_download;
/* A change stream: events as they happen. */
typedef struct mi_change_stream mi_change_stream;

/* What kind of failure an mi_error reports. */
typedef enum mi_error_domain {
    MI_ERROR_ARGUMENT = 1,            /* NULL/invalid argument, bad BSON or URI, unknown option, unusable TLS file */
    MI_ERROR_NETWORK = 2,             /* a socket failed or could not be opened; a failed SRV/TXT look-up */
    MI_ERROR_COMMAND = 3,             /* the server answered ok: 0; code is its error code */
    MI_ERROR_WRITE = 4,               /* a write statement or write concern failed; code is the server's */
    MI_ERROR_SERVER_SELECTION = 5,    /* no suitable server (serverSelectionTimeoutMS) */
    MI_ERROR_TIMEOUT = 6,             /* the operation's timeoutMS passed */
    MI_ERROR_PROTOCOL = 7,            /* the server's reply broke the protocol */
    MI_ERROR_AUTHENTICATION = 8,      /* authentication failed */
    MI_ERROR_TLS = 9,                 /* a TLS handshake or certificate check failed */
    MI_ERROR_INCOMPATIBLE_SERVER = 10,/* wire versions do not overlap */
    MI_ERROR_CLIENT = 11,             /* wrong state: e.g. commit without a transaction */
    MI_ERROR_INTERNAL = 12            /* a bug in the library (a caught panic, a broken rule) */
} mi_error_domain;

/* A failure. Owned by the caller; free with mi_error_free. */
typedef struct mi_error {
    int32_t domain;      /* an mi_error_domain */
    int32_t code;        /* the server's error code (or a write error's), 0 if none */
    char *message;       /* NUL-terminated UTF-8, never NULL; names the problem */
    char **labels;       /* label_count labels ("RetryableWriteError", ...), or NULL */
    size_t label_count;
    uint8_t *details;    /* a BSON document of what else the error knows, or NULL
                            (mi_client_bulk_write's: {writeErrors, writeConcernErrors,
                            partialResult?}) */
    size_t details_len;
} mi_error;

/* Bytes the library allocated (a BSON document). Free with mi_buffer_free. */
typedef struct mi_buffer {
    uint8_t *data;
    size_t len;
} mi_buffer;

/* Event kinds of mi_event.kind. */
#define MI_EVENT_COMMAND_STARTED 1
#define MI_EVENT_COMMAND_SUCCEEDED 2
#define MI_EVENT_COMMAND_FAILED 3
#define MI_EVENT_SDAM 4

/* A command or SDAM event; it and everything it points to are valid only
 * during the callback. Pointers are NULL where the kind has no such field. */
typedef struct mi_event {
    int32_t kind;                /* MI_EVENT_* */
    const char *command_name;    /* command events */
    const char *database_name;   /* started events */
    int32_t request_id;          /* command events */
    int64_t duration_micros;     /* succeeded and failed events */
    const char *server_address;  /* command events: host:port */
    const uint8_t *document;     /* started: the command as sent (with lsid, txnNumber);
                                    succeeded: the reply; NULL when redacted */
    size_t document_len;
    const char *message;         /* failed: the error; SDAM: the logging spec's description
                                    (NULL for a server description change) */
    const uint8_t *fields;       /* every field of the event, as BSON: {event:
                                    "commandStartedEvent" | "commandSucceededEvent" | ... |
                                    "serverHeartbeatFailedEvent", then the monitoring specs'
                                    fields: commandName, databaseName, requestId, command,
                                    reply, failure {message, code?, errorLabels}, connectionId
                                    (host:port), serverHost, serverPort, driverConnectionId,
                                    serverConnectionId?, serviceId?, duration (Int64 micro-
                                    seconds), topologyId, address, previousDescription,
                                    newDescription, awaited} */
    size_t fields_len;
} mi_event;

typedef void (*mi_event_callback)(void *user_data, const mi_event *event);
/* level: 1 error, 2 warn, 3 info, 4 debug, 5 trace. Strings valid during the call. */
typedef void (*mi_log_callback)(void *user_data, int32_t level, const char *target,
                                const char *message);

/* The library's version, a static string. */
const char *mi_version(void);

/* ---- errors, buffers, strings, BSON helpers ---- */

/* Frees an error. NULL is a no-op. */
void mi_error_free(mi_error *error);
/* Whether error carries label; false if either is NULL. */
bool mi_error_has_label(const mi_error *error, const char *label);
/* Frees buffer->data and resets the buffer to {NULL, 0}. NULL or empty: no-op. */
void mi_buffer_free(mi_buffer *buffer);
/* Frees a string from mi_bson_to_json. NULL is a no-op. */
void mi_string_free(char *string);
/* Extended JSON (canonical or relaxed) object -> BSON document in *out. */
mi_error *mi_bson_from_json(const char *json, mi_buffer *out);
/* BSON document -> relaxed Extended JSON in *out (free with mi_string_free). */
mi_error *mi_bson_to_json(const uint8_t *bson, size_t len, char **out);

/* ---- clients ---- */

/* Creates a client from a connection string. Parses and validates only: no
 * network I/O until the first operation. *out is freed with mi_client_free.
 * With MONGO_INLINE_STATE_FILE set (and not empty) the client starts warm
 * from that file and leaves there its SCRAM keys (sealed under the
 * password), the TLS chains it verified and its DNS answers (until their
 * TTL); a file or directory others could read or write is an error here. */
mi_error *mi_client_new(const char *uri, mi_client **out);
/* MONGODB-OIDC's machine callback: writes an access token of at most
 * capacity bytes into token (no NUL needed) and returns its length, or a
 * negative number when it has none. timeout_ms is the time left (-1: none);
 * username is the connection string's user or NULL. */
typedef int64_t (*mi_oidc_callback)(void *user_data, int64_t timeout_ms, const char *username,
                                    char *token, size_t capacity);
/* Like mi_client_new, for a connection string with authMechanism=MONGODB-OIDC
 * and no ENVIRONMENT: access tokens come from callback, called inline when one
 * is needed. callback and user_data must stay usable while the client lives. */
mi_error *mi_client_new_with_oidc_callback(const char *uri, mi_oidc_callback callback,
                                           void *user_data, mi_client **out);
/* Ends the client's server sessions (endSessions, not awaited), closes its
 * sockets and frees the handle. NULL is a no-op. */
void mi_client_free(mi_client *client);
/* Registers (callback NULL: removes) the command and SDAM event callback.
 * The first registration must come before the client's first operation or
 * session (MI_ERROR_CLIENT otherwise); later ones replace it at any time.
 * callback and user_data must stay usable while the client lives. */
mi_error *mi_client_set_event_callback(mi_client *client, mi_event_callback callback,
                                       void *user_data);
/* Registers (callback NULL: removes) the process-wide log callback for
 * records up to max_level (0 off, 1 error ... 5 trace). MI_ERROR_CLIENT if
 * the process already has another Rust `log` logger. */
mi_error *mi_set_log_callback(mi_log_callback callback, void *user_data, int32_t max_level);
/* The retry tokens left in the client's backpressure bucket (1000 when
 * full); *has_bucket is false when its retry settings use no bucket. */
mi_error *mi_client_retry_tokens(mi_client *client, double *tokens, bool *has_bucket);
/* Appends a wrapping library's name, and its version and platform unless
 * NULL, to the client metadata of the handshake of every socket opened from
 * now on (open sockets keep theirs). Metadata equal to metadata already
 * appended adds nothing; a value containing '|' is an MI_ERROR_ARGUMENT. */
mi_error *mi_client_append_metadata(mi_client *client, const char *name, const char *version,
                                    const char *platform);
/* Runs command on database db (on the primary), in session unless it is
 * NULL; the reply goes to *reply. A reply with ok: 0 is an MI_ERROR_COMMAND
 * error. */
mi_error *mi_client_run_command(mi_client *client, mi_session *session, const char *db,
                                const uint8_t *command, size_t command_len, mi_buffer *reply);

/* ---- sessions and transactions ---- */

/* Starts an explicit session of client; options {causalConsistency,
 * snapshot, snapshotTime, defaultTimeoutMS, defaultTransactionOptions} or NULL. *out is freed with mi_session_free. */
mi_error *mi_session_start(mi_client *client, const uint8_t *options, size_t options_len,
                           mi_session **out);
/* Frees the handle; the session ends (aborting an open transaction) then,
 * or when the last cursor opened in it is freed. NULL: no-op. */
void mi_session_free(mi_session *session);
/* The session's id (lsid) as a BSON document in *out. */
mi_error *mi_session_id(mi_session *session, mi_buffer *out);
/* *out = {snapshotTime: Timestamp} of a snapshot session, {} before its first read. */
mi_error *mi_session_snapshot_time(mi_session *session, mi_buffer *out);
/* Starts a transaction; the session's next operation begins it. options
 * override the session's defaults: {readConcern: {level}, writeConcern: {w,
 * j, wtimeout}, readPreference, maxCommitTimeMS} or NULL. */
mi_error *mi_session_start_transaction(mi_session *session, const uint8_t *options,
                                       size_t options_len);
/* Commits the transaction (MI_ERROR_CLIENT if none was started); options
 * {timeoutMS} or NULL (then the session's defaultTimeoutMS, else the
 * client's timeoutMS). */
mi_error *mi_session_commit_transaction(mi_session *session, const uint8_t *options,
                                        size_t options_len);
/* Aborts the transaction (MI_ERROR_CLIENT if none was started); options as
 * for mi_session_commit_transaction. */
mi_error *mi_session_abort_transaction(mi_session *session, const uint8_t *options,
                                       size_t options_len);
/* A transaction's body: runs its operations in session; returns NULL to
 * commit, or an mi_error (the library takes it over and frees it) to abort.
 * Return the error an operation gave as it is: its labels decide retries.
 * It must not unwind (no C++ exception, no longjmp out of it) and must not
 * free session: a binding catches its language's exception, keeps it, and
 * returns mi_error_new(...). */
typedef mi_error *(*mi_transaction_callback)(void *user_data, mi_session *session);
/* Runs callback in a transaction and commits it, retrying the whole
 * transaction on a TransientTransactionError label and the commit on
 * UnknownTransactionCommitResult, for up to 120 s (or timeoutMS: the
 * options', the session's defaultTimeoutMS, the client's). The callback's
 * error aborts the transaction and is returned as the callback gave it.
 * options as for mi_session_start_transaction, and timeoutMS. */
mi_error *mi_session_with_transaction(mi_session *session, mi_transaction_callback callback,
                                      void *user_data, const uint8_t *options,
                                      size_t options_len);
/* A new error (for a transaction callback to return); an unknown domain
 * becomes MI_ERROR_CLIENT; message NULL gives "(no message)". */
mi_error *mi_error_new(int32_t domain, int32_t code, const char *message);

/* ---- CRUD ----
 * Every operation takes the client, an optional session (NULL: an implicit
 * one; a session of another client is an MI_ERROR_ARGUMENT error), the
 * database and collection names. options are BSON documents or NULL; an
 * unknown option is an MI_ERROR_ARGUMENT error. A cursor opened in a session
 * fetches its further batches in that session. An empty or invalid database
 * or collection name (MongoDB's naming rules) is an MI_ERROR_ARGUMENT error
 * before anything is sent. A write sent with w: 0 (e.g. w=0 in the URI) gets
 * no reply: its *result is {acknowledged: false}, without ids or counts. */

/* Inserts one document (an _id is generated if it has none); options
 * {bypassDocumentValidation, writeConcern, comment}; *result = {insertedId}. */
mi_error *mi_insert_one(mi_client *client, mi_session *session, const char *db,
                        const char *coll, const uint8_t *document, size_t document_len,
                        const uint8_t *options, size_t options_len, mi_buffer *result);
/* Inserts count documents (documents[i] of lengths[i] bytes), in batches the
 * server accepts; options {ordered, bypassDocumentValidation, writeConcern,
 * comment}; *result = {insertedIds: {"0": id, ...}}. */
mi_error *mi_insert_many(mi_client *client, mi_session *session, const char *db,
                         const char *coll, const uint8_t *const *documents,
                         const size_t *lengths, size_t count, const uint8_t *options,
                         size_t options_len, mi_buffer *result);
/* Updates the first document matching filter; options {upsert,
 * arrayFilters, collation, hint, sort, let, writeConcern, comment, ...};
 * *result = {matchedCount, modifiedCount, upsertedId?}. */
mi_error *mi_update_one(mi_client *client, mi_session *session, const char *db,
                        const char *coll, const uint8_t *filter, size_t filter_len,
                        const uint8_t *update, size_t update_len, const uint8_t *options,
                        size_t options_len, mi_buffer *result);
/* As mi_update_one, for every matching document. */
mi_error *mi_update_many(mi_client *client, mi_session *session, const char *db,
                         const char *coll, const uint8_t *filter, size_t filter_len,
                         const uint8_t *update, size_t update_len, const uint8_t *options,
                         size_t options_len, mi_buffer *result);
/* Deletes the first document matching filter; options {collation, hint,
 * let, writeConcern, comment}; *result = {deletedCount}. */
mi_error *mi_delete_one(mi_client *client, mi_session *session, const char *db,
                        const char *coll, const uint8_t *filter, size_t filter_len,
                        const uint8_t *options, size_t options_len, mi_buffer *result);
/* Deletes every document matching filter; as mi_delete_one otherwise. */
mi_error *mi_delete_many(mi_client *client, mi_session *session, const char *db,
                         const char *coll, const uint8_t *filter, size_t filter_len,
                         const uint8_t *options, size_t options_len, mi_buffer *result);
/* How many documents match filter; options {limit, skip, hint, collation,
 * maxTimeMS, readConcern, readPreference, comment}. */
mi_error *mi_count_documents(mi_client *client, mi_session *session, const char *db,
                             const char *coll, const uint8_t *filter, size_t filter_len,
                             const uint8_t *options, size_t options_len, uint64_t *count);
/* The documents matching filter; options {sort, projection, limit, skip,
 * batchSize, hint, collation, maxTimeMS, let, readPreference, ...}.
 * *out is freed with mi_cursor_free. */
mi_error *mi_find(mi_client *client, mi_session *session, const char *db, const char *coll,
                  const uint8_t *filter, size_t filter_len, const uint8_t *options,
                  size_t options_len, mi_cursor **out);
/* Runs the pipeline of count stages; options {batchSize, allowDiskUse,
 * collation, hint, let, maxTimeMS, readPreference, writeConcern, ...}.
 * *out is freed with mi_cursor_free. */
mi_error *mi_aggregate(mi_client *client, mi_session *session, const char *db,
                       const char *coll, const uint8_t *const *stages, const size_t *lengths,
                       size_t count, const uint8_t *options, size_t options_len,
                       mi_cursor **out);

/* Replaces the first document matching filter; options {upsert, collation,
 * hint, sort, let, writeConcern, bypassDocumentValidation, comment};
 * *result = {matchedCount, modifiedCount, upsertedId?}. */
mi_error *mi_replace_one(mi_client *client, mi_session *session, const char *db,
                         const char *coll, const uint8_t *filter, size_t filter_len,
                         const uint8_t *replacement, size_t replacement_len,
                         const uint8_t *options, size_t options_len, mi_buffer *result);
/* The first document matching filter in *result ({NULL, 0}: none); options
 * {sort, projection, skip, hint, collation, maxTimeMS, readPreference, ...}. */
mi_error *mi_find_one(mi_client *client, mi_session *session, const char *db,
                      const char *coll, const uint8_t *filter, size_t filter_len,
                      const uint8_t *options, size_t options_len, mi_buffer *result);
/* Updates the first match and returns it in *result ({NULL, 0}: none),
 * as it was unless options say returnDocument: "after"; options {sort,
 * projection, upsert, returnDocument, arrayFilters, collation, hint, ...}. */
mi_error *mi_find_one_and_update(mi_client *client, mi_session *session, const char *db,
                                 const char *coll, const uint8_t *filter, size_t filter_len,
                                 const uint8_t *update, size_t update_len,
                                 const uint8_t *options, size_t options_len,
                                 mi_buffer *result);
/* Replaces the first match and returns it as mi_find_one_and_update does. */
mi_error *mi_find_one_and_replace(mi_client *client, mi_session *session, const char *db,
                                  const char *coll, const uint8_t *filter, size_t filter_len,
                                  const uint8_t *replacement, size_t replacement_len,
                                  const uint8_t *options, size_t options_len,
                                  mi_buffer *result);
/* Deletes the first match and returns it in *result ({NULL, 0}: none);
 * options {sort, projection, collation, hint, ...}. */
mi_error *mi_find_one_and_delete(mi_client *client, mi_session *session, const char *db,
                                 const char *coll, const uint8_t *filter, size_t filter_len,
                                 const uint8_t *options, size_t options_len,
                                 mi_buffer *result);
/* The distinct values of field among the matches: *result = {values: [...]}. */
mi_error *mi_distinct(mi_client *client, mi_session *session, const char *db,
                      const char *coll, const char *field, const uint8_t *filter,
                      size_t filter_len, const uint8_t *options, size_t options_len,
                      mi_buffer *result);
/* The collection's count from its metadata; options {maxTimeMS, comment, ...}. */
mi_error *mi_estimated_document_count(mi_client *client, mi_session *session, const char *db,
                                      const char *coll, const uint8_t *options,
                                      size_t options_len, uint64_t *count);
/* Runs count write models, each {insertOne: {document}}, {updateOne |
 * updateMany: {filter, update, upsert?, arrayFilters?, collation?, hint?}},
 * {replaceOne: {filter, replacement, ...}} or {deleteOne | deleteMany:
 * {filter, ...}}; options {ordered, bypassDocumentValidation, let, ...};
 * *result = {acknowledged, insertedCount, matchedCount, modifiedCount,
 * deletedCount, upsertedCount, insertedIds: {"i": id}, upsertedIds}. */
mi_error *mi_bulk_write(mi_client *client, mi_session *session, const char *db,
                        const char *coll, const uint8_t *const *models, const size_t *lengths,
                        size_t count, const uint8_t *options, size_t options_len,
                        mi_buffer *result);
/* Runs count write models on any collections (MongoDB 8.0's bulkWrite), each
 * as for mi_bulk_write with the collection named in it: {insertOne:
 * {namespace: "db.coll", document}}, {updateOne | updateMany: {namespace,
 * filter, update, ...}}, {replaceOne: {namespace, filter, replacement, ...}},
 * {deleteOne | deleteMany: {namespace, filter, ...}}; options {ordered,
 * bypassDocumentValidation, let, comment, writeConcern, verboseResults};
 * *result = {insertedCount, matchedCount, modifiedCount, deletedCount,
 * upsertedCount}, with verboseResults also insertResults: {"i": {insertedId}},
 * updateResults: {"i": {matchedCount, modifiedCount, upsertedId?}} and
 * deleteResults: {"i": {deletedCount}}. Failed writes or write concerns: an
 * MI_ERROR_WRITE error whose details are {writeErrors: {"i": {code, message}},
 * writeConcernErrors: [{code, message}], partialResult?: what succeeded}. */
mi_error *mi_client_bulk_write(mi_client *client, mi_session *session,
                               const uint8_t *const *models, const size_t *lengths,
                               size_t count, const uint8_t *options, size_t options_len,
                               mi_buffer *result);

/* ---- indexes, collections, databases ---- */

/* Creates count indexes, each its specification {key: {...}, name?, unique?,
 * expireAfterSeconds?, partialFilterExpression?, ...}; options {commitQuorum,
 * maxTimeMS, writeConcern, comment}; *result = {indexNames: [...]}. */
mi_error *mi_create_indexes(mi_client *client, mi_session *session, const char *db,
                            const char *coll, const uint8_t *const *indexes,
                            const size_t *lengths, size_t count, const uint8_t *options,
                            size_t options_len, mi_buffer *result);
/* The collection's index specifications as a cursor; options {batchSize, ...}. */
mi_error *mi_list_indexes(mi_client *client, mi_session *session, const char *db,
                          const char *coll, const uint8_t *options, size_t options_len,
                          mi_cursor **out);
/* *result = {names: [...]}, the collection's index names; no options (NULL). */
mi_error *mi_list_index_names(mi_client *client, mi_session *session, const char *db,
                              const char *coll, const uint8_t *options, size_t options_len,
                              mi_buffer *result);
/* Drops the index called name; options {maxTimeMS, writeConcern, comment}. */
mi_error *mi_drop_index(mi_client *client, mi_session *session, const char *db,
                        const char *coll, const char *name, const uint8_t *options,
                        size_t options_len);
/* Drops every index but _id's; options as mi_drop_index. */
mi_error *mi_drop_indexes(mi_client *client, mi_session *session, const char *db,
                          const char *coll, const uint8_t *options, size_t options_len);
/* Creates Atlas Search indexes from models {definition, name, type}; a type other
 * than "search" or "vectorSearch" is sent as given, for the server to judge;
 * *result = {indexNames: [...]}. No options (NULL). */
mi_error *mi_create_search_indexes(mi_client *client, mi_session *session, const char *db,
                                   const char *coll, const uint8_t *const *models,
                                   const size_t *lengths, size_t count, const uint8_t *options,
                                   size_t options_len, mi_buffer *result);
/* Replaces the definition of the search index called name. No options (NULL). */
mi_error *mi_update_search_index(mi_client *client, mi_session *session, const char *db,
                                 const char *coll, const char *name, const uint8_t *definition,
                                 size_t definition_len, const uint8_t *options,
                                 size_t options_len);
/* Drops the search index called name. No options (NULL). */
mi_error *mi_drop_search_index(mi_client *client, mi_session *session, const char *db,
                               const char *coll, const char *name, const uint8_t *options,
                               size_t options_len);
/* The search indexes as a cursor; options {name, batchSize, comment, ...}. */
mi_error *mi_list_search_indexes(mi_client *client, mi_session *session, const char *db,
                                 const char *coll, const uint8_t *options, size_t options_len,
                                 mi_cursor **out);
/* Drops the collection (no error if it does not exist); options {writeConcern}. */
mi_error *mi_drop_collection(mi_client *client, mi_session *session, const char *db,
                             const char *coll, const uint8_t *options, size_t options_len);
/* Creates collection name; options {capped, size, max, validator,
 * validationLevel, validationAction, viewOn, pipeline, timeseries,
 * expireAfterSeconds, clusteredIndex, collation, writeConcern, ...}. */
mi_error *mi_create_collection(mi_client *client, mi_session *session, const char *db,
                               const char *name, const uint8_t *options, size_t options_len);
/* Drops database db; options {writeConcern}. */
mi_error *mi_drop_database(mi_client *client, mi_session *session, const char *db,
                           const uint8_t *options, size_t options_len);
/* The collections of db as a cursor of listCollections specifications;
 * options {filter, nameOnly?, batchSize, authorizedCollections, comment}. */
mi_error *mi_list_collections(mi_client *client, mi_session *session, const char *db,
                              const uint8_t *options, size_t options_len, mi_cursor **out);
/* *result = {names: [...]}, the collections of db; options as above. */
mi_error *mi_list_collection_names(mi_client *client, mi_session *session, const char *db,
                                   const uint8_t *options, size_t options_len,
                                   mi_buffer *result);
/* A database-level pipeline ($currentOp, $documents, ...) as a cursor. */
mi_error *mi_database_aggregate(mi_client *client, mi_session *session, const char *db,
                                const uint8_t *const *stages, const size_t *lengths,
                                size_t count, const uint8_t *options, size_t options_len,
                                mi_cursor **out);
/* Runs command on database db (on the primary unless options say
 * readPreference); the reply goes to *reply, one with ok: 0 is an
 * MI_ERROR_COMMAND error. options {readPreference, timeoutMS} or NULL
 * (mi_client_run_command is this without options). */
mi_error *mi_run_command(mi_client *client, mi_session *session, const char *db,
                         const uint8_t *command, size_t command_len, const uint8_t *options,
                         size_t options_len, mi_buffer *reply);
/* Runs command, one that opens a cursor (find, aggregate, ...), on database
 * db as given; the cursor goes to *out. options {batchSize, maxTimeMS,
 * comment} (for the getMores), cursorType, readPreference, timeoutMS,
 * timeoutMode. A reply without a cursor is an error. */
mi_error *mi_run_cursor_command(mi_client *client, mi_session *session, const char *db,
                                const uint8_t *command, size_t command_len,
                                const uint8_t *options, size_t options_len, mi_cursor **out);
/* *result = {databases: [{name, sizeOnDisk, empty, shards?}]}; options
 * {filter, authorizedDatabases, comment}. */
mi_error *mi_list_databases(mi_client *client, mi_session *session, const uint8_t *options,
                            size_t options_len, mi_buffer *result);
/* *result = {names: [...]}; options as mi_list_databases. */
mi_error *mi_list_database_names(mi_client *client, mi_session *session,
                                 const uint8_t *options, size_t options_len,
                                 mi_buffer *result);

/* ---- GridFS ----
 * A file id goes in as a document whose first value is the id, e.g.
 * {"_id": {"$oid": "..."}}. Streams work on after their bucket is freed. */

/* A bucket of db ("fs" unless options say bucketName); options {bucketName,
 * chunkSizeBytes, writeConcern, readConcern, readPreference, timeoutMS (of
 * each of its operations)}. No I/O. */
mi_error *mi_gridfs_bucket_new(mi_client *client, const char *db, const uint8_t *options,
                               size_t options_len, mi_gridfs_bucket **out);
/* Frees the bucket handle. NULL: no-op. */
void mi_gridfs_bucket_free(mi_gridfs_bucket *bucket);
/* Opens an upload of filename; options {chunkSizeBytes, metadata, id}.
 * Nothing is stored until mi_gridfs_upload_close. */
mi_error *mi_gridfs_open_upload_stream(mi_gridfs_bucket *bucket, const char *filename,
                                       const uint8_t *options, size_t options_len,
                                       mi_gridfs_upload **out);
/* Writes len bytes (whole chunks are sent as they fill). */
mi_error *mi_gridfs_upload_write(mi_gridfs_upload *upload, const uint8_t *data, size_t len);
/* *result = {_id: the file's id}. */
mi_error *mi_gridfs_upload_id(mi_gridfs_upload *upload, mi_buffer *result);
/* Stores the last chunk and the files document: the file exists once this
 * succeeds. Closing twice or after an abort: MI_ERROR_CLIENT. */
mi_error *mi_gridfs_upload_close(mi_gridfs_upload *upload);
/* Stops the upload and deletes the chunks written so far. */
mi_error *mi_gridfs_upload_abort(mi_gridfs_upload *upload);
/* Frees the handle; an upload neither closed nor aborted is aborted. NULL: no-op. */
void mi_gridfs_upload_free(mi_gridfs_upload *upload);
/* Opens the file with the id in id for reading; options {timeoutMS} or NULL. */
mi_error *mi_gridfs_open_download_stream(mi_gridfs_bucket *bucket, const uint8_t *id,
                                         size_t id_len, const uint8_t *options,
                                         size_t options_len, mi_gridfs_download **out);
/* Opens a revision of filename; options {revision} (-1 newest, 0 oldest). */
mi_error *mi_gridfs_open_download_stream_by_name(mi_gridfs_bucket *bucket, const char *filename,
                                                 const uint8_t *options, size_t options_len,
                                                 mi_gridfs_download **out);
/* Reads up to capacity bytes into buffer; *read is 0 at the end. */
mi_error *mi_gridfs_download_read(mi_gridfs_download *download, uint8_t *buffer,
                                  size_t capacity, size_t *read);
/* *result = the file's files document {_id, length, chunkSize, uploadDate,
 * filename, metadata?}. */
mi_error *mi_gridfs_download_file(mi_gridfs_download *download, mi_buffer *result);
/* Frees the handle. NULL: no-op. */
void mi_gridfs_download_free(mi_gridfs_download *download);
/* Deletes the file with the id in id (chunks first). */
mi_error *mi_gridfs_delete(mi_gridfs_bucket *bucket, const uint8_t *id, size_t id_len);
/* Deletes every revision of filename. */
mi_error *mi_gridfs_delete_by_name(mi_gridfs_bucket *bucket, const char *filename);
/* The files documents matching filter as a cursor; options {sort, limit,
 * skip, batchSize, maxTimeMS, allowDiskUse}. */
mi_error *mi_gridfs_find(mi_gridfs_bucket *bucket, const uint8_t *filter, size_t filter_len,
                         const uint8_t *options, size_t options_len, mi_cursor **out);
/* The first matching files document in *result ({NULL, 0}: none); options
 * {sort, skip, maxTimeMS}. */
mi_error *mi_gridfs_find_one(mi_gridfs_bucket *bucket, const uint8_t *filter,
                             size_t filter_len, const uint8_t *options, size_t options_len,
                             mi_buffer *result);
/* Renames the file with the id in id. */
mi_error *mi_gridfs_rename(mi_gridfs_bucket *bucket, const uint8_t *id, size_t id_len,
                           const char *new_filename);
/* Renames every revision of filename. */
mi_error *mi_gridfs_rename_by_name(mi_gridfs_bucket *bucket, const char *filename,
                                   const char *new_filename);
/* Drops the bucket's files and chunks collections. */
mi_error *mi_gridfs_drop(mi_gridfs_bucket *bucket);

/* ---- change streams ---- */

/* Opens a change stream on db.coll, on all of db when coll is NULL, or on
 * the deployment when db is NULL too, in session unless it is NULL (every
 * later call on the stream then uses it); count stages ($match, $project, ...)
 * follow $changeStream; options {fullDocument, fullDocumentBeforeChange,
 * resumeAfter, startAfter, startAtOperationTime, maxAwaitTimeMS, batchSize,
 * collation, comment, showExpandedEvents, readConcern, readPreference}. A
 * resumable error is resumed once, as the spec says. *out is freed with
 * mi_change_stream_free. */
mi_error *mi_watch(mi_client *client, mi_session *session, const char *db, const char *coll,
                   const uint8_t *const *stages, const size_t *lengths, size_t count,
                   const uint8_t *options, size_t options_len, mi_change_stream **out);
/* Waits for the next event (getMores of up to maxAwaitTimeMS each, until one
 * comes): *document borrowed until the next call on the stream; NULL once
 * the stream has ended (an invalidate). */
mi_error *mi_change_stream_next(mi_change_stream *stream, const uint8_t **document,
                                size_t *len);
/* The next event if one is in hand or comes with one getMore (at most
 * maxAwaitTimeMS on the server), else *document NULL: the bounded wait. */
mi_error *mi_change_stream_try_next(mi_change_stream *stream, const uint8_t **document,
                                    size_t *len);
/* *result = {resumeToken: token} after the last event handed out ({NULL, 0}
 * before there is one); give it back as the resumeAfter option. */
mi_error *mi_change_stream_resume_token(mi_change_stream *stream, mi_buffer *result);
/* *alive: whether more events may come. */
mi_error *mi_change_stream_is_alive(mi_change_stream *stream, bool *alive);
/* Closes the stream (killCursors) and frees it. NULL: no-op. */
void mi_change_stream_free(mi_change_stream *stream);

/* ---- cursors ---- */

/* The next document in *document (*len bytes), borrowed until the next call
 * on the cursor or its free; *document is NULL at the end. Fetches the next
 * batch from the server when the current one is used up. */
mi_error *mi_cursor_next(mi_cursor *cursor, const uint8_t **document, size_t *len);
/* The next document if one is in hand or comes with one getMore (tryNext),
 * else *document NULL; for a tailable cursor NULL means nothing new yet. */
mi_error *mi_cursor_try_next(mi_cursor *cursor, const uint8_t **document, size_t *len);
/* Closes the cursor (killCursors if the server still holds it) and frees
 * it. NULL is a no-op. */
void mi_cursor_free(mi_cursor *cursor);
/* mi_cursor_free with its killCursors (if the server still holds the
 * cursor) bounded by timeout_ms instead of the timeoutMS of the operation
 * that opened the cursor. NULL is a no-op. */
void mi_cursor_close(mi_cursor *cursor, uint64_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* MONGO_INLINE_H */
