/*
 * simulate.c -- schedules as objects: create, inspect, validate, and the
 * dry-run simulator.
 *
 * The simulator walks the instructions without computing anything and keeps
 * the live activation bytes with the same rule the executor's allocations
 * follow: a forward or recompute allocates its tensor; a backward allocates
 * its gradient buffers first and then frees the ones it consumed; a free
 * releases one tensor.  The peak inside an instruction is therefore the live
 * bytes before it plus everything it allocates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "schedule.h"
#include "remat_testing.h"   /* remat_schedule_from_instrs is defined here */
#include "../core/core.h"

static remat_status sched_new(const remat_config *cfg, remat_schedule **out)
{
    *out = NULL;
    remat_status st = remat_config_check(cfg);
    if (st) return st;
    remat_schedule *s = remat_calloc(1, sizeof *s);
    if (!s) return remat_fail(REMAT_ERR_NOMEM, "out of memory creating a schedule");
    s->cfg = *cfg;
    *out = s;
    return REMAT_OK;
}

remat_status remat_schedule_create(const remat_config *cfg, const char *policy, remat_schedule **out)
{
    remat_policy p;
    remat_schedule *s = NULL;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_create: out is NULL");
    *out = NULL;
    if ((st = remat_policy_parse(policy, &p))) return st;
    if ((st = sched_new(cfg, &s))) goto out;
    s->policy = remat_policy_string(&p);
    if (!s->policy) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = remat_compile(s, &p))) goto out;
    if ((st = remat_schedule_validate(s))) goto out;
    *out = s;
    s = NULL;
out:
    remat_policy_clear(&p);
    remat_schedule_free(s);
    return st;
}

remat_status remat_schedule_from_instrs(const remat_config *cfg, size_t n, const remat_instr_kind *kinds,
                                        const int *layers, const int *tensors, remat_schedule **out)
{
    remat_schedule *s = NULL;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "out is NULL");
    *out = NULL;
    if ((st = sched_new(cfg, &s))) return st;
    s->policy = remat_strdup("custom");
    if (!s->policy) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    s->fwd_end = 0;
    for (size_t i = 0; i < n; i++) {
        int t = tensors[i], k = kinds[i], l = layers[i];
        if (k < 0 || k > REMAT_I_UPDATE) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: bad kind %d", i, k); goto out; }
        if (k != REMAT_I_UPDATE) {
            if (t < 0 || t >= RT_COUNT || remat_tensor_defs[t].is_grad) {
                st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: bad tensor id %d", i, t); goto out;
            }
            if (t < RT_NBLOCK ? (l < 0 || l >= cfg->n_layer) : l != -1) {
                st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: layer %d out of range for %s", i, l,
                                remat_tensor_defs[t].name);
                goto out;
            }
        }
        if (!s->fwd_end && (t == RT_LNF_STAT || t == RT_LNF || t == RT_LOGITS)) s->fwd_end = i;
        if ((st = remat_schedule_push(s, k, l, k == REMAT_I_UPDATE ? -1 : t))) goto out;
    }
    *out = s;
    s = NULL;
out:
    remat_schedule_free(s);
    return st;
}

void remat_schedule_free(remat_schedule *s)
{
    if (!s) return;
    free(s->ins);
    free(s->policy);
    free(s);
}

const char *remat_schedule_policy(const remat_schedule *s) { return s ? s->policy : ""; }
size_t remat_schedule_length(const remat_schedule *s) { return s ? s->n : 0; }

static const char *iname(int k)
{
    static const char *n[] = { "forward", "recompute", "backward", "free", "update" };
    return n[k];
}

/* Walks the schedule.  With check set it validates; per-instruction
 * results go to live/peak/flops arrays when given. */
static remat_status walk(const remat_schedule *s, int check, remat_sim *sim,
                         uint64_t *live_after, uint64_t *peak_in, double *flops_of)
{
    const remat_config *c = &s->cfg;
    int L = c->n_layer, nslots = remat_nslots(L);
    uint8_t *live = remat_calloc((size_t)nslots, 1), *bwd = remat_calloc((size_t)nslots, 1);
    remat_status st = REMAT_OK;
    if (!live || !bwd) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory simulating"); goto out; }
    uint64_t cur = 0;
    int ckpts = 0;
    memset(sim, 0, sizeof *sim);
    for (size_t i = 0; i < s->n; i++) {
        const remat_instr *in = &s->ins[i];
        uint64_t peak_here = cur;
        double fl = 0;
        if (i == s->fwd_end) sim->stored_bytes = cur;
        if (in->kind == REMAT_I_UPDATE) {
            fl = remat_update_flops(c);
            if (check && i + 1 != s->n) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: update before the end", i); goto out; }
        } else {
            int t = in->tid;
            int sl = remat_islot(c, in->layer, t);
            const remat_tensor_def *d = &remat_tensor_defs[t];
            int layer_for_inputs = d->per_layer ? in->layer : -1;
            if (in->kind == REMAT_I_FORWARD || in->kind == REMAT_I_RECOMPUTE) {
                if (check && live[sl]) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: %s of %s (layer %d) which is already live", i, iname(in->kind), d->name, in->layer); goto out; }
                for (int k = 0; k < RT_MAXIO && d->fwd_in[k] != RT_NONE; k++) {
                    int r = d->fwd_in[k];
                    int rs = r == RT_X ? remat_slot(L, layer_for_inputs < 0 ? L : layer_for_inputs, RT_X)
                                       : remat_islot(c, layer_for_inputs, r);
                    if (check && !live[rs]) {
                        st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: %s of %s (layer %d) reads %s, which is not materialised",
                                        i, iname(in->kind), d->name, in->layer,
                                        remat_tensor_defs[remat_slot_tid(L, rs)].name);
                        goto out;
                    }
                }
                live[sl] = 1;
                cur += remat_tensor_bytes(c, t);
                peak_here = cur + remat_tensor_fwd_temp_bytes(c, t);
                fl = remat_tensor_fwd_flops(c, t);
                if (in->kind == REMAT_I_RECOMPUTE) sim->recompute_flops += fl;
                if (in->kind == REMAT_I_RECOMPUTE && t == RT_ATT) sim->recomputed_blocks++;
                if (remat_slot_is_checkpoint(L, sl)) ckpts++;
            } else if (in->kind == REMAT_I_FREE) {
                if (check && !live[sl]) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: free of %s (layer %d), which is not live", i, d->name, in->layer); goto out; }
                live[sl] = 0;
                cur -= remat_tensor_bytes(c, t);
                if (remat_slot_is_checkpoint(L, sl)) ckpts--;
            } else { /* backward */
                if (check && !d->has_bwd) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: %s has no backward of its own", i, d->name); goto out; }
                if (check && bwd[sl]) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: gradient of %s (layer %d) computed twice", i, d->name, in->layer); goto out; }
                bwd[sl] = 1;
                for (int k = 0; k < RT_MAXIO && d->bwd_in[k] != RT_NONE; k++) {
                    int r = d->bwd_in[k];
                    int rs = r == RT_X ? remat_slot(L, layer_for_inputs < 0 ? L : layer_for_inputs, RT_X)
                                       : remat_islot(c, layer_for_inputs, r);
                    if (check && !live[rs]) {
                        st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: backward of %s (layer %d) reads %s, which is not materialised",
                                        i, d->name, in->layer, remat_tensor_defs[remat_slot_tid(L, rs)].name);
                        goto out;
                    }
                }
                int need[2], nn = remat_bwd_grad_needs(t, need);
                for (int k = 0; k < nn; k++)
                    if (check && !live[remat_islot(c, -1, need[k])]) {
                        st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: backward of %s (layer %d) runs before %s exists (out of order)",
                                        i, d->name, in->layer, remat_tensor_defs[need[k]].name);
                        goto out;
                    }
                int a[2], f[2], na, nf;
                remat_bwd_effects(c, t, a, &na, f, &nf);
                for (int k = 0; k < na; k++) {
                    int gs = remat_islot(c, -1, a[k]);
                    if (check && live[gs]) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: %s allocated twice", i, remat_tensor_defs[a[k]].name); goto out; }
                    live[gs] = 1;
                    cur += remat_tensor_bytes(c, a[k]);
                }
                peak_here = cur;
                for (int k = 0; k < nf; k++) {
                    int gs = remat_islot(c, -1, f[k]);
                    live[gs] = 0;
                    cur -= remat_tensor_bytes(c, f[k]);
                }
                fl = remat_tensor_bwd_flops(c, t);
            }
        }
        if (peak_here > sim->peak_bytes) { sim->peak_bytes = peak_here; sim->peak_index = i; }
        if (ckpts > sim->max_checkpoints) sim->max_checkpoints = ckpts;
        sim->flops += fl;
        if (live_after) live_after[i] = cur;
        if (peak_in) peak_in[i] = peak_here;
        if (flops_of) flops_of[i] = fl;
    }
    if (check) {
        for (int sl = 0; sl < nslots; sl++) {
            int t = remat_slot_tid(L, sl);
            if (live[sl]) { st = remat_fail(REMAT_ERR_SCHEDULE, "leak: %s (layer %d) is never freed", remat_tensor_defs[t].name, remat_slot_layer(L, sl)); goto out; }
            if (t < RT_D_RES && remat_tensor_defs[t].has_bwd && !bwd[sl]) {
                st = remat_fail(REMAT_ERR_SCHEDULE, "the gradient of %s (layer %d) is never computed", remat_tensor_defs[t].name, remat_slot_layer(L, sl));
                goto out;
            }
        }
        if (s->n == 0 || s->ins[s->n - 1].kind != REMAT_I_UPDATE) { st = remat_fail(REMAT_ERR_SCHEDULE, "the schedule does not end with the update"); goto out; }
    }
    sim->workset_bytes = sim->peak_bytes - sim->stored_bytes;
out:
    free(live);
    free(bwd);
    return st;
}

remat_status remat_schedule_validate(const remat_schedule *s)
{
    remat_sim sim;
    if (!s) return remat_fail(REMAT_ERR_INVALID, "schedule is NULL");
    return walk(s, 1, &sim, NULL, NULL, NULL);
}

remat_status remat_schedule_simulate(const remat_schedule *s, remat_sim *out)
{
    if (!s || !out) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_simulate: NULL argument");
    return walk(s, 0, out, NULL, NULL, NULL);
}

remat_status remat_schedule_trace(const remat_schedule *s, remat_sim *sim, uint64_t *live_after, uint64_t *peak_in)
{
    remat_sim tmp;
    if (!s || !live_after || !peak_in) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_trace: NULL argument");
    return walk(s, 0, sim ? sim : &tmp, live_after, peak_in, NULL);
}

remat_status remat_schedule_instr(const remat_schedule *s, size_t i, remat_instr_info *out)
{
    if (!s || !out || i >= s->n) return remat_fail(REMAT_ERR_INVALID, "instruction index out of range");
    /* one walk per call keeps this simple; callers that print whole
     * schedules are not hot paths */
    uint64_t *live = remat_malloc(s->n * sizeof *live), *peak = remat_malloc(s->n * sizeof *peak);
    double *fl = remat_malloc(s->n * sizeof *fl);
    remat_sim sim;
    remat_status st = REMAT_OK;
    if (!live || !peak || !fl) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = walk(s, 0, &sim, live, peak, fl))) goto out;
    const remat_instr *in = &s->ins[i];
    out->kind = in->kind;
    out->layer = in->layer;
    out->tensor = in->kind == REMAT_I_UPDATE ? "" : remat_tensor_defs[in->tid].name;
    out->live_bytes = live[i];
    out->peak_bytes = peak[i];
    out->flops = fl[i];
out:
    free(live); free(peak); free(fl);
    return st;
}

remat_status remat_schedule_live_by_tensor(const remat_schedule *s, size_t i, uint64_t *bytes)
{
    if (!s || !bytes || i >= s->n) return remat_fail(REMAT_ERR_INVALID, "instruction index out of range");
    const remat_config *c = &s->cfg;
    memset(bytes, 0, sizeof(uint64_t) * RT_COUNT);
    /* replay the same allocation rule as walk(), attributing bytes by name */
    for (size_t k = 0; k <= i; k++) {
        const remat_instr *in = &s->ins[k];
        if (in->kind == REMAT_I_UPDATE) continue;
        int t = in->tid;
        if (in->kind == REMAT_I_FORWARD || in->kind == REMAT_I_RECOMPUTE) bytes[t] += remat_tensor_bytes(c, t);
        else if (in->kind == REMAT_I_FREE) bytes[t] -= remat_tensor_bytes(c, t);
        else {
            int a[2], f[2], na, nf;
            remat_bwd_effects(c, t, a, &na, f, &nf);
            for (int q = 0; q < na; q++) bytes[a[q]] += remat_tensor_bytes(c, a[q]);
            for (int q = 0; q < nf; q++) bytes[f[q]] -= remat_tensor_bytes(c, f[q]);
        }
    }
    return REMAT_OK;
}
