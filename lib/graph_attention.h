/* The attention GCN layer of HGR (Chen et al., CVPR 2020; reference: AttnGCNLayer of
 * t2vretrieval/encoders/graph.py, REFERENCE.md "HGR"), one layer over a batch of graphs.
 * Conventions: lib/nn.h.
 *
 * For node features x (B,N,D) and edge weights rel_edges (B,N,N), where only
 * rel_edges[b,i,j] != 0 counts (an edge from node i to node j; the weights are not used):
 *   q = x Wqᵀ + bq, k = x Wkᵀ + bk                                  (B,N,F)
 *   s[b,i,j] = q[b,i]·k[b,j] / sqrt(F)                              (B,N,N)
 *   a[b,i,:] = softmax of s[b,i,:] over the edges j of node i, 0 elsewhere; a node with
 *              no edge gets an all-zero row (the reference's masked_fill -1e18, softmax,
 *              masked_fill 0)
 *   c = (a x) Wcᵀ                                                   (B,N,D)
 *   out = LayerNorm(x + dropout(c)), over D, eps VTR_LAYERNORM_EPS  (B,N,D)
 * The attention weights multiply x itself: there is no value projection. In HGR F = D/2.
 * The Linears skip the rows whose result no later step reads (a row without an edge needs
 * no query and has c = 0; a row no edge points to needs no key): the same numbers.
 *
 * Parameters, one flat buffer (gradients alike), in the reference's named_parameters()
 * order, each in PyTorch's layout (the tensor enum below, vtr_attn_gcn_param_offset,
 * vtr_attn_gcn_param_name, vtr_attn_gcn_param_shape). HGR registers them under
 * "text_encoder.gcn.layers.0." + the name. The key bias's gradient is 0 in exact arithmetic
 * (it shifts every score of a row by the same q_i·bk, which the softmax ignores); it is
 * there, and receives rounding noise, because the reference has it.
 *
 * Dropout: training-mode dropout of c with probability p drawn as lib/activation.h's
 * vtr_dropout_forward draws it from (seed, stream), element i of c (B,N,D) in C order;
 * p = 0 at evaluation. Backward redraws the same mask from the same arguments.
 */
#ifndef VTR_GRAPH_ATTENTION_H
#define VTR_GRAPH_ATTENTION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "hostdevice.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tensors of the parameter buffer, in buffer order. */
typedef enum vtr_attn_gcn_tensor {
    VTR_ATTN_GCN_CTX_WEIGHT,   /* ctx_layer.weight (D,D) */
    VTR_ATTN_GCN_NORM_WEIGHT,  /* layernorm.weight (D) */
    VTR_ATTN_GCN_NORM_BIAS,    /* layernorm.bias (D) */
    VTR_ATTN_GCN_QUERY_WEIGHT, /* edge_attn_query.weight (F,D) */
    VTR_ATTN_GCN_QUERY_BIAS,   /* edge_attn_query.bias (F) */
    VTR_ATTN_GCN_KEY_WEIGHT,   /* edge_attn_key.weight (F,D) */
    VTR_ATTN_GCN_KEY_BIAS,     /* edge_attn_key.bias (F) */
    VTR_ATTN_GCN_TENSORS,      /* how many */
} vtr_attn_gcn_tensor;

/* One row of the attention: a (N) = softmax of s (N) over the j with edges[j] != 0, and 0
 * at the other j; all zero when the row has no edge. Sums in float in the order of j.
 * (Its backward is lib/softmax.h's vtr_masked_softmax_row_backward over all N entries at
 * temperature 1: a is 0 off the edges, so those entries get no gradient, as in the
 * reference.) */
static VTR_HD void vtr_attn_gcn_softmax_row_forward(float *a, const float *s, const float *edges,
                                                    int N)
{
    float mx = -INFINITY;
    for (int j = 0; j < N; j++)
        if (edges[j] != 0.0f && s[j] > mx)
            mx = s[j];
    float sum = 0.0f;
    for (int j = 0; j < N; j++) {
        a[j] = edges[j] != 0.0f ? expf(s[j] - mx) : 0.0f;
        sum += a[j];
    }
    if (sum == 0.0f)
        return; /* no edge: the row stays zero */
    float inv = 1.0f / sum;
    for (int j = 0; j < N; j++)
        a[j] *= inv;
}

/* Whether node i of one graph has an edge (*attending: in its row of rel (N,N)) and whether an
 * edge points to it (*attended: in its column). */
static VTR_HD void vtr_attn_gcn_edge_flags(int *attending, int *attended, const float *rel, int N,
                                           int i)
{
    int row = 0, column = 0;
    for (int j = 0; j < N; j++) {
        row |= rel[i * N + j] != 0.0f;
        column |= rel[j * N + i] != 0.0f;
    }
    *attending = row;
    *attended = column;
}

/* Byte offsets of the workspace's regions, each 64-byte aligned (total: the size):
 *   q, k (B,N,F); attn (B,N,N) the attention a; agg (B,N,D) a x, the context layer's input;
 *   resid (B,N,D) x + dropout(c), the LayerNorm's input; mean, rstd (B,N) its statistics;
 *   xp, yp (B*N,D) a Linear's packed rows in and out (the CPU's);
 *   attending, attended (B*N + 1) int: the rows with an edge, the rows an edge points to,
 *   each list ascending, then its count (the CPU's) */
typedef struct vtr_attn_gcn_workspace_layout {
    size_t q, k, attn, agg, resid, mean, rstd, xp, yp, attending, attended, total;
} vtr_attn_gcn_workspace_layout;

static inline vtr_attn_gcn_workspace_layout vtr_attn_gcn_workspace_layout_of(int B, int N, int D,
                                                                             int F)
{
    size_t rows = (size_t)B * N;
    vtr_attn_gcn_workspace_layout l;
    l.q = 0;
    l.k = l.q + vtr_workspace_align(sizeof(float) * rows * F);
    l.attn = l.k + vtr_workspace_align(sizeof(float) * rows * F);
    l.agg = l.attn + vtr_workspace_align(sizeof(float) * rows * N);
    l.resid = l.agg + vtr_workspace_align(sizeof(float) * rows * D);
    l.mean = l.resid + vtr_workspace_align(sizeof(float) * rows * D);
    l.rstd = l.mean + vtr_workspace_align(sizeof(float) * rows);
    l.xp = l.rstd + vtr_workspace_align(sizeof(float) * rows);
    l.yp = l.xp + vtr_workspace_align(sizeof(float) * rows * D);
    l.attending = l.yp + vtr_workspace_align(sizeof(float) * rows * D);
    l.attended = l.attending + vtr_workspace_align(sizeof(int) * (rows + 1));
    l.total = l.attended + vtr_workspace_align(sizeof(int) * (rows + 1));
    return l;
}

/* Byte offsets of the scratch's regions, all float, each 64-byte aligned: the gradients of
 * resid, c and agg (B,N,D), of a and of the scores (B,N,N), of q and k (B,N,F); xp, yp, zp
 * (B*N,D) packed rows (the CPU's). */
typedef struct vtr_attn_gcn_scratch_layout {
    size_t dresid, dctx, dagg, dattn, dscore, dq, dk, xp, yp, zp, total;
} vtr_attn_gcn_scratch_layout;

static inline vtr_attn_gcn_scratch_layout vtr_attn_gcn_scratch_layout_of(int B, int N, int D, int F)
{
    size_t rows = (size_t)B * N;
    vtr_attn_gcn_scratch_layout l;
    l.dresid = 0;
    l.dctx = l.dresid + vtr_workspace_align(sizeof(float) * rows * D);
    l.dagg = l.dctx + vtr_workspace_align(sizeof(float) * rows * D);
    l.dattn = l.dagg + vtr_workspace_align(sizeof(float) * rows * D);
    l.dscore = l.dattn + vtr_workspace_align(sizeof(float) * rows * N);
    l.dq = l.dscore + vtr_workspace_align(sizeof(float) * rows * N);
    l.dk = l.dq + vtr_workspace_align(sizeof(float) * rows * F);
    l.xp = l.dk + vtr_workspace_align(sizeof(float) * rows * F);
    l.yp = l.xp + vtr_workspace_align(sizeof(float) * rows * D);
    l.zp = l.yp + vtr_workspace_align(sizeof(float) * rows * D);
    l.total = l.zp + vtr_workspace_align(sizeof(float) * rows * D);
    return l;
}

/* Floats in the parameter buffer: D*D + 2D + 2(F*D + F). */
size_t vtr_attn_gcn_param_count(int D, int F);

/* Offset (floats) of a tensor in the parameter buffer. */
size_t vtr_attn_gcn_param_offset(int D, int F, vtr_attn_gcn_tensor tensor);

/* The tensors' pointers in a flat parameter buffer (values or gradients). */
typedef struct vtr_attn_gcn_param_ptrs {
    float *ctx_w, *norm_w, *norm_b, *query_w, *query_b, *key_w, *key_b;
} vtr_attn_gcn_param_ptrs;

static inline vtr_attn_gcn_param_ptrs vtr_attn_gcn_param_ptrs_of(const float *buf, int D, int F)
{
    float *p = (float *)buf;
    vtr_attn_gcn_param_ptrs r;
    r.ctx_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_CTX_WEIGHT);
    r.norm_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_NORM_WEIGHT);
    r.norm_b = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_NORM_BIAS);
    r.query_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_QUERY_WEIGHT);
    r.query_b = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_QUERY_BIAS);
    r.key_w = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_KEY_WEIGHT);
    r.key_b = p + vtr_attn_gcn_param_offset(D, F, VTR_ATTN_GCN_KEY_BIAS);
    return r;
}

/* The reference's name of a tensor, relative to the layer: "ctx_layer.weight", ... */
const char *vtr_attn_gcn_param_name(vtr_attn_gcn_tensor tensor);

/* Writes a tensor's shape (PyTorch layout) to shape (2) and returns its ndim (1 or 2). */
int vtr_attn_gcn_param_shape(int D, int F, vtr_attn_gcn_tensor tensor, int64_t *shape);

/* How many of the B*N rows the Linears run over (the top of this file): *n_attending rows
 * have an edge in their row of rel_edges (B,N,N) (query and context), *n_attended in their
 * column (key). For FLOP counts. */
void vtr_attn_gcn_count_edge_rows(int *n_attending, int *n_attended, const float *rel_edges, int B,
                                  int N);

/* Bytes of the workspace that forward fills and backward reads. */
size_t vtr_attn_gcn_workspace_size(int B, int N, int D, int F);

/* Bytes of backward's scratch. */
size_t vtr_attn_gcn_scratch_size(int B, int N, int D, int F);

// x (B,N,D) node features, rel_edges (B,N,N) (only != 0 matters), params
// (vtr_attn_gcn_param_count), out (B,N,D); workspace (vtr_attn_gcn_workspace_size) keeps
// q, k, the attention (B,N,N), the LayerNorm input and statistics and the rows with edges
// for backward. Dropout p in
// [0, 1) of the context with (seed, stream), as the top of this file says; first: 0, or
// the B items are items first .. first+B-1 of a larger batch whose masks they draw (a
// data-parallel rank's share).
void vtr_attn_gcn_forward(float *out, void *workspace, const float *x, const float *rel_edges,
                          const float *params, int B, int N, int D, int F, float p, uint64_t seed,
                          uint64_t stream, int64_t first);

// dx (B,N,D) or NULL, dparams (vtr_attn_gcn_param_count), scratch
// (vtr_attn_gcn_scratch_size), dout (B,N,D); x, params, dims and dropout as given to
// vtr_attn_gcn_forward, workspace as it left it (the edges are read from the attention
// kept there). Both gradients accumulate.
void vtr_attn_gcn_backward(float *dx, float *dparams, void *scratch, const float *dout,
                           const float *x, const float *params, const void *workspace, int B, int N,
                           int D, int F, float p, uint64_t seed, uint64_t stream, int64_t first);

#ifdef __cplusplus
}
#endif

#endif
