/* GPO, the generalized pooling operator of VSE∞ (Chen et al., CVPR 2021), as its reference
 * code computes it (REFERENCE.md), and its size augmentation. Conventions: lib/nn.h.
 *
 * For each item b of a padded batch of sets inp (B,T,D) with lengths (B):
 *   1. positional encodings pe[k] (d_pe) of the positions k = 0 .. len-1 (sin/cos);
 *   2. a bidirectional GRU (d_pe -> hidden) over those len encodings only, the two
 *      directions averaged, (B,T,hidden);
 *   3. a bias-free linear layer hidden -> 1 gives a score per position; scores at padded
 *      positions count as -10000; weights = softmax(scores / 0.1) over the set axis;
 *   4. every feature dimension is sorted independently along the set axis, descending
 *      (padded positions as -10000, so they sort last, then read as 0);
 *   5. out[b,d] = sum_k weights[b,k] * sorted[b,k,d].
 * Backward routes the feature gradients through the sort permutation and the weight
 * gradients through the softmax, the linear layer and the GRU into their parameters.
 * (Real feature values below -10000 would sort differently than in the reference.)
 *
 * Parameters, one flat buffer (gradients alike): the GRU's (lib/gru.h layout, input d_pe,
 * hidden `hidden`, two directions; reference names gpool.gru.weight_ih_l0, ...), then the
 * linear layer's weight (hidden) (reference name gpool.linear.weight, shape (1, hidden)).
 */
#ifndef VTR_GPO_H
#define VTR_GPO_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/hostdevice.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_GPO_D_PE 32          /* positional-encoding size of the reference */
#define VTR_GPO_HIDDEN 32        /* GRU hidden size of the reference */
#define VTR_GPO_TEMPERATURE 0.1f /* softmax temperature of the reference code */
#define VTR_GPO_AUGMENT_P 0.2f   /* size augmentation: drop / hit probability */

/* Element i (0 .. d_pe-1) of the positional encoding of position k (zero-based):
 * sin(k * exp(-2j ln(10000) / d_pe)) for i = 2j, cos of the same for i = 2j + 1,
 * in float32 as the reference computes it. */
static VTR_HD float vtr_gpo_positional_encoding_at(int k, int i, int d_pe)
{
    float div = expf((float)(i & ~1) * (float)(-9.210340371976184 / d_pe)); /* ln 10000 */
    float angle = (float)k * div;
    return (i & 1) ? cosf(angle) : sinf(angle);
}

/* Step 5 for the dimensions d0 <= d < d1 of one set x (len, D): y[d] = sum_k w[k] *
 * x[index[k,d], d], summed in float in the order of k; index (len, D) the element at rank k
 * of each dimension. */
static VTR_HD void vtr_gpo_pool_columns(float *y, const float *x, const float *w, const int *index,
                                        int len, int D, int d0, int d1)
{
    for (int d = d0; d < d1; d++)
        y[d] = 0.0f;
    for (int k = 0; k < len; k++) {
        const int *row = index + (size_t)k * D;
        for (int d = d0; d < d1; d++)
            y[d] += w[k] * x[(size_t)row[d] * D + d];
    }
}

/* Gradient of the weight of rank k of one set: sum_d dout[d] * x[index[k,d], d], summed in
 * float in the order of d. */
static VTR_HD float vtr_gpo_dweight_at(const float *x, const float *dout, const int *index, int D,
                                       int k)
{
    const int *row = index + (size_t)k * D;
    float s = 0.0f;
    for (int d = 0; d < D; d++)
        s += dout[d] * x[(size_t)row[d] * D + d];
    return s;
}

/* Input gradient of one set for the dimensions d0 <= d < d1: dx[index[k,d], d] +=
 * w[k] * dout[d] for k < len. Within a dimension the len ranks are distinct elements. */
static VTR_HD void vtr_gpo_dinp_columns(float *dx, const float *w, const float *dout,
                                        const int *index, int len, int D, int d0, int d1)
{
    for (int k = 0; k < len; k++) {
        const int *row = index + (size_t)k * D;
        for (int d = d0; d < d1; d++)
            dx[(size_t)row[d] * D + d] += w[k] * dout[d];
    }
}

/* Floats in GPO's parameter buffer. */
size_t vtr_gpo_param_count(int d_pe, int hidden);

/* Offset (floats) of the linear layer's weight in it; the GRU's parameters start at 0. */
size_t vtr_gpo_linear_offset(int d_pe, int hidden);

/* Bytes of the workspace that forward fills and backward reads. */
size_t vtr_gpo_workspace_size(int B, int T, int D, int d_pe, int hidden);

/* Bytes of backward's scratch. */
size_t vtr_gpo_scratch_size(int B, int T, int D, int d_pe, int hidden);

// pe (T, d_pe): the encodings of positions 0 .. T-1
void vtr_gpo_positional_encoding(float *pe, int T, int d_pe);

// inp (B,T,D), lengths (B), params (vtr_gpo_param_count), out (B,D); saves weights (B,T),
// the pooling coefficients (zero at padded positions), and the workspace
// (vtr_gpo_workspace_size) for backward
void vtr_gpo_forward(float *out, float *weights, void *workspace, const float *inp,
                     const int *lengths, const float *params, int B, int T, int D, int d_pe,
                     int hidden);

// dinp (B,T,D) or NULL, dparams (vtr_gpo_param_count), scratch (vtr_gpo_scratch_size),
// dout (B,D); the rest as given to and left by vtr_gpo_forward
void vtr_gpo_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                      const float *inp, const float *weights, const int *lengths,
                      const float *params, const void *workspace, int B, int T, int D, int d_pe,
                      int hidden);

/* Size augmentation of a set of n elements (frames, regions): element i is dropped when
 * vtr_philox_uniform_at(seed, stream, i) < p (the reference keeps rand > 0.2). Writes the
 * indices of the kept elements, in order, to keep (n) and returns their count; when every
 * element would be dropped, keeps them all. Use one stream per (epoch, item). */
int vtr_gpo_augment_set(int *keep, int n, float p, uint64_t seed, uint64_t stream);

/* Size augmentation of a caption of n token ids (with <start> and <end>): token i is hit
 * when u = vtr_philox_uniform_at(seed, stream, 2i) < p; then, as in the reference, with
 * v = u / p: v < 0.5 -> mask_id, v < 0.6 -> a uniformly random id in [0, vocab_size)
 * (from draw 2i+1), else the token is deleted. Writes the new ids to out (n) and returns
 * the new length; when every token would be deleted, returns the caption unchanged. */
int vtr_gpo_augment_caption(int *out, const int *ids, int n, int vocab_size, int mask_id, float p,
                            uint64_t seed, uint64_t stream);

/* The CUDA side (aggregate/gpo.cu, through aggregate/cuda_entries.c): the CPU functions'
 * arguments as device buffers, with lib/nn_cuda.h's conventions; workspace and scratch of
 * the CPU's sizes, as for the GRU. */
vtr_status vtr_cuda_gpo_forward(float *out, float *weights, void *workspace, const float *inp,
                                const int *lengths, const float *params, int B, int T, int D,
                                int d_pe, int hidden, vtr_error *err);
vtr_status vtr_cuda_gpo_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                                 const float *inp, const float *weights, const int *lengths,
                                 const float *params, const void *workspace, int B, int T, int D,
                                 int d_pe, int hidden, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
