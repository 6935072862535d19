// CUDA side of lib/linear.h: products through cuBLAS, bias in small kernels whose column
// sums are the CPU's VTR_HD function, one column per thread.
#include "lib/cuda_launch.h"
#include "lib/linear.h"
#include "lib/nn_cuda.h"

// out (N,C): every row = bias (C), or += bias when accumulate
__global__ static void bias_rows_kernel(float *out, const float *bias, int N, int C, int accumulate)
{
    size_t n = (size_t)N * C;
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride()) {
        float b = bias[i % (size_t)C];
        out[i] = accumulate ? out[i] + b : b;
    }
}

// dbias (C) += column sums of dout (N,C), one column per thread
__global__ static void bias_backward_kernel(float *dbias, const float *dout, int N, int C)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)C; c += vtr_cuda_stride())
        vtr_bias_backward_columns(dbias, dout, N, C, (int)c, 1);
}

extern "C" vtr_status vtr_cuda_linear_forward(float *out, const float *inp, const float *weight,
                                              const float *bias, int N, int C, int OC,
                                              vtr_error *err)
{
    float beta = 0.0f;
    if (bias) {
        bias_rows_kernel<<<vtr_cuda_blocks((size_t)N * OC), VTR_CUDA_THREADS>>>(out, bias, N, OC,
                                                                                0);
        VTR_TRY(vtr_cuda_launched("linear bias", err));
        beta = 1.0f;
    }
    // out (N,OC) (+)= inp (N,C) · weightᵀ
    return vtr_cuda_sgemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC, err);
}

extern "C" vtr_status vtr_cuda_linear_backward(float *dinp, float *dweight, float *dbias,
                                               const float *dout, const float *inp,
                                               const float *weight, int N, int C, int OC,
                                               vtr_error *err)
{
    // dinp (N,C) += dout (N,OC) · weight (OC,C)
    if (dinp)
        VTR_TRY(
            vtr_cuda_sgemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, 1.0f, dinp, C, err));
    // dweight (OC,C) += doutᵀ (OC,N) · inp (N,C)
    VTR_TRY(vtr_cuda_sgemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight, C, err));
    return dbias ? vtr_cuda_bias_backward(dbias, dout, N, OC, err) : VTR_OK;
}

extern "C" vtr_status vtr_cuda_bias_forward(float *out, const float *bias, int N, int C,
                                            vtr_error *err)
{
    bias_rows_kernel<<<vtr_cuda_blocks((size_t)N * C), VTR_CUDA_THREADS>>>(out, bias, N, C, 1);
    return vtr_cuda_launched("bias forward", err);
}

extern "C" vtr_status vtr_cuda_bias_backward(float *dbias, const float *dout, int N, int C,
                                             vtr_error *err)
{
    bias_backward_kernel<<<vtr_cuda_blocks((size_t)C), VTR_CUDA_THREADS>>>(dbias, dout, N, C);
    return vtr_cuda_launched("bias backward", err);
}
