/* Smooth-Chamfer similarity, the diversity and the MMD regularisers (match/set_similarity.h):
 * finite-difference gradients (alpha 16 itself), the blocks of the tiling against the
 * per-pair formula in double, symmetry, K = 1, equal rows in MMD, accumulation,
 * determinism across thread counts, and parity with PyTorch (tests/fixtures/nn/
 * set_similarity/, written by tests/fixtures/make_set_similarity_fixtures.py). Run with
 * VTR_TEST_VERBOSE=1 to print the gradcheck and parity errors. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gradcheck.h"
#include "lib/norm.h"
#include "lib/similarity.h"
#include "match/set_similarity.h"

/* The parity this op is held to (the brief of the set embeddings: 1e-5, tighter than
 * PARITY_TOL): the fixtures are computed in float64 from the same float32 inputs. */
#define SET_PARITY_TOL 1e-5

/* n rows (D) drawn uniform in [-1, 1), then scaled to unit length */
static void fill_unit_rows(float *x, long n, int D, vtr_rng *rng)
{
    nn_fill_uniform(x, (size_t)n * D, -1.0f, 1.0f, rng);
    for (long i = 0; i < n; i++) {
        double norm = sqrt(vtr_row_sum_squares(x + i * D, D));
        for (int d = 0; d < D; d++)
            x[i * D + d] = (float)(x[i * D + d] / norm);
    }
}

/* ---- smooth-Chamfer ---------------------------------------------------------------------- */

/* One call of the op: a (Na,Ka,D), b (Nb,Kb,D), S and dS (Na,Nb), da, db, scratch. */
typedef struct {
    int Na, Nb, Ka, Kb, D;
    float alpha;
    float *a, *b, *S, *dS, *da, *db;
    void *scratch;
} chamfer_case;

static void chamfer_alloc(chamfer_case *c, int Na, int Nb, int Ka, int Kb, int D, uint64_t seed)
{
    *c = (chamfer_case){.Na = Na, .Nb = Nb, .Ka = Ka, .Kb = Kb, .D = D, .alpha = VTR_SET_ALPHA};
    c->a = nn_alloc_floats((size_t)Na * Ka * D);
    c->b = nn_alloc_floats((size_t)Nb * Kb * D);
    c->S = nn_alloc_floats((size_t)Na * Nb);
    c->dS = nn_alloc_floats((size_t)Na * Nb);
    c->da = nn_alloc_floats((size_t)Na * Ka * D);
    c->db = nn_alloc_floats((size_t)Nb * Kb * D);
    c->scratch = malloc(vtr_smooth_chamfer_scratch_size(Na, Nb, Ka, Kb));
    CHECK(c->scratch);
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    fill_unit_rows(c->a, (long)Na * Ka, D, &rng);
    fill_unit_rows(c->b, (long)Nb * Kb, D, &rng);
    nn_fill_uniform(c->dS, (size_t)Na * Nb, -1.0f, 1.0f, &rng);
}

static void chamfer_free(chamfer_case *c)
{
    free(c->a), free(c->b), free(c->S), free(c->dS), free(c->da), free(c->db), free(c->scratch);
}

static void chamfer_forward(chamfer_case *c)
{
    vtr_smooth_chamfer_forward(c->S, c->Nb, c->scratch, c->a, c->b, c->Na, c->Nb, c->Ka, c->Kb,
                               c->D, c->alpha);
}

static void chamfer_backward(chamfer_case *c, float *da, float *db)
{
    vtr_smooth_chamfer_backward(da, db, c->scratch, c->dS, c->Nb, c->a, c->b, c->Na, c->Nb, c->Ka,
                                c->Kb, c->D, c->alpha);
}

static double chamfer_loss(void *ctx)
{
    chamfer_case *c = ctx;
    chamfer_forward(c);
    return gradcheck_dot(c->S, c->dS, (size_t)c->Na * c->Nb);
}

/* log sum_k exp(alpha c[k*stride]) over n values, about the maximum, in double */
static double log_sum_exp(const double *c, long stride, int n, double alpha)
{
    double m = -INFINITY, sum = 0.0;
    for (int k = 0; k < n; k++)
        m = fmax(m, alpha * c[k * stride]);
    for (int k = 0; k < n; k++)
        sum += exp(alpha * c[k * stride] - m);
    return m + log(sum);
}

/* The per-pair formula in double: S (Na,Nb) and, with da, db not NULL, the gradients of
 * sum(dS * S), all written (not accumulated). */
static void chamfer_naive(double *S, double *da, double *db, const chamfer_case *c)
{
    int Ka = c->Ka, Kb = c->Kb, D = c->D;
    double alpha = c->alpha;
    double *cos = malloc(sizeof(double) * Ka * Kb), *lse_row = malloc(sizeof(double) * Ka),
           *lse_col = malloc(sizeof(double) * Kb);
    CHECK(cos && lse_row && lse_col);
    if (da)
        memset(da, 0, sizeof(double) * c->Na * Ka * D);
    if (db)
        memset(db, 0, sizeof(double) * c->Nb * Kb * D);
    for (int i = 0; i < c->Na; i++)
        for (int j = 0; j < c->Nb; j++) {
            const float *ai = c->a + (size_t)i * Ka * D, *bj = c->b + (size_t)j * Kb * D;
            for (int x = 0; x < Ka; x++)
                for (int y = 0; y < Kb; y++)
                    cos[x * Kb + y] = gradcheck_dot(ai + x * D, bj + y * D, D);
            double s = 0.0;
            for (int x = 0; x < Ka; x++) {
                lse_row[x] = log_sum_exp(cos + x * Kb, 1, Kb, alpha);
                s += lse_row[x] / (2 * alpha * Ka);
            }
            for (int y = 0; y < Kb; y++) {
                lse_col[y] = log_sum_exp(cos + y, Kb, Ka, alpha);
                s += lse_col[y] / (2 * alpha * Kb);
            }
            S[(size_t)i * c->Nb + j] = s;
            if (!da)
                continue;
            double g = c->dS[(size_t)i * c->Nb + j];
            for (int x = 0; x < Ka; x++)
                for (int y = 0; y < Kb; y++) {
                    double dc = g * (exp(alpha * cos[x * Kb + y] - lse_row[x]) / (2 * Ka) +
                                     exp(alpha * cos[x * Kb + y] - lse_col[y]) / (2 * Kb));
                    for (int d = 0; d < D; d++) {
                        da[((size_t)i * Ka + x) * D + d] += dc * bj[y * D + d];
                        db[((size_t)j * Kb + y) * D + d] += dc * ai[x * D + d];
                    }
                }
        }
    free(cos), free(lse_row), free(lse_col);
}

/* max |got - want| / max(max |want|, 1e-6) */
static double relative_error(const float *got, const double *want, size_t n)
{
    double diff = 0.0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs(got[i] - want[i]));
        scale = fmax(scale, fabs(want[i]));
    }
    return diff / scale;
}

TEST(set_similarity_chamfer_gradcheck)
{
    /* alpha 16 itself: with unit rows its softmaxes are smooth enough for a step of 1e-3 */
    chamfer_case c;
    chamfer_alloc(&c, 3, 4, 3, 2, 6, 51);
    chamfer_forward(&c);
    chamfer_backward(&c, c.da, c.db);
    size_t na = (size_t)c.Na * c.Ka * c.D, nb = (size_t)c.Nb * c.Kb * c.D;
    double e1 = gradcheck("smooth_chamfer.da", chamfer_loss, &c, c.a, c.da, na, na);
    double e2 = gradcheck("smooth_chamfer.db", chamfer_loss, &c, c.b, c.db, nb, nb);
    CHECK(e1 <= GRADCHECK_TOL && e2 <= GRADCHECK_TOL);
    chamfer_free(&c);
}

TEST(set_similarity_chamfer_tiles_match_the_formula_in_double)
{
    /* 300 x 270 sets: two blocks of VTR_SET_BLOCK on each side, the last ones partial */
    enum { NA = 300, NB = 270, KA = 2, KB = 3, D = 8, LDS = NB + 5 };
    chamfer_case c;
    chamfer_alloc(&c, NA, NB, KA, KB, D, 52);
    double *S = malloc(sizeof(double) * NA * NB), *da = malloc(sizeof(double) * NA * KA * D),
           *db = malloc(sizeof(double) * NB * KB * D);
    CHECK(S && da && db);
    chamfer_naive(S, da, db, &c);
    chamfer_forward(&c);
    chamfer_backward(&c, c.da, c.db);
    double es = relative_error(c.S, S, (size_t)NA * NB);
    double ea = relative_error(c.da, da, (size_t)NA * KA * D);
    double eb = relative_error(c.db, db, (size_t)NB * KB * D);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    tiled 300 x 270 against double: S %.2e, da %.2e, db %.2e\n", es, ea, eb);
    CHECK(es <= 1e-6 && ea <= 1e-5 && eb <= 1e-5);

    /* a row stride above Nb leaves the columns past Nb alone */
    float *wide = nn_alloc_floats((size_t)NA * LDS);
    for (size_t i = 0; i < (size_t)NA * LDS; i++)
        wide[i] = 7.0f;
    vtr_smooth_chamfer_forward(wide, LDS, c.scratch, c.a, c.b, NA, NB, KA, KB, D, c.alpha);
    for (int i = 0; i < NA; i++) {
        CHECK(memcmp(wide + (size_t)i * LDS, c.S + (size_t)i * NB, sizeof(float) * NB) == 0);
        for (int j = NB; j < LDS; j++)
            CHECK(wide[(size_t)i * LDS + j] == 7.0f);
    }

    /* a block of sets scored alone: the same scores as inside the large call */
    enum { I0 = 250, NI = 20, J0 = 100, NJ = 170 };
    float *block = nn_alloc_floats((size_t)NI * NJ);
    void *small = malloc(vtr_smooth_chamfer_scratch_size(NI, NJ, KA, KB));
    CHECK(small);
    vtr_smooth_chamfer_forward(block, NJ, small, c.a + (size_t)I0 * KA * D,
                               c.b + (size_t)J0 * KB * D, NI, NJ, KA, KB, D, c.alpha);
    for (int i = 0; i < NI; i++)
        for (int j = 0; j < NJ; j++)
            CHECK_MSG(fabsf(block[i * NJ + j] - c.S[(size_t)(I0 + i) * NB + J0 + j]) <= 1e-6f,
                      "block pair (%d, %d): %.9g, in the large call %.9g", i, j, block[i * NJ + j],
                      c.S[(size_t)(I0 + i) * NB + J0 + j]);
    free(S), free(da), free(db), free(wide), free(block), free(small);
    chamfer_free(&c);
}

TEST(set_similarity_chamfer_scratch_is_one_block)
{
    size_t block = vtr_smooth_chamfer_scratch_size(VTR_SET_BLOCK, VTR_SET_BLOCK, 4, 4);
    CHECK(vtr_smooth_chamfer_scratch_size(5000, 25000, 4, 4) == block);
    CHECK(vtr_smooth_chamfer_scratch_size(3, 25000, 4, 4) < block);
}

TEST(set_similarity_chamfer_is_symmetric_and_the_cosine_at_k1)
{
    enum { NA = 4, NB = 5, K = 3, D = 7 };
    chamfer_case ab, k1;
    chamfer_alloc(&ab, NA, NB, K, K, D, 53);
    chamfer_forward(&ab);
    float *ba = nn_alloc_floats(NB * NA);
    void *scratch = malloc(vtr_smooth_chamfer_scratch_size(NB, NA, K, K));
    CHECK(scratch);
    vtr_smooth_chamfer_forward(ba, NA, scratch, ab.b, ab.a, NB, NA, K, K, D, ab.alpha);
    for (int i = 0; i < NA; i++)
        for (int j = 0; j < NB; j++)
            CHECK(fabsf(ab.S[i * NB + j] - ba[j * NA + i]) <= 1e-6f);

    chamfer_alloc(&k1, NA, NB, 1, 1, D, 54);
    chamfer_forward(&k1);
    float *cosine = nn_alloc_floats(NA * NB);
    vtr_cosine_similarity_forward(cosine, k1.a, k1.b, NA, NB, D);
    CHECK(memcmp(cosine, k1.S, sizeof(float) * NA * NB) == 0);
    free(ba), free(scratch), free(cosine);
    chamfer_free(&ab);
    chamfer_free(&k1);
}

TEST(set_similarity_chamfer_backward_accumulates_and_skips_null)
{
    chamfer_case c;
    chamfer_alloc(&c, 6, 5, 4, 3, 9, 55);
    size_t na = (size_t)c.Na * c.Ka * c.D, nb = (size_t)c.Nb * c.Kb * c.D;
    chamfer_backward(&c, c.da, c.db); /* from zero: the gradients */
    float *da = nn_alloc_floats(na), *db = nn_alloc_floats(nb), *db_only = nn_alloc_floats(nb);
    for (size_t i = 0; i < na; i++)
        da[i] = 0.25f;
    for (size_t i = 0; i < nb; i++)
        db[i] = -0.5f;
    chamfer_backward(&c, da, db);
    chamfer_backward(&c, da, db); /* twice: 2 * gradient on top of the start value */
    for (size_t i = 0; i < na; i++)
        CHECK(fabsf(da[i] - (0.25f + 2.0f * c.da[i])) <= 1e-6f * (1.0f + fabsf(c.da[i])));
    for (size_t i = 0; i < nb; i++)
        CHECK(fabsf(db[i] - (-0.5f + 2.0f * c.db[i])) <= 1e-6f * (1.0f + fabsf(c.db[i])));
    chamfer_backward(&c, NULL, db_only); /* the same bytes without da */
    CHECK(memcmp(db_only, c.db, sizeof(float) * nb) == 0);
    free(da), free(db), free(db_only);
    chamfer_free(&c);
}

/* ---- diversity --------------------------------------------------------------------------- */

/* dloss large enough that the gradients stand well above the floor of gradcheck */
#define REGULARISER_DLOSS 50.0f

typedef struct {
    int N, K, D;
    float *r, *dr;
} diversity_case;

static double diversity_loss(void *ctx)
{
    diversity_case *c = ctx;
    return REGULARISER_DLOSS * vtr_set_diversity_forward(c->r, c->N, c->K, c->D);
}

TEST(set_similarity_diversity_gradcheck_general_rows)
{
    /* rows of any length (the gradient is not the unit rows' one), one pair close */
    enum { N = 3, K = 4, D = 5 };
    diversity_case c = {N, K, D, nn_alloc_floats(N * K * D), nn_alloc_floats(N * K * D)};
    vtr_rng rng;
    vtr_rng_init(&rng, 56, 0);
    nn_fill_uniform(c.r, N * K * D, -0.6f, 0.6f, &rng);
    for (int d = 0; d < D; d++)
        c.r[(1 * K + 2) * D + d] = c.r[(1 * K + 1) * D + d] + 0.05f * (float)(d - 2);
    vtr_set_diversity_backward(c.dr, REGULARISER_DLOSS, c.r, N, K, D);
    double e = gradcheck("set_diversity.dr", diversity_loss, &c, c.r, c.dr, N * K * D, N * K * D);
    CHECK(e <= GRADCHECK_TOL);
    free(c.r), free(c.dr);
}

TEST(set_similarity_diversity_by_hand_and_k1)
{
    /* one item of two rows at distance 1, one of two equal rows: (exp(-2) + 1) / 2 */
    const float r[8] = {1, 0, 0, 0, 0.5f, 0.5f, 0.5f, 0.5f};
    float want = (float)((exp(-2.0) + 1.0) / 2.0);
    CHECK(fabsf(vtr_set_diversity_forward(r, 2, 2, 2) - want) <= 1e-7f);
    float dr[8] = {0};
    vtr_set_diversity_backward(dr, 1.0f, r, 2, 2, 2);
    /* item 0: d/dr_0 = -4 exp(-2) (r_0 - r_1) / 2; equal rows pass nothing */
    CHECK(fabsf(dr[0] - (float)(-2.0 * exp(-2.0))) <= 1e-7f);
    CHECK(fabsf(dr[2] - (float)(2.0 * exp(-2.0))) <= 1e-7f);
    CHECK(dr[1] == 0.0f && dr[3] == 0.0f);
    for (int i = 4; i < 8; i++)
        CHECK(dr[i] == 0.0f);
    /* K = 1: no pair, 0, and no gradient */
    CHECK(vtr_set_diversity_forward(r, 4, 1, 2) == 0.0f);
    vtr_set_diversity_backward(dr, 1.0f, r, 4, 1, 2);
    CHECK(dr[1] == 0.0f && dr[4] == 0.0f);
}

/* ---- MMD --------------------------------------------------------------------------------- */

typedef struct {
    long nx, ny;
    int D;
    float *X, *Y, *dx, *dy;
    void *scratch;
} mmd_case;

static void mmd_alloc(mmd_case *c, long nx, long ny, int D, uint64_t seed)
{
    *c = (mmd_case){.nx = nx, .ny = ny, .D = D};
    c->X = nn_alloc_floats((size_t)nx * D);
    c->Y = nn_alloc_floats((size_t)ny * D);
    c->dx = nn_alloc_floats((size_t)nx * D);
    c->dy = nn_alloc_floats((size_t)ny * D);
    c->scratch = malloc(vtr_set_mmd_scratch_size(nx, ny));
    CHECK(c->scratch);
    vtr_rng rng;
    vtr_rng_init(&rng, seed, 0);
    fill_unit_rows(c->X, nx, D, &rng);
    fill_unit_rows(c->Y, ny, D, &rng);
}

static void mmd_free(mmd_case *c)
{
    free(c->X), free(c->Y), free(c->dx), free(c->dy), free(c->scratch);
}

static double mmd_loss(void *ctx)
{
    mmd_case *c = ctx;
    return REGULARISER_DLOSS *
           vtr_set_mmd_forward(c->scratch, c->X, c->Y, c->nx, c->ny, c->D, VTR_SET_MMD_GAMMA);
}

/* mean over the pairs of u (n,D) and v (m,D) of exp(-gamma |u - v|), in double, with its
 * gradients times coef added to du (n,D) and dv (m,D) (zero at distance 0) */
static double mmd_naive_term(double *du, double *dv, const float *u, const float *v, long n, long m,
                             int D, double coef)
{
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        for (long j = 0; j < m; j++) {
            double d2 = 0.0;
            for (int d = 0; d < D; d++)
                d2 += ((double)u[i * D + d] - v[j * D + d]) * ((double)u[i * D + d] - v[j * D + d]);
            double dist = sqrt(d2), k = exp(-VTR_SET_MMD_GAMMA * dist);
            sum += k;
            if (dist == 0.0)
                continue;
            double w = coef / ((double)n * m) * -VTR_SET_MMD_GAMMA * k / dist;
            for (int d = 0; d < D; d++) {
                double diff = (double)u[i * D + d] - v[j * D + d];
                du[i * D + d] += w * diff;
                dv[j * D + d] -= w * diff;
            }
        }
    return sum / ((double)n * m);
}

TEST(set_similarity_mmd_gradcheck_with_equal_rows)
{
    mmd_case c;
    mmd_alloc(&c, 7, 9, 5, 57);
    memcpy(c.Y + 4 * 5, c.X + 2 * 5, sizeof(float) * 5); /* a pair at distance 0 */
    for (int d = 0; d < 5; d++)                          /* and one very close */
        c.Y[6 * 5 + d] = c.X[5 * 5 + d] + 0.02f * (float)(d - 2);
    vtr_set_mmd_backward(c.dx, c.dy, REGULARISER_DLOSS, c.scratch, c.X, c.Y, c.nx, c.ny, c.D,
                         VTR_SET_MMD_GAMMA);
    double e1 = gradcheck("set_mmd.dx", mmd_loss, &c, c.X, c.dx, 7 * 5, 7 * 5);
    double e2 = gradcheck("set_mmd.dy", mmd_loss, &c, c.Y, c.dy, 9 * 5, 9 * 5);
    CHECK(e1 <= GRADCHECK_TOL && e2 <= GRADCHECK_TOL);
    mmd_free(&c);
}

TEST(set_similarity_mmd_matches_the_pairs_in_double)
{
    /* 300 x 280 rows, past the parallel thresholds, with equal and near-equal rows */
    enum { NX = 300, NY = 280, D = 24 };
    mmd_case c;
    mmd_alloc(&c, NX, NY, D, 58);
    memcpy(c.Y + 10 * D, c.X + 20 * D, sizeof(float) * D);
    memcpy(c.X + 40 * D, c.X + 41 * D, sizeof(float) * D);
    for (int d = 0; d < D; d++)
        c.Y[30 * D + d] = c.X[50 * D + d] + 1e-3f * (float)(d % 3 - 1);
    double *dx = calloc((size_t)NX * D, sizeof(double)),
           *dy = calloc((size_t)NY * D, sizeof(double));
    CHECK(dx && dy);
    double want = mmd_naive_term(dx, dx, c.X, c.X, NX, NX, D, 1.0) -
                  2.0 * mmd_naive_term(dx, dy, c.X, c.Y, NX, NY, D, -2.0) +
                  mmd_naive_term(dy, dy, c.Y, c.Y, NY, NY, D, 1.0);
    float got = vtr_set_mmd_forward(c.scratch, c.X, c.Y, NX, NY, D, VTR_SET_MMD_GAMMA);
    vtr_set_mmd_backward(c.dx, c.dy, 1.0f, c.scratch, c.X, c.Y, NX, NY, D, VTR_SET_MMD_GAMMA);
    double el = fabs(got - want) / fabs(want);
    double ex = relative_error(c.dx, dx, (size_t)NX * D),
           ey = relative_error(c.dy, dy, (size_t)NY * D);
    if (getenv("VTR_TEST_VERBOSE"))
        printf("    MMD 300 x 280 against double: loss %.2e, dx %.2e, dy %.2e\n", el, ex, ey);
    CHECK(el <= 1e-5 && ex <= 1e-5 && ey <= 1e-5);
    free(dx), free(dy);
    mmd_free(&c);
}

TEST(set_similarity_mmd_backward_accumulates_and_skips_null)
{
    mmd_case c;
    mmd_alloc(&c, 6, 8, 5, 59);
    vtr_set_mmd_backward(c.dx, c.dy, 1.0f, c.scratch, c.X, c.Y, 6, 8, 5, VTR_SET_MMD_GAMMA);
    float *dx = nn_alloc_floats(6 * 5), *dy = nn_alloc_floats(8 * 5);
    for (int i = 0; i < 6 * 5; i++)
        dx[i] = 0.25f;
    vtr_set_mmd_backward(dx, NULL, 2.0f, c.scratch, c.X, c.Y, 6, 8, 5, VTR_SET_MMD_GAMMA);
    for (int i = 0; i < 6 * 5; i++)
        CHECK(fabsf(dx[i] - (0.25f + 2.0f * c.dx[i])) <= 1e-6f * (1.0f + fabsf(c.dx[i])));
    vtr_set_mmd_backward(NULL, dy, 1.0f, c.scratch, c.X, c.Y, 6, 8, 5, VTR_SET_MMD_GAMMA);
    CHECK(memcmp(dy, c.dy, sizeof(float) * 8 * 5) == 0);
    free(dx), free(dy);
    mmd_free(&c);
}

/* ---- determinism ------------------------------------------------------------------------- */

TEST(set_similarity_same_result_for_any_thread_count)
{
    /* a training batch's shape (128 x 128 sets of 4, 512 x 512 MMD rows), D 64 */
    enum { N = 128, K = 4, D = 64, RUNS = 3 };
    int threads[RUNS] = {1, 2, 5}, saved = omp_get_max_threads();
    chamfer_case c[RUNS];
    mmd_case m[RUNS];
    float *dr[RUNS], loss[RUNS][2];
    for (int r = 0; r < RUNS; r++) {
        omp_set_num_threads(threads[r]);
        chamfer_alloc(&c[r], N, N, K, K, D, 60);
        chamfer_forward(&c[r]);
        chamfer_backward(&c[r], c[r].da, c[r].db);
        mmd_alloc(&m[r], N * K, N * K, D, 61);
        loss[r][0] =
            vtr_set_mmd_forward(m[r].scratch, m[r].X, m[r].Y, N * K, N * K, D, VTR_SET_MMD_GAMMA);
        vtr_set_mmd_backward(m[r].dx, m[r].dy, 1.0f, m[r].scratch, m[r].X, m[r].Y, N * K, N * K, D,
                             VTR_SET_MMD_GAMMA);
        dr[r] = nn_alloc_floats(N * K * D);
        loss[r][1] = vtr_set_diversity_forward(c[r].a, N, K, D);
        vtr_set_diversity_backward(dr[r], 1.0f, c[r].a, N, K, D);
    }
    omp_set_num_threads(saved);
    size_t rows = (size_t)N * K * D;
    for (int r = 1; r < RUNS; r++) {
        nn_check_across_threads("S", c[r].S, c[0].S, (size_t)N * N);
        nn_check_across_threads("da", c[r].da, c[0].da, rows);
        nn_check_across_threads("db", c[r].db, c[0].db, rows);
        nn_check_across_threads("MMD dx", m[r].dx, m[0].dx, rows);
        nn_check_across_threads("MMD dy", m[r].dy, m[0].dy, rows);
        nn_check_across_threads("diversity dr", dr[r], dr[0], rows);
        nn_check_across_threads("losses", loss[r], loss[0], 2);
    }
    for (int r = 0; r < RUNS; r++) {
        chamfer_free(&c[r]);
        mmd_free(&m[r]);
        free(dr[r]);
    }
}

/* ---- parity ------------------------------------------------------------------------------ */

/* The fixtures: tests/fixtures/nn/set_similarity/ (nn_fixture_floats reads tests/fixtures/nn/). */
#define FIXTURE(name) "set_similarity/" name

static void set_parity_check(const char *name, const float *got, size_t n)
{
    nn_parity_check_at(name, got, n, SET_PARITY_TOL);
}

TEST(set_similarity_chamfer_parity)
{
    enum { NA = 5, NB = 6, KA = 4, KB = 3, D = 16 };
    chamfer_case c;
    chamfer_alloc(&c, NA, NB, KA, KB, D, 62);
    float *a = nn_fixture_floats(FIXTURE("chamfer_a"), NA * KA * D);
    float *b = nn_fixture_floats(FIXTURE("chamfer_b"), NB * KB * D);
    float *dS = nn_fixture_floats(FIXTURE("chamfer_dS"), NA * NB);
    memcpy(c.a, a, sizeof(float) * NA * KA * D);
    memcpy(c.b, b, sizeof(float) * NB * KB * D);
    memcpy(c.dS, dS, sizeof(float) * NA * NB);
    chamfer_forward(&c);
    chamfer_backward(&c, c.da, c.db);
    set_parity_check(FIXTURE("chamfer_S"), c.S, NA * NB);
    set_parity_check(FIXTURE("chamfer_da"), c.da, NA * KA * D);
    set_parity_check(FIXTURE("chamfer_db"), c.db, NB * KB * D);
    free(a), free(b), free(dS);
    chamfer_free(&c);
}

TEST(set_similarity_diversity_parity)
{
    enum { N = 5, K = 4, D = 16 };
    float *r = nn_fixture_floats(FIXTURE("diversity_r"), N * K * D);
    float *dloss = nn_fixture_floats(FIXTURE("diversity_dloss"), 1);
    float *dr = nn_alloc_floats(N * K * D);
    float loss = vtr_set_diversity_forward(r, N, K, D);
    vtr_set_diversity_backward(dr, dloss[0], r, N, K, D);
    set_parity_check(FIXTURE("diversity_loss"), &loss, 1);
    set_parity_check(FIXTURE("diversity_dr"), dr, N * K * D);
    free(r), free(dloss), free(dr);
}

TEST(set_similarity_mmd_parity)
{
    enum { NX = 20, NY = 24, D = 16 };
    mmd_case c;
    mmd_alloc(&c, NX, NY, D, 63);
    float *X = nn_fixture_floats(FIXTURE("mmd_x"), NX * D);
    float *Y = nn_fixture_floats(FIXTURE("mmd_y"), NY * D);
    float *dloss = nn_fixture_floats(FIXTURE("mmd_dloss"), 1);
    memcpy(c.X, X, sizeof(float) * NX * D);
    memcpy(c.Y, Y, sizeof(float) * NY * D);
    float loss = vtr_set_mmd_forward(c.scratch, c.X, c.Y, NX, NY, D, VTR_SET_MMD_GAMMA);
    vtr_set_mmd_backward(c.dx, c.dy, dloss[0], c.scratch, c.X, c.Y, NX, NY, D, VTR_SET_MMD_GAMMA);
    set_parity_check(FIXTURE("mmd_loss"), &loss, 1);
    set_parity_check(FIXTURE("mmd_dx"), c.dx, NX * D);
    set_parity_check(FIXTURE("mmd_dy"), c.dy, NY * D);
    free(X), free(Y), free(dloss);
    mmd_free(&c);
}
