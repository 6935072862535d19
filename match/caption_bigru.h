/* The caption BiGRU of the VSE and HGR text encoders: Embedding output (B,L,W) -> a
 * one-layer bidirectional GRU W -> E over each caption's real tokens, the two directions
 * averaged, (B,L,E) with zeros at padded positions (REFERENCE.md: "BiGRU ... with
 * directions averaged"; PyTorch's GRU over a packed sequence, split and averaged).
 *
 * It runs as two one-direction GRUs of lib/gru.h (each direction's four tensors are a
 * one-direction parameter block): the reverse one reads each caption's real tokens in
 * reverse order, which is what the two-direction op and PyTorch's packed sequence do. A
 * recurrence is a chain of small products (nact x 3H x H) with serial gate math between
 * them; one core per direction, each product single-threaded, runs it faster than both
 * cores on every product of one direction after the other. So when OpenMP offers 2 to 4
 * threads and the BLAS thread count is adjustable (OpenBLAS), the two directions run at
 * the same time on two OpenMP threads, each with single-threaded BLAS (lib/blas_threads.h);
 * otherwise one after the other. That changes the process-wide BLAS thread count for the
 * call's duration (then restores it): no other thread may call BLAS meanwhile.
 *
 * Parameters: lib/gru.h's two-direction flat buffer (input W, hidden E), state_dict order
 * weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, then the same _reverse.
 * Conventions: lib/nn.h (the caller owns every buffer; gradients accumulate).
 */
#ifndef VTR_CAPTION_BIGRU_H
#define VTR_CAPTION_BIGRU_H

#include <stddef.h>

#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The buffers the two directions keep between forward and backward, and backward's
 * scratch, for batches of at most max_batch captions of max_words tokens (Q =
 * max_batch * max_words). The caller allocates them (vtr_caption_bigru_* sizes below). */
typedef struct vtr_caption_bigru {
    float *inp_rev;     /* (Q,W) each caption's inputs in reverse order */
    void *workspace[2]; /* vtr_gru_workspace_size(max_batch, max_words, W, E, 1) bytes each */
    float *out_rev;     /* (Q,E) the reverse direction's output (reverse order); in backward,
                           its output gradient */
    float *dinp_rev;    /* (Q,W) the reverse direction's input gradient (reverse order) */
    void *scratch[2];   /* vtr_gru_scratch_size(max_batch, max_words, W, E, 1) bytes each;
                           scratch[0] may be shared with other ops' backward scratch */
} vtr_caption_bigru;

// inp (B,L,W), lengths (B), params (vtr_gru_param_count(W, E, 2)); out (B,L,E) =
// (forward + reverse) / 2 at real positions, 0 at padded ones; fills g's forward buffers
void vtr_caption_bigru_forward(float *out, vtr_caption_bigru *g, const float *inp,
                               const int *lengths, const float *params, int B, int L, int W, int E);

// dinp (B,L,W) +=, dparams +=; dout (B,L,E), scaled by 1/2 in place (its contents are
// not kept); inp, lengths, params and dims as given to the forward, g as it left it
void vtr_caption_bigru_backward(float *dinp, float *dparams, vtr_caption_bigru *g, float *dout,
                                const float *inp, const int *lengths, const float *params, int B,
                                int L, int W, int E);

#ifdef __cplusplus
}
#endif

#endif
