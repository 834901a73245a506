/*
 * gelu.c -- the elementwise ops of a block: GELU (tanh approximation,
 * Hendrycks & Gimpel 2016; torch approximate='tanh') and the residual add
 * with inverted dropout on the branch; and fp32 -> bf16 rounding of a
 * whole buffer.  Contract in kernels.h.
 *
 * Legend: n elements (N*4C for the GELU, N*C for the residual).
 * All gradients here are activation gradients and are assigned (=).
 * Elementwise, so any OpenMP split gives the same bits.
 * bf16 (dt): each chunk is widened to fp32 on the stack, run through the
 * same fp32 code, and rounded once on the way out.
 */
#include <math.h>
#include "kernels.h"
#include "vmath.h"

#define GELU_K 0.7978845608028654f   /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* Elements per OpenMP work item: whole vectors, a few pages each. */
#define GELU_CHUNK 4096

/* 0.5 (1 + tanh u) = 1 / (1 + e^{-2u}) = s, the logistic function at 2u, so
 *   gelu(x)  = x s = x / (1 + e),  e = exp(-2u),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   gelu'(x) = s + x s (1-s) 2 du/dx = s (1 + 2 sqrt(2/pi) x (e s) (1 + 3*0.044715 x^2))
 * with 1 - s = e s (no cancellation as s -> 1).  This is the tanh form
 * exactly; only the rounding differs from tanhf.  One vectorised exp
 * (vmath.h) per element instead of a libm tanhf call.  Large |x|: e -> 0
 * gives gelu = x, e saturating gives gelu -> -0; NaN stays NaN.
 * Every element runs the same operations (vector lanes, masked last
 * vector, or the scalar twin), so any split gives the same bits. */
static inline float gelu_fwd1(float x)
{
    float u = GELU_K * (x + GELU_A * x * x * x);
    float e = remat_expf(-2.0f * u);
    return x / (1.0f + e);
}

static inline float gelu_grad1(float x)
{
    float u = GELU_K * (x + GELU_A * x * x * x);
    float e = remat_expf(-2.0f * u);
    float s = 1.0f / (1.0f + e);
    return s * (1.0f + 2.0f * GELU_K * x * (e * s) * (1.0f + 3.0f * GELU_A * x * x));
}

#ifdef REMAT_HAVE_AVX2
static inline __m256 gelu_u8(__m256 x)
{
    __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_A), x), x), x);
    return _mm256_mul_ps(_mm256_set1_ps(GELU_K), _mm256_add_ps(x, x3));
}

static inline __m256 gelu_fwd8(__m256 x)
{
    __m256 e = remat_exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), gelu_u8(x)));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static inline __m256 gelu_grad8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = remat_exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), gelu_u8(x)));
    __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    /* 1 + 2K x (e s) (1 + 3A x x), left to right as in gelu_grad1 */
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(2.0f * GELU_K), x), _mm256_mul_ps(e, s));
    __m256 q = _mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(3.0f * GELU_A), x), x));
    return _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(t, q)));
}
#endif

#ifdef REMAT_HAVE_AVX512
/* gelu_u8, gelu_fwd8 and gelu_grad8 on 16 lanes, operation for operation */
static inline __m512 gelu_u16(__m512 x)
{
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_A), x), x), x);
    return _mm512_mul_ps(_mm512_set1_ps(GELU_K), _mm512_add_ps(x, x3));
}

static inline __m512 gelu_fwd16(__m512 x)
{
    __m512 e = remat_exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), gelu_u16(x)));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static inline __m512 gelu_grad16(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 e = remat_exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), gelu_u16(x)));
    __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
    __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(2.0f * GELU_K), x), _mm512_mul_ps(e, s));
    __m512 q = _mm512_add_ps(one, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(3.0f * GELU_A), x), x));
    return _mm512_mul_ps(s, _mm512_add_ps(one, _mm512_mul_ps(t, q)));
}
#endif

/* the fp32 spans [i, hi) of the two GELU passes; out may alias inp, dinp dout */
static void gelu_fwd_span(float *out, const float *inp, size_t i, size_t hi)
{
#ifdef REMAT_HAVE_AVX512
    for (; i + 16 <= hi; i += 16) _mm512_storeu_ps(out + i, gelu_fwd16(_mm512_loadu_ps(inp + i)));
#endif
#ifdef REMAT_HAVE_AVX2
    for (; i + 8 <= hi; i += 8)
        _mm256_storeu_ps(out + i, gelu_fwd8(_mm256_loadu_ps(inp + i)));
    if (i < hi) {
        __m256i m = remat_mask8((int)(hi - i));
        _mm256_maskstore_ps(out + i, m, gelu_fwd8(_mm256_maskload_ps(inp + i, m)));
    }
#else
    for (; i < hi; i++) out[i] = gelu_fwd1(inp[i]);
#endif
}

static void gelu_bwd_span(float *dinp, const float *inp, const float *dout, size_t i, size_t hi)
{
#ifdef REMAT_HAVE_AVX512
    for (; i + 16 <= hi; i += 16)
        _mm512_storeu_ps(dinp + i, _mm512_mul_ps(_mm512_loadu_ps(dout + i), gelu_grad16(_mm512_loadu_ps(inp + i))));
#endif
#ifdef REMAT_HAVE_AVX2
    for (; i + 8 <= hi; i += 8)
        _mm256_storeu_ps(dinp + i, _mm256_mul_ps(_mm256_loadu_ps(dout + i), gelu_grad8(_mm256_loadu_ps(inp + i))));
    if (i < hi) {
        __m256i m = remat_mask8((int)(hi - i));
        __m256 g = gelu_grad8(_mm256_maskload_ps(inp + i, m));
        _mm256_maskstore_ps(dinp + i, m, _mm256_mul_ps(_mm256_maskload_ps(dout + i, m), g));
    }
#else
    for (; i < hi; i++) dinp[i] = dout[i] * gelu_grad1(inp[i]);
#endif
}

/* out = gelu(inp).  out, inp (n); out may alias inp. */
void remat_gelu_forward(void *out, const void *inp, size_t n, int dt)
{
    size_t nchunk = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (REMAT_PAR(4 * n))
    for (size_t k = 0; k < nchunk; k++) {
        size_t i = k * GELU_CHUNK, hi = i + GELU_CHUNK < n ? i + GELU_CHUNK : n;
        if (dt == REMAT_DTYPE_BF16) {
            float x[GELU_CHUNK];
            remat_bf16_to_f32(x, (const remat_bf16 *)inp + i, hi - i);
            gelu_fwd_span(x, x, 0, hi - i);
            remat_bf16_from_f32((remat_bf16 *)out + i, x, hi - i);
        } else {
            gelu_fwd_span(out, inp, i, hi);
        }
    }
}

/* dinp = dout * gelu'(inp).  dinp, inp, dout (n); dinp may alias dout
 * (each vector reads dout before writing dinp). */
void remat_gelu_backward(void *dinp, const void *inp, const void *dout, size_t n, int dt)
{
    size_t nchunk = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (REMAT_PAR(4 * n))
    for (size_t k = 0; k < nchunk; k++) {
        size_t i = k * GELU_CHUNK, hi = i + GELU_CHUNK < n ? i + GELU_CHUNK : n;
        if (dt == REMAT_DTYPE_BF16) {
            float x[GELU_CHUNK], d[GELU_CHUNK];
            remat_bf16_to_f32(x, (const remat_bf16 *)inp + i, hi - i);
            remat_bf16_to_f32(d, (const remat_bf16 *)dout + i, hi - i);
            gelu_bwd_span(d, x, d, 0, hi - i);
            remat_bf16_from_f32((remat_bf16 *)dinp + i, d, hi - i);
        } else {
            gelu_bwd_span(dinp, inp, dout, i, hi);
        }
    }
}

/* out[i] = res[i] + branch[i] * m_i,  m_i = 0 or 1/(1-p) from (drop->key, i),
 * over [i0, i0+n) of fp32 arrays indexed from i0 */
static void residual_span(float *out, const float *res, const float *branch, const remat_dropout *drop, size_t i0,
                          size_t n)
{
    if (drop->p <= 0.0f) {   /* no dropout: mult is 1 and x * 1.0f == x, so the same bits */
        #pragma omp simd
        for (size_t i = 0; i < n; i++) out[i] = res[i] + branch[i];
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = res[i] + branch[i] * remat_dropout_mult(drop, (uint64_t)(i0 + i));
}

/* out = res + drop(branch).  out, res, branch (n); out may alias branch (or res). */
void remat_residual_forward(void *out, const void *res, const void *branch, const remat_dropout *drop, size_t n, int dt)
{
    size_t nchunk = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (REMAT_PAR((drop->p > 0.0f ? 16 : 1) * n))
    for (size_t k = 0; k < nchunk; k++) {
        size_t i = k * GELU_CHUNK, m = (i + GELU_CHUNK < n ? i + GELU_CHUNK : n) - i;
        if (dt == REMAT_DTYPE_BF16) {
            float r[GELU_CHUNK], b[GELU_CHUNK];
            remat_bf16_to_f32(r, (const remat_bf16 *)res + i, m);
            remat_bf16_to_f32(b, (const remat_bf16 *)branch + i, m);
            residual_span(b, r, b, drop, i, m);
            remat_bf16_from_f32((remat_bf16 *)out + i, b, m);
        } else {
            residual_span((float *)out + i, (const float *)res + i, (const float *)branch + i, drop, i, m);
        }
    }
}

/* dbranch[i] = dout[i] * m_i.  dbranch (n, dt), dout (n, fp32); dbranch may
 * alias dout under fp32. */
void remat_residual_backward_branch(void *dbranch, const float *dout, const remat_dropout *drop, size_t n, int dt)
{
    size_t nchunk = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (REMAT_PAR((drop->p > 0.0f ? 16 : 1) * n))
    for (size_t k = 0; k < nchunk; k++) {
        size_t i = k * GELU_CHUNK, m = (i + GELU_CHUNK < n ? i + GELU_CHUNK : n) - i;
        float t[GELU_CHUNK];
        float *o = dt == REMAT_DTYPE_BF16 ? t : (float *)dbranch + i;
        if (drop->p <= 0.0f) {
            #pragma omp simd
            for (size_t j = 0; j < m; j++) o[j] = dout[i + j];
        } else {
            for (size_t j = 0; j < m; j++) o[j] = dout[i + j] * remat_dropout_mult(drop, (uint64_t)(i + j));
        }
        if (dt == REMAT_DTYPE_BF16) remat_bf16_from_f32((remat_bf16 *)dbranch + i, t, m);
    }
}

void remat_bf16_round_buf(remat_bf16 *dst, const float *src, size_t n)
{
    size_t nchunk = (n + GELU_CHUNK - 1) / GELU_CHUNK;
    #pragma omp parallel for schedule(static) if (REMAT_PAR(n))
    for (size_t k = 0; k < nchunk; k++) {
        size_t i = k * GELU_CHUNK, m = (i + GELU_CHUNK < n ? i + GELU_CHUNK : n) - i;
        remat_bf16_from_f32(dst + i, src + i, m);
    }
}
