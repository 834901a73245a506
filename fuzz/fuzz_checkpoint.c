/*
 * fuzz_checkpoint.c -- remat training checkpoints (src/io/checkpoint.c,
 * remat_checkpoint_parse).  Byte 0 chooses whether the checksum is checked
 * (so that mutations reach the field checks behind it); the rest is the
 * file.  An accepted checkpoint must describe a valid config whose
 * parameter count matches, with its three arrays inside the buffer.
 */
#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int flags = data[0] & 1 ? REMAT_CKPT_NO_CHECKSUM : 0;
    const uint8_t *b = data + 1;
    size_t n = size - 1;
    remat_ckpt_view *v = malloc(sizeof *v);
    FUZZ_CHECK(v, "malloc");
    remat_status st = remat_checkpoint_parse(b, n, flags, v);
    if (st) {
        FUZZ_CHECK(*remat_errmsg(), "a refused checkpoint says why");
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_RANGE, "status %d", (int)st);
    } else {
        FUZZ_CHECK(remat_config_check(&v->info.cfg) == REMAT_OK, "accepted config fails its check");
        FUZZ_CHECK(v->nparams == remat_config_num_params(&v->info.cfg), "nparams %llu",
                   (unsigned long long)v->nparams);
        const uint8_t *arr[3] = { v->params, v->adam_m, v->adam_v };
        for (int k = 0; k < 3; k++)
            FUZZ_CHECK(arr[k] >= b && arr[k] + 4 * v->nparams <= b + n, "array %d outside the buffer", k);
        FUZZ_CHECK(memchr(v->info.data, 0, sizeof v->info.data) && memchr(v->info.policy, 0, sizeof v->info.policy),
                   "strings are terminated");
    }
    free(v);
    return 0;
}
