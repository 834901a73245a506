/*
 * devpeak.c -- a table's plans under a budget on device memory (remat.h,
 * "a budget on device memory"; README, "Using remat from PyTorch").
 *
 * A step's peak on the device is the table's static bytes -- parameters,
 * gradients and optimizer state, live for the whole step -- plus the
 * activations' peak, or the optimizer step's working set when that is more.
 *
 * Measured working sets (a table of version 3 that gives them; tablefile.c).
 * The activations' peak is found by walking the plan's schedule, the
 * simulator's own walk (schedule/walk.c), and adding at each moment what
 * the framework allocates then for a while, beyond what the table keeps:
 *   - a block's backward: its measured working set (work[l]: the
 *     gradients it makes, its temporaries), on top of what the walk has
 *     live then, the block's saved tensors recomputed when it is re-run;
 *   - the head: its measured working set over its forward and backward,
 *     on top of what is live when the forward ends (the simulator's own
 *     moment there holds the reserve instead, room for any block's re-run:
 *     left out);
 *   - the chain's input: its backward's working set.
 * Two things the table's simulator frees earlier than a framework does are
 * added back where it has freed them: a block's input (saved by the block's
 * first op, it lives until the block's backward ends; the simulator frees
 * it when no recomputation needs it) and what the ops before the chain keep
 * (held by the table's head entry, which the simulator frees at the head's
 * backward; the framework at the input's backward, the step's end).  The
 * checkpoints' own bytes (their stashes, contexts and nested inputs, all
 * live when the forward ends) are added to every moment: a little more
 * than a framework holds late in the backward, never less.  What the
 * simulator counts that the framework does not keep (a sample input as the
 * chain's input, a last block output the head does not keep: outside_bytes
 * says how much) is taken off.  Measured on transformers models
 * (tests/py_hf_models.py), this is within 1% of the allocator's peak.
 *
 * Without them (versions 1 and 2, or a file that gives no work_bytes) the
 * peak is the simulated activation peak plus what the checkpoint calls hold
 * (remat_table_row.peak_bytes) plus the static bytes, less the re-run's
 * room where no block is re-run: the simulated peak is the end of the
 * forward plus reserve_bytes, room for one block's backward with its saved
 * tensors recomputed (tablefile.c), and under a plan whose tree has no
 * checkpoint call no backward recomputes anything.
 *
 * The fastest plan under such a budget is the planner's under the budget
 * (remat_plan_optimal, activations_only 0, with room added), planned again
 * with less room while it peaks higher: remat_table_fit, the loop
 * remat_table_optimal runs for kept bytes.
 */
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "planner.h"

/* the walk's state: which slots are live, the moment being priced, the most found */
typedef struct dwalk {
    const remat_table *tb;
    const remat_table_spec *s;
    int L;
    uint8_t *live;
    uint64_t *bytes;             /* per slot, as the walk allocated it */
    int head, in, out;           /* tensor ids */
    int head_done, input_done;   /* the head's backward ran; the input's */
    uint64_t add;                /* what the moment being priced holds beyond the walk's live bytes */
    uint64_t best;
} dwalk;

static remat_status dw_alloc(void *arg, int slot, int t, uint64_t bytes, int zero)
{
    dwalk *d = arg;
    (void)t;
    (void)zero;
    d->live[slot] = 1;
    d->bytes[slot] = bytes;
    return REMAT_OK;
}

static void dw_release(void *arg, int slot, int t, uint64_t bytes)
{
    dwalk *d = arg;
    (void)t;
    (void)bytes;
    d->live[slot] = 0;
}

/* the op's operands are live, nothing of it freed yet: what the moment adds */
static remat_status dw_exec(void *arg, size_t i, const remat_instr *in, const remat_operands *o)
{
    dwalk *d = arg;
    const remat_table_spec *s = d->s;
    (void)i;
    (void)o;
    d->add = 0;
    if (in->kind != REMAT_I_BACKWARD) return REMAT_OK;
    if (in->tid == d->out) {
        int x = remat_table_slot(d->tb, d->L, in->layer, RT_X);       /* the block's input */
        d->add = s->work[in->layer] + (d->live[x] ? 0 : d->bytes[x]);
    } else if (in->tid == d->in) {
        d->add = s->input_work;
    }
    if (d->head_done && !d->input_done) d->add += s->input_saved + s->held;
    return REMAT_OK;
}

static void dw_end(void *arg, size_t i, const remat_instr *in, uint64_t live, uint64_t peak, double flops)
{
    dwalk *d = arg;
    uint64_t at = peak + d->add;
    (void)i;
    (void)flops;
    if (in->tid == d->head && in->kind == REMAT_I_FORWARD) at = live + d->s->head_work;
    if (in->tid == d->head && in->kind == REMAT_I_BACKWARD) { at = 0; d->head_done = 1; }
    if (in->tid == d->in && in->kind == REMAT_I_BACKWARD) d->input_done = 1;
    if (in->kind == REMAT_I_UPDATE) at = 0;
    if (at > d->best) d->best = at;
    d->add = 0;
}

/* the activations' peak of r's plan with the table's measured working sets (see the notes) */
static remat_status walked_peak(const remat_config *cfg, const remat_table_spec *s, const remat_table_row *r,
                                uint64_t *act)
{
    remat_schedule *sc = NULL;
    dwalk d;
    memset(&d, 0, sizeof d);
    remat_status st = remat_schedule_create(cfg, r->row.policy, &sc);
    if (st) return st;
    d.tb = sc->tb;
    d.s = s;
    d.L = cfg->n_layer;
    d.head = d.tb->lmhead[0];
    d.in = d.tb->emb;
    d.out = d.tb->nblock - 1;
    int ns = remat_table_nslots(d.tb, d.L);
    d.live = remat_calloc((size_t)ns, 1);
    d.bytes = remat_calloc((size_t)ns, sizeof *d.bytes);
    if (!d.live || !d.bytes) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory pricing a plan's device peak");
    } else {
        remat_walk_hooks h;
        memset(&h, 0, sizeof h);
        h.arg = &d;
        h.alloc = dw_alloc;
        h.release = dw_release;
        h.exec = dw_exec;
        h.end = dw_end;
        st = remat_walk(sc, 0, &h, NULL);
    }
    *act = d.best;
    free(d.live);
    free(d.bytes);
    remat_schedule_free(sc);
    return st;
}

remat_status remat_table_device_peak_of(const remat_config *cfg, const remat_table_info *info, remat_table_row *r)
{
    const remat_table_spec *s = remat_table_custom_spec(cfg->table);
    if (s && s->has_work && s->work) {
        uint64_t act = 0;
        remat_status st = walked_peak(cfg, s, r, &act);
        if (st) return st;
        /* what the walk holds that the framework does not keep (outside_bytes = head - that) */
        int64_t drop = (int64_t)s->head - info->outside_bytes;
        int64_t a = (int64_t)act - drop + (int64_t)r->checkpoint_bytes;
        uint64_t acts = a > 0 ? (uint64_t)a : 0;
        r->device_peak_bytes = info->static_bytes + (acts > s->optimizer_work ? acts : s->optimizer_work);
        return REMAT_OK;
    }
    int64_t end = (int64_t)r->row.stored_bytes + info->outside_bytes + (int64_t)info->reserve_bytes;
    /* no checkpoint call in the plan tree (tree.c): no block's backward re-runs anything */
    int unused = r->checkpoint_calls == 0 && (int64_t)r->row.peak_bytes <= end;
    uint64_t relief = unused && info->block_saved_bytes <= r->row.total_bytes ? info->block_saved_bytes : 0;
    r->device_peak_bytes = r->row.total_bytes + r->checkpoint_bytes - relief;
    return REMAT_OK;
}

uint64_t remat_table_row_device_peak(const remat_table_row *r)
{
    return r ? r->device_peak_bytes : 0;
}

remat_status remat_table_optimal_device(const remat_config *cfg, const remat_profile *prof, uint64_t budget,
                                        remat_table_row *out)
{
    remat_table_info info;
    uint64_t minp = 0;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_table_optimal_device: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = remat_table_get_info(cfg, &info)) || (st = remat_plan_min_peak(cfg, &minp))) return st;
    /* the room the planner's peak holds beyond the device peak's: a plan that re-runs nothing
     * leaves one block's saved tensors of the reserve unused; with measured working sets the
     * whole reserve may be (the fit takes back what a plan then peaks over) */
    const remat_table_spec *s = remat_table_custom_spec(cfg->table);
    uint64_t room = s && s->has_work ? info.reserve_bytes : info.block_saved_bytes;
    if ((st = remat_table_fit(cfg, &info, prof, budget, room, info.static_bytes + minp, 0,
                              remat_table_row_device_peak, out)) != REMAT_ERR_BUDGET)
        return st;
    /* the minimum: the smallest simulated peak's plan, with its checkpoints' bytes */
    remat_plan_row pr;
    remat_table_row least;
    char b1[32], b2[32], b3[32];
    if ((st = remat_plan_optimal(cfg, prof, minp, 1, &pr))) return st;
    st = remat_table_evaluate(cfg, prof, pr.policy, &least);
    remat_plan_row_clear(&pr);
    if (st) return st;
    st = remat_fail(REMAT_ERR_BUDGET, "budget %s is below the minimum %s of the step's peak (parameters, gradients "
                    "and optimizer state %s, and the activations of the plan that peaks least, %s)",
                    remat_fmt_bytes(budget, b1, sizeof b1), remat_fmt_bytes(remat_table_row_device_peak(&least), b2,
                                                                            sizeof b2),
                    remat_fmt_bytes(info.static_bytes, b3, sizeof b3), least.row.policy);
    remat_table_row_clear(&least);
    return st;
}
