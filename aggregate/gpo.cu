// CUDA side of aggregate/gpo.h: the CPU's steps with the CUDA ops (GRU, linear, masked
// softmax), and kernels for the encodings, the per-dimension sort and the weighted sum,
// one thread per (item, dimension) or (item, rank), running the CPU's VTR_HD functions
// (the same ranks and ties, the same sums in the same order).
#include "aggregate/gpo.h"
#include "aggregate/set_pooling.h"
#include "lib/cuda_launch.h"
#include "lib/gru.h"
#include "lib/nn_cuda.h"

// The regions of the CPU's workspace (aggregate/gpo.c), for vtr_gpo_workspace_size.
struct gpo_workspace {
    float *pe;       // (B,T,d_pe): the GRU's input, zero at padded positions
    float *gru_out;  // (B,T,hidden): directions averaged
    int *sort_index; // (B,T,D): element at rank k of each dimension, -1 past len
    void *gru;       // the GRU's workspace
};

static gpo_workspace gpo_workspace_of(void *workspace, int B, int T, int D, int d_pe, int hidden)
{
    size_t bt = (size_t)B * T;
    char *ws = (char *)workspace;
    size_t gru_out = vtr_workspace_align(sizeof(float) * bt * d_pe);
    size_t sort_index = gru_out + vtr_workspace_align(sizeof(float) * bt * hidden);
    size_t gru = sort_index + vtr_workspace_align(sizeof(int) * bt * D);
    gpo_workspace l = {(float *)ws, (float *)(ws + gru_out), (int *)(ws + sort_index),
                       (void *)(ws + gru)};
    return l;
}

// The regions of the CPU's scratch (aggregate/gpo.c), for vtr_gpo_scratch_size.
struct gpo_scratch {
    float *dgru_out; // (B,T,hidden)
    float *dweights; // (B,T)
    float *dscores;  // (B,T)
    void *gru;       // the GRU's scratch
};

static gpo_scratch gpo_scratch_of(void *scratch, int B, int T, int hidden)
{
    size_t bt = (size_t)B * T;
    char *sc = (char *)scratch;
    size_t dweights = vtr_workspace_align(sizeof(float) * bt * hidden);
    size_t dscores = dweights + vtr_workspace_align(sizeof(float) * bt);
    size_t gru = dscores + vtr_workspace_align(sizeof(float) * bt);
    gpo_scratch l = {(float *)sc, (float *)(sc + dweights), (float *)(sc + dscores),
                     (void *)(sc + gru)};
    return l;
}

// pe (B,T,d_pe): the encoding of position t at real positions, zero elsewhere
__global__ static void gpo_encoding_kernel(float *pe, const int *lengths, int B, int T, int d_pe)
{
    size_t total = (size_t)B * T * d_pe;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / ((size_t)T * d_pe);
        int t = (int)(e / (size_t)d_pe % (size_t)T), i = (int)(e % (size_t)d_pe);
        pe[e] = t < lengths[b] ? vtr_gpo_positional_encoding_at(t, i, d_pe) : 0.0f;
    }
}

// Steps 4-5 for one (b, d) per thread: sort dimension d of item b (ranks past len -1),
// then out[b,d] = sum_k weights[b,k] sorted[k,d]
__global__ static void gpo_pool_kernel(float *out, int *sort_index, const float *inp,
                                       const float *weights, const int *lengths, int B, int T,
                                       int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)D;
        int d = (int)(e % (size_t)D), len = lengths[b];
        const float *x = inp + b * T * D;
        int *idx = sort_index + b * T * D;
        vtr_set_sort_desc_columns(idx, x, len, D, len, d, 1);
        for (int k = len; k < T; k++)
            idx[(size_t)k * D + d] = -1;
        vtr_gpo_pool_columns(out + b * D, x, weights + b * T, idx, len, D, d, d + 1);
    }
}

// dweights (B,T), one (b, k) per thread; zero past the item's length
__global__ static void gpo_dweights_kernel(float *dweights, const float *dout, const float *inp,
                                           const int *sort_index, const int *lengths, int B, int T,
                                           int D)
{
    size_t total = (size_t)B * T;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)T;
        int k = (int)(e % (size_t)T);
        dweights[e] = k < lengths[b] ? vtr_gpo_dweight_at(inp + b * T * D, dout + b * D,
                                                          sort_index + b * T * D, D, k)
                                     : 0.0f;
    }
}

// dinp (B,T,D) += through the sort, one (b, d) per thread: a dimension's ranks are distinct
// elements, and threads differ in d
__global__ static void gpo_dinp_kernel(float *dinp, const float *dout, const float *weights,
                                       const int *sort_index, const int *lengths, int B, int T,
                                       int D)
{
    size_t total = (size_t)B * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)D;
        int d = (int)(e % (size_t)D);
        vtr_gpo_dinp_columns(dinp + b * T * D, weights + b * T, dout + b * D,
                             sort_index + b * T * D, lengths[b], D, d, d + 1);
    }
}

extern "C" vtr_status vtr_cuda_gpo_forward(float *out, float *weights, void *workspace,
                                           const float *inp, const int *lengths,
                                           const float *params, int B, int T, int D, int d_pe,
                                           int hidden, vtr_error *err)
{
    gpo_workspace ws = gpo_workspace_of(workspace, B, T, D, d_pe, hidden);
    int bt = B * T;

    // 1. positional encodings of the real positions, zero elsewhere
    gpo_encoding_kernel<<<vtr_cuda_blocks((size_t)bt * d_pe), VTR_CUDA_THREADS>>>(ws.pe, lengths, B,
                                                                                  T, d_pe);
    VTR_TRY(vtr_cuda_launched("GPO positional encoding", err));
    // 2-3. BiGRU (averaged) -> linear -> masked softmax with temperature
    VTR_TRY(vtr_cuda_gru_forward(ws.gru_out, ws.gru, ws.pe, lengths, params, B, T, d_pe, hidden, 2,
                                 VTR_GRU_AVERAGE, err));
    VTR_TRY(vtr_cuda_linear_forward(weights, ws.gru_out,
                                    params + vtr_gpo_linear_offset(d_pe, hidden), NULL, bt, hidden,
                                    1, err));
    VTR_TRY(
        vtr_cuda_masked_softmax_forward(weights, weights, lengths, B, T, VTR_GPO_TEMPERATURE, err));
    // 4-5. per-dimension descending sort, weighted sum
    gpo_pool_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(
        out, ws.sort_index, inp, weights, lengths, B, T, D);
    return vtr_cuda_launched("GPO pooling", err);
}

extern "C" vtr_status vtr_cuda_gpo_backward(float *dinp, float *dparams, void *scratch,
                                            const float *dout, const float *inp,
                                            const float *weights, const int *lengths,
                                            const float *params, const void *workspace, int B,
                                            int T, int D, int d_pe, int hidden, vtr_error *err)
{
    gpo_workspace ws = gpo_workspace_of((void *)workspace, B, T, D, d_pe, hidden);
    gpo_scratch sc = gpo_scratch_of(scratch, B, T, hidden);
    int bt = B * T;

    // weighted sum and sort: dweights[b,k] = sum_d dout[b,d] sorted[b,k,d];
    // dinp[b, index[b,k,d], d] += weights[b,k] dout[b,d]
    gpo_dweights_kernel<<<vtr_cuda_blocks((size_t)bt), VTR_CUDA_THREADS>>>(
        sc.dweights, dout, inp, ws.sort_index, lengths, B, T, D);
    VTR_TRY(vtr_cuda_launched("GPO weight gradient", err));
    if (dinp) {
        gpo_dinp_kernel<<<vtr_cuda_blocks((size_t)B * D), VTR_CUDA_THREADS>>>(
            dinp, dout, weights, ws.sort_index, lengths, B, T, D);
        VTR_TRY(vtr_cuda_launched("GPO input gradient", err));
    }

    // softmax -> linear -> GRU (its input, the encodings, wants no gradient)
    VTR_TRY(vtr_cuda_zero(sc.dscores, sizeof(float) * (size_t)bt, err));
    VTR_TRY(vtr_cuda_masked_softmax_backward(sc.dscores, sc.dweights, weights, lengths, B, T,
                                             VTR_GPO_TEMPERATURE, err));
    VTR_TRY(vtr_cuda_zero(sc.dgru_out, sizeof(float) * (size_t)bt * hidden, err));
    size_t lin = vtr_gpo_linear_offset(d_pe, hidden);
    VTR_TRY(vtr_cuda_linear_backward(sc.dgru_out, dparams + lin, NULL, sc.dscores, ws.gru_out,
                                     params + lin, bt, hidden, 1, err));
    return vtr_cuda_gru_backward(NULL, dparams, sc.gru, sc.dgru_out, ws.pe, lengths, params, ws.gru,
                                 B, T, d_pe, hidden, 2, VTR_GRU_AVERAGE, err);
}
