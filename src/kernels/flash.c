/*
 * flash.c -- causal attention that never materialises the T x T matrix:
 * tiled, with an online softmax (after FlashAttention, Dao et al. 2022, and
 * FlashAttention-2, Dao 2023), for the CPU.  Contract in kernels.h.
 *
 * Legend: B batch, T sequence length, C channels, NH heads, hs = C/NH,
 * BR x BC the tile of (query rows) x (key columns).
 *
 * What is stored between forward and backward is the per-row logsumexp
 *   lse[b,h,i] = log sum_{j<=i} exp(s_ij),   s_ij = q_i . k_j / sqrt(hs)
 * (B*NH*T floats instead of B*NH*T*T).  It is split in two ops like the
 * naive kernel, so that it fits the activation table (`att` holds lse):
 *   stats:  one pass over the key tiles with a running max and sum per row
 *           (the online softmax) gives lse;
 *   values: a second pass recomputes s, forms P = exp(s - lse) exactly
 *           normalised, and accumulates out = drop(P) v tile by tile.
 * The backward recomputes the score tiles twice: once for
 *   D_i = sum_j P_ij dP_ij      (dP_ij = (dout_i . v_j) * mask_ij/(1-p)),
 * and once for dS = P (dP - D), dq, dk and dv.  FlashAttention-2 gets D from
 * rowsum(dout * out) instead; that needs `out` (atty), which the backward
 * of this op does not read, and is wrong under dropout.
 *
 * D_i = rowsum(dout_i * out_i) would be the same number (under dropout too,
 * out_i being sum_j P_ij m_ij v_j), but `out` is not among what this op's
 * backward reads in the activation table, so the schedules would change.
 *
 * Every product is a cblas_sgemm on a BR x BC tile, on strided views into
 * qkv (ld = 3C, nothing copied): S = scale Q_blk K_tile^T, out_blk += P V,
 * dPd = dout_blk V^T, dq += dS K, dk += dS^T Q, dv += (P m)^T dout.  The
 * score tile of (i0, j0) comes from the same call in all four places, so
 * every pass sees the same bits of s and of P.  Only the tiles that cross
 * the diagonal are masked.
 *
 * Dropout uses the element index ((b*NH+h)*T+i)*T+j of the naive kernel,
 * so both kernels drop the same elements.  Each (b,h) is one task with a
 * fixed loop order (sgemm inside a parallel region runs on the calling
 * thread): results are bitwise reproducible and independent of the thread
 * count.  Work is O(B*NH*T^2*hs); memory is two BR x BC tiles per thread,
 * on the stack.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include "kernels.h"
#include "vmath.h"

#define BR 64
#define BC 128

static inline uint64_t att_index(int b, int h, int i, int j, int NH, int T)
{
    return (((uint64_t)b * NH + h) * T + i) * T + j;
}

/* s (nr x nc, ld BC) = scale * Q[i0..] K[j0..]^T; Q, K: head views, ld 3C */
static inline void score_tile(float *s, const float *Q, const float *K, int i0, int nr, int j0, int nc, int hs,
                              size_t C3, float scale)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, scale, Q + (size_t)i0 * C3, (int)C3,
                K + (size_t)j0 * C3, (int)C3, 0.0f, s, BC);
}

/* columns of row i = i0 + r inside tile j0 that are causal (j <= i): 0..nc */
static inline int causal_cols(int i, int j0, int nc)
{
    int n = i - j0 + 1;
    return n < 0 ? 0 : n < nc ? n : nc;
}

void flash_attention_stats(float *lse, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *K = Q + C;
            float s[BR * BC];
            for (int i0 = 0; i0 < T; i0 += BR) {
                int nr = T - i0 < BR ? T - i0 : BR;
                float mx[BR], sum[BR];
                for (int r = 0; r < BR; r++) { mx[r] = -INFINITY; sum[r] = 0.0f; }
                for (int j0 = 0; j0 < i0 + nr; j0 += BC) {
                    int nc = i0 + nr - j0 < BC ? i0 + nr - j0 : BC;
                    score_tile(s, Q, K, i0, nr, j0, nc, hs, C3, scale);
                    for (int r = 0; r < nr; r++) {
                        int n = causal_cols(i0 + r, j0, nc);
                        if (!n) continue;
                        float *x = s + r * BC, t = remat_row_max(x, n), tm = t > mx[r] ? t : mx[r];
                        /* rescale the running sum to the new max, then add this tile's terms */
                        sum[r] = sum[r] * remat_expf(mx[r] - tm) + remat_row_expsum(x, x, n, tm);
                        mx[r] = tm;
                    }
                }
                for (int r = 0; r < nr; r++)
                    lse[((size_t)b * NH + h) * T + i0 + r] = mx[r] + logf(sum[r]);
            }
        }
}

/* P tile: p = exp(s - lse_i) * m_ij for j <= i, 0 beyond (in place in s);
 * drop NULL: no mask */
static inline void prob_tile(float *s, const float *l, const remat_dropout *drop, int b, int h, int i0, int nr,
                             int j0, int nc, int NH, int T)
{
    for (int r = 0; r < nr; r++) {
        float *x = s + r * BC;
        int i = i0 + r, n = causal_cols(i, j0, nc);
        remat_row_expsum(x, x, n, l[r]);
        if (drop && drop->p > 0.0f)
            for (int c = 0; c < n; c++) x[c] *= remat_dropout_mult(drop, att_index(b, h, i, j0 + c, NH, T));
        memset(x + n, 0, (size_t)(nc - n) * sizeof(float));
    }
}

void flash_attention_values(float *out, const float *lse, const float *qkv, const remat_dropout *drop,
                            int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *K = Q + C, *V = Q + 2 * (size_t)C;
            const float *L = lse + ((size_t)b * NH + h) * T;
            float *O = out + (size_t)b * T * C + (size_t)h * hs;
            float s[BR * BC];
            for (int i0 = 0; i0 < T; i0 += BR) {
                int nr = T - i0 < BR ? T - i0 : BR;
                for (int j0 = 0; j0 < i0 + nr; j0 += BC) {
                    int nc = i0 + nr - j0 < BC ? i0 + nr - j0 : BC;
                    score_tile(s, Q, K, i0, nr, j0, nc, hs, C3, scale);
                    prob_tile(s, L + i0, drop, b, h, i0, nr, j0, nc, NH, T);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, s, BC,
                                V + (size_t)j0 * C3, (int)C3, j0 ? 1.0f : 0.0f, O + (size_t)i0 * C, C);
                }
            }
        }
}

void flash_attention_backward(float *dqkv, const float *dout, const float *lse, const float *qkv,
                              const remat_dropout *drop, int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * hs, *K = Q + C, *V = Q + 2 * (size_t)C;
            float *dQ = dqkv + (size_t)b * T * C3 + (size_t)h * hs, *dK = dQ + C, *dV = dQ + 2 * (size_t)C;
            const float *L = lse + ((size_t)b * NH + h) * T;
            const float *G = dout + (size_t)b * T * C + (size_t)h * hs;
            float s[BR * BC], dp[BR * BC], D[BR];
            for (int t = 0; t < T; t++)
                for (int part = 0; part < 3; part++) memset(dQ + (size_t)t * C3 + (size_t)part * C, 0, (size_t)hs * sizeof(float));
            for (int i0 = 0; i0 < T; i0 += BR) {
                int nr = T - i0 < BR ? T - i0 : BR;
                const float *g = G + (size_t)i0 * C;
                for (int r = 0; r < nr; r++) D[r] = 0.0f;
                for (int pass = 1; pass <= 2; pass++)
                    for (int j0 = 0; j0 < i0 + nr; j0 += BC) {
                        int nc = i0 + nr - j0 < BC ? i0 + nr - j0 : BC;
                        score_tile(s, Q, K, i0, nr, j0, nc, hs, C3, scale);
                        prob_tile(s, L + i0, NULL, b, h, i0, nr, j0, nc, NH, T);   /* P, undropped */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, nc, hs, 1.0f, g, C,
                                    V + (size_t)j0 * C3, (int)C3, 0.0f, dp, BC);                   /* dPd */
                        for (int r = 0; r < nr; r++) {
                            int i = i0 + r, n = causal_cols(i, j0, nc);
                            float *p = s + r * BC, *x = dp + r * BC, acc = 0.0f;
                            for (int c = 0; c < n; c++) {
                                float m = remat_dropout_mult(drop, att_index(b, h, i, j0 + c, NH, T));
                                if (pass == 1) acc += p[c] * (x[c] * m);                           /* P dP */
                                else { float ds = p[c] * (x[c] * m - D[r]) * scale; p[c] *= m; x[c] = ds; }
                            }
                            if (pass == 1) D[r] += acc;
                            else memset(x + n, 0, (size_t)(nc - n) * sizeof(float));
                        }
                        if (pass == 1) continue;
                        /* s holds P m, dp holds dS (both 0 above the diagonal) */
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, hs, nc, 1.0f, dp, BC,
                                    K + (size_t)j0 * C3, (int)C3, 1.0f, dQ + (size_t)i0 * C3, (int)C3);
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, dp, BC,
                                    Q + (size_t)i0 * C3, (int)C3, 1.0f, dK + (size_t)j0 * C3, (int)C3);
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nc, hs, nr, 1.0f, s, BC, g, C,
                                    1.0f, dV + (size_t)j0 * C3, (int)C3);
                    }
            }
        }
}
