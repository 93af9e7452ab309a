/*
 * mongo-inline from C: insert, query, update, a transaction, error handling.
 *
 *   cargo rustc --release --lib --features capi --crate-type cdylib --crate-type staticlib
 *   gcc -std=c11 -Wall -Iinclude examples/c/crud.c target/release/libmongo_inline.a \
 *       -lpthread -ldl -lm -o crud
 *   ./crud 'mongodb://127.0.0.1:27017/?replicaSet=rs0'
 *
 * Every call returns NULL or an mi_error* to free; every buffer, string and
 * handle the library hands out is freed below (valgrind finds no leak).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mongo_inline.h"

/* Prints and frees err; returns whether there was one. */
static int failed(const char *what, mi_error *err) {
    if (!err) return 0;
    fprintf(stderr, "%s failed: %s (domain %d, code %d", what, err->message, err->domain,
            err->code);
    for (size_t i = 0; i < err->label_count; i++) fprintf(stderr, ", label %s", err->labels[i]);
    fprintf(stderr, ")\n");
    mi_error_free(err);
    return 1;
}

/* Extended JSON -> BSON, for brevity; real bindings build BSON themselves. */
static mi_buffer bson(const char *json) {
    mi_buffer out = {NULL, 0};
    if (failed("mi_bson_from_json", mi_bson_from_json(json, &out))) exit(1);
    return out;
}

static void print_bson(const char *label, const uint8_t *data, size_t len) {
    char *json = NULL;
    if (failed("mi_bson_to_json", mi_bson_to_json(data, len, &json))) return;
    printf("%s%s\n", label, json);
    mi_string_free(json);
}

static void on_event(void *user_data, const mi_event *event) {
    int *commands = user_data;
    if (event->kind == MI_EVENT_COMMAND_SUCCEEDED) (*commands)++;
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : "mongodb://127.0.0.1:27017/";
    int status = 1, commands = 0;
    mi_client *client = NULL;
    mi_session *session = NULL;
    mi_cursor *cursor = NULL;
    mi_buffer result = {NULL, 0};
    mi_buffer drop = bson("{\"drop\": \"people\"}");
    mi_buffer grace = bson("{\"name\": \"Grace\", \"born\": 1906}");
    mi_buffer edsger = bson("{\"name\": \"Edsger\", \"born\": 1930}");
    mi_buffer filter = bson("{\"born\": {\"$gt\": 1900}}");
    mi_buffer options = bson("{\"sort\": {\"born\": 1}, \"projection\": {\"_id\": 0}}");
    mi_buffer update = bson("{\"$set\": {\"checked\": true}}");
    mi_buffer ada = bson("{\"_id\": 1815, \"name\": \"Ada\"}");

    printf("mongo-inline %s\n", mi_version());
    /* No I/O yet: the URI is parsed and checked. */
    if (failed("mi_client_new", mi_client_new(uri, &client))) goto done;
    if (failed("events", mi_client_set_event_callback(client, on_event, &commands))) goto done;

    mi_error_free(mi_client_run_command(client, NULL, "example", drop.data, drop.len, &result));
    mi_buffer_free(&result);

    const uint8_t *docs[] = {grace.data, edsger.data};
    size_t lens[] = {grace.len, edsger.len};
    if (failed("insert_many", mi_insert_many(client, NULL, "example", "people", docs, lens, 2, NULL, 0,
                                             &result)))
        goto done;
    print_bson("inserted: ", result.data, result.len);
    mi_buffer_free(&result);

    if (failed("find", mi_find(client, NULL, "example", "people", filter.data, filter.len,
                               options.data, options.len, &cursor)))
        goto done;
    for (;;) {
        const uint8_t *doc = NULL;
        size_t len = 0;
        if (failed("cursor_next", mi_cursor_next(cursor, &doc, &len))) goto done;
        if (!doc) break;
        print_bson("found: ", doc, len);
    }
    mi_cursor_free(cursor);
    cursor = NULL;

    if (failed("update_many", mi_update_many(client, NULL, "example", "people", filter.data,
                                             filter.len, update.data, update.len, NULL, 0,
                                             &result)))
        goto done;
    print_bson("updated: ", result.data, result.len);
    mi_buffer_free(&result);

    /* A transaction: both inserts or neither. */
    if (failed("session", mi_session_start(client, NULL, 0, &session))) goto done;
    if (failed("start_transaction", mi_session_start_transaction(session, NULL, 0))) goto done;
    if (failed("insert in transaction", mi_insert_one(client, session, "example", "people",
                                                      ada.data, ada.len, NULL, 0, &result)))
        goto done;
    mi_buffer_free(&result);
    if (failed("commit", mi_session_commit_transaction(session, NULL, 0))) goto done;

    /* Errors carry the server's code: inserting Ada again is a duplicate key. */
    mi_error *err = mi_insert_one(client, NULL, "example", "people", ada.data, ada.len, NULL, 0, &result);
    int duplicate = err && err->domain == MI_ERROR_WRITE && err->code == 11000;
    if (duplicate) printf("duplicate key, as expected: %s\n", err->message);
    mi_error_free(err);
    mi_buffer_free(&result);
    if (!duplicate) {
        fprintf(stderr, "expected a duplicate-key error\n");
        goto done;
    }

    uint64_t count = 0;
    if (failed("count", mi_count_documents(client, NULL, "example", "people", filter.data,
                                           filter.len, NULL, 0, &count)))
        goto done;
    double tokens = 0;
    bool has_bucket = false;
    if (failed("retry_tokens", mi_client_retry_tokens(client, &tokens, &has_bucket))) goto done;
    printf("born after 1900: %llu; commands: %d; retry tokens: %.1f\n", (unsigned long long)count,
           commands, has_bucket ? tokens : -1.0);
    status = count == 2 ? 0 : 1;

done:
    mi_cursor_free(cursor);
    mi_session_free(session);
    mi_client_free(client);
    mi_buffer_free(&drop);
    mi_buffer_free(&grace);
    mi_buffer_free(&edsger);
    mi_buffer_free(&filter);
    mi_buffer_free(&options);
    mi_buffer_free(&update);
    mi_buffer_free(&ada);
    return status;
}
