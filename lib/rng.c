#include "rng.h"

#include <math.h>

void vtr_rng_init(vtr_rng *rng, uint64_t seed, uint64_t stream)
{
    rng->seed = seed;
    rng->stream = stream;
    rng->counter = 0;
    rng->used = 4;
    for (int i = 0; i < 4; i++)
        rng->block[i] = 0;
}

uint32_t vtr_rng_u32(vtr_rng *rng)
{
    if (rng->used == 4) {
        vtr_philox_block(rng->seed, rng->stream, rng->counter++, rng->block);
        rng->used = 0;
    }
    return rng->block[rng->used++];
}

float vtr_rng_uniform(vtr_rng *rng)
{
    return vtr_u32_to_unit_float(vtr_rng_u32(rng));
}

float vtr_rng_normal(vtr_rng *rng)
{
    /* u1 in (0, 1] so that log(u1) is finite */
    double u1 = 1.0 - (double)vtr_rng_uniform(rng);
    double u2 = (double)vtr_rng_uniform(rng);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint32_t vtr_rng_below(vtr_rng *rng, uint32_t n)
{
    uint64_t m = (uint64_t)vtr_rng_u32(rng) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)vtr_rng_u32(rng) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void vtr_rng_permutation(vtr_rng *rng, int64_t *perm, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)vtr_rng_below(rng, (uint32_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
