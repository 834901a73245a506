/*
 * devpeak.c -- a table's plans under a budget on device memory (remat.h,
 * "a budget on device memory"; README, "Using remat from PyTorch").
 *
 * A table's step peaks, on the device, at its simulated activation peak plus
 * what the checkpoint calls hold (remat_table_row.peak_bytes) plus the
 * table's static bytes -- parameters, gradients and optimizer state, live
 * for the whole step (row.total_bytes has the first and the last).  The
 * fastest plan under such a budget is the planner's under the budget less
 * the static bytes (remat_plan_optimal, activations_only 0), planned again
 * with less room while the checkpoints' own bytes make it peak higher:
 * remat_table_fit, the loop remat_table_optimal runs for kept bytes.
 */
#include <string.h>
#include "../core/core.h"
#include "planner.h"

uint64_t remat_table_row_device_peak(const remat_table_row *r)
{
    if (!r) return 0;
    return r->row.total_bytes + r->checkpoint_bytes;
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
    if ((st = remat_table_fit(cfg, prof, budget, 0, info.static_bytes + minp, 0, remat_table_row_device_peak, out)) !=
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
