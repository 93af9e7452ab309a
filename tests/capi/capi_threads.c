/*
 * The thread rule of the C ABI: a client (with its sessions and cursors) is
 * used from one thread at a time. Here 4 threads each run their own client
 * at the same time, and one client is handed from thread to thread (one at
 * a time, joined in between). Every insert must land.
 * Usage: capi_threads URI
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mongo_inline.h"

#define THREADS 4
#define INSERTS 25

struct job {
    const char *uri;
    mi_client *client; /* NULL: the thread makes (and frees) its own */
    int index;
    int failures;
};

static mi_error *insert_batch(mi_client *client, int index) {
    char json[96];
    mi_session *session = NULL;
    mi_error *err = mi_session_start(client, NULL, 0, &session);
    if (err) return err;
    for (int i = 0; i < INSERTS && !err; i++) {
        snprintf(json, sizeof json, "{\"thread\": %d, \"i\": %d}", index, i);
        mi_buffer doc = {NULL, 0}, result = {NULL, 0};
        err = mi_bson_from_json(json, &doc);
        if (!err)
            err = mi_insert_one(client, i % 2 ? session : NULL, "capi", "threads", doc.data,
                                doc.len, NULL, 0, &result);
        mi_buffer_free(&doc);
        mi_buffer_free(&result);
    }
    mi_session_free(session);
    return err;
}

static void *run(void *arg) {
    struct job *job = arg;
    mi_client *client = job->client;
    mi_error *err = NULL;
    if (!client) err = mi_client_new(job->uri, &client);
    if (!err) err = insert_batch(client, job->index);
    if (err) {
        fprintf(stderr, "thread %d: %s\n", job->index, err->message);
        mi_error_free(err);
        job->failures++;
    }
    if (!job->client) mi_client_free(client);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s URI\n", argv[0]);
        return 2;
    }
    mi_client *shared = NULL;
    mi_error *err = mi_client_new(argv[1], &shared);
    if (err) return fprintf(stderr, "%s\n", err->message), mi_error_free(err), 1;
    mi_buffer drop = {NULL, 0}, reply = {NULL, 0};
    mi_error_free(mi_bson_from_json("{\"drop\": \"threads\"}", &drop));
    mi_error_free(mi_client_run_command(shared, NULL, "capi", drop.data, drop.len, &reply));
    mi_buffer_free(&drop);
    mi_buffer_free(&reply);

    /* Own clients, concurrently. */
    pthread_t threads[THREADS];
    struct job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (struct job){argv[1], NULL, t, 0};
        pthread_create(&threads[t], NULL, run, &jobs[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);

    /* One client, handed from thread to thread. */
    struct job handed[THREADS];
    for (int t = 0; t < THREADS; t++) {
        handed[t] = (struct job){argv[1], shared, THREADS + t, 0};
        pthread_t thread;
        pthread_create(&thread, NULL, run, &handed[t]);
        pthread_join(thread, NULL);
    }

    int failures = 0;
    for (int t = 0; t < THREADS; t++) failures += jobs[t].failures + handed[t].failures;
    mi_buffer empty = {NULL, 0};
    uint64_t count = 0;
    mi_error_free(mi_bson_from_json("{}", &empty));
    err = mi_count_documents(shared, NULL, "capi", "threads", empty.data, empty.len, NULL, 0,
                             &count);
    mi_buffer_free(&empty);
    if (err) {
        fprintf(stderr, "count: %s\n", err->message);
        mi_error_free(err);
        failures++;
    }
    uint64_t expected = 2 * THREADS * INSERTS;
    if (count != expected) {
        fprintf(stderr, "%llu documents, expected %llu\n", (unsigned long long)count,
                (unsigned long long)expected);
        failures++;
    }
    mi_client_free(shared);
    printf("capi_threads: %d concurrent clients and one handed over %d times, %llu documents, "
           "%d failures\n",
           THREADS, THREADS, (unsigned long long)count, failures);
    return failures == 0 ? 0 : 1;
}
