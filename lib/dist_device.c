/* Data-parallel collectives on device arrays (dist_device.h). */
#include "dist_device.h"

#include <stdio.h>
#include <stdlib.h>

/* *out = d's host staging area, grown to at least `bytes`. */
static vtr_status staging(vtr_dist *d, size_t bytes, void **out, vtr_error *err)
{
    if (bytes > d->staging_size) {
        void *p = realloc(d->staging, bytes);
        if (!p)
            return vtr_fail(err, VTR_ERR_NOMEM,
                            "out of memory for a %zu-byte copy of device memory", bytes);
        d->staging = p;
        d->staging_size = bytes;
    }
    *out = d->staging;
    return VTR_OK;
}

vtr_status vtr_dist_device_init(vtr_dist *d, vtr_device dev, char *how, size_t how_size,
                                vtr_error *err)
{
    snprintf(how, how_size, "%s", dev == VTR_DEVICE_CPU ? "MPI" : "host memory");
    if (dev == VTR_DEVICE_CPU || d->size == 1 || d->nccl)
        return VTR_OK;
    /* every rank loads NCCL, or the lowest failing rank's reason is every rank's */
    char name[64];
    vtr_error e, job;
    vtr_status st = vtr_cuda_nccl_load(name, sizeof name, &e);
    job = e;
    if (vtr_dist_agree(d, st, &job) == VTR_OK) {
        /* rank 0's id of the communicator (with its status), then every rank joins */
        struct {
            int status;
            char id[VTR_NCCL_ID_BYTES];
        } id = {VTR_OK, {0}};
        if (d->rank == 0)
            id.status = vtr_cuda_nccl_id(id.id, &e);
        VTR_TRY(vtr_dist_broadcast(d, &id, sizeof id, 0, err));
        st = id.status;
        if (st == VTR_OK)
            st = vtr_cuda_nccl_init(&d->nccl, id.id, d->rank, d->size, &e);
        else if (d->rank > 0)
            vtr_fail(&e, st, "rank 0 could not make the communicator's id");
        job = e;
        if (vtr_dist_agree(d, st, &job) == VTR_OK) {
            snprintf(how, how_size, "%s", name);
            return VTR_OK;
        }
        vtr_cuda_nccl_free(d->nccl);
        d->nccl = NULL;
    }
    snprintf(how, how_size, "host memory (NCCL: %s)", job.msg);
    return VTR_OK;
}

vtr_status vtr_dist_sum_on(vtr_dist *d, vtr_device dev, float *buf, size_t n, vtr_error *err)
{
    if (dev == VTR_DEVICE_CPU)
        return vtr_dist_sum(d, buf, n, err);
    if (d->size == 1)
        return VTR_OK;
    if (d->nccl)
        return vtr_cuda_nccl_sum(d->nccl, buf, n, err);
    size_t bytes = sizeof(float) * n;
    void *host = NULL;
    VTR_TRY(staging(d, bytes, &host, err));
    VTR_TRY(vtr_cuda_to_host(host, buf, bytes, err));
    VTR_TRY(vtr_dist_sum(d, host, n, err));
    return vtr_cuda_to_device(buf, host, bytes, err);
}

vtr_status vtr_dist_gather_rows_on(vtr_dist *d, vtr_device dev, void *buf, size_t row_bytes,
                                   int64_t first, int64_t count, int64_t total, vtr_error *err)
{
    if (dev == VTR_DEVICE_CPU)
        return vtr_dist_gather_rows(d, buf, row_bytes, first, count, err);
    if (d->size == 1)
        return VTR_OK;
    int64_t f, k;
    vtr_dist_share(total, d->rank, d->size, &f, &k);
    if (d->nccl && (f != first || k != count))
        return vtr_fail(err, VTR_ERR_INVALID,
                        "rows %lld .. %lld of %lld are not rank %d's "
                        "share",
                        (long long)first, (long long)(first + count - 1), (long long)total,
                        d->rank);
    if (d->nccl)
        return vtr_cuda_nccl_gather_rows(d->nccl, buf, row_bytes, total, err);
    void *all = NULL;
    VTR_TRY(staging(d, row_bytes * (size_t)total, &all, err));
    char *host = all;
    char *mine = host + row_bytes * (size_t)first;
    VTR_TRY(vtr_cuda_to_host(mine, buf, row_bytes * (size_t)count, err));
    VTR_TRY(vtr_dist_gather(d, mine, row_bytes * (size_t)count, host, err));
    return vtr_cuda_to_device(buf, host, row_bytes * (size_t)total, err);
}

vtr_status vtr_dist_own_rows_on(vtr_device dev, void *buf, size_t row_bytes, int64_t first,
                                int64_t count, vtr_error *err)
{
    if (dev == VTR_DEVICE_CPU) {
        vtr_dist_own_rows(buf, row_bytes, first, count);
        return VTR_OK;
    }
    if (first == 0)
        return VTR_OK;
    /* in pieces of at most `first` rows, which never overlap their destination */
    char *b = buf;
    vtr_status st = VTR_OK;
    for (int64_t r = 0; r < count && st == VTR_OK; r += first) {
        int64_t n = count - r < first ? count - r : first;
        st = vtr_cuda_copy(b + row_bytes * (size_t)r, b + row_bytes * (size_t)(first + r),
                           row_bytes * (size_t)n, err);
    }
    return st;
}
