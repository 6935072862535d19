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
#include <string.h>

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

/* c[0] + c[1] x + ... + c[n - 1] x^(n - 1) by Horner's rule, the loop unrolled: the
 * multiplies and adds of the chain written out, and loops that call it still vectorize. */
static VTR_HD float vtr_poly(float x, const float *c, int n)
{
    float acc = c[n - 1];
    VTR_UNROLL
    for (int i = n - 2; i >= 0; i--)
        acc = acc * x + c[i];
    return acc;
}

/* e^x within 1.4 ulp for x in [-87, 88], clamped to it (no infinity, no subnormal; NaN
 * stays NaN), in plain float arithmetic that the compiler vectorizes, unlike a call to
 * expf: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, n ln2_hi exact), then
 * e^r = 1 + r + r^2 q(r) and 2^n from the exponent bits. The coefficients and the bounds
 * of this function, vtr_tanh and vtr_sigmoid: tests/fixtures/fit_exp_tanh.py. */
static VTR_HD float vtr_expf(float x)
{
    x = x < -87.0f ? -87.0f : x; /* two selects, both compares always made: no branch */
    x = x > 88.0f ? 88.0f : x;
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln2) */
    float r = x - n * 0.693145751953125f - n * 1.42860682030941723e-06f;
    const float q[] = {5.000000000e-01f, 1.666657627e-01f, 4.166646674e-02f, 8.363175206e-03f,
                       1.393364975e-03f};
    /* 2^n; at NaN (r is NaN, the result too) with n = 0, which keeps the conversion and
     * the shift defined */
    int32_t bits = ((int32_t)(n == n ? n : 0.0f) + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return (1.0f + r + r * r * vtr_poly(r, q, 5)) * scale;
}

/* tanh x within 1.5 ulp: x + x^3 p(x^2) below |x| = 0.55, (1 - t) / (1 + t) with
 * t = e^(-2|x|) above (no cancellation there: t <= 1/3); vectorizes like vtr_expf. */
static VTR_HD float vtr_tanh(float x)
{
    const float p[] = {-3.333333135e-01f, 1.333311647e-01f, -5.391000584e-02f, 2.131247334e-02f,
                       -6.615355611e-03f};
    float x2 = x * x;
    float small = x + x * x2 * vtr_poly(x2, p, 5);
    float ax = fabsf(x);
    float t = vtr_expf(-2.0f * ax);
    float big = copysignf((1.0f - t) / (1.0f + t), x);
    return ax < 0.55f ? small : big; /* both computed: a select, no branch */
}

/* erf x within 1.34 ulp (measured on every float), in plain float arithmetic that
 * vectorizes like vtr_expf, unlike a call to erff: x + x e(x^2) below |x| = 0.9,
 * 1 - e^(l(|x|)) above, l fitting log erfc on [0.9, 4] (|x| clamped to 4: erf rounds to 1
 * from 3.92 on; NaN stays NaN). Coefficients and bound: tests/fixtures/fit_exp_tanh.py. */
static VTR_HD float vtr_erff(float x)
{
    const float e[] = {1.283791512e-01f,  -3.761253059e-01f, 1.128221080e-01f,
                       -2.678130753e-02f, 5.015317816e-03f,  -6.106811343e-04f};
    const float l[] = {3.002688172e-04f,  -1.130155087e+00f, -6.319562197e-01f,
                       -1.099608019e-01f, 2.635512128e-02f,  -4.736950621e-03f,
                       5.920927506e-04f,  -4.551277380e-05f, 1.610240474e-06f};
    float small = x + x * vtr_poly(x * x, e, 6);
    float ax = fabsf(x);
    float big = copysignf(1.0f - vtr_expf(vtr_poly(ax > 4.0f ? 4.0f : ax, l, 9)), x);
    return ax < 0.9f ? small : big; /* both computed: a select, no branch */
}

/* GELU, erf form (PyTorch's default): x * Phi(x) */
static VTR_HD float vtr_gelu(float x)
{
    return 0.5f * x * (1.0f + vtr_erff(x * 0.70710678118654752f));
}

/* d gelu / dx = Phi(x) + x * phi(x), the latter left out from |x| = 14 on, where it is
 * below 1e-41: the e^-87 that vtr_expf clamps to there would come back up with a huge x
 * (2 at x = 3e38, infinity at infinity). x / sqrt(2 pi) first: e^-87 / sqrt(2 pi) is
 * subnormal, which made the backward 1.8x slower with a third of its inputs past 13. */
static VTR_HD float vtr_gelu_grad(float x)
{
    float cdf = 0.5f * (1.0f + vtr_erff(x * 0.70710678118654752f));
    float x_pdf = x * 0.39894228040143268f * vtr_expf(-0.5f * x * x);
    return fabsf(x) < 14.0f ? cdf + x_pdf : cdf; /* a select, no branch */
}

/* within 3.1 ulp (9e-8 absolute) */
static VTR_HD float vtr_sigmoid(float x)
{
    return 1.0f / (1.0f + vtr_expf(-x));
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
