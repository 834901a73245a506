/*
 * step.c -- the model's step and evaluation (remat_model_step,
 * remat_model_eval): the arguments checked and the batch copied in, then
 * one run of the schedule (model.c) or, when the model is set up for
 * micro-batches or ranks, the gradient tree of dpstep.c, which runs the
 * schedule once per micro-batch through model.c.  This file dispatches;
 * the two below it provide, and neither calls the other's caller.
 */
#include <string.h>
#include "../core/core.h"
#include "model.h"

remat_status remat_model_step(remat_model *m, const int *inputs, const int *targets, int do_update, float *loss)
{
    remat_status st;
    if (!m || !inputs || !targets) return remat_fail(REMAT_ERR_INVALID, "remat_model_step: NULL argument");
    if (!m->adam_m)
        return remat_model_fail(m, remat_fail(REMAT_ERR_STATE, "the model lost its AdamW state when "
                                              "remat_model_set_parallel ran out of memory; free it"));
    size_t N = (size_t)m->cfg.batch * m->cfg.seq;
    if ((st = remat_model_check_tokens(m, inputs, N, "inputs")) ||
        (st = remat_model_check_tokens(m, targets, N, "targets")))
        return remat_model_fail(m, st);
    memcpy(m->inputs, inputs, N * sizeof(int));
    memcpy(m->targets, targets, N * sizeof(int));
    st = m->dp.l.active ? remat_dp_step(m, do_update, loss) : remat_model_run_step(m, do_update, loss);
    return st ? remat_model_fail(m, st) : REMAT_OK;
}

remat_status remat_model_eval(remat_model *m, const int *inputs, const int *targets, float *loss, float *logits)
{
    if (!m || !inputs) return remat_fail(REMAT_ERR_INVALID, "remat_model_eval: NULL argument");
    size_t N = (size_t)m->cfg.batch * m->cfg.seq;
    remat_status st;
    if ((st = remat_model_check_tokens(m, inputs, N, "inputs"))) return remat_model_fail(m, st);
    if (targets && (st = remat_model_check_tokens(m, targets, N, "targets"))) return remat_model_fail(m, st);
    memcpy(m->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(m->targets, targets, N * sizeof(int));
    if (m->dp.l.active && logits)
        return remat_model_fail(m, remat_fail(REMAT_ERR_INVALID, "remat_model_eval: logits are for a model with one "
                                              "micro-batch per step; this one has %d", m->dp.l.M));
    st = m->dp.l.active ? remat_dp_eval(m, targets != NULL, loss) : remat_model_run_eval(m, logits, targets != NULL, loss);
    return st ? remat_model_fail(m, st) : REMAT_OK;
}
