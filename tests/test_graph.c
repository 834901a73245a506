/*
 * test_graph.c -- remat_graph_peak (remat.h, "a joint graph's peak";
 * src/planner/graph.c) against peaks counted by hand, step by step, on a
 * small joint graph: x -> a -> b forward, gb = f(b), ga = f(gb, a) backward.
 *   - nothing recomputed: 35 bytes (gb's step: a 10, b 20, gb 5);
 *   - a recomputed: 31 (b's step keeps x 1 for a's re-run), 10 flops re-run;
 *   - a and b recomputed: 35 (gb's step: a' 10, b' 20, gb 5; x is freed after
 *     a's re-run, the forward peaked at 31), 30 flops re-run;
 *   - misuse refused: a recomputed non-candidate, a node reading a later one.
 */
#include <stdint.h>
#include <stdio.h>
#include "harness.h"
#include "remat.h"

int main(void)
{
    static const uint32_t in_a[] = {0}, in_b[] = {1}, in_gb[] = {2}, in_ga[] = {3, 1}, in_bad[] = {4};
    remat_graph_node g[5] = {
        {.bytes = 1, .flops = 0, .inputs = NULL, .n_inputs = 0},
        {.bytes = 10, .flops = 10, .inputs = in_a, .n_inputs = 1, .candidate = 1},
        {.bytes = 20, .flops = 20, .inputs = in_b, .n_inputs = 1, .candidate = 1},
        {.bytes = 5, .flops = 1, .inputs = in_gb, .n_inputs = 1, .backward = 1},
        {.bytes = 7, .flops = 1, .inputs = in_ga, .n_inputs = 2, .backward = 1},
    };
    uint64_t peak = 0;
    double fl = -1;
    remat_status st = remat_graph_peak(g, 5, NULL, &peak, &fl);
    CHECK(st == REMAT_OK && peak == 35 && fl == 0, "none recomputed: st %d peak %llu flops %g (want 35, 0)", (int)st,
          (unsigned long long)peak, fl);
    uint8_t rec_a[5] = {0, 1, 0, 0, 0};
    st = remat_graph_peak(g, 5, rec_a, &peak, &fl);
    CHECK(st == REMAT_OK && peak == 31 && fl == 10, "a recomputed: st %d peak %llu flops %g (want 31, 10)", (int)st,
          (unsigned long long)peak, fl);
    uint8_t rec_ab[5] = {0, 1, 1, 0, 0};
    st = remat_graph_peak(g, 5, rec_ab, &peak, &fl);
    CHECK(st == REMAT_OK && peak == 35 && fl == 30, "a, b recomputed: st %d peak %llu flops %g (want 35, 30)", (int)st,
          (unsigned long long)peak, fl);
    uint8_t rec_x[5] = {1, 0, 0, 0, 0};
    st = remat_graph_peak(g, 5, rec_x, &peak, NULL);
    CHECK(st == REMAT_ERR_INVALID, "a non-candidate recomputed: st %d (want REMAT_ERR_INVALID)", (int)st);
    g[3].inputs = in_bad;
    st = remat_graph_peak(g, 5, NULL, &peak, NULL);
    CHECK(st == REMAT_ERR_INVALID, "a node reading a later one: st %d (want REMAT_ERR_INVALID)", (int)st);
    return TEST_REPORT();
}
