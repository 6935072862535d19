#include "hinge_loss.h"

/* B x B work per direction: sequential, in a fixed order (rows, then columns). */

float vtr_hinge_loss_forward(const float *S, int B, float margin, vtr_hinge_negatives negatives,
                             vtr_reduction reduction)
{
    double total = 0.0;
    for (int i = 0; i < B; i++) /* visual query i over captions: row i */
        total += vtr_hinge_query_forward(S + (long)i * B, 1, i, B, margin, negatives);
    for (int j = 0; j < B; j++) /* caption query j over visual items: column j */
        total += vtr_hinge_query_forward(S + j, B, j, B, margin, negatives);
    if (reduction == VTR_REDUCE_MEAN)
        total /= B;
    return (float)total;
}

void vtr_hinge_loss_backward(float *dS, float dloss, const float *S, int B, float margin,
                             vtr_hinge_negatives negatives, vtr_reduction reduction)
{
    float g = reduction == VTR_REDUCE_MEAN ? dloss / (float)B : dloss;
    for (int i = 0; i < B; i++)
        vtr_hinge_query_backward(dS + (long)i * B, 1, g, S + (long)i * B, i, B, margin, negatives);
    for (int j = 0; j < B; j++)
        vtr_hinge_query_backward(dS + j, B, g, S + j, j, B, margin, negatives);
}
