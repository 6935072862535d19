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

// ids (N) in [0,V), table (V,D), out (N,D): out[n] = table[ids[n]]
void vtr_embedding_forward(float *out, const int *ids, const float *table, int N, int D);

// dtable (V,D) += dout (N,D) scattered to the rows ids (N); rows accumulate in the order of n
void vtr_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D);

#ifdef __cplusplus
}
#endif

#endif
