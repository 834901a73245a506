/*
 * remat_testing.h -- hooks for testing remat itself.  NOT a stable API.
 *
 * These functions let a test build states that the normal API never builds
 * (a hand-made, possibly broken schedule; a NaN planted in a gradient) to
 * exercise the validator and the error paths.  Like zstd's
 * ZSTD_STATIC_LINKING_ONLY section, they may change or disappear in any
 * release, version numbers notwithstanding; programs that only train or
 * plan need nothing from here.  They are exported from libremat (REMAT_API)
 * so that tests can link the shared library too.
 *
 * Users: `remat train --debug-nan` (src/cli/cmd_train.c) and the tests.
 */
#ifndef REMAT_TESTING_H
#define REMAT_TESTING_H

#include "remat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For tests of the validator: build a schedule from raw instructions.
 * kinds/layers/tensor ids are parallel arrays of length n.  The schedule is
 * validated: an invalid one gives REMAT_ERR_SCHEDULE with the validator's
 * message, and *out NULL. */
REMAT_API remat_status remat_schedule_from_instrs(const remat_config *cfg, size_t n,
                                                  const remat_instr_kind *kinds,
                                                  const int *layers, const int *tensors,
                                                  remat_schedule **out);

/* remat_model_debug_poison's target for the loss (any parameter index is
 * below it). */
#define REMAT_POISON_LOSS 1000

/* Testing hook for the non-finite path (`remat train --debug-nan`): the next
 * remat_model_step that reaches its update makes the first gradient element
 * of parameter tensor param (an index of remat_config_param_get) NaN, or the
 * loss when param is REMAT_POISON_LOSS, so that step returns
 * REMAT_ERR_NONFINITE with the parameters untouched (with update = 1; the
 * loss also without).  One-shot.  REMAT_ERR_INVALID for any other value. */
REMAT_API remat_status remat_model_debug_poison(remat_model *m, int param);

/* Testing hook for the extents the dispatcher checks (tests/test_schedule.c):
 * from now on m allocates tensor `name` of its table `bytes` smaller than
 * its formula says (name NULL: no tensor), and tells the dispatcher so; the
 * kernel that reads or writes it must then stop the process with an
 * assertion.  The state is m's: the tables, the planner and other models
 * are untouched.  REMAT_ERR_INVALID for a name m's table lacks, or more
 * bytes than the tensor has. */
REMAT_API remat_status remat_model_debug_shrink(remat_model *m, const char *name, uint64_t bytes);

/* Testing hook for allocation failures (`remat train --debug-alloc-fail`):
 * the n-th allocation of the library from now fails (0: none), once. */
REMAT_API void remat_debug_fail_alloc(uint64_t n);

/* Testing hook for remat_graph_search's REMAT_GRAPH_EXACT_LAYERS
 * (tests/test_graph.c): mode 1 gives each layer two choices, nothing or the
 * whole layer, and leaves the greedy out (the answer: the best union of
 * whole layers, to be checked against every union); mode 2 three, nothing,
 * the whole layer or the greedy's rows in it, as for a layer of too many
 * candidates; 0 as documented. */
REMAT_API void remat_graph_debug_layer_choices(int mode);

#ifdef __cplusplus
}
#endif
#endif
