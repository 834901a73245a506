/*
 * devpeak.c -- a table's plans under a budget on device memory (remat.h,
 * "a budget on device memory"; README, "Using remat from PyTorch").
 *
 * A table's step peaks, on the device, at its simulated activation peak plus
 * what the checkpoint calls hold (remat_table_row.peak_bytes) plus the
 * table's static bytes -- parameters, gradients and optimizer state, live
 * for the whole step (row.total_bytes has the first and the last) -- less
 * the re-run's room where no block is re-run.  The simulated peak is the
 * end of the forward plus reserve_bytes, room for one block's backward with
 * its saved tensors recomputed (tablefile.c).  Under a plan whose tree has
 * no checkpoint call, no backward recomputes anything, so the recomputed
 * saved tensors (block_saved_bytes) are no part of its peak.  A plan that
 * re-runs blocks but keeps its last ones whole keeps the room: measured on
 * transformers models (tests/py_hf_models.py), such a plan's segment re-run
 * peaks as high as the reserve says, though the blocks kept whole after it
 * have freed their saved tensors by then (the simulator's own moment of that
 * re-run is lower than the real one by about the reserve).
 * The fastest plan under such a budget is the planner's under the budget
 * (remat_plan_optimal, activations_only 0, with that room added), planned
 * again with less room while the checkpoints' own bytes make it peak
 * higher: remat_table_fit, the loop remat_table_optimal runs for kept bytes.
 */
#include <string.h>
#include "../core/core.h"
#include "planner.h"

uint64_t remat_table_device_peak_of(const remat_table_info *info, const remat_table_row *r)
{
    int64_t end = (int64_t)r->row.stored_bytes + info->outside_bytes + (int64_t)info->reserve_bytes;
    /* no checkpoint call in the plan tree (tree.c): no block's backward re-runs anything */
    int unused = r->checkpoint_calls == 0 && (int64_t)r->row.peak_bytes <= end;
    uint64_t relief = unused && info->block_saved_bytes <= r->row.total_bytes ? info->block_saved_bytes : 0;
    return r->row.total_bytes + r->checkpoint_bytes - relief;
}

uint64_t remat_table_row_device_peak(const remat_table_row *r)
{
    return r ? r->device_peak_bytes : 0;
}

remat_status remat_table_optimal_device(const remat_config *cfg, const remat_profile *prof, uint64_t budget,
                                        remat_table_row *out)
{
    remat_table_info info;
    uint64_t minp = 0;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_table_optimal_device: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = remat_table_get_info(cfg, &info)) || (st = remat_plan_min_peak(cfg, &minp))) return st;
    /* the room a plan that re-runs nothing at its peak leaves unused (see the notes) */
    if ((st = remat_table_fit(cfg, &info, prof, budget, info.block_saved_bytes, info.static_bytes + minp, 0,
                              remat_table_row_device_peak, out)) !=
        REMAT_ERR_BUDGET)
        return st;
    /* the minimum: the smallest simulated peak's plan, with its checkpoints' bytes */
    remat_plan_row pr;
    remat_table_row least;
    char b1[32], b2[32], b3[32];
    if ((st = remat_plan_optimal(cfg, prof, minp, 1, &pr))) return st;
    st = remat_table_evaluate(cfg, prof, pr.policy, &least);
    remat_plan_row_clear(&pr);
    if (st) return st;
    st = remat_fail(REMAT_ERR_BUDGET, "budget %s is below the minimum %s of the step's peak (parameters, gradients "
                    "and optimizer state %s, and the activations of the plan that peaks least, %s)",
                    remat_fmt_bytes(budget, b1, sizeof b1), remat_fmt_bytes(remat_table_row_device_peak(&least), b2,
                                                                            sizeof b2),
                    remat_fmt_bytes(info.static_bytes, b3, sizeof b3), least.row.policy);
    remat_table_row_clear(&least);
    return st;
}
