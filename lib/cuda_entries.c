/* The entries of the device and the nn ops (lib/device.h, lib/nn_cuda.h, lib/optim.h,
 * lib/upload_stage.h): each loads the CUDA backend on first use and calls its function of
 * the same name (lib/cuda_loader.h). */
#include "lib/device.h"
#include "lib/nn_cuda.h"
#include "lib/optim.h"
#include "lib/upload_stage.h"
#include "lib/cuda_loader.h"

int vtr_cuda_device_count(void)
{
    static vtr_cuda_slot slot;
    vtr_cuda_fn fn;
    vtr_error err;
    return vtr_cuda_entry("vtr_cuda_device_count", &slot, &fn, &err) == VTR_OK
               ? ((int (*)(void))fn)()
               : 0;
}

bool vtr_cuda_available(void)
{
    return vtr_cuda_device_count() > 0;
}

VTR_CUDA_FREE_ENTRY(vtr_cuda_free, void)

VTR_CUDA_ENTRY(vtr_cuda_add, (float *y, const float *x, size_t n, vtr_error *err), (y, x, n, err))

VTR_CUDA_ENTRY(vtr_cuda_attn_gcn_backward,
               (float *dx, float *dparams, void *scratch, const float *dout, const float *x,
                const float *params, const void *workspace, int B, int N, int D, int F, float p,
                uint64_t seed, uint64_t stream, int64_t first, vtr_error *err),
               (dx, dparams, scratch, dout, x, params, workspace, B, N, D, F, p, seed, stream,
                first, err))

VTR_CUDA_ENTRY(vtr_cuda_attn_gcn_forward,
               (float *out, void *workspace, const float *x, const float *rel_edges,
                const float *params, int B, int N, int D, int F, float p, uint64_t seed,
                uint64_t stream, int64_t first, vtr_error *err),
               (out, workspace, x, rel_edges, params, B, N, D, F, p, seed, stream, first, err))

VTR_CUDA_ENTRY(vtr_cuda_batchnorm_backward,
               (float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                const float *weight, const float *mean, const float *rstd, int N, int C,
                vtr_error *err),
               (dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_batchnorm_forward,
               (float *out, float *mean, float *rstd, float *running_mean, float *running_var,
                const float *inp, const float *weight, const float *bias, int N, int C,
                float momentum, float eps, vtr_error *err),
               (out, mean, rstd, running_mean, running_var, inp, weight, bias, N, C, momentum, eps,
                err))

VTR_CUDA_ENTRY(vtr_cuda_batchnorm_grad_sums,
               (double *sdy, double *sdyx, float *dweight, float *dbias, const float *dout,
                const float *inp, const float *mean, const float *rstd, int N, int C,
                vtr_error *err),
               (sdy, sdyx, dweight, dbias, dout, inp, mean, rstd, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_batchnorm_normalize,
               (float *out, const float *inp, const float *mean, const float *rstd,
                const float *weight, const float *bias, int N, int C, vtr_error *err),
               (out, inp, mean, rstd, weight, bias, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_batchnorm_sums,
               (double *sums, const float *inp, const float *center, int N, int C, vtr_error *err),
               (sums, inp, center, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_batchnorm_forward_eval,
               (float *out, const float *inp, const float *weight, const float *bias,
                const float *running_mean, const float *running_var, int N, int C, float eps,
                vtr_error *err),
               (out, inp, weight, bias, running_mean, running_var, N, C, eps, err))

VTR_CUDA_ENTRY(vtr_cuda_bias_backward,
               (float *dbias, const float *dout, int N, int C, vtr_error *err),
               (dbias, dout, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_bias_forward, (float *out, const float *bias, int N, int C, vtr_error *err),
               (out, bias, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_clip_coef,
               (float *out, double *partials, const float *grad, size_t n, double max_norm,
                vtr_error *err),
               (out, partials, grad, n, max_norm, err))

VTR_CUDA_ENTRY(vtr_cuda_copy, (void *dst, const void *src, size_t bytes, vtr_error *err),
               (dst, src, bytes, err))

VTR_CUDA_ENTRY(vtr_cuda_copy_2d,
               (void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width,
                size_t height, vtr_error *err),
               (dst, dst_pitch, src, src_pitch, width, height, err))

VTR_CUDA_ENTRY(vtr_cuda_cosine_similarity_backward,
               (float *da, float *db, const float *dS, const float *a, const float *b, int NA,
                int NB, int D, vtr_error *err),
               (da, db, dS, a, b, NA, NB, D, err))

VTR_CUDA_ENTRY(vtr_cuda_cosine_similarity_forward,
               (float *S, const float *a, const float *b, int NA, int NB, int D, vtr_error *err),
               (S, a, b, NA, NB, D, err))

VTR_CUDA_ENTRY(vtr_cuda_dropout_backward,
               (float *dinp, const float *dout, size_t n, float p, uint64_t seed, uint64_t stream,
                uint64_t first, vtr_error *err),
               (dinp, dout, n, p, seed, stream, first, err))

VTR_CUDA_ENTRY(vtr_cuda_dropout_forward,
               (float *out, const float *inp, size_t n, float p, uint64_t seed, uint64_t stream,
                uint64_t first, vtr_error *err),
               (out, inp, n, p, seed, stream, first, err))

VTR_CUDA_ENTRY(vtr_cuda_embedding_backward,
               (float *dtable, const float *dout, const int *ids, int N, int D, vtr_error *err),
               (dtable, dout, ids, N, D, err))

VTR_CUDA_ENTRY(vtr_cuda_embedding_forward,
               (float *out, const int *ids, const float *table, int N, int D, vtr_error *err),
               (out, ids, table, N, D, err))

VTR_CUDA_ENTRY(vtr_cuda_embedding_backward_padded,
               (float *dtable, const float *dout, const int *ids, const int *lengths, int B, int L,
                int D, vtr_error *err),
               (dtable, dout, ids, lengths, B, L, D, err))

VTR_CUDA_ENTRY(vtr_cuda_embedding_forward_padded,
               (float *out, const int *ids, const float *table, const int *lengths, int B, int L,
                int D, vtr_error *err),
               (out, ids, table, lengths, B, L, D, err))

VTR_CUDA_ENTRY(vtr_cuda_gelu_backward,
               (float *dinp, const float *dout, const float *inp, size_t n, vtr_error *err),
               (dinp, dout, inp, n, err))

VTR_CUDA_ENTRY(vtr_cuda_gelu_forward, (float *out, const float *inp, size_t n, vtr_error *err),
               (out, inp, n, err))

VTR_CUDA_FREE_ENTRY(vtr_cudnn_gru_free, vtr_cudnn_gru)

VTR_CUDA_ENTRY(vtr_cudnn_gru_new,
               (int D, int H, int num_directions, vtr_cudnn_gru **out, vtr_error *err),
               (D, H, num_directions, out, err))

VTR_CUDA_ENTRY(vtr_cudnn_gru_forward,
               (vtr_cudnn_gru * g, float *out, const float *inp, const int *lengths,
                const int *dev_lengths, const float *params, int B, int T, vtr_gru_merge merge,
                vtr_error *err),
               (g, out, inp, lengths, dev_lengths, params, B, T, merge, err))

VTR_CUDA_ENTRY(vtr_cudnn_gru_backward,
               (vtr_cudnn_gru * g, float *dinp, float *dparams, const float *dout, const float *inp,
                const int *dev_lengths, int B, int T, vtr_gru_merge merge, vtr_error *err),
               (g, dinp, dparams, dout, inp, dev_lengths, B, T, merge, err))

VTR_CUDA_ENTRY(vtr_cuda_gru_backward,
               (float *dinp, float *dparams, void *scratch, const float *dout, const float *inp,
                const int *lengths, const float *params, const void *workspace, int B, int T, int D,
                int H, int num_directions, vtr_gru_merge merge, vtr_error *err),
               (dinp, dparams, scratch, dout, inp, lengths, params, workspace, B, T, D, H,
                num_directions, merge, err))

VTR_CUDA_ENTRY(vtr_cuda_gru_forward,
               (float *out, void *workspace, const float *inp, const int *lengths,
                const float *params, int B, int T, int D, int H, int num_directions,
                vtr_gru_merge merge, vtr_error *err),
               (out, workspace, inp, lengths, params, B, T, D, H, num_directions, merge, err))

VTR_CUDA_ENTRY(vtr_cuda_check, (int device, vtr_error *err), (device, err))

VTR_CUDA_ENTRY(vtr_cuda_init, (int device, char *name, size_t name_size, vtr_error *err),
               (device, name, name_size, err))

VTR_CUDA_ENTRY(vtr_cuda_l2norm_backward,
               (float *dinp, const float *dout, const float *inp, const float *norm, int N, int D,
                vtr_error *err),
               (dinp, dout, inp, norm, N, D, err))

VTR_CUDA_ENTRY(vtr_cuda_l2norm_forward,
               (float *out, float *norm, const float *inp, int N, int D, vtr_error *err),
               (out, norm, inp, N, D, err))

VTR_CUDA_ENTRY(vtr_cuda_layernorm_backward,
               (float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                const float *weight, const float *mean, const float *rstd, int N, int C,
                vtr_error *err),
               (dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_layernorm_forward,
               (float *out, float *mean, float *rstd, const float *inp, const float *weight,
                const float *bias, int N, int C, float eps, vtr_error *err),
               (out, mean, rstd, inp, weight, bias, N, C, eps, err))

VTR_CUDA_ENTRY(vtr_cuda_linear_backward,
               (float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                const float *weight, int N, int C, int OC, vtr_error *err),
               (dinp, dweight, dbias, dout, inp, weight, N, C, OC, err))

VTR_CUDA_ENTRY(vtr_cuda_linear_forward,
               (float *out, const float *inp, const float *weight, const float *bias, int N, int C,
                int OC, vtr_error *err),
               (out, inp, weight, bias, N, C, OC, err))

VTR_CUDA_ENTRY(vtr_cuda_malloc, (void **ptr, size_t bytes, vtr_error *err), (ptr, bytes, err))

VTR_CUDA_ENTRY(vtr_cuda_masked_softmax_backward,
               (float *dinp, const float *dout, const float *out, const int *lengths, int B, int T,
                float temperature, vtr_error *err),
               (dinp, dout, out, lengths, B, T, temperature, err))

VTR_CUDA_ENTRY(vtr_cuda_masked_softmax_forward,
               (float *out, const float *inp, const int *lengths, int B, int T, float temperature,
                vtr_error *err),
               (out, inp, lengths, B, T, temperature, err))

VTR_CUDA_ENTRY(vtr_cuda_matmul,
               (const float *a, const float *b, float *c, int m, int n, int k, vtr_error *err),
               (a, b, c, m, n, k, err))

VTR_CUDA_ENTRY(vtr_cuda_nccl_gather_rows,
               (vtr_nccl * c, void *buf, size_t row_bytes, int64_t total, vtr_error *err),
               (c, buf, row_bytes, total, err))

VTR_CUDA_ENTRY(vtr_cuda_nccl_id, (char *id, vtr_error *err), (id, err))

VTR_CUDA_ENTRY(vtr_cuda_nccl_init,
               (vtr_nccl * *out, const char *id, int rank, int size, vtr_error *err),
               (out, id, rank, size, err))

VTR_CUDA_ENTRY(vtr_cuda_nccl_load, (char *name, size_t name_size, vtr_error *err),
               (name, name_size, err))

VTR_CUDA_ENTRY(vtr_cuda_nccl_sum, (vtr_nccl * c, float *buf, size_t n, vtr_error *err),
               (c, buf, n, err))

VTR_CUDA_FREE_ENTRY(vtr_cuda_nccl_free, vtr_nccl)

VTR_CUDA_ENTRY(vtr_cuda_optimizer_step,
               (vtr_optimizer *opt, const vtr_param_set *ps, float *data, const float *grad,
                float *exp_avg, float *exp_avg_sq, double lr, const float *grad_scale,
                vtr_error *err),
               (opt, ps, data, grad, exp_avg, exp_avg_sq, lr, grad_scale, err))

VTR_CUDA_ENTRY(vtr_cuda_pack_rows,
               (float *packed, const float *padded, const int *lengths, int B, int T, int D,
                vtr_error *err),
               (packed, padded, lengths, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_relu_backward,
               (float *dinp, const float *dout, const float *inp, size_t n, vtr_error *err),
               (dinp, dout, inp, n, err))

VTR_CUDA_ENTRY(vtr_cuda_relu_forward, (float *out, const float *inp, size_t n, vtr_error *err),
               (out, inp, n, err))

VTR_CUDA_ENTRY(vtr_cuda_set_precision, (vtr_precision p, vtr_error *err), (p, err))

VTR_CUDA_ENTRY(vtr_cuda_sigmoid_backward,
               (float *dinp, const float *dout, const float *out, size_t n, vtr_error *err),
               (dinp, dout, out, n, err))

VTR_CUDA_ENTRY(vtr_cuda_sigmoid_forward, (float *out, const float *inp, size_t n, vtr_error *err),
               (out, inp, n, err))

VTR_CUDA_ENTRY(vtr_cuda_stage_host, (vtr_cuda_stage * s, int k, void **host, vtr_error *err),
               (s, k, host, err))

VTR_CUDA_ENTRY(vtr_cuda_stage_new,
               (vtr_cuda_stage * *out, int n_slots, size_t bytes, vtr_error *err),
               (out, n_slots, bytes, err))

VTR_CUDA_FREE_ENTRY(vtr_cuda_stage_free, vtr_cuda_stage)

VTR_CUDA_ENTRY(vtr_cuda_stage_release, (vtr_cuda_stage * s, int k, vtr_status st, vtr_error *err),
               (s, k, st, err))

VTR_CUDA_ENTRY(vtr_cuda_stage_take, (vtr_cuda_stage * s, int k, void **dev, vtr_error *err),
               (s, k, dev, err))

VTR_CUDA_ENTRY(vtr_cuda_stage_upload, (vtr_cuda_stage * s, int k, size_t bytes, vtr_error *err),
               (s, k, bytes, err))

VTR_CUDA_ENTRY(vtr_cuda_sync_batchnorm_dinput,
               (float *dinp, const float *dout, const float *inp, const float *weight,
                const float *mean, const float *rstd, const double *sdy, const double *sdyx,
                int64_t N_global, int N, int C, vtr_error *err),
               (dinp, dout, inp, weight, mean, rstd, sdy, sdyx, N_global, N, C, err))

VTR_CUDA_ENTRY(vtr_cuda_tanh_backward,
               (float *dinp, const float *dout, const float *out, size_t n, vtr_error *err),
               (dinp, dout, out, n, err))

VTR_CUDA_ENTRY(vtr_cuda_tanh_forward, (float *out, const float *inp, size_t n, vtr_error *err),
               (out, inp, n, err))

VTR_CUDA_ENTRY(vtr_cuda_to_device, (void *dst, const void *src, size_t bytes, vtr_error *err),
               (dst, src, bytes, err))

VTR_CUDA_ENTRY(vtr_cuda_to_host, (void *dst, const void *src, size_t bytes, vtr_error *err),
               (dst, src, bytes, err))

VTR_CUDA_ENTRY(vtr_cuda_unpack_rows,
               (float *padded, const float *packed, const int *lengths, int B, int T, int D,
                vtr_error *err),
               (padded, packed, lengths, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_uniform,
               (float *out, size_t n, uint64_t seed, uint64_t stream, vtr_error *err),
               (out, n, seed, stream, err))

VTR_CUDA_ENTRY(vtr_cuda_zero, (void *ptr, size_t bytes, vtr_error *err), (ptr, bytes, err))
