/*
 * config.c -- model/run configuration: names, defaults and derived sizes
 * (the bottom of src/table/: it asks no table; the check of a config, which
 * does, is public.c's).
 */
#include <math.h>
#include <string.h>
#include "tensors.h"
#include "params.h"
#include "../core/core.h"

static const char *const arch_names[] = { [REMAT_ARCH_GPT2] = "gpt2", [REMAT_ARCH_LLAMA] = "llama" };
#define NARCH ((int)(sizeof arch_names / sizeof arch_names[0]))

const char *remat_arch_name(remat_arch a) { return (int)a >= 0 && (int)a < NARCH ? arch_names[a] : "?"; }

remat_status remat_arch_parse(const char *name, remat_arch *out)
{
    for (int i = 0; name && i < NARCH; i++)
        if (!strcmp(name, arch_names[i])) { *out = (remat_arch)i; return REMAT_OK; }
    return remat_fail(REMAT_ERR_INVALID, "unknown architecture '%.64s' (known: gpt2, llama)", name ? name : "");
}

int remat_config_kv_heads(const remat_config *c) { return c->n_kv_head > 0 ? c->n_kv_head : c->n_head; }
int remat_config_head_dim(const remat_config *c)
{
    return c->head_dim > 0 ? c->head_dim : c->n_head > 0 ? c->n_embd / c->n_head : 0;
}
/* Llama's default MLP width: Meta's rule, 2/3 of 4C rounded up to 256 */
int remat_config_ffn_dim(const remat_config *c)
{
    if (c->ffn_dim > 0) return c->ffn_dim;
    if (c->arch == REMAT_ARCH_LLAMA) return (int)((((int64_t)8 * c->n_embd / 3) + 255) / 256 * 256);
    return 4 * c->n_embd;
}
double remat_config_rope_theta(const remat_config *c) { return c->rope_theta > 0 ? c->rope_theta : 10000.0; }
double remat_config_norm_eps(const remat_config *c)
{
    return c->norm_eps > 0 ? c->norm_eps : c->arch == REMAT_ARCH_LLAMA ? 1e-6 : 1e-5;
}
int remat_config_tied(const remat_config *c) { return c->arch != REMAT_ARCH_LLAMA || c->tie_embeddings; }

void remat_config_default(remat_config *c)
{
    memset(c, 0, sizeof *c);
    c->n_layer = 4;
    c->n_embd = 128;
    c->n_head = 4;
    c->vocab = 256;
    c->max_seq = 64;
    c->batch = 16;
    c->seq = 64;
    c->dropout = 0.0f;
    c->tp = 1;
}

int remat_config_tp(const remat_config *c) { return c->tp > 1 ? c->tp : 1; }
int remat_config_cp(const remat_config *c) { return c->cp > 1 ? c->cp : 1; }
int remat_config_etp(const remat_config *c) { return c->etp > 0 ? c->etp : remat_config_tp(c); }

double remat_config_moe_rank_load(const remat_config *c)
{
    if (c->n_experts <= 0) return 1.0;
    double ep = c->ep > 1 ? c->ep : 1;
    double f = c->moe_capacity > 0 ? c->moe_capacity : c->moe_load > 0 ? c->moe_load : REMAT_MOE_LOAD_DEFAULT;
    return f < ep ? f : ep;
}

int remat_config_padded_vocab(const remat_config *c)
{
    int m = c->framework == REMAT_FRAMEWORK_MEGATRON ? 128 * remat_config_tp(c)
          : c->framework == REMAT_FRAMEWORK_PYTORCH ? 1 : 64;
    return (int)(((int64_t)c->vocab + m - 1) / m * m);
}

static int same_scaling(const remat_rope_scaling *a, const remat_rope_scaling *b)
{
    return a->type == b->type && (a->type == REMAT_ROPE_DEFAULT ||
           (a->factor == b->factor && a->low_freq_factor == b->low_freq_factor &&
            a->high_freq_factor == b->high_freq_factor && a->original_max_position == b->original_max_position));
}

int remat_config_same(const remat_config *a, const remat_config *b)
{
    return a->n_layer == b->n_layer && a->n_embd == b->n_embd && a->n_head == b->n_head && a->vocab == b->vocab &&
           a->max_seq == b->max_seq && a->batch == b->batch && a->seq == b->seq && a->dropout == b->dropout &&
           a->attention == b->attention && a->lmhead_chunk == b->lmhead_chunk && a->dtype == b->dtype &&
           a->framework == b->framework && remat_config_tp(a) == remat_config_tp(b) && a->sp == b->sp &&
           a->stage == b->stage && a->arch == b->arch && remat_config_kv_heads(a) == remat_config_kv_heads(b) &&
           remat_config_ffn_dim(a) == remat_config_ffn_dim(b) && remat_config_head_dim(a) == remat_config_head_dim(b) &&
           remat_config_rope_theta(a) == remat_config_rope_theta(b) && remat_config_norm_eps(a) == remat_config_norm_eps(b) &&
           remat_config_tied(a) == remat_config_tied(b) && same_scaling(&a->rope_scaling, &b->rope_scaling) &&
           a->table == b->table && remat_config_cp(a) == remat_config_cp(b) && a->n_experts == b->n_experts &&
           a->moe_topk == b->moe_topk && a->moe_ffn_dim == b->moe_ffn_dim && a->moe_shared_dim == b->moe_shared_dim &&
           (a->ep > 1 ? a->ep : 1) == (b->ep > 1 ? b->ep : 1) && remat_config_etp(a) == remat_config_etp(b) &&
           remat_config_moe_rank_load(a) == remat_config_moe_rank_load(b) && a->qk_norm == b->qk_norm &&
           a->q_lora_rank == b->q_lora_rank && a->kv_lora_rank == b->kv_lora_rank && a->qk_nope_dim == b->qk_nope_dim &&
           a->qk_rope_dim == b->qk_rope_dim && a->v_head_dim == b->v_head_dim &&
           a->moe_first_dense == b->moe_first_dense && a->moe_groups == b->moe_groups &&
           a->moe_group_topk == b->moe_group_topk && a->moe_scaling == b->moe_scaling;
}
