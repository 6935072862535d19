/* Coefficient generators for GPO-style pooling: the paper's design (sin/cos encoding +
 * BiGRU, aggregate/gpo.h) and the alternatives the VSE∞ appendix (B.3, Table 10) compares
 * it with. Conventions of the ops: lib/nn.h.
 *
 * Every generator maps a set size n to n scores, one per rank k = 0 .. n-1 of the sorted
 * set; the pooling coefficients are softmax(scores / 0.1) over the n ranks and the pooled
 * output is out[d] = sum_k w_k * sorted_k[d], every dimension sorted descending on its own.
 * The temperature is GPO's (VTR_GPO_TEMPERATURE) for every generator, so they differ only
 * in how the scores are made:
 *
 *   sincos-bigru  the paper's: pe(k) (d_pe sin/cos) -> BiGRU (directions averaged) ->
 *                 Linear(hidden -> 1, no bias). Runs as the GPO op itself.
 *   interp        a learned vector v of P points; the score of rank k of n is v linearly
 *                 interpolated at x = k (P-1)/(n-1) (FSPool's way of handling any n).
 *   sincos-mlp    pe(k) -> Linear(d_pe -> hidden) -> ReLU -> Linear(hidden -> 1, no
 *                 bias): each rank scored on its own, unaware of n.
 *   index-bigru   a learned embedding row per rank k (max_len rows of d_pe) -> BiGRU ->
 *                 Linear(hidden -> 1, no bias): GPO with the encodings learned instead of
 *                 sin/cos.
 * The Linear layers that feed a softmax have no bias, as GPO's: a shift of every score
 * changes nothing.
 */
#ifndef VTR_GPO_GENERATORS_H
#define VTR_GPO_GENERATORS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/nn.h"
#include "lib/params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ops ------------------------------------------------------------------------------- */

// Sorted weighted pooling with given coefficients (GPO's steps 4-5): every dimension of
// each set sorted descending (ties in position order), out[b,d] = sum_k weights[b,k] *
// sorted[b,k,d] over k < lengths[b]. inp (B,T,D), weights (B,T), lengths (B), out (B,D);
// saves sort_index (B,T,D): the element of rank k per dimension, -1 past the length.
void vtr_sorted_pool_forward(float *out, int *sort_index, const float *inp, const float *weights,
                             const int *lengths, int B, int T, int D);

// dinp (B,T,D) or NULL, dweights (B,T) (padded positions untouched), dout (B,D); inp,
// weights, sort_index and lengths as given to and left by the forward
void vtr_sorted_pool_backward(float *dinp, float *dweights, const float *dout, const float *inp,
                              const float *weights, const int *sort_index, const int *lengths,
                              int B, int T, int D);

// Interpolated scores: v (P), P >= 2; scores (B,T): for k < n = lengths[b],
// x = k (P-1)/(n-1) (x = 0 when n = 1), i = min(floor(x), P-2), f = x - i,
// scores[b,k] = (1 - f) v[i] + f v[i+1]; 0 at padded positions.
void vtr_interp_scores_forward(float *scores, const float *v, const int *lengths, int B, int T,
                               int P);

// dv (P) += the gradient from dscores (B,T) (padded positions ignored)
void vtr_interp_scores_backward(float *dv, const float *dscores, const int *lengths, int B, int T,
                                int P);

/* Floats of the sin/cos + MLP scorer's parameters: W1 (hidden, d_pe), b1 (hidden),
 * w2 (hidden) [Linear weight (1, hidden)], in that order. */
size_t vtr_pe_mlp_param_count(int d_pe, int hidden);

/* Bytes of its workspace (forward writes, backward reads) and backward's scratch. */
size_t vtr_pe_mlp_workspace_size(int T, int d_pe, int hidden);
size_t vtr_pe_mlp_scratch_size(int T, int hidden);

// Sin/cos + MLP scores: s[k] = w2 · relu(W1 pe(k) + b1) for k < T (pe: aggregate/gpo.h's
// encoding); scores (B,T) = s[k] at k < lengths[b], 0 at padded positions. lengths (B),
// params (vtr_pe_mlp_param_count), workspace (vtr_pe_mlp_workspace_size).
void vtr_pe_mlp_scores_forward(float *scores, void *workspace, const int *lengths,
                               const float *params, int B, int T, int d_pe, int hidden);

// dparams (vtr_pe_mlp_param_count) += the gradient from dscores (B,T) (padded positions
// ignored); scratch (vtr_pe_mlp_scratch_size); the rest as given to and left by the forward
void vtr_pe_mlp_scores_backward(float *dparams, void *scratch, const float *dscores,
                                const int *lengths, const float *params, const void *workspace,
                                int B, int T, int d_pe, int hidden);

/* Floats of the index + BiGRU scorer's parameters: the index table (max_len, d_pe), then
 * the GRU's (lib/gru.h layout, input d_pe, hidden, two directions), then the linear
 * weight (hidden). */
size_t vtr_index_bigru_param_count(int max_len, int d_pe, int hidden);

/* Offsets (floats) of the GRU's block and of the linear weight in those parameters. */
size_t vtr_index_bigru_gru_offset(int max_len, int d_pe);
size_t vtr_index_bigru_linear_offset(int max_len, int d_pe, int hidden);

size_t vtr_index_bigru_workspace_size(int B, int T, int d_pe, int hidden);
size_t vtr_index_bigru_scratch_size(int B, int T, int d_pe, int hidden);

// Index + BiGRU scores: x[b,k] = table[k] for k < lengths[b] (T <= max_len), a BiGRU over
// the real positions (directions averaged), scores (B,T) = Linear(hidden -> 1, no bias),
// 0 at padded positions. params (vtr_index_bigru_param_count), workspace
// (vtr_index_bigru_workspace_size).
void vtr_index_bigru_scores_forward(float *scores, void *workspace, const int *lengths,
                                    const float *params, int B, int T, int max_len, int d_pe,
                                    int hidden);

// dparams += the gradient from dscores (B,T) (padded positions ignored), the table's rows
// included; scratch (vtr_index_bigru_scratch_size); the rest as given to and left by the
// forward
void vtr_index_bigru_scores_backward(float *dparams, void *scratch, const float *dscores,
                                     const int *lengths, const float *params, const void *workspace,
                                     int B, int T, int max_len, int d_pe, int hidden);

/* ---- generators: parameters, buffers, forward and backward in one value ------------------ */

typedef enum vtr_gpo_generator_kind {
    VTR_GPO_GEN_SINCOS_BIGRU, /* the paper's design (the GPO op) */
    VTR_GPO_GEN_INTERP,
    VTR_GPO_GEN_SINCOS_MLP,
    VTR_GPO_GEN_INDEX_BIGRU,
} vtr_gpo_generator_kind;

#define VTR_GPO_GEN_COUNT 4

/* "sincos-bigru", "interp", "sincos-mlp", "index-bigru"; the parser is the inverse and
 * fails with VTR_ERR_INVALID naming the accepted names. */
const char *vtr_gpo_generator_name(vtr_gpo_generator_kind kind);
vtr_status vtr_gpo_generator_parse(const char *name, vtr_gpo_generator_kind *out, vtr_error *err);

typedef struct vtr_gpo_generator_config {
    vtr_gpo_generator_kind kind;
    int d_pe;          /* encoding size: sin/cos (sincos-*) or index embedding [32] */
    int hidden;        /* GRU or MLP hidden size [32] */
    int interp_points; /* interp: points of the learned vector [21: FSPool's 20 pieces] */
    int max_len;       /* index-bigru: rows of the index table, the longest set it scores */
} vtr_gpo_generator_config;

/* The sizes above for kind, max_len 128. */
vtr_gpo_generator_config vtr_gpo_generator_defaults(vtr_gpo_generator_kind kind);

typedef struct vtr_gpo_generator {
    vtr_gpo_generator_config cfg;
    vtr_param_set params; /* trainable tensors under PyTorch-style names */
    int max_B, max_T, max_D;
    /* the last forward's state, read by backward */
    int B, T, D;
    float *weights;            /* (max_B, max_T): the last forward's coefficients */
    float *scores;             /* (max_B, max_T) */
    int *sort_index;           /* (max_B, max_T, max_D) */
    float *dweights, *dscores; /* (max_B, max_T) */
    void *workspace, *scratch;
    int *lengths; /* (max_B): a copy of the last forward's lengths */
    float *probe; /* (max_T) zeros: the set vtr_gpo_generator_coefficients pools */
} vtr_gpo_generator;

/* Makes a generator for batches of up to max_B sets of up to max_T elements of up to
 * max_D dimensions (index-bigru: max_T <= cfg->max_len), parameters initialized as
 * PyTorch initializes the layers (GRU and Linear uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * the index table N(0,1) as nn.Embedding) from Philox (seed, stream 1000 + kind). The
 * interp vector starts uniform(-0.1, 0.1), scores as small as the other generators'
 * first ones (FSPool's N(0,1) would, at temperature 0.1, start from nearly one-hot
 * coefficients).
 * Fails with VTR_ERR_INVALID for sizes out of range, VTR_ERR_NOMEM; on failure *g is
 * left freeable (zeroed). */
vtr_status vtr_gpo_generator_init(vtr_gpo_generator *g, const vtr_gpo_generator_config *cfg,
                                  int max_B, int max_T, int max_D, uint64_t seed, vtr_error *err);

/* Frees everything; leaves g zeroed. Safe on a zeroed or freed value. */
void vtr_gpo_generator_free(vtr_gpo_generator *g);

/* Pools a padded batch: inp (B,T,D), lengths (B), out (B,D); the coefficients stay in
 * g->weights (B,T) (row stride T) until the next forward. Fails with VTR_ERR_INVALID when
 * B, T or D exceed the capacity or a length is outside 1 .. T. */
vtr_status vtr_gpo_generator_forward(vtr_gpo_generator *g, float *out, const float *inp,
                                     const int *lengths, int B, int T, int D, vtr_error *err);

/* Accumulates the gradient of the last forward's output, dout (B,D), into g->params.grad;
 * inp the same as given to that forward. */
void vtr_gpo_generator_backward(vtr_gpo_generator *g, const float *dout, const float *inp);

/* The coefficients the generator gives a set of n elements, written to w (n) (they depend
 * on n only, not on the features). Runs a forward (replacing the last one's state). Fails
 * with VTR_ERR_INVALID unless 1 <= n <= max_T. */
vtr_status vtr_gpo_generator_coefficients(vtr_gpo_generator *g, int n, float *w, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
