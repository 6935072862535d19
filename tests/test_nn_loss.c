/* The hinge triplet loss: hand-computed values and gradient checks, both negative modes and
 * both reductions. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "match/hinge_loss.h"

TEST(hinge_loss_known_values)
{
    /* rows: visual items, columns: captions */
    const float S[4] = {0.5f, 0.4f, /* item 0: caption 1 violates by 0.2 + 0.4 - 0.5 */
                        0.6f, 0.7f};
    /* row 0: 0.1; row 1: 0.2 + 0.6 - 0.7 = 0.1; col 0: 0.2 + 0.6 - 0.5 = 0.3;
     * col 1: 0.2 + 0.4 - 0.7 < 0 */
    float sum = vtr_hinge_loss_forward(S, 2, 0.2f, VTR_HINGE_ALL_NEGATIVES, VTR_REDUCE_SUM);
    CHECK(fabsf(sum - 0.5f) < 1e-6f);
    float mean = vtr_hinge_loss_forward(S, 2, 0.2f, VTR_HINGE_HARDEST_NEGATIVE, VTR_REDUCE_MEAN);
    CHECK(fabsf(mean - 0.25f) < 1e-6f);
    float dS[4] = {0};
    vtr_hinge_loss_backward(dS, 1.0f, S, 2, 0.2f, VTR_HINGE_ALL_NEGATIVES, VTR_REDUCE_SUM);
    /* S[0,0]: -1 (row 0) -1 (col 0); S[0,1]: +1 (row 0); S[1,0]: +1 (row 1) +1 (col 0);
     * S[1,1]: -1 (row 1) */
    CHECK(dS[0] == -2 && dS[1] == 1 && dS[2] == 2 && dS[3] == -1);
    /* one item: no negatives */
    CHECK(vtr_hinge_loss_forward(S, 1, 0.2f, VTR_HINGE_ALL_NEGATIVES, VTR_REDUCE_SUM) == 0);
}

typedef struct hinge_case {
    float *S;
    int B;
    vtr_hinge_negatives neg;
    vtr_reduction red;
} hinge_case;

static double hinge_loss(void *ctx)
{
    hinge_case *c = ctx;
    return vtr_hinge_loss_forward(c->S, c->B, 0.2f, c->neg, c->red);
}

/* No hinge within 0.01 of its kink and, per row and column, no two negatives within 0.01:
 * a finite-difference step then never crosses a kink or changes the hardest negative. */
static int away_from_kinks(const float *S, int B)
{
    for (int q = 0; q < B; q++)
        for (int dir = 0; dir < 2; dir++) {
            long stride = dir ? B : 1;
            const float *x = dir ? S + q : S + (long)q * B;
            for (int k = 0; k < B; k++) {
                if (k == q)
                    continue;
                if (fabsf(0.2f + x[k * stride] - x[q * stride]) < 0.01f)
                    return 0;
                for (int k2 = 0; k2 < k; k2++)
                    if (k2 != q && fabsf(x[k * stride] - x[k2 * stride]) < 0.01f)
                        return 0;
            }
        }
    return 1;
}

TEST(hinge_loss_gradcheck_all_modes)
{
    enum { B = 5 };
    float S[B * B], dS[B * B];
    vtr_rng rng;
    vtr_rng_init(&rng, 70, 0);
    do
        nn_fill_uniform(S, B * B, -0.6f, 0.6f, &rng);
    while (!away_from_kinks(S, B));
    static const char *names[2][2] = {{"hinge.sum_all", "hinge.mean_all"},
                                      {"hinge.sum_hardest", "hinge.mean_hardest"}};
    for (int neg = 0; neg < 2; neg++)
        for (int red = 0; red < 2; red++) {
            hinge_case c = {S, B, (vtr_hinge_negatives)neg, (vtr_reduction)red};
            memset(dS, 0, sizeof dS);
            vtr_hinge_loss_backward(dS, 1.0f, S, B, 0.2f, c.neg, c.red);
            gradcheck(names[neg][red], hinge_loss, &c, S, dS, B * B, 100);
        }
}
