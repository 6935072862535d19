/* ADPOOL (aggregate/adpool.h) and ADOPT (match/adopt_loss.h): known values, gradient
 * checks, and both inside a VSE training step. PyTorch parity: test_nn_parity.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/adpool.h"
#include "check.h"
#include "gradcheck.h"
#include "match/adopt_loss.h"
#include "match/vse_model.h"

/* ---- ADPOOL ----------------------------------------------------------------------- */

typedef struct adpool_case {
    int B, T, D;
    const int *lengths;
    float *x, *params, *out, *theta, *omega, *g;
    void *ws;
} adpool_case;

static double adpool_loss(void *ctx)
{
    adpool_case *c = ctx;
    vtr_adpool_forward(c->out, c->theta, c->omega, c->ws, c->x, c->lengths, c->params, c->B, c->T,
                       c->D);
    return gradcheck_dot(c->out, c->g, (size_t)c->B * c->D);
}

TEST(adpool_gradcheck_inputs_and_parameters)
{
    static const int lengths[3] = {5, 2, 3};
    adpool_case c = {.B = 3, .T = 5, .D = 6, .lengths = lengths};
    size_t np = vtr_adpool_param_count(c.D), nx = (size_t)c.B * c.T * c.D;
    vtr_rng rng;
    vtr_rng_init(&rng, 41, 0);
    c.x = nn_alloc_floats(nx);
    c.params = nn_alloc_floats(np);
    c.out = nn_alloc_floats((size_t)c.B * c.D);
    c.theta = nn_alloc_floats((size_t)c.B * c.T);
    c.omega = nn_alloc_floats((size_t)c.B * 2);
    c.g = nn_alloc_floats((size_t)c.B * c.D);
    c.ws = malloc(vtr_adpool_workspace_size(c.B, c.T, c.D));
    void *scratch = malloc(vtr_adpool_scratch_size(c.B, c.T, c.D));
    float *dx = nn_alloc_floats(nx), *dparams = nn_alloc_floats(np);
    nn_fill_separated(c.x, c.B, c.T, c.D, &rng); /* no sort changes under a step */
    for (int b = 0; b < c.B; b++)                /* garbage in the padding */
        for (int t = lengths[b]; t < c.T; t++)
            for (int d = 0; d < c.D; d++)
                c.x[((size_t)b * c.T + t) * c.D + d] = 40.0f + (float)d;
    nn_fill_uniform(c.params, np, -1.0f, 1.0f, &rng); /* spread both softmaxes */
    nn_fill_uniform(c.g, (size_t)c.B * c.D, -1, 1, &rng);
    adpool_loss(&c);
    vtr_adpool_backward(dx, dparams, scratch, c.g, c.x, c.theta, c.omega, lengths, c.params, c.ws,
                        c.B, c.T, c.D);
    gradcheck("adpool.dinp", adpool_loss, &c, c.x, dx, nx, 100000);
    gradcheck("adpool.dparams", adpool_loss, &c, c.params, dparams, np, 100000);
    for (int b = 0; b < c.B; b++)
        for (int t = lengths[b]; t < c.T; t++)
            for (int d = 0; d < c.D; d++)
                CHECK(dx[((size_t)b * c.T + t) * c.D + d] == 0.0f);

    /* without an input gradient the parameter gradients are the same, accumulated */
    float *dp2 = nn_alloc_floats(np);
    memcpy(dp2, dparams, sizeof(float) * np);
    vtr_adpool_backward(NULL, dp2, scratch, c.g, c.x, c.theta, c.omega, lengths, c.params, c.ws,
                        c.B, c.T, c.D);
    for (size_t i = 0; i < np; i++)
        CHECK_MSG(fabsf(dp2[i] - 2 * dparams[i]) <= 1e-5f * (1 + fabsf(dparams[i])),
                  "param %zu: %g vs 2 x %g", i, dp2[i], dparams[i]);
    free(c.x), free(c.params), free(c.out), free(c.theta), free(c.omega), free(c.g), free(c.ws);
    free(scratch), free(dx), free(dparams), free(dp2);
}

/* With zero weights: theta uniform (token level = mean of the sorted rows = mean pooling),
 * omega (1/2, 1/2), the embedding level the softmax-weighted mean per dimension; a set of
 * one element pools to itself; extra padding changes nothing. */
TEST(adpool_known_values_and_padding)
{
    enum { B = 2, D = 3, T1 = 3, T2 = 6 };
    const int lengths[B] = {3, 1};
    const float x1[B * T1 * D] = {1, 0,  -2,   3, 1, 0, 2, 2, 1, /* item 0 */
                                  5, -1, 0.5f, 0, 0, 0, 0, 0, 0};
    float x2[B * T2 * D];
    for (int i = 0; i < B * T2 * D; i++)
        x2[i] = 99.0f;
    for (int b = 0; b < B; b++)
        memcpy(x2 + b * T2 * D, x1 + b * T1 * D, sizeof(float) * lengths[b] * D);
    float params[2 * D] = {0}, out1[B * D], out2[B * D], th1[B * T1], th2[B * T2], om[B * 2];
    void *ws = malloc(vtr_adpool_workspace_size(B, T2, D));
    vtr_adpool_forward(out1, th1, om, ws, x1, lengths, params, B, T1, D);
    for (int d = 0; d < D; d++) {
        double mean = 0, num = 0, den = 0;
        for (int i = 0; i < 3; i++) {
            double v = x1[i * D + d];
            mean += v / 3;
            num += v * exp(v);
            den += exp(v);
        }
        double want = 0.5 * mean + 0.5 * num / den;
        CHECK_MSG(fabs(out1[d] - want) < 1e-5, "d %d: %g vs %g", d, out1[d], want);
        CHECK(out1[D + d] == x1[T1 * D + d]); /* one element */
    }
    CHECK(fabsf(th1[0] - 1.0f / 3) < 1e-6f && th1[T1] == 1.0f && th1[T1 + 1] == 0.0f);
    CHECK(om[0] == 0.5f && om[1] == 0.5f);

    /* non-zero weights: padding still changes nothing, theta and omega sum to one */
    for (int i = 0; i < 2 * D; i++)
        params[i] = 0.3f * (float)(i - 2);
    vtr_adpool_forward(out1, th1, om, ws, x1, lengths, params, B, T1, D);
    vtr_adpool_forward(out2, th2, om, ws, x2, lengths, params, B, T2, D);
    for (int i = 0; i < B * D; i++)
        CHECK_MSG(out1[i] == out2[i], "element %d: %g vs %g", i, out1[i], out2[i]);
    for (int b = 0; b < B; b++) {
        double s = 0;
        for (int t = 0; t < T2; t++)
            s += th2[b * T2 + t];
        CHECK(fabs(s - 1.0) < 1e-6 && fabs(om[2 * b] + om[2 * b + 1] - 1.0) < 1e-6);
    }
    CHECK(om[0] != 0.5f); /* item 1 has one element: both levels equal it, omega (1/2, 1/2) */
    free(ws);
}

/* A batch gives, bit for bit, what each item gives alone padded to its own length: the
 * outputs, theta, omega and the input gradient, and the parameter gradients accumulated
 * item after item (both sums run in item order); padded rows get no gradient. Lengths 1 to
 * T, with sets sorted by ranks (up to 64) and by comparison (longer), ties in every
 * column. */
TEST(adpool_batch_equals_items_alone)
{
    enum { B = 4, T = 70, D = 20 };
    const int lengths[B] = {70, 1, 9, 66};
    size_t btd = (size_t)B * T * D, np = vtr_adpool_param_count(D);
    vtr_rng rng;
    vtr_rng_init(&rng, 43, 0);
    float *x = nn_alloc_floats(btd), *params = nn_alloc_floats(np), *g = nn_alloc_floats(B * D);
    float *dx0 = nn_alloc_floats(btd), *dx = nn_alloc_floats(btd), *dx1 = nn_alloc_floats(btd);
    float *dp = nn_alloc_floats(np), *dp1 = nn_alloc_floats(np);
    float out[B * D], theta[B * T], omega[2 * B], out1[D], theta1[T], omega1[2];
    nn_fill_uniform(x, btd, -2, 2, &rng);
    for (size_t i = 0; i < btd; i += 7)
        x[i] = 0.5f;
    nn_fill_uniform(params, np, -0.5f, 0.5f, &rng);
    nn_fill_uniform(g, B * D, -1, 1, &rng);
    nn_fill_uniform(dx0, btd, -1, 1, &rng);
    nn_fill_uniform(dp, np, -1, 1, &rng);
    memcpy(dx, dx0, sizeof(float) * btd);
    memcpy(dx1, dx0, sizeof(float) * btd);
    memcpy(dp1, dp, sizeof(float) * np);
    void *ws = malloc(vtr_adpool_workspace_size(B, T, D));
    void *sc = malloc(vtr_adpool_scratch_size(B, T, D));
    vtr_adpool_forward(out, theta, omega, ws, x, lengths, params, B, T, D);
    vtr_adpool_backward(dx, dp, sc, g, x, theta, omega, lengths, params, ws, B, T, D);
    for (int b = 0; b < B; b++) {
        int n = lengths[b];
        size_t off = (size_t)b * T * D;
        vtr_adpool_forward(out1, theta1, omega1, ws, x + off, &n, params, 1, n, D);
        vtr_adpool_backward(dx1 + off, dp1, sc, g + b * D, x + off, theta1, omega1, &n, params, ws,
                            1, n, D);
        CHECK_MSG(memcmp(out1, out + b * D, sizeof out1) == 0, "item %d: out", b);
        CHECK_MSG(memcmp(theta1, theta + b * T, sizeof(float) * n) == 0, "item %d: theta", b);
        CHECK_MSG(memcmp(omega1, omega + 2 * b, sizeof omega1) == 0, "item %d: omega", b);
    }
    CHECK(memcmp(dx1, dx, sizeof(float) * btd) == 0); /* padded rows: dx0 on both */
    CHECK(memcmp(dp1, dp, sizeof(float) * np) == 0);
    free(x), free(params), free(g), free(dx0), free(dx), free(dx1), free(dp), free(dp1);
    free(ws), free(sc);
}

/* ---- ADOPT ------------------------------------------------------------------------ */

TEST(adopt_negatives_follow_equation_6)
{
    enum { B = 8 };
    float S[B * B] = {0};
    double a, u;
    /* every similarity 0: align 0, uniform log 1 = 0, floor(8 cos 0) = 8 -> B-1 */
    CHECK_EQ_INT(vtr_adopt_negatives(S, B, &a, &u), B - 1);
    CHECK(a == 0.0 && u == 0.0);
    /* positives 1, negatives 0: align 1, uniform log((8e + 56) / 64) */
    for (int i = 0; i < B; i++)
        S[i * B + i] = 1.0f;
    double want_u = log((B * exp(1.0) + B * (B - 1)) / (double)(B * B));
    int want_k = (int)floor(B * cos((1.0 + want_u) * 3.14159265358979323846 / 4));
    CHECK_EQ_INT(vtr_adopt_negatives(S, B, &a, &u), want_k);
    CHECK(want_k == 4 && fabs(a - 1.0) < 1e-12 && fabs(u - want_u) < 1e-12);
    /* a collapsed batch (every similarity 1): align + uniform = 2, cos(pi/2) ~ 0 -> 1 */
    for (int i = 0; i < B * B; i++)
        S[i] = 1.0f;
    CHECK_EQ_INT(vtr_adopt_negatives(S, B, NULL, NULL), 1);
}

TEST(adopt_loss_known_values)
{
    /* B = 3, tau 0.5; row 0: positive 0.8, negatives 0.5 and 0.2 */
    const float S[9] = {0.8f, 0.5f, 0.2f, 0.1f, 0.6f, 0.3f, 0.4f, 0.0f, 0.9f};
    const float tau = 0.5f;
    double want = 0.0;
    for (int dir = 0; dir < 2; dir++)
        for (int q = 0; q < 3; q++) {
            double den = 0;
            for (int k = 0; k < 3; k++)
                den += exp((dir ? S[k * 3 + q] : S[q * 3 + k]) / tau);
            want += -S[q * 3 + q] / tau + log(den);
        }
    /* K = B-1 with the positive in the denominator: cross-entropy over each row / column */
    float got = vtr_adopt_loss_forward(S, 3, 2, tau, true, VTR_REDUCE_SUM);
    CHECK_MSG(fabs(got - want) < 1e-5, "%g vs %g", got, want);
    got = vtr_adopt_loss_forward(S, 3, 2, tau, true, VTR_REDUCE_MEAN);
    CHECK(fabs(got - want / 3) < 1e-5);
    /* K = 1, negatives only: -pos/tau + hardest/tau per query = hardest - positive, / tau */
    want =
        ((0.5 - 0.8) + (0.3 - 0.6) + (0.4 - 0.9) + (0.4 - 0.8) + (0.5 - 0.6) + (0.3 - 0.9)) / tau;
    got = vtr_adopt_loss_forward(S, 3, 1, tau, false, VTR_REDUCE_SUM);
    CHECK_MSG(fabs(got - want) < 1e-5, "%g vs %g", got, want);
    float dS[9] = {0};
    vtr_adopt_loss_backward(dS, 1.0f, S, 3, 1, tau, false, VTR_REDUCE_SUM);
    /* S[0,0]: -2 (row 0) -2 (column 0); S[0,1] hardest of row 0 and of column 1: +2 +2 */
    CHECK(fabsf(dS[0] + 4) < 1e-5f && fabsf(dS[1] - 4) < 1e-5f && fabsf(dS[2]) < 1e-6f);
}

typedef struct adopt_case {
    float *S;
    int B, K;
    bool pos;
    vtr_reduction red;
} adopt_case;

/* A temperature above the paper's 0.05: at 0.05 the float32 loss (terms of ~10) leaves
 * ~1e-3 of noise in a numeric derivative at the gradcheck step; the gradient's form does
 * not depend on tau (the parity test runs 0.05). */
#define GRADCHECK_TAU 0.25f

static double adopt_loss(void *ctx)
{
    adopt_case *c = ctx;
    return vtr_adopt_loss_forward(c->S, c->B, c->K, GRADCHECK_TAU, c->pos, c->red);
}

/* per row and column, no two negatives within 0.01: a step never changes the K hardest */
static int negatives_apart(const float *S, int B)
{
    for (int q = 0; q < B; q++)
        for (int dir = 0; dir < 2; dir++) {
            long stride = dir ? B : 1;
            const float *x = dir ? S + q : S + (long)q * B;
            for (int k = 0; k < B; k++)
                for (int k2 = 0; k2 < k; k2++)
                    if (k != q && k2 != q && fabsf(x[k * stride] - x[k2 * stride]) < 0.01f)
                        return 0;
        }
    return 1;
}

TEST(adopt_loss_gradcheck_every_k_both_denominators_both_reductions)
{
    enum { B = 6 };
    float S[B * B], dS[B * B];
    vtr_rng rng;
    vtr_rng_init(&rng, 71, 0);
    do
        nn_fill_uniform(S, B * B, -0.6f, 0.6f, &rng);
    while (!negatives_apart(S, B));
    for (int K = 1; K < B; K++)
        for (int pos = 0; pos < 2; pos++)
            for (int red = 0; red < 2; red++) {
                adopt_case c = {S, B, K, pos, (vtr_reduction)red};
                char name[64];
                snprintf(name, sizeof name, "adopt.K%d.%s.%s", K, pos ? "pos" : "neg",
                         red ? "mean" : "sum");
                memset(dS, 0, sizeof dS);
                vtr_adopt_loss_backward(dS, 1.0f, S, B, K, GRADCHECK_TAU, c.pos, c.red);
                gradcheck(name, adopt_loss, &c, S, dS, B * B, 100);
                /* only the positives and the K hardest of each row / column get gradient */
                int touched = 0;
                for (int i = 0; i < B * B; i++)
                    touched += dS[i] != 0.0f;
                CHECK_MSG(touched <= B + 2 * B * K, "%s: %d entries", name, touched);
            }
}

/* ---- inside the model -------------------------------------------------------------- */

TEST(vse_train_step_with_adpool_and_adopt)
{
    enum { B = 4, T = 5, L = 6, F = 7, E = 8, V = 10 };
    vtr_error err;
    vtr_vse_config cfg = vtr_vse_config_infinity(V);
    cfg.feature_dim = F;
    cfg.embed_size = E;
    cfg.mlp_hidden = 0;
    cfg.word_dim = 5;
    cfg.img_pool.kind = VTR_VSE_POOL_ADPOOL;
    cfg.txt_pool.kind = VTR_VSE_POOL_MEAN;
    cfg.loss = VTR_VSE_LOSS_ADOPT;
    cfg.reduction = VTR_REDUCE_MEAN;
    vtr_vse_model m;
    CHECK_OK(vtr_vse_model_init(&m, &cfg, B, T, L, &err));
    CHECK(vtr_param_data(&m.params, "img_enc.adpool.token.weight") != NULL);
    CHECK(vtr_param_data(&m.params, "img_enc.adpool.balance.weight") != NULL);
    CHECK(vtr_param_data(&m.params, "txt_enc.adpool.token.weight") == NULL);
    CHECK(vtr_param_data(&m.params, "img_enc.gpool.linear.weight") == NULL);
    vtr_vse_init_params(&m, 3);
    float *w = vtr_param_data(&m.params, "img_enc.adpool.token.weight");
    float bound = 1.0f / sqrtf((float)E), amax = 0;
    for (int e = 0; e < E; e++)
        amax = fmaxf(amax, fabsf(w[e]));
    CHECK(amax > 0 && amax <= bound); /* Linear's default init, uniform(+-1/sqrt(E)) */

    float frames[B * T * F];
    int flen[B] = {5, 2, 3, 1}, ids[B * L], clen[B] = {6, 3, 4, 2};
    vtr_rng rng;
    vtr_rng_init(&rng, 9, 0);
    nn_fill_uniform(frames, B * T * F, -1, 1, &rng);
    for (int b = 0; b < B; b++) {
        for (int t = flen[b]; t < T; t++)
            memset(frames + (b * T + t) * F, 0, sizeof(float) * F);
        for (int t = 0; t < L; t++)
            ids[b * L + t] = (b * 3 + t) % V;
    }
    vtr_vse_batch batch = {.B = B,
                           .T = T,
                           .frames = frames,
                           .frame_lengths = flen,
                           .L = L,
                           .ids = ids,
                           .caption_lengths = clen};
    float loss;
    vtr_param_set_zero_grad(&m.params);
    CHECK_OK(vtr_vse_train_step(&m, &batch, VTR_HINGE_ALL_NEGATIVES, &loss, &err));
    CHECK_EQ_INT(m.negatives, B - 1);
    float want = vtr_adopt_loss_forward(m.sim, B, B - 1, 0.05f, true, VTR_REDUCE_MEAN);
    CHECK(loss == want && isfinite(loss));
    double gsum = 0;
    const float *g = vtr_param_grad(&m.params, "img_enc.adpool.token.weight");
    for (int e = 0; e < 2 * E; e++) /* token then balance weight: one flat block */
        gsum += fabs(g[e]);
    CHECK(gsum > 0);
    vtr_param_set_zero_grad(&m.params);
    CHECK_OK(vtr_vse_train_step(&m, &batch, VTR_HINGE_HARDEST_NEGATIVE, &loss, &err));
    CHECK_EQ_INT(m.negatives, vtr_adopt_negatives(m.sim, B, NULL, NULL));
    m.cfg.adopt_fixed_k = 2;
    CHECK_OK(vtr_vse_train_step(&m, &batch, VTR_HINGE_HARDEST_NEGATIVE, &loss, &err));
    CHECK_EQ_INT(m.negatives, 2);
    m.cfg.adopt_fixed_k = 50; /* capped at B-1 */
    CHECK_OK(vtr_vse_train_step(&m, &batch, VTR_HINGE_HARDEST_NEGATIVE, &loss, &err));
    CHECK_EQ_INT(m.negatives, B - 1);
    vtr_vse_model_free(&m);

    vtr_vse_pooler p;
    CHECK_OK(vtr_vse_pooler_parse("adpool", &p, &err));
    CHECK(p == VTR_VSE_POOL_ADPOOL && strcmp(vtr_vse_pooler_name(p), "adpool") == 0);
    CHECK_FAILS(vtr_vse_pooler_parse("adapool", &p, &err), VTR_ERR_INVALID, "mean, gpo or adpool");
    cfg.adopt_temperature = 0.0f;
    CHECK_FAILS(vtr_vse_config_check(&cfg, &err), VTR_ERR_INVALID, "adopt_temperature");
}
