/* Normalization layers: BatchNorm1d, LayerNorm, l2norm (conventions: lib/nn.h).
 *
 * Statistics are summed in double, per channel (BatchNorm) or per row (LayerNorm, l2norm),
 * in a fixed order. The per-element and per-row math is in VTR_HD functions shared with
 * the CUDA backend.
 */
#ifndef VTR_NORM_H
#define VTR_NORM_H

#include <math.h>

#include "hostdevice.h"
#include "nn.h"

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

/* l2norm of one row: out (D) = x / (|x| + eps); returns |x| */
static VTR_HD float vtr_l2norm_row_forward(float *out, const float *x, int D)
{
    double ss = 0.0;
    for (int d = 0; d < D; d++)
        ss += (double)x[d] * x[d];
    float norm = (float)sqrt(ss);
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

#endif
