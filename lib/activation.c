#include "activation.h"

/* Elements below which a loop stays on one thread (the fork costs more than it saves). */
#define PARALLEL_MIN 32768

/* The heaviest loops (GELU, dropout) run as CHUNKS ranges of whole 16-element blocks, in
 * parallel, each through a VTR_CLONES function (lib/hostdevice.h): 16 AVX-512 lanes where
 * the x86-64 baseline has 4. */
enum { CHUNKS = 64, CHUNK_BLOCK = 16 };

/* The first element of range c (0 .. CHUNKS) of n; range c is [begin(c), begin(c + 1)). */
static size_t chunk_begin(size_t n, size_t c)
{
    size_t per = (n / CHUNKS + CHUNK_BLOCK) / CHUNK_BLOCK * CHUNK_BLOCK; /* >= n / CHUNKS */
    return c * per < n ? c * per : n;
}

void vtr_relu_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for simd schedule(simd : static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_relu(inp[i]);
}

void vtr_relu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
#pragma omp parallel for simd schedule(simd : static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_relu_grad(inp[i]);
}

/* GELU's loops in SIMD lanes, vtr_erff and vtr_expf being plain arithmetic (n = 2^21, 2
 * threads of an AMD EPYC VM, SSE2: forward 10.7 -> 4.3 ms, backward 14.1 -> 5.9 ms, from
 * calls to libm's erff and expf). With AVX-512 (16 lanes) these and dropout's loops took
 * about 4% off a set-embedding training step (bench/train_step, A/B on that VM). */
static VTR_CLONES void gelu_forward_range(float *out, const float *inp, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_gelu(inp[i]);
}

static VTR_CLONES void gelu_backward_range(float *dinp, const float *dout, const float *inp,
                                           size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_gelu_grad(inp[i]);
}

void vtr_gelu_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t c = 0; c < CHUNKS; c++) {
        size_t b = chunk_begin(n, c);
        gelu_forward_range(out + b, inp + b, chunk_begin(n, c + 1) - b);
    }
}

void vtr_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN)
    for (size_t c = 0; c < CHUNKS; c++) {
        size_t b = chunk_begin(n, c);
        gelu_backward_range(dinp + b, dout + b, inp + b, chunk_begin(n, c + 1) - b);
    }
}

void vtr_tanh_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for simd schedule(simd : static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_tanh(inp[i]);
}

void vtr_tanh_backward(float *dinp, const float *dout, const float *out, size_t n)
{
#pragma omp parallel for simd schedule(simd : static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_tanh_grad(out[i]);
}

void vtr_sigmoid_forward(float *out, const float *inp, size_t n)
{
#pragma omp parallel for simd schedule(simd : static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        out[i] = vtr_sigmoid(inp[i]);
}

void vtr_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n)
{
#pragma omp parallel for simd schedule(simd : static) if (n > PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * vtr_sigmoid_grad(out[i]);
}

/* *dst (+)= *src * the multiplier of draw `draw`, drawn alone */
static void dropout_one(float *dst, const float *src, vtr_dropout_scale s, uint64_t seed,
                        uint64_t stream, uint64_t draw, int accumulate)
{
    float v = *src * vtr_dropout_multiplier(vtr_philox_word_at(seed, stream, draw), s);
    *dst = accumulate ? *dst + v : v;
}

/* dst[k] (+)= src[k] * the multiplier of word k of Philox block `block`, k < 4. Inlined into
 * an `omp simd` loop over blocks, words (indexed by constants once unrolled) becomes
 * registers; an array declared in that loop's own body would become one array per lane in
 * memory (GCC's privatization), whose strided stores keep the loop scalar. */
static inline void dropout_block(float *dst, const float *src, vtr_dropout_scale s, uint64_t seed,
                                 uint64_t stream, uint64_t block, int accumulate)
{
    uint32_t words[4];
    vtr_philox_block(seed, stream, block, words);
    VTR_UNROLL
    for (int k = 0; k < 4; k++) {
        float v = src[k] * vtr_dropout_multiplier(words[k], s);
        dst[k] = accumulate ? dst[k] + v : v;
    }
}

/* Blocks [0, blocks) of dst and src, block b drawn from Philox block blk0 + b: one block per
 * SIMD lane. A function for each value of accumulate: a branch on it inside keeps GCC
 * scalar. */
static VTR_CLONES void dropout_set_blocks(float *dst, const float *src, vtr_dropout_scale s,
                                          uint64_t seed, uint64_t stream, uint64_t blk0,
                                          size_t blocks)
{
#pragma omp simd
    for (size_t b = 0; b < blocks; b++)
        dropout_block(dst + 4 * b, src + 4 * b, s, seed, stream, blk0 + b, 0);
}

static VTR_CLONES void dropout_add_blocks(float *dst, const float *src, vtr_dropout_scale s,
                                          uint64_t seed, uint64_t stream, uint64_t blk0,
                                          size_t blocks)
{
#pragma omp simd
    for (size_t b = 0; b < blocks; b++)
        dropout_block(dst + 4 * b, src + 4 * b, s, seed, stream, blk0 + b, 1);
}

/* dst[i] (+)= src[i] * multiplier of element i (draw first + i): the whole Philox blocks in
 * SIMD lanes (dropout_*_blocks, in parallel ranges), the at most 3 draws before them and 3
 * after one by one (n = 2^21, 2 threads of an AMD EPYC VM, SSE2: 4.3 -> 2.4 ms, from a
 * scalar block per 4 draws). */
static void dropout_apply(float *dst, const float *src, size_t n, float p, uint64_t seed,
                          uint64_t stream, uint64_t first, int accumulate)
{
    const vtr_dropout_scale s = vtr_dropout_scale_of(p);
    size_t head = (size_t)((4 - first % 4) % 4);
    head = head < n ? head : n;
    size_t blocks = (n - head) / 4, tail = head + 4 * blocks;
    uint64_t blk0 = (first + head) / 4;
    float *d = dst + head;
    const float *x = src + head;
    for (size_t i = 0; i < head; i++)
        dropout_one(dst + i, src + i, s, seed, stream, first + i, accumulate);
#pragma omp parallel for schedule(static) if (n > PARALLEL_MIN / 4)
    for (size_t c = 0; c < CHUNKS; c++) {
        size_t b = chunk_begin(blocks, c), nb = chunk_begin(blocks, c + 1) - b;
        if (accumulate)
            dropout_add_blocks(d + 4 * b, x + 4 * b, s, seed, stream, blk0 + b, nb);
        else
            dropout_set_blocks(d + 4 * b, x + 4 * b, s, seed, stream, blk0 + b, nb);
    }
    for (size_t i = tail; i < n; i++)
        dropout_one(dst + i, src + i, s, seed, stream, first + i, accumulate);
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
