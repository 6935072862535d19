// The GPU's exact top-k (index/topk.h): one pass over the rows per query, a warp per row
// at a time, each warp keeping its own top k; the host merges the warps' lists.
#include <cuda_fp16.h>
#include <stdlib.h>

#include "index/topk.h"
#include "lib/cuda_launch.h"

enum { WARPS = VTR_CUDA_THREADS / 32 };

struct vtr_topk_cuda {
    int device; // the GPU of its buffers, made current by each call (cudaSetDevice is
                // per thread, and a server searches from many)
    vtr_dtype dtype;
    int64_t rows, dim, live;
    void *data;         // (rows, dim) on the GPU
    uint64_t *skip;     // its bitmap, or NULL
    float *query;       // (dim) on the GPU
    int warps;          // warps of a pass: as many as the GPU runs at once
    float *cand_scores; // (warps, VTR_TOPK_CUDA_MAX_K) on the GPU
    int64_t *cand_rows;
    float *host_scores; // their copies on the host
    int64_t *host_rows;
};

// A 16-byte chunk c of a row (8 float16 or 4 float32) widened and times the query's, whose
// floats are read 16 bytes at a time too (the query is cudaMalloc'ed: aligned).
__device__ static float dot_chunk(const __half *row, int64_t c, const float *q)
{
    uint4 u = __ldg((const uint4 *)row + c);
    const __half2 *h = (const __half2 *)&u;
    float4 qa = __ldg((const float4 *)q + 2 * c), qb = __ldg((const float4 *)q + 2 * c + 1);
    float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
    float2 f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
    float s = 0.0f;
    s += f0.x * qa.x + f0.y * qa.y;
    s += f1.x * qa.z + f1.y * qa.w;
    s += f2.x * qb.x + f2.y * qb.y;
    s += f3.x * qb.z + f3.y * qb.w;
    return s;
}

__device__ static float dot_chunk(const float *row, int64_t c, const float *q)
{
    float4 f = __ldg((const float4 *)row + c), g = __ldg((const float4 *)q + c);
    return f.x * g.x + f.y * g.y + f.z * g.z + f.w * g.w;
}

__device__ static float widen(__half x)
{
    return __half2float(x);
}

__device__ static float widen(float x)
{
    return x;
}

// A row's score: each lane sums its chunks (16-byte loads when dim allows, else single
// elements), then the lanes' sums in a tree down to lane 0, which returns it.
template <typename T> __device__ static float row_score(const T *row, const float *q, int64_t dim)
{
    const int64_t per = 16 / sizeof(T);
    unsigned lane = threadIdx.x % 32;
    float acc = 0.0f;
    if (dim % per == 0)
        for (int64_t c = lane; c < dim / per; c += 32)
            acc += dot_chunk(row, c, q);
    else
        for (int64_t d = lane; d < dim; d += 32)
            acc += widen(row[d]) * __ldg(q + d);
    for (int off = 16; off > 0; off /= 2)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    return acc;
}

// Warp w of the grid scores rows w, w + warps, ... and keeps its best k in shared memory,
// sorted in topk.h's order (lane 0 inserts); then writes them to cand (k per warp, row -1
// past its count).
template <typename T>
__global__ static void topk_kernel(const T *data, int64_t rows, int64_t dim, const float *q,
                                   const uint64_t *skip, int k, float *cand_scores,
                                   int64_t *cand_rows)
{
    __shared__ float best_scores[WARPS][VTR_TOPK_CUDA_MAX_K];
    __shared__ int64_t best_rows[WARPS][VTR_TOPK_CUDA_MAX_K];
    unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
    int64_t warp = (int64_t)blockIdx.x * WARPS + w, warps = (int64_t)gridDim.x * WARPS;
    float *bs = best_scores[w];
    int64_t *br = best_rows[w];
    int n = 0;
    for (int64_t r = warp; r < rows; r += warps) {
        if (vtr_topk_skipped(skip, r))
            continue;
        float s = row_score<T>(data + r * dim, q, dim);
        if (lane == 0 && (n < k || vtr_topk_ranks_before(s, r, bs[k - 1], br[k - 1]))) {
            int i = n < k ? n++ : k - 1; // the slot freed at the end, then shift it up
            while (i > 0 && vtr_topk_ranks_before(s, r, bs[i - 1], br[i - 1])) {
                bs[i] = bs[i - 1];
                br[i] = br[i - 1];
                i--;
            }
            bs[i] = s;
            br[i] = r;
        }
    }
    n = __shfl_sync(0xffffffffu, n, 0);
    __syncwarp();
    for (int i = lane; i < k; i += 32) {
        cand_scores[warp * k + i] = i < n ? bs[i] : -INFINITY;
        cand_rows[warp * k + i] = i < n ? br[i] : -1;
    }
}

extern "C" void vtr_topk_cuda_free(vtr_topk_cuda *c)
{
    if (!c)
        return;
    cudaSetDevice(c->device);
    cudaFree(c->data);
    cudaFree(c->skip);
    cudaFree(c->query);
    cudaFree(c->cand_scores);
    cudaFree(c->cand_rows);
    free(c->host_scores);
    free(c->host_rows);
    free(c);
}

// Blocks of the kernel for T that the GPU runs at once (registers and shared memory
// permitting), so that a pass is one wave.
template <typename T> static vtr_status resident_blocks(int64_t *blocks, vtr_error *err)
{
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t rc = cudaGetDevice(&device);
    if (rc == cudaSuccess)
        rc = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (rc == cudaSuccess)
        rc = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, topk_kernel<T>,
                                                           VTR_CUDA_THREADS, 0);
    if (rc != cudaSuccess)
        return vtr_cuda_fail(err, rc, "top-k: the GPU's size");
    *blocks = (int64_t)sms * (per_sm > 0 ? per_sm : 1);
    return VTR_OK;
}

extern "C" vtr_status vtr_topk_cuda_new(const vtr_topk_matrix *m, vtr_topk_cuda **out,
                                        vtr_error *err)
{
    *out = NULL;
    VTR_TRY(vtr_topk_matrix_check(m, err));
    int64_t blocks = 1;
    VTR_TRY(m->dtype == VTR_F16 ? resident_blocks<__half>(&blocks, err)
                                : resident_blocks<float>(&blocks, err));
    vtr_topk_cuda *c = (vtr_topk_cuda *)calloc(1, sizeof *c);
    if (!c)
        return vtr_fail(err, VTR_ERR_NOMEM, "top-k on the GPU: out of memory");
    cudaGetDevice(&c->device);
    c->dtype = m->dtype;
    c->dim = m->dim;
    c->live = vtr_topk_matrix_live_rows(m);
    for (int64_t p = 0; p < m->n_parts; p++)
        c->rows += m->parts[p].rows;
    size_t row_bytes = (size_t)m->dim * (m->dtype == VTR_F16 ? 2 : 4);
    int64_t need = (c->rows + WARPS - 1) / WARPS; // no block without a row
    c->warps = (int)((blocks < need ? blocks : need > 0 ? need : 1) * WARPS);
    size_t ncand = (size_t)c->warps * VTR_TOPK_CUDA_MAX_K;
    size_t skip_bytes = m->skip ? (size_t)(c->rows + 63) / 64 * 8 : 0;
    vtr_status st = VTR_OK;
    if ((st = vtr_cuda_malloc(&c->data, row_bytes * (size_t)(c->rows ? c->rows : 1), err)) ||
        (skip_bytes && (st = vtr_cuda_malloc((void **)&c->skip, skip_bytes, err))) ||
        (st = vtr_cuda_malloc((void **)&c->query, sizeof(float) * (size_t)m->dim, err)) ||
        (st = vtr_cuda_malloc((void **)&c->cand_scores, sizeof(float) * ncand, err)) ||
        (st = vtr_cuda_malloc((void **)&c->cand_rows, sizeof(int64_t) * ncand, err))) {
        vtr_error_context(err, "top-k on the GPU: %lld rows of %lld", (long long)c->rows,
                          (long long)c->dim);
        vtr_topk_cuda_free(c);
        return st;
    }
    c->host_scores = (float *)malloc(sizeof(float) * ncand);
    c->host_rows = (int64_t *)malloc(sizeof(int64_t) * ncand);
    if (!c->host_scores || !c->host_rows) {
        vtr_topk_cuda_free(c);
        return vtr_fail(err, VTR_ERR_NOMEM, "top-k on the GPU: out of memory");
    }
    size_t off = 0;
    for (int64_t p = 0; p < m->n_parts && st == VTR_OK; p++) {
        size_t bytes = row_bytes * (size_t)m->parts[p].rows;
        if (bytes)
            st = vtr_cuda_to_device((char *)c->data + off, m->parts[p].data, bytes, err);
        off += bytes;
    }
    if (st == VTR_OK && skip_bytes)
        st = vtr_cuda_to_device(c->skip, m->skip, skip_bytes, err);
    if (st) {
        vtr_topk_cuda_free(c);
        return st;
    }
    *out = c;
    return VTR_OK;
}

extern "C" vtr_status vtr_topk_cuda_search(vtr_topk_cuda *c, const vtr_tensor *queries, int64_t k,
                                           int64_t *rows, float *scores, int64_t *found,
                                           vtr_error *err)
{
    if (k < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "top-k: k = %lld (must be >= 1)", (long long)k);
    if (k > VTR_TOPK_CUDA_MAX_K)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "top-k on the GPU: k = %lld is above %d; "
                        "search on the CPU (--device cpu)",
                        (long long)k, VTR_TOPK_CUDA_MAX_K);
    int64_t nq, dim = c->dim;
    VTR_TRY(vtr_topk_queries_check(queries, dim, rows, scores, &nq, err));
    cudaError_t rc = cudaSetDevice(c->device);
    if (rc != cudaSuccess)
        return vtr_cuda_fail(err, rc, "set device");
    size_t ncand = (size_t)c->warps * (size_t)k;
    for (int64_t i = 0; i < nq; i++) {
        const float *q = (const float *)queries->data + i * dim;
        VTR_TRY(vtr_cuda_to_device(c->query, q, sizeof(float) * (size_t)dim, err));
        unsigned blocks = (unsigned)(c->warps / WARPS);
        if (c->dtype == VTR_F16)
            topk_kernel<__half><<<blocks, VTR_CUDA_THREADS>>>((const __half *)c->data, c->rows, dim,
                                                              c->query, c->skip, (int)k,
                                                              c->cand_scores, c->cand_rows);
        else
            topk_kernel<float><<<blocks, VTR_CUDA_THREADS>>>((const float *)c->data, c->rows, dim,
                                                             c->query, c->skip, (int)k,
                                                             c->cand_scores, c->cand_rows);
        VTR_TRY(vtr_cuda_launched("top-k", err));
        VTR_TRY(vtr_cuda_to_host(c->host_scores, c->cand_scores, sizeof(float) * ncand, err));
        VTR_TRY(vtr_cuda_to_host(c->host_rows, c->cand_rows, sizeof(int64_t) * ncand, err));
        int64_t count;
        VTR_TRY(vtr_topk_select(c->host_scores, c->host_rows, (int64_t)ncand, k, rows + i * k,
                                scores + i * k, &count, err));
    }
    if (found)
        *found = k < c->live ? k : c->live;
    return VTR_OK;
}
