/* The set prediction module of set embeddings (paper 002: Kim, Kim and Kwak, "Improving
 * Cross-Modal Retrieval with Set of Diverse Embeddings", CVPR 2023, section 3.2; REFERENCE.md
 * "Other seeds"). Conventions: lib/nn.h.
 *
 * It turns a padded batch of local features inp (B,N,C) with lengths (B) and one global
 * feature per item glob (B,D) into a set of K unit vectors per item, set (B,K,D):
 *
 *   x      = LN_in(inp)                         (B,N,C)   real rows only
 *   k, v   = x Wkᵀ, x Wvᵀ                        (B,N,Dh)  the same for every iteration
 *   E_0    = slots                               (K,D)     learnable, shared by all items
 *   for t = 1 .. T (one aggregation block, its weights shared by the T iterations):
 *     q    = LN_q(E_{t-1}) Wqᵀ                   (B,K,Dh)
 *     M    = k qᵀ / sqrt(Dh)                     (B,N,K)
 *     A    = softmax of M over the K slots       (B,N,K)   slots compete for each input
 *     Â    = A / (sum over the real inputs n of A[n,k] + 1e-7), per slot k
 *     E'   = E_{t-1} + drop(Âᵀ v Woᵀ)            (B,K,D)   the weighted mean of the values
 *     h    = drop(GELU(LN_m(E') W1ᵀ + b1))       (B,K,H)
 *     E_t  = E' + h W2ᵀ + b2                     (B,K,D)
 *   slots_n = l2norm(LN_out(E_T))                (B,K,D)   (the diversity regulariser's input)
 *   set     = l2norm(LN_out(E_T) + LN_g(glob))   (B,K,D)   paper eq. 5, then unit length
 *
 * Padded inputs (n >= lengths[b]) take no part: their A is 0, they get zero gradient. LN is
 * LayerNorm with eps 1e-5 (lib/norm.h), GELU the erf form, l2norm x / (|x| + 1e-8).
 *
 * Against the paper and the official code (github.com/kdwonn/DivE, agg_block/): single-head
 * attention with the paper's 1/sqrt(Dh) (the code splits Dh into 4 heads of 512); Wo without
 * a bias (the paper's W_o; the code's to_out has one); the pre-norm layout and MLP of the
 * released COCO command (--spm_pre_norm --spm_ff_mult 4 --spm_last_ln --spm_residual_norm,
 * GELU), hidden size H = 4D; padded inputs are left out of the normalisation over inputs
 * (the code's masked softmax over slots gives them 1/K each, so they entered the weighted
 * mean); dropout p (the code's 0.1) on the attention update and the MLP's hidden layer.
 *
 * Parameters, one flat buffer (gradients alike), in this order; vtr_set_prediction_param_name
 * gives each tensor's name, its shape and offset:
 *     slots (K,D)
 *     norm_in.weight (C), norm_in.bias (C)
 *     norm_q.weight (D), norm_q.bias (D)
 *     to_q.weight (Dh,D), to_k.weight (Dh,C), to_v.weight (Dh,C), to_out.weight (D,Dh)
 *     norm_mlp.weight (D), norm_mlp.bias (D)
 *     mlp.0.weight (H,D), mlp.0.bias (H), mlp.1.weight (D,H), mlp.1.bias (D)
 *     norm_out.weight (D), norm_out.bias (D)
 *     norm_global.weight (D), norm_global.bias (D)
 *
 * norm_q.bias's gradient is 0 in exact arithmetic: it moves every query by the same vector,
 * so each input's scores over the slots by the same amount, which the softmax over the slots
 * ignores. It is there, and receives rounding noise, because the reference has it.
 *
 * Dropout (training only, p > 0): site 2(t-1) is the attention update of iteration t, site
 * 2(t-1)+1 its MLP hidden layer; each draws lib/activation.h's dropout from (seed, stream +
 * site), element i of the site's (B,K,D) or (B,K,H) buffer from draw i, or, when the B items
 * are items first .. first+B-1 of a larger batch (a data-parallel rank's share), from the
 * draw of that element in the larger batch's buffer. p = 0 draws nothing.
 */
#ifndef VTR_SET_PREDICTION_H
#define VTR_SET_PREDICTION_H

#include <stddef.h>
#include <stdint.h>

#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_SET_PREDICTION_TENSORS 19

typedef struct vtr_set_prediction_config {
    int C;       /* local feature size */
    int D;       /* embedding size (1024) */
    int K;       /* set size (4) */
    int T;       /* iterations of the aggregation block (4) */
    int Dh;      /* attention size (paper: 2048 on region and frame features, 1024 on
                    convolutional feature maps) */
    int H;       /* MLP hidden size (4 D) */
} vtr_set_prediction_config;

/* Tensor i (0 .. VTR_SET_PREDICTION_TENSORS-1) of the parameter buffer: its name (above),
 * its shape (rank 1 or 2: shape[1] = 0 for rank 1) and its offset in floats. */
const char *vtr_set_prediction_param_name(const vtr_set_prediction_config *c, int i,
                                          int shape[2], size_t *offset);

/* Floats in the parameter buffer. */
size_t vtr_set_prediction_param_count(const vtr_set_prediction_config *c);

/* Bytes of the workspace that forward fills and backward reads, for B items of N inputs. */
size_t vtr_set_prediction_workspace_size(const vtr_set_prediction_config *c, int B, int N);

/* Bytes of backward's scratch. */
size_t vtr_set_prediction_scratch_size(const vtr_set_prediction_config *c, int B, int N);

/* set (B,K,D), slots_n (B,K,D); workspace; inp (B,N,C) padded, lengths (B) in 1 .. N,
 * glob (B,D); params; dropout p in [0, 1) from (seed, stream) at item first (see the top;
 * 0 for a whole batch). */
void vtr_set_prediction_forward(float *set, float *slots_n, void *workspace, const float *inp,
                                const int *lengths, const float *glob, const float *params,
                                const vtr_set_prediction_config *c, int B, int N, float p,
                                uint64_t seed, uint64_t stream, int64_t first);

/* dinp (B,N,C) or NULL, dglob (B,D) or NULL, dparams (the parameter count), accumulated;
 * scratch; dset (B,K,D), dslots_n (B,K,D) or NULL (no diversity term); the forward's
 * workspace, inputs and options. */
void vtr_set_prediction_backward(float *dinp, float *dglob, float *dparams, void *scratch,
                                 const float *dset, const float *dslots_n, const void *workspace,
                                 const float *inp, const int *lengths, const float *glob,
                                 const float *params, const vtr_set_prediction_config *c, int B,
                                 int N, float p, uint64_t seed, uint64_t stream, int64_t first);

/* E_t (B,K,D), the slots after iteration t (1 .. T) of the forward that filled workspace
 * (for tests and inspection: the layout of the workspace is the .c file's). */
const float *vtr_set_prediction_slots_at(const void *workspace, const vtr_set_prediction_config *c,
                                         int B, int N, int t);

/* The matrix-product FLOPs (2 per multiply-add) of one forward (backward: twice that). */
double vtr_set_prediction_flops(const vtr_set_prediction_config *c, int B, long real_inputs);

#ifdef __cplusplus
}
#endif

#endif
