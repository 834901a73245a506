/*
 * cost.c -- the planner's cost model: how long each instruction of a
 * schedule takes.
 *
 * Two sources, one shape (struct remat_profile, planner.h):
 *   - measured (`remat profile`, profile.c): every op of the tensor table,
 *     run through the same op dispatcher training uses, timed on this
 *     machine; profiles are saved and loaded by profile_io.c;
 *   - the FLOP/byte model (here): t = flops / throughput + bytes /
 *     bandwidth, with matrix products (the table's RT_F_GEMM entries) and
 *     the other loops at different throughputs.
 * A schedule's time is the sum of its instructions' op times (frees cost
 * nothing) plus the per-step optimizer update; the costing pass is a walk
 * of the one walker (schedule/walk.c).  Offload and reload (a GPU's host
 * link: a profile with host_bps) run on their own copy stream beside the
 * compute: a run of consecutive offloads hides behind one block's forward
 * (TE starts a layer's offload as the next layer's forward runs), a run of
 * reloads behind one block's backward (the reload of a layer runs while the
 * layer after it goes backward); only what exceeds that is counted.  A profile calibrated by a training
 * run (calibrate.c) prices each instruction the run executed at what it
 * took there instead.  Memory is never estimated here: it comes from the
 * simulator.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner.h"
#include "../core/core.h"
#include "../kernels/gemm.h"   /* REMAT_PROBE_DISTRUST */

/* Throughputs of the default model (no measurement).  Measured on a 2-core
 * AMD EPYC with OpenBLAS, 2 threads: a 1024^3 SGEMM 124-174 GFLOP/s (the
 * model's GEMMs, attention included, run at 80-90% of it); AdamW streams
 * its 28 bytes per parameter at ~28 GB/s (`remat profile`: 126 ms for 124M
 * parameters); LayerNorm, GELU and the softmaxes are counted at a tenth of
 * the GEMM rate. */
#define MODEL_GFLOPS 150.0
#define MODEL_GFLOPS_BF16 300.0   /* oneDNN's bf16 matmul: about twice fp32 (docs/performance.md, "The step: engines and precisions") */
#define MODEL_OTHER_RATIO 0.1
#define MODEL_GBPS 25.0

void remat_profile_config_key(const remat_config *c, char *buf, size_t n)
{
    int k = snprintf(buf, n, "%d %d %d %d %d %d %d %.9g %d %d %d", c->n_layer, c->n_embd, c->n_head, c->vocab,
                     c->max_seq, c->batch, c->seq, (double)c->dropout, c->attention, c->lmhead_chunk, (int)c->dtype);
    /* framework tables and other architectures only (GPT-2's keys, and so
     * its cache files, stay as they were); a table read from a file by its
     * content (its id is this process's) */
    if (c->framework != REMAT_FRAMEWORK_REMAT && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " fw%d tp%d sp%d st%d", (int)c->framework, remat_config_tp(c), c->sp,
                      c->stage);
    if (remat_config_cp(c) > 1 && k >= 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " cp%d", remat_config_cp(c));
    if (c->arch != REMAT_ARCH_GPT2 && k >= 0 && (size_t)k < n) {
        const remat_rope_scaling *r = &c->rope_scaling;
        snprintf(buf + k, n - (size_t)k, " %s kv%d f%d hs%d theta%.17g eps%.17g tie%d rope%d:%.17g:%.17g:%.17g:%d",
                 remat_arch_name(c->arch), remat_config_kv_heads(c), remat_config_ffn_dim(c), remat_config_head_dim(c),
                 remat_config_rope_theta(c), remat_config_norm_eps(c), remat_config_tied(c), (int)r->type, r->factor,
                 r->low_freq_factor, r->high_freq_factor, r->original_max_position);
    }
    if (c->framework == REMAT_FRAMEWORK_TABLE && k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, " table %016llx", (unsigned long long)remat_table_custom_key(c->table));
}


/* ---- the FLOP/byte model -------------------------------------------------- */

static double weight_bytes(const remat_config *c, int t) { return 4.0 * (double)remat_tensor_weight_elems(c, t); }

double remat_input_bytes(const remat_config *c, const remat_table *tb, const int8_t *in)
{
    return remat_input_bytes_at(c, tb, in, -1);
}

double remat_input_bytes_at(const remat_config *c, const remat_table *tb, const int8_t *in, int layer)
{
    double b = 0;
    for (int i = 0; i < RT_MAXIO && in[i] != RT_NONE; i++)
        b += (double)(layer < 0 ? remat_tensor_bytes(c, in[i] == RT_X ? tb->nblock - 1 : in[i])
                                : remat_tensor_bytes_at(c, in[i] == RT_X ? tb->nblock - 1 : in[i], layer));
    return b;
}

/* With a GEMM probe (calibrate.c), the ops that are products, by op class:
 * the probe's time of their products at their own shapes (linear layers,
 * the LM head) or their tile products at its tile rate (attention), plus
 * their pointwise FLOPs and the bytes that no product moves: a residual's
 * input and output, the bias gradient's read, the logits' and attention
 * probabilities' round trips through memory. */
static void fill_probed_op(remat_profile *p, const remat_config *c, const remat_probe *pr, int t)
{
    const remat_table *tb = remat_table_of(c);
    const remat_tensor_def *d = &tb->defs[t];
    const remat_cost *k = remat_tensor_cost(c, t);
    double other = p->other_gflops * 1e6, bw = p->gbps * 1e6, tile = pr->tile_gflops * 1e6;
    double out = (double)remat_tensor_bytes(c, t), fwd = remat_tensor_fwd_flops(c, t), bwd = remat_tensor_bwd_flops(c, t);
    double prod = remat_tensor_prod_flops(c, t);
    if (d->opc == RO_LMHEAD) {   /* products, then the softmax cross-entropy over (rows, Vp) */
        double xent = fwd - k->fprod * prod;
        int whole = k->bprod > 0;   /* the chunked head computes its gradient in the forward */
        p->fwd_ms[t] = pr->gemm_ms[t][0] + xent / other + (whole ? 2 * out : 0) / bw;
        p->bwd_ms[t] = whole ? pr->gemm_ms[t][1] : bwd / other;
    } else if (d->opc == RO_LINEAR) {   /* a linear layer; a residual adds the block's input */
        int residual = (d->flags & RT_F_RESIDUAL) != 0;
        p->fwd_ms[t] = pr->gemm_ms[t][0] + (residual ? 2 * out : 0) / bw;
        p->bwd_ms[t] = pr->gemm_ms[t][1] + out / bw;
    } else {   /* attention: tiles, a softmax, the probabilities through memory (naive) */
        double tf = k->fprod * prod, tb_ = k->bprod * prod;
        /* the attention core's stored probabilities, when its scores entry keeps them: the
         * scores entry (no backward of its own) writes them, the values entry reads them */
        double probs = 0;
        for (int u = 0; u < tb->nblock; u++)
            if (tb->defs[u].kernel == RK_ATT_SCORES && !remat_tensor_variant_on(c, u))
                probs = (double)remat_tensor_bytes(c, u);
        int scores = d->kernel == RK_ATT_SCORES;
        p->fwd_ms[t] = tf / tile + (fwd - tf) / other + (scores ? 2 * probs : out) / bw;
        if (d->has_bwd) p->bwd_ms[t] = tb_ / tile + (bwd - tb_) / other + (probs + 2 * out) / bw;
    }
}

/* A pointwise op's time from its math and its memory traffic: their sum
 * in the default model; with measured speeds (a probe), the larger of the
 * two, as a roofline has it (Williams et al. 2009): such loops stream
 * while they compute. */
static double roof(const remat_probe *pr, double compute_ms, double memory_ms)
{
    return pr ? (compute_ms > memory_ms ? compute_ms : memory_ms) : compute_ms + memory_ms;
}

static void fill(remat_profile *p, const remat_config *c, double gflops, double other, double gbps,
                 const remat_probe *pr)
{
    const remat_table *tb = remat_table_of(c);
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    p->measured = 0;
    p->gflops = gflops;
    p->other_gflops = other;
    p->gbps = gbps;
    p->threads = remat_get_threads();
    for (int t = 0; t < tb->first_grad; t++) {
        const remat_tensor_def *d = &tb->defs[t];
        if (pr && d->opc != RO_POINTWISE) { fill_probed_op(p, c, pr, t); continue; }
        double g = ((d->flags & RT_F_GEMM) ? p->gflops : p->other_gflops) * 1e6;   /* FLOPs per ms */
        double bw = p->gbps * 1e6;                                                  /* bytes per ms */
        double out = (double)remat_tensor_bytes(c, t), w = weight_bytes(c, t);
        p->fwd_ms[t] = roof(pr, remat_tensor_fwd_flops(c, t) / g, (out + remat_input_bytes(c, tb, d->fwd_in) + w) / bw);
        if (d->has_bwd)
            p->bwd_ms[t] = roof(pr, remat_tensor_bwd_flops(c, t) / g, (2 * out + remat_input_bytes(c, tb, d->bwd_in) + 3 * w) / bw);
    }
    memcpy(p->fwd_hot_ms, p->fwd_ms, sizeof p->fwd_ms);   /* no cache in the model */
    memcpy(p->bwd_hot_ms, p->bwd_ms, sizeof p->bwd_ms);
    p->cache_bytes = 0;
    double np = (double)remat_config_num_params(c);
    p->update_ms = roof(pr, remat_update_flops(c) / (p->other_gflops * 1e6), 36.0 * np / (p->gbps * 1e6));
}

void remat_profile_fill_model(remat_profile *p, const remat_config *c, double gflops)
{
    double g = gflops > 0 ? gflops : c->dtype == REMAT_DTYPE_BF16 ? MODEL_GFLOPS_BF16 : MODEL_GFLOPS;
    fill(p, c, g, g * MODEL_OTHER_RATIO, MODEL_GBPS, NULL);
    snprintf(p->desc, sizeof p->desc, "FLOP model: %.1f GFLOP/s GEMM, %.1f GFLOP/s other, %.1f GB/s%s",
             p->gflops, p->other_gflops, p->gbps, gflops > 0 ? " (GEMM calibrated by one SGEMM)" : " (defaults)");
}

void remat_profile_fill_times(remat_profile *p, const remat_config *c, const double *fwd, const double *bwd,
                              double update_ms, const char *device)
{
    const remat_table *tb = remat_table_of(c);
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    p->measured = 1;
    p->threads = remat_get_threads();
    snprintf(p->cpu, sizeof p->cpu, "%s", device);
    for (int t = 0; t < tb->first_grad; t++) {
        p->fwd_ms[t] = p->fwd_hot_ms[t] = fwd[t];
        p->bwd_ms[t] = p->bwd_hot_ms[t] = tb->defs[t].has_bwd ? bwd[t] : 0;
    }
    p->update_ms = update_ms;
    snprintf(p->desc, sizeof p->desc, "measured on %s (the table's times)", device);
}

int remat_probe_distrusted(const remat_probe *p)
{
    double low = p->gemm_gflops < p->tile_gflops ? p->gemm_gflops : p->tile_gflops;
    return p->floor_gflops > 0 && low * REMAT_PROBE_DISTRUST < p->floor_gflops;
}

void remat_profile_fill_probed(remat_profile *p, const remat_config *c, const remat_probe *pr)
{
    fill(p, c, pr->tile_gflops, pr->other_gflops, pr->gbps, pr);
    int k = snprintf(p->desc, sizeof p->desc, "FLOP model, GEMM probe at this config's shapes (%.0f ms): tiles %.1f "
                     "GFLOP/s, pointwise %.1f GFLOP/s, %.1f GB/s", pr->ms, pr->tile_gflops, pr->other_gflops, pr->gbps);
    /* a probe repeated on a busy machine says so (calibrate.c) */
    if (pr->passes > 1 && k > 0 && (size_t)k < sizeof p->desc)
        snprintf(p->desc + k, sizeof p->desc - (size_t)k, "; %d passes, the first at %.2f GFLOP/s (under 1/%d of a "
                 "128^3 GEMM's %.1f): best kept%s", pr->passes, pr->first_gflops, REMAT_PROBE_DISTRUST,
                 pr->floor_gflops, remat_probe_distrusted(pr) ? ", still low: a busy machine" : "");
}


void remat_profile_free(remat_profile *p) { free(p); }

double remat_profile_op_ms(const remat_profile *p, int id, int backward)
{
    if (!p) return 0;
    if (id == -1) return p->update_ms;
    if (id < 0 || id >= remat_table_of(&p->cfg)->first_grad) return 0;
    return backward ? p->bwd_ms[id] : p->fwd_ms[id];
}

double remat_profile_op_warm_ms(const remat_profile *p, int id, int backward)
{
    if (!p) return 0;
    if (id == -1) return p->update_ms;
    if (id < 0 || id >= remat_table_of(&p->cfg)->first_grad) return 0;
    return backward ? p->bwd_hot_ms[id] : p->fwd_hot_ms[id];
}

double remat_profile_run_ms(const remat_profile *p, int k, int t)
{
    /* frees: the planner's recurrences take them to cost nothing; what they
     * took is in the step's overhead */
    if (k < 0 || k >= REMAT_NKINDS || k == REMAT_I_FREE || t < 0 || t >= RT_MAXT) return -1;
    if (p->run_n[k][t]) return p->run_ms[k][t];
    if (k == REMAT_I_RECOMPUTE && p->run_n[REMAT_I_FORWARD][t]) return p->run_ms[REMAT_I_FORWARD][t];
    return -1;
}

const char *remat_profile_describe(const remat_profile *p) { return p ? p->desc : ""; }

const remat_profile *remat_profile_resolve(const remat_config *cfg, const remat_profile *prof, remat_profile *tmp)
{
    if (!prof) {
        remat_profile_fill_model(tmp, cfg, 0);
        return tmp;
    }
    if (!remat_config_same(&prof->cfg, cfg)) {
        char a[256], b[256];
        remat_profile_config_key(&prof->cfg, a, sizeof a);
        remat_profile_config_key(cfg, b, sizeof b);
        remat_fail(REMAT_ERR_INVALID, "the profile is for config '%s', not '%s'", a, b);
        return NULL;
    }
    return prof;
}

/* ---- costing schedules ------------------------------------------------------
 * A walk whose exec hook prices each instruction from its operands (see
 * planner.h for the cache rule). */

typedef struct costw {
    const remat_profile *p;
    const remat_config *c;
    int model;                 /* no cache in the FLOP model: cold times only */
    int per_block;             /* a table read from a file whose blocks differ: each block's own times */
    size_t *pidx;              /* per slot: index of its latest production (SIZE_MAX: none) */
    uint64_t *pclk;            /* per slot: the byte clock then */
    uint64_t clk;              /* bytes produced so far */
    size_t b1, b2;             /* latest backward; latest of another block than b1's */
    int l1;
    double total, rec, *ms;
    double hide_f, hide_b;     /* what a run of offloads, of reloads, hides behind (ms) */
    double run;                /* transfer ms of the current run of offloads or reloads */
    int prev;                  /* the kind of the instruction before */
} costw;

/* ms that the transfer of `bytes` adds to a run of transfers that hides
 * behind `hide` ms and has taken *run ms so far */
static double transfer_ms(const remat_profile *p, uint64_t bytes, double hide, double *run)
{
    double before = *run > hide ? *run - hide : 0;
    *run += (double)bytes / p->host_bps * 1e3;
    return (*run > hide ? *run - hide : 0) - before;
}

static remat_status cost_exec(void *arg, size_t i, const remat_instr *in, const remat_operands *o)
{
    costw *w = arg;
    const remat_profile *p = w->p;
    int k = in->kind, t = in->tid, l = in->layer;
    double x;
    if (k == REMAT_I_UPDATE) x = p->update_ms;
    else if (k == REMAT_I_FREE) x = 0;
    else if (k == REMAT_I_OFFLOAD || k == REMAT_I_RELOAD) {   /* p has a host link: remat_cost_schedule_times */
        if (w->prev != k) w->run = 0;
        x = transfer_ms(p, remat_tensor_bytes_at(w->c, t, l), k == REMAT_I_OFFLOAD ? w->hide_f : w->hide_b, &w->run);
    } else {
        int bw = k == REMAT_I_BACKWARD;
        double cold = bw ? p->bwd_ms[t] : p->fwd_ms[t], hot = bw ? p->bwd_hot_ms[t] : p->fwd_hot_ms[t];
        double f = 1;
        if (!w->model) {
            size_t mark = w->l1 != l ? w->b1 : w->b2;     /* latest backward of another block */
            uint64_t all = 0, warm = 0;
            for (int q = 0; q < o->nin; q++) {
                if (o->in_t[q] == RT_X) continue;       /* block inputs are left out of the share */
                int sl = o->in[q];
                uint64_t by = remat_tensor_bytes(w->c, o->in_t[q]);
                all += by;
                if (w->pidx[sl] != SIZE_MAX && (mark == SIZE_MAX || w->pidx[sl] > mark) &&
                    w->clk - w->pclk[sl] < p->cache_bytes)
                    warm += by;
            }
            f = all ? (double)warm / (double)all : 1;
        }
        x = cold - f * (cold - hot);
        /* a dense prefix's layer: its own op times (the device model's: no cache) */
        if (p->dense && remat_layer_dense(w->c, l))
            x = bw ? p->dense_bwd_ms[t] : p->dense_fwd_ms[t];
        /* a table read from a file whose blocks differ: each block's own time (no cache: its times are measured) */
        if (w->per_block && l >= 0 && remat_table_custom_layer_ms(w->c->table, t, l, bw, &cold))
            x = cold;
        if (!w->model) {
            if (bw) {
                for (int q = 0; q < o->nalloc; q++) w->clk += remat_tensor_bytes(w->c, o->alloc_t[q]);
                if (l != w->l1) { w->b2 = w->b1; w->l1 = l; }
                w->b1 = i;
            } else {
                w->pidx[o->out] = i;
                w->pclk[o->out] = w->clk;
                w->clk += remat_tensor_bytes(w->c, t);
            }
        }
    }
    /* what a training run executed: what it took there (calibrate.c); the
     * step's time outside its instructions rides on the update */
    double run = remat_profile_run_ms(p, k, k == REMAT_I_UPDATE ? 0 : t);
    if (run >= 0) x = run;
    if (k == REMAT_I_UPDATE) x += p->run_overhead_ms;
    if (w->ms) w->ms[i] = x;
    w->prev = k;
    w->total += x;
    if (k == REMAT_I_RECOMPUTE) w->rec += x;
    return REMAT_OK;
}

double remat_cost_schedule_times(const remat_profile *p, const remat_schedule *s, double *ms, double *recompute_ms)
{
    const remat_config *c = &s->cfg;
    int nslots = remat_table_nslots(s->tb, c->n_layer);
    if (remat_profile_check_offload(p, s)) return -1;   /* offloads without a host link */
    costw w;
    memset(&w, 0, sizeof w);
    w.p = p;
    w.c = c;
    w.ms = ms;
    w.model = p->cache_bytes == 0;
    int nk = 0;
    w.per_block = c->framework == REMAT_FRAMEWORK_TABLE && remat_table_custom_kinds(c->table, &nk) != NULL;
    w.b1 = w.b2 = SIZE_MAX;
    w.l1 = -3;
    w.prev = -1;
    for (int t = 0; t < s->tb->nblock; t++) {
        w.hide_f += p->fwd_ms[t];
        w.hide_b += p->bwd_ms[t];
    }
    w.pidx = remat_malloc(sizeof(size_t) * (size_t)nslots);
    w.pclk = remat_malloc(sizeof(uint64_t) * (size_t)nslots);
    if (!w.pidx || !w.pclk) {
        free(w.pidx);
        free(w.pclk);
        remat_fail(REMAT_ERR_NOMEM, "out of memory costing a schedule");
        return -1;
    }
    for (int i = 0; i < nslots; i++) w.pidx[i] = SIZE_MAX;
    remat_walk_hooks h = { .arg = &w, .exec = cost_exec };
    remat_status st = remat_walk(s, 0, &h, NULL);
    free(w.pidx);
    free(w.pclk);
    if (st) return -1;
    if (recompute_ms) *recompute_ms = w.rec;
    return w.total;
}

double remat_cost_schedule_ms(const remat_profile *p, const remat_schedule *s, double *recompute_ms)
{
    return remat_cost_schedule_times(p, s, NULL, recompute_ms);
}

remat_status remat_profile_check_offload(const remat_profile *p, const remat_schedule *s)
{
    if (!s->noffload || p->host_bps > 0) return REMAT_OK;
    return remat_fail(REMAT_ERR_INVALID, "policy '%.200s' offloads to the host, but remat's CPU engine keeps "
                      "activations in host memory (no host link): offload plans are for GPU runs (remat plan "
                      "--framework megatron ...)", remat_schedule_policy(s));
}
