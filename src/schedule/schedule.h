/*
 * schedule.h -- internals of policies, schedules and the walker.
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
 * recompute, backward and free instructions (compile.c).  An ALL move may
 * also offload: after block a's forward, what it keeps (or the named part of
 * it) and its input x_a go to host memory, so that the block holds no device
 * bytes while [a+1, b) is solved, and come back at the start of its
 * backward (offload and reload instructions).
 *
 * The walker (walk.c) is the one function that applies a schedule's
 * allocation rules, instruction by instruction.  The compiler keeps its
 * view of what is live with it, the simulator and the validator are dry
 * walks, the engine's interpreter is a walk whose hooks allocate buffers
 * and run ops, and the planner's cost pass is a walk whose hooks time them.
 *
 * Layer: above table/, below engine/ and planner/.
 */
#ifndef REMAT_SCHEDULE_H
#define REMAT_SCHEDULE_H

#include <stdint.h>
#include "remat.h"
#include "../table/tensors.h"

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
    int offload_n;          /* offload:N -- blocks [0, N) offload (first sweep) */
    uint32_t offload_mask;  /* what they offload: per-block tensors, the output's bit
                               standing for the block input; all bits: everything */
} remat_policy;

/* Parses a policy string (NULL or "" means "none") against table tb.  On
 * error returns REMAT_ERR_POLICY with a message naming the bad term. */
remat_status remat_policy_parse(const remat_table *tb, const char *str, remat_policy *out);
void remat_policy_clear(remat_policy *p);
/* Canonical text of a parsed policy (malloc'd). */
char *remat_policy_string(const remat_table *tb, const remat_policy *p);

/* Every per-block tensor of table tb, and the block output's bit. */
static inline uint32_t remat_keep_all(const remat_table *tb) { return (uint32_t)((1ull << tb->nblock) - 1); }
static inline uint32_t remat_out_bit(const remat_table *tb) { return 1u << (tb->nblock - 1); }

typedef struct remat_instr {
    uint8_t kind;           /* remat_instr_kind */
    int8_t tid;             /* tensor id, -1 for update */
    int32_t layer;          /* block, or -1 for global tensors */
} remat_instr;

/* The compiler's moves, one call each as it decides them (remat_plan_tree,
 * src/planner/tree.c): parent is the index the call for the CK move whose
 * re-run this move is in returned (-1: the first forward); move 0 ALL
 * (keep, off), 1 CK(m).  Returns this move's index (< 0: out of memory,
 * which ends the compile with REMAT_ERR_NOMEM). */
typedef int (*remat_move_fn)(void *arg, int parent, int a, int b, int move, int m, uint32_t keep, uint32_t off);

struct remat_schedule {
    remat_config cfg;
    const remat_table *tb;
    int forward_only;       /* evaluation: no backward, no update */
    char *policy;           /* canonical policy text */
    remat_instr *ins;
    size_t n, cap;
    size_t fwd_end;         /* first instruction after the block forward sweep */
    /* the simulator's view, from the validating walk at creation */
    remat_sim sim;
    uint64_t *live_after, *peak_in;   /* per instruction */
    double *flops_of;
    uint64_t *host_after;             /* per instruction: bytes on the host after it */
    size_t noffload;                  /* offload instructions (0: the host is never used) */
    remat_move_fn on_move;            /* NULL, or told every move (remat_schedule_moves) */
    void *on_move_arg;
};

remat_status remat_schedule_push(remat_schedule *s, int kind, int layer, int tid);

/* Slot of (layer, tid) for a schedule's config; global tensors have layer -1. */
static inline int remat_islot(const remat_schedule *s, int layer, int tid)
{
    return remat_table_slot(s->tb, s->cfg.n_layer, layer, tid);
}

/* Compiles a parsed policy into s (already holding cfg and tb). */
remat_status remat_compile(remat_schedule *s, const remat_policy *p);
/* The forward-only schedule of evaluation and sampling: each tensor freed
 * after its last reader, the logits freed last (the interpreter reads them
 * at that free). */
remat_status remat_compile_forward(remat_schedule *s);

/* Compiles policy for cfg only to tell fn its moves (no schedule kept). */
remat_status remat_schedule_moves(const remat_config *cfg, const char *policy, remat_move_fn fn, void *arg);

/* The simulator's per-instruction arrays (each remat_schedule_length long). */
remat_status remat_schedule_trace(const remat_schedule *s, remat_sim *sim, uint64_t *live_after, uint64_t *peak_in);

/* Cost of the optimal binomial schedule (revolve): block forwards re-run for
 * a chain of n elements with s checkpoint slots, and the best first split. */
double remat_revolve_cost(int n, int s, int *split);

/* ---- the walker --------------------------------------------------------------
 * Per instruction, the rule (written here and nowhere else):
 *   forward / recompute  allocate the tensor, allocate the op's scratch,
 *                        run the op, release the scratch;
 *   backward             allocate the gradient buffers the table lists,
 *                        allocate the op's scratch, run the op, release
 *                        the scratch, free the buffers it consumed;
 *   free                 release the tensor (or its copy on the host);
 *   update               run the optimizer;
 *   offload              the tensor's device bytes leave for the host;
 *   reload               they come back (no op runs: the bytes are copied).
 * The peak inside an instruction is therefore the live bytes before it plus
 * everything it allocates.  With check set, the walker validates as it
 * goes: every read the table declares is live, every freed buffer is live,
 * no tensor is computed over a live one, no gradient is computed twice, no
 * backward runs before the gradient buffers it needs exist; and at the end,
 * nothing leaks, every gradient was computed and the update comes last.
 * Offload and reload: only a live tensor is offloaded and only an offloaded
 * one reloaded; an offloaded tensor is not readable until reloaded, and none
 * may be on the host at the end.  The release and alloc hooks see an
 * offload and a reload as the device bytes going and coming (the exec hook
 * sees both instructions too).  Hooks may be NULL (a dry run). */
typedef struct remat_walk_hooks {
    void *arg;
    /* before instruction i has any effect */
    remat_status (*begin)(void *arg, size_t i, const remat_instr *in);
    /* slot (tensor t) comes to life: bytes, zero-filled when zero */
    remat_status (*alloc)(void *arg, int slot, int t, uint64_t bytes, int zero);
    void (*release)(void *arg, int slot, int t, uint64_t bytes);
    /* scratch around an op */
    remat_status (*temp_alloc)(void *arg, uint64_t bytes);
    void (*temp_release)(void *arg, uint64_t bytes);
    /* the op of a forward, recompute, backward or update, operands live */
    remat_status (*exec)(void *arg, size_t i, const remat_instr *in, const remat_operands *o);
    /* after: live activation bytes, the peak inside, the op's FLOPs */
    void (*end)(void *arg, size_t i, const remat_instr *in, uint64_t live, uint64_t peak, double flops);
    /* after, too: the activation bytes on the host */
    void (*host)(void *arg, size_t i, uint64_t host_bytes);
} remat_walk_hooks;

typedef struct remat_walker {
    const remat_config *cfg;
    const remat_table *tb;
    int L, nslots, check, forward_only;
    const remat_walk_hooks *h;
    uint8_t *live;          /* per slot: 0 dead, 1 on the device, 2 on the host (WALK_HOST) */
    uint8_t *done;          /* per slot: its backward ran */
    uint64_t *bytes;        /* per slot: its tensor's bytes (remat_tensor_bytes_at, once) */
    uint64_t cur;           /* live activation bytes (on the device) */
    uint64_t host;          /* activation bytes on the host */
    int ckpts, last_rec_layer;
    size_t fwd_end;
    remat_machine mc;       /* the machine the ops run on (remat_machine_now, at init) */
    remat_sim sim;
} remat_walker;

/* The machine this process runs ops on, for cfg: the threads of its
 * kernels' parallel regions (remat_get_threads) and, under bf16, whether
 * its bf16 products run on fp32 copies (kernels/gemm.h) -- what the tensor
 * table's workspace items (tensors.h, RS_*) are sized by.  The walker takes
 * it at init, so that the simulator predicts and the interpreter allocates
 * the same bytes on the same machine. */
void remat_machine_now(const remat_config *cfg, remat_machine *mc);

/* a slot's state in remat_walker.live */
enum { WALK_DEAD = 0, WALK_DEVICE = 1, WALK_HOST = 2 };

remat_status remat_walker_init(remat_walker *w, const remat_config *cfg, int forward_only, int check,
                               const remat_walk_hooks *h, size_t fwd_end);
/* Applies instruction i. */
remat_status remat_walker_step(remat_walker *w, size_t i, const remat_instr *in);
/* End-of-schedule checks (with check) and the sim's last fields. */
remat_status remat_walker_finish(remat_walker *w);
void remat_walker_free(remat_walker *w);
/* A whole walk of s; sim may be NULL. */
remat_status remat_walk(const remat_schedule *s, int check, const remat_walk_hooks *h, remat_sim *sim);

#endif
