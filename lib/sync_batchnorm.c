/* SyncBatchNorm (sync_batchnorm.h). */
#include "sync_batchnorm.h"

#include <math.h>
#include <string.h>

#include "lib/nn.h"
#include "lib/norm.h"

#define PARALLEL_MIN 65536

/* sums[c] = sum over the N rows of f(row c), rows in order, per column block. */
static void column_sums(double *sums, const float *inp, const float *center, int N, int C)
{
    int blocks = (C + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * VTR_COLUMN_BLOCK;
        int nc = C - c0 < VTR_COLUMN_BLOCK ? C - c0 : VTR_COLUMN_BLOCK;
        double acc[VTR_COLUMN_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *row = inp + (size_t)n * C + c0;
            for (int c = 0; c < nc; c++) {
                double v = center ? (double)(row[c] - center[c0 + c]) : (double)row[c];
                acc[c] += center ? v * v : v;
            }
        }
        memcpy(sums + c0, acc, sizeof(double) * (size_t)nc);
    }
}

vtr_status vtr_sync_batchnorm_forward(vtr_dist *d, float *out, float *mean, float *rstd,
                                      float *running_mean, float *running_var, const float *inp,
                                      const float *weight, const float *bias, int N, int C,
                                      int64_t N_global, float momentum, float eps,
                                      double *scratch, vtr_error *err)
{
    double *sum = scratch, *ss = scratch + C;
    vtr_status st;
    column_sums(sum, inp, NULL, N, C);
    if ((st = vtr_dist_sum_double(d, sum, (size_t)C, err)))
        return st;
    for (int c = 0; c < C; c++)
        mean[c] = (float)(sum[c] / (double)N_global);
    column_sums(ss, inp, mean, N, C);
    if ((st = vtr_dist_sum_double(d, ss, (size_t)C, err)))
        return st;
    for (int c = 0; c < C; c++) {
        double var = ss[c] / (double)N_global;
        rstd[c] = (float)(1.0 / sqrt(var + eps));
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean[c];
        running_var[c] = (1.0f - momentum) * running_var[c] +
                         momentum * (float)(ss[c] / (double)(N_global - 1));
    }
    vtr_batchnorm_normalize(out, inp, mean, rstd, weight, bias, N, C);
    return VTR_OK;
}

vtr_status vtr_sync_batchnorm_backward(vtr_dist *d, float *dinp, float *dweight, float *dbias,
                                       const float *dout, const float *inp, const float *weight,
                                       const float *mean, const float *rstd, int N, int C,
                                       int64_t N_global, double *scratch, vtr_error *err)
{
    double *sdy = scratch, *sdyx = scratch + C;
    int blocks = (C + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * VTR_COLUMN_BLOCK;
        int nc = C - c0 < VTR_COLUMN_BLOCK ? C - c0 : VTR_COLUMN_BLOCK;
        vtr_norm_column_sums(sdy + c0, sdyx + c0, dout, inp, mean, rstd, 0, N, C, c0, nc);
    }
    for (int c = 0; c < C; c++) {
        dbias[c] += (float)sdy[c];
        dweight[c] += (float)sdyx[c];
    }
    vtr_status st = vtr_dist_sum_double(d, scratch, 2 * (size_t)C, err);
    if (st)
        return st;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            float mean_dxhat = (float)(sdy[c] * weight[c] / (double)N_global);
            float mean_dxhat_xhat = (float)(sdyx[c] * weight[c] / (double)N_global);
            dx[c] += vtr_norm_dinput(dy[c] * weight[c], (x[c] - mean[c]) * rstd[c], rstd[c],
                                     mean_dxhat, mean_dxhat_xhat);
        }
    }
    return VTR_OK;
}
