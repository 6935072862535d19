/* The set prediction module of set embeddings (paper 002: Kim, Kim and Kwak, "Improving
 * Cross-Modal Retrieval with Set of Diverse Embeddings", CVPR 2023, section 3.2; REFERENCE.md
 * "Other seeds"). Conventions: lib/nn.h.
 *
 * It turns a padded batch of local features inp (B,N,C) with lengths (B) and one global
 * feature per item glob (B,D) into a set of K unit vectors per item, set (B,K,D):
 *
 *   x      = LN_in(inp)                         (B,N,C)   real rows only
 *   k, v   = x Wkᵀ, x Wvᵀ                        (B,N,Dh)  the same for every iteration
 *   E_0    = slots                               (K,D)     learnable, shared by all items
 *   for t = 1 .. T (one aggregation block, its weights shared by the T iterations):
 *     q    = LN_q(E_{t-1}) Wqᵀ                   (B,K,Dh)
 *     M    = k qᵀ / sqrt(Dh)                     (B,N,K)
 *     A    = softmax of M over the K slots       (B,N,K)   slots compete for each input
 *     Â    = A / (sum over the real inputs n of A[n,k] + 1e-7), per slot k
 *     E'   = E_{t-1} + drop(Âᵀ v Woᵀ)            (B,K,D)   the weighted mean of the values
 *     h    = drop(GELU(LN_m(E') W1ᵀ + b1))       (B,K,H)
 *     E_t  = E' + h W2ᵀ + b2                     (B,K,D)
 *   slots_n = l2norm(LN_out(E_T))                (B,K,D)   (the diversity regulariser's input)
 *   set     = l2norm(LN_out(E_T) + LN_g(glob))   (B,K,D)   paper eq. 5, then unit length
 *
 * Padded inputs (n >= lengths[b]) take no part: their A is 0, they get zero gradient. LN is
 * LayerNorm with eps 1e-5 (lib/norm.h), GELU the erf form, l2norm x / (|x| + 1e-8).
 *
 * Against the paper and the official code (github.com/kdwonn/DivE, agg_block/): single-head
 * attention with the paper's 1/sqrt(Dh) (the code splits Dh into 4 heads of 512); Wo without
 * a bias (the paper's W_o; the code's to_out has one); the pre-norm layout and MLP of the
 * released COCO command (--spm_pre_norm --spm_ff_mult 4 --spm_last_ln --spm_residual_norm,
 * GELU), hidden size H = 4D; padded inputs are left out of the normalisation over inputs
 * (the code's masked softmax over slots gives them 1/K each, so they entered the weighted
 * mean); dropout p (the code's 0.1) on the attention update and the MLP's hidden layer.
 *
 * Parameters, one flat buffer (gradients alike), in this order; vtr_set_prediction_param_name
 * gives each tensor's name, its shape and offset:
 *     slots (K,D)
 *     norm_in.weight (C), norm_in.bias (C)
 *     norm_q.weight (D), norm_q.bias (D)
 *     to_q.weight (Dh,D), to_k.weight (Dh,C), to_v.weight (Dh,C), to_out.weight (D,Dh)
 *     norm_mlp.weight (D), norm_mlp.bias (D)
 *     mlp.0.weight (H,D), mlp.0.bias (H), mlp.1.weight (D,H), mlp.1.bias (D)
 *     norm_out.weight (D), norm_out.bias (D)
 *     norm_global.weight (D), norm_global.bias (D)
 *
 * norm_q.bias's gradient is 0 in exact arithmetic: it moves every query by the same vector,
 * so each input's scores over the slots by the same amount, which the softmax over the slots
 * ignores. It is there, and receives rounding noise, because the reference has it.
 *
 * Dropout (training only, p > 0): site 2(t-1) is the attention update of iteration t, site
 * 2(t-1)+1 its MLP hidden layer; each draws lib/activation.h's dropout from (seed, stream +
 * site), element i of the site's (B,K,D) or (B,K,H) buffer from draw i, or, when the B items
 * are items first .. first+B-1 of a larger batch (a data-parallel rank's share), from the
 * draw of that element in the larger batch's buffer. p = 0 draws nothing.
 *
 * The per-row and per-item math that is not a library op is in the VTR_HD functions below,
 * which the CPU loops (aggregate/set_prediction.c) and the CUDA kernels
 * (aggregate/set_prediction.cu) both call; the CUDA side is declared at the end of this
 * header.
 */
#ifndef VTR_SET_PREDICTION_H
#define VTR_SET_PREDICTION_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/hostdevice.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VTR_SET_PREDICTION_TENSORS 19

typedef struct vtr_set_prediction_config {
    int C;       /* local feature size */
    int D;       /* embedding size (1024) */
    int K;       /* set size (4) */
    int T;       /* iterations of the aggregation block (4) */
    int Dh;      /* attention size (paper: 2048 on region and frame features, 1024 on
                    convolutional feature maps) */
    int H;       /* MLP hidden size (4 D) */
} vtr_set_prediction_config;

/* Tensor i (0 .. VTR_SET_PREDICTION_TENSORS-1) of the parameter buffer: its name (above),
 * its shape (rank 1 or 2: shape[1] = 0 for rank 1) and its offset in floats. */
const char *vtr_set_prediction_param_name(const vtr_set_prediction_config *c, int i,
                                          int shape[2], size_t *offset);

/* Floats in the parameter buffer. */
size_t vtr_set_prediction_param_count(const vtr_set_prediction_config *c);

/* Bytes of the workspace that forward fills and backward reads, for B items of N inputs. */
size_t vtr_set_prediction_workspace_size(const vtr_set_prediction_config *c, int B, int N);

/* Bytes of backward's scratch. */
size_t vtr_set_prediction_scratch_size(const vtr_set_prediction_config *c, int B, int N);

/* ---- The layout of the parameters, workspace and scratch (for the CUDA side and tests) ----
 *
 * The real inputs of all items are packed, item after item, into R = sum of lengths rows:
 * row r0(b) + n is input n of item b, r0(b) = the lengths before b (row0 below). Regions
 * are sized for R = B*N (all lengths N); rows past the real R are not touched. The slot
 * stages work on the B*K rows of (B,K,D) buffers; row b*K + j is slot j of item b. */

/* The parameters' pointers in a flat buffer (values or gradients). */
typedef struct vtr_set_prediction_params {
    float *slots, *norm_in_w, *norm_in_b, *norm_q_w, *norm_q_b, *to_q, *to_k, *to_v, *to_out;
    float *norm_mlp_w, *norm_mlp_b, *mlp0_w, *mlp0_b, *mlp1_w, *mlp1_b;
    float *norm_out_w, *norm_out_b, *norm_g_w, *norm_g_b;
} vtr_set_prediction_params;

/* The workspace, sized for R = B*N real inputs (all lengths N). Regions marked [T] hold one
 * slice per iteration, slice t-1 for iteration t, each of the size given. */
typedef struct vtr_set_prediction_workspace {
    int *row0;        /* (B+1) r0(b), the first packed row of item b; row0[B] = R */
    float *xn;        /* (R,C) LN_in of the packed real inputs */
    float *in_mean;   /* (R) */
    float *in_rstd;   /* (R) */
    float *gq;        /* (D,C) Wqᵀ Wk / sqrt(Dh) */
    float *fo;        /* (D,C) Wo Wv */
    float *lq;        /* [T] (B*K,D) LN_q(E_{t-1}); iteration 1: (K,D) */
    float *q_mean;    /* [T] (B*K); iteration 1: (K) */
    float *q_rstd;    /* [T] (B*K); iteration 1: (K) */
    float *q;         /* [T] (B*K,C) qf = LN_q(E_{t-1}) Gq; iteration 1: (K,C) */
    float *attn;      /* [T] (R,K) A, the softmax over the slots */
    float *attn_n;    /* [T] (R,K) Â */
    float *total;     /* [T] (B,K) sum over the real inputs of A, + 1e-7 */
    float *upd;       /* [T] (B*K,C) U = Âᵀ x */
    float *ep;        /* [T] (B*K,D) E' */
    float *lm;        /* [T] (B*K,D) LN_m(E') */
    float *m_mean;    /* [T] (B*K) */
    float *m_rstd;    /* [T] (B*K) */
    float *z;         /* [T] (B*K,H) LN_m(E') W1ᵀ + b1 */
    float *h;         /* [T] (B*K,H) drop(GELU(z)) */
    float *e;         /* [T] (B*K,D) E_t */
    float *out_ln;    /* (B*K,D) LN_out(E_T) */
    float *out_mean;  /* (B*K) */
    float *out_rstd;  /* (B*K) */
    float *out_norm;  /* (B*K) |LN_out(E_T)| */
    float *glob_ln;   /* (B,D) LN_g(glob) */
    float *glob_mean; /* (B) */
    float *glob_rstd; /* (B) */
    float *sum;       /* (B*K,D) LN_out(E_T) + LN_g(glob) */
    float *sum_norm;  /* (B*K) |sum| */
    float *tmp;       /* (B*K,D) forward only: the attention update, then the MLP's output */
} vtr_set_prediction_workspace;

/* Backward's scratch, sized like the workspace. */
typedef struct vtr_set_prediction_scratch {
    float *xin;       /* (R,C) the packed real inputs, LN_in's input */
    float *dxn;       /* (R,C) gradient of LN_in's output, summed over the iterations */
    float *dgq, *dfo; /* (D,C) summed over the iterations */
    float *de;        /* (B*K,D) dE_t, then dE', then dE_{t-1} */
    float *datt;      /* (B*K,D) gradient of the attention update before dropout (p > 0) */
    float *dupd;      /* (B*K,C) dU */
    float *dh1, *dh2; /* (B*K,H) the MLP's hidden gradients, back through dropout and GELU */
    float *dln;       /* (B*K,D) gradient of LN_m's output, then of LN_q's */
    float *dattn_n;   /* (R,K) dÂ, then dA in place */
    float *dscore;    /* (R,K) dM */
    float *dq;        /* (B*K,C) dqf; iteration 1: (K,C) */
    float *dsum;      /* (B*K,D) gradient of LN_out(E_T) + LN_g(glob) */
    float *dout_ln;   /* (B*K,D) gradient of LN_out(E_T) */
    float *dglob_ln;  /* (B,D) gradient of LN_g(glob) */
} vtr_set_prediction_scratch;

/* The slices of iteration t (1 .. T) of the [T] regions. */
typedef struct vtr_set_prediction_iteration {
    float *lq, *q_mean, *q_rstd, *q, *attn, *attn_n, *total, *upd, *ep, *lm, *m_mean, *m_rstd;
    float *z, *h, *e;
} vtr_set_prediction_iteration;

/* The tensors of a parameter (or gradient) buffer. */
vtr_set_prediction_params vtr_set_prediction_params_of(const float *buf,
                                                       const vtr_set_prediction_config *c);

/* The regions of a workspace (scratch) of vtr_set_prediction_workspace_size
 * (vtr_set_prediction_scratch_size) bytes at workspace (scratch); pointer arithmetic only,
 * so it serves device buffers too. */
vtr_set_prediction_workspace
vtr_set_prediction_workspace_of(void *workspace, const vtr_set_prediction_config *c, int B, int N);
vtr_set_prediction_scratch
vtr_set_prediction_scratch_of(void *scratch, const vtr_set_prediction_config *c, int B, int N);

/* The slices of iteration t (1 .. T) of the workspace's [T] regions. */
vtr_set_prediction_iteration vtr_set_prediction_iteration_of(const vtr_set_prediction_workspace *w,
                                                             const vtr_set_prediction_config *c,
                                                             int B, int N, int t);

/* Added to each slot's total attention before Â = A / total (the top). */
#define VTR_SET_ATTENTION_TOTAL_EPS 1e-7

/* row0 (B+1): row0[b] = the lengths before item b; row0[B] = R. */
static VTR_HD void vtr_set_prediction_row_starts(int *row0, const int *lengths, int B)
{
    row0[0] = 0;
    for (int b = 0; b < B; b++)
        row0[b + 1] = row0[b] + lengths[b];
}

/* Slot j of one item of len real inputs: *total = sum over the inputs of A[n,j] (in double,
 * in order) + 1e-7, attn_n[n,j] = A[n,j] / *total; attn and attn_n (len,K) the item's rows. */
static VTR_HD void vtr_set_attention_normalize(float *attn_n, float *total, const float *attn,
                                               int len, int K, int j)
{
    double sum = 0.0;
    for (int n = 0; n < len; n++)
        sum += attn[(size_t)n * K + j];
    float t = (float)(sum + VTR_SET_ATTENTION_TOTAL_EPS);
    *total = t;
    for (int n = 0; n < len; n++)
        attn_n[(size_t)n * K + j] = attn[(size_t)n * K + j] / t;
}

/* Its backward, in place: dA[n,j] = (dÂ[n,j] - sum_m dÂ[m,j] Â[m,j]) / total, the item's
 * rows dattn_n (dÂ in, dA out) and attn_n (len,K). */
static VTR_HD void vtr_set_attention_normalize_backward(float *dattn_n, const float *attn_n,
                                                        float total, int len, int K, int j)
{
    double dot = 0.0;
    for (int n = 0; n < len; n++)
        dot += (double)dattn_n[(size_t)n * K + j] * attn_n[(size_t)n * K + j];
    for (int n = 0; n < len; n++) {
        float *g = &dattn_n[(size_t)n * K + j];
        *g = (float)((*g - dot) / total);
    }
}

/* Row r of E' = E_{t-1} + the update, columns d0 .. d1-1: ep, upd (B*K,D); e_prev (B*K,D),
 * or with `shared` (iteration 1) the slots (K,D) that every item starts from. */
static VTR_HD void vtr_set_prediction_residual(float *ep, const float *e_prev, const float *upd,
                                               int r, int K, int D, int shared, int d0, int d1)
{
    const float *prev = e_prev + (size_t)(shared ? r % K : r) * D;
    for (int d = d0; d < d1; d++)
        ep[(size_t)r * D + d] = prev[d] + upd[(size_t)r * D + d];
}

/* Row r of LN_out(E_T) + LN_g(glob), columns d0 .. d1-1: sum, out_ln (B*K,D), glob_ln
 * (B,D). */
static VTR_HD void vtr_set_prediction_sum(float *sum, const float *out_ln, const float *glob_ln,
                                          int r, int K, int D, int d0, int d1)
{
    for (int d = d0; d < d1; d++)
        sum[(size_t)r * D + d] = out_ln[(size_t)r * D + d] + glob_ln[(size_t)(r / K) * D + d];
}

/* Item b's gradient of LN_g(glob), columns d0 .. d1-1: dglob_ln (B,D) = dsum (B*K,D) summed
 * over the item's K rows in the order of the slots. */
static VTR_HD void vtr_set_prediction_dglob(float *dglob_ln, const float *dsum, int b, int K, int D,
                                            int d0, int d1)
{
    for (int d = d0; d < d1; d++) {
        float g = 0.0f;
        for (int j = 0; j < K; j++)
            g += dsum[((size_t)b * K + j) * D + d];
        dglob_ln[(size_t)b * D + d] = g;
    }
}

/* set (B,K,D), slots_n (B,K,D); workspace; inp (B,N,C) padded, lengths (B) in 1 .. N,
 * glob (B,D); params; dropout p in [0, 1) from (seed, stream) at item first (see the top;
 * 0 for a whole batch). */
void vtr_set_prediction_forward(float *set, float *slots_n, void *workspace, const float *inp,
                                const int *lengths, const float *glob, const float *params,
                                const vtr_set_prediction_config *c, int B, int N, float p,
                                uint64_t seed, uint64_t stream, int64_t first);

/* dinp (B,N,C) or NULL, dglob (B,D) or NULL, dparams (the parameter count), accumulated;
 * scratch; dset (B,K,D), dslots_n (B,K,D) or NULL (no diversity term); the forward's
 * workspace, inputs and options. */
void vtr_set_prediction_backward(float *dinp, float *dglob, float *dparams, void *scratch,
                                 const float *dset, const float *dslots_n, const void *workspace,
                                 const float *inp, const int *lengths, const float *glob,
                                 const float *params, const vtr_set_prediction_config *c, int B,
                                 int N, float p, uint64_t seed, uint64_t stream, int64_t first);

/* E_t (B,K,D), the slots after iteration t (1 .. T) of the forward that filled workspace
 * (for tests and inspection: the layout of the workspace is the .c file's). */
const float *vtr_set_prediction_slots_at(const void *workspace, const vtr_set_prediction_config *c,
                                         int B, int N, int t);

/* The matrix-product FLOPs (2 per multiply-add) of one forward (backward: twice that). */
double vtr_set_prediction_flops(const vtr_set_prediction_config *c, int B, long real_inputs);

/* The CUDA side (aggregate/set_prediction.cu, through aggregate/cuda_entries.c): the CPU
 * functions' arguments as device buffers, lengths included (the workspace and scratch of
 * the CPU's sizes and layouts), with lib/nn_cuda.h's conventions; nothing is read back to
 * the host. The dropout masks are the CPU's; the rest agrees to float rounding (the
 * products through cuBLAS, the attention's small per-item products one row or element per
 * thread, sums in a fixed order). */
vtr_status vtr_cuda_set_prediction_forward(float *set, float *slots_n, void *workspace,
                                           const float *inp, const int *lengths, const float *glob,
                                           const float *params, const vtr_set_prediction_config *c,
                                           int B, int N, float p, uint64_t seed, uint64_t stream,
                                           int64_t first, vtr_error *err);
vtr_status vtr_cuda_set_prediction_backward(float *dinp, float *dglob, float *dparams,
                                            void *scratch, const float *dset, const float *dslots_n,
                                            const void *workspace, const float *inp,
                                            const int *lengths, const float *glob,
                                            const float *params, const vtr_set_prediction_config *c,
                                            int B, int N, float p, uint64_t seed, uint64_t stream,
                                            int64_t first, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
