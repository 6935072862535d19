// CUDA side of lib/graph_attention.h: the CPU's steps, with the CUDA Linear, dropout, LayerNorm
// and softmax backward, the per-item products as one batched cuBLAS call each, and the CPU's
// VTR_HD row functions in one-thread-per-row kernels. No atomics.
//
// The CPU packs the rows that have an edge before its Linears; their count is on the device
// here, so the Linears run over all B*N rows and the rows the CPU skips are set to what the
// CPU leaves there: q and k zeroed at the rows without an edge (row, resp. column); c is
// already 0 at a row without an edge (its agg row is 0, and the context layer has no bias).
// In the backward the skipped rows' terms are zero on their own: a row without an edge has
// a zero attention row, hence zero score gradients (so dq is 0 there, and dk at a row no
// edge points to), and its dagg meets only that zero row. The workspace's packing buffers
// and row lists, and the scratch's packing buffers, are the CPU's alone.
#include "lib/cuda_launch.h"
#include "lib/graph_attention.h"
#include "lib/nn_cuda.h"
#include "lib/norm.h"

// The workspace's and scratch's regions (vtr_attn_gcn_*_layout_of), as device pointers.
struct attn_gcn_workspace {
    float *q, *k, *attn, *agg, *resid, *mean, *rstd;
};

static attn_gcn_workspace attn_gcn_workspace_of(const void *workspace, int B, int N, int D, int F)
{
    vtr_attn_gcn_workspace_layout l = vtr_attn_gcn_workspace_layout_of(B, N, D, F);
    char *ws = (char *)workspace;
    attn_gcn_workspace w = {(float *)(ws + l.q),   (float *)(ws + l.k),     (float *)(ws + l.attn),
                            (float *)(ws + l.agg), (float *)(ws + l.resid), (float *)(ws + l.mean),
                            (float *)(ws + l.rstd)};
    return w;
}

struct attn_gcn_scratch {
    float *dresid, *dctx, *dagg, *dattn, *dscore, *dq, *dk;
};

static attn_gcn_scratch attn_gcn_scratch_of(void *scratch, int B, int N, int D, int F)
{
    vtr_attn_gcn_scratch_layout l = vtr_attn_gcn_scratch_layout_of(B, N, D, F);
    char *sc = (char *)scratch;
    attn_gcn_scratch s = {(float *)(sc + l.dresid), (float *)(sc + l.dctx),
                          (float *)(sc + l.dagg),   (float *)(sc + l.dattn),
                          (float *)(sc + l.dscore), (float *)(sc + l.dq),
                          (float *)(sc + l.dk)};
    return s;
}

// q, k (B,N,F): zero the query rows without an edge and the key rows no edge points to;
// one (row, column) per thread
__global__ static void attn_gcn_mask_rows_kernel(float *q, float *k, const float *rel_edges, int B,
                                                 int N, int F)
{
    size_t total = (size_t)B * N * F;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t r = e / (size_t)F, b = r / (size_t)N;
        int attending, attended;
        vtr_attn_gcn_edge_flags(&attending, &attended, rel_edges + b * N * N, N,
                                (int)(r % (size_t)N));
        if (!attending)
            q[e] = 0.0f;
        if (!attended)
            k[e] = 0.0f;
    }
}

// attn (B*N rows of N): the scores it holds -> the attention over each row's edges, one row
// per thread
__global__ static void attn_gcn_softmax_kernel(float *attn, const float *rel_edges, int rows, int N)
{
    for (size_t r = vtr_cuda_first(); r < (size_t)rows; r += vtr_cuda_stride())
        vtr_attn_gcn_softmax_row_forward(attn + r * N, attn + r * N, rel_edges + r * N, N);
}

extern "C" vtr_status vtr_cuda_attn_gcn_forward(float *out, void *workspace, const float *x,
                                                const float *rel_edges, const float *params, int B,
                                                int N, int D, int F, float p, uint64_t seed,
                                                uint64_t stream, int64_t first, vtr_error *err)
{
    attn_gcn_workspace ws = attn_gcn_workspace_of(workspace, B, N, D, F);
    vtr_attn_gcn_param_ptrs w = vtr_attn_gcn_param_ptrs_of(params, D, F);
    int rows = B * N;
    size_t n = (size_t)rows * D;
    long long nf = (long long)N * F, nn = (long long)N * N, nd = (long long)N * D;

    // q and k over all rows, then the rows no score reads set to 0 (the CPU's packing)
    VTR_TRY(vtr_cuda_linear_forward(ws.q, x, w.query_w, w.query_b, rows, D, F, err));
    VTR_TRY(vtr_cuda_linear_forward(ws.k, x, w.key_w, w.key_b, rows, D, F, err));
    attn_gcn_mask_rows_kernel<<<vtr_cuda_blocks((size_t)rows * F), VTR_CUDA_THREADS>>>(
        ws.q, ws.k, rel_edges, B, N, F);
    VTR_TRY(vtr_cuda_launched("attention GCN row masks", err));
    // scores (N,N) of item b = q_b k_bᵀ / sqrt(F), written into attn, then the softmax in place
    float scale = 1.0f / sqrtf((float)F);
    VTR_TRY(vtr_cuda_sgemm_batched(false, true, N, N, F, scale, ws.q, F, nf, ws.k, F, nf, 0.0f,
                                   ws.attn, N, nn, B, err));
    attn_gcn_softmax_kernel<<<vtr_cuda_blocks((size_t)rows), VTR_CUDA_THREADS>>>(ws.attn, rel_edges,
                                                                                 rows, N);
    VTR_TRY(vtr_cuda_launched("attention GCN softmax", err));
    // agg (N,D) of item b = a_b (N,N) x_b (N,D)
    VTR_TRY(vtr_cuda_sgemm_batched(false, false, N, D, N, 1.0f, ws.attn, N, nn, x, D, nd, 0.0f,
                                   ws.agg, D, nd, B, err));
    // c = agg Wcᵀ (0 at the rows without an edge), held in out until the LayerNorm writes it
    VTR_TRY(vtr_cuda_linear_forward(out, ws.agg, w.ctx_w, NULL, rows, D, D, err));
    VTR_TRY(vtr_cuda_dropout_forward(out, out, n, p, seed, stream, (uint64_t)first * N * D, err));
    VTR_TRY(vtr_cuda_copy(ws.resid, x, sizeof(float) * n, err));
    VTR_TRY(vtr_cuda_add(ws.resid, out, n, err));
    return vtr_cuda_layernorm_forward(out, ws.mean, ws.rstd, ws.resid, w.norm_w, w.norm_b, rows, D,
                                      VTR_LAYERNORM_EPS, err);
}

extern "C" vtr_status vtr_cuda_attn_gcn_backward(float *dx, float *dparams, void *scratch,
                                                 const float *dout, const float *x,
                                                 const float *params, const void *workspace, int B,
                                                 int N, int D, int F, float p, uint64_t seed,
                                                 uint64_t stream, int64_t first, vtr_error *err)
{
    attn_gcn_workspace ws = attn_gcn_workspace_of(workspace, B, N, D, F);
    attn_gcn_scratch sc = attn_gcn_scratch_of(scratch, B, N, D, F);
    vtr_attn_gcn_param_ptrs w = vtr_attn_gcn_param_ptrs_of(params, D, F);
    vtr_attn_gcn_param_ptrs dw = vtr_attn_gcn_param_ptrs_of(dparams, D, F);
    int rows = B * N;
    size_t n = (size_t)rows * D;
    long long nf = (long long)N * F, nn = (long long)N * N, nd = (long long)N * D;

    VTR_TRY(vtr_cuda_zero(sc.dresid, sizeof(float) * n, err));
    VTR_TRY(vtr_cuda_layernorm_backward(sc.dresid, dw.norm_w, dw.norm_b, dout, ws.resid, w.norm_w,
                                        ws.mean, ws.rstd, rows, D, err));
    if (dx) // the residual path
        VTR_TRY(vtr_cuda_add(dx, sc.dresid, n, err));
    VTR_TRY(vtr_cuda_zero(sc.dctx, sizeof(float) * n, err));
    VTR_TRY(vtr_cuda_dropout_backward(sc.dctx, sc.dresid, n, p, seed, stream,
                                      (uint64_t)first * N * D, err));
    // the context Linear: agg is 0 at the rows without an edge, so they add nothing to its
    // weight's gradient; their dagg is not 0, but meets only their zero attention rows
    VTR_TRY(vtr_cuda_zero(sc.dagg, sizeof(float) * n, err));
    VTR_TRY(vtr_cuda_linear_backward(sc.dagg, dw.ctx_w, NULL, sc.dctx, ws.agg, w.ctx_w, rows, D, D,
                                     err));
    // agg_b = a_b x_b: da_b (N,N) = dagg_b x_bᵀ, dx_b += a_bᵀ dagg_b
    VTR_TRY(vtr_cuda_sgemm_batched(false, true, N, N, D, 1.0f, sc.dagg, D, nd, x, D, nd, 0.0f,
                                   sc.dattn, N, nn, B, err));
    if (dx)
        VTR_TRY(vtr_cuda_sgemm_batched(true, false, N, D, N, 1.0f, ws.attn, N, nn, sc.dagg, D, nd,
                                       1.0f, dx, D, nd, B, err));
    // through the softmax: a is 0 off the edges, so those scores get no gradient
    VTR_TRY(vtr_cuda_zero(sc.dscore, sizeof(float) * (size_t)rows * N, err));
    VTR_TRY(
        vtr_cuda_masked_softmax_backward(sc.dscore, sc.dattn, ws.attn, NULL, rows, N, 1.0f, err));
    // s_b = q_b k_bᵀ / sqrt(F): dq_b = ds_b k_b / sqrt(F), dk_b = ds_bᵀ q_b / sqrt(F)
    float scale = 1.0f / sqrtf((float)F);
    VTR_TRY(vtr_cuda_sgemm_batched(false, false, N, F, N, scale, sc.dscore, N, nn, ws.k, F, nf,
                                   0.0f, sc.dq, F, nf, B, err));
    VTR_TRY(vtr_cuda_sgemm_batched(true, false, N, F, N, scale, sc.dscore, N, nn, ws.q, F, nf, 0.0f,
                                   sc.dk, F, nf, B, err));
    // dq is 0 at the rows without an edge, dk at the rows no edge points to: all rows at once
    VTR_TRY(
        vtr_cuda_linear_backward(dx, dw.query_w, dw.query_b, sc.dq, x, w.query_w, rows, D, F, err));
    return vtr_cuda_linear_backward(dx, dw.key_w, dw.key_b, sc.dk, x, w.key_w, rows, D, F, err);
}
