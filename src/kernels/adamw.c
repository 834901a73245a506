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
#include "bf16.h"
#include "vmath.h"

/* With gs = g * grad_scale:
 *   p *= 1 - lr*wd                                  (only when decay != 0)
 *   m  = b1 m + (1-b1) gs;   v = b2 v + (1-b2) gs^2
 *   p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
 * p, g, m, v (n); t >= 1 is the 1-based step count.  p16, when not NULL,
 * gets the new p rounded to bf16 in the same pass (the bf16 weight copy of
 * --dtype bf16: written here rather than in a second pass over p).
 * The bias corrections are formed in double (torch forms them as Python
 * floats) and the per-element arithmetic runs in float.
 *
 * One pass over p, g, m, v (memory bound: 28 bytes per parameter), 8 lanes
 * at a time with the same float operations in the same order as the scalar
 * loop (no FMA contraction; sqrt and division are correctly rounded), so
 * the vector, the masked last vector and the scalar fallback give the same
 * bits.  Without decay keep = 1 and p * 1.0f == p, so the multiply is done
 * unconditionally. */
#define ADAMW_CHUNK 8192
void remat_adamw_update(float *p, const float *g, float *m, float *v, remat_bf16 *p16, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int decay,
                  float grad_scale, uint64_t t)
{
    double bc1 = 1.0 - pow((double)b1, (double)t);
    double bc2 = 1.0 - pow((double)b2, (double)t);
    float step_size = (float)((double)lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    float keep = decay ? (float)(1.0 - (double)lr * (double)wd) : 1.0f;
    float c1 = 1.0f - b1, c2 = 1.0f - b2;

    size_t nchunk = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
    #pragma omp parallel for schedule(static) if (REMAT_PAR(2 * n))
    for (size_t k = 0; k < nchunk; k++) {
        size_t i = k * ADAMW_CHUNK, hi = i + ADAMW_CHUNK < n ? i + ADAMW_CHUNK : n;
#ifdef REMAT_HAVE_AVX2
        const __m256 vgs = _mm256_set1_ps(grad_scale), vkeep = _mm256_set1_ps(keep);
        const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2);
        const __m256 vc1 = _mm256_set1_ps(c1), vc2 = _mm256_set1_ps(c2);
        const __m256 vstep = _mm256_set1_ps(step_size), vbc2 = _mm256_set1_ps(bc2_sqrt);
        const __m256 veps = _mm256_set1_ps(eps);
        for (; i < hi; i += 8) {
            int full = i + 8 <= hi;
            __m256i msk = remat_mask8(full ? 8 : (int)(hi - i));
            __m256 gi, pi, mi, vi;
            if (full) {
                gi = _mm256_loadu_ps(g + i); pi = _mm256_loadu_ps(p + i);
                mi = _mm256_loadu_ps(m + i); vi = _mm256_loadu_ps(v + i);
            } else {
                gi = _mm256_maskload_ps(g + i, msk); pi = _mm256_maskload_ps(p + i, msk);
                mi = _mm256_maskload_ps(m + i, msk); vi = _mm256_maskload_ps(v + i, msk);
            }
            gi = _mm256_mul_ps(gi, vgs);
            pi = _mm256_mul_ps(pi, vkeep);
            mi = _mm256_add_ps(_mm256_mul_ps(vb1, mi), _mm256_mul_ps(vc1, gi));
            vi = _mm256_add_ps(_mm256_mul_ps(vb2, vi), _mm256_mul_ps(_mm256_mul_ps(vc2, gi), gi));
            __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), vbc2), veps);
            pi = _mm256_sub_ps(pi, _mm256_mul_ps(vstep, _mm256_div_ps(mi, den)));
            if (full) {
                _mm256_storeu_ps(m + i, mi); _mm256_storeu_ps(v + i, vi); _mm256_storeu_ps(p + i, pi);
                if (p16) _mm_storeu_si128((__m128i *)(p16 + i), remat_bf16_round8(pi));
            } else {
                _mm256_maskstore_ps(m + i, msk, mi); _mm256_maskstore_ps(v + i, msk, vi);
                _mm256_maskstore_ps(p + i, msk, pi);
                if (p16)
                    for (size_t j = i; j < hi; j++) p16[j] = remat_bf16_round(p[j]);
            }
        }
#else
        for (; i < hi; i++) {
            float gi = g[i] * grad_scale;
            float pi = p[i] * keep;
            float mi = b1 * m[i] + c1 * gi;
            float vi = b2 * v[i] + c2 * gi * gi;
            m[i] = mi;
            v[i] = vi;
            p[i] = pi - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
            if (p16) p16[i] = remat_bf16_round(p[i]);
        }
#endif
    }
}

/* sum_i g[i]^2 in double.  The order is fixed by the data, not the threads:
 *   - a block of SUMSQ_BLOCK elements is summed in 16 double lanes (element
 *     i to lane i mod 16: four 4-wide accumulators; a float squared is
 *     exact in double), the lanes then added in lane order;
 *   - a chunk of SUMSQ_CHUNK blocks is summed block by block, in order, by
 *     one thread (chunks run in parallel);
 *   - the chunk partials are added in chunk order.
 * A group of SUMSQ_GROUP chunk partials (2^28 elements) lives on the stack
 * of the calling thread, so the kernel allocates nothing, and a 124M
 * gradient is one parallel region (one barrier), not one per megabyte. */
#define SUMSQ_BLOCK SUMSQ_BLOCK_ELEMS
#define SUMSQ_CHUNK 64
#define SUMSQ_GROUP 1024
static double sumsq_block(const float *g, size_t len)
{
    double l[16] = { 0 };
#ifdef REMAT_HAVE_AVX2
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m256d x0 = _mm256_cvtps_pd(_mm_loadu_ps(g + i)), x1 = _mm256_cvtps_pd(_mm_loadu_ps(g + i + 4));
        __m256d x2 = _mm256_cvtps_pd(_mm_loadu_ps(g + i + 8)), x3 = _mm256_cvtps_pd(_mm_loadu_ps(g + i + 12));
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(x0, x0));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(x1, x1));
        a2 = _mm256_add_pd(a2, _mm256_mul_pd(x2, x2));
        a3 = _mm256_add_pd(a3, _mm256_mul_pd(x3, x3));
    }
    _mm256_storeu_pd(l, a0); _mm256_storeu_pd(l + 4, a1);
    _mm256_storeu_pd(l + 8, a2); _mm256_storeu_pd(l + 12, a3);
    for (; i < len; i++) l[i & 15] += (double)g[i] * g[i];
#else
    for (size_t i = 0; i < len; i++) l[i & 15] += (double)g[i] * g[i];
#endif
    double s = 0.0;
    for (int k = 0; k < 16; k++) s += l[k];
    return s;
}

double remat_sumsq(const float *g, size_t n)
{
    const size_t chunk = (size_t)SUMSQ_BLOCK * SUMSQ_CHUNK;
    double total = 0.0;
    size_t nchunks = (n + chunk - 1) / chunk;
    for (size_t c0 = 0; c0 < nchunks; c0 += SUMSQ_GROUP) {
        double part[SUMSQ_GROUP];
        int ng = nchunks - c0 < SUMSQ_GROUP ? (int)(nchunks - c0) : SUMSQ_GROUP;
        #pragma omp parallel for schedule(static) if (ng > 1)
        for (int k = 0; k < ng; k++) {
            size_t lo = (c0 + (size_t)k) * chunk;
            size_t hi = lo + chunk < n ? lo + chunk : n;
            double s = 0.0;
            for (size_t b = lo; b < hi; b += SUMSQ_BLOCK)
                s += sumsq_block(g + b, hi - b < SUMSQ_BLOCK ? hi - b : SUMSQ_BLOCK);
            part[k] = s;
        }
        for (int k = 0; k < ng; k++) total += part[k];
    }
    return total;
}

void remat_sumsq_blocks(const float *g, size_t n, double *parts)
{
    size_t nb = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    #pragma omp parallel for schedule(static) if (nb > SUMSQ_CHUNK)
    for (size_t k = 0; k < nb; k++) {
        size_t lo = k * SUMSQ_BLOCK;
        parts[k] = sumsq_block(g + lo, n - lo < SUMSQ_BLOCK ? n - lo : SUMSQ_BLOCK);
    }
}

/* sumsq's bracketing: a chunk's blocks from 0.0 in order, then the chunk
 * sums from 0.0 in order */
double remat_sumsq_from_blocks(const double *parts, size_t nblocks)
{
    double total = 0.0;
    for (size_t c0 = 0; c0 < nblocks; c0 += SUMSQ_CHUNK) {
        double s = 0.0;
        size_t hi = c0 + SUMSQ_CHUNK < nblocks ? c0 + SUMSQ_CHUNK : nblocks;
        for (size_t k = c0; k < hi; k++) s += parts[k];
        total += s;
    }
    return total;
}
