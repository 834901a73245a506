/*
 * graph.c -- the peak of a joint forward + backward graph for a set of
 * recomputed nodes (remat.h, "a joint graph's peak"; issue 26's liveness
 * simulation, the part of its solver that is built).
 *
 * The schedule simulated: every forward node in order; then every backward
 * node in order, each preceded by the re-run of the recomputed forward
 * nodes it reads that have not been re-run yet (depth first, inputs before
 * users), the way the partitioner places recomputation just before its
 * first use in the backward.  A tensor is allocated when its node runs and
 * freed after its last reader in that schedule; a forward node that is not
 * recomputed and is read by the backward (or by a re-run) is therefore
 * saved until its last backward reader.  The peak counts the output of the
 * node running together with everything live.
 */
#include <stdint.h>
#include <stdlib.h>
#include "../core/core.h"
#include "planner.h"

/* Emit node k's re-run into sched after the re-runs of its recomputed inputs. */
static void emit_rerun(const remat_graph_node *nodes, size_t n, const uint8_t *rec, uint8_t *done, uint32_t *sched,
                       size_t *len, uint32_t k)
{
    if (done[k]) return;
    done[k] = 1;
    for (uint32_t j = 0; j < nodes[k].n_inputs; j++) {
        uint32_t in = nodes[k].inputs[j];
        if (!nodes[in].backward && rec[in]) emit_rerun(nodes, n, rec, done, sched, len, in);
    }
    sched[(*len)++] = (uint32_t)(n + k);
}

remat_status remat_graph_peak(const remat_graph_node *nodes, size_t n, const uint8_t *recompute, uint64_t *peak,
                              double *recompute_flops)
{
    remat_status st = REMAT_OK;
    uint8_t *rec = NULL, *done = NULL;
    uint32_t *sched = NULL;
    size_t *last = NULL;
    uint64_t *free_at = NULL;
    if (!nodes || !n || !peak) return remat_fail(REMAT_ERR_INVALID, "remat_graph_peak: nodes, n > 0 and peak are required");
    if (n > UINT32_MAX / 2) return remat_fail(REMAT_ERR_RANGE, "remat_graph_peak: %zu nodes are too many", n);
    *peak = 0;
    if (recompute_flops) *recompute_flops = 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].n_inputs && !nodes[i].inputs)
            return remat_fail(REMAT_ERR_INVALID, "remat_graph_peak: node %zu has %u inputs and no list", i,
                              nodes[i].n_inputs);
        for (uint32_t j = 0; j < nodes[i].n_inputs; j++) {
            uint32_t in = nodes[i].inputs[j];
            if (in >= i)
                return remat_fail(REMAT_ERR_INVALID, "remat_graph_peak: node %zu reads node %u (not an earlier node)", i,
                                  in);
            if (!nodes[i].backward && nodes[in].backward)
                return remat_fail(REMAT_ERR_INVALID, "remat_graph_peak: forward node %zu reads backward node %u", i, in);
        }
        if (i && nodes[i - 1].backward && !nodes[i].backward)
            return remat_fail(REMAT_ERR_INVALID, "remat_graph_peak: forward node %zu follows a backward node", i);
        if (recompute && recompute[i] && (nodes[i].backward || !nodes[i].candidate))
            return remat_fail(REMAT_ERR_INVALID, "remat_graph_peak: node %zu is recomputed but is not a forward candidate",
                              i);
    }
    rec = remat_calloc(n, 1);
    done = remat_calloc(n, 1);
    sched = remat_malloc(2 * n * sizeof *sched);
    last = remat_malloc(2 * n * sizeof *last);
    free_at = remat_calloc(2 * n, sizeof *free_at);
    if (!rec || !done || !sched || !last || !free_at) {
        st = remat_fail(REMAT_ERR_NOMEM, "remat_graph_peak: out of memory for %zu nodes", n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) rec[i] = recompute ? recompute[i] : 0;
    /* The schedule: instance k < n is node k's first run, n + k its re-run. */
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (nodes[i].backward)
            for (uint32_t j = 0; j < nodes[i].n_inputs; j++) {
                uint32_t in = nodes[i].inputs[j];
                if (!nodes[in].backward && rec[in]) emit_rerun(nodes, n, rec, done, sched, &len, in);
            }
        sched[len++] = (uint32_t)i;
    }
    /* Each instance's last reader (its own step when nothing reads it). */
    for (size_t s = 0; s < len; s++) last[sched[s]] = s;
    for (size_t s = 0; s < len; s++) {
        uint32_t k = sched[s] % (uint32_t)n;
        int in_backward = sched[s] >= n || nodes[k].backward;
        for (uint32_t j = 0; j < nodes[k].n_inputs; j++) {
            uint32_t in = nodes[k].inputs[j];
            uint32_t inst = (in_backward && !nodes[in].backward && rec[in]) ? (uint32_t)(n + in) : in;
            if (last[inst] < s) last[inst] = s;
        }
    }
    for (size_t s = 0; s < len; s++) free_at[last[sched[s]]] += nodes[sched[s] % n].bytes;
    uint64_t live = 0;
    for (size_t s = 0; s < len; s++) {
        uint32_t k = sched[s] % (uint32_t)n;
        live += nodes[k].bytes;
        if (live > *peak) *peak = live;
        live -= free_at[s];
        if (sched[s] >= n && recompute_flops) *recompute_flops += nodes[k].flops;
    }
out:
    free(rec);
    free(done);
    free(sched);
    free(last);
    free(free_at);
    return st;
}
