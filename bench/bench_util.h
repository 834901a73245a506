/*
 * bench_util.h -- what the benchmark programs share: clocks and medians.
 * Header-only: every .c file in bench/ is a program of its own.
 */
#ifndef REMAT_BENCH_UTIL_H
#define REMAT_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* milliseconds on clock id (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...) */
static inline double bench_clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline double bench_now_ms(void) { return bench_clock_ms(CLOCK_MONOTONIC); }

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of x[0..n-1], n >= 1; sorts x in place */
static inline double bench_median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, bench_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

#endif
