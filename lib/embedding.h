/* Embedding lookup (conventions: lib/nn.h). Ids are not checked here: validate token ids
 * from data once with vtr_nn_check_ids. */
#ifndef VTR_EMBEDDING_H
#define VTR_EMBEDDING_H

#include "hostdevice.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Columns d0 .. d0+nd-1 of the embedding gradient, nd <= VTR_COLUMN_BLOCK: dtable (V,D) +=
 * dout (N,D) scattered to the rows ids (N), in the order of n. Two rows with the same id
 * meet in one call, never in two concurrent ones. */
static VTR_HD void vtr_embedding_backward_columns(float *dtable, const float *dout, const int *ids,
                                                  int N, int D, int d0, int nd)
{
    for (int n = 0; n < N; n++) {
        float *row = dtable + (size_t)ids[n] * D + d0;
        const float *g = dout + (size_t)n * D + d0;
        for (int d = 0; d < nd; d++)
            row[d] += g[d];
    }
}

/* Columns d0 .. d0+nd-1 of vtr_embedding_backward_padded: item after item, each item's
 * tokens in order. */
static VTR_HD void vtr_embedding_backward_padded_columns(float *dtable, const float *dout,
                                                         const int *ids, const int *lengths, int B,
                                                         int L, int D, int d0, int nd)
{
    for (int b = 0; b < B; b++)
        vtr_embedding_backward_columns(dtable, dout + (size_t)b * L * D, ids + (size_t)b * L,
                                       lengths[b], D, d0, nd);
}

// ids (N) in [0,V), table (V,D), out (N,D): out[n] = table[ids[n]]
void vtr_embedding_forward(float *out, const int *ids, const float *table, int N, int D);

// dtable (V,D) += dout (N,D) scattered to the rows ids (N); rows accumulate in the order of n
void vtr_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D);

// Padded sequences (a batch of captions): ids (B,L), whose row b holds lengths[b] tokens
// then padding (not read); out (B,L,D): out[b,t] = table[ids[b,t]] for t < lengths[b],
// zero after.
void vtr_embedding_forward_padded(float *out, const int *ids, const float *table,
                                  const int *lengths, int B, int L, int D);

// dtable (V,D) += the tokens' rows of dout (B,L,D) (t < lengths[b]) scattered to their ids,
// item after item: vtr_embedding_backward on each item's tokens in turn, bit for bit.
void vtr_embedding_backward_padded(float *dtable, const float *dout, const int *ids,
                                   const int *lengths, int B, int L, int D);

#ifdef __cplusplus
}
#endif

#endif
