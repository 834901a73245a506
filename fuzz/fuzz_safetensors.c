/*
 * fuzz_safetensors.c -- safetensors files, JSON header included
 * (src/io/weights.c, remat_safetensors_parse).  When a file parses, writing
 * it back and parsing again must give the same shape and parameter bytes.
 */
#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_config c, c2;
    float *p = NULL, *p2 = NULL;
    remat_status st = remat_safetensors_parse(data, size, 1, &c, &p);
    if (st) {
        FUZZ_CHECK(!p && *remat_errmsg(), "a failed parse leaves no buffer and says why");
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_NOMEM, "status %d", (int)st);
        return 0;
    }
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    FUZZ_CHECK(f, "open_memstream");
    FUZZ_CHECK(remat_weights_write(f, &c, p, REMAT_WEIGHTS_SAFETENSORS) == REMAT_OK, "write: %s", remat_errmsg());
    fclose(f);
    FUZZ_CHECK(remat_safetensors_parse(buf, n, 0, &c2, &p2) == REMAT_OK, "reparse: %s", remat_errmsg());
    size_t np = (size_t)remat_config_num_params(&c);
    FUZZ_CHECK(!memcmp(&c, &c2, sizeof c) && !memcmp(p, p2, np * sizeof(float)), "round trip differs");
    free(buf);
    free(p);
    free(p2);
    return 0;
}
