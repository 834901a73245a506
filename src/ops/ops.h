/*
 * ops.h -- the op dispatcher: an entry's kernel (tensors.h: enum
 * remat_kernel) run on the buffers the entry declares, with its weights
 * from the parameter table.  One dispatcher serves every architecture: it
 * names kernels, never tensors.
 *
 * remat_op_forward / remat_op_backward run one instruction's op on the
 * buffers of one context.  The interpreter (engine/model.c) calls them for
 * every forward, recompute and backward instruction of a schedule; the
 * profiler (planner/profile.c) calls the very same functions to time each
 * op.  An op receives exactly the operands its table entry declares
 * (remat_op_bind, from remat_operands_of): the tensor it writes, the
 * activations it reads, the gradient buffers it needs, allocates and
 * frees.  Asking for anything else is a bug in the table, caught by an
 * assertion, so the table cannot silently under-declare a read.  Ops never
 * allocate: scratch (the chunked LM head's chunk of logits) is declared in
 * the table and allocated around the op by the walker, and so is their
 * kernels' workspace (remat_op_args.ws: an emulated bf16 product's fp32
 * copies, the bf16 cross-entropy's rows), which the dispatcher passes down
 * to every kernel that makes a product.
 *
 * Layer: above table/ and kernels/, below engine/ and planner/.
 */
#ifndef REMAT_OPS_H
#define REMAT_OPS_H

#include <stdint.h>
#include "remat.h"
#include "../table/tensors.h"
#include "../table/params.h"
#include "../kernels/bf16.h"
#include "../kernels/gemm.h"

typedef struct remat_op_ctx {
    const remat_config *cfg;     /* shapes of the buffers (batch rows included) */
    const remat_table *tb;       /* cfg's tensor table */
    float *params, *grads;       /* flat vectors in the parameter table's layout */
    uint8_t *fresh;              /* training: per (parameter, layer) slice, 1 while this run
                                    has not written its gradient (remat_op_grads_begin), or
                                    NULL: every gradient write accumulates */
    int gnorm;                   /* with fresh: the gradient norm's partials are taken as the
                                    backward finishes each layer's gradients (ops.c; a whole
                                    step's run only: a micro-batch's gradient is summed after) */
    remat_bf16 *params16;        /* bf16: the copy of params the GEMMs read (NULL under fp32) */
    remat_param_layout ly;       /* where each parameter tensor lies */
    const float *rope;           /* RK_ROPE: the (max_seq, hs/2) cos and sin table
                                    (remat_rope_table_floats), or NULL */
    const int *inputs, *targets; /* (B*T) token ids of the batch */
    float *losses;               /* (B*T) per-position losses (written by the LM head) */
    uint64_t seed, step;         /* dropout keys: remat_rng_key(seed, step, layer, site) */
    uint64_t row0;               /* the step's batch row of the buffers' row 0 (a micro-batch's
                                    first global row; 0 for a whole batch): dropout masks are
                                    drawn at their whole-batch element indices */
    uint64_t loss_n;             /* tokens the training loss is a mean over: d(logits) is scaled
                                    by 1/loss_n (the step's B*T under gradient accumulation);
                                    0: the buffers' own B*T */
    int training;                /* 0: no dropout, no gradients in the LM head */
    int have_targets;            /* 0: the LM head computes no loss */
    double loss_sum;             /* out: the LM head's summed loss over B*T rows */
} remat_op_ctx;

/* The operands of one instruction, by tensor id; NULL where the table does
 * not declare the tensor as an operand of this op.  Each comes with its
 * extent in bytes: the dispatcher checks every read and write of a kernel
 * against it, so an entry declared smaller than its kernel uses is an
 * assertion failure, not a silent overrun. */
typedef struct remat_op_args {
    void *t[RT_MAXT];            /* in the tensor's element type (remat_tensor_dtype) */
    uint64_t n[RT_MAXT];         /* their extents (bytes) */
    void *x;                     /* the block input (RT_X), when declared */
    uint64_t nx;
    void *temp;                  /* the op's own scratch (remat_operands.op_bytes) */
    uint64_t ntemp;
    remat_ws ws;                 /* its kernels' workspace (the rest of remat_operands.temp_bytes) */
} remat_op_args;

/* Sets the parameter offsets for cfg's shape (params/grads may be NULL for
 * now and set later); everything else zero. */
void remat_op_ctx_init(remat_op_ctx *c, const remat_config *cfg, float *params, float *grads);

/* Fills a from the resolved operands o of an instruction (kind, tensor t),
 * the buffers by slot and their sizes by slot (bytes), and the scratch:
 * temp, of temp_bytes >= o->temp_bytes, cut as remat_operands says (the
 * op's own, then its kernels' workspace). */
void remat_op_bind(const remat_operands *o, int kind, int t, void *const *buf, const uint64_t *bytes, void *temp,
                   uint64_t temp_bytes, remat_op_args *a);

/* The number of floats of cfg's RoPE table (0 for an architecture without
 * one), and the table itself (remat_rope_table of kernels.h) into rope. */
size_t remat_op_rope_floats(const remat_config *cfg);
void remat_op_rope_fill(const remat_config *cfg, float *rope);

/* A run's parameter gradients without a zeroing pass: with c->fresh set
 * (remat_op_fresh_bytes of them), grads_begin marks every slice unwritten;
 * the first op to write a slice's gradient assigns it (a weight gradient's
 * GEMM then runs with beta 0 and never reads the old gradient), later ones
 * add to it; grads_end zeroes the slices no op wrote.  So c->grads ends a
 * run holding exactly the run's gradient, whatever it held before, with
 * the bits of zeroing first and accumulating. */
size_t remat_op_fresh_bytes(const remat_config *cfg);   /* with the c->gnorm tracker's storage */
void remat_op_grads_begin(remat_op_ctx *c);
void remat_op_grads_end(remat_op_ctx *c);

/* Tensor t's forward op (layer: its block, -1 for globals) into a->t[t]. */
void remat_op_forward(remat_op_ctx *c, int t, int layer, const remat_op_args *a);
/* Tensor t's backward op: parameter gradients accumulate into c->grads,
 * activation gradients go to the buffers the table names. */
void remat_op_backward(remat_op_ctx *c, int t, int layer, const remat_op_args *a);

/* The update instruction: global-norm clipping (torch.nn.utils.clip_grad_norm_)
 * then AdamW (torch.optim.AdamW, decay on the 2-D weights params.c names)
 * over c->params with c->grads; t is the 1-based optimizer step.  *norm
 * (may be NULL) gets the norm before clipping.  REMAT_ERR_NONFINITE, naming
 * the first tensor with a non-finite gradient, leaves everything as it was. */
remat_status remat_op_update(const remat_op_ctx *c, float *adam_m, float *adam_v, const remat_optim *o, uint64_t t,
                             float *norm);
/* Its pieces, for an update split over ranks (engine/dpstep.c):
 *   the gradient scale of clipping for the global norm `norm`;
 *   AdamW on the elements [lo, hi) of the flat vector, with adam_m/adam_v
 *   holding those elements only (m[0] is element lo), gradients scaled by
 *   scale (elementwise: the same bits as a whole-vector update);
 *   the first parameter tensor whose gradient has a non-finite element in
 *   [lo, hi), or the table's count. */
float remat_op_clip_scale(const remat_optim *o, double norm);
/* the squared gradient norm, remat_sumsq(c->grads)'s bits: from the
 * partials the backward took under c->gnorm, else a pass over the gradient */
double remat_op_grad_sumsq(const remat_op_ctx *c);
/* c->grads[lo, hi) was written outside the ops (a debug poison): the
 * norm's partials over it are taken again */
void remat_op_grad_written(const remat_op_ctx *c, size_t lo, size_t hi);
void remat_op_adamw_range(const remat_op_ctx *c, float *adam_m, float *adam_v, const remat_optim *o, uint64_t t,
                          size_t lo, size_t hi, float scale);
int remat_op_first_nonfinite(const remat_op_ctx *c, size_t lo, size_t hi);
/* params16 = bf16(params), when the context has a bf16 copy (after every
 * update, and whenever the fp32 weights change otherwise) */
void remat_op_refresh16(const remat_op_ctx *c);
/* the same for the elements [lo, hi) only (a ZeRO-1 rank: the slices the
 * all-gather brought, its own being written by AdamW) */
void remat_op_refresh16_range(const remat_op_ctx *c, size_t lo, size_t hi);

#endif
