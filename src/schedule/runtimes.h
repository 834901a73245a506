/*
 * runtimes.h -- what a training run measured: the median time of each
 * instruction kind per tensor, the update, and the step's time outside its
 * instructions.
 *
 * The neutral form between the places that measure a run and the place
 * that uses it: the engine's trace recorder (engine/trace.c) and the trace
 * file reader (io/tracefile.c) collect samples here; the planner's
 * calibration (planner/calibrate.c) copies the medians into a profile, and
 * its cost pass then prices every instruction the run executed at what it
 * took there.  Keyed like a profile: the config, the CPU model and the
 * thread count.
 *
 * Layer: with the schedules (an instruction kind is theirs), below engine/
 * and planner/.
 */
#ifndef REMAT_RUNTIMES_H
#define REMAT_RUNTIMES_H

#include <stddef.h>
#include <stdint.h>
#include "remat.h"
#include "../table/tensors.h"

#define REMAT_NKINDS (REMAT_I_UPDATE + 1)

typedef struct remat_run_times {
    remat_config cfg;
    char cpu[128];                          /* remat_machine_cpu of the run */
    int threads;
    /* median milliseconds of instruction kind k on tensor t, over every
     * layer and step measured; n[k][t] samples (0: never executed).  The
     * update is kind REMAT_I_UPDATE, tensor 0. */
    double ms[REMAT_NKINDS][RT_MAXT];
    uint32_t n[REMAT_NKINDS][RT_MAXT];
    /* per step: its time less the sum of its instructions' other than
     * frees (copying the batch in, releasing buffers); n_overhead steps */
    double overhead_ms;
    uint32_t n_overhead;
} remat_run_times;

/* Samples as they come, before the medians. */
typedef struct remat_run_samples {
    double *v[REMAT_NKINDS][RT_MAXT];
    size_t n[REMAT_NKINDS][RT_MAXT], cap[REMAT_NKINDS][RT_MAXT];
    double *over;
    size_t n_over, cap_over;
} remat_run_samples;

/* Adds one instruction's time (kind k, tensor t; the update: t = 0), or one
 * step's overhead (k = -1).  REMAT_ERR_NOMEM, REMAT_ERR_INVALID for a kind
 * or tensor out of range. */
remat_status remat_run_samples_add(remat_run_samples *s, int k, int t, double ms);
/* The medians into rt (whose cfg, cpu and threads the caller sets); the
 * samples are reordered.  Then free them. */
void remat_run_samples_finish(remat_run_samples *s, remat_run_times *rt);
void remat_run_samples_free(remat_run_samples *s);

#endif
