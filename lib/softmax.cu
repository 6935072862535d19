// CUDA side of lib/softmax.h: one row (item) per thread, the CPU's VTR_HD row functions.
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "lib/softmax.h"

// inp (B,T), lengths (B) or NULL, out (B,T); out may equal inp (each row in place)
__global__ static void masked_softmax_forward_kernel(float *out, const float *inp,
                                                     const int *lengths, int B, int T,
                                                     float temperature)
{
    for (size_t b = vtr_cuda_first(); b < (size_t)B; b += vtr_cuda_stride())
        vtr_masked_softmax_row_forward(out + b * T, inp + b * T, lengths ? lengths[b] : T, T,
                                       temperature);
}

__global__ static void masked_softmax_backward_kernel(float *dinp, const float *dout,
                                                      const float *out, const int *lengths, int B,
                                                      int T, float temperature)
{
    for (size_t b = vtr_cuda_first(); b < (size_t)B; b += vtr_cuda_stride())
        vtr_masked_softmax_row_backward(dinp + b * T, dout + b * T, out + b * T,
                                        lengths ? lengths[b] : T, temperature);
}

extern "C" vtr_status vtr_cuda_masked_softmax_forward(float *out, const float *inp,
                                                      const int *lengths, int B, int T,
                                                      float temperature, vtr_error *err)
{
    masked_softmax_forward_kernel<<<vtr_cuda_blocks((size_t)B), VTR_CUDA_THREADS>>>(
        out, inp, lengths, B, T, temperature);
    return vtr_cuda_launched("masked softmax forward", err);
}

extern "C" vtr_status vtr_cuda_masked_softmax_backward(float *dinp, const float *dout,
                                                       const float *out, const int *lengths, int B,
                                                       int T, float temperature, vtr_error *err)
{
    masked_softmax_backward_kernel<<<vtr_cuda_blocks((size_t)B), VTR_CUDA_THREADS>>>(
        dinp, dout, out, lengths, B, T, temperature);
    return vtr_cuda_launched("masked softmax backward", err);
}
