/* The ops of the matching models on their device; the contracts are in model_ops.h. */
#include "model_ops.h"

#include <stdlib.h>
#include <string.h>

#include "aggregate/adpool.h"
#include "aggregate/gpo.h"
#include "aggregate/set_pooling.h"
#include "aggregate/span_pool.h"
#include "lib/activation.h"
#include "lib/embedding.h"
#include "lib/graph_attention.h"
#include "lib/linear.h"
#include "lib/nn_cuda.h"
#include "lib/norm.h"
#include "lib/pack.h"
#include "lib/similarity.h"
#include "match/adopt_loss.h"
#include "match/hgr_score.h"
#include "match/model_arena.h"
#include "match/phrase_attention.h"
#include "match/set_similarity.h"

vtr_status vtr_dev_alloc(vtr_device dev, void **p, size_t bytes, const char *who, bool per_batch,
                         vtr_error *err)
{
    *p = NULL;
    if (dev == VTR_DEVICE_CPU)
        return vtr_arena_alloc(p, bytes, who, err);
    vtr_status st = vtr_cuda_malloc(p, bytes ? bytes : 1, err);
    if (st) {
        vtr_error_context(err, "%s: %zu bytes on the GPU (%s)", who, bytes,
                          per_batch ? "a smaller batch, or --device cpu" : VTR_CUDA_MEMORY_REMEDY);
        return st;
    }
    if ((st = vtr_cuda_zero(*p, bytes, err))) {
        vtr_cuda_free(*p);
        *p = NULL;
    }
    return st;
}

void vtr_dev_free(vtr_device dev, void *p)
{
    if (dev == VTR_DEVICE_CPU)
        free(p);
    else
        vtr_cuda_free(p);
}

vtr_status vtr_dev_zero(vtr_device dev, void *p, size_t bytes, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_zero(p, bytes, err);
    if (bytes)
        memset(p, 0, bytes);
    return VTR_OK;
}

vtr_status vtr_dev_copy(vtr_device dev, void *dst, const void *src, size_t bytes, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_copy(dst, src, bytes, err);
    if (bytes)
        memcpy(dst, src, bytes);
    return VTR_OK;
}

vtr_status vtr_dev_params_alloc(vtr_device dev, const vtr_param_set *ps, float **data, float **grad,
                                const char *who, vtr_error *err)
{
    *data = *grad = NULL;
    if (dev == VTR_DEVICE_CPU)
        return VTR_OK;
    size_t n_data = vtr_workspace_align(sizeof(float) * ps->n_data) / sizeof(float);
    void *block;
    VTR_TRY(
        vtr_dev_alloc(dev, &block, sizeof(float) * (n_data + ps->n_trainable), who, false, err));
    *data = block;
    *grad = *data + n_data;
    return VTR_OK;
}

vtr_status vtr_dev_params_upload(vtr_device dev, const vtr_param_set *ps, float *data,
                                 vtr_error *err)
{
    return data ? vtr_dev_upload(dev, data, ps->data, sizeof(float) * ps->n_data, err) : VTR_OK;
}

vtr_status vtr_dev_params_download(vtr_device dev, vtr_param_set *ps, const float *data,
                                   const float *grad, vtr_error *err)
{
    if (!data)
        return VTR_OK;
    VTR_TRY(vtr_dev_download(dev, ps->data, data, sizeof(float) * ps->n_data, err));
    return grad ? vtr_dev_download(dev, ps->grad, grad, sizeof(float) * ps->n_trainable, err)
                : VTR_OK;
}

vtr_status vtr_dev_params_zero_grad(vtr_device dev, vtr_param_set *ps, float *grad, vtr_error *err)
{
    if (!grad) {
        vtr_param_set_zero_grad(ps);
        return VTR_OK;
    }
    return vtr_dev_zero(dev, grad, sizeof(float) * ps->n_trainable, err);
}

vtr_status vtr_dev_copy_2d(vtr_device dev, void *dst, size_t dst_pitch, const void *src,
                           size_t src_pitch, size_t width, size_t height, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_copy_2d(dst, dst_pitch, src, src_pitch, width, height, err);
    for (size_t r = 0; r < height && width; r++)
        memcpy((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, width);
    return VTR_OK;
}

vtr_status vtr_dev_upload(vtr_device dev, void *dst, const void *src, size_t bytes, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return bytes ? vtr_cuda_to_device(dst, src, bytes, err) : VTR_OK;
    if (bytes && dst != src)
        memcpy(dst, src, bytes);
    return VTR_OK;
}

vtr_status vtr_dev_download(vtr_device dev, void *dst, const void *src, size_t bytes,
                            vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return bytes ? vtr_cuda_to_host(dst, src, bytes, err) : VTR_OK;
    if (bytes && dst != src)
        memcpy(dst, src, bytes);
    return VTR_OK;
}

vtr_status vtr_dev_add(vtr_device dev, float *y, const float *x, size_t n, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_add(y, x, n, err);
#pragma omp parallel for simd schedule(static) if (n > 65536)
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
    return VTR_OK;
}

vtr_status vtr_dev_linear_forward(vtr_device dev, float *out, const float *inp, const float *weight,
                                  const float *bias, int N, int C, int OC, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_linear_forward(out, inp, weight, bias, N, C, OC, err);
    vtr_linear_forward(out, inp, weight, bias, N, C, OC);
    return VTR_OK;
}

vtr_status vtr_dev_linear_backward(vtr_device dev, float *dinp, float *dweight, float *dbias,
                                   const float *dout, const float *inp, const float *weight, int N,
                                   int C, int OC, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, err);
    vtr_linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    return VTR_OK;
}

vtr_status vtr_dev_relu_forward(vtr_device dev, float *out, const float *inp, size_t n,
                                vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_relu_forward(out, inp, n, err);
    vtr_relu_forward(out, inp, n);
    return VTR_OK;
}

vtr_status vtr_dev_relu_backward(vtr_device dev, float *dinp, const float *dout, const float *inp,
                                 size_t n, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_relu_backward(dinp, dout, inp, n, err);
    vtr_relu_backward(dinp, dout, inp, n);
    return VTR_OK;
}

vtr_status vtr_dev_dropout_forward(vtr_device dev, float *out, const float *inp, size_t n, float p,
                                   uint64_t seed, uint64_t stream, uint64_t first, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_dropout_forward(out, inp, n, p, seed, stream, first, err);
    vtr_dropout_forward(out, inp, n, p, seed, stream, first);
    return VTR_OK;
}

vtr_status vtr_dev_dropout_backward(vtr_device dev, float *dinp, const float *dout, size_t n,
                                    float p, uint64_t seed, uint64_t stream, uint64_t first,
                                    vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_dropout_backward(dinp, dout, n, p, seed, stream, first, err);
    vtr_dropout_backward(dinp, dout, n, p, seed, stream, first);
    return VTR_OK;
}

vtr_status vtr_dev_pack_rows(vtr_device dev, float *packed, const float *padded, const int *lengths,
                             int B, int T, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_pack_rows(packed, padded, lengths, B, T, D, err);
    vtr_pack_rows(packed, padded, lengths, B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_unpack_rows(vtr_device dev, float *padded, const float *packed,
                               const int *lengths, int B, int T, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_unpack_rows(padded, packed, lengths, B, T, D, err);
    vtr_unpack_rows(padded, packed, lengths, B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_embedding_forward(vtr_device dev, float *out, const int *ids, const float *table,
                                     const int *lengths, int B, int L, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_embedding_forward_padded(out, ids, table, lengths, B, L, D, err);
    vtr_embedding_forward_padded(out, ids, table, lengths, B, L, D);
    return VTR_OK;
}

vtr_status vtr_dev_embedding_backward(vtr_device dev, float *dtable, const float *dout,
                                      const int *ids, const int *lengths, int B, int L, int D,
                                      vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_embedding_backward_padded(dtable, dout, ids, lengths, B, L, D, err);
    vtr_embedding_backward_padded(dtable, dout, ids, lengths, B, L, D);
    return VTR_OK;
}

vtr_status vtr_dev_batchnorm_forward(vtr_device dev, float *out, float *mean, float *rstd,
                                     float *running_mean, float *running_var, const float *inp,
                                     const float *weight, const float *bias, int N, int C,
                                     float momentum, float eps, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_batchnorm_forward(out, mean, rstd, running_mean, running_var, inp, weight,
                                          bias, N, C, momentum, eps, err);
    vtr_batchnorm_forward(out, mean, rstd, running_mean, running_var, inp, weight, bias, N, C,
                          momentum, eps);
    return VTR_OK;
}

vtr_status vtr_dev_batchnorm_backward(vtr_device dev, float *dinp, float *dweight, float *dbias,
                                      const float *dout, const float *inp, const float *weight,
                                      const float *mean, const float *rstd, int N, int C,
                                      vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_batchnorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N,
                                           C, err);
    vtr_batchnorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    return VTR_OK;
}

vtr_status vtr_dev_batchnorm_forward_eval(vtr_device dev, float *out, const float *inp,
                                          const float *weight, const float *bias,
                                          const float *running_mean, const float *running_var,
                                          int N, int C, float eps, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_batchnorm_forward_eval(out, inp, weight, bias, running_mean, running_var, N,
                                               C, eps, err);
    vtr_batchnorm_forward_eval(out, inp, weight, bias, running_mean, running_var, N, C, eps);
    return VTR_OK;
}

vtr_status vtr_dev_l2norm_forward(vtr_device dev, float *out, float *norm, const float *inp, int N,
                                  int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_l2norm_forward(out, norm, inp, N, D, err);
    vtr_l2norm_forward(out, norm, inp, N, D);
    return VTR_OK;
}

vtr_status vtr_dev_l2norm_backward(vtr_device dev, float *dinp, const float *dout, const float *inp,
                                   const float *norm, int N, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_l2norm_backward(dinp, dout, inp, norm, N, D, err);
    vtr_l2norm_backward(dinp, dout, inp, norm, N, D);
    return VTR_OK;
}

vtr_status vtr_dev_cosine_similarity_forward(vtr_device dev, float *S, const float *a,
                                             const float *b, int NA, int NB, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_cosine_similarity_forward(S, a, b, NA, NB, D, err);
    vtr_cosine_similarity_forward(S, a, b, NA, NB, D);
    return VTR_OK;
}

vtr_status vtr_dev_cosine_similarity_backward(vtr_device dev, float *da, float *db, const float *dS,
                                              const float *a, const float *b, int NA, int NB, int D,
                                              vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_cosine_similarity_backward(da, db, dS, a, b, NA, NB, D, err);
    vtr_cosine_similarity_backward(da, db, dS, a, b, NA, NB, D);
    return VTR_OK;
}

vtr_status vtr_dev_mean_pool_forward(vtr_device dev, float *out, const float *inp,
                                     const int *lengths, int B, int T, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_mean_pool_forward(out, inp, lengths, B, T, D, err);
    vtr_mean_pool_forward(out, inp, lengths, B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_mean_pool_backward(vtr_device dev, float *dinp, const float *dout,
                                      const int *lengths, int B, int T, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_mean_pool_backward(dinp, dout, lengths, B, T, D, err);
    vtr_mean_pool_backward(dinp, dout, lengths, B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_attention_pool_forward(vtr_device dev, float *out, float *weights,
                                          const float *inp, const float *score_weight,
                                          const float *score_bias, const int *lengths, int B, int T,
                                          int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_attention_pool_forward(out, weights, inp, score_weight, score_bias, lengths,
                                               B, T, D, err);
    vtr_attention_pool_forward(out, weights, inp, score_weight, score_bias, lengths, B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_attention_pool_backward(vtr_device dev, float *dinp, float *dscore_weight,
                                           float *dscore_bias, const float *dout, const float *inp,
                                           const float *weights, const float *score_weight,
                                           const int *lengths, int B, int T, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_attention_pool_backward(dinp, dscore_weight, dscore_bias, dout, inp,
                                                weights, score_weight, lengths, B, T, D, err);
    vtr_attention_pool_backward(dinp, dscore_weight, dscore_bias, dout, inp, weights, score_weight,
                                lengths, B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_gpo_forward(vtr_device dev, float *out, float *weights, void *workspace,
                               const float *inp, const int *lengths, const float *params, int B,
                               int T, int D, int d_pe, int hidden, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_gpo_forward(out, weights, workspace, inp, lengths, params, B, T, D, d_pe,
                                    hidden, err);
    vtr_gpo_forward(out, weights, workspace, inp, lengths, params, B, T, D, d_pe, hidden);
    return VTR_OK;
}

vtr_status vtr_dev_gpo_backward(vtr_device dev, float *dinp, float *dparams, void *scratch,
                                const float *dout, const float *inp, const float *weights,
                                const int *lengths, const float *params, const void *workspace,
                                int B, int T, int D, int d_pe, int hidden, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_gpo_backward(dinp, dparams, scratch, dout, inp, weights, lengths, params,
                                     workspace, B, T, D, d_pe, hidden, err);
    vtr_gpo_backward(dinp, dparams, scratch, dout, inp, weights, lengths, params, workspace, B, T,
                     D, d_pe, hidden);
    return VTR_OK;
}

vtr_status vtr_dev_adpool_forward(vtr_device dev, float *out, float *theta, float *omega,
                                  void *workspace, const float *inp, const int *lengths,
                                  const float *params, int B, int T, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_adpool_forward(out, theta, omega, workspace, inp, lengths, params, B, T, D,
                                       err);
    vtr_adpool_forward(out, theta, omega, workspace, inp, lengths, params, B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_adpool_backward(vtr_device dev, float *dinp, float *dparams, void *scratch,
                                   const float *dout, const float *inp, const float *theta,
                                   const float *omega, const int *lengths, const float *params,
                                   const void *workspace, int B, int T, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_adpool_backward(dinp, dparams, scratch, dout, inp, theta, omega, lengths,
                                        params, workspace, B, T, D, err);
    vtr_adpool_backward(dinp, dparams, scratch, dout, inp, theta, omega, lengths, params, workspace,
                        B, T, D);
    return VTR_OK;
}

vtr_status vtr_dev_hinge_loss_forward(vtr_device dev, float *loss, const float *S, int B,
                                      float margin, vtr_hinge_negatives negatives,
                                      vtr_reduction reduction, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_hinge_loss_forward(loss, S, B, margin, negatives, reduction, err);
    *loss = vtr_hinge_loss_forward(S, B, margin, negatives, reduction);
    return VTR_OK;
}

vtr_status vtr_dev_hinge_loss_backward(vtr_device dev, float *dS, float dloss, const float *S,
                                       int B, float margin, vtr_hinge_negatives negatives,
                                       vtr_reduction reduction, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_hinge_loss_backward(dS, dloss, S, B, margin, negatives, reduction, err);
    vtr_hinge_loss_backward(dS, dloss, S, B, margin, negatives, reduction);
    return VTR_OK;
}

vtr_status vtr_dev_adopt_negatives(vtr_device dev, int *K, const float *S, int B, int fixed_K,
                                   vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_adopt_negatives(K, S, B, fixed_K, err);
    *K = fixed_K > 0 ? fixed_K : vtr_adopt_negatives(S, B, NULL, NULL);
    return VTR_OK;
}

vtr_status vtr_dev_adopt_loss_forward(vtr_device dev, float *loss, const float *S, int B,
                                      const int *K, float tau, bool positive_in_denominator,
                                      vtr_reduction reduction, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_adopt_loss_forward(loss, S, B, K, tau, positive_in_denominator, reduction,
                                           err);
    *loss = vtr_adopt_loss_forward(S, B, *K, tau, positive_in_denominator, reduction);
    return VTR_OK;
}

vtr_status vtr_dev_adopt_loss_backward(vtr_device dev, float *dS, float dloss, const float *S,
                                       int B, const int *K, float tau, bool positive_in_denominator,
                                       vtr_reduction reduction, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_adopt_loss_backward(dS, dloss, S, B, K, tau, positive_in_denominator,
                                            reduction, err);
    vtr_adopt_loss_backward(dS, dloss, S, B, *K, tau, positive_in_denominator, reduction);
    return VTR_OK;
}

vtr_status vtr_dev_set_prediction_forward(vtr_device dev, float *set, float *slots_n,
                                          void *workspace, const float *inp, const int *lengths,
                                          const float *glob, const float *params,
                                          const vtr_set_prediction_config *c, int B, int N, float p,
                                          uint64_t seed, uint64_t stream, int64_t first,
                                          vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_set_prediction_forward(set, slots_n, workspace, inp, lengths, glob, params,
                                               c, B, N, p, seed, stream, first, err);
    vtr_set_prediction_forward(set, slots_n, workspace, inp, lengths, glob, params, c, B, N, p,
                               seed, stream, first);
    return VTR_OK;
}

vtr_status vtr_dev_set_prediction_backward(vtr_device dev, float *dinp, float *dglob,
                                           float *dparams, void *scratch, const float *dset,
                                           const float *dslots_n, const void *workspace,
                                           const float *inp, const int *lengths, const float *glob,
                                           const float *params, const vtr_set_prediction_config *c,
                                           int B, int N, float p, uint64_t seed, uint64_t stream,
                                           int64_t first, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_set_prediction_backward(dinp, dglob, dparams, scratch, dset, dslots_n,
                                                workspace, inp, lengths, glob, params, c, B, N, p,
                                                seed, stream, first, err);
    vtr_set_prediction_backward(dinp, dglob, dparams, scratch, dset, dslots_n, workspace, inp,
                                lengths, glob, params, c, B, N, p, seed, stream, first);
    return VTR_OK;
}

vtr_status vtr_dev_smooth_chamfer_forward(vtr_device dev, float *S, long ldS, void *scratch,
                                          const float *a, const float *b, int Na, int Nb, int Ka,
                                          int Kb, int D, float alpha, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_smooth_chamfer_forward(S, ldS, scratch, a, b, Na, Nb, Ka, Kb, D, alpha,
                                               err);
    vtr_smooth_chamfer_forward(S, ldS, scratch, a, b, Na, Nb, Ka, Kb, D, alpha);
    return VTR_OK;
}

vtr_status vtr_dev_smooth_chamfer_backward(vtr_device dev, float *da, float *db, void *scratch,
                                           const float *dS, long ldS, const float *a,
                                           const float *b, int Na, int Nb, int Ka, int Kb, int D,
                                           float alpha, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_smooth_chamfer_backward(da, db, scratch, dS, ldS, a, b, Na, Nb, Ka, Kb, D,
                                                alpha, err);
    vtr_smooth_chamfer_backward(da, db, scratch, dS, ldS, a, b, Na, Nb, Ka, Kb, D, alpha);
    return VTR_OK;
}

vtr_status vtr_dev_set_diversity_forward(vtr_device dev, float *loss, const float *r, int N, int K,
                                         int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_set_diversity_forward(loss, r, N, K, D, err);
    *loss = vtr_set_diversity_forward(r, N, K, D);
    return VTR_OK;
}

vtr_status vtr_dev_set_diversity_backward(vtr_device dev, float *dr, float dloss, const float *r,
                                          int N, int K, int D, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_set_diversity_backward(dr, dloss, r, N, K, D, err);
    vtr_set_diversity_backward(dr, dloss, r, N, K, D);
    return VTR_OK;
}

vtr_status vtr_dev_set_mmd_forward(vtr_device dev, float *loss, void *scratch, const float *X,
                                   const float *Y, long nx, long ny, int D, float gamma,
                                   vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_set_mmd_forward(loss, scratch, X, Y, nx, ny, D, gamma, err);
    *loss = vtr_set_mmd_forward(scratch, X, Y, nx, ny, D, gamma);
    return VTR_OK;
}

vtr_status vtr_dev_set_mmd_backward(vtr_device dev, float *dx, float *dy, float dloss,
                                    void *scratch, const float *X, const float *Y, long nx, long ny,
                                    int D, float gamma, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_set_mmd_backward(dx, dy, dloss, scratch, X, Y, nx, ny, D, gamma, err);
    vtr_set_mmd_backward(dx, dy, dloss, scratch, X, Y, nx, ny, D, gamma);
    return VTR_OK;
}

vtr_status vtr_dev_caption_bigru_forward(vtr_device dev, float *out, vtr_caption_bigru *g,
                                         const float *inp, const int *lengths,
                                         const int *host_lengths, const float *params, int B, int L,
                                         int W, int E, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_gru_forward(out, g->workspace[0], inp, lengths, params, B, L, W, E, 2,
                                    VTR_GRU_AVERAGE, err);
    vtr_caption_bigru_forward(out, g, inp, host_lengths, params, B, L, W, E);
    return VTR_OK;
}

vtr_status vtr_dev_caption_bigru_backward(vtr_device dev, float *dinp, float *dparams,
                                          vtr_caption_bigru *g, float *dout, const float *inp,
                                          const int *lengths, const int *host_lengths,
                                          const float *params, int B, int L, int W, int E,
                                          vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_gru_backward(dinp, dparams, g->scratch[0], dout, inp, lengths, params,
                                     g->workspace[0], B, L, W, E, 2, VTR_GRU_AVERAGE, err);
    vtr_caption_bigru_backward(dinp, dparams, g, dout, inp, host_lengths, params, B, L, W, E);
    return VTR_OK;
}

vtr_status vtr_dev_role_span_pool_forward(vtr_device dev, float *out, int *argmax, const float *inp,
                                          const uint8_t *masks, const int *roles,
                                          const float *role_table, int B, int N, int L, int D,
                                          vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_role_span_pool_forward(out, argmax, inp, masks, roles, role_table, B, N, L,
                                               D, err);
    vtr_role_span_pool_forward(out, argmax, inp, masks, roles, role_table, B, N, L, D);
    return VTR_OK;
}

vtr_status vtr_dev_role_span_pool_backward(vtr_device dev, float *dinp, float *drole_table,
                                           void *scratch, const float *dout, const float *inp,
                                           const int *argmax, const int *roles,
                                           const float *role_table, int B, int N, int L, int D,
                                           vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_role_span_pool_backward(dinp, drole_table, scratch, dout, inp, argmax,
                                                roles, role_table, B, N, L, D, err);
    vtr_role_span_pool_backward(dinp, drole_table, scratch, dout, inp, argmax, roles, role_table, B,
                                N, L, D);
    return VTR_OK;
}

vtr_status vtr_dev_attn_gcn_forward(vtr_device dev, float *out, void *workspace, const float *x,
                                    const float *rel_edges, const float *params, int B, int N,
                                    int D, int F, float p, uint64_t seed, uint64_t stream,
                                    int64_t first, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_attn_gcn_forward(out, workspace, x, rel_edges, params, B, N, D, F, p, seed,
                                         stream, first, err);
    vtr_attn_gcn_forward(out, workspace, x, rel_edges, params, B, N, D, F, p, seed, stream, first);
    return VTR_OK;
}

vtr_status vtr_dev_attn_gcn_backward(vtr_device dev, float *dx, float *dparams, void *scratch,
                                     const float *dout, const float *x, const float *params,
                                     const void *workspace, int B, int N, int D, int F, float p,
                                     uint64_t seed, uint64_t stream, int64_t first, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_attn_gcn_backward(dx, dparams, scratch, dout, x, params, workspace, B, N, D,
                                          F, p, seed, stream, first, err);
    vtr_attn_gcn_backward(dx, dparams, scratch, dout, x, params, workspace, B, N, D, F, p, seed,
                          stream, first);
    return VTR_OK;
}

vtr_status vtr_dev_phrase_attention_score_forward(vtr_device dev, float *scores, void *workspace,
                                                  const float *vid, const int *vid_lengths,
                                                  const int *host_vid_lengths, const float *phrases,
                                                  const int *n_phrases, const int *host_n_phrases,
                                                  int Bv, int Bc, int T, int P, int D, float sigma,
                                                  vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_phrase_attention_score_forward(scores, workspace, vid, vid_lengths, phrases,
                                                       n_phrases, Bv, Bc, T, P, D, sigma, err);
    vtr_phrase_attention_score_forward(scores, workspace, vid, host_vid_lengths, phrases,
                                       host_n_phrases, Bv, Bc, T, P, D, sigma);
    return VTR_OK;
}

vtr_status vtr_dev_phrase_attention_score_backward(
    vtr_device dev, float *dvid, float *dphrases, void *scratch, const float *dscores,
    const float *vid, const int *vid_lengths, const int *host_vid_lengths, const float *phrases,
    const int *n_phrases, const int *host_n_phrases, const void *workspace, int Bv, int Bc, int T,
    int P, int D, float sigma, vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_phrase_attention_score_backward(dvid, dphrases, scratch, dscores, vid,
                                                        vid_lengths, phrases, n_phrases, workspace,
                                                        Bv, Bc, T, P, D, sigma, err);
    vtr_phrase_attention_score_backward(dvid, dphrases, scratch, dscores, vid, host_vid_lengths,
                                        phrases, host_n_phrases, workspace, Bv, Bc, T, P, D, sigma);
    return VTR_OK;
}

vtr_status vtr_dev_hgr_fused_score_forward(vtr_device dev, float *out, const float *global,
                                           const float *verb, const float *noun, size_t n,
                                           vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_hgr_fused_score_forward(out, global, verb, noun, n, err);
    vtr_hgr_fused_score_forward(out, global, verb, noun, n);
    return VTR_OK;
}

vtr_status vtr_dev_hgr_fused_score_backward(vtr_device dev, float *dglobal, float *dverb,
                                            float *dnoun, const float *dout, size_t n,
                                            vtr_error *err)
{
    if (dev == VTR_DEVICE_CUDA)
        return vtr_cuda_hgr_fused_score_backward(dglobal, dverb, dnoun, dout, n, err);
    vtr_hgr_fused_score_backward(dglobal, dverb, dnoun, dout, n);
    return VTR_OK;
}

vtr_status vtr_dev_clip_and_step(vtr_device dev, vtr_optimizer *opt, vtr_param_set *ps, float *data,
                                 const float *grad, float *moments, void *scratch, double lr,
                                 double max_norm, float *norm, vtr_error *err)
{
    if (dev == VTR_DEVICE_CPU) {
        float total = vtr_grad_norm(ps);
        vtr_optimizer_step_scaled(opt, ps, lr, vtr_clip_coef(total, max_norm));
        if (norm)
            *norm = total;
        return VTR_OK;
    }
    size_t n = ps->n_trainable;
    double *partials = scratch;
    float *clip = (float *)(partials + VTR_CUDA_NORM_PARTIALS); /* {norm, coefficient} */
    VTR_TRY(vtr_cuda_clip_coef(clip, partials, grad, n, max_norm, err));
    VTR_TRY(vtr_cuda_optimizer_step(opt, ps, data, grad, moments, moments + n, lr, clip + 1, err));
    return norm ? vtr_cuda_to_host(norm, clip, sizeof(float), err) : VTR_OK;
}
