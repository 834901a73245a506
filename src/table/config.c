/*
 * config.c -- model/run configuration: defaults, validation, derived sizes,
 * and the public face of the activation table.
 */
#include <string.h>
#include "tensors.h"
#include "../core/core.h"

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

int remat_config_padded_vocab(const remat_config *c)
{
    int m = c->framework == REMAT_FRAMEWORK_MEGATRON ? 128 * remat_config_tp(c)
          : c->framework == REMAT_FRAMEWORK_PYTORCH ? 1 : 64;
    return (int)(((int64_t)c->vocab + m - 1) / m * m);
}

int remat_config_same(const remat_config *a, const remat_config *b)
{
    return a->n_layer == b->n_layer && a->n_embd == b->n_embd && a->n_head == b->n_head && a->vocab == b->vocab &&
           a->max_seq == b->max_seq && a->batch == b->batch && a->seq == b->seq && a->dropout == b->dropout &&
           a->attention == b->attention && a->lmhead_chunk == b->lmhead_chunk && a->dtype == b->dtype &&
           a->framework == b->framework && remat_config_tp(a) == remat_config_tp(b) && a->sp == b->sp &&
           a->stage == b->stage;
}

/* The limits are remat.h's (REMAT_MAX_LAYERS ...); rows of batch*seq are
 * capped so that rows*cols stays in 31 bits for int-indexed kernels. */
#define MAX_ROWS ((uint64_t)1 << 30)

remat_status remat_config_check(const remat_config *c)
{
    if (!c) return remat_fail(REMAT_ERR_INVALID, "config is NULL");
    if (c->n_layer < 1 || c->n_layer > REMAT_MAX_LAYERS)
        return remat_fail(REMAT_ERR_INVALID, "layers must be in [1, %d], got %d", REMAT_MAX_LAYERS, c->n_layer);
    if (c->n_embd < 1 || c->n_embd > REMAT_MAX_EMBD)
        return remat_fail(REMAT_ERR_INVALID, "dim must be in [1, %d], got %d", REMAT_MAX_EMBD, c->n_embd);
    if (c->n_head < 1 || c->n_head > c->n_embd) return remat_fail(REMAT_ERR_INVALID, "heads must be in [1, dim=%d], got %d", c->n_embd, c->n_head);
    if (c->n_embd % c->n_head) return remat_fail(REMAT_ERR_INVALID, "dim %d is not divisible by heads %d; pick heads that divide dim", c->n_embd, c->n_head);
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
        c->framework != REMAT_FRAMEWORK_PYTORCH)
        return remat_fail(REMAT_ERR_INVALID, "framework must be remat, megatron or pytorch, got %d", (int)c->framework);
    if (c->tp < 0 || c->tp > REMAT_MAX_TP)
        return remat_fail(REMAT_ERR_INVALID, "tensor-parallel size must be in [1, %d], got %d", REMAT_MAX_TP, c->tp);
    int T = remat_config_tp(c);
    if (c->sp != 0 && c->sp != 1) return remat_fail(REMAT_ERR_INVALID, "sp must be 0 or 1, got %d", c->sp);
    if (c->stage != REMAT_STAGE_WHOLE && c->stage != REMAT_STAGE_FIRST)
        return remat_fail(REMAT_ERR_INVALID, "stage must be whole (0) or first (1), got %d", c->stage);
    if (c->framework == REMAT_FRAMEWORK_REMAT && (T != 1 || c->sp || c->stage))
        return remat_fail(REMAT_ERR_INVALID, "tensor, sequence and pipeline parallelism are for planning "
                          "--framework megatron or pytorch; remat's own engine runs on one machine (tp 1)");
    if (c->n_head % T)
        return remat_fail(REMAT_ERR_INVALID, "heads %d are not divisible by the tensor-parallel size %d; "
                          "each of the %d GPUs holds whole heads", c->n_head, T, T);
    if (c->sp && c->seq % T)
        return remat_fail(REMAT_ERR_INVALID, "sequence parallelism splits seq %d across %d GPUs; pick a seq "
                          "divisible by the tensor-parallel size", c->seq, T);
    /* every derived size must fit: rows*cols in 31 bits for int-indexed
     * kernels (cblas takes int), bytes in 63 bits */
    int ok = 1;
    uint64_t N = remat_mul((uint64_t)c->batch, (uint64_t)c->seq, &ok);
    uint64_t Vp = (uint64_t)remat_config_padded_vocab(c), C = (uint64_t)c->n_embd;
    uint64_t att = remat_mul(remat_mul(remat_mul((uint64_t)c->batch, (uint64_t)c->n_head, &ok), (uint64_t)c->seq, &ok), (uint64_t)c->seq, &ok);
    uint64_t logits = remat_mul(N, Vp, &ok);
    uint64_t fc = remat_mul(N, 4 * C, &ok);
    if (!ok || N > MAX_ROWS || att > (1ULL << 40) || logits > (1ULL << 40) || fc > (1ULL << 40))
        return remat_fail(REMAT_ERR_RANGE, "sizes overflow: batch*seq=%llu rows is too large for this model; reduce batch or seq",
                          (unsigned long long)N);
    uint64_t params = remat_config_num_params(c);
    if (params == 0 || params > (1ULL << 40))
        return remat_fail(REMAT_ERR_RANGE, "model too large: %llu parameters; reduce layers or dim", (unsigned long long)params);
    return REMAT_OK;
}

uint64_t remat_config_num_params(const remat_config *c)
{
    int ok = 1;
    uint64_t C = (uint64_t)c->n_embd, L = (uint64_t)c->n_layer, Vp = (uint64_t)remat_config_padded_vocab(c);
    uint64_t n = remat_mul(Vp, C, &ok);
    n = remat_add(n, remat_mul((uint64_t)c->max_seq, C, &ok), &ok);
    uint64_t per = 12 * C * C + 13 * C;   /* ln1 2C, qkv 3C^2+3C, proj C^2+C, ln2 2C, fc 4C^2+4C, fcproj 4C^2+C */
    n = remat_add(n, remat_mul(L, per, &ok), &ok);
    n = remat_add(n, 2 * C, &ok);
    return ok ? n : 0;
}

int remat_tensor_count(void) { return remat_table_gpt2.count; }

int remat_table_find(const remat_table *tb, const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < tb->count; i++)
        if (!strcmp(tb->defs[i].name, name)) return i;
    return -1;
}

int remat_tensor_find(const char *name) { return remat_table_find(&remat_table_gpt2, name); }
int remat_config_tensor_count(const remat_config *cfg) { return remat_table_of(cfg)->count; }
int remat_config_tensor_find(const remat_config *cfg, const char *name) { return remat_table_find(remat_table_of(cfg), name); }

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
