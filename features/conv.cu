// The CUDA engine of folded conv nets (features/conv.h) on cuDNN's convolution API.
// Launch and memory glue only: the math is cuDNN's. Errors become text once, here
// (cudnnGetErrorString, cudaGetErrorString).
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "features/conv.h"
#include "lib/cuda_launch.h"

// the largest workspace one conv may ask for (algorithms needing more are passed over)
#define WORKSPACE_LIMIT ((size_t)1 << 30)

struct map_dims {
    int c, h, w;
};

struct op_plan {
    cudnnTensorDescriptor_t src, dst; // NCHW float32 at the planned batch (CONCAT: none);
                                      // a padded conv's src is its padded input
    map_dims out;                     // dst's shape
    map_dims unpadded;                // CONV with asymmetric padding: its input (c == 0:
                                      // cuDNN pads)
    cudnnConvolutionFwdAlgo_t algo;   // CONV
    cudnnPoolingDescriptor_t pool;    // pools
    int concat_c[VTR_CONV_MAX_CONCAT]; // CONCAT: each source's channels
};

struct vtr_conv_cuda {
    const vtr_conv_net *net;
    cudnnHandle_t handle;
    cudnnActivationDescriptor_t relu, relu6;
    // per layer: device weights (OC, C / groups, KH, KW) and bias (OC), their descriptors
    float **weights, **biases;
    cudnnFilterDescriptor_t *filters;
    cudnnTensorDescriptor_t *bias_descs;
    cudnnConvolutionDescriptor_t *convs;
    // the plan for one input shape
    bool planned;
    int n, h, w;
    op_plan *ops;
    float **buffers;     // device, buffer_floats each: per slot (0 unused), then a spare
    size_t buffer_floats;
    float *input;        // device (n, C, h, w)
    float *padded;       // device, padded_floats: the padded input of an asymmetric conv
    size_t padded_floats;
    float *output;       // device (n, oh, ow, OC)
    void *workspace;
    size_t workspace_size;
    cudnnTensorDescriptor_t out_nchw, out_nhwc;
    map_dims out_dims;
};

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

#define CUDA_TRY(call, what)                                                                       \
    do {                                                                                           \
        cudaError_t cuda_try_rc_ = (call);                                                         \
        if (cuda_try_rc_ != cudaSuccess) {                                                         \
            cudaGetLastError(); /* cleared, so that no later launch reports it */                  \
            st = vtr_cuda_fail(err, cuda_try_rc_, what);                                           \
            goto end;                                                                              \
        }                                                                                          \
    } while (0)

// y (planes, ph, pw) = x (planes, h, w) placed at row top, column left, zeros around it
static __global__ void pad_kernel(const float *x, float *y, size_t planes, int h, int w,
                                  int top, int left, int ph, int pw)
{
    size_t total = planes * ph * pw;
    for (size_t i = vtr_cuda_first(); i < total; i += vtr_cuda_stride()) {
        int xx = (int)(i % pw) - left;
        size_t row = i / pw;
        int yy = (int)(row % ph) - top;
        size_t plane = row / ph;
        y[i] = yy >= 0 && yy < h && xx >= 0 && xx < w ? x[(plane * h + yy) * w + xx] : 0.0f;
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
    cudaFree(c->output);
    cudaFree(c->padded);
    cudaFree(c->workspace);
    c->input = c->output = c->padded = NULL;
    c->padded_floats = 0;
    c->workspace = NULL;
    c->workspace_size = 0;
    if (c->out_nchw)
        cudnnDestroyTensorDescriptor(c->out_nchw);
    if (c->out_nhwc)
        cudnnDestroyTensorDescriptor(c->out_nhwc);
    c->out_nchw = c->out_nhwc = NULL;
    c->planned = false;
}

extern "C" void vtr_conv_cuda_free(vtr_conv_cuda *c)
{
    if (!c)
        return;
    plan_free(c);
    for (size_t l = 0; l < c->net->n_layers; l++) {
        if (c->weights)
            cudaFree(c->weights[l]);
        if (c->biases)
            cudaFree(c->biases[l]);
        if (c->filters && c->filters[l])
            cudnnDestroyFilterDescriptor(c->filters[l]);
        if (c->bias_descs && c->bias_descs[l])
            cudnnDestroyTensorDescriptor(c->bias_descs[l]);
        if (c->convs && c->convs[l])
            cudnnDestroyConvolutionDescriptor(c->convs[l]);
    }
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
    c->weights = (float **)calloc(L, sizeof *c->weights);
    c->biases = (float **)calloc(L, sizeof *c->biases);
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
    for (size_t l = 0; l < net->n_layers; l++) {
        const vtr_conv_layer *ly = &net->layers[l];
        if (ly->groups < 1 || ly->in_channels % ly->groups) {
            st = vtr_fail(err, VTR_ERR_INVALID, "conv net layer %zu: %d groups for %d channels",
                          l, ly->groups, ly->in_channels);
            goto end;
        }
        int group_c = ly->in_channels / ly->groups;
        size_t nw = (size_t)ly->out_channels * group_c * ly->kernel_h * ly->kernel_w;
        // an asymmetric padding is done by pad_kernel, the conv itself pads nothing
        bool sym = symmetric_padding(ly);
        CUDA_TRY(cudaMalloc((void **)&c->weights[l], nw * sizeof(float)), "malloc weights");
        CUDA_TRY(cudaMalloc((void **)&c->biases[l], (size_t)ly->out_channels * sizeof(float)),
                 "malloc bias");
        CUDA_TRY(cudaMemcpy(c->weights[l], ly->weight, nw * sizeof(float), cudaMemcpyHostToDevice),
                 "copy weights");
        CUDA_TRY(cudaMemcpy(c->biases[l], ly->bias, (size_t)ly->out_channels * sizeof(float),
                            cudaMemcpyHostToDevice),
                 "copy bias");
        CUDNN_TRY(cudnnCreateFilterDescriptor(&c->filters[l]), "filter");
        CUDNN_TRY(cudnnSetFilter4dDescriptor(c->filters[l], CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                             ly->out_channels, group_c, ly->kernel_h,
                                             ly->kernel_w),
                  "filter");
        CUDNN_TRY(cudnnCreateTensorDescriptor(&c->bias_descs[l]), "bias");
        CUDNN_TRY(cudnnSetTensor4dDescriptor(c->bias_descs[l], CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                             1, ly->out_channels, 1, 1),
                  "bias");
        CUDNN_TRY(cudnnCreateConvolutionDescriptor(&c->convs[l]), "convolution");
        CUDNN_TRY(cudnnSetConvolution2dDescriptor(c->convs[l], sym ? ly->pad_top : 0,
                                                  sym ? ly->pad_left : 0, ly->stride, ly->stride,
                                                  1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "convolution");
        CUDNN_TRY(cudnnSetConvolutionGroupCount(c->convs[l], ly->groups), "group count");
        // strict float32: no TF32 tensor-core conversion of the inputs
        CUDNN_TRY(cudnnSetConvolutionMathType(c->convs[l], CUDNN_FMA_MATH), "math type");
    }
    *out = c;
    c = NULL;
end:
    vtr_conv_cuda_free(c);
    return st;
}

static vtr_status make_desc(cudnnTensorDescriptor_t *d, int n, map_dims m, vtr_error *err)
{
    vtr_status st = VTR_OK;
    CUDNN_TRY(cudnnCreateTensorDescriptor(d), "tensor");
    CUDNN_TRY(cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, m.c, m.h, m.w),
              "tensor");
end:
    return st;
}

// The fastest algorithm in strict float32 that fits the workspace limit, by cuDNN's
// heuristics; implicit precomputed GEMM (always available for NCHW float32) otherwise.
static vtr_status pick_algo(vtr_conv_cuda *c, size_t layer, op_plan *p, size_t *ws,
                            vtr_error *err)
{
    vtr_status st = VTR_OK;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    p->algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(c->handle, p->src, c->filters[layer],
                                                     c->convs[layer], p->dst,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf),
              "algorithm choice");
    for (int i = 0; i < got; i++) {
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH &&
            perf[i].memory <= WORKSPACE_LIMIT) {
            p->algo = perf[i].algo;
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
    size_t most = (size_t)net->in_channels * h * w; // floats per image, over all maps
    c->ops = (op_plan *)calloc(net->n_ops, sizeof *c->ops);
    c->buffers = (float **)calloc((size_t)net->slots + 1, sizeof *c->buffers);
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
                size_t floats = (size_t)n * in.c * in.h * in.w;
                if (floats > c->padded_floats)
                    c->padded_floats = floats;
            }
            if ((st = make_desc(&p->src, n, in, err)) != VTR_OK)
                goto end;
            CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(c->convs[op->layer], p->src,
                                                            c->filters[op->layer], &on, &oc, &oh,
                                                            &ow),
                      "convolution output size");
            p->out = map_dims{oc, oh, ow};
            size_t ws = 0;
            if ((st = make_desc(&p->dst, n, p->out, err)) != VTR_OK ||
                (st = pick_algo(c, (size_t)op->layer, p, &ws, err)) != VTR_OK)
                goto end;
            if (ws > c->workspace_size)
                c->workspace_size = ws;
        } else {
            if ((st = plan_pool(op, i, p, err)) != VTR_OK ||
                (st = make_desc(&p->src, n, dims[op->src], err)) != VTR_OK)
                goto end;
            CUDNN_TRY(cudnnGetPooling2dForwardOutputDim(p->pool, p->src, &on, &oc, &oh, &ow),
                      "pooling output size");
            p->out = map_dims{oc, oh, ow};
            if ((st = make_desc(&p->dst, n, p->out, err)) != VTR_OK)
                goto end;
        }
        size_t floats = (size_t)p->out.c * p->out.h * p->out.w;
        if (floats > most)
            most = floats;
        dims[op->dst] = p->out;
    }
    c->out_dims = dims[net->out_slot];
    // buffers: one per slot plus a spare that accumulating convs write into (cuDNN's fused
    // conv reads the shortcut z and writes y; they are kept apart), all of the largest size
    c->buffer_floats = most * (size_t)n;
    for (int b = 1; b <= net->slots; b++)
        CUDA_TRY(cudaMalloc((void **)&c->buffers[b], c->buffer_floats * sizeof(float)),
                 "malloc activations");
    CUDA_TRY(cudaMalloc((void **)&c->input, (size_t)n * net->in_channels * h * w * sizeof(float)),
             "malloc input");
    CUDA_TRY(cudaMalloc((void **)&c->output, (size_t)n * c->out_dims.c * c->out_dims.h *
                                                 c->out_dims.w * sizeof(float)),
             "malloc output");
    if (c->padded_floats)
        CUDA_TRY(cudaMalloc((void **)&c->padded, c->padded_floats * sizeof(float)),
                 "malloc padded input");
    if (c->workspace_size)
        CUDA_TRY(cudaMalloc(&c->workspace, c->workspace_size), "malloc workspace");
    if ((st = make_desc(&c->out_nchw, n, c->out_dims, err)) != VTR_OK)
        goto end;
    CUDNN_TRY(cudnnCreateTensorDescriptor(&c->out_nhwc), "tensor");
    CUDNN_TRY(cudnnSetTensor4dDescriptor(c->out_nhwc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n,
                                         c->out_dims.c, c->out_dims.h, c->out_dims.w),
              "tensor");
    c->planned = true;
end:
    free(dims);
    if (st != VTR_OK)
        plan_free(c);
    return st;
}

// Slot s's device buffer: slot 0 is the input.
static const float *slot_data(const vtr_conv_cuda *c, int s)
{
    return s ? c->buffers[s] : c->input;
}

// slot[dst] (n, sum C_k, h, w) = the sources stacked along the channels: for each source one
// 2-D copy of n rows of C_k * h * w floats, at its channel offset within rows of sum C_k.
static vtr_status run_concat(vtr_conv_cuda *c, const vtr_conv_op *op, const op_plan *p,
                             vtr_error *err)
{
    vtr_status st = VTR_OK;
    size_t plane = (size_t)p->out.h * p->out.w, offset = 0;
    float *y = c->buffers[op->dst];
    for (int k = 0; k < op->n_srcs; k++) {
        size_t bytes = (size_t)p->concat_c[k] * plane * sizeof(float);
        CUDA_TRY(cudaMemcpy2DAsync(y + offset * plane, (size_t)p->out.c * plane * sizeof(float),
                                   slot_data(c, op->srcs[k]), bytes, bytes, (size_t)c->n,
                                   cudaMemcpyDeviceToDevice, 0),
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
    const float *x = slot_data(c, op->src);
    float *y = c->buffers[op->dst];
    int l = op->layer;
    if (op->kind != VTR_CONV_OP_CONV) {
        CUDNN_TRY(cudnnPoolingForward(c->handle, p->pool, &one, p->src, x, &zero, p->dst, y),
                  "pooling");
        return VTR_OK;
    }
    if (p->unpadded.c) {
        const vtr_conv_layer *ly = &net->layers[l];
        size_t planes = (size_t)c->n * p->unpadded.c;
        int ph = p->unpadded.h + ly->pad_top + ly->pad_bottom;
        int pw = p->unpadded.w + ly->pad_left + ly->pad_right;
        pad_kernel<<<vtr_cuda_blocks(planes * ph * pw), VTR_CUDA_THREADS>>>(
            x, c->padded, planes, p->unpadded.h, p->unpadded.w, ly->pad_top, ly->pad_left, ph, pw);
        if ((st = vtr_cuda_launched("conv input padding", err)) != VTR_OK)
            return st;
        x = c->padded;
    }
    if (op->act == VTR_CONV_ACT_RELU) {
        // out = ReLU(conv(x) + bias [+ y]): with accumulate, the shortcut y stays where it
        // is and the result goes to the spare buffer, which then becomes dst's
        const float alpha2 = op->accumulate ? 1.0f : 0.0f;
        int spare = net->slots;
        float *out = op->accumulate ? c->buffers[spare] : y;
        fused = cudnnConvolutionBiasActivationForward(
            c->handle, &one, p->src, x, c->filters[l], c->weights[l], c->convs[l], p->algo,
            c->workspace, c->workspace_size, &alpha2, p->dst, y, c->bias_descs[l], c->biases[l],
            c->relu, p->dst, out);
        if (fused == CUDNN_STATUS_SUCCESS && op->accumulate) {
            c->buffers[spare] = y;
            c->buffers[op->dst] = out;
        }
        if (fused != CUDNN_STATUS_NOT_SUPPORTED) // else: the unfused calls below
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
    if ((st = vtr_conv_net_check(net, h, w, err)) != VTR_OK)
        return st;
    if (!c->planned || c->n != n || c->h != h || c->w != w) {
        plan_free(c);
        if ((st = plan(c, n, h, w, err)) != VTR_OK)
            return st;
    }
    CUDA_TRY(cudaMemcpy(c->input, in, (size_t)n * net->in_channels * h * w * sizeof(float),
                        cudaMemcpyHostToDevice),
             "copy input");
    for (size_t i = 0; i < net->n_ops; i++)
        if ((st = run_op(c, i, err)) != VTR_OK)
            goto end;
    {
        const float one = 1.0f, zero = 0.0f;
        CUDNN_TRY(cudnnTransformTensor(c->handle, &one, c->out_nchw,
                                       c->buffers[net->out_slot], &zero, c->out_nhwc,
                                       c->output),
                  "NHWC output");
    }
    CUDA_TRY(cudaMemcpy(out, c->output, (size_t)n * c->out_dims.c * c->out_dims.h *
                                            c->out_dims.w * sizeof(float),
                        cudaMemcpyDeviceToHost),
             "copy output");
end:
    return st;
}
