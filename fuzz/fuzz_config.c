/*
 * fuzz_config.c -- model and step flags (cli_config_flag in src/cli/args.c,
 * then remat_config_check).  The input is split at NUL bytes into an argv,
 * parsed as remat train parses it; a config that passes the check must have
 * a parameter count and tensor sizes that are consistent (no overflow: the
 * parameter count is nonzero and each tensor's bytes fit).
 */
#include <string.h>
#include "fuzz.h"
#include "cli/cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1024) return 0;
    char buf[1026];
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[64];
    int argc = 0;
    argv[argc++] = "train";
    for (size_t i = 0; i <= size && argc < 63; ) {
        argv[argc++] = buf + i;
        i += strlen(buf + i) + 1;
    }
    argv[argc] = NULL;
    remat_config c;
    remat_config_default(&c);
    for (int i = 1; i < argc; i++) {
        int r = cli_config_flag(&c, argc, argv, &i);
        if (r < 0) return 0;   /* a bad value, reported */
    }
    if (remat_config_check(&c) != REMAT_OK) {
        FUZZ_CHECK(*remat_errmsg(), "a refused config says why");
        return 0;
    }
    uint64_t np = remat_config_num_params(&c);
    FUZZ_CHECK(np > 0 && np <= (1ULL << 40), "params %llu", (unsigned long long)np);
    FUZZ_CHECK(remat_config_padded_vocab(&c) % 64 == 0 && remat_config_padded_vocab(&c) >= c.vocab, "padded vocab");
    for (int t = 0; t < remat_config_tensor_count(&c); t++) {
        remat_tensor_info info;
        FUZZ_CHECK(remat_tensor_get(&c, t, &info) == REMAT_OK, "tensor %d", t);
        FUZZ_CHECK(info.bytes > 0 && info.bytes < (1ULL << 62), "tensor %s bytes %llu", info.name,
                   (unsigned long long)info.bytes);
    }
    return 0;
}
