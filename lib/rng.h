/* Seeded random numbers with independent streams: Philox4x32-10 (Salmon et al., SC'11,
 * "Parallel random numbers: as easy as 1, 2, 3").
 *
 * Philox is counter-based: the block for (seed, stream, counter) is a pure function,
 * so every component (data order, dropout, augmentation, init) takes its own stream id
 * and draws the same numbers whatever else ran, and a CUDA kernel computes element i of
 * a stream exactly as the CPU does (vtr_philox_uniform_at). A vtr_rng is plain data:
 * checkpoints store it as bytes and resume the exact sequence.
 */
#ifndef VTR_RNG_H
#define VTR_RNG_H

#include <stdint.h>

#include "hostdevice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vtr_rng {
    uint64_t seed;
    uint64_t stream;
    uint64_t counter;   /* next block to generate */
    uint32_t block[4];  /* the current block */
    uint32_t used;      /* words of block already consumed (4 = none left) */
} vtr_rng;

/* One Philox4x32-10 block: ctr (4 words), key (2 words) -> out (4 words). */
static VTR_HD void vtr_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                     uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    VTR_UNROLL /* for lib/activation.c's dropout, an `omp simd` loop over blocks */
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Block `counter` of (seed, stream): the counter is (counter, stream) as 4 words. */
static VTR_HD void vtr_philox_block(uint64_t seed, uint64_t stream, uint64_t counter,
                                    uint32_t out[4])
{
    uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), (uint32_t)stream,
                       (uint32_t)(stream >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    vtr_philox4x32_10(ctr, key, out);
}

/* 32 random bits -> uniform float in [0, 1) with 24 bits of precision. */
static VTR_HD float vtr_u32_to_unit_float(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* Word i of (seed, stream): word i % 4 of block i / 4. */
static VTR_HD uint32_t vtr_philox_word_at(uint64_t seed, uint64_t stream, uint64_t i)
{
    uint32_t out[4];
    vtr_philox_block(seed, stream, i / 4, out);
    return out[i % 4];
}

/* Element i of (seed, stream) as a uniform float in [0, 1): word i as
 * vtr_u32_to_unit_float turns it. The same value vtr_rng_uniform returns as its i-th draw
 * on a fresh generator. */
static VTR_HD float vtr_philox_uniform_at(uint64_t seed, uint64_t stream, uint64_t i)
{
    return vtr_u32_to_unit_float(vtr_philox_word_at(seed, stream, i));
}

void vtr_rng_init(vtr_rng *rng, uint64_t seed, uint64_t stream);

uint32_t vtr_rng_u32(vtr_rng *rng);

/* Uniform in [0, 1). */
float vtr_rng_uniform(vtr_rng *rng);

/* Standard normal (Box-Muller on two uniforms; no cached second value, so the state
 * stays a plain counter). */
float vtr_rng_normal(vtr_rng *rng);

/* Uniform integer in [0, n), unbiased (Lemire's method); n > 0. */
uint32_t vtr_rng_below(vtr_rng *rng, uint32_t n);

/* A uniformly random permutation of 0 .. n-1 written to perm (Fisher-Yates). */
void vtr_rng_permutation(vtr_rng *rng, int64_t *perm, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
