#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "lib/rng.h"

/* Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors). */
TEST(philox_known_answers)
{
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        uint32_t out[4];
        vtr_philox4x32_10(kat[k].ctr, kat[k].key, out);
        for (int i = 0; i < 4; i++)
            CHECK_MSG(out[i] == kat[k].out[i], "vector %zu word %d: %08x != %08x", k, i,
                      out[i], kat[k].out[i]);
    }
}

TEST(rng_same_seed_same_sequence_streams_differ)
{
    vtr_rng a, b, c;
    vtr_rng_init(&a, 42, 0);
    vtr_rng_init(&b, 42, 0);
    vtr_rng_init(&c, 42, 1);
    int same_as_other_stream = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t x = vtr_rng_u32(&a), y = vtr_rng_u32(&b), z = vtr_rng_u32(&c);
        CHECK(x == y);
        same_as_other_stream += x == z;
    }
    CHECK(same_as_other_stream < 3);
}

TEST(rng_uniform_matches_stateless_element_access)
{
    vtr_rng r;
    vtr_rng_init(&r, 7, 3);
    for (uint64_t i = 0; i < 37; i++)
        CHECK(vtr_rng_uniform(&r) == vtr_philox_uniform_at(7, 3, i));
}

TEST(rng_resumes_from_copied_state)
{
    vtr_rng r, saved;
    vtr_rng_init(&r, 1, 2);
    for (int i = 0; i < 5; i++)
        vtr_rng_u32(&r);
    saved = r;
    uint32_t next[10];
    for (int i = 0; i < 10; i++)
        next[i] = vtr_rng_u32(&r);
    for (int i = 0; i < 10; i++)
        CHECK(vtr_rng_u32(&saved) == next[i]);
}

TEST(rng_distributions)
{
    vtr_rng r;
    vtr_rng_init(&r, 123, 0);
    const int n = 200000;
    double sum = 0, sum_n = 0, sum_n2 = 0;
    int counts[10] = {0};
    for (int i = 0; i < n; i++) {
        float u = vtr_rng_uniform(&r);
        CHECK(u >= 0.0f && u < 1.0f);
        sum += u;
        float z = vtr_rng_normal(&r);
        CHECK(isfinite(z));
        sum_n += z;
        sum_n2 += (double)z * z;
        counts[vtr_rng_below(&r, 10)]++;
    }
    CHECK(fabs(sum / n - 0.5) < 0.005);
    CHECK(fabs(sum_n / n) < 0.01);
    CHECK(fabs(sum_n2 / n - 1.0) < 0.02);
    for (int k = 0; k < 10; k++)
        CHECK_MSG(abs(counts[k] - n / 10) < 700, "bucket %d: %d", k, counts[k]);
}

TEST(rng_permutation_is_a_permutation)
{
    vtr_rng r;
    vtr_rng_init(&r, 9, 0);
    int64_t perm[100];
    int seen[100] = {0};
    vtr_rng_permutation(&r, perm, 100);
    int moved = 0;
    for (int i = 0; i < 100; i++) {
        CHECK(perm[i] >= 0 && perm[i] < 100);
        seen[perm[i]]++;
        moved += perm[i] != i;
    }
    for (int i = 0; i < 100; i++)
        CHECK(seen[i] == 1);
    CHECK(moved > 80);
}
