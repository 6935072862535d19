/* The CUDA device: availability, memory, and the glue the CUDA backend is built on.
 *
 * The CUDA backend is the .cu file beside each op's .c (lib/gru.cu, aggregate/gpo.cu, ...),
 * compiled only when configure finds nvcc, cuBLAS and cuDNN (VTR_HAVE_CUDA), into
 * libvtr-cuda.so, which the first call of a CUDA function loads (lib/cuda_loader.h).
 * Without it, vtr_cuda_available() is false and every other function fails with
 * VTR_WITHOUT_CUDA's VTR_ERR_DEVICE; programs then run on CPU.
 * Per-element kernel math is shared with the CPU through VTR_HD functions (hostdevice.h).
 */
#ifndef VTR_DEVICE_H
#define VTR_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "precision.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a model's parameters and activations live and its ops run (match/model_ops.h). */
typedef enum vtr_device {
    VTR_DEVICE_CPU,
    VTR_DEVICE_CUDA,
} vtr_device;

/* The message of CUDA calls in a build without CUDA. */
#define VTR_WITHOUT_CUDA                                                                           \
    "this vtr was built without CUDA (configure found no nvcc/cuBLAS/cuDNN): run on the CPU "     \
    "(--device cpu)"

/* "cpu", "cuda" (GPU 0) or "cuda:N" -> *out and *index (0 for the CPU). Fails with
 * VTR_ERR_INVALID "unknown device 'x' (expected cpu, cuda or cuda:N)". Parsing checks no
 * hardware: vtr_cuda_init does. */
vtr_status vtr_device_parse(const char *name, vtr_device *out, int *index, vtr_error *err);

/* True when vtr was built with CUDA and a GPU is visible; how many are (0 without CUDA).
 * Never fail. */
bool vtr_cuda_available(void);
int vtr_cuda_device_count(void);

/* Whether GPU `device` exists, without selecting it or making a context: a program checks
 * its --device before it reads its data. The failures are vtr_cuda_init's (no GPU visible,
 * no GPU of that number, vtr built without CUDA). */
vtr_status vtr_cuda_check(int device, vtr_error *err);

/* Selects GPU `device`, creates the cuBLAS and cuDNN handles (once per process) and
 * writes a description ("NVIDIA H100 80GB HBM3, 79.1 GiB, cc 9.0") into name. Fails with
 * VTR_ERR_DEVICE and one line that says what to do: no GPU visible, no GPU of that number,
 * or vtr built without CUDA. */
vtr_status vtr_cuda_init(int device, char *name, size_t name_size, vtr_error *err);

vtr_status vtr_cuda_malloc(void **ptr, size_t bytes, vtr_error *err);
/* What to do when memory whose size no option changes (weights, parameters, optimizer state)
 * does not fit on the GPU: in the one line of that error. */
#define VTR_CUDA_MEMORY_REMEDY "free GPU memory: nvidia-smi lists who holds it; or --device cpu"
void vtr_cuda_free(void *ptr);
vtr_status vtr_cuda_to_device(void *dst, const void *src, size_t bytes, vtr_error *err);
vtr_status vtr_cuda_to_host(void *dst, const void *src, size_t bytes, vtr_error *err);

/* The precision of every matrix product on the GPU from now on (train.precision): float32
 * (the default); tf32 on tensor cores (operands rounded to 10 mantissa bits, float32 sums);
 * or bfloat16 on tensor cores (CUBLAS_COMPUTE_32F_FAST_16BF: operands rounded to bfloat16,
 * float32 sums, as lib/matmul.h's bfloat16 on a CPU; cuBLAS may pick a TF32 kernel instead,
 * which is closer to float32). Inputs, outputs and everything else stay float32.
 * Process-wide; after vtr_cuda_init. */
vtr_status vtr_cuda_set_precision(vtr_precision p, vtr_error *err);

/* Queued on the default stream (they return without waiting): bytes of device memory at
 * ptr set to zero; bytes copied from device src to device dst (not overlapping); height
 * rows of width bytes, row r from src + r src_pitch to dst + r dst_pitch; y (n) += x (n),
 * device floats. */
vtr_status vtr_cuda_zero(void *ptr, size_t bytes, vtr_error *err);
vtr_status vtr_cuda_copy(void *dst, const void *src, size_t bytes, vtr_error *err);
vtr_status vtr_cuda_copy_2d(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                            size_t width, size_t height, vtr_error *err);
vtr_status vtr_cuda_add(float *y, const float *x, size_t n, vtr_error *err);

/* out[i] = vtr_philox_uniform_at(seed, stream, i) for i < n, on the GPU (out is device
 * memory). Bit-identical to the CPU function by construction. */
vtr_status vtr_cuda_uniform(float *out, size_t n, uint64_t seed, uint64_t stream,
                            vtr_error *err);

/* C (m x n) = A (m x k) * B (k x n), row-major float32 device buffers, through cuBLAS. */
vtr_status vtr_cuda_matmul(const float *a, const float *b, float *c, int m, int n, int k,
                           vtr_error *err);

/* NCCL between the GPUs of a data-parallel job (lib/dist_device.h uses them;
 * lib/dist_nccl.cu): NCCL loaded, its name ("NCCL 2.28.9") in name, else
 * VTR_ERR_UNSUPPORTED with the reason; rank 0's id of a new communicator
 * (VTR_NCCL_ID_BYTES); this rank's communicator (collective over the ranks); its release;
 * vtr_dist_sum_on and _gather_rows_on over it. */
#define VTR_NCCL_ID_BYTES 128
typedef struct vtr_nccl vtr_nccl;
vtr_status vtr_cuda_nccl_load(char *name, size_t name_size, vtr_error *err);
vtr_status vtr_cuda_nccl_id(char *id, vtr_error *err);
vtr_status vtr_cuda_nccl_init(vtr_nccl **out, const char *id, int rank, int size, vtr_error *err);
void vtr_cuda_nccl_free(vtr_nccl *c);
vtr_status vtr_cuda_nccl_sum(vtr_nccl *c, float *buf, size_t n, vtr_error *err);
vtr_status vtr_cuda_nccl_gather_rows(vtr_nccl *c, void *buf, size_t row_bytes, int64_t total,
                                     vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
