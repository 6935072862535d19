#include "norm.h"

#include <stddef.h>

#define COLUMN_BLOCK 64
#define PARALLEL_MIN 65536

void vtr_batchnorm_forward(float *out, float *mean, float *rstd, float *running_mean,
                           float *running_var, const float *inp, const float *weight,
                           const float *bias, int N, int C, float momentum, float eps)
{
    /* Statistics per block of channels, rows in order: contiguous reads, and the same
     * sums whatever the thread count. Two passes (mean, then squared deviations). */
    int blocks = (C + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * COLUMN_BLOCK;
        int nc = C - c0 < COLUMN_BLOCK ? C - c0 : COLUMN_BLOCK;
        double sum[COLUMN_BLOCK] = {0}, ss[COLUMN_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *row = inp + (size_t)n * C + c0;
            for (int c = 0; c < nc; c++)
                sum[c] += row[c];
        }
        for (int c = 0; c < nc; c++)
            sum[c] /= N;
        for (int n = 0; n < N; n++) {
            const float *row = inp + (size_t)n * C + c0;
            for (int c = 0; c < nc; c++)
                ss[c] += (row[c] - sum[c]) * (row[c] - sum[c]);
        }
        for (int c = 0; c < nc; c++) {
            double var = ss[c] / N;
            mean[c0 + c] = (float)sum[c];
            rstd[c0 + c] = (float)(1.0 / sqrt(var + eps));
            if (running_mean)
                running_mean[c0 + c] =
                    (1.0f - momentum) * running_mean[c0 + c] + momentum * (float)sum[c];
            if (running_var)
                running_var[c0 + c] =
                    (1.0f - momentum) * running_var[c0 + c] + momentum * (float)(ss[c] / (N - 1));
        }
    }
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            y[c] = vtr_norm_affine(x[c], mean[c], rstd[c], weight[c], bias[c]);
    }
}

/* Over the N rows, for the columns c0 .. c0+nc-1: sdy[c] = sum of dout and
 * sdyx[c] = sum of dout * xhat, in row order, xhat = (x - mean) * rstd with mean and rstd
 * per column (BatchNorm, per_row 0) or per row (LayerNorm, per_row 1). */
static void block_sums(double *sdy, double *sdyx, const float *dout, const float *inp,
                       const float *mean, const float *rstd, int per_row, int N, int C, int c0,
                       int nc)
{
    for (int c = 0; c < nc; c++)
        sdy[c] = sdyx[c] = 0.0;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C + c0;
        const float *dy = dout + (size_t)n * C + c0;
        for (int c = 0; c < nc; c++) {
            int k = per_row ? n : c0 + c;
            sdy[c] += dy[c];
            sdyx[c] += (double)dy[c] * ((x[c] - mean[k]) * rstd[k]);
        }
    }
}

void vtr_batchnorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C)
{
    /* Per block of channels: sums over the rows in order, then the input gradients of the
     * block's columns. */
    int blocks = (C + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * COLUMN_BLOCK;
        int nc = C - c0 < COLUMN_BLOCK ? C - c0 : COLUMN_BLOCK;
        const float *m = mean + c0, *r = rstd + c0, *w = weight + c0;
        double sdy[COLUMN_BLOCK], sdyx[COLUMN_BLOCK];
        block_sums(sdy, sdyx, dout, inp, mean, rstd, 0, N, C, c0, nc);
        float mean_dxhat[COLUMN_BLOCK], mean_dxhat_xhat[COLUMN_BLOCK];
        for (int c = 0; c < nc; c++) {
            dbias[c0 + c] += (float)sdy[c];
            dweight[c0 + c] += (float)sdyx[c];
            mean_dxhat[c] = (float)(sdy[c] * w[c] / N);
            mean_dxhat_xhat[c] = (float)(sdyx[c] * w[c] / N);
        }
        if (!dinp)
            continue;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0;
            const float *dy = dout + (size_t)n * C + c0;
            float *dx = dinp + (size_t)n * C + c0;
            for (int c = 0; c < nc; c++)
                dx[c] += vtr_norm_dinput(dy[c] * w[c], (x[c] - m[c]) * r[c], r[c], mean_dxhat[c],
                                         mean_dxhat_xhat[c]);
        }
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
            y[c] = vtr_norm_affine(x[c], running_mean[c], 1.0f / sqrtf(running_var[c] + eps),
                                   weight[c], bias[c]);
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
    int blocks = (C + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * COLUMN_BLOCK;
        int nc = C - c0 < COLUMN_BLOCK ? C - c0 : COLUMN_BLOCK;
        double sdy[COLUMN_BLOCK], sdyx[COLUMN_BLOCK];
        block_sums(sdy, sdyx, dout, inp, mean, rstd, 1, N, C, c0, nc);
        for (int c = 0; c < nc; c++) {
            dbias[c0 + c] += (float)sdy[c];
            dweight[c0 + c] += (float)sdyx[c];
        }
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
