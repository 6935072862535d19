#include "adopt_loss.h"

#include <math.h>

/* B x B work per direction: sequential, in a fixed order (rows, then columns), as the
 * hinge loss. */

int vtr_adopt_negatives(const float *S, int B, double *align, double *uniform)
{
    double diag = 0.0, all = 0.0;
    for (int i = 0; i < B; i++) {
        diag += S[(long)i * B + i];
        for (int j = 0; j < B; j++)
            all += exp((double)S[(long)i * B + j]);
    }
    double a = diag / B, u = log(all / ((double)B * B));
    if (align)
        *align = a;
    if (uniform)
        *uniform = u;
    return vtr_adopt_k(a, u, B);
}

float vtr_adopt_loss_forward(const float *S, int B, int K, float tau, bool positive_in_denominator,
                             vtr_reduction reduction)
{
    double total = 0.0;
    for (int i = 0; i < B; i++) /* visual query i over captions: row i */
        total += vtr_adopt_query_forward(S + (long)i * B, 1, i, B, K, tau, positive_in_denominator);
    for (int j = 0; j < B; j++) /* caption query j over visual items: column j */
        total += vtr_adopt_query_forward(S + j, B, j, B, K, tau, positive_in_denominator);
    if (reduction == VTR_REDUCE_MEAN)
        total /= B;
    return (float)total;
}

void vtr_adopt_loss_backward(float *dS, float dloss, const float *S, int B, int K, float tau,
                             bool positive_in_denominator, vtr_reduction reduction)
{
    float g = reduction == VTR_REDUCE_MEAN ? dloss / (float)B : dloss;
    for (int i = 0; i < B; i++)
        vtr_adopt_query_backward(dS + (long)i * B, 1, g, S + (long)i * B, i, B, K, tau,
                                 positive_in_denominator);
    for (int j = 0; j < B; j++)
        vtr_adopt_query_backward(dS + j, B, g, S + j, j, B, K, tau, positive_in_denominator);
}
