/*
 * attention.c -- causal multi-head self-attention core (Vaswani et al. 2017),
 * split into scores (the T^2 softmax probabilities) and values, so that the
 * probabilities can be dropped and recomputed from qkv ("selective"
 * recomputation, Korthikanti et al. 2022).  Contract in kernels.h.
 *
 * Legend: B batch, T sequence length, NH query heads, KV key/value heads,
 * hs head size, R x BC a tile of (query rows) x (key columns).
 * q, k, v are strided views (remat_attn_layout, kernels.h): GPT-2's thirds
 * of qkv, or Llama's RoPE'd q|k and the v of qkv; query head h reads kv
 * head h / (NH/KV).  att is (B,NH,T,T), row-major, with exact zeros above
 * the diagonal.  The gradient (dq, dk, dv) is assigned (=).
 *
 * Every product over hs or over j is a GEMM (gemm.h) on a block of R query
 * rows (strided views into q, k, v: nothing is copied, no K/V repeated per
 * query head); the softmax and the dropout mask are applied row by row in
 * between.  A row block i0
 * only touches key columns j < i0 + R, so the work is the causal half of
 * T^2 plus at most one R x R triangle per block.
 *
 * Dropout acts on the probabilities inside the value product; the mask is
 * regenerated from remat_dropout with element index ((b*NH+h)*T+i)*T+j, so
 * forward, recomputed forward and backward all see the same mask.
 *
 * Threads: the forwards have one task per (b,h), which alone writes its
 * slices of att and out; the backward one per (b, kv head), which alone
 * writes dk, dv of that kv head and dq of its query heads, in a fixed
 * order.  A GEMM inside a parallel region runs on the calling thread.  The
 * bits do not depend on the thread count.  Workspace:
 * R x BC tiles per thread, on the stack; no T^2 gradient buffer.  The
 * backward is the one flash attention uses too (attn_tiles.c), reading P
 * from att.
 *
 * bf16: att holds the probabilities rounded to bf16.  The scores of a row
 * block then come tile by tile, in one pass with online softmax statistics
 * (scores_bf16): a row block's fp32 scores never exist whole, and each
 * score tile is one GEMM, as in fp32.  Values accumulate in a fp32 scratch
 * (acc) when there is more than one product per row block (dropout), and
 * gradients always do (attn_tiles.h).
 */
#include <math.h>
#include <string.h>
#include "attn_tiles.h"
#include "vmath.h"

#define R ATT_BR   /* query rows per block */
#define BC ATT_BC  /* key columns per tile (dropout) */

/* att[b,h,i,j] = exp(s_ij - max_j s_ij) / sum_j exp(...) for j <= i, 0 for j > i
 * s_ij = q_i . k_j / sqrt(hs).   att (B,NH,T,T).
 * fp32, per block of R rows: S = scale * Q_blk K^T (one GEMM over the
 * causal columns, straight into att), then a softmax per row. */
static void scores_f32(float *A, const attn_head *hd, int T)
{
    for (int i0 = 0; i0 < T; i0 += R) {
        int nr = T - i0 < R ? T - i0 : R, ncol = i0 + nr;
        float *a0 = A + (size_t)i0 * T;
        remat_gemm_op g = { REMAT_DTYPE_FP32, REMAT_DTYPE_FP32, 0, 1, nr, ncol, hd->hs,
                            hd->scale, 0.0f, (const float *)hd->Q + (size_t)i0 * hd->ldq, hd->ldq, hd->K, hd->ldk,
                            a0, T, NULL, hd->ws };
        remat_gemm(&g);
        for (int r = 0; r < nr; r++) {
            float *a = a0 + (size_t)r * T;
            int n = i0 + r + 1;   /* j <= i */
            float sum = remat_row_expsum(a, a, n, remat_row_max(a, n));
            remat_row_scale(a, n, 1.0f / sum);   /* sum >= 1: the max term is exp(0) */
            memset(a + n, 0, (size_t)(T - n) * sizeof(float));
        }
    }
}

/* bf16: one pass per row block over its key tiles (SBC columns, twice the
 * other kernels' tile: fewer GEMMs, and more rows whose tiles are one),
 * each score tile one GEMM, with online softmax statistics per row
 * (Milakov & Gimelshein 2018, as flash attention keeps them): a reference
 * ref (the first tile's row max) and the running sum of exp(s - ref).  A
 * tile's e = exp(s - ref) is rounded into att as soon as it is made, and
 * when the row's sum is final the row is normalised in place,
 * P = bf16(e) / sum, rounded again; the last tile (the diagonal's) is
 * still fp32 then and is rounded once, P = e / sum.  So a row block's
 * fp32 scores never exist whole, and no score is computed twice.  A row
 * block whose causal columns fit one tile (T <= SBC: every one at 124M,
 * S and Llama-S) is rounded once (relative error <= 2^-8, bf16's unit
 * roundoff); to the left of the last tile P is rounded twice (<= 2^-7).
 * ref stays put while the row's max is at most REF_SLACK above it (e <=
 * e^64: the sum of 2^20 of them stays finite in fp32, and every e keeps
 * fp32's relative precision); past that the stored part of the row and
 * the sum are rescaled to the new max (rescale_row: one more rounding, for
 * scores that jump by more than 64 from one tile to the next). */
#define SBC (2 * ATT_BC)
#define REF_SLACK 64.0f

/* a[j] = bf16(e_j exp(d)) for j < n, d = ref - max < -REF_SLACK.  exp(d)
 * underflows below d = -87.3 while e_j exp(d) need not (e_j <= e^64), so
 * it is applied as exp(d/2) twice in fp32, then rounded once: exact to
 * fp32 rounding for every e_j exp(d) above fp32's smallest normal.  Rare
 * (a row's scores jumping by more than 64), so plain scalar code. */
static void rescale_row(remat_bf16 *a, int n, float d)
{
    float h = remat_expf(0.5f * d);
    for (int j = 0; j < n; j++) a[j] = remat_bf16_round(remat_bf16_to_float(a[j]) * h * h);
}
static void scores_bf16(remat_bf16 *A, const attn_head *hd, int T)
{
    float s[R * SBC], ref[R], sum[R];
    for (int i0 = 0; i0 < T; i0 += R) {
        /* jl: the last tile; SBC is a multiple of R, so jl <= i0 and the tiles before it are all causal */
        int nr = T - i0 < R ? T - i0 : R, ncol = i0 + nr, jl = (ncol - 1) / SBC * SBC;
        remat_bf16 *a0 = A + (size_t)i0 * T;
        for (int j0 = 0; j0 < ncol; j0 += SBC) {
            int nc = ncol - j0 < SBC ? ncol - j0 : SBC;
            remat_gemm_op g = { REMAT_DTYPE_BF16, REMAT_DTYPE_FP32, 0, 1, nr, nc, hd->hs, hd->scale, 0.0f,
                                att_at(hd->Q, (size_t)i0 * hd->ldq, hd->dt), hd->ldq,
                                att_at(hd->K, (size_t)j0 * hd->ldk, hd->dt), hd->ldk, s, SBC, NULL, hd->ws };
            remat_gemm(&g);
            for (int r = 0; r < nr; r++) {
                float *x = s + r * SBC;
                remat_bf16 *a = a0 + (size_t)r * T;
                int n = causal_cols(i0 + r, j0, nc);   /* >= 1 in the first tile */
                if (n) {
                    float t = remat_row_max(x, n);
                    if (!j0) { ref[r] = t; sum[r] = 0.0f; }
                    else if (t > ref[r] + REF_SLACK) {
                        float h = remat_expf(0.5f * (ref[r] - t));
                        rescale_row(a, j0, ref[r] - t);
                        sum[r] = sum[r] * h * h;
                        ref[r] = t;
                    }
                    sum[r] += remat_row_expsum(x, x, n, ref[r]);
                }
                if (j0 < jl) remat_bf16_from_f32(a + j0, x, (size_t)nc);   /* n == nc: left of the diagonal */
            }
        }
        int nl = ncol - jl;
        for (int r = 0; r < nr; r++) {
            remat_bf16 *a = a0 + (size_t)r * T;
            float inv = 1.0f / sum[r];   /* sum >= 1: the first tile's max term is exp(0) */
            int n = causal_cols(i0 + r, jl, nl);
            remat_bf16_scale(a, a, (size_t)jl, inv);
            remat_bf16_from_f32_scaled(a + jl, s + r * SBC, (size_t)n, inv);
            memset(a + jl + n, 0, (size_t)(T - jl - n) * sizeof(remat_bf16));
        }
    }
}

void remat_attention_scores_forward(void *att, const remat_attn_layout *L)
{
    int B = L->B, T = L->T, NH = L->NH, dt = L->dt;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            attn_head hd = remat_attn_head_at(L, NULL, NULL, b, h);
            size_t off = ((size_t)b * NH + h) * T * T;
            if (dt == REMAT_DTYPE_BF16) scores_bf16((remat_bf16 *)att + off, &hd, T);
            else scores_f32((float *)att + off, &hd, T);
        }
}

/* out[b,i,h*hs+d] = sum_{j<=i} drop(att[b,h,i,j]) * v[b,j,kvh*hs+d],  kvh = h / (NH/KV)
 * out (B,T,NH*hs), att (B,NH,T,T).
 * Without dropout: out_blk = P_blk V, one GEMM per row block (the zeros
 * above the diagonal add nothing), straight into out.  With dropout the
 * masked probabilities go through a tile, BC columns at a time, the
 * products adding up in out (fp32) or in acc (bf16). */
void remat_attention_values_forward(void *out, const void *att, const remat_attn_layout *L, const remat_dropout *drop,
                                    float *acc)
{
    int B = L->B, T = L->T, NH = L->NH, dt = L->dt, bf = dt == REMAT_DTYPE_BF16;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            attn_head hd = remat_attn_head_at(L, NULL, NULL, b, h);
            const void *A = att_at(att, ((size_t)b * NH + h) * T * T, dt);
            int ldo = hd.ldo;
            size_t o_off = (size_t)b * T * ldo + (size_t)h * hd.hs;
            float pm[R * BC];
            remat_bf16 pb[bf ? R * BC : 1];
            for (int i0 = 0; i0 < T; i0 += R) {
                int nr = T - i0 < R ? T - i0 : R, ncol = i0 + nr;
                const void *a0 = att_at(A, (size_t)i0 * T, dt);
                size_t o_blk = o_off + (size_t)i0 * ldo;
                if (drop->p <= 0.0f) {
                    remat_gemm_op g = { dt, dt, 0, 0, nr, hd.hs, ncol, 1.0f, 0.0f,
                                        a0, T, hd.V, hd.ldv, (void *)att_at(out, o_blk, dt), ldo, NULL, hd.ws };
                    remat_gemm(&g);
                    continue;
                }
                /* fp32: accumulate in out itself; bf16: in acc, rounded at the end of the block */
                float *o = bf ? acc + o_blk : (float *)out + o_blk;
                for (int j0 = 0; j0 < ncol; j0 += BC) {
                    int nc = ncol - j0 < BC ? ncol - j0 : BC;
                    for (int r = 0; r < nr; r++) {
                        const void *ar = att_at(a0, (size_t)r * T + j0, dt);
                        for (int c = 0; c < nc; c++) {
                            float p = bf ? remat_bf16_to_float(((const remat_bf16 *)ar)[c]) : ((const float *)ar)[c];
                            pm[r * BC + c] = p * remat_dropout_mult(drop, att_index(b, h, i0 + r, j0 + c, NH, T));
                        }
                    }
                    remat_attn_pv(o, REMAT_DTYPE_FP32, ldo, pm, pb, &hd, nr, j0, nc, j0 ? 1.0f : 0.0f);
                }
                if (bf) remat_attn_round_rows(out, acc, &hd, o_blk, nr);
            }
        }
}

/* The backward through values and scores (contract in kernels.h), one
 * task per (b, kv head): attn_head_backward with P read from att. */
void remat_attention_backward(void *dqkv, const void *dout, const void *att, const remat_attn_layout *L,
                              const remat_dropout *drop, float *acc)
{
    remat_attn_backward_heads(dqkv, dout, att, NULL, L, drop, acc);
}
