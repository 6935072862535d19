// tests/gpu/emulate/include/cudnn.h: the cuDNN calls that lib/device.cu makes at start-up
// (a handle, its error text), as the CPU emulation gives them (libraries.cc). No convolution:
// features/conv.cu, vtr's cuDNN engine, is left out of the emulation.
#pragma once

typedef struct emu_cudnn *cudnnHandle_t;
typedef int cudnnStatus_t;
enum { CUDNN_STATUS_SUCCESS = 0 };

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle);
const char *cudnnGetErrorString(cudnnStatus_t status);
