/*
 * model.h -- the model handle's insides (private to the library).
 */
#ifndef REMAT_MODEL_H
#define REMAT_MODEL_H

#include "remat.h"
#include "../core/core.h"
#include "../table/params.h"
#include "../ops/ops.h"
#include "../table/dplayout.h"

/* the forward-only schedules evaluation and sampling run, compiled on
 * first use */
enum { FWD_EVAL = 0,     /* the config's own head: loss only */
       FWD_LOGITS = 1,   /* whole logits (lmhead_chunk 0): remat_model_eval with logits */
       FWD_SAMPLE = 2,   /* batch 1, whole logits: remat_model_sample */
       FWD_COUNT };

/* Data parallelism and gradient accumulation (engine/dpstep.c): the
 * layout, the gradient buffers the micro-batch tree sums in, and what the
 * last step communicated. */
typedef struct remat_dp {
    struct remat_comm *comm;    /* NULL: one rank */
    remat_dp_layout l;          /* l.active == 0: a step is one schedule run, as without */
    float **pool;               /* the tree's gradient buffers; pool[0] is m->grads at rest, */
    int npool;                  /* the others are REMAT_MEM_REDUCE */
    int *free_idx, nfree;       /* pool buffers not holding a partial sum */
    float *recv;                /* the reduce-scatter's receive buffer (l.recv_n floats) */
    double *parts;              /* the norm's block partials (l.nblocks) */
    double *losses;             /* 2 M: the micro-batches' loss sums by slice order of their
                                   ranks, then in global order */
    int checked;                /* the ranks' models were compared (first collective step) */
    uint64_t comm_bytes;        /* the last step's */
    double comm_ms, reduce_ms;
} remat_dp;

struct remat_model {
    remat_config cfg;           /* the run's config: batch is the step's global batch B */
    remat_config mcfg;          /* cfg with batch = the micro-batch b: what schedules and
                                   activation buffers are sized for (cfg itself without
                                   remat_model_set_parallel) */
    remat_optim opt;
    uint64_t seed;
    uint64_t t;                 /* optimizer steps done */
    remat_mem mem;              /* the accounting allocator */
    size_t nparams;
    remat_param_layout ly;      /* where each parameter tensor lies in params */
    float *rope;                /* RoPE's cos/sin table (workspace), or NULL */
    size_t rope_n;
    float *params, *grads, *adam_m, *adam_v;
    size_t optim_lo, optim_n;   /* adam_m/adam_v hold elements [optim_lo, optim_lo + optim_n):
                                   all of them, or this rank's slice under ZeRO-1 */
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
    uint8_t *fresh;             /* a training run's unwritten gradient slices (ops.h) */
    remat_schedule *sched;      /* the training schedule */
    remat_schedule *fwd[FWD_COUNT];
    int verify;
    struct remat_trace *trace;  /* remat_model_set_trace: record steps here (not owned), */
    uint64_t trace_step;        /* numbered so; NULL: steps read no clock */
    int poison;                 /* remat_model_debug_poison: tensor + 2, 1 = loss, 0 = off */
    int shrink_t;               /* remat_model_debug_shrink: the tensor allocated shrink_by */
    uint64_t shrink_by;         /* bytes short of its size (shrink_t -1: none) */
    float grad_norm;
    uint64_t meas_peak, meas_stored, meas_total_peak, meas_fwd_peak;
    double step_flops, step_recompute_flops;
    remat_dp dp;
    char err[512];
};

/* One run of a schedule on rows of the step's batch (engine/dpstep.c's
 * micro-batches): the training schedule (training 1) or the forward-only
 * evaluation one, on the mcfg.batch rows starting at global row row0 of
 * m->inputs / m->targets, parameter gradients written into grads (training;
 * what grads held is not read), d(logits) scaled by 1 / (B T).  *loss_sum gets the rows' summed loss.  Traced when a
 * trace is set.  Activation peaks are kept in m (the highest of the step). */
remat_status remat_model_run_rows(remat_model *m, int training, uint64_t row0, float *grads, double *loss_sum);

/* One step (one run of the training schedule on m->inputs / m->targets,
 * the update when do_update) and one evaluation (the forward-only schedule:
 * logits into logits when not NULL, the mean loss into *loss) of a model
 * without micro-batches or ranks; engine/step.c dispatches to these or to
 * dpstep.c.  The status only: the caller records the message
 * (remat_model_fail). */
remat_status remat_model_run_step(remat_model *m, int do_update, float *loss);
remat_status remat_model_run_eval(remat_model *m, float *logits, int have_targets, float *loss);
/* REMAT_ERR_INVALID when a token of tok[0 .. n) is outside the vocabulary
 * (what names the array in the message) */
remat_status remat_model_check_tokens(const remat_model *m, const int *tok, size_t n, const char *what);
/* st, with the library's last message copied into m's (m may be NULL) */
remat_status remat_model_fail(remat_model *m, remat_status st);
/* The release of the reduction's buffers (model.c: with the model, or when
 * dpstep.c's set-up fails) */
void remat_dp_free(remat_model *m);

/* engine/dpstep.c: a step and an evaluation over micro-batches and ranks
 * (m->dp.l.active) */
remat_status remat_dp_step(remat_model *m, int do_update, float *loss);
remat_status remat_dp_eval(remat_model *m, int have_targets, float *loss);

/* The parameters were written behind the model's back (a checkpoint or
 * weights load): the bf16 copy is made again before the next use. */
static inline void remat_model_touch_params(remat_model *m) { m->params16_stale = 1; }

#endif
