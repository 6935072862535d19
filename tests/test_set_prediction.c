/* The set prediction module of set embeddings (aggregate/set_prediction.h): the parameter
 * table, finite-difference gradients of every input and parameter tensor (with and without
 * the diversity term's dslots_n, and with dropout), padding invariance, an item alone
 * against the same item in a batch, accumulation, determinism across thread counts, the
 * FLOP count, and parity with PyTorch (tests/fixtures/nn/set_prediction/, written by
 * tests/fixtures/make_set_prediction_fixtures.py). Run with VTR_TEST_VERBOSE=1 to print the
 * gradcheck and parity errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "aggregate/set_prediction.h"
#include "check.h"
#include "gradcheck.h"

/* One instance of the op: inputs, parameters, fixed upstream gradients, buffers. */
typedef struct sp_case {
    vtr_set_prediction_config c;
    int B, N;
    float p;
    uint64_t seed, stream;
    int64_t first;                 /* the dropout draws' item offset (0: a whole batch) */
    int *lengths;
    float *inp, *glob, *params;    /* (B,N,C), (B,D), the parameter count */
    float *gset, *gslots_n;        /* (B,K,D) upstream gradients; gslots_n may be unused */
    int use_gslots_n;              /* pass gslots_n to backward (else NULL) */
    float *set, *slots_n;          /* (B,K,D) */
    float *dinp, *dglob, *dparams; /* gradients */
    void *workspace, *scratch;
} sp_case;

static size_t n_inp(const sp_case *s)
{
    return (size_t)s->B * s->N * s->c.C;
}

static size_t n_out(const sp_case *s)
{
    return (size_t)s->B * s->c.K * s->c.D;
}

static void case_alloc(sp_case *s, vtr_set_prediction_config c, int B, int N)
{
    *s = (sp_case){.c = c, .B = B, .N = N, .seed = 7, .stream = 100, .use_gslots_n = 1};
    size_t np = vtr_set_prediction_param_count(&c);
    s->lengths = calloc((size_t)B, sizeof(int));
    s->inp = nn_alloc_floats(n_inp(s));
    s->glob = nn_alloc_floats((size_t)B * c.D);
    s->params = nn_alloc_floats(np);
    s->gset = nn_alloc_floats(n_out(s));
    s->gslots_n = nn_alloc_floats(n_out(s));
    s->set = nn_alloc_floats(n_out(s));
    s->slots_n = nn_alloc_floats(n_out(s));
    s->dinp = nn_alloc_floats(n_inp(s));
    s->dglob = nn_alloc_floats((size_t)B * c.D);
    s->dparams = nn_alloc_floats(np);
    s->workspace = malloc(vtr_set_prediction_workspace_size(&c, B, N));
    s->scratch = malloc(vtr_set_prediction_scratch_size(&c, B, N));
    CHECK(s->lengths && s->workspace && s->scratch);
}

static void case_free(sp_case *s)
{
    free(s->lengths), free(s->inp), free(s->glob), free(s->params), free(s->gset);
    free(s->gslots_n), free(s->set), free(s->slots_n), free(s->dinp), free(s->dglob);
    free(s->dparams), free(s->workspace), free(s->scratch);
}

/* Random inputs and parameters of the scales the module meets: LayerNorm weights near 1,
 * Linear weights of unit output scale; padded inputs hold large values. */
static void case_random(sp_case *s, const int *lengths, uint64_t seed)
{
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    memcpy(s->lengths, lengths, sizeof(int) * (size_t)s->B);
    nn_fill_uniform(s->inp, n_inp(s), -1.7f, 1.7f, &rng);
    for (int b = 0; b < s->B; b++)
        nn_fill_uniform(s->inp + ((size_t)b * s->N + lengths[b]) * s->c.C,
                        (size_t)(s->N - lengths[b]) * s->c.C, -50.0f, 50.0f, &rng);
    nn_fill_uniform(s->glob, (size_t)s->B * s->c.D, -1.7f, 1.7f, &rng);
    for (int i = 0; i < VTR_SET_PREDICTION_TENSORS; i++) {
        int shape[2];
        size_t off;
        const char *name = vtr_set_prediction_param_name(&s->c, i, shape, &off);
        float *t = s->params + off;
        if (shape[1] == 0 && strstr(name, ".weight")) /* a LayerNorm's weight */
            nn_fill_uniform(t, (size_t)shape[0], 0.7f, 1.3f, &rng);
        else if (shape[1] == 0) /* a bias */
            nn_fill_uniform(t, (size_t)shape[0], -0.3f, 0.3f, &rng);
        else if (i == 0) /* the slots */
            nn_fill_uniform(t, (size_t)shape[0] * shape[1], -1.7f, 1.7f, &rng);
        else {
            float a = sqrtf(3.0f / (float)shape[1]);
            nn_fill_uniform(t, (size_t)shape[0] * shape[1], -a, a, &rng);
        }
    }
    nn_fill_uniform(s->gset, n_out(s), -1, 1, &rng);
    nn_fill_uniform(s->gslots_n, n_out(s), -1, 1, &rng);
}

static void case_forward(sp_case *s)
{
    vtr_set_prediction_forward(s->set, s->slots_n, s->workspace, s->inp, s->lengths, s->glob,
                               s->params, &s->c, s->B, s->N, s->p, s->seed, s->stream,
                               s->first);
}

static void case_backward(sp_case *s, float *dinp, float *dglob, float *dparams)
{
    vtr_set_prediction_backward(dinp, dglob, dparams, s->scratch, s->gset,
                                s->use_gslots_n ? s->gslots_n : NULL, s->workspace, s->inp,
                                s->lengths, s->glob, s->params, &s->c, s->B, s->N, s->p, s->seed,
                                s->stream, s->first);
}

static double case_loss(void *ctx)
{
    sp_case *s = ctx;
    case_forward(s);
    double loss = gradcheck_dot(s->set, s->gset, n_out(s));
    if (s->use_gslots_n)
        loss += gradcheck_dot(s->slots_n, s->gslots_n, n_out(s));
    return loss;
}

/* The loss sums ~150 rounded unit-vector outputs behind T iterations of LayerNorms: its
 * float32 noise in a central difference at GRADCHECK_EPS is ~2e-4 to 6e-4 (measured; PyTorch's
 * float32 forward against its float64 gradient shows the same), the size of the smaller
 * gradients here. So every tensor is checked through gradcheck_scaled, a step GC_SCALE times
 * larger. Measured over 40 random seeds, the worst error of a case (both p) is at median
 * 0.021 and at most 0.053 with the plain step, 0.012 and 0.032 at this scale; at 8 the
 * truncation error of the steeper elements takes over (up to 0.043). What remains is noise,
 * not a wrong gradient: the parity test pins every gradient to 1e-5. */
#define GC_SCALE 4.0f

/* norm_q.bias shifts every query by the same vector, so each input's scores over the slots by
 * the same amount, which the softmax over the slots ignores: its gradient is 0 in exact
 * arithmetic and a central difference sees only noise. Instead: its analytic gradient is
 * rounding-sized next to norm_q.weight's, and shifting it by 0.5 leaves the loss as it was to
 * float32 noise, while the same shift of norm_q.weight moves it. */
static void check_norm_q_bias(sp_case *s)
{
    int shape[2];
    size_t w, b;
    vtr_set_prediction_param_name(&s->c, 3, shape, &w); /* norm_q.weight */
    vtr_set_prediction_param_name(&s->c, 4, shape, &b); /* norm_q.bias */
    double scale = 0.0;
    for (int d = 0; d < s->c.D; d++)
        scale = fmax(scale, fabs(s->dparams[w + d]));
    for (int d = 0; d < s->c.D; d++)
        CHECK_MSG(fabs(s->dparams[b + d]) <= 1e-5 * scale,
                  "norm_q.bias gradient %g (norm_q.weight's up to %g)", s->dparams[b + d], scale);
    double base = case_loss(s);
    for (int d = 0; d < s->c.D; d++)
        s->params[b + d] += 0.5f;
    double shifted = case_loss(s);
    for (int d = 0; d < s->c.D; d++)
        s->params[b + d] -= 0.5f, s->params[w + d] += 0.5f;
    double weight_shifted = case_loss(s);
    for (int d = 0; d < s->c.D; d++)
        s->params[w + d] -= 0.5f;
    CHECK_MSG(fabs(shifted - base) <= 1e-5, "norm_q.bias shift moved the loss by %g",
              shifted - base);
    CHECK(s->c.K == 1 || fabs(weight_shifted - base) > 1e-3);
}

/* Forward and backward from zeroed gradients, then every gradient against finite
 * differences: the real inputs, glob, and each parameter tensor under its name (norm_q.bias:
 * check_norm_q_bias). */
static void case_gradcheck(sp_case *s, const char *label)
{
    size_t np = vtr_set_prediction_param_count(&s->c);
    memset(s->dinp, 0, sizeof(float) * n_inp(s));
    memset(s->dglob, 0, sizeof(float) * (size_t)s->B * s->c.D);
    memset(s->dparams, 0, sizeof(float) * np);
    case_forward(s);
    case_backward(s, s->dinp, s->dglob, s->dparams);
    char name[96];
    for (int b = 0; b < s->B; b++) {
        size_t i = (size_t)b * s->N * s->c.C;
        snprintf(name, sizeof name, "%s dinp[%d]", label, b);
        gradcheck_scaled(name, case_loss, s, s->inp + i, s->dinp + i,
                         (size_t)s->lengths[b] * s->c.C, 1000, GC_SCALE);
    }
    snprintf(name, sizeof name, "%s dglob", label);
    gradcheck_scaled(name, case_loss, s, s->glob, s->dglob, (size_t)s->B * s->c.D, 1000, GC_SCALE);
    for (int i = 0; i < VTR_SET_PREDICTION_TENSORS; i++) {
        int shape[2];
        size_t off;
        const char *tensor = vtr_set_prediction_param_name(&s->c, i, shape, &off);
        if (strcmp(tensor, "norm_q.bias") == 0)
            continue;
        snprintf(name, sizeof name, "%s %s", label, tensor);
        gradcheck_scaled(name, case_loss, s, s->params + off, s->dparams + off,
                         (size_t)shape[0] * (shape[1] ? shape[1] : 1), 1000, GC_SCALE);
    }
    check_norm_q_bias(s);
    /* padded inputs: no gradient */
    for (int b = 0; b < s->B; b++)
        for (size_t i = (size_t)s->lengths[b] * s->c.C; i < (size_t)s->N * s->c.C; i++)
            CHECK(s->dinp[(size_t)b * s->N * s->c.C + i] == 0.0f);
}

/* the gradcheck sizes: B 3, N 5 */
static const vtr_set_prediction_config small = {.C = 6, .D = 8, .K = 3, .T = 2, .Dh = 6, .H = 10};
static const int small_lengths[3] = {5, 3, 1};

/* a case of the gradcheck sizes, random from seed */
static void case_small(sp_case *s, uint64_t seed)
{
    case_alloc(s, small, 3, 5);
    case_random(s, small_lengths, seed);
}

TEST(set_prediction_param_table)
{
    const vtr_set_prediction_config c = {.C = 12, .D = 16, .K = 4, .T = 3, .Dh = 10, .H = 24};
    static const char *const names[VTR_SET_PREDICTION_TENSORS] = {
        "slots",         "norm_in.weight",     "norm_in.bias",     "norm_q.weight",
        "norm_q.bias",   "to_q.weight",        "to_k.weight",      "to_v.weight",
        "to_out.weight", "norm_mlp.weight",    "norm_mlp.bias",    "mlp.0.weight",
        "mlp.0.bias",    "mlp.1.weight",       "mlp.1.bias",       "norm_out.weight",
        "norm_out.bias", "norm_global.weight", "norm_global.bias",
    };
    static const int shapes[VTR_SET_PREDICTION_TENSORS][2] = {
        {4, 16},  {12, 0},  {12, 0}, {16, 0}, {16, 0},  {10, 16}, {10, 12},
        {10, 12}, {16, 10}, {16, 0}, {16, 0}, {24, 16}, {24, 0},  {16, 24},
        {16, 0},  {16, 0},  {16, 0}, {16, 0}, {16, 0},
    };
    size_t expect = 0;
    for (int i = 0; i < VTR_SET_PREDICTION_TENSORS; i++) {
        int shape[2] = {-1, -1};
        size_t off = 12345;
        CHECK_STR(vtr_set_prediction_param_name(&c, i, shape, &off), names[i]);
        CHECK_EQ_INT(shape[0], shapes[i][0]);
        CHECK_EQ_INT(shape[1], shapes[i][1]);
        CHECK_EQ_INT(off, expect); /* back to back, in order */
        expect += (size_t)shape[0] * (shape[1] ? shape[1] : 1);
    }
    CHECK_EQ_INT(vtr_set_prediction_param_count(&c), expect);
    CHECK_EQ_INT(expect, 1584); /* the fixtures' flat buffer */
    /* the count does not depend on T: the iterations share the block's weights */
    vtr_set_prediction_config c1 = c;
    c1.T = 1;
    CHECK_EQ_INT(vtr_set_prediction_param_count(&c1), expect);
}

TEST(set_prediction_gradcheck)
{
    sp_case s;
    case_small(&s, 51);
    case_gradcheck(&s, "p0");
    case_free(&s);
}

TEST(set_prediction_gradcheck_without_dslots_n)
{
    /* the set alone (no diversity term): LN_out is reached only through the sum with glob */
    sp_case s;
    case_small(&s, 52);
    s.use_gslots_n = 0;
    case_gradcheck(&s, "set only");
    case_free(&s);
}

TEST(set_prediction_gradcheck_dropout)
{
    /* p > 0: the masks are a function of (seed, stream), the same in every evaluation */
    sp_case s;
    case_small(&s, 53);
    s.p = 0.3f;
    case_gradcheck(&s, "p0.3");
    /* the masks are drawn: the output differs from p = 0's, and from another seed's */
    float *dropped = nn_alloc_floats(n_out(&s));
    memcpy(dropped, s.set, sizeof(float) * n_out(&s));
    s.p = 0.0f;
    case_forward(&s);
    CHECK(memcmp(dropped, s.set, sizeof(float) * n_out(&s)) != 0);
    s.p = 0.3f;
    s.seed = 8;
    case_forward(&s);
    CHECK(memcmp(dropped, s.set, sizeof(float) * n_out(&s)) != 0);
    free(dropped);
    case_free(&s);
}

TEST(set_prediction_one_iteration_gradcheck)
{
    /* T 1: the first iteration (shared q) feeds LN_out directly; K 1: a single slot */
    vtr_set_prediction_config c = small;
    c.T = 1;
    c.K = 1;
    sp_case s;
    case_alloc(&s, c, 3, 5);
    case_random(&s, small_lengths, 54);
    case_gradcheck(&s, "T1 K1");
    case_free(&s);
}

TEST(set_prediction_padding_invariance)
{
    sp_case s;
    case_small(&s, 55);
    case_forward(&s);
    case_backward(&s, s.dinp, s.dglob, s.dparams);
    size_t no = n_out(&s), ni = n_inp(&s), np = vtr_set_prediction_param_count(&s.c);
    float *set = nn_alloc_floats(no), *slots_n = nn_alloc_floats(no);
    float *dinp = nn_alloc_floats(ni), *dparams = nn_alloc_floats(np);
    memcpy(set, s.set, sizeof(float) * no);
    memcpy(slots_n, s.slots_n, sizeof(float) * no);
    memcpy(dinp, s.dinp, sizeof(float) * ni);
    memcpy(dparams, s.dparams, sizeof(float) * np);
    /* other padded values, NaN among them: the same bytes everywhere */
    for (int b = 0; b < s.B; b++)
        for (size_t i = (size_t)s.lengths[b] * s.c.C; i < (size_t)s.N * s.c.C; i++)
            s.inp[(size_t)b * s.N * s.c.C + i] = i % 3 ? -1e6f * (float)i : NAN;
    memset(s.dinp, 0, sizeof(float) * ni);
    memset(s.dparams, 0, sizeof(float) * np);
    case_forward(&s);
    case_backward(&s, s.dinp, s.dglob, s.dparams);
    CHECK(memcmp(set, s.set, sizeof(float) * no) == 0);
    CHECK(memcmp(slots_n, s.slots_n, sizeof(float) * no) == 0);
    CHECK(memcmp(dinp, s.dinp, sizeof(float) * ni) == 0); /* padded rows 0 in both */
    CHECK(memcmp(dparams, s.dparams, sizeof(float) * np) == 0);
    for (int b = 0; b < s.B; b++)
        for (size_t i = (size_t)s.lengths[b] * s.c.C; i < (size_t)s.N * s.c.C; i++)
            CHECK(s.dinp[(size_t)b * s.N * s.c.C + i] == 0.0f);
    free(set), free(slots_n), free(dinp), free(dparams);
    case_free(&s);
}

TEST(set_prediction_item_alone_equals_item_in_batch)
{
    /* with dropout too: item b alone at first = b draws the batch's masks for it (what a
     * data-parallel rank holding item b computes) */
    sp_case all;
    case_small(&all, 56);
    all.p = 0.3f;
    case_forward(&all);
    int K = small.K, D = small.D, C = small.C;
    for (int b = 0; b < all.B; b++) {
        /* item b alone, without padding (N = its length) */
        sp_case one;
        int len = all.lengths[b];
        case_alloc(&one, small, 1, len);
        one.lengths[0] = len;
        memcpy(one.inp, all.inp + (size_t)b * all.N * C, sizeof(float) * len * C);
        memcpy(one.glob, all.glob + (size_t)b * D, sizeof(float) * D);
        memcpy(one.params, all.params, sizeof(float) * vtr_set_prediction_param_count(&small));
        one.p = all.p;
        one.first = b;
        case_forward(&one);
        for (int i = 0; i < K * D; i++) {
            CHECK(fabsf(one.set[i] - all.set[(size_t)b * K * D + i]) <= 1e-6f);
            CHECK(fabsf(one.slots_n[i] - all.slots_n[(size_t)b * K * D + i]) <= 1e-6f);
        }
        case_free(&one);
    }
    case_free(&all);
}

TEST(set_prediction_backward_accumulates)
{
    sp_case s;
    case_small(&s, 57);
    size_t ni = n_inp(&s), ng = (size_t)s.B * s.c.D, np = vtr_set_prediction_param_count(&s.c);
    case_forward(&s);
    case_backward(&s, s.dinp, s.dglob, s.dparams); /* from zero: the gradients */
    float *dinp = nn_alloc_floats(ni), *dglob = nn_alloc_floats(ng);
    float *dparams = nn_alloc_floats(np), *dparams_only = nn_alloc_floats(np);
    for (size_t i = 0; i < ni; i++)
        dinp[i] = 0.25f;
    for (size_t i = 0; i < ng; i++)
        dglob[i] = 0.5f;
    for (size_t i = 0; i < np; i++)
        dparams[i] = -0.5f;
    case_backward(&s, dinp, dglob, dparams);
    case_backward(&s, dinp, dglob, dparams); /* twice: 2 * gradient on top of the start */
    for (size_t i = 0; i < ni; i++)
        CHECK(fabsf(dinp[i] - (0.25f + 2.0f * s.dinp[i])) <= 1e-5f * (1.0f + fabsf(s.dinp[i])));
    for (size_t i = 0; i < ng; i++)
        CHECK(fabsf(dglob[i] - (0.5f + 2.0f * s.dglob[i])) <= 1e-5f * (1.0f + fabsf(s.dglob[i])));
    for (size_t i = 0; i < np; i++)
        CHECK(fabsf(dparams[i] - (-0.5f + 2.0f * s.dparams[i])) <=
              1e-5f * (1.0f + fabsf(s.dparams[i])));
    /* no input gradients wanted: the same parameter gradient bytes */
    case_backward(&s, NULL, NULL, dparams_only);
    CHECK(memcmp(dparams_only, s.dparams, sizeof(float) * np) == 0);
    /* dslots_n NULL is dslots_n = 0 */
    memset(s.gslots_n, 0, sizeof(float) * n_out(&s));
    memset(dparams, 0, sizeof(float) * np);
    memset(dparams_only, 0, sizeof(float) * np);
    case_backward(&s, NULL, NULL, dparams);
    s.use_gslots_n = 0;
    case_backward(&s, NULL, NULL, dparams_only);
    CHECK(memcmp(dparams_only, dparams, sizeof(float) * np) == 0);
    free(dinp), free(dglob), free(dparams), free(dparams_only);
    case_free(&s);
}

TEST(set_prediction_same_result_for_any_thread_count)
{
#ifdef _OPENMP
    /* large enough that every parallel loop runs in parallel (B*K*D, B*K*H, R*C > 65536) */
    const vtr_set_prediction_config c = {.C = 256, .D = 512, .K = 4, .T = 2, .Dh = 128, .H = 1024};
    enum { B = 40, N = 12 };
    int lengths[B];
    for (int b = 0; b < B; b++)
        lengths[b] = 1 + (b * 7) % N;
    sp_case s;
    case_alloc(&s, c, B, N);
    case_random(&s, lengths, 58);
    s.p = 0.1f;
    size_t no = n_out(&s), ni = n_inp(&s), ng = (size_t)B * c.D;
    size_t np = vtr_set_prediction_param_count(&c);
    float *out[3][5];
    int threads[3] = {1, 2, 3}, saved = omp_get_max_threads();
    for (int r = 0; r < 3; r++) {
        omp_set_num_threads(threads[r]);
        memset(s.dinp, 0, sizeof(float) * ni);
        memset(s.dglob, 0, sizeof(float) * ng);
        memset(s.dparams, 0, sizeof(float) * np);
        case_forward(&s);
        case_backward(&s, s.dinp, s.dglob, s.dparams);
        const float *src[5] = {s.set, s.slots_n, s.dinp, s.dglob, s.dparams};
        const size_t n[5] = {no, no, ni, ng, np};
        for (int k = 0; k < 5; k++) {
            out[r][k] = nn_alloc_floats(n[k]);
            memcpy(out[r][k], src[k], sizeof(float) * n[k]);
        }
    }
    omp_set_num_threads(saved);
    const size_t n[5] = {no, no, ni, ng, np};
    const char *names[5] = {"set", "slots_n", "dinp", "dglob", "dparams"};
    for (int r = 1; r < 3; r++)
        for (int k = 0; k < 5; k++)
            nn_check_across_threads(names[k], out[r][k], out[0][k], n[k]);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 5; k++)
            free(out[r][k]);
    case_free(&s);
#else
    test_skip("built without OpenMP");
#endif
}

TEST(set_prediction_flops)
{
    /* B 128, N 30 (all real), C = D = 1024, Dh 2048, H 4096, K 4, T 4, by hand: Gq and Fo
     * 2*2*1024*2048*1024; qf (4 + 3*512)*1024*1024*2; M and U 4*2*2*3840*4*1024; the update
     * 4*2*512*1024*1024; the MLP 4*2*2*512*1024*4096 */
    const vtr_set_prediction_config c = {
        .C = 1024, .D = 1024, .K = 4, .T = 4, .Dh = 2048, .H = 4096};
    double expect = 2.0 * 2 * 1024 * 2048 * 1024 + (4.0 + 3 * 512) * 1024 * 1024 * 2 +
                    4.0 * 2 * 2 * 3840 * 4 * 1024 + 4.0 * 2 * 512 * 1024 * 1024 +
                    4.0 * 2 * 2 * 512 * 1024 * 4096;
    CHECK(vtr_set_prediction_flops(&c, 128, 3840) == expect);
}

/* The fixtures: tests/fixtures/nn/set_prediction/ (nn_fixture_floats reads tests/fixtures/nn/). */
#define FIXTURE(name) "set_prediction/" name

/* The task's bar for parity: relative error (max |got - ref| / max |ref|) under 1e-5. */
#define SET_PREDICTION_PARITY_TOL 1e-5

TEST(set_prediction_parity_with_pytorch)
{
    const vtr_set_prediction_config c = {.C = 12, .D = 16, .K = 4, .T = 3, .Dh = 10, .H = 24};
    enum { B = 3, N = 7 };
    sp_case s;
    case_alloc(&s, c, B, N);
    size_t no = n_out(&s), ni = n_inp(&s), ng = (size_t)B * c.D;
    size_t np = vtr_set_prediction_param_count(&c);
    int *lengths = nn_fixture_ints(FIXTURE("lengths"), B);
    float *inp = nn_fixture_floats(FIXTURE("inp"), ni);
    float *glob = nn_fixture_floats(FIXTURE("glob"), ng);
    float *params = nn_fixture_floats(FIXTURE("params"), np);
    float *gset = nn_fixture_floats(FIXTURE("dset"), no);
    float *gslots_n = nn_fixture_floats(FIXTURE("dslots_n"), no);
    memcpy(s.lengths, lengths, sizeof(int) * B);
    memcpy(s.inp, inp, sizeof(float) * ni);
    memcpy(s.glob, glob, sizeof(float) * ng);
    memcpy(s.params, params, sizeof(float) * np);
    memcpy(s.gset, gset, sizeof(float) * no);
    memcpy(s.gslots_n, gslots_n, sizeof(float) * no);
    case_forward(&s);
    case_backward(&s, s.dinp, s.dglob, s.dparams);

    double worst = 0.0;
    float *ref = nn_fixture_floats(FIXTURE("slots"), c.T * no);
    for (int t = 1; t <= c.T; t++) {
        char name[32];
        snprintf(name, sizeof name, "slots E_%d", t);
        const float *e = vtr_set_prediction_slots_at(s.workspace, &c, B, N, t);
        const float *r = ref + (size_t)(t - 1) * no;
        worst = fmax(worst, nn_parity_compare(name, e, r, no, 0.0, SET_PREDICTION_PARITY_TOL));
    }
    free(ref);
    worst = fmax(worst, nn_parity_check(FIXTURE("set"), s.set, no));
    worst = fmax(worst, nn_parity_check(FIXTURE("slots_n"), s.slots_n, no));
    worst = fmax(worst, nn_parity_check(FIXTURE("dinp"), s.dinp, ni));
    worst = fmax(worst, nn_parity_check(FIXTURE("dglob"), s.dglob, ng));
    ref = nn_fixture_floats(FIXTURE("dparams"), np);
    /* each tensor at its own scale, but norm_q.bias, whose gradient is 0 in exact arithmetic
     * (check_norm_q_bias), at norm_q.weight's */
    double scale_q = 0.0;
    for (int i = 0; i < VTR_SET_PREDICTION_TENSORS; i++) {
        int shape[2];
        size_t off;
        const char *name = vtr_set_prediction_param_name(&c, i, shape, &off);
        size_t n = (size_t)shape[0] * (shape[1] ? shape[1] : 1);
        double scale = strcmp(name, "norm_q.bias") == 0 ? scale_q : nn_max_abs(ref + off, n);
        if (strcmp(name, "norm_q.weight") == 0)
            scale_q = scale;
        worst = fmax(worst, nn_parity_compare(name, s.dparams + off, ref + off, n, scale,
                                              SET_PREDICTION_PARITY_TOL));
    }
    CHECK_MSG(worst <= SET_PREDICTION_PARITY_TOL, "parity: relative error %.3g", worst);
    for (int b = 0; b < B; b++) /* padded inputs: exactly no gradient */
        for (size_t i = (size_t)lengths[b] * c.C; i < (size_t)N * c.C; i++)
            CHECK(s.dinp[(size_t)b * N * c.C + i] == 0.0f);
    free(ref), free(lengths), free(inp), free(glob), free(params), free(gset), free(gslots_n);
    case_free(&s);
}
