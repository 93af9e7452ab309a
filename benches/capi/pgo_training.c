/*
 * The C ABI's training run for its profile-guided build (.ci/pgo-build): the
 * mix of benches/tools/pgo_training.rs through include/mongo_inline.h, as a
 * binding calls it. benches/tools/pgo_training.rs starts the servers and the
 * topology simulator and runs this program once per deployment:
 *
 *   pgo_training URI ROUNDS SECONDARIES TRANSACTIONS
 *
 * SECONDARIES and TRANSACTIONS are 1 where the deployment has them, else 0.
 * Each round: insert_one, find_one by _id (mi_find {limit: -1}), a find whose
 * cursor needs getMore, update_one, count_documents, an aggregate, a command,
 * a secondary read and a transaction where the deployment has them,
 * delete_one. Documents and filters that change per round are encoded by the
 * small BSON writer below, as a binding encodes its own; the fixed ones come
 * from mi_bson_from_json once. Every result is checked and any failure exits
 * non-zero, so a run that silently fails (and would train the error paths)
 * stops the build.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mongo_inline.h"

#define SEEDED 100
#define DB "pgo"
#define COLL "items_c"

static void check(const char *what, mi_error *error) {
    if (!error) return;
    fprintf(stderr, "pgo_training.c: %s: %s\n", what, error->message);
    mi_error_free(error);
    exit(1);
}

static void expect(bool ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "pgo_training.c: unexpected result: %s\n", what);
    exit(1);
}

static mi_buffer json(const char *text) {
    mi_buffer out = {NULL, 0};
    check("mi_bson_from_json", mi_bson_from_json(text, &out));
    return out;
}

/* A flat BSON document of int32, int64 and string fields. */
typedef struct {
    uint8_t bytes[256];
    size_t len;
} doc;

static void put(doc *d, const void *data, size_t len) {
    if (d->len + len > sizeof d->bytes - 1) {
        fprintf(stderr, "pgo_training.c: document too large\n");
        exit(1);
    }
    memcpy(d->bytes + d->len, data, len);
    d->len += len;
}

static void put_le(doc *d, uint64_t value, size_t width) {
    for (size_t i = 0; i < width; i++) {
        uint8_t byte = (uint8_t)(value >> (8 * i));
        put(d, &byte, 1);
    }
}

static void begin(doc *d) {
    d->len = 0;
    put_le(d, 0, 4); /* the length, written by end() */
}

static void key(doc *d, uint8_t type, const char *name) {
    put(d, &type, 1);
    put(d, name, strlen(name) + 1);
}

static void int32_field(doc *d, const char *name, int32_t value) {
    key(d, 0x10, name);
    put_le(d, (uint32_t)value, 4);
}

static void int64_field(doc *d, const char *name, int64_t value) {
    key(d, 0x12, name);
    put_le(d, (uint64_t)value, 8);
}

static void string_field(doc *d, const char *name, const char *value) {
    key(d, 0x02, name);
    put_le(d, strlen(value) + 1, 4);
    put(d, value, strlen(value) + 1);
}

static void end(doc *d) {
    uint8_t terminator = 0;
    put(d, &terminator, 1);
    uint32_t len = (uint32_t)d->len;
    for (size_t i = 0; i < 4; i++) d->bytes[i] = (uint8_t)(len >> (8 * i));
}

static doc by_id(int32_t id) {
    doc d;
    begin(&d);
    int32_field(&d, "_id", id);
    end(&d);
    return d;
}

static doc item(int32_t id, const char *prefix, int32_t round, int64_t n) {
    char name[32];
    snprintf(name, sizeof name, "%s %d", prefix, round);
    doc d;
    begin(&d);
    int32_field(&d, "_id", id);
    string_field(&d, "name", name);
    int64_field(&d, "n", n);
    end(&d);
    return d;
}

/* Reads the cursor to its end; returns how many documents it gave. */
static size_t drain(mi_cursor *cursor) {
    size_t count = 0;
    for (;;) {
        const uint8_t *document = NULL;
        size_t len = 0;
        check("mi_cursor_next", mi_cursor_next(cursor, &document, &len));
        if (!document) break;
        count++;
    }
    mi_cursor_free(cursor);
    return count;
}

/* How many documents a find of filter (filter_len bytes) gives. */
static size_t find_count(mi_client *client, const uint8_t *filter, size_t filter_len,
                         const mi_buffer *options) {
    mi_cursor *cursor = NULL;
    check("mi_find", mi_find(client, NULL, DB, COLL, filter, filter_len, options->data,
                             options->len, &cursor));
    return drain(cursor);
}

/* The URI with readPreference=secondaryPreferred added. */
static char *secondary_preferred(const char *uri) {
    const char *option = "readPreference=secondaryPreferred";
    size_t size = strlen(uri) + strlen(option) + 3;
    char *out = malloc(size);
    if (!out) exit(1);
    const char *separator = strchr(uri, '?') ? "&" : (uri[strlen(uri) - 1] == '/' ? "?" : "/?");
    snprintf(out, size, "%s%s%s", uri, separator, option);
    return out;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: pgo_training URI ROUNDS SECONDARIES TRANSACTIONS\n");
        return 2;
    }
    const char *uri = argv[1];
    int rounds = atoi(argv[2]);
    bool secondaries = strcmp(argv[3], "1") == 0, transactions = strcmp(argv[4], "1") == 0;
    if (rounds <= 0) {
        fprintf(stderr, "pgo_training.c: ROUNDS must be positive\n");
        return 2;
    }
    mi_client *client = NULL;
    check("mi_client_new", mi_client_new(uri, &client));
    mi_client *secondary = NULL;
    if (secondaries) {
        char *secondary_uri = secondary_preferred(uri);
        check("mi_client_new (secondaryPreferred)", mi_client_new(secondary_uri, &secondary));
        free(secondary_uri);
    }

    mi_buffer drop = json("{\"drop\": \"" COLL "\"}");
    mi_buffer ping = json("{\"ping\": 1}");
    mi_buffer reply = {NULL, 0}, result = {NULL, 0};
    mi_error *dropped = mi_client_run_command(client, NULL, DB, drop.data, drop.len, &reply);
    mi_error_free(dropped); /* NamespaceNotFound on the first run */
    mi_buffer_free(&reply);

    doc seeded[SEEDED];
    const uint8_t *seeded_data[SEEDED];
    size_t seeded_lengths[SEEDED];
    for (int32_t i = 0; i < SEEDED; i++) {
        seeded[i] = item(i, "item", i, 0);
        seeded_data[i] = seeded[i].bytes;
        seeded_lengths[i] = seeded[i].len;
    }
    check("mi_insert_many", mi_insert_many(client, NULL, DB, COLL, seeded_data, seeded_lengths,
                                           SEEDED, NULL, 0, &result));
    mi_buffer_free(&result);

    mi_buffer find_one = json("{\"limit\": -1}");
    mi_buffer batches = json("{\"sort\": {\"_id\": 1}, \"batchSize\": 16, \"limit\": 40}");
    mi_buffer below_seeded = json("{\"_id\": {\"$lt\": 100}}");
    mi_buffer increment = json("{\"$inc\": {\"n\": 1}}");
    mi_buffer decrement = json("{\"$inc\": {\"n\": -1}}");
    mi_buffer match = json("{\"$match\": {\"_id\": {\"$lt\": 100}}}");
    mi_buffer group = json("{\"$group\": {\"_id\": null, \"total\": {\"$sum\": \"$n\"}}}");
    const uint8_t *stages[2] = {match.data, group.data};
    size_t stage_lengths[2] = {match.len, group.len};

    for (int32_t round = 0; round < rounds; round++) {
        int32_t id = SEEDED + round, k = id % SEEDED;
        doc inserted = item(id, "new", round, 1), key = by_id(k), own = by_id(id);
        check("mi_insert_one",
              mi_insert_one(client, NULL, DB, COLL, inserted.bytes, inserted.len, NULL, 0, &result));
        mi_buffer_free(&result);
        expect(find_count(client, key.bytes, key.len, &find_one) == 1, "find_one by _id");
        expect(find_count(client, own.bytes, own.len, &find_one) == 1,
               "find_one of the new document");
        expect(find_count(client, below_seeded.data, below_seeded.len, &batches) == 40,
               "a cursor over several batches");
        check("mi_update_one", mi_update_one(client, NULL, DB, COLL, key.bytes, key.len,
                                             increment.data, increment.len, NULL, 0, &result));
        mi_buffer_free(&result);
        uint64_t counted = 0;
        check("mi_count_documents",
              mi_count_documents(client, NULL, DB, COLL, below_seeded.data, below_seeded.len,
                                 NULL, 0, &counted));
        expect(counted == SEEDED, "count_documents");
        mi_cursor *cursor = NULL;
        check("mi_aggregate", mi_aggregate(client, NULL, DB, COLL, stages, stage_lengths, 2,
                                           NULL, 0, &cursor));
        expect(drain(cursor) == 1, "aggregate");
        check("mi_client_run_command",
              mi_client_run_command(client, NULL, DB, ping.data, ping.len, &reply));
        mi_buffer_free(&reply);
        if (secondary) {
            expect(find_count(secondary, key.bytes, key.len, &find_one) == 1, "a secondary read");
        }
        if (transactions) {
            doc next = by_id((k + 1) % SEEDED);
            mi_session *session = NULL;
            check("mi_session_start", mi_session_start(client, NULL, 0, &session));
            check("mi_session_start_transaction",
                  mi_session_start_transaction(session, NULL, 0));
            check("mi_update_one (in a transaction)",
                  mi_update_one(client, session, DB, COLL, key.bytes, key.len, decrement.data,
                                decrement.len, NULL, 0, &result));
            mi_buffer_free(&result);
            check("mi_update_one (in a transaction)",
                  mi_update_one(client, session, DB, COLL, next.bytes, next.len, increment.data,
                                increment.len, NULL, 0, &result));
            mi_buffer_free(&result);
            check("mi_session_commit_transaction", mi_session_commit_transaction(session, NULL, 0));
            mi_session_free(session);
        }
        check("mi_delete_one",
              mi_delete_one(client, NULL, DB, COLL, own.bytes, own.len, NULL, 0, &result));
        mi_buffer_free(&result);
    }
    doc everything;
    begin(&everything);
    end(&everything);
    uint64_t left = 0;
    check("mi_count_documents", mi_count_documents(client, NULL, DB, COLL, everything.bytes,
                                                   everything.len, NULL, 0, &left));
    expect(left == SEEDED, "the rounds' inserts were all deleted");

    mi_buffer *fixed[] = {&drop, &ping, &find_one, &batches, &below_seeded,
                          &increment, &decrement, &match, &group};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) mi_buffer_free(fixed[i]);
    mi_client_free(secondary);
    mi_client_free(client);
    return 0;
}
