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
    return vtr_attn_gcn_workspace_layout_of(B, N, D, F).total;
}

size_t vtr_attn_gcn_scratch_size(int B, int N, int D, int F)
{
    return vtr_attn_gcn_scratch_layout_of(B, N, D, F).total;
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
            int row, column;
            vtr_attn_gcn_edge_flags(&row, &column, rel, N, i);
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
    vtr_attn_gcn_workspace_layout l = vtr_attn_gcn_workspace_layout_of(B, N, D, F);
    char *ws = workspace;
    float *q = (float *)(ws + l.q), *k = (float *)(ws + l.k);
    float *attn = (float *)(ws + l.attn), *agg = (float *)(ws + l.agg);
    float *resid = (float *)(ws + l.resid);
    float *mean = (float *)(ws + l.mean), *rstd = (float *)(ws + l.rstd);
    float *xp = (float *)(ws + l.xp), *yp = (float *)(ws + l.yp);
    int *attending = (int *)(ws + l.attending), *attended = (int *)(ws + l.attended);
    vtr_attn_gcn_param_ptrs w = vtr_attn_gcn_param_ptrs_of(params, D, F);
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
    vtr_attn_gcn_workspace_layout l = vtr_attn_gcn_workspace_layout_of(B, N, D, F);
    vtr_attn_gcn_scratch_layout sl = vtr_attn_gcn_scratch_layout_of(B, N, D, F);
    const char *ws = workspace;
    const float *q = (const float *)(ws + l.q), *k = (const float *)(ws + l.k);
    const float *attn = (const float *)(ws + l.attn), *agg = (const float *)(ws + l.agg);
    const float *resid = (const float *)(ws + l.resid);
    const float *mean = (const float *)(ws + l.mean), *rstd = (const float *)(ws + l.rstd);
    char *s = scratch;
    float *dresid = (float *)(s + sl.dresid), *dctx = (float *)(s + sl.dctx);
    float *dagg = (float *)(s + sl.dagg), *dattn = (float *)(s + sl.dattn);
    float *dscore = (float *)(s + sl.dscore), *dq = (float *)(s + sl.dq);
    float *dk = (float *)(s + sl.dk);
    float *xp = (float *)(s + sl.xp), *yp = (float *)(s + sl.yp);
    float *zp = (float *)(s + sl.zp);
    const int *attending = (const int *)(ws + l.attending);
    const int *attended = (const int *)(ws + l.attended);
    vtr_attn_gcn_param_ptrs w = vtr_attn_gcn_param_ptrs_of(params, D, F);
    vtr_attn_gcn_param_ptrs dw = vtr_attn_gcn_param_ptrs_of(dparams, D, F);
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
