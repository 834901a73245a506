/*
 * test_core.c -- the shared pieces of src/core/: the little-endian helpers
 * (endian.h).
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

int main(void)
{
    test_endian();
    return TEST_REPORT();
}
