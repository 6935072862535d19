/* The CUDA backend of lib's nn ops (each op's .cu beside its .c, lib/X.cu): one
 * vtr_cuda_X_forward / _backward per CPU op vtr_X_forward / _backward, with the same
 * arguments in the same order and with the
 * same meaning, conventions and shapes (lib/nn.h and the op's CPU header), except that:
 *
 *   - every buffer is device memory (vtr_cuda_malloc), lengths and ids included; scalars
 *     (dims, options, seeds) are host values;
 *   - each function takes a vtr_error last and returns vtr_status: VTR_ERR_DEVICE with
 *     CUDA's or cuBLAS's message when a launch fails (or vtr_cuda_init was not called
 *     before an op that multiplies matrices);
 *   - the work is queued on the default stream and the function returns without waiting:
 *     ops run in the order they were called, and an error during execution surfaces at
 *     the next synchronizing call (vtr_cuda_to_host).
 *
 * Gradients accumulate (+=) into every gradient buffer, as on the CPU. Workspaces and
 * scratches are device buffers of the CPU's sizes (vtr_gru_workspace_size, ...), so a
 * caller sizes them once for either backend. The per-element and per-row math is the
 * CPU's own VTR_HD functions (DESIGN.md, "single source"); matrix products go through
 * cuBLAS in float32, so results agree with the CPU to float32 rounding (sums in another
 * order, fused multiply-adds), not bit for bit; dropout masks, sort orders, argmax and
 * hardest negatives are identical for identical inputs. Matrix products are deterministic
 * on a given GPU, and every other reduction runs in a fixed order.
 *
 * Implemented in libvtr-cuda.so and reached through lib/cuda_entries.c, which loads it on
 * the first call (lib/cuda_loader.h); in a build without CUDA they fail with
 * VTR_WITHOUT_CUDA, so callers need no #ifdef.
 */
#ifndef VTR_NN_CUDA_H
#define VTR_NN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/gru.h"
#include "lib/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* lib/linear.h */
vtr_status vtr_cuda_linear_forward(float *out, const float *inp, const float *weight,
                                   const float *bias, int N, int C, int OC, vtr_error *err);
vtr_status vtr_cuda_linear_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *weight, int N, int C, int OC,
                                    vtr_error *err);
vtr_status vtr_cuda_bias_forward(float *out, const float *bias, int N, int C, vtr_error *err);
vtr_status vtr_cuda_bias_backward(float *dbias, const float *dout, int N, int C, vtr_error *err);

/* lib/activation.h (forwards allow out == inp) */
vtr_status vtr_cuda_relu_forward(float *out, const float *inp, size_t n, vtr_error *err);
vtr_status vtr_cuda_relu_backward(float *dinp, const float *dout, const float *inp, size_t n,
                                  vtr_error *err);
vtr_status vtr_cuda_gelu_forward(float *out, const float *inp, size_t n, vtr_error *err);
vtr_status vtr_cuda_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n,
                                  vtr_error *err);
vtr_status vtr_cuda_tanh_forward(float *out, const float *inp, size_t n, vtr_error *err);
vtr_status vtr_cuda_tanh_backward(float *dinp, const float *dout, const float *out, size_t n,
                                  vtr_error *err);
vtr_status vtr_cuda_sigmoid_forward(float *out, const float *inp, size_t n, vtr_error *err);
vtr_status vtr_cuda_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n,
                                     vtr_error *err);
/* The same mask as the CPU for the same (n, p, seed, stream, first), bit for bit. */
vtr_status vtr_cuda_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t seed,
                                    uint64_t stream, uint64_t first, vtr_error *err);
vtr_status vtr_cuda_dropout_backward(float *dinp, const float *dout, size_t n, float p,
                                     uint64_t seed, uint64_t stream, uint64_t first,
                                     vtr_error *err);

/* lib/embedding.h (ids already checked with vtr_nn_check_ids on the host) */
vtr_status vtr_cuda_embedding_forward(float *out, const int *ids, const float *table, int N, int D,
                                      vtr_error *err);
vtr_status vtr_cuda_embedding_backward(float *dtable, const float *dout, const int *ids, int N,
                                       int D, vtr_error *err);
vtr_status vtr_cuda_embedding_forward_padded(float *out, const int *ids, const float *table,
                                             const int *lengths, int B, int L, int D,
                                             vtr_error *err);
vtr_status vtr_cuda_embedding_backward_padded(float *dtable, const float *dout, const int *ids,
                                              const int *lengths, int B, int L, int D,
                                              vtr_error *err);

/* lib/pack.h */
vtr_status vtr_cuda_pack_rows(float *packed, const float *padded, const int *lengths, int B, int T,
                              int D, vtr_error *err);
vtr_status vtr_cuda_unpack_rows(float *padded, const float *packed, const int *lengths, int B,
                                int T, int D, vtr_error *err);

/* lib/norm.h */
vtr_status vtr_cuda_batchnorm_forward(float *out, float *mean, float *rstd, float *running_mean,
                                      float *running_var, const float *inp, const float *weight,
                                      const float *bias, int N, int C, float momentum, float eps,
                                      vtr_error *err);
vtr_status vtr_cuda_batchnorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                       const float *inp, const float *weight, const float *mean,
                                       const float *rstd, int N, int C, vtr_error *err);
/* lib/sync_batchnorm.h's steps: vtr_batchnorm_normalize; the per-rank column sums
 * (vtr_batchnorm_sums_columns: sums (C) doubles); the backward's sums (sdy, sdyx (C)
 * doubles) with dweight and dbias +=; dinp (N,C) += the input gradients from the global
 * sums. */
vtr_status vtr_cuda_batchnorm_normalize(float *out, const float *inp, const float *mean,
                                        const float *rstd, const float *weight, const float *bias,
                                        int N, int C, vtr_error *err);
vtr_status vtr_cuda_batchnorm_sums(double *sums, const float *inp, const float *center, int N,
                                   int C, vtr_error *err);
vtr_status vtr_cuda_batchnorm_grad_sums(double *sdy, double *sdyx, float *dweight, float *dbias,
                                        const float *dout, const float *inp, const float *mean,
                                        const float *rstd, int N, int C, vtr_error *err);
vtr_status vtr_cuda_sync_batchnorm_dinput(float *dinp, const float *dout, const float *inp,
                                          const float *weight, const float *mean, const float *rstd,
                                          const double *sdy, const double *sdyx, int64_t N_global,
                                          int N, int C, vtr_error *err);
vtr_status vtr_cuda_batchnorm_forward_eval(float *out, const float *inp, const float *weight,
                                           const float *bias, const float *running_mean,
                                           const float *running_var, int N, int C, float eps,
                                           vtr_error *err);
vtr_status vtr_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                      const float *weight, const float *bias, int N, int C,
                                      float eps, vtr_error *err);
vtr_status vtr_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                       const float *inp, const float *weight, const float *mean,
                                       const float *rstd, int N, int C, vtr_error *err);
vtr_status vtr_cuda_l2norm_forward(float *out, float *norm, const float *inp, int N, int D,
                                   vtr_error *err);
vtr_status vtr_cuda_l2norm_backward(float *dinp, const float *dout, const float *inp,
                                    const float *norm, int N, int D, vtr_error *err);

/* lib/softmax.h (lengths may be NULL: all T real) */
vtr_status vtr_cuda_masked_softmax_forward(float *out, const float *inp, const int *lengths, int B,
                                           int T, float temperature, vtr_error *err);
vtr_status vtr_cuda_masked_softmax_backward(float *dinp, const float *dout, const float *out,
                                            const int *lengths, int B, int T, float temperature,
                                            vtr_error *err);

/* lib/similarity.h */
vtr_status vtr_cuda_cosine_similarity_forward(float *S, const float *a, const float *b, int NA,
                                              int NB, int D, vtr_error *err);
vtr_status vtr_cuda_cosine_similarity_backward(float *da, float *db, const float *dS,
                                               const float *a, const float *b, int NA, int NB,
                                               int D, vtr_error *err);

/* lib/gru.h. The workspace and scratch (device) have the CPU's sizes; their contents are
 * laid out differently than the CPU's, so a workspace filled by one backend's forward is
 * for that backend's backward only. Every step processes the whole batch (items past
 * their length are masked), so a step costs the same whatever the lengths; T steps run.
 * Unlike the CPU, the products read inp's padded rows (t >= length) too, times zero: they
 * must be finite (callers zero them), or dparams' input weights become NaN. */
vtr_status vtr_cuda_gru_forward(float *out, void *workspace, const float *inp, const int *lengths,
                                const float *params, int B, int T, int D, int H, int num_directions,
                                vtr_gru_merge merge, vtr_error *err);
vtr_status vtr_cuda_gru_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                                 const float *inp, const int *lengths, const float *params,
                                 const void *workspace, int B, int T, int D, int H,
                                 int num_directions, vtr_gru_merge merge, vtr_error *err);

/* cuDNN's RNN as a second engine of the same GRU (lib/gru_cudnn.cu), to time against the
 * one above (tests/gpu/op_timing.c): forward and backward as vtr_cuda_gru_forward and
 * _backward give them, within float32 rounding (tests/test_cuda_nn.c). The engine, made for
 * (D, H, num_directions), keeps cuDNN's descriptors, its weight space and the forward's
 * output and reserve space for backward, so one forward's backward comes before the next
 * forward. lengths (host) and dev_lengths (device) are the same B lengths, each 1 .. T.
 * VTR_ERR_INVALID for bad sizes or lengths, VTR_ERR_DEVICE with cuDNN's or CUDA's message,
 * VTR_ERR_NOMEM. */
typedef struct vtr_cudnn_gru vtr_cudnn_gru;
vtr_status vtr_cudnn_gru_new(int D, int H, int num_directions, vtr_cudnn_gru **out, vtr_error *err);
void vtr_cudnn_gru_free(vtr_cudnn_gru *g);
vtr_status vtr_cudnn_gru_forward(vtr_cudnn_gru *g, float *out, const float *inp, const int *lengths,
                                 const int *dev_lengths, const float *params, int B, int T,
                                 vtr_gru_merge merge, vtr_error *err);
vtr_status vtr_cudnn_gru_backward(vtr_cudnn_gru *g, float *dinp, float *dparams, const float *dout,
                                  const float *inp, const int *dev_lengths, int B, int T,
                                  vtr_gru_merge merge, vtr_error *err);

/* lib/graph_attention.h. The workspace and scratch (device) have the CPU's sizes and
 * layouts; the Linears run over all B*N rows (the CPU packs the rows with edges: the same
 * numbers), so the packing buffers and row lists there are not filled. The dropout masks are
 * the CPU's. */
vtr_status vtr_cuda_attn_gcn_forward(float *out, void *workspace, const float *x,
                                     const float *rel_edges, const float *params, int B, int N,
                                     int D, int F, float p, uint64_t seed, uint64_t stream,
                                     int64_t first, vtr_error *err);
vtr_status vtr_cuda_attn_gcn_backward(float *dx, float *dparams, void *scratch, const float *dout,
                                      const float *x, const float *params, const void *workspace,
                                      int B, int N, int D, int F, float p, uint64_t seed,
                                      uint64_t stream, int64_t first, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
