#include "span_pool.h"

#include "lib/embedding.h"

#define PARALLEL_MIN 65536

size_t vtr_role_span_pool_scratch_size(int B, int N, int D)
{
    return sizeof(float) * (size_t)B * N * D;
}

void vtr_role_span_pool_forward(float *out, int *argmax, const float *inp, const uint8_t *masks,
                                const int *roles, const float *role_table, int B, int N, int L,
                                int D)
{
    long rows = (long)B * N;
#pragma omp parallel for schedule(static) if (rows * L * D > PARALLEL_MIN)
    for (long r = 0; r < rows; r++) { /* phrase n of item b, r = b * N + n */
        const float *x = inp + (size_t)(r / N) * L * D;
        const uint8_t *mask = masks + (size_t)r * L;
        const float *role = role_table + (size_t)roles[r] * D;
        int *am = argmax + (size_t)r * D;
        float *y = out + (size_t)r * D;
        for (int d = 0; d < D; d++)
            vtr_role_span_pool_forward_at(y, am, x, mask, role, L, D, d);
    }
}

void vtr_role_span_pool_backward(float *dinp, float *drole_table, void *scratch, const float *dout,
                                 const float *inp, const int *argmax, const int *roles,
                                 const float *role_table, int B, int N, int L, int D)
{
    long rows = (long)B * N;
    int parallel = rows * L * D > PARALLEL_MIN;
    /* d out / d role = the pooled value: scratch (B,N,D) = dout * pooled, then scattered to
     * the role rows by the embedding backward, whose column split keeps the order of rows. */
    float *dpooled_role = scratch;
#pragma omp parallel for schedule(static) if (parallel)
    for (long r = 0; r < rows; r++) {
        const float *x = inp + (size_t)(r / N) * L * D;
        const int *am = argmax + (size_t)r * D;
        const float *dy = dout + (size_t)r * D;
        float *g = dpooled_role + (size_t)r * D;
        for (int d = 0; d < D; d++)
            g[d] = vtr_role_span_pool_drole_at(dy, x, am, D, d);
    }
    vtr_embedding_backward(drole_table, dpooled_role, roles, (int)rows, D);
    if (!dinp)
        return;
#pragma omp parallel for schedule(static) if (parallel)
    for (int b = 0; b < B; b++)     /* the phrases of an item may share words: one thread adds */
        for (int d = 0; d < D; d++) /* all of them, in the order of n */
            vtr_role_span_pool_dinp_at(dinp + (size_t)b * L * D, dout + (size_t)b * N * D,
                                       argmax + (size_t)b * N * D, roles + (size_t)b * N,
                                       role_table, N, D, d);
}
