/*
 * params.c -- the parameter tables (see params.h) and their layout.
 *
 * GPT-2 is llm.c's layout (train_gpt2.c: 16 tensors, each stacked over the
 * layers), with Hugging Face's GPT2LMHeadModel names: Conv1D layers store
 * their weights (in, out), the transpose of nn.Linear's (out, in).  Llama
 * is Hugging Face's LlamaForCausalLM (transformers, models/llama): q_proj,
 * k_proj and v_proj stacked into one QKV weight, gate_proj over up_proj into
 * one (2F, C) weight, so that each runs as one product.
 *
 * Placement (the cluster planner's parameters per GPU).  Llama's is
 * Megatron-core's (megatron/core/models/gpt/gpt_model.py: the embedding on
 * the first pipeline stage, the final norm and the output layer on the
 * last; TE's norms are not split by tensor parallelism, every weight matrix
 * and the vocabulary are), which compute_weight_and_optimizer_memory in
 * megatron/training/theoretical_memory_usage.py (d98e8a6) counts the same
 * way but for the final norm, whose h parameters it spreads over the
 * stages.  GPT-2's reproduces the count the GPT-2 framework tests and the
 * README's and docs/cluster.md's figures were written against,
 * (L/P (12h^2 + 13h) + V h)/T: everything split by T, the position
 * embedding and the final LayerNorm left out (Megatron keeps the
 * LayerNorms and the row-parallel biases whole, 9h a layer, and wpe on the
 * first stage: under 0.01% of any preset).
 */
#include <stdio.h>
#include <string.h>
#include "params.h"
#include "../core/core.h"

#define D1(a) RX(RX_T(1, a))
#define DK(k, a) RX(RX_T(k, a))
#define VEC RX_0
#define NOPIECE 0, { { 0 } }
/* one Hugging Face tensor for the whole parameter */
#define HF1(n, tr) 1, { { n, RX_0, RX_0, tr } }

static const remat_param_def gpt2_defs[GP_COUNT] = {
    [GP_WTE] = { "wte", D1(RD_VP), D1(RD_C), 0, 1, REMAT_INIT_NORMAL, 0, 1, HF1("wte.weight", 0) },
    [GP_WPE] = { "wpe", D1(RD_MAXT), D1(RD_C), 0, 1, REMAT_INIT_NORMAL, 0, 0, HF1("wpe.weight", 0), .stage = RP_UNCOUNTED },
    [GP_LN1W] = { "ln1w", D1(RD_C), VEC, 1, 0, REMAT_INIT_ONES, 0, 0, HF1("h.%d.ln_1.weight", 0) },
    [GP_LN1B] = { "ln1b", D1(RD_C), VEC, 1, 0, REMAT_INIT_ZEROS, 0, 0, HF1("h.%d.ln_1.bias", 0) },
    [GP_QKVW] = { "qkvw", DK(3, RD_C), D1(RD_C), 1, 1, REMAT_INIT_NORMAL, 0, 0, HF1("h.%d.attn.c_attn.weight", 1) },
    [GP_QKVB] = { "qkvb", DK(3, RD_C), VEC, 1, 0, REMAT_INIT_ZEROS, 0, 0, HF1("h.%d.attn.c_attn.bias", 0) },
    [GP_ATTPROJW] = { "attprojw", D1(RD_C), D1(RD_C), 1, 1, REMAT_INIT_NORMAL_PROJ, 0, 0,
                      HF1("h.%d.attn.c_proj.weight", 1) },
    [GP_ATTPROJB] = { "attprojb", D1(RD_C), VEC, 1, 0, REMAT_INIT_ZEROS, 0, 0, HF1("h.%d.attn.c_proj.bias", 0) },
    [GP_LN2W] = { "ln2w", D1(RD_C), VEC, 1, 0, REMAT_INIT_ONES, 0, 0, HF1("h.%d.ln_2.weight", 0) },
    [GP_LN2B] = { "ln2b", D1(RD_C), VEC, 1, 0, REMAT_INIT_ZEROS, 0, 0, HF1("h.%d.ln_2.bias", 0) },
    [GP_FCW] = { "fcw", DK(4, RD_C), D1(RD_C), 1, 1, REMAT_INIT_NORMAL, 0, 0, HF1("h.%d.mlp.c_fc.weight", 1) },
    [GP_FCB] = { "fcb", DK(4, RD_C), VEC, 1, 0, REMAT_INIT_ZEROS, 0, 0, HF1("h.%d.mlp.c_fc.bias", 0) },
    [GP_FCPROJW] = { "fcprojw", D1(RD_C), DK(4, RD_C), 1, 1, REMAT_INIT_NORMAL_PROJ, 0, 0,
                     HF1("h.%d.mlp.c_proj.weight", 1) },
    [GP_FCPROJB] = { "fcprojb", D1(RD_C), VEC, 1, 0, REMAT_INIT_ZEROS, 0, 0, HF1("h.%d.mlp.c_proj.bias", 0) },
    [GP_LNFW] = { "lnfw", D1(RD_C), VEC, 0, 0, REMAT_INIT_ONES, 0, 0, HF1("ln_f.weight", 0), .stage = RP_UNCOUNTED },
    [GP_LNFB] = { "lnfb", D1(RD_C), VEC, 0, 0, REMAT_INIT_ZEROS, 0, 0, HF1("ln_f.bias", 0), .stage = RP_UNCOUNTED },
};

/* buffers of GPT2LMHeadModel's checkpoints, and its tied head */
static const char *const gpt2_ignored[] = { "h.%d.attn.bias", "h.%d.attn.masked_bias", "lm_head.weight", NULL };

const remat_param_table remat_params_gpt2 = {
    .arch = REMAT_ARCH_GPT2, .count = GP_COUNT, .defs = gpt2_defs, .wte = GP_WTE,
    .hf_prefix = "transformer.", .hf_ignored = gpt2_ignored,
};

/* rows of a slice: q (NH hs), k (KV hs), v (KV hs); gate (F), up (F) */
#define Q_ROWS RX(RX_T(1, RD_NH, RD_HS))
#define KV_ROWS RX(RX_T(1, RD_KV, RD_HS))
#define K_ROW0 Q_ROWS
#define V_ROW0 RX(RX_T(1, RD_NH, RD_HS), RX_T(1, RD_KV, RD_HS))

static const remat_param_def llama_defs[LP_COUNT] = {
    [LP_WTE] = { "wte", D1(RD_VP), D1(RD_C), 0, 1, REMAT_INIT_NORMAL, 0, 1, HF1("model.embed_tokens.weight", 0) },
    [LP_LN1W] = { "ln1w", D1(RD_C), VEC, 1, 0, REMAT_INIT_ONES, 0, 0,
                  HF1("model.layers.%d.input_layernorm.weight", 0), .replicated = 1 },
    [LP_QKVW] = { "qkvw", RX(RX_T(1, RD_NH, RD_HS), RX_T(2, RD_KV, RD_HS)), D1(RD_C), 1, 1, REMAT_INIT_NORMAL, 0, 0,
                  3, { { "model.layers.%d.self_attn.q_proj.weight", RX_0, Q_ROWS, 0 },
                       { "model.layers.%d.self_attn.k_proj.weight", K_ROW0, KV_ROWS, 0 },
                       { "model.layers.%d.self_attn.v_proj.weight", V_ROW0, KV_ROWS, 0 } } },
    [LP_ATTPROJW] = { "attprojw", D1(RD_C), RX(RX_T(1, RD_NH, RD_HS)), 1, 1, REMAT_INIT_NORMAL, 0, 0,
                      HF1("model.layers.%d.self_attn.o_proj.weight", 0) },
    [LP_LN2W] = { "ln2w", D1(RD_C), VEC, 1, 0, REMAT_INIT_ONES, 0, 0,
                  HF1("model.layers.%d.post_attention_layernorm.weight", 0), .replicated = 1 },
    [LP_GATEUPW] = { "gateupw", DK(2, RD_F), D1(RD_C), 1, 1, REMAT_INIT_NORMAL, 0, 0,
                     2, { { "model.layers.%d.mlp.gate_proj.weight", RX_0, D1(RD_F), 0 },
                          { "model.layers.%d.mlp.up_proj.weight", D1(RD_F), D1(RD_F), 0 } } },
    [LP_FCPROJW] = { "fcprojw", D1(RD_C), D1(RD_F), 1, 1, REMAT_INIT_NORMAL, 0, 0,
                     HF1("model.layers.%d.mlp.down_proj.weight", 0) },
    [LP_LNFW] = { "lnfw", D1(RD_C), VEC, 0, 0, REMAT_INIT_ONES, 0, 0, HF1("model.norm.weight", 0), .stage = RP_LAST,
                  .replicated = 1 },
    [LP_LMHEADW] = { "lmheadw", D1(RD_VP), D1(RD_C), 0, 1, REMAT_INIT_NORMAL, 1, 1, HF1("lm_head.weight", 0),
                     .stage = RP_LAST },
};

/* the rotary embedding's cached inverse frequencies (older checkpoints) */
static const char *const llama_ignored[] = { "model.layers.%d.self_attn.rotary_emb.inv_freq", NULL };

const remat_param_table remat_params_llama = {
    .arch = REMAT_ARCH_LLAMA, .count = LP_COUNT, .defs = llama_defs, .wte = LP_WTE,
    .hf_prefix = NULL, .hf_ignored = llama_ignored,
};

const remat_param_table *remat_params_of(const remat_config *c)
{
    return c->arch == REMAT_ARCH_LLAMA ? &remat_params_llama : &remat_params_gpt2;
}

int remat_param_resolve(const remat_config *c, int p)
{
    const remat_param_table *pt = remat_params_of(c);
    return pt->defs[p].untied && remat_config_tied(c) ? pt->wte : p;
}

void remat_param_dims(const remat_config *c, int p, uint64_t *rows, uint64_t *cols)
{
    const remat_param_def *d = &remat_params_of(c)->defs[p];
    remat_dims dm;
    remat_dims_of(c, &dm);
    *rows = remat_expr_u64(&d->rows, &dm);
    *cols = remat_expr_empty(&d->cols) ? 0 : remat_expr_u64(&d->cols, &dm);
}

size_t remat_param_layout_of(const remat_config *c, remat_param_layout *out)
{
    const remat_param_table *pt = remat_params_of(c);
    memset(out, 0, sizeof *out);
    int L = c->n_layer;
    for (int i = 0; i < pt->count; i++) {
        const remat_param_def *d = &pt->defs[i];
        if (d->untied && remat_config_tied(c)) continue;
        uint64_t rows, cols;
        remat_param_dims(c, i, &rows, &cols);
        size_t slice = (size_t)rows * (cols ? (size_t)cols : 1);
        int *s = out->shape[i];
        if (d->per_layer) { s[0] = L; s[1] = (int)rows; s[2] = (int)cols; }
        else { s[0] = (int)rows; s[1] = (int)cols; }
        out->off[i] = out->total;
        out->player[i] = d->per_layer ? slice : 0;
        out->numel[i] = d->per_layer ? slice * (size_t)L : slice;
        out->total += out->numel[i];
        out->count = i + 1;
    }
    return out->total;
}

/* 1 when cfg's expert and multi-latent sizes are in the ranges
 * remat_layer_params multiplies without overflow (the config may not have
 * been checked yet) */
static int layer_sizes_ok(const remat_config *c)
{
    return c->n_experts >= 0 && c->n_experts <= 4096 && c->moe_ffn_dim >= 0 && c->moe_ffn_dim <= (1 << 20) &&
           c->moe_shared_dim >= 0 && c->moe_shared_dim <= (1 << 20) && c->q_lora_rank >= 0 &&
           c->q_lora_rank <= 65536 && c->kv_lora_rank >= 0 && c->kv_lora_rank <= 65536 && c->qk_nope_dim >= 0 &&
           c->qk_nope_dim <= 65536 && c->qk_rope_dim >= 0 && c->qk_rope_dim <= 65536 && c->v_head_dim >= 0 &&
           c->v_head_dim <= 65536 && c->n_embd >= 1 && c->n_embd <= 65536 && c->n_head >= 1 &&
           c->n_head <= c->n_embd && remat_config_ffn_dim(c) >= 0 && remat_config_ffn_dim(c) <= (1 << 24);
}

void remat_layer_params(const remat_config *c, int layer, uint64_t *split, uint64_t *whole, uint64_t *routed)
{
    const remat_param_table *pt = remat_params_of(c);
    uint64_t C = (uint64_t)c->n_embd;
    *split = *whole = *routed = 0;
    for (int i = 0; i < pt->count; i++) {
        const remat_param_def *d = &pt->defs[i];
        if (!d->per_layer) continue;
        uint64_t rows, cols;
        remat_param_dims(c, i, &rows, &cols);
        *(d->replicated ? whole : split) += rows * (cols ? cols : 1);
    }
    if (c->arch != REMAT_ARCH_LLAMA) return;
    if (c->kv_lora_rank > 0) {
        /* multi-latent attention for Llama's q, k, v and output projections
         * (multi_latent_attention.py:395-470): the down projections TELinear
         * in duplicated mode and the two norms whole on every rank, the up
         * projections and linear_proj split (Megatron's; transformers' the same
         * weights) */
        uint64_t qkv, o;
        remat_param_dims(c, LP_QKVW, &qkv, &o);
        *split -= qkv * o;
        remat_param_dims(c, LP_ATTPROJW, &qkv, &o);
        *split -= qkv * o;
        uint64_t NH = (uint64_t)c->n_head, Lq = (uint64_t)c->q_lora_rank, Lkv = (uint64_t)c->kv_lora_rank;
        uint64_t dn = (uint64_t)c->qk_nope_dim, dr = (uint64_t)c->qk_rope_dim, dv = (uint64_t)c->v_head_dim;
        *split += Lq * NH * (dn + dr) + Lkv * NH * (dn + dv) + NH * dv * C;
        *whole += C * Lq + C * (Lkv + dr) + Lq + Lkv;
    }
    if (c->n_experts > 0 && !remat_layer_dense(c, layer)) {
        /* a routed layer: the router and the experts for the dense MLP (remat_moe_layer_params) */
        uint64_t router, rt, shared;
        remat_moe_layer_params(c, &router, &rt, &shared);
        *split = *split - 3 * (uint64_t)remat_config_ffn_dim(c) * C + shared;
        *whole += router;
        *routed = rt;
    }
}

/* the parameter table's sizes, added with overflow checks (the config may
 * not have been checked yet: 0 on overflow); the layers' from
 * remat_layer_params, a dense prefix's and the routed layers' apart */
uint64_t remat_config_num_params(const remat_config *c)
{
    const remat_param_table *pt = remat_params_of(c);
    int ok = 1;
    uint64_t n = 0;
    for (int i = 0; i < pt->count; i++) {
        const remat_param_def *d = &pt->defs[i];
        if (d->per_layer || (d->untied && remat_config_tied(c))) continue;
        uint64_t rows, cols;
        remat_param_dims(c, i, &rows, &cols);
        n = remat_add(n, remat_mul(rows, cols ? cols : 1, &ok), &ok);
    }
    if (c->n_layer < 1 || !layer_sizes_ok(c)) return 0;
    uint64_t L = (uint64_t)c->n_layer, nd = c->moe_first_dense > 0 ? (uint64_t)c->moe_first_dense : 0;
    if (nd > L) nd = L;
    uint64_t s, w, r;
    if (nd) {
        remat_layer_params(c, 0, &s, &w, &r);
        n = remat_add(n, remat_mul(remat_add(remat_add(s, w, &ok), r, &ok), nd, &ok), &ok);
    }
    if (nd < L) {
        remat_layer_params(c, c->n_layer - 1, &s, &w, &r);
        n = remat_add(n, remat_mul(remat_add(remat_add(s, w, &ok), r, &ok), L - nd, &ok), &ok);
    }
    return ok ? n : 0;
}

double remat_update_flops(const remat_config *c)
{
    /* framework tables: the optimizer is priced per iteration by the cluster
     * model, not per micro-batch */
    return c->framework == REMAT_FRAMEWORK_REMAT ? 12.0 * (double)remat_config_num_params(c) : 0;
}
