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
#include "tensors.h"

#define N_ RT_NONE
#define R(a, b, c) {a, b, c}
#define G(a, b) {a, b}
#define NOG {N_, N_}
#define NOR {N_, N_, N_}
#define SH(c, v, k, t, t2, text) {c, v, k, t, t2, text, 0}
#define NOVAR 0, SH(0, 0, 0, 0, 0, NULL), NULL
#define NOTEMP SH(0, 0, 0, 0, 0, NULL), 0
#define FL(cc, cv, c, att) {cc, cv, c, att}
#define NOFL FL(0, 0, 0, 0)

/* per-block shapes */
#define S_C   SH(1, 0, 0, 0, 0, "(B,T,C)")
#define S_3C  SH(3, 0, 0, 0, 0, "(B,T,3C)")
#define S_4C  SH(4, 0, 0, 0, 0, "(B,T,4C)")
#define S_ATT SH(0, 0, 0, 0, 1, "(B,NH,T,T)")
#define S_ST  SH(0, 0, 2, 0, 0, "(B,T,2)")

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
    [X##_QKV] = { "qkv", "QKV linear (column-parallel): q, k, v", RT_CLASS_BLOCK, RT_F_COL | RT_F_TP | RT_F_GEMM,  \
                  S_3C, NOVAR, 3, 0, R(X##_LN1, N_, N_), R(X##_LN1, N_, N_), 1,                                \
                  G(X##_D_QKV, N_), G(X##_D_LN1, N_), G(X##_D_QKV, N_), RT_P_ACT, 0, NOTEMP,                   \
                  FL(6, 0, 0, 0), FL(12, 0, 0, 0) },                                                           \
    [X##_SCORES] = { "scores", "q k^T / sqrt(hs), causal mask", RT_CLASS_BLOCK,                                \
                     RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT | RT_F_SELECTIVE,                                    \
                     S_ATT, NOVAR, 0, 0, R(X##_QKV, N_, N_), R(X##_QKV, N_, N_), 1,                            \
                     G(X##_D_ATT, X##_D_QKV), NOG, G(X##_D_ATT, N_), RT_P_ACT, 0, NOTEMP,                      \
                     FL(0, 0, 0, 2), FL(0, 0, 0, 4) },                                                         \
    [X##_ATT] = { "att", "softmax", RT_CLASS_BLOCK, RT_F_TP | RT_F_SELECTIVE,                                  \
                  S_ATT, NOVAR, 0, 0, R(X##_SCORES, N_, N_), R(X##_ATT, N_, N_), 1,                            \
                  G(X##_D_ATT, N_), NOG, NOG, RT_P_ACT, 0, NOTEMP, NOFL, NOFL },                               \
    [X##_ATT_MASK] = { "att_mask", "attention dropout mask", RT_CLASS_BLOCK,                                   \
                       RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT,                                                \
                       S_ATT, NOVAR, 0, 0, R(X##_ATT, N_, N_), NOR, 0,                                         \
                       NOG, NOG, NOG, RT_P_BYTE, 0, NOTEMP, NOFL, NOFL },                                      \
    [X##_ATT_DROP] = { "att_drop", "attention dropout", RT_CLASS_BLOCK,                                        \
                       RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT,                                                \
                       S_ATT, NOVAR, 0, 0, R(X##_ATT, X##_ATT_MASK, N_), R(X##_ATT_MASK, N_, N_), 1,           \
                       G(X##_D_ATT, N_), NOG, NOG, RT_P_ACT, 0, NOTEMP, NOFL, NOFL },                          \
    [X##_ATTY] = { "atty", "attention over values, heads merged: the projection input", RT_CLASS_BLOCK,        \
                   RT_F_TP | RT_F_GEMM,                                                                        \
                   S_C, NOVAR, 0, 0, R(X##_ATT_DROP, X##_QKV, N_), R(X##_ATT_DROP, X##_QKV, N_), 1,            \
                   G(X##_D_ATTY, N_), G(X##_D_ATT, X##_D_QKV), G(X##_D_ATTY, N_), RT_P_ACT, 0, NOTEMP,         \
                   FL(0, 0, 0, 2), FL(0, 0, 0, 4) },                                                           \
    [X##_PROJ] = { "proj", "projection linear (row-parallel)", RT_CLASS_BLOCK,                                 \
                   RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT,                                            \
                   S_C, NOVAR, 1, 0, R(X##_ATTY, N_, N_), R(X##_ATTY, N_, N_), 1,                              \
                   G(X##_D_BRANCH, X##_D_RES), G(X##_D_ATTY, N_), G(X##_D_BRANCH, N_), RT_P_ACT, 0, NOTEMP,    \
                   FL(2, 0, 0, 0), FL(4, 0, 0, 0) },                                                           \
    [X##_PROJ_MASK] = { "proj_mask", "dropout mask (attention output)", RT_CLASS_BLOCK, RT_F_SP | RT_F_DROPOUT, \
                        S_C, NOVAR, 0, 0, R(X##_PROJ, N_, N_), NOR, 0,                                         \
                        NOG, NOG, NOG, RT_P_BYTE, 0, NOTEMP, NOFL, NOFL },                                     \
    [X##_RES2] = { "res2", "x + dropout(projection): LayerNorm 2's input", RT_CLASS_BLOCK, RT_F_SP,            \
                   S_C, NOVAR, 0, 0, R(X##_PROJ, X##_PROJ_MASK, RT_X), R(X##_PROJ_MASK, N_, N_), 1,            \
                   G(X##_D_RES, N_), G(X##_D_BRANCH, N_), NOG, RT_P_ACT, 0, NOTEMP, NOFL, NOFL },              \
    [X##_FCH] = { "fch", "fc1 linear (column-parallel): the GELU input", RT_CLASS_BLOCK,                       \
                  RT_F_COL | RT_F_TP | RT_F_GEMM,                                                              \
                  S_4C, NOVAR, 4, 0, R(X##_LN2, N_, N_), R(X##_LN2, N_, N_), 1,                                \
                  G(X##_D_FCH, N_), G(X##_D_LN2, N_), G(X##_D_FCH, N_), RT_P_ACT, 0, NOTEMP,                   \
                  FL(8, 0, 0, 0), FL(16, 0, 0, 0) },                                                           \
    [X##_FCH_GELU] = { "fch_gelu", "GELU (tanh): the fc2 input", RT_CLASS_BLOCK, RT_F_TP | RT_F_POINTWISE,      \
                       S_4C, NOVAR, 0, 0, R(X##_FCH, N_, N_), R(X##_FCH, N_, N_), 1,                           \
                       G(X##_D_FCH, N_), NOG, NOG, RT_P_ACT, 0, NOTEMP, NOFL, NOFL },                          \
    [X##_MLP] = { "mlp", "fc2 linear (row-parallel)", RT_CLASS_BLOCK,                                          \
                  RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT,                                             \
                  S_C, NOVAR, 4, 0, R(X##_FCH_GELU, N_, N_), R(X##_FCH_GELU, N_, N_), 1,                       \
                  G(X##_D_BRANCH, X##_D_RES), G(X##_D_FCH, N_), G(X##_D_BRANCH, N_), RT_P_ACT, 0, NOTEMP,      \
                  FL(8, 0, 0, 0), FL(16, 0, 0, 0) },                                                           \
    [X##_MLP_MASK] = { "mlp_mask", "dropout mask (MLP output)", RT_CLASS_BLOCK, RT_F_SP | RT_F_DROPOUT,         \
                       S_C, NOVAR, 0, 0, R(X##_MLP, N_, N_), NOR, 0,                                           \
                       NOG, NOG, NOG, RT_P_BYTE, 0, NOTEMP, NOFL, NOFL },                                      \
    [X##_RES3] = { "res3", "res2 + dropout(fc2): the block output", RT_CLASS_BLOCK, RT_F_SP,                   \
                   S_C, NOVAR, 0, 0, R(X##_MLP, X##_MLP_MASK, X##_RES2), R(X##_MLP_MASK, N_, N_), 1,           \
                   G(X##_D_RES, N_), G(X##_D_BRANCH, N_), NOG, RT_P_ACT, 0, NOTEMP, NOFL, NOFL },              \
    [X##_EMB] = { "emb", "embedding + dropout", RT_CLASS_GLOBAL, RT_F_SP,                                      \
                  S_C, NOVAR, 0, 0, NOR, NOR, 1, G(X##_D_RES, N_), NOG, G(X##_D_RES, N_), RT_P_ACT, 0, NOTEMP, \
                  NOFL, NOFL },                                                                                \
    [X##_EMB_MASK] = { "emb_mask", "embedding dropout mask (held all step)", RT_CLASS_GLOBAL,                  \
                       RT_F_SP | RT_F_DROPOUT, S_C, NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG, RT_P_BYTE, 0,     \
                       NOTEMP, NOFL, NOFL }

/* one activation-gradient buffer: its shape and flags */
#define GRAD(id, name, what, flags, shape) \
    [id] = { name, what, RT_CLASS_GRAD, flags, shape, NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG, RT_P_ACT, 0, NOTEMP, NOFL, NOFL }
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

/* ---- megatron: no LayerNorm statistics; the output layer keeps fp32 logits */

static const remat_tensor_def megatron_defs[M_COUNT] = {
    [M_LN1] = { "ln1", "layernorm (input_layernorm): the QKV input", RT_CLASS_BLOCK, RT_F_SP | RT_F_POINTWISE,
                S_C, NOVAR, 0, 0, R(RT_X, N_, N_), R(RT_X, N_, N_), 1,
                G(M_D_RES, M_D_LN1), NOG, G(M_D_LN1, N_), RT_P_ACT, 0, NOTEMP, NOFL, NOFL },
    [M_LN2] = { "ln2", "layernorm (pre_mlp_layernorm): the fc1 input", RT_CLASS_BLOCK, RT_F_SP | RT_F_POINTWISE,
                S_C, NOVAR, 0, 0, R(M_RES2, N_, N_), R(M_RES2, N_, N_), 1,
                G(M_D_RES, M_D_LN2), NOG, G(M_D_LN2, N_), RT_P_ACT, 0, NOTEMP, NOFL, NOFL },
    SHARED_BLOCK(M),
    [M_LNF] = { "lnf", "final layernorm: the output layer's input", RT_CLASS_GLOBAL, RT_F_SP | RT_F_HEAD,
                S_C, NOVAR, 0, 0, R(RT_X, N_, N_), R(RT_X, N_, N_), 1,
                G(M_D_LNF, N_), G(M_D_RES, N_), G(M_D_LNF, N_), RT_P_ACT, 0, NOTEMP, NOFL, NOFL },
    /* the output layer keeps the fp32 logits for the cross entropy (4sbv/t);
     * the 16-bit logits before the cast are its scratch */
    [M_LOGITS] = { "logits", "output layer (vocab-parallel) + fp32 cross entropy", RT_CLASS_GLOBAL,
                   RT_F_TP | RT_F_GEMM | RT_F_HEAD,
                   SH(0, 1, 0, 0, 0, "(B,T,Vp) fp32"), NOVAR, 0, 1, R(M_LNF, N_, N_), R(M_LNF, M_LOGITS, N_), 1,
                   NOG, G(M_D_LNF, N_), G(M_LOGITS, N_), RT_P_F32, 0, SH(0, 1, 0, 0, 0, "(B,T,Vp)"), RT_P_ACT,
                   FL(0, 2, 0, 0), FL(0, 4, 0, 0) },
    SHARED_GRADS(M),
};

const remat_table remat_table_megatron = {
    .name = "megatron",
    .count = M_COUNT,
    .nblock = M_NBLOCK,
    .first_grad = M_D_RES,
    .emb = M_EMB,
    .d_res = M_D_RES,
    .nlmhead = 2, .lmhead = { M_LNF, M_LOGITS },
    .nlmhead_bwd = 2, .lmhead_bwd = { M_LOGITS, M_LNF },
    .nbwd = 13, .bwd = BWD_ORDER(M),
    .defs = megatron_defs,
    .nres = 1, .res = { M_EMB_MASK },
};

/* ---- pytorch: F.layer_norm keeps its mean and rstd; cross entropy keeps the
 * fp32 log-softmax and the targets; the embeddings keep their ids */

static const remat_tensor_def pytorch_defs[P_COUNT] = {
    [P_LN1_STAT] = { "ln1_stat", "F.layer_norm mean, rstd (ln_1)", RT_CLASS_BLOCK, 0,
                     S_ST, NOVAR, 0, 0, R(RT_X, N_, N_), NOR, 0, NOG, NOG, NOG, RT_P_F32, 0, NOTEMP, NOFL, NOFL },
    [P_LN1] = { "ln1", "F.layer_norm (ln_1): c_attn's input", RT_CLASS_BLOCK, RT_F_SP | RT_F_POINTWISE,
                S_C, NOVAR, 0, 0, R(RT_X, P_LN1_STAT, N_), R(RT_X, P_LN1_STAT, N_), 1,
                G(P_D_RES, P_D_LN1), NOG, G(P_D_LN1, N_), RT_P_ACT, 0, NOTEMP, NOFL, NOFL },
    [P_LN2_STAT] = { "ln2_stat", "F.layer_norm mean, rstd (ln_2)", RT_CLASS_BLOCK, 0,
                     S_ST, NOVAR, 0, 0, R(P_RES2, N_, N_), NOR, 0, NOG, NOG, NOG, RT_P_F32, 0, NOTEMP, NOFL, NOFL },
    [P_LN2] = { "ln2", "F.layer_norm (ln_2): c_fc's input", RT_CLASS_BLOCK, RT_F_SP | RT_F_POINTWISE,
                S_C, NOVAR, 0, 0, R(P_RES2, P_LN2_STAT, N_), R(P_RES2, P_LN2_STAT, N_), 1,
                G(P_D_RES, P_D_LN2), NOG, G(P_D_LN2, N_), RT_P_ACT, 0, NOTEMP, NOFL, NOFL },
    SHARED_BLOCK(P),
    [P_LNF_STAT] = { "lnf_stat", "F.layer_norm mean, rstd (ln_f)", RT_CLASS_GLOBAL, RT_F_HEAD,
                     S_ST, NOVAR, 0, 0, R(RT_X, N_, N_), NOR, 0, NOG, NOG, NOG, RT_P_F32, 0, NOTEMP, NOFL, NOFL },
    [P_LNF] = { "lnf", "F.layer_norm (ln_f): the LM head's input", RT_CLASS_GLOBAL, RT_F_SP | RT_F_HEAD,
                S_C, NOVAR, 0, 0, R(RT_X, P_LNF_STAT, N_), R(RT_X, P_LNF_STAT, N_), 1,
                G(P_D_LNF, N_), G(P_D_RES, N_), G(P_D_LNF, N_), RT_P_ACT, 0, NOTEMP, NOFL, NOFL },
    /* lm_head (the logits, its scratch), then F.cross_entropy, which keeps
     * the fp32 log-softmax; its backward makes the logits' gradient, then
     * the head's input gradient */
    [P_LOGP] = { "logp", "lm_head + F.cross_entropy: fp32 log-softmax", RT_CLASS_GLOBAL,
                 RT_F_TP | RT_F_GEMM | RT_F_HEAD,
                 SH(0, 1, 0, 0, 0, "(B,T,V) fp32"), NOVAR, 0, 1, R(P_LNF, N_, N_), R(P_LNF, P_LOGP, N_), 1,
                 NOG, G(P_D_LOGITS, P_D_LNF), G(P_D_LOGITS, N_), RT_P_F32, 0, SH(0, 1, 0, 0, 0, "(B,T,V)"), RT_P_ACT,
                 FL(0, 2, 0, 0), FL(0, 4, 0, 0) },
    [P_TOKENS] = { "tokens", "token ids (nn.Embedding keeps them)", RT_CLASS_GLOBAL, 0,
                   SH(0, 0, 1, 0, 0, "(B,T) int64"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG, RT_P_I64, 0, NOTEMP,
                   NOFL, NOFL },
    [P_TARGETS] = { "targets", "targets (F.cross_entropy keeps them)", RT_CLASS_GLOBAL, 0,
                    SH(0, 0, 1, 0, 0, "(B,T) int64"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG, RT_P_I64, 0, NOTEMP,
                    NOFL, NOFL },
    [P_POS] = { "pos", "position ids (nn.Embedding keeps them)", RT_CLASS_GLOBAL, 0,
                {0, 0, 0, 0, 0, "(T) int64", 1}, NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG, RT_P_I64, 0, NOTEMP,
                NOFL, NOFL },
    SHARED_GRADS(P),
    [P_D_LOGITS] = { "d_logits", "grad of the logits", RT_CLASS_GRAD, RT_F_TP | RT_F_HEAD,
                     SH(0, 1, 0, 0, 0, "(B,T,V) fp32"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG, RT_P_F32, 0, NOTEMP,
                     NOFL, NOFL },
};

const remat_table remat_table_pytorch = {
    .name = "pytorch",
    .count = P_COUNT,
    .nblock = P_NBLOCK,
    .first_grad = P_D_RES,
    .emb = P_EMB,
    .d_res = P_D_RES,
    .nlmhead = 3, .lmhead = { P_LNF_STAT, P_LNF, P_LOGP },
    .nlmhead_bwd = 2, .lmhead_bwd = { P_LOGP, P_LNF },
    .nbwd = 13, .bwd = BWD_ORDER(P),
    .defs = pytorch_defs,
    .nres = 4, .res = { P_TOKENS, P_TARGETS, P_POS, P_EMB_MASK },
};
