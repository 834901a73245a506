/*
 * fuzz_shard.c -- data files (src/data/data.c): llm.c token shards and byte
 * text.  The input is written to a private temporary file and opened with
 * remat_data_open under one of three vocabularies; when it opens, a few
 * batches are drawn from both splits and every token must be in range, and
 * seeking to a drawn position must reproduce the batch (determinism).
 */
#include <string.h>
#include <unistd.h>
#include "fuzz.h"
#include "remat.h"

static char path[64];

static void cleanup(void) { if (path[0]) unlink(path); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        /* tmpfs when there is one: a disk-backed /tmp costs 10x the executions */
        snprintf(path, sizeof path, "%s/remat-fuzz-shard-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        int fd = mkstemp(path);
        FUZZ_CHECK(fd >= 0, "mkstemp");
        close(fd);
        atexit(cleanup);
    }
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "writing %s", path);
    static const int vocabs[3] = { 256, 50257, 65536 };
    int vocab = vocabs[size % 3];
    remat_data *d = NULL;
    remat_status st = remat_data_open(path, vocab, &d);
    if (st) {
        FUZZ_CHECK(!d && *remat_errmsg(), "a failed open leaves no handle and says why");
        FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_IO, "status %d", (int)st);
        return 0;
    }
    enum { B = 2, T = 5 };
    int in[B * T], tg[B * T], in2[B * T], tg2[B * T];
    for (int split = 0; split < 2; split++) {
        FUZZ_CHECK(remat_data_tokens(d, split) >= 2, "split %d has %zu tokens", split, remat_data_tokens(d, split));
        for (int k = 0; k < 3; k++) {
            uint64_t pos = remat_data_position(d, split);
            FUZZ_CHECK(pos < remat_data_tokens(d, split), "position in range");
            FUZZ_CHECK(remat_data_next(d, split, B, T, in, tg) == REMAT_OK, "next");
            for (int i = 0; i < B * T; i++)
                FUZZ_CHECK(in[i] >= 0 && in[i] < vocab && tg[i] >= 0 && tg[i] < vocab, "token out of range");
            FUZZ_CHECK(remat_data_seek(d, split, pos) == REMAT_OK, "seek");
            FUZZ_CHECK(remat_data_next(d, split, B, T, in2, tg2) == REMAT_OK, "next again");
            FUZZ_CHECK(!memcmp(in, in2, sizeof in) && !memcmp(tg, tg2, sizeof tg), "seek reproduces the batch");
        }
    }
    remat_data_free(d);
    return 0;
}
