// CUDA side of lib/embedding.h. The backward runs one column per thread through the CPU's
// VTR_HD column function: threads never share an element, and every element receives its
// terms in the order of n, as on the CPU.
#include "lib/cuda_launch.h"
#include "lib/embedding.h"
#include "lib/nn_cuda.h"

// out (N,D): out[n] = table[ids[n]], one element per thread
__global__ static void embedding_forward_kernel(float *out, const int *ids, const float *table,
                                                int N, int D)
{
    size_t total = (size_t)N * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t n = i / (size_t)D, d = i % (size_t)D;
        out[i] = table[(size_t)ids[n] * D + d];
    }
}

__global__ static void embedding_backward_kernel(float *dtable, const float *dout, const int *ids,
                                                 int N, int D)
{
    for (size_t d = vtr_cuda_first(); d < (size_t)D; d += vtr_cuda_stride())
        vtr_embedding_backward_columns(dtable, dout, ids, N, D, (int)d, 1);
}

extern "C" vtr_status vtr_cuda_embedding_forward(float *out, const int *ids, const float *table,
                                                 int N, int D, vtr_error *err)
{
    embedding_forward_kernel<<<vtr_cuda_blocks((size_t)N * D), VTR_CUDA_THREADS>>>(out, ids, table,
                                                                                   N, D);
    return vtr_cuda_launched("embedding forward", err);
}

extern "C" vtr_status vtr_cuda_embedding_backward(float *dtable, const float *dout, const int *ids,
                                                  int N, int D, vtr_error *err)
{
    embedding_backward_kernel<<<vtr_cuda_blocks((size_t)D), VTR_CUDA_THREADS>>>(dtable, dout, ids,
                                                                                N, D);
    return vtr_cuda_launched("embedding backward", err);
}

// out (B,L,D): the token rows of padded sequences, zero past each length; one element per
// thread
__global__ static void embedding_forward_padded_kernel(float *out, const int *ids,
                                                       const float *table, const int *lengths,
                                                       int B, int L, int D)
{
    size_t total = (size_t)B * L * D;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t bt = i / (size_t)D, d = i % (size_t)D;
        int b = (int)(bt / (size_t)L), t = (int)(bt % (size_t)L);
        out[i] = t < lengths[b] ? table[(size_t)ids[bt] * D + d] : 0.0f;
    }
}

__global__ static void embedding_backward_padded_kernel(float *dtable, const float *dout,
                                                        const int *ids, const int *lengths, int B,
                                                        int L, int D)
{
    for (size_t d = vtr_cuda_first(); d < (size_t)D; d += vtr_cuda_stride())
        vtr_embedding_backward_padded_columns(dtable, dout, ids, lengths, B, L, D, (int)d, 1);
}

extern "C" vtr_status vtr_cuda_embedding_forward_padded(float *out, const int *ids,
                                                        const float *table, const int *lengths,
                                                        int B, int L, int D, vtr_error *err)
{
    embedding_forward_padded_kernel<<<vtr_cuda_blocks((size_t)B * L * D), VTR_CUDA_THREADS>>>(
        out, ids, table, lengths, B, L, D);
    return vtr_cuda_launched("embedding forward", err);
}

extern "C" vtr_status vtr_cuda_embedding_backward_padded(float *dtable, const float *dout,
                                                         const int *ids, const int *lengths, int B,
                                                         int L, int D, vtr_error *err)
{
    embedding_backward_padded_kernel<<<vtr_cuda_blocks((size_t)D), VTR_CUDA_THREADS>>>(
        dtable, dout, ids, lengths, B, L, D);
    return vtr_cuda_launched("embedding backward", err);
}
