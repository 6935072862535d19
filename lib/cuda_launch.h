// Launch and memory glue shared by the CUDA op files (the .cu beside each op; C++ only, not part
// of the public API, which is lib/nn_cuda.h).
//
// Every op runs on the default stream: kernels and cuBLAS calls execute in issue order,
// and an op returns once its work is queued. A launch error is caught right after the
// launch (vtr_cuda_launched); an error during execution surfaces at the next synchronizing
// call (vtr_cuda_to_host). Errors become text once, here (cudaGetErrorString,
// cublasGetStatusString).
#ifndef VTR_CUDA_LAUNCH_H
#define VTR_CUDA_LAUNCH_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

#include "lib/device.h"
#include "lib/error.h"

#define VTR_CUDA_THREADS 256

// Grid-stride loops: for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride()) covers
// i = 0 .. n-1 whatever the grid.
static __device__ __forceinline__ size_t vtr_cuda_first(void)
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ size_t vtr_cuda_stride(void)
{
    return (size_t)blockDim.x * gridDim.x;
}

// Each thread's x summed on thread 0 in thread order (a fixed order: the same bytes every
// run); the other threads get 0. partial: blockDim.x doubles of shared memory.
static __device__ __forceinline__ double vtr_cuda_block_sum_ordered(double *partial, double x)
{
    partial[threadIdx.x] = x;
    __syncthreads();
    double total = 0.0;
    if (threadIdx.x == 0)
        for (unsigned i = 0; i < blockDim.x; i++)
            total += partial[i];
    return total;
}

// Blocks of VTR_CUDA_THREADS for n work items in a grid-stride kernel: at least 1, at most
// 65535 (the loop covers the rest).
static inline unsigned vtr_cuda_blocks(size_t n)
{
    size_t blocks = (n + VTR_CUDA_THREADS - 1) / VTR_CUDA_THREADS;
    if (blocks < 1)
        blocks = 1;
    if (blocks > 65535)
        blocks = 65535;
    return (unsigned)blocks;
}

// The cuBLAS handle that vtr_cuda_init created; NULL before it (lib/device.cu).
cublasHandle_t vtr_cuda_cublas(void);

// The compute type of vtr_cuda_sgemm's products: vtr_cuda_set_precision's (lib/device.cu).
cublasComputeType_t vtr_cuda_compute_type(void);

// Fails with VTR_ERR_DEVICE: "CUDA <what>: <cudaGetErrorString(rc)>".
vtr_status vtr_cuda_fail(vtr_error *err, cudaError_t rc, const char *what);

// rc of an allocation of bytes (`what`) into *ptr: a failure is cleared (it is not sticky:
// no later launch should report it), *ptr set to NULL, and the error names the size.
vtr_status vtr_cuda_allocated(cudaError_t rc, void **ptr, const char *what, size_t bytes,
                              vtr_error *err);

// Checks the launch just made (cudaGetLastError); `what` names the kernel.
vtr_status vtr_cuda_launched(const char *what, vtr_error *err);

// Row-major sgemm with cblas_sgemm's arguments (CblasRowMajor implied):
// C (M,N) = alpha op(A) (M,K) · op(B) (K,N) + beta C, op transposing when trans_x is true,
// lda/ldb/ldc the row strides of the stored matrices. Through cuBLAS (cublasGemmEx, float32
// in and out, in vtr_cuda_set_precision's precision) as the column-major product
// Cᵀ = op(B)ᵀ op(A)ᵀ. M, N or K of 0 is allowed (K = 0 scales C by beta).
vtr_status vtr_cuda_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta, float *C,
                          int ldc, vtr_error *err);

// vtr_cuda_sgemm over batch independent products in one cuBLAS call
// (cublasGemmStridedBatchedEx): product i reads A + i stride_a, B + i stride_b and writes
// C + i stride_c (strides in floats). For many small products of the same shape (one per
// item of a batch), which one call per product would spend on launches.
vtr_status vtr_cuda_sgemm_batched(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                  const float *A, int lda, long long stride_a, const float *B,
                                  int ldb, long long stride_b, float beta, float *C, int ldc,
                                  long long stride_c, int batch, vtr_error *err);

#endif
