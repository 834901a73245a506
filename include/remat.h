/*
 * remat.h -- the public API of remat: what each function takes, returns and
 * guarantees.  What remat is and how it works (policies, schedules, the
 * simulator, exact memory and exact recomputation) is the README's guide
 * (README, "How it works"); a comment here that points to a README section
 * or a docs/ page leaves the explanation there.
 *
 * Conventions
 *   - Every function that can fail returns a remat_status.  On failure the
 *     output pointers are left NULL, and a one-line message is available from
 *     remat_errmsg() (the calling thread's last error) and, for functions
 *     that take a handle, from that handle's *_error() function.
 *   - Handles are opaque; each X_create has an X_free that accepts NULL.
 *   - The library never prints and never exits.
 *   - Sizes are in bytes unless a name says otherwise.
 */
#ifndef REMAT_H
#define REMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* REMAT_API marks the library's interface: every function declared here and
 * in remat_testing.h, and nothing else.  libremat is built with
 * -fvisibility=hidden, so these are the only symbols libremat.so exports
 * (as zstd.h does with ZSTDLIB_API); tests/cli_symbols.sh checks it. */
#ifndef REMAT_API
#  if defined(__GNUC__) && __GNUC__ >= 4
#    define REMAT_API __attribute__((visibility("default")))
#  else
#    define REMAT_API
#  endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------ */
/* 1.0.0: the architecture became data (remat_config.arch, the parameter
 * tables replaced enum remat_param): an ABI break, hence libremat.so.1.
 * 1.1.0: tables read from files (REMAT_FRAMEWORK_TABLE, remat_config.table
 * in what was the struct's tail padding, remat_table_load ...) and
 * remat_plan_explain: additions only.
 * 2.0.0: context parallelism and activation offload (remat_config.cp,
 * the instruction kinds REMAT_I_OFFLOAD and REMAT_I_RELOAD, the host's
 * bytes in remat_sim, remat_instr_info and remat_layer_info, the host link
 * in remat_device, remat_cluster.host_mem): structs grew, an ABI break,
 * hence libremat.so.2.
 * 3.0.0: mixture of experts (remat_config's expert fields: n_experts,
 * moe_topk, the widths, ep, etp, moe_load, moe_capacity, qk_norm; the
 * cluster's and its rows' MoE fields), tables of version 2 (chains whose
 * blocks differ, several chains: remat_table_block_kinds), plan trees and
 * table predictions for the binding (remat_plan_tree, remat_table_evaluate,
 * remat_table_optimal, remat_table_min_kept, remat_abi_size), the device
 * peak of a table's plan (remat_table_row_device_peak,
 * remat_table_optimal_device), remat_gemm_isa: remat_config grew, an ABI
 * break, hence libremat.so.3.
 * 4.0.0: remat_table_row grew device_peak_bytes at its end (a plan that
 * re-runs no block peaks without the re-run's room): a caller-allocated
 * struct grew, an ABI break, hence libremat.so.4; with it
 * remat_cluster_overlaps (Megatron-LM's overlap flags of a layout),
 * remat_graph_peak (a joint graph's peak for a recomputed set) and
 * remat_graph_solve (a greedy search for a recomputed set that fits a
 * budget).
 * 4.1.0: remat_graph_search (exact where tractable, else the greedy), an
 * addition; the soname stays libremat.so.4.
 * 5.0.0: DeepSeek-V3 (issue 27): multi-latent attention and a dense
 * prefix before the mixture-of-experts layers (remat_config's q_lora_rank,
 * kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim, moe_first_dense,
 * moe_groups, moe_group_topk, moe_scaling) and the stage that peaks in
 * remat_cluster_row (peak_stage, its parameter bytes): structs grew, an
 * ABI break, hence libremat.so.5; with it the layout search of a world of
 * GPUs, additions: remat_cluster_search, remat_cluster_layouts_free and
 * remat_cluster_usable; and tables of version 3 (the working set
 * measured for each block, contexts, several chains: remat_torch.measure
 * writes them; versions 1 and 2 read as before); and for
 * remat_torch.compile_budget (issue 26): remat_graph_node.candidate may be
 * REMAT_GRAPH_ALWAYS (a node every set recomputes), re-runs are simulated
 * in graph order (as torch inserts them), remat_graph_states and
 * remat_graph_group, REMAT_GRAPH_EXACT_LAYERS and REMAT_GRAPH_LAYERS
 * (searches over a chain of layers), remat_abi_size knows
 * "remat_graph_node" and "remat_graph_group"; for Hopper (issue 28):
 * remat_device grew efficiency at its end (each device's matrix-product
 * share, fitted to published step times where there are some) and
 * remat_cluster_efficiency (the share a cluster uses), an addition; the
 * time model hides the tensor-parallel collectives that
 * REMAT_OVERLAP_TP_COMM overlaps with their products, and remat_cluster
 * grew no_tp_comm_overlap at its end (a run without that overlap).
 * 5.1.0: remat_cluster.grad_reduce_bf16 (Megatron-LM's
 * --grad-reduce-in-bf16), in what was remat_cluster's tail padding: its
 * size is unchanged, and remat_gemm_bf16_native: additions; the soname
 * stays libremat.so.5. */
#define REMAT_VERSION_MAJOR 5
#define REMAT_VERSION_MINOR 1
#define REMAT_VERSION_PATCH 0
#define REMAT_VERSION_STRING "5.1.0"
/* The version of the linked library, e.g. "5.1.0". */
REMAT_API const char *remat_version(void);

/* ---- status codes: values are fixed forever; new ones are appended ------ */
typedef enum remat_status {
    REMAT_OK = 0,
    REMAT_ERR_INVALID = 1,     /* a bad argument, flag or configuration value */
    REMAT_ERR_NOMEM = 2,       /* an allocation failed (or was made to fail) */
    REMAT_ERR_IO = 3,          /* a file could not be opened, read or written */
    REMAT_ERR_FORMAT = 4,      /* a file's contents are malformed or corrupt */
    REMAT_ERR_RANGE = 5,       /* a size overflows or a value is out of range */
    REMAT_ERR_POLICY = 6,      /* a recomputation policy string is invalid */
    REMAT_ERR_SCHEDULE = 7,    /* a schedule failed validation */
    REMAT_ERR_VERIFY = 8,      /* --verify-recompute found a mismatch */
    REMAT_ERR_NONFINITE = 9,   /* a loss or gradient is NaN or Inf */
    REMAT_ERR_BUDGET = 10,     /* nothing fits in the memory budget */
    REMAT_ERR_STATE = 11,      /* a call made out of order */
    REMAT_ERR_COMM = 12        /* a data-parallel exchange between ranks failed (MPI) */
} remat_status;

/* A short constant name for a status, e.g. "invalid argument". */
REMAT_API const char *remat_status_str(remat_status st);
/* The calling thread's last error message ("" when none). */
REMAT_API const char *remat_errmsg(void);

/* Threads for remat's OpenMP kernels and for the BLAS.  n <= 0: all cores.
 * Results are bitwise reproducible for a fixed thread count. */
REMAT_API void remat_set_threads(int n);
REMAT_API int remat_get_threads(void);

/* The engine of every matrix product.  REMAT_GEMM_ONEDNN (the default
 * build's default): oneDNN, dnnl_sgemm for fp32 and the matmul primitive
 * for bf16.  REMAT_GEMM_CBLAS: the CBLAS (OpenBLAS), fp32 only.  A build
 * made with `make GEMM=cblas` has only the second. */
typedef enum remat_gemm_engine { REMAT_GEMM_ONEDNN = 0, REMAT_GEMM_CBLAS = 1 } remat_gemm_engine;
/* REMAT_ERR_INVALID (the message says how to build it) when this build
 * lacks the engine. */
REMAT_API remat_status remat_gemm_set(remat_gemm_engine e);
REMAT_API remat_gemm_engine remat_gemm_get(void);
/* 1 when this build has engine e */
REMAT_API int remat_gemm_available(remat_gemm_engine e);
/* "onednn" or "cblas" (the "gemm" field of remat's JSON) */
REMAT_API const char *remat_gemm_name(remat_gemm_engine e);
/* The instruction set oneDNN dispatches its kernels to on this CPU
 * (dnnl_get_effective_cpu_isa), e.g. "avx512_core_bf16" (AVX-512 with BF16
 * dot products) or "avx512_core_amx" (AMX tiles); "" in a build without
 * oneDNN.  A constant string, never NULL ("gemm_isa" of remat bench's JSON). */
REMAT_API const char *remat_gemm_isa(void);
/* 1 when oneDNN makes bf16 matrix products on this CPU (AVX-512 and up, in
 * oneDNN 2.6); 0 where remat runs each bf16 product on fp32 copies of its
 * operands: the same exact products, at fp32's rate plus the copies, so a
 * bf16 step is slower than an fp32 one there and worth it only for its
 * memory (README, "GEMM engines and bf16 mixed precision").  1 in a build
 * without oneDNN, whose CBLAS engine refuses bf16 (added in 5.1.0). */
REMAT_API int remat_gemm_bf16_native(void);

/* ---- configuration ---------------------------------------------------------
 * The model and the shape of one training step.  Two architectures
 * (remat_config.arch), each a table of tensors and a table of parameters
 * (README, "Architecture"; their tensors: README, "How it works"):
 *   - GPT-2: learned position embedding, pre-LN blocks with LayerNorm, tanh
 *     GELU MLP of width 4C, biases everywhere, multi-head attention, the LM
 *     head tied to the token embedding;
 *   - Llama (Hugging Face's LlamaForCausalLM): RMSNorm, rotary position
 *     embeddings (RoPE), the SwiGLU MLP down(silu(gate(x)) * up(x)) of width
 *     F, grouped-query attention (KV key/value heads, each serving NH/KV
 *     consecutive query heads), no biases, the LM head tied or untied.
 * The vocabulary is padded (remat_config_padded_vocab); padded rows are
 * never predicted. */
/* Precision of activations and GEMM operands (mixed precision as PyTorch's
 * autocast does it: master weights, gradients and AdamW state stay fp32). */
typedef enum remat_dtype { REMAT_DTYPE_FP32 = 0, REMAT_DTYPE_BF16 = 1 } remat_dtype;

/* remat_config.attention: the attention kernel. */
typedef enum remat_attention {
    REMAT_ATTENTION_NAIVE = 0,  /* att holds the (B,NH,T,T) probabilities */
    REMAT_ATTENTION_FLASH = 1   /* att holds the (B,NH,T) logsumexp; the score
                                   tiles are recomputed inside the kernels */
} remat_attention;

/* Whose saved tensors a config describes (--framework): the tensor table
 * the schedule compiler, simulator and planner run on.  Only REMAT trains
 * (remat_model_create refuses the others); MEGATRON and PYTORCH are for
 * planning runs of those frameworks (see "cluster planning" below). */
typedef enum remat_framework {
    REMAT_FRAMEWORK_REMAT = 0,    /* remat's own engine */
    REMAT_FRAMEWORK_MEGATRON = 1, /* GPT-2: Megatron-LM's GPT layer as Korthikanti et al. 2022
                                     (arXiv 2205.05198) Section 4 count it: 2-byte activations
                                     (bf16), 1-byte dropout masks, LayerNorm statistics left out;
                                     Llama: Megatron-core's layer under Transformer Engine, with
                                     attention FLASH (TE's fused attention) or NAIVE (unfused) */
    REMAT_FRAMEWORK_PYTORCH = 2,  /* what autograd saves for a plain PyTorch GPT-2 block
                                     (nn.Linear, F.layer_norm, explicit softmax attention,
                                     F.gelu(approximate='tanh'), nn.Dropout as run on a GPU);
                                     Llama: Hugging Face's LlamaForCausalLM, eager (NAIVE) or
                                     SDPA's flash backend (FLASH) */
    REMAT_FRAMEWORK_TABLE = 3     /* a table read from a file (remat_table_load): any model's
                                     chain of identical blocks, as measured; remat_config.table
                                     names it */
} remat_framework;

/* The model family: which tensor table and which parameter table a config
 * uses (with its framework). */
typedef enum remat_arch {
    REMAT_ARCH_GPT2 = 0,          /* "gpt2" */
    REMAT_ARCH_LLAMA = 1          /* "llama" */
} remat_arch;
/* "gpt2", "llama" (Hugging Face's model_type); "?" for another value */
REMAT_API const char *remat_arch_name(remat_arch a);
/* REMAT_ERR_INVALID (naming the known ones) for an unknown name */
REMAT_API remat_status remat_arch_parse(const char *name, remat_arch *out);

/* Rotary embedding frequency scaling (Hugging Face's rope_scaling). */
typedef enum remat_rope_type {
    REMAT_ROPE_DEFAULT = 0,       /* none: inv_freq_i = theta^(-2i/hs) */
    REMAT_ROPE_LLAMA3 = 1         /* "llama3" (Llama 3.1 and later): low frequencies divided
                                     by factor, high ones kept, a smooth ramp between */
} remat_rope_type;
typedef struct remat_rope_scaling {
    remat_rope_type type;
    double factor;                /* llama3: e.g. 8 (> 0) */
    double low_freq_factor;       /* llama3: e.g. 1 (> 0) */
    double high_freq_factor;      /* llama3: e.g. 4 (> low_freq_factor) */
    int original_max_position;    /* llama3: original_max_position_embeddings, e.g. 8192 */
} remat_rope_scaling;

/* A config describes the whole model (REMAT_STAGE_WHOLE) or the first of
 * several pipeline stages (REMAT_STAGE_FIRST: its blocks only; the LM head
 * lives on the last stage, so the head's tensors have no bytes). */
enum { REMAT_STAGE_WHOLE = 0, REMAT_STAGE_FIRST = 1 };

typedef struct remat_config {
    int n_layer;      /* L  >= 1 */
    int n_embd;       /* C  >= 1 (GPT-2: divisible by n_head) */
    int n_head;       /* NH >= 1 */
    int vocab;        /* V  >= 2 */
    int max_seq;      /* maxT >= seq; GPT-2: size of the position embedding */
    int batch;        /* B  >= 1 */
    int seq;          /* T  >= 1 */
    float dropout;    /* p in [0, 1): attention probabilities and residual branches */
    remat_attention attention; /* REMAT_ATTENTION_NAIVE (default) or _FLASH */
    int lmhead_chunk; /* 0: the LM head materialises (B,T,Vp) logits; N > 0: logits, loss
                         and their gradient are computed N rows at a time, in one pass,
                         and logits holds d(lnf) (B,T,C) instead */
    remat_dtype dtype; /* REMAT_DTYPE_FP32 or REMAT_DTYPE_BF16: the precision of the
                         activations and of the GEMM operands (the tensor table says
                         which tensors stay fp32); weights, gradients and AdamW state
                         are fp32 in both */
    remat_framework framework; /* the tensor table (default REMAT_FRAMEWORK_REMAT) */
    int tp;           /* tensor-parallel size T (framework tables only; 0 and 1 both mean none):
                         the tensors Megatron shards across T GPUs are divided by T; heads
                         must be divisible by T */
    int sp;           /* 1: sequence parallelism (framework tables): the LayerNorm and
                         dropout regions are divided by T too; seq must be divisible by T */
    int stage;        /* REMAT_STAGE_WHOLE (default) or REMAT_STAGE_FIRST (framework tables) */
    /* The architecture.  Every field below 0 means the architecture's own
     * value (the accessors after this struct give it). */
    remat_arch arch;  /* REMAT_ARCH_GPT2 (0) or REMAT_ARCH_LLAMA */
    int n_kv_head;    /* KV: key/value heads, dividing n_head; 0: n_head (GPT-2: must be) */
    int ffn_dim;      /* F: the MLP width; 0: GPT-2's 4C, or Llama's 256 ceil(8C/3 / 256) */
    int head_dim;     /* hs: the head size; 0: C / NH (GPT-2: must be) */
    double rope_theta;               /* Llama: the RoPE base; 0: 10000 */
    remat_rope_scaling rope_scaling; /* Llama: type 0 for none */
    double norm_eps;  /* the norm's epsilon; 0: 1e-5 for GPT-2's LayerNorm (the only value
                         it takes), 1e-6 for Llama's RMSNorm (Hugging Face's default) */
    int tie_embeddings; /* Llama: 1 ties the LM head to the token embedding
                           (tie_word_embeddings); GPT-2 is always tied (0 or 1) */
    int table;        /* REMAT_FRAMEWORK_TABLE: the id of a loaded table (remat_table_load),
                         valid in this process until remat_table_unload; 0 otherwise */
    int cp;           /* context-parallel size (Megatron's --context-parallel-size; 0 and 1 both
                         mean none): the sequence is split over cp GPUs, two chunks each
                         (Megatron's load-balanced causal split: seq divisible by 2 cp), and the
                         attention exchanges K/V around the ring (Transformer Engine's
                         AttnFuncWithCPAndKVP2P).  Framework tables that model it only: Llama on
                         Megatron-LM with flash attention */
    /* Mixture-of-experts (Llama architecture on a framework table; issue 27,
     * src/table/frameworks_moe.c): every layer's MLP is a router over
     * n_experts routed experts of width moe_ffn_dim, moe_topk of them per
     * token, beside shared experts of total width moe_shared_dim.  0 experts:
     * the dense MLP (every field below is then 0). */
    int n_experts;    /* E: routed experts (Megatron --num-experts), 0: dense */
    int moe_topk;     /* k in [1, E] (--moe-router-topk) */
    int moe_ffn_dim;  /* one routed expert's width (--moe-ffn-hidden-size) */
    int moe_shared_dim; /* the shared experts' width, 0: none (--moe-shared-expert-intermediate-size) */
    int ep;           /* expert-parallel size (--expert-model-parallel-size; 0 and 1: none), dividing E */
    int etp;          /* expert tensor-parallel size (--expert-tensor-parallel-size); 0: tp, Megatron's
                         default */
    double moe_load;  /* F >= 1: the busiest expert's tokens over the balanced share k B T / E, the load
                         the plan is made for under dropless routing; 0: REMAT_MOE_LOAD_DEFAULT */
    double moe_capacity; /* the capacity factor (--moe-expert-capacity-factor): no expert takes more than
                            ceil(k N / E x it) tokens, an exact bound that replaces F; 0: dropless */
    int qk_norm;      /* 1: RMSNorm on each head's q and k before RoPE (Qwen3; Megatron --qk-layernorm);
                         mixture-of-experts tables only */
    /* Multi-latent attention (DeepSeek-V3; src/table/frameworks_mla.c): kv_lora_rank > 0
     * replaces the attention with MLA.  q is projected down to q_lora_rank, normed and up
     * to NH (qk_nope_dim + qk_rope_dim); k and v come from one down projection to
     * kv_lora_rank (normed) + qk_rope_dim (the shared rotary key) and an up projection to
     * NH (qk_nope_dim + v_head_dim).  Megatron's --q-lora-rank, --kv-lora-rank,
     * --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim; 0 everywhere: no MLA. */
    int q_lora_rank;
    int kv_lora_rank;
    int qk_nope_dim;
    int qk_rope_dim;
    int v_head_dim;
    /* Mixture of experts after a dense prefix: the first moe_first_dense layers have a
     * dense MLP of width ffn_dim (DeepSeek-V3's first_k_dense_replace, Megatron's
     * --moe-layer-freq "([0]*d+[1]*(L-d))"); 0: every layer routed.  Needs experts. */
    int moe_first_dense;
    /* Group-limited routing (--moe-router-num-groups, --moe-router-group-topk; n_group and
     * topk_group of DeepSeek's config.json; 0: none) and the routed weights' scaling
     * (--moe-router-topk-scaling-factor, routed_scaling_factor; 0: none).  The MLA tables
     * route as DeepSeek-V3 does (sigmoid scores, expert bias); these change no byte. */
    int moe_groups;
    int moe_group_topk;
    double moe_scaling;
} remat_config;

/* The default load factor of dropless routing (README, "Mixture of
 * experts": the reason). */
#define REMAT_MOE_LOAD_DEFAULT 2.0
/* A GPU's routed-token load factor under cfg: min(F, EP) (a rank holds E/EP
 * experts, none above F times its share, and together no more than every
 * token), with a capacity factor min(factor, EP); 1 without experts. */
REMAT_API double remat_config_moe_rank_load(const remat_config *cfg);
/* The expert tensor-parallel size: etp, or tp when etp is 0. */
REMAT_API int remat_config_etp(const remat_config *cfg);

/* The architecture's values of the fields that default to 0. */
REMAT_API int remat_config_kv_heads(const remat_config *cfg);
REMAT_API int remat_config_ffn_dim(const remat_config *cfg);
REMAT_API int remat_config_head_dim(const remat_config *cfg);
REMAT_API double remat_config_rope_theta(const remat_config *cfg);
REMAT_API double remat_config_norm_eps(const remat_config *cfg);
/* 1 when the LM head is the token embedding (GPT-2 always) */
REMAT_API int remat_config_tied(const remat_config *cfg);

/* The limits remat_config_check enforces, in one place: the check, the
 * CLI's flags and the weights files' readers take their ranges from here.
 * They keep every derived size (and int indexing of rows) in range. */
#define REMAT_MAX_LAYERS 4096          /* n_layer in [1, REMAT_MAX_LAYERS] */
#define REMAT_MAX_EMBD   65536         /* n_embd in [1, REMAT_MAX_EMBD]; n_head in [1, n_embd] */
#define REMAT_MIN_VOCAB  2             /* vocab in [REMAT_MIN_VOCAB, REMAT_MAX_VOCAB] */
#define REMAT_MAX_VOCAB  (1 << 24)
#define REMAT_MAX_SEQ    (1 << 20)     /* seq in [1, max_seq], max_seq <= REMAT_MAX_SEQ */
#define REMAT_MAX_BATCH  (1 << 20)     /* batch in [1, REMAT_MAX_BATCH] */
#define REMAT_MAX_TP     1024          /* tp in [0, REMAT_MAX_TP] */
#define REMAT_MAX_CP     1024          /* cp in [0, REMAT_MAX_CP] */

/* The tensor-parallel size of a config: tp, or 1 when tp is 0. */
REMAT_API int remat_config_tp(const remat_config *cfg);
/* The context-parallel size: cp, or 1 when cp is 0. */
REMAT_API int remat_config_cp(const remat_config *cfg);
/* Fills a small default (4 layers, 128 wide, 4 heads, V 256, T 64, B 16). */
REMAT_API void remat_config_default(remat_config *cfg);
/* Checks every field and that all sizes fit in 64 bits.  On failure writes a
 * message that says what to change. */
REMAT_API remat_status remat_config_check(const remat_config *cfg);
/* The vocabulary as the framework pads it: remat to a multiple of 64
 * (llm.c), Megatron to a multiple of 128 T (--make-vocab-size-divisible-by
 * 128, times the tensor-parallel size), PyTorch not at all. */
REMAT_API int remat_config_padded_vocab(const remat_config *cfg);
/* Number of parameters (with the padded vocabulary). */
REMAT_API uint64_t remat_config_num_params(const remat_config *cfg);

/* ---- the activation table ----------------------------------------------
 * Every activation tensor has a stable name in its table; the table is
 * selected by (arch, framework).  A block's input is the previous block's
 * res3, or emb for block 0; the d_* tensors are activation-gradient buffers,
 * live only during the backward (d_branch only with dropout or bf16).  GPT-2's
 * and Llama's tensors, their shapes and ops: README, "How it works". */
typedef struct remat_tensor_info {
    const char *name;      /* e.g. "qkv" */
    const char *shape;     /* e.g. "(B,T,3C)" */
    const char *op;        /* producing op, e.g. "linear (c_attn)" */
    int per_layer;         /* 1 for block tensors, 0 for global ones */
    int is_grad;           /* 1 for activation-gradient buffers */
    uint64_t bytes;        /* size for the given config (one layer's copy) */
    int transient;         /* 1: the framework does not keep it for the backward unless a
                              save: list names it (framework tables) */
} remat_tensor_info;

/* The table cfg selects (its arch and framework): the number of tensors,
 * and the id of a name (or -1). */
REMAT_API int remat_config_tensor_count(const remat_config *cfg);
REMAT_API int remat_config_tensor_find(const remat_config *cfg, const char *name);
/* Info for tensor id in [0, remat_config_tensor_count(cfg)). */
REMAT_API remat_status remat_tensor_get(const remat_config *cfg, int id, remat_tensor_info *out);

/* ---- schedules ------------------------------------------------------------
 * A policy string is terms separated by ',': at most one structure term
 * (none, full, every:K, sqrt, first:N, revolve:S, plan:TOKENS), any number
 * of keep-set modifiers (selective, pointwise, save:A+B+...), and offload:N
 * or offload:N:A+B (for planning GPU runs; remat's own engine refuses it).
 * What each term keeps: README, "Recomputation policies"; the plan:TOKENS
 * tokens (A<hex>, C<j>, O<hex>, in preorder of the compiler's recursion,
 * schedule.h): README, "The planner". */
typedef struct remat_schedule remat_schedule;

/* The longest policy string remat accepts (bytes, with the NUL): room for
 * the plan of the largest config (4096 blocks: at most 2L+1 tokens of at
 * most 6 characters each) and its modifiers. */
#define REMAT_POLICY_MAX 65536

typedef enum remat_instr_kind {
    REMAT_I_FORWARD = 0,   /* compute a tensor for the first time this step */
    REMAT_I_RECOMPUTE = 1, /* compute it again (during backward) */
    REMAT_I_BACKWARD = 2,  /* backward of the op that produced the tensor */
    REMAT_I_FREE = 3,      /* release a tensor (on the device, or its copy on the host) */
    REMAT_I_UPDATE = 4,    /* AdamW parameter update */
    REMAT_I_OFFLOAD = 5,   /* move a live tensor to host memory: its device bytes are released */
    REMAT_I_RELOAD = 6     /* bring an offloaded tensor back: its device bytes return */
} remat_instr_kind;
/* "forward", "recompute", "backward", "free", "update", "offload", "reload"
 * (the names traces, profiles and `remat schedule` use); "?" for anything else */
REMAT_API const char *remat_instr_kind_name(remat_instr_kind k);

typedef struct remat_instr_info {
    remat_instr_kind kind;
    int layer;             /* block index, or -1 for global tensors */
    const char *tensor;    /* name from the activation table ("" for update) */
    uint64_t live_bytes;   /* activation bytes live after this instruction */
    uint64_t peak_bytes;   /* activation bytes live at the worst moment inside it */
    double flops;          /* floating-point operations of this instruction */
    uint64_t host_bytes;   /* activation bytes offloaded to the host after it */
} remat_instr_info;

typedef struct remat_sim {
    uint64_t peak_bytes;      /* max activation bytes live at any moment */
    uint64_t stored_bytes;    /* live when the block forward ends (kept across it) */
    uint64_t workset_bytes;   /* peak - stored: extra memory of head, recompute, grads */
    size_t peak_index;        /* instruction at which the peak occurs */
    double flops;             /* whole step (forward + recompute + backward) */
    double recompute_flops;   /* of which recomputation */
    int max_checkpoints;      /* most block inputs (emb, res3) live at once */
    int recomputed_blocks;    /* block forwards re-run (counted by res3/att/...)*/
    uint64_t host_peak_bytes; /* most activation bytes on the host at once (offload:) */
    uint64_t host_stored_bytes; /* on the host when the block forward ends */
    uint64_t transfer_bytes;  /* moved over the host link: offloads and reloads */
} remat_sim;

/* Compiles `policy` (NULL means "none") for the config.  Errors:
 * REMAT_ERR_POLICY for a bad string, REMAT_ERR_INVALID for a bad config.
 * Every schedule is validated when it is made (remat_schedule_validate):
 * a schedule that exists is valid. */
REMAT_API remat_status remat_schedule_create(const remat_config *cfg, const char *policy,
                                             remat_schedule **out);
/* The forward-only schedule that evaluation and sampling run
 * (remat_model_eval, remat_model_sample, with their own batch and head):
 * every tensor freed after its last reader, the logits last.  Its simulated
 * peak is what they allocate, to the byte. */
REMAT_API remat_status remat_schedule_create_forward(const remat_config *cfg, remat_schedule **out);
REMAT_API void remat_schedule_free(remat_schedule *s);
/* The canonical policy string the schedule was compiled from ("forward"
 * for a forward-only schedule, "custom" for one built from instructions). */
REMAT_API const char *remat_schedule_policy(const remat_schedule *s);
REMAT_API size_t remat_schedule_length(const remat_schedule *s);
/* Instruction i with the simulator's figures for it: O(1). */
REMAT_API remat_status remat_schedule_instr(const remat_schedule *s, size_t i, remat_instr_info *out);
/* Live activation bytes after instruction i, split by tensor: bytes[id] for
 * every id in [0, remat_config_tensor_count(cfg)) (all layers of a tensor summed).
 * Walks the schedule up to i; to see every instruction, use
 * remat_schedule_walk_live, which walks it once. */
REMAT_API remat_status remat_schedule_live_by_tensor(const remat_schedule *s, size_t i, uint64_t *bytes);
/* Calls fn once per instruction, in order, with its info and the live bytes
 * by tensor after it (as remat_schedule_live_by_tensor; the array is only
 * valid during the call). */
typedef void (*remat_schedule_live_fn)(void *arg, size_t i, const remat_instr_info *info,
                                       const uint64_t *bytes_by_tensor);
REMAT_API remat_status remat_schedule_walk_live(const remat_schedule *s, remat_schedule_live_fn fn,
                                                void *arg);
/* Dry run: the simulator's figures for the whole schedule. */
REMAT_API remat_status remat_schedule_simulate(const remat_schedule *s, remat_sim *out);
/* Walks the schedule again with every check on: every read the tensor
 * table declares is materialised, every freed buffer is live, no tensor is
 * computed over a live copy, each backward runs exactly once and after the
 * gradient buffers it needs exist, nothing leaks, the update comes last.
 * On failure the message names the instruction. */
REMAT_API remat_status remat_schedule_validate(const remat_schedule *s);

/* What a schedule does with each layer, for people: layer l's per-block
 * tensors (bit = tensor id, remat_tensor_get) held for the backward when the
 * block forward sweep ends -- its own output counts, its input is the layer
 * before's -- of them those held on the host (offloaded), and those
 * recomputed during the backward; kept_bytes counts the device's. */
typedef struct remat_layer_info {
    uint32_t kept;
    uint32_t recomputed;
    uint64_t kept_bytes;
    uint32_t offloaded;
    uint64_t host_bytes;
} remat_layer_info;
/* out: the config's n_layer entries. */
REMAT_API remat_status remat_schedule_layers(const remat_schedule *s, remat_layer_info *out);

/* ---- optimizer ------------------------------------------------------------ */
typedef struct remat_optim {
    float lr;            /* default 3e-4 */
    float beta1, beta2;  /* 0.9, 0.95 */
    float eps;           /* 1e-8 */
    float weight_decay;  /* 0.1, decoupled, on 2-D weights only */
    float grad_clip;     /* 1.0: global-norm clipping; <= 0 disables */
} remat_optim;
REMAT_API void remat_optim_default(remat_optim *o);

/* ---- the model -------------------------------------------------------------- */
typedef struct remat_model remat_model;

/* Creates a model with GPT-2 initialisation (N(0, 0.02), residual
 * projections scaled by 1/sqrt(2L), zero biases, unit LayerNorm weights),
 * seeded by `seed`.  Parameters, gradients and AdamW state are allocated
 * here; activations are allocated by each step. */
REMAT_API remat_status remat_model_create(const remat_config *cfg, uint64_t seed, remat_model **out);
/* Whether remat_model_create would accept cfg, short of memory: the config
 * is valid (remat_config_check), it is for this engine (remat's own table,
 * one machine, no tensor parallelism or pipeline stage), and the GEMM
 * engine in use has its precision (bf16 needs oneDNN). */
REMAT_API remat_status remat_model_check(const remat_config *cfg);
REMAT_API void remat_model_free(remat_model *m);
/* The model's last error message ("" when none). */
REMAT_API const char *remat_model_error(const remat_model *m);
REMAT_API const remat_config *remat_model_config(const remat_model *m);

REMAT_API remat_status remat_model_set_optim(remat_model *m, const remat_optim *o);
/* Compiles and installs a policy (NULL: "none"). */
REMAT_API remat_status remat_model_set_policy(remat_model *m, const char *policy);
/* The installed schedule (owned by the model). */
REMAT_API const remat_schedule *remat_model_schedule(const remat_model *m);
/* --verify-recompute: hash every tensor when first computed and check every
 * recomputation against it bit for bit (REMAT_ERR_VERIFY names the tensor,
 * the layer and the step). */
REMAT_API void remat_model_set_verify(remat_model *m, int on);

/* One training step on inputs/targets (B*T token ids each): runs the
 * schedule.  With update == 0 the parameter update is skipped, the step
 * counter does not advance, and the gradients are left in
 * remat_model_grads() (for tests).  *loss gets the
 * mean cross-entropy.  A non-finite loss or gradient gives
 * REMAT_ERR_NONFINITE before the update, parameters untouched. */
REMAT_API remat_status remat_model_step(remat_model *m, const int *inputs, const int *targets,
                                        int update, float *loss);
/* Forward only, running the forward-only schedule of the model's config
 * (remat_schedule_create_forward); when logits are asked for and the LM
 * head is chunked, of the config with lmhead_chunk 0 (whole logits).
 * logits (B*T*Vp floats) may be NULL; targets may be NULL (then *loss is
 * 0).  No dropout. */
REMAT_API remat_status remat_model_eval(remat_model *m, const int *inputs, const int *targets,
                                        float *loss, float *logits);
/* Samples n_new tokens after prompt[0..n_prompt) (1 <= n_prompt, n_prompt +
 * n_new <= T), temperature > 0, writing them to out.  Uses the counter RNG.
 * Each token is one forward-only schedule of the config with batch 1 and
 * lmhead_chunk 0. */
REMAT_API remat_status remat_model_sample(remat_model *m, const int *prompt, int n_prompt,
                                          int n_new, float temperature, uint64_t seed, int *out);

typedef struct remat_stats {
    uint64_t act_peak_bytes;       /* measured by the accounting allocator */
    uint64_t act_stored_bytes;     /* measured: live when the block forward ended */
    uint64_t act_workset_bytes;    /* peak - stored */
    uint64_t params_bytes, grads_bytes, optim_bytes, workspace_bytes;
    uint64_t step_peak_bytes;      /* everything live at the worst moment of the step */
    double flops, recompute_flops; /* of the last step's schedule */
    uint64_t steps_done;
    float grad_norm;               /* before clipping, last step */
    uint64_t fwd_act_peak_bytes;   /* measured activation peak of the last evaluation or
                                      sampling forward (remat_schedule_create_forward) */
    uint64_t weights16_bytes;      /* bf16: the bf16 copy of the weights (2 bytes per
                                      parameter, refreshed after every update); 0 in fp32 */
    uint64_t act_cached_bytes;     /* freed activation blocks kept for reuse by the
                                      caching allocator (64-byte rounded sizes; 0 under
                                      AddressSanitizer): not live, but held, so the
                                      process's memory is about the live bytes above +
                                      this + malloc's overhead */
    /* data parallelism and gradient accumulation (remat_model_set_parallel);
     * 1, cfg.batch, 1 and zeros for a model that has one micro-batch per step */
    int ranks, micro_batch, grad_accum;   /* R, b, M/R micro-batches per rank per step */
    int zero;                      /* 1: ZeRO-1 (AdamW state sharded over the ranks) */
    uint64_t reduce_bytes;         /* the reduction's buffers: partial sums of the gradient
                                      tree, the receive buffer, norm and loss partials */
    uint64_t comm_bytes;           /* bytes this rank sent in the last step */
    double comm_ms;                /* wall time of the last step inside MPI (waiting for a
                                      partner included) */
    double reduce_ms;              /* time of the last step adding gradients (the local
                                      tree and the cross-rank levels) */
} remat_stats;
REMAT_API void remat_model_stats(const remat_model *m, remat_stats *out);

/* ---- parameters ---------------------------------------------------------
 * A model's parameters are its architecture's parameter table: tensors laid
 * out one after another in one flat fp32 vector, per-block tensors stacked
 * over the L blocks.  GPT-2's are llm.c's 16 in llm.c's order (its
 * checkpoints map 1:1): wte (Vp,C), wpe (maxT,C), then per block ln1w ln1b
 * (C), qkvw (3C,C) qkvb (3C), attprojw (C,C) attprojb (C), ln2w ln2b (C),
 * fcw (4C,C) fcb (4C), fcprojw (C,4C) fcprojb (C), and lnfw lnfb (C).
 * Llama's: wte (Vp,C), per block ln1w (C), qkvw ((NH+2KV)hs,C) (Hugging
 * Face's q_proj, k_proj, v_proj one above the other), attprojw (C,NH hs)
 * (o_proj), ln2w (C), gateupw (2F,C) (gate_proj over up_proj), fcprojw
 * (C,F) (down_proj), then lnfw (C) and, untied, lmheadw (Vp,C). */
typedef struct remat_param_info {
    const char *name;      /* e.g. "qkvw" */
    size_t offset;         /* of its first element in the flat vector */
    size_t numel;          /* its elements (all layers) */
    int shape[3];          /* (L, rows, cols) per block, (rows, cols) else; unused dims 0 */
    int per_layer;         /* 1: stacked over the L blocks */
    int decay;             /* 1: AdamW's weight decay applies (the 2-D weights) */
} remat_param_info;
/* The number of parameter tensors of cfg's architecture (GPT-2 16; Llama
 * 8, or 9 untied), and tensor i of them (REMAT_ERR_INVALID out of range,
 * or for an invalid cfg). */
REMAT_API int remat_config_param_count(const remat_config *cfg);
REMAT_API remat_status remat_config_param_get(const remat_config *cfg, int i, remat_param_info *out);
/* The index of the tensor named name, or -1. */
REMAT_API int remat_config_param_find(const remat_config *cfg, const char *name);

/* The flat parameter vector holds the tensors above in that order.  The
 * buffers are owned by the model; gradients hold the last step's values. */
REMAT_API size_t remat_model_num_params(const remat_model *m);
REMAT_API float *remat_model_params(remat_model *m);
REMAT_API const float *remat_model_grads(const remat_model *m);
/* 64-bit hash of the parameter bytes (the summary's params_hash). */
REMAT_API uint64_t remat_model_params_hash(const remat_model *m);

/* ---- traces: what each instruction of a step took -------------------------
 * A trace records training steps of a model instruction by instruction:
 * each instruction's start and duration (the monotonic clock around its
 * allocation, op and frees), FLOPs, and the bytes the accounting allocator
 * measured (remat_trace_event).  Its bytes equal the simulator's for the
 * schedule (remat_schedule_instr's live_bytes and peak_bytes) to the byte;
 * a step run without a trace reads no clock.  The Chrome trace-event file
 * remat_trace_save writes, which remat_profile_calibrate_file reads back:
 * README, "Traces". */
typedef struct remat_trace remat_trace;

REMAT_API remat_status remat_trace_create(remat_trace **out);
REMAT_API void remat_trace_free(remat_trace *t);
/* Records every remat_model_step of m from now on in t, as step number
 * `step` (the caller's numbering: call again before each step to number
 * it), until called with t NULL.  Evaluation and sampling are not
 * recorded.  t is not owned by m.  REMAT_ERR_INVALID when t already holds
 * steps of another config. */
REMAT_API remat_status remat_model_set_trace(remat_model *m, remat_trace *t, uint64_t step);

typedef struct remat_trace_step {
    uint64_t step;           /* the number given to remat_model_set_trace */
    const char *policy;      /* the schedule's canonical policy */
    double start_ms, dur_ms; /* from the trace's first step; the whole remat_model_step */
    size_t first, count;     /* its instructions: events [first, first + count) */
    int ok;                  /* 0: the step failed (its events stop there) */
} remat_trace_step;

typedef struct remat_trace_event {
    uint64_t step;
    size_t index;            /* the instruction's index in the schedule */
    remat_instr_kind kind;
    int layer;               /* -1 for global tensors and the update */
    const char *tensor;      /* "" for the update */
    double start_ms, dur_ms;
    double cpu_ms;           /* with one thread: the thread's CPU time in it (what
                                calibration uses); 0 with several */
    double flops;
    uint64_t live_bytes;     /* activation bytes live after it (measured) */
    uint64_t peak_bytes;     /* activation bytes at their highest inside it */
    uint64_t step_bytes;     /* everything live after it: parameters, gradients,
                                optimizer state, workspace, activations */
    uint64_t step_peak_bytes;/* the same at its highest inside it */
} remat_trace_event;

REMAT_API size_t remat_trace_steps(const remat_trace *t);
REMAT_API remat_status remat_trace_step_get(const remat_trace *t, size_t k, remat_trace_step *out);
REMAT_API size_t remat_trace_events(const remat_trace *t);
REMAT_API remat_status remat_trace_event_get(const remat_trace *t, size_t k, remat_trace_event *out);
/* Writes the steps numbered first..last (inclusive) as Chrome trace-event
 * JSON, atomically.  REMAT_ERR_IO on failure. */
REMAT_API remat_status remat_trace_save(const remat_trace *t, uint64_t first, uint64_t last, const char *path);

/* ---- data ---------------------------------------------------------------
 * A source is the embedded task (path NULL: arithmetic lines, byte tokens),
 * a text file (byte tokens) or llm.c token shards (.bin; a glob pattern
 * reads its matches, which must then be shards when there are several, in
 * byte order as one stream), each with a train and a validation split:
 * files keep their last 10% of tokens for validation unless a separate
 * validation set is given (remat_data_open_val).  Batches are read in
 * order with wrap-around.  The formats and sizes: README, "Data". */
typedef struct remat_data remat_data;
typedef enum remat_split { REMAT_SPLIT_TRAIN = 0, REMAT_SPLIT_VAL = 1 } remat_split;

/* vocab: the model's vocabulary; every token is checked against it
 * (REMAT_ERR_FORMAT names the first bad one). */
REMAT_API remat_status remat_data_open(const char *path, int vocab, remat_data **out);
/* train and val (each a file or a glob, as above): the training split is
 * all of train and the validation split all of val, nothing is cut off
 * (llm.c's --val-data).  val NULL: remat_data_open(train). */
REMAT_API remat_status remat_data_open_val(const char *train, const char *val, int vocab, remat_data **out);
/* The validation pattern d was opened with, or NULL (the split is cut from
 * the training data). */
REMAT_API const char *remat_data_val_path(const remat_data *d);
REMAT_API void remat_data_free(remat_data *d);
/* 1 when tokens are bytes (text or embedded), so samples can be printed. */
REMAT_API int remat_data_is_bytes(const remat_data *d);
/* The vocabulary a source implies: 256 for bytes, 50257 for shards. */
REMAT_API int remat_data_default_vocab(const char *path);
REMAT_API size_t remat_data_tokens(const remat_data *d, remat_split split);
/* 64-bit hash of the whole source's bytes (file or generated text), taken
 * when it was opened: checkpoints record it, so that a resume refuses data
 * whose content changed even when its size did not. */
REMAT_API uint64_t remat_data_hash(const remat_data *d);
/* Next B x T batch: inputs and targets (shifted by one). */
REMAT_API remat_status remat_data_next(remat_data *d, remat_split split, int B, int T, int *inputs,
                                       int *targets);
/* Read position of a split (for checkpoints), and restore it. */
REMAT_API uint64_t remat_data_position(const remat_data *d, remat_split split);
REMAT_API remat_status remat_data_seek(remat_data *d, remat_split split, uint64_t pos);

/* ---- data parallelism (MPI) -----------------------------------------------
 * R data-parallel ranks (`mpirun -np R remat train ...`), each a whole copy
 * of the model, with the batch semantics of Megatron-LM and llm.c:
 *   B = cfg.batch   sequences per optimizer step, over all ranks;
 *   b               the micro-batch: sequences in one forward/backward on
 *                   one rank (default B/R);
 *   M = B/b         micro-batches per step; global micro-batch i is rows
 *                   [i b, (i+1) b) of the step's batch, and rank r runs
 *                   micro-batches r M/R .. (r+1) M/R - 1.
 * The loss is the mean over all B T tokens, and dropout masks are keyed by
 * the global row, so micro-batching never changes a mask.  Guarantee: for
 * fixed B and b, R = 1, 2, 4, ... (every power of two dividing M) give
 * bitwise identical losses, gradients and weights, under every policy and
 * with dropout, given the same thread count per rank.  ZeRO-1 (zero = 1, the
 * default when R > 1) shards the AdamW state over the ranks; zero = 0 keeps
 * it whole on every rank; both give the same bits.  How the sums stay exact
 * (the fixed tree, recursive halving, the norm's blocks), what that costs in
 * memory, the slices and the faults: README, "Data parallelism (MPI)".
 *
 * Faults: a failed exchange returns REMAT_ERR_COMM.  A rank that fails
 * alone (a corrupt file it reads, an allocation) must not leave the others
 * waiting in an exchange: the caller ends the job with remat_comm_abort
 * (what `remat train` does after printing its line). */
typedef struct remat_comm remat_comm;

/* 1 when this process was started by an MPI launcher (mpirun, mpiexec,
 * srun); 1 when this build has MPI (make MPI=0 builds without). */
REMAT_API int remat_comm_launched(void);
REMAT_API int remat_comm_available(void);
/* The job's communicator.  MPI is initialised only when launched by an MPI
 * launcher (argc and argv are handed to MPI_Init_thread; may be NULL);
 * otherwise the comm is one rank and no MPI call is ever made, so a plain
 * run costs nothing and changes nothing. */
REMAT_API remat_status remat_comm_create(int *argc, char ***argv, remat_comm **out);
/* Finalises MPI when remat_comm_create initialised it.  NULL is fine. */
REMAT_API void remat_comm_free(remat_comm *c);
REMAT_API int remat_comm_rank(const remat_comm *c);
REMAT_API int remat_comm_size(const remat_comm *c);
/* ranks of the job on this machine (the default thread count divides the
 * cores among them) */
REMAT_API int remat_comm_local_size(const remat_comm *c);
/* Collective: *first = the lowest rank that passed failed != 0, or -1;
 * *count (may be NULL) = how many did. */
REMAT_API remat_status remat_comm_first_failure(remat_comm *c, int failed, int *first, int *count);
/* Collective: *same = 1 when every rank passed the same value. */
REMAT_API remat_status remat_comm_same(remat_comm *c, uint64_t value, int *same);
/* Ends every rank of the job with exit status code (MPI_Abort); with one
 * rank it returns and the caller exits as usual.  For the caller's error
 * path: the library itself never ends the process. */
REMAT_API void remat_comm_abort(remat_comm *c, int code);

/* A data-parallel layout, for planning (remat_parallel_memory_of) and
 * checking: cfg->batch is the global batch B. */
typedef struct remat_parallel {
    int ranks;          /* R >= 1, a power of two */
    int micro_batch;    /* b >= 1; B must be a multiple of b R */
    int zero;           /* 1: ZeRO-1; 0: the AdamW state on every rank */
} remat_parallel;
/* REMAT_ERR_INVALID with one line naming the valid micro-batches (or rank
 * counts) when B is not a multiple of b R or R is not a power of two. */
REMAT_API remat_status remat_parallel_check(const remat_config *cfg, const remat_parallel *p);

/* What one rank holds and sends, exactly as remat_model_set_parallel
 * allocates and a step sends (tests compare them with the measured
 * figures): everything but the activations, whose peak is the simulator's
 * for the schedule of the micro-batch config (cfg with batch b). */
typedef struct remat_parallel_memory {
    int grad_accum;             /* M/R: micro-batches per rank per step */
    int tree_buffers;           /* partial-sum gradient buffers beside the model's own */
    uint64_t params_bytes, grads_bytes, optim_bytes, workspace_bytes, weights16_bytes;
    uint64_t reduce_bytes;      /* tree buffers + receive buffer + norm and loss partials */
    uint64_t static_bytes;      /* the sum of the above */
    uint64_t slice_params;      /* parameters whose AdamW state the rank holds (its slice
                                   under ZeRO-1, else all of them) */
    uint64_t comm_bytes;        /* bytes one rank sends per optimizer step (update on) */
    uint64_t messages;          /* point-to-point messages one rank sends per step */
} remat_parallel_memory;
/* The figures of rank `rank` (0: the largest slice). */
REMAT_API remat_status remat_parallel_memory_of(const remat_config *cfg, const remat_parallel *p, int rank,
                                                remat_parallel_memory *out);
/* Predicted communication time of one optimizer step (ms), alpha-beta
 * model: every exchange of the step's schedule (the recursive halving of
 * the gradients in pieces of at most 4 MiB, the all-gather of the
 * parameters or gradients, the norm's and the loss's partials, the checks)
 * costs latency_s + bytes / bytes_per_s, exchanges one after another, a
 * rank sending and receiving at once.  0 for one rank. */
REMAT_API double remat_parallel_comm_ms(const remat_config *cfg, const remat_parallel *p, double bytes_per_s,
                                        double latency_s);

/* Makes m (cfg.batch = B) run data parallel over comm (NULL: one rank)
 * with micro-batch b (0: B / ranks) and zero (-1: 1 when ranks > 1, else 0).
 * Allocates the reduction's buffers, shrinks the AdamW state to this rank's
 * slice under ZeRO-1, and recompiles the installed policy for the
 * micro-batch.  Then every remat_model_step takes the step's whole batch
 * (B x T inputs and targets, the same on every rank) and is collective:
 * every rank must call it, as remat_model_eval (B x T rows; logits NULL
 * unless there is a single micro-batch) and remat_checkpoint_save (rank 0
 * writes, the others send their slices).  remat_model_grads holds the
 * summed gradient after a step with update == 0 (after an update under
 * ZeRO-1, only the rank's own slice of it).  Not collective itself.
 * A model can be set up once (a model with one micro-batch on one rank,
 * as remat_checkpoint_load returns, again).  REMAT_ERR_INVALID
 * (remat_parallel_check's message) for a bad layout, REMAT_ERR_STATE when
 * already set up, REMAT_ERR_NOMEM (the model is left as it was; in the
 * unlikely case that its zero AdamW state, freed first, cannot be allocated
 * again either, its steps refuse to run with REMAT_ERR_STATE). */
REMAT_API remat_status remat_model_set_parallel(remat_model *m, remat_comm *comm, int micro_batch, int zero);

/* ---- planner ---------------------------------------------------------------
 * Predicts step time for any policy from a cost model, and finds the fastest
 * schedule whose peak fits a memory budget, exactly.  Guarantees: every
 * memory figure in a remat_plan_row is the schedule simulator's, and the
 * planner checks that its own model of the peak agrees with the simulator
 * for the plan it returns; the search space is every plan:TOKENS string
 * (any segmentation into checkpoints, nested and binomial included, times
 * any keep-set of each block's droppable tensors), which holds every named
 * policy, so the optimum is never slower than any of them at the same
 * budget.  A step's predicted time is the sum of its instructions' op times
 * plus the optimizer update.  Times come from a profile: measured per-op
 * times for one config on this machine (`remat profile`), or a FLOP- and
 * byte-based model.  The dynamic program (after Rotor, Beaumont et al.
 * 2019) and the cost model's cold and warm op times: README, "The planner";
 * calibration by a run and the GEMM probe: README, "Calibration". */
typedef struct remat_profile remat_profile;

/* Measures each op of cfg (remat's own table only) on this machine with the current thread count
 * (reps >= 1 timed calls after one warm-up, median).  Allocates one block's
 * buffers and weights plus the embedding/LM head, never the whole model. */
REMAT_API remat_status remat_profile_measure(const remat_config *cfg, int reps, remat_profile **out);
/* The FLOP/byte model.  measure == 0: default throughputs.  measure != 0:
 * calibrated by a GEMM probe (well under a second) that times each matrix
 * product of the config's ops at its own shape, through the GEMM engine
 * the ops use, in the config's dtype. */
REMAT_API remat_status remat_profile_model(const remat_config *cfg, int measure, remat_profile **out);
/* Writes the profile to path atomically (temporary file, fsync, rename);
 * creates missing parent directories.  REMAT_ERR_IO on failure. */
REMAT_API remat_status remat_profile_save(const remat_profile *p, const char *path);
/* Reads and validates a profile file (untrusted input): REMAT_ERR_IO when
 * it cannot be read, REMAT_ERR_FORMAT when it is malformed (the message
 * names the line), REMAT_ERR_INVALID when it was measured for another
 * config, CPU or thread count than cfg on this machine. */
REMAT_API remat_status remat_profile_load(const remat_config *cfg, const char *path, remat_profile **out);
REMAT_API void remat_profile_free(remat_profile *p);
/* The cache file of cfg on this machine: $REMAT_CACHE/profile-<key>.txt,
 * else $HOME/.cache/remat/profile-<key>.txt, where the key hashes the config,
 * the CPU model and the thread count.  REMAT_ERR_RANGE if buf is too small,
 * REMAT_ERR_INVALID when neither variable is set. */
REMAT_API remat_status remat_profile_default_path(const remat_config *cfg, char *buf, size_t n);
/* Predicted milliseconds of tensor id's forward op (backward = 0) or its
 * backward op (backward = 1) with its inputs not in cache; id -1: the
 * optimizer update.  0 for ops that do not exist (e.g. the backward of att,
 * fused into atty's). */
REMAT_API double remat_profile_op_ms(const remat_profile *p, int id, int backward);
/* The same with its inputs in cache (just computed): a schedule's op runs
 * between the two, by the share of its inputs recomputed just before it
 * (README, "The planner"); equal to remat_profile_op_ms in the model. */
REMAT_API double remat_profile_op_warm_ms(const remat_profile *p, int id, int backward);
/* One line: "measured on <cpu>, <n> threads" or "FLOP model, <x> GFLOP/s ...". */
REMAT_API const char *remat_profile_describe(const remat_profile *p);

/* Calibration by a run (README, "Calibration"): remat_profile_calibrate
 * copies into p, for each
 * instruction kind (forward, recompute, backward, free, update) and tensor
 * that the trace's steps executed, the median time it took over layers and
 * steps, and the median time of a step outside its instructions.  The cost
 * model then prices those instructions at these times -- a recomputation
 * the run never executed at the run's forward of the same op -- and the
 * rest as before (p's measured ops or its FLOP model).  The run times are
 * part of the profile: remat_profile_save writes them ("run" lines) and
 * remat_profile_load checks them as untrusted input.  The trace must be of
 * p's config, on this CPU, with the current thread count
 * (REMAT_ERR_INVALID otherwise; p is then unchanged). */
REMAT_API remat_status remat_profile_calibrate(remat_profile *p, const remat_trace *t);
/* The same from a trace file written by remat_trace_save (untrusted input:
 * REMAT_ERR_FORMAT says what is wrong, REMAT_ERR_IO when it cannot be read,
 * REMAT_ERR_INVALID for another config, CPU or thread count). */
REMAT_API remat_status remat_profile_calibrate_file(remat_profile *p, const char *path);
/* Copies src's run times into dst (both of one config; e.g. to keep them
 * when a new `remat profile` measurement replaces the ops). */
REMAT_API remat_status remat_profile_copy_run(remat_profile *dst, const remat_profile *src);
/* How many (instruction kind, tensor) pairs p has run times for; 0 when it
 * was never calibrated by a run. */
REMAT_API int remat_profile_run_ops(const remat_profile *p);

typedef struct remat_plan_row {
    char *policy;             /* a string remat_schedule_create accepts; owned by the
                                 row: release it with remat_plan_row_clear */
    uint64_t peak_bytes;      /* activation peak (simulated) */
    uint64_t stored_bytes, workset_bytes;
    uint64_t total_bytes;     /* peak + params + grads + optimizer + workspace */
    double overhead_pct;      /* recompute time as % of the no-recompute step */
    double step_ms_pred;      /* predicted step time */
    int fits;                 /* against the budget given */
} remat_plan_row;

/* Releases a row's policy string (r may be NULL; a cleared row's policy is
 * NULL, and clearing it again is harmless). */
REMAT_API void remat_plan_row_clear(remat_plan_row *r);
/* Releases an array of n rows (remat_plan_pareto's); NULL is fine. */
REMAT_API void remat_plan_rows_free(remat_plan_row *rows, size_t n);

/* Bytes that do not depend on the policy: parameters + gradients + the two
 * AdamW moments (+ the bf16 copy of the weights under bf16) + workspace,
 * exactly as remat_model_create allocates them. */
REMAT_API uint64_t remat_plan_static_bytes(const remat_config *cfg);

/* Predicts one policy.  budget 0: no budget (fits = 1).  activations_only:
 * compare the budget with peak_bytes instead of total_bytes.  prof NULL:
 * the FLOP model without measurement; a profile measured for another config
 * is REMAT_ERR_INVALID. */
REMAT_API remat_status remat_plan_evaluate(const remat_config *cfg, const remat_profile *prof,
                                           const char *policy, uint64_t budget, int activations_only,
                                           remat_plan_row *out);
/* The fastest schedule that fits (ties: the smaller peak).  out->policy is
 * a plan:TOKENS string.  REMAT_ERR_BUDGET when none does; the message then
 * states the minimum feasible budget and what dominates it, e.g.
 * "parameters+optimizer 1.90 GiB; minimum activations 120.00 MiB; budget
 * 1.50 GiB is below the minimum 2.02 GiB". */
REMAT_API remat_status remat_plan_optimal(const remat_config *cfg, const remat_profile *prof, uint64_t budget,
                                          int activations_only, remat_plan_row *out);
/* The smallest activation peak of any schedule in the search space. */
REMAT_API remat_status remat_plan_min_peak(const remat_config *cfg, uint64_t *peak);
/* The Pareto front of activation peak against predicted time, sorted by
 * peak (time strictly falling).  Release *rows with remat_plan_rows_free. */
REMAT_API remat_status remat_plan_pareto(const remat_config *cfg, const remat_profile *prof,
                                         remat_plan_row **rows, size_t *n);

/* What remat_plan_maximize grows. */
typedef enum remat_plan_dim { REMAT_PLAN_SEQ = 0, REMAT_PLAN_BATCH = 1 } remat_plan_dim;
/* The largest seq (dim REMAT_PLAN_SEQ; max_seq grows with it) or batch
 * (REMAT_PLAN_BATCH) for which `policy` (NULL: the optimal plan) fits the
 * budget, all other fields of cfg fixed; binary search on the simulator.
 * *best gets the value, and out (may be NULL) the row at that value (with the
 * FLOP model: a profile is for one shape).  REMAT_ERR_BUDGET when even 1
 * does not fit. */
REMAT_API remat_status remat_plan_maximize(const remat_config *cfg, const char *policy, remat_plan_dim dim,
                                           uint64_t budget, int activations_only, int *best,
                                           remat_plan_row *out);

/* ---- tables read from files: any framework's chain of blocks --------------------
 * A table can also be data in a file: what another framework's run of a
 * chain of blocks keeps and how long its ops take, as measured
 * (remat_torch.measure writes one for any torch.nn.Module).  JSON (README,
 * "The table format", has every key and its default).
 *
 * Version 1: one chain of identical blocks.
 *   {"format": "remat-table", "version": 1, "name", "source", "device", "selective",
 *    "input":  {"bytes", "kept", "saved_bytes", "forward_ms", "backward_ms"},
 *    "blocks": [BLOCK, ...],
 *    "head":   {"saved_bytes", "keeps_input", "forward_ms", "backward_ms"},
 *    "params_bytes", "grads_bytes", "optimizer_bytes", "optimizer_ms",
 *    "checkpoint": {"context_bytes", "call_bytes"}}
 *   BLOCK = {"saved": [{"bytes", "cheap"}, ...], "output_bytes",
 *            "forward_ms", "backward_ms", "cheap_forward_ms"}
 * Every block must be the same (the saved tensors' bytes and cheap flags,
 * the output) and input.bytes a block's output_bytes: a file whose blocks
 * differ is refused, naming the first difference; the times are the median
 * over the blocks.
 *
 * Version 2: every block its own, and several chains under one budget.
 * The same top-level keys, BLOCK the same object, and:
 *   - blocks may differ in every key: each BLOCK's saved tensors, output and
 *     times are that block's.  Block i's input is block i-1's output, block
 *     0's is input.bytes (any size).
 *   - either one chain, as in version 1 ("input", "blocks", "head" at the
 *     top level), or "chains" (and then none of those three at the top):
 *       "chains": [{"name", "reads": [NAME, ...], "input", "blocks", "head"}, ...]
 *     1 to REMAT_TABLE_MAX_CHAINS chains in the order their forwards run,
 *     each with a unique "name" (1 to 255 bytes; required), "input",
 *     "blocks" and "head" as above, and "reads": the names of earlier
 *     chains whose result this chain's blocks read (T5's decoder reads
 *     the encoder's; default none).  Every chain but the last must be read
 *     by a later one; the last chain's head ends with the loss.  All
 *     chains' blocks together are at most REMAT_MAX_LAYERS.
 *   - head may also have "output_bytes": the bytes of the chain's result
 *     that later chains read (default: its last block's output_bytes);
 *     used only when a chain reads it.
 * The step of several chains: the forward of chain 0 (input, blocks,
 * head), then of chain 1, ...; the backward in the reverse order (the last
 * chain's head first, chain 0's input last).  remat plans them as one
 * chain: chain 0's blocks, a junction block, chain 1's blocks, ...  The
 * junction between chains c and c+1 is c's head and c+1's input: it saves
 * what those keep (c's head.saved_bytes, c+1's input.saved_bytes) and c's
 * result R (head.output_bytes), its output is c+1's input, its times are
 * theirs; it keeps all and no segment holds it (a plan that checkpoints a
 * junction or spans one is REMAT_ERR_POLICY; named policies stop their
 * segments before it).  So R is live from c's head forward to the end of
 * c's head backward (after its readers' backwards), and the gradients of
 * every result ride on d_output (the largest boundary plus every R) for the
 * whole backward: both a little more than a framework holds, never less.
 * Kept bytes are what is live when the last chain's head forward ends,
 * every chain's and every result together; one budget covers the step.
 * Plans (plan:TOKENS, remat_plan_explain, remat_schedule_layers) number
 * the blocks of that one chain: chain 0's blocks 0..n0-1, the junction n0,
 * chain 1's from n0+1, ...; remat_table_info.blocks counts the junctions.
 * A chain whose blocks differ plans with each block's own bytes and times
 * (up to 256 blocks, junctions included); d_output is its largest
 * boundary, reserve_bytes the most one block's re-run adds (its saved
 * tensors and output) plus d_output.
 * A version-2 file of one chain whose blocks are the same (times aside)
 * and whose input is a block's output is uniform: it gives exactly the
 * plans of the same file as version 1.
 *
 * Version 3: version 2 and the step's bytes measured beyond what the table
 * keeps (remat_torch.measure writes version 3), each optional (default 0):
 *   - "work_bytes" in BLOCK (the most its backward allocates at once above
 *     what is live when it begins: the gradients it makes, temporaries),
 *     in "head" (the last chain's: above what is live when the forward
 *     ends, over its forward and backward; an earlier chain's: the backward
 *     of the ops between it and the next chain), in "input" (its backward);
 *   - input "grad_live_bytes": the step's live bytes when the first chain's
 *     input gets its gradient; beyond that gradient and input.saved_bytes,
 *     what the backward holds from the head's backward to the end (a tied
 *     embedding's gradient waiting in autograd's buffer for its other use);
 *   - "optimizer_work_bytes" (the optimizer step's working set) and
 *     "inputs_bytes" (the sample inputs and the model's buffers, counted in
 *     the static bytes);
 *   - "contexts": [{"bytes", "made_by", "blocks": [B, ...]}]: tensors that
 *     blocks take besides their input and that only the checkpoints running
 *     them hold (masks, position tables, T5's position bias): "made_by" the
 *     block that makes it (-1: before the first), "blocks" the blocks that
 *     take it, increasing and after made_by, no junction, all numbered as
 *     plans number blocks.  A plan holds a context once when a checkpoint of
 *     its tree (nested ones too) runs a block that takes it and begins after
 *     the block that made it; remat_table_row.checkpoint_bytes counts it.
 * The measured bytes make the device peak (below) a walk of the schedule;
 * they change no plan for kept bytes.
 *
 * The table (per block "saved" -- or "expensive" and "cheap" with
 * "selective": true -- and "output"; "input", "head", "d_output") plans
 * with the planner, the simulator and the Pareto front like any other,
 * with the times of the file as its profile.  Its keep-sets are what the
 * framework can do: keep all (no checkpoint), keep only the output
 * (torch.utils.checkpoint of the block, whose re-run the table prices as
 * the whole block's forward), keep one of expensive and cheap (a
 * selective checkpoint, "selective" only); plan:TOKENS segments are
 * checkpoints of several blocks.  Planned, never run: remat_model_create
 * refuses it.
 *
 * What it plans is kept bytes: the storages the framework holds for the
 * backward when the forward ends (the simulator's stored_bytes plus
 * outside_bytes, under every plan).  The end of the forward is made the
 * highest moment of the step by reserving room there for one block's
 * backward (its saved tensors recomputed, the gradients): a plan's
 * simulated peak is its kept bytes plus reserve_bytes, or more when a
 * segment of several blocks is re-run at once.  To plan for kept bytes K,
 * give K + reserve_bytes as the activation budget. */
#define REMAT_TABLE_MAX_CHAINS 16      /* chains of one version-2 table file */

/* Reads a table from path (remat_table_read). */
REMAT_API remat_status remat_table_load(const char *path, remat_config *cfg, remat_profile **prof);
/* Parses a table held in memory (n bytes, untrusted) and loads it: *cfg is
 * a config of it (framework REMAT_FRAMEWORK_TABLE, n_layer its blocks, the
 * table's id; every other field the defaults, which the table ignores) and
 * *prof (may be NULL) the profile of its times, measured on the file's
 * device (free it with remat_profile_free).  Loading the same bytes again
 * gives the same id, counted: each load wants its remat_table_unload.
 * REMAT_ERR_FORMAT with a one-line message for a malformed table,
 * REMAT_ERR_NOMEM, REMAT_ERR_RANGE when too many are loaded. */
REMAT_API remat_status remat_table_read(const void *json, size_t n, remat_config *cfg, remat_profile **prof);
typedef struct remat_table_info {
    const char *name;          /* the file's "name" (or "table"); valid while it is loaded */
    int blocks;                /* the file's chain length */
    int selective;             /* 1: keep-sets may keep one of expensive and cheap */
    uint64_t block_saved_bytes;/* one block's saved tensors (expensive + cheap) */
    uint64_t output_bytes;     /* a block's output, the chain's input */
    int64_t outside_bytes;     /* kept bytes = stored_bytes + this */
    uint64_t reserve_bytes;    /* simulated peak = kept bytes + this (more under segments) */
    uint64_t static_bytes;     /* parameters + gradients + optimizer state */
    /* What the framework's checkpoint function itself holds, which the table
     * does not model (the file's "checkpoint" object; remat_torch adds them
     * to its predictions): */
    uint64_t context_bytes;    /* once, when anything is checkpointed: the blocks' other arguments
                                  (masks, position tables) when nothing else keeps them (version 3
                                  files give each one in "contexts" instead, counted per plan) */
    uint64_t call_bytes;       /* per checkpoint call: its stash (torch: the RNG state it
                                  preserves, on the CPU) */
} remat_table_info;
/* What cfg's table is (REMAT_ERR_INVALID when cfg is not a loaded table's).
 * For a chain whose blocks differ, block_saved_bytes and output_bytes are
 * the largest block's (remat_plan_explain lists each kind of block). */
REMAT_API remat_status remat_table_get_info(const remat_config *cfg, remat_table_info *out);
/* The kinds of block in cfg's table: blocks with the same bytes (saved
 * tensors and output) are one kind; 1 when every block is the same (any
 * version-1 file), 0 when cfg is not a loaded table's. */
REMAT_API int remat_table_block_kinds(const remat_config *cfg);
/* Ends one load of cfg's table; the last ends the table, and configs of it
 * are then refused.  Free what was made from them first (schedules, a
 * profile may be kept: it holds no pointer to the table). */
REMAT_API void remat_table_unload(const remat_config *cfg);

/* What policy does with each layer of cfg, for people: layers treated
 * alike as ranges ("layers 0-5: keep all (88.0 KiB kept per layer)",
 * "layer 6: keep only its output; recompute the whole layer in the
 * backward"), one line each, as `remat plan --explain` prints it.  Writes
 * the text, NUL-terminated, into buf[n] (cut to fit; buf may be NULL with
 * n 0) and its length into *len (may be NULL): call with n 0 for the size.
 * REMAT_ERR_POLICY, REMAT_ERR_INVALID, REMAT_ERR_NOMEM. */
REMAT_API remat_status remat_plan_explain(const remat_config *cfg, const char *policy, char *buf, size_t n,
                                          size_t *len);

/* ---- cluster planning: Megatron-LM and PyTorch runs on GPUs -------------------
 * The same simulator and planner, run on a framework's tensor table
 * (cfg->framework MEGATRON or PYTORCH), with tensor and sequence parallelism
 * in the config (cfg->tp, cfg->sp), context parallelism too (cfg->cp),
 * cfg->batch the micro-batch, and pipeline and data parallelism, precision,
 * batch and device here: the world is T x CP x P x D GPUs.  Nothing runs:
 * every figure is per GPU and predicted.
 *
 * Memory (Korthikanti et al. 2022, arXiv 2205.05198, Sections 4.2-4.3; the
 * byte counts of Megatron-LM's theoretical_memory_usage.py):
 *   - the unit simulated is one model chunk of L/(P V) layers for one
 *     micro-batch: a first pipeline stage (REMAT_STAGE_FIRST, no LM head)
 *     when P > 1, the whole model when P = 1; a chunk that sends its output
 *     on does not keep it;
 *   - 1F1B keeps P micro-batches in flight on the first stage (fewer when
 *     there are fewer micro-batches), the interleaved schedule P V + P - 1
 *     chunk micro-batches, that is L (1 + (P-1)/(P V)) layers' worth;
 *     activations peak at (in flight - 1) x stored + the chunk's own peak;
 *   - weights, gradients and optimizer state per GPU: bf16 18 bytes per
 *     parameter (2 + 4 fp32 gradient + 12 fp32 main weights and moments),
 *     6 + 12/(D CP) with the distributed optimizer (Megatron shards it over
 *     the data- and context-parallel ranks together); fp32 16 and 8 + 8/(D CP);
 *     with grad_reduce_bf16 the gradient is 2 bytes, and the optimizer step
 *     makes an fp32 copy of the gradients it updates (4, or 4/(D CP) with
 *     the distributed optimizer) after the activations are freed: the GPU
 *     needs the larger of the activations' peak and that copy;
 *     the first stage holds its blocks' parameters and the embedding (with one
 *     stage, the final norm and an untied output layer too), divided by T
 *     but for the norms Megatron keeps whole on every rank (Llama's; the
 *     parameter table says which);
 *   - offloaded activations sit in host memory (host_bytes, all in-flight
 *     micro-batches), bounded by remat_cluster.host_mem.
 * Time per iteration: each op's matrix-product FLOPs at the device's dense
 * bf16 FLOP/s times an efficiency (default calibrated to Table 5 of the
 * paper), its other bytes at the HBM bandwidth; Megatron's tensor-parallel
 * collectives (per layer 2 all-reduces forward and 2 backward, or their
 * all-gather/reduce-scatter halves under sequence parallelism) at the link
 * bandwidth; the pipeline bubble (P-1)/(m V) for m micro-batches per
 * replica; the data-parallel gradient reduction (over D CP ranks; over
 * NVLink when Megatron's rank order tp-cp-ep-dp-pp puts those T CP D ranks in
 * one node, else the network), of which only what Megatron's overlaps
 * (remat_cluster_overlaps) cannot hide is counted: the reduction beyond the
 * last micro-batch's backward (2/3 of its compute), the weights' all-gather
 * beyond the first forward (1/3), and never less than one layer's share
 * (the last bucket); the optimizer step at the HBM bandwidth.  Two things
 * overlap the compute, and only what they do not hide is counted: context
 * parallelism's ring (each of its steps sends a K/V chunk, in the backward
 * with its gradient, while the step's attention runs; over NVLink when T CP
 * GPUs fit a node, else the network), and offload and reload over the host
 * link (a block's offload hides behind one block's forward, its reload
 * behind one block's backward).  Each row gives the iteration in these
 * parts. */
typedef struct remat_device {
    const char *name;      /* e.g. "h100-80gb" */
    uint64_t mem_bytes;    /* memory of one GPU as CUDA reports it (cudaMemGetInfo's total, PyTorch's
                              "total capacity"; the presets': cluster.c), not the datasheet's */
    double flops;          /* dense bf16 tensor-core FLOP/s */
    double hbm_bps;        /* memory bandwidth, bytes/s */
    double link_bps;       /* intra-node link (NVLink), per GPU and direction, bytes/s */
    double net_bps;        /* inter-node network per GPU, bytes/s (data-parallel reduction) */
    const char *source;    /* where the figures come from */
    double host_bps;       /* the host link (PCIe, NVLink-C2C) per GPU and direction, bytes/s:
                              activation offload and reload */
    uint64_t host_mem_bytes; /* host memory per GPU (the node's, shared by its GPUs) */
    int node_gpus;         /* GPUs a node's NVLink joins; groups beyond it talk over the network */
    double efficiency;     /* share of flops the matrix products reach in a Megatron-LM run, fitted
                              to published step times (source says which); 0: the A100 fit,
                              REMAT_CLUSTER_EFFICIENCY (added in 5.0.0) */
} remat_device;

/* The presets (a100-40gb, a100-80gb, h100-80gb, h200-141gb, gh200-96gb, b200-180gb): i in
 * [0, remat_device_count()); find returns NULL for an unknown name. */
REMAT_API int remat_device_count(void);
REMAT_API const remat_device *remat_device_get(int i);
REMAT_API const remat_device *remat_device_find(const char *name);

/* Model presets: the four models of Korthikanti's Table 3 (22b, 175b, 530b,
 * 1t: s 2048, V 51200), the GPT-2 sizes (gpt2, gpt2-medium, gpt2-large,
 * gpt2-xl: s 1024, V 50257) and the Llama 3 family (llama3-8b, llama3-70b,
 * llama3-405b, llama3.2-1b, llama3.2-3b: torchtitan's flavors and Hugging
 * Face's config.json, s 8192, V 128256).  The architecture fields are
 * remat_config's (0: the architecture's default). */
typedef struct remat_model_preset {
    const char *name;
    int n_layer, n_embd, n_head, vocab, seq;
    const char *source;
    remat_arch arch;
    int n_kv_head, ffn_dim, head_dim, tie_embeddings;
    double rope_theta, norm_eps;
    remat_rope_scaling rope_scaling;
    int n_experts, moe_topk, moe_ffn_dim, moe_shared_dim;   /* mixture of experts (0: dense) */
    int qk_norm;                                            /* Qwen3's q_norm and k_norm */
    /* DeepSeek-V3: multi-latent attention, dense first layers, group-limited routing */
    int q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim, moe_first_dense, moe_groups, moe_group_topk;
    double moe_scaling;
} remat_model_preset;
REMAT_API int remat_model_preset_count(void);
REMAT_API const remat_model_preset *remat_model_preset_get(int i);
REMAT_API const remat_model_preset *remat_model_preset_find(const char *name);
/* Sets cfg's architecture (every field the preset has) and seq from p;
 * the step's other fields are untouched. */
REMAT_API void remat_model_preset_apply(const remat_model_preset *p, remat_config *cfg);

typedef struct remat_cluster {
    int pp;                /* pipeline stages P >= 1; L divisible by P V */
    int vpp;               /* model chunks per stage V >= 1 (> 1: interleaved 1F1B, needs P > 1
                              and the micro-batches per replica a multiple of P) */
    int dp;                /* data-parallel replicas D >= 1 */
    int dist_optim;        /* 1: Megatron's distributed optimizer (state sharded over D) */
    int global_batch;      /* G sequences per iteration, a multiple of micro-batch x D;
                              0: micro-batch x D */
    remat_device dev;      /* the GPU */
    double efficiency;     /* share of dev.flops the matrix products reach; 0: the device's
                              (dev.efficiency; remat_cluster_efficiency) */
    double reserve;        /* share of dev.mem_bytes kept back for what the plan does not count: the
                              CUDA context, NCCL's buffers (hundreds of MB to GBs per communicator),
                              Transformer Engine's cuBLAS workspaces, the caching allocator's
                              fragmentation; in [0, 1); default 0.05 (README, "Memory per GPU") */
    uint64_t host_mem;     /* host memory per GPU that offloaded activations may take; 0: the
                              device's host_mem_bytes */
    int first_layers;      /* Megatron's --decoder-first-pipeline-num-layers: the first stage's layers
                              (0: an even split); with last_layers, the other stages split the rest
                              evenly; V = 1 */
    int last_layers;       /* --decoder-last-pipeline-num-layers (0: an even split) */
    int no_tp_comm_overlap;/* 1: without --tp-comm-overlap (as Korthikanti's 2022 runs were): the
                              tensor-parallel collectives charged in full (added in 5.0.0) */
    int grad_reduce_bf16;  /* 1: Megatron-LM's --grad-reduce-in-bf16 (NeMo's performance recipes:
                              grad_reduce_in_fp32 False): bf16 gradient buffers, reduced in bf16, and
                              the optimizer's fp32 copy of its gradient shard made at the step; bf16
                              only (added in 5.1.0, in what was the struct's tail padding) */
} remat_cluster;

/* The default efficiency: the one value that fits the four "present work"
 * iteration times of Korthikanti's Table 5 best (least squares of the
 * relative error; tests/test_frameworks.c recomputes the fit; docs/cluster.md,
 * "Iteration times against the paper's Table 5"). */
#define REMAT_CLUSTER_EFFICIENCY 0.695

/* The share of dev.flops the time model gives the matrix products: cl's
 * efficiency if set, else the device's (H100: fitted to Megatron-LM's
 * published H100 table; README, "Cluster planning"), else REMAT_CLUSTER_EFFICIENCY
 * (added in 5.0.0). */
REMAT_API double remat_cluster_efficiency(const remat_cluster *cl);

/* P = V = D = 1, a100-80gb, reserve 0.05. */
REMAT_API void remat_cluster_default(remat_cluster *cl);
/* Checks cl against cfg (a framework table): sizes, divisibility, the
 * device's figures.  REMAT_ERR_INVALID with a message that says what to change. */
REMAT_API remat_status remat_cluster_check(const remat_config *cfg, const remat_cluster *cl);
/* The layers of the first pipeline stage, the one planned (cl checked). */
REMAT_API int remat_cluster_first_stage_layers(const remat_config *cfg, const remat_cluster *cl);
/* The memory per GPU a plan's total must fit in: the device's less the reserve. */
REMAT_API uint64_t remat_cluster_usable(const remat_cluster *cl);

/* Megatron-LM's communication overlaps that a layout turns on: the time
 * model counts each collective as exposed only where its overlap cannot
 * hide it, and the printed command carries the same flags (one rule for
 * both). */
#define REMAT_OVERLAP_GRAD_REDUCE  1u   /* --overlap-grad-reduce: D CP > 1 (Megatron reduces over both) */
#define REMAT_OVERLAP_PARAM_GATHER 2u   /* --overlap-param-gather: D CP > 1 and the distributed optimizer */
#define REMAT_OVERLAP_TP_COMM      4u   /* --tp-comm-overlap: Megatron-LM's table, T > 1 with sequence
                                               parallelism, unless cl->no_tp_comm_overlap */
REMAT_API unsigned remat_cluster_overlaps(const remat_config *cfg, const remat_cluster *cl);

typedef struct remat_cluster_memory {
    uint64_t params;                  /* parameters on the first stage's GPU */
    uint64_t params_bytes, grads_bytes, optim_bytes;   /* per GPU */
} remat_cluster_memory;
REMAT_API remat_status remat_cluster_memory_of(const remat_config *cfg, const remat_cluster *cl, remat_cluster_memory *out);
/* Model FLOPs per iteration: the table's FLOPs of every op's forward and
 * backward (no recomputation), the nearest double to the exact whole
 * number.  GPT-2's tables give Appendix A's 72 G L s h^2 (1 + s/(6h) +
 * V/(12 h L)), V the padded vocabulary; Llama's count attention over the
 * causal pairs, as Megatron-LM's num_floating_point_operations does. */
REMAT_API double remat_cluster_model_flops(const remat_config *cfg, const remat_cluster *cl);

typedef struct remat_cluster_row {
    char *policy;               /* the remat policy of one model chunk (owned) */
    uint64_t layer_stored_bytes;/* kept per layer for one micro-batch between its forward and its
                                   backward (the chunk's average) */
    uint64_t stored_bytes;      /* per GPU, all in-flight micro-batches: what is held for the
                                   backward when the forward ends (pytorch: what autograd's
                                   saved-tensor hooks see, the loss's included) */
    uint64_t peak_bytes;        /* activation peak per GPU, all in-flight micro-batches */
    uint64_t total_bytes;       /* peak + parameters + gradients + optimizer state */
    double hardware_flops;      /* per iteration, all GPUs: what runs, recomputation included */
    double step_ms_pred;        /* predicted iteration time */
    int fits;                   /* total_bytes <= device memory x (1 - reserve) */
    char *megatron_flags;       /* the Megatron-LM flags that run it ("" none needed), or NULL (owned) */
    const char *torchtitan;     /* torchtitan's activation_checkpoint choice ("none", "full",
                                   "selective"), or NULL */
    /* step_ms_pred in parts, milliseconds (they add up to it): */
    double compute_ms;          /* the first stage's ops for all its micro-batches, but ... */
    double tp_ms;               /* ... the tensor-parallel collectives inside them */
    double cp_ms;               /* the context-parallel exchange (0: not modelled) */
    double bubble_ms;           /* the pipeline bubble, (P-1)/V stage times */
    double dp_ms;               /* the data-parallel reduction (and weight all-gather) */
    double optimizer_ms;        /* the optimizer step */
    double offload_ms;          /* activation offload the compute does not hide (0: not modelled) */
    uint64_t host_bytes;        /* activations offloaded to host memory (0: not modelled) */
    /* mixture of experts (cfg->n_experts > 0): the bytes above are at the routed load the plan is
     * made for, remat_config_moe_rank_load (load); the same plan at balance (every GPU its k B T
     * etp / tp rows): */
    double load;                /* the GPU's routed load over balance the row is at (1: dense) */
    uint64_t balanced_peak_bytes, balanced_total_bytes;
    int balanced_fits;
    /* A chain with a dense prefix (cfg->moe_first_dense > 0) is planned stage by stage: each
     * stage's GPU holds its own layers (dense or routed), parameters and micro-batches in
     * flight.  The bytes above are the stage whose GPU peaks (peak_stage, from 0) and its
     * weights, gradients and optimizer state are these; the time is the slowest stage's.
     * Elsewhere peak_stage is 0 and these the first stage's (remat_cluster_memory_of). */
    int peak_stage;
    uint64_t stage_params_bytes, stage_grads_bytes, stage_optim_bytes;
    int balanced_peak_stage;    /* the same at balance */
} remat_cluster_row;
REMAT_API void remat_cluster_row_clear(remat_cluster_row *r);

/* Predicts one policy (applied to every model chunk) with remat's
 * recomputation: only what the backward needs is recomputed. */
REMAT_API remat_status remat_cluster_evaluate(const remat_config *cfg, const remat_cluster *cl, const char *policy,
                                    remat_cluster_row *out);

typedef struct remat_cluster_answer {
    remat_cluster_row optimal;        /* the fastest plan that fits (policy NULL: none fits) */
    remat_cluster_row best_megatron;  /* the fastest that Megatron-LM's flags express */
    remat_cluster_row best_torchtitan;/* the fastest torchtitan's activation_checkpoint expresses */
    remat_cluster_row *rows;          /* every framework option evaluated */
    size_t nrows;
} remat_cluster_answer;
/* The three answers.  Framework options are priced as the framework runs
 * them: a checkpointed region is re-run whole (Megatron's CheckpointFunction,
 * torch.utils.checkpoint), not just what the backward needs. */
REMAT_API remat_status remat_cluster_plan(const remat_config *cfg, const remat_cluster *cl, remat_cluster_answer *out);
REMAT_API void remat_cluster_answer_clear(remat_cluster_answer *a);

/* The planner's front for one model chunk -- activation peak against
 * time, over every per-layer choice of keep, recompute and offload -- each
 * point priced per GPU as remat_cluster_evaluate prices its plan:TOKENS
 * policy, with the micro-batches in flight: rows sorted by peak_bytes, time
 * strictly falling (points that the in-flight micro-batches make worse than
 * a smaller one are left out; whether they fit is each row's fits).
 * Release with remat_cluster_rows_free. */
REMAT_API remat_status remat_cluster_pareto(const remat_config *cfg, const remat_cluster *cl, remat_cluster_row **rows,
                                            size_t *n);
/* Releases n rows and the array (NULL is fine). */
REMAT_API void remat_cluster_rows_free(remat_cluster_row *rows, size_t n);

typedef enum remat_cluster_dim { REMAT_CLUSTER_MICROBATCH = 0, REMAT_CLUSTER_SEQ = 1 } remat_cluster_dim;
typedef enum remat_cluster_which {
    REMAT_CLUSTER_OPTIMAL = 0, REMAT_CLUSTER_MEGATRON = 1, REMAT_CLUSTER_TORCHTITAN = 2
} remat_cluster_which;
/* The largest micro-batch (the micro-batches per replica fixed: G grows
 * with it) or seq (max_seq follows; a multiple of T under sequence
 * parallelism, of 2 CP under context parallelism and then s/CP of T under
 * both) at which the answer `which` exists (a plan that fits; for
 * MEGATRON and TORCHTITAN one that framework expresses).  *best is 0 when
 * nothing fits even at the smallest size.  out (may be NULL) gets the whole
 * answer at *best. */
REMAT_API remat_status remat_cluster_maximize(const remat_config *cfg, const remat_cluster *cl, remat_cluster_dim dim,
                                              remat_cluster_which which, int *best, remat_cluster_answer *out);

/* The layout search (`remat plan --framework megatron --gpus N`; README,
 * "Cluster planning", "Which layout: the search"): every layout of N GPUs
 * that Megatron-LM accepts for cfg's model and that remat models, ranked by
 * the iteration time of its best Megatron-LM flags (remat_cluster_plan's
 * best_megatron; ties: the order below, smaller first).  The dimensions,
 * each taken from cfg or cl as given when its REMAT_SEARCH_FIX_* bit is set:
 *   - TP: 1 .. dev.node_gpus (within a node), dividing N, the heads, the
 *     key/value heads and the MLP width; sequence parallelism on whenever
 *     TP > 1 (Megatron's recipes; in remat's model it moves the same bytes
 *     and keeps less, and mixture of experts requires it);
 *   - CP dividing N / TP (seq divisible by 2 CP, and s/CP by TP);
 *   - PP dividing N / (TP CP), with L divisible by it, or else the uneven split
 *     Megatron allows that keeps the first stage the largest: every stage
 *     ceil(L/PP) layers but the last, which takes the rest
 *     (--decoder-last-pipeline-num-layers; remat plans the first stage, or
 *     with a dense prefix each kind of stage);
 *   - VPP: 1, or with an even split any V dividing L/PP (P > 1, the
 *     micro-batches per replica a multiple of P); not with an uneven split
 *     nor with a dense prefix (cfg->moe_first_dense: remat_cluster_check);
 *   - DP = N / (TP CP PP);
 *   - the micro-batch b, dividing G / DP (G: cl->global_batch, required);
 *   - the distributed optimizer on (unless fixed off: with D CP > 1 it is
 *     never slower nor larger in this model, so the layout without it
 *     could only tie);
 *   - with experts, EP dividing E and ETP (1 .. node_gpus, dividing the
 *     expert width) with EP ETP dividing TP CP DP (Megatron's expert grid).
 * Pruned, never priced: a layout whose weights, gradients and optimizer
 * state alone exceed the usable memory (remat_cluster_usable) on a stage.
 * The rest are bounded by their time with no recomputation (no plan of a
 * layout is faster; a micro-batch above 1 first by micro-batch 1's, b times
 * the tokens) -- their answer where it fits -- and then, smallest bound
 * first, the others' Megatron-LM options
 * are priced (but those bound to be slower than the top-th answer found so
 * far; with a dense prefix, planned stage by stage, the bound is the
 * slowest stage's), until no bound left can beat the top-th answer: the top
 * layouts are exact, as pricing every layout would rank them
 * (tests/test_frameworks.c checks it by brute force; a bound found wrong
 * when refined makes the search price every layout).
 * *out (remat_cluster_layouts_free) gets at most top layouts that fit,
 * fastest first, each with its config, cluster and remat_cluster_plan's
 * answers; *n 0 when none fits.  stats (may be NULL) says how many layouts
 * there were and what was done with them.  REMAT_ERR_INVALID when the
 * world has no layout Megatron-LM accepts (the message says why). */
#define REMAT_SEARCH_FIX_TP         0x001u   /* cfg->tp (sequence parallelism stays on with TP > 1) */
#define REMAT_SEARCH_FIX_CP         0x002u   /* cfg->cp */
#define REMAT_SEARCH_FIX_PP         0x004u   /* cl->pp */
#define REMAT_SEARCH_FIX_VPP        0x008u   /* cl->vpp */
#define REMAT_SEARCH_FIX_DP         0x010u   /* cl->dp */
#define REMAT_SEARCH_FIX_MICROBATCH 0x020u   /* cfg->batch */
#define REMAT_SEARCH_FIX_EP         0x040u   /* cfg->ep */
#define REMAT_SEARCH_FIX_ETP        0x080u   /* cfg->etp */
#define REMAT_SEARCH_FIX_DIST_OPTIM 0x100u   /* cl->dist_optim */
#define REMAT_SEARCH_FIX_STAGES     0x200u   /* cl->first_layers and cl->last_layers */
typedef struct remat_cluster_layout {
    remat_config cfg;             /* cfg with the layout's tp, sp, cp, ep, etp and micro-batch (batch) */
    remat_cluster cl;             /* cl with its pp, vpp, dp, dist_optim, first_layers, last_layers */
    remat_cluster_answer answer;  /* remat_cluster_plan(&cfg, &cl); answer.best_megatron ranks it */
} remat_cluster_layout;
typedef struct remat_cluster_search_stats {
    uint64_t layouts;   /* layouts of the world (with the fixed dimensions) Megatron-LM accepts and remat models */
    uint64_t pruned;    /* of them, pruned: weights, gradients and optimizer state alone do not fit */
    uint64_t priced;    /* priced with no recomputation (the lower bound; the answer where it fits) */
    uint64_t planned;   /* of those, whose Megatron-LM options were priced (but those bound to be slower than the top) */
} remat_cluster_search_stats;
REMAT_API remat_status remat_cluster_search(const remat_config *cfg, const remat_cluster *cl, int gpus, unsigned fixed,
                                            int top, remat_cluster_layout **out, size_t *n,
                                            remat_cluster_search_stats *stats);
/* Releases n layouts, their answers and the array (NULL is fine). */
REMAT_API void remat_cluster_layouts_free(remat_cluster_layout *v, size_t n);

/* ---- checkpoints and weights (reliability) -------------------------------- */
/* Training checkpoints, DIR/ckpt-<step>.bin: everything a run needs to
 * continue bit for bit -- config, optimizer settings, seed, step counts,
 * parameters, both AdamW moments, the data read positions and the data's
 * identity (dropout masks are pure functions of the seed and the step, so
 * there is no RNG state to save).  Guarantees: resuming gives the same
 * losses and params_hash as the run that was never interrupted (with the
 * same thread count); a final name never holds a partial file (saves are
 * atomic, as remat_write_file_atomic); a checkpoint is refused unless every
 * field, size and the checksum check out.  The file, byte by byte:
 * README, "The checkpoint format". */

/* Checkpoints kept in a directory: the newest and the newest valid one
 * before it; a save removes the others. */
#define REMAT_CHECKPOINT_KEEP 2

typedef struct remat_checkpoint_info {
    char file[4096];        /* the checkpoint loaded, "DIR/ckpt-<step>.bin" */
    char warning[1024];     /* "" or why newer checkpoints were skipped (print it) */
    uint64_t step;          /* training steps taken (batches consumed) */
    uint64_t opt_steps;     /* optimizer steps (remat_stats.steps_done); fewer
                               than step when steps were skipped */
    uint64_t seed;
    remat_config cfg;
    remat_optim opt;
    char data[4096];        /* absolute data path, or "" for the embedded task */
    uint64_t data_tokens[2];  /* by split, to recognise the same data */
    uint64_t data_pos[2];     /* read positions by split */
    uint64_t data_hash;       /* remat_data_hash of the data; 0: not recorded
                                 (a version 1 file) */
    char policy[16384];     /* canonical recomputation policy ("" = none) */
    int micro_batch;        /* the micro-batch b the run summed its gradients over (cfg.batch
                               = B is the global batch); 0: one micro-batch per step */
    char val_data[4096];    /* the validation set (--val-data, absolute), or "" when the
                               validation split is cut from the data */
} remat_checkpoint_info;

/* Readies dir for saving: creates it (one level) when missing, checks that a
 * file can be created in it, and removes stale temporary files of killed
 * saves.  *count and *newest_step (either may be NULL) get the number of
 * checkpoint files in dir (valid or not) and the largest step among them
 * (0, 0 when none).  REMAT_ERR_IO with a message naming dir and the reason. */
REMAT_API remat_status remat_checkpoint_prepare(const char *dir, int *count, uint64_t *newest_step);

/* Atomically writes DIR/ckpt-<step>.bin for model m and data d (opened from
 * data_path, NULL for the embedded task; its validation set, if any, is
 * recorded too), then keeps REMAT_CHECKPOINT_KEEP
 * checkpoints: it deletes older ones (and corrupt newer ones) except the
 * newest older one whose checksum validates.  step: training steps taken,
 * at least the model's optimizer steps (more when steps were skipped).
 * Creates dir when missing.  REMAT_ERR_IO (disk full, unwritable dir: the
 * message says which) leaves no file under a final name.  Thread-local
 * message in remat_errmsg().  For a model run over several ranks
 * (remat_model_set_parallel) it is collective: rank 0 gathers the AdamW
 * slices (streamed, 4 MiB at a time) and writes the file, which holds the
 * whole state as a one-rank run's does, so any rank count can resume it;
 * every rank returns rank 0's outcome (the others' message then only
 * points to rank 0's). */
REMAT_API remat_status remat_checkpoint_save(const remat_model *m, const remat_data *d, const char *data_path,
                                             uint64_t step, const char *dir);

/* After resuming from ci (filled by remat_checkpoint_load from dir): prunes
 * dir as a save of that checkpoint would, keeping it and the newest older one
 * that validates, deleting older ones and invalid newer ones.  A run killed
 * between a save's rename and its pruning can leave one checkpoint too many;
 * a resume that saves nothing more (already at its last step) still ends
 * with REMAT_CHECKPOINT_KEEP files.  Files that cannot be deleted are left.
 * REMAT_ERR_INVALID when ci->file is not dir's checkpoint of ci->step,
 * REMAT_ERR_IO when dir cannot be read. */
REMAT_API remat_status remat_checkpoint_tidy(const char *dir, const remat_checkpoint_info *ci);

/* Loads the newest checkpoint in dir that validates.  Newer ones that do not
 * (torn, truncated, corrupt) are skipped and named in info->warning.  Files
 * are streamed: the parameters and AdamW moments are read straight into the
 * model, in bounded pieces, so a resume needs the model's memory and not a
 * copy of the file; the model is returned only once the checksum checks out.
 *   model_out  (may be NULL) a model with the checkpoint's config, seed,
 *              optimizer settings, policy, parameters, AdamW state and
 *              optimizer step; caller frees it.
 *   data_out   (may be NULL) the data, opened and positioned where the run
 *              left off.  data_path NULL opens the checkpoint's data; a
 *              different path (or a file whose token counts changed) is
 *              refused with REMAT_ERR_INVALID.
 *   info       (may be NULL) every header field, the file used, warnings.
 * Errors: REMAT_ERR_IO when dir is missing or holds no ckpt-*.bin,
 * REMAT_ERR_FORMAT when none validates (the message names the newest and
 * why), or the model or data error.  On failure outputs are NULL. */
REMAT_API remat_status remat_checkpoint_load(const char *dir, const char *data_path, remat_model **model_out,
                                             remat_data **data_out, remat_checkpoint_info *info);
/* remat_checkpoint_load for a data-parallel run over comm (NULL: one rank):
 * the model is set up (remat_model_set_parallel: micro_batch 0 is the
 * checkpoint's, zero -1 the default) before its state is streamed in, so
 * under ZeRO-1 a rank reads only its slice of the AdamW state and never
 * holds the whole of it.  With the checkpoint's micro-batch any power-of-
 * two rank count dividing its micro-batches continues bit for bit.  val_path
 * (may be NULL: the checkpoint's) must be the recorded validation set.
 * remat_checkpoint_load is this with comm NULL, micro_batch 0, zero -1.
 * Every rank reads the files itself (a shared file system). */
REMAT_API remat_status remat_checkpoint_load_parallel(const char *dir, const char *data_path, const char *val_path,
                                                      remat_comm *comm, int micro_batch, int zero,
                                                      remat_model **model_out, remat_data **data_out,
                                                      remat_checkpoint_info *info);


/* ---- weights: llm.c and safetensors files, Hugging Face directories ------
 * The parameters (not the optimizer state) in three interchange formats
 * (each one's layout, tensor names and config.json keys:
 * README, "The weights formats").  Sources are untrusted: a truncated,
 * malformed or inconsistent file gives REMAT_ERR_FORMAT (REMAT_ERR_IO when
 * it cannot be read or is missing) and a one-line message that says what is
 * wrong; what remat does not implement (another model_type or rope type,
 * biases in Llama's attention or MLP, another activation) is refused by
 * name.  Saving is atomic per file (a temporary file in the same directory,
 * fsync, rename, fsync of the directory): each final name holds the old
 * file or the whole new one, never a part. */
typedef enum remat_weights_format {
    REMAT_WEIGHTS_AUTO = 0,          /* reading: told apart by the content */
    REMAT_WEIGHTS_LLMC = 1,          /* llm.c's model checkpoint (GPT-2 only, float32; its
                                        bfloat16 version 5 is refused with a message) */
    REMAT_WEIGHTS_SAFETENSORS = 2,   /* Hugging Face's names and layouts, F32 or BF16 */
    REMAT_WEIGHTS_HF = 3             /* a Hugging Face model directory */
} remat_weights_format;

/* Reads only the architecture of a weights file or directory, or of a
 * Hugging Face config.json given by its path (a name ending in ".json":
 * *format REMAT_WEIGHTS_HF, no tensor is read), into *shape:
 * arch, n_layer, n_embd, n_head, n_kv_head, ffn_dim, head_dim, vocab,
 * max_seq and tie_embeddings; for a directory rope_theta, rope_scaling and
 * norm_eps too (config.json's); the other fields are untouched.  A field a
 * file does not fix is 0 (the architecture's default): n_head in
 * safetensors without remat's metadata (and then Llama's n_kv_head and
 * head_dim), max_seq in a Llama safetensors file -- unless the caller sets
 * shape->n_head > 0 beforehand: for a file that records no heads, that
 * number is taken, and Llama's n_kv_head and head_dim are solved from the
 * tensors' shapes with it (REMAT_ERR_FORMAT when they do not divide).
 * Every tensor's name is checked, and its shape where the source fixes the
 * sizes.  *format (may be NULL) gets the format. */
REMAT_API remat_status remat_weights_probe(const char *path, remat_config *shape,
                                           remat_weights_format *format);
/* Creates a model holding the parameters of a file or a directory.  The
 * architecture comes from it (remat_weights_probe's fields), every other
 * field (batch, seq <= its max_seq, dropout, attention, dtype, ...) from
 * base; for Llama, which has no position table, seq may pass the file's
 * max_seq, which then becomes base's (at least seq).  What a safetensors file does
 * not fix comes from base: n_head
 * (when > 0, else C/64), and for Llama max_seq and, when base->arch is
 * llama, rope_theta, rope_scaling and norm_eps.  The optimizer state is
 * fresh (step 0); seed keys dropout as in remat_model_create.  On failure
 * *out is NULL. */
REMAT_API remat_status remat_weights_load(const char *path, const remat_config *base, uint64_t seed,
                                          remat_model **out);
/* Writes the model's parameters to path in format (LLMC, SAFETENSORS, or
 * HF: a directory, shards of the default size). */
REMAT_API remat_status remat_weights_save(const remat_model *m, const char *path,
                                          remat_weights_format format);
/* The same with the tensors' element type: REMAT_DTYPE_FP32 (F32) or
 * REMAT_DTYPE_BF16 (BF16, the parameters rounded to nearest even; the llm.c
 * format is float32 only: REMAT_ERR_INVALID). */
REMAT_API remat_status remat_weights_save_as(const remat_model *m, const char *path, remat_weights_format format,
                                             remat_dtype dtype);

/* Hugging Face's default shard size (save_pretrained's max_shard_size
 * "5GB"): 5 * 10^9 bytes of tensor data. */
#define REMAT_HF_SHARD_BYTES 5000000000ULL
/* Writes model m as a Hugging Face model directory dir (created with its
 * parents when missing) that transformers' from_pretrained loads:
 * config.json (the keys remat_weights_probe reads, plus "architectures"
 * and "torch_dtype"; every number exactly: reals with the fewest digits
 * that read back as the same double), and the tensors (F32, or BF16
 * rounded to nearest even) with remat_weights_save_as's safetensors names
 * and shapes.  Tensors are grouped into shards in the model's order as
 * save_pretrained does: a shard takes tensors while their bytes stay within
 * shard_bytes (0: REMAT_HF_SHARD_BYTES; a tensor larger than that has a
 * shard of its own).  One shard is written as model.safetensors; more as
 * model-00001-of-0000N.safetensors ... with model.safetensors.index.json
 * ({"metadata": {"total_size": bytes}, "weight_map": {tensor: shard}}).
 * Each file is written atomically; the directory as a whole is not: the
 * shards come first, then config.json, then the index, and what an earlier
 * export left that would mislead a reader (the other layout's
 * model.safetensors or index, shards of another count) is deleted.  Reading
 * the directory back with remat_weights_load gives the same parameters,
 * bit for bit in F32 (in BF16 for parameters that are bfloat16 values).
 * REMAT_ERR_INVALID for a bad argument, REMAT_ERR_IO (the message names the
 * file) when something cannot be written. */
REMAT_API remat_status remat_weights_save_hf(const remat_model *m, const char *dir, remat_dtype dtype,
                                             uint64_t shard_bytes);

/* ---- utilities ---------------------------------------------------------- */
/* 64-bit hash of a byte range (the one params_hash uses); the same value on
 * hosts of either byte order (it reads little-endian words). */
REMAT_API uint64_t remat_hash_bytes(const void *p, size_t n);

/* The median of x[0..n) (the mean of the middle two when n is even; 0 when
 * n is 0), sorting x in place.  Timings everywhere in remat (train, bench,
 * the benchmarks) are reported as this median. */
REMAT_API double remat_median(double *x, size_t n);

/* Writes len bytes to path atomically: path.tmp.PID, fsync, rename over
 * path, fsync of the directory; path is then the old file or the whole new
 * one.  Temporary files path.tmp.N left by killed writers (process N gone)
 * are deleted first.  REMAT_ERR_IO (message names path and the reason) leaves
 * path as it was and no temporary file behind. */
REMAT_API remat_status remat_write_file_atomic(const char *path, const void *data, size_t len);

/* ---- JSON output ---------------------------------------------------------
 * The JSON writer of remat: trace files (remat_trace_save) and the CLI's
 * --json output are written with it.  It streams to a FILE as the
 * values come (nothing is kept but the nesting), so a trace of any length
 * costs no memory:
 *
 *     remat_jsonw *w;
 *     if (remat_jsonw_create(stdout, REMAT_JSONW_SPACED, &w)) ...;
 *     remat_jsonw_object(w, NULL);              {
 *     remat_jsonw_str(w, "policy", "full");       "policy": "full",
 *     remat_jsonw_uint(w, "peak_bytes", peak);    "peak_bytes": 123456,
 *     remat_jsonw_array(w, "ms");                 "ms": [
 *     remat_jsonw_num(w, NULL, 0.1);                0.1
 *     remat_jsonw_end(w);                         ]
 *     remat_jsonw_end(w);                       }  and a newline
 *     st = remat_jsonw_finish(w);
 *     remat_jsonw_free(w);
 *
 * Values:
 *   - doubles (remat_jsonw_num) in the shortest decimal form that reads
 *     back as the same double (printf %.15g, else %.16g, else %.17g: the
 *     first that strtod returns unchanged), floats (remat_jsonw_float) in
 *     the shortest that reads back as the same float (%.6g to %.9g);
 *     NaN and infinities, which JSON lacks, as null;
 *   - integers exact (int64_t, uint64_t);
 *   - strings (values and keys) escaped per RFC 8259: ", \ and the control
 *     characters (\n, \t, ..., else \u00XX); valid UTF-8 is copied as it is;
 *     a byte that is not part of a valid UTF-8 sequence (a file name need
 *     not be UTF-8) is written as \u00XX, its Latin-1 reading, so that the
 *     output is always valid JSON.  A NULL string is null.
 * key: the member's name inside an object; NULL for an element of an array
 * and for a top-level value.  Each completed top-level value is followed by
 * a newline, and several may follow one another (JSON Lines).
 * Misuse (a key missing or given where none belongs, end() with nothing
 * open, nesting deeper than REMAT_JSONW_DEPTH, anything after a failure)
 * writes nothing more; the first is kept and remat_jsonw_finish reports it. */
typedef struct remat_jsonw remat_jsonw;

/* flags: REMAT_JSONW_SPACED writes ", " and ": " between items (else ","
 * and ":", the compact form). */
#define REMAT_JSONW_SPACED 1u
#define REMAT_JSONW_DEPTH 32

/* A writer onto f (which stays the caller's: the writer neither flushes nor
 * closes it).  REMAT_ERR_INVALID for a NULL f or out, REMAT_ERR_NOMEM. */
REMAT_API remat_status remat_jsonw_create(FILE *f, unsigned flags, remat_jsonw **out);
REMAT_API void remat_jsonw_free(remat_jsonw *w);
/* Opens an object or an array; remat_jsonw_end closes the innermost one. */
REMAT_API void remat_jsonw_object(remat_jsonw *w, const char *key);
REMAT_API void remat_jsonw_array(remat_jsonw *w, const char *key);
REMAT_API void remat_jsonw_end(remat_jsonw *w);
REMAT_API void remat_jsonw_str(remat_jsonw *w, const char *key, const char *s);
REMAT_API void remat_jsonw_num(remat_jsonw *w, const char *key, double x);
REMAT_API void remat_jsonw_float(remat_jsonw *w, const char *key, float x);
REMAT_API void remat_jsonw_int(remat_jsonw *w, const char *key, int64_t x);
REMAT_API void remat_jsonw_uint(remat_jsonw *w, const char *key, uint64_t x);
REMAT_API void remat_jsonw_bool(remat_jsonw *w, const char *key, int b);
REMAT_API void remat_jsonw_null(remat_jsonw *w, const char *key);
/* The next item (or the closing bracket) starts on a new line: for long
 * arrays read a line at a time, such as a trace's events. */
REMAT_API void remat_jsonw_newline(remat_jsonw *w);
/* REMAT_OK when everything given was written: no misuse (REMAT_ERR_STATE,
 * naming the first), every object and array closed (REMAT_ERR_STATE), and
 * no error on f (ferror: REMAT_ERR_IO). */
REMAT_API remat_status remat_jsonw_finish(remat_jsonw *w);

/* The memory this process may still use: /proc/meminfo's MemAvailable, or
 * when lower its cgroup's limit less the cgroup's usage (v2 memory.max and
 * memory.current, or v1's equivalents).  *source (may be NULL) names which.
 * REMAT_ERR_IO when neither can be read. */
REMAT_API remat_status remat_memory_available(uint64_t *bytes, const char **source);

/* The machine's yardstick: GFLOP/s of a square n x n x n GEMM through the
 * GEMM engine remat uses (remat_gemm_get), operands in dt and an fp32
 * result, with the current thread count; the best of `reps` timed calls
 * after one untimed call.  A result under an eighth of what a 128^3
 * product in cache runs at is taken for a busy machine's interruption: the
 * calls are repeated, up to 4 passes, and the best kept.  Returns 0 on failure (n outside [1, 16384],
 * reps < 1, or out of memory; message in remat_errmsg()). */
REMAT_API double remat_gemm_gflops(int n, int reps, remat_dtype dt);
/* remat_gemm_gflops in fp32 */
REMAT_API double remat_sgemm_gflops(int n, int reps);
/* The BLAS's description of itself, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH
 * NO_AFFINITY Zen MAX_THREADS=64" (a constant string; never NULL). */
REMAT_API const char *remat_blas_info(void);
/* The CPU core type the BLAS selected at run time (OpenBLAS's corename,
 * e.g. "Zen", "Haswell"), or "" when the BLAS does not report one. */
REMAT_API const char *remat_blas_core(void);
/* The CPU's model name from /proc/cpuinfo (e.g. "AMD EPYC"), printable
 * ASCII only, trailing spaces removed, cut to fit buf; "unknown" when it
 * cannot be read.  buf must hold n >= 1 bytes; it is always terminated.
 * The planner keys its cached profiles by this name. */
REMAT_API void remat_machine_cpu(char *buf, size_t n);

/* ---- plans as checkpoint trees, and what a table's plan keeps in its framework ----
 * (src/planner/tree.c.)  A policy compiled for a framework that checkpoints
 * by calls (torch.utils.checkpoint): its moves as a tree, in chain order, a
 * segment before the nodes of its re-run (parent its index, depth + 1) and
 * they before its siblings.  A block node keeps keep_mask (per-block tensor
 * bits, its output's included) in the forward it is met in -- the first
 * forward at depth 0, its segment's re-run below -- and keep names it; a
 * block with last set is the last of its re-run, whose forward runs inside
 * its own backward (keep ALL: nothing to checkpoint).  offload_mask: what an
 * O token (or offload:N) sends to the host after the block's forward. */
typedef enum remat_node_kind { REMAT_NODE_BLOCK = 0, REMAT_NODE_SEGMENT = 1 } remat_node_kind;
typedef enum remat_keep {
    REMAT_KEEP_ALL = 0,        /* no checkpoint */
    REMAT_KEEP_OUTPUT = 1,     /* a checkpoint of the block (or segment): only its output */
    REMAT_KEEP_EXPENSIVE = 2,  /* a selective table: its "expensive" saved tensors (and its output) */
    REMAT_KEEP_CHEAP = 3,      /* a selective table: its "cheap" ones */
    REMAT_KEEP_SOME = 4        /* another subset (remat's own tables): keep_mask says which */
} remat_keep;
typedef struct remat_plan_node {
    int kind;                  /* remat_node_kind */
    int first, end;            /* the blocks [first, end): one for a block node */
    int parent;                /* the segment whose re-run holds it; -1 in the first forward */
    int depth;
    int keep;                  /* remat_keep */
    uint32_t keep_mask;
    uint32_t offload_mask;     /* 0: nothing offloaded */
    int last;
} remat_plan_node;
/* The tree of policy under cfg into out[n] (n 0, out NULL: only its size),
 * its node count into *len (may be NULL).  REMAT_ERR_POLICY, REMAT_ERR_INVALID,
 * REMAT_ERR_RANGE when n is too small, REMAT_ERR_NOMEM. */
REMAT_API remat_status remat_plan_tree(const remat_config *cfg, const char *policy, remat_plan_node *out, size_t n,
                                       size_t *len);

/* A table's plan as its framework runs it: the simulator's and cost model's
 * row (row.policy owned: remat_table_row_clear), and what the framework
 * keeps when the forward ends -- stored_bytes + outside_bytes + what its
 * checkpoint calls hold (context_bytes once when there is any, call_bytes
 * per call alive then: every checkpoint of the tree, nested ones too) --
 * and the peak with the same added.  A checkpoint nested in a segment's
 * re-run runs in the first forward too and holds its input then: the
 * output of a block before it in the segment (output_bytes), counted once
 * per block, unless it is the outermost checkpoint's own input. */
typedef struct remat_table_row {
    remat_plan_row row;
    uint64_t kept_bytes;
    uint64_t peak_bytes;
    uint64_t checkpoint_bytes; /* of which the checkpoint calls' own (stashes, context, nested inputs) */
    int checkpoint_calls;
    /* appended (remat_table_row_device_peak): the step's device peak, static bytes included */
    uint64_t device_peak_bytes;
} remat_table_row;
REMAT_API void remat_table_row_clear(remat_table_row *r);
/* One policy (any remat_schedule_create accepts) of a loaded table. */
REMAT_API remat_status remat_table_evaluate(const remat_config *cfg, const remat_profile *prof, const char *policy,
                                            remat_table_row *out);
/* The fastest plan whose kept_bytes (as above) are at most kept_budget;
 * REMAT_ERR_BUDGET, with the minimum (remat_table_min_kept) in its message, when none is. */
REMAT_API remat_status remat_table_optimal(const remat_config *cfg, const remat_profile *prof, uint64_t kept_budget,
                                           remat_table_row *out);
/* The plan that keeps least: the smallest simulated peak's plan, or "none"
 * when the checkpoints' own bytes make that one keep more. */
REMAT_API remat_status remat_table_min_kept(const remat_config *cfg, const remat_profile *prof,
                                            remat_table_row *out);
/* sizeof the public struct of that name ("remat_config", "remat_plan_row",
 * "remat_layer_info", "remat_table_info", "remat_tensor_info",
 * "remat_plan_node", "remat_table_row", "remat_graph_node",
 * "remat_graph_group"), 0 for another name: a binding in
 * another language checks its layouts with it before any call that writes one. */
REMAT_API size_t remat_abi_size(const char *name);


/* ---- a budget on device memory (src/planner/devpeak.c; remat-hf, issue 25) ----------------
 * A table's step peaks on the device at its static bytes (parameters,
 * gradients, optimizer state and, version 3, inputs_bytes: live for the
 * whole step, as in a step that keeps its gradients) plus the activations'
 * peak, or the optimizer step's working set when that is more.  With the
 * working sets a version-3 file measured, the activations' peak is found
 * by walking the plan's schedule and adding at each moment what the
 * framework allocates then beyond what the table keeps (each block's
 * backward, the head's forward and backward, the input's backward), with
 * the checkpoint calls' own bytes.  Without them (versions 1 and 2) it is
 * the row's peak_bytes (the simulated peak, the end of the forward plus
 * reserve_bytes, with the checkpoints' bytes) less one block's saved tensors
 * (block_saved_bytes) under a plan that re-runs no block ("none").
 * remat_torch's plan(budget=) is this budget; plan(kept_budget=) is
 * remat_table_optimal's. */
/* That peak of a row of remat_table_evaluate/optimal/min_kept/optimal_device (0 for NULL). */
REMAT_API uint64_t remat_table_row_device_peak(const remat_table_row *r);
/* The fastest plan whose device peak (as above) is at most budget;
 * REMAT_ERR_BUDGET, with the minimum in its message, when none is. */
REMAT_API remat_status remat_table_optimal_device(const remat_config *cfg, const remat_profile *prof, uint64_t budget,
                                                  remat_table_row *out);
/* ---- a joint graph's peak (src/planner/graph.c; issue 26, torch.compile) ---------------------
 * A forward + backward graph as torch's partitioner holds it (its joint fx
 * graph), one node per tensor, in topological order: every forward node
 * before every backward node, each reading only earlier nodes.  The
 * schedule simulated: the forward nodes in order, then the backward nodes
 * in order, each preceded by the re-runs of the recomputed forward nodes it
 * needs that were not re-run yet (those it reads, those they read, ...), in
 * graph order, each once -- as torch's partitioner places recomputation
 * (reordering_to_mimic_autograd_engine).  A tensor lives from its node's
 * run to its last reader in that schedule, so a forward node the backward
 * reads and that is not recomputed is saved.  remat_graph_solve and
 * remat_graph_search (below) search such graphs for a set to recompute. */
/* remat_graph_node.candidate */
enum {
    REMAT_GRAPH_KEEP = 0,      /* never recomputed (an input, a random op, ...) */
    REMAT_GRAPH_CANDIDATE = 1, /* a forward node the searches may recompute */
    REMAT_GRAPH_ALWAYS = 2     /* a forward node every set recomputes (added in 5.0.0): a cheap op that need
                                * not be searched, as torch's min-cut recomputes pointwise ops */
};
typedef struct remat_graph_node {
    uint64_t bytes;          /* the node's output, in bytes */
    double flops;            /* the cost of running it (FLOPs, or any one unit) */
    const uint32_t *inputs;  /* the nodes it reads, each an earlier index; not owned */
    uint32_t n_inputs;
    uint32_t group;          /* the layer (module) that made it: remat_graph_search's unit when the
                              * candidates are too many to try every subset, and
                              * remat_graph_states' unit; unused by remat_graph_peak and
                              * remat_graph_solve */
    uint8_t backward;        /* 1: a backward node, 0: a forward node */
    uint8_t candidate;       /* REMAT_GRAPH_KEEP, _CANDIDATE or _ALWAYS (forward nodes only) */
} remat_graph_node;
/* The peak of live bytes over that schedule, with recompute[i] = 1 for each
 * recomputed node (NULL: none) besides the REMAT_GRAPH_ALWAYS ones, into
 * *peak; the re-runs' summed flops into *recompute_flops (may be NULL).
 * REMAT_ERR_INVALID for a node that reads a later one, a forward node after
 * a backward one or reading one, a recomputed node that is not a forward
 * candidate, a backward node marked REMAT_GRAPH_ALWAYS, or a candidate value
 * above 2. */
REMAT_API remat_status remat_graph_peak(const remat_graph_node *nodes, size_t n, const uint8_t *recompute,
                                        uint64_t *peak, double *recompute_flops);
/* A set of candidates to recompute whose remat_graph_peak fits budget
 * bytes, found by a greedy search that tries to spend few re-run flops:
 * starting from nothing recomputed, while the peak is over the budget it
 * adds the candidate that lowers the peak most per flop added (zero-flop
 * nodes count as one flop; when no single addition lowers the peak, the
 * one that leaves it lowest; an addition that makes it fit first, the
 * one of fewest flops; every candidate if the growth ends over the budget
 * and that fits); once the set fits, it drops recomputed nodes,
 * most flops first, while the set still fits.  Every set it tries is priced
 * by remat_graph_peak, and the answer is priced again before it is
 * returned, so a returned set never peaks over the budget.  Not exact: a
 * set with fewer flops may fit, and a set may fit where this search finds
 * none (tests/test_graph.c measures both against every subset of small
 * graphs).  Cost: up to c * (c + 1) peak evaluations for c candidates, each
 * linear in the graph.  The group field is not used: every graph, a chain
 * of layers too, gets this search.  It decides the REMAT_GRAPH_CANDIDATE
 * nodes; the REMAT_GRAPH_ALWAYS ones are in every set it prices.
 * recompute (n entries, written) gets 1 for each recomputed node (the
 * REMAT_GRAPH_ALWAYS ones too), *peak its peak, *recompute_flops (may be
 * NULL) its re-runs' flops.
 * REMAT_ERR_BUDGET when no set tried fits; the message then gives the least
 * peak of every set the search priced (the set of every candidate among
 * them), in bytes, and recompute is all 0.  remat_graph_peak's statuses for
 * a malformed graph. */
REMAT_API remat_status remat_graph_solve(const remat_graph_node *nodes, size_t n, uint64_t budget,
                                         uint8_t *recompute, uint64_t *peak, double *recompute_flops);
/* remat_graph_search's methods (*how). */
enum {
    REMAT_GRAPH_EXACT = 0,
    REMAT_GRAPH_EXACT_GROUPS = 1,
    REMAT_GRAPH_GREEDY = 2,
    REMAT_GRAPH_EXACT_LAYERS = 3, /* 5.0.0 */
    REMAT_GRAPH_LAYERS = 4        /* 5.0.0 */
};
/* A set of candidates to recompute whose remat_graph_peak fits budget bytes
 * with the fewest re-run flops, exact where that is tractable:
 *   REMAT_GRAPH_EXACT: at most 16 candidates; every subset is priced, so
 *     the set returned has the least flops of any that fits (ties: the
 *     lower peak), and a refusal's least peak is the least of any subset;
 *   REMAT_GRAPH_EXACT_GROUPS: more candidates, not a chain (below), but at
 *     most 16 distinct groups; every union of whole groups (each layer
 *     recomputed entirely or not at all, as remat's planner chooses per
 *     layer) is priced and so is remat_graph_solve's greedy set; the one of
 *     fewer flops is returned, so the answer is the least-flop fitting
 *     union of layers or better;
 *   REMAT_GRAPH_EXACT_LAYERS (5.0.0): more than 16 candidates, the graph a
 *     chain of layers whose peak decomposes (below), and no layer (group)
 *     of more than 14 candidates: exact -- the set returned has the least
 *     flops of any that fits, and a refusal's least peak is the least of
 *     any set -- by a dynamic program over the layers in forward order, on
 *     each layer's subsets of its candidates (ties between sets of equal
 *     flops are not broken by the peak);
 *   REMAT_GRAPH_LAYERS (5.0.0): the same chain, a layer of more than 14
 *     candidates, or states the program cannot hold (2^22): the program on
 *     fewer choices -- in a layer of at most 14 candidates every subset
 *     unless the states outgrow it, in the others nothing, the whole layer
 *     or the greedy's rows there -- so no more flops than the greedy's set
 *     or the best union of whole layers;
 *   The chain: the rows that may be recomputed (REMAT_GRAPH_CANDIDATE or
 *     _ALWAYS) of each group come in one run, in forward order; a forward
 *     row reading one is of its group; a backward row reads such rows of
 *     one group at most, those groups not increasing along the backward;
 *     and a REMAT_GRAPH_KEEP row of more than 0 bytes that such rows read
 *     has its last backward reader in the backward of the least group whose
 *     rows read it, or after.  Then a set's peak is the most, over the
 *     groups g, of g's own peak (a function of g's choice) plus the bytes
 *     the groups before g save (each a function of its own choice), which
 *     the program minimizes over (graph.c, chain_of and chain_search: each
 *     choice's terms are read off one pricing and checked against the
 *     decomposition at every group, and the set returned is priced whole;
 *     a contradiction falls back to the other modes);
 *   REMAT_GRAPH_GREEDY: otherwise, remat_graph_solve's answer.
 * In every mode, when the set of no candidate fits, it is the answer (a
 * set's re-runs include a subset's, so none has fewer flops; 5.0.0).
 * Never over the budget (every set is priced by remat_graph_peak).  Cost: 2^16
 * peak evaluations at most, plus the greedy's; on a chain, up to 2^14 per
 * layer (one per subset of its candidates), and the program.  recompute, *peak and
 * *recompute_flops (may be NULL) as remat_graph_solve; *how (may be NULL)
 * the method used.  REMAT_ERR_BUDGET when no set priced fits, its message
 * naming the least peak of every set priced, in bytes, in one line. */
REMAT_API remat_status remat_graph_search(const remat_graph_node *nodes, size_t n, uint64_t budget,
                                          uint8_t *recompute, uint64_t *peak, double *recompute_flops, int *how);
/* remat_graph_states' node states */
enum { REMAT_GRAPH_SAVED = 1, REMAT_GRAPH_RERUN = 2 };
/* One group's share of a set (remat_graph_states). */
typedef struct remat_graph_group {
    uint32_t group;        /* remat_graph_node.group */
    uint32_t saved;        /* its forward nodes kept for the backward (REMAT_GRAPH_SAVED) */
    uint32_t rerun;        /* its nodes re-run in the backward (REMAT_GRAPH_RERUN) */
    uint64_t saved_bytes;  /* the saved nodes' bytes */
    double rerun_flops;    /* the re-runs' flops */
} remat_graph_group;
/* What a set (recompute as remat_graph_peak's) does, in remat_graph_peak's
 * schedule: state (n entries, may be NULL) gets REMAT_GRAPH_RERUN for each
 * node re-run in the backward, REMAT_GRAPH_SAVED for each forward node that
 * is read by the backward or by a re-run and is not re-run itself (it is
 * kept from its run; an input of 0 bytes too), 0 for the rest; groups (cap
 * entries) one row per distinct group of the forward nodes, in the order
 * first met, *n_groups their number.  REMAT_ERR_RANGE when they are more
 * than cap (the first cap rows written); remat_graph_peak's statuses for a
 * malformed graph. */
REMAT_API remat_status remat_graph_states(const remat_graph_node *nodes, size_t n, const uint8_t *recompute,
                                          uint8_t *state, remat_graph_group *groups, size_t cap, size_t *n_groups);
#ifdef __cplusplus
}
#endif
#endif
