// CUDA side of aggregate/span_pool.h: the CPU's steps with its VTR_HD functions, one thread per
// (phrase, dimension) for the forward and the role gradient's terms, the CUDA embedding
// backward (one column per thread, rows in order) for drole_table, and one thread per (item,
// dimension) for dinp, so that phrases sharing a word add into it in the order of n. No
// atomics.
#include "aggregate/span_pool.h"
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"

// out, argmax (B,N,D), one (phrase r = b * N + n, dimension d) per thread
__global__ static void role_span_pool_forward_kernel(float *out, int *argmax, const float *inp,
                                                     const uint8_t *masks, const int *roles,
                                                     const float *role_table, int B, int N, int L,
                                                     int D)
{
    size_t total = (size_t)B * N * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t r = e / (size_t)D;
        int d = (int)(e % (size_t)D);
        vtr_role_span_pool_forward_at(out + r * D, argmax + r * D, inp + (r / N) * L * D,
                                      masks + r * L, role_table + (size_t)roles[r] * D, L, D, d);
    }
}

// g (B,N,D) = dout * the pooled values, one element per thread
__global__ static void role_span_pool_drole_kernel(float *g, const float *dout, const float *inp,
                                                   const int *argmax, int B, int N, int L, int D)
{
    size_t total = (size_t)B * N * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t r = e / (size_t)D;
        int d = (int)(e % (size_t)D);
        g[e] =
            vtr_role_span_pool_drole_at(dout + r * D, inp + (r / N) * L * D, argmax + r * D, D, d);
    }
}

// dinp (B,L,D) +=, one (item, dimension) per thread, its phrases in the order of n
__global__ static void role_span_pool_dinp_kernel(float *dinp, const float *dout, const int *argmax,
                                                  const int *roles, const float *role_table, int B,
                                                  int N, int L, int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)D;
        int d = (int)(e % (size_t)D);
        vtr_role_span_pool_dinp_at(dinp + b * L * D, dout + b * N * D, argmax + b * N * D,
                                   roles + b * N, role_table, N, D, d);
    }
}

extern "C" vtr_status vtr_cuda_role_span_pool_forward(float *out, int *argmax, const float *inp,
                                                      const uint8_t *masks, const int *roles,
                                                      const float *role_table, int B, int N, int L,
                                                      int D, vtr_error *err)
{
    role_span_pool_forward_kernel<<<vtr_cuda_blocks((size_t)B * N * D), VTR_CUDA_THREADS>>>(
        out, argmax, inp, masks, roles, role_table, B, N, L, D);
    return vtr_cuda_launched("role span pooling", err);
}

extern "C" vtr_status vtr_cuda_role_span_pool_backward(float *dinp, float *drole_table,
                                                       void *scratch, const float *dout,
                                                       const float *inp, const int *argmax,
                                                       const int *roles, const float *role_table,
                                                       int B, int N, int L, int D, vtr_error *err)
{
    // d out / d role = the pooled value: scratch (B,N,D), scattered to the role rows in row order
    float *dpooled_role = (float *)scratch;
    role_span_pool_drole_kernel<<<vtr_cuda_blocks((size_t)B * N * D), VTR_CUDA_THREADS>>>(
        dpooled_role, dout, inp, argmax, B, N, L, D);
    VTR_TRY(vtr_cuda_launched("role span pooling role gradient", err));
    VTR_TRY(vtr_cuda_embedding_backward(drole_table, dpooled_role, roles, B * N, D, err));
    if (!dinp)
        return VTR_OK;
    role_span_pool_dinp_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(
        dinp, dout, argmax, roles, role_table, B, N, L, D);
    return vtr_cuda_launched("role span pooling input gradient", err);
}
