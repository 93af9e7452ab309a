/*
 * fork() through the C ABI, as a pre-forking CGI/PHP server does it: the
 * parent connects and runs operations, then forks children that keep using
 * the inherited client, each inserting documents without _id, with implicit
 * sessions and with an explicit session. Checks that every insert landed and
 * that no lsid (seen in the command-started events) is used by two processes.
 * Usage: capi_fork URI
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mongo_inline.h"

#define CHILDREN 4
#define INSERTS_PER_KIND 10
#define MAX_LSIDS 64
#define LSID_LEN 64

/* The distinct lsids this process has sent (base64 of the UUID). */
static char lsids[MAX_LSIDS][LSID_LEN];
static int lsid_count = 0;

static void remember_lsid(const char *lsid) {
    for (int i = 0; i < lsid_count; i++)
        if (strcmp(lsids[i], lsid) == 0) return;
    if (lsid_count < MAX_LSIDS) {
        snprintf(lsids[lsid_count], LSID_LEN, "%s", lsid);
        lsid_count++;
    }
}

/* Takes the lsid out of every command this process sends. */
static void on_event(void *user_data, const mi_event *event) {
    (void)user_data;
    if (event->kind != MI_EVENT_COMMAND_STARTED || !event->document) return;
    char *json = NULL;
    mi_error *err = mi_bson_to_json(event->document, event->document_len, &json);
    if (err) {
        mi_error_free(err);
        return;
    }
    const char *at = strstr(json, "\"lsid\":");
    if (at && (at = strstr(at, "\"base64\":\""))) {
        at += strlen("\"base64\":\"");
        const char *end = strchr(at, '"');
        if (end && end - at < LSID_LEN) {
            char lsid[LSID_LEN];
            memcpy(lsid, at, (size_t)(end - at));
            lsid[end - at] = '\0';
            remember_lsid(lsid);
        }
    }
    mi_string_free(json);
}

static int fail(const char *what, mi_error *err) {
    fprintf(stderr, "[%d] %s: [%d/%d] %s\n", (int)getpid(), what, err->domain, err->code,
            err->message);
    mi_error_free(err);
    return 1;
}

static mi_buffer document(const char *json) {
    mi_buffer out = {NULL, 0};
    mi_error *err = mi_bson_from_json(json, &out);
    if (err) exit(fail("bson", err));
    return out;
}

/* A child: inserts with implicit sessions, then inside an explicit one,
 * then writes its lsids to `out`, one per line. */
static int child(mi_client *client, int index, int out) {
    char json[128];
    mi_buffer result = {NULL, 0};
    mi_error *err;
    for (int i = 0; i < INSERTS_PER_KIND; i++) {
        snprintf(json, sizeof json, "{\"child\": %d, \"i\": %d, \"session\": false}", index, i);
        mi_buffer doc = document(json);
        err = mi_insert_one(client, NULL, "capi", "forked", doc.data, doc.len, NULL, 0, &result);
        mi_buffer_free(&doc);
        if (err) return fail("implicit-session insert", err);
        mi_buffer_free(&result);
    }
    mi_session *session = NULL;
    if ((err = mi_session_start(client, NULL, 0, &session))) return fail("session start", err);
    for (int i = 0; i < INSERTS_PER_KIND; i++) {
        snprintf(json, sizeof json, "{\"child\": %d, \"i\": %d, \"session\": true}", index, i);
        mi_buffer doc = document(json);
        err = mi_insert_one(client, session, "capi", "forked", doc.data, doc.len, NULL, 0, &result);
        mi_buffer_free(&doc);
        if (err) return fail("explicit-session insert", err);
        mi_buffer_free(&result);
    }
    mi_session_free(session);
    FILE *pipe = fdopen(out, "w");
    for (int i = 0; i < lsid_count; i++) fprintf(pipe, "%s\n", lsids[i]);
    fclose(pipe);
    mi_client_free(client);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s URI\n", argv[0]);
        return 2;
    }
    mi_client *client = NULL;
    mi_error *err;
    if ((err = mi_client_new(argv[1], &client))) return fail("client", err);
    if ((err = mi_client_set_event_callback(client, on_event, NULL))) return fail("events", err);

    /* The parent connects and uses (and pools) sessions before forking. */
    mi_buffer drop = document("{\"drop\": \"forked\"}"), reply = {NULL, 0};
    mi_error_free(mi_client_run_command(client, NULL, "capi", drop.data, drop.len, &reply));
    mi_buffer_free(&reply);
    mi_buffer_free(&drop);
    mi_buffer parent_doc = document("{\"parent\": true}");
    if ((err = mi_insert_one(client, NULL, "capi", "forked", parent_doc.data, parent_doc.len, NULL, 0,
                             &reply)))
        return fail("parent insert", err);
    mi_buffer_free(&reply);
    mi_buffer_free(&parent_doc);
    int parent_lsids = lsid_count;

    int pipes[CHILDREN];
    pid_t pids[CHILDREN];
    for (int c = 0; c < CHILDREN; c++) {
        int fds[2];
        if (pipe(fds) != 0) return perror("pipe"), 1;
        fflush(NULL);
        pids[c] = fork();
        if (pids[c] < 0) return perror("fork"), 1;
        if (pids[c] == 0) {
            close(fds[0]);
            lsid_count = 0; /* the child reports only what it sent itself */
            _exit(child(client, c, fds[1]));
        }
        close(fds[1]);
        pipes[c] = fds[0];
    }

    int failures = 0;
    char all[CHILDREN * MAX_LSIDS + MAX_LSIDS][LSID_LEN + 2];
    int total = 0;
    for (int i = 0; i < lsid_count; i++) snprintf(all[total++], sizeof all[0], "%s", lsids[i]);
    for (int c = 0; c < CHILDREN; c++) {
        FILE *in = fdopen(pipes[c], "r");
        char line[LSID_LEN + 2];
        int mine = 0;
        while (fgets(line, sizeof line, in)) {
            line[strcspn(line, "\n")] = '\0';
            for (int j = 0; j < total; j++) {
                if (strcmp(all[j], line) == 0) {
                    fprintf(stderr, "lsid %s used by child %d and another process\n", line, c);
                    failures++;
                }
            }
            if (total < (int)(sizeof all / sizeof all[0]))
                snprintf(all[total++], sizeof all[0], "%s", line);
            mine++;
        }
        fclose(in);
        int status = 0;
        waitpid(pids[c], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child %d failed (status %d)\n", c, status);
            failures++;
        }
        /* The explicit session may reuse the pooled server session the
         * implicit ones returned, so one lsid per child is right. */
        if (mine < 1) {
            fprintf(stderr, "child %d reported no lsid\n", c);
            failures++;
        }
    }

    /* The parent's client still works after its children used copies. */
    mi_buffer empty = document("{}");
    uint64_t count = 0;
    if ((err = mi_count_documents(client, NULL, "capi", "forked", empty.data, empty.len, NULL, 0,
                                  &count)))
        return fail("count", err);
    mi_buffer_free(&empty);
    uint64_t expected = 1 + CHILDREN * 2 * INSERTS_PER_KIND;
    if (count != expected) {
        fprintf(stderr, "%llu documents, expected %llu\n", (unsigned long long)count,
                (unsigned long long)expected);
        failures++;
    }
    mi_client_free(client);
    printf("capi_fork: %d children, %llu documents, %d distinct lsids (parent %d), %d failures\n",
           CHILDREN, (unsigned long long)count, total, parent_lsids, failures);
    return failures == 0 ? 0 : 1;
}
