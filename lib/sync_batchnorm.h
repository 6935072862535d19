/* BatchNorm in training mode over the rows of every rank of a data-parallel job
 * (lib/dist.h): PyTorch's SyncBatchNorm. Each rank holds N of the global batch's N_global
 * rows; the statistics are the global batch's (column sums in double, summed over the
 * ranks in rank order: the mean, then the squared deviations from it), so the ranks
 * together compute what lib/norm.h's vtr_batchnorm_forward / _backward compute on the
 * whole batch in one process, to rounding. With one process they are those functions.
 *
 * The weight and bias gradients accumulate this rank's rows' share (the trainer sums the
 * parameter gradients over the ranks); the input gradients use the global sums.
 *
 * On a GPU (dev VTR_DEVICE_CUDA, every array but the host's in device memory) the
 * per-rank sums are computed there, and only they (C doubles) and the statistics (C
 * floats each) travel through host memory: the host sums them over the ranks and derives
 * the statistics exactly as on the CPU, so both devices give the same statistics from the
 * same sums.
 */
#ifndef VTR_SYNC_BATCHNORM_H
#define VTR_SYNC_BATCHNORM_H

#include <stdint.h>

#include "lib/device.h"
#include "lib/dist.h"
#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out (N,C), mean (C), rstd (C), running_mean / running_var (C) updated as
 * vtr_batchnorm_forward does (unbiased variance over N_global rows); inp (N,C) this rank's
 * rows; scratch (2 C) doubles in dev's memory. Collective. */
vtr_status vtr_sync_batchnorm_forward(vtr_dist *d, vtr_device dev, float *out, float *mean,
                                      float *rstd, float *running_mean, float *running_var,
                                      const float *inp, const float *weight, const float *bias,
                                      int N, int C, int64_t N_global, float momentum, float eps,
                                      double *scratch, vtr_error *err);

/* dinp (N,C) +=, dweight, dbias (C) += (this rank's share); dout (N,C); the forward's inp,
 * mean and rstd; scratch (2 C) doubles in dev's memory. Collective. */
vtr_status vtr_sync_batchnorm_backward(vtr_dist *d, vtr_device dev, float *dinp, float *dweight,
                                       float *dbias, const float *dout, const float *inp,
                                       const float *weight, const float *mean, const float *rstd,
                                       int N, int C, int64_t N_global, double *scratch,
                                       vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
