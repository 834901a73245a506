/*
 * calibrate.c -- the cost model calibrated by measurement of this run's
 * own kind: a training run's instruction times (remat_profile_apply_run),
 * and, with neither a profile nor a run, a GEMM probe at the config's own
 * shapes, cut down past a size, for the FLOP model (remat_gemm_probe),
 * and remat_profile_model, the profile a config's probe (or the model's
 * defaults) gives.  This file is above cost.c: it fills profiles, and
 * cost.c prices schedules with them and reads their run times.
 *
 * Why a run beats a profile for what it executed: `remat profile` times
 * each op alone, with its inputs flushed from cache or just computed, on
 * buffers allocated once.  A training step runs the same ops back to back,
 * allocates each activation and gradient buffer as it goes (zero-filled
 * where the table says so), and pays between instructions for what no op
 * owns: copying the batch in, releasing the step's buffers.  The trace of
 * a step measures all of it, per instruction kind and tensor, and the
 * step's remainder as one overhead.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "planner.h"
#include "../core/core.h"
#include "../kernels/attn_tiles.h"
#include "../kernels/gemm.h"
#include "../kernels/kernels.h"

remat_status remat_profile_apply_run(remat_profile *p, const remat_run_times *rt)
{
    char cpu[128];
    if (!p || !rt) return remat_fail(REMAT_ERR_INVALID, "calibrate: NULL argument");
    if (!remat_config_same(&p->cfg, &rt->cfg)) {
        char a[256], b[256];
        remat_profile_config_key(&rt->cfg, a, sizeof a);
        remat_profile_config_key(&p->cfg, b, sizeof b);
        return remat_fail(REMAT_ERR_INVALID, "the run is of config '%s', not '%s' (layers dim heads vocab max_seq batch "
                          "seq dropout attention lmhead-chunk dtype)", a, b);
    }
    remat_machine_cpu(cpu, sizeof cpu);
    if (strcmp(rt->cpu, cpu) || rt->threads != remat_get_threads())
        return remat_fail(REMAT_ERR_INVALID, "the run was on '%s' with %d threads, this is '%s' with %d; its times "
                          "do not apply here", rt->cpu, rt->threads, cpu, remat_get_threads());
    if (p->measured && (strcmp(p->cpu, cpu) || p->threads != rt->threads))
        return remat_fail(REMAT_ERR_INVALID, "the profile was measured on '%s' with %d threads, the run on '%s' with %d",
                          p->cpu, p->threads, rt->cpu, rt->threads);
    const remat_table *tb = remat_table_of(&p->cfg);
    int n = 0;
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++) {
            if (!rt->n[k][t]) continue;
            int exists = k == REMAT_I_UPDATE ? t == 0 : t < tb->first_grad && (k != REMAT_I_BACKWARD || tb->defs[t].has_bwd);
            if (!exists || !isfinite(rt->ms[k][t]) || rt->ms[k][t] < 0)
                return remat_fail(REMAT_ERR_INVALID, "calibrate: no instruction '%d' of tensor %d in this table", k, t);
        }
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++)
            if (rt->n[k][t]) {
                p->run_ms[k][t] = rt->ms[k][t];
                p->run_n[k][t] = rt->n[k][t];
                n++;
            }
    if (rt->n_overhead) {
        p->run_overhead_ms = rt->overhead_ms;
        p->run_overhead_n = rt->n_overhead;
    }
    snprintf(p->cpu, sizeof p->cpu, "%s", rt->cpu);
    p->threads = rt->threads;
    size_t len = strlen(p->desc);
    const char *tail = "; run times from a training step";
    if (n && !strstr(p->desc, tail) && len + strlen(tail) < sizeof p->desc) strcat(p->desc, tail);
    return REMAT_OK;
}

int remat_profile_run_ops(const remat_profile *p)
{
    int n = 0;
    if (!p) return 0;
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++) n += p->run_n[k][t] > 0;
    return n;
}

remat_status remat_profile_copy_run(remat_profile *dst, const remat_profile *src)
{
    if (!dst || !src) return remat_fail(REMAT_ERR_INVALID, "remat_profile_copy_run: NULL argument");
    if (!remat_config_same(&dst->cfg, &src->cfg))
        return remat_fail(REMAT_ERR_INVALID, "remat_profile_copy_run: the profiles are of different configs");
    memcpy(dst->run_ms, src->run_ms, sizeof dst->run_ms);
    memcpy(dst->run_n, src->run_n, sizeof dst->run_n);
    dst->run_overhead_ms = src->run_overhead_ms;
    dst->run_overhead_n = src->run_overhead_n;
    return REMAT_OK;
}

/* ---- the GEMM probe ---------------------------------------------------------
 * With neither a profile nor a run, the FLOP model's speeds come from a
 * probe of well under a second: every matrix product the config's linear
 * layers and LM head run, at its own shape (M, N, K, transposes, dtypes),
 * through the GEMM seam the ops use (kernels/gemm.h); the attention tiles'
 * products (ATT_BR query rows against the causal key columns, strided
 * views into a qkv buffer) run as the kernels run them, one (batch, head)
 * per OpenMP task; and two small probes for what is not a GEMM: a
 * streaming triad for memory bandwidth, and GELU on an in-cache buffer for
 * the rate of pointwise math.
 *
 * A product that does more than PROBE_FLOPS, or has an operand of more
 * than PROBE_ELEMS elements, is timed at a smaller shape and its time
 * scaled back by the ratio of the FLOPs (the traffic no product moves is
 * priced by its bytes at the triad's bandwidth, in cost.c).  A linear layer
 * loses rows first (halved, not below 64), which is all that S and 124M
 * need (at 64 rows, a weight of up to PROBE_FLOPS / 128 = 4.7 M elements);
 * a larger layer (175B's fc weight is 12288 x 49152, 2.4 GB in fp32 and
 * 77 GFLOP at 64 rows) is cut as the other products are, from its whole
 * shape: its largest dimension halved, not below 64, until it fits.  Near
 * square, the cut product runs at about the rate of the whole, where 64
 * rows of a wide layer run at half of it (README, "Calibration"; measured in
 * docs/planner.md, "The GEMM probe at GPT-3 175B's shapes").  The
 * tiles run on at most 1024 rows and, past PROBE_QKV elements of qkv, on a
 * view of only the heads their tasks read.  So the probe's memory and time
 * do not grow with the model (remat_gemm_probe_size: what it allocates). */

#define PROBE_FLOPS 6e8           /* the most one timed product does */
#define PROBE_STREAM (4u << 20)   /* floats per triad array (16 MiB) */
#define PROBE_ELEMS (4u << 20)    /* the most elements of one timed operand (16 MiB) */
#define PROBE_QKV (16u << 20)     /* the most elements of the tiles' qkv (64 MiB) */
#define PROBE_MIN 64              /* the least a cut dimension keeps */

/* the clock of profile.c: one thread, its CPU time; several, the wall */
static double probe_clock_ms(void) { return remat_clock_ms(remat_get_threads() == 1); }

typedef struct probe_buf {
    void *a, *b, *c, *d, *e;
    size_t elems;                 /* of each (4 bytes per element: fp32 or 2 bf16) */
    double max_flops;             /* the most one timed call of a product does */
    double flops, ms;             /* this pass's timed products: their FLOPs, their best ms */
} probe_buf;

static int halve(int d) { return d / 2 > PROBE_MIN ? d / 2 : PROBE_MIN; }

/* the largest operand of an M x K by K x N product, in elements */
static size_t largest(int M, int N, int K)
{
    size_t a = (size_t)M * K, b = (size_t)K * N, c = (size_t)M * N;
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

static int too_big(int M, int N, int K) { return 2.0 * M * N * K > PROBE_FLOPS || largest(M, N, K) > PROBE_ELEMS; }

/* Halves the largest dimension of a product (which is in its largest
 * operand) until it does at most PROBE_FLOPS on operands of at most
 * PROBE_ELEMS, or every dimension is down to PROBE_MIN; returns the factor
 * its time is to be scaled by, and the largest operand into *elems. */
static double cut_shape(int *M, int *N, int *K, size_t *elems)
{
    double scale = 1;
    while (too_big(*M, *N, *K) && (*M > PROBE_MIN || *N > PROBE_MIN || *K > PROBE_MIN)) {
        int *big = *M >= *N && *M >= *K ? M : *N >= *K ? N : K;
        int cut = halve(*big);
        scale *= (double)*big / cut;
        *big = cut;
    }
    *elems = largest(*M, *N, *K);
    return scale;
}

/* the sizing pass's record of one timed call: its operands, its FLOPs */
static void probe_need(probe_buf *pb, size_t elems, double flops)
{
    if (elems > pb->elems) pb->elems = elems;
    if (flops > pb->max_flops) pb->max_flops = flops;
}

/* ms of C (M x N) = op(A) op(B), A and B of dtype dt, C of cdt; beta 1
 * accumulates (a weight gradient).  The best of two timed calls after one
 * untimed one (it creates oneDNN's primitive for the shape).  pb NULL:
 * only grows *need to the operand size the product needs. */
static double time_gemm(probe_buf *pb, int dt, int cdt, int ta, int tb, int M, int N, int K, float beta)
{
    size_t elems;
    double scale = cut_shape(&M, &N, &K, &elems);
    probe_need(pb, elems, 2.0 * M * N * K);
    if (!pb->a) return 0;
    remat_gemm_op g = { dt, cdt, ta, tb, M, N, K, 1.0f, beta,
                        pb->a, ta ? M : K, pb->b, tb ? K : N, pb->c, N, NULL, NULL };
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = probe_clock_ms();
        remat_gemm(&g);
        double dt_ms = probe_clock_ms() - t0;
        if (r && dt_ms < best) best = dt_ms;
    }
    pb->flops += 2.0 * M * N * K;
    pb->ms += best;
    return best * scale;
}

/* ms of a linear layer's products: forward (bw 0: out (N,OC) = in (N,IC)
 * W^T) or backward (din = dout W, dW += dout^T in) */
static double time_linear(probe_buf *pb, const remat_config *c, int rows, int IC, int OC, int out_dt, int bw)
{
    int dt = (int)c->dtype;
    if (!bw) return time_gemm(pb, dt, out_dt, 0, 1, rows, OC, IC, 0.0f);
    return time_gemm(pb, dt, dt, 0, 0, rows, IC, OC, 0.0f) + time_gemm(pb, dt, REMAT_DTYPE_FP32, 1, 0, OC, IC, rows, 1.0f);
}

/* ms of a linear layer as the ops run it (kernels/linear.c: its products
 * through the seam, the bias fused, the bias gradient's column sums), at a
 * smaller shape when it is too big (scaled back by the FLOPs): fewer rows,
 * or when 64 rows are still too big, the cut of cut_shape (the probe's
 * header says why) */
static double time_layer(probe_buf *pb, const remat_config *c, int rows, int IC, int OC, int out_dt, int bw)
{
    int n = rows, ic = IC, oc = OC;
    size_t need;
    while (too_big(n, OC, IC) && n > PROBE_MIN) n = halve(n);
    if (too_big(n, OC, IC)) {
        n = rows;
        cut_shape(&n, &oc, &ic, &need);
    }
    /* IC / ic and OC / oc are exactly 1 when only the rows were cut, so such
     * a layer is scaled as it always was */
    double scale = (double)rows / n * ((double)IC / ic) * ((double)OC / oc);
    probe_need(pb, largest(n, oc, ic), (bw ? 4.0 : 2.0) * n * ic * oc);
    if (!pb->a) return 0;
    int dt = (int)c->dtype;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = probe_clock_ms();
        if (bw) remat_linear_backward(pb->e, pb->d, pb->d, pb->c, pb->a, pb->b, n, ic, oc, dt, 0, NULL);   /* as a step: assigned */
        else remat_linear_forward(pb->c, out_dt, pb->a, pb->b, pb->d, n, ic, oc, dt, NULL);
        double ms = probe_clock_ms() - t0;
        if (r && ms < best) best = ms;
    }
    pb->flops += (bw ? 4.0 : 2.0) * n * ic * oc;
    pb->ms += best;
    return best * scale;
}

/* the row of the tiles' q/k/v buffer: q, k and v of every query head, side
 * by side (the kernels' strided views; a product's rate does not depend on
 * which model's layout it reads) */
static size_t tile_row(const remat_config *c) { return 3 * (size_t)c->n_head * (size_t)remat_config_head_dim(c); }

/* GFLOP/s of the attention tiles: the score products of the causal row
 * blocks of a few (batch, head) pairs, one per task, views into qkv */
static double time_tiles(const remat_config *c, void *qkv, float *att, int tasks)
{
    int T = c->seq, hs = remat_config_head_dim(c), C = c->n_head * hs, C3 = (int)tile_row(c), dt = (int)c->dtype;
    size_t es = remat_dtype_bytes(dt);
    double f = 0;
    for (int i0 = 0; i0 < T; i0 += ATT_BR) {
        int nr = T - i0 < ATT_BR ? T - i0 : ATT_BR;
        f += 2.0 * nr * (i0 + nr) * hs;
    }
    f *= tasks;
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = probe_clock_ms();
        #pragma omp parallel for schedule(static)
        for (int h = 0; h < tasks; h++) {
            const char *q = (const char *)qkv + (size_t)(h % c->n_head) * hs * es;
            for (int i0 = 0; i0 < T; i0 += ATT_BR) {
                int nr = T - i0 < ATT_BR ? T - i0 : ATT_BR;
                remat_gemm_op g = { dt, REMAT_DTYPE_FP32, 0, 1, nr, i0 + nr, hs, 1.0f, 0.0f,
                                    q + (size_t)i0 * C3 * es, C3, q + (size_t)C * es, C3,
                                    att + (size_t)h * T * T + (size_t)i0 * T, T, NULL, NULL };
                remat_gemm(&g);
            }
        }
        double ms = probe_clock_ms() - t0;
        if (r && ms < best) best = ms;
    }
    return f / (best * 1e6);
}

/* GB/s of a streaming triad y = y + a x (two reads, one write) */
static double time_stream(float *x, float *y, size_t n)
{
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = probe_clock_ms();
        #pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) y[i] += 0.5f * x[i];
        double ms = probe_clock_ms() - t0;
        if (r && ms < best) best = ms;
    }
    return 12.0 * (double)n / (best * 1e6);
}

/* GFLOP/s of pointwise math: GELU (8 FLOPs an element) in cache, in the
 * config's dtype (bf16 pays its conversions) */
__attribute__((noipa)) static double time_pointwise(float *x, float *y, size_t n, int dt)
{
    double best = 1e30;
    void *in = x, *out = y;
    if (dt == REMAT_DTYPE_BF16) {   /* bf16 input in y, output over x */
        remat_bf16_from_f32((remat_bf16 *)y, x, n);
        in = y;
        out = x;
    }
    for (int r = 0; r < 4; r++) {
        double t0 = probe_clock_ms();
        remat_gelu_forward(out, in, n, dt);
        double ms = probe_clock_ms() - t0;
        if (r && ms < best) best = ms;
    }
    return 8.0 * (double)n / (best * 1e6);
}

/* the products of the linear layers and the LM head into out->gemm_ms
 * (pb->a NULL: only sizes pb) */
static void time_products(probe_buf *pb, const remat_config *c, remat_probe *out)
{
    const remat_table *tb = remat_table_of(c);
    int rows = remat_lmhead_rows(c);
    for (int t = 0; t < tb->first_grad; t++) {
        const remat_tensor_def *d = &tb->defs[t];
        if (d->opc != RO_LINEAR && d->opc != RO_LMHEAD) continue;
        uint64_t M, N, K;
        remat_tensor_gemm(c, t, &M, &N, &K);
        int out_dt = remat_tensor_dtype(c, t);
        if (d->opc == RO_LMHEAD) {   /* rows at a time, against the head's weight */
            double chunks = (double)M / rows;
            if (remat_tensor_variant_on(c, t)) {   /* chunked: forward, loss and gradient in one pass */
                out->gemm_ms[t][0] = chunks * (time_gemm(pb, (int)c->dtype, REMAT_DTYPE_FP32, 0, 1, rows, (int)N, (int)K,
                                                         0.0f) + time_linear(pb, c, rows, (int)K, (int)N, 0, 1));
            } else {
                out->gemm_ms[t][0] = time_gemm(pb, (int)c->dtype, out_dt, 0, 1, (int)M, (int)N, (int)K, 0.0f);
                out->gemm_ms[t][1] = time_linear(pb, c, (int)M, (int)K, (int)N, 0, 1);
            }
            continue;
        }
        out->gemm_ms[t][0] = time_layer(pb, c, (int)M, (int)K, (int)N, out_dt, 0);
        out->gemm_ms[t][1] = time_layer(pb, c, (int)M, (int)K, (int)N, out_dt, 1);
    }
}

/* The probe's plan for c, by a pass of time_products that times nothing:
 * the operands' size (pb->elems), the config and tasks the tiles run on,
 * and into out (zeroed) what the probe allocates and the most one timed
 * product does. */
static void probe_size(const remat_config *c, probe_buf *pb, remat_config *ct, int *tasks, remat_probe *out)
{
    memset(out, 0, sizeof *out);
    memset(pb, 0, sizeof *pb);
    *tasks = remat_get_threads() * 2;
    if (*tasks > c->batch * c->n_head) *tasks = c->batch * c->n_head;
    /* the tiles' rate does not need a long sequence (at most 1024 rows), nor
     * the heads no task reads: past PROBE_QKV, qkv holds only those (and
     * with heads wider than that, fewer rows) */
    *ct = *c;
    if (ct->seq > 1024) ct->seq = 1024;
    if ((size_t)ct->seq * tile_row(ct) > PROBE_QKV && *tasks < c->n_head) {
        ct->head_dim = remat_config_head_dim(c);
        ct->n_embd = ct->head_dim * *tasks;
        ct->n_head = *tasks;
    }
    while ((size_t)ct->seq * tile_row(ct) > PROBE_QKV && ct->seq > ATT_BR) ct->seq = (ct->seq + 1) / 2;
    time_products(pb, c, out);
    out->bytes = 4 * (5 * (uint64_t)pb->elems + (uint64_t)ct->seq * tile_row(ct) +
                      (uint64_t)*tasks * ct->seq * ct->seq + 2 * (uint64_t)PROBE_STREAM +
                      3 * (uint64_t)REMAT_PROBE_FLOOR_N * REMAT_PROBE_FLOOR_N);   /* and the floor's (gemm.h) */
    out->max_flops = pb->max_flops;
}

/* Into best, the faster of best's and one's time of every product and
 * rate of each probe (first: best is one). */
static void keep_best(remat_probe *best, const remat_probe *one, int first)
{
    for (int t = 0; t < RT_MAXT; t++)
        for (int k = 0; k < 2; k++)
            if (first || one->gemm_ms[t][k] < best->gemm_ms[t][k]) best->gemm_ms[t][k] = one->gemm_ms[t][k];
    if (first || one->tile_gflops > best->tile_gflops) best->tile_gflops = one->tile_gflops;
    if (first || one->gbps > best->gbps) best->gbps = one->gbps;
    if (first || one->other_gflops > best->other_gflops) best->other_gflops = one->other_gflops;
}

void remat_gemm_probe_size(const remat_config *c, remat_probe *out)
{
    probe_buf pb;
    remat_config ct;
    int tasks;
    probe_size(c, &pb, &ct, &tasks, out);
}

remat_status remat_gemm_probe(const remat_config *c, remat_probe *out)
{
    remat_status st = REMAT_OK;
    double t0 = probe_clock_ms();
    probe_buf pb;
    remat_config ct;
    int tasks;
    probe_size(c, &pb, &ct, &tasks, out);   /* sizes the operands */
    int T = ct.seq;
    size_t big = pb.elems, nqkv = (size_t)T * tile_row(&ct);
    void *qkv = NULL;
    float *att = NULL, *x = NULL, *y = NULL;
    pb.a = remat_calloc(big, 4);
    pb.b = remat_calloc(big, 4);
    pb.c = remat_calloc(big, 4);
    pb.d = remat_calloc(big, 4);
    pb.e = remat_calloc(big, 4);
    qkv = remat_calloc(nqkv, 4);
    att = remat_calloc((size_t)tasks * T * T, sizeof *att);
    x = remat_malloc(PROBE_STREAM * sizeof *x);
    y = remat_malloc(PROBE_STREAM * sizeof *y);
    if (!pb.a || !pb.b || !pb.c || !pb.d || !pb.e || !qkv || !att || !x || !y) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory for the GEMM probe");
        goto out;
    }
    /* small values in both dtypes' bits: 0x3c003c00 is 2^-7 as each bf16
     * half, and 0.0078 as a float */
    for (size_t i = 0; i < big; i++) ((uint32_t *)pb.a)[i] = ((uint32_t *)pb.b)[i] = ((uint32_t *)pb.c)[i] = 0x3c003c00u;
    for (size_t i = 0; i < nqkv; i++) ((uint32_t *)qkv)[i] = 0x3c003c00u;
    for (size_t i = 0; i < PROBE_STREAM; i++) { x[i] = 1e-3f * (float)(i & 255); y[i] = 0; }
    out->floor_gflops = remat_gemm_floor_gflops(c->dtype);
    for (int pass = 0; pass < REMAT_PROBE_PASSES; pass++) {
        remat_probe one = *out;
        pb.flops = pb.ms = 0;
        time_products(&pb, c, &one);
        one.tile_gflops = time_tiles(&ct, qkv, att, tasks);
        one.gbps = time_stream(x, y, PROBE_STREAM);
        one.other_gflops = time_pointwise(x, y, 1u << 17, (int)c->dtype);
        double rate = pb.ms > 0 ? pb.flops / (pb.ms * 1e6) : 0;
        keep_best(out, &one, pass == 0);
        out->passes = pass + 1;
        if (pass == 0) out->first_gflops = rate < one.tile_gflops ? rate : one.tile_gflops;
        if (rate > out->gemm_gflops) out->gemm_gflops = rate;
        if (!remat_probe_distrusted(out)) break;
    }
    if ((st = remat_gemm_check())) goto out;
    out->ms = probe_clock_ms() - t0;
out:
    free(pb.a); free(pb.b); free(pb.c); free(pb.d); free(pb.e);
    free(qkv); free(att); free(x); free(y);
    return st;
}

remat_status remat_profile_model(const remat_config *cfg, int measure, remat_profile **out)
{
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_profile_model: out is NULL");
    *out = NULL;
    remat_status st = remat_config_check(cfg);
    if (st) return st;
    remat_profile *p = remat_malloc(sizeof *p);
    if (!p) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    remat_probe pr;
    if (measure) {
        if ((st = remat_gemm_probe(cfg, &pr))) { free(p); return st; }
        remat_profile_fill_probed(p, cfg, &pr);
    } else {
        remat_profile_fill_model(p, cfg, 0);
    }
    *out = p;
    return REMAT_OK;
}
