/*
 * fuzz_safetensors.c -- safetensors files, JSON header included
 * (src/io/weights.c, remat_safetensors_parse).  When a file parses, writing
 * it back and parsing again must give the same shape and parameter bytes.
 */
#include "fuzz_weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_weights_round_trip(REMAT_WEIGHTS_SAFETENSORS, data, size, 1, 0);
    return 0;
}
