/*
 * cost.c -- the planner's cost model: how long each op of a schedule takes.
 *
 * Two sources, one shape (struct remat_profile, planner.h):
 *   - measured (`remat profile`): every op of the activation table is timed
 *     in isolation on this machine with the real kernels -- one block's
 *     buffers and weights, the embedding and the LM head -- as the median of
 *     a few calls after a warm-up, each on cold caches, the reps of all ops
 *     interleaved (with one thread: CPU time, see op_clock_ms);
 *   - the FLOP/byte model: t = flops / throughput + bytes / bandwidth, with
 *     GEMMs (cblas_sgemm) and the other loops at different throughputs.
 * A schedule's time is the sum of its instructions' op times (frees cost
 * nothing) plus the per-step optimizer update.  Memory is never estimated
 * here: it comes from the simulator.
 *
 * Profile files are plain text, one "key value" per line, validated on load
 * as untrusted input (see parse_profile).  They are keyed by the config, the
 * CPU model and the thread count, and written atomically.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cblas.h>
#include "planner.h"
#include "../core/core.h"
#include "../core/rng.h"
#include "../kernels/kernels.h"

#define PROFILE_MAGIC "remat-profile"
#define PROFILE_VERSION 2
#define PROFILE_MAX_BYTES 65536
#define PROFILE_MAX_LINE 512
#define FLUSH_BYTES ((size_t)64 << 20)   /* written between timed calls: twice a 32 MiB L3 */

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

/* The clock ops are timed with: with one thread, the thread's CPU time --
 * what the wall time is on an idle machine, without the time other
 * processes take on a shared one; with several, the wall clock (CPU time
 * would add up the threads). */
static double op_clock_ms(int cpu)
{
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- machine identity ---------------------------------------------------- */

/* the last-level cache, from sysfs (32 MiB when it cannot be read) */
static uint64_t llc_bytes(void)
{
    uint64_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            unsigned long long v = strtoull(buf, &end, 10);
            if (*end == 'K') v <<= 10;
            else if (*end == 'M') v <<= 20;
            if (v > best && v < (1ULL << 34)) best = v;
        }
        fclose(f);
    }
    return best ? best : (uint64_t)32 << 20;
}

static void config_key(const remat_config *c, char *buf, size_t n)
{
    snprintf(buf, n, "%d %d %d %d %d %d %d %.9g %d %d", c->n_layer, c->n_embd, c->n_head, c->vocab, c->max_seq,
             c->batch, c->seq, (double)c->dropout, c->attention, c->lmhead_chunk);
}

static int config_equal(const remat_config *a, const remat_config *b)
{
    return a->n_layer == b->n_layer && a->n_embd == b->n_embd && a->n_head == b->n_head && a->vocab == b->vocab &&
           a->max_seq == b->max_seq && a->batch == b->batch && a->seq == b->seq && a->dropout == b->dropout &&
           a->attention == b->attention && a->lmhead_chunk == b->lmhead_chunk;
}

/* ---- the FLOP/byte model -------------------------------------------------- */

/* ops that run on sgemm: the linear layers, and the attention core (both
 * kernels are tiled sgemm calls between row-wise softmax passes) */
static int is_gemm(int t)
{
    return t == RT_QKV || t == RT_ATT || t == RT_ATTY || t == RT_RES2 || t == RT_FCH || t == RT_RES3 ||
           t == RT_LOGITS;
}

static double weight_bytes(const remat_config *c, int t)
{
    double C = c->n_embd;
    switch (t) {
    case RT_QKV: return 4.0 * 3 * C * C;
    case RT_RES2: return 4.0 * C * C;
    case RT_FCH: case RT_RES3: return 4.0 * 4 * C * C;
    case RT_LOGITS: return 4.0 * C * remat_config_padded_vocab(c);
    default: return 0;
    }
}

static double io_bytes(const remat_config *c, const int8_t *in)
{
    double b = 0;
    for (int i = 0; i < RT_MAXIO && in[i] != RT_NONE; i++)
        b += (double)remat_tensor_bytes(c, in[i] == RT_X ? RT_RES3 : in[i]);
    return b;
}

void remat_profile_fill_model(remat_profile *p, const remat_config *c, double gflops)
{
    memset(p, 0, sizeof *p);
    p->cfg = *c;
    p->measured = 0;
    p->gflops = gflops > 0 ? gflops : MODEL_GFLOPS;
    p->other_gflops = p->gflops * MODEL_OTHER_RATIO;
    p->gbps = MODEL_GBPS;
    p->threads = remat_get_threads();
    for (int t = 0; t < RT_FIRST_GRAD; t++) {
        const remat_tensor_def *d = &remat_tensor_defs[t];
        double g = (is_gemm(t) ? p->gflops : p->other_gflops) * 1e6;   /* FLOPs per ms */
        double bw = p->gbps * 1e6;                                      /* bytes per ms */
        double out = (double)remat_tensor_bytes(c, t), w = weight_bytes(c, t);
        p->fwd_ms[t] = remat_tensor_fwd_flops(c, t) / g + (out + io_bytes(c, d->fwd_in) + w) / bw;
        if (d->has_bwd)
            p->bwd_ms[t] = remat_tensor_bwd_flops(c, t) / g + (2 * out + io_bytes(c, d->bwd_in) + 3 * w) / bw;
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
    if (measure && !(g = sgemm_gflops(cfg) ) ) {
        free(p);
        return remat_fail(REMAT_ERR_NOMEM, "out of memory calibrating the FLOP model");
    }
    remat_profile_fill_model(p, cfg, g);
    *out = p;
    return REMAT_OK;
}

/* ---- measuring ops ----------------------------------------------------------- */

enum { W_WTE, W_WPE, W_LN1W, W_LN1B, W_QKVW, W_QKVB, W_PROJW, W_PROJB, W_LN2W, W_LN2B,
       W_FCW, W_FCB, W_FCPW, W_FCPB, W_LNFW, W_LNFB, W_COUNT };

typedef struct bench {
    const remat_config *c;
    int B, T, C, NH, N, Vp;
    float *a[RT_COUNT];          /* one block's activations, the head's, and the gradient buffers */
    float *w[W_COUNT], *g[W_COUNT];
    int *inp, *tgt;
    float *losses, *chunk;       /* chunk: the chunked LM head's logits */
    remat_dropout drop[4];
} bench;

static size_t w_numel(const remat_config *c, int i)
{
    size_t C = (size_t)c->n_embd, Vp = (size_t)remat_config_padded_vocab(c);
    switch (i) {
    case W_WTE: return Vp * C;
    case W_WPE: return (size_t)c->max_seq * C;
    case W_QKVW: return 3 * C * C;
    case W_QKVB: return 3 * C;
    case W_PROJW: return C * C;
    case W_FCW: case W_FCPW: return 4 * C * C;
    case W_FCB: return 4 * C;
    default: return C;
    }
}

static void bench_free(bench *b)
{
    for (int t = 0; t < RT_COUNT; t++) free(b->a[t]);
    for (int i = 0; i < W_COUNT; i++) { free(b->w[i]); free(b->g[i]); }
    free(b->inp); free(b->tgt); free(b->losses); free(b->chunk);
}

static float *falloc(size_t bytes)
{
    size_t r = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, r ? r : 64);
}

static void fwd_op(bench *b, int t)
{
    int N = b->N, C = b->C, T = b->T, B = b->B, NH = b->NH;
    float **a = b->a, **w = b->w;
    float *x = a[RT_EMB];            /* the block input (and the head's) */
    switch (t) {
    case RT_EMB: encoder_forward(a[RT_EMB], b->inp, w[W_WTE], w[W_WPE], B, T, C); break;
    case RT_LN1_STAT: layernorm_stats(a[t], x, N, C); break;
    case RT_LN1: layernorm_apply(a[t], x, a[RT_LN1_STAT], w[W_LN1W], w[W_LN1B], N, C); break;
    case RT_QKV: linear_forward(a[t], a[RT_LN1], w[W_QKVW], w[W_QKVB], N, C, 3 * C); break;
    case RT_ATT:
        if (b->c->attention == REMAT_ATTENTION_FLASH) flash_attention_stats(a[t], a[RT_QKV], B, T, C, NH);
        else attention_scores_forward(a[t], a[RT_QKV], B, T, C, NH);
        break;
    case RT_ATTY:
        if (b->c->attention == REMAT_ATTENTION_FLASH)
            flash_attention_values(a[t], a[RT_ATT], a[RT_QKV], &b->drop[REMAT_SITE_ATT], B, T, C, NH);
        else
            attention_values_forward(a[t], a[RT_ATT], a[RT_QKV], &b->drop[REMAT_SITE_ATT], B, T, C, NH);
        break;
    case RT_RES2:
        linear_forward(a[t], a[RT_ATTY], w[W_PROJW], w[W_PROJB], N, C, C);
        residual_forward(a[t], x, a[t], &b->drop[REMAT_SITE_RES_ATTN], (size_t)N * C);
        break;
    case RT_LN2_STAT: layernorm_stats(a[t], a[RT_RES2], N, C); break;
    case RT_LN2: layernorm_apply(a[t], a[RT_RES2], a[RT_LN2_STAT], w[W_LN2W], w[W_LN2B], N, C); break;
    case RT_FCH: linear_forward(a[t], a[RT_LN2], w[W_FCW], w[W_FCB], N, C, 4 * C); break;
    case RT_FCH_GELU: gelu_forward(a[t], a[RT_FCH], (size_t)N * 4 * C); break;
    case RT_RES3:
        linear_forward(a[t], a[RT_FCH_GELU], w[W_FCPW], w[W_FCPB], N, 4 * C, C);
        residual_forward(a[t], a[RT_RES2], a[t], &b->drop[REMAT_SITE_RES_MLP], (size_t)N * C);
        break;
    case RT_LNF_STAT: layernorm_stats(a[t], x, N, C); break;
    case RT_LNF: layernorm_apply(a[t], x, a[RT_LNF_STAT], w[W_LNFW], w[W_LNFB], N, C); break;
    case RT_LOGITS:
        if (b->c->lmhead_chunk > 0) {      /* logits, loss and d(lnf) chunk by chunk (model.c) */
            int rows = b->c->lmhead_chunk < N ? b->c->lmhead_chunk : N;
            for (int r0 = 0; r0 < N; r0 += rows) {
                int nr = N - r0 < rows ? N - r0 : rows;
                linear_forward(b->chunk, a[RT_LNF] + (size_t)r0 * C, w[W_WTE], NULL, nr, C, b->Vp);
                crossentropy_forward(b->losses + r0, b->chunk, b->tgt + r0, nr, b->c->vocab, b->Vp, 1.0f / (float)N);
                linear_backward(a[t] + (size_t)r0 * C, b->g[W_WTE], NULL, b->chunk, a[RT_LNF] + (size_t)r0 * C,
                                w[W_WTE], nr, C, b->Vp);
            }
            break;
        }
        linear_forward(a[t], a[RT_LNF], w[W_WTE], NULL, N, C, b->Vp);
        crossentropy_forward(b->losses, a[t], b->tgt, N, b->c->vocab, b->Vp, 1.0f / (float)N);
        break;
    }
}

static void bwd_op(bench *b, int t)
{
    int N = b->N, C = b->C, T = b->T, B = b->B, NH = b->NH;
    float **a = b->a, **w = b->w, **g = b->g, *dres = a[RT_D_RES], *src;
    size_t n = (size_t)N * C;
    float *x = a[RT_EMB];
    switch (t) {
    case RT_RES3:
        src = dres;
        if (b->drop[REMAT_SITE_RES_MLP].p > 0) {
            src = a[RT_D_BRANCH];
            residual_backward_branch(src, dres, &b->drop[REMAT_SITE_RES_MLP], n);
        }
        linear_backward(a[RT_D_FCH], g[W_FCPW], g[W_FCPB], src, a[RT_FCH_GELU], w[W_FCPW], N, 4 * C, C);
        break;
    case RT_FCH_GELU: gelu_backward(a[RT_D_FCH], a[RT_FCH], a[RT_D_FCH], (size_t)N * 4 * C); break;
    case RT_FCH: linear_backward(a[RT_D_LN2], g[W_FCW], g[W_FCB], a[RT_D_FCH], a[RT_LN2], w[W_FCW], N, C, 4 * C); break;
    case RT_LN2:
        layernorm_backward(dres, g[W_LN2W], g[W_LN2B], a[RT_D_LN2], a[RT_RES2], a[RT_LN2_STAT], w[W_LN2W], N, C);
        break;
    case RT_RES2:
        src = dres;
        if (b->drop[REMAT_SITE_RES_ATTN].p > 0) {
            src = a[RT_D_BRANCH];
            residual_backward_branch(src, dres, &b->drop[REMAT_SITE_RES_ATTN], n);
        }
        linear_backward(a[RT_D_ATTY], g[W_PROJW], g[W_PROJB], src, a[RT_ATTY], w[W_PROJW], N, C, C);
        break;
    case RT_ATTY:
        if (b->c->attention == REMAT_ATTENTION_FLASH)
            flash_attention_backward(a[RT_D_QKV], a[RT_D_ATTY], a[RT_ATT], a[RT_QKV], &b->drop[REMAT_SITE_ATT], B, T, C, NH);
        else
            attention_backward(a[RT_D_QKV], a[RT_D_ATTY], a[RT_ATT], a[RT_QKV], &b->drop[REMAT_SITE_ATT], B, T, C, NH);
        break;
    case RT_QKV: linear_backward(a[RT_D_LN1], g[W_QKVW], g[W_QKVB], a[RT_D_QKV], a[RT_LN1], w[W_QKVW], N, C, 3 * C); break;
    case RT_LN1:
        layernorm_backward(dres, g[W_LN1W], g[W_LN1B], a[RT_D_LN1], x, a[RT_LN1_STAT], w[W_LN1W], N, C);
        break;
    case RT_LOGITS:
        if (b->c->lmhead_chunk > 0) memcpy(a[RT_D_LNF], a[RT_LOGITS], (size_t)N * C * sizeof(float));
        else linear_backward(a[RT_D_LNF], g[W_WTE], NULL, a[RT_LOGITS], a[RT_LNF], w[W_WTE], N, C, b->Vp);
        break;
    case RT_LNF: layernorm_backward(dres, g[W_LNFW], g[W_LNFB], a[RT_D_LNF], x, a[RT_LNF_STAT], w[W_LNFW], N, C); break;
    case RT_EMB: encoder_backward(g[W_WTE], g[W_WPE], dres, b->inp, B, T, C); break;
    }
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* forward in table order, so every input holds sane values before timing */
static const int fwd_chain[] = { RT_EMB, RT_LN1_STAT, RT_LN1, RT_QKV, RT_ATT, RT_ATTY, RT_RES2, RT_LN2_STAT,
                                 RT_LN2, RT_FCH, RT_FCH_GELU, RT_RES3, RT_LNF_STAT, RT_LNF, RT_LOGITS };

remat_status remat_profile_measure(const remat_config *cfg, int reps, remat_profile **out)
{
    remat_status st;
    remat_profile *p = NULL;
    bench b;
    double *v = NULL;
    float *up[4] = { NULL, NULL, NULL, NULL };
    char *flush = NULL;
    memset(&b, 0, sizeof b);
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_profile_measure: out is NULL");
    *out = NULL;
    if ((st = remat_config_check(cfg))) return st;
    if (reps < 1 || reps > 1000) return remat_fail(REMAT_ERR_INVALID, "reps must be in [1, 1000], got %d", reps);
    p = remat_calloc(1, sizeof *p);
    v = remat_malloc(sizeof(double) * (size_t)reps);
    if (!p || !v) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    b.c = cfg;
    b.B = cfg->batch; b.T = cfg->seq; b.C = cfg->n_embd; b.NH = cfg->n_head; b.N = b.B * b.T;
    b.Vp = remat_config_padded_vocab(cfg);
    for (int t = 0; t < RT_COUNT; t++) {
        if (t == RT_D_BRANCH && cfg->dropout <= 0) continue;
        if (!(b.a[t] = falloc(remat_tensor_bytes(cfg, t)))) goto nomem;
        /* gradient buffers: small finite values (the kernels accumulate into some) */
        size_t ne = remat_tensor_bytes(cfg, t) / 4;
        for (size_t i = 0; i < ne; i++) b.a[t][i] = (float)((int)(i % 13) - 6) * 1e-3f;
    }
    for (int i = 0; i < W_COUNT; i++) {
        size_t ne = w_numel(cfg, i);
        if (!(b.w[i] = falloc(ne * 4)) || !(b.g[i] = falloc(ne * 4))) goto nomem;
        uint64_t key = remat_rng_key(7, 0, (uint32_t)i, 0);
        for (size_t k = 0; k < ne; k++) { b.w[i][k] = 0.02f * (remat_rng_uniform(key, k) - 0.5f); b.g[i][k] = 0; }
        if (i == W_LN1W || i == W_LN2W || i == W_LNFW) for (size_t k = 0; k < ne; k++) b.w[i][k] = 1.0f;
    }
    if (!(b.inp = remat_malloc(sizeof(int) * (size_t)b.N)) || !(b.tgt = remat_malloc(sizeof(int) * (size_t)b.N)) ||
        !(b.losses = remat_malloc(sizeof(float) * (size_t)b.N)))
        goto nomem;
    if (cfg->lmhead_chunk > 0 && !(b.chunk = falloc(remat_tensor_fwd_temp_bytes(cfg, RT_LOGITS)))) goto nomem;
    for (int i = 0; i < b.N; i++) { b.inp[i] = (int)((i * 7u) % (unsigned)cfg->vocab); b.tgt[i] = (int)((i * 13u + 1) % (unsigned)cfg->vocab); }
    for (int s = 0; s < 4; s++) b.drop[s] = remat_dropout_make(cfg->dropout, remat_rng_key(1, 0, 0, (uint32_t)s));

    for (size_t k = 0; k < sizeof fwd_chain / sizeof fwd_chain[0]; k++) fwd_op(&b, fwd_chain[k]);
    p->cfg = *cfg;
    p->measured = 1;
    p->threads = remat_get_threads();
    int cpu = p->threads == 1;
    remat_machine_cpu(p->cpu, sizeof p->cpu);
    /* Reps are interleaved over the ops (rep r of every op, then rep r+1),
     * so that a burst of load on a shared machine hits all ops alike; and
     * before each timed call the caches are flushed, as in a real step an
     * op's inputs were written several ops (and many MiB) earlier. */
    size_t per = (size_t)reps * 2 * RT_FIRST_GRAD;
    double *all = remat_malloc(sizeof(double) * per * 2);   /* [hot][t][bw][rep] */
    flush = remat_malloc(FLUSH_BYTES);
    if (!all || !flush) { free(all); goto nomem; }
    for (int r = -1; r < reps; r++)
        for (int t = 0; t < RT_FIRST_GRAD; t++)
            for (int bw = 0; bw < 2; bw++) {
                if (bw && !remat_tensor_defs[t].has_bwd) continue;
                memset(flush, r & 0xff, FLUSH_BYTES);
                for (int hot = 0; hot < 2; hot++) {   /* cold caches, then at once again: inputs in cache */
                    double t0 = op_clock_ms(cpu);
                    if (bw) bwd_op(&b, t); else fwd_op(&b, t);
                    double dt = op_clock_ms(cpu) - t0;
                    if (r >= 0) all[(size_t)hot * per + ((size_t)t * 2 + (size_t)bw) * (size_t)reps + (size_t)r] = dt;
                    if (bw && (t == RT_LN1 || t == RT_LN2 || t == RT_LNF))
                        for (size_t i = 0; i < (size_t)b.N * b.C; i++) b.a[RT_D_RES][i] *= 0.5f;   /* keep += bounded */
                }
            }
    for (int hot = 0; hot < 2; hot++)
        for (int t = 0; t < RT_FIRST_GRAD; t++)
            for (int bw = 0; bw < 2; bw++) {
                if (bw && !remat_tensor_defs[t].has_bwd) continue;
                memcpy(v, all + (size_t)hot * per + ((size_t)t * 2 + (size_t)bw) * (size_t)reps, sizeof(double) * (size_t)reps);
                double m = median(v, reps);
                if (hot) (bw ? p->bwd_hot_ms : p->fwd_hot_ms)[t] = m;
                else (bw ? p->bwd_ms : p->fwd_ms)[t] = m;
            }
    /* a warm call is never slower than a cold one; where noise says so, the
     * difference is noise */
    for (int t = 0; t < RT_FIRST_GRAD; t++) {
        if (p->fwd_hot_ms[t] > p->fwd_ms[t]) p->fwd_hot_ms[t] = p->fwd_ms[t];
        if (p->bwd_hot_ms[t] > p->bwd_ms[t]) p->bwd_hot_ms[t] = p->bwd_ms[t];
    }
    p->cache_bytes = llc_bytes();
    free(all);
    /* the update: zero grads, global norm, AdamW; timed on up to 4M
     * parameters and scaled (it streams memory linearly) */
    {
        size_t np = (size_t)remat_config_num_params(cfg), n = np < ((size_t)1 << 22) ? np : ((size_t)1 << 22);
        for (int i = 0; i < 4; i++) if (!(up[i] = falloc(n * 4))) goto nomem;
        for (size_t i = 0; i < n; i++) { up[0][i] = 0.01f; up[1][i] = 1e-3f; up[2][i] = 0; up[3][i] = 0; }
        for (int r = -1; r < reps; r++) {
            double t0 = op_clock_ms(cpu);
            memset(up[1], 0, n * 4);
            for (size_t i = 0; i < n; i += 4096) up[1][i] = 1e-3f;
            double norm = sqrt(sumsq(up[1], n));
            adamw_update(up[0], up[1], up[2], up[3], n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1,
                         norm > 1 ? (float)(1 / norm) : 1.0f, r + 2);
            if (r >= 0) v[r] = (op_clock_ms(cpu) - t0) * ((double)np / (double)n);
        }
        p->update_ms = median(v, reps);
    }
    snprintf(p->desc, sizeof p->desc, "measured on %s, %d thread%s (%d reps, median of %s time)", p->cpu, p->threads,
             p->threads == 1 ? "" : "s", reps, cpu ? "CPU" : "wall");
    *out = p;
    p = NULL;
    st = REMAT_OK;
    goto out;
nomem:
    st = remat_fail(REMAT_ERR_NOMEM, "out of memory allocating the buffers to profile (one block, the "
                    "embedding and the LM head)");
out:
    bench_free(&b);
    free(flush);
    for (int i = 0; i < 4; i++) free(up[i]);
    free(v);
    free(p);
    return st;
}

/* ---- save, load, cache path ------------------------------------------------ */

static int mkdirs(const char *path)   /* mkdir -p of path's parent; 0 on success */
{
    char buf[4096];
    if (strlen(path) >= sizeof buf) return -1;
    strcpy(buf, path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf) return 0;
    *slash = 0;
    for (char *c = buf + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        *c = '/';
    }
    if (mkdir(buf, 0755) && errno != EEXIST) return -1;
    return 0;
}

static int write_profile(FILE *f, const remat_profile *p)
{
    char key[256];
    config_key(&p->cfg, key, sizeof key);
    fprintf(f, "%s %d\n", PROFILE_MAGIC, PROFILE_VERSION);
    fprintf(f, "measured %d\n", p->measured);
    fprintf(f, "cpu %s\n", p->cpu[0] ? p->cpu : "unknown");
    fprintf(f, "threads %d\n", p->threads);
    fprintf(f, "config %s\n", key);
    fprintf(f, "update %.9g\n", p->update_ms);
    fprintf(f, "cache %llu\n", (unsigned long long)p->cache_bytes);
    for (int t = 0; t < RT_FIRST_GRAD; t++) {
        const char *nm = remat_tensor_defs[t].name;
        fprintf(f, "fwd %s %.9g\nfwdhot %s %.9g\n", nm, p->fwd_ms[t], nm, p->fwd_hot_ms[t]);
        if (remat_tensor_defs[t].has_bwd) fprintf(f, "bwd %s %.9g\nbwdhot %s %.9g\n", nm, p->bwd_ms[t], nm, p->bwd_hot_ms[t]);
    }
    return fprintf(f, "end\n") < 0 ? -1 : 0;
}

remat_status remat_profile_save(const remat_profile *p, const char *path)
{
    if (!p || !path || !*path) return remat_fail(REMAT_ERR_INVALID, "remat_profile_save: NULL argument");
    size_t len = strlen(path);
    if (len > 4000) return remat_fail(REMAT_ERR_RANGE, "profile path too long");
    if (mkdirs(path)) return remat_fail(REMAT_ERR_IO, "cannot create the directory of %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", path);
    int bad = write_profile(f, p);
    if (fclose(f) || bad) { free(buf); return remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", path); }
    remat_status st = remat_write_file_atomic(path, buf, n);   /* path.tmp.PID, fsync, rename */
    free(buf);
    return st;
}

/* strict number: the whole token, finite, in [lo, hi] */
static int num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    if (!*s) return 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v) || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static remat_status parse_profile(const char *path, const char *text, size_t len, remat_profile *p)
{
    int line_no = 0, seen_end = 0, have[7] = { 0 };
    uint8_t seen[4][RT_COUNT] = { { 0 } };      /* fwd, bwd, fwdhot, bwdhot */
    char key[256] = "";
    const char *c = text, *e = text + len;
    memset(p, 0, sizeof *p);
#define BAD(...) do { char m_[1100]; snprintf(m_, sizeof m_, __VA_ARGS__); \
        return remat_fail(REMAT_ERR_FORMAT, "profile %s line %d: %s", path, line_no, m_); } while (0)
    while (c < e) {
        const char *nl = memchr(c, '\n', (size_t)(e - c));
        size_t n = nl ? (size_t)(nl - c) : (size_t)(e - c);
        line_no++;
        if (!nl) BAD("no newline at the end of the file (truncated?)");
        if (n >= PROFILE_MAX_LINE) BAD("line longer than %d bytes", PROFILE_MAX_LINE);
        char line[PROFILE_MAX_LINE];
        memcpy(line, c, n);
        line[n] = 0;
        c = nl + 1;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)line[i] < 32 || (unsigned char)line[i] > 126) BAD("non-printable byte 0x%02x", (unsigned char)line[i]);
        if (seen_end) BAD("text after 'end'");
        char *sp = strchr(line, ' ');
        char *val = sp ? sp + 1 : line + n;
        if (sp) *sp = 0;
        double d;
        if (line_no == 1) {
            if (strcmp(line, PROFILE_MAGIC)) BAD("not a remat profile (expected '%s %d')", PROFILE_MAGIC, PROFILE_VERSION);
            if (!num(val, 0, 1e6, &d) || d != PROFILE_VERSION) BAD("unsupported profile version '%s' (expected %d)", val, PROFILE_VERSION);
            have[0] = 1;
        } else if (!strcmp(line, "measured")) {
            if (have[1]++ || !num(val, 0, 1, &d) || (d != 0 && d != 1)) BAD("bad or repeated 'measured'");
            p->measured = (int)d;
        } else if (!strcmp(line, "cpu")) {
            if (have[2]++ || !*val || strlen(val) >= sizeof p->cpu) BAD("bad or repeated 'cpu'");
            snprintf(p->cpu, sizeof p->cpu, "%s", val);
        } else if (!strcmp(line, "threads")) {
            if (have[3]++ || !num(val, 1, 4096, &d) || d != floor(d)) BAD("bad or repeated 'threads'");
            p->threads = (int)d;
        } else if (!strcmp(line, "config")) {
            if (have[4]++ || strlen(val) >= sizeof key) BAD("bad or repeated 'config'");
            snprintf(key, sizeof key, "%s", val);
        } else if (!strcmp(line, "update")) {
            if (have[5]++ || !num(val, 0, 1e9, &d)) BAD("bad or repeated 'update' time");
            p->update_ms = d;
        } else if (!strcmp(line, "cache")) {
            if (have[6]++ || !num(val, 0, 1e15, &d) || d != floor(d)) BAD("bad or repeated 'cache' (bytes)");
            p->cache_bytes = (uint64_t)d;
        } else if (!strcmp(line, "fwd") || !strcmp(line, "bwd") || !strcmp(line, "fwdhot") || !strcmp(line, "bwdhot")) {
            int bw = line[0] == 'b', hot = line[3] == 'h', k = bw + 2 * hot;
            char *sp2 = strchr(val, ' ');
            if (!sp2) BAD("expected '%s NAME MS'", line);
            *sp2 = 0;
            int t = remat_tensor_find(val);
            if (t < 0 || t >= RT_FIRST_GRAD || (bw && !remat_tensor_defs[t].has_bwd)) BAD("unknown op '%s %s'", line, val);
            if (seen[k][t]++) BAD("repeated '%s %s'", line, val);
            if (!num(sp2 + 1, 0, 1e9, &d)) BAD("bad time '%s' for %s %s (milliseconds, >= 0)", sp2 + 1, line, val);
            double *dst[4] = { p->fwd_ms, p->bwd_ms, p->fwd_hot_ms, p->bwd_hot_ms };
            dst[k][t] = d;
        } else if (!strcmp(line, "end") && !sp) {
            seen_end = 1;
        } else {
            BAD("unknown key '%s'", line);
        }
    }
    line_no++;
    if (!have[0]) BAD("empty file");
    if (!seen_end) BAD("missing 'end' (truncated?)");
    for (int i = 1; i < 7; i++) if (!have[i]) BAD("missing a required key (measured, cpu, threads, config, update, cache)");
    for (int t = 0; t < RT_FIRST_GRAD; t++)
        for (int k = 0; k < 4; k++)
            if (!seen[k][t] && (!(k & 1) || remat_tensor_defs[t].has_bwd))
                BAD("missing the %s time of %s's %s", k & 2 ? "warm" : "cold", remat_tensor_defs[t].name,
                    k & 1 ? "backward" : "forward");
    for (int t = 0; t < RT_FIRST_GRAD; t++)
        if (p->fwd_hot_ms[t] > p->fwd_ms[t] || p->bwd_hot_ms[t] > p->bwd_ms[t])
            BAD("the warm time of %s exceeds its cold time", remat_tensor_defs[t].name);
    /* the config, as text; compared with the caller's by remat_profile_load */
    snprintf(p->desc, sizeof p->desc, "%s", key);
#undef BAD
    return REMAT_OK;
}

remat_status remat_profile_load(const remat_config *cfg, const char *path, remat_profile **out)
{
    remat_status st;
    char *text = NULL;
    remat_profile *p = NULL;
    FILE *f = NULL;
    if (!out || !path) return remat_fail(REMAT_ERR_INVALID, "remat_profile_load: NULL argument");
    *out = NULL;
    if ((st = remat_config_check(cfg))) return st;
    if (!(f = fopen(path, "rb"))) return remat_fail(REMAT_ERR_IO, "cannot open profile %s: %s", path, strerror(errno));
    text = remat_malloc(PROFILE_MAX_BYTES + 1);
    p = remat_malloc(sizeof *p);
    if (!text || !p) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    size_t len = fread(text, 1, PROFILE_MAX_BYTES + 1, f);
    if (ferror(f)) { st = remat_fail(REMAT_ERR_IO, "cannot read profile %s", path); goto out; }
    if (len > PROFILE_MAX_BYTES) { st = remat_fail(REMAT_ERR_FORMAT, "profile %s is larger than %d bytes", path, PROFILE_MAX_BYTES); goto out; }
    if ((st = parse_profile(path, text, len, p))) goto out;
    char want[256], cpu[128];
    config_key(cfg, want, sizeof want);
    remat_machine_cpu(cpu, sizeof cpu);
    if (strcmp(p->desc, want)) {
        st = remat_fail(REMAT_ERR_INVALID, "profile %s is for config '%s', not '%s' (layers dim heads vocab "
                        "max_seq batch seq dropout attention lmhead-chunk); run 'remat profile' for this config", path, p->desc, want);
        goto out;
    }
    if (p->measured && (strcmp(p->cpu, cpu) || p->threads != remat_get_threads())) {
        st = remat_fail(REMAT_ERR_INVALID, "profile %s was measured on '%s' with %d threads, this is '%s' with %d; "
                        "run 'remat profile' here", path, p->cpu, p->threads, cpu, remat_get_threads());
        goto out;
    }
    p->cfg = *cfg;
    if (p->measured)
        snprintf(p->desc, sizeof p->desc, "measured on %s, %d threads (%s)", p->cpu, p->threads, path);
    else
        snprintf(p->desc, sizeof p->desc, "saved model times (%s)", path);
    *out = p;
    p = NULL;
out:
    if (f) fclose(f);
    free(text);
    free(p);
    return st;
}

void remat_profile_free(remat_profile *p) { free(p); }

remat_status remat_profile_default_path(const remat_config *cfg, char *buf, size_t n)
{
    remat_status st;
    if (!buf || n == 0) return remat_fail(REMAT_ERR_INVALID, "remat_profile_default_path: NULL buffer");
    buf[0] = 0;
    if ((st = remat_config_check(cfg))) return st;
    char key[512], cpu[128];
    config_key(cfg, key, 256);
    remat_machine_cpu(cpu, sizeof cpu);
    size_t k = strlen(key);
    snprintf(key + k, sizeof key - k, "|%s|%d", cpu, remat_get_threads());
    uint64_t h = remat_hash_bytes(key, strlen(key));
    const char *dir = getenv("REMAT_CACHE"), *home = getenv("HOME");
    int w;
    if (dir && *dir) w = snprintf(buf, n, "%s/profile-%016llx.txt", dir, (unsigned long long)h);
    else if (home && *home) w = snprintf(buf, n, "%s/.cache/remat/profile-%016llx.txt", home, (unsigned long long)h);
    else return remat_fail(REMAT_ERR_INVALID, "neither REMAT_CACHE nor HOME is set; pass a profile path");
    if (w < 0 || (size_t)w >= n) { buf[0] = 0; return remat_fail(REMAT_ERR_RANGE, "profile path too long"); }
    return REMAT_OK;
}

double remat_profile_op_ms(const remat_profile *p, int id, int backward)
{
    if (!p) return 0;
    if (id == -1) return p->update_ms;
    if (id < 0 || id >= RT_FIRST_GRAD) return 0;
    return backward ? p->bwd_ms[id] : p->fwd_ms[id];
}

double remat_profile_op_warm_ms(const remat_profile *p, int id, int backward)
{
    if (!p) return 0;
    if (id == -1) return p->update_ms;
    if (id < 0 || id >= RT_FIRST_GRAD) return 0;
    return backward ? p->bwd_hot_ms[id] : p->fwd_hot_ms[id];
}

const char *remat_profile_describe(const remat_profile *p) { return p ? p->desc : ""; }

/* ---- costing schedules ------------------------------------------------------ */

double remat_cost_schedule_times(const remat_profile *p, const remat_schedule *s, double *ms, double *recompute_ms)
{
    const remat_config *c = &s->cfg;
    int L = c->n_layer, nslots = remat_nslots(L);
    double total = 0, rec = 0;
    /* per slot: index and byte clock of its latest production (SIZE_MAX: none) */
    size_t *pidx = remat_malloc(sizeof(size_t) * (size_t)nslots);
    uint64_t *pclk = remat_malloc(sizeof(uint64_t) * (size_t)nslots);
    if (!pidx || !pclk) {
        free(pidx);
        free(pclk);
        remat_fail(REMAT_ERR_NOMEM, "out of memory costing a schedule");
        return -1;
    }
    int model = p->cache_bytes == 0;   /* no cache: cold times only */
    if (!model)
        for (int i = 0; i < nslots; i++) pidx[i] = SIZE_MAX;
    uint64_t clk = 0;
    size_t b1 = SIZE_MAX, b2 = SIZE_MAX;   /* latest backward; latest of another layer than b1's */
    int l1 = -3;
    for (size_t i = 0; i < s->n; i++) {
        const remat_instr *in = &s->ins[i];
        int k = in->kind, t = in->tid, l = in->layer;
        double x = 0;
        if (k == REMAT_I_UPDATE) x = p->update_ms;
        else if (k != REMAT_I_FREE) {
            int bw = k == REMAT_I_BACKWARD;
            double cold = bw ? p->bwd_ms[t] : p->fwd_ms[t], hot = bw ? p->bwd_hot_ms[t] : p->fwd_hot_ms[t];
            double f = 1;
            if (!model) {
                size_t mark = l1 != l ? b1 : b2;     /* latest backward of another block */
                const int8_t *ins = bw ? remat_tensor_defs[t].bwd_in : remat_tensor_defs[t].fwd_in;
                uint64_t all = 0, warm = 0;
                for (int q = 0; q < RT_MAXIO && ins[q] != RT_NONE; q++) {
                    if (ins[q] == RT_X) continue;
                    int sl = remat_islot(c, remat_tensor_defs[ins[q]].per_layer ? l : -1, ins[q]);
                    uint64_t by = remat_tensor_bytes(c, ins[q]);
                    all += by;
                    if (pidx[sl] != SIZE_MAX && (mark == SIZE_MAX || pidx[sl] > mark) && clk - pclk[sl] < p->cache_bytes)
                        warm += by;
                }
                f = all ? (double)warm / (double)all : 1;
            }
            x = cold - f * (cold - hot);
            if (!model) {
                if (bw) {
                    int a[2], fr[2], na, nf;
                    remat_bwd_effects(c, t, a, &na, fr, &nf);
                    for (int q = 0; q < na; q++) clk += remat_tensor_bytes(c, a[q]);
                    if (l != l1) { b2 = b1; l1 = l; }
                    b1 = i;
                } else {
                    int sl = remat_islot(c, l, t);
                    pidx[sl] = i;
                    pclk[sl] = clk;
                    clk += remat_tensor_bytes(c, t);
                }
            }
        }
        if (ms) ms[i] = x;
        total += x;
        if (k == REMAT_I_RECOMPUTE) rec += x;
    }
    free(pidx);
    free(pclk);
    if (recompute_ms) *recompute_ms = rec;
    return total;
}

double remat_cost_schedule_ms(const remat_profile *p, const remat_schedule *s, double *recompute_ms)
{
    return remat_cost_schedule_times(p, s, NULL, recompute_ms);
}

const remat_profile *remat_profile_resolve(const remat_config *cfg, const remat_profile *prof, remat_profile *tmp)
{
    if (!prof) {
        remat_profile_fill_model(tmp, cfg, 0);
        return tmp;
    }
    if (!config_equal(&prof->cfg, cfg)) {
        char a[256], b[256];
        config_key(&prof->cfg, a, sizeof a);
        config_key(cfg, b, sizeof b);
        remat_fail(REMAT_ERR_INVALID, "the profile is for config '%s', not '%s'", a, b);
        return NULL;
    }
    return prof;
}
