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
 * Dropout uses the element index ((b*NH+h)*T+i)*T+j of the naive kernel,
 * so both kernels drop the same elements.  Each (b,h) is one task with a
 * fixed loop order: results are bitwise reproducible and independent of
 * the thread count.  Work is O(B*NH*T^2*hs); memory is O(BR*BC) per thread.
 */
#include <math.h>
#include <string.h>
#include "kernels.h"

#define BR 16
#define BC 64

static inline uint64_t att_index(int b, int h, int i, int j, int NH, int T)
{
    return (((uint64_t)b * NH + h) * T + i) * T + j;
}

/* s[r][c] = q_{i0+r} . k_{j0+c} * scale for the tile (no masking here) */
static void score_tile(float s[BR][BC], const float *qkv, int b, int h, int i0, int nr, int j0, int nc,
                       int T, int C, int hs, float scale)
{
    size_t C3 = 3 * (size_t)C;
    for (int r = 0; r < nr; r++) {
        const float *q = qkv + ((size_t)b * T + i0 + r) * C3 + (size_t)h * hs;
        for (int c = 0; c < nc; c++) {
            const float *k = qkv + ((size_t)b * T + j0 + c) * C3 + C + (size_t)h * hs;
            float acc = 0.0f;
            #pragma omp simd reduction(+:acc)
            for (int d = 0; d < hs; d++) acc += q[d] * k[d];
            s[r][c] = acc * scale;
        }
    }
}

void flash_attention_stats(float *lse, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            float s[BR][BC];
            for (int i0 = 0; i0 < T; i0 += BR) {
                int nr = T - i0 < BR ? T - i0 : BR;
                float mx[BR], sum[BR];
                for (int r = 0; r < BR; r++) { mx[r] = -INFINITY; sum[r] = 0.0f; }
                for (int j0 = 0; j0 <= i0 + nr - 1; j0 += BC) {
                    int nc = T - j0 < BC ? T - j0 : BC;
                    score_tile(s, qkv, b, h, i0, nr, j0, nc, T, C, hs, scale);
                    for (int r = 0; r < nr; r++) {
                        int i = i0 + r, last = i - j0 < nc - 1 ? i - j0 : nc - 1;   /* causal: j <= i */
                        if (last < 0) continue;
                        float tm = mx[r];
                        for (int c = 0; c <= last; c++) tm = s[r][c] > tm ? s[r][c] : tm;
                        float acc = sum[r] * expf(mx[r] - tm);      /* rescale the running sum */
                        for (int c = 0; c <= last; c++) acc += expf(s[r][c] - tm);
                        mx[r] = tm;
                        sum[r] = acc;
                    }
                }
                for (int r = 0; r < nr; r++)
                    lse[((size_t)b * NH + h) * T + i0 + r] = mx[r] + logf(sum[r]);
            }
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
            float s[BR][BC];
            for (int i0 = 0; i0 < T; i0 += BR) {
                int nr = T - i0 < BR ? T - i0 : BR;
                for (int r = 0; r < nr; r++) memset(out + ((size_t)b * T + i0 + r) * C + (size_t)h * hs, 0, sizeof(float) * hs);
                for (int j0 = 0; j0 <= i0 + nr - 1; j0 += BC) {
                    int nc = T - j0 < BC ? T - j0 : BC;
                    score_tile(s, qkv, b, h, i0, nr, j0, nc, T, C, hs, scale);
                    for (int r = 0; r < nr; r++) {
                        int i = i0 + r, last = i - j0 < nc - 1 ? i - j0 : nc - 1;
                        float l = lse[((size_t)b * NH + h) * T + i];
                        float *o = out + ((size_t)b * T + i) * C + (size_t)h * hs;
                        for (int c = 0; c <= last; c++) {
                            float p = expf(s[r][c] - l) * remat_dropout_mult(drop, att_index(b, h, i, j0 + c, NH, T));
                            if (p == 0.0f) continue;
                            const float *v = qkv + ((size_t)b * T + j0 + c) * C3 + 2 * (size_t)C + (size_t)h * hs;
                            #pragma omp simd
                            for (int d = 0; d < hs; d++) o[d] += p * v[d];
                        }
                    }
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
            float s[BR][BC];
            for (int t = 0; t < T; t++)
                for (int part = 0; part < 3; part++)
                    memset(dqkv + ((size_t)b * T + t) * C3 + (size_t)part * C + (size_t)h * hs, 0, sizeof(float) * hs);
            for (int i0 = 0; i0 < T; i0 += BR) {
                int nr = T - i0 < BR ? T - i0 : BR;
                float D[BR];
                for (int r = 0; r < BR; r++) D[r] = 0.0f;
                /* pass 1: D_i = sum_j P_ij dP_ij */
                for (int j0 = 0; j0 <= i0 + nr - 1; j0 += BC) {
                    int nc = T - j0 < BC ? T - j0 : BC;
                    score_tile(s, qkv, b, h, i0, nr, j0, nc, T, C, hs, scale);
                    for (int r = 0; r < nr; r++) {
                        int i = i0 + r, last = i - j0 < nc - 1 ? i - j0 : nc - 1;
                        float l = lse[((size_t)b * NH + h) * T + i];
                        const float *go = dout + ((size_t)b * T + i) * C + (size_t)h * hs;
                        for (int c = 0; c <= last; c++) {
                            const float *v = qkv + ((size_t)b * T + j0 + c) * C3 + 2 * (size_t)C + (size_t)h * hs;
                            float dp = 0.0f;
                            #pragma omp simd reduction(+:dp)
                            for (int d = 0; d < hs; d++) dp += go[d] * v[d];
                            dp *= remat_dropout_mult(drop, att_index(b, h, i, j0 + c, NH, T));
                            D[r] += expf(s[r][c] - l) * dp;
                        }
                    }
                }
                /* pass 2: dS = P (dP - D); dq, dk, dv */
                for (int j0 = 0; j0 <= i0 + nr - 1; j0 += BC) {
                    int nc = T - j0 < BC ? T - j0 : BC;
                    score_tile(s, qkv, b, h, i0, nr, j0, nc, T, C, hs, scale);
                    for (int r = 0; r < nr; r++) {
                        int i = i0 + r, last = i - j0 < nc - 1 ? i - j0 : nc - 1;
                        float l = lse[((size_t)b * NH + h) * T + i];
                        const float *go = dout + ((size_t)b * T + i) * C + (size_t)h * hs;
                        const float *q = qkv + ((size_t)b * T + i) * C3 + (size_t)h * hs;
                        float *dq = dqkv + ((size_t)b * T + i) * C3 + (size_t)h * hs;
                        for (int c = 0; c <= last; c++) {
                            int j = j0 + c;
                            const float *k = qkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                            const float *v = k + C;
                            float *dk = dqkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                            float *dv = dk + C;
                            float mult = remat_dropout_mult(drop, att_index(b, h, i, j, NH, T));
                            float p = expf(s[r][c] - l);
                            float dp = 0.0f;
                            #pragma omp simd reduction(+:dp)
                            for (int d = 0; d < hs; d++) dp += go[d] * v[d];
                            dp *= mult;
                            float ds = p * (dp - D[r]) * scale;
                            float pd = p * mult;
                            #pragma omp simd
                            for (int d = 0; d < hs; d++) {
                                dq[d] += ds * k[d];
                                dk[d] += ds * q[d];
                                dv[d] += pd * go[d];
                            }
                        }
                    }
                }
            }
        }
}
