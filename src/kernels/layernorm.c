/*
 * layernorm.c -- LayerNorm over the channel axis (Ba et al. 2016, as
 * torch.nn.LayerNorm with eps = 1e-5 and the biased variance), split into
 * stats / apply so that the (mean, rstd) pair can be kept while the output
 * is dropped and recomputed.  Contract in kernels.h.
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

/* stat[n] = (mean, rstd):  mean = sum_c x/C,  rstd = 1/sqrt(sum_c (x-mean)^2/C + eps)
 * stat (N,2), inp (N,C).  Sums run in double, per row, in the lane order above. */
INLINE void stats_row(float *stat, const void *x, int C, int dt)
{
    double l[LN_LANES] = { 0 };
    int c = 0;
    for (; c + LN_LANES <= C; c += LN_LANES) {
        #pragma omp simd
        for (int k = 0; k < LN_LANES; k++) l[k] += X(x, c + k);
    }
    for (; c < C; c++) l[c % LN_LANES] += X(x, c);
    double mean = lanes_total(l) / C;
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
    stat[0] = (float)mean;
    stat[1] = (float)(1.0 / sqrt(v + LN_EPS));
}

void remat_layernorm_stats(float *stat, const void *inp, int N, int C, int dt)
{
    size_t es = remat_dtype_bytes(dt);
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)N * C))
    for (int n = 0; n < N; n++) {
        const char *x = (const char *)inp + (size_t)n * C * es;
        if (dt == REMAT_DTYPE_BF16) stats_row(stat + 2 * n, x, C, REMAT_DTYPE_BF16);
        else stats_row(stat + 2 * n, x, C, REMAT_DTYPE_FP32);
    }
}

/* out[n,c] = (x[n,c] - mean[n]) * rstd[n] * w[c] + b[c]
 * out (N,C), inp (N,C), stat (N,2), w (C), b (C).
 * The backward recomputes xhat = (x - mean) * rstd with the same float ops.
 * Elementwise: vectorising does not change the bits. */
void remat_layernorm_apply(void *out, int out_dt, const void *inp, int dt, const float *stat, const float *w,
                     const float *b, int N, int C)
{
    size_t es = remat_dtype_bytes(dt);
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)N * C))
    for (int n = 0; n < N; n++) {
        float mean = stat[2 * n], rstd = stat[2 * n + 1];
        const char *x = (const char *)inp + (size_t)n * C * es;
        if (out_dt == REMAT_DTYPE_BF16) {
            remat_bf16 *o = (remat_bf16 *)out + (size_t)n * C;
            for (int c = 0; c < C; c++) o[c] = remat_bf16_round((X(x, c) - mean) * rstd * w[c] + b[c]);
        } else {
            float *o = (float *)out + (size_t)n * C;
            #pragma omp simd
            for (int c = 0; c < C; c++) o[c] = (X(x, c) - mean) * rstd * w[c] + b[c];
        }
    }
}

/* xhat = (x-mean)*rstd,  dxhat = dout*w
 * dinp[n,:] += rstd * (dxhat - mean_c(dxhat) - xhat * mean_c(dxhat*xhat))
 * dw[c] += sum_n dout[n,c]*xhat[n,c],   db[c] += sum_n dout[n,c]
 * dinp (N,C), dw (C), db (C), dout (N,C), inp (N,C), stat (N,2), w (C).
 *
 * Two loops in one parallel region so that every reduction has a fixed order:
 *  1. rows in parallel: each row's dinp depends only on that row (the two
 *     row means in double lanes, as in layernorm_stats);
 *  2. channel blocks in parallel, rows in order inside: dw/db element c is
 *     summed over n = 0..N-1 sequentially whatever the thread count (the
 *     vectorised loop runs across channels, each its own sum). */
#define LN_CBLOCK 64
INLINE void backward_row(float *dx, const void *x, const void *d, float mean, float rstd, const float *w, int C,
                         int dt, int ddt)
{
    /* the two row means, in double: they are small differences of sums */
    double l1[LN_LANES] = { 0 }, l2[LN_LANES] = { 0 };
    int c = 0;
    for (; c + LN_LANES <= C; c += LN_LANES) {
        #pragma omp simd
        for (int k = 0; k < LN_LANES; k++) {
            float xhat = (X(x, c + k) - mean) * rstd;
            float dxhat = D(d, c + k) * w[c + k];
            l1[k] += dxhat;
            l2[k] += (double)dxhat * xhat;
        }
    }
    for (; c < C; c++) {
        float xhat = (X(x, c) - mean) * rstd;
        float dxhat = D(d, c) * w[c];
        l1[c % LN_LANES] += dxhat;
        l2[c % LN_LANES] += (double)dxhat * xhat;
    }
    float m1 = (float)(lanes_total(l1) / C), m2 = (float)(lanes_total(l2) / C);
    #pragma omp simd
    for (c = 0; c < C; c++) {
        float xhat = (X(x, c) - mean) * rstd;
        float dxhat = D(d, c) * w[c];
        dx[c] += rstd * (dxhat - m1 - xhat * m2);
    }
}

INLINE void backward_cols(float *dw, float *db, const void *inp, const void *dout, const float *stat, int N, int C,
                          int c0, int c1, int dt, int ddt)
{
    size_t es = remat_dtype_bytes(dt), des = remat_dtype_bytes(ddt);
    for (int n = 0; n < N; n++) {
        const char *x = (const char *)inp + (size_t)n * C * es;
        const char *d = (const char *)dout + (size_t)n * C * des;
        float mean = stat[2 * n], rstd = stat[2 * n + 1];
        #pragma omp simd
        for (int c = c0; c < c1; c++) {
            float xhat = (X(x, c) - mean) * rstd;
            dw[c] += D(d, c) * xhat;
            db[c] += D(d, c);
        }
    }
}

/* the row and column passes with both dtypes fixed, once per combination */
#define LN_BWD_CASE(DT, DDT)                                                                                  \
    do {                                                                                                      \
        _Pragma("omp for schedule(static)")                                                                   \
        for (int n = 0; n < N; n++)                                                                           \
            backward_row(dinp + (size_t)n * C, (const char *)inp + (size_t)n * C * es,                      \
                         (const char *)dout + (size_t)n * C * des, stat[2 * n], stat[2 * n + 1], w, C, DT, DDT); \
        _Pragma("omp for schedule(static)")                                                                   \
        for (int blk = 0; blk < nblk; blk++) {                                                               \
            int c0 = blk * LN_CBLOCK, c1 = c0 + LN_CBLOCK < C ? c0 + LN_CBLOCK : C;                          \
            backward_cols(dw, db, inp, dout, stat, N, C, c0, c1, DT, DDT);                                    \
        }                                                                                                     \
    } while (0)

void remat_layernorm_backward(float *dinp, float *dw, float *db, const void *dout, int ddt, const void *inp, int dt,
                        const float *stat, const float *w, int N, int C)
{
    int nblk = (C + LN_CBLOCK - 1) / LN_CBLOCK;
    size_t es = remat_dtype_bytes(dt), des = remat_dtype_bytes(ddt);
    #pragma omp parallel if (REMAT_PAR((size_t)N * C))
    {
        if (dt == REMAT_DTYPE_FP32 && ddt == REMAT_DTYPE_FP32) LN_BWD_CASE(REMAT_DTYPE_FP32, REMAT_DTYPE_FP32);
        else if (dt == REMAT_DTYPE_FP32) LN_BWD_CASE(REMAT_DTYPE_FP32, REMAT_DTYPE_BF16);
        else if (ddt == REMAT_DTYPE_FP32) LN_BWD_CASE(REMAT_DTYPE_BF16, REMAT_DTYPE_FP32);
        else LN_BWD_CASE(REMAT_DTYPE_BF16, REMAT_DTYPE_BF16);
    }
}
