// The CUDA engine of folded conv nets (features/conv.h) on cuDNN's convolution API.
// Launch and memory glue only: the math is cuDNN's. Errors become text once, here
// (cudnnGetErrorString, cudaGetErrorString).
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "features/conv.h"
#include "lib/cuda_launch.h"
#include "lib/tensor.h"

// the largest workspace one conv may ask for (algorithms needing more are passed over)
#define WORKSPACE_LIMIT ((size_t)1 << 30)

struct map_dims {
    int c, h, w;
};

struct op_plan {
    cudnnTensorDescriptor_t src, dst; // the engine's maps at the planned batch (CONCAT: none);
                                      // a padded conv's src is its padded input
    map_dims out;                     // dst's shape
    map_dims unpadded;                // CONV with asymmetric padding: its input (c == 0:
                                      // cuDNN pads)
    cudnnConvolutionFwdAlgo_t algo;   // CONV
    cudnnPoolingDescriptor_t pool;    // pools
    int concat_c[VTR_CONV_MAX_CONCAT]; // CONCAT: each source's channels
};

// The maps and weights are float32 NCHW (the default) or, with bf16
// (vtr_conv_cuda_set_bf16), bfloat16 NHWC, the layout of cuDNN's tensor-core kernels. Both
// are called "elements" below: 4 or 2 bytes.
struct vtr_conv_cuda {
    const vtr_conv_net *net;
    cudnnHandle_t handle;
    cudnnActivationDescriptor_t relu, relu6;
    bool bf16;
    // per layer: device weights (OC, C / groups, KH, KW), bfloat16 (OC, KH, KW, C / groups),
    // and bias (OC), in the engine's type; their descriptors
    void **weights, **biases;
    cudnnFilterDescriptor_t *filters;
    cudnnTensorDescriptor_t *bias_descs;
    cudnnConvolutionDescriptor_t *convs;
    // the plan for one input shape
    bool planned;
    int n, h, w;
    op_plan *ops;
    void **buffers; // device, buffer_elems each: per slot (0 unused), then a spare
    size_t buffer_elems;
    float *input;      // device (n, C, h, w) float32, as the caller gives it
    uint16_t *input16; // bfloat16: device (n, h, w, C), slot 0 (float32: input is)
    void *padded;      // device, padded_elems: the padded input of an asymmetric conv
    size_t padded_elems;
    float *output; // device (n, oh, ow, OC) float32
    void *workspace;
    size_t workspace_size;
    cudnnTensorDescriptor_t out_nchw, out_nhwc; // float32: the output's transform
    map_dims out_dims;
};

static cudnnDataType_t data_type(const vtr_conv_cuda *c)
{
    return c->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

static cudnnTensorFormat_t layout(const vtr_conv_cuda *c)
{
    return c->bf16 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

static size_t elem_size(const vtr_conv_cuda *c)
{
    return c->bf16 ? sizeof(uint16_t) : sizeof(float);
}

static vtr_status cudnn_fail(vtr_error *err, cudnnStatus_t s, const char *what)
{
    return vtr_fail(err, VTR_ERR_DEVICE, "cuDNN %s: %s", what, cudnnGetErrorString(s));
}

#define CUDNN_TRY(call, what)                                                                      \
    do {                                                                                           \
        cudnnStatus_t cudnn_try_s_ = (call);                                                       \
        if (cudnn_try_s_ != CUDNN_STATUS_SUCCESS) {                                                \
            st = cudnn_fail(err, cudnn_try_s_, what);                                              \
            goto end;                                                                              \
        }                                                                                          \
    } while (0)

// *ptr = bytes of device memory, or to end: out of memory names what and says what to do
#define CUDA_ALLOC(ptr, bytes, what, remedy)                                                       \
    do {                                                                                           \
        if ((st = vtr_cuda_malloc((void **)(ptr), (bytes), err)) != VTR_OK) {                      \
            vtr_error_context(err, "the CNN's %s on the GPU (%s)", what, remedy);                  \
            goto end;                                                                              \
        }                                                                                          \
    } while (0)
#define FEWER_FRAMES "fewer frames per batch, or --device cpu"

#define CUDA_TRY(call, what)                                                                       \
    do {                                                                                           \
        cudaError_t cuda_try_rc_ = (call);                                                         \
        if (cuda_try_rc_ != cudaSuccess) {                                                         \
            cudaGetLastError(); /* cleared, so that no later launch reports it */                  \
            st = vtr_cuda_fail(err, cuda_try_rc_, what);                                           \
            goto end;                                                                              \
        }                                                                                          \
    } while (0)

// y (outer, ph, pw, inner) = x (outer, h, w, inner) placed at row top, column left, zeros
// around it; counted in 16-bit units, so that one kernel pads both layouts: float32 NCHW is
// (n * C, h, w, 2), bfloat16 NHWC (n, h, w, C). Zero is all zero bits in either type.
static __global__ void pad_kernel(const uint16_t *x, uint16_t *y, size_t outer, int h, int w,
                                  int inner, int top, int left, int ph, int pw)
{
    size_t total = outer * ph * pw * inner;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t unit = i % inner, pixel = i / inner;
        int xx = (int)(pixel % pw) - left;
        size_t row = pixel / pw;
        int yy = (int)(row % ph) - top;
        size_t o = row / ph;
        y[i] = yy >= 0 && yy < h && xx >= 0 && xx < w ? x[((o * h + yy) * w + xx) * inner + unit]
                                                      : (uint16_t)0;
    }
}

// y (n, hw, c) bfloat16 = x (n, c, hw) float32: an NCHW batch (or (OC, C, KH, KW) weights) to
// NHWC (KH, KW, C inner)
static __global__ void to_bf16_nhwc(const float *x, uint16_t *y, size_t n, int c, size_t hw)
{
    size_t total = n * c * hw;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        size_t ch = i % c, rest = i / c, p = rest % hw, img = rest / hw;
        y[i] = vtr_float_to_bf16(x[(img * c + ch) * hw + p]);
    }
}

// y = x widened from bfloat16 to float32, element by element
static __global__ void from_bf16(const uint16_t *x, float *y, size_t count)
{
    for (size_t i = vtr_cuda_first(); i < count; i += vtr_cuda_stride())
        y[i] = vtr_bf16_to_float(x[i]);
}

// y (pixels, C) bfloat16 = act(y + bias (C)): the bias and activation of an unfused bfloat16
// conv, in float32, rounded once (vtr's own kernel, not cuDNN's AddTensor and Activation)
static __global__ void bias_act_bf16(uint16_t *y, const uint16_t *bias, size_t count, int C,
                                     int act)
{
    for (size_t i = vtr_cuda_first(); i < count; i += vtr_cuda_stride()) {
        float v = vtr_bf16_to_float(y[i]) + vtr_bf16_to_float(bias[i % C]);
        if (act != VTR_CONV_ACT_NONE)
            v = v > 0.0f ? v : 0.0f;
        if (act == VTR_CONV_ACT_RELU6)
            v = v < 6.0f ? v : 6.0f;
        y[i] = vtr_float_to_bf16(v);
    }
}

static bool symmetric_padding(const vtr_conv_layer *ly)
{
    return ly->pad_top == ly->pad_bottom && ly->pad_left == ly->pad_right;
}

static void plan_free(vtr_conv_cuda *c)
{
    if (c->ops) {
        for (size_t i = 0; i < c->net->n_ops; i++) {
            if (c->ops[i].src)
                cudnnDestroyTensorDescriptor(c->ops[i].src);
            if (c->ops[i].dst)
                cudnnDestroyTensorDescriptor(c->ops[i].dst);
            if (c->ops[i].pool)
                cudnnDestroyPoolingDescriptor(c->ops[i].pool);
        }
    }
    free(c->ops);
    c->ops = NULL;
    if (c->buffers)
        for (int b = 0; b <= c->net->slots; b++)
            cudaFree(c->buffers[b]);
    free(c->buffers);
    c->buffers = NULL;
    cudaFree(c->input);
    cudaFree(c->input16);
    cudaFree(c->output);
    cudaFree(c->padded);
    cudaFree(c->workspace);
    c->input = c->output = NULL;
    c->input16 = NULL;
    c->padded = NULL;
    c->padded_elems = 0;
    c->workspace = NULL;
    c->workspace_size = 0;
    if (c->out_nchw)
        cudnnDestroyTensorDescriptor(c->out_nchw);
    if (c->out_nhwc)
        cudnnDestroyTensorDescriptor(c->out_nhwc);
    c->out_nchw = c->out_nhwc = NULL;
    c->planned = false;
}

// Releases the layers' weights, biases and descriptors (upload_layers makes them; the
// arrays that hold them stay).
static void layers_free(vtr_conv_cuda *c)
{
    for (size_t l = 0; l < c->net->n_layers; l++) {
        cudaFree(c->weights[l]);
        cudaFree(c->biases[l]);
        if (c->filters[l])
            cudnnDestroyFilterDescriptor(c->filters[l]);
        if (c->bias_descs[l])
            cudnnDestroyTensorDescriptor(c->bias_descs[l]);
        if (c->convs[l])
            cudnnDestroyConvolutionDescriptor(c->convs[l]);
        c->weights[l] = c->biases[l] = NULL;
        c->filters[l] = NULL;
        c->bias_descs[l] = NULL;
        c->convs[l] = NULL;
    }
}

extern "C" void vtr_conv_cuda_free(vtr_conv_cuda *c)
{
    if (!c)
        return;
    plan_free(c);
    if (c->weights && c->biases && c->filters && c->bias_descs && c->convs)
        layers_free(c);
    free(c->weights);
    free(c->biases);
    free(c->filters);
    free(c->bias_descs);
    free(c->convs);
    if (c->relu)
        cudnnDestroyActivationDescriptor(c->relu);
    if (c->relu6)
        cudnnDestroyActivationDescriptor(c->relu6);
    if (c->handle)
        cudnnDestroy(c->handle);
    free(c);
}

// *dst = count float32 values from the host in the engine's type: as they are, or (bf16) each
// of the n blocks of (c, hw) transposed to (hw, c) and rounded to bfloat16
static vtr_status upload(const vtr_conv_cuda *c, const float *src, size_t n, int ch, size_t hw,
                         void **dst, vtr_error *err)
{
    vtr_status st = VTR_OK;
    size_t count = n * ch * hw;
    float *f32 = NULL;
    CUDA_ALLOC(&f32, count * sizeof(float), "weights", VTR_CUDA_MEMORY_REMEDY);
    CUDA_TRY(cudaMemcpy(f32, src, count * sizeof(float), cudaMemcpyHostToDevice), "copy weights");
    if (!c->bf16) {
        *dst = f32;
        return VTR_OK;
    }
    CUDA_ALLOC(dst, count * sizeof(uint16_t), "weights", VTR_CUDA_MEMORY_REMEDY);
    to_bf16_nhwc<<<vtr_cuda_blocks(count), VTR_CUDA_THREADS>>>(f32, (uint16_t *)*dst, n, ch, hw);
    st = vtr_cuda_launched("weights to bfloat16", err);
end:
    cudaFree(f32);
    return st;
}

// The layers' weights, biases and descriptors in the engine's precision.
static vtr_status upload_layers(vtr_conv_cuda *c, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_net *net = c->net;
    cudnnDataType_t type = data_type(c);
    for (size_t l = 0; l < net->n_layers; l++) {
        const vtr_conv_layer *ly = &net->layers[l];
        if (ly->groups < 1 || ly->in_channels % ly->groups)
            return vtr_fail(err, VTR_ERR_INVALID, "conv net layer %zu: %d groups for %d channels",
                            l, ly->groups, ly->in_channels);
        int group_c = ly->in_channels / ly->groups;
        // an asymmetric padding is done by pad_kernel, the conv itself pads nothing
        bool sym = symmetric_padding(ly);
        if ((st = upload(c, ly->weight, (size_t)ly->out_channels, group_c,
                         (size_t)ly->kernel_h * ly->kernel_w, &c->weights[l], err)) != VTR_OK ||
            (st = upload(c, ly->bias, 1, ly->out_channels, 1, &c->biases[l], err)) != VTR_OK)
            return st;
        CUDNN_TRY(cudnnCreateFilterDescriptor(&c->filters[l]), "filter");
        CUDNN_TRY(cudnnSetFilter4dDescriptor(c->filters[l], type, layout(c), ly->out_channels,
                                             group_c, ly->kernel_h, ly->kernel_w),
                  "filter");
        CUDNN_TRY(cudnnCreateTensorDescriptor(&c->bias_descs[l]), "bias");
        CUDNN_TRY(cudnnSetTensor4dDescriptor(c->bias_descs[l], layout(c), type, 1, ly->out_channels,
                                             1, 1),
                  "bias");
        CUDNN_TRY(cudnnCreateConvolutionDescriptor(&c->convs[l]), "convolution");
        CUDNN_TRY(cudnnSetConvolution2dDescriptor(c->convs[l], sym ? ly->pad_top : 0,
                                                  sym ? ly->pad_left : 0, ly->stride, ly->stride, 1,
                                                  1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "convolution");
        CUDNN_TRY(cudnnSetConvolutionGroupCount(c->convs[l], ly->groups), "group count");
        // float32: strict, no TF32 tensor-core conversion of the inputs; bfloat16: tensor
        // cores, float32 sums
        CUDNN_TRY(cudnnSetConvolutionMathType(c->convs[l],
                                              c->bf16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                  "math type");
    }
end:
    return st;
}

extern "C" vtr_status vtr_conv_cuda_new(const vtr_conv_net *net, vtr_conv_cuda **out,
                                        vtr_error *err)
{
    vtr_status st = VTR_OK;
    *out = NULL;
    if (!vtr_cuda_cublas())
        return vtr_fail(err, VTR_ERR_DEVICE,
                        "the GPU of the cuDNN engine is not chosen: "
                        "vtr_cuda_init first");
    size_t L = net->n_layers ? net->n_layers : 1;
    vtr_conv_cuda *c = (vtr_conv_cuda *)calloc(1, sizeof *c);
    if (!c)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    c->net = net;
    c->weights = (void **)calloc(L, sizeof *c->weights);
    c->biases = (void **)calloc(L, sizeof *c->biases);
    c->filters = (cudnnFilterDescriptor_t *)calloc(L, sizeof *c->filters);
    c->bias_descs = (cudnnTensorDescriptor_t *)calloc(L, sizeof *c->bias_descs);
    c->convs = (cudnnConvolutionDescriptor_t *)calloc(L, sizeof *c->convs);
    if (!c->weights || !c->biases || !c->filters || !c->bias_descs || !c->convs) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    CUDNN_TRY(cudnnCreate(&c->handle), "create");
    CUDNN_TRY(cudnnCreateActivationDescriptor(&c->relu), "activation");
    CUDNN_TRY(cudnnSetActivationDescriptor(c->relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN,
                                           0.0),
              "activation");
    CUDNN_TRY(cudnnCreateActivationDescriptor(&c->relu6), "activation");
    CUDNN_TRY(cudnnSetActivationDescriptor(c->relu6, CUDNN_ACTIVATION_CLIPPED_RELU,
                                           CUDNN_NOT_PROPAGATE_NAN, 6.0),
              "activation");
    if ((st = upload_layers(c, err)) != VTR_OK)
        goto end;
    *out = c;
    c = NULL;
end:
    vtr_conv_cuda_free(c);
    return st;
}

extern "C" vtr_status vtr_conv_cuda_set_bf16(vtr_conv_cuda *c, bool bf16, vtr_error *err)
{
    if (bf16 == c->bf16)
        return VTR_OK;
    if (bf16) {
        int device = 0;
        cudaDeviceProp prop;
        if (cudaGetDevice(&device) != cudaSuccess ||
            cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
            cudaGetLastError();
            return vtr_fail(err, VTR_ERR_DEVICE, "cannot read the GPU's properties");
        }
        if (prop.major < 8)
            return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                            "%s (compute capability %d.%d) has no bfloat16 tensor cores "
                            "(8.0 and later do)",
                            prop.name, prop.major, prop.minor);
    }
    plan_free(c);
    layers_free(c);
    c->bf16 = bf16;
    vtr_status st = upload_layers(c, err);
    if (st != VTR_OK) { // back to the precision the engine had (or none: run then refuses)
        layers_free(c);
        c->bf16 = !bf16;
        vtr_error ignored;
        if (upload_layers(c, &ignored) != VTR_OK)
            layers_free(c);
    }
    return st;
}

static vtr_status make_desc(const vtr_conv_cuda *c, cudnnTensorDescriptor_t *d, int n, map_dims m,
                            vtr_error *err)
{
    vtr_status st = VTR_OK;
    CUDNN_TRY(cudnnCreateTensorDescriptor(d), "tensor");
    CUDNN_TRY(cudnnSetTensor4dDescriptor(*d, layout(c), data_type(c), n, m.c, m.h, m.w), "tensor");
end:
    return st;
}

// The fastest algorithm that fits the workspace limit, by cuDNN's heuristics; implicit
// precomputed GEMM otherwise. float32: in strict float32 (FMA math) only. bfloat16: in
// whichever math cuDNN ranks first (tensor cores where it has them for the shape; a grouped
// conv may have none), set on the layer's descriptor as cuDNN asks.
static vtr_status pick_algo(vtr_conv_cuda *c, size_t layer, op_plan *p, size_t *ws,
                            vtr_error *err)
{
    vtr_status st = VTR_OK;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    p->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    if (c->bf16) // tensor cores allowed again (an earlier plan may have set another math)
        CUDNN_TRY(cudnnSetConvolutionMathType(c->convs[layer], CUDNN_TENSOR_OP_MATH), "math type");
    CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(c->handle, p->src, c->filters[layer],
                                                     c->convs[layer], p->dst,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf),
              "algorithm choice");
    for (int i = 0; i < got; i++) {
        if (perf[i].status == CUDNN_STATUS_SUCCESS &&
            (c->bf16 || perf[i].mathType == CUDNN_FMA_MATH) && perf[i].memory <= WORKSPACE_LIMIT) {
            p->algo = perf[i].algo;
            if (c->bf16)
                CUDNN_TRY(cudnnSetConvolutionMathType(c->convs[layer], perf[i].mathType),
                          "math type");
            break;
        }
    }
    CUDNN_TRY(cudnnGetConvolutionForwardWorkspaceSize(c->handle, p->src, c->filters[layer],
                                                      c->convs[layer], p->dst, p->algo, ws),
              "workspace size");
end:
    return st;
}

// op i's pooling descriptor, or VTR_ERR_UNSUPPORTED for padding that differs before and after
static vtr_status plan_pool(const vtr_conv_op *op, size_t i, op_plan *p, vtr_error *err)
{
    vtr_status st = VTR_OK;
    if (op->pad_begin != op->pad_end)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "conv net op %zu: pooling padding %d before, "
                        "%d after (cuDNN pads both sides alike)", i, op->pad_begin, op->pad_end);
    cudnnPoolingMode_t mode = op->kind == VTR_CONV_OP_MAXPOOL
                                  ? CUDNN_POOLING_MAX
                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    CUDNN_TRY(cudnnCreatePoolingDescriptor(&p->pool), "pooling");
    CUDNN_TRY(cudnnSetPooling2dDescriptor(p->pool, mode, CUDNN_NOT_PROPAGATE_NAN, op->kernel,
                                          op->kernel, op->pad_begin, op->pad_begin, op->stride,
                                          op->stride),
              "pooling");
end:
    return st;
}

// Output shapes come from cuDNN (cudnnGet*ForwardOutputDim) for the shapes that
// vtr_conv_net_check accepted.
static vtr_status plan(vtr_conv_cuda *c, int n, int h, int w, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_net *net = c->net;
    map_dims *dims = (map_dims *)calloc((size_t)net->slots, sizeof *dims);
    size_t most = (size_t)net->in_channels * h * w; // elements per image, over all maps
    size_t es = elem_size(c);
    c->ops = (op_plan *)calloc(net->n_ops, sizeof *c->ops);
    c->buffers = (void **)calloc((size_t)net->slots + 1, sizeof *c->buffers);
    if (!dims || !c->ops || !c->buffers) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    c->n = n;
    c->h = h;
    c->w = w;
    dims[0] = map_dims{net->in_channels, h, w};
    for (size_t i = 0; i < net->n_ops; i++) {
        const vtr_conv_op *op = &net->ops[i];
        op_plan *p = &c->ops[i];
        int on, oc, oh, ow;
        if (op->kind == VTR_CONV_OP_CONCAT) {
            map_dims o = {0, dims[op->srcs[0]].h, dims[op->srcs[0]].w};
            for (int k = 0; k < op->n_srcs; k++) {
                p->concat_c[k] = dims[op->srcs[k]].c;
                o.c += p->concat_c[k];
            }
            p->out = o;
        } else if (op->kind == VTR_CONV_OP_CONV) {
            const vtr_conv_layer *ly = &net->layers[op->layer];
            map_dims in = dims[op->src];
            if (!symmetric_padding(ly)) {
                p->unpadded = in;
                in.h += ly->pad_top + ly->pad_bottom;
                in.w += ly->pad_left + ly->pad_right;
                size_t elems = (size_t)n * in.c * in.h * in.w;
                if (elems > c->padded_elems)
                    c->padded_elems = elems;
            }
            if ((st = make_desc(c, &p->src, n, in, err)) != VTR_OK)
                goto end;
            CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(c->convs[op->layer], p->src,
                                                            c->filters[op->layer], &on, &oc, &oh,
                                                            &ow),
                      "convolution output size");
            p->out = map_dims{oc, oh, ow};
            size_t ws = 0;
            if ((st = make_desc(c, &p->dst, n, p->out, err)) != VTR_OK ||
                (st = pick_algo(c, (size_t)op->layer, p, &ws, err)) != VTR_OK)
                goto end;
            if (ws > c->workspace_size)
                c->workspace_size = ws;
        } else {
            if ((st = plan_pool(op, i, p, err)) != VTR_OK ||
                (st = make_desc(c, &p->src, n, dims[op->src], err)) != VTR_OK)
                goto end;
            CUDNN_TRY(cudnnGetPooling2dForwardOutputDim(p->pool, p->src, &on, &oc, &oh, &ow),
                      "pooling output size");
            p->out = map_dims{oc, oh, ow};
            if ((st = make_desc(c, &p->dst, n, p->out, err)) != VTR_OK)
                goto end;
        }
        size_t elems = (size_t)p->out.c * p->out.h * p->out.w;
        if (elems > most)
            most = elems;
        dims[op->dst] = p->out;
    }
    c->out_dims = dims[net->out_slot];
    // buffers: one per slot plus a spare that accumulating convs write into (cuDNN's fused
    // conv reads the shortcut z and writes y; they are kept apart), all of the largest size
    c->buffer_elems = most * (size_t)n;
    for (int b = 1; b <= net->slots; b++)
        CUDA_ALLOC(&c->buffers[b], c->buffer_elems * es, "activations", FEWER_FRAMES);
    CUDA_ALLOC(&c->input, (size_t)n * net->in_channels * h * w * sizeof(float), "input",
               FEWER_FRAMES);
    if (c->bf16)
        CUDA_ALLOC(&c->input16, (size_t)n * net->in_channels * h * w * sizeof(uint16_t), "input",
                   FEWER_FRAMES);
    CUDA_ALLOC(&c->output,
               (size_t)n * c->out_dims.c * c->out_dims.h * c->out_dims.w * sizeof(float), "output",
               FEWER_FRAMES);
    if (c->padded_elems)
        CUDA_ALLOC(&c->padded, c->padded_elems * es, "padded input", FEWER_FRAMES);
    if (c->workspace_size)
        CUDA_ALLOC(&c->workspace, c->workspace_size, "workspace", FEWER_FRAMES);
    if (!c->bf16) { // float32 NCHW maps: the output is cuDNN's transform to NHWC
        if ((st = make_desc(c, &c->out_nchw, n, c->out_dims, err)) != VTR_OK)
            goto end;
        CUDNN_TRY(cudnnCreateTensorDescriptor(&c->out_nhwc), "tensor");
        CUDNN_TRY(cudnnSetTensor4dDescriptor(c->out_nhwc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n,
                                             c->out_dims.c, c->out_dims.h, c->out_dims.w),
                  "tensor");
    }
    c->planned = true;
end:
    free(dims);
    if (st != VTR_OK)
        plan_free(c);
    return st;
}

// Slot s's device buffer: slot 0 is the input.
static const void *slot_data(const vtr_conv_cuda *c, int s)
{
    return s ? c->buffers[s] : c->input16 ? (const void *)c->input16 : (const void *)c->input;
}

// slot[dst] = the sources stacked along the channels: for each source one 2-D copy, of n rows
// of C_k * h * w elements at its channel offset within rows of sum C_k (NCHW), or of n * h * w
// rows of C_k elements within rows of sum C_k (NHWC).
static vtr_status run_concat(vtr_conv_cuda *c, const vtr_conv_op *op, const op_plan *p,
                             vtr_error *err)
{
    vtr_status st = VTR_OK;
    size_t plane = (size_t)p->out.h * p->out.w, offset = 0, es = elem_size(c);
    size_t rows = c->bf16 ? (size_t)c->n * plane : (size_t)c->n;
    size_t per_channel = c->bf16 ? 1 : plane; // elements of one channel in a row
    char *y = (char *)c->buffers[op->dst];
    for (int k = 0; k < op->n_srcs; k++) {
        size_t bytes = (size_t)p->concat_c[k] * per_channel * es;
        CUDA_TRY(cudaMemcpy2DAsync(y + offset * per_channel * es,
                                   (size_t)p->out.c * per_channel * es, slot_data(c, op->srcs[k]),
                                   bytes, bytes, rows, cudaMemcpyDeviceToDevice, 0),
                 "concat");
        offset += (size_t)p->concat_c[k];
    }
end:
    return st;
}

// One op on the device. Slot s >= 1 lives in buffers[s]; slot 0 is the input.
static vtr_status run_op(vtr_conv_cuda *c, size_t i, vtr_error *err)
{
    vtr_status st = VTR_OK;
    cudnnStatus_t fused = CUDNN_STATUS_NOT_SUPPORTED; // the fused conv's, where it is tried
    const vtr_conv_net *net = c->net;
    const vtr_conv_op *op = &net->ops[i];
    const op_plan *p = &c->ops[i];
    if (op->kind == VTR_CONV_OP_CONCAT) // src unused
        return run_concat(c, op, p, err);
    const float one = 1.0f, zero = 0.0f;
    const void *x = slot_data(c, op->src);
    void *y = c->buffers[op->dst];
    int l = op->layer;
    if (op->kind != VTR_CONV_OP_CONV) {
        CUDNN_TRY(cudnnPoolingForward(c->handle, p->pool, &one, p->src, x, &zero, p->dst, y),
                  "pooling");
        return VTR_OK;
    }
    if (p->unpadded.c) {
        const vtr_conv_layer *ly = &net->layers[l];
        // in 16-bit units: (n * C, h, w, 2) for float32 NCHW, (n, h, w, C) for bfloat16 NHWC
        size_t outer = c->bf16 ? (size_t)c->n : (size_t)c->n * p->unpadded.c;
        int inner = c->bf16 ? p->unpadded.c : 2;
        int ph = p->unpadded.h + ly->pad_top + ly->pad_bottom;
        int pw = p->unpadded.w + ly->pad_left + ly->pad_right;
        pad_kernel<<<vtr_cuda_blocks(outer * ph * pw * inner), VTR_CUDA_THREADS>>>(
            (const uint16_t *)x, (uint16_t *)c->padded, outer, p->unpadded.h, p->unpadded.w, inner,
            ly->pad_top, ly->pad_left, ph, pw);
        if ((st = vtr_cuda_launched("conv input padding", err)) != VTR_OK)
            return st;
        x = c->padded;
    }
    if (op->act == VTR_CONV_ACT_RELU) {
        // out = ReLU(conv(x) + bias [+ y]): with accumulate, the shortcut y stays where it
        // is and the result goes to the spare buffer, which then becomes dst's
        const float alpha2 = op->accumulate ? 1.0f : 0.0f;
        int spare = net->slots;
        void *out = op->accumulate ? c->buffers[spare] : y;
        fused = cudnnConvolutionBiasActivationForward(
            c->handle, &one, p->src, x, c->filters[l], c->weights[l], c->convs[l], p->algo,
            c->workspace, c->workspace_size, &alpha2, p->dst, y, c->bias_descs[l], c->biases[l],
            c->relu, p->dst, out);
        if (fused == CUDNN_STATUS_SUCCESS && op->accumulate) {
            c->buffers[spare] = y;
            c->buffers[op->dst] = out;
        }
        // refused: the unfused calls below (bfloat16: also a refusal of its arguments, as
        // cuDNN's fused bfloat16 configurations vary between versions)
        if (fused == CUDNN_STATUS_NOT_SUPPORTED || (c->bf16 && fused == CUDNN_STATUS_BAD_PARAM))
            fused = CUDNN_STATUS_NOT_SUPPORTED;
        else
            CUDNN_TRY(fused, "fused convolution");
    }
    if (fused == CUDNN_STATUS_NOT_SUPPORTED) {
        // y = act(conv(x) [+ y] + bias): the identity activation is not fused (cuDNN fuses it
        // with one algorithm only), nor is ReLU6 (cuDNN's fused conv takes ReLU only), nor a
        // ReLU whose algorithm the fused call refuses
        const float beta = op->accumulate ? 1.0f : 0.0f;
        CUDNN_TRY(cudnnConvolutionForward(c->handle, &one, p->src, x, c->filters[l],
                                          c->weights[l], c->convs[l], p->algo, c->workspace,
                                          c->workspace_size, &beta, p->dst, y),
                  "convolution");
        if (c->bf16) {
            size_t count = (size_t)c->n * p->out.c * p->out.h * p->out.w;
            bias_act_bf16<<<vtr_cuda_blocks(count), VTR_CUDA_THREADS>>>(
                (uint16_t *)y, (const uint16_t *)c->biases[l], count, p->out.c, (int)op->act);
            return vtr_cuda_launched("conv bias and activation", err);
        }
        CUDNN_TRY(cudnnAddTensor(c->handle, &one, c->bias_descs[l], c->biases[l], &one, p->dst, y),
                  "bias");
        if (op->act != VTR_CONV_ACT_NONE)
            CUDNN_TRY(cudnnActivationForward(c->handle,
                                             op->act == VTR_CONV_ACT_RELU ? c->relu : c->relu6,
                                             &one, p->dst, y, &zero, p->dst, y),
                      "activation");
    }
end:
    return st;
}

extern "C" vtr_status vtr_conv_cuda_run(vtr_conv_cuda *c, const float *in, int n, int h, int w,
                                        float *out, vtr_error *err)
{
    vtr_status st = VTR_OK;
    const vtr_conv_net *net = c->net;
    if (n == 0)
        return VTR_OK;
    if (n < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "conv net: batch of %d", n);
    if (net->n_layers && !c->filters[0])
        return vtr_fail(err, VTR_ERR_DEVICE,
                        "conv net: the cuDNN engine lost its weights in a "
                        "failed change of precision; make a new one");
    if ((st = vtr_conv_net_check(net, h, w, err)) != VTR_OK)
        return st;
    if (!c->planned || c->n != n || c->h != h || c->w != w) {
        plan_free(c);
        if ((st = plan(c, n, h, w, err)) != VTR_OK)
            return st;
    }
    size_t in_count = (size_t)n * net->in_channels * h * w;
    size_t out_count = (size_t)n * c->out_dims.c * c->out_dims.h * c->out_dims.w;
    CUDA_TRY(cudaMemcpy(c->input, in, in_count * sizeof(float), cudaMemcpyHostToDevice),
             "copy input");
    if (c->bf16) {
        to_bf16_nhwc<<<vtr_cuda_blocks(in_count), VTR_CUDA_THREADS>>>(
            c->input, c->input16, (size_t)n, net->in_channels, (size_t)h * w);
        if ((st = vtr_cuda_launched("input to bfloat16", err)) != VTR_OK)
            goto end;
    }
    for (size_t i = 0; i < net->n_ops; i++)
        if ((st = run_op(c, i, err)) != VTR_OK)
            goto end;
    if (c->bf16) { // the last map is NHWC already: widened
        from_bf16<<<vtr_cuda_blocks(out_count), VTR_CUDA_THREADS>>>(
            (const uint16_t *)c->buffers[net->out_slot], c->output, out_count);
        if ((st = vtr_cuda_launched("output to float32", err)) != VTR_OK)
            goto end;
    } else {
        const float one = 1.0f, zero = 0.0f;
        CUDNN_TRY(cudnnTransformTensor(c->handle, &one, c->out_nchw, c->buffers[net->out_slot],
                                       &zero, c->out_nhwc, c->output),
                  "NHWC output");
    }
    CUDA_TRY(cudaMemcpy(out, c->output, out_count * sizeof(float), cudaMemcpyDeviceToHost),
             "copy output");
end:
    return st;
}
