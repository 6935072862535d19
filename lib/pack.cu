// CUDA side of lib/pack.h: a block per item (grid-stride over items), whose first row in
// the packed rows is the sum of the lengths before it, counted by thread 0 into shared
// memory; then the block's threads copy the item's elements.
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "lib/pack.h"

// padded (B,T,D) <-> packed (N,D): to_packed copies the real rows there, else back, with
// zeros past each length
__global__ static void pack_kernel(float *packed, float *padded, const int *lengths, int B, int T,
                                   int D, bool to_packed)
{
    __shared__ size_t first;
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        __syncthreads(); // the previous item's threads are done with first
        if (threadIdx.x == 0) {
            size_t n = 0;
            for (int i = 0; i < b; i++)
                n += (size_t)lengths[i];
            first = n;
        }
        __syncthreads();
        float *rows = packed + first * D, *item = padded + (size_t)b * T * D;
        size_t real = (size_t)lengths[b] * D, all = (size_t)T * D;
        for (size_t i = threadIdx.x; i < (to_packed ? real : all); i += blockDim.x)
            if (to_packed)
                rows[i] = item[i];
            else
                item[i] = i < real ? rows[i] : 0.0f;
    }
}

static unsigned item_blocks(int B)
{
    return (unsigned)(B < 1 ? 1 : B < 65535 ? B : 65535);
}

extern "C" vtr_status vtr_cuda_pack_rows(float *packed, const float *padded, const int *lengths,
                                         int B, int T, int D, vtr_error *err)
{
    pack_kernel<<<item_blocks(B), VTR_CUDA_THREADS>>>(packed, (float *)padded, lengths, B, T, D,
                                                      true);
    return vtr_cuda_launched("pack rows", err);
}

extern "C" vtr_status vtr_cuda_unpack_rows(float *padded, const float *packed, const int *lengths,
                                           int B, int T, int D, vtr_error *err)
{
    pack_kernel<<<item_blocks(B), VTR_CUDA_THREADS>>>((float *)packed, padded, lengths, B, T, D,
                                                      false);
    return vtr_cuda_launched("unpack rows", err);
}
