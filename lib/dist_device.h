/* lib/dist.h's collectives of a data-parallel training step on arrays in a device's
 * memory (lib/device.h): the gradients' sum, the gather of the batch's embeddings and the
 * way back. On the CPU they are lib/dist.h's calls. On a GPU the bytes travel through host
 * memory: this rank's part is copied down, the host's collective runs (MPI), and the
 * result is copied back up, so the sums keep lib/dist.h's rank order and bytes, and a
 * job's ranks may share one GPU or use one each.
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

/* buf (n floats in dev's memory) of every rank -> their sum in rank order (vtr_dist_sum),
 * on every rank. */
vtr_status vtr_dist_sum_on(vtr_dist *d, vtr_device dev, float *buf, size_t n, vtr_error *err);

/* vtr_dist_gather_rows on buf in dev's memory: this rank's `count` rows of row_bytes at its
 * start -> every rank's rows (`total` in all), in rank order, this rank's at row `first`. */
vtr_status vtr_dist_gather_rows_on(vtr_dist *d, vtr_device dev, void *buf, size_t row_bytes,
                                   int64_t first, int64_t count, int64_t total, vtr_error *err);

/* vtr_dist_own_rows on buf in dev's memory: rows first .. first+count-1 -> its start. */
vtr_status vtr_dist_own_rows_on(vtr_device dev, void *buf, size_t row_bytes, int64_t first,
                                int64_t count, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
