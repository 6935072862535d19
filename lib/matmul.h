/* The matrix products of training, in the precision the run trains in.
 *
 * vtr_matmul takes cblas_sgemm's arguments (row-major):
 *     C (M,N) = alpha * op(A) (M,K) · op(B) (K,N) + beta * C
 * In float32 (the default) it is cblas_sgemm. In bfloat16 (mixed precision, train.precision)
 * A and B are rounded to bfloat16 (to nearest even) and multiplied by oneDNN's matmul with
 * float32 accumulation and a float32 C, on AMX tiles or AVX512-BF16 where the CPU has them:
 * the products of PyTorch's CPU autocast. Everything else (the parameters, the optimizer,
 * gradients' sums, the gate and pooling math) stays float32.
 *
 * The precision is process-wide, float32 until vtr_matmul_use changes it: a trainer sets
 * it around its step, while no product runs.
 */
#ifndef VTR_MATMUL_H
#define VTR_MATMUL_H

#include <cblas.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether bfloat16 products run natively here: oneDNN's ISA is AVX512-BF16
 * (avx512_core_bf16) or AMX (avx512_core_amx) or above; elsewhere oneDNN would emulate
 * them, slower than float32. The same rule holds for the backbone's bfloat16
 * convolutions (features/conv.h). */
bool vtr_matmul_have_bf16(void);

/* The products' kernel in one line, for --version and run records: "bfloat16 products:
 * oneDNN 2.6.3, ISA avx512_core_amx" or "...: not on this CPU (ISA avx2)". */
const char *vtr_matmul_report(void);

/* Sets the precision and returns the previous one. VTR_PRECISION_BF16 on a CPU
 * without vtr_matmul_have_bf16, and VTR_PRECISION_TF32 (a GPU's), stay float32 (the
 * caller says so: vtr_matmul_check). */
vtr_precision vtr_matmul_use(vtr_precision p);
vtr_precision vtr_matmul_precision(void);

/* VTR_ERR_UNSUPPORTED naming the CPU's ISA when p is bfloat16 and this CPU lacks it, or
 * saying that tf32 is a GPU's. */
vtr_status vtr_matmul_check(vtr_precision p, vtr_error *err);

void vtr_matmul(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* A matrix used as B by many products in a row (a GRU's W_hh, once per time step): in
 * bfloat16 it is rounded once, into a buffer of the thread that held it, which the next
 * vtr_matmul_hold on that thread reuses. */
typedef struct vtr_matmul_operand {
    const float *f32;
    int ld;
    const uint16_t *bf16; /* rows x cols, row stride cols; NULL in float32 */
} vtr_matmul_operand;

/* B (rows, cols) with row stride ld, as it is stored (before any transposition). The
 * operand is valid while B is unchanged and until this thread's next hold. On failure
 * (out of memory for the copy) the operand is B's float32 alone and the products round
 * it at every call. */
vtr_matmul_operand vtr_matmul_hold(const float *B, int rows, int cols, int ld);

/* vtr_matmul with B held (tb applies to it as stored). */
void vtr_matmul_held(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                     const float *A, int lda, const vtr_matmul_operand *B, float beta, float *C,
                     int ldc);

/* Products that fell back to float32 because oneDNN failed (out of memory): 0 unless
 * something is wrong; vtr-train warns when it is not. */
int64_t vtr_matmul_fallbacks(void);

#ifdef __cplusplus
}
#endif

#endif
