// tests/gpu/emulate/runtime.cc: the CUDA runtime's memory, copies, streams, events and device
// queries for the CPU emulation (include/cuda_runtime.h).
//
// Device memory is host memory from malloc, filled with 0xFF bytes (NaN as floats, -1 as
// integers) and recorded, so that every copy, memset and cuBLAS operand is checked to lie
// inside one allocation of the right side (device or host); a kernel's own loads and stores
// are not checked (only ASan's redzones catch those, run.sh --asan). One emulated device,
// "CPU emulation" with EMU_DEVICE_MEMORY bytes (80 GiB when unset): an allocation past them,
// or a single one over 8 GiB, fails as out of memory.
//
// Streams: the default stream (0) runs each call at once. Another stream's copies and memsets
// queue and run in order when something waits for them (cudaStreamSynchronize,
// cudaEventSynchronize, cudaStreamWaitEvent, cudaDeviceSynchronize, cudaStreamDestroy): with
// EMU_COPIES=late (the default) as late as a GPU may run them, so that a missing wait reads
// 0xFF bytes or a pinned buffer rewritten too soon; with EMU_COPIES=early at once. Nothing
// runs concurrently, and the default stream never waits for work queued after it began, so a
// copy stream overwriting memory that a default-stream kernel still reads is not caught.
// The stream queues assume one host thread calls CUDA at a time.
#include "emulation.h"

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <stdarg.h>
#include <vector>

void emu_fail(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    fprintf(stderr, "EMU ERROR: ");
    vfprintf(stderr, format, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

// ---- errors and the device

static cudaError_t last_error;

void emu_set_last_error(cudaError_t error)
{
    last_error = error;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t error = last_error;
    last_error = cudaSuccess;
    return error;
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
    }
}

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

static thread_local int current_device;

cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device != 0)
        return cudaErrorInvalidValue;
    current_device = device;
    return cudaSuccess;
}

// the emulated device's memory in bytes: EMU_DEVICE_MEMORY, else 80 GiB
static size_t device_memory(void)
{
    static const size_t bytes = [] {
        const char *given = getenv("EMU_DEVICE_MEMORY");
        return given ? (size_t)strtoull(given, NULL, 10) : (size_t)80 << 30;
    }();
    return bytes;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (device != 0)
        return cudaErrorInvalidValue;
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "CPU emulation");
    prop->totalGlobalMem = device_memory();
    prop->major = 9;
    prop->minor = 0;
    prop->multiProcessorCount = 132;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    cudaDeviceProp prop;
    if (attr != cudaDevAttrMultiProcessorCount || cudaGetDeviceProperties(&prop, device))
        return cudaErrorInvalidValue;
    *value = prop.multiProcessorCount;
    return cudaSuccess;
}

// ---- allocations: start address -> bytes, device (cudaMalloc) and pinned host
// (cudaMallocHost)

typedef std::map<uintptr_t, size_t> allocation_table;

static std::mutex allocations_lock;
static allocation_table device_allocations;
static allocation_table pinned_allocations;

static const size_t largest_allocation = (size_t)8 << 30;

// Whether ptr .. ptr + bytes lies inside one allocation of table.
static bool inside_one(const allocation_table &table, const void *ptr, size_t bytes)
{
    std::lock_guard<std::mutex> hold(allocations_lock);
    uintptr_t start = (uintptr_t)ptr;
    auto after = table.upper_bound(start);
    if (after == table.begin())
        return false;
    auto found = std::prev(after);
    return start + bytes <= found->first + found->second;
}

static void *allocate(allocation_table &table, size_t bytes)
{
    void *ptr = malloc(bytes ? bytes : 1);
    if (!ptr)
        return NULL;
    memset(ptr, 0xFF, bytes);
    std::lock_guard<std::mutex> hold(allocations_lock);
    table[(uintptr_t)ptr] = bytes;
    return ptr;
}

static void release(allocation_table &table, void *ptr, const char *call)
{
    {
        std::lock_guard<std::mutex> hold(allocations_lock);
        auto found = table.find((uintptr_t)ptr);
        if (found == table.end())
            emu_fail("%s(%p): not an allocation of %s", call, ptr, call);
        table.erase(found);
    }
    free(ptr);
}

void emu_check_device(const void *ptr, size_t bytes, const char *what)
{
    if (!inside_one(device_allocations, ptr, bytes))
        emu_fail("%s: %p + %zu bytes is not inside one device allocation", what, ptr, bytes);
}

static void check_host(const void *ptr, size_t bytes, const char *what)
{
    if (inside_one(device_allocations, ptr, 0))
        emu_fail("%s: %p (+%zu bytes) is device memory where host memory is expected", what, ptr,
                 bytes);
}

// bytes of the device allocations
static size_t device_held(void)
{
    std::lock_guard<std::mutex> hold(allocations_lock);
    size_t held = 0;
    for (const auto &allocation : device_allocations)
        held += allocation.second;
    return held;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    bool fits = bytes <= largest_allocation && bytes <= device_memory() - device_held();
    *ptr = fits ? allocate(device_allocations, bytes) : NULL;
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *ptr)
{
    if (ptr)
        release(device_allocations, ptr, "cudaFree");
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes)
{
    *ptr = allocate(pinned_allocations, bytes);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *ptr)
{
    if (ptr)
        release(pinned_allocations, ptr, "cudaFreeHost");
    return cudaSuccess;
}

// ---- streams and events

struct emu_stream {
    std::deque<std::function<void()>> queued;
    uint64_t issued = 0; // calls issued on the stream, run or not
    uint64_t run = 0;    // the first `run` of them have run
};

// an event marks its stream's first `issued` calls; on the default stream, none
struct emu_event {
    emu_stream *stream = NULL;
    uint64_t issued = 0;
};

static std::vector<emu_stream *> streams;

static bool copies_run_late(void)
{
    static const bool late = [] {
        const char *order = getenv("EMU_COPIES");
        return !(order && strcmp(order, "early") == 0);
    }();
    return late;
}

// Runs stream's queued calls until its first `issued` have run.
static void run_until(emu_stream *stream, uint64_t issued)
{
    while (stream->run < issued) {
        std::function<void()> call = std::move(stream->queued.front());
        stream->queued.pop_front();
        call();
        stream->run++;
    }
}

static void issue(cudaStream_t stream, std::function<void()> call)
{
    if (!stream) {
        call();
        return;
    }
    stream->queued.push_back(std::move(call));
    stream->issued++;
    if (!copies_run_late())
        run_until(stream, stream->issued);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    *stream = new emu_stream;
    streams.push_back(*stream);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream)
        return cudaErrorInvalidResourceHandle;
    run_until(stream, stream->issued);
    std::erase(streams, stream);
    delete stream;
    return cudaSuccess;
}

// Calls that make the host wait for the GPU (a synchronize, a cudaMemcpy) so far; a test reads
// them through dlsym (tests/test_cuda_model.c).
static std::atomic<uint64_t> host_waits;

extern "C" uint64_t emu_host_waits(void)
{
    return host_waits;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    host_waits++;
    if (stream)
        run_until(stream, stream->issued);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    host_waits++;
    for (emu_stream *stream : streams)
        run_until(stream, stream->issued);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags)
{
    *event = new emu_event;
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    if (!event)
        return cudaErrorInvalidResourceHandle;
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    if (!event)
        return cudaErrorInvalidResourceHandle;
    event->stream = stream;
    event->issued = stream ? stream->issued : 0;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    host_waits++;
    if (!event)
        return cudaErrorInvalidResourceHandle;
    if (event->stream)
        run_until(event->stream, event->issued);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
    if (!event)
        return cudaErrorInvalidResourceHandle;
    // an event on the default stream, or on the waiting stream itself, has nothing to wait for
    if (!event->stream || event->stream == stream)
        return cudaSuccess;
    if (!stream) {
        run_until(event->stream, event->issued);
        return cudaSuccess;
    }
    // stream's later calls wait for the event's stream's calls before the event
    emu_stream *recorded_on = event->stream;
    uint64_t issued = event->issued;
    issue(stream, [recorded_on, issued] { run_until(recorded_on, issued); });
    return cudaSuccess;
}

// ---- copies

static void check_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                       const char *call)
{
    switch (kind) {
    case cudaMemcpyHostToDevice:
        emu_check_device(dst, bytes, call);
        check_host(src, bytes, call);
        break;
    case cudaMemcpyDeviceToHost:
        emu_check_device(src, bytes, call);
        check_host(dst, bytes, call);
        break;
    case cudaMemcpyDeviceToDevice:
        emu_check_device(src, bytes, call);
        emu_check_device(dst, bytes, call);
        break;
    default: emu_fail("%s: copy kind %d, where vtr gives the direction", call, (int)kind);
    }
}

// A copy on a stream from or to pageable memory works but is not asynchronous on a GPU.
static void warn_if_pageable(const void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                             cudaStream_t stream, const char *call)
{
    if (!stream || kind == cudaMemcpyDeviceToDevice)
        return;
    const void *host = kind == cudaMemcpyHostToDevice ? src : dst;
    if (!inside_one(pinned_allocations, host, bytes))
        fprintf(stderr, "EMU WARNING: %s on a stream from pageable host memory\n", call);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    if (bytes == 0)
        return cudaSuccess;
    check_copy(dst, src, bytes, kind, "cudaMemcpy");
    host_waits++;
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    if (bytes == 0)
        return cudaSuccess;
    check_copy(dst, src, bytes, kind, "cudaMemcpyAsync");
    warn_if_pageable(dst, src, bytes, kind, stream, "cudaMemcpyAsync");
    issue(stream, [=] { memmove(dst, src, bytes); });
    return cudaSuccess;
}

// rows of width bytes, height of them, pitch bytes apart
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                              size_t width, size_t height, cudaMemcpyKind kind, cudaStream_t stream)
{
    if (width > dst_pitch || width > src_pitch)
        return cudaErrorInvalidValue;
    if (width == 0 || height == 0)
        return cudaSuccess;
    // the span from the first row's start to the last row's end, on each side
    size_t dst_span = dst_pitch * (height - 1) + width;
    size_t src_span = src_pitch * (height - 1) + width;
    if (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
        emu_check_device(dst, dst_span, "cudaMemcpy2DAsync's destination");
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
        emu_check_device(src, src_span, "cudaMemcpy2DAsync's source");
    if (kind == cudaMemcpyHostToDevice)
        check_host(src, src_span, "cudaMemcpy2DAsync's source");
    if (kind == cudaMemcpyDeviceToHost)
        check_host(dst, dst_span, "cudaMemcpy2DAsync's destination");
    if (kind == cudaMemcpyHostToHost || kind == cudaMemcpyDefault)
        emu_fail("cudaMemcpy2DAsync: copy kind %d, where vtr gives the direction", (int)kind);
    issue(stream, [=] {
        for (size_t row = 0; row < height; row++)
            memmove((char *)dst + row * dst_pitch, (const char *)src + row * src_pitch, width);
    });
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    if (bytes == 0)
        return cudaSuccess;
    emu_check_device(ptr, bytes, "cudaMemsetAsync");
    issue(stream, [=] { memset(ptr, value, bytes); });
    return cudaSuccess;
}
