/*
 * endian.h -- little-endian fields, whatever the host's byte order.
 *
 * Every file remat reads or writes (checkpoints, llm.c weights and token
 * shards, safetensors) stores its numbers little-endian.  These helpers
 * assemble and split them byte by byte, so they are also independent of
 * alignment; compilers turn each into one load or store on a little-endian
 * host.  Float arrays are converted in place, which costs nothing on x86 and
 * ARM (remat_le_f32_swap is then a no-op).
 */
#ifndef REMAT_ENDIAN_H
#define REMAT_ENDIAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t remat_get_le16(const void *p)
{
    const unsigned char *b = p;
    return (uint16_t)(b[0] | b[1] << 8);
}

static inline uint32_t remat_get_le32(const void *p)
{
    const unsigned char *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline uint64_t remat_get_le64(const void *p)
{
    const unsigned char *b = p;
    return (uint64_t)remat_get_le32(b) | (uint64_t)remat_get_le32(b + 4) << 32;
}

static inline float remat_get_lef32(const void *p)
{
    uint32_t u = remat_get_le32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline void remat_put_le16(void *p, uint16_t v)
{
    unsigned char *b = p;
    b[0] = (unsigned char)v;
    b[1] = (unsigned char)(v >> 8);
}

static inline void remat_put_le32(void *p, uint32_t v)
{
    unsigned char *b = p;
    for (int k = 0; k < 4; k++) b[k] = (unsigned char)(v >> (8 * k));
}

static inline void remat_put_le64(void *p, uint64_t v)
{
    unsigned char *b = p;
    remat_put_le32(b, (uint32_t)v);
    remat_put_le32(b + 4, (uint32_t)(v >> 32));
}

static inline void remat_put_lef32(void *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    remat_put_le32(p, u);
}

/* 1 on a little-endian host (the compiler folds it to a constant). */
static inline int remat_host_is_le(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* n float32 in place: little-endian bytes <-> host floats (the same
 * permutation both ways; nothing to do on a little-endian host). */
static inline void remat_le_f32_swap(float *x, size_t n)
{
    if (remat_host_is_le()) return;
    for (size_t i = 0; i < n; i++) {
        float f = remat_get_lef32(x + i);
        memcpy(x + i, &f, 4);
    }
}

#endif
