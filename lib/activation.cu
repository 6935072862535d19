// CUDA side of lib/activation.h: one thread per element (grid-stride), the math from the
// VTR_HD functions there. inp, out, dinp, dout (n), device memory.
#include "lib/activation.h"
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"

__global__ static void relu_forward_kernel(float *out, const float *inp, size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        out[i] = vtr_relu(inp[i]);
}

__global__ static void relu_backward_kernel(float *dinp, const float *dout, const float *inp,
                                            size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        dinp[i] += dout[i] * vtr_relu_grad(inp[i]);
}

__global__ static void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        out[i] = vtr_gelu(inp[i]);
}

__global__ static void gelu_backward_kernel(float *dinp, const float *dout, const float *inp,
                                            size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        dinp[i] += dout[i] * vtr_gelu_grad(inp[i]);
}

__global__ static void tanh_forward_kernel(float *out, const float *inp, size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        out[i] = vtr_tanh(inp[i]);
}

__global__ static void tanh_backward_kernel(float *dinp, const float *dout, const float *out,
                                            size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        dinp[i] += dout[i] * vtr_tanh_grad(out[i]);
}

__global__ static void sigmoid_forward_kernel(float *out, const float *inp, size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        out[i] = vtr_sigmoid(inp[i]);
}

__global__ static void sigmoid_backward_kernel(float *dinp, const float *dout, const float *out,
                                               size_t n)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride())
        dinp[i] += dout[i] * vtr_sigmoid_grad(out[i]);
}

// dst[i] (+)= src[i] * the multiplier of element i, drawn as the CPU draws it
__global__ static void dropout_kernel(float *dst, const float *src, size_t n, vtr_dropout_scale s,
                                      uint64_t seed, uint64_t stream, uint64_t first,
                                      int accumulate)
{
    for (size_t i = vtr_cuda_first(); i < n; i += vtr_cuda_stride()) {
        float v = src[i] * vtr_dropout_multiplier(vtr_philox_word_at(seed, stream, first + i), s);
        dst[i] = accumulate ? dst[i] + v : v;
    }
}

extern "C" vtr_status vtr_cuda_relu_forward(float *out, const float *inp, size_t n, vtr_error *err)
{
    relu_forward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(out, inp, n);
    return vtr_cuda_launched("relu forward", err);
}

extern "C" vtr_status vtr_cuda_relu_backward(float *dinp, const float *dout, const float *inp,
                                             size_t n, vtr_error *err)
{
    relu_backward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(dinp, dout, inp, n);
    return vtr_cuda_launched("relu backward", err);
}

extern "C" vtr_status vtr_cuda_gelu_forward(float *out, const float *inp, size_t n, vtr_error *err)
{
    gelu_forward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(out, inp, n);
    return vtr_cuda_launched("gelu forward", err);
}

extern "C" vtr_status vtr_cuda_gelu_backward(float *dinp, const float *dout, const float *inp,
                                             size_t n, vtr_error *err)
{
    gelu_backward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(dinp, dout, inp, n);
    return vtr_cuda_launched("gelu backward", err);
}

extern "C" vtr_status vtr_cuda_tanh_forward(float *out, const float *inp, size_t n, vtr_error *err)
{
    tanh_forward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(out, inp, n);
    return vtr_cuda_launched("tanh forward", err);
}

extern "C" vtr_status vtr_cuda_tanh_backward(float *dinp, const float *dout, const float *out,
                                             size_t n, vtr_error *err)
{
    tanh_backward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(dinp, dout, out, n);
    return vtr_cuda_launched("tanh backward", err);
}

extern "C" vtr_status vtr_cuda_sigmoid_forward(float *out, const float *inp, size_t n,
                                               vtr_error *err)
{
    sigmoid_forward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(out, inp, n);
    return vtr_cuda_launched("sigmoid forward", err);
}

extern "C" vtr_status vtr_cuda_sigmoid_backward(float *dinp, const float *dout, const float *out,
                                                size_t n, vtr_error *err)
{
    sigmoid_backward_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(dinp, dout, out, n);
    return vtr_cuda_launched("sigmoid backward", err);
}

extern "C" vtr_status vtr_cuda_dropout_forward(float *out, const float *inp, size_t n, float p,
                                               uint64_t seed, uint64_t stream, uint64_t first,
                                               vtr_error *err)
{
    dropout_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(out, inp, n, vtr_dropout_scale_of(p),
                                                             seed, stream, first, 0);
    return vtr_cuda_launched("dropout forward", err);
}

extern "C" vtr_status vtr_cuda_dropout_backward(float *dinp, const float *dout, size_t n, float p,
                                                uint64_t seed, uint64_t stream, uint64_t first,
                                                vtr_error *err)
{
    dropout_kernel<<<vtr_cuda_blocks(n), VTR_CUDA_THREADS>>>(dinp, dout, n, vtr_dropout_scale_of(p),
                                                             seed, stream, first, 1);
    return vtr_cuda_launched("dropout backward", err);
}
