/* The entries of the poolers (aggregate/adpool.h, aggregate/gpo.h, aggregate/set_pooling.h,
 * aggregate/span_pool.h) and of the set prediction module (aggregate/set_prediction.h): each
 * loads the CUDA backend on first use and calls its function of the same name
 * (lib/cuda_loader.h). */
#include "aggregate/adpool.h"
#include "aggregate/gpo.h"
#include "aggregate/set_pooling.h"
#include "aggregate/set_prediction.h"
#include "aggregate/span_pool.h"
#include "lib/cuda_loader.h"

VTR_CUDA_ENTRY(vtr_cuda_adpool_backward,
               (float *dinp, float *dparams, void *scratch, const float *dout, const float *inp,
                const float *theta, const float *omega, const int *lengths, const float *params,
                const void *workspace, int B, int T, int D, vtr_error *err),
               (dinp, dparams, scratch, dout, inp, theta, omega, lengths, params, workspace, B, T,
                D, err))

VTR_CUDA_ENTRY(vtr_cuda_adpool_forward,
               (float *out, float *theta, float *omega, void *workspace, const float *inp,
                const int *lengths, const float *params, int B, int T, int D, vtr_error *err),
               (out, theta, omega, workspace, inp, lengths, params, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_attention_pool_backward,
               (float *dinp, float *dscore_weight, float *dscore_bias, const float *dout,
                const float *inp, const float *weights, const float *score_weight,
                const int *lengths, int B, int T, int D, vtr_error *err),
               (dinp, dscore_weight, dscore_bias, dout, inp, weights, score_weight, lengths, B, T,
                D, err))

VTR_CUDA_ENTRY(vtr_cuda_attention_pool_forward,
               (float *out, float *weights, const float *inp, const float *score_weight,
                const float *score_bias, const int *lengths, int B, int T, int D, vtr_error *err),
               (out, weights, inp, score_weight, score_bias, lengths, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_gpo_backward,
               (float *dinp, float *dparams, void *scratch, const float *dout, const float *inp,
                const float *weights, const int *lengths, const float *params,
                const void *workspace, int B, int T, int D, int d_pe, int hidden, vtr_error *err),
               (dinp, dparams, scratch, dout, inp, weights, lengths, params, workspace, B, T, D,
                d_pe, hidden, err))

VTR_CUDA_ENTRY(vtr_cuda_gpo_forward,
               (float *out, float *weights, void *workspace, const float *inp, const int *lengths,
                const float *params, int B, int T, int D, int d_pe, int hidden, vtr_error *err),
               (out, weights, workspace, inp, lengths, params, B, T, D, d_pe, hidden, err))

VTR_CUDA_ENTRY(vtr_cuda_kmax_pool_backward,
               (float *dinp, const float *dout, const int *index, const int *lengths, int B, int T,
                int D, int K, vtr_error *err),
               (dinp, dout, index, lengths, B, T, D, K, err))

VTR_CUDA_ENTRY(vtr_cuda_kmax_pool_forward,
               (float *out, int *index, const float *inp, const int *lengths, int B, int T, int D,
                int K, vtr_error *err),
               (out, index, inp, lengths, B, T, D, K, err))

VTR_CUDA_ENTRY(vtr_cuda_max_pool_backward,
               (float *dinp, const float *dout, const int *argmax, int B, int T, int D,
                vtr_error *err),
               (dinp, dout, argmax, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_max_pool_forward,
               (float *out, int *argmax, const float *inp, const int *lengths, int B, int T, int D,
                vtr_error *err),
               (out, argmax, inp, lengths, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_mean_pool_backward,
               (float *dinp, const float *dout, const int *lengths, int B, int T, int D,
                vtr_error *err),
               (dinp, dout, lengths, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_mean_pool_forward,
               (float *out, const float *inp, const int *lengths, int B, int T, int D,
                vtr_error *err),
               (out, inp, lengths, B, T, D, err))

VTR_CUDA_ENTRY(vtr_cuda_set_prediction_forward,
               (float *set, float *slots_n, void *workspace, const float *inp, const int *lengths,
                const float *glob, const float *params, const vtr_set_prediction_config *c, int B,
                int N, float p, uint64_t seed, uint64_t stream, int64_t first, vtr_error *err),
               (set, slots_n, workspace, inp, lengths, glob, params, c, B, N, p, seed, stream,
                first, err))

VTR_CUDA_ENTRY(vtr_cuda_set_prediction_backward,
               (float *dinp, float *dglob, float *dparams, void *scratch, const float *dset,
                const float *dslots_n, const void *workspace, const float *inp, const int *lengths,
                const float *glob, const float *params, const vtr_set_prediction_config *c, int B,
                int N, float p, uint64_t seed, uint64_t stream, int64_t first, vtr_error *err),
               (dinp, dglob, dparams, scratch, dset, dslots_n, workspace, inp, lengths, glob,
                params, c, B, N, p, seed, stream, first, err))

VTR_CUDA_ENTRY(vtr_cuda_role_span_pool_backward,
               (float *dinp, float *drole_table, void *scratch, const float *dout, const float *inp,
                const int *argmax, const int *roles, const float *role_table, int B, int N, int L,
                int D, vtr_error *err),
               (dinp, drole_table, scratch, dout, inp, argmax, roles, role_table, B, N, L, D, err))

VTR_CUDA_ENTRY(vtr_cuda_role_span_pool_forward,
               (float *out, int *argmax, const float *inp, const uint8_t *masks, const int *roles,
                const float *role_table, int B, int N, int L, int D, vtr_error *err),
               (out, argmax, inp, masks, roles, role_table, B, N, L, D, err))
