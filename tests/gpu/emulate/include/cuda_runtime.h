// tests/gpu/emulate/include/cuda_runtime.h: the CUDA runtime that vtr's .cu files call, as
// the CPU emulation gives it (tests/gpu/emulate/run.sh says what it checks and what not).
// The emulation compiles every .cu file with this header included first, as nvcc does;
// cu_to_cc.py has turned each kernel launch into an emu_launch call. Only what the .cu files
// use is declared: no dim3 launches (one-dimensional grids and blocks), warp collectives of
// whole warps only, no atomics.
#pragma once

#include <functional>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// Static shared memory is one object per kernel, shared by the block's threads: they run on
// one host thread (launch.cc). cu_to_cc.py fills it with 0xFF bytes at each block's start.
#define __shared__ static

typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
typedef int cudaDataType;
enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef struct emu_stream *cudaStream_t;
typedef struct emu_event *cudaEvent_t;
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    int major;
    int minor;
    int multiProcessorCount;
};

cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);

cudaError_t cudaMalloc(void **ptr, size_t bytes);
template <class T> static inline cudaError_t cudaMalloc(T **ptr, size_t bytes)
{
    return cudaMalloc((void **)ptr, bytes);
}
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
template <class T> static inline cudaError_t cudaMallocHost(T **ptr, size_t bytes)
{
    return cudaMallocHost((void **)ptr, bytes);
}
cudaError_t cudaFreeHost(void *ptr);

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream = 0);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream = 0);

cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);

// ---- kernels (launch.cc)

struct emu_dim3 {
    unsigned x;
    unsigned y;
    unsigned z;
};
// Per host thread, as each may launch kernels. Initial-exec: read straight from the thread
// pointer, not through __tls_get_addr on every access from libvtr-cuda.so's kernels (a few
// bytes of the static TLS that glibc keeps for libraries loaded later).
#define EMU_THREAD_LOCAL thread_local __attribute__((tls_model("initial-exec")))

// the running kernel thread's coordinates, set by emu_launch before it resumes the thread
extern EMU_THREAD_LOCAL emu_dim3 threadIdx;
extern EMU_THREAD_LOCAL emu_dim3 blockIdx;
extern EMU_THREAD_LOCAL emu_dim3 blockDim;
extern EMU_THREAD_LOCAL emu_dim3 gridDim;
// the launch's dynamic shared memory (extern __shared__), filled with 0xFF at each block's
// start
extern EMU_THREAD_LOCAL void *emu_dynamic_shared;

// kernel<<<grid, block, shared_bytes>>>(args), rewritten by cu_to_cc.py as
// emu_launch(grid, block, shared_bytes, [&] { kernel(args); }): runs the kernel at once, on
// the default stream; thread_body is one thread's run of the kernel.
void emu_launch(unsigned grid, unsigned block, size_t shared_bytes,
                const std::function<void()> &thread_body);

// Blocks of block_threads threads that one multiprocessor holds at once, by its limit of
// threads alone (the emulation knows no kernel's registers or static shared memory).
cudaError_t emu_occupancy(int *blocks, int block_threads, size_t dynamic_shared);
template <class Kernel>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, Kernel,
                                                                        int block_threads,
                                                                        size_t dynamic_shared)
{
    return emu_occupancy(blocks, block_threads, dynamic_shared);
}

// Every thread of the block reaches it before any goes past it.
void __syncthreads(void);

// ---- warp collectives (launch.cc): all 32 lanes of the warp reach the same one before any
// goes past it (mask must be 0xffffffff)

// The value that lane source of the calling thread's warp gave to the collective what.
uint64_t emu_warp_collective(const char *what, unsigned mask, uint64_t value, unsigned source);

template <class T>
static inline T emu_shuffle(const char *what, unsigned mask, T value, unsigned source)
{
    static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
    uint64_t bits = 0;
    memcpy(&bits, &value, sizeof value);
    bits = emu_warp_collective(what, mask, bits, source);
    memcpy(&value, &bits, sizeof value);
    return value;
}

// lane source's value
template <class T> static inline T __shfl_sync(unsigned mask, T value, int source)
{
    return emu_shuffle("__shfl_sync", mask, value, (unsigned)source % 32);
}

// lane + delta's value, or the lane's own past lane 31
template <class T> static inline T __shfl_down_sync(unsigned mask, T value, unsigned delta)
{
    unsigned lane = threadIdx.x % 32;
    return emu_shuffle("__shfl_down_sync", mask, value, lane + delta < 32 ? lane + delta : lane);
}

static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    emu_warp_collective("__syncwarp", mask, 0, threadIdx.x % 32);
}

// ---- vector types and loads through the read-only cache

struct float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};

// Stops: a load of bytes at p, not aligned to them (a GPU's load faults).
[[noreturn]] void emu_fail_misaligned(const void *p, size_t bytes);

// *p; stops where p is not aligned to T
template <class T> static inline T __ldg(const T *p)
{
    if ((uintptr_t)p % alignof(T))
        emu_fail_misaligned(p, sizeof(T));
    return *p;
}

// Fills a block's static shared variable with 0xFF bytes (NaN as floats), once per block: from
// the first of its threads to reach the declaration.
void emu_poison_shared(void *variable, size_t bytes);
