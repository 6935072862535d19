/* Embedding lookup (conventions: lib/nn.h). Ids are not checked here: validate token ids
 * from data once with vtr_nn_check_ids. */
#ifndef VTR_EMBEDDING_H
#define VTR_EMBEDDING_H

#include "nn.h"

// ids (N) in [0,V), table (V,D), out (N,D): out[n] = table[ids[n]]
void vtr_embedding_forward(float *out, const int *ids, const float *table, int N, int D);

// dtable (V,D) += dout (N,D) scattered to the rows ids (N); rows accumulate in the order of n
void vtr_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D);

#endif
