/* Normalization layers: BatchNorm1d, LayerNorm, l2norm (conventions: lib/nn.h).
 *
 * Statistics are summed in double, per channel (BatchNorm) or per row (LayerNorm, l2norm),
 * in a fixed order. The per-element and per-row math is in VTR_HD functions shared with
 * the CUDA backend.
 */
#ifndef VTR_NORM_H
#define VTR_NORM_H

#include <math.h>
#include <stdint.h>

#include "hostdevice.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_BATCHNORM_MOMENTUM 0.1f
#define VTR_BATCHNORM_EPS 1e-5f
#define VTR_LAYERNORM_EPS 1e-5f
#define VTR_L2NORM_EPS 1e-8f

/* BatchNorm and LayerNorm output of one element */
static VTR_HD float vtr_norm_affine(float x, float mean, float rstd, float weight, float bias)
{
    return (x - mean) * rstd * weight + bias;
}

/* Gradient of one input of a normalization over n values: dxhat = dout * weight for this
 * element, mean_dxhat and mean_dxhat_xhat the means over the n normalized values. */
static VTR_HD float vtr_norm_dinput(float dxhat, float xhat, float rstd, float mean_dxhat,
                                    float mean_dxhat_xhat)
{
    return rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
}

/* BatchNorm eval-mode output of one element, from the running statistics */
static VTR_HD float vtr_batchnorm_eval_at(float x, float running_mean, float running_var,
                                          float weight, float bias, float eps)
{
    return vtr_norm_affine(x, running_mean, 1.0f / sqrtf(running_var + eps), weight, bias);
}

/* BatchNorm training statistics of the columns c0 .. c0+nc-1 of inp (N,C), nc <=
 * VTR_COLUMN_BLOCK, rows in order, two passes in double (mean, then squared deviations):
 * writes mean and rstd of those columns and updates running_mean / running_var (each may
 * be NULL) as vtr_batchnorm_forward documents. */
static VTR_HD void vtr_batchnorm_stats_columns(float *mean, float *rstd, float *running_mean,
                                               float *running_var, const float *inp, int N, int C,
                                               int c0, int nc, float momentum, float eps)
{
    double sum[VTR_COLUMN_BLOCK] = {0}, ss[VTR_COLUMN_BLOCK] = {0};
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

/* Over the N rows, for the columns c0 .. c0+nc-1 (nc <= VTR_COLUMN_BLOCK): sdy[c] = sum of
 * dout and sdyx[c] = sum of dout * xhat, in row order, xhat = (x - mean) * rstd with mean and
 * rstd per column (BatchNorm, per_row 0) or per row (LayerNorm, per_row 1). */
static VTR_HD void vtr_norm_column_sums(double *sdy, double *sdyx, const float *dout,
                                        const float *inp, const float *mean, const float *rstd,
                                        int per_row, int N, int C, int c0, int nc)
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

/* SyncBatchNorm's per-rank sums of the columns c0 .. c0+nc-1 (nc <= VTR_COLUMN_BLOCK) of
 * inp (N,C), rows in order, in double: sums[c] = the sum of the column (center NULL) or of
 * its squared deviations from center[c] (lib/sync_batchnorm.h). */
static VTR_HD void vtr_batchnorm_sums_columns(double *sums, const float *inp, const float *center,
                                              int N, int C, int c0, int nc)
{
    double acc[VTR_COLUMN_BLOCK] = {0};
    for (int n = 0; n < N; n++) {
        const float *row = inp + (size_t)n * C + c0;
        for (int c = 0; c < nc; c++) {
            double v = center ? (double)(row[c] - center[c0 + c]) : (double)row[c];
            acc[c] += center ? v * v : v;
        }
    }
    for (int c = 0; c < nc; c++)
        sums[c0 + c] = acc[c];
}

/* SyncBatchNorm backward's per-rank sums of the columns c0 .. c0+nc-1: sdy and sdyx as
 * vtr_norm_column_sums writes them (at c0 .. c0+nc-1 here), and this rank's share of the
 * weight and bias gradients (dweight, dbias +=). */
static VTR_HD void vtr_batchnorm_grad_sums_columns(double *sdy, double *sdyx, float *dweight,
                                                   float *dbias, const float *dout,
                                                   const float *inp, const float *mean,
                                                   const float *rstd, int N, int C, int c0, int nc)
{
    vtr_norm_column_sums(sdy + c0, sdyx + c0, dout, inp, mean, rstd, 0, N, C, c0, nc);
    for (int c = c0; c < c0 + nc; c++) {
        dbias[c] += (float)sdy[c];
        dweight[c] += (float)sdyx[c];
    }
}

/* SyncBatchNorm's gradient of one input x (column c) from the global sums sdy and sdyx of
 * its column over N_global rows. */
static VTR_HD float vtr_sync_batchnorm_dinput_at(float dy, float x, float weight, float mean,
                                                 float rstd, double sdy, double sdyx,
                                                 int64_t N_global)
{
    float mean_dxhat = (float)(sdy * weight / (double)N_global);
    float mean_dxhat_xhat = (float)(sdyx * weight / (double)N_global);
    return vtr_norm_dinput(dy * weight, (x - mean) * rstd, rstd, mean_dxhat, mean_dxhat_xhat);
}

/* BatchNorm backward of the columns c0 .. c0+nc-1 (nc <= VTR_COLUMN_BLOCK): their weight
 * and bias gradients, then (dinp not NULL) their input gradients; the arguments as
 * vtr_batchnorm_backward's. */
static VTR_HD void vtr_batchnorm_backward_columns(float *dinp, float *dweight, float *dbias,
                                                  const float *dout, const float *inp,
                                                  const float *weight, const float *mean,
                                                  const float *rstd, int N, int C, int c0, int nc)
{
    const float *m = mean + c0, *r = rstd + c0, *w = weight + c0;
    double sdy[VTR_COLUMN_BLOCK], sdyx[VTR_COLUMN_BLOCK];
    vtr_norm_column_sums(sdy, sdyx, dout, inp, mean, rstd, 0, N, C, c0, nc);
    float mean_dxhat[VTR_COLUMN_BLOCK], mean_dxhat_xhat[VTR_COLUMN_BLOCK];
    for (int c = 0; c < nc; c++) {
        dbias[c0 + c] += (float)sdy[c];
        dweight[c0 + c] += (float)sdyx[c];
        mean_dxhat[c] = (float)(sdy[c] * w[c] / N);
        mean_dxhat_xhat[c] = (float)(sdyx[c] * w[c] / N);
    }
    if (!dinp)
        return;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C + c0;
        const float *dy = dout + (size_t)n * C + c0;
        float *dx = dinp + (size_t)n * C + c0;
        for (int c = 0; c < nc; c++)
            dx[c] += vtr_norm_dinput(dy[c] * w[c], (x[c] - m[c]) * r[c], r[c], mean_dxhat[c],
                                     mean_dxhat_xhat[c]);
    }
}

/* LayerNorm weight and bias gradients of the columns c0 .. c0+nc-1 (nc <=
 * VTR_COLUMN_BLOCK); mean (N) and rstd (N) per row as saved by the forward. */
static VTR_HD void vtr_layernorm_param_grads_columns(float *dweight, float *dbias,
                                                     const float *dout, const float *inp,
                                                     const float *mean, const float *rstd, int N,
                                                     int C, int c0, int nc)
{
    double sdy[VTR_COLUMN_BLOCK], sdyx[VTR_COLUMN_BLOCK];
    vtr_norm_column_sums(sdy, sdyx, dout, inp, mean, rstd, 1, N, C, c0, nc);
    for (int c = 0; c < nc; c++) {
        dbias[c0 + c] += (float)sdy[c];
        dweight[c0 + c] += (float)sdyx[c];
    }
}

/* LayerNorm of one row x (C): writes out (C), returns mean and rstd */
static VTR_HD void vtr_layernorm_row_forward(float *out, float *mean_out, float *rstd_out,
                                             const float *x, const float *weight, const float *bias,
                                             int C, float eps)
{
    double sum = 0.0;
    for (int c = 0; c < C; c++)
        sum += x[c];
    double mean = sum / C;
    double ss = 0.0;
    for (int c = 0; c < C; c++)
        ss += (x[c] - mean) * (x[c] - mean);
    float m = (float)mean;
    float rstd = (float)(1.0 / sqrt(ss / C + eps));
    for (int c = 0; c < C; c++)
        out[c] = vtr_norm_affine(x[c], m, rstd, weight[c], bias[c]);
    *mean_out = m;
    *rstd_out = rstd;
}

/* LayerNorm input gradient of one row: dinp (C) += ... */
static VTR_HD void vtr_layernorm_row_backward(float *dinp, const float *dout, const float *x,
                                              const float *weight, float mean, float rstd, int C)
{
    double s1 = 0.0, s2 = 0.0;
    for (int c = 0; c < C; c++) {
        float dxhat = dout[c] * weight[c];
        s1 += dxhat;
        s2 += (double)dxhat * ((x[c] - mean) * rstd);
    }
    float m1 = (float)(s1 / C), m2 = (float)(s2 / C);
    for (int c = 0; c < C; c++)
        dinp[c] += vtr_norm_dinput(dout[c] * weight[c], (x[c] - mean) * rstd, rstd, m1, m2);
}

/* |x|^2 of one row x (D), summed in double in order */
static VTR_HD double vtr_row_sum_squares(const float *x, int D)
{
    double ss = 0.0;
    for (int d = 0; d < D; d++)
        ss += (double)x[d] * x[d];
    return ss;
}

/* l2norm of one row: out (D) = x / (|x| + eps); returns |x| */
static VTR_HD float vtr_l2norm_row_forward(float *out, const float *x, int D)
{
    float norm = (float)sqrt(vtr_row_sum_squares(x, D));
    float scale = 1.0f / (norm + VTR_L2NORM_EPS);
    for (int d = 0; d < D; d++)
        out[d] = x[d] * scale;
    return norm;
}

/* l2norm input gradient of one row: dinp += dout / (n + eps) - x (dout·x) / (n (n + eps)^2).
 * At n = 0 the second term is taken as 0. */
static VTR_HD void vtr_l2norm_row_backward(float *dinp, const float *dout, const float *x,
                                           float norm, int D)
{
    double dot = 0.0;
    for (int d = 0; d < D; d++)
        dot += (double)dout[d] * x[d];
    float inv = 1.0f / (norm + VTR_L2NORM_EPS);
    float k =
        norm > 0.0f
            ? (float)(dot / ((double)norm * (norm + VTR_L2NORM_EPS) * (norm + VTR_L2NORM_EPS)))
            : 0.0f;
    for (int d = 0; d < D; d++)
        dinp[d] += dout[d] * inv - x[d] * k;
}

// BatchNorm1d, training mode, over all N rows: inp (N,C), weight (C), bias (C), out (N,C).
// Saves the batch mean (C) and rstd = 1/sqrt(var + eps) (C), var biased, for backward.
// running_mean (C), running_var (C): updated in place as PyTorch does,
// r = (1 - momentum) r + momentum * batch statistic, with the unbiased variance
// var * N/(N-1); both NULL to leave no trace. N >= 2 (PyTorch refuses N = 1).
// num_batches_tracked is the caller's (it only matters when momentum is None).
void vtr_batchnorm_forward(float *out, float *mean, float *rstd, float *running_mean,
                           float *running_var, const float *inp, const float *weight,
                           const float *bias, int N, int C, float momentum, float eps);

// out (N,C) = (inp - mean) * rstd * weight + bias, per column: the normalization of
// vtr_batchnorm_forward with given statistics (SyncBatchNorm's, lib/sync_batchnorm.h)
void vtr_batchnorm_normalize(float *out, const float *inp, const float *mean, const float *rstd,
                             const float *weight, const float *bias, int N, int C);

// dinp (N,C) or NULL, dweight (C), dbias (C), dout (N,C), inp (N,C), weight (C),
// mean (C), rstd (C) as saved by vtr_batchnorm_forward
void vtr_batchnorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C);

// BatchNorm1d, eval mode: inp (N,C), out (N,C) normalized with running_mean (C) and
// running_var (C). Inference only (no backward).
void vtr_batchnorm_forward_eval(float *out, const float *inp, const float *weight,
                                const float *bias, const float *running_mean,
                                const float *running_var, int N, int C, float eps);

// LayerNorm over the last axis: inp (N,C), weight (C), bias (C), out (N,C);
// saves mean (N) and rstd (N)
void vtr_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, float eps);

// dinp (N,C) or NULL, dweight (C), dbias (C), dout (N,C), inp (N,C), weight (C),
// mean (N), rstd (N)
void vtr_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C);

// l2norm over the last axis, x / (sqrt(sum x^2) + 1e-8): inp (N,D), out (N,D);
// saves norm (N) = sqrt(sum x^2)
void vtr_l2norm_forward(float *out, float *norm, const float *inp, int N, int D);

// dinp (N,D), dout (N,D), inp (N,D), norm (N)
void vtr_l2norm_backward(float *dinp, const float *dout, const float *inp, const float *norm, int N,
                         int D);

#ifdef __cplusplus
}
#endif

#endif
