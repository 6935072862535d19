#include "graph_attention.h"

#include <string.h>

#include "activation.h"
#include "embedding.h"
#include "linear.h"
#include "matmul.h"
#include "norm.h"
#include "softmax.h"

/* Elements below which a loop stays on one thread (the fork costs more than it saves). */
#define PARALLEL_MIN 32768

/* Only some rows need the three Linears: a row without an edge has an all-zero attention
 * row, so no score reads its query and its context a x is 0 (c = 0 Wcᵀ = 0); a row no edge
 * points to is a key no score reads. The query and context Linears run over the attending
 * rows (those with an edge), packed, and the key Linear over the attended rows (those an
 * edge points to); the other rows of q, k and c are 0, as the full products would give.
 * In HGR the root, the padded phrase slots and the nouns of a verbless caption attend to
 * nothing: about half of the B*N rows. */

/* The workspace's regions, in order:
 *   q, k (B,N,F); attn (B,N,N) the attention a; agg (B,N,D) a x, the context layer's input;
 *   resid (B,N,D) x + dropout(c), the LayerNorm's input; mean, rstd (B,N) its statistics;
 *   xp, yp (B*N,D) a Linear's packed rows in and out;
 *   attending, attended (B*N) int: the rows with an edge, the rows an edge points to, each
 *   list ascending, then its count (int) */
enum {
    WS_Q,
    WS_K,
    WS_ATTN,
    WS_AGG,
    WS_RESID,
    WS_MEAN,
    WS_RSTD,
    WS_XP,
    WS_YP,
    WS_ATTENDING,
    WS_ATTENDED,
    WS_REGIONS
};

/* The scratch's regions, in order, all float: the gradients of resid, c and agg (B,N,D),
 * of a and of the scores (B,N,N), of q and k (B,N,F); xp, yp, zp (B*N,D) packed rows */
enum {
    SC_DRESID,
    SC_DCTX,
    SC_DAGG,
    SC_DATTN,
    SC_DSCORE,
    SC_DQ,
    SC_DK,
    SC_XP,
    SC_YP,
    SC_ZP,
    SC_REGIONS
};

/* Byte offsets of n regions of floats[i] floats, back to back, each 64-byte aligned:
 * offset (n + 1), offset[n] the total. */
static void regions_layout(size_t *offset, const size_t *floats, int n)
{
    offset[0] = 0;
    for (int i = 0; i < n; i++)
        offset[i + 1] = offset[i] + vtr_workspace_align(sizeof(float) * floats[i]);
}

static void workspace_layout(size_t offset[WS_REGIONS + 1], int B, int N, int D, int F)
{
    size_t rows = (size_t)B * N;
    /* the int regions are counted as floats: both are 4 bytes */
    const size_t floats[WS_REGIONS] = {rows * F, rows * F, rows * N, rows * D, rows * D, rows,
                                       rows,     rows * D, rows * D, rows + 1, rows + 1};
    regions_layout(offset, floats, WS_REGIONS);
}

static void scratch_layout(size_t offset[SC_REGIONS + 1], int B, int N, int D, int F)
{
    size_t rows = (size_t)B * N;
    const size_t floats[SC_REGIONS] = {rows * D, rows * D, rows * D, rows * N, rows * N,
                                       rows * F, rows * F, rows * D, rows * D, rows * D};
    regions_layout(offset, floats, SC_REGIONS);
}

size_t vtr_attn_gcn_param_count(int D, int F)
{
    return vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_TENSORS);
}

size_t vtr_attn_gcn_param_offset(int D, int F, vtr_attn_gcn_tensor tensor)
{
    size_t off = 0;
    for (int t = 0; t < (int)tensor; t++) {
        int64_t shape[2];
        int ndim = vtr_attn_gcn_param_shape(D, F, (vtr_attn_gcn_tensor)t, shape);
        off += (size_t)shape[0] * (size_t)(ndim == 2 ? shape[1] : 1);
    }
    return off;
}

const char *vtr_attn_gcn_param_name(vtr_attn_gcn_tensor tensor)
{
    static const char *const names[VTR_ATTN_GCN_TENSORS] = {
        "ctx_layer.weight",       "layernorm.weight",     "layernorm.bias",
        "edge_attn_query.weight", "edge_attn_query.bias", "edge_attn_key.weight",
        "edge_attn_key.bias",
    };
    return names[tensor];
}

int vtr_attn_gcn_param_shape(int D, int F, vtr_attn_gcn_tensor tensor, int64_t *shape)
{
    switch (tensor) {
    case VTR_ATTN_GCN_CTX_WEIGHT: shape[0] = D, shape[1] = D; return 2;
    case VTR_ATTN_GCN_QUERY_WEIGHT:
    case VTR_ATTN_GCN_KEY_WEIGHT: shape[0] = F, shape[1] = D; return 2;
    case VTR_ATTN_GCN_QUERY_BIAS:
    case VTR_ATTN_GCN_KEY_BIAS: shape[0] = F; return 1;
    default: shape[0] = D; return 1; /* the LayerNorm's weight and bias */
    }
}

size_t vtr_attn_gcn_workspace_size(int B, int N, int D, int F)
{
    size_t offset[WS_REGIONS + 1];
    workspace_layout(offset, B, N, D, F);
    return offset[WS_REGIONS];
}

size_t vtr_attn_gcn_scratch_size(int B, int N, int D, int F)
{
    size_t offset[SC_REGIONS + 1];
    scratch_layout(offset, B, N, D, F);
    return offset[SC_REGIONS];
}

/* The parameters' pointers in a flat buffer (values or gradients). */
typedef struct attn_gcn_params {
    float *ctx_w, *norm_w, *norm_b, *query_w, *query_b, *key_w, *key_b;
} attn_gcn_params;

static attn_gcn_params params_of(const float *buf, int D, int F)
{
    float *p = (float *)buf;
    attn_gcn_params r;
    r.ctx_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_CTX_WEIGHT);
    r.norm_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_NORM_WEIGHT);
    r.norm_b = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_NORM_BIAS);
    r.query_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_QUERY_WEIGHT);
    r.query_b = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_QUERY_BIAS);
    r.key_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_KEY_WEIGHT);
    r.key_b = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_KEY_BIAS);
    return r;
}

/* The attending rows (an edge in their rel row) and the attended rows (an edge in their
 * rel column) of B graphs of N nodes: their counts, and with lists not NULL the rows as
 * ascending indices into (B*N). */
static void edge_rows(int *attending, int *attended, int *n_attending, int *n_attended,
                      const float *rel_edges, int B, int N)
{
    int na = 0, nd = 0;
    for (int b = 0; b < B; b++) {
        const float *rel = rel_edges + (size_t)b * N * N;
        for (int i = 0; i < N; i++) {
            int row = 0, column = 0;
            for (int j = 0; j < N; j++) {
                row |= rel[i * N + j] != 0.0f;
                column |= rel[j * N + i] != 0.0f;
            }
            if (row && attending)
                attending[na] = b * N + i;
            if (column && attended)
                attended[nd] = b * N + i;
            na += row;
            nd += column;
        }
    }
    *n_attending = na;
    *n_attended = nd;
}

void vtr_attn_gcn_count_edge_rows(int *n_attending, int *n_attended, const float *rel_edges, int B,
                                  int N)
{
    edge_rows(NULL, NULL, n_attending, n_attended, rel_edges, B, N);
}

// y (rows,OC) = the Linear (weight (OC,C), bias or NULL) of the n rows `list` of x
// (rows,C), 0 at the other rows; xp (n,C), yp (n,OC) packing buffers
static void linear_rows_forward(float *y, const float *x, const int *list, int n, int rows,
                                const float *weight, const float *bias, int C, int OC, float *xp,
                                float *yp)
{
    vtr_embedding_forward(xp, list, x, n, C); /* gathers the rows */
    vtr_linear_forward(yp, xp, weight, bias, n, C, OC);
    memset(y, 0, sizeof(float) * (size_t)rows * OC);
    vtr_embedding_backward(y, yp, list, n, OC); /* scatters them */
}

// the backward of linear_rows_forward for dy (rows,OC), whose rows not in list take no
// part: dx (rows,C) += at the rows in list (or NULL), dweight +=, dbias += (or NULL); xp
// (n,C), yp (n,OC), zp (n,C)
static void linear_rows_backward(float *dx, float *dweight, float *dbias, const float *dy,
                                 const float *x, const int *list, int n, const float *weight, int C,
                                 int OC, float *xp, float *yp, float *zp)
{
    vtr_embedding_forward(xp, list, x, n, C);
    vtr_embedding_forward(yp, list, dy, n, OC);
    if (dx)
        memset(zp, 0, sizeof(float) * (size_t)n * C);
    vtr_linear_backward(dx ? zp : NULL, dweight, dbias, yp, xp, weight, n, C, OC);
    if (dx)
        vtr_embedding_backward(dx, zp, list, n, C);
}

void vtr_attn_gcn_forward(float *out, void *workspace, const float *x, const float *rel_edges,
                          const float *params, int B, int N, int D, int F, float p, uint64_t seed,
                          uint64_t stream, int64_t first)
{
    size_t l[WS_REGIONS + 1];
    workspace_layout(l, B, N, D, F);
    char *ws = workspace;
    float *q = (float *)(ws + l[WS_Q]), *k = (float *)(ws + l[WS_K]);
    float *attn = (float *)(ws + l[WS_ATTN]), *agg = (float *)(ws + l[WS_AGG]);
    float *resid = (float *)(ws + l[WS_RESID]);
    float *mean = (float *)(ws + l[WS_MEAN]), *rstd = (float *)(ws + l[WS_RSTD]);
    float *xp = (float *)(ws + l[WS_XP]), *yp = (float *)(ws + l[WS_YP]);
    int *attending = (int *)(ws + l[WS_ATTENDING]), *attended = (int *)(ws + l[WS_ATTENDED]);
    attn_gcn_params w = params_of(params, D, F);
    int rows = B * N;
    size_t n = (size_t)rows * D;

    edge_rows(attending, attended, &attending[rows], &attended[rows], rel_edges, B, N);
    int na = attending[rows], nd = attended[rows];
    linear_rows_forward(q, x, attending, na, rows, w.query_w, w.query_b, D, F, xp, yp);
    linear_rows_forward(k, x, attended, nd, rows, w.key_w, w.key_b, D, F, xp, yp);
    // scores (N,N) of item b = q_b k_bᵀ / sqrt(F), written into attn, then the softmax in place
    float scale = 1.0f / sqrtf((float)F);
    for (int b = 0; b < B; b++) {
        size_t bf = (size_t)b * N * F;
        vtr_matmul(CblasNoTrans, CblasTrans, N, N, F, scale, q + bf, F, k + bf, F, 0.0f,
                   attn + (size_t)b * N * N, N);
    }
#pragma omp parallel for schedule(static) if ((long)rows * N > PARALLEL_MIN)
    for (int r = 0; r < rows; r++)
        vtr_attn_gcn_softmax_row_forward(attn + (size_t)r * N, attn + (size_t)r * N,
                                         rel_edges + (size_t)r * N, N);
    // agg (N,D) of item b = a_b (N,N) x_b (N,D)
    for (int b = 0; b < B; b++) {
        size_t bd = (size_t)b * N * D;
        vtr_matmul(CblasNoTrans, CblasNoTrans, N, D, N, 1.0f, attn + (size_t)b * N * N, N, x + bd,
                   D, 0.0f, agg + bd, D);
    }
    // c = agg Wcᵀ (0 at the rows without an edge), held in out until the LayerNorm writes it
    linear_rows_forward(out, agg, attending, na, rows, w.ctx_w, NULL, D, D, xp, yp);
    vtr_dropout_forward(out, out, n, p, seed, stream, (uint64_t)first * N * D);
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        resid[i] = x[i] + out[i];
    vtr_layernorm_forward(out, mean, rstd, resid, w.norm_w, w.norm_b, rows, D, VTR_LAYERNORM_EPS);
}

void vtr_attn_gcn_backward(float *dx, float *dparams, void *scratch, const float *dout,
                           const float *x, const float *params, const void *workspace, int B, int N,
                           int D, int F, float p, uint64_t seed, uint64_t stream, int64_t first)
{
    size_t l[WS_REGIONS + 1], sl[SC_REGIONS + 1];
    workspace_layout(l, B, N, D, F);
    scratch_layout(sl, B, N, D, F);
    const char *ws = workspace;
    const float *q = (const float *)(ws + l[WS_Q]), *k = (const float *)(ws + l[WS_K]);
    const float *attn = (const float *)(ws + l[WS_ATTN]), *agg = (const float *)(ws + l[WS_AGG]);
    const float *resid = (const float *)(ws + l[WS_RESID]);
    const float *mean = (const float *)(ws + l[WS_MEAN]), *rstd = (const float *)(ws + l[WS_RSTD]);
    char *s = scratch;
    float *dresid = (float *)(s + sl[SC_DRESID]), *dctx = (float *)(s + sl[SC_DCTX]);
    float *dagg = (float *)(s + sl[SC_DAGG]), *dattn = (float *)(s + sl[SC_DATTN]);
    float *dscore = (float *)(s + sl[SC_DSCORE]), *dq = (float *)(s + sl[SC_DQ]);
    float *dk = (float *)(s + sl[SC_DK]);
    float *xp = (float *)(s + sl[SC_XP]), *yp = (float *)(s + sl[SC_YP]);
    float *zp = (float *)(s + sl[SC_ZP]);
    const int *attending = (const int *)(ws + l[WS_ATTENDING]);
    const int *attended = (const int *)(ws + l[WS_ATTENDED]);
    attn_gcn_params w = params_of(params, D, F), dw = params_of(dparams, D, F);
    int rows = B * N, na = attending[rows], nd = attended[rows];
    size_t n = (size_t)rows * D;

    memset(dresid, 0, sizeof(float) * n);
    vtr_layernorm_backward(dresid, dw.norm_w, dw.norm_b, dout, resid, w.norm_w, mean, rstd, rows,
                           D);
    if (dx) { /* the residual path */
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
        for (size_t i = 0; i < n; i++)
            dx[i] += dresid[i];
    }
    memset(dctx, 0, sizeof(float) * n);
    vtr_dropout_backward(dctx, dresid, n, p, seed, stream, (uint64_t)first * N * D);
    // the context Linear over the attending rows: the others' agg is 0, and their dagg meets
    // only their attention rows, which are 0
    memset(dagg, 0, sizeof(float) * n);
    linear_rows_backward(dagg, dw.ctx_w, NULL, dctx, agg, attending, na, w.ctx_w, D, D, xp, yp, zp);
    // agg_b = a_b x_b: da_b (N,N) = dagg_b x_bᵀ, dx_b += a_bᵀ dagg_b
    for (int b = 0; b < B; b++) {
        size_t bd = (size_t)b * N * D, bn = (size_t)b * N * N;
        vtr_matmul(CblasNoTrans, CblasTrans, N, N, D, 1.0f, dagg + bd, D, x + bd, D, 0.0f,
                   dattn + bn, N);
        if (dx)
            vtr_matmul(CblasTrans, CblasNoTrans, N, D, N, 1.0f, attn + bn, N, dagg + bd, D, 1.0f,
                       dx + bd, D);
    }
    // through the softmax: a is 0 off the edges, so those scores get no gradient
    memset(dscore, 0, sizeof(float) * (size_t)rows * N);
    vtr_masked_softmax_backward(dscore, dattn, attn, NULL, rows, N, 1.0f);
    // s_b = q_b k_bᵀ / sqrt(F): dq_b = ds_b k_b / sqrt(F), dk_b = ds_bᵀ q_b / sqrt(F)
    float scale = 1.0f / sqrtf((float)F);
    for (int b = 0; b < B; b++) {
        size_t bf = (size_t)b * N * F, bn = (size_t)b * N * N;
        vtr_matmul(CblasNoTrans, CblasNoTrans, N, F, N, scale, dscore + bn, N, k + bf, F, 0.0f,
                   dq + bf, F);
        vtr_matmul(CblasTrans, CblasNoTrans, N, F, N, scale, dscore + bn, N, q + bf, F, 0.0f,
                   dk + bf, F);
    }
    // dq is 0 at the rows without an edge, dk at the rows no edge points to
    linear_rows_backward(dx, dw.query_w, dw.query_b, dq, x, attending, na, w.query_w, D, F, xp, yp,
                         zp);
    linear_rows_backward(dx, dw.key_w, dw.key_b, dk, x, attended, nd, w.key_w, D, F, xp, yp, zp);
}
