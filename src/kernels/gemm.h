/*
 * gemm.h -- the one seam every matrix product of remat goes through: the
 * linear layers, the LM head and both attention kernels' tiles.
 *
 *   C (M x N) = alpha * op(A) op(B) + beta * C [+ bias, per column]
 *
 * row-major with leading dimensions, op(X) = X or X^T; A and B are fp32 or
 * bf16 (both the same), C is fp32 or bf16, products accumulate in fp32.
 *
 * Two engines:
 *   - oneDNN (the default build): dnnl_sgemm for fp32, and for bf16 the
 *     matmul primitive (bf16 in, fp32 accumulation, fp32 or bf16 out, bias
 *     and beta fused), primitives cached by shape;
 *   - CBLAS (`make GEMM=cblas`, or --gemm cblas in a build with both):
 *     cblas_sgemm, fp32 only (Debian's OpenBLAS has no bf16 GEMM).
 * Both engines run every call site: the linear layers' large products and
 * the attention kernels' small tiles inside OpenMP regions.  Measured
 * (build/bench/bench_attention --gemm onednn,cblas, docs/performance.md,
 * "oneDNN against CBLAS on the tiles"),
 * oneDNN's per-call cost does not lose on the tiles: it is 10-17% faster at
 * T=2048, even at S, and at most 5-10% slower on the 124M shape's 64-row
 * tiles (attention there is about 2% of a step), so no site picks another
 * engine.
 *
 * Results are deterministic: a product gives the same bits for the same
 * shapes, engine and thread count, which is what exact recomputation needs.
 * Called inside an OpenMP parallel region, both engines run the product on
 * the calling thread.
 */
#ifndef REMAT_GEMM_H
#define REMAT_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include "remat.h"
#include "bf16.h"

/* A kernel's workspace: memory the op dispatcher hands its kernels for
 * the buffers they would otherwise keep outside the accounting allocator --
 * the fp32 copies of an emulated bf16 product's operands (gemm.c), the bf16
 * cross-entropy's fp32 row (crossentropy.c).  The tensor table declares its
 * size per op (tensors.h: the RS_* scratch items), the walker allocates it
 * around the op with the op's own scratch, and the simulator counts it.
 *   serial:  nserial bytes for calls made outside a parallel region (the
 *            linear layers' and the LM head's products, on the calling thread);
 *   thread:  nthreads slices of nthread bytes, slice i for thread i of a
 *            parallel region (the attention tiles, the cross-entropy rows).
 * Both 64-byte aligned.  A kernel given no workspace (NULL: benches, tests,
 * calibration) allocates what it needs for the call (remat_malloc) and
 * frees it before returning; the cross-entropy then has no row. */
typedef struct remat_ws {
    char *serial;
    size_t nserial;
    char *thread;
    size_t nthread;
    int nthreads;
} remat_ws;

/* bytes the calling thread may use of ws (NULL when none fit): the serial
 * part outside a parallel region when it holds `bytes`, else this thread's
 * slice; NULL ws gives NULL */
void *remat_ws_get(const remat_ws *ws, size_t bytes);
/* the same from this thread's slice only */
void *remat_ws_thread(const remat_ws *ws, size_t bytes);

typedef struct remat_gemm_op {
    int ab, c;               /* dtypes (REMAT_DTYPE_*) of A and B, and of C */
    int ta, tb;              /* transpose A, B */
    int M, N, K;
    float alpha, beta;
    const void *A; int lda;
    const void *B; int ldb;
    void *C; int ldc;
    const float *bias;       /* N values added to every row of C, or NULL (only with beta 0) */
    const remat_ws *ws;      /* where an emulated product's fp32 copies go (remat_gemm_ws_bytes), or NULL */
} remat_gemm_op;

/* Runs one product.  A failure (oneDNN could not create a primitive: out
 * of memory) is recorded for remat_gemm_check; C is then undefined. */
void remat_gemm(const remat_gemm_op *g);
/* REMAT_OK, or the first failure since the last call (and clears it). */
remat_status remat_gemm_check(void);
/* remat_gemm_bf16_native (remat.h): 0 where bf16 products run on fp32
 * copies of their operands (gemm.c, "bf16 where oneDNN has none"); also 0
 * while the tests' hook below forces the copies */
/* tests: on != 0 runs every bf16 product on fp32 copies, native or not */
void remat_gemm_bf16_emulate(int on);
/* The workspace bytes product g takes on this machine: the fp32 copies of
 * its bf16 operands and bf16 result when bf16 products are emulated (each
 * copy at a 64-byte boundary: at most (MK + NK + MN + 32) floats, the bound
 * the tensor table declares), else 0.  Without a workspace (g->ws NULL) a
 * product allocates them for the call. */
size_t remat_gemm_ws_bytes(const remat_gemm_op *g);

/* What this machine's GEMM does at the least (sgemm_probe.c): the best of
 * 32 calls of a REMAT_PROBE_FLOOR_N^3 product in cache (dt operands, fp32
 * result, the current engine and threads), each short enough (about 0.1 ms)
 * that some run undisturbed beside a busy process.  A longer product that
 * runs below 1 / REMAT_PROBE_DISTRUST of it was interrupted, not slow: the
 * probes (remat_gemm_gflops, the planner's remat_gemm_probe) repeat such a
 * pass, up to REMAT_PROBE_PASSES in all, and keep the best.  0 on failure. */
#define REMAT_PROBE_FLOOR_N 128
#define REMAT_PROBE_DISTRUST 8
#define REMAT_PROBE_PASSES 4
double remat_gemm_floor_gflops(remat_dtype dt);

#endif
