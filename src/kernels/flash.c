/*
 * flash.c -- causal attention that never materialises the T x T matrix:
 * tiled, with an online softmax (after FlashAttention, Dao et al. 2022, and
 * FlashAttention-2, Dao 2023), for the CPU.  Contract in kernels.h.
 *
 * Legend: B batch, T sequence length, NH query heads, KV key/value heads,
 * hs head size, BR x BC the tile of (query rows) x (key columns).  q, k, v
 * are the strided views of remat_attn_layout (kernels.h); query head h
 * reads kv head h / (NH/KV).
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
 * and once for dS = P (dP - D), dq, dk and dv (once only in a row block
 * whose causal columns are one tile: it keeps them, attn_tiles.h).  FlashAttention-2 gets D from
 * rowsum(dout * out) instead; that needs `out` (atty), which the backward
 * of this op does not read, and is wrong under dropout.
 *
 * D_i = rowsum(dout_i * out_i) would be the same number (under dropout too,
 * out_i being sum_j P_ij m_ij v_j), but `out` is not among what this op's
 * backward reads in the activation table, so the schedules would change.
 *
 * Every product is a GEMM (gemm.h) on a BR x BC tile, on strided views into
 * q, k, v (nothing copied): S = scale Q_blk K_tile^T, out_blk += P V,
 * and the backward shared with the naive kernel (attn_tiles.c), which gets
 * P from the same score tiles.  The score tile of (i0, j0) comes from the
 * same call in every place, so every pass sees the same bits of s and of P.
 * Only the tiles that cross the diagonal are masked.
 *
 * Dropout uses the element index ((b*NH+h)*T+i)*T+j of the naive kernel,
 * so both kernels drop the same elements.  Each (b,h) is one task of the
 * forwards, each (b, kv head) one of the backward (its query heads in
 * order), with a fixed loop order (sgemm inside a parallel region runs on
 * the calling thread): results are bitwise reproducible and independent of
 * the thread count.  Work is O(B*NH*T^2*hs); memory is two BR x BC tiles per thread,
 * on the stack.  Under bf16, lse stays fp32, P is rounded to bf16 for the
 * value product, and out and the gradients accumulate in fp32 scratch
 * (acc) before their one rounding.
 */
#include <math.h>
#include <string.h>
#include "attn_tiles.h"
#include "vmath.h"

void remat_flash_attention_stats(float *lse, const remat_attn_layout *L)
{
    int B = L->B, T = L->T, NH = L->NH;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            attn_head hd = remat_attn_head_at(L, NULL, NULL, b, h);
            float s[ATT_BR * ATT_BC];
            for (int i0 = 0; i0 < T; i0 += ATT_BR) {
                int nr = T - i0 < ATT_BR ? T - i0 : ATT_BR;
                remat_attn_row_lse(lse + ((size_t)b * NH + h) * T + i0, s, &hd, i0, nr);
            }
        }
}

void remat_flash_attention_values(void *out, const float *lse, const remat_attn_layout *L, const remat_dropout *drop,
                                  float *acc)
{
    int B = L->B, T = L->T, NH = L->NH, bf = L->dt == REMAT_DTYPE_BF16;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            attn_head hd = remat_attn_head_at(L, NULL, NULL, b, h);
            const float *l = lse + ((size_t)b * NH + h) * T;
            int ldo = hd.ldo;
            size_t o_off = (size_t)b * T * ldo + (size_t)h * hd.hs;
            float s[ATT_BR * ATT_BC];
            remat_bf16 pb[bf ? ATT_BR * ATT_BC : 1];
            for (int i0 = 0; i0 < T; i0 += ATT_BR) {
                int nr = T - i0 < ATT_BR ? T - i0 : ATT_BR;
                size_t o_blk = o_off + (size_t)i0 * ldo;
                float *o = bf ? acc + o_blk : (float *)out + o_blk;
                for (int j0 = 0; j0 < i0 + nr; j0 += ATT_BC) {
                    int nc = i0 + nr - j0 < ATT_BC ? i0 + nr - j0 : ATT_BC;
                    remat_attn_score_tile(s, &hd, i0, nr, j0, nc);
                    remat_attn_prob_tile(s, l + i0, drop, &hd, i0, nr, j0, nc);
                    remat_attn_pv(o, REMAT_DTYPE_FP32, ldo, s, pb, &hd, nr, j0, nc, j0 ? 1.0f : 0.0f);
                }
                if (bf) remat_attn_round_rows(out, acc, &hd, o_blk, nr);
            }
        }
}

void remat_flash_attention_backward(void *dqkv, const void *dout, const float *lse, const remat_attn_layout *L,
                                    const remat_dropout *drop, float *acc)
{
    remat_attn_backward_heads(dqkv, dout, NULL, lse, L, drop, acc);
}
