/*
 * frameworks_llama.h -- the shorthand of the Llama-family framework tables
 * (frameworks_llama.c, the dense ones; frameworks_moe.c, mixture of experts):
 * their shapes and the entries they share.  Included by those two files only;
 * frameworks_llama.c's header says what every entry is and where it comes from.
 */
#ifndef REMAT_FRAMEWORKS_LLAMA_H
#define REMAT_FRAMEWORKS_LLAMA_H

#include "tabledef.h"

#define NOWB .w = -1, .b = -1, .site = 0, .gout = N_, .gin = N_
#define NOGRAD .has_bwd = 0, .g_need = NOG, .g_alloc = NOG, .g_free = NOG

/* shapes */
#define S_C    .shape = E1(1, BTC), .shape_text = "(B,T,C)"
#define S_RSTD .shape = E1(1, BT), .shape_text = "(B,T) fp32"
#define S_QKV  .shape = RX(RX_T(1, BT, RD_NH, RD_HS), RX_T(2, BT, RD_KV, RD_HS)), .shape_text = "(B,T,(NH+2KV)HS)"
#define S_Q3   .shape = E1(3, BT, RD_NH, RD_HS), .shape_text = "(B,T,3 NH HS)"
#define S_O    .shape = E1(1, BT, RD_NH, RD_HS), .shape_text = "(B,T,NH HS)"
#define S_ATT  .shape = E1(1, RD_B, RD_NH, RD_T, RD_T), .shape_text = "(B,NH,T,T)"
#define S_LSE  .shape = E1(1, RD_B, RD_NH, RD_T), .shape_text = "(B,NH,T) fp32"
#define S_F    .shape = E1(1, BT, RD_F), .shape_text = "(B,T,F)"
#define S_2F   .shape = E1(2, BT, RD_F), .shape_text = "(B,T,2F)"
#define S_V    .shape = E1(1, BT, RD_VP), .shape_text = "(B,T,Vp) fp32"
/* a linear layer out (B T, n) = in (B T, k) W^T: one product forward, two backward */
#define LIN(n_, k_) .opc = RO_LINEAR, .gemm = { E1(1, BT), n_, k_ }, .cost = { 1, 2, RX_0, RX_0 }
#define QKV_N RX(RX_T(1, RD_NH, RD_HS), RX_T(2, RD_KV, RD_HS))
#define O_K E1(1, RD_NH, RD_HS)
/* attention products over the causal pairs: forward f, backward b */
#define ATTN(f, b) .opc = RO_ATTENTION, .cost = { f, b, RX_0, RX_0 }

/* A flash kernel (both frameworks): one forward makes O and the softmax
 * statistics, so the product FLOPs sit on an entry of no bytes (attn) that
 * neither output keeps (transient) and recomputing either runs it again;
 * the statistics are what core_attn drops.  cpf: RT_F_CP where the table
 * models context parallelism, and then ring_f, ring_b the ring's buffers
 * (scratch of the forward kernel and of the backward); om_lse, om_o: the
 * offload modules that save the statistics and O */
#define FLASH_CORE(X, cpf, om_lse, om_o, ring_f, ring_b, kernel_op, lse_op, o_op)                               \
    [X##_ATTN] = { .name = "attn", .mods = RM_CORE_ATTN_REGION, .op = kernel_op, .cls = RT_CLASS_BLOCK,        \
                   .flags = cpf | RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT, .shape = RX_0, .shape_text = "(none)",   \
                   .prec = RT_P_ACT, NOWB, ATTN(2, 0), .fwd_in = R(X##_QKV_ATT, N_, N_), .bwd_in = NOR, NOGRAD,  \
                   ring_f },                                                                                    \
    [X##_LSE] = { .name = "lse", .mods = RM_CORE_ATTN | RM_CORE_ATTN_REGION | RM_SAC_SAVED, .omods = om_lse,  \
                  .op = lse_op, .cls = RT_CLASS_BLOCK, .flags = cpf | RT_F_TP | RT_F_SELECTIVE, S_LSE,          \
                  .prec = RT_P_F32, NOWB, .fwd_in = R(X##_ATTN, N_, N_), .bwd_in = NOR, NOGRAD },               \
    [X##_ATTY] = { .name = "atty", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED, .omods = om_o, .op = o_op,     \
                   .cls = RT_CLASS_BLOCK, .flags = cpf | RT_F_TP | RT_F_GEMM, S_O, .prec = RT_P_ACT, NOWB,       \
                   ATTN(0, 4), .fwd_in = R(X##_ATTN, X##_LSE, N_), .bwd_in = R(X##_QKV_ATT, X##_LSE, X##_ATTY),  \
                   .has_bwd = 1, .g_need = G(X##_D_ATTY, N_), .g_alloc = G(X##_D_QKVATT, N_),                   \
                   .g_free = G(X##_D_ATTY, N_), ring_b }

/* Context parallelism's ring (Transformer Engine d0067d0, attention/
 * dot_product_attention/context_parallel.py, AttnFuncWithCPAndKVP2P, the
 * path Megatron's default --cp-comm-type p2p takes).  K1 = b (s/cp) (KV/t) hs,
 * one chunk's k (or v); Q1 = b (s/cp) (NH/t) hs.  The forward keeps every
 * step's buffer in p2p_comm_buffers until it returns: its own k, v
 * concatenated and the cp - 1 chunks received, cp x 2K1 -- the whole
 * sequence's K and V -- and every step's output (out_per_step, bf16, all of
 * Q1 on the last rank, whose steps are all diagonal or lower-triangle) and
 * softmax statistics (fp32) until the corrections merge them.  It saves q,
 * the last chunk received and O (as many bytes as q, k, v and O without
 * CP).  The backward sends K/V around again with their gradients: two
 * buffers of (2, 2K1) (kv and dkv), whose last dkv it returns, beside dq
 * (d_qkv_att's), and each step's dq_, dk_, dv_ (Q1 + 2K1) from the kernel. */
#define MF_RING_F                                                                                                \
    .scratch = { { E1(2, RD_B, RD_T, RD_KV, RD_HS, RD_CP), RT_P_ACT, RW_CP },                                  \
                 { E1(1, RD_B, RD_T, RD_NH, RD_HS, RD_CP), RT_P_ACT, RW_CP },                                  \
                 { E1(1, RD_B, RD_T, RD_NH, RD_CP), RT_P_F32, RW_CP } }
#define MF_RING_B                                                                                                \
    .scratch = { { RX(RX_T(1, BT, RD_NH, RD_HS), RX_T(10, BT, RD_KV, RD_HS)), RT_P_ACT, RW_CP | RW_BWD } }

/* ---- the entries both backends share --------------------------------------- */

/* Megatron: the QKV input (LayerNormLinear's norm) and the projection */
#define M_NORM_QKV(X)                                                                                            \
    [X##_LN1_RSTD] = { .name = "ln1_rstd", .omods = RF_QKV_LINEAR, .op = "input RMSNorm rsigma (LayerNormLinear of linear_qkv)",        \
                       .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_SP, S_RSTD, .prec = RT_P_F32, NOWB,                 \
                       .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, NOGRAD },                                      \
    [X##_LN1] = { .name = "ln1", .omods = RF_QKV_LINEAR, .op = "input RMSNorm ln_out (LayerNormLinear): the QKV GEMM's input",           \
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB,         \
                  .fwd_in = R(RT_X, X##_LN1_RSTD, N_), .bwd_in = R(RT_X, X##_LN1_RSTD, N_), .has_bwd = 1,        \
                  .g_need = G(X##_D_RES, X##_D_LN1), .g_alloc = NOG, .g_free = G(X##_D_LN1, N_) },               \
    [X##_QKV] = { .name = "qkv", .mods = RM_SAC_SAVED, .op = "linear_qkv (column-parallel): mixed_qkv, split into views", \
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_COL | RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT, S_QKV,         \
                  .prec = RT_P_ACT, NOWB, LIN(QKV_N, E1(1, RD_C)), .fwd_in = R(X##_LN1, N_, N_),                 \
                  .bwd_in = R(X##_LN1, N_, N_), .has_bwd = 1, .g_need = G(X##_D_QKV, N_),                        \
                  .g_alloc = G(X##_D_LN1, N_), .g_free = G(X##_D_QKV, N_) }

/* the output projection, the residual and the pre-MLP norm (M_PROJ), then
 * the MLP (M_MLP); the residual adds' backward (Megatron's bias_dropout_add)
 * masks d_res into d_branch */
#define M_PROJ_MLP(X) M_PROJ(X), M_LN2(X), M_MLP(X)
#define M_PROJ(X)                                                                                            \
    [X##_PROJ] = { .name = "proj", .mods = RM_SAC_SAVED, .op = "linear_proj (row-parallel): its output",         \
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_C,          \
                   .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_C), O_K), .fwd_in = R(X##_ATTY, N_, N_),                  \
                   .bwd_in = R(X##_ATTY, N_, N_), .has_bwd = 1, .g_need = G(X##_D_BRANCH, X##_D_RES),             \
                   .g_alloc = G(X##_D_ATTY, N_), .g_free = G(X##_D_BRANCH, N_) },                                 \
    [X##_PROJ_MASK] = { .name = "proj_mask", .op = "dropout mask (self_attn_bda)", .cls = RT_CLASS_BLOCK,        \
                        .flags = RT_F_CP | RT_F_SP | RT_F_DROPOUT, S_C, .prec = RT_P_BYTE, NOWB,                           \
                        .fwd_in = R(X##_PROJ, N_, N_), .bwd_in = NOR, NOGRAD },                                  \
    [X##_RES2] = { .name = "res2", .op = "x + dropout(proj): linear_fc1's LayerNormLinear input", .cls = RT_CLASS_BLOCK, \
                   .flags = RT_F_CP | RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(X##_PROJ, X##_PROJ_MASK, RT_X),     \
                   .bwd_in = R(X##_PROJ_MASK, N_, N_), .has_bwd = 1, .g_need = G(X##_D_RES, N_),                   \
                   .g_alloc = G(X##_D_BRANCH, N_), .g_free = NOG }
#define M_LN2(X)                                                                                                 \
    [X##_LN2_RSTD] = { .name = "ln2_rstd", .op = "pre-MLP RMSNorm rsigma (LayerNormLinear of linear_fc1)",       \
                       .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_SP, S_RSTD, .prec = RT_P_F32, NOWB,                 \
                       .fwd_in = R(X##_RES2, N_, N_), .bwd_in = NOR, NOGRAD },                                  \
    [X##_LN2] = { .name = "ln2", .op = "pre-MLP RMSNorm ln_out (LayerNormLinear): fc1's input",                  \
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB,         \
                  .fwd_in = R(X##_RES2, X##_LN2_RSTD, N_), .bwd_in = R(X##_RES2, X##_LN2_RSTD, N_), .has_bwd = 1, \
                  .g_need = G(X##_D_RES, X##_D_LN2), .g_alloc = NOG, .g_free = G(X##_D_LN2, N_) }
#define M_MLP(X)                                                                                                 \
    [X##_FC1] = { .name = "fc1", .mods = RM_MLP | RM_SAC_SAVED, .op = "linear_fc1 (column-parallel): gate and up, which the SwiGLU saves", \
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_COL | RT_F_TP | RT_F_GEMM, S_2F, .prec = RT_P_ACT, NOWB,   \
                  LIN(E1(2, RD_F), E1(1, RD_C)), .fwd_in = R(X##_LN2, N_, N_), .bwd_in = R(X##_LN2, N_, N_),     \
                  .has_bwd = 1, .g_need = G(X##_D_FC1, N_), .g_alloc = G(X##_D_LN2, N_), .g_free = G(X##_D_FC1, N_) }, \
    [X##_SWIGLU] = { .name = "swiglu", .mods = RM_MLP, .op = "bias_swiglu: silu(gate) * up, linear_fc2's input", \
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_POINTWISE, S_F, .prec = RT_P_ACT, NOWB,       \
                     .fwd_in = R(X##_FC1, N_, N_), .bwd_in = R(X##_FC1, N_, N_), .has_bwd = 1,                   \
                     .g_need = G(X##_D_SWIGLU, N_), .g_alloc = G(X##_D_FC1, N_), .g_free = G(X##_D_SWIGLU, N_) }, \
    [X##_MLP] = { .name = "mlp", .mods = RM_MLP_REGION | RM_SAC_SAVED, .op = "linear_fc2 (row-parallel): its output", \
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_C,           \
                  .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_C), E1(1, RD_F)), .fwd_in = R(X##_SWIGLU, N_, N_),        \
                  .bwd_in = R(X##_SWIGLU, N_, N_), .has_bwd = 1, .g_need = G(X##_D_BRANCH, X##_D_RES),           \
                  .g_alloc = G(X##_D_SWIGLU, N_), .g_free = G(X##_D_BRANCH, N_) },                               \
    [X##_MLP_MASK] = { .name = "mlp_mask", .op = "dropout mask (mlp_bda)", .cls = RT_CLASS_BLOCK,                \
                       .flags = RT_F_CP | RT_F_SP | RT_F_DROPOUT, S_C, .prec = RT_P_BYTE, NOWB,                            \
                       .fwd_in = R(X##_MLP, N_, N_), .bwd_in = NOR, NOGRAD },                                    \
    [X##_RES3] = { .name = "res3", .op = "res2 + dropout(fc2): the block output", .cls = RT_CLASS_BLOCK,         \
                   .flags = RT_F_CP | RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(X##_MLP, X##_MLP_MASK, X##_RES2),   \
                   .bwd_in = R(X##_MLP_MASK, N_, N_), .has_bwd = 1, .g_need = G(X##_D_RES, N_),                   \
                   .g_alloc = G(X##_D_BRANCH, N_), .g_free = NOG }

/* the embedding, the final norm, the output layer and cross entropy */
#define M_GLOBALS(X)                                                                                             \
    [X##_EMB] = { .name = "emb", .op = "embedding (VocabParallelEmbedding) + dropout", .cls = RT_CLASS_GLOBAL,   \
                  .flags = RT_F_CP | RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = NOR, .bwd_in = NOR, .has_bwd = 1,      \
                  .g_need = G(X##_D_RES, N_), .g_alloc = NOG, .g_free = G(X##_D_RES, N_) },                      \
    [X##_LNF_RSTD] = { .name = "lnf_rstd", .op = "final RMSNorm rsigma (TENorm)", .cls = RT_CLASS_GLOBAL,        \
                       .flags = RT_F_CP | RT_F_SP | RT_F_HEAD, S_RSTD, .prec = RT_P_F32, NOWB, .fwd_in = R(RT_X, N_, N_),  \
                       .bwd_in = NOR, NOGRAD },                                                                   \
    [X##_LNF] = { .name = "lnf", .op = "final RMSNorm (TENorm): the output layer's input", .cls = RT_CLASS_GLOBAL, \
                  .flags = RT_F_CP | RT_F_SP | RT_F_HEAD, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(RT_X, X##_LNF_RSTD, N_),  \
                  .bwd_in = R(RT_X, X##_LNF_RSTD, N_), .has_bwd = 1, .g_need = G(X##_D_LNF, N_),                 \
                  .g_alloc = G(X##_D_RES, N_), .g_free = G(X##_D_LNF, N_) },                                     \
    [X##_LOGITS] = { .name = "logits", .op = "output layer (column-parallel) + vocab-parallel cross entropy: the fp32 softmax", \
                     .cls = RT_CLASS_GLOBAL, .flags = RT_F_CP | RT_F_TP | RT_F_GEMM | RT_F_HEAD, S_V, .prec = RT_P_F32,     \
                     NOWB, LIN(E1(1, RD_VP), E1(1, RD_C)), .fwd_in = R(X##_LNF, N_, N_),                         \
                     .bwd_in = R(X##_LNF, X##_LOGITS, X##_CE_TGT), .has_bwd = 1, .g_need = NOG,                  \
                     .g_alloc = G(X##_D_LNF, N_), .g_free = G(X##_LOGITS, N_),                                    \
                     .scratch = { { E1(1, BT, RD_VP), RT_P_ACT, RW_ALWAYS } } },                                  \
    [X##_CE_TGT] = { .name = "ce_targets", .op = "cross entropy's target mask (bool) and masked target (int64)",  \
                     .cls = RT_CLASS_GLOBAL, .flags = RT_F_CP | RT_F_HEAD, .shape = E1(9, BT), .shape_text = "(B,T) 9 bytes", \
                     .prec = RT_P_BYTE, NOWB, .fwd_in = R(X##_LOGITS, N_, N_), .bwd_in = NOR, NOGRAD },          \
    [X##_TOKENS] = { .name = "tokens", .op = "token ids (F.embedding keeps them)", .cls = RT_CLASS_GLOBAL,        \
                     .flags = RT_F_CP, .shape = E1(1, BT), .shape_text = "(B,T) int64", .prec = RT_P_I64, NOWB, .fwd_in = NOR,      \
                     .bwd_in = NOR, NOGRAD },                                                                    \
    [X##_EMB_MASK] = { .name = "emb_mask", .op = "embedding dropout mask (held all step)", .cls = RT_CLASS_GLOBAL, \
                       .flags = RT_F_CP | RT_F_SP | RT_F_DROPOUT, S_C, .prec = RT_P_BYTE, NOWB, .fwd_in = NOR,             \
                       .bwd_in = NOR, NOGRAD }

#define GRAD(id, name_, what, flags_, shape_, prec_)                                                          \
    [id] = { .name = name_, .op = what, .cls = RT_CLASS_GRAD, .flags = flags_, shape_, .prec = prec_, NOWB,   \
             .fwd_in = NOR, .bwd_in = NOR, .g_need = NOG, .g_alloc = NOG, .g_free = NOG }
#define M_GRADS(X)                                                                                              \
    GRAD(X##_D_RES, "d_res", "grad of residual stream", RT_F_CP | RT_F_SP | RT_F_ZERO, S_C, RT_P_ACT),                    \
    GRAD(X##_D_BRANCH, "d_branch", "grad of a dropped-out branch (p>0)", RT_F_CP | RT_F_SP | RT_F_DROPOUT, S_C, RT_P_ACT), \
    GRAD(X##_D_SWIGLU, "d_swiglu", "grad of swiglu", RT_F_CP | RT_F_TP, S_F, RT_P_ACT),                                  \
    GRAD(X##_D_FC1, "d_fc1", "grad of fc1", RT_F_CP | RT_F_TP, S_2F, RT_P_ACT),                                          \
    GRAD(X##_D_LN2, "d_ln2", "grad of ln2", RT_F_CP | RT_F_SP, S_C, RT_P_ACT),                                            \
    GRAD(X##_D_ATTY, "d_atty", "grad of atty (O)", RT_F_CP | RT_F_TP, S_O, RT_P_ACT),                                     \
    GRAD(X##_D_QKV, "d_qkv", "grad of qkv", RT_F_CP | RT_F_TP, S_QKV, RT_P_ACT),                                          \
    GRAD(X##_D_LN1, "d_ln1", "grad of ln1", RT_F_CP | RT_F_SP, S_C, RT_P_ACT),                                            \
    GRAD(X##_D_LNF, "d_lnf", "grad of lnf", RT_F_CP | RT_F_SP | RT_F_HEAD, S_C, RT_P_ACT)

/* ---- pytorch: Hugging Face's LlamaForCausalLM ----------------------------------
 * Gradient flow in a block's backward: d_res -> [down] d_swiglu ->
 * [swiglu] d_silu, d_gate_up (up) -> [silu] d_gate_up (gate) -> [gate_up]
 * d_ln2 -> [ln2: the whole RMSNorm] d_res += ; d_res -> [o_proj] d_atty ->
 * [attention] d_qkv_att -> [RoPE, repeat_kv] d_qkv -> [qkv] d_ln1 -> [ln1]
 * d_res +=.  The residual adds have no backward of their own. */

/* RMSNorm: x.float() (bf16 only), rsqrt(mean(x^2) + eps) and x * it (the
 * rstd is fp32 in both dtypes; counted at the activation's precision, two
 * bytes a row low under bf16), weight * that */
#define P_NORM(X, N, nm, in, what)                                                                                   \
    [X##_##N##_X32] = { .name = nm "_x32", .op = "x.to(float32) (" what "): the copy pow() and x * rstd save",   \
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_BF16, S_C, .prec = RT_P_F32, NOWB,        \
                        .fwd_in = R(in, N_, N_), .bwd_in = NOR, NOGRAD },                                        \
    [X##_##N##_STAT] = { .name = nm "_stat", .op = "rsqrt(mean(x^2) + eps) and x * it (" what ")",               \
                         .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, .shape = RX(RX_T(1, BT), RX_T(1, BTC)),        \
                         .shape_text = "(B,T,1) + (B,T,C)", .prec = RT_P_ACT, NOWB,                              \
                         .fwd_in = R(in, X##_##N##_X32, N_), .bwd_in = NOR, NOGRAD },                            \
    [X##_##N] = { .name = nm, .op = "weight * x rstd (" what ")", .cls = RT_CLASS_BLOCK,                         \
                  .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB,                                \
                  .fwd_in = R(X##_##N##_STAT, N_, N_), .bwd_in = R(in, X##_##N##_X32, X##_##N##_STAT),          \
                  .has_bwd = 1, .g_need = G(X##_D_RES, X##_D_##N), .g_alloc = NOG, .g_free = G(X##_D_##N, N_) }

#define P_QKV(X)                                                                                                 \
    [X##_QKV] = { .name = "qkv", .mods = RM_SAC_SAVED, .op = "q_proj, k_proj, v_proj (nn.Linear): views for RoPE", \
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_COL | RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT, S_QKV,         \
                  .prec = RT_P_ACT, NOWB, .opc = RO_LINEAR, .gemm = { E1(1, BT), QKV_N, E1(1, RD_C) },           \
                  .cost = { 1, 2, RX_0, RX_0 }, .fwd_in = R(X##_LN1, N_, N_), .bwd_in = R(X##_LN1, N_, N_),      \
                  .has_bwd = 1, .g_need = G(X##_D_QKV, N_), .g_alloc = G(X##_D_LN1, N_), .g_free = G(X##_D_QKV, N_) }

#define P_OPROJ_LN2(X)                                                                                           \
    [X##_OPROJ] = { .name = "o_proj", .mods = RM_SAC_SAVED, .op = "o_proj (nn.Linear): its output",             \
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_C,         \
                    .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_C), O_K), .fwd_in = R(X##_ATTY, N_, N_),                 \
                    .bwd_in = R(X##_ATTY, N_, N_), .has_bwd = 1, .g_need = G(X##_D_RES, N_),                      \
                    .g_alloc = G(X##_D_ATTY, N_), .g_free = NOG },                                               \
    [X##_RES2] = { .name = "res2", .op = "residual + o_proj: post_attention_layernorm's input",                  \
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB,                         \
                   .fwd_in = R(X##_OPROJ, RT_X, N_), .bwd_in = NOR, NOGRAD },                                    \
    P_NORM(X, LN2, "ln2", X##_RES2, "post_attention_layernorm")
#define P_MLP(X) P_OPROJ_LN2(X), P_DENSE_MLP(X)
#define P_DENSE_MLP(X)                                                                                           \
    [X##_GATE_UP] = { .name = "gate_up", .mods = RM_MLP | RM_SAC_SAVED, .op = "gate_proj, up_proj (nn.Linear): SiLU saves gate, the product up", \
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_COL | RT_F_TP | RT_F_GEMM, S_2F, .prec = RT_P_ACT,     \
                      NOWB, LIN(E1(2, RD_F), E1(1, RD_C)), .fwd_in = R(X##_LN2, N_, N_),                          \
                      .bwd_in = R(X##_LN2, N_, N_), .has_bwd = 1, .g_need = G(X##_D_GATE_UP, N_),                 \
                      .g_alloc = G(X##_D_LN2, N_), .g_free = G(X##_D_GATE_UP, N_) },                              \
    [X##_SILU] = { .name = "silu", .mods = RM_MLP, .op = "act_fn(gate) (nn.SiLU): the product saves it",         \
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_POINTWISE, S_F, .prec = RT_P_ACT, NOWB,         \
                   .fwd_in = R(X##_GATE_UP, N_, N_), .bwd_in = R(X##_GATE_UP, N_, N_), .has_bwd = 1,              \
                   .g_need = G(X##_D_SILU, X##_D_GATE_UP), .g_alloc = NOG, .g_free = G(X##_D_SILU, N_) },         \
    [X##_SWIGLU] = { .name = "swiglu", .mods = RM_MLP, .op = "silu(gate) * up: down_proj's input",                \
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_POINTWISE, S_F, .prec = RT_P_ACT, NOWB,       \
                     .fwd_in = R(X##_SILU, X##_GATE_UP, N_), .bwd_in = R(X##_SILU, X##_GATE_UP, N_), .has_bwd = 1, \
                     .g_need = G(X##_D_SWIGLU, N_), .g_alloc = G(X##_D_SILU, X##_D_GATE_UP),                     \
                     .g_free = G(X##_D_SWIGLU, N_) },                                                            \
    [X##_DOWN] = { .name = "down", .mods = RM_MLP_REGION | RM_SAC_SAVED, .op = "down_proj (nn.Linear): its output", \
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_C,          \
                   .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_C), E1(1, RD_F)), .fwd_in = R(X##_SWIGLU, N_, N_),        \
                   .bwd_in = R(X##_SWIGLU, N_, N_), .has_bwd = 1, .g_need = G(X##_D_RES, N_),                     \
                   .g_alloc = G(X##_D_SWIGLU, N_), .g_free = NOG },                                              \
    [X##_RES3] = { .name = "res3", .op = "res2 + down_proj: the block output (the next RMSNorm's input)",        \
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB,                         \
                   .fwd_in = R(X##_DOWN, X##_RES2, N_), .bwd_in = NOR, NOGRAD }

#define P_GLOBALS(X) P_GLOBALS_R(X, E1(2, RD_T, RD_HS), "2 x (1,T,HS)")
/* the same with the rotary tables' shape (MLA rotates dr columns only) */
#define P_GLOBALS_R(X, rope_, rope_text_)                                                                        \
    [X##_EMB] = { .name = "emb", .op = "embed_tokens (nn.Embedding)", .cls = RT_CLASS_GLOBAL, .flags = RT_F_SP,  \
                  S_C, .prec = RT_P_ACT, NOWB, .fwd_in = NOR, .bwd_in = NOR, .has_bwd = 1,                        \
                  .g_need = G(X##_D_RES, N_), .g_alloc = NOG, .g_free = G(X##_D_RES, N_) },                      \
    [X##_LNF_X32] = { .name = "lnf_x32", .op = "x.to(float32) (norm)", .cls = RT_CLASS_GLOBAL,                  \
                      .flags = RT_F_SP | RT_F_BF16 | RT_F_HEAD, S_C, .prec = RT_P_F32, NOWB,                     \
                      .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, NOGRAD },                                        \
    [X##_LNF_STAT] = { .name = "lnf_stat", .op = "rsqrt(mean(x^2) + eps) and x * it (norm)", .cls = RT_CLASS_GLOBAL, \
                       .flags = RT_F_SP | RT_F_HEAD, .shape = RX(RX_T(1, BT), RX_T(1, BTC)),                      \
                       .shape_text = "(B,T,1) + (B,T,C)", .prec = RT_P_ACT, NOWB,                                \
                       .fwd_in = R(RT_X, X##_LNF_X32, N_), .bwd_in = NOR, NOGRAD },                              \
    [X##_LNF] = { .name = "lnf", .op = "weight * x rstd (norm): lm_head's input", .cls = RT_CLASS_GLOBAL,       \
                  .flags = RT_F_SP | RT_F_HEAD, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(X##_LNF_STAT, N_, N_),   \
                  .bwd_in = R(RT_X, X##_LNF_X32, X##_LNF_STAT), .has_bwd = 1, .g_need = G(X##_D_LNF, N_),        \
                  .g_alloc = G(X##_D_RES, N_), .g_free = G(X##_D_LNF, N_) },                                     \
    /* lm_head's logits and, under bf16, logits.float() are scratch */                                        \
    [X##_LOGP] = { .name = "logp", .op = "lm_head, logits.float(), F.cross_entropy: the fp32 log-softmax",      \
                   .cls = RT_CLASS_GLOBAL, .flags = RT_F_TP | RT_F_GEMM | RT_F_HEAD, S_V, .prec = RT_P_F32,       \
                   NOWB, LIN(E1(1, RD_VP), E1(1, RD_C)), .fwd_in = R(X##_LNF, N_, N_),                           \
                   .bwd_in = R(X##_LNF, X##_LOGP, N_), .has_bwd = 1, .g_need = NOG,                               \
                   .g_alloc = G(X##_D_LOGITS, X##_D_LNF), .g_free = G(X##_D_LOGITS, N_),                          \
                   .scratch = { { E1(1, BT, RD_VP), RT_P_ACT, RW_ALWAYS }, { E1(1, BT, RD_VP), RT_P_F32, RW_BF16 } } }, \
    [X##_TOKENS] = { .name = "tokens", .op = "input ids (nn.Embedding keeps them)", .cls = RT_CLASS_GLOBAL,      \
                     .shape = E1(1, BT), .shape_text = "(B,T) int64", .prec = RT_P_I64, NOWB, .fwd_in = NOR,      \
                     .bwd_in = NOR, NOGRAD },                                                                    \
    [X##_TARGETS] = { .name = "targets", .op = "shift_labels (ForCausalLMLoss; nll_loss keeps them)",             \
                      .cls = RT_CLASS_GLOBAL, .shape = E1(1, BT), .shape_text = "(B,T) int64", .prec = RT_P_I64,  \
                      NOWB, .fwd_in = NOR, .bwd_in = NOR, NOGRAD },                                              \
    [X##_ROPE] = { .name = "rope", .op = "cos, sin (LlamaRotaryEmbedding, once per forward): every layer's RoPE saves them", \
                   .cls = RT_CLASS_GLOBAL, .shape = rope_, .shape_text = rope_text_,                               \
                   .prec = RT_P_ACT, NOWB, .fwd_in = NOR, .bwd_in = NOR, NOGRAD }

#define P_GRADS(X)                                                                                              \
    GRAD(X##_D_RES, "d_res", "grad of residual stream", RT_F_SP | RT_F_ZERO, S_C, RT_P_ACT),                    \
    GRAD(X##_D_SWIGLU, "d_swiglu", "grad of swiglu", RT_F_TP, S_F, RT_P_ACT),                                  \
    GRAD(X##_D_SILU, "d_silu", "grad of silu", RT_F_TP, S_F, RT_P_ACT),                                        \
    GRAD(X##_D_GATE_UP, "d_gate_up", "grad of gate_up", RT_F_TP, S_2F, RT_P_ACT),                              \
    GRAD(X##_D_LN2, "d_ln2", "grad of ln2", RT_F_SP, S_C, RT_P_ACT),                                            \
    GRAD(X##_D_ATTY, "d_atty", "grad of atty", RT_F_TP, S_O, RT_P_ACT),                                         \
    GRAD(X##_D_QKV, "d_qkv", "grad of qkv", RT_F_TP, S_QKV, RT_P_ACT),                                          \
    GRAD(X##_D_LN1, "d_ln1", "grad of ln1", RT_F_SP, S_C, RT_P_ACT),                                            \
    GRAD(X##_D_LNF, "d_lnf", "grad of lnf", RT_F_SP | RT_F_HEAD, S_C, RT_P_ACT),                                \
    GRAD(X##_D_LOGITS, "d_logits", "grad of the logits", RT_F_TP | RT_F_HEAD, S_V, RT_P_F32)

#define P_BWD_HEAD(X) X##_DOWN, X##_SWIGLU, X##_SILU, X##_GATE_UP, X##_LN2, X##_OPROJ, X##_ATTY
#define P_BWD_TAIL(X) X##_QKV_ATT, X##_QKV, X##_LN1

#define P_TABLE(X, name_, defs_, nbwd_, ...)                                                                   \
    { .name = name_, .arch = REMAT_ARCH_LLAMA, .count = X##_COUNT, .nblock = X##_NBLOCK, .first_grad = X##_D_RES, \
      .emb = X##_EMB, .d_res = X##_D_RES, .d_branch = RT_NONE,                                              \
      .nlmhead = 4, .lmhead = { X##_LNF_X32, X##_LNF_STAT, X##_LNF, X##_LOGP },                             \
      .nlmhead_bwd = 2, .lmhead_bwd = { X##_LOGP, X##_LNF }, .nbwd = nbwd_, .bwd = { __VA_ARGS__ },         \
      .defs = defs_, .nres = 3, .res = { X##_TOKENS, X##_TARGETS, X##_ROPE } }

/* eager_attention_forward (attn_implementation="eager"): the pytorch eager tables' attention */
#define P_EAGER_ATTN(X)  \
    /* RoPE'd k before repeat_kv, and v's view, live only inside the op */  \
    [X##_QKV_ATT] = { .name = "qkv_att", .op = "q after apply_rotary_pos_emb, repeat_kv copies of k and v: the matmuls' operands",  \
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_POINTWISE, S_Q3, .prec = RT_P_ACT, NOWB,  \
                     .fwd_in = R(X##_QKV, N_, N_), .bwd_in = NOR, .has_bwd = 1, .g_need = G(X##_D_QKVATT, N_),  \
                     .g_alloc = G(X##_D_QKV, N_), .g_free = G(X##_D_QKVATT, N_),  \
                     .scratch = { { E1(1, BT, RD_KV, RD_HS), RT_P_ACT, RW_ALWAYS } } },  \
    [X##_SCORES] = { .name = "scores", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED,  \
                    .op = "matmul(q, k^T) * scaling + causal mask", .cls = RT_CLASS_BLOCK,  \
                    .flags = RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT | RT_F_SELECTIVE, S_ATT, .prec = RT_P_ACT, NOWB,  \
                    ATTN(1, 2), .fwd_in = R(X##_QKV_ATT, N_, N_), .bwd_in = R(X##_QKV_ATT, N_, N_), .has_bwd = 1,  \
                    .g_need = G(X##_D_ATT, X##_D_QKVATT), .g_alloc = NOG, .g_free = G(X##_D_ATT, N_) },  \
    [X##_ATT] = { .name = "att", .mods = RM_CORE_ATTN, .op = "softmax(dtype=float32): the fp32 probabilities",  \
                 .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_SELECTIVE, S_ATT, .prec = RT_P_F32, NOWB,  \
                 .fwd_in = R(X##_SCORES, N_, N_), .bwd_in = R(X##_ATT, N_, N_), .has_bwd = 1,  \
                 .g_need = G(X##_D_ATT, N_), .g_alloc = NOG, .g_free = NOG },  \
    [X##_ATT_BF16] = { .name = "att_bf16", .mods = RM_CORE_ATTN, .op = "the probabilities .to(query.dtype) (bf16 only)",  \
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_SELECTIVE | RT_F_BF16, S_ATT, .prec = RT_P_ACT,  \
                      NOWB, .fwd_in = R(X##_ATT, N_, N_), .bwd_in = NOR, NOGRAD },  \
    [X##_ATT_MASK] = { .name = "att_mask", .mods = RM_CORE_ATTN, .op = "attention dropout mask (native_dropout on a GPU: bool)",  \
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT, S_ATT,  \
                      .prec = RT_P_BYTE, NOWB, .fwd_in = R(X##_ATT_BF16, N_, N_), .bwd_in = NOR, NOGRAD },  \
    [X##_ATT_DROP] = { .name = "att_drop", .mods = RM_CORE_ATTN, .op = "attention dropout (attention_dropout)",  \
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT, S_ATT,  \
                      .prec = RT_P_ACT, NOWB, .fwd_in = R(X##_ATT_BF16, X##_ATT_MASK, N_),  \
                      .bwd_in = R(X##_ATT_MASK, N_, N_), .has_bwd = 1, .g_need = G(X##_D_ATT, N_), .g_alloc = NOG,  \
                      .g_free = NOG },  \
    /* the matmul's (B,NH,T,HS) output is copied by transpose(1, 2).contiguous() */  \
    [X##_ATTY] = { .name = "atty", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED,  \
                  .op = "matmul(probabilities, v), transposed contiguous: o_proj's input", .cls = RT_CLASS_BLOCK,  \
                  .flags = RT_F_TP | RT_F_GEMM, S_O, .prec = RT_P_ACT, NOWB, ATTN(1, 2),  \
                  .fwd_in = R(X##_ATT_DROP, X##_ATT_BF16, X##_QKV_ATT), .bwd_in = R(X##_ATT_DROP, X##_ATT_BF16, X##_QKV_ATT),  \
                  .has_bwd = 1, .g_need = G(X##_D_ATTY, N_), .g_alloc = G(X##_D_ATT, X##_D_QKVATT),  \
                  .g_free = G(X##_D_ATTY, N_), .scratch = { { E1(1, BT, RD_NH, RD_HS), RT_P_ACT, RW_ALWAYS } } }

/* a block's backward order's ends, and a Megatron table */
#define M_BWD_TAIL(X) X##_QKV, X##_LN1
#define M_BWD_HEAD(X) X##_RES3, X##_MLP, X##_SWIGLU, X##_FC1, X##_LN2, X##_RES2, X##_PROJ, X##_ATTY

#define M_TABLE(X, name_, defs_, cp_, nbwd_, ...)                                                              \
    { .name = name_, .arch = REMAT_ARCH_LLAMA, .count = X##_COUNT, .nblock = X##_NBLOCK, .first_grad = X##_D_RES, \
      .cp = cp_, .x_omods = RF_QKV_LINEAR,                                                                  \
      .emb = X##_EMB, .d_res = X##_D_RES, .d_branch = X##_D_BRANCH,                                         \
      .nlmhead = 4, .lmhead = { X##_LNF_RSTD, X##_LNF, X##_LOGITS, X##_CE_TGT },                            \
      .nlmhead_bwd = 2, .lmhead_bwd = { X##_LOGITS, X##_LNF }, .nbwd = nbwd_, .bwd = { __VA_ARGS__ },       \
      .defs = defs_, .nres = 2, .res = { X##_TOKENS, X##_EMB_MASK } }

#endif
