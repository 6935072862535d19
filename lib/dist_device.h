/* lib/dist.h's collectives of a data-parallel training step on arrays in a device's
 * memory (lib/device.h): the gradients' sum, the gather of the batch's embeddings and the
 * way back. On the CPU they are lib/dist.h's calls. On GPUs they go one of two ways,
 * which vtr_dist_device_init chooses for the job:
 * - NCCL, where every rank can load it and has a GPU of its own: the ranks' GPUs exchange
 *   the arrays directly (lib/dist_nccl.cu), and sum them in rank order as lib/dist.c does;
 * - otherwise through host memory: this rank's part is copied down, the host's collective
 *   runs (MPI), and the result is copied back up (ranks may share a GPU).
 * Both keep lib/dist.h's rank order: the same sums, to the byte, either way.
 *
 * All but vtr_dist_own_rows_on are collective (lib/dist.h). With one process they copy
 * nothing.
 */
#ifndef VTR_DIST_DEVICE_H
#define VTR_DIST_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/device.h"
#include "lib/dist.h"
#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Chooses how the ranks' GPUs exchange (dev VTR_DEVICE_CUDA, more than one rank; after
 * vtr_cuda_init on every rank): NCCL when every rank loads it (VTR_NCCL_LIBRARY, else
 * libnccl.so.2; VTR_NCCL_LIBRARY=none: never) and its communicator forms (NCCL refuses two
 * ranks on one GPU), else host memory. Writes which into how ("NCCL 2.28.9", or "host
 * memory (NCCL: the reason)", the lowest failing rank's). Collective; fails only when MPI
 * does. Nothing to do on the CPU or alone. vtr_dist_finalize releases the communicator. */
vtr_status vtr_dist_device_init(vtr_dist *d, vtr_device dev, char *how, size_t how_size,
                                vtr_error *err);

/* buf (n floats in dev's memory) of every rank -> their sum in rank order (vtr_dist_sum),
 * on every rank. */
vtr_status vtr_dist_sum_on(vtr_dist *d, vtr_device dev, float *buf, size_t n, vtr_error *err);

/* vtr_dist_gather_rows on buf in dev's memory: this rank's `count` rows of row_bytes at its
 * start -> every rank's rows (`total` in all), in rank order, this rank's at row `first`;
 * the ranks' rows are vtr_dist_share's of total. */
vtr_status vtr_dist_gather_rows_on(vtr_dist *d, vtr_device dev, void *buf, size_t row_bytes,
                                   int64_t first, int64_t count, int64_t total, vtr_error *err);

/* vtr_dist_own_rows on buf in dev's memory: rows first .. first+count-1 -> its start. */
vtr_status vtr_dist_own_rows_on(vtr_device dev, void *buf, size_t row_bytes, int64_t first,
                                int64_t count, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
