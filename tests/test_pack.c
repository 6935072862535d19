/* lib/pack.h: the packed rows of a padded batch, and back, against the definition element by
 * element: lengths 0 and T among them, padding that must not be read (NaN) or must be
 * written (zeros over a NaN-filled buffer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/pack.h"
#include "lib/rng.h"

TEST(pack_rows_and_back)
{
    enum { B = 9, T = 7, D = 5 };
    int lengths[B] = {3, 0, 7, 1, 7, 0, 2, 6, 4};
    vtr_rng rng;
    vtr_rng_init(&rng, 12, 0);
    float padded[B * T * D], packed[B * T * D], back[B * T * D];
    for (int i = 0; i < B * T * D; i++)
        padded[i] = vtr_rng_uniform(&rng);
    for (int b = 0; b < B; b++) /* padding: NaN, never to be copied */
        for (int i = lengths[b] * D; i < T * D; i++)
            padded[b * T * D + i] = NAN;
    size_t n = vtr_pack_count(lengths, B);
    CHECK(n == 30);
    memset(packed, 0xff, sizeof packed);
    CHECK(vtr_pack_rows(packed, padded, lengths, B, T, D) == n);
    size_t r = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < lengths[b]; t++, r++)
            CHECK_MSG(memcmp(packed + r * D, padded + (b * T + t) * D, sizeof(float) * D) == 0,
                      "item %d row %d", b, t);
    CHECK(r == n);
    memset(back, 0xff, sizeof back); /* NaN: the padding must be written */
    vtr_unpack_rows(back, packed, lengths, B, T, D);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T * D; i++) {
            float want = i < lengths[b] * D ? padded[b * T * D + i] : 0.0f;
            CHECK_MSG(back[b * T * D + i] == want, "item %d element %d", b, i);
        }
}
