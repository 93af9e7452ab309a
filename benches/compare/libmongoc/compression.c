/* libmongoc's side of benches/compression.rs: reads every document of a
 * collection RUNS times through one client whose URI names the compressor,
 * walking each document's fields (libmongoc hands out views into the reply;
 * the walk touches every document as reading it would).
 *
 * Protocol: `compression URI DB COLL RUNS`; after a one-document find (the
 * handshake and the first exchange are not the cursor's) it prints "ready"
 * and waits for a line on stdin (the bench resets its byte counters), then
 * prints "DOCS CPU_US WALL_US": documents read, this thread's CPU time and
 * the wall time of the RUNS cursors.
 *
 * Not built by CI; the bench builds it when pkg-config finds libmongoc:
 *   gcc -O2 -Wall -o target/compression_libmongoc benches/compare/libmongoc/compression.c \
 *       $(pkg-config --cflags --libs libmongoc-1.0)
 */
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long micros(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (long long)t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

/* Reads the whole cursor; returns documents read, or -1 on an error. */
static long long drain(mongoc_cursor_t *cursor, long long *fields) {
    const bson_t *doc;
    bson_error_t error;
    long long docs = 0;
    while (mongoc_cursor_next(cursor, &doc)) {
        bson_iter_t it;
        if (bson_iter_init(&it, doc)) {
            while (bson_iter_next(&it)) {
                (*fields)++;
            }
        }
        docs++;
    }
    if (mongoc_cursor_error(cursor, &error)) {
        fprintf(stderr, "cursor: %s\n", error.message);
        return -1;
    }
    return docs;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s URI DB COLL RUNS\n", argv[0]);
        return 2;
    }
    mongoc_init();
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(argv[1], &error);
    if (!uri) {
        fprintf(stderr, "URI: %s\n", error.message);
        return 2;
    }
    mongoc_client_t *client = mongoc_client_new_from_uri(uri);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, argv[2], argv[3]);
    int runs = atoi(argv[4]);
    bson_t filter = BSON_INITIALIZER;
    long long fields = 0;

    bson_t *one = BCON_NEW("limit", BCON_INT64(1));
    mongoc_cursor_t *warm = mongoc_collection_find_with_opts(coll, &filter, one, NULL);
    long long warmed = drain(warm, &fields);
    mongoc_cursor_destroy(warm);
    bson_destroy(one);
    if (warmed != 1) {
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) {
        return 1;
    }

    long long cpu = micros(CLOCK_THREAD_CPUTIME_ID);
    long long wall = micros(CLOCK_MONOTONIC);
    long long docs = 0;
    for (int run = 0; run < runs; run++) {
        mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, &filter, NULL, NULL);
        long long read = drain(cursor, &fields);
        mongoc_cursor_destroy(cursor);
        if (read < 0) {
            return 1;
        }
        docs += read;
    }
    cpu = micros(CLOCK_THREAD_CPUTIME_ID) - cpu;
    wall = micros(CLOCK_MONOTONIC) - wall;
    printf("%lld %lld %lld\n", docs, cpu, wall);
    fflush(stdout);

    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    mongoc_uri_destroy(uri);
    mongoc_cleanup();
    return fields > 0 ? 0 : 1;
}
