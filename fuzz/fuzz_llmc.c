/*
 * fuzz_llmc.c -- llm.c model checkpoints (src/io/weights.c,
 * remat_llmc_parse).  When a file parses, writing the parameters back and
 * parsing again must give the same shape and the same bytes (round trip),
 * and the rewritten file must be byte-identical when rewritten once more.
 */
#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_config c, c2;
    float *p = NULL, *p2 = NULL;
    remat_status st = remat_llmc_parse(data, size, &c, &p);
    if (st) {
        FUZZ_CHECK(!p && *remat_errmsg(), "a failed parse leaves no buffer and says why");
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_NOMEM, "status %d", (int)st);
        return 0;
    }
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    FUZZ_CHECK(f, "open_memstream");
    FUZZ_CHECK(remat_weights_write(f, &c, p, REMAT_WEIGHTS_LLMC) == REMAT_OK, "write back: %s", remat_errmsg());
    fclose(f);
    FUZZ_CHECK(remat_llmc_parse(buf, n, &c2, &p2) == REMAT_OK, "reparse: %s", remat_errmsg());
    size_t np = (size_t)remat_config_num_params(&c);
    FUZZ_CHECK(!memcmp(&c, &c2, sizeof c) && !memcmp(p, p2, np * sizeof(float)), "round trip differs");
    FUZZ_CHECK(n <= size, "a rewritten file (%zu bytes) is never larger than the input (%zu)", n, size);
    free(buf);
    free(p);
    free(p2);
    return 0;
}
