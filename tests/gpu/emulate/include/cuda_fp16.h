// tests/gpu/emulate/include/cuda_fp16.h: CUDA's half type as the CPU emulation gives it, for
// index/topk.cu: IEEE binary16 (the compiler's _Float16), widened exactly.
#pragma once

#include "cuda_runtime.h"

struct __half {
    _Float16 value;
};
struct alignas(4) __half2 {
    __half x, y;
};

static inline float __half2float(__half h)
{
    return (float)h.value;
}

static inline float2 __half22float2(__half2 h)
{
    return {(float)h.x.value, (float)h.y.value};
}
