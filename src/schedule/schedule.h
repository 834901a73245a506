/*
 * schedule.h -- internals of policies and schedules.
 *
 * A policy decides, for every sub-chain [a, b) of the blocks it meets while
 * compiling, one of two moves (the two moves of Rotor, Beaumont et al. 2019):
 *   ALL(keep)  run block a forward keeping the tensors in `keep`, solve
 *              [a+1, b), then run block a backward, recomputing what it
 *              dropped from what it kept;
 *   CK(m)      run blocks a..m-1 forward keeping only their output x_m (a
 *              checkpoint), solve [m, b), then solve [a, m) again from x_a.
 * The chain has L blocks plus the head (lnf + logits + loss) as element L.
 * Compiling a policy is a recursion over these moves that emits forward,
 * recompute, backward and free instructions (compile.c).
 */
#ifndef REMAT_SCHEDULE_H
#define REMAT_SCHEDULE_H

#include <stdint.h>
#include "remat.h"
#include "../engine/tensors.h"

enum remat_structure { RS_NONE = 0, RS_EVERY, RS_FIRST, RS_REVOLVE, RS_PLAN };

typedef struct remat_policy {
    int structure;          /* enum remat_structure */
    int arg;                /* K, N or S; for sqrt: 0 until resolved */
    int is_sqrt;
    int is_full;
    uint32_t keep;          /* mask over per-block tensors kept by ALL */
    int selective, pointwise;
    uint32_t save_mask;     /* nonzero when save: was given */
    char *plan;             /* tokens after "plan:" (owned) */
} remat_policy;

/* Parses a policy string (NULL or "" means "none").  On error returns
 * REMAT_ERR_POLICY with a message naming the bad term. */
remat_status remat_policy_parse(const char *str, remat_policy *out);
void remat_policy_clear(remat_policy *p);
/* Canonical text of a parsed policy (malloc'd). */
char *remat_policy_string(const remat_policy *p);

/* Every per-block tensor. */
#define REMAT_KEEP_ALL ((uint32_t)((1u << RT_NBLOCK) - 1))

typedef struct remat_instr {
    uint8_t kind;           /* remat_instr_kind */
    int8_t tid;             /* tensor id (RT_*), -1 for update */
    int32_t layer;          /* block, or -1 for global tensors */
} remat_instr;

struct remat_schedule {
    remat_config cfg;
    char *policy;           /* canonical policy text */
    remat_instr *ins;
    size_t n, cap;
    size_t fwd_end;         /* first instruction after the block forward sweep */
    int validated;
};

remat_status remat_schedule_push(remat_schedule *s, int kind, int layer, int tid);

/* Effects of one backward: gradient buffers allocated, then freed.  D_BRANCH
 * exists only with dropout. Returns counts through na / nf. */
void remat_bwd_effects(const remat_config *cfg, int tid, int alloc[2], int *na,
                       int freed[2], int *nf);
/* The gradient buffers a backward needs live before it runs. */
int remat_bwd_grad_needs(int tid, int need[2]);

/* Slot of (layer, tid) for a schedule's config; global tensors have layer -1. */
static inline int remat_islot(const remat_config *c, int layer, int tid)
{
    return remat_slot(c->n_layer, layer < 0 ? 0 : layer, tid);
}

/* Compiles a parsed policy into s (already holding cfg). */
remat_status remat_compile(remat_schedule *s, const remat_policy *p);

/* The simulator's walk, per instruction (arrays of remat_schedule_length):
 * live bytes after each instruction and the peak inside it (the planner
 * reads block-level constants off these in one pass). */
remat_status remat_schedule_trace(const remat_schedule *s, remat_sim *sim, uint64_t *live_after, uint64_t *peak_in);

/* Cost of the optimal binomial schedule (revolve): block forwards re-run for
 * a chain of n elements with s checkpoint slots, and the best first split. */
double remat_revolve_cost(int n, int s, int *split);

#endif
