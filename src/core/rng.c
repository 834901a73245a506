/* rng.c -- the one non-inline piece of the counter RNG (see rng.h). */
#include <math.h>
#include "rng.h"

float remat_rng_normal(uint64_t key, uint64_t idx)
{
    /* Box-Muller on two independent counters; u1 in (0,1] avoids log(0). */
    double u1 = ((double)(remat_rng_bits(key, 2 * idx) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(remat_rng_bits(key, 2 * idx + 1) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
