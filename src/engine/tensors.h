/*
 * tensors.h -- the one table of named activation tensors.
 *
 * Every schedule, plan, report and test speaks in these names.  Each entry
 * gives a tensor's shape formula, the op that produces it, the tensors that
 * op reads, what its backward reads, and which activation-gradient buffers
 * its backward allocates and frees.  The schedule compiler, the simulator,
 * the validator and the executor all read this table, so they cannot
 * disagree about what an instruction touches.
 *
 * Slots: a (layer, tensor) pair is one slot in a flat array.  The input of
 * block l is RT_X, which resolves to res3 of block l-1, or emb for l = 0.
 */
#ifndef REMAT_TENSORS_H
#define REMAT_TENSORS_H

#include <stdint.h>
#include "remat.h"

enum remat_tid {
    /* per-block tensors, in forward order */
    RT_LN1_STAT = 0, RT_LN1, RT_QKV, RT_ATT, RT_ATTY, RT_RES2,
    RT_LN2_STAT, RT_LN2, RT_FCH, RT_FCH_GELU, RT_RES3,
    RT_NBLOCK,                       /* 11 per-block tensors */
    /* global tensors */
    RT_EMB = RT_NBLOCK, RT_LNF_STAT, RT_LNF, RT_LOGITS,
    /* activation-gradient buffers */
    RT_D_RES, RT_D_LNF, RT_D_FCH, RT_D_LN2, RT_D_ATTY, RT_D_QKV, RT_D_LN1, RT_D_BRANCH,
    RT_COUNT,
    RT_X = -2,                       /* "the block's input" in op input lists */
    RT_NONE = -1
};

#define RT_FIRST_GRAD RT_D_RES
#define RT_MAXIO 3

typedef struct remat_tensor_def {
    const char *name, *shape, *op;
    int per_layer, is_grad;
    /* bytes/4 = B*T*(c*C + v*Vp + k) + t2 * B*NH*T*T */
    int c, v, k, t2;
    int8_t fwd_in[RT_MAXIO];   /* tensors the forward op reads (RT_NONE ends) */
    int8_t bwd_in[RT_MAXIO];   /* activations the backward op reads */
    int8_t has_bwd;            /* 0: no backward of its own (stats, att: fused) */
    int8_t g_alloc[2];         /* gradient buffers the backward allocates */
    int8_t g_free[2];          /* gradient buffers the backward frees (after allocs) */
} remat_tensor_def;

extern const remat_tensor_def remat_tensor_defs[RT_COUNT];

/* bytes of one copy of tensor t (no overflow: config already checked) */
uint64_t remat_tensor_bytes(const remat_config *cfg, int t);
/* bytes a forward op allocates for itself and frees before it returns
 * (the chunked LM head's chunk of logits) */
uint64_t remat_tensor_fwd_temp_bytes(const remat_config *cfg, int t);
/* FLOPs of tensor t's forward op, and of its backward op */
double remat_tensor_fwd_flops(const remat_config *cfg, int t);
double remat_tensor_bwd_flops(const remat_config *cfg, int t);
double remat_update_flops(const remat_config *cfg);

/* slot numbering */
static inline int remat_nslots(int L) { return L * RT_NBLOCK + (RT_COUNT - RT_NBLOCK); }
static inline int remat_slot(int L, int layer, int t)
{
    if (t == RT_X) return layer == 0 ? L * RT_NBLOCK : (layer - 1) * RT_NBLOCK + RT_RES3;
    if (t < RT_NBLOCK) return layer * RT_NBLOCK + t;
    return L * RT_NBLOCK + (t - RT_NBLOCK);
}
/* inverse: tensor id and layer (-1 for global) of a slot */
static inline int remat_slot_tid(int L, int s)
{
    return s < L * RT_NBLOCK ? s % RT_NBLOCK : RT_NBLOCK + (s - L * RT_NBLOCK);
}
static inline int remat_slot_layer(int L, int s) { return s < L * RT_NBLOCK ? s / RT_NBLOCK : -1; }
/* 1 if the slot is a block input (emb or some res3): a "checkpoint" */
static inline int remat_slot_is_checkpoint(int L, int s)
{
    int t = remat_slot_tid(L, s);
    return t == RT_RES3 || t == RT_EMB;
}

#endif
