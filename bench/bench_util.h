/* bench_util.h: what the benchmarks share: a monotonic clock, the pause that lets OpenBLAS's
 * workers sleep between timings, the median, and a fixed-seed xorshift generator. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every timed call starts from the same state: after a call, OpenBLAS's worker threads spin for
 * a while (OPENBLAS_THREAD_TIMEOUT) and would compete with whatever runs next; 300 ms lets them
 * go to sleep. */
static inline void settle(void)
{
    struct timespec t = {0, 300000000};
    nanosleep(&t, NULL);
}

static inline int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t rng = 88172645463325252ull;
static inline uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

#endif
