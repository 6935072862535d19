// CUDA side of lib/norm.h. BatchNorm: one channel per thread for the statistics and the
// gradients (the CPU's VTR_HD column functions, rows in order), one element per thread for
// the output. LayerNorm and l2norm: one row per thread (the CPU's VTR_HD row functions);
// LayerNorm's weight and bias gradients one column per thread.
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "lib/norm.h"

__global__ static void batchnorm_stats_kernel(float *mean, float *rstd, float *running_mean,
                                              float *running_var, const float *inp, int N, int C,
                                              float momentum, float eps)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)C; c += vtr_cuda_stride())
        vtr_batchnorm_stats_columns(mean, rstd, running_mean, running_var, inp, N, C, (int)c, 1,
                                    momentum, eps);
}

// out (N,C) from inp with per-channel mean and rstd
__global__ static void batchnorm_apply_kernel(float *out, const float *inp, const float *weight,
                                              const float *bias, const float *mean,
                                              const float *rstd, int N, int C)
{
    size_t total = (size_t)N * C;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t c = i % (size_t)C;
        out[i] = vtr_norm_affine(inp[i], mean[c], rstd[c], weight[c], bias[c]);
    }
}

__global__ static void batchnorm_backward_kernel(float *dinp, float *dweight, float *dbias,
                                                 const float *dout, const float *inp,
                                                 const float *weight, const float *mean,
                                                 const float *rstd, int N, int C)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)C; c += vtr_cuda_stride())
        vtr_batchnorm_backward_columns(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                                       (int)c, 1);
}

__global__ static void batchnorm_sums_kernel(double *sums, const float *inp, const float *center,
                                             int N, int C)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)C; c += vtr_cuda_stride())
        vtr_batchnorm_sums_columns(sums, inp, center, N, C, (int)c, 1);
}

__global__ static void batchnorm_grad_sums_kernel(double *sdy, double *sdyx, float *dweight,
                                                  float *dbias, const float *dout, const float *inp,
                                                  const float *mean, const float *rstd, int N,
                                                  int C)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)C; c += vtr_cuda_stride())
        vtr_batchnorm_grad_sums_columns(sdy, sdyx, dweight, dbias, dout, inp, mean, rstd, N, C,
                                        (int)c, 1);
}

__global__ static void sync_batchnorm_dinput_kernel(float *dinp, const float *dout,
                                                    const float *inp, const float *weight,
                                                    const float *mean, const float *rstd,
                                                    const double *sdy, const double *sdyx,
                                                    int64_t N_global, int N, int C)
{
    size_t total = (size_t)N * C;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t c = i % (size_t)C;
        dinp[i] += vtr_sync_batchnorm_dinput_at(dout[i], inp[i], weight[c], mean[c], rstd[c],
                                                sdy[c], sdyx[c], N_global);
    }
}

__global__ static void batchnorm_eval_kernel(float *out, const float *inp, const float *weight,
                                             const float *bias, const float *running_mean,
                                             const float *running_var, int N, int C, float eps)
{
    size_t total = (size_t)N * C;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t c = i % (size_t)C;
        out[i] =
            vtr_batchnorm_eval_at(inp[i], running_mean[c], running_var[c], weight[c], bias[c], eps);
    }
}

__global__ static void layernorm_forward_kernel(float *out, float *mean, float *rstd,
                                                const float *inp, const float *weight,
                                                const float *bias, int N, int C, float eps)
{
    for (size_t n = vtr_cuda_first(); n < (size_t)N; n += vtr_cuda_stride())
        vtr_layernorm_row_forward(out + n * C, &mean[n], &rstd[n], inp + n * C, weight, bias, C,
                                  eps);
}

__global__ static void layernorm_param_grads_kernel(float *dweight, float *dbias, const float *dout,
                                                    const float *inp, const float *mean,
                                                    const float *rstd, int N, int C)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)C; c += vtr_cuda_stride())
        vtr_layernorm_param_grads_columns(dweight, dbias, dout, inp, mean, rstd, N, C, (int)c, 1);
}

__global__ static void layernorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                             const float *weight, const float *mean,
                                             const float *rstd, int N, int C)
{
    for (size_t n = vtr_cuda_first(); n < (size_t)N; n += vtr_cuda_stride())
        vtr_layernorm_row_backward(dinp + n * C, dout + n * C, inp + n * C, weight, mean[n],
                                   rstd[n], C);
}

__global__ static void l2norm_forward_kernel(float *out, float *norm, const float *inp, int N,
                                             int D)
{
    for (size_t n = vtr_cuda_first(); n < (size_t)N; n += vtr_cuda_stride())
        norm[n] = vtr_l2norm_row_forward(out + n * D, inp + n * D, D);
}

__global__ static void l2norm_backward_kernel(float *dinp, const float *dout, const float *inp,
                                              const float *norm, int N, int D)
{
    for (size_t n = vtr_cuda_first(); n < (size_t)N; n += vtr_cuda_stride())
        vtr_l2norm_row_backward(dinp + n * D, dout + n * D, inp + n * D, norm[n], D);
}

extern "C" vtr_status vtr_cuda_batchnorm_forward(float *out, float *mean, float *rstd,
                                                 float *running_mean, float *running_var,
                                                 const float *inp, const float *weight,
                                                 const float *bias, int N, int C, float momentum,
                                                 float eps, vtr_error *err)
{
    batchnorm_stats_kernel<<<vtr_cuda_blocks((size_t)C), VTR_CUDA_THREADS>>>(
        mean, rstd, running_mean, running_var, inp, N, C, momentum, eps);
    VTR_TRY(vtr_cuda_launched("batchnorm statistics", err));
    batchnorm_apply_kernel<<<vtr_cuda_blocks((size_t)N * C), VTR_CUDA_THREADS>>>(
        out, inp, weight, bias, mean, rstd, N, C);
    return vtr_cuda_launched("batchnorm forward", err);
}

extern "C" vtr_status vtr_cuda_batchnorm_backward(float *dinp, float *dweight, float *dbias,
                                                  const float *dout, const float *inp,
                                                  const float *weight, const float *mean,
                                                  const float *rstd, int N, int C, vtr_error *err)
{
    batchnorm_backward_kernel<<<vtr_cuda_blocks((size_t)C), VTR_CUDA_THREADS>>>(
        dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    return vtr_cuda_launched("batchnorm backward", err);
}

extern "C" vtr_status vtr_cuda_batchnorm_forward_eval(float *out, const float *inp,
                                                      const float *weight, const float *bias,
                                                      const float *running_mean,
                                                      const float *running_var, int N, int C,
                                                      float eps, vtr_error *err)
{
    batchnorm_eval_kernel<<<vtr_cuda_blocks((size_t)N * C), VTR_CUDA_THREADS>>>(
        out, inp, weight, bias, running_mean, running_var, N, C, eps);
    return vtr_cuda_launched("batchnorm eval forward", err);
}

extern "C" vtr_status vtr_cuda_batchnorm_normalize(float *out, const float *inp, const float *mean,
                                                   const float *rstd, const float *weight,
                                                   const float *bias, int N, int C, vtr_error *err)
{
    batchnorm_apply_kernel<<<vtr_cuda_blocks((size_t)N * C), VTR_CUDA_THREADS>>>(
        out, inp, weight, bias, mean, rstd, N, C);
    return vtr_cuda_launched("batchnorm normalize", err);
}

extern "C" vtr_status vtr_cuda_batchnorm_sums(double *sums, const float *inp, const float *center,
                                              int N, int C, vtr_error *err)
{
    batchnorm_sums_kernel<<<vtr_cuda_blocks((size_t)C), VTR_CUDA_THREADS>>>(sums, inp, center, N,
                                                                            C);
    return vtr_cuda_launched("batchnorm column sums", err);
}

extern "C" vtr_status vtr_cuda_batchnorm_grad_sums(double *sdy, double *sdyx, float *dweight,
                                                   float *dbias, const float *dout,
                                                   const float *inp, const float *mean,
                                                   const float *rstd, int N, int C, vtr_error *err)
{
    batchnorm_grad_sums_kernel<<<vtr_cuda_blocks((size_t)C), VTR_CUDA_THREADS>>>(
        sdy, sdyx, dweight, dbias, dout, inp, mean, rstd, N, C);
    return vtr_cuda_launched("batchnorm gradient sums", err);
}

extern "C" vtr_status vtr_cuda_sync_batchnorm_dinput(float *dinp, const float *dout,
                                                     const float *inp, const float *weight,
                                                     const float *mean, const float *rstd,
                                                     const double *sdy, const double *sdyx,
                                                     int64_t N_global, int N, int C, vtr_error *err)
{
    sync_batchnorm_dinput_kernel<<<vtr_cuda_blocks((size_t)N * C), VTR_CUDA_THREADS>>>(
        dinp, dout, inp, weight, mean, rstd, sdy, sdyx, N_global, N, C);
    return vtr_cuda_launched("sync batchnorm input gradient", err);
}

extern "C" vtr_status vtr_cuda_layernorm_forward(float *out, float *mean, float *rstd,
                                                 const float *inp, const float *weight,
                                                 const float *bias, int N, int C, float eps,
                                                 vtr_error *err)
{
    layernorm_forward_kernel<<<vtr_cuda_blocks((size_t)N), VTR_CUDA_THREADS>>>(
        out, mean, rstd, inp, weight, bias, N, C, eps);
    return vtr_cuda_launched("layernorm forward", err);
}

extern "C" vtr_status vtr_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                                  const float *dout, const float *inp,
                                                  const float *weight, const float *mean,
                                                  const float *rstd, int N, int C, vtr_error *err)
{
    layernorm_param_grads_kernel<<<vtr_cuda_blocks((size_t)C), VTR_CUDA_THREADS>>>(
        dweight, dbias, dout, inp, mean, rstd, N, C);
    VTR_TRY(vtr_cuda_launched("layernorm parameter gradients", err));
    if (!dinp)
        return VTR_OK;
    layernorm_dinp_kernel<<<vtr_cuda_blocks((size_t)N), VTR_CUDA_THREADS>>>(dinp, dout, inp, weight,
                                                                            mean, rstd, N, C);
    return vtr_cuda_launched("layernorm input gradient", err);
}

extern "C" vtr_status vtr_cuda_l2norm_forward(float *out, float *norm, const float *inp, int N,
                                              int D, vtr_error *err)
{
    l2norm_forward_kernel<<<vtr_cuda_blocks((size_t)N), VTR_CUDA_THREADS>>>(out, norm, inp, N, D);
    return vtr_cuda_launched("l2norm forward", err);
}

extern "C" vtr_status vtr_cuda_l2norm_backward(float *dinp, const float *dout, const float *inp,
                                               const float *norm, int N, int D, vtr_error *err)
{
    l2norm_backward_kernel<<<vtr_cuda_blocks((size_t)N), VTR_CUDA_THREADS>>>(dinp, dout, inp, norm,
                                                                             N, D);
    return vtr_cuda_launched("l2norm backward", err);
}
