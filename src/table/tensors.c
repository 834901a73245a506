/*
 * tensors.c -- remat's GPT-2 tensor table (see tensors.h), the byte sizes
 * and the FLOP model of its ops.
 *
 * FLOPs count multiply-adds as 2; matmuls dominate.  Attention counts only
 * the causal half (j <= i).  Pointwise ops carry small per-element constants;
 * they matter only for the cost model, not for correctness.
 */
#include <stddef.h>
#include "tensors.h"
#include "../core/core.h"

#define N_ RT_NONE
#define R(a, b, c) {a, b, c}
#define G(a, b) {a, b}
#define NOG {N_, N_}
#define NOR {N_, N_, N_}
#define SH(c, v, k, t, t2, text) {c, v, k, t, t2, text}
#define NOVAR 0, SH(0, 0, 0, 0, 0, NULL), NULL

/* A block's tensors in forward order.  Gradient flow in one block's
 * backward (bwd order res3 .. ln1): d_res -> [res3] d_fch -> [fch_gelu]
 * d_fch -> [fch] d_ln2 -> [ln2] d_res += ; d_res -> [res2] d_atty ->
 * [atty] d_qkv -> [qkv] d_ln1 -> [ln1] d_res +=.  With dropout the
 * residual branches first mask d_res into d_branch. */
static const remat_tensor_def gpt2_defs[RT_COUNT] = {
    [RT_LN1_STAT] = { "ln1_stat", "layernorm stats (ln_1)", RT_CLASS_BLOCK, 0,
                      SH(0, 0, 2, 0, 0, "(B,T,2)"), NOVAR, 0, 0,
                      R(RT_X, N_, N_), NOR, 0, NOG, NOG, NOG, RT_P_F32, 0 },
    [RT_LN1] = { "ln1", "layernorm apply (ln_1)", RT_CLASS_BLOCK, RT_F_POINTWISE,
                 SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0,
                 R(RT_X, RT_LN1_STAT, N_), R(RT_X, RT_LN1_STAT, N_), 1,
                 G(RT_D_RES, RT_D_LN1), NOG, G(RT_D_LN1, N_) },
    [RT_QKV] = { "qkv", "linear (c_attn)", RT_CLASS_BLOCK, RT_F_GEMM,
                 SH(3, 0, 0, 0, 0, "(B,T,3C)"), NOVAR, 3, 0,
                 R(RT_LN1, N_, N_), R(RT_LN1, N_, N_), 1,
                 G(RT_D_QKV, N_), G(RT_D_LN1, N_), G(RT_D_QKV, N_) },
    [RT_ATT] = { "att", "softmax(q k^T/sqrt(hs))", RT_CLASS_BLOCK, RT_F_GEMM | RT_F_SELECTIVE,
                 SH(0, 0, 0, 0, 1, "(B,NH,T,T)"),
                 RT_VAR_FLASH, SH(0, 0, 0, 1, 0, "(B,NH,T)"), "logsumexp of q k^T/sqrt(hs) (flash)", 0, 0,
                 R(RT_QKV, N_, N_), NOR, 0, NOG, NOG, NOG, RT_P_ACT, RT_P_F32 },
    [RT_ATTY] = { "atty", "attention values (att v)", RT_CLASS_BLOCK, RT_F_GEMM,
                  SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0,
                  R(RT_ATT, RT_QKV, N_), R(RT_ATT, RT_QKV, N_), 1,
                  G(RT_D_ATTY, N_), G(RT_D_QKV, N_), G(RT_D_ATTY, N_) },
    [RT_RES2] = { "res2", "linear (c_proj) + residual", RT_CLASS_BLOCK, RT_F_GEMM,
                  SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 1, 0,
                  R(RT_ATTY, RT_X, N_), R(RT_ATTY, N_, N_), 1,
                  G(RT_D_RES, N_), G(RT_D_ATTY, RT_D_BRANCH), G(RT_D_BRANCH, N_), RT_P_F32, 0 },
    [RT_LN2_STAT] = { "ln2_stat", "layernorm stats (ln_2)", RT_CLASS_BLOCK, 0,
                      SH(0, 0, 2, 0, 0, "(B,T,2)"), NOVAR, 0, 0,
                      R(RT_RES2, N_, N_), NOR, 0, NOG, NOG, NOG, RT_P_F32, 0 },
    [RT_LN2] = { "ln2", "layernorm apply (ln_2)", RT_CLASS_BLOCK, RT_F_POINTWISE,
                 SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0,
                 R(RT_RES2, RT_LN2_STAT, N_), R(RT_RES2, RT_LN2_STAT, N_), 1,
                 G(RT_D_RES, RT_D_LN2), NOG, G(RT_D_LN2, N_) },
    [RT_FCH] = { "fch", "linear (c_fc)", RT_CLASS_BLOCK, RT_F_GEMM,
                 SH(4, 0, 0, 0, 0, "(B,T,4C)"), NOVAR, 4, 0,
                 R(RT_LN2, N_, N_), R(RT_LN2, N_, N_), 1,
                 G(RT_D_FCH, N_), G(RT_D_LN2, N_), G(RT_D_FCH, N_) },
    [RT_FCH_GELU] = { "fch_gelu", "gelu (tanh)", RT_CLASS_BLOCK, RT_F_POINTWISE,
                      SH(4, 0, 0, 0, 0, "(B,T,4C)"), NOVAR, 0, 0,
                      R(RT_FCH, N_, N_), R(RT_FCH, N_, N_), 1,
                      G(RT_D_FCH, N_), NOG, NOG },
    [RT_RES3] = { "res3", "linear (mlp c_proj) + residual", RT_CLASS_BLOCK, RT_F_GEMM,
                  SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 4, 0,
                  R(RT_FCH_GELU, RT_RES2, N_), R(RT_FCH_GELU, N_, N_), 1,
                  G(RT_D_RES, N_), G(RT_D_FCH, RT_D_BRANCH), G(RT_D_BRANCH, N_), RT_P_F32, 0 },
    [RT_EMB] = { "emb", "embedding wte+wpe", RT_CLASS_GLOBAL, 0,
                 SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0,
                 NOR, NOR, 1, G(RT_D_RES, N_), NOG, G(RT_D_RES, N_), RT_P_F32, 0 },
    [RT_LNF_STAT] = { "lnf_stat", "layernorm stats (ln_f)", RT_CLASS_GLOBAL, 0,
                      SH(0, 0, 2, 0, 0, "(B,T,2)"), NOVAR, 0, 0,
                      R(RT_X, N_, N_), NOR, 0, NOG, NOG, NOG, RT_P_F32, 0 },
    [RT_LNF] = { "lnf", "layernorm apply (ln_f)", RT_CLASS_GLOBAL, 0,
                 SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0,
                 R(RT_X, RT_LNF_STAT, N_), R(RT_X, RT_LNF_STAT, N_), 1,
                 G(RT_D_LNF, N_), G(RT_D_RES, N_), G(RT_D_LNF, N_) },
    /* logits: overwritten in place by d(logits) by the fused cross-entropy,
     * so its backward consumes (frees) it */
    [RT_LOGITS] = { "logits", "lm head (wte^T) + softmax/xent", RT_CLASS_GLOBAL, RT_F_GEMM,
                    SH(0, 1, 0, 0, 0, "(B,T,Vp)"),
                    RT_VAR_CHUNKED, SH(1, 0, 0, 0, 0, "(B,T,C)"), "chunked lm head + xent; holds d(lnf)", 0, 1,
                    R(RT_LNF, N_, N_), R(RT_LNF, RT_LOGITS, N_), 1,
                    NOG, G(RT_D_LNF, N_), G(RT_LOGITS, N_) },
    [RT_D_RES] = { "d_res", "grad of residual stream", RT_CLASS_GRAD, RT_F_ZERO,
                   SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG, RT_P_F32, 0 },
    [RT_D_LNF] = { "d_lnf", "grad of lnf", RT_CLASS_GRAD, 0,
                   SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG },
    [RT_D_FCH] = { "d_fch", "grad of fch_gelu, then fch", RT_CLASS_GRAD, 0,
                   SH(4, 0, 0, 0, 0, "(B,T,4C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG },
    [RT_D_LN2] = { "d_ln2", "grad of ln2", RT_CLASS_GRAD, 0,
                   SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG },
    [RT_D_ATTY] = { "d_atty", "grad of atty", RT_CLASS_GRAD, 0,
                    SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG },
    [RT_D_QKV] = { "d_qkv", "grad of qkv", RT_CLASS_GRAD, 0,
                   SH(3, 0, 0, 0, 0, "(B,T,3C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG },
    [RT_D_LN1] = { "d_ln1", "grad of ln1", RT_CLASS_GRAD, 0,
                   SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG },
    [RT_D_BRANCH] = { "d_branch", "grad of a residual branch (dropout or bf16)", RT_CLASS_GRAD, RT_F_BRANCH,
                      SH(1, 0, 0, 0, 0, "(B,T,C)"), NOVAR, 0, 0, NOR, NOR, 0, NOG, NOG, NOG },
};

static double gpt2_fwd_flops(const remat_config *c, int t);
static double gpt2_bwd_flops(const remat_config *c, int t);
static uint64_t gpt2_temp_bytes(const remat_config *c, int t);
static uint64_t gpt2_bwd_temp_bytes(const remat_config *c, int t);

const remat_table remat_table_gpt2 = {
    .name = "remat",
    .count = RT_COUNT,
    .nblock = RT_NBLOCK,
    .first_grad = RT_FIRST_GRAD,
    .emb = RT_EMB,
    .d_res = RT_D_RES,
    .nlmhead = 3, .lmhead = { RT_LNF_STAT, RT_LNF, RT_LOGITS },
    .nlmhead_bwd = 2, .lmhead_bwd = { RT_LOGITS, RT_LNF },
    .nbwd = 8, .bwd = { RT_RES3, RT_FCH_GELU, RT_FCH, RT_LN2, RT_RES2, RT_ATTY, RT_QKV, RT_LN1 },
    .defs = gpt2_defs,
    .fwd_flops = gpt2_fwd_flops,
    .bwd_flops = gpt2_bwd_flops,
    .temp_bytes = gpt2_temp_bytes,
    .bwd_temp_bytes = gpt2_bwd_temp_bytes,
};

const remat_table *remat_table_of(const remat_config *cfg)
{
    switch (cfg->framework) {
    case REMAT_FRAMEWORK_MEGATRON: return &remat_table_megatron;
    case REMAT_FRAMEWORK_PYTORCH: return &remat_table_pytorch;
    default: return &remat_table_gpt2;
    }
}

uint32_t remat_keep_default(const remat_table *tb)
{
    uint32_t m = 0;
    for (int t = 0; t < tb->nblock; t++)
        if (!(tb->defs[t].flags & RT_F_TRANSIENT)) m |= 1u << t;
    return m;
}

/* 1 when tensor t exists under cfg but holds nothing: a dropout-only
 * activation without dropout, or the LM head on a first pipeline stage */
static int empty_under(const remat_config *c, const remat_table *tb, int t)
{
    const remat_tensor_def *d = &tb->defs[t];
    if ((d->flags & RT_F_DROPOUT) && c->dropout == 0.0f && d->cls != RT_CLASS_GRAD) return 1;
    return c->stage == REMAT_STAGE_FIRST && (d->flags & RT_F_HEAD);
}

/* the divisor of an entry's bytes: the tensor-parallel size where it is sharded */
static uint64_t shards(const remat_config *c, const remat_tensor_def *d)
{
    return (d->flags & RT_F_TP) || ((d->flags & RT_F_SP) && c->sp) ? (uint64_t)remat_config_tp(c) : 1;
}

/* the variant of an entry a config selects */
static int variant_on(const remat_config *c, const remat_tensor_def *d)
{
    return (d->variant == RT_VAR_FLASH && c->attention == REMAT_ATTENTION_FLASH) ||
           (d->variant == RT_VAR_CHUNKED && c->lmhead_chunk > 0);
}

static uint64_t shape_elems(const remat_config *c, const remat_shape *s)
{
    uint64_t B = (uint64_t)c->batch, T = (uint64_t)c->seq, NH = (uint64_t)c->n_head;
    uint64_t per_row = (uint64_t)s->c * (uint64_t)c->n_embd
                     + (uint64_t)s->v * (uint64_t)remat_config_padded_vocab(c) + (uint64_t)s->k;
    return B * T * per_row + (uint64_t)s->t * B * NH * T + (uint64_t)s->t2 * B * NH * T * T + (uint64_t)s->s * T;
}

static uint64_t elem_bytes(const remat_config *c, int prec)
{
    return prec == RT_P_BYTE ? 1 : prec == RT_P_I64 ? 8 : prec == RT_P_F32 || c->dtype == REMAT_DTYPE_FP32 ? 4 : 2;
}

static int prec_of(const remat_config *c, const remat_tensor_def *d)
{
    return variant_on(c, d) ? d->vprec : d->prec;
}

int remat_tensor_dtype(const remat_config *c, int t)
{
    int p = prec_of(c, &remat_table_of(c)->defs[t]);
    return p == RT_P_BYTE || p == RT_P_I64 ? -1 : p == RT_P_F32 ? REMAT_DTYPE_FP32 : (int)c->dtype;
}

uint64_t remat_tensor_bytes(const remat_config *c, int t)
{
    const remat_table *tb = remat_table_of(c);
    const remat_tensor_def *d = &tb->defs[t];
    if (empty_under(c, tb, t)) return 0;
    return elem_bytes(c, prec_of(c, d)) * shape_elems(c, variant_on(c, d) ? &d->vshape : &d->shape) / shards(c, d);
}

uint64_t remat_table_resident_bytes(const remat_config *c)
{
    const remat_table *tb = remat_table_of(c);
    uint64_t b = 0;
    for (int i = 0; i < tb->nres; i++) b += remat_tensor_bytes(c, tb->res[i]);
    return b;
}

const char *remat_tensor_shape_text(const remat_config *c, int t)
{
    const remat_tensor_def *d = &remat_table_of(c)->defs[t];
    return variant_on(c, d) ? d->vshape.text : d->shape.text;
}

const char *remat_tensor_op_text(const remat_config *c, int t)
{
    const remat_tensor_def *d = &remat_table_of(c)->defs[t];
    return variant_on(c, d) ? d->vop : d->op;
}

int remat_tensor_exists(const remat_config *c, int t)
{
    uint16_t f = remat_table_of(c)->defs[t].flags;
    return (!(f & RT_F_BRANCH) || c->dropout > 0.0f || c->dtype == REMAT_DTYPE_BF16) &&
           (!(f & RT_F_DROPOUT) || c->dropout > 0.0f);
}

int remat_lmhead_rows(const remat_config *c)
{
    int N = c->batch * c->seq;
    return c->lmhead_chunk > 0 && c->lmhead_chunk < N ? c->lmhead_chunk : N;
}

/* The scratch of the kernels (ops/ops.c), declared here so that the walker
 * allocates it and the simulator counts it:
 *   - the chunked LM head: one chunk of fp32 logits, and under bf16 its
 *     d(logits) rounded to bf16 as a GEMM operand;
 *   - attention under bf16: the fp32 accumulator of the value products
 *     (B,T,C) and, in the backward, of dqkv (B,T,3C). */
static uint64_t gpt2_temp_bytes(const remat_config *c, int t)
{
    uint64_t BT = (uint64_t)c->batch * (uint64_t)c->seq, C = (uint64_t)c->n_embd;
    int bf = c->dtype == REMAT_DTYPE_BF16;
    if (t == RT_LOGITS && c->lmhead_chunk > 0)
        return (bf ? 6ULL : 4ULL) * (uint64_t)remat_lmhead_rows(c) * (uint64_t)remat_config_padded_vocab(c);
    /* attention's fp32 accumulator: flash's values, and the naive values
     * with dropout (without, one GEMM per row block writes out directly) */
    if (t == RT_ATTY && bf && (c->attention == REMAT_ATTENTION_FLASH || c->dropout > 0.0f)) return 4 * BT * C;
    return 0;
}

static uint64_t gpt2_bwd_temp_bytes(const remat_config *c, int t)
{
    if (t == RT_ATTY && c->dtype == REMAT_DTYPE_BF16) return 12ULL * c->batch * c->seq * c->n_embd;
    return 0;
}

uint64_t remat_tensor_fwd_temp_bytes(const remat_config *c, int t)
{
    const remat_table *tb = remat_table_of(c);
    if (tb->temp_bytes) return tb->temp_bytes(c, t);
    const remat_tensor_def *d = &tb->defs[t];
    if (empty_under(c, tb, t)) return 0;
    return elem_bytes(c, d->tprec) * shape_elems(c, &d->temp) / shards(c, d);
}

uint64_t remat_tensor_bwd_temp_bytes(const remat_config *c, int t)
{
    const remat_table *tb = remat_table_of(c);
    return tb->bwd_temp_bytes ? tb->bwd_temp_bytes(c, t) : 0;   /* framework tables declare none */
}

/* a framework entry's FLOP formula under cfg */
static double formula_flops(const remat_config *c, int t, int backward)
{
    const remat_table *tb = remat_table_of(c);
    const remat_tensor_def *d = &tb->defs[t];
    const remat_flops *f = backward ? &d->bfl : &d->ffl;
    if (empty_under(c, tb, t)) return 0;
    double N = (double)c->batch * c->seq, C = c->n_embd, Vp = remat_config_padded_vocab(c);
    double fl = N * (f->cc * C * C + f->cv * C * Vp + f->c * C) + f->att * (double)c->batch * c->seq * c->seq * C;
    return (d->flags & RT_F_GEMM) ? fl / remat_config_tp(c) : fl;
}

static double tri(const remat_config *c)   /* causal (i, j) pairs over all heads */
{
    return (double)c->batch * c->n_head * ((double)c->seq * (c->seq + 1) / 2.0);
}

double remat_tensor_fwd_flops(const remat_config *c, int t)
{
    const remat_table *tb = remat_table_of(c);
    return tb->fwd_flops ? tb->fwd_flops(c, t) : formula_flops(c, t, 0);
}

double remat_tensor_bwd_flops(const remat_config *c, int t)
{
    const remat_table *tb = remat_table_of(c);
    return tb->bwd_flops ? tb->bwd_flops(c, t) : formula_flops(c, t, 1);
}

static double gpt2_fwd_flops(const remat_config *c, int t)
{
    double N = (double)c->batch * c->seq, C = c->n_embd, hs = (double)c->n_embd / c->n_head;
    double Vp = remat_config_padded_vocab(c), V = c->vocab;
    switch (t) {
    case RT_LN1_STAT: case RT_LN2_STAT: case RT_LNF_STAT: return 3 * N * C;
    case RT_LN1: case RT_LN2: case RT_LNF: return 4 * N * C;
    case RT_QKV: return 2 * N * C * 3 * C + N * 3 * C;
    case RT_ATT: return tri(c) * (2 * hs + 5);            /* flash: the same, online */
    case RT_ATTY: return tri(c) * (c->attention == REMAT_ATTENTION_FLASH ? 4 * hs + 3 : 2 * hs);
    case RT_RES2: return 2 * N * C * C + 2 * N * C;
    case RT_FCH: return 2 * N * C * 4 * C + N * 4 * C;
    case RT_FCH_GELU: return 8 * N * 4 * C;
    case RT_RES3: return 2 * N * 4 * C * C + 2 * N * C;
    case RT_EMB: return N * C;
    case RT_LOGITS:   /* chunked: the backward GEMMs run in the same pass */
        return (c->lmhead_chunk > 0 ? 6 : 2) * N * C * Vp + 5 * N * V;
    default: return 0;
    }
}

static double gpt2_bwd_flops(const remat_config *c, int t)
{
    double N = (double)c->batch * c->seq, C = c->n_embd, hs = (double)c->n_embd / c->n_head;
    double Vp = remat_config_padded_vocab(c);
    switch (t) {
    case RT_LN1: case RT_LN2: case RT_LNF: return 10 * N * C;
    case RT_QKV: return 4 * N * C * 3 * C + N * 3 * C;
    case RT_ATTY: return tri(c) * (c->attention == REMAT_ATTENTION_FLASH ? 14 * hs + 10 : 10 * hs + 6);
    case RT_RES2: return 4 * N * C * C + N * C;
    case RT_FCH: return 4 * N * C * 4 * C + N * 4 * C;
    case RT_FCH_GELU: return 12 * N * 4 * C;
    case RT_RES3: return 4 * N * 4 * C * C + N * C;
    case RT_EMB: return 2 * N * C;
    case RT_LOGITS: return c->lmhead_chunk > 0 ? N * C : 4 * N * C * Vp;
    default: return 0;
    }
}

double remat_update_flops(const remat_config *c)
{
    /* framework tables: the optimizer is priced per iteration by the cluster
     * model, not per micro-batch */
    return c->framework == REMAT_FRAMEWORK_REMAT ? 12.0 * (double)remat_config_num_params(c) : 0;
}

/* ---- operands ----------------------------------------------------------------- */

static void add_list(const remat_config *c, const remat_table *tb, const int8_t *list, int n, int *slots,
                     int *tids, int *count)
{
    int L = c->n_layer;
    for (int i = 0; i < n && list[i] != RT_NONE; i++) {
        int t = list[i];
        if (!remat_tensor_exists(c, t)) continue;
        slots[*count] = remat_table_slot(tb, L, -1, t);
        tids[*count] = t;
        (*count)++;
    }
}

void remat_operands_of(const remat_config *c, int kind, int layer, int t, remat_operands *o)
{
    const remat_table *tb = remat_table_of(c);
    int L = c->n_layer;
    o->out = -1;
    o->nin = o->nneed = o->nalloc = o->nfree = 0;
    o->temp_bytes = 0;
    if (kind == REMAT_I_UPDATE) return;
    const remat_tensor_def *d = &tb->defs[t];
    int lay = d->cls == RT_CLASS_BLOCK ? layer : -1;
    o->out = remat_table_slot(tb, L, lay < 0 ? 0 : lay, t);
    if (kind == REMAT_I_FREE) return;
    const int8_t *reads = kind == REMAT_I_BACKWARD ? d->bwd_in : d->fwd_in;
    for (int i = 0; i < RT_MAXIO && reads[i] != RT_NONE; i++) {
        o->in[o->nin] = remat_table_slot(tb, L, lay, reads[i]);
        o->in_t[o->nin] = reads[i];
        o->nin++;
    }
    if (kind == REMAT_I_BACKWARD) {
        add_list(c, tb, d->g_need, RT_MAXG, o->need, o->need_t, &o->nneed);
        add_list(c, tb, d->g_alloc, RT_MAXG, o->alloc, o->alloc_t, &o->nalloc);
        add_list(c, tb, d->g_free, RT_MAXG, o->freed, o->freed_t, &o->nfree);
        o->temp_bytes = remat_tensor_bwd_temp_bytes(c, t);
    } else {
        o->temp_bytes = remat_tensor_fwd_temp_bytes(c, t);
    }
}
