/*
 * fuzz_weights.h -- the property both weight-file targets check
 * (fuzz_llmc.c, fuzz_safetensors.c): a refused file says why in one line
 * and leaves no buffer; an accepted one, written back in its own format and parsed again,
 * gives the same shape and the same parameter bytes; a safetensors file
 * written as BF16 gives the parameters rounded to nearest even.
 */
#ifndef REMAT_FUZZ_WEIGHTS_H
#define REMAT_FUZZ_WEIGHTS_H

#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"

/* the format's parser; n_head_hint only for safetensors (the file has no n_head) */
static remat_status fuzz_weights_parse(remat_weights_format fmt, const void *b, size_t n, int n_head_hint,
                                       remat_config *c, float **p)
{
    return fmt == REMAT_WEIGHTS_LLMC ? remat_llmc_parse(b, n, c, p) : remat_safetensors_parse(b, n, n_head_hint, c, p);
}

/* Checks the property on one input.  Returns the size of the rewritten
 * file, or 0 when the input was refused.  parse_hint / reparse_hint: the
 * n_head hints of the first and the second parse. */
static size_t fuzz_weights_round_trip(remat_weights_format fmt, const uint8_t *data, size_t size, int parse_hint,
                                      int reparse_hint)
{
    remat_config c, c2;
    float *p = NULL, *p2 = NULL;
    remat_status st = fuzz_weights_parse(fmt, data, size, parse_hint, &c, &p);
    if (st) {
        FUZZ_CHECK(!p && *remat_errmsg() && !strchr(remat_errmsg(), '\n'),
                   "a failed parse leaves no buffer and says why in one line");
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_NOMEM, "status %d", (int)st);
        return 0;
    }
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    FUZZ_CHECK(f, "open_memstream");
    FUZZ_CHECK(remat_weights_write(f, &c, p, fmt, REMAT_DTYPE_FP32) == REMAT_OK, "write back: %s", remat_errmsg());
    fclose(f);
    FUZZ_CHECK(fuzz_weights_parse(fmt, buf, n, reparse_hint, &c2, &p2) == REMAT_OK, "reparse: %s", remat_errmsg());
    size_t np = (size_t)remat_config_num_params(&c);
    FUZZ_CHECK(!memcmp(&c, &c2, sizeof c) && !memcmp(p, p2, np * sizeof(float)), "round trip differs");
    if (fmt == REMAT_WEIGHTS_SAFETENSORS) {
        /* and as BF16: every parameter rounded to nearest even (NaN stays
         * NaN), read back exactly */
        char *b16 = NULL;
        size_t n16 = 0;
        float *p3 = NULL;
        remat_config c3;
        f = open_memstream(&b16, &n16);
        FUZZ_CHECK(f, "open_memstream");
        FUZZ_CHECK(remat_weights_write(f, &c, p, fmt, REMAT_DTYPE_BF16) == REMAT_OK, "write bf16: %s", remat_errmsg());
        fclose(f);
        FUZZ_CHECK(fuzz_weights_parse(fmt, b16, n16, reparse_hint, &c3, &p3) == REMAT_OK, "reparse bf16: %s",
                   remat_errmsg());
        FUZZ_CHECK(!memcmp(&c, &c3, sizeof c), "bf16 round trip changes the shape");
        for (size_t i = 0; i < np; i++) {
            uint32_t u, v;
            memcpy(&u, p + i, 4);
            memcpy(&v, p3 + i, 4);
            if ((u & 0x7fffffffu) > 0x7f800000u) { FUZZ_CHECK((v & 0x7fffffffu) > 0x7f800000u, "NaN lost"); continue; }
            u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
            FUZZ_CHECK(u == v, "parameter %zu: bf16 read back %08x, want %08x", i, v, u);
        }
        free(b16);
        free(p3);
    }
    free(buf);
    free(p);
    free(p2);
    return n;
}

#endif
