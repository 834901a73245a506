/*
 * vmath.h -- a fast vectorised exp for the elementwise kernels (GELU,
 * cross-entropy), shared by the kernels that need one.  Internal header.
 *
 * remat_exp8 (AVX2 + FMA, 8 lanes), remat_exp16 (AVX-512, 16 lanes) and
 * remat_expf (their scalar twin) run the SAME sequence of correctly rounded
 * operations (max, min, mul, round to nearest even, fused multiply-adds,
 * integer exponent build, mul), so an element gets the same bits whichever
 * of them computes it.  Cephes'
 * expf scheme (Moshier):
 *   n = rint(x log2 e),  r = x - n ln2 (ln2 split in two, FMA),
 *   exp(r) = 1 + r + r^2 P(r)   (degree-5 P),   exp(x) = 2^n exp(r).
 * Measured against exp() in double on every 16th float of [-87.3, 88]:
 * max relative error 8.4e-8 (under 1 ulp), and remat_exp8 == remat_expf
 * bit for bit on 1.6e8 inputs (random bit patterns included).
 * Range: x < -87.336 (below the smallest normal result) gives 0, x > 88
 * saturates at exp(88) = 1.65e38 (callers only need "huge" there), NaN
 * gives NaN.
 */
#ifndef REMAT_VMATH_H
#define REMAT_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bf16.h"   /* REMAT_HAVE_AVX512 */

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define REMAT_HAVE_AVX2 1
#endif

/* Parallel regions only for work worth a barrier.  A kernel of the 124M
 * step like remat_layernorm_stats (N*C = 196608 elements) runs in ~60 us on one
 * core; forking a second thread saves ~30 us on an idle machine, but on a
 * shared one every barrier waits for the other thread to be scheduled
 * (perf on the 124M step, 2 threads, load ~6 on 2 cores: 10% of the step's
 * samples were the main thread waiting in the barriers of the small
 * LayerNorm / residual / bias kernels).  So a kernel forks only when its
 * work, counted in "element operations" (elements times a per-kernel cost
 * weight: 1 for a streaming pass, 4 for an exp per element), reaches
 * REMAT_OMP_MIN_WORK.  All these kernels give the same bits for any thread
 * count, so the switch never changes a result. */
#define REMAT_OMP_MIN_WORK ((size_t)1 << 18)
#define REMAT_PAR(work) ((size_t)(work) >= REMAT_OMP_MIN_WORK)

#define REMAT_EXP_LO (-87.3365478515625f)   /* ~ ln(2^-126) */
#define REMAT_EXP_HI 88.0f                  /* n <= 127: 2^n stays finite */
#define REMAT_EXP_LOG2E 1.44269504088896341f
#define REMAT_EXP_C1 0.693359375f           /* ln 2 = C1 - C2, C1 exact in 9 bits */
#define REMAT_EXP_C2 (-2.12194440e-4f)
#define REMAT_EXP_P0 1.9875691500e-4f
#define REMAT_EXP_P1 1.3981999507e-3f
#define REMAT_EXP_P2 8.3334519073e-3f
#define REMAT_EXP_P3 4.1665795894e-2f
#define REMAT_EXP_P4 1.6666665459e-1f
#define REMAT_EXP_P5 5.0000001201e-1f

/* the scalar twin of remat_exp8: operation for operation the same */
static inline float remat_expf(float x)
{
    float xc = REMAT_EXP_LO > x ? REMAT_EXP_LO : x;          /* maxps(lo, x): NaN -> x */
    xc = REMAT_EXP_HI < xc ? REMAT_EXP_HI : xc;              /* minps(hi, xc) */
    float n = rintf(xc * REMAT_EXP_LOG2E);
    float r = fmaf(-n, REMAT_EXP_C1, xc);
    r = fmaf(-n, REMAT_EXP_C2, r);
    float r2 = r * r;
    float p = REMAT_EXP_P0;
    p = fmaf(p, r, REMAT_EXP_P1);
    p = fmaf(p, r, REMAT_EXP_P2);
    p = fmaf(p, r, REMAT_EXP_P3);
    p = fmaf(p, r, REMAT_EXP_P4);
    p = fmaf(p, r, REMAT_EXP_P5);
    p = fmaf(p, r2, r);
    p = p + 1.0f;
    /* cvtps2dq's integer: n itself in [-126, 127], INT32_MIN for NaN (a C
     * cast of NaN is undefined); the exponent field built in unsigned
     * arithmetic, wrapping as the vector add and shift do */
    int32_t ni = n == n ? (int32_t)n : INT32_MIN;
    uint32_t e = ((uint32_t)ni + 127u) << 23;
    float s;
    memcpy(&s, &e, sizeof s);
    float y = p * s;
    return x < REMAT_EXP_LO ? 0.0f : y;
}

#ifdef REMAT_HAVE_AVX2
static inline __m256 remat_exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(REMAT_EXP_LO);
    __m256 xc = _mm256_max_ps(lo, x);
    xc = _mm256_min_ps(_mm256_set1_ps(REMAT_EXP_HI), xc);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(REMAT_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(REMAT_EXP_C1), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(REMAT_EXP_C2), r);
    __m256 r2 = _mm256_mul_ps(r, r);
    __m256 p = _mm256_set1_ps(REMAT_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(REMAT_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(REMAT_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(REMAT_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(REMAT_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(REMAT_EXP_P5));
    p = _mm256_fmadd_ps(p, r2, r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), y);
}

#ifdef REMAT_HAVE_AVX512
/* remat_exp8 on 16 lanes, operation for operation */
static inline __m512 remat_exp16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(REMAT_EXP_LO);
    __m512 xc = _mm512_max_ps(lo, x);
    xc = _mm512_min_ps(_mm512_set1_ps(REMAT_EXP_HI), xc);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(REMAT_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(REMAT_EXP_C1), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(REMAT_EXP_C2), r);
    __m512 r2 = _mm512_mul_ps(r, r);
    __m512 p = _mm512_set1_ps(REMAT_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(REMAT_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(REMAT_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(REMAT_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(REMAT_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(REMAT_EXP_P5));
    p = _mm512_fmadd_ps(p, r2, r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y);   /* 0 where x < lo */
}
#endif

/* lanes 0..k-1 set (k in 0..8): the mask of a partial last vector */
static inline __m256i remat_mask8(int k)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

/* ---- row helpers of the attention kernels ----------------------------------
 * Fixed operation order for a given n (8-lane partial results combined in
 * lane order, then the tail), so the same row gives the same bits wherever
 * it is computed. */

/* max of x[0..n-1]; -INFINITY when n <= 0 (the max of the same elements:
 * any grouping of them gives the same value) */
static inline float remat_row_max(const float *x, int n)
{
    float m = -INFINITY;
    int j = 0;
#if defined(REMAT_HAVE_AVX512)
    if (n >= 16) {
        __m512 v = _mm512_loadu_ps(x);
        for (j = 16; j + 16 <= n; j += 16) v = _mm512_max_ps(v, _mm512_loadu_ps(x + j));
        m = _mm512_reduce_max_ps(v);
    }
#elif defined(REMAT_HAVE_AVX2)
    if (n >= 8) {
        __m256 v = _mm256_loadu_ps(x);
        for (j = 8; j + 8 <= n; j += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(x + j));
        float l[8];
        _mm256_storeu_ps(l, v);
        for (int k = 0; k < 8; k++) m = l[k] > m ? l[k] : m;
    }
#endif
    for (; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

/* x[j] *= f for j < n (elementwise: any vector width gives the same bits) */
static inline void remat_row_scale(float *x, int n, float f)
{
    #pragma omp simd
    for (int j = 0; j < n; j++) x[j] *= f;
}

/* y[j] = exp(x[j] - sub) for j < n (y may alias x); returns their sum,
 * in 8 lanes (element j to lane j mod 8, each lane in order) added in lane
 * order, then the tail.  AVX-512 makes 16 exponentials at a time and adds
 * them to the 8 lanes as two halves, the same sums in the same order. */
static inline float remat_row_expsum(float *y, const float *x, int n, float sub)
{
    float s = 0.0f;
    int j = 0;
#ifdef REMAT_HAVE_AVX2
    if (n >= 8) {
        const __m256 vs = _mm256_set1_ps(sub);
        __m256 acc = _mm256_setzero_ps();
#ifdef REMAT_HAVE_AVX512
        for (; j + 16 <= n; j += 16) {
            __m512 e = remat_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), _mm512_set1_ps(sub)));
            _mm512_storeu_ps(y + j, e);
            acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
            acc = _mm256_add_ps(acc, _mm512_extractf32x8_ps(e, 1));
        }
#endif
        for (; j + 8 <= n; j += 8) {
            __m256 e = remat_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), vs));
            _mm256_storeu_ps(y + j, e);
            acc = _mm256_add_ps(acc, e);
        }
        float l[8];
        _mm256_storeu_ps(l, acc);
        for (int k = 0; k < 8; k++) s += l[k];
    }
#endif
    for (; j < n; j++) {
        y[j] = remat_expf(x[j] - sub);
        s += y[j];
    }
    return s;
}

#endif
