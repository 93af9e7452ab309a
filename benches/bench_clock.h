/* The clocks of the C bench_find programs (benches/capi, benches/compare/
 * libmongoc, benches/compare/floor), shared so that every driver's warm
 * figures are taken and printed the same way. CPU time is the process's own,
 * from /proc/self/schedstat (nanoseconds), as benches/tools/bench_find.rs reads
 * it; getrusage gives the user/system split (sampled) and the involuntary
 * context switches. Included by relative path: no -I needed. */
#ifndef BENCH_CLOCK_H
#define BENCH_CLOCK_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static inline double cpu_ns(void) {
    FILE *f = fopen("/proc/self/schedstat", "r");
    unsigned long long ns = 0;
    if (!f || fscanf(f, "%llu", &ns) != 1) {
        fprintf(stderr, "bench_find: cannot read /proc/self/schedstat\n");
        exit(1);
    }
    fclose(f);
    return (double)ns;
}

static inline double wall_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Every clock at one moment. */
typedef struct warm_mark {
    double cpu_ns, user_us, sys_us, wall_s;
    long preempted; /* times the scheduler took the CPU while this process could run */
} warm_mark;

static inline warm_mark warm_mark_now(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    warm_mark mark = {
        .cpu_ns = cpu_ns(),
        .user_us = usage.ru_utime.tv_sec * 1e6 + usage.ru_utime.tv_usec,
        .sys_us = usage.ru_stime.tv_sec * 1e6 + usage.ru_stime.tv_usec,
        .wall_s = wall_s(),
        .preempted = usage.ru_nivcsw,
    };
    return mark;
}

/* The WARM line of the bench_find protocol for n operations since start. */
static inline void print_warm(long n, warm_mark start) {
    warm_mark end = warm_mark_now();
    printf("WARM ops_per_s=%.0f cpu_us_per_op=%.2f user_us_per_op=%.2f sys_us_per_op=%.2f "
           "preempted_per_op=%.2f\n",
           n / (end.wall_s - start.wall_s), (end.cpu_ns - start.cpu_ns) / 1000.0 / n,
           (end.user_us - start.user_us) / n, (end.sys_us - start.sys_us) / n,
           (double)(end.preempted - start.preempted) / n);
}

#endif /* BENCH_CLOCK_H */
