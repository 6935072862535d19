#include "embedding.h"

#include <string.h>

#define COLUMN_BLOCK 64

void vtr_embedding_forward(float *out, const int *ids, const float *table, int N, int D)
{
#pragma omp parallel for schedule(static) if ((long)N * D > 65536)
    for (int n = 0; n < N; n++)
        memcpy(out + (size_t)n * D, table + (size_t)ids[n] * D, sizeof(float) * (size_t)D);
}

void vtr_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int D)
{
    /* Threads split the columns, so two rows with the same id never race and every
     * element receives its terms in the order of n whatever the thread count. */
    int blocks = (D + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * D > 65536)
    for (int blk = 0; blk < blocks; blk++) {
        int d0 = blk * COLUMN_BLOCK;
        int nd = D - d0 < COLUMN_BLOCK ? D - d0 : COLUMN_BLOCK;
        for (int n = 0; n < N; n++) {
            float *row = dtable + (size_t)ids[n] * D + d0;
            const float *g = dout + (size_t)n * D + d0;
            for (int d = 0; d < nd; d++)
                row[d] += g[d];
        }
    }
}
