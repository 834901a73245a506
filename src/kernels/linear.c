/*
 * linear.c -- fully connected layer out = inp @ w^T + b on the GEMM seam
 * (gemm.h), forward and backward.  Contract in kernels.h.
 *
 * Legend: N rows (= B*T), IC input channels, OC output channels.
 * w is stored (OC,IC) as torch.nn.Linear.weight.
 * Parameter gradients (dw, db) accumulate (+=) in fp32, or are assigned
 * when acc is 0 (a step's first write of them); dinp is assigned.
 * Under bf16 the operands are bf16 (w: the model's bf16 copy), the
 * products accumulate in fp32, the bias is added in fp32 before the one
 * rounding of out; dw accumulates in fp32 (a bf16 x bf16 -> fp32 GEMM with
 * beta = 1).
 *
 * Determinism: each output element comes from one fixed-order inner
 * product for given shapes, engine and thread count; the bias sum below
 * runs over rows in order, so it is also independent of the thread count.
 */
#include <string.h>
#include "kernels.h"
#include "vmath.h"

/* out (N,OC) = inp (N,IC) @ w^T (IC,OC) + b (OC) */
void remat_linear_forward(void *out, int out_dt, const void *inp, const void *w, const float *b, int N, int IC, int OC,
                    int dt, const remat_ws *ws)
{
    if (N <= 0 || OC <= 0) return;
    remat_gemm_op g = { dt, out_dt, 0, 1, N, OC, IC, 1.0f, 0.0f,
                        inp, IC, w, IC, out, OC, b, ws };
    remat_gemm(&g);
}

/* dinp (N,IC)  = dout (N,OC) @ w (OC,IC)             (assigned; skipped if NULL)
 * dw   (OC,IC) += dout^T (OC,N) @ inp (N,IC)
 * db   (OC)    += sum_n dout[n,:]                    (skipped if NULL)
 * acc = 0: dw and db are assigned instead: the GEMM runs with beta 0 (no
 * read of dw: a fifth of a weight-gradient product's time here), db's sums
 * start from 0.  Both give the bits += gives on zeros (measured: every
 * product shape of the 124M and Llama-S steps, oneDNN fp32 and bf16). */
#define LIN_CBLOCK 64
void remat_linear_backward(void *dinp, float *dw, float *db, const void *dout, const void *inp, const void *w,
                     int N, int IC, int OC, int dt, int acc, const remat_ws *ws)
{
    if (!acc) {   /* the sums below (and an empty one) start from zero */
        if (db && OC > 0) memset(db, 0, (size_t)OC * sizeof(float));
        if (N <= 0 && OC > 0 && IC > 0) memset(dw, 0, (size_t)OC * IC * sizeof(float));
    }
    if (N <= 0 || OC <= 0) {
        /* an empty sum: dinp is a zero matrix, dw/db are unchanged */
        if (dinp && N > 0 && IC > 0) memset(dinp, 0, (size_t)N * IC * remat_dtype_bytes(dt));
        return;
    }
    if (IC > 0) {
        if (dinp) {
            remat_gemm_op g = { dt, dt, 0, 0, N, IC, OC, 1.0f, 0.0f,
                                dout, OC, w, IC, dinp, IC, NULL, ws };
            remat_gemm(&g);
        }
        remat_gemm_op g = { dt, REMAT_DTYPE_FP32, 1, 0, OC, IC, N, 1.0f, acc ? 1.0f : 0.0f,
                            dout, OC, inp, IC, dw, IC, NULL, ws };
        remat_gemm(&g);
    }
    if (db) {
        /* column sums: blocks of columns in parallel, rows in order */
        int nblk = (OC + LIN_CBLOCK - 1) / LIN_CBLOCK;
        #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)N * OC))
        for (int blk = 0; blk < nblk; blk++) {
            int o0 = blk * LIN_CBLOCK;
            int o1 = o0 + LIN_CBLOCK < OC ? o0 + LIN_CBLOCK : OC;
            if (dt == REMAT_DTYPE_BF16) {
                for (int n = 0; n < N; n++) {
                    const remat_bf16 *d = (const remat_bf16 *)dout + (size_t)n * OC;
                    #pragma omp simd
                    for (int o = o0; o < o1; o++) db[o] += remat_bf16_to_float(d[o]);
                }
            } else {
                for (int n = 0; n < N; n++) {
                    const float *d = (const float *)dout + (size_t)n * OC;
                    #pragma omp simd
                    for (int o = o0; o < o1; o++) db[o] += d[o];
                }
            }
        }
    }
}
