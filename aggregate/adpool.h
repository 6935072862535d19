/* ADPOOL, the adaptive pooling of "VSE+2AD" (paper 003, section 3.2; REFERENCE.md "Other
 * seeds"), as the paper's equations 3-5 define it. Conventions: lib/nn.h.
 *
 * For each item b of a padded batch of sets inp (B,T,D) with lengths (B), over its n =
 * lengths[b] real elements x_1 .. x_n (rows of D):
 *   token level (eq. 3): every dimension is sorted independently along the set axis,
 *     descending, giving the rows u_1 .. u_n (u_k holds the k-th largest value of each
 *     dimension); theta = softmax over k of u_k · w_tok; tok = sum_k theta_k u_k.
 *     This is attention pooling (aggregate/set_pooling.h, a bias-free scorer) over the sorted
 *     rows: a learned weight per rank, so mean pooling, max pooling and K-max pooling
 *     are particular weightings.
 *   embedding level (eq. 4): per dimension d, delta_id = softmax over i of x_id;
 *     emb_d = sum_i delta_id x_id (a "soft" max pooling; no parameters, temperature 1).
 *   balance (eq. 5): (omega_1, omega_2) = softmax(tok · w_bal, emb · w_bal);
 *     out = omega_1 tok + omega_2 emb.
 * Padded elements take no part (the softmaxes run over the n real elements only).
 *
 * Choices where the paper and its released code differ (the paper is followed; the code
 * is github.com/96-Zachary/vse_2ad, modules/adcap.py): the code scores the sorted rows
 * with a Linear(D, D) and a ReLU, i.e. a softmax per rank AND per dimension, where
 * equation 3 scores each rank with one weight vector (W_tok in R^{d x 1}, one theta_m
 * per sorted row, figure 3's [0.1, 0.6, 0.3, 0.0]); and the code's Linear layers carry
 * biases, which cancel in these softmaxes anyway (a softmax is shift-invariant), so
 * there are none here.
 *
 * Parameters, one flat buffer (gradients alike): w_tok (D) then w_bal (D), each a
 * bias-free Linear(D -> 1) weight of shape (1, D) (names <side>.adpool.token.weight and
 * <side>.adpool.balance.weight in match/vse_model.h).
 */
#ifndef VTR_ADPOOL_H
#define VTR_ADPOOL_H

#include <stddef.h>

#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Floats in ADPOOL's parameter buffer: 2 D. */
size_t vtr_adpool_param_count(int D);

/* Offset (floats) of w_bal in it; w_tok starts at 0. */
size_t vtr_adpool_balance_offset(int D);

/* Bytes of the workspace that forward fills and backward reads. */
size_t vtr_adpool_workspace_size(int B, int T, int D);

/* Bytes of backward's scratch. */
size_t vtr_adpool_scratch_size(int B, int T, int D);

// inp (B,T,D), lengths (B), params (vtr_adpool_param_count), out (B,D); saves theta (B,T),
// the token-level weights of the ranks (zero past len), omega (B,2), the balance weights
// (token level, embedding level), and the workspace (vtr_adpool_workspace_size)
void vtr_adpool_forward(float *out, float *theta, float *omega, void *workspace, const float *inp,
                        const int *lengths, const float *params, int B, int T, int D);

// dinp (B,T,D) or NULL, dparams (vtr_adpool_param_count), scratch (vtr_adpool_scratch_size),
// dout (B,D); the rest as given to and left by vtr_adpool_forward
void vtr_adpool_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                         const float *inp, const float *theta, const float *omega,
                         const int *lengths, const float *params, const void *workspace, int B,
                         int T, int D);

#ifdef __cplusplus
}
#endif

#endif
