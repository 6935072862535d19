#include "set_prediction.h"

#include <math.h>
#include <string.h>

#include "lib/activation.h"
#include "lib/linear.h"
#include "lib/matmul.h"
#include "lib/norm.h"
#include "lib/softmax.h"

/* Elements below which a loop stays on one thread (the fork costs more than it saves). */
#define PARALLEL_MIN 65536

/* How it is computed.
 *
 * The real inputs of all items are packed, item after item, into R = sum of lengths rows
 * (row r0(b) + n is input n of item b, r0(b) = the lengths before b): LN_in runs over them
 * only, and the attention of item b reads its n_b rows. Padded inputs never enter, so they
 * get no gradient and their values do not matter.
 *
 * The projections are folded. Wq, Wk, Wv and Wo have no biases, so the scores and the update
 * are products with two (D,C) matrices, formed once per call:
 *
 *   Gq = Wqᵀ Wk / sqrt(Dh)   M = k qᵀ / sqrt(Dh) = x (LN_q(E) Gq)ᵀ     qf = LN_q(E) Gq (B*K,C)
 *   Fo = Wo Wv               Âᵀ v Woᵀ = (Âᵀ x) Foᵀ                    U  = Âᵀ x      (B*K,C)
 *
 * so k and v (R,Dh) are never formed, and each iteration's q and output projections are
 * (B*K x D x C) instead of (B*K x D x Dh). Backward accumulates dGq and dFo over the
 * iterations and turns them into the four weights' gradients at the end (dWq = Wk dGqᵀ /
 * sqrt(Dh), dWk = Wq dGq / sqrt(Dh), dWo = dFo Wvᵀ, dWv = Woᵀ dFo). Folding costs 12 D Dh C
 * FLOPs per forward and backward and saves 12 R C Dh (k and v) plus the (Dh - C) share of
 * the per-iteration projections: it pays from R > D real inputs per batch (B 128 captions
 * of 8 words and more). The result is the same function; its rounding differs from the
 * unfolded reference by float32 summation error (tests/test_set_prediction.c's parity).
 *
 * E_0 is the same for every item, so iteration 1 normalizes and projects the K slots once:
 * its qf is (K,C), and its scores for all items are one sgemm x qfᵀ (R,K) over the packed
 * rows (so are, in backward, dqf = dMᵀ x summed over the items and dx += dM qf). The later
 * iterations have a qf per item and take one small sgemm per item for M and one for U; with
 * K = 4 these are under 1% of the FLOPs and run one after another.
 *
 * Cost. At B 128, N 20, C = D = 1024, Dh 2048, H 4096, K 4, T 4 the forward is 50 GFLOP
 * (71 unfolded), forward and backward 151 (213), of which the MLP is 103.
 *
 * The slot stages work on the B*K rows of (B,K,D) buffers; row b*K + j is slot j of item b. */

/* The layout's types (the header), by shorter names. */
typedef vtr_set_prediction_params sp_params;
typedef vtr_set_prediction_workspace sp_workspace;
typedef vtr_set_prediction_scratch sp_scratch;
typedef vtr_set_prediction_iteration sp_iteration;

/* Parameter tensors, in buffer order (the header). */
enum {
    P_SLOTS,
    P_NORM_IN_W,
    P_NORM_IN_B,
    P_NORM_Q_W,
    P_NORM_Q_B,
    P_TO_Q,
    P_TO_K,
    P_TO_V,
    P_TO_OUT,
    P_NORM_MLP_W,
    P_NORM_MLP_B,
    P_MLP0_W,
    P_MLP0_B,
    P_MLP1_W,
    P_MLP1_B,
    P_NORM_OUT_W,
    P_NORM_OUT_B,
    P_NORM_G_W,
    P_NORM_G_B,
};

static const char *const tensor_names[VTR_SET_PREDICTION_TENSORS] = {
    "slots",         "norm_in.weight",     "norm_in.bias",     "norm_q.weight",
    "norm_q.bias",   "to_q.weight",        "to_k.weight",      "to_v.weight",
    "to_out.weight", "norm_mlp.weight",    "norm_mlp.bias",    "mlp.0.weight",
    "mlp.0.bias",    "mlp.1.weight",       "mlp.1.bias",       "norm_out.weight",
    "norm_out.bias", "norm_global.weight", "norm_global.bias",
};

/* shape[0], shape[1] of tensor i; shape[1] = 0 for a vector */
static void tensor_shape(const vtr_set_prediction_config *c, int i, int shape[2])
{
    shape[1] = 0;
    switch (i) {
    case P_SLOTS: shape[0] = c->K, shape[1] = c->D; break;
    case P_NORM_IN_W:
    case P_NORM_IN_B: shape[0] = c->C; break;
    case P_TO_Q: shape[0] = c->Dh, shape[1] = c->D; break;
    case P_TO_K:
    case P_TO_V: shape[0] = c->Dh, shape[1] = c->C; break;
    case P_TO_OUT: shape[0] = c->D, shape[1] = c->Dh; break;
    case P_MLP0_W: shape[0] = c->H, shape[1] = c->D; break;
    case P_MLP0_B: shape[0] = c->H; break;
    case P_MLP1_W: shape[0] = c->D, shape[1] = c->H; break;
    default: shape[0] = c->D; break; /* the other LayerNorms' weights and biases, mlp.1.bias */
    }
}

const char *vtr_set_prediction_param_name(const vtr_set_prediction_config *c, int i, int shape[2],
                                          size_t *offset)
{
    size_t off = 0;
    for (int j = 0; j < i; j++) {
        tensor_shape(c, j, shape);
        off += (size_t)shape[0] * (size_t)(shape[1] ? shape[1] : 1);
    }
    tensor_shape(c, i, shape);
    *offset = off;
    return tensor_names[i];
}

size_t vtr_set_prediction_param_count(const vtr_set_prediction_config *c)
{
    int shape[2];
    size_t off;
    vtr_set_prediction_param_name(c, VTR_SET_PREDICTION_TENSORS - 1, shape, &off);
    return off + (size_t)shape[0] * (size_t)(shape[1] ? shape[1] : 1);
}

sp_params vtr_set_prediction_params_of(const float *buf, const vtr_set_prediction_config *c)
{
    float *t[VTR_SET_PREDICTION_TENSORS];
    for (int i = 0; i < VTR_SET_PREDICTION_TENSORS; i++) {
        int shape[2];
        size_t off;
        vtr_set_prediction_param_name(c, i, shape, &off);
        t[i] = (float *)buf + off;
    }
    return (sp_params){
        .slots = t[P_SLOTS],
        .norm_in_w = t[P_NORM_IN_W],
        .norm_in_b = t[P_NORM_IN_B],
        .norm_q_w = t[P_NORM_Q_W],
        .norm_q_b = t[P_NORM_Q_B],
        .to_q = t[P_TO_Q],
        .to_k = t[P_TO_K],
        .to_v = t[P_TO_V],
        .to_out = t[P_TO_OUT],
        .norm_mlp_w = t[P_NORM_MLP_W],
        .norm_mlp_b = t[P_NORM_MLP_B],
        .mlp0_w = t[P_MLP0_W],
        .mlp0_b = t[P_MLP0_B],
        .mlp1_w = t[P_MLP1_W],
        .mlp1_b = t[P_MLP1_B],
        .norm_out_w = t[P_NORM_OUT_W],
        .norm_out_b = t[P_NORM_OUT_B],
        .norm_g_w = t[P_NORM_G_W],
        .norm_g_b = t[P_NORM_G_B],
    };
}

/* Carves 64-byte aligned regions out of a buffer, one after the other; with base NULL it
 * only counts the bytes (the size functions). */
typedef struct region_cursor {
    char *base;
    size_t used;
} region_cursor;

static float *take(region_cursor *cur, size_t floats)
{
    float *p = cur->base ? (float *)(cur->base + cur->used) : NULL;
    cur->used += vtr_workspace_align(sizeof(float) * floats);
    return p;
}

static sp_workspace workspace_carve(void *base, const vtr_set_prediction_config *c, int B, int N,
                                    size_t *bytes)
{
    region_cursor cur = {base, 0};
    size_t R = (size_t)B * N, BK = (size_t)B * c->K, T = (size_t)c->T;
    sp_workspace w;
    w.row0 = (int *)take(&cur, (size_t)B + 1); /* int and float are both 4 bytes */
    w.xn = take(&cur, R * c->C);
    w.in_mean = take(&cur, R);
    w.in_rstd = take(&cur, R);
    w.gq = take(&cur, (size_t)c->D * c->C);
    w.fo = take(&cur, (size_t)c->D * c->C);
    w.lq = take(&cur, T * BK * c->D);
    w.q_mean = take(&cur, T * BK);
    w.q_rstd = take(&cur, T * BK);
    w.q = take(&cur, T * BK * c->C);
    w.attn = take(&cur, T * R * c->K);
    w.attn_n = take(&cur, T * R * c->K);
    w.total = take(&cur, T * BK);
    w.upd = take(&cur, T * BK * c->C);
    w.ep = take(&cur, T * BK * c->D);
    w.lm = take(&cur, T * BK * c->D);
    w.m_mean = take(&cur, T * BK);
    w.m_rstd = take(&cur, T * BK);
    w.z = take(&cur, T * BK * c->H);
    w.h = take(&cur, T * BK * c->H);
    w.e = take(&cur, T * BK * c->D);
    w.out_ln = take(&cur, BK * c->D);
    w.out_mean = take(&cur, BK);
    w.out_rstd = take(&cur, BK);
    w.out_norm = take(&cur, BK);
    w.glob_ln = take(&cur, (size_t)B * c->D);
    w.glob_mean = take(&cur, (size_t)B);
    w.glob_rstd = take(&cur, (size_t)B);
    w.sum = take(&cur, BK * c->D);
    w.sum_norm = take(&cur, BK);
    w.tmp = take(&cur, BK * c->D);
    if (bytes)
        *bytes = cur.used;
    return w;
}

static sp_scratch scratch_carve(void *base, const vtr_set_prediction_config *c, int B, int N,
                                size_t *bytes)
{
    region_cursor cur = {base, 0};
    size_t R = (size_t)B * N, BK = (size_t)B * c->K;
    sp_scratch s;
    s.xin = take(&cur, R * c->C);
    s.dxn = take(&cur, R * c->C);
    s.dgq = take(&cur, (size_t)c->D * c->C);
    s.dfo = take(&cur, (size_t)c->D * c->C);
    s.de = take(&cur, BK * c->D);
    s.datt = take(&cur, BK * c->D);
    s.dupd = take(&cur, BK * c->C);
    s.dh1 = take(&cur, BK * c->H);
    s.dh2 = take(&cur, BK * c->H);
    s.dln = take(&cur, BK * c->D);
    s.dattn_n = take(&cur, R * c->K);
    s.dscore = take(&cur, R * c->K);
    s.dq = take(&cur, BK * c->C);
    s.dsum = take(&cur, BK * c->D);
    s.dout_ln = take(&cur, BK * c->D);
    s.dglob_ln = take(&cur, (size_t)B * c->D);
    if (bytes)
        *bytes = cur.used;
    return s;
}

sp_workspace vtr_set_prediction_workspace_of(void *workspace, const vtr_set_prediction_config *c,
                                             int B, int N)
{
    return workspace_carve(workspace, c, B, N, NULL);
}

sp_scratch vtr_set_prediction_scratch_of(void *scratch, const vtr_set_prediction_config *c, int B,
                                         int N)
{
    return scratch_carve(scratch, c, B, N, NULL);
}

size_t vtr_set_prediction_workspace_size(const vtr_set_prediction_config *c, int B, int N)
{
    size_t bytes;
    workspace_carve(NULL, c, B, N, &bytes);
    return bytes;
}

size_t vtr_set_prediction_scratch_size(const vtr_set_prediction_config *c, int B, int N)
{
    size_t bytes;
    scratch_carve(NULL, c, B, N, &bytes);
    return bytes;
}

sp_iteration vtr_set_prediction_iteration_of(const sp_workspace *w,
                                             const vtr_set_prediction_config *c, int B, int N,
                                             int t)
{
    size_t i = (size_t)t - 1, R = (size_t)B * N, BK = (size_t)B * c->K;
    return (sp_iteration){
        .lq = w->lq + i * BK * c->D,
        .q_mean = w->q_mean + i * BK,
        .q_rstd = w->q_rstd + i * BK,
        .q = w->q + i * BK * c->C,
        .attn = w->attn + i * R * c->K,
        .attn_n = w->attn_n + i * R * c->K,
        .total = w->total + i * BK,
        .upd = w->upd + i * BK * c->C,
        .ep = w->ep + i * BK * c->D,
        .lm = w->lm + i * BK * c->D,
        .m_mean = w->m_mean + i * BK,
        .m_rstd = w->m_rstd + i * BK,
        .z = w->z + i * BK * c->H,
        .h = w->h + i * BK * c->H,
        .e = w->e + i * BK * c->D,
    };
}

const float *vtr_set_prediction_slots_at(const void *workspace, const vtr_set_prediction_config *c,
                                         int B, int N, int t)
{
    sp_workspace w = vtr_set_prediction_workspace_of((void *)workspace, c, B, N);
    return vtr_set_prediction_iteration_of(&w, c, B, N, t).e;
}

/* The dropout streams of iteration t (the header). */
static uint64_t update_stream(uint64_t stream, int t)
{
    return stream + 2 * (uint64_t)(t - 1);
}

static uint64_t hidden_stream(uint64_t stream, int t)
{
    return stream + 2 * (uint64_t)(t - 1) + 1;
}

/* ---- Input stage: x = LN_in(real inputs), packed; the folded projections ---- */

// row0 (B+1) written; xn (R,C), mean (R), rstd (R); inp (B,N,C); gq, fo (D,C)
static void input_forward(const sp_workspace *w, const float *inp, const int *lengths,
                          const sp_params *P, const vtr_set_prediction_config *c, int B, int N)
{
    int C = c->C, D = c->D, Dh = c->Dh;
    vtr_set_prediction_row_starts(w->row0, lengths, B);
    int R = w->row0[B];
#pragma omp parallel for schedule(static) if ((long)R * C > PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int n = 0; n < lengths[b]; n++) {
            size_t r = (size_t)w->row0[b] + n;
            vtr_layernorm_row_forward(w->xn + r * C, &w->in_mean[r], &w->in_rstd[r],
                                      inp + ((size_t)b * N + n) * C, P->norm_in_w, P->norm_in_b, C,
                                      VTR_LAYERNORM_EPS);
        }
    // Gq (D,C) = Wqᵀ (D,Dh) Wk (Dh,C) / sqrt(Dh); Fo (D,C) = Wo (D,Dh) Wv (Dh,C)
    vtr_matmul(CblasTrans, CblasNoTrans, D, C, Dh, 1.0f / sqrtf((float)Dh), P->to_q, D, P->to_k,
               C, 0.0f, w->gq, C);
    vtr_matmul(CblasNoTrans, CblasNoTrans, D, C, Dh, 1.0f, P->to_out, Dh, P->to_v, C, 0.0f, w->fo,
               C);
}

// dinp (B,N,C) or NULL += at the real rows; dparams' norm_in, to_q, to_k, to_v, to_out +=
// from dxn (R,C) and dgq, dfo (D,C); xin (R,C) scratch
static void input_backward(float *dinp, const sp_params *G, const sp_scratch *s,
                           const sp_workspace *w, const float *inp, const int *lengths,
                           const sp_params *P, const vtr_set_prediction_config *c, int B, int N)
{
    int C = c->C, D = c->D, Dh = c->Dh, R = w->row0[B];
    float scale = 1.0f / sqrtf((float)Dh);
    // Gq = Wqᵀ Wk / sqrt(Dh): dWq = Wk dGqᵀ / sqrt(Dh) (Dh,D), dWk = Wq dGq / sqrt(Dh) (Dh,C)
    vtr_matmul(CblasNoTrans, CblasTrans, Dh, D, C, scale, P->to_k, C, s->dgq, C, 1.0f, G->to_q, D);
    vtr_matmul(CblasNoTrans, CblasNoTrans, Dh, C, D, scale, P->to_q, D, s->dgq, C, 1.0f, G->to_k,
               C);
    // Fo = Wo Wv: dWo = dFo Wvᵀ (D,Dh), dWv = Woᵀ dFo (Dh,C)
    vtr_matmul(CblasNoTrans, CblasTrans, D, Dh, C, 1.0f, s->dfo, C, P->to_v, C, 1.0f, G->to_out, Dh);
    vtr_matmul(CblasTrans, CblasNoTrans, Dh, C, D, 1.0f, P->to_out, Dh, s->dfo, C, 1.0f, G->to_v,
               C);
    /* LN_in's weight and bias gradients over the packed rows; its input gradient straight
     * into the real rows of dinp */
    for (int b = 0; b < B; b++)
        memcpy(s->xin + (size_t)w->row0[b] * C, inp + (size_t)b * N * C,
               sizeof(float) * (size_t)lengths[b] * C);
    vtr_layernorm_backward(NULL, G->norm_in_w, G->norm_in_b, s->dxn, s->xin, P->norm_in_w,
                           w->in_mean, w->in_rstd, R, C);
    if (!dinp)
        return;
#pragma omp parallel for schedule(static) if ((long)R * C > PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        for (int n = 0; n < lengths[b]; n++) {
            size_t r = (size_t)w->row0[b] + n, i = ((size_t)b * N + n) * C;
            vtr_layernorm_row_backward(dinp + i, s->dxn + r * C, inp + i, P->norm_in_w,
                                       w->in_mean[r], w->in_rstd[r], C);
        }
}

/* ---- Attention of iteration t: A, Â and U = Âᵀ x from qf ---- */

/* Iteration 1 shares one qf (K,C) among the items: qf of item b starts at b * q_step. */
static size_t q_step(const vtr_set_prediction_config *c, int t)
{
    return t == 1 ? 0 : (size_t)c->K * c->C;
}

// it.attn, it.attn_n (R,K), it.total (B,K), it.upd (B*K,C) from it.q and xn (R,C)
static void attention_forward(const sp_iteration *it, const sp_workspace *w, const int *lengths,
                              const vtr_set_prediction_config *c, int B, int t)
{
    int K = c->K, C = c->C, R = w->row0[B];
    // M = x qfᵀ (R,K), held in attn until the softmax
    if (t == 1)
        vtr_matmul(CblasNoTrans, CblasTrans, R, K, C, 1.0f, w->xn, C, it->q, C, 0.0f, it->attn, K);
    else
        for (int b = 0; b < B; b++) {
            size_t r0 = (size_t)w->row0[b];
            vtr_matmul(CblasNoTrans, CblasTrans, lengths[b], K, C, 1.0f, w->xn + r0 * C, C,
                       it->q + b * q_step(c, t), C, 0.0f, it->attn + r0 * K, K);
        }
    vtr_masked_softmax_forward(it->attn, it->attn, NULL, R, K, 1.0f);
    for (int b = 0; b < B; b++) {
        size_t r0 = (size_t)w->row0[b];
        for (int j = 0; j < K; j++)
            vtr_set_attention_normalize(it->attn_n + r0 * K, it->total + (size_t)b * K + j,
                                        it->attn + r0 * K, lengths[b], K, j);
        // U_b (K,C) = Â_bᵀ (K,n_b) x_b (n_b,C)
        vtr_matmul(CblasTrans, CblasNoTrans, K, C, lengths[b], 1.0f, it->attn_n + r0 * K, K,
                   w->xn + r0 * C, C, 0.0f, it->upd + (size_t)b * K * C, C);
    }
}

// from dupd (B*K,C): dq (B*K,C) written (iteration 1: (K,C), summed over the items);
// dxn (R,C) +=; dattn_n, dscore (R,K) scratch
static void attention_backward(const sp_scratch *s, const sp_iteration *it, const sp_workspace *w,
                               const int *lengths, const vtr_set_prediction_config *c, int B, int t)
{
    int K = c->K, C = c->C, R = w->row0[B];
    for (int b = 0; b < B; b++) {
        size_t r0 = (size_t)w->row0[b];
        const float *du = s->dupd + (size_t)b * K * C;
        // dÂ_b (n_b,K) = x_b dU_bᵀ; dx_b += Â_b dU_b
        vtr_matmul(CblasNoTrans, CblasTrans, lengths[b], K, C, 1.0f, w->xn + r0 * C, C, du, C,
                   0.0f, s->dattn_n + r0 * K, K);
        vtr_matmul(CblasNoTrans, CblasNoTrans, lengths[b], C, K, 1.0f, it->attn_n + r0 * K, K, du,
                   C, 1.0f, s->dxn + r0 * C, C);
        // Â = A / total: dÂ -> dA in place
        for (int j = 0; j < K; j++)
            vtr_set_attention_normalize_backward(s->dattn_n + r0 * K, it->attn_n + r0 * K,
                                                 it->total[(size_t)b * K + j], lengths[b], K, j);
    }
    memset(s->dscore, 0, sizeof(float) * (size_t)R * K);
    vtr_masked_softmax_backward(s->dscore, s->dattn_n, it->attn, NULL, R, K, 1.0f);
    // M = x qfᵀ: dqf = dMᵀ x, dx += dM qf
    if (t == 1) {
        vtr_matmul(CblasTrans, CblasNoTrans, K, C, R, 1.0f, s->dscore, K, w->xn, C, 0.0f, s->dq, C);
        vtr_matmul(CblasNoTrans, CblasNoTrans, R, C, K, 1.0f, s->dscore, K, it->q, C, 1.0f, s->dxn,
                   C);
        return;
    }
    for (int b = 0; b < B; b++) {
        size_t r0 = (size_t)w->row0[b], qb = (size_t)b * q_step(c, t);
        vtr_matmul(CblasTrans, CblasNoTrans, K, C, lengths[b], 1.0f, s->dscore + r0 * K, K,
                   w->xn + r0 * C, C, 0.0f, s->dq + qb, C);
        vtr_matmul(CblasNoTrans, CblasNoTrans, lengths[b], C, K, 1.0f, s->dscore + r0 * K, K,
                   it->q + qb, C, 1.0f, s->dxn + r0 * C, C);
    }
}

/* ---- Iteration t of the aggregation block: E_{t-1} -> E', E_t ---- */

// e_prev: E_{t-1} (B*K,D), or at t = 1 the slots (K,D) shared by the items; fills the
// slices of iteration t; tmp (B*K,D) scratch
static void iteration_forward(const sp_iteration *it, const sp_workspace *w, const float *e_prev,
                              const int *lengths, const sp_params *P,
                              const vtr_set_prediction_config *c, int B, int t, float p,
                              uint64_t seed, uint64_t stream, int64_t first)
{
    int K = c->K, C = c->C, D = c->D, H = c->H, BK = B * K;
    int q_rows = t == 1 ? K : BK;
    size_t nd = (size_t)BK * D, nh = (size_t)BK * H;
    // qf = LN_q(E_{t-1}) Gq
    vtr_layernorm_forward(it->lq, it->q_mean, it->q_rstd, e_prev, P->norm_q_w, P->norm_q_b, q_rows,
                          D, VTR_LAYERNORM_EPS);
    vtr_matmul(CblasNoTrans, CblasNoTrans, q_rows, C, D, 1.0f, it->lq, D, w->gq, C, 0.0f, it->q, C);
    attention_forward(it, w, lengths, c, B, t);
    // E' = E_{t-1} + drop(U Foᵀ)
    vtr_matmul(CblasNoTrans, CblasTrans, BK, D, C, 1.0f, it->upd, C, w->fo, C, 0.0f, w->tmp, D);
    if (p > 0.0f)
        vtr_dropout_forward(w->tmp, w->tmp, nd, p, seed, update_stream(stream, t),
                            (uint64_t)first * K * D);
#pragma omp parallel for schedule(static) if (nd > PARALLEL_MIN)
    for (int r = 0; r < BK; r++)
        vtr_set_prediction_residual(it->ep, e_prev, w->tmp, r, K, D, t == 1, 0, D);
    // E_t = E' + drop(GELU(LN_m(E') W1ᵀ + b1)) W2ᵀ + b2
    vtr_layernorm_forward(it->lm, it->m_mean, it->m_rstd, it->ep, P->norm_mlp_w, P->norm_mlp_b, BK,
                          D, VTR_LAYERNORM_EPS);
    vtr_linear_forward(it->z, it->lm, P->mlp0_w, P->mlp0_b, BK, D, H);
    vtr_gelu_forward(it->h, it->z, nh);
    if (p > 0.0f)
        vtr_dropout_forward(it->h, it->h, nh, p, seed, hidden_stream(stream, t),
                            (uint64_t)first * K * H);
    vtr_linear_forward(w->tmp, it->h, P->mlp1_w, P->mlp1_b, BK, H, D);
#pragma omp parallel for schedule(static) if (nd > PARALLEL_MIN)
    for (size_t i = 0; i < nd; i++)
        it->e[i] = it->ep[i] + w->tmp[i];
}

// s->de (B*K,D): dE_t in, dE_{t-1} out; at t = 1 the residual part of dE_0 per item, LN_q's
// part added to dparams' slots (K,D). dk, dv as attention_backward says; dparams +=.
static void iteration_backward(const sp_params *G, const sp_scratch *s, const sp_iteration *it,
                               const sp_workspace *w, const float *e_prev, const int *lengths,
                               const sp_params *P, const vtr_set_prediction_config *c, int B, int t,
                               float p, uint64_t seed, uint64_t stream, int64_t first)
{
    int K = c->K, C = c->C, D = c->D, H = c->H, BK = B * K;
    int q_rows = t == 1 ? K : BK;
    size_t nd = (size_t)BK * D, nh = (size_t)BK * H;
    float beta = t == c->T ? 0.0f : 1.0f; /* the last iteration's backward comes first */
    // the MLP: dh1 = dE_t W2, back through dropout and GELU to dz, then to LN_m's output
    memset(s->dh1, 0, sizeof(float) * nh);
    vtr_linear_backward(s->dh1, G->mlp1_w, G->mlp1_b, s->de, it->h, P->mlp1_w, BK, H, D);
    float *dgelu = s->dh1, *dz = s->dh2;
    if (p > 0.0f) {
        memset(s->dh2, 0, sizeof(float) * nh);
        vtr_dropout_backward(s->dh2, s->dh1, nh, p, seed, hidden_stream(stream, t),
                             (uint64_t)first * K * H);
        dgelu = s->dh2, dz = s->dh1;
    }
    memset(dz, 0, sizeof(float) * nh);
    vtr_gelu_backward(dz, dgelu, it->z, nh);
    memset(s->dln, 0, sizeof(float) * nd);
    vtr_linear_backward(s->dln, G->mlp0_w, G->mlp0_b, dz, it->lm, P->mlp0_w, BK, D, H);
    // dE' = dE_t (the residual) + LN_m's input gradient
    vtr_layernorm_backward(s->de, G->norm_mlp_w, G->norm_mlp_b, s->dln, it->ep, P->norm_mlp_w,
                           it->m_mean, it->m_rstd, BK, D);
    // the attention update U Foᵀ: dU = drop'(dE') Fo, dFo += drop'(dE')ᵀ U
    const float *datt = s->de;
    if (p > 0.0f) {
        memset(s->datt, 0, sizeof(float) * nd);
        vtr_dropout_backward(s->datt, s->de, nd, p, seed, update_stream(stream, t),
                             (uint64_t)first * K * D);
        datt = s->datt;
    }
    vtr_matmul(CblasNoTrans, CblasNoTrans, BK, C, D, 1.0f, datt, D, w->fo, C, 0.0f, s->dupd, C);
    vtr_matmul(CblasTrans, CblasNoTrans, D, C, BK, 1.0f, datt, D, it->upd, C, beta, s->dfo, C);
    attention_backward(s, it, w, lengths, c, B, t);
    // qf = LN_q(E_{t-1}) Gq: dGq += LN_q(E_{t-1})ᵀ dqf; dE_{t-1} = dE' (the residual) + LN_q's
    // input gradient from dqf Gqᵀ
    vtr_matmul(CblasTrans, CblasNoTrans, D, C, q_rows, 1.0f, it->lq, D, s->dq, C, beta, s->dgq, C);
    vtr_matmul(CblasNoTrans, CblasTrans, q_rows, D, C, 1.0f, s->dq, C, w->gq, C, 0.0f, s->dln, D);
    vtr_layernorm_backward(t == 1 ? G->slots : s->de, G->norm_q_w, G->norm_q_b, s->dln, e_prev,
                           P->norm_q_w, it->q_mean, it->q_rstd, q_rows, D);
}

/* ---- Output stage: slots_n = l2norm(LN_out(E_T)), set = l2norm(LN_out(E_T) + LN_g(glob)) ---- */

// set, slots_n (B*K,D); e_last: E_T (B*K,D); glob (B,D)
static void output_forward(float *set, float *slots_n, const sp_workspace *w, const float *e_last,
                           const float *glob, const sp_params *P,
                           const vtr_set_prediction_config *c, int B)
{
    int K = c->K, D = c->D, BK = B * K;
    vtr_layernorm_forward(w->out_ln, w->out_mean, w->out_rstd, e_last, P->norm_out_w, P->norm_out_b,
                          BK, D, VTR_LAYERNORM_EPS);
    vtr_l2norm_forward(slots_n, w->out_norm, w->out_ln, BK, D);
    vtr_layernorm_forward(w->glob_ln, w->glob_mean, w->glob_rstd, glob, P->norm_g_w, P->norm_g_b, B,
                          D, VTR_LAYERNORM_EPS);
#pragma omp parallel for schedule(static) if ((long)BK * D > PARALLEL_MIN)
    for (int r = 0; r < BK; r++)
        vtr_set_prediction_sum(w->sum, w->out_ln, w->glob_ln, r, K, D, 0, D);
    vtr_l2norm_forward(set, w->sum_norm, w->sum, BK, D);
}

// s->de (B*K,D) = dE_T; dglob (B,D) or NULL +=; dparams' norm_out, norm_global +=
static void output_backward(float *dglob, const sp_params *G, const sp_scratch *s,
                            const float *dset, const float *dslots_n, const sp_workspace *w,
                            const float *e_last, const float *glob, const sp_params *P,
                            const vtr_set_prediction_config *c, int B)
{
    int K = c->K, D = c->D, BK = B * K;
    size_t nd = (size_t)BK * D;
    memset(s->dsum, 0, sizeof(float) * nd);
    vtr_l2norm_backward(s->dsum, dset, w->sum, w->sum_norm, BK, D);
    memcpy(s->dout_ln, s->dsum, sizeof(float) * nd);
    if (dslots_n)
        vtr_l2norm_backward(s->dout_ln, dslots_n, w->out_ln, w->out_norm, BK, D);
        // LN_g(glob) enters the K rows of its item: their gradients summed in the order of the
        // slots
#pragma omp parallel for schedule(static) if ((long)BK * D > PARALLEL_MIN)
    for (int b = 0; b < B; b++)
        vtr_set_prediction_dglob(s->dglob_ln, s->dsum, b, K, D, 0, D);
    vtr_layernorm_backward(dglob, G->norm_g_w, G->norm_g_b, s->dglob_ln, glob, P->norm_g_w,
                           w->glob_mean, w->glob_rstd, B, D);
    memset(s->de, 0, sizeof(float) * nd);
    vtr_layernorm_backward(s->de, G->norm_out_w, G->norm_out_b, s->dout_ln, e_last, P->norm_out_w,
                           w->out_mean, w->out_rstd, BK, D);
}

/* ---- The module ---- */

void vtr_set_prediction_forward(float *set, float *slots_n, void *workspace, const float *inp,
                                const int *lengths, const float *glob, const float *params,
                                const vtr_set_prediction_config *c, int B, int N, float p,
                                uint64_t seed, uint64_t stream, int64_t first)
{
    sp_workspace w = vtr_set_prediction_workspace_of(workspace, c, B, N);
    sp_params P = vtr_set_prediction_params_of(params, c);
    input_forward(&w, inp, lengths, &P, c, B, N);
    const float *e_prev = P.slots;
    for (int t = 1; t <= c->T; t++) {
        sp_iteration it = vtr_set_prediction_iteration_of(&w, c, B, N, t);
        iteration_forward(&it, &w, e_prev, lengths, &P, c, B, t, p, seed, stream, first);
        e_prev = it.e;
    }
    output_forward(set, slots_n, &w, e_prev, glob, &P, c, B);
}

void vtr_set_prediction_backward(float *dinp, float *dglob, float *dparams, void *scratch,
                                 const float *dset, const float *dslots_n, const void *workspace,
                                 const float *inp, const int *lengths, const float *glob,
                                 const float *params, const vtr_set_prediction_config *c, int B,
                                 int N, float p, uint64_t seed, uint64_t stream, int64_t first)
{
    sp_workspace w = vtr_set_prediction_workspace_of((void *)workspace, c, B, N);
    sp_scratch s = vtr_set_prediction_scratch_of(scratch, c, B, N);
    sp_params P = vtr_set_prediction_params_of(params, c),
              G = vtr_set_prediction_params_of(dparams, c);
    memset(s.dxn, 0, sizeof(float) * (size_t)w.row0[B] * c->C);
    output_backward(dglob, &G, &s, dset, dslots_n, &w,
                    vtr_set_prediction_iteration_of(&w, c, B, N, c->T).e, glob, &P, c, B);
    for (int t = c->T; t >= 1; t--) {
        sp_iteration it = vtr_set_prediction_iteration_of(&w, c, B, N, t);
        const float *e_prev =
            t == 1 ? P.slots : vtr_set_prediction_iteration_of(&w, c, B, N, t - 1).e;
        iteration_backward(&G, &s, &it, &w, e_prev, lengths, &P, c, B, t, p, seed, stream, first);
    }
    // E_0 is the slots in every item: their residual gradients summed over the items in order
    vtr_bias_backward(G.slots, s.de, B, c->K * c->D);
    input_backward(dinp, &G, &s, &w, inp, lengths, &P, c, B, N);
}

double vtr_set_prediction_flops(const vtr_set_prediction_config *c, int B, long real_inputs)
{
    double R = (double)real_inputs, BK = (double)B * c->K;
    double C = c->C, D = c->D, K = c->K, T = c->T;
    double fold = 2.0 * 2.0 * D * c->Dh * C;       /* Gq and Fo */
    double q = 2.0 * (K + (T - 1.0) * BK) * D * C; /* iteration 1 projects the K slots once */
    double attention = T * 2.0 * 2.0 * R * K * C;  /* M = x qfᵀ and U = Âᵀ x */
    double update = T * 2.0 * BK * C * D;
    double mlp = T * 2.0 * 2.0 * BK * D * c->H;
    return fold + q + attention + update + mlp;
}
