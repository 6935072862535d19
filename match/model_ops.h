/* The ops of the matching models on the model's device: each function runs the CPU op
 * (lib/nn.h and the op's header) when dev is VTR_DEVICE_CPU and its CUDA twin
 * (lib/nn_cuda.h, aggregate/gpo.h, ...) when dev is VTR_DEVICE_CUDA, with the same
 * arguments, so that a model's forward and backward are written once for both devices
 * and the CPU tests run the very sequence of calls the GPU runs.
 *
 * Buffers are the device's memory (host memory for the CPU), ids and lengths included;
 * scalars are host values. The CPU ops cannot fail and return VTR_OK; the CUDA ones queue
 * their work on the default stream and fail with VTR_ERR_DEVICE (CUDA's message) when a
 * launch fails; an error during execution surfaces at the next download. In a build
 * without CUDA every call on VTR_DEVICE_CUDA fails with VTR_WITHOUT_CUDA's VTR_ERR_DEVICE.
 * Gradients accumulate (+=), as in lib/nn.h.
 */
#ifndef VTR_MODEL_OPS_H
#define VTR_MODEL_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregate/set_prediction.h"
#include "lib/device.h"
#include "lib/error.h"
#include "lib/gru.h"
#include "lib/nn.h"
#include "lib/optim.h"
#include "lib/params.h"
#include "match/caption_bigru.h"
#include "match/hinge_loss.h"

#ifdef __cplusplus
extern "C" {
#endif

/* memory: *p = bytes of zeroed device memory, 64-aligned (CPU: vtr_arena_alloc's); VTR_ERR_NOMEM
 * on the CPU, VTR_ERR_DEVICE on the GPU, each naming who and the size, and on the GPU what to
 * do: a smaller batch when per_batch (bytes grow with the batch), else VTR_CUDA_MEMORY_REMEDY */
vtr_status vtr_dev_alloc(vtr_device dev, void **p, size_t bytes, const char *who, bool per_batch,
                         vtr_error *err);
void vtr_dev_free(vtr_device dev, void *p);
vtr_status vtr_dev_zero(vtr_device dev, void *p, size_t bytes, vtr_error *err);
/* dst and src on dev, not overlapping */
vtr_status vtr_dev_copy(vtr_device dev, void *dst, const void *src, size_t bytes, vtr_error *err);
/* host src -> dst on dev; src on dev -> host dst (waits for the queued work) */
vtr_status vtr_dev_upload(vtr_device dev, void *dst, const void *src, size_t bytes, vtr_error *err);
vtr_status vtr_dev_download(vtr_device dev, void *dst, const void *src, size_t bytes,
                            vtr_error *err);
/* height rows of width bytes on dev, row r from src + r src_pitch to dst + r dst_pitch */
vtr_status vtr_dev_copy_2d(vtr_device dev, void *dst, size_t dst_pitch, const void *src,
                           size_t src_pitch, size_t width, size_t height, vtr_error *err);
/* A model's parameter set ps on dev. On the GPU a copy of its values (n_data floats) and
 * gradients (n_trainable), one allocation at *data (the gradients at *grad), zeroed; the
 * CPU has none (*data and *grad NULL: the ops read ps itself). */
vtr_status vtr_dev_params_alloc(vtr_device dev, const vtr_param_set *ps, float **data, float **grad,
                                const char *who, vtr_error *err);
/* ps's values -> data (nothing to do when data is NULL); data -> ps's values and, with grad
 * not NULL, grad -> ps's gradients; the gradients zeroed (grad, else ps's own) */
vtr_status vtr_dev_params_upload(vtr_device dev, const vtr_param_set *ps, float *data,
                                 vtr_error *err);
vtr_status vtr_dev_params_download(vtr_device dev, vtr_param_set *ps, const float *data,
                                   const float *grad, vtr_error *err);
vtr_status vtr_dev_params_zero_grad(vtr_device dev, vtr_param_set *ps, float *grad, vtr_error *err);
/* y (n) += x (n) */
vtr_status vtr_dev_add(vtr_device dev, float *y, const float *x, size_t n, vtr_error *err);

vtr_status vtr_dev_linear_forward(vtr_device dev, float *out, const float *inp, const float *weight,
                                  const float *bias, int N, int C, int OC, vtr_error *err);
vtr_status vtr_dev_linear_backward(vtr_device dev, float *dinp, float *dweight, float *dbias,
                                   const float *dout, const float *inp, const float *weight, int N,
                                   int C, int OC, vtr_error *err);
vtr_status vtr_dev_relu_forward(vtr_device dev, float *out, const float *inp, size_t n,
                                vtr_error *err);
vtr_status vtr_dev_relu_backward(vtr_device dev, float *dinp, const float *dout, const float *inp,
                                 size_t n, vtr_error *err);
/* lib/activation.h's dropout: the same mask on both devices */
vtr_status vtr_dev_dropout_forward(vtr_device dev, float *out, const float *inp, size_t n, float p,
                                   uint64_t seed, uint64_t stream, uint64_t first, vtr_error *err);
vtr_status vtr_dev_dropout_backward(vtr_device dev, float *dinp, const float *dout, size_t n,
                                    float p, uint64_t seed, uint64_t stream, uint64_t first,
                                    vtr_error *err);
/* lib/pack.h: packed (N,D) <-> padded (B,T,D) (lengths on dev) */
vtr_status vtr_dev_pack_rows(vtr_device dev, float *packed, const float *padded, const int *lengths,
                             int B, int T, int D, vtr_error *err);
vtr_status vtr_dev_unpack_rows(vtr_device dev, float *padded, const float *packed,
                               const int *lengths, int B, int T, int D, vtr_error *err);
/* a batch of padded captions: lib/embedding.h's vtr_embedding_forward_padded and _backward_padded
 * (ids and lengths on dev) */
vtr_status vtr_dev_embedding_forward(vtr_device dev, float *out, const int *ids, const float *table,
                                     const int *lengths, int B, int L, int D, vtr_error *err);
vtr_status vtr_dev_embedding_backward(vtr_device dev, float *dtable, const float *dout,
                                      const int *ids, const int *lengths, int B, int L, int D,
                                      vtr_error *err);
vtr_status vtr_dev_batchnorm_forward(vtr_device dev, float *out, float *mean, float *rstd,
                                     float *running_mean, float *running_var, const float *inp,
                                     const float *weight, const float *bias, int N, int C,
                                     float momentum, float eps, vtr_error *err);
vtr_status vtr_dev_batchnorm_backward(vtr_device dev, float *dinp, float *dweight, float *dbias,
                                      const float *dout, const float *inp, const float *weight,
                                      const float *mean, const float *rstd, int N, int C,
                                      vtr_error *err);
vtr_status vtr_dev_batchnorm_forward_eval(vtr_device dev, float *out, const float *inp,
                                          const float *weight, const float *bias,
                                          const float *running_mean, const float *running_var,
                                          int N, int C, float eps, vtr_error *err);
vtr_status vtr_dev_l2norm_forward(vtr_device dev, float *out, float *norm, const float *inp, int N,
                                  int D, vtr_error *err);
vtr_status vtr_dev_l2norm_backward(vtr_device dev, float *dinp, const float *dout, const float *inp,
                                   const float *norm, int N, int D, vtr_error *err);
vtr_status vtr_dev_cosine_similarity_forward(vtr_device dev, float *S, const float *a,
                                             const float *b, int NA, int NB, int D, vtr_error *err);
vtr_status vtr_dev_cosine_similarity_backward(vtr_device dev, float *da, float *db, const float *dS,
                                              const float *a, const float *b, int NA, int NB, int D,
                                              vtr_error *err);
vtr_status vtr_dev_mean_pool_forward(vtr_device dev, float *out, const float *inp,
                                     const int *lengths, int B, int T, int D, vtr_error *err);
vtr_status vtr_dev_mean_pool_backward(vtr_device dev, float *dinp, const float *dout,
                                      const int *lengths, int B, int T, int D, vtr_error *err);
/* aggregate/set_pooling.h's attention pooling (HGR's global branch) */
vtr_status vtr_dev_attention_pool_forward(vtr_device dev, float *out, float *weights,
                                          const float *inp, const float *score_weight,
                                          const float *score_bias, const int *lengths, int B, int T,
                                          int D, vtr_error *err);
vtr_status vtr_dev_attention_pool_backward(vtr_device dev, float *dinp, float *dscore_weight,
                                           float *dscore_bias, const float *dout, const float *inp,
                                           const float *weights, const float *score_weight,
                                           const int *lengths, int B, int T, int D, vtr_error *err);
vtr_status vtr_dev_gpo_forward(vtr_device dev, float *out, float *weights, void *workspace,
                               const float *inp, const int *lengths, const float *params, int B,
                               int T, int D, int d_pe, int hidden, vtr_error *err);
vtr_status vtr_dev_gpo_backward(vtr_device dev, float *dinp, float *dparams, void *scratch,
                                const float *dout, const float *inp, const float *weights,
                                const int *lengths, const float *params, const void *workspace,
                                int B, int T, int D, int d_pe, int hidden, vtr_error *err);
vtr_status vtr_dev_adpool_forward(vtr_device dev, float *out, float *theta, float *omega,
                                  void *workspace, const float *inp, const int *lengths,
                                  const float *params, int B, int T, int D, vtr_error *err);
vtr_status vtr_dev_adpool_backward(vtr_device dev, float *dinp, float *dparams, void *scratch,
                                   const float *dout, const float *inp, const float *theta,
                                   const float *omega, const int *lengths, const float *params,
                                   const void *workspace, int B, int T, int D, vtr_error *err);
/* the hinge loss (match/hinge_loss.h) into *loss, one float on dev */
vtr_status vtr_dev_hinge_loss_forward(vtr_device dev, float *loss, const float *S, int B,
                                      float margin, vtr_hinge_negatives negatives,
                                      vtr_reduction reduction, vtr_error *err);
vtr_status vtr_dev_hinge_loss_backward(vtr_device dev, float *dS, float dloss, const float *S,
                                       int B, float margin, vtr_hinge_negatives negatives,
                                       vtr_reduction reduction, vtr_error *err);
/* ADOPT (match/adopt_loss.h), with K one int on dev: *K = fixed_K when fixed_K > 0, else
 * equation 6 over S; the loss into *loss, one float on dev */
vtr_status vtr_dev_adopt_negatives(vtr_device dev, int *K, const float *S, int B, int fixed_K,
                                   vtr_error *err);
vtr_status vtr_dev_adopt_loss_forward(vtr_device dev, float *loss, const float *S, int B,
                                      const int *K, float tau, bool positive_in_denominator,
                                      vtr_reduction reduction, vtr_error *err);
vtr_status vtr_dev_adopt_loss_backward(vtr_device dev, float *dS, float dloss, const float *S,
                                       int B, const int *K, float tau, bool positive_in_denominator,
                                       vtr_reduction reduction, vtr_error *err);

/* Set embeddings (aggregate/set_prediction.h, match/set_similarity.h): every array on dev,
 * lengths included; the config and the scalars on the host. A loss that the CPU function
 * returns goes to *loss, one float on dev. */
vtr_status vtr_dev_set_prediction_forward(vtr_device dev, float *set, float *slots_n,
                                          void *workspace, const float *inp, const int *lengths,
                                          const float *glob, const float *params,
                                          const vtr_set_prediction_config *c, int B, int N, float p,
                                          uint64_t seed, uint64_t stream, int64_t first,
                                          vtr_error *err);
vtr_status vtr_dev_set_prediction_backward(vtr_device dev, float *dinp, float *dglob,
                                           float *dparams, void *scratch, const float *dset,
                                           const float *dslots_n, const void *workspace,
                                           const float *inp, const int *lengths, const float *glob,
                                           const float *params, const vtr_set_prediction_config *c,
                                           int B, int N, float p, uint64_t seed, uint64_t stream,
                                           int64_t first, vtr_error *err);
vtr_status vtr_dev_smooth_chamfer_forward(vtr_device dev, float *S, long ldS, void *scratch,
                                          const float *a, const float *b, int Na, int Nb, int Ka,
                                          int Kb, int D, float alpha, vtr_error *err);
vtr_status vtr_dev_smooth_chamfer_backward(vtr_device dev, float *da, float *db, void *scratch,
                                           const float *dS, long ldS, const float *a,
                                           const float *b, int Na, int Nb, int Ka, int Kb, int D,
                                           float alpha, vtr_error *err);
vtr_status vtr_dev_set_diversity_forward(vtr_device dev, float *loss, const float *r, int N, int K,
                                         int D, vtr_error *err);
vtr_status vtr_dev_set_diversity_backward(vtr_device dev, float *dr, float dloss, const float *r,
                                          int N, int K, int D, vtr_error *err);
vtr_status vtr_dev_set_mmd_forward(vtr_device dev, float *loss, void *scratch, const float *X,
                                   const float *Y, long nx, long ny, int D, float gamma,
                                   vtr_error *err);
vtr_status vtr_dev_set_mmd_backward(vtr_device dev, float *dx, float *dy, float dloss,
                                    void *scratch, const float *X, const float *Y, long nx, long ny,
                                    int D, float gamma, vtr_error *err);

/* The caption BiGRU (match/caption_bigru.h's contract: (B,L,W) -> (B,L,E), the directions
 * averaged). On the CPU it is vtr_caption_bigru_* with g's buffers; on the GPU lib/gru.h's
 * two-direction op, which needs only g->workspace[0] (vtr_gru_workspace_size(B, L, W, E, 2)
 * bytes) and g->scratch[0] (vtr_gru_scratch_size(..., 2)). dout is scaled in place on the
 * CPU; its contents are not kept either way. lengths are on dev, host_lengths the same
 * values on the host (the CPU's loops read those). */
vtr_status vtr_dev_caption_bigru_forward(vtr_device dev, float *out, vtr_caption_bigru *g,
                                         const float *inp, const int *lengths,
                                         const int *host_lengths, const float *params, int B, int L,
                                         int W, int E, vtr_error *err);
vtr_status vtr_dev_caption_bigru_backward(vtr_device dev, float *dinp, float *dparams,
                                          vtr_caption_bigru *g, float *dout, const float *inp,
                                          const int *lengths, const int *host_lengths,
                                          const float *params, int B, int L, int W, int E,
                                          vtr_error *err);

/* HGR's ops. aggregate/span_pool.h's role span pooling: masks (B,N,L) and roles (B,N) on dev. */
vtr_status vtr_dev_role_span_pool_forward(vtr_device dev, float *out, int *argmax, const float *inp,
                                          const uint8_t *masks, const int *roles,
                                          const float *role_table, int B, int N, int L, int D,
                                          vtr_error *err);
vtr_status vtr_dev_role_span_pool_backward(vtr_device dev, float *dinp, float *drole_table,
                                           void *scratch, const float *dout, const float *inp,
                                           const int *argmax, const int *roles,
                                           const float *role_table, int B, int N, int L, int D,
                                           vtr_error *err);
/* lib/graph_attention.h's attention GCN layer: rel_edges (B,N,N) on dev. A workspace filled by
 * one device's forward is for that device's backward only. */
vtr_status vtr_dev_attn_gcn_forward(vtr_device dev, float *out, void *workspace, const float *x,
                                    const float *rel_edges, const float *params, int B, int N,
                                    int D, int F, float p, uint64_t seed, uint64_t stream,
                                    int64_t first, vtr_error *err);
vtr_status vtr_dev_attn_gcn_backward(vtr_device dev, float *dx, float *dparams, void *scratch,
                                     const float *dout, const float *x, const float *params,
                                     const void *workspace, int B, int N, int D, int F, float p,
                                     uint64_t seed, uint64_t stream, int64_t first, vtr_error *err);
/* match/phrase_attention.h's verb- and noun-level score: vid_lengths (Bv) and n_phrases (Bc) on
 * dev, host_vid_lengths and host_n_phrases the same values on the host (the CPU's loops read
 * those; the GPU reads the device copies). A workspace filled by one device's forward is for
 * that device's backward only. */
vtr_status vtr_dev_phrase_attention_score_forward(vtr_device dev, float *scores, void *workspace,
                                                  const float *vid, const int *vid_lengths,
                                                  const int *host_vid_lengths, const float *phrases,
                                                  const int *n_phrases, const int *host_n_phrases,
                                                  int Bv, int Bc, int T, int P, int D, float sigma,
                                                  vtr_error *err);
vtr_status vtr_dev_phrase_attention_score_backward(
    vtr_device dev, float *dvid, float *dphrases, void *scratch, const float *dscores,
    const float *vid, const int *vid_lengths, const int *host_vid_lengths, const float *phrases,
    const int *n_phrases, const int *host_n_phrases, const void *workspace, int Bv, int Bc, int T,
    int P, int D, float sigma, vtr_error *err);
/* match/hgr_score.h's fused score */
vtr_status vtr_dev_hgr_fused_score_forward(vtr_device dev, float *out, const float *global,
                                           const float *verb, const float *noun, size_t n,
                                           vtr_error *err);
vtr_status vtr_dev_hgr_fused_score_backward(vtr_device dev, float *dglobal, float *dverb,
                                            float *dnoun, const float *dout, size_t n,
                                            vtr_error *err);

/* Gradient clipping at max_norm and one optimizer step (lib/optim.h), the recipe of every
 * training loop. On the CPU: vtr_optimizer_step_scaled(opt, ps, lr, vtr_clip_coef(
 * vtr_grad_norm(ps), max_norm)) on ps's own buffers (data, grad, moments and scratch
 * unused). On the GPU: the CUDA twins on the device copies data (ps->n_data floats) and
 * grad (n_trainable), moments (2 n_trainable floats: exp_avg, then exp_avg_sq) and scratch
 * (VTR_DEV_STEP_SCRATCH bytes). max_norm INFINITY: no clipping. *norm (NULL: not wanted)
 * gets the gradient norm before clipping; on the GPU that is the call's one wait. */
#define VTR_DEV_STEP_SCRATCH (sizeof(double) * VTR_CUDA_NORM_PARTIALS + 2 * sizeof(float))
vtr_status vtr_dev_clip_and_step(vtr_device dev, vtr_optimizer *opt, vtr_param_set *ps, float *data,
                                 const float *grad, float *moments, void *scratch, double lr,
                                 double max_norm, float *norm, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
