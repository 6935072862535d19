// tests/gpu/emulate/emulation.h: what the CPU emulation's own files share (runtime.cc,
// launch.cc, cublas.cc, cudnn.cc, cudnn_rnn.cc); the .cu files see only include/.
#pragma once

#include <stddef.h>

#include <type_traits>

#include "cuda_runtime.h"
#include "cudnn.h"

// Stops the process with "EMU ERROR: " and the message: a misuse of CUDA that a GPU would
// turn into a wrong result, a crash or a CUDA error later.
[[noreturn]] void emu_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

// Stops (emu_fail) unless ptr .. ptr + bytes lies inside one device allocation; what names
// the call and the operand.
void emu_check_device(const void *ptr, size_t bytes, const char *what);

// What the next cudaGetLastError returns.
void emu_set_last_error(cudaError_t error);

// x rounded to `kept` of float32's 23 mantissa bits (TF32: 10, bfloat16: 7), to nearest, ties
// to even; infinities and NaNs as they are (cublas.cc).
float emu_round_mantissa(float x, int kept);

// A tensor descriptor's (n, c, h, w); n is 0 when it was never set (cudnn.cc).
void emu_cudnn_tensor_shape(cudnnTensorDescriptor_t desc, int shape[4]);

// cudnnCreateNAME and cudnnDestroyNAME of a descriptor type: a new, value-initialized object
// (zeros, or its members' defaults), and its delete.
#define EMU_CUDNN_DESCRIPTOR_CALLS(NAME, TYPE)                                                     \
    cudnnStatus_t cudnnCreate##NAME(TYPE *d)                                                       \
    {                                                                                              \
        *d = new std::remove_pointer_t<TYPE>();                                                    \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }                                                                                              \
    cudnnStatus_t cudnnDestroy##NAME(TYPE d)                                                       \
    {                                                                                              \
        delete d;                                                                                  \
        return CUDNN_STATUS_SUCCESS;                                                               \
    }
