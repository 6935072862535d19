/* The values of the arrays that the interop tests exchange with numpy: element i (in C
 * order) of a test array is derived from pattern_base(i). tests/interop/pattern.py
 * computes the same values; change both together.
 *
 *   F32, F16, BF16: pattern_base(i) * 0.25   (exact in all three)
 *   U8:             pattern_base(i) + 100    (0 .. 255)
 *   I32:            pattern_base(i) * 65537
 *   I64:            pattern_base(i) * 4294967311
 */
#ifndef VTR_TEST_PATTERN_H
#define VTR_TEST_PATTERN_H

#include <stdlib.h>
#include <string.h>

#include "lib/tensor.h"

static inline int pattern_base(size_t i)
{
    return (int)((i * 37 + 11) % 256) - 100;
}

/* Element i as a double (exact for every dtype above). */
static inline double pattern_value(vtr_dtype dtype, size_t i)
{
    int b = pattern_base(i);
    switch (dtype) {
    case VTR_F32: case VTR_F16: case VTR_BF16: return b * 0.25;
    case VTR_U8: return b + 100;
    case VTR_I32: return (double)b * 65537;
    case VTR_I64: return (double)b * 4294967311.0;
    default: return 0;
    }
}

/* Element i of t read as a double; memcpy, so t->data may be unaligned. */
static inline double tensor_value(const vtr_tensor *t, size_t i)
{
    const unsigned char *p = (const unsigned char *)t->data + i * vtr_dtype_size(t->dtype);
    float f;
    uint16_t h;
    int32_t i32;
    int64_t i64;
    switch (t->dtype) {
    case VTR_F32: memcpy(&f, p, 4); return f;
    case VTR_F16: memcpy(&h, p, 2); return vtr_half_to_float(h);
    case VTR_BF16: memcpy(&h, p, 2); return vtr_bf16_to_float(h);
    case VTR_U8: return *p;
    case VTR_I32: memcpy(&i32, p, 4); return i32;
    case VTR_I64: memcpy(&i64, p, 8); return (double)i64;
    default: return 0;
    }
}

/* A tensor of dtype and shape holding the pattern, in a malloc'ed buffer (free t.data). */
static inline vtr_tensor pattern_tensor(vtr_dtype dtype, int ndim, const int64_t *shape)
{
    vtr_tensor t = {.dtype = dtype, .ndim = ndim};
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    size_t n = (size_t)vtr_tensor_numel(&t), size = vtr_dtype_size(dtype);
    unsigned char *data = malloc(n * size + 1);
    for (size_t i = 0; i < n; i++) {
        double v = pattern_value(dtype, i);
        unsigned char *p = data + i * size;
        float f = (float)v;
        uint16_t h;
        int32_t i32 = (int32_t)v;
        int64_t i64 = (int64_t)v;
        switch (dtype) {
        case VTR_F32: memcpy(p, &f, 4); break;
        case VTR_F16: h = vtr_float_to_half(f); memcpy(p, &h, 2); break;
        case VTR_BF16: h = vtr_float_to_bf16(f); memcpy(p, &h, 2); break;
        case VTR_U8: *p = (unsigned char)v; break;
        case VTR_I32: memcpy(p, &i32, 4); break;
        case VTR_I64: memcpy(p, &i64, 8); break;
        default: break;
        }
    }
    t.data = data;
    return t;
}

/* The index of the first element of t that differs from the pattern, or -1. */
static inline long pattern_mismatch(const vtr_tensor *t)
{
    size_t n = (size_t)vtr_tensor_numel(t);
    for (size_t i = 0; i < n; i++)
        if (tensor_value(t, i) != pattern_value(t->dtype, i))
            return (long)i;
    return -1;
}

#endif
