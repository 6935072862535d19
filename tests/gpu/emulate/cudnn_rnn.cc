// tests/gpu/emulate/cudnn_rnn.cc: cuDNN's RNN calls for the CPU emulation (include/cudnn.h),
// as lib/gru_cudnn.cu makes them: a GRU of one layer, one or two directions, float32, padded
// batch-major data (RNN_PADDED_IO), no initial state.
//
// The GRU is cuDNN's documented cell, computed here from its equations:
//   r = sigmoid(W_r x + b_Wr + R_r h + b_Rr), z = sigmoid(W_z x + b_Wz + R_z h + b_Rz),
//   n = tanh(W_n x + b_Wn + r (R_n h + b_Rn)), h' = (1 - z) n + z h,
// the reverse direction running each sequence from its own last step. Forward keeps each
// step's gates in the reserve space, backward-data adds the gates' gradients there, and
// backward-weights reads them, so the calls must come in cuDNN's order. Checked as cuDNN
// checks them: the descriptors' sizes against the RNN's, the device lengths against the data
// descriptors' (cuDNN reads both), the workspace and reserve sizes; every tensor inside one
// device allocation. The weight space is laid out differently from PyTorch's (biases first),
// so its users must take the addresses cudnnGetRNNWeightParams gives; the workspace is
// written with NaN bytes at each call.
#include "emulation.h"

#include <math.h>
#include <vector>

#include "cudnn.h"

struct emu_cudnn_dropout {
    bool set;
};
struct emu_cudnn_rnn {
    bool set;
    int dirs, D, H;
};
struct emu_cudnn_rnn_data {
    bool set;
    int T, B, vec;
    std::vector<int> lengths;
    float fill;
};

EMU_CUDNN_DESCRIPTOR_CALLS(DropoutDescriptor, cudnnDropoutDescriptor_t)

static const size_t dropout_state_bytes = 64;

cudnnStatus_t cudnnDropoutGetStatesSize(cudnnHandle_t handle, size_t *bytes)
{
    *bytes = dropout_state_bytes;
    return handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_INITIALIZED;
}

cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t d, cudnnHandle_t handle,
                                        float dropout, void *states, size_t state_bytes,
                                        unsigned long long seed)
{
    if (!handle)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (dropout != 0.0f) // the emulation has no dropout
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (state_bytes < dropout_state_bytes)
        return CUDNN_STATUS_BAD_PARAM;
    emu_check_device(states, state_bytes, "cudnnSetDropoutDescriptor's states");
    d->set = true;
    return CUDNN_STATUS_SUCCESS;
}

EMU_CUDNN_DESCRIPTOR_CALLS(RNNDescriptor, cudnnRNNDescriptor_t)

cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t d, cudnnRNNAlgo_t algo,
                                       cudnnRNNMode_t cell, cudnnRNNBiasMode_t bias,
                                       cudnnDirectionMode_t dir, cudnnRNNInputMode_t input,
                                       cudnnDataType_t type, cudnnDataType_t math_prec,
                                       cudnnMathType_t math, int input_size, int hidden_size,
                                       int proj_size, int layers, cudnnDropoutDescriptor_t dropout,
                                       unsigned aux_flags)
{
    if (algo != CUDNN_RNN_ALGO_STANDARD || cell != CUDNN_GRU || bias != CUDNN_RNN_DOUBLE_BIAS ||
        input != CUDNN_LINEAR_INPUT || type != CUDNN_DATA_FLOAT || math_prec != CUDNN_DATA_FLOAT ||
        layers != 1 || aux_flags != CUDNN_RNN_PADDED_IO_ENABLED)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if ((dir != CUDNN_UNIDIRECTIONAL && dir != CUDNN_BIDIRECTIONAL) || input_size < 1 ||
        hidden_size < 1 || proj_size != hidden_size || !dropout || !dropout->set)
        return CUDNN_STATUS_BAD_PARAM;
    *d = emu_cudnn_rnn{true, dir == CUDNN_BIDIRECTIONAL ? 2 : 1, input_size, hidden_size};
    return CUDNN_STATUS_SUCCESS;
}

EMU_CUDNN_DESCRIPTOR_CALLS(RNNDataDescriptor, cudnnRNNDataDescriptor_t)

cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t d, cudnnDataType_t type,
                                        cudnnRNNDataLayout_t layout, int max_length, int batch,
                                        int vector_size, const int lengths[], void *padding_fill)
{
    if (type != CUDNN_DATA_FLOAT || layout != CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (max_length < 1 || batch < 1 || vector_size < 1 || !lengths)
        return CUDNN_STATUS_BAD_PARAM;
    for (int b = 0; b < batch; b++)
        if (lengths[b] < 1 || lengths[b] > max_length)
            return CUDNN_STATUS_BAD_PARAM;
    d->set = true;
    d->T = max_length, d->B = batch, d->vec = vector_size;
    d->lengths.assign(lengths, lengths + batch);
    d->fill = padding_fill ? *(const float *)padding_fill : 0.0f;
    return CUDNN_STATUS_SUCCESS;
}

// ---- the weight space: per direction the six biases (H each), then the input matrices of
// r, z, n (H x D each, row-major), then the recurrent ones (H x H)

static size_t direction_floats(const emu_cudnn_rnn *r)
{
    return 6 * (size_t)r->H + 3 * (size_t)r->H * r->D + 3 * (size_t)r->H * r->H;
}

static size_t weight_bytes(const emu_cudnn_rnn *r)
{
    return sizeof(float) * r->dirs * direction_floats(r);
}

cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                                         size_t *bytes)
{
    if (!handle)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (!rnn->set)
        return CUDNN_STATUS_BAD_PARAM;
    *bytes = weight_bytes(rnn);
    return CUDNN_STATUS_SUCCESS;
}

// offsets (floats) of linear layer lin's matrix and bias in direction dir's part
static size_t matrix_offset(const emu_cudnn_rnn *r, int dir, int lin)
{
    size_t base = dir * direction_floats(r) + 6 * (size_t)r->H;
    return lin < 3 ? base + (size_t)lin * r->H * r->D
                   : base + 3 * (size_t)r->H * r->D + (size_t)(lin - 3) * r->H * r->H;
}

static size_t bias_offset(const emu_cudnn_rnn *r, int dir, int lin)
{
    return dir * direction_floats(r) + (size_t)lin * r->H;
}

cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                                      int pseudo_layer, size_t bytes, const void *weights, int lin,
                                      cudnnTensorDescriptor_t m_desc, void **m,
                                      cudnnTensorDescriptor_t b_desc, void **b)
{
    if (!handle)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (!rnn->set || pseudo_layer < 0 || pseudo_layer >= rnn->dirs || lin < 0 || lin >= 6 ||
        bytes < weight_bytes(rnn))
        return CUDNN_STATUS_BAD_PARAM;
    float *base = (float *)weights;
    int cols = lin < 3 ? rnn->D : rnn->H;
    int m_dims[3] = {1, rnn->H, cols}, m_strides[3] = {rnn->H * cols, cols, 1};
    int b_dims[3] = {1, rnn->H, 1}, b_strides[3] = {rnn->H, 1, 1};
    if (m_desc)
        cudnnSetTensorNdDescriptor(m_desc, CUDNN_DATA_FLOAT, 3, m_dims, m_strides);
    if (b_desc)
        cudnnSetTensorNdDescriptor(b_desc, CUDNN_DATA_FLOAT, 3, b_dims, b_strides);
    *m = base + matrix_offset(rnn, pseudo_layer, lin);
    *b = base + bias_offset(rnn, pseudo_layer, lin);
    return CUDNN_STATUS_SUCCESS;
}

// ---- the reserve space: per direction and (item, step) row, the gates r, z, n, the hidden
// pre-activation R_n h + b_Rn and the state read (5H), then the gradients of the
// pre-activations of r and z, and of n's input and hidden parts (4H)

enum { STATE_FLOATS = 5, GRAD_FLOATS = 4 };

static size_t reserve_floats(const emu_cudnn_rnn *r, const emu_cudnn_rnn_data *x)
{
    return (size_t)r->dirs * x->B * x->T * (STATE_FLOATS + GRAD_FLOATS) * r->H;
}

static size_t work_floats(const emu_cudnn_rnn *r, const emu_cudnn_rnn_data *x)
{
    return (size_t)x->B * r->H;
}

cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                                        cudnnForwardMode_t mode, cudnnRNNDataDescriptor_t x,
                                        size_t *work_bytes, size_t *reserve_bytes)
{
    if (!handle)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (!rnn->set || !x->set || x->vec != rnn->D)
        return CUDNN_STATUS_BAD_PARAM;
    *work_bytes = sizeof(float) * work_floats(rnn, x);
    *reserve_bytes = mode == CUDNN_FWD_MODE_TRAINING ? sizeof(float) * reserve_floats(rnn, x) : 0;
    return CUDNN_STATUS_SUCCESS;
}

// Whether the call's arguments are what cuDNN accepts: x (B, T, D) and y (B, T, dirs H) with
// the same lengths, which dev_lengths repeats; no initial state (or its descriptor's shape);
// the spaces large enough, all inside device allocations. The workspace is scribbled on.
static bool check_call(const emu_cudnn_rnn *r, const int *dev_lengths, const emu_cudnn_rnn_data *x,
                       const emu_cudnn_rnn_data *y, cudnnTensorDescriptor_t h_desc, size_t weights,
                       const void *weight_space, size_t work, void *work_space, size_t reserve,
                       const void *reserve_space, const char *call)
{
    if (!r->set || !x->set || !y->set || x->vec != r->D || y->vec != r->dirs * r->H ||
        x->B != y->B || x->T != y->T || x->lengths != y->lengths || weights < weight_bytes(r) ||
        work < sizeof(float) * work_floats(r, x) || reserve < sizeof(float) * reserve_floats(r, x))
        return false;
    int h[4];
    emu_cudnn_tensor_shape(h_desc, h);
    if (h[0] && (h[0] != r->dirs || h[1] != x->B || h[2] != r->H))
        return false;
    emu_check_device(dev_lengths, sizeof(int) * x->B, call);
    for (int b = 0; b < x->B; b++)
        if (dev_lengths[b] != x->lengths[b])
            emu_fail("%s: devSeqLengths[%d] is %d, the data descriptor's length %d", call, b,
                     dev_lengths[b], x->lengths[b]);
    emu_check_device(work_space, sizeof(float) * work_floats(r, x), call);
    memset(work_space, 0xFF, sizeof(float) * work_floats(r, x));
    emu_check_device(weight_space, weight_bytes(r), call);
    emu_check_device(reserve_space, sizeof(float) * reserve_floats(r, x), call);
    return true;
}

static float sigmoid(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

// sum_k m[j][k] v[k] for a row-major (rows, cols) m
static float row_dot(const float *m, int j, int cols, const float *v)
{
    float s = 0.0f;
    for (int k = 0; k < cols; k++)
        s += m[(size_t)j * cols + k] * v[k];
    return s;
}

// the position of step s of item b in direction dir
static int position(int dir, int s, int length)
{
    return dir == 0 ? s : length - 1 - s;
}

cudnnStatus_t cudnnRNNForward(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                              cudnnForwardMode_t mode, const int dev_lengths[],
                              cudnnRNNDataDescriptor_t x_desc, const void *x,
                              cudnnRNNDataDescriptor_t y_desc, void *y,
                              cudnnTensorDescriptor_t h_desc, const void *hx, void *hy,
                              cudnnTensorDescriptor_t c_desc, const void *cx, void *cy,
                              size_t weight_space_bytes, const void *weights, size_t work_bytes,
                              void *work, size_t reserve_bytes, void *reserve)
{
    if (!handle)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (mode != CUDNN_FWD_MODE_TRAINING || hx || hy || cx || cy)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (!check_call(rnn, dev_lengths, x_desc, y_desc, h_desc, weight_space_bytes, weights,
                    work_bytes, work, reserve_bytes, reserve, "cudnnRNNForward"))
        return CUDNN_STATUS_BAD_PARAM;
    int B = x_desc->B, T = x_desc->T, D = rnn->D, H = rnn->H, W = y_desc->vec;
    emu_check_device(x, sizeof(float) * B * T * D, "cudnnRNNForward's x");
    emu_check_device(y, sizeof(float) * B * T * W, "cudnnRNNForward's y");
    const float *in = (const float *)x, *w = (const float *)weights;
    float *out = (float *)y, *res = (float *)reserve;
    for (int b = 0; b < B; b++)
        for (int t = x_desc->lengths[b]; t < T; t++)
            for (int k = 0; k < W; k++)
                out[((size_t)b * T + t) * W + k] = y_desc->fill;
    std::vector<float> h(H), hnew(H);
    for (int dir = 0; dir < rnn->dirs; dir++) {
        const float *mat[6], *bias[6];
        for (int lin = 0; lin < 6; lin++) {
            mat[lin] = w + matrix_offset(rnn, dir, lin);
            bias[lin] = w + bias_offset(rnn, dir, lin);
        }
        for (int b = 0; b < B; b++) {
            int len = x_desc->lengths[b];
            std::fill(h.begin(), h.end(), 0.0f);
            for (int s = 0; s < len; s++) {
                int t = position(dir, s, len);
                size_t row = ((size_t)dir * B + b) * T + t;
                const float *xt = in + ((size_t)b * T + t) * D;
                float *g = res + row * STATE_FLOATS * H;
                for (int j = 0; j < H; j++) {
                    float r = sigmoid(row_dot(mat[0], j, D, xt) + bias[0][j] +
                                      row_dot(mat[3], j, H, h.data()) + bias[3][j]);
                    float z = sigmoid(row_dot(mat[1], j, D, xt) + bias[1][j] +
                                      row_dot(mat[4], j, H, h.data()) + bias[4][j]);
                    float hn = row_dot(mat[5], j, H, h.data()) + bias[5][j];
                    float n = tanhf(row_dot(mat[2], j, D, xt) + bias[2][j] + r * hn);
                    g[j] = r, g[H + j] = z, g[2 * H + j] = n, g[3 * H + j] = hn;
                    g[4 * H + j] = h[j];
                    hnew[j] = (1.0f - z) * n + z * h[j];
                }
                h.swap(hnew);
                for (int j = 0; j < H; j++)
                    out[((size_t)b * T + t) * W + dir * H + j] = h[j];
            }
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t
cudnnRNNBackwardData_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn, const int dev_lengths[],
                        cudnnRNNDataDescriptor_t y_desc, const void *y, const void *dy,
                        cudnnRNNDataDescriptor_t x_desc, void *dx, cudnnTensorDescriptor_t h_desc,
                        const void *hx, const void *dhy, void *dhx, cudnnTensorDescriptor_t c_desc,
                        const void *cx, const void *dcy, void *dcx, size_t weight_space_bytes,
                        const void *weights, size_t work_bytes, void *work, size_t reserve_bytes,
                        void *reserve)
{
    if (!handle)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (hx || dhy || dhx || cx || dcy || dcx)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (!check_call(rnn, dev_lengths, x_desc, y_desc, h_desc, weight_space_bytes, weights,
                    work_bytes, work, reserve_bytes, reserve, "cudnnRNNBackwardData_v8"))
        return CUDNN_STATUS_BAD_PARAM;
    int B = x_desc->B, T = x_desc->T, D = rnn->D, H = rnn->H, W = y_desc->vec;
    emu_check_device(y, sizeof(float) * B * T * W, "cudnnRNNBackwardData_v8's y");
    emu_check_device(dy, sizeof(float) * B * T * W, "cudnnRNNBackwardData_v8's dy");
    emu_check_device(dx, sizeof(float) * B * T * D, "cudnnRNNBackwardData_v8's dx");
    const float *w = (const float *)weights, *dout = (const float *)dy;
    float *din = (float *)dx, *res = (float *)reserve;
    float *grads = res + (size_t)rnn->dirs * B * T * STATE_FLOATS * H;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++)
                din[((size_t)b * T + t) * D + k] = t < x_desc->lengths[b] ? 0.0f : x_desc->fill;
    std::vector<float> dh(H), dhprev(H);
    for (int dir = 0; dir < rnn->dirs; dir++) {
        const float *mat[6];
        for (int lin = 0; lin < 6; lin++)
            mat[lin] = w + matrix_offset(rnn, dir, lin);
        for (int b = 0; b < B; b++) {
            int len = x_desc->lengths[b];
            std::fill(dh.begin(), dh.end(), 0.0f);
            for (int s = len - 1; s >= 0; s--) {
                int t = position(dir, s, len);
                size_t row = ((size_t)dir * B + b) * T + t;
                const float *g = res + row * STATE_FLOATS * H;
                float *dg = grads + row * GRAD_FLOATS * H;
                for (int j = 0; j < H; j++) {
                    float r = g[j], z = g[H + j], n = g[2 * H + j], hn = g[3 * H + j];
                    float hprev = g[4 * H + j];
                    float d = dh[j] + dout[((size_t)b * T + t) * W + dir * H + j];
                    float dn_pre = d * (1.0f - z) * (1.0f - n * n);
                    dg[j] = dn_pre * hn * r * (1.0f - r);         // r's pre-activation
                    dg[H + j] = d * (hprev - n) * z * (1.0f - z); // z's
                    dg[2 * H + j] = dn_pre;                       // n's input part
                    dg[3 * H + j] = dn_pre * r;                   // n's hidden part
                    dhprev[j] = d * z;
                }
                float *dxt = din + ((size_t)b * T + t) * D;
                for (int k = 0; k < D; k++)
                    for (int gate = 0; gate < 3; gate++)
                        for (int j = 0; j < H; j++)
                            dxt[k] += mat[gate][(size_t)j * D + k] * dg[gate * H + j];
                for (int k = 0; k < H; k++)
                    for (int gate = 0; gate < 3; gate++) {
                        const float *dgh = dg + (gate == 2 ? 3 : gate) * H;
                        for (int j = 0; j < H; j++)
                            dhprev[k] += mat[3 + gate][(size_t)j * H + k] * dgh[j];
                    }
                dh.swap(dhprev);
            }
        }
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnRNNBackwardWeights_v8(
    cudnnHandle_t handle, cudnnRNNDescriptor_t rnn, cudnnWgradMode_t mode, const int dev_lengths[],
    cudnnRNNDataDescriptor_t x_desc, const void *x, cudnnTensorDescriptor_t h_desc, const void *hx,
    cudnnRNNDataDescriptor_t y_desc, const void *y, size_t weight_space_bytes, void *dweights,
    size_t work_bytes, void *work, size_t reserve_bytes, void *reserve)
{
    if (!handle)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (mode != CUDNN_WGRAD_MODE_ADD || hx)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (!check_call(rnn, dev_lengths, x_desc, y_desc, h_desc, weight_space_bytes, dweights,
                    work_bytes, work, reserve_bytes, reserve, "cudnnRNNBackwardWeights_v8"))
        return CUDNN_STATUS_BAD_PARAM;
    int B = x_desc->B, T = x_desc->T, D = rnn->D, H = rnn->H;
    emu_check_device(x, sizeof(float) * B * T * D, "cudnnRNNBackwardWeights_v8's x");
    emu_check_device(y, sizeof(float) * B * T * y_desc->vec, "cudnnRNNBackwardWeights_v8's y");
    const float *in = (const float *)x, *res = (const float *)reserve;
    const float *grads = res + (size_t)rnn->dirs * B * T * STATE_FLOATS * H;
    float *dw = (float *)dweights;
    for (int dir = 0; dir < rnn->dirs; dir++)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < x_desc->lengths[b]; t++) {
                size_t row = ((size_t)dir * B + b) * T + t;
                const float *hprev = res + row * STATE_FLOATS * H + 4 * H;
                const float *dg = grads + row * GRAD_FLOATS * H;
                const float *xt = in + ((size_t)b * T + t) * D;
                for (int gate = 0; gate < 3; gate++) {
                    const float *dgx = dg + gate * H, *dgh = dg + (gate == 2 ? 3 : gate) * H;
                    float *wx = dw + matrix_offset(rnn, dir, gate);
                    float *wh = dw + matrix_offset(rnn, dir, 3 + gate);
                    float *bx = dw + bias_offset(rnn, dir, gate);
                    float *bh = dw + bias_offset(rnn, dir, 3 + gate);
                    for (int j = 0; j < H; j++) {
                        for (int k = 0; k < D; k++)
                            wx[(size_t)j * D + k] += dgx[j] * xt[k];
                        for (int k = 0; k < H; k++)
                            wh[(size_t)j * H + k] += dgh[j] * hprev[k];
                        bx[j] += dgx[j];
                        bh[j] += dgh[j];
                    }
                }
            }
    return CUDNN_STATUS_SUCCESS;
}
