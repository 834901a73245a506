/*
 * attention.c -- causal multi-head self-attention core (Vaswani et al. 2017),
 * split into scores (the T^2 softmax probabilities) and values, so that the
 * probabilities can be dropped and recomputed from qkv ("selective"
 * recomputation, Korthikanti et al. 2022).  Contract in kernels.h.
 *
 * Legend: B batch, T sequence length, C channels, NH heads, hs = C/NH,
 * R x BC a tile of (query rows) x (key columns).
 * qkv[b,t,:] = [q (C) | k (C) | v (C)]; head h owns channels h*hs..h*hs+hs-1
 * of each third.  att is (B,NH,T,T), row-major, with exact zeros above the
 * diagonal.  dqkv (the only gradient) is assigned (=).
 *
 * Every product over hs or over j is a cblas_sgemm on a block of R query
 * rows (strided views into qkv, ld = 3C: nothing is copied); the softmax
 * and the dropout mask are applied row by row in between.  A row block i0
 * only touches key columns j < i0 + R, so the work is the causal half of
 * T^2 plus at most one R x R triangle per block.
 *
 * Dropout acts on the probabilities inside the value product; the mask is
 * regenerated from remat_dropout with element index ((b*NH+h)*T+i)*T+j, so
 * forward, recomputed forward and backward all see the same mask.
 *
 * Threads: one task per (b,h), which alone writes its slices of out and
 * dqkv in a fixed order; sgemm inside a parallel region runs on the calling
 * thread.  The bits do not depend on the thread count.  Workspace: two
 * R x BC tiles per thread, on the stack; no T^2 gradient buffer.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include "kernels.h"
#include "vmath.h"

#define R 64      /* query rows per block */
#define BC 128    /* key columns per tile (backward and dropout) */

static inline uint64_t att_index(int b, int h, int i, int j, int NH, int T)
{
    return (((uint64_t)b * NH + h) * T + i) * T + j;
}

/* att[b,h,i,j] = exp(s_ij - max_j s_ij) / sum_j exp(...) for j <= i, 0 for j > i
 * s_ij = q_i . k_j / sqrt(hs).   att (B,NH,T,T), qkv (B,T,3C).
 * Per block of R rows: S = scale * Q_blk K^T (one sgemm over the causal
 * columns), then a softmax per row. */
void attention_scores_forward(float *att, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);

    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *K = Q + C;
            float *A = att + ((size_t)b * NH + h) * T * T;
            for (int i0 = 0; i0 < T; i0 += R) {
                int nr = T - i0 < R ? T - i0 : R, ncol = i0 + nr;
                float *a0 = A + (size_t)i0 * T;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, ncol, hs, scale,
                            Q + (size_t)i0 * C3, (int)C3, K, (int)C3, 0.0f, a0, T);
                for (int r = 0; r < nr; r++) {
                    float *a = a0 + (size_t)r * T;
                    int n = i0 + r + 1;   /* j <= i */
                    float sum = remat_row_expsum(a, a, n, remat_row_max(a, n));
                    float inv = 1.0f / sum;   /* sum >= 1: the max term is exp(0) */
                    for (int j = 0; j < n; j++) a[j] *= inv;
                    memset(a + n, 0, (size_t)(T - n) * sizeof(float));
                }
            }
        }
}

/* out[b,i,h*hs+d] = sum_{j<=i} drop(att[b,h,i,j]) * v[b,j,h*hs+d]
 * out (B,T,C), att (B,NH,T,T), qkv (B,T,3C).
 * Without dropout: out_blk = P_blk V, one sgemm per row block (the zeros
 * above the diagonal add nothing).  With dropout the masked probabilities
 * go through a tile, BC columns at a time. */
void attention_values_forward(float *out, const float *att, const float *qkv,
                              const remat_dropout *drop, int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;

    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *V = qkv + (size_t)b * T * C3 + 2 * (size_t)C + (size_t)h * hs;
            const float *A = att + ((size_t)b * NH + h) * T * T;
            float *O = out + (size_t)b * T * C + (size_t)h * hs;
            float pm[R * BC];
            for (int i0 = 0; i0 < T; i0 += R) {
                int nr = T - i0 < R ? T - i0 : R, ncol = i0 + nr;
                const float *a0 = A + (size_t)i0 * T;
                float *o = O + (size_t)i0 * C;
                if (drop->p <= 0.0f) {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, ncol, 1.0f,
                                a0, T, V, (int)C3, 0.0f, o, C);
                    continue;
                }
                for (int j0 = 0; j0 < ncol; j0 += BC) {
                    int nc = ncol - j0 < BC ? ncol - j0 : BC;
                    for (int r = 0; r < nr; r++)
                        for (int c = 0; c < nc; c++)
                            pm[r * BC + c] = a0[(size_t)r * T + j0 + c] *
                                             remat_dropout_mult(drop, att_index(b, h, i0 + r, j0 + c, NH, T));
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f,
                                pm, BC, V + (size_t)j0 * C3, (int)C3, j0 ? 1.0f : 0.0f, o, C);
                }
            }
        }
}

/* With P = att, m_ij the dropout multiplier (0 or 1/(1-p)), per (b,h):
 *   dPd_ij = dout_i . v_j,  dP_ij = dPd_ij * m_ij
 *   D_i    = sum_{j<=i} P_ij dP_ij
 *   dS_ij  = P_ij * (dP_ij - D_i)                                 (softmax backward)
 *   dq_i = sum_{j<=i} dS_ij k_j / sqrt(hs),  dk_j = sum_{i>=j} dS_ij q_i / sqrt(hs)
 *   dv_j = sum_{i>=j} P_ij m_ij dout_i
 * dqkv (B,T,3C) assigned, dout (B,T,C), att (B,NH,T,T), qkv (B,T,3C).
 *
 * Per block of R rows, two passes over its BC-column tiles (no row buffer):
 *   1. dPd = dout_blk V_tile^T (sgemm); D += rowsum(P m dPd);
 *      dV_tile += (P m)^T dout_blk (sgemm)
 *   2. dPd again (the same sgemm: the same bits); dS; dq_blk += dS K_tile,
 *      dK_tile += dS^T Q_blk (sgemm each). */
void attention_backward(float *dqkv, const float *dout, const float *att,
                        const float *qkv, const remat_dropout *drop,
                        int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);

    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *K = Q + C, *V = Q + 2 * (size_t)C;
            float *dQ = dqkv + (size_t)b * T * C3 + (size_t)h * hs, *dK = dQ + C, *dV = dQ + 2 * (size_t)C;
            const float *A = att + ((size_t)b * NH + h) * T * T;
            const float *G = dout + (size_t)b * T * C + (size_t)h * hs;
            float dp[R * BC], w[R * BC], D[R];
            for (int t = 0; t < T; t++)
                for (int part = 0; part < 3; part++) memset(dQ + (size_t)t * C3 + (size_t)part * C, 0, (size_t)hs * sizeof(float));
            for (int i0 = 0; i0 < T; i0 += R) {
                int nr = T - i0 < R ? T - i0 : R, ncol = i0 + nr;
                const float *a0 = A + (size_t)i0 * T, *g = G + (size_t)i0 * C;
                for (int r = 0; r < nr; r++) D[r] = 0.0f;
                for (int pass = 1; pass <= 2; pass++)
                    for (int j0 = 0; j0 < ncol; j0 += BC) {
                        int nc = ncol - j0 < BC ? ncol - j0 : BC;
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, 1.0f,
                                    g, C, V + (size_t)j0 * C3, (int)C3, 0.0f, dp, BC);
                        for (int r = 0; r < nr; r++) {
                            int i = i0 + r, n = i - j0 + 1 < nc ? i - j0 + 1 : nc;   /* causal: j <= i */
                            if (n < 0) n = 0;
                            const float *a = a0 + (size_t)r * T + j0;
                            float *x = dp + r * BC, *y = w + r * BC, acc = 0.0f;
                            for (int c = 0; c < n; c++) {
                                float m = remat_dropout_mult(drop, att_index(b, h, i, j0 + c, NH, T));
                                if (pass == 1) { y[c] = a[c] * m; acc += y[c] * x[c]; }
                                else y[c] = a[c] * (x[c] * m - D[r]) * scale;
                            }
                            memset(y + n, 0, (size_t)(nc - n) * sizeof(float));
                            D[r] += acc;
                        }
                        if (pass == 1) {
                            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f,
                                        w, BC, g, C, 1.0f, dV + (size_t)j0 * C3, (int)C3);
                        } else {
                            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f,
                                        w, BC, K + (size_t)j0 * C3, (int)C3, 1.0f, dQ + (size_t)i0 * C3, (int)C3);
                            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f,
                                        w, BC, Q + (size_t)i0 * C3, (int)C3, 1.0f, dK + (size_t)j0 * C3, (int)C3);
                        }
                    }
            }
        }
}
