// CUDA side of match/hinge_loss.h: the per-query math is the CPU's VTR_HD functions.
// Forward: one block, each thread summing its queries' terms in double, the partial sums
// added in thread order (a fixed order: the same bytes every run). Backward: rows, then
// columns, one query per thread, as the CPU orders them, so no two threads touch the same
// element at once.
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "match/hinge_loss.h"

// loss (1) = the sum over the 2B queries (rows q < B, columns q - B), divided by B for MEAN
__global__ static void hinge_loss_forward_kernel(float *loss, const float *S, int B, float margin,
                                                 vtr_hinge_negatives negatives,
                                                 vtr_reduction reduction)
{
    __shared__ double partial[VTR_CUDA_THREADS];
    double sum = 0.0;
    for (int q = (int)threadIdx.x; q < 2 * B; q += (int)blockDim.x) {
        if (q < B)
            sum += vtr_hinge_query_forward(S + (long)q * B, 1, q, B, margin, negatives);
        else
            sum += vtr_hinge_query_forward(S + (q - B), B, q - B, B, margin, negatives);
    }
    double total = vtr_cuda_block_sum_ordered(partial, sum);
    if (threadIdx.x == 0)
        *loss = (float)(reduction == VTR_REDUCE_MEAN ? total / B : total);
}

// dS (B,B) += g * the gradient of each query of one direction: rows (columns 0) or columns
__global__ static void hinge_loss_backward_kernel(float *dS, float g, const float *S, int B,
                                                  float margin, vtr_hinge_negatives negatives,
                                                  int columns)
{
    for (size_t q = vtr_cuda_first(); q < (size_t)B; q += vtr_cuda_stride()) {
        if (columns)
            vtr_hinge_query_backward(dS + q, B, g, S + q, (int)q, B, margin, negatives);
        else
            vtr_hinge_query_backward(dS + q * B, 1, g, S + q * B, (int)q, B, margin, negatives);
    }
}

extern "C" vtr_status vtr_cuda_hinge_loss_forward(float *loss, const float *S, int B, float margin,
                                                  vtr_hinge_negatives negatives,
                                                  vtr_reduction reduction, vtr_error *err)
{
    hinge_loss_forward_kernel<<<1, VTR_CUDA_THREADS>>>(loss, S, B, margin, negatives, reduction);
    return vtr_cuda_launched("hinge loss forward", err);
}

extern "C" vtr_status vtr_cuda_hinge_loss_backward(float *dS, float dloss, const float *S, int B,
                                                   float margin, vtr_hinge_negatives negatives,
                                                   vtr_reduction reduction, vtr_error *err)
{
    float g = reduction == VTR_REDUCE_MEAN ? dloss / (float)B : dloss;
    // columns after rows: the same order of additions per element as on the CPU
    for (int columns = 0; columns < 2; columns++) {
        hinge_loss_backward_kernel<<<vtr_cuda_blocks((size_t)B), VTR_CUDA_THREADS>>>(
            dS, g, S, B, margin, negatives, columns);
        VTR_TRY(vtr_cuda_launched("hinge loss backward", err));
    }
    return VTR_OK;
}
