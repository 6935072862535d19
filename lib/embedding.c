#include "embedding.h"

#include <string.h>

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
    int blocks = (D + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * D > 65536)
    for (int blk = 0; blk < blocks; blk++) {
        int d0 = blk * VTR_COLUMN_BLOCK;
        int nd = D - d0 < VTR_COLUMN_BLOCK ? D - d0 : VTR_COLUMN_BLOCK;
        vtr_embedding_backward_columns(dtable, dout, ids, N, D, d0, nd);
    }
}

void vtr_embedding_forward_padded(float *out, const int *ids, const float *table,
                                  const int *lengths, int B, int L, int D)
{
#pragma omp parallel for schedule(static) if ((long)B * L * D > 65536)
    for (int b = 0; b < B; b++) {
        float *dst = out + (size_t)b * L * D;
        for (int t = 0; t < lengths[b]; t++)
            memcpy(dst + (size_t)t * D, table + (size_t)ids[(size_t)b * L + t] * D,
                   sizeof(float) * (size_t)D);
        memset(dst + (size_t)lengths[b] * D, 0, sizeof(float) * (size_t)(L - lengths[b]) * D);
    }
}

void vtr_embedding_backward_padded(float *dtable, const float *dout, const int *ids,
                                   const int *lengths, int B, int L, int D)
{
    int blocks = (D + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK; /* as vtr_embedding_backward */
#pragma omp parallel for schedule(static) if ((long)B * L * D > 65536)
    for (int blk = 0; blk < blocks; blk++) {
        int d0 = blk * VTR_COLUMN_BLOCK;
        int nd = D - d0 < VTR_COLUMN_BLOCK ? D - d0 : VTR_COLUMN_BLOCK;
        vtr_embedding_backward_padded_columns(dtable, dout, ids, lengths, B, L, D, d0, nd);
    }
}
