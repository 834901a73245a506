/*
 * fuzz_profile.c -- planner profiles (src/planner/cost.c, the text files of
 * `remat profile`, read by remat_profile_load).  The input is written to a
 * private temporary file (tmpfs when there is one) and loaded for the default
 * config and for the small config of the second seed: a refused file must
 * say why with FORMAT, INVALID (another config or machine) or IO; an
 * accepted one must survive a save and a load unchanged, a training run's
 * times ("run" lines) included.
 */
#include <string.h>
#include <unistd.h>
#include "fuzz.h"
#include "remat.h"

static char path[64], path2[80];

static void cleanup(void)
{
    if (path[0]) unlink(path);
    if (path2[0]) unlink(path2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/remat-fuzz-profile-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        int fd = mkstemp(path);
        FUZZ_CHECK(fd >= 0, "mkstemp");
        close(fd);
        snprintf(path2, sizeof path2, "%s.again", path);
        atexit(cleanup);
        remat_set_threads(1);
    }
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "writing %s", path);
    for (int k = 0; k < 2; k++) {
        remat_config c;
        remat_config_default(&c);
        if (k) { c.n_layer = 2; c.n_embd = 32; c.n_head = 2; c.seq = c.max_seq = 8; c.batch = 2; c.dropout = 0.1f; }
        remat_profile *p = NULL, *q = NULL;
        remat_status st = remat_profile_load(&c, path, &p);
        if (st) {
            FUZZ_CHECK(!p && *remat_errmsg(), "a refused profile leaves no handle and says why");
            FUZZ_CHECK(st == REMAT_ERR_FORMAT || st == REMAT_ERR_INVALID || st == REMAT_ERR_IO, "status %d", (int)st);
        } else {
            /* an accepted one round-trips, run times included */
            FUZZ_CHECK(remat_profile_save(p, path2) == REMAT_OK && remat_profile_load(&c, path2, &q) == REMAT_OK,
                       "save and load again: %s", remat_errmsg());
            FUZZ_CHECK(remat_profile_run_ops(q) == remat_profile_run_ops(p), "run times survive a round trip");
            for (int t = -1; t < remat_config_tensor_count(&c); t++)
                for (int bw = 0; bw < 2; bw++)
                    FUZZ_CHECK(remat_profile_op_ms(q, t, bw) == remat_profile_op_ms(p, t, bw) &&
                               remat_profile_op_warm_ms(q, t, bw) == remat_profile_op_warm_ms(p, t, bw), "op %d/%d", t, bw);
        }
        remat_profile_free(p);
        remat_profile_free(q);
    }
    return 0;
}
