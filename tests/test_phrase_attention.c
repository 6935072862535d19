/* HGR's verb- and noun-level score (match/phrase_attention.h) and the fused score
 * (match/hgr_score.h): finite-difference gradients, accumulation, blocks, determinism
 * across OpenMP thread counts, and parity with PyTorch (tests/fixtures/nn/phrase_attention/,
 * written by tests/fixtures/make_phrase_attention_fixtures.py). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.h"
#include "gradcheck.h"
#include "match/hgr_score.h"
#include "match/phrase_attention.h"

/* the fixtures' sizes (make_phrase_attention_fixtures.py) */
enum { FBV = 3, FBC = 4, FT = 5, FP = 4, FD = 16 };

/* The fixtures: tests/fixtures/nn/phrase_attention/ (nn_fixture_floats reads tests/fixtures/nn/). */
#define FIXTURE(name) "phrase_attention/" name

/* One instance of the op: inputs, a fixed upstream gradient, buffers. */
typedef struct {
    int Bv, Bc, T, P, D;
    float *vid, *phrases, *dscores, *scores, *dvid, *dphrases;
    int *lengths, *n_phrases;
    void *workspace, *scratch;
} op_case;

static void case_alloc(op_case *c, int Bv, int Bc, int T, int P, int D)
{
    c->Bv = Bv, c->Bc = Bc, c->T = T, c->P = P, c->D = D;
    c->vid = nn_alloc_floats((size_t)Bv * T * D);
    c->phrases = nn_alloc_floats((size_t)Bc * P * D);
    c->dscores = nn_alloc_floats((size_t)Bv * Bc);
    c->scores = nn_alloc_floats((size_t)Bv * Bc);
    c->dvid = nn_alloc_floats((size_t)Bv * T * D);
    c->dphrases = nn_alloc_floats((size_t)Bc * P * D);
    c->lengths = calloc((size_t)Bv, sizeof(int));
    c->n_phrases = calloc((size_t)Bc, sizeof(int));
    c->workspace = malloc(vtr_phrase_attention_workspace_size(Bv, Bc, T, P, D));
    c->scratch = malloc(vtr_phrase_attention_scratch_size(Bv, Bc, T, P, D));
    CHECK(c->lengths && c->n_phrases && c->workspace && c->scratch);
}

static void case_free(op_case *c)
{
    free(c->vid), free(c->phrases), free(c->dscores), free(c->scores), free(c->dvid);
    free(c->dphrases), free(c->lengths), free(c->n_phrases), free(c->workspace);
    free(c->scratch);
}

/* The fixtures' inputs: padded frames hold garbage, caption 2 has no phrase, and phrase
 * (0, 1) has only negative cosines with video 1. */
static void case_from_fixtures(op_case *c)
{
    case_alloc(c, FBV, FBC, FT, FP, FD);
    float *vid = nn_fixture_floats(FIXTURE("vid"), FBV * FT * FD);
    float *phrases = nn_fixture_floats(FIXTURE("phrases"), FBC * FP * FD);
    float *dscores = nn_fixture_floats(FIXTURE("dscores"), FBV * FBC);
    int *lengths = nn_fixture_ints(FIXTURE("lengths"), FBV);
    int *n_phrases = nn_fixture_ints(FIXTURE("n_phrases"), FBC);
    memcpy(c->vid, vid, sizeof(float) * FBV * FT * FD);
    memcpy(c->phrases, phrases, sizeof(float) * FBC * FP * FD);
    memcpy(c->dscores, dscores, sizeof(float) * FBV * FBC);
    memcpy(c->lengths, lengths, sizeof(int) * FBV);
    memcpy(c->n_phrases, n_phrases, sizeof(int) * FBC);
    free(vid), free(phrases), free(dscores), free(lengths), free(n_phrases);
}

static void case_random(op_case *c, int Bv, int Bc, int T, int P, int D, uint64_t seed)
{
    case_alloc(c, Bv, Bc, T, P, D);
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    nn_fill_uniform(c->vid, (size_t)Bv * T * D, -1.0f, 1.0f, &rng);
    nn_fill_uniform(c->phrases, (size_t)Bc * P * D, -1.0f, 1.0f, &rng);
    nn_fill_uniform(c->dscores, (size_t)Bv * Bc, -1.0f, 1.0f, &rng);
    for (int v = 0; v < Bv; v++)
        c->lengths[v] = 1 + (int)vtr_rng_below(&rng, (uint32_t)T);
    for (int k = 0; k < Bc; k++)
        c->n_phrases[k] = (int)vtr_rng_below(&rng, (uint32_t)P + 1);
}

static void case_forward(op_case *c)
{
    vtr_phrase_attention_score_forward(c->scores, c->workspace, c->vid, c->lengths, c->phrases,
                                       c->n_phrases, c->Bv, c->Bc, c->T, c->P, c->D,
                                       VTR_PHRASE_ATTENTION_SIGMA);
}

static void case_backward(op_case *c, float *dvid, float *dphrases)
{
    vtr_phrase_attention_score_backward(dvid, dphrases, c->scratch, c->dscores, c->vid,
                                        c->lengths, c->phrases, c->n_phrases, c->workspace, c->Bv,
                                        c->Bc, c->T, c->P, c->D, VTR_PHRASE_ATTENTION_SIGMA);
}

static double case_loss(void *ctx)
{
    op_case *c = ctx;
    case_forward(c);
    return gradcheck_dot(c->scores, c->dscores, (size_t)c->Bv * c->Bc);
}

TEST(phrase_attention_gradcheck_padding_empty_captions_negative_cosines)
{
    op_case c;
    case_from_fixtures(&c);
    case_forward(&c);
    case_backward(&c, c.dvid, c.dphrases);
    size_t nv = (size_t)FBV * FT * FD, np = (size_t)FBC * FP * FD;
    double e1 = gradcheck("phrase_attention.dvid", case_loss, &c, c.vid, c.dvid, nv, nv);
    double e2 =
        gradcheck("phrase_attention.dphrases", case_loss, &c, c.phrases, c.dphrases, np, np);
    CHECK(e1 <= GRADCHECK_TOL && e2 <= GRADCHECK_TOL);
    /* padded frames and the phrases past n_phrases get exactly zero gradient */
    for (int v = 0; v < FBV; v++)
        for (int t = c.lengths[v]; t < FT; t++)
            for (int d = 0; d < FD; d++)
                CHECK(c.dvid[((size_t)v * FT + t) * FD + d] == 0.0f);
    for (int k = 0; k < FBC; k++) {
        for (int p = c.n_phrases[k]; p < FP; p++)
            for (int d = 0; d < FD; d++)
                CHECK(c.dphrases[((size_t)k * FP + p) * FD + d] == 0.0f);
        if (c.n_phrases[k] == 0)
            for (int v = 0; v < FBV; v++)
                CHECK(c.scores[v * FBC + k] == 0.0f);
    }
    case_free(&c);
}

TEST(phrase_attention_gradcheck_random_sizes)
{
    op_case c;
    case_random(&c, 4, 5, 7, 3, 9, 11);
    c.lengths[0] = c.T, c.n_phrases[0] = c.P; /* one full video and caption */
    case_forward(&c);
    case_backward(&c, c.dvid, c.dphrases);
    gradcheck("phrase_attention.dvid", case_loss, &c, c.vid, c.dvid,
              (size_t)c.Bv * c.T * c.D, 400);
    gradcheck("phrase_attention.dphrases", case_loss, &c, c.phrases, c.dphrases,
              (size_t)c.Bc * c.P * c.D, 400);
    case_free(&c);
}

TEST(phrase_attention_backward_accumulates_and_skips_null)
{
    op_case c;
    case_from_fixtures(&c);
    size_t nv = (size_t)FBV * FT * FD, np = (size_t)FBC * FP * FD;
    case_forward(&c);
    case_backward(&c, c.dvid, c.dphrases);
    float *dvid = nn_alloc_floats(nv), *dphrases = nn_alloc_floats(np);
    for (size_t i = 0; i < nv; i++)
        dvid[i] = 0.5f;
    for (size_t i = 0; i < np; i++)
        dphrases[i] = -0.25f;
    case_backward(&c, dvid, NULL); /* the workspace is read only: a second backward works */
    case_backward(&c, NULL, dphrases);
    for (size_t i = 0; i < nv; i++)
        CHECK(fabsf(dvid[i] - (0.5f + c.dvid[i])) <= 1e-6f);
    for (size_t i = 0; i < np; i++)
        CHECK(fabsf(dphrases[i] - (-0.25f + c.dphrases[i])) <= 1e-6f);
    free(dvid), free(dphrases);
    case_free(&c);
}

TEST(phrase_attention_any_block_gives_the_same_scores)
{
    /* evaluation scores a test set block by block: a sub-block of videos x captions gives
     * the scores of the whole block */
    op_case all, part;
    case_random(&all, 6, 7, 5, 3, 12, 5);
    case_forward(&all);
    int v0 = 2, nv = 3, c0 = 4, nc = 3;
    case_alloc(&part, nv, nc, all.T, all.P, all.D);
    memcpy(part.vid, all.vid + (size_t)v0 * all.T * all.D, sizeof(float) * nv * all.T * all.D);
    memcpy(part.phrases, all.phrases + (size_t)c0 * all.P * all.D,
           sizeof(float) * nc * all.P * all.D);
    memcpy(part.lengths, all.lengths + v0, sizeof(int) * nv);
    memcpy(part.n_phrases, all.n_phrases + c0, sizeof(int) * nc);
    case_forward(&part);
    for (int v = 0; v < nv; v++)
        for (int k = 0; k < nc; k++)
            CHECK(fabsf(part.scores[v * nc + k] - all.scores[(v0 + v) * all.Bc + c0 + k]) <=
                  1e-6f);
    case_free(&all);
    case_free(&part);
}

TEST(phrase_attention_same_result_for_1_and_2_threads)
{
#ifdef _OPENMP
    /* large enough that every parallel loop runs in parallel */
    enum { BV = 24, BC = 20, T = 12, P = 6, D = 96 };
    op_case c;
    case_random(&c, BV, BC, T, P, D, 3);
    size_t ns = (size_t)BV * BC, nv = (size_t)BV * T * D, np = (size_t)BC * P * D;
    float *out[2][3];
    int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r + 1);
        memset(c.dvid, 0, sizeof(float) * nv);
        memset(c.dphrases, 0, sizeof(float) * np);
        case_forward(&c);
        case_backward(&c, c.dvid, c.dphrases);
        out[r][0] = nn_alloc_floats(ns), out[r][1] = nn_alloc_floats(nv);
        out[r][2] = nn_alloc_floats(np);
        memcpy(out[r][0], c.scores, sizeof(float) * ns);
        memcpy(out[r][1], c.dvid, sizeof(float) * nv);
        memcpy(out[r][2], c.dphrases, sizeof(float) * np);
    }
    omp_set_num_threads(saved);
    nn_check_across_threads("scores", out[1][0], out[0][0], ns);
    nn_check_across_threads("dvid", out[1][1], out[0][1], nv);
    nn_check_across_threads("dphrases", out[1][2], out[0][2], np);
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++)
            free(out[r][k]);
    case_free(&c);
#else
    test_skip("built without OpenMP");
#endif
}

TEST(phrase_attention_parity_with_pytorch)
{
    op_case c;
    case_from_fixtures(&c);
    case_forward(&c);
    case_backward(&c, c.dvid, c.dphrases);
    nn_parity_check(FIXTURE("scores"), c.scores, FBV * FBC);
    nn_parity_check(FIXTURE("dvid"), c.dvid, FBV * FT * FD);
    nn_parity_check(FIXTURE("dphrases"), c.dphrases, FBC * FP * FD);
    case_free(&c);
}

TEST(phrase_attention_hgr_fused_score_is_the_mean_of_three_levels)
{
    float global[2] = {0.3f, -0.6f}, verb[2] = {0.9f, 0.0f}, noun[2] = {-0.3f, 0.3f};
    float out[2], dout[2] = {3.0f, -1.5f}, dglobal[2] = {1.0f, 1.0f}, dnoun[2] = {0};
    vtr_hgr_fused_score_forward(out, global, verb, noun, 2);
    CHECK(out[0] == (0.3f + 0.9f + -0.3f) / 3.0f && out[1] == (-0.6f + 0.0f + 0.3f) / 3.0f);
    vtr_hgr_fused_score_backward(dglobal, NULL, dnoun, dout, 2);
    CHECK(dglobal[0] == 2.0f && dglobal[1] == 0.5f);
    CHECK(dnoun[0] == 1.0f && dnoun[1] == -0.5f);
}

/* The score of one pair straight from the formula of match/phrase_attention.h, attended
 * frames formed explicitly, in double. */
static double direct_score(const op_case *c, int v, int k)
{
    int T = c->T, D = c->D, len = c->lengths[v], n = c->n_phrases[k];
    double total = 0.0;
    for (int p = 0; p < n; p++) {
        const float *ph = c->phrases + ((size_t)k * c->P + p) * D;
        double g[64], a[64], w[64], pp = 0.0, ss = 0.0, mx = -1e300, z = 0.0;
        for (int d = 0; d < D; d++)
            pp += (double)ph[d] * ph[d];
        for (int t = 0; t < len; t++) {
            const float *x = c->vid + ((size_t)v * T + t) * D;
            double xx = 0.0, xp = 0.0;
            for (int d = 0; d < D; d++)
                xx += (double)x[d] * x[d], xp += (double)x[d] * ph[d];
            g[t] = xp / (sqrt(xx + 1e-18) * sqrt(pp + 1e-18));
            a[t] = g[t] > 0.0 ? g[t] : 0.0;
            ss += a[t] * a[t];
        }
        for (int t = 0; t < len; t++) {
            a[t] = VTR_PHRASE_ATTENTION_SIGMA * a[t] / fmax(sqrt(ss), 1e-10);
            mx = fmax(mx, a[t]);
        }
        for (int t = 0; t < len; t++)
            z += w[t] = exp(a[t] - mx);
        double att2 = 0.0, dot = 0.0;
        for (int d = 0; d < D; d++) {
            double att = 0.0;
            for (int t = 0; t < len; t++)
                att += w[t] / z * c->vid[((size_t)v * T + t) * D + d];
            att2 += att * att;
            dot += att * ph[d];
        }
        total += dot / (fmax(sqrt(att2), 1e-10) * fmax(sqrt(pp), 1e-10));
    }
    return total / (n > 1 ? n : 1);
}

TEST(phrase_attention_matches_the_direct_formula_with_cancelling_frames)
{
    /* video 1's two frames are s phrase(0,0) + b and s phrase(0,0) - b, b orthogonal to the
     * phrase and long: both frames get the same weight and the attended frames, s phrase,
     * are short next to them, where |att|^2 = wᵀ K w would lose digits */
    op_case c;
    case_random(&c, 3, 4, 4, 3, 32, 17);
    c.n_phrases[0] = 2;
    float *x = c.vid + (size_t)1 * c.T * c.D, *ph = c.phrases;
    double bp = gradcheck_dot(x, ph, c.D), pp = gradcheck_dot(ph, ph, c.D);
    for (int d = 0; d < c.D; d++) {
        float b = x[d] - (float)(bp / pp) * ph[d];
        x[d] = 0.003f * ph[d] + b;
        x[c.D + d] = 0.003f * ph[d] - b;
    }
    c.lengths[1] = 2;
    case_forward(&c);
    double worst = 0.0;
    for (int v = 0; v < c.Bv; v++)
        for (int k = 0; k < c.Bc; k++) {
            double ref = direct_score(&c, v, k), err = fabs(c.scores[v * c.Bc + k] - ref);
            worst = err > worst ? err : worst;
        }
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    direct formula: max abs error %.2e\n", worst);
    CHECK_MSG(worst < 1e-5, "max abs error %.3g", worst);
    case_free(&c);
}
