// The CUDA side of lib/optim.h: the clipping norm and the Adam / AdamW step on device
// buffers, with the CPU's per-element math (vtr_adam_update, vtr_clip_coef).
#include "lib/cuda_launch.h"
#include "lib/optim.h"

// Block b of VTR_CUDA_NORM_PARTIALS sums the squares of its chunk in double: each thread
// a strided share, then a tree over the block's threads; the same order every run.
__global__ static void norm_partials_kernel(double *partials, const float *g, size_t n,
                                            size_t chunk)
{
    __shared__ double lane[VTR_CUDA_THREADS];
    size_t begin = (size_t)blockIdx.x * chunk, end = begin + chunk < n ? begin + chunk : n;
    double s = 0.0;
    for (size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
        s += (double)g[i] * (double)g[i];
    lane[threadIdx.x] = s;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            lane[threadIdx.x] += lane[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partials[blockIdx.x] = lane[0];
}

__global__ static void clip_coef_kernel(float *out, const double *partials, double max_norm)
{
    double total = 0.0;
    for (int b = 0; b < VTR_CUDA_NORM_PARTIALS; b++)
        total += partials[b];
    float norm = (float)sqrt(total);
    out[0] = norm;
    out[1] = vtr_clip_coef(norm, max_norm);
}

extern "C" vtr_status vtr_cuda_clip_coef(float *out, double *partials, const float *grad, size_t n,
                                         double max_norm, vtr_error *err)
{
    size_t chunk = (n + VTR_CUDA_NORM_PARTIALS - 1) / VTR_CUDA_NORM_PARTIALS;
    norm_partials_kernel<<<VTR_CUDA_NORM_PARTIALS, VTR_CUDA_THREADS>>>(partials, grad, n,
                                                                       chunk ? chunk : 1);
    VTR_TRY(vtr_cuda_launched("gradient norm", err));
    clip_coef_kernel<<<1, 1>>>(out, partials, max_norm);
    return vtr_cuda_launched("clipping coefficient", err);
}

__global__ static void adam_kernel(float *p, float *m, float *v, const float *g, size_t begin,
                                   size_t end, vtr_adam_scalars s, const float *grad_scale)
{
    float scale = grad_scale ? *grad_scale : 1.0f;
    for (size_t i = begin + vtr_cuda_first(); i < end; i += vtr_cuda_stride())
        vtr_adam_update(&p[i], &m[i], &v[i], g[i] * scale, &s);
}

extern "C" vtr_status vtr_cuda_optimizer_step(vtr_optimizer *opt, const vtr_param_set *ps,
                                              float *data, const float *grad, float *exp_avg,
                                              float *exp_avg_sq, double lr, const float *grad_scale,
                                              vtr_error *err)
{
    if (ps->n_trainable != opt->n)
        return vtr_fail(err, VTR_ERR_INVALID, "optimizer: made for %zu values, the set has %zu",
                        opt->n, ps->n_trainable);
    int64_t step = opt->step + 1; // counted once every launch is queued
    size_t e = 0, begin, end;
    float lr_scale;
    while (vtr_optim_next_run(ps, &e, &begin, &end, &lr_scale)) {
        vtr_adam_scalars s = vtr_adam_scalars_at(&opt->hp, step, lr * (double)lr_scale);
        adam_kernel<<<vtr_cuda_blocks(end - begin), VTR_CUDA_THREADS>>>(
            data, exp_avg, exp_avg_sq, grad, begin, end, s, grad_scale);
        VTR_TRY(vtr_cuda_launched("Adam step", err));
    }
    opt->step = step;
    return VTR_OK;
}
