/*
 * public.c -- a config's check and the tables' public face.
 *
 * remat_config_check lives here, above config.c, tensors.c and params.c,
 * because it asks the tables (whether the table models context
 * parallelism, the parameter count); the queries of the activation and
 * parameter tables that callers reach through remat.h check the config
 * first, so they are here too.  Below this file, config.c gives a config's
 * defaults and derived sizes, tensors.c and params.c the tables and what
 * their formulas evaluate to; none of them calls up.
 */
#include <math.h>
#include <string.h>
#include "tensors.h"
#include "params.h"
#include "../core/core.h"

/* The limits are remat.h's (REMAT_MAX_LAYERS ...); rows of batch*seq are
 * capped so that rows*cols stays in 31 bits for int-indexed kernels. */
#define MAX_ROWS ((uint64_t)1 << 30)

/* The architecture's fields: GPT-2 has one value for each (its table's
 * shapes are written for it); Llama takes them all. */
static remat_status check_arch(const remat_config *c)
{
    if (c->arch != REMAT_ARCH_GPT2 && c->arch != REMAT_ARCH_LLAMA)
        return remat_fail(REMAT_ERR_INVALID, "arch must be gpt2 (0) or llama (1), got %d", (int)c->arch);
    if (c->n_kv_head < 0 || c->ffn_dim < 0 || c->head_dim < 0 || c->tie_embeddings < 0 || c->tie_embeddings > 1)
        return remat_fail(REMAT_ERR_INVALID, "kv heads, ffn dim and head dim must be >= 0 (0: the architecture's "
                          "default), tie_embeddings 0 or 1");
    if (!(c->rope_theta >= 0 && c->rope_theta <= 1e12) || !(c->norm_eps >= 0 && c->norm_eps < 1))
        return remat_fail(REMAT_ERR_INVALID, "rope theta must be in (0, 1e12] and the norm epsilon in (0, 1) (0: the "
                          "architecture's default)");
    if (c->arch == REMAT_ARCH_GPT2) {
        if (c->n_embd % c->n_head)
            return remat_fail(REMAT_ERR_INVALID, "dim %d is not divisible by heads %d; pick heads that divide dim",
                              c->n_embd, c->n_head);
        if ((c->n_kv_head && c->n_kv_head != c->n_head) || (c->ffn_dim && c->ffn_dim != 4 * c->n_embd) ||
            (c->head_dim && c->head_dim != c->n_embd / c->n_head))
            return remat_fail(REMAT_ERR_INVALID, "gpt2 has kv heads = heads, ffn dim = 4 dim and head dim = dim/heads; "
                              "--kv-heads, --ffn-dim and --head-dim are for --arch llama");
        if (c->rope_theta || c->rope_scaling.type || (c->norm_eps && c->norm_eps != 1e-5))
            return remat_fail(REMAT_ERR_INVALID, "gpt2 has no rotary embedding and LayerNorm's eps 1e-5; --rope-theta, "
                              "rope scaling and --norm-eps are for --arch llama");
        return REMAT_OK;
    }
    int KV = remat_config_kv_heads(c), hs = remat_config_head_dim(c), F = remat_config_ffn_dim(c);
    if (KV < 1 || KV > c->n_head || c->n_head % KV)
        return remat_fail(REMAT_ERR_INVALID, "heads %d are not divisible by kv heads %d; each key/value head serves "
                          "heads/kv-heads query heads", c->n_head, KV);
    if (!c->head_dim && c->n_embd % c->n_head)
        return remat_fail(REMAT_ERR_INVALID, "dim %d is not divisible by heads %d; pick heads that divide dim, or set "
                          "the head dim", c->n_embd, c->n_head);
    if (hs < 2 || hs > 65536 || hs % 2)
        return remat_fail(REMAT_ERR_INVALID, "head dim must be even (RoPE rotates pairs) and in [2, 65536], got %d", hs);
    if (F < 1 || F > 1 << 20) return remat_fail(REMAT_ERR_INVALID, "ffn dim must be in [1, 1048576], got %d", F);
    const remat_rope_scaling *r = &c->rope_scaling;
    if (r->type == REMAT_ROPE_LLAMA3) {
        if (!(r->factor >= 1 && r->factor <= 1e6) || !(r->low_freq_factor > 0 && r->low_freq_factor <= 1e6) ||
            !(r->high_freq_factor > r->low_freq_factor && r->high_freq_factor <= 1e6) ||
            r->original_max_position < 1 || r->original_max_position > 1 << 24)
            return remat_fail(REMAT_ERR_INVALID, "llama3 rope scaling needs factor >= 1, 0 < low_freq_factor < "
                              "high_freq_factor, original_max_position_embeddings >= 1");
    } else if (r->type != REMAT_ROPE_DEFAULT) {
        return remat_fail(REMAT_ERR_INVALID, "rope scaling type must be default (0) or llama3 (1), got %d", (int)r->type);
    }
    return REMAT_OK;
}

/* What a framework table can shard: Megatron splits the query heads, the
 * key/value heads (query groups) and the MLP width over the T GPUs
 * (megatron/core/transformer/attention.py replicates key/value heads when
 * T exceeds them, which the tables do not model). */
static remat_status check_framework(const remat_config *c)
{
    if (c->framework == REMAT_FRAMEWORK_REMAT) return REMAT_OK;
    if (c->arch == REMAT_ARCH_GPT2) {
        if (c->attention == REMAT_ATTENTION_FLASH)
            return remat_fail(REMAT_ERR_INVALID, "the gpt2 framework tables are Korthikanti et al.'s (unfused "
                              "attention); --attention flash is for --arch llama");
        return REMAT_OK;
    }
    int T = remat_config_tp(c), KV = remat_config_kv_heads(c), F = remat_config_ffn_dim(c);
    if (KV % T)
        return remat_fail(REMAT_ERR_INVALID, "kv heads %d are not divisible by the tensor-parallel size %d; each GPU "
                          "holds whole key/value heads (Megatron replicates them past --tp %d, which remat does not "
                          "model)", KV, T, KV);
    if (F % T)
        return remat_fail(REMAT_ERR_INVALID, "ffn dim %d is not divisible by the tensor-parallel size %d", F, T);
    return REMAT_OK;
}

/* Mixture of experts (frameworks_moe.c): Llama's architecture on a framework
 * table, the sizes Megatron's validation asks for (megatron/training/
 * arguments.py: topk <= experts, experts divisible by EP; MoE with tensor
 * parallelism needs sequence parallelism, moe_layer.py's forward), the
 * expert width divisible by ETP. */
static remat_status check_moe(const remat_config *c)
{
    if (c->n_experts < 0 || c->moe_topk < 0 || c->moe_ffn_dim < 0 || c->moe_shared_dim < 0 || c->ep < 0 ||
        c->etp < 0 || !(c->moe_load >= 0) || !(c->moe_capacity >= 0) || !isfinite(c->moe_load) ||
        !isfinite(c->moe_capacity))
        return remat_fail(REMAT_ERR_INVALID, "mixture-of-experts sizes must be >= 0");
    if (c->qk_norm != 0 && c->qk_norm != 1) return remat_fail(REMAT_ERR_INVALID, "qk_norm must be 0 or 1");
    if (!c->n_experts) {
        if (c->qk_norm)
            return remat_fail(REMAT_ERR_INVALID, "--qk-norm is modelled in the mixture-of-experts tables (Qwen3): "
                              "add --num-experts");
        if (c->moe_topk || c->moe_ffn_dim || c->moe_shared_dim || c->ep > 1 || c->etp > 0 || c->moe_load ||
            c->moe_capacity)
            return remat_fail(REMAT_ERR_INVALID, "expert settings (topk, widths, --ep, --etp, --moe-load, "
                              "--capacity-factor) need --num-experts");
        return REMAT_OK;
    }
    if (c->arch != REMAT_ARCH_LLAMA || (c->framework != REMAT_FRAMEWORK_MEGATRON && c->framework != REMAT_FRAMEWORK_PYTORCH))
        return remat_fail(REMAT_ERR_INVALID, "mixture of experts is planned for the Llama architecture on "
                          "--framework megatron or pytorch");
    if (c->n_experts > 4096 || c->moe_topk < 1 || c->moe_topk > c->n_experts)
        return remat_fail(REMAT_ERR_INVALID, "experts must be in [1, 4096] and topk in [1, experts]: got %d and %d",
                          c->n_experts, c->moe_topk);
    if (c->moe_ffn_dim < 1 || c->moe_ffn_dim > (1 << 20) || c->moe_shared_dim > (1 << 20))
        return remat_fail(REMAT_ERR_INVALID, "the expert width must be in [1, 1048576] (and the shared one below)");
    int EP = c->ep > 1 ? c->ep : 1, ETP = remat_config_etp(c);
    if (c->n_experts % EP)
        return remat_fail(REMAT_ERR_INVALID, "experts %d are not divisible by --ep %d", c->n_experts, EP);
    if (ETP > REMAT_MAX_TP || c->moe_ffn_dim % ETP)
        return remat_fail(REMAT_ERR_INVALID, "the expert width %d is not divisible by --etp %d", c->moe_ffn_dim, ETP);
    if (c->moe_load && c->moe_load < 1)
        return remat_fail(REMAT_ERR_INVALID, "--moe-load is the busiest expert's tokens over the balanced share: "
                          ">= 1, got %g", c->moe_load);
    if (c->moe_capacity > c->n_experts)
        return remat_fail(REMAT_ERR_INVALID, "a capacity factor above the experts %d bounds nothing", c->n_experts);
    if (remat_config_tp(c) > 1 && !c->sp)
        return remat_fail(REMAT_ERR_INVALID, "Megatron refuses mixture of experts with tensor parallelism but no "
                          "sequence parallelism in training (moe_layer.py); add --sp");
    if (c->framework == REMAT_FRAMEWORK_PYTORCH && (EP > 1 || remat_config_tp(c) > 1))
        return remat_fail(REMAT_ERR_INVALID, "the pytorch MoE tables are one GPU's eager loop over its experts: "
                          "no --tp or --ep");
    if (remat_config_cp(c) > 1)
        return remat_fail(REMAT_ERR_INVALID, "context parallelism is not modelled with mixture of experts");
    if (c->framework == REMAT_FRAMEWORK_MEGATRON && c->attention != REMAT_ATTENTION_FLASH)
        return remat_fail(REMAT_ERR_INVALID, "Megatron's mixture-of-experts table is TE's fused attention's: --attention flash");
    if (c->framework == REMAT_FRAMEWORK_PYTORCH && c->attention != REMAT_ATTENTION_NAIVE)
        return remat_fail(REMAT_ERR_INVALID, "the pytorch mixture-of-experts table is eager attention's: --attention naive");
    return REMAT_OK;
}


/* Multi-latent attention and the dense prefix (frameworks_mla.c: DeepSeek-V3's
 * layers).  Megatron's MLATransformerConfig takes the five dimensions
 * (transformer/transformer_config.py:2016-2034 in megatron-core 0.16.1); the
 * tables model q compressed (q_lora_rank > 0, DeepSeek-V3's), experts after
 * the dense layers, and no dropout (no masks are in them).  Group-limited
 * routing: experts divisible by the groups, group_topk <= groups
 * (transformer_config.py:1643-1661). */
#define MLA_MAX_DIM 65536
static remat_status check_mla(const remat_config *c)
{
    if (c->q_lora_rank < 0 || c->kv_lora_rank < 0 || c->qk_nope_dim < 0 || c->qk_rope_dim < 0 || c->v_head_dim < 0 ||
        c->moe_first_dense < 0 || c->moe_groups < 0 || c->moe_group_topk < 0 || !(c->moe_scaling >= 0) ||
        !isfinite(c->moe_scaling))
        return remat_fail(REMAT_ERR_INVALID, "multi-latent attention and routing sizes must be >= 0");
    if (c->moe_groups || c->moe_group_topk || c->moe_scaling) {
        if (!c->n_experts)
            return remat_fail(REMAT_ERR_INVALID, "--moe-groups, --moe-group-topk and --moe-scaling need --num-experts");
        if (!c->moe_groups != !c->moe_group_topk)
            return remat_fail(REMAT_ERR_INVALID, "group-limited routing needs both --moe-groups and --moe-group-topk");
        if (c->moe_groups && (c->n_experts % c->moe_groups || c->moe_group_topk > c->moe_groups))
            return remat_fail(REMAT_ERR_INVALID, "experts %d must be divisible by --moe-groups %d, and --moe-group-topk "
                              "%d at most the groups", c->n_experts, c->moe_groups, c->moe_group_topk);
        if (c->moe_scaling > 1e6)
            return remat_fail(REMAT_ERR_INVALID, "--moe-scaling %g is out of range", c->moe_scaling);
    }
    if (!c->kv_lora_rank) {
        if (c->q_lora_rank || c->qk_nope_dim || c->qk_rope_dim || c->v_head_dim)
            return remat_fail(REMAT_ERR_INVALID, "multi-latent attention's dimensions need --kv-lora-rank");
        if (c->moe_first_dense)
            return remat_fail(REMAT_ERR_INVALID, "dense first layers (--moe-first-dense) are modelled for DeepSeek-V3's "
                              "tables: add multi-latent attention (--kv-lora-rank ...)");
        return REMAT_OK;
    }
    if (c->arch != REMAT_ARCH_LLAMA || (c->framework != REMAT_FRAMEWORK_MEGATRON && c->framework != REMAT_FRAMEWORK_PYTORCH))
        return remat_fail(REMAT_ERR_INVALID, "multi-latent attention is planned for the Llama architecture on "
                          "--framework megatron or pytorch");
    if (c->q_lora_rank < 1 || c->qk_nope_dim < 1 || c->qk_rope_dim < 1 || c->v_head_dim < 1 ||
        c->q_lora_rank > MLA_MAX_DIM || c->kv_lora_rank > MLA_MAX_DIM || c->qk_nope_dim > MLA_MAX_DIM ||
        c->qk_rope_dim > MLA_MAX_DIM || c->v_head_dim > MLA_MAX_DIM || c->qk_rope_dim % 2)
        return remat_fail(REMAT_ERR_INVALID, "multi-latent attention needs --q-lora-rank, --qk-nope-dim, --qk-rope-dim "
                          "(even) and --v-head-dim in [1, %d] (q without compression, q_lora_rank 0, is not "
                          "modelled)", MLA_MAX_DIM);
    if (!c->n_experts)
        return remat_fail(REMAT_ERR_INVALID, "the multi-latent attention tables are DeepSeek-V3's layers: add "
                          "--num-experts (with --moe-first-dense for dense first layers)");
    if (c->qk_norm)
        return remat_fail(REMAT_ERR_INVALID, "--qk-norm is Qwen3's; multi-latent attention has its own norms");
    if (c->n_kv_head && c->n_kv_head != c->n_head)
        return remat_fail(REMAT_ERR_INVALID, "multi-latent attention has no key/value groups (--kv-heads %d)", c->n_kv_head);
    if (c->dropout != 0.0f)
        return remat_fail(REMAT_ERR_INVALID, "the multi-latent attention tables model no dropout (DeepSeek-V3 trains "
                          "without): --dropout 0");
    if (c->framework == REMAT_FRAMEWORK_MEGATRON && c->attention != REMAT_ATTENTION_FLASH)
        return remat_fail(REMAT_ERR_INVALID, "Megatron's multi-latent attention table is TE's fused attention's: "
                          "--attention flash");
    if (c->framework == REMAT_FRAMEWORK_PYTORCH && c->attention != REMAT_ATTENTION_NAIVE)
        return remat_fail(REMAT_ERR_INVALID, "the pytorch multi-latent attention table is eager attention's: "
                          "--attention naive");
    return REMAT_OK;
}


/* Context parallelism, where a table models it (remat_table.cp: Megatron-core
 * under Transformer Engine with its fused attention, whose ring exchange
 * AttnFuncWithCPAndKVP2P is; TE's UnfusedDotProductAttention has none,
 * dot_product_attention/utils.py).  Megatron splits the sequence into 2 cp
 * chunks, two per GPU (the load-balanced causal split): it asserts seq %
 * (2 cp) == 0 (megatron/training/arguments.py). */
static remat_status check_cp(const remat_config *c)
{
    if (c->cp < 0 || c->cp > REMAT_MAX_CP)
        return remat_fail(REMAT_ERR_INVALID, "context-parallel size must be in [1, %d], got %d", REMAT_MAX_CP, c->cp);
    int CP = remat_config_cp(c);
    if (CP == 1) return REMAT_OK;
    const remat_table *tb = remat_table_of(c);
    if (c->framework == REMAT_FRAMEWORK_REMAT || c->framework == REMAT_FRAMEWORK_TABLE)
        return remat_fail(REMAT_ERR_INVALID, "context parallelism is for planning --framework megatron runs; %s",
                          c->framework == REMAT_FRAMEWORK_REMAT ? "remat's own engine runs on one machine"
                          : "a table read from a file is one device's chain");
    if (!tb || !tb->cp)
        return remat_fail(REMAT_ERR_INVALID, "context parallelism (--cp %d) is modelled for Llama on Megatron-LM with "
                          "flash attention (Transformer Engine's ring attention, AttnFuncWithCPAndKVP2P): %s", CP,
                          c->framework == REMAT_FRAMEWORK_PYTORCH ? "not for --framework pytorch"
                          : c->arch == REMAT_ARCH_LLAMA ? "TE's unfused attention has none (use --attention flash)"
                          : "not for the gpt2 table (Korthikanti's unfused attention); use --arch llama");
    if (c->seq % (2 * CP))
        return remat_fail(REMAT_ERR_INVALID, "context parallelism gives each of the %d GPUs two chunks of the "
                          "sequence (Megatron's load-balanced causal split): seq %d is not divisible by 2 x cp = %d",
                          CP, c->seq, 2 * CP);
    return REMAT_OK;
}

remat_status remat_config_check(const remat_config *c)
{
    remat_status st;
    if (!c) return remat_fail(REMAT_ERR_INVALID, "config is NULL");
    if (c->n_layer < 1 || c->n_layer > REMAT_MAX_LAYERS)
        return remat_fail(REMAT_ERR_INVALID, "layers must be in [1, %d], got %d", REMAT_MAX_LAYERS, c->n_layer);
    if (c->n_embd < 1 || c->n_embd > REMAT_MAX_EMBD)
        return remat_fail(REMAT_ERR_INVALID, "dim must be in [1, %d], got %d", REMAT_MAX_EMBD, c->n_embd);
    if (c->n_head < 1 || c->n_head > c->n_embd) return remat_fail(REMAT_ERR_INVALID, "heads must be in [1, dim=%d], got %d", c->n_embd, c->n_head);
    if ((st = check_arch(c))) return st;
    if (c->vocab < REMAT_MIN_VOCAB || c->vocab > REMAT_MAX_VOCAB)
        return remat_fail(REMAT_ERR_INVALID, "vocab must be in [%d, %d], got %d", REMAT_MIN_VOCAB, REMAT_MAX_VOCAB, c->vocab);
    if (c->seq < 1 || c->seq > REMAT_MAX_SEQ)
        return remat_fail(REMAT_ERR_INVALID, "seq must be in [1, %d], got %d", REMAT_MAX_SEQ, c->seq);
    if (c->max_seq < c->seq || c->max_seq > REMAT_MAX_SEQ)
        return remat_fail(REMAT_ERR_INVALID, "max_seq must be in [seq=%d, %d], got %d", c->seq, REMAT_MAX_SEQ, c->max_seq);
    if (c->batch < 1 || c->batch > REMAT_MAX_BATCH)
        return remat_fail(REMAT_ERR_INVALID, "batch must be in [1, %d], got %d", REMAT_MAX_BATCH, c->batch);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f)) return remat_fail(REMAT_ERR_INVALID, "dropout must be in [0, 1), got %g", (double)c->dropout);
    if (c->attention != REMAT_ATTENTION_NAIVE && c->attention != REMAT_ATTENTION_FLASH)
        return remat_fail(REMAT_ERR_INVALID, "attention must be naive or flash");
    if (c->lmhead_chunk < 0) return remat_fail(REMAT_ERR_INVALID, "lm-head chunk rows must be >= 0, got %d", c->lmhead_chunk);
    if (c->dtype != REMAT_DTYPE_FP32 && c->dtype != REMAT_DTYPE_BF16)
        return remat_fail(REMAT_ERR_INVALID, "dtype must be fp32 or bf16, got %d", (int)c->dtype);
    if (c->framework != REMAT_FRAMEWORK_REMAT && c->framework != REMAT_FRAMEWORK_MEGATRON &&
        c->framework != REMAT_FRAMEWORK_PYTORCH && c->framework != REMAT_FRAMEWORK_TABLE)
        return remat_fail(REMAT_ERR_INVALID, "framework must be remat, megatron, pytorch or table, got %d", (int)c->framework);
    if (c->framework == REMAT_FRAMEWORK_TABLE ? !remat_table_custom(c->table) : c->table != 0)
        return remat_fail(REMAT_ERR_INVALID, c->framework == REMAT_FRAMEWORK_TABLE
                          ? "no table %d is loaded (remat_table_load gives the id; remat_table_unload ends it)"
                          : "table %d is set, but the framework is not table", c->table);
    if (c->tp < 0 || c->tp > REMAT_MAX_TP)
        return remat_fail(REMAT_ERR_INVALID, "tensor-parallel size must be in [1, %d], got %d", REMAT_MAX_TP, c->tp);
    int T = remat_config_tp(c);
    if (c->sp != 0 && c->sp != 1) return remat_fail(REMAT_ERR_INVALID, "sp must be 0 or 1, got %d", c->sp);
    if (c->stage != REMAT_STAGE_WHOLE && c->stage != REMAT_STAGE_FIRST)
        return remat_fail(REMAT_ERR_INVALID, "stage must be whole (0) or first (1), got %d", c->stage);
    if (c->framework == REMAT_FRAMEWORK_REMAT && (T != 1 || c->sp || c->stage))
        return remat_fail(REMAT_ERR_INVALID, "tensor, sequence and pipeline parallelism are for planning "
                          "--framework megatron or pytorch; remat's own engine runs on one machine (tp 1)");
    if (c->framework == REMAT_FRAMEWORK_TABLE && (T != 1 || c->sp || c->stage))
        return remat_fail(REMAT_ERR_INVALID, "a table read from a file is one device's chain: no tensor, sequence "
                          "or pipeline parallelism");
    if (c->n_head % T)
        return remat_fail(REMAT_ERR_INVALID, "heads %d are not divisible by the tensor-parallel size %d; "
                          "each of the %d GPUs holds whole heads", c->n_head, T, T);
    if ((st = check_moe(c))) return st;
    if ((st = check_mla(c))) return st;
    if ((st = check_framework(c))) return st;
    if ((st = check_cp(c))) return st;
    int CP = remat_config_cp(c);
    if (c->sp && (c->seq / CP) % T)
        return remat_fail(REMAT_ERR_INVALID, CP > 1 ? "sequence parallelism splits each GPU's seq/cp = %d across %d "
                          "GPUs; pick a seq divisible by 2 x cp x the tensor-parallel size"
                          : "sequence parallelism splits seq %d across %d GPUs; pick a seq divisible by the "
                          "tensor-parallel size", c->seq / CP, T);
    /* every derived size must fit: rows*cols in 31 bits for int-indexed
     * kernels (cblas takes int), bytes in 63 bits */
    int ok = 1;
    uint64_t N = remat_mul((uint64_t)c->batch, (uint64_t)c->seq, &ok);
    uint64_t Vp = (uint64_t)remat_config_padded_vocab(c), C = (uint64_t)c->n_embd;
    uint64_t hs = (uint64_t)remat_config_head_dim(c), KV = (uint64_t)remat_config_kv_heads(c);
    uint64_t F = (uint64_t)remat_config_ffn_dim(c), NH = (uint64_t)c->n_head;
    uint64_t att = remat_mul(remat_mul(remat_mul((uint64_t)c->batch, NH, &ok), (uint64_t)c->seq, &ok), (uint64_t)c->seq, &ok);
    /* a framework table is planned, never run: what must stay small is one
     * GPU's (B, NH/T, T/CP, T) share, the formula's product staying in 64
     * bits (2^40 x T x CP elements) */
    if (c->framework == REMAT_FRAMEWORK_MEGATRON || c->framework == REMAT_FRAMEWORK_PYTORCH)
        att /= (uint64_t)T * (uint64_t)remat_config_cp(c);
    uint64_t logits = remat_mul(N, Vp, &ok);
    uint64_t wide = 4 * C > 2 * F ? 4 * C : 2 * F;                  /* the widest activation row */
    uint64_t qkv = remat_mul(NH + 2 * KV, hs, &ok);
    if (qkv > wide) wide = qkv;
    if (c->kv_lora_rank > 0) {      /* query, key and value of multi-latent attention */
        uint64_t mla = remat_mul(NH, 2 * ((uint64_t)c->qk_nope_dim + (uint64_t)c->qk_rope_dim) + (uint64_t)c->v_head_dim, &ok);
        if (mla > wide) wide = mla;
    }
    uint64_t fc = remat_mul(N, wide, &ok);
    if (!ok || N > MAX_ROWS || att > (1ULL << 40) || logits > (1ULL << 40) || fc > (1ULL << 40) ||
        wide > (1ULL << 24))
        return remat_fail(REMAT_ERR_RANGE, "sizes overflow: batch*seq=%llu rows is too large for this model; reduce batch or seq",
                          (unsigned long long)N);
    uint64_t params = remat_config_num_params(c);
    if (params == 0 || params > (1ULL << 40))
        return remat_fail(REMAT_ERR_RANGE, "model too large: %llu parameters; reduce layers or dim", (unsigned long long)params);
    return REMAT_OK;
}

int remat_config_tensor_count(const remat_config *cfg)
{
    const remat_table *tb = cfg ? remat_table_of(cfg) : NULL;
    return tb ? tb->count : 0;
}
int remat_config_tensor_find(const remat_config *cfg, const char *name)
{
    const remat_table *tb = cfg ? remat_table_of(cfg) : NULL;
    return tb ? remat_table_find(tb, name) : -1;
}

remat_status remat_tensor_get(const remat_config *cfg, int id, remat_tensor_info *out)
{
    remat_status st = remat_config_check(cfg);
    if (st) return st;
    const remat_table *tb = remat_table_of(cfg);
    if (!out || id < 0 || id >= tb->count) return remat_fail(REMAT_ERR_INVALID, "tensor id %d out of range", id);
    const remat_tensor_def *d = &tb->defs[id];
    out->name = d->name;
    out->shape = remat_tensor_shape_text(cfg, id);
    out->op = remat_tensor_op_text(cfg, id);
    out->per_layer = d->cls == RT_CLASS_BLOCK;
    out->is_grad = d->cls == RT_CLASS_GRAD;
    out->bytes = remat_tensor_bytes(cfg, id);
    out->transient = (d->flags & RT_F_TRANSIENT) != 0;
    return REMAT_OK;
}

/* ---- the parameter table --------------------------------------------------- */

int remat_config_param_count(const remat_config *c)
{
    if (!c || remat_config_check(c)) return 0;
    remat_param_layout ly;
    remat_param_layout_of(c, &ly);
    return ly.count;
}

remat_status remat_config_param_get(const remat_config *c, int i, remat_param_info *out)
{
    remat_status st;
    if (!c || !out) return remat_fail(REMAT_ERR_INVALID, "remat_config_param_get: NULL argument");
    if ((st = remat_config_check(c))) return st;
    remat_param_layout ly;
    remat_param_layout_of(c, &ly);
    if (i < 0 || i >= ly.count) return remat_fail(REMAT_ERR_INVALID, "parameter tensor %d out of range [0, %d)", i, ly.count);
    const remat_param_def *d = &remat_params_of(c)->defs[i];
    out->name = d->name;
    out->offset = ly.off[i];
    out->numel = ly.numel[i];
    memcpy(out->shape, ly.shape[i], sizeof out->shape);
    out->per_layer = d->per_layer;
    out->decay = d->decay;
    return REMAT_OK;
}

int remat_config_param_find(const remat_config *c, const char *name)
{
    if (!c || !name) return -1;
    int n = remat_config_param_count(c);
    const remat_param_table *pt = remat_params_of(c);
    for (int i = 0; i < n; i++)
        if (!strcmp(pt->defs[i].name, name)) return i;
    return -1;
}
