// NCCL, the CUDA side of lib/dist_device.h: a job's ranks exchange device arrays between
// their GPUs directly. NCCL is loaded when first asked for (VTR_NCCL_LIBRARY, else
// libnccl.so.2 on the library path: PyTorch's wheels bring one), so that libvtr-cuda.so needs
// no NCCL to load. Only point-to-point calls are used (ncclSend / ncclRecv in groups), in the
// pattern of lib/dist.c's MPI sum: rank c receives chunk c of every rank's array, adds them in
// rank order, and sends the sum to every rank; the sums are lib/dist.c's bytes, whatever NCCL's
// own algorithms would do. Everything is queued on the default stream, as every op is.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cuda_launch.h"
#include "lib/dist.h"

// The part of nccl.h's ABI (NCCL 2.x) used here, declared so that the build needs no NCCL.
typedef struct nccl_comm *ncclComm_t;
typedef int ncclResult_t; // ncclSuccess = 0
enum { NCCL_UINT8 = 1, NCCL_FLOAT32 = 7 };
typedef struct {
    char internal[VTR_NCCL_ID_BYTES];
} ncclUniqueId;

static struct {
    void *lib;
    int version;
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*get_version)(int *);
    ncclResult_t (*send)(const void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, int, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*error_string)(ncclResult_t);
} nccl;

// One job's communicator: this rank of size, and the sum's receive buffer on the GPU.
struct vtr_nccl {
    ncclComm_t comm;
    int rank, size;
    float *scratch;
    size_t scratch_bytes;
};

static vtr_status nccl_fail(vtr_error *err, ncclResult_t rc, const char *what)
{
    return vtr_fail(err, VTR_ERR_DEVICE, "NCCL %s: %s (error %d)", what,
                    nccl.error_string ? nccl.error_string(rc) : "failed", rc);
}

#define NCCL_TRY(call, what)                                                                       \
    do {                                                                                           \
        ncclResult_t rc_ = (call);                                                                 \
        if (rc_ != 0)                                                                              \
            return nccl_fail(err, rc_, what);                                                      \
    } while (0)

extern "C" vtr_status vtr_cuda_nccl_load(char *name, size_t name_size, vtr_error *err)
{
    if (!nccl.lib) {
        const char *path = getenv("VTR_NCCL_LIBRARY");
        if (path && strcmp(path, "none") == 0)
            return vtr_fail(err, VTR_ERR_UNSUPPORTED, "VTR_NCCL_LIBRARY=none");
        void *lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s", dlerror());
        struct {
            void **fn;
            const char *name;
        } syms[] = {
            {(void **)&nccl.get_unique_id, "ncclGetUniqueId"},
            {(void **)&nccl.comm_init_rank, "ncclCommInitRank"},
            {(void **)&nccl.comm_destroy, "ncclCommDestroy"},
            {(void **)&nccl.get_version, "ncclGetVersion"},
            {(void **)&nccl.send, "ncclSend"},
            {(void **)&nccl.recv, "ncclRecv"},
            {(void **)&nccl.group_start, "ncclGroupStart"},
            {(void **)&nccl.group_end, "ncclGroupEnd"},
            {(void **)&nccl.error_string, "ncclGetErrorString"},
        };
        for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
            if (!(*syms[i].fn = dlsym(lib, syms[i].name))) {
                dlclose(lib);
                memset(&nccl, 0, sizeof nccl);
                return vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s has no %s (NCCL 2.7 or later)",
                                path && *path ? path : "libnccl.so.2", syms[i].name);
            }
        if (nccl.get_version(&nccl.version) != 0) {
            dlclose(lib);
            memset(&nccl, 0, sizeof nccl);
            return vtr_fail(err, VTR_ERR_UNSUPPORTED, "NCCL does not tell its version");
        }
        nccl.lib = lib;
    }
    int v = nccl.version; // 2.9.8 is 2908; from 2.9 on, 21803 is 2.18.3
    int major = v >= 10000 ? v / 10000 : v / 1000,
        minor = v >= 10000 ? v / 100 % 100 : v / 100 % 10;
    snprintf(name, name_size, "NCCL %d.%d.%d", major, minor, v % 100);
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_nccl_id(char *id, vtr_error *err)
{
    ncclUniqueId u;
    NCCL_TRY(nccl.get_unique_id(&u), "unique id");
    memcpy(id, u.internal, sizeof u.internal);
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_nccl_init(vtr_nccl **out, const char *id, int rank, int size,
                                         vtr_error *err)
{
    *out = NULL;
    vtr_nccl *c = (vtr_nccl *)calloc(1, sizeof *c);
    if (!c)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    ncclUniqueId u;
    memcpy(u.internal, id, sizeof u.internal);
    ncclResult_t rc = nccl.comm_init_rank(&c->comm, size, u, rank);
    if (rc != 0) {
        free(c);
        return nccl_fail(err, rc, "communicator");
    }
    c->rank = rank, c->size = size;
    *out = c;
    return VTR_OK;
}

extern "C" void vtr_cuda_nccl_free(vtr_nccl *c)
{
    if (!c)
        return;
    nccl.comm_destroy(c->comm);
    cudaFree(c->scratch);
    free(c);
}

// sum[i] = parts[0][i] + parts[1][i] + ... + parts[N-1][i], parts n apart, in rank order
__global__ static void sum_in_rank_order_kernel(float *sum, const float *parts, size_t n, int N)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride()) {
        float acc = parts[i];
        for (int r = 1; r < N; r++)
            acc += parts[(size_t)r * n + i];
        sum[i] = acc;
    }
}

static vtr_status need_scratch(vtr_nccl *c, size_t bytes, vtr_error *err)
{
    if (bytes <= c->scratch_bytes)
        return VTR_OK;
    cudaFree(c->scratch);
    c->scratch_bytes = 0;
    VTR_TRY(vtr_cuda_allocated(cudaMalloc((void **)&c->scratch, bytes), (void **)&c->scratch,
                               "NCCL's receive buffer", bytes, err));
    c->scratch_bytes = bytes;
    return VTR_OK;
}

// Every rank r's bytes[r] at send -> recv + at[r] (this rank's own too, by a copy), in one
// group. send may be recv + at[rank] (then there is nothing to copy).
static vtr_status all_to_all_same(vtr_nccl *c, const char *send, char *recv, const size_t *at,
                                  const size_t *bytes, vtr_error *err)
{
    NCCL_TRY(nccl.group_start(), "group");
    ncclResult_t rc = 0;
    for (int r = 0; r < c->size && rc == 0; r++) {
        if (r == c->rank)
            continue;
        if (bytes[c->rank] > 0)
            rc = nccl.send(send, bytes[c->rank], NCCL_UINT8, r, c->comm, 0);
        if (rc == 0 && bytes[r] > 0)
            rc = nccl.recv(recv + at[r], bytes[r], NCCL_UINT8, r, c->comm, 0);
    }
    ncclResult_t end = nccl.group_end();
    if (rc != 0 || end != 0)
        return nccl_fail(err, rc ? rc : end, "send and receive");
    if (send == recv + at[c->rank] || bytes[c->rank] == 0)
        return VTR_OK;
    cudaError_t ce =
        cudaMemcpyAsync(recv + at[c->rank], send, bytes[c->rank], cudaMemcpyDeviceToDevice, 0);
    return ce == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, ce, "copy of this rank's part");
}

extern "C" vtr_status vtr_cuda_nccl_sum(vtr_nccl *c, float *buf, size_t n, vtr_error *err)
{
    int N = c->size, me = c->rank;
    size_t *at = (size_t *)calloc(2 * (size_t)N, sizeof *at), *bytes = at + N;
    if (!at)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    int64_t first, count;
    vtr_dist_share((int64_t)n, me, N, &first, &count);
    size_t mine = sizeof(float) * (size_t)count;
    vtr_status st = need_scratch(c, mine * (size_t)N, err);
    // 1: chunk `me` of every rank's buf -> scratch, rank r's at r * mine
    ncclResult_t rc = st == VTR_OK ? nccl.group_start() : 0, end = 0;
    bool grouped = st == VTR_OK && rc == 0;
    for (int r = 0; r < N && grouped && rc == 0; r++) {
        int64_t f, k;
        vtr_dist_share((int64_t)n, r, N, &f, &k);
        at[r] = sizeof(float) * (size_t)f, bytes[r] = sizeof(float) * (size_t)k;
        if (r == me)
            continue;
        if (k > 0)
            rc = nccl.send(buf + f, (size_t)k, NCCL_FLOAT32, r, c->comm, 0);
        if (rc == 0 && count > 0)
            rc = nccl.recv((char *)c->scratch + (size_t)r * mine, (size_t)count, NCCL_FLOAT32, r,
                           c->comm, 0);
    }
    if (grouped)
        end = nccl.group_end();
    if (st == VTR_OK && (rc != 0 || end != 0))
        st = nccl_fail(err, rc ? rc : end, rc && !grouped ? "group" : "send and receive");
    cudaError_t ce = cudaSuccess;
    if (st == VTR_OK && count > 0)
        ce = cudaMemcpyAsync((char *)c->scratch + (size_t)me * mine, buf + first, mine,
                             cudaMemcpyDeviceToDevice, 0);
    if (st == VTR_OK && ce != cudaSuccess)
        st = vtr_cuda_fail(err, ce, "copy of this rank's part");
    // 2: their sum in rank order -> buf's chunk `me`, which every rank then receives
    if (st == VTR_OK && count > 0) {
        sum_in_rank_order_kernel<<<vtr_cuda_blocks((size_t)count), VTR_CUDA_THREADS>>>(
            buf + first, c->scratch, (size_t)count, N);
        st = vtr_cuda_launched("rank-order sum", err);
    }
    if (st == VTR_OK)
        st = all_to_all_same(c, (const char *)(buf + first), (char *)buf, at, bytes, err);
    free(at);
    return st;
}

extern "C" vtr_status vtr_cuda_nccl_gather_rows(vtr_nccl *c, void *buf, size_t row_bytes,
                                                int64_t total, vtr_error *err)
{
    int N = c->size, me = c->rank;
    size_t *at = (size_t *)calloc(2 * (size_t)N, sizeof *at), *bytes = at + N;
    if (!at)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    for (int r = 0; r < N; r++) {
        int64_t f, k;
        vtr_dist_share(total, r, N, &f, &k);
        at[r] = row_bytes * (size_t)f, bytes[r] = row_bytes * (size_t)k;
    }
    // this rank's rows leave the start of buf first, where the ranks before it land
    vtr_status st = need_scratch(c, bytes[me], err);
    cudaError_t ce = cudaSuccess;
    if (st == VTR_OK && bytes[me] > 0)
        ce = cudaMemcpyAsync(c->scratch, buf, bytes[me], cudaMemcpyDeviceToDevice, 0);
    if (st == VTR_OK && ce != cudaSuccess)
        st = vtr_cuda_fail(err, ce, "copy of this rank's rows");
    if (st == VTR_OK)
        st = all_to_all_same(c, (const char *)c->scratch, (char *)buf, at, bytes, err);
    free(at);
    return st;
}
