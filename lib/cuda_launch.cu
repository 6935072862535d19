// The glue of lib/cuda_launch.h: launch checks, zeroing, copies and sums on the device
// (lib/device.h), row-major sgemm through cuBLAS.
#include "lib/cuda_launch.h"

vtr_status vtr_cuda_launched(const char *what, vtr_error *err)
{
    cudaError_t rc = cudaGetLastError();
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, what);
}

extern "C" vtr_status vtr_cuda_zero(void *ptr, size_t bytes, vtr_error *err)
{
    if (bytes == 0)
        return VTR_OK;
    cudaError_t rc = cudaMemsetAsync(ptr, 0, bytes, 0);
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "memset");
}

extern "C" vtr_status vtr_cuda_copy(void *dst, const void *src, size_t bytes, vtr_error *err)
{
    if (bytes == 0)
        return VTR_OK;
    cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "copy on the device");
}

extern "C" vtr_status vtr_cuda_copy_2d(void *dst, size_t dst_pitch, const void *src,
                                       size_t src_pitch, size_t width, size_t height,
                                       vtr_error *err)
{
    if (width == 0 || height == 0)
        return VTR_OK;
    cudaError_t rc = cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, height,
                                       cudaMemcpyDeviceToDevice, 0);
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "2-D copy on the device");
}

__global__ static void add_kernel(float *y, const float *x, size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        y[i] += x[i];
}

extern "C" vtr_status vtr_cuda_add(float *y, const float *x, size_t n, vtr_error *err)
{
    if (n == 0)
        return VTR_OK;
    add_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(y, x, n);
    return vtr_cuda_launched("add", err);
}

vtr_status vtr_cuda_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta, float *C,
                          int ldc, vtr_error *err)
{
    cublasHandle_t handle = vtr_cuda_cublas();
    if (!handle)
        return vtr_fail(err, VTR_ERR_DEVICE, "cuBLAS used before vtr_cuda_init");
    if (M == 0 || N == 0 || (K == 0 && beta == 1.0f))
        return VTR_OK;
    if (K == 0) { // C = beta C; cuBLAS wants every leading dimension >= 1 even then
        lda = lda > 0 ? lda : 1;
        ldb = ldb > 0 ? ldb : 1;
    }
    // Row-major X is column-major Xᵀ: C (M,N) = op(A) op(B) is Cᵀ (N,M) = op(B)ᵀ op(A)ᵀ,
    // so B comes first, and each operand keeps its own transpose flag.
    cublasStatus_t bs = cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
                                     CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc,
                                     vtr_cuda_compute_type(), CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return vtr_fail(err, VTR_ERR_DEVICE, "cuBLAS sgemm (%d x %d x %d): %s", M, N, K,
                        cublasGetStatusString(bs));
    return VTR_OK;
}

vtr_status vtr_cuda_sgemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                  const float *A, int lda, long long stride_a, const float *B,
                                  int ldb, long long stride_b, float beta, float *C, int ldc,
                                  long long stride_c, int batch, vtr_error *err)
{
    cublasHandle_t handle = vtr_cuda_cublas();
    if (!handle)
        return vtr_fail(err, VTR_ERR_DEVICE, "cuBLAS used before vtr_cuda_init");
    if (batch == 0 || M == 0 || N == 0 || (K == 0 && beta == 1.0f))
        return VTR_OK;
    if (K == 0) { // as vtr_cuda_sgemm
        lda = lda > 0 ? lda : 1;
        ldb = ldb > 0 ? ldb : 1;
    }
    // row-major as column-major, B first (vtr_cuda_sgemm)
    cublasStatus_t bs = cublasGemmStridedBatchedEx(
        handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
        &alpha, B, CUDA_R_32F, ldb, stride_b, A, CUDA_R_32F, lda, stride_a, &beta, C, CUDA_R_32F,
        ldc, stride_c, batch, vtr_cuda_compute_type(), CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return vtr_fail(err, VTR_ERR_DEVICE, "cuBLAS batched sgemm (%d x %d x %d, %d of them): %s",
                        M, N, K, batch, cublasGetStatusString(bs));
    return VTR_OK;
}
