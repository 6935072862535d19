/* Pooling over the set axis of a padded batch (conventions: lib/nn.h): masked mean, max,
 * k-max, and attention pooling (HGR's global branch). All read only the real elements;
 * padded inputs get zero gradient. Ties (equal values) go to the lower index.
 */
#ifndef VTR_SET_POOLING_H
#define VTR_SET_POOLING_H

#include <stddef.h>

#include "lib/hostdevice.h"
#include "lib/nn.h"
#include "lib/softmax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The order of a descending sort that keeps equal values in position order: true when
 * value a at position ia comes before value b at position ib. */
static VTR_HD int vtr_sorts_before(float a, int ia, float b, int ib)
{
    return a > b || (a == b && ia < ib);
}

/* The columns d0 .. d0+nd-1 (nd <= VTR_COLUMN_BLOCK) of vtr_set_sort_desc below: the rank
 * of each element is the number of elements that sort before it. The CPU runs it per block
 * of columns, the CUDA backend per column. */
static VTR_HD void vtr_set_sort_desc_columns(int *order, const float *x, int len, int D, int k,
                                             int d0, int nd)
{
    for (int r = 0; r < k; r++) /* in range whatever NaNs do to the ranks */
        for (int d = 0; d < nd; d++)
            order[(size_t)r * D + d0 + d] = 0;
    for (int t = 0; t < len; t++) {
        const float *xt = x + (size_t)t * D + d0;
        int rank[VTR_COLUMN_BLOCK] = {0};
        for (int u = 0; u < len; u++) {
            if (u == t)
                continue;
            const float *xu = x + (size_t)u * D + d0;
#ifdef _OPENMP
#pragma omp simd
#endif
            for (int d = 0; d < nd; d++)
                rank[d] += vtr_sorts_before(xu[d], u, xt[d], t);
        }
        for (int d = 0; d < nd; d++)
            if (rank[d] < k)
                order[(size_t)rank[d] * D + d0 + d] = t;
    }
}

/* Mean pooling of dimension d of one set x (len, D): the mean of the len values, summed in
 * double. */
static VTR_HD float vtr_mean_pool_at(const float *x, int len, int D, int d)
{
    double sum = 0.0;
    for (int t = 0; t < len; t++)
        sum += x[(size_t)t * D + d];
    return (float)(sum / len);
}

/* Max pooling of dimension d of one set x (len, D): the element holding the maximum (the
 * first one among equals). */
static VTR_HD int vtr_max_pool_at(const float *x, int len, int D, int d)
{
    int best = 0;
    for (int t = 1; t < len; t++)
        if (x[(size_t)t * D + d] > x[(size_t)best * D + d])
            best = t;
    return best;
}

/* K-max pooling of dimension d of one set x (len, D) whose index (K, D) holds the k =
 * min(K, len) largest elements in ranks 0 .. k-1 (vtr_set_sort_desc): sets the ranks k ..
 * K-1 to -1 and returns the mean of the k values, summed in double. */
static VTR_HD float vtr_kmax_pool_at(int *index, const float *x, int k, int K, int D, int d)
{
    double sum = 0.0;
    for (int j = 0; j < k; j++)
        sum += x[(size_t)index[(size_t)j * D + d] * D + d];
    for (int j = k; j < K; j++)
        index[(size_t)j * D + d] = -1;
    return (float)(sum / k);
}

/* K-max pooling backward of dimension d of one set: dx (len, D) += dout / k at the k chosen
 * elements of index (K, D). */
static VTR_HD void vtr_kmax_pool_backward_at(float *dx, float dout, const int *index, int k, int D,
                                             int d)
{
    float g = dout / (float)k;
    for (int j = 0; j < k; j++)
        dx[(size_t)index[(size_t)j * D + d] * D + d] += g;
}

/* dot product of two rows of D floats, summed in float in order */
static VTR_HD float vtr_dot(const float *a, const float *b, int D)
{
    float s = 0.0f;
    for (int d = 0; d < D; d++)
        s += a[d] * b[d];
    return s;
}

/* Attention pooling weights of one set x (len, D) padded to T: w (T) = softmax over the
 * real elements of x[t] · score_weight + score_bias, zero at padded positions. */
static VTR_HD void vtr_attention_pool_weights_row(float *w, const float *x,
                                                  const float *score_weight, float score_bias,
                                                  int len, int T, int D)
{
    for (int t = 0; t < len; t++)
        w[t] = vtr_dot(x + (size_t)t * D, score_weight, D) + score_bias;
    vtr_masked_softmax_row_forward(w, w, len, T, 1.0f);
}

/* y[d] = sum_t w[t] x[t,d] over the len elements of a set x (len, D), for d0 <= d < d1,
 * summed in float in the order of t. */
static VTR_HD void vtr_weighted_sum_columns(float *y, const float *x, const float *w, int len,
                                            int D, int d0, int d1)
{
    for (int d = d0; d < d1; d++)
        y[d] = 0.0f;
    for (int t = 0; t < len; t++)
        for (int d = d0; d < d1; d++)
            y[d] += w[t] * x[(size_t)t * D + d];
}

/* Gradient of the attention score of one element: its weight w, dot = dout · x of that
 * element, dsum = sum over the set of w[t] (dout · x[t]). */
static VTR_HD float vtr_attention_dscore(float w, float dot, float dsum)
{
    return w * (dot - dsum);
}

/* Per-dimension descending sort of one set x (len, D) (rows of D floats), as the ranks
 * that vtr_sorts_before defines: order (k, D) receives order[r*D + d] = the element of
 * rank r in dimension d, for r < k <= len. Short sets (up to 64 elements: frames,
 * regions, words of a caption) count ranks, O(len^2 D) compares vectorized over d; longer
 * ones sort each dimension by comparison, O(D len log len) (a 24,000-word text). The
 * order is the same either way; NaN values give an arbitrary (in-range) order. Used by
 * k-max pooling, GPO and ADPOOL. The CUDA backend counts ranks per column. */
void vtr_set_sort_desc(int *order, const float *x, int len, int D, int k);

// inp (B,T,D), lengths (B), out (B,D) = mean over the real elements
void vtr_mean_pool_forward(float *out, const float *inp, const int *lengths, int B, int T, int D);
// dinp (B,T,D), dout (B,D), lengths (B)
void vtr_mean_pool_backward(float *dinp, const float *dout, const int *lengths, int B, int T,
                            int D);

// inp (B,T,D), lengths (B), out (B,D) = max over the real elements per dimension;
// saves argmax (B,D), the element each maximum came from
void vtr_max_pool_forward(float *out, int *argmax, const float *inp, const int *lengths, int B,
                          int T, int D);
// dinp (B,T,D), dout (B,D), argmax (B,D) as saved by the forward
void vtr_max_pool_backward(float *dinp, const float *dout, const int *argmax, int B, int T, int D);

// K-max pooling: inp (B,T,D), lengths (B), out (B,D) = mean of the min(K, len) largest
// real values per dimension; saves index (B,K,D), the elements chosen, largest first
// (-1 past min(K, len))
void vtr_kmax_pool_forward(float *out, int *index, const float *inp, const int *lengths, int B,
                           int T, int D, int K);
// dinp (B,T,D), dout (B,D), index (B,K,D) as saved by the forward, lengths (B)
void vtr_kmax_pool_backward(float *dinp, const float *dout, const int *index, const int *lengths,
                            int B, int T, int D, int K);

// Attention pooling (HGR's global branch): score[b,t] = inp[b,t] · score_weight + score_bias
// (a Linear(D -> 1)), weights = softmax over the real elements (padded masked), out (B,D) =
// sum_t weights[b,t] inp[b,t]. inp (B,T,D), score_weight (D) [Linear weight (1,D)],
// score_bias (1) or NULL, lengths (B); saves weights (B,T), zero at padded positions.
void vtr_attention_pool_forward(float *out, float *weights, const float *inp,
                                const float *score_weight, const float *score_bias,
                                const int *lengths, int B, int T, int D);
// dinp (B,T,D) or NULL, dscore_weight (D), dscore_bias (1) or NULL, dout (B,D),
// inp (B,T,D), weights (B,T) as saved, score_weight (D), lengths (B)
void vtr_attention_pool_backward(float *dinp, float *dscore_weight, float *dscore_bias,
                                 const float *dout, const float *inp, const float *weights,
                                 const float *score_weight, const int *lengths, int B, int T,
                                 int D);

/* The CUDA side (aggregate/set_pooling.cu, through aggregate/cuda_entries.c): the CPU
 * functions' arguments as device buffers, with lib/nn_cuda.h's conventions. */
vtr_status vtr_cuda_mean_pool_forward(float *out, const float *inp, const int *lengths, int B,
                                      int T, int D, vtr_error *err);
vtr_status vtr_cuda_mean_pool_backward(float *dinp, const float *dout, const int *lengths, int B,
                                       int T, int D, vtr_error *err);
vtr_status vtr_cuda_max_pool_forward(float *out, int *argmax, const float *inp, const int *lengths,
                                     int B, int T, int D, vtr_error *err);
vtr_status vtr_cuda_max_pool_backward(float *dinp, const float *dout, const int *argmax, int B,
                                      int T, int D, vtr_error *err);
vtr_status vtr_cuda_kmax_pool_forward(float *out, int *index, const float *inp, const int *lengths,
                                      int B, int T, int D, int K, vtr_error *err);
vtr_status vtr_cuda_kmax_pool_backward(float *dinp, const float *dout, const int *index,
                                       const int *lengths, int B, int T, int D, int K,
                                       vtr_error *err);
vtr_status vtr_cuda_attention_pool_forward(float *out, float *weights, const float *inp,
                                           const float *score_weight, const float *score_bias,
                                           const int *lengths, int B, int T, int D, vtr_error *err);
vtr_status vtr_cuda_attention_pool_backward(float *dinp, float *dscore_weight, float *dscore_bias,
                                            const float *dout, const float *inp,
                                            const float *weights, const float *score_weight,
                                            const int *lengths, int B, int T, int D,
                                            vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
