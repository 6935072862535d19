// tests/gpu/emulate/emulation.h: what the CPU emulation's own files share (runtime.cc,
// launch.cc, libraries.cc); the .cu files see only include/.
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
