/*
 * frameworks.c -- the tensor tables of two frameworks, for planning their
 * runs: what Megatron-LM's GPT layer and a plain PyTorch GPT-2 block keep
 * for the backward pass.  They are data in the format of remat's own table
 * (tensors.h) and run through the same compiler, simulator and planner.
 *
 * Dimension legend: B micro-batch, T sequence (s in the paper), C hidden (h),
 * NH heads (a), Vp the padded vocabulary (v), t the tensor-parallel size.
 *
 * megatron: Korthikanti et al. 2022, "Reducing Activation Recomputation in
 * Large Transformer Models" (arXiv 2205.05198), Section 4.1: per layer, with
 * 2-byte activations and 1-byte dropout masks,
 *   attention  QKV input 2sbh, Q and K 4sbh, softmax output 2as^2b, its
 *              dropout mask as^2b, dropout output 2as^2b, V 2sbh, projection
 *              input 2sbh, projection dropout mask sbh        = 11sbh + 5as^2b
 *   MLP        fc1 input 2sbh, GELU input 8sbh, fc2 input 8sbh, mask sbh = 19sbh
 *   LayerNorm  two inputs                                       = 4sbh
 * that is sbh(34 + 5as/h) (Equation 1).  Here Q, K and V are one tensor, qkv
 * (6sbh), and the LayerNorm inputs are the block input x and res2; a block
 * owns its output res3 (the next block's x) instead of its input, so the
 * per-layer sum is the same.  Section 4.2.2: tensor parallelism shards qkv,
 * the attention core, the projection input, the GELU input and output by t
 * (RT_F_TP), leaving 10sbh unsharded: sbh(10 + 24/t + 5as/(ht)) (Eq. 2);
 * sequence parallelism (4.2.3) shards those 10sbh too (RT_F_SP):
 * sbh/t (34 + 5as/h) (Eq. 4).  Selective recomputation (5.2) drops the
 * attention core: the softmax output, its mask and the dropout output
 * (RT_F_SELECTIVE).  Section 4.3's extra activations: the embedding's dropout
 * mask sbh/t per micro-batch (a resident global) and, on the last stage, the
 * final LayerNorm input (the last block's res3), the output layer's input
 * (lnf) 2sbh/t and the fp32 logits 4sbv/t (Equation 6 with p = 1).  The
 * LayerNorm statistics, which Section 4 leaves out, are not in the table.
 *
 * pytorch: the tensors autograd saves (torch.autograd.graph's saved-tensor
 * hooks see them; tests/py_frameworks.py checks the sums) for
 *   ln_1 = F.layer_norm -> x, mean, rstd      c_attn = nn.Linear -> its input
 *   q @ k^T (torch.matmul on the head views)  -> copies of q and k
 *   * 1/sqrt(hs), + causal bias               -> nothing (an 8-byte scalar)
 *   F.softmax -> its output                   nn.Dropout on a GPU (native_dropout)
 *                                                -> a bool mask
 *   att @ v -> the dropout output, a copy of v
 *   c_proj -> its input (the heads merged)    dropout -> mask; x + ... -> nothing
 *   ln_2, c_fc as above; F.gelu(approximate='tanh') -> its input; c_proj -> its input
 * and for the model: the token ids (embedding), the position ids, the
 * embedding dropout mask, ln_f's input and statistics, the LM head's input,
 * F.cross_entropy's log-softmax output (fp32 under autocast) and the targets.
 * The logits themselves are not saved: they are the head's scratch.
 *
 * Both tables also hold what the framework computes but does not save
 * (RT_F_TRANSIENT: the attention scores, the two row-parallel outputs), so
 * that a forward's peak is modelled and save: lists can name them
 * (torchtitan's per-op selective checkpointing keeps matrix products'
 * outputs).  FLOPs count matrix products only, as Appendix A does: a
 * layer's forward is 24Bsh^2 + 4Bs^2h, its backward twice that, the logits
 * 2Bshv forward.
 */
#include <stddef.h>
#include "tabledef.h"

#define NOWB .w = -1, .b = -1, .site = 0, .gout = N_, .gin = N_

/* per-block shapes */
#define S_C   .shape = E1(1, BTC), .shape_text = "(B,T,C)"
#define S_3C  .shape = E1(3, BTC), .shape_text = "(B,T,3C)"
#define S_4C  .shape = E1(4, BTC), .shape_text = "(B,T,4C)"
#define S_ATT .shape = E1(1, RD_B, RD_NH, RD_T, RD_T), .shape_text = "(B,NH,T,T)"
#define S_ST  .shape = E1(2, BT), .shape_text = "(B,T,2)"
/* a linear layer's product out (B T, n) = in (B T, k) W^T: one forward, two
 * backward (Appendix A: 2 and 4 FLOPs a weight and a token) */
#define LIN(n_, k_) .opc = RO_LINEAR, .gemm = { E1(1, BT), n_, k_ }, .cost = { 1, 2, RX_0, RX_0 }
/* the attention core's products as Appendix A counts them (the whole s^2, not
 * the causal half): 2 b s^2 h forward, twice that backward */
#define ATT_FL .cost = { 0, 0, E1(2, BT, RD_T, RD_C), E1(4, BT, RD_T, RD_C) }

/* Both tables' ids: X_* with X = M (megatron) or P (pytorch), the same
 * names in the same order; pytorch adds the LayerNorm statistics. */
#define BLOCK_IDS(X) X##_QKV, X##_SCORES, X##_ATT, X##_ATT_MASK, X##_ATT_DROP, X##_ATTY, X##_PROJ, X##_PROJ_MASK, \
                     X##_RES2
#define GRAD_IDS(X) X##_D_RES, X##_D_BRANCH, X##_D_FCH, X##_D_LN2, X##_D_ATTY, X##_D_ATT, X##_D_QKV, X##_D_LN1, X##_D_LNF

enum {
    M_LN1 = 0, BLOCK_IDS(M), M_LN2, M_FCH, M_FCH_GELU, M_MLP, M_MLP_MASK, M_RES3,
    M_NBLOCK,
    M_EMB = M_NBLOCK, M_LNF, M_LOGITS, M_EMB_MASK,
    GRAD_IDS(M),
    M_COUNT
};
enum {
    P_LN1_STAT = 0, P_LN1, BLOCK_IDS(P), P_LN2_STAT, P_LN2, P_FCH, P_FCH_GELU, P_MLP, P_MLP_MASK, P_RES3,
    P_NBLOCK,
    P_EMB = P_NBLOCK, P_LNF_STAT, P_LNF, P_LOGP, P_TOKENS, P_TARGETS, P_POS, P_EMB_MASK,
    GRAD_IDS(P), P_D_LOGITS,
    P_COUNT
};

/* Gradient flow in a block's backward (order res3 .. ln1), with dropout:
 * d_res -> [res3] d_branch -> [mlp] d_fch -> [fch_gelu] -> [fch] d_ln2 ->
 * [ln2] d_res += ; d_res -> [res2] d_branch -> [proj] d_atty -> [atty]
 * d_att, d_qkv (dV) -> [att_drop] -> [att] -> [scores] d_qkv (dQ, dK) ->
 * [qkv] d_ln1 -> [ln1] d_res +=.  Without dropout d_branch does not exist
 * and the row-parallel layers read d_res directly. */

/* the attention and the MLP, the same in both tables (but the ids) */
#define SHARED_BLOCK(X)                                                                                          \
    [X##_QKV] = { .name = "qkv", .mods = RM_SAC_SAVED, .op = "QKV linear (column-parallel): q, k, v", .cls = RT_CLASS_BLOCK,         \
                  .flags = RT_F_COL | RT_F_TP | RT_F_GEMM, S_3C, .prec = RT_P_ACT, NOWB,                        \
                  LIN(E1(3, RD_C), E1(1, RD_C)), .fwd_in = R(X##_LN1, N_, N_), .bwd_in = R(X##_LN1, N_, N_),    \
                  .has_bwd = 1, .g_need = G(X##_D_QKV, N_), .g_alloc = G(X##_D_LN1, N_), .g_free = G(X##_D_QKV, N_) }, \
    [X##_SCORES] = { .name = "scores", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED, .op = "q k^T / sqrt(hs), causal mask", .cls = RT_CLASS_BLOCK,           \
                     .flags = RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT | RT_F_SELECTIVE, S_ATT, .prec = RT_P_ACT,  \
                     NOWB, .opc = RO_ATTENTION, ATT_FL, .fwd_in = R(X##_QKV, N_, N_), .bwd_in = R(X##_QKV, N_, N_), \
                     .has_bwd = 1, .g_need = G(X##_D_ATT, X##_D_QKV), .g_alloc = NOG, .g_free = G(X##_D_ATT, N_) }, \
    [X##_ATT] = { .name = "att", .mods = RM_CORE_ATTN, .op = "softmax", .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_SELECTIVE,     \
                  S_ATT, .prec = RT_P_ACT, NOWB, .fwd_in = R(X##_SCORES, N_, N_), .bwd_in = R(X##_ATT, N_, N_), \
                  .has_bwd = 1, .g_need = G(X##_D_ATT, N_), .g_alloc = NOG, .g_free = NOG },                   \
    [X##_ATT_MASK] = { .name = "att_mask", .mods = RM_CORE_ATTN, .op = "attention dropout mask", .cls = RT_CLASS_BLOCK,              \
                       .flags = RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT, S_ATT, .prec = RT_P_BYTE, NOWB,       \
                       .fwd_in = R(X##_ATT, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG }, \
    [X##_ATT_DROP] = { .name = "att_drop", .mods = RM_CORE_ATTN, .op = "attention dropout", .cls = RT_CLASS_BLOCK,                   \
                       .flags = RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT, S_ATT, .prec = RT_P_ACT, NOWB,        \
                       .fwd_in = R(X##_ATT, X##_ATT_MASK, N_), .bwd_in = R(X##_ATT_MASK, N_, N_), .has_bwd = 1,  \
                       .g_need = G(X##_D_ATT, N_), .g_alloc = NOG, .g_free = NOG },                            \
    [X##_ATTY] = { .name = "atty", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED, .op = "attention over values, heads merged: the projection input",          \
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_GEMM, S_C, .prec = RT_P_ACT, NOWB,           \
                   .opc = RO_ATTENTION, ATT_FL, .fwd_in = R(X##_ATT_DROP, X##_QKV, N_),                        \
                   .bwd_in = R(X##_ATT_DROP, X##_QKV, N_), .has_bwd = 1, .g_need = G(X##_D_ATTY, N_),           \
                   .g_alloc = G(X##_D_ATT, X##_D_QKV), .g_free = G(X##_D_ATTY, N_) },                          \
    [X##_PROJ] = { .name = "proj", .mods = RM_SAC_SAVED, .op = "projection linear (row-parallel)", .cls = RT_CLASS_BLOCK,             \
                   .flags = RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_C, .prec = RT_P_ACT, NOWB,       \
                   LIN(E1(1, RD_C), E1(1, RD_C)), .fwd_in = R(X##_ATTY, N_, N_), .bwd_in = R(X##_ATTY, N_, N_), \
                   .has_bwd = 1, .g_need = G(X##_D_BRANCH, X##_D_RES), .g_alloc = G(X##_D_ATTY, N_),            \
                   .g_free = G(X##_D_BRANCH, N_) },                                                            \
    [X##_PROJ_MASK] = { .name = "proj_mask", .op = "dropout mask (attention output)", .cls = RT_CLASS_BLOCK,   \
                        .flags = RT_F_SP | RT_F_DROPOUT, S_C, .prec = RT_P_BYTE, NOWB,                         \
                        .fwd_in = R(X##_PROJ, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG }, \
    [X##_RES2] = { .name = "res2", .op = "x + dropout(projection): LayerNorm 2's input", .cls = RT_CLASS_BLOCK, \
                   .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(X##_PROJ, X##_PROJ_MASK, RT_X),   \
                   .bwd_in = R(X##_PROJ_MASK, N_, N_), .has_bwd = 1, .g_need = G(X##_D_RES, N_),                 \
                   .g_alloc = G(X##_D_BRANCH, N_), .g_free = NOG },                                            \
    [X##_FCH] = { .name = "fch", .mods = RM_MLP | RM_SAC_SAVED, .op = "fc1 linear (column-parallel): the GELU input", .cls = RT_CLASS_BLOCK,   \
                  .flags = RT_F_COL | RT_F_TP | RT_F_GEMM, S_4C, .prec = RT_P_ACT, NOWB,                        \
                  LIN(E1(4, RD_C), E1(1, RD_C)), .fwd_in = R(X##_LN2, N_, N_), .bwd_in = R(X##_LN2, N_, N_),    \
                  .has_bwd = 1, .g_need = G(X##_D_FCH, N_), .g_alloc = G(X##_D_LN2, N_), .g_free = G(X##_D_FCH, N_) }, \
    [X##_FCH_GELU] = { .name = "fch_gelu", .mods = RM_MLP, .op = "GELU (tanh): the fc2 input", .cls = RT_CLASS_BLOCK,          \
                       .flags = RT_F_TP | RT_F_POINTWISE, S_4C, .prec = RT_P_ACT, NOWB,                        \
                       .fwd_in = R(X##_FCH, N_, N_), .bwd_in = R(X##_FCH, N_, N_), .has_bwd = 1,               \
                       .g_need = G(X##_D_FCH, N_), .g_alloc = NOG, .g_free = NOG },                            \
    [X##_MLP] = { .name = "mlp", .mods = RM_MLP_REGION | RM_SAC_SAVED, .op = "fc2 linear (row-parallel)", .cls = RT_CLASS_BLOCK,                     \
                  .flags = RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_C, .prec = RT_P_ACT, NOWB,        \
                  LIN(E1(1, RD_C), E1(4, RD_C)), .fwd_in = R(X##_FCH_GELU, N_, N_),                            \
                  .bwd_in = R(X##_FCH_GELU, N_, N_), .has_bwd = 1, .g_need = G(X##_D_BRANCH, X##_D_RES),        \
                  .g_alloc = G(X##_D_FCH, N_), .g_free = G(X##_D_BRANCH, N_) },                                \
    [X##_MLP_MASK] = { .name = "mlp_mask", .op = "dropout mask (MLP output)", .cls = RT_CLASS_BLOCK,           \
                       .flags = RT_F_SP | RT_F_DROPOUT, S_C, .prec = RT_P_BYTE, NOWB,                          \
                       .fwd_in = R(X##_MLP, N_, N_), .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG }, \
    [X##_RES3] = { .name = "res3", .op = "res2 + dropout(fc2): the block output", .cls = RT_CLASS_BLOCK,       \
                   .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(X##_MLP, X##_MLP_MASK, X##_RES2), \
                   .bwd_in = R(X##_MLP_MASK, N_, N_), .has_bwd = 1, .g_need = G(X##_D_RES, N_),                 \
                   .g_alloc = G(X##_D_BRANCH, N_), .g_free = NOG },                                            \
    [X##_EMB] = { .name = "emb", .op = "embedding + dropout", .cls = RT_CLASS_GLOBAL, .flags = RT_F_SP, S_C,   \
                  .prec = RT_P_ACT, NOWB, .fwd_in = NOR, .bwd_in = NOR, .has_bwd = 1, .g_need = G(X##_D_RES, N_), \
                  .g_alloc = NOG, .g_free = G(X##_D_RES, N_) },                                                \
    [X##_EMB_MASK] = { .name = "emb_mask", .op = "embedding dropout mask (held all step)",                    \
                       .cls = RT_CLASS_GLOBAL, .flags = RT_F_SP | RT_F_DROPOUT, S_C, .prec = RT_P_BYTE, NOWB,  \
                       .fwd_in = NOR, .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG }

/* one activation-gradient buffer: its shape and flags */
#define GRAD(id, name_, what, flags_, shape_)                                                              \
    [id] = { .name = name_, .op = what, .cls = RT_CLASS_GRAD, .flags = flags_, shape_, .prec = RT_P_ACT,   \
             NOWB, .fwd_in = NOR, .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG }
#define SHARED_GRADS(X)                                                                                     \
    GRAD(X##_D_RES, "d_res", "grad of residual stream", RT_F_SP | RT_F_ZERO, S_C),                          \
    GRAD(X##_D_BRANCH, "d_branch", "grad of a dropped-out branch (p>0)", RT_F_SP | RT_F_DROPOUT, S_C),      \
    GRAD(X##_D_FCH, "d_fch", "grad of fch_gelu, then fch", RT_F_TP, S_4C),                                  \
    GRAD(X##_D_LN2, "d_ln2", "grad of ln2", RT_F_SP, S_C),                                                   \
    GRAD(X##_D_ATTY, "d_atty", "grad of atty", RT_F_TP, S_C),                                               \
    GRAD(X##_D_ATT, "d_att", "grad of the attention probabilities, then scores", RT_F_TP, S_ATT),           \
    GRAD(X##_D_QKV, "d_qkv", "grad of qkv", RT_F_TP | RT_F_ZERO, S_3C),                                     \
    GRAD(X##_D_LN1, "d_ln1", "grad of ln1", RT_F_SP, S_C),                                                   \
    GRAD(X##_D_LNF, "d_lnf", "grad of lnf", RT_F_SP | RT_F_HEAD, S_C)

/* a block's backward order, both tables */
#define BWD_ORDER(X) { X##_RES3, X##_MLP, X##_FCH_GELU, X##_FCH, X##_LN2, X##_RES2, X##_PROJ, X##_ATTY,       \
                       X##_ATT_DROP, X##_ATT, X##_SCORES, X##_QKV, X##_LN1 }

/* the output layer's product: logits (B T, Vp) = lnf W^T */
#define HEAD_LIN LIN(E1(1, RD_VP), E1(1, RD_C))

/* ---- megatron: no LayerNorm statistics; the output layer keeps fp32 logits */

static const remat_tensor_def megatron_defs[M_COUNT] = {
    [M_LN1] = { .name = "ln1", .mods = RM_LAYERNORM, .op = "layernorm (input_layernorm): the QKV input", .cls = RT_CLASS_BLOCK,
                .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(RT_X, N_, N_),
                .bwd_in = R(RT_X, N_, N_), .has_bwd = 1, .g_need = G(M_D_RES, M_D_LN1), .g_alloc = NOG,
                .g_free = G(M_D_LN1, N_) },
    [M_LN2] = { .name = "ln2", .mods = RM_LAYERNORM, .op = "layernorm (pre_mlp_layernorm): the fc1 input", .cls = RT_CLASS_BLOCK,
                .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(M_RES2, N_, N_),
                .bwd_in = R(M_RES2, N_, N_), .has_bwd = 1, .g_need = G(M_D_RES, M_D_LN2), .g_alloc = NOG,
                .g_free = G(M_D_LN2, N_) },
    SHARED_BLOCK(M),
    [M_LNF] = { .name = "lnf", .op = "final layernorm: the output layer's input", .cls = RT_CLASS_GLOBAL,
                .flags = RT_F_SP | RT_F_HEAD, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(RT_X, N_, N_),
                .bwd_in = R(RT_X, N_, N_), .has_bwd = 1, .g_need = G(M_D_LNF, N_), .g_alloc = G(M_D_RES, N_),
                .g_free = G(M_D_LNF, N_) },
    /* the output layer keeps the fp32 logits for the cross entropy (4sbv/t);
     * the 16-bit logits before the cast are its scratch */
    [M_LOGITS] = { .name = "logits", .op = "output layer (vocab-parallel) + fp32 cross entropy",
                   .cls = RT_CLASS_GLOBAL, .flags = RT_F_TP | RT_F_GEMM | RT_F_HEAD,
                   .shape = E1(1, BT, RD_VP), .shape_text = "(B,T,Vp) fp32", .prec = RT_P_F32, NOWB, HEAD_LIN,
                   .fwd_in = R(M_LNF, N_, N_), .bwd_in = R(M_LNF, M_LOGITS, N_), .has_bwd = 1, .g_need = NOG,
                   .g_alloc = G(M_D_LNF, N_), .g_free = G(M_LOGITS, N_),
                   .scratch = { { E1(1, BT, RD_VP), RT_P_ACT, RW_ALWAYS } } },
    SHARED_GRADS(M),
};

const remat_table remat_table_megatron = {
    .name = "megatron",
    .arch = REMAT_ARCH_GPT2,
    .count = M_COUNT,
    .nblock = M_NBLOCK,
    .first_grad = M_D_RES,
    .emb = M_EMB,
    .d_res = M_D_RES,
    .d_branch = M_D_BRANCH,
    .nlmhead = 2, .lmhead = { M_LNF, M_LOGITS },
    .nlmhead_bwd = 2, .lmhead_bwd = { M_LOGITS, M_LNF },
    .nbwd = 13, .bwd = BWD_ORDER(M),
    .defs = megatron_defs,
    .nres = 1, .res = { M_EMB_MASK },
};

/* ---- pytorch: F.layer_norm keeps its mean and rstd; cross entropy keeps the
 * fp32 log-softmax and the targets; the embeddings keep their ids */

#define IDS(text_) .shape = E1(1, BT), .shape_text = text_, .prec = RT_P_I64

static const remat_tensor_def pytorch_defs[P_COUNT] = {
    [P_LN1_STAT] = { .name = "ln1_stat", .op = "F.layer_norm mean, rstd (ln_1)", .cls = RT_CLASS_BLOCK, S_ST,
                     .prec = RT_P_F32, NOWB, .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, .g_need = NOG,
                     .g_alloc = NOG, .g_free = NOG },
    [P_LN1] = { .name = "ln1", .mods = RM_LAYERNORM, .op = "F.layer_norm (ln_1): c_attn's input", .cls = RT_CLASS_BLOCK,
                .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(RT_X, P_LN1_STAT, N_),
                .bwd_in = R(RT_X, P_LN1_STAT, N_), .has_bwd = 1, .g_need = G(P_D_RES, P_D_LN1), .g_alloc = NOG,
                .g_free = G(P_D_LN1, N_) },
    [P_LN2_STAT] = { .name = "ln2_stat", .op = "F.layer_norm mean, rstd (ln_2)", .cls = RT_CLASS_BLOCK, S_ST,
                     .prec = RT_P_F32, NOWB, .fwd_in = R(P_RES2, N_, N_), .bwd_in = NOR, .g_need = NOG,
                     .g_alloc = NOG, .g_free = NOG },
    [P_LN2] = { .name = "ln2", .mods = RM_LAYERNORM, .op = "F.layer_norm (ln_2): c_fc's input", .cls = RT_CLASS_BLOCK,
                .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(P_RES2, P_LN2_STAT, N_),
                .bwd_in = R(P_RES2, P_LN2_STAT, N_), .has_bwd = 1, .g_need = G(P_D_RES, P_D_LN2), .g_alloc = NOG,
                .g_free = G(P_D_LN2, N_) },
    SHARED_BLOCK(P),
    [P_LNF_STAT] = { .name = "lnf_stat", .op = "F.layer_norm mean, rstd (ln_f)", .cls = RT_CLASS_GLOBAL,
                     .flags = RT_F_HEAD, S_ST, .prec = RT_P_F32, NOWB, .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR,
                     .g_need = NOG, .g_alloc = NOG, .g_free = NOG },
    [P_LNF] = { .name = "lnf", .op = "F.layer_norm (ln_f): the LM head's input", .cls = RT_CLASS_GLOBAL,
                .flags = RT_F_SP | RT_F_HEAD, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(RT_X, P_LNF_STAT, N_),
                .bwd_in = R(RT_X, P_LNF_STAT, N_), .has_bwd = 1, .g_need = G(P_D_LNF, N_), .g_alloc = G(P_D_RES, N_),
                .g_free = G(P_D_LNF, N_) },
    /* lm_head (the logits, its scratch), then F.cross_entropy, which keeps
     * the fp32 log-softmax; its backward makes the logits' gradient, then
     * the head's input gradient */
    [P_LOGP] = { .name = "logp", .op = "lm_head + F.cross_entropy: fp32 log-softmax", .cls = RT_CLASS_GLOBAL,
                 .flags = RT_F_TP | RT_F_GEMM | RT_F_HEAD, .shape = E1(1, BT, RD_VP), .shape_text = "(B,T,V) fp32",
                 .prec = RT_P_F32, NOWB, HEAD_LIN, .fwd_in = R(P_LNF, N_, N_), .bwd_in = R(P_LNF, P_LOGP, N_),
                 .has_bwd = 1, .g_need = NOG, .g_alloc = G(P_D_LOGITS, P_D_LNF), .g_free = G(P_D_LOGITS, N_),
                 .scratch = { { E1(1, BT, RD_VP), RT_P_ACT, RW_ALWAYS } } },
    [P_TOKENS] = { .name = "tokens", .op = "token ids (nn.Embedding keeps them)", .cls = RT_CLASS_GLOBAL,
                   IDS("(B,T) int64"), NOWB, .fwd_in = NOR, .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG,
                   .g_free = NOG },
    [P_TARGETS] = { .name = "targets", .op = "targets (F.cross_entropy keeps them)", .cls = RT_CLASS_GLOBAL,
                    IDS("(B,T) int64"), NOWB, .fwd_in = NOR, .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG,
                    .g_free = NOG },
    [P_POS] = { .name = "pos", .op = "position ids (nn.Embedding keeps them)", .cls = RT_CLASS_GLOBAL,
                .shape = E1(1, RD_T), .shape_text = "(T) int64", .prec = RT_P_I64, NOWB, .fwd_in = NOR,
                .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG },
    SHARED_GRADS(P),
    [P_D_LOGITS] = { .name = "d_logits", .op = "grad of the logits", .cls = RT_CLASS_GRAD,
                     .flags = RT_F_TP | RT_F_HEAD, .shape = E1(1, BT, RD_VP), .shape_text = "(B,T,V) fp32",
                     .prec = RT_P_F32, NOWB, .fwd_in = NOR, .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG,
                     .g_free = NOG },
};

const remat_table remat_table_pytorch = {
    .name = "pytorch",
    .arch = REMAT_ARCH_GPT2,
    .count = P_COUNT,
    .nblock = P_NBLOCK,
    .first_grad = P_D_RES,
    .emb = P_EMB,
    .d_res = P_D_RES,
    .d_branch = P_D_BRANCH,
    .nlmhead = 3, .lmhead = { P_LNF_STAT, P_LNF, P_LOGP },
    .nlmhead_bwd = 2, .lmhead_bwd = { P_LOGP, P_LNF },
    .nbwd = 13, .bwd = BWD_ORDER(P),
    .defs = pytorch_defs,
    .nres = 4, .res = { P_TOKENS, P_TARGETS, P_POS, P_EMB_MASK },
};
