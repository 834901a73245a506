/*
 * calibrate.c -- the cost model calibrated by measurement of this run's
 * own kind: a training run's instruction times (remat_profile_apply_run),
 * and, with neither a profile nor a run, a GEMM probe at the config's own
 * shapes for the FLOP model (remat_gemm_probe).
 *
 * Why a run beats a profile for what it executed: `remat profile` times
 * each op alone, with its inputs flushed from cache or just computed, on
 * buffers allocated once.  A training step runs the same ops back to back,
 * allocates each activation and gradient buffer as it goes (zero-filled
 * where the table says so), and pays between instructions for what no op
 * owns: zeroing the parameter gradients, copying the batch in, releasing
 * the step's buffers.  The trace of a step measures all of it, per
 * instruction kind and tensor, and the step's remainder as one overhead.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner.h"
#include "../core/core.h"

remat_status remat_profile_apply_run(remat_profile *p, const remat_run_times *rt)
{
    char cpu[128];
    if (!p || !rt) return remat_fail(REMAT_ERR_INVALID, "calibrate: NULL argument");
    if (!remat_profile_config_equal(&p->cfg, &rt->cfg)) {
        char a[256], b[256];
        remat_profile_config_key(&rt->cfg, a, sizeof a);
        remat_profile_config_key(&p->cfg, b, sizeof b);
        return remat_fail(REMAT_ERR_INVALID, "the run is of config '%s', not '%s' (layers dim heads vocab max_seq batch "
                          "seq dropout attention lmhead-chunk dtype)", a, b);
    }
    remat_machine_cpu(cpu, sizeof cpu);
    if (strcmp(rt->cpu, cpu) || rt->threads != remat_get_threads())
        return remat_fail(REMAT_ERR_INVALID, "the run was on '%s' with %d threads, this is '%s' with %d; its times "
                          "do not apply here", rt->cpu, rt->threads, cpu, remat_get_threads());
    if (p->measured && (strcmp(p->cpu, cpu) || p->threads != rt->threads))
        return remat_fail(REMAT_ERR_INVALID, "the profile was measured on '%s' with %d threads, the run on '%s' with %d",
                          p->cpu, p->threads, rt->cpu, rt->threads);
    const remat_table *tb = remat_table_of(&p->cfg);
    int n = 0;
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++) {
            if (!rt->n[k][t]) continue;
            int exists = k == REMAT_I_UPDATE ? t == 0 : t < tb->first_grad && (k != REMAT_I_BACKWARD || tb->defs[t].has_bwd);
            if (!exists || !isfinite(rt->ms[k][t]) || rt->ms[k][t] < 0)
                return remat_fail(REMAT_ERR_INVALID, "calibrate: no instruction '%d' of tensor %d in this table", k, t);
        }
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++)
            if (rt->n[k][t]) {
                p->run_ms[k][t] = rt->ms[k][t];
                p->run_n[k][t] = rt->n[k][t];
                n++;
            }
    if (rt->n_overhead) {
        p->run_overhead_ms = rt->overhead_ms;
        p->run_overhead_n = rt->n_overhead;
    }
    snprintf(p->cpu, sizeof p->cpu, "%s", rt->cpu);
    p->threads = rt->threads;
    size_t len = strlen(p->desc);
    const char *tail = "; run times from a training step";
    if (n && !strstr(p->desc, tail) && len + strlen(tail) < sizeof p->desc) strcat(p->desc, tail);
    return REMAT_OK;
}

double remat_profile_run_ms(const remat_profile *p, int k, int t)
{
    if (k < 0 || k >= REMAT_NKINDS || t < 0 || t >= RT_MAXT) return -1;
    if (p->run_n[k][t]) return p->run_ms[k][t];
    if (k == REMAT_I_RECOMPUTE && p->run_n[REMAT_I_FORWARD][t]) return p->run_ms[REMAT_I_FORWARD][t];
    return -1;
}

int remat_profile_run_ops(const remat_profile *p)
{
    int n = 0;
    if (!p) return 0;
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++) n += p->run_n[k][t] > 0;
    return n;
}

remat_status remat_profile_copy_run(remat_profile *dst, const remat_profile *src)
{
    if (!dst || !src) return remat_fail(REMAT_ERR_INVALID, "remat_profile_copy_run: NULL argument");
    if (!remat_profile_config_equal(&dst->cfg, &src->cfg))
        return remat_fail(REMAT_ERR_INVALID, "remat_profile_copy_run: the profiles are of different configs");
    memcpy(dst->run_ms, src->run_ms, sizeof dst->run_ms);
    memcpy(dst->run_n, src->run_n, sizeof dst->run_n);
    dst->run_overhead_ms = src->run_overhead_ms;
    dst->run_overhead_n = src->run_overhead_n;
    return REMAT_OK;
}
