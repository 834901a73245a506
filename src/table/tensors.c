/*
 * tensors.c -- remat's own tensor tables, GPT-2 and Llama (see tensors.h),
 * and what every table's formulas evaluate to: byte sizes, FLOPs, scratch.
 *
 * FLOPs count multiply-adds as 2; matrix products dominate.  A product is
 * an entry's (M, N, K) (linear layers, the LM head) or, for attention, one
 * causal T x T x hs product per query head (only j <= i: the TRI
 * dimension).  Pointwise ops carry small per-element constants; they matter
 * only for the cost model, not for correctness.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "tabledef.h"
#include "params.h"
#include "../core/core.h"
#include "../core/rng.h"

/* ---- dimensions and formulas --------------------------------------------------- */

void remat_dims_of(const remat_config *c, remat_dims *o)
{
    uint64_t T = (uint64_t)c->seq;
    o->d[RD_1] = 1;
    o->d[RD_B] = (uint64_t)c->batch;
    o->d[RD_T] = T;
    o->d[RD_C] = (uint64_t)c->n_embd;
    o->d[RD_F] = (uint64_t)remat_config_ffn_dim(c);
    o->d[RD_NH] = (uint64_t)c->n_head;
    o->d[RD_KV] = (uint64_t)remat_config_kv_heads(c);
    o->d[RD_HS] = (uint64_t)remat_config_head_dim(c);
    o->d[RD_V] = (uint64_t)c->vocab;
    o->d[RD_VP] = (uint64_t)remat_config_padded_vocab(c);
    o->d[RD_TRI] = T * (T + 1) / 2;
    o->d[RD_ROWS] = (uint64_t)remat_lmhead_rows(c);
    o->d[RD_MAXT] = (uint64_t)c->max_seq;
    o->d[RD_CP] = (uint64_t)remat_config_cp(c);
    if (c->n_experts > 0) {
        uint64_t etp = (uint64_t)remat_config_etp(c), tp = (uint64_t)remat_config_tp(c);
        o->d[RD_E] = (uint64_t)c->n_experts;
        o->d[RD_K] = (uint64_t)c->moe_topk;
        /* the balanced share k B T etp / tp, exact in a double up to 2^53 */
        double r = ceil(remat_config_moe_rank_load(c) * (double)c->moe_topk * (double)c->batch * (double)T *
                        (double)etp / (double)tp);
        o->d[RD_R] = (uint64_t)r;
        o->d[RD_EF] = (uint64_t)c->moe_ffn_dim / etp;
        o->d[RD_SF] = (uint64_t)c->moe_shared_dim;
        o->d[RD_SC] = c->moe_shared_dim ? (uint64_t)c->n_embd : 0;
        o->d[RD_QKF] = c->qk_norm ? 1 : 0;
        o->d[RD_MOEL] = 1;
    } else {
        o->d[RD_E] = o->d[RD_K] = o->d[RD_R] = o->d[RD_EF] = o->d[RD_SF] = o->d[RD_SC] = 0;
        o->d[RD_QKF] = o->d[RD_MOEL] = 0;
    }
    o->d[RD_LQ] = (uint64_t)c->q_lora_rank;
    o->d[RD_LKV] = (uint64_t)c->kv_lora_rank;
    o->d[RD_DN] = (uint64_t)c->qk_nope_dim;
    o->d[RD_DR] = (uint64_t)c->qk_rope_dim;
    o->d[RD_DV] = (uint64_t)c->v_head_dim;
    o->d[RD_BF16] = c->dtype == REMAT_DTYPE_BF16;
    o->d[RD_FP32] = c->dtype != REMAT_DTYPE_BF16;
    o->d[RD_F32E] = c->dtype == REMAT_DTYPE_BF16 ? 2 : 1;
    o->d[RD_SPG] = c->sp && remat_config_tp(c) > 1;
    o->d[RD_B1] = c->batch == 1;
    /* multi-latent attention: the attention products are QK^T over the
     * dn + dr columns and PV over dv, one product of hs = dn + dr + dv
     * forward and two backward (the tables' ATTN(1, 2)) */
    if (c->kv_lora_rank > 0) o->d[RD_HS] = (uint64_t)(c->qk_nope_dim + c->qk_rope_dim + c->v_head_dim);
}

void remat_dims_at(const remat_config *c, int layer, remat_dims *o)
{
    remat_dims_of(c, o);
    if (!remat_layer_dense(c, layer)) return;
    o->d[RD_E] = o->d[RD_K] = o->d[RD_R] = o->d[RD_EF] = o->d[RD_MOEL] = 0;
    o->d[RD_SF] = (uint64_t)remat_config_ffn_dim(c);
    o->d[RD_SC] = (uint64_t)c->n_embd;
}

/* the block whose dimensions a layer-less query of entry t reads: the
 * chain's last (a routed layer unless every block is dense), -1 for globals */
static int rep_layer(const remat_config *c, const remat_table *tb, int t)
{
    return t < tb->nblock ? c->n_layer - 1 : -1;
}

uint64_t remat_expr_u64(const remat_expr *e, const remat_dims *dm)
{
    uint64_t v = 0;
    for (int i = 0; i < RX_TERMS; i++) {
        if (!e->t[i].k) continue;
        uint64_t p = (uint64_t)e->t[i].k;
        for (int f = 0; f < RX_FACTORS && e->t[i].d[f]; f++) p *= dm->d[e->t[i].d[f]];
        v += p;
    }
    return v;
}

double remat_expr_f64(const remat_expr *e, const remat_dims *dm)
{
    double v = 0;
    for (int i = 0; i < RX_TERMS; i++) {
        if (!e->t[i].k) continue;
        double p = e->t[i].k;
        for (int f = 0; f < RX_FACTORS && e->t[i].d[f]; f++) p *= (double)dm->d[e->t[i].d[f]];
        v += p;
    }
    return v;
}

int remat_expr_empty(const remat_expr *e)
{
    for (int i = 0; i < RX_TERMS; i++)
        if (e->t[i].k) return 0;
    return 1;
}

/* ---- the tables ------------------------------------------------------------------ */

/* an op's product counts and extra FLOPs */
#define COST(fp, bp, f, b) { fp, bp, f, b }
/* weights, bias, dropout site */
#define WBS(w_, b_, s_) .w = (w_), .b = (b_), .site = (s_)
#define NOWB WBS(-1, -1, 0)
/* the backward's gradient roles */
#define GR(o, i) .gout = (o), .gin = (i)
#define NOGR GR(N_, N_)
#define LINEAR_DIMS(m_, n_, k_) .gemm = { m_, n_, k_ }

/* The kernels' workspace (RS_SERIAL, RS_THREAD, RS_GEMM items; tensors.h)
 * where bf16 products run on fp32 copies (RW_EMU; gemm.c): a product of
 * (M, N, K) takes at most M K + N K + M N floats and 32 of alignment
 * (remat_gemm_ws_bytes).
 *   a linear layer: its one product forward, and backward d(in) (M K + N K
 *     + M N) then d(W) (M N + M K), one after the other: the bound of its
 *     (M, N, K) both ways;
 *   the attention tiles, per thread (RT_ATT_BR x RT_ATT_BC tiles, the bf16
 *     scores' tiles twice as wide; attn_tiles.c): the largest of a score
 *     tile (R hs + 2 BC hs), P V (R BC + BC hs + R hs) and the backward's
 *     (R hs + BC hs, R BC + BC hs, R BC + R hs), bounded by R BC + 2 BC hs
 *     + R hs; the naive values forward's row blocks besides, P V of R x T
 *     by T x hs (R T + T hs + R hs). */
#define LINEAR_WS .scratch = { { RX(RX_T(32, RD_1)), RT_P_F32, RW_BF16 | RW_EMU, RS_GEMM }, \
                               { RX(RX_T(32, RD_1)), RT_P_F32, RW_BF16 | RW_EMU | RW_BWD, RS_GEMM } }
#define TILE_E RX(RX_T(RT_ATT_BR * RT_ATT_BC + 32, RD_1), RX_T(2 * RT_ATT_BC + RT_ATT_BR, RD_HS))
#define VALUES_E RX(RX_T(RT_ATT_BR, RD_T), RX_T(1, RD_T, RD_HS), RX_T(RT_ATT_BR, RD_HS), RX_T(32, RD_1))
#define SCORES_WS .scratch = { { TILE_E, RT_P_F32, RW_BF16 | RW_EMU, RS_THREAD } }
/* the fp32 accumulators of the bf16 attention kernels: the values' (of the
 * flash kernel, and of the naive one with dropout), the gradients'; the
 * tiles' workspace */
#define ATT_SCRATCH(out_, dqkv_)                                                                   \
    .scratch = { { out_, RT_P_F32, RW_BF16 | RW_FLASH }, { out_, RT_P_F32, RW_BF16 | RW_NAIVE | RW_DROPOUT }, \
                 { dqkv_, RT_P_F32, RW_BF16 | RW_BWD },                                           \
                 { TILE_E, RT_P_F32, RW_BF16 | RW_EMU | RW_FLASH, RS_THREAD },                     \
                 { TILE_E, RT_P_F32, RW_BF16 | RW_EMU | RW_NAIVE | RW_DROPOUT, RS_THREAD },        \
                 { VALUES_E, RT_P_F32, RW_BF16 | RW_EMU | RW_NAIVE, RS_THREAD },                   \
                 { TILE_E, RT_P_F32, RW_BF16 | RW_EMU | RW_BWD, RS_THREAD } }
/* the LM head: chunked, a chunk of fp32 logits and, under bf16, its
 * d(logits) rounded to bf16 as a GEMM operand; its products' copies where
 * bf16 products are emulated (a chunk's logits, d(lnf) and d(W), or the
 * whole head's forward and backward: ROWS x Vp x C both ways); whole, under
 * bf16, the cross-entropy's fp32 row of V per thread (crossentropy.c) */
#define HEAD_WS_E RX(RX_T(1, RD_ROWS, RD_C), RX_T(1, RD_VP, RD_C), RX_T(1, RD_ROWS, RD_VP), RX_T(32, RD_1))
#define HEAD_SCRATCH                                                                               \
    .scratch = { { E1(1, RD_ROWS, RD_VP), RT_P_F32, RW_CHUNKED }, { E1(1, RD_ROWS, RD_VP), RT_P_ACT, RW_CHUNKED | RW_BF16 }, \
                 { HEAD_WS_E, RT_P_F32, RW_BF16 | RW_EMU, RS_SERIAL },                             \
                 { HEAD_WS_E, RT_P_F32, RW_BF16 | RW_EMU | RW_WHOLE | RW_BWD, RS_SERIAL },         \
                 { E1(1, RD_V), RT_P_F32, RW_BF16 | RW_WHOLE, RS_THREAD } }

/* the LM head, the same in both tables but the ids: logits overwritten in
 * place by d(logits) by the fused cross-entropy, so its backward consumes
 * (frees) it; chunked, logits, loss and d(lnf) in one pass, and `logits`
 * holds d(lnf) */
#define LM_HEAD(X, w_, what)                                                                              \
    { .name = "logits", .op = what " + softmax/xent", .cls = RT_CLASS_GLOBAL, .flags = RT_F_GEMM,         \
      .shape = E1(1, BT, RD_VP), .shape_text = "(B,T,Vp)", .prec = RT_P_ACT,                             \
      .kernel = RK_LMHEAD, .opc = RO_LMHEAD, WBS(w_, -1, 0), LINEAR_DIMS(E1(1, BT), E1(1, RD_VP), E1(1, RD_C)), \
      .cost = COST(1, 2, E1(5, BT, RD_V), RX_0),                                                          \
      .fwd_in = R(X##_LNF, N_, N_), .bwd_in = R(X##_LNF, X##_LOGITS, N_), .has_bwd = 1,                   \
      .g_need = NOG, .g_alloc = G(X##_D_LNF, N_), .g_free = G(X##_LOGITS, N_), GR(X##_LOGITS, X##_D_LNF),  \
      HEAD_SCRATCH, .variant = RT_VAR_CHUNKED, .vshape = E1(1, BTC), .vshape_text = "(B,T,C)",           \
      .vop = "chunked lm head + xent; holds d(lnf)", .vprec = RT_P_ACT,                                   \
      .vcost = COST(3, 0, E1(5, BT, RD_V), E1(1, BTC)) }

/* an activation-gradient buffer */
#define GRAD(name_, what, flags_, sh, text, prec_)                                                       \
    { .name = name_, .op = what, .cls = RT_CLASS_GRAD, .flags = flags_, .shape = sh, .shape_text = text, \
      .prec = prec_, NOWB, .fwd_in = NOR, .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR }

/* GPT-2: a block's tensors in forward order.  Gradient flow in one block's
 * backward (bwd order res3 .. ln1): d_res -> [res3] d_fch -> [fch_gelu]
 * d_fch -> [fch] d_ln2 -> [ln2] d_res += ; d_res -> [res2] d_atty ->
 * [atty] d_qkv -> [qkv] d_ln1 -> [ln1] d_res +=.  With dropout the
 * residual branches first mask d_res into d_branch (and under bf16 round
 * it there). */
static const remat_tensor_def gpt2_defs[RT_COUNT] = {
    [RT_LN1_STAT] = { .name = "ln1_stat", .op = "layernorm stats (ln_1)", .cls = RT_CLASS_BLOCK,
                      .shape = E1(2, BT), .shape_text = "(B,T,2)", .prec = RT_P_F32,
                      .kernel = RK_LN_STATS, NOWB, .cost = COST(0, 0, E1(3, BTC), RX_0),
                      .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR },
    [RT_LN1] = { .name = "ln1", .op = "layernorm apply (ln_1)", .cls = RT_CLASS_BLOCK, .flags = RT_F_POINTWISE,
                 .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_ACT,
                 .kernel = RK_LN, WBS(GP_LN1W, GP_LN1B, 0), .cost = COST(0, 0, E1(4, BTC), E1(10, BTC)),
                 .fwd_in = R(RT_X, RT_LN1_STAT, N_), .bwd_in = R(RT_X, RT_LN1_STAT, N_), .has_bwd = 1,
                 .g_need = G(RT_D_RES, RT_D_LN1), .g_alloc = NOG, .g_free = G(RT_D_LN1, N_), GR(RT_D_LN1, RT_D_RES) },
    [RT_QKV] = { .name = "qkv", .op = "linear (c_attn)", .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM,
                 .shape = E1(3, BTC), .shape_text = "(B,T,3C)", .prec = RT_P_ACT,
                 .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(GP_QKVW, GP_QKVB, 0),
                 LINEAR_DIMS(E1(1, BT), E1(3, RD_C), E1(1, RD_C)), LINEAR_WS, .cost = COST(1, 2, E1(3, BTC), E1(3, BTC)),
                 .fwd_in = R(RT_LN1, N_, N_), .bwd_in = R(RT_LN1, N_, N_), .has_bwd = 1,
                 .g_need = G(RT_D_QKV, N_), .g_alloc = G(RT_D_LN1, N_), .g_free = G(RT_D_QKV, N_), GR(RT_D_QKV, RT_D_LN1) },
    [RT_ATT] = { .name = "att", .op = "softmax(q k^T/sqrt(hs))", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_GEMM | RT_F_SELECTIVE, .shape = E1(1, RD_B, RD_NH, RD_T, RD_T),
                 .shape_text = "(B,NH,T,T)", .prec = RT_P_ACT, .kernel = RK_ATT_SCORES, .opc = RO_ATTENTION, NOWB, SCORES_WS,
                 .cost = COST(1, 0, E1(5, RD_B, RD_NH, RD_TRI), RX_0),
                 .fwd_in = R(RT_QKV, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR,
                 .variant = RT_VAR_FLASH, .vshape = E1(1, RD_B, RD_NH, RD_T), .vshape_text = "(B,NH,T)",
                 .vop = "logsumexp of q k^T/sqrt(hs) (flash)", .vprec = RT_P_F32,
                 .vcost = COST(1, 0, E1(5, RD_B, RD_NH, RD_TRI), RX_0) },
    /* the backward of the whole attention core; flash recomputes the scores
     * in the values (2 products) and twice in the backward (7: S and dP in
     * each of its two passes, then dq, dk, dv) */
    [RT_ATTY] = { .name = "atty", .op = "attention values (att v)", .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM,
                  .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_ACT,
                  .kernel = RK_ATT_VALUES, .opc = RO_ATTENTION, WBS(-1, -1, REMAT_SITE_ATT),
                  .cost = COST(1, 5, RX_0, E1(6, RD_B, RD_NH, RD_TRI)),
                  .fwd_in = R(RT_ATT, RT_QKV, N_), .bwd_in = R(RT_ATT, RT_QKV, N_), .has_bwd = 1,
                  .g_need = G(RT_D_ATTY, N_), .g_alloc = G(RT_D_QKV, N_), .g_free = G(RT_D_ATTY, N_),
                  GR(RT_D_ATTY, RT_D_QKV), ATT_SCRATCH(E1(1, BTC), E1(3, BTC)),
                  .variant = RT_VAR_FLASH, .vshape = E1(1, BTC), .vshape_text = "(B,T,C)",
                  .vop = "attention values (flash)", .vprec = RT_P_ACT,
                  .vcost = COST(2, 7, E1(3, RD_B, RD_NH, RD_TRI), E1(10, RD_B, RD_NH, RD_TRI)) },
    [RT_RES2] = { .name = "res2", .op = "linear (c_proj) + residual", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_GEMM | RT_F_RESIDUAL, .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_F32,
                  .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(GP_ATTPROJW, GP_ATTPROJB, REMAT_SITE_RES_ATTN),
                  LINEAR_DIMS(E1(1, BT), E1(1, RD_C), E1(1, RD_C)), LINEAR_WS, .cost = COST(1, 2, E1(2, BTC), E1(1, BTC)),
                  .fwd_in = R(RT_ATTY, RT_X, N_), .bwd_in = R(RT_ATTY, N_, N_), .has_bwd = 1,
                  .g_need = G(RT_D_RES, N_), .g_alloc = G(RT_D_ATTY, RT_D_BRANCH), .g_free = G(RT_D_BRANCH, N_),
                  GR(RT_D_RES, RT_D_ATTY) },
    [RT_LN2_STAT] = { .name = "ln2_stat", .op = "layernorm stats (ln_2)", .cls = RT_CLASS_BLOCK,
                      .shape = E1(2, BT), .shape_text = "(B,T,2)", .prec = RT_P_F32,
                      .kernel = RK_LN_STATS, NOWB, .cost = COST(0, 0, E1(3, BTC), RX_0),
                      .fwd_in = R(RT_RES2, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR },
    [RT_LN2] = { .name = "ln2", .op = "layernorm apply (ln_2)", .cls = RT_CLASS_BLOCK, .flags = RT_F_POINTWISE,
                 .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_ACT,
                 .kernel = RK_LN, WBS(GP_LN2W, GP_LN2B, 0), .cost = COST(0, 0, E1(4, BTC), E1(10, BTC)),
                 .fwd_in = R(RT_RES2, RT_LN2_STAT, N_), .bwd_in = R(RT_RES2, RT_LN2_STAT, N_), .has_bwd = 1,
                 .g_need = G(RT_D_RES, RT_D_LN2), .g_alloc = NOG, .g_free = G(RT_D_LN2, N_), GR(RT_D_LN2, RT_D_RES) },
    [RT_FCH] = { .name = "fch", .op = "linear (c_fc)", .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM,
                 .shape = E1(4, BTC), .shape_text = "(B,T,4C)", .prec = RT_P_ACT,
                 .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(GP_FCW, GP_FCB, 0),
                 LINEAR_DIMS(E1(1, BT), E1(4, RD_C), E1(1, RD_C)), LINEAR_WS, .cost = COST(1, 2, E1(4, BTC), E1(4, BTC)),
                 .fwd_in = R(RT_LN2, N_, N_), .bwd_in = R(RT_LN2, N_, N_), .has_bwd = 1,
                 .g_need = G(RT_D_FCH, N_), .g_alloc = G(RT_D_LN2, N_), .g_free = G(RT_D_FCH, N_), GR(RT_D_FCH, RT_D_LN2) },
    /* its backward works in place on d_fch */
    [RT_FCH_GELU] = { .name = "fch_gelu", .op = "gelu (tanh)", .cls = RT_CLASS_BLOCK, .flags = RT_F_POINTWISE,
                      .shape = E1(4, BTC), .shape_text = "(B,T,4C)", .prec = RT_P_ACT, .kernel = RK_GELU, NOWB,
                      .cost = COST(0, 0, E1(32, BTC), E1(48, BTC)),
                      .fwd_in = R(RT_FCH, N_, N_), .bwd_in = R(RT_FCH, N_, N_), .has_bwd = 1,
                      .g_need = G(RT_D_FCH, N_), .g_alloc = NOG, .g_free = NOG, GR(RT_D_FCH, RT_D_FCH) },
    [RT_RES3] = { .name = "res3", .op = "linear (mlp c_proj) + residual", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_GEMM | RT_F_RESIDUAL, .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_F32,
                  .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(GP_FCPROJW, GP_FCPROJB, REMAT_SITE_RES_MLP),
                  LINEAR_DIMS(E1(1, BT), E1(1, RD_C), E1(4, RD_C)), LINEAR_WS, .cost = COST(1, 2, E1(2, BTC), E1(1, BTC)),
                  .fwd_in = R(RT_FCH_GELU, RT_RES2, N_), .bwd_in = R(RT_FCH_GELU, N_, N_), .has_bwd = 1,
                  .g_need = G(RT_D_RES, N_), .g_alloc = G(RT_D_FCH, RT_D_BRANCH), .g_free = G(RT_D_BRANCH, N_),
                  GR(RT_D_RES, RT_D_FCH) },
    [RT_EMB] = { .name = "emb", .op = "embedding wte+wpe", .cls = RT_CLASS_GLOBAL, .shape = E1(1, BTC),
                 .shape_text = "(B,T,C)", .prec = RT_P_F32, .kernel = RK_EMBED, WBS(GP_WTE, GP_WPE, 0),
                 .cost = COST(0, 0, E1(1, BTC), E1(2, BTC)), .fwd_in = NOR, .bwd_in = NOR, .has_bwd = 1,
                 .g_need = G(RT_D_RES, N_), .g_alloc = NOG, .g_free = G(RT_D_RES, N_), GR(RT_D_RES, N_) },
    [RT_LNF_STAT] = { .name = "lnf_stat", .op = "layernorm stats (ln_f)", .cls = RT_CLASS_GLOBAL,
                      .shape = E1(2, BT), .shape_text = "(B,T,2)", .prec = RT_P_F32,
                      .kernel = RK_LN_STATS, NOWB, .cost = COST(0, 0, E1(3, BTC), RX_0),
                      .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR },
    [RT_LNF] = { .name = "lnf", .op = "layernorm apply (ln_f)", .cls = RT_CLASS_GLOBAL,
                 .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_ACT,
                 .kernel = RK_LN, WBS(GP_LNFW, GP_LNFB, 0), .cost = COST(0, 0, E1(4, BTC), E1(10, BTC)),
                 .fwd_in = R(RT_X, RT_LNF_STAT, N_), .bwd_in = R(RT_X, RT_LNF_STAT, N_), .has_bwd = 1,
                 .g_need = G(RT_D_LNF, N_), .g_alloc = G(RT_D_RES, N_), .g_free = G(RT_D_LNF, N_), GR(RT_D_LNF, RT_D_RES) },
    [RT_LOGITS] = LM_HEAD(RT, GP_WTE, "lm head (wte^T)"),
    [RT_D_RES] = GRAD("d_res", "grad of residual stream", RT_F_ZERO, E1(1, BTC), "(B,T,C)", RT_P_F32),
    [RT_D_LNF] = GRAD("d_lnf", "grad of lnf", 0, E1(1, BTC), "(B,T,C)", RT_P_ACT),
    [RT_D_FCH] = GRAD("d_fch", "grad of fch_gelu, then fch", 0, E1(4, BTC), "(B,T,4C)", RT_P_ACT),
    [RT_D_LN2] = GRAD("d_ln2", "grad of ln2", 0, E1(1, BTC), "(B,T,C)", RT_P_ACT),
    [RT_D_ATTY] = GRAD("d_atty", "grad of atty", 0, E1(1, BTC), "(B,T,C)", RT_P_ACT),
    [RT_D_QKV] = GRAD("d_qkv", "grad of qkv", 0, E1(3, BTC), "(B,T,3C)", RT_P_ACT),
    [RT_D_LN1] = GRAD("d_ln1", "grad of ln1", 0, E1(1, BTC), "(B,T,C)", RT_P_ACT),
    [RT_D_BRANCH] = GRAD("d_branch", "grad of a residual branch (dropout or bf16)", RT_F_BRANCH, E1(1, BTC), "(B,T,C)",
                         RT_P_ACT),
};

const remat_table remat_table_gpt2 = {
    .name = "remat",
    .arch = REMAT_ARCH_GPT2,
    .count = RT_COUNT,
    .nblock = RT_NBLOCK,
    .first_grad = RT_D_RES,
    .emb = RT_EMB,
    .d_res = RT_D_RES,
    .d_branch = RT_D_BRANCH,
    .nlmhead = 3, .lmhead = { RT_LNF_STAT, RT_LNF, RT_LOGITS },
    .nlmhead_bwd = 2, .lmhead_bwd = { RT_LOGITS, RT_LNF },
    .nbwd = 8, .bwd = { RT_RES3, RT_FCH_GELU, RT_FCH, RT_LN2, RT_RES2, RT_ATTY, RT_QKV, RT_LN1 },
    .defs = gpt2_defs,
};

/* Llama (Hugging Face's LlamaDecoderLayer): a block's tensors in forward
 * order.  q, k and v come from one product; RoPE rotates the q and k
 * columns into qk_rope (the v columns are read from qkv in place, never
 * copied), and grouped-query attention reads each of the KV heads' k and v
 * for NH/KV query heads.  Gradient flow in one block's backward: d_res ->
 * [res3] d_swiglu -> [swiglu] d_gate_up -> [gate_up] d_ln2 -> [ln2] d_res
 * += ; d_res -> [res2] d_atty -> [atty] d_qkv (dq, dk after RoPE; dv) ->
 * [qk_rope] d_qkv (dq, dk rotated back in place) -> [qkv] d_ln1 -> [ln1]
 * d_res +=.  The naive values read only att and qkv's v; qk_rope is
 * declared for the flash kernel, which recomputes the scores. */
#define QKV_W RX(RX_T(1, RD_NH, RD_HS), RX_T(2, RD_KV, RD_HS))
#define QKV_E RX(RX_T(1, BT, RD_NH, RD_HS), RX_T(2, BT, RD_KV, RD_HS))
#define QK_E RX(RX_T(1, BT, RD_NH, RD_HS), RX_T(1, BT, RD_KV, RD_HS))
#define ATTY_E E1(1, BT, RD_NH, RD_HS)
#define BTF RD_B, RD_T, RD_F
static const remat_tensor_def llama_defs[RL_COUNT] = {
    [RL_LN1_RSTD] = { .name = "ln1_rstd", .op = "rmsnorm rstd (input_layernorm)", .cls = RT_CLASS_BLOCK,
                      .shape = E1(1, BT), .shape_text = "(B,T,1)", .prec = RT_P_F32,
                      .kernel = RK_RMS_STATS, NOWB, .cost = COST(0, 0, E1(2, BTC), RX_0),
                      .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR },
    [RL_LN1] = { .name = "ln1", .op = "rmsnorm apply (input_layernorm)", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_POINTWISE, .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_ACT,
                 .kernel = RK_RMS, WBS(LP_LN1W, -1, 0), .cost = COST(0, 0, E1(2, BTC), E1(8, BTC)),
                 .fwd_in = R(RT_X, RL_LN1_RSTD, N_), .bwd_in = R(RT_X, RL_LN1_RSTD, N_), .has_bwd = 1,
                 .g_need = G(RL_D_RES, RL_D_LN1), .g_alloc = NOG, .g_free = G(RL_D_LN1, N_), GR(RL_D_LN1, RL_D_RES) },
    [RL_QKV] = { .name = "qkv", .op = "linear (q_proj, k_proj, v_proj)", .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM,
                 .shape = QKV_E, .shape_text = "(B,T,(NH+2KV)hs)", .prec = RT_P_ACT,
                 .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(LP_QKVW, -1, 0),
                 LINEAR_DIMS(E1(1, BT), QKV_W, E1(1, RD_C)), LINEAR_WS, .cost = COST(1, 2, RX_0, RX_0),
                 .fwd_in = R(RL_LN1, N_, N_), .bwd_in = R(RL_LN1, N_, N_), .has_bwd = 1,
                 .g_need = G(RL_D_QKV, N_), .g_alloc = G(RL_D_LN1, N_), .g_free = G(RL_D_QKV, N_), GR(RL_D_QKV, RL_D_LN1) },
    /* its backward rotates d_qkv's q and k columns back, in place */
    [RL_QK_ROPE] = { .name = "qk_rope", .op = "rotary embedding of q, k", .cls = RT_CLASS_BLOCK,
                     .flags = RT_F_POINTWISE, .shape = QK_E, .shape_text = "(B,T,(NH+KV)hs)", .prec = RT_P_ACT,
                     .kernel = RK_ROPE, NOWB,
                     .cost = COST(0, 0, RX(RX_T(3, BT, RD_NH, RD_HS), RX_T(3, BT, RD_KV, RD_HS)),
                                  RX(RX_T(3, BT, RD_NH, RD_HS), RX_T(3, BT, RD_KV, RD_HS))),
                     .fwd_in = R(RL_QKV, N_, N_), .bwd_in = NOR, .has_bwd = 1,
                     .g_need = G(RL_D_QKV, N_), .g_alloc = NOG, .g_free = NOG, GR(RL_D_QKV, RL_D_QKV) },
    [RL_ATT] = { .name = "att", .op = "softmax(q k^T/sqrt(hs))", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_GEMM | RT_F_SELECTIVE, .shape = E1(1, RD_B, RD_NH, RD_T, RD_T),
                 .shape_text = "(B,NH,T,T)", .prec = RT_P_ACT, .kernel = RK_ATT_SCORES, .opc = RO_ATTENTION, NOWB, SCORES_WS,
                 .cost = COST(1, 0, E1(5, RD_B, RD_NH, RD_TRI), RX_0),
                 .fwd_in = R(RL_QK_ROPE, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR,
                 .variant = RT_VAR_FLASH, .vshape = E1(1, RD_B, RD_NH, RD_T), .vshape_text = "(B,NH,T)",
                 .vop = "logsumexp of q k^T/sqrt(hs) (flash)", .vprec = RT_P_F32,
                 .vcost = COST(1, 0, E1(5, RD_B, RD_NH, RD_TRI), RX_0) },
    [RL_ATTY] = { .name = "atty", .op = "attention values (att v)", .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM,
                  .shape = ATTY_E, .shape_text = "(B,T,NH hs)", .prec = RT_P_ACT,
                  .kernel = RK_ATT_VALUES, .opc = RO_ATTENTION, WBS(-1, -1, REMAT_SITE_ATT),
                  .cost = COST(1, 5, RX_0, E1(6, RD_B, RD_NH, RD_TRI)),
                  .fwd_in = R(RL_ATT, RL_QK_ROPE, RL_QKV), .bwd_in = R(RL_ATT, RL_QK_ROPE, RL_QKV), .has_bwd = 1,
                  .g_need = G(RL_D_ATTY, N_), .g_alloc = G(RL_D_QKV, N_), .g_free = G(RL_D_ATTY, N_),
                  GR(RL_D_ATTY, RL_D_QKV), ATT_SCRATCH(ATTY_E, QKV_E),
                  .variant = RT_VAR_FLASH, .vshape = ATTY_E, .vshape_text = "(B,T,NH hs)",
                  .vop = "attention values (flash)", .vprec = RT_P_ACT,
                  .vcost = COST(2, 7, E1(3, RD_B, RD_NH, RD_TRI), E1(10, RD_B, RD_NH, RD_TRI)) },
    [RL_RES2] = { .name = "res2", .op = "linear (o_proj) + residual", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_GEMM | RT_F_RESIDUAL, .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_F32,
                  .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(LP_ATTPROJW, -1, REMAT_SITE_RES_ATTN),
                  LINEAR_DIMS(E1(1, BT), E1(1, RD_C), E1(1, RD_NH, RD_HS)), LINEAR_WS, .cost = COST(1, 2, E1(1, BTC), RX_0),
                  .fwd_in = R(RL_ATTY, RT_X, N_), .bwd_in = R(RL_ATTY, N_, N_), .has_bwd = 1,
                  .g_need = G(RL_D_RES, N_), .g_alloc = G(RL_D_ATTY, RL_D_BRANCH), .g_free = G(RL_D_BRANCH, N_),
                  GR(RL_D_RES, RL_D_ATTY) },
    [RL_LN2_RSTD] = { .name = "ln2_rstd", .op = "rmsnorm rstd (post_attention_layernorm)", .cls = RT_CLASS_BLOCK,
                      .shape = E1(1, BT), .shape_text = "(B,T,1)", .prec = RT_P_F32,
                      .kernel = RK_RMS_STATS, NOWB, .cost = COST(0, 0, E1(2, BTC), RX_0),
                      .fwd_in = R(RL_RES2, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR },
    [RL_LN2] = { .name = "ln2", .op = "rmsnorm apply (post_attention_layernorm)", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_POINTWISE, .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_ACT,
                 .kernel = RK_RMS, WBS(LP_LN2W, -1, 0), .cost = COST(0, 0, E1(2, BTC), E1(8, BTC)),
                 .fwd_in = R(RL_RES2, RL_LN2_RSTD, N_), .bwd_in = R(RL_RES2, RL_LN2_RSTD, N_), .has_bwd = 1,
                 .g_need = G(RL_D_RES, RL_D_LN2), .g_alloc = NOG, .g_free = G(RL_D_LN2, N_), GR(RL_D_LN2, RL_D_RES) },
    [RL_GATE_UP] = { .name = "gate_up", .op = "linear (gate_proj, up_proj)", .cls = RT_CLASS_BLOCK,
                     .flags = RT_F_GEMM, .shape = E1(2, BTF), .shape_text = "(B,T,2F)", .prec = RT_P_ACT,
                     .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(LP_GATEUPW, -1, 0),
                     LINEAR_DIMS(E1(1, BT), E1(2, RD_F), E1(1, RD_C)), LINEAR_WS, .cost = COST(1, 2, RX_0, RX_0),
                     .fwd_in = R(RL_LN2, N_, N_), .bwd_in = R(RL_LN2, N_, N_), .has_bwd = 1,
                     .g_need = G(RL_D_GATE_UP, N_), .g_alloc = G(RL_D_LN2, N_), .g_free = G(RL_D_GATE_UP, N_),
                     GR(RL_D_GATE_UP, RL_D_LN2) },
    [RL_SWIGLU] = { .name = "swiglu", .op = "silu(gate) * up", .cls = RT_CLASS_BLOCK, .flags = RT_F_POINTWISE,
                    .shape = E1(1, BTF), .shape_text = "(B,T,F)", .prec = RT_P_ACT, .kernel = RK_SWIGLU, NOWB,
                    .cost = COST(0, 0, E1(6, BTF), E1(10, BTF)),
                    .fwd_in = R(RL_GATE_UP, N_, N_), .bwd_in = R(RL_GATE_UP, N_, N_), .has_bwd = 1,
                    .g_need = G(RL_D_SWIGLU, N_), .g_alloc = G(RL_D_GATE_UP, N_), .g_free = G(RL_D_SWIGLU, N_),
                    GR(RL_D_SWIGLU, RL_D_GATE_UP) },
    [RL_RES3] = { .name = "res3", .op = "linear (down_proj) + residual", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_GEMM | RT_F_RESIDUAL, .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_F32,
                  .kernel = RK_LINEAR, .opc = RO_LINEAR, WBS(LP_FCPROJW, -1, REMAT_SITE_RES_MLP),
                  LINEAR_DIMS(E1(1, BT), E1(1, RD_C), E1(1, RD_F)), LINEAR_WS, .cost = COST(1, 2, E1(1, BTC), RX_0),
                  .fwd_in = R(RL_SWIGLU, RL_RES2, N_), .bwd_in = R(RL_SWIGLU, N_, N_), .has_bwd = 1,
                  .g_need = G(RL_D_RES, N_), .g_alloc = G(RL_D_SWIGLU, RL_D_BRANCH), .g_free = G(RL_D_BRANCH, N_),
                  GR(RL_D_RES, RL_D_SWIGLU) },
    [RL_EMB] = { .name = "emb", .op = "embedding (embed_tokens)", .cls = RT_CLASS_GLOBAL, .shape = E1(1, BTC),
                 .shape_text = "(B,T,C)", .prec = RT_P_F32, .kernel = RK_EMBED, WBS(LP_WTE, -1, 0),
                 .cost = COST(0, 0, RX_0, E1(1, BTC)), .fwd_in = NOR, .bwd_in = NOR, .has_bwd = 1,
                 .g_need = G(RL_D_RES, N_), .g_alloc = NOG, .g_free = G(RL_D_RES, N_), GR(RL_D_RES, N_) },
    [RL_LNF_RSTD] = { .name = "lnf_rstd", .op = "rmsnorm rstd (norm)", .cls = RT_CLASS_GLOBAL,
                      .shape = E1(1, BT), .shape_text = "(B,T,1)", .prec = RT_P_F32,
                      .kernel = RK_RMS_STATS, NOWB, .cost = COST(0, 0, E1(2, BTC), RX_0),
                      .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG, NOGR },
    [RL_LNF] = { .name = "lnf", .op = "rmsnorm apply (norm)", .cls = RT_CLASS_GLOBAL,
                 .shape = E1(1, BTC), .shape_text = "(B,T,C)", .prec = RT_P_ACT,
                 .kernel = RK_RMS, WBS(LP_LNFW, -1, 0), .cost = COST(0, 0, E1(2, BTC), E1(8, BTC)),
                 .fwd_in = R(RT_X, RL_LNF_RSTD, N_), .bwd_in = R(RT_X, RL_LNF_RSTD, N_), .has_bwd = 1,
                 .g_need = G(RL_D_LNF, N_), .g_alloc = G(RL_D_RES, N_), .g_free = G(RL_D_LNF, N_), GR(RL_D_LNF, RL_D_RES) },
    [RL_LOGITS] = LM_HEAD(RL, LP_LMHEADW, "lm head (lm_head)"),
    [RL_D_RES] = GRAD("d_res", "grad of residual stream", RT_F_ZERO, E1(1, BTC), "(B,T,C)", RT_P_F32),
    [RL_D_LNF] = GRAD("d_lnf", "grad of lnf", 0, E1(1, BTC), "(B,T,C)", RT_P_ACT),
    [RL_D_SWIGLU] = GRAD("d_swiglu", "grad of swiglu", 0, E1(1, BTF), "(B,T,F)", RT_P_ACT),
    [RL_D_GATE_UP] = GRAD("d_gate_up", "grad of gate_up", 0, E1(2, BTF), "(B,T,2F)", RT_P_ACT),
    [RL_D_LN2] = GRAD("d_ln2", "grad of ln2", 0, E1(1, BTC), "(B,T,C)", RT_P_ACT),
    [RL_D_ATTY] = GRAD("d_atty", "grad of atty", 0, ATTY_E, "(B,T,NH hs)", RT_P_ACT),
    [RL_D_QKV] = GRAD("d_qkv", "grad of qkv (of q, k after RoPE, then before)", 0, QKV_E, "(B,T,(NH+2KV)hs)",
                      RT_P_ACT),
    [RL_D_LN1] = GRAD("d_ln1", "grad of ln1", 0, E1(1, BTC), "(B,T,C)", RT_P_ACT),
    [RL_D_BRANCH] = GRAD("d_branch", "grad of a residual branch (dropout or bf16)", RT_F_BRANCH, E1(1, BTC), "(B,T,C)",
                         RT_P_ACT),
};

const remat_table remat_table_llama = {
    .name = "remat-llama",
    .arch = REMAT_ARCH_LLAMA,
    .count = RL_COUNT,
    .nblock = RL_NBLOCK,
    .first_grad = RL_D_RES,
    .emb = RL_EMB,
    .d_res = RL_D_RES,
    .d_branch = RL_D_BRANCH,
    .nlmhead = 3, .lmhead = { RL_LNF_RSTD, RL_LNF, RL_LOGITS },
    .nlmhead_bwd = 2, .lmhead_bwd = { RL_LOGITS, RL_LNF },
    .nbwd = 9, .bwd = { RL_RES3, RL_SWIGLU, RL_GATE_UP, RL_LN2, RL_RES2, RL_ATTY, RL_QK_ROPE, RL_QKV, RL_LN1 },
    .defs = llama_defs,
};

int remat_table_find(const remat_table *tb, const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < tb->count; i++)
        if (!strcmp(tb->defs[i].name, name)) return i;
    return -1;
}

/* (arch, framework) -> table; Llama's framework tables come in one per
 * attention backend (frameworks_llama.c); a table read from a file is found
 * by its id (custom.c) */
const remat_table *remat_table_of(const remat_config *cfg)
{
    if (cfg->framework == REMAT_FRAMEWORK_TABLE) return remat_table_custom(cfg->table);
    int flash = cfg->attention == REMAT_ATTENTION_FLASH;
    if (cfg->arch == REMAT_ARCH_LLAMA && cfg->kv_lora_rank > 0) {     /* multi-latent attention */
        if (cfg->framework == REMAT_FRAMEWORK_MEGATRON) return &remat_table_megatron_mla;
        if (cfg->framework == REMAT_FRAMEWORK_PYTORCH) return &remat_table_pytorch_mla;
        return NULL;
    }
    if (cfg->arch == REMAT_ARCH_LLAMA && cfg->n_experts > 0) {
        if (cfg->framework == REMAT_FRAMEWORK_MEGATRON) return &remat_table_megatron_moe;
        if (cfg->framework == REMAT_FRAMEWORK_PYTORCH) return &remat_table_pytorch_moe;
        return NULL;
    }
    if (cfg->arch == REMAT_ARCH_LLAMA) {
        switch (cfg->framework) {
        case REMAT_FRAMEWORK_REMAT: return &remat_table_llama;
        case REMAT_FRAMEWORK_MEGATRON: return flash ? &remat_table_megatron_llama : &remat_table_megatron_llama_unfused;
        case REMAT_FRAMEWORK_PYTORCH: return flash ? &remat_table_pytorch_llama : &remat_table_pytorch_llama_eager;
        default: return NULL;
        }
    }
    switch (cfg->framework) {
    case REMAT_FRAMEWORK_MEGATRON: return &remat_table_megatron;
    case REMAT_FRAMEWORK_PYTORCH: return &remat_table_pytorch;
    default: return &remat_table_gpt2;
    }
}

uint32_t remat_keep_default(const remat_table *tb)
{
    uint32_t m = 0;
    for (int t = 0; t < tb->nblock; t++)
        if (!(tb->defs[t].flags & RT_F_TRANSIENT)) m |= 1u << t;
    return m;
}

uint32_t remat_table_mods_mask(const remat_table *tb, unsigned m) { return remat_table_mods_mask_kind(tb, m, 0); }

uint32_t remat_table_mods_mask_kind(const remat_table *tb, unsigned m, int dense)
{
    uint32_t k = 0;
    for (int t = 0; t < tb->nblock; t++)
        if (((dense && tb->dense_mods) ? tb->defs[t].dmods : tb->defs[t].mods) & m) k |= 1u << t;
    return k;
}

const char *remat_offload_module_name(int i, unsigned *bit)
{
    static const struct { const char *name; unsigned bit; } mods[RF_NMODULES] = {
        { "qkv_linear", RF_QKV_LINEAR }, { "core_attn", RF_CORE_ATTN }, { "attn_proj", RF_ATTN_PROJ },
    };
    if (i < 0 || i >= RF_NMODULES) return NULL;
    *bit = mods[i].bit;
    return mods[i].name;
}

const char *remat_module_name(int i, unsigned *drop, unsigned *region)
{
    static const struct { const char *name; unsigned drop, region; } mods[RM_NMODULES] = {
        { "core_attn", RM_CORE_ATTN, RM_CORE_ATTN | RM_CORE_ATTN_REGION },
        { "layernorm", RM_LAYERNORM, RM_LAYERNORM },
        { "mlp", RM_MLP, RM_MLP | RM_MLP_REGION },
        { "moe", RM_MOE, RM_MOE | RM_MOE_REGION },
        { "moe_act", RM_MOE_ACT, RM_MOE_ACT },
        { "shared_experts", RM_SHARED, RM_SHARED | RM_SHARED_REGION },
        { "mla_up_proj", RM_MLA_UP, RM_MLA_UP | RM_MLA_UP_REGION },
    };
    if (i < 0 || i >= RM_NMODULES) return NULL;
    *drop = mods[i].drop;
    *region = mods[i].region;
    return mods[i].name;
}

unsigned remat_module_keeps(int i)
{
    /* mla_up_proj (multi_latent_attention.py, CheckpointWithoutOutput.checkpoint
     * of qkv_up_proj_and_rope_apply) saves its inputs: k_pos_emb among them */
    return i == 6 ? RM_MLA_UP_KEEP : 0;
}

/* ---- what an entry evaluates to under a config ------------------------------------ */

/* 1 when tensor t exists under cfg but holds nothing: a dropout-only
 * activation without dropout, a bf16-only copy in fp32, or the LM head on
 * a first pipeline stage */
static int empty_under(const remat_config *c, const remat_table *tb, int t)
{
    const remat_tensor_def *d = &tb->defs[t];
    if ((d->flags & RT_F_DROPOUT) && c->dropout == 0.0f && d->cls != RT_CLASS_GRAD) return 1;
    if ((d->flags & RT_F_BF16) && c->dtype != REMAT_DTYPE_BF16) return 1;
    return c->stage == REMAT_STAGE_FIRST && (d->flags & RT_F_HEAD);
}

/* the divisor of an entry's bytes: the tensor-parallel size where it is
 * sharded, times the context-parallel size where its rows are the GPU's own
 * tokens */
static uint64_t shards(const remat_config *c, const remat_tensor_def *d)
{
    uint64_t t = (d->flags & RT_F_TP) || ((d->flags & RT_F_SP) && c->sp) ? (uint64_t)remat_config_tp(c) : 1;
    return d->flags & RT_F_CP ? t * (uint64_t)remat_config_cp(c) : t;
}

/* the variant of an entry a config selects */
static int variant_on(const remat_config *c, const remat_tensor_def *d)
{
    return (d->variant == RT_VAR_FLASH && c->attention == REMAT_ATTENTION_FLASH) ||
           (d->variant == RT_VAR_CHUNKED && c->lmhead_chunk > 0);
}

int remat_tensor_variant_on(const remat_config *c, int t) { return variant_on(c, &remat_table_of(c)->defs[t]); }

static uint64_t elem_bytes(const remat_config *c, int prec)
{
    return prec == RT_P_BYTE ? 1 : prec == RT_P_I64 ? 8 : prec == RT_P_F32 || c->dtype == REMAT_DTYPE_FP32 ? 4 : 2;
}

static int prec_of(const remat_config *c, const remat_tensor_def *d)
{
    return variant_on(c, d) ? d->vprec : d->prec;
}

int remat_tensor_dtype(const remat_config *c, int t)
{
    int p = prec_of(c, &remat_table_of(c)->defs[t]);
    return p == RT_P_BYTE || p == RT_P_I64 ? -1 : p == RT_P_F32 ? REMAT_DTYPE_FP32 : (int)c->dtype;
}

static uint64_t elems_of(const remat_config *c, const remat_tensor_def *d, int layer)
{
    remat_dims dm;
    remat_dims_at(c, layer, &dm);
    return remat_expr_u64(variant_on(c, d) ? &d->vshape : &d->shape, &dm);
}

static uint64_t bytes_at(const remat_config *c, const remat_table *tb, int t, int layer)
{
    const remat_tensor_def *d = &tb->defs[t];
    if (empty_under(c, tb, t)) return 0;
    return elem_bytes(c, prec_of(c, d)) * elems_of(c, d, layer) / shards(c, d);
}

uint64_t remat_tensor_bytes(const remat_config *c, int t)
{
    const remat_table *tb = remat_table_of(c);
    return bytes_at(c, tb, t, rep_layer(c, tb, t));
}

uint64_t remat_tensor_bytes_at(const remat_config *c, int t, int layer)
{
    uint64_t b;
    if (c->framework == REMAT_FRAMEWORK_TABLE && layer >= 0 && remat_table_custom_layer_bytes(c->table, t, layer, &b))
        return b;
    const remat_table *tb = remat_table_of(c);
    return bytes_at(c, tb, t, layer >= 0 ? layer : rep_layer(c, tb, t));
}

uint64_t remat_tensor_row_elems(const remat_config *c, int t)
{
    const remat_table *tb = remat_table_of(c);
    return elems_of(c, &tb->defs[t], rep_layer(c, tb, t)) / ((uint64_t)c->batch * (uint64_t)c->seq);
}

uint64_t remat_table_resident_bytes(const remat_config *c)
{
    const remat_table *tb = remat_table_of(c);
    uint64_t b = 0;
    for (int i = 0; i < tb->nres; i++) b += remat_tensor_bytes(c, tb->res[i]);
    return b;
}

const char *remat_tensor_shape_text(const remat_config *c, int t)
{
    const remat_tensor_def *d = &remat_table_of(c)->defs[t];
    return variant_on(c, d) ? d->vshape_text : d->shape_text;
}

const char *remat_tensor_op_text(const remat_config *c, int t)
{
    const remat_tensor_def *d = &remat_table_of(c)->defs[t];
    return variant_on(c, d) ? d->vop : d->op;
}

int remat_tensor_exists(const remat_config *c, int t)
{
    uint32_t f = remat_table_of(c)->defs[t].flags;
    return (!(f & RT_F_BRANCH) || c->dropout > 0.0f || c->dtype == REMAT_DTYPE_BF16) &&
           (!(f & RT_F_DROPOUT) || c->dropout > 0.0f);
}

int remat_lmhead_rows(const remat_config *c)
{
    int N = c->batch * c->seq;
    return c->lmhead_chunk > 0 && c->lmhead_chunk < N ? c->lmhead_chunk : N;
}

/* the RW_* conditions cfg meets on machine mc (NULL: none of the machine's) */
static unsigned conditions(const remat_config *c, const remat_machine *mc)
{
    return (c->dtype == REMAT_DTYPE_BF16 ? RW_BF16 : 0) |
           (c->attention == REMAT_ATTENTION_FLASH ? RW_FLASH : RW_NAIVE) |
           (c->dropout > 0.0f ? RW_DROPOUT : 0) | (c->lmhead_chunk > 0 ? RW_CHUNKED : RW_WHOLE) |
           (remat_config_cp(c) > 1 ? RW_CP : 0) | (mc && mc->bf16_copies ? RW_EMU : 0);
}

static uint64_t round64(uint64_t b) { return (b + 63) & ~(uint64_t)63; }

/* the scratch of an entry's kernels, forward (bwd 0) or backward (bwd 1),
 * declared in the table so that the walker allocates it and the simulator
 * counts it: the op's own (RS_OP) into *op, its kernels' workspace on the
 * calling thread (RS_SERIAL, RS_GEMM) into *serial and per thread of a
 * parallel region (RS_THREAD) into *thread (mc NULL: no workspace) */
static void scratch_parts(const remat_config *c, const remat_machine *mc, int t, int bwd, int layer, uint64_t *op,
                          uint64_t *serial, uint64_t *thread)
{
    const remat_table *tb = remat_table_of(c);
    const remat_tensor_def *d = &tb->defs[t];
    *op = *serial = *thread = 0;
    if (empty_under(c, tb, t)) return;
    remat_dims dm;
    remat_dims_at(c, t < tb->nblock && layer >= 0 ? layer : rep_layer(c, tb, t), &dm);
    unsigned have = conditions(c, mc) | (bwd ? RW_BWD : 0);
    for (int i = 0; i < RT_MAXSCRATCH; i++) {
        const remat_scratch *s = &d->scratch[i];
        if (remat_expr_empty(&s->elems) || (s->when & RW_BWD) != (bwd ? RW_BWD : 0) || (s->when & ~have)) continue;
        if (s->use != RS_OP && (!mc || mc->threads < 1)) continue;
        uint64_t n = remat_expr_u64(&s->elems, &dm);
        if (s->use == RS_GEMM) {   /* the copies of the entry's product (M, N, K) */
            uint64_t M = remat_expr_u64(&d->gemm.m, &dm), N = remat_expr_u64(&d->gemm.n, &dm),
                     K = remat_expr_u64(&d->gemm.k, &dm);
            n += M * K + N * K + M * N;
        }
        uint64_t b = elem_bytes(c, s->prec) * n / shards(c, d);
        if (s->use == RS_OP) *op += b;
        else if (s->use == RS_THREAD) *thread += b;
        else *serial += b;
    }
}

/* all of it, as one allocation: the op's scratch, then (when there is
 * any) the workspace's serial part and one slice per thread, each at a
 * 64-byte boundary (remat_op_bind cuts it the same way) */
static uint64_t scratch_bytes(const remat_config *c, const remat_machine *mc, int t, int bwd, int layer,
                              remat_operands *o)
{
    uint64_t op, serial, thread;
    scratch_parts(c, mc, t, bwd, layer, &op, &serial, &thread);
    int nt = thread ? mc->threads : 0;
    uint64_t total = serial || thread ? round64(op) + round64(serial) + (uint64_t)nt * round64(thread) : op;
    if (o) {
        o->op_bytes = op;
        o->ws_serial = serial ? round64(serial) : 0;
        o->ws_thread = thread ? round64(thread) : 0;
        o->ws_threads = nt;
    }
    return total;
}

uint64_t remat_tensor_fwd_temp_bytes(const remat_config *c, const remat_machine *mc, int t)
{
    return scratch_bytes(c, mc, t, 0, -1, NULL);
}
uint64_t remat_tensor_bwd_temp_bytes(const remat_config *c, const remat_machine *mc, int t)
{
    return scratch_bytes(c, mc, t, 1, -1, NULL);
}

const remat_cost *remat_tensor_cost(const remat_config *c, int t)
{
    const remat_tensor_def *d = &remat_table_of(c)->defs[t];
    return variant_on(c, d) ? &d->vcost : &d->cost;
}

static void gemm_at(const remat_config *c, int t, const remat_dims *dm, uint64_t *M, uint64_t *N, uint64_t *K)
{
    const remat_tensor_def *d = &remat_table_of(c)->defs[t];
    *M = *N = *K = 0;
    if (d->opc != RO_LINEAR && d->opc != RO_LMHEAD) return;
    *M = remat_expr_u64(&d->gemm.m, dm);
    *N = remat_expr_u64(&d->gemm.n, dm);
    *K = remat_expr_u64(&d->gemm.k, dm);
}

void remat_tensor_gemm(const remat_config *c, int t, uint64_t *M, uint64_t *N, uint64_t *K)
{
    remat_dims dm;
    remat_dims_at(c, rep_layer(c, remat_table_of(c), t), &dm);
    gemm_at(c, t, &dm, M, N, K);
}

uint64_t remat_tensor_weight_elems(const remat_config *c, int t)
{
    uint64_t M, N, K;
    remat_tensor_gemm(c, t, &M, &N, &K);
    return N * K;
}

/* one GPU's share of an op's FLOPs: matrix products are sharded by tensor
 * parallelism (Megatron shards every product of a layer), and an op on the
 * GPU's own tokens does 1/cp of the work under context parallelism (its
 * load-balanced split gives every GPU the same causal pairs) */
static double tp_share(const remat_config *c, const remat_tensor_def *d, double fl)
{
    if ((d->flags & RT_F_GEMM) && !(d->flags & RT_F_EXPERT)) fl /= remat_config_tp(c);
    return d->flags & RT_F_CP ? fl / remat_config_cp(c) : fl;
}

static double prod_flops_at(const remat_config *c, int t, const remat_dims *dm)
{
    const remat_table *tb = remat_table_of(c);
    const remat_tensor_def *d = &tb->defs[t];
    double fl = 0;
    if (d->opc == RO_ATTENTION) {
        fl = 2.0 * (double)dm->d[RD_B] * (double)dm->d[RD_NH] * (double)dm->d[RD_TRI] * (double)dm->d[RD_HS];
    } else if (d->opc == RO_LINEAR || d->opc == RO_LMHEAD) {
        uint64_t M, N, K;
        gemm_at(c, t, dm, &M, &N, &K);
        fl = 2.0 * (double)M * (double)N * (double)K;
    }
    return tp_share(c, d, fl);
}

double remat_tensor_prod_flops(const remat_config *c, int t)
{
    remat_dims dm;
    remat_dims_at(c, rep_layer(c, remat_table_of(c), t), &dm);
    return prod_flops_at(c, t, &dm);
}

double remat_tensor_flops_at(const remat_config *c, int t, int layer, int backward)
{
    const remat_table *tb = remat_table_of(c);
    const remat_tensor_def *d = &tb->defs[t];
    if (empty_under(c, tb, t) || (backward && !d->has_bwd)) return 0;
    const remat_cost *k = remat_tensor_cost(c, t);
    remat_dims dm;
    remat_dims_at(c, t < tb->nblock && layer >= 0 ? layer : rep_layer(c, tb, t), &dm);
    double prods = backward ? k->bprod : k->fprod;
    double extra = remat_expr_f64(backward ? &k->bfl : &k->ffl, &dm);
    return (prods ? prods * prod_flops_at(c, t, &dm) : 0) + tp_share(c, d, extra);
}

double remat_tensor_fwd_flops(const remat_config *c, int t) { return remat_tensor_flops_at(c, t, -1, 0); }
double remat_tensor_bwd_flops(const remat_config *c, int t) { return remat_tensor_flops_at(c, t, -1, 1); }

/* One op's FLOPs, exactly: its products and its extra FLOPs (the same
 * terms as op_flops, without the tensor-parallel share). */
static remat_u128 op_flops128(const remat_config *c, const remat_dims *dm, int t, int backward)
{
    const remat_table *tb = remat_table_of(c);
    const remat_tensor_def *d = &tb->defs[t];
    if (empty_under(c, tb, t) || (backward && !d->has_bwd)) return 0;
    const remat_cost *k = remat_tensor_cost(c, t);
    remat_u128 prod = 0;
    if (d->opc == RO_ATTENTION) {
        prod = (remat_u128)2 * dm->d[RD_B] * dm->d[RD_NH] * dm->d[RD_TRI] * dm->d[RD_HS];
    } else if (d->opc == RO_LINEAR || d->opc == RO_LMHEAD) {
        uint64_t M, N, K;
        gemm_at(c, t, dm, &M, &N, &K);
        prod = (remat_u128)2 * M * N * K;
    }
    remat_u128 f = (backward ? k->bprod : k->fprod) * prod + remat_expr_u64(backward ? &k->bfl : &k->ffl, dm);
    return d->flags & RT_F_EXPERT ? f * (remat_u128)remat_config_tp(c) : f;
}

remat_u128 remat_table_step_flops(const remat_config *cfg)
{
    remat_config c = *cfg;              /* tp stays: it pads the vocabulary */
    c.stage = REMAT_STAGE_WHOLE;
    const remat_table *tb = remat_table_of(&c);
    remat_dims dm, dd;
    remat_dims_of(&c, &dm);
    remat_dims_at(&c, 0, &dd);       /* a dense prefix's layer (the same dims without one) */
    int nd = c.moe_first_dense < c.n_layer ? c.moe_first_dense : c.n_layer;
    remat_u128 block = 0, dblock = 0, glob = 0;
    for (int t = 0; t < tb->first_grad; t++) {
        remat_u128 f = op_flops128(&c, &dm, t, 0) + op_flops128(&c, &dm, t, 1);
        if (t < tb->nblock) {
            block += f;
            dblock += op_flops128(&c, &dd, t, 0) + op_flops128(&c, &dd, t, 1);
        } else {
            glob += f;
        }
    }
    return (remat_u128)(c.n_layer - nd) * block + (remat_u128)nd * dblock + glob;
}

/* ---- operands ----------------------------------------------------------------- */

static void add_list(const remat_config *c, const remat_table *tb, const int8_t *list, int n, int *slots,
                     int *tids, int *count)
{
    int L = c->n_layer;
    for (int i = 0; i < n && list[i] != RT_NONE; i++) {
        int t = list[i];
        if (!remat_tensor_exists(c, t)) continue;
        slots[*count] = remat_table_slot(tb, L, -1, t);
        tids[*count] = t;
        (*count)++;
    }
}

void remat_operands_of(const remat_config *c, const remat_machine *mc, int kind, int layer, int t, remat_operands *o)
{
    const remat_table *tb = remat_table_of(c);
    int L = c->n_layer;
    o->out = -1;
    o->nin = o->nneed = o->nalloc = o->nfree = 0;
    o->temp_bytes = o->op_bytes = o->ws_serial = o->ws_thread = 0;
    o->ws_threads = 0;
    if (kind == REMAT_I_UPDATE) return;
    const remat_tensor_def *d = &tb->defs[t];
    int lay = d->cls == RT_CLASS_BLOCK ? layer : -1;
    o->out = remat_table_slot(tb, L, lay < 0 ? 0 : lay, t);
    if (kind == REMAT_I_FREE) return;
    const int8_t *reads = kind == REMAT_I_BACKWARD ? d->bwd_in : d->fwd_in;
    for (int i = 0; i < RT_MAXIO && reads[i] != RT_NONE; i++) {
        o->in[o->nin] = remat_table_slot(tb, L, lay, reads[i]);
        o->in_t[o->nin] = reads[i];
        o->nin++;
    }
    if (kind == REMAT_I_BACKWARD) {
        add_list(c, tb, d->g_need, RT_MAXG, o->need, o->need_t, &o->nneed);
        add_list(c, tb, d->g_alloc, RT_MAXG, o->alloc, o->alloc_t, &o->nalloc);
        add_list(c, tb, d->g_free, RT_MAXG, o->freed, o->freed_t, &o->nfree);
        o->temp_bytes = scratch_bytes(c, mc, t, 1, lay, o);
    } else {
        o->temp_bytes = scratch_bytes(c, mc, t, 0, lay, o);
    }
}
