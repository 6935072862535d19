/* One-layer GRU over a padded batch of variable-length sequences, one or two directions
 * (conventions: lib/nn.h).
 *
 * Semantics are PyTorch's nn.GRU (REFERENCE.md), with h0 = 0:
 *     r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
 *     z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
 *     n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
 *     h' = (1 - z) * n + z * h
 * Each item runs over its own real length only, as with pack_padded_sequence: the forward
 * direction reads t = 0 .. len-1, the reverse direction starts at the item's own last real
 * step t = len-1 and ends at 0. Outputs at padded positions are zero.
 *
 * Parameters live in one flat buffer (gradients in one of the same layout), direction 0
 * then direction 1, each in PyTorch state_dict order: weight_ih_l0 (3H,D),
 * weight_hh_l0 (3H,H), bias_ih_l0 (3H), bias_hh_l0 (3H), then the same "_reverse"; the 3H
 * rows are the gates r, z, n in that order.
 *
 * Internally the items run sorted by length (longest first, stable), so the items still
 * running at a step are a prefix and each step is one matrix product.
 */
#ifndef VTR_GRU_H
#define VTR_GRU_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "activation.h"
#include "hostdevice.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the two directions' outputs combine. */
typedef enum vtr_gru_merge {
    VTR_GRU_AVERAGE, /* out (B,T,H) = (forward + reverse) / 2 (VSE∞, HGR, GPO) */
    VTR_GRU_CONCAT,  /* out (B,T,2H) = [forward, reverse] (PyTorch's output) */
} vtr_gru_merge;

/* The four tensors of one direction. */
typedef enum vtr_gru_tensor {
    VTR_GRU_WEIGHT_IH,
    VTR_GRU_WEIGHT_HH,
    VTR_GRU_BIAS_IH,
    VTR_GRU_BIAS_HH,
} vtr_gru_tensor;

/* One hidden unit of one step: x* = W_i* x + b_i*, h* = W_h* h + b_h* (the pre-activations
 * of gates r, z, n). Writes r, z, n and returns h'. */
static VTR_HD float vtr_gru_unit_forward(float xr, float xz, float xn, float hr, float hz, float hn,
                                         float hprev, float *r, float *z, float *n)
{
    *r = vtr_sigmoid(xr + hr);
    *z = vtr_sigmoid(xz + hz);
    *n = vtr_tanh(xn + *r * hn);
    return (hprev - *n) * *z + *n;
}

/* Backward of vtr_gru_unit_forward for the gradient dh of h': writes the gradients of the
 * input pre-activations (dxr, dxz, dxn; those of hr and hz are the same as dxr and dxz)
 * and of hn, and returns the gradient reaching hprev directly (not through W_h*). */
static VTR_HD float vtr_gru_unit_backward(float dh, float r, float z, float n, float hn,
                                          float hprev, float *dxr, float *dxz, float *dxn,
                                          float *dhn)
{
    float dan = dh * (1.0f - z) * vtr_tanh_grad(n);
    *dxn = dan;
    *dhn = dan * r;
    *dxr = dan * hn * vtr_sigmoid_grad(r);
    *dxz = dh * (hprev - n) * vtr_sigmoid_grad(z);
    return dh * z;
}

/* Floats in the parameter buffer of a GRU with input D, hidden H, 1 or 2 directions. */
size_t vtr_gru_param_count(int D, int H, int num_directions);

/* Offset (floats) of a tensor of direction 0 or 1 in the parameter buffer. */
size_t vtr_gru_param_offset(int D, int H, int direction, vtr_gru_tensor tensor);

/* PyTorch's name of a tensor: "weight_ih_l0", ..., "bias_hh_l0_reverse". */
const char *vtr_gru_param_name(int direction, vtr_gru_tensor tensor);

/* The floating-point operations of the matrix products of one forward and backward
 * (2 per multiply-add; for a FLOP floor) over ntok real positions of B sequences, per
 * direction: the input product x · W_ihᵀ and dW_ih over every real position, the hidden
 * products (h · W_hhᵀ, dh += dg · W_hh, dW_hh) over the positions after each sequence's
 * first (whose state is the zero h0), and with dinp the input gradient. */
double vtr_gru_train_flops(double ntok, double B, double D, double H, int num_directions,
                           bool dinp);

/* Bytes of the workspace that forward fills and backward reads. */
size_t vtr_gru_workspace_size(int B, int T, int D, int H, int num_directions);

/* Bytes of backward's scratch. */
size_t vtr_gru_scratch_size(int B, int T, int D, int H, int num_directions);

// inp (B,T,D), lengths (B), params (vtr_gru_param_count), out (B,T,OH) with OH = H, or 2H
// when num_directions == 2 and merge == VTR_GRU_CONCAT; workspace (vtr_gru_workspace_size)
// keeps the gates and states for backward. Zero at padded positions of out.
void vtr_gru_forward(float *out, void *workspace, const float *inp, const int *lengths,
                     const float *params, int B, int T, int D, int H, int num_directions,
                     vtr_gru_merge merge);

// dinp (B,T,D) or NULL, dparams (vtr_gru_param_count), scratch (vtr_gru_scratch_size),
// dout (B,T,OH); the rest as given to vtr_gru_forward, workspace as it left it.
// Padded positions of dout are ignored; padded rows of dinp receive nothing.
void vtr_gru_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                      const float *inp, const int *lengths, const float *params,
                      const void *workspace, int B, int T, int D, int H, int num_directions,
                      vtr_gru_merge merge);

#ifdef __cplusplus
}
#endif

#endif
