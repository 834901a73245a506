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
 * thread.  The bits do not depend on the thread count.  Workspace: R x BC
 * tiles per thread, on the stack; no T^2 gradient buffer.  The backward is
 * the one flash attention uses too (attn_tiles.c), reading P from att.
 */
#include <cblas.h>
#include <math.h>
#include <string.h>
#include "attn_tiles.h"
#include "vmath.h"

#define R ATT_BR   /* query rows per block */
#define BC ATT_BC  /* key columns per tile (dropout) */

/* att[b,h,i,j] = exp(s_ij - max_j s_ij) / sum_j exp(...) for j <= i, 0 for j > i
 * s_ij = q_i . k_j / sqrt(hs).   att (B,NH,T,T), qkv (B,T,3C).
 * Per block of R rows: S = scale * Q_blk K^T (one sgemm over the causal
 * columns), then a softmax per row. */
void attention_scores_forward(float *att, const float *qkv, int B, int T, int C, int NH)
{
    size_t C3 = 3 * (size_t)C;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            attn_head hd = attn_head_at(qkv, NULL, NULL, b, h, T, C, NH);
            float *A = att + ((size_t)b * NH + h) * T * T;
            for (int i0 = 0; i0 < T; i0 += R) {
                int nr = T - i0 < R ? T - i0 : R, ncol = i0 + nr;
                float *a0 = A + (size_t)i0 * T;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, ncol, hd.hs, hd.scale,
                            hd.Q + (size_t)i0 * C3, (int)C3, hd.K, (int)C3, 0.0f, a0, T);
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
    size_t C3 = 3 * (size_t)C;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            attn_head hd = attn_head_at(qkv, NULL, NULL, b, h, T, C, NH);
            const float *V = hd.V, *A = att + ((size_t)b * NH + h) * T * T;
            float *O = out + (size_t)b * T * C + (size_t)h * hd.hs;
            int hs = hd.hs;
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

/* The backward through values and scores (contract in kernels.h), one
 * task per (b,h): attn_head_backward with P read from att. */
void attention_backward(float *dqkv, const float *dout, const float *att,
                        const float *qkv, const remat_dropout *drop,
                        int B, int T, int C, int NH)
{
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            attn_head hd = attn_head_at(qkv, dout, dqkv, b, h, T, C, NH);
            hd.A = att + ((size_t)b * NH + h) * T * T;
            attn_head_backward(&hd, drop);
        }
}
