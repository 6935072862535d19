/* The processes of one job: MPI's world when vtr is built with MPI (configure --with-mpi)
 * and the program was started by an MPI launcher (mpirun, or srun under Slurm); otherwise
 * one process alone, rank 0 of 1, and every call below is a copy or nothing.
 *
 * All the calls but vtr_dist_init's result and vtr_dist_abort are collective: every rank
 * makes the same calls in the same order with the same sizes. A rank that fails locally
 * (it cannot read its shard, its loss is NaN) does not return early: it passes its status
 * to vtr_dist_agree, which every rank calls, so that all of them learn the failure (and
 * its message, "rank R: ...") in the same step and stop together; no rank is left
 * waiting. Such a failure is shared (d->shared_failure), and so is one that every rank
 * meets alike, at the same call (a check of what every rank holds the same: a config, the
 * summed gradients' norm; vtr_dist_fail_alike). Any other failure is this rank's alone: one
 * inside a call that makes collectives (a training step's gathers and sums: a GPU fault, an
 * MPI error, no memory for a reduction), where the others may already wait in a collective
 * this rank skips. The program then reports it with the rank's number and ends the job
 * with vtr_dist_abort rather than leave the others waiting. A rank killed outright ends
 * the job through the launcher (Open MPI's mpirun ends the others within seconds and
 * names the rank).
 *
 * Reductions are deterministic: vtr_dist_sum adds the ranks' buffers in rank order
 * (0 + 1 + ... + N-1) whatever the transport's own algorithm would do, so a run repeated
 * on the same N gives the same bytes, and every rank holds exactly the same sum (model
 * replicas never drift apart).
 *
 *   d (rank R of N) ---- vtr_dist_sum(buf)     buf = buf_0 + buf_1 + ... + buf_N-1
 *                   ---- vtr_dist_gather(mine) all = mine_0 | mine_1 | ... | mine_N-1
 */
#ifndef VTR_DIST_H
#define VTR_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vtr_dist {
    int rank, size;
    int local_rank; /* this rank among the job's ranks on its machine (0 .. ) */
    bool mpi;       /* MPI is initialised (and must be finalised) */
    void *scratch;  /* the reductions' receive buffer, grown as needed */
    size_t scratch_size;
    void *staging; /* host copies of device arrays (lib/dist_device.h), grown */
    size_t staging_size;
    struct vtr_nccl *nccl; /* the GPUs' communicator, or NULL (lib/dist_device.h) */
    bool shared_failure;   /* the failure returned is every rank's (vtr_dist_agree's, or
                              vtr_dist_fail_alike); any other is this rank's alone */
} vtr_dist;

/* Whether the environment says an MPI launcher started this process (Open MPI's mpirun,
 * PMIx or PMI as srun sets them), whether or not this build has MPI. */
bool vtr_dist_launched(void);

/* Joins the job: MPI_Init when the build has MPI and vtr_dist_launched(), else rank 0 of
 * 1. A launched process in a build without MPI fails with VTR_ERR_UNSUPPORTED ("this vtr
 * was built without MPI: ./configure --with-mpi"), so N copies never train N separate
 * models by mistake. Fails with VTR_ERR_IO when MPI does. */
vtr_status vtr_dist_init(vtr_dist *d, int *argc, char ***argv, vtr_error *err);

/* Leaves the job (MPI_Finalize) and frees the scratch, staging and GPUs' communicator;
 * safe on a rank-0-of-1 or zeroed d. */
void vtr_dist_finalize(vtr_dist *d);

/* Ends every rank of the job at once with exit status code (MPI_Abort), for a failure
 * the ranks could not agree on (not d->shared_failure); exit(code) alone when not under MPI. */
void vtr_dist_abort(const vtr_dist *d, int code) __attribute__((noreturn));

/* buf (n) of every rank -> their sum, in rank order, on every rank. */
vtr_status vtr_dist_sum(vtr_dist *d, float *buf, size_t n, vtr_error *err);

/* The same for doubles and 64-bit integers (counts, loss sums). */
vtr_status vtr_dist_sum_double(vtr_dist *d, double *buf, size_t n, vtr_error *err);
vtr_status vtr_dist_sum_int64(vtr_dist *d, int64_t *buf, size_t n, vtr_error *err);

/* Every rank's `bytes` bytes at mine, concatenated in rank order into all (the sum of
 * every rank's bytes), on every rank. Ranks may give different sizes (0 too). mine may be
 * this rank's own place in all (in place: the bytes of the ranks before it first). */
vtr_status vtr_dist_gather(vtr_dist *d, const void *mine, size_t bytes, void *all,
                           vtr_error *err);

/* Rank root's n bytes at buf -> buf on every rank. */
vtr_status vtr_dist_broadcast(vtr_dist *d, void *buf, size_t n, int root, vtr_error *err);

/* Every rank's local status -> the job's: VTR_OK when all are; otherwise, on every rank,
 * the status and message of the lowest failing rank R, prefixed with "rank R: " when R > 0
 * (a rank that did not fail gets the copy; rank 0's message is the job's as it is). With
 * one process: st and err as they are. */
vtr_status vtr_dist_agree(vtr_dist *d, vtr_status st, vtr_error *err);

/* Marks a failure st (not VTR_OK) that every rank meets alike, at the same call, as shared
 * (d->shared_failure): the ranks end together without a further collective. Not
 * collective; returns st. */
vtr_status vtr_dist_fail_alike(vtr_dist *d, vtr_status st);

/* Whether any rank's flag is set (a stop request seen by one rank only). */
vtr_status vtr_dist_any(vtr_dist *d, bool *flag, vtr_error *err);

/* Checks that n bytes (a config, a file's hash, a version string) are the same on every
 * rank; else fails on every rank with VTR_ERR_INVALID "rank R has another WHAT than
 * rank 0", R the lowest rank that differs. */
vtr_status vtr_dist_check_same(vtr_dist *d, const char *what, const void *bytes, size_t n,
                               vtr_error *err);

/* The rows of a data-parallel batch: this rank's `count` rows of row_bytes bytes at the
 * start of buf -> every rank's rows, in rank order, this rank's at row `first` (buf has
 * room for them all). Collective. */
vtr_status vtr_dist_gather_rows(vtr_dist *d, void *buf, size_t row_bytes, int64_t first,
                                int64_t count, vtr_error *err);

/* The other way, locally: rows first .. first+count-1 of buf -> its start (this rank's
 * rows of a gradient computed for the whole batch). */
void vtr_dist_own_rows(void *buf, size_t row_bytes, int64_t first, int64_t count);

/* [first, first + count) of n things for rank `rank` of `size`: contiguous, in rank order,
 * the first n % size ranks one more than the others. */
void vtr_dist_share(int64_t n, int rank, int size, int64_t *first, int64_t *count);

/* d's rank's rows [first, first + count) of n rows worked on in blocks of `block`: whole
 * blocks (the same blocks as one process), vtr_dist_share of them; count may be 0. */
void vtr_dist_share_blocks(const vtr_dist *d, int n, int block, int *first, int *count);

#ifdef __cplusplus
}
#endif

#endif
