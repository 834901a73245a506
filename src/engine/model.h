/*
 * model.h -- the model handle's insides (private to the library).
 */
#ifndef REMAT_MODEL_H
#define REMAT_MODEL_H

#include "remat.h"
#include "../core/core.h"

#define REMAT_NPARAM 16

struct remat_model {
    remat_config cfg;
    remat_optim opt;
    uint64_t seed;
    uint64_t t;                 /* optimizer steps done */
    remat_mem mem;              /* the accounting allocator */
    size_t nparams;
    size_t poff[REMAT_NPARAM], pnum[REMAT_NPARAM];
    float *params, *grads, *adam_m, *adam_v;
    int *inputs, *targets;      /* workspace: the current batch */
    float *losses;              /* workspace: per-position losses */
    int nslots;
    float **buf;                /* activation buffers by slot (NULL: not live) */
    uint64_t *hash;             /* --verify-recompute: first-computation hashes */
    remat_schedule *sched;
    int verify, training, have_targets;
    int full_head;              /* forward_only: whole logits even when chunked */
    int poison;                 /* remat_model_debug_poison: tensor + 2, 1 = loss, 0 = off */
    double loss_sum;
    float grad_norm;
    uint64_t meas_peak, meas_stored, meas_total_peak;
    double step_flops, step_recompute_flops;
    char err[512];
};

/* Shapes of the 16 parameter tensors, in llm.c's order. */
void remat_param_shapes(const remat_config *c, int shapes[REMAT_NPARAM][3]);
/* The same, with each tensor's offset in the flat parameter vector
 * (offsets may be NULL); returns the total number of parameters. */
size_t remat_param_layout(const remat_config *c, int shapes[REMAT_NPARAM][3], size_t offsets[REMAT_NPARAM]);

#endif
