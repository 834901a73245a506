/*
 * fuzz.h -- shared by the fuzz targets (fuzz/fuzz_*.c).
 *
 * Each target is one libFuzzer entry point, LLVMFuzzerTestOneInput, over one
 * parser of untrusted input.  Built two ways:
 *   make fuzz   clang -fsanitize=fuzzer,address,undefined: coverage-guided
 *               fuzzing for FUZZ_SECONDS per target (fuzz/run.sh);
 *   make test   gcc, linked with fuzz/replay.c, which feeds every file of
 *               the target's seed corpus fuzz/corpus/<name>/ to the entry
 *               point (tests/cli_fuzz_replay.sh), as SQLite and zstd replay
 *               theirs.
 * Besides "no crash, no leak, no undefined behaviour", targets check
 * properties with FUZZ_CHECK: round trips, determinism, invariants.
 */
#ifndef REMAT_FUZZ_H
#define REMAT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property failed: report it and abort, which libFuzzer records as a crash
 * and the replay driver as a failed test. */
#define FUZZ_CHECK(cond, ...) do {                                           \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__,        \
                    __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
            abort();                                                         \
        }                                                                    \
    } while (0)

#endif
