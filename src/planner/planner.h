/*
 * planner.h -- internals of the budget planner: the cost model (cost.c) and
 * the dynamic program over plans (planner.c).  The public face is the
 * "planner" section of remat.h.
 */
#ifndef REMAT_PLANNER_H
#define REMAT_PLANNER_H

#include <stdint.h>
#include "remat.h"
#include "../table/tensors.h"
#include "../schedule/schedule.h"
#include "../schedule/runtimes.h"

/* ---- cost model (cost.c) ------------------------------------------------ */

struct remat_profile {
    remat_config cfg;         /* the config the times are for */
    int measured;             /* 1: timed on this machine; 0: FLOP/byte model */
    char cpu[128];            /* /proc/cpuinfo "model name" (measured only) */
    int threads;              /* thread count when measured */
    double gflops;            /* model: GEMM throughput */
    double other_gflops;      /* model: throughput of the non-GEMM loops */
    double gbps;              /* model: memory bandwidth, GB/s */
    double fwd_ms[RT_MAXT];   /* forward op of each activation tensor, inputs cold */
    double bwd_ms[RT_MAXT];   /* its backward op (0 where none), inputs cold */
    double fwd_hot_ms[RT_MAXT], bwd_hot_ms[RT_MAXT];     /* the same, inputs in cache */
    /* a chain with a dense prefix (cfg.moe_first_dense, the cluster planner's device model):
     * the dense layers' op times (the arrays above are the routed layers'); dense 0: none */
    int dense;
    double dense_fwd_ms[RT_MAXT], dense_bwd_ms[RT_MAXT];
    uint64_t cache_bytes;     /* last-level cache: what counts as "just produced" */
    double host_bps;          /* the host link, bytes/s each way (a GPU's PCIe or C2C), for offload
                                 and reload; 0: none (remat's CPU engine: offload is refused) */
    double update_ms;         /* zero grads + global norm + AdamW, per step */
    char desc[256];
    /* A training run's times (calibrate.c): the median ms of instruction
     * kind k on tensor t (the update: t 0), run_n[k][t] samples (0: the run
     * did not execute it), and of a step outside its instructions.  The
     * cost pass prices what the run executed at these. */
    double run_ms[REMAT_NKINDS][RT_MAXT];
    uint32_t run_n[REMAT_NKINDS][RT_MAXT];
    double run_overhead_ms;
    uint32_t run_overhead_n;
};

/* The bytes of the tensors an op reads (in: a def's fwd_in or bwd_in; RT_X
 * is the block input, the previous block's output). */
double remat_input_bytes(const remat_config *c, const remat_table *tb, const int8_t *in);
/* the same in block `layer` (a dense prefix's layers differ) */
double remat_input_bytes_at(const remat_config *c, const remat_table *tb, const int8_t *in, int layer);

/* The config part of a profile's key, as text (profiles of configs that
 * remat_config_same calls equal share it). */
void remat_profile_config_key(const remat_config *c, char *buf, size_t n);

/* A profile of given op times (a table read from a file, src/io/tablefile.c):
 * fwd[t] and bwd[t] for the table's tensors t < first_grad, the update's
 * time; measured on device.  No cache model: an op takes its time wherever
 * it runs. */
void remat_profile_fill_times(remat_profile *p, const remat_config *cfg, const double *fwd, const double *bwd,
                              double update_ms, const char *device);
/* The FLOP model with default throughputs, filled into p (no allocation). */
void remat_profile_fill_model(remat_profile *p, const remat_config *cfg, double gflops);
/* The run time of an instruction of kind k on tensor t, when p has one (calibrate.c stored it) (a
 * recomputation the run never executed: its forward's); -1 otherwise. */
double remat_profile_run_ms(const remat_profile *p, int k, int t);
/* ---- calibration (calibrate.c) -------------------------------------------- */

/* Copies a run's times into p (config, CPU and thread count checked against
 * p and this machine: REMAT_ERR_INVALID, p unchanged). */
remat_status remat_profile_apply_run(remat_profile *p, const remat_run_times *rt);

/* What the GEMM probe measured for a config (remat_gemm_probe). */
typedef struct remat_probe {
    double gemm_ms[RT_MAXT][2];   /* the products of tensor t's forward (0) and backward
                                     (1) op, whole (linear layers and the LM head) */
    double tile_gflops;           /* the attention tiles' products */
    double gbps;                  /* streaming memory bandwidth */
    double other_gflops;          /* pointwise math in cache */
    double ms;                    /* what the probe took */
    uint64_t bytes;               /* what it allocates: its operands, the tiles' qkv and
                                     scores, the triad's arrays */
    double max_flops;             /* the most one timed call of a product does (a
                                     layer's backward is its two products) */
    /* A busy machine (kernels/gemm.h, REMAT_PROBE_DISTRUST): */
    double floor_gflops;          /* a 128^3 product in cache, best of 32 */
    double gemm_gflops;           /* the products' rate, the best pass's (their FLOPs over
                                     their best times, as timed: cut shapes unscaled) */
    double first_gflops;          /* the first pass's, the lower of products and tiles */
    int passes;                   /* passes run: more than one when a pass ran under
                                     1 / REMAT_PROBE_DISTRUST of the floor */
} remat_probe;

/* Times every product of cfg's ops through the GEMM seam, at its own shape
 * or, past a size, at a smaller one scaled back by its FLOPs (calibrate.c
 * says how), with the current thread count, and the bandwidth and
 * pointwise probes (well under a second, whatever the model's size).
 * REMAT_ERR_NOMEM. */
remat_status remat_gemm_probe(const remat_config *cfg, remat_probe *out);
/* What remat_gemm_probe would allocate for cfg and the most one of its
 * products would do (out->bytes, out->max_flops; the rest 0), without
 * allocating or timing anything. */
void remat_gemm_probe_size(const remat_config *cfg, remat_probe *out);
/* Whether p's products or tiles (the best of its passes) still ran under
 * 1 / REMAT_PROBE_DISTRUST of its floor: times measured on a busy machine
 * (cost.c, which describes a probed profile so). */
int remat_probe_distrusted(const remat_probe *p);
/* The FLOP/byte model with the probe's speeds, filled into p. */
void remat_profile_fill_probed(remat_profile *p, const remat_config *cfg, const remat_probe *pr);

/* The time of every instruction of a schedule, in context (into ms[i]):
 * an op runs at its cold time, less the share of its activation inputs that
 * are still in cache times (cold - hot).  An input counts as in cache when it
 * was produced after the most recent backward instruction of another block
 * (so a tensor kept across other blocks' work never is; one recomputed
 * inside its block's backward is) and fewer than cache_bytes bytes were
 * produced since.  Block inputs (x) are left out of the share.  This keeps a
 * block's times a function of its own keep-set only, which the planner's
 * recurrences rely on.  Returns the total; the recompute part into
 * *recompute_ms when not NULL.  ms may be NULL. */
/* Offload and reload are priced at p->host_bps, a run of consecutive ones
 * hiding behind one block's forward (offloads) or backward (reloads) as the
 * profile times them (cost.c).
 * -1 when out of memory (REMAT_ERR_NOMEM in remat_errmsg) or when s offloads
 * and p has no host link (REMAT_ERR_INVALID; remat_profile_check_offload
 * says it first) */
double remat_cost_schedule_times(const remat_profile *p, const remat_schedule *s, double *ms, double *recompute_ms);
double remat_cost_schedule_ms(const remat_profile *p, const remat_schedule *s, double *recompute_ms);
/* REMAT_ERR_INVALID (with the message) when s offloads and p has no host link */
remat_status remat_profile_check_offload(const remat_profile *p, const remat_schedule *s);
/* The profile to use: prof itself (after checking that it is for cfg), or
 * the default model written into *tmp.  NULL (message set) on mismatch. */
const remat_profile *remat_profile_resolve(const remat_config *cfg, const remat_profile *prof,
                                           remat_profile *tmp);

/* ---- the dynamic program (planner.c) ----------------------------------- */

typedef struct remat_planner remat_planner;

/* Builds the planner for cfg: the block constants (read off compiled 1- and
 * 2-block schedules), the keep-sets and the exact minimum peak.  droppable:
 * the per-block tensors a keep-set may drop (REMAT_KEEP_ALL & ~res3 for the
 * full search space; tests pass fewer to compare with exhaustive
 * enumeration). */
remat_status remat_planner_create(const remat_config *cfg, const remat_profile *prof, uint32_t droppable,
                                  remat_planner **out);
/* Computes the Pareto fronts best() needs, for peaks up to limit (0: all).
 * Exact when that is cheap enough, else thinned (remat_planner_exact). */
remat_status remat_planner_build_fronts(remat_planner *p, uint64_t limit);
void remat_planner_free(remat_planner *p);
/* Smallest activation peak over the search space. */
uint64_t remat_planner_min_peak(const remat_planner *p);
/* Fastest plan whose predicted activation peak is <= act_budget: its
 * plan:TOKENS string (into policy[n]), predicted peak and step time.
 * REMAT_ERR_BUDGET when nothing fits, REMAT_ERR_RANGE when n is too small. */
remat_status remat_planner_best(const remat_planner *p, uint64_t act_budget, char *policy, size_t n,
                                uint64_t *peak, double *ms);
/* The whole-step front: number of points, and point i (peak, time). */
size_t remat_planner_front_size(const remat_planner *p);
void remat_planner_front_point(const remat_planner *p, size_t i, uint64_t *peak, double *ms);
/* The bucket width of the fronts: 1 when they are exact
 * (remat_planner_exact() = 1); for long chains of wide blocks a fraction of
 * the peak range, where each bucket keeps only its fastest plan (peaks stay
 * exact, plans still fit; a budget may get the plan of a slightly smaller
 * one). */
uint64_t remat_planner_unit(const remat_planner *p);
int remat_planner_exact(const remat_planner *p);
/* For tests: the fronts with a given bucket width (1: exact), no fallback. */
remat_status remat_planner_build_fronts_unit(remat_planner *p, uint64_t limit, uint64_t unit);
/* For tests: the program's own prediction of any plan:TOKENS string (the
 * same recurrences the fronts use), to compare with the simulator.  prof
 * must be the planner's (NULL: the default model). */
remat_status remat_planner_predict(remat_planner *p, const remat_profile *prof, const char *plan, uint64_t *peak,
                                   double *ms);
/* The largest v in [1, limit] for which fits(arg, v) says *ok (fits(1) is
 * known to): doubling, then bisection.  The maximize searches use it. */
typedef remat_status (*remat_fits_fn)(void *arg, int v, int *ok);
remat_status remat_search_largest(int limit, remat_fits_fn fits, void *arg, int *best);

/* "12.34 MiB" style (B, KiB, MiB, GiB) into buf: the planner's messages and
 * remat_plan_explain */
const char *remat_fmt_bytes(uint64_t b, char *buf, size_t n);

/* Number of keep-sets left after Pareto pruning (for reports and tests). */
int remat_planner_keepsets(const remat_planner *p);
/* With a host link (the profile's host_bps): the keep-sets that may also be
 * offloaded (OFF moves; 0 without one). */
int remat_planner_offload_sets(const remat_planner *p);
/* Bounds what the plans put on the host to host_bytes: the first sweep's
 * blocks [0, n) may offload, n as many as fit when each puts the most any
 * offloaded keep-set does (conservative).  Call before
 * remat_planner_build_fronts (it drops fronts already built). */
void remat_planner_set_host(remat_planner *p, uint64_t host_bytes);
/* The most bytes one offloaded block puts on the host (over the offloaded
 * keep-sets), and, for tests, the offloading blocks set directly: [0, n). */
uint64_t remat_planner_offload_host(const remat_planner *p);
void remat_planner_set_offload_blocks(remat_planner *p, int n);


/* tree.c: the fastest plan of a table whose measure (what a remat_table_row
 * is judged by: its kept bytes, its device peak) is at most target -- the
 * planner's under room + add (activations_only act), planned again with
 * that much less room while the checkpoint calls' own bytes, which the
 * simulator does not see, make it measure more, from room = target down
 * while room + add >= floor.  REMAT_ERR_BUDGET (no message set) when none
 * fits; remat_table_optimal and remat_table_optimal_device say why.  info
 * is cfg's (remat_table_get_info), read once by the caller. */
remat_status remat_table_fit(const remat_config *cfg, const remat_table_info *info, const remat_profile *prof,
                             uint64_t target, uint64_t add, uint64_t floor, int act,
                             uint64_t (*measure)(const remat_table_row *), remat_table_row *out);
/* devpeak.c: row r's device peak (remat.h, "a budget on device memory") into
 * r->device_peak_bytes, r's other fields set; REMAT_ERR_NOMEM */
remat_status remat_table_device_peak_of(const remat_config *cfg, const remat_table_info *info, remat_table_row *r);

/* ---- cluster planning (cluster.c), for the layout search (cluster_search.c) ---- */
/* The fastest row Megatron-LM's flags express for the layout (policy NULL:
 * none fits), as remat_cluster_plan's best_megatron; options bound to take
 * longer than cutoff are not priced (INFINITY: all are); *violated 1 when
 * that bound failed (cluster.c says it). */
remat_status remat_cluster_megatron_best(const remat_config *cfg, const remat_cluster *cl, double cutoff,
                                         remat_cluster_row *best, int *violated);
/* The most weights, gradients and optimizer state a stage's GPU holds (the
 * first stage, or with a dense prefix the largest stage; cl checked) */
uint64_t remat_cluster_state_max(const remat_config *cfg, const remat_cluster *cl);
/* Megatron-LM's full recomputation of every layer, priced as it runs it: an
 * upper bound on the layout's best flags where it fits. */
remat_status remat_cluster_megatron_full(const remat_config *cfg, const remat_cluster *cl, remat_cluster_row *out);

#endif
