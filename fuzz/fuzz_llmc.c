/*
 * fuzz_llmc.c -- llm.c model checkpoints (src/io/weights.c,
 * remat_llmc_parse).  When a file parses, writing the parameters back and
 * parsing again must give the same shape and the same bytes (round trip),
 * and the rewritten file is never larger than the input.
 */
#include "fuzz_weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = fuzz_weights_round_trip(REMAT_WEIGHTS_LLMC, data, size, 0, 0);
    FUZZ_CHECK(n <= size, "a rewritten file (%zu bytes) is never larger than the input (%zu)", n, size);
    return 0;
}
