/*
 * linear.c -- fully connected layer out = inp @ w^T + b on OpenBLAS
 * (cblas_sgemm), forward and backward.  Contract in kernels.h.
 *
 * Legend: N rows (= B*T), IC input channels, OC output channels.
 * w is stored (OC,IC) as torch.nn.Linear.weight.
 * Parameter gradients (dw, db) accumulate (+=); dinp is assigned (=).
 *
 * Determinism: sgemm computes each output element from one fixed-order
 * inner product for given shapes and thread count; the bias sum below runs
 * over rows in order, so it is also independent of the OpenMP thread count.
 */
#include <cblas.h>
#include <string.h>
#include "kernels.h"
#include "vmath.h"

/* out (N,OC) = inp (N,IC) @ w^T (IC,OC) + b (OC)
 * With a bias the rows of out are first filled with b and sgemm adds onto
 * them (beta = 1); without one sgemm overwrites out (beta = 0). */
void linear_forward(float *out, const float *inp, const float *w, const float *b,
                    int N, int IC, int OC)
{
    if (N <= 0 || OC <= 0) return;
    float beta = 0.0f;
    if (b) {
        #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)N * OC))
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, b, (size_t)OC * sizeof(float));
        beta = 1.0f;
    }
    if (IC <= 0) {
        if (!b) memset(out, 0, (size_t)N * OC * sizeof(float));
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC,
                1.0f, inp, IC, w, IC, beta, out, OC);
}

/* dinp (N,IC)  = dout (N,OC) @ w (OC,IC)             (assigned; skipped if NULL)
 * dw   (OC,IC) += dout^T (OC,N) @ inp (N,IC)
 * db   (OC)    += sum_n dout[n,:]                    (skipped if NULL) */
#define LIN_CBLOCK 64
void linear_backward(float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int N, int IC, int OC)
{
    if (N <= 0 || OC <= 0) {
        /* an empty sum: dinp is a zero matrix, dw/db are unchanged */
        if (dinp && N > 0 && IC > 0) memset(dinp, 0, (size_t)N * IC * sizeof(float));
        return;
    }
    if (IC > 0) {
        if (dinp)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC,
                        1.0f, dout, OC, w, IC, 0.0f, dinp, IC);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N,
                    1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
    }
    if (db) {
        /* column sums: blocks of columns in parallel, rows in order */
        int nblk = (OC + LIN_CBLOCK - 1) / LIN_CBLOCK;
        #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)N * OC))
        for (int blk = 0; blk < nblk; blk++) {
            int o0 = blk * LIN_CBLOCK;
            int o1 = o0 + LIN_CBLOCK < OC ? o0 + LIN_CBLOCK : OC;
            for (int n = 0; n < N; n++) {
                const float *d = dout + (size_t)n * OC;
                #pragma omp simd
                for (int o = o0; o < o1; o++) db[o] += d[o];
            }
        }
    }
}
