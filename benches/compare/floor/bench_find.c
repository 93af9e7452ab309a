/* The floor under any driver's warm find_one: a client that does nothing but
 * send one pre-encoded OP_MSG `find` by _id on a blocking socket and read the
 * reply (one sendto, one recvfrom per operation; no parsing beyond the
 * length). Its CPU per operation is what the kernel's loopback path and the
 * wakeup cost a single-threaded driver, whatever its user-space code does.
 *
 * The URI may list several hosts: the floor connects to each, keeps those
 * whose reply to the find says ok: 1 (a mongos or a primary; a secondary
 * refuses a read without secondaryOk) and sends each operation to one of
 * them drawn at random, as a driver selecting among two mongoses in the
 * latency window must. Alternating has a cost of its own on a virtual
 * machine (perf puts it in waking the peer's thread, which was idle
 * longer), which a floor on one socket would hide.
 *
 * With FLOOR_TOUCH_LINES=L[:P] it also writes to L cache lines spread over P
 * pages (default L) after every reply (see the loop): a calibration of what
 * the distinct lines a driver touches after the wakeup cost.
 *
 * Speaks the warm mode of the benches/tools/bench_find.rs protocol only:
 *   bench_find warm mongodb://HOST:PORT[,HOST:PORT...]/ DB COLL N
 *     prints: WARM ops_per_s=<x> cpu_us_per_op=<y> user_us_per_op=<u> sys_us_per_op=<s>
 *     preempted_per_op=<p> (involuntary context switches)
 * (no handshake: the servers accept OP_MSG without one). Exits 1, printing
 * nothing on stdout, when no listed host serves the read.
 *
 *   gcc -O2 -Wall -o target/bench_find_floor benches/compare/floor/bench_find.c \
 *       $(pkg-config --cflags --libs libbson-1.0)
 */
#include <arpa/inet.h>
#include <bson/bson.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../bench_clock.h"

#define MAX_HOSTS 8

/* Connects to HOST[:PORT] at the start of `host_port` (up to ',' or '/'). */
static int connect_to(const char *host_port) {
    char host[256];
    int port = 27017;
    if (sscanf(host_port, "%255[^:,/]:%d", host, &port) < 1) {
        fprintf(stderr, "bench_find: expected mongodb://HOST:PORT[,HOST:PORT...]/\n");
        exit(2);
    }
    char port_text[16];
    snprintf(port_text, sizeof port_text, "%d", port);
    struct addrinfo hints = {0}, *addr;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port_text, &hints, &addr) != 0) exit(1);
    int fd = socket(addr->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, addr->ai_addr, addr->ai_addrlen) != 0) {
        perror("connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    freeaddrinfo(addr);
    return fd;
}

static size_t round_trip(int fd, const uint8_t *msg, size_t len, uint8_t *reply, size_t cap) {
    if (send(fd, msg, len, 0) != (ssize_t)len) exit(1);
    size_t got = 0;
    int32_t want = 4;
    while (got < (size_t)want) {
        ssize_t n = recv(fd, reply + got, cap - got, 0);
        if (n <= 0) exit(1);
        got += n;
        if (got >= 4) memcpy(&want, reply, 4);
        if (want < 16 || (size_t)want > cap) exit(1);
    }
    return got;
}

/* Whether an OP_MSG reply's body (flags, kind 0, document) says ok: 1. */
static int reply_ok(const uint8_t *reply, size_t len) {
    bson_t body;
    bson_iter_t ok;
    if (len < 21 || reply[20] != 0 || !bson_init_static(&body, reply + 21, len - 21)) return 0;
    return bson_iter_init_find(&ok, &body, "ok") && bson_iter_as_double(&ok) == 1.0;
}

int main(int argc, char **argv) {
    if (argc != 6 || strcmp(argv[1], "warm") != 0) {
        fprintf(stderr, "usage: bench_find warm URI DB COLL N\n");
        return 2;
    }
    long n = strtol(argv[5], NULL, 10);
    /* FLOOR_TOUCH_LINES=L[:P]: after each reply, write one byte in each of
     * L distinct cache lines spread over P pages, as a driver's user-space
     * code touches its code and data after the wakeup (ours: some 1,300
     * lines in some 115 pages, benches/README.md). The lines are visited in a
     * scattered order (a multiplicative permutation), as a program's are:
     * in address order the hardware prefetcher would fetch ahead and hide
     * most of the cost. The CPU it adds per operation is what that
     * footprint costs on this machine. */
    const char *touch_env = getenv("FLOOR_TOUCH_LINES");
    char *end = NULL;
    long touch = touch_env ? strtol(touch_env, &end, 10) : 0;
    long spread = touch;
    if (end && *end == ':') spread = strtol(end + 1, &end, 10);
    if (touch_env && (*end != '\0' || touch < 1 || spread < 1 || touch > 64 * spread)) {
        fprintf(stderr, "bench_find: FLOOR_TOUCH_LINES=%s: expected L or L:P, 1 <= L <= 64 x P\n",
                touch_env);
        return 2;
    }
    volatile uint8_t *pages = touch ? calloc((size_t)spread, 4096) : NULL;
    if (touch && !pages) exit(1);
    bson_t body = BSON_INITIALIZER, filter;
    BSON_APPEND_UTF8(&body, "find", argv[4]);
    BSON_APPEND_DOCUMENT_BEGIN(&body, "filter", &filter);
    BSON_APPEND_INT32(&filter, "_id", 1);
    bson_append_document_end(&body, &filter);
    BSON_APPEND_INT64(&body, "limit", 1);
    BSON_APPEND_BOOL(&body, "singleBatch", true);
    BSON_APPEND_UTF8(&body, "$db", argv[3]);
    uint8_t msg[1024];
    int32_t len = 16 + 4 + 1 + body.len, zero = 0, op = 2013, id = 1;
    memcpy(msg, &len, 4);
    memcpy(msg + 4, &id, 4);
    memcpy(msg + 8, &zero, 4);
    memcpy(msg + 12, &op, 4);
    memcpy(msg + 16, &zero, 4);
    msg[20] = 0;
    memcpy(msg + 21, bson_get_data(&body), body.len);

    if (strncmp(argv[2], "mongodb://", 10) != 0) {
        fprintf(stderr, "bench_find: expected mongodb://HOST:PORT[,HOST:PORT...]/\n");
        return 2;
    }
    static uint8_t reply[1 << 16];
    int fds[MAX_HOSTS], serving = 0;
    for (const char *host = argv[2] + 10; host && *host && *host != '/' && serving < MAX_HOSTS;) {
        int fd = connect_to(host);
        size_t got = round_trip(fd, msg, len, reply, sizeof reply);
        if (reply_ok(reply, got))
            fds[serving++] = fd;
        else
            close(fd);
        host = strchr(host, ',');
        if (host) host++;
    }
    if (serving == 0) {
        fprintf(stderr, "bench_find: no host in %s serves the find\n", argv[2]);
        return 1;
    }
    unsigned pick = 2463534242u; /* xorshift32 state: the draw costs no system call */
    warm_mark start = warm_mark_now();
    for (long i = 0; i < n; i++) {
        pick ^= pick << 13;
        pick ^= pick >> 17;
        pick ^= pick << 5;
        round_trip(fds[pick % (unsigned)serving], msg, len, reply, sizeof reply);
        for (long k = 0; k < touch; k++) {
            unsigned long line = (unsigned long)k * 2654435761ul % (unsigned long)touch;
            pages[line % spread * 4096 + line / spread * 64] += 1;
        }
    }
    print_warm(n, start);
    for (int i = 0; i < serving; i++) close(fds[i]);
    return 0;
}
