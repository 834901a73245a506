/*
 * adamw.c -- the optimizer step, AdamW with decoupled weight decay
 * (Loshchilov & Hutter 2019) with torch.optim.AdamW's semantics, and the
 * squared gradient norm used for global-norm clipping.  Contract in kernels.h.
 *
 * Legend: n parameters in one flat buffer.
 * Both are elementwise or fixed-order reductions, so their bits do not
 * depend on the OpenMP thread count.
 */
#include <math.h>
#include "kernels.h"

/* With gs = g * grad_scale:
 *   p *= 1 - lr*wd                                  (only when decay != 0)
 *   m  = b1 m + (1-b1) gs;   v = b2 v + (1-b2) gs^2
 *   p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
 * p, g, m, v (n); t >= 1 is the 1-based step count.
 * The bias corrections are formed in double (torch forms them as Python
 * floats) and the per-element arithmetic runs in float. */
void adamw_update(float *p, const float *g, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int decay,
                  float grad_scale, int t)
{
    double bc1 = 1.0 - pow((double)b1, (double)t);
    double bc2 = 1.0 - pow((double)b2, (double)t);
    float step_size = (float)((double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float keep = decay ? (float)(1.0 - (double)lr * (double)wd) : 1.0f;

    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        float pi = p[i];
        if (decay) pi *= keep;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
    }
}

/* sum_i g[i]^2 in double.  The order is fixed by the data, not the threads:
 * chunks of SUMSQ_CHUNK elements are each summed sequentially (in parallel
 * across chunks) and the chunk partials are added in chunk order.  The
 * partials of SUMSQ_GROUP chunks at a time live on the stack, so the kernel
 * allocates nothing. */
#define SUMSQ_CHUNK 4096
#define SUMSQ_GROUP 256
double sumsq(const float *g, size_t n)
{
    double total = 0.0;
    size_t nchunks = (n + SUMSQ_CHUNK - 1) / SUMSQ_CHUNK;
    for (size_t c0 = 0; c0 < nchunks; c0 += SUMSQ_GROUP) {
        double part[SUMSQ_GROUP];
        int ng = nchunks - c0 < SUMSQ_GROUP ? (int)(nchunks - c0) : SUMSQ_GROUP;
        #pragma omp parallel for schedule(static)
        for (int k = 0; k < ng; k++) {
            size_t lo = (c0 + (size_t)k) * SUMSQ_CHUNK;
            size_t hi = lo + SUMSQ_CHUNK < n ? lo + SUMSQ_CHUNK : n;
            double s = 0.0;
            for (size_t i = lo; i < hi; i++) s += (double)g[i] * g[i];
            part[k] = s;
        }
        for (int k = 0; k < ng; k++) total += part[k];
    }
    return total;
}
