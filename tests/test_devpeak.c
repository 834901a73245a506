/*
 * test_devpeak.c -- a table's plans under a budget on device memory
 * (remat.h, "a budget on device memory"; src/planner/devpeak.c):
 *   - a row's device peak is its peak_bytes (with the checkpoints' own) plus
 *     the table's static bytes, less one block's saved tensors under a
 *     plan that re-runs no block ("none"), not under any that re-runs one
 *     (first:3 among them, though its last blocks are kept whole);
 *   - remat_table_optimal_device's plan peaks within the budget, is no
 *     slower than any named policy that does too, and, at a named policy's
 *     own peak, keeps no less room unused than that policy; a budget a byte
 *     below the least peak is refused with REMAT_ERR_BUDGET in one line;
 *   - a budget of everything plans what plan "none" is (the fastest).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "remat.h"

/* six blocks of 200 KB saved each, 16 KB boundaries, 1 MB of parameters (4 MB static with AdamW) */
static const char *TABLE =
    "{\"format\": \"remat-table\", \"version\": 1, \"name\": \"devpeak\", \"device\": \"test\", \"selective\": false,"
    " \"input\": {\"bytes\": 16384, \"kept\": true, \"saved_bytes\": 512, \"forward_ms\": 0.25, \"backward_ms\": 0.5},"
    " \"blocks\": [%s], \"head\": {\"saved_bytes\": 40000, \"keeps_input\": true, \"forward_ms\": 1, \"backward_ms\": 2},"
    " \"params_bytes\": 1000000, \"grads_bytes\": 1000000, \"optimizer_bytes\": 2000000, \"optimizer_ms\": 3,"
    " \"checkpoint\": {\"context_bytes\": 256, \"call_bytes\": 5056}}";
static const char *BLOCK = "{\"saved\": [{\"bytes\": 131072, \"cheap\": false}, {\"bytes\": 65536, \"cheap\": false}],"
                           " \"output_bytes\": 16384, \"forward_ms\": 1, \"backward_ms\": 2}";

int main(void)
{
    char blocks[2048] = "", *json = malloc(8192);
    for (int i = 0; i < 6; i++) {
        if (i) strcat(blocks, ", ");
        strcat(blocks, BLOCK);
    }
    snprintf(json, 8192, TABLE, blocks);
    remat_config c;
    remat_profile *p = NULL;
    remat_table_info info;
    remat_status st = remat_table_read(json, strlen(json), &c, &p);
    free(json);
    CHECK(st == REMAT_OK, "the table: %s", remat_errmsg());
    if (st) return TEST_REPORT();
    CHECK(remat_table_get_info(&c, &info) == REMAT_OK && info.static_bytes == 4000000, "static bytes %llu",
          (unsigned long long)info.static_bytes);
    CHECK(remat_table_row_device_peak(NULL) == 0, "NULL row");
    static const char *named[] = { "none", "full", "every:2", "every:3", "plan:A0.C2.A1.A1.A0.A1.A0",
                                   "first:3" };
    /* the room a re-run needs, unused when nothing is re-run */
    static const unsigned long long unused[] = { 196608, 0, 0, 0, 0, 0 };
    unsigned long long peak[6], least = ~0ULL;
    double ms[6];
    for (int k = 0; k < 6; k++) {
        remat_table_row r;
        CHECK(remat_table_evaluate(&c, p, named[k], &r) == REMAT_OK, "%s: %s", named[k], remat_errmsg());
        peak[k] = remat_table_row_device_peak(&r);
        ms[k] = r.row.step_ms_pred;
        CHECK(peak[k] == r.peak_bytes + info.static_bytes - unused[k] &&
              r.row.total_bytes == r.row.peak_bytes + info.static_bytes,
              "%s: device peak %llu, peak %llu + static %llu - unused %llu", named[k], peak[k],
              (unsigned long long)r.peak_bytes, (unsigned long long)info.static_bytes, unused[k]);
        if (peak[k] < least) least = peak[k];
        remat_table_row_clear(&r);
    }
    for (int k = 0; k < 6; k++) {
        remat_table_row r;
        st = remat_table_optimal_device(&c, p, peak[k], &r);
        CHECK(st == REMAT_OK, "budget %llu (%s's peak): %s", peak[k], named[k], remat_errmsg());
        if (st) continue;
        unsigned long long got = remat_table_row_device_peak(&r);
        CHECK(got <= peak[k], "budget %llu: %s peaks at %llu", peak[k], r.row.policy, got);
        for (int j = 0; j < 6; j++)
            if (peak[j] <= peak[k])
                CHECK(r.row.step_ms_pred <= ms[j] * (1 + 1e-9), "budget %llu: %s (%.4f ms) slower than %s (%.4f ms)",
                      peak[k], r.row.policy, r.row.step_ms_pred, named[j], ms[j]);
        remat_table_row_clear(&r);
    }
    remat_table_row r;
    st = remat_table_optimal_device(&c, p, UINT64_MAX / 4, &r);
    CHECK(st == REMAT_OK && r.row.step_ms_pred <= ms[0] * (1 + 1e-9) && remat_table_row_device_peak(&r) == peak[0],
          "no budget to speak of: %s", st ? remat_errmsg() : r.row.policy);
    if (!st) remat_table_row_clear(&r);
    /* below the least peak: refused, in one line (the least is the smallest peak's plan, which may
     * peak below every named policy) */
    st = remat_table_optimal_device(&c, p, info.static_bytes, &r);
    CHECK(st == REMAT_ERR_BUDGET && strstr(remat_errmsg(), "below the minimum") && !strchr(remat_errmsg(), '\n'),
          "the static bytes alone: %d %s", st, remat_errmsg());
    CHECK(remat_table_optimal_device(&c, p, least, NULL) == REMAT_ERR_INVALID, "NULL out");
    remat_profile_free(p);
    remat_table_unload(&c);
    return TEST_REPORT();
}
