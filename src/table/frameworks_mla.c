/*
 * frameworks_mla.c -- DeepSeek-V3's layers as two frameworks keep them for
 * the backward pass (issue 27): multi-latent attention (MLA) and an MLP that
 * is dense in the first cfg->moe_first_dense layers and a routed mixture of
 * experts with shared experts after them.  Megatron-core's MLASelfAttention
 * and MoE layer under Transformer Engine, and transformers' eager
 * DeepseekV3ForCausalLM.  Data in the format of tensors.h, run by the same
 * compiler, simulator and planner as every table.
 *
 * A block is either kind: remat_dims_at gives a dense layer no routed experts
 * (E, k, R, EF and MOEL 0, so every routed entry holds and costs nothing)
 * and its MLP is the shared experts' entries at the dense width (SF =
 * ffn_dim): Megatron's dense MLP and its SharedExpertMLP are the same TE MLP,
 * transformers' DeepseekV3MLP is both.  The recompute modules differ by kind
 * (an entry's dmods, remat_table.dense_mods): Megatron's `mlp` recomputes a
 * dense layer's MLP only (transformer_layer.py:445-447), `shared_experts` and
 * `moe` a routed layer's, and `layernorm` the pre-MLP norm only where it is a
 * TENorm of its own (a routed layer; a dense layer's is fused into
 * linear_fc1, gpt_layer_specs.py:265).
 *
 * Dimension legend: B micro-batch, T sequence, C hidden, NH heads, Lq
 * q_lora_rank, Lkv kv_lora_rank, dn qk_nope_dim (Megatron's qk_head_dim), dr
 * qk_rope_dim (qk_pos_emb_head_dim), dv v_head_dim; E, k, R, EF, SF as in
 * frameworks_moe.c; t the tensor-parallel size.  Both tables need dropout 0
 * (DeepSeek-V3 trains without: no masks are modelled) and q_lora_rank > 0.
 *
 * megatron (megatron-core 0.16.1 from PyPI, paths under megatron/core/;
 * Transformer Engine's internals as frameworks_llama.c reads them at
 * d0067d0).  The MLA layer spec (models/gpt/gpt_layer_specs.py:233-266, TE,
 * --qk-layernorm as DeepSeek-V3's recipes set it): input_layernorm is a
 * TENorm of its own (248), the down projections TELinear in `duplicated`
 * mode (transformer/multi_latent_attention.py:408-409, 453-454: not split by
 * t, on the GPU's sequence shard under SP), the up projections
 * TELayerNormColumnParallelLinear with q_layernorm and kv_layernorm fused in
 * (235-244, 260-261), FusedAttention, linear_proj row-parallel.  So a layer
 * keeps (multi_latent_attention.py, get_query_key_value_tensors):
 *   ln1_rstd, ln1: the TENorm's rsigma and output, which both down
 *     projections save (one storage, 586, 604); `layernorm` recompute drops
 *     both (transformer_layer.py:383-385: CheckpointWithoutOutput);
 *   q_down: q_compressed (B,T,Lq) (586), which linear_q_up_proj's
 *     LayerNormLinear saves with its rsigma and ln_out (q_norm_rstd, q_norm);
 *   kv_down: kv_combined (B,T,Lkv+dr) (604), split (617) into kv_compressed,
 *     a view that linear_kv_up_proj's LayerNormLinear saves (so all of
 *     kv_combined stays), with kv_norm_rstd and kv_norm (B,T,Lkv);
 *   k_pe: k_pos_emb all-gathered whole under SP (622), which only
 *     mla_up_proj's checkpoint keeps (its input); without SP a view;
 *   q_up, kv_up: the up projections' outputs (724, 734), rotated and
 *     concatenated into new query, key and value (fused_apply_mla_rope_for_q
 *     and _for_kv, 750, 760; unfused 822, 830) and made contiguous (268-273):
 *     not kept; qkv_att: query (B,T,NH(dn+dr)), key (the same), value
 *     (B,T,NH dv), /t, what FusedAttention saves, with lse (B,NH,T) fp32 and
 *     its output O (B,T,NH dv)/t, linear_proj's input;
 *   mla_up_proj (the recompute_up_proj flag, 119-122) runs the up
 *     projections, RoPE and the concatenation in CheckpointWithoutOutput
 *     (838-842) under torch.no_grad (tensor_parallel/random.py:598): the fused
 *     norms save nothing, and query, key and value are discarded after core
 *     attention (344-346) and recomputed in the backward; it keeps its inputs
 *     q_compressed, kv_compressed (kv_combined's storage) and k_pos_emb;
 *   the MLP half is frameworks_moe.c's with DeepSeek-V3's router: logits in
 *     fp32 (router.py:79-104, moe_utils.py:1243 RouterGatingLinearFunction
 *     saves ln2), sigmoid scores (N,E) fp32 (moe_utils.py:717), the top-k
 *     over the scores plus the expert bias, group-limited (group_limited_topk,
 *     515-570: its values are discarded, so what it saves is freed with its
 *     graph) whose indices gather keeps (721), the normalisation's division
 *     (724: the gathered (N,k) and their sum (N,1)), the scaling (729: a
 *     constant), the aux loss's own sigmoid and normalisation (783-784:
 *     (N,E) and (N,1) fp32; seq_aux_loss's sums keep nothing, 46-134), and
 *     permute's row_id_map.  The indices and the map are one entry
 *     (router_idx), the fp32 scores one (router_probs): a block has room for
 *     32 entries.
 * FLOPs: the attention products are QK^T over dn + dr and PV over dv: one
 * product of hs = dn + dr + dv forward and two backward (remat_dims_of sets
 * RD_HS so).  No fine-grained offload modules are modelled for MLA (its
 * qkv_linear context, multi_latent_attention.py:246, wraps the down and up
 * projections, not read here) and no context parallelism.
 *
 * pytorch (transformers 5.18.0, models/deepseek_v3/modeling_deepseek_v3.py;
 * integrations/moe.py, grouped_mm experts), eager attention: what autograd
 * saves and still holds when the forward ends, each storage once
 * (tests/py_moe_tables.py measures it):
 *   the RMSNorms (DeepseekV3RMSNorm, 47-52): x.to(float32) (x itself in fp32,
 *     a copy under bf16), rsqrt(variance) and x * it, the output;
 *   q_a_proj's output q_compressed, which q_a_layernorm keeps as its fp32 x
 *     (itself, or the copy), with its statistics (DeepseekV3Attention,
 *     452-453); kv_a_proj_with_mqa's output compressed_kv, whose latent
 *     columns kv_a_layernorm keeps (456-457: in fp32 a view, so the storage
 *     with k_rot's columns; under bf16 a copy of the latent);
 *   q_b_proj's and kv_b_proj's outputs are views for the split; the query
 *     (cat, 469) and key (new_empty, copied in, 425-428) are new tensors and
 *     the value a view that the second matmul copies contiguous (eager
 *     attention, 267; with one sequence a view of kv_b_proj's output, whose
 *     storage it then keeps): those three, the fp32 softmax (and its bf16 copy),
 *     attn_output made contiguous, o_proj's input (493);
 *   RoPE (apply_rotary_pos_emb_interleave) keeps only cos and sin (1,T,dr);
 *   a dense layer's DeepseekV3MLP (113-127): gate, up, act_fn(gate), their
 *     product;
 *   a routed layer's DeepseekV3TopkRouter (146-168): F.linear's fp32 input
 *     (ln2, or its copy under bf16) and weight copy (bf16 only), the sigmoid
 *     scores (N,E) fp32, the top-k indices that gather keeps, the division's
 *     sum and values' copy (the group-limited selection's tensors belong to
 *     a discarded branch and are freed); the experts as frameworks_moe.c's
 *     pytorch table (perm, dispatched rows, sample weights, gate_up, SiLU,
 *     product, down, weighting); the shared experts as the dense MLP at
 *     moe_intermediate_size x n_shared_experts.
 */
#include <stddef.h>
#include "frameworks_llama.h"

/* routed shapes, as frameworks_moe.c's */
#define S_RC   .shape = E1(1, RD_R, RD_C), .shape_text = "(R,C)"
#define S_R2EF .shape = E1(2, RD_R, RD_EF), .shape_text = "(R,2EF)"
#define S_REF  .shape = E1(1, RD_R, RD_EF), .shape_text = "(R,EF)"
#define S_R1   .shape = E1(1, RD_R), .shape_text = "(R) fp32"
#define S_BTE  .shape = E1(1, BT, RD_E), .shape_text = "(B,T,E) fp32"
#define S_BTK  .shape = E1(1, BT, RD_K), .shape_text = "(B,T,k)"
#define S_SF   .shape = E1(1, BT, RD_SF), .shape_text = "(B,T,SF)"
#define S_2SF  .shape = E1(2, BT, RD_SF), .shape_text = "(B,T,2SF)"
#define S_LQ   .shape = E1(1, BT, RD_LQ), .shape_text = "(B,T,Lq)"
#define S_LKV  .shape = E1(1, BT, RD_LKV), .shape_text = "(B,T,Lkv)"
#define S_OV   .shape = E1(1, BT, RD_NH, RD_DV), .shape_text = "(B,T,NH dv)"
#define S_QUP  .shape = RX(RX_T(1, BT, RD_NH, RD_DN), RX_T(1, BT, RD_NH, RD_DR)), .shape_text = "(B,T,NH(dn+dr))"
#define S_KVUP .shape = RX(RX_T(1, BT, RD_NH, RD_DN), RX_T(1, BT, RD_NH, RD_DV)), .shape_text = "(B,T,NH(dn+dv))"
#define S_QKVA .shape = RX(RX_T(2, BT, RD_NH, RD_DN), RX_T(2, BT, RD_NH, RD_DR), RX_T(1, BT, RD_NH, RD_DV)), \
               .shape_text = "(B,T,NH(2(dn+dr)+dv))"
#define S_KVD  .shape = RX(RX_T(1, BT, RD_LKV), RX_T(1, BT, RD_DR)), .shape_text = "(B,T,Lkv+dr)"
#define S_DUP  .shape = RX(RX_T(2, BT, RD_NH, RD_DN), RX_T(1, BT, RD_NH, RD_DR), RX_T(1, BT, RD_NH, RD_DV)), \
               .shape_text = "(B,T,NH(2dn+dr+dv))"
#define QUP_N  RX(RX_T(1, RD_NH, RD_DN), RX_T(1, RD_NH, RD_DR))
#define KVUP_N RX(RX_T(1, RD_NH, RD_DN), RX_T(1, RD_NH, RD_DV))
#define KVD_N  RX(RX_T(1, RD_LKV), RX_T(1, RD_DR))
#define GLIN(n_, k_) .opc = RO_LINEAR, .gemm = { E1(1, RD_R), n_, k_ }, .cost = { 1, 2, RX_0, RX_0 }
#define MOE_IN (RM_MOE | RM_SAC_SAVED)

/* ---- megatron ---------------------------------------------------------------------- */

enum {
    XA_LN1_RSTD = 0, XA_LN1, XA_QDOWN, XA_QN_RSTD, XA_QN, XA_KVDOWN, XA_KVN_RSTD, XA_KVN, XA_KPE, XA_QUP, XA_KVUP,
    XA_QKV_ATT, XA_ATTN, XA_LSE, XA_ATTY, XA_PROJ, XA_RES2, XA_LN2_RSTD, XA_LN2, XA_SH_FC1, XA_SH_ACT, XA_SH_FC2,
    XA_R_LOGITS, XA_R_IDX, XA_R_PROBS, XA_DISPATCHED, XA_PERM_PROBS, XA_E_FC1, XA_E_ACT, XA_E_FC2, XA_COMBINE, XA_RES3,
    XA_NBLOCK,
    XA_EMB = XA_NBLOCK, XA_LNF_RSTD, XA_LNF, XA_LOGITS, XA_CE_TGT, XA_TOKENS, XA_EMB_MASK,
    XA_D_RES, XA_D_LN2, XA_D_ATTY, XA_D_QKVATT, XA_D_UP, XA_D_QN, XA_D_KVN, XA_D_QDOWN, XA_D_KVDOWN, XA_D_LN1,
    XA_D_LNF, XA_D_EOUT, XA_D_EACT, XA_D_EFC1, XA_D_DISP, XA_D_PPROBS, XA_D_RLOGITS, XA_D_SHACT, XA_D_SHFC1,
    XA_COUNT
};
_Static_assert(XA_NBLOCK <= 32 && XA_COUNT <= RT_MAXT, "keep masks are 32-bit; raise RT_MAXT");

/* the fused norm of an up projection (LayerNormLinear): rsigma and ln_out,
 * which mla_up_proj's no_grad checkpoint does not keep */
#define XA_UPNORM(R_, N_id, in, nm, what, shp)                                                                  \
    [R_] = { .name = nm "_rstd", .mods = RM_MLA_UP, .dmods = RM_MLA_UP, .op = what " rsigma (fp32)",            \
             .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_RSTD, .prec = RT_P_F32, NOWB, .fwd_in = R(in, N_, N_),  \
             .bwd_in = NOR, NOGRAD },                                                                          \
    [N_id] = { .name = nm, .mods = RM_MLA_UP | RM_MLA_UP_REGION, .dmods = RM_MLA_UP | RM_MLA_UP_REGION,         \
               .op = what " ln_out: the up projection's input", .cls = RT_CLASS_BLOCK,                         \
               .flags = RT_F_SP | RT_F_POINTWISE, shp, .prec = RT_P_ACT, NOWB, .fwd_in = R(in, R_, N_),        \
               .bwd_in = R(in, R_, N_), .has_bwd = 1

static const remat_tensor_def megatron_mla_defs[XA_COUNT] = {
    [XA_LN1_RSTD] = { .name = "ln1_rstd", .mods = RM_LAYERNORM, .dmods = RM_LAYERNORM,
                      .op = "input_layernorm (TENorm) rsigma", .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_RSTD,
                      .prec = RT_P_F32, NOWB, .fwd_in = R(RT_X, N_, N_), .bwd_in = NOR, NOGRAD },
    [XA_LN1] = { .name = "ln1", .mods = RM_LAYERNORM, .dmods = RM_LAYERNORM,
                 .op = "input_layernorm (TENorm): both down projections' input", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(RT_X, XA_LN1_RSTD, N_),
                 .bwd_in = R(RT_X, XA_LN1_RSTD, N_), .has_bwd = 1, .g_need = G(XA_D_RES, XA_D_LN1), .g_alloc = NOG,
                 .g_free = G(XA_D_LN1, N_) },
    [XA_QDOWN] = { .name = "q_down", .mods = RM_SAC_SAVED, .dmods = RM_SAC_SAVED,
                   .op = "linear_q_down_proj (TELinear, duplicated): q_compressed", .cls = RT_CLASS_BLOCK,
                   .flags = RT_F_SP | RT_F_GEMM, S_LQ, .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_LQ), E1(1, RD_C)),
                   .fwd_in = R(XA_LN1, N_, N_), .bwd_in = R(XA_LN1, N_, N_), .has_bwd = 1,
                   .g_need = G(XA_D_QDOWN, XA_D_LN1), .g_alloc = NOG, .g_free = G(XA_D_QDOWN, N_) },
    XA_UPNORM(XA_QN_RSTD, XA_QN, XA_QDOWN, "q_norm", "linear_q_up_proj's fused q_layernorm", S_LQ),
        .g_need = G(XA_D_QN, N_), .g_alloc = G(XA_D_QDOWN, N_), .g_free = G(XA_D_QN, N_) },
    [XA_KVDOWN] = { .name = "kv_down", .mods = RM_SAC_SAVED, .dmods = RM_SAC_SAVED,
                    .op = "linear_kv_down_proj (TELinear, duplicated): kv_combined, kv_compressed's storage",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_GEMM,
                    S_KVD, .prec = RT_P_ACT, NOWB, LIN(KVD_N, E1(1, RD_C)), .fwd_in = R(XA_LN1, N_, N_),
                    .bwd_in = R(XA_LN1, N_, N_), .has_bwd = 1, .g_need = G(XA_D_KVDOWN, N_),
                    .g_alloc = G(XA_D_LN1, N_), .g_free = G(XA_D_KVDOWN, N_) },
    XA_UPNORM(XA_KVN_RSTD, XA_KVN, XA_KVDOWN, "kv_norm", "linear_kv_up_proj's fused kv_layernorm", S_LKV),
        .g_need = G(XA_D_KVN, N_), .g_alloc = G(XA_D_KVDOWN, N_), .g_free = G(XA_D_KVN, N_) },
    /* whole on every GPU: not divided by t */
    [XA_KPE] = { .name = "k_pe", .mods = RM_MLA_UP_KEEP, .dmods = RM_MLA_UP_KEEP,
                 .op = "k_pos_emb all-gathered under SP: kept only as mla_up_proj's checkpoint input",
                 .cls = RT_CLASS_BLOCK, .flags = RT_F_TRANSIENT, .shape = E1(1, BT, RD_DR, RD_SPG),
                 .shape_text = "(B,T,dr) under SP", .prec = RT_P_ACT, NOWB, .fwd_in = R(XA_KVDOWN, N_, N_),
                 .bwd_in = NOR, NOGRAD },
    [XA_QUP] = { .name = "q_up", .mods = RM_MLA_UP_REGION | RM_SAC_SAVED, .dmods = RM_MLA_UP_REGION | RM_SAC_SAVED,
                 .op = "linear_q_up_proj (column-parallel): q, split and rotated", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_COL | RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT, S_QUP, .prec = RT_P_ACT, NOWB,
                 LIN(QUP_N, E1(1, RD_LQ)), .fwd_in = R(XA_QN, N_, N_), .bwd_in = R(XA_QN, N_, N_), .has_bwd = 1,
                 .g_need = G(XA_D_UP, N_), .g_alloc = G(XA_D_QN, N_), .g_free = G(XA_D_UP, N_) },
    [XA_KVUP] = { .name = "kv_up", .mods = RM_MLA_UP_REGION | RM_SAC_SAVED, .dmods = RM_MLA_UP_REGION | RM_SAC_SAVED,
                  .op = "linear_kv_up_proj (column-parallel): k_no_pe and value, split", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_COL | RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT, S_KVUP, .prec = RT_P_ACT, NOWB,
                  LIN(KVUP_N, E1(1, RD_LKV)), .fwd_in = R(XA_KVN, N_, N_), .bwd_in = R(XA_KVN, N_, N_),
                  .has_bwd = 1, .g_need = G(XA_D_UP, N_), .g_alloc = G(XA_D_KVN, N_), .g_free = NOG },
    [XA_QKV_ATT] = { .name = "qkv_att", .mods = RM_MLA_UP | RM_MLA_UP_REGION, .dmods = RM_MLA_UP | RM_MLA_UP_REGION,
                     .op = "RoPE on the dr columns, concatenated, contiguous: query, key, value, what FusedAttention saves",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_POINTWISE, S_QKVA, .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(XA_QUP, XA_KVUP, XA_KPE), .bwd_in = NOR, .has_bwd = 1, .g_need = G(XA_D_QKVATT, N_),
                     .g_alloc = G(XA_D_UP, N_), .g_free = G(XA_D_QKVATT, N_) },
    /* FusedAttention: one kernel for O and the statistics (frameworks_llama.h's
     * FLASH_CORE, with MLA's products: one of hs = dn + dr + dv forward, two backward) */
    [XA_ATTN] = { .name = "attn", .mods = RM_CORE_ATTN_REGION, .dmods = RM_CORE_ATTN_REGION,
                  .op = "FusedAttention forward: QK^T over dn+dr, softmax, PV over dv", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT, .shape = RX_0, .shape_text = "(none)",
                  .prec = RT_P_ACT, NOWB, ATTN(1, 0), .fwd_in = R(XA_QKV_ATT, N_, N_), .bwd_in = NOR, NOGRAD },
    [XA_LSE] = { .name = "lse", .mods = RM_CORE_ATTN | RM_CORE_ATTN_REGION | RM_SAC_SAVED,
                 .dmods = RM_CORE_ATTN | RM_CORE_ATTN_REGION | RM_SAC_SAVED,
                 .op = "FusedAttention's softmaxStats (log-sum-exp), which it saves", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_TP | RT_F_SELECTIVE, S_LSE, .prec = RT_P_F32, NOWB, .fwd_in = R(XA_ATTN, N_, N_),
                 .bwd_in = NOR, NOGRAD },
    [XA_ATTY] = { .name = "atty", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED, .dmods = RM_CORE_ATTN_REGION | RM_SAC_SAVED,
                  .op = "FusedAttention output O, heads merged: linear_proj's input", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_TP | RT_F_GEMM, S_OV, .prec = RT_P_ACT, NOWB, ATTN(0, 2),
                  .fwd_in = R(XA_ATTN, XA_LSE, N_), .bwd_in = R(XA_QKV_ATT, XA_LSE, XA_ATTY), .has_bwd = 1,
                  .g_need = G(XA_D_ATTY, N_), .g_alloc = G(XA_D_QKVATT, N_), .g_free = G(XA_D_ATTY, N_) },
    [XA_PROJ] = { .name = "proj", .mods = RM_SAC_SAVED, .dmods = RM_SAC_SAVED, .op = "linear_proj (row-parallel): its output",
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_C,
                  .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_C), E1(1, RD_NH, RD_DV)), .fwd_in = R(XA_ATTY, N_, N_),
                  .bwd_in = R(XA_ATTY, N_, N_), .has_bwd = 1, .g_need = G(XA_D_RES, N_), .g_alloc = G(XA_D_ATTY, N_),
                  .g_free = NOG },
    [XA_RES2] = { .name = "res2", .op = "x + proj (self_attn_bda, no dropout): the pre-MLP norm's input",
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB,
                  .fwd_in = R(XA_PROJ, RT_X, N_), .bwd_in = NOR, NOGRAD },
    /* a routed layer's pre_mlp_layernorm is a TENorm of its own; a dense
     * layer's is fused into linear_fc1 (LayerNormLinear keeps rsigma and
     * ln_out all the same, but `layernorm` has nothing there) */
    [XA_LN2_RSTD] = { .name = "ln2_rstd", .mods = RM_LAYERNORM, .dmods = 0, .op = "pre-MLP RMSNorm rsigma",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_RSTD, .prec = RT_P_F32, NOWB,
                      .fwd_in = R(XA_RES2, N_, N_), .bwd_in = NOR, NOGRAD },
    [XA_LN2] = { .name = "ln2", .mods = RM_LAYERNORM, .dmods = 0,
                 .op = "pre-MLP RMSNorm: the router's, the dispatcher's and the shared experts' input (dense: fc1's)",
                 .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB,
                 .fwd_in = R(XA_RES2, XA_LN2_RSTD, N_), .bwd_in = R(XA_RES2, XA_LN2_RSTD, N_), .has_bwd = 1,
                 .g_need = G(XA_D_RES, XA_D_LN2), .g_alloc = NOG, .g_free = G(XA_D_LN2, N_) },
    /* the shared experts (a routed layer) or the dense MLP (a dense layer): one TE MLP */
    [XA_SH_FC1] = { .name = "sh_fc1", .mods = MOE_IN | RM_SHARED, .dmods = RM_MLP | RM_SAC_SAVED,
                    .op = "linear_fc1 of the shared experts, or of a dense layer's MLP: gate and up, which the SwiGLU saves",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_COL | RT_F_TP | RT_F_GEMM, S_2SF, .prec = RT_P_ACT, NOWB,
                    LIN(E1(2, RD_SF), E1(1, RD_C)), .fwd_in = R(XA_LN2, N_, N_), .bwd_in = R(XA_LN2, N_, N_),
                    .has_bwd = 1, .g_need = G(XA_D_SHFC1, XA_D_LN2), .g_alloc = NOG, .g_free = G(XA_D_SHFC1, N_) },
    [XA_SH_ACT] = { .name = "sh_act", .mods = RM_MOE | RM_SHARED, .dmods = RM_MLP,
                    .op = "their SwiGLU: linear_fc2's input", .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_POINTWISE,
                    S_SF, .prec = RT_P_ACT, NOWB, .fwd_in = R(XA_SH_FC1, N_, N_), .bwd_in = R(XA_SH_FC1, N_, N_),
                    .has_bwd = 1, .g_need = G(XA_D_SHACT, N_), .g_alloc = G(XA_D_SHFC1, N_), .g_free = G(XA_D_SHACT, N_) },
    [XA_SH_FC2] = { .name = "sh_fc2", .mods = RM_MOE_REGION | RM_SHARED_REGION | RM_SAC_SAVED,
                    .dmods = RM_MLP_REGION | RM_SAC_SAVED, .op = "their linear_fc2 (row-parallel): its output",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_ROW | RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT,
                    .shape = E1(1, BT, RD_SC), .shape_text = "(B,T,C)", .prec = RT_P_ACT, NOWB,
                    LIN(E1(1, RD_SC), E1(1, RD_SF)), .fwd_in = R(XA_SH_ACT, N_, N_), .bwd_in = R(XA_SH_ACT, N_, N_),
                    .has_bwd = 1, .g_need = G(XA_D_RES, N_), .g_alloc = G(XA_D_SHACT, N_), .g_free = NOG },
    /* the router (a routed layer; nothing in a dense one: E = k = 0) */
    [XA_R_LOGITS] = { .name = "router_logits", .mods = RM_MOE_REGION | RM_SAC_SAVED, .dmods = RM_SAC_SAVED,
                      .op = "RouterGatingLinearFunction: fp32 logits, not kept", .cls = RT_CLASS_BLOCK,
                      .flags = RT_F_SP | RT_F_GEMM | RT_F_TRANSIENT, S_BTE, .prec = RT_P_F32, NOWB,
                      LIN(E1(1, RD_E), E1(1, RD_C)), .fwd_in = R(XA_LN2, N_, N_), .bwd_in = R(XA_LN2, N_, N_),
                      .has_bwd = 1, .g_need = G(XA_D_RLOGITS, XA_D_LN2), .g_alloc = NOG, .g_free = G(XA_D_RLOGITS, N_) },
    [XA_R_IDX] = { .name = "router_idx", .mods = RM_MOE, .dmods = 0,
                   .op = "the top-k indices (int64, gather and scatter keep them) and permute's row_id_map (int32)",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_SP,
                   .shape = RX(RX_T(8, BT, RD_K), RX_T(8, BT, RD_E), RX_T(4, BT, RD_MOEL)),
                   .shape_text = "(B,T,k) int64 + (B,T,2E+1) int32", .prec = RT_P_BYTE, NOWB,
                   .fwd_in = R(XA_R_LOGITS, N_, N_), .bwd_in = NOR, NOGRAD },
    [XA_R_PROBS] = { .name = "router_probs", .mods = RM_MOE, .dmods = 0,
                     .op = "sigmoid scores, the gathered top-k and their sum, the aux loss's sigmoid and sum (fp32)",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_POINTWISE,
                     .shape = RX(RX_T(2, BT, RD_E), RX_T(1, BT, RD_K), RX_T(2, BT, RD_MOEL)),
                     .shape_text = "(B,T,2E+k+2) fp32", .prec = RT_P_F32, NOWB, .fwd_in = R(XA_R_LOGITS, XA_R_IDX, N_),
                     .bwd_in = R(XA_R_PROBS, XA_R_IDX, N_), .has_bwd = 1, .g_need = G(XA_D_PPROBS, N_),
                     .g_alloc = G(XA_D_RLOGITS, N_), .g_free = G(XA_D_PPROBS, N_) },
    /* the dispatch and the routed experts, as frameworks_moe.c's */
    [XA_DISPATCHED] = { .name = "dispatched", .mods = MOE_IN, .dmods = 0,
                        .op = "permute, all_to_all, expert-TP all-gather, sort by expert: linear_fc1's input",
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_A2A, S_RC, .prec = RT_P_ACT, NOWB,
                        .fwd_in = R(XA_LN2, XA_R_IDX, N_), .bwd_in = R(XA_R_IDX, N_, N_), .has_bwd = 1,
                        .g_need = G(XA_D_DISP, N_), .g_alloc = G(XA_D_LN2, N_), .g_free = G(XA_D_DISP, N_) },
    [XA_PERM_PROBS] = { .name = "perm_probs", .mods = RM_MOE, .dmods = 0, .op = "the routed tokens' probabilities (fp32)",
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT, S_R1, .prec = RT_P_F32, NOWB,
                        .fwd_in = R(XA_R_PROBS, XA_R_IDX, N_), .bwd_in = NOR, NOGRAD },
    [XA_E_FC1] = { .name = "expert_fc1", .mods = MOE_IN, .dmods = 0,
                   .op = "linear_fc1 (TE GroupedLinear): gate and up, which the weighted SwiGLU saves",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_GEMM, S_R2EF, .prec = RT_P_ACT, NOWB,
                   GLIN(E1(2, RD_EF), E1(1, RD_C)), .fwd_in = R(XA_DISPATCHED, N_, N_),
                   .bwd_in = R(XA_DISPATCHED, N_, N_), .has_bwd = 1, .g_need = G(XA_D_EFC1, N_),
                   .g_alloc = G(XA_D_DISP, N_), .g_free = G(XA_D_EFC1, N_) },
    [XA_E_ACT] = { .name = "expert_act", .mods = RM_MOE | RM_MOE_ACT, .dmods = 0,
                   .op = "weighted_bias_swiglu: silu(gate) * up * prob, linear_fc2's input",
                   .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_POINTWISE, S_REF, .prec = RT_P_ACT, NOWB,
                   .fwd_in = R(XA_E_FC1, XA_PERM_PROBS, N_), .bwd_in = R(XA_E_FC1, XA_PERM_PROBS, N_), .has_bwd = 1,
                   .g_need = G(XA_D_EACT, N_), .g_alloc = G(XA_D_EFC1, XA_D_PPROBS), .g_free = G(XA_D_EACT, N_) },
    [XA_E_FC2] = { .name = "expert_fc2", .mods = RM_MOE_REGION | RM_SAC_SAVED, .dmods = 0,
                   .op = "linear_fc2 (TE GroupedLinear): its output", .cls = RT_CLASS_BLOCK,
                   .flags = RT_F_EXPERT | RT_F_GEMM | RT_F_TRANSIENT, S_RC, .prec = RT_P_ACT, NOWB,
                   GLIN(E1(1, RD_C), E1(1, RD_EF)), .fwd_in = R(XA_E_ACT, N_, N_), .bwd_in = R(XA_E_ACT, N_, N_),
                   .has_bwd = 1, .g_need = G(XA_D_EOUT, N_), .g_alloc = G(XA_D_EACT, N_), .g_free = G(XA_D_EOUT, N_) },
    [XA_COMBINE] = { .name = "combine", .mods = RM_MOE_REGION, .dmods = 0,
                     .op = "sort back, expert-TP reduce-scatter, all_to_all, unpermute: the routed output",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_A2A | RT_F_TRANSIENT,
                     .shape = E1(1, BTC, RD_MOEL), .shape_text = "(B,T,C)", .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(XA_E_FC2, XA_R_IDX, N_), .bwd_in = R(XA_R_IDX, N_, N_), .has_bwd = 1,
                     .g_need = G(XA_D_RES, N_), .g_alloc = G(XA_D_EOUT, N_), .g_free = NOG },
    [XA_RES3] = { .name = "res3", .op = "res2 + the MLP's output (mlp_bda, no dropout): the block output",
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB,
                  .fwd_in = R(XA_COMBINE, XA_SH_FC2, XA_RES2), .bwd_in = NOR, NOGRAD },
    M_GLOBALS(XA),
    GRAD(XA_D_RES, "d_res", "grad of residual stream", RT_F_SP | RT_F_ZERO, S_C, RT_P_ACT),
    GRAD(XA_D_LN2, "d_ln2", "grad of ln2", RT_F_SP, S_C, RT_P_ACT),
    GRAD(XA_D_ATTY, "d_atty", "grad of atty (O)", RT_F_TP, S_OV, RT_P_ACT),
    GRAD(XA_D_QKVATT, "d_qkv_att", "grad of query, key, value", RT_F_TP, S_QKVA, RT_P_ACT),
    GRAD(XA_D_UP, "d_up", "grad of q_up and kv_up", RT_F_TP, S_DUP, RT_P_ACT),
    GRAD(XA_D_QN, "d_q_norm", "grad of q_norm", RT_F_SP, S_LQ, RT_P_ACT),
    GRAD(XA_D_KVN, "d_kv_norm", "grad of kv_norm", RT_F_SP, S_LKV, RT_P_ACT),
    GRAD(XA_D_QDOWN, "d_q_down", "grad of q_down", RT_F_SP, S_LQ, RT_P_ACT),
    GRAD(XA_D_KVDOWN, "d_kv_down", "grad of kv_down", RT_F_SP, S_KVD, RT_P_ACT),
    GRAD(XA_D_LN1, "d_ln1", "grad of ln1", RT_F_SP, S_C, RT_P_ACT),
    GRAD(XA_D_LNF, "d_lnf", "grad of lnf", RT_F_SP | RT_F_HEAD, S_C, RT_P_ACT),
    GRAD(XA_D_EOUT, "d_expert_out", "grad of the experts' output", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(XA_D_EACT, "d_expert_act", "grad of expert_act", RT_F_EXPERT, S_REF, RT_P_ACT),
    GRAD(XA_D_EFC1, "d_expert_fc1", "grad of expert_fc1", RT_F_EXPERT, S_R2EF, RT_P_ACT),
    GRAD(XA_D_DISP, "d_dispatched", "grad of dispatched", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(XA_D_PPROBS, "d_perm_probs", "grad of the routed probabilities", RT_F_EXPERT, S_R1, RT_P_F32),
    GRAD(XA_D_RLOGITS, "d_router_logits", "grad of the router logits", RT_F_SP, S_BTE, RT_P_F32),
    GRAD(XA_D_SHACT, "d_sh_act", "grad of sh_act", RT_F_TP, S_SF, RT_P_ACT),
    GRAD(XA_D_SHFC1, "d_sh_fc1", "grad of sh_fc1", RT_F_TP, S_2SF, RT_P_ACT),
};

const remat_table remat_table_megatron_mla = {
    .name = "megatron-mla", .arch = REMAT_ARCH_LLAMA, .count = XA_COUNT, .nblock = XA_NBLOCK,
    .first_grad = XA_D_RES, .emb = XA_EMB, .d_res = XA_D_RES, .d_branch = RT_NONE,
    .nlmhead = 4, .lmhead = { XA_LNF_RSTD, XA_LNF, XA_LOGITS, XA_CE_TGT },
    .nlmhead_bwd = 2, .lmhead_bwd = { XA_LOGITS, XA_LNF },
    .nbwd = 21, .bwd = { XA_COMBINE, XA_E_FC2, XA_E_ACT, XA_E_FC1, XA_DISPATCHED, XA_SH_FC2, XA_SH_ACT, XA_SH_FC1,
                         XA_R_PROBS, XA_R_LOGITS, XA_LN2, XA_PROJ, XA_ATTY, XA_QKV_ATT, XA_KVUP, XA_QUP, XA_KVN, XA_QN,
                         XA_KVDOWN, XA_QDOWN, XA_LN1 },
    .defs = megatron_mla_defs, .nres = 2, .res = { XA_TOKENS, XA_EMB_MASK }, .cp = 0, .x_omods = 0, .dense_mods = 1,
};

/* ---- pytorch: transformers' DeepseekV3ForCausalLM, eager --------------------------- */

enum {
    YA_LN1_STAT = 0, YA_LN1, YA_QA, YA_QAN, YA_KVA, YA_KVAN, YA_QB, YA_KVB, YA_QKV_ATT, YA_SCORES, YA_ATT, YA_ATTY,
    YA_OPROJ, YA_RES2, YA_LN2_STAT, YA_LN2, YA_SH_GATE_UP, YA_SH_SILU, YA_SH_SWIGLU, YA_SH_DOWN, YA_ROUTER, YA_R_TOPK,
    YA_PERM, YA_DISPATCHED, YA_SW, YA_GATE_UP, YA_SILU, YA_SWIGLU, YA_DOWN, YA_WEIGHTED, YA_RES3,
    YA_NBLOCK,
    YA_EMB = YA_NBLOCK, YA_LNF_X32, YA_LNF_STAT, YA_LNF, YA_LOGP, YA_TOKENS, YA_TARGETS, YA_ROPE,
    YA_D_RES, YA_D_LN2, YA_D_ATTY, YA_D_ATT, YA_D_QKVATT, YA_D_QB, YA_D_KVB, YA_D_QAN, YA_D_KVAN, YA_D_QA, YA_D_KVA,
    YA_D_LN1, YA_D_LNF, YA_D_LOGITS, YA_D_DOWN, YA_D_SW, YA_D_SWIGLU, YA_D_SILU, YA_D_GATE_UP, YA_D_DISP, YA_D_TOPV,
    YA_D_PROBS, YA_D_SHSW, YA_D_SHSILU, YA_D_SHGU,
    YA_COUNT
};
_Static_assert(YA_NBLOCK <= 32 && YA_COUNT <= RT_MAXT, "keep masks are 32-bit; raise RT_MAXT");

/* an RMSNorm's saved statistics: x.to(float32) (a copy under bf16 only: 2
 * activation elements of a value), rsqrt (fp32, counted at the activation's
 * precision as P_NORM does) and x * it */
#define YA_STAT(id, nm, in, what)                                                                                \
    [id] = { .name = nm "_stat", .op = what ": x.to(float32) (bf16: a copy), rsqrt(mean(x^2) + eps), x * it",    \
             .cls = RT_CLASS_BLOCK, .flags = RT_F_SP,                                                          \
             .shape = RX(RX_T(1, BT), RX_T(1, BTC), RX_T(2, BTC, RD_BF16)),                                     \
             .shape_text = "(B,T,1) + (B,T,C) (+ (B,T,C) fp32 under bf16)", .prec = RT_P_ACT, NOWB,             \
             .fwd_in = R(in, N_, N_), .bwd_in = NOR, NOGRAD }
/* the experts, frameworks_moe.c's pytorch entries */
#define S_RF   .shape = E1(1, RD_R, RD_EF), .shape_text = "(S,F)"

static const remat_tensor_def pytorch_mla_defs[YA_COUNT] = {
    YA_STAT(YA_LN1_STAT, "ln1", RT_X, "input_layernorm"),
    [YA_LN1] = { .name = "ln1", .op = "input_layernorm: weight * x rstd, q_a_proj's and kv_a_proj's input",
                 .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB,
                 .fwd_in = R(YA_LN1_STAT, N_, N_), .bwd_in = R(RT_X, YA_LN1_STAT, N_), .has_bwd = 1,
                 .g_need = G(YA_D_RES, YA_D_LN1), .g_alloc = NOG, .g_free = G(YA_D_LN1, N_) },
    /* in fp32 q_a_layernorm's x is q_compressed itself; under bf16 its fp32 copy */
    [YA_QA] = { .name = "q_a", .mods = RM_SAC_SAVED,
                .op = "q_a_proj: q_compressed as q_a_layernorm's fp32 x, its rsqrt and x * rstd", .cls = RT_CLASS_BLOCK,
                .flags = RT_F_GEMM, .shape = RX(RX_T(1, BT, RD_LQ, RD_F32E), RX_T(1, BT), RX_T(1, BT, RD_LQ)),
                .shape_text = "(B,T,Lq) fp32 + (B,T,1) + (B,T,Lq)", .prec = RT_P_ACT, NOWB,
                LIN(E1(1, RD_LQ), E1(1, RD_C)), .fwd_in = R(YA_LN1, N_, N_), .bwd_in = R(YA_LN1, N_, N_), .has_bwd = 1,
                .g_need = G(YA_D_QA, YA_D_LN1), .g_alloc = NOG, .g_free = G(YA_D_QA, N_) },
    [YA_QAN] = { .name = "q_a_norm", .op = "q_a_layernorm: weight * x rstd, q_b_proj's input", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_POINTWISE, S_LQ, .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_QA, N_, N_),
                 .bwd_in = R(YA_QA, N_, N_), .has_bwd = 1, .g_need = G(YA_D_QAN, N_), .g_alloc = G(YA_D_QA, N_),
                 .g_free = G(YA_D_QAN, N_) },
    /* in fp32 the latent's view keeps all of compressed_kv (k_rot's dr columns too) */
    [YA_KVA] = { .name = "kv_a", .mods = RM_SAC_SAVED,
                 .op = "kv_a_proj_with_mqa: the latent as kv_a_layernorm's fp32 x (fp32: the storage with k_rot), "
                       "rsqrt, x * rstd", .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM,
                 .shape = RX(RX_T(1, BT, RD_LKV, RD_F32E), RX_T(1, BT, RD_DR, RD_FP32), RX_T(1, BT), RX_T(1, BT, RD_LKV)),
                 .shape_text = "(B,T,Lkv(+dr in fp32)) fp32 + (B,T,1) + (B,T,Lkv)", .prec = RT_P_ACT, NOWB,
                 LIN(KVD_N, E1(1, RD_C)), .fwd_in = R(YA_LN1, N_, N_), .bwd_in = R(YA_LN1, N_, N_), .has_bwd = 1,
                 .g_need = G(YA_D_KVA, N_), .g_alloc = G(YA_D_LN1, N_), .g_free = G(YA_D_KVA, N_) },
    [YA_KVAN] = { .name = "kv_a_norm", .op = "kv_a_layernorm: weight * x rstd, kv_b_proj's input", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_POINTWISE, S_LKV, .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_KVA, N_, N_),
                  .bwd_in = R(YA_KVA, N_, N_), .has_bwd = 1, .g_need = G(YA_D_KVAN, N_), .g_alloc = G(YA_D_KVA, N_),
                  .g_free = G(YA_D_KVAN, N_) },
    [YA_QB] = { .name = "q_b", .mods = RM_SAC_SAVED, .op = "q_b_proj: q_states, views for the split and RoPE",
                .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM | RT_F_TRANSIENT, S_QUP, .prec = RT_P_ACT, NOWB,
                LIN(QUP_N, E1(1, RD_LQ)), .fwd_in = R(YA_QAN, N_, N_), .bwd_in = R(YA_QAN, N_, N_), .has_bwd = 1,
                .g_need = G(YA_D_QB, N_), .g_alloc = G(YA_D_QAN, N_), .g_free = G(YA_D_QB, N_) },
    [YA_KVB] = { .name = "kv_b", .mods = RM_SAC_SAVED, .op = "kv_b_proj: k_nope and value, views", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_GEMM | RT_F_TRANSIENT, S_KVUP, .prec = RT_P_ACT, NOWB, LIN(KVUP_N, E1(1, RD_LKV)),
                 .fwd_in = R(YA_KVAN, N_, N_), .bwd_in = R(YA_KVAN, N_, N_), .has_bwd = 1, .g_need = G(YA_D_KVB, N_),
                 .g_alloc = G(YA_D_KVAN, N_), .g_free = G(YA_D_KVB, N_) },
    /* torch.matmul (eager attention, 267) reshapes value, a view of kv_b_proj's
     * output, to (B NH, T, dv): a copy, but for one sequence (B 1), whose
     * batch dimensions merge into a view that keeps all of kv_b's storage */
    [YA_QKV_ATT] = { .name = "qkv_att",
                     .op = "cat(q_pass, q_rot), key_states (k_nope and k_rot copied in), value as the matmul saves "
                           "it (a copy; B 1: kv_b's storage): the matmuls' operands", .cls = RT_CLASS_BLOCK,
                     .flags = RT_F_POINTWISE,
                     .shape = RX(RX_T(2, BT, RD_NH, RD_DN), RX_T(2, BT, RD_NH, RD_DR), RX_T(1, BT, RD_NH, RD_DV),
                                 RX_T(1, BT, RD_NH, RD_DN, RD_B1)),
                     .shape_text = "(B,T,NH(2(dn+dr)+dv)) (+ (B,T,NH dn) at B 1)", .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_QB, YA_KVB, YA_KVA), .bwd_in = NOR, .has_bwd = 1,
                     .g_need = G(YA_D_QKVATT, N_), .g_alloc = G(YA_D_QB, YA_D_KVB), .g_free = G(YA_D_QKVATT, N_) },
    [YA_SCORES] = { .name = "scores", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED,
                    .op = "matmul(q, k^T) * scaling + causal mask", .cls = RT_CLASS_BLOCK,
                    .flags = RT_F_GEMM | RT_F_TRANSIENT | RT_F_SELECTIVE, S_ATT, .prec = RT_P_ACT, NOWB,
                    .opc = RO_ATTENTION,
                    .cost = { 0, 0, RX(RX_T(2, RD_B, RD_NH, RD_TRI, RD_DN), RX_T(2, RD_B, RD_NH, RD_TRI, RD_DR)),
                              RX(RX_T(4, RD_B, RD_NH, RD_TRI, RD_DN), RX_T(4, RD_B, RD_NH, RD_TRI, RD_DR)) },
                    .fwd_in = R(YA_QKV_ATT, N_, N_), .bwd_in = R(YA_QKV_ATT, N_, N_), .has_bwd = 1,
                    .g_need = G(YA_D_ATT, YA_D_QKVATT), .g_alloc = NOG, .g_free = G(YA_D_ATT, N_) },
    [YA_ATT] = { .name = "att", .mods = RM_CORE_ATTN,
                 .op = "softmax(dtype=float32), and under bf16 its copy .to(query.dtype)", .cls = RT_CLASS_BLOCK,
                 .flags = RT_F_SELECTIVE,
                 .shape = RX(RX_T(1, RD_B, RD_NH, RD_T, RD_T, RD_F32E), RX_T(1, RD_B, RD_NH, RD_T, RD_T, RD_BF16)),
                 .shape_text = "(B,NH,T,T) fp32 (+ bf16)", .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_SCORES, N_, N_),
                 .bwd_in = R(YA_ATT, N_, N_), .has_bwd = 1, .g_need = G(YA_D_ATT, N_), .g_alloc = NOG, .g_free = NOG },
    [YA_ATTY] = { .name = "atty", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED,
                  .op = "matmul(probabilities, value), transposed contiguous: o_proj's input", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_GEMM, S_OV, .prec = RT_P_ACT, NOWB, .opc = RO_ATTENTION,
                  .cost = { 0, 0, E1(2, RD_B, RD_NH, RD_TRI, RD_DV), E1(4, RD_B, RD_NH, RD_TRI, RD_DV) },
                  .fwd_in = R(YA_ATT, YA_QKV_ATT, N_), .bwd_in = R(YA_ATT, YA_QKV_ATT, N_), .has_bwd = 1,
                  .g_need = G(YA_D_ATTY, N_), .g_alloc = G(YA_D_ATT, YA_D_QKVATT), .g_free = G(YA_D_ATTY, N_),
                  .scratch = { { E1(1, BT, RD_NH, RD_DV), RT_P_ACT, RW_ALWAYS } } },
    [YA_OPROJ] = { .name = "o_proj", .mods = RM_SAC_SAVED, .op = "o_proj (nn.Linear): its output", .cls = RT_CLASS_BLOCK,
                   .flags = RT_F_GEMM | RT_F_TRANSIENT, S_C, .prec = RT_P_ACT, NOWB,
                   LIN(E1(1, RD_C), E1(1, RD_NH, RD_DV)), .fwd_in = R(YA_ATTY, N_, N_), .bwd_in = R(YA_ATTY, N_, N_),
                   .has_bwd = 1, .g_need = G(YA_D_RES, N_), .g_alloc = G(YA_D_ATTY, N_), .g_free = NOG },
    [YA_RES2] = { .name = "res2", .op = "residual + o_proj: post_attention_layernorm's input", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_OPROJ, RT_X, N_), .bwd_in = NOR,
                  NOGRAD },
    YA_STAT(YA_LN2_STAT, "ln2", YA_RES2, "post_attention_layernorm"),
    [YA_LN2] = { .name = "ln2", .op = "post_attention_layernorm: weight * x rstd, the MLP's input",
                 .cls = RT_CLASS_BLOCK, .flags = RT_F_SP | RT_F_POINTWISE, S_C, .prec = RT_P_ACT, NOWB,
                 .fwd_in = R(YA_LN2_STAT, N_, N_), .bwd_in = R(YA_RES2, YA_LN2_STAT, N_), .has_bwd = 1,
                 .g_need = G(YA_D_RES, YA_D_LN2), .g_alloc = NOG, .g_free = G(YA_D_LN2, N_) },
    /* DeepseekV3MLP: a dense layer's MLP, or a routed layer's shared experts */
    [YA_SH_GATE_UP] = { .name = "sh_gate_up", .mods = RM_SAC_SAVED,
                        .op = "gate_proj, up_proj (the dense MLP or the shared experts): SiLU saves gate, the product up",
                        .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM, S_2SF, .prec = RT_P_ACT, NOWB,
                        LIN(E1(2, RD_SF), E1(1, RD_C)), .fwd_in = R(YA_LN2, N_, N_), .bwd_in = R(YA_LN2, N_, N_),
                        .has_bwd = 1, .g_need = G(YA_D_SHGU, YA_D_LN2), .g_alloc = NOG, .g_free = G(YA_D_SHGU, N_) },
    [YA_SH_SILU] = { .name = "sh_silu", .op = "act_fn(gate): the product saves it", .cls = RT_CLASS_BLOCK,
                     .flags = RT_F_POINTWISE, S_SF, .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_SH_GATE_UP, N_, N_),
                     .bwd_in = R(YA_SH_GATE_UP, N_, N_), .has_bwd = 1, .g_need = G(YA_D_SHSILU, YA_D_SHGU),
                     .g_alloc = NOG, .g_free = G(YA_D_SHSILU, N_) },
    [YA_SH_SWIGLU] = { .name = "sh_swiglu", .op = "act_fn(gate) * up: down_proj's input", .cls = RT_CLASS_BLOCK,
                       .flags = RT_F_POINTWISE, S_SF, .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_SH_SILU, YA_SH_GATE_UP, N_),
                       .bwd_in = R(YA_SH_SILU, YA_SH_GATE_UP, N_), .has_bwd = 1, .g_need = G(YA_D_SHSW, N_),
                       .g_alloc = G(YA_D_SHSILU, YA_D_SHGU), .g_free = G(YA_D_SHSW, N_) },
    [YA_SH_DOWN] = { .name = "sh_down", .mods = RM_SAC_SAVED, .op = "down_proj: its output", .cls = RT_CLASS_BLOCK,
                     .flags = RT_F_GEMM | RT_F_TRANSIENT, .shape = E1(1, BT, RD_SC), .shape_text = "(B,T,C)",
                     .prec = RT_P_ACT, NOWB, LIN(E1(1, RD_SC), E1(1, RD_SF)), .fwd_in = R(YA_SH_SWIGLU, N_, N_),
                     .bwd_in = R(YA_SH_SWIGLU, N_, N_), .has_bwd = 1, .g_need = G(YA_D_RES, N_),
                     .g_alloc = G(YA_D_SHSW, N_), .g_free = NOG },
    /* DeepseekV3TopkRouter (a routed layer) */
    [YA_ROUTER] = { .name = "router", .mods = RM_SAC_SAVED,
                    .op = "F.linear in fp32 (bf16: the input's and the weight's fp32 copies), sigmoid: the scores",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_GEMM,
                    .shape = RX(RX_T(2, BTC, RD_BF16, RD_MOEL), RX_T(2, RD_E, RD_C, RD_BF16), RX_T(1, BT, RD_E, RD_F32E)),
                    .shape_text = "(B,T,E) fp32 (+ (B,T,C), (E,C) fp32 under bf16)", .prec = RT_P_ACT, NOWB,
                    LIN(E1(1, RD_E), E1(1, RD_C)), .fwd_in = R(YA_LN2, N_, N_), .bwd_in = R(YA_LN2, YA_ROUTER, N_),
                    .has_bwd = 1, .g_need = G(YA_D_PROBS, YA_D_LN2), .g_alloc = NOG, .g_free = G(YA_D_PROBS, N_),
                    .scratch = { { E1(1, BT, RD_E), RT_P_F32, RW_ALWAYS } } },
    [YA_R_TOPK] = { .name = "router_topk",
                    .op = "scores.gather(topk indices) (int64 kept), topk_weights /= sum: the sum and the values' copy",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_POINTWISE,
                    .shape = RX(RX_T(12, BT, RD_K), RX_T(4, BT, RD_MOEL)), .shape_text = "(B,T,k) int64 + (B,T,k+1) fp32",
                    .prec = RT_P_BYTE, NOWB, .fwd_in = R(YA_ROUTER, N_, N_), .bwd_in = R(YA_R_TOPK, N_, N_),
                    .has_bwd = 1, .g_need = G(YA_D_TOPV, N_), .g_alloc = G(YA_D_PROBS, N_), .g_free = G(YA_D_TOPV, N_) },
    [YA_PERM] = { .name = "perm", .op = "perm // k, perm, inv_perm (int64) and the offsets (int32)",
                  .cls = RT_CLASS_BLOCK, .shape = RX(RX_T(24, RD_R), RX_T(4, RD_E)),
                  .shape_text = "3 (S) int64 + (E) int32", .prec = RT_P_BYTE, NOWB, .fwd_in = R(YA_R_TOPK, N_, N_),
                  .bwd_in = NOR, NOGRAD },
    [YA_DISPATCHED] = { .name = "dispatched", .op = "hidden_states[perm // k]: gate_up's input", .cls = RT_CLASS_BLOCK,
                        .flags = RT_F_EXPERT, S_RC, .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_LN2, YA_PERM, N_),
                        .bwd_in = R(YA_PERM, N_, N_), .has_bwd = 1, .g_need = G(YA_D_DISP, N_),
                        .g_alloc = G(YA_D_LN2, N_), .g_free = G(YA_D_DISP, N_) },
    [YA_SW] = { .name = "sample_weights", .op = "sample_weights[perm] (fp32): the weighting saves it",
                .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT, S_R1, .prec = RT_P_F32, NOWB,
                .fwd_in = R(YA_R_TOPK, YA_PERM, N_), .bwd_in = R(YA_PERM, N_, N_), .has_bwd = 1,
                .g_need = G(YA_D_SW, N_), .g_alloc = G(YA_D_TOPV, N_), .g_free = G(YA_D_SW, N_) },
    [YA_GATE_UP] = { .name = "gate_up", .mods = RM_SAC_SAVED, .op = "grouped_mm(dispatched, gate_up_proj): SiLU saves it",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_GEMM, S_R2EF, .prec = RT_P_ACT, NOWB,
                     GLIN(E1(2, RD_EF), E1(1, RD_C)), .fwd_in = R(YA_DISPATCHED, N_, N_),
                     .bwd_in = R(YA_DISPATCHED, N_, N_), .has_bwd = 1, .g_need = G(YA_D_GATE_UP, N_),
                     .g_alloc = G(YA_D_DISP, N_), .g_free = G(YA_D_GATE_UP, N_) },
    [YA_SILU] = { .name = "silu", .op = "act_fn(gate): the product saves it", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_EXPERT | RT_F_POINTWISE, S_RF, .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_GATE_UP, N_, N_),
                  .bwd_in = R(YA_GATE_UP, N_, N_), .has_bwd = 1, .g_need = G(YA_D_SILU, YA_D_GATE_UP), .g_alloc = NOG,
                  .g_free = G(YA_D_SILU, N_) },
    [YA_SWIGLU] = { .name = "swiglu", .op = "act_fn(gate) * up: down's input", .cls = RT_CLASS_BLOCK,
                    .flags = RT_F_EXPERT | RT_F_POINTWISE, S_RF, .prec = RT_P_ACT, NOWB,
                    .fwd_in = R(YA_SILU, YA_GATE_UP, N_), .bwd_in = R(YA_SILU, YA_GATE_UP, N_), .has_bwd = 1,
                    .g_need = G(YA_D_SWIGLU, N_), .g_alloc = G(YA_D_SILU, YA_D_GATE_UP), .g_free = G(YA_D_SWIGLU, N_) },
    [YA_DOWN] = { .name = "down", .mods = RM_SAC_SAVED, .op = "grouped_mm(swiglu, down_proj): the weighting saves it",
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_GEMM, S_RC, .prec = RT_P_ACT, NOWB,
                  GLIN(E1(1, RD_C), E1(1, RD_EF)), .fwd_in = R(YA_SWIGLU, N_, N_), .bwd_in = R(YA_SWIGLU, N_, N_),
                  .has_bwd = 1, .g_need = G(YA_D_DOWN, N_), .g_alloc = G(YA_D_SWIGLU, N_), .g_free = G(YA_D_DOWN, N_) },
    /* the weighting, put back in token order and summed over k: not saved */
    [YA_WEIGHTED] = { .name = "weighted", .op = "proj_out * sample_weights_g, [inv_perm], summed over k: the routed output",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_EXPERT | RT_F_POINTWISE | RT_F_TRANSIENT, S_RC,
                      .prec = RT_P_ACT, NOWB, .fwd_in = R(YA_DOWN, YA_SW, YA_PERM), .bwd_in = R(YA_DOWN, YA_SW, YA_PERM),
                      .has_bwd = 1, .g_need = G(YA_D_RES, N_), .g_alloc = G(YA_D_DOWN, YA_D_SW), .g_free = NOG,
                      .scratch = { { E1(1, RD_R, RD_C), RT_P_ACT, RW_ALWAYS } } },
    [YA_RES3] = { .name = "res3", .op = "residual + the routed and shared outputs (or the dense MLP's): the block output",
                  .cls = RT_CLASS_BLOCK, .flags = RT_F_SP, S_C, .prec = RT_P_ACT, NOWB,
                  .fwd_in = R(YA_WEIGHTED, YA_SH_DOWN, YA_RES2), .bwd_in = NOR, NOGRAD },
    P_GLOBALS_R(YA, E1(2, RD_T, RD_DR), "2 x (1,T,dr)"),
    GRAD(YA_D_RES, "d_res", "grad of residual stream", RT_F_SP | RT_F_ZERO, S_C, RT_P_ACT),
    GRAD(YA_D_LN2, "d_ln2", "grad of ln2", RT_F_SP, S_C, RT_P_ACT),
    GRAD(YA_D_ATTY, "d_atty", "grad of atty", 0, S_OV, RT_P_ACT),
    GRAD(YA_D_ATT, "d_att", "grad of the probabilities, then the scores", 0, S_ATT, RT_P_F32),
    GRAD(YA_D_QKVATT, "d_qkv_att", "grad of query, key, value", RT_F_ZERO, S_QKVA, RT_P_ACT),
    GRAD(YA_D_QB, "d_q_b", "grad of q_b", 0, S_QUP, RT_P_ACT),
    GRAD(YA_D_KVB, "d_kv_b", "grad of kv_b", 0, S_KVUP, RT_P_ACT),
    GRAD(YA_D_QAN, "d_q_a_norm", "grad of q_a_norm", 0, S_LQ, RT_P_ACT),
    GRAD(YA_D_KVAN, "d_kv_a_norm", "grad of kv_a_norm", 0, S_LKV, RT_P_ACT),
    GRAD(YA_D_QA, "d_q_a", "grad of q_compressed", 0, S_LQ, RT_P_ACT),
    GRAD(YA_D_KVA, "d_kv_a", "grad of compressed_kv", 0, S_KVD, RT_P_ACT),
    GRAD(YA_D_LN1, "d_ln1", "grad of ln1", RT_F_SP, S_C, RT_P_ACT),
    GRAD(YA_D_LNF, "d_lnf", "grad of lnf", RT_F_SP | RT_F_HEAD, S_C, RT_P_ACT),
    GRAD(YA_D_LOGITS, "d_logits", "grad of the logits", RT_F_HEAD, S_V, RT_P_F32),
    GRAD(YA_D_DOWN, "d_down", "grad of down", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(YA_D_SW, "d_sample_weights", "grad of sample_weights", RT_F_EXPERT, S_R1, RT_P_F32),
    GRAD(YA_D_SWIGLU, "d_swiglu", "grad of swiglu", RT_F_EXPERT, S_RF, RT_P_ACT),
    GRAD(YA_D_SILU, "d_silu", "grad of silu", RT_F_EXPERT, S_RF, RT_P_ACT),
    GRAD(YA_D_GATE_UP, "d_gate_up", "grad of gate_up", RT_F_EXPERT, S_R2EF, RT_P_ACT),
    GRAD(YA_D_DISP, "d_dispatched", "grad of dispatched", RT_F_EXPERT, S_RC, RT_P_ACT),
    GRAD(YA_D_TOPV, "d_top_value", "grad of the top-k values", 0, S_BTK, RT_P_F32),
    GRAD(YA_D_PROBS, "d_router_probs", "grad of the scores", 0, S_BTE, RT_P_F32),
    GRAD(YA_D_SHSW, "d_sh_swiglu", "grad of sh_swiglu", 0, S_SF, RT_P_ACT),
    GRAD(YA_D_SHSILU, "d_sh_silu", "grad of sh_silu", 0, S_SF, RT_P_ACT),
    GRAD(YA_D_SHGU, "d_sh_gate_up", "grad of sh_gate_up", 0, S_2SF, RT_P_ACT),
};

const remat_table remat_table_pytorch_mla = {
    .name = "pytorch-mla", .arch = REMAT_ARCH_LLAMA, .count = YA_COUNT, .nblock = YA_NBLOCK,
    .first_grad = YA_D_RES, .emb = YA_EMB, .d_res = YA_D_RES, .d_branch = RT_NONE,
    .nlmhead = 4, .lmhead = { YA_LNF_X32, YA_LNF_STAT, YA_LNF, YA_LOGP },
    .nlmhead_bwd = 2, .lmhead_bwd = { YA_LOGP, YA_LNF },
    .nbwd = 26, .bwd = { YA_WEIGHTED, YA_DOWN, YA_SWIGLU, YA_SILU, YA_GATE_UP, YA_SW, YA_DISPATCHED, YA_R_TOPK,
                         YA_ROUTER, YA_SH_DOWN, YA_SH_SWIGLU, YA_SH_SILU, YA_SH_GATE_UP, YA_LN2, YA_OPROJ, YA_ATTY,
                         YA_ATT, YA_SCORES, YA_QKV_ATT, YA_KVB, YA_QB, YA_KVAN, YA_QAN, YA_KVA, YA_QA, YA_LN1 },
    .defs = pytorch_mla_defs, .nres = 3, .res = { YA_TOKENS, YA_TARGETS, YA_ROPE },
};
