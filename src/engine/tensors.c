/*
 * tensors.c -- the activation table (see tensors.h) and its FLOP model.
 *
 * FLOPs count multiply-adds as 2; matmuls dominate.  Attention counts only
 * the causal half (j <= i).  Pointwise ops carry small per-element constants;
 * they matter only for the cost model, not for correctness.
 */
#include "tensors.h"
#include "../core/core.h"

#define N_ RT_NONE
#define IN(a, b, c) {a, b, c}
#define G2(a, b) {a, b}

const remat_tensor_def remat_tensor_defs[RT_COUNT] = {
 /* name        shape         op                           pl g   c  v  k t2  fwd_in                     bwd_in                     bwd g_alloc                 g_free */
 [RT_LN1_STAT]={"ln1_stat", "(B,T,2)",   "layernorm stats (ln_1)",   1,0, 0,0,2,0, IN(RT_X,N_,N_),          IN(N_,N_,N_),              0,  G2(N_,N_),                G2(N_,N_)},
 [RT_LN1]     ={"ln1",      "(B,T,C)",   "layernorm apply (ln_1)",   1,0, 1,0,0,0, IN(RT_X,RT_LN1_STAT,N_), IN(RT_X,RT_LN1_STAT,N_),   1,  G2(N_,N_),                G2(RT_D_LN1,N_)},
 [RT_QKV]     ={"qkv",      "(B,T,3C)",  "linear (c_attn)",          1,0, 3,0,0,0, IN(RT_LN1,N_,N_),        IN(RT_LN1,N_,N_),          1,  G2(RT_D_LN1,N_),          G2(RT_D_QKV,N_)},
 [RT_ATT]     ={"att",      "(B,NH,T,T)","softmax(q k^T/sqrt(hs))",  1,0, 0,0,0,1, IN(RT_QKV,N_,N_),        IN(N_,N_,N_),              0,  G2(N_,N_),                G2(N_,N_)},
 [RT_ATTY]    ={"atty",     "(B,T,C)",   "attention values (att v)", 1,0, 1,0,0,0, IN(RT_ATT,RT_QKV,N_),    IN(RT_ATT,RT_QKV,N_),      1,  G2(RT_D_QKV,N_),          G2(RT_D_ATTY,N_)},
 [RT_RES2]    ={"res2",     "(B,T,C)",   "linear (c_proj) + residual",1,0,1,0,0,0, IN(RT_ATTY,RT_X,N_),     IN(RT_ATTY,N_,N_),         1,  G2(RT_D_ATTY,RT_D_BRANCH),G2(RT_D_BRANCH,N_)},
 [RT_LN2_STAT]={"ln2_stat", "(B,T,2)",   "layernorm stats (ln_2)",   1,0, 0,0,2,0, IN(RT_RES2,N_,N_),       IN(N_,N_,N_),              0,  G2(N_,N_),                G2(N_,N_)},
 [RT_LN2]     ={"ln2",      "(B,T,C)",   "layernorm apply (ln_2)",   1,0, 1,0,0,0, IN(RT_RES2,RT_LN2_STAT,N_),IN(RT_RES2,RT_LN2_STAT,N_),1,G2(N_,N_),               G2(RT_D_LN2,N_)},
 [RT_FCH]     ={"fch",      "(B,T,4C)",  "linear (c_fc)",            1,0, 4,0,0,0, IN(RT_LN2,N_,N_),        IN(RT_LN2,N_,N_),          1,  G2(RT_D_LN2,N_),          G2(RT_D_FCH,N_)},
 [RT_FCH_GELU]={"fch_gelu", "(B,T,4C)",  "gelu (tanh)",              1,0, 4,0,0,0, IN(RT_FCH,N_,N_),        IN(RT_FCH,N_,N_),          1,  G2(N_,N_),                G2(N_,N_)},
 [RT_RES3]    ={"res3",     "(B,T,C)",   "linear (mlp c_proj) + residual",1,0,1,0,0,0,IN(RT_FCH_GELU,RT_RES2,N_),IN(RT_FCH_GELU,N_,N_),1,G2(RT_D_FCH,RT_D_BRANCH),G2(RT_D_BRANCH,N_)},
 [RT_EMB]     ={"emb",      "(B,T,C)",   "embedding wte+wpe",        0,0, 1,0,0,0, IN(N_,N_,N_),            IN(N_,N_,N_),              1,  G2(N_,N_),                G2(RT_D_RES,N_)},
 [RT_LNF_STAT]={"lnf_stat", "(B,T,2)",   "layernorm stats (ln_f)",   0,0, 0,0,2,0, IN(RT_X,N_,N_),          IN(N_,N_,N_),              0,  G2(N_,N_),                G2(N_,N_)},
 [RT_LNF]     ={"lnf",      "(B,T,C)",   "layernorm apply (ln_f)",   0,0, 1,0,0,0, IN(RT_X,RT_LNF_STAT,N_), IN(RT_X,RT_LNF_STAT,N_),   1,  G2(RT_D_RES,N_),          G2(RT_D_LNF,N_)},
 [RT_LOGITS]  ={"logits",   "(B,T,Vp)",  "lm head (wte^T) + softmax/xent", 0,0,0,1,0,0,IN(RT_LNF,N_,N_),   IN(RT_LNF,RT_LOGITS,N_),   1,  G2(RT_D_LNF,N_),          G2(RT_LOGITS,N_)},
 [RT_D_RES]   ={"d_res",    "(B,T,C)",   "grad of residual stream",  0,1, 1,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
 [RT_D_LNF]   ={"d_lnf",    "(B,T,C)",   "grad of lnf",              0,1, 1,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
 [RT_D_FCH]   ={"d_fch",    "(B,T,4C)",  "grad of fch_gelu, then fch",0,1,4,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
 [RT_D_LN2]   ={"d_ln2",    "(B,T,C)",   "grad of ln2",              0,1, 1,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
 [RT_D_ATTY]  ={"d_atty",   "(B,T,C)",   "grad of atty",             0,1, 1,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
 [RT_D_QKV]   ={"d_qkv",    "(B,T,3C)",  "grad of qkv",              0,1, 3,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
 [RT_D_LN1]   ={"d_ln1",    "(B,T,C)",   "grad of ln1",              0,1, 1,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
 [RT_D_BRANCH]={"d_branch", "(B,T,C)",   "grad of a dropped-out branch (p>0)",0,1,1,0,0,0, IN(N_,N_,N_), IN(N_,N_,N_), 0, G2(N_,N_), G2(N_,N_)},
};

static int lmhead_rows(const remat_config *c)
{
    int N = c->batch * c->seq;
    return c->lmhead_chunk < N ? c->lmhead_chunk : N;
}

uint64_t remat_tensor_bytes(const remat_config *c, int t)
{
    const remat_tensor_def *d = &remat_tensor_defs[t];
    if (t == RT_ATT && c->attention == REMAT_ATTENTION_FLASH)   /* the logsumexp only */
        return 4ULL * (uint64_t)c->batch * (uint64_t)c->n_head * (uint64_t)c->seq;
    if (t == RT_LOGITS && c->lmhead_chunk > 0)                  /* d(lnf) */
        return 4ULL * (uint64_t)c->batch * (uint64_t)c->seq * (uint64_t)c->n_embd;
    uint64_t BT = (uint64_t)c->batch * (uint64_t)c->seq;
    uint64_t per_row = (uint64_t)d->c * (uint64_t)c->n_embd
                     + (uint64_t)d->v * (uint64_t)remat_config_padded_vocab(c) + (uint64_t)d->k;
    uint64_t n = BT * per_row
               + (uint64_t)d->t2 * (uint64_t)c->batch * (uint64_t)c->n_head * (uint64_t)c->seq * (uint64_t)c->seq;
    return 4 * n;
}

static double tri(const remat_config *c)   /* causal (i, j) pairs over all heads */
{
    return (double)c->batch * c->n_head * ((double)c->seq * (c->seq + 1) / 2.0);
}

uint64_t remat_tensor_fwd_temp_bytes(const remat_config *c, int t)
{
    if (t == RT_LOGITS && c->lmhead_chunk > 0)   /* one chunk of logits */
        return 4ULL * (uint64_t)lmhead_rows(c) * (uint64_t)remat_config_padded_vocab(c);
    return 0;
}

double remat_tensor_fwd_flops(const remat_config *c, int t)
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

double remat_tensor_bwd_flops(const remat_config *c, int t)
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
    return 12.0 * (double)remat_config_num_params(c);
}
