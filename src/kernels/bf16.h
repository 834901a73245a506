/*
 * bf16.h -- bfloat16 storage: conversions to and from fp32.  Internal
 * header of the kernels.
 *
 * A bf16 is the upper 16 bits of an IEEE float (8-bit exponent, 7-bit
 * mantissa).  Rounding is to nearest, ties to even, as PyTorch's and
 * oneDNN's conversions do; a NaN stays a (quiet) NaN.  Every path gives
 * an element the same bits: the scalar and the AVX2 ones do the same
 * integer operations, and the AVX-512 one (16 lanes) uses AVX512-BF16's
 * VCVTNEPS2BF16 where the CPU has it, which rounds the same way (nearest
 * even, NaN quieted by the same bit) except that it flushes denormal
 * inputs to zero: a vector with a denormal lane (rare: |x| < 2^-126) takes
 * the integer operations instead.  Without AVX512-BF16 the 16 lanes run
 * the integer operations.
 */
#ifndef REMAT_BF16_H
#define REMAT_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "remat.h"
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#define REMAT_HAVE_AVX512 1
#endif

typedef uint16_t remat_bf16;

/* bytes of one element of dtype dt (REMAT_DTYPE_FP32 or REMAT_DTYPE_BF16) */
static inline size_t remat_dtype_bytes(int dt) { return dt == REMAT_DTYPE_BF16 ? 2 : 4; }

static inline remat_bf16 remat_bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (remat_bf16)((u >> 16) | 0x40);   /* NaN: keep it quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (remat_bf16)(u >> 16);
}

static inline float remat_bf16_to_float(remat_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#if defined(__AVX2__)
/* 8 floats to 8 bf16 (the same operations as remat_bf16_round) */
static inline __m128i remat_bf16_round8(__m256 x)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    r = _mm256_blendv_epi8(r, q, nan);
    /* pack the low halves of the 8 lanes */
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    return _mm_packus_epi32(lo, hi);
}

static inline __m256 remat_bf16_load8(const remat_bf16 *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#endif

#ifdef REMAT_HAVE_AVX512
/* 16 floats to 16 bf16 by remat_bf16_round's integer operations */
static inline __m256i remat_bf16_round16_int(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(r);
}

/* 16 floats to 16 bf16, the bits of remat_bf16_round */
static inline __m256i remat_bf16_round16(__m512 x)
{
#if defined(__AVX512BF16__)
    if (__builtin_expect(_mm512_fpclass_ps_mask(x, 0x20) != 0, 0)) return remat_bf16_round16_int(x);   /* a denormal */
    return (__m256i)_mm512_cvtneps_pbh(x);
#else
    return remat_bf16_round16_int(x);
#endif
}

static inline __m512 remat_bf16_load16(const remat_bf16 *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline void remat_bf16_store16(remat_bf16 *p, __m512 x)
{
    _mm256_storeu_si256((__m256i *)p, remat_bf16_round16(x));
}
#endif

/* dst[i] = bf16(src[i]) for i < n */
static inline void remat_bf16_from_f32(remat_bf16 *dst, const float *src, size_t n)
{
    size_t i = 0;
#ifdef REMAT_HAVE_AVX512
    for (; i + 16 <= n; i += 16) remat_bf16_store16(dst + i, _mm512_loadu_ps(src + i));
#endif
#if defined(__AVX2__)
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(dst + i), remat_bf16_round8(_mm256_loadu_ps(src + i)));
#endif
    for (; i < n; i++) dst[i] = remat_bf16_round(src[i]);
}

/* dst[i] = bf16(src[i] * f) for i < n (the product in fp32, rounded once) */
static inline void remat_bf16_from_f32_scaled(remat_bf16 *dst, const float *src, size_t n, float f)
{
    size_t i = 0;
#ifdef REMAT_HAVE_AVX512
    for (; i + 16 <= n; i += 16) remat_bf16_store16(dst + i, _mm512_mul_ps(_mm512_loadu_ps(src + i), _mm512_set1_ps(f)));
#endif
#if defined(__AVX2__)
    const __m256 vf = _mm256_set1_ps(f);
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), remat_bf16_round8(_mm256_mul_ps(_mm256_loadu_ps(src + i), vf)));
#endif
    for (; i < n; i++) dst[i] = remat_bf16_round(src[i] * f);
}

/* dst[i] = bf16(float(src[i]) * f) for i < n (dst may alias src) */
static inline void remat_bf16_scale(remat_bf16 *dst, const remat_bf16 *src, size_t n, float f)
{
    size_t i = 0;
#ifdef REMAT_HAVE_AVX512
    for (; i + 16 <= n; i += 16) remat_bf16_store16(dst + i, _mm512_mul_ps(remat_bf16_load16(src + i), _mm512_set1_ps(f)));
#endif
#if defined(__AVX2__)
    const __m256 vf = _mm256_set1_ps(f);
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), remat_bf16_round8(_mm256_mul_ps(remat_bf16_load8(src + i), vf)));
#endif
    for (; i < n; i++) dst[i] = remat_bf16_round(remat_bf16_to_float(src[i]) * f);
}

/* dst[i] = float(src[i]) for i < n (exact) */
static inline void remat_bf16_to_f32(float *dst, const remat_bf16 *src, size_t n)
{
    size_t i = 0;
#ifdef REMAT_HAVE_AVX512
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, remat_bf16_load16(src + i));
#endif
#if defined(__AVX2__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, remat_bf16_load8(src + i));
#endif
    for (; i < n; i++) dst[i] = remat_bf16_to_float(src[i]);
}

#endif
