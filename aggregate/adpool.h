/* ADPOOL, the adaptive pooling of "VSE+2AD" (paper 003, section 3.2; REFERENCE.md "Other
 * seeds"), as the paper's equations 3-5 define it. Conventions: lib/nn.h.
 *
 * For each item b of a padded batch of sets inp (B,T,D) with lengths (B), over its n =
 * lengths[b] real elements x_1 .. x_n (rows of D):
 *   token level (eq. 3): every dimension is sorted independently along the set axis,
 *     descending, giving the rows u_1 .. u_n (u_k holds the k-th largest value of each
 *     dimension); theta = softmax over k of u_k · w_tok; tok = sum_k theta_k u_k.
 *     This is attention pooling (aggregate/set_pooling.h, a bias-free scorer) over the sorted
 *     rows: a learned weight per rank, so mean pooling, max pooling and K-max pooling
 *     are particular weightings.
 *   embedding level (eq. 4): per dimension d, delta_id = softmax over i of x_id;
 *     emb_d = sum_i delta_id x_id (a "soft" max pooling; no parameters, temperature 1).
 *   balance (eq. 5): (omega_1, omega_2) = softmax(tok · w_bal, emb · w_bal);
 *     out = omega_1 tok + omega_2 emb.
 * Padded elements take no part (the softmaxes run over the n real elements only).
 *
 * Choices where the paper and its released code differ (the paper is followed; the code
 * is github.com/96-Zachary/vse_2ad, modules/adcap.py): the code scores the sorted rows
 * with a Linear(D, D) and a ReLU, i.e. a softmax per rank AND per dimension, where
 * equation 3 scores each rank with one weight vector (W_tok in R^{d x 1}, one theta_m
 * per sorted row, figure 3's [0.1, 0.6, 0.3, 0.0]); and the code's Linear layers carry
 * biases, which cancel in these softmaxes anyway (a softmax is shift-invariant), so
 * there are none here.
 *
 * Parameters, one flat buffer (gradients alike): w_tok (D) then w_bal (D), each a
 * bias-free Linear(D -> 1) weight of shape (1, D) (names <side>.adpool.token.weight and
 * <side>.adpool.balance.weight in match/vse_model.h).
 *
 * The per-column and per-item math is in the VTR_HD functions below, which the CPU loops
 * (aggregate/adpool.c) and the CUDA kernels (aggregate/adpool.cu) both call; the CUDA side
 * is declared at the end of this header.
 */
#ifndef VTR_ADPOOL_H
#define VTR_ADPOOL_H

#include <math.h>
#include <stddef.h>

#include "aggregate/set_pooling.h"
#include "lib/hostdevice.h"
#include "lib/nn.h"
#include "lib/softmax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Floats in ADPOOL's parameter buffer: 2 D. */
size_t vtr_adpool_param_count(int D);

/* Offset (floats) of w_bal in it; w_tok starts at 0. */
size_t vtr_adpool_balance_offset(int D);

/* Bytes of the workspace that forward fills and backward reads. */
size_t vtr_adpool_workspace_size(int B, int T, int D);

/* Bytes of backward's scratch. */
size_t vtr_adpool_scratch_size(int B, int T, int D);

/* Byte offsets of the workspace's regions (vtr_adpool_workspace_size is total). */
typedef struct vtr_adpool_workspace_layout {
    size_t sort_index; /* int (B,T,D): element at rank k of each dimension, 0 past len */
    size_t sorted;     /* float (B,T,D): u, the sorted rows; zero past len */
    size_t delta;      /* float (B,T,D): embedding-level weights; zero past len */
    size_t tok;        /* float (B,D) */
    size_t emb;        /* float (B,D) */
    size_t total;
} vtr_adpool_workspace_layout;

static inline vtr_adpool_workspace_layout vtr_adpool_workspace_layout_of(int B, int T, int D)
{
    size_t btd = (size_t)B * T * D, bd = (size_t)B * D;
    vtr_adpool_workspace_layout l;
    l.sort_index = 0;
    l.sorted = vtr_workspace_align(sizeof(int) * btd);
    l.delta = l.sorted + vtr_workspace_align(sizeof(float) * btd);
    l.tok = l.delta + vtr_workspace_align(sizeof(float) * btd);
    l.emb = l.tok + vtr_workspace_align(sizeof(float) * bd);
    l.total = l.emb + vtr_workspace_align(sizeof(float) * bd);
    return l;
}

/* Byte offsets of the scratch's regions (vtr_adpool_scratch_size is total). */
typedef struct vtr_adpool_scratch_layout {
    size_t dsorted; /* float (B,T,D) */
    size_t dtok;    /* float (B,D) */
    size_t demb;    /* float (B,D) */
    size_t dlogit;  /* float (B,2): gradients of tok · w_bal and emb · w_bal */
    size_t total;
} vtr_adpool_scratch_layout;

static inline vtr_adpool_scratch_layout vtr_adpool_scratch_layout_of(int B, int T, int D)
{
    size_t btd = (size_t)B * T * D, bd = (size_t)B * D;
    vtr_adpool_scratch_layout l;
    l.dsorted = 0;
    l.dtok = vtr_workspace_align(sizeof(float) * btd);
    l.demb = l.dtok + vtr_workspace_align(sizeof(float) * bd);
    l.dlogit = l.demb + vtr_workspace_align(sizeof(float) * bd);
    l.total = l.dlogit + vtr_workspace_align(sizeof(float) * 2 * (size_t)B);
    return l;
}

/* Columns d0 .. d1-1 of one item's sort and embedding level, x (len, D) its real elements
 * and idx (T,D) holding in ranks 0 .. len-1 the order of vtr_set_sort_desc (the CPU sorts
 * the whole item, the CUDA backend each column): u (T,D) = the sorted rows; idx, u and
 * delta (T,D) zero past len; delta = the per-dimension softmax over the set, emb (D) =
 * sum_i delta_i x_i, summed in float in the order of i. */
static VTR_HD void vtr_adpool_columns_forward(float *emb, float *delta, float *u, int *idx,
                                              const float *x, int len, int T, int D, int d0, int d1)
{
    for (int k = 0; k < len; k++)
        for (int d = d0; d < d1; d++)
            u[(size_t)k * D + d] = x[(size_t)idx[(size_t)k * D + d] * D + d];
    for (int k = len; k < T; k++)
        for (int d = d0; d < d1; d++) {
            idx[(size_t)k * D + d] = 0;
            u[(size_t)k * D + d] = 0.0f;
            delta[(size_t)k * D + d] = 0.0f;
        }
    for (int d = d0; d < d1; d++) {
        float mx = -INFINITY, sum = 0.0f, y = 0.0f;
        for (int i = 0; i < len; i++)
            mx = x[(size_t)i * D + d] > mx ? x[(size_t)i * D + d] : mx;
        for (int i = 0; i < len; i++) {
            float e = expf(x[(size_t)i * D + d] - mx);
            delta[(size_t)i * D + d] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
        for (int i = 0; i < len; i++) {
            float w = delta[(size_t)i * D + d] * inv;
            delta[(size_t)i * D + d] = w;
            y += w * x[(size_t)i * D + d];
        }
        emb[d] = y;
    }
}

/* The balance weights of one item: omega (2) = softmax(tok · w_bal, emb · w_bal); tok, emb,
 * w_bal (D). */
static VTR_HD void vtr_adpool_balance_forward(float *omega, const float *tok, const float *emb,
                                              const float *w_bal, int D)
{
    float logit[2] = {vtr_dot(tok, w_bal, D), vtr_dot(emb, w_bal, D)};
    vtr_masked_softmax_row_forward(omega, logit, 2, 2, 1.0f);
}

/* y[d] = p a[d] + q b[d] for d0 <= d < d1: forward the balance's mix of tok and emb (p, q
 * = omega), backward the pooled vectors' gradients from dout and w_bal. */
static VTR_HD void vtr_adpool_mix_columns(float *y, float p, const float *a, float q,
                                          const float *b, int d0, int d1)
{
    for (int d = d0; d < d1; d++)
        y[d] = p * a[d] + q * b[d];
}

/* Backward of vtr_adpool_balance_forward for one item: d omega_j = dout · pooled_j, then
 * dlogit (2) = the logits' gradients (overwritten); dout, tok, emb (D), omega (2). */
static VTR_HD void vtr_adpool_balance_backward(float *dlogit, const float *dout, const float *tok,
                                               const float *emb, const float *omega, int D)
{
    float domega[2] = {vtr_dot(dout, tok, D), vtr_dot(dout, emb, D)};
    dlogit[0] = dlogit[1] = 0.0f;
    vtr_masked_softmax_row_backward(dlogit, domega, omega, 2, 1.0f);
}

/* dw_bal[d] += dlogit[b,0] tok[b,d] + dlogit[b,1] emb[b,d] for d0 <= d < d1, summed in item
 * order; dlogit (B,2), tok and emb (B,D). */
static VTR_HD void vtr_adpool_balance_dweight_columns(float *dw_bal, const float *dlogit,
                                                      const float *tok, const float *emb, int B,
                                                      int D, int d0, int d1)
{
    for (int b = 0; b < B; b++) {
        const float *t = tok + (size_t)b * D, *e = emb + (size_t)b * D;
        const float *dl = dlogit + 2 * (size_t)b;
        for (int d = d0; d < d1; d++)
            dw_bal[d] += dl[0] * t[d] + dl[1] * e[d];
    }
}

/* Columns d0 .. d1-1 of one item's input gradient dx (len, D) +=: first the sorted rows'
 * gradients du (len, D) back through the sort idx (len, D), then the embedding level,
 * d emb_d / d x_id = delta_id (1 + x_id - emb_d); x, delta (len, D), emb, demb (D). */
static VTR_HD void vtr_adpool_dinp_columns(float *dx, const float *du, const int *idx,
                                           const float *x, const float *delta, const float *emb,
                                           const float *demb, int len, int D, int d0, int d1)
{
    for (int k = 0; k < len; k++)
        for (int d = d0; d < d1; d++)
            dx[(size_t)idx[(size_t)k * D + d] * D + d] += du[(size_t)k * D + d];
    for (int i = 0; i < len; i++)
        for (int d = d0; d < d1; d++) {
            size_t j = (size_t)i * D + d;
            dx[j] += demb[d] * delta[j] * (1.0f + x[j] - emb[d]);
        }
}

// inp (B,T,D), lengths (B), params (vtr_adpool_param_count), out (B,D); saves theta (B,T),
// the token-level weights of the ranks (zero past len), omega (B,2), the balance weights
// (token level, embedding level), and the workspace (vtr_adpool_workspace_size)
void vtr_adpool_forward(float *out, float *theta, float *omega, void *workspace, const float *inp,
                        const int *lengths, const float *params, int B, int T, int D);

// dinp (B,T,D) or NULL, dparams (vtr_adpool_param_count), scratch (vtr_adpool_scratch_size),
// dout (B,D); the rest as given to and left by vtr_adpool_forward
void vtr_adpool_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                         const float *inp, const float *theta, const float *omega,
                         const int *lengths, const float *params, const void *workspace, int B,
                         int T, int D);

/* The CUDA side (aggregate/adpool.cu, through aggregate/cuda_entries.c): the CPU functions'
 * arguments as device buffers (the workspace and scratch of the CPU's sizes and layouts),
 * with lib/nn_cuda.h's conventions. The sort orders are the CPU's; the rest agrees to float
 * rounding (the same sums in the same order, with the device's expf and fused
 * multiply-adds). */
vtr_status vtr_cuda_adpool_forward(float *out, float *theta, float *omega, void *workspace,
                                   const float *inp, const int *lengths, const float *params, int B,
                                   int T, int D, vtr_error *err);
vtr_status vtr_cuda_adpool_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                                    const float *inp, const float *theta, const float *omega,
                                    const int *lengths, const float *params, const void *workspace,
                                    int B, int T, int D, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
