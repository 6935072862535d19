// CUDA side of match/retrieval_metrics.h: an ensemble's similarity tiles on the GPU, with
// the CPU block function's products and order (one sgemm per model, beta 0 then 1, then
// the division), so that only the sums' order inside each product differs.
#include <stdlib.h>

#include "lib/cuda_launch.h"
#include "match/retrieval_metrics.h"

struct vtr_similarity_cuda {
    int n_models, n_items, n_caps;
    int *dims;        // (n_models)
    float **items;    // (n_models) device (n_items, dim)
    float **captions; // (n_models) device (n_caps, dim)
    float *tile;      // device, tile_floats
    size_t tile_floats;
    float *gathered; // device, gathered_floats: non-contiguous captions of one model
    size_t gathered_floats;
    int *caps; // device, caps_len ints: the tile's caption indices
    size_t caps_len;
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
    free(g->dims);
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
    for (int m = 0; m < e->n_models; m++)
        if (e->models[m].set_size > 1)
            return vtr_fail(err, VTR_ERR_INVALID,
                            "model %d: set embeddings are scored on the "
                            "CPU only: use --device cpu",
                            m);
    if (!vtr_cuda_cublas())
        return vtr_fail(err, VTR_ERR_DEVICE, "GPU scoring before vtr_cuda_init");
    vtr_similarity_cuda *g = (vtr_similarity_cuda *)calloc(1, sizeof *g);
    if (!g)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    g->n_models = e->n_models;
    g->n_items = n_items;
    g->n_caps = n_caps;
    g->dims = (int *)calloc((size_t)e->n_models, sizeof *g->dims);
    g->items = (float **)calloc((size_t)e->n_models, sizeof *g->items);
    g->captions = (float **)calloc((size_t)e->n_models, sizeof *g->captions);
    if (!g->dims || !g->items || !g->captions) {
        vtr_similarity_cuda_free(g);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    for (int m = 0; m < e->n_models; m++) {
        const vtr_embedding_model *model = &e->models[m];
        g->dims[m] = model->dim;
        vtr_status st;
        if ((st = upload(&g->items[m], model->items, n_items, model->dim, "item", m, err)) ||
            (st =
                 upload(&g->captions[m], model->captions, n_caps, model->dim, "caption", m, err))) {
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

// S (n) /= d, element by element (the CPU divides, too: no multiplication by 1/d)
__global__ static void divide_kernel(float *S, size_t n, float d)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        S[i] /= d;
}

extern "C" vtr_status vtr_similarity_cuda_block(void *ctx, int item0, int n_items, const int *caps,
                                                int n_caps, float *S, vtr_error *err)
{
    vtr_similarity_cuda *g = (vtr_similarity_cuda *)ctx;
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
        int dim = g->dims[m];
        const float *B = g->captions[m] + (size_t)caps[0] * (size_t)dim;
        if (!contiguous) {
            size_t n = (size_t)n_caps * (size_t)dim;
            VTR_TRY(reserve((void **)&g->gathered, &g->gathered_floats, n, sizeof(float), err));
            gather_rows_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(
                g->gathered, g->captions[m], g->caps, n_caps, dim);
            VTR_TRY(vtr_cuda_launched("caption gather", err));
            B = g->gathered;
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
    return vtr_cuda_to_host(S, g->tile, sizeof(float) * total, err);
}
