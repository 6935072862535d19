// cuDNN's RNN as a second GPU engine of lib/gru.h's GRU (declared in lib/nn_cuda.h), to time
// against vtr's own kernels (lib/gru.cu): tests/gpu/op_timing.c runs both at the MSR-VTT
// config's sizes. cudnnRNNForward runs both directions of every step in its own kernels;
// cudnnRNNBackwardData_v8 and cudnnRNNBackwardWeights_v8 the backward. Launch and memory glue
// only; the math is cuDNN's (its GRU is PyTorch's: gates r, z, n, two biases).
//
// Around cuDNN: the parameters are copied into cuDNN's weight space before each forward and
// the gradients added back out of its own after each backward, matrix by matrix at the
// places cudnnGetRNNWeightParams gives (asked once, when the engine is made); the output of both
// directions, concatenated, is kept for backward and averaged into out (VTR_GRU_AVERAGE); padded
// positions are cuDNN's padding (RNN_PADDED_IO, filled with zeros). Strict float32
// (CUDNN_FMA_MATH).
#include <cudnn.h>

#include "lib/cuda_launch.h"
#include "lib/gru.h"
#include "lib/nn_cuda.h"

struct vtr_cudnn_gru {
    int D, H, dirs;
    cudnnHandle_t handle;
    cudnnDropoutDescriptor_t dropout; // none (probability 0): cuDNN's RNN descriptor wants one
    void *dropout_states;
    cudnnRNNDescriptor_t rnn;
    cudnnRNNDataDescriptor_t x_desc, y_desc; // the last forward's shape and lengths
    cudnnTensorDescriptor_t h_desc;          // the initial state (zero: not given)
    size_t weight_bytes;
    void *weights, *dweights; // the weight space and its gradients, one layout
    // each matrix and bias: its place in the weight space and in lib/gru.h's parameter buffer
    // (floats), and its floats
    struct {
        size_t space, params, count;
    } spans[2 * 6 * 2];
    int n_spans;
    int B, T; // the last forward's shape
    // grown to the largest shape so far (bytes)
    void *y, *dy, *dx, *work, *reserve;
    size_t y_cap, dy_cap, dx_cap, work_cap, reserve_cap;
    size_t work_bytes, reserve_bytes; // of the last forward's shape
};

static vtr_status cudnn_check(cudnnStatus_t s, const char *what, vtr_error *err)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return VTR_OK;
    return vtr_fail(err, VTR_ERR_DEVICE, "cuDNN GRU %s: %s", what, cudnnGetErrorString(s));
}

// *p holds at least bytes (device), its contents lost when it grows
static vtr_status grow(void **p, size_t *cap, size_t bytes, vtr_error *err)
{
    if (bytes <= *cap)
        return VTR_OK;
    vtr_cuda_free(*p);
    *p = NULL;
    *cap = 0;
    VTR_TRY(vtr_cuda_malloc(p, bytes, err));
    *cap = bytes;
    return VTR_OK;
}

extern "C" void vtr_cudnn_gru_free(vtr_cudnn_gru *g)
{
    if (!g)
        return;
    if (g->rnn)
        cudnnDestroyRNNDescriptor(g->rnn);
    if (g->dropout)
        cudnnDestroyDropoutDescriptor(g->dropout);
    if (g->x_desc)
        cudnnDestroyRNNDataDescriptor(g->x_desc);
    if (g->y_desc)
        cudnnDestroyRNNDataDescriptor(g->y_desc);
    if (g->h_desc)
        cudnnDestroyTensorDescriptor(g->h_desc);
    void *buffers[] = {g->dropout_states, g->weights, g->dweights, g->y, g->dy, g->dx,
                       g->work,           g->reserve};
    for (void *b : buffers)
        vtr_cuda_free(b);
    if (g->handle)
        cudnnDestroy(g->handle);
    free(g);
}

// g->spans, from cudnnGetRNNWeightParams. cuDNN's linear layers 0-2 are the input weights of
// gates r, z, n, 3-5 the recurrent ones, PyTorch's row order within each.
static vtr_status find_spans(vtr_cudnn_gru *g, vtr_error *err)
{
    int D = g->D, H = g->H;
    cudnnTensorDescriptor_t m_desc = NULL, b_desc = NULL; // filled by the call, unused here
    vtr_status st = cudnn_check(cudnnCreateTensorDescriptor(&m_desc), "weights", err);
    if (st == VTR_OK)
        st = cudnn_check(cudnnCreateTensorDescriptor(&b_desc), "weights", err);
    for (int dir = 0; st == VTR_OK && dir < g->dirs; dir++)
        for (int lin = 0; st == VTR_OK && lin < 6; lin++) {
            void *m = NULL, *b = NULL;
            st = cudnn_check(cudnnGetRNNWeightParams(g->handle, g->rnn, dir, g->weight_bytes,
                                                     g->weights, lin, m_desc, &m, b_desc, &b),
                             "weight params", err);
            bool input = lin < 3;
            int gate = lin % 3, cols = input ? D : H;
            size_t w =
                vtr_gru_param_offset(D, H, dir, input ? VTR_GRU_WEIGHT_IH : VTR_GRU_WEIGHT_HH);
            size_t bias =
                vtr_gru_param_offset(D, H, dir, input ? VTR_GRU_BIAS_IH : VTR_GRU_BIAS_HH);
            const float *base = (const float *)g->weights;
            g->spans[g->n_spans++] = {(size_t)((const float *)m - base),
                                      w + (size_t)gate * H * cols, (size_t)H * cols};
            g->spans[g->n_spans++] = {(size_t)((const float *)b - base), bias + (size_t)gate * H,
                                      (size_t)H};
        }
    if (m_desc)
        cudnnDestroyTensorDescriptor(m_desc);
    if (b_desc)
        cudnnDestroyTensorDescriptor(b_desc);
    return st;
}

extern "C" vtr_status vtr_cudnn_gru_new(int D, int H, int num_directions, vtr_cudnn_gru **out,
                                        vtr_error *err)
{
    vtr_status st = VTR_OK;
    *out = NULL;
    if (D < 1 || H < 1 || (num_directions != 1 && num_directions != 2))
        return vtr_fail(err, VTR_ERR_INVALID, "cuDNN GRU: input %d, hidden %d, %d directions", D, H,
                        num_directions);
    vtr_cudnn_gru *g = (vtr_cudnn_gru *)calloc(1, sizeof *g);
    if (!g)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    g->D = D, g->H = H, g->dirs = num_directions;
    size_t state_bytes = 0;
    if ((st = cudnn_check(cudnnCreate(&g->handle), "handle", err)) != VTR_OK ||
        (st = cudnn_check(cudnnCreateDropoutDescriptor(&g->dropout), "dropout", err)) != VTR_OK ||
        (st = cudnn_check(cudnnDropoutGetStatesSize(g->handle, &state_bytes), "dropout", err)) !=
            VTR_OK ||
        (st = vtr_cuda_malloc(&g->dropout_states, state_bytes ? state_bytes : 1, err)) != VTR_OK ||
        (st = cudnn_check(cudnnSetDropoutDescriptor(g->dropout, g->handle, 0.0f, g->dropout_states,
                                                    state_bytes, 0),
                          "dropout", err)) != VTR_OK ||
        (st = cudnn_check(cudnnCreateRNNDescriptor(&g->rnn), "descriptor", err)) != VTR_OK ||
        (st = cudnn_check(cudnnSetRNNDescriptor_v8(
                              g->rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_GRU, CUDNN_RNN_DOUBLE_BIAS,
                              num_directions == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL,
                              CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                              CUDNN_FMA_MATH, D, H, H, 1, g->dropout, CUDNN_RNN_PADDED_IO_ENABLED),
                          "descriptor", err)) != VTR_OK ||
        (st = cudnn_check(cudnnCreateRNNDataDescriptor(&g->x_desc), "data", err)) != VTR_OK ||
        (st = cudnn_check(cudnnCreateRNNDataDescriptor(&g->y_desc), "data", err)) != VTR_OK ||
        (st = cudnn_check(cudnnCreateTensorDescriptor(&g->h_desc), "state", err)) != VTR_OK ||
        (st = cudnn_check(cudnnGetRNNWeightSpaceSize(g->handle, g->rnn, &g->weight_bytes),
                          "weight space", err)) != VTR_OK ||
        (st = vtr_cuda_malloc(&g->weights, g->weight_bytes, err)) != VTR_OK ||
        (st = vtr_cuda_malloc(&g->dweights, g->weight_bytes, err)) != VTR_OK ||
        (st = find_spans(g, err)) != VTR_OK) {
        vtr_cudnn_gru_free(g);
        return st;
    }
    *out = g;
    return VTR_OK;
}

// out (rows, H) = the two directions of y (rows, 2H) averaged
__global__ static void average_kernel(float *out, const float *y, size_t rows, int H)
{
    size_t total = rows * H;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t r = i / H, j = i % H;
        out[i] = (y[r * 2 * H + j] + y[r * 2 * H + H + j]) * 0.5f;
    }
}

// dy (B*T, width) from dout (B*T, OH): each direction's share of it (half when averaged), zero
// at padded positions
__global__ static void split_kernel(float *dy, const float *dout, const int *lengths, int B, int T,
                                    int H, int width, int average)
{
    size_t total = (size_t)B * T * width;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t r = i / width, k = i % width;
        int t = (int)(r % T), b = (int)(r / T);
        float v = 0.0f;
        if (t < lengths[b])
            v = average ? 0.5f * dout[r * H + k % H] : dout[r * width + k];
        dy[i] = v;
    }
}

extern "C" vtr_status vtr_cudnn_gru_forward(vtr_cudnn_gru *g, float *out, const float *inp,
                                            const int *lengths, const int *dev_lengths,
                                            const float *params, int B, int T, vtr_gru_merge merge,
                                            vtr_error *err)
{
    int D = g->D, H = g->H, width = g->dirs * H;
    if (B < 1 || T < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "cuDNN GRU: batch %d of %d steps", B, T);
    for (int b = 0; b < B; b++)
        if (lengths[b] < 1 || lengths[b] > T)
            return vtr_fail(err, VTR_ERR_INVALID, "cuDNN GRU: item %d has length %d of %d", b,
                            lengths[b], T);
    float fill = 0.0f;
    int dims[3] = {g->dirs, B, H}, strides[3] = {B * H, H, 1};
    size_t rows = (size_t)B * T;
    VTR_TRY(cudnn_check(cudnnSetRNNDataDescriptor(g->x_desc, CUDNN_DATA_FLOAT,
                                                  CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T, B,
                                                  D, lengths, &fill),
                        "input", err));
    VTR_TRY(cudnn_check(cudnnSetRNNDataDescriptor(g->y_desc, CUDNN_DATA_FLOAT,
                                                  CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T, B,
                                                  width, lengths, &fill),
                        "output", err));
    VTR_TRY(cudnn_check(cudnnSetTensorNdDescriptor(g->h_desc, CUDNN_DATA_FLOAT, 3, dims, strides),
                        "state", err));
    VTR_TRY(cudnn_check(cudnnGetRNNTempSpaceSizes(g->handle, g->rnn, CUDNN_FWD_MODE_TRAINING,
                                                  g->x_desc, &g->work_bytes, &g->reserve_bytes),
                        "temporary space", err));
    VTR_TRY(grow(&g->work, &g->work_cap, g->work_bytes, err));
    VTR_TRY(grow(&g->reserve, &g->reserve_cap, g->reserve_bytes, err));
    VTR_TRY(grow(&g->y, &g->y_cap, rows * width * sizeof(float), err));
    g->B = B, g->T = T;
    for (int i = 0; i < g->n_spans; i++)
        VTR_TRY(vtr_cuda_copy((float *)g->weights + g->spans[i].space, params + g->spans[i].params,
                              g->spans[i].count * sizeof(float), err));
    VTR_TRY(cudnn_check(cudnnRNNForward(g->handle, g->rnn, CUDNN_FWD_MODE_TRAINING, dev_lengths,
                                        g->x_desc, inp, g->y_desc, g->y, g->h_desc, NULL, NULL,
                                        NULL, NULL, NULL, g->weight_bytes, g->weights,
                                        g->work_bytes, g->work, g->reserve_bytes, g->reserve),
                        "forward", err));
    if (g->dirs == 1 || merge == VTR_GRU_CONCAT)
        return vtr_cuda_copy(out, g->y, rows * width * sizeof(float), err);
    average_kernel<<<vtr_cuda_blocks(rows * H), VTR_CUDA_THREADS>>>(out, (const float *)g->y, rows,
                                                                    H);
    return vtr_cuda_launched("cuDNN GRU output", err);
}

extern "C" vtr_status vtr_cudnn_gru_backward(vtr_cudnn_gru *g, float *dinp, float *dparams,
                                             const float *dout, const float *inp,
                                             const int *dev_lengths, int B, int T,
                                             vtr_gru_merge merge, vtr_error *err)
{
    int H = g->H, width = g->dirs * H;
    if (B != g->B || T != g->T)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "cuDNN GRU: backward of (%d, %d) after a forward of (%d, %d)", B, T, g->B,
                        g->T);
    size_t rows = (size_t)B * T, dx_bytes = rows * g->D * sizeof(float);
    VTR_TRY(grow(&g->dy, &g->dy_cap, rows * width * sizeof(float), err));
    VTR_TRY(grow(&g->dx, &g->dx_cap, dx_bytes, err));
    int average = g->dirs == 2 && merge == VTR_GRU_AVERAGE;
    split_kernel<<<vtr_cuda_blocks(rows * width), VTR_CUDA_THREADS>>>(
        (float *)g->dy, dout, dev_lengths, B, T, H, width, average);
    VTR_TRY(vtr_cuda_launched("cuDNN GRU output gradient", err));
    VTR_TRY(vtr_cuda_zero(g->dx, dx_bytes, err));
    VTR_TRY(vtr_cuda_zero(g->dweights, g->weight_bytes, err));
    // the data's gradients first: they leave in the reserve space what the weights' read
    VTR_TRY(
        cudnn_check(cudnnRNNBackwardData_v8(g->handle, g->rnn, dev_lengths, g->y_desc, g->y, g->dy,
                                            g->x_desc, g->dx, g->h_desc, NULL, NULL, NULL, NULL,
                                            NULL, NULL, NULL, g->weight_bytes, g->weights,
                                            g->work_bytes, g->work, g->reserve_bytes, g->reserve),
                    "backward data", err));
    VTR_TRY(cudnn_check(cudnnRNNBackwardWeights_v8(
                            g->handle, g->rnn, CUDNN_WGRAD_MODE_ADD, dev_lengths, g->x_desc, inp,
                            g->h_desc, NULL, g->y_desc, g->y, g->weight_bytes, g->dweights,
                            g->work_bytes, g->work, g->reserve_bytes, g->reserve),
                        "backward weights", err));
    if (dinp)
        VTR_TRY(vtr_cuda_add(dinp, (const float *)g->dx, rows * g->D, err));
    for (int i = 0; i < g->n_spans; i++)
        VTR_TRY(vtr_cuda_add(dparams + g->spans[i].params,
                             (const float *)g->dweights + g->spans[i].space, g->spans[i].count,
                             err));
    return VTR_OK;
}
