/*
 * walk.c -- the walker: the one place that applies a schedule's allocation
 * rules (see schedule.h), for every reader of a schedule -- the compiler,
 * the simulator and validator, the engine's interpreter and the planner's
 * cost pass.
 */
#include <stdlib.h>
#include <string.h>
#include "schedule.h"
#include "../core/core.h"
#include "../kernels/gemm.h"

const char *remat_instr_kind_name(remat_instr_kind k)
{
    static const char *n[] = { "forward", "recompute", "backward", "free", "update", "offload", "reload" };
    return (unsigned)k <= REMAT_I_RELOAD ? n[k] : "?";
}
#define iname(k) remat_instr_kind_name((remat_instr_kind)(k))

void remat_machine_now(const remat_config *cfg, remat_machine *mc)
{
    mc->threads = remat_get_threads();
    /* asked only where it matters, remat's own tables under bf16 (the probe makes a oneDNN engine) */
    mc->bf16_copies = cfg->framework == REMAT_FRAMEWORK_REMAT && cfg->dtype == REMAT_DTYPE_BF16 &&
                      !remat_gemm_bf16_native();
}

remat_status remat_walker_init(remat_walker *w, const remat_config *cfg, int forward_only, int check,
                               const remat_walk_hooks *h, size_t fwd_end)
{
    memset(w, 0, sizeof *w);
    w->cfg = cfg;
    w->tb = remat_table_of(cfg);
    w->L = cfg->n_layer;
    w->nslots = remat_table_nslots(w->tb, w->L);
    w->check = check;
    w->forward_only = forward_only;
    w->h = h;
    w->fwd_end = fwd_end;
    w->last_rec_layer = -2;
    remat_machine_now(cfg, &w->mc);
    w->live = remat_calloc((size_t)w->nslots, 1);
    w->done = remat_calloc((size_t)w->nslots, 1);
    w->bytes = remat_malloc(sizeof *w->bytes * (size_t)w->nslots);
    if (!w->live || !w->done || !w->bytes) {
        remat_walker_free(w);
        return remat_fail(REMAT_ERR_NOMEM, "out of memory walking a schedule");
    }
    for (int s = 0; s < w->nslots; s++)
        w->bytes[s] = remat_tensor_bytes_at(cfg, remat_table_slot_tid(w->tb, w->L, s), remat_table_slot_layer(w->tb, w->L, s));
    return REMAT_OK;
}

void remat_walker_free(remat_walker *w)
{
    free(w->live);
    free(w->done);
    free(w->bytes);
    w->live = w->done = NULL;
    w->bytes = NULL;
}

static const char *sname(const remat_walker *w, int slot)
{
    return w->tb->defs[remat_table_slot_tid(w->tb, w->L, slot)].name;
}

/* a tensor comes to life */
static remat_status born(remat_walker *w, int slot, int t, int zero)
{
    uint64_t b = w->bytes[slot];
    if (w->h && w->h->alloc) {
        remat_status st = w->h->alloc(w->h->arg, slot, t, b, zero);
        if (st) return st;
    }
    w->live[slot] = WALK_DEVICE;
    w->cur += b;
    if (remat_table_slot_is_checkpoint(w->tb, w->L, slot)) w->ckpts++;
    return REMAT_OK;
}

/* its device bytes go: freed (to WALK_DEAD) or offloaded (to WALK_HOST) */
static void dies(remat_walker *w, int slot, int to)
{
    int t = remat_table_slot_tid(w->tb, w->L, slot);
    uint64_t b = w->bytes[slot];
    if (w->h && w->h->release) w->h->release(w->h->arg, slot, t, b);
    w->live[slot] = (uint8_t)to;
    w->cur -= b;
    if (to == WALK_HOST) w->host += b;
    if (remat_table_slot_is_checkpoint(w->tb, w->L, slot)) w->ckpts--;
}

#define FAIL(...) do { return remat_fail(REMAT_ERR_SCHEDULE, __VA_ARGS__); } while (0)

static remat_status check_reads(const remat_walker *w, size_t i, const remat_instr *in, const remat_operands *o)
{
    const char *nm = w->tb->defs[in->tid].name;
    for (int k = 0; k < o->nin; k++)
        if (w->live[o->in[k]] != WALK_DEVICE)
            FAIL("instruction %zu: %s of %s (layer %d) reads %s, which is %s", i, iname(in->kind), nm, in->layer,
                 sname(w, o->in[k]), w->live[o->in[k]] ? "on the host (reload it first)" : "not materialised");
    for (int k = 0; k < o->nneed; k++)
        if (w->live[o->need[k]] != WALK_DEVICE)
            FAIL("instruction %zu: backward of %s (layer %d) runs before %s exists (out of order)", i, nm, in->layer,
                 sname(w, o->need[k]));
    return REMAT_OK;
}

/* An op's scratch (o->temp_bytes), held only while its exec hook runs. */
static remat_status run_op(remat_walker *w, size_t i, const remat_instr *in, const remat_operands *o)
{
    const remat_walk_hooks *h = w->h;
    remat_status st;
    if (o->temp_bytes && h && h->temp_alloc && (st = h->temp_alloc(h->arg, o->temp_bytes))) return st;
    st = h && h->exec ? h->exec(h->arg, i, in, o) : REMAT_OK;
    if (o->temp_bytes && h && h->temp_release) h->temp_release(h->arg, o->temp_bytes);
    return st;
}

remat_status remat_walker_step(remat_walker *w, size_t i, const remat_instr *in)
{
    const remat_walk_hooks *h = w->h;
    remat_status st;
    remat_operands o;
    uint64_t peak = w->cur;
    double fl = 0;
    if (i == w->fwd_end) { w->sim.stored_bytes = w->cur; w->sim.host_stored_bytes = w->host; }
    if (h && h->begin && (st = h->begin(h->arg, i, in))) return st;
    int k = in->kind, t = in->tid;
    if (w->check) {
        if (k > REMAT_I_RELOAD) FAIL("instruction %zu: bad kind %d", i, k);
        if (k != REMAT_I_UPDATE) {
            if (t < 0 || t >= w->tb->first_grad) FAIL("instruction %zu: bad tensor id %d", i, t);
            const remat_tensor_def *d = &w->tb->defs[t];
            if (d->cls == RT_CLASS_BLOCK ? (in->layer < 0 || in->layer >= w->L) : in->layer != -1)
                FAIL("instruction %zu: layer %d out of range for %s", i, in->layer, d->name);
        }
        if (w->forward_only && k != REMAT_I_FORWARD && k != REMAT_I_FREE)
            FAIL("instruction %zu: %s in a forward-only schedule", i, iname(k));
    }
    remat_operands_of(w->cfg, &w->mc, k, in->layer, t, &o);
    if (k == REMAT_I_UPDATE) {
        fl = remat_update_flops(w->cfg);
        if (h && h->exec && (st = h->exec(h->arg, i, in, &o))) return st;
    } else if (k == REMAT_I_FORWARD || k == REMAT_I_RECOMPUTE) {
        const char *nm = w->tb->defs[t].name;
        if (w->check) {
            if (w->live[o.out]) FAIL("instruction %zu: %s of %s (layer %d) which is already live", i, iname(k), nm, in->layer);
            if ((st = check_reads(w, i, in, &o))) return st;
        }
        if ((st = born(w, o.out, t, 0))) return st;
        peak = w->cur + o.temp_bytes;
        if ((st = run_op(w, i, in, &o))) return st;
        fl = remat_tensor_flops_at(w->cfg, t, in->layer, 0);
        if (k == REMAT_I_RECOMPUTE) {
            w->sim.recompute_flops += fl;
            if (in->layer != w->last_rec_layer) w->sim.recomputed_blocks++;
            w->last_rec_layer = in->layer;
        } else {
            w->last_rec_layer = -2;
        }
    } else if (k == REMAT_I_FREE) {
        if (w->check && !w->live[o.out])
            FAIL("instruction %zu: free of %s (layer %d), which is not live", i, w->tb->defs[t].name, in->layer);
        if (h && h->exec && (st = h->exec(h->arg, i, in, &o))) return st;
        if (w->live[o.out] == WALK_HOST) {     /* its copy on the host: the device is untouched */
            w->host -= w->bytes[o.out];
            w->live[o.out] = WALK_DEAD;
        } else {
            dies(w, o.out, WALK_DEAD);
        }
    } else if (k == REMAT_I_OFFLOAD || k == REMAT_I_RELOAD) {
        int want = k == REMAT_I_OFFLOAD ? WALK_DEVICE : WALK_HOST;
        if (w->check && w->live[o.out] != want)
            FAIL("instruction %zu: %s of %s (layer %d), which is %s", i, iname(k), w->tb->defs[t].name, in->layer,
                 w->live[o.out] == WALK_HOST ? "already on the host"
                 : w->live[o.out] ? "on the device, not the host" : "not live");
        if (h && h->exec && (st = h->exec(h->arg, i, in, &o))) return st;
        uint64_t b = w->bytes[o.out];
        w->sim.transfer_bytes += b;
        if (k == REMAT_I_OFFLOAD) {
            dies(w, o.out, WALK_HOST);
        } else {
            w->host -= b;
            if ((st = born(w, o.out, t, 0))) return st;
            peak = w->cur;
        }
    } else {   /* backward */
        const remat_tensor_def *d = &w->tb->defs[t];
        if (w->check) {
            if (!d->has_bwd) FAIL("instruction %zu: %s has no backward of its own", i, d->name);
            if (w->done[o.out]) FAIL("instruction %zu: gradient of %s (layer %d) computed twice", i, d->name, in->layer);
            if ((st = check_reads(w, i, in, &o))) return st;
            for (int q = 0; q < o.nalloc; q++)
                if (w->live[o.alloc[q]]) FAIL("instruction %zu: %s allocated twice", i, sname(w, o.alloc[q]));
        }
        w->done[o.out] = 1;
        for (int q = 0; q < o.nalloc; q++) {
            /* a chain with a dense prefix: a gradient buffer holds what the
             * block whose backward allocates it needs (its slot is global) */
            if (w->cfg->moe_first_dense > 0 && in->layer >= 0)
                w->bytes[o.alloc[q]] = remat_tensor_bytes_at(w->cfg, o.alloc_t[q], in->layer);
            if ((st = born(w, o.alloc[q], o.alloc_t[q], (w->tb->defs[o.alloc_t[q]].flags & RT_F_ZERO) != 0))) return st;
        }
        peak = w->cur + o.temp_bytes;
        if ((st = run_op(w, i, in, &o))) return st;
        for (int q = 0; q < o.nfree; q++) {
            if (w->check && w->live[o.freed[q]] != WALK_DEVICE)
                FAIL("instruction %zu: backward of %s (layer %d) frees %s, which is not live", i, d->name, in->layer,
                     sname(w, o.freed[q]));
            dies(w, o.freed[q], WALK_DEAD);
        }
        fl = remat_tensor_flops_at(w->cfg, t, in->layer, 1);
    }
    if (peak > w->sim.peak_bytes) { w->sim.peak_bytes = peak; w->sim.peak_index = i; }
    if (w->host > w->sim.host_peak_bytes) w->sim.host_peak_bytes = w->host;
    if (w->ckpts > w->sim.max_checkpoints) w->sim.max_checkpoints = w->ckpts;
    w->sim.flops += fl;
    if (h && h->end) h->end(h->arg, i, in, w->cur, peak, fl);
    if (h && h->host) h->host(h->arg, i, w->host);
    return REMAT_OK;
}

remat_status remat_walker_finish(remat_walker *w)
{
    if (w->check) {
        for (int sl = 0; sl < w->nslots; sl++) {
            int t = remat_table_slot_tid(w->tb, w->L, sl), l = remat_table_slot_layer(w->tb, w->L, sl);
            if (w->live[sl] == WALK_HOST) FAIL("leak: %s (layer %d) is still on the host at the end", w->tb->defs[t].name, l);
            if (w->live[sl]) FAIL("leak: %s (layer %d) is never freed", w->tb->defs[t].name, l);
        }
        if (!w->forward_only)
            for (int sl = 0; sl < w->nslots; sl++) {
                int t = remat_table_slot_tid(w->tb, w->L, sl);
                if (t < w->tb->first_grad && w->tb->defs[t].has_bwd && !w->done[sl])
                    FAIL("the gradient of %s (layer %d) is never computed", w->tb->defs[t].name,
                         remat_table_slot_layer(w->tb, w->L, sl));
            }
    }
    w->sim.workset_bytes = w->sim.peak_bytes - w->sim.stored_bytes;
    return REMAT_OK;
}

remat_status remat_walk(const remat_schedule *s, int check, const remat_walk_hooks *h, remat_sim *sim)
{
    remat_walker w;
    remat_status st = remat_walker_init(&w, &s->cfg, s->forward_only, check, h, s->fwd_end);
    if (st) return st;
    for (size_t i = 0; i < s->n && !st; i++) {
        if (check && s->ins[i].kind == REMAT_I_UPDATE && i + 1 != s->n)
            st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: update before the end", i);
        else
            st = remat_walker_step(&w, i, &s->ins[i]);
    }
    if (!st) st = remat_walker_finish(&w);
    if (!st && check && !s->forward_only && (s->n == 0 || s->ins[s->n - 1].kind != REMAT_I_UPDATE))
        st = remat_fail(REMAT_ERR_SCHEDULE, "the schedule does not end with the update");
    if (!st && sim) *sim = w.sim;
    remat_walker_free(&w);
    return st;
}
