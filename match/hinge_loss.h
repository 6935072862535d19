/* Hinge triplet loss over a similarity matrix (conventions: lib/nn.h), VSE++ / VSE∞ /
 * HGR style.
 *
 * S (B,B): S[i,j] = similarity of visual item i and caption j; positives on the diagonal.
 * Both directions: for visual query i, cost(i,j) = max(0, margin + S[i,j] - S[i,i]) over
 * captions j != i; for caption query j, cost(i,j) = max(0, margin + S[i,j] - S[j,j]) over
 * items i != j. VTR_HINGE_ALL_NEGATIVES sums the costs over every negative ("VSE0", the
 * VSE∞ first-epoch warm-up); VTR_HINGE_HARDEST_NEGATIVE keeps each query's largest cost
 * ("max violation", VSE++; the hardest negative is the first j with the largest S). The
 * per-query terms of both directions are then summed (VTR_REDUCE_SUM) or summed and
 * divided by B (VTR_REDUCE_MEAN).
 */
#ifndef VTR_HINGE_LOSS_H
#define VTR_HINGE_LOSS_H

#include "lib/hostdevice.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_HINGE_MARGIN 0.2f

typedef enum vtr_hinge_negatives {
    VTR_HINGE_ALL_NEGATIVES,    /* sum over all negatives, "VSE0" */
    VTR_HINGE_HARDEST_NEGATIVE, /* hardest negative only, "max violation" */
} vtr_hinge_negatives;

/* One query's loss: its scores are x[k * stride], k < B, the positive at k = q (a row of S
 * with stride 1, or a column with stride B). */
static VTR_HD float vtr_hinge_query_forward(const float *x, long stride, int q, int B, float margin,
                                            vtr_hinge_negatives negatives)
{
    float pos = x[(long)q * stride], sum = 0.0f, worst = 0.0f;
    for (int k = 0; k < B; k++) {
        if (k == q)
            continue;
        float cost = margin + x[(long)k * stride] - pos;
        cost = cost > 0.0f ? cost : 0.0f;
        sum += cost;
        worst = cost > worst ? cost : worst;
    }
    return negatives == VTR_HINGE_HARDEST_NEGATIVE ? worst : sum;
}

/* Its gradient: dx[k * stride] += g * d(loss)/d(x[k * stride]). A cost of 0 (inactive
 * hinge) passes no gradient. */
static VTR_HD void vtr_hinge_query_backward(float *dx, long stride, float g, const float *x, int q,
                                            int B, float margin, vtr_hinge_negatives negatives)
{
    float pos = x[(long)q * stride];
    if (negatives == VTR_HINGE_HARDEST_NEGATIVE) {
        int hardest = -1;
        for (int k = 0; k < B; k++)
            if (k != q && (hardest < 0 || x[(long)k * stride] > x[(long)hardest * stride]))
                hardest = k;
        if (hardest >= 0 && margin + x[(long)hardest * stride] - pos > 0.0f) {
            dx[(long)hardest * stride] += g;
            dx[(long)q * stride] -= g;
        }
        return;
    }
    float active = 0.0f;
    for (int k = 0; k < B; k++) {
        if (k != q && margin + x[(long)k * stride] - pos > 0.0f) {
            dx[(long)k * stride] += g;
            active += 1.0f;
        }
    }
    dx[(long)q * stride] -= g * active;
}

// S (B,B); returns the loss
float vtr_hinge_loss_forward(const float *S, int B, float margin, vtr_hinge_negatives negatives,
                             vtr_reduction reduction);

// dS (B,B) += dloss * d(loss)/dS; S (B,B) and the options as given to the forward
void vtr_hinge_loss_backward(float *dS, float dloss, const float *S, int B, float margin,
                             vtr_hinge_negatives negatives, vtr_reduction reduction);

/* The CUDA side (match/hinge_loss.cu, through match/cuda_entries.c): the CPU
 * functions' arguments as device buffers, with lib/nn_cuda.h's conventions. The forward
 * writes the loss to *loss, one float of device memory (the CPU function returns it); the
 * backward's dloss is a host value, as on the CPU. */
vtr_status vtr_cuda_hinge_loss_forward(float *loss, const float *S, int B, float margin,
                                       vtr_hinge_negatives negatives, vtr_reduction reduction,
                                       vtr_error *err);
vtr_status vtr_cuda_hinge_loss_backward(float *dS, float dloss, const float *S, int B, float margin,
                                        vtr_hinge_negatives negatives, vtr_reduction reduction,
                                        vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
