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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "planner.h"

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
    uint8_t *rec, *need, *done;
    uint32_t *sched, *tmp, *stack, *last;
    uint64_t *free_at;
} workspace;

static void ws_free(workspace *w)
{
    free(w->rec);
    free(w->need);
    free(w->done);
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
    w->sched = remat_malloc(2 * n * sizeof *w->sched);
    w->tmp = remat_malloc(n * sizeof *w->tmp);
    w->stack = remat_malloc(n * sizeof *w->stack);
    w->last = remat_malloc(2 * n * sizeof *w->last);
    w->free_at = remat_malloc(2 * n * sizeof *w->free_at);
    if (w->rec && w->need && w->done && w->sched && w->tmp && w->stack && w->last && w->free_at) return REMAT_OK;
    ws_free(w);
    return remat_fail(REMAT_ERR_NOMEM, "%s: out of memory for %zu nodes", fn, n);
}

/* The peak (and re-run flops, and optionally each node's state) of a set of a checked graph. */
static void price_ws(workspace *w, const remat_graph_node *nodes, const uint8_t *recompute, uint64_t *peak,
                     double *recompute_flops, uint8_t *state)
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
    uint64_t live = 0;
    for (size_t s = 0; s < len; s++) {
        uint32_t k = sched[s] >= n ? sched[s] - (uint32_t)n : sched[s];
        live += nodes[k].bytes;
        if (live > *peak) *peak = live;
        live -= free_at[s];
        if (sched[s] >= n && recompute_flops) *recompute_flops += nodes[k].flops;
    }
}

/* price_ws with a workspace of its own. */
static remat_status price(const remat_graph_node *nodes, size_t n, const uint8_t *recompute, uint64_t *peak,
                          double *recompute_flops, uint8_t *state)
{
    workspace w;
    remat_status st = ws_init(&w, n, "remat_graph_peak");
    if (st != REMAT_OK) return st;
    price_ws(&w, nodes, recompute, peak, recompute_flops, state);
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
    price_ws(w, nodes, recompute, &cur, &fl, NULL);
    least = cur;
    all = remat_calloc(n, 1);
    if (!all) return remat_fail(REMAT_ERR_NOMEM, "remat_graph_solve: out of memory for %zu nodes", n);
    for (size_t i = 0; i < n; i++) all[i] = !nodes[i].backward && nodes[i].candidate == REMAT_GRAPH_CANDIDATE;
    price_ws(w, nodes, all, &all_peak, NULL, NULL);
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
            price_ws(w, nodes, recompute, &p, NULL, NULL);
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
        price_ws(w, nodes, recompute, &p, NULL, NULL);
        if (p <= budget) cur = p;
        else recompute[drop] = 1;
    }
    /* the answer, priced once more as returned */
    price_ws(w, nodes, recompute, &cur, &fl, NULL);
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
    int mode = c <= REMAT_GRAPH_ENUMERATE ? 0 : g <= REMAT_GRAPH_ENUMERATE ? 1 : 2;
    /* Re-run flops grow with the set (a set's re-runs include a subset's), so when recomputing
     * no candidate fits, that is the answer in every mode. */
    price_ws(&w, nodes, rec, &p, &fl, NULL);
    least = p;
    if (p <= budget) {
        keep_better(rec, n, p, fl, best, &best_peak, &best_fl);
        goto done;
    }
    if (mode < 2) {
        size_t bits = mode == 0 ? c : g;
        for (uint64_t m = 0; m < ((uint64_t)1 << bits); m++) {
            for (size_t k = 0; k < c; k++) rec[cand[k]] = (uint8_t)((m >> (mode == 0 ? k : gid[k])) & 1);
            price_ws(&w, nodes, rec, &p, &fl, NULL);
            if (p < least) least = p;
            if (p <= budget) keep_better(rec, n, p, fl, best, &best_peak, &best_fl);
        }
    }
    if (mode > 0) {
        uint64_t gl = UINT64_MAX;
        st = greedy(&w, nodes, n, budget, rec, &p, &fl, &gl);
        if (st == REMAT_OK) keep_better(rec, n, p, fl, best, &best_peak, &best_fl);
        else if (st != REMAT_ERR_BUDGET) goto out;
        st = REMAT_OK;
        if (gl < least) least = gl;
    }
done:
    if (best_fl < 0) {
        st = remat_fail(REMAT_ERR_BUDGET,
                        "remat_graph_search: no recomputed set %s fits %llu bytes; the least peak found is %llu bytes",
                        mode == 0 ? "(of every subset of the candidates)" : "found", (unsigned long long)budget,
                        (unsigned long long)least);
        goto out;
    }
    for (size_t i = 0; i < n; i++) recompute[i] = (uint8_t)(best[i] || recomputed(nodes, NULL, i));
    *peak = best_peak;
    if (recompute_flops) *recompute_flops = best_fl;
    if (how) *how = mode;
out:
    ws_free(&w);
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
