/*
 * trace.h -- the trace recorder's side inside the library: how a training
 * step records itself (remat.h, "traces", is the public side).
 *
 * A traced step's walk runs the interpreter's hooks wrapped by the
 * recorder's: the wrapped begin reads the clock before the walker applies
 * an instruction, the wrapped end reads it after, and records the
 * instruction with the memory the accounting allocator measured.  The
 * other hooks pass straight through.  An untraced step runs the
 * interpreter's hooks as they are: no clock read, nothing recorded.
 */
#ifndef REMAT_TRACE_H
#define REMAT_TRACE_H

#include <stdint.h>
#include "remat.h"
#include "../core/core.h"
#include "../schedule/schedule.h"
#include "../schedule/runtimes.h"

/* One traced step in progress. */
typedef struct remat_trace_run {
    remat_trace *t;
    const remat_schedule *s;
    remat_walk_hooks hooks;          /* what the walk runs */
    const remat_walk_hooks *inner;   /* the interpreter's */
    remat_mem *mem;
    uint64_t act0;                   /* activation bytes live before the walk */
    uint64_t t_begin, c_begin;       /* the open instruction's start (ns; CPU clock) */
    uint64_t acts_peak, total_peak;  /* the step's high-water marks, kept aside
                                        while an instruction measures its own */
    int open;                        /* an instruction began and has not ended */
    size_t step;                     /* index of the step record */
} remat_trace_run;

/* Opens step number `step` (schedule s, model config cfg) in t: reads the
 * clock and reserves room for every instruction of s, so that recording
 * never allocates.  REMAT_ERR_NOMEM, or REMAT_ERR_INVALID for a config
 * other than the trace's. */
remat_status remat_trace_step_begin(remat_trace_run *r, remat_trace *t, uint64_t step, const remat_schedule *s);
/* The hooks the step's walk runs: inner's, each instruction timed and its
 * memory read from mem (activation bytes less act0). */
const remat_walk_hooks *remat_trace_wrap(remat_trace_run *r, const remat_walk_hooks *inner, remat_mem *mem,
                                         uint64_t act0);
/* Closes the step (ok: it completed). */
void remat_trace_step_end(remat_trace_run *r, int ok);
/* 1 when t may record a step of config cfg. */
int remat_trace_accepts(const remat_trace *t, const remat_config *cfg);

/* The run times of every completed step of t (cfg, CPU and threads of the
 * trace; REMAT_ERR_STATE when it holds no completed step). */
remat_status remat_trace_run_times(const remat_trace *t, remat_run_times *out);

#endif
