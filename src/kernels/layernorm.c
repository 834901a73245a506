/*
 * layernorm.c -- the normalisations over the channel axis, each split into
 * stats / apply so that the statistics can be kept while the output is
 * dropped and recomputed:
 *   LayerNorm (Ba et al. 2016, as torch.nn.LayerNorm with eps = 1e-5 and the
 *     biased variance): stat = (mean, rstd);
 *   RMSNorm (Zhang & Sennrich 2019, as Hugging Face's LlamaRMSNorm: the
 *     statistic in fp32 from the input, eps a parameter): stat = rstd.
 * RMSNorm is LayerNorm without the mean and the bias, so both run the same
 * row functions with `rms` fixed at compile time; the LayerNorm code is
 * what it was.  Contract in kernels.h.
 *
 * Legend: N rows (= B*T), C channels.
 * Parameter gradients (dw, db) accumulate (+=).  Unusually, dinp also
 * accumulates (+=): it lands on the residual stream (d_res, fp32).
 *
 * dtype: inp, out and dout are fp32 or bf16 (dt); the statistics, the
 * weights and every sum are fp32 or double in both.  Each kernel is one
 * row function, inlined once per dtype with the element load fixed (X(),
 * below), so the fp32 code is what it was and bf16 adds only the widening
 * of each element.
 */
#include <math.h>
#include "kernels.h"
#include "vmath.h"

#define LN_EPS 1e-5

#define INLINE static inline __attribute__((always_inline))
/* element c of a row p of dtype dt (of dout: ddt), as a float */
#define LD(p, c, t) (t == REMAT_DTYPE_BF16 ? remat_bf16_to_float(((const remat_bf16 *)(p))[c]) : ((const float *)(p))[c])
#define X(p, c) LD(p, c, dt)
#define D(p, c) LD(p, c, ddt)

/* Row sums run in LN_LANES double lanes: element c goes to lane c mod 8
 * and the lanes are added in lane order at the end.  The order is fixed by
 * C alone (not by threads or by how the compiler vectorises the lane loop:
 * each lane is its own sequential sum), and the inner loops over the 8
 * lanes vectorise (#pragma omp simd: two 4-wide double adds). */
#define LN_LANES 8

static inline double lanes_total(const double *l)
{
    double s = 0.0;
    for (int k = 0; k < LN_LANES; k++) s += l[k];
    return s;
}

/* LayerNorm: stat[n] = (mean, rstd), mean = sum_c x/C,  rstd = 1/sqrt(sum_c (x-mean)^2/C + eps)
 * RMSNorm:   stat[n] = rstd,         rstd = 1/sqrt(sum_c x^2/C + eps)   (the mean taken as 0)
 * stat (N,2) or (N,1), inp (N,C).  Sums run in double, per row, in the lane order above. */
INLINE void stats_row(float *stat, const void *x, int C, int dt, int rms, double eps)
{
    double mean = 0.0;
    int c = 0;
    if (!rms) {
        double l[LN_LANES] = { 0 };
        for (; c + LN_LANES <= C; c += LN_LANES) {
            #pragma omp simd
            for (int k = 0; k < LN_LANES; k++) l[k] += X(x, c + k);
        }
        for (; c < C; c++) l[c % LN_LANES] += X(x, c);
        mean = lanes_total(l) / C;
    }
    double q[LN_LANES] = { 0 };
    for (c = 0; c + LN_LANES <= C; c += LN_LANES) {
        #pragma omp simd
        for (int k = 0; k < LN_LANES; k++) {
            double d = X(x, c + k) - mean;
            q[k] += d * d;
        }
    }
    for (; c < C; c++) {
        double d = X(x, c) - mean;
        q[c % LN_LANES] += d * d;
    }
    double v = lanes_total(q) / C;
    float rstd = (float)(1.0 / sqrt(v + eps));
    if (rms) {
        stat[0] = rstd;
    } else {
        stat[0] = (float)mean;
        stat[1] = rstd;
    }
}

INLINE void stats_rows(float *stat, const void *inp, int N, int C, int dt, int rms, double eps)
{
    size_t es = remat_dtype_bytes(dt);
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)N * C))
    for (int n = 0; n < N; n++) {
        const char *x = (const char *)inp + (size_t)n * C * es;
        if (rms) {   /* rms fixed as well: in the outlined parallel body it is not a constant */
            if (dt == REMAT_DTYPE_BF16) stats_row(stat + n, x, C, REMAT_DTYPE_BF16, 1, eps);
            else stats_row(stat + n, x, C, REMAT_DTYPE_FP32, 1, eps);
        } else {
            if (dt == REMAT_DTYPE_BF16) stats_row(stat + 2 * n, x, C, REMAT_DTYPE_BF16, 0, eps);
            else stats_row(stat + 2 * n, x, C, REMAT_DTYPE_FP32, 0, eps);
        }
    }
}

void remat_layernorm_stats(float *stat, const void *inp, int N, int C, int dt)
{
    stats_rows(stat, inp, N, C, dt, 0, LN_EPS);
}

void remat_rmsnorm_stats(float *rstd, const void *inp, int N, int C, int dt, double eps)
{
    stats_rows(rstd, inp, N, C, dt, 1, eps);
}

/* the statistics of row n: LayerNorm's (mean, rstd) pairs, RMSNorm's rstd alone (mean 0) */
INLINE float st_mean(const float *stat, int n, int rms) { return rms ? 0.0f : stat[2 * n]; }
INLINE float st_rstd(const float *stat, int n, int rms) { return rms ? stat[n] : stat[2 * n + 1]; }

/* xhat = (x - mean) * rstd (LayerNorm) or x * rstd (RMSNorm): the same float
 * ops in the apply and in the backward, which recomputes it */
INLINE float xhat_of(float x, float mean, float rstd, int rms) { return rms ? x * rstd : (x - mean) * rstd; }

#define LN_APPLY_CHUNK 256   /* channels per fp32 chunk of a bf16 output row */

/* LayerNorm: out[n,c] = (x[n,c] - mean[n]) * rstd[n] * w[c] + b[c]
 * RMSNorm:   out[n,c] = w[c] * (x[n,c] * rstd[n])   (LlamaRMSNorm's order)
 * out (N,C), inp (N,C), stat (N,2) or (N,1), w (C), b (C; LayerNorm only).
 * Elementwise: vectorising does not change the bits. */
INLINE void apply_row(void *out, int out_dt, const void *x, int dt, float mean, float rstd, const float *w,
                      const float *b, int C, int rms)
{
    if (out_dt == REMAT_DTYPE_BF16) {   /* fp32 a chunk at a time, then one vector rounding */
        remat_bf16 *o = out;
        float y[LN_APPLY_CHUNK];
        for (int c0 = 0; c0 < C; c0 += LN_APPLY_CHUNK) {
            int m = C - c0 < LN_APPLY_CHUNK ? C - c0 : LN_APPLY_CHUNK;
            #pragma omp simd
            for (int c = 0; c < m; c++)
                y[c] = rms ? w[c0 + c] * xhat_of(X(x, c0 + c), mean, rstd, 1)
                           : xhat_of(X(x, c0 + c), mean, rstd, 0) * w[c0 + c] + b[c0 + c];
            remat_bf16_from_f32(o + c0, y, (size_t)m);
        }
    } else {
        float *o = out;
        #pragma omp simd
        for (int c = 0; c < C; c++)
            o[c] = rms ? w[c] * xhat_of(X(x, c), mean, rstd, 1) : xhat_of(X(x, c), mean, rstd, 0) * w[c] + b[c];
    }
}

/* the row function with both dtypes and rms fixed, once per combination
 * (inside the parallel region's outlined body rms is not a constant; a
 * loop on it ran masked, reading LayerNorm's b through RMSNorm's NULL) */
#define LN_APPLY_CASES(RMS)                                                                                 \
    do {                                                                                                    \
        if (dt == REMAT_DTYPE_FP32 && out_dt == REMAT_DTYPE_FP32)                                            \
            apply_row(o, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, mean, rstd, w, b, C, RMS);                  \
        else if (dt == REMAT_DTYPE_FP32)                                                                     \
            apply_row(o, REMAT_DTYPE_BF16, x, REMAT_DTYPE_FP32, mean, rstd, w, b, C, RMS);                  \
        else if (out_dt == REMAT_DTYPE_FP32)                                                                 \
            apply_row(o, REMAT_DTYPE_FP32, x, REMAT_DTYPE_BF16, mean, rstd, w, b, C, RMS);                  \
        else                                                                                                \
            apply_row(o, REMAT_DTYPE_BF16, x, REMAT_DTYPE_BF16, mean, rstd, w, b, C, RMS);                  \
    } while (0)

INLINE void apply_rows(void *out, int out_dt, const void *inp, int dt, const float *stat, const float *w,
                       const float *b, int N, int C, int rms)
{
    size_t es = remat_dtype_bytes(dt), oes = remat_dtype_bytes(out_dt);
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)N * C))
    for (int n = 0; n < N; n++) {
        float mean = st_mean(stat, n, rms), rstd = st_rstd(stat, n, rms);
        const char *x = (const char *)inp + (size_t)n * C * es;
        char *o = (char *)out + (size_t)n * C * oes;
        if (rms) LN_APPLY_CASES(1);
        else LN_APPLY_CASES(0);
    }
}

void remat_layernorm_apply(void *out, int out_dt, const void *inp, int dt, const float *stat, const float *w,
                     const float *b, int N, int C)
{
    apply_rows(out, out_dt, inp, dt, stat, w, b, N, C, 0);
}

void remat_rmsnorm_apply(void *out, int out_dt, const void *inp, int dt, const float *rstd, const float *w, int N,
                         int C)
{
    apply_rows(out, out_dt, inp, dt, rstd, w, NULL, N, C, 1);
}

/* xhat as above,  dxhat = dout*w
 * LayerNorm: dinp[n,:] += rstd * (dxhat - mean_c(dxhat) - xhat * mean_c(dxhat*xhat))
 * RMSNorm:   dinp[n,:] += rstd * (dxhat - xhat * mean_c(dxhat*xhat))
 * dw[c] += sum_n dout[n,c]*xhat[n,c],   db[c] += sum_n dout[n,c] (LayerNorm)
 * dinp (N,C), dw (C), db (C), dout (N,C), inp (N,C), stat (N,2) or (N,1), w (C).
 *
 * Two loops in one parallel region so that every reduction has a fixed order:
 *  1. rows in parallel: each row's dinp depends only on that row (the row
 *     means in double lanes, as in the stats);
 *  2. channel blocks in parallel, rows in order inside: dw/db element c is
 *     summed over n = 0..N-1 sequentially whatever the thread count (the
 *     vectorised loop runs across channels, each its own sum). */
#define LN_CBLOCK 64
INLINE void backward_row(float *dx, const void *x, const void *d, float mean, float rstd, const float *w, int C,
                         int dt, int ddt, int rms)
{
    /* the row means, in double: they are small differences of sums */
    double l1[LN_LANES] = { 0 }, l2[LN_LANES] = { 0 };
    int c = 0;
    for (; c + LN_LANES <= C; c += LN_LANES) {
        #pragma omp simd
        for (int k = 0; k < LN_LANES; k++) {
            float xhat = xhat_of(X(x, c + k), mean, rstd, rms);
            float dxhat = D(d, c + k) * w[c + k];
            if (!rms) l1[k] += dxhat;
            l2[k] += (double)dxhat * xhat;
        }
    }
    for (; c < C; c++) {
        float xhat = xhat_of(X(x, c), mean, rstd, rms);
        float dxhat = D(d, c) * w[c];
        if (!rms) l1[c % LN_LANES] += dxhat;
        l2[c % LN_LANES] += (double)dxhat * xhat;
    }
    float m1 = rms ? 0.0f : (float)(lanes_total(l1) / C), m2 = (float)(lanes_total(l2) / C);
    #pragma omp simd
    for (c = 0; c < C; c++) {
        float xhat = xhat_of(X(x, c), mean, rstd, rms);
        float dxhat = D(d, c) * w[c];
        dx[c] += rms ? rstd * (dxhat - xhat * m2) : rstd * (dxhat - m1 - xhat * m2);
    }
}

INLINE void backward_cols(float *dw, float *db, const void *inp, const void *dout, const float *stat, int N, int C,
                          int c0, int c1, int dt, int ddt, int rms)
{
    size_t es = remat_dtype_bytes(dt), des = remat_dtype_bytes(ddt);
    for (int n = 0; n < N; n++) {
        const char *x = (const char *)inp + (size_t)n * C * es;
        const char *d = (const char *)dout + (size_t)n * C * des;
        float mean = st_mean(stat, n, rms), rstd = st_rstd(stat, n, rms);
        #pragma omp simd
        for (int c = c0; c < c1; c++) {
            float xhat = xhat_of(X(x, c), mean, rstd, rms);
            dw[c] += D(d, c) * xhat;
            if (!rms) db[c] += D(d, c);
        }
    }
}

/* the row and column passes with both dtypes and rms fixed, once per
 * combination (rms too: in the parallel region's outlined body it is not a
 * constant otherwise) */
#define LN_BWD_CASE(DT, DDT, RMS)                                                                             \
    do {                                                                                                      \
        _Pragma("omp for schedule(static)")                                                                   \
        for (int n = 0; n < N; n++)                                                                           \
            backward_row(dinp + (size_t)n * C, (const char *)inp + (size_t)n * C * es,                      \
                         (const char *)dout + (size_t)n * C * des, st_mean(stat, n, RMS), st_rstd(stat, n, RMS), \
                         w, C, DT, DDT, RMS);                                                                 \
        _Pragma("omp for schedule(static)")                                                                   \
        for (int blk = 0; blk < nblk; blk++) {                                                               \
            int c0 = blk * LN_CBLOCK, c1 = c0 + LN_CBLOCK < C ? c0 + LN_CBLOCK : C;                          \
            backward_cols(dw, db, inp, dout, stat, N, C, c0, c1, DT, DDT, RMS);                               \
        }                                                                                                     \
    } while (0)
#define LN_BWD_DTYPES(RMS)                                                                                    \
    do {                                                                                                      \
        if (dt == REMAT_DTYPE_FP32 && ddt == REMAT_DTYPE_FP32) LN_BWD_CASE(REMAT_DTYPE_FP32, REMAT_DTYPE_FP32, RMS); \
        else if (dt == REMAT_DTYPE_FP32) LN_BWD_CASE(REMAT_DTYPE_FP32, REMAT_DTYPE_BF16, RMS);               \
        else if (ddt == REMAT_DTYPE_FP32) LN_BWD_CASE(REMAT_DTYPE_BF16, REMAT_DTYPE_FP32, RMS);              \
        else LN_BWD_CASE(REMAT_DTYPE_BF16, REMAT_DTYPE_BF16, RMS);                                           \
    } while (0)

INLINE void backward_rows(float *dinp, float *dw, float *db, const void *dout, int ddt, const void *inp, int dt,
                          const float *stat, const float *w, int N, int C, int rms)
{
    int nblk = (C + LN_CBLOCK - 1) / LN_CBLOCK;
    size_t es = remat_dtype_bytes(dt), des = remat_dtype_bytes(ddt);
    #pragma omp parallel if (REMAT_PAR((size_t)N * C))
    {
        if (rms) LN_BWD_DTYPES(1);
        else LN_BWD_DTYPES(0);
    }
}

void remat_layernorm_backward(float *dinp, float *dw, float *db, const void *dout, int ddt, const void *inp, int dt,
                        const float *stat, const float *w, int N, int C)
{
    backward_rows(dinp, dw, db, dout, ddt, inp, dt, stat, w, N, C, 0);
}

void remat_rmsnorm_backward(float *dinp, float *dw, const void *dout, int ddt, const void *inp, int dt,
                            const float *rstd, const float *w, int N, int C)
{
    backward_rows(dinp, dw, NULL, dout, ddt, inp, dt, rstd, w, N, C, 1);
}
