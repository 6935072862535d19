// Inputs copied to the GPU while the previous step computes (upload_stage.h).
#include <cuda_runtime.h>
#include <stdlib.h>

#include "lib/cuda_launch.h"
#include "lib/upload_stage.h"

struct vtr_cuda_stage {
    int device, n_slots;
    size_t bytes;
    cudaStream_t stream; /* the copies' own, not synchronizing with the default stream */
    struct {
        void *host, *dev;
        cudaEvent_t copied;   /* on the copy stream, after the slot's last copy */
        cudaEvent_t released; /* on the default stream, after the slot's last reader */
    } slot[VTR_CUDA_STAGE_MAX_SLOTS];
};

static vtr_status select_slot(vtr_cuda_stage *s, int slot, const char *what, vtr_error *err)
{
    if (slot < 0 || slot >= s->n_slots)
        return vtr_fail(err, VTR_ERR_INVALID, "upload stage: %s: slot %d outside 0..%d", what, slot,
                        s->n_slots - 1);
    cudaError_t rc = cudaSetDevice(s->device);
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "upload stage: set device");
}

extern "C" void vtr_cuda_stage_free(vtr_cuda_stage *s)
{
    if (!s)
        return;
    cudaSetDevice(s->device);
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    cudaStreamSynchronize(0);
    for (int k = 0; k < s->n_slots; k++) {
        cudaFreeHost(s->slot[k].host);
        cudaFree(s->slot[k].dev);
        if (s->slot[k].copied)
            cudaEventDestroy(s->slot[k].copied);
        if (s->slot[k].released)
            cudaEventDestroy(s->slot[k].released);
    }
    if (s->stream)
        cudaStreamDestroy(s->stream);
    free(s);
}

extern "C" vtr_status vtr_cuda_stage_new(vtr_cuda_stage **out, int n_slots, size_t bytes,
                                         vtr_error *err)
{
    *out = NULL;
    if (n_slots < 1 || n_slots > VTR_CUDA_STAGE_MAX_SLOTS)
        return vtr_fail(err, VTR_ERR_INVALID, "upload stage: %d slots outside 1..%d", n_slots,
                        VTR_CUDA_STAGE_MAX_SLOTS);
    vtr_cuda_stage *s = (vtr_cuda_stage *)calloc(1, sizeof *s);
    if (!s)
        return vtr_fail(err, VTR_ERR_NOMEM, "upload stage: out of memory");
    s->n_slots = n_slots;
    s->bytes = bytes;
    cudaError_t rc = cudaGetDevice(&s->device);
    vtr_status st = VTR_OK;
    if (rc != cudaSuccess)
        st = vtr_cuda_fail(err, rc, "upload stage: current device");
    else if ((rc = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess)
        st = vtr_cuda_fail(err, rc, "upload stage: copy stream");
    for (int k = 0; k < n_slots && !st; k++) {
        /* at least one byte, so that every slot has buffers of its own */
        size_t n = bytes ? bytes : 1;
        if ((st = vtr_cuda_allocated(cudaMallocHost(&s->slot[k].host, n), &s->slot[k].host,
                                     "upload stage's pinned host buffer", n, err)) ||
            (st = vtr_cuda_allocated(cudaMalloc(&s->slot[k].dev, n), &s->slot[k].dev,
                                     "upload stage's device buffer", n, err)))
            break;
        if ((rc = cudaEventCreateWithFlags(&s->slot[k].copied, cudaEventDisableTiming)) !=
                cudaSuccess ||
            (rc = cudaEventCreateWithFlags(&s->slot[k].released, cudaEventDisableTiming)) !=
                cudaSuccess)
            st = vtr_cuda_fail(err, rc, "upload stage: events");
    }
    if (st) {
        vtr_cuda_stage_free(s);
        return st;
    }
    *out = s;
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_stage_host(vtr_cuda_stage *s, int slot, void **host, vtr_error *err)
{
    VTR_TRY(select_slot(s, slot, "host buffer", err));
    /* an event never recorded counts as complete */
    cudaError_t rc = cudaEventSynchronize(s->slot[slot].copied);
    if (rc != cudaSuccess)
        return vtr_cuda_fail(err, rc, "upload stage: waiting for a copy");
    *host = s->slot[slot].host;
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_stage_upload(vtr_cuda_stage *s, int slot, size_t bytes,
                                            vtr_error *err)
{
    VTR_TRY(select_slot(s, slot, "upload", err));
    if (bytes > s->bytes)
        return vtr_fail(err, VTR_ERR_INVALID, "upload stage: %zu bytes into a slot of %zu", bytes,
                        s->bytes);
    cudaError_t rc;
    if ((rc = cudaStreamWaitEvent(s->stream, s->slot[slot].released, 0)) != cudaSuccess ||
        (rc = cudaMemcpyAsync(s->slot[slot].dev, s->slot[slot].host, bytes, cudaMemcpyHostToDevice,
                              s->stream)) != cudaSuccess ||
        (rc = cudaEventRecord(s->slot[slot].copied, s->stream)) != cudaSuccess)
        return vtr_cuda_fail(err, rc, "upload stage: copy to device");
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_stage_take(vtr_cuda_stage *s, int slot, void **dev, vtr_error *err)
{
    VTR_TRY(select_slot(s, slot, "take", err));
    cudaError_t rc = cudaStreamWaitEvent(0, s->slot[slot].copied, 0);
    if (rc != cudaSuccess)
        return vtr_cuda_fail(err, rc, "upload stage: waiting for a copy on the GPU");
    *dev = s->slot[slot].dev;
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_stage_release(vtr_cuda_stage *s, int slot, vtr_status st,
                                             vtr_error *err)
{
    vtr_error ignored;
    vtr_error *e = st ? &ignored : err; // the call's own error comes first
    vtr_status rs = select_slot(s, slot, "release", e);
    cudaError_t rc = rs ? cudaSuccess : cudaEventRecord(s->slot[slot].released, 0);
    if (rc != cudaSuccess)
        rs = vtr_cuda_fail(e, rc, "upload stage: release");
    return st ? st : rs;
}
