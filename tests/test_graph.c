/*
 * test_graph.c -- remat_graph_peak (remat.h, "a joint graph's peak";
 * src/planner/graph.c) against peaks counted by hand, step by step, on a
 * small joint graph: x -> a -> b forward, gb = f(b), ga = f(gb, a) backward.
 *   - nothing recomputed: 35 bytes (gb's step: a 10, b 20, gb 5);
 *   - a recomputed: 31 (b's step keeps x 1 for a's re-run), 10 flops re-run;
 *   - a and b recomputed: 35 (gb's step: a' 10, b' 20, gb 5; x is freed after
 *     a's re-run, the forward peaked at 31), 30 flops re-run;
 *   - misuse refused: a recomputed non-candidate, a node reading a later one;
 *   - on 200 random graphs with nothing recomputed, the peak equals a count
 *     written another way: at each step, the bytes of every node already run
 *     that is the running one or has a reader at or after it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "harness.h"
#include "remat.h"

/* The peak of nodes run in order, each live from its step to its last reader's. */
static uint64_t count_peak(const remat_graph_node *g, size_t n)
{
    uint64_t peak = 0;
    for (size_t s = 0; s < n; s++) {
        uint64_t live = 0;
        for (size_t i = 0; i <= s; i++) {
            int read_later = i == s;
            for (size_t r = s; r < n && !read_later; r++)
                for (uint32_t j = 0; j < g[r].n_inputs; j++) read_later |= g[r].inputs[j] == i;
            if (read_later) live += g[i].bytes;
        }
        if (live > peak) peak = live;
    }
    return peak;
}

static void random_graphs(void)
{
    enum { N = 24, MAXIN = 3 };
    static uint32_t in[N][MAXIN];
    remat_graph_node g[N];
    srand(26);
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 2 + (size_t)(rand() % (N - 1)), n_fwd = 1 + (size_t)rand() % (n - 1);
        for (size_t i = 0; i < n; i++) {
            g[i] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 1000), .flops = 1, .inputs = in[i],
                                      .backward = i >= n_fwd, .candidate = i < n_fwd};
            g[i].n_inputs = i ? (uint32_t)(rand() % (MAXIN + 1)) : 0;
            for (uint32_t j = 0; j < g[i].n_inputs; j++) in[i][j] = (uint32_t)(rand() % (int)i);
        }
        uint64_t peak = 0, want = count_peak(g, n);
        remat_status st = remat_graph_peak(g, n, NULL, &peak, NULL);
        CHECK(st == REMAT_OK && peak == want, "random graph %d (%zu nodes): st %d peak %llu, counted %llu", trial, n,
              (int)st, (unsigned long long)peak, (unsigned long long)want);
    }
}

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
    random_graphs();
    return TEST_REPORT();
}
