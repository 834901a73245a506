/*
 * attn_tiles.h -- the tile machinery both attention kernels share
 * (attention.c: the probabilities stored; flash.c: recomputed from q, k and
 * the row logsumexp).  Internal header.
 *
 * Legend as in kernels.h; a tile is ATT_BR query rows x ATT_BC key columns.
 * One "head" is (b,h), h a query head: Q points at its q channels, K and V
 * at those of its kv head h / (NH/KV) (each with its own row stride, from
 * the remat_attn_layout), G at its slice of dout (row stride NH*hs), dQ at
 * its slice of the fp32 gradient and dK/dV at its kv head's (row stride
 * ldg); every product is a GEMM (gemm.h, the tile site) on strided views,
 * nothing is copied, and no K/V is repeated per query head.
 *
 * dtype: under bf16, q, k, v, dout and the stored probabilities are bf16
 * and the GEMMs take bf16 operands; the score tiles, the softmax and the
 * gradient tiles are fp32, and a tile that feeds a GEMM is rounded to bf16
 * first (one rounding, as the forward's).  dQ, dK, dV always accumulate in
 * fp32 (the gradient itself, or a fp32 scratch that is rounded to bf16 at
 * the end).
 */
#ifndef REMAT_ATTN_TILES_H
#define REMAT_ATTN_TILES_H

#include "kernels.h"

#define ATT_BR 64     /* query rows per tile */
#define ATT_BC 128    /* key columns per tile */

/* dropout element index of (b,h,i,j): the same in every kernel and pass */
static inline uint64_t att_index(int b, int h, int i, int j, int NH, int T)
{
    return (((uint64_t)b * NH + h) * T + i) * T + j;
}

/* columns of row i inside the tile at j0 that are causal (j <= i): 0..nc */
static inline int causal_cols(int i, int j0, int nc)
{
    int n = i - j0 + 1;
    return n < 0 ? 0 : n < nc ? n : nc;
}

/* element offset i of a pointer to dt elements */
static inline const void *att_at(const void *p, size_t i, int dt)
{
    return (const char *)p + i * remat_dtype_bytes(dt);
}

typedef struct attn_head {
    const void *Q, *K, *V, *G;    /* q of (b,h), k and v of its kv head, dout of (b,h), in dt */
    float *dQ, *dK, *dV;          /* the slices of the fp32 gradient (ld ldg) */
    const void *A;                /* naive: its probabilities (T x T, ld T, dt); NULL for flash */
    const float *L;               /* flash: its row logsumexp (T); NULL for naive */
    int b, h, NH, T, hs, dt;
    int ldq, ldk, ldv, ldo, ldg;  /* row strides of Q, K, V, G (= NH*hs) and the gradient */
    float scale;                  /* 1/sqrt(hs) */
    const remat_ws *ws;           /* the layout's workspace for the tiles' products (gemm.h), or NULL */
} attn_head;

/* the view of query head h of batch row b: q, k, v from the layout, dout
 * (dt, or NULL) and the fp32 gradient g (layout's ldg, or NULL); A and L
 * left NULL */
attn_head remat_attn_head_at(const remat_attn_layout *L, const void *dout, float *g, int b, int h);

/* s (nr x nc, ld ATT_BC, fp32) = scale * Q[i0..] K[j0..]^T */
void remat_attn_score_tile(float *s, const attn_head *hd, int i0, int nr, int j0, int nc);

/* s = exp(s - lse_i) * m_ij for j <= i, 0 beyond (in place); drop NULL:
 * no mask.  l: the logsumexp of rows i0.. */
void remat_attn_prob_tile(float *s, const float *l, const remat_dropout *drop, const attn_head *hd, int i0, int nr, int j0,
                    int nc);

/* The row logsumexp of rows i0..i0+nr-1 (into l), from the score tiles
 * with an online softmax: one pass over the key tiles with a running max
 * and sum per row.  s: a tile of workspace. */
void remat_attn_row_lse(float *l, float *s, const attn_head *hd, int i0, int nr);

/* out_tile (nr x hs, ld ldo, fp32 or dt) (+)= p (nr x nc fp32 tile) V[j0..]:
 * p is rounded to bf16 first under bf16 (into pb).  beta 0 or 1. */
void remat_attn_pv(void *o, int o_dt, int ldo, const float *p, void *pb, const attn_head *hd, int nr, int j0, int nc,
             float beta);

/* The backward of one head, from the undropped probabilities P (read from
 * hd->A, or recomputed from hd->Q, hd->K and hd->L) and the mask m:
 *   dPd = dout V^T,  D_i = sum_j P_ij m_ij dPd_ij,  dS = P (m dPd - D)
 *   dq = dS K scale,  dk += dS^T Q scale,  dv += (P m)^T dout
 * over ATT_BR-row blocks in two passes over their causal tiles (the first
 * forms D, each tile row's part of it in 16 lanes, the second the rest; a
 * block whose causal columns are one tile keeps the first pass's P and
 * dPd for the second), all in a fixed order: the bits do not depend on which thread runs the
 * head.  dQ is assigned; dK and dV
 * accumulate (their kv head's other query heads add to them too). */
void remat_attn_head_backward(const attn_head *hd, const remat_dropout *drop);

/* The whole backward of both kernels (att for the naive one, lse for
 * flash; the other NULL): one task per (b, kv head), which zeroes its dk,
 * dv and runs the backward of its NH/KV query heads in order, so every
 * gradient element is summed in one fixed order whatever the thread count.
 * Under bf16 the fp32 gradient goes to acc, rounded into dqkv at the end. */
void remat_attn_backward_heads(void *dqkv, const void *dout, const void *att, const float *lse,
                               const remat_attn_layout *L, const remat_dropout *drop, float *acc);

/* the one rounding of the values' fp32 accumulator: nr rows of the head's
 * hs channels (ld NH*hs) from element offset off of acc into out (bf16) */
void remat_attn_round_rows(void *out, const float *acc, const attn_head *hd, size_t off, int nr);

#endif
