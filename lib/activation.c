#include "activation.h"

/* Elements below which a loop stays on one thread (the fork costs more than it saves). */
#define PARALLEL_MIN 32768

void vtr_relu_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_relu(inp[i]);
}

void vtr_relu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_relu_grad(inp[i]);
}

void vtr_gelu_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_gelu(inp[i]);
}

void vtr_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_gelu_grad(inp[i]);
}

void vtr_tanh_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = tanhf(inp[i]);
}

void vtr_tanh_backward(float *dinp, const float *dout, const float *out, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_tanh_grad(out[i]);
}

void vtr_sigmoid_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_sigmoid(inp[i]);
}

void vtr_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_sigmoid_grad(out[i]);
}

/* dst[i] (+)= src[i] * multiplier of element i, one Philox block per 4 elements. */
static void dropout_apply(float *dst, const float *src, size_t n, float p, uint64_t seed,
                          uint64_t stream, int accumulate)
{
    const vtr_dropout_scale s = vtr_dropout_scale_of(p);
    size_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN / 4)
    for (size_t blk = 0; blk < blocks; blk++) {
        uint32_t words[4];
        vtr_philox_block(seed, stream, blk, words);
        for (size_t k = 0; k < 4 && blk * 4 + k < n; k++) {
            size_t i = blk * 4 + k;
            float v = src[i] * vtr_dropout_multiplier(words[k], s);
            dst[i] = accumulate ? dst[i] + v : v;
        }
    }
}

void vtr_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t seed,
                         uint64_t stream)
{
    dropout_apply(out, inp, n, p, seed, stream, 0);
}

void vtr_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t seed,
                          uint64_t stream)
{
    dropout_apply(dinp, dout, n, p, seed, stream, 1);
}
