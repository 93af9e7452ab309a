/*
 * Calls every function of include/mongo_inline.h, the error paths included
 * (bad URI, unreachable server, bad BSON, NULL handles, unknown options).
 * Usage: capi_test URI   (a SecantusDB replica set started with
 * --enable-test-commands; .ci/capi starts one).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mongo_inline.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        checks++;                                                                \
        if (!(cond)) {                                                           \
            failures++;                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

/* Fails the check (and prints the error) unless err is NULL; frees it. */
#define OK(expr)                                                                 \
    do {                                                                         \
        mi_error *ok_err_ = (expr);                                              \
        checks++;                                                                \
        if (ok_err_) {                                                           \
            failures++;                                                          \
            fprintf(stderr, "%s:%d: %s failed: [%d/%d] %s\n", __FILE__, __LINE__, \
                    #expr, ok_err_->domain, ok_err_->code, ok_err_->message);    \
            mi_error_free(ok_err_);                                              \
        }                                                                        \
    } while (0)

/* Checks that err is an error of domain and that its message contains
 * needle (when not NULL); frees it. */
static void expect_error(mi_error *err, int domain, const char *needle, int line) {
    checks++;
    if (!err) {
        failures++;
        fprintf(stderr, "line %d: expected an error of domain %d, got success\n", line, domain);
        return;
    }
    if (err->domain != domain || err->message == NULL ||
        (needle && strstr(err->message, needle) == NULL)) {
        failures++;
        fprintf(stderr, "line %d: expected domain %d containing \"%s\", got [%d/%d] %s\n", line,
                domain, needle ? needle : "", err->domain, err->code,
                err->message ? err->message : "(null)");
    }
    mi_error_free(err);
}
#define EXPECT_ERROR(expr, domain, needle) expect_error((expr), (domain), (needle), __LINE__)

/* A BSON document from Extended JSON; aborts the test on failure. */
static mi_buffer bson(const char *json) {
    mi_buffer out = {NULL, 0};
    mi_error *err = mi_bson_from_json(json, &out);
    if (err) {
        fprintf(stderr, "bad test JSON %s: %s\n", json, err->message);
        exit(2);
    }
    return out;
}

/* Whether the JSON form of a BSON buffer contains needle. */
static int json_contains(const uint8_t *data, size_t len, const char *needle) {
    char *json = NULL;
    mi_error *err = mi_bson_to_json(data, len, &json);
    if (err) {
        mi_error_free(err);
        return 0;
    }
    int found = strstr(json, needle) != NULL;
    if (!found) fprintf(stderr, "  (%s not in %s)\n", needle, json);
    mi_string_free(json);
    return found;
}

/* As json_contains, silent when needle is missing (for filtering events). */
static int json_has(const uint8_t *data, size_t len, const char *needle) {
    char *json = NULL;
    mi_error *err = mi_bson_to_json(data, len, &json);
    if (err) {
        mi_error_free(err);
        return 0;
    }
    int found = strstr(json, needle) != NULL;
    mi_string_free(json);
    return found;
}

static int events_started = 0, events_succeeded = 0, events_failed = 0, events_sdam = 0;
static int insert_started_with_lsid = 0;

/* Structured fields seen: a started ping with its database and server, a
 * failure with its code, a heartbeat with its duration, a topology change
 * with both descriptions. */
static int fields_ping = 0, fields_failure = 0, fields_heartbeat = 0, fields_topology = 0;
static int fields_missing = 0;

static void check_fields(const mi_event *event) {
    if (!event->fields) {
        fields_missing++;
        return;
    }
    const uint8_t *f = event->fields;
    size_t n = event->fields_len;
    if (event->kind == MI_EVENT_COMMAND_STARTED && strcmp(event->command_name, "ping") == 0 &&
        json_has(f, n, "\"event\":\"commandStartedEvent\"") &&
        json_has(f, n, "\"databaseName\":\"admin\"") &&
        json_has(f, n, "\"serverPort\"") && json_has(f, n, "\"requestId\""))
        fields_ping++;
    if (event->kind == MI_EVENT_COMMAND_FAILED &&
        json_has(f, n, "\"failure\":{\"message\"") && json_has(f, n, "\"code\":59"))
        fields_failure++;
    if (event->kind == MI_EVENT_SDAM &&
        json_has(f, n, "\"event\":\"serverHeartbeatSucceededEvent\"") &&
        json_has(f, n, "\"duration\"") && json_has(f, n, "\"reply\""))
        fields_heartbeat++;
    if (event->kind == MI_EVENT_SDAM &&
        json_has(f, n, "\"event\":\"topologyDescriptionChangedEvent\"") &&
        json_has(f, n, "\"previousDescription\"") &&
        json_has(f, n, "\"newDescription\":{\"type\""))
        fields_topology++;
}

static void on_event(void *user_data, const mi_event *event) {
    int *calls = user_data;
    (*calls)++;
    check_fields(event);
    switch (event->kind) {
    case MI_EVENT_COMMAND_STARTED:
        events_started++;
        if (strcmp(event->command_name, "insert") == 0 && event->document &&
            json_contains(event->document, event->document_len, "\"lsid\"")) {
            insert_started_with_lsid++;
        }
        break;
    case MI_EVENT_COMMAND_SUCCEEDED: events_succeeded++; break;
    case MI_EVENT_COMMAND_FAILED: events_failed++; break;
    case MI_EVENT_SDAM: events_sdam++; break;
    default: break;
    }
}

static int log_records = 0;
static void on_log(void *user_data, int32_t level, const char *target, const char *message) {
    (void)user_data;
    if (level >= 1 && level <= 5 && target && message && strncmp(target, "mongo_inline", 12) == 0)
        log_records++;
}

/* Callbacks that call into their own client: each such call must fail at
 * once with MI_ERROR_CLIENT saying why (not wait for itself forever), and
 * the operation that raised the event must still complete. */
static mi_client *reentry_client = NULL;
static int reentry_depth = 0, reentry_refused = 0, reentry_failed = 0;

static void call_into_own_client(void) {
    if (!reentry_client || reentry_depth > 0)
        return;
    reentry_depth++;
    mi_buffer ping = bson("{\"ping\": 1}");
    mi_buffer reply = {NULL, 0};
    mi_error *err =
        mi_client_run_command(reentry_client, NULL, "admin", ping.data, ping.len, &reply);
    if (err && err->domain == MI_ERROR_CLIENT && err->message &&
        strstr(err->message, "from inside an event or log callback of the same client")) {
        reentry_refused++;
    } else if (err) {
        /* A log record from outside the operation may run a command: only
         * another error is wrong. */
        reentry_failed++;
        fprintf(stderr, "callback's call: [%d/%d] %s\n", err->domain, err->code, err->message);
    }
    mi_error_free(err);
    mi_buffer_free(&reply);
    mi_buffer_free(&ping);
    reentry_depth--;
}

static void reenter_on_event(void *user_data, const mi_event *event) {
    (void)user_data;
    (void)event;
    call_into_own_client();
}

static void reenter_on_log(void *user_data, int32_t level, const char *target,
                           const char *message) {
    (void)user_data;
    (void)level;
    (void)target;
    (void)message;
    call_into_own_client();
}

/* The code SecantusDB refuses search index commands with (CommandNotSupported). */
#define SEARCH_REFUSAL 115

static void test_callbacks_calling_their_own_client(const char *uri) {
    mi_buffer ping = bson("{\"ping\": 1}");
    mi_buffer reply = {NULL, 0};
    OK(mi_client_new(uri, &reentry_client));
    OK(mi_client_set_event_callback(reentry_client, reenter_on_event, NULL));
    OK(mi_client_run_command(reentry_client, NULL, "admin", ping.data, ping.len, &reply));
    mi_buffer_free(&reply);
    CHECK(reentry_refused > 0);
    OK(mi_client_set_event_callback(reentry_client, NULL, NULL));

    int refused = reentry_refused;
    OK(mi_set_log_callback(reenter_on_log, NULL, 5));
    OK(mi_client_run_command(reentry_client, NULL, "admin", ping.data, ping.len, &reply));
    OK(mi_set_log_callback(NULL, NULL, 0));
    mi_buffer_free(&reply);
    CHECK(reentry_refused > refused);
    CHECK(reentry_failed == 0);

    mi_client *client = reentry_client;
    reentry_client = NULL;
    mi_client_free(client);
    mi_buffer_free(&ping);
}

static void test_bson_helpers(void) {
    mi_buffer doc = bson("{\"a\": 1, \"b\": {\"$numberLong\": \"5\"}, \"s\": \"x\"}");
    CHECK(doc.data != NULL && doc.len > 5);
    char *json = NULL;
    OK(mi_bson_to_json(doc.data, doc.len, &json));
    CHECK(json && strstr(json, "\"a\":1") && strstr(json, "\"s\":\"x\""));
    mi_string_free(json);

    /* bad BSON: the length prefix disagrees with the length given */
    json = NULL;
    EXPECT_ERROR(mi_bson_to_json(doc.data, doc.len - 1, &json), MI_ERROR_ARGUMENT, "not BSON");
    CHECK(json == NULL);
    uint8_t garbage[] = {12, 0, 0, 0, 0x02, 'a', 0, 0xff, 0xff, 0xff, 0x7f, 0};
    EXPECT_ERROR(mi_bson_to_json(garbage, sizeof garbage, &json), MI_ERROR_ARGUMENT, "not BSON");
    EXPECT_ERROR(mi_bson_to_json(NULL, 5, &json), MI_ERROR_ARGUMENT, "`bson` is NULL");
    EXPECT_ERROR(mi_bson_to_json(doc.data, doc.len, NULL), MI_ERROR_ARGUMENT, "`out` is NULL");

    mi_buffer out = {NULL, 0};
    EXPECT_ERROR(mi_bson_from_json("{not json", &out), MI_ERROR_ARGUMENT, "not JSON");
    EXPECT_ERROR(mi_bson_from_json("[1, 2]", &out), MI_ERROR_ARGUMENT, "not a JSON object");
    EXPECT_ERROR(mi_bson_from_json("{\"x\": {\"$numberLong\": 5}}", &out), MI_ERROR_ARGUMENT, NULL);
    EXPECT_ERROR(mi_bson_from_json(NULL, &out), MI_ERROR_ARGUMENT, "`json` is NULL");
    EXPECT_ERROR(mi_bson_from_json("{}", NULL), MI_ERROR_ARGUMENT, "`out` is NULL");
    CHECK(out.data == NULL);

    mi_buffer_free(&doc);
    CHECK(doc.data == NULL && doc.len == 0);
    mi_buffer_free(&doc); /* freeing an emptied buffer is a no-op */
    mi_buffer_free(NULL);
    mi_string_free(NULL);
    mi_error_free(NULL);
    CHECK(!mi_error_has_label(NULL, "x"));
}

/* A MONGODB-OIDC token source in C: writes a fixed token. */
static int64_t oidc_token(void *user_data, int64_t timeout_ms, const char *username, char *token,
                          size_t capacity) {
    (void)user_data;
    (void)timeout_ms;
    (void)username;
    const char jwt[] = "header.payload.signature";
    if (capacity < sizeof jwt - 1) return -1;
    memcpy(token, jwt, sizeof jwt - 1);
    return (int64_t)(sizeof jwt - 1);
}

static void test_client_errors(const char *uri) {
    mi_client *client = NULL;
    EXPECT_ERROR(mi_client_new("mongodb://", &client), MI_ERROR_ARGUMENT, NULL);
    EXPECT_ERROR(mi_client_new("http://localhost", &client), MI_ERROR_ARGUMENT, NULL);
    EXPECT_ERROR(mi_client_new("mongodb://h:notaport/", &client),
                 MI_ERROR_ARGUMENT, NULL);
    EXPECT_ERROR(mi_client_new(NULL, &client), MI_ERROR_ARGUMENT, "`uri` is NULL");
    EXPECT_ERROR(mi_client_new(uri, NULL), MI_ERROR_ARGUMENT, "`out` is NULL");
    const char bad_utf8[] = {'m', 'o', (char)0xff, 0};
    EXPECT_ERROR(mi_client_new(bad_utf8, &client), MI_ERROR_ARGUMENT, "UTF-8");
    CHECK(client == NULL);
    mi_client_free(NULL);

    /* MONGODB-OIDC with a C callback: built without I/O (tests/cloud_auth.rs
     * authenticates with one); a NULL callback is refused. */
    const char *oidc_uri = "mongodb://h/?authMechanism=MONGODB-OIDC";
    EXPECT_ERROR(mi_client_new_with_oidc_callback(oidc_uri, NULL, NULL, &client), MI_ERROR_CLIENT,
                 "callback is NULL");
    OK(mi_client_new_with_oidc_callback(oidc_uri, oidc_token, NULL, &client));
    mi_client_free(client);
    client = NULL;

    /* Unreachable: nothing listens on port 1; selection gives up quickly. */
    OK(mi_client_new("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300",
                     &client));
    mi_buffer ping = bson("{\"ping\": 1}");
    mi_buffer reply = {NULL, 0};
    EXPECT_ERROR(mi_client_run_command(client, NULL, "admin", ping.data, ping.len, &reply),
                 MI_ERROR_SERVER_SELECTION, "127.0.0.1:1");
    CHECK(reply.data == NULL);
    mi_buffer_free(&ping);
    mi_client_free(client);
}

/* Every handle-taking function refuses NULL handles with an argument error. */
static void test_null_handles(void) {
    mi_buffer doc = bson("{}");
    mi_buffer out = {NULL, 0};
    const uint8_t *docs[] = {doc.data};
    size_t lens[] = {doc.len};
    mi_cursor *cursor = NULL;
    uint64_t count = 0;
    double tokens = 0;
    bool has_bucket = false;
    mi_session *session = NULL;
    const uint8_t *next = NULL;
    size_t next_len = 0;

    EXPECT_ERROR(mi_client_run_command(NULL, NULL, "db", doc.data, doc.len, &out), MI_ERROR_ARGUMENT,
                 "`client` is NULL");
    EXPECT_ERROR(mi_client_retry_tokens(NULL, &tokens, &has_bucket), MI_ERROR_ARGUMENT,
                 "`client` is NULL");
    EXPECT_ERROR(mi_client_set_event_callback(NULL, on_event, NULL), MI_ERROR_ARGUMENT,
                 "`client` is NULL");
    EXPECT_ERROR(mi_session_start(NULL, NULL, 0, &session), MI_ERROR_ARGUMENT, "`client` is NULL");
    EXPECT_ERROR(mi_session_id(NULL, &out), MI_ERROR_ARGUMENT, "`session` is NULL");
    EXPECT_ERROR(mi_session_start_transaction(NULL, NULL, 0), MI_ERROR_ARGUMENT, "`session` is NULL");
    EXPECT_ERROR(mi_session_commit_transaction(NULL, NULL, 0), MI_ERROR_ARGUMENT, "`session` is NULL");
    EXPECT_ERROR(mi_session_abort_transaction(NULL, NULL, 0), MI_ERROR_ARGUMENT, "`session` is NULL");
    EXPECT_ERROR(mi_insert_one(NULL, NULL, "db", "c", doc.data, doc.len, NULL, 0, &out), MI_ERROR_ARGUMENT,
                 "`client` is NULL");
    EXPECT_ERROR(mi_insert_many(NULL, NULL, "db", "c", docs, lens, 1, NULL, 0, &out), MI_ERROR_ARGUMENT,
                 "`client` is NULL");
    EXPECT_ERROR(mi_update_one(NULL, NULL, "db", "c", doc.data, doc.len, doc.data, doc.len, NULL, 0,
                               &out),
                 MI_ERROR_ARGUMENT, "`client` is NULL");
    EXPECT_ERROR(mi_update_many(NULL, NULL, "db", "c", doc.data, doc.len, doc.data, doc.len, NULL,
                                0, &out),
                 MI_ERROR_ARGUMENT, "`client` is NULL");
    EXPECT_ERROR(mi_delete_one(NULL, NULL, "db", "c", doc.data, doc.len, NULL, 0, &out), MI_ERROR_ARGUMENT,
                 "`client` is NULL");
    EXPECT_ERROR(mi_delete_many(NULL, NULL, "db", "c", doc.data, doc.len, NULL, 0, &out), MI_ERROR_ARGUMENT,
                 "`client` is NULL");
    EXPECT_ERROR(mi_count_documents(NULL, NULL, "db", "c", doc.data, doc.len, NULL, 0, &count),
                 MI_ERROR_ARGUMENT, "`client` is NULL");
    EXPECT_ERROR(mi_find(NULL, NULL, "db", "c", doc.data, doc.len, NULL, 0, &cursor),
                 MI_ERROR_ARGUMENT, "`client` is NULL");
    EXPECT_ERROR(mi_aggregate(NULL, NULL, "db", "c", docs, lens, 1, NULL, 0, &cursor),
                 MI_ERROR_ARGUMENT, "`client` is NULL");
    EXPECT_ERROR(mi_cursor_next(NULL, &next, &next_len), MI_ERROR_ARGUMENT, "`cursor` is NULL");
    CHECK(out.data == NULL && cursor == NULL && session == NULL);
    mi_session_free(NULL);
    mi_cursor_free(NULL);
    mi_buffer_free(&doc);
}

static void test_events_and_logs(const char *uri) {
    mi_client *client = NULL;
    int calls = 0;
    OK(mi_client_new(uri, &client));
    OK(mi_client_set_event_callback(client, on_event, &calls));
    OK(mi_set_log_callback(on_log, NULL, 5));
    EXPECT_ERROR(mi_set_log_callback(on_log, NULL, 9), MI_ERROR_ARGUMENT, "max_level");

    mi_buffer ping = bson("{\"ping\": 1}");
    mi_buffer reply = {NULL, 0};
    OK(mi_client_run_command(client, NULL, "admin", ping.data, ping.len, &reply));
    CHECK(json_contains(reply.data, reply.len, "\"ok\""));
    mi_buffer_free(&reply);
    CHECK(events_started >= 1 && events_succeeded >= 1 && events_sdam >= 1);
    CHECK(calls == events_started + events_succeeded + events_failed + events_sdam);
    CHECK(log_records > 0);

    mi_buffer unknown = bson("{\"noSuchCommand\": 1}");
    int failed_before = events_failed;
    EXPECT_ERROR(mi_client_run_command(client, NULL, "admin", unknown.data, unknown.len, &reply),
                 MI_ERROR_COMMAND, NULL);
    CHECK(events_failed == failed_before + 1);
    CHECK(fields_missing == 0 && fields_ping >= 1 && fields_failure == 1);
    CHECK(fields_heartbeat >= 1 && fields_topology >= 1);

    /* Replacing and removing the callback works after use. */
    OK(mi_client_set_event_callback(client, NULL, NULL));
    int before = calls;
    OK(mi_client_run_command(client, NULL, "admin", ping.data, ping.len, &reply));
    mi_buffer_free(&reply);
    CHECK(calls == before);

    OK(mi_set_log_callback(NULL, NULL, 0));
    int records = log_records;
    OK(mi_client_run_command(client, NULL, "admin", ping.data, ping.len, &reply));
    mi_buffer_free(&reply);
    CHECK(log_records == records);
    mi_client_free(client);

    /* The first registration after use is refused. */
    OK(mi_client_new(uri, &client));
    OK(mi_client_run_command(client, NULL, "admin", ping.data, ping.len, &reply));
    mi_buffer_free(&reply);
    EXPECT_ERROR(mi_client_set_event_callback(client, on_event, &calls), MI_ERROR_CLIENT,
                 "before the client's first operation");
    mi_client_free(client);
    mi_buffer_free(&ping);
    mi_buffer_free(&unknown);
}

static uint64_t count_all(mi_client *client, mi_session *session) {
    mi_buffer empty = bson("{}");
    uint64_t count = 0;
    OK(mi_count_documents(client, session, "capi", "people", empty.data, empty.len, NULL, 0,
                          &count));
    mi_buffer_free(&empty);
    return count;
}

static void test_crud(mi_client *client) {
    mi_buffer reply = {NULL, 0}, result = {NULL, 0};
    mi_buffer drop = bson("{\"drop\": \"people\"}");
    mi_error *err = mi_client_run_command(client, NULL, "capi", drop.data, drop.len, &reply);
    mi_error_free(err); /* a missing collection is fine */
    mi_buffer_free(&reply);
    mi_buffer_free(&drop);

    mi_buffer ada = bson("{\"_id\": 1, \"name\": \"Ada\", \"born\": 1815}");
    OK(mi_insert_one(client, NULL, "capi", "people", ada.data, ada.len, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"insertedId\":1"));
    mi_buffer_free(&result);

    /* Duplicate key: a write error with the server's code. */
    err = mi_insert_one(client, NULL, "capi", "people", ada.data, ada.len, NULL, 0, &result);
    CHECK(err && err->domain == MI_ERROR_WRITE && err->code == 11000);
    mi_error_free(err);

    /* Bad BSON in: length prefix and given length disagree. */
    EXPECT_ERROR(mi_insert_one(client, NULL, "capi", "people", ada.data, ada.len + 3, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "`document` is not BSON");
    EXPECT_ERROR(mi_insert_one(client, NULL, "capi", "people", ada.data, 3, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "shorter than 5 bytes");
    EXPECT_ERROR(mi_insert_one(client, NULL, NULL, "people", ada.data, ada.len, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "`db` is NULL");
    EXPECT_ERROR(mi_insert_one(client, NULL, "capi", "people", ada.data, ada.len, NULL, 0, NULL),
                 MI_ERROR_ARGUMENT, "`result` is NULL");
    mi_buffer_free(&ada);

    mi_buffer a = bson("{\"name\": \"Grace\", \"born\": 1906}");
    mi_buffer b = bson("{\"name\": \"Edsger\", \"born\": 1930}");
    mi_buffer c = bson("{\"name\": \"Barbara\", \"born\": 1939}");
    const uint8_t *docs[] = {a.data, b.data, c.data};
    size_t lens[] = {a.len, b.len, c.len};
    OK(mi_insert_many(client, NULL, "capi", "people", docs, lens, 3, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"insertedIds\"") &&
          json_contains(result.data, result.len, "\"2\":{\"$oid\""));
    mi_buffer_free(&result);
    EXPECT_ERROR(mi_insert_many(client, NULL, "capi", "people", NULL, lens, 3, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "`documents` is NULL");
    lens[1] = 2;
    EXPECT_ERROR(mi_insert_many(client, NULL, "capi", "people", docs, lens, 3, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "`documents[1]`");
    CHECK(count_all(client, NULL) == 4);

    /* find with options, iterated through two batches */
    mi_buffer filter = bson("{\"born\": {\"$gt\": 1900}}");
    mi_buffer options = bson("{\"sort\": {\"born\": -1}, \"batchSize\": 2, \"projection\": "
                             "{\"_id\": 0, \"name\": 1}}");
    mi_cursor *cursor = NULL;
    OK(mi_find(client, NULL, "capi", "people", filter.data, filter.len, options.data, options.len,
               &cursor));
    const uint8_t *doc = NULL;
    size_t doc_len = 0;
    int n = 0;
    for (;;) {
        mi_error *next_err = mi_cursor_next(cursor, &doc, &doc_len);
        if (next_err) {
            OK(next_err);
            break;
        }
        if (!doc) break;
        if (n == 0) CHECK(json_contains(doc, doc_len, "{\"name\":\"Barbara\"}"));
        n++;
    }
    CHECK(n == 3);
    OK(mi_cursor_next(cursor, &doc, &doc_len)); /* stays at the end */
    CHECK(doc == NULL && doc_len == 0);
    EXPECT_ERROR(mi_cursor_next(cursor, NULL, &doc_len), MI_ERROR_ARGUMENT, "`document` is NULL");
    mi_cursor_free(cursor);

    /* a cursor freed before it is exhausted (killCursors) */
    cursor = NULL;
    OK(mi_find(client, NULL, "capi", "people", filter.data, filter.len, options.data, options.len,
               &cursor));
    OK(mi_cursor_next(cursor, &doc, &doc_len));
    CHECK(doc != NULL);
    mi_cursor_free(cursor);

    /* the same, closed with a timeout of its own for the killCursors; the
     * client goes on over the same socket */
    cursor = NULL;
    OK(mi_find(client, NULL, "capi", "people", filter.data, filter.len, options.data, options.len,
               &cursor));
    OK(mi_cursor_next(cursor, &doc, &doc_len));
    CHECK(doc != NULL);
    mi_cursor_close(cursor, 1000);
    mi_cursor_close(NULL, 10);
    CHECK(count_all(client, NULL) == 4);

    mi_buffer bad_options = bson("{\"sortt\": {\"born\": 1}}");
    cursor = NULL;
    EXPECT_ERROR(mi_find(client, NULL, "capi", "people", filter.data, filter.len,
                         bad_options.data, bad_options.len, &cursor),
                 MI_ERROR_ARGUMENT, "unknown find option \"sortt\"");
    CHECK(cursor == NULL);
    mi_buffer bad_limit = bson("{\"limit\": \"ten\"}");
    uint64_t count = 0;
    EXPECT_ERROR(mi_count_documents(client, NULL, "capi", "people", filter.data, filter.len,
                                    bad_limit.data, bad_limit.len, &count),
                 MI_ERROR_ARGUMENT, "option \"limit\" must be an integer");
    mi_buffer limit = bson("{\"limit\": 2}");
    OK(mi_count_documents(client, NULL, "capi", "people", filter.data, filter.len, limit.data,
                          limit.len, &count));
    CHECK(count == 2);

    /* updates */
    mi_buffer by_name = bson("{\"name\": \"Grace\"}");
    mi_buffer set_field = bson("{\"$set\": {\"field\": \"navy\"}}");
    OK(mi_update_one(client, NULL, "capi", "people", by_name.data, by_name.len, set_field.data,
                     set_field.len, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"matchedCount\":1") &&
          json_contains(result.data, result.len, "\"modifiedCount\":1"));
    mi_buffer_free(&result);
    mi_buffer missing = bson("{\"name\": \"Alan\"}");
    mi_buffer upsert = bson("{\"upsert\": true}");
    OK(mi_update_one(client, NULL, "capi", "people", missing.data, missing.len, set_field.data,
                     set_field.len, upsert.data, upsert.len, &result));
    CHECK(json_contains(result.data, result.len, "\"upsertedId\""));
    mi_buffer_free(&result);
    EXPECT_ERROR(mi_update_one(client, NULL, "capi", "people", missing.data, missing.len,
                               set_field.data, set_field.len, bad_options.data, bad_options.len,
                               &result),
                 MI_ERROR_ARGUMENT, "unknown update option");
    mi_buffer everyone = bson("{}");
    mi_buffer inc = bson("{\"$inc\": {\"seen\": 1}}");
    OK(mi_update_many(client, NULL, "capi", "people", everyone.data, everyone.len, inc.data,
                      inc.len, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"matchedCount\":5"));
    mi_buffer_free(&result);

    /* aggregate */
    mi_buffer match = bson("{\"$match\": {\"seen\": 1}}");
    mi_buffer group = bson("{\"$group\": {\"_id\": null, \"n\": {\"$sum\": 1}}}");
    const uint8_t *stages[] = {match.data, group.data};
    size_t stage_lens[] = {match.len, group.len};
    cursor = NULL;
    OK(mi_aggregate(client, NULL, "capi", "people", stages, stage_lens, 2, NULL, 0, &cursor));
    OK(mi_cursor_next(cursor, &doc, &doc_len));
    CHECK(doc && json_contains(doc, doc_len, "\"n\":5"));
    mi_cursor_free(cursor);
    cursor = NULL;
    EXPECT_ERROR(mi_aggregate(client, NULL, "capi", "people", stages, stage_lens, 2,
                              bad_options.data, bad_options.len, &cursor),
                 MI_ERROR_ARGUMENT, "unknown aggregate option");

    /* deletes */
    OK(mi_delete_one(client, NULL, "capi", "people", everyone.data, everyone.len, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"deletedCount\":1"));
    mi_buffer_free(&result);
    OK(mi_delete_many(client, NULL, "capi", "people", everyone.data, everyone.len, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"deletedCount\":4"));
    mi_buffer_free(&result);
    CHECK(count_all(client, NULL) == 0);

    mi_buffer_free(&a); mi_buffer_free(&b); mi_buffer_free(&c);
    mi_buffer_free(&filter); mi_buffer_free(&options); mi_buffer_free(&bad_options);
    mi_buffer_free(&bad_limit); mi_buffer_free(&limit); mi_buffer_free(&by_name);
    mi_buffer_free(&set_field); mi_buffer_free(&missing); mi_buffer_free(&upsert);
    mi_buffer_free(&everyone); mi_buffer_free(&inc); mi_buffer_free(&match);
    mi_buffer_free(&group);
}

static void test_sessions(mi_client *client, const char *uri) {
    mi_session *session = NULL;
    mi_buffer result = {NULL, 0}, lsid = {NULL, 0};
    OK(mi_session_start(client, NULL, 0, &session));
    OK(mi_session_id(session, &lsid));
    CHECK(json_contains(lsid.data, lsid.len, "\"id\":{\"$binary\""));
    mi_buffer_free(&lsid);

    /* session and transaction options */
    mi_session *optioned = NULL;
    mi_buffer both = bson("{\"causalConsistency\": true, \"snapshot\": true}");
    EXPECT_ERROR(mi_session_start(client, both.data, both.len, &optioned), MI_ERROR_ARGUMENT, NULL);
    mi_buffer unknown_option = bson("{\"casualConsistency\": true}");
    EXPECT_ERROR(mi_session_start(client, unknown_option.data, unknown_option.len, &optioned),
                 MI_ERROR_ARGUMENT, "unknown session option \"casualConsistency\"");
    CHECK(optioned == NULL);
    mi_buffer causal = bson("{\"causalConsistency\": false}");
    OK(mi_session_start(client, causal.data, causal.len, &optioned));
    EXPECT_ERROR(mi_session_start_transaction(optioned, unknown_option.data, unknown_option.len),
                 MI_ERROR_ARGUMENT, "unknown transaction option");
    mi_buffer bad_w = bson("{\"writeConcern\": {\"w\": -1}}");
    EXPECT_ERROR(mi_session_start_transaction(optioned, bad_w.data, bad_w.len), MI_ERROR_ARGUMENT,
                 "\"w\" must be a non-negative");
    mi_buffer no_level = bson("{\"readConcern\": {}}");
    EXPECT_ERROR(mi_session_start_transaction(optioned, no_level.data, no_level.len),
                 MI_ERROR_ARGUMENT, "needs a string \"level\"");
    mi_buffer txn_options = bson("{\"readConcern\": {\"level\": \"snapshot\"}, \"writeConcern\": "
                                 "{\"w\": \"majority\", \"j\": true, \"wtimeout\": 5000}, "
                                 "\"maxCommitTimeMS\": 5000}");
    OK(mi_session_start_transaction(optioned, txn_options.data, txn_options.len));
    mi_buffer probe = bson("{\"probe\": 1}");
    OK(mi_insert_one(client, optioned, "capi", "people", probe.data, probe.len, NULL, 0, &result));
    mi_buffer_free(&result);
    OK(mi_session_commit_transaction(optioned, NULL, 0));
    mi_buffer probe_filter = bson("{\"probe\": 1}");
    OK(mi_delete_many(client, NULL, "capi", "people", probe_filter.data, probe_filter.len, NULL, 0,
                      &result));
    CHECK(json_contains(result.data, result.len, "\"deletedCount\":1"));
    mi_buffer_free(&result);
    mi_session_free(optioned);
    mi_buffer_free(&both); mi_buffer_free(&unknown_option); mi_buffer_free(&causal);
    mi_buffer_free(&bad_w); mi_buffer_free(&no_level); mi_buffer_free(&txn_options);
    mi_buffer_free(&probe); mi_buffer_free(&probe_filter);

    /* commit or abort without a transaction: a state error */
    EXPECT_ERROR(mi_session_commit_transaction(session, NULL, 0), MI_ERROR_CLIENT, NULL);
    EXPECT_ERROR(mi_session_abort_transaction(session, NULL, 0), MI_ERROR_CLIENT, NULL);

    mi_buffer doc = bson("{\"in\": \"transaction\"}");
    OK(mi_session_start_transaction(session, NULL, 0));
    OK(mi_insert_one(client, session, "capi", "people", doc.data, doc.len, NULL, 0, &result));
    mi_buffer_free(&result);
    CHECK(count_all(client, session) == 1);
    OK(mi_session_abort_transaction(session, NULL, 0));
    CHECK(count_all(client, NULL) == 0);

    OK(mi_session_start_transaction(session, NULL, 0));
    OK(mi_insert_one(client, session, "capi", "people", doc.data, doc.len, NULL, 0, &result));
    mi_buffer_free(&result);
    mi_buffer everyone = bson("{}");
    mi_buffer set = bson("{\"$set\": {\"committed\": true}}");
    OK(mi_update_many(client, session, "capi", "people", everyone.data, everyone.len, set.data,
                      set.len, NULL, 0, &result));
    mi_buffer_free(&result);
    mi_cursor *cursor = NULL;
    OK(mi_find(client, session, "capi", "people", everyone.data, everyone.len, NULL, 0, &cursor));
    const uint8_t *found = NULL;
    size_t found_len = 0;
    OK(mi_cursor_next(cursor, &found, &found_len));
    CHECK(found && json_contains(found, found_len, "\"committed\":true"));
    mi_cursor_free(cursor);
    OK(mi_session_commit_transaction(session, NULL, 0));
    CHECK(count_all(client, NULL) == 1);

    /* sessions outside transactions */
    OK(mi_update_one(client, session, "capi", "people", everyone.data, everyone.len, set.data,
                     set.len, NULL, 0, &result));
    mi_buffer_free(&result);
    OK(mi_delete_one(client, session, "capi", "people", everyone.data, everyone.len, NULL, 0, &result));
    mi_buffer_free(&result);
    OK(mi_delete_many(client, session, "capi", "people", everyone.data, everyone.len, NULL, 0, &result));
    mi_buffer_free(&result);

    /* insert_many, aggregate and a command in a transaction; a session
     * cursor that fetches a second batch (getMore) in the session */
    OK(mi_session_start_transaction(session, NULL, 0));
    const uint8_t *docs[] = {doc.data, doc.data, doc.data};
    size_t lens[] = {doc.len, doc.len, doc.len};
    OK(mi_insert_many(client, session, "capi", "people", docs, lens, 3, NULL, 0, &result));
    mi_buffer_free(&result);
    mi_buffer find_cmd = bson("{\"find\": \"people\", \"filter\": {}}");
    mi_buffer reply = {NULL, 0};
    OK(mi_client_run_command(client, session, "capi", find_cmd.data, find_cmd.len, &reply));
    CHECK(json_contains(reply.data, reply.len, "\"in\":\"transaction\""));
    mi_buffer_free(&reply);
    mi_buffer match_all = bson("{\"$match\": {}}");
    const uint8_t *stages[] = {match_all.data};
    size_t stage_lens[] = {match_all.len};
    mi_buffer batch_of_one = bson("{\"batchSize\": 1}");
    OK(mi_aggregate(client, session, "capi", "people", stages, stage_lens, 1, batch_of_one.data,
                    batch_of_one.len, &cursor));
    int seen = 0;
    for (;;) {
        mi_error *next_err = mi_cursor_next(cursor, &found, &found_len);
        if (next_err || !found) {
            OK(next_err);
            break;
        }
        seen++;
    }
    CHECK(seen == 3); /* uncommitted writes seen: the getMores ran in the transaction */
    mi_cursor_free(cursor);
    OK(mi_session_commit_transaction(session, NULL, 0));
    CHECK(count_all(client, NULL) == 3);

    /* a session cursor keeps its session after the handle is freed */
    mi_session *short_lived = NULL;
    OK(mi_session_start(client, NULL, 0, &short_lived));
    cursor = NULL;
    OK(mi_find(client, short_lived, "capi", "people", everyone.data, everyone.len,
               batch_of_one.data, batch_of_one.len, &cursor));
    mi_session_free(short_lived);
    seen = 0;
    for (;;) {
        mi_error *next_err = mi_cursor_next(cursor, &found, &found_len);
        if (next_err || !found) {
            OK(next_err);
            break;
        }
        seen++;
    }
    CHECK(seen == 3);
    mi_cursor_free(cursor);
    OK(mi_delete_many(client, session, "capi", "people", everyone.data, everyone.len, NULL, 0, &result));
    mi_buffer_free(&result);
    mi_buffer_free(&find_cmd);
    mi_buffer_free(&match_all);
    mi_buffer_free(&batch_of_one);

    /* a session of another client */
    mi_client *other = NULL;
    OK(mi_client_new(uri, &other));
    EXPECT_ERROR(mi_insert_one(other, session, "capi", "people", doc.data, doc.len, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "belongs to another client");
    mi_client_free(other);

    /* handles freed in any order: the session outlives its client here */
    mi_client *owner = NULL;
    mi_session *orphan = NULL;
    OK(mi_client_new(uri, &owner));
    OK(mi_session_start(owner, NULL, 0, &orphan));
    mi_client_free(owner);
    OK(mi_session_id(orphan, &lsid));
    mi_buffer_free(&lsid);
    mi_session_free(orphan);

    mi_session_free(session);
    mi_buffer_free(&doc);
    mi_buffer_free(&everyone);
    mi_buffer_free(&set);
}

static void test_labels_and_tokens(mi_client *client) {
    double tokens = -1;
    bool has_bucket = false;
    OK(mi_client_retry_tokens(client, &tokens, &has_bucket));
    CHECK(has_bucket && tokens > 999.0 && tokens <= 1000.0);
    EXPECT_ERROR(mi_client_retry_tokens(client, NULL, &has_bucket), MI_ERROR_ARGUMENT,
                 "`tokens` is NULL");

    /* A server error with a label, through a fail point. */
    mi_buffer fail = bson("{\"configureFailPoint\": \"failCommand\", \"mode\": {\"times\": 1}, "
                          "\"data\": {\"failCommands\": [\"insert\"], \"errorCode\": 2, "
                          "\"errorLabels\": [\"CapiTestLabel\"]}}");
    mi_buffer reply = {NULL, 0};
    OK(mi_client_run_command(client, NULL, "admin", fail.data, fail.len, &reply));
    mi_buffer_free(&reply);
    mi_buffer doc = bson("{\"x\": 1}");
    mi_error *err = mi_insert_one(client, NULL, "capi", "people", doc.data, doc.len, NULL, 0, &reply);
    CHECK(err && err->domain == MI_ERROR_COMMAND && err->code == 2 && err->label_count == 1);
    CHECK(err && mi_error_has_label(err, "CapiTestLabel"));
    CHECK(err && !mi_error_has_label(err, "RetryableWriteError"));
    CHECK(err && !mi_error_has_label(err, NULL));
    mi_error_free(err);
    mi_buffer_free(&fail);
    mi_buffer_free(&doc);
}

/* A wrapping library's metadata, appended for the sockets opened from now
 * on; a value with '|' is refused, naming it. */
static void test_append_metadata(const char *uri) {
    mi_client *client = NULL;
    OK(mi_client_new(uri, &client));
    OK(mi_client_append_metadata(client, "capi-test-binding", "1.0", NULL));
    OK(mi_client_append_metadata(client, "capi-test-binding", "1.0", NULL));
    EXPECT_ERROR(mi_client_append_metadata(client, "bad|name", NULL, NULL), MI_ERROR_ARGUMENT,
                 "|");
    EXPECT_ERROR(mi_client_append_metadata(client, NULL, NULL, NULL), MI_ERROR_ARGUMENT, "NULL");
    /* The handshake that carries it still succeeds. */
    mi_buffer ping = bson("{\"ping\": 1}");
    mi_buffer reply = {NULL, 0};
    OK(mi_client_run_command(client, NULL, "admin", ping.data, ping.len, &reply));
    mi_buffer_free(&reply);
    mi_buffer_free(&ping);
    mi_client_free(client);
}

/* The operations beyond basic CRUD, each once on its success path and the
 * generic options (official names, errors naming the option). */
static void test_more_operations(mi_client *client) {
    mi_buffer result = {NULL, 0};
    OK(mi_drop_collection(client, NULL, "capi", "more", NULL, 0));
    OK(mi_create_collection(client, NULL, "capi", "more", NULL, 0));
    mi_buffer m1 = bson("{\"insertOne\": {\"document\": {\"_id\": 1, \"k\": \"a\", \"n\": 1}}}");
    mi_buffer m2 = bson("{\"insertOne\": {\"document\": {\"_id\": 2, \"k\": \"b\", \"n\": 2}}}");
    mi_buffer m3 = bson("{\"updateOne\": {\"filter\": {\"_id\": 3}, \"update\": {\"$set\": "
                        "{\"k\": \"a\", \"n\": 3}}, \"upsert\": true}}");
    mi_buffer m4 = bson("{\"deleteOne\": {\"filter\": {\"_id\": 99}}}");
    const uint8_t *models[] = {m1.data, m2.data, m3.data, m4.data};
    size_t model_lens[] = {m1.len, m2.len, m3.len, m4.len};
    mi_buffer ordered = bson("{\"ordered\": true}");
    OK(mi_bulk_write(client, NULL, "capi", "more", models, model_lens, 4, ordered.data,
                     ordered.len, &result));
    CHECK(json_contains(result.data, result.len, "\"insertedCount\":2") &&
          json_contains(result.data, result.len, "\"upsertedIds\":{\"2\":3}"));
    mi_buffer_free(&result);
    mi_buffer bad_model = bson("{\"insertTwo\": {}}");
    models[0] = bad_model.data;
    model_lens[0] = bad_model.len;
    EXPECT_ERROR(mi_bulk_write(client, NULL, "capi", "more", models, model_lens, 1, NULL, 0,
                               &result),
                 MI_ERROR_ARGUMENT, "`models[0]` is invalid: unknown write model kind \"insertTwo\"");

    mi_buffer by_a = bson("{\"k\": \"a\"}");
    mi_buffer newest = bson("{\"sort\": {\"n\": -1}, \"projection\": {\"_id\": 0}}");
    OK(mi_find_one(client, NULL, "capi", "more", by_a.data, by_a.len, newest.data, newest.len,
                   &result));
    CHECK(result.data && json_contains(result.data, result.len, "\"n\":3"));
    mi_buffer_free(&result);
    mi_buffer nobody = bson("{\"k\": \"z\"}");
    OK(mi_find_one(client, NULL, "capi", "more", nobody.data, nobody.len, NULL, 0, &result));
    CHECK(result.data == NULL && result.len == 0);

    mi_buffer replacement = bson("{\"k\": \"b\", \"n\": 20}");
    mi_buffer id2 = bson("{\"_id\": 2}");
    OK(mi_replace_one(client, NULL, "capi", "more", id2.data, id2.len, replacement.data,
                      replacement.len, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"modifiedCount\":1"));
    mi_buffer_free(&result);

    mi_buffer inc = bson("{\"$inc\": {\"n\": 100}}");
    mi_buffer after = bson("{\"returnDocument\": \"after\"}");
    OK(mi_find_one_and_update(client, NULL, "capi", "more", id2.data, id2.len, inc.data,
                              inc.len, after.data, after.len, &result));
    CHECK(result.data && json_contains(result.data, result.len, "\"n\":120"));
    mi_buffer_free(&result);
    mi_buffer misspelt = bson("{\"returnDocument\": \"later\"}");
    EXPECT_ERROR(mi_find_one_and_update(client, NULL, "capi", "more", id2.data, id2.len,
                                        inc.data, inc.len, misspelt.data, misspelt.len, &result),
                 MI_ERROR_ARGUMENT, "option \"returnDocument\" must be before or after");
    OK(mi_find_one_and_replace(client, NULL, "capi", "more", id2.data, id2.len,
                               replacement.data, replacement.len, NULL, 0, &result));
    CHECK(result.data && json_contains(result.data, result.len, "\"n\":120"));
    mi_buffer_free(&result);
    OK(mi_find_one_and_delete(client, NULL, "capi", "more", id2.data, id2.len, NULL, 0,
                              &result));
    CHECK(result.data && json_contains(result.data, result.len, "\"n\":20"));
    mi_buffer_free(&result);
    OK(mi_find_one_and_delete(client, NULL, "capi", "more", id2.data, id2.len, NULL, 0,
                              &result));
    CHECK(result.data == NULL);

    mi_buffer everything = bson("{}");
    OK(mi_distinct(client, NULL, "capi", "more", "k", everything.data, everything.len, NULL, 0,
                   &result));
    CHECK(json_contains(result.data, result.len, "\"values\":[\"a\"]"));
    mi_buffer_free(&result);
    uint64_t count = 0;
    mi_buffer max_time = bson("{\"maxTimeMS\": 5000}");
    OK(mi_estimated_document_count(client, NULL, "capi", "more", max_time.data, max_time.len,
                                   &count));
    CHECK(count == 2);

    /* indexes */
    mi_buffer index = bson("{\"key\": {\"k\": 1}, \"name\": \"by_k\", \"unique\": false}");
    const uint8_t *indexes[] = {index.data};
    size_t index_lens[] = {index.len};
    OK(mi_create_indexes(client, NULL, "capi", "more", indexes, index_lens, 1, NULL, 0,
                         &result));
    CHECK(json_contains(result.data, result.len, "\"indexNames\":[\"by_k\"]"));
    mi_buffer_free(&result);
    OK(mi_list_index_names(client, NULL, "capi", "more", NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"by_k\""));
    mi_buffer_free(&result);
    EXPECT_ERROR(mi_list_index_names(client, NULL, "capi", "more", max_time.data, max_time.len,
                                     &result),
                 MI_ERROR_ARGUMENT, "unknown list_index_names option \"maxTimeMS\"");
    mi_cursor *cursor = NULL;
    const uint8_t *doc = NULL;
    size_t doc_len = 0;
    int seen = 0;
    OK(mi_list_indexes(client, NULL, "capi", "more", NULL, 0, &cursor));
    for (;;) {
        doc = NULL;
        OK(mi_cursor_next(cursor, &doc, &doc_len));
        if (!doc) break;
        seen++;
    }
    mi_cursor_free(cursor);
    CHECK(seen == 2);
    OK(mi_drop_index(client, NULL, "capi", "more", "by_k", NULL, 0));
    OK(mi_drop_indexes(client, NULL, "capi", "more", NULL, 0));

    /* listings, database aggregate, drops */
    OK(mi_list_collection_names(client, NULL, "capi", NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"more\""));
    mi_buffer_free(&result);
    mi_buffer only_more = bson("{\"filter\": {\"name\": \"more\"}}");
    OK(mi_list_collections(client, NULL, "capi", only_more.data, only_more.len, &cursor));
    doc = NULL;
    OK(mi_cursor_next(cursor, &doc, &doc_len));
    CHECK(doc && json_contains(doc, doc_len, "\"name\":\"more\""));
    mi_cursor_free(cursor);
    OK(mi_list_database_names(client, NULL, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"capi\""));
    mi_buffer_free(&result);
    OK(mi_list_databases(client, NULL, NULL, 0, &result));
    CHECK(json_contains(result.data, result.len, "\"name\":\"capi\""));
    mi_buffer_free(&result);
    mi_buffer documents = bson("{\"$documents\": [{\"x\": 7}]}");
    const uint8_t *stages[] = {documents.data};
    size_t stage_lens[] = {documents.len};
    cursor = NULL;
    mi_error *err = mi_database_aggregate(client, NULL, "capi", stages, stage_lens, 1, NULL, 0,
                                          &cursor);
    if (err) {
        /* A server without $documents must still answer with a command
         * error, never a crash. */
        CHECK(err->domain == MI_ERROR_COMMAND);
        mi_error_free(err);
    } else {
        doc = NULL;
        OK(mi_cursor_next(cursor, &doc, &doc_len));
        CHECK(doc && json_contains(doc, doc_len, "\"x\":7"));
        mi_cursor_free(cursor);
    }
    /* a cursor-opening command as given; getMores of batchSize 1 */
    mi_buffer list_more = bson("{\"listCollections\": 1, \"filter\": {\"name\": \"more\"}}");
    mi_buffer by_one = bson("{\"batchSize\": 1}");
    cursor = NULL;
    OK(mi_run_cursor_command(client, NULL, "capi", list_more.data, list_more.len, by_one.data,
                             by_one.len, &cursor));
    doc = NULL;
    OK(mi_cursor_try_next(cursor, &doc, &doc_len));
    CHECK(doc && json_contains(doc, doc_len, "\"name\":\"more\""));
    mi_cursor_free(cursor);
    mi_buffer ping = bson("{\"ping\": 1}");
    cursor = NULL;
    err = mi_run_cursor_command(client, NULL, "capi", ping.data, ping.len, NULL, 0, &cursor);
    CHECK(err != NULL && cursor == NULL);
    mi_error_free(err);
    mi_buffer_free(&list_more); mi_buffer_free(&by_one); mi_buffer_free(&ping);
    OK(mi_drop_collection(client, NULL, "capi", "more", NULL, 0));
    OK(mi_drop_database(client, NULL, "capi_dropped", NULL, 0));

    mi_buffer_free(&m1); mi_buffer_free(&m2); mi_buffer_free(&m3); mi_buffer_free(&m4);
    mi_buffer_free(&ordered); mi_buffer_free(&bad_model); mi_buffer_free(&by_a);
    mi_buffer_free(&newest); mi_buffer_free(&nobody); mi_buffer_free(&replacement);
    mi_buffer_free(&id2); mi_buffer_free(&inc); mi_buffer_free(&after); mi_buffer_free(&misspelt);
    mi_buffer_free(&everything); mi_buffer_free(&max_time); mi_buffer_free(&index);
    mi_buffer_free(&only_more); mi_buffer_free(&documents);
}

/* The transaction callback: inserts through the session it is given; on
 * its first run it fails with a TransientTransactionError (so the loop
 * retries), on the second it succeeds. */
struct txn_run {
    mi_client *client;
    int calls;
    int fail_with; /* 0: succeed; 1: transient once; 2: own error */
};

static mi_error *txn_body(void *user_data, mi_session *session) {
    struct txn_run *run = user_data;
    run->calls++;
    mi_buffer doc = bson("{\"in\": \"txn\"}");
    mi_buffer result = {NULL, 0};
    mi_error *err = mi_insert_one(run->client, session, "capi", "txn", doc.data, doc.len, NULL,
                                  0, &result);
    mi_buffer_free(&doc);
    mi_buffer_free(&result);
    if (err) return err;
    if (run->fail_with == 2) return mi_error_new(MI_ERROR_CLIENT, 42, "the callback said no");
    if (run->fail_with == 1 && run->calls == 1) {
        /* As the server would: an error carrying the label. */
        mi_buffer fail = bson("{\"configureFailPoint\": \"failCommand\", \"mode\": "
                              "{\"times\": 1}, \"data\": {\"failCommands\": [\"insert\"], "
                              "\"errorCode\": 112, \"errorLabels\": "
                              "[\"TransientTransactionError\"]}}");
        mi_buffer reply = {NULL, 0};
        OK(mi_client_run_command(run->client, NULL, "admin", fail.data, fail.len, &reply));
        mi_buffer_free(&reply);
        mi_buffer_free(&fail);
        doc = bson("{\"in\": \"txn\", \"second\": true}");
        err = mi_insert_one(run->client, session, "capi", "txn", doc.data, doc.len, NULL, 0,
                            &result);
        mi_buffer_free(&doc);
        mi_buffer_free(&result);
        return err;
    }
    return NULL;
}

static void test_with_transaction(mi_client *client) {
    OK(mi_drop_collection(client, NULL, "capi", "txn", NULL, 0));
    OK(mi_create_collection(client, NULL, "capi", "txn", NULL, 0));
    mi_session *session = NULL;
    OK(mi_session_start(client, NULL, 0, &session));
    struct txn_run run = {client, 0, 1};
    mi_buffer options = bson("{\"writeConcern\": {\"w\": \"majority\"}}");
    OK(mi_session_with_transaction(session, txn_body, &run, options.data, options.len));
    CHECK(run.calls == 2);
    mi_buffer everything = bson("{}");
    uint64_t count = 0;
    OK(mi_count_documents(client, NULL, "capi", "txn", everything.data, everything.len, NULL, 0,
                          &count));
    CHECK(count == 1);

    /* The callback's own error aborts and comes back as it was made. */
    run.calls = 0;
    run.fail_with = 2;
    mi_error *err = mi_session_with_transaction(session, txn_body, &run, NULL, 0);
    CHECK(err && err->domain == MI_ERROR_CLIENT && err->code == 42 &&
          strcmp(err->message, "the callback said no") == 0 && run.calls == 1);
    mi_error_free(err);
    OK(mi_count_documents(client, NULL, "capi", "txn", everything.data, everything.len, NULL, 0,
                          &count));
    CHECK(count == 1);
    EXPECT_ERROR(mi_session_with_transaction(session, NULL, &run, NULL, 0), MI_ERROR_ARGUMENT,
                 "`callback` is NULL");
    EXPECT_ERROR(mi_session_with_transaction(NULL, txn_body, &run, NULL, 0), MI_ERROR_ARGUMENT,
                 "`session` is NULL");
    mi_error *made = mi_error_new(999, 7, NULL);
    CHECK(made && made->domain == MI_ERROR_CLIENT && made->code == 7 &&
          strcmp(made->message, "(no message)") == 0);
    mi_error_free(made);
    /* Double free is the binding's to avoid: every free takes NULL. */
    mi_session_free(session);
    session = NULL;
    mi_session_free(session);
    mi_buffer_free(&options);
    mi_buffer_free(&everything);
}

/* GridFS: a file of three chunks written in pieces, read back by id and by
 * name, found, renamed, deleted; an aborted upload leaves nothing. */
static void test_gridfs(mi_client *client) {
    mi_gridfs_bucket *bucket = NULL;
    mi_buffer bucket_options = bson("{\"bucketName\": \"capi\", \"chunkSizeBytes\": 4}");
    OK(mi_gridfs_bucket_new(client, "capi", bucket_options.data, bucket_options.len, &bucket));
    OK(mi_gridfs_drop(bucket));
    mi_gridfs_upload *upload = NULL;
    mi_buffer upload_options = bson("{\"metadata\": {\"kind\": \"text\"}, \"id\": 77}");
    OK(mi_gridfs_open_upload_stream(bucket, "hello.txt", upload_options.data,
                                    upload_options.len, &upload));
    OK(mi_gridfs_upload_write(upload, (const uint8_t *)"hello ", 6));
    OK(mi_gridfs_upload_write(upload, (const uint8_t *)"world", 5));
    mi_buffer id = {NULL, 0};
    OK(mi_gridfs_upload_id(upload, &id));
    CHECK(json_contains(id.data, id.len, "\"_id\":77"));
    OK(mi_gridfs_upload_close(upload));
    EXPECT_ERROR(mi_gridfs_upload_close(upload), MI_ERROR_CLIENT, NULL);
    mi_gridfs_upload_free(upload);

    mi_gridfs_download *download = NULL;
    OK(mi_gridfs_open_download_stream(bucket, id.data, id.len, NULL, 0, &download));
    char text[32] = {0};
    size_t total = 0, got = 0;
    do {
        OK(mi_gridfs_download_read(download, (uint8_t *)text + total, 3, &got));
        total += got;
    } while (got > 0 && total < sizeof text - 3);
    CHECK(total == 11 && strcmp(text, "hello world") == 0);
    mi_buffer file = {NULL, 0};
    OK(mi_gridfs_download_file(download, &file));
    CHECK(json_contains(file.data, file.len, "\"length\":11"));
    mi_buffer_free(&file);
    mi_gridfs_download_free(download);

    OK(mi_gridfs_open_download_stream_by_name(bucket, "hello.txt", NULL, 0, &download));
    /* A read returns what the chunk in hand holds (4 bytes here), at most capacity. */
    OK(mi_gridfs_download_read(download, (uint8_t *)text, 5, &got));
    CHECK(got == 4 && memcmp(text, "hell", 4) == 0);
    mi_gridfs_download_free(download);
    EXPECT_ERROR(mi_gridfs_open_download_stream_by_name(bucket, "missing", NULL, 0, &download),
                 MI_ERROR_CLIENT, NULL);

    OK(mi_gridfs_rename(bucket, id.data, id.len, "renamed.txt"));
    OK(mi_gridfs_rename_by_name(bucket, "renamed.txt", "again.txt"));
    mi_buffer by_name = bson("{\"filename\": \"again.txt\"}");
    OK(mi_gridfs_find_one(bucket, by_name.data, by_name.len, NULL, 0, &file));
    CHECK(file.data && json_contains(file.data, file.len, "\"kind\":\"text\""));
    mi_buffer_free(&file);
    mi_cursor *cursor = NULL;
    const uint8_t *doc = NULL;
    size_t doc_len = 0;
    OK(mi_gridfs_find(bucket, by_name.data, by_name.len, NULL, 0, &cursor));
    OK(mi_cursor_next(cursor, &doc, &doc_len));
    CHECK(doc && json_contains(doc, doc_len, "\"_id\":77"));
    mi_cursor_free(cursor);
    OK(mi_gridfs_delete(bucket, id.data, id.len));
    OK(mi_gridfs_find_one(bucket, by_name.data, by_name.len, NULL, 0, &file));
    CHECK(file.data == NULL);

    OK(mi_gridfs_open_upload_stream(bucket, "dropped.txt", NULL, 0, &upload));
    OK(mi_gridfs_upload_write(upload, (const uint8_t *)"0123456789", 10));
    OK(mi_gridfs_upload_abort(upload));
    mi_gridfs_upload_free(upload);
    OK(mi_gridfs_open_upload_stream(bucket, "twice.txt", NULL, 0, &upload));
    OK(mi_gridfs_upload_close(upload));
    mi_gridfs_upload_free(upload);
    OK(mi_gridfs_delete_by_name(bucket, "twice.txt"));
    EXPECT_ERROR(mi_gridfs_delete_by_name(bucket, "twice.txt"), MI_ERROR_CLIENT, NULL);
    mi_gridfs_bucket_free(bucket);
    mi_gridfs_bucket_free(NULL);
    mi_buffer_free(&bucket_options); mi_buffer_free(&upload_options); mi_buffer_free(&id);
    mi_buffer_free(&by_name);
}

/* A change stream on one collection: an insert seen by try_next, a resume
 * token that reopens the stream after it, the bounded wait. */
static void test_change_stream(mi_client *client) {
    OK(mi_drop_collection(client, NULL, "capi", "watched", NULL, 0));
    OK(mi_create_collection(client, NULL, "capi", "watched", NULL, 0));
    mi_change_stream *stream = NULL;
    mi_buffer short_wait = bson("{\"maxAwaitTimeMS\": 50}");
    mi_buffer only_inserts = bson("{\"$match\": {\"operationType\": \"insert\"}}");
    const uint8_t *stages[] = {only_inserts.data};
    size_t stage_lens[] = {only_inserts.len};
    OK(mi_watch(client, NULL, "capi", "watched", stages, stage_lens, 1, short_wait.data,
                short_wait.len, &stream));
    const uint8_t *event = NULL;
    size_t event_len = 0;
    OK(mi_change_stream_try_next(stream, &event, &event_len));
    CHECK(event == NULL);
    mi_buffer doc = bson("{\"_id\": 1, \"seen\": true}");
    mi_buffer result = {NULL, 0};
    OK(mi_insert_one(client, NULL, "capi", "watched", doc.data, doc.len, NULL, 0, &result));
    mi_buffer_free(&result);
    OK(mi_change_stream_next(stream, &event, &event_len));
    CHECK(event && json_contains(event, event_len, "\"operationType\":\"insert\"") &&
          json_contains(event, event_len, "\"seen\":true"));
    bool alive = false;
    OK(mi_change_stream_is_alive(stream, &alive));
    CHECK(alive);
    mi_buffer token = {NULL, 0};
    OK(mi_change_stream_resume_token(stream, &token));
    CHECK(token.data && json_contains(token.data, token.len, "\"resumeToken\""));
    mi_change_stream_free(stream);

    /* Resuming after the insert: the next insert is the first event. */
    mi_buffer second = bson("{\"_id\": 2}");
    OK(mi_insert_one(client, NULL, "capi", "watched", second.data, second.len, NULL, 0,
                     &result));
    mi_buffer_free(&result);
    char resume[512];
    char *token_json = NULL;
    OK(mi_bson_to_json(token.data, token.len, &token_json));
    /* {"resumeToken": T} -> {"resumeAfter": T} */
    snprintf(resume, sizeof resume, "{\"resumeAfter\"%s", token_json ? strchr(token_json, ':') : "");
    mi_string_free(token_json);
    mi_buffer resume_options = bson(resume);
    OK(mi_watch(client, NULL, "capi", "watched", NULL, NULL, 0, resume_options.data,
                resume_options.len, &stream));
    OK(mi_change_stream_next(stream, &event, &event_len));
    CHECK(event && json_contains(event, event_len, "\"documentKey\":{\"_id\":2}"));
    mi_change_stream_free(stream);
    mi_change_stream_free(NULL);

    /* In a session: the stream's aggregate and getMores go in it. */
    mi_session *session = NULL;
    OK(mi_session_start(client, NULL, 0, &session));
    OK(mi_watch(client, session, "capi", "watched", NULL, NULL, 0, short_wait.data,
                short_wait.len, &stream));
    mi_buffer third = bson("{\"_id\": 3}");
    OK(mi_insert_one(client, session, "capi", "watched", third.data, third.len, NULL, 0,
                     &result));
    mi_buffer_free(&result);
    OK(mi_change_stream_next(stream, &event, &event_len));
    CHECK(event && json_contains(event, event_len, "\"documentKey\":{\"_id\":3}"));
    mi_change_stream_free(stream);
    mi_session_free(session);
    mi_buffer_free(&third);

    EXPECT_ERROR(mi_watch(client, NULL, NULL, "watched", NULL, NULL, 0, NULL, 0, &stream),
                 MI_ERROR_ARGUMENT, "`db` is NULL but `coll` is not");
    mi_buffer bad = bson("{\"fullDocument\": 1}");
    EXPECT_ERROR(mi_watch(client, NULL, "capi", NULL, NULL, NULL, 0, bad.data, bad.len, &stream),
                 MI_ERROR_ARGUMENT, "fullDocument");
    mi_buffer_free(&short_wait); mi_buffer_free(&only_inserts); mi_buffer_free(&doc);
    mi_buffer_free(&token); mi_buffer_free(&second); mi_buffer_free(&resume_options);
    mi_buffer_free(&bad);
}

/* The client-level bulk write: models naming their collections, verbose
 * results by index, and a failed write's details (write errors by index,
 * the partial result) as BSON in the error. */
static void test_client_bulk_write(mi_client *client) {
    mi_buffer result = {NULL, 0};
    OK(mi_drop_collection(client, NULL, "capi", "cbw_a", NULL, 0));
    OK(mi_drop_collection(client, NULL, "capi", "cbw_b", NULL, 0));
    mi_buffer m1 = bson("{\"insertOne\": {\"namespace\": \"capi.cbw_a\", "
                        "\"document\": {\"_id\": 1}}}");
    mi_buffer m2 = bson("{\"insertOne\": {\"namespace\": \"capi.cbw_b\", "
                        "\"document\": {\"_id\": 1}}}");
    mi_buffer m3 = bson("{\"updateOne\": {\"namespace\": \"capi.cbw_a\", \"filter\": "
                        "{\"_id\": 1}, \"update\": {\"$set\": {\"x\": 1}}}}");
    mi_buffer m4 = bson("{\"deleteMany\": {\"namespace\": \"capi.cbw_b\", "
                        "\"filter\": {}}}");
    const uint8_t *models[] = {m1.data, m2.data, m3.data, m4.data};
    size_t lens[] = {m1.len, m2.len, m3.len, m4.len};
    mi_buffer verbose = bson("{\"verboseResults\": true, \"ordered\": true}");
    OK(mi_client_bulk_write(client, NULL, models, lens, 4, verbose.data, verbose.len,
                            &result));
    CHECK(json_contains(result.data, result.len, "\"insertedCount\":2") &&
          json_contains(result.data, result.len, "\"insertResults\":{\"0\":{\"insertedId\":1}") &&
          json_contains(result.data, result.len, "\"updateResults\":{\"2\":{\"matchedCount\":1") &&
          json_contains(result.data, result.len, "\"deleteResults\":{\"3\":{\"deletedCount\":1"));
    mi_buffer_free(&result);

    /* The second insert is a duplicate: the first stays done, in the
     * partial result; the write error carries its index and code. */
    mi_buffer dup = bson("{\"insertOne\": {\"namespace\": \"capi.cbw_a\", "
                         "\"document\": {\"_id\": 1}}}");
    mi_buffer fresh = bson("{\"insertOne\": {\"namespace\": \"capi.cbw_b\", "
                           "\"document\": {\"_id\": 2}}}");
    const uint8_t *failing[] = {fresh.data, dup.data};
    size_t failing_lens[] = {fresh.len, dup.len};
    mi_error *err = mi_client_bulk_write(client, NULL, failing, failing_lens, 2, NULL, 0, &result);
    CHECK(err && err->domain == MI_ERROR_WRITE && err->code == 11000 && err->details &&
          json_contains(err->details, err->details_len, "\"writeErrors\":{\"1\":{\"code\":11000") &&
          json_contains(err->details, err->details_len, "\"partialResult\":{\"insertedCount\":1"));
    mi_error_free(err);
    CHECK(result.data == NULL);

    mi_buffer no_namespace = bson("{\"insertOne\": {\"document\": {}}}");
    const uint8_t *bad[] = {no_namespace.data};
    size_t bad_lens[] = {no_namespace.len};
    EXPECT_ERROR(mi_client_bulk_write(client, NULL, bad, bad_lens, 1, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "`models[0]` is invalid: the insertOne write model needs");
    mi_buffer unknown = bson("{\"verbose\": true}");
    EXPECT_ERROR(mi_client_bulk_write(client, NULL, models, lens, 1, unknown.data, unknown.len,
                                      &result),
                 MI_ERROR_ARGUMENT, "\"verbose\"");
    mi_buffer *all[] = {&m1, &m2, &m3, &m4, &verbose, &dup, &fresh, &no_namespace, &unknown};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mi_buffer_free(all[i]);
}

/* Search index commands reach the server (SecantusDB refuses them: its
 * refusal must arrive as an MI_ERROR_COMMAND with its code), and a snapshot
 * session reports its snapshot time after its first read. */
static void test_search_indexes_and_snapshot_time(mi_client *client) {
    mi_buffer probe = bson("{\"x\": 1}"), result = {NULL, 0};
    OK(mi_insert_one(client, NULL, "capi", "searchable", probe.data, probe.len, NULL, 0, &result));
    mi_buffer_free(&result);
    mi_buffer model = bson("{\"definition\": {\"mappings\": {\"dynamic\": true}}, "
                           "\"name\": \"s1\", \"type\": \"search\"}");
    const uint8_t *models[] = {model.data};
    size_t lengths[] = {model.len};
    mi_error *err =
        mi_create_search_indexes(client, NULL, "capi", "searchable", models, lengths, 1, NULL, 0,
                                 &result);
    CHECK(err != NULL && err->domain == MI_ERROR_COMMAND && err->code == SEARCH_REFUSAL);
    mi_error_free(err);
    /* A type this driver does not know goes to the server, which decides. */
    mi_buffer other_type =
        bson("{\"definition\": {}, \"name\": \"s2\", \"type\": \"lexical\"}");
    const uint8_t *other_models[] = {other_type.data};
    size_t other_lengths[] = {other_type.len};
    err = mi_create_search_indexes(client, NULL, "capi", "searchable", other_models, other_lengths,
                                   1, NULL, 0, &result);
    CHECK(err != NULL && err->domain == MI_ERROR_COMMAND && err->code == SEARCH_REFUSAL);
    mi_error_free(err);
    mi_buffer_free(&other_type);
    mi_buffer bad_model = bson("{\"definition\": {}, \"nmae\": \"s1\"}");
    const uint8_t *bad_models[] = {bad_model.data};
    size_t bad_lengths[] = {bad_model.len};
    EXPECT_ERROR(mi_create_search_indexes(client, NULL, "capi", "searchable", bad_models,
                                          bad_lengths, 1, NULL, 0, &result),
                 MI_ERROR_ARGUMENT, "has no field \"nmae\"");
    mi_buffer definition = bson("{\"mappings\": {\"dynamic\": false}}");
    err = mi_update_search_index(client, NULL, "capi", "searchable", "s1", definition.data,
                                 definition.len, NULL, 0);
    CHECK(err != NULL && err->domain == MI_ERROR_COMMAND && err->code == SEARCH_REFUSAL);
    mi_error_free(err);
    err = mi_drop_search_index(client, NULL, "capi", "searchable", "s1", NULL, 0);
    CHECK(err != NULL && err->domain == MI_ERROR_COMMAND && err->code == SEARCH_REFUSAL);
    mi_error_free(err);
    mi_buffer list_options = bson("{\"name\": \"s1\", \"batchSize\": 1}");
    mi_cursor *cursor = NULL;
    err = mi_list_search_indexes(client, NULL, "capi", "searchable", list_options.data,
                                 list_options.len, &cursor);
    if (!err) {
        const uint8_t *doc = NULL;
        size_t len = 0;
        err = mi_cursor_next(cursor, &doc, &len);
        mi_cursor_free(cursor);
    }
    CHECK(err != NULL && err->domain == MI_ERROR_COMMAND && err->code == SEARCH_REFUSAL);
    mi_error_free(err);

    mi_session *snapshot = NULL;
    mi_buffer snapshot_options = bson("{\"snapshot\": true}"), time = {NULL, 0};
    OK(mi_session_start(client, snapshot_options.data, snapshot_options.len, &snapshot));
    OK(mi_session_snapshot_time(snapshot, &time));
    CHECK(time.len == 5); /* {} before the first read */
    mi_buffer_free(&time);
    mi_buffer empty = bson("{}");
    mi_buffer limit_one = bson("{\"limit\": 1}");
    OK(mi_find(client, snapshot, "capi", "searchable", empty.data, empty.len, limit_one.data,
               limit_one.len, &cursor));
    /* tryNext: the one document in hand, then NULL (the cursor is over) */
    const uint8_t *doc = NULL;
    size_t len = 0;
    OK(mi_cursor_try_next(cursor, &doc, &len));
    CHECK(doc != NULL && json_contains(doc, len, "\"x\":"));
    OK(mi_cursor_try_next(cursor, &doc, &len));
    CHECK(doc == NULL && len == 0);
    mi_cursor_free(cursor);
    OK(mi_session_snapshot_time(snapshot, &time));
    CHECK(json_contains(time.data, time.len, "\"snapshotTime\":{\"$timestamp\""));
    mi_buffer_free(&time);
    mi_session_free(snapshot);
    mi_buffer *owned[] = {&probe, &model, &bad_model, &definition, &list_options,
                          &snapshot_options, &empty, &limit_one};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) mi_buffer_free(owned[i]);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1000.0 + (double)t.tv_nsec / 1e6;
}

static mi_error *txn_insert_timed(void *user_data, mi_session *session) {
    mi_buffer doc = bson("{\"in\": \"timed txn\"}"), result = {NULL, 0};
    mi_error *err =
        mi_insert_one(user_data, session, "capi", "timed", doc.data, doc.len, NULL, 0, &result);
    mi_buffer_free(&doc);
    mi_buffer_free(&result);
    return err;
}

/* Makes the next `command` block its connection for 2 s (failCommand's
 * blockConnection), so that only the operation's own timeoutMS can end it
 * sooner. */
static void block_next(mi_client *client, const char *command) {
    char json[256];
    snprintf(json, sizeof json,
             "{\"configureFailPoint\": \"failCommand\", \"mode\": {\"times\": 1}, "
             "\"data\": {\"failCommands\": [\"%s\"], \"blockConnection\": true, "
             "\"blockTimeMS\": 2000}}",
             command);
    mi_buffer fail = bson(json), reply = {NULL, 0};
    OK(mi_client_run_command(client, NULL, "admin", fail.data, fail.len, &reply));
    mi_buffer_free(&reply);
    mi_buffer_free(&fail);
}

/* Whether err is a timeout that came between 100 ms (the operation's
 * timeoutMS) and well before the 2 s the server blocks; frees it. */
static void expect_timeout(mi_error *err, double started, int line) {
    double took = now_ms() - started;
    checks++;
    if (!err || err->domain != MI_ERROR_TIMEOUT || took < 95.0 || took > 1500.0) {
        failures++;
        fprintf(stderr, "line %d: expected a timeout after ~100 ms, got %s after %.0f ms\n", line,
                err ? err->message : "success", took);
    }
    mi_error_free(err);
}
#define EXPECT_TIMEOUT(expr)                                                     \
    do {                                                                         \
        double started_ = now_ms();                                              \
        expect_timeout((expr), started_, __LINE__);                              \
    } while (0)

/* timeoutMS in an operation's options document bounds that operation: a
 * read, a write, a cursor (with its timeoutMode), a transaction and a
 * commit, each blocked by the server, fail with MI_ERROR_TIMEOUT within it. */
static void test_per_operation_timeout(mi_client *client) {
    mi_buffer timeout = bson("{\"timeoutMS\": 100}");
    mi_buffer cursor_timeout = bson("{\"timeoutMS\": 100, \"timeoutMode\": \"cursorLifetime\", "
                                    "\"batchSize\": 1}");
    mi_buffer empty = bson("{}"), doc = bson("{\"timed\": 1}"), result = {NULL, 0};
    OK(mi_insert_one(client, NULL, "capi", "timed", doc.data, doc.len, NULL, 0, &result));
    mi_buffer_free(&result);

    block_next(client, "find");
    EXPECT_TIMEOUT(mi_find_one(client, NULL, "capi", "timed", empty.data, empty.len, timeout.data,
                               timeout.len, &result));
    block_next(client, "insert");
    EXPECT_TIMEOUT(mi_insert_one(client, NULL, "capi", "timed", doc.data, doc.len, timeout.data,
                                 timeout.len, &result));
    mi_cursor *cursor = NULL;
    block_next(client, "aggregate");
    EXPECT_TIMEOUT(mi_aggregate(client, NULL, "capi", "timed", NULL, NULL, 0, cursor_timeout.data,
                                cursor_timeout.len, &cursor));
    /* The client goes on: the timed-out connections were closed, not reused. */
    OK(mi_find_one(client, NULL, "capi", "timed", empty.data, empty.len, NULL, 0, &result));
    CHECK(result.data != NULL);
    mi_buffer_free(&result);

    mi_session *session = NULL;
    OK(mi_session_start(client, NULL, 0, &session));
    block_next(client, "insert");
    EXPECT_TIMEOUT(mi_session_with_transaction(session, txn_insert_timed, client, timeout.data,
                                               timeout.len));
    /* A commit's own timeoutMS. */
    mi_buffer in_txn = bson("{\"in\": \"committed txn\"}");
    OK(mi_session_start_transaction(session, NULL, 0));
    OK(mi_insert_one(client, session, "capi", "timed", in_txn.data, in_txn.len, NULL, 0, &result));
    mi_buffer_free(&result);
    block_next(client, "commitTransaction");
    EXPECT_TIMEOUT(mi_session_commit_transaction(session, timeout.data, timeout.len));
    EXPECT_ERROR(mi_session_abort_transaction(session, doc.data, doc.len), MI_ERROR_ARGUMENT,
                 "unknown abort_transaction option \"timed\"");
    mi_buffer_free(&in_txn);
    /* start_transaction sends nothing: the Rust API refuses a timeout there. */
    EXPECT_ERROR(mi_session_start_transaction(session, timeout.data, timeout.len),
                 MI_ERROR_ARGUMENT, "a timeout on start_transaction applies to and_run");
    mi_session_free(session);

    /* A command's own timeoutMS (mi_run_command), and its readPreference. */
    mi_buffer count_cmd = bson("{\"count\": \"timed\"}");
    block_next(client, "count");
    EXPECT_TIMEOUT(mi_run_command(client, NULL, "capi", count_cmd.data, count_cmd.len,
                                  timeout.data, timeout.len, &result));
    mi_buffer nearest = bson("{\"readPreference\": {\"mode\": \"nearest\"}}");
    OK(mi_run_command(client, NULL, "capi", count_cmd.data, count_cmd.len, nearest.data,
                      nearest.len, &result));
    CHECK(json_contains(result.data, result.len, "\"n\":"));
    mi_buffer_free(&result);
    EXPECT_ERROR(mi_run_command(client, NULL, "capi", count_cmd.data, count_cmd.len, doc.data,
                                doc.len, &result),
                 MI_ERROR_ARGUMENT, "unknown run_command option \"timed\"");
    mi_buffer_free(&count_cmd);
    mi_buffer_free(&nearest);

    /* Options the operation has not: named, nothing sent. */
    mi_buffer mode_only = bson("{\"timeoutMode\": \"iteration\"}");
    EXPECT_ERROR(mi_insert_one(client, NULL, "capi", "timed", doc.data, doc.len, mode_only.data,
                               mode_only.len, &result),
                 MI_ERROR_ARGUMENT, "unknown insert_one option \"timeoutMode\"");
    mi_buffer bad = bson("{\"timeoutMS\": -1}");
    EXPECT_ERROR(mi_find_one(client, NULL, "capi", "timed", empty.data, empty.len, bad.data,
                             bad.len, &result),
                 MI_ERROR_ARGUMENT, "\"timeoutMS\" must be a non-negative integer");
    mi_buffer *owned[] = {&timeout, &cursor_timeout, &empty, &doc, &mode_only, &bad};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) mi_buffer_free(owned[i]);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s URI\n", argv[0]);
        return 2;
    }
    const char *uri = argv[1];
    CHECK(mi_version() != NULL && strlen(mi_version()) > 0);
    test_bson_helpers();
    test_client_errors(uri);
    test_null_handles();
    test_events_and_logs(uri);
    test_callbacks_calling_their_own_client(uri);
    test_append_metadata(uri);

    mi_client *client = NULL;
    OK(mi_client_new(uri, &client));
    test_crud(client);
    test_sessions(client, uri);
    test_labels_and_tokens(client);
    test_more_operations(client);
    test_client_bulk_write(client);
    test_with_transaction(client);
    test_gridfs(client);
    test_change_stream(client);
    test_search_indexes_and_snapshot_time(client);
    test_per_operation_timeout(client);
    mi_client_free(client);

    printf("capi_test: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
