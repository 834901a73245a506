/*
 * attention.c -- causal multi-head self-attention core (Vaswani et al. 2017),
 * split into scores (the T^2 softmax probabilities) and values, so that the
 * probabilities can be dropped and recomputed from qkv ("selective"
 * recomputation, Korthikanti et al. 2022).  Contract in kernels.h.
 *
 * Legend: B batch, T sequence length, C channels, NH heads, hs = C/NH.
 * qkv[b,t,:] = [q (C) | k (C) | v (C)]; head h owns channels h*hs..h*hs+hs-1
 * of each third.  att is (B,NH,T,T), row-major, with exact zeros above the
 * diagonal.  dqkv (the only gradient) is assigned (=).
 *
 * Dropout acts on the probabilities inside the value product; the mask is
 * regenerated from remat_dropout with element index ((b*NH+h)*T+i)*T+j, so
 * forward, recomputed forward and backward all see the same mask.
 *
 * No workspace: the backward recomputes dP_ij (an hs-long dot product) in
 * a second pass over row i instead of storing a row of it.  Every loop is
 * O(B*NH*T^2*hs).
 */
#include <math.h>
#include <string.h>
#include "kernels.h"

static inline uint64_t att_index(int b, int h, int i, int j, int NH, int T)
{
    return (((uint64_t)b * NH + h) * T + i) * T + j;
}

/* att[b,h,i,j] = exp(s_ij - max_j s_ij) / sum_j exp(...) for j <= i, 0 for j > i
 * s_ij = q_i . k_j / sqrt(hs).   att (B,NH,T,T), qkv (B,T,3C).
 * Rows are independent: parallel over (b,h,i). */
void attention_scores_forward(float *att, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);

    #pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = qkv + ((size_t)b * T + i) * C3 + (size_t)h * hs;
                float *a = att + (((size_t)b * NH + h) * T + i) * T;
                float maxv = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * C3 + C + (size_t)h * hs;
                    float s = 0.0f;
                    for (int d = 0; d < hs; d++) s += q[d] * k[d];
                    s *= scale;
                    a[j] = s;
                    if (s > maxv) maxv = s;
                }
                float sum = 0.0f;
                for (int j = 0; j <= i; j++) {
                    float e = expf(a[j] - maxv);
                    a[j] = e;
                    sum += e;
                }
                float inv = 1.0f / sum;   /* sum >= 1: the max term is exp(0) */
                for (int j = 0; j <= i; j++) a[j] *= inv;
                for (int j = i + 1; j < T; j++) a[j] = 0.0f;
            }
}

/* out[b,i,h*hs+d] = sum_{j<=i} drop(att[b,h,i,j]) * v[b,j,h*hs+d]
 * out (B,T,C), att (B,NH,T,T), qkv (B,T,3C).  Parallel over (b,i,h):
 * each task owns one hs-long slice of out. */
void attention_values_forward(float *out, const float *att, const float *qkv,
                              const remat_dropout *drop, int B, int T, int C, int NH)
{
    int hs = C / NH;
    size_t C3 = 3 * (size_t)C;

    #pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            for (int h = 0; h < NH; h++) {
                float *o = out + ((size_t)b * T + i) * C + (size_t)h * hs;
                const float *a = att + (((size_t)b * NH + h) * T + i) * T;
                for (int d = 0; d < hs; d++) o[d] = 0.0f;
                for (int j = 0; j <= i; j++) {
                    float p = a[j] * remat_dropout_mult(drop, att_index(b, h, i, j, NH, T));
                    const float *v = qkv + ((size_t)b * T + j) * C3 + 2 * (size_t)C + (size_t)h * hs;
                    for (int d = 0; d < hs; d++) o[d] += p * v[d];
                }
            }
}

/* With P = att, m_ij the dropout multiplier (0 or 1/(1-p)), per (b,h):
 *   dPd_ij = dout_i . v_j,  dP_ij = dPd_ij * m_ij
 *   dS_ij  = P_ij * (dP_ij - sum_{j'<=i} P_ij' dP_ij')      (softmax backward)
 *   dq_i = sum_{j<=i} dS_ij k_j / sqrt(hs),  dk_j = sum_{i>=j} dS_ij q_i / sqrt(hs)
 *   dv_j = sum_{i>=j} P_ij m_ij dout_i
 * dqkv (B,T,3C) assigned, dout (B,T,C), att (B,NH,T,T), qkv (B,T,3C).
 *
 * Parallel over (b,h): the q/k/v slices of head h in batch b are written by
 * that task alone (zeroed first, then accumulated over i in order), so
 * there are no races and the bits do not depend on the thread count.
 * Row i takes two passes: the first forms sum_j P_ij dP_ij (and dv), the
 * second recomputes dP_ij to form dS_ij, instead of keeping a row buffer. */
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
            const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            float *dbase = dqkv + (size_t)b * T * C3 + (size_t)h * hs;
            for (int t = 0; t < T; t++) {
                float *dr = dbase + (size_t)t * C3;
                memset(dr, 0, (size_t)hs * sizeof(float));
                memset(dr + C, 0, (size_t)hs * sizeof(float));
                memset(dr + 2 * (size_t)C, 0, (size_t)hs * sizeof(float));
            }
            for (int i = 0; i < T; i++) {
                const float *a = att + (((size_t)b * NH + h) * T + i) * T;
                const float *q = base + (size_t)i * C3;
                const float *go = dout + ((size_t)b * T + i) * C + (size_t)h * hs;
                float *dq = dbase + (size_t)i * C3;

                /* pass 1: s = sum_j P_ij dP_ij, and dv_j += P_ij m_ij dout_i */
                float s = 0.0f;
                for (int j = 0; j <= i; j++) {
                    const float *v = base + (size_t)j * C3 + 2 * (size_t)C;
                    float *dv = dbase + (size_t)j * C3 + 2 * (size_t)C;
                    float m = remat_dropout_mult(drop, att_index(b, h, i, j, NH, T));
                    float dpd = 0.0f;
                    for (int d = 0; d < hs; d++) dpd += go[d] * v[d];
                    s += a[j] * (dpd * m);
                    float pm = a[j] * m;
                    for (int d = 0; d < hs; d++) dv[d] += pm * go[d];
                }
                /* pass 2: dS_ij, then dq_i and dk_j */
                for (int j = 0; j <= i; j++) {
                    const float *k = base + (size_t)j * C3 + C;
                    const float *v = base + (size_t)j * C3 + 2 * (size_t)C;
                    float *dk = dbase + (size_t)j * C3 + C;
                    float m = remat_dropout_mult(drop, att_index(b, h, i, j, NH, T));
                    float dpd = 0.0f;
                    for (int d = 0; d < hs; d++) dpd += go[d] * v[d];
                    float ds = a[j] * (dpd * m - s) * scale;
                    for (int d = 0; d < hs; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                    }
                }
            }
        }
}
