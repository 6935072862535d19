/* Elementwise activations and dropout (conventions: lib/nn.h).
 *
 * The per-element math is in VTR_HD functions below, shared with the CUDA backend. Every
 * forward here allows out == inp (in place). Every backward accumulates into dinp.
 */
#ifndef VTR_ACTIVATION_H
#define VTR_ACTIVATION_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "hostdevice.h"
#include "nn.h"
#include "rng.h"

#ifdef __cplusplus
extern "C" {
#endif

static VTR_HD float vtr_relu(float x)
{
    return x > 0.0f ? x : 0.0f;
}

/* d relu / dx from either the input or the output (both are > 0 at the same places) */
static VTR_HD float vtr_relu_grad(float x_or_y)
{
    return x_or_y > 0.0f ? 1.0f : 0.0f;
}

/* GELU, erf form (PyTorch's default): x * Phi(x) */
static VTR_HD float vtr_gelu(float x)
{
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

/* d gelu / dx = Phi(x) + x * phi(x) */
static VTR_HD float vtr_gelu_grad(float x)
{
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    float pdf = expf(-0.5f * x * x) * 0.39894228040143268f;
    return cdf + x * pdf;
}

static VTR_HD float vtr_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* d sigmoid / dx from the output y */
static VTR_HD float vtr_sigmoid_grad(float y)
{
    return y * (1.0f - y);
}

/* d tanh / dx from the output y */
static VTR_HD float vtr_tanh_grad(float y)
{
    return 1.0f - y * y;
}

/* Dropout with probability p, as two constants computed once per call: an element whose
 * draw u = vtr_u32_to_unit_float(word) is below p is zeroed, the others are scaled by
 * 1 / (1 - p). u < p exactly when (float)(word >> 8) < p * 2^24 (both sides exact), which
 * the multiplier below tests without a branch or a division per element. */
typedef struct vtr_dropout_scale {
    float threshold; /* p * 2^24 */
    float keep;      /* 1 / (1 - p); 1 when p <= 0 (nothing dropped), 0 when p >= 1 */
} vtr_dropout_scale;

static VTR_HD vtr_dropout_scale vtr_dropout_scale_of(float p)
{
    vtr_dropout_scale s = {p * 16777216.0f, p <= 0.0f   ? 1.0f
                                            : p >= 1.0f ? 0.0f
                                                        : 1.0f / (1.0f - p)};
    return s;
}

/* The multiplier of an element whose draw is word (vtr_philox_word_at(seed, stream, i) for
 * element i): 0 or s.keep. */
static VTR_HD float vtr_dropout_multiplier(uint32_t word, vtr_dropout_scale s)
{
    return (float)(word >> 8) < s.threshold ? 0.0f : s.keep;
}

// inp (n), out (n)
void vtr_relu_forward(float *out, const float *inp, size_t n);
// dinp (n), dout (n), inp (n): the forward's input or output (the same test, x > 0)
void vtr_relu_backward(float *dinp, const float *dout, const float *inp, size_t n);

// inp (n), out (n)
void vtr_gelu_forward(float *out, const float *inp, size_t n);
// dinp (n), dout (n), inp (n): the forward's input
void vtr_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n);

// inp (n), out (n)
void vtr_tanh_forward(float *out, const float *inp, size_t n);
// dinp (n), dout (n), out (n): the forward's output
void vtr_tanh_backward(float *dinp, const float *dout, const float *out, size_t n);

// inp (n), out (n)
void vtr_sigmoid_forward(float *out, const float *inp, size_t n);
// dinp (n), dout (n), out (n): the forward's output
void vtr_sigmoid_backward(float *dinp, const float *dout, const float *out, size_t n);

// inp (n), out (n). Training-mode dropout: element i is zeroed when
// vtr_philox_uniform_at(seed, stream, first + i) < p, the others are scaled by 1 / (1 - p).
// first: 0, or where these n elements start in a larger tensor whose mask this is a part
// of (a data-parallel rank's rows of a global batch draw what one process would).
// No mask is stored: backward redraws it from (seed, stream). p = 0 copies; p >= 1 zeroes.
void vtr_dropout_forward(float *out, const float *inp, size_t n, float p, uint64_t seed,
                         uint64_t stream, uint64_t first);
// dinp (n), dout (n); the same n, p, seed, stream and first as the forward
void vtr_dropout_backward(float *dinp, const float *dout, size_t n, float p, uint64_t seed,
                          uint64_t stream, uint64_t first);

#ifdef __cplusplus
}
#endif

#endif
