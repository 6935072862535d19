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
        out[i] = vtr_tanh(inp[i]);
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

/* dst[i] (+)= src[i] * multiplier of element i (draw first + i), one Philox block per 4
 * draws. */
static void dropout_apply(float *dst, const float *src, size_t n, float p, uint64_t seed,
                          uint64_t stream, uint64_t first, int accumulate)
{
    if (n == 0)
        return;
    const vtr_dropout_scale s = vtr_dropout_scale_of(p);
    uint64_t blk0 = first / 4, blocks = (first + n - 1) / 4 - blk0 + 1;
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN / 4)
    for (uint64_t b = 0; b < blocks; b++) {
        uint32_t words[4];
        vtr_philox_block(seed, stream, blk0 + b, words);
        for (uint64_t k = 0; k < 4; k++) {
            uint64_t draw = (blk0 + b) * 4 + k;
            if (draw < first || draw >= first + n)
                continue;
            size_t i = (size_t)(draw - first);
            float v = src[i] * vtr_dropout_multiplier(words[k], s);
            dst[i] = accumulate ? dst[i] + v : v;
        }
    }
}

void vtr_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t seed,
                         uint64_t stream, uint64_t first)
{
    dropout_apply(out, inp, n, p, seed, stream, first, 0);
}

void vtr_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t seed,
                          uint64_t stream, uint64_t first)
{
    dropout_apply(dinp, dout, n, p, seed, stream, first, 1);
}
