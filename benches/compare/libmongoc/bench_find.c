/* libmongoc beside mongo-inline: the benches/tools/bench_find.rs protocol in C, so
 * benches/shapes.rs can measure both drivers the same way.
 *
 *   bench_find cold URI DB COLL ID     one find_one by _id, then exit
 *                                      prints: DOC <relaxed extended JSON>
 *   bench_find warm URI DB COLL N      N find_one by _id (_id: 1) on one client
 *                                      prints: WARM ops_per_s=<x> cpu_us_per_op=<y>
 *                                      user_us_per_op=<u> sys_us_per_op=<s>
 *                                      preempted_per_op=<p>
 *   bench_find cursor URI DB COLL N    iterates find({}) over COLL (N expected)
 *                                      prints: CURSOR docs=<n> docs_per_s=<x> mb_per_s=<y> cpu_us_per_doc=<z>
 *   bench_find insert URI DB COLL N    insert_many of N {_id, x, s} documents
 *                                      prints: INSERT docs=<n> docs_per_s=<x> mb_per_s=<y> cpu_us_per_doc=<z>
 *
 * A single-threaded mongoc_client_t (no pool, no background thread), as a
 * short-lived process would use it. The clocks are benches/bench_clock.h,
 * shared with the other C programs. Not built by CI; build with
 * (Debian: apt-get install libmongoc-dev):
 *
 *   gcc -O2 -Wall -o target/bench_find_libmongoc benches/compare/libmongoc/bench_find.c \
 *       $(pkg-config --cflags --libs libmongoc-1.0)
 *   SHAPES_COMPARE=libmongoc=target/bench_find_libmongoc cargo bench --bench shapes
 */
#include <mongoc/mongoc.h>

#include "../../bench_clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, const bson_error_t *error) {
    fprintf(stderr, "bench_find: %s: %s\n", what, error ? error->message : "failed");
    exit(1);
}

static mongoc_client_t *client_for(const char *uri_text) {
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_text, &error);
    if (!uri) fail("URI", &error);
    mongoc_client_t *client = mongoc_client_new_from_uri_with_error(uri, &error);
    if (!client) fail("client", &error);
    mongoc_uri_destroy(uri);
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    return client;
}

/* find_one: limit 1, single batch; returns a copy of the document or NULL. */
static bson_t *find_one(mongoc_collection_t *coll, const bson_t *filter) {
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_INT64(&opts, "limit", 1);
    BSON_APPEND_BOOL(&opts, "singleBatch", true);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, &opts, NULL);
    const bson_t *doc = NULL;
    bson_t *found = NULL;
    if (mongoc_cursor_next(cursor, &doc)) found = bson_copy(doc);
    bson_error_t error;
    if (mongoc_cursor_error(cursor, &error)) fail("find", &error);
    mongoc_cursor_destroy(cursor);
    bson_destroy(&opts);
    return found;
}

static int cold(mongoc_collection_t *coll, const char *id) {
    char *json = bson_strdup_printf("{\"_id\": %s}", id);
    bson_error_t error;
    bson_t *filter = bson_new_from_json((const uint8_t *)json, -1, &error);
    if (!filter) fail("ID is not Extended JSON", &error);
    bson_t *found = find_one(coll, filter);
    if (found) {
        char *text = bson_as_relaxed_extended_json(found, NULL);
        printf("DOC %s\n", text);
        bson_free(text);
        bson_destroy(found);
    } else {
        printf("DOC null\n");
    }
    /* A pipe makes stdout fully buffered: without this the line would
       leave at exit, after the client's teardown, and a harness timing the
       first result (benches/warm_start.rs) would time the teardown too. */
    fflush(stdout);
    bson_destroy(filter);
    bson_free(json);
    return 0;
}

static int warm(mongoc_collection_t *coll, long n) {
    bson_t *filter = BCON_NEW("_id", BCON_INT32(1));
    bson_t *first = find_one(coll, filter); /* scans and connects: not counted */
    if (first) bson_destroy(first);
    warm_mark start = warm_mark_now();
    for (long i = 0; i < n; i++) {
        bson_t *found = find_one(coll, filter);
        if (found) bson_destroy(found);
    }
    print_warm(n, start);
    bson_destroy(filter);
    return 0;
}

static void throughput(const char *label, long docs, long bytes, double seconds, double cpu) {
    printf("%s docs=%ld docs_per_s=%.0f mb_per_s=%.1f cpu_us_per_doc=%.2f\n", label, docs,
           docs / seconds, bytes / seconds / 1e6, cpu / 1000.0 / docs);
}

static int cursor(mongoc_collection_t *coll, long expected) {
    bson_t filter = BSON_INITIALIZER;
    double cpu0 = cpu_ns(), wall0 = wall_s();
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, &filter, NULL, NULL);
    const bson_t *doc;
    long docs = 0, bytes = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        bytes += doc->len;
        docs++;
    }
    bson_error_t error;
    if (mongoc_cursor_error(cursor, &error)) fail("cursor", &error);
    mongoc_cursor_destroy(cursor);
    double wall = wall_s() - wall0, cpu = cpu_ns() - cpu0;
    if (docs != expected) {
        fprintf(stderr, "bench_find: expected %ld documents, found %ld\n", expected, docs);
        return 1;
    }
    throughput("CURSOR", docs, bytes, wall, cpu);
    return 0;
}

static int insert(mongoc_collection_t *coll, long n) {
    bson_t **docs = bson_malloc(sizeof(bson_t *) * n);
    long bytes = 0;
    for (long i = 0; i < n; i++) {
        docs[i] = BCON_NEW("_id", BCON_INT64(i), "x", BCON_INT64(i), "s", BCON_UTF8("abcdefghij"));
        bytes += docs[i]->len;
    }
    double cpu0 = cpu_ns(), wall0 = wall_s();
    bson_error_t error;
    if (!mongoc_collection_insert_many(coll, (const bson_t **)docs, n, NULL, NULL, &error))
        fail("insert_many", &error);
    double wall = wall_s() - wall0, cpu = cpu_ns() - cpu0;
    throughput("INSERT", n, bytes, wall, cpu);
    for (long i = 0; i < n; i++) bson_destroy(docs[i]);
    bson_free(docs);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: bench_find cold|warm|cursor|insert URI DB COLL ID|N\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = 0;
    if (strcmp(mode, "cold") != 0) {
        char *end;
        n = strtol(argv[5], &end, 10);
        if (*end || n <= 0) {
            fprintf(stderr, "bench_find: N must be a positive whole number, not %s\n", argv[5]);
            return 1;
        }
    }
    mongoc_init();
    mongoc_client_t *client = client_for(argv[2]);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, argv[3], argv[4]);
    int status;
    if (strcmp(mode, "cold") == 0) status = cold(coll, argv[5]);
    else if (strcmp(mode, "warm") == 0) status = warm(coll, n);
    else if (strcmp(mode, "cursor") == 0) status = cursor(coll, n);
    else if (strcmp(mode, "insert") == 0) status = insert(coll, n);
    else {
        fprintf(stderr, "bench_find: unknown mode %s: expected cold, warm, cursor or insert\n", mode);
        status = 2;
    }
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    mongoc_cleanup();
    return status;
}
