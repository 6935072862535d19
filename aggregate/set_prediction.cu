// CUDA side of aggregate/set_prediction.h: the CPU's steps in the CPU's order, on the CPU's
// workspace and scratch layouts. The big products (the folded projections, the queries, the
// attention update's output projection and their gradients) are vtr_cuda_sgemm where the CPU
// calls vtr_matmul; the LayerNorms, l2norms, the MLP's Linear layers, GELU, dropout and the
// slots' bias gradient are the CUDA twins of the CPU's ops. The attention's per-item
// products, which the CPU does as small per-item sgemms over K = 4 slots, are one packed row
// (or one element) per thread here, the lengths and the packed rows' starts read on the
// device: nothing waits for the host. No atomics: every thread owns what it writes, and the
// sums over the inputs and over the items run in order.
#include "aggregate/set_pooling.h"
#include "aggregate/set_prediction.h"
#include "lib/activation.h"
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "lib/norm.h"
#include "lib/softmax.h"

typedef vtr_set_prediction_config sp_config;
typedef vtr_set_prediction_params sp_params;
typedef vtr_set_prediction_workspace sp_workspace;
typedef vtr_set_prediction_scratch sp_scratch;
typedef vtr_set_prediction_iteration sp_iteration;

// The dropout streams of iteration t (the header).
static uint64_t update_stream(uint64_t stream, int t)
{
    return stream + 2 * (uint64_t)(t - 1);
}

static uint64_t hidden_stream(uint64_t stream, int t)
{
    return stream + 2 * (uint64_t)(t - 1) + 1;
}

// Iteration 1 shares one qf (K,C) among the items: qf of item b starts at b * q_step.
static size_t q_step(const sp_config *c, int t)
{
    return t == 1 ? 0 : (size_t)c->K * c->C;
}

// The real input (b, n) of element e of a (B,N) grid: false for a padded one; *r its packed
// row.
static __device__ __forceinline__ bool real_input(size_t *r, int *b, const int *lengths,
                                                  const int *row0, size_t e, int N)
{
    *b = (int)(e / (size_t)N);
    int n = (int)(e % (size_t)N);
    *r = (size_t)row0[*b] + n;
    return n < lengths[*b];
}

/* ---- Input stage ---- */

__global__ static void row_starts_kernel(int *row0, const int *lengths, int B)
{
    vtr_set_prediction_row_starts(row0, lengths, B);
}

// xn (R,C), mean, rstd (R) = LN_in of the real rows of inp (B,N,C), one row per thread
__global__ static void input_norm_kernel(float *xn, float *mean, float *rstd, const float *inp,
                                         const float *weight, const float *bias, const int *lengths,
                                         const int *row0, int B, int N, int C)
{
    size_t total = (size_t)B * N, r;
    int b;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride())
        if (real_input(&r, &b, lengths, row0, e, N))
            vtr_layernorm_row_forward(xn + r * C, &mean[r], &rstd[r], inp + e * C, weight, bias, C,
                                      VTR_LAYERNORM_EPS);
}

// LN_in's weight and bias gradients over the R packed rows, one column per thread
__global__ static void input_norm_param_grads_kernel(float *dweight, float *dbias, const float *dxn,
                                                     const float *xin, const float *mean,
                                                     const float *rstd, const int *row0, int B,
                                                     int C)
{
    for (size_t c = vtr_cuda_first(); c < (size_t)C; c += vtr_cuda_stride())
        vtr_layernorm_param_grads_columns(dweight, dbias, dxn, xin, mean, rstd, row0[B], C, (int)c,
                                          1);
}

// dinp (B,N,C) += LN_in's input gradient at the real rows, one row per thread
__global__ static void input_norm_dinp_kernel(float *dinp, const float *dxn, const float *inp,
                                              const float *weight, const float *mean,
                                              const float *rstd, const int *lengths,
                                              const int *row0, int B, int N, int C)
{
    size_t total = (size_t)B * N, r;
    int b;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride())
        if (real_input(&r, &b, lengths, row0, e, N))
            vtr_layernorm_row_backward(dinp + e * C, dxn + r * C, inp + e * C, weight, mean[r],
                                       rstd[r], C);
}

/* ---- Attention ---- */

// attn (R,K) = softmax over the slots of x qfᵀ, one real row per thread; qf of item b at
// q + b * qstep
__global__ static void scores_kernel(float *attn, const float *xn, const float *q, size_t qstep,
                                     const int *lengths, const int *row0, int B, int N, int K,
                                     int C)
{
    size_t total = (size_t)B * N, r;
    int b;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        if (!real_input(&r, &b, lengths, row0, e, N))
            continue;
        float *row = attn + r * K;
        for (int j = 0; j < K; j++)
            row[j] = vtr_dot(xn + r * C, q + b * qstep + (size_t)j * C, C);
        vtr_masked_softmax_row_forward(row, row, K, K, 1.0f);
    }
}

// attn_n (R,K), total (B,K), one (item, slot) per thread
__global__ static void normalize_kernel(float *attn_n, float *total, const float *attn,
                                        const int *lengths, const int *row0, int B, int K)
{
    size_t count = (size_t)B * K;
    for (size_t e = vtr_cuda_first(); e < count; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)K, r0 = (size_t)row0[b];
        vtr_set_attention_normalize(attn_n + r0 * K, total + e, attn + r0 * K, lengths[b], K,
                                    (int)(e % (size_t)K));
    }
}

// out (B*K,C): out[b,j,c] = sum over item b's inputs n of w[r0+n, j] x[r0+n, c], one (b, j, c)
// per thread (U = Âᵀ x forward, dqf = dMᵀ x backward)
__global__ static void slot_sums_kernel(float *out, const float *w, const float *x,
                                        const int *lengths, const int *row0, int B, int K, int C)
{
    size_t count = (size_t)B * K * C;
    for (size_t e = vtr_cuda_first(); e < count; e += vtr_cuda_stride()) {
        size_t bj = e / (size_t)C, c = e % (size_t)C, b = bj / (size_t)K, j = bj % (size_t)K;
        size_t r0 = (size_t)row0[b];
        float sum = 0.0f;
        for (int n = 0; n < lengths[b]; n++)
            sum += w[(r0 + n) * K + j] * x[(r0 + n) * C + c];
        out[e] = sum;
    }
}

// dq (K,C) = the items' dq (B,K,C) summed in item order, in place; one (j, c) per thread
__global__ static void sum_items_kernel(float *dq, int B, int K, int C)
{
    size_t kc = (size_t)K * C;
    for (size_t e = vtr_cuda_first(); e < kc; e += vtr_cuda_stride()) {
        float sum = 0.0f;
        for (int b = 0; b < B; b++)
            sum += dq[b * kc + e];
        dq[e] = sum;
    }
}

// dattn_n (R,K) = x dUᵀ within each item, one real row per thread
__global__ static void dattn_kernel(float *dattn_n, const float *xn, const float *dupd,
                                    const int *lengths, const int *row0, int B, int N, int K, int C)
{
    size_t total = (size_t)B * N, r;
    int b;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride())
        if (real_input(&r, &b, lengths, row0, e, N))
            for (int j = 0; j < K; j++)
                dattn_n[r * K + j] = vtr_dot(xn + r * C, dupd + ((size_t)b * K + j) * C, C);
}

// dxn (R,C) += w g within each item: dxn[r,c] += sum_j w[r,j] g[b,j,c], g of item b at
// g + b * gstep; one real (row, column) per thread (dx += Â dU, dx += dM qf)
__global__ static void dx_kernel(float *dxn, const float *w, const float *g, size_t gstep,
                                 const int *lengths, const int *row0, int B, int N, int K, int C)
{
    size_t total = (size_t)B * N * C, r;
    int b;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        if (!real_input(&r, &b, lengths, row0, e / (size_t)C, N))
            continue;
        size_t c = e % (size_t)C;
        float sum = 0.0f;
        for (int j = 0; j < K; j++)
            sum += w[r * K + j] * g[b * gstep + (size_t)j * C + c];
        dxn[r * C + c] += sum;
    }
}

// dattn_n: dÂ -> dA in place, one (item, slot) per thread
__global__ static void normalize_backward_kernel(float *dattn_n, const float *attn_n,
                                                 const float *total, const int *lengths,
                                                 const int *row0, int B, int K)
{
    size_t count = (size_t)B * K;
    for (size_t e = vtr_cuda_first(); e < count; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)K, r0 = (size_t)row0[b];
        vtr_set_attention_normalize_backward(dattn_n + r0 * K, attn_n + r0 * K, total[e],
                                             lengths[b], K, (int)(e % (size_t)K));
    }
}

// dscore (R,K) = the softmax's input gradient from dA, one real row per thread
__global__ static void softmax_backward_kernel(float *dscore, const float *dattn, const float *attn,
                                               const int *lengths, const int *row0, int B, int N,
                                               int K)
{
    size_t total = (size_t)B * N, r;
    int b;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        if (!real_input(&r, &b, lengths, row0, e, N))
            continue;
        for (int j = 0; j < K; j++)
            dscore[r * K + j] = 0.0f;
        vtr_masked_softmax_row_backward(dscore + r * K, dattn + r * K, attn + r * K, K, 1.0f);
    }
}

/* ---- Slot stages ---- */

// ep (B*K,D) = e_prev + upd, one element per thread (vtr_set_prediction_residual)
__global__ static void residual_kernel(float *ep, const float *e_prev, const float *upd, int BK,
                                       int K, int D, int shared)
{
    size_t total = (size_t)BK * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        int r = (int)(e / (size_t)D), d = (int)(e % (size_t)D);
        vtr_set_prediction_residual(ep, e_prev, upd, r, K, D, shared, d, d + 1);
    }
}

// sum (B*K,D) = LN_out(E_T) + LN_g(glob), one element per thread
__global__ static void sum_kernel(float *sum, const float *out_ln, const float *glob_ln, int BK,
                                  int K, int D)
{
    size_t total = (size_t)BK * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        int r = (int)(e / (size_t)D), d = (int)(e % (size_t)D);
        vtr_set_prediction_sum(sum, out_ln, glob_ln, r, K, D, d, d + 1);
    }
}

// dglob_ln (B,D), one element per thread
__global__ static void dglob_kernel(float *dglob_ln, const float *dsum, int B, int K, int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        int b = (int)(e / (size_t)D), d = (int)(e % (size_t)D);
        vtr_set_prediction_dglob(dglob_ln, dsum, b, K, D, d, d + 1);
    }
}

/* ---- Forward ---- */

static vtr_status input_forward(const sp_workspace *w, const float *inp, const int *lengths,
                                const sp_params *P, const sp_config *c, int B, int N,
                                vtr_error *err)
{
    int C = c->C, D = c->D, Dh = c->Dh;
    row_starts_kernel<<<1, 1>>>(w->row0, lengths, B);
    VTR_TRY(vtr_cuda_launched("set prediction row starts", err));
    input_norm_kernel<<<vtr_cuda_blocks((size_t)B * N), VTR_CUDA_THREADS>>>(
        w->xn, w->in_mean, w->in_rstd, inp, P->norm_in_w, P->norm_in_b, lengths, w->row0, B, N, C);
    VTR_TRY(vtr_cuda_launched("set prediction input LayerNorm", err));
    // Gq (D,C) = Wqᵀ (D,Dh) Wk (Dh,C) / sqrt(Dh); Fo (D,C) = Wo (D,Dh) Wv (Dh,C)
    VTR_TRY(vtr_cuda_sgemm(true, false, D, C, Dh, 1.0f / sqrtf((float)Dh), P->to_q, D, P->to_k, C,
                           0.0f, w->gq, C, err));
    return vtr_cuda_sgemm(false, false, D, C, Dh, 1.0f, P->to_out, Dh, P->to_v, C, 0.0f, w->fo, C,
                          err);
}

static vtr_status iteration_forward(const sp_iteration *it, const sp_workspace *w,
                                    const float *e_prev, const int *lengths, const sp_params *P,
                                    const sp_config *c, int B, int N, int t, float p, uint64_t seed,
                                    uint64_t stream, int64_t first, vtr_error *err)
{
    int K = c->K, C = c->C, D = c->D, H = c->H, BK = B * K;
    int q_rows = t == 1 ? K : BK;
    size_t nd = (size_t)BK * D, nh = (size_t)BK * H, rows = (size_t)B * N;
    // qf = LN_q(E_{t-1}) Gq
    VTR_TRY(vtr_cuda_layernorm_forward(it->lq, it->q_mean, it->q_rstd, e_prev, P->norm_q_w,
                                       P->norm_q_b, q_rows, D, VTR_LAYERNORM_EPS, err));
    VTR_TRY(
        vtr_cuda_sgemm(false, false, q_rows, C, D, 1.0f, it->lq, D, w->gq, C, 0.0f, it->q, C, err));
    // A, Â and U = Âᵀ x
    scores_kernel<<<vtr_cuda_blocks(rows), VTR_CUDA_THREADS>>>(it->attn, w->xn, it->q, q_step(c, t),
                                                               lengths, w->row0, B, N, K, C);
    VTR_TRY(vtr_cuda_launched("set prediction attention scores", err));
    normalize_kernel<<<vtr_cuda_blocks((size_t)BK), VTR_CUDA_THREADS>>>(
        it->attn_n, it->total, it->attn, lengths, w->row0, B, K);
    VTR_TRY(vtr_cuda_launched("set prediction attention totals", err));
    slot_sums_kernel<<<vtr_cuda_blocks((size_t)BK * C), VTR_CUDA_THREADS>>>(
        it->upd, it->attn_n, w->xn, lengths, w->row0, B, K, C);
    VTR_TRY(vtr_cuda_launched("set prediction attention update", err));
    // E' = E_{t-1} + drop(U Foᵀ)
    VTR_TRY(
        vtr_cuda_sgemm(false, true, BK, D, C, 1.0f, it->upd, C, w->fo, C, 0.0f, w->tmp, D, err));
    if (p > 0.0f)
        VTR_TRY(vtr_cuda_dropout_forward(w->tmp, w->tmp, nd, p, seed, update_stream(stream, t),
                                         (uint64_t)first * K * D, err));
    residual_kernel<<<vtr_cuda_blocks(nd), VTR_CUDA_THREADS>>>(it->ep, e_prev, w->tmp, BK, K, D,
                                                               t == 1);
    VTR_TRY(vtr_cuda_launched("set prediction residual", err));
    // E_t = E' + drop(GELU(LN_m(E') W1ᵀ + b1)) W2ᵀ + b2
    VTR_TRY(vtr_cuda_layernorm_forward(it->lm, it->m_mean, it->m_rstd, it->ep, P->norm_mlp_w,
                                       P->norm_mlp_b, BK, D, VTR_LAYERNORM_EPS, err));
    VTR_TRY(vtr_cuda_linear_forward(it->z, it->lm, P->mlp0_w, P->mlp0_b, BK, D, H, err));
    VTR_TRY(vtr_cuda_gelu_forward(it->h, it->z, nh, err));
    if (p > 0.0f)
        VTR_TRY(vtr_cuda_dropout_forward(it->h, it->h, nh, p, seed, hidden_stream(stream, t),
                                         (uint64_t)first * K * H, err));
    VTR_TRY(vtr_cuda_linear_forward(w->tmp, it->h, P->mlp1_w, P->mlp1_b, BK, H, D, err));
    residual_kernel<<<vtr_cuda_blocks(nd), VTR_CUDA_THREADS>>>(it->e, it->ep, w->tmp, BK, K, D, 0);
    return vtr_cuda_launched("set prediction MLP residual", err);
}

static vtr_status output_forward(float *set, float *slots_n, const sp_workspace *w,
                                 const float *e_last, const float *glob, const sp_params *P,
                                 const sp_config *c, int B, vtr_error *err)
{
    int K = c->K, D = c->D, BK = B * K;
    VTR_TRY(vtr_cuda_layernorm_forward(w->out_ln, w->out_mean, w->out_rstd, e_last, P->norm_out_w,
                                       P->norm_out_b, BK, D, VTR_LAYERNORM_EPS, err));
    VTR_TRY(vtr_cuda_l2norm_forward(slots_n, w->out_norm, w->out_ln, BK, D, err));
    VTR_TRY(vtr_cuda_layernorm_forward(w->glob_ln, w->glob_mean, w->glob_rstd, glob, P->norm_g_w,
                                       P->norm_g_b, B, D, VTR_LAYERNORM_EPS, err));
    sum_kernel<<<vtr_cuda_blocks((size_t)BK * D), VTR_CUDA_THREADS>>>(w->sum, w->out_ln, w->glob_ln,
                                                                      BK, K, D);
    VTR_TRY(vtr_cuda_launched("set prediction output sum", err));
    return vtr_cuda_l2norm_forward(set, w->sum_norm, w->sum, BK, D, err);
}

extern "C" vtr_status vtr_cuda_set_prediction_forward(float *set, float *slots_n, void *workspace,
                                                      const float *inp, const int *lengths,
                                                      const float *glob, const float *params,
                                                      const sp_config *c, int B, int N, float p,
                                                      uint64_t seed, uint64_t stream, int64_t first,
                                                      vtr_error *err)
{
    sp_workspace w = vtr_set_prediction_workspace_of(workspace, c, B, N);
    sp_params P = vtr_set_prediction_params_of(params, c);
    VTR_TRY(input_forward(&w, inp, lengths, &P, c, B, N, err));
    const float *e_prev = P.slots;
    for (int t = 1; t <= c->T; t++) {
        sp_iteration it = vtr_set_prediction_iteration_of(&w, c, B, N, t);
        VTR_TRY(iteration_forward(&it, &w, e_prev, lengths, &P, c, B, N, t, p, seed, stream, first,
                                  err));
        e_prev = it.e;
    }
    return output_forward(set, slots_n, &w, e_prev, glob, &P, c, B, err);
}

/* ---- Backward ---- */

// s->de (B*K,D) = dE_T; dglob (B,D) or NULL +=; dparams' norm_out, norm_global +=
static vtr_status output_backward(float *dglob, const sp_params *G, const sp_scratch *s,
                                  const float *dset, const float *dslots_n, const sp_workspace *w,
                                  const float *e_last, const float *glob, const sp_params *P,
                                  const sp_config *c, int B, vtr_error *err)
{
    int K = c->K, D = c->D, BK = B * K;
    size_t nd = (size_t)BK * D;
    VTR_TRY(vtr_cuda_zero(s->dsum, sizeof(float) * nd, err));
    VTR_TRY(vtr_cuda_l2norm_backward(s->dsum, dset, w->sum, w->sum_norm, BK, D, err));
    VTR_TRY(vtr_cuda_copy(s->dout_ln, s->dsum, sizeof(float) * nd, err));
    if (dslots_n)
        VTR_TRY(vtr_cuda_l2norm_backward(s->dout_ln, dslots_n, w->out_ln, w->out_norm, BK, D, err));
    dglob_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(s->dglob_ln, s->dsum, B, K,
                                                                       D);
    VTR_TRY(vtr_cuda_launched("set prediction global gradient", err));
    VTR_TRY(vtr_cuda_layernorm_backward(dglob, G->norm_g_w, G->norm_g_b, s->dglob_ln, glob,
                                        P->norm_g_w, w->glob_mean, w->glob_rstd, B, D, err));
    VTR_TRY(vtr_cuda_zero(s->de, sizeof(float) * nd, err));
    return vtr_cuda_layernorm_backward(s->de, G->norm_out_w, G->norm_out_b, s->dout_ln, e_last,
                                       P->norm_out_w, w->out_mean, w->out_rstd, BK, D, err);
}

// from dupd (B*K,C): dq (B*K,C) written (iteration 1: (K,C), summed over the items);
// dxn (R,C) +=; dattn_n, dscore (R,K) scratch
static vtr_status attention_backward(const sp_scratch *s, const sp_iteration *it,
                                     const sp_workspace *w, const int *lengths, const sp_config *c,
                                     int B, int N, int t, vtr_error *err)
{
    int K = c->K, C = c->C, BK = B * K;
    size_t rows = (size_t)B * N;
    // dÂ = x dUᵀ; dx += Â dU; dÂ -> dA; dM through the softmax
    dattn_kernel<<<vtr_cuda_blocks(rows), VTR_CUDA_THREADS>>>(s->dattn_n, w->xn, s->dupd, lengths,
                                                              w->row0, B, N, K, C);
    VTR_TRY(vtr_cuda_launched("set prediction attention gradient", err));
    dx_kernel<<<vtr_cuda_blocks(rows * C), VTR_CUDA_THREADS>>>(
        s->dxn, it->attn_n, s->dupd, (size_t)K * C, lengths, w->row0, B, N, K, C);
    VTR_TRY(vtr_cuda_launched("set prediction update input gradient", err));
    normalize_backward_kernel<<<vtr_cuda_blocks((size_t)BK), VTR_CUDA_THREADS>>>(
        s->dattn_n, it->attn_n, it->total, lengths, w->row0, B, K);
    VTR_TRY(vtr_cuda_launched("set prediction attention totals backward", err));
    softmax_backward_kernel<<<vtr_cuda_blocks(rows), VTR_CUDA_THREADS>>>(
        s->dscore, s->dattn_n, it->attn, lengths, w->row0, B, N, K);
    VTR_TRY(vtr_cuda_launched("set prediction softmax backward", err));
    // M = x qfᵀ: dqf = dMᵀ x (per item; iteration 1 sums the items), dx += dM qf
    slot_sums_kernel<<<vtr_cuda_blocks((size_t)BK * C), VTR_CUDA_THREADS>>>(
        s->dq, s->dscore, w->xn, lengths, w->row0, B, K, C);
    VTR_TRY(vtr_cuda_launched("set prediction query gradient", err));
    if (t == 1) {
        sum_items_kernel<<<vtr_cuda_blocks((size_t)K * C), VTR_CUDA_THREADS>>>(s->dq, B, K, C);
        VTR_TRY(vtr_cuda_launched("set prediction shared query gradient", err));
    }
    dx_kernel<<<vtr_cuda_blocks(rows * C), VTR_CUDA_THREADS>>>(
        s->dxn, s->dscore, it->q, q_step(c, t), lengths, w->row0, B, N, K, C);
    return vtr_cuda_launched("set prediction score input gradient", err);
}

// s->de (B*K,D): dE_t in, dE_{t-1} out (at t = 1 the residual part, LN_q's part into the
// slots' gradient); dparams +=
static vtr_status iteration_backward(const sp_params *G, const sp_scratch *s,
                                     const sp_iteration *it, const sp_workspace *w,
                                     const float *e_prev, const int *lengths, const sp_params *P,
                                     const sp_config *c, int B, int N, int t, float p,
                                     uint64_t seed, uint64_t stream, int64_t first, vtr_error *err)
{
    int K = c->K, C = c->C, D = c->D, H = c->H, BK = B * K;
    int q_rows = t == 1 ? K : BK;
    size_t nd = (size_t)BK * D, nh = (size_t)BK * H;
    float beta = t == c->T ? 0.0f : 1.0f; /* the last iteration's backward comes first */
    // the MLP: dh1 = dE_t W2, back through dropout and GELU to dz, then to LN_m's output
    VTR_TRY(vtr_cuda_zero(s->dh1, sizeof(float) * nh, err));
    VTR_TRY(vtr_cuda_linear_backward(s->dh1, G->mlp1_w, G->mlp1_b, s->de, it->h, P->mlp1_w, BK, H,
                                     D, err));
    float *dgelu = s->dh1, *dz = s->dh2;
    if (p > 0.0f) {
        VTR_TRY(vtr_cuda_zero(s->dh2, sizeof(float) * nh, err));
        VTR_TRY(vtr_cuda_dropout_backward(s->dh2, s->dh1, nh, p, seed, hidden_stream(stream, t),
                                          (uint64_t)first * K * H, err));
        dgelu = s->dh2, dz = s->dh1;
    }
    VTR_TRY(vtr_cuda_zero(dz, sizeof(float) * nh, err));
    VTR_TRY(vtr_cuda_gelu_backward(dz, dgelu, it->z, nh, err));
    VTR_TRY(vtr_cuda_zero(s->dln, sizeof(float) * nd, err));
    VTR_TRY(vtr_cuda_linear_backward(s->dln, G->mlp0_w, G->mlp0_b, dz, it->lm, P->mlp0_w, BK, D, H,
                                     err));
    // dE' = dE_t (the residual) + LN_m's input gradient
    VTR_TRY(vtr_cuda_layernorm_backward(s->de, G->norm_mlp_w, G->norm_mlp_b, s->dln, it->ep,
                                        P->norm_mlp_w, it->m_mean, it->m_rstd, BK, D, err));
    // the attention update U Foᵀ: dU = drop'(dE') Fo, dFo += drop'(dE')ᵀ U
    const float *datt = s->de;
    if (p > 0.0f) {
        VTR_TRY(vtr_cuda_zero(s->datt, sizeof(float) * nd, err));
        VTR_TRY(vtr_cuda_dropout_backward(s->datt, s->de, nd, p, seed, update_stream(stream, t),
                                          (uint64_t)first * K * D, err));
        datt = s->datt;
    }
    VTR_TRY(vtr_cuda_sgemm(false, false, BK, C, D, 1.0f, datt, D, w->fo, C, 0.0f, s->dupd, C, err));
    VTR_TRY(vtr_cuda_sgemm(true, false, D, C, BK, 1.0f, datt, D, it->upd, C, beta, s->dfo, C, err));
    VTR_TRY(attention_backward(s, it, w, lengths, c, B, N, t, err));
    // qf = LN_q(E_{t-1}) Gq: dGq += LN_q(E_{t-1})ᵀ dqf; dE_{t-1} = dE' + LN_q's input gradient
    VTR_TRY(
        vtr_cuda_sgemm(true, false, D, C, q_rows, 1.0f, it->lq, D, s->dq, C, beta, s->dgq, C, err));
    VTR_TRY(
        vtr_cuda_sgemm(false, true, q_rows, D, C, 1.0f, s->dq, C, w->gq, C, 0.0f, s->dln, D, err));
    return vtr_cuda_layernorm_backward(t == 1 ? G->slots : s->de, G->norm_q_w, G->norm_q_b, s->dln,
                                       e_prev, P->norm_q_w, it->q_mean, it->q_rstd, q_rows, D, err);
}

// dinp (B,N,C) or NULL += at the real rows; dparams' norm_in, to_q, to_k, to_v, to_out +=
static vtr_status input_backward(float *dinp, const sp_params *G, const sp_scratch *s,
                                 const sp_workspace *w, const float *inp, const int *lengths,
                                 const sp_params *P, const sp_config *c, int B, int N,
                                 vtr_error *err)
{
    int C = c->C, D = c->D, Dh = c->Dh;
    float scale = 1.0f / sqrtf((float)Dh);
    VTR_TRY(
        vtr_cuda_sgemm(false, true, Dh, D, C, scale, P->to_k, C, s->dgq, C, 1.0f, G->to_q, D, err));
    VTR_TRY(vtr_cuda_sgemm(false, false, Dh, C, D, scale, P->to_q, D, s->dgq, C, 1.0f, G->to_k, C,
                           err));
    VTR_TRY(vtr_cuda_sgemm(false, true, D, Dh, C, 1.0f, s->dfo, C, P->to_v, C, 1.0f, G->to_out, Dh,
                           err));
    VTR_TRY(vtr_cuda_sgemm(true, false, Dh, C, D, 1.0f, P->to_out, Dh, s->dfo, C, 1.0f, G->to_v, C,
                           err));
    VTR_TRY(vtr_cuda_pack_rows(s->xin, inp, lengths, B, N, C, err));
    input_norm_param_grads_kernel<<<vtr_cuda_blocks((size_t)C), VTR_CUDA_THREADS>>>(
        G->norm_in_w, G->norm_in_b, s->dxn, s->xin, w->in_mean, w->in_rstd, w->row0, B, C);
    VTR_TRY(vtr_cuda_launched("set prediction input LayerNorm parameter gradients", err));
    if (!dinp)
        return VTR_OK;
    input_norm_dinp_kernel<<<vtr_cuda_blocks((size_t)B * N), VTR_CUDA_THREADS>>>(
        dinp, s->dxn, inp, P->norm_in_w, w->in_mean, w->in_rstd, lengths, w->row0, B, N, C);
    return vtr_cuda_launched("set prediction input LayerNorm input gradient", err);
}

extern "C" vtr_status
vtr_cuda_set_prediction_backward(float *dinp, float *dglob, float *dparams, void *scratch,
                                 const float *dset, const float *dslots_n, const void *workspace,
                                 const float *inp, const int *lengths, const float *glob,
                                 const float *params, const sp_config *c, int B, int N, float p,
                                 uint64_t seed, uint64_t stream, int64_t first, vtr_error *err)
{
    sp_workspace w = vtr_set_prediction_workspace_of((void *)workspace, c, B, N);
    sp_scratch s = vtr_set_prediction_scratch_of(scratch, c, B, N);
    sp_params P = vtr_set_prediction_params_of(params, c);
    sp_params G = vtr_set_prediction_params_of(dparams, c);
    VTR_TRY(vtr_cuda_zero(s.dxn, sizeof(float) * (size_t)B * N * c->C, err));
    VTR_TRY(output_backward(dglob, &G, &s, dset, dslots_n, &w,
                            vtr_set_prediction_iteration_of(&w, c, B, N, c->T).e, glob, &P, c, B,
                            err));
    for (int t = c->T; t >= 1; t--) {
        sp_iteration it = vtr_set_prediction_iteration_of(&w, c, B, N, t);
        const float *e_prev =
            t == 1 ? P.slots : vtr_set_prediction_iteration_of(&w, c, B, N, t - 1).e;
        VTR_TRY(iteration_backward(&G, &s, &it, &w, e_prev, lengths, &P, c, B, N, t, p, seed,
                                   stream, first, err));
    }
    // E_0 is the slots in every item: their residual gradients summed over the items in order
    VTR_TRY(vtr_cuda_bias_backward(G.slots, s.de, B, c->K * c->D, err));
    return input_backward(dinp, &G, &s, &w, inp, lengths, &P, c, B, N, err);
}
