/* Inputs copied to the GPU while the previous step computes: a stage holds a few slots,
 * each a pinned host buffer and a device buffer of the same size, and a copy stream of its
 * own, so that one thread fills slot k and starts its copy while the default stream still
 * computes on slot k' (the trainer's batch thread, match/batch_ahead.h, stages batch n+1
 * during step n).
 *
 * A slot's cycle; its calls in this order, each from any thread:
 *
 *   vtr_cuda_stage_host(s, k, &h, err)         waits until the slot's last copy has left h
 *   ... write the inputs into h ...
 *   vtr_cuda_stage_upload(s, k, bytes, err)    copies h's first bytes to the device buffer
 *                                              on the stage's stream, once the default
 *                                              stream has passed the slot's last release
 *   vtr_cuda_stage_take(s, k, &d, err)         work queued on the default stream from now
 *                                              on runs after that copy; d: the device buffer
 *   ... queue the work that reads d ...
 *   vtr_cuda_stage_release(s, k, st, err)      the work queued so far is the last to read d
 *                                              before the slot's next copy
 *
 * Only _host waits, and only for the slot's own copy; the rest queue and return. The copy
 * stream does not synchronize with the default stream (cudaStreamNonBlocking): copies and
 * kernels overlap, and two events per slot order them as above. Every call makes the
 * stage's GPU current on the calling thread (cudaSetDevice is per thread). Failures are
 * VTR_ERR_DEVICE with CUDA's message, naming the stage's call; in a build without CUDA,
 * VTR_WITHOUT_CUDA's. In libvtr-cuda.so (lib/cuda_loader.h).
 */
#ifndef VTR_UPLOAD_STAGE_H
#define VTR_UPLOAD_STAGE_H

#include <stddef.h>

#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_CUDA_STAGE_MAX_SLOTS 4

typedef struct vtr_cuda_stage vtr_cuda_stage;

/* n_slots (1 .. VTR_CUDA_STAGE_MAX_SLOTS) slots of bytes each on the current GPU
 * (vtr_cuda_init); when memory runs out the message names which and how much. */
vtr_status vtr_cuda_stage_new(vtr_cuda_stage **out, int n_slots, size_t bytes, vtr_error *err);
/* Waits for the stage's copies and the default stream's work, then frees it (NULL
 * allowed). */
void vtr_cuda_stage_free(vtr_cuda_stage *s);

vtr_status vtr_cuda_stage_host(vtr_cuda_stage *s, int slot, void **host, vtr_error *err);
vtr_status vtr_cuda_stage_upload(vtr_cuda_stage *s, int slot, size_t bytes, vtr_error *err);
vtr_status vtr_cuda_stage_take(vtr_cuda_stage *s, int slot, void **dev, vtr_error *err);
/* st: the status so far of the call whose work read the slot; returned unless it is
 * VTR_OK (err then untouched), else the release's own. */
vtr_status vtr_cuda_stage_release(vtr_cuda_stage *s, int slot, vtr_status st, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
