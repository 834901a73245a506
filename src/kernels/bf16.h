/*
 * bf16.h -- bfloat16 storage: conversions to and from fp32.  Internal
 * header of the kernels.
 *
 * A bf16 is the upper 16 bits of an IEEE float (8-bit exponent, 7-bit
 * mantissa).  Rounding is to nearest, ties to even, as PyTorch's and
 * oneDNN's conversions do; a NaN stays a (quiet) NaN.  The vector and the
 * scalar paths do the same integer operations, so an element gets the same
 * bits whichever converts it (no AVX512-BF16 instruction is used for it:
 * VCVTNEPS2BF16 flushes denormals, which the scalar path would not).
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

/* dst[i] = bf16(src[i]) for i < n */
static inline void remat_bf16_from_f32(remat_bf16 *dst, const float *src, size_t n)
{
    size_t i = 0;
#if defined(__AVX2__)
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(dst + i), remat_bf16_round8(_mm256_loadu_ps(src + i)));
#endif
    for (; i < n; i++) dst[i] = remat_bf16_round(src[i]);
}

/* dst[i] = float(src[i]) for i < n (exact) */
static inline void remat_bf16_to_f32(float *dst, const remat_bf16 *src, size_t n)
{
    size_t i = 0;
#if defined(__AVX2__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, remat_bf16_load8(src + i));
#endif
    for (; i < n; i++) dst[i] = remat_bf16_to_float(src[i]);
}

#endif
