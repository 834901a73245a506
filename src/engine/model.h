/*
 * model.h -- the model handle's insides (private to the library).
 */
#ifndef REMAT_MODEL_H
#define REMAT_MODEL_H

#include "remat.h"
#include "../core/core.h"
#include "../table/params.h"
#include "../ops/ops.h"

/* the forward-only schedules evaluation and sampling run, compiled on
 * first use */
enum { FWD_EVAL = 0,     /* the config's own head: loss only */
       FWD_LOGITS = 1,   /* whole logits (lmhead_chunk 0): remat_model_eval with logits */
       FWD_SAMPLE = 2,   /* batch 1, whole logits: remat_model_sample */
       FWD_COUNT };

struct remat_model {
    remat_config cfg;
    remat_optim opt;
    uint64_t seed;
    uint64_t t;                 /* optimizer steps done */
    remat_mem mem;              /* the accounting allocator */
    size_t nparams;
    size_t poff[REMAT_PARAM_COUNT], pnum[REMAT_PARAM_COUNT];
    float *params, *grads, *adam_m, *adam_v;
    remat_bf16 *params16;       /* bf16: the weights the GEMMs read (NULL in fp32) */
    int params16_stale;         /* params changed since params16 was made */
    int *inputs, *targets;      /* workspace: the current batch */
    float *losses;              /* workspace: per-position losses */
    int nslots;
    void **buf;                 /* activation buffers by slot (NULL: not live) */
    uint64_t *bufbytes;         /* their sizes (schedules of other batch sizes share slots) */
    void *temp;                 /* the running op's scratch */
    uint64_t temp_bytes;
    uint64_t *hash;             /* --verify-recompute: first-computation hashes */
    remat_schedule *sched;      /* the training schedule */
    remat_schedule *fwd[FWD_COUNT];
    remat_config fwd_cfg[FWD_COUNT];
    int verify;
    struct remat_trace *trace;  /* remat_model_set_trace: record steps here (not owned), */
    uint64_t trace_step;        /* numbered so; NULL: steps read no clock */
    int poison;                 /* remat_model_debug_poison: tensor + 2, 1 = loss, 0 = off */
    float grad_norm;
    uint64_t meas_peak, meas_stored, meas_total_peak, meas_fwd_peak;
    double step_flops, step_recompute_flops;
    char err[512];
};

/* The parameters were written behind the model's back (a checkpoint or
 * weights load): the bf16 copy is made again before the next use. */
static inline void remat_model_touch_params(remat_model *m) { m->params16_stale = 1; }

#endif
