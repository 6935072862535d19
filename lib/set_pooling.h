/* Pooling over the set axis of a padded batch (conventions: lib/nn.h): masked mean, max,
 * k-max, and attention pooling (HGR's global branch). All read only the real elements;
 * padded inputs get zero gradient. Ties (equal values) go to the lower index.
 */
#ifndef VTR_SET_POOLING_H
#define VTR_SET_POOLING_H

#include "hostdevice.h"
#include "nn.h"

/* The order of a descending sort that keeps equal values in position order: true when
 * value a at position ia comes before value b at position ib. */
static VTR_HD int vtr_sorts_before(float a, int ia, float b, int ib)
{
    return a > b || (a == b && ia < ib);
}

/* Per-dimension descending sort of one set x (len, D) (rows of D floats), as the ranks
 * that vtr_sorts_before defines: order (k, D) receives order[r*D + d] = the element of
 * rank r in dimension d, for r < k <= len. O(len^2 D) compares, vectorized over d; sets
 * are short (tens of elements). NaN values give an arbitrary (in-range) order. Used by
 * k-max pooling and GPO. */
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

#endif
