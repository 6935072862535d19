// CUDA side of match/adopt_loss.h: the per-query math is the CPU's VTR_HD functions, and K
// stays on the GPU. K: one block, each thread one row's exponentials, the rows' sums added
// in row order. Forward: one block, each thread summing its queries' losses in double, the
// partial sums added in thread order. Backward: rows, then columns, one query per thread,
// as the CPU orders them, so no two threads touch the same element at once.
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "match/adopt_loss.h"

// *K = fixed_K when > 0, else equation 6 over S (B,B)
__global__ static void adopt_negatives_kernel(int *K, const float *S, int B, int fixed_K)
{
    __shared__ double row_sum[VTR_CUDA_THREADS];
    if (fixed_K > 0) {
        if (threadIdx.x == 0)
            *K = fixed_K;
        return;
    }
    double all = 0.0;
    for (int i0 = 0; i0 < B; i0 += (int)blockDim.x) {
        int i = i0 + (int)threadIdx.x;
        double sum = 0.0;
        for (int j = 0; i < B && j < B; j++)
            sum += exp((double)S[(long)i * B + j]);
        row_sum[threadIdx.x] = sum;
        __syncthreads();
        if (threadIdx.x == 0)
            for (int t = 0; t < (int)blockDim.x && i0 + t < B; t++)
                all += row_sum[t];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double diag = 0.0;
        for (int i = 0; i < B; i++)
            diag += S[(long)i * B + i];
        *K = vtr_adopt_k(diag / B, log(all / ((double)B * B)), B);
    }
}

// loss (1) = the sum over the 2B queries (rows q < B, columns q - B), divided by B for MEAN
__global__ static void adopt_loss_forward_kernel(float *loss, const float *S, int B, const int *Kp,
                                                 float tau, bool positive_in_denominator,
                                                 vtr_reduction reduction)
{
    __shared__ double partial[VTR_CUDA_THREADS];
    int K = *Kp;
    double sum = 0.0;
    for (int q = (int)threadIdx.x; q < 2 * B; q += (int)blockDim.x) {
        if (q < B)
            sum +=
                vtr_adopt_query_forward(S + (long)q * B, 1, q, B, K, tau, positive_in_denominator);
        else
            sum +=
                vtr_adopt_query_forward(S + (q - B), B, q - B, B, K, tau, positive_in_denominator);
    }
    double total = vtr_cuda_block_sum_ordered(partial, sum);
    if (threadIdx.x == 0)
        *loss = (float)(reduction == VTR_REDUCE_MEAN ? total / B : total);
}

// dS (B,B) += g * the gradient of each query of one direction: rows (columns 0) or columns
__global__ static void adopt_loss_backward_kernel(float *dS, float g, const float *S, int B,
                                                  const int *Kp, float tau,
                                                  bool positive_in_denominator, int columns)
{
    int K = *Kp;
    for (size_t q = vtr_cuda_first(); q < (size_t)B; q += vtr_cuda_stride()) {
        if (columns)
            vtr_adopt_query_backward(dS + q, B, g, S + q, (int)q, B, K, tau,
                                     positive_in_denominator);
        else
            vtr_adopt_query_backward(dS + q * B, 1, g, S + q * B, (int)q, B, K, tau,
                                     positive_in_denominator);
    }
}

extern "C" vtr_status vtr_cuda_adopt_negatives(int *K, const float *S, int B, int fixed_K,
                                               vtr_error *err)
{
    adopt_negatives_kernel<<<1, VTR_CUDA_THREADS>>>(K, S, B, fixed_K);
    return vtr_cuda_launched("adopt negatives", err);
}

extern "C" vtr_status vtr_cuda_adopt_loss_forward(float *loss, const float *S, int B, const int *K,
                                                  float tau, bool positive_in_denominator,
                                                  vtr_reduction reduction, vtr_error *err)
{
    adopt_loss_forward_kernel<<<1, VTR_CUDA_THREADS>>>(loss, S, B, K, tau, positive_in_denominator,
                                                       reduction);
    return vtr_cuda_launched("adopt loss forward", err);
}

extern "C" vtr_status vtr_cuda_adopt_loss_backward(float *dS, float dloss, const float *S, int B,
                                                   const int *K, float tau,
                                                   bool positive_in_denominator,
                                                   vtr_reduction reduction, vtr_error *err)
{
    float g = reduction == VTR_REDUCE_MEAN ? dloss / (float)B : dloss;
    // columns after rows: the same order of additions per element as on the CPU
    for (int columns = 0; columns < 2; columns++) {
        adopt_loss_backward_kernel<<<vtr_cuda_blocks((size_t)B), VTR_CUDA_THREADS>>>(
            dS, g, S, B, K, tau, positive_in_denominator, columns);
        VTR_TRY(vtr_cuda_launched("adopt loss backward", err));
    }
    return VTR_OK;
}
