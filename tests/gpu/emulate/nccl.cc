// A stand-in for NCCL (libnccl.so.2) under the CPU emulation of CUDA, over MPI: the calls
// lib/dist_nccl.cu makes, with NCCL's semantics as its documentation states them. Emulated
// device memory is host memory and the default stream runs each call as it is made, so a
// group's sends and receives are MPI's, posted at ncclGroupEnd and waited for there. The
// communicator is MPI_COMM_WORLD of a process that has initialised MPI (vtr-train has), or
// one rank alone.
//
// What it cannot check: NCCL's own transports, and its refusal of two ranks on one GPU
// (every emulated rank is on "GPU 0"): EMU_NCCL_REFUSE=1 makes ncclCommInitRank fail as
// NCCL does then (ncclInvalidUsage), to test the fallback.
#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

extern "C" {

typedef struct nccl_comm *ncclComm_t;
typedef int ncclResult_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef void *cudaStream_t;

enum { SUCCESS = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, INVALID_USAGE = 5 };
enum { UINT8 = 1, FLOAT32 = 7 };

static const char ID[] = "vtr emulated NCCL";
static int group_depth;
static std::vector<MPI_Request> pending;
static struct nccl_comm {
    int rank, size;
} world;

ncclResult_t ncclGetVersion(int *version)
{
    *version = 22800; // 2.28.0
    return SUCCESS;
}

const char *ncclGetErrorString(ncclResult_t rc)
{
    switch (rc) {
    case SUCCESS: return "no error";
    case SYSTEM_ERROR: return "unhandled system error (MPI failed)";
    case INVALID_ARGUMENT: return "invalid argument";
    case INVALID_USAGE: return "invalid usage (duplicate GPU: EMU_NCCL_REFUSE)";
    default: return "unknown result code";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    memcpy(id->internal, ID, sizeof ID);
    return SUCCESS;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    int up = 0, size = 1, me = 0; /* one rank alone needs no MPI */
    if (MPI_Initialized(&up) != MPI_SUCCESS || (!up && nranks > 1))
        return INVALID_USAGE;
    if (up) {
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
    }
    if (memcmp(id.internal, ID, sizeof ID) != 0 || nranks != size || rank != me)
        return INVALID_ARGUMENT;
    const char *refuse = getenv("EMU_NCCL_REFUSE");
    if (refuse && strcmp(refuse, "1") == 0)
        return INVALID_USAGE;
    world.rank = rank, world.size = size;
    *comm = &world;
    return SUCCESS;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    return comm == &world ? SUCCESS : INVALID_ARGUMENT;
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return SUCCESS;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        return INVALID_USAGE;
    if (--group_depth > 0)
        return SUCCESS;
    if (pending.empty()) /* one rank alone: nothing posted, maybe no MPI */
        return SUCCESS;
    int rc = MPI_Waitall((int)pending.size(), pending.data(), MPI_STATUSES_IGNORE);
    pending.clear();
    return rc == MPI_SUCCESS ? SUCCESS : SYSTEM_ERROR;
}

// A send or a receive of count elements of type with peer, posted now and finished at the
// group's end (or at once outside a group).
static ncclResult_t post(bool send, void *buf, size_t count, int type, int peer, ncclComm_t comm)
{
    size_t elem = type == FLOAT32 ? 4 : type == UINT8 ? 1 : 0;
    if (comm != &world || elem == 0 || peer < 0 || peer >= world.size || count * elem > INT32_MAX)
        return INVALID_ARGUMENT;
    MPI_Request r;
    int n = (int)(count * elem);
    int rc = send ? MPI_Isend(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &r)
                  : MPI_Irecv(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &r);
    if (rc != MPI_SUCCESS)
        return SYSTEM_ERROR;
    pending.push_back(r);
    if (group_depth > 0)
        return SUCCESS;
    group_depth = 1;
    return ncclGroupEnd();
}

ncclResult_t ncclSend(const void *buf, size_t count, int type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return post(true, const_cast<void *>(buf), count, type, peer, comm);
}

ncclResult_t ncclRecv(void *buf, size_t count, int type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return post(false, buf, count, type, peer, comm);
}
}
