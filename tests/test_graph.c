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
 * remat_graph_solve (the greedy search) against every subset of the
 * candidates of 300 random graphs with at most 10 candidates, priced by
 * remat_graph_peak independently of the search:
 *   - a returned set peaks (re-priced here) at most at the budget, with the
 *     peak and flops the solver says;
 *   - a refusal only when no subset fits, or counted as a miss; its message
 *     carries a least peak that some subset reaches and no less than the
 *     subsets' least;
 *   - remat_graph_search (exact at <= 16 candidates) returns the brute
 *     force's least flops whenever a subset fits, and otherwise refuses
 *     naming the brute force's least peak exactly; on layered graphs of
 *     more candidates (its groups mode) it fits and needs no more flops
 *     than the least-flop fitting union of whole layers;
 *   - the gap to the least-flop fitting subset is printed (not asserted:
 *     the search is greedy), and on the hand graph above a budget of 30
 *     bytes is refused naming 31 bytes, and 31 bytes gets {a}.
 * Re-runs in graph order (5.0.0), REMAT_GRAPH_ALWAYS and remat_graph_states
 * (order_always_states): a backward node needing two recomputed chains,
 * p (100) -> r and q (50) -> s (20), read as (s, r), re-runs p, r, q, s in graph
 * order as torch does (peak 111), not depth first, q, s, p, r (130); a node marked
 * REMAT_GRAPH_ALWAYS is recomputed with no flag set, and the searches
 * return it set; the states and the per-group sums of the hand graph.
 * The chain's program (REMAT_GRAPH_EXACT_LAYERS, chain_layers), on random
 * chains (a kept input per layer, candidates and always-recomputed rows
 * reading the layer's own rows, the backward in reverse): on 8 of 17-18
 * candidates, the least flops of every subset (2^18 priced by
 * remat_graph_peak) and a byte under the least subset's peak refused naming
 * it; on 60 of 6 to 20 layers, with each layer's choices cut to nothing or
 * whole (remat_graph_debug_layer_choices), the least-flop fitting union of
 * whole layers -- every union priced, up to 2^12 -- or a refusal naming the
 * least union's peak, and with every subset of each layer no more flops; up
 * to 7 layers, with the choices nothing, whole or the greedy's rows, the
 * least flops of the 3^L such sets; and a chain whose layer reads another's
 * recomputable row is no chain (the greedy answers).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "remat.h"
#include "remat_testing.h"

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

/* Subsets of the candidates of g, brute force: the least peak, and the
 * least flops among those fitting budget (*fits 0 when none does). */
static void brute(const remat_graph_node *g, size_t n, uint64_t budget, uint64_t *least, double *best_flops, int *fits)
{
    size_t cand[16], c = 0;
    for (size_t i = 0; i < n; i++)
        if (g[i].candidate) cand[c++] = i;
    *least = UINT64_MAX;
    *fits = 0;
    for (unsigned m = 0; m < (1u << c); m++) {
        uint8_t rec[32] = {0};
        for (size_t k = 0; k < c; k++) rec[cand[k]] = (m >> k) & 1;
        uint64_t p;
        double fl;
        if (remat_graph_peak(g, n, rec, &p, &fl) != REMAT_OK) continue;
        if (p < *least) *least = p;
        if (p <= budget && (!*fits || fl < *best_flops)) *best_flops = fl, *fits = 1;
    }
}

static void solve_random(void)
{
    enum { N = 20, MAXIN = 3 };
    static uint32_t in[N][MAXIN];
    remat_graph_node g[N];
    int fit_cases = 0, exact = 0, missed = 0, refused_ok = 0, searched = 0;
    double worst = 1, sum_ratio = 0;
    srand(2626);
    for (int trial = 0; trial < 300; trial++) {
        size_t n = 3 + (size_t)(rand() % (N - 2)), n_fwd = 1 + (size_t)rand() % (n - 1);
        if (n_fwd > 11) n_fwd = 11; /* node 0 (an input) + at most 10 candidates */
        for (size_t i = 0; i < n; i++) {
            g[i] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 1000), .flops = 1 + rand() % 100,
                                      .inputs = in[i], .backward = i >= n_fwd, .candidate = i > 0 && i < n_fwd};
            g[i].n_inputs = i ? 1 + (uint32_t)(rand() % MAXIN) : 0;
            for (uint32_t j = 0; j < g[i].n_inputs; j++) in[i][j] = (uint32_t)(rand() % (int)i);
        }
        uint64_t none = 0, least = 0;
        double best = 0;
        int fits = 0;
        CHECK(remat_graph_peak(g, n, NULL, &none, NULL) == REMAT_OK, "trial %d: peak refused", trial);
        /* one budget in four below the least subset peak (by up to 5%), the
         * others between it and the peak of nothing recomputed */
        brute(g, n, 0, &least, &best, &fits);
        uint64_t budget = trial % 4 == 0 ? least - 1 - (uint64_t)rand() % (least / 20 + 1)
                                         : least + (uint64_t)rand() % (none - least + 1);
        searched += none > budget;
        brute(g, n, budget, &least, &best, &fits);
        uint8_t rec[N];
        uint64_t peak = 0, again = 0;
        double fl = -1, fl_again = -1;
        int how = -1;
        remat_status sx = remat_graph_search(g, n, budget, rec, &peak, &fl, &how);
        if (sx == REMAT_OK)
            CHECK(fits && how == REMAT_GRAPH_EXACT && fl == best && peak <= budget &&
                      remat_graph_peak(g, n, rec, &again, NULL) == REMAT_OK && again == peak,
                  "trial %d: search: fits %d how %d flops %g (brute force %g) peak %llu budget %llu", trial, fits, how,
                  fl, best, (unsigned long long)peak, (unsigned long long)budget);
        else {
            const char *m = remat_errmsg(), *at = strstr(m, "least peak found is ");
            CHECK(sx == REMAT_ERR_BUDGET && !fits && at &&
                      strtoull(at + strlen("least peak found is "), NULL, 10) == least,
                  "trial %d: search refused (st %d \"%s\"), brute force fits %d, least %llu", trial, (int)sx, m, fits,
                  (unsigned long long)least);
        }
        remat_status st = remat_graph_solve(g, n, budget, rec, &peak, &fl);
        if (st == REMAT_OK) {
            CHECK(remat_graph_peak(g, n, rec, &again, &fl_again) == REMAT_OK && again <= budget && again == peak &&
                      fl_again == fl,
                  "trial %d: the set returned peaks at %llu (solver says %llu, flops %g vs %g), budget %llu", trial,
                  (unsigned long long)again, (unsigned long long)peak, fl_again, fl, (unsigned long long)budget);
            CHECK(fits && fl >= best, "trial %d: fits %d, flops %g below the brute force's least %g", trial, fits, fl,
                  best);
            fit_cases++;
            exact += fl == best;
            double r = best > 0 ? fl / best : (fl > 0 ? 2 : 1); /* flops where none were needed: 2 */
            sum_ratio += r;
            if (r > worst) worst = r;
        } else {
            const char *m = remat_errmsg(), *at = strstr(m, "least peak found is ");
            unsigned long long said = at ? strtoull(at + strlen("least peak found is "), NULL, 10) : 0;
            CHECK(st == REMAT_ERR_BUDGET && at && said >= least && said > budget,
                  "trial %d: st %d, message \"%s\": want the least peak (brute force %llu, budget %llu)", trial,
                  (int)st, m, (unsigned long long)least, (unsigned long long)budget);
            if (fits) missed++;
            else refused_ok += said == least;
        }
    }
    printf("remat_graph_solve on 300 random graphs (<= 10 candidates), %d with a budget under the peak of nothing "
           "recomputed: %d fit, %d of them at the brute force's least "
           "flops, mean flops ratio %.3f, worst %.3f; %d refused where a subset fits; %d refusals name the exact least "
           "peak\n",
           searched, fit_cases, exact, fit_cases ? sum_ratio / fit_cases : 0, worst, missed, refused_ok);
    CHECK(fit_cases > 150 && searched > 100, "%d of 300 trials fit, %d needed a search: the budgets miss the search",
          fit_cases, searched);
}

/* The groups mode on layered graphs of more than 16 candidates: 5 layers of 4
 * candidates (an input, then each layer reading the previous one's output),
 * a backward node per candidate reading it (in reverse).  Against a brute
 * force over the 2^5 unions of whole layers, remat_graph_search must say it
 * searched groups, fit the budget (re-priced) and need no more flops than
 * the least-flop fitting union. */
static void search_groups(void)
{
    enum { L = 5, C = 4, NF = 1 + L * C, N = NF + L * C };
    static uint32_t in[N][2];
    remat_graph_node g[N];
    int checked = 0, better = 0;
    srand(2627);
    for (int trial = 0; trial < 40; trial++) {
        for (size_t i = 0; i < N; i++) {
            size_t layer = i == 0 ? 0 : i < NF ? (i - 1) / C : (N - 1 - i) / C;
            g[i] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 1000), .flops = 1 + rand() % 100,
                                      .inputs = in[i], .group = (uint32_t)layer, .backward = i >= NF,
                                      .candidate = i > 0 && i < NF};
            if (i == 0) g[i].n_inputs = 0;
            else if (i < NF) g[i].n_inputs = 1, in[i][0] = (uint32_t)(rand() % (int)i);
            else g[i].n_inputs = 2, in[i][0] = (uint32_t)(N - i), in[i][1] = (uint32_t)(i - 1);
        }
        uint64_t none = 0, least = UINT64_MAX;
        CHECK(remat_graph_peak(g, N, NULL, &none, NULL) == REMAT_OK, "groups trial %d: peak refused", trial);
        uint64_t union_peak[1u << L];
        double union_flops[1u << L];
        for (unsigned m = 0; m < (1u << L); m++) {
            uint8_t rec[N] = {0};
            for (size_t i = 1; i < NF; i++) rec[i] = (m >> g[i].group) & 1;
            CHECK(remat_graph_peak(g, N, rec, &union_peak[m], &union_flops[m]) == REMAT_OK,
                  "groups trial %d: union %u refused", trial, m);
            if (union_peak[m] < least) least = union_peak[m];
        }
        if (none <= least) continue;
        uint64_t budget = least + (uint64_t)rand() % (none - least);
        double best = -1;
        for (unsigned m = 0; m < (1u << L); m++)
            if (union_peak[m] <= budget && (best < 0 || union_flops[m] < best)) best = union_flops[m];
        uint8_t rec[N];
        uint64_t peak = 0, again = 0;
        double fl = -1;
        int how = -1;
        remat_status st = remat_graph_search(g, N, budget, rec, &peak, &fl, &how);
        CHECK(st == REMAT_OK && how == REMAT_GRAPH_EXACT_GROUPS && peak <= budget && fl <= best &&
                  remat_graph_peak(g, N, rec, &again, NULL) == REMAT_OK && again == peak,
              "groups trial %d: st %d how %d peak %llu budget %llu flops %g, least union %g", trial, (int)st, how,
              (unsigned long long)peak, (unsigned long long)budget, fl, best);
        checked++;
        better += fl < best;
    }
    printf("remat_graph_search, groups mode, on %d layered graphs of 20 candidates: every answer fits and needs no "
           "more flops than the best union of layers; %d need fewer\n",
           checked, better);
    CHECK(checked >= 20, "only %d of 40 layered graphs needed a search", checked);
}

static void order_always_states(void)
{
    /* x; p from x, r from p; q from x, s from q; g reads s then r; h reads g */
    static const uint32_t in_x[] = {0}, in_r[] = {1}, in_s[] = {3}, in_g[] = {4, 2}, in_h[] = {5};
    remat_graph_node g[7] = {
        {.bytes = 10},
        {.bytes = 100, .flops = 1, .inputs = in_x, .n_inputs = 1, .candidate = REMAT_GRAPH_CANDIDATE},
        {.bytes = 1, .flops = 1, .inputs = in_r, .n_inputs = 1, .candidate = REMAT_GRAPH_CANDIDATE},
        {.bytes = 50, .flops = 1, .inputs = in_x, .n_inputs = 1, .candidate = REMAT_GRAPH_CANDIDATE},
        {.bytes = 20, .flops = 1, .inputs = in_s, .n_inputs = 1, .candidate = REMAT_GRAPH_CANDIDATE},
        {.bytes = 1, .inputs = in_g, .n_inputs = 2, .backward = 1},
        {.bytes = 1, .inputs = in_h, .n_inputs = 1, .backward = 1},
    };
    uint8_t all[7] = {0, 1, 1, 1, 1, 0, 0};
    uint64_t peak = 0;
    double fl = 0;
    /* the forward peaks at 111 (x p r); before g, in graph order: p 110, r 111 (p freed: 11), q 61 (x
     * freed: 51), s 71: 111.  Depth first from g's inputs (s, r) it would be q, s, p, r: 130 at p. */
    remat_status st = remat_graph_peak(g, 7, all, &peak, &fl);
    CHECK(st == REMAT_OK && peak == 111 && fl == 4, "graph order: st %d peak %llu flops %g (want 111, 4)", (int)st,
          (unsigned long long)peak, fl);
    /* the same set with p and q marked always recomputed, and only r, s flagged */
    g[1].candidate = g[3].candidate = REMAT_GRAPH_ALWAYS;
    uint8_t rs[7] = {0, 0, 1, 0, 1, 0, 0};
    st = remat_graph_peak(g, 7, rs, &peak, &fl);
    CHECK(st == REMAT_OK && peak == 111 && fl == 4, "always p, q: st %d peak %llu flops %g (want 111, 4)", (int)st,
          (unsigned long long)peak, fl);
    /* nothing flagged: r and s saved, so nothing is re-run; the forward's 111 */
    st = remat_graph_peak(g, 7, NULL, &peak, &fl);
    CHECK(st == REMAT_OK && fl == 0 && peak == 111, "always p, q, none flagged: st %d peak %llu flops %g (want 111, 0)",
          (int)st, (unsigned long long)peak, fl);
    uint8_t rec[7];
    int how = -1;
    st = remat_graph_search(g, 7, 1000, rec, &peak, &fl, &how);
    CHECK(st == REMAT_OK && rec[1] && rec[3] && !rec[2] && !rec[4] && how == REMAT_GRAPH_EXACT,
          "search with always p, q: st %d set %d%d%d%d how %d (want p, q set, r, s not)", (int)st, rec[1], rec[3],
          rec[2], rec[4], how);
    st = remat_graph_solve(g, 7, 1000, rec, &peak, &fl);
    CHECK(st == REMAT_OK && rec[1] && rec[3], "solve with always p, q: st %d set %d%d (want both)", (int)st, rec[1],
          rec[3]);
    g[5].candidate = REMAT_GRAPH_ALWAYS;
    st = remat_graph_peak(g, 7, NULL, &peak, NULL);
    CHECK(st == REMAT_ERR_INVALID, "a backward node always recomputed: st %d (want REMAT_ERR_INVALID)", (int)st);
    g[5].candidate = 3;
    st = remat_graph_peak(g, 7, NULL, &peak, NULL);
    CHECK(st == REMAT_ERR_INVALID, "candidate 3: st %d (want REMAT_ERR_INVALID)", (int)st);
    g[5].candidate = 0;
    /* states: p, q always; r recomputed, s not: x saved (read by p's re-run), p and r re-run, q
     * (always recomputed, but nothing in the backward needs it) neither, s saved */
    g[0].group = 7, g[1].group = g[2].group = 1, g[3].group = g[4].group = 2;
    uint8_t r_only[7] = {0, 0, 1, 0, 0, 0, 0}, state[7];
    remat_graph_group grp[3];
    size_t ng = 0;
    st = remat_graph_states(g, 7, r_only, state, grp, 3, &ng);
    CHECK(st == REMAT_OK && ng == 3 && state[0] == REMAT_GRAPH_SAVED && state[1] == REMAT_GRAPH_RERUN &&
              state[2] == REMAT_GRAPH_RERUN && state[3] == 0 && state[4] == REMAT_GRAPH_SAVED && state[5] == 0,
          "states: st %d groups %zu states %d%d%d%d%d%d (want 1 2 0 2 1 0)", (int)st, ng, state[0], state[1],
          state[2], state[3], state[4], state[5]);
    CHECK(ng == 3 && grp[0].group == 7 && grp[0].saved == 1 && grp[0].saved_bytes == 10 && grp[1].group == 1 &&
              grp[1].rerun == 2 && grp[1].rerun_flops == 2 && grp[1].saved == 0 && grp[2].group == 2 &&
              grp[2].saved == 1 && grp[2].saved_bytes == 20 && grp[2].rerun == 0,
          "groups: %u saved %u (%llu B); %u rerun %u (%g flops) saved %u; %u saved %u (%llu B) rerun %u", grp[0].group,
          grp[0].saved, (unsigned long long)grp[0].saved_bytes, grp[1].group, grp[1].rerun, grp[1].rerun_flops,
          grp[1].saved, grp[2].group, grp[2].saved, (unsigned long long)grp[2].saved_bytes, grp[2].rerun);
    st = remat_graph_states(g, 7, r_only, NULL, grp, 2, &ng);
    CHECK(st == REMAT_ERR_RANGE && ng == 3 && strchr(remat_errmsg(), '\n') == NULL,
          "states with room for 2 of 3 groups: st %d groups %zu (want REMAT_ERR_RANGE, 3)", (int)st, ng);
    CHECK(remat_abi_size("remat_graph_node") == sizeof(remat_graph_node) &&
              remat_abi_size("remat_graph_group") == sizeof(remat_graph_group),
          "remat_abi_size of the graph structs: %zu, %zu", remat_abi_size("remat_graph_node"),
          remat_abi_size("remat_graph_group"));
}

/* A random chain of L layers into g (N rows at most), returns its rows; see chain_layers. */
static size_t make_chain(remat_graph_node *g, uint32_t (*in)[3], size_t N, size_t L)
{
    size_t n = 0, first[32], end[32], bnd[33];
    g[n] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 50)}; /* the chain's input, kept */
    bnd[0] = n++;
    for (size_t l = 0; l < L; l++) {
        first[l] = n;
        size_t rows = 2 + (size_t)(rand() % 4);
        for (size_t r = 0; r < rows && n < N; r++, n++) {
            g[n] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 1000), .flops = 1 + rand() % 100,
                                      .inputs = in[n], .group = (uint32_t)l,
                                      .candidate = rand() % 4 ? REMAT_GRAPH_CANDIDATE : REMAT_GRAPH_ALWAYS};
            g[n].n_inputs = 1 + (uint32_t)(rand() % 2);
            in[n][0] = (uint32_t)bnd[l];
            if (g[n].n_inputs > 1) in[n][1] = (uint32_t)(first[l] + (size_t)rand() % (n - first[l] + (n == first[l])));
            if (in[n][1] >= n) g[n].n_inputs = 1;
        }
        end[l] = n;
        /* the layer's output, kept: the residual stream */
        g[n] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 200), .inputs = in[n], .n_inputs = 2,
                                  .group = (uint32_t)l};
        in[n][0] = (uint32_t)bnd[l], in[n][1] = (uint32_t)(end[l] - 1);
        bnd[l + 1] = n++;
    }
    size_t prev = bnd[L];                                /* the backward, last layer first */
    for (size_t l = L; l-- > 0;) {
        for (size_t r = end[l]; r-- > first[l];) {
            if (rand() % 3 == 0) continue;               /* not every row is read by the backward */
            g[n] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 300), .inputs = in[n], .n_inputs = 2,
                                      .backward = 1};
            in[n][0] = (uint32_t)r, in[n][1] = (uint32_t)prev;
            prev = n++;
        }
        g[n] = (remat_graph_node){.bytes = 1 + (uint64_t)(rand() % 300), .inputs = in[n], .n_inputs = 2,
                                  .backward = 1};        /* the layer's input's gradient: reads it */
        in[n][0] = (uint32_t)bnd[l], in[n][1] = (uint32_t)prev;
        prev = n++;
    }
    return n;
}

static void chain_layers(void)
{
    enum { N = 20 * 8 + 60 * 8 };
    static uint32_t in[N][3];
    static remat_graph_node g[N];
    static uint8_t rec[N];
    int checked = 0, fitting = 0, refused = 0, brute_checked = 0, mixed_checked = 0;
    srand(2628);
    for (int trial = 0; trial < 60; trial++) {
        size_t L = trial < 24 ? 6 + (size_t)(trial % 2) : 6 + (size_t)(trial % 15), n, c;
        do { /* more than 16 candidates, or the search tries every subset */
            n = make_chain(g, in, N, L);
            c = 0;
            for (size_t i = 0; i < n; i++) c += !g[i].backward && g[i].candidate == REMAT_GRAPH_CANDIDATE;
        } while (c <= 16);
        uint64_t none = 0, least = UINT64_MAX, peak = 0;
        double best = -1, fl = 0;
        CHECK(remat_graph_peak(g, n, NULL, &none, NULL) == REMAT_OK, "chain %d: peak refused", trial);
        int brute = L <= 12;
        uint64_t budget;
        uint64_t *up = malloc(((size_t)1 << (brute ? L : 1)) * sizeof *up);
        double *uf = malloc(((size_t)1 << (brute ? L : 1)) * sizeof *uf);
        if (brute) {
            for (size_t m = 0; m < ((size_t)1 << L); m++) {
                for (size_t i = 0; i < n; i++)
                    rec[i] = g[i].candidate == REMAT_GRAPH_CANDIDATE && !g[i].backward && ((m >> g[i].group) & 1);
                CHECK(remat_graph_peak(g, n, rec, &up[m], &uf[m]) == REMAT_OK, "chain %d: union refused", trial);
                if (up[m] < least) least = up[m];
            }
            /* one budget in five under the least union */
            budget = trial % 5 == 0 ? least - 1 : least + (uint64_t)rand() % (none - least + 1);
            for (size_t m = 0; m < ((size_t)1 << L); m++)
                if (up[m] <= budget && (best < 0 || uf[m] < best)) best = uf[m];
        } else {
            budget = none - (none - none / 2) / 2;
        }
        int how = -1;
        remat_graph_debug_layer_choices(1);
        remat_status st = remat_graph_search(g, n, budget, rec, &peak, &fl, &how);
        remat_graph_debug_layer_choices(0);
        uint64_t again = 0;
        int fit = st == REMAT_OK;
        if (st == REMAT_OK) {
            CHECK(how == REMAT_GRAPH_LAYERS && peak <= budget &&
                      remat_graph_peak(g, n, rec, &again, NULL) == REMAT_OK && again == peak,
                  "chain %d (%zu layers): how %d peak %llu (again %llu) budget %llu", trial, L, how,
                  (unsigned long long)peak, (unsigned long long)again, (unsigned long long)budget);
            if (brute) {
                CHECK(fl == best, "chain %d (%zu layers): flops %g, the least-flop fitting union %g", trial, L, fl,
                      best);
                brute_checked++;
            }
            fitting++;
        } else {
            const char *m = remat_errmsg(), *at = strstr(m, "least peak found is ");
            CHECK(st == REMAT_ERR_BUDGET && how == -1 && at && (!brute || best < 0) &&
                      (!brute || strtoull(at + strlen("least peak found is "), NULL, 10) == least),
                  "chain %d (%zu layers): refused (st %d \"%s\"), the least union %llu, fits %d", trial, L, (int)st, m,
                  (unsigned long long)least, best >= 0);
            refused++;
        }
        /* every subset of each layer (the layers are small): no more flops than the unions */
        double fl2 = 0;
        int how2 = -1;
        st = remat_graph_search(g, n, budget, rec, &peak, &fl2, &how2);
        CHECK(st == REMAT_ERR_BUDGET || (how2 == REMAT_GRAPH_EXACT_LAYERS && peak <= budget && (!fit || fl2 <= fl) &&
                                         remat_graph_peak(g, n, rec, &again, NULL) == REMAT_OK && again == peak),
              "chain %d: st %d how %d flops %g (unions %g)", trial, (int)st, how2, fl2, fl);
        /* up to 7 layers, with three choices per layer (nothing, whole, the greedy's rows): the least
         * flops of every such set */
        static uint8_t gs[N], mix[N];
        uint64_t gp = 0;
        double gf = 0;
        if (L <= 7 && remat_graph_solve(g, n, budget, gs, &gp, &gf) == REMAT_OK) {
            double mbest = -1;
            size_t combos = 1;
            for (size_t l = 0; l < L; l++) combos *= 3;
            for (size_t m = 0; m < combos; m++) {
                size_t code[8], v = m;
                for (size_t l = 0; l < L; l++) code[l] = v % 3, v /= 3;
                for (size_t i = 0; i < n; i++) {
                    int cand = !g[i].backward && g[i].candidate == REMAT_GRAPH_CANDIDATE;
                    size_t x = cand ? code[g[i].group] : 0;
                    mix[i] = (uint8_t)(x == 1 || (x == 2 && gs[i]));
                }
                uint64_t mp = 0;
                double mf = 0;
                remat_graph_peak(g, n, mix, &mp, &mf);
                if (mp <= budget && (mbest < 0 || mf < mbest)) mbest = mf;
            }
            double f3 = 0;
            remat_graph_debug_layer_choices(2);
            st = remat_graph_search(g, n, budget, rec, &peak, &f3, &how2);
            remat_graph_debug_layer_choices(0);
            CHECK(st == REMAT_OK && how2 == REMAT_GRAPH_LAYERS && f3 == mbest,
                  "chain %d (%zu layers): flops %g, the least of the %zu mixed sets %g", trial, L, f3, combos, mbest);
            mixed_checked++;
        }
        checked++;
        free(up);
        free(uf);
    }
    /* chains of 17 or 18 candidates: every subset, against the program over every subset of each layer */
    int subsets_checked = 0;
    for (int trial = 0; trial < 8; trial++) {
        size_t L = 4 + (size_t)(trial % 3), n, c;
        do {
            n = make_chain(g, in, N, L);
            c = 0;
            for (size_t i = 0; i < n; i++) c += !g[i].backward && g[i].candidate == REMAT_GRAPH_CANDIDATE;
        } while (c < 17 || c > 18);
        uint64_t none = 0, least = UINT64_MAX, p = 0, peak = 0;
        double bestf = -1, f = 0, fl = 0;
        uint32_t idx[18];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!g[i].backward && g[i].candidate == REMAT_GRAPH_CANDIDATE) idx[k++] = (uint32_t)i;
        remat_graph_peak(g, n, NULL, &none, NULL);
        memset(rec, 0, n);
        for (uint32_t m = 0; m < (1u << c); m++) { /* the least peak first */
            for (size_t j = 0; j < c; j++) rec[idx[j]] = (m >> j) & 1;
            remat_graph_peak(g, n, rec, &p, &f);
            if (p < least) least = p;
        }
        uint64_t budget = least + (none - least) / 3 * (uint64_t)(trial % 3);
        for (uint32_t m = 0; m < (1u << c); m++) {
            for (size_t j = 0; j < c; j++) rec[idx[j]] = (m >> j) & 1;
            remat_graph_peak(g, n, rec, &p, &f);
            if (p <= budget && (bestf < 0 || f < bestf)) bestf = f;
        }
        int how = -1;
        remat_status st = remat_graph_search(g, n, budget, rec, &peak, &fl, &how);
        CHECK(st == REMAT_OK && how == REMAT_GRAPH_EXACT_LAYERS && fl == bestf && peak <= budget,
              "small chain %d (%zu candidates): st %d how %d flops %g, every subset's least %g", trial, c, (int)st,
              how, fl, bestf);
        st = remat_graph_search(g, n, least - 1, rec, &peak, &fl, &how);
        const char *msg = remat_errmsg(), *at = strstr(msg, "least peak found is ");
        CHECK(st == REMAT_ERR_BUDGET && at && strtoull(at + strlen("least peak found is "), NULL, 10) == least,
              "small chain %d: a byte under the least (%llu): st %d \"%s\"", trial, (unsigned long long)least,
              (int)st, msg);
        subsets_checked++;
    }
    /* a layer reading another layer's recomputable row: no chain */
    size_t n = make_chain(g, in, N, 18);
    for (size_t i = 0; i < n; i++)
        if (!g[i].backward && g[i].group == 5 && g[i].candidate && g[i].n_inputs == 2) {
            for (size_t k = 0; k < i; k++)
                if (g[k].group == 3 && g[k].candidate && !g[k].backward) {
                    in[i][1] = (uint32_t)k;
                    break;
                }
            break;
        }
    uint64_t none = 0, peak = 0;
    double fl = 0;
    int how = -1;
    remat_graph_peak(g, n, NULL, &none, NULL);
    remat_status st = remat_graph_search(g, n, none - 1, rec, &peak, &fl, &how);
    CHECK((st == REMAT_OK && how == REMAT_GRAPH_GREEDY) || st == REMAT_ERR_BUDGET,
          "a layer reading another's recomputable row: st %d how %d (want the greedy)", (int)st, how);
    printf("remat_graph_search on %d chains of 6 to 20 layers (the program alone): %d fit (%d checked against every "
           "union of whole layers), %d refused naming the least union's peak; with the greedy's rows as a third "
           "choice per layer, %d checked against every mixed set; %d chains of 17-18 candidates against every "
           "subset\n",
           checked, fitting, brute_checked, refused, mixed_checked, subsets_checked);
    CHECK(brute_checked >= 20 && refused >= 5 && mixed_checked >= 15,
          "chains: %d checked against the unions, %d refused, %d against the mixed sets", brute_checked, refused,
          mixed_checked);
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
    uint8_t rec_s[5];
    st = remat_graph_search(g, 5, 40, rec_s, &peak, &fl, NULL);
    CHECK(st == REMAT_ERR_INVALID, "search on a node reading a later one: st %d (want REMAT_ERR_INVALID)", (int)st);
    st = remat_graph_search(NULL, 5, 40, rec_s, &peak, &fl, NULL);
    CHECK(st == REMAT_ERR_INVALID && strchr(remat_errmsg(), '\n') == NULL,
          "search without nodes: st %d \"%s\" (want REMAT_ERR_INVALID, one line)", (int)st, remat_errmsg());
    g[3].inputs = in_gb;
    uint8_t rec[5];
    st = remat_graph_solve(g, 5, 30, rec, &peak, &fl);
    CHECK(st == REMAT_ERR_BUDGET && strstr(remat_errmsg(), "least peak found is 31 bytes"),
          "budget 30: st %d \"%s\" (want REMAT_ERR_BUDGET naming 31 bytes)", (int)st, remat_errmsg());
    st = remat_graph_solve(g, 5, 31, rec, &peak, &fl);
    CHECK(st == REMAT_OK && peak == 31 && fl == 10 && !rec[0] && rec[1] && !rec[2],
          "budget 31: st %d peak %llu flops %g set %d%d%d (want {a}, 31, 10)", (int)st, (unsigned long long)peak, fl,
          rec[0], rec[1], rec[2]);
    st = remat_graph_solve(g, 5, 35, rec, &peak, &fl);
    CHECK(st == REMAT_OK && peak == 35 && fl == 0, "budget 35: st %d peak %llu flops %g (want nothing, 35, 0)",
          (int)st, (unsigned long long)peak, fl);
    random_graphs();
    order_always_states();
    chain_layers();
    search_groups();
    solve_random();
    return TEST_REPORT();
}
