// CUDA side of match/retrieval_metrics.h: an ensemble's similarity tiles on the GPU, with
// the CPU block function's products and order (one sgemm per model, beta 0 then 1, then
// the division), so that only the sums' order inside each product differs.
#include <stdlib.h>

#include "lib/cuda_launch.h"
#include "match/retrieval_metrics.h"
#include "match/set_similarity.h"

struct vtr_similarity_cuda {
    int n_models, n_items, n_caps;
    int *dims;        // (n_models)
    int *sets;        // (n_models) K: vectors per item and caption (1: one vector)
    float *alphas;    // (n_models) smooth-Chamfer's alpha of a set model
    float **items;    // (n_models) device (n_items, K, dim)
    float **captions; // (n_models) device (n_caps, K, dim)
    float *tile;      // device, tile_floats
    size_t tile_floats;
    float *gathered; // device, gathered_floats: non-contiguous captions of one model
    size_t gathered_floats;
    int *caps; // device, caps_len ints: the tile's caption indices
    size_t caps_len;
    void *scratch; // device, scratch_bytes: a set model's smooth-Chamfer workspace
    size_t scratch_bytes;
    float *scores; // device, scores_floats: a set model's scores, to add to the tile
    size_t scores_floats;
};

extern "C" void vtr_similarity_cuda_free(vtr_similarity_cuda *g)
{
    if (!g)
        return;
    for (int m = 0; m < g->n_models; m++) {
        if (g->items)
            vtr_cuda_free(g->items[m]);
        if (g->captions)
            vtr_cuda_free(g->captions[m]);
    }
    vtr_cuda_free(g->tile);
    vtr_cuda_free(g->gathered);
    vtr_cuda_free(g->caps);
    vtr_cuda_free(g->scratch);
    vtr_cuda_free(g->scores);
    free(g->dims);
    free(g->sets);
    free(g->alphas);
    free(g->items);
    free(g->captions);
    free(g);
}

// A device copy of rows x dim host floats into *out; `what` names it in errors.
static vtr_status upload(float **out, const float *host, int rows, int dim, const char *what,
                         int model, vtr_error *err)
{
    size_t bytes = sizeof(float) * (size_t)rows * (size_t)dim;
    vtr_status st = vtr_cuda_malloc((void **)out, bytes, err);
    if (st == VTR_OK)
        st = vtr_cuda_to_device(*out, host, bytes, err);
    if (st != VTR_OK)
        vtr_error_context(err, "model %d's %s embeddings (%d x %d) on the GPU", model, what, rows,
                          dim);
    return st;
}

extern "C" vtr_status vtr_similarity_cuda_new(const vtr_similarity_ensemble *e, int n_items,
                                              int n_caps, vtr_similarity_cuda **out, vtr_error *err)
{
    *out = NULL;
    if (!vtr_cuda_cublas())
        return vtr_fail(err, VTR_ERR_DEVICE, "GPU scoring before vtr_cuda_init");
    vtr_similarity_cuda *g = (vtr_similarity_cuda *)calloc(1, sizeof *g);
    if (!g)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    g->n_models = e->n_models;
    g->n_items = n_items;
    g->n_caps = n_caps;
    g->dims = (int *)calloc((size_t)e->n_models, sizeof *g->dims);
    g->sets = (int *)calloc((size_t)e->n_models, sizeof *g->sets);
    g->alphas = (float *)calloc((size_t)e->n_models, sizeof *g->alphas);
    g->items = (float **)calloc((size_t)e->n_models, sizeof *g->items);
    g->captions = (float **)calloc((size_t)e->n_models, sizeof *g->captions);
    if (!g->dims || !g->sets || !g->alphas || !g->items || !g->captions) {
        vtr_similarity_cuda_free(g);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    for (int m = 0; m < e->n_models; m++) {
        const vtr_embedding_model *model = &e->models[m];
        int K = model->set_size > 1 ? model->set_size : 1;
        g->dims[m] = model->dim;
        g->sets[m] = K;
        g->alphas[m] = model->set_alpha;
        vtr_status st;
        if ((st = upload(&g->items[m], model->items, n_items, K * model->dim, "item", m, err)) ||
            (st = upload(&g->captions[m], model->captions, n_caps, K * model->dim, "caption", m,
                         err))) {
            vtr_similarity_cuda_free(g);
            return st;
        }
    }
    *out = g;
    return VTR_OK;
}

// *buf holds at least `need` elements of `size` bytes (*have of them now): grown, its
// contents dropped, when it does not.
static vtr_status reserve(void **buf, size_t *have, size_t need, size_t size, vtr_error *err)
{
    if (*have >= need)
        return VTR_OK;
    vtr_cuda_free(*buf);
    *buf = NULL;
    *have = 0;
    VTR_TRY(vtr_cuda_malloc(buf, need * size, err));
    *have = need;
    return VTR_OK;
}

// out (n, dim) = rows caps[0 .. n) of src (., dim)
__global__ static void gather_rows_kernel(float *out, const float *src, const int *caps, int n,
                                          int dim)
{
    size_t total = (size_t)n * (size_t)dim;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride())
        out[i] = src[(size_t)caps[i / (size_t)dim] * (size_t)dim + i % (size_t)dim];
}

// S (n) += x (n)
__global__ static void add_kernel(float *S, const float *x, size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        S[i] += x[i];
}

// A set model's smooth-Chamfer scores of items item0 .. (n_items) x the captions B
// (n_caps, K, dim) into g->tile: = them for the first model, += after (the CPU's order).
static vtr_status set_tile(vtr_similarity_cuda *g, int m, int item0, int n_items, const float *B,
                           int n_caps, vtr_error *err)
{
    int K = g->sets[m], dim = g->dims[m];
    size_t total = (size_t)n_items * (size_t)n_caps;
    VTR_TRY(reserve(&g->scratch, &g->scratch_bytes,
                    vtr_smooth_chamfer_scratch_size(n_items, n_caps, K, K), 1, err));
    float *S = g->tile;
    if (m > 0) {
        VTR_TRY(reserve((void **)&g->scores, &g->scores_floats, total, sizeof(float), err));
        S = g->scores;
    }
    VTR_TRY(vtr_cuda_smooth_chamfer_forward(S, n_caps, g->scratch,
                                            g->items[m] + (size_t)item0 * K * (size_t)dim, B,
                                            n_items, n_caps, K, K, dim, g->alphas[m], err));
    if (m > 0) {
        add_kernel<<<vtr_cuda_blocks(total), VTR_CUDA_THREADS>>>(g->tile, S, total);
        VTR_TRY(vtr_cuda_launched("ensemble sum", err));
    }
    return VTR_OK;
}

// S (n) /= d, element by element (the CPU divides, too: no multiplication by 1/d)
__global__ static void divide_kernel(float *S, size_t n, float d)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        S[i] /= d;
}

// g->tile (n_items, n_caps) = the scores of items item0 .. x captions caps, as the CPU's
// block function computes them.
static vtr_status compute_tile(vtr_similarity_cuda *g, int item0, int n_items, const int *caps,
                               int n_caps, vtr_error *err)
{
    size_t total = (size_t)n_items * (size_t)n_caps;
    bool contiguous = true;
    for (int b = 1; b < n_caps && contiguous; b++)
        contiguous = caps[b] == caps[0] + b;
    VTR_TRY(reserve((void **)&g->tile, &g->tile_floats, total, sizeof(float), err));
    if (!contiguous) {
        VTR_TRY(reserve((void **)&g->caps, &g->caps_len, (size_t)n_caps, sizeof(int), err));
        VTR_TRY(vtr_cuda_to_device(g->caps, caps, sizeof(int) * (size_t)n_caps, err));
    }
    for (int m = 0; m < g->n_models; m++) {
        int dim = g->dims[m], row = g->sets[m] * dim; // a caption's floats
        const float *B = g->captions[m] + (size_t)caps[0] * (size_t)row;
        if (!contiguous) {
            size_t n = (size_t)n_caps * (size_t)row;
            VTR_TRY(reserve((void **)&g->gathered, &g->gathered_floats, n, sizeof(float), err));
            gather_rows_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(
                g->gathered, g->captions[m], g->caps, n_caps, row);
            VTR_TRY(vtr_cuda_launched("caption gather", err));
            B = g->gathered;
        }
        if (g->sets[m] > 1) {
            VTR_TRY(set_tile(g, m, item0, n_items, B, n_caps, err));
            continue;
        }
        // tile (n_items, n_caps) (+)= items[item0 ..] (n_items, dim) · B (n_caps, dim)ᵀ
        VTR_TRY(vtr_cuda_sgemm(false, true, n_items, n_caps, dim, 1.0f,
                               g->items[m] + (size_t)item0 * (size_t)dim, dim, B, dim,
                               m == 0 ? 0.0f : 1.0f, g->tile, n_caps, err));
    }
    if (g->n_models > 1) {
        divide_kernel<<<vtr_cuda_blocks(total), VTR_CUDA_THREADS>>>(g->tile, total,
                                                                    (float)g->n_models);
        VTR_TRY(vtr_cuda_launched("ensemble mean", err));
    }
    return VTR_OK;
}

extern "C" vtr_status vtr_similarity_cuda_block(void *ctx, int item0, int n_items, const int *caps,
                                                int n_caps, float *S, vtr_error *err)
{
    vtr_similarity_cuda *g = (vtr_similarity_cuda *)ctx;
    VTR_TRY(compute_tile(g, item0, n_items, caps, n_caps, err));
    return vtr_cuda_to_host(S, g->tile, sizeof(float) * (size_t)n_items * (size_t)n_caps, err);
}

// ---- counting (phase 2 of the evaluation) ----

// A vtr_rank_lists on the GPU.
struct rank_lists_dev {
    int64_t *off, *pos;
    int *idx;
    float *score;
};

static void rank_lists_free(rank_lists_dev *d)
{
    vtr_cuda_free(d->off);
    vtr_cuda_free(d->pos);
    vtr_cuda_free(d->idx);
    vtr_cuda_free(d->score);
}

// l's offsets, indices and scores copied to d, its positions zeroed there.
static vtr_status rank_lists_upload(rank_lists_dev *d, const vtr_rank_lists *l, vtr_error *err)
{
    size_t n = (size_t)l->off[l->n], room = n ? n : 1, offs = sizeof(int64_t) * ((size_t)l->n + 1);
    *d = rank_lists_dev{};
    vtr_status st;
    if ((st = vtr_cuda_malloc((void **)&d->off, offs, err)) ||
        (st = vtr_cuda_malloc((void **)&d->pos, sizeof(int64_t) * room, err)) ||
        (st = vtr_cuda_malloc((void **)&d->idx, sizeof(int) * room, err)) ||
        (st = vtr_cuda_malloc((void **)&d->score, sizeof(float) * room, err)) ||
        (st = vtr_cuda_to_device(d->off, l->off, offs, err)) ||
        (n && (st = vtr_cuda_to_device(d->idx, l->idx, sizeof(int) * n, err))) ||
        (n && (st = vtr_cuda_to_device(d->score, l->score, sizeof(float) * n, err))) ||
        (st = vtr_cuda_zero(d->pos, sizeof(int64_t) * room, err)))
        rank_lists_free(d);
    return st;
}

// Item queries: block a takes row r0 + a of the tile S (nr x nc, its columns c0 ..), and
// adds to each entry p of the row the candidates before it: a higher score, or an equal
// score at a lower column (the entry itself is not before itself). Integer sums: the
// same counts in any order.
__global__ static void count_rows_kernel(const float *S, int nc, int r0, int c0, const int64_t *off,
                                         const int *idx, const float *score, int64_t *pos)
{
    __shared__ int partial[VTR_CUDA_THREADS];
    int a = blockIdx.x, r = r0 + a;
    const float *x = S + (size_t)a * (size_t)nc;
    for (int64_t p = off[r]; p < off[r + 1]; p++) {
        float t = score[p];
        int split = idx[p] - c0;
        split = split < 0 ? 0 : split > nc ? nc : split;
        int count = 0;
        for (int k = threadIdx.x; k < nc; k += blockDim.x)
            count += k < split ? x[k] >= t : x[k] > t;
        partial[threadIdx.x] = count;
        __syncthreads();
        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (threadIdx.x < s)
                partial[threadIdx.x] += partial[threadIdx.x + s];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            pos[p] += partial[0];
        __syncthreads(); // partial is the next entry's
    }
}

// Caption queries: thread c takes column c0 + c of the tile S (nr x nc, its rows r0 ..)
// and adds to each entry of the column the candidates before it: a higher score, or an
// equal score at a lower row.
__global__ static void count_cols_kernel(const float *S, int nr, int nc, int r0, int c0,
                                         const int64_t *off, const int *idx, const float *score,
                                         int64_t *pos)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)nc; c += vtr_cuda_stride())
        for (int64_t e = off[c0 + c]; e < off[c0 + c + 1]; e++) {
            float t = score[e];
            int at = idx[e];
            int64_t count = 0;
            for (int a = 0; a < nr; a++) {
                float x = S[(size_t)a * (size_t)nc + c];
                count += x > t || (x == t && r0 + a < at);
            }
            pos[e] += count;
        }
}

// The positions on the GPU added to l's.
static vtr_status rank_lists_download(const rank_lists_dev *d, const vtr_rank_lists *l,
                                      vtr_error *err)
{
    size_t n = (size_t)l->off[l->n];
    if (n == 0)
        return VTR_OK;
    int64_t *pos = (int64_t *)malloc(sizeof(int64_t) * n);
    if (!pos)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %zu positions", n);
    vtr_status st = vtr_cuda_to_host(pos, d->pos, sizeof(int64_t) * n, err);
    for (size_t e = 0; st == VTR_OK && e < n; e++)
        l->pos[e] += pos[e];
    free(pos);
    return st;
}

extern "C" vtr_status vtr_similarity_cuda_count(vtr_similarity_cuda *g, int item0, const int *caps,
                                                int tile_items, int tile_caps,
                                                const vtr_rank_lists *rows,
                                                const vtr_rank_lists *cols, vtr_error *err)
{
    rank_lists_dev r, c;
    VTR_TRY(rank_lists_upload(&r, rows, err));
    vtr_status st = rank_lists_upload(&c, cols, err);
    if (st) {
        rank_lists_free(&r);
        return st;
    }
    for (int r0 = 0; st == VTR_OK && r0 < rows->n; r0 += tile_items) {
        int nr = rows->n - r0 < tile_items ? rows->n - r0 : tile_items;
        for (int c0 = 0; st == VTR_OK && c0 < cols->n; c0 += tile_caps) {
            int nc = cols->n - c0 < tile_caps ? cols->n - c0 : tile_caps;
            if ((st = compute_tile(g, item0 + r0, nr, caps + c0, nc, err)))
                break;
            count_rows_kernel<<<nr, VTR_CUDA_THREADS>>>(g->tile, nc, r0, c0, r.off, r.idx, r.score,
                                                        r.pos);
            if ((st = vtr_cuda_launched("rank counting (items)", err)))
                break;
            count_cols_kernel<<<vtr_cuda_blocks((size_t)nc), VTR_CUDA_THREADS>>>(
                g->tile, nr, nc, r0, c0, c.off, c.idx, c.score, c.pos);
            st = vtr_cuda_launched("rank counting (captions)", err);
        }
    }
    if (st == VTR_OK && (st = rank_lists_download(&r, rows, err)) == VTR_OK)
        st = rank_lists_download(&c, cols, err);
    rank_lists_free(&r);
    rank_lists_free(&c);
    return st;
}
