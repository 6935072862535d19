/* The processes of one job (dist.h): Open MPI when built with it, else one process. */
#define _POSIX_C_SOURCE 200809L
#include "dist.h"
#include "device.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef VTR_HAVE_MPI
#include <mpi.h>
#endif

bool vtr_dist_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return true;
    return false;
}

void vtr_dist_share(int64_t n, int rank, int size, int64_t *first, int64_t *count)
{
    int64_t base = n / size, extra = n % size;
    *count = base + (rank < extra ? 1 : 0);
    *first = rank * base + (rank < extra ? rank : extra);
}

typedef void (*add_fn)(void *acc, const void *x, size_t n);

static void add_float(void *acc, const void *x, size_t n)
{
    float *a = acc;
    const float *b = x;
    for (size_t i = 0; i < n; i++)
        a[i] += b[i];
}

static void add_double(void *acc, const void *x, size_t n)
{
    double *a = acc;
    const double *b = x;
    for (size_t i = 0; i < n; i++)
        a[i] += b[i];
}

static void add_int64(void *acc, const void *x, size_t n)
{
    int64_t *a = acc;
    const int64_t *b = x;
    for (size_t i = 0; i < n; i++)
        a[i] += b[i];
}

void vtr_dist_share_blocks(const vtr_dist *d, int n, int block, int *first, int *count)
{
    int64_t b0, nb;
    vtr_dist_share((n + block - 1) / block, d->rank, d->size, &b0, &nb);
    int64_t end = (b0 + nb) * block < n ? (b0 + nb) * block : n;
    *first = (int)(b0 * block);
    *count = end > *first ? (int)(end - *first) : 0;
}

#ifdef VTR_HAVE_MPI

/* An MPI failure as one line: the call and MPI's own words (this rank's alone: dist.h). */
static vtr_status mpi_fail(vtr_error *err, const char *call, int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        len = 0;
    text[len] = 0;
    return vtr_fail(err, VTR_ERR_IO, "MPI: %s failed: %s", call, len ? text : "unknown error");
}

#define MPI_TRY(call)                                                                              \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        if (code_ != MPI_SUCCESS)                                                                  \
            return mpi_fail(err, #call, code_);                                                    \
    } while (0)

vtr_status vtr_dist_init(vtr_dist *d, int *argc, char ***argv, vtr_error *err)
{
    memset(d, 0, sizeof *d);
    d->size = 1;
    if (!vtr_dist_launched())
        return VTR_OK;
    MPI_TRY(MPI_Init(argc, argv));
    d->mpi = true;
    /* failures come back as codes (dist.h: the ranks agree on them), not as aborts */
    MPI_TRY(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
    MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &d->size));
    MPI_Comm node; /* the ranks that share this machine's memory */
    MPI_TRY(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int code = MPI_Comm_rank(node, &d->local_rank);
    MPI_Comm_free(&node);
    if (code != MPI_SUCCESS)
        return mpi_fail(err, "MPI_Comm_rank", code);
    return VTR_OK;
}

void vtr_dist_finalize(vtr_dist *d)
{
    vtr_cuda_nccl_free(d->nccl);
    if (d->mpi)
        MPI_Finalize();
    free(d->scratch);
    free(d->staging);
    memset(d, 0, sizeof *d);
    d->size = 1;
}

void vtr_dist_abort(const vtr_dist *d, int code)
{
    if (d->mpi)
        MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static vtr_status need_scratch(vtr_dist *d, size_t bytes, vtr_error *err)
{
    if (bytes <= d->scratch_size)
        return VTR_OK;
    void *p = realloc(d->scratch, bytes);
    if (!p)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a %zu-byte reduction", bytes);
    d->scratch = p;
    d->scratch_size = bytes;
    return VTR_OK;
}

/* Pieces of at most this many bytes per rank and message, so that MPI's int counts and
 * displacements never overflow. */
#define PIECE_BYTES ((size_t)1 << 26)

/* The sum in rank order of one piece of n elements: rank c adds up chunk c of every rank's
 * buffer (an all-to-all), in rank order, then every rank gathers the summed chunks. */
static vtr_status ordered_sum_piece(vtr_dist *d, char *buf, size_t n, size_t elem, add_fn add,
                                    vtr_error *err)
{
    int N = d->size;
    int *counts = calloc((size_t)N * 4, sizeof *counts);
    if (!counts)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    int *displs = counts + N, *rcounts = counts + 2 * N, *rdispls = counts + 3 * N;
    for (int r = 0; r < N; r++) {
        int64_t first, count;
        vtr_dist_share((int64_t)n, r, N, &first, &count);
        counts[r] = (int)((size_t)count * elem);
        displs[r] = (int)((size_t)first * elem);
    }
    int mine = counts[d->rank];
    for (int r = 0; r < N; r++) {
        rcounts[r] = mine;
        rdispls[r] = r * mine;
    }
    vtr_status st = need_scratch(d, (size_t)N * (size_t)mine, err);
    char *recv = d->scratch;
    int code = MPI_SUCCESS;
    const char *call = "MPI_Alltoallv";
    if (st == VTR_OK)
        code = MPI_Alltoallv(buf, counts, displs, MPI_BYTE, recv, rcounts, rdispls, MPI_BYTE,
                             MPI_COMM_WORLD);
    if (st == VTR_OK && code == MPI_SUCCESS) {
        for (int r = 1; r < N; r++)
            add(recv, recv + (size_t)r * mine, (size_t)mine / elem);
        call = "MPI_Allgatherv";
        code = MPI_Allgatherv(recv, mine, MPI_BYTE, buf, counts, displs, MPI_BYTE,
                              MPI_COMM_WORLD);
    }
    free(counts);
    if (st == VTR_OK && code != MPI_SUCCESS)
        st = mpi_fail(err, call, code);
    return st;
}

static vtr_status ordered_sum(vtr_dist *d, void *buf, size_t n, size_t elem, add_fn add,
                              vtr_error *err)
{
    size_t piece = PIECE_BYTES / elem;
    vtr_status st = VTR_OK;
    for (size_t i = 0; i < n && st == VTR_OK; i += piece)
        st = ordered_sum_piece(d, (char *)buf + i * elem, n - i < piece ? n - i : piece, elem,
                               add, err);
    return st;
}

static vtr_status gather(vtr_dist *d, const void *mine, size_t bytes, void *all,
                         vtr_error *err)
{
    int N = d->size;
    long long my = (long long)bytes, sizes[N];
    MPI_TRY(MPI_Allgather(&my, 1, MPI_LONG_LONG, sizes, 1, MPI_LONG_LONG, MPI_COMM_WORLD));
    int counts[N], displs[N];
    long long total = 0;
    for (int r = 0; r < N; r++) {
        if (sizes[r] > INT_MAX || total > INT_MAX - sizes[r]) /* every rank sees the sizes */
            return vtr_dist_fail_alike(
                d, vtr_fail(err, VTR_ERR_INVALID, "MPI: a gather of more than %d bytes", INT_MAX));
        counts[r] = (int)sizes[r];
        displs[r] = (int)total;
        total += sizes[r];
    }
    const void *send = (const char *)mine == (char *)all + displs[d->rank] ? MPI_IN_PLACE : mine;
    MPI_TRY(MPI_Allgatherv(send, (int)bytes, MPI_BYTE, all, counts, displs, MPI_BYTE,
                           MPI_COMM_WORLD));
    return VTR_OK;
}

static vtr_status broadcast(vtr_dist *d, void *buf, size_t n, int root, vtr_error *err)
{
    for (size_t i = 0; i < n; i += PIECE_BYTES)
        MPI_TRY(MPI_Bcast((char *)buf + i, (int)(n - i < PIECE_BYTES ? n - i : PIECE_BYTES),
                          MPI_BYTE, root, MPI_COMM_WORLD));
    return VTR_OK;
}

static vtr_status agree(vtr_dist *d, vtr_status st, vtr_error *err)
{
    int mine = st != VTR_OK ? d->rank : d->size, first;
    MPI_TRY(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first == d->size)
        return VTR_OK;
    vtr_error e;
    if (d->rank == first) {
        e.status = st;
        snprintf(e.msg, sizeof e.msg, "%s", err ? err->msg : "failed");
    }
    MPI_TRY(MPI_Bcast(&e, (int)sizeof e, MPI_BYTE, first, MPI_COMM_WORLD));
    vtr_fail(err, e.status, "%s", e.msg);
    if (first > 0)
        vtr_error_context(err, "rank %d", first);
    return vtr_dist_fail_alike(d, e.status);
}

static vtr_status any(vtr_dist *d, bool *flag, vtr_error *err)
{
    int mine = *flag ? 1 : 0, any;
    MPI_TRY(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    *flag = any != 0;
    return VTR_OK;
}

#else /* one process */

vtr_status vtr_dist_init(vtr_dist *d, int *argc, char ***argv, vtr_error *err)
{
    memset(d, 0, sizeof *d);
    d->size = 1;
    if (vtr_dist_launched())
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "started by an MPI launcher, but this vtr was "
                        "built without MPI: ./configure --with-mpi (apt-get install "
                        "libopenmpi-dev openmpi-bin)");
    return VTR_OK;
}

void vtr_dist_finalize(vtr_dist *d)
{
    free(d->scratch);
    free(d->staging);
    vtr_cuda_nccl_free(d->nccl);
    memset(d, 0, sizeof *d);
    d->size = 1;
}

void vtr_dist_abort(const vtr_dist *d, int code)
{
    exit(code);
}

/* Never called: without MPI there is one process (the callers below return first). */
static vtr_status no_mpi(vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_UNSUPPORTED, "this vtr was built without MPI");
}

static vtr_status ordered_sum(vtr_dist *d, void *buf, size_t n, size_t elem, add_fn add,
                              vtr_error *err)
{
    return no_mpi(err);
}

static vtr_status gather(vtr_dist *d, const void *mine, size_t bytes, void *all,
                         vtr_error *err)
{
    return no_mpi(err);
}

static vtr_status broadcast(vtr_dist *d, void *buf, size_t n, int root, vtr_error *err)
{
    return no_mpi(err);
}

static vtr_status agree(vtr_dist *d, vtr_status st, vtr_error *err)
{
    return no_mpi(err);
}

static vtr_status any(vtr_dist *d, bool *flag, vtr_error *err)
{
    return no_mpi(err);
}

#endif

/* A collective starts: a failure it returns is this rank's alone unless it proves to be
 * every rank's (vtr_dist_fail_alike). */
static void begin(vtr_dist *d)
{
    d->shared_failure = false;
}

vtr_status vtr_dist_gather(vtr_dist *d, const void *mine, size_t bytes, void *all,
                           vtr_error *err)
{
    begin(d);
    if (d->size > 1)
        return gather(d, mine, bytes, all, err);
    memmove(all, mine, bytes);
    return VTR_OK;
}

vtr_status vtr_dist_broadcast(vtr_dist *d, void *buf, size_t n, int root, vtr_error *err)
{
    begin(d);
    return d->size > 1 ? broadcast(d, buf, n, root, err) : VTR_OK;
}

vtr_status vtr_dist_fail_alike(vtr_dist *d, vtr_status st)
{
    d->shared_failure = st != VTR_OK;
    return st;
}

vtr_status vtr_dist_agree(vtr_dist *d, vtr_status st, vtr_error *err)
{
    begin(d);
    return d->size > 1 ? agree(d, st, err) : st;
}

vtr_status vtr_dist_any(vtr_dist *d, bool *flag, vtr_error *err)
{
    begin(d);
    return d->size > 1 ? any(d, flag, err) : VTR_OK;
}

vtr_status vtr_dist_sum(vtr_dist *d, float *buf, size_t n, vtr_error *err)
{
    begin(d);
    return d->size > 1 ? ordered_sum(d, buf, n, sizeof *buf, add_float, err) : VTR_OK;
}

vtr_status vtr_dist_sum_double(vtr_dist *d, double *buf, size_t n, vtr_error *err)
{
    begin(d);
    return d->size > 1 ? ordered_sum(d, buf, n, sizeof *buf, add_double, err) : VTR_OK;
}

vtr_status vtr_dist_sum_int64(vtr_dist *d, int64_t *buf, size_t n, vtr_error *err)
{
    begin(d);
    return d->size > 1 ? ordered_sum(d, buf, n, sizeof *buf, add_int64, err) : VTR_OK;
}

vtr_status vtr_dist_gather_rows(vtr_dist *d, void *buf, size_t row_bytes, int64_t first,
                                int64_t count, vtr_error *err)
{
    char *mine = (char *)buf + row_bytes * (size_t)first;
    size_t n = row_bytes * (size_t)count;
    memmove(mine, buf, n);
    return vtr_dist_gather(d, mine, n, buf, err);
}

void vtr_dist_own_rows(void *buf, size_t row_bytes, int64_t first, int64_t count)
{
    memmove(buf, (char *)buf + row_bytes * (size_t)first, row_bytes * (size_t)count);
}

vtr_status vtr_dist_check_same(vtr_dist *d, const char *what, const void *bytes, size_t n,
                               vtr_error *err)
{
    begin(d);
    if (d->size == 1)
        return VTR_OK;
    /* every rank's size, then every rank's bytes beside rank 0's */
    int64_t *sizes = calloc((size_t)d->size, sizeof *sizes);
    vtr_status st = sizes ? VTR_OK : vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    int64_t my = (int64_t)n, total = 0;
    if (st == VTR_OK)
        st = vtr_dist_gather(d, &my, sizeof my, sizes, err);
    for (int r = 0; st == VTR_OK && r < d->size; r++)
        total += sizes[r];
    char *all = st == VTR_OK ? malloc(total ? (size_t)total : 1) : NULL;
    if (st == VTR_OK && !all)
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    if (st == VTR_OK)
        st = vtr_dist_gather(d, bytes, n, all, err);
    int64_t off = sizes ? sizes[0] : 0;
    for (int r = 1; st == VTR_OK && r < d->size; off += sizes[r], r++)
        if (sizes[r] != sizes[0] || memcmp(all + off, all, (size_t)sizes[0]) != 0)
            st = vtr_dist_fail_alike(
                d, vtr_fail(err, VTR_ERR_INVALID, "rank %d has another %s than rank 0", r, what));
    free(all);
    free(sizes);
    return st;
}
