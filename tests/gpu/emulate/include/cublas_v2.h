// tests/gpu/emulate/include/cublas_v2.h: the two cuBLAS calls that vtr's .cu files make
// (float32 GEMMs, plain and strided-batched), as the CPU emulation gives them (cublas.cc).
// Column-major, the host pointer mode, every operand float32 (CUDA_R_32F).
#pragma once

#include "cuda_runtime.h"

typedef struct emu_cublas *cublasHandle_t;
typedef int cublasStatus_t;
typedef int cublasOperation_t;
typedef int cublasGemmAlgo_t;
typedef enum {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;
enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
};
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUBLAS_GEMM_DEFAULT = -1 };

const char *cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType a_type, int lda,
                            const void *B, cudaDataType b_type, int ldb, const void *beta, void *C,
                            cudaDataType c_type, int ldc, cublasComputeType_t compute_type,
                            cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, int transa, int transb, int m,
                                          int n, int k, const void *alpha, const void *A,
                                          cudaDataType a_type, int lda, long long stride_a,
                                          const void *B, cudaDataType b_type, int ldb,
                                          long long stride_b, const void *beta, void *C,
                                          cudaDataType c_type, int ldc, long long stride_c,
                                          int batch_count, cublasComputeType_t compute_type,
                                          cublasGemmAlgo_t algo);
