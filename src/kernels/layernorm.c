/*
 * layernorm.c -- LayerNorm over the channel axis (Ba et al. 2016, as
 * torch.nn.LayerNorm with eps = 1e-5 and the biased variance), split into
 * stats / apply so that the (mean, rstd) pair can be kept while the output
 * is dropped and recomputed.  Contract in kernels.h.
 *
 * Legend: N rows (= B*T), C channels.
 * Parameter gradients (dw, db) accumulate (+=).  Unusually, dinp also
 * accumulates (+=): it lands on the residual stream.
 */
#include <math.h>
#include "kernels.h"

#define LN_EPS 1e-5

/* stat[n] = (mean, rstd):  mean = sum_c x/C,  rstd = 1/sqrt(sum_c (x-mean)^2/C + eps)
 * stat (N,2), inp (N,C).  Sums run in double, in channel order, per row. */
void layernorm_stats(float *stat, const float *inp, int N, int C)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        double s = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        double mean = s / C;
        double v = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - mean;
            v += d * d;
        }
        v /= C;
        stat[2 * n] = (float)mean;
        stat[2 * n + 1] = (float)(1.0 / sqrt(v + LN_EPS));
    }
}

/* out[n,c] = (x[n,c] - mean[n]) * rstd[n] * w[c] + b[c]
 * out (N,C), inp (N,C), stat (N,2), w (C), b (C).
 * The backward recomputes xhat = (x - mean) * rstd with the same float ops. */
void layernorm_apply(float *out, const float *inp, const float *stat, const float *w,
                     const float *b, int N, int C)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *o = out + (size_t)n * C;
        float mean = stat[2 * n], rstd = stat[2 * n + 1];
        for (int c = 0; c < C; c++) o[c] = (x[c] - mean) * rstd * w[c] + b[c];
    }
}

/* xhat = (x-mean)*rstd,  dxhat = dout*w
 * dinp[n,:] += rstd * (dxhat - mean_c(dxhat) - xhat * mean_c(dxhat*xhat))
 * dw[c] += sum_n dout[n,c]*xhat[n,c],   db[c] += sum_n dout[n,c]
 * dinp (N,C), dw (C), db (C), dout (N,C), inp (N,C), stat (N,2), w (C).
 *
 * Two passes so that every reduction has a fixed order:
 *  1. rows in parallel: each row's dinp depends only on that row;
 *  2. channel blocks in parallel, rows in order inside: dw/db element c is
 *     summed over n = 0..N-1 sequentially whatever the thread count. */
#define LN_CBLOCK 16
void layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *stat, const float *w,
                        int N, int C)
{
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float mean = stat[2 * n], rstd = stat[2 * n + 1];
        /* the two row means, in double: they are small differences of sums */
        double s1 = 0.0, s2 = 0.0;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - mean) * rstd;
            float dxhat = d[c] * w[c];
            s1 += dxhat;
            s2 += (double)dxhat * xhat;
        }
        float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - mean) * rstd;
            float dxhat = d[c] * w[c];
            dx[c] += rstd * (dxhat - m1 - xhat * m2);
        }
    }

    int nblk = (C + LN_CBLOCK - 1) / LN_CBLOCK;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * LN_CBLOCK;
        int c1 = c0 + LN_CBLOCK < C ? c0 + LN_CBLOCK : C;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C;
            const float *d = dout + (size_t)n * C;
            float mean = stat[2 * n], rstd = stat[2 * n + 1];
            for (int c = c0; c < c1; c++) {
                float xhat = (x[c] - mean) * rstd;
                dw[c] += d[c] * xhat;
                db[c] += d[c];
            }
        }
    }
}
