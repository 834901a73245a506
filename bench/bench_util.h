/*
 * bench_util.h -- what the benchmark programs share: clocks (and, through
 * remat.h, remat_median), and their --gemm / --dtype style list flags.
 * Header-only: every .c file in bench/ is a program of its own.
 */
#ifndef REMAT_BENCH_UTIL_H
#define REMAT_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>
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

/* A comma list of names (names[0..nn), e.g. "fp32,bf16") into their values
 * (out[0..max)): the count, or -1 on an unknown name or more than max. */
static inline int bench_parse_list(const char *arg, const char *const *names, const int *values, int nn, int max,
                                   int *out)
{
    int n = 0;
    for (const char *p = arg; *p;) {
        size_t len = strcspn(p, ",");
        int k = 0;
        while (k < nn && !(strlen(names[k]) == len && !strncmp(p, names[k], len))) k++;
        if (k == nn || n == max) return -1;
        out[n++] = values[k];
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

static inline const char *bench_dtype_name(int dtype) { return dtype == REMAT_DTYPE_BF16 ? "bf16" : "fp32"; }

#endif
