#include "graph_attention.h"

#include <cblas.h>
#include <string.h>

#include "activation.h"
#include "linear.h"
#include "norm.h"
#include "softmax.h"

/* Elements below which a loop stays on one thread (the fork costs more than it saves). */
#define PARALLEL_MIN 32768

/* The workspace's regions, in order, all float:
 *   q, k (B,N,F); attn (B,N,N) the attention a; agg (B,N,D) a x, the context layer's input;
 *   resid (B,N,D) x + dropout(c), the LayerNorm's input; mean, rstd (B,N) its statistics */
enum { WS_Q, WS_K, WS_ATTN, WS_AGG, WS_RESID, WS_MEAN, WS_RSTD, WS_REGIONS };

/* The scratch's regions, in order, all float: the gradients of resid, c and agg (B,N,D),
 * of a and of the scores (B,N,N), of q and k (B,N,F) */
enum { SC_DRESID, SC_DCTX, SC_DAGG, SC_DATTN, SC_DSCORE, SC_DQ, SC_DK, SC_REGIONS };

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
    const size_t floats[WS_REGIONS] = {rows * F, rows * F, rows * N, rows * D,
                                       rows * D, rows,     rows};
    regions_layout(offset, floats, WS_REGIONS);
}

static void scratch_layout(size_t offset[SC_REGIONS + 1], int B, int N, int D, int F)
{
    size_t rows = (size_t)B * N;
    const size_t floats[SC_REGIONS] = {rows * D, rows * D, rows * D, rows * N,
                                       rows * N, rows * F, rows * F};
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

void vtr_attn_gcn_forward(float *out, void *workspace, const float *x, const float *rel_edges,
                          const float *params, int B, int N, int D, int F, float p, uint64_t seed,
                          uint64_t stream)
{
    size_t l[WS_REGIONS + 1];
    workspace_layout(l, B, N, D, F);
    char *ws = workspace;
    float *q = (float *)(ws + l[WS_Q]), *k = (float *)(ws + l[WS_K]);
    float *attn = (float *)(ws + l[WS_ATTN]), *agg = (float *)(ws + l[WS_AGG]);
    float *resid = (float *)(ws + l[WS_RESID]);
    float *mean = (float *)(ws + l[WS_MEAN]), *rstd = (float *)(ws + l[WS_RSTD]);
    attn_gcn_params w = params_of(params, D, F);
    int rows = B * N;
    size_t n = (size_t)rows * D;

    vtr_linear_forward(q, x, w.query_w, w.query_b, rows, D, F);
    vtr_linear_forward(k, x, w.key_w, w.key_b, rows, D, F);
    // scores (N,N) of item b = q_b k_bᵀ / sqrt(F), written into attn, then the softmax in place
    float scale = 1.0f / sqrtf((float)F);
    for (int b = 0; b < B; b++) {
        size_t bf = (size_t)b * N * F;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, F, scale, q + bf, F, k + bf, F,
                    0.0f, attn + (size_t)b * N * N, N);
    }
#pragma omp parallel for schedule(static) if ((long)rows * N > PARALLEL_MIN)
    for (int r = 0; r < rows; r++)
        vtr_attn_gcn_softmax_row_forward(attn + (size_t)r * N, attn + (size_t)r * N,
                                         rel_edges + (size_t)r * N, N);
    // agg (N,D) of item b = a_b (N,N) x_b (N,D)
    for (int b = 0; b < B; b++) {
        size_t bd = (size_t)b * N * D;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, D, N, 1.0f,
                    attn + (size_t)b * N * N, N, x + bd, D, 0.0f, agg + bd, D);
    }
    // c = agg Wcᵀ, held in out until the LayerNorm writes it
    vtr_linear_forward(out, agg, w.ctx_w, NULL, rows, D, D);
    vtr_dropout_forward(out, out, n, p, seed, stream);
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        resid[i] = x[i] + out[i];
    vtr_layernorm_forward(out, mean, rstd, resid, w.norm_w, w.norm_b, rows, D, VTR_LAYERNORM_EPS);
}

void vtr_attn_gcn_backward(float *dx, float *dparams, void *scratch, const float *dout,
                           const float *x, const float *params, const void *workspace, int B, int N,
                           int D, int F, float p, uint64_t seed, uint64_t stream)
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
    attn_gcn_params w = params_of(params, D, F), dw = params_of(dparams, D, F);
    int rows = B * N;
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
    vtr_dropout_backward(dctx, dresid, n, p, seed, stream);
    memset(dagg, 0, sizeof(float) * n);
    vtr_linear_backward(dagg, dw.ctx_w, NULL, dctx, agg, w.ctx_w, rows, D, D);
    // agg_b = a_b x_b: da_b (N,N) = dagg_b x_bᵀ, dx_b += a_bᵀ dagg_b
    for (int b = 0; b < B; b++) {
        size_t bd = (size_t)b * N * D, bn = (size_t)b * N * N;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, D, 1.0f, dagg + bd, D, x + bd, D,
                    0.0f, dattn + bn, N);
        if (dx)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, D, N, 1.0f, attn + bn, N,
                        dagg + bd, D, 1.0f, dx + bd, D);
    }
    // through the softmax: a is 0 off the edges, so those scores get no gradient
    memset(dscore, 0, sizeof(float) * (size_t)rows * N);
    vtr_masked_softmax_backward(dscore, dattn, attn, NULL, rows, N, 1.0f);
    // s_b = q_b k_bᵀ / sqrt(F): dq_b = ds_b k_b / sqrt(F), dk_b = ds_bᵀ q_b / sqrt(F)
    float scale = 1.0f / sqrtf((float)F);
    for (int b = 0; b < B; b++) {
        size_t bf = (size_t)b * N * F, bn = (size_t)b * N * N;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, F, N, scale, dscore + bn, N,
                    k + bf, F, 0.0f, dq + bf, F);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, F, N, scale, dscore + bn, N, q + bf,
                    F, 0.0f, dk + bf, F);
    }
    vtr_linear_backward(dx, dw.query_w, dw.query_b, dq, x, w.query_w, rows, D, F);
    vtr_linear_backward(dx, dw.key_w, dw.key_b, dk, x, w.key_w, rows, D, F);
}
