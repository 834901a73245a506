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
 * of the one walker (schedule/walk.c).  A profile calibrated by a training
 * run (calibrate.c) prices each instruction the run executed at what it
 * took there instead.  Memory is never estimated here: it comes from the
 * simulator.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#include "planner.h"
#include "../core/core.h"

/* Throughputs of the default model (no measurement).  Measured on a 2-core
 * AMD EPYC with OpenBLAS, 2 threads: a 1024^3 SGEMM 124-174 GFLOP/s (the
 * model's GEMMs, attention included, run at 80-90% of it); AdamW streams
 * its 28 bytes per parameter at ~28 GB/s (`remat profile`: 126 ms for 124M
 * parameters); LayerNorm, GELU and the softmaxes are counted at a tenth of
 * the GEMM rate. */
#define MODEL_GFLOPS 150.0
#define MODEL_OTHER_RATIO 0.1
#define MODEL_GBPS 25.0

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void remat_profile_config_key(const remat_config *c, char *buf, size_t n)
{
    snprintf(buf, n, "%d %d %d %d %d %d %d %.9g %d %d %d", c->n_layer, c->n_embd, c->n_head, c->vocab, c->max_seq,
             c->batch, c->seq, (double)c->dropout, c->attention, c->lmhead_chunk, (int)c->dtype);
}

int remat_profile_config_equal(const remat_config *a, const remat_config *b)
{
    return remat_config_same(a, b);
}

/* ---- the FLOP/byte model -------------------------------------------------- */

static double weight_bytes(const remat_config *c, const remat_tensor_def *d)
{
    double C = c->n_embd;
    return 4.0 * (d->wc * C * C + d->wv * C * remat_config_padded_vocab(c));
}

static double io_bytes(const remat_config *c, const remat_table *tb, const int8_t *in)
{
    double b = 0;
    for (int i = 0; i < RT_MAXIO && in[i] != RT_NONE; i++)
        b += (double)remat_tensor_bytes(c, in[i] == RT_X ? tb->nblock - 1 : in[i]);
    return b;
}

void remat_profile_fill_model(remat_profile *p, const remat_config *c, double gflops)
{
    const remat_table *tb = remat_table_of(c);
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    p->measured = 0;
    p->gflops = gflops > 0 ? gflops : MODEL_GFLOPS;
    p->other_gflops = p->gflops * MODEL_OTHER_RATIO;
    p->gbps = MODEL_GBPS;
    p->threads = remat_get_threads();
    for (int t = 0; t < tb->first_grad; t++) {
        const remat_tensor_def *d = &tb->defs[t];
        double g = ((d->flags & RT_F_GEMM) ? p->gflops : p->other_gflops) * 1e6;   /* FLOPs per ms */
        double bw = p->gbps * 1e6;                                                  /* bytes per ms */
        double out = (double)remat_tensor_bytes(c, t), w = weight_bytes(c, d);
        p->fwd_ms[t] = remat_tensor_fwd_flops(c, t) / g + (out + io_bytes(c, tb, d->fwd_in) + w) / bw;
        if (d->has_bwd)
            p->bwd_ms[t] = remat_tensor_bwd_flops(c, t) / g + (2 * out + io_bytes(c, tb, d->bwd_in) + 3 * w) / bw;
    }
    memcpy(p->fwd_hot_ms, p->fwd_ms, sizeof p->fwd_ms);   /* no cache in the model */
    memcpy(p->bwd_hot_ms, p->bwd_ms, sizeof p->bwd_ms);
    p->cache_bytes = 0;
    double np = (double)remat_config_num_params(c);
    p->update_ms = remat_update_flops(c) / (p->other_gflops * 1e6) + 36.0 * np / (p->gbps * 1e6);
    snprintf(p->desc, sizeof p->desc, "FLOP model: %.1f GFLOP/s GEMM, %.1f GFLOP/s other, %.1f GB/s%s",
             p->gflops, p->other_gflops, p->gbps, gflops > 0 ? " (GEMM calibrated by one SGEMM)" : " (defaults)");
}

/* GFLOP/s of one SGEMM shaped like the model's MLP (N x 4C x C). */
static double sgemm_gflops(const remat_config *c)
{
    int N = c->batch * c->seq, C = c->n_embd;
    if (N > 4096) N = 4096;
    if (C > 2048) C = 2048;
    if (N < 64) N = 64;
    if (C < 64) C = 64;
    float *a = remat_malloc(sizeof(float) * (size_t)N * C), *b = remat_malloc(sizeof(float) * (size_t)4 * C * C),
          *o = remat_malloc(sizeof(float) * (size_t)N * 4 * C);
    double best = 0;
    if (a && b && o) {
        for (size_t i = 0; i < (size_t)N * C; i++) a[i] = (float)((i % 7) - 3) * 0.01f;
        for (size_t i = 0; i < (size_t)4 * C * C; i++) b[i] = (float)((i % 5) - 2) * 0.01f;
        for (int r = 0; r < 4; r++) {
            double t0 = now_ms();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, 4 * C, C, 1.0f, a, C, b, C, 0.0f, o, 4 * C);
            double ms = now_ms() - t0;
            double g = 2.0 * N * C * 4.0 * C / (ms * 1e6);
            if (r > 0 && g > best) best = g;
        }
    }
    free(a); free(b); free(o);
    return best;
}

remat_status remat_profile_model(const remat_config *cfg, int measure, remat_profile **out)
{
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_profile_model: out is NULL");
    *out = NULL;
    remat_status st = remat_config_check(cfg);
    if (st) return st;
    remat_profile *p = remat_malloc(sizeof *p);
    if (!p) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    double g = 0;
    if (measure && !(g = sgemm_gflops(cfg))) {
        free(p);
        return remat_fail(REMAT_ERR_NOMEM, "out of memory calibrating the FLOP model");
    }
    remat_profile_fill_model(p, cfg, g);
    *out = p;
    return REMAT_OK;
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

const char *remat_profile_describe(const remat_profile *p) { return p ? p->desc : ""; }

const remat_profile *remat_profile_resolve(const remat_config *cfg, const remat_profile *prof, remat_profile *tmp)
{
    if (!prof) {
        remat_profile_fill_model(tmp, cfg, 0);
        return tmp;
    }
    if (!remat_profile_config_equal(&prof->cfg, cfg)) {
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
    size_t *pidx;              /* per slot: index of its latest production (SIZE_MAX: none) */
    uint64_t *pclk;            /* per slot: the byte clock then */
    uint64_t clk;              /* bytes produced so far */
    size_t b1, b2;             /* latest backward; latest of another block than b1's */
    int l1;
    double total, rec, *ms;
} costw;

static remat_status cost_exec(void *arg, size_t i, const remat_instr *in, const remat_operands *o)
{
    costw *w = arg;
    const remat_profile *p = w->p;
    int k = in->kind, t = in->tid, l = in->layer;
    double x;
    if (k == REMAT_I_UPDATE) x = p->update_ms;
    else if (k == REMAT_I_FREE) x = 0;
    else {
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
    w->total += x;
    if (k == REMAT_I_RECOMPUTE) w->rec += x;
    return REMAT_OK;
}

double remat_cost_schedule_times(const remat_profile *p, const remat_schedule *s, double *ms, double *recompute_ms)
{
    const remat_config *c = &s->cfg;
    int nslots = remat_nslots_t(s->tb, c->n_layer);
    costw w;
    memset(&w, 0, sizeof w);
    w.p = p;
    w.c = c;
    w.ms = ms;
    w.model = p->cache_bytes == 0;
    w.b1 = w.b2 = SIZE_MAX;
    w.l1 = -3;
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
