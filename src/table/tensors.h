/*
 * tensors.h -- the tables of named tensors: the one place that says what
 * every op of a training step reads, writes, allocates, frees and costs.
 *
 * Every schedule, plan, report and test speaks in these names.  Each entry
 * gives a tensor's shape, the op that produces it (its kernel, its op class
 * and, for a matrix product, its (M, N, K)), the tensors that op reads,
 * what its backward reads, which gradient buffers its backward needs live,
 * allocates and frees, its FLOPs and its kernels' scratch.  Nothing else in
 * remat encodes those facts: the compiler (schedule/compile.c) decides what
 * to emit from them, the walker (schedule/walk.c) applies them -- for the
 * interpreter, the simulator, the validator and the cost pass alike -- the
 * op dispatcher (ops/ops.c) runs the entry's kernel on exactly the buffers
 * it declares, the cost model and the GEMM probe price it by its op class,
 * and the cluster planner multiplies it out.
 *
 * The architecture is data.  A table is selected by (architecture,
 * framework) (remat_table_of): GPT-2 and Llama in remat's own engine
 * (tensors.c), GPT-2 as Megatron-LM and PyTorch keep it (frameworks.c).
 * Every size is a formula over the config's named dimensions (remat_dims:
 * B, T, C, F, NH, KV, hs, V, Vp, ...), every kernel a value of enum
 * remat_kernel, every weight an index into the architecture's parameter
 * table (params.h).  The generic parts of remat (policy parser, compiler,
 * walker, planner, cost model) read a table's structure from the struct and
 * never name a tensor; the ids below (RT_*, RL_*) exist for the tables
 * themselves and for tests.
 *
 * Slots: a (layer, tensor) pair is one slot in a flat array.  The input of
 * block l is RT_X, which resolves to the block output of block l-1, or to
 * the embedding for l = 0.  Global tensors (the embedding, the head and the
 * gradient buffers) have one slot each, layer -1.
 *
 * This is the bottom layer with the config (config.c) and the parameter
 * tables (params.c): it includes nothing of remat but core/.
 */
#ifndef REMAT_TENSORS_H
#define REMAT_TENSORS_H

#include <stdint.h>
#include "remat.h"

/* ---- named dimensions and formulas over them ------------------------------- */

/* The dimensions of a config that formulas are written in.  0 is "no
 * factor", so an unused factor slot of a term is simply 0. */
enum remat_dim {
    RD_1 = 0,
    RD_B,      /* batch rows of the buffers */
    RD_T,      /* sequence length */
    RD_C,      /* model width (hidden size) */
    RD_F,      /* MLP width (GPT-2: 4C; Llama: intermediate_size) */
    RD_NH,     /* query heads */
    RD_KV,     /* key/value heads (NH without grouped-query attention) */
    RD_HS,     /* head size */
    RD_V,      /* vocabulary */
    RD_VP,     /* padded vocabulary */
    RD_TRI,    /* causal (query, key) pairs of one head: T (T + 1) / 2 */
    RD_ROWS,   /* rows of one LM-head chunk (B T when the head runs whole) */
    RD_MAXT,   /* the position embedding's length (max_seq) */
    RD_CP,     /* the context-parallel size (1 without) */
    /* mixture of experts (frameworks_moe.c; 0 in a dense config) */
    RD_E,      /* routed experts */
    RD_K,      /* experts per token (top-k) */
    RD_R,      /* routed token rows on one GPU: ceil(load k B T etp / tp), the load
                  remat_config_moe_rank_load's */
    RD_EF,     /* one routed expert's width on one GPU: moe_ffn_dim / etp */
    RD_SF,     /* the shared experts' width (sharded by tp: RT_F_TP) */
    RD_SC,     /* the shared experts' output width: C with shared experts, 0 without */
    RD_QKF,    /* 1 under a q/k norm (cfg->qk_norm), else 0: a factor that removes its terms */
    /* multi-latent attention (frameworks_mla.c; 0 without) and what varies per layer */
    RD_LQ,     /* q_lora_rank */
    RD_LKV,    /* kv_lora_rank */
    RD_DN,     /* qk_nope_dim: the part of a q/k head without RoPE */
    RD_DR,     /* qk_rope_dim: the part with RoPE (k's shared by the heads) */
    RD_DV,     /* v_head_dim */
    RD_BF16,   /* 1 under bf16, else 0: terms of the fp32 copies a bf16 model makes */
    RD_FP32,   /* 1 under fp32, else 0: terms that are a saved view's storage in fp32 only */
    RD_F32E,   /* activation elements one fp32 value takes: 1 (fp32) or 2 (bf16) */
    RD_MOEL,   /* 1 in a routed layer, 0 in a dense one (remat_dims_at) or a dense config */
    RD_SPG,    /* 1 under sequence parallelism with tp > 1 (a tensor all-gathered whole), else 0 */
    RD_B1,     /* 1 when the micro-batch is one sequence, else 0 (torch.matmul's batch dims then merge into
                  a view, and what it saves is its operand's storage, not a copy) */
    RD_COUNT
};

typedef struct remat_dims { uint64_t d[RD_COUNT]; } remat_dims;
/* The dimensions of cfg (d[RD_1] = 1): a routed layer's where cfg has
 * experts (the last layer's, remat_dims_at). */
void remat_dims_of(const remat_config *cfg, remat_dims *out);
/* The dimensions of block `layer` (-1: a global): a dense layer of a
 * dense prefix (layer < cfg->moe_first_dense) has no routed experts
 * (E, k, R, EF, MOEL 0) and its MLP is the shared experts' entries at
 * the dense width (SF = ffn_dim); every other layer is remat_dims_of's. */
void remat_dims_at(const remat_config *cfg, int layer, remat_dims *out);
/* 1 when block `layer` of cfg is a dense layer of a dense prefix */
static inline int remat_layer_dense(const remat_config *cfg, int layer)
{
    return layer >= 0 && layer < cfg->moe_first_dense;
}

/* k times the product of up to 5 dimensions; an expression is a sum of up
 * to 4 terms (unused terms have k = 0).  Written with RX()/RX_T().  k is 64
 * bits so that a constant term (no factor) holds any byte count: the tables
 * read from files (custom.c) are constants. */
#define RX_FACTORS 5
#define RX_TERMS 4
typedef struct remat_term { int64_t k; uint8_t d[RX_FACTORS]; } remat_term;
typedef struct remat_expr { remat_term t[RX_TERMS]; } remat_expr;
#define RX_T(k, ...) { (k), { __VA_ARGS__ } }
#define RX(...) { { __VA_ARGS__ } }
#define RX_0 { { { 0, { 0 } } } }

/* The value of e: exact in 64 bits (remat_config_check bounds every size
 * a table has), and as a double (FLOPs). */
uint64_t remat_expr_u64(const remat_expr *e, const remat_dims *d);
double remat_expr_f64(const remat_expr *e, const remat_dims *d);
/* 1 when e has no term */
int remat_expr_empty(const remat_expr *e);

/* ---- kernels and op classes ------------------------------------------------- */

/* Which kernel an entry's op runs (the dispatcher's switch, ops/ops.c).
 * Each takes its operands by role from the entry: in[] its forward reads,
 * w/b its parameters, gout/gin the gradients its backward reads and
 * writes.  RK_NONE: a framework table's entry, planned, never run. */
enum remat_kernel {
    RK_NONE = 0,
    RK_EMBED,        /* out = w[tokens] (+ b[positions]: a learned position embedding) */
    RK_LN_STATS,     /* LayerNorm mean, rstd of in[0] */
    RK_LN,           /* LayerNorm apply: in[0] with in[1]'s statistics, w, b */
    RK_RMS_STATS,    /* RMSNorm rstd of in[0] */
    RK_RMS,          /* RMSNorm apply: in[0] with in[1]'s rstd, w */
    RK_LINEAR,       /* out (M,N) = in[0] (M,K) w^T + b; RT_F_RESIDUAL: out = in[1] + drop(that) */
    RK_ROPE,         /* rotary embedding of the q, k columns of in[0] */
    RK_ATT_SCORES,   /* causal softmax probabilities (naive) or row logsumexp (flash) */
    RK_ATT_VALUES,   /* att v, heads merged; its backward is the whole attention core's */
    RK_GELU,         /* tanh GELU */
    RK_SWIGLU,       /* silu(gate) * up */
    RK_LMHEAD,       /* logits = in[0] w^T, fused softmax cross-entropy (whole or chunked) */
    RK_COUNT
};

/* How the cost model prices an op: the class says which rates apply. */
enum remat_opclass {
    RO_POINTWISE = 0,   /* its FLOPs at the pointwise rate, its bytes at the bandwidth (a roofline) */
    RO_LINEAR,          /* products of (M, N, K) at the probed GEMM time, plus pointwise work */
    RO_ATTENTION,       /* causal products of the attention tiles (B NH heads, T x T x hs)
                           at the tile rate, plus pointwise work */
    RO_LMHEAD,          /* products of (M, N, K) plus the softmax cross-entropy */
    RO_COUNT
};

/* ---- entries --------------------------------------------------------------- */

/* GPT-2's table (remat's engine) */
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

/* Llama's table (remat's engine) */
enum remat_llama_tid {
    RL_LN1_RSTD = 0, RL_LN1, RL_QKV, RL_QK_ROPE, RL_ATT, RL_ATTY, RL_RES2,
    RL_LN2_RSTD, RL_LN2, RL_GATE_UP, RL_SWIGLU, RL_RES3,
    RL_NBLOCK,
    RL_EMB = RL_NBLOCK, RL_LNF_RSTD, RL_LNF, RL_LOGITS,
    RL_D_RES, RL_D_LNF, RL_D_SWIGLU, RL_D_GATE_UP, RL_D_LN2, RL_D_ATTY, RL_D_QKV, RL_D_LN1, RL_D_BRANCH,
    RL_COUNT
};

#define RT_MAXIO 3                   /* activations one op reads */
#define RT_MAXG 2                    /* gradient buffers one backward needs / allocates / frees */
#define RT_MAXT 64                   /* tensors in any table (per-block ones: at most 32, keep masks are 32-bit) */
#define RT_MAXSCRATCH 8              /* scratch items of one entry */

/* flags of a table entry */
enum {
    RT_F_ZERO = 1,        /* allocated zero-filled (accumulated with +=) */
    RT_F_BRANCH = 2,      /* exists only when d_res must be masked (dropout > 0) or
                             rounded (bf16) before a residual branch's backward */
    RT_F_GEMM = 4,        /* framework tables: its FLOPs run at the matrix-product rate */
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
    RT_F_DROPOUT = 2048,  /* framework tables: exists only with dropout (masks, their outputs,
                             the masked branch gradient); activations have no bytes without */
    RT_F_RESIDUAL = 4096, /* RK_LINEAR: out = in[1] + dropout(product), on the residual stream;
                             its backward masks d_res into d_branch (when that exists) */
    RT_F_BF16 = 8192,     /* framework tables: exists only under bf16 (the fp32 copies a bf16
                             model makes, e.g. RMSNorm's x.float()); no bytes in fp32, where
                             the tensor is its input itself */
    RT_F_CP = 16384,      /* framework tables that model context parallelism (remat_table.cp):
                             its rows are the GPU's own tokens, seq / cp of them -- bytes, scratch
                             and FLOPs divided by cfg->cp (attention: its own queries against
                             every key, the causal pairs balanced over the GPUs) */
    RT_F_EXPERT = 32768,  /* framework tables: its rows are one GPU's routed tokens (RD_R), which
                             already hold its tensor- and expert-parallel share: neither its bytes
                             nor its FLOPs are divided by tp (the whole model's FLOPs multiply
                             them back by tp) */
    RT_F_A2A = 65536      /* its op runs the expert-parallel all-to-all (the dispatch, the combine):
                             the GPU's routed rows cross the EP group in its forward and backward */
    /* Bits 17-31 are free. */
};

/* What a framework's own recomputation options do with an entry (framework
 * tables; the cluster planner turns them into the framework's flags):
 * Megatron-LM's --recompute-modules (megatron/core/transformer/
 * transformer_config.py) drop a module's saved tensors and re-run its
 * region; torchtitan's selective AC saves the outputs of the ops its policy
 * names. */
enum {
    RM_CORE_ATTN = 1,        /* core_attn drops it */
    RM_CORE_ATTN_REGION = 2, /* core_attn's region re-runs it */
    RM_LAYERNORM = 4,        /* layernorm drops it (and re-runs it) */
    RM_MLP = 8,              /* mlp drops it */
    RM_MLP_REGION = 16,      /* mlp's region re-runs it */
    RM_SAC_SAVED = 32,       /* torchtitan's per-op selective AC saves it */
    /* mixture of experts (frameworks_moe.c): */
    RM_MOE = 64,             /* moe drops it (the whole MoE layer is checkpointed) */
    RM_MOE_REGION = 128,     /* moe's region re-runs it */
    RM_MOE_ACT = 256,        /* moe_act drops it (and re-runs it: the experts' activation) */
    RM_SHARED = 512,         /* shared_experts drops it */
    RM_SHARED_REGION = 1024, /* shared_experts' region re-runs it */
    /* multi-latent attention (frameworks_mla.c): */
    RM_MLA_UP = 2048,        /* mla_up_proj drops it (its CheckpointWithoutOutput runs under no_grad) */
    RM_MLA_UP_REGION = 4096, /* mla_up_proj's region re-runs it */
    RM_MLA_UP_KEEP = 8192    /* mla_up_proj's checkpoint keeps it: one of its inputs, else not saved */
};
#define RM_NMODULES 7        /* core_attn, layernorm, mlp, moe, moe_act, shared_experts, mla_up_proj */

/* Megatron-LM's fine-grained activation offloading (--fine-grained-activation-
 * offloading --offload-modules, megatron/core/transformer/transformer_config.py
 * and attention.py): each module's forward runs inside an offload context
 * that moves what it saves for the backward to the host (tensors of at least
 * min_offloaded_tensor_size elements).  An entry's omods bits name the modules
 * whose context saves it; remat_table.x_omods those that save the block input. */
enum {
    RF_QKV_LINEAR = 1,       /* qkv_linear: linear_qkv (with TE its fused norm: x, ln_out, rsigma) */
    RF_CORE_ATTN = 2,        /* core_attn: what the attention kernel saves (q, k, v, O, statistics) */
    RF_ATTN_PROJ = 4         /* attn_proj: linear_proj's input (O); only with core_attn, whose O it is */
};
#define RF_NMODULES 3
/* the name of offload module i, and its RF_* bit */
const char *remat_offload_module_name(int i, unsigned *bit);

/* tensor classes */
enum { RT_CLASS_BLOCK = 0, RT_CLASS_GLOBAL = 1, RT_CLASS_GRAD = 2 };

/* Element types.  RT_P_ACT follows the run's activation dtype (bf16: 2
 * bytes, fp32: 4); RT_P_F32 is fp32 whatever the dtype (statistics and
 * accumulators, where bf16's 8-bit mantissa would cost accuracy); RT_P_BYTE
 * is one byte (masks). */
enum { RT_P_ACT = 0, RT_P_F32 = 1, RT_P_BYTE = 2, RT_P_I64 = 3 /* token ids */ };

/* Kernel variants that store something else under the same name (flash
 * attention: the logsumexp; the chunked LM head: d(lnf)).  0: none. */
enum { RT_VAR_FLASH = 1, RT_VAR_CHUNKED = 2 };

/* When a scratch item exists: every bit set must hold (RW_ALWAYS: 0). */
enum { RW_ALWAYS = 0, RW_BF16 = 1, RW_FLASH = 2, RW_NAIVE = 4, RW_DROPOUT = 8, RW_CHUNKED = 16,
       RW_CP = 32 /* under context parallelism (cp > 1) */, RW_BWD = 128 /* the backward's scratch, not the forward's */,
       RW_EMU = 256 /* the machine runs bf16 products on fp32 copies (remat_machine.bf16_copies) */,
       RW_WHOLE = 512 /* the LM head runs whole (not chunked) */ };

/* What a scratch item is for.  RS_OP: the op's own scratch (the chunked
 * head's logits, attention's fp32 accumulators), which the dispatcher hands
 * the op whole.  The others are its kernels' workspace (kernels/gemm.h,
 * remat_ws): buffers a kernel needs for as long as it runs, which it would
 * otherwise keep outside the accounting allocator -- RS_SERIAL for calls on
 * the op's own thread, RS_THREAD for each thread of a parallel region
 * (elems is one thread's: the walker allocates remat_machine.threads of
 * them), RS_GEMM an RS_SERIAL item of elems plus the fp32 copies of the
 * entry's product (M K + N K + M N of its gemm dimensions).  They exist
 * only with a machine (remat_operands_of's mc). */
enum { RS_OP = 0, RS_SERIAL = 1, RS_THREAD = 2, RS_GEMM = 3 };

typedef struct remat_scratch {
    remat_expr elems;
    uint8_t prec;              /* RT_P_* */
    uint16_t when;             /* RW_* bits */
    uint8_t use;               /* RS_* */
} remat_scratch;

/* The kernels' attention tile (kernels/attn_tiles.h: ATT_BR x ATT_BC; ops.c
 * checks that they agree), for the formulas of the tiles' workspace. */
#define RT_ATT_BR 64
#define RT_ATT_BC 128

/* What the machine that runs the ops adds to their kernels' workspace:
 * the threads of the kernels' parallel regions (remat_get_threads) and
 * whether bf16 products run on fp32 copies of their operands
 * (kernels/gemm.h: remat_gemm_bf16_native() is 0, or the tests' hook forces
 * it).  The walker takes the running machine's (remat_machine_now,
 * schedule.h). */
typedef struct remat_machine {
    int threads;
    int bf16_copies;
} remat_machine;

/* The product of a linear layer or the LM head: out (M, N) = in (M, K) W^T,
 * W (N, K) the weight; its backward is two such products (the input's
 * gradient and the weight's). */
typedef struct remat_gemm_dims { remat_expr m, n, k; } remat_gemm_dims;

/* An entry's op, as it runs under one kernel choice: its FLOPs are
 * prods products (of gemm for RO_LINEAR/RO_LMHEAD; for RO_ATTENTION, of one
 * causal T x T x hs product per query head) plus extra pointwise FLOPs. */
typedef struct remat_cost {
    uint8_t fprod, bprod;      /* products of the forward and of the backward */
    remat_expr ffl, bfl;       /* FLOPs beyond the products: forward, backward */
} remat_cost;

typedef struct remat_tensor_def {
    const char *name;
    const char *op;            /* the producing op, e.g. "linear (c_attn)" */
    uint8_t cls;               /* RT_CLASS_* */
    uint32_t flags;            /* RT_F_* */
    uint16_t mods;             /* RM_*: the framework's recomputation modules it is in */
    uint16_t dmods;            /* RM_*: the same in a dense layer of a dense prefix (tables with
                                  remat_table.dense_mods; elsewhere mods holds everywhere) */
    uint8_t omods;             /* RF_*: the framework's offload modules that save it */
    remat_expr shape;          /* elements of one copy */
    const char *shape_text;    /* e.g. "(B,T,3C)" */
    uint8_t prec;              /* element type (RT_P_*) */
    /* the op */
    uint8_t kernel;            /* enum remat_kernel */
    uint8_t opc;               /* enum remat_opclass */
    int8_t w, b;               /* its weight and bias: parameter indices (params.h), -1 none */
    int8_t site;               /* the dropout site of its output (REMAT_SITE_*), -1 none */
    remat_gemm_dims gemm;      /* RO_LINEAR, RO_LMHEAD */
    remat_cost cost;
    int8_t fwd_in[RT_MAXIO];   /* activations the forward reads (RT_NONE ends; RT_X: block input) */
    int8_t bwd_in[RT_MAXIO];   /* activations the backward reads */
    int8_t has_bwd;            /* 0: no backward of its own (statistics; att: fused into atty's) */
    int8_t g_need[RT_MAXG];    /* buffers live when the backward starts: it reads or += them */
    int8_t g_alloc[RT_MAXG];   /* allocated by the backward, before it runs (it writes them) */
    int8_t g_free[RT_MAXG];    /* freed by the backward, after it runs (it consumed them) */
    int8_t gout;               /* the backward's roles: the gradient of this tensor it reads ... */
    int8_t gin;                /* ... and the gradient it writes for its (first) input; RT_NONE */
    remat_scratch scratch[RT_MAXSCRATCH];   /* its kernels' scratch, allocated around the op */
    /* the variant (flash attention, the chunked LM head): what differs */
    uint8_t variant;
    remat_expr vshape;
    const char *vshape_text;
    const char *vop;
    uint8_t vprec;
    remat_cost vcost;
} remat_tensor_def;

typedef struct remat_table {
    const char *name;
    remat_arch arch;
    int count;                 /* tensor ids [0, count) */
    int nblock;                /* per-block tensors [0, nblock), forward order; nblock-1: the output */
    int first_grad;            /* globals [nblock, first_grad); gradient buffers [first_grad, count) */
    int emb;                   /* the global tensor that is block 0's input */
    int d_res;                 /* the residual-stream gradient (the head allocates it) */
    int d_branch;              /* the masked residual-branch gradient, or RT_NONE */
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
    /* A table read from a file (custom.c) states what the run holds besides
     * activations -- parameters, gradients, optimizer state -- as a number
     * (remat_plan_static_bytes); remat's own and the framework tables leave
     * has_static 0 (the parameter table's formulas give it). */
    int has_static;
    uint64_t static_bytes;
    /* 1: the table models context parallelism (its per-token entries RT_F_CP,
     * the ring's buffers as RW_CP scratch); 0: cfg->cp > 1 is refused */
    int cp;
    uint8_t x_omods;           /* RF_*: the offload modules whose context saves the block input */
    /* 1: a dense layer of a dense prefix (remat_layer_dense) is in the framework's modules by
     * its entries' dmods, not mods (the MLA tables: Megatron builds a dense layer's MLP and
     * norms otherwise than a routed layer's) */
    int dense_mods;
} remat_table;

/* remat's own tables (the ones the engine runs) */
extern const remat_table remat_table_gpt2, remat_table_llama;
/* the framework tables: GPT-2 (frameworks.c), Llama (frameworks_llama.c),
 * one per attention backend: flash (the fused kernels: Q, K, V, O and the
 * fp32 softmax statistics) and unfused (the T x T probabilities); tables
 * read from files: custom.c */
extern const remat_table remat_table_megatron, remat_table_pytorch;
extern const remat_table remat_table_megatron_llama, remat_table_megatron_llama_unfused;
extern const remat_table remat_table_pytorch_llama, remat_table_pytorch_llama_eager;
/* mixture of experts (frameworks_moe.c): Megatron-core's MoE layer under TE
 * with fused attention */
extern const remat_table remat_table_megatron_moe, remat_table_pytorch_moe;
/* multi-latent attention (frameworks_mla.c): DeepSeek-V3's layers, dense or
 * routed, on Megatron-core under TE and in transformers' eager model */
extern const remat_table remat_table_megatron_mla, remat_table_pytorch_mla;
/* One MoE layer's parameters, whole: the router's, the routed experts'
 * (sharded by EP x ETP) and the shared experts' (by tp); cfg has experts. */
void remat_moe_layer_params(const remat_config *cfg, uint64_t *router, uint64_t *routed, uint64_t *shared);

/* ---- tables built at run time from data (custom.c) --------------------------
 * A chain of identical blocks described by numbers, not formulas: what one
 * block keeps for its backward (its saved tensors split into the expensive
 * ones, read from the block input, and the cheap ones, read from the
 * expensive ones: recomputing them is nearly free), its output (the next
 * block's input), and what lies outside the chain.  remat_table_read
 * (src/io/tablefile.c) parses the file and registers the table; the config
 * names it by id (framework REMAT_FRAMEWORK_TABLE, cfg->table) and
 * remat_table_of finds it here, so that the compiler, the simulator and the
 * planner run on it as on any table.  Entries, per block: "saved" (or
 * "expensive" and "cheap" when selective), "output"; globals "input" (the
 * chain's input), "head" (what the chain's ops outside keep, before and
 * after it) and the gradient buffer "d_output". */
/* One block's own numbers (a chain whose blocks differ) */
typedef struct remat_table_spec_block {
    uint64_t expensive, cheap; /* its saved bytes (selective 0: all in expensive) */
    uint64_t output;           /* its output, the next block's input */
    double fwd_ms, cheap_fwd_ms, bwd_ms;
    int pinned;                /* 1: the junction of two chains (tablefile.c): kept whole, in no segment */
    int chain;                 /* the file's chain it is of (a junction: the chain before it) */
} remat_table_spec_block;
typedef struct remat_table_spec_context {
    uint64_t bytes;
    int made_by;               /* the block that makes it (plan numbering), -1 before the first */
    int first, n;              /* its blocks: ctx_blocks[first, first + n) */
} remat_table_spec_context;
typedef struct remat_table_spec {
    const char *name;          /* for messages (copied) */
    int selective;             /* two saved entries (keep-sets that keep one of them) */
    uint64_t expensive, cheap; /* a block's saved bytes (selective 0: all in expensive) */
    uint64_t output;           /* the block output, the chain's input, d_output */
    uint64_t head;             /* kept outside the chain */
    uint64_t reserve;          /* the head's scratch (tablefile.c says why) */
    uint64_t static_bytes;     /* parameters + gradients + optimizer state */
    int blocks;                /* the file's chain length (for remat_table_get_info) */
    int64_t outside;           /* kept bytes - stored bytes, under every plan */
    uint64_t context, call;    /* the file's checkpoint object (remat_table_info) */
    /* op times, ms: a block's forward (cheap_ms of it the cheap saved
     * tensors', selective) and backward; the chain input's ops and the
     * head's; the optimizer step */
    double block_fwd_ms, cheap_fwd_ms, block_bwd_ms, input_fwd_ms, input_bwd_ms, head_fwd_ms, head_bwd_ms, update_ms;
    /* A chain whose blocks differ: per[0..blocks) their own numbers (copied;
     * NULL: every block the above), the chain's input and d_output's bytes
     * (the largest boundary: one gradient buffer serves every block).  The
     * entries' constant bytes, and the times above, are then the largest
     * block's (remat_tensor_bytes); remat_tensor_bytes_at gives a layer's. */
    const remat_table_spec_block *per;
    uint64_t input, dout;
    /* several chains made one (tablefile.c): their names, each ended by a
     * NUL, nchains of them in names_len bytes (copied; NULL: one chain) */
    const char *chain_names;
    size_t names_len;
    int nchains;
    /* version 3 (tablefile.c): the working sets a step allocates for a while beyond what the table
     * keeps, measured (has_work 0: none given, and the device peak is the reserve's, devpeak.c):
     * work[0..blocks) per block its backward's (a junction: its chains' head's and input's),
     * head_work the last head's forward and backward, input_work the chain input's backward,
     * optimizer_work the optimizer step's; input_saved what the ops before the first chain keep
     * (in head, which the simulator frees at the head's backward); held what the backward holds
     * from the head's backward to the input's (a tied embedding's gradient) */
    int has_work;
    const uint64_t *work;
    uint64_t head_work, input_work, optimizer_work, input_saved, held;
    /* version 3's contexts: tensors blocks take besides their input that only the checkpoints
     * running them hold (tree.c counts one when a checkpoint runs a block that takes it and
     * begins after the block that makes it): ctx_blocks[first, first + n) are its blocks */
    const remat_table_spec_context *ctx;
    int nctx;
    const int *ctx_blocks;
    int nctx_blocks;
} remat_table_spec;
/* Registers the table of s under key (a hash of its source): the same key
 * again returns the same id with one more reference.  REMAT_ERR_NOMEM,
 * REMAT_ERR_INVALID for a name over REMAT_TABLE_NAME_MAX bytes, or
 * REMAT_ERR_RANGE when REMAT_TABLES_MAX tables are loaded.  Thread-safe, as
 * are the lookups below (one lock). */
#define REMAT_TABLES_MAX 4096
/* The longest name a table keeps (bytes; a longer one is REMAT_ERR_INVALID;
 * the file's reader takes no longer string). */
#define REMAT_TABLE_NAME_MAX 255
remat_status remat_table_custom_add(const remat_table_spec *s, uint64_t key, int *id);
/* Drops one reference; the last frees the table (its id then names none). */
void remat_table_custom_release(int id);
/* The table of id and its spec, or NULL. */
const remat_table *remat_table_custom(int id);
const remat_table_spec *remat_table_custom_spec(int id);
/* The key id was registered under (0 for none). */
uint64_t remat_table_custom_key(int id);
/* The spec's op times by tensor id (fwd[t], bwd[t] for t < first_grad): the
 * block's forward on its saved entries -- all of it when they are
 * recomputed, as a framework re-runs a checkpointed block -- and none on
 * the output, whose backward is the block's. */
void remat_table_custom_times(int id, double *fwd, double *bwd);
/* A table whose blocks differ: block `layer`'s bytes of per-block entry t
 * into *bytes, or its forward (bwd 0) or backward time into *ms; 1 when it
 * has them (id such a table, t a per-block entry, layer in range), else 0. */
int remat_table_custom_layer_bytes(int id, int t, int layer, uint64_t *bytes);
int remat_table_custom_layer_ms(int id, int t, int layer, int bwd, double *ms);
/* The kinds of block of id's chain (blocks of the same bytes: saved entries
 * and output): *nkinds of them (1 when its blocks are the same, 0 for no
 * table), and per block its kind, numbered by first appearance (NULL when
 * the blocks are the same). */
const int *remat_table_custom_kinds(int id, int *nkinds);
/* 1 when block `layer` of id's chain is the junction of two chains (kept
 * whole, in no segment), else 0 */
int remat_table_custom_pinned(int id, int layer);
/* The name of chain i of id's table and the chain of block `layer` (NULL,
 * -1 when it is of one chain or out of range) */
const char *remat_table_custom_chain_name(int id, int i);
int remat_table_custom_chain_of(int id, int layer);

/* 1 when two configs are the same run shape (every field equal, defaults
 * resolved): what profiles, traces and run times are keyed by. */
int remat_config_same(const remat_config *a, const remat_config *b);

/* The table a config uses: by (arch, framework) and, for Llama's framework
 * tables, the attention backend; NULL for a pair that has none
 * (remat_config_check refuses it). */
const remat_table *remat_table_of(const remat_config *cfg);
/* The index of the tensor named name in tb, or -1 (names are unique in a
 * table; callers that want a per-block tensor check < nblock). */
int remat_table_find(const remat_table *tb, const char *name);

/* bytes of one copy of tensor t (no overflow: config already checked) */
uint64_t remat_tensor_bytes(const remat_config *cfg, int t);
/* The bytes of tensor t of block `layer` (-1: a global): remat_tensor_bytes
 * but for a table read from a file whose blocks differ and for a dense
 * prefix's layers (remat_dims_at); a gradient buffer with layer >= 0: what
 * the backward of that block allocates (the walker's, for a dense prefix). */
uint64_t remat_tensor_bytes_at(const remat_config *cfg, int t, int layer);
/* FLOPs of tensor t's forward op (bwd 0) or backward op in block `layer` */
double remat_tensor_flops_at(const remat_config *cfg, int t, int layer, int bwd);
/* its elements per token row: bytes / (element size B T), for the
 * kernels' row strides */
uint64_t remat_tensor_row_elems(const remat_config *cfg, int t);
/* its element type under cfg: REMAT_DTYPE_FP32 or REMAT_DTYPE_BF16
 * (RT_P_BYTE tensors: -1) */
int remat_tensor_dtype(const remat_config *cfg, int t);
/* scratch a forward op, or a backward op, needs while it runs on machine
 * mc (the LM head's chunk of logits, attention's fp32 accumulators under
 * bf16, its kernels' workspace; mc NULL: without the workspace); the
 * walker allocates it around the op */
uint64_t remat_tensor_fwd_temp_bytes(const remat_config *cfg, const remat_machine *mc, int t);
uint64_t remat_tensor_bwd_temp_bytes(const remat_config *cfg, const remat_machine *mc, int t);
/* rows of one chunk of the LM head (B*T when it runs whole) */
int remat_lmhead_rows(const remat_config *cfg);
/* 1 when tensor t exists in this config (gradient buffers of dropout) */
int remat_tensor_exists(const remat_config *cfg, int t);
/* 1 when cfg's kernel choices select t's variant */
int remat_tensor_variant_on(const remat_config *cfg, int t);
/* the op as cfg's kernel choices run it */
const remat_cost *remat_tensor_cost(const remat_config *cfg, int t);
/* the shape text and op description under cfg's kernel choices */
const char *remat_tensor_shape_text(const remat_config *cfg, int t);
const char *remat_tensor_op_text(const remat_config *cfg, int t);
/* FLOPs of tensor t's forward op, and of its backward op */
double remat_tensor_fwd_flops(const remat_config *cfg, int t);
double remat_tensor_bwd_flops(const remat_config *cfg, int t);
/* FLOPs of one of t's products (RO_LINEAR, RO_LMHEAD: 2 M N K; RO_ATTENTION:
 * 2 hs for every causal pair of every query head), 0 for other classes;
 * divided by the tensor-parallel size where the table shards it */
double remat_tensor_prod_flops(const remat_config *cfg, int t);
/* t's product shape (M, N, K) under cfg (RO_LINEAR, RO_LMHEAD); 0 elsewhere */
void remat_tensor_gemm(const remat_config *cfg, int t, uint64_t *M, uint64_t *N, uint64_t *K);
/* elements of t's weight (N K of its product), 0 for ops without one */
uint64_t remat_tensor_weight_elems(const remat_config *cfg, int t);
/* The FLOPs of one AdamW update, 12 per parameter (params.c: it counts
 * them); 0 for framework tables, whose optimizer the cluster model prices
 * per iteration. */
double remat_update_flops(const remat_config *cfg);
/* The FLOPs of one training step of the whole model under cfg as the table
 * counts them -- every entry's forward and backward once, no recomputation,
 * all tensor-parallel ranks and pipeline stages together -- exactly, in 128 bits
 * (the cluster planner's model FLOPs; GPT-2's framework tables give
 * Korthikanti et al.'s Appendix A, 72 B L s h^2 + 12 B L s^2 h + 6 B s h V). */
__extension__ typedef unsigned __int128 remat_u128;
remat_u128 remat_table_step_flops(const remat_config *cfg);
/* bytes of the table's resident globals (remat_table.res) under cfg */
uint64_t remat_table_resident_bytes(const remat_config *cfg);
/* per-block tensors a policy keeps unless told otherwise: all but the
 * RT_F_TRANSIENT ones */
uint32_t remat_keep_default(const remat_table *tb);
/* the mask of per-block tensors whose RM_* bits meet m (in a routed or uniform layer) */
uint32_t remat_table_mods_mask(const remat_table *tb, unsigned m);
/* the same in a dense layer of a dense prefix (dense 1) or in the others (0) */
uint32_t remat_table_mods_mask_kind(const remat_table *tb, unsigned m, int dense);
/* RM_* bits of the entries Megatron's recompute module i keeps that are otherwise not
 * saved (its checkpoint's inputs: mla_up_proj's k_pos_emb under SP) */
unsigned remat_module_keeps(int i);
/* the name of Megatron's recompute module i (RM_NMODULES of them), and the
 * RM_* bits of what it drops and of the region it re-runs */
const char *remat_module_name(int i, unsigned *drop, unsigned *region);

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
    uint64_t temp_bytes;       /* scratch around the op (forward or backward), all of it: */
    uint64_t op_bytes;         /*   the op's own (RS_OP items), at its start; then, when there is any */
    uint64_t ws_serial;        /*   its kernels' serial workspace, at round64(op_bytes), and */
    uint64_t ws_thread;        /*   ws_threads slices of ws_thread bytes after it */
    int ws_threads;            /* (the last three multiples of 64: temp_bytes = round64(op_bytes) + ws_serial +
                                   ws_threads ws_thread when there is workspace, op_bytes when not) */
} remat_operands;

/* kind: a remat_instr_kind; layer: the block, -1 for globals; mc: the
 * machine that runs the op (its kernels' workspace), or NULL */
void remat_operands_of(const remat_config *cfg, const remat_machine *mc, int kind, int layer, int t,
                       remat_operands *o);

#endif
