/*
 * params.h -- the parameter tables: for each architecture, its parameter
 * tensors' names, shapes (over the named dimensions of tensors.h), their
 * Hugging Face names, their initialisation and whether weight decay
 * applies.  The model, the checkpoint and weights formats, the profiler
 * and the cluster planner all lay parameters out through this one table;
 * the op table (tensors.h) names a weight by its index here.
 */
#ifndef REMAT_PARAMS_H
#define REMAT_PARAMS_H

#include <stddef.h>
#include "remat.h"
#include "tensors.h"

enum remat_param_init { REMAT_INIT_NORMAL, REMAT_INIT_NORMAL_PROJ, REMAT_INIT_ONES, REMAT_INIT_ZEROS };

#define RP_MAX 24          /* parameter tensors of any architecture */
#define RP_MAXPIECE 3      /* Hugging Face tensors one parameter is made of */

/* A Hugging Face tensor holding rows [row0, row0 + rows) of a parameter (of
 * each layer's slice, for per-block ones). */
typedef struct remat_hf_piece {
    const char *name;      /* per block: a pattern with one %d, the layer
                              ("model.layers.%d.self_attn.q_proj.weight") */
    remat_expr row0, rows; /* rows empty: all of the parameter's rows */
    uint8_t transpose;     /* the file holds (cols x rows): GPT-2's Conv1D */
} remat_hf_piece;

typedef struct remat_param_def {
    const char *name;      /* remat's name (llm.c's for GPT-2), e.g. "qkvw" */
    remat_expr rows, cols; /* one layer's slice: rows x cols; cols empty: a vector */
    uint8_t per_layer;     /* stacked over the L blocks */
    uint8_t decay;         /* AdamW weight decay applies (2-D weights) */
    uint8_t init;          /* enum remat_param_init */
    uint8_t untied;        /* exists only when the LM head is untied (the table's last) */
    uint8_t vocab_rows;    /* rows are the padded vocabulary: rows V..Vp-1 are zero and
                              not in any file */
    int npiece;
    remat_hf_piece hf[RP_MAXPIECE];
    /* Where a framework run keeps it (the cluster planner's count per GPU): */
    uint8_t stage;         /* not per block: RP_FIRST (the embedding's pipeline stage), RP_LAST
                              (the head's), RP_UNCOUNTED */
    uint8_t replicated;    /* 1: every tensor-parallel rank holds it whole (Megatron's norms) */
} remat_param_def;

/* remat_param_def.stage */
enum { RP_FIRST = 0, RP_LAST = 1, RP_UNCOUNTED = 2 };

typedef struct remat_param_table {
    remat_arch arch;
    int count;             /* tensors [0, count); an untied one is the last */
    const remat_param_def *defs;
    int wte;               /* the token embedding, which the head uses when tied */
    const char *hf_prefix; /* a prefix files may put before every name ("transformer."), or NULL */
    const char *const *hf_ignored;   /* names a file may hold that remat does not read
                                        (patterns like the pieces'), NULL-terminated */
} remat_param_table;

/* GPT-2's parameter ids (llm.c's order) and Llama's */
enum { GP_WTE = 0, GP_WPE, GP_LN1W, GP_LN1B, GP_QKVW, GP_QKVB, GP_ATTPROJW, GP_ATTPROJB, GP_LN2W, GP_LN2B,
       GP_FCW, GP_FCB, GP_FCPROJW, GP_FCPROJB, GP_LNFW, GP_LNFB, GP_COUNT };
enum { LP_WTE = 0, LP_LN1W, LP_QKVW, LP_ATTPROJW, LP_LN2W, LP_GATEUPW, LP_FCPROJW, LP_LNFW, LP_LMHEADW, LP_COUNT };

extern const remat_param_table remat_params_gpt2, remat_params_llama;

/* The parameter table of cfg's architecture. */
const remat_param_table *remat_params_of(const remat_config *cfg);

/* Where every parameter tensor lies in the flat vector under a config. */
typedef struct remat_param_layout {
    int count;                  /* tensors that exist (an untied head only when untied) */
    size_t off[RP_MAX];         /* first element */
    size_t numel[RP_MAX];       /* elements, all layers */
    size_t player[RP_MAX];      /* elements of one layer's slice (0: not per block) */
    int shape[RP_MAX][3];       /* (L, rows, cols) per block, (rows, cols) else; unused 0 */
    size_t total;
} remat_param_layout;

/* The layout of cfg's parameters; returns the total element count. */
size_t remat_param_layout_of(const remat_config *cfg, remat_param_layout *out);
/* Parameter p of the table under cfg: the head's untied weight resolves to
 * the token embedding when tied. */
int remat_param_resolve(const remat_config *cfg, int p);
/* Block `layer`'s parameters by where a framework keeps them (the cluster
 * planner's count per GPU): split over tensor parallelism, whole on every
 * tensor-parallel rank (norms, the router, MLA's down projections), and the
 * routed experts' (shared by EP x ETP GPUs).  remat's own tables: the
 * parameter table's per-block tensors. */
void remat_layer_params(const remat_config *cfg, int layer, uint64_t *split, uint64_t *whole, uint64_t *routed);
/* rows and cols of one layer's slice of parameter p under cfg */
void remat_param_dims(const remat_config *cfg, int p, uint64_t *rows, uint64_t *cols);

#endif
