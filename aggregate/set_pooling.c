#include "set_pooling.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#define PARALLEL_MIN 65536
/* Sets longer than this are sorted by comparison (O(len log len) per dimension); shorter
 * ones by counting ranks, which vectorizes over the dimensions and wins there. */
#define RANK_SORT_MAX 64

typedef struct sort_key {
    float v;
    int t;
} sort_key;

/* vtr_sorts_before as a total order: a NaN after every number, NaNs by position. */
static int compare_desc(const void *pa, const void *pb)
{
    const sort_key *a = pa, *b = pb;
    if (isnan(a->v) || isnan(b->v)) {
        if (isnan(a->v) != isnan(b->v))
            return isnan(a->v) ? 1 : -1;
    } else if (a->v != b->v) {
        return a->v > b->v ? -1 : 1;
    }
    return (a->t > b->t) - (a->t < b->t);
}

void vtr_set_sort_desc(int *order, const float *x, int len, int D, int k)
{
    sort_key *keys = len > RANK_SORT_MAX ? malloc((size_t)len * sizeof *keys) : NULL;
    if (!keys) { /* a short set, or no memory for the keys: count ranks */
        for (int d0 = 0; d0 < D; d0 += VTR_COLUMN_BLOCK) {
            int nd = D - d0 < VTR_COLUMN_BLOCK ? D - d0 : VTR_COLUMN_BLOCK;
            vtr_set_sort_desc_columns(order, x, len, D, k, d0, nd);
        }
        return;
    }
    for (int d = 0; d < D; d++) {
        for (int t = 0; t < len; t++)
            keys[t] = (sort_key){x[(size_t)t * D + d], t};
        qsort(keys, (size_t)len, sizeof *keys, compare_desc);
        for (int r = 0; r < k; r++)
            order[(size_t)r * D + d] = keys[r].t;
    }
    free(keys);
}

void vtr_mean_pool_forward(float *out, const float *inp, const int *lengths, int B, int T, int D)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        const float *x = inp + (size_t)b * T * D;
        for (int d = 0; d < D; d++)
            out[(size_t)b * D + d] = vtr_mean_pool_at(x, lengths[b], D, d);
    }
}

void vtr_mean_pool_backward(float *dinp, const float *dout, const int *lengths, int B, int T, int D)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        float inv = 1.0f / lengths[b];
        for (int t = 0; t < lengths[b]; t++) {
            float *dx = dinp + ((size_t)b * T + t) * D;
            const float *dy = dout + (size_t)b * D;
            for (int d = 0; d < D; d++)
                dx[d] += dy[d] * inv;
        }
    }
}

void vtr_max_pool_forward(float *out, int *argmax, const float *inp, const int *lengths, int B,
                          int T, int D)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        const float *x = inp + (size_t)b * T * D;
        for (int d = 0; d < D; d++) {
            int best = vtr_max_pool_at(x, lengths[b], D, d);
            argmax[(size_t)b * D + d] = best;
            out[(size_t)b * D + d] = x[(size_t)best * D + d];
        }
    }
}

void vtr_max_pool_backward(float *dinp, const float *dout, const int *argmax, int B, int T, int D)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int d = 0; d < D; d++)
            dinp[((size_t)b * T + argmax[(size_t)b * D + d]) * D + d] += dout[(size_t)b * D + d];
}

void vtr_kmax_pool_forward(float *out, int *index, const float *inp, const int *lengths, int B,
                           int T, int D, int K)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        int k = K < lengths[b] ? K : lengths[b];
        const float *x = inp + (size_t)b * T * D;
        int *idx = index + (size_t)b * K * D;
        vtr_set_sort_desc(idx, x, lengths[b], D, k);
        for (int d = 0; d < D; d++)
            out[(size_t)b * D + d] = vtr_kmax_pool_at(idx, x, k, K, D, d);
    }
}

void vtr_kmax_pool_backward(float *dinp, const float *dout, const int *index, const int *lengths,
                            int B, int T, int D, int K)
{
#pragma omp parallel for schedule(static) if ((long)B * T * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        int k = K < lengths[b] ? K : lengths[b];
        const int *idx = index + (size_t)b * K * D;
        float *dx = dinp + (size_t)b * T * D;
        for (int d = 0; d < D; d++)
            vtr_kmax_pool_backward_at(dx, dout[(size_t)b * D + d], idx, k, D, d);
    }
}

void vtr_attention_pool_forward(float *out, float *weights, const float *inp,
                                const float *score_weight, const float *score_bias,
                                const int *lengths, int B, int T, int D)
{
    float bias = score_bias ? score_bias[0] : 0.0f;
#pragma omp parallel for schedule(static) if ((long)B * T * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++) {
        const float *x = inp + (size_t)b * T * D;
        float *w = weights + (size_t)b * T;
        vtr_attention_pool_weights_row(w, x, score_weight, bias, lengths[b], T, D);
        vtr_weighted_sum_columns(out + (size_t)b * D, x, w, lengths[b], D, 0, D);
    }
}

/* sum_t weights[t] (dout · x_t) over the real elements of one item */
static float weighted_dout_dot(const float *x, const float *w, const float *dy, int len, int D)
{
    float s = 0.0f;
    for (int t = 0; t < len; t++)
        s += w[t] * vtr_dot(dy, x + (size_t)t * D, D);
    return s;
}

void vtr_attention_pool_backward(float *dinp, float *dscore_weight, float *dscore_bias,
                                 const float *dout, const float *inp, const float *weights,
                                 const float *score_weight, const int *lengths, int B, int T, int D)
{
    /* One pass in item order: the scorer's gradients sum over every (b, t), and this order
     * keeps them independent of any thread count. */
    double dbias = 0.0;
    for (int b = 0; b < B; b++) {
        const float *x = inp + (size_t)b * T * D;
        const float *w = weights + (size_t)b * T;
        const float *dy = dout + (size_t)b * D;
        float dsum = weighted_dout_dot(x, w, dy, lengths[b], D);
        for (int t = 0; t < lengths[b]; t++) {
            const float *xt = x + (size_t)t * D;
            float ds = vtr_attention_dscore(w[t], vtr_dot(dy, xt, D), dsum); /* score (b, t) */
            dbias += ds;
            for (int d = 0; d < D; d++)
                dscore_weight[d] += ds * xt[d];
            if (dinp) {
                float *dx = dinp + ((size_t)b * T + t) * D;
                for (int d = 0; d < D; d++)
                    dx[d] += w[t] * dy[d] + ds * score_weight[d];
            }
        }
    }
    if (dscore_bias)
        dscore_bias[0] += (float)dbias;
}
