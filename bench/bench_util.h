/*
 * bench_util.h -- what the benchmark programs share: clocks (and, through
 * remat.h, remat_median).
 * Header-only: every .c file in bench/ is a program of its own.
 */
#ifndef REMAT_BENCH_UTIL_H
#define REMAT_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>
#include "remat.h"

/* milliseconds on clock id (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...) */
static inline double bench_clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline double bench_now_ms(void) { return bench_clock_ms(CLOCK_MONOTONIC); }

/* Medians: remat_median (remat.h), which sorts in place. */

#endif
