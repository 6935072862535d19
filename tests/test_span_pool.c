/* Role span pooling (aggregate/span_pool.h): the max over hand-made spans, finite-difference
 * gradients of the word states and the role table, empty spans and the reference's -1e10
 * fill, accumulation, determinism across thread counts, and parity with PyTorch
 * (tests/fixtures/nn/span_pool/, written by tests/fixtures/make_span_pool_fixtures.py). Run
 * with VTR_TEST_VERBOSE=1 to print the gradcheck and parity errors. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate/span_pool.h"
#include "check.h"
#include "gradcheck.h"

/* A batch for the op: buffers and dims, the spans as uint8 masks. */
typedef struct span_batch {
    int B, N, L, D, R;
    float *inp, *role_table, *out, *g, *dinp, *drole;
    uint8_t *masks;
    int *roles, *argmax;
    void *scratch;
} span_batch;

static void span_batch_alloc(span_batch *s, int B, int N, int L, int D, int R)
{
    *s = (span_batch){.B = B, .N = N, .L = L, .D = D, .R = R};
    s->inp = nn_alloc_floats((size_t)B * L * D);
    s->role_table = nn_alloc_floats((size_t)R * D);
    s->out = nn_alloc_floats((size_t)B * N * D);
    s->g = nn_alloc_floats((size_t)B * N * D);
    s->dinp = nn_alloc_floats((size_t)B * L * D);
    s->drole = nn_alloc_floats((size_t)R * D);
    s->masks = calloc((size_t)B * N * L, 1);
    s->roles = calloc((size_t)B * N, sizeof(int));
    s->argmax = calloc((size_t)B * N * D, sizeof(int));
    s->scratch = malloc(vtr_role_span_pool_scratch_size(B, N, D));
    CHECK(s->masks && s->roles && s->argmax && s->scratch);
}

static void span_batch_free(span_batch *s)
{
    free(s->inp), free(s->role_table), free(s->out), free(s->g), free(s->dinp);
    free(s->drole), free(s->masks), free(s->roles), free(s->argmax), free(s->scratch);
}

/* phrase n of item b covers words first .. last */
static void set_span(span_batch *s, int b, int n, int first, int last, int role)
{
    for (int t = first; t <= last; t++)
        s->masks[((size_t)b * s->N + n) * s->L + t] = 1;
    s->roles[b * s->N + n] = role;
}

static int span_is_empty(const span_batch *s, int b, int n)
{
    for (int t = 0; t < s->L; t++)
        if (s->masks[((size_t)b * s->N + n) * s->L + t])
            return 0;
    return 1;
}

static void span_forward(span_batch *s)
{
    vtr_role_span_pool_forward(s->out, s->argmax, s->inp, s->masks, s->roles, s->role_table, s->B,
                               s->N, s->L, s->D);
}

static void span_backward(span_batch *s, float *dinp, float *drole)
{
    vtr_role_span_pool_backward(dinp, drole, s->scratch, s->g, s->inp, s->argmax, s->roles,
                                s->role_table, s->B, s->N, s->L, s->D);
}

static double span_loss(void *ctx)
{
    span_batch *s = ctx;
    span_forward(s);
    return gradcheck_dot(s->out, s->g, (size_t)s->B * s->N * s->D);
}

TEST(span_pool_forward_hand_spans)
{
    /* one item, L 4 words, D 2; word values per dimension */
    span_batch s;
    span_batch_alloc(&s, 1, 6, 4, 2, 3);
    const float x[8] = {1, 5, 4, -2, 4, 7, 0, 1}; /* dim 0: 1 4 4 0, dim 1: 5 -2 7 1 */
    memcpy(s.inp, x, sizeof x);
    for (int i = 0; i < 6; i++)
        s.role_table[i] = (float)(i + 1); /* role r: (2r+1, 2r+2) */
    set_span(&s, 0, 0, 1, 1, 1);          /* one word */
    set_span(&s, 0, 1, 0, 2, 2);          /* overlaps phrase 0; dim 0 ties at words 1, 2 */
    set_span(&s, 0, 2, 2, 3, 0);          /* overlaps phrase 1 */
    s.roles[3] = 2;                       /* phrase 3 empty */
    set_span(&s, 0, 4, 3, 3, 0);          /* one word, the last */
    set_span(&s, 0, 5, 1, 1, 0);          /* a word set below -1e10 below */
    span_forward(&s);
    const int want_argmax[10] = {1, 1, 1, 2, 2, 2, -1, -1, 3, 3};
    const float want_pooled[10] = {4, -2, 4, 7, 4, 7, -1e10f, -1e10f, 0, 1};
    for (int i = 0; i < 10; i++) {
        int n = i / 2, d = i % 2;
        CHECK_EQ_INT(s.argmax[i], want_argmax[i]);
        CHECK(s.out[i] == want_pooled[i] * s.role_table[s.roles[n] * 2 + d]);
    }
    /* phrase 5: its word below -1e10 loses to the fill of the words outside the span,
     * which come first (word 0): the reference's value, and no word gets the gradient */
    s.inp[1 * 2 + 0] = -3e10f;
    s.inp[1 * 2 + 1] = -1e10f; /* equal to the fill: the earlier word 0 (outside) wins */
    span_forward(&s);
    CHECK_EQ_INT(s.argmax[10], -1);
    CHECK_EQ_INT(s.argmax[11], -1);
    CHECK(s.out[10] == VTR_SPAN_POOL_FILL * s.role_table[0]);
    CHECK(s.out[11] == VTR_SPAN_POOL_FILL * s.role_table[1]);
    span_batch_free(&s);
}

/* B 3, L 8, N 6, D 5, R 4: items of 8, 5 and 3 words; spans of one word, overlapping
 * spans, an empty phrase per item (role 0, shared with a real phrase of item 0) and one
 * span reaching into padded positions. */
static void span_batch_gradcheck_fill(span_batch *s, vtr_rng *rng)
{
    span_batch_alloc(s, 3, 6, 8, 5, 4);
    nn_fill_separated(s->inp, s->B, s->L, s->D, rng);
    nn_fill_uniform(s->role_table, (size_t)s->R * s->D, -1, 1, rng);
    nn_fill_uniform(s->g, (size_t)s->B * s->N * s->D, -1, 1, rng);
    set_span(s, 0, 0, 2, 2, 1);
    set_span(s, 0, 1, 5, 5, 1);
    set_span(s, 0, 2, 0, 3, 2);
    set_span(s, 0, 3, 2, 6, 3);
    set_span(s, 0, 4, 7, 7, 0);
    set_span(s, 1, 0, 1, 1, 1);
    set_span(s, 1, 2, 0, 4, 2);
    set_span(s, 1, 3, 1, 2, 3);
    set_span(s, 1, 4, 3, 4, 2);
    set_span(s, 2, 2, 0, 1, 3);
    set_span(s, 2, 3, 1, 5, 2); /* words 3 .. 5 are past the item's 3 words */
}

TEST(span_pool_gradcheck)
{
    vtr_rng rng;
    vtr_rng_init(&rng, 41, 0);
    span_batch s;
    span_batch_gradcheck_fill(&s, &rng);
    /* Empty phrases pool to -1e10 * role: a model masks them downstream, so here they get no
     * upstream gradient (their -1e10 * dout on the role table is checked exactly in
     * span_pool_empty_span) and the role rows they share stay checkable. */
    for (int b = 0; b < s.B; b++)
        for (int n = 0; n < s.N; n++)
            if (span_is_empty(&s, b, n))
                memset(s.g + ((size_t)b * s.N + n) * s.D, 0, sizeof(float) * s.D);
    span_forward(&s);
    span_backward(&s, s.dinp, s.drole);
    double e1 = gradcheck("role_span_pool.dinp", span_loss, &s, s.inp, s.dinp,
                          (size_t)s.B * s.L * s.D, 1000);
    double e2 = gradcheck("role_span_pool.drole", span_loss, &s, s.role_table, s.drole,
                          (size_t)s.R * s.D, 1000);
    CHECK(e1 <= GRADCHECK_TOL && e2 <= GRADCHECK_TOL);
    /* words in no span have no gradient */
    for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.L; t++) {
            int covered = 0;
            for (int n = 0; n < s.N; n++)
                covered |= s.masks[((size_t)b * s.N + n) * s.L + t];
            for (int d = 0; d < s.D && !covered; d++)
                CHECK(s.dinp[((size_t)b * s.L + t) * s.D + d] == 0.0f);
        }
    span_batch_free(&s);
}

TEST(span_pool_empty_span)
{
    vtr_rng rng;
    vtr_rng_init(&rng, 42, 0);
    span_batch s;
    span_batch_alloc(&s, 2, 3, 4, 3, 5);
    nn_fill_uniform(s.inp, (size_t)s.B * s.L * s.D, -1, 1, &rng);
    nn_fill_uniform(s.role_table, (size_t)s.R * s.D, -1, 1, &rng);
    nn_fill_uniform(s.g, (size_t)s.B * s.N * s.D, -1, 1, &rng);
    set_span(&s, 0, 0, 0, 1, 1);
    s.roles[1] = 4; /* item 0, phrase 1: empty, the only user of role 4 */
    set_span(&s, 0, 2, 2, 3, 2);
    for (int n = 0; n < s.N; n++) /* item 1: every phrase empty, role 3 */
        s.roles[s.N + n] = 3;
    span_forward(&s);
    span_backward(&s, s.dinp, s.drole);
    for (int d = 0; d < s.D; d++) {
        CHECK_EQ_INT(s.argmax[1 * s.D + d], -1);
        CHECK(s.out[1 * s.D + d] == VTR_SPAN_POOL_FILL * s.role_table[4 * s.D + d]);
        /* autograd: d out / d role = the pooled value, -1e10 */
        CHECK(s.drole[4 * s.D + d] == s.g[1 * s.D + d] * VTR_SPAN_POOL_FILL);
        float sum = 0.0f; /* item 1's three phrases add to role 3 in the order of n */
        for (int n = 0; n < s.N; n++)
            sum += s.g[(size_t)(s.N + n) * s.D + d] * VTR_SPAN_POOL_FILL;
        CHECK(s.drole[3 * s.D + d] == sum);
    }
    for (int i = 0; i < s.L * s.D; i++) /* item 1: no word receives a gradient */
        CHECK(s.dinp[s.L * s.D + i] == 0.0f);
    span_batch_free(&s);
}

TEST(span_pool_backward_accumulates)
{
    vtr_rng rng;
    vtr_rng_init(&rng, 43, 0);
    span_batch s;
    span_batch_gradcheck_fill(&s, &rng);
    size_t ni = (size_t)s.B * s.L * s.D, nr = (size_t)s.R * s.D;
    span_forward(&s);
    span_backward(&s, s.dinp, s.drole); /* from zero: the gradients */
    float *dinp = nn_alloc_floats(ni), *drole = nn_alloc_floats(nr),
          *drole_only = nn_alloc_floats(nr);
    for (size_t i = 0; i < ni; i++)
        dinp[i] = 0.25f;
    for (size_t i = 0; i < nr; i++)
        drole[i] = -0.5f;
    span_backward(&s, dinp, drole);
    span_backward(&s, dinp, drole); /* twice: 2 * gradient on top of the start value */
    for (size_t i = 0; i < ni; i++)
        CHECK(fabsf(dinp[i] - (0.25f + 2.0f * s.dinp[i])) <= 1e-5f * (1.0f + fabsf(s.dinp[i])));
    for (size_t i = 0; i < nr; i++) /* empty phrases make role 0's gradient ~1e10 */
        CHECK(fabsf(drole[i] - (-0.5f + 2.0f * s.drole[i])) <= 1e-5f * (1.0f + fabsf(s.drole[i])));
    /* NULL dinp: the role gradient alone, the same bytes */
    span_backward(&s, NULL, drole_only);
    CHECK(memcmp(drole_only, s.drole, sizeof(float) * nr) == 0);
    free(dinp), free(drole), free(drole_only);
    span_batch_free(&s);
}

TEST(span_pool_same_bytes_for_any_thread_count)
{
    /* large enough for the parallel loops: B N L D = 16 10 24 64 */
    enum { B = 16, N = 10, L = 24, D = 64, R = 16 };
    span_batch s[3];
    int threads[3] = {1, 3, 8}, saved = omp_get_max_threads();
    for (int r = 0; r < 3; r++) {
        vtr_rng rng;
        vtr_rng_init(&rng, 44, 0);
        span_batch_alloc(&s[r], B, N, L, D, R);
        nn_fill_uniform(s[r].inp, (size_t)B * L * D, -1, 1, &rng);
        nn_fill_uniform(s[r].role_table, (size_t)R * D, -1, 1, &rng);
        nn_fill_uniform(s[r].g, (size_t)B * N * D, -1, 1, &rng);
        for (int b = 0; b < B; b++)
            for (int n = 0; n < N - b % 3; n++) { /* some empty phrases, shared roles */
                int first = (int)(vtr_rng_uniform(&rng) * L), len = 1 + (b + n) % 5;
                set_span(&s[r], b, n, first, first + len - 1 < L ? first + len - 1 : L - 1,
                         (b * N + n) % 4);
            }
        omp_set_num_threads(threads[r]);
        span_forward(&s[r]);
        span_backward(&s[r], s[r].dinp, s[r].drole);
    }
    omp_set_num_threads(saved);
    for (int r = 1; r < 3; r++) {
        CHECK(memcmp(s[r].out, s[0].out, sizeof(float) * B * N * D) == 0);
        CHECK(memcmp(s[r].argmax, s[0].argmax, sizeof(int) * B * N * D) == 0);
        CHECK(memcmp(s[r].dinp, s[0].dinp, sizeof(float) * B * L * D) == 0);
        CHECK(memcmp(s[r].drole, s[0].drole, sizeof(float) * R * D) == 0);
    }
    for (int r = 0; r < 3; r++)
        span_batch_free(&s[r]);
}

/* The fixtures: tests/fixtures/nn/span_pool/ (nn_fixture_floats reads tests/fixtures/nn/). */
#define FIXTURE(name) "span_pool/" name

TEST(span_pool_parity)
{
    enum { B = 3, L = 12, N = 10, D = 16, R = 16 };
    span_batch s;
    span_batch_alloc(&s, B, N, L, D, R);
    float *inp = nn_fixture_floats(FIXTURE("inp"), B * L * D);
    float *table = nn_fixture_floats(FIXTURE("role_table"), R * D);
    float *dout = nn_fixture_floats(FIXTURE("dout"), B * N * D);
    int *masks = nn_fixture_ints(FIXTURE("masks"), B * N * L);
    int *roles = nn_fixture_ints(FIXTURE("roles"), B * N);
    memcpy(s.inp, inp, sizeof(float) * B * L * D);
    memcpy(s.role_table, table, sizeof(float) * R * D);
    memcpy(s.g, dout, sizeof(float) * B * N * D);
    memcpy(s.roles, roles, sizeof(int) * B * N);
    for (int i = 0; i < B * N * L; i++)
        s.masks[i] = (uint8_t)(masks[i] != 0);
    span_forward(&s);
    span_backward(&s, s.dinp, s.drole);
    /* The empty phrases' -1e10 * role would swamp a relative error over the whole tensor:
     * they must match bit for bit (one float product each side), the other phrases to
     * PARITY_TOL, and the role gradient both with and without their upstream gradient. */
    float *fixture_out = nn_fixture_floats(FIXTURE("out"), B * N * D);
    nn_parity_check(FIXTURE("out"), s.out, B * N * D);
    for (int r = 0; r < B * N; r++)
        if (span_is_empty(&s, r / N, r % N))
            for (int d = 0; d < D; d++) {
                CHECK(s.out[r * D + d] == fixture_out[r * D + d]);
                s.out[r * D + d] = 0.0f;
                s.g[r * D + d] = 0.0f;
            }
    nn_parity_check(FIXTURE("out_spans"), s.out, B * N * D);
    nn_parity_check(FIXTURE("dinp"), s.dinp, B * L * D);
    nn_parity_check(FIXTURE("drole"), s.drole, R * D);
    memset(s.drole, 0, sizeof(float) * R * D);
    span_backward(&s, NULL, s.drole); /* upstream gradient zero at the empty phrases */
    nn_parity_check(FIXTURE("drole_spans"), s.drole, R * D);
    free(inp), free(table), free(dout), free(masks), free(roles), free(fixture_out);
    span_batch_free(&s);
}
