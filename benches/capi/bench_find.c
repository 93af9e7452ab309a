/* mongo-inline through its C ABI: the cold and warm modes of the
 * benches/tools/bench_find.rs protocol, as a binding in another language would run
 * a find_one (the filter and options as BSON bytes, a cursor, the document
 * copied out), so benches/shapes.rs can measure it beside libmongoc's
 * single-threaded client, which is called from C the same way.
 *
 *   bench_find cold URI DB COLL ID  one find_one by _id, then exit
 *     prints: DOC <relaxed extended JSON>
 *   bench_find warm URI DB COLL N   N find_one by _id (_id: 1) on one client
 *     prints: WARM ops_per_s=<x> cpu_us_per_op=<y> user_us_per_op=<u>
 *     sys_us_per_op=<s> preempted_per_op=<p> (involuntary context switches)
 *
 * Each find_one is mi_find with {limit: -1} (one document in a single batch,
 * as the find spec maps a negative limit), one
 * mi_cursor_next, a malloc'd copy of the document (as libmongoc's program
 * keeps a bson_copy) and mi_cursor_free. The clocks are benches/bench_clock.h,
 * shared with the other C programs.
 *
 *   cargo rustc --release --lib --features capi --crate-type cdylib --crate-type staticlib
 *   gcc -O2 -Wall -Iinclude -o target/bench_find_capi benches/capi/bench_find.c \
 *       target/release/libmongo_inline.a -lpthread -ldl -lm
 *   SHAPES_COMPARE=capi=target/bench_find_capi cargo bench --bench shapes
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench_clock.h"
#include "mongo_inline.h"

static void check(const char *what, mi_error *error) {
    if (!error) return;
    fprintf(stderr, "bench_find: %s: %s\n", what, error->message);
    mi_error_free(error);
    exit(1);
}

static mi_buffer bson(const char *json) {
    mi_buffer out = {NULL, 0};
    check("mi_bson_from_json", mi_bson_from_json(json, &out));
    return out;
}

/* find_one: the first matching document, copied, or NULL. */
static uint8_t *find_one(mi_client *client, const char *db, const char *coll,
                         const mi_buffer *filter, const mi_buffer *options) {
    mi_cursor *cursor = NULL;
    check("mi_find", mi_find(client, NULL, db, coll, filter->data, filter->len, options->data,
                             options->len, &cursor));
    const uint8_t *document = NULL;
    size_t len = 0;
    check("mi_cursor_next", mi_cursor_next(cursor, &document, &len));
    uint8_t *found = NULL;
    if (document) {
        found = malloc(len);
        if (!found) exit(1);
        memcpy(found, document, len);
    }
    mi_cursor_free(cursor);
    return found;
}

/* One find_one of {_id: ID} (ID in Extended JSON), printed. */
static int cold(mi_client *client, const char *db, const char *coll, const char *id) {
    size_t size = strlen(id) + 16;
    char *json = malloc(size);
    if (!json) return 1;
    snprintf(json, size, "{\"_id\": %s}", id);
    mi_buffer filter = bson(json);
    mi_buffer options = bson("{\"limit\": -1}");
    uint8_t *found = find_one(client, db, coll, &filter, &options);
    if (found) {
        uint32_t len;
        memcpy(&len, found, 4); /* BSON's length prefix, little-endian like the host */
        char *text = NULL;
        check("mi_bson_to_json", mi_bson_to_json(found, len, &text));
        printf("DOC %s\n", text);
        mi_string_free(text);
        free(found);
    } else {
        printf("DOC null\n");
    }
    mi_buffer_free(&filter);
    mi_buffer_free(&options);
    free(json);
    mi_client_free(client);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 6 || (strcmp(argv[1], "warm") != 0 && strcmp(argv[1], "cold") != 0)) {
        fprintf(stderr, "usage: bench_find cold|warm URI DB COLL ID|N\n");
        return 2;
    }
    if (strcmp(argv[1], "cold") == 0) {
        mi_client *client = NULL;
        check("mi_client_new", mi_client_new(argv[2], &client));
        return cold(client, argv[3], argv[4], argv[5]);
    }
    char *end;
    long n = strtol(argv[5], &end, 10);
    if (*end || n <= 0) {
        fprintf(stderr, "bench_find: N must be a positive whole number, not %s\n", argv[5]);
        return 2;
    }
    const char *db = argv[3], *coll = argv[4];
    mi_client *client = NULL;
    check("mi_client_new", mi_client_new(argv[2], &client));
    mi_buffer filter = bson("{\"_id\": 1}");
    mi_buffer options = bson("{\"limit\": -1}");

    uint8_t *first = find_one(client, db, coll, &filter, &options); /* connects: not counted */
    if (!first) {
        fprintf(stderr, "bench_find: no document with _id 1 in %s.%s\n", db, coll);
        return 1;
    }
    free(first);
    warm_mark start = warm_mark_now();
    for (long i = 0; i < n; i++) free(find_one(client, db, coll, &filter, &options));
    print_warm(n, start);
    mi_buffer_free(&filter);
    mi_buffer_free(&options);
    mi_client_free(client);
    return 0;
}
