/*
 * tensors.h -- the table of named tensors: the one place that says what
 * every op of a training step reads, writes, allocates and frees.
 *
 * Every schedule, plan, report and test speaks in these names.  Each entry
 * gives a tensor's shape formula, the op that produces it, the tensors that
 * op reads, what its backward reads, and which gradient buffers its backward
 * needs live, allocates and frees.  Nothing else in remat encodes those
 * facts: the compiler (schedule/compile.c) decides what to emit from them,
 * the walker (schedule/walk.c) applies them -- for the interpreter, the
 * simulator, the validator and the cost pass alike -- and the op dispatcher
 * (ops/ops.c) receives exactly the buffers an entry declares, no others.
 *
 * A table is data (struct remat_table): the generic parts of remat (policy
 * parser, compiler, walker, planner) read its structure -- how many
 * per-block tensors, which one is the block output, the backward order --
 * from the struct, never from the RT_* ids below, which name the entries of
 * remat's own GPT-2 table for the code that runs it (ops, engine).
 *
 * Slots: a (layer, tensor) pair is one slot in a flat array.  The input of
 * block l is RT_X, which resolves to the block output of block l-1, or to
 * the embedding for l = 0.  Global tensors (the embedding, the head and the
 * gradient buffers) have one slot each, layer -1.
 *
 * This is the bottom layer with the config (config.c) and the parameter
 * layout (params.c): it includes nothing of remat but core/.
 */
#ifndef REMAT_TENSORS_H
#define REMAT_TENSORS_H

#include <stdint.h>
#include "remat.h"

/* remat's GPT-2 table */
enum remat_tid {
    /* per-block tensors, in forward order; the last is the block output */
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
#define RT_MAXIO 3                   /* activations one op reads */
#define RT_MAXG 2                    /* gradient buffers one backward needs / allocates / frees */
#define RT_MAXT 48                   /* tensors in any table (per-block ones: at most 32, keep masks are 32-bit) */

/* flags of a table entry */
enum {
    RT_F_ZERO = 1,        /* allocated zero-filled (accumulated with +=) */
    RT_F_BRANCH = 2,      /* exists only when d_res must be masked (dropout > 0) or
                             rounded (bf16) before a residual branch's backward */
    RT_F_GEMM = 4,        /* its ops are matrix products (the cost model's rate) */
    RT_F_SELECTIVE = 8,   /* dropped by the 'selective' policy modifier */
    RT_F_POINTWISE = 16,  /* dropped by the 'pointwise' policy modifier */
    /* framework tables (Korthikanti et al. 2022, Section 4.2): */
    RT_F_TP = 32,         /* sharded by tensor parallelism: bytes divided by cfg->tp */
    RT_F_SP = 64,         /* in the LayerNorm/dropout regions: divided by cfg->tp under
                             sequence parallelism (cfg->sp) */
    RT_F_TRANSIENT = 128, /* the framework does not save it for the backward (freed after
                             its last forward reader): policies keep it only when a save:
                             list names it */
    RT_F_HEAD = 256,      /* the LM head's: no bytes on a first pipeline stage */
    /* Megatron's tensor-parallel linear layers (Section 4.2.2), for the cost
     * model's collectives: */
    RT_F_COL = 512,       /* column-parallel: its input is all-gathered (SP) in the forward, its
                             input gradient all-reduced (or reduce-scattered, SP) in the backward */
    RT_F_ROW = 1024,      /* row-parallel: its output all-reduced (or reduce-scattered, SP) in the
                             forward, the output gradient all-gathered (SP) in the backward */
    RT_F_DROPOUT = 2048   /* framework tables: exists only with dropout (masks, their outputs,
                             the masked branch gradient); activations have no bytes without */
};

/* tensor classes */
enum { RT_CLASS_BLOCK = 0, RT_CLASS_GLOBAL = 1, RT_CLASS_GRAD = 2 };

/* A shape formula: elements = B*T*(c*C + v*Vp + k) + t*B*NH*T + t2*B*NH*T*T + s*T,
 * then divided by the tensor-parallel size for RT_F_TP entries (and RT_F_SP
 * ones under sequence parallelism); the config's checks make that exact.
 * Dropout-only activations (RT_F_DROPOUT) have no bytes without dropout, and
 * the head's none on a first pipeline stage (REMAT_STAGE_FIRST). */
typedef struct remat_shape {
    int8_t c, v, k, t, t2;
    const char *text;      /* e.g. "(B,T,3C)" */
    int8_t s;              /* plus s*T elements (position ids) */
} remat_shape;

/* A FLOP formula (framework tables; remat's own table computes its FLOPs in
 * code): N*(cc*C*C + cv*C*Vp + c*C) + att*B*T*T*C with N = B*T, divided by
 * the tensor-parallel size for RT_F_GEMM entries (Megatron shards every
 * matrix product of a layer). */
typedef struct remat_flops { int16_t cc, cv, c, att; } remat_flops;

typedef struct remat_tensor_def {
    const char *name;
    const char *op;            /* the producing op, e.g. "linear (c_attn)" */
    uint8_t cls;               /* RT_CLASS_* */
    uint16_t flags;            /* RT_F_* */
    remat_shape shape;
    /* Kernel variants that store something else under the same name
     * (flash attention: the logsumexp; the chunked LM head: d(lnf)).
     * variant: 0 none, RT_VAR_FLASH, RT_VAR_CHUNKED. */
    uint8_t variant;
    remat_shape vshape;
    const char *vop;
    int8_t wc, wv;             /* weight elements the op reads: wc*C*C + wv*C*Vp (cost model) */
    int8_t fwd_in[RT_MAXIO];   /* activations the forward reads (RT_NONE ends; RT_X: block input) */
    int8_t bwd_in[RT_MAXIO];   /* activations the backward reads */
    int8_t has_bwd;            /* 0: no backward of its own (statistics; att: fused into atty's) */
    int8_t g_need[RT_MAXG];    /* buffers live when the backward starts: it reads or += them */
    int8_t g_alloc[RT_MAXG];   /* allocated by the backward, before it runs (it writes them) */
    int8_t g_free[RT_MAXG];    /* freed by the backward, after it runs (it consumed them) */
    uint8_t prec, vprec;       /* element type of the tensor and of its variant (RT_P_*) */
    /* framework tables only (remat's own computes these in code): */
    remat_shape temp;          /* scratch its forward op needs while it runs */
    uint8_t tprec;             /* the scratch's element type */
    remat_flops ffl, bfl;      /* FLOPs of its forward op and of its backward op */
} remat_tensor_def;

/* Element types.  RT_P_ACT follows the run's activation dtype (bf16: 2
 * bytes, fp32: 4); RT_P_F32 is fp32 whatever the dtype (statistics and
 * accumulators, where bf16's 8-bit mantissa would cost accuracy); RT_P_BYTE
 * is one byte (masks). */
enum { RT_P_ACT = 0, RT_P_F32 = 1, RT_P_BYTE = 2, RT_P_I64 = 3 /* token ids */ };

enum { RT_VAR_FLASH = 1, RT_VAR_CHUNKED = 2 };   /* 0: no variant */

typedef struct remat_table {
    const char *name;
    int count;                 /* tensor ids [0, count) */
    int nblock;                /* per-block tensors [0, nblock), forward order; nblock-1: the output */
    int first_grad;            /* globals [nblock, first_grad); gradient buffers [first_grad, count) */
    int emb;                   /* the global tensor that is block 0's input */
    int d_res;                 /* the residual-stream gradient (the head allocates it) */
    int nlmhead;               /* the LM head's tensors: globals after the last block, forward order */
    int8_t lmhead[4];
    int nlmhead_bwd;           /* the LM head's backward order */
    int8_t lmhead_bwd[4];
    int nbwd;                  /* a block's backward order */
    int8_t bwd[RT_MAXT];
    const remat_tensor_def *defs;
    /* Globals the framework holds from the first forward op to the last
     * backward one (token ids, targets, the embedding's dropout mask): no
     * instruction touches them, so they add the same bytes to every moment
     * of a step (remat_table_resident_bytes). */
    int nres;
    int8_t res[4];
    /* remat's own table computes FLOPs and scratch in code; NULL: from the
     * entries' formulas (ffl, bfl, temp) */
    double (*fwd_flops)(const remat_config *cfg, int t);
    double (*bwd_flops)(const remat_config *cfg, int t);
    uint64_t (*temp_bytes)(const remat_config *cfg, int t);
    uint64_t (*bwd_temp_bytes)(const remat_config *cfg, int t);   /* NULL: none */
} remat_table;

/* remat's own GPT-2 table (the one the engine runs) */
extern const remat_table remat_table_gpt2;
/* the framework tables (frameworks.c) */
extern const remat_table remat_table_megatron, remat_table_pytorch;

/* 1 when two configs are the same run shape (every field equal): what
 * profiles, traces and run times are keyed by. */
int remat_config_same(const remat_config *a, const remat_config *b);

/* The table a config uses. */
const remat_table *remat_table_of(const remat_config *cfg);
/* The index of the tensor named name in tb, or -1 (names are unique in a
 * table; callers that want a per-block tensor check < nblock). */
int remat_table_find(const remat_table *tb, const char *name);

/* bytes of one copy of tensor t (no overflow: config already checked) */
uint64_t remat_tensor_bytes(const remat_config *cfg, int t);
/* its element type under cfg: REMAT_DTYPE_FP32 or REMAT_DTYPE_BF16
 * (RT_P_BYTE tensors: -1) */
int remat_tensor_dtype(const remat_config *cfg, int t);
/* scratch a forward op, or a backward op, needs while it runs (the LM
 * head's chunk of logits, attention's fp32 accumulators under bf16); the
 * walker allocates it around the op */
uint64_t remat_tensor_fwd_temp_bytes(const remat_config *cfg, int t);
uint64_t remat_tensor_bwd_temp_bytes(const remat_config *cfg, int t);
/* rows of one chunk of the LM head (B*T when it runs whole) */
int remat_lmhead_rows(const remat_config *cfg);
/* 1 when tensor t exists in this config (gradient buffers of dropout) */
int remat_tensor_exists(const remat_config *cfg, int t);
/* the shape text and op description under cfg's kernel choices */
const char *remat_tensor_shape_text(const remat_config *cfg, int t);
const char *remat_tensor_op_text(const remat_config *cfg, int t);
/* FLOPs of tensor t's forward op, and of its backward op */
double remat_tensor_fwd_flops(const remat_config *cfg, int t);
double remat_tensor_bwd_flops(const remat_config *cfg, int t);
double remat_update_flops(const remat_config *cfg);
/* bytes of the table's resident globals (remat_table.res) under cfg */
uint64_t remat_table_resident_bytes(const remat_config *cfg);
/* per-block tensors a policy keeps unless told otherwise: all but the
 * RT_F_TRANSIENT ones */
uint32_t remat_keep_default(const remat_table *tb);

/* ---- slots ---------------------------------------------------------------- */
static inline int remat_table_nslots(const remat_table *tb, int L) { return L * tb->nblock + (tb->count - tb->nblock); }
/* slot of tensor t seen from block `layer` (-1 or L: from the head, where
 * RT_X is the last block's output); global tensors ignore layer */
static inline int remat_table_slot(const remat_table *tb, int L, int layer, int t)
{
    if (t == RT_X) {
        if (layer < 0) layer = L;
        return layer == 0 ? L * tb->nblock + (tb->emb - tb->nblock) : (layer - 1) * tb->nblock + tb->nblock - 1;
    }
    if (t < tb->nblock) return layer * tb->nblock + t;
    return L * tb->nblock + (t - tb->nblock);
}
static inline int remat_table_slot_tid(const remat_table *tb, int L, int s)
{
    return s < L * tb->nblock ? s % tb->nblock : tb->nblock + (s - L * tb->nblock);
}
static inline int remat_table_slot_layer(const remat_table *tb, int L, int s)
{
    return s < L * tb->nblock ? s / tb->nblock : -1;
}
/* 1 if the slot is a block input (the embedding or a block output) */
static inline int remat_table_slot_is_checkpoint(const remat_table *tb, int L, int s)
{
    int t = remat_table_slot_tid(tb, L, s);
    return t == tb->nblock - 1 || t == tb->emb;
}

/* ---- what one instruction touches ------------------------------------------
 * The operands of an instruction, resolved to slots, straight from the
 * table: the walker checks and applies them, the engine binds buffers to
 * them, the profiler binds its own.  Gradient buffers a config does not have
 * (d_branch without dropout) are left out. */
typedef struct remat_operands {
    int out;                   /* forward/recompute/free: the tensor's slot */
    int nin;                   /* declared activation reads (in_t: RT_X for the block input) */
    int in[RT_MAXIO], in_t[RT_MAXIO];
    int nneed, need[RT_MAXG], need_t[RT_MAXG];
    int nalloc, alloc[RT_MAXG], alloc_t[RT_MAXG];
    int nfree, freed[RT_MAXG], freed_t[RT_MAXG];
    uint64_t temp_bytes;       /* scratch around the op (forward or backward) */
} remat_operands;

/* kind: a remat_instr_kind; layer: the block, -1 for globals */
void remat_operands_of(const remat_config *cfg, int kind, int layer, int t, remat_operands *o);

#endif
