/*
 * dplayout.h -- the data-parallel layout (private to the library): who
 * runs which micro-batch, how the micro-batch gradients are bracketed, who
 * owns which slice of the parameter vector, which exchanges a step makes,
 * and the bytes all of it holds.  One description, read by the engine
 * (engine/dpstep.c), which allocates and exchanges by it, and by the
 * planner (remat_parallel_memory_of, remat_parallel_comm_ms), which
 * predicts from it; the tests check the engine's measured figures against
 * the predicted ones.  Why the layout is what it is:
 * README, "Data parallelism (MPI)".
 */
#ifndef REMAT_DPLAYOUT_H
#define REMAT_DPLAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "remat.h"

/* Parameters per block of the gradient norm, and the alignment of the
 * slices: the block of remat_sumsq (kernels/adamw.c), so that a slice's block
 * partials are the blocks a whole-vector sumsq adds. */
#define REMAT_DP_ALIGN 4096
/* Floats per message of the reduce-scatter: the receive buffer holds one
 * (4 MiB), whatever the model's size. */
#define REMAT_DP_PIECE ((size_t)1 << 20)

typedef struct remat_dp_layout {
    int R, logR, rank;       /* ranks (a power of two), log2 R, this rank */
    int B, b, M, Ml;         /* global batch, micro-batch, micro-batches per step, per rank (M/R) */
    int zero;                /* ZeRO-1 */
    int active;              /* R > 1 or M > 1: steps run through the reduction */
    size_t P;                /* parameters */
    size_t S;                /* elements of a full slice (a multiple of REMAT_DP_ALIGN) */
    int own;                 /* this rank's slice: remat_dp_bitrev(rank) */
    size_t own_lo, own_hi;   /* its elements */
    size_t nblocks;          /* norm blocks of the whole vector */
    int tree_bufs;           /* partial-sum buffers beside the model's gradient */
    size_t recv_n;           /* floats of the receive buffer (0 for one rank) */
} remat_dp_layout;

/* The layout of rank `rank` of R for cfg (cfg->batch = B) with micro-batch
 * b and zero; REMAT_ERR_INVALID (one line naming the valid micro-batches)
 * when it does not exist. */
remat_status remat_dp_layout_make(const remat_config *cfg, int R, int rank, int b, int zero, remat_dp_layout *out);

/* x's low `bits` bits in reverse order. */
static inline int remat_dp_bitrev(int x, int bits)
{
    int y = 0;
    for (int i = 0; i < bits; i++) y |= ((x >> i) & 1) << (bits - 1 - i);
    return y;
}

/* First element of slice k (k in [0, R]; slice R's is P). */
static inline size_t remat_dp_slice_lo(const remat_dp_layout *l, int k)
{
    size_t lo = (size_t)k * l->S;
    return lo < l->P ? lo : l->P;
}

/* The slices [*klo, *khi) that rank r holds before halving step s (s = 0:
 * all R; s = logR: its own one).  Step s pairs r with r ^ (1 << s); the one
 * whose bit s is 0 keeps the lower half. */
void remat_dp_region(int R, int r, int s, int *klo, int *khi);

/* The tree's split of n leaves: the first ceil(n/2) and the last floor(n/2). */
static inline int remat_dp_split(int n) { return n - n / 2; }
/* Buffers live at once when a tree of n leaves is summed in postorder. */
int remat_dp_tree_live(int n);
/* v[0..n) added in the tree's bracketing (the loss sums). */
double remat_dp_tree_sum(const double *v, int n);

/* The point-to-point exchanges rank l->rank makes in one step (update: a
 * step that updates the parameters; else the gradients are all-gathered),
 * in order: fn(arg, bytes sent, bytes received). */
void remat_dp_exchanges(const remat_dp_layout *l, int update, void (*fn)(void *arg, uint64_t sent, uint64_t recvd),
                        void *arg);

#endif
