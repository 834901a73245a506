/*
 * fuzz_hfconfig.c -- Hugging Face config.json (src/io/hfdir.c,
 * remat_hf_config_parse, what `remat train --init-from DIR` reads first).
 * A refused file says why in one line with FORMAT (or NOMEM); an accepted
 * one is a valid config that, written back (remat_hf_config_dump, in both
 * precisions' torch_dtype), reads back as the same architecture with every
 * number bit for bit, and writing that again gives the same text.
 */
#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"
#include "table/tensors.h"

/* the fields config.json sets, compared exactly (doubles by their bits) */
static int same_fields(const remat_config *a, const remat_config *b)
{
    return remat_config_same(a, b) && a->n_kv_head == b->n_kv_head && a->head_dim == b->head_dim &&
           a->ffn_dim == b->ffn_dim && a->tie_embeddings == b->tie_embeddings &&
           !memcmp(&a->rope_theta, &b->rope_theta, sizeof a->rope_theta) &&
           !memcmp(&a->norm_eps, &b->norm_eps, sizeof a->norm_eps) &&
           !memcmp(&a->rope_scaling.factor, &b->rope_scaling.factor, sizeof(double)) &&
           !memcmp(&a->rope_scaling.low_freq_factor, &b->rope_scaling.low_freq_factor, sizeof(double)) &&
           !memcmp(&a->rope_scaling.high_freq_factor, &b->rope_scaling.high_freq_factor, sizeof(double));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_config c, c2, c3;
    remat_status st = remat_hf_config_parse(data, size, "config.json", &c);
    if (st) {
        FUZZ_CHECK(*remat_errmsg() && !strchr(remat_errmsg(), '\n'), "a refusal says why in one line: '%s'",
                   remat_errmsg());
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_NOMEM, "status %d", (int)st);
        return 0;
    }
    remat_config v = c;   /* experts are planned on a framework table */
    if (v.n_experts) v.framework = REMAT_FRAMEWORK_PYTORCH;
    FUZZ_CHECK(remat_config_check(&v) == REMAT_OK, "an accepted config.json is a valid config: %s", remat_errmsg());
    if (c.n_experts) {
        char *t = NULL;
        FUZZ_CHECK(remat_hf_config_dump(&c, REMAT_DTYPE_FP32, &t) == REMAT_ERR_INVALID && !t,
                   "a mixture of experts is not written as a dense config.json");
        return 0;
    }
    for (int dt = 0; dt < 2; dt++) {
        char *t1 = NULL, *t2 = NULL;
        FUZZ_CHECK(remat_hf_config_dump(&c, (remat_dtype)dt, &t1) == REMAT_OK, "dump: %s", remat_errmsg());
        FUZZ_CHECK(remat_hf_config_parse(t1, strlen(t1), "back.json", &c2) == REMAT_OK, "reparse: %s\n%s",
                   remat_errmsg(), t1);
        FUZZ_CHECK(same_fields(&c, &c2), "the round trip changes the architecture:\n%s", t1);
        FUZZ_CHECK(remat_hf_config_dump(&c2, (remat_dtype)dt, &t2) == REMAT_OK && !strcmp(t1, t2),
                   "the second dump differs");
        FUZZ_CHECK(remat_hf_config_parse(t2, strlen(t2), "back.json", &c3) == REMAT_OK && same_fields(&c2, &c3),
                   "a fixed point");
        free(t1);
        free(t2);
    }
    return 0;
}
