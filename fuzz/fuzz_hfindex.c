/*
 * fuzz_hfindex.c -- model.safetensors.index.json (src/io/hfdir.c,
 * remat_hf_index_parse).  A refused index says why in one line with FORMAT
 * (or NOMEM); an accepted one names at least one shard, every shard a plain
 * file name of the directory (no '/', not starting with '.'), every entry a
 * shard of the list, the shards distinct and in name order; written back
 * (remat_hf_index_dump) it parses to the same entries, and that dump is a
 * fixed point.
 */
#include <string.h>
#include "fuzz.h"
#include "remat.h"
#include "io/io.h"

static int same_index(const remat_hf_index *a, const remat_hf_index *b)
{
    if (a->n != b->n || a->nshard != b->nshard || a->has_total != b->has_total || a->total_size != b->total_size)
        return 0;
    for (int i = 0; i < a->nshard; i++)
        if (strcmp(a->shard[i], b->shard[i])) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->tensor[i], b->tensor[i]) || a->in[i] != b->in[i]) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    remat_hf_index ix, back;
    remat_status st = remat_hf_index_parse(data, size, "index.json", &ix);
    if (st) {
        FUZZ_CHECK(*remat_errmsg() && !strchr(remat_errmsg(), '\n'), "a refusal says why in one line: '%s'",
                   remat_errmsg());
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_NOMEM, "status %d", (int)st);
        FUZZ_CHECK(!ix.n && !ix.nshard && !ix.shard, "a refused index holds nothing");
        return 0;
    }
    FUZZ_CHECK(ix.n > 0 && ix.nshard > 0, "an index names a tensor and a shard");
    for (int i = 0; i < ix.nshard; i++) {
        FUZZ_CHECK(ix.shard[i][0] && ix.shard[i][0] != '.' && !strchr(ix.shard[i], '/'), "shard name '%s'", ix.shard[i]);
        FUZZ_CHECK(!i || strcmp(ix.shard[i - 1], ix.shard[i]) < 0, "shards distinct, in name order");
    }
    for (size_t i = 0; i < ix.n; i++) FUZZ_CHECK(ix.in[i] >= 0 && ix.in[i] < ix.nshard, "entry %zu's shard", i);
    char *t1 = NULL, *t2 = NULL;
    FUZZ_CHECK(remat_hf_index_dump(&ix, &t1) == REMAT_OK, "dump: %s", remat_errmsg());
    FUZZ_CHECK(remat_hf_index_parse(t1, strlen(t1), "back.json", &back) == REMAT_OK, "reparse: %s", remat_errmsg());
    FUZZ_CHECK(same_index(&ix, &back), "the round trip changes the index");
    FUZZ_CHECK(remat_hf_index_dump(&back, &t2) == REMAT_OK && !strcmp(t1, t2), "the dump is a fixed point");
    free(t1);
    free(t2);
    remat_hf_index_clear(&ix);
    remat_hf_index_clear(&back);
    return 0;
}
