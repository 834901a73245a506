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
 * One pass over p, g, m, v (memory bound: 28 bytes per parameter, 30 with
 * the bf16 copy), 16 (AVX-512) or 8 (AVX2) lanes at a time with the same
 * float operations in the same order as the scalar loop (no FMA
 * contraction; sqrt and division are correctly rounded), so every vector
 * width, the masked last vector and the scalar fallback give the same
 * bits.  Without decay keep = 1 and p * 1.0f == p, so the multiply is done
 * unconditionally.  The bf16 copy is written with streaming stores where
 * aligned (both vector widths): nothing reads it until the next step's products, and a plain
 * store would first read each of its lines (2 more bytes per parameter).
 * All spans run in one parallel region, chunks split statically within
 * each span and no barrier between spans: a model's ~150 tensors used to
 * pay a fork and a join each. */
#define ADAMW_CHUNK 8192
typedef struct adamw_k {
    float gs, keep, b1, b2, c1, c2, step, bc2, eps;
} adamw_k;

static void adamw_chunk(float *p, const float *g, float *m, float *v, remat_bf16 *p16, size_t n, const adamw_k *k)
{
    size_t i = 0;
#ifdef REMAT_HAVE_AVX512
    const __m512 vgs = _mm512_set1_ps(k->gs), vkeep = _mm512_set1_ps(k->keep);
    const __m512 vb1 = _mm512_set1_ps(k->b1), vb2 = _mm512_set1_ps(k->b2);
    const __m512 vc1 = _mm512_set1_ps(k->c1), vc2 = _mm512_set1_ps(k->c2);
    const __m512 vstep = _mm512_set1_ps(k->step), vbc2 = _mm512_set1_ps(k->bc2), veps = _mm512_set1_ps(k->eps);
    for (; i < n; i += 16) {
        int full = n - i >= 16;
        __mmask16 msk = full ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 gi, pi, mi, vi;
        if (full) {   /* plain loads and stores but for the last vector */
            gi = _mm512_loadu_ps(g + i); pi = _mm512_loadu_ps(p + i);
            mi = _mm512_loadu_ps(m + i); vi = _mm512_loadu_ps(v + i);
        } else {
            gi = _mm512_maskz_loadu_ps(msk, g + i); pi = _mm512_maskz_loadu_ps(msk, p + i);
            mi = _mm512_maskz_loadu_ps(msk, m + i); vi = _mm512_maskz_loadu_ps(msk, v + i);
        }
        gi = _mm512_mul_ps(gi, vgs);
        pi = _mm512_mul_ps(pi, vkeep);
        mi = _mm512_add_ps(_mm512_mul_ps(vb1, mi), _mm512_mul_ps(vc1, gi));
        vi = _mm512_add_ps(_mm512_mul_ps(vb2, vi), _mm512_mul_ps(_mm512_mul_ps(vc2, gi), gi));
        __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), vbc2), veps);
        pi = _mm512_sub_ps(pi, _mm512_mul_ps(vstep, _mm512_div_ps(mi, den)));
        if (full) {
            _mm512_storeu_ps(m + i, mi); _mm512_storeu_ps(v + i, vi); _mm512_storeu_ps(p + i, pi);
        } else {
            _mm512_mask_storeu_ps(m + i, msk, mi); _mm512_mask_storeu_ps(v + i, msk, vi);
            _mm512_mask_storeu_ps(p + i, msk, pi);
        }
        if (!p16) continue;
        __m256i h = remat_bf16_round16(pi);
        if (!full) _mm256_mask_storeu_epi16(p16 + i, msk, h);
        else if ((uintptr_t)(p16 + i) & 31) _mm256_storeu_si256((__m256i *)(p16 + i), h);
        else _mm256_stream_si256((__m256i *)(p16 + i), h);
    }
#elif defined(REMAT_HAVE_AVX2)
    const __m256 vgs = _mm256_set1_ps(k->gs), vkeep = _mm256_set1_ps(k->keep);
    const __m256 vb1 = _mm256_set1_ps(k->b1), vb2 = _mm256_set1_ps(k->b2);
    const __m256 vc1 = _mm256_set1_ps(k->c1), vc2 = _mm256_set1_ps(k->c2);
    const __m256 vstep = _mm256_set1_ps(k->step), vbc2 = _mm256_set1_ps(k->bc2);
    const __m256 veps = _mm256_set1_ps(k->eps);
    for (; i < n; i += 8) {
        int full = i + 8 <= n;
        __m256i msk = remat_mask8(full ? 8 : (int)(n - i));
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
            if (!p16) continue;
            __m128i h = remat_bf16_round8(pi);
            if ((uintptr_t)(p16 + i) & 15) _mm_storeu_si128((__m128i *)(p16 + i), h);
            else _mm_stream_si128((__m128i *)(p16 + i), h);
        } else {
            _mm256_maskstore_ps(m + i, msk, mi); _mm256_maskstore_ps(v + i, msk, vi);
            _mm256_maskstore_ps(p + i, msk, pi);
            if (p16)
                for (size_t j = i; j < n; j++) p16[j] = remat_bf16_round(p[j]);
        }
    }
#else
    for (; i < n; i++) {
        float gi = g[i] * k->gs;
        float pi = p[i] * k->keep;
        float mi = k->b1 * m[i] + k->c1 * gi;
        float vi = k->b2 * v[i] + k->c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - k->step * (mi / (sqrtf(vi) / k->bc2 + k->eps));
        if (p16) p16[i] = remat_bf16_round(p[i]);
    }
#endif
}

void remat_adamw_update_spans(float *p, const float *g, float *m, float *v, remat_bf16 *p16, size_t mv0,
                              const remat_adamw_span *spans, int nspans, float lr, float b1, float b2, float eps,
                              float wd, float grad_scale, uint64_t t)
{
    double bc1 = 1.0 - pow((double)b1, (double)t);
    double bc2 = 1.0 - pow((double)b2, (double)t);
    adamw_k k0 = { grad_scale, 1.0f, b1, b2, 1.0f - b1, 1.0f - b2, (float)((double)lr / bc1), (float)sqrt(bc2), eps };
    float keep = (float)(1.0 - (double)lr * (double)wd);
    size_t total = 0;
    for (int s = 0; s < nspans; s++) total += spans[s].n;
    #pragma omp parallel if (REMAT_PAR(2 * total))
    {
        for (int s = 0; s < nspans; s++) {
            const remat_adamw_span *sp = &spans[s];
            adamw_k k = k0;
            if (sp->decay) k.keep = keep;
            size_t nchunk = (sp->n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
            #pragma omp for schedule(static) nowait
            for (size_t c = 0; c < nchunk; c++) {
                size_t i = sp->at + c * ADAMW_CHUNK, len = sp->n - c * ADAMW_CHUNK < ADAMW_CHUNK ? sp->n - c * ADAMW_CHUNK
                                                                                             : ADAMW_CHUNK;
                adamw_chunk(p + i, g + i, m + (i - mv0), v + (i - mv0), p16 ? p16 + i : NULL, len, &k);
            }
        }
#ifdef REMAT_HAVE_AVX2
        _mm_sfence();   /* the streaming stores of the bf16 copy, before the region ends */
#endif
    }
}

void remat_adamw_update(float *p, const float *g, float *m, float *v, remat_bf16 *p16, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int decay,
                  float grad_scale, uint64_t t)
{
    remat_adamw_span s = { 0, n, decay };
    remat_adamw_update_spans(p, g, m, v, p16, 0, &s, 1, lr, b1, b2, eps, wd, grad_scale, t);
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

/* The norm's partials gathered as the backward finishes each gradient.
 * Block k of g (n elements) is computed exactly as sumsq_blocks computes
 * it, so the norm of the finished parts is remat_sumsq(g)'s bits. */
void remat_sumsq_blocks_within(const float *g, size_t n, size_t lo, size_t hi, double *parts, uint8_t *done)
{
    const size_t B = SUMSQ_BLOCK;
    size_t k0 = (lo + B - 1) / B, k1 = hi >= n ? (n + B - 1) / B : hi / B;
    if (k1 <= k0) return;
    #pragma omp parallel for schedule(static) if (k1 - k0 > SUMSQ_CHUNK)
    for (size_t k = k0; k < k1; k++) {
        size_t a = k * B;
        parts[k] = sumsq_block(g + a, n - a < B ? n - a : B);
        done[k] = 1;
    }
}

void remat_sumsq_blocks_forget(size_t n, size_t lo, size_t hi, uint8_t *done)
{
    const size_t B = SUMSQ_BLOCK;
    if (hi > n) hi = n;
    for (size_t k = lo / B; k * B < hi; k++) done[k] = 0;
}

double remat_sumsq_blocks_finish(const float *g, size_t n, double *parts, const uint8_t *done)
{
    const size_t B = SUMSQ_BLOCK;
    size_t nb = (n + B - 1) / B;
    #pragma omp parallel for schedule(dynamic, SUMSQ_CHUNK) if (nb > SUMSQ_CHUNK)
    for (size_t k = 0; k < nb; k++)
        if (!done[k]) {
            size_t a = k * B;
            parts[k] = sumsq_block(g + a, n - a < B ? n - a : B);
        }
    return remat_sumsq_from_blocks(parts, nb);
}
