/* The nn ops one by one: finite-difference gradient checks of every input and parameter
 * gradient, the accumulation rule, dropout's draws, the input checks. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/set_pooling.h"
#include "check.h"
#include "gradcheck.h"
#include "lib/activation.h"
#include "lib/embedding.h"
#include "lib/linear.h"
#include "lib/nn.h"
#include "lib/norm.h"
#include "lib/similarity.h"
#include "lib/softmax.h"

/* Every gradcheck below has the same shape: an op context holding the buffers, a forward
 * that fills ctx->out from the current inputs, and the loss sum(out * g) whose gradient
 * with respect to out is the fixed upstream g. */
typedef struct op_ctx op_ctx;
struct op_ctx {
    void (*forward)(op_ctx *c);
    float *out, *g;
    size_t n_out;
    float *in[4];  /* inputs and parameters the op reads */
    float *aux[4]; /* saved values (means, indices as floats, ...) */
    int *ints[2];
    int dims[6];
    float f;
};

static double op_loss(void *ctx)
{
    op_ctx *c = ctx;
    c->forward(c);
    return gradcheck_dot(c->out, c->g, c->n_out);
}

/* ------------------------------------------------------------------------------------- */

static void linear_fwd(op_ctx *c)
{
    vtr_linear_forward(c->out, c->in[0], c->in[1], c->in[2], c->dims[0], c->dims[1], c->dims[2]);
}

TEST(linear_gradcheck_with_and_without_bias)
{
    int N = 4, C = 5, OC = 3;
    vtr_rng rng;
    vtr_rng_init(&rng, 1, 0);
    float *x = nn_alloc_floats(N * C), *w = nn_alloc_floats(OC * C), *b = nn_alloc_floats(OC);
    float *out = nn_alloc_floats(N * OC), *g = nn_alloc_floats(N * OC);
    float *dx = nn_alloc_floats(N * C), *dw = nn_alloc_floats(OC * C), *db = nn_alloc_floats(OC);
    nn_fill_uniform(x, N * C, -1, 1, &rng);
    nn_fill_uniform(w, OC * C, -1, 1, &rng);
    nn_fill_uniform(b, OC, -1, 1, &rng);
    nn_fill_uniform(g, N * OC, -1, 1, &rng);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        op_ctx c = {.forward = linear_fwd,
                    .out = out,
                    .g = g,
                    .n_out = N * OC,
                    .in = {x, w, with_bias ? b : NULL},
                    .dims = {N, C, OC}};
        memset(dx, 0, sizeof(float) * N * C);
        memset(dw, 0, sizeof(float) * OC * C);
        memset(db, 0, sizeof(float) * OC);
        vtr_linear_forward(out, x, w, c.in[2], N, C, OC);
        vtr_linear_backward(dx, dw, with_bias ? db : NULL, g, x, w, N, C, OC);
        gradcheck("linear.dinp", op_loss, &c, x, dx, N * C, 1000);
        gradcheck("linear.dweight", op_loss, &c, w, dw, OC * C, 1000);
        if (with_bias)
            gradcheck("linear.dbias", op_loss, &c, b, db, OC, 1000);
    }
    free(x), free(w), free(b), free(out), free(g), free(dx), free(dw), free(db);
}

TEST(backward_accumulates_into_every_gradient)
{
    int N = 3, C = 4, OC = 2;
    vtr_rng rng;
    vtr_rng_init(&rng, 2, 0);
    float x[12], w[8], g[6], dx1[12] = {0}, dw1[8] = {0}, db1[2] = {0};
    float dx2[12], dw2[8], db2[2];
    nn_fill_uniform(x, 12, -1, 1, &rng);
    nn_fill_uniform(w, 8, -1, 1, &rng);
    nn_fill_uniform(g, 6, -1, 1, &rng);
    vtr_linear_backward(dx1, dw1, db1, g, x, w, N, C, OC);
    for (int i = 0; i < 12; i++)
        dx2[i] = 1.0f + dx1[i];
    for (int i = 0; i < 8; i++)
        dw2[i] = 2.0f + dw1[i];
    db2[0] = 3.0f + db1[0];
    db2[1] = 3.0f + db1[1];
    vtr_linear_backward(dx2, dw2, db2, g, x, w, N, C, OC);
    for (int i = 0; i < 12; i++)
        CHECK(fabsf(dx2[i] - (1.0f + 2 * dx1[i])) < 1e-5f);
    for (int i = 0; i < 8; i++)
        CHECK(fabsf(dw2[i] - (2.0f + 2 * dw1[i])) < 1e-5f);
    CHECK(fabsf(db2[1] - (3.0f + 2 * db1[1])) < 1e-5f);

    /* an elementwise op and a set op too */
    float y[4] = {0.5f, -1, 2, 0.1f}, gy[4] = {1, 1, 1, 1}, d[4] = {10, 10, 10, 10};
    vtr_relu_backward(d, gy, y, 4);
    CHECK(d[0] == 11 && d[1] == 10 && d[2] == 11 && d[3] == 11);
    int len = 2;
    float set[4] = {1, 2, 3, 4}, dset[4] = {1, 1, 1, 1}, dmean[2] = {2, 4};
    (void)set;
    vtr_mean_pool_backward(dset, dmean, &len, 1, 2, 2);
    CHECK(dset[0] == 2 && dset[1] == 3 && dset[2] == 2 && dset[3] == 3);
}

/* ------------------------------------------------------------------------------------- */

static void act_fwd(op_ctx *c)
{
    size_t n = c->n_out;
    switch (c->dims[0]) {
    case 0: vtr_relu_forward(c->out, c->in[0], n); break;
    case 1: vtr_gelu_forward(c->out, c->in[0], n); break;
    case 2: vtr_tanh_forward(c->out, c->in[0], n); break;
    default: vtr_sigmoid_forward(c->out, c->in[0], n); break;
    }
}

TEST(activations_gradcheck)
{
    enum { n = 64 };
    static const char *names[] = {"relu", "gelu", "tanh", "sigmoid"};
    vtr_rng rng;
    vtr_rng_init(&rng, 3, 0);
    float x[n], out[n], g[n], dx[n];
    for (int i = 0; i < n; i++) { /* away from relu's kink at 0 */
        float v = 0.05f + 2.95f * vtr_rng_uniform(&rng);
        x[i] = i % 2 ? v : -v;
    }
    nn_fill_uniform(g, n, -1, 1, &rng);
    for (int op = 0; op < 4; op++) {
        op_ctx c = {.forward = act_fwd, .out = out, .g = g, .n_out = n, .in = {x}, .dims = {op}};
        act_fwd(&c);
        memset(dx, 0, sizeof dx);
        switch (op) {
        case 0: vtr_relu_backward(dx, g, x, n); break;
        case 1: vtr_gelu_backward(dx, g, x, n); break;
        case 2: vtr_tanh_backward(dx, g, out, n); break;
        default: vtr_sigmoid_backward(dx, g, out, n); break;
        }
        gradcheck(names[op], op_loss, &c, x, dx, n, n);
    }
    /* in place */
    float y[3] = {-1, 0.5f, 2};
    vtr_relu_forward(y, y, 3);
    CHECK(y[0] == 0 && y[1] == 0.5f && y[2] == 2);
    CHECK(fabsf(vtr_gelu(1.0f) - 0.8413447f) < 1e-6f);
}

/* Error in units of float32's spacing at the reference value. */
static double ulp_error(float got, double want)
{
    return fabs((double)got - want) / (nextafterf((float)fabs(want), INFINITY) - (float)fabs(want));
}

/* vtr_expf, vtr_tanh and vtr_sigmoid (the SIMD-friendly math of the GRU gates) against
 * libm's double functions, to the bounds tests/fixtures/fit_exp_tanh.py finds for them,
 * over a dense grid; and at the edges: clamped exp, saturated tanh, NaN kept. */
TEST(exp_tanh_sigmoid_within_their_bounds)
{
    double worst[3] = {0, 0, 0};
    for (int i = 0; i <= 2000000; i++) {
        float x = -87.0f + 175.0f * (float)i / 2000000.0f;
        double e = ulp_error(vtr_expf(x), exp((double)x));
        worst[0] = e > worst[0] ? e : worst[0];
        float t = -12.0f + 24.0f * (float)i / 2000000.0f;
        double want = tanh((double)t);
        if (want != 0.0) {
            double u = ulp_error(vtr_tanh(t), want);
            worst[1] = u > worst[1] ? u : worst[1];
        }
        float sx = -40.0f + 80.0f * (float)i / 2000000.0f;
        double u = ulp_error(vtr_sigmoid(sx), 1.0 / (1.0 + exp(-(double)sx)));
        worst[2] = u > worst[2] ? u : worst[2];
    }
    for (float t = 1e-30f; t < 1.0f; t *= 1.01f) {
        double u = ulp_error(vtr_tanh(t), tanh((double)t));
        worst[1] = u > worst[1] ? u : worst[1];
        CHECK(vtr_tanh(-t) == -vtr_tanh(t));
    }
    CHECK_MSG(worst[0] <= 1.4 && worst[1] <= 1.5 && worst[2] <= 3.1,
              "worst ulp: exp %.2f, tanh %.2f, sigmoid %.2f", worst[0], worst[1], worst[2]);
    CHECK(vtr_expf(-1000.0f) == vtr_expf(-87.0f) && vtr_expf(-87.0f) > 0.0f);
    CHECK(vtr_expf(1000.0f) == vtr_expf(88.0f) && isfinite(vtr_expf(1000.0f)));
    CHECK(vtr_tanh(50.0f) == 1.0f && vtr_tanh(-50.0f) == -1.0f && vtr_tanh(0.0f) == 0.0f);
    CHECK(vtr_sigmoid(-1000.0f) >= 0.0f && vtr_sigmoid(-1000.0f) < 1e-37f);
    CHECK(vtr_sigmoid(1000.0f) == 1.0f);
    CHECK(isnan(vtr_expf(NAN)) && isnan(vtr_tanh(NAN)) && isnan(vtr_sigmoid(NAN)));
}

/* vtr_erff (GELU's) against libm's double erf, to the bound tests/fixtures/fit_exp_tanh.py
 * finds (the most over every float too), over a dense grid and down through the subnormals;
 * odd; 1 from 3.92 on, infinity included; NaN kept. GELU's gradient at the edges: Phi. */
TEST(erf_within_its_bound)
{
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = -5.0f + 10.0f * (float)i / 2000000.0f;
        double want = erf((double)x);
        if (want != 0.0) {
            double u = ulp_error(vtr_erff(x), want);
            worst = u > worst ? u : worst;
        }
    }
    /* the smallest subnormals one by one, then 1% apart */
    for (float x = 1e-45f; x < 4.0f; x = x < 1e-43f ? nextafterf(x, 1.0f) : x * 1.01f) {
        double u = ulp_error(vtr_erff(x), erf((double)x));
        worst = u > worst ? u : worst;
        CHECK_MSG(vtr_erff(-x) == -vtr_erff(x), "x %g", (double)x);
    }
    CHECK_MSG(worst <= 1.34, "worst ulp: erf %.2f", worst);
    CHECK(vtr_erff(0.0f) == 0.0f && !signbit(vtr_erff(0.0f)) && signbit(vtr_erff(-0.0f)));
    CHECK(vtr_erff(3.92f) == 1.0f && vtr_erff(4.0f) == 1.0f && vtr_erff(1e30f) == 1.0f);
    CHECK(vtr_erff(-3.92f) == -1.0f && vtr_erff(-FLT_MAX) == -1.0f);
    CHECK(vtr_erff(INFINITY) == 1.0f && vtr_erff(-INFINITY) == -1.0f);
    CHECK(isnan(vtr_erff(NAN)) && isnan(vtr_gelu(NAN)) && isnan(vtr_gelu_grad(NAN)));
    CHECK(vtr_gelu_grad(3e38f) == 1.0f && vtr_gelu_grad(INFINITY) == 1.0f);
    CHECK(vtr_gelu_grad(-3e38f) == 0.0f && vtr_gelu_grad(-INFINITY) == 0.0f);
}

TEST(dropout_draws_scale_and_determinism)
{
    enum { n = 100003 };
    float *x = nn_alloc_floats(n), *y = nn_alloc_floats(n), *y2 = nn_alloc_floats(n);
    float *dx = nn_alloc_floats(n), *g = nn_alloc_floats(n);
    for (size_t i = 0; i < n; i++)
        x[i] = g[i] = 1.0f + (float)(i % 7);
    float p = 0.2f;
    vtr_dropout_forward(y, x, n, p, 42, 5, 0);
    size_t dropped = 0;
    for (size_t i = 0; i < n; i++) {
        int drop = vtr_philox_uniform_at(42, 5, i) < p;
        dropped += drop;
        CHECK_MSG(y[i] == (drop ? 0.0f : x[i] * (1.0f / (1.0f - p))), "element %zu", i);
    }
    CHECK(fabs((double)dropped / n - p) < 0.01);
    /* the same seed and stream give the same bytes; another stream differs */
    vtr_dropout_forward(y2, x, n, p, 42, 5, 0);
    CHECK(memcmp(y, y2, sizeof(float) * n) == 0);
    vtr_dropout_forward(y2, x, n, p, 42, 6, 0);
    CHECK(memcmp(y, y2, sizeof(float) * n) != 0);
    /* backward applies the same mask and scale: dx = g * y / x here */
    vtr_dropout_backward(dx, g, n, p, 42, 5, 0);
    for (size_t i = 0; i < n; i++)
        CHECK(dx[i] == y[i]);
    /* a part of the tensor from any offset (odd, not a block boundary) draws its elements'
     * masks: a data-parallel rank's rows get what one process gives them */
    for (size_t first = 0; first < 9; first += 3) {
        size_t part = 1001;
        vtr_dropout_forward(y2, x + first * 11, part, p, 42, 5, first * 11);
        CHECK_MSG(memcmp(y2, y + first * 11, sizeof(float) * part) == 0, "offset %zu", first * 11);
        memset(dx, 0, sizeof(float) * part);
        vtr_dropout_backward(dx, g + first * 11, part, p, 42, 5, first * 11);
        CHECK(memcmp(dx, y + first * 11, sizeof(float) * part) == 0);
    }
    /* p = 0 is the identity; p = 1 zeroes */
    vtr_dropout_forward(y2, x, 10, 0.0f, 1, 1, 0);
    CHECK(memcmp(y2, x, sizeof(float) * 10) == 0);
    vtr_dropout_forward(y2, x, 10, 1.0f, 1, 1, 0);
    for (int i = 0; i < 10; i++)
        CHECK(y2[i] == 0.0f);
    free(x), free(y), free(y2), free(dx), free(g);
}

/* GELU's loops (in parallel ranges, through the AVX2 or AVX-512 clone this CPU picks:
 * lib/hostdevice.h) give vtr_gelu's and vtr_gelu_grad's bytes element by element, over
 * lengths that end inside and at the edge of a range and one that runs in parallel. */
TEST(gelu_loops_give_the_scalar_bytes)
{
    const size_t lengths[] = {0, 1, 15, 16, 17, 1000, 1024, 40003, 300007};
    vtr_rng rng;
    vtr_rng_init(&rng, 91, 0);
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        size_t n = lengths[l];
        float *x = nn_alloc_floats(n + 1), *y = nn_alloc_floats(n + 1);
        float *g = nn_alloc_floats(n + 1), *dx = nn_alloc_floats(n + 1);
        nn_fill_uniform(x, n, -9.0f, 9.0f, &rng);
        nn_fill_uniform(g, n, -1.0f, 1.0f, &rng);
        nn_fill_uniform(dx, n, -1.0f, 1.0f, &rng);
        float *dx0 = nn_alloc_floats(n + 1);
        memcpy(dx0, dx, sizeof(float) * n);
        y[n] = dx[n] = 7.0f; /* past the end: untouched */
        vtr_gelu_forward(y, x, n);
        vtr_gelu_backward(dx, g, x, n);
        for (size_t i = 0; i < n; i++) {
            float want = vtr_gelu(x[i]), dwant = dx0[i] + g[i] * vtr_gelu_grad(x[i]);
            if (memcmp(&y[i], &want, sizeof want) != 0 || memcmp(&dx[i], &dwant, sizeof dwant))
                test_fail(__FILE__, __LINE__, "n %zu, element %zu: %.9g, %.9g; scalar %.9g, %.9g",
                          n, i, y[i], dx[i], want, dwant);
        }
        CHECK(y[n] == 7.0f && dx[n] == 7.0f);
        free(x), free(y), free(g), free(dx), free(dx0);
    }
}

/* lib/activation.c draws whole Philox blocks as SIMD lanes and the draws around them one by
 * one: every element, forward (in place or not) and backward, gets exactly the bytes of its
 * own draw (vtr_philox_word_at, as the CUDA kernel draws it), whatever the length and the
 * offset first (both sides of a block boundary, a length under one block, past where the
 * loops go parallel, a counter whose upper word changes inside the tensor); the element
 * past n is not touched. The input holds -0, infinities, NaN and a subnormal: bit for bit. */
TEST(dropout_matches_the_draw_of_every_element)
{
    enum { max_n = 40003 };
    static const size_t lengths[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 64, 67, 1001, max_n};
    static const uint64_t firsts[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ((uint64_t)1 << 34) - 7};
    float *x = nn_alloc_floats(max_n + 1), *got = nn_alloc_floats(max_n + 1);
    float *want = nn_alloc_floats(max_n + 1);
    vtr_rng rng;
    vtr_rng_init(&rng, 9, 0);
    nn_fill_uniform(x, max_n + 1, -2, 2, &rng);
    x[1] = -0.0f, x[2] = INFINITY, x[3] = -INFINITY, x[4] = NAN, x[6] = -1e-40f;
    const float p = 0.3f;
    const vtr_dropout_scale s = vtr_dropout_scale_of(p);
    static const char *modes[] = {"forward", "forward in place", "backward"};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
        for (size_t fi = 0; fi < sizeof firsts / sizeof *firsts; fi++)
            for (int mode = 0; mode < 3; mode++) {
                size_t n = lengths[li];
                uint64_t first = firsts[fi];
                for (size_t i = 0; i <= n; i++) /* what backward adds to; [n] stays */
                    got[i] = want[i] = mode == 1 ? x[i] : 0.5f * (float)(i % 5);
                for (size_t i = 0; i < n; i++) {
                    uint32_t word = vtr_philox_word_at(42, 7, first + i);
                    float v = x[i] * vtr_dropout_multiplier(word, s);
                    want[i] = mode == 2 ? want[i] + v : v;
                }
                if (mode == 2)
                    vtr_dropout_backward(got, x, n, p, 42, 7, first);
                else
                    vtr_dropout_forward(got, mode == 1 ? got : x, n, p, 42, 7, first);
                CHECK_MSG(memcmp(got, want, sizeof(float) * (n + 1)) == 0, "n %zu, first %llu, %s",
                          n, (unsigned long long)first, modes[mode]);
            }
    free(x), free(got), free(want);
}

/* ------------------------------------------------------------------------------------- */

static void embedding_fwd(op_ctx *c)
{
    vtr_embedding_forward(c->out, c->ints[0], c->in[0], c->dims[0], c->dims[1]);
}

TEST(embedding_gradcheck_with_repeated_ids)
{
    int V = 6, D = 3, N = 7;
    int ids[7] = {2, 0, 5, 2, 2, 1, 0};
    vtr_rng rng;
    vtr_rng_init(&rng, 4, 0);
    float table[18], out[21], g[21], dtable[18] = {0};
    nn_fill_uniform(table, 18, -1, 1, &rng);
    nn_fill_uniform(g, 21, -1, 1, &rng);
    op_ctx c = {.forward = embedding_fwd,
                .out = out,
                .g = g,
                .n_out = 21,
                .in = {table},
                .ints = {ids},
                .dims = {N, D}};
    embedding_fwd(&c);
    CHECK(out[3 * 3 + 1] == table[2 * 3 + 1]);
    vtr_embedding_backward(dtable, g, ids, N, D);
    gradcheck("embedding.dtable", op_loss, &c, table, dtable, (size_t)V * D, 100);
    for (int d = 0; d < D; d++) /* id 3 and 4 unused */
        CHECK(dtable[3 * D + d] == 0.0f && dtable[4 * D + d] == 0.0f);
}

/* The padded batch ops against the item-by-item calls they replace, bit for bit: many
 * repeated ids, sizes above the OpenMP threshold, lengths from 0 to L, and padding ids that
 * would crash if read. */
TEST(embedding_padded_equals_item_by_item)
{
    enum { V = 40, B = 33, L = 17, D = 130 };
    vtr_rng rng;
    vtr_rng_init(&rng, 5, 0);
    int *ids = malloc(sizeof(int) * B * L), lengths[B];
    float *table = malloc(sizeof(float) * V * D), *g = malloc(sizeof(float) * B * L * D);
    float *out = malloc(sizeof(float) * B * L * D), *want = malloc(sizeof(float) * B * L * D);
    float *dt = malloc(sizeof(float) * V * D), *dt_want = malloc(sizeof(float) * V * D);
    nn_fill_uniform(table, (size_t)V * D, -1, 1, &rng);
    nn_fill_uniform(g, (size_t)B * L * D, -1, 1, &rng);
    nn_fill_uniform(dt, (size_t)V * D, -1, 1, &rng);
    memcpy(dt_want, dt, sizeof(float) * V * D);
    for (int b = 0; b < B; b++) {
        lengths[b] = b == 0 ? 0 : b == 1 ? L : (int)vtr_rng_below(&rng, L + 1);
        for (int t = 0; t < L; t++)
            ids[b * L + t] = t < lengths[b] ? (int)vtr_rng_below(&rng, 7) : INT_MAX;
    }
    memset(out, 0xff, sizeof(float) * B * L * D); /* NaN: padding must be written */
    vtr_embedding_forward_padded(out, ids, table, lengths, B, L, D);
    vtr_embedding_backward_padded(dt, g, ids, lengths, B, L, D);
    memset(want, 0, sizeof(float) * B * L * D);
    for (int b = 0; b < B; b++) {
        vtr_embedding_forward(want + (size_t)b * L * D, ids + b * L, table, lengths[b], D);
        vtr_embedding_backward(dt_want, g + (size_t)b * L * D, ids + b * L, lengths[b], D);
    }
    CHECK(memcmp(out, want, sizeof(float) * B * L * D) == 0);
    CHECK(memcmp(dt, dt_want, sizeof(float) * V * D) == 0);
    free(ids), free(table), free(g), free(out), free(want), free(dt), free(dt_want);
}

/* ------------------------------------------------------------------------------------- */

static void batchnorm_fwd(op_ctx *c)
{
    vtr_batchnorm_forward(c->out, c->aux[0], c->aux[1], NULL, NULL, c->in[0], c->in[1], c->in[2],
                          c->dims[0], c->dims[1], 0.1f, 1e-5f);
}

TEST(batchnorm_gradcheck_and_running_statistics)
{
    int N = 7, C = 70; /* more than one block of channels */
    vtr_rng rng;
    vtr_rng_init(&rng, 5, 0);
    float *x = nn_alloc_floats(N * C), *w = nn_alloc_floats(C), *b = nn_alloc_floats(C);
    float *out = nn_alloc_floats(N * C), *g = nn_alloc_floats(N * C), *mean = nn_alloc_floats(C);
    float *rstd = nn_alloc_floats(C), *dx = nn_alloc_floats(N * C), *dw = nn_alloc_floats(C);
    float *db = nn_alloc_floats(C), *rm = nn_alloc_floats(C), *rv = nn_alloc_floats(C);
    nn_fill_uniform(x, N * C, -2, 3, &rng);
    nn_fill_uniform(w, C, 0.5f, 1.5f, &rng);
    nn_fill_uniform(b, C, -0.5f, 0.5f, &rng);
    nn_fill_uniform(g, N * C, -1, 1, &rng);
    for (int i = 0; i < C; i++)
        rv[i] = 1.0f;
    op_ctx c = {.forward = batchnorm_fwd,
                .out = out,
                .g = g,
                .n_out = N * C,
                .in = {x, w, b},
                .aux = {mean, rstd},
                .dims = {N, C}};
    vtr_batchnorm_forward(out, mean, rstd, rm, rv, x, w, b, N, C, 0.1f, 1e-5f);
    vtr_batchnorm_backward(dx, dw, db, g, x, w, mean, rstd, N, C);
    gradcheck("batchnorm.dinp", op_loss, &c, x, dx, N * C, 300);
    gradcheck("batchnorm.dweight", op_loss, &c, w, dw, C, 300);
    gradcheck("batchnorm.dbias", op_loss, &c, b, db, C, 300);
    /* running statistics, channel 3: momentum 0.1, unbiased variance */
    double s = 0, ss = 0;
    for (int n = 0; n < N; n++)
        s += x[n * C + 3];
    double m = s / N;
    for (int n = 0; n < N; n++)
        ss += (x[n * C + 3] - m) * (x[n * C + 3] - m);
    CHECK(fabs(rm[3] - 0.1 * m) < 1e-6);
    CHECK(fabs(rv[3] - (0.9 + 0.1 * ss / (N - 1))) < 1e-5);
    /* eval mode normalizes with the running statistics */
    vtr_batchnorm_forward_eval(out, x, w, b, rm, rv, N, C, 1e-5f);
    double want = (x[2 * C + 3] - rm[3]) / sqrt(rv[3] + 1e-5) * w[3] + b[3];
    CHECK(fabs(out[2 * C + 3] - want) < 1e-5);
    free(x), free(w), free(b), free(out), free(g), free(mean), free(rstd), free(dx);
    free(dw), free(db), free(rm), free(rv);
}

static void layernorm_fwd(op_ctx *c)
{
    vtr_layernorm_forward(c->out, c->aux[0], c->aux[1], c->in[0], c->in[1], c->in[2], c->dims[0],
                          c->dims[1], 1e-5f);
}

TEST(layernorm_gradcheck)
{
    int N = 5, C = 6;
    vtr_rng rng;
    vtr_rng_init(&rng, 6, 0);
    float x[30], w[6], b[6], out[30], g[30], mean[5], rstd[5];
    float dx[30] = {0}, dw[6] = {0}, db[6] = {0};
    nn_fill_uniform(x, 30, -2, 2, &rng);
    nn_fill_uniform(w, 6, 0.5f, 1.5f, &rng);
    nn_fill_uniform(b, 6, -0.5f, 0.5f, &rng);
    nn_fill_uniform(g, 30, -1, 1, &rng);
    op_ctx c = {.forward = layernorm_fwd,
                .out = out,
                .g = g,
                .n_out = 30,
                .in = {x, w, b},
                .aux = {mean, rstd},
                .dims = {N, C}};
    layernorm_fwd(&c);
    vtr_layernorm_backward(dx, dw, db, g, x, w, mean, rstd, N, C);
    gradcheck("layernorm.dinp", op_loss, &c, x, dx, 30, 100);
    gradcheck("layernorm.dweight", op_loss, &c, w, dw, 6, 100);
    gradcheck("layernorm.dbias", op_loss, &c, b, db, 6, 100);
}

static void l2norm_fwd(op_ctx *c)
{
    vtr_l2norm_forward(c->out, c->aux[0], c->in[0], c->dims[0], c->dims[1]);
}

TEST(l2norm_gradcheck_and_zero_row)
{
    int N = 4, D = 5;
    vtr_rng rng;
    vtr_rng_init(&rng, 7, 0);
    float x[20], out[20], g[20], norm[4], dx[20] = {0};
    nn_fill_uniform(x, 20, -1, 1, &rng);
    nn_fill_uniform(g, 20, -1, 1, &rng);
    op_ctx c = {.forward = l2norm_fwd,
                .out = out,
                .g = g,
                .n_out = 20,
                .in = {x},
                .aux = {norm},
                .dims = {N, D}};
    l2norm_fwd(&c);
    double ss = 0;
    for (int d = 0; d < D; d++)
        ss += out[D + d] * out[D + d];
    CHECK(fabs(ss - 1.0) < 1e-6);
    vtr_l2norm_backward(dx, g, x, norm, N, D);
    gradcheck("l2norm.dinp", op_loss, &c, x, dx, 20, 100);
    /* a zero row stays zero, with a finite gradient */
    float z[3] = {0}, zo[3], zn, zg[3] = {1, 1, 1}, zd[3] = {0};
    vtr_l2norm_forward(zo, &zn, z, 1, 3);
    vtr_l2norm_backward(zd, zg, z, &zn, 1, 3);
    CHECK(zo[0] == 0 && isfinite(zd[0]));
}

/* ------------------------------------------------------------------------------------- */

static const int ragged[3] = {5, 2, 3}; /* B 3, T 5 */

static void softmax_fwd(op_ctx *c)
{
    vtr_masked_softmax_forward(c->out, c->in[0], c->ints[0], c->dims[0], c->dims[1], c->f);
}

TEST(masked_softmax_gradcheck_with_temperature)
{
    int B = 3, T = 5;
    vtr_rng rng;
    vtr_rng_init(&rng, 8, 0);
    float x[15], out[15], g[15], dx[15] = {0};
    nn_fill_uniform(x, 15, -0.3f, 0.3f, &rng);
    nn_fill_uniform(g, 15, -1, 1, &rng);
    op_ctx c = {.forward = softmax_fwd,
                .out = out,
                .g = g,
                .n_out = 15,
                .in = {x},
                .ints = {(int *)ragged},
                .dims = {B, T},
                .f = 0.1f};
    softmax_fwd(&c);
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int t = 0; t < T; t++) {
            s += out[b * T + t];
            if (t >= ragged[b])
                CHECK(out[b * T + t] == 0.0f);
        }
        CHECK(fabs(s - 1.0) < 1e-6);
    }
    vtr_masked_softmax_backward(dx, g, out, ragged, B, T, 0.1f);
    gradcheck("softmax.dinp", op_loss, &c, x, dx, 15, 100);
    /* equals PyTorch's softmax(masked_fill(-10000) / 0.1) */
    float filled[5] = {x[5], x[6], -10000, -10000, -10000}, plain[5];
    vtr_masked_softmax_forward(plain, filled, NULL, 1, 5, 0.1f);
    CHECK(memcmp(plain, out + 5, sizeof plain) == 0);
}

static void similarity_fwd(op_ctx *c)
{
    vtr_cosine_similarity_forward(c->out, c->in[0], c->in[1], c->dims[0], c->dims[1], c->dims[2]);
}

TEST(cosine_similarity_gradcheck)
{
    int NA = 3, NB = 4, D = 5;
    vtr_rng rng;
    vtr_rng_init(&rng, 9, 0);
    float a[15], b[20], S[12], g[12], da[15] = {0}, db[20] = {0};
    nn_fill_uniform(a, 15, -1, 1, &rng);
    nn_fill_uniform(b, 20, -1, 1, &rng);
    nn_fill_uniform(g, 12, -1, 1, &rng);
    op_ctx c = {.forward = similarity_fwd,
                .out = S,
                .g = g,
                .n_out = 12,
                .in = {a, b},
                .dims = {NA, NB, D}};
    similarity_fwd(&c);
    CHECK(fabs(S[1 * NB + 2] - gradcheck_dot(a + 5, b + 10, 5)) < 1e-6);
    vtr_cosine_similarity_backward(da, db, g, a, b, NA, NB, D);
    gradcheck("similarity.da", op_loss, &c, a, da, 15, 100);
    gradcheck("similarity.db", op_loss, &c, b, db, 20, 100);
}

/* ------------------------------------------------------------------------------------- */

static void pool_fwd(op_ctx *c)
{
    int B = c->dims[0], T = c->dims[1], D = c->dims[2];
    switch (c->dims[3]) {
    case 0: vtr_mean_pool_forward(c->out, c->in[0], c->ints[0], B, T, D); break;
    case 1: vtr_max_pool_forward(c->out, c->ints[1], c->in[0], c->ints[0], B, T, D); break;
    case 2:
        vtr_kmax_pool_forward(c->out, c->ints[1], c->in[0], c->ints[0], B, T, D, c->dims[4]);
        break;
    default:
        vtr_attention_pool_forward(c->out, c->aux[0], c->in[0], c->in[1], c->in[2], c->ints[0], B,
                                   T, D);
        break;
    }
}

TEST(set_pooling_gradcheck)
{
    enum { B = 3, T = 5, D = 4 };
    static const char *names[] = {"mean_pool", "max_pool", "kmax_pool(2)", "kmax_pool(4)",
                                  "attention_pool"};
    vtr_rng rng;
    vtr_rng_init(&rng, 10, 0);
    float x[B * T * D], out[B * D], g[B * D], dx[B * T * D], w[D], bias[1], weights[B * T];
    float dw[D], dbias[1];
    int index[B * 4 * D];
    nn_fill_separated(x, B, T, D, &rng);
    nn_fill_uniform(g, B * D, -1, 1, &rng);
    nn_fill_uniform(w, D, -1, 1, &rng);
    bias[0] = 0.3f;
    for (int variant = 0; variant < 5; variant++) {
        int kind = variant <= 1 ? variant : variant <= 3 ? 2 : 3;
        int K = variant == 2 ? 2 : 4;
        op_ctx c = {.forward = pool_fwd,
                    .out = out,
                    .g = g,
                    .n_out = B * D,
                    .in = {x, w, bias},
                    .aux = {weights},
                    .ints = {(int *)ragged, index},
                    .dims = {B, T, D, kind, K}};
        pool_fwd(&c);
        memset(dx, 0, sizeof dx);
        memset(dw, 0, sizeof dw);
        dbias[0] = 0;
        switch (kind) {
        case 0: vtr_mean_pool_backward(dx, g, ragged, B, T, D); break;
        case 1: vtr_max_pool_backward(dx, g, index, B, T, D); break;
        case 2: vtr_kmax_pool_backward(dx, g, index, ragged, B, T, D, K); break;
        default:
            vtr_attention_pool_backward(dx, dw, dbias, g, x, weights, w, ragged, B, T, D);
            break;
        }
        gradcheck(names[variant], op_loss, &c, x, dx, B * T * D, 1000);
        if (kind == 3) {
            gradcheck("attention_pool.dweight", op_loss, &c, w, dw, D, 100);
            gradcheck("attention_pool.dbias", op_loss, &c, bias, dbias, 1, 100);
        }
        for (int b = 0; b < B; b++) /* padded elements: no gradient */
            for (int t = ragged[b]; t < T; t++)
                for (int d = 0; d < D; d++)
                    CHECK(dx[(b * T + t) * D + d] == 0.0f);
    }
    /* k-max of item 1 (length 2) with K = 4: the mean of both, index -1 past them */
    vtr_kmax_pool_forward(out, index, x, ragged, B, T, D, 4);
    CHECK(fabsf(out[D] - 0.5f * (x[T * D] + x[(T + 1) * D])) < 1e-6f);
    CHECK(index[1 * 4 * D + 2 * D] == -1);
}

/* ------------------------------------------------------------------------------------- */

TEST(nn_checks_reject_bad_lengths_and_ids)
{
    vtr_error err;
    int good[3] = {1, 5, 3}, zero[2] = {2, 0}, big[2] = {6, 1};
    CHECK_OK(vtr_nn_check_lengths(good, 3, 5, &err));
    CHECK_FAILS(vtr_nn_check_lengths(zero, 2, 5, &err), VTR_ERR_INVALID, "item 1: length 0");
    CHECK_FAILS(vtr_nn_check_lengths(big, 2, 5, &err), VTR_ERR_INVALID, "outside 1..5");
    int ids[4] = {0, 3, 9, 10};
    CHECK_OK(vtr_nn_check_ids(ids, 3, 10, &err));
    CHECK_FAILS(vtr_nn_check_ids(ids, 4, 10, &err), VTR_ERR_INVALID, "token 3: id 10");
}

TEST(set_sort_desc_ties_keep_position_order)
{
    /* 4 elements, 2 dimensions; dimension 0 has a tie, dimension 1 a NaN */
    const float x[8] = {1, 0, 3, NAN, 3, 5, 2, -1};
    int order[8];
    vtr_set_sort_desc(order, x, 4, 2, 4);
    CHECK(order[0] == 1 && order[2] == 2 && order[4] == 3 && order[6] == 0);
    for (int r = 0; r < 4; r++)
        CHECK(order[r * 2 + 1] >= 0 && order[r * 2 + 1] < 4);
    int top2[4];
    vtr_set_sort_desc(top2, x, 4, 2, 2);
    CHECK(top2[0] == 1 && top2[2] == 2);
}

/* Long sets sort by comparison: the order the rank count gives, ties included, and a
 * NaN keeps the order a permutation. */
TEST(set_sort_desc_long_sets_sort_as_the_rank_count)
{
    enum { LEN = 301, D = 19 };
    float *x = malloc(sizeof(float) * LEN * D);
    int *got = malloc(sizeof(int) * LEN * D), *want = malloc(sizeof(int) * LEN * D);
    CHECK(x && got && want);
    vtr_rng rng;
    vtr_rng_init(&rng, 3, 0);
    for (int i = 0; i < LEN * D; i++) /* few distinct values: many ties */
        x[i] = (float)(int)(vtr_rng_uniform(&rng) * 40) - 20;
    vtr_set_sort_desc(got, x, LEN, D, LEN);
    for (int d0 = 0; d0 < D; d0 += VTR_COLUMN_BLOCK)
        vtr_set_sort_desc_columns(want, x, LEN, D, LEN, d0,
                                  D - d0 < VTR_COLUMN_BLOCK ? D - d0 : VTR_COLUMN_BLOCK);
    CHECK(memcmp(got, want, sizeof(int) * LEN * D) == 0);
    vtr_set_sort_desc(got, x, LEN, D, 7); /* the first k ranks only */
    CHECK(memcmp(got, want, sizeof(int) * 7 * D) == 0);
    x[5 * D + 3] = NAN;
    vtr_set_sort_desc(got, x, LEN, D, LEN);
    int seen[LEN] = {0};
    for (int r = 0; r < LEN; r++)
        seen[got[r * D + 3]]++;
    for (int t = 0; t < LEN; t++)
        CHECK(seen[t] == 1);
    free(x);
    free(got);
    free(want);
}
