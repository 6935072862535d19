// CUDA side of aggregate/set_pooling.h: one thread per (item, dimension) for the poolers (the
// CPU's VTR_HD functions: the same sums in the same order, the same ranks and ties), one
// thread per item for the attention weights.
#include "aggregate/set_pooling.h"
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"

__global__ static void mean_pool_forward_kernel(float *out, const float *inp, const int *lengths,
                                                int B, int T, int D)
{
    size_t total = (size_t)B * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t b = i / (size_t)D;
        out[i] = vtr_mean_pool_at(inp + b * T * D, lengths[b], D, (int)(i % (size_t)D));
    }
}

// one thread per element of dinp (B,T,D); padded elements receive nothing
__global__ static void mean_pool_backward_kernel(float *dinp, const float *dout, const int *lengths,
                                                 int B, int T, int D)
{
    size_t total = (size_t)B * T * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t b = i / ((size_t)T * D), t = i / (size_t)D % (size_t)T, d = i % (size_t)D;
        if ((int)t < lengths[b]) {
            float inv = 1.0f / lengths[b];
            dinp[i] += dout[b * D + d] * inv;
        }
    }
}

__global__ static void max_pool_forward_kernel(float *out, int *argmax, const float *inp,
                                               const int *lengths, int B, int T, int D)
{
    size_t total = (size_t)B * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t b = i / (size_t)D, d = i % (size_t)D;
        const float *x = inp + b * T * D;
        int best = vtr_max_pool_at(x, lengths[b], D, (int)d);
        argmax[i] = best;
        out[i] = x[(size_t)best * D + d];
    }
}

// one thread per (b, d): the targets of different threads differ in d
__global__ static void max_pool_backward_kernel(float *dinp, const float *dout, const int *argmax,
                                                int B, int T, int D)
{
    size_t total = (size_t)B * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t b = i / (size_t)D, d = i % (size_t)D;
        dinp[(b * T + argmax[i]) * D + d] += dout[i];
    }
}

__global__ static void kmax_pool_forward_kernel(float *out, int *index, const float *inp,
                                                const int *lengths, int B, int T, int D, int K)
{
    size_t total = (size_t)B * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t b = i / (size_t)D;
        int d = (int)(i % (size_t)D), len = lengths[b];
        int k = K < len ? K : len;
        const float *x = inp + b * T * D;
        int *idx = index + b * K * D;
        vtr_set_sort_desc_columns(idx, x, len, D, k, d, 1);
        out[i] = vtr_kmax_pool_at(idx, x, k, K, D, d);
    }
}

__global__ static void kmax_pool_backward_kernel(float *dinp, const float *dout, const int *index,
                                                 const int *lengths, int B, int T, int D, int K)
{
    size_t total = (size_t)B * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t b = i / (size_t)D;
        int len = lengths[b];
        int k = K < len ? K : len;
        vtr_kmax_pool_backward_at(dinp + b * T * D, dout[i], index + b * K * D, k, D,
                                  (int)(i % (size_t)D));
    }
}

// weights (B,T), one item per thread
__global__ static void attention_pool_weights_kernel(float *weights, const float *inp,
                                                     const float *score_weight,
                                                     const float *score_bias, const int *lengths,
                                                     int B, int T, int D)
{
    float bias = score_bias ? score_bias[0] : 0.0f;
    for (size_t b = vtr_cuda_first(); b < (size_t)B; b += vtr_cuda_stride())
        vtr_attention_pool_weights_row(weights + b * T, inp + b * T * D, score_weight, bias,
                                       lengths[b], T, D);
}

// out (B,D), one (b, d) per thread
__global__ static void attention_pool_sum_kernel(float *out, const float *weights, const float *inp,
                                                 const int *lengths, int B, int T, int D)
{
    size_t total = (size_t)B * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t b = i / (size_t)D;
        int d = (int)(i % (size_t)D);
        vtr_weighted_sum_columns(out + b * D, inp + b * T * D, weights + b * T, lengths[b], D, d,
                                 d + 1);
    }
}

// Thread d of the grid owns dimension d (grid of ceil(D / threads) blocks, no stride). Each
// block walks the items in order: its threads compute dout · x[t] of the item's elements,
// thread 0 turns them into the score gradients ds (T floats of shared memory) and adds
// them to the bias gradient (block 0 only), then each thread adds its dimension's terms.
// So dscore_weight[d] and dscore_bias receive their terms in (b, t) order, as on the CPU.
__global__ static void attention_pool_backward_kernel(float *dinp, float *dscore_weight,
                                                      float *dscore_bias, const float *dout,
                                                      const float *inp, const float *weights,
                                                      const float *score_weight, const int *lengths,
                                                      int B, int T, int D)
{
    extern __shared__ float ds[];
    int d = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    float dsw = d < D ? dscore_weight[d] : 0.0f;
    double dbias = 0.0;
    for (int b = 0; b < B; b++) {
        int len = lengths[b];
        const float *x = inp + (size_t)b * T * D;
        const float *w = weights + (size_t)b * T;
        const float *dy = dout + (size_t)b * D;
        for (int t = (int)threadIdx.x; t < len; t += (int)blockDim.x)
            ds[t] = vtr_dot(dy, x + (size_t)t * D, D);
        __syncthreads();
        if (threadIdx.x == 0) {
            float dsum = 0.0f; /* sum_t w[t] (dout · x[t]), as the CPU sums it */
            for (int t = 0; t < len; t++)
                dsum += w[t] * ds[t];
            for (int t = 0; t < len; t++) {
                ds[t] = vtr_attention_dscore(w[t], ds[t], dsum);
                dbias += ds[t];
            }
        }
        __syncthreads();
        if (d < D) {
            for (int t = 0; t < len; t++) {
                dsw += ds[t] * x[(size_t)t * D + d];
                if (dinp)
                    dinp[((size_t)b * T + t) * D + d] += w[t] * dy[d] + ds[t] * score_weight[d];
            }
        }
        __syncthreads(); /* ds is rewritten for the next item */
    }
    if (d < D)
        dscore_weight[d] = dsw;
    if (dscore_bias && blockIdx.x == 0 && threadIdx.x == 0)
        dscore_bias[0] += (float)dbias;
}

extern "C" vtr_status vtr_cuda_mean_pool_forward(float *out, const float *inp, const int *lengths,
                                                 int B, int T, int D, vtr_error *err)
{
    mean_pool_forward_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(
        out, inp, lengths, B, T, D);
    return vtr_cuda_launched("mean pool forward", err);
}

extern "C" vtr_status vtr_cuda_mean_pool_backward(float *dinp, const float *dout,
                                                  const int *lengths, int B, int T, int D,
                                                  vtr_error *err)
{
    mean_pool_backward_kernel<<<vtr_cuda_blocks((size_t)B * T * D), VTR_CUDA_THREADS>>>(
        dinp, dout, lengths, B, T, D);
    return vtr_cuda_launched("mean pool backward", err);
}

extern "C" vtr_status vtr_cuda_max_pool_forward(float *out, int *argmax, const float *inp,
                                                const int *lengths, int B, int T, int D,
                                                vtr_error *err)
{
    max_pool_forward_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(out, argmax, inp,
                                                                                  lengths, B, T, D);
    return vtr_cuda_launched("max pool forward", err);
}

extern "C" vtr_status vtr_cuda_max_pool_backward(float *dinp, const float *dout, const int *argmax,
                                                 int B, int T, int D, vtr_error *err)
{
    max_pool_backward_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(dinp, dout,
                                                                                   argmax, B, T, D);
    return vtr_cuda_launched("max pool backward", err);
}

extern "C" vtr_status vtr_cuda_kmax_pool_forward(float *out, int *index, const float *inp,
                                                 const int *lengths, int B, int T, int D, int K,
                                                 vtr_error *err)
{
    kmax_pool_forward_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(
        out, index, inp, lengths, B, T, D, K);
    return vtr_cuda_launched("k-max pool forward", err);
}

extern "C" vtr_status vtr_cuda_kmax_pool_backward(float *dinp, const float *dout, const int *index,
                                                  const int *lengths, int B, int T, int D, int K,
                                                  vtr_error *err)
{
    kmax_pool_backward_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(
        dinp, dout, index, lengths, B, T, D, K);
    return vtr_cuda_launched("k-max pool backward", err);
}

extern "C" vtr_status vtr_cuda_attention_pool_forward(float *out, float *weights, const float *inp,
                                                      const float *score_weight,
                                                      const float *score_bias, const int *lengths,
                                                      int B, int T, int D, vtr_error *err)
{
    attention_pool_weights_kernel<<<vtr_cuda_blocks((size_t)B), VTR_CUDA_THREADS>>>(
        weights, inp, score_weight, score_bias, lengths, B, T, D);
    VTR_TRY(vtr_cuda_launched("attention pool weights", err));
    attention_pool_sum_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(
        out, weights, inp, lengths, B, T, D);
    return vtr_cuda_launched("attention pool forward", err);
}

extern "C" vtr_status vtr_cuda_attention_pool_backward(float *dinp, float *dscore_weight,
                                                       float *dscore_bias, const float *dout,
                                                       const float *inp, const float *weights,
                                                       const float *score_weight,
                                                       const int *lengths, int B, int T, int D,
                                                       vtr_error *err)
{
    // one thread per dimension (at least one block: thread 0 of block 0 sums the bias)
    unsigned blocks = (unsigned)((D + VTR_CUDA_THREADS - 1) / VTR_CUDA_THREADS);
    if (blocks == 0)
        blocks = 1;
    size_t shared = sizeof(float) * (size_t)T;
    attention_pool_backward_kernel<<<blocks, VTR_CUDA_THREADS, shared>>>(
        dinp, dscore_weight, dscore_bias, dout, inp, weights, score_weight, lengths, B, T, D);
    return vtr_cuda_launched("attention pool backward", err);
}
