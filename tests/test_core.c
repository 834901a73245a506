/*
 * test_core.c -- the shared pieces of src/core/: the little-endian helpers
 * (endian.h) and the content hash (remat_hash_bytes and its piecewise form).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "remat.h"
#include "core/core.h"
#include "core/endian.h"
#include "harness.h"

/* Fields are read from and written to explicit byte patterns, at every
 * alignment, so the test means the same on any host. */
static void test_endian(void)
{
    unsigned char buf[24];
    static const unsigned char le[8] = { 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01 };
    int bad = 0;
    for (int off = 0; off < 8; off++) {
        memset(buf, 0xee, sizeof buf);
        memcpy(buf + off, le, 8);
        bad += remat_get_le16(buf + off) != 0x0708;
        bad += remat_get_le32(buf + off) != 0x05060708u;
        bad += remat_get_le64(buf + off) != 0x0102030405060708ull;
        memset(buf, 0xee, sizeof buf);
        remat_put_le64(buf + off, 0x0102030405060708ull);
        bad += memcmp(buf + off, le, 8) != 0 || buf[off + 8] != 0xee || (off && buf[off - 1] != 0xee);
        memset(buf, 0xee, sizeof buf);
        remat_put_le32(buf + off, 0x05060708u);
        bad += memcmp(buf + off, le, 4) != 0 || buf[off + 4] != 0xee;
        memset(buf, 0xee, sizeof buf);
        remat_put_le16(buf + off, 0x0708);
        bad += memcmp(buf + off, le, 2) != 0 || buf[off + 2] != 0xee;
    }
    CHECK(bad == 0, "endian: %d fields read or written wrong", bad);

    /* 1.5f is 0x3fc00000: little-endian bytes 00 00 c0 3f */
    static const unsigned char f15[4] = { 0x00, 0x00, 0xc0, 0x3f };
    CHECK(remat_get_lef32(f15) == 1.5f, "get_lef32: %g", (double)remat_get_lef32(f15));
    remat_put_lef32(buf + 1, -2.25f);
    CHECK(remat_get_lef32(buf + 1) == -2.25f && buf[4] == 0xc0 && buf[3] == 0x10,
          "put_lef32(-2.25) wrote %02x %02x %02x %02x", buf[1], buf[2], buf[3], buf[4]);

    /* the array conversion: little-endian bytes in, host floats out, and back */
    float x[3];
    unsigned char raw[12];
    const float want[3] = { 1.5f, -2.25f, 1e-30f };
    for (int i = 0; i < 3; i++) remat_put_lef32(raw + 4 * i, want[i]);
    memcpy(x, raw, sizeof raw);
    remat_le_f32_swap(x, 3);
    CHECK(x[0] == want[0] && x[1] == want[1] && x[2] == want[2], "le_f32_swap: %g %g %g", (double)x[0],
          (double)x[1], (double)x[2]);
    remat_le_f32_swap(x, 3);
    CHECK(memcmp(x, raw, sizeof raw) == 0, "le_f32_swap twice is the identity");
    uint16_t one = 1;
    CHECK(remat_host_is_le() == (*(unsigned char *)&one == 1), "host_is_le");
}

/* remat_hash_bytes is defined on little-endian words: these values hold on
 * every host (they are what the little-endian hosts always computed, so
 * params_hash and checkpoint checksums did not change).  Fed in pieces of
 * every split, the piecewise form gives the same numbers. */
static void test_hash(void)
{
    static const struct { size_t n; uint64_t h; } gold[] = {
        {0, 0xe9e0033e3badaf36ull}, {1, 0xfd080f9a026d8f50ull}, {7, 0x6efc2a749138a7abull},
        {8, 0x3acde8cd836c61c9ull}, {9, 0x9a85a2f8207344daull}, {15, 0x7d8f4eef12a85e9cull},
        {16, 0x74e9cb188d0443ceull}, {17, 0x082e365591e9485eull}, {63, 0xf7c8bef35e6871a8ull},
        {64, 0x137d6f1ae67f80d7ull},
    };
    unsigned char b[64];
    for (int i = 0; i < 64; i++) b[i] = (unsigned char)(i * 37 + 11);
    for (size_t k = 0; k < sizeof gold / sizeof gold[0]; k++)
        CHECK(remat_hash_bytes(b, gold[k].n) == gold[k].h, "hash of %zu bytes: %016llx, want %016llx", gold[k].n,
              (unsigned long long)remat_hash_bytes(b, gold[k].n), (unsigned long long)gold[k].h);
    int bad = 0;
    for (size_t n = 0; n <= 64; n++) {
        uint64_t want = remat_hash_bytes(b, n);
        for (size_t i = 0; i <= n; i++)
            for (size_t j = i; j <= n; j++) {   /* three pieces: [0,i) [i,j) [j,n) */
                remat_hash s;
                remat_hash_init(&s, n);
                remat_hash_update(&s, b, i);
                remat_hash_update(&s, b + i, j - i);
                remat_hash_update(&s, b + j, n - j);
                bad += remat_hash_final(&s) != want;
            }
    }
    CHECK(bad == 0, "piecewise hash: %d splits differ from remat_hash_bytes", bad);
    /* byte by byte, over an unaligned start */
    remat_hash s;
    remat_hash_init(&s, 61);
    for (int i = 3; i < 64; i++) remat_hash_update(&s, b + i, 1);
    CHECK(remat_hash_final(&s) == remat_hash_bytes(b + 3, 61), "byte-by-byte hash");
}

int main(void)
{
    test_endian();
    test_hash();
    return TEST_REPORT();
}
