/*
 * fuzz_trace.c -- trace files (src/io/tracefile.c, what `remat plan
 * --calibrate-from` reads): remat_trace_parse on the input held in memory.
 * A refused file must say why with FORMAT (or NOMEM); an accepted one must
 * give run times that a profile of its config takes (remat_profile_apply_run
 * may still refuse another machine's: INVALID), with finite, non-negative
 * medians and sample counts only where the table has the instruction.
 */
#include <math.h>
#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"
#include "planner/planner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static remat_run_times rt;
    remat_status st = remat_trace_parse(data, size, &rt);
    if (st) {
        FUZZ_CHECK(*remat_errmsg(), "a refused trace says why");
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_NOMEM, "status %d", (int)st);
        return 0;
    }
    FUZZ_CHECK(remat_config_check(&rt.cfg) == REMAT_OK, "an accepted trace has a valid config");
    FUZZ_CHECK(rt.n_overhead > 0 && isfinite(rt.overhead_ms) && rt.overhead_ms >= 0, "overhead %g", rt.overhead_ms);
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++)
            FUZZ_CHECK(!rt.n[k][t] || (isfinite(rt.ms[k][t]) && rt.ms[k][t] >= 0), "median of %d/%d", k, t);
    remat_profile *p = NULL;
    if (remat_profile_model(&rt.cfg, 0, &p) == REMAT_OK) {
        st = remat_profile_apply_run(p, &rt);
        FUZZ_CHECK(st == REMAT_OK || st == REMAT_ERR_INVALID, "apply: status %d", (int)st);
    }
    remat_profile_free(p);
    return 0;
}
