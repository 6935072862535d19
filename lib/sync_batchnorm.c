/* SyncBatchNorm (sync_batchnorm.h). */
#include "sync_batchnorm.h"

#include <math.h>
#include <stdlib.h>

#include "lib/nn.h"
#include "lib/nn_cuda.h"
#include "lib/norm.h"

#define PARALLEL_MIN 65536

/* The columns of inp (N,C) per block of VTR_COLUMN_BLOCK, in parallel: their sums (center
 * NULL) or squared deviations (sums), or their backward sums (sdy, sdyx, dweight, dbias;
 * dout, mean and rstd set). */
static void column_blocks(double *sums, double *sdyx, float *dweight, float *dbias,
                          const float *dout, const float *inp, const float *center,
                          const float *rstd, int N, int C)
{
    int blocks = (C + VTR_COLUMN_BLOCK - 1) / VTR_COLUMN_BLOCK;
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * VTR_COLUMN_BLOCK;
        int nc = C - c0 < VTR_COLUMN_BLOCK ? C - c0 : VTR_COLUMN_BLOCK;
        if (dout)
            vtr_batchnorm_grad_sums_columns(sums, sdyx, dweight, dbias, dout, inp, center, rstd, N,
                                            C, c0, nc);
        else
            vtr_batchnorm_sums_columns(sums, inp, center, N, C, c0, nc);
    }
}

/* n doubles at dev_sums (dev's memory) -> their sum over the ranks at host (host memory;
 * on the CPU the same array), and back into dev_sums. */
static vtr_status sum_over_ranks(vtr_dist *d, vtr_device dev, double *dev_sums, double *host,
                                 size_t n, vtr_error *err)
{
    if (dev == VTR_DEVICE_CPU)
        return vtr_dist_sum_double(d, dev_sums, n, err);
    VTR_TRY(vtr_cuda_to_host(host, dev_sums, sizeof(double) * n, err));
    VTR_TRY(vtr_dist_sum_double(d, host, n, err));
    return vtr_cuda_to_device(dev_sums, host, sizeof(double) * n, err);
}

/* The host's arrays of one call: on the CPU, the caller's (the statistics and scratch);
 * on a GPU, copies (2 C doubles, then 4 C floats). */
typedef struct host_arrays {
    double *sums, *ss;
    float *mean, *rstd, *running_mean, *running_var;
    void *owned;
} host_arrays;

static vtr_status host_arrays_init(host_arrays *h, vtr_device dev, double *scratch, float *mean,
                                   float *rstd, float *running_mean, float *running_var, int C,
                                   vtr_error *err)
{
    *h = (host_arrays){scratch, scratch + C, mean, rstd, running_mean, running_var, NULL};
    if (dev == VTR_DEVICE_CPU)
        return VTR_OK;
    size_t n = (size_t)C;
    h->owned = malloc(sizeof(double) * 2 * n + sizeof(float) * 4 * n);
    if (!h->owned)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for BatchNorm's statistics");
    h->sums = h->owned, h->ss = h->sums + n;
    h->mean = (float *)(h->ss + n), h->rstd = h->mean + n;
    h->running_mean = h->rstd + n, h->running_var = h->running_mean + n;
    return VTR_OK;
}

/* This rank's column sums (center NULL) or squared deviations of inp (N,C) -> host (C); on
 * a GPU computed in dev_sums (C, device) first. */
static vtr_status rank_sums(vtr_device dev, double *host, double *dev_sums, const float *inp,
                            const float *center, int N, int C, vtr_error *err)
{
    if (dev == VTR_DEVICE_CPU) {
        column_blocks(host, NULL, NULL, NULL, NULL, inp, center, NULL, N, C);
        return VTR_OK;
    }
    VTR_TRY(vtr_cuda_batchnorm_sums(dev_sums, inp, center, N, C, err));
    return vtr_cuda_to_host(host, dev_sums, sizeof(double) * (size_t)C, err);
}

/* n floats each: to the device (up) or the host, pairs (dst, src) of arrays; nothing on the
 * CPU, where they are the same arrays. */
static vtr_status move(vtr_device dev, bool up, float *const *dst, float *const *src, int pairs,
                       int n, vtr_error *err)
{
    vtr_status st = VTR_OK;
    for (int i = 0; i < pairs && st == VTR_OK && dev == VTR_DEVICE_CUDA; i++)
        st = up ? vtr_cuda_to_device(dst[i], src[i], sizeof(float) * (size_t)n, err)
                : vtr_cuda_to_host(dst[i], src[i], sizeof(float) * (size_t)n, err);
    return st;
}

vtr_status vtr_sync_batchnorm_forward(vtr_dist *d, vtr_device dev, float *out, float *mean,
                                      float *rstd, float *running_mean, float *running_var,
                                      const float *inp, const float *weight, const float *bias,
                                      int N, int C, int64_t N_global, float momentum, float eps,
                                      double *scratch, vtr_error *err)
{
    host_arrays h;
    vtr_status st =
        host_arrays_init(&h, dev, scratch, mean, rstd, running_mean, running_var, C, err);
    if (st)
        return st;
    float *on_dev[] = {mean, rstd, running_mean, running_var};
    float *on_host[] = {h.mean, h.rstd, h.running_mean, h.running_var};
    // the mean from the global column sums, then the variance from the global sums of
    // squared deviations from it
    if ((st = rank_sums(dev, h.sums, scratch, inp, NULL, N, C, err)) == VTR_OK &&
        (st = vtr_dist_sum_double(d, h.sums, (size_t)C, err)) == VTR_OK) {
        for (int c = 0; c < C; c++)
            h.mean[c] = (float)(h.sums[c] / (double)N_global);
        if ((st = move(dev, true, on_dev, on_host, 1, C, err)) == VTR_OK &&
            (st = rank_sums(dev, h.ss, scratch + C, inp, mean, N, C, err)) == VTR_OK &&
            (st = vtr_dist_sum_double(d, h.ss, (size_t)C, err)) == VTR_OK)
            st = move(dev, false, on_host + 2, on_dev + 2, 2, C, err);
    }
    if (st == VTR_OK) {
        for (int c = 0; c < C; c++) {
            double var = h.ss[c] / (double)N_global;
            h.rstd[c] = (float)(1.0 / sqrt(var + eps));
            h.running_mean[c] = (1.0f - momentum) * h.running_mean[c] + momentum * h.mean[c];
            h.running_var[c] = (1.0f - momentum) * h.running_var[c] +
                               momentum * (float)(h.ss[c] / (double)(N_global - 1));
        }
        st = move(dev, true, on_dev + 1, on_host + 1, 3, C, err);
    }
    free(h.owned);
    if (st)
        return st;
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_batchnorm_normalize(out, inp, mean, rstd, weight, bias, N, C, err);
    vtr_batchnorm_normalize(out, inp, mean, rstd, weight, bias, N, C);
    return VTR_OK;
}

vtr_status vtr_sync_batchnorm_backward(vtr_dist *d, vtr_device dev, float *dinp, float *dweight,
                                       float *dbias, const float *dout, const float *inp,
                                       const float *weight, const float *mean, const float *rstd,
                                       int N, int C, int64_t N_global, double *scratch,
                                       vtr_error *err)
{
    double *sdy = scratch, *sdyx = scratch + C;
    if (dev == VTR_DEVICE_CUDA) {
        double *host = malloc(sizeof(double) * 2 * (size_t)C);
        if (!host)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for BatchNorm's gradient sums");
        vtr_status st = vtr_cuda_batchnorm_grad_sums(sdy, sdyx, dweight, dbias, dout, inp, mean,
                                                     rstd, N, C, err);
        if (st == VTR_OK)
            st = sum_over_ranks(d, dev, scratch, host, 2 * (size_t)C, err);
        free(host);
        if (st)
            return st;
        return vtr_cuda_sync_batchnorm_dinput(dinp, dout, inp, weight, mean, rstd, sdy, sdyx,
                                              N_global, N, C, err);
    }
    column_blocks(sdy, sdyx, dweight, dbias, dout, inp, mean, rstd, N, C);
    VTR_TRY(sum_over_ranks(d, dev, scratch, scratch, 2 * (size_t)C, err));
#pragma omp parallel for schedule(static) if ((long)N * C > PARALLEL_MIN)
    for (int n = 0; n < N; n++) {
        size_t r = (size_t)n * C;
        for (int c = 0; c < C; c++)
            dinp[r + c] += vtr_sync_batchnorm_dinput_at(dout[r + c], inp[r + c], weight[c], mean[c],
                                                        rstd[c], sdy[c], sdyx[c], N_global);
    }
    return VTR_OK;
}
