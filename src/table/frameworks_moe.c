/*
 * frameworks_moe.c -- mixture-of-experts layers as a framework keeps them
 * for the backward pass (issue 27): Megatron-core's MoE layer under
 * Transformer Engine with fused attention, for planning Mixtral, Qwen3-MoE
 * and DeepSeek-V3 runs.  Data in the format of tensors.h, run by the same
 * compiler, simulator and planner as every table; the attention half of a
 * block is frameworks_llama.c's (its header says where each entry comes from).
 *
 * Dimension legend: B micro-batch, T sequence, C hidden, E routed experts,
 * k experts per token, N = B T / t the GPU's tokens (sequence parallelism),
 * R the GPU's routed token rows, EF one expert's width on the GPU
 * (moe_ffn / etp), SF the shared experts' width; t the tensor-parallel size.
 *
 * Routed rows (RD_R).  The alltoall dispatcher sends every one of the N
 * local tokens to its k experts over the EP group, then all-gathers over the
 * expert tensor-parallel group (token_dispatcher.py, dispatch_postprocess,
 * gather_from_sequence_parallel_region over tp_group, which is the expert TP
 * group in the MoE layer): at balance a GPU computes k N etp = k B T etp / t
 * rows, each of an expert of width moe_ffn / etp, so its expert
 * intermediates are k B T moe_ffn / t -- Megatron PR #6782's corrected
 * terms.  Under imbalance the busiest GPU's rows are remat_config_moe_rank_load
 * times that: min(F, EP) for the load factor F, min(capacity factor, EP)
 * with a capacity (moe_utils.py, get_capacity and apply_router_token_dropping).
 *
 * megatron (Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553, paths
 * under megatron/core/transformer/moe/; TE's internals as the entries say):
 *   pre_mlp_layernorm is TENorm in the MoE layer spec (not fused into a
 *     linear: the router and the shared experts both read it), so its
 *     output ln2 is a tensor of its own and `layernorm` recompute drops it;
 *   shared experts first (moe_layer.py:647 custom_forward calls
 *     shared_experts_compute before route; SharedExpertMLP is a TE MLP:
 *     fc1 (B,T,2SF)/t that the SwiGLU saves, its output (B,T,SF)/t that fc2
 *     saves, fc2's output held until postprocess adds it, moe_layer.py:595);
 *   the router: RouterGatingLinearFunction (moe_utils.py:1382) saves its
 *     input (ln2) and makes logits (N,E) in --moe-router-dtype (fp32 in the
 *     recipes: counted fp32), which topk_routing_with_score_function
 *     (moe_utils.py:766) does not keep: torch.topk (compute_topk,
 *     moe_utils.py:879) keeps its indices (N,k) int64, the softmax over the
 *     k scores (moe_utils.py:914) its output (N,k) fp32, and the scatter
 *     into the dense (N,E) probabilities (moe_utils.py:954) the same
 *     indices; with an aux loss compute_routing_scores_for_aux_loss
 *     (moe_utils.py:997) keeps its own softmax over all experts (N,E) fp32
 *     (switch_load_balancing_loss_func's sum keeps nothing);
 *   permute (moe_utils.py:344, fused: TE's moe_permute_with_probs) keeps
 *     its row_id_map, counted (N, 2E+1) int32 as TE's triton
 *     make_row_id_map lays it out (not read here: an estimate), which the
 *     unpermute in combine_postprocess reads again;
 *   all_to_all (token_dispatcher.py:705, 718) keeps nothing; the expert-TP
 *     all-gather and sort_chunks_by_idxs (token_dispatcher.py:746, 782) make
 *     the grouped GEMM's input (R,C), which TE's GroupedLinear saves
 *     (experts.py, TEGroupedMLP.forward: linear_fc1); the permuted probs
 *     (R) come along in the router's dtype (fp32);
 *   linear_fc1's output (R,2EF), which weighted_bias_swiglu_impl saves with
 *     the probs (fused_bias_swiglu.py, WeightedSwiGLUFunction), its output
 *     (R,EF), linear_fc2's input; `moe_act` (experts.py:1018,
 *     CheckpointWithoutOutput) drops that output and recomputes it from
 *     fc1's, which stays;
 *   linear_fc2's output (R,C), sorted back, reduce-scattered over expert
 *     TP, sent back (token_dispatcher.py:817, 829, 864) and unpermuted
 *     (token_dispatcher.py:891) into (N,C), plus the shared output: the
 *     layer's output, none of it saved;
 *   `moe` (moe_layer.py:702, tensor_parallel.checkpoint of custom_forward)
 *     drops everything above and keeps ln2, its input; `shared_experts`
 *     (moe_layer.py:517) drops the shared experts' two.
 * FLOPs: the routed products at the GPU's rows (its load's, the busiest
 * GPU's time); the router's (N,E,C) product.  The dispatch and the combine
 * (RT_F_A2A) carry the all-to-all, which the cluster planner prices.
 */
#include <stddef.h>
#include "frameworks_llama.h"

/* routed shapes: rows R, already the GPU's (RT_F_EXPERT) */
#define S_RC   .shape = E1(1, RD_R, RD_C), .shape_text = "(R,C)"
#define S_R2EF .shape = E1(2, RD_R, RD_EF), .shape_text = "(R,2EF)"
#define S_REF  .shape = E1(1, RD_R, RD_EF), .shape_text = "(R,EF)"
#define S_R1   .shape = E1(1, RD_R), .shape_text = "(R) fp32"
#define S_BTE  .shape = E1(1, BT, RD_E), .shape_text = "(B,T,E) fp32"
#define S_BTK  .shape = E1(1, BT, RD_K), .shape_text = "(B,T,k)"
#define S_SF   .shape = E1(1, BT, RD_SF), .shape_text = "(B,T,SF)"
#define S_2SF  .shape = E1(2, BT, RD_SF), .shape_text = "(B,T,2SF)"
/* a grouped GEMM over the GPU's routed rows: out (R, n) = in (R, k) W_e^T */
#define GLIN(n_, k_) .opc = RO_LINEAR, .gemm = { E1(1, RD_R), n_, k_ }, .cost = { 1, 2, RX_0, RX_0 }
#define MOE_IN (RM_MOE | RM_SAC_SAVED)

enum {
    MM_LN1_RSTD = 0, MM_LN1, MM_QKV, MM_QK_NORM_IN, MM_QK_NORM_RSTD, MM_QKV_ATT, MM_ATTN, MM_LSE, MM_ATTY, MM_PROJ, MM_PROJ_MASK, MM_RES2,
    MM_LN2_RSTD, MM_LN2, MM_SH_FC1, MM_SH_ACT, MM_SH_FC2, MM_R_LOGITS, MM_R_IDX, MM_R_PROBS, MM_R_AUX, MM_PERM_MAP,
    MM_DISPATCHED, MM_PERM_PROBS, MM_E_FC1, MM_E_ACT, MM_E_FC2, MM_COMBINE, MM_MLP_MASK, MM_RES3,
    MM_NBLOCK,
    MM_EMB = MM_NBLOCK, MM_LNF_RSTD, MM_LNF, MM_LOGITS, MM_CE_TGT, MM_TOKENS, MM_EMB_MASK,
    MM_D_RES, MM_D_BRANCH, MM_D_LN2, MM_D_ATTY, MM_D_QKVATT, MM_D_QKV, MM_D_LN1, MM_D_LNF,
    MM_D_EOUT, MM_D_EACT, MM_D_EFC1, MM_D_DISP, MM_D_PPROBS, MM_D_RLOGITS, MM_D_SHACT, MM_D_SHFC1,
    MM_COUNT
};
_Static_assert(MM_NBLOCK <= 32 && MM_COUNT <= RT_MAXT, "keep masks are 32-bit; raise RT_MAXT");

static const remat_tensor_def megatron_moe_defs[MM_COUNT] = {
    M_NORM_QKV(MM),
    /* Qwen3's --qk-layernorm: TENorm on the q and k views of mixed_qkv
     * (attention.py, get_query_key_value_tensors) saves its input -- the
     * views keep all of mixed_qkv -- and rsigma per head */
    [MM_QK_NORM_IN] = { .name = "qk_norm_in", .op = "q_layernorm, k_layernorm (TENorm): mixed_qkv, their input's storage",
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_TP,
                        .shape = RX(RX_T(1, BT, RD_NH, RD_HS, RD_QKF), RX_T(2, BT, RD_KV, RD_HS, RD_QKF)),
                        .shape_text = "(B,T,(NH+2KV)HS) with --qk-layernorm", .prec = RT_P_ACT, NOWB,
                        .fwd_in = R(MM_QKV, N_, N_), .bwd_in = NOR, NOGRAD },
    [MM_QK_NORM_RSTD] = { .name = "qk_norm_rstd", .op = "q_layernorm, k_layernorm rsigma (fp32)", .cls = RT_CLASS_BLOCK,
                          .flags = RT_F_TP, .shape = RX(RX_T(1, BT, RD_NH, RD_QKF), RX_T(1, BT, RD_KV, RD_QKF)),
                          .shape_text = "(B,T,NH+KV) fp32 with --qk-layernorm", .prec = RT_P_F32, NOWB,
                          .fwd_in = R(MM_QKV, N_, N_), .bwd_in = NOR, NOGRAD },
    [MM_QKV_ATT] = { .name = "qkv_att", .omods = RF_CORE_ATTN,
                     .op = "q, k after TE's fused RoPE and v made contiguous: what FusedAttention saves",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_POINTWISE, S_QKV, .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(MM_QKV, N_, N_), .bwd_in = NOR, .has_bwd = 1, .g_need = G(MM_D_QKVATT, N_),
                     .g_alloc = G(MM_D_QKV, N_), .g_free = G(MM_D_QKVATT, N_) },
    FLASH_CORE(MM, RT_F_CP, RF_CORE_ATTN, RF_ATTN_PROJ, MF_RING_F, MF_RING_B,
               "FusedAttention forward (fused_attn_fwd): QK^T, softmax, PV",
               "FusedAttention's softmaxStats (log-sum-exp), which it saves",
               "FusedAttention output O, heads merged: linear_proj's input"),
    M_PROJ(MM),
    [MM_LN2_RSTD] = { .name = "ln2_rstd", .mods = RM_LAYERNORM, .op = "pre_mlp_layernorm (TENorm) rsigma",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_RSTD, .prec = RT_P_F32, NOWB,
                      .fwd_in = R(MM_RES2, N_, N_), .bwd_in = NOR, NOGRAD },
    [MM_LN2] = { .name = "ln2", .mods = RM_LAYERNORM,
                 .op = "pre_mlp_layernorm (TENorm): the router's, the dispatcher's and the shared experts' input",
                 .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB,
                 .fwd_in = R(MM_RES2, MM_LN2_RSTD, N_), .bwd_in = R(MM_RES2, MM_LN2_RSTD, N_), .has_bwd = 1,
                 .g_need = G(MM_D_RES, MM_D_LN2), .g_alloc = NOG, .g_free = G(MM_D_LN2, N_) },
    /* the shared experts (SharedExpertMLP: TE linears, tensor-parallel) */
    [MM_SH_FC1] = { .name = "sh_fc1", .mods = MOE_IN | RM_SHARED,
                    .op = "shared experts' linear_fc1 (column-parallel): gate and up, which the SwiGLU saves",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_COL | RT_F_TP | RT_F_GEMM, S_2SF, .prec = RT_P_ACT, NOWB,
                    LIN(E1(2, RD_SF), E1(1, RD_C)), .fwd_in = R(MM_LN2, N_, N_), .bwd_in = R(MM_LN2, N_, N_),
                    .has_bwd = 1, .g_need = G(MM_D_SHFC1, MM_D_LN2), .g_alloc = NOG, .g_free = G(MM_D_SHFC1, N_) },
    [MM_SH_ACT] = { .name = "sh_act", .mods = RM_MOE | RM_SHARED, .op = "shared experts' SwiGLU: linear_fc2's input",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_POINTWISE, S_SF, .prec = RT_P_ACT, NOWB,
                    .fwd_in = R(MM_SH_FC1, N_, N_), .bwd_in = R(MM_SH_FC1, N_, N_), .has_bwd = 1,
                    .g_need = G(MM_D_SHACT, N_), .g_alloc = G(MM_D_SHFC1, N_), .g_free = G(MM_D_SHACT, N_) },
    [MM_SH_FC2] = { .name = "sh_fc2", .mods = RM_MOE_REGION | RM_SHARED_REGION | RM_SAC_SAVED,
                    .op = "shared experts' linear_fc2 (row-parallel): held until postprocess adds it",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT,
                    .shape = E1(1, BT, RD_SC), .shape_text = "(B,T,C), none without shared experts",
                    .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_SC), E1(1, RD_SF)), .fwd_in = R(MM_SH_ACT, N_, N_),
                    .bwd_in = R(MM_SH_ACT, N_, N_), .has_bwd = 1, .g_need = G(MM_D_BRANCH, MM_D_RES),
                    .g_alloc = G(MM_D_SHACT, N_), .g_free = G(MM_D_BRANCH, N_) },
    /* the router */
    [MM_R_LOGITS] = { .name = "router_logits", .mods = RM_MOE_REGION | RM_SAC_SAVED,
                      .op = "RouterGatingLinearFunction: logits in the router dtype (fp32), not kept",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_BTE, .prec = RT_P_F32,
                      NOWB, LIN(E1(1, RD_E), E1(1, RD_C)), .fwd_in = R(MM_LN2, N_, N_), .bwd_in = R(MM_LN2, N_, N_),
                      .has_bwd = 1, .g_need = G(MM_D_RLOGITS, MM_D_LN2), .g_alloc = NOG,
                      .g_free = G(MM_D_RLOGITS, N_) },
    [MM_R_IDX] = { .name = "router_idx", .mods = RM_MOE, .op = "torch.topk's indices (topk, then scatter keep them)",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_BTK, .prec = RT_P_I64, NOWB,
                   .fwd_in = R(MM_R_LOGITS, N_, N_), .bwd_in = NOR, NOGRAD },
    [MM_R_PROBS] = { .name = "router_probs", .mods = RM_MOE, .op = "softmax over the top-k scores (fp32)",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_POINTWISE, S_BTK, .prec = RT_P_F32, NOWB,
                     .fwd_in = R(MM_R_LOGITS, MM_R_IDX, N_), .bwd_in = R(MM_R_PROBS, MM_R_IDX, MM_R_AUX),
                     .has_bwd = 1, .g_need = G(MM_D_PPROBS, N_), .g_alloc = G(MM_D_RLOGITS, N_),
                     .g_free = G(MM_D_PPROBS, N_) },
    [MM_R_AUX] = { .name = "router_aux", .mods = RM_MOE, .op = "the aux loss's softmax over every expert (fp32)",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_POINTWISE, S_BTE, .prec = RT_P_F32, NOWB,
                   .fwd_in = R(MM_R_LOGITS, N_, N_), .bwd_in = NOR, NOGRAD },
    [MM_PERM_MAP] = { .name = "perm_map", .mods = RM_MOE, .op = "permute's row_id_map (int32; unpermute reads it too)",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, .shape = RX(RX_T(8, BT, RD_E), RX_T(4, BT)),
                      .shape_text = "(B,T,2E+1) int32", .prec = RT_P_BYTE, NOWB,
                      .fwd_in = R(MM_R_IDX, N_, N_), .bwd_in = NOR, NOGRAD },
    /* the dispatch and the routed experts */
    [MM_DISPATCHED] = { .name = "dispatched", .mods = MOE_IN,
                        .op = "permute, all_to_all, expert-TP all-gather, sort by expert: linear_fc1's input",
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_A2A, S_RC, .prec = RT_P_ACT, NOWB,
                        .fwd_in = R(MM_LN2, MM_PERM_MAP, N_), .bwd_in = R(MM_PERM_MAP, N_, N_), .has_bwd = 1,
                        .g_need = G(MM_D_DISP, N_), .g_alloc = G(MM_D_LN2, N_), .g_free = G(MM_D_DISP, N_) },
    [MM_PERM_PROBS] = { .name = "perm_probs", .mods = RM_MOE, .op = "the routed tokens' probabilities (fp32)",
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT, S_R1, .prec = RT_P_F32, NOWB,
                        .fwd_in = R(MM_R_PROBS, MM_PERM_MAP, N_), .bwd_in = NOR, NOGRAD },
    [MM_E_FC1] = { .name = "expert_fc1", .mods = MOE_IN, .omods = 0,
                   .op = "linear_fc1 (TE GroupedLinear): gate and up, which the weighted SwiGLU saves",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_GEMM, S_R2EF, .prec = RT_P_ACT, NOWB,
                   GLIN(E1(2, RD_EF), E1(1, RD_C)), .fwd_in = R(MM_DISPATCHED, N_, N_),
                   .bwd_in = R(MM_DISPATCHED, N_, N_), .has_bwd = 1, .g_need = G(MM_D_EFC1, N_),
                   .g_alloc = G(MM_D_DISP, N_), .g_free = G(MM_D_EFC1, N_) },
    [MM_E_ACT] = { .name = "expert_act", .mods = RM_MOE | RM_MOE_ACT,
                   .op = "weighted_bias_swiglu: silu(gate) * up * prob, linear_fc2's input",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_POINTWISE, S_REF, .prec = RT_P_ACT, NOWB,
                   .fwd_in = R(MM_E_FC1, MM_PERM_PROBS, N_), .bwd_in = R(MM_E_FC1, MM_PERM_PROBS, N_), .has_bwd = 1,
                   .g_need = G(MM_D_EACT, N_), .g_alloc = G(MM_D_EFC1, MM_D_PPROBS), .g_free = G(MM_D_EACT, N_) },
    [MM_E_FC2] = { .name = "expert_fc2", .mods = RM_MOE_REGION | RM_SAC_SAVED, .op = "linear_fc2 (TE GroupedLinear): its output",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_GEMM | RT_F_TRANSIENT, S_RC, .prec = RT_P_ACT,
                   NOWB, GLIN(E1(1, RD_C), E1(1, RD_EF)), .fwd_in = R(MM_E_ACT, N_, N_), .bwd_in = R(MM_E_ACT, N_, N_),
                   .has_bwd = 1, .g_need = G(MM_D_EOUT, N_), .g_alloc = G(MM_D_EACT, N_), .g_free = G(MM_D_EOUT, N_) },
    [MM_COMBINE] = { .name = "combine", .mods = RM_MOE_REGION,
                     .op = "sort back, expert-TP reduce-scatter, all_to_all, unpermute, + the shared experts: the layer's output",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_TRANSIENT | RT_F_A2A, S_C, .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(MM_E_FC2, MM_SH_FC2, MM_PERM_MAP), .bwd_in = R(MM_PERM_MAP, N_, N_), .has_bwd = 1,
                     .g_need = G(MM_D_BRANCH, MM_D_RES), .g_alloc = G(MM_D_EOUT, N_), .g_free = NOG },
    [MM_MLP_MASK] = { .name = "mlp_mask", .op = "dropout mask (mlp_bda)", .cls = RT_CLASS_BLOCK,
                      .flags = RT_F_SP | RT_F_DROPOUT, S_C, .prec = RT_P_BYTE, NOWB,
                      .fwd_in = R(MM_COMBINE, N_, N_), .bwd_in = NOR, NOGRAD },
    [MM_RES3] = { .name = "res3", .op = "res2 + dropout(the MoE output): the block output", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(MM_COMBINE, MM_MLP_MASK, MM_RES2),
                  .bwd_in = R(MM_MLP_MASK, N_, N_), .has_bwd = 1, .g_need = G(MM_D_RES, N_),
                  .g_alloc = G(MM_D_BRANCH, N_), .g_free = NOG },
    M_GLOBALS(MM),
    GRAD(MM_D_RES, "d_res", "grad of residual stream", RT_F_SP | RT_F_ZERO, S_C, RT_P_ACT),
    GRAD(MM_D_BRANCH, "d_branch", "grad of a dropped-out branch (p>0)", RT_F_SP | RT_F_DROPOUT, S_C, RT_P_ACT),
    GRAD(MM_D_LN2, "d_ln2", "grad of ln2", RT_F_SP, S_C, RT_P_ACT),
    GRAD(MM_D_ATTY, "d_atty", "grad of atty (O)", RT_F_TP, S_O, RT_P_ACT),
    GRAD(MM_D_QKVATT, "d_qkv_att", "grad of qkv_att", RT_F_TP, S_QKV, RT_P_ACT),
    GRAD(MM_D_QKV, "d_qkv", "grad of qkv", RT_F_TP, S_QKV, RT_P_ACT),
    GRAD(MM_D_LN1, "d_ln1", "grad of ln1", RT_F_SP, S_C, RT_P_ACT),
    GRAD(MM_D_LNF, "d_lnf", "grad of lnf", RT_F_SP | RT_F_HEAD, S_C, RT_P_ACT),
    GRAD(MM_D_EOUT, "d_expert_out", "grad of the experts' output", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(MM_D_EACT, "d_expert_act", "grad of expert_act", RT_F_EXPERT, S_REF, RT_P_ACT),
    GRAD(MM_D_EFC1, "d_expert_fc1", "grad of expert_fc1", RT_F_EXPERT, S_R2EF, RT_P_ACT),
    GRAD(MM_D_DISP, "d_dispatched", "grad of dispatched", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(MM_D_PPROBS, "d_perm_probs", "grad of the routed probabilities", RT_F_EXPERT, S_R1, RT_P_F32),
    GRAD(MM_D_RLOGITS, "d_router_logits", "grad of the router logits", RT_F_SP, S_BTE, RT_P_F32),
    GRAD(MM_D_SHACT, "d_sh_act", "grad of sh_act", RT_F_TP, S_SF, RT_P_ACT),
    GRAD(MM_D_SHFC1, "d_sh_fc1", "grad of sh_fc1", RT_F_TP, S_2SF, RT_P_ACT),
};

const remat_table remat_table_megatron_moe =
    M_TABLE(MM, "megatron-moe", megatron_moe_defs, 0, 18, MM_RES3, MM_COMBINE, MM_E_FC2, MM_E_ACT, MM_E_FC1,
            MM_DISPATCHED, MM_SH_FC2, MM_SH_ACT, MM_SH_FC1, MM_R_PROBS, MM_R_LOGITS, MM_LN2, MM_RES2, MM_PROJ,
            MM_ATTY, MM_QKV_ATT, M_BWD_TAIL(MM));

/* One MoE layer's parameters, whole (Megatron's, moe_layer.py and
 * experts.py): the router's (E, C) weight, which every tensor-parallel rank
 * holds whole (router.py:65); the routed experts' fc1 (2 moe_ffn, C) and fc2
 * (C, moe_ffn) each, which EP x ETP GPUs share; the shared experts' fc1 and
 * fc2, tensor-parallel like a dense MLP.  These replace the dense MLP's
 * gate/up and down weights of the parameter table (params.c). */
void remat_moe_layer_params(const remat_config *c, uint64_t *router, uint64_t *routed, uint64_t *shared)
{
    uint64_t C = (uint64_t)c->n_embd;
    *router = (uint64_t)c->n_experts * C;
    *routed = (uint64_t)c->n_experts * 3 * (uint64_t)c->moe_ffn_dim * C;
    *shared = 3 * (uint64_t)c->moe_shared_dim * C;
}

/* ---- pytorch: transformers' Mixtral and Qwen3-MoE blocks -------------------------
 * transformers 5.18.0 (models/mixtral/modeling_mixtral.py, models/qwen3_moe/
 * modeling_qwen3_moe.py; integrations/moe.py), eager attention, the experts'
 * default implementation (config._experts_implementation "grouped_mm":
 * torch.nn.functional.grouped_mm over the routed rows sorted by expert).
 * What autograd saves, each storage once (tests/py_moe_tables.py measures it
 * on the models themselves), with S = k B T routed rows:
 *   the router (MixtralTopKRouter, Qwen3MoeTopKRouter): F.linear saves ln2;
 *     softmax(fp32) its output (B T, E) fp32; torch.topk its indices (B T,
 *     k) int64; the in-place renormalisation `router_top_value /= sum`
 *     saves the sum (B T, 1) and a copy of the top values (B T, k), fp32
 *     (Qwen3 with norm_topk_prob: the recipes' and these presets' setting);
 *   the dispatch: hidden_states[perm // k] saves its index (S) int64 and
 *     sample_weights[perm] saves perm (S) int64, the output's
 *     [inv_perm] its index (S) int64, grouped_mm the offsets (E) int32;
 *   gate_up (grouped_mm) saves its input (S,C), SiLU the (S,2F) output
 *     (gate is a view), silu(gate) * up the SiLU output (S,F) (up: the same
 *     storage), down (grouped_mm) its input (S,F), and the weighting
 *     proj_out * sample_weights_g both: (S,C) and (S,1) fp32;
 *   the weighted rows put back and summed over k: the block's output, not saved.
 * One GPU runs every expert (no EP): its rows are k B T whatever the
 * routing's balance. */

enum {
    PQ_LN1_X32 = 0, PQ_LN1_STAT, PQ_LN1, PQ_QKV, PQ_QK_NORM, PQ_QK_NORM_RSTD, PQ_QKV_ATT, PQ_SCORES, PQ_ATT, PQ_ATT_BF16, PQ_ATT_MASK, PQ_ATT_DROP,
    PQ_ATTY, PQ_OPROJ, PQ_RES2, PQ_LN2_X32, PQ_LN2_STAT, PQ_LN2, PQ_R_LOGITS, PQ_R_PROBS, PQ_R_IDX, PQ_R_NORM, PQ_PERM,
    PQ_DISPATCHED, PQ_SW, PQ_GATE_UP, PQ_SILU, PQ_SWIGLU, PQ_DOWN, PQ_WEIGHTED, PQ_COMBINE, PQ_RES3,
    PQ_NBLOCK,
    PQ_EMB = PQ_NBLOCK, PQ_LNF_X32, PQ_LNF_STAT, PQ_LNF, PQ_LOGP, PQ_TOKENS, PQ_TARGETS, PQ_ROPE,
    PQ_D_RES, PQ_D_LN2, PQ_D_ATTY, PQ_D_QKV, PQ_D_LN1, PQ_D_LNF, PQ_D_LOGITS, PQ_D_QKVATT, PQ_D_ATT,
    PQ_D_WEIGHTED, PQ_D_DOWN, PQ_D_SW, PQ_D_SWIGLU, PQ_D_SILU, PQ_D_GATE_UP, PQ_D_DISP, PQ_D_TOPV, PQ_D_PROBS,
    PQ_D_RLOGITS,
    PQ_COUNT
};
_Static_assert(PQ_NBLOCK <= 32 && PQ_COUNT <= RT_MAXT, "keep masks are 32-bit; raise RT_MAXT");

#define S_RF   .shape = E1(1, RD_R, RD_EF), .shape_text = "(S,F)"
#define S_BTE_ACT .shape = E1(1, BT, RD_E), .shape_text = "(B,T,E)"
#define PNOG   .g_need = NOG, .g_alloc = NOG, .g_free = NOG

static const remat_tensor_def pytorch_moe_defs[PQ_COUNT] = {
    P_NORM(PQ, LN1, "ln1", RT_X, "input_layernorm"),
    P_QKV(PQ),
    /* Qwen3MoeAttention's q_norm and k_norm (RMSNorm over the head size):
     * beside what Llama's RoPE saves, x rstd (which weight * saves) and the
     * output (which RoPE saves instead of the projection's), and rstd */
    [PQ_QK_NORM] = { .name = "qk_norm", .op = "q_norm, k_norm: x rstd and the output", .cls = RT_CLASS_BLOCK,
                     .flags = RT_F_TP, .shape = RX(RX_T(2, BT, RD_NH, RD_HS, RD_QKF), RX_T(2, BT, RD_KV, RD_HS, RD_QKF)),
                     .shape_text = "2 x (B,T,(NH+KV)HS) with q/k norms", .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(PQ_QKV, N_, N_), .bwd_in = NOR, NOGRAD },
    [PQ_QK_NORM_RSTD] = { .name = "qk_norm_rstd", .op = "q_norm, k_norm: rsqrt(mean(x^2) + eps) (fp32)",
                          .cls = RT_CLASS_BLOCK, .flags = RT_F_TP,
                          .shape = RX(RX_T(1, BT, RD_NH, RD_QKF), RX_T(1, BT, RD_KV, RD_QKF)),
                          .shape_text = "(B,T,NH+KV) fp32 with q/k norms", .prec = RT_P_F32, NOWB,
                          .fwd_in = R(PQ_QKV, N_, N_), .bwd_in = NOR, NOGRAD },
    P_EAGER_ATTN(PQ),
    P_OPROJ_LN2(PQ),
    [PQ_R_LOGITS] = { .name = "router_logits", .mods = RM_SAC_SAVED, .op = "F.linear(hidden, gate.weight): not saved",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM | RT_F_TRANSIENT, .shape = E1(1, BT, RD_E),
                      .shape_text = "(B,T,E)", .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_E), E1(1, RD_C)),
                      .fwd_in = R(PQ_LN2, N_, N_), .bwd_in = R(PQ_LN2, N_, N_), .has_bwd = 1,
                      .g_need = G(PQ_D_RLOGITS, PQ_D_LN2), .g_alloc = NOG, .g_free = G(PQ_D_RLOGITS, N_) },
    [PQ_R_PROBS] = { .name = "router_probs", .op = "softmax(router_logits, fp32): the probabilities",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_POINTWISE, .shape = E1(1, BT, RD_E),
                     .shape_text = "(B,T,E) fp32", .prec = RT_P_F32, NOWB, .fwd_in = R(PQ_R_LOGITS, N_, N_),
                     .bwd_in = R(PQ_R_PROBS, N_, N_), .has_bwd = 1, .g_need = G(PQ_D_PROBS, N_),
                     .g_alloc = G(PQ_D_RLOGITS, N_), .g_free = G(PQ_D_PROBS, N_) },
    [PQ_R_IDX] = { .name = "router_idx", .op = "torch.topk's indices", .cls = RT_CLASS_BLOCK,
                   .shape = E1(1, BT, RD_K), .shape_text = "(B,T,k) int64", .prec = RT_P_I64, NOWB,
                   .fwd_in = R(PQ_R_PROBS, N_, N_), .bwd_in = NOR, .has_bwd = 0, PNOG },
    [PQ_R_NORM] = { .name = "router_norm", .op = "router_top_value /= its sum: the sum and the values' copy (fp32)",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_POINTWISE,
                    .shape = RX(RX_T(1, BT, RD_K), RX_T(1, BT)), .shape_text = "(B,T,k+1) fp32", .prec = RT_P_F32,
                    NOWB, .fwd_in = R(PQ_R_PROBS, PQ_R_IDX, N_), .bwd_in = R(PQ_R_NORM, PQ_R_IDX, N_), .has_bwd = 1,
                    .g_need = G(PQ_D_TOPV, N_), .g_alloc = G(PQ_D_PROBS, N_), .g_free = G(PQ_D_TOPV, N_) },
    [PQ_PERM] = { .name = "perm", .op = "perm // k, perm, inv_perm (int64) and the offsets (int32)",
                  .cls = RT_CLASS_BLOCK, .shape = RX(RX_T(24, RD_R), RX_T(4, RD_E)),
                  .shape_text = "3 (S) int64 + (E) int32", .prec = RT_P_BYTE, NOWB, .fwd_in = R(PQ_R_IDX, N_, N_),
                  .bwd_in = NOR, .has_bwd = 0, PNOG },
    [PQ_DISPATCHED] = { .name = "dispatched", .op = "hidden_states[perm // k]: gate_up's input",
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT, S_RC, .prec = RT_P_ACT, NOWB,
                        .fwd_in = R(PQ_LN2, PQ_PERM, N_), .bwd_in = R(PQ_PERM, N_, N_), .has_bwd = 1,
                        .g_need = G(PQ_D_DISP, N_), .g_alloc = G(PQ_D_LN2, N_), .g_free = G(PQ_D_DISP, N_) },
    [PQ_SW] = { .name = "sample_weights", .op = "sample_weights[perm] (fp32): the weighting saves it",
                .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT, S_R1, .prec = RT_P_F32, NOWB,
                .fwd_in = R(PQ_R_NORM, PQ_PERM, N_), .bwd_in = R(PQ_PERM, N_, N_), .has_bwd = 1,
                .g_need = G(PQ_D_SW, N_), .g_alloc = G(PQ_D_TOPV, N_), .g_free = G(PQ_D_SW, N_) },
    [PQ_GATE_UP] = { .name = "gate_up", .mods = RM_SAC_SAVED, .op = "grouped_mm(dispatched, gate_up_proj): SiLU saves it",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_GEMM, .shape = E1(2, RD_R, RD_EF),
                     .shape_text = "(S,2F)", .prec = RT_P_ACT, NOWB, GLIN(E1(2, RD_EF), E1(1, RD_C)),
                     .fwd_in = R(PQ_DISPATCHED, N_, N_), .bwd_in = R(PQ_DISPATCHED, N_, N_), .has_bwd = 1,
                     .g_need = G(PQ_D_GATE_UP, N_), .g_alloc = G(PQ_D_DISP, N_), .g_free = G(PQ_D_GATE_UP, N_) },
    [PQ_SILU] = { .name = "silu", .op = "act_fn(gate): the product saves it", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_EXPERT | RT_F_POINTWISE, S_RF, .prec = RT_P_ACT, NOWB, .fwd_in = R(PQ_GATE_UP, N_, N_),
                  .bwd_in = R(PQ_GATE_UP, N_, N_), .has_bwd = 1, .g_need = G(PQ_D_SILU, PQ_D_GATE_UP),
                  .g_alloc = NOG, .g_free = G(PQ_D_SILU, N_) },
    [PQ_SWIGLU] = { .name = "swiglu", .op = "act_fn(gate) * up: down's input", .cls = RT_CLASS_BLOCK,
                    .flags = RT_F_EXPERT | RT_F_POINTWISE, S_RF, .prec = RT_P_ACT, NOWB,
                    .fwd_in = R(PQ_SILU, PQ_GATE_UP, N_), .bwd_in = R(PQ_SILU, PQ_GATE_UP, N_), .has_bwd = 1,
                    .g_need = G(PQ_D_SWIGLU, N_), .g_alloc = G(PQ_D_SILU, PQ_D_GATE_UP), .g_free = G(PQ_D_SWIGLU, N_) },
    [PQ_DOWN] = { .name = "down", .mods = RM_SAC_SAVED, .op = "grouped_mm(swiglu, down_proj): the weighting saves it",
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_GEMM, S_RC, .prec = RT_P_ACT, NOWB,
                  GLIN(E1(1, RD_C), E1(1, RD_EF)), .fwd_in = R(PQ_SWIGLU, N_, N_), .bwd_in = R(PQ_SWIGLU, N_, N_),
                  .has_bwd = 1, .g_need = G(PQ_D_DOWN, N_), .g_alloc = G(PQ_D_SWIGLU, N_), .g_free = G(PQ_D_DOWN, N_) },
    [PQ_WEIGHTED] = { .name = "weighted", .op = "proj_out * sample_weights_g: not saved", .cls = RT_CLASS_BLOCK,
                      .flags = RT_F_EXPERT | RT_F_POINTWISE | RT_F_TRANSIENT, S_RC, .prec = RT_P_ACT, NOWB,
                      .fwd_in = R(PQ_DOWN, PQ_SW, N_), .bwd_in = R(PQ_DOWN, PQ_SW, N_), .has_bwd = 1,
                      .g_need = G(PQ_D_WEIGHTED, N_), .g_alloc = G(PQ_D_DOWN, PQ_D_SW), .g_free = G(PQ_D_WEIGHTED, N_) },
    [PQ_COMBINE] = { .name = "combine", .op = "weighted[inv_perm], summed over k: the block's MoE output",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_TRANSIENT, S_C, .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(PQ_WEIGHTED, PQ_PERM, N_), .bwd_in = R(PQ_PERM, N_, N_), .has_bwd = 1,
                     .g_need = G(PQ_D_RES, N_), .g_alloc = G(PQ_D_WEIGHTED, N_), .g_free = NOG },
    [PQ_RES3] = { .name = "res3", .op = "res2 + the MoE output: the block output", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(PQ_COMBINE, PQ_RES2, N_), .bwd_in = NOR,
                  NOGRAD },
    P_GLOBALS(PQ),
    GRAD(PQ_D_RES, "d_res", "grad of residual stream", RT_F_SP | RT_F_ZERO, S_C, RT_P_ACT),
    GRAD(PQ_D_LN2, "d_ln2", "grad of ln2", RT_F_SP, S_C, RT_P_ACT),
    GRAD(PQ_D_ATTY, "d_atty", "grad of atty", RT_F_TP, S_O, RT_P_ACT),
    GRAD(PQ_D_QKV, "d_qkv", "grad of qkv", RT_F_TP, S_QKV, RT_P_ACT),
    GRAD(PQ_D_LN1, "d_ln1", "grad of ln1", RT_F_SP, S_C, RT_P_ACT),
    GRAD(PQ_D_LNF, "d_lnf", "grad of lnf", RT_F_SP | RT_F_HEAD, S_C, RT_P_ACT),
    GRAD(PQ_D_LOGITS, "d_logits", "grad of the logits", RT_F_TP | RT_F_HEAD, S_V, RT_P_F32),
    GRAD(PQ_D_QKVATT, "d_qkv_att", "grad of qkv_att", RT_F_TP | RT_F_ZERO, S_Q3, RT_P_ACT),
    GRAD(PQ_D_ATT, "d_att", "grad of the probabilities, then the scores", RT_F_TP, S_ATT, RT_P_F32),
    GRAD(PQ_D_WEIGHTED, "d_weighted", "grad of weighted", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(PQ_D_DOWN, "d_down", "grad of down", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(PQ_D_SW, "d_sample_weights", "grad of sample_weights", RT_F_EXPERT, S_R1, RT_P_F32),
    GRAD(PQ_D_SWIGLU, "d_swiglu", "grad of swiglu", RT_F_EXPERT, S_RF, RT_P_ACT),
    GRAD(PQ_D_SILU, "d_silu", "grad of silu", RT_F_EXPERT, S_RF, RT_P_ACT),
    GRAD(PQ_D_GATE_UP, "d_gate_up", "grad of gate_up", RT_F_EXPERT, S_R2EF, RT_P_ACT),
    GRAD(PQ_D_DISP, "d_dispatched", "grad of dispatched", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(PQ_D_TOPV, "d_top_value", "grad of the top-k values", 0, S_BTK, RT_P_F32),
    GRAD(PQ_D_PROBS, "d_router_probs", "grad of the probabilities", 0, S_BTE, RT_P_F32),
    GRAD(PQ_D_RLOGITS, "d_router_logits", "grad of the router logits", 0, S_BTE_ACT, RT_P_ACT),
};

const remat_table remat_table_pytorch_moe =
    P_TABLE(PQ, "pytorch-moe", pytorch_moe_defs, 20, PQ_COMBINE, PQ_WEIGHTED, PQ_DOWN, PQ_SWIGLU, PQ_SILU, PQ_GATE_UP,
            PQ_DISPATCHED, PQ_SW, PQ_R_NORM, PQ_R_PROBS, PQ_R_LOGITS, PQ_LN2, PQ_OPROJ, PQ_ATTY, PQ_ATT_DROP, PQ_ATT,
            PQ_SCORES, P_BWD_TAIL(PQ));
