/*
 * harness.h -- the whole test harness (after Redis's testhelp.h).
 *
 *   CHECK(cond, fmt, ...)   record one check; print it when it fails
 *   TEST_SKIP(fmt, ...)     record one check that could not run, and why
 *                           (prints "SKIP file:line: why")
 *   TEST_REPORT()           print "N passed, N failed, N skipped" and return
 *                           the exit code: 1 when anything failed, or when
 *                           no check ran at all (a test that checks nothing
 *                           cannot fail: it says "FAIL ...: no check ran"),
 *                           else 77 when anything was skipped, else 0
 *
 * Each test binary is one main() that runs its checks and ends with
 * `return TEST_REPORT();`.  77 is the automake convention for "skipped":
 * tests/run_tests.sh counts it as a skip, never as a pass, and as a failure
 * under CI=true when the test is marked required (see run_tests.sh).
 */
#ifndef REMAT_TEST_HARNESS_H
#define REMAT_TEST_HARNESS_H

#include <stdio.h>

#define TEST_EXIT_SKIP 77

static int test_passed_, test_failed_, test_skipped_;

#define CHECK(cond, ...) do {                                              \
        if (cond) { test_passed_++; }                                      \
        else {                                                             \
            test_failed_++;                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

#define TEST_SKIP(...) do {                                                \
        test_skipped_++;                                                   \
        printf("SKIP %s:%d: ", __FILE__, __LINE__);                        \
        printf(__VA_ARGS__);                                               \
        putchar('\n');                                                     \
    } while (0)

#define TEST_REPORT() test_report_(__FILE__)

static inline int test_report_(const char *file)
{
    printf("%s: %d passed, %d failed, %d skipped\n", file, test_passed_, test_failed_, test_skipped_);
    if (!test_passed_ && !test_failed_ && !test_skipped_) {
        fprintf(stderr, "FAIL %s: no check ran\n", file);
        return 1;
    }
    return test_failed_ ? 1 : test_skipped_ ? TEST_EXIT_SKIP : 0;
}

#endif
