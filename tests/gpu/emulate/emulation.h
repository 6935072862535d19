// tests/gpu/emulate/emulation.h: what the CPU emulation's own files share (runtime.cc,
// launch.cc, cublas.cc, cudnn.cc); the .cu files see only include/.
#pragma once

#include <stddef.h>

#include "cuda_runtime.h"

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
