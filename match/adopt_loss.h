/* ADOPT, the adaptive objective of "VSE+2AD" (paper 003, section 3.3; REFERENCE.md "Other
 * seeds"): InfoNCE over each query's K hardest in-batch negatives, K set per batch from
 * its alignment and uniformity. Conventions: lib/nn.h; the matrix as in
 * match/hinge_loss.h.
 *
 * S (B,B): S[i,j] = similarity of visual item i and caption j; positives on the diagonal.
 *
 * K (eq. 6), from the batch, with no gradient:
 *     align   = mean_i S[i,i]
 *     uniform = log mean_{i,j} exp(S[i,j])          (all B^2 pairs: "t ~ B, v ~ B")
 *     K = max(1, min(floor(B cos((align + uniform) pi / 4)), B - 1))
 * Early in training (similarities near 0) K is about B - 1, every negative; as positives
 * align K shrinks. vtr_adopt_negatives computes it.
 *
 * Loss: for visual query i, its row; for caption query j, its column. N(q) = the K
 * negatives of query q with the largest similarity (ties to the lower index). Then
 *     loss_q = -S[q,q]/tau + log( [exp(S[q,q]/tau) +] sum_{k in N(q)} exp(S_qk/tau) )
 * summed over the B queries of each direction, divided by B (VTR_REDUCE_MEAN, the paper's
 * 1/|B|) or not (VTR_REDUCE_SUM), and the two directions added (L = Lv2t + Lt2v).
 *
 * Choice: with positive_in_denominator (the default of the config), the positive's term
 * is in the denominator, as in the InfoNCE objective the paper cites (van den Oord et al.;
 * CLIP) and in its released code: a cross-entropy over [positive, K negatives]. Equation
 * 6's denominator, read literally, sums the K negatives only; positive_in_denominator =
 * false computes that (a loss that is no longer bounded below).
 * The released code (github.com/96-Zachary/vse_2ad, losses.py) also differs elsewhere: it
 * raises align + uniform to a power before the cosine, measures uniformity as mean
 * exp(-S) over the negatives, adds the hinge margin to the negative logits, uses a
 * temperature of 0.01 and averages the two directions; the paper's equations are
 * followed here.
 */
#ifndef VTR_ADOPT_LOSS_H
#define VTR_ADOPT_LOSS_H

#include <math.h>
#include <stdbool.h>

#include "aggregate/set_pooling.h"
#include "lib/error.h"
#include "lib/hostdevice.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_ADOPT_TEMPERATURE 0.05f /* appendix B: "the tau used in InfoNCE is 0.05" */

/* The K-th hardest negative of a query (rank K-1 in vtr_sorts_before's order: larger
 * first, ties to the lower index); its scores are x[k * stride], k < B, the positive at
 * k = q, 1 <= K <= B-1. O(B^2). */
static VTR_HD int vtr_adopt_kth_negative(const float *x, long stride, int q, int B, int K)
{
    for (int k = 0; k < B; k++) {
        if (k == q)
            continue;
        int before = 0;
        for (int j = 0; j < B; j++)
            if (j != q && j != k &&
                vtr_sorts_before(x[(long)j * stride], j, x[(long)k * stride], k))
                before++;
        if (before == K - 1)
            return k;
    }
    return q == 0 ? 1 : 0; /* unreachable for 1 <= K <= B-1 (ranks are a permutation) */
}

/* Whether negative k (!= q) is among the K hardest, kth from vtr_adopt_kth_negative. */
static VTR_HD int vtr_adopt_is_hard(const float *x, long stride, int kth, int k)
{
    return k == kth || vtr_sorts_before(x[(long)k * stride], k, x[(long)kth * stride], kth);
}

/* The log of the query's denominator, in units of 1/tau: log([exp(pos/tau) +] sum over the
 * K hardest of exp(x/tau)) = *mx + log(*sum). */
static VTR_HD void vtr_adopt_query_denominator(const float *x, long stride, int q, int B, int kth,
                                               float tau, bool positive_in_denominator, float *mx,
                                               float *sum)
{
    float pos = x[(long)q * stride] / tau, m = positive_in_denominator ? pos : -INFINITY;
    for (int k = 0; k < B; k++)
        if (k != q && vtr_adopt_is_hard(x, stride, kth, k))
            m = fmaxf(m, x[(long)k * stride] / tau);
    float s = positive_in_denominator ? expf(pos - m) : 0.0f;
    for (int k = 0; k < B; k++)
        if (k != q && vtr_adopt_is_hard(x, stride, kth, k))
            s += expf(x[(long)k * stride] / tau - m);
    *mx = m;
    *sum = s;
}

/* One query's loss over its K hardest negatives (see the top of this file). */
static VTR_HD float vtr_adopt_query_forward(const float *x, long stride, int q, int B, int K,
                                            float tau, bool positive_in_denominator)
{
    float mx, sum;
    int kth = vtr_adopt_kth_negative(x, stride, q, B, K);
    vtr_adopt_query_denominator(x, stride, q, B, kth, tau, positive_in_denominator, &mx, &sum);
    return mx + logf(sum) - x[(long)q * stride] / tau;
}

/* Its gradient: dx[k * stride] += g * d(loss)/d(x[k * stride]): the softmax probability
 * of each of the denominator's terms / tau, minus 1 / tau at the positive. */
static VTR_HD void vtr_adopt_query_backward(float *dx, long stride, float g, const float *x, int q,
                                            int B, int K, float tau, bool positive_in_denominator)
{
    float mx, sum;
    int kth = vtr_adopt_kth_negative(x, stride, q, B, K);
    vtr_adopt_query_denominator(x, stride, q, B, kth, tau, positive_in_denominator, &mx, &sum);
    float scale = g / (tau * sum);
    for (int k = 0; k < B; k++)
        if (k != q && vtr_adopt_is_hard(x, stride, kth, k))
            dx[(long)k * stride] += scale * expf(x[(long)k * stride] / tau - mx);
    float pos = x[(long)q * stride] / tau;
    dx[(long)q * stride] += (positive_in_denominator ? scale * expf(pos - mx) : 0.0f) - g / tau;
}

/* K of equation 6 from the batch's two statistics: max(1, min(floor(B cos((align +
 * uniform) pi / 4)), B - 1)); 1 for NaN. */
static VTR_HD int vtr_adopt_k(double align, double uniform, int B)
{
    /* "round(x) is a function that rounds down the value of x" */
    const double quarter_pi = 0.78539816339744830962;
    double k = floor((double)B * cos((align + uniform) * quarter_pi));
    if (!(k >= 1.0)) /* also NaN */
        return 1;
    return k > B - 1 ? B - 1 : (int)k;
}

/* Equation 6 on S (B,B), B >= 2: the number of hardest negatives K, 1 .. B-1. *align and
 * *uniform (may be NULL) receive the two statistics. */
int vtr_adopt_negatives(const float *S, int B, double *align, double *uniform);

// S (B,B), K in 1 .. B-1 (vtr_adopt_negatives, or B-1 for every negative); returns the loss
float vtr_adopt_loss_forward(const float *S, int B, int K, float tau, bool positive_in_denominator,
                             vtr_reduction reduction);

// dS (B,B) += dloss * d(loss)/dS; S (B,B) and the options as given to the forward (K is
// held fixed: it has no gradient)
void vtr_adopt_loss_backward(float *dS, float dloss, const float *S, int B, int K, float tau,
                             bool positive_in_denominator, vtr_reduction reduction);

/* The CUDA side (match/adopt_loss.cu, through match/cuda_entries.c): the CPU functions'
 * arguments as device buffers, with lib/nn_cuda.h's conventions, except that K is one int
 * of device memory (the CPU functions take it by value), so that it never leaves the GPU
 * between the similarity and the loss. vtr_cuda_adopt_negatives writes it: fixed_K when
 * fixed_K > 0, else equation 6 over S as vtr_adopt_negatives computes it (the
 * exponentials summed in double in another fixed order, each row's then the rows', and
 * the GPU's exp: K can differ from the CPU's only where B cos(...) lies within rounding of
 * an integer). The forward writes the loss to *loss, one float of device memory; the
 * backward's dloss is a host value, as on the CPU. The queries' sums run in a fixed order:
 * the same bytes every run. */
vtr_status vtr_cuda_adopt_negatives(int *K, const float *S, int B, int fixed_K, vtr_error *err);
vtr_status vtr_cuda_adopt_loss_forward(float *loss, const float *S, int B, const int *K, float tau,
                                       bool positive_in_denominator, vtr_reduction reduction,
                                       vtr_error *err);
vtr_status vtr_cuda_adopt_loss_backward(float *dS, float dloss, const float *S, int B, const int *K,
                                        float tau, bool positive_in_denominator,
                                        vtr_reduction reduction, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
