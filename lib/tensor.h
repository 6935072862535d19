/* The one tensor type of vtr: a dtype, a shape and a pointer to C-ordered data.
 *
 * A vtr_tensor does not own its data; whoever filled it says who does (a mapped file,
 * a record buffer, a caller's malloc). Shapes are int64 to match NPY and safetensors.
 */
#ifndef VTR_TENSOR_H
#define VTR_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "hostdevice.h"

#define VTR_MAX_DIMS 8

typedef enum vtr_dtype {
    VTR_F32,
    VTR_F16,
    VTR_BF16,
    VTR_U8,
    VTR_I32,
    VTR_I64,
    VTR_DTYPE_COUNT
} vtr_dtype;

typedef struct vtr_tensor {
    vtr_dtype dtype;
    int ndim;                      /* 0 .. VTR_MAX_DIMS; 0 is a scalar (one element) */
    int64_t shape[VTR_MAX_DIMS];
    void *data;
} vtr_tensor;

/* Bytes per element. */
size_t vtr_dtype_size(vtr_dtype dtype);

/* numpy-style name: "float32", "float16", "bfloat16", "uint8", "int32", "int64". */
const char *vtr_dtype_name(vtr_dtype dtype);

int64_t vtr_tensor_numel(const vtr_tensor *t);
size_t vtr_tensor_nbytes(const vtr_tensor *t);

/* The index of the first NaN or infinite element of t (float32, float16 or bfloat16; the
 * data may be unaligned), or -1 when every element is finite or t is of another dtype.
 * Where values enter (imports, stores, weights, checkpoints) so that a NaN is reported
 * with its item instead of turning embeddings into NaN. */
int64_t vtr_tensor_first_non_finite(const vtr_tensor *t);

/* Byte size of an array of this dtype and shape, for parsers of untrusted headers:
 * fails with VTR_ERR_FORMAT on a negative dimension, more than VTR_MAX_DIMS dimensions,
 * or a product that overflows or exceeds `limit` bytes. */
vtr_status vtr_shape_nbytes(vtr_dtype dtype, int ndim, const int64_t *shape, size_t limit,
                            size_t *nbytes, vtr_error *err);

/* Writes "(2, 3, 4)" into buf (always NUL-terminated), for messages. */
const char *vtr_shape_str(int ndim, const int64_t *shape, char *buf, size_t size);

/* IEEE half and bfloat16 conversions (round to nearest even; NaN and Inf preserved). The
 * bfloat16 ones are shared with the CUDA kernels (features/conv.cu). */
float vtr_half_to_float(uint16_t h);
uint16_t vtr_float_to_half(float f);

static VTR_HD float vtr_bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static VTR_HD uint16_t vtr_float_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

#endif
