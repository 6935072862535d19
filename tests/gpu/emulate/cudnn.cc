// tests/gpu/emulate/cudnn.cc: the cuDNN calls of vtr's .cu files for the CPU emulation
// (include/cudnn.h): a handle, 4-D tensor, filter, convolution, activation and pooling
// descriptors, and the forward calls of features/conv.cu's engine.
//
// Each call checks its arguments as cuDNN documents them (shapes that agree, one data type
// across a call's tensors, the fused call's activation and algorithm, a workspace at least
// the algorithm's size) and that every tensor it reads or writes lies inside one device
// allocation. A convolution reads x and w as float32 (TF32-rounded where the math type lets
// cuDNN use tensor cores on float32 data), sums each output in float32, and rounds what it
// writes to the output's type (bfloat16: lib/tensor.h's rounding, to nearest, ties to even). As
// cuDNN: y is not read where beta (alpha2 for z) is 0, so a y of NaN then gives no NaN; the
// workspace is written (with NaN bytes), so an algorithm's workspace shared with live data shows.
// Not emulated: cuDNN's own sum order and algorithms, NaN propagation options (NaNs propagate),
// other data types, layouts or dimensions.
#include "emulation.h"

#include <vector>

#include "cudnn.h"
#include "lib/tensor.h"

struct emu_cudnn {
    int unused;
};
static emu_cudnn the_cudnn;

struct emu_cudnn_tensor {
    bool set;
    int n, c, h, w;
    long long sn, sc, sh, sw; // element strides
    cudnnDataType_t type;
};
struct emu_cudnn_filter {
    bool set;
    int k, c, h, w;
    cudnnTensorFormat_t format;
    cudnnDataType_t type;
};
struct emu_cudnn_convolution {
    bool set;
    int pad_h, pad_w, u, v, dil_h, dil_w;
    int groups = 1;
    cudnnDataType_t compute;
    cudnnMathType_t math;
};
struct emu_cudnn_activation {
    bool set;
    cudnnActivationMode_t mode;
    double coef;
};
struct emu_cudnn_pooling {
    bool set;
    cudnnPoolingMode_t mode;
    int window_h, window_w, pad_h, pad_w, stride_h, stride_w;
};

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    *handle = &the_cudnn;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    return handle == &the_cudnn ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

// ---- descriptors: created zeroed (a convolution's groups 1), set once or more, destroyed once

EMU_CUDNN_DESCRIPTOR_CALLS(TensorDescriptor, cudnnTensorDescriptor_t)
EMU_CUDNN_DESCRIPTOR_CALLS(FilterDescriptor, cudnnFilterDescriptor_t)
EMU_CUDNN_DESCRIPTOR_CALLS(ConvolutionDescriptor, cudnnConvolutionDescriptor_t)
EMU_CUDNN_DESCRIPTOR_CALLS(ActivationDescriptor, cudnnActivationDescriptor_t)
EMU_CUDNN_DESCRIPTOR_CALLS(PoolingDescriptor, cudnnPoolingDescriptor_t)

static bool known_type(cudnnDataType_t type)
{
    return type == CUDNN_DATA_FLOAT || type == CUDNN_DATA_BFLOAT16;
}

static size_t type_size(cudnnDataType_t type)
{
    return type == CUDNN_DATA_FLOAT ? 4 : 2;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c, int h, int w)
{
    if (!known_type(type) || (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) ||
        n < 1 || c < 1 || h < 1 || w < 1)
        return CUDNN_STATUS_BAD_PARAM;
    *d = emu_cudnn_tensor{true, n, c, h, w, 0, 0, 0, 0, type};
    if (format == CUDNN_TENSOR_NCHW) {
        d->sw = 1, d->sh = w, d->sc = (long long)h * w, d->sn = (long long)c * h * w;
    } else {
        d->sc = 1, d->sw = c, d->sh = (long long)w * c, d->sn = (long long)h * w * c;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type,
                                         int nb_dims, const int dims[], const int strides[])
{
    if (nb_dims != 3 && nb_dims != 4)
        return CUDNN_STATUS_NOT_SUPPORTED;
    int w = nb_dims == 4 ? dims[3] : 1;
    cudnnStatus_t s =
        cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, dims[0], dims[1], dims[2], w);
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    long long packed[4] = {d->sn, d->sc, d->sh, d->sw};
    for (int i = 0; i < nb_dims; i++)
        if (strides[i] != packed[i])
            return CUDNN_STATUS_NOT_SUPPORTED;
    return CUDNN_STATUS_SUCCESS;
}

void emu_cudnn_tensor_shape(cudnnTensorDescriptor_t d, int shape[4])
{
    shape[0] = d->set ? d->n : 0;
    shape[1] = d->c, shape[2] = d->h, shape[3] = d->w;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    if (!known_type(type) || (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) ||
        k < 1 || c < 1 || h < 1 || w < 1)
        return CUDNN_STATUS_BAD_PARAM;
    *d = emu_cudnn_filter{true, k, c, h, w, format, type};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w,
                                              int u, int v, int dilation_h, int dilation_w,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute_type)
{
    // cross-correlation in float32 sums only (the emulation has no true-half configuration)
    if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 || dilation_w < 1 ||
        mode != CUDNN_CROSS_CORRELATION || compute_type != CUDNN_DATA_FLOAT)
        return CUDNN_STATUS_BAD_PARAM;
    d->set = true;
    d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v;
    d->dil_h = dilation_h, d->dil_w = dilation_w;
    d->compute = compute_type;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups)
{
    if (groups < 1)
        return CUDNN_STATUS_BAD_PARAM;
    d->groups = groups;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math)
{
    if (math != CUDNN_DEFAULT_MATH && math != CUDNN_TENSOR_OP_MATH && math != CUDNN_FMA_MATH)
        return CUDNN_STATUS_BAD_PARAM;
    d->math = math;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d,
                                           cudnnActivationMode_t mode, cudnnNanPropagation_t nan,
                                           double coef)
{
    if (mode != CUDNN_ACTIVATION_RELU && mode != CUDNN_ACTIVATION_CLIPPED_RELU)
        return CUDNN_STATUS_BAD_PARAM;
    *d = emu_cudnn_activation{true, mode, coef};
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t d, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int window_h, int window_w,
                                          int pad_h, int pad_w, int stride_h, int stride_w)
{
    if (window_h < 1 || window_w < 1 || pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1)
        return CUDNN_STATUS_BAD_PARAM;
    *d = emu_cudnn_pooling{true, mode, window_h, window_w, pad_h, pad_w, stride_h, stride_w};
    return CUDNN_STATUS_SUCCESS;
}

// ---- shapes

// The convolution's output, as cuDNN computes it: 1 + (in + 2 pad - dilated window) / stride
static bool conv_output(const emu_cudnn_convolution *conv, const emu_cudnn_tensor *x,
                        const emu_cudnn_filter *w, int *n, int *c, int *h, int *wd)
{
    if (!conv->set || !x->set || !w->set || x->type != w->type || x->c != w->c * conv->groups ||
        w->k % conv->groups)
        return false;
    int kh = (w->h - 1) * conv->dil_h + 1, kw = (w->w - 1) * conv->dil_w + 1;
    if (x->h + 2 * conv->pad_h < kh || x->w + 2 * conv->pad_w < kw)
        return false;
    *n = x->n;
    *c = w->k;
    *h = 1 + (x->h + 2 * conv->pad_h - kh) / conv->u;
    *wd = 1 + (x->w + 2 * conv->pad_w - kw) / conv->v;
    return true;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(cudnnConvolutionDescriptor_t conv,
                                                    cudnnTensorDescriptor_t x,
                                                    cudnnFilterDescriptor_t w, int *n, int *c,
                                                    int *h, int *wd)
{
    return conv_output(conv, x, w, n, c, h, wd) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

static bool pool_output(const emu_cudnn_pooling *p, const emu_cudnn_tensor *x, int *n, int *c,
                        int *h, int *w)
{
    if (!p->set || !x->set || x->h + 2 * p->pad_h < p->window_h ||
        x->w + 2 * p->pad_w < p->window_w)
        return false;
    *n = x->n;
    *c = x->c;
    *h = 1 + (x->h + 2 * p->pad_h - p->window_h) / p->stride_h;
    *w = 1 + (x->w + 2 * p->pad_w - p->window_w) / p->stride_w;
    return true;
}

cudnnStatus_t cudnnGetPooling2dForwardOutputDim(cudnnPoolingDescriptor_t pool,
                                                cudnnTensorDescriptor_t x, int *n, int *c, int *h,
                                                int *w)
{
    return pool_output(pool, x, n, c, h, w) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

static bool same_shape(const emu_cudnn_tensor *t, int n, int c, int h, int w)
{
    return t->set && t->n == n && t->c == c && t->h == h && t->w == w;
}

// Whether x, w and y make a convolution cuDNN would run: y of the output's shape, one type.
static bool conv_args(const emu_cudnn_convolution *conv, const emu_cudnn_tensor *x,
                      const emu_cudnn_filter *w, const emu_cudnn_tensor *y)
{
    int n, c, h, wd;
    return conv_output(conv, x, w, &n, &c, &h, &wd) && same_shape(y, n, c, h, wd) &&
           y->type == x->type;
}

// The math an algorithm runs in: cuDNN's tensor cores for bfloat16 data (they have
// no FMA kernels here) and for float32 unless the descriptor asks for FMA math (TF32).
static cudnnMathType_t algo_math(const emu_cudnn_convolution *conv, const emu_cudnn_tensor *x)
{
    if (x->type != CUDNN_DATA_FLOAT)
        return CUDNN_TENSOR_OP_MATH;
    return conv->math == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

// The emulation's workspaces: none for implicit GEMM, the filter offsets for the precomputed
// one, one image's lowered input (im2col) for GEMM.
static size_t workspace_bytes(cudnnConvolutionFwdAlgo_t algo, const emu_cudnn_filter *w,
                              const emu_cudnn_tensor *y)
{
    size_t window = (size_t)w->c * w->h * w->w;
    switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return window * sizeof(int);
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return window * y->h * y->w * type_size(w->type);
    default: return 0;
    }
}

static bool emulated_algo(cudnnConvolutionFwdAlgo_t algo)
{
    return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
           algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
           algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
}

// GEMM, precomputed implicit GEMM, implicit GEMM, "fastest" first, each in the math it runs in
cudnnStatus_t
cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                       cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                       cudnnTensorDescriptor_t y, int requested, int *returned,
                                       cudnnConvolutionFwdAlgoPerf_t *perf)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (requested < 1 || !conv_args(conv, x, w, y))
        return CUDNN_STATUS_BAD_PARAM;
    static const cudnnConvolutionFwdAlgo_t order[] = {
        CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
        CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM};
    int count = 0;
    for (cudnnConvolutionFwdAlgo_t algo : order) {
        if (count == requested)
            break;
        perf[count++] = cudnnConvolutionFwdAlgoPerf_t{algo,
                                                      CUDNN_STATUS_SUCCESS,
                                                      (float)count,
                                                      workspace_bytes(algo, w, y),
                                                      CUDNN_DETERMINISTIC,
                                                      algo_math(conv, x),
                                                      {0, 0, 0}};
    }
    *returned = count;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle,
                                                      cudnnTensorDescriptor_t x,
                                                      cudnnFilterDescriptor_t w,
                                                      cudnnConvolutionDescriptor_t conv,
                                                      cudnnTensorDescriptor_t y,
                                                      cudnnConvolutionFwdAlgo_t algo, size_t *bytes)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (!conv_args(conv, x, w, y))
        return CUDNN_STATUS_BAD_PARAM;
    if (!emulated_algo(algo))
        return CUDNN_STATUS_NOT_SUPPORTED;
    *bytes = workspace_bytes(algo, w, y);
    return CUDNN_STATUS_SUCCESS;
}

// ---- elements

static float load(const void *base, cudnnDataType_t type, size_t i)
{
    switch (type) {
    case CUDNN_DATA_FLOAT: return ((const float *)base)[i];
    default: return vtr_bf16_to_float(((const uint16_t *)base)[i]);
    }
}

static void store(void *base, cudnnDataType_t type, size_t i, float v)
{
    switch (type) {
    case CUDNN_DATA_FLOAT: ((float *)base)[i] = v; break;
    default: ((uint16_t *)base)[i] = vtr_float_to_bf16(v); break;
    }
}

static size_t offset(const emu_cudnn_tensor *t, int n, int c, int h, int w)
{
    return (size_t)(n * t->sn + c * t->sc + h * t->sh + w * t->sw);
}

// Stops unless the tensor's elements lie inside one device allocation.
static void check_tensor(const emu_cudnn_tensor *t, const void *data, const char *what)
{
    size_t last = offset(t, t->n - 1, t->c - 1, t->h - 1, t->w - 1);
    emu_check_device(data, (last + 1) * type_size(t->type), what);
}

// t's elements as float32, NCHW packed
static std::vector<float> unpack(const emu_cudnn_tensor *t, const void *data)
{
    std::vector<float> out((size_t)t->n * t->c * t->h * t->w);
    size_t i = 0;
    for (int n = 0; n < t->n; n++)
        for (int c = 0; c < t->c; c++)
            for (int h = 0; h < t->h; h++)
                for (int w = 0; w < t->w; w++)
                    out[i++] = load(data, t->type, offset(t, n, c, h, w));
    return out;
}

// conv(x) NCHW packed, in float32 sums
static std::vector<float> convolve(const emu_cudnn_tensor *xd, const void *x,
                                   const emu_cudnn_filter *wd, const void *w,
                                   const emu_cudnn_convolution *conv, const emu_cudnn_tensor *yd)
{
    std::vector<float> in = unpack(xd, x);
    size_t nw = (size_t)wd->k * wd->c * wd->h * wd->w;
    std::vector<float> filt(nw);
    for (int k = 0, i = 0; k < wd->k; k++) // to (K, C, R, S)
        for (int c = 0; c < wd->c; c++)
            for (int r = 0; r < wd->h; r++)
                for (int s = 0; s < wd->w; s++, i++)
                    filt[i] = load(w, wd->type,
                                   wd->format == CUDNN_TENSOR_NCHW
                                       ? (size_t)i
                                       : (((size_t)k * wd->h + r) * wd->w + s) * wd->c + c);
    if (xd->type == CUDNN_DATA_FLOAT && algo_math(conv, xd) == CUDNN_TENSOR_OP_MATH) {
        for (float &v : in)
            v = emu_round_mantissa(v, 10);
        for (float &v : filt)
            v = emu_round_mantissa(v, 10);
    }
    int oh = yd->h, ow = yd->w, per_group = wd->k / conv->groups;
    std::vector<float> out((size_t)yd->n * yd->c * oh * ow, 0.0f);
    for (int n = 0; n < yd->n; n++)
        for (int k = 0; k < wd->k; k++) {
            float *acc = &out[((size_t)n * wd->k + k) * oh * ow];
            int first_c = k / per_group * wd->c;
            for (int c = 0; c < wd->c; c++) {
                const float *plane = &in[((size_t)n * xd->c + first_c + c) * xd->h * xd->w];
                for (int r = 0; r < wd->h; r++)
                    for (int s = 0; s < wd->w; s++) {
                        float wv = filt[(((size_t)k * wd->c + c) * wd->h + r) * wd->w + s];
                        for (int i = 0; i < oh; i++) {
                            int ih = i * conv->u - conv->pad_h + r * conv->dil_h;
                            if (ih < 0 || ih >= xd->h)
                                continue;
                            for (int j = 0; j < ow; j++) {
                                int iw = j * conv->v - conv->pad_w + s * conv->dil_w;
                                if (iw >= 0 && iw < xd->w)
                                    acc[i * ow + j] += wv * plane[ih * xd->w + iw];
                            }
                        }
                    }
            }
        }
    return out;
}

static float activate(const emu_cudnn_activation *act, float v)
{
    switch (act->mode) {
    case CUDNN_ACTIVATION_RELU: return v > 0.0f ? v : v == v ? 0.0f : v;
    case CUDNN_ACTIVATION_CLIPPED_RELU:
        return v != v ? v : v < 0.0f ? 0.0f : v > (float)act->coef ? (float)act->coef : v;
    default: return v;
    }
}

// y = act(alpha1 conv(x) + alpha2 z + bias), each term only where given; y written in its type
static void write_conv(const std::vector<float> &conv, float alpha1, const emu_cudnn_tensor *zd,
                       const void *z, float alpha2, const emu_cudnn_tensor *bd, const void *bias,
                       const emu_cudnn_activation *act, const emu_cudnn_tensor *yd, void *y)
{
    size_t i = 0;
    for (int n = 0; n < yd->n; n++)
        for (int c = 0; c < yd->c; c++) {
            float b = bias ? load(bias, bd->type, offset(bd, 0, c, 0, 0)) : 0.0f;
            for (int h = 0; h < yd->h; h++)
                for (int w = 0; w < yd->w; w++, i++) {
                    float v = alpha1 * conv[i];
                    if (alpha2 != 0.0f)
                        v += alpha2 * load(z, zd->type, offset(zd, n, c, h, w));
                    v += b;
                    store(y, yd->type, offset(yd, n, c, h, w), act ? activate(act, v) : v);
                }
        }
}

static cudnnStatus_t check_workspace(cudnnConvolutionFwdAlgo_t algo, const emu_cudnn_filter *w,
                                     const emu_cudnn_tensor *y, void *workspace, size_t bytes,
                                     const char *call)
{
    if (!emulated_algo(algo))
        return CUDNN_STATUS_NOT_SUPPORTED;
    size_t need = workspace_bytes(algo, w, y);
    if (bytes < need)
        return CUDNN_STATUS_BAD_PARAM;
    if (need) {
        emu_check_device(workspace, need, call);
        memset(workspace, 0xFF, need);
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      cudnnTensorDescriptor_t x_desc, const void *x,
                                      cudnnFilterDescriptor_t w_desc, const void *w,
                                      cudnnConvolutionDescriptor_t conv,
                                      cudnnConvolutionFwdAlgo_t algo, void *workspace,
                                      size_t workspace_size, const void *beta,
                                      cudnnTensorDescriptor_t y_desc, void *y)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (!conv_args(conv, x_desc, w_desc, y_desc))
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t s = check_workspace(algo, w_desc, y_desc, workspace, workspace_size,
                                      "cudnnConvolutionForward's workspace");
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    check_tensor(x_desc, x, "cudnnConvolutionForward's x");
    emu_check_device(
        w, (size_t)w_desc->k * w_desc->c * w_desc->h * w_desc->w * type_size(w_desc->type),
        "cudnnConvolutionForward's w");
    check_tensor(y_desc, y, "cudnnConvolutionForward's y");
    std::vector<float> out = convolve(x_desc, x, w_desc, w, conv, y_desc);
    write_conv(out, *(const float *)alpha, y_desc, y, *(const float *)beta, NULL, NULL, NULL,
               y_desc, y);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, cudnnTensorDescriptor_t x_desc, const void *x,
    cudnnFilterDescriptor_t w_desc, const void *w, cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionFwdAlgo_t algo, void *workspace, size_t workspace_size, const void *alpha2,
    cudnnTensorDescriptor_t z_desc, const void *z, cudnnTensorDescriptor_t bias_desc,
    const void *bias, cudnnActivationDescriptor_t act, cudnnTensorDescriptor_t y_desc, void *y)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    // ReLU only (cuDNN fuses the identity too, with one algorithm; vtr does not ask)
    if (!act->set || act->mode != CUDNN_ACTIVATION_RELU)
        return CUDNN_STATUS_NOT_SUPPORTED;
    if (!conv_args(conv, x_desc, w_desc, y_desc) ||
        !same_shape(z_desc, y_desc->n, y_desc->c, y_desc->h, y_desc->w) ||
        z_desc->type != y_desc->type || !same_shape(bias_desc, 1, y_desc->c, 1, 1) ||
        bias_desc->type != y_desc->type)
        return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t s = check_workspace(algo, w_desc, y_desc, workspace, workspace_size,
                                      "cudnnConvolutionBiasActivationForward's workspace");
    if (s != CUDNN_STATUS_SUCCESS)
        return s;
    float a2 = *(const float *)alpha2;
    check_tensor(x_desc, x, "cudnnConvolutionBiasActivationForward's x");
    emu_check_device(
        w, (size_t)w_desc->k * w_desc->c * w_desc->h * w_desc->w * type_size(w_desc->type),
        "cudnnConvolutionBiasActivationForward's w");
    if (a2 != 0.0f)
        check_tensor(z_desc, z, "cudnnConvolutionBiasActivationForward's z");
    check_tensor(bias_desc, bias, "cudnnConvolutionBiasActivationForward's bias");
    check_tensor(y_desc, y, "cudnnConvolutionBiasActivationForward's y");
    std::vector<float> out = convolve(x_desc, x, w_desc, w, conv, y_desc);
    write_conv(out, *(const float *)alpha1, z_desc, z, a2, bias_desc, bias, act, y_desc, y);
    return CUDNN_STATUS_SUCCESS;
}

// c = alpha a + beta c, a broadcast over c's dimensions where it has 1
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha,
                             cudnnTensorDescriptor_t a_desc, const void *a, const void *beta,
                             cudnnTensorDescriptor_t c_desc, void *c)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    const emu_cudnn_tensor *ad = a_desc, *cd = c_desc;
    if (!ad->set || !cd->set || ad->type != cd->type || (ad->n != 1 && ad->n != cd->n) ||
        (ad->c != 1 && ad->c != cd->c) || (ad->h != 1 && ad->h != cd->h) ||
        (ad->w != 1 && ad->w != cd->w))
        return CUDNN_STATUS_BAD_PARAM;
    check_tensor(ad, a, "cudnnAddTensor's A");
    check_tensor(cd, c, "cudnnAddTensor's C");
    float al = *(const float *)alpha, be = *(const float *)beta;
    for (int n = 0; n < cd->n; n++)
        for (int ch = 0; ch < cd->c; ch++)
            for (int h = 0; h < cd->h; h++)
                for (int w = 0; w < cd->w; w++) {
                    float v = al * load(a, ad->type,
                                        offset(ad, ad->n > 1 ? n : 0, ad->c > 1 ? ch : 0,
                                               ad->h > 1 ? h : 0, ad->w > 1 ? w : 0));
                    size_t i = offset(cd, n, ch, h, w);
                    if (be != 0.0f)
                        v += be * load(c, cd->type, i);
                    store(c, cd->type, i, v);
                }
    return CUDNN_STATUS_SUCCESS;
}

// y = alpha f(x) + beta y over one shape, y read only where beta is not 0; x and y may be one
// tensor
template <class F>
static void map_tensor(const emu_cudnn_tensor *xd, const void *x, float alpha, float beta,
                       const emu_cudnn_tensor *yd, void *y, F f)
{
    for (int n = 0; n < yd->n; n++)
        for (int c = 0; c < yd->c; c++)
            for (int h = 0; h < yd->h; h++)
                for (int w = 0; w < yd->w; w++) {
                    size_t i = offset(yd, n, c, h, w);
                    float v = alpha * f(load(x, xd->type, offset(xd, n, c, h, w)));
                    if (beta != 0.0f)
                        v += beta * load(y, yd->type, i);
                    store(y, yd->type, i, v);
                }
}

cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle, cudnnActivationDescriptor_t act,
                                     const void *alpha, cudnnTensorDescriptor_t x_desc,
                                     const void *x, const void *beta,
                                     cudnnTensorDescriptor_t y_desc, void *y)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (!act->set || !same_shape(x_desc, y_desc->n, y_desc->c, y_desc->h, y_desc->w) ||
        x_desc->type != y_desc->type)
        return CUDNN_STATUS_BAD_PARAM;
    check_tensor(x_desc, x, "cudnnActivationForward's x");
    check_tensor(y_desc, y, "cudnnActivationForward's y");
    map_tensor(x_desc, x, *(const float *)alpha, *(const float *)beta, y_desc, y,
               [act](float v) { return activate(act, v); });
    return CUDNN_STATUS_SUCCESS;
}

// Copies x to y in y's layout: the same shape and data type (cuDNN converts no types here).
cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void *alpha,
                                   cudnnTensorDescriptor_t x_desc, const void *x, const void *beta,
                                   cudnnTensorDescriptor_t y_desc, void *y)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    if (!same_shape(x_desc, y_desc->n, y_desc->c, y_desc->h, y_desc->w) ||
        x_desc->type != y_desc->type)
        return CUDNN_STATUS_BAD_PARAM;
    check_tensor(x_desc, x, "cudnnTransformTensor's x");
    check_tensor(y_desc, y, "cudnnTransformTensor's y");
    map_tensor(x_desc, x, *(const float *)alpha, *(const float *)beta, y_desc, y,
               [](float v) { return v; });
    return CUDNN_STATUS_SUCCESS;
}

// Max (padding never wins) or average (padding counted or not) over each window.
cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, cudnnPoolingDescriptor_t pool,
                                  const void *alpha, cudnnTensorDescriptor_t x_desc, const void *x,
                                  const void *beta, cudnnTensorDescriptor_t y_desc, void *y)
{
    if (handle != &the_cudnn)
        return CUDNN_STATUS_NOT_INITIALIZED;
    int n, c, h, w;
    if (!pool_output(pool, x_desc, &n, &c, &h, &w) || !same_shape(y_desc, n, c, h, w) ||
        x_desc->type != y_desc->type)
        return CUDNN_STATUS_BAD_PARAM;
    check_tensor(x_desc, x, "cudnnPoolingForward's x");
    check_tensor(y_desc, y, "cudnnPoolingForward's y");
    float al = *(const float *)alpha, be = *(const float *)beta;
    const emu_cudnn_pooling *p = pool;
    for (int in = 0; in < n; in++)
        for (int ic = 0; ic < c; ic++)
            for (int oh = 0; oh < h; oh++)
                for (int ow = 0; ow < w; ow++) {
                    float best = -INFINITY, sum = 0.0f;
                    int count = 0;
                    for (int r = 0; r < p->window_h; r++)
                        for (int s = 0; s < p->window_w; s++) {
                            int ih = oh * p->stride_h - p->pad_h + r;
                            int iw = ow * p->stride_w - p->pad_w + s;
                            if (ih < 0 || ih >= x_desc->h || iw < 0 || iw >= x_desc->w)
                                continue;
                            float v = load(x, x_desc->type, offset(x_desc, in, ic, ih, iw));
                            best = v > best || v != v ? v : best;
                            sum += v;
                            count++;
                        }
                    float v = p->mode == CUDNN_POOLING_MAX ? best : sum / (float)count;
                    size_t i = offset(y_desc, in, ic, oh, ow);
                    v *= al;
                    if (be != 0.0f)
                        v += be * load(y, y_desc->type, i);
                    store(y, y_desc->type, i, v);
                }
    return CUDNN_STATUS_SUCCESS;
}
