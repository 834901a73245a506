/*
 * swiglu.c -- the gated unit of a Llama MLP (Shazeer 2020, "GLU Variants
 * Improve Transformer"; Hugging Face's LlamaMLP computes
 * down(silu(gate(x)) * up(x))): the elementwise middle of it, between the
 * fused gate|up projection and the down projection.  Contract in kernels.h.
 *
 * Legend: N rows (= B*T), F the MLP width (ffn_dim, intermediate_size).
 * Each row of the input is [gate (F) | up (F)], the output of one linear
 * layer of width 2F.  The gradient din (N,2F) is assigned (=).
 *
 *   silu(g) = g sigmoid(g) = g / (1 + e),   e = exp(-g),  s = 1/(1+e)
 *   silu'(g) = s + g s (1-s) = s (1 + g (e s))      (1 - s = e s: no cancellation)
 *
 * One vectorised exp (vmath.h) per element; the vector lanes and the
 * scalar twin run the same operations, so any split gives the same bits.
 * Large |g|: e -> 0 gives silu = g, silu' = 1; e saturating (exp(88))
 * gives silu -> -0, silu' -> 0.  NaN stays NaN.
 * bf16: each chunk of a row is widened to fp32 on the stack, run through the
 * same fp32 code and rounded once on the way out.
 */
#include <math.h>
#include "kernels.h"
#include "vmath.h"

/* columns of a row per bf16 chunk (three stack buffers of it) */
#define SWIGLU_CHUNK 1024

static inline float silu1(float g)
{
    return g / (1.0f + remat_expf(-g));
}

/* dg = d * u * silu'(g),  du = d * silu(g) */
static inline void swiglu_grad1(float *dg, float *du, float g, float u, float d)
{
    float e = remat_expf(-g);
    float s = 1.0f / (1.0f + e);
    float si = g / (1.0f + e);
    float ds = s * (1.0f + g * (e * s));
    *dg = d * u * ds;
    *du = d * si;
}

#ifdef REMAT_HAVE_AVX2
static inline __m256 silu8(__m256 g)
{
    __m256 e = remat_exp8(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));   /* exp(-g) */
    return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* the vector twin of swiglu_grad1, operation for operation */
static inline void swiglu_grad8(__m256 *dg, __m256 *du, __m256 g, __m256 u, __m256 d)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = remat_exp8(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
    __m256 ope = _mm256_add_ps(one, e);
    __m256 s = _mm256_div_ps(one, ope);
    __m256 si = _mm256_div_ps(g, ope);
    __m256 ds = _mm256_mul_ps(s, _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_mul_ps(e, s))));
    *dg = _mm256_mul_ps(_mm256_mul_ps(d, u), ds);
    *du = _mm256_mul_ps(d, si);
}
#endif

#ifdef REMAT_HAVE_AVX512
/* silu8 and swiglu_grad8 on 16 lanes, operation for operation */
static inline __m512 silu16(__m512 g)
{
    __m512 e = remat_exp16(_mm512_xor_ps(g, _mm512_set1_ps(-0.0f)));
    return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static inline void swiglu_grad16(__m512 *dg, __m512 *du, __m512 g, __m512 u, __m512 d)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 e = remat_exp16(_mm512_xor_ps(g, _mm512_set1_ps(-0.0f)));
    __m512 ope = _mm512_add_ps(one, e);
    __m512 s = _mm512_div_ps(one, ope);
    __m512 si = _mm512_div_ps(g, ope);
    __m512 ds = _mm512_mul_ps(s, _mm512_add_ps(one, _mm512_mul_ps(g, _mm512_mul_ps(e, s))));
    *dg = _mm512_mul_ps(_mm512_mul_ps(d, u), ds);
    *du = _mm512_mul_ps(d, si);
}
#endif

/* out[c] = silu(g[c]) * u[c] for c < n (fp32 spans) */
static void fwd_span(float *out, const float *g, const float *u, int n)
{
    int c = 0;
#ifdef REMAT_HAVE_AVX512
    for (; c + 16 <= n; c += 16)
        _mm512_storeu_ps(out + c, _mm512_mul_ps(silu16(_mm512_loadu_ps(g + c)), _mm512_loadu_ps(u + c)));
#endif
#ifdef REMAT_HAVE_AVX2
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(out + c, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + c)), _mm256_loadu_ps(u + c)));
    if (c < n) {
        __m256i m = remat_mask8(n - c);
        __m256 r = _mm256_mul_ps(silu8(_mm256_maskload_ps(g + c, m)), _mm256_maskload_ps(u + c, m));
        _mm256_maskstore_ps(out + c, m, r);
    }
#else
    for (; c < n; c++) out[c] = silu1(g[c]) * u[c];
#endif
}

/* dg, du from g, u, d for c < n (fp32 spans; dg may alias g, du u: each
 * vector is read before it is written) */
static void bwd_span(float *dg, float *du, const float *g, const float *u, const float *d, int n)
{
    int c = 0;
#ifdef REMAT_HAVE_AVX512
    for (; c + 16 <= n; c += 16) {
        __m512 a, b;
        swiglu_grad16(&a, &b, _mm512_loadu_ps(g + c), _mm512_loadu_ps(u + c), _mm512_loadu_ps(d + c));
        _mm512_storeu_ps(dg + c, a);
        _mm512_storeu_ps(du + c, b);
    }
#endif
#ifdef REMAT_HAVE_AVX2
    for (; c + 8 <= n; c += 8) {
        __m256 a, b;
        swiglu_grad8(&a, &b, _mm256_loadu_ps(g + c), _mm256_loadu_ps(u + c), _mm256_loadu_ps(d + c));
        _mm256_storeu_ps(dg + c, a);
        _mm256_storeu_ps(du + c, b);
    }
    if (c < n) {
        __m256i m = remat_mask8(n - c);
        __m256 a, b;
        swiglu_grad8(&a, &b, _mm256_maskload_ps(g + c, m), _mm256_maskload_ps(u + c, m), _mm256_maskload_ps(d + c, m));
        _mm256_maskstore_ps(dg + c, m, a);
        _mm256_maskstore_ps(du + c, m, b);
    }
#else
    for (; c < n; c++) swiglu_grad1(dg + c, du + c, g[c], u[c], d[c]);
#endif
}

/* out[n,c] = silu(inp[n,c]) * inp[n,F+c].  out (N,F), inp (N,2F).
 * Rows are independent, so any split over rows gives the same bits. */
void remat_swiglu_forward(void *out, const void *inp, int N, int F, int dt)
{
    #pragma omp parallel for schedule(static) if (REMAT_PAR(4 * (size_t)N * F))
    for (int n = 0; n < N; n++) {
        if (dt != REMAT_DTYPE_BF16) {
            const float *x = (const float *)inp + (size_t)n * 2 * F;
            fwd_span((float *)out + (size_t)n * F, x, x + F, F);
            continue;
        }
        const remat_bf16 *x = (const remat_bf16 *)inp + (size_t)n * 2 * F;
        remat_bf16 *o = (remat_bf16 *)out + (size_t)n * F;
        float g[SWIGLU_CHUNK], u[SWIGLU_CHUNK];
        for (int c0 = 0; c0 < F; c0 += SWIGLU_CHUNK) {
            int m = F - c0 < SWIGLU_CHUNK ? F - c0 : SWIGLU_CHUNK;
            remat_bf16_to_f32(g, x + c0, (size_t)m);
            remat_bf16_to_f32(u, x + F + c0, (size_t)m);
            fwd_span(g, g, u, m);
            remat_bf16_from_f32(o + c0, g, (size_t)m);
        }
    }
}

/* din[n,c] = dout[n,c] * inp[n,F+c] * silu'(inp[n,c]),  din[n,F+c] = dout[n,c] * silu(inp[n,c])
 * din (N,2F), dout (N,F), inp (N,2F); din may alias inp. */
void remat_swiglu_backward(void *din, const void *dout, const void *inp, int N, int F, int dt)
{
    #pragma omp parallel for schedule(static) if (REMAT_PAR(4 * (size_t)N * F))
    for (int n = 0; n < N; n++) {
        if (dt != REMAT_DTYPE_BF16) {
            const float *x = (const float *)inp + (size_t)n * 2 * F;
            float *dx = (float *)din + (size_t)n * 2 * F;
            bwd_span(dx, dx + F, x, x + F, (const float *)dout + (size_t)n * F, F);
            continue;
        }
        const remat_bf16 *x = (const remat_bf16 *)inp + (size_t)n * 2 * F, *d = (const remat_bf16 *)dout + (size_t)n * F;
        remat_bf16 *dx = (remat_bf16 *)din + (size_t)n * 2 * F;
        float g[SWIGLU_CHUNK], u[SWIGLU_CHUNK], e[SWIGLU_CHUNK];
        for (int c0 = 0; c0 < F; c0 += SWIGLU_CHUNK) {
            int m = F - c0 < SWIGLU_CHUNK ? F - c0 : SWIGLU_CHUNK;
            remat_bf16_to_f32(g, x + c0, (size_t)m);
            remat_bf16_to_f32(u, x + F + c0, (size_t)m);
            remat_bf16_to_f32(e, d + c0, (size_t)m);
            bwd_span(g, u, g, u, e, m);
            remat_bf16_from_f32(dx + c0, g, (size_t)m);
            remat_bf16_from_f32(dx + F + c0, u, (size_t)m);
        }
    }
}
