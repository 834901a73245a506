/*
 * graph.c -- the peak of a joint forward + backward graph for a set of
 * recomputed nodes, and searches for a set that fits a budget (remat.h,
 * "a joint graph's peak"; issue 26's liveness simulation and search, in C).
 *
 * The schedule simulated: every forward node in order; then every backward
 * node in order, each preceded by the re-runs of the recomputed forward
 * nodes it needs that have not been re-run yet (the recomputed nodes it
 * reads, theirs, and so on), in graph order -- the order torch's
 * partitioner gives them: reordering_to_mimic_autograd_engine collects
 * the nodes a backward node needs and inserts them sorted by their place
 * in the graph (torch 2.13, torch/_functorch/partitioners.py:1605-1621).
 * A tensor is allocated when its node runs and freed after its last reader
 * in that schedule; a forward node that is not recomputed and is read by
 * the backward (or by a re-run) is therefore saved until its last backward
 * reader.  The peak counts the output of the node running together with
 * everything live.  A node whose candidate is REMAT_GRAPH_ALWAYS is
 * recomputed in every set.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "planner.h"
#include "remat_testing.h"

/* Is node i recomputed under the caller's flags (NULL: none) and its kind? */
static int recomputed(const remat_graph_node *nodes, const uint8_t *recompute, size_t i)
{
    return !nodes[i].backward && (nodes[i].candidate == REMAT_GRAPH_ALWAYS || (recompute && recompute[i]));
}

/* Mark in need[] node k and the recomputed forward nodes it reads, transitively,
 * that are not re-run yet (done[]); stack has room for n entries. */
static size_t collect_reruns(const remat_graph_node *nodes, const uint8_t *rec, const uint8_t *done, uint8_t *need,
                             uint32_t *stack, uint32_t *out, size_t n_out, uint32_t k)
{
    size_t top = 0;
    if (done[k] || need[k]) return n_out;
    need[k] = 1;
    stack[top++] = k;
    while (top) {
        uint32_t v = stack[--top];
        out[n_out++] = v;
        for (uint32_t j = 0; j < nodes[v].n_inputs; j++) {
            uint32_t in = nodes[v].inputs[j];
            if (!nodes[in].backward && rec[in] && !done[in] && !need[in]) {
                need[in] = 1;
                stack[top++] = in;
            }
        }
    }
    return n_out;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The schedule of a set (instance k < n: node k's run; n + k: its re-run)
 * into sched (2n entries), its length returned; rec[i] = 1 for each
 * recomputed node; need, done: n bytes of scratch, zeroed; tmp, stack: n
 * entries of scratch. */
static size_t schedule(const remat_graph_node *nodes, size_t n, const uint8_t *rec, uint8_t *need, uint8_t *done,
                       uint32_t *tmp, uint32_t *stack, uint32_t *sched)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].backward) {
            size_t m = 0;
            for (uint32_t j = 0; j < nodes[i].n_inputs; j++) {
                uint32_t in = nodes[i].inputs[j];
                if (!nodes[in].backward && rec[in]) m = collect_reruns(nodes, rec, done, need, stack, tmp, m, in);
            }
            qsort(tmp, m, sizeof *tmp, cmp_u32); /* graph order */
            for (size_t q = 0; q < m; q++) {
                done[tmp[q]] = 1;
                sched[len++] = (uint32_t)(n + tmp[q]);
            }
        }
        sched[len++] = (uint32_t)i;
    }
    return len;
}

/* Validate a graph and a set (remat_graph_peak's refusals), fn naming the caller. */
static remat_status check_graph(const char *fn, const remat_graph_node *nodes, size_t n, const uint8_t *recompute)
{
    if (n > UINT32_MAX / 2) return remat_fail(REMAT_ERR_RANGE, "%s: %zu nodes are too many", fn, n);
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].n_inputs && !nodes[i].inputs)
            return remat_fail(REMAT_ERR_INVALID, "%s: node %zu has %u inputs and no list", fn, i, nodes[i].n_inputs);
        if (nodes[i].candidate > REMAT_GRAPH_ALWAYS)
            return remat_fail(REMAT_ERR_INVALID, "%s: node %zu has candidate %u (0, 1 or 2)", fn, i,
                              (unsigned)nodes[i].candidate);
        for (uint32_t j = 0; j < nodes[i].n_inputs; j++) {
            uint32_t in = nodes[i].inputs[j];
            if (in >= i)
                return remat_fail(REMAT_ERR_INVALID, "%s: node %zu reads node %u (not an earlier node)", fn, i, in);
            if (!nodes[i].backward && nodes[in].backward)
                return remat_fail(REMAT_ERR_INVALID, "%s: forward node %zu reads backward node %u", fn, i, in);
        }
        if (i && nodes[i - 1].backward && !nodes[i].backward)
            return remat_fail(REMAT_ERR_INVALID, "%s: forward node %zu follows a backward node", fn, i);
        if (nodes[i].backward && nodes[i].candidate == REMAT_GRAPH_ALWAYS)
            return remat_fail(REMAT_ERR_INVALID, "%s: backward node %zu is marked always recomputed", fn, i);
        if (recompute && recompute[i] && (nodes[i].backward || !nodes[i].candidate))
            return remat_fail(REMAT_ERR_INVALID, "%s: node %zu is recomputed but is not a forward candidate", fn, i);
    }
    return REMAT_OK;
}

/* Scratch for pricing sets of one graph of n nodes (allocated once per search). */
typedef struct workspace {
    size_t n;
    uint8_t *rec, *need, *done, *state;
    uint32_t *sched, *tmp, *stack, *last;
    uint64_t *free_at;
} workspace;

static void ws_free(workspace *w)
{
    free(w->rec);
    free(w->need);
    free(w->done);
    free(w->state);
    free(w->sched);
    free(w->tmp);
    free(w->stack);
    free(w->last);
    free(w->free_at);
    *w = (workspace){0};
}

static remat_status ws_init(workspace *w, size_t n, const char *fn)
{
    *w = (workspace){.n = n};
    w->rec = remat_malloc(n);
    w->need = remat_malloc(n);
    w->done = remat_malloc(n);
    w->state = remat_malloc(n);
    w->sched = remat_malloc(2 * n * sizeof *w->sched);
    w->tmp = remat_malloc(n * sizeof *w->tmp);
    w->stack = remat_malloc(n * sizeof *w->stack);
    w->last = remat_malloc(2 * n * sizeof *w->last);
    w->free_at = remat_malloc(2 * n * sizeof *w->free_at);
    if (w->rec && w->need && w->done && w->state && w->sched && w->tmp && w->stack && w->last && w->free_at) return REMAT_OK;
    ws_free(w);
    return remat_fail(REMAT_ERR_NOMEM, "%s: out of memory for %zu nodes", fn, n);
}

/* A chain of layers (remat_graph_search's REMAT_GRAPH_EXACT_LAYERS; chain_of): G groups of the
 * forward rows that may be recomputed (option rows), in forward order; per row its dense group
 * (gid, UINT32_MAX for the rest) and the phase of its step (phase: forward rows, backward rows; a
 * re-run's phase is its group's).  price_ws fills pmax (the most live bytes at a step of each
 * phase), gsaved (each group's saved bytes) and gflops (each group's re-run flops). */
typedef struct chain {
    size_t G;
    uint32_t *gid, *phase;
    uint64_t *pmax, *gsaved;
    double *gflops;
    uint8_t *has_cand;  /* per group: it has a REMAT_GRAPH_CANDIDATE row */
    uint8_t *has_phase; /* per group: a backward row reads its option rows */
} chain;

/* The peak (and re-run flops, and optionally each node's state, and a chain's sums) of a set of a
 * checked graph. */
static void price_ws(workspace *w, const remat_graph_node *nodes, const uint8_t *recompute, uint64_t *peak,
                     double *recompute_flops, uint8_t *state, const chain *ch)
{
    size_t n = w->n;
    uint8_t *rec = w->rec;
    uint32_t *sched = w->sched, *last = w->last;
    uint64_t *free_at = w->free_at;
    memset(w->need, 0, n);
    memset(w->done, 0, n);
    *peak = 0;
    if (recompute_flops) *recompute_flops = 0;
    for (size_t i = 0; i < n; i++) rec[i] = (uint8_t)recomputed(nodes, recompute, i);
    size_t len = schedule(nodes, n, rec, w->need, w->done, w->tmp, w->stack, sched);
    /* Each instance's last reader (its own step when nothing reads it). */
    for (size_t s = 0; s < len; s++) last[sched[s]] = (uint32_t)s, free_at[s] = 0;
    if (ch && !state) state = w->state;
    if (state)
        for (size_t i = 0; i < n; i++) state[i] = 0;
    for (size_t s = 0; s < len; s++) {
        uint32_t k = sched[s] >= n ? sched[s] - (uint32_t)n : sched[s];
        int in_backward = sched[s] >= n || nodes[k].backward;
        for (uint32_t j = 0; j < nodes[k].n_inputs; j++) {
            uint32_t in = nodes[k].inputs[j];
            uint32_t inst = (in_backward && !nodes[in].backward && rec[in]) ? (uint32_t)(n + in) : in;
            if (last[inst] < s) last[inst] = (uint32_t)s;
            /* a forward node kept for the backward: read there, and not re-run */
            if (state && in_backward && !nodes[in].backward && inst == in) state[in] = REMAT_GRAPH_SAVED;
        }
        if (state && sched[s] >= n) state[k] = REMAT_GRAPH_RERUN;
    }
    for (size_t s = 0; s < len; s++) free_at[last[sched[s]]] += nodes[sched[s] >= n ? sched[s] - n : sched[s]].bytes;
    if (ch)
        for (size_t g = 0; g < ch->G; g++) ch->pmax[g] = 0, ch->gsaved[g] = 0, ch->gflops[g] = 0;
    uint64_t live = 0;
    for (size_t s = 0; s < len; s++) {
        uint32_t k = sched[s] >= n ? sched[s] - (uint32_t)n : sched[s];
        live += nodes[k].bytes;
        if (live > *peak) *peak = live;
        if (ch) {
            uint32_t ph = sched[s] >= n ? ch->gid[k] : ch->phase[k];
            if (live > ch->pmax[ph]) ch->pmax[ph] = live;
            if (sched[s] >= n) ch->gflops[ch->gid[k]] += nodes[k].flops;
        }
        live -= free_at[s];
        if (sched[s] >= n && recompute_flops) *recompute_flops += nodes[k].flops;
    }
    if (ch)
        for (size_t i = 0; i < n; i++)
            if (state[i] == REMAT_GRAPH_SAVED && ch->gid[i] != UINT32_MAX) ch->gsaved[ch->gid[i]] += nodes[i].bytes;
}

/* price_ws with a workspace of its own. */
static remat_status price(const remat_graph_node *nodes, size_t n, const uint8_t *recompute, uint64_t *peak,
                          double *recompute_flops, uint8_t *state)
{
    workspace w;
    remat_status st = ws_init(&w, n, "remat_graph_peak");
    if (st != REMAT_OK) return st;
    price_ws(&w, nodes, recompute, peak, recompute_flops, state, NULL);
    ws_free(&w);
    return REMAT_OK;
}

remat_status remat_graph_peak(const remat_graph_node *nodes, size_t n, const uint8_t *recompute, uint64_t *peak,
                              double *recompute_flops)
{
    remat_status st;
    if (!nodes || !n || !peak) return remat_fail(REMAT_ERR_INVALID, "remat_graph_peak: nodes, n > 0 and peak are required");
    *peak = 0;
    if (recompute_flops) *recompute_flops = 0;
    if ((st = check_graph("remat_graph_peak", nodes, n, recompute)) != REMAT_OK) return st;
    return price(nodes, n, recompute, peak, recompute_flops, NULL);
}

/*
 * remat_graph_solve -- a greedy search over the candidates (remat.h).
 * Every set it considers is priced by remat_graph_peak, so the set it
 * returns has that function's peak, checked against the budget last.
 *   1. grow: while the set's peak is over the budget, add the candidate
 *      whose addition lowers the peak most per FLOP it adds (a candidate of
 *      zero FLOPs counts as one); when no addition lowers the peak, add the
 *      one that leaves it lowest (ties: the earliest), so that sets which
 *      only help together are reached; an addition that makes the set fit
 *      is taken first (the one of fewest FLOPs), and when the growth ends
 *      over the budget, the set of every candidate is taken if it fits;
 *   2. prune: once it fits, drop recomputed nodes, most FLOPs first, while
 *      the set still fits.
 * The least peak of any set priced (the empty set, every prefix of the
 * growth, and the set of every candidate) is what a refusal reports.
 */
static remat_status greedy(workspace *w, const remat_graph_node *nodes, size_t n, uint64_t budget,
                           uint8_t *recompute, uint64_t *peak, double *recompute_flops, uint64_t *least_out)
{
    remat_status st = REMAT_OK;
    uint64_t cur = 0, least = UINT64_MAX, p, all_peak = 0;
    double fl = 0;
    uint8_t *all = NULL;
    if (!nodes || !n || !recompute || !peak)
        return remat_fail(REMAT_ERR_INVALID, "remat_graph_solve: nodes, n > 0, recompute and peak are required");
    for (size_t i = 0; i < n; i++) recompute[i] = 0;
    price_ws(w, nodes, recompute, &cur, &fl, NULL, NULL);
    least = cur;
    all = remat_calloc(n, 1);
    if (!all) return remat_fail(REMAT_ERR_NOMEM, "remat_graph_solve: out of memory for %zu nodes", n);
    for (size_t i = 0; i < n; i++) all[i] = !nodes[i].backward && nodes[i].candidate == REMAT_GRAPH_CANDIDATE;
    price_ws(w, nodes, all, &all_peak, NULL, NULL, NULL);
    if (all_peak < least) least = all_peak;
    /* 1. grow */
    while (cur > budget) {
        size_t best = n, plateau = n, fit = n;
        double best_rate = 0;
        uint64_t fit_peak = 0;
        uint64_t best_peak = 0, plateau_peak = UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            if (!all[i] || recompute[i]) continue;
            recompute[i] = 1;
            price_ws(w, nodes, recompute, &p, NULL, NULL, NULL);
            recompute[i] = 0;
            if (p < least) least = p;
            if (p < cur) {
                double rate = (double)(cur - p) / (nodes[i].flops > 0 ? nodes[i].flops : 1.0);
                if (best == n || rate > best_rate) best = i, best_rate = rate, best_peak = p;
            }
            if (p < plateau_peak) plateau = i, plateau_peak = p;
            if (p <= budget && (fit == n || nodes[i].flops < nodes[fit].flops)) fit = i, fit_peak = p;
        }
        if (fit != n) best = fit, best_peak = fit_peak;
        if (best == n) best = plateau, best_peak = plateau_peak;
        if (best == n) break; /* every candidate is recomputed */
        recompute[best] = 1;
        cur = best_peak;
    }
    if (cur > budget && all_peak <= budget) { /* every candidate fits where the growth did not */
        for (size_t i = 0; i < n; i++) recompute[i] = all[i];
        cur = all_peak;
    }
    if (cur > budget) {
        st = remat_fail(REMAT_ERR_BUDGET,
                        "remat_graph_solve: no recomputed set found fits %llu bytes; the least peak found is %llu bytes",
                        (unsigned long long)budget, (unsigned long long)least);
        goto out;
    }
    /* 2. prune, most FLOPs first */
    for (;;) {
        size_t drop = n;
        for (size_t i = 0; i < n; i++)
            if (recompute[i] && all[i] != 2 && (drop == n || nodes[i].flops > nodes[drop].flops)) drop = i;
        if (drop == n) break;
        all[drop] = 2; /* tried */
        recompute[drop] = 0;
        price_ws(w, nodes, recompute, &p, NULL, NULL, NULL);
        if (p <= budget) cur = p;
        else recompute[drop] = 1;
    }
    /* the answer, priced once more as returned */
    price_ws(w, nodes, recompute, &cur, &fl, NULL, NULL);
    if (cur > budget && all_peak <= budget) { /* every candidate fits where the growth did not */
        for (size_t i = 0; i < n; i++) recompute[i] = all[i];
        cur = all_peak;
    }
    if (cur > budget) {
        st = remat_fail(REMAT_ERR_BUDGET, "remat_graph_solve: internal: the set found peaks at %llu bytes, over %llu",
                        (unsigned long long)cur, (unsigned long long)budget);
        goto out;
    }
    *peak = cur;
    if (recompute_flops) *recompute_flops = fl;
    for (size_t i = 0; i < n; i++) recompute[i] |= (uint8_t)recomputed(nodes, NULL, i); /* and the always-recomputed */
out:
    if (st != REMAT_OK)
        for (size_t i = 0; i < n; i++) recompute[i] = 0;
    if (least_out) *least_out = least;
    free(all);
    return st;
}

remat_status remat_graph_solve(const remat_graph_node *nodes, size_t n, uint64_t budget, uint8_t *recompute,
                               uint64_t *peak, double *recompute_flops)
{
    workspace w;
    remat_status st;
    if (!nodes || !n || !recompute || !peak)
        return remat_fail(REMAT_ERR_INVALID, "remat_graph_solve: nodes, n > 0, recompute and peak are required");
    if ((st = check_graph("remat_graph_solve", nodes, n, NULL)) != REMAT_OK) return st;
    if ((st = ws_init(&w, n, "remat_graph_solve")) != REMAT_OK) return st;
    st = greedy(&w, nodes, n, budget, recompute, peak, recompute_flops, NULL);
    ws_free(&w);
    return st;
}

/* rec (n flags, peak p, flops fl) into best when it is the better answer:
 * fewer flops, then the lower peak; best_fl < 0 means none yet. */
static void keep_better(const uint8_t *rec, size_t n, uint64_t p, double fl, uint8_t *best, uint64_t *best_peak,
                        double *best_fl)
{
    if (*best_fl >= 0 && !(fl < *best_fl || (fl == *best_fl && p < *best_peak))) return;
    *best_fl = fl, *best_peak = p;
    for (size_t i = 0; i < n; i++) best[i] = rec[i];
}

static void chain_free(chain *ch)
{
    free(ch->gid);
    free(ch->phase);
    free(ch->pmax);
    free(ch->gsaved);
    free(ch->gflops);
    free(ch->has_cand);
    free(ch->has_phase);
    *ch = (chain){0};
}

static int is_option(const remat_graph_node *nd) { return !nd->backward && nd->candidate != REMAT_GRAPH_KEEP; }

/*
 * chain_of -- whether a graph is a chain of layers whose peak decomposes
 * (remat.h, REMAT_GRAPH_EXACT_LAYERS), and its phases.  The option rows
 * (forward rows that may be recomputed: REMAT_GRAPH_CANDIDATE or _ALWAYS) of
 * a group g are those whose liveness a set of whole layers changes; the
 * conditions make each such row live only in g's phase or, saved, from its
 * forward to its backward phase, and everything else live regardless of
 * the set:
 *   C1  the option rows' groups come in runs, one run per group (forward
 *       order): group g's forward phase;
 *   C2  a forward row that reads an option row is of its group;
 *   C3  a backward row reads option rows of at most one group, and those
 *       groups do not increase along the backward rows: group g's backward
 *       phase runs from its first such row to the next group's (rows reading
 *       none join the phase before them);
 *   C4  a forward row that is never re-run (REMAT_GRAPH_KEEP) of more than 0
 *       bytes, read by option rows, has its last backward reader in the
 *       phase of the least group whose option rows read it, or after (so
 *       that the re-runs reading it come before that reader -- each phase's
 *       before it, the backward running the groups down -- or, in that
 *       group's phase, move its last reader within the phase only).
 * A re-run of g's rows comes before a backward row of g's phase that needs
 * it (C2, C3), and is counted in that phase.  Then at any step of phase p
 * the live bytes are p's own (a function of p's choice alone) plus the
 * saved bytes of the groups before p (each a function of its own choice),
 * plus what no choice changes: the peak of a union of whole layers is
 *   max over p of ( sum over g < p of saved_g(x_g) + local_p(x_p) ),
 * which chain_search minimizes over by a dynamic program.  Returns 1 with ch
 * filled, 0 when a condition fails, -1 when out of memory.
 */
static int chain_of(const remat_graph_node *nodes, size_t n, chain *ch)
{
    uint32_t *groups = NULL, *need = NULL, *lastk = NULL;
    int ok = 0;
    *ch = (chain){0};
    ch->gid = remat_malloc(n * sizeof *ch->gid);
    ch->phase = remat_malloc(n * sizeof *ch->phase);
    groups = remat_malloc(n * sizeof *groups);
    need = remat_calloc(n, sizeof *need);
    lastk = remat_calloc(n, sizeof *lastk);
    if (!ch->gid || !ch->phase || !groups || !need || !lastk) goto nomem;
    size_t G = 0, nf = 0;
    while (nf < n && !nodes[nf].backward) nf++;
    for (size_t i = 0; i < n; i++) {
        ch->gid[i] = UINT32_MAX;
        if (!is_option(&nodes[i])) continue;
        if (G && groups[G - 1] == nodes[i].group) {
            ch->gid[i] = (uint32_t)(G - 1);
            continue;
        }
        for (size_t k = 0; k < G; k++)
            if (groups[k] == nodes[i].group) goto out; /* C1: a group's rows in two runs */
        groups[G] = nodes[i].group;
        ch->gid[i] = (uint32_t)G++;
    }
    if (G < 2) goto out;
    ch->G = G;
    ch->pmax = remat_malloc(G * sizeof *ch->pmax);
    ch->gsaved = remat_malloc(G * sizeof *ch->gsaved);
    ch->gflops = remat_malloc(G * sizeof *ch->gflops);
    ch->has_cand = remat_calloc(G, 1);
    ch->has_phase = remat_calloc(G, 1);
    if (!ch->pmax || !ch->gsaved || !ch->gflops || !ch->has_cand || !ch->has_phase) goto nomem;
    uint32_t cur = 0;
    for (size_t i = 0; i < nf; i++) {
        if (ch->gid[i] != UINT32_MAX) cur = ch->gid[i];
        if (nodes[i].candidate == REMAT_GRAPH_CANDIDATE) ch->has_cand[cur] = 1;
        ch->phase[i] = cur;
        for (uint32_t j = 0; j < nodes[i].n_inputs; j++) {
            uint32_t in = nodes[i].inputs[j];
            if (ch->gid[in] != UINT32_MAX && nodes[in].group != nodes[i].group) goto out; /* C2 */
        }
    }
    cur = (uint32_t)(G - 1);
    for (size_t b = nf; b < n; b++) {
        uint32_t h = UINT32_MAX;
        for (uint32_t j = 0; j < nodes[b].n_inputs; j++) {
            uint32_t in = nodes[b].inputs[j];
            if (ch->gid[in] == UINT32_MAX) continue;
            if (h != UINT32_MAX && h != ch->gid[in]) goto out; /* C3: two groups */
            h = ch->gid[in];
        }
        if (h != UINT32_MAX) {
            ch->has_phase[h] = 1;
            if (h > cur) goto out; /* C3: a group after a later one */
            cur = h;
        }
        ch->phase[b] = cur;
    }
    /* C4: need[k] = 1 + the least group whose option rows read k (of the groups with a backward
     * phase: the others' rows are never re-run); lastk[k] = 1 + its last backward reader */
    for (size_t i = 0; i < nf; i++) {
        if (ch->gid[i] == UINT32_MAX || !ch->has_phase[ch->gid[i]]) continue;
        for (uint32_t j = 0; j < nodes[i].n_inputs; j++) {
            uint32_t k = nodes[i].inputs[j];
            if (ch->gid[k] != UINT32_MAX || !nodes[k].bytes) continue;
            if (!need[k] || need[k] > ch->gid[i] + 1) need[k] = ch->gid[i] + 1;
        }
    }
    for (size_t b = nf; b < n; b++)
        for (uint32_t j = 0; j < nodes[b].n_inputs; j++) lastk[nodes[b].inputs[j]] = (uint32_t)b + 1;
    for (size_t k = 0; k < nf; k++)
        if (need[k] && (!lastk[k] || ch->phase[lastk[k] - 1] > need[k] - 1)) goto out;
    ok = 1;
out:
    free(groups);
    free(need);
    free(lastk);
    if (!ok) chain_free(ch);
    return ok;
nomem:
    ok = -1;
    free(groups);
    free(need);
    free(lastk);
    chain_free(ch);
    return -1;
}

/* A state of chain_search's program: the saved bytes of the groups so far (P), the re-run
 * flops (F), the most a phase so far peaks at, and the choice that made it. */
typedef struct dp_state {
    uint64_t P, peak;
    double F;
    uint32_t parent, x;
} dp_state;

static int cmp_state(const void *a, const void *b)
{
    const dp_state *x = a, *y = b;
    if (x->P != y->P) return x->P < y->P ? -1 : 1;
    if (x->F != y->F) return x->F < y->F ? -1 : 1;
    return (x->peak > y->peak) - (x->peak < y->peak);
}

/* The cap on the program's states, over all layers (beyond it, the search falls back). */
#define REMAT_GRAPH_DP_STATES (1u << 22)

/* Up to this many REMAT_GRAPH_CANDIDATE rows, chain_search tries every subset of a layer's. */
#define REMAT_GRAPH_LAYER_ENUMERATE 14
/* remat_graph_debug_layer_choices (remat_testing.h): 0 as documented; 1 each layer nothing or whole,
 * without the greedy; 2 nothing, whole or the greedy's rows */
static int layer_choices;
void remat_graph_debug_layer_choices(int mode) { layer_choices = mode; }

/* One choice of a layer in chain_search: its rows recomputed (a mask over the layer's
 * candidates, or -1 for the greedy's rows there), and what that does: the bytes it saves, its
 * phase's own peak, its re-run flops. */
typedef struct layer_option {
    int64_t mask;
    uint64_t S, L;
    double f;
} layer_option;

static int cmp_option(const void *a, const void *b)
{
    const layer_option *x = a, *y = b;
    if (x->S != y->S) return x->S < y->S ? -1 : 1;
    if (x->L != y->L) return x->L < y->L ? -1 : 1;
    return (x->f > y->f) - (x->f < y->f);
}

/* A layer_option's mask: a subset of the layer's candidates (bits), or one of these. */
enum { MASK_GREEDY = -1, MASK_WHOLE = -2 };

/* Set the layer's candidate rows (cands, nc of them) in rec to a choice. */
static void set_option(uint8_t *rec, const uint32_t *cands, size_t nc, const uint8_t *extra, int64_t mask)
{
    for (size_t k = 0; k < nc; k++)
        rec[cands[k]] = (uint8_t)(mask == MASK_WHOLE ? 1 : mask == MASK_GREEDY ? extra[cands[k]] != 0
                                                                              : (mask >> k) & 1);
}

/* The program's tables and scratch (chain_search, run_program). */
typedef struct program {
    size_t G, cap;
    layer_option **opt; /* per layer, its choices */
    size_t *nopt;
    uint64_t *reach;    /* per layer g: the least that the bytes saved before it must leave room for */
    double *rest;       /* per layer g: the least flops of the layers from g on */
    dp_state *all, *tmp;
    size_t *start;
} program;

/*
 * run_program -- the dynamic program over the layers (chain_search), with
 * each layer's choices pr->opt.  pass 0: the least flops among the sets
 * whose every phase fits budget, states pruned when they cannot fit
 * (reach) or cannot beat bound (their flops plus the least the layers
 * after them add: rest, over bound); pass 1: the least peak, states pruned
 * when their peak or the least their later phases reach is over bound.
 * *best: the final state (SIZE_MAX when none).  REMAT_ERR_RANGE when the
 * states outgrow REMAT_GRAPH_DP_STATES.
 */
static remat_status run_program(program *pr, int pass, uint64_t budget, double bound, size_t *best)
{
    size_t G = pr->G, used = 1;
    pr->all[0] = (dp_state){.parent = UINT32_MAX};
    pr->start[0] = 0, pr->start[1] = 1;
    *best = SIZE_MAX;
    for (size_t g = 0; g < G; g++) {
        size_t m = 0, lo = pr->start[g], hi = pr->start[g + 1], K = pr->nopt[g];
        if (K * (hi - lo) > pr->cap || used + K * (hi - lo) > pr->cap) {
            size_t nc = pr->cap;
            while (K * (hi - lo) > nc || used + K * (hi - lo) > nc) nc *= 2;
            if (nc > REMAT_GRAPH_DP_STATES)
                return remat_fail(REMAT_ERR_RANGE, "remat_graph_search: over %u states", REMAT_GRAPH_DP_STATES);
            dp_state *a = realloc(pr->all, nc * sizeof *a), *t;
            if (!a) return remat_fail(REMAT_ERR_NOMEM, "remat_graph_search: out of memory for %zu states", nc);
            pr->all = a;
            if (!(t = realloc(pr->tmp, nc * sizeof *t)))
                return remat_fail(REMAT_ERR_NOMEM, "remat_graph_search: out of memory for %zu states", nc);
            pr->tmp = t, pr->cap = nc;
        }
        dp_state *all = pr->all, *tmp = pr->tmp;
        uint64_t room = g + 1 < G ? pr->reach[g + 1] : 0;
        for (size_t k = lo; k < hi; k++)
            for (size_t x = 0; x < K; x++) {
                const layer_option *o = &pr->opt[g][x];
                uint64_t ph = all[k].P + o->L, P = all[k].P + o->S;
                double F = all[k].F + o->f;
                uint64_t pk = ph > all[k].peak ? ph : all[k].peak;
                if (pass == 0 && (ph > budget || P + room > budget ||
                                  (g + 1 < G ? F + pr->rest[g + 1] : F) > bound))
                    continue;
                if (pass == 1 && ((double)pk > bound || (double)(P + room) > bound)) continue;
                tmp[m++] = (dp_state){.P = P, .F = pass ? (double)pk : F, .peak = pk, .parent = (uint32_t)k,
                                      .x = (uint32_t)x};
            }
        qsort(tmp, m, sizeof *tmp, cmp_state);
        size_t kept = 0;
        for (size_t k = 0; k < m; k++) /* by bytes, then flops (pass 1: peak): keep what lowers it */
            if (!kept || tmp[k].F < all[used + kept - 1].F) all[used + kept++] = tmp[k];
        used += kept;
        pr->start[g + 2] = used;
    }
    size_t lo = pr->start[G], hi = pr->start[G + 1];
    for (size_t k = lo; k < hi; k++)
        if (*best == SIZE_MAX || pr->all[k].F < pr->all[*best].F ||
            (pr->all[k].F == pr->all[*best].F && pr->all[k].peak < pr->all[*best].peak))
            *best = k;
    return REMAT_OK;
}

/* The program's lower bounds, for its choices: reach[g] = the most, over the layers h >= g, of
 * the least bytes the layers g .. h-1 save plus h's least own peak; rest[g] = the least flops of
 * the layers g on. */
static void program_bounds(program *pr)
{
    size_t G = pr->G;
    uint64_t acc = 0;
    for (size_t g = G; g-- > 0;) {
        uint64_t minS = UINT64_MAX, minL = UINT64_MAX;
        double minf = 0;
        for (size_t x = 0; x < pr->nopt[g]; x++) {
            const layer_option *o = &pr->opt[g][x];
            if (o->S < minS) minS = o->S;
            if (o->L < minL) minL = o->L;
            if (x == 0 || o->f < minf) minf = o->f;
        }
        /* reach[g] = max(minL_g, minS_g + reach[g + 1]) */
        acc = g + 1 < G ? minS + acc : 0;
        acc = minL > acc ? minL : acc;
        pr->reach[g] = acc;
        pr->rest[g] = minf + (g + 1 < G ? pr->rest[g + 1] : 0);
    }
}

/*
 * chain_search -- on a chain (chain_of), the least-flop set whose peak fits
 * the budget, and the least peak of any set, among the sets that take in
 * each layer any subset of its REMAT_GRAPH_CANDIDATE rows -- every one when
 * the layer has at most REMAT_GRAPH_LAYER_ENUMERATE, else nothing, the whole
 * layer or (extra given) extra's rows in it.  When every layer has at most
 * that many, the family is every set of candidates: the search is exact.
 * Each choice's saved bytes, re-run flops and phase peak are read off one
 * pricing of the whole graph (the other layers at nothing: the
 * decomposition of chain_of makes them the same under any other choice,
 * and each pricing is checked against it at every phase).  A choice with no
 * fewer saved bytes, no lower phase peak and no fewer flops than another of
 * its layer is dropped.  Then a dynamic program over the layers (run_program):
 * its state after layer p is (sum of saved bytes so far, flops), and of two
 * states the one with no more bytes and no more flops is kept (what follows
 * depends on the bytes alone); states that cannot fit, or cannot beat the
 * best set of the smaller family (nothing or whole per layer, solved
 * first), are dropped.  When the states still outgrow the cap, the family is
 * cut to nothing, whole or extra's rows per layer (*exact 0).  rec (n) gets
 * the best set (*fits 0 when none fits), *peak and *flops its peak and
 * flops, *least the least peak of the family.  Returns REMAT_OK,
 * REMAT_ERR_NOMEM, or REMAT_ERR_RANGE when a pricing contradicts the
 * decomposition (the caller falls back to another method).
 */
static remat_status chain_search(workspace *w, const remat_graph_node *nodes, size_t n, chain *ch,
                                 const uint8_t *extra, uint64_t budget, uint8_t *rec, int *fits, uint64_t *peak,
                                 double *flops, uint64_t *least, int *exact)
{
    size_t G = ch->G;
    remat_status st = REMAT_OK;
    uint64_t *m0 = remat_malloc(G * sizeof *m0), *s0 = remat_malloc(G * sizeof *s0);
    double *f0 = remat_malloc(G * sizeof *f0);
    size_t *ncand = remat_calloc(G, sizeof *ncand), *nfull = remat_calloc(G, sizeof *nfull),
           *nsmall = remat_calloc(G, sizeof *nsmall);
    uint32_t **cands = remat_calloc(G, sizeof *cands);
    layer_option **full = remat_calloc(G, sizeof *full), **small = remat_calloc(G, sizeof *small);
    program pr = {.G = G, .cap = 1024};
    pr.reach = remat_malloc(G * sizeof *pr.reach);
    pr.rest = remat_malloc(G * sizeof *pr.rest);
    pr.start = remat_malloc((G + 2) * sizeof *pr.start);
    pr.all = remat_malloc(pr.cap * sizeof *pr.all);
    pr.tmp = remat_malloc(pr.cap * sizeof *pr.tmp);
    uint64_t p = 0;
    *fits = 0, *exact = 1, *least = UINT64_MAX;
    if (!m0 || !s0 || !f0 || !ncand || !nfull || !nsmall || !cands || !full || !small || !pr.reach || !pr.rest ||
        !pr.start || !pr.all || !pr.tmp)
        goto nomem;
    for (size_t i = 0; i < n; i++)
        if (ch->gid[i] != UINT32_MAX && nodes[i].candidate == REMAT_GRAPH_CANDIDATE) ncand[ch->gid[i]]++;
    for (size_t g = 0; g < G; g++) {
        if (!(cands[g] = remat_malloc((ncand[g] ? ncand[g] : 1) * sizeof **cands))) goto nomem;
        if (!(small[g] = remat_malloc(3 * sizeof **small))) goto nomem;
        ncand[g] = 0;
    }
    for (size_t i = 0; i < n; i++)
        if (ch->gid[i] != UINT32_MAX && nodes[i].candidate == REMAT_GRAPH_CANDIDATE)
            cands[ch->gid[i]][ncand[ch->gid[i]]++] = (uint32_t)i;
    for (size_t i = 0; i < n; i++) rec[i] = 0;
    price_ws(w, nodes, rec, &p, NULL, NULL, ch);
    for (size_t g = 0; g < G; g++) m0[g] = ch->pmax[g], s0[g] = ch->gsaved[g], f0[g] = ch->gflops[g];
    /* each layer's choices, priced with the others at nothing */
    uint64_t before = 0;
    for (size_t g = 0; g < G; g++) {
        size_t nc = ncand[g], k = 0;
        int every = nc <= REMAT_GRAPH_LAYER_ENUMERATE && layer_choices == 0;
        size_t count = every ? (size_t)1 << nc : (extra ? 3 : 2);
        if (!every) *exact = 0;
        if (!(full[g] = remat_malloc(count * sizeof **full))) goto nomem;
        for (size_t c = 0; c < count; c++) {
            int64_t mask = every ? (int64_t)c : c == 0 ? 0 : c == 1 ? MASK_WHOLE : MASK_GREEDY;
            set_option(rec, cands[g], nc, extra, mask);
            uint64_t S, L;
            double fl;
            if (c == 0) {
                S = s0[g], fl = f0[g];
                if (m0[g] < before) goto broken;
                L = m0[g] - before;
            } else {
                price_ws(w, nodes, rec, &p, NULL, NULL, ch);
                if (ch->pmax[g] < before) goto broken;
                S = ch->gsaved[g], fl = ch->gflops[g], L = ch->pmax[g] - before;
                for (size_t q = 0; q < G; q++) {
                    uint64_t want = q < g ? m0[q] : q == g ? ch->pmax[q] : m0[q] - s0[g] + S;
                    if (ch->pmax[q] != want || (q != g && (ch->gsaved[q] != s0[q] || ch->gflops[q] != f0[q])))
                        goto broken;
                }
            }
            full[g][k++] = (layer_option){.mask = mask, .S = S, .L = L, .f = fl};
            /* the smaller family: nothing, the whole layer, extra's rows */
            int whole = mask == MASK_WHOLE || (every && (uint64_t)mask == ((uint64_t)1 << nc) - 1);
            if (mask == 0 || whole || mask == MASK_GREEDY)
                small[g][nsmall[g]++] = (layer_option){.mask = whole ? MASK_WHOLE : mask, .S = S, .L = L, .f = fl};
        }
        set_option(rec, cands[g], nc, extra, 0);
        /* drop the dominated choices: sorted by bytes, then peak, keep what lowers the flops of
         * every choice kept with no more of both */
        qsort(full[g], k, sizeof **full, cmp_option);
        size_t kept = 0;
        for (size_t c = 0; c < k; c++) {
            int dominated = 0;
            for (size_t d = 0; d < kept && !dominated; d++)
                dominated = full[g][d].L <= full[g][c].L && full[g][d].f <= full[g][c].f;
            if (!dominated) full[g][kept++] = full[g][c];
        }
        nfull[g] = kept;
        before += s0[g];
    }
    /* the smaller family first (an incumbent), then every choice, pruned by it */
    double bound_f = INFINITY;
    uint64_t bound_peak = UINT64_MAX;
    size_t best = SIZE_MAX;
    layer_option **fam[2] = {small, full};
    size_t *nfam[2] = {nsmall, nfull};
    int fam_fits[2] = {0, 0};
    uint64_t fam_peak[2] = {0, 0}, fam_least[2] = {UINT64_MAX, UINT64_MAX};
    double fam_f[2] = {0, 0};
    uint8_t *keep_rec = w->need; /* scratch, n bytes */
    for (int f = 0; f < 2; f++) {
        pr.opt = fam[f], pr.nopt = nfam[f];
        program_bounds(&pr);
        st = run_program(&pr, 1, budget, bound_peak == UINT64_MAX ? INFINITY : (double)bound_peak, &best);
        if (st == REMAT_ERR_RANGE && f == 1) { /* too many states: the smaller family's answer */
            *exact = 0;
            st = REMAT_OK;
            break;
        }
        if (st != REMAT_OK) goto out;
        if (best != SIZE_MAX) fam_least[f] = pr.all[best].peak, bound_peak = pr.all[best].peak;
        st = run_program(&pr, 0, budget, bound_f, &best);
        if (st == REMAT_ERR_RANGE && f == 1) {
            *exact = 0;
            st = REMAT_OK;
            break;
        }
        if (st != REMAT_OK) goto out;
        if (best != SIZE_MAX) {
            fam_fits[f] = 1, fam_peak[f] = pr.all[best].peak, fam_f[f] = pr.all[best].F, bound_f = pr.all[best].F;
            for (size_t i = 0; i < n; i++) rec[i] = 0;
            for (size_t k = best, g = G; g-- > 0; k = pr.all[k].parent)
                set_option(rec, cands[g], ncand[g], extra, pr.opt[g][pr.all[k].x].mask);
            memcpy(keep_rec, rec, n);
        }
        int same = 1; /* is the smaller family the whole family? */
        for (size_t g = 0; g < G && same; g++) same = nfull[g] <= nsmall[g];
        if (same) break;
    }
    *least = fam_least[0] < fam_least[1] ? fam_least[0] : fam_least[1];
    if (fam_fits[0] || fam_fits[1]) {
        *fits = 1;
        *peak = fam_fits[1] ? fam_peak[1] : fam_peak[0];
        memcpy(rec, keep_rec, n);
        /* the set, priced whole: the decomposition says the same */
        double fl = 0;
        price_ws(w, nodes, rec, &p, &fl, NULL, NULL);
        if (p != *peak) {
            st = remat_fail(REMAT_ERR_RANGE, "remat_graph_search: the chain's set peaks at %llu, not %llu",
                            (unsigned long long)p, (unsigned long long)*peak);
            goto out;
        }
        *flops = fl;
        (void)fam_f;
    } else
        for (size_t i = 0; i < n; i++) rec[i] = 0;
    goto out;
broken:
    st = remat_fail(REMAT_ERR_RANGE, "remat_graph_search: a layer's choice moves another's phase: no chain");
    goto out;
nomem:
    st = remat_fail(REMAT_ERR_NOMEM, "remat_graph_search: out of memory for a chain of %zu layers", G);
out:
    free(m0);
    free(s0);
    free(f0);
    for (size_t g = 0; g < G; g++) {
        if (cands) free(cands[g]);
        if (full) free(full[g]);
        if (small) free(small[g]);
    }
    free(cands);
    free(full);
    free(small);
    free(ncand);
    free(nfull);
    free(nsmall);
    free(pr.reach);
    free(pr.rest);
    free(pr.start);
    free(pr.all);
    free(pr.tmp);
    return st;
}

/*
 * remat_graph_search -- an exact search where one is tractable (remat.h):
 * every subset of the candidates when there are at most
 * REMAT_GRAPH_ENUMERATE of them; else, with at most that many groups,
 * every union of whole groups (a layer recomputed or not, as remat's
 * planner decides per layer) and the greedy search, the fewer flops
 * kept; else the greedy search alone.  Every set is priced by
 * remat_graph_peak.  Ties: fewer flops, then the lower peak, then the set
 * met first (masks in increasing order), so the answer is deterministic.
 */
#define REMAT_GRAPH_ENUMERATE 16
remat_status remat_graph_search(const remat_graph_node *nodes, size_t n, uint64_t budget, uint8_t *recompute,
                                uint64_t *peak, double *recompute_flops, int *how)
{
    remat_status st = REMAT_OK;
    if (!nodes || !n || !recompute || !peak)
        return remat_fail(REMAT_ERR_INVALID, "remat_graph_search: nodes, n > 0, recompute and peak are required");
    for (size_t i = 0; i < n; i++) recompute[i] = 0;
    uint64_t p = 0, least = UINT64_MAX, best_peak = 0;
    double fl = 0, best_fl = -1;
    uint8_t *gset = NULL; /* the greedy's set, when it fits */
    chain ch = {0};
    int is_chain = 0, small = 1;
    if ((st = check_graph("remat_graph_search", nodes, n, NULL)) != REMAT_OK) return st;
    workspace w;
    if ((st = ws_init(&w, n, "remat_graph_search")) != REMAT_OK) return st;
    uint32_t *cand = remat_malloc(n * sizeof *cand), *gid = remat_malloc(n * sizeof *gid),
             *groups = remat_malloc(n * sizeof *groups);
    uint8_t *rec = remat_calloc(n, 1), *best = remat_calloc(n, 1);
    if (!cand || !gid || !groups || !rec || !best) {
        st = remat_fail(REMAT_ERR_NOMEM, "remat_graph_search: out of memory for %zu nodes", n);
        goto out;
    }
    size_t c = 0, g = 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].backward || nodes[i].candidate != REMAT_GRAPH_CANDIDATE) continue;
        size_t k = 0;
        while (k < g && groups[k] != nodes[i].group) k++;
        if (k == g) groups[g++] = nodes[i].group;
        gid[c] = (uint32_t)k;
        cand[c++] = (uint32_t)i;
    }
    int mode = c <= REMAT_GRAPH_ENUMERATE ? REMAT_GRAPH_EXACT
               : g <= REMAT_GRAPH_ENUMERATE ? REMAT_GRAPH_EXACT_GROUPS : REMAT_GRAPH_GREEDY;
    if (mode != REMAT_GRAPH_EXACT && (is_chain = chain_of(nodes, n, &ch)) < 0) {
        st = remat_fail(REMAT_ERR_NOMEM, "remat_graph_search: out of memory for %zu nodes", n);
        goto out;
    }
    if (is_chain) { /* does every layer have few enough candidates to try all their subsets? */
        size_t *per = remat_calloc(ch.G, sizeof *per);
        if (!per) {
            st = remat_fail(REMAT_ERR_NOMEM, "remat_graph_search: out of memory for %zu nodes", n);
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            if (ch.gid[i] != UINT32_MAX && nodes[i].candidate == REMAT_GRAPH_CANDIDATE &&
                ++per[ch.gid[i]] > REMAT_GRAPH_LAYER_ENUMERATE)
                small = 0;
        free(per);
    }
    /* Re-run flops grow with the set (a set's re-runs include a subset's), so when recomputing
     * no candidate fits, that is the answer in every mode. */
    price_ws(&w, nodes, rec, &p, &fl, NULL, NULL);
    least = p;
    if (p <= budget) {
        keep_better(rec, n, p, fl, best, &best_peak, &best_fl);
        if (is_chain && small) mode = REMAT_GRAPH_EXACT_LAYERS;
        goto done;
    }
    /* the greedy: alone, or its rows a layer's choice where a layer's subsets are too many */
    int greedy_ran = 0;
greedy_again:
    if (mode != REMAT_GRAPH_EXACT && layer_choices != 1 && !greedy_ran &&
        (!is_chain || !small || layer_choices == 2)) {
        greedy_ran = 1;
        uint64_t gl = UINT64_MAX;
        st = greedy(&w, nodes, n, budget, rec, &p, &fl, &gl);
        if (st == REMAT_OK) {
            if (layer_choices != 2) keep_better(rec, n, p, fl, best, &best_peak, &best_fl);
            if ((gset = remat_malloc(n))) memcpy(gset, rec, n);
            else st = remat_fail(REMAT_ERR_NOMEM, "remat_graph_search: out of memory for %zu nodes", n);
        }
        if (st != REMAT_OK && st != REMAT_ERR_BUDGET) goto out;
        st = REMAT_OK;
        if (gl < least) least = gl;
    }
    if (is_chain) { /* a chain of layers: the program over its layers */
        int fits = 0, exact = 0;
        uint64_t cl = UINT64_MAX;
        st = chain_search(&w, nodes, n, &ch, gset, budget, rec, &fits, &p, &fl, &cl, &exact);
        if (st == REMAT_OK) {
            mode = exact ? REMAT_GRAPH_EXACT_LAYERS : REMAT_GRAPH_LAYERS;
            if (fits) keep_better(rec, n, p, fl, best, &best_peak, &best_fl);
            if (cl < least) least = cl;
        } else if (st != REMAT_ERR_RANGE)
            goto out;
        if (st != REMAT_OK && !greedy_ran) { /* a decomposition that does not hold: the other modes */
            is_chain = 0;
            st = REMAT_OK;
            goto greedy_again;
        }
        st = REMAT_OK;
    }
    if (mode == REMAT_GRAPH_EXACT || mode == REMAT_GRAPH_EXACT_GROUPS) {
        size_t bits = mode == REMAT_GRAPH_EXACT ? c : g;
        for (uint64_t m = 0; m < ((uint64_t)1 << bits); m++) {
            for (size_t k = 0; k < c; k++)
                rec[cand[k]] = (uint8_t)((m >> (mode == REMAT_GRAPH_EXACT ? k : gid[k])) & 1);
            price_ws(&w, nodes, rec, &p, &fl, NULL, NULL);
            if (p < least) least = p;
            if (p <= budget) keep_better(rec, n, p, fl, best, &best_peak, &best_fl);
        }
    }
done:
    if (best_fl < 0) {
        st = remat_fail(REMAT_ERR_BUDGET,
                        "remat_graph_search: no recomputed set %s fits %llu bytes; the least peak found is %llu bytes",
                        mode == REMAT_GRAPH_EXACT || mode == REMAT_GRAPH_EXACT_LAYERS
                            ? "(of every subset of the candidates)"
                            : "found",
                        (unsigned long long)budget,
                        (unsigned long long)least);
        goto out;
    }
    for (size_t i = 0; i < n; i++) recompute[i] = (uint8_t)(best[i] || recomputed(nodes, NULL, i));
    *peak = best_peak;
    if (recompute_flops) *recompute_flops = best_fl;
    if (how) *how = mode;
out:
    chain_free(&ch);
    ws_free(&w);
    free(gset);
    free(cand);
    free(gid);
    free(groups);
    free(rec);
    free(best);
    return st;
}

/*
 * remat_graph_states -- what a set does to each node, and per group
 * (remat.h).  The states are price()'s: a node re-run in the backward
 * (REMAT_GRAPH_RERUN), a forward node read by the backward or a re-run
 * and not re-run itself (REMAT_GRAPH_SAVED: kept from its run), 0 for the
 * rest.  The groups: each distinct group of a forward node, in the order
 * first met, with its saved nodes' bytes and its re-runs' flops.
 */
remat_status remat_graph_states(const remat_graph_node *nodes, size_t n, const uint8_t *recompute, uint8_t *state,
                                remat_graph_group *groups, size_t cap, size_t *n_groups)
{
    remat_status st;
    uint64_t peak = 0;
    uint8_t *own = NULL;
    uint32_t *ids = NULL;
    if (!nodes || !n || (!groups && cap) || !n_groups)
        return remat_fail(REMAT_ERR_INVALID, "remat_graph_states: nodes, n > 0 and n_groups are required "
                                             "(groups when cap > 0)");
    *n_groups = 0;
    if ((st = check_graph("remat_graph_states", nodes, n, recompute)) != REMAT_OK) return st;
    ids = remat_malloc(n * sizeof *ids);
    if (!state) state = own = remat_malloc(n);
    if (!ids || !state) {
        st = remat_fail(REMAT_ERR_NOMEM, "remat_graph_states: out of memory for %zu nodes", n);
        goto out;
    }
    if ((st = price(nodes, n, recompute, &peak, NULL, state)) != REMAT_OK) goto out;
    size_t g = 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].backward) continue;
        size_t k = 0;
        while (k < g && ids[k] != nodes[i].group) k++;
        if (k == g) {
            ids[g++] = nodes[i].group;
            if (k < cap) groups[k] = (remat_graph_group){.group = nodes[i].group};
        }
        if (k >= cap) continue; /* counted, not described: the caller's room is short */
        if (state[i] == REMAT_GRAPH_SAVED) groups[k].saved++, groups[k].saved_bytes += nodes[i].bytes;
        if (state[i] == REMAT_GRAPH_RERUN) groups[k].rerun++, groups[k].rerun_flops += nodes[i].flops;
    }
    *n_groups = g;
    if (g > cap)
        st = remat_fail(REMAT_ERR_RANGE, "remat_graph_states: the graph has %zu groups, room for %zu", g, cap);
out:
    free(own);
    free(ids);
    return st;
}
