/*
 * frameworks_llama.c -- the tensor tables of the Llama family as two
 * frameworks keep it for the backward pass, for planning their runs:
 * Megatron-core's GPT model with the Llama options under Transformer Engine,
 * and Hugging Face transformers' LlamaForCausalLM in PyTorch.  One table per
 * attention backend (remat_table_of selects by cfg->attention): flash (the
 * fused kernels, which keep Q, K, V, O and the fp32 softmax statistics and
 * no T x T term) and unfused (the probabilities).  Data in the format of
 * tensors.h, run by the same compiler, simulator and planner as every table.
 *
 * Dimension legend: B micro-batch, T sequence, C hidden, F the MLP width,
 * NH query heads, KV key/value heads (query groups), HS head size, Vp the
 * padded vocabulary; t the tensor-parallel size.
 *
 * megatron (Megatron-LM d98e8a6, TransformerEngine d0067d0; the README's
 * table cites the file of every entry).  The layer spec
 * (megatron/core/models/gpt/gpt_layer_specs.py,
 * get_gpt_layer_with_transformer_engine_submodules) fuses each RMSNorm into
 * the next column-parallel linear: input_layernorm and pre_mlp_layernorm are
 * IdentityOp and TELayerNormColumnParallelLinear is TE's LayerNormLinear
 * (transformer_engine/pytorch/module/layernorm_linear.py), whose forward
 * saves its input, the norm's output ln_out (the local sequence shard under
 * SP) and rsigma (fp32, one per row).  So the layer keeps, in bf16:
 *   x and ln1 (linear_qkv's input and norm), ln1_rstd;
 *   attention (megatron/core/transformer/attention.py): mixed_qkv is split
 *     into views, q and k rotated by TE's fused RoPE (apply_rope_fusion,
 *     on unless --no-rope-fusion; FusedRoPEFunc saves only the cached
 *     frequencies) and TE's get_qkv_layout
 *     (attention/dot_product_attention/utils.py) makes v contiguous, since
 *     v's view of mixed_qkv has no supported layout beside the new q and k;
 *     flash (FusedAttnFunc, backends.py) saves q, k, v, O and the cuDNN
 *     softmaxStats (B, NH, T) fp32 (plus a 16-byte RNG state, left out);
 *     unfused (UnfusedDotProductAttention) repeat_interleaves k and v to NH
 *     heads when KV < NH, and saves q and the two copies (the batched
 *     GEMMs' operands), the fused kernel's bf16 probabilities, the dropout
 *     mask and output: Table 2's terms at GQA shapes;
 *   O, linear_proj's input (TE Linear saves it); the dropout mask;
 *   res2 and ln2 (linear_fc1's LayerNormLinear), ln2_rstd;
 *   fc1's output, gate and up (B,T,2F), which the fused SwiGLU saves
 *     (megatron/core/fusions/fused_bias_swiglu.py), and the SwiGLU output,
 *     linear_fc2's input; the dropout mask.
 * Dropout p = 0 (the Llama recipe, examples/llama/train_llama3_8b_h100_fp8.sh)
 * makes no mask: F.dropout returns its input.  The head: the final RMSNorm
 * (TENorm: its input and rsigma), the output layer's input, the fp32
 * softmax and the target mask and masked target that the vocab-parallel
 * cross entropy saves (megatron/core/tensor_parallel/cross_entropy.py); the
 * embedding keeps the token ids (F.embedding) and its dropout mask.
 *
 * pytorch (transformers 5dd4a63, models/llama/modeling_llama.py;
 * integrations/sdpa_attention.py; loss/loss_utils.py): what autograd saves,
 * each storage once (tests/py_frameworks.py measures the eager table):
 *   LlamaRMSNorm: x (itself in fp32; under bf16 its fp32 copy x.float()),
 *     rsqrt(mean(x^2) + eps), x * that (which weight * it saves), and its
 *     output, which the projections save;
 *   q_proj/k_proj/v_proj: only their input; apply_rotary_pos_emb saves cos
 *     and sin (computed once per forward for every layer: a resident);
 *   eager: repeat_kv's copies of k and v (NH heads), q, the fp32 softmax
 *     (softmax(dtype=float32)), under bf16 its bf16 copy, the dropout mask
 *     and output (attention_dropout), attn_output's contiguous copy (o_proj's
 *     input);
 *   SDPA flash (sdpa_attention_forward with enable_gqa, torch >= 2.5, no
 *     padding mask): q, k and v as given (KV heads), the output and the
 *     logsumexp (B, NH, T) fp32; the output's transpose is o_proj's input;
 *   LlamaMLP: gate (SiLU saves it), up and silu(gate) (the product saves
 *     both), their product (down_proj's input);
 *   the head: the final norm as above, lm_head's input, F.cross_entropy's
 *     fp32 log-softmax and the shifted targets; the token ids.
 * Llama has no residual dropout: --dropout is attention_dropout here.
 *
 * FLOPs count matrix products only, as Megatron does: attention over the
 * causal pairs (TRI), forward QK^T and PV, backward four products (flash's
 * recomputation of S is not counted, like Megatron's num_floating_point_operations).
 */
#include <stddef.h>
#include "frameworks_llama.h"

/* ---- megatron, flash: TE's FusedAttention (--attention-backend fused) -------- */

enum {
    MF_LN1_RSTD = 0, MF_LN1, MF_QKV, MF_QKV_ATT, MF_ATTN, MF_LSE, MF_ATTY, MF_PROJ, MF_PROJ_MASK, MF_RES2,
    MF_LN2_RSTD, MF_LN2, MF_FC1, MF_SWIGLU, MF_MLP, MF_MLP_MASK, MF_RES3,
    MF_NBLOCK,
    MF_EMB = MF_NBLOCK, MF_LNF_RSTD, MF_LNF, MF_LOGITS, MF_CE_TGT, MF_TOKENS, MF_EMB_MASK,
    MF_D_RES, MF_D_BRANCH, MF_D_SWIGLU, MF_D_FC1, MF_D_LN2, MF_D_ATTY, MF_D_QKVATT, MF_D_QKV, MF_D_LN1, MF_D_LNF,
    MF_COUNT
};

static const remat_tensor_def megatron_flash_defs[MF_COUNT] = {
    M_NORM_QKV(MF),
    [MF_QKV_ATT] = { .name = "qkv_att", .omods = RF_CORE_ATTN,
                     .op = "q, k after TE's fused RoPE and v made contiguous: what FusedAttention saves",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_POINTWISE, S_QKV, .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(MF_QKV, N_, N_), .bwd_in = NOR, .has_bwd = 1, .g_need = G(MF_D_QKVATT, N_),
                     .g_alloc = G(MF_D_QKV, N_), .g_free = G(MF_D_QKVATT, N_) },
    FLASH_CORE(MF, RT_F_CP, RF_CORE_ATTN, RF_ATTN_PROJ, MF_RING_F, MF_RING_B,
               "FusedAttention forward (fused_attn_fwd): QK^T, softmax, PV; with --cp the ring of K/V",
               "FusedAttention's softmaxStats (log-sum-exp), which it saves",
               "FusedAttention output O, heads merged: linear_proj's input"),
    M_PROJ_MLP(MF),
    M_GLOBALS(MF),
    M_GRADS(MF),
    GRAD(MF_D_QKVATT, "d_qkv_att", "grad of qkv_att", RT_F_CP | RT_F_TP, S_QKV, RT_P_ACT),
};

const remat_table remat_table_megatron_llama = M_TABLE(MF, "megatron-llama", megatron_flash_defs, 1, 11, M_BWD_HEAD(MF),
                                                       MF_QKV_ATT, M_BWD_TAIL(MF));

/* ---- megatron, unfused: TE's UnfusedDotProductAttention (--attention-backend unfused) */

enum {
    MU_LN1_RSTD = 0, MU_LN1, MU_QKV, MU_QKV_ATT, MU_SCORES, MU_ATT, MU_ATT_MASK, MU_ATT_DROP, MU_ATTY, MU_PROJ,
    MU_PROJ_MASK, MU_RES2, MU_LN2_RSTD, MU_LN2, MU_FC1, MU_SWIGLU, MU_MLP, MU_MLP_MASK, MU_RES3,
    MU_NBLOCK,
    MU_EMB = MU_NBLOCK, MU_LNF_RSTD, MU_LNF, MU_LOGITS, MU_CE_TGT, MU_TOKENS, MU_EMB_MASK,
    MU_D_RES, MU_D_BRANCH, MU_D_SWIGLU, MU_D_FC1, MU_D_LN2, MU_D_ATTY, MU_D_QKVATT, MU_D_QKV, MU_D_LN1, MU_D_LNF,
    MU_D_ATT,
    MU_COUNT
};

static const remat_tensor_def megatron_unfused_defs[MU_COUNT] = {
    M_NORM_QKV(MU),
    /* the un-repeated k and v live only inside the op (its scratch) */
    [MU_QKV_ATT] = { .name = "qkv_att", .omods = RF_CORE_ATTN,
                     .op = "q after TE's fused RoPE and k, v repeat_interleaved to NH heads: the batched GEMMs' operands",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_POINTWISE, S_Q3, .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(MU_QKV, N_, N_), .bwd_in = NOR, .has_bwd = 1, .g_need = G(MU_D_QKVATT, N_),
                     .g_alloc = G(MU_D_QKV, N_), .g_free = G(MU_D_QKVATT, N_),
                     .scratch = { { E1(2, BT, RD_KV, RD_HS), RT_P_ACT, RW_ALWAYS } } },
    [MU_SCORES] = { .name = "scores", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED, .op = "baddbmm: q k^T / sqrt(hs)",
                    .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_GEMM | RT_F_TRANSIENT | RT_F_SELECTIVE,
                    S_ATT, .prec = RT_P_ACT, NOWB, ATTN(1, 2), .fwd_in = R(MU_QKV_ATT, N_, N_),
                    .bwd_in = R(MU_QKV_ATT, N_, N_), .has_bwd = 1, .g_need = G(MU_D_ATT, MU_D_QKVATT),
                    .g_alloc = NOG, .g_free = G(MU_D_ATT, N_) },
    [MU_ATT] = { .name = "att", .mods = RM_CORE_ATTN, .omods = RF_CORE_ATTN,
                 .op = "FusedScaleMaskSoftmax (the fused kernel's bf16 output)",
                 .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_SELECTIVE, S_ATT, .prec = RT_P_ACT, NOWB,
                 .fwd_in = R(MU_SCORES, N_, N_), .bwd_in = R(MU_ATT, N_, N_), .has_bwd = 1,
                 .g_need = G(MU_D_ATT, N_), .g_alloc = NOG, .g_free = NOG },
    [MU_ATT_MASK] = { .name = "att_mask", .mods = RM_CORE_ATTN, .omods = RF_CORE_ATTN, .op = "attention dropout mask",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT, S_ATT, .prec = RT_P_BYTE, NOWB,
                      .fwd_in = R(MU_ATT, N_, N_), .bwd_in = NOR, NOGRAD },
    [MU_ATT_DROP] = { .name = "att_drop", .mods = RM_CORE_ATTN, .omods = RF_CORE_ATTN, .op = "attention dropout",
                      .cls = RT_CLASS_BLOCK, .flags = RT_F_CP | RT_F_TP | RT_F_SELECTIVE | RT_F_DROPOUT, S_ATT, .prec = RT_P_ACT, NOWB,
                      .fwd_in = R(MU_ATT, MU_ATT_MASK, N_), .bwd_in = R(MU_ATT_MASK, N_, N_), .has_bwd = 1,
                      .g_need = G(MU_D_ATT, N_), .g_alloc = NOG, .g_free = NOG },
    [MU_ATTY] = { .name = "atty", .mods = RM_CORE_ATTN_REGION | RM_SAC_SAVED, .omods = RF_ATTN_PROJ,
                  .op = "bmm(probabilities, v), heads merged: linear_proj's input", .cls = RT_CLASS_BLOCK,
                  .flags = RT_F_CP | RT_F_TP | RT_F_GEMM, S_O, .prec = RT_P_ACT, NOWB, ATTN(1, 2),
                  .fwd_in = R(MU_ATT_DROP, MU_QKV_ATT, N_), .bwd_in = R(MU_ATT_DROP, MU_QKV_ATT, N_), .has_bwd = 1,
                  .g_need = G(MU_D_ATTY, N_), .g_alloc = G(MU_D_ATT, MU_D_QKVATT), .g_free = G(MU_D_ATTY, N_) },
    M_PROJ_MLP(MU),
    M_GLOBALS(MU),
    M_GRADS(MU),
    GRAD(MU_D_QKVATT, "d_qkv_att", "grad of qkv_att", RT_F_CP | RT_F_TP | RT_F_ZERO, S_Q3, RT_P_ACT),
    GRAD(MU_D_ATT, "d_att", "grad of the probabilities, then the scores", RT_F_CP | RT_F_TP, S_ATT, RT_P_ACT),
};

const remat_table remat_table_megatron_llama_unfused =
    M_TABLE(MU, "megatron-llama-unfused", megatron_unfused_defs, 0, 14, M_BWD_HEAD(MU), MU_ATT_DROP, MU_ATT, MU_SCORES,
            MU_QKV_ATT, M_BWD_TAIL(MU));

/* ---- pytorch, flash: SDPA's flash backend (attn_implementation="sdpa") -------- */

enum {
    PF_LN1_X32 = 0, PF_LN1_STAT, PF_LN1, PF_QKV, PF_QKV_ATT, PF_ATTN, PF_LSE, PF_ATTY, PF_OPROJ, PF_RES2,
    PF_LN2_X32, PF_LN2_STAT, PF_LN2, PF_GATE_UP, PF_SILU, PF_SWIGLU, PF_DOWN, PF_RES3,
    PF_NBLOCK,
    PF_EMB = PF_NBLOCK, PF_LNF_X32, PF_LNF_STAT, PF_LNF, PF_LOGP, PF_TOKENS, PF_TARGETS, PF_ROPE,
    PF_D_RES, PF_D_SWIGLU, PF_D_SILU, PF_D_GATE_UP, PF_D_LN2, PF_D_ATTY, PF_D_QKV, PF_D_LN1, PF_D_LNF, PF_D_LOGITS,
    PF_D_QKVATT,
    PF_COUNT
};

static const remat_tensor_def pytorch_flash_defs[PF_COUNT] = {
    P_NORM(PF, LN1, "ln1", RT_X, "input_layernorm"),
    P_QKV(PF),
    [PF_QKV_ATT] = { .name = "qkv_att", .op = "q, k after apply_rotary_pos_emb and v: what SDPA's flash backend saves",
                     .cls = RT_CLASS_BLOCK, .flags = RT_F_TP | RT_F_POINTWISE, S_QKV, .prec = RT_P_ACT, NOWB,
                     .fwd_in = R(PF_QKV, N_, N_), .bwd_in = NOR, .has_bwd = 1, .g_need = G(PF_D_QKVATT, N_),
                     .g_alloc = G(PF_D_QKV, N_), .g_free = G(PF_D_QKVATT, N_) },
    FLASH_CORE(PF, 0, 0, 0, , , "_scaled_dot_product_flash_attention (one kernel for the output and the logsumexp)",
               "the logsumexp flash saves", "SDPA output, transposed: o_proj's input (the storage flash saves)"),
    P_MLP(PF),
    P_GLOBALS(PF),
    P_GRADS(PF),
    GRAD(PF_D_QKVATT, "d_qkv_att", "grad of qkv_att", RT_F_TP, S_QKV, RT_P_ACT),
};

const remat_table remat_table_pytorch_llama = P_TABLE(PF, "pytorch-llama", pytorch_flash_defs, 10, P_BWD_HEAD(PF),
                                                      P_BWD_TAIL(PF));

/* ---- pytorch, eager: eager_attention_forward (attn_implementation="eager") ---- */

enum {
    PE_LN1_X32 = 0, PE_LN1_STAT, PE_LN1, PE_QKV, PE_QKV_ATT, PE_SCORES, PE_ATT, PE_ATT_BF16, PE_ATT_MASK, PE_ATT_DROP,
    PE_ATTY, PE_OPROJ, PE_RES2, PE_LN2_X32, PE_LN2_STAT, PE_LN2, PE_GATE_UP, PE_SILU, PE_SWIGLU, PE_DOWN, PE_RES3,
    PE_NBLOCK,
    PE_EMB = PE_NBLOCK, PE_LNF_X32, PE_LNF_STAT, PE_LNF, PE_LOGP, PE_TOKENS, PE_TARGETS, PE_ROPE,
    PE_D_RES, PE_D_SWIGLU, PE_D_SILU, PE_D_GATE_UP, PE_D_LN2, PE_D_ATTY, PE_D_QKV, PE_D_LN1, PE_D_LNF, PE_D_LOGITS,
    PE_D_QKVATT, PE_D_ATT,
    PE_COUNT
};

static const remat_tensor_def pytorch_eager_defs[PE_COUNT] = {
    P_NORM(PE, LN1, "ln1", RT_X, "input_layernorm"),
    P_QKV(PE),
    P_EAGER_ATTN(PE),
    P_MLP(PE),
    P_GLOBALS(PE),
    P_GRADS(PE),
    GRAD(PE_D_QKVATT, "d_qkv_att", "grad of qkv_att", RT_F_TP | RT_F_ZERO, S_Q3, RT_P_ACT),
    GRAD(PE_D_ATT, "d_att", "grad of the probabilities, then the scores", RT_F_TP, S_ATT, RT_P_F32),
};

const remat_table remat_table_pytorch_llama_eager = P_TABLE(PE, "pytorch-llama-eager", pytorch_eager_defs, 13,
                                                            P_BWD_HEAD(PE), PE_ATT_DROP, PE_ATT, PE_SCORES,
                                                            P_BWD_TAIL(PE));
