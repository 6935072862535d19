#include "norm.h"

#include <stddef.h>

#define PARALLEL_MIN 65536

void vtr_batchnorm_forward(float *out, float *mean, float *rstd, float *running_mean,
                           float *running_var, const float *inp, const float *weight,
                           const float *bias, int N, int C, float momentum, float eps)
{
    /* Statistics per block of channels, rows in order: contiguous reads, and the same
     * sums whatever the thread count. */
    int blocks = (C + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * VTR_COLUMN_BLOCK;
        int nc = C - c0 < VTR_COLUMN_BLOCK ? C - c0 : VTR_COLUMN_BLOCK;
        vtr_batchnorm_stats_columns(mean, rstd, running_mean, running_var, inp, N, C, c0, nc,
                                    momentum, eps);
    }
    vtr_batchnorm_normalize(out, inp, mean, rstd, weight, bias, N, C);
}

void vtr_batchnorm_normalize(float *out, const float *inp, const float *mean, const float *rstd,
                             const float *weight, const float *bias, int N, int C)
{
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            y[c] = vtr_norm_affine(x[c], mean[c], rstd[c], weight[c], bias[c]);
    }
}

void vtr_batchnorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C)
{
    /* Per block of channels: sums over the rows in order, then the input gradients of the
     * block's columns. */
    int blocks = (C + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * VTR_COLUMN_BLOCK;
        int nc = C - c0 < VTR_COLUMN_BLOCK ? C - c0 : VTR_COLUMN_BLOCK;
        vtr_batchnorm_backward_columns(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                                       c0, nc);
    }
}

void vtr_batchnorm_forward_eval(float *out, const float *inp, const float *weight,
                                const float *bias, const float *running_mean,
                                const float *running_var, int N, int C, float eps)
{
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            y[c] = vtr_batchnorm_eval_at(x[c], running_mean[c], running_var[c], weight[c], bias[c],
                                         eps);
    }
}

void vtr_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, float eps)
{
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int n = 0; n < N; n++)
        vtr_layernorm_row_forward(out + (size_t)n * C, &mean[n], &rstd[n], inp + (size_t)n * C,
                                  weight, bias, C, eps);
}

void vtr_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C)
{
    int blocks = (C + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * VTR_COLUMN_BLOCK;
        int nc = C - c0 < VTR_COLUMN_BLOCK ? C - c0 : VTR_COLUMN_BLOCK;
        vtr_layernorm_param_grads_columns(dweight, dbias, dout, inp, mean, rstd, N, C, c0, nc);
    }
    if (!dinp)
        return;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int n = 0; n < N; n++)
        vtr_layernorm_row_backward(dinp + (size_t)n * C, dout + (size_t)n * C, inp + (size_t)n * C,
                                   weight, mean[n], rstd[n], C);
}

void vtr_l2norm_forward(float *out, float *norm, const float *inp, int N, int D)
{
#pragma omp parallel for schedule(static) if ((long)N * D > PARALLEL_MIN)
    for (int n = 0; n < N; n++)
        norm[n] = vtr_l2norm_row_forward(out + (size_t)n * D, inp + (size_t)n * D, D);
}

void vtr_l2norm_backward(float *dinp, const float *dout, const float *inp, const float *norm, int N,
                         int D)
{
#pragma omp parallel for schedule(static) if ((long)N * D > PARALLEL_MIN)
    for (int n = 0; n < N; n++)
        vtr_l2norm_row_backward(dinp + (size_t)n * D, dout + (size_t)n * D, inp + (size_t)n * D,
                                norm[n], D);
}
