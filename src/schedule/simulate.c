/*
 * simulate.c -- schedules as objects: create, inspect, validate, and the
 * dry-run simulator, all as walks of the one walker (walk.c).
 *
 * A schedule is validated when it is made (compiled, or built from raw
 * instructions): a schedule that exists is valid.  The same validating walk
 * records the simulator's view -- live bytes after every instruction, the
 * peak inside it, its FLOPs -- so inspecting one instruction, or printing a
 * whole schedule, costs no further walk.
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
    s->tb = remat_table_of(cfg);
    *out = s;
    return REMAT_OK;
}

/* the `end` hook of the recording walk */
typedef struct rec { remat_schedule *s; } rec;
static void rec_end(void *arg, size_t i, const remat_instr *in, uint64_t live, uint64_t peak, double flops)
{
    remat_schedule *s = ((rec *)arg)->s;
    (void)in;
    s->live_after[i] = live;
    s->peak_in[i] = peak;
    s->flops_of[i] = flops;
}
static void rec_host(void *arg, size_t i, uint64_t host)
{
    remat_schedule *s = ((rec *)arg)->s;
    s->host_after[i] = host;
    if (s->ins[i].kind == REMAT_I_OFFLOAD) s->noffload++;
}

/* Validates s and records the simulator's view of it. */
static remat_status sched_finish(remat_schedule *s)
{
    size_t n = s->n ? s->n : 1;
    s->live_after = remat_malloc(n * sizeof *s->live_after);
    s->peak_in = remat_malloc(n * sizeof *s->peak_in);
    s->flops_of = remat_malloc(n * sizeof *s->flops_of);
    s->host_after = remat_malloc(n * sizeof *s->host_after);
    if (!s->live_after || !s->peak_in || !s->flops_of || !s->host_after)
        return remat_fail(REMAT_ERR_NOMEM, "out of memory recording a schedule");
    rec r = { s };
    s->noffload = 0;
    remat_walk_hooks h = { .arg = &r, .end = rec_end, .host = rec_host };
    return remat_walk(s, 1, &h, &s->sim);
}

remat_status remat_schedule_create(const remat_config *cfg, const char *policy, remat_schedule **out)
{
    remat_policy p;
    remat_schedule *s = NULL;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_create: out is NULL");
    *out = NULL;
    if ((st = remat_config_check(cfg))) return st;
    if ((st = remat_policy_parse(remat_table_of(cfg), policy, &p))) return st;
    if ((st = sched_new(cfg, &s))) goto out;
    s->policy = remat_policy_string(s->tb, &p);
    if (!s->policy) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = remat_compile(s, &p))) goto out;
    if ((st = sched_finish(s))) goto out;
    *out = s;
    s = NULL;
out:
    remat_policy_clear(&p);
    remat_schedule_free(s);
    return st;
}

remat_status remat_schedule_moves(const remat_config *cfg, const char *policy, remat_move_fn fn, void *arg)
{
    remat_policy p;
    remat_schedule *s = NULL;
    remat_status st;
    if ((st = remat_config_check(cfg))) return st;
    if ((st = remat_policy_parse(remat_table_of(cfg), policy, &p))) return st;
    if ((st = sched_new(cfg, &s))) goto out;
    s->on_move = fn;
    s->on_move_arg = arg;
    st = remat_compile(s, &p);
out:
    remat_policy_clear(&p);
    remat_schedule_free(s);
    return st;
}

remat_status remat_schedule_create_forward(const remat_config *cfg, remat_schedule **out)
{
    remat_schedule *s = NULL;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_create_forward: out is NULL");
    if ((st = sched_new(cfg, &s))) return st;
    s->forward_only = 1;
    if (!(s->policy = remat_strdup("forward"))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = remat_compile_forward(s))) goto out;
    if ((st = sched_finish(s))) goto out;
    *out = s;
    s = NULL;
out:
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
    if (!kinds || !layers || !tensors) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_from_instrs: NULL array");
    if ((st = sched_new(cfg, &s))) return st;
    s->policy = remat_strdup("custom");
    if (!s->policy) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    const remat_table *tb = s->tb;
    s->fwd_end = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        int t = tensors[i], k = kinds[i], l = layers[i];
        /* the table's ids must fit an instruction; the walker checks the rest */
        if (k < 0 || k > REMAT_I_RELOAD) { st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: bad kind %d", i, k); goto out; }
        if (k != REMAT_I_UPDATE && (t < 0 || t >= tb->first_grad)) {
            st = remat_fail(REMAT_ERR_SCHEDULE, "instruction %zu: bad tensor id %d", i, t);
            goto out;
        }
        if (s->fwd_end == SIZE_MAX && k != REMAT_I_UPDATE && tb->defs[t].cls == RT_CLASS_GLOBAL && t != tb->emb)
            s->fwd_end = i;
        if ((st = remat_schedule_push(s, k, l, k == REMAT_I_UPDATE ? -1 : t))) goto out;
    }
    if ((st = sched_finish(s))) goto out;
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
    free(s->live_after);
    free(s->peak_in);
    free(s->flops_of);
    free(s->host_after);
    free(s);
}

const char *remat_schedule_policy(const remat_schedule *s) { return s ? s->policy : ""; }
size_t remat_schedule_length(const remat_schedule *s) { return s ? s->n : 0; }

remat_status remat_schedule_validate(const remat_schedule *s)
{
    if (!s) return remat_fail(REMAT_ERR_INVALID, "schedule is NULL");
    return remat_walk(s, 1, NULL, NULL);
}

remat_status remat_schedule_simulate(const remat_schedule *s, remat_sim *out)
{
    if (!s || !out) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_simulate: NULL argument");
    *out = s->sim;
    return REMAT_OK;
}

remat_status remat_schedule_trace(const remat_schedule *s, remat_sim *sim, uint64_t *live_after, uint64_t *peak_in)
{
    if (!s || !live_after || !peak_in) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_trace: NULL argument");
    if (sim) *sim = s->sim;
    memcpy(live_after, s->live_after, s->n * sizeof *live_after);
    memcpy(peak_in, s->peak_in, s->n * sizeof *peak_in);
    return REMAT_OK;
}

remat_status remat_schedule_instr(const remat_schedule *s, size_t i, remat_instr_info *out)
{
    if (!s || !out || i >= s->n) return remat_fail(REMAT_ERR_INVALID, "instruction index out of range");
    const remat_instr *in = &s->ins[i];
    out->kind = (remat_instr_kind)in->kind;
    out->layer = in->layer;
    out->tensor = in->kind == REMAT_I_UPDATE ? "" : s->tb->defs[in->tid].name;
    out->live_bytes = s->live_after[i];
    out->peak_bytes = s->peak_in[i];
    out->flops = s->flops_of[i];
    out->host_bytes = s->host_after[i];
    return REMAT_OK;
}

/* live bytes by tensor, kept up to date by the walker's alloc/release */
typedef struct bytag { uint64_t *bytes; remat_schedule_live_fn fn; void *arg; const remat_schedule *s; size_t stop; } bytag;
static remat_status bt_alloc(void *arg, int slot, int t, uint64_t b, int zero)
{
    (void)slot; (void)zero;
    ((bytag *)arg)->bytes[t] += b;
    return REMAT_OK;
}
static void bt_release(void *arg, int slot, int t, uint64_t b)
{
    (void)slot;
    ((bytag *)arg)->bytes[t] -= b;
}
static void bt_end(void *arg, size_t i, const remat_instr *in, uint64_t live, uint64_t peak, double flops)
{
    bytag *b = arg;
    (void)in; (void)live; (void)peak; (void)flops;
    if (b->fn) {
        remat_instr_info info;
        remat_schedule_instr(b->s, i, &info);
        b->fn(b->arg, i, &info, b->bytes);
    }
}
/* stop the walk after instruction `stop` (remat_schedule_live_by_tensor) */
static remat_status bt_begin(void *arg, size_t i, const remat_instr *in)
{
    (void)in;
    return i > ((bytag *)arg)->stop ? REMAT_ERR_STATE : REMAT_OK;
}

remat_status remat_schedule_walk_live(const remat_schedule *s, remat_schedule_live_fn fn, void *arg)
{
    if (!s || !fn) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_walk_live: NULL argument");
    uint64_t bytes[RT_MAXT] = { 0 };
    bytag b = { bytes, fn, arg, s, SIZE_MAX };
    remat_walk_hooks h = { .arg = &b, .alloc = bt_alloc, .release = bt_release, .end = bt_end };
    return remat_walk(s, 0, &h, NULL);
}

remat_status remat_schedule_live_by_tensor(const remat_schedule *s, size_t i, uint64_t *bytes)
{
    if (!s || !bytes || i >= s->n) return remat_fail(REMAT_ERR_INVALID, "instruction index out of range");
    memset(bytes, 0, sizeof(uint64_t) * (size_t)s->tb->count);
    bytag b = { bytes, NULL, NULL, s, i };
    remat_walk_hooks h = { .arg = &b, .begin = bt_begin, .alloc = bt_alloc, .release = bt_release };
    remat_status st = remat_walk(s, 0, &h, NULL);
    return st == REMAT_ERR_STATE || st == REMAT_OK ? REMAT_OK : st;
}

remat_status remat_schedule_layers(const remat_schedule *s, remat_layer_info *out)
{
    if (!s || !out) return remat_fail(REMAT_ERR_INVALID, "remat_schedule_layers: NULL argument");
    int L = s->cfg.n_layer;
    memset(out, 0, sizeof *out * (size_t)L);
    /* before the sweep ends no backward has run: what is live is what was
     * computed and not freed */
    for (size_t i = 0; i < s->n; i++) {
        const remat_instr *in = &s->ins[i];
        if (in->layer < 0 || in->tid >= s->tb->nblock) continue;
        uint32_t bit = 1u << in->tid;
        if (i < s->fwd_end) {
            if (in->kind == REMAT_I_FORWARD || in->kind == REMAT_I_RECOMPUTE) out[in->layer].kept |= bit;
            else if (in->kind == REMAT_I_FREE) out[in->layer].kept &= ~bit;
            if (in->kind == REMAT_I_OFFLOAD) out[in->layer].offloaded |= bit;
            else if (in->kind != REMAT_I_BACKWARD) out[in->layer].offloaded &= ~bit;   /* computed, freed or reloaded */
        } else if (in->kind == REMAT_I_RECOMPUTE) {
            out[in->layer].recomputed |= bit;
        }
    }
    for (int l = 0; l < L; l++)
        for (int t = 0; t < s->tb->nblock; t++) {
            uint32_t bit = 1u << t;
            if (out[l].offloaded & bit) out[l].host_bytes += remat_tensor_bytes_at(&s->cfg, t, l);
            else if (out[l].kept & bit) out[l].kept_bytes += remat_tensor_bytes_at(&s->cfg, t, l);
        }
    return REMAT_OK;
}
