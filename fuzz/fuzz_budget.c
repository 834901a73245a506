/*
 * fuzz_budget.c -- memory budget strings ("2GiB", "512MB", "1.5GB"; cli_bytes
 * in src/cli/args.c).  An accepted string gives at most 9e18 bytes, and the
 * plain number it gives, written back with the unit "B", parses to itself.
 */
#include <stdio.h>
#include <string.h>
#include "fuzz.h"
#include "cli/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256) return 0;
    char s[257];
    memcpy(s, data, size);
    s[size] = 0;
    uint64_t v = 0, w = 0;
    if (!cli_bytes("--budget", s, &v)) return 0;
    FUZZ_CHECK(v <= 9000000000000000000ULL, "'%s' gives %llu", s, (unsigned long long)v);
    char t[32];
    snprintf(t, sizeof t, "%lluB", (unsigned long long)v);
    FUZZ_CHECK(cli_bytes("--budget", t, &w) && w == v, "'%s' -> %llu does not round trip", s, (unsigned long long)v);
    return 0;
}
