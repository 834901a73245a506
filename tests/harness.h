/*
 * harness.h -- the whole test harness (after Redis's testhelp.h).
 *
 *   CHECK(cond, fmt, ...)   record one check; print it when it fails
 *   TEST_REPORT()           print "N passed, N failed" and return the exit
 *                           code (non-zero when anything failed)
 *
 * Each test binary is one main() that runs its checks and ends with
 * `return TEST_REPORT();`.
 */
#ifndef REMAT_TEST_HARNESS_H
#define REMAT_TEST_HARNESS_H

#include <stdio.h>

static int test_passed_, test_failed_;

#define CHECK(cond, ...) do {                                              \
        if (cond) { test_passed_++; }                                      \
        else {                                                             \
            test_failed_++;                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

#define TEST_REPORT() (printf("%s: %d passed, %d failed\n", __FILE__,        \
                              test_passed_, test_failed_),                 \
                       test_failed_ ? 1 : 0)

#endif
