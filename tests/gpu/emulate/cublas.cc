// tests/gpu/emulate/cublas.cc: the cuBLAS calls of vtr's .cu files for the CPU emulation
// (include/cublas_v2.h).
//
// cublasGemmEx and cublasGemmStridedBatchedEx: float32 column-major GEMMs, C = alpha op(A)
// op(B) + beta C, checked as cuBLAS checks its arguments, with every operand's span checked to
// lie inside one device allocation, and C not read where beta is 0 (as cuBLAS: a C of NaN
// then gives no NaN). The TF32 and BF16 compute types round each A and B element to 10 and 7
// mantissa bits (nearest, ties to even) before the product; every product is summed in
// float32 over k in order, so a result differs from cuBLAS's (another order, fused
// multiply-adds, split k) in its last bits: the parity tests' tolerances cover that.
#include "emulation.h"

#include "cublas_v2.h"

struct emu_cublas {
    int unused;
};
static emu_cublas the_cublas;

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    *handle = &the_cublas;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

float emu_round_mantissa(float x, int kept)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7f800000u) == 0x7f800000u)
        return x;
    int dropped = 23 - kept;
    uint32_t half = 1u << (dropped - 1);
    uint32_t last_kept = (bits >> dropped) & 1u;
    bits = (bits + half - 1 + last_kept) & ~((1u << dropped) - 1);
    memcpy(&x, &bits, sizeof x);
    return x;
}

static int mantissa_bits(cublasComputeType_t compute_type)
{
    switch (compute_type) {
    case CUBLAS_COMPUTE_32F_FAST_TF32: return 10;
    case CUBLAS_COMPUTE_32F_FAST_16BF: return 7;
    default: return 23;
    }
}

static int at_least_1(int x)
{
    return x > 1 ? x : 1;
}

// A (m x k after op), B (k x n after op), C (m x n); lda, ldb, ldc: their column strides in
// elements
cublasStatus_t cublasGemmEx(cublasHandle_t handle, int transa, int transb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType a_type, int lda,
                            const void *B, cudaDataType b_type, int ldb, const void *beta, void *C,
                            cudaDataType c_type, int ldc, cublasComputeType_t compute_type,
                            cublasGemmAlgo_t algo)
{
    if (handle != &the_cublas)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (a_type != CUDA_R_32F || b_type != CUDA_R_32F || c_type != CUDA_R_32F)
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
        (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T))
        return CUBLAS_STATUS_INVALID_VALUE;
    // A is stored a_rows x a_cols, B b_rows x b_cols
    int a_rows = transa ? k : m;
    int a_cols = transa ? m : k;
    int b_rows = transb ? n : k;
    int b_cols = transb ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < at_least_1(a_rows) || ldb < at_least_1(b_rows) ||
        ldc < at_least_1(m)) {
        fprintf(stderr,
                "EMU: cublasGemmEx: transa %d transb %d m %d n %d k %d lda %d ldb %d ldc %d\n",
                transa, transb, m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    const float *a = (const float *)A;
    const float *b = (const float *)B;
    float *c = (float *)C;
    if (k > 0) {
        emu_check_device(a, sizeof(float) * ((size_t)lda * (a_cols - 1) + a_rows),
                         "cublasGemmEx's A");
        emu_check_device(b, sizeof(float) * ((size_t)ldb * (b_cols - 1) + b_rows),
                         "cublasGemmEx's B");
    }
    emu_check_device(c, sizeof(float) * ((size_t)ldc * (n - 1) + m), "cublasGemmEx's C");
    float alpha_value = *(const float *)alpha;
    float beta_value = *(const float *)beta;
    int kept = mantissa_bits(compute_type);
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++) {
                float a_ip = transa ? a[p + (size_t)i * lda] : a[i + (size_t)p * lda];
                float b_pj = transb ? b[j + (size_t)p * ldb] : b[p + (size_t)j * ldb];
                if (kept < 23) {
                    a_ip = emu_round_mantissa(a_ip, kept);
                    b_pj = emu_round_mantissa(b_pj, kept);
                }
                sum += a_ip * b_pj;
            }
            float *c_ij = &c[i + (size_t)j * ldc];
            *c_ij = alpha_value * sum + (beta_value == 0.0f ? 0.0f : beta_value * *c_ij);
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

// batch_count GEMMs, the i-th's A, B and C stride_a, stride_b and stride_c elements after the
// first's
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, int transa, int transb, int m,
                                          int n, int k, const void *alpha, const void *A,
                                          cudaDataType a_type, int lda, long long stride_a,
                                          const void *B, cudaDataType b_type, int ldb,
                                          long long stride_b, const void *beta, void *C,
                                          cudaDataType c_type, int ldc, long long stride_c,
                                          int batch_count, cublasComputeType_t compute_type,
                                          cublasGemmAlgo_t algo)
{
    if (batch_count < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < batch_count; i++) {
        cublasStatus_t status =
            cublasGemmEx(handle, transa, transb, m, n, k, alpha, (const float *)A + i * stride_a,
                         a_type, lda, (const float *)B + i * stride_b, b_type, ldb, beta,
                         (float *)C + i * stride_c, c_type, ldc, compute_type, algo);
        if (status != CUBLAS_STATUS_SUCCESS)
            return status;
    }
    return CUBLAS_STATUS_SUCCESS;
}
