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
 *   - a budget of everything plans what plan "none" is (the fastest);
 *   - version 3 (measured working sets): the device peak of plan "none" when one moment's working set
 *     is made the largest -- the head's, the last block's backward, the input's backward, the optimizer's
 *     step -- is what is live then (counted from the file) plus that working set; plans for a budget
 *     fit it, and the static bytes alone are refused.
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

/* Version 3: the same six blocks with measured working sets (remat.h, "tables read from files"; devpeak.c).
 * Each moment's peak, made the step's by giving it a working set larger than anything else, is what is
 * live then plus that working set:
 *   the head's:              the kept bytes (everything the forward keeps) + head.work_bytes;
 *   the last block's backward: the kept bytes less what the head kept (its saved tensors; its input,
 *                            the last block's output, is dead, its gradient as large is live), what
 *                            the backward holds from the head's backward to the end + its work;
 *   the input's backward:    its gradient + what the ops before the chain keep + what the backward
 *                            holds to the end (grad_live_bytes beyond those two) + input.work_bytes;
 *   the optimizer's step:    optimizer_work_bytes (no activation is live then);
 * all on top of the static bytes, which count inputs_bytes. */
static void v3(void)
{
    static const char *T3 =
        "{\"format\": \"remat-table\", \"version\": 3, \"name\": \"devpeak3\", \"device\": \"test\","
        " \"input\": {\"bytes\": 16384, \"kept\": true, \"saved_bytes\": 512, \"forward_ms\": 0.25,"
        " \"backward_ms\": 0.5, \"work_bytes\": %llu, \"grad_live_bytes\": %llu},"
        " \"blocks\": [%s], \"head\": {\"saved_bytes\": 40000, \"keeps_input\": true, \"forward_ms\": 1,"
        " \"backward_ms\": 2, \"work_bytes\": %llu}, \"params_bytes\": 1000000, \"grads_bytes\": 1000000,"
        " \"optimizer_bytes\": 2000000, \"optimizer_ms\": 3, \"optimizer_work_bytes\": %llu, \"inputs_bytes\": 777,"
        " \"checkpoint\": {\"call_bytes\": 5056}}";
    static const char *B3 = "{\"saved\": [{\"bytes\": 131072}, {\"bytes\": 65536}], \"output_bytes\": 16384,"
                            " \"forward_ms\": 1, \"backward_ms\": 2, \"work_bytes\": %llu}";
    const unsigned long long BIG = 10000000ULL, small = 1000, P = 512, x = 16384, H = 40000, S = 4000000 + 777;
    /* which moment is made the largest: head, last block, input, optimizer; then none (all small) */
    for (int which = 0; which < 5; which++) {
        unsigned long long wh = which == 0 ? BIG : small, wl = which == 1 ? BIG : small, wi = which == 2 ? BIG : small,
                           wo = which == 3 ? BIG : small, live = x + P + 3000;       /* 3000 held to the end */
        char blocks[2048] = "", one[256], *json = malloc(8192);
        for (int i = 0; i < 6; i++) {
            snprintf(one, sizeof one, B3, i == 5 ? wl : small);
            if (i) strcat(blocks, ", ");
            strcat(blocks, one);
        }
        snprintf(json, 8192, T3, wi, live, blocks, wh, wo);
        remat_config c;
        remat_profile *p = NULL;
        remat_table_info info;
        remat_status st = remat_table_read(json, strlen(json), &c, &p);
        free(json);
        CHECK(st == REMAT_OK && remat_table_get_info(&c, &info) == REMAT_OK && info.static_bytes == S,
              "version 3 table (%d): %s", which, remat_errmsg());
        if (st) continue;
        remat_table_row r;
        CHECK(remat_table_evaluate(&c, p, "none", &r) == REMAT_OK, "none: %s", remat_errmsg());
        unsigned long long got = remat_table_row_device_peak(&r), kept = r.kept_bytes;
        unsigned long long want[4] = { S + kept + wh, S + kept - H + 3000 + wl, S + x + P + 3000 + wi, S + wo };
        if (which < 4)
            CHECK(got == want[which], "moment %d made largest: device peak %llu, want %llu (kept %llu)", which, got,
                  want[which], kept);
        else    /* nothing large: the head's moment, or a block's backward (what the forward keeps and more) */
            CHECK(got >= S + kept + wh && got < S + kept + 200000, "small working sets: device peak %llu, kept %llu",
                  got, kept);
        remat_table_row_clear(&r);
        /* a plan for a budget peaks within it; below the least peak, one line */
        if (which == 4) {
            static const char *named[] = { "none", "full", "every:2", "every:3" };
            for (int k = 0; k < 4; k++) {
                remat_table_row n, o;
                CHECK(remat_table_evaluate(&c, p, named[k], &n) == REMAT_OK, "%s: %s", named[k], remat_errmsg());
                unsigned long long b = remat_table_row_device_peak(&n);
                st = remat_table_optimal_device(&c, p, b, &o);
                CHECK(st == REMAT_OK && remat_table_row_device_peak(&o) <= b && o.row.step_ms_pred <= n.row.step_ms_pred *
                      (1 + 1e-9), "version 3, budget %llu (%s's peak): %s", b, named[k], st ? remat_errmsg() : o.row.policy);
                if (!st) remat_table_row_clear(&o);
                remat_table_row_clear(&n);
            }
            st = remat_table_optimal_device(&c, p, S, &r);
            CHECK(st == REMAT_ERR_BUDGET && !strchr(remat_errmsg(), '\n'), "version 3, the static bytes alone: %s",
                  remat_errmsg());
        }
        remat_profile_free(p);
        remat_table_unload(&c);
    }
}

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
    v3();
    return TEST_REPORT();
}
