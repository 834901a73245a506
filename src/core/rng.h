/*
 * rng.h -- counter-based random numbers for remat.
 *
 * Every random number in remat is a pure function of (key, index): there is
 * no generator state to save or restore.  That is what lets a recomputed
 * forward op regenerate exactly the dropout mask it used the first time,
 * without storing the mask (the same idea as Philox in Salmon et al. 2011,
 * "Parallel random numbers: as easy as 1, 2, 3"; here the bijection is the
 * splitmix64 finaliser, which passes BigCrush when fed a counter).
 *
 * Keys are derived from (seed, step, layer, site), so two dropout sites, two
 * layers or two steps never share a stream.
 */
#ifndef REMAT_RNG_H
#define REMAT_RNG_H

#include <stdint.h>

/* splitmix64 finaliser: a bijection on 64-bit words with full avalanche. */
static inline uint64_t remat_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Stream key for one (seed, step, layer, site). */
static inline uint64_t remat_rng_key(uint64_t seed, uint64_t step, uint32_t layer, uint32_t site)
{
    uint64_t k = remat_mix64(seed ^ 0x6a09e667f3bcc909ULL);
    k = remat_mix64(k + step * 0x9e3779b97f4a7c15ULL);
    k = remat_mix64(k + (((uint64_t)layer << 32) | site));
    return k;
}

/* 64 random bits for element `idx` of stream `key`. */
static inline uint64_t remat_rng_bits(uint64_t key, uint64_t idx)
{
    return remat_mix64(key + (idx + 1) * 0x9e3779b97f4a7c15ULL);
}

/* Uniform float in [0, 1) with 24 bits of resolution. */
static inline float remat_rng_uniform(uint64_t key, uint64_t idx)
{
    return (float)(remat_rng_bits(key, idx) >> 40) * (1.0f / 16777216.0f);
}

/* Standard normal via Box-Muller on two counters (used for weight init). */
float remat_rng_normal(uint64_t key, uint64_t idx);

/* Dropout sites inside one block (the `site` of remat_rng_key). */
enum { REMAT_SITE_ATT = 1, REMAT_SITE_RES_ATTN = 2, REMAT_SITE_RES_MLP = 3 };

/*
 * A dropout mask, described rather than stored: element i of a kernel's
 * buffer is kept when uniform(key, offset + i) >= p, and kept elements are
 * scaled by 1/(1-p) (inverted dropout, as torch.nn.Dropout).  p == 0 means
 * "identity".  offset places the buffer in the step's whole batch: a
 * micro-batch that starts at global row g draws element offset + i, with
 * offset the index of row g's first element (g T C for a (B,T,C) branch,
 * g NH T T for the attention probabilities), so it draws exactly the mask
 * a whole-batch buffer draws for its rows, on any rank (remat.h, "data
 * parallelism").  A whole batch has offset 0.
 */
typedef struct remat_dropout {
    float p;
    float scale;   /* 1/(1-p) */
    uint64_t key;
    uint64_t offset;
} remat_dropout;

static inline remat_dropout remat_dropout_make(float p, uint64_t key)
{
    remat_dropout d;
    d.p = p;
    d.scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
    d.key = key;
    d.offset = 0;
    return d;
}

/* Multiplier for element idx of the buffer: 0 or 1/(1-p). */
static inline float remat_dropout_mult(const remat_dropout *d, uint64_t idx)
{
    if (d->p <= 0.0f) return 1.0f;
    return remat_rng_uniform(d->key, d->offset + idx) >= d->p ? d->scale : 0.0f;
}

#endif
