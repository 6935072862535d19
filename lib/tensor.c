#include "tensor.h"

#include <stdio.h>
#include <string.h>

static const struct {
    size_t size;
    const char *name;
} dtype_info[VTR_DTYPE_COUNT] = {
    [VTR_F32] = {4, "float32"}, [VTR_F16] = {2, "float16"}, [VTR_BF16] = {2, "bfloat16"},
    [VTR_U8] = {1, "uint8"},    [VTR_I32] = {4, "int32"},   [VTR_I64] = {8, "int64"},
};

size_t vtr_dtype_size(vtr_dtype dtype)
{
    return (unsigned)dtype < VTR_DTYPE_COUNT ? dtype_info[dtype].size : 0;
}

const char *vtr_dtype_name(vtr_dtype dtype)
{
    return (unsigned)dtype < VTR_DTYPE_COUNT ? dtype_info[dtype].name : "invalid";
}

int64_t vtr_tensor_numel(const vtr_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int64_t vtr_tensor_first_non_finite(const vtr_tensor *t)
{
    int64_t n = vtr_tensor_numel(t);
    const unsigned char *p = t->data;
    if (t->dtype == VTR_F32) {
        for (int64_t i = 0; i < n; i++) {
            uint32_t u; /* exponent all ones: NaN or infinity */
            memcpy(&u, p + 4 * i, sizeof u);
            if ((u & 0x7f800000u) == 0x7f800000u)
                return i;
        }
    } else if (t->dtype == VTR_F16 || t->dtype == VTR_BF16) {
        uint16_t mask = t->dtype == VTR_F16 ? 0x7c00u : 0x7f80u;
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h);
            if ((h & mask) == mask)
                return i;
        }
    }
    return -1;
}

size_t vtr_tensor_nbytes(const vtr_tensor *t)
{
    return (size_t)vtr_tensor_numel(t) * vtr_dtype_size(t->dtype);
}

vtr_status vtr_shape_nbytes(vtr_dtype dtype, int ndim, const int64_t *shape, size_t limit,
                            size_t *nbytes, vtr_error *err)
{
    if (ndim < 0 || ndim > VTR_MAX_DIMS)
        return vtr_fail(err, VTR_ERR_FORMAT, "%d dimensions (at most %d)", ndim, VTR_MAX_DIMS);
    size_t total = vtr_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "negative dimension %lld",
                            (long long)shape[i]);
        if (shape[i] != 0 && total > limit / (uint64_t)shape[i]) {
            char buf[160];
            return vtr_fail(err, VTR_ERR_FORMAT, "shape %s is too large",
                            vtr_shape_str(ndim, shape, buf, sizeof buf));
        }
        total *= (size_t)shape[i];
    }
    if (total > limit)
        return vtr_fail(err, VTR_ERR_FORMAT, "array of %zu bytes is too large", total);
    *nbytes = total;
    return VTR_OK;
}

const char *vtr_shape_str(int ndim, const int64_t *shape, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld",
                                 (long long)shape[i]);
    if (used < size)
        snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
    return buf;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float vtr_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) /* Inf / NaN */
        return bits_float(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
        if (mant == 0)
            return bits_float(sign);
        /* subnormal half: mant * 2^-24 is exact in float */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t vtr_float_to_half(float f)
{
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* Inf or NaN (keep a quiet NaN) */
        return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow to Inf */
        return sign | 0x7c00;
    if (abs < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
        if (abs < 0x33000000u) /* below half of the smallest subnormal */
            return sign;
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - exp; /* 14 .. 24 */
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return sign | (uint16_t)half;
    }
    /* normal: rebias exponent, round mantissa 23 -> 10 bits to nearest even */
    uint32_t h = ((abs - 0x38000000u) >> 13);
    uint32_t rem = abs & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}
